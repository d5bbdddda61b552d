/* The candidate fixes of diagnose/candidates.c on jobs built here, step by step: a
 * Python subtree on every worker (a single-GPU job's loader split over many stacks, every
 * rank's loader), one rank's stall in one step, one rank's communication not overlapped,
 * many tiny collectives. Each job is built from a timeline: in every step each worker
 * works, then waits in one collective that ends when the last one arrives plus a
 * transfer, so its true step time is computed here, independently of the step model, and
 * so is the true saving of a fix (the job with the fault against its twin without).
 * A rank whose collectives block its work waits in sync points of its own, before the
 * job's; a pipeline's stages run their layers per microbatch, its truth from the GPipe
 * schedule. Each finding must name the right rank(s) and frame, with |impact - true
 * saving| <= max(2 points, 20% of it); the twins, a healthy job with noise, a
 * pipeline-like job and 1-, 2- and 3-worker jobs get no finding. */
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

#include "diagnose/analysis.h"
#include "diagnose/diagnose.h"
#include "diagnose/whatif.h"
#include "summarize/classify.h"

#define MS 1000000.0
#define MAX_WORKERS 32
#define MAX_STEPS 8
#define MAX_ACTS 24

/* ------------------------------------------------------------ the job's timeline */

/* One function a worker runs: ms of exposed work in each step (or, for a collective, ms
 * it exposes on its own before the others' wait: run on its compute stream). */
typedef struct act {
    pt_class cls;
    const char *name;
    double ms[MAX_STEPS];
    double calls_per_step;   /* 0: one */
    double throughput_pct;   /* collectives: % of the link's peak */
    double busbw_gbps;
} act;

typedef struct worker_spec {
    act acts[MAX_ACTS];
    size_t count;
    double hidden_comm_ms;   /* collective time per step hidden under its own work */
    bool no_bytes;           /* its summary carries no collective bytes (an older one) */
    double blocking_ms[MAX_STEPS]; /* waited mid-step in collectives only it waits in (its
                                      own, on its compute stream): a sync point of its own */
} worker_spec;

typedef struct job {
    int n, steps;
    double transfer_ms;      /* the last collective's own transfer, after the last arrival */
    const char *collective;
    double collective_calls; /* per step (0: one) */
    double collective_throughput_pct, collective_busbw_gbps;
    double collective_bytes_avg, collective_bytes_max; /* per call (0: unknown) */
    const char *collective_group; /* "network ring", ... (NULL: "nvlink ring") */
    const char *link_counter;     /* a link's bytes-sent counter every worker samples ... */
    double link_max_mibps;        /* ... and its fastest sample */
    int world;               /* the job's ranks, when more than the n analysed (0: n) */
    worker_spec w[MAX_WORKERS];
} job;

static void act_add(worker_spec *w, pt_class cls, const char *name, const double *ms, int steps)
{
    assert_true(w->count < MAX_ACTS);
    act *a = &w->acts[w->count++];
    memset(a, 0, sizeof *a);
    a->cls = cls, a->name = name;
    for (int s = 0; s < steps; s++)
        a->ms[s] = ms[s];
}

/* The same ms in every step. */
static void act_flat(worker_spec *w, pt_class cls, const char *name, double ms, int steps)
{
    double v[MAX_STEPS];
    for (int s = 0; s < steps; s++)
        v[s] = ms;
    act_add(w, cls, name, v, steps);
}

/* A deterministic jitter in [-1, 1] for (worker, step, salt). */
static double jitter(int w, int s, int salt)
{
    unsigned x = (unsigned)(w * 7919 + s * 104729 + salt * 1299709) * 2654435761u;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    return (double)(x % 20001) / 10000.0 - 1.0;
}

static double work_of(const worker_spec *w, int s)
{
    double sum = 0;
    for (size_t i = 0; i < w->count; i++)
        if (w->acts[i].cls != PT_CLASS_COMM)
            sum += w->acts[i].ms[s];
    return sum;
}

static double own_comm_of(const worker_spec *w, int s)
{
    double sum = 0;
    for (size_t i = 0; i < w->count; i++)
        if (w->acts[i].cls == PT_CLASS_COMM)
            sum += w->acts[i].ms[s];
    return sum;
}

/* Step s lasts until the last worker arrives, plus the transfer. */
static double step_ms(const job *j, int s)
{
    double last = 0;
    for (int w = 0; w < j->n; w++)
        last = fmax(last, work_of(&j->w[w], s) + own_comm_of(&j->w[w], s) + j->w[w].blocking_ms[s]);
    return last + j->transfer_ms;
}

/* The job's mean step: the truth a saving is measured against. */
static double mean_step_ms(const job *j)
{
    double sum = 0;
    for (int s = 0; s < j->steps; s++)
        sum += step_ms(j, s);
    return sum / j->steps;
}

static double true_saving(const job *with, const job *without)
{
    return 1 - mean_step_ms(without) / mean_step_ms(with);
}

static pt_function_summary *fn_add(pt_worker_summary *s, pt_class cls, const char *name, int steps)
{
    s->functions = realloc(s->functions, (s->function_count + 1) * sizeof *s->functions);
    pt_function_summary *f = &s->functions[s->function_count++];
    memset(f, 0, sizeof *f);
    f->cls = cls;
    f->name = strdup(name);
    f->group = cls == PT_CLASS_COMM ? strdup("nvlink ring") : NULL;
    f->step_count = (size_t)steps;
    f->step_exposed_ns = calloc((size_t)steps, sizeof *f->step_exposed_ns);
    return f;
}

static void fn_step(pt_function_summary *f, int s, double ms, double calls)
{
    int64_t ns = (int64_t)llround(ms * MS);
    f->step_exposed_ns[s] = ns;
    f->exposed_ns += ns;
    f->total_ns += ns;
    f->count += (uint64_t)llround(calls > 0 ? calls : 1);
}

static void fn_done(pt_function_summary *f)
{
    f->median_ns = f->count ? f->total_ns / (int64_t)f->count : 0;
    f->max_ns = f->median_ns;
}

static pt_worker_summary *summary_of(const job *j, int w)
{
    const worker_spec *spec = &j->w[w];
    pt_worker_summary *s = pt_summary_new();
    char name[64];
    snprintf(name, sizeof name, "node%d_%d_%d.json", w / 8, w % 8, 1000 + w);
    s->name = strdup(name);
    s->host = strdup(w < 8 ? "node0" : w < 16 ? "node1" : w < 24 ? "node2" : "node3");
    s->device_count = 8;
    s->rank = w;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->world_size = j->world > j->n ? j->world : j->n;
    s->window_start_ns = INT64_C(1700000000000000000);
    s->step_count = (size_t)j->steps;
    s->steps = calloc((size_t)j->steps, sizeof *s->steps);
    s->has_syncs = true;
    int64_t at = 0;
    for (int st = 0; st < j->steps; st++) {
        pt_step_summary *step = &s->steps[st];
        step->step = 10 + st;
        step->start_ns = at;
        step->dur_ns = (int64_t)llround(step_ms(j, st) * MS);
        at += step->dur_ns;
    }
    /* Work, by class. */
    for (size_t i = 0; i < spec->count; i++) {
        const act *a = &spec->acts[i];
        if (a->cls == PT_CLASS_COMM)
            continue;
        pt_function_summary *f = fn_add(s, a->cls, a->name, j->steps);
        for (int st = 0; st < j->steps; st++) {
            fn_step(f, st, a->ms[st], a->calls_per_step);
            s->steps[st].exposed_ns[a->cls] += f->step_exposed_ns[st];
        }
        fn_done(f);
        s->exposed_ns[a->cls] += f->exposed_ns;
        s->union_ns[a->cls] += f->total_ns;
    }
    /* The collective: the rest of each step, waiting or transferring (a step is never
     * shorter than its work rounded to ns). */
    pt_function_summary *c = fn_add(s, PT_CLASS_COMM, j->collective, j->steps);
    at = 0;
    for (int st = 0; st < j->steps; st++) {
        pt_step_summary *step = &s->steps[st];
        int64_t work = 0;
        for (int k = 0; k < PT_CLASS_COUNT; k++)
            work += step->exposed_ns[k];
        step->dur_ns = step->dur_ns > work ? step->dur_ns : work;
        step->start_ns = at;
        at += step->dur_ns;
        fn_step(c, st, 0, j->collective_calls);
        c->step_exposed_ns[st] = step->dur_ns - work;
        c->exposed_ns += c->step_exposed_ns[st];
        c->total_ns += c->step_exposed_ns[st];
        step->exposed_ns[PT_CLASS_COMM] = c->step_exposed_ns[st];
        /* The job's sync point at the step's end; before it, one of its own when it
         * blocks in its collectives (after its work, for as long as it blocks). */
        int64_t blocking = (int64_t)llround(spec->blocking_ms[st] * MS);
        step->sync_count = blocking > 0 ? 2 : 1;
        step->syncs = calloc(step->sync_count, sizeof *step->syncs);
        pt_sync_point *worked = &step->syncs[0];
        worked->end_ns = blocking > 0 ? work + blocking : step->dur_ns;
        for (int k = 0; k < PT_CLASS_COUNT; k++)
            worked->busy_ns[k] = k == PT_CLASS_COMM ? 0 : step->exposed_ns[k];
        if (blocking > 0)
            step->syncs[1].end_ns = step->dur_ns;
    }
    s->window_ns = at;
    fn_done(c);
    c->throughput_avg_pct = j->collective_throughput_pct;
    c->busbw_avg_gbps = j->collective_busbw_gbps;
    c->bytes_avg = spec->no_bytes ? 0 : j->collective_bytes_avg;
    c->bytes_max = spec->no_bytes ? 0 : j->collective_bytes_max;
    if (j->collective_group) {
        free(c->group);
        c->group = strdup(j->collective_group);
    }
    if (j->link_counter) {
        s->metrics = calloc(1, sizeof *s->metrics);
        s->metric_count = 1;
        s->metrics[0].name = strdup(j->link_counter);
        s->metrics[0].samples = 40;
        s->metrics[0].max = j->link_max_mibps, s->metrics[0].mean = j->link_max_mibps / 3;
    }
    c->total_ns += (int64_t)llround(spec->hidden_comm_ms * j->steps * MS);
    s->exposed_ns[PT_CLASS_COMM] = c->exposed_ns;
    s->union_ns[PT_CLASS_COMM] = c->total_ns;
    int64_t used = 0;
    for (int k = 0; k < PT_CLASS_COUNT; k++)
        used += s->exposed_ns[k];
    s->idle_ns = s->window_ns - used;
    assert_true(s->idle_ns >= 0);
    return s;
}

