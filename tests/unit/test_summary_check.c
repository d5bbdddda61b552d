/* Hostile summaries (issue 15, items 1 and 10): every rule of pt_summary_check refused
 * with its message, at both doors (the decoder, and pt_diagnose's admission), while the
 * other workers are analysed as if the bad one were absent; valid summaries pass
 * unchanged, bit for bit; and the analysis is free of undefined behaviour for any
 * summary at the edge of what the rules admit (this runs under ASan+UBSan).
 *
 *   test_summary_check --write-regressions DIR
 * writes the crashing inputs of fuzz/regressions/summary/ (the repeated metric that
 * overflowed the hardware section, INT64_MAX times, a NUL inside a name) into DIR. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "diagnose/analysis.h"
#include "diagnose/diagnose.h"
#include "report/report.h"
#include "summarize/summary_io.h"
#include "synth/synth.h"

#define WORKERS 4
#define BAD_RANK 2
#define FIXED_TIME "2026-01-01T00:00:00Z"

/* ------------------------------------------------------------ valid workers */

static pt_buf encoded[WORKERS]; /* the valid workers, kept encoded: each test decodes fresh copies */

static void add_metric(pt_worker_summary *s, const char *name, double mean)
{
    s->metrics = pt_xrealloc(s->metrics, (s->metric_count + 1) * sizeof *s->metrics);
    pt_metric_summary *m = &s->metrics[s->metric_count++];
    memset(m, 0, sizeof *m);
    m->name = pt_xstrdup(name);
    m->samples = 40;
    m->mean = mean, m->min = mean - 1, m->max = mean + 1;
    m->points = 3;
    for (size_t k = 0; k < m->points; k++)
        m->series_ms[k] = (float)(10 * k), m->series_value[k] = (float)(mean + (double)k - 1);
}

/* A synthetic 4-worker job of 3 steps (functions carry per-step values), with hardware
 * metrics as a collector samples them in place of the synth's own (its links' counters):
 * the rules below change the first of them. */
static void make_valid_workers(void)
{
    if (encoded[0].len)
        return;
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = WORKERS, job.steps = 3, job.layers = 1;
    pt_error err = {{0}};
    pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
    assert_non_null(plan);
    for (int r = 0; r < WORKERS; r++) {
        pt_worker_summary *s = pt_synth_plan_summary(plan, r, &err);
        assert_non_null(s);
        for (size_t i = 0; i < s->metric_count; i++)
            free(s->metrics[i].name);
        s->metric_count = 0;
        add_metric(s, "gpu0.sm_active_pct", 80 + r);
        add_metric(s, "gpu0.sm_clock_mhz", 1980 - r);
        add_metric(s, "host.cpu_util_pct", 30 + r);
        pt_summary_encode(s, &encoded[r]);
        pt_summary_free(s);
    }
    pt_synth_plan_free(plan);
}

static pt_worker_summary *valid_worker(int rank)
{
    make_valid_workers();
    pt_error err = {{0}};
    pt_worker_summary *s = pt_summary_decode(encoded[rank].data, encoded[rank].len, &err);
    if (!s)
        fail_msg("a valid worker does not decode: %s", err.message);
    return s;
}

static void free_workers(pt_worker_summary **w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pt_summary_free(w[i]);
}

static pt_json *diagnose(pt_worker_summary **w, size_t n)
{
    pt_job_input job = {w, n, -1, NULL, 0, NULL, NULL, 0, FIXED_TIME};
    return pt_diagnose(&job);
}

static bool has_warning(const pt_json *report, const char *a, const char *b)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    for (size_t i = 0; warnings && i < warnings->count; i++)
        if (strstr(warnings->items[i]->string, a) && (!b || strstr(warnings->items[i]->string, b)))
            return true;
    return false;
}

static const char *status_of_rank(const pt_json *report, int rank)
{
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; workers && i < workers->count; i++)
        if (pt_json_get_number(workers->items[i], "rank", -2) == rank)
            return pt_json_get_string(workers->items[i], "status", "");
    return "(absent)";
}

static char *section_text(const pt_json *report, const char *section)
{
    pt_buf b = PT_BUF_INIT;
    pt_json_write(&b, pt_json_get(report, section), -1);
    return pt_buf_take(&b);
}

/* ------------------------------------------------------------ hostile mutations */

/* A copy of metric i appended (i is an index: the array moves). */
static pt_metric_summary *push_metric(pt_worker_summary *s, size_t i)
{
    s->metrics = pt_xrealloc(s->metrics, (s->metric_count + 1) * sizeof *s->metrics);
    pt_metric_summary *m = &s->metrics[s->metric_count++];
    *m = s->metrics[i];
    m->name = pt_xstrdup(s->metrics[i].name);
    return m;
}

