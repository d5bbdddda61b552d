/* Interval unions, coverage queries and the radix sort, checked against brute force: a
 * timeline is sorted, disjoint and covers exactly its intervals; the sort's output is a
 * permutation of its input, in key order, stable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "summarize/timeline.h"

static int64_t brute_covered(const pt_interval *iv, size_t n, int64_t a, int64_t b)
{
    int64_t total = 0;
    for (int64_t t = a; t < b; t++)
        for (size_t i = 0; i < n; i++)
            if (t >= iv[i].start && t < iv[i].end) {
                total++;
                break;
            }
    return total;
}

/* spans sorted, disjoint and not touching; prefix sums consistent. */
static void check_well_formed(const pt_timeline *t)
{
    int64_t sum = 0;
    for (size_t i = 0; i < t->count; i++) {
        assert_true(t->spans[i].start < t->spans[i].end);
        if (i)
            assert_true(t->spans[i - 1].end < t->spans[i].start);
        assert_true(t->prefix[i] == sum);
        sum += t->spans[i].end - t->spans[i].start;
    }
    assert_true(pt_timeline_total(t) == sum);
}

static void test_covered_matches_brute_force(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 50; round++) {
        pt_interval iv[40];
        size_t n = (size_t)(rand() % 40);
        for (size_t i = 0; i < n; i++) {
            iv[i].start = rand() % 500;
            iv[i].end = iv[i].start + rand() % 60;
        }
        pt_timeline t;
        pt_timeline_build(&t, iv, n);
        check_well_formed(&t);
        for (int q = 0; q < 50; q++) {
            int64_t a = rand() % 600 - 50, b = a + rand() % 200;
            assert_int_equal(pt_timeline_covered(&t, a, b), brute_covered(iv, n, a, b));
        }
        assert_int_equal(pt_timeline_total(&t), brute_covered(iv, n, -100, 1000));
        pt_timeline_free(&t);
    }
}

static void test_union(void **state)
{
    (void)state;
    pt_interval a[] = {{0, 10}, {20, 30}}, b[] = {{5, 25}, {40, 50}};
    pt_timeline ta, tb, tu;
    pt_timeline_build(&ta, a, 2);
    pt_timeline_build(&tb, b, 2);
    pt_timeline_union(&tu, &ta, &tb);
    check_well_formed(&tu);
    assert_int_equal(tu.count, 2);
    assert_true(tu.spans[0].start == 0 && tu.spans[0].end == 30);
    assert_true(tu.spans[1].start == 40 && tu.spans[1].end == 50);
    assert_int_equal(pt_timeline_total(&tu), 40);
    assert_int_equal(pt_timeline_covered(&tu, 28, 45), 7);
    pt_timeline_free(&ta);
    pt_timeline_free(&tb);
    pt_timeline_free(&tu);
}

/* a \ b against brute force: covered by a and not by b, at every point. */
static void test_subtract_matches_brute_force(void **state)
{
    (void)state;
    srand(5);
    for (int round = 0; round < 50; round++) {
        pt_interval ia[30], ib[30];
        size_t na = (size_t)(rand() % 30), nb = (size_t)(rand() % 30);
        for (size_t i = 0; i < na; i++)
            ia[i].start = rand() % 500, ia[i].end = ia[i].start + rand() % 60;
        for (size_t i = 0; i < nb; i++)
            ib[i].start = rand() % 500, ib[i].end = ib[i].start + rand() % 40;
        pt_timeline ta, tb, td;
        pt_timeline_build(&ta, ia, na);
        pt_timeline_build(&tb, ib, nb);
        pt_timeline_subtract(&td, &ta, &tb);
        for (size_t i = 0; i < td.count; i++) /* disjoint and sorted (touching is allowed) */
            assert_true(td.spans[i].start < td.spans[i].end && (i == 0 || td.spans[i - 1].end <= td.spans[i].start));
        for (int64_t t = -5; t < 600; t++) {
            bool in_a = brute_covered(ia, na, t, t + 1) > 0, in_b = brute_covered(ib, nb, t, t + 1) > 0;
            assert_int_equal(pt_timeline_covered(&td, t, t + 1), in_a && !in_b);
        }
        pt_timeline_free(&ta);
        pt_timeline_free(&tb);
        pt_timeline_free(&td);
    }
}

