/* What a round makes of a worker's last words (src/control/round.c).
 *
 * A collective that raises inside a profiling window ends the job there: the window is
 * cut short and its summary still arrives, but the trace saw the call, not its error. The
 * collector's own record of the call (the snapshot its agent sent as the error came) goes
 * with the summary, and the report must name the failed collective, the ranks it failed
 * on and the one that died without a word -- as it does when the job ends before the
 * window opens (a failure with a snapshot). Without that record nothing claims an error,
 * and a record that does not parse leaves the trace's state with a warning. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/protocol.h"
#include "control/round.h"
#include "summarize/summary_io.h"
#include "synth/synth.h"
#include "util/json.h"

#define WORLD 4
#define DEAD_RANK 2
#define FAILED_CALL "call\t5\tall_reduce\t1000\tfloat32\tfailed\t1200\tRuntimeError: Connection closed by peer\n"

static const char *const final_collectives = "group\t0\tgloo\t4\t0-3\n"
                                             "call\t4\tall_reduce\t1\tfloat32\tcompleted\t9000\n" FAILED_CALL;

static void add_summary(pt_round *r, int32_t rank, const pt_round_snapshot *snap)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = WORLD, job.steps = 2, job.layers = 1;
    pt_error err = {{0}};
    pt_worker_summary *s = pt_synth_summary(&job, rank, &err);
    assert_non_null(s);
    pt_buf blob = PT_BUF_INIT;
    pt_summary_encode(s, &blob);
    pt_ctl_worker w = {rank, rank, WORLD, 0, 1000 + rank, pt_ctl_str("vm")};
    if (pt_round_add_summary(r, &w, NULL, blob.data, blob.len, snap, &err) < 0)
        fail_msg("rank %d's summary was refused: %s", rank, err.message);
    pt_buf_free(&blob);
    pt_summary_free(s);
}

/* Ranks 0, 1 and 3 end their windows with snapshot (NULL: none); rank 2 dies. */
static pt_json *round_report(const char *collectives)
{
    pt_round *r = pt_round_new_in_memory("round", WORLD);
    pt_round_snapshot snap = {NULL, "", collectives, 0, 0};
    for (int32_t rank = 0; rank < WORLD; rank++)
        if (rank != DEAD_RANK)
            add_summary(r, rank, collectives ? &snap : NULL);
    pt_ctl_worker dead = {DEAD_RANK, DEAD_RANK, WORLD, 0, 1000 + DEAD_RANK, pt_ctl_str("vm")};
    pt_round_add_failure(r, &dead, PT_FAIL_DIED, 1, 0, "connection lost at step 1", NULL);
    pt_error err = {{0}};
    pt_json *report = pt_round_report(r, &err);
    if (!report)
        fail_msg("no report: %s", err.message);
    pt_round_free(r);
    return report;
}

/* The report's finding whose hang evidence is of this kind, or NULL. */
static const pt_json *hang_finding(const pt_json *report, const char *kind)
{
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    for (size_t i = 0; findings && i < findings->count; i++) {
        const pt_json *hang = pt_json_get(pt_json_get(findings->items[i], "evidence"), "hang");
        if (hang && strcmp(pt_json_get_string(hang, "kind", ""), kind) == 0)
            return findings->items[i];
    }
    return NULL;
}

static const char *role_of(const pt_json *hang, int32_t rank)
{
    const pt_json *ranks = pt_json_get(hang, "ranks");
    for (size_t i = 0; ranks && i < ranks->count; i++)
        if ((int32_t)pt_json_get_number(ranks->items[i], "rank", -1) == rank)
            return pt_json_get_string(ranks->items[i], "role", "");
    return "";
}

static bool has_warning(const pt_json *report, const char *needle)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    for (size_t i = 0; warnings && i < warnings->count; i++)
        if (strstr(warnings->items[i]->string, needle))
            return true;
    return false;
}

static void test_a_collective_that_failed_as_the_window_ended_is_named(void **state)
{
    (void)state;
    pt_json *report = round_report(final_collectives);
    const pt_json *f = hang_finding(report, "collective_error");
    if (!f)
        fail_msg("no collective_error finding: the summaries' final collectives were dropped");
    const pt_json *hang = pt_json_get(pt_json_get(f, "evidence"), "hang");
    for (int32_t rank = 0; rank < WORLD; rank++)
        assert_string_equal(role_of(hang, rank), rank == DEAD_RANK ? "no answer" : "failed");
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "all_reduce #5 (1000 x float32)"));
    assert_non_null(strstr(summary, "failed on ranks 0, 1 and 3: `RuntimeError: Connection closed by peer`"));
    assert_non_null(strstr(summary, "rank 2 ended without a word"));
    assert_string_equal(pt_json_get_string(f, "function", ""), "all_reduce #5 failed");
    assert_string_equal(pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", ""), "hang");
    pt_json_free(report);
}

static void test_without_the_record_no_error_is_claimed(void **state)
{
    (void)state;
    pt_json *report = round_report(NULL);
    assert_null(hang_finding(report, "collective_error"));
    pt_json_free(report);
}

static void test_a_record_that_does_not_parse_leaves_the_trace_with_a_warning(void **state)
{
    (void)state;
    pt_json *report = round_report("group\t0\tgloo\tfour\t0-3\n" FAILED_CALL);
    assert_null(hang_finding(report, "collective_error"));
    assert_true(has_warning(report, "its collectives as its window ended were not read"));
    pt_json_free(report);
}

/* The CLI decodes a round's summaries with their names in the shared pool (cli/trigger.c):
 * the record's calls must still replace the trace's, and their names become the pool's
 * (ASan's leak check fails if they are left to a summary that never frees them). Last:
 * the pool, once on, stays on for the process. */
static void test_with_shared_names_the_record_still_names_the_failed_collective(void **state)
{
    (void)state;
    pt_summary_share_names();
    pt_json *report = round_report(final_collectives);
    const pt_json *f = hang_finding(report, "collective_error");
    if (!f)
        fail_msg("no collective_error finding with shared names: the summaries' final collectives were dropped");
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "all_reduce #5 (1000 x float32)"));
    assert_non_null(strstr(summary, "failed on ranks 0, 1 and 3: `RuntimeError: Connection closed by peer`"));
    pt_json_free(report);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_collective_that_failed_as_the_window_ended_is_named),
        cmocka_unit_test(test_without_the_record_no_error_is_claimed),
        cmocka_unit_test(test_a_record_that_does_not_parse_leaves_the_trace_with_a_warning),
        cmocka_unit_test(test_with_shared_names_the_record_still_names_the_failed_collective),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
