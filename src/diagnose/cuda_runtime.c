/* cuda_runtime.c -- the "CUDA Runtime" section: per API, its bottleneck ratio (time not
 * hidden by GPU activity) and its share of the window with overlap included. APIs that
 * cost less than 0.1% everywhere are left out. */
#include "diagnose/analysis.h"
#include "util/stats.h"

#include <stdlib.h>

#define ABNORMAL_RATIO 0.01
#define SHOWN_RATIO 0.001

/* Runtime APIs score their mean bottleneck ratio. */
static bool api_score(const pt_analysis *a, const pt_fn_row *row, const void *ctx, double *exposed, double *score)
{
    (void)ctx;
    if (row->cls != PT_CLASS_RUNTIME)
        return false;
    pt_row_exposed_ratio(a, row, exposed);
    *score = pt_mean(exposed, a->n);
    return true;
}

pt_json *pt_section_cuda_runtime(const pt_analysis *a)
{
    pt_json *section = pt_json_object();
    size_t k;
    pt_ranked_row *apis = pt_rank_rows(a, api_score, NULL, &k);
    double *exposed = pt_xmalloc((a->n ? a->n : 1) * sizeof *exposed);
    double *total = pt_xmalloc((a->n ? a->n : 1) * sizeof *total);
    for (size_t i = 0; i < k; i++) {
        double avg_exposed = apis[i].score;
        pt_row_total_ratio(a, apis[i].row, total);
        double avg_total = pt_mean(total, a->n);
        pt_row_exposed_ratio(a, apis[i].row, exposed);
        pt_json *abnormal = pt_workers_above(a, exposed, ABNORMAL_RATIO, "CUDA Runtime", apis[i].row->name,
                                             "abnormal_workers");
        if (avg_total < SHOWN_RATIO && avg_exposed < SHOWN_RATIO && abnormal->count == 0) {
            pt_json_free(abnormal);
            continue;
        }
        pt_json *entry = pt_json_add(section, apis[i].row->name, pt_json_object());
        pt_json_add(entry, "avg bottleneck ratio (in [0,1])", pt_json_number(avg_exposed));
        pt_json_add(entry, "avg execution time / monitoring duration (in [0,1])", pt_json_number(avg_total));
        pt_json_add(entry, "abnormal_workers", abnormal);
    }
    free(apis);
    free(exposed);
    free(total);
    return section;
}
