/* The function store (summarize/function_store.h) gives back exactly the records it was
 * given: values that need 8 bytes beside ones that fit in 4, in the same block; doubles
 * bit for bit (-0.0 stays -0.0); per-step values of different counts; absent records;
 * blocks past the first; a worker's functions in its order. And the counting sort
 * (util/group.h) is stable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarize/function_store.h"
#include "util/group.h"

#define WORKERS 2500 /* three blocks */
#define FUNCTIONS 6

static const char *const names[FUNCTIONS] = {"gemm", "ncclAllReduce", "Memcpy DtoH", "cudaLaunchKernel",
                                             "train.py: step", "rare"};
static const pt_class classes[FUNCTIONS] = {PT_CLASS_COMPUTE, PT_CLASS_COMM, PT_CLASS_MEMORY, PT_CLASS_RUNTIME,
                                            PT_CLASS_PYTHON, PT_CLASS_COMPUTE};

/* Worker w's record of function i, or false when w has none ("rare": 1 worker in 700;
 * ncclAllReduce listed first by odd workers). */
static bool record_of(size_t w, size_t i, pt_function_summary *f, int64_t *steps)
{
    if (i == 5 && w % 700 != 3)
        return false;
    memset(f, 0, sizeof *f);
    f->cls = classes[i];
    f->name = (char *)names[i];
    f->group = i == 1 ? (char *)(w % 2 ? "nvlink ring" : "ib tree") : NULL;
    f->caller = i == 3 && w % 3 == 0 ? (char *)"train.py: step" : NULL;
    f->count = w == 1234 ? UINT64_MAX : w % 97;
    f->total_ns = w == 2000 ? (INT64_C(1) << 59) + (int64_t)w : 1000 + (int64_t)w; /* one wide value */
    f->exposed_ns = (int64_t)(w * 7 + i);
    f->waiting_ns = i == 4 ? (int64_t)w : 0;
    f->median_ns = INT32_MAX - (int64_t)(w % 2); /* the largest narrow value */
    f->max_ns = w == 5 ? INT32_MAX + INT64_C(1) : INT32_MIN; /* the smallest wide one, in the first block */
    f->step_count = w % 5 == 0 ? 0 : w == 1500 ? 64 : 3; /* 64 after 3: the block's steps widen */
    for (size_t k = 0; k < f->step_count; k++)
        steps[k] = (int64_t)(w * 100 + k) * (w == 7 ? INT64_C(1) << 40 : 1);
    f->step_exposed_ns = f->step_count ? steps : NULL;
    f->throughput_avg_pct = i == 1 ? 40.0 + (double)w / 1000 : 0;
    f->throughput_std_pct = i == 1 && w == 9 ? -0.0 : 0;
    f->busbw_avg_gbps = i == 1 ? NAN : 0;
    return true;
}

static void assert_same(const pt_function_summary *want, const pt_function_summary *got)
{
    assert_non_null(got);
    assert_int_equal(got->cls, want->cls);
    assert_string_equal(got->name, want->name);
    if (want->group)
        assert_string_equal(got->group, want->group);
    else
        assert_null(got->group);
    if (want->caller)
        assert_string_equal(got->caller, want->caller);
    else
        assert_null(got->caller);
    assert_true(got->count == want->count);
    assert_true(got->total_ns == want->total_ns);
    assert_true(got->exposed_ns == want->exposed_ns);
    assert_true(got->waiting_ns == want->waiting_ns);
    assert_true(got->median_ns == want->median_ns);
    assert_true(got->max_ns == want->max_ns);
    assert_int_equal(got->step_count, want->step_count);
    for (size_t k = 0; k < want->step_count; k++)
        assert_true(got->step_exposed_ns[k] == want->step_exposed_ns[k]);
    assert_memory_equal(&got->throughput_avg_pct, &want->throughput_avg_pct, sizeof(double));
    assert_memory_equal(&got->throughput_std_pct, &want->throughput_std_pct, sizeof(double));
    assert_memory_equal(&got->busbw_avg_gbps, &want->busbw_avg_gbps, sizeof(double));
}

