/* heatmap.c -- the workers x functions matrix the page draws: for the functions that
 * matter (those the findings name, then the costliest by median bottleneck ratio), each
 * worker's deviation from the median worker as a fraction of the step, and its
 * bottleneck ratio. One slow worker among thousands is one bright row. Numbers carry
 * four significant digits: it is display data, and 8192 workers must stay a few MB. In
 * the bounded form (report_scale.h) the rows are the full-detail workers' and one per
 * node; the parts hold every worker's. */
#include "diagnose/analysis.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEATMAP_FUNCTIONS 40

/* Costly everywhere (the median bottleneck ratio), or very different on a flagged
 * worker (twice its deviation from the median worker, as a share of the step). */
static bool column_score(const pt_analysis *a, const pt_fn_row *row, const void *flagged, double *ratio,
                         double *score)
{
    const int *status = flagged;
    double *ms = a->scratch2;
    if (row->max_ratio < 0.001)
        return false;
    pt_row_exposed_ratio(a, row, ratio);
    pt_row_exposed_ms(a, row, ms);
    *score = pt_median_of(ratio, a->n, a->scratch);
    pt_spread s = pt_spread_of(ms, a->n, a->scratch);
    for (size_t w = 0; w < a->n; w++)
        if (status[w] && a->median_step_ms > 0)
            *score = fmax(*score, 2 * fabs(ms[w] - s.median) / a->median_step_ms);
    return true;
}

void pt_heatmap_build(const pt_analysis *a, const int *status, pt_heatmap *h)
{
    size_t n = a->n, k;
    pt_ranked_row *cols = pt_rank_rows(a, column_score, status, &k);
    if (k > HEATMAP_FUNCTIONS)
        k = HEATMAP_FUNCTIONS;
    h->columns = k;
    h->rows = pt_xmalloc((k ? k : 1) * sizeof *h->rows);
    h->dev = pt_xmalloc((k && n ? k * n : 1) * sizeof *h->dev);
    h->share = pt_xmalloc((k && n ? k * n : 1) * sizeof *h->share);
    for (size_t c = 0; c < k; c++) {
        double *dev = h->dev + c * n;
        h->rows[c] = cols[c].row;
        pt_row_exposed_ms(a, cols[c].row, dev);
        pt_row_exposed_ratio(a, cols[c].row, h->share + c * n);
        double median = pt_median_of(dev, n, a->scratch);
        for (size_t w = 0; w < n; w++)
            dev[w] = a->median_step_ms > 0 ? (dev[w] - median) / a->median_step_ms : 0;
    }
    free(cols);
}

void pt_heatmap_free(pt_heatmap *h)
{
    free(h->rows);
    free(h->dev);
    free(h->share);
    memset(h, 0, sizeof *h);
}

pt_json *pt_heatmap_rows(const pt_analysis *a, const pt_heatmap *h, size_t first, size_t last, bool kept_only)
{
    size_t n = a->n;
    pt_json *rows = pt_json_object();
    pt_json *ranks = pt_json_add(rows, "ranks", pt_json_array());
    pt_json *values = pt_json_add(rows, "values", pt_json_array());
    pt_json *shares = pt_json_add(rows, "shares", pt_json_array());
    for (size_t w = first; w < last; w++) {
        if (kept_only && !a->scale->detail[w])
            continue;
        pt_json_push(ranks, pt_json_int(pt_worker_rank(a, w)));
        pt_json *vrow = pt_json_push(values, pt_json_array());
        pt_json *srow = pt_json_push(shares, pt_json_array());
        for (size_t c = 0; c < h->columns; c++) {
            pt_json_push(vrow, pt_json_number_rounded(h->dev[c * n + w], 4));
            pt_json_push(srow, pt_json_number_rounded(h->share[c * n + w], 4));
        }
    }
    return rows;
}

/* One row per node: the deviation of largest magnitude among its workers (so one bright
 * worker lights its node) and their mean bottleneck ratio, per column. */
static pt_json *node_rows(const pt_analysis *a, const pt_heatmap *h)
{
    size_t n = a->n, nodes = pt_scale_node_count(a), k = h->columns;
    double *dev = pt_xcalloc(nodes && k ? nodes * k : 1, sizeof *dev);
    double *share = pt_xcalloc(nodes && k ? nodes * k : 1, sizeof *share);
    size_t *members = pt_xcalloc(nodes ? nodes : 1, sizeof *members);
    for (size_t w = 0; w < n; w++) {
        uint32_t node = pt_scale_node_of(a, w);
        members[node]++;
        for (size_t c = 0; c < k; c++) {
            double d = h->dev[c * n + w];
            if (fabs(d) > fabs(dev[node * k + c]))
                dev[node * k + c] = d;
            share[node * k + c] += h->share[c * n + w];
        }
    }
    pt_json *rows = pt_json_object();
    pt_json *hosts = pt_json_add(rows, "hosts", pt_json_array());
    pt_json *values = pt_json_add(rows, "values", pt_json_array());
    pt_json *shares = pt_json_add(rows, "shares", pt_json_array());
    for (uint32_t node = 0; node < nodes; node++) {
        pt_json_push(hosts, pt_json_string(pt_scale_node_host(a, node)));
        pt_json *vrow = pt_json_push(values, pt_json_array());
        pt_json *srow = pt_json_push(shares, pt_json_array());
        for (size_t c = 0; c < k; c++) {
            pt_json_push(vrow, pt_json_number_rounded(dev[node * k + c], 4));
            pt_json_push(srow, pt_json_number_rounded(share[node * k + c] / (double)members[node], 4));
        }
    }
    free(dev);
    free(share);
    free(members);
    return rows;
}

pt_json *pt_section_heatmap(const pt_analysis *a, const pt_heatmap *h)
{
    pt_json *section = pt_json_object();
    pt_json *functions = pt_json_add(section, "functions", pt_json_array());
    for (size_t c = 0; c < h->columns; c++) {
        pt_json *f = pt_json_push(functions, pt_json_object());
        pt_json_add(f, "category", pt_json_string(pt_category_of(h->rows[c]->cls)));
        pt_json_add(f, "name", pt_json_string(h->rows[c]->name));
    }
    pt_json *rows = pt_heatmap_rows(a, h, 0, a->n, pt_bounded(a));
    for (size_t i = 0; i < rows->count; i++) { /* moved into the section, in order */
        pt_json_add(section, rows->keys[i], rows->items[i]);
        free(rows->keys[i]);
    }
    rows->count = 0;
    pt_json_free(rows);
    if (pt_bounded(a))
        pt_json_add(section, "nodes", node_rows(a, h));
    return section;
}
