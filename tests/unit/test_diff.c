/* The diff (compare/diff.c) on synthetic jobs with a known change: summaries of
 * `perftracker synth` jobs built in memory (pt_synth -> pt_summarizer), compared.
 *
 * What must hold: a job against itself, or against another healthy seed, shows no
 * significant change; an injected fault is named (the rank, the class, and the function
 * synth's answer key gives), in both directions; a change on every worker is named without
 * ranks; a new function is listed as added; a hang leads the verdict; runs rebuilt from report.json find the same
 * cause and say they carry less; runs of different sizes compare by the median worker. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare/diff.h"
#include "diagnose/diagnose.h"
#include "report/diff_report.h"
#include "report/report.h"
#include "synth/synth.h"
#include "util/input.h"

typedef struct job {
    pt_worker_summary **workers;
    size_t n;
    pt_json *expected; /* synth's answer key */
} job;

static job make_job(pt_fault_kind fault, uint64_t seed, int workers, int steps)
{
    pt_synth_job spec;
    pt_synth_job_init(&spec);
    spec.fault = fault;
    spec.seed = seed;
    spec.workers = workers;
    spec.steps = steps;
    pt_error err = {{0}};
    pt_synth_plan *plan = pt_synth_plan_new(&spec, &err);
    assert_non_null(plan);
    job j = {calloc((size_t)workers, sizeof *j.workers), (size_t)workers, pt_synth_plan_expected(plan)};
    for (int r = 0; r < workers; r++) {
        j.workers[r] = pt_synth_plan_summary(plan, r, &err);
        assert_non_null(j.workers[r]);
    }
    pt_synth_plan_free(plan);
    return j;
}

static void free_job(job *j)
{
    for (size_t i = 0; i < j->n; i++)
        pt_summary_free(j->workers[i]);
    free(j->workers);
    pt_json_free(j->expected);
}

static const char *expected_function(const job *j)
{
    const pt_json *findings = pt_json_get(j->expected, "findings");
    assert_true(findings && findings->count >= 1);
    return pt_json_get_string(findings->items[0], "function", "");
}

static pt_json *diff_jobs(job *before, job *after)
{
    pt_diff_run b, a;
    pt_diff_run_from_summaries(&b, "before", PT_RUN_TRACES, before->workers, before->n);
    pt_diff_run_from_summaries(&a, "after", PT_RUN_TRACES, after->workers, after->n);
    pt_json *d = pt_diff(&b, &a, "2026-01-01T00:00:00Z");
    pt_diff_run_free(&b);
    pt_diff_run_free(&a);
    return d;
}

static const char *change_of(const pt_json *d)
{
    return pt_json_get_string(pt_json_get(d, "verdict"), "change", "");
}

static const pt_json *cause_of(const pt_json *d)
{
    return pt_json_get(pt_json_get(d, "verdict"), "cause");
}

static bool significant(const pt_json *entry)
{
    const pt_json *s = pt_json_get(entry, "significant");
    return s && s->type == PT_JSON_BOOL && s->boolean;
}

static size_t significant_entries(const pt_json *d, const char *list)
{
    const pt_json *l = pt_json_get(d, list);
    size_t n = 0;
    for (size_t i = 0; l && i < l->count; i++)
        n += significant(l->items[i]) || pt_json_get(l->items[i], "ranks")->count > 0;
    return n;
}

static void assert_nothing_changed(const pt_json *d)
{
    assert_string_equal(change_of(d), "unchanged");
    assert_false(significant(pt_json_get(d, "step_time")));
    const pt_json *classes = pt_json_get(d, "classes");
    assert_int_equal(classes->count, PT_CLASS_COUNT + 1);
    for (size_t i = 0; i < classes->count; i++) {
        assert_false(significant(classes->items[i]));
        assert_int_equal(pt_json_get(classes->items[i], "ranks")->count, 0);
    }
    assert_int_equal(pt_json_get(d, "functions")->count, 0);
    assert_int_equal(pt_json_get_number(d, "functions_changed", -1), 0);
    assert_int_equal(significant_entries(d, "added") + significant_entries(d, "removed"), 0);
    assert_true(cause_of(d)->type == PT_JSON_NULL);
    assert_true(pt_json_get_number(d, "functions_compared", 0) > 10);
}

/* The function entry of that name in a list, or NULL. */
static const pt_json *entry_named(const pt_json *d, const char *list, const char *name)
{
    const pt_json *l = pt_json_get(d, list);
    for (size_t i = 0; l && i < l->count; i++)
        if (strcmp(pt_json_get_string(l->items[i], "name", ""), name) == 0)
            return l->items[i];
    return NULL;
}

static void assert_cause(const pt_json *d, const char *cls, const char *function, int rank)
{
    const pt_json *cause = cause_of(d);
    assert_string_equal(pt_json_get_string(cause, "class", ""), cls);
    assert_string_equal(pt_json_get_string(cause, "function", ""), function);
    const pt_json *ranks = pt_json_get(cause, "ranks");
    if (rank < 0) {
        assert_int_equal(ranks->count, 0);
    } else {
        assert_int_equal(ranks->count, 1);
        assert_int_equal(ranks->items[0]->integer, rank);
    }
}

static void test_job_against_itself_is_unchanged(void **state)
{
    (void)state;
    job a = make_job(PT_FAULT_NONE, 1, 8, 3), b = make_job(PT_FAULT_NONE, 1, 8, 3);
    pt_json *d = diff_jobs(&a, &b);
    assert_nothing_changed(d);
    assert_string_equal(pt_json_get_string(d, "comparison", ""), "rank by rank");
    assert_int_equal(pt_json_get_number(d, "added_count", -1), 0);
    assert_int_equal(pt_json_get_number(d, "removed_count", -1), 0);
    pt_json_free(d);
    free_job(&a);
    free_job(&b);
}

static void test_another_healthy_seed_is_unchanged(void **state)
{
    (void)state;
    for (uint64_t seed = 2; seed <= 6; seed++) {
        job a = make_job(PT_FAULT_NONE, 1, 8, 3), b = make_job(PT_FAULT_NONE, seed, 8, 3);
        pt_json *d = diff_jobs(&a, &b);
        assert_nothing_changed(d);
        /* The seeds really differ: the step times are not identical. */
        const pt_json *step = pt_json_get(d, "step_time");
        assert_true(pt_json_get_number(step, "delta_ms", 0) != 0);
        pt_json_free(d);
        free_job(&a);
        free_job(&b);
    }
}

