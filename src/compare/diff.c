/* diff.c -- what changed between two runs: step time, each class's exposed time and every
 * function's time per step, judged against noise, then a verdict sentence.
 *
 * Design. Each run is analysed as the diagnosis analyses a job (pt_analysis: workers
 * sorted by rank, one row per function), and every figure is per step and per worker:
 * a worker's step time is its median profiled step (the report's step_time_ms: one
 * definition), a class's or a function's time is its window's exposed (bottleneck) time
 * scaled to that step, so the classes and idle add up to the step time and a function's
 * change is its share of the step-time change. A run's
 * figure is its median worker's, so runs of different sizes compare (8 workers against 16
 * is a fair question about the typical worker) and one straggler does not move it.
 *
 * When both runs have the same ranks, workers are also compared rank by rank: a change
 * confined to a few ranks (a slow GPU, a slow data loader on one host) leaves the median
 * worker almost untouched, but that rank's change stands out from the others' changes.
 * This matters because of how synchronous jobs show a straggler: everyone else waits for
 * it in collectives, so the median worker's communication grows by the straggler's extra
 * time. The verdict therefore follows the paper's rule and judges a worker by what it does
 * instead of waiting: when some ranks grew in compute, memory, runtime or Python while the
 * median worker's communication (or idle time) grew, those ranks are the cause.
 *
 * Noise. A change counts only when it is both significant and material:
 *   - significant: larger than SIGMAS standard errors of the difference, where a run's
 *     standard error combines the step-to-step variation (a worker's standard deviation
 *     across its steps, the median over workers, over sqrt(steps)) and, with three or more
 *     workers, the spread across workers (a median of n has error 1.25 sigma / sqrt(n)).
 *     Summaries carry per-step times per class but not per function, so a function is
 *     given its class's step noise scaled by the square root of its share of the class
 *     (function_noise);
 *   - material: at least MATERIAL_SHARE of the step time, the seed's 1% threshold.
 * The step time also changes when every profiled step of one run (four at least) is
 * longer than every step of the other, however widely they spread (steps_apart).
 * Rank by rank, a rank stands out when its change differs from the median rank's change
 * by more than RANK_SIGMAS robust sigmas (MAD) of the ranks' changes, and by more than
 * the step noise and RANK_MATERIAL_SHARE of the step time. Without two steps per worker
 * the step noise is unknown and the diff says so: changes are then judged by size and
 * spread only.
 *
 * A hang in AFTER (its diagnosis's hang finding) is the verdict whatever the step times
 * say. Findings of both runs' diagnoses are matched by category and function, so the diff
 * also lists what AFTER's diagnosis gained or lost. When the runs ran on different setups
 * (GPU model, world size, a version of software both name), the sentence says so first
 * and the cause's class is "environment": a change of setup explains a change of speed
 * before any function does.
 *
 * Cost: one pt_analysis per run for its workers' figures (steps, windows, step times).
 * Functions are read from their records (fn_table): a worker without a function counts
 * as 0, so each median of a function is taken over the workers that have it and a count
 * of zeros (pt_median_with, the same value pt_median gives over every worker). A function
 * costs what the runs hold of it, and the comparison is linear in the runs' records (and
 * in a report's job-wide values, which run.c bounds by the report's size), not in
 * functions x workers. Findings are matched through a hash of category and function.
 * Memory is the table's refs and a few arrays of n values. */
#include "compare/diff.h"
#include "diagnose/analysis.h"
#include "summarize/summary_json.h"
#include "util/stats.h"
#include "util/strtab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIGMAS 3.0
#define RANK_SIGMAS 4.0
#define MATERIAL_SHARE 0.01
/* A claim about a few ranks needs more: the workers of one healthy job differ persistently
 * by a percent or two (GPU clocks, host speed), and a rerun reshuffles who is fastest. The
 * diagnosis uses the same 2% of the step before it names some workers (findings.c). */
#define RANK_MATERIAL_SHARE 0.02
#define MEDIAN_ERROR 1.2533  /* standard error of a median, in sigma / sqrt(n) */
#define MIN_SPREAD_WORKERS 3 /* fewer workers say nothing about their spread */
#define SEPARATED_MIN_STEPS 4 /* per run, for "every step slower" to count (steps_apart) */
#define MAX_CHANGED 100
#define MAX_LISTED 200
#define MAX_RANKS 16
#define NAME_CHARS 96        /* a function's short name in a sentence */

static const char *const part_labels[PT_STEP_PART_COUNT] = {
    "GPU compute", "GPU memory operations", "communication", "CUDA runtime", "Python", "idle", "step"};

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

static void row_key(pt_buf *key, pt_class cls, const char *name)
{
    pt_buf_reset(key);
    pt_buf_putc(key, (char)cls);
    pt_buf_puts(key, name);
}

/* The row of (cls, name), or NULL. */
static const fn_row *find_row(const fn_table *t, pt_class cls, const char *name)
{
    pt_buf key = PT_BUF_INIT;
    row_key(&key, cls, name);
    uint32_t id = pt_strtab_find(&t->index, key.data, key.len);
    pt_buf_free(&key);
    return id == UINT32_MAX ? NULL : &t->rows[id];
}

/* The row of (cls, name), added (no group, no refs) when new; *added says which. */
static fn_row *intern_row(fn_table *t, pt_class cls, const char *name, bool *added)
{
    row_key(&t->key, cls, name);
    uint32_t id = pt_strtab_intern(&t->index, t->key.data, t->key.len);
    *added = id == t->row_count;
    if (*added) {
        PT_GROW(t->rows, t->row_cap, t->row_count + 1);
        t->rows[t->row_count++] = (fn_row){cls, name, NULL, NULL, 0, 0, 0};
    }
    return &t->rows[id];
}

/* The workers' own functions, as rows; group: the first any worker gives, in rank order
 * (as the analysis's rows). Two passes over the workers: count, then place each ref. */
static void table_add_workers(fn_table *t, const pt_analysis *a)
{
    size_t total = 0;
    for (size_t w = 0; w < a->n; w++)
        total += a->workers[w]->function_count;
    uint32_t *row_of = pt_xmalloc((total ? total : 1) * sizeof *row_of);
    size_t k = 0;
    for (size_t w = 0; w < a->n; w++)
        for (size_t i = 0; i < a->workers[w]->function_count; i++) {
            pt_function_summary cell;
            const pt_function_summary *f = pt_summary_function(a->workers[w], i, &cell, NULL);
            bool added;
            fn_row *row = intern_row(t, f->cls, f->name, &added);
            if (!row->group && f->group)
                row->group = f->group;
            row->count++;
            row_of[k++] = (uint32_t)(row - t->rows);
        }
    size_t first = 0;
    for (size_t r = 0; r < t->row_count; r++) {
        t->rows[r].first = first;
        first += t->rows[r].count;
        t->rows[r].workers = t->rows[r].count; /* a valid summary holds a function once */
        t->rows[r].count = 0;
    }
    t->refs = pt_xmalloc((total ? total : 1) * sizeof *t->refs);
    k = 0;
    for (size_t w = 0; w < a->n; w++)
        for (size_t i = 0; i < a->workers[w]->function_count; i++) {
            fn_row *row = &t->rows[row_of[k++]];
            t->refs[row->first + row->count++] = (fn_ref){(uint32_t)w, (uint32_t)i};
        }
    free(row_of);
}

typedef struct worker_at {
    const pt_worker_summary *worker;
    uint32_t position;
} worker_at;

static int by_worker(const void *x, const void *y)
{
    uintptr_t p = (uintptr_t)((const worker_at *)x)->worker, q = (uintptr_t)((const worker_at *)y)->worker;
    return (p > q) - (p < q);
}

static int by_ref_worker(const void *x, const void *y)
{
    const fn_ref *p = x, *q = y;
    return (p->worker > q->worker) - (p->worker < q->worker);
}

