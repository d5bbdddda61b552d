/* The diagnosis on summaries built in code: the right worker, category and function come
 * first; healthy jobs are not flagged; common problems are all_workers; hangs name the
 * worker the others wait for; impacts are what the step model (diagnose/whatif.c) says a
 * fix saves, segment by segment between the job's sync points; graded jobs name the
 * worker that sets the step time first; extra runtime calls name their Python caller.
 * (The synthetic-trace fault suite in tests/engine checks the same end to end, from
 * traces, and whatif_truth.py checks impacts against true savings.) */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/diagnose.h"
#include "util/stats.h"

#define N 8
#define MS 1000000LL
#define STEP_MS 100

typedef struct extra {
    int64_t python_ms, compute_ms, memory_ms, comm_ms;
} extra;

static void add_fn(pt_worker_summary *s, pt_class cls, const char *name, int64_t exposed_ms_per_step)
{
    s->functions = realloc(s->functions, (s->function_count + 1) * sizeof *s->functions);
    pt_function_summary *f = &s->functions[s->function_count++];
    memset(f, 0, sizeof *f);
    f->cls = cls;
    f->name = strdup(name);
    f->group = cls == PT_CLASS_COMM ? strdup("nvlink ring") : NULL;
    f->count = 2;
    f->exposed_ns = f->total_ns = exposed_ms_per_step * MS * 2;
    f->median_ns = exposed_ms_per_step * MS;
    s->exposed_ns[cls] += f->exposed_ns;
    s->union_ns[cls] += f->total_ns;
}

/* A worker of a synchronous job: 2 steps of 100 ms; jitter of up to 1 ms. Extra work on
 * this worker shortens its communication wait by as much (it arrives later). */
static pt_worker_summary *worker(int rank, extra x, int jitter)
{
    pt_worker_summary *s = pt_summary_new();
    char name[64];
    snprintf(name, sizeof name, "node%d_%d_%d.json", rank / 8, rank % 8, 1000 + rank);
    s->name = strdup(name);
    s->rank = rank;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->world_size = N;
    s->window_ns = 2 * STEP_MS * MS;
    s->step_count = 2;
    s->steps = calloc(2, sizeof *s->steps);
    for (int i = 0; i < 2; i++)
        s->steps[i].step = 10 + i, s->steps[i].dur_ns = STEP_MS * MS, s->steps[i].start_ns = i * STEP_MS * MS;
    int64_t extra_ms = x.python_ms + x.compute_ms + x.memory_ms;
    add_fn(s, PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 40 + x.compute_ms + jitter % 2);
    add_fn(s, PT_CLASS_COMPUTE, "elementwise_kernel64_1_1|128_1_1", 10);
    add_fn(s, PT_CLASS_PYTHON, "train.py: <module>|torch/utils/data/dataloader.py: __next__", 3 + x.python_ms);
    add_fn(s, PT_CLASS_RUNTIME, "cudaLaunchKernel", 1);
    add_fn(s, PT_CLASS_MEMORY, "Memcpy DtoD (Device -> Device)", x.memory_ms ? x.memory_ms : 0);
    add_fn(s, PT_CLASS_COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 28 - extra_ms + x.comm_ms + jitter % 3);
    int64_t used = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        used += s->exposed_ns[c];
    s->idle_ns = s->window_ns - used;
    /* Both steps alike, as the summarizer would report them. */
    for (int i = 0; i < 2; i++) {
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            s->steps[i].exposed_ns[c] = s->exposed_ns[c] / 2;
        s->steps[i].idle_ns = s->idle_ns / 2;
    }
    return s;
}

static pt_json *diagnose(pt_worker_summary **w, size_t n)
{
    pt_job_input job = {w, n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&job);
    for (size_t i = 0; i < n; i++)
        pt_summary_free(w[i]);
    return report;
}

static const pt_json *finding(const pt_json *report, size_t i)
{
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    assert_non_null(findings);
    assert_true(findings->count > i);
    return findings->items[i];
}

static const char *verdict(const pt_json *report)
{
    return pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", "");
}

static void assert_workers(const pt_json *f, const int *ranks, size_t n)
{
    const pt_json *w = pt_json_get(f, "workers");
    assert_int_equal(w->count, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(w->items[i]->integer, ranks[i]);
}

static void test_healthy_is_not_flagged(void **state)
{
    (void)state;
    pt_worker_summary *w[N];
    for (int r = 0; r < N; r++)
        w[r] = worker(r, (extra){0, 0, 0, 0}, r);
    pt_json *report = diagnose(w, N);
    assert_string_equal(verdict(report), "healthy");
    assert_int_equal(pt_json_get(pt_json_get(report, "diagnosis"), "findings")->count, 0);
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; i < workers->count; i++)
        assert_string_equal(pt_json_get_string(workers->items[i], "status", ""), "normal");
    pt_json_free(report);
}

static void test_slow_python_worker_is_named_first(void **state)
{
    (void)state;
    pt_worker_summary *w[N];
    for (int r = 0; r < N; r++)
        w[r] = worker(r, (extra){r == 5 ? 25 : 0, 0, 0, 0}, r);
    pt_json *report = diagnose(w, N);
    assert_string_equal(verdict(report), "degraded");
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "python");
    assert_string_equal(pt_json_get_string(f, "function", ""),
                        "train.py: <module>|torch/utils/data/dataloader.py: __next__");
    assert_workers(f, (int[]){5}, 1);
    assert_false(pt_json_get(f, "all_workers")->boolean);
    double impact = pt_json_get_number(f, "impact", 0);
    assert_true(impact > 0.2 && impact < 0.3);
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "Rank 5"));
    assert_string_equal(pt_json_get_string(pt_json_get(report, "workers")->items[5], "status", ""), "slow");
    assert_string_equal(pt_json_get_string(pt_json_get(report, "workers")->items[4], "status", ""), "normal");
    pt_json_free(report);
}

static void test_two_slow_gpus_share_one_finding(void **state)
{
    (void)state;
    pt_worker_summary *w[N];
    for (int r = 0; r < N; r++)
        w[r] = worker(r, (extra){0, r == 1 || r == 6 ? 20 : 0, 0, 0}, r);
    pt_json *report = diagnose(w, N);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_string_equal(pt_json_get_string(f, "function", ""), "gemm_kernel128_1_1|256_1_1");
    assert_workers(f, (int[]){1, 6}, 2);
    pt_json_free(report);
}

static void add_metric(pt_worker_summary *s, const char *name, double mean)
{
    s->metrics = realloc(s->metrics, (s->metric_count + 1) * sizeof *s->metrics);
    pt_metric_summary *m = &s->metrics[s->metric_count++];
    memset(m, 0, sizeof *m);
    m->name = strdup(name);
    m->samples = 100;
    m->mean = m->min = m->max = mean;
}

static void test_throttled_gpu_is_a_hardware_finding(void **state)
{
    (void)state;
    pt_worker_summary *w[N];
    for (int r = 0; r < N; r++) {
        w[r] = worker(r, (extra){0, r == 3 ? 20 : 0, 0, 0}, r);
        add_metric(w[r], "gpu0.sm_clock_mhz", r == 3 ? 1410 : 1980 - r);
        add_metric(w[r], "host.cpu_util", 35 + r);
        add_metric(w[r], "host.mem_used", 6.3);
        add_metric(w[r], "proc.rss_mb", 1240);
        add_metric(w[r], "gpu0.util", 52);
    }
    pt_json *report = diagnose(w, N);
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    assert_string_equal(pt_json_get_string(findings->items[0], "category", ""), "gpu_compute");
    const pt_json *hw = NULL;
    for (size_t i = 0; i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "category", ""), "hardware") == 0)
            hw = findings->items[i];
    assert_non_null(hw);
    assert_string_equal(pt_json_get_string(hw, "function", ""), "gpu0.sm_clock_mhz");
    assert_workers(hw, (int[]){3}, 1);
    const pt_json *metrics = pt_json_get(pt_json_get(report, "Hardware"), "metrics");
    assert_string_equal(pt_json_get_string(pt_json_get(metrics, "gpu0.sm_clock_mhz"), "unit", ""), "MHz");
    assert_string_equal(pt_json_get_string(pt_json_get(metrics, "host.cpu_util"), "unit", ""), "%");
    assert_string_equal(pt_json_get_string(pt_json_get(metrics, "host.mem_used"), "unit", ""), "%");
    assert_string_equal(pt_json_get_string(pt_json_get(metrics, "proc.rss_mb"), "unit", ""), "MiB");
    assert_string_equal(pt_json_get_string(pt_json_get(metrics, "gpu0.util"), "unit", ""), "%");
    /* The CPU is not busier on rank 3: no CPU finding. */
    for (size_t i = 0; i < findings->count; i++)
        assert_string_not_equal(pt_json_get_string(findings->items[i], "function", ""), "host.cpu_util");
    pt_json_free(report);
}

static void test_common_memcpy_is_all_workers(void **state)
{
    (void)state;
    pt_worker_summary *w[N];
    for (int r = 0; r < N; r++)
        w[r] = worker(r, (extra){0, 0, 10, 10}, r);
    pt_json *report = diagnose(w, N);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_memory");
    assert_string_equal(pt_json_get_string(f, "function", ""), "Memcpy DtoD (Device -> Device)");
    assert_true(pt_json_get(f, "all_workers")->boolean);
    assert_int_equal(pt_json_get(f, "workers")->count, N);
    /* No worker is singled out. */
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    for (size_t i = 0; i < findings->count; i++)
        assert_true(pt_json_get(findings->items[i], "all_workers")->boolean);
    const pt_json *abnormal = pt_json_get(pt_json_get(pt_json_get(report, "GPU memory operations"),
                                                      "Memcpy DtoD (Device -> Device)"), "abnormal_workers");
    assert_int_equal(abnormal->count, N);
    pt_json_free(report);
}

static void test_hang_names_the_worker_others_wait_for(void **state)
{
    (void)state;
    pt_worker_summary *w[N];
    for (int r = 0; r < N; r++) {
        w[r] = worker(r, (extra){0, 0, 0, 0}, r);
        if (r != 2) {
            w[r]->stall_ns = 5000 * MS;
            w[r]->stall_class = PT_CLASS_COMM;
            w[r]->stall_function = strdup("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)");
        }
    }
    pt_json *report = diagnose(w, N);
    assert_string_equal(verdict(report), "hang");
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "hang");
    assert_workers(f, (int[]){2}, 1);
    assert_string_equal(pt_json_get_string(pt_json_get(report, "workers")->items[2], "status", ""), "hang");
    pt_json_free(report);
}

