/* The function store (summarize/function_store.h) gives back exactly the records it was
 * given: values that need 8 bytes beside ones that fit in 4, in the same block; doubles
 * bit for bit (-0.0 stays -0.0); per-step values of different counts; absent records;
 * blocks past the first; a worker's functions in its order; two threads adopting at once
 * (the decoder's threads). The counting sort (util/group.h) is stable; the parallel loop
 * (util/parallel.h) runs every index once at any thread count. What adopting a summary
 * may allocate is worked out first, refused one byte below and measured on the heap;
 * a name one worker runs costs its cell, not a block. And the reduce on
 * two threads (the bounded report's parts, pt_job_input.threads) writes the report and
 * parts it writes on one. Under TSan too (label tsan). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/diagnose.h"
#include "summarize/function_store.h"
#include "util/group.h"
#include "util/parallel.h"

#include <pthread.h>
#include <stdatomic.h>

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
    f->bytes_avg = i == 1 ? 1e6 + (double)w : 0;
    f->bytes_max = i == 1 ? 4e6 : 0;
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
    assert_memory_equal(&got->bytes_avg, &want->bytes_avg, sizeof(double));
    assert_memory_equal(&got->bytes_max, &want->bytes_max, sizeof(double));
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

/* Expected ranks keep their own slots whatever order they come in (the analysis then
 * reads a column in order); a rank twice, one outside the world, or none take slots past
 * them, and every record still reads back as it was. */
static void test_expected_ranks_take_their_own_slots(void **state)
{
    (void)state;
    enum { WORLD = 2500, EXTRA = 3 };
    pt_fn_store *st = pt_fn_store_new();
    pt_fn_store_expect_ranks(st, WORLD);
    pt_worker_summary *s[WORLD + EXTRA];
    for (size_t k = 0; k < WORLD; k++) {
        size_t w = (k * 7919) % WORLD; /* every rank once, scattered */
        s[w] = worker(w);
        s[w]->rank = (int32_t)w;
        pt_fn_store_adopt(st, s[w]);
        assert_int_equal(s[w]->fn_slot, w);
    }
    int32_t odd_ranks[EXTRA] = {17, WORLD, -1}; /* taken already, past the world, none */
    for (size_t e = 0; e < EXTRA; e++) {
        s[WORLD + e] = worker(WORLD + e);
        s[WORLD + e]->rank = odd_ranks[e];
        pt_fn_store_adopt(st, s[WORLD + e]);
        assert_int_equal(s[WORLD + e]->fn_slot, WORLD + e);
    }
    pt_fn_store_expect_ranks(st, 10); /* too late: the store has slots */
    pt_worker_summary *late = worker(5);
    late->rank = 5;
    pt_fn_store_adopt(st, late);
    assert_int_equal(late->fn_slot, WORLD + EXTRA);
    for (size_t w = 0; w < WORLD + EXTRA; w++) {
        int64_t want_steps[PT_SUMMARY_MAX_STEP_VALUES], steps[PT_SUMMARY_MAX_STEP_VALUES];
        pt_function_summary want, cell;
        size_t first = w % 2 ? 1 : 0; /* worker() lists the first two swapped on odd ones */
        assert_true(record_of(w, first, &want, want_steps));
        assert_same(&want, pt_summary_function(s[w], 0, &cell, steps));
    }
    pt_summary_free(late);
    for (size_t w = 0; w < WORLD + EXTRA; w++)
        pt_summary_free(s[w]);
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

typedef struct adopter {
    pt_fn_store *st;
    pt_worker_summary **s;
    size_t first, count;
} adopter;

static void *adopt_some(void *arg)
{
    adopter *ad = arg;
    for (size_t w = ad->first; w < ad->first + ad->count; w++)
        pt_fn_store_adopt(ad->st, ad->s[w]);
    return NULL;
}

static void test_two_threads_adopt_at_once(void **state)
{
    (void)state;
    pt_fn_store *st = pt_fn_store_new();
    pt_worker_summary **s = calloc(WORKERS, sizeof *s);
    for (size_t w = 0; w < WORKERS; w++)
        s[w] = worker(w);
    adopter halves[2] = {{st, s, 0, WORKERS / 2}, {st, s, WORKERS / 2, WORKERS - WORKERS / 2}};
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, adopt_some, &halves[1]), 0);
    adopt_some(&halves[0]);
    pthread_join(other, NULL);
    for (size_t w = 0; w < WORKERS; w++) {
        pt_function_summary want, cell;
        int64_t want_steps[PT_SUMMARY_MAX_STEP_VALUES], steps[PT_SUMMARY_MAX_STEP_VALUES];
        record_of(w, 4, &want, want_steps);
        const pt_function_summary *got = NULL;
        for (size_t i = 0; i < s[w]->function_count && !got; i++) {
            const pt_function_summary *f = pt_summary_function(s[w], i, &cell, steps);
            got = strcmp(f->name, names[4]) == 0 ? f : NULL;
        }
        assert_same(&want, got);
    }
    for (size_t w = 0; w < WORKERS; w++)
        pt_summary_free(s[w]);
    free(s);
    pt_fn_store_free(st);
}

