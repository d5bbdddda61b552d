/* String interning: dense ids, lookup, growth past many rehashes, binary keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "util/strtab.h"

static void test_dense_ids_and_lookup(void **state)
{
    (void)state;
    pt_strtab t;
    pt_strtab_init(&t);
    char name[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(name, sizeof name, "kernel_%d", i);
        assert_int_equal(pt_strtab_intern(&t, name, strlen(name)), (uint32_t)i);
    }
    for (int i = 0; i < 100000; i += 997) {
        snprintf(name, sizeof name, "kernel_%d", i);
        assert_int_equal(pt_strtab_intern(&t, name, strlen(name)), (uint32_t)i);
        assert_int_equal(pt_strtab_find(&t, name, strlen(name)), (uint32_t)i);
        assert_string_equal(pt_strtab_get(&t, (uint32_t)i), name);
    }
    assert_int_equal(pt_strtab_find(&t, "absent", 6), UINT32_MAX);
    pt_strtab_free(&t);
}

static void test_binary_keys_with_nul(void **state)
{
    (void)state;
    pt_strtab t;
    pt_strtab_init(&t);
    const char a[4] = {1, 0, 0, 0}, b[4] = {1, 0, 0, 1};
    uint32_t ia = pt_strtab_intern(&t, a, 4), ib = pt_strtab_intern(&t, b, 4);
    assert_int_not_equal(ia, ib);
    assert_int_equal(pt_strtab_intern(&t, a, 4), ia);
    assert_int_equal(pt_strtab_len(&t, ib), 4);
    pt_strtab_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dense_ids_and_lookup),
                                       cmocka_unit_test(test_binary_keys_with_nul)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
