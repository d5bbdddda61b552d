/* findings.c -- the diagnosis: which workers are slow, which function is the root cause,
 * and how much step time it costs; plus problems every worker shares, and hangs.
 *
 * Method (PerfTracker's, made robust):
 *  1. Peers. In a synchronous job every worker's step takes the same time, because the
 *     fast ones wait for the slowest inside collectives. So a worker is judged by what it
 *     does *instead of waiting*: for each activity class (GPU compute, memory operations,
 *     runtime calls, Python) and for each function, its exposed (bottleneck) time per
 *     step is compared with the other workers' — median and MAD, flagged above
 *     max(5 sigma, 2% of the step). A flagged class names its worst function: the one
 *     whose excess over its peers is largest (summed over the flagged workers, so two
 *     workers slow for the same reason share one finding).
 *  2. Stragglers. The worker that arrives last at a collective has the shortest
 *     communication time; a worker whose exposed communication is far *below* its
 *     peers' is a straggler. A straggler no function explains is still named (category
 *     "other": untraced CPU work, I/O, OS noise).
 *  3. Common problems. What every worker does badly is invisible to peer comparison, so
 *     it is judged against expected behaviour instead: memory operations above 3% of the
 *     step on (almost) all workers, a runtime API above 5% (launch-bound), a Python stack
 *     above 10% with the GPU idle, exposed communication above 30%.
 *  4. Hangs. Workers whose traces go on long after their last step blocked in a
 *     collective are waiting; the workers that are not are the culprits. Workers the
 *     collector or control plane marked as stopped are hangs too.
 * Impact is the excess time per step over the median worker (or over the expected cost)
 * divided by the median step time: roughly what fixing it would save. */
#include "diagnose/analysis.h"
#include "summarize/classify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIGMAS 5.0
#define STEP_SIGMAS 4.0
#define STEP_FRACTION_FLOOR 0.02
#define ABSOLUTE_FLOOR_MS 0.05
#define SHARE_WITH_BEST 0.5   /* a worker joins the class's common culprit at >= half its own best */
#define HANG_STEPS 5.0        /* stuck for 5x the step time (the paper's rule) */
#define COMMON_MEMORY 0.03
#define COMMON_RUNTIME 0.05
#define COMMON_PYTHON 0.10
#define COMMON_COMM 0.30
#define EXPECTED_MEMORY 0.01
#define EXPECTED_RUNTIME 0.01
#define EXPECTED_PYTHON 0.05
#define EXPECTED_COMM 0.10
#define MOST_WORKERS 0.9
#define EXPLAINED_SHARE 0.5 /* a function explains a straggler when it covers half its lead */

typedef struct finding {
    const char *category;
    char *function;
    size_t *workers;          /* worker indices */
    size_t worker_count, worker_cap;
    bool all_workers;
    double impact;
    char *summary;
    const char *section;      /* evidence */
    const char *metric;
    double median;
    double *values;           /* per named worker */
} finding;

typedef struct finding_list {
    finding *items;
    size_t count, cap;
} finding_list;

static finding *add_finding(finding_list *list, const char *category, const char *function, const char *section)
{
    PT_GROW(list->items, list->cap, list->count + 1);
    finding *f = &list->items[list->count++];
    memset(f, 0, sizeof *f);
    f->category = category;
    f->function = pt_xstrdup(function);
    f->section = section;
    f->metric = "bottleneck ms per step";
    return f;
}

static void name_worker(finding *f, size_t w, double value)
{
    if (f->worker_count == f->worker_cap) {
        PT_GROW(f->workers, f->worker_cap, f->worker_count + 1);
        f->values = pt_xrealloc(f->values, f->worker_cap * sizeof *f->values);
    }
    f->workers[f->worker_count] = w;
    f->values[f->worker_count++] = value;
}

static finding *find_finding(finding_list *list, const char *category, const char *function)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->items[i].category, category) == 0 && strcmp(list->items[i].function, function) == 0)
            return &list->items[i];
    return NULL;
}

static bool names_worker(const finding_list *list, size_t w)
{
    for (size_t i = 0; i < list->count; i++)
        for (size_t k = 0; k < list->items[i].worker_count; k++)
            if (list->items[i].workers[k] == w && !list->items[i].all_workers)
                return true;
    return false;
}