static void test_missing_and_failed_ranks_are_listed(void **state)
{
    (void)state;
    pt_worker_summary *w[5];
    for (int r = 0; r < 5; r++)
        w[r] = worker(r, (extra){0, 0, 0, 0}, r);
    int32_t failed_rank = 6;
    const char *failed_name = "node0_6_1006.json";
    pt_job_input job = {w, 5, N, NULL, 0, &failed_rank, &failed_name, 1, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&job);
    const pt_json *missing = pt_json_get(pt_json_get(report, "job"), "missing_ranks");
    assert_int_equal(missing->count, 2);
    assert_int_equal(missing->items[0]->integer, 5);
    assert_int_equal(missing->items[1]->integer, 7);
    const pt_json *workers = pt_json_get(report, "workers");
    assert_int_equal(workers->count, N);
    assert_string_equal(pt_json_get_string(workers->items[5], "status", ""), "error");
    for (int r = 0; r < 5; r++)
        pt_summary_free(w[r]);
    pt_json_free(report);
}

static void test_two_workers_are_not_compared(void **state)
{
    (void)state;
    pt_worker_summary *w[2] = {worker(0, (extra){0, 0, 0, 0}, 0), worker(1, (extra){25, 0, 0, 0}, 1)};
    pt_json *report = diagnose(w, 2);
    assert_string_equal(verdict(report), "healthy");
    pt_json_free(report);
}

/* ------------------------------------------------------------ the step model */

/* A worker whose steps are cut by sync points: every step alike, ends[k] the k-th sync
 * point's end (ms from the step start), busy[k][c] the work before it by class and
 * busy[nsync][c] the work after the last. Steps and window are filled in to match. */
#define MAX_PIECES 4
static pt_worker_summary *sync_worker(int rank, int world, const char *host, int64_t step_ms, size_t nsync,
                                      const int64_t *ends, const int64_t busy[MAX_PIECES][PT_CLASS_COUNT])
{
    enum { STEPS = 3 };
    pt_worker_summary *s = pt_summary_new();
    char name[64];
    snprintf(name, sizeof name, "%s_%d_%d.json", host, rank % 8, 2000 + rank);
    s->name = strdup(name);
    s->host = strdup(host);
    s->rank = rank;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->world_size = world;
    s->window_start_ns = 1700000000000000000LL;
    s->window_ns = STEPS * step_ms * MS;
    s->step_count = STEPS;
    s->has_syncs = true;
    s->steps = calloc(STEPS, sizeof *s->steps);
    for (int i = 0; i < STEPS; i++) {
        pt_step_summary *st = &s->steps[i];
        st->step = 10 + i, st->dur_ns = step_ms * MS, st->start_ns = i * step_ms * MS;
        st->sync_count = nsync;
        st->syncs = calloc(nsync ? nsync : 1, sizeof *st->syncs);
        int64_t used = 0;
        for (size_t k = 0; k <= nsync; k++) {
            int64_t *out = k < nsync ? st->syncs[k].busy_ns : st->tail_busy_ns;
            if (k < nsync)
                st->syncs[k].end_ns = ends[k] * MS;
            for (int c = 0; c < PT_CLASS_COUNT; c++) {
                out[c] = busy[k][c] * MS;
                st->exposed_ns[c] += out[c];
                used += out[c];
            }
        }
        st->exposed_ns[PT_CLASS_COMM] = st->dur_ns - used; /* the rest: waiting in collectives */
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            s->exposed_ns[c] += st->exposed_ns[c], s->union_ns[c] += st->exposed_ns[c];
    }
    return s;
}

/* A function of s, the same in every step: calls and exposed ms per step. */
static void add_step_fn(pt_worker_summary *s, pt_class cls, const char *name, int calls, double ms)
{
    s->functions = realloc(s->functions, (s->function_count + 1) * sizeof *s->functions);
    pt_function_summary *f = &s->functions[s->function_count++];
    memset(f, 0, sizeof *f);
    f->cls = cls;
    f->name = strdup(name);
    f->count = (uint64_t)calls * s->step_count;
    f->step_count = s->step_count;
    f->step_exposed_ns = calloc(s->step_count, sizeof *f->step_exposed_ns);
    for (size_t i = 0; i < s->step_count; i++)
        f->step_exposed_ns[i] = (int64_t)(ms * MS);
    f->exposed_ns = f->total_ns = (int64_t)(ms * MS) * (int64_t)s->step_count;
    f->median_ns = calls ? (int64_t)(ms * MS) / calls : 0;
}

static const pt_json *finding_about(const pt_json *report, const char *function)
{
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    for (size_t i = 0; i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "function", ""), function) == 0)
            return findings->items[i];
    return NULL;
}

/* Two sync points a step: rank 1 is slow before the first, rank 2 before the second. The
 * segments add up, so fixing either alone saves its whole excess (20 of 110 ms); a model
 * of one segment per step would say fixing one saves nothing, the other being as slow. */
static void two_segment_job(pt_worker_summary **w, bool syncs)
{
    static const int64_t ends[] = {50, 100};
    for (int r = 0; r < 4; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{30, 0, 0, 0, 0}, {30, 0, 0, 0, 0}, {10, 0, 0, 0, 0}};
        busy[0][PT_CLASS_PYTHON] = r == 1 ? 20 : 0;
        busy[1][PT_CLASS_PYTHON] = r == 2 ? 20 : 0;
        w[r] = sync_worker(r, 4, "node0", 110, 2, ends, busy);
        w[r]->has_syncs = syncs;
        for (size_t i = 0; i < w[r]->step_count && !syncs; i++) {
            free(w[r]->steps[i].syncs);
            w[r]->steps[i].syncs = NULL, w[r]->steps[i].sync_count = 0;
            memset(w[r]->steps[i].tail_busy_ns, 0, sizeof w[r]->steps[i].tail_busy_ns);
        }
        add_step_fn(w[r], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 3, 70);
        if (r == 1)
            add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|data.py: load", 1, 20);
        if (r == 2)
            add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|aug.py: augment", 1, 20);
    }
}

static void test_segments_between_sync_points_add_up(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    two_segment_job(w, true);
    pt_json *report = diagnose(w, 4);
    const pt_json *load = finding_about(report, "train.py: train|data.py: load");
    const pt_json *aug = finding_about(report, "train.py: train|aug.py: augment");
    assert_non_null(load);
    assert_non_null(aug);
    assert_true(fabs(pt_json_get_number(load, "impact", 0) - 20.0 / 110) < 0.01);
    assert_true(fabs(pt_json_get_number(aug, "impact", 0) - 20.0 / 110) < 0.01);
    const pt_json *d = pt_json_get(report, "diagnosis");
    assert_true(fabs(pt_json_get_number(d, "joint_impact", 0) - 40.0 / 110) < 0.01);
    assert_true(fabs(pt_json_get_number(pt_json_get(d, "step_model"), "sync_points_per_step", 0) - 2) < 1e-9);
    pt_json_free(report);
    /* The same job with no sync points known: one segment per step, and either rank's fix
     * leaves the other as slow. */
    two_segment_job(w, false);
    report = diagnose(w, 4);
    load = finding_about(report, "train.py: train|data.py: load");
    assert_non_null(load);
    assert_true(pt_json_get_number(load, "impact", 1) < 0.01);
    assert_non_null(strstr(pt_json_get_string(load, "summary", ""), "own work then sets the pace"));
    pt_json_free(report);
}

/* What the page's step timeline draws: each worker's sync points per step (end, work
 * before it) and its work after the last; per step, who sets it. Rank 1 is the busiest
 * before the first sync point, rank 2 before the second: one segment each, a tie broken
 * by the lead (equal here), so the first of them. */
static void test_report_carries_the_step_timeline(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    two_segment_job(w, true);
    pt_json *report = diagnose(w, 4);
    const pt_json *steps = pt_json_get(pt_json_get(report, "workers")->items[1], "steps");
    assert_int_equal(steps->count, 3);
    const pt_json *syncs = pt_json_get(steps->items[0], "syncs");
    assert_int_equal(syncs->count, 2);
    assert_true(fabs(syncs->items[0]->items[0]->number - 50) < 1e-9); /* end, ms from the step start */
    assert_true(fabs(syncs->items[0]->items[1]->number - 50) < 1e-9); /* 30 compute + 20 Python */
    assert_true(fabs(syncs->items[1]->items[0]->number - 100) < 1e-9);
    assert_true(fabs(syncs->items[1]->items[1]->number - 30) < 1e-9);
    assert_true(fabs(pt_json_get_number(steps->items[0], "tail_busy_ms", 0) - 10) < 1e-9);
    const pt_json *pace = pt_json_get(pt_json_get(pt_json_get(report, "diagnosis"), "step_model"), "pace");
    assert_int_equal(pace->count, 3);
    for (size_t i = 0; i < pace->count; i++) {
        assert_int_equal(pt_json_get_number(pace->items[i], "step", -1), (double)i);
        assert_int_equal(pt_json_get_number(pace->items[i], "rank", -1), 1);
        assert_int_equal(pt_json_get_number(pace->items[i], "sets", 0), 1);
        assert_int_equal(pt_json_get_number(pace->items[i], "of", 0), 2);
        assert_true(fabs(pt_json_get_number(pace->items[i], "lead_ms", 0) - 20) < 1e-9);
        assert_true(pt_json_get(pace->items[i], "above_noise")->boolean);
    }
    pt_json_free(report);
    /* Without sync points: no syncs in the steps, each step one segment. */
    two_segment_job(w, false);
    report = diagnose(w, 4);
    steps = pt_json_get(pt_json_get(report, "workers")->items[1], "steps");
    assert_null(pt_json_get(steps->items[0], "syncs"));
    pace = pt_json_get(pt_json_get(pt_json_get(report, "diagnosis"), "step_model"), "pace");
    assert_int_equal(pace->count, 3);
    assert_int_equal(pt_json_get_number(pace->items[0], "of", 0), 1);
    assert_false(pt_json_get(pace->items[0], "above_noise")->boolean); /* ranks 1 and 2 tie */
    pt_json_free(report);
}

/* The seed's example: rank r sleeps r x 100 ms, then a barrier. Rank 3 sets the step time;
 * ranks 1 and 2 run the same code for less time; fixing rank 3 alone leaves rank 2's
 * sleep as the bottleneck. */
