/* peer_noise.c -- the noise test: whether a worker's excess over its peers is real
 * (peers.c's header says the rules; this is their arithmetic).
 *
 * Cost: O(workers x steps) per function or class measured, plus a median per step, and
 * a sort per step (O(workers log workers)) when some worker is above the typical one by
 * the floor in every step (the chance test: O(steps x log workers) per worker). */
#include "diagnose/peer_noise.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pt_peer_values_init(peer_values *v, const pt_analysis *a, size_t steps)
{
    memset(v, 0, sizeof *v);
    v->n = a->n;
    v->steps = steps >= 2 ? steps : 0;
    v->mean = pt_xmalloc((a->n ? a->n : 1) * sizeof *v->mean);
    v->per_step = pt_xmalloc((a->n * v->steps + 1) * sizeof *v->per_step);
    v->step_median = pt_xmalloc((v->steps + 1) * sizeof *v->step_median);
    v->own_noise = pt_xmalloc((a->n ? a->n : 1) * sizeof *v->own_noise);
    v->contended = pt_xmalloc((a->n ? a->n : 1) * sizeof *v->contended);
    for (size_t w = 0; w < a->n; w++)
        v->contended[w] = pt_worker_cpu_contended(a, w);
}

void pt_peer_values_free(peer_values *v)
{
    free(v->mean);
    free(v->per_step);
    free(v->step_median);
    free(v->own_noise);
    free(v->contended);
    free(v->sorted);
}

/* Worker w's value in step s is above the typical worker's by more than `margin`. */
static bool above_by(const peer_values *v, size_t w, size_t s, double margin)
{
    return v->per_step[w * v->steps + s] - v->step_median[s] > margin;
}

bool pt_peer_above_in_each_step(const peer_values *v, size_t w, double margin)
{
    for (size_t s = 0; s < v->steps; s++)
        if (!above_by(v, w, s, margin))
            return false;
    return v->steps >= 2;
}

static int ascending(const void *x, const void *y)
{
    return pt_cmp_desc(*(const double *)y, *(const double *)x);
}

/* Each step's values sorted, for the chance test (by_chance), when some worker is above
 * the typical one by the floor and the swing in every step (steadily_above). */
static void sort_steps_when_needed(peer_values *v)
{
    size_t n = v->n, steps = v->steps;
    double margin = fmax(v->floor, v->swing);
    bool needed = false;
    free(v->sorted); /* measured again: new values */
    v->sorted = NULL;
    for (size_t w = 0; w < n && !needed; w++)
        needed = pt_peer_above_in_each_step(v, w, margin);
    if (!needed)
        return;
    v->sorted = pt_xmalloc(n * steps * sizeof *v->sorted);
    for (size_t w = 0; w < n; w++)
        for (size_t s = 0; s < steps; s++)
            v->sorted[s * n + w] = v->per_step[w * steps + s];
    for (size_t s = 0; s < steps; s++)
        qsort(v->sorted + s * n, n, sizeof *v->sorted, ascending);
}

/* The typical worker, and how far above it chance reaches (see the header comment).
 * Step by step: in each step the typical worker is the median, and what remains of
 * every worker's value is its residual; a step that is slow for everyone (the step
 * everybody waited for one straggler) moves the median, not the residuals. The noise is
 * each worker's own step-to-step spread of its residuals (the median over workers: a
 * rank whose kernels a shared GPU slowed in one step and not the next is noisy, not
 * slow), and a mean over S steps must clear STEP_SIGMAS of it divided by sqrt(S): of
 * the typical worker's spread, and of the worker's own when that is larger (a rank
 * ahead by 3, 3 and 11 ms in three steps is not reliably ahead). */
