/* run.c -- the runs a diff compares: worker summaries as they are, or rebuilt from a
 * report.json.
 *
 * A report is the reduce step's output, so it has already lost most of what a summary
 * holds. Rebuilding summaries from it keeps one comparison for every kind of input: the
 * diff never learns where a run came from, only what the run can tell (pt_diff_run's
 * counts_known and complete[]). What a report gives, per worker:
 *   - the step time and the per-step breakdown by class ("workers"[].steps), so step time,
 *     class times and their step-to-step noise are as good as from summaries;
 *   - bottleneck ratios of functions, which become exposed time (ratio x window): per
 *     worker where the section names the worker ("Python functions", "abnormal_workers",
 *     "Communication" features), else the section's job-wide figure for every worker;
 *   - nothing about executions or total time, and only functions above the sections' cuts
 *     (the 10 costliest kernels, runtime calls over 0.1%, Python stacks over 1% on some
 *     worker). Memory operations and collectives are listed whole.
 * Nothing is invented beyond that: a function a report does not list is absent.
 *
 * Whatever the source, a run holds only workers that pass pt_summary_check (admit): a
 * summary made in memory from a hostile trace, or rebuilt from a hostile report, is as
 * untrusted as a file, and the comparison's analysis (pt_analysis) assumes the rules.
 * An invalid worker is left out with a warning naming it and the rule it broke, and the
 * rest are compared. */
#include "compare/diff.h"
#include "diagnose/diagnose.h"
#include "report/report.h"
#include "util/strtab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MS 1e6
/* A report gives its times to 6 significant digits (diagnose.c), so each is off by up to
 * 5e-6 of itself: the parts of a step may add up to a little more than the step. */
#define REPORT_ROUNDING 1e-5

void pt_diff_run_warn(pt_diff_run *run, const char *warning)
{
    run->warnings = pt_xrealloc(run->warnings, (run->warning_count + 1) * sizeof *run->warnings);
    run->warnings[run->warning_count++] = pt_xstrdup(warning);
}

/* Keeps the workers of workers[count] that pass pt_summary_check in run->workers (an
 * array of the run's own), in order; each other one is warned about and, when the run
 * owns its workers, freed. */
static void admit(pt_diff_run *run, pt_worker_summary **workers, size_t count)
{
    run->workers = pt_xmalloc((count ? count : 1) * sizeof *run->workers);
    run->worker_count = 0;
    for (size_t w = 0; w < count; w++) {
        pt_error rule;
        if (pt_summary_check(workers[w], &rule) == 0) {
            run->workers[run->worker_count++] = workers[w];
            continue;
        }
        char who[128];
        pt_summary_describe(workers[w], who, sizeof who);
        pt_buf line = PT_BUF_INIT;
        pt_buf_printf(&line, "%s: invalid summary, not compared: %s", who, rule.message);
        pt_diff_run_warn(run, line.data);
        pt_buf_free(&line);
        run->refused++;
        if (run->owns_workers)
            pt_summary_free(workers[w]);
    }
}

void pt_diff_run_from_summaries(pt_diff_run *run, const char *label, pt_run_source source,
                                pt_worker_summary **workers, size_t count)
{
    memset(run, 0, sizeof *run);
    run->label = pt_xstrdup(label);
    run->source = source;
    admit(run, workers, count);
    run->counts_known = true;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        run->complete[c] = true;
    pt_job_input job = {run->workers, run->worker_count, -1, NULL, 0, NULL, NULL, 0, NULL};
    run->report = pt_diagnose(&job);
}

void pt_diff_run_free(pt_diff_run *run)
{
    if (run->owns_workers)
        for (size_t w = 0; w < run->worker_count; w++)
            pt_summary_free(run->workers[w]);
    free(run->workers);
    if (run->names)
        pt_strtab_free(run->names);
    free(run->names);
    pt_free_strings(run->warnings, run->warning_count);
    free(run->label);
    pt_json_free(run->report);
    memset(run, 0, sizeof *run);
}

/* ------------------------------------------------------------ rebuilding workers */

/* The report's per-step keys, in class order, then idle. */
static const char *const part_keys[PT_CLASS_COUNT + 1] = {"compute_ms", "memory_ms", "communication_ms",
                                                          "runtime_ms", "python_ms", "idle_ms"};

