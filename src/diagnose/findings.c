/* findings.c -- the diagnosis: which workers are slow, which function is the root cause,
 * and how much step time it costs; plus problems every worker shares, and hangs.
 *
 * Method (PerfTracker's, made to hold on real traces):
 *  0. Work, not waiting. The summaries split each worker's time into work and waiting:
 *     a builtin or operator that handed work to other threads and waited for it (backward
 *     while the autograd thread runs, a call blocked on gloo's threads) is waiting, and so
 *     is the time inside collectives. Waiting is never a cause; it is how the others
 *     show a straggler.
 *  1. Peers (peers.c). Every worker is compared with the typical one, function by function
 *     and class by class: extra calls are exact evidence of extra work; more time in the
 *     same calls must clear the noise (each worker's own step-to-step spread) in every
 *     step. A worker whose CPU-side calls are all slower by a similar factor is one host
 *     finding (contention or throttling). The worker the others wait for (least waiting)
 *     is the straggler, explained by what it does instead of waiting.
 *  2. Hardware evidence: a GPU clocked below its peers', or a busier host CPU, behind a
 *     finding about that worker.
 *  3. Common problems. What every worker does badly is invisible to peer comparison, so
 *     it is judged against expected behaviour instead: memory operations above 3% of the
 *     step on (almost) all workers, a runtime API above 5% (launch-bound), a Python stack
 *     above 15% with the GPU idle, exposed communication above 30%.
 *  4. Hangs (hangs.c): the ranks' collectives matched per process group -- who is
 *     missing from the call the others wait in, which calls do not match, groups entered
 *     in opposite orders, a call nobody returns from -- and, without collective state,
 *     the stacks: workers stopped outside a collective are the culprits.
 * Impact is the excess time per step over the median worker (or over the expected cost)
 * divided by the median step time: roughly what fixing it would save. */
#include "diagnose/finding.h"
#include "summarize/classify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIGMAS 5.0
#define COMMON_MEMORY 0.03
#define COMMON_RUNTIME 0.05
#define COMMON_PYTHON 0.15
#define COMMON_COMM 0.30
#define EXPECTED_MEMORY 0.01
#define EXPECTED_RUNTIME 0.01
#define EXPECTED_PYTHON 0.10  /* a step's own Python (its data, its loop) is normal work */
#define EXPECTED_COMM 0.10
#define MOST_WORKERS 0.9

/* ------------------------------------------------------------ hardware evidence */

/* Hardware samples that explain a slow worker: a GPU clocked below its peers' (power or
 * thermal throttling) behind slow kernels, a host CPU busier than its peers' behind slow
 * launches or Python. Judged like everything else: robust outliers among the workers. */
typedef struct hardware_rule {
    const char *suffix;        /* metric name ends with this (gpu0.sm_clock_mhz, ...) */
    int direction;             /* -1: too low is the problem, +1: too high */
    double relative_floor;     /* and at least this far from the median, relatively */
    const char *category_named;/* the finding it explains */
    const char *explanation;
} hardware_rule;

static const hardware_rule hardware_rules[] = {
    {"sm_clock_mhz", -1, 0.05, "gpu_compute",
     "its GPU runs at a lower clock than its peers' (power or thermal throttling): check cooling, power caps "
     "and `nvidia-smi -q -d PERFORMANCE` on that host"},
    {"host.cpu_util", +1, 0.10, "cuda_runtime",
     "its host CPU is busier than its peers': other processes compete with the training process"},
    {"host.cpu_util", +1, 0.10, "python",
     "its host CPU is busier than its peers': other processes compete with the training process"},
    {"host.cpu_util", +1, 0.10, "host",
     "its host CPU is busier than its peers': other processes compete with the training process"},
};

static const pt_metric_summary *metric_of(const pt_worker_summary *s, const char *suffix)
{
    for (size_t i = 0; i < s->metric_count; i++)
        if (pt_ends_with(s->metrics[i].name, suffix))
            return &s->metrics[i];
    return NULL;
}

/* Host metrics compare hosts: a worker sharing its host with others it is compared with
 * shares its CPU too, so differences are noise. */