static void test_slow_gpu_names_the_rank_and_kernel(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 8, 3), slow = make_job(PT_FAULT_SLOW_GPU, 1, 8, 3);
    const char *kernel = expected_function(&slow);
    pt_json *d = diff_jobs(&healthy, &slow);
    assert_string_equal(change_of(d), "slower");
    assert_cause(d, "compute", kernel, 7);
    const char *sentence = pt_json_get_string(pt_json_get(d, "verdict"), "sentence", "");
    assert_non_null(strstr(sentence, "Rank 7: GPU compute time grew by ")); /* rank 7 alone */
    assert_non_null(strstr(sentence, "flash_bwd"));
    assert_non_null(strstr(sentence, "wait for it in collectives"));
    /* The kernel is listed with rank 7's change; the median worker's communication grew. */
    const pt_json *k = entry_named(d, "functions", kernel);
    assert_non_null(k);
    assert_int_equal(pt_json_get_number(pt_json_get(k, "ranks")->items[0], "rank", -1), 7);
    assert_true(pt_json_get_number(pt_json_get(k, "ranks")->items[0], "delta_ms", 0) > 1);
    const pt_json *comm = pt_json_get(d, "classes")->items[PT_CLASS_COMM];
    assert_true(significant(comm) && pt_json_get_number(comm, "delta_ms", 0) > 10);
    /* The new finding of AFTER's diagnosis is the same kernel. */
    const pt_json *fresh = pt_json_get(pt_json_get(d, "findings"), "new");
    assert_true(fresh->count >= 1);
    assert_string_equal(pt_json_get_string(fresh->items[0], "function", ""), kernel);
    pt_json_free(d);

    d = diff_jobs(&slow, &healthy); /* the fix */
    assert_string_equal(change_of(d), "faster");
    assert_cause(d, "compute", kernel, 7);
    assert_non_null(strstr(pt_json_get_string(pt_json_get(d, "verdict"), "sentence", ""), "no longer wait"));
    assert_true(pt_json_get(pt_json_get(d, "findings"), "resolved")->count >= 1);
    pt_json_free(d);
    free_job(&healthy);
    free_job(&slow);
}

static void test_slow_dataloader_names_the_stack(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 8, 3), slow = make_job(PT_FAULT_SLOW_DATALOADER, 1, 8, 3);
    pt_json *d = diff_jobs(&healthy, &slow);
    assert_string_equal(change_of(d), "slower");
    assert_cause(d, "python", expected_function(&slow), 7);
    pt_json_free(d);
    free_job(&healthy);
    free_job(&slow);
}

static void test_hang_leads_the_verdict(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 8, 3), hung = make_job(PT_FAULT_HANG, 1, 8, 3);
    const pt_json *expected = pt_json_get(hung.expected, "findings")->items[0];
    pt_json *d = diff_jobs(&healthy, &hung);
    assert_string_equal(change_of(d), "hang");
    const pt_json *ranks = pt_json_get(cause_of(d), "ranks");
    assert_string_equal(pt_json_get_string(cause_of(d), "class", ""), "hang");
    assert_int_equal(ranks->count, 1);
    assert_int_equal(ranks->items[0]->integer, pt_json_get(expected, "workers")->items[0]->integer);
    assert_non_null(strstr(pt_json_get_string(pt_json_get(d, "verdict"), "sentence", ""), "AFTER hangs"));
    pt_json_free(d);
    d = diff_jobs(&hung, &healthy);
    assert_string_not_equal(change_of(d), "hang");
    assert_non_null(strstr(pt_json_get_string(pt_json_get(d, "verdict"), "sentence", ""), "BEFORE hung"));
    pt_json_free(d);
    free_job(&healthy);
    free_job(&hung);
}

static void test_common_memcpy_is_added_on_every_worker(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 8, 3), copies = make_job(PT_FAULT_COMMON_MEMCPY, 1, 8, 3);
    const char *kind = expected_function(&copies);
    pt_json *d = diff_jobs(&healthy, &copies);
    assert_string_equal(change_of(d), "slower");
    assert_cause(d, "memory", kind, -1);
    const pt_json *added = entry_named(d, "added", kind);
    assert_non_null(added);
    assert_true(significant(added));
    assert_int_equal(pt_json_get_number(added, "after_workers", 0), 8);
    assert_true(pt_json_get_number(added, "after_calls", 0) >= 12); /* one per block, 12 blocks */
    assert_true(pt_json_get(added, "before_calls")->number == 0);
    pt_json_free(d);
    free_job(&healthy);
    free_job(&copies);
}

/* The runs as report.json files would give them. */
static void run_from_report(pt_diff_run *run, job *j)
{
    pt_job_input input = {j->workers, j->n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&input);
    /* Through text, as a file would be read. */
    pt_buf text = PT_BUF_INIT;
    pt_json_write(&text, report, -1);
    pt_json_free(report);
    pt_error err = {{0}};
    pt_json *parsed = pt_json_parse(text.data, text.len, 64, &err);
    pt_buf_free(&text);
    assert_non_null(parsed);
    assert_int_equal(pt_diff_run_from_report(run, "report.json", parsed, NULL, &err), 0);
}

/* A bounded report (PERFTRACKER_REPORT_FULL_MAX, 8 here for 200 workers) holds only some
 * workers in full (the named, 16 slowest, 16 fastest...): the run says it compares those
 * alone, and how many of how many. */
static void test_bounded_report_run_says_what_it_compares(void **state)
{
    (void)state;
    job slow = make_job(PT_FAULT_SLOW_DATALOADER, 1, 200, 3);
    setenv("PERFTRACKER_REPORT_FULL_MAX", "8", 1);
    pt_diff_run run;
    run_from_report(&run, &slow);
    unsetenv("PERFTRACKER_REPORT_FULL_MAX");
    assert_true(run.worker_count < 200);
    char want[96];
    snprintf(want, sizeof want, "only %zu of its 200 workers", run.worker_count);
    bool said = false;
    for (size_t i = 0; i < run.warning_count; i++)
        said |= strstr(run.warnings[i], "bounded report") && strstr(run.warnings[i], want);
    assert_true(said);
    pt_diff_run_free(&run);
    pt_diff_run full;
    run_from_report(&full, &slow); /* the full form: nothing to say */
    for (size_t i = 0; i < full.warning_count; i++)
        assert_null(strstr(full.warnings[i], "bounded report"));
    pt_diff_run_free(&full);
    free_job(&slow);
}

