/* Hangs that name the collective, from both doors the analysis has:
 *   - synthetic jobs (perftracker synth's hang kinds), as Kineto traces cut short by the
 *     hang and as summaries made in memory, must each give one "hang" finding with the
 *     kind, ranks, group and call number expected.json says;
 *   - hang reports' snapshots (the collector's text, as the control plane carries it)
 *     decide from every rank's state: the case -- one rank blocked in Python
 *     before the all_reduce the other three wait in, every rank equally long without a
 *     step -- names the rank in Python, never the three waiting; a rank still stepping
 *     is never named; a healthy snapshot gives nothing;
 *   - the snapshot parser refuses hostile text line by line, with the line named. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diagnose/diagnose.h"
#include "summarize/hang_state.h"
#include "summarize/summarize.h"
#include "synth/synth.h"
#include "trace/kineto_writer.h"

#define FIXED_TIME "2026-01-01T00:00:00Z"

static pt_json *diagnose(pt_worker_summary **w, size_t n)
{
    pt_job_input job = {w, n, -1, NULL, 0, NULL, NULL, 0, FIXED_TIME};
    return pt_diagnose(&job);
}

static void free_workers(pt_worker_summary **w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pt_summary_free(w[i]);
}

static const pt_json *hang_finding(const pt_json *report, size_t *count)
{
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    const pt_json *first = NULL;
    *count = 0;
    for (size_t i = 0; findings && i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "category", ""), "hang") == 0) {
            first = first ? first : findings->items[i];
            (*count)++;
        }
    return first;
}

static const pt_json *evidence_hang(const pt_json *f)
{
    return pt_json_get(pt_json_get(f, "evidence"), "hang");
}

static void assert_same_ranks(const pt_json *got, const pt_json *want)
{
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(got->count, want->count);
    for (size_t i = 0; i < got->count; i++)
        assert_int_equal(got->items[i]->integer, want->items[i]->integer);
}

/* The report's hang finding against expected.json's. */
static void check_against_expected(const pt_json *report, const pt_json *expected, const char *what)
{
    size_t n;
    const pt_json *f = hang_finding(report, &n);
    const pt_json *want = pt_json_get(expected, "findings")->items[0];
    if (!f || n != 1)
        fail_msg("%s: %zu hang findings", what, n);
    assert_string_equal(pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", ""), "hang");
    assert_same_ranks(pt_json_get(f, "workers"), pt_json_get(want, "workers"));
    const pt_json *got = evidence_hang(f), *key = pt_json_get(want, "hang");
    if (strcmp(pt_json_get_string(got, "kind", ""), pt_json_get_string(key, "kind", "")) != 0)
        fail_msg("%s: kind %s, expected %s: %s", what, pt_json_get_string(got, "kind", ""),
                 pt_json_get_string(key, "kind", ""), pt_json_get_string(f, "summary", ""));
    assert_string_equal(pt_json_get_string(got, "group", "?"), pt_json_get_string(key, "group", "?"));
    assert_int_equal((int64_t)pt_json_get_number(got, "seq", -1), (int64_t)pt_json_get_number(key, "seq", -2));
    if (pt_json_get(key, "mismatch"))
        assert_string_equal(pt_json_get_string(got, "mismatch", ""), pt_json_get_string(key, "mismatch", ""));
}

/* ------------------------------------------------------------ synthetic jobs */

static const pt_fault_kind hang_kinds[] = {PT_FAULT_HANG, PT_FAULT_HANG_MISMATCH, PT_FAULT_HANG_SIZE,
                                           PT_FAULT_HANG_SKIP, PT_FAULT_HANG_ORDER, PT_FAULT_HANG_TRANSPORT};

static pt_synth_job hang_job(pt_fault_kind kind)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = 8;
    job.steps = 4;
    job.fault = kind;
    return job;
}

/* The summaries made in memory, as `synth --format summary` makes them. */
static void test_each_kind_from_summaries(void **state)
{
    (void)state;
    for (size_t k = 0; k < PT_ARRAY_LEN(hang_kinds); k++) {
        pt_synth_job job = hang_job(hang_kinds[k]);
        pt_error err;
        pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
        if (!plan)
            fail_msg("%s: %s", pt_fault_name(job.fault), err.message);
        pt_worker_summary *w[8];
        for (int r = 0; r < job.workers; r++) {
            w[r] = pt_synth_plan_summary(plan, r, &err);
            if (!w[r])
                fail_msg("%s rank %d: %s", pt_fault_name(job.fault), r, err.message);
            assert_true(w[r]->group_count >= 1);
        }
        pt_json *expected = pt_synth_plan_expected(plan);
        pt_json *report = diagnose(w, (size_t)job.workers);
        check_against_expected(report, expected, pt_fault_name(job.fault));
        pt_json_free(report);
        pt_json_free(expected);
        pt_synth_plan_free(plan);
        free_workers(w, (size_t)job.workers);
    }
}