static const char *category_of(pt_class cls)
{
    static const char *const names[PT_CLASS_COUNT] = {"gpu_compute", "gpu_memory", "communication",
                                                      "cuda_runtime", "python"};
    return names[cls];
}

static const char *section_of(pt_class cls)
{
    static const char *const names[PT_CLASS_COUNT] = {"GPU Compute", "GPU memory operations", "Communication",
                                                      "CUDA Runtime", "Python functions"};
    return names[cls];
}

static double floor_ms(const pt_analysis *a)
{
    return fmax(STEP_FRACTION_FLOOR * a->median_step_ms, ABSOLUTE_FLOOR_MS);
}

/* How far above its peers a worker must be to be named: beyond what chance explains,
 * judged either by the spread across workers (robust: 5 sigma) or, when several steps
 * were profiled, by how much one worker varies from step to step (4 sigma); never less
 * than the floor. The step-to-step scale keeps a graded slowdown (ranks sleeping 0, 1, 2,
 * 3 s) visible where the cross-worker spread is inflated by the slow workers themselves. */
static double outlier_threshold(const pt_analysis *a, pt_spread s, pt_class cls)
{
    double statistical = fmin(SIGMAS * s.sigma, STEP_SIGMAS * a->step_noise_ms[cls]);
    return fmax(statistical, floor_ms(a));
}

static double impact_of(const pt_analysis *a, double excess_ms)
{
    return a->median_step_ms > 0 ? fmin(1.0, fmax(0.0, excess_ms / a->median_step_ms)) : 0;
}

/* ------------------------------------------------------------ sentences */

/* "1460 ms", "12.5 ms", "0.043 ms": as many digits as a reader needs. */
static void put_ms(pt_buf *out, double ms)
{
    pt_buf_printf(out, ms >= 100 ? "%.0f ms" : "%.3g ms", ms);
}

static void ranks_phrase(const pt_analysis *a, const finding *f, pt_buf *out)
{
    if (f->worker_count == 1) {
        pt_buf_printf(out, "Rank %d", pt_worker_rank(a, f->workers[0]));
        return;
    }
    pt_buf_puts(out, "Ranks ");
    for (size_t i = 0; i < f->worker_count && i < 8; i++)
        pt_buf_printf(out, "%s%d", i == 0 ? "" : i + 1 == f->worker_count ? " and " : ", ",
                      pt_worker_rank(a, f->workers[i]));
    if (f->worker_count > 8)
        pt_buf_printf(out, " and %zu more", f->worker_count - 8);
}

static const char *advice_for(pt_class cls)
{
    switch (cls) {
    case PT_CLASS_COMPUTE:
        return "its GPU is slower than its peers on the same kernels: check that GPU's clocks, temperature, "
               "power limit and ECC errors, or move the job off it";
    case PT_CLASS_MEMORY:
        return "avoid synchronous copies in the step (.item(), .cpu(), .to() without non_blocking), use pinned "
               "memory, or check that host's PCIe link";
    case PT_CLASS_RUNTIME:
        return "the CPU cannot launch work fast enough, so the GPU waits: look for CPU contention on that host "
               "(other processes, too few cores per rank, CPU frequency, NUMA placement)";
    case PT_CLASS_PYTHON:
        return "the other workers wait in collectives meanwhile: speed up or overlap this code there (data "
               "loading, garbage collection, logging, I/O)";
    case PT_CLASS_COMM:
    default:
        return "check that worker's network or NVLink/PCIe links";
    }
}

static void describe_peer_finding(const pt_analysis *a, finding *f, pt_class cls, double excess_ms)
{
    pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
    pt_short_function_name(cls, f->function, &name);
    ranks_phrase(a, f, &s);
    pt_buf_printf(&s, " %s ", f->worker_count == 1 ? "spends" : "spend up to");
    put_ms(&s, excess_ms);
    pt_buf_printf(&s, " more per step than the other workers in %s `%s` (%.0f%% of the step); %s.",
                  cls == PT_CLASS_COMPUTE   ? "GPU kernels, most in"
                  : cls == PT_CLASS_MEMORY  ? "GPU memory operations, most in"
                  : cls == PT_CLASS_RUNTIME ? "CUDA runtime calls, most in"
                  : cls == PT_CLASS_COMM    ? "communication, most in"
                                            : "Python, in",
                  name.data ? name.data : f->function, 100 * f->impact, advice_for(cls));
    f->summary = pt_buf_take(&s);
    pt_buf_free(&name);
}