/* The fuzzer's crash: one metric name eight times (the hardware section sized its array
 * by workers and wrote one entry per match: more copies than workers overflowed it). */
#define METRIC_COPIES 8
static void repeat_metric(pt_worker_summary *s)
{
    for (int i = 1; i < METRIC_COPIES; i++)
        push_metric(s, 0);
}

static void repeat_function(pt_worker_summary *s)
{
    s->functions = pt_xrealloc(s->functions, (s->function_count + 1) * sizeof *s->functions);
    pt_function_summary *f = &s->functions[s->function_count++]; /* a copy of the first */
    *f = s->functions[0];
    f->name = pt_xstrdup(f->name);
    f->group = f->group ? pt_xstrdup(f->group) : NULL;
    if (f->step_count) {
        f->step_exposed_ns = pt_xmalloc(f->step_count * sizeof *f->step_exposed_ns);
        memcpy(f->step_exposed_ns, s->functions[0].step_exposed_ns, f->step_count * sizeof *f->step_exposed_ns);
    }
}

/* What the issue saw: INT64_MAX everywhere gave a "normal" worker with 9.2e12 ms steps. */
static void int64_max_times(pt_worker_summary *s)
{
    s->window_ns = INT64_MAX;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        s->union_ns[c] = s->exposed_ns[c] = INT64_MAX;
    s->idle_ns = INT64_MAX;
    for (size_t i = 0; i < s->step_count; i++) {
        s->steps[i].dur_ns = INT64_MAX;
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            s->steps[i].exposed_ns[c] = INT64_MAX;
        s->steps[i].idle_ns = INT64_MAX;
    }
    for (size_t i = 0; i < s->function_count; i++)
        s->functions[i].total_ns = s->functions[i].exposed_ns = s->functions[i].median_ns = INT64_MAX;
}

static void empty_worker_name(pt_worker_summary *s) { s->name[0] = '\0'; }
static void empty_metric_name(pt_worker_summary *s) { s->metrics[1].name[0] = '\0'; }
static void huge_metric_name(pt_worker_summary *s)
{
    free(s->metrics[1].name);
    s->metrics[1].name = pt_xmalloc(PT_SUMMARY_MAX_NAME + 2);
    memset(s->metrics[1].name, 'm', PT_SUMMARY_MAX_NAME + 1);
    s->metrics[1].name[PT_SUMMARY_MAX_NAME + 1] = '\0';
}
static void repeat_step_number(pt_worker_summary *s) { s->steps[2].step = s->steps[1].step; }
static void negative_total(pt_worker_summary *s) { s->functions[1].total_ns = -5; }
static void negative_median(pt_worker_summary *s) { s->functions[1].median_ns = -1; }
static void huge_window(pt_worker_summary *s) { s->window_ns = INT64_MAX; }
static void idle_beyond_step(pt_worker_summary *s) { s->steps[0].idle_ns = s->steps[0].dur_ns + 1; }
static void step_parts_beyond_step(pt_worker_summary *s)
{
    s->steps[1].exposed_ns[PT_CLASS_COMPUTE] = s->steps[1].dur_ns;
    s->steps[1].idle_ns = s->steps[1].dur_ns;
}
static void window_parts_beyond_window(pt_worker_summary *s) { s->idle_ns = s->window_ns; }
static void busy_beyond_window(pt_worker_summary *s) { s->union_ns[PT_CLASS_MEMORY] = s->window_ns + 1; }
static void steps_out_of_order(pt_worker_summary *s)
{
    pt_step_summary first = s->steps[0];
    s->steps[0] = s->steps[1], s->steps[1] = first;
}
static void step_outside_window(pt_worker_summary *s) { s->steps[2].start_ns = s->window_ns; }
static void negative_step_number(pt_worker_summary *s) { s->steps[0].step = -3; }
static void world_size_zero(pt_worker_summary *s) { s->world_size = 0; }
static void world_size_huge(pt_worker_summary *s) { s->world_size = INT32_MAX; }
static void rank_beyond_world(pt_worker_summary *s) { s->rank = 5; }
static void rank_beyond_limit(pt_worker_summary *s) { s->rank = PT_MAX_WORLD_SIZE; }
static void nan_metric(pt_worker_summary *s) { s->metrics[0].mean = NAN; }
static void infinite_series(pt_worker_summary *s) { s->metrics[0].series_value[1] = INFINITY; }
static void metric_min_above_max(pt_worker_summary *s) { s->metrics[0].min = s->metrics[0].max + 1; }
static void metric_without_samples(pt_worker_summary *s) { s->metrics[0].samples = 0; }
static void series_back_in_time(pt_worker_summary *s) { s->metrics[0].series_ms[2] = -1; }
static void nan_throughput(pt_worker_summary *s) { s->functions[0].busbw_avg_gbps = NAN; }
static void negative_bytes(pt_worker_summary *s) { s->functions[0].bytes_avg = -1; }
static void mean_bytes_above_largest(pt_worker_summary *s)
{
    s->functions[0].bytes_max = 4e6;
    s->functions[0].bytes_avg = nextafter(4e6, INFINITY);
}
static void step_values_beyond_step(pt_worker_summary *s)
{
    for (size_t i = 0; i < s->function_count; i++)
        if (s->functions[i].cls == PT_CLASS_COMPUTE && s->functions[i].step_count) {
            s->functions[i].step_exposed_ns[0] = s->steps[0].dur_ns + 1;
            return;
        }
    fail_msg("no compute function with per-step values");
}
static void exposed_beyond_window(pt_worker_summary *s)
{
    for (size_t i = 0; i < s->function_count; i++)
        if (s->functions[i].cls == PT_CLASS_COMPUTE) {
            s->functions[i].exposed_ns = s->window_ns + 1;
            return;
        }
}
static void window_start_beyond_2116(pt_worker_summary *s) { s->window_start_ns = INT64_MAX; }
static void empty_window_with_steps(pt_worker_summary *s)
{
    s->window_ns = 0;
    memset(s->union_ns, 0, sizeof s->union_ns);
    memset(s->exposed_ns, 0, sizeof s->exposed_ns);
    s->idle_ns = 0;
}
static void events_beyond_int64(pt_worker_summary *s) { s->events = UINT64_MAX; }
static void pid_below_unknown(pt_worker_summary *s) { s->pid = -7; }
static void negative_stall(pt_worker_summary *s) { s->stall_ns = -1; }
static void too_many_metrics(pt_worker_summary *s)
{
    s->metrics = pt_xrealloc(s->metrics, (PT_SUMMARY_MAX_METRICS + 1) * sizeof *s->metrics);
    for (size_t i = s->metric_count; i <= PT_SUMMARY_MAX_METRICS; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%zu", i);
        s->metrics[i] = s->metrics[0];
        s->metrics[i].name = pt_xstrdup(name);
    }
    s->metric_count = PT_SUMMARY_MAX_METRICS + 1;
}
static void bad_class(pt_worker_summary *s) { s->functions[0].cls = (pt_class)PT_CLASS_COUNT; }
static void missing_function_name(pt_worker_summary *s)
{
    free(s->functions[0].name);
    s->functions[0].name = NULL;
}

