/* analysis.h -- shared state of one cross-worker analysis, used by every report section
 * and by the findings.
 *
 * Workers are sorted by rank. Every function any worker reported becomes one row
 * (class + name): a column of the function store (summarize/function_store.h), read by
 * worker with pt_row_function; a worker without the row counts as 0, which is accurate
 * to within the summarizer's keep threshold (a function is dropped from a summary only
 * when it is negligible there). Workers decoded with shared names are in the decoder's
 * store already; the others' records are copied into the analysis's own.
 *
 * Comparisons are robust: medians and the MAD (scaled to a normal sigma), with absolute
 * floors, so one slow worker among thousands stands out and jitter does not. Every
 * median is a quickselect, so the whole analysis stays linear in the number of workers. */
#ifndef PT_DIAGNOSE_ANALYSIS_H
#define PT_DIAGNOSE_ANALYSIS_H

#include "diagnose/diagnose.h"
#include "diagnose/report_scale.h"
#include "summarize/function_store.h"
#include "util/strtab.h"

#include <stdbool.h>

typedef struct pt_fn_row {
    pt_class cls;
    const char *name;             /* owned by the store */
    const char *group;            /* communication group, or NULL */
    const pt_fn_column *column;   /* every worker's record */
    double max_ratio;             /* largest exposed/window over workers */
} pt_fn_row;

typedef struct pt_analysis {
    pt_worker_summary **workers;  /* sorted by rank */
    size_t n;
    double *steps;                /* profiled steps per worker (>= 1) */
    double *step_ms;              /* median step duration per worker */
    double *window_ns;            /* the workers' windows, beside each other: a walk over rows reads them */
    bool *has_gpu;                /* worker recorded GPU activity */
    size_t gpu_workers;
    double median_step_ms;
    pt_fn_row *rows;
    size_t row_count;
    pt_strtab row_index;          /* class byte + name -> row */
    pt_fn_store *fn_store;        /* the rows' columns */
    bool own_store;               /* made for this analysis (no worker was in one) */
    uint32_t *slot;               /* [worker] its slot in fn_store */
    bool *added;                  /* [worker] copied there by this analysis */
    /* Steps compared one by one: the first aligned_steps of every worker (0 when some
     * worker has fewer than two), and function_steps of them when every worker's
     * functions carry per-step values too (0 otherwise: older summaries, long windows). */
    size_t aligned_steps;
    size_t function_steps;
    double *scratch;              /* 2n doubles, for pt_spread_of */
    double *scratch2;             /* n doubles */
    /* The bounded form of a large job's report (report_scale.h); NULL: the full form. */
    pt_report_scale *scale;
    int threads;                  /* for its loops over workers and parts (pt_parallel_for);
                                     <= 1: the caller's thread alone */
} pt_analysis;

/* Sets of classes, as bits; work is every class but communication. */
#define PT_CLASS_BIT(c) (1u << (c))
#define PT_WORK_CLASSES (PT_CLASS_BIT(PT_CLASS_COMPUTE) | PT_CLASS_BIT(PT_CLASS_MEMORY) | \
                         PT_CLASS_BIT(PT_CLASS_RUNTIME) | PT_CLASS_BIT(PT_CLASS_PYTHON))

/* The parts of a step: the classes' exposed time (0..PT_CLASS_COUNT-1), idle, duration. */
enum { PT_STEP_IDLE = PT_CLASS_COUNT, PT_STEP_DURATION, PT_STEP_PART_COUNT };
double pt_step_part_ms(const pt_step_summary *step, int part);
/* Standard deviation of one part across a worker's steps (ms); NAN below two steps. */
double pt_step_sd_ms(const pt_worker_summary *s, int part);
/* Typical step-to-step variation of a part: the median over workers of pt_step_sd_ms, or
 * INFINITY when fewer than half the workers have two steps. */
double pt_step_noise_ms(pt_worker_summary *const *workers, size_t n, int part);

void pt_analysis_init(pt_analysis *a, pt_worker_summary *const *workers, size_t n);
/* The same for workers in any order: they are sorted by rank (then name) first. */
void pt_analysis_init_by_rank(pt_analysis *a, pt_worker_summary *const *workers, size_t n);
void pt_analysis_free(pt_analysis *a);

