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
 *     "Communication" features), else the section's job-wide figure for every worker that
 *     ran the class;
 *   - nothing about executions or total time, and only functions above the sections' cuts
 *     (the 10 costliest kernels, runtime calls over 0.1%, Python stacks over 1% on some
 *     worker). Memory operations and collectives are listed whole.
 * Nothing is invented beyond that: a function a report does not list is absent. A section
 * that lists a function twice (a key repeated, a kernel under two groups) is read at its
 * first listing that gives some worker a value; a listing that names a worker twice, at
 * its first naming.
 *
 * Cost. A report lists each function once: one job-wide ratio and the few workers it
 * names. The run keeps it so (pt_run_function, and a pt_run_record per named worker); the
 * rebuilt workers hold no functions: copying the job's ratio into every worker would make
 * a report of W workers and M functions, a file of W + M entries, W x M records. The
 * comparison still makes the job-wide value for each worker that ran the class, W values
 * a function, so the report's size bounds how many it may ask for:
 * PT_REPORT_JOB_VALUES_PER_BYTE per byte of the report and the parts read (json_bytes). A
 * function past that is left out whole, with a warning, and its class is not complete
 * (absence is not judged). The reports perftracker writes ask for one value per 43 to 1700
 * bytes (synthetic jobs of 4 to 4096 workers, the real traces' reports): a worker's entry
 * is hundreds of bytes, and the sections list a few dozen job-wide functions. Every other
 * step reads each value of the report once, worker names through a hash table.
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
    PT_GROW(run->warnings, run->warning_cap, run->warning_count + 1);
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
    free(run->functions);
    free(run->records);
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
    pt_strtab names;            /* worker name -> index, for the sections' worker keys */
    pt_strtab *strings;         /* the functions' names and groups, each once (the run's names) */
    pt_strtab listed;           /* (class, name) of each function a section lists: a section may
                                   list one twice (a key repeated, a kernel under two groups), and
                                   the first listing that gives it a value stands */
    bool *taken;                /* [listed id] a listing stands (or was left out) */
    size_t taken_cap;
    uint32_t listing;           /* the listing being read: its key's id */
    size_t serial;              /* listings read, for named_in */
    pt_run_function *functions;
    size_t function_count, function_cap;
    pt_run_record *records;
    size_t record_count, record_cap;
    size_t *named_in;           /* [worker] the serial of the last listing that named it: a
                                   listing naming a worker twice gives it one record, the first */
    size_t ran[PT_CLASS_COUNT]; /* workers with exposed time in each class: what one job-wide
                                   ratio costs the comparison */
    size_t bytes;               /* of the report and the parts read (json_bytes) */
    size_t job_values_left;     /* of bytes x PT_REPORT_JOB_VALUES_PER_BYTE */
    size_t left_out;            /* job-wide functions the budget did not cover */
    unsigned left_out_classes;  /* their classes, as bits */
    pt_buf part_problems;       /* a line per part not read */
    size_t parts_read;
} rebuild;

/* The fewest bytes a document's text can have had: every value, key and separator at its
 * shortest (a number one byte), so neither whitespace nor long numbers buy a report more.
 * Recursion is as deep as the document, which the parser bounds. */
static size_t json_bytes(const pt_json *v)
{
    switch (v->type) {
    case PT_JSON_NULL:
        return 4;
    case PT_JSON_BOOL:
        return v->boolean ? 4 : 5;
    case PT_JSON_NUMBER:
        return 1;
    case PT_JSON_STRING:
        return v->string_len + 2;
    case PT_JSON_ARRAY:
    case PT_JSON_OBJECT:
        break;
    }
    size_t bytes = 2 + (v->count ? v->count - 1 : 0);
    for (size_t i = 0; i < v->count; i++)
        bytes += json_bytes(v->items[i]) + (v->type == PT_JSON_OBJECT ? strlen(v->keys[i]) + 3 : 0);
    return bytes;
}

/* A bottleneck ratio of s's window as exposed time; PT_RUN_NO_RECORD for a ratio that
 * gives none (not above 0, not finite) or a worker without a window. */
static int64_t exposed_of(double ratio, const pt_worker_summary *s)
{
    if (!(ratio > 0) || !isfinite(ratio) || s->window_ns <= 0)
        return PT_RUN_NO_RECORD;
    return (int64_t)llround(fmin(ratio, 1.0) * (double)s->window_ns);
}

int64_t pt_run_job_exposed_ns(const pt_run_function *f, const pt_worker_summary *s)
{
    return s->exposed_ns[f->cls] > 0 ? exposed_of(f->job_ratio, s) : PT_RUN_NO_RECORD;
}