/* The hang state: the valid worker's first process group and its calls. */
static pt_collective_group *group0(pt_worker_summary *s)
{
    if (!s->group_count || s->groups[0].call_count < 2)
        fail_msg("the valid worker has no process group with two calls");
    return &s->groups[0];
}
static void repeat_group(pt_worker_summary *s)
{
    s->groups = pt_xrealloc(s->groups, (s->group_count + 1) * sizeof *s->groups);
    pt_collective_group *g = &s->groups[s->group_count++];
    memset(g, 0, sizeof *g);
    g->name = pt_xstrdup(s->groups[0].name);
    g->size = -1;
}
static void calls_out_of_order(pt_worker_summary *s) { group0(s)->calls[1].seq = group0(s)->calls[0].seq; }
static void call_numbered_zero(pt_worker_summary *s) { group0(s)->calls[0].seq = 0; }
static void unknown_call_state(pt_worker_summary *s) { group0(s)->calls[0].state = (pt_call_state)9; }
static void error_on_completed_call(pt_worker_summary *s)
{
    group0(s)->calls[0].state = PT_CALL_COMPLETED;
    group0(s)->calls[0].error = pt_xstrdup("Connection reset by peer");
}
static void empty_call_op(pt_worker_summary *s) { group0(s)->calls[0].op[0] = '\0'; }
static void group_without_the_rank(pt_worker_summary *s)
{
    pt_collective_group *g = group0(s);
    g->runs = pt_xrealloc(g->runs, sizeof *g->runs);
    g->runs[0] = (pt_rank_run){s->rank == 0 ? 1 : 0, s->rank == 0 ? 1 : 0, 1};
    g->run_count = 1, g->size = 1;
}
static void group_beyond_the_world(pt_worker_summary *s)
{
    pt_collective_group *g = group0(s);
    g->runs = pt_xrealloc(g->runs, sizeof *g->runs);
    g->runs[0] = (pt_rank_run){0, s->world_size, 1};
    g->run_count = 1, g->size = s->world_size + 1;
}
static void run_off_its_stride(pt_worker_summary *s)
{
    pt_collective_group *g = group0(s);
    g->runs = pt_xrealloc(g->runs, sizeof *g->runs);
    g->runs[0] = (pt_rank_run){0, 3, 2};
    g->run_count = 1, g->size = 2;
}
static void group_size_unlike_its_ranks(pt_worker_summary *s) { group0(s)->size += 1; }
static void two_training_threads(pt_worker_summary *s)
{
    s->threads = pt_xrealloc(s->threads, (s->thread_count + 2) * sizeof *s->threads);
    for (int i = 0; i < 2; i++)
        s->threads[s->thread_count++] = (pt_thread_stack){pt_xstrdup("MainThread"), 7 + i, true, pt_xstrdup("a.py: f")};
}
static void negative_idle(pt_worker_summary *s) { s->hang_idle_ns = -2; }
static void too_many_groups(pt_worker_summary *s)
{
    s->groups = pt_xrealloc(s->groups, (PT_SUMMARY_MAX_GROUPS + 1) * sizeof *s->groups);
    for (size_t i = s->group_count; i <= PT_SUMMARY_MAX_GROUPS; i++) {
        char name[32];
        snprintf(name, sizeof name, "g%zu", i);
        memset(&s->groups[i], 0, sizeof s->groups[i]);
        s->groups[i].name = pt_xstrdup(name);
        s->groups[i].size = -1;
    }
    s->group_count = PT_SUMMARY_MAX_GROUPS + 1;
}
/* Sync points (version 3): the synthetic workers wait once a step, for the last bucket. */
static void sync_beyond_step(pt_worker_summary *s) { s->steps[0].syncs[0].end_ns = s->steps[0].dur_ns + 1; }
static void communication_as_work(pt_worker_summary *s) { s->steps[1].syncs[0].busy_ns[PT_CLASS_COMM] = 5; }
static void work_beyond_piece(pt_worker_summary *s)
{
    s->steps[1].syncs[0].busy_ns[PT_CLASS_PYTHON] = s->steps[1].syncs[0].end_ns;
}
static void syncs_without_flag(pt_worker_summary *s) { s->has_syncs = false; }
static void too_many_syncs(pt_worker_summary *s)
{
    pt_step_summary *st = &s->steps[0];
    st->syncs = pt_xrealloc(st->syncs, (PT_SUMMARY_MAX_SYNCS_PER_STEP + 1) * sizeof *st->syncs);
    for (size_t k = 0; k <= PT_SUMMARY_MAX_SYNCS_PER_STEP; k++)
        st->syncs[k] = (pt_sync_point){(int64_t)(k + 1), {0}};
    st->sync_count = PT_SUMMARY_MAX_SYNCS_PER_STEP + 1;
}
static void huge_caller(pt_worker_summary *s)
{
    for (size_t i = 0; i < s->function_count; i++)
        if (s->functions[i].cls == PT_CLASS_RUNTIME) {
            free(s->functions[i].caller);
            s->functions[i].caller = pt_xmalloc(PT_SUMMARY_MAX_NAME + 2);
            memset(s->functions[i].caller, 'x', PT_SUMMARY_MAX_NAME + 1);
            s->functions[i].caller[PT_SUMMARY_MAX_NAME + 1] = '\0';
            return;
        }
}