void pt_peer_measure(const pt_analysis *a, peer_values *v)
{
    size_t n = a->n, steps = v->steps;
    v->floor = pt_floor_ms(a);
    if (!steps) {
        pt_spread spread = pt_spread_of(v->mean, n, a->scratch);
        v->median = spread.median;
        v->threshold = fmax(pt_floor_ms(a), SPREAD_SIGMAS * spread.sigma);
        return;
    }
    /* Step by step, in one pass over per_step (worker-major): reading one step's column
     * from it touched a cache line per worker per step, every line steps times over. */
    double *column = pt_xmalloc((n + 1) * steps * sizeof *column);
    for (size_t w = 0; w < n; w++)
        for (size_t s = 0; s < steps; s++)
            column[s * n + w] = v->per_step[w * steps + s];
    v->median = 0;
    for (size_t s = 0; s < steps; s++) {
        v->step_median[s] = pt_median(column + s * n, n); /* reorders its step's column only */
        v->median += v->step_median[s] / (double)steps;
    }
    double *residual = column + n * steps;
    for (size_t w = 0; w < n; w++) {
        for (size_t s = 0; s < steps; s++)
            residual[s] = v->per_step[w * steps + s] - v->step_median[s];
        column[w] = v->own_noise[w] = pt_sample_sd(residual, steps);
    }
    double sigma = v->noise = pt_median(column, n);
    free(column);
    v->threshold = fmax(pt_floor_ms(a), STEP_SIGMAS * sigma / sqrt((double)steps));
    v->swing = pt_sample_sd(v->step_median, steps);
    sort_steps_when_needed(v);
}

/* Above the typical worker in every step (all but one of four or more), not in one. */
bool pt_peer_above_in_steps(const peer_values *v, size_t w)
{
    if (!v->steps)
        return true;
    size_t above = 0;
    for (size_t s = 0; s < v->steps; s++)
        above += v->per_step[w * v->steps + s] > v->step_median[s];
    return above + (v->steps >= 4) >= v->steps;
}

/* What a difference in time (not in calls) must clear on worker w: the noise of the
 * typical worker and its own, and the machine-wide swing. A loaded machine slows every
 * worker by a factor that changes from step to step; the workers' shares of it differ by
 * as much, so an excess no larger than the typical worker's own step-to-step swing is
 * that slowdown landing unevenly, not a slow worker (a 10 s matmul that takes 5 s in the
 * next step is not 300 ms slower on one rank). Consistent work is unaffected: a sleep's
 * typical value does not swing. On a host whose CPU is saturated and shared by several
 * workers, CPU-side time is a share of one CPU that the scheduler hands out unevenly:
 * there the excess must be the same size in every step (clear STEP_SIGMAS of the
 * worker's own spread, not of its mean's), and a function whose typical time itself
 * swings by more than the floor is load-bound -- what one rank loses of it another
 * gains, so no rank is named for it (the host is the problem, not that rank). A sleep,
 * whose time the load does not move, is still judged. */
bool pt_peer_load_bound(const peer_values *v, size_t w)
{
    return v->cpu_side && v->contended[w] && v->steps && v->swing > v->floor;
}

double pt_peer_time_threshold(const peer_values *v, size_t w)
{
    if (pt_peer_load_bound(v, w))
        return INFINITY;
    double threshold = fmax(v->threshold, v->swing);
    if (v->steps)
        threshold = fmax(threshold, STEP_SIGMAS * v->own_noise[w] /
                                        (v->cpu_side && v->contended[w] ? 1 : sqrt((double)v->steps)));
    return threshold;
}

/* How many workers of the job chance would put at least as far up as w in every step:
 * the workers, times the product over steps of the share of them at w's value or above
 * in that step (w counted: never under one in n). The other workers are chance's
 * measure: noise that slows a quarter of them by 30-45% in each step leaves one of 64
 * that far up in three steps, and none above a GPU that is slower than that noise reaches
 * in two of them. */
