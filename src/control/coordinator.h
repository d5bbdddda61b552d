/* coordinator.h -- the job's meeting point: rank 0's agent hosts it on its own thread.
 *
 * Every worker's agent keeps one connection to it; the CLI connects when the user
 * triggers a round. It runs at most one round at a time: it picks the common start step
 * (the highest step any worker has reached, plus --wait), arms every agent, relays
 * progress and summaries to the CLI, and gives up on a worker by rank (died, hung,
 * unresponsive, never reached the window) so the round always ends. Automatic rounds
 * (requested by agents) it collects itself and writes the report under
 * PERFTRACKER_AUTO_OUTPUT_DIR. The state machine is described in docs/control-plane.md. */
#ifndef PT_CONTROL_COORDINATOR_H
#define PT_CONTROL_COORDINATOR_H

#include "control/auth.h"
#include "control/jobfile.h"
#include "control/net.h"
#include "control/trust.h"

typedef struct pt_coordinator_config {
    char bind_addr[PT_HOST_MAX];   /* see pt_coordinator_config_from_env for the choice */
    uint16_t port;                 /* 0: any free port (tests) */
    int32_t world_size;
    pt_key agent_key;
    pt_key control_key;
    /* Without a configured secret, pt_coordinator_config_from_env makes the job secret the
     * agent key derives from: its text, for rank 0's process to hand to the other ranks
     * ("" with PERFTRACKER_SECRET). The coordinator itself never reads it. */
    char job_secret[PT_JOB_SECRET_HEX + 1];
    /* Workers on this machine connect through the Unix socket pt_coordinator_socket_for
     * names (trust.h) and are accepted by their peer credentials: this user's, else closed.
     * Tests' coordinators have none. */
    bool local_socket;
    /* The agent key derives from the job secret rank 0 publishes in the job's store, which
     * other users of a machine may read: a TCP peer on this machine that offers it as a
     * worker is refused (the job's own workers here have the socket). False with
     * PERFTRACKER_SECRET, a secret the user keeps. */
    bool agent_key_public;
    bool auto_trigger;             /* the job opted in to automatic rounds (rank 0's setting);
                                      otherwise AUTO_REQUEST starts nothing */
    int64_t heartbeat_timeout_ns;  /* PERFTRACKER_HEARTBEAT_TIMEOUT_S, default 30 s */
    int64_t summary_timeout_ns;    /* after a worker's window: PERFTRACKER_SUMMARY_TIMEOUT_S, default 300 s */
    int64_t probe_timeout_ns;      /* hang reports wait this long for stacks: 3 s */
    int64_t handshake_timeout_ns;  /* 10 s */
    int64_t join_grace_ns;         /* a trigger waits this long for workers still joining:
                                      PERFTRACKER_JOIN_GRACE_S, default 10 s */
    /* Automatic rounds. */
    char auto_output_dir[1024];    /* PERFTRACKER_AUTO_OUTPUT_DIR; "" = /tmp/perftracker/output, or
                                      the user's own folder when that is not writable */
    int32_t auto_wait, auto_steps; /* PERFTRACKER_AUTO_WAIT (5), PERFTRACKER_AUTO_STEPS (2) */
    uint8_t auto_save_raw;         /* PERFTRACKER_AUTO_SAVE_RAW none|master|all (none) */
    int64_t auto_interval_ns;      /* at most one automatic round per this (PERFTRACKER_AUTO_INTERVAL_S) */
    bool auto_in_memory;           /* test seam (fuzz_coordinator): automatic rounds are collected
                                      and reported in memory, nothing is written
                                      (pt_round_new_in_memory); false everywhere else */
    /* A job's coordinator (pt_coordinator_config_from_env) publishes a job file once it
     * listens, so the CLI finds it, and removes that file and the control key file when it
     * stops; tests' coordinators publish nothing. */
    bool publish;
    pt_job_record job;             /* what the job file says (port and address filled at start) */
    pt_ctl_log log;
} pt_coordinator_config;

typedef struct pt_coordinator pt_coordinator;

/* What tests and the rank-0 log want to know; a consistent snapshot. */
typedef struct pt_coordinator_stats {
    int32_t agents;            /* joined and connected now (directly or through a relay) */
    int32_t relays;            /* node relays connected now (relay.h) */
    uint32_t rounds_finished;
    uint32_t auto_rounds;
    uint32_t refused;          /* handshakes that failed authentication */
    uint32_t refused_local;    /* connections refused for who they are: another user's process
                                  on the Unix socket, a TCP worker on this machine */
    uint32_t rank_conflicts;   /* JOINs for a rank another connection holds */
    bool round_running;        /* as of the last tick (every 50 ms) */
    size_t unsent_bytes;       /* queued for CLIs, as of the last tick */
    uint64_t heartbeats;       /* workers' heartbeats taken so far, direct or merged by relays */
    uint64_t relay_frames;     /* frames read from relays: about one per node per heartbeat
                                  period while idle, as relays merge their ranks' heartbeats */
    uint64_t peer_checks;      /* peers whose timers a tick checked, so far: each peer about once
                                  a second (a slice per tick), not once per tick */
    char last_report_dir[1024]; /* the last automatic round's directory, "" when none */
} pt_coordinator_stats;

void pt_coordinator_config_defaults(pt_coordinator_config *cfg);
/* Rank 0's configuration from the environment: the keys (a configured secret's, or a new
 * job secret and a new control key; nothing is written until the coordinator listens).
 * 0 or -1. */
int pt_coordinator_config_from_env(pt_coordinator_config *cfg, const pt_job_env *env, pt_error *err);

/* Binds and starts the coordinator's thread. NULL with err (e.g. the port is taken). */
pt_coordinator *pt_coordinator_start(const pt_coordinator_config *cfg, pt_error *err);
uint16_t pt_coordinator_port(const pt_coordinator *c);
void pt_coordinator_stats_get(pt_coordinator *c, pt_coordinator_stats *out);
/* Before stopping at the process's exit: waits (at most timeout_ns) while a round is
 * running and its results are still on their way to the CLI, so that the workers
 * finishing their windows as the job ends are not lost with rank 0's process. */
void pt_coordinator_drain(pt_coordinator *c, int64_t timeout_ns);
/* Stops the thread, closes every connection and removes the published files. NULL is fine. */
void pt_coordinator_stop(pt_coordinator *c);

/* Test seam (fuzz/fuzz_coordinator.c): a coordinator with no socket of its own and no
 * thread. The caller hands it one end of connected sockets as peers that have already
 * authenticated -- a worker's agent, or the CLI (control) -- and turns its loop by hand at
 * times it chooses, so the state machine after authentication runs on whatever frames
 * the other ends write. Stopped with pt_coordinator_stop. */
pt_coordinator *pt_coordinator_create_detached(const pt_coordinator_config *cfg, pt_error *err);
int pt_coordinator_adopt(pt_coordinator *c, int fd, bool control, int64_t now, pt_error *err);
/* One pass of the loop at `now` (pt_now_ns's clock; never earlier than the last): reads
 * and handles what the peers sent, and runs the tick when one is due. Never blocks. */
void pt_coordinator_turn(pt_coordinator *c, int64_t now);

#endif