typedef struct hostile_case {
    const char *what;
    void (*mutate)(pt_worker_summary *s);
    const char *rule;   /* a part of the refusal's message */
    bool decoder_sees;  /* the encoded form reaches the rule (else the format cannot say it,
                           or the decoder refuses it earlier, with its own message) */
} hostile_case;

static const hostile_case cases[] = {
    {"repeated metric", repeat_metric, "metric \"gpu0.sm_active_pct\" appears twice", true},
    {"repeated function", repeat_function, "\" appears twice", true},
    {"INT64_MAX times", int64_max_times, "the profiled window is 9223372036854775807 ns", true},
    {"empty worker name", empty_worker_name, "the worker's name is empty", true},
    {"empty metric name", empty_metric_name, "a metric's name is empty", true},
    {"metric name over 1 MiB", huge_metric_name, "a metric's name is longer than 1048576 bytes", false},
    {"repeated step number", repeat_step_number, "appears twice", true},
    {"negative total", negative_total, "total time is -5 ns", true},
    {"negative median", negative_median, "median is -1 ns", true},
    {"window of INT64_MAX", huge_window, "the profiled window is 9223372036854775807 ns, outside 0 to 2592000000000000 ns",
     true},
    {"idle beyond the step", idle_beyond_step, "idle time is", true},
    {"step parts beyond the step", step_parts_beyond_step, "add up to", true},
    {"window parts beyond the window", window_parts_beyond_window, "the window's exposed and idle times add up to", true},
    {"busy beyond the window", busy_beyond_window, "the busy memory time is", true},
    {"steps out of order", steps_out_of_order, "which comes first", true},
    {"step outside the window", step_outside_window, "is not inside the window", true},
    {"negative step number", negative_step_number, "step number -3 is negative", true},
    {"world size 0", world_size_zero, "world size 0 is outside 1 to 1048576", true},
    {"world size INT32_MAX", world_size_huge, "world size 2147483647 is outside", true},
    {"rank beyond the world", rank_beyond_world, "rank 5 is not below its world size 4", true},
    {"rank beyond the limit", rank_beyond_limit, "rank 1048576 is outside -1 (unknown) to 1048575", true},
    {"NaN metric", nan_metric, "metric \"gpu0.sm_active_pct\"'s mean is not a finite number", true},
    {"infinite series value", infinite_series, "series value is not a finite number", true},
    {"metric min above max", metric_min_above_max, "outside its minimum", true},
    {"metric without samples", metric_without_samples, "has no samples", true},
    {"series back in time", series_back_in_time, "series time is negative", true},
    {"NaN bandwidth", nan_throughput, "bus bandwidth is not a finite number", true},
    {"negative bytes", negative_bytes, "mean bytes per call is negative", true},
    {"mean bytes above the largest call's", mean_bytes_above_largest, "above its largest call's", true},
    {"per-step value beyond the step", step_values_beyond_step, "exposed time in a step is", true},
    {"function exposed beyond the window", exposed_beyond_window, "exposed time is", true},
    {"window start beyond 2116", window_start_beyond_2116, "beyond the year 2116", true},
    {"empty window with steps", empty_window_with_steps, "the profiled window is empty but holds 3 steps", true},
    {"events beyond int64", events_beyond_int64, "the event count is 18446744073709551615, beyond int64", true},
    {"pid below -1", pid_below_unknown, "the pid is -7, below -1", true},
    {"negative stall", negative_stall, "the stall is -1 ns", true},
    {"4097 metrics", too_many_metrics, "4097 metrics, more than the 4096", false},
    {"unknown function class", bad_class, "a function's class (5)", false},
    {"function without a name", missing_function_name, "a function's name is missing", false},
    {"repeated process group", repeat_group, "process group \"0\" appears twice", true},
    {"calls out of order", calls_out_of_order, "calls are not in increasing order of their numbers", true},
    {"call numbered 0", call_numbered_zero, "has a call numbered 0, outside 1 to 2^53", true},
    {"unknown call state", unknown_call_state, "has a state (", true},
    {"error on a completed call", error_on_completed_call, "has an error but did not fail", true},
    {"empty collective operation", empty_call_op, "a collective's operation is empty", true},
    {"group without the worker's rank", group_without_the_rank, "does not list rank", true},
    {"group beyond the world", group_beyond_the_world, "not below the world size", true},
    {"run of ranks off its stride", run_off_its_stride, "that is not first <= last", true},
    {"group size unlike its ranks", group_size_unlike_its_ranks, "members but lists 4", true},
    {"two training threads", two_training_threads, "2 threads are marked as the training thread", true},
    {"time since the last step below -1", negative_idle, "the time since the last step (-2 ns)", true},
    {"257 process groups", too_many_groups, "257 process groups, more than the 256", false},
    {"sync point beyond its step", sync_beyond_step, "sync point 0 ends at", true},
    {"communication counted as work", communication_as_work, "communication work is 5 ns, outside 0 to 0 ns", false},
    {"work beyond its piece", work_beyond_piece, "work adds up to", true},
    {"sync points in a summary without them", syncs_without_flag, "sync points are given", false},
    {"17 sync points in a step", too_many_syncs, "17 sync points, more than 16", false},
    {"caller over 1 MiB", huge_caller, "a function's caller is longer than 1048576 bytes", false},
};