static void test_graded_job_names_the_pace_setter_first(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    static const int64_t ends[] = {350};
    for (int r = 0; r < 4; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{50, 0, 0, 0, 0}, {5, 0, 0, 0, 0}};
        busy[0][PT_CLASS_PYTHON] = 100 * r;
        w[r] = sync_worker(r, 4, "node0", 355, 1, ends, busy);
        add_step_fn(w[r], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 2, 55);
        add_step_fn(w[r], PT_CLASS_PYTHON, "job.py: train|<built-in function sleep>", 1, 100.0 * r);
    }
    pt_json *report = diagnose(w, 4);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "function", ""), "job.py: train|<built-in function sleep>");
    assert_workers(f, (int[]){3, 1, 2}, 3);
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_true(strncmp(summary, "Rank 3 sets the step time", 25) == 0);
    assert_non_null(strstr(summary, "ranks 1 and 2 run the same code for less time"));
    assert_non_null(strstr(summary, "fixing rank 3 alone saves 100 ms"));
    assert_true(fabs(pt_json_get_number(f, "impact", 0) - 300.0 / 355) < 0.01); /* all of them */
    pt_json_free(report);
}

/* Extra cudaFree calls on one rank: named with the Python call that makes them, with
 * advice for allocations, not for synchronizations. */
static void test_extra_runtime_calls_name_their_caller(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    static const int64_t ends[] = {90};
    for (int r = 0; r < 4; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{60, 0, 0, 0, 0}, {5, 0, 0, 0, 0}};
        busy[0][PT_CLASS_RUNTIME] = r == 3 ? 20 : 0;
        w[r] = sync_worker(r, 4, "node0", 95, 1, ends, busy);
        add_step_fn(w[r], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 2, 60);
        if (r == 3) {
            add_step_fn(w[r], PT_CLASS_RUNTIME, "cudaFree", 40, 20);
            w[r]->functions[w[r]->function_count - 1].caller =
                strdup("train.py: <module>|train.py: train|torch/cuda/memory.py: empty_cache");
        }
    }
    pt_json *report = diagnose(w, 4);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "cuda_runtime");
    assert_string_equal(pt_json_get_string(f, "function", ""), "cudaFree");
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "called from `... > train.py: train > torch/cuda/memory.py: empty_cache`"));
    assert_non_null(strstr(summary, "torch.cuda.empty_cache()"));
    assert_null(strstr(summary, "synchronize"));
    pt_json_free(report);
}

/* Every GPU of one host slower by one factor: one finding for all their kernels, costed
 * at all of them, saying it is that host. */
static void test_slow_host_gpus_are_one_finding(void **state)
{
    (void)state;
    enum { WORKERS = 16 };
    pt_worker_summary *w[WORKERS];
    static const int64_t ends[] = {95};
    static const char *const kernels[] = {"k0_kernel1_1_1|1_1_1", "k1_kernel1_1_1|1_1_1", "k2_kernel1_1_1|1_1_1",
                                          "k3_kernel1_1_1|1_1_1", "k4_kernel1_1_1|1_1_1", "k5_kernel1_1_1|1_1_1"};
    for (int r = 0; r < WORKERS; r++) {
        bool slow = r >= 8;
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{slow ? 90 : 60, 0, 0, 0, 0}, {5, 0, 0, 0, 0}};
        w[r] = sync_worker(r, WORKERS, r < 8 ? "node0" : "node1", 100, 1, ends, busy);
        for (int k = 0; k < 6; k++) /* 10 ms each, 1.5x as long on the slow host */
            add_step_fn(w[r], PT_CLASS_COMPUTE, kernels[k], 2, slow ? 15 : 10);
    }
    pt_json *report = diagnose(w, WORKERS);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_workers(f, (int[]){8, 9, 10, 11, 12, 13, 14, 15}, 8);
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "Ranks 8-15 (every rank of host node1)"));
    assert_non_null(strstr(summary, "uniformly slower"));
    assert_true(fabs(pt_json_get_number(f, "impact", 0) - 30.0 / 100) < 0.01);
    pt_json_free(report);
}

/* One trace: "The worker", not "Every worker". */
static void test_one_worker_is_not_every_worker(void **state)
{
    (void)state;
    pt_worker_summary *w[1] = {worker(0, (extra){0, 0, 10, 10}, 0)};
    pt_json *report = diagnose(w, 1);
    const pt_json *f = finding(report, 0);
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_true(strncmp(summary, "The worker spends", 17) == 0);
    assert_null(strstr(summary, "very worker"));
    pt_json_free(report);
}

/* The same Python function called more often on one rank (4 calls of 5 ms a step against
 * 1 on the others): the finding says so with both counts and the 15 ms it costs, not as
 * "slower" calls or a whole class above its peers. Rank 3 is not the slowest (rank 1's
 * data loading, 40 ms over, sets the pace): extra calls are named even where no one
 * waits for them (no straggler analysis finds them then). */
static void test_more_calls_are_counted_against_the_peers(void **state)
{
    (void)state;
    pt_worker_summary *w[4];
    static const int64_t ends[] = {140};
    for (int r = 0; r < 4; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{60, 0, 0, 0, 0}, {5, 0, 0, 0, 0}};
        busy[0][PT_CLASS_PYTHON] = (r == 3 ? 20 : 5) + (r == 1 ? 40 : 5);
        w[r] = sync_worker(r, 4, "node0", 150, 1, ends, busy);
        add_step_fn(w[r], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 2, 60);
        add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|log.py: write", r == 3 ? 4 : 1, r == 3 ? 20 : 5);
        add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|data.py: load", 1, r == 1 ? 45 : 5);
    }
    pt_json *report = diagnose(w, 4);
    const pt_json *f = finding_about(report, "train.py: train|log.py: write");
    assert_non_null(f);
    assert_workers(f, (int[]){3}, 1);
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "4 times per step against 1 on the other workers, 15 ms more per step"));
    assert_non_null(strstr(summary, "saves 0 ms per step")); /* rank 1 still sets the pace */
    const pt_json *load = finding_about(report, "train.py: train|data.py: load");
    assert_non_null(load);
    assert_workers(load, (int[]){1}, 1);
    /* Rank 1 busy 105 ms before the sync point, the next (rank 3) 85. */
    assert_non_null(strstr(pt_json_get_string(load, "summary", ""), "fixing it saves 20 ms per step"));
    pt_json_free(report);

    /* Rank 3 logs more and loads less: its Python time is the others', so no class is
     * above its peers and nobody waits. Its extra calls save nothing, alone or with any
     * other fix, and they are CPU work (no shared GPU the model misses): no finding. */
    for (int r = 0; r < 4; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{60, 0, 0, 0, 0}, {5, 0, 0, 0, 0}};
        busy[0][PT_CLASS_PYTHON] = 25;
        w[r] = sync_worker(r, 4, "node0", 150, 1, ends, busy);
        add_step_fn(w[r], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 2, 60);
        add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|log.py: write", r == 3 ? 4 : 1, r == 3 ? 20 : 5);
        add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|data.py: load", 1, r == 3 ? 5 : 20);
    }
    report = diagnose(w, 4);
    assert_null(finding_about(report, "train.py: train|log.py: write"));
    assert_null(finding_about(report, "train.py: train|data.py: load")); /* less is no finding */
    assert_string_equal(verdict(report), "healthy");
    pt_json_free(report);
}

/* ------------------------------------------------------------ inputs: one job, all of it */

#define WORLD 6
#define TEN_MINUTES_NS (600LL * 1000000000LL)

/* A worker of a 100 ms step with one sync point at 90 ms: 40 ms of kernels and `python`
 * ms of data loading before it, 5 ms of kernels after; it waits in the collective for
 * the rest (the slowest worker's work sets where the sync point ends). */
static pt_worker_summary *job_worker(int rank, int world, int64_t python)
{
    static const int64_t ends[] = {90};
    int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{40, 0, 0, 0, 0}, {5, 0, 0, 0, 0}};
    busy[0][PT_CLASS_PYTHON] = python;
    pt_worker_summary *s = sync_worker(rank, world, "node0", 100, 1, ends, busy);
    s->device_count = world;
    add_step_fn(s, PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 3, 45);
    add_step_fn(s, PT_CLASS_PYTHON, "train.py: train|data.py: load", 1, (double)python);
    return s;
}

/* Ranks 0..WORLD-1 of one job, rank 1 loading its data 40 ms longer than the others'
 * 5 ms: it sets the pace, the others wait half the step for it. */
static void slow_rank_job(pt_worker_summary **w, int world)
{
    for (int r = 0; r < world; r++)
        w[r] = job_worker(r, world, r == 1 ? 45 : 5);
}

static const pt_json *diagnosis_of(const pt_json *report)
{
    return pt_json_get(report, "diagnosis");
}

static const char *input_problem(const pt_json *report)
{
    const pt_json *p = pt_json_get(diagnosis_of(report), "input_problem");
    assert_non_null(p);
    return p->type == PT_JSON_STRING ? p->string : NULL;
}

/* Inputs that are not one job: one finding, about the input, that names no worker and
 * is the banner; nobody compared, nobody marked. */
static void assert_mixed(const pt_json *report, const char *evidence)
{
    assert_string_equal(pt_json_get_string(diagnosis_of(report), "inputs", ""), "mixed");
    const char *problem = input_problem(report);
    assert_non_null(problem);
    assert_true(strncmp(problem, "These inputs are not one job: ", 30) == 0);
    assert_non_null(strstr(problem, evidence));
    assert_string_equal(verdict(report), "degraded");
    const pt_json *findings = pt_json_get(diagnosis_of(report), "findings");
    assert_int_equal(findings->count, 1);
    assert_string_equal(pt_json_get_string(findings->items[0], "category", ""), "other");
    assert_int_equal(pt_json_get(findings->items[0], "workers")->count, 0);
    assert_string_equal(pt_json_get_string(findings->items[0], "summary", ""), problem);
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; i < workers->count; i++)
        assert_string_not_equal(pt_json_get_string(workers->items[i], "status", ""), "slow");
}

/* The slow rank 1 of a complete job comes first (what the mixed cases would say if the
 * workers were compared). */
static void assert_one_job(const pt_json *report)
{
    assert_string_equal(pt_json_get_string(diagnosis_of(report), "inputs", ""), "complete");
    assert_null(input_problem(report));
    const pt_json *f = finding(report, 0);
    assert_workers(f, (int[]){1}, 1);
    assert_string_equal(pt_json_get_string(f, "category", ""), "python");
}

