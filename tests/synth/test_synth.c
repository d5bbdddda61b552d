/* The synthetic job generator: causal, lock-step timing; determinism; a healthy job that
 * looks healthy to the summarizer; every fault changing what it claims, on the faulty
 * rank(s) only; the answer key naming functions exactly as summaries key them; the
 * in-memory summary path giving the summary the written trace gives; and the shapes of
 * real jobs: Kineto categories, the autograd thread, gloo's CPU-thread all-reduces with
 * backward blocked on them, and noise that changes durations but never calls. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "synth/synth.h"
#include "trace/kineto_writer.h"

/* ------------------------------------------------------------ helpers */

typedef struct rec {
    pt_event ev;
    char *name;
    size_t order;
} rec;

typedef struct worker_events {
    rec *items;
    size_t count, cap;
} worker_events;

static int collect_event(void *ctx, const pt_event *ev)
{
    worker_events *w = ctx;
    PT_GROW(w->items, w->cap, w->count + 1);
    rec *r = &w->items[w->count];
    r->ev = *ev;
    r->name = strndup(ev->name, ev->name_len);
    r->ev.name = r->name;
    r->order = w->count++;
    return 0;
}

static void events_free(worker_events *w)
{
    for (size_t i = 0; i < w->count; i++)
        free(w->items[i].name);
    free(w->items);
    memset(w, 0, sizeof *w);
}

static void collect(const pt_synth_plan *plan, int rank, worker_events *out)
{
    memset(out, 0, sizeof *out);
    pt_trace_sink sink = {out, collect_event, NULL};
    pt_trace_meta meta;
    pt_error err = {{0}};
    if (pt_synth_plan_worker(plan, rank, &sink, &meta, &err) != 0)
        fail_msg("rank %d: %s", rank, err.message);
}

static pt_synth_job job_for(pt_fault_kind fault, int workers, int gpus_per_node, uint64_t seed)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.fault = fault;
    job.workers = workers;
    job.gpus_per_node = gpus_per_node;
    job.seed = seed;
    return job;
}

static pt_synth_plan *plan_of(const pt_synth_job *job)
{
    pt_error err = {{0}};
    pt_synth_plan *p = pt_synth_plan_new(job, &err);
    if (!p)
        fail_msg("plan: %s", err.message);
    return p;
}

static pt_synth_plan *plan_for(pt_fault_kind fault, int workers, int gpus_per_node, uint64_t seed)
{
    pt_synth_job job = job_for(fault, workers, gpus_per_node, seed);
    return plan_of(&job);
}

static pt_worker_summary *summarize(const pt_synth_plan *plan, int rank)
{
    pt_error err = {{0}};
    pt_worker_summary *out = pt_synth_plan_summary(plan, rank, &err);
    if (!out)
        fail_msg("summarize rank %d: %s", rank, err.message);
    return out;
}

static int64_t end_of(const pt_event *ev)
{
    return ev->ts_ns + ev->dur_ns;
}

static bool is_gpu(const pt_event *ev)
{
    return ev->kind == PT_EVENT_GPU_KERNEL || ev->kind == PT_EVENT_GPU_MEMCPY || ev->kind == PT_EVENT_GPU_MEMSET;
}

static bool is_nccl(const pt_event *ev)
{
    return ev->kind == PT_EVENT_GPU_KERNEL && strncmp(ev->name, "nccl", 4) == 0;
}

static bool named(const pt_event *ev, pt_event_kind kind, const char *name)
{
    return ev->kind == kind && strcmp(ev->name, name) == 0;
}

static bool is_gloo(const pt_event *ev)
{
    return named(ev, PT_EVENT_CPU, "gloo:all_reduce");
}

static bool inside(const pt_event *inner, const pt_event *outer)
{
    return inner->ts_ns >= outer->ts_ns && end_of(inner) <= end_of(outer);
}

static int cmp_start(const void *a, const void *b)
{
    const rec *x = *(rec *const *)a, *y = *(rec *const *)b;
    if (x->ev.ts_ns != y->ev.ts_ns)
        return x->ev.ts_ns < y->ev.ts_ns ? -1 : 1;
    if (x->ev.dur_ns != y->ev.dur_ns) /* parents (longer) before children */
        return x->ev.dur_ns > y->ev.dur_ns ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* ------------------------------------------------------------ causality */

/* Every GPU activity comes right after the runtime call that launched it and starts no
 * earlier than that call's end (a synchronous cudaMemcpy: inside the call). */
static void check_launch_order(const worker_events *w)
{
    for (size_t i = 0; i < w->count; i++) {
        const pt_event *ev = &w->items[i].ev;
        if (!is_gpu(ev))
            continue;
        assert_true(i > 0);
        const pt_event *call = &w->items[i - 1].ev;
        assert_int_equal(call->kind, PT_EVENT_RUNTIME);
        assert_true(ev->dur_ns >= 0);
        if (strcmp(call->name, "cudaMemcpy") == 0) {
            assert_true(ev->ts_ns >= call->ts_ns);
            assert_true(end_of(ev) <= end_of(call));
        } else {
            assert_true(ev->ts_ns >= end_of(call));
        }
    }
}

/* On each stream, an activity starts no earlier than its predecessor ends. */
static void check_streams(const worker_events *w)
{
    rec **gpu = malloc((w->count + 1) * sizeof *gpu);
    size_t n = 0;
    for (size_t i = 0; i < w->count; i++)
        if (is_gpu(&w->items[i].ev))
            gpu[n++] = &w->items[i];
    qsort(gpu, n, sizeof *gpu, cmp_start);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            if (gpu[j]->ev.tid != gpu[i]->ev.tid || gpu[j]->ev.device != gpu[i]->ev.device)
                continue;
            assert_true(gpu[j]->ev.ts_ns >= end_of(&gpu[i]->ev)); /* next one on this stream */
            break;
        }
    free(gpu);
}

/* CPU frames and runtime calls on each thread nest: each lies inside every frame open
 * when it starts. Returns the number of threads. */