/* [i] the analysis position of the run's worker i. */
static uint32_t *positions(const side *s)
{
    size_t n = s->a.n;
    worker_at *at = pt_xmalloc((n ? n : 1) * sizeof *at);
    for (size_t w = 0; w < n; w++)
        at[w] = (worker_at){s->a.workers[w], (uint32_t)w};
    qsort(at, n, sizeof *at, by_worker);
    uint32_t *position = pt_xmalloc((n ? n : 1) * sizeof *position);
    for (size_t i = 0; i < n; i++) {
        worker_at key = {s->run->workers[i], 0};
        position[i] = ((const worker_at *)bsearch(&key, at, n, sizeof *at, by_worker))->position;
    }
    free(at);
    return position;
}

static const pt_function_summary *report_cell(const fn_row *row, int64_t exposed_ns, pt_function_summary *cell)
{
    memset(cell, 0, sizeof *cell);
    cell->cls = row->cls;
    cell->name = (char *)row->name;
    cell->group = (char *)row->group;
    cell->exposed_ns = exposed_ns;
    return cell;
}

/* A row's record of the worker a ref names: its own function, or the report's figure
 * (NULL: the report names the worker without one). */
static const pt_function_summary *own_record(const side *s, const fn_row *row, const fn_ref *ref,
                                             pt_function_summary *cell)
{
    if (!row->report)
        return pt_summary_function(s->a.workers[ref->worker], ref->index, cell, NULL);
    int64_t ns = s->run->records[ref->index].exposed_ns;
    return ns == PT_RUN_NO_RECORD ? NULL : report_cell(row, ns, cell);
}

/* The value a report's job-wide ratio gives worker w of a row (NULL: none). */
static const pt_function_summary *job_cell(const side *s, const fn_row *row, size_t w, pt_function_summary *cell)
{
    int64_t ns = pt_run_job_exposed_ns(row->report, s->a.workers[w]);
    return ns == PT_RUN_NO_RECORD ? NULL : report_cell(row, ns, cell);
}

/* A report run's functions, as rows after the workers' own (it has only these). */
static void table_add_report(fn_table *t, const side *s)
{
    const pt_diff_run *run = s->run;
    if (!run->function_count)
        return;
    uint32_t *position = positions(s);
    size_t held = t->row_count ? t->rows[t->row_count - 1].first + t->rows[t->row_count - 1].count : 0;
    t->refs = pt_xrealloc(t->refs, (held + run->record_count + 1) * sizeof *t->refs);
    for (size_t i = 0; i < run->function_count; i++) {
        const pt_run_function *f = &run->functions[i];
        bool added;
        fn_row *row = intern_row(t, f->cls, f->name, &added);
        if (!added) /* a summary's function of that name: not the report's to add */
            continue;
        row->group = f->group;
        row->report = f;
        row->first = held;
        for (size_t k = f->first; k < f->first + f->count; k++) {
            t->refs[held++] = (fn_ref){position[run->records[k].worker], (uint32_t)k};
            row->workers += run->records[k].exposed_ns != PT_RUN_NO_RECORD;
        }
        row->count = held - row->first;
        qsort(t->refs + row->first, row->count, sizeof *t->refs, by_ref_worker);
        /* The job-wide ratio's workers: a cost of every worker, which run.c bounded. */
        for (size_t w = 0, next = 0; f->job_ratio > 0 && w < s->a.n; w++) {
            pt_function_summary cell;
            if (next < row->count && t->refs[row->first + next].worker == w)
                next++;
            else
                row->workers += job_cell(s, row, w, &cell) != NULL;
        }
    }
    free(position);
}

static void part_values(const side *s, int part, double *out);

static void side_init(side *s, const pt_diff_run *run)
{
    s->run = run;
    pt_analysis_init_by_rank(&s->a, run->workers, run->worker_count);
    s->steps = s->a.n ? pt_median_of(s->a.steps, s->a.n, s->a.scratch) : 1;
    for (int p = 0; p < PT_STEP_PART_COUNT; p++)
        s->noise[p] = pt_step_noise_ms(s->a.workers, s->a.n, p);
    double *ms = pt_xmalloc((2 * s->a.n + 1) * sizeof *ms);
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        part_values(s, c, ms);
        s->class_ms[c] = s->a.n ? pt_median_of(ms, s->a.n, ms + s->a.n) : 0;
    }
    free(ms);
    memset(&s->fns, 0, sizeof s->fns);
    pt_strtab_init(&s->fns.index);
    table_add_workers(&s->fns, &s->a);
    table_add_report(&s->fns, s);
}

static void side_free(side *s)
{
    free(s->fns.rows);
    free(s->fns.refs);
    pt_strtab_free(&s->fns.index);
    pt_buf_free(&s->fns.key);
    pt_analysis_free(&s->a);
}

/* The row of (cls, name) where some worker of the side has a value of it, or NULL. */
static const fn_row *side_row(const side *s, pt_class cls, const char *name)
{
    const fn_row *row = find_row(&s->fns, cls, name);
    return row && row->workers ? row : NULL;
}

/* Per-worker value of a part of the step, per step (ms): the step time is the median
 * profiled step, as `analyze` reports it, and the classes and idle time are the window's
 * scaled to that step (pt_median_steps_in_window), so they still add up to it. */
static void part_values(const side *s, int part, double *out)
{
    for (size_t w = 0; w < s->a.n; w++) {
        const pt_worker_summary *ws = s->a.workers[w];
        double ns = part < PT_CLASS_COUNT ? (double)ws->exposed_ns[part] : (double)ws->idle_ns;
        out[w] = part == PT_STEP_DURATION ? s->a.step_ms[w] : ns / 1e6 / pt_median_steps_in_window(&s->a, w);
    }
}

typedef enum fn_measure { EXPOSED, TOTAL, CALLS, PER_CALL } fn_measure;

/* Worker w's value of a function's record. */
static double measure_of(const side *s, size_t w, const pt_function_summary *f, fn_measure m)
{
    double steps = pt_median_steps_in_window(&s->a, w); /* times: per median step, as the classes */
    switch (m) {
    case EXPOSED: return (double)f->exposed_ns / 1e6 / steps;
    case TOTAL: return (double)f->total_ns / 1e6 / steps;
    case CALLS: return (double)f->count / s->a.steps[w];
    case PER_CALL: return f->count ? (double)f->median_ns / 1e6 : NAN;
    }
    return NAN;
}

/* Values of some of a side's n workers (worker NULL: all n, in order); every other worker's
 * value is 0. */
typedef struct values {
    uint32_t *worker;
    double *value;
    size_t count, n;
} values;

static void values_alloc(values *v, size_t n)
{
    v->worker = pt_xmalloc((n ? n : 1) * sizeof *v->worker);
    v->value = pt_xmalloc((n ? n : 1) * sizeof *v->value);
    v->count = 0;
}

static void values_free(values *v)
{
    free(v->worker);
    free(v->value);
}

static void values_push(values *v, size_t w, double value)
{
    v->worker[v->count] = (uint32_t)w;
    v->value[v->count++] = value;
}

/* The workers of a side with a value of a row, in worker order, and their values of m
 * (PER_CALL: NAN where not executed). Reads the row's records, and every worker only for
 * a report's job-wide ratio. */
static void row_values(const side *s, const fn_row *row, fn_measure m, values *out)
{
    out->count = 0;
    out->n = s->a.n;
    if (!row)
        return;
    const fn_ref *refs = s->fns.refs + row->first;
    pt_function_summary cell;
    if (!row->report || !(row->report->job_ratio > 0)) {
        for (size_t k = 0; k < row->count; k++) {
            const pt_function_summary *f = own_record(s, row, &refs[k], &cell);
            if (f)
                values_push(out, refs[k].worker, measure_of(s, refs[k].worker, f, m));
        }
        return;
    }
    for (size_t w = 0, next = 0; w < s->a.n; w++) {
        bool own = next < row->count && refs[next].worker == w;
        const pt_function_summary *f = own ? own_record(s, row, &refs[next++], &cell) : job_cell(s, row, w, &cell);
        if (f)
            values_push(out, w, measure_of(s, w, f, m));
    }
}

/* ------------------------------------------------------------ medians of some values */

/* The k-th smallest (from 0) of n values: count of them in v (reordered), the other
 * n - count equal to c. Linear in count: the values below c, then c, then those above. */