static void refused_by_check(const hostile_case *c, pt_worker_summary *s)
{
    pt_error err = {{0}};
    if (pt_summary_check(s, &err) == 0)
        fail_msg("%s: accepted", c->what);
    if (!strstr(err.message, c->rule))
        fail_msg("%s: refused as \"%s\", expected \"%s\"", c->what, err.message, c->rule);
}

static void refused_by_decoder(const hostile_case *c, const pt_worker_summary *s)
{
    pt_buf file = PT_BUF_INIT;
    pt_summary_encode(s, &file);
    pt_error err = {{0}};
    pt_worker_summary *d = pt_summary_decode(file.data, file.len, &err);
    pt_buf_free(&file);
    if (d) {
        pt_summary_free(d);
        fail_msg("%s: decoded", c->what);
    }
    char who[128], expected[256];
    pt_summary_describe(s, who, sizeof who);
    snprintf(expected, sizeof expected, "invalid summary of %s: ", who);
    if (!strstr(err.message, expected) || !strstr(err.message, c->rule))
        fail_msg("%s: the decoder said \"%s\", expected \"%s...%s\"", c->what, err.message, expected, c->rule);
}

/* 3 valid workers and the hostile one as rank 2: it is listed as failed with a warning
 * naming it (file and rank) and the rule; the others' sections are exactly those of a
 * job without it. */