/* ------------------------------------------------------------ what the store costs */

/* The heap in use, as the allocator counts it (its own count under a sanitizer), and
 * what one allocation holds of it: an independent measure of what the store allocates. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
size_t __sanitizer_get_current_allocated_bytes(void); /* sanitizer/allocator_interface.h, not */
size_t __sanitizer_get_allocated_size(const volatile void *p); /* installed with every compiler */
static size_t heap_in_use(void) { return __sanitizer_get_current_allocated_bytes(); }
static size_t heap_of(const void *p) { return p ? __sanitizer_get_allocated_size(p) : 0; }
#else
#include <malloc.h>
static size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}
static size_t heap_of(const void *p) { return p ? malloc_usable_size((void *)p) + sizeof(size_t) : 0; }
#endif

/* A worker of rank `rank` running functions "<prefix>0" .. "<prefix>n-1" (names in
 * fn_names[], which outlive the store); each with `steps` per-step values and a total of
 * `total` (wide where it does not fit 4 bytes). */
static pt_worker_summary *named_worker(int32_t rank, const char *prefix, size_t n, size_t steps, int64_t total,
                                       char **fn_names)
{
    pt_worker_summary *s = pt_summary_new();
    s->shared_function_names = true; /* fn_names[] owns them */
    s->rank = rank;
    s->step_count = steps;
    s->steps = calloc(steps ? steps : 1, sizeof *s->steps);
    s->functions = calloc(n ? n : 1, sizeof *s->functions);
    for (size_t i = 0; i < n; i++) {
        pt_function_summary *f = &s->functions[s->function_count++];
        char name[64];
        snprintf(name, sizeof name, "%s%zu", prefix, i);
        f->name = fn_names[i] = fn_names[i] ? fn_names[i] : strdup(name);
        f->cls = PT_CLASS_COMPUTE;
        f->count = 3;
        f->total_ns = total;
        f->exposed_ns = total / 2;
        f->median_ns = 7;
        f->throughput_avg_pct = i % 2 ? 55.5 : 0;
        f->step_count = steps;
        f->step_exposed_ns = steps ? malloc(steps * sizeof *f->step_exposed_ns) : NULL;
        for (size_t k = 0; k < steps; k++)
            f->step_exposed_ns[k] = (int64_t)(k + 1) * (total / 4);
    }
    return s;
}

/* What adopting s frees: its records and their per-step values. */
static size_t records_heap(const pt_worker_summary *s)
{
    size_t bytes = heap_of(s->functions);
    for (size_t i = 0; i < s->function_count; i++)
        bytes += heap_of(s->functions[i].step_exposed_ns);
    return bytes;
}

/* Adopting s refuses one byte below its bound and leaves everything as it was; at its
 * bound it adopts s, and what the store then holds more is within the bound, and about
 * what the store counts it holds (pt_fn_store_bytes: malloc's own bytes as estimated). */