/* ------------------------------------------------------------ 1. peers */

typedef struct class_scan {
    double *class_excess;    /* per worker, 0 when not flagged */
    bool *class_flag;
    const pt_fn_row **best_row;
    double *best_excess;
} class_scan;

/* Excess of one row over its median, per worker. Returns the spread. */
static pt_spread row_excess(const pt_analysis *a, const pt_fn_row *row, double *values, double *excess)
{
    pt_row_exposed_ms(a, row, values);
    pt_spread s = pt_spread_of(values, a->n, a->scratch);
    for (size_t w = 0; w < a->n; w++)
        excess[w] = values[w] - s.median;
    return s;
}

/* Names the workers in `who` on the finding for (cls, row), creating it when needed;
 * does nothing when `who` names nobody. */
static void add_row_workers(const pt_analysis *a, finding_list *list, pt_class cls, const pt_fn_row *row,
                            const bool *who, const double *excess_of_worker)
{
    bool anyone = false;
    for (size_t w = 0; w < a->n && !anyone; w++)
        anyone = who[w];
    if (!anyone)
        return;
    finding *f = find_finding(list, category_of(cls), row->name);
    double *values = pt_xmalloc(a->n * sizeof *values), *excess = pt_xmalloc(a->n * sizeof *excess);
    pt_spread s = row_excess(a, row, values, excess);
    if (!f) {
        f = add_finding(list, category_of(cls), row->name, section_of(cls));
        f->median = s.median;
    }
    for (size_t w = 0; w < a->n; w++) {
        if (!who[w])
            continue;
        bool already = false;
        for (size_t k = 0; k < f->worker_count; k++)
            already |= f->workers[k] == w;
        if (!already)
            name_worker(f, w, values[w]);
        f->impact = fmax(f->impact, impact_of(a, excess_of_worker[w]));
    }
    free(values);
    free(excess);
}

/* Flags whole classes and single functions of one class; turns them into findings. */
static void peer_class(const pt_analysis *a, pt_class cls, finding_list *list)
{
    size_t n = a->n;
    double *class_ms = pt_xmalloc(n * sizeof *class_ms);
    bool *class_flag = pt_xcalloc(n, sizeof *class_flag);
    pt_class_exposed_ms(a, cls, class_ms);
    pt_spread cs = pt_spread_of(class_ms, n, a->scratch);
    size_t flagged = pt_high_outliers(class_ms, n, cs, 0, outlier_threshold(a, cs, cls), class_flag);

    /* Scan the class's functions: each worker's most-excess row, the row with the most
     * excess summed over flagged workers, and rows that are outliers on their own. */
    double *values = pt_xmalloc(n * sizeof *values), *excess = pt_xmalloc(n * sizeof *excess);
    double *best_excess = pt_xmalloc(n * sizeof *best_excess);
    const pt_fn_row **best_row = pt_xcalloc(n, sizeof *best_row);
    bool *row_flag = pt_xcalloc(n, sizeof *row_flag);
    for (size_t w = 0; w < n; w++)
        best_excess[w] = -INFINITY;
    const pt_fn_row *common = NULL;
    double common_sum = -INFINITY;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != cls)
            continue;
        pt_spread s = row_excess(a, row, values, excess);
        double sum = 0;
        for (size_t w = 0; w < n; w++) {
            if (excess[w] > best_excess[w])
                best_excess[w] = excess[w], best_row[w] = row;
            if (class_flag[w])
                sum += excess[w];
        }
        if (flagged && sum > common_sum)
            common_sum = sum, common = row;
        /* A single function far above its peers, on workers whose class total is not. */
        if (pt_high_outliers(values, n, s, 0, outlier_threshold(a, s, cls), row_flag)) {
            for (size_t w = 0; w < n; w++)
                row_flag[w] &= !class_flag[w];
            add_row_workers(a, list, cls, row, row_flag, excess);
        }
    }
    for (size_t w = 0; w < n; w++) {
        if (!class_flag[w] || !best_row[w])
            continue;
        const pt_fn_row *row = best_row[w];
        if (common && common->by_worker[w]) {
            pt_row_exposed_ms(a, common, values);
            pt_spread s = pt_spread_of(values, n, a->scratch);
            if (values[w] - s.median >= SHARE_WITH_BEST * best_excess[w])
                row = common;
        }
        bool *who = pt_xcalloc(n, sizeof *who);
        double *class_excess = pt_xcalloc(n, sizeof *class_excess);
        who[w] = true;
        class_excess[w] = class_ms[w] - cs.median;
        add_row_workers(a, list, cls, row, who, class_excess);
        free(who);
        free(class_excess);
    }
    free(class_ms);
    free(class_flag);
    free(values);
    free(excess);
    free(best_excess);
    free(best_row);
    free(row_flag);
}

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
};