static void test_inputs_of_one_job_are_compared(void **state)
{
    (void)state;
    pt_worker_summary *w[WORLD];
    slow_rank_job(w, WORLD);
    pt_json *report = diagnose(w, WORLD);
    assert_one_job(report);
    pt_json_free(report);
}

static void test_world_sizes_that_differ_are_not_one_job(void **state)
{
    (void)state;
    pt_worker_summary *w[WORLD];
    slow_rank_job(w, WORLD);
    w[4]->world_size = w[5]->world_size = 128;
    pt_json *report = diagnose(w, WORLD);
    assert_mixed(report, "they state world sizes 6 and 128");
    pt_json_free(report);

    /* A round's workers (the caller knows the job: its world size) are one job whatever
     * one of them claims: the claim is a warning, the others are still diagnosed. */
    slow_rank_job(w, WORLD);
    w[5]->world_size = 128;
    w[4]->window_start_ns += 3600LL * 1000000000LL;
    pt_job_input round = {w, WORLD, WORLD, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    report = pt_diagnose(&round);
    for (int r = 0; r < WORLD; r++)
        pt_summary_free(w[r]);
    assert_one_job(report);
    const pt_json *warnings = pt_json_get(report, "warnings");
    size_t said = 0;
    for (size_t i = 0; i < warnings->count; i++)
        said += strstr(warnings->items[i]->string, "world size 128 differs") != NULL ||
                strstr(warnings->items[i]->string, "its profiled window starts 1.0 h after") != NULL;
    assert_int_equal(said, 2);
    pt_json_free(report);
}

static void test_a_rank_claimed_twice_is_not_one_job(void **state)
{
    (void)state;
    pt_worker_summary *w[WORLD];
    slow_rank_job(w, WORLD);
    w[5]->rank = 4; /* two traces of rank 4, none of rank 5 */
    pt_json *report = diagnose(w, WORLD);
    assert_mixed(report, "rank 4 is claimed by more than one worker");
    pt_json_free(report);
}

/* Windows further than 10 minutes from the median worker's are another run's: at 10
 * minutes the job is one, a nanosecond more and it is not (both directions). */
static void test_windows_far_apart_are_not_one_job(void **state)
{
    (void)state;
    const int64_t offsets[] = {TEN_MINUTES_NS - 1, TEN_MINUTES_NS, -TEN_MINUTES_NS, TEN_MINUTES_NS + 1,
                               -TEN_MINUTES_NS - 1, 3600LL * 24 * 400 * 1000000000LL};
    for (size_t i = 0; i < PT_ARRAY_LEN(offsets); i++) {
        pt_worker_summary *w[WORLD];
        slow_rank_job(w, WORLD);
        w[3]->window_start_ns += offsets[i];
        pt_json *report = diagnose(w, WORLD);
        if (i < 3)
            assert_one_job(report);
        else
            assert_mixed(report, "1 profiled window starts up to ");
        pt_json_free(report);
    }
}

/* The job of slow_rank_job without rank 1, its slow rank: ranks 0, 2, 3, 4 and 5. */
static void job_without_rank_1(pt_worker_summary *rest[WORLD - 1])
{
    pt_worker_summary *w[WORLD];
    slow_rank_job(w, WORLD);
    pt_summary_free(w[1]);
    rest[0] = w[0];
    for (int r = 2; r < WORLD; r++)
        rest[r - 1] = w[r];
}

/* The job without its slow rank: the others wait half of each step, and nothing among
 * them explains it. The report says it is partial, and the first finding that the rank
 * they wait for may be the missing one -- never that the links are slow. */
static void test_a_partial_job_says_the_slowest_may_be_missing(void **state)
{
    (void)state;
    pt_worker_summary *rest[WORLD - 1];
    job_without_rank_1(rest);
    pt_json *report = diagnose(rest, WORLD - 1);
    assert_string_equal(pt_json_get_string(diagnosis_of(report), "inputs", ""), "partial");
    const char *problem = input_problem(report);
    assert_non_null(problem);
    assert_non_null(strstr(problem, "Partial: 5 of the job's 6 ranks were analysed; rank 1 was not (not given to "
                                    "this analysis)"));
    const pt_json *f = finding(report, 0);
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_true(strncmp(summary, "The slowest rank may be among the missing: rank 1 was not analysed (not given to "
                                 "this analysis), and the ranks analysed spent a median of 50% of each step waiting",
                        139) == 0);
    assert_workers(f, (int[]){1}, 1);
    /* It saves what the exposed communication would have: the wait above the 10% of the
     * step communication is expected to take (here the 5 ms transfer and the 5 ms after
     * the last work), rank 1's 40 ms. */
    assert_true(fabs(pt_json_get_number(f, "impact", 0) - 0.40) < 0.01);
    assert_non_null(strstr(summary, "would save about 40 ms per step (40% of the step): the 50 ms a step they wait "
                                    "that none of their own work sets, less the 10% of the step"));
    assert_non_null(strstr(summary, "the collectives' own transfer, which the ranks analysed cannot tell"));
    const pt_json *findings = pt_json_get(diagnosis_of(report), "findings");
    for (size_t i = 0; i < findings->count; i++) {
        assert_null(strstr(pt_json_get_string(findings->items[i], "summary", ""), "check the links"));
        assert_string_not_equal(pt_json_get_string(findings->items[i], "category", ""), "communication");
    }
    pt_json_free(report);
}

/* Ranks 2, 3 and 4 each load 7 ms longer in one step (noise): without rank 1 the job
 * would be paced by that one, at 52 ms of work, not 45, so fixing rank 1 saves 33 ms of
 * 100, not 40. The saving counts the wait of the last of the ranks analysed to arrive
 * (38 ms, and the 5 after the work), less the 10% expected; not the median rank's wait,
 * which holds the 7 ms it waits for that one. */
static void test_a_partial_job_counts_the_last_arrival(void **state)
{
    (void)state;
    pt_worker_summary *rest[WORLD - 1];
    job_without_rank_1(rest);
    for (int i = 0; i < 3; i++) {
        pt_worker_summary *s = rest[1 + i];
        pt_step_summary *st = &s->steps[i];
        st->syncs[0].busy_ns[PT_CLASS_PYTHON] += 7 * MS;
        st->exposed_ns[PT_CLASS_PYTHON] += 7 * MS, st->exposed_ns[PT_CLASS_COMM] -= 7 * MS;
        s->exposed_ns[PT_CLASS_PYTHON] += 7 * MS, s->union_ns[PT_CLASS_PYTHON] += 7 * MS;
        s->exposed_ns[PT_CLASS_COMM] -= 7 * MS, s->union_ns[PT_CLASS_COMM] -= 7 * MS;
    }
    pt_json *report = diagnose(rest, WORLD - 1);
    const pt_json *f = finding(report, 0);
    assert_workers(f, (int[]){1}, 1);
    double truth = 1 - (45 + 7 + 5 + 5 + 5) / 100.0;
    assert_true(fabs(pt_json_get_number(f, "impact", 0) - truth) < 0.01);
    pt_json_free(report);
}

/* The same ranks from a round in which rank 1 failed (exited, no summary) or was lost
 * mid-round: partial, with the rank and why, in the verdict's banner and the first
 * finding. */
static void test_a_round_without_its_slow_rank_says_partial(void **state)
{
    (void)state;
    for (int lost = 0; lost < 2; lost++) {
        pt_worker_summary *rest[WORLD - 1];
        job_without_rank_1(rest);
        int32_t failed_rank = 1;
        const char *failed_name = "node0_1_2001.json";
        bool failed_lost = lost;
        int64_t lost_step = 11;
        const char *reason = "died (at step 11)";
        pt_job_input job = {rest, WORLD - 1, WORLD, NULL, 0, &failed_rank, &failed_name, 1,
                            "2026-01-01T00:00:00Z", &failed_lost, &lost_step, &reason};
        pt_json *report = pt_diagnose(&job);
        for (int r = 0; r < WORLD - 1; r++)
            pt_summary_free(rest[r]);
        const char *problem = input_problem(report);
        assert_non_null(problem);
        assert_non_null(strstr(problem, lost ? "rank 1 was not (lost mid-round)" : "rank 1 was not (failed: see the "
                                                                                    "warnings)"));
        const pt_json *f = finding(report, 0);
        assert_workers(f, (int[]){1}, 1);
        assert_string_equal(pt_json_get_string(f, "category", ""), lost ? "lost" : "other");
        assert_non_null(strstr(pt_json_get_string(f, "summary", ""), lost ? "Rank 1 was lost"
                                                                           : "The slowest rank may be among the "
                                                                             "missing: rank 1 was not analysed"));
        pt_json_free(report);
    }
}

/* The figure a finding's sentence gives for its saving is saves_ms, as pt_put_ms prints it. */
static void assert_sentence_says_saves_ms(const pt_json *f)
{
    const pt_json *saves = pt_json_get(f, "saves_ms");
    assert_non_null(saves);
    assert_int_equal(saves->type, PT_JSON_NUMBER);
    char figure[64];
    snprintf(figure, sizeof figure, saves->number >= 100 ? "%.0f ms" : "%.3g ms", saves->number);
    char pct[32];
    double impact = pt_json_get_number(f, "impact", -1);
    snprintf(pct, sizeof pct, 100 * impact >= 9.5 || impact == 0 ? "%.0f%% of the step" : "%.2g%% of the step",
             100 * impact);
    const char *summary = pt_json_get_string(f, "summary", "");
    const char *at = strstr(summary, figure);
    assert_non_null(at);
    assert_non_null(strstr(at, pct));
}

static void test_saves_ms_is_the_figure_of_the_sentence(void **state)
{
    (void)state;
    pt_worker_summary *w[WORLD];
    slow_rank_job(w, WORLD);
    pt_json *report = diagnose(w, WORLD);
    const pt_json *f = finding(report, 0);
    /* Rank 1 works 90 ms before the sync point, the others 45: a 100 ms step saves 40. */
    assert_true(fabs(pt_json_get_number(f, "saves_ms", 0) - 40.0) < 0.5);
    assert_sentence_says_saves_ms(f);
    pt_json_free(report);

    pt_worker_summary *rest[WORLD - 1];
    job_without_rank_1(rest);
    report = diagnose(rest, WORLD - 1);
    assert_sentence_says_saves_ms(finding(report, 0));
    pt_json_free(report);
}

/* Extra kernels on rank 2 while rank 1's data loading sets the pace by more: fixing them
 * saves nothing, alone or with rank 1's fix. With one GPU per rank that is no finding; on
 * a host with more ranks than GPUs it stays, saying what the model does not count. */
static void test_gpu_work_that_saves_nothing_stays_only_on_a_shared_gpu(void **state)
{
    (void)state;
    for (int shared = 0; shared < 2; shared++) {
        pt_worker_summary *w[WORLD];
        for (int r = 0; r < WORLD; r++) {
            w[r] = job_worker(r, WORLD, r == 1 ? 45 : 5);
            w[r]->device_count = shared ? 1 : WORLD;
        }
        /* Rank 2: 5 ms of its matmul is 5 ms of kernels only it runs, no more work. */
        for (size_t i = 0; i < w[2]->step_count; i++) /* the gemm, in each step */
            w[2]->functions[0].step_exposed_ns[i] -= 5 * MS;
        w[2]->functions[0].exposed_ns -= 3 * 5 * MS, w[2]->functions[0].total_ns -= 3 * 5 * MS;
        add_step_fn(w[2], PT_CLASS_COMPUTE, "extra_kernel_only_here1_1_1|1_1_1", 2, 5);
        pt_json *report = diagnose(w, WORLD);
        assert_workers(finding(report, 0), (int[]){1}, 1);
        const pt_json *only_here = finding_about(report, "extra_kernel_only_here1_1_1|1_1_1");
        if (!shared) {
            assert_null(only_here);
        } else {
            assert_non_null(only_here);
            assert_true(pt_json_get_number(only_here, "impact", 1) < 0.0005);
            assert_non_null(strstr(pt_json_get_string(only_here, "summary", ""), "its GPU may be shared with other "
                                                                                 "ranks"));
        }
        pt_json_free(report);
    }
}

/* Ranks 1 and 2 each load data 40 ms longer, in different code: fixing either alone saves
 * nothing (the other still sets the pace), fixing both saves 40 ms. Both are findings. */
static void test_two_stragglers_that_save_only_together_stay(void **state)
{
    (void)state;
    pt_worker_summary *w[WORLD];
    for (int r = 0; r < WORLD; r++)
        w[r] = job_worker(r, WORLD, 5);
    for (int r = 1; r <= 2; r++) {
        for (size_t i = 0; i < w[r]->step_count; i++) {
            w[r]->steps[i].syncs[0].busy_ns[PT_CLASS_PYTHON] = 45 * MS;
            w[r]->steps[i].exposed_ns[PT_CLASS_PYTHON] += 40 * MS, w[r]->steps[i].exposed_ns[PT_CLASS_COMM] -= 40 * MS;
        }
        w[r]->exposed_ns[PT_CLASS_PYTHON] += 3 * 40 * MS, w[r]->exposed_ns[PT_CLASS_COMM] -= 3 * 40 * MS;
        add_step_fn(w[r], PT_CLASS_PYTHON, r == 1 ? "train.py: train|a.py: shuffle" : "train.py: train|b.py: decode",
                    1, 40);
    }
    pt_json *report = diagnose(w, WORLD);
    assert_non_null(finding_about(report, "train.py: train|a.py: shuffle"));
    assert_non_null(finding_about(report, "train.py: train|b.py: decode"));
    assert_true(fabs(pt_json_get_number(diagnosis_of(report), "joint_impact", 0) - 0.40) < 0.01);
    pt_json_free(report);
}

/* ------------------------------------------------------------ one finding per cause */

/* A job of one sync point a step, built from what each rank runs before it (functions
 * with calls and ms per step); after it every rank runs TAIL_MS of Python. The sync point
 * ends TRANSFER_MS after the busiest rank's work, so the step -- and the true saving of
 * a fix, the step with the fault against the step without -- is computed here from the
 * ranks' work, independently of the diagnosis's step model. */
#define CAUSE_WORLD 8
#define MAX_RANK_FNS 12
#define TRANSFER_MS 10
#define TAIL_MS 5

typedef struct rank_fn {
    pt_class cls;
    const char *name;
    int calls;
    int64_t ms;
    const char *caller; /* a runtime call's Python stack, when given */
} rank_fn;

typedef struct rank_work {
    rank_fn fns[MAX_RANK_FNS];
} rank_work;

static int64_t work_ms(const rank_work *r)
{
    int64_t sum = 0;
    for (size_t k = 0; k < MAX_RANK_FNS && r->fns[k].name; k++)
        sum += r->fns[k].ms;
    return sum;
}

static int64_t job_step_ms(const rank_work *ranks, int world)
{
    int64_t busiest = 0;
    for (int r = 0; r < world; r++)
        busiest = work_ms(&ranks[r]) > busiest ? work_ms(&ranks[r]) : busiest;
    return busiest + TRANSFER_MS + TAIL_MS;
}

static pt_json *diagnose_job(const rank_work *ranks, int world)
{
    pt_worker_summary *w[CAUSE_WORLD];
    int64_t step = job_step_ms(ranks, world), ends[] = {step - TAIL_MS};
    for (int r = 0; r < world; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{0}};
        for (size_t k = 0; k < MAX_RANK_FNS && ranks[r].fns[k].name; k++)
            busy[0][ranks[r].fns[k].cls] += ranks[r].fns[k].ms;
        busy[1][PT_CLASS_PYTHON] = TAIL_MS;
        w[r] = sync_worker(r, world, "node0", step, 1, ends, busy);
        w[r]->device_count = world;
        for (size_t k = 0; k < MAX_RANK_FNS && ranks[r].fns[k].name; k++) {
            add_step_fn(w[r], ranks[r].fns[k].cls, ranks[r].fns[k].name, ranks[r].fns[k].calls,
                        (double)ranks[r].fns[k].ms);
            if (ranks[r].fns[k].caller)
                w[r]->functions[w[r]->function_count - 1].caller = strdup(ranks[r].fns[k].caller);
        }
        add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|train.py: log_step", 1, TAIL_MS);
    }
    return diagnose(w, (size_t)world);
}