static size_t adopt_at_bound(pt_fn_store *st, pt_worker_summary *s)
{
    size_t bound, again, before = heap_in_use(), counted = pt_fn_store_bytes(st);
    assert_false(pt_fn_store_adopt_within(st, s, 0, &bound)); /* the bound, nothing else */
    assert_true(bound > 0);
    assert_int_equal(heap_in_use(), before);
    assert_false(pt_fn_store_adopt_within(st, s, bound - 1, &again));
    assert_int_equal(again, bound);
    assert_int_equal(heap_in_use(), before);
    assert_non_null(s->functions);
    assert_null(s->fn_store);
    size_t freed = records_heap(s);
    assert_true(pt_fn_store_adopt_within(st, s, bound, &again));
    assert_int_equal(again, bound);
    assert_ptr_equal(s->fn_store, st);
    size_t after = heap_in_use() + freed; /* TSan's count of freed records may run a little behind */
    size_t grew = after > before ? after - before : 0;
    assert_true(grew <= bound);
    counted = pt_fn_store_bytes(st) - counted;
    assert_true(counted >= grew / 2 && counted <= 2 * grew + 4096);
    return grew;
}

static void assert_reads_back(const pt_worker_summary *s, const char *const *fn_names, size_t n, size_t steps,
                              int64_t total)
{
    for (size_t i = 0; i < n; i++) {
        pt_function_summary cell;
        int64_t values[PT_SUMMARY_MAX_STEP_VALUES];
        const pt_function_summary *f = pt_summary_function(s, i, &cell, values);
        assert_string_equal(f->name, fn_names[i]);
        assert_true(f->total_ns == total && f->exposed_ns == total / 2 && f->count == 3 && f->median_ns == 7);
        assert_int_equal(f->step_count, steps);
        for (size_t k = 0; k < steps; k++)
            assert_true(f->step_exposed_ns[k] == (int64_t)(k + 1) * (total / 4));
        assert_true(f->throughput_avg_pct == (i % 2 ? 55.5 : 0));
    }
}

/* The store's count at its bound, wherever a summary lands: new columns in an empty
 * store; a block grown to take the next rank; a block grown to all its BLOCK slots with a
 * value that needs 8 bytes where 4 did; a new block of existing columns far away (the
 * directory grows); more per-step values than a block had room for; an existing block
 * as it is (nothing to add but the slot's cells). */
static void test_adoption_is_refused_below_its_bound(void **state)
{
    (void)state;
    enum { N = 40 };
    char *fn_names[N + 10] = {0};
    pt_fn_store *st = pt_fn_store_new();
    pt_fn_store_expect_ranks(st, 6000);
    struct { int32_t rank; size_t n, steps; int64_t total; } cases[] = {
        {0, N, 3, 1000},                        /* an empty store */
        {1, N + 5, 3, 1000},                    /* the block grows; five new names */
        {700, N, 3, (INT64_C(1) << 40) + 4},    /* grows to all of it; totals wide */
        {5000, N + 10, 3, 1000},                /* a block far away */
        {3, N, 9, 1000},                        /* more per-step values: the block widens them */
        {4, N, 3, 1000},                        /* a block that holds all it needs */
    };
    pt_worker_summary *s[PT_ARRAY_LEN(cases)];
    for (size_t c = 0; c < PT_ARRAY_LEN(cases); c++) {
        s[c] = named_worker(cases[c].rank, "kernel_", cases[c].n, cases[c].steps, cases[c].total, fn_names);
        adopt_at_bound(st, s[c]);
    }
    for (size_t c = 0; c < PT_ARRAY_LEN(cases); c++)
        assert_reads_back(s[c], (const char *const *)fn_names, cases[c].n, cases[c].steps, cases[c].total);
    for (size_t c = 0; c < PT_ARRAY_LEN(cases); c++)
        pt_summary_free(s[c]);
    pt_fn_store_free(st);
    for (size_t i = 0; i < N + 10; i++)
        free(fn_names[i]);
}

