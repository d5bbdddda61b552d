/* diff_state.h -- what diff.c (the two runs compared) and diff_document.c (diff.json
 * written from the comparison) share: a run prepared (side: its analysis, step noise and
 * function table), one figure compared (change), a function's change (fn_change), and the
 * comparison's context (diff_ctx). diff.c's design comment says how the figures are
 * judged. Internal to src/compare: nothing outside those two files includes it. */
#ifndef PT_COMPARE_DIFF_STATE_H
#define PT_COMPARE_DIFF_STATE_H

#include "compare/diff.h"
#include "diagnose/analysis.h"
#include "util/buf.h"
#include "util/strtab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MATERIAL_SHARE 0.01
#define MIN_SPREAD_WORKERS 3 /* fewer workers say nothing about their spread */
#define MAX_RANKS 16

/* ------------------------------------------------------------ one run, prepared */

/* A run's functions, each with the workers that have a record of it. A worker without one
 * counts as 0 (as in the analysis), so a function is compared by reading its records, not
 * every worker: the comparison costs what the runs hold, not functions x workers (a large
 * job's tail of functions is run by a few workers each). A report's function may also give
 * every worker that ran its class one job-wide ratio (pt_run_function): its values are made
 * for those workers as they are read, a cost the report's bytes bound (run.c). */
typedef struct fn_ref {
    uint32_t worker;                   /* position in the side's analysis (rank order) */
    uint32_t index;                    /* the worker's index-th function, or the run's records[index] */
} fn_ref;

typedef struct fn_row {
    pt_class cls;
    const char *name, *group;
    const pt_run_function *report;     /* a report's function, or NULL: the workers' own records */
    size_t first, count;               /* its refs, in worker order */
    size_t workers;                    /* workers with a value: its records and the job-wide ratio's */
} fn_row;

typedef struct fn_table {
    fn_row *rows;
    size_t row_count, row_cap;
    fn_ref *refs;
    pt_strtab index;                   /* class byte + name -> row */
    pt_buf key;                        /* room for a key */
} fn_table;

typedef struct side {
    const pt_diff_run *run;
    pt_analysis a;                     /* workers sorted by rank */
    double steps;                      /* median profiled steps per worker */
    double noise[PT_STEP_PART_COUNT];  /* typical step-to-step sd (ms); non-finite: unknown */
    double class_ms[PT_CLASS_COUNT];   /* the median worker's exposed ms per step of each class */
    fn_table fns;
} side;

/* Values of some of a side's n workers (worker NULL: all n, in order); every other worker's
 * value is 0. */
typedef struct values {
    uint32_t *worker;
    double *value;
    size_t count, n;
} values;

/* ------------------------------------------------------------ comparing one figure */

typedef struct rank_change {
    int32_t rank;
    double before, after;
} rank_change;

typedef struct change {
    double before, after, delta, threshold;
    bool significant;
    bool by_steps_apart;               /* it counts because the runs' steps lie apart, not beyond noise */
    rank_change ranks[MAX_RANKS];      /* standouts, largest change first */
    size_t rank_count;                 /* listed */
    size_t ranks_standing_out;         /* in all */
} change;

typedef struct diff_ctx {
    side before, after;
    bool paired;                       /* same ranks: compare rank by rank */
    double floor_ms;                   /* material: MATERIAL_SHARE of the step time */
    values b, a, m;                    /* per-worker values of a figure: before's, after's, a measure's */
    values delta;                      /* after - before, rank by rank */
    double *before_at, *after_at;      /* beside delta: the ranks' own values */
    double *scratch;                   /* max n doubles */
} diff_ctx;

/* ------------------------------------------------------------ functions */

typedef enum fn_kind { FN_CHANGED, FN_ADDED, FN_REMOVED } fn_kind;

typedef struct fn_change {
    pt_class cls;
    const char *name, *group;
    fn_kind kind;
    change exposed;
    double total_b, total_a, calls_b, calls_a, per_call_b, per_call_a; /* NAN: unknown */
    size_t workers_b, workers_a;
    double score;                      /* how much it changed, for ordering; 0: not beyond noise */
} fn_change;

typedef struct fn_list {
    fn_change *items;
    size_t count, cap;
} fn_list;

/* diff.json from the comparison: pt_diff's document (diff_document.c). */
pt_json *diff_document(const diff_ctx *d, const change *parts, const fn_list *fns, const char *generated_at);

#endif