/* The bounded report written as analyze writes it (report.json and its parts, under a new
 * folder), read back by path: every worker is in the run again, from the parts. */
static void run_from_written_report(pt_diff_run *run, job *j, char *dir, size_t cap, const char *missing_part)
{
    snprintf(dir, cap, "/tmp/pt-test-diff-XXXXXX");
    assert_non_null(mkdtemp(dir));
    pt_job_input input = {j->workers, j->n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    input.write_part = pt_report_part_writer;
    input.part_ctx = dir;
    pt_json *report = pt_diagnose(&input);
    pt_error err = {{0}};
    assert_int_equal(pt_report_write(dir, report, &err), 0);
    pt_json_free(report);
    char path[256];
    if (missing_part) {
        snprintf(path, sizeof path, "%s/parts/%s", dir, missing_part);
        assert_int_equal(unlink(path), 0);
    }
    snprintf(path, sizeof path, "%s/report.json", dir);
    size_t len = 0;
    char *text = pt_read_file(path, 64 << 20, &len, &err);
    assert_non_null(text);
    pt_json *parsed = pt_json_parse(text, len, 64, &err);
    free(text);
    assert_non_null(parsed);
    assert_int_equal(pt_diff_run_from_report(run, "report.json", parsed, path, &err), 0);
}

static void remove_written_report(const char *dir)
{
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    assert_int_equal(system(command), 0);
}

static const pt_worker_summary *run_worker_of_rank(const pt_diff_run *run, int32_t rank)
{
    for (size_t i = 0; i < run->worker_count; i++)
        if (run->workers[i]->rank == rank)
            return run->workers[i];
    return NULL;
}

/* With its path, a bounded report's run has every worker, from the parts beside it, with
 * the step times the full form gives each (an independent rebuild: the same job's report
 * in full), and no warning; a part that is gone is named, and the run says how many it
 * has without it. */
static void test_bounded_report_run_reads_its_parts(void **state)
{
    (void)state;
    job slow = make_job(PT_FAULT_SLOW_DATALOADER, 1, 200, 3);
    pt_diff_run full;
    run_from_report(&full, &slow);
    assert_int_equal(full.worker_count, 200);
    setenv("PERFTRACKER_REPORT_FULL_MAX", "8", 1);
    char dir[64];
    pt_diff_run run;
    run_from_written_report(&run, &slow, dir, sizeof dir, NULL);
    assert_int_equal(run.worker_count, 200);
    for (size_t i = 0; i < run.warning_count; i++)
        assert_null(strstr(run.warnings[i], "bounded report"));
    for (int32_t rank = 0; rank < 200; rank++) {
        const pt_worker_summary *mine = run_worker_of_rank(&run, rank), *theirs = run_worker_of_rank(&full, rank);
        assert_non_null(mine);
        assert_non_null(theirs);
        assert_int_equal(mine->step_count, theirs->step_count);
        assert_int_equal(pt_summary_step_ns(mine), pt_summary_step_ns(theirs));
    }
    pt_diff_run_free(&run);
    remove_written_report(dir);

    pt_diff_run partial;
    run_from_written_report(&partial, &slow, dir, sizeof dir, "workers-0000.json"); /* its only part: 1024 ranks */
    unsetenv("PERFTRACKER_REPORT_FULL_MAX");
    assert_true(partial.worker_count > 0 && partial.worker_count < 200); /* the report's full-detail workers */
    char want[96];
    snprintf(want, sizeof want, "only %zu of its 200 workers", partial.worker_count);
    bool said_count = false, said_part = false;
    for (size_t i = 0; i < partial.warning_count; i++) {
        said_count |= strstr(partial.warnings[i], want) != NULL;
        said_part |= strstr(partial.warnings[i], "part 0:") && strstr(partial.warnings[i], "workers-0000.json");
    }
    assert_true(said_count);
    assert_true(said_part);
    pt_diff_run_free(&partial);
    remove_written_report(dir);
    pt_diff_run_free(&full);
    free_job(&slow);
}

/* A report moved without its parts/ folder, listing five: three are named, the rest
 * counted, and the run says none could be read (not one warning per 1024 workers). */
static void test_parts_not_read_are_named_then_counted(void **state)
{
    (void)state;
    job slow = make_job(PT_FAULT_SLOW_DATALOADER, 1, 200, 3);
    setenv("PERFTRACKER_REPORT_FULL_MAX", "8", 1);
    pt_job_input input = {slow.workers, slow.n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&input);
    unsetenv("PERFTRACKER_REPORT_FULL_MAX");
    pt_json *parts = pt_json_set(pt_json_get(report, "scale"), "parts", pt_json_object());
    pt_json_add(parts, "folder", pt_json_string("parts"));
    pt_json *files = pt_json_add(parts, "files", pt_json_array());
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "workers-%04d.json", i);
        pt_json_add(pt_json_push(files, pt_json_object()), "file", pt_json_string(name));
    }
    char dir[] = "/tmp/pt-test-diff-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/report.json", dir);
    pt_diff_run run;
    pt_error err = {{0}};
    assert_int_equal(pt_diff_run_from_report(&run, "r.json", report, path, &err), 0);
    size_t named = 0, counted = 0, none = 0;
    for (size_t i = 0; i < run.warning_count; i++) {
        named += strstr(run.warnings[i], "cannot open") != NULL;
        counted += strstr(run.warnings[i], "2 more of its parts were not read") != NULL;
        none += strstr(run.warnings[i], "none of its parts could be read") != NULL;
    }
    assert_int_equal(named, 3);
    assert_int_equal(counted, 1);
    assert_int_equal(none, 1);
    pt_diff_run_free(&run);
    remove_written_report(dir);
    free_job(&slow);
}