static pt_json *diagnose(const job *j)
{
    pt_worker_summary *w[MAX_WORKERS];
    for (int i = 0; i < j->n; i++)
        w[i] = summary_of(j, i);
    pt_job_input input = {w, (size_t)j->n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&input);
    for (int i = 0; i < j->n; i++)
        pt_summary_free(w[i]);
    const pt_json *warnings = pt_json_get(report, "warnings");
    for (size_t i = 0; warnings && i < warnings->count; i++)
        print_message("  warning: %s\n", warnings->items[i]->string);
    assert_int_equal(pt_json_get_number(pt_json_get(report, "job"), "workers_failed", -1), 0);
    return report;
}

static const pt_json *findings_of(const pt_json *report)
{
    const pt_json *f = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    assert_non_null(f);
    return f;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The first finding whose function ends with suffix (NULL: none). */
static const pt_json *finding_on(const pt_json *report, const char *suffix)
{
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++)
        if (ends_with(pt_json_get_string(all->items[i], "function", ""), suffix))
            return all->items[i];
    return NULL;
}

static void print_findings(const pt_json *report)
{
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++)
        print_message("  finding %zu: %s %.4f %s\n", i, pt_json_get_string(all->items[i], "category", ""),
                      pt_json_get_number(all->items[i], "impact", 0), pt_json_get_string(all->items[i], "summary", ""));
}

/* The first finding's sentence (the report has one), the findings printed. */
static const char *first_summary(const pt_json *report)
{
    print_findings(report);
    const pt_json *all = findings_of(report);
    assert_true(all->count > 0);
    return pt_json_get_string(all->items[0], "summary", "");
}

static void assert_workers(const pt_json *f, const int *ranks, size_t n)
{
    const pt_json *w = pt_json_get(f, "workers");
    assert_int_equal(w->count, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(w->items[i]->integer, ranks[i]);
}

/* The bar: |impact - true saving| <= max(2 points, 20% of the true saving). */
static void assert_impact_near(const pt_json *f, double truth)
{
    double impact = pt_json_get_number(f, "impact", -1);
    print_message("  impact %.4f, true saving %.4f\n", impact, truth);
    assert_true(truth > 0.02);
    assert_true(fabs(impact - truth) <= fmax(0.02, 0.2 * truth));
}

/* A finding of diagnose/candidates.c: the metrics its findings carry as evidence. */
static bool candidate(const pt_json *f)
{
    static const char *metrics[] = {
        "ms per step above the typical worker, in the frame and the code it calls",
        "share of the step in the frame and the code it calls (median over workers)",
        "share of its communication time hidden under its own work",
        "calls per step (median over workers)",
    };
    const char *metric = pt_json_get_string(pt_json_get(f, "evidence"), "metric", "");
    for (size_t i = 0; i < sizeof metrics / sizeof *metrics; i++)
        if (strcmp(metric, metrics[i]) == 0)
            return true;
    return false;
}

static void assert_no_findings(const pt_json *report)
{
    print_findings(report);
    assert_int_equal(findings_of(report)->count, 0);
    assert_string_equal(pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", ""), "healthy");
}

/* ------------------------------------------------------------ the jobs */

#define MODULE "train.py: <module>|train.py: train"
#define NEXT MODULE "|torch/utils/data/dataloader.py: __next__"
#define NEXT_DATA NEXT "|torch/utils/data/dataloader.py: _next_data"

/* A training step every worker runs: its kernels, a loader of loader_ms over many stacks
 * (the three the report lists and ten small ones, as a real dataset's __getitem__ makes),
 * the forward pass's Python, and noise of `noise` (a share of each part) per worker and
 * step. */
static void training_step(worker_spec *w, int rank, int steps, double compute_ms, double loader_ms, double noise)
{
    double v[MAX_STEPS];
#define NOISY(ms, salt)                                                     \
    do {                                                                    \
        for (int s_ = 0; s_ < steps; s_++)                                  \
            v[s_] = (ms) * (1 + noise * jitter(rank, s_, salt));            \
    } while (0)
    NOISY(compute_ms * 0.7, 1);
    act_add(w, PT_CLASS_COMPUTE, "conv2d_fprop_kernel128_1_1|256_1_1", v, steps);
    NOISY(compute_ms * 0.3, 2);
    act_add(w, PT_CLASS_COMPUTE, "conv2d_dgrad_kernel128_1_1|256_1_1", v, steps);
    static const char *small[] = {
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|PIL/Image.py: open",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|PIL/Image.py: convert",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|torchvision/transforms.py: resize",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|torchvision/transforms.py: crop",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|torchvision/transforms.py: flip",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|torchvision/transforms.py: to_tensor",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|torchvision/transforms.py: normalize",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|<built-in method read>",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|aten::empty",
        NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch|dataset.py: __getitem__|aten::copy_",
    };
    /* 9.8%, 3.3% and 1.9% of a 100 ms step, and the rest of the loader in small stacks. */
    double listed = 9.8 + 3.3 + 1.9, scale = loader_ms / 30.0;
    NOISY(9.8 * scale, 3);
    act_add(w, PT_CLASS_PYTHON, NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch", v, steps);
    NOISY(3.3 * scale, 4);
    act_add(w, PT_CLASS_PYTHON, NEXT_DATA "|torch/utils/data/_utils/collate.py: default_collate", v, steps);
    NOISY(1.9 * scale, 5);
    act_add(w, PT_CLASS_PYTHON, NEXT_DATA "|torch/utils/data/_utils/pin_memory.py: pin_memory", v, steps);
    for (int i = 0; i < 10; i++) {
        NOISY((30.0 - listed) / 10 * scale, 10 + i);
        act_add(w, PT_CLASS_PYTHON, small[i], v, steps);
    }
    NOISY(0.4, 6);
    act_add(w, PT_CLASS_PYTHON, MODULE "|model.py: forward|torch/nn/modules/conv.py: forward", v, steps);
    NOISY(0.3, 7);
    act_add(w, PT_CLASS_RUNTIME, "cudaLaunchKernel", v, steps);
#undef NOISY
}

static void job_init(job *j, int n, int steps)
{
    memset(j, 0, sizeof *j);
    j->n = n, j->steps = steps;
    j->collective = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
    j->collective_throughput_pct = 60;
    j->collective_busbw_gbps = 120;
}

/* A data-parallel job: every worker the same step, noise of `noise`, the all-reduce's
 * transfer after it. */
static void data_parallel(job *j, int n, int steps, double compute_ms, double loader_ms, double noise, double transfer)
{
    job_init(j, n, steps);
    j->transfer_ms = transfer;
    j->collective_calls = 4; /* DDP's buckets */
    for (int w = 0; w < n; w++)
        training_step(&j->w[w], w, steps, compute_ms, loader_ms, noise);
}

/* ------------------------------------------------------------ Python subtrees */

/* The single-GPU ResNet-50: single-process data loading blocks 30% of each step,
 * over three listed stacks (9.8%, 3.3%, 1.9%) and small ones, and the GPU is busy 70%:
 * under every per-stack rule. With enough loader workers the main process's __next__
 * takes 0.3 ms (synth's loader twins: 0.34 ms). */
#define LOADER_WITH_WORKERS_MS 0.3

static void test_single_gpu_loader_is_found_at_next(void **state)
{
    (void)state;
    job with, without;
    data_parallel(&with, 1, 4, 70.4, 30, 0.003, 0);
    data_parallel(&without, 1, 4, 70.4, LOADER_WITH_WORKERS_MS, 0.003, 0);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "python");
    assert_string_equal(pt_json_get_string(f, "function", ""), NEXT);
    assert_workers(f, (int[]){0}, 1);
    assert_impact_near(f, true_saving(&with, &without));
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "num_workers"));
    pt_json_free(report);
    report = diagnose(&without);
    assert_no_findings(report);
    pt_json_free(report);
}

