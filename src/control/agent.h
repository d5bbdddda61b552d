/* agent.h -- the contract between the collector (inside every training process) and the
 * control plane (src/control). The collector fills pt_agent_hooks and calls
 * pt_agent_start() once; the agent runs on its own background thread, talks to the
 * job's coordinator (hosted by rank 0's agent), arms profiling windows through the hooks
 * and sends the finished window's summary back. Nothing here runs on the training thread:
 * the hooks are called from the agent thread, pt_agent_window_done from the collector's
 * writer thread. The design is in docs/control-plane.md.
 *
 * Steps are counted by the collector's step() calls: after the Nth call, steps_done == N
 * and "step N" is the interval up to the next call. A window of `steps` steps starting at
 * start_step begins at the step() call that makes steps_done == start_step (or the first
 * one after that, if the agent armed it late) and ends `steps` step() calls later.
 * Times are pt_now_ns() (CLOCK_MONOTONIC) nanoseconds. */
#ifndef PT_CONTROL_AGENT_H
#define PT_CONTROL_AGENT_H

#include "util/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A hang report's view of one worker, each part NUL-terminated in its buffer:
 *   stack        the training thread's Python stack, frames joined with '|';
 *   threads      every Python thread, one "thread<TAB>name<TAB>ident<TAB>training(0/1)<TAB>stack"
 *                line each;
 *   collectives  the collective bookkeeping (src/collect/collectives.h's text). */
typedef struct pt_agent_snapshot {
    char *stack;
    size_t stack_cap;
    char *threads;
    size_t threads_cap;
    char *collectives;
    size_t collectives_cap;
} pt_agent_snapshot;

typedef struct pt_agent_hooks {
    void *ctx;
    /* Arm a profiling window: profile `steps` steps starting at the first step >= start_step.
     * raw_trace_path: where the worker writes its raw trace ("" = a private temp file, deleted
     * after summarizing). Called from the agent thread; must not block. 0 or -1. */
    int (*arm_window)(void *ctx, int64_t start_step, int32_t steps, const char *raw_trace_path);
    /* Snapshot for heartbeats, hang detection and the automatic trigger. Lock-free reads.
     * last_step_end_ns: pt_now_ns() of the latest step() call (0 before the first);
     * mean_step_ns: the collector's running mean step duration (0 while unknown). */
    void (*status)(void *ctx, int64_t *steps_done, int64_t *last_step_end_ns, int64_t *mean_step_ns);
    /* Best effort: where the worker is, for a hang report (below). May be NULL. Called
     * from the agent thread when the worker looks hung, a hang report probes it, or a
     * collective failed; it may take up to a few seconds (it waits for the GIL). */
    void (*snapshot)(void *ctx, pt_agent_snapshot *out);
    /* Whether a collective raised since the last call (lock-free). May be NULL. */
    bool (*collective_failed)(void *ctx);
    /* The round that armed the window was cancelled: drop the window (a plan not yet open
     * at once, an open one at the next step) and report it through pt_agent_window_done
     * with a failure status, so the agent knows the collector is free. Called from the
     * agent thread; must not block. May be NULL (the window then runs to its end, and its
     * summary is dropped). */
    void (*cancel_window)(void *ctx);
} pt_agent_hooks;

/* Starts the agent's background thread if the environment describes a distributed job
 * (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, LOCAL_RANK, node rank) or PERFTRACKER_* settings;
 * returns 0 (started), 1 (not a job / disabled: nothing started), -1 (failed; err says why).
 * The hooks struct is copied. PERFTRACKER_AGENT=0 disables the agent. */
int pt_agent_start(const pt_agent_hooks *hooks, pt_error *err);

/* Opt in to the automatic trigger (the paper's: mean of the last 50 steps >5% above the
 * recent best, or no step for 5x the mean step time). Call before pt_agent_start;
 * PerfTracker(auto_trigger=True) maps to enabled=1. PERFTRACKER_AUTO_TRIGGER=1 in the
 * environment enables it too, PERFTRACKER_AUTO_TRIGGER=0 disables it whatever this says. */
void pt_agent_set_auto_trigger(int enabled);

/* The collector calls this from its own writer thread (never the training thread) when a
 * window is finished: the encoded summary (pt_summary_encode bytes) and the raw trace path
 * ("" when deleted). status 0 = ok, else a failure the master should report, and why says
 * what failed ("cannot write /x/y.ptrace: No space left on device"; NULL or "" when
 * unknown). The bytes are copied; the call never blocks on the network. */
void pt_agent_window_done(const void *summary, size_t len, const char *raw_trace_path, int status, const char *why);

/* The job secret (auth.h), between the agent and the Python side that carries it through
 * the job's torch.distributed store. Called from the training thread; none blocks.
 *   pt_agent_job_secret_to_publish  rank 0: true with the secret's text in hex (cap > 64)
 *                                   until pt_agent_job_secret_published says it is in the
 *                                   store (then the process forgets it); false elsewhere,
 *                                   with a configured PERFTRACKER_SECRET, and in a job on
 *                                   one machine (its ranks use the coordinator's socket).
 *   pt_agent_needs_job_secret       another rank whose agent waits for it (it does not
 *                                   connect until then).
 *   pt_agent_set_job_secret         hands it over: 0, or -1 when it is not 64 hex digits
 *                                   or no agent runs (err says which).
 *   pt_agent_abandon                rank 0 found the store's secret changed or planted by
 *                                   someone else: says so loudly and stops this process's
 *                                   agent, relay and coordinator at once (no drain), so the
 *                                   job is not profiled with workers nobody can vouch for.
 *                                   The training goes on. */
bool pt_agent_job_secret_to_publish(char *hex, size_t cap);
void pt_agent_job_secret_published(void);
bool pt_agent_needs_job_secret(void);
int pt_agent_set_job_secret(const char *hex, size_t len, pt_error *err);
void pt_agent_abandon(const char *why);

/* Stops the thread and closes the connection (idempotent; also safe if never started). */
void pt_agent_stop(void);

#endif