/* The share of the step fixing the fault saves: the job's step with it, against the same
 * job's without it. */
static double true_saving(const rank_work *with, const rank_work *without, int world)
{
    return 1.0 - (double)job_step_ms(without, world) / (double)job_step_ms(with, world);
}

/* The bound: within 2 points of the step, or 20% of the true saving. */
static void assert_impact_near(const pt_json *f, double truth)
{
    double impact = pt_json_get_number(f, "impact", -1);
    if (fabs(impact - truth) > fmax(0.02, 0.2 * truth))
        fail_msg("impact %.4f, true saving %.4f: %s", impact, truth, pt_json_get_string(f, "summary", ""));
}

/* What each finding adds to those above it sums to what fixing all of them saves, and is
 * never more than what it saves alone where it overlaps them. */
static void assert_adds_sum_to_the_joint_saving(const pt_json *report)
{
    const pt_json *d = diagnosis_of(report), *findings = pt_json_get(d, "findings");
    double sum = 0;
    for (size_t i = 0; i < findings->count; i++) {
        const pt_json *adds = pt_json_get(findings->items[i], "adds");
        assert_non_null(adds);
        if (adds->type == PT_JSON_NUMBER)
            sum += adds->number;
    }
    if (fabs(sum - pt_json_get_number(d, "joint_impact", 0)) > 1e-5 * (double)(findings->count + 1))
        fail_msg("the findings add %.6f, fixing all of them saves %.6f", sum, pt_json_get_number(d, "joint_impact", 0));
}

/* No two findings count the same time: what they save one by one adds up to no more than
 * what fixing all of them saves (joint_impact), up to the report's rounding. */
static void assert_no_time_counted_twice(const pt_json *report)
{
    const pt_json *d = diagnosis_of(report), *findings = pt_json_get(d, "findings");
    double sum = 0;
    for (size_t i = 0; i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "category", ""), "hardware") != 0)
            sum += pt_json_get_number(findings->items[i], "impact", 0);
    if (sum > pt_json_get_number(d, "joint_impact", 0) + 1e-5)
        fail_msg("findings claim %.4f of the step, fixing all of them saves %.4f", sum,
                 pt_json_get_number(d, "joint_impact", 0));
    assert_adds_sum_to_the_joint_saving(report);
}

/* How many findings name rank `rank` (all-worker ones aside). */
static size_t findings_naming(const pt_json *report, int rank)
{
    const pt_json *findings = pt_json_get(diagnosis_of(report), "findings");
    size_t count = 0;
    for (size_t i = 0; i < findings->count; i++) {
        const pt_json *ranks = pt_json_get(findings->items[i], "workers");
        if (pt_json_get(findings->items[i], "all_workers")->boolean)
            continue;
        for (size_t k = 0; k < ranks->count; k++)
            count += ranks->items[k]->integer == rank;
    }
    return count;
}

static const pt_json *parts_of(const pt_json *f)
{
    const pt_json *parts = pt_json_get(pt_json_get(f, "evidence"), "parts");
    assert_non_null(parts);
    return parts;
}

static bool has_part(const pt_json *f, const char *function)
{
    const pt_json *parts = parts_of(f);
    for (size_t i = 0; i < parts->count; i++)
        if (strcmp(pt_json_get_string(parts->items[i], "function", ""), function) == 0)
            return true;
    return false;
}

#define FWD "fwd_gemm_kernel128_1_1|256_1_1"
#define BWD "bwd_gemm_kernel128_1_1|256_1_1"
#define OPT "adam_kernel64_1_1|128_1_1"
#define LOAD "train.py: train|torch/utils/data/dataloader.py: __next__"

/* A job of `world` ranks whose work is three kernels (forward, backward, optimizer) and its
 * data loading; `slow` runs its kernels `percent`% as long, `loader` loads `extra_load` ms
 * longer. */
static void three_kernel_job(rank_work *ranks, int world, int slow, int percent, int loader, int64_t extra_load)
{
    for (int r = 0; r < world; r++) {
        int64_t f = r == slow ? percent : 100;
        ranks[r] = (rank_work){{{PT_CLASS_COMPUTE, FWD, 8, 40 * f / 100},
                                {PT_CLASS_COMPUTE, BWD, 8, 30 * f / 100},
                                {PT_CLASS_COMPUTE, OPT, 2, 10 * f / 100},
                                {PT_CLASS_PYTHON, LOAD, 1, 4 + (r == loader ? extra_load : 0)}}};
    }
}