static int64_t ns_of(const pt_json *object, const char *key)
{
    double ms = pt_json_get_number(object, key, 0);
    return isfinite(ms) && ms > 0 && ms < 1e12 ? (int64_t)llround(ms * MS) : 0;
}

/* An integer field, or fallback when it is absent, not a number or out of [lo, hi]
 * (a hostile report must not reach an out-of-range conversion). */
static int64_t int_of(const pt_json *object, const char *key, int64_t fallback, double lo, double hi)
{
    double v = pt_json_get_number(object, key, NAN);
    return v >= lo && v <= hi ? (int64_t)v : fallback;
}

/* Parts that pass their whole by no more than the report's rounding (plus a nanosecond
 * each, for ours) are trimmed back to it, idle first; a larger excess is left for
 * pt_summary_check to refuse, since no report perftracker wrote has it. */
static void fit_parts(int64_t exposed[PT_CLASS_COUNT], int64_t *idle, int64_t whole)
{
    int64_t sum = *idle;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        sum += exposed[c];
    int64_t excess = sum - whole;
    if (excess <= 0 || (double)excess > REPORT_ROUNDING * (double)whole + PT_CLASS_COUNT + 1)
        return;
    int64_t *parts[PT_CLASS_COUNT + 1] = {idle};
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        parts[c + 1] = &exposed[c];
    for (int i = 0; i <= PT_CLASS_COUNT && excess > 0; i++) {
        int64_t taken = *parts[i] < excess ? *parts[i] : excess;
        *parts[i] -= taken;
        excess -= taken;
    }
}

static void add_steps(pt_worker_summary *s, const pt_json *steps)
{
    s->steps = pt_xcalloc(steps->count ? steps->count : 1, sizeof *s->steps);
    int64_t start = 0;
    for (size_t i = 0; i < steps->count; i++) {
        const pt_json *in = steps->items[i];
        if (in->type != PT_JSON_OBJECT)
            continue;
        pt_step_summary *st = &s->steps[s->step_count++];
        st->step = int_of(in, "step", (int64_t)i, 0, 9e15);
        st->start_ns = start;
        st->dur_ns = ns_of(in, "ms");
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            st->exposed_ns[c] = ns_of(in, part_keys[c]);
        st->idle_ns = ns_of(in, part_keys[PT_CLASS_COUNT]);
        fit_parts(st->exposed_ns, &st->idle_ns, st->dur_ns);
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            s->exposed_ns[c] += st->exposed_ns[c];
        s->idle_ns += st->idle_ns;
        s->window_ns += st->dur_ns;
        start += st->dur_ns;
    }
}

/* A worker without per-step data: one step of its breakdown. */
static void add_breakdown(pt_worker_summary *s, const pt_json *breakdown, double step_ms)
{
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        s->exposed_ns[c] = ns_of(breakdown, part_keys[c]);
    s->idle_ns = ns_of(breakdown, part_keys[PT_CLASS_COUNT]);
    s->window_ns = (int64_t)llround(step_ms * MS);
    fit_parts(s->exposed_ns, &s->idle_ns, s->window_ns);
}

static pt_worker_summary *worker_from_json(const pt_json *w, int32_t world_size)
{
    const char *status = pt_json_get_string(w, "status", "normal");
    const pt_json *step_time = pt_json_get(w, "step_time_ms");
    if (strcmp(status, "missing") == 0 || strcmp(status, "error") == 0 || !step_time ||
        step_time->type != PT_JSON_NUMBER || !(step_time->number > 0))
        return NULL;
    pt_worker_summary *s = pt_summary_new();
    s->shared_function_names = true; /* its functions' names are the run's (rebuild.functions) */
    s->name = pt_xstrdup(pt_json_get_string(w, "name", ""));
    s->host = pt_xstrdup(pt_json_get_string(w, "host", ""));
    s->rank = (int32_t)int_of(w, "rank", -1, 0, PT_MAX_WORLD_SIZE);
    s->local_rank = (int32_t)int_of(w, "local_rank", -1, 0, PT_MAX_WORLD_SIZE);
    s->pid = int_of(w, "pid", -1, 0, 9e15);
    s->world_size = world_size;
    const pt_json *steps = pt_json_get(w, "steps");
    if (steps && steps->type == PT_JSON_ARRAY && steps->count)
        add_steps(s, steps);
    if (s->window_ns <= 0) {
        s->step_count = 0;
        add_breakdown(s, pt_json_get(w, "breakdown"), step_time->number);
    }
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        s->union_ns[c] = s->exposed_ns[c]; /* overlap is not in a report */
    return s;
}

