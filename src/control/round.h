/* round.h -- one profiling round's results on their way to a report.
 *
 * Whoever collects a round -- the CLI for a triggered round, the coordinator for an
 * automatic one -- feeds each worker's outcome in here as it arrives: a summary (stored
 * at once as <round_dir>/summaries/<worker>.ptsum, so nothing collected is lost if the
 * collector of the round dies later; above PT_ROUND_ARCHIVE_ABOVE workers appended to
 * <round_dir>/summaries/summaries.tar instead, one member <worker>.ptsum each, which
 * `perftracker analyze` reads as it reads the folder) or the reason it has none. pt_round_report then
 * runs the same diagnosis `perftracker analyze` runs (pt_diagnose) and writes
 * <round_dir>/report.json and <round_dir>/PerfDisplay/ (pt_report_write). Hung workers,
 * and every worker a hang report reached, become summaries of their snapshot (hang_step,
 * every thread's stack, their collectives per process group), which the diagnosis
 * (diagnose/hangs.c) matches across workers into "hang" findings; workers that died or
 * never answered become failed ranks with a warning. */
#ifndef PT_CONTROL_ROUND_H
#define PT_CONTROL_ROUND_H

#include "control/protocol.h"
#include "diagnose/report_scale.h"
#include "util/json.h"

typedef struct pt_round pt_round;

/* Rounds of more workers than this keep their summaries in one tar archive (util/tar.h):
 * the size above which the report takes its bounded form too. */
#define PT_ROUND_ARCHIVE_ABOVE PT_REPORT_FULL_MAX_WORKERS
#define PT_ROUND_SUMMARY_ARCHIVE "summaries.tar"

/* <output_dir>/<YYYYmmdd_HHMMSS>[_N]: creates it (and output_dir) and returns its absolute
 * path in dst. 0 or -1. */
int pt_round_make_dir(const char *output_dir, char *dst, size_t cap, pt_error *err);

#define PT_DEFAULT_OUTPUT_DIR "/tmp/perftracker/output"
/* Where rounds go when nobody chose: the vendor's shared PT_DEFAULT_OUTPUT_DIR, or, when
 * this user cannot write there (another user created it), output/ in this user's private
 * runtime directory (pt_runtime_dir: PERFTRACKER_KEY_DIR, /tmp/perftracker-<uid>, or its
 * private fallback when that name was squatted). note receives one sentence saying what
 * was done, for the caller to add how its user chooses the folder ("" when the shared
 * folder is used). The Python collector asks the same
 * (_perftracker._default_output_dir). */
void pt_round_default_output_dir(char *dst, size_t cap, char *note, size_t note_cap);

/* Collects into round_dir (created by pt_round_make_dir); world_size may be -1. */
pt_round *pt_round_new(const char *round_dir, int32_t world_size);
/* The same in memory only (test seam: fuzz/fuzz_coordinator.c, whose every input would
 * otherwise write report folders): summaries are not stored, and pt_round_report renders
 * the report's files (pt_report_render) instead of writing them. round_dir only names the
 * round in messages; nothing is created. */
pt_round *pt_round_new_in_memory(const char *round_dir, int32_t world_size);
/* Threads pt_round_report may use to write a bounded report's parts (default 1: a round
 * rank 0's coordinator runs inside a training process; the CLI gives its CPUs). */
void pt_round_set_threads(pt_round *r, int threads);
/* For a round that makes no report: each summary is written and checked (decoded, every
 * bound) as it comes, then freed, so the round counts it and holds nothing of it
 * (pt_round_report then has no profile to diagnose). A collect-only round of 100,000
 * workers held 290 MB of decoded summaries that nothing read. */
void pt_round_drop_summaries(pt_round *r);
/* Where a worker was when a hang report (or its own stall, or a failed collective) asked:
 * the texts its agent sent (agent.h, collectives.h), NULL where absent. */
typedef struct pt_round_snapshot {
    const char *stack;        /* the training thread's Python stack */
    const char *threads;      /* every thread's stack, one line each */
    const char *collectives;  /* its collective bookkeeping */
    int64_t since_step_ns;    /* time since its last step then */
    int64_t mean_step_ns;     /* its mean step time then (0: unknown) */
} pt_round_snapshot;

/* Decodes and keeps one worker's summary; returns how many steps it profiled. A summary
 * that does not decode is recorded as a failure (PT_FAIL_BAD_SUMMARY) and -1 is returned
 * with err set. snap (may be NULL): where the worker was as its window ended, when a
 * collective had just failed there; its collectives and threads replace the trace's. */
int pt_round_add_summary(pt_round *r, const pt_ctl_worker *w, const char *raw_trace_path, const void *blob,
                         size_t len, const pt_round_snapshot *snap, pt_error *err);
/* A worker with no summary: why (pt_ctl_failure), where it was, and what it said. A
 * snapshot (may be NULL) makes it a worker of the report with that state -- a hang's,
 * or that of a worker that died or exited right after a collective failed -- instead of
 * a warning only. */
void pt_round_add_failure(pt_round *r, const pt_ctl_worker *w, int kind, int64_t steps_done, int64_t stalled_ns,
                          const char *text, const pt_round_snapshot *snap);
/* Adds a warning line to the report (e.g. "the coordinator connection was lost"). */
void pt_round_add_warning(pt_round *r, const char *fmt, ...) PT_PRINTF(2, 3);

/* Whether rank has an outcome (a summary or a failure) yet. */
bool pt_round_has_rank(const pt_round *r, int32_t rank);
/* Whether an outcome for rank may still be added: a rank of the job (0..world_size-1)
 * without one yet. Whoever feeds a round from the network checks this first. */
bool pt_round_rank_open(const pt_round *r, int32_t rank);
int32_t pt_round_world_size(const pt_round *r);
size_t pt_round_summary_count(const pt_round *r);
size_t pt_round_failure_count(const pt_round *r); /* hangs included */
const char *pt_round_dir(const pt_round *r);

/* True when no worker has a profile or a snapshot of where it was, and none was lost (died,
 * hung, exited, never heard from): every collector refused or failed its window, so the
 * round says nothing about the job. why (may be NULL) then says so, with the failures
 * grouped by what they say ("4 of 4 workers: collector error: ... (ranks 0, 1, 2, 3)"). */
bool pt_round_nothing_to_diagnose(const pt_round *r, pt_error *why);
/* The round was cancelled: removes the summaries it stored and, when nothing else is left
 * in them, round_dir/summaries, round_dir/raw_trace and round_dir itself. r may be NULL
 * (nothing was collected). */
void pt_round_discard(pt_round *r, const char *round_dir);

/* Diagnoses and writes the report. Returns the report (caller frees) or NULL with err --
 * also when pt_round_nothing_to_diagnose: err then says why each worker has nothing (a
 * diagnosis of no profile would read as a degraded job), and nothing is written. */
pt_json *pt_round_report(pt_round *r, pt_error *err);
void pt_round_free(pt_round *r);

#endif