/* Starts a function a section lists, with the ratio it gives every worker that ran the
 * class (none when not above 0): its index, or -1 when it is not taken: a listing of it
 * stands already, or its job-wide ratio would cost more worker values than the report's
 * bytes have left (then it is left out whole, its named workers too, and counted). */
static long begin_function(rebuild *r, pt_class cls, const char *name, const char *group, double job_ratio)
{
    uint32_t name_id = pt_strtab_intern(r->strings, name, strlen(name));
    unsigned char key[5]; /* class, name id: no padding to leave unset */
    key[0] = (unsigned char)cls;
    memcpy(key + 1, &name_id, sizeof name_id);
    r->listing = pt_strtab_intern(&r->listed, (const char *)key, sizeof key);
    if (r->listing >= r->taken_cap) {
        size_t cap = r->taken_cap;
        PT_GROW(r->taken, r->taken_cap, (size_t)r->listing + 1);
        memset(r->taken + cap, 0, (r->taken_cap - cap) * sizeof *r->taken);
    }
    if (r->taken[r->listing])
        return -1;
    r->taken[r->listing] = true;
    r->serial++;
    bool job_wide = job_ratio > 0 && isfinite(job_ratio);
    if (job_wide && r->ran[cls] > r->job_values_left) {
        r->left_out++;
        r->left_out_classes |= 1u << cls;
        return -1;
    }
    if (job_wide)
        r->job_values_left -= r->ran[cls];
    PT_GROW(r->functions, r->function_cap, r->function_count + 1);
    pt_run_function *f = &r->functions[r->function_count];
    f->cls = cls;
    f->name = pt_strtab_get(r->strings, name_id);
    f->group = group ? pt_strtab_get(r->strings, pt_strtab_intern(r->strings, group, strlen(group))) : NULL;
    f->job_ratio = job_wide ? job_ratio : 0;
    f->first = r->record_count;
    f->count = 0;
    return (long)r->function_count++;
}

/* Worker w's own figure of the function being read (PT_RUN_NO_RECORD: named without a
 * usable one, which still takes the job's ratio from it). The first naming stands. */
static void add_record(rebuild *r, long fn, long w, int64_t exposed_ns)
{
    if (fn < 0 || w < 0 || r->named_in[w] == r->serial)
        return;
    r->named_in[w] = r->serial;
    PT_GROW(r->records, r->record_cap, r->record_count + 1);
    r->records[r->record_count++] = (pt_run_record){(uint32_t)w, exposed_ns};
    r->functions[fn].count++;
}

/* A listing that gave no worker a value is dropped, and a later listing of the function
 * may stand instead. */
static void end_function(rebuild *r, long fn)
{
    if (fn < 0)
        return;
    const pt_run_function *f = &r->functions[fn];
    bool valued = f->job_ratio > 0;
    for (size_t i = f->first; i < f->first + f->count && !valued; i++)
        valued = r->records[i].exposed_ns != PT_RUN_NO_RECORD;
    if (valued)
        return;
    r->record_count = f->first;
    r->function_count--;
    r->taken[r->listing] = false;
}

static long worker_index(const rebuild *r, const char *name)
{
    uint32_t id = pt_strtab_find(&r->names, name, strlen(name));
    return id == UINT32_MAX ? -1 : (long)id;
}

/* A worker's own ratio of a listing that names it, or the listing's job ratio where the
 * value is not a number. */
static void add_named(rebuild *r, long fn, const char *worker, const pt_json *value, double job_ratio)
{
    long w = worker_index(r, worker);
    if (w >= 0)
        add_record(r, fn, w, exposed_of(value->type == PT_JSON_NUMBER ? value->number : job_ratio, r->workers[w]));
}

static void rebuild_compute(rebuild *r, const pt_json *section)
{
    const pt_json *major = pt_json_get(section, "major_kernel_executions");
    for (size_t i = 0; major && major->type == PT_JSON_OBJECT && i < major->count; i++)
        end_function(r, begin_function(r, PT_CLASS_COMPUTE, major->keys[i], NULL,
                                       pt_json_get_number(major->items[i], "bottleneck ratio (in [0,1])", 0)));
}

/* "GPU memory operations" and "CUDA Runtime": {name: {"avg bottleneck ratio (in [0,1])",
 * "abnormal_workers": {worker: ratio}}}. */