/* The Kineto traces, written and read back: each rank's file ends where its hang cut it. */
static void test_each_kind_from_truncated_kineto_sets(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt-hang-kineto-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t k = 0; k < PT_ARRAY_LEN(hang_kinds); k++) {
        pt_synth_job job = hang_job(hang_kinds[k]);
        pt_error err;
        pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
        assert_non_null(plan);
        pt_worker_summary *w[8];
        for (int r = 0; r < job.workers; r++) {
            char path[256];
            snprintf(path, sizeof path, "%s/rank%d.json", dir, r);
            pt_trace_meta meta;
            pt_synth_plan_meta(plan, r, &meta);
            pt_kineto_writer *kw = pt_kineto_writer_open(path, false, &err);
            assert_non_null(kw);
            pt_kineto_writer_meta(kw, &meta);
            pt_trace_sink sink = pt_kineto_writer_sink(kw);
            assert_int_equal(pt_synth_plan_worker(plan, r, &sink, &meta, &err), 0);
            pt_kineto_writer_meta(kw, &meta);
            assert_int_equal(pt_kineto_writer_close(kw, &err), 0);
            w[r] = pt_summarize_file(path, NULL, &err);
            if (!w[r])
                fail_msg("%s rank %d: %s", pt_fault_name(job.fault), r, err.message);
            unlink(path);
        }
        pt_json *expected = pt_synth_plan_expected(plan);
        pt_json *report = diagnose(w, (size_t)job.workers);
        check_against_expected(report, expected, pt_fault_name(job.fault));
        pt_json_free(report);
        pt_json_free(expected);
        pt_synth_plan_free(plan);
        free_workers(w, (size_t)job.workers);
    }
    rmdir(dir);
}

