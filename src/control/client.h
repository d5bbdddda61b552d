/* client.h -- the trigger workflow as a library call: what `perftracker --trigger-on
 * --auto-analyze` does between parsing its options and printing.
 *
 * Finds the running job (the job files rank 0 publishes, discover.h; one job is taken,
 * several are told apart by --job or MASTER_ADDR/MASTER_PORT; without job files the
 * environment names the coordinator, as the workers find it), proves it holds the
 * control key, asks for a round, collects every worker's summary or failure into
 * <output_dir>/<timestamp>/ as they arrive, and, with auto_analyze, writes the report
 * there (report.json, PerfDisplay/). If the coordinator goes away first (it lives in
 * rank 0's process), every worker not heard from is recorded by rank as missing. Progress
 * goes to an observer; nothing here prints. */
#ifndef PT_CONTROL_CLIENT_H
#define PT_CONTROL_CLIENT_H

#include "control/auth.h"
#include "control/protocol.h"
#include "util/json.h"

#include <signal.h>

typedef struct pt_trigger_request {
    int32_t wait;              /* steps before the window (default 5) */
    int32_t steps;             /* steps profiled (default 2) */
    pt_ctl_save_raw save_raw;
    const char *output_dir;    /* NULL: /tmp/perftracker/output, or the user's own folder when
                                  that is not writable (pt_round_default_output_dir) */
    bool auto_analyze;         /* false: only collect the summaries */
    int64_t timeout_ms;        /* 0: the coordinator derives one from the step time */
    const char *coordinator;   /* "host:port" overriding everything else, or NULL */
    const char *job;           /* --job ID (`perftracker jobs`), or NULL */
    /* Set (by a signal handler) when the user interrupts: the round is cancelled on every
     * worker and its folder removed. NULL: never. The handler must not restart system
     * calls (no SA_RESTART), so a wait ends at once. */
    volatile sig_atomic_t *interrupted;
} pt_trigger_request;

/* One worker's outcome as it arrives (kind 0 = a summary). */
typedef struct pt_trigger_worker_event {
    int32_t rank;
    const char *host;
    int64_t pid;
    int kind;                  /* 0 or pt_ctl_failure */
    const char *text;
    const char *raw_trace_path;
    int32_t steps;             /* a summary's profiled steps (fewer than asked: cut short) */
} pt_trigger_worker_event;

typedef struct pt_trigger_observer {
    void *ctx;
    /* note: lines on what finding the job ignored (pt_trigger_result.notes) and what was
     * done about the output folder ("" when nothing needed saying) */
    void (*connected)(void *ctx, const char *coordinator, const char *round_dir, const char *note);
    void (*started)(void *ctx, uint32_t round, int64_t start_step, int32_t steps, const pt_ctl_progress *p);
    void (*progress)(void *ctx, const pt_ctl_progress *p);
    void (*worker)(void *ctx, const pt_trigger_worker_event *e);
    /* Workers still finish an earlier round's window: the CLI waits about wait_ms and asks
     * again (text: who, and why). */
    void (*busy)(void *ctx, const char *text, int64_t wait_ms);
    /* Something about who took part that the user must know (security): a connection the
     * coordinator refused for who it was, a rank claimed twice, a worker whose connection
     * is not the job's user's. Also a "security: ..." warning of the report. */
    void (*notice)(void *ctx, const char *text);
} pt_trigger_observer;

typedef struct pt_trigger_result {
    char round_dir[1024];      /* <output_dir>/<timestamp> */
    pt_json *report;           /* NULL without auto_analyze (caller frees) */
    int32_t world_size;
    int32_t summaries;
    int32_t failed;            /* workers without a profile, hangs included */
    int32_t cut_short;         /* summaries of fewer steps than asked */
    bool coordinator_lost;     /* the round ended because the coordinator went away */
    /* Interrupted (pt_trigger_request.interrupted): the call returned -1 and the round
     * folder is gone unless round_dir_kept. */
    bool cancelled;
    bool cancel_confirmed;     /* the coordinator said it cancelled the round */
    uint32_t cancelled_round;  /* 0: no round had started */
    int32_t cancelled_windows; /* workers that dropped a window */
    bool round_dir_kept;       /* something the CLI did not write is in it (a raw trace) */
    char hint[4096];           /* on failure: lines that explain err ('\n'-separated), or "" */
    char notes[4096];          /* lines on what finding the job ignored and why (a squatted
                                  directory, other users' job files), or ""; the observer's
                                  connected() receives them too */
} pt_trigger_result;

/* Runs one round. 0: the round ended and (with auto_analyze) the report is written;
 * -1: err says why (no running job found, cannot reach or authenticate to the
 * coordinator, it refused the round, the user interrupted it (cancelled), no worker had
 * anything to diagnose, or the report could not be written), and hint may add what was
 * found instead. While workers still finish a cancelled round's window the trigger waits
 * for them (observer busy), at most BUSY_WAIT_MAX_S. */
int pt_trigger_run(const pt_trigger_request *req, const pt_trigger_observer *obs, pt_trigger_result *out,
                   pt_error *err);

#endif
