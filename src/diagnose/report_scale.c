/* report_scale.c -- the bounded form of a large job's report (report_scale.h;
 * docs/report-schema.md, "The bounded form").
 *
 * Design: the analysis is the same at every size; only what the report shows of each
 * worker changes. pt_scale_begin decides it once the findings are known: the workers a
 * finding names, the outliers of step time and GPU utilisation, rank 0 and the median
 * worker get full detail; the sections add the workers they list (pt_keep_worker) and
 * cut their per-worker maps to the most extreme PT_REPORT_LISTED_MAX (pt_listed_count,
 * each cut recorded). What every worker still has in report.json costs a constant: a row
 * of the worker table, its share of the distributions and of its node's aggregate. The
 * rest of each worker is in the parts (diagnose.c writes them). Cost: a few sorts of n
 * doubles and one pass per table; memory O(n) plus the JSON of ~n * 7 table cells. */
#define _POSIX_C_SOURCE 200809L
#include "diagnose/analysis.h"
#include "util/group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *pt_detail_name(pt_detail d)
{
    static const char *const names[] = {"", "named", "outlier", "listed", "example"};
    return (size_t)d < PT_ARRAY_LEN(names) ? names[d] : "";
}

size_t pt_report_full_max_workers(void)
{
    const char *given = getenv("PERFTRACKER_REPORT_FULL_MAX");
    if (given && *given) {
        char *end;
        unsigned long long v = strtoull(given, &end, 10);
        if (*end == '\0' && given[0] != '-')
            return (size_t)PT_MIN(v, (unsigned long long)SIZE_MAX);
    }
    return PT_REPORT_FULL_MAX_WORKERS;
}

size_t pt_listed_count(const pt_analysis *a, const char *section, const char *key, const char *field, size_t count)
{
    if (!pt_bounded(a) || count <= PT_REPORT_LISTED_MAX)
        return count;
    pt_json *cut = pt_json_push(a->scale->truncated, pt_json_object());
    pt_json_add(cut, "section", pt_json_string(section));
    pt_json_add(cut, "key", key ? pt_json_string(key) : pt_json_null());
    pt_json_add(cut, "field", pt_json_string(field));
    pt_json_add(cut, "listed", pt_json_int(PT_REPORT_LISTED_MAX));
    pt_json_add(cut, "count", pt_json_int((int64_t)count));
    return PT_REPORT_LISTED_MAX;
}

void pt_keep_worker(const pt_analysis *a, size_t w, pt_detail why)
{
    pt_report_scale *sc = a->scale;
    if (!sc || w >= a->n)
        return;
    if (sc->detail[w] == PT_DETAIL_NONE) {
        if (sc->kept >= PT_REPORT_FULL_DETAIL_MAX)
            return;
        sc->kept++;
        sc->detail[w] = (uint8_t)why;
    } else if ((uint8_t)why < sc->detail[w]) {
        sc->detail[w] = (uint8_t)why;
    }
}

static double gpu_utilization(const pt_worker_summary *s)
{
    return s->window_ns > 0 ? (double)s->union_ns[PT_CLASS_COMPUTE] / (double)s->window_ns : 0;
}

typedef struct worker_value {
    size_t worker;
    double value;
} worker_value;

static int by_value_asc(const void *x, const void *y)
{
    const worker_value *p = x, *q = y;
    if (p->value != q->value)
        return p->value < q->value ? -1 : 1;
    return p->worker < q->worker ? -1 : p->worker > q->worker;
}

static int by_value_desc(const void *a, const void *b)
{
    const worker_value *x = a, *y = b;
    int order = pt_cmp_desc(x->value, y->value);
    return order ? order : pt_cmp_i64((int64_t)x->worker, (int64_t)y->worker);
}

/* Here, not in analysis.c, because a section's list is where the bounded form cuts and
 * keeps workers: the analysis calls nothing of this file's. */
pt_json *pt_workers_above(const pt_analysis *a, const double *values, double threshold, const char *section,
                          const char *key, const char *field)
{
    worker_value *list = pt_xmalloc((a->n ? a->n : 1) * sizeof *list);
    size_t m = 0;
    for (size_t w = 0; w < a->n; w++)
        if (values[w] > threshold)
            list[m++] = (worker_value){w, values[w]};
    qsort(list, m, sizeof *list, by_value_desc);
    m = pt_listed_count(a, section, key, field, m);
    pt_json *out = pt_json_object();
    for (size_t i = 0; i < m; i++) {
        pt_json_add(out, pt_worker_name(a, list[i].worker), pt_json_number(list[i].value));
        pt_keep_worker(a, list[i].worker, PT_DETAIL_LISTED);
    }
    free(list);
    return out;
}