static double kth_with(double *v, size_t count, size_t n, double c, size_t k)
{
    size_t below = 0, above = count; /* [0, below) < c, [above, count) > c */
    for (size_t i = 0; i < above;) {
        double x = v[i];
        if (x < c)
            v[i++] = v[below], v[below++] = x;
        else if (x > c)
            v[i] = v[--above], v[above] = x;
        else
            i++;
    }
    size_t at_c = above - below + (n - count);
    double around[3];
    if (k < below) {
        pt_select_around(v, below, k, around);
        return around[1];
    }
    if (k < below + at_c)
        return c;
    pt_select_around(v + above, count - above, k - below - at_c, around);
    return around[1];
}

/* What pt_median gives for all n: a median depends only on which values there are. */
double pt_median_with(double *v, size_t count, size_t n, double c)
{
    if (n == 0)
        return 0;
    double hi = kth_with(v, count, n, c, n / 2);
    if (n % 2)
        return hi;
    return (kth_with(v, count, n, c, n / 2 - 1) + hi) / 2;
}

/* The median of the n values v stands for (the others 0). scratch: v->count doubles. */
static double median_of_values(const values *v, double *scratch)
{
    memcpy(scratch, v->value, v->count * sizeof *scratch);
    return pt_median_with(scratch, v->count, v->n, 0);
}

/* pt_spread_of over the n values v stands for. scratch: v->count doubles. */
static pt_spread spread_of_values(const values *v, double *scratch)
{
    pt_spread sp = {0, 0};
    if (v->n == 0)
        return sp;
    sp.median = median_of_values(v, scratch);
    for (size_t i = 0; i < v->count; i++)
        scratch[i] = fabs(v->value[i] - sp.median);
    sp.sigma = 1.4826 * pt_median_with(scratch, v->count, v->n, fabs(0 - sp.median));
    return sp;
}

/* Median over the workers with a value (PER_CALL: those that executed it; the others' is
 * none, not 0). */
static double typical(const values *v, fn_measure m, double *scratch)
{
    size_t count = 0;
    for (size_t i = 0; i < v->count; i++)
        if (!isnan(v->value[i]))
            scratch[count++] = v->value[i];
    size_t n = m == PER_CALL ? count : count + (v->n - v->count);
    return n ? pt_median_with(scratch, count, n, 0) : NAN;
}

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

static double finite_or_zero(double v)
{
    return isfinite(v) ? v : 0;
}

static double standard_error(const side *s, const values *v, double step_noise, double *scratch)
{
    double noise = finite_or_zero(step_noise);
    double var = noise * noise / fmax(s->steps, 1);
    if (s->a.n >= MIN_SPREAD_WORKERS) {
        pt_spread sp = spread_of_values(v, scratch);
        double se = MEDIAN_ERROR * sp.sigma / sqrt((double)s->a.n);
        var += se * se;
    }
    return sqrt(var);
}

static int by_rank_change(const void *x, const void *y)
{
    const rank_change *p = x, *q = y;
    double dp = fabs(p->after - p->before), dq = fabs(q->after - q->before);
    int order = pt_cmp_desc(dp, dq);
    return order ? order : pt_cmp_i64(p->rank, q->rank);
}

/* d->delta: after - before for every worker with a value on either side (paired runs:
 * the same ranks at the same positions), in order; both values beside it. */
static void rank_deltas(diff_ctx *d)
{
    const values *b = &d->b, *a = &d->a;
    d->delta.count = 0;
    d->delta.n = b->n;
    for (size_t i = 0, j = 0; i < b->count || j < a->count;) {
        size_t wb = i < b->count ? (b->worker ? b->worker[i] : i) : SIZE_MAX;
        size_t wa = j < a->count ? (a->worker ? a->worker[j] : j) : SIZE_MAX;
        size_t w = wb < wa ? wb : wa;
        double before = wb == w ? b->value[i++] : 0, after = wa == w ? a->value[j++] : 0;
        d->before_at[d->delta.count] = before;
        d->after_at[d->delta.count] = after;
        values_push(&d->delta, w, after - before);
    }
}

/* Ranks whose change differs from the median rank's change beyond noise. A rank without a
 * value on either side changed by 0, which never stands out (it is not above the floor). */
static void find_standouts(diff_ctx *d, double noise_b, double noise_a, change *c)
{
    size_t n = d->before.a.n;
    if (!d->paired || n < MIN_SPREAD_WORKERS)
        return;
    rank_deltas(d);
    pt_spread sp = spread_of_values(&d->delta, d->scratch);
    double nb = finite_or_zero(noise_b), na = finite_or_zero(noise_a);
    double per_rank = sqrt(nb * nb / fmax(d->before.steps, 1) + na * na / fmax(d->after.steps, 1));
    double floor = d->floor_ms * (RANK_MATERIAL_SHARE / MATERIAL_SHARE);
    double threshold = fmax(fmax(RANK_SIGMAS * sp.sigma, SIGMAS * per_rank), floor);
    rank_change all[MAX_RANKS + 1];
    for (size_t i = 0; i < d->delta.count; i++) {
        double delta = d->delta.value[i];
        if (!(fabs(delta - sp.median) > threshold) || !(fabs(delta) > floor))
            continue;
        c->ranks_standing_out++;
        rank_change rc = {pt_worker_rank(&d->after.a, d->delta.worker[i]), d->before_at[i], d->after_at[i]};
        /* Keep the MAX_RANKS largest: insert, sort, drop the last. */
        size_t k = c->rank_count;
        memcpy(all, c->ranks, k * sizeof *all);
        all[k++] = rc;
        qsort(all, k, sizeof *all, by_rank_change);
        c->rank_count = k > MAX_RANKS ? MAX_RANKS : k;
        memcpy(c->ranks, all, c->rank_count * sizeof *all);
    }
}

/* Compares d->b (before's workers) with d->a (after's), both filled by the caller. */
static change compare(diff_ctx *d, double noise_b, double noise_a)
{
    change c;
    memset(&c, 0, sizeof c);
    c.before = d->before.a.n ? median_of_values(&d->b, d->scratch) : 0;
    c.after = d->after.a.n ? median_of_values(&d->a, d->scratch) : 0;
    c.delta = c.after - c.before;
    double se_b = standard_error(&d->before, &d->b, noise_b, d->scratch);
    double se_a = standard_error(&d->after, &d->a, noise_a, d->scratch);
    c.threshold = fmax(SIGMAS * sqrt(se_b * se_b + se_a * se_a), d->floor_ms);
    c.significant = fabs(c.delta) > c.threshold;
    find_standouts(d, noise_b, noise_a, &c);
    return c;
}

/* The shortest and longest profiled step of any worker of a run (ms); false with fewer
 * than SEPARATED_MIN_STEPS steps in all. */
static bool step_range(const side *s, double *lo, double *hi)
{
    size_t count = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (size_t w = 0; w < s->a.n; w++)
        for (size_t i = 0; i < s->a.workers[w]->step_count; i++, count++) {
            double ms = (double)s->a.workers[w]->steps[i].dur_ns / 1e6;
            *lo = fmin(*lo, ms), *hi = fmax(*hi, ms);
        }
    return count >= SEPARATED_MIN_STEPS;
}

/* Every step of one run longer than every step of the other: a change no noise model is
 * needed for (with 4 steps each, chance gives that 1 time in 35), however widely the
 * slower run's steps spread. */
static bool steps_apart(const diff_ctx *d, double delta)
{
    double lo_b, hi_b, lo_a, hi_a;
    if (!step_range(&d->before, &lo_b, &hi_b) || !step_range(&d->after, &lo_a, &hi_a))
        return false;
    return delta > 0 ? lo_a > hi_b : hi_a < lo_b;
}

/* Every worker's value of a part, in d->b and d->a. */
static void all_part_values(const side *s, int part, values *out)
{
    part_values(s, part, out->value);
    out->count = out->n = s->a.n;
    for (size_t w = 0; w < s->a.n; w++)
        out->worker[w] = (uint32_t)w;
}

