/* cuda_runtime.c -- the "CUDA Runtime" section: per API, its bottleneck ratio (time not
 * hidden by GPU activity) and its share of the window with overlap included. APIs that
 * cost less than 0.1% everywhere are left out. */
#include "diagnose/analysis.h"
#include "util/stats.h"

#include <stdlib.h>
#include <string.h>

#define ABNORMAL_RATIO 0.01
#define SHOWN_RATIO 0.001


typedef struct api_rank {
    const pt_fn_row *row;
    double avg_exposed, avg_total;
} api_rank;

static int by_exposed_desc(const void *a, const void *b)
{
    const api_rank *x = a, *y = b;
    if (x->avg_exposed != y->avg_exposed)
        return x->avg_exposed > y->avg_exposed ? -1 : 1;
    return strcmp(x->row->name, y->row->name);
}

pt_json *pt_section_cuda_runtime(const pt_analysis *a)
{
    pt_json *section = pt_json_object();
    api_rank *apis = pt_xmalloc((a->row_count ? a->row_count : 1) * sizeof *apis);
    double *exposed = pt_xmalloc((a->n ? a->n : 1) * sizeof *exposed);
    double *total = pt_xmalloc((a->n ? a->n : 1) * sizeof *total);
    size_t k = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_RUNTIME)
            continue;
        pt_row_exposed_ratio(a, row, exposed);
        pt_row_total_ratio(a, row, total);
        apis[k++] = (api_rank){row, pt_mean(exposed, a->n), pt_mean(total, a->n)};
    }
    qsort(apis, k, sizeof *apis, by_exposed_desc);
    for (size_t i = 0; i < k; i++) {
        pt_row_exposed_ratio(a, apis[i].row, exposed);
        pt_json *abnormal = pt_workers_above(a, exposed, ABNORMAL_RATIO);
        if (apis[i].avg_total < SHOWN_RATIO && apis[i].avg_exposed < SHOWN_RATIO && abnormal->count == 0) {
            pt_json_free(abnormal);
            continue;
        }
        pt_json *entry = pt_json_add(section, apis[i].row->name, pt_json_object());
        pt_json_add(entry, "avg bottleneck ratio (in [0,1])", pt_json_number(apis[i].avg_exposed));
        pt_json_add(entry, "avg execution time / monitoring duration (in [0,1])", pt_json_number(apis[i].avg_total));
        pt_json_add(entry, "abnormal_workers", abnormal);
    }
    free(apis);
    free(exposed);
    free(total);
    return section;
}
