/* Do the workers' windows hold the same iterations (diagnose/windows.c)? Synthetic
 * summaries: the clock check at its bound (a shift of exactly one step is not flagged, one
 * nanosecond more is, both ends must be off the same way, only workers of one host are
 * compared), the host's median worker as the reference, the step-number check and its
 * tie rule, and the warnings a report carries for a pair a step apart. */
#define _POSIX_C_SOURCE 200809L
#include "diagnose/diagnose.h"
#include "diagnose/windows.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define SEC INT64_C(1000000000)
#define T0 (INT64_C(1765000000) * SEC) /* a wall-clock time: windows start here */
#define STEP (3 * SEC)

/* A worker whose window holds `steps` steps of `step_ns` from start_ns, numbered from
 * first; idle all along (the checks read only windows and steps). */
static pt_worker_summary *timed(int rank, const char *host, int64_t start_ns, int64_t step_ns, int64_t first,
                                size_t steps)
{
    pt_worker_summary *s = pt_summary_new();
    char name[64];
    snprintf(name, sizeof name, "%s_%d_%d.ptrace", host, rank, 4000 + rank);
    s->name = strdup(name);
    s->host = strdup(host);
    s->rank = rank;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->world_size = 4;
    s->window_start_ns = start_ns;
    s->window_ns = (int64_t)steps * step_ns;
    s->idle_ns = s->window_ns;
    s->step_count = steps;
    s->steps = calloc(steps, sizeof *s->steps);
    for (size_t i = 0; i < steps; i++) {
        s->steps[i].step = first + (int64_t)i;
        s->steps[i].start_ns = (int64_t)i * step_ns;
        s->steps[i].dur_ns = step_ns;
        s->steps[i].idle_ns = step_ns;
    }
    return s;
}

static void free_all(pt_worker_summary **w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pt_summary_free(w[i]);
}

static size_t clock_shifts(pt_worker_summary **w, size_t n, pt_window_shift *first)
{
    size_t count;
    pt_window_shift *shifts = pt_window_clock_shifts(w, n, &count);
    if (count && first)
        *first = shifts[0];
    free(shifts);
    return count;
}

/* Rank 1's window moved by `by` (both ends): flagged only beyond one step. */
static void test_clock_shift_at_its_bound(void **state)
{
    (void)state;
    const int64_t by[] = {STEP - 1, STEP, STEP + 1, -STEP, -STEP - 1};
    const size_t flagged[] = {0, 0, 1, 0, 1};
    for (size_t i = 0; i < sizeof by / sizeof *by; i++) {
        pt_worker_summary *w[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 + by[i], STEP, 10, 3)};
        pt_window_shift shift;
        assert_int_equal(clock_shifts(w, 2, &shift), flagged[i]);
        if (flagged[i]) {
            /* The lower median of two is the earlier window: the later one is named. */
            size_t later = by[i] > 0 ? 1 : 0;
            assert_int_equal(shift.worker, later);
            assert_int_equal(shift.reference, 1 - later);
            assert_int_equal(shift.start_ns, by[i] > 0 ? by[i] : -by[i]);
            assert_int_equal(shift.end_ns, shift.start_ns);
            assert_int_equal(shift.step_ns, STEP);
        }
        free_all(w, 2);
    }
}

/* A window that starts late but ends with the others' (cut short) is not shifted; nor
 * are windows of two hosts, whose clocks differ. */
static void test_both_ends_and_one_host(void **state)
{
    (void)state;
    pt_worker_summary *w[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 + STEP + 1, STEP, 10, 1)};
    assert_int_equal(clock_shifts(w, 2, NULL), 0);
    free_all(w, 2);
    pt_worker_summary *v[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node1", T0 + 10 * STEP, STEP, 10, 3)};
    assert_int_equal(clock_shifts(v, 2, NULL), 0);
    free_all(v, 2);
    /* The longer of the two workers' steps is the bound: 2 s is more than a step of 1.5 s,
     * not of 3 s. */
    pt_worker_summary *u[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 + 2 * SEC, STEP / 2, 10, 6)};
    assert_int_equal(clock_shifts(u, 2, NULL), 0);
    free_all(u, 2);
}

/* Ranks 0, 2, 3 together, rank 1 three steps early: rank 1 alone is named, against the
 * host's median worker; the two hosts' workers are compared only within their host. */
