/* agent_instance.h -- the agent as an object, behind agent.h's process-wide API.
 *
 * A training process has one agent (agent.h). Tests and benchmarks run many in one
 * process -- 1024 simulated workers are 1024 of these, each with its own thread and
 * connection, speaking the real protocol -- so the state lives in a pt_agent and the
 * settings come from a config instead of the environment. */
#ifndef PT_CONTROL_AGENT_INSTANCE_H
#define PT_CONTROL_AGENT_INSTANCE_H

#include "control/agent.h"
#include "control/auth.h"
#include "control/net.h"
#include "control/trust.h"

typedef struct pt_agent_config {
    int32_t rank, local_rank, world_size, node_rank;
    int64_t pid;
    char host[PT_HOST_MAX];
    char coordinator_host[PT_HOST_MAX];
    uint16_t coordinator_port;
    pt_key key;                  /* the agent key, unless key_pending */
    bool key_pending;            /* no key yet: wait for pt_agent_offer_job_secret before connecting */
    int64_t heartbeat_ns;        /* PERFTRACKER_HEARTBEAT_MS, default pt_agent_default_heartbeat_ns */
    int64_t poll_ns;             /* how often the status hook is sampled, default 100 ms */
    int64_t hang_floor_ns;       /* PERFTRACKER_HANG_MIN_S, default 10 s */
    double hang_factor;          /* 5: no step for 5x the mean step time */
    bool auto_trigger;
    double auto_threshold;       /* PERFTRACKER_AUTO_THRESHOLD_PCT / 100, default 0.05 */
    int64_t auto_interval_ns;    /* PERFTRACKER_AUTO_INTERVAL_S, default 600 s */
    size_t thread_stack_bytes;   /* 0: 256 KiB */
    pt_ctl_log log;
} pt_agent_config;

typedef struct pt_agent pt_agent;

/* Defaults for everything but identity, address and key. */
void pt_agent_config_defaults(pt_agent_config *cfg);

/* The heartbeat period when PERFTRACKER_HEARTBEAT_MS is not set: 1 s, or 50 us per worker
 * in larger jobs (rank 0 hears at most 20,000 heartbeats a second), at most 5 s. */
int64_t pt_agent_default_heartbeat_ns(int32_t world_size);
/* Fills cfg from the environment (job_env.h + PERFTRACKER_* knobs); without a configured
 * secret the key is left pending (rank 0 fills it from the job secret it makes). 0, 1
 * (not a job) or -1. */
int pt_agent_config_from_env(pt_agent_config *cfg, pt_job_env *env, pt_error *err);
/* Whether the job's coordinator runs on this machine (this is rank 0, every rank is here,
 * or MASTER_ADDR is one of this machine's addresses): then this worker connects through
 * the coordinator's Unix socket (trust.h) and needs no key. */
bool pt_agent_coordinator_is_here(const pt_job_env *env);
/* Whether every rank of the job runs on rank 0's machine (a single-node job, or a
 * loopback MASTER_ADDR): then no rank needs the job secret, and rank 0 publishes none. */
bool pt_agent_job_on_one_machine(const pt_job_env *env);

/* Starts the agent thread (it connects, and reconnects, by itself). NULL with err. */
pt_agent *pt_agent_create(const pt_agent_config *cfg, const pt_agent_hooks *hooks, pt_error *err);
void pt_agent_finish_window(pt_agent *a, const void *summary, size_t len, const char *raw_trace_path,
                            int status, const char *why);
/* The job secret's text from rank 0 (agent.h): the agent derives its key and connects.
 * 0, or -1 when it is not 64 hex digits. Any thread. */
int pt_agent_offer_job_secret(pt_agent *a, const char *hex, size_t len, pt_error *err);
bool pt_agent_waits_for_job_secret(pt_agent *a);
/* The same agent with no thread of its own, for a loop that drives many (the simulated
 * fleet of 100k workers: a thread each would not fit a machine). pt_agent_fd says which
 * socket to watch now (-1: none) and for what; pt_agent_drive hands it what that socket
 * reported (0 for nothing) and does whatever is due, never blocking but for a connect
 * (bounded). Call it at least every poll_ns. One thread drives an agent; the hooks are
 * called from it, and pt_agent_finish_window may be too. */
pt_agent *pt_agent_create_driven(const pt_agent_config *cfg, const pt_agent_hooks *hooks, pt_error *err);
int pt_agent_fd(const pt_agent *a, short *events);
void pt_agent_drive(pt_agent *a, short revents, int64_t now);
/* Stops the thread; say_bye tells the coordinator the process is leaving on purpose. */
void pt_agent_destroy(pt_agent *a, bool say_bye);

/* For tests: whether the agent has completed the handshake, and how often it was refused. */
bool pt_agent_is_joined(pt_agent *a);
int pt_agent_refusals(pt_agent *a);

#endif
