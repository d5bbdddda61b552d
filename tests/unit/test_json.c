/* JSON tree, writer (HTML-safe escaping, shortest doubles) and parser limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

static char *write_compact(const pt_json *v)
{
    pt_buf b = PT_BUF_INIT;
    pt_json_write(&b, v, -1);
    return pt_buf_take(&b);
}

static void test_escapes_html_and_control(void **state)
{
    (void)state;
    pt_json *s = pt_json_string("<img src=x onerror=alert(1)>&\"\\\n\x01");
    char *out = write_compact(s);
    assert_string_equal(out, "\"\\u003cimg src=x onerror=alert(1)\\u003e\\u0026\\\"\\\\\\n\\u0001\"");
    free(out);
    pt_json_free(s);
}

static void test_invalid_utf8_becomes_replacement(void **state)
{
    (void)state;
    pt_json *s = pt_json_string_n("a\xff" "b\xc3\xa9", 5);
    char *out = write_compact(s);
    assert_string_equal(out, "\"a\\ufffdb\xc3\xa9\"");
    free(out);
    pt_json_free(s);
}

static void test_doubles_round_trip(void **state)
{
    (void)state;
    const double values[] = {0.1, 1.0 / 3.0, 123456.789, 1e-300, 0.27586059769318555, -2.5};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        pt_buf b = PT_BUF_INIT;
        pt_json_write_double(&b, values[i]);
        assert_true(strtod(b.data, NULL) == values[i]);
        pt_buf_free(&b);
    }
    pt_buf b = PT_BUF_INIT;
    pt_json_write_double(&b, NAN);
    assert_string_equal(b.data, "null");
    pt_buf_free(&b);
}

static void test_parse_and_write_round_trip(void **state)
{
    (void)state;
    const char *text = "{\"a\":[1,2.5,-3e2,true,false,null],\"b\":{\"c\":\"\\u00e9\\ud83d\\ude00\"},"
                       "\"big\":1711964646000000000}";
    pt_error err = {{0}};
    pt_json *v = pt_json_parse(text, strlen(text), 16, &err);
    assert_non_null(v);
    assert_int_equal(pt_json_get(v, "a")->count, 6);
    assert_true(pt_json_get(v, "a")->items[2]->number == -300);
    assert_string_equal(pt_json_get_string(pt_json_get(v, "b"), "c", ""), "\xc3\xa9\xf0\x9f\x98\x80");
    const pt_json *big = pt_json_get(v, "big");
    assert_true(big->is_integer);
    assert_true(big->integer == 1711964646000000000LL);
    char *out = write_compact(v);
    pt_json *again = pt_json_parse(out, strlen(out), 16, &err);
    char *out2 = write_compact(again);
    assert_string_equal(out, out2);
    free(out);
    free(out2);
    pt_json_free(v);
    pt_json_free(again);
}

/* \u escapes at the edges of the surrogate ranges: the first and last pairs are the
 * first and last supplementary code points; a lone or reversed surrogate is U+FFFD. */
static void test_surrogate_pairs_at_their_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *json, *utf8;
    } cases[] = {
        {"\"\\ud800\\udc00\"", "\xf0\x90\x80\x80"},     /* U+10000 */
        {"\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf"},     /* U+10FFFF */
        {"\"\\ud800\\udbff\"", "\xef\xbf\xbd\xef\xbf\xbd"}, /* high, then a high: two U+FFFD */
        {"\"\\udc00\"", "\xef\xbf\xbd"},                     /* a lone low surrogate */
        {"\"\\ud7ff\\ue000\"", "\xed\x9f\xbf\xee\x80\x80"}, /* just outside: two BMP characters */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pt_error err = {{0}};
        pt_json *v = pt_json_parse(cases[i].json, strlen(cases[i].json), 4, &err);
        assert_non_null(v);
        assert_string_equal(v->string, cases[i].utf8);
        pt_json_free(v);
    }
}

static void test_parse_errors(void **state)
{
    (void)state;
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "[1] x", "{\"a\":tru}", "\"\\q\"", "01x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pt_error err = {{0}};
        assert_null(pt_json_parse(bad[i], strlen(bad[i]), 16, &err));
        assert_true(err.message[0] != '\0');
    }
}

static void test_depth_limit(void **state)
{
    (void)state;
    char deep[2001];
    memset(deep, '[', 1000);
    memset(deep + 1000, ']', 1000);
    deep[2000] = 0;
    pt_error err = {{0}};
    assert_null(pt_json_parse(deep, 2000, 64, &err));
    assert_non_null(strstr(err.message, "deep"));
}