/* A function one worker names costs that worker's cell, not a block for 1024 workers
 * (30 KB a name, when a summary of 2.8 MB may name a million): 1000 names of the last
 * rank of 100 000 cost less than 1 KB each, bound and heap alike; the same names in a
 * second worker at the other end of its block cost what a block of them holds. */
#define FIRST_OF_ITS_BLOCK(slot) ((slot) & ~1023)
static void test_a_name_costs_what_its_workers_hold(void **state)
{
    (void)state;
    enum { NAMES = 1000, WORLD = 100000 };
    char *fn_names[NAMES] = {0};
    pt_fn_store *st = pt_fn_store_new();
    pt_fn_store_expect_ranks(st, WORLD);
    pt_worker_summary *last = named_worker(WORLD - 1, "only_here_", NAMES, 0, 1000, fn_names);
    size_t grew = adopt_at_bound(st, last);
    size_t bound;
    assert_true(grew < NAMES * (size_t)1024);
    pt_worker_summary *other = named_worker(FIRST_OF_ITS_BLOCK(WORLD - 1), "only_here_", NAMES, 0, 1000, fn_names);
    assert_false(pt_fn_store_adopt_within(st, other, 0, &bound));
    assert_true(bound > NAMES * (size_t)1024 * 4); /* each block of 1023 slots' cells, and more */
    adopt_at_bound(st, other);
    assert_reads_back(last, (const char *const *)fn_names, NAMES, 0, 1000);
    assert_reads_back(other, (const char *const *)fn_names, NAMES, 0, 1000);
    pt_summary_free(last);
    pt_summary_free(other);
    pt_fn_store_free(st);
    for (size_t i = 0; i < NAMES; i++)
        free(fn_names[i]);
}

/* ------------------------------------------------------------ the reduce on threads */

#define JOB_WORKERS 2100 /* three parts of the bounded form */
#define MS INT64_C(1000000)

static void add_function(pt_worker_summary *s, pt_class cls, const char *name, int64_t ms)
{
    s->functions = realloc(s->functions, (s->function_count + 1) * sizeof *s->functions);
    pt_function_summary *f = &s->functions[s->function_count++];
    memset(f, 0, sizeof *f);
    f->cls = cls;
    f->name = strdup(name);
    f->count = 2;
    f->exposed_ns = f->total_ns = ms * MS;
    f->median_ns = ms * MS / 2;
    s->exposed_ns[cls] += f->exposed_ns;
    s->union_ns[cls] += f->total_ns;
}

/* A worker of a synchronous job, two steps of 100 ms; rank 1777's data loader is slow. */
static pt_worker_summary *job_worker(int rank)
{
    pt_worker_summary *s = pt_summary_new();
    char name[64];
    snprintf(name, sizeof name, "node%d_%d_%d.json", rank / 8, rank % 8, 1000 + rank);
    s->name = strdup(name);
    s->host = malloc(32);
    snprintf(s->host, 32, "node%d", rank / 8);
    s->rank = s->local_rank = rank;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->world_size = JOB_WORKERS;
    s->window_ns = 200 * MS;
    int64_t slow = rank == 1777 ? 40 : 0;
    add_function(s, PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 100 + rank % 3);
    add_function(s, PT_CLASS_PYTHON, "train.py: <module>|torch/utils/data/dataloader.py: __next__", 6 + slow);
    add_function(s, PT_CLASS_COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 60 - slow - rank % 3);
    int64_t used = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        used += s->exposed_ns[c];
    s->idle_ns = s->window_ns - used;
    s->step_count = 2;
    s->steps = calloc(2, sizeof *s->steps);
    for (int i = 0; i < 2; i++) {
        s->steps[i].step = 10 + i, s->steps[i].dur_ns = 100 * MS, s->steps[i].start_ns = i * 100 * MS;
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            s->steps[i].exposed_ns[c] = s->exposed_ns[c] / 2;
        s->steps[i].idle_ns = s->idle_ns / 2;
    }
    return s;
}