static change compare_part(diff_ctx *d, int part)
{
    all_part_values(&d->before, part, &d->b);
    all_part_values(&d->after, part, &d->a);
    change c = compare(d, d->before.noise[part], d->after.noise[part]);
    if (part == PT_STEP_DURATION && !c.significant && fabs(c.delta) > d->floor_ms && steps_apart(d, c.delta))
        c.significant = c.by_steps_apart = true;
    return c;
}

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

static double typical_measure(diff_ctx *d, const side *s, const fn_row *row, fn_measure m)
{
    if (!s->run->counts_known && m != PER_CALL)
        return NAN;
    row_values(s, row, m, &d->m);
    return typical(&d->m, m, d->scratch);
}

static double change_score(const change *c)
{
    double score = c->significant ? fabs(c->delta) : 0;
    for (size_t i = 0; i < c->rank_count; i++)
        score = fmax(score, fabs(c->ranks[i].after - c->ranks[i].before));
    return score;
}

/* A function's step-to-step noise, which summaries do not carry: its class's noise,
 * scaled as if the class's variance were spread over its functions in proportion to their
 * time (independent pieces: variance adds, so sigma goes with the square root of the
 * share). Never more than the class's own noise. */
static double function_noise(diff_ctx *d, const side *s, const values *v, pt_class cls)
{
    if (s->a.n == 0 || !isfinite(s->noise[cls]))
        return s->noise[cls];
    double fn = median_of_values(v, d->scratch);
    double total = s->class_ms[cls];
    double share = total > 0 ? fmin(fmax(fn / total, 0), 1) : 1;
    return s->noise[cls] * sqrt(share);
}

/* A function of before's (rb) or after's (ra) rows, or both. */
static void add_function(diff_ctx *d, fn_list *list, const fn_row *rb, const fn_row *ra)
{
    const fn_row *row = rb ? rb : ra;
    size_t wb = rb ? rb->workers : 0, wa = ra ? ra->workers : 0;
    /* Absent from a run that lists only part of the class (a report.json): it may have
     * run there below the list's cut, so there is nothing to compare it with. */
    if ((wb == 0 && !d->before.run->complete[row->cls]) || (wa == 0 && !d->after.run->complete[row->cls]))
        return;
    fn_change f = {row->cls, row->name, row->group, FN_CHANGED, {0}, NAN, NAN, NAN, NAN, NAN, NAN, wb, wa, 0};
    if (wb == 0 && d->before.run->complete[row->cls])
        f.kind = FN_ADDED;
    else if (wa == 0 && d->after.run->complete[row->cls])
        f.kind = FN_REMOVED;
    row_values(&d->before, rb, EXPOSED, &d->b);
    row_values(&d->after, ra, EXPOSED, &d->a);
    f.exposed = compare(d, function_noise(d, &d->before, &d->b, f.cls), function_noise(d, &d->after, &d->a, f.cls));
    f.score = change_score(&f.exposed);
    f.total_b = typical_measure(d, &d->before, rb, TOTAL);
    f.total_a = typical_measure(d, &d->after, ra, TOTAL);
    f.calls_b = typical_measure(d, &d->before, rb, CALLS);
    f.calls_a = typical_measure(d, &d->after, ra, CALLS);
    f.per_call_b = typical_measure(d, &d->before, rb, PER_CALL);
    f.per_call_a = typical_measure(d, &d->after, ra, PER_CALL);
    PT_GROW(list->items, list->cap, list->count + 1);
    list->items[list->count++] = f;
}

static void collect_functions(diff_ctx *d, fn_list *list)
{
    for (size_t i = 0; i < d->before.fns.row_count; i++) {
        const fn_row *row = &d->before.fns.rows[i];
        if (row->workers)
            add_function(d, list, row, side_row(&d->after, row->cls, row->name));
    }
    for (size_t i = 0; i < d->after.fns.row_count; i++) {
        const fn_row *row = &d->after.fns.rows[i];
        if (row->workers && !side_row(&d->before, row->cls, row->name))
            add_function(d, list, NULL, row);
    }
}

static int by_score(const void *x, const void *y)
{
    const fn_change *p = x, *q = y;
    double tp = fmax(p->exposed.before, p->exposed.after), tq = fmax(q->exposed.before, q->exposed.after);
    int order = pt_cmp_desc(p->score, q->score);
    if (order == 0)
        order = pt_cmp_desc(tp, tq);
    if (order == 0)
        order = pt_cmp_i64(p->cls, q->cls);
    return order ? order : strcmp(p->name, q->name);
}

/* ------------------------------------------------------------ JSON */

static pt_json *number_or_null(double v)
{
    return isfinite(v) ? pt_json_number_rounded(v, 6) : pt_json_null();
}

static pt_json *ranks_json(const change *c)
{
    pt_json *list = pt_json_array();
    for (size_t i = 0; i < c->rank_count; i++) {
        pt_json *r = pt_json_push(list, pt_json_object());
        pt_json_add(r, "rank", pt_json_int(c->ranks[i].rank));
        pt_json_add(r, "before_ms", number_or_null(c->ranks[i].before));
        pt_json_add(r, "after_ms", number_or_null(c->ranks[i].after));
        pt_json_add(r, "delta_ms", number_or_null(c->ranks[i].after - c->ranks[i].before));
    }
    return list;
}

static void add_change(pt_json *j, const change *c)
{
    pt_json_add(j, "before_ms", number_or_null(c->before));
    pt_json_add(j, "after_ms", number_or_null(c->after));
    pt_json_add(j, "delta_ms", number_or_null(c->delta));
    pt_json_add(j, "delta_pct", c->before > 0 ? number_or_null(100 * c->delta / c->before) : pt_json_null());
    pt_json_add(j, "threshold_ms", number_or_null(c->threshold));
    pt_json_add(j, "significant", pt_json_bool(c->significant));
    pt_json_add(j, "counted_by", !c->significant ? pt_json_null()
                                 : pt_json_string(c->by_steps_apart ? "steps_apart" : "noise"));
    pt_json_add(j, "ranks", ranks_json(c));
    if (c->ranks_standing_out > c->rank_count)
        pt_json_add(j, "ranks_standing_out", pt_json_int((int64_t)c->ranks_standing_out));
}

/* One quantity of both runs: "before_NAME" and "after_NAME". */
static void add_before_after(pt_json *j, const char *name, pt_json *before, pt_json *after)
{
    char key[64];
    snprintf(key, sizeof key, "before_%s", name);
    pt_json_add(j, key, before);
    snprintf(key, sizeof key, "after_%s", name);
    pt_json_add(j, key, after);
}

static pt_json *function_json(const fn_change *f)
{
    pt_json *j = pt_function_json_object(f->cls, f->name, f->group);
    add_change(j, &f->exposed);
    add_before_after(j, "total_ms", number_or_null(f->total_b), number_or_null(f->total_a));
    add_before_after(j, "calls", number_or_null(f->calls_b), number_or_null(f->calls_a));
    add_before_after(j, "ms_per_call", number_or_null(f->per_call_b), number_or_null(f->per_call_a));
    add_before_after(j, "workers", pt_json_int((int64_t)f->workers_b), pt_json_int((int64_t)f->workers_a));
    return j;
}

static const char *source_name(pt_run_source s)
{
    return s == PT_RUN_TRACES ? "traces" : s == PT_RUN_SUMMARIES ? "summaries" : "report";
}

/* The distinct GPU models of a run, up to four. */
static pt_json *devices_json(const side *s)
{
    pt_json *list = pt_json_array();
    for (size_t w = 0; w < s->a.n && list->count < 4; w++) {
        const char *dev = s->a.workers[w]->device_name;
        bool seen = !dev || !*dev;
        for (size_t i = 0; !seen && i < list->count; i++)
            seen = strcmp(list->items[i]->string, dev) == 0;
        if (!seen)
            pt_json_push(list, pt_json_string(dev));
    }
    return list;
}

/* The world size the run's own report gives, NAN when it gives none. */
static double world_size_of(const side *s)
{
    return pt_json_get_number(pt_json_get(s->run->report, "job"), "world_size", NAN);
}

