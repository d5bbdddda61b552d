/* python_functions.c -- the "Python functions" section: every call stack that takes more
 * than 1% of the window on some worker, counting only exclusive time not hidden under GPU
 * compute, memory operations, communication or runtime calls; each lists the workers
 * over 1%, largest first. */
#include "diagnose/analysis.h"

#include <stdlib.h>

#define SHARE_THRESHOLD 0.01
#define MAX_STACKS 200

/* Python stacks over the threshold on some worker score their largest share. */
static bool stack_score(const pt_analysis *a, const pt_fn_row *row, const void *ctx, double *values, double *score)
{
    (void)a, (void)ctx, (void)values;
    *score = row->max_ratio;
    return row->cls == PT_CLASS_PYTHON && row->max_ratio > SHARE_THRESHOLD;
}

pt_json *pt_section_python(const pt_analysis *a)
{
    size_t k;
    pt_ranked_row *stacks = pt_rank_rows(a, stack_score, NULL, &k);
    pt_json *section = pt_json_object();
    double *ratio = pt_xmalloc((a->n ? a->n : 1) * sizeof *ratio);
    for (size_t i = 0; i < k && i < MAX_STACKS; i++) {
        pt_row_exposed_ratio(a, stacks[i].row, ratio);
        pt_json_add(section, stacks[i].row->name, pt_workers_above(a, ratio, SHARE_THRESHOLD, "Python functions",
                                                                      stacks[i].row->name, "workers"));
    }
    free(ratio);
    free(stacks);
    return section;
}