static bool suffix_is(const char *name, const char *suffix)
{
    size_t n = strlen(name), m = strlen(suffix);
    return n >= m && strcmp(name + n - m, suffix) == 0;
}

static const pt_metric_summary *metric_of(const pt_worker_summary *s, const char *suffix)
{
    for (size_t i = 0; i < s->metric_count; i++)
        if (suffix_is(s->metrics[i].name, suffix))
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
                finding *f = add_finding(list, "hardware", metric->name, "Hardware");
                f->metric = "average over the window";
                f->median = s.median;
                f->impact = list->items[i].impact; /* the time it costs is the finding it explains */
                name_worker(f, w, metric->mean);
                pt_buf b = PT_BUF_INIT;
                pt_buf_printf(&b, "Rank %d: %s averages %.4g against %.4g on the other workers; %s.",
                              pt_worker_rank(a, w), metric->name, metric->mean, s.median, rule->explanation);
                f->summary = pt_buf_take(&b);
            }
        }
    }
    free(values);
}

/* ------------------------------------------------------------ 2. stragglers */

/* Workers that wait far less than their peers in communication. */
static size_t find_stragglers(const pt_analysis *a, bool *straggler, double *deficit)
{
    double *comm = pt_xmalloc(a->n * sizeof *comm);
    pt_class_exposed_ms(a, PT_CLASS_COMM, comm);
    pt_spread s = pt_spread_of(comm, a->n, a->scratch);
    size_t count = 0;
    double threshold = outlier_threshold(a, s, PT_CLASS_COMM);
    for (size_t w = 0; w < a->n; w++) {
        deficit[w] = s.median - comm[w];
        straggler[w] = s.median > floor_ms(a) && deficit[w] > threshold;
        count += straggler[w];
    }
    free(comm);
    return count;
}

/* The function with the largest excess over the median worker on worker w, among the
 * classes `allowed` marks (communication never: it is the waiting). */
static const pt_fn_row *largest_excess(const pt_analysis *a, size_t w, const bool allowed[PT_CLASS_COUNT],
                                       double *excess_out, pt_class *cls_out)
{
    double *values = pt_xmalloc(a->n * sizeof *values), *excess = pt_xmalloc(a->n * sizeof *excess);
    const pt_fn_row *best = NULL;
    *excess_out = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls == PT_CLASS_COMM || !allowed[row->cls] || !row->by_worker[w])
            continue;
        row_excess(a, row, values, excess);
        if (excess[w] > *excess_out)
            *excess_out = excess[w], best = row, *cls_out = row->cls;
    }
    free(values);
    free(excess);
    return best;
}

/* What a straggler does instead of waiting: one function covering at least half its
 * lead, or else the class covering at least half of it (slowness spread over many
 * launches or kernels), named by that class's largest excess. NULL: nothing does. */
