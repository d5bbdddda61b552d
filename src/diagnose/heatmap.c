/* heatmap.c -- the workers x functions matrix the page draws: for the functions that
 * matter (those the findings name, then the costliest by median bottleneck ratio), each
 * worker's deviation from the median worker as a fraction of the step, and its
 * bottleneck ratio. One slow worker among thousands is one bright row. Numbers carry
 * four significant digits: it is display data, and 8192 workers must stay a few MB. */
#include "diagnose/analysis.h"

#include <math.h>
#include <stdlib.h>

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

pt_json *pt_section_heatmap(const pt_analysis *a, const int *status)
{
    size_t n = a->n;
    size_t k;
    pt_ranked_row *cols = pt_rank_rows(a, column_score, status, &k);
    if (k > HEATMAP_FUNCTIONS)
        k = HEATMAP_FUNCTIONS;

    pt_json *section = pt_json_object();
    pt_json *functions = pt_json_add(section, "functions", pt_json_array());
    for (size_t c = 0; c < k; c++) {
        pt_json *f = pt_json_push(functions, pt_json_object());
        pt_json_add(f, "category", pt_json_string(pt_category_of(cols[c].row->cls)));
        pt_json_add(f, "name", pt_json_string(cols[c].row->name));
    }
    pt_json *ranks = pt_json_add(section, "ranks", pt_json_array());
    for (size_t w = 0; w < n; w++)
        pt_json_push(ranks, pt_json_int(pt_worker_rank(a, w)));
    double **dev = pt_xmalloc((k ? k : 1) * sizeof *dev), **share = pt_xmalloc((k ? k : 1) * sizeof *share);
    for (size_t c = 0; c < k; c++) {
        dev[c] = pt_xmalloc((n ? n : 1) * sizeof **dev);
        share[c] = pt_xmalloc((n ? n : 1) * sizeof **share);
        pt_row_exposed_ms(a, cols[c].row, dev[c]);
        pt_row_exposed_ratio(a, cols[c].row, share[c]);
        double median = pt_median_of(dev[c], n, a->scratch);
        for (size_t w = 0; w < n; w++)
            dev[c][w] = a->median_step_ms > 0 ? (dev[c][w] - median) / a->median_step_ms : 0;
    }
    pt_json *values = pt_json_add(section, "values", pt_json_array());
    pt_json *shares = pt_json_add(section, "shares", pt_json_array());
    for (size_t w = 0; w < n; w++) {
        pt_json *vrow = pt_json_push(values, pt_json_array());
        pt_json *srow = pt_json_push(shares, pt_json_array());
        for (size_t c = 0; c < k; c++) {
            pt_json_push(vrow, pt_json_number_rounded(dev[c][w], 4));
            pt_json_push(srow, pt_json_number_rounded(share[c][w], 4));
        }
    }
    for (size_t c = 0; c < k; c++)
        free(dev[c]), free(share[c]);
    free(dev);
    free(share);
    free(cols);
    return section;
}