/* ------------------------------------------------------------ rebuilding functions */

typedef struct rebuild {
    pt_worker_summary **workers;
    size_t n, cap;
    int32_t world_size;
    pt_strtab names;     /* worker name -> index, for the sections' worker keys */
    pt_strtab *functions; /* every function name and group, once: the workers point into it
                             (100,000 workers x a few dozen functions each otherwise copied
                             every name) */
    pt_strtab added;     /* (worker, class, name) of each function added, as a fixed-size key:
                            a report may name one twice (a kernel under two groups, a worker's
                            name twice in one stack's shares), and a summary holds it once:
                            the first stands */
} rebuild;

static void add_function(rebuild *r, size_t w, pt_class cls, const char *name, const char *group, double ratio,
                         double median_ms)
{
    pt_worker_summary *s = r->workers[w];
    if (!(ratio > 0) || !isfinite(ratio) || s->window_ns <= 0)
        return;
    uint32_t name_id = pt_strtab_intern(r->functions, name, strlen(name));
    unsigned char key[9]; /* worker, name, class: no padding to leave unset */
    uint32_t worker = (uint32_t)w;
    memcpy(key, &worker, 4);
    memcpy(key + 4, &name_id, 4);
    key[8] = (unsigned char)cls;
    size_t known = r->added.count;
    pt_strtab_intern(&r->added, (const char *)key, sizeof key);
    if (r->added.count == known)
        return;
    s->functions = pt_xrealloc(s->functions, (s->function_count + 1) * sizeof *s->functions);
    pt_function_summary *f = &s->functions[s->function_count++];
    memset(f, 0, sizeof *f);
    f->cls = cls;
    f->name = (char *)pt_strtab_get(r->functions, name_id); /* never freed: shared_function_names */
    f->group = group ? (char *)pt_strtab_get(r->functions, pt_strtab_intern(r->functions, group, strlen(group)))
                     : NULL;
    f->exposed_ns = (int64_t)llround(fmin(ratio, 1.0) * (double)s->window_ns);
    f->median_ns = median_ms > 0 && isfinite(median_ms) ? (int64_t)llround(median_ms * MS) : 0;
}

static long worker_index(const rebuild *r, const char *name)
{
    uint32_t id = pt_strtab_find(&r->names, name, strlen(name));
    return id == UINT32_MAX ? -1 : (long)id;
}

/* Every worker that ran the class gets job_ratio, except those the per-worker object
 * names (worker name -> ratio), which get their own. */
static void add_to_workers(rebuild *r, pt_class cls, const char *name, const char *group, double job_ratio,
                           const pt_json *per_worker, double median_ms)
{
    for (size_t w = 0; w < r->n; w++) {
        const pt_json *own = per_worker ? pt_json_get(per_worker, r->workers[w]->name) : NULL;
        double ratio = own && own->type == PT_JSON_NUMBER ? own->number : job_ratio;
        if (own || r->workers[w]->exposed_ns[cls] > 0)
            add_function(r, w, cls, name, group, ratio, median_ms);
    }
}

static void rebuild_compute(rebuild *r, const pt_json *section)
{
    const pt_json *major = pt_json_get(section, "major_kernel_executions");
    for (size_t i = 0; major && major->type == PT_JSON_OBJECT && i < major->count; i++)
        add_to_workers(r, PT_CLASS_COMPUTE, major->keys[i], NULL,
                       pt_json_get_number(major->items[i], "bottleneck ratio (in [0,1])", 0), NULL,
                       pt_json_get_number(major->items[i], "median cost per execution (ms)", 0));
}

/* "GPU memory operations" and "CUDA Runtime": {name: {"avg bottleneck ratio (in [0,1])",
 * "abnormal_workers": {worker: ratio}}}. */
