/* The summarizer on a hand-built event stream whose every number is known, and the
 * summary file format: exact round trip, and corrupt input rejected without a crash. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "summarize/summarize.h"
#include "summarize/summary_io.h"

static void feed(pt_trace_sink *sink, pt_event_kind kind, const char *name, int64_t ts, int64_t dur, int64_t tid)
{
    pt_event ev;
    pt_event_init(&ev, kind);
    ev.name = name;
    ev.name_len = strlen(name);
    ev.ts_ns = ts;
    ev.dur_ns = dur;
    ev.tid = tid;
    if (kind == PT_EVENT_STEP)
        ev.step = 1;
    if (kind == PT_EVENT_GPU_KERNEL && strncmp(name, "nccl", 4) != 0) {
        ev.grid[0] = 2, ev.grid[1] = ev.grid[2] = 1;
        ev.block[0] = 128, ev.block[1] = ev.block[2] = 1;
    }
    if (kind == PT_EVENT_GPU_KERNEL && strncmp(name, "nccl", 4) == 0) {
        ev.coll.name = "allreduce";
        ev.coll.name_len = 9;
        ev.coll.in_nelems = ev.coll.out_nelems = 1000000;
        ev.coll.group_size = 2;
        ev.coll.dtype_bytes = 4;
    }
    sink->on_event(sink->ctx, &ev);
}

/* A collective kernel of `nelems` elements of `dtype_bytes` (0: no collective arguments). */
static void feed_collective(pt_trace_sink *sink, int64_t ts, int64_t nelems, int dtype_bytes)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_GPU_KERNEL);
    ev.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)";
    ev.name_len = strlen(ev.name);
    ev.ts_ns = ts;
    ev.dur_ns = 100000;
    ev.tid = 20;
    if (dtype_bytes) {
        ev.coll.name = "allreduce";
        ev.coll.name_len = 9;
        ev.coll.in_nelems = ev.coll.out_nelems = nelems;
        ev.coll.group_size = 2;
        ev.coll.dtype_bytes = dtype_bytes;
    }
    sink->on_event(sink->ctx, &ev);
}

static pt_worker_summary *finish(pt_summarizer *s)
{
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    meta.rank = 0;
    meta.world_size = 2;
    pt_error err = {{0}};
    pt_worker_summary *out = pt_summarizer_finish(s, &meta, "host_0_1.json", &err);
    pt_summarizer_free(s);
    assert_non_null(out);
    return out;
}

static pt_worker_summary *known_summary(void)
{
    pt_summarizer *s = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(s);
    feed(&sink, PT_EVENT_STEP, "ProfilerStep#1", 0, 1000000, 1);
    feed(&sink, PT_EVENT_GPU_KERNEL, "gemm", 100000, 200000, 7);
    feed(&sink, PT_EVENT_GPU_KERNEL, "gemm", 500000, 100000, 7);
    feed(&sink, PT_EVENT_GPU_MEMCPY, "Memcpy DtoH (Device -> Pinned)", 250000, 100000, 7);
    feed(&sink, PT_EVENT_GPU_KERNEL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 300000, 200000, 20);
    feed(&sink, PT_EVENT_RUNTIME, "cudaLaunchKernel", 90000, 20000, 1);
    feed(&sink, PT_EVENT_CPU, "train.py(10): main", 0, 1000000, 1);
    feed(&sink, PT_EVENT_CPU, "train.py(20): step", 50000, 650000, 1);
    feed(&sink, PT_EVENT_CPU, "data.py(5): load", 600000, 50000, 1);
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    meta.rank = 3;
    meta.world_size = 4;
    snprintf(meta.device_name, sizeof meta.device_name, "NVIDIA H100 80GB HBM3");
    snprintf(meta.software, sizeof meta.software, "torch 2.5.1, cuda 12.4");
    meta.device_count = 8;
    pt_error err = {{0}};
    pt_worker_summary *out = pt_summarizer_finish(s, &meta, "host_3_42.json", &err);
    pt_summarizer_free(s);
    assert_non_null(out);
    return out;
}

static const pt_function_summary *must_find(const pt_worker_summary *s, pt_class cls, const char *name)
{
    const pt_function_summary *f = pt_summary_find(s, cls, name);
    if (!f)
        fail_msg("no %s function '%s'", pt_class_name(cls), name);
    return f;
}

