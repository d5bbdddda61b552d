/* gpu_compute.c -- the "GPU Compute" section: utilisation across workers, the kernels
 * that cost the most, and the workers whose kernels run slower than the same kernels
 * elsewhere (judged per execution, so a worker that simply runs more work is not
 * called slow). A slower kernel is listed only when the difference is significant (an
 * outlier beyond the timer's microsecond, not 2 us against 3 us) and material (it costs
 * the worker 1% of a step). */
#include "diagnose/analysis.h"

#include <math.h>
#include <stdlib.h>

#define MAJOR_KERNELS 10
#define KERNELS_CHECKED 20
#define SLOWDOWN_MIN 1.15   /* a kernel must be 15% slower per execution ... */
#define SIGMAS 5.0          /* ... and an outlier among its peers */
#define UTILIZATION_FLOOR 0.05
#define TIMER_RESOLUTION_MS 0.001 /* Kineto's timestamps are whole microseconds */
#define MATERIAL_SHARE 0.01       /* the slowdown costs at least 1% of a step */

/* Compute kernels score their median bottleneck ratio over GPU workers. */
static bool kernel_score(const pt_analysis *a, const pt_fn_row *row, const void *ctx, double *ratios, double *score)
{
    (void)ctx;
    if (row->cls != PT_CLASS_COMPUTE)
        return false;
    pt_row_exposed_ratio(a, row, ratios);
    size_t m = 0;
    for (size_t w = 0; w < a->n; w++)
        if (a->has_gpu[w])
            ratios[m++] = ratios[w];
    *score = pt_median_of(ratios, m, a->scratch);
    return true;
}

static void add_utilization(const pt_analysis *a, pt_json *section)
{
    double *u = pt_xmalloc((a->n ? a->n : 1) * sizeof *u);
    size_t m = 0;
    for (size_t w = 0; w < a->n; w++)
        if (a->has_gpu[w])
            u[m++] = a->workers[w]->window_ns > 0
                         ? (double)a->workers[w]->union_ns[PT_CLASS_COMPUTE] / (double)a->workers[w]->window_ns
                         : 0;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < m; i++) {
        lo = i ? fmin(lo, u[i]) : u[i];
        hi = i ? fmax(hi, u[i]) : u[i];
    }
    pt_spread s = pt_spread_of(u, m, a->scratch);
    pt_json *range = pt_json_add(section, "min/median/max GPU utilization (in [0,1])", pt_json_array());
    pt_json_push(range, pt_json_number(lo));
    pt_json_push(range, pt_json_number(s.median));
    pt_json_push(range, pt_json_number(hi));
    pt_json *abnormal = pt_json_add(section, "workers with abnormal GPU utilization", pt_json_object());
    double threshold = fmax(SIGMAS * s.sigma, UTILIZATION_FLOOR);
    pt_ranked_worker *listed = pt_xmalloc((m ? m : 1) * sizeof *listed);
    size_t count = 0;
    for (size_t w = 0, i = 0; w < a->n && m >= 3; w++) {
        if (!a->has_gpu[w])
            continue;
        if (fabs(u[i] - s.median) > threshold)
            listed[count++] = (pt_ranked_worker){w, fabs(u[i] - s.median), u[i]};
        i++;
    }
    /* Rank order in the full form; the furthest from the median first when cut. */
    size_t kept = pt_listed_count(a, "GPU Compute", NULL, "workers with abnormal GPU utilization", count);
    if (kept < count)
        pt_sort_ranked_workers(listed, count);
    for (size_t i = 0; i < kept; i++) {
        pt_json_add(abnormal, pt_worker_name(a, listed[i].worker), pt_json_number(listed[i].value));
        pt_keep_worker(a, listed[i].worker, PT_DETAIL_LISTED);
    }
    free(listed);
    free(u);
}

