/* findings.c -- the diagnosis: which workers are slow, which function is the root cause,
 * and how much step time fixing it saves; plus problems every worker shares, and hangs.
 *
 * Method (PerfTracker's, made to hold on real traces):
 *  0. Work, not waiting. The summaries split each worker's time into work and waiting:
 *     a builtin or operator that handed work to other threads and waited for it (backward
 *     while the autograd thread runs, a call blocked on gloo's threads) is waiting, and so
 *     is the time inside collectives. Waiting is never a cause; it is how the others
 *     show a straggler.
 *  1. Peers (peers.c). Every worker is compared with the typical one, function by function
 *     and class by class: extra calls are exact evidence of extra work; more time in the
 *     same calls must clear the noise (each worker's own step-to-step spread, and the
 *     machine-wide swing of the typical worker) in every step, and the worker must hold
 *     the others up (it is among the busiest workers of the step model's segments:
 *     causality, not variance). Work graded across several workers (rank r sleeps r s)
 *     is judged against the fastest workers, consistently in every step, whoever
 *     arrived last; on a saturated host CPU shared by workers, CPU-side time that
 *     swings with the load names no rank. A worker whose CPU-side calls
 *     are all slower by a similar factor is one host finding; one whose kernels are is
 *     one slow-GPU finding (a host's slow GPUs together). The worker busiest in every
 *     segment is the straggler whatever its noise, explained by what it does instead of
 *     waiting; others doing the same thing for less time are named with it (graded).
 *  2. Hardware evidence: a GPU clocked below its peers', or a busier host CPU, behind a
 *     finding about that worker.
 *  3. Common problems. What every worker does badly is invisible to peer comparison, so
 *     it is judged against expected behaviour instead: memory operations above 3% of the
 *     step on (almost) all workers, a runtime API above 5% (launch-bound), a Python stack
 *     above 15% with the GPU idle, the CPU side as the critical path while the GPU idles
 *     (cpu_bound, summed over every stack), exposed communication above 30% (what no
 *     worker's work sets: the transfers), and a slowest worker that moves from step to
 *     step (uneven work).
 *  4. Ranks lost mid-round (diagnose.c) lead, and the others' waiting for them is not
 *     judged as exposed communication (pt_job_gaps.ranks_lost). Nor is it on a partial
 *     job (ranks not analysed): there the first finding says the rank the others wait
 *     for may be among the missing (waiting_for_missing). Workers of inputs that are not
 *     one job (pt_job_gaps.mixed) are not compared at all.
 *  5. Hangs (hangs.c): the ranks' collectives matched per process group -- who is
 *     missing from the call the others wait in, which calls do not match, groups entered
 *     in opposite orders, a call nobody returns from -- and, without collective state,
 *     the stacks: workers stopped outside a collective are the culprits.
 *
 * Impact is what fixing saves (costing.c), from the step model (whatif.h): a step is a
 * chain of sync points, each segment between two lasts as long as its busiest worker's
 * work plus its wait (the transfer). A finding removes, in each step, the named workers' time above
 * the workers it does not name (for a function, a class or all their work), or every
 * worker's time above what the activity is expected to cost (a common finding); its
 * impact is the share of the modelled step that saves, everything else unchanged. So a
 * straggler's fix saves its lead over the next slowest worker, a fault behind another
 * saves nothing alone, and the report's joint_impact is the saving of all of them at
 * once. Exposed communication is not work: its finding saves what no worker's work sets.
 * The sentences say the excess ("ms more", against the workers not named) and the
 * saving, in every step or in some; the report carries that saving as saves_ms, the one
 * figure. A finding that saves nothing, alone or within the joint saving, is dropped
 * (drop_findings_that_save_nothing), but for GPU work only its ranks do on a GPU that
 * may be shared: the model does not see it slow the ranks sharing it.
 *
 * One finding per cause (pt_merge_causes): findings that remove the same time or that one
 * change fixes -- one worker's kernels (or copies), cudaFree and the cudaMalloc after it,
 * a Python frame and the frames it calls, a rolled-up slow GPU, slow host or CPU-bound
 * finding and the functions it covers -- become one finding costed as one removal, its
 * members its parts (evidence.parts, each with its own saving alone). So the impacts do
 * not count one cause's time twice; where findings of different causes still remove the
 * same step time, each says what it adds to those reported above it (adds, which sum to
 * the joint saving: savings_in_report_order). */
#include "diagnose/candidates.h"
#include "diagnose/costing.h"
#include "diagnose/finding.h"
#include "diagnose/transfer.h"
#include "diagnose/whatif.h"
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
#define EXPECTED_COMM 0.10     /* where the links' counters do not time the transfer */
#define MOST_WORKERS 0.9
#define CPU_BOUND_GPU 0.7     /* the GPU works less than 70% of the step ... */
#define CPU_BOUND_CPU 0.3     /* ... while the CPU side works alone for 30% of it or more */
#define EXPECTED_CPU 0.10
/* A step's pieces (whatif.c), and the segment closing the loop in the first step. */
#define MAX_SEGMENTS_PER_STEP (PT_SUMMARY_MAX_SYNCS_PER_STEP + 2)
#define IMBALANCE_LISTED 6 /* (rank, step) pairs the uneven-work sentence names */

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