static void test_the_host_median_is_the_reference(void **state)
{
    (void)state;
    pt_worker_summary *w[6] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 - 3 * STEP, STEP, 10, 3),
                               timed(2, "node0", T0 + 1000, STEP, 10, 3), timed(3, "node0", T0 + 2000, STEP, 10, 3),
                               timed(4, "node1", T0 + 50 * STEP, STEP, 10, 3),
                               timed(5, "node1", T0 + 50 * STEP + 10, STEP, 10, 3)};
    pt_window_shift shift = {0};
    assert_int_equal(clock_shifts(w, 6, &shift), 1);
    assert_int_equal(shift.worker, 1);
    assert_int_equal(w[shift.reference]->rank, 0); /* by start: 1, 0 (the lower median of four), 2, 3 */
    assert_int_equal(shift.start_ns, -3 * STEP);
    free_all(w, 6);
}

static size_t step_shifts(pt_worker_summary **w, size_t n, pt_window_shift *first)
{
    size_t count;
    pt_window_shift *shifts = pt_window_step_shifts(w, n, &count);
    if (count && first)
        *first = shifts[0];
    free(shifts);
    return count;
}

/* Step numbers: the most common first step is the reference, the lowest on a tie. */
static void test_step_numbers(void **state)
{
    (void)state;
    pt_worker_summary *w[3] = {timed(0, "a", T0, STEP, 5, 3), timed(1, "b", T0, STEP, 8, 3),
                               timed(2, "c", T0, STEP, 5, 3)};
    pt_window_shift shift = {0};
    assert_int_equal(step_shifts(w, 3, &shift), 1);
    assert_int_equal(shift.worker, 1);
    assert_int_equal(shift.first_step, 8);
    assert_int_equal(shift.reference_first_step, 5);
    assert_int_equal(shift.last_step, 10);
    free_all(w, 3);
    pt_worker_summary *v[2] = {timed(0, "a", T0, STEP, 11, 3), timed(1, "a", T0, STEP, 10, 3)};
    assert_int_equal(step_shifts(v, 2, &shift), 1);
    assert_int_equal(shift.worker, 0); /* a tie: 10 is the reference */
    assert_int_equal(shift.reference_first_step, 10);
    free_all(v, 2);
    pt_worker_summary *u[2] = {timed(0, "a", T0, STEP, 10, 3), timed(1, "a", T0, STEP, 10, 2)};
    assert_int_equal(step_shifts(u, 2, NULL), 0);
    free_all(u, 2);
}

static size_t warnings_with(const pt_json *report, const char *text, const char **found)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    size_t n = 0;
    for (size_t i = 0; warnings && i < warnings->count; i++)
        if (strstr(warnings->items[i]->string, text)) {
            n++;
            *found = warnings->items[i]->string;
        }
    return n;
}

static pt_json *report_of(pt_worker_summary **w, size_t n)
{
    pt_job_input job = {w, n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&job);
    free_all(w, n);
    return report;
}

/* A pair a step apart (steps 11-13 against 10-12, one step of time later, and a nanosecond
 * more in the second report): the report says so, with the ranks and the offset. */
static void test_the_report_warns(void **state)
{
    (void)state;
    const char *text = NULL;
    pt_worker_summary *aligned[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 + 1000, STEP, 10, 3)};
    pt_json *report = report_of(aligned, 2);
    assert_int_equal(warnings_with(report, "profiled windows", &text), 0);
    pt_json_free(report);

    pt_worker_summary *a_step[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 + STEP, STEP, 11, 3)};
    report = report_of(a_step, 2);
    assert_int_equal(warnings_with(report, "do not hold the same steps", &text), 1);
    assert_non_null(strstr(text, "rank 0 among them) profiled steps 10-12, but rank 1 steps 11-13 (1 step later)"));
    assert_int_equal(warnings_with(report, "do not line up in time", &text), 0);
    pt_json_free(report);

    pt_worker_summary *beyond[2] = {timed(0, "node0", T0, STEP, 10, 3), timed(1, "node0", T0 + STEP + 1, STEP, 10, 3)};
    report = report_of(beyond, 2);
    assert_int_equal(warnings_with(report, "do not line up in time", &text), 1);
    assert_non_null(strstr(text, "host node0"));
    assert_non_null(strstr(text, "rank 1's window starts 3.00 s and ends 3.00 s later than rank 0's (1.0 steps of "
                                 "3.00 s)"));
    pt_json_free(report);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_shift_at_its_bound),
        cmocka_unit_test(test_both_ends_and_one_host),
        cmocka_unit_test(test_the_host_median_is_the_reference),
        cmocka_unit_test(test_step_numbers),
        cmocka_unit_test(test_the_report_warns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