static void refused_by_diagnosis(const hostile_case *c, pt_worker_summary *hostile, const pt_json *without)
{
    pt_worker_summary *w[WORKERS] = {valid_worker(0), valid_worker(1), hostile, valid_worker(3)};
    char who[128];
    pt_summary_describe(hostile, who, sizeof who);
    pt_json *report = diagnose(w, WORKERS);
    const pt_json *job = pt_json_get(report, "job");
    if (pt_json_get_number(job, "workers_analyzed", -1) != 3 || pt_json_get_number(job, "workers_failed", -1) != 1)
        fail_msg("%s: %g analysed, %g failed", c->what, pt_json_get_number(job, "workers_analyzed", -1),
                 pt_json_get_number(job, "workers_failed", -1));
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s: invalid summary, not analysed: ", who);
    if (!has_warning(report, prefix, c->rule))
        fail_msg("%s: no warning \"%s...%s\"", c->what, prefix, c->rule);
    for (int r = 0; r < WORKERS; r++)
        if (r != BAD_RANK && strcmp(status_of_rank(report, r), "normal") != 0)
            fail_msg("%s: rank %d is %s", c->what, r, status_of_rank(report, r));
    if (hostile->rank == BAD_RANK)
        assert_string_equal(status_of_rank(report, BAD_RANK), "error");
    static const char *const sections[] = {"GPU Compute", "Communication", "CUDA Runtime", "Python functions",
                                           "Hardware"};
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++) {
        char *with_it = section_text(report, sections[i]), *alone = section_text(without, sections[i]);
        if (strcmp(with_it, alone) != 0)
            fail_msg("%s: the %s section differs from the job without the hostile worker", c->what, sections[i]);
        free(with_it);
        free(alone);
    }
    pt_json_free(report);
    free_workers(w, WORKERS);
}

static pt_json *report_without_bad_rank(void)
{
    pt_worker_summary *w[3] = {valid_worker(0), valid_worker(1), valid_worker(3)};
    pt_json *report = diagnose(w, 3);
    free_workers(w, 3);
    return report;
}

static void test_each_rule_is_refused_with_its_message(void **state)
{
    (void)state;
    pt_json *without = report_without_bad_rank();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const hostile_case *c = &cases[i];
        pt_worker_summary *s = valid_worker(BAD_RANK);
        c->mutate(s);
        refused_by_check(c, s);
        if (c->decoder_sees)
            refused_by_decoder(c, s);
        refused_by_diagnosis(c, s, without); /* frees s */
    }
    pt_json_free(without);
}

/* The crash itself: the hardware section on workers that were never admitted (the
 * section must be safe on its own too), then the same job through pt_diagnose. */
static void test_repeated_metric_does_not_overflow(void **state)
{
    (void)state;
    pt_worker_summary *w[WORKERS];
    for (int r = 0; r < WORKERS; r++)
        w[r] = valid_worker(r);
    repeat_metric(w[BAD_RANK]);
    pt_analysis a;
    pt_analysis_init(&a, w, WORKERS);
    pt_json *hw = pt_section_hardware(&a, NULL);
    /* 11 means of gpu0.sm_active_pct (80, 81, 82 x8, 83): median 82, range 80..83. */
    const pt_json *range = pt_json_get(pt_json_get(pt_json_get(hw, "metrics"), "gpu0.sm_active_pct"), "min/median/max");
    assert_non_null(range);
    assert_int_equal(range->count, 3);
    assert_true(range->items[0]->number == 80 && range->items[1]->number == 82 && range->items[2]->number == 83);
    pt_json_free(hw);
    pt_analysis_free(&a);

    pt_json *report = diagnose(w, WORKERS);
    assert_true(has_warning(report, "node0_2_10002.json (rank 2): invalid summary, not analysed",
                            "metric \"gpu0.sm_active_pct\" appears twice"));
    range = pt_json_get(pt_json_get(pt_json_get(pt_json_get(report, "Hardware"), "metrics"), "gpu0.sm_active_pct"),
                        "min/median/max");
    assert_true(range->items[0]->number == 80 && range->items[1]->number == 81 && range->items[2]->number == 83);
    pt_json_free(report);
    free_workers(w, WORKERS);
}