static pt_json *run_json(const side *s, const change *step, bool before)
{
    const pt_json *report = s->run->report;
    pt_json *j = pt_json_object();
    pt_json_add(j, "input", pt_json_string(s->run->label));
    pt_json_add(j, "source", pt_json_string(source_name(s->run->source)));
    pt_json_add(j, "workers", pt_json_int((int64_t)s->a.n));
    pt_json_add(j, "world_size", number_or_null(world_size_of(s)));
    pt_json_add(j, "steps", number_or_null(s->steps));
    pt_json_add(j, "step_time_ms", number_or_null(before ? step->before : step->after));
    pt_json_add(j, "devices", devices_json(s));
    pt_json_add(j, "verdict", pt_json_string(pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", "unknown")));
    return j;
}

/* ------------------------------------------------------------ findings: new, resolved */

static const pt_json *findings_of(const pt_diff_run *run)
{
    const pt_json *f = pt_json_get(pt_json_get(run->report, "diagnosis"), "findings");
    return f && f->type == PT_JSON_ARRAY ? f : NULL;
}

/* A run's findings by (category, function), the first of each: matched in constant time,
 * however many a report lists. */
typedef struct finding_index {
    const pt_json *list;
    pt_strtab keys;
    size_t *first;                     /* [key id] its first finding in list */
} finding_index;

static void finding_key(pt_buf *key, const pt_json *f)
{
    const char *category = pt_json_get_string(f, "category", ""), *function = pt_json_get_string(f, "function", "");
    pt_buf_reset(key);
    pt_buf_append(key, category, strlen(category) + 1); /* its NUL too: "a" + "bc" is not "ab" + "c" */
    pt_buf_puts(key, function);
}

static void index_findings(finding_index *x, const pt_json *list)
{
    x->list = list;
    pt_strtab_init(&x->keys);
    x->first = pt_xmalloc((list && list->count ? list->count : 1) * sizeof *x->first);
    pt_buf key = PT_BUF_INIT;
    for (size_t i = 0; list && i < list->count; i++) {
        finding_key(&key, list->items[i]);
        size_t known = x->keys.count;
        uint32_t id = pt_strtab_intern(&x->keys, key.data, key.len);
        if (x->keys.count > known)
            x->first[id] = i;
    }
    pt_buf_free(&key);
}

static void free_finding_index(finding_index *x)
{
    pt_strtab_free(&x->keys);
    free(x->first);
}

/* The first finding of the index with f's category and function, or NULL. */
static const pt_json *find_same(const finding_index *x, const pt_json *f)
{
    pt_buf key = PT_BUF_INIT;
    finding_key(&key, f);
    uint32_t id = pt_strtab_find(&x->keys, key.data, key.len);
    pt_buf_free(&key);
    return id == UINT32_MAX ? NULL : x->list->items[x->first[id]];
}

/* A report finding's "function" (a string, or null) and "workers" (its ranks; what is
 * not a number is left out), copied for the diff. */
static pt_json *finding_function(const pt_json *f)
{
    const pt_json *fn = pt_json_get(f, "function");
    return fn && fn->type == PT_JSON_STRING ? pt_json_string(fn->string) : pt_json_null();
}

static pt_json *finding_ranks(const pt_json *f)
{
    pt_json *list = pt_json_array();
    const pt_json *ranks = pt_json_get(f, "workers");
    for (size_t i = 0; ranks && ranks->type == PT_JSON_ARRAY && i < ranks->count; i++)
        if (ranks->items[i]->type == PT_JSON_NUMBER)
            pt_json_push(list, pt_json_int((int64_t)ranks->items[i]->number));
    return list;
}

static pt_json *finding_json(const pt_json *f, const pt_json *other)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "category", pt_json_string(pt_json_get_string(f, "category", "other")));
    pt_json_add(j, "function", finding_function(f));
    pt_json_add(j, "workers", finding_ranks(f));
    const pt_json *all = pt_json_get(f, "all_workers");
    pt_json_add(j, "all_workers", pt_json_bool(all && all->type == PT_JSON_BOOL && all->boolean));
    pt_json_add(j, "impact", number_or_null(pt_json_get_number(f, "impact", NAN)));
    if (other)
        pt_json_add(j, "impact_before", number_or_null(pt_json_get_number(other, "impact", NAN)));
    pt_json_add(j, "summary", pt_json_string(pt_json_get_string(f, "summary", "")));
    return j;
}

static pt_json *findings_json(const pt_diff_run *before, const pt_diff_run *after)
{
    const pt_json *fb = findings_of(before), *fa = findings_of(after);
    finding_index ib, ia;
    index_findings(&ib, fb);
    index_findings(&ia, fa);
    pt_json *j = pt_json_object();
    pt_json *added = pt_json_add(j, "new", pt_json_array());
    pt_json *resolved = pt_json_add(j, "resolved", pt_json_array());
    pt_json *persisting = pt_json_add(j, "persisting", pt_json_array());
    for (size_t i = 0; fa && i < fa->count; i++) {
        const pt_json *was = find_same(&ib, fa->items[i]);
        pt_json_push(was ? persisting : added, finding_json(fa->items[i], was));
    }
    for (size_t i = 0; fb && i < fb->count; i++)
        if (!find_same(&ia, fb->items[i]))
            pt_json_push(resolved, finding_json(fb->items[i], NULL));
    free_finding_index(&ib);
    free_finding_index(&ia);
    return j;
}

/* ------------------------------------------------------------ the verdict */

static void put_ms(pt_buf *out, double ms)
{
    double a = fabs(ms);
    pt_buf_printf(out, a >= 1000 ? "%.0f ms" : a >= 0.1 ? "%.3g ms" : "%.2g ms", ms);
}

static void put_signed_ms(pt_buf *out, double ms)
{
    pt_buf_puts(out, ms >= 0 ? "+" : "\xe2\x88\x92"); /* U+2212 minus */
    put_ms(out, fabs(ms));
}

static void put_capitalized(pt_buf *out, const char *text)
{
    pt_buf_putc(out, text[0] >= 'a' && text[0] <= 'z' ? (char)(text[0] - 'a' + 'A') : text[0]);
    pt_buf_puts(out, text + 1);
}

static void put_function(pt_buf *out, const fn_change *f)
{
    pt_buf name = PT_BUF_INIT;
    pt_short_function_name(f->cls, f->name, &name);
    if (name.len > NAME_CHARS)
        pt_buf_puts(out, "..."), pt_buf_append(out, name.data + name.len - NAME_CHARS, NAME_CHARS);
    else
        pt_buf_append(out, name.data, name.len);
    pt_buf_free(&name);
}

static void put_ranks(pt_buf *out, const rank_change *ranks, size_t n, size_t total)
{
    pt_buf_puts(out, n == 1 && total == 1 ? "Rank " : "Ranks ");
    for (size_t i = 0; i < n && i < 4; i++)
        pt_buf_printf(out, "%s%d", i == 0 ? "" : i + 1 == n && total == n ? " and " : ", ", ranks[i].rank);
    if (total > 4)
        pt_buf_printf(out, " and %zu more", total - 4);
}

/* The function of a class that moved most in direction sign: on the median worker, or
 * on the ranks of ranks_of when given. It attributes a class's change that is beyond
 * noise, so a function needs only be material (over floor), not beyond noise by itself:
 * a class's change can be spread over many functions, each within noise. */
static const fn_change *top_function(const fn_list *fns, pt_class cls, double sign, const change *ranks_of,
                                     double floor)
{
    const fn_change *best = NULL;
    double best_delta = 0;
    for (size_t i = 0; i < fns->count; i++) {
        const fn_change *f = &fns->items[i];
        if (f->cls != cls)
            continue;
        double delta = !ranks_of && fabs(f->exposed.delta) > floor ? f->exposed.delta : 0;
        for (size_t k = 0; ranks_of && k < f->exposed.rank_count; k++)
            for (size_t r = 0; r < ranks_of->rank_count; r++)
                if (f->exposed.ranks[k].rank == ranks_of->ranks[r].rank) {
                    double dr = f->exposed.ranks[k].after - f->exposed.ranks[k].before;
                    delta = sign * dr > sign * delta ? dr : delta;
                }
        if (sign * delta > sign * best_delta)
            best = f, best_delta = delta;
    }
    return best;
}