static void add_major_kernels(const pt_analysis *a, const pt_ranked_row *ranked, size_t count, pt_json *section)
{
    pt_json *major = pt_json_add(section, "major_kernel_executions", pt_json_object());
    double *med = pt_xmalloc((a->n ? a->n : 1) * sizeof *med);
    pt_function_summary cell;
    for (size_t k = 0; k < count && k < MAJOR_KERNELS && ranked[k].score > 0; k++) {
        pt_row_median_ms(a, ranked[k].row, med);
        size_t m = 0;
        for (size_t w = 0; w < a->n; w++)
            if (pt_row_function(a, ranked[k].row, w, &cell))
                med[m++] = med[w];
        pt_json *entry = pt_json_add(major, ranked[k].row->name, pt_json_object());
        pt_json_add(entry, "median cost per execution (ms)", pt_json_number(pt_median_of(med, m, a->scratch)));
        pt_json_add(entry, "bottleneck ratio (in [0,1])", pt_json_number(ranked[k].score));
    }
    free(med);
}

/* Per worker, kernels whose per-execution cost is an outlier above its peers'. */
static void add_slow_kernels(const pt_analysis *a, const pt_ranked_row *ranked, size_t count, pt_json *section)
{
    pt_json *issues = pt_json_add(section, "workers with potential GPU issues", pt_json_array());
    pt_json *detail = pt_json_add(section, "detailed report", pt_json_object());
    if (a->gpu_workers < 3)
        return;
    double *med = pt_xmalloc(a->n * sizeof *med);
    double *present = pt_xmalloc(a->n * sizeof *present);
    double *calls = pt_xmalloc(a->n * sizeof *calls);
    pt_json **per_worker = pt_xcalloc(a->n, sizeof *per_worker);
    pt_function_summary cell;
    for (size_t k = 0; k < count && k < KERNELS_CHECKED && ranked[k].score > 0; k++) {
        const pt_fn_row *row = ranked[k].row;
        pt_row_median_ms(a, row, med);
        size_t m = 0;
        for (size_t w = 0; w < a->n; w++)
            if (pt_row_function(a, row, w, &cell))
                present[m++] = med[w];
        if (m < 3)
            continue;
        pt_spread s = pt_spread_of(present, m, a->scratch);
        pt_row_calls_per_step(a, row, calls);
        for (size_t w = 0; w < a->n; w++) {
            double slower = med[w] - s.median;
            if (!pt_row_function(a, row, w, &cell) || med[w] < s.median * SLOWDOWN_MIN ||
                slower <= SIGMAS * fmax(s.sigma, TIMER_RESOLUTION_MS) ||
                slower * calls[w] < MATERIAL_SHARE * a->median_step_ms)
                continue;
            if (!per_worker[w])
                per_worker[w] = pt_json_object();
            pt_json *e = pt_json_add(per_worker[w], row->name, pt_json_object());
            pt_json_add(e, "median cost per execution (ms)", pt_json_number(med[w]));
            pt_json_add(e, "median of other workers (ms)", pt_json_number(s.median));
            pt_json_add(e, "slowdown", pt_json_number_rounded(s.median > 0 ? med[w] / s.median : 0, 4));
        }
    }
    /* Cut: the workers a finding names first, then rank order. */
    size_t slow = 0, kept = 0;
    for (size_t w = 0; w < a->n; w++)
        slow += per_worker[w] != NULL;
    size_t listed = pt_listed_count(a, "GPU Compute", NULL, "detailed report", slow);
    for (int pass = listed < slow ? 0 : 1; pass < 2; pass++)
        for (size_t w = 0; w < a->n; w++) {
            bool named = pt_bounded(a) && a->scale->detail[w] == PT_DETAIL_NAMED;
            if (!per_worker[w] || (pass == 0 && !named) || (pass == 1 && named && listed < slow))
                continue;
            if (kept++ < listed) {
                pt_json_push(issues, pt_json_string(pt_worker_name(a, w)));
                pt_json_add(detail, pt_worker_name(a, w), per_worker[w]);
                pt_keep_worker(a, w, PT_DETAIL_LISTED);
            } else {
                pt_json_free(per_worker[w]);
            }
        }
    free(per_worker);
    free(med);
    free(present);
    free(calls);
}

pt_json *pt_section_gpu_compute(const pt_analysis *a)
{
    pt_json *section = pt_json_object();
    add_utilization(a, section);
    size_t count;
    pt_ranked_row *ranked = pt_rank_rows(a, kernel_score, NULL, &count);
    add_major_kernels(a, ranked, count, section);
    add_slow_kernels(a, ranked, count, section);
    free(ranked);
    return section;
}