/* Item 10: INT64_MAX values made a "normal" worker with 9.2e12 ms steps, no warning. */
static void test_int64_max_values_are_not_a_normal_worker(void **state)
{
    (void)state;
    pt_worker_summary *w[WORKERS];
    for (int r = 0; r < WORKERS; r++)
        w[r] = valid_worker(r);
    int64_max_times(w[BAD_RANK]);
    w[BAD_RANK]->window_start_ns = w[0]->window_start_ns; /* so the window's own bound is the rule broken */
    pt_json *report = diagnose(w, WORKERS);
    assert_string_equal(status_of_rank(report, BAD_RANK), "error");
    assert_true(has_warning(report, "node0_2_10002.json (rank 2): invalid summary", "the profiled window is "
                                                                                      "9223372036854775807 ns"));
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; i < workers->count; i++) {
        const pt_json *ms = pt_json_get(workers->items[i], "step_time_ms");
        assert_true(!ms || ms->type != PT_JSON_NUMBER || ms->number < 1e6);
    }
    pt_json_free(report);
    free_workers(w, WORKERS);
}

static void test_valid_summaries_pass_bit_for_bit(void **state)
{
    (void)state;
    pt_worker_summary *w[WORKERS];
    for (int r = 0; r < WORKERS; r++) {
        w[r] = valid_worker(r);
        pt_error err = {{0}};
        assert_int_equal(pt_summary_check(w[r], &err), 0);
        pt_buf again = PT_BUF_INIT;
        pt_summary_encode(w[r], &again);
        assert_int_equal(again.len, encoded[r].len);
        assert_memory_equal(again.data, encoded[r].data, again.len);
        pt_buf_free(&again);
    }
    /* A worker with no profile (a hang's, round.c) is valid too: window 0, nothing in it. */
    pt_worker_summary *hung = pt_summary_new();
    hung->name = pt_xstrdup("node0_3_10003.json");
    hung->rank = 3;
    hung->hang_step = 2;
    pt_error err = {{0}};
    assert_int_equal(pt_summary_check(hung, &err), 0);
    pt_summary_free(hung);

    pt_json *report = diagnose(w, WORKERS);
    const pt_json *job = pt_json_get(report, "job");
    assert_true(pt_json_get_number(job, "workers_analyzed", -1) == WORKERS);
    assert_true(pt_json_get_number(job, "workers_failed", -1) == 0);
    assert_false(has_warning(report, "invalid summary", NULL));
    pt_json_free(report);
    free_workers(w, WORKERS);
}

/* A NUL byte inside a string used to cut the name there (two names became one). */
static void test_nul_inside_a_string_is_refused(void **state)
{
    (void)state;
    pt_worker_summary *s = valid_worker(BAD_RANK);
    free(s->host);
    s->host = pt_xstrdup("node0Xevil");
    pt_buf file = PT_BUF_INIT;
    pt_summary_encode(s, &file);
    pt_summary_free(s);
    /* Decompress, put the NUL in, compress again. */
    size_t len = (size_t)ZSTD_getFrameContentSize(file.data + 24, file.len - 24);
    char *payload = pt_xmalloc(len);
    assert_int_equal(ZSTD_decompress(payload, len, file.data + 24, file.len - 24), len);
    char *x = memmem(payload, len, "node0Xevil", 10);
    assert_non_null(x);
    x[5] = '\0';
    pt_buf bad = PT_BUF_INIT;
    pt_buf_append(&bad, file.data, 24);
    pt_buf_reserve(&bad, ZSTD_compressBound(len));
    bad.len += ZSTD_compress(bad.data + 24, ZSTD_compressBound(len), payload, len, 1);
    pt_error err = {{0}};
    assert_null(pt_summary_decode(bad.data, bad.len, &err));
    assert_non_null(strstr(err.message, "a string holds a NUL byte"));
    free(payload);
    pt_buf_free(&file);
    pt_buf_free(&bad);
}

/* Every value at the edge of what the rules admit, on three workers beside a normal one:
 * the whole analysis and the report's text must run without undefined behaviour (signed
 * overflow, out-of-range conversions: UBSan aborts this test). */