static void rebuild_average_sections(rebuild *r, const pt_json *section, pt_class cls)
{
    for (size_t i = 0; section && section->type == PT_JSON_OBJECT && i < section->count; i++) {
        const pt_json *e = section->items[i];
        double job_ratio = pt_json_get_number(e, "avg bottleneck ratio (in [0,1])", 0);
        long fn = begin_function(r, cls, section->keys[i], NULL, job_ratio);
        const pt_json *own = pt_json_get(e, "abnormal_workers");
        for (size_t k = 0; fn >= 0 && own && own->type == PT_JSON_OBJECT && k < own->count; k++)
            add_named(r, fn, own->keys[k], own->items[k], job_ratio);
        end_function(r, fn);
    }
}

static double features_ratio(const pt_json *holder)
{
    return pt_json_get_number(pt_json_get(holder, "features"), "bottleneck ratio (in [0,1])", 0);
}

/* "Communication": {group: {kernel: {"example_of_normal_worker": {"features"},
 * "abnormal_workers": [{"worker", "features"}]}}}. */
static void rebuild_communication(rebuild *r, const pt_json *section)
{
    for (size_t g = 0; section && section->type == PT_JSON_OBJECT && g < section->count; g++) {
        const pt_json *kernels = section->items[g];
        for (size_t k = 0; kernels->type == PT_JSON_OBJECT && k < kernels->count; k++) {
            const pt_json *e = kernels->items[k];
            long fn = begin_function(r, PT_CLASS_COMM, kernels->keys[k], section->keys[g],
                                     features_ratio(pt_json_get(e, "example_of_normal_worker")));
            const pt_json *abnormal = pt_json_get(e, "abnormal_workers");
            for (size_t i = 0; fn >= 0 && abnormal && abnormal->type == PT_JSON_ARRAY && i < abnormal->count; i++) {
                const char *worker = pt_json_get_string(abnormal->items[i], "worker", NULL);
                long w = worker ? worker_index(r, worker) : -1;
                if (w >= 0)
                    add_record(r, fn, w, exposed_of(features_ratio(abnormal->items[i]), r->workers[w]));
            }
            end_function(r, fn);
        }
    }
}

/* "Python functions": {stack: {worker: ratio}}; a share that gives no time is skipped (a
 * later one for the same worker may stand). */
static void rebuild_python(rebuild *r, const pt_json *section)
{
    for (size_t i = 0; section && section->type == PT_JSON_OBJECT && i < section->count; i++) {
        const pt_json *shares = section->items[i];
        long fn = begin_function(r, PT_CLASS_PYTHON, section->keys[i], NULL, 0);
        for (size_t k = 0; fn >= 0 && shares->type == PT_JSON_OBJECT && k < shares->count; k++) {
            long w = worker_index(r, shares->keys[k]);
            int64_t ns = w >= 0 && shares->items[k]->type == PT_JSON_NUMBER
                             ? exposed_of(shares->items[k]->number, r->workers[w])
                             : PT_RUN_NO_RECORD;
            if (ns != PT_RUN_NO_RECORD)
                add_record(r, fn, w, ns);
        }
        end_function(r, fn);
    }
}

/* What the report's bytes let its job-wide ratios cost, once every worker is in. */
static void start_functions(rebuild *r)
{
    r->named_in = pt_xcalloc(r->n ? r->n : 1, sizeof *r->named_in);
    for (size_t w = 0; w < r->n; w++)
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            r->ran[c] += r->workers[w]->exposed_ns[c] > 0 && r->workers[w]->window_ns > 0;
    size_t most = SIZE_MAX / PT_REPORT_JOB_VALUES_PER_BYTE;
    r->job_values_left = r->bytes > most ? SIZE_MAX : r->bytes * PT_REPORT_JOB_VALUES_PER_BYTE;
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
    rebuild *r = ctx;
    r->bytes += json_bytes(part);
    const pt_json *list = pt_json_get(part, "workers"); /* an array: pt_report_each_part checked */
    for (size_t i = 0; i < list->count; i++)
        add_worker(r, list->items[i]);
    return 0;
}

/* A bounded report (more than 4096 workers) lists only its named and outlying workers in
 * full; the others are in its parts beside it (parts/workers-NNNN.json), read here when
 * the report's path is known. */