/* A healthy job's traces carry the same collectives and get no hang finding. */
static void test_healthy_job_has_no_hang(void **state)
{
    (void)state;
    pt_synth_job job = hang_job(PT_FAULT_NONE);
    pt_error err;
    pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
    pt_worker_summary *w[8];
    for (int r = 0; r < job.workers; r++) {
        w[r] = pt_synth_plan_summary(plan, r, &err);
        assert_non_null(w[r]);
        assert_true(w[r]->group_count == 1 && w[r]->groups[0].call_count > 0);
    }
    pt_json *report = diagnose(w, (size_t)job.workers);
    size_t n;
    assert_null(hang_finding(report, &n));
    assert_string_not_equal(pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", ""), "hang");
    pt_json_free(report);
    pt_synth_plan_free(plan);
    free_workers(w, (size_t)job.workers);
}

/* ------------------------------------------------------------ hang reports' snapshots */

/* A worker as the round makes it from a probe's answer. */
static pt_worker_summary *snapshot(int rank, int world, const char *stack, const char *collectives,
                                   int64_t idle_ns, int64_t step_ns)
{
    pt_worker_summary *s = pt_summary_new();
    char name[64], threads[1024];
    snprintf(name, sizeof name, "host_%d_%d.ptrace", rank, 1000 + rank);
    s->name = strdup(name);
    s->rank = rank;
    s->world_size = world;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->hang_step = 41;
    s->hang_idle_ns = idle_ns;
    s->hang_step_ns = step_ns;
    snprintf(threads, sizeof threads, "thread\tMainThread\t%d\t1\t%s\nthread\tThread-1\t%d\t0\tthreading.py: run\n",
             100 + rank, stack, 200 + rank);
    pt_error err;
    if (pt_hang_state_parse(s, threads, collectives, &err) != 0)
        fail_msg("snapshot of rank %d: %s", rank, err.message);
    return s;
}

#define TRAIN "train.py: <module>|train.py: train"
#define WAITING_STACK TRAIN "|torch/distributed/distributed_c10d.py: all_reduce"
#define PYTHON_STACK TRAIN "|train.py: load_batch"
#define GROUP0 "group\t0\tgloo\t4\t0-3\n"
#define DONE_UP_TO_40 "call\t39\tall_reduce\t1000\tfloat32\tcompleted\t80000\ncall\t40\tbroadcast\t10\tfloat32\tcompleted\t60000\n"

/* The inverted report: every rank equally long without a step. */
static void test_rank_blocked_in_python_is_named_not_the_waiting_ones(void **state)
{
    (void)state;
    const char *waiting = GROUP0 DONE_UP_TO_40 "call\t41\tall_reduce\t1000\tfloat32\tentered\t3000000\n";
    pt_worker_summary *w[4];
    for (int r = 0; r < 3; r++)
        w[r] = snapshot(r, 4, WAITING_STACK, waiting, 3000000000LL, 38000000);
    w[3] = snapshot(3, 4, PYTHON_STACK, GROUP0 DONE_UP_TO_40, 3000000000LL, 38000000);
    pt_json *report = diagnose(w, 4);
    size_t n;
    const pt_json *f = hang_finding(report, &n);
    assert_non_null(f);
    assert_int_equal(n, 1);
    const pt_json *workers = pt_json_get(f, "workers");
    assert_int_equal(workers->count, 1);
    assert_int_equal(workers->items[0]->integer, 3);
    assert_string_equal(pt_json_get_string(evidence_hang(f), "kind", ""), "missing");
    assert_int_equal((int)pt_json_get_number(evidence_hang(f), "seq", 0), 41);
    assert_string_equal(pt_json_get_string(f, "function", ""), PYTHON_STACK);
    const char *summary = pt_json_get_string(f, "summary", "");
    if (!strstr(summary, "Rank 3 has not joined all_reduce #41 (1000 x float32) of process group 0 (ranks 0-3), "
                         "which ranks 0-2 wait in; rank 3 is in"))
        fail_msg("sentence: %s", summary);
    assert_null(strstr(summary, "stopped making progress"));
    const pt_json *workers_section = pt_json_get(report, "workers");
    for (size_t i = 0; i < workers_section->count; i++) {
        int rank = (int)pt_json_get_number(workers_section->items[i], "rank", -1);
        const char *status = pt_json_get_string(workers_section->items[i], "status", "");
        if ((rank == 3) != (strcmp(status, "hang") == 0))
            fail_msg("rank %d has status %s", rank, status);
    }
    pt_json_free(report);
    free_workers(w, 4);
}

/* The same without collective state (an older collector): the stacks decide, from every
 * rank's, and still name the rank outside a collective. */
static void test_stacks_alone_name_the_rank_outside_a_collective(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    for (int r = 0; r < 3; r++)
        w[r] = snapshot(r, 4, WAITING_STACK, NULL, 3000000000LL, 38000000);
    w[3] = snapshot(3, 4, PYTHON_STACK, NULL, 3000000000LL, 38000000);
    pt_json *report = diagnose(w, 4);
    size_t n;
    const pt_json *f = hang_finding(report, &n);
    assert_non_null(f);
    assert_int_equal(pt_json_get(f, "workers")->count, 1);
    assert_int_equal(pt_json_get(f, "workers")->items[0]->integer, 3);
    pt_json_free(report);
    free_workers(w, 4);
}

/* A rank still stepping when the report was taken is never named as stopped. */
static void test_rank_still_stepping_is_not_named(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    for (int r = 0; r < 3; r++)
        w[r] = snapshot(r, 4, "train.py: <module>|train.py: train|train.py: step", NULL, 5000000, 38000000);
    w[3] = snapshot(3, 4, PYTHON_STACK, NULL, 9000000000LL, 38000000);
    pt_json *report = diagnose(w, 4);
    size_t n;
    const pt_json *f = hang_finding(report, &n);
    assert_non_null(f);
    assert_int_equal(pt_json_get(f, "workers")->count, 1);
    assert_int_equal(pt_json_get(f, "workers")->items[0]->integer, 3);
    pt_json_free(report);
    free_workers(w, 4);
}

/* Without collective state, three ranks stopped in a collective and one still stepping
 * outside any: the stepping rank is not the culprit (it stopped nothing), whatever its
 * stack shows; the finding names no rank it cannot tell is stuck. */
static void test_stacks_alone_never_name_a_rank_still_stepping(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    for (int r = 0; r < 3; r++)
        w[r] = snapshot(r, 4, WAITING_STACK, NULL, 9000000000LL, 38000000);
    w[3] = snapshot(3, 4, PYTHON_STACK, NULL, 5000000, 38000000);
    pt_json *report = diagnose(w, 4);
    size_t n;
    const pt_json *f = hang_finding(report, &n);
    if (f) {
        const pt_json *workers = pt_json_get(f, "workers");
        for (size_t i = 0; workers && i < workers->count; i++)
            if (workers->items[i]->integer == 3)
                fail_msg("the rank still stepping is named: %s", pt_json_get_string(f, "summary", ""));
    }
    const pt_json *entries = pt_json_get(report, "workers");
    for (size_t i = 0; i < entries->count; i++)
        if (pt_json_get_number(entries->items[i], "rank", -1) == 3)
            assert_string_not_equal(pt_json_get_string(entries->items[i], "status", ""), "hang");
    pt_json_free(report);
    free_workers(w, 4);
}

/* Every rank stepping: nothing stopped, no hang, whatever the collectives show. */
static void test_snapshot_of_a_healthy_job_has_no_hang(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    for (int r = 0; r < 4; r++)
        w[r] = snapshot(r, 4, TRAIN, GROUP0 DONE_UP_TO_40, 2000000, 38000000);
    pt_json *report = diagnose(w, 4);
    size_t n;
    assert_null(hang_finding(report, &n));
    pt_json_free(report);
    free_workers(w, 4);
}

/* ------------------------------------------------------------ the parser */

static void expect_refused(const char *threads, const char *collectives, const char *why)
{
    pt_worker_summary *s = pt_summary_new();
    s->name = strdup("w");
    pt_error err = {{0}};
    if (pt_hang_state_parse(s, threads, collectives, &err) == 0)
        fail_msg("accepted: %s / %s", threads ? threads : "", collectives ? collectives : "");
    if (!strstr(err.message, why))
        fail_msg("refused as \"%s\", expected \"%s\"", err.message, why);
    assert_int_equal(s->group_count, 0);
    assert_int_equal(s->thread_count, 0);
    pt_summary_free(s);
}

static void test_hostile_snapshots_are_refused_by_line(void **state)
{
    (void)state;
    expect_refused("thread\tMain\t1\n", NULL, "line 1 is not \"thread, name, ident, training, stack\"");
    expect_refused("thread\tMain\t-1\t1\ta.py: f\n", NULL, "ident or training flag");
    expect_refused("thread\tA\t1\t1\ta\nthread\tB\t2\t1\tb\n", NULL, "line 2: a second training thread");
    expect_refused(NULL, "call\t1\tall_reduce\t4\tfloat32\tentered\t0\n", "a call before any group");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-3\ncall\t2\tall_reduce\t4\tfloat32\tentered\t0\n"
                         "call\t2\tall_reduce\t4\tfloat32\tentered\t0\n", "call 2 does not follow call 2");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-3\ncall\t0\tall_reduce\t4\tfloat32\tentered\t0\n", "not a number in range");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-3\ncall\t9007199254740993\tx\t4\tf\tentered\t0\n", "not a number in range");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-3\ncall\t1\tall_reduce\t4\tfloat32\tstuck\t0\n", "state is not");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-3\ncall\t1\tall_reduce\t4\tfloat32\tcompleted\t0\toops\n",
                   "an error on a call that did not fail");
    expect_refused(NULL, "group\t0\tgloo\t4\t3-0\n", "does not end on its stride");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-9/4\n", "does not end on its stride");
    expect_refused(NULL, "group\t0\tgloo\t4\t2,1\n", "not in increasing order");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-1048576\n", "is not below 1048576");
    expect_refused(NULL, "group\t0\tgloo\t4\t0-3\ngroup\t0\tgloo\t4\t0-3\n", "appears twice");
    expect_refused(NULL, "group\t0\tgloo\t0\t0-3\n", "a group's size is not -1 or 1 to");
    expect_refused(NULL, "group\t\tgloo\t4\t0-3\n", "a group's name is empty");
    /* 65 calls in one group: past PT_SUMMARY_MAX_CALLS */
    pt_buf many = PT_BUF_INIT;
    pt_buf_puts(&many, "group\t0\tgloo\t4\t0-3\n");
    for (int i = 1; i <= 65; i++)
        pt_buf_printf(&many, "call\t%d\tall_reduce\t4\tfloat32\tcompleted\t0\n", i);
    expect_refused(NULL, many.data, "more than 64 calls in one group");
    pt_buf_free(&many);
}