static void hardware_findings(const pt_analysis *a, finding_list *list)
{
    size_t count = list->count; /* only findings that existed before this pass */
    double *values = pt_xmalloc(a->n * sizeof *values);
    for (size_t r = 0; r < PT_ARRAY_LEN(hardware_rules); r++) {
        const hardware_rule *rule = &hardware_rules[r];
        size_t m = 0;
        for (size_t w = 0; w < a->n; w++) {
            const pt_metric_summary *metric = pt_worker_metric(a->workers[w], rule->suffix);
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
                const pt_metric_summary *metric = pt_worker_metric(a->workers[w], rule->suffix);
                if (!metric || (strncmp(rule->suffix, "host.", 5) == 0 && pt_worker_shares_host(a, w)))
                    continue;
                double off = (metric->mean - s.median) * rule->direction;
                if (off <= fmax(SIGMAS * s.sigma, rule->relative_floor * fabs(s.median)))
                    continue;
                finding *f = pt_finding_add(list, "hardware", metric->name, "Hardware");
                f->metric = "average over the window";
                f->median = s.median;
                f->explains = i + 1; /* the time it costs is the finding it explains */
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

/* A finding about every worker: values[w] per worker, judged at the median; fixing it
 * takes each worker's time in row down to `expected` of its step. */
static finding *add_common_finding(const pt_analysis *a, finding_list *list, const pt_fn_row *row, pt_class cls,
                                   const char *function, double median, double expected, const char *metric,
                                   const double *values)
{
    finding *f = pt_finding_add(list, pt_category_of(cls), function, pt_section_of(cls));
    f->all_workers = true;
    f->fix = PT_FIX_COMMON;
    f->row = row;
    f->classes = PT_CLASS_BIT(cls);
    f->expected = expected;
    f->metric = metric;
    f->median = median;
    f->cls = cls;
    for (size_t w = 0; w < a->n; w++)
        pt_finding_name_worker(f, w, values[w]);
    return f;
}

/* Who a finding about (almost) every worker is about: "The worker spends" in a one-worker
 * job, "Every worker spends" when all are above what is expected, else "7 of the 8
 * workers spend". */
static void put_common_subject(const pt_analysis *a, size_t above, const char *verb, pt_buf *out)
{
    if (a->n == 1)
        pt_buf_printf(out, "The worker %ss", verb);
    else if (above == a->n)
        pt_buf_printf(out, "Every worker %ss", verb);
    else
        pt_buf_printf(out, "%zu of the %zu workers %s", above, a->n, verb);
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

/* Common findings the model says fixing would barely help are not worth a line. */
#define COMMON_MIN_SAVING 0.01
#define EXPLAINS_WAITING 0.03 /* a peer finding saving this share of the step explains others' waiting */
#define SAME_TIME_SAID 0.005 /* a finding adding this much less than its impact says so (half a point) */

/* What a common finding is about: "the runtime call `cudaFree`", or for one merged from
 * parts (pt_merge_causes) the cause and each part's median share of the step. */
static void put_common_subject_of(const finding *f, pt_buf *out)
{
    pt_buf name = PT_BUF_INIT;
    bool named_by_stack = f->row && strcmp(f->function, f->row->name) != 0; /* allocator churn's releasing frame */
    pt_short_function_name(named_by_stack ? PT_CLASS_PYTHON : f->cls, f->function, &name);
    const char *shown = name.data ? name.data : f->function;
    if (!f->part_count)
        pt_buf_printf(out, "%s `%s`", f->cls == PT_CLASS_MEMORY ? "the memory operation" : f->cls == PT_CLASS_RUNTIME ?
                      "the runtime call" : "Python", shown);
    else if (f->cls == PT_CLASS_PYTHON)
        pt_buf_printf(out, "Python `%s` and the code it calls", shown);
    else if (f->cls == PT_CLASS_RUNTIME && named_by_stack)
        pt_buf_printf(out, "allocator churn, device memory freed (in `%s`) and allocated again", shown);
    else if (f->cls == PT_CLASS_RUNTIME)
        pt_buf_puts(out, "allocator churn, device memory freed and allocated again");
    else
        pt_buf_printf(out, "%zu %s", f->part_count, f->cls == PT_CLASS_MEMORY ? "memory operations" : "functions");
    pt_buf_free(&name);
    for (size_t i = 0; i < f->part_count && i < PT_PARTS_SAID; i++) {
        char pct[PT_PERCENT_LEN];
        pt_buf part = PT_BUF_INIT;
        pt_short_function_name(f->parts[i].cls, f->parts[i].function, &part);
        pt_buf_printf(out, "%s`%s` %s", i ? ", " : " (", part.data ? part.data : f->parts[i].function,
                      pt_percent(pct, 100 * f->parts[i].median));
        pt_buf_free(&part);
    }
    if (f->part_count > PT_PARTS_SAID)
        pt_buf_printf(out, " and %zu more", f->part_count - PT_PARTS_SAID);
    if (f->part_count)
        pt_buf_putc(out, ')');
}

/* "Every worker spends 19% of each step in the runtime call `cudaFree` not hidden by
 * computation; fixing it saves ...; <advice>." */
static void describe_common(const pt_analysis *a, const pt_whatif *m, finding *f)
{
    size_t above = 0;
    for (size_t k = 0; k < f->worker_count; k++)
        above += f->values[k] > f->expected;
    pt_buf s = PT_BUF_INIT;
    char pct[PT_PERCENT_LEN];
    put_common_subject(a, above, "spend", &s);
    pt_buf_printf(&s, " %s%s of each step in ", above < a->n ? "a median of " : "", pt_percent(pct, 100 * f->median));
    put_common_subject_of(f, &s);
    pt_buf_printf(&s, " not hidden by %s", f->cls == PT_CLASS_PYTHON ? "GPU work" : "computation");
    pt_put_saving(a, f, pt_whatif_step_ms(m), &s);
    pt_buf_puts(&s, "; ");
    pt_buf_puts(&s, common_advice(f->cls, f->row ? f->row->name : f->function));
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

static void common_class(const pt_analysis *a, const pt_whatif *m, finding_list *list, pt_class cls, double threshold,
                         double expected)
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
        finding *f = add_common_finding(a, list, row, cls, row->name, median, expected,
                                        "bottleneck ratio (median over workers)", ratio);
        pt_cost_finding(a, m, f);
        if (f->impact < COMMON_MIN_SAVING) {
            pt_finding_drop_last(list);
            continue;
        }
        describe_common(a, m, f);
    }
    free(ratio);
}

/* Each worker's exposed communication, a share of its window, into ratio; returns the
 * median, and in *above how many reach COMMON_COMM. */
static double exposed_communication(const pt_analysis *a, double *ratio, size_t *above)
{
    *above = 0;
    for (size_t w = 0; w < a->n; w++) {
        ratio[w] = a->window_ns[w] > 0 ? (double)a->workers[w]->exposed_ns[PT_CLASS_COMM] / 1e6 / pt_window_ms(a, w) : 0;
        *above += ratio[w] >= COMMON_COMM;
    }
    return pt_median_of(ratio, a->n, a->scratch);
}

/* The collective with the most exposed time on the median worker, or NULL. */
static const pt_fn_row *top_collective(const pt_analysis *a)
{
    double *ms = pt_xmalloc(a->n * sizeof *ms), top_ms = -1;
    const pt_fn_row *top = NULL;
    for (size_t i = 0; i < a->row_count; i++) {
        if (a->rows[i].cls != PT_CLASS_COMM)
            continue;
        pt_row_exposed_ms(a, &a->rows[i], ms);
        double typical = pt_median_of(ms, a->n, a->scratch);
        if (typical > top_ms)
            top_ms = typical, top = &a->rows[i];
    }
    free(ms);
    return top;
}

/* The share of the step an exposed collective is expected to take, the transfer the last
 * worker to arrive still waits: its largest call at the bandwidth the links' counters
 * measured (transfer.c; *transfer_ms, *busbw and *bytes say it), else EXPECTED_COMM. */
static double expected_comm_share(const pt_analysis *a, const pt_whatif *m, const pt_fn_row *top,
                                  double *transfer_ms, double *busbw, double *bytes)
{
    double step = pt_whatif_step_ms(m);
    *busbw = *bytes = 0;
    *transfer_ms = top ? pt_measured_transfer_ms(a, top, busbw, bytes) : 0;
    if (*transfer_ms <= 0 || step <= 0) {
        *transfer_ms = 0;
        return EXPECTED_COMM;
    }
    return fmin(1, *transfer_ms / step);
}

static void common_communication(const pt_analysis *a, const pt_whatif *m, finding_list *list)
{
    double *ms = pt_xmalloc(a->n * sizeof *ms);
    double *ratio = pt_xmalloc(a->n * sizeof *ratio);
    size_t above;
    double median = exposed_communication(a, ratio, &above);
    if (median >= COMMON_COMM) {
        const pt_fn_row *top = top_collective(a);
        double throughput = 0;
        if (top) {
            for (size_t w = 0; w < a->n; w++) {
                pt_function_summary cell;
                const pt_function_summary *f = pt_row_function(a, top, w, &cell);
                ms[w] = f ? f->throughput_avg_pct : 0;
            }
            throughput = pt_median_of(ms, a->n, a->scratch);
            double transfer, busbw, bytes, expected = expected_comm_share(a, m, top, &transfer, &busbw, &bytes);
            finding *f = add_common_finding(a, list, NULL, PT_CLASS_COMM, top->name, median, expected,
                                            "exposed communication ratio (median over workers)", ratio);
            pt_cost_finding(a, m, f);
            if (f->impact < COMMON_MIN_SAVING) {
                pt_finding_drop_last(list);
                free(ms);
                free(ratio);
                return;
            }
            pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
            char pct[PT_PERCENT_LEN];
            pt_short_function_name(PT_CLASS_COMM, top->name, &name);
            pt_buf_printf(&s, "Communication is exposed (not overlapped with compute) for %s%s of each step%s, most "
                              "in `%s`",
                          above < a->n ? "a median of " : "", pt_percent(pct, 100 * median),
                          a->n == 1 ? "" : above == a->n ? " on every worker" : " on most workers",
                          name.data ? name.data : top->name);
            if (throughput > 0)
                pt_buf_printf(&s, " at %s of the link's peak bandwidth", pt_percent(pct, throughput));
            pt_buf_puts(&s, ", which no worker's work sets");
            pt_put_saving(a, f, pt_whatif_step_ms(m), &s);
            /* Point-to-point transfers exposed are a pipeline's stages waiting for each
             * other (its bubble) or an all-to-all (NCCL runs it as sends and receives: a
             * DLRM's embeddings), not gradients to overlap. */
            if (pt_collective_is_point_to_point(top->name))
                pt_buf_puts(&s, "; these are point-to-point transfers: in a pipeline its bubble, the stages waiting "
                                "for each other (more microbatches per step or an interleaved schedule shrink it), in "
                                "an all-to-all (embeddings, experts) the exchange to overlap with compute; else check "
                                "the links.");
            else
                pt_buf_puts(&s, "; overlap gradient communication with backward (DDP buckets), shard differently, "
                                "or check the links.");
            f->summary = pt_buf_take(&s);
            pt_buf_free(&name);
        }
    }
    free(ms);
    free(ratio);
}

/* The ranks analysed wait in collectives as a job whose communication is exposed does,
 * no finding about them explains it, and ranks of the job were not analysed: the rank
 * they wait for may be one of those, which the analysis cannot tell from slow links.
 * Said in place of the exposed-communication finding (never "check the links" on a
 * partial job), with the saving that finding would have: the waiting no analysed
 * worker's work sets (the last of them to arrive still waits it), less the collectives'
 * own transfer, which the ranks analysed cannot tell from their waiting by its time:
 * the largest call's bytes at the bandwidth the links' counters measured (transfer.c;
 * DDP's last bucket, which no backward hides, is the largest where buckets are the
 * default, and where another is, the saving said is the smaller), else the 10% of the
 * step communication is expected to take (synthetic absent_straggler, measured: 18.0%
 * for a true 17.9% at 16 workers, 15.7% for 16.5% at 8; h200 kineto_slowdata_r3
 * without rank 3's trace, gloo, no counters: 51.6% for rank 3's 41.6%). */
static void waiting_for_missing(const pt_analysis *a, const pt_whatif *m, const pt_job_gaps *gaps, finding_list *list)
{
    double *ratio = pt_xmalloc(a->n * sizeof *ratio);
    size_t above;
    double median = exposed_communication(a, ratio, &above);
    if (median < COMMON_COMM) {
        free(ratio);
        return;
    }
    double transfer, busbw, bytes;
    finding *f = pt_finding_add(list, "other", "", "workers");
    f->fix = PT_FIX_COMMON;
    f->classes = PT_CLASS_BIT(PT_CLASS_COMM);
    f->expected = expected_comm_share(a, m, top_collective(a), &transfer, &busbw, &bytes);
    f->median = median;
    f->metric = "exposed communication ratio (median over the ranks analysed)";
    f->ranks = gaps->missing;
    f->rank_count = gaps->missing_listed;
    pt_cost_finding(a, m, f);
    free(ratio);
    if (f->impact < COMMON_MIN_SAVING) {
        pt_finding_drop_last(list);
        return;
    }
    pt_buf s = PT_BUF_INIT;
    char pct[PT_PERCENT_LEN], pct2[PT_PERCENT_LEN];
    pt_buf_puts(&s, "The slowest rank may be among the missing: ");
    pt_put_rank_list(&s, gaps->missing, gaps->missing_listed, gaps->missing_count);
    pt_buf_printf(&s, " %s not analysed (%s), and the %s analysed %s %s of each step waiting in collectives, "
                      "longer than any of %s own work explains: fixing what they wait for would save about ",
                  gaps->missing_count == 1 ? "was" : "were", gaps->missing_why, a->n == 1 ? "rank" : "ranks",
                  a->n == 1 ? "spent" : "spent a median of", pt_percent(pct, 100 * median), a->n == 1 ? "its" : "their");
    pt_put_ms(&s, f->impact * pt_whatif_step_ms(m));
    pt_buf_printf(&s, " per step (%s of the step): the ", pt_percent(pct, 100 * f->impact));
    pt_put_ms(&s, pt_waits_nobody_sets_ms(a, m, f));
    pt_buf_printf(&s, " a step %s %s that none of %s own work sets, less ", a->n == 1 ? "it" : "they",
                  a->n == 1 ? "waits" : "wait", a->n == 1 ? "its" : "their");
    if (transfer > 0) {
        pt_buf_puts(&s, "the ");
        pt_put_ms(&s, transfer);
        pt_buf_puts(&s, " its largest call (");
        pt_put_mb(&s, bytes / 1e6);
        pt_buf_printf(&s, ") takes at the %.3g GB/s the links reached (their counters' fastest sample): the "
                          "collective's own transfer, which no rank's arrival shortens.",
                      busbw);
    } else {
        pt_buf_printf(&s, "the %s of the step communication is expected to take (the collectives' own transfer, "
                          "which %s cannot tell from %s waiting; more where the links are slower).",
                      pt_percent(pct2, 100 * f->expected), a->n == 1 ? "the rank analysed" : "the ranks analysed",
                      a->n == 1 ? "its" : "their");
    }
    pt_buf_puts(&s, " Analyse every rank's trace (or profile the whole job again) to see which rank that is before "
                    "suspecting the links.");
    f->summary = pt_buf_take(&s);
}

/* The CPU side is the critical path: the GPU works less than 70% of the step while Python,
 * operators and launches, summed over every stack (each may be small), run alone for a
 * good part of it, longer than the worker waits. On (almost) every worker of a GPU job
 * that is one finding: fixing it (fewer, larger operations; CUDA graphs, compilation)
 * takes each worker's CPU-side time down to what a step is expected to spend there. */
/* Each worker's CPU-side share of its window into share; returns how many workers are
 * CPU-bound (the rule above). */
static size_t cpu_bound_workers(const pt_analysis *a, double *share)
{
    size_t bound = 0;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        double window = (double)s->window_ns;
        double device = window > 0 ? (double)(s->exposed_ns[PT_CLASS_COMPUTE] + s->exposed_ns[PT_CLASS_MEMORY]) / window : 1;
        double cpu = window > 0 ? (double)(s->exposed_ns[PT_CLASS_RUNTIME] + s->exposed_ns[PT_CLASS_PYTHON]) / window : 0;
        double waiting = window > 0 ? (double)(s->exposed_ns[PT_CLASS_COMM] + s->idle_ns) / window : 0;
        share[w] = cpu;
        if (device < CPU_BOUND_GPU && cpu >= CPU_BOUND_CPU && cpu > waiting)
            bound++;
    }
    return bound;
}

/* " It includes what `a` (19% of each step) and `b` (...) take: ...": the parts of a
 * finding about every worker that holds them (cpu_bound), by their median shares. */
static void put_common_parts_within(finding *f)
{
    pt_buf s = PT_BUF_INIT;
    pt_buf_puts(&s, f->summary ? f->summary : "");
    pt_buf_puts(&s, " It includes what ");
    for (size_t i = 0; i < f->part_count && i < PT_PARTS_SAID; i++) {
        char pct[PT_PERCENT_LEN];
        pt_buf name = PT_BUF_INIT;
        pt_short_function_name(f->parts[i].cls, f->parts[i].function, &name);
        pt_buf_printf(&s, "%s`%s` (a median of %s of each step)", i == 0 ? "" : i + 1 == f->part_count ? " and " : ", ",
                      name.data ? name.data : f->parts[i].function, pt_percent(pct, 100 * f->parts[i].median));
        pt_buf_free(&name);
    }
    if (f->part_count > PT_PARTS_SAID)
        pt_buf_printf(&s, " and %zu more", f->part_count - PT_PARTS_SAID);
    pt_buf_puts(&s, f->part_count == 1 ? " takes" : " take");
    pt_buf_puts(&s, ", found on its own too: part of this saving, not in addition to it.");
    free(f->summary);
    f->summary = pt_buf_take(&s);
}

static void describe_cpu_bound(const pt_analysis *a, const pt_whatif *m, finding *f)
{
    double *share = pt_xmalloc((a->n ? a->n : 1) * sizeof *share);
    size_t bound = cpu_bound_workers(a, share);
    for (size_t w = 0; w < a->n; w++) /* the typical worker's parts, per step */
        share[w] = (double)a->workers[w]->exposed_ns[PT_CLASS_PYTHON] / 1e6 / a->steps[w];
    double python = pt_median_of(share, a->n, a->scratch);
    for (size_t w = 0; w < a->n; w++)
        share[w] = (double)a->workers[w]->exposed_ns[PT_CLASS_RUNTIME] / 1e6 / a->steps[w];
    double runtime = pt_median_of(share, a->n, a->scratch);
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        share[w] = s->window_ns > 0 ? (double)(s->exposed_ns[PT_CLASS_COMPUTE] + s->exposed_ns[PT_CLASS_MEMORY]) /
                                          (double)s->window_ns
                                    : 0;
    }
    double gpu = pt_median_of(share, a->n, a->scratch);
    free(share);
    pt_buf s = PT_BUF_INIT;
    char pct[PT_PERCENT_LEN];
    pt_buf_printf(&s, "The job is CPU-bound%s: the GPU works only %s of each step, while the CPU side alone takes ",
                  a->n == 1 ? "" : bound == a->n ? " on every worker" : " on most workers", pt_percent(pct, 100 * gpu));
    pt_put_ms(&s, python + runtime);
    pt_buf_puts(&s, " of it (Python and operators ");
    pt_put_ms(&s, python);
    pt_buf_puts(&s, ", runtime calls ");
    pt_put_ms(&s, runtime);
    pt_buf_puts(&s, ", summed over every stack)");
    pt_put_saving(a, f, pt_whatif_step_ms(m), &s);
    pt_buf_puts(&s, " at most; give the GPU more work per call (larger batches, fused or compiled kernels: "
                    "torch.compile, CUDA graphs), cut per-step Python (logging, host-side bookkeeping) and load data "
                    "in background workers.");
    free(f->summary);
    f->summary = pt_buf_take(&s);
    if (f->part_count)
        put_common_parts_within(f);
}

static void common_cpu_bound(const pt_analysis *a, const pt_whatif *m, finding_list *list)
{
    double *share = pt_xmalloc((a->n ? a->n : 1) * sizeof *share);
    size_t bound = cpu_bound_workers(a, share);
    if (a->n == 0 || (double)bound < MOST_WORKERS * (double)a->n) {
        free(share);
        return;
    }
    finding *f = pt_finding_add(list, "cpu_bound", "CPU-side work: Python, operators and launches", "Python functions");
    f->all_workers = true;
    f->fix = PT_FIX_COMMON;
    f->classes = PT_CLASS_BIT(PT_CLASS_RUNTIME) | PT_CLASS_BIT(PT_CLASS_PYTHON);
    f->expected = EXPECTED_CPU;
    f->metric = "CPU-side time alone on the critical path, share of the window (median over workers)";
    f->median = pt_median_of(share, a->n, a->scratch);
    for (size_t w = 0; w < a->n; w++)
        pt_finding_name_worker(f, w, share[w]);
    free(share);
    pt_cost_finding(a, m, f);
    if (f->impact < COMMON_MIN_SAVING)
        pt_finding_drop_last(list);
    else
        describe_cpu_bound(a, m, f);
}

/* The slowest worker moves from step to step: no worker holds the job up in every step,
 * but in each some worker's work is well above the typical worker's, and the others wait
 * for it (uneven data: variable sequence lengths, data-dependent work). Judged when the
 * waiting shows as exposed communication on most workers (what a job whose slowest rank
 * moves looks like), so the advice is to balance the work, not to overlap or check the
 * links. Fixing it takes every worker's work down to the typical worker's in each step. */
#define IMBALANCE_MIN_SAVING 0.05

/* " (rank 63 was the slowest in 2 of the 3 steps profiled: ...)": a rank that paced more
 * than one step but not all of them may be slower in every step by a margin the noise
 * hid in the others; more steps tell. */
static void put_most_often_slowest(const pt_analysis *a, const pt_whatif *m, pt_buf *s)
{
    size_t steps = pt_whatif_steps(m), *paced = pt_xcalloc(a->n, sizeof *paced), last_step = SIZE_MAX, best = 0;
    bool *in_step = pt_xcalloc(a->n, sizeof *in_step);
    for (size_t j = 0; j < pt_whatif_segments(m); j++) {
        double margin;
        size_t w = pt_whatif_pacer(m, j, &margin), step = pt_whatif_segment_step(m, j);
        if (step != last_step)
            memset(in_step, 0, a->n * sizeof *in_step), last_step = step;
        paced[w] += !in_step[w], in_step[w] = true;
        best = paced[w] > paced[best] ? w : best;
    }
    if (paced[best] >= 2 && paced[best] < steps)
        pt_buf_printf(s, " (rank %d was the slowest in %zu of the %zu steps profiled: with more steps, --steps, a rank "
                         "slower in every step is told from chance)",
                      pt_worker_rank(a, best), paced[best], steps);
    free(paced);
    free(in_step);
}

static void common_imbalance(const pt_analysis *a, const pt_whatif *m, finding_list *list)
{
    size_t segments = pt_whatif_segments(m);
    if (a->n < 3 || segments < 2 || !pt_whatif_by_step(m))
        return;
    double *ratio = pt_xmalloc(a->n * sizeof *ratio);
    for (size_t w = 0; w < a->n; w++)
        ratio[w] = a->window_ns[w] > 0 ? (double)a->workers[w]->exposed_ns[PT_CLASS_COMM] / 1e6 / pt_window_ms(a, w) : 0;
    double exposed = pt_median_of(ratio, a->n, a->scratch);
    free(ratio);
    size_t first = SIZE_MAX, distinct = 0;
    bool *seen = pt_xcalloc(a->n, sizeof *seen);
    for (size_t j = 0; j < segments; j++) {
        double margin;
        size_t w = pt_whatif_pacer(m, j, &margin);
        distinct += !seen[w], seen[w] = true;
        if (first == SIZE_MAX)
            first = w;
    }
    free(seen);
    if (exposed < COMMON_COMM || distinct < 2)
        return;
    finding *f = pt_finding_add(list, "other", "uneven work per step: the slowest rank moves", "workers");
    f->all_workers = true;
    f->fix = PT_FIX_WORK;
    f->metric = "work per step, ms";
    for (size_t w = 0; w < a->n; w++)
        pt_finding_name_worker(f, w, pt_whatif_work_ms(m, w, 0));
    pt_cost_finding(a, m, f);
    if (f->impact < IMBALANCE_MIN_SAVING) {
        pt_finding_drop_last(list);
        return;
    }
    pt_buf s = PT_BUF_INIT;
    pt_buf_puts(&s, "The slowest rank moves from step to step (");
    size_t listed = 0, last_w = SIZE_MAX, last_step = SIZE_MAX;
    for (size_t j = 0; j < segments; j++) { /* a step's segments paced by one rank: said once */
        double margin;
        size_t w = pt_whatif_pacer(m, j, &margin), step = pt_whatif_segment_step(m, j);
        if (w == last_w && step == last_step)
            continue;
        last_w = w, last_step = step;
        if (listed++ == IMBALANCE_LISTED) {
            pt_buf_puts(&s, ", ...");
            break;
        }
        pt_buf_printf(&s, "%srank %d in step %lld", listed > 1 ? ", " : "", pt_worker_rank(a, w),
                      (long long)a->workers[w]->steps[step].step);
    }
    double least = INFINITY, most = 0, *work = pt_xmalloc(a->n * sizeof *work);
    for (size_t j = 0; j < segments; j++) { /* how far each step's slowest is above the typical */
        double margin;
        size_t pacer = pt_whatif_pacer(m, j, &margin);
        for (size_t w = 0; w < a->n; w++)
            work[w] = pt_whatif_segment_work_ms(m, j, w);
        double above = work[pacer] - pt_median_of(work, a->n, a->scratch);
        least = fmin(least, above), most = fmax(most, above);
    }
    free(work);
    pt_buf_puts(&s, "), each time ");
    pt_put_ms(&s, least);
    if (most - least >= 0.05 * most) {
        pt_buf_puts(&s, " to ");
        pt_put_ms(&s, most);
    }
    pt_buf_puts(&s, " above the typical rank's work: the others wait for work unevenly split between ranks and steps "
                    "(variable sequence lengths, data-dependent work), not for one slow worker or slow links");
    put_most_often_slowest(a, m, &s);
    pt_put_saving(a, f, pt_whatif_step_ms(m), &s);
    pt_buf_puts(&s, "; balance the work per rank and step (bucket or pack sequences by length, even shards).");
    f->summary = pt_buf_take(&s);
}

/* ------------------------------------------------------------ one finding per cause */

/* Whether a merge may take f in: costed by the model, about workers analysed, not merged
 * already. */
static bool mergeable(const finding *f)
{
    return f->fix != PT_FIX_NONE && !f->explains && !f->rank_count && f->worker_count > 0 && !f->part_count;
}

static bool in_worker_order(const finding *f)
{
    for (size_t k = 1; k < f->worker_count; k++)
        if (f->workers[k] <= f->workers[k - 1])
            return false;
    return true;
}

/* Every worker inner names, outer names too: one walk when both are in worker order (the
 * passes name workers so, but for a graded finding's pace setter named first). */
static bool workers_within(const finding *inner, const finding *outer)
{
    if (!in_worker_order(inner) || !in_worker_order(outer)) {
        for (size_t k = 0; k < inner->worker_count; k++)
            if (!pt_finding_names(outer, inner->workers[k]))
                return false;
        return true;
    }
    size_t j = 0;
    for (size_t k = 0; k < inner->worker_count; k++) {
        while (j < outer->worker_count && outer->workers[j] < inner->workers[k])
            j++;
        if (j == outer->worker_count || outer->workers[j] != inner->workers[k])
            return false;
    }
    return true;
}

/* A finding rolled up over classes: on some workers (their GPU or host uniformly slower, a
 * class above its peers), or on every worker (CPU-bound: the CPU side summed over every
 * stack); its fix removes the classes' whole excess there. */
static bool rolled_up(const finding *f)
{
    return (f->fix == PT_FIX_CLASSES && !f->all_workers) ||
           (f->fix == PT_FIX_COMMON && f->all_workers && !f->row && !(f->classes & PT_CLASS_BIT(PT_CLASS_COMM)));
}

/* x's fix removes y's time: y is about x's workers (or some) and x's classes. */
static bool covers(const finding *x, const finding *y)
{
    return rolled_up(x) && x->all_workers == y->all_workers && !(pt_fix_mask(y) & ~x->classes) && workers_within(y, x);
}

/* Two functions of one class, about the same workers (one's within the other's), that one
 * change fixes: one worker's kernels, or its copies (its GPU, its link, the layers it
 * runs more of); device memory freed and allocated again (the cudaFree and the cudaMalloc
 * that follows it: allocator churn); a Python frame and a frame it calls. */
static bool one_cause(const finding *x, const finding *y)
{
    if (!x->row || !y->row || x->fix != y->fix || (x->fix != PT_FIX_ROW && x->fix != PT_FIX_COMMON) ||
        x->all_workers != y->all_workers || x->row->cls != y->row->cls || x->graded || y->graded)
        return false; /* a graded finding is one function's amounts on several workers */
    bool related = false;
    switch (x->row->cls) {
    case PT_CLASS_COMPUTE:
    case PT_CLASS_MEMORY: /* what every worker spends there is not one worker's device */
        related = !x->all_workers;
        break;
    case PT_CLASS_RUNTIME:
        related = pt_runtime_kind_of(x->row->name) == PT_RUNTIME_MEMORY &&
                  pt_runtime_kind_of(y->row->name) == PT_RUNTIME_MEMORY;
        break;
    case PT_CLASS_PYTHON:
        related = pt_stack_is_ancestor(x->row->name, y->row->name) || pt_stack_is_ancestor(y->row->name, x->row->name);
        break;
    default:
        break;
    }
    return related && (x->all_workers || workers_within(x, y) || workers_within(y, x));
}

static size_t root_of(size_t *parent, size_t i)
{
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

/* The finding that speaks for a cause: for Python the frame every other one is called
 * from (the frame a user would change); for allocator churn the release (the cudaFree
 * that torch.cuda.empty_cache() makes: the cudaMalloc after it only follows); else the
 * one saving the most alone. */
static size_t pick_head(const finding *items, const size_t *members, size_t count)
{
    size_t head = members[0];
    for (size_t k = 1; k < count; k++) {
        const finding *f = &items[members[k]], *h = &items[head];
        if (f->impact > h->impact || (f->impact == h->impact && f->excess_ms > h->excess_ms))
            head = members[k];
    }
    if (items[head].row->cls == PT_CLASS_RUNTIME) {
        for (size_t k = 0; k < count; k++)
            if (strstr(items[members[k]].row->name, "Free"))
                return members[k];
        return head;
    }
    if (items[head].row->cls != PT_CLASS_PYTHON)
        return head;
    for (size_t k = 0; k < count; k++) {
        size_t calls_all = 0;
        for (size_t j = 0; j < count; j++)
            calls_all += j == k || pt_stack_is_ancestor(items[members[k]].function, items[members[j]].function);
        if (calls_all == count)
            return members[k];
    }
    return head;
}

static int by_part_saving(const void *x, const void *y)
{
    const finding *a = x, *b = y;
    int order = pt_cmp_desc(a->impact, b->impact);
    return order ? order : pt_cmp_desc(a->excess_ms, b->excess_ms);
}

/* Moves *f into into's parts; f's slot is left empty (nothing to free). */
static void add_part(finding *into, finding *f)
{
    into->parts = pt_xrealloc(into->parts, (into->part_count + 1) * sizeof *into->parts);
    into->parts[into->part_count++] = *f;
    memset(f, 0, sizeof *f);
}

/* The finding a cause's parts make when none of them holds the others: the head's kind,
 * function and evidence (the sentence says each part's own), every part's workers, and
 * each worker's value the sum of its parts'. */
static finding merged_finding(const pt_analysis *a, const finding *head, const finding *parts, size_t count)
{
    finding g;
    memset(&g, 0, sizeof g);
    g.category = head->category;
    g.function = pt_xstrdup(head->function);
    g.section = head->section;
    g.metric = head->metric;
    g.all_workers = head->all_workers;
    g.fix = head->fix;
    g.row = head->row;
    g.classes = head->classes;
    g.expected = head->expected;
    g.cls = head->cls;
    g.evidence = head->evidence;
    g.calls = head->calls, g.peer_calls = head->peer_calls;
    double *sum = pt_xcalloc(a->n ? a->n : 1, sizeof *sum);
    bool *named = pt_xcalloc(a->n ? a->n : 1, sizeof *named);
    for (size_t i = 0; i < count; i++) {
        g.median += parts[i].median;
        for (size_t k = 0; k < parts[i].worker_count; k++)
            sum[parts[i].workers[k]] += parts[i].values[k], named[parts[i].workers[k]] = true;
    }
    for (size_t w = 0; w < a->n; w++)
        if (named[w])
            pt_finding_name_worker(&g, w, sum[w]);
    if (g.all_workers) /* every worker's share of its step: the median worker's, summed */
        g.median = pt_median_of(g.values, g.worker_count, a->scratch);
    free(sum);
    free(named);
    return g;
}

/* Hardware findings explaining a finding taken into another explain that one. */
static void explain_the_merged(finding_list *list, const size_t *into)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].explains)
            list->items[i].explains = into[list->items[i].explains - 1] + 1;
}