/* A collective's bytes per call: the mean over the calls whose arguments say (a call
 * without them counts in neither), and the largest; they travel in the summary. */
static void test_collective_bytes(void **state)
{
    (void)state;
    pt_summarizer *s = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(s);
    feed(&sink, PT_EVENT_STEP, "ProfilerStep#1", 0, 1000000, 1);
    feed_collective(&sink, 100000, 1000000, 4);  /* 4 MB */
    feed_collective(&sink, 300000, 6000000, 2);  /* 12 MB */
    feed_collective(&sink, 500000, 0, 0);        /* unknown */
    pt_worker_summary *w = finish(s);
    const pt_function_summary *c = must_find(w, PT_CLASS_COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)");
    assert_int_equal(c->count, 3);
    assert_true(c->bytes_avg == 8e6 && c->bytes_max == 12e6);
    pt_buf a = PT_BUF_INIT;
    pt_summary_encode(w, &a);
    pt_error err = {{0}};
    pt_worker_summary *d = pt_summary_decode(a.data, a.len, &err);
    assert_non_null(d);
    c = must_find(d, PT_CLASS_COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)");
    assert_true(c->bytes_avg == 8e6 && c->bytes_max == 12e6);
    pt_summary_free(d);
    pt_buf_free(&a);
    pt_summary_free(w);
}

static void test_known_numbers(void **state)
{
    (void)state;
    pt_worker_summary *s = known_summary();
    assert_int_equal(s->rank, 3);
    assert_string_equal(s->host, "host");
    assert_int_equal(s->local_rank, 3);
    assert_int_equal(s->pid, 42);
    assert_true(s->window_ns == 1000000);
    assert_true(s->exposed_ns[PT_CLASS_COMPUTE] == 300000);
    assert_true(s->exposed_ns[PT_CLASS_MEMORY] == 50000);
    assert_true(s->exposed_ns[PT_CLASS_COMM] == 150000);
    assert_true(s->exposed_ns[PT_CLASS_RUNTIME] == 10000);
    assert_true(s->exposed_ns[PT_CLASS_PYTHON] == 490000);
    assert_true(s->idle_ns == 0);

    const pt_function_summary *k = must_find(s, PT_CLASS_COMPUTE, "gemm2_1_1|128_1_1");
    assert_int_equal(k->count, 2);
    assert_true(k->total_ns == 300000 && k->exposed_ns == 300000 && k->median_ns == 150000 && k->max_ns == 200000);
    const pt_function_summary *m = must_find(s, PT_CLASS_MEMORY, "Memcpy DtoH (Device -> Pinned)");
    assert_true(m->exposed_ns == 50000);
    const pt_function_summary *c = must_find(s, PT_CLASS_COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)");
    assert_true(c->exposed_ns == 150000);
    assert_string_equal(c->group, "nvlink ring");
    assert_true(fabs(c->busbw_avg_gbps - 20.0) < 1e-9);          /* 4 MB in 200 us, factor 1 */
    assert_true(fabs(c->throughput_avg_pct - 100.0 * 20 / 450) < 1e-9);
    assert_true(must_find(s, PT_CLASS_RUNTIME, "cudaLaunchKernel")->exposed_ns == 10000);

    assert_true(must_find(s, PT_CLASS_PYTHON, "train.py: main")->exposed_ns == 350000);
    assert_true(must_find(s, PT_CLASS_PYTHON, "train.py: main|train.py: step")->exposed_ns == 90000);
    const pt_function_summary *load = must_find(s, PT_CLASS_PYTHON, "train.py: main|train.py: step|data.py: load");
    assert_true(load->exposed_ns == 50000 && load->count == 1);
    assert_int_equal(s->step_count, 1);
    assert_true(s->steps[0].exposed_ns[PT_CLASS_PYTHON] == 490000);
    pt_summary_free(s);
}