/* Every rank waits on its loader (too few loader workers): the loader is named, and the
 * generic CPU-bound finding it explains does not come before it (it is dropped). */
static void test_every_rank_loader_is_named_first(void **state)
{
    (void)state;
    job with, without;
    data_parallel(&with, 8, 3, 60, 30, 0.01, 10);
    data_parallel(&without, 8, 3, 60, LOADER_WITH_WORKERS_MS, 0.01, 10);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "python");
    assert_string_equal(pt_json_get_string(f, "function", ""), NEXT);
    assert_true(pt_json_get(f, "all_workers")->boolean);
    assert_impact_near(f, true_saving(&with, &without));
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++)
        assert_string_not_equal(pt_json_get_string(all->items[i], "category", ""), "cpu_bound");
    pt_json_free(report);
    report = diagnose(&without);
    assert_no_findings(report);
    pt_json_free(report);
}

/* The decision at its boundary: a loader above 15% of the step by 1% of the step (the
 * job has no noise) is a finding, saving all of its time; just below, none. */
static void test_every_worker_subtree_decision_boundary(void **state)
{
    (void)state;
    for (int above = 0; above < 2; above++) {
        job j, without;
        /* L - 0.15 T against 0.01 T, with T = 70.7 + L (kernels, the forward pass's
         * Python and launches): L = 0.16 T at the boundary, 13.467 ms. */
        double boundary = 0.16 * 70.7 / (1 - 0.16);
        data_parallel(&j, 1, 3, 70, boundary + (above ? 0.05 : -0.05), 0, 0);
        data_parallel(&without, 1, 3, 70, LOADER_WITH_WORKERS_MS, 0, 0);
        pt_json *report = diagnose(&j);
        print_findings(report);
        const pt_json *f = finding_on(report, "dataloader.py: __next__");
        assert_true((f != NULL) == (above == 1));
        if (f)
            assert_impact_near(f, true_saving(&j, &without));
        pt_json_free(report);
    }
}

/* One rank stalls in one step of five in a checkpoint (a synchronous save): named, with
 * the step and how many of the steps, and that more steps would tell whether it recurs;
 * the uneven-work finding it explains is not made. */
static void stall_job(job *j, int n, int steps, int rank, int step, double stall)
{
    data_parallel(j, n, steps, 70, 6, 0.01, 10);
    double save[MAX_STEPS] = {0}, write[MAX_STEPS] = {0};
    save[step] = stall * 0.8, write[step] = stall * 0.2;
    if (rank >= 0) {
        act_add(&j->w[rank], PT_CLASS_PYTHON, MODULE "|train.py: save_checkpoint|torch/serialization.py: save", save,
                steps);
        act_add(&j->w[rank], PT_CLASS_PYTHON,
                MODULE "|train.py: save_checkpoint|torch/serialization.py: save|<built-in method write>", write, steps);
    }
}

static void test_one_step_stall_names_rank_and_function(void **state)
{
    (void)state;
    job with, without;
    stall_job(&with, 16, 5, 3, 2, 300);
    stall_job(&without, 16, 5, -1, 2, 0);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "python");
    assert_string_equal(pt_json_get_string(f, "function", ""), MODULE "|train.py: save_checkpoint");
    assert_workers(f, (int[]){3}, 1);
    assert_impact_near(f, true_saving(&with, &without));
    const char *summary = pt_json_get_string(f, "summary", "");
    assert_non_null(strstr(summary, "in 1 of the 5 profiled steps (step 12"));
    assert_non_null(strstr(summary, "--steps"));
    assert_null(finding_on(report, "uneven work per step: the slowest rank moves"));
    pt_json_free(report);
    report = diagnose(&without);
    assert_no_findings(report);
    pt_json_free(report);
}

/* A job started by torch.multiprocessing.spawn: every stack begins in the launcher's frames
 * (multiprocessing's, named relative to the standard library, and torch's _wrap) before the
 * user's worker function. The stall is named at the user's function, not the launcher's. */
#define LAUNCHER                                                                                              \
    "<string>: <module>|multiprocessing/spawn.py: spawn_main|multiprocessing/spawn.py: _main|"                \
    "multiprocessing/process.py: _bootstrap|multiprocessing/process.py: run|torch/multiprocessing/spawn.py: " \
    "_wrap|"
static void test_a_spawned_job_names_the_users_frame(void **state)
{
    (void)state;
    static char names[MAX_WORKERS][MAX_ACTS][512];
    job with;
    stall_job(&with, 16, 5, 3, 2, 300);
    for (int w = 0; w < with.n; w++)
        for (size_t i = 0; i < with.w[w].count; i++) {
            act *a = &with.w[w].acts[i];
            if (a->cls != PT_CLASS_PYTHON)
                continue;
            snprintf(names[w][i], sizeof names[w][i], "%s%s", LAUNCHER, a->name);
            a->name = names[w][i];
        }
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "function", ""), LAUNCHER MODULE "|train.py: save_checkpoint");
    assert_workers(f, (int[]){3}, 1);
    pt_json_free(report);
    /* The standard library as the collector names it: a module's folder or one file. */
    static const struct {
        const char *file;
        bool stdlib;
    } files[] = {{"multiprocessing/process.py", true}, {"threading.py", true}, {"json/encoder.py", true},
                 {"train.py", false}, {"multiprocessingx/process.py", false}, {"mythreading.py", false},
                 {"threading", false}, {"torch/multiprocessing/spawn.py", false}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        assert_true(pt_file_in_stdlib(files[i].file, strlen(files[i].file)) == files[i].stdlib);
}

/* A rank's slow frame split over stacks in every step (each stack under the peers' 3%
 * floor, 2.4%+1.6% together): named at the frame, said to hold in every step. */
static void test_rank_subtree_in_every_step(void **state)
{
    (void)state;
    job with, without;
    data_parallel(&with, 8, 3, 70, 6, 0.005, 10);
    data_parallel(&without, 8, 3, 70, 6, 0.005, 10);
    act_flat(&with.w[6], PT_CLASS_PYTHON, MODULE "|train.py: log_metrics|json/encoder.py: encode", 2.4, 3);
    act_flat(&with.w[6], PT_CLASS_PYTHON, MODULE "|train.py: log_metrics|<built-in method flush>", 1.6, 3);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "function", ""), MODULE "|train.py: log_metrics");
    assert_workers(f, (int[]){6}, 1);
    assert_impact_near(f, true_saving(&with, &without));
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "in every profiled step"));
    /* The peers' finding on one of its stacks is one of its parts, not a finding of its own. */
    assert_int_equal(findings_of(report)->count, 1);
    pt_json_free(report);
}

/* Per-rank candidates need three workers, as the peers do: with two, either is the odd one. */
/* A rank's excess in a frame clears the peers' floor (3% of the step) in the steps it is
 * counted in: rank 3's checkpoint code takes 2.2 ms a step more than nothing (the floor:
 * 2.6 ms), which saves above 1% of the step but is the noise of a CPU job (a 3-rank gloo
 * job: 2.24 ms in one step of 92): nothing names rank 3; 3 ms clears it and rank 3 is named. */
static void test_excess_clears_the_peers_floor(void **state)
{
    (void)state;
    const double extra[] = {2.2, 3.0};
    for (int i = 0; i < 2; i++) {
        job j;
        data_parallel(&j, 16, 5, 70, 6, 0.01, 10);
        double save[MAX_STEPS];
        for (int st = 0; st < 5; st++)
            save[st] = extra[i];
        act_add(&j.w[3], PT_CLASS_PYTHON, MODULE "|train.py: save_checkpoint|torch/serialization.py: save", save, 5);
        double floor = 0.03 * mean_step_ms(&j);
        assert_true(i == 0 ? extra[i] < floor : extra[i] > floor);
        assert_true(extra[i] / mean_step_ms(&j) > 0.01); /* worth a candidate but for the floor */
        pt_json *report = diagnose(&j);
        print_findings(report);
        bool named = false;
        for (size_t k = 0; k < findings_of(report)->count; k++) {
            const pt_json *workers = pt_json_get(findings_of(report)->items[k], "workers");
            named |= workers->count == 1 && workers->items[0]->integer == 3;
        }
        assert_true(named == (i == 1));
        pt_json_free(report);
    }
}