/* "most in NAME (+4.5 ms[, 774 calls per step instead of 3])" */
static void put_most_in(pt_buf *out, const fn_change *f, double delta)
{
    if (!f)
        return;
    pt_buf_puts(out, ", most in ");
    put_function(out, f);
    pt_buf_puts(out, " (");
    put_signed_ms(out, delta);
    if (f->kind == FN_ADDED)
        pt_buf_puts(out, ", new");
    else if (f->kind == FN_REMOVED)
        pt_buf_puts(out, ", gone");
    else if (isfinite(f->calls_b) && isfinite(f->calls_a) && fabs(f->calls_a - f->calls_b) >= 0.5 &&
             fabs(f->calls_a - f->calls_b) > 0.1 * fmax(f->calls_b, 1))
        pt_buf_printf(out, ", %.4g calls per step instead of %.4g", f->calls_a, f->calls_b);
    pt_buf_putc(out, ')');
}

static double rank_delta_of(const fn_change *f, const change *ranks_of)
{
    double best = 0;
    for (size_t k = 0; k < f->exposed.rank_count; k++)
        for (size_t r = 0; r < ranks_of->rank_count; r++)
            if (f->exposed.ranks[k].rank == ranks_of->ranks[r].rank) {
                double dr = f->exposed.ranks[k].after - f->exposed.ranks[k].before;
                best = fabs(dr) > fabs(best) ? dr : best;
            }
    return best;
}

/* A straggler: ranks whose non-communication time moved in direction sign while the
 * median worker's waiting (communication or idle) moved the same way. Returns the class,
 * or -1. */
static int find_straggler_class(const change *parts, double sign)
{
    int best = -1;
    double best_delta = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        if (c == PT_CLASS_COMM)
            continue;
        for (size_t r = 0; r < parts[c].rank_count; r++) {
            double dr = parts[c].ranks[r].after - parts[c].ranks[r].before;
            if (sign * (dr - parts[c].delta) > 0 && sign * dr > best_delta)
                best = c, best_delta = sign * dr;
        }
    }
    return best;
}

static bool others_wait(const change *parts, double sign)
{
    const change *comm = &parts[PT_CLASS_COMM], *idle = &parts[PT_STEP_IDLE];
    return (comm->significant && sign * comm->delta > 0) || (idle->significant && sign * idle->delta > 0);
}

static void explain_straggler(pt_buf *out, pt_json *cause, const change *parts, const fn_list *fns, int cls,
                              double sign)
{
    /* The ranks that moved in this direction. */
    change moved = parts[cls];
    moved.rank_count = 0;
    for (size_t r = 0; r < parts[cls].rank_count; r++)
        if (sign * (parts[cls].ranks[r].after - parts[cls].ranks[r].before - parts[cls].delta) > 0)
            moved.ranks[moved.rank_count++] = parts[cls].ranks[r];
    double dr = moved.ranks[0].after - moved.ranks[0].before;
    put_ranks(out, moved.ranks, moved.rank_count, moved.rank_count);
    pt_buf_printf(out, ": %s time %s by ", part_labels[cls], sign > 0 ? "grew" : "fell");
    put_ms(out, fabs(dr));
    pt_buf_puts(out, " per step");
    const fn_change *f = top_function(fns, (pt_class)cls, sign, &moved, 0);
    put_most_in(out, f, f ? rank_delta_of(f, &moved) : 0);
    bool one = moved.rank_count == 1;
    if (others_wait(parts, sign)) {
        const change *wait = parts[PT_CLASS_COMM].significant ? &parts[PT_CLASS_COMM] : &parts[PT_STEP_IDLE];
        pt_buf_printf(out, "; the other workers %s for %s %s (%s ", sign > 0 ? "wait" : "no longer wait",
                      one ? "it" : "them", wait == &parts[PT_CLASS_COMM] ? "in collectives" : "idle",
                      part_labels[wait == &parts[PT_CLASS_COMM] ? PT_CLASS_COMM : PT_STEP_IDLE]);
        put_signed_ms(out, wait->delta);
        pt_buf_puts(out, " per step on the median worker)");
    }
    pt_buf_puts(out, ".");
    pt_json_add(cause, "class", pt_json_string(pt_class_name((pt_class)cls)));
    pt_json_add(cause, "function", f ? pt_json_string(f->name) : pt_json_null());
    pt_json *ranks = pt_json_add(cause, "ranks", pt_json_array());
    for (size_t r = 0; r < moved.rank_count; r++)
        pt_json_push(ranks, pt_json_int(moved.ranks[r].rank));
}

/* The median worker's classes that moved most in direction sign (two at most). */
static void explain_typical(pt_buf *out, pt_json *cause, const change *parts, const fn_list *fns, double sign)
{
    int order[PT_CLASS_COUNT], n = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        if (parts[c].significant && sign * parts[c].delta > 0)
            order[n++] = c;
    for (int i = 1; i < n; i++) /* insertion sort by |delta|, n <= 5 */
        for (int k = i; k > 0 && fabs(parts[order[k]].delta) > fabs(parts[order[k - 1]].delta); k--) {
            int t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
    if (n == 0) {
        const change *idle = &parts[PT_STEP_IDLE];
        pt_buf_printf(out, "No class of activity explains it%s", idle->significant ? ": idle time " : ".");
        if (idle->significant) {
            put_signed_ms(out, idle->delta);
            pt_buf_puts(out, " per step (waiting on something the trace does not show).");
        }
        pt_json_add(cause, "class", pt_json_string(idle->significant ? "idle" : ""));
        pt_json_add(cause, "function", pt_json_null());
        pt_json_add(cause, "ranks", pt_json_array());
        return;
    }
    const fn_change *first = NULL;
    for (int i = 0; i < n && i < 2; i++) {
        int c = order[i];
        const fn_change *f = top_function(fns, (pt_class)c, sign, NULL,
                                          MATERIAL_SHARE * fmax(parts[PT_STEP_DURATION].before, parts[PT_STEP_DURATION].after));
        first = i == 0 ? f : first;
        if (i == 0) {
            put_capitalized(out, part_labels[c]);
            pt_buf_printf(out, " time %s by ", sign > 0 ? "grew" : "fell");
            put_ms(out, fabs(parts[c].delta));
            pt_buf_puts(out, " per step");
        } else {
            pt_buf_printf(out, "; %s ", part_labels[c]);
            put_signed_ms(out, parts[c].delta);
        }
        put_most_in(out, f, f ? f->exposed.delta : 0);
    }
    pt_buf_puts(out, ".");
    pt_json_add(cause, "class", pt_json_string(pt_class_name((pt_class)order[0])));
    pt_json_add(cause, "function", first ? pt_json_string(first->name) : pt_json_null());
    pt_json_add(cause, "ranks", pt_json_array());
}

static size_t significant_functions(const fn_list *fns)
{
    size_t n = 0;
    for (size_t i = 0; i < fns->count; i++)
        n += fns->items[i].score > 0;
    return n;
}

/* The first hang finding of a run's diagnosis, or NULL. */
static const pt_json *hang_of(const pt_diff_run *run)
{
    const pt_json *findings = findings_of(run);
    for (size_t i = 0; findings && i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "category", ""), "hang") == 0)
            return findings->items[i];
    return NULL;
}

/* A run that hangs says more than any step time: its diagnosis's hang finding leads. */
static bool explain_hang(pt_buf *out, pt_json *v, pt_json *cause, const pt_diff_run *before, const pt_diff_run *after)
{
    const pt_json *hang_b = hang_of(before), *hang_a = hang_of(after);
    if (hang_a && !hang_b) {
        pt_json_add(v, "change", pt_json_string("hang"));
        pt_buf_printf(out, "AFTER hangs and BEFORE did not: %s", pt_json_get_string(hang_a, "summary", ""));
        pt_json_add(cause, "class", pt_json_string("hang"));
        pt_json_add(cause, "function", finding_function(hang_a));
        pt_json_add(cause, "ranks", finding_ranks(hang_a));
        return true;
    }
    if (hang_b && !hang_a)
        pt_buf_puts(out, "BEFORE hung and AFTER does not. ");
    return false;
}