/* The Python stack that released the memory of an allocator churn: its cudaFree's caller
 * (on its worker with the most) cut after its innermost Python source frame, the call a
 * user wrote (`model.py: forward|torch/cuda/memory.py: empty_cache`, not the builtin
 * under it). NULL when the summaries do not say. */
static char *churn_caller(const pt_analysis *a, const finding *f)
{
    pt_function_summary cell;
    const pt_function_summary *free_call = pt_row_function(a, f->row, f->worst < a->n ? f->worst : f->workers[0], &cell);
    if (!free_call || !free_call->caller)
        return NULL;
    const char *caller = free_call->caller, *end = NULL;
    for (const char *frame = caller;;) {
        const char *bar = strchr(frame, '|'), *py = strstr(frame, ".py: ");
        size_t len = bar ? (size_t)(bar - frame) : strlen(frame);
        if (py && py < frame + len)
            end = frame + len;
        if (!bar)
            break;
        frame = bar + 1;
    }
    return end ? pt_xstrndup(caller, (size_t)(end - caller)) : NULL;
}

/* Costs and describes a finding merge_causes built. */
static void cost_merged(const pt_analysis *a, const pt_whatif *m, finding *h)
{
    qsort(h->parts, h->part_count, sizeof *h->parts, by_part_saving);
    pt_cost_finding(a, m, h);
    if (h->all_workers && h->covers_parts)
        describe_cpu_bound(a, m, h);
    else if (h->all_workers)
        describe_common(a, m, h);
    else
        pt_describe_peer_finding(a, h, pt_whatif_step_ms(m));
}