static int check_cpu_nesting(const worker_events *w)
{
    rec **cpu = malloc((w->count + 1) * sizeof *cpu);
    size_t n = 0;
    for (size_t i = 0; i < w->count; i++)
        if (w->items[i].ev.kind == PT_EVENT_CPU || w->items[i].ev.kind == PT_EVENT_RUNTIME)
            cpu[n++] = &w->items[i];
    qsort(cpu, n, sizeof *cpu, cmp_start);
    int64_t threads[8];
    int thread_count = 0;
    for (size_t i = 0; i < n; i++) {
        int t = 0;
        while (t < thread_count && threads[t] != cpu[i]->ev.tid)
            t++;
        if (t == thread_count) {
            assert_true(thread_count < 8);
            threads[thread_count++] = cpu[i]->ev.tid;
        }
    }
    for (int t = 0; t < thread_count; t++) {
        int64_t open_end[128];
        int depth = 0;
        for (size_t i = 0; i < n; i++) {
            const pt_event *ev = &cpu[i]->ev;
            if (ev->tid != threads[t])
                continue;
            while (depth && open_end[depth - 1] <= ev->ts_ns)
                depth--;
            if (depth)
                assert_true(end_of(ev) <= open_end[depth - 1]);
            assert_true(depth < 128);
            if (ev->kind == PT_EVENT_CPU)
                open_end[depth++] = end_of(ev);
        }
    }
    assert_true(thread_count >= 2); /* the autograd thread ran the backward */
    free(cpu);
    return thread_count;
}

static size_t steps_of(const worker_events *w, int64_t *starts, int64_t *ends, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < w->count; i++)
        if (w->items[i].ev.kind == PT_EVENT_STEP && n < cap) {
            starts[n] = w->items[i].ev.ts_ns;
            ends[n++] = end_of(&w->items[i].ev);
        }
    return n;
}

/* The i-th all-reduce of every rank is the same collective: it ends at the same moment
 * everywhere, after every rank started it; the last to arrive has the shortest kernel. */
static void check_collectives(const worker_events *w, int workers)
{
    size_t count = SIZE_MAX;
    for (int r = 0; r < workers; r++) {
        size_t c = 0;
        for (size_t i = 0; i < w[r].count; i++)
            c += is_nccl(&w[r].items[i].ev);
        count = c < count ? c : count;
    }
    assert_true(count > 0);
    size_t *cursor = calloc(workers > 0 ? (size_t)workers : 1, sizeof *cursor);
    for (size_t k = 0; k < count; k++) {
        int64_t end = -1, latest_start = -1, shortest = INT64_MAX, latest_dur = -1;
        for (int r = 0; r < workers; r++) {
            while (!is_nccl(&w[r].items[cursor[r]].ev))
                cursor[r]++;
            const pt_event *ev = &w[r].items[cursor[r]++].ev;
            if (end < 0)
                end = end_of(ev);
            assert_int_equal(end_of(ev), end);
            assert_true(ev->coll.group_size == workers && ev->coll.in_nelems > 0 && ev->coll.dtype_bytes == 4);
            if (ev->ts_ns > latest_start)
                latest_start = ev->ts_ns, latest_dur = ev->dur_ns;
            if (ev->dur_ns < shortest)
                shortest = ev->dur_ns;
        }
        assert_true(end >= latest_start);
        assert_int_equal(latest_dur, shortest);
    }
    free(cursor);
}

/* The k-th gloo:all_reduce of every rank is the same collective. Each holds the wait
 * for its bucket's copy to the host (cudaStreamSynchronize, ending after the copy) and
 * ends, once the CPU all-reduce is over, with the copy back; the all-reduce ends at the
 * same moment everywhere, so the threads' events end within the copy back's own CPU time
 * (well under the all-reduce's) of each other. They run on two gloo threads, never on the main or autograd thread. */
static void check_gloo_collectives(const worker_events *w, int workers)
{
    size_t count = SIZE_MAX;
    for (int r = 0; r < workers; r++) {
        size_t c = 0;
        for (size_t i = 0; i < w[r].count; i++) {
            assert_false(is_nccl(&w[r].items[i].ev));
            c += is_gloo(&w[r].items[i].ev);
        }
        count = c < count ? c : count;
    }
    assert_true(count > 0);
    size_t *cursor = calloc(workers > 0 ? (size_t)workers : 1, sizeof *cursor);
    for (size_t k = 0; k < count; k++) {
        int64_t first_end = INT64_MAX, last_end = 0;
        for (int r = 0; r < workers; r++) {
            while (!is_gloo(&w[r].items[cursor[r]].ev))
                cursor[r]++;
            size_t at = cursor[r]++;
            const pt_event *ar = &w[r].items[at].ev;
            assert_int_equal(ar->cpu_kind, PT_CPU_ANNOTATION);
            int64_t main_tid = w[r].items[0].ev.tid; /* the DtoH's call, on the autograd thread, precedes it */
            const pt_event *sync = &w[r].items[at + 1].ev, *dtoh = &w[r].items[at - 1].ev;
            assert_true(named(sync, PT_EVENT_RUNTIME, "cudaStreamSynchronize") && sync->tid == ar->tid);
            assert_true(inside(sync, ar));
            assert_true(named(dtoh, PT_EVENT_GPU_MEMCPY, "Memcpy DtoH (Device -> Pinned)"));
            assert_true(end_of(dtoh) <= end_of(sync) && dtoh->tid >= 84);
            assert_true(ar->tid != main_tid && ar->tid != w[r].items[at - 2].ev.tid);
            if (end_of(ar) < first_end)
                first_end = end_of(ar);
            if (end_of(ar) > last_end)
                last_end = end_of(ar);
        }
        assert_true(last_end - first_end < 250000); /* the copy back's own CPU time differs */
    }
    free(cursor);
}

static void check_causality_of(const pt_synth_job *job)
{
    pt_synth_plan *plan = plan_of(job);
    worker_events *w = calloc(job->workers > 0 ? (size_t)job->workers : 1, sizeof *w);
    for (int r = 0; r < job->workers; r++) {
        collect(plan, r, &w[r]);
        check_launch_order(&w[r]);
        check_streams(&w[r]);
        int threads = check_cpu_nesting(&w[r]);
        assert_int_equal(threads, job->backend == PT_SYNTH_GLOO ? 4 : 2);
        int64_t s[16], e[16];
        size_t n = steps_of(&w[r], s, e, 16);
        assert_true(n >= 2);
        for (size_t i = 1; i < n; i++)
            assert_true(s[i] >= e[i - 1]);
    }
    if (job->backend == PT_SYNTH_GLOO)
        check_gloo_collectives(w, job->workers);
    else
        check_collectives(w, job->workers);
    for (int r = 0; r < job->workers; r++)
        events_free(&w[r]);
    free(w);
    pt_synth_plan_free(plan);
}

static void check_job_causality(pt_fault_kind fault, int workers, int gpus_per_node)
{
    pt_synth_job job = job_for(fault, workers, gpus_per_node, 7);
    check_causality_of(&job);
}

static void test_causality_healthy(void **state)
{
    (void)state;
    check_job_causality(PT_FAULT_NONE, 8, 8);
}

static void test_causality_multi_node_slow_gpu(void **state)
{
    (void)state;
    check_job_causality(PT_FAULT_SLOW_GPU, 12, 4);
}