static void test_reports_find_the_same_cause(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 8, 3), slow = make_job(PT_FAULT_SLOW_DATALOADER, 1, 8, 3);
    pt_diff_run b, a;
    run_from_report(&b, &healthy);
    run_from_report(&a, &slow);
    assert_int_equal(b.worker_count, 8);
    pt_json *d = pt_diff(&b, &a, NULL);
    assert_string_equal(change_of(d), "slower");
    assert_cause(d, "python", expected_function(&slow), 7);
    assert_string_equal(pt_json_get_string(pt_json_get(d, "before"), "source", ""), "report");
    const pt_json *notes = pt_json_get(d, "notes");
    bool said = false;
    for (size_t i = 0; i < notes->count; i++)
        said |= strstr(notes->items[i]->string, "report.json") != NULL;
    assert_true(said);
    const pt_json *comm = entry_named(d, "functions", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned "
                                                      "long, ncclWork*)");
    assert_non_null(comm);
    assert_true(pt_json_get(comm, "before_calls")->type == PT_JSON_NULL); /* reports carry no counts */
    pt_json_free(d);

    /* A report against itself: nothing changed. */
    pt_diff_run b2;
    run_from_report(&b2, &healthy);
    d = pt_diff(&b, &b2, NULL);
    assert_nothing_changed(d);
    pt_json_free(d);
    pt_diff_run_free(&b);
    pt_diff_run_free(&b2);
    pt_diff_run_free(&a);
    free_job(&healthy);
    free_job(&slow);
}

static void test_not_a_report_is_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{}", "{\"report_version\": 2, \"workers\": []}", "{\"report_version\": 1, \"workers\": {}}",
        "{\"report_version\": \"1\", \"workers\": []}", "[1, 2]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_error err = {{0}};
        pt_json *doc = pt_json_parse(bad[i], strlen(bad[i]), 64, &err);
        assert_non_null(doc);
        pt_diff_run run;
        assert_int_equal(pt_diff_run_from_report(&run, "x.json", doc, NULL, &err), -1);
        assert_non_null(strstr(err.message, "x.json"));
    }
    /* Workers of the wrong shape are skipped, not trusted. */
    const char *odd = "{\"report_version\": 1, \"workers\": [1, {\"name\": \"w\", \"step_time_ms\": \"fast\"},"
                      " {\"name\": \"ok\", \"rank\": 0, \"step_time_ms\": 10, \"steps\": [7, {\"ms\": 10,"
                      " \"compute_ms\": 9, \"idle_ms\": 1}]}], \"Python functions\": {\"a.py: f\": {\"ok\": 0.5,"
                      " \"nobody\": 0.9}}, \"GPU Compute\": [], \"Communication\": {\"g\": 3}}";
    pt_error err = {{0}};
    pt_json *doc = pt_json_parse(odd, strlen(odd), 64, &err);
    pt_diff_run run;
    assert_int_equal(pt_diff_run_from_report(&run, "odd.json", doc, NULL, &err), 0);
    assert_int_equal(run.worker_count, 1);
    assert_int_equal(run.workers[0]->step_count, 1);
    assert_int_equal(run.function_count, 1);
    assert_string_equal(run.functions[0].name, "a.py: f");
    assert_int_equal(run.functions[0].count, 1);
    assert_int_equal(run.records[run.functions[0].first].exposed_ns, 5000000);
    pt_diff_run_free(&run);
}

static bool has_warning(const pt_json *d, const char *a, const char *b)
{
    const pt_json *list = pt_json_get(d, "warnings");
    for (size_t i = 0; list && i < list->count; i++)
        if (strstr(list->items[i]->string, a) && strstr(list->items[i]->string, b))
            return true;
    return false;
}

/* A worker made in memory that breaks the summary rules (here: steps counted, none
 * there; the comparison read them through a NULL pointer) is refused with a warning
 * naming it and the rule, and the others are compared. */
static void test_invalid_workers_are_refused(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 4, 3), hostile = make_job(PT_FAULT_NONE, 1, 4, 3);
    pt_worker_summary *bad = hostile.workers[2];
    pt_step_summary *steps = bad->steps;
    bad->steps = NULL;
    pt_diff_run b, a;
    pt_diff_run_from_summaries(&b, "before", PT_RUN_TRACES, healthy.workers, healthy.n);
    pt_diff_run_from_summaries(&a, "after", PT_RUN_TRACES, hostile.workers, hostile.n);
    assert_int_equal(b.refused, 0);
    assert_int_equal(a.refused, 1);
    assert_int_equal(a.worker_count, 3);
    for (size_t w = 0; w < a.worker_count; w++)
        assert_ptr_not_equal(a.workers[w], bad);
    assert_int_equal(a.warning_count, 1);
    assert_non_null(strstr(a.warnings[0], "(rank 2): invalid summary, not compared: 3 steps are counted but none is "
                                          "there"));
    pt_json *d = pt_diff(&b, &a, "2026-01-01T00:00:00Z");
    assert_int_equal(pt_json_get_number(pt_json_get(d, "after"), "workers", 0), 3);
    assert_int_equal(pt_json_get_number(pt_json_get(d, "before"), "workers", 0), 4);
    assert_true(has_warning(d, "AFTER: ", "(rank 2): invalid summary, not compared"));
    assert_nothing_changed(d); /* the same seed: the three left are the healthy job's */
    pt_json_free(d);
    pt_diff_run_free(&b);
    pt_diff_run_free(&a);
    bad->steps = steps;
    free_job(&healthy);
    free_job(&hostile);
}

/* A report's workers are rebuilt, then held to the same rules: parts beyond their step
 * by more than the report's rounding are refused (compute, 50 ms in a 10 ms step);
 * within it (6 significant digits), the worker is kept and its parts fitted. A function
 * the report names twice for a worker (its name twice in a stack's shares, as a report of
 * workers that share a name has it) is rebuilt once, the first standing. The refused
 * worker's record goes with it, and the kept worker's follows it to its new index. */