/* Keeps the `count` workers of lowest value (highest: lowest of -value). */
static void keep_extremes(pt_analysis *a, const double *values, bool highest, size_t count)
{
    worker_value *list = pt_xmalloc((a->n ? a->n : 1) * sizeof *list);
    size_t m = 0;
    for (size_t w = 0; w < a->n; w++)
        if (values[w] > 0)
            list[m++] = (worker_value){w, highest ? -values[w] : values[w]};
    qsort(list, m, sizeof *list, by_value_asc);
    for (size_t i = 0; i < m && i < count; i++)
        pt_keep_worker(a, list[i].worker, PT_DETAIL_OUTLIER);
    free(list);
}

static void build_nodes(pt_report_scale *sc, const pt_analysis *a)
{
    pt_strtab_init(&sc->hosts);
    sc->node_of = pt_xmalloc((a->n ? a->n : 1) * sizeof *sc->node_of);
    for (size_t w = 0; w < a->n; w++) { /* workers are in rank order */
        const char *host = a->workers[w]->host ? a->workers[w]->host : "";
        sc->node_of[w] = pt_strtab_intern(&sc->hosts, host, strlen(host));
    }
}

void pt_scale_begin(pt_analysis *a, const int *status)
{
    if (a->n <= pt_report_full_max_workers())
        return;
    pt_report_scale *sc = pt_xcalloc(1, sizeof *sc);
    sc->full_max = pt_report_full_max_workers();
    sc->detail = pt_xcalloc(a->n, 1);
    sc->truncated = pt_json_array();
    a->scale = sc;
    build_nodes(sc, a);
    for (size_t w = 0; w < a->n; w++)
        if (status[w])
            pt_keep_worker(a, w, PT_DETAIL_NAMED);
    keep_extremes(a, a->step_ms, true, PT_REPORT_OUTLIERS);
    keep_extremes(a, a->step_ms, false, PT_REPORT_OUTLIERS);
    double *util = pt_xmalloc(a->n * sizeof *util);
    for (size_t w = 0; w < a->n; w++)
        util[w] = a->has_gpu[w] ? gpu_utilization(a->workers[w]) + 1e-12 : 0; /* > 0: a GPU worker */
    keep_extremes(a, util, false, PT_REPORT_OUTLIERS);
    free(util);
    size_t median = 0;
    for (size_t w = 0; w < a->n; w++) {
        if (a->workers[w]->rank == 0)
            pt_keep_worker(a, w, PT_DETAIL_EXAMPLE);
        if (fabs(a->step_ms[w] - a->median_step_ms) < fabs(a->step_ms[median] - a->median_step_ms))
            median = w;
    }
    pt_keep_worker(a, median, PT_DETAIL_EXAMPLE);
}

void pt_scale_end(pt_analysis *a)
{
    pt_report_scale *sc = a->scale;
    if (!sc)
        return;
    free(sc->detail);
    free(sc->node_of);
    pt_strtab_free(&sc->hosts);
    pt_json_free(sc->truncated);
    free(sc);
    a->scale = NULL;
}

size_t pt_scale_node_count(const pt_analysis *a)
{
    return a->scale ? a->scale->hosts.count : 0;
}

uint32_t pt_scale_node_of(const pt_analysis *a, size_t w)
{
    return a->scale->node_of[w];
}

const char *pt_scale_node_host(const pt_analysis *a, uint32_t node)
{
    return pt_strtab_get(&a->scale->hosts, node);
}

/* ------------------------------------------------------------ distributions */

static int cmp_double(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

#define HISTOGRAM_BINS 32

/* The values that are numbers, sorted; returns how many. */
static size_t sorted_numbers(const double *values, size_t n, double **out)
{
    double *sorted = pt_xmalloc((n ? n : 1) * sizeof *sorted);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(values[i]))
            sorted[m++] = values[i];
    qsort(sorted, m, sizeof *sorted, cmp_double);
    *out = sorted;
    return m;
}

static pt_json *quantiles_of_sorted(const double *sorted, size_t m)
{
    static const int percents[] = {0, 1, 5, 25, 50, 75, 95, 99, 100};
    pt_json *q = pt_json_object();
    for (size_t i = 0; i < PT_ARRAY_LEN(percents); i++) {
        char key[8];
        snprintf(key, sizeof key, "p%d", percents[i]);
        /* Nearest rank: a value some worker has, so p100 is the slowest worker's. */
        size_t at = m ? (size_t)ceil(percents[i] / 100.0 * (double)m) : 0;
        at = at ? at - 1 : 0;
        pt_json_add(q, key, m ? pt_json_number_rounded(sorted[at], 6) : pt_json_null());
    }
    return q;
}