/* Row of (cls, name), or NULL. */
const pt_fn_row *pt_analysis_row(const pt_analysis *a, pt_class cls, const char *name);
/* Worker w's window in ms (its window_ns, the one copy kept). */
static inline double pt_window_ms(const pt_analysis *a, size_t w)
{
    return a->window_ns[w] / 1e6;
}

/* Worker w's record of a row (read into cell, its per-step values left out), or NULL
 * where w has none. */
const pt_function_summary *pt_row_function(const pt_analysis *a, const pt_fn_row *row, size_t w,
                                           pt_function_summary *cell);

/* Per-worker values of a row: exposed ms per step, exposed/window ("bottleneck ratio"),
 * total/window, median ms per execution (0 where absent or not executed). */
void pt_row_exposed_ms(const pt_analysis *a, const pt_fn_row *row, double *out);
void pt_row_exposed_ratio(const pt_analysis *a, const pt_fn_row *row, double *out);
void pt_row_total_ratio(const pt_analysis *a, const pt_fn_row *row, double *out);
void pt_row_median_ms(const pt_analysis *a, const pt_fn_row *row, double *out);
/* Per-worker exposed ms per step of a whole class. */
void pt_class_exposed_ms(const pt_analysis *a, pt_class cls, double *out);
/* How many of worker w's median steps its window holds: its window's totals over this
 * are per median step, so its classes and idle time add up to its step time (step_ms,
 * the median profiled step -- the one definition of a step's time, in the report and in
 * `perftracker diff`). */
double pt_median_steps_in_window(const pt_analysis *a, size_t w);
/* Calls per step of a row, per worker (0 where absent). */
void pt_row_calls_per_step(const pt_analysis *a, const pt_fn_row *row, double *out);
/* Step by step, out[w * steps + s]: a row's exposed ms (steps = function_steps), a
 * class's (steps = aligned_steps), and the time a worker waited: exposed communication
 * plus idle (steps = aligned_steps). */
void pt_row_step_ms(const pt_analysis *a, const pt_fn_row *row, double *out);
void pt_class_step_ms(const pt_analysis *a, pt_class cls, double *out);
void pt_waiting_step_ms(const pt_analysis *a, double *out);
/* Per-worker waiting ms per step (exposed communication plus idle). */
void pt_waiting_ms(const pt_analysis *a, double *out);

/* Median of n values without reordering them (copies into scratch of n). */
double pt_median_of(const double *values, size_t n, double *scratch);

/* Robust spread: median and MAD scaled to sigma (1.4826 * MAD). */
typedef struct pt_spread {
    double median;
    double sigma;
} pt_spread;

pt_spread pt_spread_of(const double *values, size_t n, double *scratch /* 2n */);

/* Marks values more than max(k * sigma, floor) above the median. Returns how many. */
size_t pt_high_outliers(const double *values, size_t n, pt_spread s, double k, double floor, bool *flags);

/* Rankings of functions (the sections' "top N"): the rows a scorer keeps, highest score
 * first, ties by class and then name, so the order is total and never depends on the
 * order the workers reported them in. A scorer says false to leave a row out; values is
 * n doubles of scratch for it. Returns *count rows; free() them. */
typedef struct pt_ranked_row {
    const pt_fn_row *row;
    double score;
} pt_ranked_row;
typedef bool (*pt_row_scorer)(const pt_analysis *a, const pt_fn_row *row, const void *ctx, double *values,
                              double *score);
pt_ranked_row *pt_rank_rows(const pt_analysis *a, pt_row_scorer scorer, const void *ctx, size_t *count);

/* {worker name: value} for every value above threshold, largest first (the seed's
 * order for "abnormal_workers"). In the bounded form the first pt_listed_count of them,
 * the cut recorded under section/key/field (report_scale.c). */
pt_json *pt_workers_above(const pt_analysis *a, const double *values, double threshold, const char *section,
                          const char *key, const char *field);

/* A worker a section lists, with how far it is from the typical worker (the order of a
 * cut list: furthest first, then rank order) and the value it shows. */
typedef struct pt_ranked_worker {
    size_t worker;
    double distance;
    double value;
} pt_ranked_worker;
void pt_sort_ranked_workers(pt_ranked_worker *list, size_t n);

/* The bounded form's two rules for the sections (no-ops in the full form). How many of
 * count entries a per-worker map or list keeps (a cut is recorded in scale.truncated);
 * and worker w is one the report is about: it gets full detail in "workers" (while fewer
 * than PT_REPORT_FULL_DETAIL_MAX have it; the strongest reason is kept). */