static void test_stall_needs_three_workers(void **state)
{
    (void)state;
    for (int n = 2; n <= 4; n++) {
        job j;
        stall_job(&j, n, 5, 1, 2, 300);
        pt_json *report = diagnose(&j);
        print_findings(report);
        const pt_json *f = finding_on(report, "train.py: save_checkpoint");
        assert_true((f != NULL) == (n >= 3));
        if (f)
            assert_workers(f, (int[]){1}, 1);
        pt_json_free(report);
    }
}

/* ------------------------------------------------------------ communication */

#define HOOK                                                                                       \
    "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad|train.py: allreduce_hook|" \
    "torch/distributed/c10d_logger.py: wrapper|torch/distributed/distributed_c10d.py: all_reduce"
#define AVERAGE MODULE "|train.py: average_gradients"

/* Rank 5 runs its gradient all-reduce on its compute stream: its 30 ms of it (ten calls)
 * follow its backward pass instead of running beside it. The others hide 60% of theirs
 * and expose 12 ms on their own; in the faulty job they wait for rank 5 (18 ms more
 * exposed), their collectives spinning under their compute too (hidden 45 ms: 60% of
 * their busy collectives). Without the fault every rank hides 18 ms and exposes 12. */
static void overlap_job_of(job *j, int n, int culprit)
{
    data_parallel(j, n, 3, 60, 5, 0.005, 0);
    j->collective_calls = 10;
    for (int w = 0; w < n; w++) {
        act_flat(&j->w[w], PT_CLASS_COMM, j->collective, 12, 3);
        for (int s = 0; s < 3; s++)
            j->w[w].blocking_ms[s] = w == culprit ? 18 : 0;
        j->w[w].hidden_comm_ms = w == culprit ? 0 : culprit >= 0 ? 45 : 18;
        if (w == culprit) /* its comm hook, which waits for each bucket's all-reduce */
            act_flat(&j->w[w], PT_CLASS_PYTHON, HOOK, 0.05, 3);
    }
}

static void overlap_job(job *j, int culprit)
{
    overlap_job_of(j, 8, culprit);
}

static void test_rank_without_overlap_is_named(void **state)
{
    (void)state;
    job with, without;
    overlap_job(&with, 5);
    overlap_job(&without, -1);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "communication");
    assert_string_equal(pt_json_get_string(f, "function", ""),
                        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad|train.py: allreduce_hook");
    assert_workers(f, (int[]){5}, 1);
    assert_false(pt_json_get(f, "all_workers")->boolean);
    assert_impact_near(f, true_saving(&with, &without));
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "compute stream"));
    pt_json_free(report);
    report = diagnose(&without);
    assert_no_findings(report);
    pt_json_free(report);
}

/* Overlapped, rank 5 no longer blocks in its collectives, but it arrives no earlier than
 * the next rank's work puts it: rank 2 computes 10 ms more per step (a slower GPU, or
 * noise), so fixing rank 5 saves 8 of its 18 ms of own waits. The share of its
 * communication the others hide (60% of 30 ms) would say 18. */
static void test_overlap_saves_down_to_the_next_rank(void **state)
{
    (void)state;
    job with, without;
    overlap_job(&with, 5);
    overlap_job(&without, -1);
    act_flat(&with.w[2], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 10, 3);
    act_flat(&without.w[2], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 10, 3);
    double truth = true_saving(&with, &without);
    print_message("  true saving %.3f ms\n", truth * mean_step_ms(&with));
    assert_true(fabs(truth * mean_step_ms(&with) - 8) < 0.5);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = finding_on(report, "train.py: allreduce_hook");
    assert_non_null(f);
    assert_workers(f, (int[]){5}, 1);
    assert_impact_near(f, truth);
    pt_json_free(report);
}

/* The step model of a job built here, on its own (diagnose/whatif.h). */
typedef struct modelled {
    pt_worker_summary *s[MAX_WORKERS];
    int n;
    pt_analysis a;
    pt_whatif *m;
} modelled;

static void model_of(const job *j, modelled *md)
{
    md->n = j->n;
    for (int w = 0; w < j->n; w++)
        md->s[w] = summary_of(j, w);
    pt_analysis_init(&md->a, md->s, (size_t)j->n);
    md->m = pt_whatif_new(&md->a);
}

static void modelled_free(modelled *md)
{
    pt_whatif_free(md->m);
    pt_analysis_free(&md->a);
    for (int w = 0; w < md->n; w++)
        pt_summary_free(md->s[w]);
}

/* The step model counts a wait as a worker's own when fewer than half the other workers
 * waited in a collective ending then too (whatif.c, own_wait_in): rank 5 and k others
 * block 18 ms at the same point of the step. With 7 others, k = 3 is under half (each
 * block is its own), k = 4 is not (a wait of the job's, its timing off for the rest);
 * with 8 others, k = 3 is under half, k = 4 exactly half (not). */
static void test_own_waits_are_waited_by_under_half(void **state)
{
    (void)state;
    static const struct {
        int n, k;
    } cases[] = {{8, 3}, {8, 4}, {9, 3}, {9, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int k = cases[i].k;
        job j;
        overlap_job_of(&j, cases[i].n, 5);
        for (int w = 0; w < k; w++)
            for (int st = 0; st < j.steps; st++)
                j.w[w].blocking_ms[st] = 18;
        modelled md;
        model_of(&j, &md);
        const pt_whatif *m = md.m;
        for (int w = 0; w < j.n; w++) {
            double own = pt_whatif_own_wait_ms(m, (size_t)w, 1);
            bool blocks = w == 5 || w < k;
            print_message("  %d workers, k=%d, rank %d: own waits %.2f ms\n", j.n, k, w, own);
            assert_true(fabs(own - (blocks && k == 3 ? 18 : 0)) < 0.01);
        }
        modelled_free(&md);
    }
}

/* Own waits count when a worker has them in every modelled step (all but one of four or
 * more): rank 5 blocks in `blocked` of `steps` steps. */
static void test_own_waits_count_when_steady(void **state)
{
    (void)state;
    static const struct {
        int steps, blocked;
        bool counted;
    } cases[] = {{3, 3, true}, {3, 2, false}, {4, 3, true}, {4, 2, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        job j;
        job_init(&j, 8, cases[i].steps);
        for (int w = 0; w < 8; w++) {
            act_flat(&j.w[w], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", 60 + 0.1 * w, cases[i].steps);
            act_flat(&j.w[w], PT_CLASS_COMM, j.collective, 12, cases[i].steps);
        }
        for (int st = 0; st < cases[i].blocked; st++)
            j.w[5].blocking_ms[st] = 18;
        modelled md;
        model_of(&j, &md);
        const pt_whatif *m = md.m;
        for (int st = 0; st < j.steps; st++) {
            double own = pt_whatif_own_wait_ms(m, 5, (size_t)st);
            print_message("  %d of %d steps blocked: step %d own waits %.2f ms\n", cases[i].blocked, j.steps, st, own);
            assert_true(fabs(own - (cases[i].counted && st < cases[i].blocked ? 18 : 0)) < 0.01);
        }
        modelled_free(&md);
    }
}

/* Rank 5 exposes a little less than the others (it works 2 ms more: the others also wait
 * in their collectives for what noise slows, as in a noisy job), so it could be a rank
 * late for its work rather than for its communication. What tells them apart is the
 * share of its communication it hides: a late rank's collectives, short as nobody waits
 * in them, hide as much as the others' do; one not overlapped hides none. Rank 5 here
 * hides `factor` times the others' share (OVERLAP_FLOOR = 0.5 decides). */
static void late_or_unoverlapped_job(job *j, double factor)
{
    overlap_job(j, 5);
    double more[MAX_STEPS];
    for (int s = 0; s < j->steps; s++)
        more[s] = 2;
    act_add(&j->w[5], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", more, j->steps);
    double exposed_other = 0, exposed_mine = 0;
    for (int s = 0; s < j->steps; s++) {
        exposed_other += (step_ms(j, s) - work_of(&j->w[0], s)) / j->steps;
        exposed_mine += (step_ms(j, s) - work_of(&j->w[5], s)) / j->steps;
    }
    double others_share = j->w[0].hidden_comm_ms / (j->w[0].hidden_comm_ms + exposed_other);
    double mine = factor * others_share; /* hidden / (hidden + exposed) = mine */
    j->w[5].hidden_comm_ms = mine * exposed_mine / (1 - mine);
}

static bool names_rank_communication(const pt_json *report, int rank)
{
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++) {
        const pt_json *f = all->items[i], *workers = pt_json_get(f, "workers");
        if (strcmp(pt_json_get_string(f, "category", ""), "communication") == 0 && workers && workers->count == 1 &&
            workers->items[0]->number == rank)
            return true;
    }
    return false;
}

static void test_rank_hiding_none_is_named_though_it_exposes_less(void **state)
{
    (void)state;
    job j;
    late_or_unoverlapped_job(&j, 0);
    pt_json *report = diagnose(&j);
    print_findings(report);
    assert_true(names_rank_communication(report, 5));
    pt_json_free(report);
}

static void test_late_rank_boundary_is_the_hidden_share(void **state)
{
    (void)state;
    job below, above;
    late_or_unoverlapped_job(&below, 0.49);
    late_or_unoverlapped_job(&above, 0.51);
    pt_json *report = diagnose(&below);
    print_findings(report);
    assert_true(names_rank_communication(report, 5)); /* hides too little: not overlapped */
    pt_json_free(report);
    report = diagnose(&above);
    print_findings(report);
    assert_false(names_rank_communication(report, 5)); /* hides as much: late for its work */
    pt_json_free(report);
}

/* Every worker all-reduces each gradient by hand (AVERAGE): `calls` per step, `ms` of
 * them exposed (3 steps). */
static void average_gradients(job *j, double calls, double ms)
{
    for (int w = 0; w < j->n; w++) {
        act_flat(&j->w[w], PT_CLASS_COMM, j->collective, ms, 3);
        act_flat(&j->w[w], PT_CLASS_PYTHON,
                 AVERAGE "|torch/distributed/c10d_logger.py: wrapper|torch/distributed/distributed_c10d.py: all_reduce",
                 0.2, 3);
        j->w[w].acts[j->w[w].count - 1].calls_per_step = calls;
    }
}

/* 150 all-reduces per step of 0.1 ms each at 1% of the link's peak, on every rank, all
 * exposed; bucketed (and overlapped) they are four calls, the last 2 ms exposed. */
static void buckets_job(job *j, bool tiny)
{
    data_parallel(j, 8, 3, 60, 5, 0.005, tiny ? 0.1 : 2);
    if (tiny) {
        j->collective_calls = 150;
        j->collective_throughput_pct = 1;
        j->collective_busbw_gbps = 1.2;
        average_gradients(j, 150, 14.9);
    } else {
        for (int w = 0; w < 8; w++)
            j->w[w].hidden_comm_ms = 12;
    }
}

static void test_tiny_collectives_are_bucketed(void **state)
{
    (void)state;
    job with, without;
    buckets_job(&with, true);
    buckets_job(&without, false);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "communication");
    assert_string_equal(pt_json_get_string(f, "function", ""), AVERAGE);
    assert_true(pt_json_get(f, "all_workers")->boolean);
    assert_impact_near(f, true_saving(&with, &without));
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "bucket"));
    pt_json_free(report);
    report = diagnose(&without);
    assert_no_findings(report);
    pt_json_free(report);
}