/* A rank whose GPU is uniformly slower, in a job of three kernel names (too few for the
 * rolled-up slow-GPU finding): its kernels' findings are one finding, whose impact is the
 * saving of all of them. With another rank slower in its data loading, fixing each kernel
 * alone saves up to that rank's lead and their sum claims more than fixing the GPU does
 * (the 31.8% + 21.5% for a 49% fault). */
static void test_a_gpu_slower_on_its_few_kernels_is_one_finding(void **state)
{
    (void)state;
    for (int world = 3; world <= CAUSE_WORLD; world += CAUSE_WORLD - 3) /* the smallest job with peers, and 8 */
        for (int64_t other = 0; other <= 25; other += 25) {
            rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
            three_kernel_job(with, world, 1, 150, 2, other);
            three_kernel_job(without, world, -1, 150, 2, other);
            pt_json *report = diagnose_job(with, world);
            const pt_json *f = finding_about(report, FWD);
            assert_non_null(f);
            assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
            assert_workers(f, (int[]){1}, 1);
            assert_int_equal(findings_naming(report, 1), 1);
            const pt_json *parts = parts_of(f);
            assert_int_equal(parts->count, 3);
            assert_true(has_part(f, FWD) && has_part(f, BWD) && has_part(f, OPT));
            double shares = 0; /* one worker's three kernels: its whole excess */
            for (size_t i = 0; i < parts->count; i++)
                shares += pt_json_get_number(parts->items[i], "share", 0);
            assert_true(fabs(shares - 1) < 1e-4);
            assert_impact_near(f, true_saving(with, without, world));
            assert_no_time_counted_twice(report);
            assert_sentence_says_saves_ms(f);
            const char *summary = pt_json_get_string(f, "summary", "");
            assert_non_null(strstr(summary, "Rank 1 spends more time than the other workers in the same calls of 3 "
                                            "GPU kernels: "));
            assert_non_null(strstr(summary, "its GPU is slower than its peers'"));
            if (!other)
                assert_ptr_equal(f, finding(report, 0));
            pt_json_free(report);
        }
}

/* Two ranks slow in one kernel each, different kernels: two causes, two findings (a merge
 * of one rank's kernels must not take in another rank's). */
static void test_kernels_of_different_ranks_stay_apart(void **state)
{
    (void)state;
    rank_work ranks[CAUSE_WORLD];
    three_kernel_job(ranks, CAUSE_WORLD, -1, 100, -1, 0);
    ranks[2].fns[0].ms += 20; /* forward on rank 2 */
    ranks[6].fns[1].ms += 20; /* backward on rank 6 */
    pt_json *report = diagnose_job(ranks, CAUSE_WORLD);
    const pt_json *fwd = finding_about(report, FWD), *bwd = finding_about(report, BWD);
    assert_non_null(fwd);
    assert_non_null(bwd);
    assert_workers(fwd, (int[]){2}, 1);
    assert_workers(bwd, (int[]){6}, 1);
    assert_null(pt_json_get(pt_json_get(fwd, "evidence"), "parts"));
    assert_no_time_counted_twice(report);
    pt_json_free(report);
}

#define FREE "cudaFree"
#define MALLOC "cudaMalloc"
#define EMPTY_CACHE "train.py: <module>|train.py: train|model.py: forward|torch/cuda/memory.py: empty_cache"

/* torch.cuda.empty_cache() after every layer: each layer's memory freed (under the
 * builtin empty_cache calls), then allocated again by the next layer's operators. On rank
 * `rank` only (-1: on every rank); with `gpu_ms` of kernels per step. */
static void allocator_job(rank_work *ranks, int world, int rank, bool churn, int64_t gpu_ms)
{
    for (int r = 0; r < world; r++) {
        bool here = churn && (rank < 0 || r == rank);
        ranks[r] = (rank_work){{{PT_CLASS_COMPUTE, FWD, 8, gpu_ms * 4 / 7}, {PT_CLASS_COMPUTE, BWD, 8, gpu_ms * 3 / 7},
                                {PT_CLASS_PYTHON, LOAD, 1, 4}}};
        if (here) {
            ranks[r].fns[3] = (rank_fn){PT_CLASS_RUNTIME, FREE, 96, 19,
                                        EMPTY_CACHE "|<built-in function _cuda_emptyCache>"};
            ranks[r].fns[4] = (rank_fn){PT_CLASS_RUNTIME, MALLOC, 96, 17,
                                        "train.py: <module>|train.py: train|model.py: forward|aten::linear|aten::addmm"};
        }
    }
}

/* cudaFree and the cudaMalloc that follows it are one cause, allocator churn: one finding,
 * named by the Python frame that releases the memory (where torch.cuda.empty_cache() is
 * called, not the builtin under it), on every worker (a common finding; a one-trace job
 * too) or on the one rank that does it (a peer finding; in the smallest job with peers
 * too). With little GPU work the churn makes the job CPU-bound, and that finding, saving
 * nothing beyond the churn's, is no finding of its own. */
static void test_allocator_churn_is_one_finding(void **state)
{
    (void)state;
    static const int cases[][3] = {{1, -1, 210}, {CAUSE_WORLD, -1, 210}, {3, 2, 210}, {CAUSE_WORLD, 5, 210},
                                   {CAUSE_WORLD, -1, 49}}; /* world, rank, GPU ms */
    for (size_t c = 0; c < PT_ARRAY_LEN(cases); c++) {
        int world = cases[c][0], rank = cases[c][1];
        rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
        allocator_job(with, world, rank, true, cases[c][2]);
        allocator_job(without, world, rank, false, cases[c][2]);
        pt_json *report = diagnose_job(with, world);
        assert_int_equal(pt_json_get(diagnosis_of(report), "findings")->count, 1);
        const pt_json *f = finding(report, 0);
        assert_string_equal(pt_json_get_string(f, "category", ""), "cuda_runtime");
        assert_string_equal(pt_json_get_string(f, "function", ""), EMPTY_CACHE);
        assert_string_equal(pt_json_get_string(pt_json_get(f, "evidence"), "key", ""), FREE);
        assert_true(pt_json_get(f, "all_workers")->boolean == (rank < 0));
        assert_true(has_part(f, FREE) && has_part(f, MALLOC));
        assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "allocator churn"));
        assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "empty_cache()"));
        size_t runtime = 0;
        const pt_json *findings = pt_json_get(diagnosis_of(report), "findings");
        for (size_t i = 0; i < findings->count; i++)
            runtime += strcmp(pt_json_get_string(findings->items[i], "category", ""), "cuda_runtime") == 0;
        assert_int_equal(runtime, 1);
        assert_impact_near(f, true_saving(with, without, world));
        assert_no_time_counted_twice(report);
        assert_sentence_says_saves_ms(f);
        pt_json_free(report);
    }
}

/* A CPU-bound job: the churn is one part of its CPU side, six small Python stacks the
 * rest. The CPU-bound finding saves more than the churn alone and holds it: one finding,
 * the churn's calls among its parts, not a second finding counting their time again. */
static void test_a_cpu_bound_job_holds_its_allocator_churn(void **state)
{
    (void)state;
    static const char *const stacks[] = {"train.py: train|a.py: a", "train.py: train|b.py: b", "train.py: train|c.py: c",
                                         "train.py: train|d.py: d", "train.py: train|e.py: e", "train.py: train|f.py: f"};
    rank_work ranks[CAUSE_WORLD];
    allocator_job(ranks, CAUSE_WORLD, -1, true, 49);
    for (int r = 0; r < CAUSE_WORLD; r++)
        for (int k = 0; k < 6; k++)
            ranks[r].fns[5 + k] = (rank_fn){PT_CLASS_PYTHON, stacks[k], 1, 6, NULL};
    pt_json *report = diagnose_job(ranks, CAUSE_WORLD);
    assert_int_equal(pt_json_get(diagnosis_of(report), "findings")->count, 1);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "cpu_bound");
    assert_true(has_part(f, FREE) && has_part(f, MALLOC));
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), " It includes what `cudaFree` (a median of "));
    assert_no_time_counted_twice(report);
    assert_sentence_says_saves_ms(f);
    pt_json_free(report);
}

/* A pipeline stage (ranks 6 and 7) running more layers than the others: more calls of the
 * forward and the backward kernels, one cause, one finding naming the stage's ranks. */
static void stage_job(rank_work *ranks, bool extra_layers)
{
    for (int r = 0; r < CAUSE_WORLD; r++) {
        int layers = extra_layers && r >= 6 ? 12 : 8;
        ranks[r] = (rank_work){{{PT_CLASS_COMPUTE, FWD, layers, 5 * layers / 2},
                                {PT_CLASS_COMPUTE, BWD, layers, 5 * layers},
                                {PT_CLASS_PYTHON, LOAD, 1, 4}}};
    }
}

static void test_a_stage_with_more_layers_is_one_finding(void **state)
{
    (void)state;
    rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
    stage_job(with, true);
    stage_job(without, false);
    pt_json *report = diagnose_job(with, CAUSE_WORLD);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_workers(f, (int[]){6, 7}, 2);
    assert_int_equal(pt_json_get(diagnosis_of(report), "findings")->count, 1);
    assert_true(has_part(f, FWD) && has_part(f, BWD));
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "Ranks 6 and 7 make more calls than the other workers in 2 GPU kernels: "));
    assert_non_null(strstr(summary, "12 calls per step against 8"));
    assert_impact_near(f, true_saving(with, without, CAUSE_WORLD));
    assert_no_time_counted_twice(report);
    assert_sentence_says_saves_ms(f);
    pt_json_free(report);
}

/* Four pipeline stages of two ranks running 3, 3, 2 and 4 layers (8 microbatches), each
 * layer one large kernel and seven small ones: the last stage's extra layer is 5 ms of the
 * large kernel and 1 ms of each small one, under the floor alone and above it together.
 * One finding names that stage with all eight kernels; the stages of 3 layers are the
 * typical worker, not a grade above the stage of 2 (it does less work, not the same
 * work faster). Balanced ([3, 3, 3, 3]) is the job without the fault. */
static void layered_job(rank_work *ranks, const int *layers)
{
    static const char *const kernels[] = {"big_kernel1_1_1|1_1_1", "s1_kernel1_1_1|1_1_1", "s2_kernel1_1_1|1_1_1",
                                          "s3_kernel1_1_1|1_1_1", "s4_kernel1_1_1|1_1_1", "s5_kernel1_1_1|1_1_1",
                                          "s6_kernel1_1_1|1_1_1", "s7_kernel1_1_1|1_1_1"};
    for (int r = 0; r < CAUSE_WORLD; r++) {
        int l = layers[r / 2];
        memset(&ranks[r], 0, sizeof ranks[r]);
        for (int k = 0; k < 8; k++)
            ranks[r].fns[k] = (rank_fn){PT_CLASS_COMPUTE, kernels[k], 8 * l, (k == 0 ? 5 : 1) * l, NULL};
        ranks[r].fns[8] = (rank_fn){PT_CLASS_PYTHON, LOAD, 1, 4, NULL};
    }
}

