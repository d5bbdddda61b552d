/* Interval unions, coverage queries and the radix sort, checked against brute force. */
#include <setjmp.h>
#include <stdarg.h>
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
    assert_int_equal(tu.count, 2);
    assert_int_equal(pt_timeline_total(&tu), 40);
    assert_int_equal(pt_timeline_covered(&tu, 28, 45), 7);
    pt_timeline_free(&ta);
    pt_timeline_free(&tb);
    pt_timeline_free(&tu);
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
    for (size_t i = 1; i < N; i++) {
        assert_true(keys[order[i - 1]] <= keys[order[i]]);
        if (keys[order[i - 1]] == keys[order[i]])
            assert_true(order[i - 1] < order[i]);
    }
    free(keys);
    free(order);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_covered_matches_brute_force),
                                       cmocka_unit_test(test_union), cmocka_unit_test(test_radix_order_is_stable_sort)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