/* ------------------------------------------------------------ what the runs ran on */

/* The first GPU model and the first software list any worker of a run states ("" when
 * none does), and the world size its report gives (0 unknown). */
static const char *first_stated(const side *s, bool software)
{
    for (size_t w = 0; w < s->a.n; w++) {
        const char *v = software ? s->a.workers[w]->software : s->a.workers[w]->device_name;
        if (v && *v)
            return v;
    }
    return "";
}

static void add_difference(pt_json *list, const char *what, const char *before, const char *after)
{
    pt_json *d = pt_json_push(list, pt_json_object());
    pt_json_add(d, "what", pt_json_string(what));
    pt_json_add(d, "before", pt_json_string(before));
    pt_json_add(d, "after", pt_json_string(after));
}

/* The next "name version" of a software list ("torch 2.5.1, nccl 2.21.5"): false at its
 * end. The name is everything before the last space. */
static bool next_component(const char **p, char *name, size_t name_cap, char *version, size_t version_cap)
{
    while (*p && **p) {
        const char *end = strstr(*p, ", ");
        size_t len = end ? (size_t)(end - *p) : strlen(*p);
        size_t space = len;
        while (space > 0 && (*p)[space - 1] != ' ')
            space--;
        const char *item = *p;
        *p = end ? end + 2 : NULL;
        if (space > 1) {
            snprintf(name, name_cap, "%.*s", (int)(space - 1), item);
            snprintf(version, version_cap, "%.*s", (int)(len - space), item + space);
            return true;
        }
    }
    return false;
}

/* Each component both software lists name, with a different version. */
static void add_software_differences(pt_json *list, const char *before, const char *after)
{
    char name[64], was[64], other[64], now[64];
    for (const char *p = before; next_component(&p, name, sizeof name, was, sizeof was);)
        for (const char *q = after; next_component(&q, other, sizeof other, now, sizeof now);)
            if (strcmp(name, other) == 0 && strcmp(was, now) != 0)
                add_difference(list, name, was, now);
}

/* What the two runs ran on, where it differs: the GPU model, the job's world size, the
 * versions of the software both name. A change there explains a change of step time
 * better than any function can, so the verdict leads with it. */
static pt_json *environment_json(const diff_ctx *d)
{
    pt_json *list = pt_json_array();
    const char *gpu_b = first_stated(&d->before, false), *gpu_a = first_stated(&d->after, false);
    if (*gpu_b && *gpu_a && strcmp(gpu_b, gpu_a) != 0)
        add_difference(list, "GPU", gpu_b, gpu_a);
    double ws_b = world_size_of(&d->before), ws_a = world_size_of(&d->after);
    if (ws_b > 0 && ws_a > 0 && ws_b != ws_a) {
        char b[32], a[32];
        snprintf(b, sizeof b, "%g", ws_b);
        snprintf(a, sizeof a, "%g", ws_a);
        add_difference(list, "world size", b, a);
    }
    add_software_differences(list, first_stated(&d->before, true), first_stated(&d->after, true));
    return list;
}

/* "The runs ran on different setups (GPU A100 -> V100; world size 8 -> 2), which alone
 * can change the step time. " */
static void put_environment(pt_buf *out, const pt_json *environment)
{
    pt_buf_puts(out, "The runs ran on different setups (");
    for (size_t i = 0; i < environment->count; i++) {
        const pt_json *d = environment->items[i];
        pt_buf_printf(out, "%s%s %s \xe2\x86\x92 %s", i ? "; " : "", pt_json_get_string(d, "what", ""),
                      pt_json_get_string(d, "before", ""), pt_json_get_string(d, "after", ""));
    }
    pt_buf_puts(out, "), which alone can change the step time. ");
}

static pt_json *verdict_json(const diff_ctx *d, const change *parts, const fn_list *fns)
{
    bool paired = d->paired;
    const pt_diff_run *before = d->before.run, *after = d->after.run;
    const change *step = &parts[PT_STEP_DURATION];
    pt_json *v = pt_json_object();
    pt_buf s = PT_BUF_INIT;
    pt_json *cause = pt_json_object();
    pt_json *environment = environment_json(d);
    if (environment->count)
        put_environment(&s, environment);
    bool hang = explain_hang(&s, v, cause, before, after);
    if (hang) {
        /* the hang is the verdict */
    } else if (step->significant) {
        double sign = step->delta > 0 ? 1 : -1;
        pt_json_add(v, "change", pt_json_string(sign > 0 ? "slower" : "faster"));
        pt_buf_puts(&s, "AFTER is ");
        put_ms(&s, fabs(step->delta));
        if (step->before > 0)
            pt_buf_printf(&s, " (%.3g%%)", 100 * fabs(step->delta) / step->before);
        pt_buf_printf(&s, " %s per step than BEFORE (", sign > 0 ? "slower" : "faster");
        put_ms(&s, step->before);
        pt_buf_puts(&s, " \xe2\x86\x92 "); /* U+2192 arrow */
        put_ms(&s, step->after);
        pt_buf_puts(&s, "). ");
        int straggler = paired ? find_straggler_class(parts, sign) : -1;
        if (straggler >= 0)
            explain_straggler(&s, cause, parts, fns, straggler, sign);
        else
            explain_typical(&s, cause, parts, fns, sign);
    } else {
        pt_json_add(v, "change", pt_json_string("unchanged"));
        pt_buf_puts(&s, "Step time did not change beyond noise (");
        put_ms(&s, step->before);
        pt_buf_puts(&s, " \xe2\x86\x92 ");
        put_ms(&s, step->after);
        pt_buf_puts(&s, ", threshold \xc2\xb1");
        put_ms(&s, step->threshold);
        size_t changed = significant_functions(fns);
        if (changed == 0) {
            pt_buf_puts(&s, ") and no function's time per step changed beyond noise.");
            pt_json_free(cause);
            cause = NULL;
        } else {
            const fn_change *f = &fns->items[0]; /* sorted: the largest change */
            pt_buf_puts(&s, "), but ");
            put_function(&s, f);
            pt_buf_puts(&s, " changed by ");
            put_signed_ms(&s, f->exposed.significant ? f->exposed.delta : rank_delta_of(f, &f->exposed));
            pt_buf_printf(&s, " per step%s", f->exposed.significant ? "" : " on some ranks");
            if (changed > 1)
                pt_buf_printf(&s, " (and %zu more function%s)", changed - 1, changed > 2 ? "s" : "");
            pt_buf_puts(&s, ".");
            pt_json_add(cause, "class", pt_json_string(pt_class_name(f->cls)));
            pt_json_add(cause, "function", pt_json_string(f->name));
            pt_json *ranks = pt_json_add(cause, "ranks", pt_json_array());
            for (size_t r = 0; r < f->exposed.rank_count; r++)
                pt_json_push(ranks, pt_json_int(f->exposed.ranks[r].rank));
        }
    }
    if (environment->count && cause && !hang) /* the setup comes first; the function is what changed most */
        pt_json_set(cause, "class", pt_json_string("environment"));
    pt_json_add(v, "sentence", pt_json_string(pt_buf_cstr(&s)));
    pt_json_add(v, "cause", cause ? cause : pt_json_null());
    pt_json_add(v, "environment", environment);
    pt_buf_free(&s);
    return v;
}

/* ------------------------------------------------------------ notes */

static bool same_ranks(const side *b, const side *a)
{
    if (b->a.n != a->a.n || b->a.n == 0)
        return false;
    for (size_t w = 0; w < b->a.n; w++)
        if (pt_worker_rank(&b->a, w) != pt_worker_rank(&a->a, w))
            return false;
    return true;
}

static void note(pt_json *notes, const char *fmt, ...) PT_PRINTF(2, 3);
static void note(pt_json *notes, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pt_json_push(notes, pt_json_string(text));
}