static bool shares_host(const pt_analysis *a, size_t w)
{
    const char *host = a->workers[w]->host;
    if (!host || !*host)
        return true; /* unknown: cannot tell hosts apart */
    for (size_t v = 0; v < a->n; v++)
        if (v != w && a->workers[v]->host && strcmp(a->workers[v]->host, host) == 0)
            return true;
    return false;
}

static void hardware_findings(const pt_analysis *a, finding_list *list)
{
    size_t count = list->count; /* only findings that existed before this pass */
    double *values = pt_xmalloc(a->n * sizeof *values);
    for (size_t r = 0; r < PT_ARRAY_LEN(hardware_rules); r++) {
        const hardware_rule *rule = &hardware_rules[r];
        size_t m = 0;
        for (size_t w = 0; w < a->n; w++) {
            const pt_metric_summary *metric = metric_of(a->workers[w], rule->suffix);
            if (metric)
                values[m++] = metric->mean;
        }
        if (m < 3)
            continue;
        pt_spread s = pt_spread_of(values, m, a->scratch);
        for (size_t i = 0; i < count; i++) {
            const finding *explained = &list->items[i];
            if (explained->all_workers || strcmp(explained->category, rule->category_named) != 0)
                continue;
            for (size_t k = 0; k < explained->worker_count; k++) {
                size_t w = explained->workers[k];
                const pt_metric_summary *metric = metric_of(a->workers[w], rule->suffix);
                if (!metric || (strncmp(rule->suffix, "host.", 5) == 0 && shares_host(a, w)))
                    continue;
                double off = (metric->mean - s.median) * rule->direction;
                if (off <= fmax(SIGMAS * s.sigma, rule->relative_floor * fabs(s.median)))
                    continue;
                finding *f = pt_finding_add(list, "hardware", metric->name, "Hardware");
                f->metric = "average over the window";
                f->median = s.median;
                f->impact = list->items[i].impact; /* the time it costs is the finding it explains */
                pt_finding_name_worker(f, w, metric->mean);
                pt_buf b = PT_BUF_INIT;
                pt_buf_printf(&b, "Rank %d: %s averages %.4g against %.4g on the other workers; %s.",
                              pt_worker_rank(a, w), metric->name, metric->mean, s.median, rule->explanation);
                f->summary = pt_buf_take(&b);
            }
        }
    }
    free(values);
}

/* ------------------------------------------------------------ 3. common problems */

/* A finding about every worker: values[w] per worker, judged at the median. */
static finding *add_common_finding(const pt_analysis *a, finding_list *list, pt_class cls, const char *function,
                                   double median, double expected, const char *metric, const double *values)
{
    finding *f = pt_finding_add(list, pt_category_of(cls), function, pt_section_of(cls));
    f->all_workers = true;
    f->impact = median - expected;
    f->metric = metric;
    f->median = median;
    for (size_t w = 0; w < a->n; w++)
        pt_finding_name_worker(f, w, values[w]);
    return f;
}

/* What to do about a cost every worker shares: by class, and for runtime calls by what
 * the call does (a synchronize is not a launch) and on which platform. */
static const char *common_advice(pt_class cls, const char *function)
{
    if (cls == PT_CLASS_MEMORY)
        return "remove redundant copies (.contiguous(), .clone(), dtype casts, host round trips) or overlap them "
               "with compute.";
    if (cls == PT_CLASS_PYTHON)
        return "the GPU idles meanwhile: move this work off the critical path (background data loading, fewer host "
               "syncs) or speed it up.";
    switch (pt_runtime_kind_of(function)) {
    case PT_RUNTIME_LAUNCH:
        return pt_runtime_is_hip(function) ? "the job is launch-bound: use HIP graphs, fuse kernels (torch.compile) "
                                             "or give each kernel more work."
                                           : "the job is launch-bound: use CUDA graphs, fuse kernels (torch.compile) "
                                             "or give each kernel more work.";
    case PT_RUNTIME_SYNC:
        return "the CPU blocks there while the GPU runs none of this worker's work: host synchronizations (.item(), "
               ".cpu(), torch.cuda.synchronize(), a CPU collective staging its buffers) stall the step; remove "
               "them from the step or overlap them.";
    case PT_RUNTIME_COPY:
        return "copies the CPU waits for stall the step: use pinned memory and non_blocking copies, or keep the "
               "data on the GPU.";
    case PT_RUNTIME_MEMORY:
        return "allocating and freeing device memory in the step is slow: let the caching allocator keep its "
               "blocks (no torch.cuda.empty_cache() in the loop) and avoid fragmentation.";
    default:
        return "move this call out of the step or make it less frequent.";
    }
}

