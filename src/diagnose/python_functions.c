/* python_functions.c -- the "Python functions" section: every call stack that takes more
 * than 1% of the window on some worker, counting only exclusive time not hidden under GPU
 * compute, memory operations, communication or runtime calls; each lists the workers
 * over 1%, largest first. */
#include "diagnose/analysis.h"

#include <stdlib.h>
#include <string.h>

#define SHARE_THRESHOLD 0.01
#define MAX_STACKS 200

typedef struct stack_rank {
    const pt_fn_row *row;
} stack_rank;

static int by_max_ratio_desc(const void *a, const void *b)
{
    const pt_fn_row *x = ((const stack_rank *)a)->row, *y = ((const stack_rank *)b)->row;
    if (x->max_ratio != y->max_ratio)
        return x->max_ratio > y->max_ratio ? -1 : 1;
    return strcmp(x->name, y->name);
}

pt_json *pt_section_python(const pt_analysis *a)
{
    stack_rank *stacks = pt_xmalloc((a->row_count ? a->row_count : 1) * sizeof *stacks);
    size_t k = 0;
    for (size_t i = 0; i < a->row_count; i++)
        if (a->rows[i].cls == PT_CLASS_PYTHON && a->rows[i].max_ratio > SHARE_THRESHOLD)
            stacks[k++].row = &a->rows[i];
    qsort(stacks, k, sizeof *stacks, by_max_ratio_desc);
    pt_json *section = pt_json_object();
    double *ratio = pt_xmalloc((a->n ? a->n : 1) * sizeof *ratio);
    for (size_t i = 0; i < k && i < MAX_STACKS; i++) {
        pt_row_exposed_ratio(a, stacks[i].row, ratio);
        pt_json_add(section, stacks[i].row->name, pt_workers_above(a, ratio, SHARE_THRESHOLD));
    }
    free(ratio);
    free(stacks);
    return section;
}