/* Functions of one class that are one cause (one_cause), joined: each group a new
 * finding, its members its parts. */
static void merge_one_cause(const pt_analysis *a, const pt_whatif *m, finding_list *list, size_t first, bool *gone,
                            size_t *into)
{
    size_t count = list->count;
    size_t *parent = pt_xmalloc(count * sizeof *parent), *members = pt_xmalloc(count * sizeof *members);
    for (size_t i = 0; i < count; i++)
        parent[i] = i;
    for (size_t i = first; i < count; i++)
        for (size_t j = i + 1; j < count; j++) {
            const finding *x = &list->items[i], *y = &list->items[j];
            if (mergeable(x) && mergeable(y) && one_cause(x, y))
                parent[root_of(parent, j)] = root_of(parent, i);
        }
    for (size_t r = first; r < count; r++) {
        size_t n_members = 0;
        for (size_t i = first; i < count; i++)
            if (root_of(parent, i) == r)
                members[n_members++] = i;
        if (n_members < 2)
            continue;
        size_t head = pick_head(list->items, members, n_members);
        finding holder;
        memset(&holder, 0, sizeof holder);
        size_t head_part = 0;
        for (size_t k = 0; k < n_members; k++) {
            if (members[k] == head)
                head_part = holder.part_count;
            add_part(&holder, &list->items[members[k]]);
            if (members[k] != head)
                gone[members[k]] = true, into[members[k]] = head;
        }
        finding *h = &list->items[head];
        *h = merged_finding(a, &holder.parts[head_part], holder.parts, holder.part_count);
        h->parts = holder.parts, h->part_count = holder.part_count;
        char *caller = h->cls == PT_CLASS_RUNTIME && strstr(h->row->name, "Free") ? /* allocator churn: */
                       churn_caller(a, &h->parts[head_part]) : NULL;        /* where it is released */
        if (caller)
            free(h->function), h->function = caller;
        cost_merged(a, m, h);
    }
    free(parent);
    free(members);
}

