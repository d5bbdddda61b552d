/* peers.c -- every worker against its peers: the diagnosis of slow workers.
 *
 * In a synchronous job every rank runs the same code, so each should do the same work in
 * the same time; where one does not, that is a cause. Waiting is never a cause: the fast
 * workers wait in collectives for the slow one, and the summaries already count blocked
 * frames (backward while the autograd thread runs, a call waiting for gloo's threads) as
 * waiting, not as Python.
 *
 * Per function (kernel, copy kind, runtime API, Python stack) a worker is above its peers
 * when its exposed time per step exceeds the typical worker's (the median) and:
 *  - Calls (exact). Identical ranks make identical calls even when durations are noisy,
 *    so a worker running a function the others do not (or barely), or calling it more
 *    often, does extra work; it is named when the excess clears the floor (3% of a step),
 *    on the GPU (kernels, copies) summed over the worker's functions of the class: a
 *    pipeline stage's extra layer is many kernels, each under the floor (gpu_extra).
 *  - Time (statistical). Same calls, more time: the excess must clear the noise, 5
 *    sigma of what is left of each worker's per-step values once each step's median is
 *    taken out (over sqrt(steps) for the mean), or 5 sigma of the spread across workers
 *    when steps cannot be compared, and hold in every step (all but one of four or
 *    more): four processes sharing a GPU inflate one step here and another there, which
 *    is not a slow worker; one above by 5 sigma in each step is, however its own excess
 *    varies, and so is one further up in every step than chance puts 0.01 of the
 *    workers (peer_noise.c). It must also clear the machine-wide swing (how far the
 *    typical worker's own time moves from step to step): a loaded machine slows everyone
 *    by a factor that changes every step and lands unevenly. On a host whose CPU is
 *    saturated and shared by several workers, CPU-side time is the scheduler's share:
 *    a function whose typical time swings there is load-bound and names no rank, and
 *    other CPU-side excess must be the same size in every step (pt_peer_time_threshold).
 *  - Graded (against the fastest). The same calls taking consistently different times
 *    on several workers (rank r sleeps r s) are judged against the fastest workers of
 *    each step, not the median a grade drags up (where no worker calls it more often: a
 *    pipeline stage running more layers is extra work, and one running fewer is not
 *    faster at the same work); who arrived last plays no part, so a
 *    loaded machine that reshuffles arrivals every step does not hide it. Most workers
 *    above one by the same amount is that one being odd, not a grade (graded_rows).
 * Whole classes are judged the same way, for slowness spread over many functions (a
 * uniformly slower GPU), and named by the function with the largest excess.
 * A host whose CPU is contended or throttled slows everything the CPU does by a similar
 * factor: when a worker's CPU-side time (runtime calls and Python) stands out and most of
 * it is in functions called as often as elsewhere but slower per call, that is one host
 * finding, not a finding per operator.
 * A GPU slowed as a whole (clocks, heat) makes every kernel slower by a similar factor:
 * one finding for those workers, costed at the whole class. Neither needs the worker to
 * hold the others up in half its segments: whether fixing it saves anything is its
 * impact (a contended host that the noise of processes sharing GPUs hides in two steps
 * of three still paces the third).
 * Who holds the others up is causal, from the step model (whatif.h): a worker among the
 * busiest (within a tie: the floor, or the machine's swing between segments) in half its
 * segments. The worker busiest in every segment, each time by more than a tie, is the
 * straggler however noisy its steps (on a saturated shared CPU, only when its lead is
 * the same size every time); so is one that waits far less than its peers (exposed
 * communication plus idle, compared like everything else). A lead that load-bound
 * CPU time explains names nobody (lead_is_load). A straggler no finding names yet is explained by its largest excess covering
 * half its lead, else as untraced time; when its function is one the other workers also
 * spend more time in than the fastest (rank r sleeps r s), they are named with it, the
 * straggler first (graded). Sentences are written once the model has costed each
 * finding (pt_describe_peer_finding); a cause found as several functions (findings.c,
 * pt_merge_causes) gets one sentence naming each part with its own evidence
 * (describe_group), and a rolled-up finding ends with the parts it holds. */
#include "diagnose/finding.h"
#include "diagnose/costing.h"
#include "diagnose/peer_noise.h"
#include "diagnose/whatif.h"
#include "summarize/classify.h"
#include "util/parallel.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MORE_CALLS_SHARE 0.05 /* more calls: at least one more per step, and 5% more */
#define UNIFORM_FACTOR 1.05   /* a host is slow when its calls typically take 1.05x as long ... */
#define UNIFORM_SHARE 0.6     /* ... and 60% of its CPU-side functions are slowed by at least
                                 half that factor: similar everywhere, not one slow call */
#define UNIFORM_MIN_FUNCTIONS 5 /* ... judged on at least this many functions */
#define EXPLAINED_SHARE 0.5   /* a function explains a straggler when it covers half its lead */

/* -----------------------------------------------: who holds the others up. A worker
 * that spends longer than its peers in the same calls but does not make them wait (it
 * waits as long as they do) costs the job nothing; its excess is noise or slack. */
typedef struct peer_context {
    bool *host_slow;   /* [w]: named by a host finding; its CPU-side functions are not */
    bool *gpu_slow;    /* [w]: named by a slow-GPU finding; its kernels are not */
    double *extra_cpu; /* [w]: CPU-side excess already named as extra calls */
    double *lead;      /* [w]: how much less than the typical worker it waits, when real */
    bool has_waiting;  /* the workers wait at all (collectives, or idle between them) */
    bool *paces;       /* [w]: among the busiest workers of the step model's segments */
    size_t setter;     /* the worker busiest in every segment, or SIZE_MAX */
} peer_context;

static bool holds_others_up(const peer_context *c, size_t w)
{
    return !c->has_waiting || c->paces[w];
}

/* ------------------------------------------------------------ evidence */

static pt_evidence call_evidence(double calls, double peer_calls)
{
    if (peer_calls < 0.5)
        return calls > 0 ? PT_EVIDENCE_ONLY_HERE : PT_EVIDENCE_SLOWER;
    if (calls >= peer_calls + fmax(1.0, MORE_CALLS_SHARE * peer_calls))
        return PT_EVIDENCE_MORE_CALLS;
    return PT_EVIDENCE_SLOWER;
}

typedef struct named {
    size_t worker;
    double value, median, excess;
    pt_evidence evidence;
    double calls, peer_calls;
} named;

/* Names a worker on the finding for (cls, row), creating it when needed. The finding's
 * evidence (and so its sentence) is that of the worker with the largest excess. */
static void name_on_row(finding_list *list, const pt_fn_row *row, const named *who)
{
    finding *f = NULL; /* a slow GPU's finding is named by a kernel too, and is not this one */
    for (size_t i = 0; i < list->count && !f; i++)
        if (list->items[i].evidence != PT_EVIDENCE_UNIFORM && strcmp(list->items[i].category, pt_category_of(row->cls)) == 0 &&
            strcmp(list->items[i].function, row->name) == 0)
            f = &list->items[i];
    if (!f) {
        f = pt_finding_add(list, pt_category_of(row->cls), row->name, pt_section_of(row->cls));
        f->cls = row->cls;
        f->median = who->median;
    }
    if (!pt_finding_names(f, who->worker))
        pt_finding_name_worker(f, who->worker, who->value);
    if (who->excess > f->excess_ms || f->evidence == PT_EVIDENCE_NONE) {
        f->excess_ms = fmax(f->excess_ms, who->excess);
        f->evidence = who->evidence;
        f->calls = who->calls;
        f->peer_calls = who->peer_calls;
    }
    /* Slowness spread over a class is fixed as the class; else the function. */
    f->row = row;
    f->fix = f->evidence == PT_EVIDENCE_CLASS ? PT_FIX_CLASSES : PT_FIX_ROW;
    f->classes = PT_CLASS_BIT(row->cls);
}

/* ------------------------------------------------------------ functions and classes */

/* Whether any worker has exact evidence (more calls, or calls only it makes) on a row. */
static bool any_exact_evidence(const double *calls, size_t n, double peer_calls)
{
    for (size_t w = 0; w < n; w++)
        if (call_evidence(calls[w], peer_calls) != PT_EVIDENCE_SLOWER)
            return true;
    return false;
}