static void at_the_bounds(pt_worker_summary *s, int sign)
{
    int64_t max = PT_SUMMARY_MAX_NS;
    s->window_ns = PT_SUMMARY_MAX_WINDOW_NS;
    s->window_start_ns = sign * ((INT64_C(1) << 62) - 1);
    int64_t part = s->window_ns / (PT_CLASS_COUNT + 1);
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        s->union_ns[c] = s->window_ns, s->exposed_ns[c] = part;
    s->idle_ns = s->window_ns - PT_CLASS_COUNT * part;
    s->events = INT64_MAX;
    s->pid = INT64_MAX;
    s->hang_step = INT64_MAX;
    s->stall_ns = max;
    s->world_size = PT_MAX_WORLD_SIZE;
    int64_t step_ns = s->window_ns / (int64_t)s->step_count;
    for (size_t i = 0; i < s->step_count; i++) {
        pt_step_summary *st = &s->steps[i];
        st->step = INT64_MAX - (int64_t)(s->step_count - i);
        st->start_ns = (int64_t)i * step_ns;
        st->dur_ns = step_ns;
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            st->exposed_ns[c] = step_ns / (PT_CLASS_COUNT + 1);
        st->idle_ns = step_ns - PT_CLASS_COUNT * (step_ns / (PT_CLASS_COUNT + 1));
    }
    for (size_t i = 0; i < s->function_count; i++) {
        pt_function_summary *f = &s->functions[i];
        f->count = INT64_MAX;
        f->total_ns = f->waiting_ns = f->median_ns = f->max_ns = max;
        f->exposed_ns = f->cls == PT_CLASS_PYTHON ? max : s->window_ns;
        f->throughput_avg_pct = f->throughput_std_pct = f->busbw_avg_gbps = 1e308;
        f->bytes_avg = f->bytes_max = 1e308; /* exactly the largest is accepted */
        for (size_t k = 0; k < f->step_count; k++)
            f->step_exposed_ns[k] = f->cls == PT_CLASS_PYTHON ? max : step_ns;
    }
    for (size_t i = 0; i < s->metric_count; i++) {
        pt_metric_summary *m = &s->metrics[i];
        m->samples = INT64_MAX;
        m->min = -1.7e308, m->max = 1.7e308, m->mean = sign * 1.7e308;
        for (size_t k = 0; k < m->points; k++)
            m->series_ms[k] = 3e38f, m->series_value[k] = -3e38f;
    }
    /* The hang state too: a group of every rank, calls numbered up to 2^53. */
    s->hang_idle_ns = s->hang_step_ns = max;
    for (size_t i = 0; i < s->group_count; i++) {
        pt_collective_group *g = &s->groups[i];
        g->runs = pt_xrealloc(g->runs, sizeof *g->runs);
        g->runs[0] = (pt_rank_run){0, PT_MAX_WORLD_SIZE - 1, 1};
        g->run_count = 1;
        g->size = PT_MAX_WORLD_SIZE;
        for (size_t k = 0; k < g->call_count; k++) {
            pt_collective_call *c = &g->calls[k];
            c->seq = PT_SUMMARY_MAX_SEQ - (int64_t)(g->call_count - 1 - k);
            c->count = c->age_ns = max;
        }
    }
}

static void test_analysis_is_defined_at_the_bounds(void **state)
{
    (void)state;
    pt_worker_summary *w[WORKERS];
    for (int r = 0; r < WORKERS; r++) {
        w[r] = valid_worker(r);
        if (r > 0)
            at_the_bounds(w[r], r == 2 ? -1 : 1);
        if (r == 3)
            w[r]->rank = PT_MAX_WORLD_SIZE - 1;
        pt_error err = {{0}};
        if (pt_summary_check(w[r], &err) != 0)
            fail_msg("rank %d at the bounds is refused: %s", r, err.message);
    }
    pt_json *report = diagnose(w, WORKERS);
    assert_true(pt_json_get_number(pt_json_get(report, "job"), "workers_analyzed", -1) == WORKERS);
    pt_buf text = PT_BUF_INIT;
    pt_json_write(&text, report, 2);
    pt_report_render_log(report, &text);
    pt_buf_free(&text);
    pt_json_free(report);
    free_workers(w, WORKERS);
}

/* ------------------------------------------------------------ regression inputs */

static void write_regression(const char *dir, const char *name, void (*mutate)(pt_worker_summary *s))
{
    pt_worker_summary *s = valid_worker(BAD_RANK);
    mutate(s);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pt_error err = {{0}};
    if (pt_summary_write_file(s, path, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    pt_summary_free(s);
}

static void int64_max_window(pt_worker_summary *s)
{
    int64_t start = s->window_start_ns;
    int64_max_times(s);
    s->window_start_ns = start;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-regressions") == 0) {
        write_regression(argv[2], "repeated-metric-overflows-hardware.ptsum", repeat_metric);
        write_regression(argv[2], "int64-max-times.ptsum", int64_max_window);
        write_regression(argv[2], "step-parts-beyond-the-step.ptsum", step_parts_beyond_step);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_summaries_pass_bit_for_bit),
        cmocka_unit_test(test_repeated_metric_does_not_overflow),
        cmocka_unit_test(test_int64_max_values_are_not_a_normal_worker),
        cmocka_unit_test(test_each_rule_is_refused_with_its_message),
        cmocka_unit_test(test_nul_inside_a_string_is_refused),
        cmocka_unit_test(test_analysis_is_defined_at_the_bounds),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int r = 0; r < WORKERS; r++)
        pt_buf_free(&encoded[r]);
    return rc;
}