static void test_rank_lists_in_both_notations(void **state)
{
    (void)state;
    pt_rank_run *runs;
    size_t n;
    pt_error err;
    assert_int_equal(pt_rank_runs_parse("[0, 1, 2, 3]", 12, &runs, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(runs[0].first, 0), assert_int_equal(runs[0].last, 3), assert_int_equal(runs[0].stride, 1);
    free(runs);
    assert_int_equal(pt_rank_runs_parse("0-56/8,60,61", 12, &runs, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(runs[0].last, 56), assert_int_equal(runs[0].stride, 8);
    assert_int_equal(runs[1].first, 60), assert_int_equal(runs[1].last, 61);
    free(runs);
    assert_int_equal(pt_rank_runs_parse("-", 1, &runs, &n, &err), 0);
    assert_int_equal(n, 0);
}

/* One rank's all-reduce has no elements (an empty bucket), the others' 1000: a size
 * mismatch, 0 being a size like any other, not a dtype mismatch. */
static void test_empty_collective_is_a_size_mismatch(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    for (int r = 0; r < 3; r++)
        w[r] = snapshot(r, 4, WAITING_STACK, GROUP0 DONE_UP_TO_40 "call\t41\tall_reduce\t1000\tfloat32\tentered\t3000000\n",
                        3000000000LL, 38000000);
    w[3] = snapshot(3, 4, WAITING_STACK, GROUP0 DONE_UP_TO_40 "call\t41\tall_reduce\t0\tfloat32\tentered\t3000000\n",
                    3000000000LL, 38000000);
    pt_json *report = diagnose(w, 4);
    size_t n;
    const pt_json *f = hang_finding(report, &n);
    assert_non_null(f);
    assert_int_equal(pt_json_get(f, "workers")->count, 1);
    assert_int_equal(pt_json_get(f, "workers")->items[0]->integer, 3);
    assert_string_equal(pt_json_get_string(evidence_hang(f), "mismatch", ""), "size");
    const char *summary = pt_json_get_string(f, "summary", "");
    if (!strstr(summary, "a size mismatch: rank 3 called all_reduce (0 x float32) where ranks 0-2 called all_reduce (1000 x float32)"))
        fail_msg("sentence: %s", summary);
    pt_json_free(report);
    free_workers(w, 4);

    /* The other way round: the three agree on an empty call, rank 3 has 1000 elements. */
    for (int r = 0; r < 3; r++)
        w[r] = snapshot(r, 4, WAITING_STACK, GROUP0 DONE_UP_TO_40 "call\t41\tall_reduce\t0\tfloat32\tentered\t3000000\n",
                        3000000000LL, 38000000);
    w[3] = snapshot(3, 4, WAITING_STACK, GROUP0 DONE_UP_TO_40 "call\t41\tall_reduce\t1000\tfloat32\tentered\t3000000\n",
                    3000000000LL, 38000000);
    report = diagnose(w, 4);
    f = hang_finding(report, &n);
    assert_non_null(f);
    assert_string_equal(pt_json_get_string(evidence_hang(f), "mismatch", ""), "size");
    summary = pt_json_get_string(f, "summary", "");
    if (!strstr(summary, "a size mismatch: rank 3 called all_reduce (1000 x float32) where ranks 0-2 called all_reduce (0 x float32)"))
        fail_msg("sentence: %s", summary);
    pt_json_free(report);
    free_workers(w, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_collective_is_a_size_mismatch),
        cmocka_unit_test(test_each_kind_from_summaries),
        cmocka_unit_test(test_each_kind_from_truncated_kineto_sets),
        cmocka_unit_test(test_healthy_job_has_no_hang),
        cmocka_unit_test(test_rank_blocked_in_python_is_named_not_the_waiting_ones),
        cmocka_unit_test(test_stacks_alone_name_the_rank_outside_a_collective),
        cmocka_unit_test(test_rank_still_stepping_is_not_named),
        cmocka_unit_test(test_stacks_alone_never_name_a_rank_still_stepping),
        cmocka_unit_test(test_snapshot_of_a_healthy_job_has_no_hang),
        cmocka_unit_test(test_hostile_snapshots_are_refused_by_line),
        cmocka_unit_test(test_rank_lists_in_both_notations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