static const pt_fn_row *explain_lead(const pt_analysis *a, size_t w, double lead, double *excess, pt_class *cls)
{
    bool every_class[PT_CLASS_COUNT] = {true, true, false, true, true};
    const pt_fn_row *row = largest_excess(a, w, every_class, excess, cls);
    if (row && *excess >= EXPLAINED_SHARE * lead)
        return row;
    double *class_ms = pt_xmalloc(a->n * sizeof *class_ms);
    pt_class best_class = PT_CLASS_COMM;
    double best_excess = 0;
    for (int k = 0; k < PT_CLASS_COUNT; k++) {
        if (k == PT_CLASS_COMM)
            continue;
        pt_class_exposed_ms(a, (pt_class)k, class_ms);
        double over = class_ms[w] - pt_median_of(class_ms, a->n, a->scratch);
        if (over > best_excess)
            best_excess = over, best_class = (pt_class)k;
    }
    free(class_ms);
    if (best_class == PT_CLASS_COMM || best_excess < EXPLAINED_SHARE * lead)
        return NULL;
    bool only[PT_CLASS_COUNT] = {false};
    only[best_class] = true;
    row = largest_excess(a, w, only, excess, cls);
    *excess = best_excess;
    return row;
}

/* Stragglers the peer comparison did not name (their excess hid in the noise, or spread
 * over several functions): named by what they do instead of waiting (explain_lead);
 * otherwise as untraced time. */
static void explain_stragglers(const pt_analysis *a, finding_list *list, const bool *straggler,
                               const double *deficit)
{
    finding *untraced = NULL;
    double worst = 0;
    bool *who = pt_xcalloc(a->n, sizeof *who);
    for (size_t w = 0; w < a->n; w++) {
        if (!straggler[w] || names_worker(list, w))
            continue;
        double excess;
        pt_class cls = PT_CLASS_PYTHON;
        const pt_fn_row *row = explain_lead(a, w, deficit[w], &excess, &cls);
        if (row) {
            double *excess_of = pt_xcalloc(a->n, sizeof *excess_of);
            excess_of[w] = excess;
            who[w] = true;
            add_row_workers(a, list, cls, row, who, excess_of);
            who[w] = false;
            free(excess_of);
            continue;
        }
        if (!untraced)
            untraced = add_finding(list, "other", "untraced time (idle GPU and CPU)", "Communication");
        name_worker(untraced, w, deficit[w]);
        worst = fmax(worst, deficit[w]);
    }
    free(who);
    if (!untraced)
        return;
    finding *f = untraced;
    f->metric = "communication wait below median, ms per step";
    f->impact = impact_of(a, worst);
    pt_buf s = PT_BUF_INIT;
    ranks_phrase(a, f, &s);
    pt_buf_printf(&s, " %s the straggler: the other workers wait ", f->worker_count == 1 ? "is" : "are");
    put_ms(&s, worst);
    pt_buf_printf(&s, " per step for %s in collectives, but no traced function explains it; look for untraced "
                      "CPU work, I/O or OS noise on that host.", f->worker_count == 1 ? "it" : "them");
    f->summary = pt_buf_take(&s);
}

/* A minority of workers waiting much longer than the rest in one collective. */
static void slow_communication(const pt_analysis *a, finding_list *list)
{
    bool *flag = pt_xcalloc(a->n, sizeof *flag);
    double *values = pt_xmalloc(a->n * sizeof *values), *excess = pt_xmalloc(a->n * sizeof *excess);
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_COMM)
            continue;
        pt_spread s = row_excess(a, row, values, excess);
        size_t k = pt_high_outliers(values, a->n, s, 0, outlier_threshold(a, s, PT_CLASS_COMM), flag);
        if (k == 0 || 2 * k >= a->n)
            continue;
        add_row_workers(a, list, PT_CLASS_COMM, row, flag, excess);
    }
    free(flag);
    free(values);
    free(excess);
}

/* ------------------------------------------------------------ 3. common problems */