/* Extra GPU work (kernels or copies the others do not run, or run fewer times) is judged
 * per worker and class, not per function: a pipeline stage running more layers than the
 * others runs every kernel of a layer more often, each under the floor, together its
 * whole extra layer. Each function's excess is held here until the worker's sum over the
 * class is known; all of them are named when it clears the floor (pt_merge_causes makes
 * them one finding). */
typedef struct gpu_extra {
    const pt_fn_row *row;
    named who;
} gpu_extra;

static bool gpu_side(pt_class cls)
{
    return cls == PT_CLASS_COMPUTE || cls == PT_CLASS_MEMORY;
}

/* One pass over the functions: the exact evidence (extra calls) first, then, once slow
 * hosts are known, more time in the same calls. The exact pass measures a row's times
 * (steps + 1 medians over every worker) only where some worker calls it more: most
 * rows, nowhere. */
static void peer_rows(const pt_analysis *a, finding_list *list, peer_context *c, bool exact_pass)
{
    peer_values v;
    pt_peer_values_init(&v, a, a->function_steps);
    double *calls = pt_xmalloc((a->n ? a->n : 1) * sizeof *calls);
    double *gpu_sum = pt_xcalloc(2 * (a->n ? a->n : 1), sizeof *gpu_sum); /* [w * 2 + (memory)] */
    gpu_extra *extra = NULL;
    size_t extra_count = 0, extra_cap = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls == PT_CLASS_COMM)
            continue;
        pt_row_calls_per_step(a, row, calls);
        double peer_calls = pt_median_of(calls, a->n, a->scratch);
        if (exact_pass && !any_exact_evidence(calls, a->n, peer_calls))
            continue;
        pt_peer_row_values(a, row, &v);
        for (size_t w = 0; w < a->n; w++) {
            if (v.mean[w] <= v.median || (!exact_pass && c->host_slow[w] && pt_peer_cpu_side(row->cls)) ||
                (!exact_pass && c->gpu_slow[w] && row->cls == PT_CLASS_COMPUTE))
                continue;
            pt_evidence evidence = call_evidence(calls[w], peer_calls);
            bool exact = evidence != PT_EVIDENCE_SLOWER;
            if (exact != exact_pass || (!exact && !holds_others_up(c, w)))
                continue;
            if (exact && gpu_side(row->cls)) { /* judged with the worker's other extra GPU work */
                if (pt_peer_above_in_steps(&v, w)) {
                    PT_GROW(extra, extra_cap, extra_count + 1);
                    extra[extra_count++] = (gpu_extra){row, {w, v.mean[w], v.median, v.mean[w] - v.median, evidence,
                                                             calls[w], peer_calls}};
                    gpu_sum[w * 2 + (row->cls == PT_CLASS_MEMORY)] += v.mean[w] - v.median;
                }
                continue;
            }
            double excess = pt_peer_real_excess(a, &v, w, exact);
            if (excess > 0) {
                named who = {w, v.mean[w], v.median, excess, evidence, calls[w], peer_calls};
                name_on_row(list, row, &who);
                if (pt_peer_cpu_side(row->cls))
                    c->extra_cpu[w] += excess;
            }
        }
    }
    for (size_t k = 0; k < extra_count; k++)
        if (gpu_sum[extra[k].who.worker * 2 + (extra[k].row->cls == PT_CLASS_MEMORY)] > pt_floor_ms(a))
            name_on_row(list, extra[k].row, &extra[k].who);
    free(extra);
    free(gpu_sum);
    free(calls);
    pt_peer_values_free(&v);
}

/* Graded work: the same calls taking different times on several workers, each
 * consistently (rank r sleeps r s). Against the typical worker a grade hides: with ranks
 * at 0, 200, 400 and 600 ms the median is 300, and the worst is "only" 300 ms above it,
 * under the floor of a slow step, while ranks 1 and 2 look like noise. Against the
 * fastest workers (those within the floor of the least time, per step) each of them is
 * above by what it really spends more, and that excess must hold from step to step: clear
 * STEP_SIGMAS of the noise of its own per-step excess (over sqrt(steps)) and the
 * machine's swing. A matmul the
 * loaded machine makes 7 s in one step and 5 s in the next on the fastest rank is no
 * grade, and neither are most workers above one by the same amount (that one is the odd
 * one out, not the others slow). No one has to be seen holding the others up: on a loaded machine
 * who arrives last in a step is chance, while the grade is in every step; what fixing it
 * saves is the step model's (its impact), and the grade's finding names the most first
 * (name_graded). Two workers or more, not all; one alone, when it holds the others up:
 * a straggler the median of a spread hides (its 600 ms are 262 above the 338 of the
 * typical worker, under the floor of a 9 s step). */
/* Excesses this close are one amount, not a grade: within the floor, or within a third
 * of the largest. Waiting measured inside a function is noisy: DDP's backward blocks in
 * the gradient all-reduce on every rank but the slow one, 119 and 144 ms above it on two
 * of three (collector.fault_job), while a grade (rank r sleeps r s) spaces its levels by
 * at least half the largest. */
static double same_amount(double floor, double most_excess)
{
    return fmax(floor, most_excess / 3.0);
}

static void graded_rows(const pt_analysis *a, finding_list *list, const peer_context *c)
{
    size_t n = a->n, steps = a->function_steps;
    if (steps < 2)
        return;
    peer_values v;
    pt_peer_values_init(&v, a, steps);
    double *calls = pt_xmalloc(n * sizeof *calls), *column = pt_xmalloc(n * sizeof *column);
    double *reference = pt_xmalloc(steps * sizeof *reference), floor = pt_floor_ms(a);
    double *excess = pt_xmalloc(steps * sizeof *excess);
    bool *graded = pt_xmalloc(n * sizeof *graded);
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls == PT_CLASS_COMM)
            continue;
        pt_peer_row_values(a, row, &v);
        pt_row_calls_per_step(a, row, calls);
        double peer_calls = pt_median_of(calls, n, a->scratch), ref_mean = 0;
        /* Some worker calls it more often: the times differ by the calls (a pipeline stage
         * running more layers than the typical worker, and one running fewer), which is
         * extra work, judged against the typical worker (peer_rows), not a grade. */
        if (any_exact_evidence(calls, n, peer_calls))
            continue;
        for (size_t s = 0; s < steps; s++) { /* the fastest workers of each step */
            double least = INFINITY;
            for (size_t w = 0; w < n; w++)
                least = fmin(least, v.per_step[w * steps + s]);
            size_t k = 0;
            for (size_t w = 0; w < n; w++)
                if (v.per_step[w * steps + s] <= least + floor)
                    column[k++] = v.per_step[w * steps + s];
            reference[s] = pt_median_of(column, k, a->scratch);
            ref_mean += reference[s] / (double)steps;
        }
        size_t count = 0;
        double least_excess = INFINITY, most_excess = 0;
        for (size_t w = 0; w < n; w++) {
            size_t above = 0;
            for (size_t s = 0; s < steps; s++) {
                excess[s] = v.per_step[w * steps + s] - reference[s];
                above += excess[s] > floor / 2;
            }
            double noise = pt_sample_sd(excess, steps) / sqrt((double)steps);
            double mean = v.mean[w] - ref_mean;
            graded[w] = call_evidence(calls[w], peer_calls) == PT_EVIDENCE_SLOWER && above + (steps >= 4) >= steps &&
                        !pt_peer_load_bound(&v, w) && mean > fmax(fmax(floor, v.swing), STEP_SIGMAS * noise);
            count += graded[w];
            if (graded[w])
                least_excess = fmin(least_excess, mean), most_excess = fmax(most_excess, mean);
        }
        if (count == 0 || count >= n || (2 * count > n && most_excess - least_excess <= same_amount(floor, most_excess)))
            continue;
        for (size_t w = 0; w < n; w++)
            if (graded[w] && (count >= 2 || holds_others_up(c, w))) {
                named who = {w, v.mean[w], ref_mean, v.mean[w] - ref_mean, PT_EVIDENCE_SLOWER, calls[w], peer_calls};
                name_on_row(list, row, &who);
            }
    }
    free(calls);
    free(column);
    free(reference);
    free(excess);
    free(graded);
    pt_peer_values_free(&v);
}