/* The tiny all-reduces of a job with a ninth rank not analysed, every rank analysed
 * waiting 60 ms a step past its work: they may be waiting for it, in every call, which no
 * call's time tells from latency. The finding that says so leads, and no bucketing
 * finding reads the wait as latency. */
static void test_partial_job_is_not_bucketed(void **state)
{
    (void)state;
    job j;
    buckets_job(&j, true);
    j.world = 9;
    j.transfer_ms = 60;
    pt_json *report = diagnose(&j);
    print_findings(report);
    const pt_json *all = findings_of(report);
    assert_true(all->count >= 1);
    assert_non_null(strstr(pt_json_get_string(all->items[0], "summary", ""), "may be among the missing: rank 8"));
    for (size_t i = 0; i < all->count; i++)
        assert_null(strstr(pt_json_get_string(all->items[i], "summary", ""), "bucket"));
    pt_json_free(report);
}

/* Eight ranks of nine analysed, each waiting 60 ms a step past the last one's work at
 * the step's end, an all-reduce of up to 900 MB across nodes: what fixing the missing
 * rank saves is that wait less the all-reduce's own transfer, 900 MB x 2 x 8/9 at the
 * 40 GB/s the network counters reached (40 ms); without the counters, or with only
 * another link's (NVLink's, for a network group), less 10% of the step. */
static void test_missing_ranks_wait_less_the_measured_transfer(void **state)
{
    (void)state;
    static const double mibps = 40e9 / 1048576;
    static const struct {
        const char *counter, *says;
        double transfer_ms; /* < 0: 10% of the step */
    } cases[] = {{"host.nic_tx_mibps", "less the 40 ms its largest call (900 MB) takes at the 40 GB/s the links reached",
                  900e6 * 2 * 8 / 9 / 40e9 * 1e3},
                 {NULL, "less the 10% of the step", -1},
                 {"gpu0.nvlink_tx_mibps", "less the 10% of the step", -1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        job j;
        data_parallel(&j, 8, 3, 100, 5, 0.01, 60);
        j.world = 9;
        j.collective_group = "network ring";
        j.collective_bytes_avg = 200e6, j.collective_bytes_max = 900e6;
        j.link_counter = cases[i].counter, j.link_max_mibps = mibps;
        pt_json *report = diagnose(&j);
        print_findings(report);
        const pt_json *f = findings_of(report)->items[0];
        const char *summary = pt_json_get_string(f, "summary", "");
        assert_non_null(strstr(summary, "may be among the missing: rank 8"));
        assert_non_null(strstr(summary, cases[i].says));
        double step = mean_step_ms(&j);
        double transfer = cases[i].transfer_ms >= 0 ? cases[i].transfer_ms : 0.10 * step;
        assert_impact_near(f, (60 - transfer) / step);
        pt_json_free(report);
    }
}

/* A pipeline's point-to-point transfers, as many and as small as the tiny all-reduces
 * above: nothing to bucket (the activations of each microbatch go when they are made),
 * so no bucketing finding, whatever else is said of their exposed time. */
static void test_sends_are_not_bucketed(void **state)
{
    (void)state;
    job j;
    buckets_job(&j, true);
    j.collective = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
    pt_json *report = diagnose(&j);
    print_findings(report);
    const pt_json *list = findings_of(report);
    for (size_t i = 0; i < list->count; i++)
        assert_null(strstr(pt_json_get_string(list->items[i], "summary", ""), "bucket the tensors"));
    pt_json_free(report);
}

/* The unbucketed GPT: 150 all-reduces per step, one 50 MB gradient (the embedding) and
 * 149 of 2 MB, 15 ms exposed in all, 30% of each call its latency. Bucketed and
 * overlapped with the backward pass, the bytes move at the rate they moved, and the job
 * still waits for its last bucket after the backward: the embedding and up to a bucket's
 * worth (25 MiB) of the others, the latency gone. */
#define GPT_CALLS 150
#define GPT_GRAD_BYTES 2e6
#define GPT_EXPOSED_MS 15.0
#define GPT_LATENCY_SHARE 0.3
static void gpt_buckets_job(job *j, bool unbucketed, double compute_ms, double embed_bytes)
{
    double step_bytes = embed_bytes + (GPT_CALLS - 1) * GPT_GRAD_BYTES;
    double buckets = ceil(step_bytes / (25.0 * 1024 * 1024));
    double latency = (GPT_CALLS - buckets) * (GPT_EXPOSED_MS / GPT_CALLS) * GPT_LATENCY_SHARE;
    double transfer = GPT_EXPOSED_MS - latency;
    double last_bucket = transfer * (embed_bytes + 25.0 * 1024 * 1024) / step_bytes;
    data_parallel(j, 8, 3, compute_ms, compute_ms / 12, 0.005, unbucketed ? 0.1 : last_bucket);
    if (!unbucketed) {
        for (int w = 0; w < 8; w++)
            j->w[w].hidden_comm_ms = transfer - last_bucket;
        return;
    }
    j->collective_calls = GPT_CALLS;
    j->collective_throughput_pct = 100 * (1 - GPT_LATENCY_SHARE);
    j->collective_busbw_gbps = 30;
    j->collective_bytes_avg = step_bytes / GPT_CALLS;
    j->collective_bytes_max = embed_bytes;
    average_gradients(j, GPT_CALLS, GPT_EXPOSED_MS - 0.1);
}

/* With the calls' bytes, bucketing saves the latency and the transfer but the last
 * bucket's (without them, or in older summaries, BUCKETED_EXPOSED of the step: the
 * test above). */
static void test_bucketing_leaves_the_last_bucket(void **state)
{
    (void)state;
    job with, without;
    gpt_buckets_job(&with, true, 60, 50e6);
    gpt_buckets_job(&without, false, 60, 50e6);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "function", ""), AVERAGE);
    double truth_ms = mean_step_ms(&with) - mean_step_ms(&without);
    double saved_ms = pt_json_get_number(f, "impact", -1) * mean_step_ms(&with);
    print_message("  saves %.3f ms, truly %.3f ms\n", saved_ms, truth_ms);
    assert_true(fabs(saved_ms - truth_ms) < 0.4); /* the harness's noise: 0.5% of 65 ms */
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "its largest tensor, 50 MB"));
    assert_int_equal(findings_of(report)->count, 1); /* the exposed communication: explained */
    pt_json_free(report);
    report = diagnose(&without);
    assert_no_findings(report);
    pt_json_free(report);
}

