/* collector.h -- the collector's core, free of Python: step counting, arming windows,
 * the window lifecycle and the writer thread. The Python extension (module.c) drives it
 * from step() and adds what needs the interpreter (the profile hook, names, identity);
 * tests drive it directly (tests/collector/tsan_collector.c).
 *
 * Threads:
 *   training thread  pt_collector_step() on every step; opens and closes windows;
 *   agent thread     pt_collector_arm() and pt_collector_status() (the pt_agent hooks);
 *   writer thread    writes the raw trace, summarizes it in a separate process, reports.
 * step() reads one atomic flag ("attention") when nothing is armed: no lock, no syscall
 * (the clock is the vDSO's), no allocation. Arming sets the flag under a mutex that the
 * training thread takes only when the flag is up. One window is in flight at a time. */
#ifndef PT_COLLECT_COLLECTOR_H
#define PT_COLLECT_COLLECTOR_H

#include "collect/nvml.h"
#include "collect/window.h"

#include <limits.h>
#include <stdbool.h>

typedef struct pt_collect_config {
    pt_window_limits limits;
    int32_t sample_period_us;      /* 0 disables the hardware sampler */
    int32_t gpm_period_ms;
    bool gpu;                      /* try CUPTI when a window opens */
    const char *const *cupti_libs; /* NULL-terminated candidates, or NULL */
    bool count_api_calls;          /* count every CUDA API call, not only the kept ones */
    char gpu_uuid[96];             /* NVML device to sample ("" = by gpu_index) */
    int32_t gpu_index;             /* -1: none */
    char cli_path[PATH_MAX];       /* the perftracker binary that summarizes ("" = none) */
    char summary_dir[PATH_MAX];    /* local mode: write <name>.ptsum here ("" = don't) */
    /* Called on the writer thread when a window is finished (the agent's
     * pt_agent_window_done); NULL in local mode. */
    void (*window_done)(const void *summary, size_t len, const char *raw_trace_path, int status, const char *why);
} pt_collect_config;

typedef enum pt_step_action {
    PT_STEP_NONE,          /* nothing to do (the idle path) */
    PT_STEP_BEGIN,         /* a window opened at this step: start recording */
    PT_STEP_MARK,          /* a step boundary inside the window */
    PT_STEP_END            /* the window's last step ended: stop recording */
} pt_step_action;

typedef struct pt_collector_stats {
    int64_t steps_done;
    int64_t windows_done;
    int64_t windows_failed;
    int32_t last_status;           /* 0 ok */
    char last_trace[PATH_MAX];     /* raw trace of the last window ("" = deleted) */
    char last_summary[PATH_MAX];   /* local summary file of the last window */
    char last_error[512];
    uint64_t last_dropped;
    uint64_t last_cpu_records;
    uint64_t last_gpu_records;
    uint64_t last_samples;
    int32_t last_sample_period_us;
    double last_sampler_cpu_pct;   /* the sampler thread's CPU time / its wall time, % of a core */
    char last_sampler_reads[256];  /* mean cost and count of each kind of sampler read */
    uint64_t last_api_recorded;    /* CUDA API calls recorded / only counted */
    uint64_t last_api_counted;
    bool busy;                     /* a window is armed, open or being written */
} pt_collector_stats;

/* Starts the writer thread. Idempotent (later calls keep the first config). */
int pt_collector_init(const pt_collect_config *cfg, pt_error *err);
/* Waits for the window being written, then stops the writer thread. */
void pt_collector_shutdown(void);

/* Any thread. 0, or -1 when a window is already armed, open or being written. */
int pt_collector_arm(int64_t start_step, int32_t steps, const char *raw_trace_path);
void pt_collector_status(int64_t *steps_done, int64_t *last_step_end_ns, int64_t *mean_step_ns);
void pt_collector_stats_get(pt_collector_stats *out);
/* Training thread: drops a window that is armed but not yet open (the program is
 * ending), so waiting for idle does not wait for a step that will never come. */
void pt_collector_cancel_pending(void);
/* Any thread: whoever armed the window no longer wants it (its round was cancelled). A
 * plan the training thread has not seen is dropped now; a plan waiting for its start step,
 * or an open window, at the next step() (the open window is freed unwritten). Either way
 * window_done then reports a failure ("the round was cancelled"), so the caller knows the
 * collector is free. A window already being written is left to finish. */
void pt_collector_cancel(void);
/* Waits until no window is armed, open or being written; false on timeout. */
bool pt_collector_wait_idle(double timeout_s);

/* Training thread: count a step. On PT_STEP_BEGIN the window is open
 * (pt_collector_window()) and the caller starts its recorders; on PT_STEP_END the caller
 * stops them, closes its thread logs, then calls pt_collector_end_window().
 * Step numbers are util/step_number.h's (source, count) pairs: step() numbers the step
 * one past the last; step_to() gives it the number its step source counted (autostep.py's
 * sources, which count from the process's start so that every rank numbers an iteration
 * alike), never less than one past the last. A window ends early at a step of another
 * source than its first step's, with a warning; a window still waiting for its start
 * step keeps the steps it had left when the source changes (pt_step_retarget). */
pt_step_action pt_collector_step(void);
pt_step_action pt_collector_step_to(int64_t number);
/* Training thread: the step count becomes number (greater than it is now) without a step:
 * a better step source took over and counts from there (the script's own step()). */
void pt_collector_renumber(int64_t number);
pt_window *pt_collector_window(void);
/* The time of the latest step() (the window's end on PT_STEP_END). */
int64_t pt_collector_last_step_ns(void);
/* Starts the hardware sampler and, when CUDA is in use, CUPTI, for the window just
 * opened (training thread, right after PT_STEP_BEGIN). Failures only narrow what is
 * recorded; they are logged once and noted in the trace. */
void pt_collector_start_sources(bool cuda_in_use);
/* Sets where finished windows are reported (the agent, once it started). */
void pt_collector_set_window_done(void (*fn)(const void *, size_t, const char *, int, const char *));
/* Hands the closed window to the writer thread. */
void pt_collector_end_window(void);
/* In a child process after fork(): forget the parent's collector (its threads do not
 * exist here, its locks may be held). The child starts idle and may init again. */
void pt_collector_after_fork_child(void);
/* Abandons the open window without writing it (the caller failed to start recording). */
void pt_collector_abort_window(const char *why);

#endif