/* The function of the classes `allowed` marks with the largest excess over the typical
 * worker on worker w (communication never: it is the waiting). */
static const pt_fn_row *largest_excess(const pt_analysis *a, size_t w, const bool allowed[PT_CLASS_COUNT],
                                       named *out)
{
    double *values = pt_xmalloc(a->n * sizeof *values), *calls = pt_xmalloc(a->n * sizeof *calls);
    const pt_fn_row *best = NULL;
    out->excess = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        pt_function_summary cell;
        if (row->cls == PT_CLASS_COMM || !allowed[row->cls] || !pt_row_function(a, row, w, &cell))
            continue;
        pt_row_exposed_ms(a, row, values);
        double median = pt_median_of(values, a->n, a->scratch);
        if (values[w] - median <= out->excess)
            continue;
        pt_row_calls_per_step(a, row, calls);
        double peer_calls = pt_median_of(calls, a->n, a->scratch);
        *out = (named){w, values[w], median, values[w] - median, call_evidence(calls[w], peer_calls), calls[w],
                       peer_calls};
        best = row;
    }
    free(values);
    free(calls);
    return best;
}

static bool class_names_worker(const finding_list *list, pt_class cls, size_t w)
{
    for (size_t i = 0; i < list->count; i++)
        if (!list->items[i].all_workers && list->items[i].cls == cls &&
            strcmp(list->items[i].category, pt_category_of(cls)) == 0 && pt_finding_names(&list->items[i], w))
            return true;
    return false;
}

/* A class above its peers with no function of it named: slowness spread over many
 * functions, named by the one with the largest excess, costed at the class's excess. */
static void peer_classes(const pt_analysis *a, finding_list *list, const peer_context *c)
{
    static const pt_class judged[] = {PT_CLASS_COMPUTE, PT_CLASS_MEMORY, PT_CLASS_RUNTIME, PT_CLASS_PYTHON};
    peer_values v;
    pt_peer_values_init(&v, a, a->aligned_steps);
    for (size_t k = 0; k < PT_ARRAY_LEN(judged); k++) {
        pt_class cls = judged[k];
        pt_peer_class_values(a, cls, &v);
        for (size_t w = 0; w < a->n; w++) {
            if ((c->host_slow[w] && pt_peer_cpu_side(cls)) || (c->gpu_slow[w] && cls == PT_CLASS_COMPUTE) ||
                class_names_worker(list, cls, w) || !holds_others_up(c, w))
                continue;
            double excess = pt_peer_real_excess(a, &v, w, false);
            bool only[PT_CLASS_COUNT] = {false};
            only[cls] = true;
            named who;
            const pt_fn_row *row = excess > 0 ? largest_excess(a, w, only, &who) : NULL;
            if (!row)
                continue;
            if (who.excess < EXPLAINED_SHARE * excess)
                who.evidence = PT_EVIDENCE_CLASS;
            who.excess = excess;
            name_on_row(list, row, &who);
        }
    }
    pt_peer_values_free(&v);
}

/* ------------------------------------------------------------ slow hosts */

/* What slower_per_call compares a worker's row with, once per row instead of once per
 * worker and row (that was n^2 x rows: hours at 100 000 workers): the median calls per
 * step over every worker, and the three middle values of the per-call times of the
 * workers that call it, from which the median of the others is read without the
 * worker's own (median_without). Three values, not the sorted times: selecting them is
 * linear, where sorting 100 000 per row was n log n and held rows x workers doubles. */
typedef struct per_call_rows {
    double *peer_calls;   /* [row] */
    double (*middle)[3];  /* [row]: the per-call times' ranks u - 1, u, u + 1 (middle_index) */
    size_t *present;      /* [row]: how many workers call it */
    size_t *compared;     /* the rows a worker is compared on: of the classes, no waits */
    size_t compared_count;
} per_call_rows;

/* u: the upper middle of the m - 1 values left once one is taken out. */
static size_t middle_index(size_t m)
{
    return (m - 1) / 2;
}

static void per_call_rows_init(const pt_analysis *a, unsigned classes, per_call_rows *r)
{
    size_t rows = a->row_count ? a->row_count : 1;
    r->peer_calls = pt_xcalloc(rows, sizeof *r->peer_calls);
    r->middle = pt_xcalloc(rows, sizeof *r->middle);
    r->present = pt_xcalloc(rows, sizeof *r->present);
    r->compared = pt_xmalloc(rows * sizeof *r->compared);
    r->compared_count = 0;
    double *calls = pt_xmalloc((a->n ? a->n : 1) * sizeof *calls);
    double *per_call = pt_xmalloc((a->n ? a->n : 1) * sizeof *per_call);
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (!(classes & PT_CLASS_BIT(row->cls)) ||
            (row->cls == PT_CLASS_RUNTIME && pt_runtime_kind_of(row->name) == PT_RUNTIME_SYNC))
            continue;
        pt_row_calls_per_step(a, row, calls);
        r->peer_calls[i] = pt_median_of(calls, a->n, a->scratch);
        size_t m = 0;
        for (size_t v = 0; v < a->n; v++) {
            pt_function_summary cell;
            const pt_function_summary *f = pt_row_function(a, row, v, &cell);
            if (f && f->count)
                per_call[m++] = (double)f->total_ns / (double)f->count;
        }
        r->present[i] = m;
        /* Compared on where most of the others call it too (m counts the worker itself). */
        if (m >= 2 && 2 * (m - 1) >= a->n - 1) {
            pt_select_around(per_call, m, middle_index(m), r->middle[i]);
            r->compared[r->compared_count++] = i;
        }
    }
    free(calls);
    free(per_call);
}

static void per_call_rows_free(per_call_rows *r)
{
    free(r->middle);
    free(r->peer_calls);
    free(r->present);
    free(r->compared);
}

/* The median (pt_median's: the mean of the two middle values of an even count) of the
 * m per-call times of a row with one occurrence of x (which is among them) left out.
 * In sorted order, the others' i-th value is the i-th where i comes before x's first
 * place -- that is, where the i-th is below x -- and the (i + 1)-th from there on; the
 * others' middle is at u - 1 and u, so ranks u - 1, u and u + 1 (middle) say it. */
static double median_without(const double middle[3], size_t m, double x)
{
    size_t left = m - 1; /* the others */
#define OTHER(j) (middle[(j)] < x ? middle[(j)] : middle[(j) + 1]) /* j: rank - (u - 1) */
    double upper = OTHER(1);
    double median = left % 2 ? upper : (OTHER(0) + upper) / 2;
#undef OTHER
    return median;
}

/* Worker w's per-call time against the others', over the functions of the given classes
 * (CPU-side ones for a host, kernels for a GPU) most workers run as often as w does, counted alike whatever their time (one long call, a sleep, must
 * not decide). Waits are left out: a synchronize on the straggler is shorter, not longer.
 * *median_ratio is the typical function's ratio; returns the share of functions slowed
 * by at least half of it. rows: the rows' medians made once (per_call_rows_init with
 * these classes), for a caller that asks about every worker; NULL: made here. */
static double slower_per_call(const pt_analysis *a, size_t w, unsigned classes, const per_call_rows *rows,
                              size_t *compared, double *median_ratio)
{
    per_call_rows own;
    if (!rows) {
        per_call_rows_init(a, classes, &own);
        rows = &own;
    }
    double *ratios = pt_xmalloc((rows->compared_count ? rows->compared_count : 1) * sizeof *ratios);
    size_t k = 0;
    for (size_t c = 0; c < rows->compared_count; c++) { /* only these: each look-up is a cache miss */
        size_t i = rows->compared[c];
        pt_function_summary cell;
        const pt_function_summary *mine = pt_row_function(a, &a->rows[i], w, &cell);
        if (!mine || !mine->count || !mine->total_ns)
            continue;
        double my_calls = (double)mine->count / a->steps[w], peer_calls = rows->peer_calls[i];
        if (call_evidence(my_calls, peer_calls) != PT_EVIDENCE_SLOWER || my_calls < (1 - MORE_CALLS_SHARE) * peer_calls)
            continue;
        double my_per_call = (double)mine->total_ns / (double)mine->count;
        double theirs = median_without(rows->middle[i], rows->present[i], my_per_call);
        if (theirs <= 0)
            continue;
        ratios[k++] = my_per_call / theirs;
    }
    *median_ratio = k ? pt_median(ratios, k) : 1; /* reorders ratios; the count below does not mind */
    size_t slowed = 0;
    for (size_t i = 0; i < k; i++)
        slowed += ratios[i] >= 1 + (*median_ratio - 1) / 2;
    *compared = k;
    free(ratios);
    if (rows == &own)
        per_call_rows_free(&own);
    return k ? (double)slowed / (double)k : 0;
}

