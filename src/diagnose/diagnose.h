/* diagnose.h -- the cross-worker (reduce) step: worker summaries in, report out.
 *
 * pt_diagnose() is the one entry point every front end uses (`perftracker analyze`, the
 * triggered workflow, tests): it compares the workers with each other and with expected
 * behaviour, and returns the whole report as a JSON tree in the schema of
 * docs/report-schema.md. It reads only summaries, so the same summaries always give the
 * same report. Above PT_REPORT_FULL_MAX_WORKERS workers the report is the bounded form
 * (report_scale.h): its size grows with workers and nodes, not workers x functions. */
#ifndef PT_DIAGNOSE_DIAGNOSE_H
#define PT_DIAGNOSE_DIAGNOSE_H

#include "summarize/summary.h"
#include "util/json.h"

typedef struct pt_job_input {
    pt_worker_summary *const *workers; /* one per readable worker, any order */
    size_t worker_count;
    int32_t world_size;                /* -1: take it from the summaries */
    const char *const *warnings;       /* input problems to carry into the report */
    size_t warning_count;
    /* Workers that produced nothing (unreadable file, died, never reported). */
    const int32_t *failed_ranks;       /* rank or -1 when unknown */
    const char *const *failed_names;   /* their trace file names, for the workers list */
    size_t failed_count;
    const char *generated_at;          /* ISO-8601; NULL = now (tests pass a fixed value) */
    /* Of the failed workers, [failed_count] each (NULL: none of them): lost mid-round (its
     * process died, its connection dropped, its heartbeats stopped), the last step it was
     * known to complete (-1: not known), and what the round saw (NULL: nothing). A lost
     * rank leads the diagnosis and counts among the missing ranks. */
    const bool *failed_lost;
    const int64_t *failed_lost_step;
    const char *const *failed_reasons;
    /* The bounded form (more than PT_REPORT_FULL_MAX_WORKERS workers; report_scale.h):
     * each part of the workers' full detail, "workers-NNNN" and its document, is handed
     * here to be written beside report.json (0 written, else -1 with err; the report
     * says which were not). NULL: no parts (report.json says so). */
    int (*write_part)(void *ctx, const char *stem, const pt_json *part, pt_error *err);
    void *part_ctx;
    /* Threads the reduce may use (<= 1: the caller's alone). Above one, write_part is
     * called from that many threads at once (for different parts). The report is the same
     * at any count. */
    int threads;
} pt_job_input;

/* Builds the report. Never fails: with no usable worker the verdict explains why. A
 * worker whose summary breaks a rule of pt_summary_check is not analysed: it is counted
 * in job.workers_failed, listed with status "error", and a warning names it and the rule. */
pt_json *pt_diagnose(const pt_job_input *job);

#endif
