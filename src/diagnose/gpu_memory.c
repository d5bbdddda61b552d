/* gpu_memory.c -- the "GPU memory operations" section: per copy/set kind, the average
 * bottleneck ratio and every worker above the seed's 1% threshold. */
#include "diagnose/analysis.h"
#include "util/stats.h"

#include <stdlib.h>

#define ABNORMAL_RATIO 0.01

pt_json *pt_section_gpu_memory(const pt_analysis *a)
{
    pt_json *section = pt_json_object();
    double *ratio = pt_xmalloc((a->n ? a->n : 1) * sizeof *ratio);
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_MEMORY)
            continue;
        pt_row_exposed_ratio(a, row, ratio);
        pt_json *entry = pt_json_add(section, row->name, pt_json_object());
        pt_json_add(entry, "avg bottleneck ratio (in [0,1])", pt_json_number(pt_mean(ratio, a->n)));
        pt_json_add(entry, "abnormal_workers", pt_workers_above(a, ratio, ABNORMAL_RATIO, "GPU memory operations", row->name,
                                                                 "abnormal_workers"));
    }
    free(ratio);
    return section;
}