/* The last bucket is sized from the bytes when most workers' summaries carry them: with
 * 5 of 8, the sentence names the largest tensor; with 4 (half), the summaries are taken
 * as older ones and a bucketed job as exposing 10% of the step. */
static void test_bucket_bytes_need_most_workers(void **state)
{
    (void)state;
    for (int with_bytes = 4; with_bytes <= 5; with_bytes++) {
        job j;
        gpt_buckets_job(&j, true, 60, 50e6);
        for (int w = with_bytes; w < j.n; w++)
            j.w[w].no_bytes = true;
        pt_json *report = diagnose(&j);
        const pt_json *f = findings_of(report)->items[0];
        assert_string_equal(pt_json_get_string(f, "function", ""), AVERAGE);
        const char *summary = pt_json_get_string(f, "summary", "");
        if (with_bytes == 5)
            assert_non_null(strstr(summary, "its largest tensor, 50 MB"));
        else
            assert_null(strstr(summary, "its largest tensor"));
        pt_json_free(report);
    }
}

/* A job of little compute whose embedding is 200 MB: what a bucketed job still waits
 * (4.9 ms) is more than the 10% of the step communication is expected to take, so the
 * exposed communication above that is more than bucketing saves; the bucketing finding
 * explains it all (what it saves and what stays), and it is the only finding. */
static void test_bucketing_explains_the_exposed_communication(void **state)
{
    (void)state;
    job with, without;
    gpt_buckets_job(&with, true, 5, 200e6);
    gpt_buckets_job(&without, false, 5, 200e6);
    pt_json *report = diagnose(&with);
    print_findings(report);
    assert_int_equal(findings_of(report)->count, 1);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "function", ""), AVERAGE);
    assert_impact_near(f, true_saving(&with, &without));
    pt_json_free(report);
}

/* ------------------------------------------------------------ slow in every step */

/* The first finding is rank's GPU alone, with the saving of the job without its excess. */
static void assert_first_is_the_gpu_of(const job *with, const job *without, int rank)
{
    pt_json *report = diagnose(with);
    first_summary(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_workers(f, (int[]){rank}, 1);
    assert_impact_near(f, true_saving(with, without));
    pt_json_free(report);
}

/* No GPU finding names some of the workers. */
static void assert_no_gpu_finding_names_a_rank(const job *j)
{
    pt_json *report = diagnose(j);
    print_findings(report);
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++)
        assert_false(!pt_json_get(all->items[i], "all_workers")->boolean &&
                     strcmp(pt_json_get_string(all->items[i], "category", ""), "gpu_compute") == 0);
    pt_json_free(report);
}

/* A job built with `rank`'s GPU slower by `slower` ms in each of 3 steps: its first
 * finding is that GPU alone, with the saving of the job without the excess; built with
 * `not_named` instead, no GPU finding names some of the workers. */
static void check_slow_gpu(void (*build)(job *, const double[3]), int rank, const double slower[3],
                           const double not_named[3])
{
    static const double none[3] = {0, 0, 0};
    job with, without;
    build(&with, slower);
    build(&without, none);
    assert_first_is_the_gpu_of(&with, &without, rank);
    build(&with, not_named);
    assert_no_gpu_finding_names_a_rank(&with);
}

/* Ranks 0 and 8 have one slow step each (25 ms more kernels: processes sharing a GPU);
 * rank 15's GPU is slower in every step, by `extra` (sharing slows some of its steps
 * more). */
static void every_step_job(job *j, const double extra[3])
{
    data_parallel(j, 16, 3, 100, 5, 0.01, 5);
    j->w[0].acts[0].ms[0] += 25;
    j->w[8].acts[0].ms[1] += 25;
    for (int s = 0; s < 3; s++)
        j->w[15].acts[0].ms[s] += extra[s];
}

/* Rank 15 ahead by 27, 31 and 59 ms: its own spread (17 ms) would hide it from the test
 * of its mean (5 sigma of it over sqrt(3): 50 ms against 39), but it is ahead in every
 * step by more than the others' noise reaches in one: named, with the saving the
 * schedule gives (2, 6 and 59 ms: the one-step slow ranks pace the steps it does not).
 * Ahead by 27, 31 and 0 it is not named. */
static void test_a_gpu_slower_in_every_step_is_named(void **state)
{
    (void)state;
    static const double slower[3] = {27, 31, 59}, two_of_three[3] = {27, 31, 0};
    check_slow_gpu(every_step_job, 15, slower, two_of_three);
}

/* 32 workers, a quarter of them 25-32 ms slower in each step (processes sharing GPUs: a
 * different quarter each step), rank 31 by `extra`. */
static void shared_gpus_job(job *j, const double extra[3])
{
    data_parallel(j, 32, 3, 100, 5, 0.01, 5);
    for (int w = 0; w < 30; w++)
        for (int s = 0; s < 3; s++)
            if ((w + s) % 4 == 0)
                j->w[w].acts[0].ms[s] += 25 + w % 8;
    for (int s = 0; s < 3; s++)
        j->w[31].acts[0].ms[s] += extra[s];
}

/* Rank 31 53, 28 and 66 ms ahead: the noise's spread (a quarter of the workers in each
 * step) is larger than 28 ms, but no worker is that far up in two of the steps, so chance
 * would put it there for under 0.01 of the 32: named, with the schedule's saving. 28, 25
 * and 30 ms ahead, as far up as the noise puts a quarter of them in each step, it is not. */
static void test_a_gpu_slower_than_the_noise_reaches_is_named(void **state)
{
    (void)state;
    static const double slower[3] = {53, 28, 66}, as_noise[3] = {28, 25, 30};
    check_slow_gpu(shared_gpus_job, 31, slower, as_noise);
}

/* A contended host: rank 15's Python (its data loading, 10 ms a step elsewhere, 13
 * functions) takes 2.8x as long, 18 ms more a step. Processes sharing GPUs slow rank 3's
 * compute by 25 ms in step 0 and rank 9's in step 1, so rank 15 paces only step 2; fixing
 * its host saves that step's lead, what the schedule says, and it is said as the host's
 * (a rank the others wait for in one step of three, not in most, is still worth its
 * saving). Without the slowdown no finding names a rank. */
static void contended_host_job(job *j, double factor)
{
    data_parallel(j, 16, 3, 100, 10, 0.01, 5);
    j->w[3].acts[0].ms[0] += 25;
    j->w[9].acts[0].ms[1] += 25;
    for (size_t i = 0; i < j->w[15].count; i++)
        if (j->w[15].acts[i].cls == PT_CLASS_PYTHON)
            for (int s = 0; s < 3; s++)
                j->w[15].acts[i].ms[s] *= factor;
}

static void test_a_contended_host_pacing_one_step_is_named(void **state)
{
    (void)state;
    job with, without;
    contended_host_job(&with, 2.8);
    contended_host_job(&without, 1);
    pt_json *report = diagnose(&with);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "host");
    assert_workers(f, (int[]){15}, 1);
    assert_impact_near(f, true_saving(&with, &without));
    pt_json_free(report);
    assert_no_gpu_finding_names_a_rank(&without);
    report = diagnose(&without);
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++)
        assert_true(pt_json_get(all->items[i], "all_workers")->boolean);
    pt_json_free(report);
}

/* 16 workers, six kernels of 10 ms a step each (1% jitter); rank 15's GPU 1.5x in every
 * step, rank 3's `rank3[s]` times in step s. */
static void six_kernel_job(job *j, const double rank3[3])
{
    static const char *const kernels[] = {"k0_kernel1_1_1|1_1_1", "k1_kernel1_1_1|1_1_1", "k2_kernel1_1_1|1_1_1",
                                          "k3_kernel1_1_1|1_1_1", "k4_kernel1_1_1|1_1_1", "k5_kernel1_1_1|1_1_1"};
    job_init(j, 16, 3);
    j->transfer_ms = 5;
    for (int w = 0; w < 16; w++)
        for (int k = 0; k < 6; k++) {
            double v[3];
            for (int s = 0; s < 3; s++)
                v[s] = 10 * (1 + 0.01 * jitter(w, s, k)) * (w == 15 ? 1.5 : w == 3 ? rank3[s] : 1);
            act_add(&j->w[w], PT_CLASS_COMPUTE, kernels[k], v, 3);
        }
}

/* A slow GPU's finding takes in the workers slowed by a like factor, in every step as it
 * is: rank 3 slowed 1.5x in two steps of three (processes sharing its GPU then) is, on
 * average, 1.33x, more than half rank 15's slowdown, but it is not slower in the third
 * step and is not in it; slowed 1.4x in every step, it is. */