static void common_class(const pt_analysis *a, finding_list *list, pt_class cls, double threshold, double expected)
{
    double *ratio = pt_xmalloc(a->n * sizeof *ratio);
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != cls || row->max_ratio < threshold)
            continue;
        pt_row_exposed_ratio(a, row, ratio);
        size_t above = 0;
        for (size_t w = 0; w < a->n; w++)
            above += ratio[w] > expected;
        double median = pt_median_of(ratio, a->n, a->scratch);
        if (median < threshold || (double)above < MOST_WORKERS * (double)a->n)
            continue;
        finding *f = add_common_finding(a, list, cls, row->name, median, expected,
                                        "bottleneck ratio (median over workers)", ratio);
        pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
        pt_short_function_name(cls, row->name, &name);
        char pct[PT_PERCENT_LEN];
        pt_buf_printf(&s, "Every worker spends %s of each step in %s `%s` not hidden by %s; ", pt_percent(pct, 100 * median),
                      cls == PT_CLASS_MEMORY ? "the memory operation" : cls == PT_CLASS_RUNTIME ? "the runtime call"
                                                                                             : "Python",
                      name.data ? name.data : row->name, cls == PT_CLASS_PYTHON ? "GPU work" : "computation");
        pt_buf_puts(&s, common_advice(cls, row->name));
        f->summary = pt_buf_take(&s);
        pt_buf_free(&name);
    }
    free(ratio);
}

static void common_communication(const pt_analysis *a, finding_list *list)
{
    double *ms = pt_xmalloc(a->n * sizeof *ms);
    double *ratio = pt_xmalloc(a->n * sizeof *ratio);
    for (size_t w = 0; w < a->n; w++)
        ratio[w] = a->window_ms[w] > 0 ? (double)a->workers[w]->exposed_ns[PT_CLASS_COMM] / 1e6 / a->window_ms[w] : 0;
    double median = pt_median_of(ratio, a->n, a->scratch);
    if (median >= COMMON_COMM) {
        /* Name the collective with the most exposed time on the median worker. */
        const pt_fn_row *top = NULL;
        double top_ms = -1, throughput = 0;
        for (size_t i = 0; i < a->row_count; i++) {
            if (a->rows[i].cls != PT_CLASS_COMM)
                continue;
            pt_row_exposed_ms(a, &a->rows[i], ms);
            double m = pt_median_of(ms, a->n, a->scratch);
            if (m > top_ms)
                top_ms = m, top = &a->rows[i];
        }
        if (top) {
            for (size_t w = 0; w < a->n; w++)
                ms[w] = top->by_worker[w] ? top->by_worker[w]->throughput_avg_pct : 0;
            throughput = pt_median_of(ms, a->n, a->scratch);
            finding *f = add_common_finding(a, list, PT_CLASS_COMM, top->name, median, EXPECTED_COMM,
                                            "exposed communication ratio (median over workers)", ratio);
            pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
            char pct[PT_PERCENT_LEN];
            pt_short_function_name(PT_CLASS_COMM, top->name, &name);
            pt_buf_printf(&s, "Communication is exposed (not overlapped with compute) for %s of each step on "
                              "every worker, most in `%s`",
                          pt_percent(pct, 100 * median), name.data ? name.data : top->name);
            if (throughput > 0)
                pt_buf_printf(&s, " at %s of the link's peak bandwidth", pt_percent(pct, throughput));
            pt_buf_puts(&s, "; overlap gradient communication with backward (DDP buckets), shard differently, "
                            "or check the links.");
            f->summary = pt_buf_take(&s);
            pt_buf_free(&name);
        }
    }
    free(ms);
    free(ratio);
}