static void test_invalid_report_workers_are_refused(void **state)
{
    (void)state;
    const char *text = "{\"report_version\": 1, \"workers\": ["
                       "{\"name\": \"liar\", \"rank\": 1, \"step_time_ms\": 10, \"steps\": [{\"ms\": 10,"
                       " \"compute_ms\": 50, \"idle_ms\": 1}]},"
                       "{\"name\": \"ok\", \"rank\": 0, \"step_time_ms\": 10, \"steps\": [{\"ms\": 10,"
                       " \"compute_ms\": 9.00005, \"idle_ms\": 1}]}],"
                       " \"Python functions\": {\"a.py: f\": {\"liar\": 0.5, \"ok\": 0.2, \"ok\": 0.3}}}";
    pt_error err = {{0}};
    pt_json *doc = pt_json_parse(text, strlen(text), 64, &err);
    assert_non_null(doc);
    pt_diff_run run;
    assert_int_equal(pt_diff_run_from_report(&run, "r.json", doc, NULL, &err), 0);
    assert_int_equal(run.worker_count, 1);
    assert_int_equal(run.refused, 1);
    assert_string_equal(run.workers[0]->name, "ok");
    const pt_step_summary *st = &run.workers[0]->steps[0];
    assert_int_equal(st->exposed_ns[PT_CLASS_COMPUTE] + st->idle_ns, st->dur_ns);
    assert_int_equal(run.function_count, 1);
    assert_int_equal(run.functions[0].count, 1);
    assert_int_equal(run.record_count, 1);
    assert_int_equal(run.records[0].worker, 0);
    assert_int_equal(run.records[0].exposed_ns, 2000000);
    assert_non_null(strstr(run.warnings[0], "liar (rank 1): invalid summary, not compared: "));
    assert_non_null(strstr(run.warnings[0], "the busy compute time is 50000000 ns, outside 0 to 10000000 ns"));
    pt_diff_run_free(&run);
}

