/* diff.h -- what changed between two runs of a job (`perftracker diff BEFORE AFTER`).
 *
 * A run is the per-worker summaries of one profiling window, however they were obtained:
 * summarized from traces, read from summary files, or rebuilt from a report.json (which
 * carries less: pt_diff_run_from_report says what). pt_diff compares two runs and returns
 * the diff document of docs/diff-schema.md: step time, each class's exposed time and the
 * functions whose time per step changed beyond noise, the functions added and removed, the
 * findings each run's diagnosis adds or loses, and a verdict sentence. It reads only the
 * runs, so the same runs always give the same diff. */
#ifndef PT_COMPARE_DIFF_H
#define PT_COMPARE_DIFF_H

#include "summarize/summary.h"
#include "util/json.h"

#include <stdbool.h>

typedef enum pt_run_source {
    PT_RUN_TRACES,     /* summarized from trace files just now */
    PT_RUN_SUMMARIES,  /* read from .ptsum files */
    PT_RUN_REPORT      /* rebuilt from a report.json */
} pt_run_source;

typedef struct pt_diff_run {
    char *label;                   /* what the user named (a path) */
    pt_run_source source;
    pt_worker_summary **workers;   /* the workers that pass pt_summary_check, any order (the
                                      array is the run's) */
    size_t worker_count;
    size_t refused;                /* workers left out by pt_summary_check (each warned) */
    bool owns_workers;             /* the workers are freed with the run (rebuilt from a report) */
    pt_json *report;               /* the run's report: its own (a report.json) or
                                      pt_diagnose's over the workers; gives the findings */
    /* What a report.json does not carry: executions and total time per function, and
     * the functions below its cuts (per class: false when absence does not mean "did not
     * run"). Summaries carry everything. */
    bool counts_known;
    bool complete[PT_CLASS_COUNT];
    char **warnings;               /* input problems ("path: why"), carried into the diff */
    size_t warning_count;
    struct pt_strtab *names;       /* rebuilt workers' function names and groups, each once
                                      (their shared_function_names), freed after them */
} pt_diff_run;

/* A run over worker summaries (borrowed: they must outlive the run). Those that break a
 * rule of pt_summary_check are left out (refused), each with a warning naming the worker
 * and the rule; the others are diagnosed (pt_diagnose) for the run's findings. Input
 * problems may be added to warnings afterwards with pt_diff_run_warn. */
void pt_diff_run_from_summaries(pt_diff_run *run, const char *label, pt_run_source source,
                                pt_worker_summary **workers, size_t count);

/* A run rebuilt from a parsed report.json (report_version 1): per worker, the step time,
 * the per-step breakdown and the bottleneck ratios the report's sections give (a value
 * the report gives only for the job goes to every worker); a rebuilt worker that breaks
 * a rule of pt_summary_check is refused as above. A bounded report's other workers come
 * from its parts beside report_path (NULL: not looked for; a warning says what is
 * compared). Takes ownership of report.
 * 0, or -1 with err set when the document is not a usable report. */
int pt_diff_run_from_report(pt_diff_run *run, const char *label, pt_json *report, const char *report_path,
                            pt_error *err);

void pt_diff_run_warn(pt_diff_run *run, const char *warning);
void pt_diff_run_free(pt_diff_run *run);

/* The diff document (docs/diff-schema.md). generated_at: ISO-8601, NULL = now. */
pt_json *pt_diff(const pt_diff_run *before, const pt_diff_run *after, const char *generated_at);

#endif