static void test_a_gpu_slowed_in_some_steps_does_not_join_a_slow_one(void **state)
{
    (void)state;
    static const double two_steps[3] = {1.5, 1.5, 1}, every_step[3] = {1.4, 1.4, 1.4};
    job j;
    six_kernel_job(&j, two_steps);
    pt_json *report = diagnose(&j);
    print_findings(report);
    const pt_json *f = findings_of(report)->items[0];
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_workers(f, (int[]){15}, 1);
    pt_json_free(report);

    six_kernel_job(&j, every_step);
    report = diagnose(&j);
    print_findings(report);
    f = findings_of(report)->items[0];
    assert_workers(f, (int[]){3, 15}, 2);
    pt_json_free(report);
}

/* n workers, a third of them 25 ms slower in each step (a different third each step),
 * the last by `extra`. */
static void third_slowed_job(job *j, int n, const double extra[3])
{
    data_parallel(j, n, 3, 100, 5, 0.01, 5);
    for (int w = 0; w < n - 1; w++)
        for (int s = 0; s < 3; s++)
            if ((w + s) % 3 == 0)
                j->w[w].acts[0].ms[s] += 25;
    for (int s = 0; s < 3; s++)
        j->w[n - 1].acts[0].ms[s] += extra[s];
}

/* The chance test's boundary: the last worker is the top in each of the 3 steps (30, 70
 * and 35 ms ahead: under 5 sigma of the noise in one, its own spread too wide for its
 * mean), so chance would put n x (1/n)^3 of the workers there. Of 11 workers that is
 * 0.0083, under CHANCE_WORKERS (0.01): named; of 10 exactly 0.01: not. */
static void test_the_chance_a_worker_is_the_top_is_under_a_hundredth(void **state)
{
    (void)state;
    static const double ahead[3] = {30, 70, 35}, none[3] = {0, 0, 0};
    job with, without;
    third_slowed_job(&with, 11, ahead);
    third_slowed_job(&without, 11, none);
    assert_first_is_the_gpu_of(&with, &without, 10);
    third_slowed_job(&with, 10, ahead);
    assert_no_gpu_finding_names_a_rank(&with);
}

/* Work that moves between ranks: 40 ms more kernels on rank `a` in steps 0 and 2 and on
 * rank `b` in step 1. When a = 3 paces two of the three steps, the uneven-work finding
 * says so and that more steps tell a slower rank from chance; when each step's slowest
 * is another rank (a = 3 in step 0, b = 5 in step 1, rank 6 in step 2), it does not. */
static void moving_job(job *j, int a, int b, int c)
{
    data_parallel(j, 8, 3, 70, 5, 0.01, 10);
    j->w[a].acts[0].ms[0] += 40;
    j->w[b].acts[0].ms[1] += 40;
    j->w[c].acts[0].ms[2] += 40;
}

static void test_uneven_work_says_a_rank_slowest_in_most_steps(void **state)
{
    (void)state;
    for (int twice = 0; twice < 2; twice++) {
        job j;
        moving_job(&j, 3, 5, twice ? 3 : 6);
        pt_json *report = diagnose(&j);
        const char *summary = first_summary(report);
        assert_non_null(strstr(summary, "The slowest rank moves from step to step"));
        if (twice)
            assert_non_null(strstr(summary, "(rank 3 was the slowest in 2 of the 3 steps profiled: with more steps, "
                                            "--steps, a rank slower in every step is told from chance)"));
        else
            assert_null(strstr(summary, "was the slowest in"));
        pt_json_free(report);
    }
}

/* ------------------------------------------------------------ healthy jobs */

/* 16 workers, 5 steps, 5% noise in every part of every step: nothing to fix. */
static void test_healthy_noisy_job_has_no_finding(void **state)
{
    (void)state;
    job j;
    data_parallel(&j, 16, 5, 70, 6, 0.05, 10);
    pt_json *report = diagnose(&j);
    assert_no_findings(report);
    pt_json_free(report);
}

/* 1, 2 and 3 workers with noise: no finding either. */
static void test_small_healthy_jobs_have_no_finding(void **state)
{
    (void)state;
    for (int n = 1; n <= 3; n++) {
        job j;
        data_parallel(&j, n, 4, 70, 6, 0.03, n > 1 ? 10 : 0);
        pt_json *report = diagnose(&j);
        assert_no_findings(report);
        pt_json_free(report);
    }
}

/* Four pipeline stages of two data-parallel ranks each: stage 0 loads the data and embeds
 * it, the last stage computes the loss, the middle ones run layers; ranks wait for their
 * stage's neighbours. What differs between stages is no rank's fault. */
static void test_pipeline_like_job_names_no_rank(void **state)
{
    (void)state;
    job j;
    job_init(&j, 8, 4);
    j.transfer_ms = 8;
    for (int w = 0; w < 8; w++) {
        int stage = w / 2;
        worker_spec *spec = &j.w[w];
        double v[MAX_STEPS];
        for (int s = 0; s < 4; s++)
            v[s] = (stage == 0 ? 50 : stage == 3 ? 58 : 62) * (1 + 0.01 * jitter(w, s, 1));
        act_add(spec, PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", v, 4);
        if (stage == 0) {
            for (int s = 0; s < 4; s++)
                v[s] = 6 * (1 + 0.01 * jitter(w, s, 2));
            act_add(spec, PT_CLASS_PYTHON, NEXT_DATA "|torch/utils/data/_utils/fetch.py: fetch", v, 4);
        }
        if (stage == 3) {
            for (int s = 0; s < 4; s++)
                v[s] = 3 * (1 + 0.01 * jitter(w, s, 3));
            act_add(spec, PT_CLASS_PYTHON, MODULE "|torch/nn/functional.py: cross_entropy", v, 4);
        }
        act_flat(spec, PT_CLASS_PYTHON, MODULE "|model.py: forward", 0.5, 4);
    }
    pt_json *report = diagnose(&j);
    print_findings(report);
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++)
        assert_false(candidate(all->items[i]) && !pt_json_get(all->items[i], "all_workers")->boolean);
    pt_json_free(report);
}


/* A pipeline of 4 stages x 2 replicas (ranks 2s, 2s+1 are stage s), M microbatches of
 * TAU ms per layer: stage s runs layers[s] x M calls of the layer kernel per step. */
#define TAU 2.0
static void pipeline_job(job *j, const int layers[4], int microbatches, const char *collective, double transfers)
{
    job_init(j, 8, 4);
    j->transfer_ms = 4;
    j->collective = collective;
    j->collective_calls = transfers;
    for (int w = 0; w < 8; w++) {
        int stage = w / 2;
        act_flat(&j->w[w], PT_CLASS_COMPUTE, "gemm_kernel128_1_1|256_1_1", layers[stage] * microbatches * TAU, 4);
        j->w[w].acts[j->w[w].count - 1].calls_per_step = layers[stage] * microbatches;
        act_flat(&j->w[w], PT_CLASS_PYTHON, MODULE "|model.py: forward", 0.5, 4);
    }
}

static const pt_json *finding_naming(const pt_json *report, int a, int b)
{
    const pt_json *all = findings_of(report);
    for (size_t i = 0; i < all->count; i++) {
        const pt_json *w = pt_json_get(all->items[i], "workers");
        if (w->count == 2 && w->items[0]->integer == a && w->items[1]->integer == b)
            return all->items[i];
    }
    return NULL;
}

#define SENDRECV "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"

/* GPipe's step from its 4 stages' time per microbatch: the fill and the drain pass every
 * stage once, and the slowest stage paces the other M - 1 microbatches. */
static double gpipe_step_ms(const double per_microbatch[4], int microbatches)
{
    double sum = 0, slowest = 0;
    for (int s = 0; s < 4; s++)
        sum += per_microbatch[s], slowest = fmax(slowest, per_microbatch[s]);
    return sum + (microbatches - 1) * slowest;
}

/* Stage 3 holds a layer that stage 2 lacks (3, 3, 2, 4): moving it balances the stages
 * (3, 3, 3, 3) without changing the job's work. GPipe's step is the stages' sum over one
 * microbatch plus M - 1 times the slowest stage's, so the true saving is (M - 1) x TAU
 * (the stage's time per microbatch drops from 4 to 3 layers), computed here from the
 * schedule, not from the summaries: 6 ms at M = 4, not the 8 ms of the layer removed. The
 * transfers say M: 2 per microbatch on the end stages. With transfers for M = 1 the
 * stages run one after the other and moving the layer saves nothing; without transfers
 * (an all-reduce) or without a lighter stage (3, 3, 3, 4) the extra layer is extra work,
 * removed: 8 ms. */