static void test_causality_faults(void **state)
{
    (void)state;
    check_job_causality(PT_FAULT_CPU_CONTENTION, 5, 8);
    check_job_causality(PT_FAULT_BLOCKING_DTOH, 4, 8);
    check_job_causality(PT_FAULT_COMMON_MEMCPY, 3, 8);
    check_job_causality(PT_FAULT_HANG, 6, 2);
}

/* The structural kinds keep every causal rule, noisy, from 1 to 9 workers: a kernel after
 * its launch, each stream in order, frames nested, all-reduces lock-step (a synchronous
 * hook's and a per-parameter loop's too). A pipeline's transfers end in pairs, not on every
 * rank at once (test_structural.c): its workers are checked one by one. */
static void test_causality_structural(void **state)
{
    (void)state;
    static const struct {
        pt_fault_kind fault;
        int workers, gpus_per_node, steps;
        double noise;
    } jobs[] = {
        {PT_FAULT_UNBUCKETED_ALLREDUCE, 3, 2, 2, 0.3},   {PT_FAULT_UNOVERLAPPED_ALLREDUCE, 4, 8, 2, 0.3},
        {PT_FAULT_INTERMITTENT_STALL, 2, 8, 3, 0.1},     {PT_FAULT_LOADER_STARVED, 3, 8, 2, 0.3},
        {PT_FAULT_SINGLE_PROCESS_LOADER, 2, 8, 2, 0.3},  {PT_FAULT_SLOW_GPU_MLP, 5, 4, 2, 0.2},
        {PT_FAULT_EMPTY_CACHE, 3, 8, 2, 0.3},            {PT_FAULT_ABSENT_STRAGGLER, 9, 8, 2, 0.1},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        pt_synth_job job = job_for(jobs[i].fault, jobs[i].workers, jobs[i].gpus_per_node, 7);
        job.noise = jobs[i].noise;
        job.steps = jobs[i].steps;
        check_causality_of(&job);
        job.without = PT_SYNTH_WITHOUT_ALL;
        check_causality_of(&job);
    }
    pt_synth_job job = job_for(PT_FAULT_PIPELINE_IMBALANCE, 6, 4, 7); /* 6 stages */
    job.steps = 2, job.noise = 0.3;
    pt_synth_plan *plan = plan_of(&job);
    for (int r = 0; r < job.workers; r++) {
        worker_events w;
        collect(plan, r, &w);
        check_launch_order(&w);
        check_streams(&w);
        assert_int_equal(check_cpu_nesting(&w), 2);
        events_free(&w);
    }
    pt_synth_plan_free(plan);
}

/* Gloo and noise keep every causal rule: healthy, faulty, hung, across nodes. */
static void test_causality_gloo_and_noise(void **state)
{
    (void)state;
    static const struct {
        pt_fault_kind fault;
        int workers, gpus_per_node;
        pt_synth_backend backend;
        double noise;
    } jobs[] = {
        {PT_FAULT_NONE, 4, 8, PT_SYNTH_GLOO, 0},         {PT_FAULT_SLOW_DATALOADER, 6, 2, PT_SYNTH_GLOO, 0},
        {PT_FAULT_HANG, 5, 8, PT_SYNTH_GLOO, 0},         {PT_FAULT_BLOCKING_DTOH, 4, 8, PT_SYNTH_GLOO, 0.3},
        {PT_FAULT_SLOW_GPU, 4, 8, PT_SYNTH_NCCL, 0.5},   {PT_FAULT_CPU_CONTENTION, 3, 8, PT_SYNTH_GLOO, 0.2},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        pt_synth_job job = job_for(jobs[i].fault, jobs[i].workers, jobs[i].gpus_per_node, 7);
        job.backend = jobs[i].backend;
        job.noise = jobs[i].noise;
        check_causality_of(&job);
    }
}

/* ------------------------------------------------------------ determinism */

static void write_worker(const pt_synth_plan *plan, int rank, const char *path)
{
    pt_error err = {{0}};
    pt_kineto_writer *w = pt_kineto_writer_open(path, false, &err);
    assert_non_null(w);
    pt_trace_meta meta;
    pt_synth_plan_meta(plan, rank, &meta);
    pt_kineto_writer_meta(w, &meta);
    pt_trace_sink sink = pt_kineto_writer_sink(w);
    assert_int_equal(pt_synth_plan_worker(plan, rank, &sink, &meta, &err), 0);
    assert_int_equal(pt_kineto_writer_close(w, &err), 0);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n + 1);
    assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return data;
}