static void rebuild_average_sections(rebuild *r, const pt_json *section, pt_class cls)
{
    for (size_t i = 0; section && section->type == PT_JSON_OBJECT && i < section->count; i++) {
        const pt_json *e = section->items[i];
        add_to_workers(r, cls, section->keys[i], NULL, pt_json_get_number(e, "avg bottleneck ratio (in [0,1])", 0),
                       pt_json_get(e, "abnormal_workers"), 0);
    }
}

static double features_ratio(const pt_json *holder)
{
    return pt_json_get_number(pt_json_get(holder, "features"), "bottleneck ratio (in [0,1])", 0);
}

static void rebuild_communication(rebuild *r, const pt_json *section)
{
    for (size_t g = 0; section && section->type == PT_JSON_OBJECT && g < section->count; g++) {
        const pt_json *kernels = section->items[g];
        for (size_t k = 0; kernels->type == PT_JSON_OBJECT && k < kernels->count; k++) {
            const pt_json *e = kernels->items[k];
            /* The abnormal workers' own features, as {worker: ratio}. */
            pt_json *own = pt_json_object();
            const pt_json *abnormal = pt_json_get(e, "abnormal_workers");
            for (size_t i = 0; abnormal && abnormal->type == PT_JSON_ARRAY && i < abnormal->count; i++) {
                const char *worker = pt_json_get_string(abnormal->items[i], "worker", NULL);
                if (worker)
                    pt_json_set(own, worker, pt_json_number(features_ratio(abnormal->items[i])));
            }
            add_to_workers(r, PT_CLASS_COMM, kernels->keys[k], section->keys[g],
                           features_ratio(pt_json_get(e, "example_of_normal_worker")), own, 0);
            pt_json_free(own);
        }
    }
}

static void rebuild_python(rebuild *r, const pt_json *section)
{
    for (size_t i = 0; section && section->type == PT_JSON_OBJECT && i < section->count; i++) {
        const pt_json *shares = section->items[i];
        for (size_t k = 0; shares->type == PT_JSON_OBJECT && k < shares->count; k++) {
            long w = worker_index(r, shares->keys[k]);
            if (w >= 0 && shares->items[k]->type == PT_JSON_NUMBER)
                add_function(r, (size_t)w, PT_CLASS_PYTHON, section->keys[i], NULL, shares->items[k]->number, 0);
        }
    }
}

/* One worker of the report's (or its parts'), unless it has no profile or a worker of its
 * name is in already (a part repeats the report's full-detail workers; a second worker of
 * the same name could not be told apart in the sections). */
static void add_worker(rebuild *r, const pt_json *item)
{
    pt_worker_summary *s = r->n < PT_MAX_WORLD_SIZE ? worker_from_json(item, r->world_size) : NULL;
    if (!s)
        return;
    if (pt_strtab_intern(&r->names, s->name, strlen(s->name)) != r->n) {
        pt_summary_free(s);
        return;
    }
    PT_GROW(r->workers, r->cap, r->n + 1);
    r->workers[r->n++] = s;
}

static int add_part_workers(void *ctx, const char *folder, const char *file, const pt_json *part, pt_error *err)
{
    (void)folder, (void)file, (void)err;
    const pt_json *list = pt_json_get(part, "workers"); /* an array: pt_report_each_part checked */
    for (size_t i = 0; i < list->count; i++)
        add_worker(ctx, list->items[i]);
    return 0;
}

/* A warning for each of the first PARTS_NOT_READ_LISTED parts not read (problems: a line
 * each), and one counting the rest: a report moved without its parts/ folder would
 * otherwise give one line per 1024 workers. */
#define PARTS_NOT_READ_LISTED 3

static void warn_parts_not_read(pt_diff_run *run, const char *label, pt_buf *problems)
{
    size_t listed = 0;
    for (char *text = problems->data, *end; text && *text && (end = strchr(text, '\n')); text = end + 1) {
        *end = '\0';
        if (listed++ >= PARTS_NOT_READ_LISTED)
            continue;
        pt_buf line = PT_BUF_INIT;
        pt_buf_printf(&line, "%s: %s", label, text);
        pt_diff_run_warn(run, line.data);
        pt_buf_free(&line);
    }
    if (listed > PARTS_NOT_READ_LISTED) {
        pt_buf line = PT_BUF_INIT;
        pt_buf_printf(&line, "%s: %zu more of its parts were not read", label, listed - PARTS_NOT_READ_LISTED);
        pt_diff_run_warn(run, line.data);
        pt_buf_free(&line);
    }
}