static void add_notes(pt_json *notes, const diff_ctx *d)
{
    const side *sides[2] = {&d->before, &d->after};
    static const char *const names[2] = {"BEFORE", "AFTER"};
    if (d->paired)
        note(notes, "Both runs have the same %zu rank%s: figures are the median worker's, and ranks whose change "
                    "stands out from the others' are listed.",
             d->before.a.n, d->before.a.n == 1 ? "" : "s");
    else if (d->before.a.n == 1 && d->after.a.n == 1)
        note(notes, "Each run has one worker (BEFORE rank %d, AFTER rank %d): the two are compared directly.",
             pt_worker_rank(&d->before.a, 0), pt_worker_rank(&d->after.a, 0));
    else
        note(notes, "BEFORE has %zu worker%s and AFTER %zu%s: figures are the median worker's (per-worker "
                    "medians), not rank by rank.",
             d->before.a.n, d->before.a.n == 1 ? "" : "s", d->after.a.n,
             d->before.a.n == d->after.a.n ? ", with other ranks" : "");
    double ws_b = world_size_of(&d->before), ws_a = world_size_of(&d->after);
    if (ws_b > 0 && ws_a > 0 && ws_b != ws_a)
        note(notes, "The runs come from jobs of different sizes (world size %g and %g).", ws_b, ws_a);
    bool reports[2] = {d->before.run->source == PT_RUN_REPORT, d->after.run->source == PT_RUN_REPORT};
    if (reports[0] || reports[1])
        note(notes, "%s, which carr%s less than traces or summaries: bottleneck ratios of the 10 costliest "
                    "kernels, of runtime calls over 0.1%% and of Python stacks over 1%% on some worker, and no execution "
                    "counts or total times. A kernel, runtime call or Python stack it does not list is not compared; "
                    "only memory operations and collectives are judged added or removed.",
             reports[0] && reports[1] ? "BEFORE and AFTER are report.json files" : reports[0] ? "BEFORE is a report.json"
                                                                                      : "AFTER is a report.json",
             reports[0] && reports[1] ? "y" : "ies");
    for (int i = 0; i < 2; i++) {
        const side *s = sides[i];
        if (!isfinite(s->noise[PT_STEP_DURATION]))
            note(notes, "%s has fewer than two profiled steps on most workers, so its step-to-step noise is unknown: "
                        "its changes are judged by size (%g%% of the step time)%s.",
                 names[i], 100 * MATERIAL_SHARE, s->a.n >= MIN_SPREAD_WORKERS ? " and by the spread across workers" : "");
    }
    pt_json *db = devices_json(&d->before), *da = devices_json(&d->after);
    if (db->count && da->count && strcmp(db->items[0]->string, da->items[0]->string) != 0)
        note(notes, "The runs used different GPUs (%s; %s): kernel times are not comparable one for one.",
             db->items[0]->string, da->items[0]->string);
    pt_json_free(db);
    pt_json_free(da);
}

/* ------------------------------------------------------------ the document */

/* fns is sorted by score (largest change first). */
static void add_function_lists(pt_json *doc, const fn_list *fns)
{
    pt_json *changed = pt_json_add(doc, "functions", pt_json_array());
    pt_json *added = pt_json_array(), *removed = pt_json_array();
    size_t counts[3] = {0, 0, 0};
    for (size_t i = 0; i < fns->count; i++) {
        const fn_change *f = &fns->items[i];
        if (f->kind == FN_CHANGED && f->score == 0)
            continue;
        pt_json *list = f->kind == FN_ADDED ? added : f->kind == FN_REMOVED ? removed : changed;
        if (counts[f->kind]++ < (f->kind == FN_CHANGED ? MAX_CHANGED : MAX_LISTED))
            pt_json_push(list, function_json(f));
    }
    pt_json_add(doc, "functions_changed", pt_json_int((int64_t)counts[FN_CHANGED]));
    pt_json_add(doc, "functions_compared", pt_json_int((int64_t)fns->count));
    pt_json_add(doc, "added", added);
    pt_json_add(doc, "added_count", pt_json_int((int64_t)counts[FN_ADDED]));
    pt_json_add(doc, "removed", removed);
    pt_json_add(doc, "removed_count", pt_json_int((int64_t)counts[FN_REMOVED]));
}

static void add_warnings(pt_json *doc, const pt_diff_run *before, const pt_diff_run *after)
{
    pt_json *list = pt_json_add(doc, "warnings", pt_json_array());
    const pt_diff_run *runs[2] = {before, after};
    static const char *const names[2] = {"BEFORE", "AFTER"};
    pt_buf line = PT_BUF_INIT;
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < runs[i]->warning_count; k++) {
            pt_buf_reset(&line);
            pt_buf_printf(&line, "%s: %s", names[i], runs[i]->warnings[k]);
            pt_json_push(list, pt_json_string(line.data));
        }
    pt_buf_free(&line);
}

pt_json *pt_diff(const pt_diff_run *before, const pt_diff_run *after, const char *generated_at)
{
    diff_ctx d;
    memset(&d, 0, sizeof d);
    side_init(&d.before, before);
    side_init(&d.after, after);
    d.paired = same_ranks(&d.before, &d.after);
    size_t n = d.before.a.n > d.after.a.n ? d.before.a.n : d.after.a.n;
    values *all[] = {&d.b, &d.a, &d.m, &d.delta};
    for (size_t i = 0; i < PT_ARRAY_LEN(all); i++)
        values_alloc(all[i], n);
    d.before_at = pt_xmalloc((n + 1) * sizeof *d.before_at);
    d.after_at = pt_xmalloc((n + 1) * sizeof *d.after_at);
    d.scratch = pt_xmalloc((n + 1) * sizeof *d.scratch);

    /* The floor first: it needs the step times, which are compared with it. */
    part_values(&d.before, PT_STEP_DURATION, d.b.value);
    part_values(&d.after, PT_STEP_DURATION, d.a.value);
    double step_b = d.before.a.n ? pt_median_of(d.b.value, d.before.a.n, d.scratch) : 0;
    double step_a = d.after.a.n ? pt_median_of(d.a.value, d.after.a.n, d.scratch) : 0;
    d.floor_ms = MATERIAL_SHARE * fmax(step_b, step_a);

    change parts[PT_STEP_PART_COUNT];
    for (int p = 0; p < PT_STEP_PART_COUNT; p++)
        parts[p] = compare_part(&d, p);
    fn_list fns = {0};
    collect_functions(&d, &fns);
    if (fns.count) /* none: items is NULL, which qsort may not be given */
        qsort(fns.items, fns.count, sizeof *fns.items, by_score);

    pt_json *doc = pt_json_object();
    char now[32];
    if (!generated_at)
        pt_iso_now(now, sizeof now);
    pt_json_add(doc, "diff_version", pt_json_int(1));
    pt_json_add(doc, "perftracker_version", pt_json_string(PT_VERSION));
    pt_json_add(doc, "generated_at", pt_json_string(generated_at ? generated_at : now));
    pt_json_add(doc, "before", run_json(&d.before, &parts[PT_STEP_DURATION], true));
    pt_json_add(doc, "after", run_json(&d.after, &parts[PT_STEP_DURATION], false));
    pt_json_add(doc, "comparison", pt_json_string(d.paired ? "rank by rank" : "median worker"));
    pt_json_add(doc, "verdict", verdict_json(&d, parts, &fns));
    pt_json *step = pt_json_add(doc, "step_time", pt_json_object());
    add_change(step, &parts[PT_STEP_DURATION]);
    pt_json *classes = pt_json_add(doc, "classes", pt_json_array());
    for (int p = 0; p <= PT_STEP_IDLE; p++) {
        pt_json *c = pt_json_push(classes, pt_json_object());
        pt_json_add(c, "class", pt_json_string(p == PT_STEP_IDLE ? "idle" : pt_class_name((pt_class)p)));
        add_change(c, &parts[p]);
    }
    add_function_lists(doc, &fns);
    pt_json_add(doc, "findings", findings_json(before, after));
    pt_json *notes = pt_json_add(doc, "notes", pt_json_array());
    add_notes(notes, &d);
    add_warnings(doc, before, after);

    free(fns.items);
    for (size_t i = 0; i < PT_ARRAY_LEN(all); i++)
        values_free(all[i]);
    free(d.before_at);
    free(d.after_at);
    free(d.scratch);
    side_free(&d.before);
    side_free(&d.after);
    return doc;
}