/* A finding about every worker: values[w] per worker, judged at the median. */
static finding *add_common_finding(const pt_analysis *a, finding_list *list, pt_class cls, const char *function,
                                   double median, double expected, const char *metric, const double *values)
{
    finding *f = add_finding(list, category_of(cls), function, section_of(cls));
    f->all_workers = true;
    f->impact = median - expected;
    f->metric = metric;
    f->median = median;
    for (size_t w = 0; w < a->n; w++)
        name_worker(f, w, values[w]);
    return f;
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
        pt_buf_printf(&s, "Every worker spends %.0f%% of each step in %s `%s` not hidden by %s; ", 100 * median,
                      cls == PT_CLASS_MEMORY ? "the memory operation" : cls == PT_CLASS_RUNTIME ? "the runtime call"
                                                                                             : "Python",
                      name.data ? name.data : row->name, cls == PT_CLASS_PYTHON ? "GPU work" : "computation");
        pt_buf_puts(&s, cls == PT_CLASS_MEMORY ? "remove redundant copies (.contiguous(), .clone(), dtype casts, "
                                                 "host round trips) or overlap them with compute."
                        : cls == PT_CLASS_RUNTIME ? "the job is launch-bound: use CUDA graphs, fuse kernels "
                                                    "(torch.compile) or give each kernel more work."
                                                  : "the GPU idles meanwhile: move this work off the critical path "
                                                    "(background data loading, fewer host syncs) or speed it up.");
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
            pt_short_function_name(PT_CLASS_COMM, top->name, &name);
            pt_buf_printf(&s, "Communication is exposed (not overlapped with compute) for %.0f%% of each step on "
                              "every worker, most in `%s`", 100 * median, name.data ? name.data : top->name);
            if (throughput > 0)
                pt_buf_printf(&s, " at %.0f%% of the link's peak bandwidth", throughput);
            pt_buf_puts(&s, "; overlap gradient communication with backward (DDP buckets), shard differently, "
                            "or check the links.");
            f->summary = pt_buf_take(&s);
            pt_buf_free(&name);
        }
    }
    free(ms);
    free(ratio);
}

/* ------------------------------------------------------------ 4. hangs */

static bool stack_in_collective(const char *stack)
{
    if (!stack)
        return false;
    const char *frame = stack;
    for (const char *p = stack;; p++) {
        if (*p == '|' || *p == '\0') {
            if (pt_cpu_is_collective(frame, (size_t)(p - frame)) || pt_kernel_is_collective(frame, (size_t)(p - frame)))
                return true;
            if (!*p)
                return false;
            frame = p + 1;
        }
    }
}

static void hang_findings(const pt_analysis *a, finding_list *list, int *status)
{
    double stuck_ms = HANG_STEPS * a->median_step_ms;
    bool *blocked = pt_xcalloc(a->n ? a->n : 1, sizeof *blocked);
    bool *stopped = pt_xcalloc(a->n ? a->n : 1, sizeof *stopped);
    size_t nblocked = 0, nstopped = 0;
    const char *collective = NULL;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        bool stalled = (double)s->stall_ns / 1e6 > stuck_ms && a->median_step_ms > 0;
        if (s->hang_step >= 0) {
            blocked[w] = stack_in_collective(s->hang_stack);
            stopped[w] = !blocked[w];
        } else if (stalled && s->stall_class == PT_CLASS_COMM) {
            blocked[w] = true;
            collective = s->stall_function;
        } else if (stalled) {
            stopped[w] = true;
        }
        nblocked += blocked[w];
        nstopped += stopped[w];
    }
    /* Workers blocked in a collective wait for someone: those that are not blocked. */
    if (nblocked && !nstopped)
        for (size_t w = 0; w < a->n; w++)
            if (!blocked[w])
                stopped[w] = true, nstopped++;
    if (nstopped) {
        finding *f = add_finding(list, "hang", "", "workers");
        f->metric = "step the worker stopped in";
        for (size_t w = 0; w < a->n; w++)
            if (stopped[w]) {
                name_worker(f, w, (double)a->workers[w]->hang_step);
                status[w] = 2;
            }
        const pt_worker_summary *first = a->workers[f->workers[0]];
        free(f->function);
        f->function = pt_xstrdup(first->hang_stack ? first->hang_stack
                                 : first->stall_function && first->stall_class != PT_CLASS_COMM ? first->stall_function
                                                                                                 : "stopped stepping");
        f->impact = 1.0;
        pt_buf s = PT_BUF_INIT;
        ranks_phrase(a, f, &s);
        pt_buf_printf(&s, " stopped making progress");
        if (first->hang_step >= 0)
            pt_buf_printf(&s, " in step %lld", (long long)first->hang_step);
        if (strcmp(f->function, "stopped stepping") != 0)
            pt_buf_printf(&s, " (last in `%s`)", f->function);
        if (nblocked)
            pt_buf_printf(&s, "; %zu other worker%s %s blocked in %s waiting for %s", nblocked, nblocked == 1 ? "" : "s",
                          nblocked == 1 ? "is" : "are", collective ? collective : "a collective",
                          f->worker_count == 1 ? "it" : "them");
        pt_buf_puts(&s, ". Inspect that process (py-spy dump, gdb) before restarting the job.");
        f->summary = pt_buf_take(&s);
    } else if (nblocked) {
        finding *f = add_finding(list, "hang", collective ? collective : "collective", "workers");
        f->all_workers = true;
        f->impact = 1.0;
        f->metric = "blocked after the last step, ms";
        for (size_t w = 0; w < a->n; w++)
            if (blocked[w])
                name_worker(f, w, (double)a->workers[w]->stall_ns / 1e6), status[w] = 2;
        pt_buf s = PT_BUF_INIT;
        pt_buf_printf(&s, "Every traced worker is blocked in %s: the worker they wait for is not among the traces "
                          "(see the missing ranks) or the network hangs.",
                      collective ? collective : "a collective");
        f->summary = pt_buf_take(&s);
    }
    free(blocked);
    free(stopped);
}