static void test_different_sizes_compare_median_workers(void **state)
{
    (void)state;
    job eight = make_job(PT_FAULT_NONE, 1, 8, 3), four = make_job(PT_FAULT_SLOW_GPU, 1, 4, 3);
    pt_json *d = diff_jobs(&eight, &four);
    assert_string_equal(pt_json_get_string(d, "comparison", ""), "median worker");
    const pt_json *fns = pt_json_get(d, "functions");
    for (size_t i = 0; i < fns->count; i++)
        assert_int_equal(pt_json_get(fns->items[i], "ranks")->count, 0);
    /* One slow rank of four: the median worker waits for it in collectives. The jobs'
     * sizes differ (8 and 4), which the verdict names first as the cause (issue 17.15). */
    assert_string_equal(change_of(d), "slower");
    assert_string_equal(pt_json_get_string(cause_of(d), "class", ""), "environment");
    const char *sentence = pt_json_get_string(pt_json_get(d, "verdict"), "sentence", "");
    assert_non_null(strstr(sentence, "The runs ran on different setups (world size 8 \xe2\x86\x92 4)"));
    assert_non_null(strstr(sentence, "Communication time grew by"));
    assert_string_equal(pt_json_get_string(cause_of(d), "function", ""), "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
    pt_json_free(d);
    free_job(&eight);
    free_job(&four);
}

static void test_one_step_says_noise_is_unknown(void **state)
{
    (void)state;
    job a = make_job(PT_FAULT_NONE, 1, 8, 1), b = make_job(PT_FAULT_NONE, 2, 8, 1);
    pt_json *d = diff_jobs(&a, &b);
    assert_nothing_changed(d);
    const pt_json *notes = pt_json_get(d, "notes");
    bool said = false;
    for (size_t i = 0; i < notes->count; i++)
        said |= strstr(notes->items[i]->string, "noise is unknown") != NULL;
    assert_true(said);
    pt_json_free(d);
    free_job(&a);
    free_job(&b);
}

/* Two slow GPUs (ranks 1 and 6 of 8): both named, and only they. */
static void test_two_slow_gpus_are_both_named(void **state)
{
    (void)state;
    job healthy = make_job(PT_FAULT_NONE, 1, 8, 3), slow = make_job(PT_FAULT_TWO_SLOW, 1, 8, 3);
    pt_json *d = diff_jobs(&healthy, &slow);
    assert_string_equal(change_of(d), "slower");
    const char *sentence = pt_json_get_string(pt_json_get(d, "verdict"), "sentence", "");
    assert_non_null(strstr(sentence, "Ranks 1 and 6: GPU compute time grew by "));
    assert_non_null(strstr(sentence, "wait for them in collectives"));
    const pt_json *ranks = pt_json_get(cause_of(d), "ranks");
    assert_int_equal(ranks->count, 2);
    assert_int_equal(ranks->items[0]->integer + ranks->items[1]->integer, 7);
    assert_int_equal(ranks->items[0]->integer * ranks->items[1]->integer, 6);
    pt_json_free(d);
    free_job(&healthy);
    free_job(&slow);
}

static bool has_note(const pt_json *d, const char *text)
{
    const pt_json *notes = pt_json_get(d, "notes");
    for (size_t i = 0; notes && i < notes->count; i++)
        if (strstr(notes->items[i]->string, text))
            return true;
    return false;
}

/* What the notes say about runs of different sizes, with the counts and their plurals. */
static void test_notes_on_run_sizes(void **state)
{
    (void)state;
    static const struct {
        int before, after;
        const char *says;
    } cases[] = {
        {1, 4, "BEFORE has 1 worker and AFTER 4: figures are the median worker's (per-worker medians), not rank by rank."},
        {2, 4, "BEFORE has 2 workers and AFTER 4: figures are the median worker's"},
        {8, 4, "BEFORE has 8 workers and AFTER 4: figures are the median worker's"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        job a = make_job(PT_FAULT_NONE, 1, cases[i].before, 3), b = make_job(PT_FAULT_NONE, 2, cases[i].after, 3);
        pt_json *d = diff_jobs(&a, &b);
        if (!has_note(d, cases[i].says))
            fail_msg("%d -> %d workers: no note \"%s\"", cases[i].before, cases[i].after, cases[i].says);
        char sizes[128];
        snprintf(sizes, sizeof sizes, "The runs come from jobs of different sizes (world size %d and %d).",
                 cases[i].before, cases[i].after);
        assert_true(has_note(d, sizes));
        pt_json_free(d);
        free_job(&a);
        free_job(&b);
    }
}

/* Each changed function's line ends with its name: whole up to 90 characters, else its
 * first 87 and "..." (a kernel's template arguments run to hundreds). */
static void assert_names_shown_whole_or_cut(const pt_json *d, const pt_buf *text)
{
    const pt_json *fns = pt_json_get(d, "functions");
    bool cut_one = false;
    for (size_t i = 0; fns && i < fns->count && i < 3; i++) {
        const char *name = pt_json_get_string(fns->items[i], "name", "");
        char line_end[128];
        size_t n = strlen(name);
        if (n <= 90)
            snprintf(line_end, sizeof line_end, " %s\n", name);
        else
            snprintf(line_end, sizeof line_end, " %.87s...\n", name);
        cut_one |= n > 90;
        if (!strstr(text->data, line_end))
            fail_msg("function %zu is not shown as \"%s\" in:\n%s", i, line_end, text->data);
    }
    assert_true(cut_one); /* the slow GPU's flash kernel has a long name: the cut is exercised */
}

/* The terminal text's function list: "no change" with the count compared when nothing
 * moved, the list with its counts when something did. */
static void test_text_lists_functions_only_when_they_changed(void **state)
{
    (void)state;
    job a = make_job(PT_FAULT_NONE, 1, 8, 3), b = make_job(PT_FAULT_NONE, 2, 8, 3);
    pt_json *d = diff_jobs(&a, &b);
    assert_nothing_changed(d);
    double compared = pt_json_get_number(d, "functions_compared", 0);
    assert_true(compared > 10);
    pt_buf text = PT_BUF_INIT;
    pt_diff_render_text(d, &text);
    char want[160];
    snprintf(want, sizeof want, "\nNo function's time per step changed beyond noise (%g compared).\n", compared);
    if (!strstr(text.data, want))
        fail_msg("no \"%s\" in:\n%s", want, text.data);
    assert_null(strstr(text.data, "Functions whose time per step changed most"));
    pt_buf_free(&text);
    pt_json_free(d);
    free_job(&b);

    b = make_job(PT_FAULT_SLOW_GPU, 1, 8, 3);
    d = diff_jobs(&a, &b);
    double changed = pt_json_get_number(d, "functions_changed", 0);
    assert_true(changed >= 1);
    pt_diff_render_text(d, &text);
    snprintf(want, sizeof want, "\nFunctions whose time per step changed most (%g of %g changed; exposed ms per step):\n",
             changed, pt_json_get_number(d, "functions_compared", 0));
    if (!strstr(text.data, want))
        fail_msg("no \"%s\" in:\n%s", want, text.data);
    assert_null(strstr(text.data, "No function's time per step changed"));
    assert_names_shown_whole_or_cut(d, &text);
    pt_buf_free(&text);
    pt_json_free(d);
    free_job(&a);
    free_job(&b);
}

static int by_value(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

/* The median of the whole list, written out and sorted: count given values and n - count
 * copies of c. */
static double median_written_out(const double *given, size_t count, size_t n, double c)
{
    if (n == 0)
        return 0;
    double *all = calloc(n, sizeof *all);
    for (size_t i = 0; i < n; i++)
        all[i] = i < count ? given[i] : c;
    qsort(all, n, sizeof *all, by_value);
    double median = n % 2 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
    free(all);
    return median;
}

/* pt_median_with (a function's median over the workers that have it, the others 0)
 * against the whole list sorted: every split of n up to 13 between given values and
 * copies of c, with c below, among, equal to some of, and above the values, so the
 * median's two middle values fall on each edge of the three runs (below c, at c, above). */
static void test_median_with_at_bounds(void **state)
{
    (void)state;
    assert_true(pt_median_with(NULL, 0, 0, 5) == 0);
    static const double given[] = {3, -1, 7, 3, 0, 5, -4, 3, 11};
    static const double cs[] = {-10, -4, -1, 0, 2, 3, 4, 11, 100};
    size_t checked = 0;
    for (size_t n = 1; n <= 13; n++)
        for (size_t count = 0; count <= n && count <= PT_ARRAY_LEN(given); count++)
            for (size_t i = 0; i < PT_ARRAY_LEN(cs); i++) {
                double v[PT_ARRAY_LEN(given)];
                memcpy(v, given, count * sizeof *v);
                double want = median_written_out(given, count, n, cs[i]);
                double got = pt_median_with(v, count, n, cs[i]);
                if (got != want)
                    fail_msg("n %zu, %zu given, c %g: %g, not %g", n, count, cs[i], got, want);
                checked++;
            }
    assert_true(checked > 700);
}

static pt_json *parse_report(const char *text)
{
    pt_error err = {{0}};
    pt_json *doc = pt_json_parse(text, strlen(text), 64, &err);
    assert_non_null(doc);
    return doc;
}

/* A report of `workers` workers that ran memory operations (1 ms of a 9 ms step) and
 * `functions` memory operations with a job-wide ratio of 1, compact, every number one
 * digit, and a string of padding making it `bytes` long: its text is exactly the bytes
 * the rebuild counts (json_bytes). */
static char *budget_report(size_t workers, size_t functions, size_t bytes)
{
    pt_buf t = PT_BUF_INIT;
    pt_buf_puts(&t, "{\"report_version\":1,\"workers\":[");
    for (size_t w = 0; w < workers; w++)
        pt_buf_printf(&t, "%s{\"name\":\"w%zu\",\"step_time_ms\":9,\"breakdown\":{\"memory_ms\":1}}", w ? "," : "", w);
    pt_buf_puts(&t, "],\"GPU memory operations\":{");
    for (size_t f = 0; f < functions; f++)
        pt_buf_printf(&t, "%s\"m%zu\":{\"avg bottleneck ratio (in [0,1])\":1}", f ? "," : "", f);
    pt_buf_puts(&t, "},\"pad\":\"");
    size_t closing = 2;
    assert_true(t.len + closing <= bytes);
    while (t.len + closing < bytes)
        pt_buf_putc(&t, 'x');
    pt_buf_puts(&t, "\"}");
    assert_int_equal(t.len, bytes);
    return t.data;
}

static size_t unpadded_bytes(size_t workers, size_t functions)
{
    pt_buf t = PT_BUF_INIT;
    pt_buf_puts(&t, "{\"report_version\":1,\"workers\":[");
    for (size_t w = 0; w < workers; w++)
        pt_buf_printf(&t, "%s{\"name\":\"w%zu\",\"step_time_ms\":9,\"breakdown\":{\"memory_ms\":1}}", w ? "," : "", w);
    pt_buf_puts(&t, "],\"GPU memory operations\":{");
    for (size_t f = 0; f < functions; f++)
        pt_buf_printf(&t, "%s\"m%zu\":{\"avg bottleneck ratio (in [0,1])\":1}", f ? "," : "", f);
    pt_buf_puts(&t, "},\"pad\":\"\"}");
    size_t n = t.len;
    pt_buf_free(&t);
    return n;
}

/* The run of a budget_report of that many bytes: the functions it keeps, and whether it
 * warned that the others are not compared (with their count and the report's bytes). */
static size_t kept_of(size_t workers, size_t functions, size_t bytes, bool *warned, bool *complete)
{
    char *text = budget_report(workers, functions, bytes);
    pt_diff_run run;
    pt_error err = {{0}};
    assert_int_equal(pt_diff_run_from_report(&run, "r.json", parse_report(text), NULL, &err), 0);
    free(text);
    assert_int_equal(run.worker_count, workers);
    size_t kept = run.function_count;
    for (size_t i = 0; i < kept; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%zu", i); /* the first listed are the ones kept */
        assert_string_equal(run.functions[i].name, name);
        assert_true(run.functions[i].job_ratio == 1);
        assert_int_equal(run.functions[i].count, 0);
    }
    char want[160];
    snprintf(want, sizeof want, "r.json: %zu function(s) with a job-wide ratio are not compared", functions - kept);
    char bytes_text[64];
    snprintf(bytes_text, sizeof bytes_text, "per byte of the report (%zu bytes)", bytes);
    *warned = false;
    for (size_t i = 0; i < run.warning_count; i++)
        *warned |= strstr(run.warnings[i], want) && strstr(run.warnings[i], bytes_text);
    *complete = run.complete[PT_CLASS_MEMORY];
    pt_diff_run_free(&run);
    return kept;
}

/* A job-wide ratio costs the comparison a value per worker that ran its class (here all
 * 400), and a report may ask for PT_REPORT_JOB_VALUES_PER_BYTE values per byte it has, so
 * a function costs it per = 400 / that bytes: with k x per - 1 bytes it keeps k - 1 of
 * 400 functions, with k x per and k x per + 1 bytes k, in the order listed, and says how
 * many it left out; its memory operations are then not complete. A report whose bytes pay
 * for exactly all its functions keeps all and says nothing; one byte fewer, one fewer. */
static void test_job_wide_ratios_cost_values_per_byte(void **state)
{
    (void)state;
    const size_t workers = 400, per = workers / PT_REPORT_JOB_VALUES_PER_BYTE;
    assert_int_equal(workers % PT_REPORT_JOB_VALUES_PER_BYTE, 0);
    size_t functions = 400, k = unpadded_bytes(workers, functions) / per + 1;
    assert_true(k + 1 < functions); /* the bound is reached in every case */
    bool warned, complete;
    assert_int_equal(kept_of(workers, functions, k * per - 1, &warned, &complete), k - 1);
    assert_true(warned && !complete);
    assert_int_equal(kept_of(workers, functions, k * per, &warned, &complete), k);
    assert_true(warned && !complete);
    assert_int_equal(kept_of(workers, functions, k * per + 1, &warned, &complete), k);
    assert_true(warned && !complete);

    functions = 200;
    assert_true(unpadded_bytes(workers, functions) <= functions * per);
    assert_int_equal(kept_of(workers, functions, functions * per, &warned, &complete), functions);
    assert_true(!warned && complete);
    assert_int_equal(kept_of(workers, functions, functions * per - 1, &warned, &complete), functions - 1);
    assert_true(warned && !complete);
}

static const pt_json *listed_named(const pt_json *d, const char *list, const char *name)
{
    const pt_json *l = pt_json_get(d, list);
    for (size_t i = 0; l && i < l->count; i++)
        if (strcmp(pt_json_get_string(l->items[i], "name", ""), name) == 0)
            return l->items[i];
    return NULL;
}

/* Who a report's job-wide ratio is: every worker that ran the class and that the listing
 * does not name; a named worker has its own (w1), none when its own is 0 (w2), and its
 * own even without time in the class (w3). A ratio above 1 is the whole window. A listing
 * that gives nobody a value does not stand, a later listing of the name does; of two
 * that do, the first. */
static void test_job_wide_ratio_is_every_unnamed_workers(void **state)
{
    (void)state;
    const char *before =
        "{\"report_version\":1,\"workers\":["
        "{\"name\":\"w0\",\"rank\":0,\"step_time_ms\":10,\"breakdown\":{\"memory_ms\":2,\"compute_ms\":8}},"
        "{\"name\":\"w1\",\"rank\":1,\"step_time_ms\":10,\"breakdown\":{\"memory_ms\":2,\"compute_ms\":8}},"
        "{\"name\":\"w2\",\"rank\":2,\"step_time_ms\":10,\"breakdown\":{\"memory_ms\":2,\"compute_ms\":8}},"
        "{\"name\":\"w3\",\"rank\":3,\"step_time_ms\":10,\"breakdown\":{\"compute_ms\":8}}],"
        "\"GPU memory operations\":{"
        "\"m\":{\"avg bottleneck ratio (in [0,1])\":0.1,\"abnormal_workers\":{\"w1\":0.5,\"w2\":0,\"w3\":0.2}},"
        "\"big\":{\"avg bottleneck ratio (in [0,1])\":1.5},"
        "\"late\":{\"avg bottleneck ratio (in [0,1])\":0},"
        "\"late\":{\"avg bottleneck ratio (in [0,1])\":0.2},"
        "\"twice\":{\"avg bottleneck ratio (in [0,1])\":0.3},"
        "\"twice\":{\"avg bottleneck ratio (in [0,1])\":0.4}}}";
    const char *after = "{\"report_version\":1,\"workers\":["
                        "{\"name\":\"w0\",\"rank\":0,\"step_time_ms\":10,\"breakdown\":{\"compute_ms\":8}},"
                        "{\"name\":\"w1\",\"rank\":1,\"step_time_ms\":10,\"breakdown\":{\"compute_ms\":8}},"
                        "{\"name\":\"w2\",\"rank\":2,\"step_time_ms\":10,\"breakdown\":{\"compute_ms\":8}},"
                        "{\"name\":\"w3\",\"rank\":3,\"step_time_ms\":10,\"breakdown\":{\"compute_ms\":8}}]}";
    pt_diff_run b, a;
    pt_error err = {{0}};
    assert_int_equal(pt_diff_run_from_report(&b, "b.json", parse_report(before), NULL, &err), 0);
    assert_int_equal(pt_diff_run_from_report(&a, "a.json", parse_report(after), NULL, &err), 0);
    assert_int_equal(b.worker_count, 4);
    assert_int_equal(b.function_count, 4);
    const pt_run_function *m = &b.functions[0], *big = &b.functions[1];
    assert_string_equal(m->name, "m");
    assert_int_equal(m->count, 3);
    assert_string_equal(b.functions[2].name, "late");
    assert_true(b.functions[2].job_ratio == 0.2);
    assert_string_equal(b.functions[3].name, "twice");
    assert_true(b.functions[3].job_ratio == 0.3);
    for (size_t w = 0; w < 4; w++)
        assert_int_equal(b.workers[w]->window_ns, 10000000);
    assert_int_equal(pt_run_job_exposed_ns(m, b.workers[0]), 1000000);
    assert_int_equal(pt_run_job_exposed_ns(m, b.workers[3]), PT_RUN_NO_RECORD); /* no memory time */
    assert_int_equal(pt_run_job_exposed_ns(big, b.workers[0]), 10000000);
    int64_t own[4] = {-2, -2, -2, -2};
    for (size_t k = m->first; k < m->first + m->count; k++)
        own[b.records[k].worker] = b.records[k].exposed_ns;
    assert_int_equal(own[0], -2); /* not named: the job's */
    assert_int_equal(own[1], 5000000);
    assert_int_equal(own[2], PT_RUN_NO_RECORD);
    assert_int_equal(own[3], 2000000);

    pt_json *d = pt_diff(&b, &a, "2026-01-01T00:00:00Z");
    const pt_json *removed = listed_named(d, "removed", "m");
    assert_non_null(removed);
    assert_int_equal(pt_json_get_number(removed, "before_workers", 0), 3); /* w0, w1, w3 */
    assert_int_equal(pt_json_get_number(listed_named(d, "removed", "big"), "before_workers", 0), 3);
    assert_int_equal(pt_json_get_number(d, "removed_count", 0), 4);
    pt_json_free(d);
    pt_diff_run_free(&b);
    pt_diff_run_free(&a);
}

/* A report of one worker with these findings (JSON array text). */
static pt_diff_run findings_run(const char *label, const char *findings)
{
    pt_buf t = PT_BUF_INIT;
    pt_buf_printf(&t,
                  "{\"report_version\":1,\"workers\":[{\"name\":\"w\",\"rank\":0,\"step_time_ms\":10,"
                  "\"breakdown\":{\"compute_ms\":9}}],\"diagnosis\":{\"verdict\":\"v\",\"findings\":%s}}",
                  findings);
    pt_diff_run run;
    pt_error err = {{0}};
    assert_int_equal(pt_diff_run_from_report(&run, label, parse_report(t.data), NULL, &err), 0);
    pt_buf_free(&t);
    return run;
}

/* Findings are matched by category and function, the first of a run's standing: "a"/"f"
 * persists (its impact before is the first's), "a"/"bc" and "ab"/"c" are not one another
 * (the key keeps the two apart), so one is resolved and the other new. */
static void test_findings_match_by_category_and_function(void **state)
{
    (void)state;
    pt_diff_run b = findings_run("b", "[{\"category\":\"a\",\"function\":\"f\",\"impact\":0.1},"
                                      "{\"category\":\"a\",\"function\":\"f\",\"impact\":0.2},"
                                      "{\"category\":\"a\",\"function\":\"bc\"}]");
    pt_diff_run a = findings_run("a", "[{\"category\":\"a\",\"function\":\"f\",\"impact\":0.3},"
                                      "{\"category\":\"ab\",\"function\":\"c\"}]");
    pt_json *d = pt_diff(&b, &a, "2026-01-01T00:00:00Z");
    const pt_json *f = pt_json_get(d, "findings");
    const pt_json *persisting = pt_json_get(f, "persisting"), *fresh = pt_json_get(f, "new"),
                  *resolved = pt_json_get(f, "resolved");
    assert_int_equal(persisting->count, 1);
    assert_true(pt_json_get_number(persisting->items[0], "impact_before", 0) == 0.1);
    assert_true(pt_json_get_number(persisting->items[0], "impact", 0) == 0.3);
    assert_int_equal(fresh->count, 1);
    assert_string_equal(pt_json_get_string(fresh->items[0], "category", ""), "ab");
    assert_int_equal(resolved->count, 1);
    assert_string_equal(pt_json_get_string(resolved->items[0], "function", ""), "bc");
    pt_json_free(d);
    pt_diff_run_free(&b);
    pt_diff_run_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_lists_functions_only_when_they_changed),
        cmocka_unit_test(test_notes_on_run_sizes),
        cmocka_unit_test(test_two_slow_gpus_are_both_named),
        cmocka_unit_test(test_job_against_itself_is_unchanged),
        cmocka_unit_test(test_another_healthy_seed_is_unchanged),
        cmocka_unit_test(test_slow_gpu_names_the_rank_and_kernel),
        cmocka_unit_test(test_slow_dataloader_names_the_stack),
        cmocka_unit_test(test_common_memcpy_is_added_on_every_worker),
        cmocka_unit_test(test_hang_leads_the_verdict),
        cmocka_unit_test(test_reports_find_the_same_cause),
        cmocka_unit_test(test_bounded_report_run_says_what_it_compares),
        cmocka_unit_test(test_bounded_report_run_reads_its_parts),
        cmocka_unit_test(test_parts_not_read_are_named_then_counted),
        cmocka_unit_test(test_not_a_report_is_refused),
        cmocka_unit_test(test_invalid_workers_are_refused),
        cmocka_unit_test(test_invalid_report_workers_are_refused),
        cmocka_unit_test(test_different_sizes_compare_median_workers),
        cmocka_unit_test(test_one_step_says_noise_is_unknown),
        cmocka_unit_test(test_median_with_at_bounds),
        cmocka_unit_test(test_job_wide_ratios_cost_values_per_byte),
        cmocka_unit_test(test_job_wide_ratio_is_every_unnamed_workers),
        cmocka_unit_test(test_findings_match_by_category_and_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
