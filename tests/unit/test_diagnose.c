/* The diagnosis on summaries built in code: the right worker, category and function come
 * first; healthy jobs are not flagged; common problems are all_workers; hangs name the
 * worker the others wait for. (The synthetic-trace fault suite in tests/engine checks the
 * same end to end, from traces.) */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/diagnose.h"

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
    assert_non_null(pt_json_get(report, "Hardware"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy_is_not_flagged),
        cmocka_unit_test(test_slow_python_worker_is_named_first),
        cmocka_unit_test(test_two_slow_gpus_share_one_finding),
        cmocka_unit_test(test_common_memcpy_is_all_workers),
        cmocka_unit_test(test_throttled_gpu_is_a_hardware_finding),
        cmocka_unit_test(test_hang_names_the_worker_others_wait_for),
        cmocka_unit_test(test_missing_and_failed_ranks_are_listed),
        cmocka_unit_test(test_two_workers_are_not_compared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