/* What fixing f's parts saves (covers_parts false), or f and its parts (true). */
static double saving_with_parts(const pt_analysis *a, const pt_whatif *m, const finding *f, finding *parts,
                                size_t count, bool with_own)
{
    finding probe = *f;
    probe.parts = parts, probe.part_count = count, probe.covers_parts = with_own;
    pt_fix *fix = pt_fix_new(m);
    pt_remove_finding(a, m, &probe, fix, NULL, SIZE_MAX, NULL, NULL);
    double saving = pt_whatif_saving(m, fix);
    pt_fix_free(fix);
    return saving;
}

/* A function of a rolled-up finding's classes above its peers on some of its workers and
 * on others (a slow GPU's kernel, graded with ranks that noise slowed a little): those
 * workers' time is the rolled-up finding's, so the function's finding keeps the others
 * only, costed again (what saves nothing then is dropped with the rest). A grade led by
 * a worker the rolled-up finding does not name is that worker's cause, the others' time
 * in the function with it (a slow data loader graded with a rank whose host is slow):
 * it stays whole. */
static void leave_to_rolled_up(const pt_analysis *a, const pt_whatif *m, const finding *h, finding *f)
{
    if (f->all_workers || f->fix == PT_FIX_NONE || f->explains || f->rank_count || f->part_count || rolled_up(f) ||
        (pt_fix_mask(f) & ~h->classes) || (f->graded && !pt_finding_names(h, f->pacer)))
        return;
    size_t kept = 0, top = 0;
    for (size_t k = 0; k < f->worker_count; k++)
        if (!pt_finding_names(h, f->workers[k])) {
            f->workers[kept] = f->workers[k], f->values[kept] = f->values[k];
            if (f->values[kept] > f->values[top])
                top = kept;
            kept++;
        }
    if (kept == f->worker_count || kept == 0)
        return;
    f->worker_count = kept;
    if (f->graded && kept < 2) {
        f->graded = false;
    } else if (f->graded && f->pacer != f->workers[top]) { /* the one with the most leads, not the pace setter */
        f->pacer = f->workers[top], f->sets_pace = false;
        double value = f->values[top];
        memmove(f->workers + 1, f->workers, top * sizeof *f->workers);
        memmove(f->values + 1, f->values, top * sizeof *f->values);
        f->workers[0] = f->pacer, f->values[0] = value;
    }
    pt_cost_finding(a, m, f);
    pt_describe_peer_finding(a, f, pt_whatif_step_ms(m));
}

