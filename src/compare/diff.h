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

/* A function of a run rebuilt from a report.json, kept once for the whole run: a report
 * gives most figures for the job (one bottleneck ratio for every worker) and a few for
 * named workers, and copying the job's figure into every worker made W workers x M
 * functions records out of a report that lists each function once. */
typedef struct pt_run_function {
    pt_class cls;
    const char *name;              /* in the run's names */
    const char *group;             /* communication group (in the run's names), or NULL */
    double job_ratio;              /* > 0: the bottleneck ratio of every worker that ran the
                                      class and is not among the records (pt_run_job_exposed_ns) */
    size_t first, count;           /* its records: the run's records[first .. first + count) */
} pt_run_function;

/* A worker a report names for a function, with its own figure. */
typedef struct pt_run_record {
    uint32_t worker;               /* index in the run's workers */
    int64_t exposed_ns;            /* its exposed time; PT_RUN_NO_RECORD: the report names it
                                      without a usable ratio, so it has no record and the job's
                                      ratio is not its either */
} pt_run_record;

#define PT_RUN_NO_RECORD INT64_C(-1)

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
    size_t warning_count, warning_cap;
    /* Rebuilt from a report: its functions, each once, and the records of the workers it
     * names (their workers hold no functions). Summaries: none (their workers hold them). */
    pt_run_function *functions;
    size_t function_count;
    pt_run_record *records;
    size_t record_count;
    struct pt_strtab *names;       /* the functions' names and groups, each once */
} pt_diff_run;

/* A run over worker summaries (borrowed: they must outlive the run). Those that break a
 * rule of pt_summary_check are left out (refused), each with a warning naming the worker
 * and the rule; the others are diagnosed (pt_diagnose) for the run's findings. Input
 * problems may be added to warnings afterwards with pt_diff_run_warn. */
void pt_diff_run_from_summaries(pt_diff_run *run, const char *label, pt_run_source source,
                                pt_worker_summary **workers, size_t count);

/* A run rebuilt from a parsed report.json (report_version 1): per worker, the step time
 * and the per-step breakdown; a rebuilt worker that breaks a rule of pt_summary_check is
 * refused as above. The bottleneck ratios the report's sections give are the run's
 * functions, each once (a value the report gives only for the job is every worker's that
 * ran the class), as many as the report's size can ask for (run.c; those left out are
 * warned about). A bounded report's other workers come from its parts beside report_path
 * (NULL: not looked for; a warning says what is compared). Takes ownership of report.
 * 0, or -1 with err set when the document is not a usable report. */
int pt_diff_run_from_report(pt_diff_run *run, const char *label, pt_json *report, const char *report_path,
                            pt_error *err);

/* Worker values a report's job-wide ratios may ask of the comparison per byte of the
 * report (and of its parts read): a job-wide ratio is a value for every worker that ran
 * its class, about 0.1 us of comparison each. The reports perftracker writes ask for one
 * per 40 bytes or fewer (4096 workers of one step each). Past this, functions are left
 * out (pt_diff_run_from_report). */
#define PT_REPORT_JOB_VALUES_PER_BYTE 2

/* The exposed time a report's job-wide figure gives worker s of the run (f->job_ratio of
 * s's window), or PT_RUN_NO_RECORD where it gives none: no job ratio, or s did not run
 * f's class (no exposed time in it). A worker among f's records has its own instead. */
int64_t pt_run_job_exposed_ns(const pt_run_function *f, const pt_worker_summary *s);

void pt_diff_run_warn(pt_diff_run *run, const char *warning);
void pt_diff_run_free(pt_diff_run *run);

/* The median of n values of which count are in values (reordered) and the other n - count
 * equal c, as pt_median gives it over all n, in time linear in count: the comparison takes
 * a function's medians over the workers that have it, every other worker's value being 0.
 * Values must be finite. */
double pt_median_with(double *values, size_t count, size_t n, double c);

/* The diff document (docs/diff-schema.md). generated_at: ISO-8601, NULL = now. */
pt_json *pt_diff(const pt_diff_run *before, const pt_diff_run *after, const char *generated_at);

#endif