typedef struct written_parts {
    pthread_mutex_t lock;
    char *text[8]; /* by part number */
    size_t calls;
} written_parts;

static int keep_part(void *ctx, const char *stem, const pt_json *part, pt_error *err)
{
    (void)err;
    written_parts *out = ctx;
    unsigned number = 0;
    assert_int_equal(sscanf(stem, "workers-%u", &number), 1);
    pt_buf b = PT_BUF_INIT;
    pt_json_write(&b, part, -1);
    pthread_mutex_lock(&out->lock);
    assert_true(number < 8 && !out->text[number]);
    out->text[number] = pt_buf_take(&b);
    out->calls++;
    pthread_mutex_unlock(&out->lock);
    return 0;
}

static char *report_on(pt_worker_summary **w, int threads, written_parts *parts)
{
    pt_job_input job = {w, JOB_WORKERS, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    job.write_part = keep_part;
    job.part_ctx = parts;
    job.threads = threads;
    pt_json *report = pt_diagnose(&job);
    pt_buf b = PT_BUF_INIT;
    pt_json_write(&b, report, -1);
    pt_json_free(report);
    return pt_buf_take(&b);
}

static void test_reduce_on_two_threads_writes_the_same_report(void **state)
{
    (void)state;
    setenv("PERFTRACKER_REPORT_FULL_MAX", "1000", 1);
    pt_worker_summary **w = calloc(JOB_WORKERS, sizeof *w);
    for (int r = 0; r < JOB_WORKERS; r++)
        w[r] = job_worker(r);
    written_parts one = {PTHREAD_MUTEX_INITIALIZER, {0}, 0}, two = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};
    char *serial = report_on(w, 1, &one), *threaded = report_on(w, 2, &two);
    assert_string_equal(serial, threaded);
    assert_non_null(strstr(serial, "\"bounded\""));
    assert_non_null(strstr(serial, "node222_1_2777.json")); /* the culprit, in full detail */
    assert_int_equal(one.calls, 3);
    assert_int_equal(two.calls, 3);
    for (size_t p = 0; p < 3; p++)
        assert_string_equal(one.text[p], two.text[p]);
    for (size_t p = 0; p < 8; p++)
        free(one.text[p]), free(two.text[p]);
    free(serial);
    free(threaded);
    for (int r = 0; r < JOB_WORKERS; r++)
        pt_summary_free(w[r]);
    free(w);
    unsetenv("PERFTRACKER_REPORT_FULL_MAX");
}

static void count_index(void *ctx, size_t i)
{
    atomic_fetch_add(&((atomic_int *)ctx)[i], 1);
}

static void test_parallel_for_runs_each_index_once(void **state)
{
    (void)state;
    static atomic_int seen[1000];
    const int threads[] = {0, 1, 3};
    const size_t runs[] = {1, 7, 5000};
    for (size_t t = 0; t < PT_ARRAY_LEN(threads); t++)
        for (size_t r = 0; r < PT_ARRAY_LEN(runs); r++) {
            for (size_t i = 0; i < 1000; i++)
                atomic_store(&seen[i], 0);
            pt_parallel_for(1000, threads[t], runs[r], count_index, seen);
            for (size_t i = 0; i < 1000; i++)
                assert_int_equal(atomic_load(&seen[i]), 1);
        }
    pt_parallel_for(0, 4, 1, count_index, seen); /* nothing to do */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_records_read_back_exactly),
                                       cmocka_unit_test(test_two_threads_adopt_at_once),
                                       cmocka_unit_test(test_expected_ranks_take_their_own_slots),
                                       cmocka_unit_test(test_adoption_is_refused_below_its_bound),
                                       cmocka_unit_test(test_a_name_costs_what_its_workers_hold),
                                       cmocka_unit_test(test_group_by_key_is_stable),
                                       cmocka_unit_test(test_parallel_for_runs_each_index_once),
                                       cmocka_unit_test(test_reduce_on_two_threads_writes_the_same_report)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