static void test_round_trip_is_exact(void **state)
{
    (void)state;
    pt_worker_summary *s = known_summary();
    pt_buf a = PT_BUF_INIT, b = PT_BUF_INIT;
    pt_summary_encode(s, &a);
    pt_error err = {{0}};
    pt_worker_summary *d = pt_summary_decode(a.data, a.len, &err);
    assert_non_null(d);
    pt_summary_encode(d, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_true(d->functions[0].throughput_avg_pct == s->functions[0].throughput_avg_pct);
    assert_string_equal(d->software, "torch 2.5.1, cuda 12.4"); /* version 5 carries it */
    pt_summary_free(d);
    pt_buf_free(&a);
    pt_buf_free(&b);
    pt_summary_free(s);
}

static void test_corruption_is_rejected(void **state)
{
    (void)state;
    pt_worker_summary *s = known_summary();
    pt_buf a = PT_BUF_INIT;
    pt_summary_encode(s, &a);
    pt_error err = {{0}};
    for (size_t cut = 0; cut < a.len; cut += 7)
        assert_null(pt_summary_decode(a.data, cut, &err));
    assert_true(err.message[0] != '\0'); /* a cut input says why */
    srand(3);
    int refused = 0;
    for (int round = 0; round < 300; round++) {
        /* Flipped bytes: an error that says why, or a summary that keeps every rule and
         * encodes again to bytes that decode to the same summary -- never a crash, never
         * half a summary. */
        pt_buf c = PT_BUF_INIT;
        pt_buf_append(&c, a.data, a.len);
        c.data[8 + (size_t)rand() % (a.len - 8)] ^= (char)(1 + rand() % 255);
        memset(&err, 0, sizeof err);
        pt_worker_summary *d = pt_summary_decode(c.data, c.len, &err);
        if (!d) {
            assert_true(err.message[0] != '\0');
            refused++;
        } else {
            pt_error check = {{0}};
            assert_int_equal(pt_summary_check(d, &check), 0);
            pt_buf again = PT_BUF_INIT, twice = PT_BUF_INIT;
            pt_summary_encode(d, &again);
            pt_worker_summary *e = pt_summary_decode(again.data, again.len, &check);
            assert_non_null(e);
            pt_summary_encode(e, &twice);
            assert_int_equal(again.len, twice.len);
            assert_memory_equal(again.data, twice.data, again.len);
            pt_summary_free(e);
            pt_buf_free(&again);
            pt_buf_free(&twice);
        }
        pt_summary_free(d);
        pt_buf_free(&c);
    }
    assert_true(refused > 0); /* the decoder refuses corruption (it is not all accepted) */
    a.data[8] = 99; /* version */
    assert_null(pt_summary_decode(a.data, a.len, &err));
    assert_non_null(strstr(err.message, "version"));
    pt_buf_free(&a);
    pt_summary_free(s);
}

/* The header's payload length is a claim: a summary of a few KB claiming 200 MiB must be
 * refused for what it is (its frame yields less), without allocating the 200 MiB first.
 * The decode runs in a child whose RLIMIT_DATA allows 64 MiB more than it holds (VmData,
 * which counts the sanitizers' mappings too), so allocating the claim kills the child. */
static long vm_data_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static void test_claimed_payload_length_is_not_allocated(void **state)
{
    (void)state;
    pt_worker_summary *s = known_summary();
    pt_buf a = PT_BUF_INIT;
    pt_summary_encode(s, &a);
    uint64_t claim = 200u << 20;
    for (int i = 0; i < 8; i++)
        a.data[16 + i] = (char)(claim >> (8 * i));
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        long data = vm_data_bytes();
        struct rlimit limit = {(rlim_t)data + (64 << 20), (rlim_t)data + (64 << 20)};
        if (data < 0 || setrlimit(RLIMIT_DATA, &limit) != 0)
            _exit(3);
        pt_error err = {{0}};
        pt_worker_summary *d = pt_summary_decode(a.data, a.len, &err);
        _exit(d == NULL && strstr(err.message, "size mismatch") ? 0 : 4);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    pt_buf_free(&a);
    pt_summary_free(s);
}

static void test_event_budget_bounds_what_is_kept(void **state)
{
    (void)state;
    setenv("PERFTRACKER_ANALYZE_MAX_EVENTS", "4", 1);
    pt_worker_summary *s = known_summary(); /* 9 events: the step, 3 kernels, ... */
    unsetenv("PERFTRACKER_ANALYZE_MAX_EVENTS");
    assert_int_equal(s->events, 9);
    bool warned = false;
    for (size_t i = 0; i < s->warning_count; i++)
        warned |= strstr(s->warnings[i], "more than 4 events") != NULL;
    assert_true(warned);
    /* Only the first four (the step, two gemms, the memcpy) were analysed. */
    assert_null(pt_summary_find(s, PT_CLASS_COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"));
    assert_non_null(pt_summary_find(s, PT_CLASS_MEMORY, "Memcpy DtoH (Device -> Pinned)"));
    pt_summary_free(s);
}

static void test_file_name_facts(void **state)
{
    (void)state;
    pt_file_name_facts f;
    pt_parse_worker_file_name("job_x08j11173.cloud.sqa.na131_2_122482.json", &f);
    assert_string_equal(f.host, "job_x08j11173.cloud.sqa.na131");
    assert_int_equal(f.local_rank, 2);
    assert_int_equal(f.pid, 122482);
    pt_parse_worker_file_name("node3_5_1234.json.gz", &f);
    assert_string_equal(f.host, "node3");
    assert_int_equal(f.local_rank, 5);
    assert_int_equal(f.pid, 1234);
    assert_int_equal(f.rank, -1);
    pt_parse_worker_file_name("worker7_step_12.1694128201553.pt.trace.json.gz", &f);
    assert_int_equal(f.rank, 7);
    pt_parse_worker_file_name("sampled_rank-1.json.gz", &f);
    assert_int_equal(f.rank, 1);
}

/* gloo's collectives in a raw trace (issue 17.10): the stretch between a copy to pinned
 * memory and the copy back on a stream of gloo's is communication -- only on a gloo job,
 * only on a stream that runs no kernel. */
static int64_t staged_comm_ns(const char *backend, bool kernel_on_gloo_stream)
{
    pt_summarizer *s = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(s);
    feed(&sink, PT_EVENT_STEP, "ProfilerStep#1", 0, 1000000, 1);
    feed(&sink, PT_EVENT_GPU_KERNEL, "gemm", 0, 50000, 7);
    feed(&sink, PT_EVENT_GPU_MEMCPY, "Memcpy DtoH (Device -> Pinned)", 100000, 50000, 9);
    feed(&sink, PT_EVENT_GPU_MEMCPY, "Memcpy HtoD (Pinned -> Device)", 600000, 50000, 9);
    if (kernel_on_gloo_stream)
        feed(&sink, PT_EVENT_GPU_KERNEL, "gemm", 900000, 10000, 9);
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    snprintf(meta.backend, sizeof meta.backend, "%s", backend);
    pt_error err = {{0}};
    pt_worker_summary *out = pt_summarizer_finish(s, &meta, "w.ptrace", &err);
    pt_summarizer_free(s);
    assert_non_null(out);
    int64_t comm = out->exposed_ns[PT_CLASS_COMM];
    if (comm)
        assert_non_null(pt_summary_find(out, PT_CLASS_COMM, "gloo:collective"));
    pt_summary_free(out);
    return comm;
}

static void test_gloo_collectives_from_pinned_copies(void **state)
{
    (void)state;
    assert_true(staged_comm_ns("gloo", false) == 450000); /* 150 us to 600 us */
    assert_true(staged_comm_ns("nccl", false) == 0);
    assert_true(staged_comm_ns("gloo", true) == 0);
}

/* Two different stacks deeper than 256 frames that end in the same 256 frames render to
 * one name; the summary must hold them as one function (a valid summary, with a warning),
 * with both stacks' time, not two functions of one name that the validator refuses. */
static void feed_deep_stack(pt_trace_sink *sink, const char *root, int64_t base)
{
    feed(sink, PT_EVENT_CPU, root, base, 300000, 1);
    for (int k = 1; k < 300; k++)
        feed(sink, PT_EVENT_CPU, "deep.py(7): deep", base + k * 100, 300000 - k * 200, 1);
}

static void test_deep_stacks_sharing_a_name_merge(void **state)
{
    (void)state;
    pt_summarizer *s = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(s);
    feed(&sink, PT_EVENT_STEP, "ProfilerStep#1", 0, 1000000, 1);
    feed_deep_stack(&sink, "a.py(1): root_a", 0);
    feed_deep_stack(&sink, "b.py(1): root_b", 400000);
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    pt_worker_summary *out = pt_summarizer_finish(s, &meta, "host_0_1.json", &err);
    pt_summarizer_free(s);
    assert_non_null(out);
    assert_int_equal(pt_summary_check(out, &err), 0);
    pt_buf innermost = PT_BUF_INIT;
    pt_buf_puts(&innermost, "...|");
    for (int k = 0; k < 256; k++)
        pt_buf_puts(&innermost, k ? "|deep.py: deep" : "deep.py: deep"); /* stacks drop line numbers */
    const pt_function_summary *f = must_find(out, PT_CLASS_PYTHON, innermost.data);
    /* Each innermost frame works 300000 - 299 * 200 = 240200 ns on its own. */
    assert_int_equal(f->exposed_ns, 2 * 240200);
    bool warned = false;
    for (size_t i = 0; i < out->warning_count; i++)
        warned |= strstr(out->warnings[i], "shared a name with another") != NULL;
    assert_true(warned);
    pt_buf_free(&innermost);
    pt_summary_free(out);
}

static void feed_counter(pt_trace_sink *sink, const char *metric, int64_t ts, double value)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_COUNTER);
    ev.name = metric;
    ev.name_len = strlen(metric);
    ev.ts_ns = ts;
    ev.value = value;
    sink->on_event(sink->ctx, &ev);
}

static const pt_metric_summary *must_find_metric(const pt_worker_summary *s, const char *name)
{
    for (size_t i = 0; i < s->metric_count; i++)
        if (strcmp(s->metrics[i].name, name) == 0)
            return &s->metrics[i];
    fail_msg("no metric '%s'", name);
    return NULL;
}

/* Hardware counters: mean, min and max over the window's finite samples, and the series
 * the page plots, each of its 200 buckets (5 us of this 1 ms window) the mean of the
 * samples in it, placed at the bucket's middle. Worked out by hand: */
static void test_metric_series_values(void **state)
{
    (void)state;
    pt_summarizer *s = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(s);
    feed(&sink, PT_EVENT_STEP, "ProfilerStep#1", 0, 1000000, 1);
    feed(&sink, PT_EVENT_GPU_KERNEL, "gemm", 100000, 200000, 7);
    feed_counter(&sink, "gpu0.sm_active", 1000, 10);    /* bucket 0 */
    feed_counter(&sink, "gpu0.sm_active", 2000, 30);    /* bucket 0: (10 + 30) / 2 = 20 */
    feed_counter(&sink, "host.cpu_util", 250000, 5);    /* another metric, bucket 50 */
    feed_counter(&sink, "gpu0.sm_active", 500000, 60);  /* bucket 100 */
    feed_counter(&sink, "gpu0.sm_active", 600000, NAN); /* not a value: skipped */
    feed_counter(&sink, "gpu0.sm_active", 1000000, 90); /* the window's end: the last bucket */
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    pt_worker_summary *out = pt_summarizer_finish(s, &meta, "host_0_1.json", &err);
    pt_summarizer_free(s);
    assert_non_null(out);
    assert_int_equal(out->window_ns, 1000000);
    assert_int_equal(out->metric_count, 2);

    const pt_metric_summary *sm = must_find_metric(out, "gpu0.sm_active");
    assert_int_equal(sm->samples, 4);
    assert_true(fabs(sm->mean - 47.5) < 1e-9); /* (10 + 30 + 60 + 90) / 4 */
    assert_true(sm->min == 10 && sm->max == 90);
    assert_int_equal(sm->points, 3);
    const double at_ms[] = {0.5 * 0.005, 100.5 * 0.005, 199.5 * 0.005}, mean[] = {20, 60, 90};
    for (size_t i = 0; i < 3; i++) {
        assert_true(fabs(sm->series_ms[i] - at_ms[i]) < 1e-6);
        assert_true(fabs(sm->series_value[i] - mean[i]) < 1e-6);
    }
    const pt_metric_summary *cpu = must_find_metric(out, "host.cpu_util");
    assert_int_equal(cpu->samples, 1);
    assert_true(cpu->mean == 5 && cpu->min == 5 && cpu->max == 5);
    assert_int_equal(cpu->points, 1);
    assert_true(fabs(cpu->series_ms[0] - 50.5 * 0.005) < 1e-6 && cpu->series_value[0] == 5);
    pt_summary_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_known_numbers), cmocka_unit_test(test_round_trip_is_exact),
                                       cmocka_unit_test(test_collective_bytes),
        cmocka_unit_test(test_metric_series_values),
                                       cmocka_unit_test(test_gloo_collectives_from_pinned_copies),
                                       cmocka_unit_test(test_corruption_is_rejected),
                                       cmocka_unit_test(test_claimed_payload_length_is_not_allocated),
                                       cmocka_unit_test(test_event_budget_bounds_what_is_kept),
                                       cmocka_unit_test(test_file_name_facts),
                                       cmocka_unit_test(test_deep_stacks_sharing_a_name_merge)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