/* Rolled-up findings take in what they cover (covers), those merge_one_cause made with
 * their parts. One about every worker (cpu_bound) that saves next to nothing beyond the
 * findings it covers is no finding of its own: they are its cause (allocator churn, not
 * "the job is CPU-bound"). */
static void merge_covered(const pt_analysis *a, const pt_whatif *m, finding_list *list, size_t first, bool *gone,
                          size_t *into)
{
    size_t count = list->count;
    size_t *covered = pt_xmalloc(count * sizeof *covered);
    finding *probe = pt_xmalloc(count * sizeof *probe);
    for (size_t r = first; r < count; r++) {
        finding *h = &list->items[r];
        if (gone[r] || !mergeable(h) || !rolled_up(h))
            continue;
        size_t n = 0;
        for (size_t i = first; i < count; i++) {
            const finding *f = &list->items[i];
            if (i != r && !gone[i] && f->fix != PT_FIX_NONE && !f->explains && !f->rank_count && !rolled_up(f) &&
                covers(h, f))
                probe[n] = *f, covered[n++] = i;
        }
        if (!n)
            continue;
        if (h->all_workers && saving_with_parts(a, m, h, probe, n, true) -
                                      saving_with_parts(a, m, h, probe, n, false) < COMMON_MIN_SAVING) {
            gone[r] = true; /* nothing of its own: what it covers names its cause */
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            finding *f = &list->items[covered[k]];
            if (f->part_count) { /* a cause already made of parts: they are this one's */
                for (size_t p = 0; p < f->part_count; p++)
                    add_part(h, &f->parts[p]);
                free(f->parts);
                f->parts = NULL, f->part_count = 0;
            } else {
                add_part(h, f);
            }
            gone[covered[k]] = true, into[covered[k]] = r;
        }
        h->covers_parts = true;
        cost_merged(a, m, h);
    }
    for (size_t r = first; r < count; r++)
        if (!gone[r] && rolled_up(&list->items[r]) && !list->items[r].all_workers)
            for (size_t i = first; i < count; i++)
                if (i != r && !gone[i])
                    leave_to_rolled_up(a, m, &list->items[r], &list->items[i]);
    free(covered);
    free(probe);
}

void pt_merge_causes(const pt_analysis *a, const pt_whatif *m, finding_list *list, size_t first)
{
    size_t count = list->count;
    if (count <= first + 1)
        return;
    bool *gone = pt_xcalloc(count, sizeof *gone);
    size_t *into = pt_xmalloc(count * sizeof *into);
    for (size_t i = 0; i < count; i++)
        into[i] = i;
    merge_one_cause(a, m, list, first, gone, into);
    merge_covered(a, m, list, first, gone, into);
    explain_the_merged(list, into);
    pt_finding_list_drop(list, gone);
    free(gone);
    free(into);
}

/* ------------------------------------------------------------ findings that save nothing */

/* Findings weighed one by one against the joint saving; the rest of those that save
 * nothing alone are dropped unweighed (each weighing costs one joint saving, which is
 * linear in findings: a list of thousands must not cost millions). */
#define SAVES_NOTHING_WEIGHED 64

typedef struct weighed {
    double impact;
    size_t index;
} weighed;

static int by_saving(const void *x, const void *y)
{
    const weighed *a = x, *b = y;
    return a->impact != b->impact ? (a->impact < b->impact ? -1 : 1) : (a->index > b->index) - (a->index < b->index);
}

