/* hardware.c -- the "Hardware" section, present when the collector sampled hardware
 * counters: per metric the spread of worker averages, per worker its average/min/max,
 * and the sampled series of at most SERIES_WORKERS workers (SERIES_WORKERS_BOUNDED in the
 * bounded form; the highlighted ones first), which is all a page needs to plot without
 * shipping every worker's series. */
#include "diagnose/analysis.h"
#include "util/stats.h"
#include "util/group.h"

#include <stdlib.h>
#include <string.h>

#define SERIES_WORKERS 64
#define SERIES_WORKERS_BOUNDED 8 /* the bounded form (4,096 workers and more): each series is
                                    a few KB per metric, and a page plots a handful */

/* The unit of a metric the collector samples, from its name (collect/sampler.c, nvml.c):
 * utilizations, GPM activities and host memory in use are percentages; "_mb" values are
 * MiB (bytes / 2^20) and "_mibps" MiB/s. */
static const char *unit_of(const char *metric)
{
    static const struct {
        const char *suffix, *unit;
    } units[] = {{"_pct", "%"},      {"util", "%"},     {"_active", "%"},     {"_occupancy", "%"},
                 {"mem_used", "%"},  {"_mhz", "MHz"},   {"_w", "W"},          {"_gbps", "GB/s"},
                 {"_mbps", "MB/s"},  {"_mibps", "MiB/s"}, {"_c", "C"},        {"_mib", "MiB"},
                 {"_mb", "MiB"},     {"_bytes", "B"}};
    size_t n = strlen(metric);
    for (size_t i = 0; i < PT_ARRAY_LEN(units); i++) {
        size_t m = strlen(units[i].suffix);
        if (n > m && strcmp(metric + n - m, units[i].suffix) == 0)
            return units[i].unit;
    }
    return "";
}

static pt_json *series_json(const pt_metric_summary *m)
{
    pt_json *points = pt_json_array();
    for (size_t k = 0; k < m->points; k++) {
        pt_json *p = pt_json_push(points, pt_json_array());
        pt_json_push(p, pt_json_number_rounded(m->series_ms[k], 6));
        pt_json_push(p, pt_json_number_rounded(m->series_value[k], 6));
    }
    return points;
}

static void add_series(const pt_analysis *a, const bool *highlight, pt_json *series)
{
    size_t shown = 0, most = pt_bounded(a) ? SERIES_WORKERS_BOUNDED : SERIES_WORKERS;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t w = 0; w < a->n && shown < most; w++) {
            const pt_worker_summary *s = a->workers[w];
            bool wanted = pass == 0 ? highlight && highlight[w] : !(highlight && highlight[w]);
            if (!wanted || s->metric_count == 0)
                continue;
            pt_json *per = pt_json_add(series, s->name, pt_json_object());
            for (size_t i = 0; i < s->metric_count; i++)
                pt_json_add(per, s->metrics[i].name, series_json(&s->metrics[i]));
            shown++;
        }
    }
}

/* Every worker's mean of every metric, grouped by metric: values[first[id] ..
 * first[id + 1]) are the means of metric id, in worker order. One pass to count, one to
 * place: linear in the metrics of all workers, and each group holds exactly the entries
 * it counted, whatever the workers hold (admission already refuses a repeated name). */
typedef struct metric_groups {
    pt_strtab names;
    size_t *first;   /* names.count + 1 offsets */
    double *values;
} metric_groups;

static void group_metrics(const pt_analysis *a, metric_groups *g)
{
    pt_strtab_init(&g->names);
    size_t total = 0;
    for (size_t w = 0; w < a->n; w++)
        for (size_t i = 0; i < a->workers[w]->metric_count; i++, total++)
            pt_strtab_intern(&g->names, a->workers[w]->metrics[i].name, strlen(a->workers[w]->metrics[i].name));
    uint32_t *ids = pt_xmalloc((total ? total : 1) * sizeof *ids);
    double *means = pt_xmalloc((total ? total : 1) * sizeof *means);
    size_t k = 0;
    for (size_t w = 0; w < a->n; w++)
        for (size_t i = 0; i < a->workers[w]->metric_count; i++, k++) {
            const char *name = a->workers[w]->metrics[i].name;
            ids[k] = pt_strtab_find(&g->names, name, strlen(name));
            means[k] = a->workers[w]->metrics[i].mean;
        }
    g->values = pt_xmalloc((total ? total : 1) * sizeof *g->values);
    g->first = pt_group_by_key(ids, total, g->names.count, means, sizeof *means, g->values);
    free(means);
    free(ids);
}

static void metric_groups_free(metric_groups *g)
{
    pt_strtab_free(&g->names);
    free(g->first);
    free(g->values);
}

void pt_hardware_worker(const pt_worker_summary *s, pt_json *workers)
{
    if (!s->metric_count)
        return;
    pt_json *per = pt_json_add(workers, s->name, pt_json_object());
    for (size_t i = 0; i < s->metric_count; i++) {
        pt_json *v = pt_json_add(per, s->metrics[i].name, pt_json_object());
        pt_json_add(v, "avg", pt_json_number(s->metrics[i].mean));
        pt_json_add(v, "min", pt_json_number(s->metrics[i].min));
        pt_json_add(v, "max", pt_json_number(s->metrics[i].max));
    }
}

pt_json *pt_section_hardware(const pt_analysis *a, const bool *highlight)
{
    metric_groups g;
    group_metrics(a, &g);
    if (g.names.count == 0) {
        metric_groups_free(&g);
        return NULL;
    }
    pt_json *section = pt_json_object();
    pt_json *metrics = pt_json_add(section, "metrics", pt_json_object());
    for (uint32_t id = 0; id < g.names.count; id++) {
        const char *name = pt_strtab_get(&g.names, id);
        double *means = g.values + g.first[id];
        size_t m = g.first[id + 1] - g.first[id];
        double lo = means[0], hi = means[0];
        for (size_t i = 1; i < m; i++) {
            lo = means[i] < lo ? means[i] : lo;
            hi = means[i] > hi ? means[i] : hi;
        }
        pt_json *entry = pt_json_add(metrics, name, pt_json_object());
        pt_json_add(entry, "unit", pt_json_string(unit_of(name)));
        pt_json *range = pt_json_add(entry, "min/median/max", pt_json_array());
        pt_json_push(range, pt_json_number(lo));
        pt_json_push(range, pt_json_number(pt_median(means, m))); /* reorders its own group only */
        pt_json_push(range, pt_json_number(hi));
        if (pt_bounded(a))
            pt_json_add(entry, "quantiles", pt_quantiles_json(means, m));
    }
    pt_json *workers = pt_json_add(section, "workers", pt_json_object());
    for (size_t w = 0; w < a->n; w++)
        if (!pt_bounded(a) || a->scale->detail[w])
            pt_hardware_worker(a->workers[w], workers);
    add_series(a, highlight, pt_json_add(section, "series", pt_json_object()));
    metric_groups_free(&g);
    return section;
}
