/* communication.c -- the "Communication" section: collectives grouped by link and
 * pattern ("nvlink ring", "cpu gloo", ...), then by kernel name. For each, a typical
 * worker's features and the workers whose features are abnormal.
 *
 * Features: bottleneck ratio (time not overlapped by compute or memory operations) and
 * bus bandwidth as % of the link's peak (mean and spread over executions). A worker is
 * abnormal when it waits much longer or moves data much slower than its peers. Note the
 * straggler itself shows the *shortest* collectives (everyone else waits for it): it is
 * named by the findings, not here. */
#include "diagnose/analysis.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIGMAS 5.0
#define BOTTLENECK_FLOOR 0.02  /* 2% of the window */
#define THROUGHPUT_FLOOR 10.0  /* percentage points of link peak */

typedef struct features {
    double bottleneck, throughput, throughput_std;
} features;

static features features_of(const pt_analysis *a, size_t w, const pt_function_summary *f)
{
    double window = (double)a->workers[w]->window_ns;
    features x = {window > 0 ? (double)f->exposed_ns / window : 0, f->throughput_avg_pct, f->throughput_std_pct};
    return x;
}

static pt_json *features_json(features x)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "bottleneck ratio (in [0,1])", pt_json_number(x.bottleneck));
    pt_json_add(j, "avg throughput (%)", pt_json_number(x.throughput));
    pt_json_add(j, "throughput std (%)", pt_json_number(x.throughput_std));
    return j;
}

static bool differs(features x, features y, pt_spread sb, pt_spread st)
{
    return fabs(x.bottleneck - y.bottleneck) > fmax(SIGMAS * sb.sigma, BOTTLENECK_FLOOR) ||
           fabs(x.throughput - y.throughput) > fmax(SIGMAS * st.sigma, THROUGHPUT_FLOOR);
}

static pt_json *kernel_entry(const pt_analysis *a, const pt_fn_row *row)
{
    size_t n = a->n, m = 0;
    features *x = pt_xmalloc(n * sizeof *x);
    size_t *who = pt_xmalloc(n * sizeof *who);
    double *b = pt_xmalloc(n * sizeof *b), *t = pt_xmalloc(n * sizeof *t);
    for (size_t w = 0; w < n; w++) {
        pt_function_summary cell;
        const pt_function_summary *f = pt_row_function(a, row, w, &cell);
        if (!f)
            continue;
        x[m] = features_of(a, w, f);
        b[m] = x[m].bottleneck, t[m] = x[m].throughput;
        who[m++] = w;
    }
    pt_spread sb = pt_spread_of(b, m, a->scratch), st = pt_spread_of(t, m, a->scratch);
    /* The example is the worker closest to the typical one. */
    size_t example = 0;
    double best = INFINITY;
    for (size_t i = 0; i < m; i++) {
        double d = fabs(x[i].bottleneck - sb.median) / (sb.sigma + 1e-3) +
                   fabs(x[i].throughput - st.median) / (st.sigma + 1.0);
        if (d < best)
            best = d, example = i;
    }
    size_t different = 0, count = 0;
    pt_json *abnormal = pt_json_array();
    pt_ranked_worker *listed = pt_xmalloc((m ? m : 1) * sizeof *listed);
    double bottleneck_limit = fmax(SIGMAS * sb.sigma, BOTTLENECK_FLOOR);
    double throughput_limit = fmax(SIGMAS * st.sigma, THROUGHPUT_FLOOR);
    for (size_t i = 0; i < m; i++) {
        if (i != example && differs(x[i], x[example], sb, st))
            different++;
        double longer = (x[i].bottleneck - sb.median) / bottleneck_limit;
        double slower = (st.median - x[i].throughput) / throughput_limit;
        if (m >= 3 && (longer > 1 || slower > 1))
            listed[count++] = (pt_ranked_worker){i, fmax(longer, slower), 0};
    }
    /* Rank order in the full form; the furthest beyond its limit first when cut. */
    size_t kept = pt_listed_count(a, "Communication", row->name, "abnormal_workers", count);
    if (kept < count)
        pt_sort_ranked_workers(listed, count);
    for (size_t k = 0; k < kept; k++) {
        size_t i = listed[k].worker;
        pt_json *entry = pt_json_push(abnormal, pt_json_object());
        pt_json_add(entry, "worker", pt_json_string(pt_worker_name(a, who[i])));
        pt_json_add(entry, "features", features_json(x[i]));
        pt_keep_worker(a, who[i], PT_DETAIL_LISTED);
    }
    free(listed);
    if (m)
        pt_keep_worker(a, who[example], PT_DETAIL_EXAMPLE);
    pt_json *entry = pt_json_object();
    pt_json *normal = pt_json_add(entry, "example_of_normal_worker", pt_json_object());
    pt_json_add(normal, "worker", pt_json_string(m ? pt_worker_name(a, who[example]) : ""));
    pt_json_add(normal, "different from other workers", pt_json_int((int64_t)different));
    pt_json_add(normal, "features", features_json(m ? x[example] : (features){0, 0, 0}));
    pt_json_add(entry, "abnormal_workers", abnormal);
    free(x);
    free(who);
    free(b);
    free(t);
    return entry;
}

pt_json *pt_section_communication(const pt_analysis *a)
{
    pt_json *section = pt_json_object();
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_COMM)
            continue;
        const char *group = row->group ? row->group : "unknown";
        pt_json *g = pt_json_get(section, group);
        if (!g)
            g = pt_json_add(section, group, pt_json_object());
        pt_json_add(g, row->name, kernel_entry(a, row));
    }
    return section;
}