/* The saving below which a finding is no finding, as a share of the step: for one
 * naming some of the workers on the evidence of time (the same calls slower, a class
 * above its peers, a GPU's kernels uniformly slower), PT_MIN_SAVING_SHARE: their excess
 * cleared each one's noise in every step already, but among hundreds of workers sharing
 * GPUs some are slowed in every profiled step by chance, and fixing them saves next to
 * nothing (73 of 1,024 in a healthy synthetic job, 0.55%). Work only the named workers
 * do, or do more often, is no chance; nor is a finding about every worker (the common
 * rules judge their own shares): for those, saving nothing at all (PT_SAVES_NOTHING).
 * The step model may see little of such work's cost where it cannot see the others
 * wait (a CPU job whose collectives the collector does not see: a 3-rank gloo job's
 * 40 ms sleep on one rank costs 0.23% in it). A per-step saving is not judged against
 * the step-to-step noise as a candidate's is: a blocking copy that costs 2 ms in every
 * step saves them however much the steps vary together. */
static double worth_a_finding(const finding *f)
{
    bool by_time = f->evidence != PT_EVIDENCE_ONLY_HERE && f->evidence != PT_EVIDENCE_MORE_CALLS;
    return f->worker_count > 0 && !f->all_workers && by_time ? PT_MIN_SAVING_SHARE : PT_SAVES_NOTHING;
}

/* A finding whose fix saves nothing is no finding: one whose fix saves under
 * worth_a_finding of the step alone (another worker's work then sets the pace) and whose removal from the fix of all of them saves under
 * that too (it is not one of two stragglers that must both be fixed). Weighed from the
 * smallest saving up, each against those still kept, so of two findings removing the
 * same excess one stays. A hardware finding goes with the finding it explains. GPU work
 * only the named workers do stays (pt_finding_saves_nothing_kept), and so do hangs (no
 * saving: the job does not step). */
static void drop_findings_that_save_nothing(const pt_analysis *a, const pt_whatif *m, finding_list *list)
{
    size_t count = list->count, candidates = 0;
    weighed *order = pt_xmalloc((count ? count : 1) * sizeof *order);
    for (size_t i = 0; i < count; i++) {
        const finding *f = &list->items[i];
        if (f->fix != PT_FIX_NONE && f->impact < worth_a_finding(f) && !pt_finding_saves_nothing_kept(a, f))
            order[candidates++] = (weighed){f->impact, i};
    }
    if (!candidates) {
        free(order);
        return;
    }
    qsort(order, candidates, sizeof *order, by_saving);
    bool *dropped = pt_xcalloc(count, sizeof *dropped);
    double whole = pt_joint_saving(a, m, list, dropped);
    for (size_t k = 0; k < candidates; k++) {
        size_t i = order[k].index;
        dropped[i] = true;
        if (k >= SAVES_NOTHING_WEIGHED)
            continue;
        double without = pt_joint_saving(a, m, list, dropped);
        if (without >= whole - worth_a_finding(&list->items[i]))
            whole = without;
        else
            dropped[i] = false; /* fixed with the others, it saves something */
    }
    pt_finding_list_drop(list, dropped);
    free(dropped);
    free(order);
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

/* The finding's saving in ms per step: the figure its sentence gives (pt_put_saving, and
 * peers.c's graded sentence), impact x the modelled step, unrounded so that the two cannot
 * differ; none for a hang (no step to shorten). */
static pt_json *saves_ms_json(const finding *f, double step_ms)
{
    return f->fix == PT_FIX_NONE && !f->explains ? pt_json_null() : pt_json_number(f->impact * step_ms);
}

#define PARTS_LISTED 64 /* a merged finding's parts in its evidence, largest saving first */

/* A merged finding's parts (pt_merge_causes), each with its own figures: its excess (ms
 * per step above the peers, on its worker with the most), that as a share of the
 * finding's, and what fixing it alone would save (parts of one cause overlap: the
 * finding's impact is what fixing all of them saves, not their sum). */
static pt_json *parts_json(const pt_analysis *a, const finding *f)
{
    pt_json *parts = pt_json_array();
    for (size_t i = 0; i < f->part_count && i < PARTS_LISTED; i++) {
        const finding *p = &f->parts[i];
        pt_json *j = pt_json_push(parts, pt_json_object());
        pt_json_add(j, "category", pt_json_string(p->category));
        pt_json_add(j, "function", pt_json_string(p->function));
        pt_json *ranks = pt_json_add(j, "workers", pt_json_array());
        for (size_t k = 0; k < p->worker_count && k < PARTS_LISTED; k++)
            pt_json_push(ranks, pt_json_int(pt_worker_rank(a, p->workers[k])));
        pt_json_add(j, "excess_ms", pt_json_number_rounded(p->excess_ms, 6));
        pt_json_add(j, "share", pt_json_number_rounded(f->excess_ms > 0 ? fmin(1, p->excess_ms / f->excess_ms) : 0, 6));
        pt_json_add(j, "impact", pt_json_number_rounded(p->impact, 6));
    }
    return parts;
}

static pt_json *finding_json(const pt_analysis *a, finding *f, double step_ms)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "category", pt_json_string(f->category));
    pt_json_add(j, "function", pt_json_string(f->function));
    pt_json *ranks = pt_json_add(j, "workers", pt_json_array());
    for (size_t i = 0; i < f->worker_count; i++)
        pt_json_push(ranks, pt_json_int(pt_worker_rank(a, f->workers[i])));
    for (size_t i = 0; i < f->rank_count; i++)
        pt_json_push(ranks, pt_json_int(f->ranks[i]));
    pt_json_add(j, "all_workers", pt_json_bool(f->all_workers));
    pt_json_add(j, "impact", pt_json_number_rounded(f->impact, 6));
    pt_json_add(j, "saves_ms", saves_ms_json(f, step_ms));
    pt_json_add(j, "adds", f->fix == PT_FIX_NONE ? pt_json_null() : pt_json_number_rounded(f->adds, 6));
    pt_json_add(j, "summary", pt_json_string(f->summary ? f->summary : ""));
    pt_json *ev = pt_json_add(j, "evidence", pt_json_object());
    pt_json_add(ev, "section", pt_json_string(f->section));
    if (strcmp(f->category, "hang") != 0 && strcmp(f->category, "other") != 0) /* its section's key */
        pt_json_add(ev, "key", pt_json_string(f->row ? f->row->name : f->function));
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
    if (f->part_count)
        pt_json_add(ev, "parts", parts_json(a, f));
    return j;
}

/* Who sets each modelled step: of the step's segments (in step order, so one run of
 * them per step), the worker that is the busiest in the most (ties: the larger lead),
 * with how many it sets, its lead over the next busiest there, and whether that lead is
 * above the noise floor the findings use (below it nobody holds the step up). For the
 * page's step timeline; real steps only (a pseudo-step is no step of the job). */
static pt_json *pace_json(const pt_analysis *a, const pt_whatif *m)
{
    pt_json *pace = pt_json_array();
    size_t segments = pt_whatif_segments(m);
    if (!pt_whatif_by_step(m) || a->n == 0)
        return pace;
    size_t pacer[MAX_SEGMENTS_PER_STEP];
    double margin[MAX_SEGMENTS_PER_STEP];
    for (size_t j = 0; j < segments;) {
        size_t step = pt_whatif_segment_step(m, j), count = 0;
        for (; j < segments && pt_whatif_segment_step(m, j) == step; j++)
            if (count < MAX_SEGMENTS_PER_STEP)
                pacer[count] = pt_whatif_pacer(m, j, &margin[count]), count++;
        size_t best = 0, best_paced = 0;
        double best_lead = -1;
        for (size_t k = 0; k < count; k++) {
            size_t paced = 0;
            double lead = 0;
            for (size_t i = 0; i < count; i++)
                if (pacer[i] == pacer[k])
                    paced++, lead += margin[i];
            if (paced > best_paced || (paced == best_paced && lead > best_lead))
                best = pacer[k], best_paced = paced, best_lead = lead;
        }
        pt_json *p = pt_json_push(pace, pt_json_object());
        pt_json_add(p, "step", pt_json_int((int64_t)step));
        pt_json_add(p, "rank", pt_json_int(pt_worker_rank(a, best)));
        pt_json_add(p, "sets", pt_json_int((int64_t)best_paced));
        pt_json_add(p, "of", pt_json_int((int64_t)count));
        pt_json_add(p, "lead_ms", pt_json_number_rounded(a->n > 1 ? best_lead : 0, 6));
        pt_json_add(p, "above_noise", pt_json_bool(a->n > 1 && best_lead >= pt_floor_ms(a)));
    }
    return pace;
}