static void describe_host(const pt_analysis *a, finding *f, double step_ms)
{
    pt_buf s = PT_BUF_INIT;
    pt_ranks_phrase(a, f, &s);
    pt_buf_printf(&s, "%s CPU-side work (runtime calls and Python) is uniformly slower than on the other workers: "
                      "the same calls take %.2gx as long per call across %.0f functions, ",
                  f->worker_count == 1 ? "'s" : ": their", f->calls, f->peer_calls);
    pt_put_ms(&s, f->excess_ms);
    pt_buf_puts(&s, " more per step");
    pt_put_saving(a, f, step_ms, &s);
    pt_buf_puts(&s, ". That is the host, not the code: CPU contention (other processes, too few cores per rank) or "
                    "throttling (CPU frequency, NUMA placement) there.");
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

/* A single CPU-side function holds half of worker w's CPU-side excess: that function is
 * the finding, not the host. */
static bool one_function_explains(const pt_analysis *a, size_t w, double excess)
{
    bool cpu[PT_CLASS_COUNT] = {false};
    cpu[PT_CLASS_RUNTIME] = cpu[PT_CLASS_PYTHON] = true;
    named who;
    return largest_excess(a, w, cpu, &who) && who.excess >= EXPLAINED_SHARE * excess;
}

/* One host finding per uniformly slow worker (see the header comment). */
static void host_slowdowns(const pt_analysis *a, finding_list *list, peer_context *c)
{
    static const pt_class cpu_side_classes[] = {PT_CLASS_RUNTIME, PT_CLASS_PYTHON};
    peer_values v;
    pt_peer_values_init(&v, a, a->aligned_steps);
    pt_peer_classes_values(a, cpu_side_classes, PT_ARRAY_LEN(cpu_side_classes), &v);
    finding *f = NULL;
    for (size_t w = 0; w < a->n; w++) {
        double excess = pt_peer_real_excess(a, &v, w, false), factor;
        size_t compared;
        /* Extra work explains it (a gc.collect slows what runs after it too), or one function
         * does (a long sleep, while the others spin in a barrier on the same cores). */
        if (excess <= 0 || c->extra_cpu[w] >= EXPLAINED_SHARE * excess || one_function_explains(a, w, excess) ||
            slower_per_call(a, w, PT_CLASS_BIT(PT_CLASS_RUNTIME) | PT_CLASS_BIT(PT_CLASS_PYTHON), NULL, &compared,
                            &factor) <
                UNIFORM_SHARE ||
            compared < UNIFORM_MIN_FUNCTIONS || factor < UNIFORM_FACTOR)
            continue;
        c->host_slow[w] = true;
        if (!f) {
            f = pt_finding_add(list, "host", "CPU-side work: runtime calls and Python", "workers");
            f->metric = "CPU-side exposed ms per step";
            f->median = v.median;
            f->fix = PT_FIX_CLASSES;
            f->classes = PT_CLASS_BIT(PT_CLASS_RUNTIME) | PT_CLASS_BIT(PT_CLASS_PYTHON);
        }
        pt_finding_name_worker(f, w, v.mean[w]);
        if (excess > f->excess_ms) /* the sentence's factor and count are the worst worker's */
            f->excess_ms = excess, f->calls = factor, f->peer_calls = (double)compared;
    }
    pt_peer_values_free(&v);
}

/* ------------------------------------------------------------ slow GPUs */

/* Each worker's kernels against its peers' (slower_per_call), one worker per index of a
 * parallel loop: it reads the analysis and the rows, and writes only its own results. */
typedef struct kernel_job {
    const pt_analysis *a;
    const per_call_rows *rows;
    double *share, *factor;
    size_t *compared;
} kernel_job;

static void compare_kernels(void *ctx, size_t w)
{
    kernel_job *kj = ctx;
    kj->share[w] = slower_per_call(kj->a, w, PT_CLASS_BIT(PT_CLASS_COMPUTE), kj->rows, &kj->compared[w],
                                   &kj->factor[w]);
}

/* A GPU clocked down (power, heat) or worn runs every kernel slower by one factor: when a
 * worker's compute is above the typical worker's in every step and most of its kernels,
 * called as often as elsewhere, are slower per call by a similar factor, that is one
 * finding for all of them, costed at the whole class's excess (not the one kernel that
 * shows most). Workers slowed by a similar factor (a host's GPUs) are one finding; one
 * slowed by far less is not in it (a rank that time-sharing slowed a little in each
 * step). A worker starts a group when its excess clears its own step-to-step noise (a
 * rank that time-sharing slowed in some steps only does not); the group takes in those
 * slowed by a like factor against the workers outside it and above the typical worker by
 * the floor in every step, whatever their own noise (a slow GPU that noise also slows
 * now and then has the widest spread of all; a rank the noise slowed in two steps of
 * three is as slow on average but not slow: among 1,024 workers a quarter of which the
 * noise slows in each step, one chance seed took in 81 such ranks). Whether
 * fixing it saves anything is its impact: behind another fault, nothing alone. */
static void slow_gpus(const pt_analysis *a, const pt_whatif *m, finding_list *list, peer_context *c)
{
    peer_values v;
    pt_peer_values_init(&v, a, a->aligned_steps);
    pt_peer_class_values(a, PT_CLASS_COMPUTE, &v);
    double *factor = pt_xcalloc(a->n, sizeof *factor), top = 0, floor = pt_floor_ms(a);
    size_t *compared = pt_xcalloc(a->n, sizeof *compared);
    bool *slow = pt_xcalloc(a->n, sizeof *slow);
    bool *uniform = pt_xcalloc(a->n, sizeof *uniform);
    per_call_rows kernels;
    per_call_rows_init(a, PT_CLASS_BIT(PT_CLASS_COMPUTE), &kernels);
    double *share = pt_xmalloc(a->n * sizeof *share);
    kernel_job kj = {a, &kernels, share, factor, compared};
    pt_parallel_for(a->n, a->threads, 256, compare_kernels, &kj);
    for (size_t w = 0; w < a->n; w++) { /* seeds: the excess clears each worker's own noise */
        uniform[w] = share[w] >= UNIFORM_SHARE && compared[w] >= UNIFORM_MIN_FUNCTIONS && factor[w] >= UNIFORM_FACTOR;
        slow[w] = uniform[w] && pt_peer_real_excess(a, &v, w, false) > 0;
        if (slow[w])
            top = fmax(top, factor[w]);
    }
    per_call_rows_free(&kernels);
    free(share);
    /* The seeds' like, against the workers that are not seeds: half a host's GPUs slow
     * move the median half way to them, and noise atop a slow GPU widens its spread. */
    double *others = pt_xmalloc(a->n * sizeof *others);
    size_t k = 0;
    for (size_t w = 0; w < a->n; w++)
        if (!slow[w])
            others[k++] = v.mean[w];
    double reference = k ? pt_median_of(others, k, a->scratch) : v.median;
    free(others);
    for (size_t w = 0; w < a->n && top > 0; w++)
        slow[w] |= uniform[w] && factor[w] >= 1 + (top - 1) / 2 && v.mean[w] - reference > floor &&
                   (v.steps < 2 || pt_peer_above_in_each_step(&v, w, floor));
    free(uniform);
    finding *f = NULL;
    bool only[PT_CLASS_COUNT] = {false};
    only[PT_CLASS_COMPUTE] = true;
    named who;
    for (size_t w = 0; w < a->n; w++) {
        const pt_fn_row *row = slow[w] && factor[w] >= 1 + (top - 1) / 2 ? largest_excess(a, w, only, &who) : NULL;
        if (!row)
            continue;
        if (!f) {
            f = pt_finding_add(list, pt_category_of(PT_CLASS_COMPUTE), row->name, pt_section_of(PT_CLASS_COMPUTE));
            f->metric = "exposed compute ms per step";
            f->cls = PT_CLASS_COMPUTE;
            f->evidence = PT_EVIDENCE_UNIFORM;
            f->fix = PT_FIX_CLASSES;
            f->classes = PT_CLASS_BIT(PT_CLASS_COMPUTE);
        }
        pt_finding_name_worker(f, w, v.mean[w]);
        if (factor[w] > f->calls) /* the sentence's factor and count are the most slowed worker's */
            f->calls = factor[w], f->peer_calls = (double)compared[w];
    }
    if (f) {
        pt_cost_finding(a, m, f); /* its excess, against the workers it does not name */
        f->median = f->worker_count ? v.mean[f->workers[0]] - f->excess_ms : v.median;
        for (size_t i = 0; i < f->worker_count; i++)
            c->gpu_slow[f->workers[i]] = true;
    }
    free(slow);
    free(factor);
    free(compared);
    pt_peer_values_free(&v);
}

/* ------------------------------------------------------------ stragglers */

/* A straggler's lead no finding explains yet: its largest excess covering half the lead,
 * or else its class with the most excess covering half (named by that class's largest
 * function). NULL: nothing does. */
static const pt_fn_row *explain_lead(const pt_analysis *a, size_t w, double lead, named *who)
{
    bool every_class[PT_CLASS_COUNT] = {true, true, false, true, true};
    const pt_fn_row *row = largest_excess(a, w, every_class, who);
    if (row && who->excess >= EXPLAINED_SHARE * lead)
        return row;
    double *class_ms = pt_xmalloc(a->n * sizeof *class_ms);
    pt_class best_class = PT_CLASS_COMM;
    double best_excess = 0;
    for (int k = 0; k < PT_CLASS_COUNT; k++) {
        if (k == PT_CLASS_COMM)
            continue;
        pt_class_exposed_ms(a, (pt_class)k, class_ms);
        double over = class_ms[w] - pt_median_of(class_ms, a->n, a->scratch);
        if (over > best_excess)
            best_excess = over, best_class = (pt_class)k;
    }
    free(class_ms);
    if (best_class == PT_CLASS_COMM || best_excess < EXPLAINED_SHARE * lead)
        return NULL;
    bool only[PT_CLASS_COUNT] = {false};
    only[best_class] = true;
    row = largest_excess(a, w, only, who);
    if (row && who->excess < EXPLAINED_SHARE * best_excess)
        who->evidence = PT_EVIDENCE_CLASS;
    who->excess = best_excess;
    return row;
}

static void describe_untraced(const pt_analysis *a, finding *f, double step_ms)
{
    pt_buf s = PT_BUF_INIT;
    pt_ranks_phrase(a, f, &s);
    pt_buf_printf(&s, " %s the straggler: the other workers wait ", f->worker_count == 1 ? "is" : "are");
    pt_put_ms(&s, f->median);
    pt_buf_printf(&s, " per step for %s, but no traced function explains it", f->worker_count == 1 ? "it" : "them");
    pt_put_saving(a, f, step_ms, &s);
    pt_buf_puts(&s, "; look for untraced CPU work, I/O or OS noise on that host.");
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

/* Each worker's lead: how much less than the typical worker it waits (exposed
 * communication plus idle), when that clears the noise like any other difference. */
static void measure_leads(const pt_analysis *a, peer_context *c, double *typical_wait)
{
    peer_values v;
    pt_peer_values_init(&v, a, a->aligned_steps);
    pt_waiting_ms(a, v.mean); /* negated: the straggler is the one "above" */
    if (v.steps)
        pt_waiting_step_ms(a, v.per_step);
    for (size_t i = 0; i < a->n; i++)
        v.mean[i] = -v.mean[i];
    for (size_t i = 0; i < a->n * v.steps; i++)
        v.per_step[i] = -v.per_step[i];
    pt_peer_measure(a, &v);
    *typical_wait = -v.median;
    c->has_waiting = *typical_wait > pt_floor_ms(a);
    for (size_t w = 0; w < a->n; w++)
        c->lead[w] = c->has_waiting ? pt_peer_real_excess(a, &v, w, false) : 0;
    pt_peer_values_free(&v);
}

/* ------------------------------------------------------------ the pace (causality) */

/* How close to the busiest worker of a segment counts as a tie: the floor, or the
 * machine-wide swing when it is larger -- how far the typical worker's work moves from
 * one segment to the next (the spread of its median). On a loaded machine that slows
 * every worker by a factor changing from step to step, who arrives last by less than
 * that is chance, not cause. */
static double segment_tie_ms(const pt_analysis *a, const pt_whatif *m)
{
    size_t segments = pt_whatif_segments(m);
    double *work = pt_xmalloc((a->n ? a->n : 1) * sizeof *work);
    double *typical = pt_xmalloc((segments ? segments : 1) * sizeof *typical);
    for (size_t j = 0; j < segments; j++) {
        for (size_t w = 0; w < a->n; w++)
            work[w] = pt_whatif_segment_work_ms(m, j, w);
        typical[j] = pt_median_of(work, a->n, a->scratch);
    }
    double swing = pt_sample_sd(typical, segments);
    free(work);
    free(typical);
    return fmax(pt_floor_ms(a), swing);
}

/* Who holds the others up: a worker whose work, in at least half the segments of the step
 * model, is within a tie (segment_tie_ms) of the busiest worker's (the one the others
 * wait for). Two equally slow workers both hold the job up; one a little slower than the
 * rest but far from the busiest costs the job nothing, however real its excess. */
static void find_pacers(const pt_analysis *a, const pt_whatif *m, bool *paces)
{
    size_t segments = pt_whatif_segments(m);
    size_t *count = pt_xcalloc(a->n ? a->n : 1, sizeof *count);
    double floor = segment_tie_ms(a, m);
    for (size_t j = 0; j < segments; j++) {
        double top = 0;
        for (size_t w = 0; w < a->n; w++)
            top = fmax(top, pt_whatif_segment_work_ms(m, j, w));
        for (size_t w = 0; w < a->n; w++)
            count[w] += pt_whatif_segment_work_ms(m, j, w) >= top - floor;
    }
    for (size_t w = 0; w < a->n; w++)
        paces[w] = segments && 2 * count[w] >= segments;
    free(count);
}

/* Who sets the step time: in each segment of the step model the busiest worker is the
 * one the others wait for. One that is the busiest in every segment (all but one of four
 * or more), each time ahead of the next by more than a tie (the floor, or the machine's
 * swing: segment_tie_ms), holds the job up whatever its steps' spread: that is cause and
 * effect, not variance, and noise that swells every worker's steps by turns does not
 * make another worker wait for it every time. Returns that worker (SIZE_MAX: none) and
 * its lead, ms per step. */
static size_t pace_setter(const pt_analysis *a, const pt_whatif *m, double *lead)
{
    size_t segments = pt_whatif_segments(m), setter = SIZE_MAX, led = 0;
    double floor = segment_tie_ms(a, m), total = 0;
    *lead = 0;
    if (segments == 0 || a->n < 2)
        return SIZE_MAX;
    double *margins = pt_xmalloc(segments * sizeof *margins);
    for (size_t j = 0; j < segments; j++) {
        double margin;
        size_t w = pt_whatif_pacer(m, j, &margin);
        if (setter == SIZE_MAX)
            setter = w;
        if (w == setter && margin >= floor)
            margins[led++] = margin, total += margin;
    }
    /* On a saturated CPU shared with the others, a lead that changes size from step to
     * step is the scheduler's share (see pt_peer_time_threshold), not this worker's work. */
    bool starved = led && pt_worker_cpu_contended(a, setter) &&
                   STEP_SIGMAS * pt_sample_sd(margins, led) > total / (double)led;
    free(margins);
    if (led + (segments >= 4) < segments || starved)
        return SIZE_MAX;
    *lead = total / (double)pt_whatif_steps(m);
    return setter;
}

/* The same code run for less time by others (rank r sleeps r s): a function that several
 * workers spend more time in than the fastest do, by different amounts. The finding then
 * names all of them, the one with the most first (it sets the step time when it is the
 * pace setter), as it is what fixing all of them saves. The fastest are those within the
 * floor of the least time; each named worker is above their median by more than the
 * floor. A finding qualifies when it is the pace setter's largest, or names two workers
 * already (a spread, not one straggler and noise), and is about the same calls taking
 * longer: extra calls are extra work against the typical worker (a pipeline stage
 * running more layers), and the stages running fewer are not its grade. */
static void grade(const pt_analysis *a, finding *f, size_t setter, double *values, double *fast)
{
    pt_row_exposed_ms(a, f->row, values);
    double least = values[0], floor = pt_floor_ms(a);
    for (size_t w = 1; w < a->n; w++)
        least = fmin(least, values[w]);
    size_t k = 0, most = 0, graded = 0;
    for (size_t w = 0; w < a->n; w++) {
        if (values[w] <= least + floor)
            fast[k++] = values[w];
        if (values[w] > values[most])
            most = w;
    }
    double reference = pt_median_of(fast, k, a->scratch);
    for (size_t w = 0; w < a->n; w++)
        graded += values[w] > reference + floor;
    if (graded < 2 || graded >= a->n || !pt_finding_names(f, most))
        return;
    for (size_t w = 0; w < a->n; w++)
        if (values[w] > reference + floor && !pt_finding_names(f, w))
            pt_finding_name_worker(f, w, values[w]);
    f->graded = true;
    f->pacer = most;
    f->sets_pace = most == setter;
    f->median = reference;
}

static void name_graded(const pt_analysis *a, finding_list *list, size_t setter)
{
    finding *largest = NULL; /* the pace setter's */
    for (size_t i = 0; i < list->count && setter != SIZE_MAX; i++) {
        finding *g = &list->items[i];
        if (g->fix == PT_FIX_ROW && g->row && !g->all_workers && pt_finding_names(g, setter) &&
            (!largest || g->excess_ms > largest->excess_ms))
            largest = g;
    }
    double *values = pt_xmalloc(a->n * sizeof *values), *fast = pt_xmalloc(a->n * sizeof *fast);
    for (size_t i = 0; i < list->count; i++) {
        finding *f = &list->items[i];
        if (f->fix == PT_FIX_ROW && f->row && !f->all_workers && f->evidence == PT_EVIDENCE_SLOWER &&
            (f == largest || f->worker_count >= 2))
            grade(a, f, setter, values, fast);
    }
    free(values);
    free(fast);
}

/* The row explaining worker w's lead is load-bound there (pt_peer_time_threshold): the
 * scheduler's share of a saturated CPU, which names no rank, whoever arrived last. */
static bool lead_is_load(const pt_analysis *a, size_t w, const pt_fn_row *row)
{
    if (!pt_worker_cpu_contended(a, w) || !pt_peer_cpu_side(row->cls) || a->function_steps < 2)
        return false;
    peer_values v;
    pt_peer_values_init(&v, a, a->function_steps);
    pt_peer_row_values(a, row, &v);
    bool load = pt_peer_load_bound(&v, w);
    pt_peer_values_free(&v);
    return load;
}

/* Workers that wait far less than their peers, when nothing names them yet. */
static void stragglers(const pt_analysis *a, finding_list *list, const peer_context *c, double typical_wait)
{
    finding *untraced = NULL;
    for (size_t w = 0; w < a->n; w++) {
        double lead = c->lead[w];
        if (lead <= 0 || pt_findings_name_worker(list, w))
            continue;
        named who;
        const pt_fn_row *row = explain_lead(a, w, lead, &who);
        if (row && lead_is_load(a, w, row))
            continue;
        if (row) {
            name_on_row(list, row, &who);
            continue;
        }
        if (!untraced) {
            untraced = pt_finding_add(list, "other", "untraced time (idle GPU and CPU)", "Communication");
            untraced->metric = "waiting below the typical worker, ms per step";
            untraced->median = typical_wait;
            untraced->fix = PT_FIX_WORK;
        }
        pt_finding_name_worker(untraced, w, typical_wait - lead);
        untraced->excess_ms = fmax(untraced->excess_ms, lead);
    }
}

/* ------------------------------------------------------------ sentences */

static const char *class_noun(pt_class cls)
{
    static const char *const nouns[PT_CLASS_COUNT] = {"GPU kernels", "GPU memory operations", "communication",
                                                      "runtime calls", "Python"};
    return nouns[cls];
}

/* Per class: what to do when the same calls take longer there ... */
static const char *const slower_advice[PT_CLASS_COUNT] = {
    "the same kernels, as many calls, run slower there: its GPU is slower than its peers': check that GPU's "
    "clocks, temperature, power limit and ECC errors, or move the job off it",
    "the same copies take longer there: check that host's PCIe link and whether its buffers are pinned",
    "the others wait for it",
    "the same calls take longer there: the CPU cannot launch work fast enough, so the GPU waits: look for CPU "
    "contention on that host (other processes, too few cores per rank, CPU frequency, NUMA)",
    "the other workers wait in collectives meanwhile: speed up or overlap this code there (data loading, garbage "
    "collection, logging, I/O)",
};

/* ... and when it does what the others do not. */
static const char *const extra_work_advice[PT_CLASS_COUNT] = {
    "extra work on this rank only, such as a rank-specific code path or uneven data: remove it or balance it "
    "across ranks",
    "copies the others do not make (synchronous copies such as .item(), .cpu() or .to() without non_blocking "
    "stall the step): remove them or make them asynchronous",
    "extra work on this rank only, such as a rank-specific code path or uneven data: remove it or balance it "
    "across ranks",
    "calls the others do not make (a synchronize or blocking copy per call stalls the step): remove them from the "
    "step",
    "work the others do not do, while they wait in collectives: a rank-specific code path (data loading, garbage "
    "collection, logging, I/O); remove it, overlap it or spread it across ranks",
};

/* ... and when the ranks are a pipeline stage holding more of the model (pipeline.c). */
static const char *extra_advice(const finding *f)
{
    return f->microbatches ? "a pipeline stage holding more of the model than the others (some ranks call these "
                             "kernels less often): move layers from it to a lighter stage (the split points); "
                             "moved, its work above the stages' mean paces all microbatches but one, which is "
                             "what the saving counts"
                           : extra_work_advice[f->cls];
}

/* What extra runtime calls are, by what the call does: a cudaFree is not a synchronize. */
static const char *extra_runtime_advice(const char *api)
{
    switch (pt_runtime_kind_of(api)) {
    case PT_RUNTIME_LAUNCH:
        return "kernel launches the others do not make (extra operators on this rank): remove the rank-specific work "
               "or batch it into fewer, larger kernels";
    case PT_RUNTIME_SYNC:
        return "host synchronizations the others do not make (.item(), .cpu(), torch.cuda.synchronize()): each one "
               "stalls the step; remove them from the step";
    case PT_RUNTIME_COPY:
        return "copies the others do not make, which the CPU waits for: drop them, or use pinned memory and "
               "non_blocking copies";
    case PT_RUNTIME_MEMORY:
        return "device memory allocated and freed in every step, which the caching allocator would keep: no "
               "torch.cuda.empty_cache() (or memory-fraction changes) in the loop, and reuse buffers";
    default:
        return extra_work_advice[PT_CLASS_RUNTIME];
    }
}

/* " (called from `a.py: f > torch/cuda/memory.py: empty_cache`)" for runtime calls whose
 * enclosing Python stack the summary knows. */
static void put_caller(const pt_analysis *a, const finding *f, pt_buf *out)
{
    if (f->cls != PT_CLASS_RUNTIME || !f->row)
        return;
    if (strcmp(f->function, f->row->name) != 0) /* allocator churn, named by the frame (put_group_noun) */
        return;
    pt_function_summary cell;
    const pt_function_summary *mine = pt_row_function(a, f->row, f->worst < a->n ? f->worst : f->workers[0], &cell);
    if (!mine || !mine->caller)
        return;
    pt_buf name = PT_BUF_INIT;
    pt_short_function_name(PT_CLASS_PYTHON, mine->caller, &name);
    pt_buf_printf(out, " (called from `%s`)", name.data ? name.data : mine->caller);
    pt_buf_free(&name);
}

/* A slowness in every step is the worker's (its hardware, a code path only it runs); in
 * some steps only, it comes and goes (data-dependent work, interference). */
static void put_over_time(const finding *f, pt_buf *out)
{
    if (f->steps_total < 2)
        return;
    if (f->steps_slow == f->steps_total)
        pt_buf_puts(out, ", in every step profiled");
    else
        pt_buf_printf(out, ", in %zu of the %zu steps profiled", f->steps_slow, f->steps_total);
}

/* "Rank 3 sets the step time: ...; ranks 1 and 2 run the same code for less time ...":
 * the pace setter first (f->workers[0]), the others in rank order. */
static void describe_graded(const pt_analysis *a, finding *f, double step_ms, const char *shown)
{
    pt_buf s = PT_BUF_INIT;
    char pct[PT_PERCENT_LEN];
    pt_buf_printf(&s, f->sets_pace ? "Rank %d sets the step time: it spends " : "Rank %d spends the most: ",
                  pt_worker_rank(a, f->workers[0]));
    pt_put_ms(&s, f->values[0] - f->median);
    pt_buf_printf(&s, " more per step than the fastest workers in %s `%s`; ", f->cls == PT_CLASS_PYTHON ? "Python" :
                  class_noun(f->cls), shown);
    pt_buf_puts(&s, f->worker_count == 2 ? "rank " : "ranks ");
    for (size_t k = 1; k < f->worker_count && k <= 8; k++)
        pt_buf_printf(&s, "%s%d", k == 1 ? "" : k + 1 == f->worker_count ? " and " : ", ", pt_worker_rank(a, f->workers[k]));
    if (f->worker_count > 9)
        pt_buf_printf(&s, " and %zu more", f->worker_count - 9);
    pt_buf_puts(&s, f->worker_count == 2 ? " runs" : " run");
    pt_buf_puts(&s, " the same code for less time (");
    for (size_t k = 1; k < f->worker_count && k <= 8; k++) {
        pt_buf_puts(&s, k == 1 ? "" : k + 1 == f->worker_count ? " and " : ", ");
        pt_put_ms(&s, f->values[k] - f->median);
    }
    pt_buf_puts(&s, " more); fixing rank ");
    pt_buf_printf(&s, "%d alone saves ", pt_worker_rank(a, f->workers[0]));
    pt_put_ms(&s, f->alone * step_ms);
    pt_buf_printf(&s, " per step (%s)", pt_percent(pct, 100 * f->alone));
    if (f->alone < f->impact - 0.005)
        pt_buf_puts(&s, ", as the next of them then sets the pace,");
    pt_buf_puts(&s, " and fixing all of them ");
    pt_put_ms(&s, f->impact * step_ms);
    pt_buf_printf(&s, " (%s of the step). That is %s.", pt_percent(pct, 100 * f->impact),
                  f->cls == PT_CLASS_PYTHON ? "work done longer on some ranks than on others (rank-dependent sleeps, "
                                              "waits, I/O or data): balance it, or remove it where it is longest"
                                            : extra_work_advice[f->cls]);
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

/* ------------------------------------------------------------ one cause, several parts */

/* The evidence every part of f shares (PT_EVIDENCE_NONE: they differ). */
static pt_evidence parts_evidence(const finding *f)
{
    pt_evidence shared = f->parts[0].evidence == PT_EVIDENCE_CLASS ? PT_EVIDENCE_SLOWER : f->parts[0].evidence;
    for (size_t i = 1; i < f->part_count; i++) {
        pt_evidence e = f->parts[i].evidence == PT_EVIDENCE_CLASS ? PT_EVIDENCE_SLOWER : f->parts[i].evidence;
        if (e != shared)
            return PT_EVIDENCE_NONE;
    }
    return shared;
}

/* "`name` (12 calls against 8, 4 ms more)": a part, with what its own evidence is. */
static void put_part(const finding *p, pt_buf *out)
{
    pt_buf name = PT_BUF_INIT;
    pt_short_function_name(p->cls, p->function, &name);
    pt_buf_printf(out, "`%s` (", name.data ? name.data : p->function);
    pt_buf_free(&name);
    switch (p->evidence) {
    case PT_EVIDENCE_ONLY_HERE:
        pt_buf_printf(out, "%.3g call%s and ", p->calls, p->calls == 1 ? "" : "s");
        pt_put_ms(out, p->excess_ms);
        pt_buf_puts(out, " per step");
        break;
    case PT_EVIDENCE_MORE_CALLS:
        pt_buf_printf(out, "%.3g calls per step against %.3g, ", p->calls, p->peer_calls);
        pt_put_ms(out, p->excess_ms);
        pt_buf_puts(out, " more");
        break;
    default:
        pt_put_ms(out, p->excess_ms);
        pt_buf_puts(out, " more in as many calls");
        break;
    }
    pt_buf_putc(out, ')');
}

static void put_parts(const finding *f, pt_buf *out)
{
    for (size_t i = 0; i < f->part_count && i < PT_PARTS_SAID; i++) {
        pt_buf_puts(out, i == 0 ? "" : i + 1 == f->part_count ? " and " : ", ");
        put_part(&f->parts[i], out);
    }
    if (f->part_count > PT_PARTS_SAID)
        pt_buf_printf(out, " and %zu more", f->part_count - PT_PARTS_SAID);
}

/* The functions of one class a cause is made of (pt_merge_causes): "2 GPU kernels",
 * "Python `... > ckpt.py: save` and the code it calls", allocator churn. */
static void put_group_noun(const finding *f, pt_buf *out)
{
    if (f->cls == PT_CLASS_PYTHON) {
        pt_buf name = PT_BUF_INIT;
        pt_short_function_name(f->cls, f->function, &name);
        pt_buf_printf(out, "Python `%s` and the code it calls", name.data ? name.data : f->function);
        pt_buf_free(&name);
    } else if (f->cls == PT_CLASS_RUNTIME && f->row && strcmp(f->function, f->row->name) != 0) {
        pt_buf name = PT_BUF_INIT; /* named by the frame that releases the memory (findings.c) */
        pt_short_function_name(PT_CLASS_PYTHON, f->function, &name);
        pt_buf_printf(out, "allocator churn (device memory freed in `%s` and allocated again)",
                      name.data ? name.data : f->function);
        pt_buf_free(&name);
    } else if (f->cls == PT_CLASS_RUNTIME) {
        pt_buf_puts(out, "allocator churn (device memory freed and allocated again)");
    } else {
        pt_buf_printf(out, "%zu %s", f->part_count, f->cls == PT_CLASS_MEMORY ? "kinds of GPU memory operations" :
                      class_noun(f->cls));
    }
}

/* One cause found as several functions of one class on the same workers: one sentence for
 * all of them, each part with its own evidence, and the saving of fixing them together. */
static void describe_group(const pt_analysis *a, finding *f, double step_ms)
{
    static const char *const lead[][2] = {
        [PT_EVIDENCE_NONE] = {" does more than the other workers in ", " do more than the other workers in "},
        [PT_EVIDENCE_ONLY_HERE] = {" runs work the other workers do not (or barely) in ",
                                   " run work the other workers do not (or barely) in "},
        [PT_EVIDENCE_MORE_CALLS] = {" makes more calls than the other workers in ",
                                    " make more calls than the other workers in "},
        [PT_EVIDENCE_SLOWER] = {" spends more time than the other workers in the same calls of ",
                                " spend more time than the other workers in the same calls of "},
    };
    pt_buf s = PT_BUF_INIT;
    pt_evidence shared = parts_evidence(f);
    if (shared > PT_EVIDENCE_SLOWER)
        shared = PT_EVIDENCE_NONE;
    pt_ranks_phrase(a, f, &s);
    pt_buf_puts(&s, lead[shared][f->worker_count == 1 ? 0 : 1]);
    put_group_noun(f, &s);
    pt_buf_puts(&s, ": ");
    put_parts(f, &s);
    put_caller(a, f, &s);
    pt_buf_puts(&s, ", ");
    pt_put_ms(&s, f->excess_ms);
    pt_buf_puts(&s, shared == PT_EVIDENCE_ONLY_HERE ? " per step in all" : " more per step in all");
    put_over_time(f, &s);
    pt_put_saving(a, f, step_ms, &s);
    if (shared == PT_EVIDENCE_SLOWER)
        pt_buf_printf(&s, "; %s.", slower_advice[f->cls]);
    else
        pt_buf_printf(&s, ". That is %s.", f->cls == PT_CLASS_RUNTIME ? extra_runtime_advice(f->row->name) :
                      extra_advice(f));
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

/* A rolled-up finding's parts: functions of its class that are above their peers on its
 * workers on their own too, within its saving and not in addition to it. */
static void put_parts_within(finding *f)
{
    pt_buf s = PT_BUF_INIT;
    pt_buf_puts(&s, f->summary ? f->summary : "");
    pt_buf_puts(&s, " It includes what ");
    put_parts(f, &s);
    pt_buf_puts(&s, f->part_count == 1 ? " takes" : " take");
    pt_buf_puts(&s, " above the other workers: part of this saving, not in addition to it.");
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

static void describe_one(const pt_analysis *a, finding *f, double step_ms);

void pt_describe_peer_finding(const pt_analysis *a, finding *f, double step_ms)
{
    if (f->part_count && !f->covers_parts) {
        describe_group(a, f, step_ms);
        return;
    }
    describe_one(a, f, step_ms);
    if (f->part_count)
        put_parts_within(f);
}

static void describe_one(const pt_analysis *a, finding *f, double step_ms)
{
    if (strcmp(f->category, "host") == 0) {
        describe_host(a, f, step_ms);
        return;
    }
    if (strcmp(f->category, "other") == 0) {
        describe_untraced(a, f, step_ms);
        return;
    }
    pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
    pt_short_function_name(f->cls, f->function, &name);
    const char *shown = name.data ? name.data : f->function;
    if (f->graded) {
        describe_graded(a, f, step_ms, shown);
        pt_buf_free(&name);
        return;
    }
    pt_ranks_phrase(a, f, &s);
    switch (f->evidence) {
    case PT_EVIDENCE_ONLY_HERE:
        pt_buf_printf(&s, " %s %s the other workers do not (or barely): `%s`", f->worker_count == 1 ? "runs" : "run",
                      f->cls == PT_CLASS_PYTHON ? "Python code" : class_noun(f->cls), shown);
        put_caller(a, f, &s);
        pt_buf_printf(&s, ", %.3g call%s and ", f->calls, f->calls == 1 ? "" : "s");
        pt_put_ms(&s, f->excess_ms);
        pt_buf_puts(&s, " per step");
        put_over_time(f, &s);
        pt_put_saving(a, f, step_ms, &s);
        pt_buf_printf(&s, ". That is %s.", f->cls == PT_CLASS_RUNTIME ? extra_runtime_advice(f->function) :
                      extra_work_advice[f->cls]);
        break;
    case PT_EVIDENCE_MORE_CALLS:
        pt_buf_printf(&s, " %s `%s`", f->worker_count == 1 ? "calls" : "call", shown);
        put_caller(a, f, &s);
        pt_buf_printf(&s, " %.3g times per step against %.3g on the other workers, ", f->calls, f->peer_calls);
        pt_put_ms(&s, f->excess_ms);
        pt_buf_puts(&s, " more per step");
        put_over_time(f, &s);
        pt_put_saving(a, f, step_ms, &s);
        pt_buf_printf(&s, ". That is %s.", f->cls == PT_CLASS_RUNTIME ? extra_runtime_advice(f->function) :
                      extra_advice(f));
        break;
    case PT_EVIDENCE_UNIFORM:
        pt_buf_printf(&s, "%s GPU kernels are uniformly slower than the other workers': the same kernels take %.2gx "
                          "as long per call across %.0f kernels, ",
                      f->worker_count == 1 ? "'s" : ": their", f->calls, f->peer_calls);
        pt_put_ms(&s, f->excess_ms);
        pt_buf_printf(&s, " more per step (most in `%s`)", shown);
        pt_put_saving(a, f, step_ms, &s);
        pt_buf_printf(&s, "; %s slower than %s peers': check %s clocks, temperature, power limit and ECC errors, or "
                          "move the job off %s.",
                      f->worker_count == 1 ? "its GPU is" : "their GPUs are", f->worker_count == 1 ? "its" : "their",
                      f->worker_count == 1 ? "that GPU's" : "those GPUs'", f->worker_count == 1 ? "it" : "them");
        break;
    case PT_EVIDENCE_SLOWER:
        pt_buf_printf(&s, " %s ", f->worker_count == 1 ? "spends" : "spend up to");
        pt_put_ms(&s, f->excess_ms);
        pt_buf_printf(&s, " more per step than the other workers in %s `%s`, called as often", class_noun(f->cls), shown);
        put_over_time(f, &s);
        pt_put_saving(a, f, step_ms, &s);
        pt_buf_printf(&s, "; %s.", slower_advice[f->cls]);
        break;
    default:
        pt_buf_printf(&s, " %s ", f->worker_count == 1 ? "spends" : "spend up to");
        pt_put_ms(&s, f->excess_ms);
        pt_buf_printf(&s, " more per step than the other workers in %s, most in `%s`", class_noun(f->cls), shown);
        put_over_time(f, &s);
        pt_put_saving(a, f, step_ms, &s);
        pt_buf_printf(&s, "; %s.", slower_advice[f->cls]);
        break;
    }
    free(f->summary);
    f->summary = pt_buf_take(&s);
    pt_buf_free(&name);
}

/* A graded finding names the worker that sets the step time first. */
static void put_pacer_first(finding *f)
{
    for (size_t k = 0; k < f->worker_count; k++)
        if (f->workers[k] == f->pacer) {
            double value = f->values[k];
            memmove(f->workers + 1, f->workers, k * sizeof *f->workers);
            memmove(f->values + 1, f->values, k * sizeof *f->values);
            f->workers[0] = f->pacer, f->values[0] = value;
            return;
        }
}

static int by_index(const void *x, const void *y)
{
    return pt_cmp_i64((int64_t)*(const size_t *)x, (int64_t)*(const size_t *)y);
}

/* ------------------------------------------------------------ entry */

void pt_peer_findings(const pt_analysis *a, const pt_whatif *m, finding_list *list, bool explain_stragglers)
{
    size_t first = list->count;
    size_t n = a->n ? a->n : 1;
    peer_context c = {pt_xcalloc(n, sizeof *c.host_slow), pt_xcalloc(n, sizeof *c.gpu_slow), pt_xcalloc(n, sizeof *c.extra_cpu),
                      pt_xcalloc(n, sizeof *c.lead), false, pt_xcalloc(n, sizeof *c.paces), SIZE_MAX};
    double typical_wait, causal_lead;
    measure_leads(a, &c, &typical_wait);
    find_pacers(a, m, c.paces);
    size_t setter = c.setter = pace_setter(a, m, &causal_lead);
    if (setter != SIZE_MAX) { /* it holds the others up, however noisy its steps */
        c.lead[setter] = fmax(c.lead[setter], causal_lead);
        c.has_waiting = true;
    }
    peer_rows(a, list, &c, true);
    host_slowdowns(a, list, &c);
    slow_gpus(a, m, list, &c);
    graded_rows(a, list, &c);
    peer_rows(a, list, &c, false);
    peer_classes(a, list, &c);
    if (explain_stragglers)
        stragglers(a, list, &c, typical_wait);
    name_graded(a, list, setter);
    for (size_t i = first; i < list->count; i++) { /* workers in rank order */
        finding *f = &list->items[i];
        double *value = pt_xmalloc(f->worker_count * sizeof *value);
        size_t *order = pt_xmalloc(f->worker_count * sizeof *order);
        memcpy(order, f->workers, f->worker_count * sizeof *order);
        qsort(order, f->worker_count, sizeof *order, by_index);
        for (size_t k = 0; k < f->worker_count; k++)
            for (size_t j = 0; j < f->worker_count; j++)
                if (f->workers[j] == order[k])
                    value[k] = f->values[j];
        memcpy(f->workers, order, f->worker_count * sizeof *order);
        memcpy(f->values, value, f->worker_count * sizeof *value);
        free(order);
        free(value);
        if (f->graded)
            put_pacer_first(f);
    }
    free(c.host_slow);
    free(c.gpu_slow);
    free(c.extra_cpu);
    free(c.lead);
    free(c.paces);
}