/* A bounded report (more than 4096 workers) lists only its named and outlying workers in
 * full; the others are in its parts beside it (parts/workers-NNNN.json), read here when
 * the report's path is known. Without all of them a median or a rank-by-rank comparison
 * is not the job's, so the diff says so: how many it has, and why the rest are not in. */
static void add_bounded_workers(rebuild *r, pt_diff_run *run, const char *label, const pt_json *report,
                                const char *report_path)
{
    const pt_json *scale = pt_json_get(report, "scale");
    if (!scale || scale->type != PT_JSON_OBJECT)
        return;
    pt_buf problems = PT_BUF_INIT, why = PT_BUF_INIT;
    size_t parts_read = report_path ? pt_report_each_part(report, report_path, add_part_workers, r, &problems) : 0;
    double analysed = pt_json_get_number(pt_json_get(report, "job"), "workers_analyzed", -1);
    if ((double)r->n < analysed) {
        pt_buf line = PT_BUF_INIT;
        if (!report_path)
            pt_buf_puts(&why, "the named and the outlying: its parts were not looked for");
        else if (parts_read)
            pt_buf_printf(&why, "the named and the outlying, and those of the %zu part(s) read beside it", parts_read);
        else
            pt_buf_puts(&why, problems.len ? "the named and the outlying: none of its parts could be read"
                                           : "its parts list no more");
        pt_buf_printf(&line,
                      "%s is a bounded report and only %zu of its %.0f workers are in full detail (%s), so medians "
                      "and ranks are compared on those alone; diff the summaries (its round's summaries/ folder) to "
                      "compare every worker",
                      label, r->n, analysed, why.data);
        pt_diff_run_warn(run, line.data);
        pt_buf_free(&line);
        pt_buf_free(&why);
    }
    warn_parts_not_read(run, label, &problems);
    pt_buf_free(&problems);
}

int pt_diff_run_from_report(pt_diff_run *run, const char *label, pt_json *report, const char *report_path,
                            pt_error *err)
{
    memset(run, 0, sizeof *run);
    const pt_json *version = pt_json_get(report, "report_version");
    const pt_json *list = pt_json_get(report, "workers");
    if (!version || version->type != PT_JSON_NUMBER || !list || list->type != PT_JSON_ARRAY) {
        pt_error_set(err, "%s: not a perftracker report.json (no report_version or workers)", label);
        pt_json_free(report);
        return -1;
    }
    if (version->number != 1) {
        pt_error_set(err, "%s: report_version %g is not one this perftracker reads (1)", label, version->number);
        pt_json_free(report);
        return -1;
    }
    rebuild r = {NULL, 0, 0, 0, {0}, pt_xmalloc(sizeof *r.functions), {0}};
    r.world_size = (int32_t)int_of(pt_json_get(report, "job"), "world_size", -1, 1, PT_MAX_WORLD_SIZE);
    pt_strtab_init(r.functions);
    pt_strtab_init(&r.names);
    pt_strtab_init(&r.added);
    for (size_t i = 0; i < list->count; i++)
        add_worker(&r, list->items[i]);
    add_bounded_workers(&r, run, label, report, report_path);
    rebuild_compute(&r, pt_json_get(report, "GPU Compute"));
    rebuild_average_sections(&r, pt_json_get(report, "GPU memory operations"), PT_CLASS_MEMORY);
    rebuild_communication(&r, pt_json_get(report, "Communication"));
    rebuild_average_sections(&r, pt_json_get(report, "CUDA Runtime"), PT_CLASS_RUNTIME);
    rebuild_python(&r, pt_json_get(report, "Python functions"));
    pt_strtab_free(&r.names);
    pt_strtab_free(&r.added);

    run->label = pt_xstrdup(label);
    run->source = PT_RUN_REPORT;
    run->owns_workers = true;
    run->names = r.functions;
    admit(run, r.workers, r.n);
    free(r.workers);
    run->report = report;
    run->counts_known = false;
    run->complete[PT_CLASS_MEMORY] = run->complete[PT_CLASS_COMM] = true;
    return 0;
}