/* The step model as the report states it: the modelled step and how it is cut. */
static pt_json *model_json(const pt_analysis *a, const pt_whatif *m, double joint)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "step_ms", pt_json_number_rounded(pt_whatif_step_ms(m), 6));
    pt_json_add(j, "steps", pt_json_int((int64_t)pt_whatif_steps(m)));
    pt_json_add(j, "sync_points_per_step",
                pt_json_number_rounded((double)pt_whatif_sync_segments(m) / (double)pt_whatif_steps(m), 3));
    pt_json_add(j, "unshortened_ms", pt_json_number_rounded(pt_whatif_unshortened_ms(m), 6));
    pt_json_add(j, "joint_impact", pt_json_number_rounded(joint, 6));
    pt_json_add(j, "pace", pace_json(a, m));
    return j;
}

/* The passes that compare the workers with each other and with expected behaviour. */
static void find_problems(const pt_analysis *a, const pt_whatif *m, const pt_job_gaps *gaps, finding_list *list,
                          int *status)
{
    pt_hang_findings(a, list, status);
    size_t hangs = list->count;
    if (a->n >= 3) {
        pt_peer_findings(a, m, list, hangs == 0);
        for (size_t i = hangs; i < list->count; i++) {
            pt_cost_finding(a, m, &list->items[i]);
            pt_describe_peer_finding(a, &list->items[i], pt_whatif_step_ms(m));
        }
        pt_merge_causes(a, m, list, hangs);
        pt_pipeline_stages(a, m, list, hangs);
        hardware_findings(a, list);
    }
    if (!hangs)
        pt_candidate_findings(a, m, list, PT_CANDIDATES_PER_RANK);
    size_t peer_findings = 0; /* those that save enough to explain the others' waiting */
    for (size_t i = hangs; i < list->count; i++)
        peer_findings += list->items[i].impact >= EXPLAINS_WAITING;
    if (a->n > 0 && !hangs) {
        size_t common = list->count;
        common_class(a, m, list, PT_CLASS_MEMORY, COMMON_MEMORY, EXPECTED_MEMORY);
        common_class(a, m, list, PT_CLASS_RUNTIME, COMMON_RUNTIME, EXPECTED_RUNTIME);
        if (a->gpu_workers == a->n) {
            common_class(a, m, list, PT_CLASS_PYTHON, COMMON_PYTHON, EXPECTED_PYTHON);
            common_cpu_bound(a, m, list);
        }
        /* Waiting for a straggler is exposed communication on everyone else: it is
         * explained by the straggler's finding, not a communication problem; so is
         * waiting for a rank lost mid-round (the steps its crash cut short), and on a
         * partial job it may be waiting for a rank not analysed. A finding whose fix
         * saves next to nothing explains no waiting: a healthy job's ranks differ by a
         * few percent in noisy CPU work (h200 kineto_healthy: ranks 0 and 3, 2.3%)
         * while a third of its step is exposed communication. */
        if (!peer_findings && !gaps->ranks_lost && gaps->missing_count > 0)
            waiting_for_missing(a, m, gaps, list);
        else if (!peer_findings && !gaps->ranks_lost) {
            common_communication(a, m, list);
            common_imbalance(a, m, list);
        }
        pt_merge_causes(a, m, list, common);
        pt_candidate_findings(a, m, list, PT_CANDIDATES_EVERY_WORKER);
    }
}

/* Each finding's saving beyond those reported above it (adds): the joint saving of the
 * findings down to it, less that of those above it. Findings of one cause are one finding
 * (pt_merge_causes), so where the adds are below the impacts, findings of different
 * causes remove the same step time: the slowest worker's two faults with another worker
 * close behind (fixing either alone saves that worker's lead), or a finding about every
 * worker that takes some worker's excess too. The sentence says so, and what the finding
 * then adds. The adds sum to the joint saving (pt_joint_saving: communication the largest
 * such finding's, each removal placed once, pipeline stages' moves added). */
static void savings_in_report_order(const pt_analysis *a, const pt_whatif *m, finding_list *list)
{
    pt_joint *joint = pt_joint_new(a, m);
    double above = 0, step_ms = pt_whatif_step_ms(m);
    for (size_t i = 0; i < list->count; i++) {
        finding *f = &list->items[i];
        if (f->fix == PT_FIX_NONE)
            continue;
        pt_joint_add(joint, f);
        double now = pt_joint_now(joint);
        f->adds = fmax(0, now - above);
        above = fmax(above, now);
        if (f->impact - f->adds < SAME_TIME_SAID || !f->summary)
            continue;
        pt_buf s = PT_BUF_INIT;
        char pct[PT_PERCENT_LEN];
        pt_buf_puts(&s, f->summary);
        pt_buf_puts(&s, " Fixed after the findings above, it saves ");
        pt_put_ms(&s, f->adds * step_ms);
        pt_buf_printf(&s, " per step (%s): part of its saving is step time they save too.",
                      pt_percent(pct, 100 * f->adds));
        free(f->summary);
        f->summary = pt_buf_take(&s);
    }
    pt_joint_free(joint);
}

/* The finding about ranks not analysed leads: it says the others may be waiting for
 * them, which every other finding is to be read against. */
static void lead_with_missing(finding_list *list)
{
    for (size_t i = 1; i < list->count; i++)
        if (list->items[i].rank_count) {
            finding missing = list->items[i];
            memmove(list->items + 1, list->items, i * sizeof *list->items);
            list->items[0] = missing;
            return;
        }
}

pt_json *pt_build_diagnosis(const pt_analysis *a, int *status, const pt_job_gaps *gaps)
{
    finding_list list = {0};
    memset(status, 0, a->n * sizeof *status);
    pt_whatif *m = pt_whatif_new(a);
    if (!gaps->mixed) {
        find_problems(a, m, gaps, &list, status);
    } else { /* workers of unrelated jobs are not compared: what is wrong is the input */
        finding *f = pt_finding_add(&list, "other", "", "workers");
        f->all_workers = true;
        f->metric = "inputs";
        f->summary = pt_xstrdup(gaps->problem);
    }
    drop_findings_that_save_nothing(a, m, &list);
    bool hangs = false;
    for (size_t i = 0; i < list.count; i++) {
        if (list.items[i].explains)
            list.items[i].impact = list.items[list.items[i].explains - 1].impact;
        hangs |= strcmp(list.items[i].category, "hang") == 0;
    }
    double joint = pt_joint_saving(a, m, &list, NULL);
    if (list.count)
        qsort(list.items, list.count, sizeof *list.items, by_impact);
    lead_with_missing(&list);
    savings_in_report_order(a, m, &list);

    pt_json *diagnosis = pt_json_object();
    const char *verdict = hangs ? "hang" : list.count ? "degraded" : "healthy";
    pt_json_add(diagnosis, "verdict", pt_json_string(verdict));
    pt_json_add(diagnosis, "inputs", pt_json_string(gaps->inputs));
    pt_json_add(diagnosis, "input_problem", gaps->problem ? pt_json_string(gaps->problem) : pt_json_null());
    pt_json_add(diagnosis, "joint_impact", pt_json_number_rounded(joint, 6));
    pt_json_add(diagnosis, "step_model", model_json(a, m, joint));
    pt_json *findings = pt_json_add(diagnosis, "findings", pt_json_array());
    for (size_t i = 0; i < list.count; i++) {
        finding *f = &list.items[i];
        pt_json_push(findings, finding_json(a, f, pt_whatif_step_ms(m)));
        for (size_t k = 0; k < f->worker_count && !f->all_workers; k++)
            if (status[f->workers[k]] == 0)
                status[f->workers[k]] = 1;
    }
    pt_whatif_free(m);
    pt_finding_list_free(&list);
    return diagnosis;
}