/* order[] holds each of 0..n-1 exactly once. */
static void check_permutation(const uint32_t *order, size_t n)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(order[i] < n);
        assert_false(seen[order[i]]);
        seen[order[i]] = 1;
    }
    free(seen);
}

static void check_stable_order(const uint64_t *keys, const uint32_t *order, size_t n)
{
    check_permutation(order, n);
    for (size_t i = 1; i < n; i++) {
        assert_true(keys[order[i - 1]] <= keys[order[i]]);
        if (keys[order[i - 1]] == keys[order[i]])
            assert_true(order[i - 1] < order[i]);
    }
}

static void test_radix_order_is_stable_sort(void **state)
{
    (void)state;
    enum { N = 5000 };
    uint64_t *keys = malloc(N * sizeof *keys);
    uint32_t *order = malloc(N * sizeof *order);
    srand(11);
    for (size_t i = 0; i < N; i++)
        keys[i] = (uint64_t)(rand() % 100) << (i % 2 ? 40 : 0);
    pt_radix_order(keys, N, order);
    check_stable_order(keys, order, N);
    /* Keys using all 64 bits, including the top one. */
    for (size_t i = 0; i < N; i++)
        keys[i] = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 2) ^ (uint64_t)(i % 3) ^ (i % 5 ? 0 : UINT64_MAX);
    pt_radix_order(keys, N, order);
    check_stable_order(keys, order, N);
    /* The edges: nothing, one key, all keys equal. */
    pt_radix_order(keys, 0, order);
    pt_radix_order(keys, 1, order);
    assert_int_equal(order[0], 0);
    for (size_t i = 0; i < N; i++)
        keys[i] = 42;
    pt_radix_order(keys, N, order);
    check_stable_order(keys, order, N);
    free(keys);
    free(order);
    /* Enough keys for the 16-bit digits (fewer use 8-bit ones): the same stable order. */
    enum { BIG = 70000 };
    keys = malloc(BIG * sizeof *keys);
    order = malloc(BIG * sizeof *order);
    for (size_t i = 0; i < BIG; i++)
        keys[i] = ((uint64_t)rand() << 33) ^ (uint64_t)(rand() % 1000) ^ (i % 7 ? 0 : UINT64_MAX);
    pt_radix_order(keys, BIG, order);
    check_stable_order(keys, order, BIG);
    free(keys);
    free(order);
}

/* Sorting by two keys, least significant first, gives lexicographic order, and stays a
 * permutation. */
static void test_radix_reorder_sorts_by_two_keys(void **state)
{
    (void)state;
    enum { N = 3000 };
    uint64_t *major = malloc(N * sizeof *major), *minor = malloc(N * sizeof *minor);
    uint32_t *order = malloc(N * sizeof *order);
    srand(13);
    for (size_t i = 0; i < N; i++)
        major[i] = (uint64_t)(rand() % 17), minor[i] = (uint64_t)rand() << (i % 3 ? 20 : 0);
    pt_radix_order(minor, N, order);
    pt_radix_reorder(major, N, order);
    check_permutation(order, N);
    for (size_t i = 1; i < N; i++) {
        uint32_t a = order[i - 1], b = order[i];
        assert_true(major[a] < major[b] || (major[a] == major[b] && minor[a] <= minor[b]));
        if (major[a] == major[b] && minor[a] == minor[b])
            assert_true(a < b);
    }
    free(major);
    free(minor);
    free(order);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_covered_matches_brute_force),
                                       cmocka_unit_test(test_union),
                                       cmocka_unit_test(test_subtract_matches_brute_force),
                                       cmocka_unit_test(test_radix_order_is_stable_sort),
                                       cmocka_unit_test(test_radix_reorder_sorts_by_two_keys)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