static void test_a_stage_with_an_extra_layer_is_one_finding_however_small_its_kernels(void **state)
{
    (void)state;
    static const int imbalanced[] = {3, 3, 2, 4}, balanced[] = {3, 3, 3, 3};
    rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
    layered_job(with, imbalanced);
    layered_job(without, balanced);
    pt_json *report = diagnose_job(with, CAUSE_WORLD);
    assert_int_equal(pt_json_get(diagnosis_of(report), "findings")->count, 1);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_string_equal(pt_json_get_string(f, "function", ""), "big_kernel1_1_1|1_1_1");
    assert_workers(f, (int[]){6, 7}, 2);
    assert_int_equal(parts_of(f)->count, 8);
    assert_impact_near(f, true_saving(with, without, CAUSE_WORLD));
    assert_no_time_counted_twice(report);
    assert_sentence_says_saves_ms(f);
    pt_json_free(report);
}

/* Rank 3 calls small kernels more often than the others, each 1 or 2 ms more, all under
 * the floor (3% of a step of about 100 ms: 3 ms): 2 ms in all is still no finding, 4 ms
 * is one, with the three kernels its parts. */
static void test_extra_gpu_work_clears_the_floor_summed_over_its_kernels(void **state)
{
    (void)state;
    for (int64_t third = 0; third <= 2; third += 2) { /* the third kernel's extra ms: 2 or 4 ms in all */
        rank_work ranks[CAUSE_WORLD];
        for (int r = 0; r < CAUSE_WORLD; r++) {
            bool more = r == 3;
            ranks[r] = (rank_work){{{PT_CLASS_COMPUTE, "big_kernel1_1_1|1_1_1", 2, 76, NULL},
                                    {PT_CLASS_COMPUTE, "s1_kernel1_1_1|1_1_1", more ? 2 : 1, more ? 2 : 1, NULL},
                                    {PT_CLASS_COMPUTE, "s2_kernel1_1_1|1_1_1", more ? 2 : 1, more ? 2 : 1, NULL},
                                    {PT_CLASS_COMPUTE, "s3_kernel1_1_1|1_1_1", more && third ? 3 : 1,
                                     more ? 1 + third : 1, NULL},
                                    {PT_CLASS_PYTHON, LOAD, 1, 4, NULL}}};
        }
        assert_int_equal(job_step_ms(ranks, CAUSE_WORLD), 100 + third); /* the floor: 3 or 3.06 ms */
        pt_json *report = diagnose_job(ranks, CAUSE_WORLD);
        if (!third) {
            assert_string_equal(verdict(report), "healthy");
        } else {
            const pt_json *f = finding(report, 0);
            assert_workers(f, (int[]){3}, 1);
            assert_int_equal(parts_of(f)->count, 3);
            assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "Rank 3 makes more calls than the other "
                                                                            "workers in 3 GPU kernels: "));
        }
        pt_json_free(report);
    }
}

/* A GPU uniformly slower over six kernels: the rolled-up slow-GPU finding. Each kernel is
 * also above its peers on its own (graded against the fastest workers); those are parts
 * of the rolled-up finding, not findings adding their savings to it (the 26% +
 * 15% + 7.5% for a 26% fault). With rank 5's first kernel 4 ms slower too, that kernel's
 * finding names ranks 3 and 5: rank 3's time in it is the rolled-up finding's, and what
 * is left of it is rank 5's alone (it saves only once rank 3 is fixed). */
static void test_a_rolled_up_gpu_finding_holds_its_kernels(void **state)
{
    (void)state;
    static const char *const kernels[] = {"k0_kernel1_1_1|1_1_1", "k1_kernel1_1_1|1_1_1", "k2_kernel1_1_1|1_1_1",
                                          "k3_kernel1_1_1|1_1_1", "k4_kernel1_1_1|1_1_1", "k5_kernel1_1_1|1_1_1"};
    for (int64_t noise = 0; noise <= 4; noise += 4) {
        rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
        memset(with, 0, sizeof with);
        memset(without, 0, sizeof without);
        for (int r = 0; r < CAUSE_WORLD; r++)
            for (int k = 0; k < 6; k++) {
                int64_t on_5 = r == 5 && k == 0 ? noise : 0;
                with[r].fns[k] = (rank_fn){PT_CLASS_COMPUTE, kernels[k], 2, (r == 3 ? 15 : 10) + on_5, NULL};
                without[r].fns[k] = (rank_fn){PT_CLASS_COMPUTE, kernels[k], 2, 10 + on_5, NULL};
            }
        pt_json *report = diagnose_job(with, CAUSE_WORLD);
        const pt_json *f = finding(report, 0);
        assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
        assert_workers(f, (int[]){3}, 1);
        assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "uniformly slower"));
        /* The class holds its kernels' excess: counted once, not the class's and theirs again. */
        assert_non_null(strstr(pt_json_get_string(f, "summary", ""), ", 30 ms more per step"));
        assert_int_equal(parts_of(f)->count, noise ? 5 : 6);
        assert_int_equal(findings_naming(report, 3), 1);
        assert_impact_near(f, true_saving(with, without, CAUSE_WORLD));
        assert_no_time_counted_twice(report);
        assert_sentence_says_saves_ms(f);
        if (noise) { /* the rolled-up finding is named by k0 too: rank 5's is the other one */
            const pt_json *findings = pt_json_get(diagnosis_of(report), "findings");
            assert_int_equal(findings->count, 2);
            assert_string_equal(pt_json_get_string(findings->items[1], "function", ""), kernels[0]);
            assert_workers(findings->items[1], (int[]){5}, 1);
        }
        pt_json_free(report);
    }
}

#define SAVE "train.py: train|ckpt.py: save_checkpoint"
#define SERIALIZE SAVE "|torch/serialization.py: save"
#define SAVE_LIKE "train.py: train|ckpt.py: save_checkpoint_async" /* a prefix of its name, not a frame of it */

/* A checkpoint on rank 4: its frame's own time and the serialization it calls are one
 * cause, named at the frame a user would change; a function whose name merely starts
 * like it is another. */
static void test_a_frame_and_the_frames_it_calls_are_one_finding(void **state)
{
    (void)state;
    rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
    three_kernel_job(with, CAUSE_WORLD, -1, 100, -1, 0);
    three_kernel_job(without, CAUSE_WORLD, -1, 100, -1, 0);
    with[4].fns[4] = (rank_fn){PT_CLASS_PYTHON, SAVE, 1, 10};
    with[4].fns[5] = (rank_fn){PT_CLASS_PYTHON, SERIALIZE, 1, 20};
    with[1].fns[4] = (rank_fn){PT_CLASS_PYTHON, SAVE_LIKE, 1, 15};
    without[1].fns[4] = with[1].fns[4];
    pt_json *report = diagnose_job(with, CAUSE_WORLD);
    const pt_json *f = finding(report, 0);
    assert_string_equal(pt_json_get_string(f, "function", ""), SAVE);
    assert_workers(f, (int[]){4}, 1);
    assert_true(has_part(f, SAVE) && has_part(f, SERIALIZE) && !has_part(f, SAVE_LIKE));
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "Rank 4 runs work the other workers do not (or "
                                                                    "barely) in Python `train.py: train > ckpt.py: "
                                                                    "save_checkpoint` and the code it calls: "));
    assert_impact_near(f, true_saving(with, without, CAUSE_WORLD));
    const pt_json *like = finding_about(report, SAVE_LIKE);
    assert_non_null(like);
    assert_workers(like, (int[]){1}, 1);
    assert_no_time_counted_twice(report);
    pt_json_free(report);
}

#define AUGMENT "train.py: train|aug.py: augment"

/* Rank 3 has two faults of different causes, a slower forward kernel and slower data
 * loading (20 ms each), and rank 5 augments its data 25 ms longer: fixing either of rank
 * 3's alone saves 15 ms (rank 5 then sets the pace), both together 15 ms too. They stay
 * two findings (two things to change), each with its own saving, and the second says what
 * it adds once the first is fixed (nothing); what they add sums to the joint saving. */
static void test_different_causes_of_one_straggler_say_what_they_add(void **state)
{
    (void)state;
    rank_work with[CAUSE_WORLD], without_fwd[CAUSE_WORLD];
    three_kernel_job(with, CAUSE_WORLD, -1, 100, 3, 20);
    with[3].fns[0].ms += 20;
    with[5].fns[4] = (rank_fn){PT_CLASS_PYTHON, AUGMENT, 1, 25};
    memcpy(without_fwd, with, sizeof with);
    without_fwd[3].fns[0].ms -= 20;
    pt_json *report = diagnose_job(with, CAUSE_WORLD);
    const pt_json *fwd = finding_about(report, FWD), *load = finding_about(report, LOAD);
    assert_non_null(fwd);
    assert_non_null(load);
    assert_workers(fwd, (int[]){3}, 1);
    assert_workers(load, (int[]){3}, 1);
    assert_impact_near(fwd, true_saving(with, without_fwd, CAUSE_WORLD));
    assert_impact_near(load, true_saving(with, without_fwd, CAUSE_WORLD)); /* as large */
    const pt_json *second = finding(report, 1);
    assert_true(second == fwd || second == load);
    assert_true(pt_json_get_number(second, "adds", 1) < 0.005);
    assert_non_null(strstr(pt_json_get_string(second, "summary", ""), "Fixed after the findings above, it saves "
                                                                        "0 ms per step (0%): part of its saving is "
                                                                        "step time they save too."));
    const pt_json *first = finding(report, 0);
    assert_true(fabs(pt_json_get_number(first, "adds", 0) - pt_json_get_number(first, "impact", 1)) < 1e-6);
    assert_null(strstr(pt_json_get_string(first, "summary", ""), "Fixed after"));
    assert_adds_sum_to_the_joint_saving(report);
    pt_json_free(report);
}