size_t pt_listed_count(const pt_analysis *a, const char *section, const char *key, const char *field, size_t count);
void pt_keep_worker(const pt_analysis *a, size_t w, pt_detail why);
static inline bool pt_bounded(const pt_analysis *a) { return a->scale != NULL; }

/* Worker display name (trace file name) and rank. */
static inline const char *pt_worker_name(const pt_analysis *a, size_t w) { return a->workers[w]->name; }
static inline int32_t pt_worker_rank(const pt_analysis *a, size_t w) { return a->workers[w]->rank; }

/* The section builders (one file each). */
pt_json *pt_section_gpu_compute(const pt_analysis *a);
pt_json *pt_section_gpu_memory(const pt_analysis *a);
pt_json *pt_section_communication(const pt_analysis *a);
pt_json *pt_section_cuda_runtime(const pt_analysis *a);
pt_json *pt_section_python(const pt_analysis *a);
pt_json *pt_section_hardware(const pt_analysis *a, const bool *highlight);
/* Adds {metric: {avg, min, max}} of one worker under its name (none without samples). */
void pt_hardware_worker(const pt_worker_summary *s, pt_json *workers);

/* What the analysed workers are of the job, which decides what the findings may say
 * (diagnose.c finds it out from the inputs). */
typedef struct pt_job_gaps {
    bool mixed;                /* the inputs are not one job: no finding compares them */
    bool ranks_lost;           /* ranks were lost mid-round: their finding leads */
    const int32_t *missing;    /* the job's ranks not analysed, in rank order: the first ... */
    size_t missing_listed;
    int64_t missing_count;     /* ... of this many (lost ones included) */
    const char *missing_why;   /* why, as a parenthesis ("not given to this analysis") */
    const char *inputs;        /* diagnosis.inputs: "complete", "partial" or "mixed" */
    const char *problem;       /* diagnosis.input_problem: what is wrong with them, or NULL */
} pt_job_gaps;

/* Findings (findings.c): the verdict and the sorted findings; marks the workers each
 * finding names in status_out (0 normal, 1 slow, 2 hang). */
pt_json *pt_build_diagnosis(const pt_analysis *a, int *status_out, const pt_job_gaps *gaps);

/* The workers x functions matrix for the page (heatmap.c): its columns, and per column
 * every worker's deviation from the median worker (a share of the step) and bottleneck
 * ratio. Built once, for the section and for the bounded form's parts. */
typedef struct pt_heatmap {
    size_t columns;
    const pt_fn_row **rows;
    double *dev;    /* [column * n + worker] */
    double *share;
} pt_heatmap;
void pt_heatmap_build(const pt_analysis *a, const int *status, pt_heatmap *h);
void pt_heatmap_free(pt_heatmap *h);
/* The section: every worker's row (full form), or the full-detail workers' rows and one
 * row per node (bounded form). */
pt_json *pt_section_heatmap(const pt_analysis *a, const pt_heatmap *h);
/* {"ranks", "values", "shares"} for workers [first, last) (a part's rows). */
pt_json *pt_heatmap_rows(const pt_analysis *a, const pt_heatmap *h, size_t first, size_t last, bool kept_only);

/* The bounded form (report_scale.c): starts it when the job is large (marks the named
 * workers, the outliers and the examples), its "scale" key, and its end. */
void pt_scale_begin(pt_analysis *a, const int *status);
pt_json *pt_section_scale(const pt_analysis *a, const int *status, pt_json *parts);
void pt_scale_end(pt_analysis *a);
/* Nodes of the bounded form: hosts in order of their lowest rank. */
size_t pt_scale_node_count(const pt_analysis *a);
uint32_t pt_scale_node_of(const pt_analysis *a, size_t w);
const char *pt_scale_node_host(const pt_analysis *a, uint32_t node);

/* A class's finding category ("gpu_compute", ...) and its report section ("GPU Compute"). */
const char *pt_category_of(pt_class cls);
const char *pt_section_of(pt_class cls);

/* Short human names for sentences: a kernel without its signature and template
 * arguments, the innermost frames of a Python stack. */
void pt_short_function_name(pt_class cls, const char *name, pt_buf *out);

#endif