static void test_set_replaces_and_add_appends(void **state)
{
    (void)state;
    pt_json *o = pt_json_object();
    pt_json_set(o, "k", pt_json_int(1));
    pt_json_set(o, "k", pt_json_int(2));
    assert_int_equal(o->count, 1);
    assert_int_equal(pt_json_get(o, "k")->integer, 2);
    pt_json_add(o, "k2", pt_json_number_rounded(0.123456789, 3));
    char *out = write_compact(o);
    assert_string_equal(out, "{\"k\":2,\"k2\":0.123}");
    free(out);
    pt_json_free(o);
}

/* The pretty form, byte for byte: each level indented by one more step, arrays of
 * scalars on one line, empty containers closed at once, the closer back at its level. */
static void test_indented_layout(void **state)
{
    (void)state;
    pt_json *root = pt_json_object();
    pt_json *inner = pt_json_add(root, "a", pt_json_object());
    pt_json_add(inner, "b", pt_json_int(1));
    pt_json *list = pt_json_add(inner, "c", pt_json_array());
    pt_json_push(list, pt_json_int(2));
    pt_json_push(list, pt_json_int(3));
    pt_json *rows = pt_json_add(root, "d", pt_json_array());
    pt_json_push(rows, pt_json_object());
    pt_json_add(root, "e", pt_json_array());
    pt_buf b = PT_BUF_INIT;
    pt_json_write(&b, root, 2);
    char *out = pt_buf_take(&b);
    assert_string_equal(out, "{\n"
                             "  \"a\": {\n"
                             "    \"b\": 1,\n"
                             "    \"c\": [2, 3]\n"
                             "  },\n"
                             "  \"d\": [\n"
                             "    {}\n"
                             "  ],\n"
                             "  \"e\": []\n"
                             "}");
    free(out);
    pt_json_free(root);
}

/* The fast "%.*g" (json.c, format_g_fast) writes exactly what snprintf writes wherever it
 * answers, and answers for most numbers a report holds: random values over 20 decades and
 * every digit count, the values whose decimal form ends in 5 (ties that binary decides),
 * the edges of each decade, negatives, and a carry into the next decade. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
    return *state;
}

static void check_fast_g(double v, int digits, int *answered)
{
    char fast[64], slow[160];
    if (!pt_json_format_g_fast(fast, sizeof fast, v, digits))
        return;
    ++*answered;
    snprintf(slow, sizeof slow, "%.*g", digits, v);
    if (strcmp(fast, slow) != 0)
        fail_msg("%.17g with %d digits: fast \"%s\", snprintf \"%s\"", v, digits, fast, slow);
}

static void test_fast_g_matches_snprintf(void **state)
{
    (void)state;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    int answered = 0, tried = 0;
    for (int i = 0; i < 2000000; i++, tried++) {
        double unit = (double)(next_random(&seed) >> 11) / 9007199254740992.0; /* [0, 1) */
        double v = pow(10.0, -6 + 20 * unit) * ((next_random(&seed) & 1) ? -1 : 1);
        check_fast_g(v, 1 + (int)(next_random(&seed) % 15), &answered);
    }
    assert_true(answered > tried / 2); /* most of the range is plain notation */
    int six = 0;
    for (int i = 0; i < 200000; i++) { /* what reports hold: ms and ratios at 6 digits */
        double v = (double)(next_random(&seed) % 100000000) / 1000.0;
        check_fast_g(v, 6, &six);
        check_fast_g(v / 997.0, 6, &six);
    }
    assert_true(six > 380000);
    const double edges[] = {0.15, 0.25, 2.5, 0.125, 1.5, 0.35, 1e-4, 9.99995e-5, 1e5, 99999.95, 999999.5, 999999.4,
                            9.9999995, 123456.5, 0.000123456, 1.0, 10.0, 100.0, 0.1, 0.3, 812.5, 33.333333333};
    int any = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int d = 1; d <= 15; d++) {
            check_fast_g(edges[i], d, &any);
            check_fast_g(-edges[i], d, &any);
            check_fast_g(nextafter(edges[i], 0), d, &any);
            check_fast_g(nextafter(edges[i], 1e300), d, &any);
        }
    assert_true(any > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes_html_and_control), cmocka_unit_test(test_invalid_utf8_becomes_replacement),
        cmocka_unit_test(test_doubles_round_trip),       cmocka_unit_test(test_parse_and_write_round_trip),
        cmocka_unit_test(test_fast_g_matches_snprintf),
        cmocka_unit_test(test_indented_layout),
        cmocka_unit_test(test_parse_errors),             cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_surrogate_pairs_at_their_bounds),
        cmocka_unit_test(test_set_replaces_and_add_appends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