static void add_bounded_workers(rebuild *r, const pt_json *report, const char *report_path)
{
    const pt_json *scale = pt_json_get(report, "scale");
    if (scale && scale->type == PT_JSON_OBJECT && report_path)
        r->parts_read = pt_report_each_part(report, report_path, add_part_workers, r, &r->part_problems);
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

/* Without all of a bounded report's workers a median or a rank-by-rank comparison is not
 * the job's, so the diff says so: how many it has, and why the rest are not in. */
static void warn_bounded(const rebuild *r, pt_diff_run *run, const char *label, const pt_json *report,
                         const char *report_path)
{
    const pt_json *scale = pt_json_get(report, "scale");
    if (!scale || scale->type != PT_JSON_OBJECT)
        return;
    double analysed = pt_json_get_number(pt_json_get(report, "job"), "workers_analyzed", -1);
    if ((double)r->n < analysed) {
        pt_buf line = PT_BUF_INIT, why = PT_BUF_INIT;
        if (!report_path)
            pt_buf_puts(&why, "the named and the outlying: its parts were not looked for");
        else if (r->parts_read)
            pt_buf_printf(&why, "the named and the outlying, and those of the %zu part(s) read beside it",
                          r->parts_read);
        else
            pt_buf_puts(&why, r->part_problems.len ? "the named and the outlying: none of its parts could be read"
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
}

static void warn_left_out(const rebuild *r, pt_diff_run *run, const char *label)
{
    if (!r->left_out)
        return;
    pt_buf line = PT_BUF_INIT;
    pt_buf_printf(&line,
                  "%s: %zu function(s) with a job-wide ratio are not compared: giving each to every worker that "
                  "ran its class would cost more than %d worker value(s) per byte of the report (%zu bytes); "
                  "their classes' functions are not judged added or removed",
                  label, r->left_out, PT_REPORT_JOB_VALUES_PER_BYTE, r->bytes);
    pt_diff_run_warn(run, line.data);
    pt_buf_free(&line);
}

/* The rebuilt workers that pass pt_summary_check become the run's; the functions' records
 * follow their workers to their new indexes, and those of the refused go. */
static void admit_rebuilt(rebuild *r, pt_diff_run *run)
{
    run->owns_workers = false; /* the refused are freed here, once their records are gone */
    admit(run, r->workers, r->n);
    run->owns_workers = true;
    uint32_t *index = pt_xmalloc((r->n ? r->n : 1) * sizeof *index);
    for (size_t w = 0, kept = 0; w < r->n; w++) {
        bool admitted = kept < run->worker_count && run->workers[kept] == r->workers[w];
        index[w] = admitted ? (uint32_t)kept++ : UINT32_MAX;
        if (!admitted)
            pt_summary_free(r->workers[w]);
    }
    size_t out = 0;
    for (size_t i = 0; i < r->function_count; i++) {
        pt_run_function *f = &r->functions[i];
        size_t first = out;
        for (size_t k = f->first; k < f->first + f->count; k++)
            if (index[r->records[k].worker] != UINT32_MAX)
                r->records[out++] = (pt_run_record){index[r->records[k].worker], r->records[k].exposed_ns};
        f->first = first;
        f->count = out - first;
    }
    r->record_count = out;
    free(index);
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
    rebuild r;
    memset(&r, 0, sizeof r);
    r.world_size = (int32_t)int_of(pt_json_get(report, "job"), "world_size", -1, 1, PT_MAX_WORLD_SIZE);
    r.strings = pt_xmalloc(sizeof *r.strings);
    pt_strtab_init(r.strings);
    pt_strtab_init(&r.names);
    pt_strtab_init(&r.listed);
    r.bytes = json_bytes(report);
    for (size_t i = 0; i < list->count; i++)
        add_worker(&r, list->items[i]);
    add_bounded_workers(&r, report, report_path);
    start_functions(&r);
    rebuild_compute(&r, pt_json_get(report, "GPU Compute"));
    rebuild_average_sections(&r, pt_json_get(report, "GPU memory operations"), PT_CLASS_MEMORY);
    rebuild_communication(&r, pt_json_get(report, "Communication"));
    rebuild_average_sections(&r, pt_json_get(report, "CUDA Runtime"), PT_CLASS_RUNTIME);
    rebuild_python(&r, pt_json_get(report, "Python functions"));

    run->label = pt_xstrdup(label);
    run->source = PT_RUN_REPORT;
    admit_rebuilt(&r, run);
    /* After admit's warnings: the CLI names the refused workers from the first of them. */
    warn_bounded(&r, run, label, report, report_path);
    warn_parts_not_read(run, label, &r.part_problems);
    warn_left_out(&r, run, label);
    run->names = r.strings;
    run->functions = r.functions;
    run->function_count = r.function_count;
    run->records = r.records;
    run->record_count = r.record_count;
    run->report = report;
    run->counts_known = false;
    run->complete[PT_CLASS_MEMORY] = !(r.left_out_classes & (1u << PT_CLASS_MEMORY));
    run->complete[PT_CLASS_COMM] = !(r.left_out_classes & (1u << PT_CLASS_COMM));
    free(r.workers);
    free(r.taken);
    free(r.named_in);
    pt_strtab_free(&r.names);
    pt_strtab_free(&r.listed);
    pt_buf_free(&r.part_problems);
    return 0;
}
