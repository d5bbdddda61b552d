/* diff.c -- what changed between two runs: step time, each class's exposed time and every
 * function's time per step, judged against noise (diff_document.c then writes the verdict
 * sentence and the rest of diff.json).
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
 * diff_document.c turns the comparison into diff.json: the verdict sentence and its
 * cause, the runs' findings matched, the setups compared and the notes; diff_state.h is
 * what the two files share.
 *
 * Cost: one pt_analysis per run for its workers' figures (steps, windows, step times).
 * Functions are read from their records (fn_table): a worker without a function counts
 * as 0, so each median of a function is taken over the workers that have it and a count
 * of zeros (pt_median_with, the same value pt_median gives over every worker). A function
 * costs what the runs hold of it, and the comparison is linear in the runs' records (and
 * in a report's job-wide values, which run.c bounds by the report's size), not in
 * functions x workers. Memory is the table's refs and a few arrays of n values. */
#include "compare/diff_state.h"
#include "util/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIGMAS 3.0
#define RANK_SIGMAS 4.0
/* A claim about a few ranks needs more: the workers of one healthy job differ persistently
 * by a percent or two (GPU clocks, host speed), and a rerun reshuffles who is fastest. The
 * diagnosis uses the same 2% of the step before it names some workers (findings.c). */
#define RANK_MATERIAL_SHARE 0.02
#define MEDIAN_ERROR 1.2533  /* standard error of a median, in sigma / sqrt(n) */
#define SEPARATED_MIN_STEPS 4 /* per run, for "every step slower" to count (steps_apart) */

/* ------------------------------------------------------------ one run, prepared */

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

/* ------------------------------------------------------------ the two runs */

static bool same_ranks(const side *b, const side *a)
{
    if (b->a.n != a->a.n || b->a.n == 0)
        return false;
    for (size_t w = 0; w < b->a.n; w++)
        if (pt_worker_rank(&b->a, w) != pt_worker_rank(&a->a, w))
            return false;
    return true;
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

    pt_json *doc = diff_document(&d, parts, &fns, generated_at);

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