static void test_pipeline_stage_work_is_moved(void **state)
{
    (void)state;
    static const int uneven[4] = {3, 3, 2, 4}, heavy[4] = {3, 3, 3, 4};
    const int m = 4;
    job j;
    pipeline_job(&j, uneven, m, SENDRECV, 2 * m);
    pt_json *report = diagnose(&j);
    print_findings(report);
    const pt_json *f = finding_naming(report, 6, 7);
    assert_non_null(f);
    assert_string_equal(pt_json_get_string(f, "category", ""), "gpu_compute");
    assert_non_null(strstr(pt_json_get_string(f, "summary", ""), "pipeline stage"));
    assert_impact_near(f, (m - 1) * TAU / mean_step_ms(&j));
    pt_json_free(report);

    /* Rank 7's GPU is 4 ms slower a step (its noise, or a slower part): moving a layer
     * moves the stage's excess, the same on both of its replicas, not rank 7's 4 ms, which
     * it keeps (rank 7 then paces the job at 3 layers and 4 ms): still (M - 1) x TAU. The
     * saving said counts the stage's mean above every worker's, 1.5 ms of rank 7's 4 with
     * it: 7.1 ms, within the bound. */
    pipeline_job(&j, uneven, m, SENDRECV, 2 * m);
    for (int st = 0; st < j.steps; st++)
        j.w[7].acts[0].ms[st] += 4;
    report = diagnose(&j);
    print_findings(report);
    f = finding_naming(report, 6, 7);
    assert_non_null(f);
    assert_impact_near(f, (m - 1) * TAU / mean_step_ms(&j));
    pt_json_free(report);

    /* Rank 4 (stage 2, the lighter) runs its layers 20% slower (its GPU shared): the layer
     * moved lands there and costs it 2.4 ms per microbatch, so stage 2 then paces at 7.2
     * ms a microbatch. GPipe's step before, 6 + 6 + 4.8 + 8 + 3 x 8, after, 6 + 6 + 7.2 + 6
     * + 3 x 7.2: 2 ms saved, not the 6 ms of stage 3's layer moved to a stage as fast as
     * the others. */
    pipeline_job(&j, uneven, m, SENDRECV, 2 * m);
    for (int st = 0; st < j.steps; st++)
        j.w[4].acts[0].ms[st] *= 1.2;
    report = diagnose(&j);
    print_findings(report);
    f = finding_naming(report, 6, 7);
    assert_non_null(f);
    double per_microbatch_before[4] = {3 * TAU, 3 * TAU, 2 * TAU * 1.2, 4 * TAU};
    double per_microbatch_after[4] = {3 * TAU, 3 * TAU, 3 * TAU * 1.2, 3 * TAU};
    assert_impact_near(f, (gpipe_step_ms(per_microbatch_before, m) - gpipe_step_ms(per_microbatch_after, m)) /
                              mean_step_ms(&j));
    pt_json_free(report);

    /* A lighter stage that runs none of the layers (3, 3, 0, 6: stage 2 holds the
     * embeddings, say) takes on 3 of stage 3's at the typical worker's time per call:
     * balanced at 3, (M - 1) x 3 TAU saved. */
    static const int empty_stage[4] = {3, 3, 0, 6};
    pipeline_job(&j, empty_stage, m, SENDRECV, 2 * m);
    report = diagnose(&j);
    print_findings(report);
    f = finding_naming(report, 6, 7);
    assert_non_null(f);
    assert_impact_near(f, (m - 1) * 3 * TAU / mean_step_ms(&j));
    pt_json_free(report);

    /* Rank 2 (stage 1, 3 layers) runs 4 ms of other kernels a step: balanced, it paces
     * every microbatch but one at 3 layers and 1 ms, so moving the layer saves
     * (M - 1) x (TAU - 4 / M) = 3 ms, not the 6 ms of stage 3 pacing at 3 layers. */
    pipeline_job(&j, uneven, m, SENDRECV, 2 * m);
    act_flat(&j.w[2], PT_CLASS_COMPUTE, "elementwise_kernel128_1_1|256_1_1", 4, 4);
    report = diagnose(&j);
    print_findings(report);
    f = finding_naming(report, 6, 7);
    assert_non_null(f);
    assert_impact_near(f, (m - 1) * (TAU - 4.0 / m) / mean_step_ms(&j));
    pt_json_free(report);

    /* M is half the fewest transfers per step: 1 -> none (no pipeline: the layer removed,
     * 8 ms), 2 and 3 -> 1 (nothing to save), 4 and 5 -> 2. */
    static const struct {
        double transfers;
        const char *saving;
    } by_transfers[] = {{1, "saves 8 ms per step"}, {2, NULL}, {3, NULL}, {4, "saves 4 ms per step"},
                        {5, "saves 4 ms per step"}, {8, "saves 6 ms per step"}};
    for (size_t i = 0; i < sizeof by_transfers / sizeof *by_transfers; i++) {
        pipeline_job(&j, uneven, m, SENDRECV, by_transfers[i].transfers);
        report = diagnose(&j);
        print_findings(report);
        f = finding_naming(report, 6, 7);
        if (!by_transfers[i].saving)
            assert_true(!f || pt_json_get_number(f, "impact", 1) < 0.001);
        else
            assert_non_null(strstr(pt_json_get_string(f, "summary", ""), by_transfers[i].saving));
        pt_json_free(report);
    }

    const char *collective[2] = {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                                 SENDRECV};
    const int *layers[2] = {uneven, heavy};
    for (int i = 0; i < 2; i++) {
        pipeline_job(&j, layers[i], m, collective[i], 2 * m);
        report = diagnose(&j);
        print_findings(report);
        f = finding_naming(report, 6, 7);
        assert_non_null(f);
        assert_null(strstr(pt_json_get_string(f, "summary", ""), "pipeline stage"));
        assert_impact_near(f, m * TAU / mean_step_ms(&j));
        pt_json_free(report);
    }
}

/* A balanced pipeline (3, 3, 3, 3) whose stages wait 20 ms a step in their transfers:
 * exposed point-to-point transfers are its bubble (or an all-to-all), and the advice says
 * so (more microbatches, an interleaved schedule); the same wait in an all-reduce is
 * gradient communication to overlap. */
static void test_exposed_sends_are_a_pipelines_bubble(void **state)
{
    (void)state;
    static const int balanced[4] = {3, 3, 3, 3};
    const char *collective[2] = {SENDRECV,
                                 "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"};
    for (int i = 0; i < 2; i++) {
        job j;
        pipeline_job(&j, balanced, 4, collective[i], 8);
        j.transfer_ms = 20;
        pt_json *report = diagnose(&j);
        const char *summary = first_summary(report);
        assert_non_null(strstr(summary, "Communication is exposed"));
        assert_true(pt_json_get(findings_of(report)->items[0], "all_workers")->boolean);
        bool bubble = strstr(summary, "point-to-point transfers: in a pipeline its bubble") != NULL;
        bool overlap = strstr(summary, "overlap gradient communication with backward") != NULL;
        assert_true(i == 0 ? bubble && !overlap : overlap && !bubble);
        pt_json_free(report);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_gpu_loader_is_found_at_next),
        cmocka_unit_test(test_every_rank_loader_is_named_first),
        cmocka_unit_test(test_every_worker_subtree_decision_boundary),
        cmocka_unit_test(test_one_step_stall_names_rank_and_function),
        cmocka_unit_test(test_a_spawned_job_names_the_users_frame),
        cmocka_unit_test(test_rank_subtree_in_every_step),
        cmocka_unit_test(test_stall_needs_three_workers),
        cmocka_unit_test(test_excess_clears_the_peers_floor),
        cmocka_unit_test(test_rank_without_overlap_is_named),
        cmocka_unit_test(test_overlap_saves_down_to_the_next_rank),
        cmocka_unit_test(test_own_waits_are_waited_by_under_half),
        cmocka_unit_test(test_own_waits_count_when_steady),
        cmocka_unit_test(test_rank_hiding_none_is_named_though_it_exposes_less),
        cmocka_unit_test(test_late_rank_boundary_is_the_hidden_share),
        cmocka_unit_test(test_tiny_collectives_are_bucketed),
        cmocka_unit_test(test_bucketing_leaves_the_last_bucket),
        cmocka_unit_test(test_sends_are_not_bucketed),
        cmocka_unit_test(test_partial_job_is_not_bucketed),
        cmocka_unit_test(test_missing_ranks_wait_less_the_measured_transfer),
        cmocka_unit_test(test_bucket_bytes_need_most_workers),
        cmocka_unit_test(test_bucketing_explains_the_exposed_communication),
        cmocka_unit_test(test_a_gpu_slower_in_every_step_is_named),
        cmocka_unit_test(test_a_gpu_slower_than_the_noise_reaches_is_named),
        cmocka_unit_test(test_a_gpu_slowed_in_some_steps_does_not_join_a_slow_one),
        cmocka_unit_test(test_a_contended_host_pacing_one_step_is_named),
        cmocka_unit_test(test_the_chance_a_worker_is_the_top_is_under_a_hundredth),
        cmocka_unit_test(test_uneven_work_says_a_rank_slowest_in_most_steps),
        cmocka_unit_test(test_healthy_noisy_job_has_no_finding),
        cmocka_unit_test(test_small_healthy_jobs_have_no_finding),
        cmocka_unit_test(test_pipeline_like_job_names_no_rank),
        cmocka_unit_test(test_pipeline_stage_work_is_moved),
        cmocka_unit_test(test_exposed_sends_are_a_pipelines_bubble),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