/* Worker w as a summary with records, in its own function order. */
static pt_worker_summary *worker(size_t w)
{
    pt_worker_summary *s = pt_summary_new();
    s->shared_function_names = true; /* the names are static: nothing to free */
    s->functions = calloc(FUNCTIONS, sizeof *s->functions);
    for (size_t j = 0; j < FUNCTIONS; j++) {
        size_t i = w % 2 && j < 2 ? 1 - j : j;
        int64_t steps[PT_SUMMARY_MAX_STEP_VALUES];
        pt_function_summary *f = &s->functions[s->function_count];
        if (!record_of(w, i, f, steps))
            continue;
        if (f->step_count) {
            f->step_exposed_ns = malloc(f->step_count * sizeof *f->step_exposed_ns);
            memcpy(f->step_exposed_ns, steps, f->step_count * sizeof *steps);
        }
        s->function_count++;
    }
    return s;
}

static void test_records_read_back_exactly(void **state)
{
    (void)state;
    pt_fn_store *st = pt_fn_store_new();
    pt_worker_summary **s = calloc(WORKERS, sizeof *s);
    for (size_t w = 0; w < WORKERS; w++) {
        s[w] = worker(w);
        pt_fn_store_adopt(st, s[w]);
        assert_null(s[w]->functions);
        assert_ptr_equal(s[w]->fn_store, st);
    }
    for (size_t w = 0; w < WORKERS; w++) {
        size_t listed = 0;
        for (size_t j = 0; j < FUNCTIONS; j++) {
            size_t i = w % 2 && j < 2 ? 1 - j : j;
            pt_function_summary want, cell;
            int64_t want_steps[PT_SUMMARY_MAX_STEP_VALUES], steps[PT_SUMMARY_MAX_STEP_VALUES];
            if (!record_of(w, i, &want, want_steps))
                continue;
            /* In the worker's order, and by column. */
            assert_same(&want, pt_summary_function(s[w], listed++, &cell, steps));
            const pt_fn_column *col = pt_fn_store_function(st, s[w]->fn_slot, listed - 1);
            assert_string_equal(pt_fn_column_name(col), names[i]);
            assert_int_equal(pt_fn_column_class(col), classes[i]);
            const pt_function_summary *got = pt_fn_store_get(col, s[w]->fn_slot, &cell, NULL);
            assert_null(got->step_exposed_ns);
            assert_int_equal(got->step_count, want.step_count);
        }
        assert_int_equal(listed, s[w]->function_count);
    }
    /* "rare" is absent where a worker did not run it. */
    const pt_fn_column *rare = pt_fn_store_function(st, s[3]->fn_slot, FUNCTIONS - 1);
    pt_function_summary cell;
    assert_non_null(pt_fn_store_get(rare, s[703]->fn_slot, &cell, NULL));
    assert_null(pt_fn_store_get(rare, s[4]->fn_slot, &cell, NULL));
    assert_null(pt_fn_store_get(rare, s[WORKERS - 1]->fn_slot, &cell, NULL));
    /* A copy into another store reads the same. */
    pt_fn_store *other = pt_fn_store_new();
    uint32_t slot = pt_fn_store_add(other, s[1500]);
    int64_t want_steps[PT_SUMMARY_MAX_STEP_VALUES], steps[PT_SUMMARY_MAX_STEP_VALUES];
    pt_function_summary want;
    record_of(1500, 0, &want, want_steps);
    assert_same(&want, pt_fn_store_get(pt_fn_store_function(other, slot, 0), slot, &cell, steps));
    pt_fn_store_release_slot(other, slot);
    pt_fn_store_free(other);
    for (size_t w = 0; w < WORKERS; w++)
        pt_summary_free(s[w]); /* the last one empties the store */
    free(s);
    pt_fn_store_free(st);
}

static void test_group_by_key_is_stable(void **state)
{
    (void)state;
    const uint32_t keys[] = {2, 0, 2, 1, 0, 2, 3 - 3};
    const int64_t items[] = {10, 11, 12, 13, 14, 15, 16};
    int64_t out[7];
    size_t *first = pt_group_by_key(keys, 7, 4, items, sizeof *items, out);
    const int64_t want[] = {11, 14, 16, 13, 10, 12, 15};
    assert_memory_equal(out, want, sizeof want);
    const size_t want_first[] = {0, 3, 4, 7, 7};
    assert_memory_equal(first, want_first, sizeof want_first);
    free(first);
    size_t index[7];
    first = pt_group_by_key(keys, 7, 4, NULL, 0, index);
    const size_t want_index[] = {1, 4, 6, 3, 0, 2, 5};
    assert_memory_equal(index, want_index, sizeof want_index);
    free(first);
    first = pt_group_by_key(NULL, 0, 0, NULL, 0, NULL);
    assert_int_equal(first[0], 0);
    free(first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_records_read_back_exactly),
                                       cmocka_unit_test(test_group_by_key_is_stable)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