pt_json *pt_quantiles_json(const double *values, size_t n)
{
    double *sorted;
    size_t m = sorted_numbers(values, n, &sorted);
    pt_json *q = quantiles_of_sorted(sorted, m);
    free(sorted);
    return q;
}

pt_json *pt_distribution_json(const double *values, size_t n)
{
    double *sorted;
    size_t m = sorted_numbers(values, n, &sorted);
    pt_json *d = pt_json_object();
    pt_json_add(d, "count", pt_json_int((int64_t)m));
    pt_json_add(d, "quantiles", quantiles_of_sorted(sorted, m));
    pt_json *h = pt_json_add(d, "histogram", pt_json_object());
    double lo = m ? sorted[0] : 0, hi = m ? sorted[m - 1] : 0;
    pt_json_add(h, "lo", pt_json_number_rounded(lo, 6));
    pt_json_add(h, "hi", pt_json_number_rounded(hi, 6));
    size_t counts[HISTOGRAM_BINS] = {0};
    for (size_t i = 0; i < m; i++) {
        size_t bin = hi > lo ? (size_t)((sorted[i] - lo) / (hi - lo) * HISTOGRAM_BINS) : 0;
        counts[bin < HISTOGRAM_BINS ? bin : HISTOGRAM_BINS - 1]++;
    }
    pt_json *c = pt_json_add(h, "counts", pt_json_array());
    for (size_t b = 0; b < HISTOGRAM_BINS; b++)
        pt_json_push(c, pt_json_int((int64_t)counts[b]));
    free(sorted);
    return d;
}

/* ------------------------------------------------------------ the "scale" key */

static const char *status_name(int status)
{
    return status == 2 ? "hang" : status == 1 ? "slow" : "normal";
}

/* Per worker, one of the distributions' metrics: step time, GPU utilisation, or a part of
 * the breakdown (per median step, as workers[].breakdown gives it). NAN: no value. */
enum { METRIC_STEP, METRIC_UTIL, METRIC_PARTS, METRIC_COUNT = METRIC_PARTS + PT_CLASS_COUNT + 1 };

static double metric_of(const pt_analysis *a, size_t w, int metric)
{
    const pt_worker_summary *s = a->workers[w];
    if (metric == METRIC_STEP)
        return a->step_ms[w] > 0 ? a->step_ms[w] : s->hang_step_ns > 0 ? (double)s->hang_step_ns / 1e6 : NAN;
    if (metric == METRIC_UTIL)
        return gpu_utilization(s);
    int part = metric - METRIC_PARTS;
    double ns = part < PT_CLASS_COUNT ? (double)s->exposed_ns[part] : (double)s->idle_ns;
    return ns / 1e6 / pt_median_steps_in_window(a, w);
}

static void add_distributions(const pt_analysis *a, pt_json *scale)
{
    static const char *const names[METRIC_COUNT] = {"step_time_ms", "gpu_utilization", "compute_ms",
                                                    "memory_ms", "communication_ms", "runtime_ms",
                                                    "python_ms", "idle_ms"};
    pt_json *d = pt_json_add(scale, "distributions", pt_json_object());
    double *values = pt_xmalloc((a->n ? a->n : 1) * sizeof *values);
    for (int metric = 0; metric < METRIC_COUNT; metric++) {
        for (size_t w = 0; w < a->n; w++)
            values[w] = metric_of(a, w, metric);
        pt_json_add(d, names[metric], pt_distribution_json(values, a->n));
    }
    free(values);
}

/* [min, median, max] of a node's values (NAN skipped; null when none). */
static pt_json *range_json(double *values, size_t m, int digits)
{
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (!isnan(values[i]))
            values[k++] = values[i];
    if (k == 0)
        return pt_json_null();
    qsort(values, k, sizeof *values, cmp_double);
    double median = k % 2 ? values[k / 2] : (values[k / 2 - 1] + values[k / 2]) / 2;
    pt_json *r = pt_json_array();
    pt_json_push(r, pt_json_number_rounded(values[0], digits));
    pt_json_push(r, pt_json_number_rounded(median, digits));
    pt_json_push(r, pt_json_number_rounded(values[k - 1], digits));
    return r;
}