static int cmp_double(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

/* A finding about some of the workers saves at least 1% of the step (PT_MIN_SAVING_SHARE),
 * or it is no finding: rank 3 loads its data 3 + d ms longer than the others, and rank 5
 * runs its optimizer 3 ms longer (under the peers' floor, no finding of its own), so
 * fixing rank 3 saves d ms: rank 5 then sets the pace. d = 1 saves 1/103 of the step
 * (0.97%): nothing is said; d = 2 saves 2/104 (1.9%): rank 3 is named, for that. */
static pt_json *loader_behind_another_job(int64_t d, rank_work *ranks)
{
    three_kernel_job(ranks, CAUSE_WORLD, -1, 100, 3, 3 + d);
    ranks[5].fns[2].ms += 3;
    return diagnose_job(ranks, CAUSE_WORLD);
}

/* Work only rank 3 does (a checkpoint the others never write) is no chance: it stays
 * when fixing it saves under 1% -- the model may not see what it costs the others. */
static void test_work_only_one_rank_does_stays_under_a_hundredth(void **state)
{
    (void)state;
    rank_work ranks[CAUSE_WORLD];
    three_kernel_job(ranks, CAUSE_WORLD, -1, 100, -1, 0);
    ranks[3].fns[4] = (rank_fn){PT_CLASS_PYTHON, "train.py: train|train.py: save_checkpoint", 1, 4, NULL};
    ranks[5].fns[2].ms += 3;
    pt_json *report = diagnose_job(ranks, CAUSE_WORLD);
    assert_int_equal(findings_naming(report, 3), 1);
    const pt_json *f = finding_about(report, "train.py: train|train.py: save_checkpoint");
    assert_non_null(f);
    assert_true(pt_json_get_number(f, "impact", 1) < 0.01);
    pt_json_free(report);
}

/* A CPU job whose collectives run on gloo's threads, which the collector does not see: no
 * worker waits in the summaries, so the others' wait for rank 2's 40 ms sleep is work of
 * their backward and the model saves nothing by removing it. Work only rank 2 does is no
 * chance: it stays, saying why the model cannot cost it. One worker seen waiting 1 ms is
 * a model that sees waits: the finding then goes with what the model says. */
static void test_work_only_one_rank_does_stays_when_no_wait_is_seen(void **state)
{
    (void)state;
    for (int seen = 0; seen < 2; seen++) {
        pt_worker_summary *w[WORLD];
        for (int r = 0; r < WORLD; r++) {
            int64_t python = seen && r == 4 ? 99 : 100;
            int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{0, 0, 0, 0, python}};
            w[r] = sync_worker(r, WORLD, "node0", 100, 0, NULL, busy);
            w[r]->device_count = WORLD;
            if (r == 2) {
                add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|train.py: train_step|<built-in method run_backward>",
                            1, 60);
                add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|data.py: load_batch|<built-in function sleep>", 1, 40);
            } else {
                add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|train.py: train_step|<built-in method run_backward>",
                            1, (double)python);
            }
        }
        pt_json *report = diagnose(w, WORLD);
        const pt_json *f = finding_about(report, "train.py: train|data.py: load_batch|<built-in function sleep>");
        if (seen) {
            assert_null(f);
        } else {
            assert_non_null(f);
            assert_workers(f, (int[]){2}, 1);
            assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "which saw no worker wait"));
        }
        pt_json_free(report);
    }
}

/* Step 1 of a job with no wait seen lasts longer on every worker: rank 1 waited 20 ms
 * more in its backward, the others 10 ms in their logging. Rank 1's backward is "20 ms above
 * the others" only because its wait is counted as work: no finding names it (the
 * per-rank candidates look for none when no wait is seen). */
static void test_a_wait_counted_as_work_names_no_rank(void **state)
{
    (void)state;
    static const char backward[] = "train.py: train|train.py: train_step|<built-in method run_backward>",
                      logging[] = "train.py: train|train.py: log_metrics|<built-in function print>";
    pt_worker_summary *w[WORLD];
    for (int r = 0; r < WORLD; r++) {
        int64_t busy[MAX_PIECES][PT_CLASS_COUNT] = {{0, 0, 0, 0, 100}};
        w[r] = sync_worker(r, WORLD, "node0", 100, 0, NULL, busy);
        w[r]->device_count = WORLD;
        add_step_fn(w[r], PT_CLASS_PYTHON, backward, 1, 60);
        add_step_fn(w[r], PT_CLASS_PYTHON, logging, 1, 2);
        add_step_fn(w[r], PT_CLASS_PYTHON, "train.py: train|data.py: load_batch|<built-in method read>", 1, 38);
        pt_function_summary *waited = &w[r]->functions[r == 1 ? 0 : 1];
        int64_t more = (r == 1 ? 20 : 10) * MS; /* its window ends later: it waited longer */
        waited->step_exposed_ns[1] += more, waited->exposed_ns += more, waited->total_ns += more;
        pt_step_summary *st = w[r]->steps;
        st[1].dur_ns += more, st[2].start_ns += more;
        st[1].tail_busy_ns[PT_CLASS_PYTHON] += more, st[1].exposed_ns[PT_CLASS_PYTHON] += more;
        w[r]->window_ns += more;
        w[r]->exposed_ns[PT_CLASS_PYTHON] += more, w[r]->union_ns[PT_CLASS_PYTHON] += more;
    }
    pt_json *report = diagnose(w, WORLD);
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    for (size_t i = 0; i < findings->count; i++) {
        const pt_json *named = pt_json_get(findings->items[i], "workers");
        print_message("  finding %zu: %s\n", i, pt_json_get_string(findings->items[i], "summary", ""));
        assert_false(named->count == 1 && named->items[0]->integer == 1);
    }
    pt_json_free(report);
}

static void test_a_finding_saves_at_least_a_hundredth_of_the_step(void **state)
{
    (void)state;
    rank_work with[CAUSE_WORLD], without[CAUSE_WORLD];
    pt_json *report = loader_behind_another_job(1, with);
    assert_int_equal(findings_naming(report, 3), 0);
    assert_string_equal(pt_json_get_string(diagnosis_of(report), "verdict", ""), "healthy");
    pt_json_free(report);
    report = loader_behind_another_job(2, with);
    three_kernel_job(without, CAUSE_WORLD, -1, 100, 3, 0);
    without[5].fns[2].ms += 3;
    assert_int_equal(findings_naming(report, 3), 1);
    const pt_json *f = pt_json_get(diagnosis_of(report), "findings")->items[0];
    assert_impact_near(f, true_saving(with, without, CAUSE_WORLD));
    assert_true(pt_json_get_number(f, "impact", 0) >= 0.01);
    pt_json_free(report);
}

/* The per-call comparison reads the others' median off three middle order statistics
 * (diagnose/peers.c): they must be a sort's, ties and both ends included. */
static void test_select_around_matches_a_sort(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (size_t n = 1; n <= 40; n++)
        for (size_t k = 0; k < n; k++) {
            double values[40], sorted[40], out[3];
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                values[i] = sorted[i] = (double)((seed >> 16) % 7); /* few values: many ties */
            }
            qsort(sorted, n, sizeof *sorted, cmp_double);
            pt_select_around(values, n, k, out);
            assert_true(out[1] == sorted[k]);
            if (k > 0)
                assert_true(out[0] == sorted[k - 1]);
            else
                assert_true(isnan(out[0]));
            if (k + 1 < n)
                assert_true(out[2] == sorted[k + 1]);
            else
                assert_true(isnan(out[2]));
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segments_between_sync_points_add_up),
        cmocka_unit_test(test_graded_job_names_the_pace_setter_first),
        cmocka_unit_test(test_extra_runtime_calls_name_their_caller),
        cmocka_unit_test(test_more_calls_are_counted_against_the_peers),
        cmocka_unit_test(test_slow_host_gpus_are_one_finding),
        cmocka_unit_test(test_one_worker_is_not_every_worker),
        cmocka_unit_test(test_healthy_is_not_flagged),
        cmocka_unit_test(test_slow_python_worker_is_named_first),
        cmocka_unit_test(test_two_slow_gpus_share_one_finding),
        cmocka_unit_test(test_common_memcpy_is_all_workers),
        cmocka_unit_test(test_throttled_gpu_is_a_hardware_finding),
        cmocka_unit_test(test_hang_names_the_worker_others_wait_for),
        cmocka_unit_test(test_missing_and_failed_ranks_are_listed),
        cmocka_unit_test(test_two_workers_are_not_compared),
        cmocka_unit_test(test_report_carries_the_step_timeline),
        cmocka_unit_test(test_select_around_matches_a_sort),
        cmocka_unit_test(test_inputs_of_one_job_are_compared),
        cmocka_unit_test(test_world_sizes_that_differ_are_not_one_job),
        cmocka_unit_test(test_a_rank_claimed_twice_is_not_one_job),
        cmocka_unit_test(test_windows_far_apart_are_not_one_job),
        cmocka_unit_test(test_a_partial_job_says_the_slowest_may_be_missing),
        cmocka_unit_test(test_a_partial_job_counts_the_last_arrival),
        cmocka_unit_test(test_a_round_without_its_slow_rank_says_partial),
        cmocka_unit_test(test_saves_ms_is_the_figure_of_the_sentence),
        cmocka_unit_test(test_gpu_work_that_saves_nothing_stays_only_on_a_shared_gpu),
        cmocka_unit_test(test_two_stragglers_that_save_only_together_stay),
        cmocka_unit_test(test_a_gpu_slower_on_its_few_kernels_is_one_finding),
        cmocka_unit_test(test_kernels_of_different_ranks_stay_apart),
        cmocka_unit_test(test_allocator_churn_is_one_finding),
        cmocka_unit_test(test_a_cpu_bound_job_holds_its_allocator_churn),
        cmocka_unit_test(test_a_stage_with_more_layers_is_one_finding),
        cmocka_unit_test(test_a_stage_with_an_extra_layer_is_one_finding_however_small_its_kernels),
        cmocka_unit_test(test_extra_gpu_work_clears_the_floor_summed_over_its_kernels),
        cmocka_unit_test(test_a_rolled_up_gpu_finding_holds_its_kernels),
        cmocka_unit_test(test_a_frame_and_the_frames_it_calls_are_one_finding),
        cmocka_unit_test(test_different_causes_of_one_straggler_say_what_they_add),
        cmocka_unit_test(test_a_finding_saves_at_least_a_hundredth_of_the_step),
        cmocka_unit_test(test_work_only_one_rank_does_stays_under_a_hundredth),
        cmocka_unit_test(test_work_only_one_rank_does_stays_when_no_wait_is_seen),
        cmocka_unit_test(test_a_wait_counted_as_work_names_no_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