static void test_determinism(void **state)
{
    (void)state;
    char a[64], b[64], c[64];
    snprintf(a, sizeof a, "/tmp/pt_synth_det_a_%d.json", (int)getpid());
    snprintf(b, sizeof b, "/tmp/pt_synth_det_b_%d.json", (int)getpid());
    snprintf(c, sizeof c, "/tmp/pt_synth_det_c_%d.json", (int)getpid());
    pt_synth_plan *p1 = plan_for(PT_FAULT_SLOW_GPU, 6, 8, 42);
    pt_synth_plan *p2 = plan_for(PT_FAULT_SLOW_GPU, 6, 8, 42);
    pt_synth_plan *p3 = plan_for(PT_FAULT_SLOW_GPU, 6, 8, 43);
    write_worker(p1, 2, c); /* emitting another rank first must not matter */
    write_worker(p1, 3, a);
    write_worker(p2, 3, b);
    size_t la, lb, lc;
    char *da = slurp(a, &la), *db = slurp(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    write_worker(p3, 3, c);
    char *dc = slurp(c, &lc);
    assert_true(la != lc || memcmp(da, dc, la) != 0);
    free(da), free(db), free(dc);
    pt_synth_plan_free(p1), pt_synth_plan_free(p2), pt_synth_plan_free(p3);

    /* Gloo with noise: the same job gives the same bytes; other noise, other bytes. */
    pt_synth_job job = job_for(PT_FAULT_GC_PAUSE, 4, 8, 42);
    job.backend = PT_SYNTH_GLOO;
    job.noise = 0.3;
    p1 = plan_of(&job);
    p2 = plan_of(&job);
    job.noise = 0.2;
    p3 = plan_of(&job);
    write_worker(p1, 1, c);
    write_worker(p1, 2, a);
    write_worker(p2, 2, b);
    write_worker(p3, 2, c);
    da = slurp(a, &la), db = slurp(b, &lb), dc = slurp(c, &lc);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    assert_true(la != lc || memcmp(da, dc, la) != 0);
    free(da), free(db), free(dc);
    unlink(a), unlink(b), unlink(c);
    pt_synth_plan_free(p1), pt_synth_plan_free(p2), pt_synth_plan_free(p3);
}

/* ------------------------------------------------------------ real shapes */

/* Every frame says what Kineto files it under: Python frames python_function,
 * operators and autograd nodes cpu_op, record_function ranges user_annotation; the
 * writer writes those categories. The autograd thread runs the evaluate_function nodes
 * and launches their kernels while the main thread sits in run_backward. */
static void test_cpu_kinds_and_autograd_thread(void **state)
{
    (void)state;
    pt_synth_job job = job_for(PT_FAULT_NONE, 2, 8, 3);
    job.backend = PT_SYNTH_GLOO;
    pt_synth_plan *plan = plan_of(&job);
    worker_events w;
    collect(plan, 0, &w);
    int64_t main_tid = w.items[0].ev.tid, autograd_tid = -1;
    size_t kinds[4] = {0}, nodes = 0, autograd_launches = 0;
    for (size_t i = 0; i < w.count; i++) {
        const pt_event *ev = &w.items[i].ev;
        if (ev->kind == PT_EVENT_CPU && strncmp(ev->name, "autograd::engine::evaluate_function: ", 37) == 0) {
            autograd_tid = ev->tid;
            nodes++;
        }
        if (ev->kind != PT_EVENT_CPU)
            continue;
        assert_true(ev->cpu_kind > PT_CPU_UNKNOWN && ev->cpu_kind <= PT_CPU_ANNOTATION);
        kinds[ev->cpu_kind]++;
        bool python = strstr(ev->name, ".py(") || strncmp(ev->name, "<built-in", 9) == 0;
        bool label = is_gloo(ev) || strcmp(ev->name, "DistributedDataParallel.forward") == 0 ||
                     strcmp(ev->name, "Optimizer.step#AdamW.step") == 0;
        pt_cpu_kind want = python ? PT_CPU_PYTHON : label ? PT_CPU_ANNOTATION : PT_CPU_OPERATOR;
        if (ev->cpu_kind != want)
            fail_msg("%s: kind %d, expected %d", ev->name, ev->cpu_kind, want);
    }
    assert_true(kinds[PT_CPU_PYTHON] > 0 && kinds[PT_CPU_OPERATOR] > 0 && kinds[PT_CPU_ANNOTATION] > 0);
    assert_true(nodes > 100 && autograd_tid != main_tid);
    const pt_event *run_backward = NULL;
    for (size_t i = 0; i < w.count; i++) {
        const pt_event *ev = &w.items[i].ev;
        if (named(ev, PT_EVENT_RUNTIME, "cudaLaunchKernel") && ev->tid == autograd_tid)
            autograd_launches++;
        if (ev->kind == PT_EVENT_CPU && strncmp(ev->name, "<built-in method run_backward", 29) == 0 && !run_backward)
            run_backward = ev;
    }
    assert_true(autograd_launches > 100);
    assert_non_null(run_backward);
    assert_int_equal(run_backward->tid, main_tid);
    for (size_t i = 0; i < w.count; i++) { /* nothing runs on the main thread inside it */
        const pt_event *ev = &w.items[i].ev;
        if (ev->tid == main_tid && ev->ts_ns > run_backward->ts_ns)
            assert_true(ev->ts_ns >= end_of(run_backward));
    }

    char path[64];
    snprintf(path, sizeof path, "/tmp/pt_synth_kinds_%d.json", (int)getpid());
    write_worker(plan, 0, path);
    size_t len;
    char *text = slurp(path, &len);
    assert_non_null(strstr(text, "\"cat\":\"user_annotation\",\"name\":\"gloo:all_reduce\""));
    assert_non_null(strstr(text, "\"cat\":\"user_annotation\",\"name\":\"DistributedDataParallel.forward\""));
    assert_non_null(strstr(text, "\"cat\":\"cpu_op\",\"name\":\"c10d::allreduce_\""));
    assert_non_null(strstr(text, "\"cat\":\"python_function\",\"name\":\"\\u003cbuilt-in method run_backward"));
    assert_non_null(strstr(text, "\"backend\":\"gloo\""));
    free(text);
    unlink(path);
    events_free(&w);
    pt_synth_plan_free(plan);
}

static int64_t sum_in(const worker_events *w, bool (*pick)(const pt_event *), int64_t from, int64_t to)
{
    int64_t total = 0;
    for (size_t i = 0; i < w->count; i++)
        if (pick(&w->items[i].ev) && w->items[i].ev.ts_ns >= from && w->items[i].ev.ts_ns < to)
            total += w->items[i].ev.dur_ns;
    return total;
}

static bool is_compute(const pt_event *ev)
{
    return ev->kind == PT_EVENT_GPU_KERNEL && !is_nccl(ev);
}

/* Gloo: the main thread's run_backward ends only after the step's last all-reduce, and
 * the straggler (slow GPU) spends the least time in them: the others wait for it. */
static void test_gloo_backward_blocks(void **state)
{
    (void)state;
    pt_synth_job job = job_for(PT_FAULT_SLOW_GPU, 4, 8, 9);
    job.backend = PT_SYNTH_GLOO;
    pt_synth_plan *plan = plan_of(&job);
    int64_t in_gloo[4];
    for (int r = 0; r < 4; r++) {
        worker_events w;
        collect(plan, r, &w);
        pt_trace_meta meta;
        pt_synth_plan_meta(plan, r, &meta);
        assert_string_equal(meta.backend, "gloo");
        int64_t s[8], e[8];
        size_t steps = steps_of(&w, s, e, 8);
        assert_int_equal(steps, 3);
        for (size_t k = 0; k < steps; k++) {
            int64_t backward_end = -1, last_all_reduce = -1;
            for (size_t i = 0; i < w.count; i++) {
                const pt_event *ev = &w.items[i].ev;
                if (ev->ts_ns < s[k] || ev->ts_ns >= e[k])
                    continue;
                if (ev->kind == PT_EVENT_CPU && strncmp(ev->name, "<built-in method run_backward", 29) == 0)
                    backward_end = end_of(ev);
                if (is_gloo(ev) && end_of(ev) > last_all_reduce)
                    last_all_reduce = end_of(ev);
            }
            assert_true(backward_end > 0 && last_all_reduce > 0);
            assert_true(backward_end >= last_all_reduce);
        }
        in_gloo[r] = sum_in(&w, is_gloo, 0, INT64_MAX);
        events_free(&w);
    }
    for (int r = 0; r < 3; r++)
        assert_true(in_gloo[3] < in_gloo[r]);
    pt_synth_plan_free(plan);
}

/* Noise changes how long things take, never what runs: the same events in the same
 * order with other durations (but the links' counters, sampled every 10 ms of a window
 * the noise lengthens); and some (rank, step) runs all its kernels slower. */
static void test_noise_changes_durations_not_calls(void **state)
{
    (void)state;
    pt_synth_job quiet = job_for(PT_FAULT_NONE, 4, 8, 5);
    pt_synth_job noisy = quiet;
    noisy.noise = 0.3;
    pt_synth_plan *pq = plan_of(&quiet), *pn = plan_of(&noisy);
    double spread[2] = {0, 0}; /* per job: the largest (rank, step) kernel time over the smallest */
    for (int job = 0; job < 2; job++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (int r = 0; r < 4; r++) {
            worker_events w;
            collect(job ? pn : pq, r, &w);
            int64_t s[8], e[8];
            size_t steps = steps_of(&w, s, e, 8);
            for (size_t k = 0; k < steps; k++) {
                int64_t t = sum_in(&w, is_compute, s[k], e[k]);
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
            events_free(&w);
        }
        spread[job] = (double)hi / (double)lo;
    }
    assert_true(spread[0] < 1.05);
    assert_true(spread[1] > 1.12);
    for (int r = 0; r < 4; r++) {
        worker_events a, b;
        collect(pq, r, &a);
        collect(pn, r, &b);
        size_t changed = 0, i = 0, k = 0, counters = 0;
        for (;; i++, k++) {
            while (i < a.count && a.items[i].ev.kind == PT_EVENT_COUNTER)
                i++, counters++;
            while (k < b.count && b.items[k].ev.kind == PT_EVENT_COUNTER)
                k++;
            if (i == a.count || k == b.count)
                break;
            assert_int_equal(a.items[i].ev.kind, b.items[k].ev.kind);
            assert_string_equal(a.items[i].ev.name, b.items[k].ev.name);
            changed += a.items[i].ev.dur_ns != b.items[k].ev.dur_ns;
        }
        assert_true(i == a.count && k == b.count);
        assert_true(counters > 0);
        assert_true(changed > (a.count - counters) / 2);
        events_free(&a), events_free(&b);
    }
    pt_synth_plan_free(pq), pt_synth_plan_free(pn);
}

/* ------------------------------------------------------------ the healthy job */

static double share(const pt_worker_summary *s, int64_t ns)
{
    return (double)ns / (double)s->window_ns;
}

static void check_healthy(int workers, int gpus_per_node)
{
    pt_synth_plan *plan = plan_for(PT_FAULT_NONE, workers, gpus_per_node, 3);
    int64_t min_step = INT64_MAX, max_step = 0;
    for (int r = 0; r < workers; r++) {
        pt_worker_summary *s = summarize(plan, r);
        double util = share(s, s->exposed_ns[PT_CLASS_COMPUTE]);
        if (util < 0.6 || util > 0.85)
            fail_msg("rank %d: GPU utilisation %.3f outside [0.6, 0.85]", r, util);
        assert_true(share(s, s->exposed_ns[PT_CLASS_COMM]) < 0.30);
        assert_true(share(s, s->exposed_ns[PT_CLASS_COMM]) > 0.02);
        for (size_t i = 0; i < s->function_count; i++) {
            const pt_function_summary *f = &s->functions[i];
            double x = share(s, f->exposed_ns);
            if (f->cls == PT_CLASS_MEMORY && x >= 0.01)
                fail_msg("rank %d: %s exposed %.4f of the window", r, f->name, x);
            if (f->cls == PT_CLASS_PYTHON && x >= 0.05)
                fail_msg("rank %d: Python stack %s exposed %.4f of the window", r, f->name, x);
            if (f->cls == PT_CLASS_RUNTIME)
                assert_true(x < 0.01);
        }
        assert_int_equal(s->step_count, 3);
        int64_t step = pt_summary_step_ns(s);
        min_step = step < min_step ? step : min_step;
        max_step = step > max_step ? step : max_step;
        assert_int_equal(s->rank, r);
        assert_int_equal(s->world_size, workers);
        pt_summary_free(s);
    }
    /* Lock-step: every worker's step takes the same time, give or take the jitter. */
    assert_true((double)(max_step - min_step) < 0.01 * (double)min_step);
    pt_synth_plan_free(plan);
}

static void test_healthy_one_node(void **state)
{
    (void)state;
    check_healthy(8, 8);
}

static void test_healthy_multi_node(void **state)
{
    (void)state;
    check_healthy(24, 8);
}

/* ------------------------------------------------------------ faults */

typedef struct job_summaries {
    pt_synth_plan *plan;
    pt_worker_summary **s;
    int n;
    pt_json *expected;
} job_summaries;

static job_summaries run_job_on(pt_fault_kind fault, int workers, pt_synth_backend backend)
{
    job_summaries j;
    pt_synth_job job = job_for(fault, workers, 8, 11);
    job.backend = backend;
    j.plan = plan_of(&job);
    j.n = workers;
    j.s = calloc((size_t)workers, sizeof *j.s);
    for (int r = 0; r < workers; r++)
        j.s[r] = summarize(j.plan, r);
    j.expected = pt_synth_plan_expected(j.plan);
    return j;
}

static job_summaries run_job(pt_fault_kind fault, int workers)
{
    return run_job_on(fault, workers, PT_SYNTH_NCCL);
}

static void job_free(job_summaries *j)
{
    for (int r = 0; r < j->n; r++)
        pt_summary_free(j->s[r]);
    free(j->s);
    pt_json_free(j->expected);
    pt_synth_plan_free(j->plan);
}

static const pt_json *finding(const job_summaries *j)
{
    const pt_json *findings = pt_json_get(j->expected, "findings");
    assert_non_null(findings);
    assert_int_equal(findings->count, 1);
    return findings->items[0];
}

static bool faulty(const job_summaries *j, int rank)
{
    const pt_json *workers = pt_json_get(finding(j), "workers");
    for (size_t i = 0; i < workers->count; i++)
        if (workers->items[i]->integer == rank)
            return true;
    return false;
}

static pt_class class_of(const char *category)
{
    if (strcmp(category, "gpu_compute") == 0)
        return PT_CLASS_COMPUTE;
    if (strcmp(category, "gpu_memory") == 0)
        return PT_CLASS_MEMORY;
    if (strcmp(category, "cuda_runtime") == 0)
        return PT_CLASS_RUNTIME;
    if (strcmp(category, "python") == 0)
        return PT_CLASS_PYTHON;
    fail_msg("unexpected category %s", category);
    return PT_CLASS_COUNT;
}

/* The function the answer key of job `key` names, in summary s (NULL when it never ran). */
static const pt_function_summary *expected_function(const job_summaries *key, const pt_worker_summary *s)
{
    const pt_json *f = finding(key);
    return pt_summary_find(s, class_of(pt_json_get_string(f, "category", "")), pt_json_get_string(f, "function", ""));
}

typedef int64_t (*metric_fn)(const pt_function_summary *f);
static int64_t median_of(const pt_function_summary *f) { return f ? f->median_ns : 0; }
static int64_t exposed_of(const pt_function_summary *f) { return f ? f->exposed_ns : 0; }

/* The faulty ranks' value of the named function grows by at least `grows_by` (a
 * fraction of the healthy step, per step, or a factor when as_factor); every other rank
 * keeps the value it has in the healthy job, to within `others_tolerance`. */
static void check_only_faulty_changed(const job_summaries *fault, const job_summaries *healthy, metric_fn metric,
                                      double grows_by, bool as_factor, double others_tolerance)
{
    for (int r = 0; r < fault->n; r++) {
        const pt_function_summary *f = expected_function(fault, fault->s[r]);
        const pt_function_summary *h = expected_function(fault, healthy->s[r]);
        double v = (double)metric(f), base = (double)metric(h);
        double step = (double)pt_summary_step_ns(healthy->s[r]);
        double steps = (double)healthy->s[r]->step_count;
        if (faulty(fault, r)) {
            assert_non_null(f);
            double need = as_factor ? base * grows_by : base + grows_by * step * steps;
            if (v < need)
                fail_msg("faulty rank %d: %.0f < %.0f", r, v, need);
        } else if (fabs(v - base) > others_tolerance * (base > 0 ? base : step)) {
            fail_msg("healthy rank %d changed: %.0f vs %.0f", r, v, base);
        }
    }
}

/* In lock-step, the whole job's step grows by about the severity. */
static void check_step_growth(const job_summaries *fault, const job_summaries *healthy, double severity)
{
    double grown = (double)pt_summary_step_ns(fault->s[0]) / (double)pt_summary_step_ns(healthy->s[0]);
    if (grown < 1 + severity * 0.7 || grown > 1 + severity * 1.3)
        fail_msg("the step grew by %.3f, expected about %.2f", grown - 1, severity);
}

static void check_fault(pt_fault_kind kind, metric_fn metric, double grows_by, bool as_factor, double tolerance)
{
    job_summaries healthy = run_job(PT_FAULT_NONE, 8);
    job_summaries fault = run_job(kind, 8);
    check_only_faulty_changed(&fault, &healthy, metric, grows_by, as_factor, tolerance);
    check_step_growth(&fault, &healthy, 0.3);
    const pt_json *f = finding(&fault);
    assert_false(pt_json_get(f, "all_workers")->boolean);
    job_free(&fault);
    job_free(&healthy);
}

static void test_fault_slow_gpu(void **state)
{
    (void)state;
    check_fault(PT_FAULT_SLOW_GPU, median_of, 1.25, true, 0);
}

static void test_fault_two_slow(void **state)
{
    (void)state;
    check_fault(PT_FAULT_TWO_SLOW, median_of, 1.25, true, 0);
    job_summaries j = run_job(PT_FAULT_TWO_SLOW, 8);
    assert_true(faulty(&j, 1) && faulty(&j, 6) && !faulty(&j, 7));
    job_free(&j);
}

/* Time per call of a function, 0 when it never ran. */
static double per_call(const pt_worker_summary *s, pt_class cls, const char *name)
{
    const pt_function_summary *f = pt_summary_find(s, cls, name);
    return f && f->count ? (double)f->total_ns / (double)f->count : 0;
}

/* A contended host stretches every CPU-side duration alike (Python frames, the data
 * loader, runtime calls) and nothing on the GPU; other hosts are untouched. */
static void test_fault_cpu_contention(void **state)
{
    (void)state;
    static const struct {
        pt_class cls;
        const char *name;
    } cpu_side[] = {
        {PT_CLASS_RUNTIME, "cudaLaunchKernel"},
        {PT_CLASS_RUNTIME, "cudaMemcpyAsync"},
        {PT_CLASS_PYTHON, "train.py: <module>|train.py: train|train.py: log_metrics"},
        {PT_CLASS_PYTHON, "train.py: <module>|train.py: train|torch/utils/data/dataloader.py: __next__|"
                          "torch/utils/data/dataloader.py: _next_data|torch/utils/data/_utils/fetch.py: fetch"},
        {PT_CLASS_PYTHON, "train.py: <module>|train.py: train|train.py: train_step|torch/optim/optimizer.py: zero_grad"},
    };
    job_summaries healthy = run_job(PT_FAULT_NONE, 8);
    job_summaries fault = run_job(PT_FAULT_CPU_CONTENTION, 8);
    const pt_json *f = finding(&fault);
    assert_string_equal(pt_json_get_string(f, "category", ""), "host");
    assert_string_equal(pt_json_get_string(f, "function", ""), "CPU-side work: runtime calls and Python");
    assert_int_equal(pt_json_get(f, "workers")->items[0]->integer, 7);
    double lo = 1e9, hi = 0;
    for (size_t i = 0; i < sizeof cpu_side / sizeof cpu_side[0]; i++) {
        for (int r = 0; r < 8; r++) {
            double was = per_call(healthy.s[r], cpu_side[i].cls, cpu_side[i].name);
            double now = per_call(fault.s[r], cpu_side[i].cls, cpu_side[i].name);
            if (was <= 0)
                fail_msg("%s never ran", cpu_side[i].name);
            double ratio = now / was;
            if (r == 7) {
                lo = ratio < lo ? ratio : lo;
                hi = ratio > hi ? ratio : hi;
            } else if (fabs(ratio - 1) > 0.02) {
                fail_msg("healthy rank %d: %s per call changed by %.3f", r, cpu_side[i].name, ratio);
            }
        }
    }
    if (lo < 1.5 || hi > lo * 1.1) /* one factor for all of them, give or take the jitter */
        fail_msg("faulty rank: CPU-side factors from %.3f to %.3f", lo, hi);
    const char *kernel = NULL; /* the costliest kernel runs as fast as before */
    for (size_t i = 0; i < healthy.s[7]->function_count; i++)
        if (healthy.s[7]->functions[i].cls == PT_CLASS_COMPUTE &&
            (!kernel || healthy.s[7]->functions[i].total_ns > pt_summary_find(healthy.s[7], PT_CLASS_COMPUTE, kernel)->total_ns))
            kernel = healthy.s[7]->functions[i].name;
    double gpu = (double)pt_summary_find(fault.s[7], PT_CLASS_COMPUTE, kernel)->median_ns /
                 (double)pt_summary_find(healthy.s[7], PT_CLASS_COMPUTE, kernel)->median_ns;
    assert_true(fabs(gpu - 1) < 0.02);
    check_step_growth(&fault, &healthy, 0.3);
    job_free(&fault);
    job_free(&healthy);
}

static void test_fault_slow_dataloader(void **state)
{
    (void)state;
    check_fault(PT_FAULT_SLOW_DATALOADER, exposed_of, 0.25, false, 0.001);
}

static void test_fault_gc_pause(void **state)
{
    (void)state;
    check_fault(PT_FAULT_GC_PAUSE, exposed_of, 0.25, false, 0.001);
}

static void test_fault_blocking_dtoh(void **state)
{
    (void)state;
    /* The copy exists only on the faulty rank (healthy value 0 everywhere). */
    check_fault(PT_FAULT_BLOCKING_DTOH, exposed_of, 0.25, false, 0);
}

static void test_fault_common_memcpy(void **state)
{
    (void)state;
    job_summaries j = run_job(PT_FAULT_COMMON_MEMCPY, 8);
    const pt_json *f = finding(&j);
    assert_true(pt_json_get(f, "all_workers")->boolean);
    assert_int_equal(pt_json_get(f, "workers")->count, 8);
    for (int r = 0; r < j.n; r++) {
        const pt_function_summary *fn = expected_function(&j, j.s[r]);
        assert_non_null(fn);
        double x = share(j.s[r], fn->exposed_ns);
        if (x < 0.08 || x > 0.12)
            fail_msg("rank %d: DtoD exposed %.3f of the window, expected ~0.10", r, x);
    }
    job_free(&j);
}

/* Nobody finishes the hang step: the hung rank's trace ends inside it; every other
 * rank's goes on, blocked in the all-reduce (the NCCL kernel, or gloo:all_reduce), until
 * the profiler stops, 8 steps later; what was still open then is not written. */
static void check_hang(pt_synth_backend backend)
{
    bool gloo = backend == PT_SYNTH_GLOO;
    job_summaries j = run_job_on(PT_FAULT_HANG, 8, backend);
    const pt_json *f = finding(&j);
    assert_string_equal(pt_json_get_string(f, "category", ""), "hang");
    assert_int_equal(pt_json_get(f, "function")->type, PT_JSON_NULL);
    assert_int_equal((int)pt_json_get_number(f, "hang_step", -1), 12);
    assert_non_null(strstr(pt_json_get_string(f, "others_blocked_in", ""), gloo ? "gloo:all_reduce" : "ncclDevKernel_AllReduce"));
    int64_t stop = -1;
    for (int r = 0; r < j.n; r++) {
        const pt_worker_summary *s = j.s[r];
        assert_int_equal(s->step_count, 2); /* ProfilerStep#12 never closed anywhere */
        int64_t step = pt_summary_step_ns(s);
        worker_events w;
        collect(j.plan, r, &w);
        int64_t last_end = 0, last_step_end = 0, nccl_after = -1;
        for (size_t i = 0; i < w.count; i++) {
            const pt_event *ev = &w.items[i].ev;
            last_end = end_of(ev) > last_end ? end_of(ev) : last_end;
            if (ev->kind == PT_EVENT_STEP)
                last_step_end = end_of(ev);
        }
        for (size_t i = 0; i < w.count; i++)
            if ((gloo ? is_gloo(&w.items[i].ev) : is_nccl(&w.items[i].ev)) && w.items[i].ev.ts_ns >= last_step_end)
                nccl_after = PT_MAX(nccl_after, end_of(&w.items[i].ev));
        if (faulty(&j, r)) {
            assert_int_equal(r, 7);
            assert_true(last_end - last_step_end < step); /* its trace ends in the step */
            assert_int_equal(nccl_after, -1);             /* it never reached the all-reduce */
            assert_true(s->stall_ns < step);
        } else {
            if (stop < 0)
                stop = last_end;
            assert_int_equal(last_end, stop);     /* the profiler stops everyone at once */
            assert_int_equal(nccl_after, stop);   /* blocked in the all-reduce until then */
            assert_true(last_end - last_step_end > 6 * step);
            /* The summarizer sees a worker blocked in a collective after its last step. */
            assert_int_equal(s->stall_class, PT_CLASS_COMM);
            assert_true(s->stall_ns > 6 * step);
        }
        events_free(&w);
    }
    job_free(&j);
}

static void test_fault_hang(void **state)
{
    (void)state;
    check_hang(PT_SYNTH_NCCL);
    check_hang(PT_SYNTH_GLOO);
}

static void test_expected_names(void **state)
{
    (void)state;
    pt_json *e = NULL;
    pt_synth_job job;
    pt_synth_job_init(&job);
    pt_error err = {{0}};
    assert_int_equal(pt_synth_expected(&job, &e, &err), 0);
    assert_string_equal(pt_json_get_string(e, "verdict", ""), "healthy");
    assert_int_equal(pt_json_get(e, "findings")->count, 0);
    pt_json_free(e);

    job.fault = PT_FAULT_SLOW_DATALOADER;
    job.fault_ranks[0] = 9, job.fault_rank_count = 1;
    job.workers = 16;
    assert_int_equal(pt_synth_expected(&job, &e, &err), 0);
    const pt_json *f = pt_json_get(e, "findings")->items[0];
    assert_string_equal(pt_json_get_string(f, "function", ""),
                        "train.py: <module>|train.py: train|torch/utils/data/dataloader.py: __next__|"
                        "torch/utils/data/dataloader.py: _next_data|torch/utils/data/_utils/fetch.py: fetch");
    assert_string_equal(pt_json_get(f, "worker_names")->items[0]->string, "node1_1_10009.json");
    assert_int_equal(pt_json_get(f, "workers")->items[0]->integer, 9);
    pt_json_free(e);
}

/* ------------------------------------------------------------ summary path == trace path */

static void encode(pt_worker_summary *s, pt_buf *out)
{
    free(s->producer);
    s->producer = strdup("same");
    free(s->name);
    s->name = strdup("same.json");
    pt_summary_encode(s, out);
}

static void test_summary_matches_trace(void **state)
{
    (void)state;
    pt_synth_plan *plan = plan_for(PT_FAULT_SLOW_GPU, 4, 8, 5);
    for (int gz = 0; gz < 2; gz++) {
        char dir[64], path[PT_NAME_MAX + 80], stem[PT_NAME_MAX];
        snprintf(dir, sizeof dir, "/tmp/pt_synth_eq_%d", (int)getpid());
        pt_synth_plan_worker_stem(plan, 3, stem, sizeof stem);
        snprintf(path, sizeof path, "%s_%s.json%s", dir, stem, gz ? ".gz" : "");
        pt_error err = {{0}};
        pt_kineto_writer *w = pt_kineto_writer_open(path, gz, &err);
        assert_non_null(w);
        pt_trace_meta meta;
        pt_synth_plan_meta(plan, 3, &meta);
        pt_kineto_writer_meta(w, &meta);
        pt_trace_sink sink = pt_kineto_writer_sink(w);
        assert_int_equal(pt_synth_plan_worker(plan, 3, &sink, &meta, &err), 0);
        assert_int_equal(pt_kineto_writer_close(w, &err), 0);

        pt_worker_summary *from_trace = pt_summarize_file(path, NULL, &err);
        if (!from_trace)
            fail_msg("%s", err.message);
        pt_worker_summary *direct = summarize(plan, 3);
        assert_int_equal(from_trace->rank, 3);
        assert_string_equal(from_trace->host, "node0");
        assert_int_equal(from_trace->local_rank, 3);
        assert_int_equal(from_trace->pid, direct->pid);
        pt_buf a = PT_BUF_INIT, b = PT_BUF_INIT;
        encode(from_trace, &a);
        encode(direct, &b);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        pt_buf_free(&a), pt_buf_free(&b);
        pt_summary_free(from_trace);
        pt_summary_free(direct);
        unlink(path);
    }
    pt_synth_plan_free(plan);
}

/* ------------------------------------------------------------ names and validation */

static void test_fault_names(void **state)
{
    (void)state;
    for (int k = 0; k < PT_FAULT_KIND_COUNT; k++) {
        pt_fault_kind back;
        assert_int_equal(pt_fault_parse(pt_fault_name((pt_fault_kind)k), &back), 0);
        assert_int_equal(back, k);
    }
    pt_fault_kind k;
    assert_int_equal(pt_fault_parse("slow", &k), -1);
    assert_int_equal(pt_fault_parse("healthy", &k), 0);
    assert_int_equal(k, PT_FAULT_NONE);
    pt_synth_backend b;
    assert_int_equal(pt_synth_backend_parse("gloo", &b), 0);
    assert_int_equal(b, PT_SYNTH_GLOO);
    assert_string_equal(pt_synth_backend_name(b), "gloo");
    assert_int_equal(pt_synth_backend_parse("nccl", &b), 0);
    assert_int_equal(b, PT_SYNTH_NCCL);
    assert_int_equal(pt_synth_backend_parse("mpi", &b), -1);
}

static void expect_invalid(pt_synth_job job, const char *needle)
{
    pt_error err = {{0}};
    pt_synth_plan *p = pt_synth_plan_new(&job, &err);
    if (p)
        fail_msg("accepted an invalid job (%s)", needle);
    if (!strstr(err.message, needle))
        fail_msg("message '%s' lacks '%s'", err.message, needle);
}

static void test_invalid_jobs(void **state)
{
    (void)state;
    pt_synth_job job;
    pt_synth_job_init(&job);
    pt_synth_job bad = job;
    bad.workers = 0;
    expect_invalid(bad, "workers");
    bad = job, bad.fault = PT_FAULT_SLOW_GPU, bad.fault_ranks[0] = 8, bad.fault_rank_count = 1;
    expect_invalid(bad, "faulty rank 8");
    bad = job, bad.fault = PT_FAULT_TWO_SLOW, bad.workers = 2;
    expect_invalid(bad, "at least 3 workers");
    bad = job, bad.fault = PT_FAULT_HANG, bad.steps = 1;
    expect_invalid(bad, "at least 2 steps");
    bad = job, bad.fault = PT_FAULT_HANG, bad.hang_step = 3;
    expect_invalid(bad, "hang step");
    bad = job, bad.fault = PT_FAULT_GC_PAUSE, bad.workers = 2, bad.fault_ranks[0] = 0, bad.fault_ranks[1] = 1,
    bad.fault_rank_count = 2;
    expect_invalid(bad, "every rank");
    bad = job, bad.severity = -1;
    expect_invalid(bad, "severity");
    bad = job, bad.noise = -0.1;
    expect_invalid(bad, "noise");
    bad = job, bad.noise = 0.51;
    expect_invalid(bad, "noise");
    bad = job, bad.backend = (pt_synth_backend)7;
    expect_invalid(bad, "backend");
    pt_synth_plan *p = plan_for(PT_FAULT_NONE, 2, 8, 1);
    pt_trace_sink sink = {NULL, collect_event, NULL};
    pt_trace_meta meta;
    pt_error err = {{0}};
    assert_int_equal(pt_synth_plan_worker(p, 2, &sink, &meta, &err), -1);
    pt_synth_plan_free(p);
}

static int refuse(void *ctx, const pt_event *ev)
{
    (void)ev;
    return ++*(int *)ctx > 100;
}

static void test_sink_can_stop(void **state)
{
    (void)state;
    int seen = 0;
    pt_trace_sink sink = {&seen, refuse, NULL};
    pt_trace_meta meta;
    pt_error err = {{0}};
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = 2;
    assert_int_equal(pt_synth_worker(&job, 1, &sink, &meta, &err), -1);
    assert_int_equal(seen, 101); /* nothing more was offered once it refused */
    assert_non_null(strstr(err.message, "stopped"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fault_names),
        cmocka_unit_test(test_invalid_jobs),
        cmocka_unit_test(test_sink_can_stop),
        cmocka_unit_test(test_causality_healthy),
        cmocka_unit_test(test_causality_multi_node_slow_gpu),
        cmocka_unit_test(test_causality_faults),
        cmocka_unit_test(test_causality_gloo_and_noise),
        cmocka_unit_test(test_causality_structural),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_cpu_kinds_and_autograd_thread),
        cmocka_unit_test(test_gloo_backward_blocks),
        cmocka_unit_test(test_noise_changes_durations_not_calls),
        cmocka_unit_test(test_healthy_one_node),
        cmocka_unit_test(test_healthy_multi_node),
        cmocka_unit_test(test_fault_slow_gpu),
        cmocka_unit_test(test_fault_two_slow),
        cmocka_unit_test(test_fault_cpu_contention),
        cmocka_unit_test(test_fault_slow_dataloader),
        cmocka_unit_test(test_fault_gc_pause),
        cmocka_unit_test(test_fault_blocking_dtoh),
        cmocka_unit_test(test_fault_common_memcpy),
        cmocka_unit_test(test_fault_hang),
        cmocka_unit_test(test_expected_names),
        cmocka_unit_test(test_summary_matches_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