/* ------------------------------------------------------------ output */

static int by_impact(const void *x, const void *y)
{
    const finding *a = x, *b = y;
    int order = pt_cmp_desc(a->impact, b->impact);
    if (order)
        return order;
    /* A hardware finding shares the impact of the finding it explains and follows it. */
    bool ha = strcmp(a->category, "hardware") == 0, hb = strcmp(b->category, "hardware") == 0;
    if (ha != hb)
        return ha ? 1 : -1;
    order = strcmp(a->category, b->category);
    return order ? order : strcmp(a->function, b->function);
}

static pt_json *finding_json(const pt_analysis *a, finding *f)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "category", pt_json_string(f->category));
    pt_json_add(j, "function", pt_json_string(f->function));
    pt_json *ranks = pt_json_add(j, "workers", pt_json_array());
    for (size_t i = 0; i < f->worker_count; i++)
        pt_json_push(ranks, pt_json_int(pt_worker_rank(a, f->workers[i])));
    pt_json_add(j, "all_workers", pt_json_bool(f->all_workers));
    pt_json_add(j, "impact", pt_json_number_rounded(f->impact, 6));
    pt_json_add(j, "summary", pt_json_string(f->summary ? f->summary : ""));
    pt_json *ev = pt_json_add(j, "evidence", pt_json_object());
    pt_json_add(ev, "section", pt_json_string(f->section));
    if (strcmp(f->category, "hang") != 0 && strcmp(f->category, "other") != 0)
        pt_json_add(ev, "key", pt_json_string(f->function));
    pt_json_add(ev, "metric", pt_json_string(f->metric));
    pt_json_add(ev, "median", pt_json_number_rounded(f->median, 6));
    if (f->hang) {
        pt_json_add(ev, "hang", f->hang);
        f->hang = NULL; /* the report owns it now */
    }
    pt_json *values = pt_json_add(ev, "values", pt_json_object());
    for (size_t i = 0; i < f->worker_count && i < 64; i++) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", pt_worker_rank(a, f->workers[i]));
        pt_json_add(values, rank, pt_json_number_rounded(f->values[i], 6));
    }
    return j;
}

pt_json *pt_build_diagnosis(const pt_analysis *a, int *status)
{
    finding_list list = {0};
    memset(status, 0, a->n * sizeof *status);
    pt_hang_findings(a, &list, status);
    size_t hangs = list.count;
    if (a->n >= 3) {
        pt_peer_findings(a, &list, hangs == 0);
        hardware_findings(a, &list);
    }
    size_t peer_findings = list.count - hangs;
    if (a->n > 0 && !hangs) {
        common_class(a, &list, PT_CLASS_MEMORY, COMMON_MEMORY, EXPECTED_MEMORY);
        common_class(a, &list, PT_CLASS_RUNTIME, COMMON_RUNTIME, EXPECTED_RUNTIME);
        if (a->gpu_workers == a->n)
            common_class(a, &list, PT_CLASS_PYTHON, COMMON_PYTHON, EXPECTED_PYTHON);
        /* Waiting for a straggler is exposed communication on everyone else: it is
         * explained by the straggler's finding, not a communication problem. */
        if (!peer_findings)
            common_communication(a, &list);
    }
    if (list.count)
        qsort(list.items, list.count, sizeof *list.items, by_impact);

    pt_json *diagnosis = pt_json_object();
    const char *verdict = hangs ? "hang" : list.count ? "degraded" : "healthy";
    pt_json_add(diagnosis, "verdict", pt_json_string(verdict));
    pt_json *findings = pt_json_add(diagnosis, "findings", pt_json_array());
    for (size_t i = 0; i < list.count; i++) {
        finding *f = &list.items[i];
        pt_json_push(findings, finding_json(a, f));
        for (size_t k = 0; k < f->worker_count && !f->all_workers; k++)
            if (status[f->workers[k]] == 0)
                status[f->workers[k]] = 1;
    }
    pt_finding_list_free(&list);
    return diagnosis;
}
