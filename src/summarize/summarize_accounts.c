/* summarize_accounts.c -- a function's accumulator (func_acc, by class and id) and its
 * exposed time spread over the steps it falls in: what the Python stage
 * (summarize_python.c) and the per-function stage (summarize_functions.c) both write to,
 * below both of them.
 *
 * An accumulator is made on first sight, found again through the interned (class, id)
 * key in O(1); each new function adds a row of per-step values. A span's exposed time
 * finds its first step by binary search (the steps are sorted and disjoint), so adding
 * one costs O(log steps + the steps it spans). */
#include "summarize/summarize_state.h"
#include "util/group.h"
#include "util/stats.h"

#include <stdlib.h>
#include <string.h>

func_acc *sum_func_get(reducer *r, pt_class cls, uint32_t id)
{
    uint32_t key[2] = {(uint32_t)cls, id};
    uint32_t index = pt_strtab_intern(&r->func_index, (const char *)key, sizeof key);
    if (index == r->funcs_count) {
        size_t old_cap = r->funcs_cap;
        PT_GROW(r->funcs, r->funcs_cap, r->funcs_count + 1);
        if (r->funcs_cap != old_cap && r->step_values) { /* one row of step values per function */
            r->step_exposed = pt_xrealloc(r->step_exposed, r->funcs_cap * r->step_values * sizeof *r->step_exposed);
            memset(r->step_exposed + old_cap * r->step_values, 0,
                   (r->funcs_cap - old_cap) * r->step_values * sizeof *r->step_exposed);
        }
        func_acc *f = &r->funcs[r->funcs_count++];
        memset(f, 0, sizeof *f);
        f->cls = cls;
        f->id = id;
        f->group_name = NO_ID;
    }
    return &r->funcs[index];
}

int sum_cmp_interval(const void *a, const void *b)
{
    const pt_interval *x = a, *y = b;
    return pt_cmp_i64(x->start, y->start);
}

/* Adds [a, b)'s exposed time to the steps it falls in. Steps are sorted and disjoint
 * (sum_dedupe_steps), so the first is found by binary search. */
void sum_add_step_exposure(reducer *r, size_t func, const pt_timeline *above, int64_t a, int64_t b)
{
    const step_rec *steps = r->s->steps;
    size_t lo = 0, hi = r->step_values;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (steps[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < r->step_values && steps[k].start < b; k++) {
        int64_t x = PT_MAX(a, steps[k].start), y = PT_MIN(b, steps[k].end);
        if (y > x)
            r->step_exposed[func * r->step_values + k] += (y - x) - pt_timeline_covered(above, x, y);
    }
}