static double by_chance(const peer_values *v, size_t w)
{
    size_t n = v->n;
    double expected = (double)n;
    for (size_t s = 0; s < v->steps; s++) {
        const double *sorted = v->sorted + s * n;
        double value = v->per_step[w * v->steps + s];
        size_t lo = 0, hi = n; /* the first sorted value >= value */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sorted[mid] < value)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* Multiplied before divided: 10 x (1/10)^3 comes out 0.01, not 0.010000000000000002. */
        expected = expected * (double)(n - lo) / (double)n;
    }
    return expected;
}

/* Above the typical worker by the floor and the swing in every step, and reliably so
 * however much its own excess varies: by more than the typical worker's noise reaches
 * in one step (STEP_SIGMAS of it, not of a mean: a slow GPU that processes sharing it
 * slow in some steps too, 27, 31 and 59 ms ahead, its own spread 17 ms, is slow in
 * each), or further up than chance puts CHANCE_WORKERS of the job's workers (a GPU
 * slower than the noise that slows many workers in each step reaches: 64 workers, a
 * quarter of them 30-45% slower in each step, rank 63 53, 28 and 66 ms ahead, the top in
 * two steps, though that noise's spread is larger than 28 ms). */
static bool steadily_above(const peer_values *v, size_t w)
{
    double margin = fmax(v->floor, v->swing);
    if (!pt_peer_above_in_each_step(v, w, margin) || pt_peer_load_bound(v, w))
        return false;
    return pt_peer_above_in_each_step(v, w, fmax(margin, STEP_SIGMAS * v->noise)) ||
           (v->sorted && by_chance(v, w) < CHANCE_WORKERS);
}

/* Worker w's excess over the typical worker when it is real, else 0. Exact evidence
 * (extra calls) needs only the floor; a difference in time must clear the noise. */
double pt_peer_real_excess(const pt_analysis *a, const peer_values *v, size_t w, bool exact)
{
    double excess = v->mean[w] - v->median;
    double threshold = exact ? pt_floor_ms(a) : pt_peer_time_threshold(v, w);
    bool steady = !exact && excess > 0 && steadily_above(v, w);
    return steady || (excess > threshold && pt_peer_above_in_steps(v, w)) ? excess : 0;
}

bool pt_peer_cpu_side(pt_class cls)
{
    return cls == PT_CLASS_RUNTIME || cls == PT_CLASS_PYTHON;
}

void pt_peer_row_values(const pt_analysis *a, const pt_fn_row *row, peer_values *v)
{
    v->cpu_side = pt_peer_cpu_side(row->cls);
    pt_row_exposed_ms(a, row, v->mean);
    if (v->steps)
        pt_row_step_ms(a, row, v->per_step);
    pt_peer_measure(a, v);
}

/* The exposed time of some classes together, per worker and per step. */
void pt_peer_classes_values(const pt_analysis *a, const pt_class *classes, size_t count, peer_values *v)
{
    size_t cells = a->n * v->steps;
    double *mean = pt_xmalloc((a->n ? a->n : 1) * sizeof *mean), *per_step = pt_xmalloc((cells + 1) * sizeof *per_step);
    memset(v->mean, 0, a->n * sizeof *v->mean);
    memset(v->per_step, 0, cells * sizeof *v->per_step);
    v->cpu_side = count > 0;
    for (size_t k = 0; k < count; k++)
        v->cpu_side &= pt_peer_cpu_side(classes[k]);
    for (size_t k = 0; k < count; k++) {
        pt_class_exposed_ms(a, classes[k], mean);
        for (size_t w = 0; w < a->n; w++)
            v->mean[w] += mean[w];
        if (v->steps)
            pt_class_step_ms(a, classes[k], per_step);
        for (size_t i = 0; i < cells; i++)
            v->per_step[i] += per_step[i];
    }
    free(mean);
    free(per_step);
    pt_peer_measure(a, v);
}

void pt_peer_class_values(const pt_analysis *a, pt_class cls, peer_values *v)
{
    pt_peer_classes_values(a, &cls, 1, v);
}