/* ------------------------------------------------------------ output */

static int by_impact(const void *x, const void *y)
{
    const finding *a = x, *b = y;
    if (a->impact != b->impact)
        return a->impact > b->impact ? -1 : 1;
    /* A hardware finding shares the impact of the finding it explains and follows it. */
    bool ha = strcmp(a->category, "hardware") == 0, hb = strcmp(b->category, "hardware") == 0;
    if (ha != hb)
        return ha ? 1 : -1;
    int c = strcmp(a->category, b->category);
    return c ? c : strcmp(a->function, b->function);
}

static int by_index(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return (a > b) - (a < b);
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
    pt_json *values = pt_json_add(ev, "values", pt_json_object());
    for (size_t i = 0; i < f->worker_count && i < 64; i++) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", pt_worker_rank(a, f->workers[i]));
        pt_json_add(values, rank, pt_json_number_rounded(f->values[i], 6));
    }
    return j;
}

static void finish_peer_sentences(const pt_analysis *a, finding_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        finding *f = &list->items[i];
        if (f->summary)
            continue;
        pt_class cls = PT_CLASS_PYTHON;
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            if (strcmp(f->category, category_of((pt_class)c)) == 0)
                cls = (pt_class)c;
        qsort(f->workers, f->worker_count, sizeof *f->workers, by_index);
        describe_peer_finding(a, f, cls, f->impact * a->median_step_ms);
    }
}

pt_json *pt_build_diagnosis(const pt_analysis *a, int *status)
{
    finding_list list = {0};
    memset(status, 0, a->n * sizeof *status);
    hang_findings(a, &list, status);
    size_t hangs = list.count, stragglers = 0;
    if (a->n >= 3) {
        static const pt_class judged[] = {PT_CLASS_COMPUTE, PT_CLASS_MEMORY, PT_CLASS_RUNTIME, PT_CLASS_PYTHON};
        for (size_t i = 0; i < PT_ARRAY_LEN(judged); i++)
            peer_class(a, judged[i], &list);
        bool *straggler = pt_xcalloc(a->n, sizeof *straggler);
        double *deficit = pt_xcalloc(a->n, sizeof *deficit);
        stragglers = find_stragglers(a, straggler, deficit);
        if (stragglers && !hangs)
            explain_stragglers(a, &list, straggler, deficit);
        /* With stragglers, long waits are theirs to explain: the fastest worker waits longest. */
        if (!stragglers)
            slow_communication(a, &list);
        free(straggler);
        free(deficit);
        finish_peer_sentences(a, &list);
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
        if (!stragglers && !peer_findings)
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
        free(f->function);
        free(f->workers);
        free(f->values);
        free(f->summary);
    }
    free(list.items);
    return diagnosis;
}