static void add_nodes(const pt_analysis *a, const int *status, pt_json *scale)
{
    size_t nodes = pt_scale_node_count(a);
    /* Each node's workers, contiguous and in rank order within a node. */
    size_t *members = pt_xmalloc((a->n ? a->n : 1) * sizeof *members);
    size_t *first = pt_group_by_key(a->scale->node_of, a->n, nodes, NULL, 0, members);
    double *step = pt_xmalloc((a->n ? a->n : 1) * sizeof *step), *util = pt_xmalloc((a->n ? a->n : 1) * sizeof *util);
    pt_json *list = pt_json_add(scale, "nodes", pt_json_array());
    for (uint32_t node = 0; node < nodes; node++) {
        size_t m = first[node + 1] - first[node];
        const size_t *ws = members + first[node];
        size_t slowest = ws[0], not_normal = 0;
        for (size_t i = 0; i < m; i++) {
            step[i] = metric_of(a, ws[i], METRIC_STEP);
            util[i] = metric_of(a, ws[i], METRIC_UTIL);
            not_normal += status[ws[i]] != 0;
            if (step[i] > metric_of(a, slowest, METRIC_STEP) || isnan(metric_of(a, slowest, METRIC_STEP)))
                slowest = ws[i];
        }
        pt_json *e = pt_json_push(list, pt_json_object());
        pt_json_add(e, "host", pt_json_string(pt_scale_node_host(a, node)));
        pt_json_add(e, "workers", pt_json_int((int64_t)m));
        pt_json *ranks = pt_json_add(e, "ranks", pt_json_array());
        pt_json_push(ranks, pt_json_int(pt_worker_rank(a, ws[0])));
        pt_json_push(ranks, pt_json_int(pt_worker_rank(a, ws[m - 1])));
        pt_json_add(e, "step_time_ms", range_json(step, m, 6));
        pt_json_add(e, "gpu_utilization", range_json(util, m, 6));
        pt_json_add(e, "slowest_rank", pt_json_int(pt_worker_rank(a, slowest)));
        pt_json_add(e, "not_normal", pt_json_int((int64_t)not_normal));
        pt_json *parts = pt_json_add(e, "parts", pt_json_array());
        pt_json_push(parts, pt_json_int((int64_t)(ws[0] / PT_REPORT_PART_WORKERS)));
        pt_json_push(parts, pt_json_int((int64_t)(ws[m - 1] / PT_REPORT_PART_WORKERS)));
    }
    free(step);
    free(util);
    free(members);
    free(first);
}

static void add_worker_table(const pt_analysis *a, const int *status, pt_json *scale)
{
    pt_json *t = pt_json_add(scale, "worker_table", pt_json_object());
    pt_json *rank = pt_json_add(t, "rank", pt_json_array()), *name = pt_json_add(t, "name", pt_json_array());
    pt_json *node = pt_json_add(t, "node", pt_json_array()), *local = pt_json_add(t, "local_rank", pt_json_array());
    pt_json *step = pt_json_add(t, "step_time_ms", pt_json_array());
    pt_json *util = pt_json_add(t, "gpu_utilization", pt_json_array());
    pt_json *st = pt_json_add(t, "status", pt_json_array());
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        pt_json_push(rank, pt_json_int(s->rank));
        pt_json_push(name, pt_json_string(s->name ? s->name : ""));
        pt_json_push(node, pt_json_int(pt_scale_node_of(a, w)));
        pt_json_push(local, pt_json_int(s->local_rank));
        double ms = metric_of(a, w, METRIC_STEP);
        pt_json_push(step, isnan(ms) ? pt_json_null() : pt_json_number_rounded(ms, 6));
        pt_json_push(util, pt_json_number_rounded(gpu_utilization(s), 4));
        pt_json_push(st, pt_json_string(status_name(status[w])));
    }
}

pt_json *pt_section_scale(const pt_analysis *a, const int *status, pt_json *parts)
{
    pt_report_scale *sc = a->scale;
    pt_json *scale = pt_json_object();
    pt_json_add(scale, "form", pt_json_string("bounded"));
    pt_json_add(scale, "full_form_max_workers", pt_json_int((int64_t)sc->full_max));
    pt_json_add(scale, "full_detail_max", pt_json_int(PT_REPORT_FULL_DETAIL_MAX));
    pt_json_add(scale, "listed_max", pt_json_int(PT_REPORT_LISTED_MAX));
    pt_json_add(scale, "workers_in_full", pt_json_int((int64_t)sc->kept));
    pt_json_add(scale, "truncated", sc->truncated);
    sc->truncated = pt_json_array(); /* the report owns the list now */
    add_distributions(a, scale);
    add_nodes(a, status, scale);
    add_worker_table(a, status, scale);
    pt_json_add(scale, "parts", parts ? parts : pt_json_null());
    return scale;
}
