/* The sampler's host CPU utilization from /proc/stat text a test writes (the thread reads
 * the real file, whose counters no test controls): every one of the eight tick fields
 * counts in the total, idle and iowait are not busy, and the first reading or one whose
 * counters did not advance gives no sample. The expected values are worked out by hand
 * below, not by the code under test. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>

#include "collect/sampler.h"

/* user nice system idle iowait irq softirq steal guest guest_nice; cpu0 must not be read. */
static const char FIRST[] = "cpu  1000 200 300 4000 500 60 70 80 9 9\ncpu0 1 1 1 1 1 1 1 1 0 0\nintr 5\n";
/* +10 +5 +15 +40 +10 +5 +5 +10: 100 ticks, 50 of them busy (idle 40 and iowait 10 are not). */
static const char SECOND[] = "cpu  1010 205 315 4040 510 65 75 90 9 9\ncpu0 2 2 2 2 2 2 2 2 0 0\nintr 6\n";
/* +0 user, +100 idle: 0% busy. */
static const char THIRD[] = "cpu  1010 205 315 4140 510 65 75 90 9 9\n";

static void busy_share_of_every_field(void **state)
{
    (void)state;
    pt_cpu_jiffies prev = {0, 0};
    assert_true(pt_host_cpu_percent(FIRST, &prev) < 0); /* nothing to compare with yet */
    /* 6210 ticks in all, 4500 idle + iowait. */
    assert_int_equal(prev.total, 6210);
    assert_int_equal(prev.busy, 1710);
    assert_float_equal(pt_host_cpu_percent(SECOND, &prev), 50.0, 1e-9);
    assert_int_equal(prev.total, 6310);
    assert_int_equal(prev.busy, 1760);
    assert_float_equal(pt_host_cpu_percent(THIRD, &prev), 0.0, 1e-9);
}

static void counters_that_do_not_advance_give_no_sample(void **state)
{
    (void)state;
    pt_cpu_jiffies prev = {0, 0};
    pt_host_cpu_percent(SECOND, &prev);
    assert_true(pt_host_cpu_percent(SECOND, &prev) < 0); /* 0 of 0 ticks: no 0/0 */
    assert_true(pt_host_cpu_percent(FIRST, &prev) < 0);  /* counters going back (a reset) */
    /* The going-back reading is the new reference: from FIRST to SECOND is 50% again. */
    assert_float_equal(pt_host_cpu_percent(SECOND, &prev), 50.0, 1e-9);
}

static void text_without_a_cpu_line(void **state)
{
    (void)state;
    pt_cpu_jiffies prev = {1710, 6210};
    assert_true(pt_host_cpu_percent("intr 5\n", &prev) < 0);
    assert_int_equal(prev.total, 0); /* and the next reading starts afresh */
    assert_true(pt_host_cpu_percent(SECOND, &prev) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(busy_share_of_every_field),
        cmocka_unit_test(counters_that_do_not_advance_give_no_sample),
        cmocka_unit_test(text_without_a_cpu_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
