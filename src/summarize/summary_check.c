/* summary_check.c -- the one validator every summary passes before any analysis reads it.
 *
 * Summaries arrive as files and as frames from peers (summary_io.c decodes them, then
 * calls pt_summary_check), and they are made in memory by the summarizer and by synth
 * out of traces that are just as hostile. pt_diagnose, and each run of a diff
 * (compare/run.c), check every worker they are given again, so nothing reaches the
 * analysis unchecked, whichever way it came; one copy of the rules serves every door.
 *
 * The rules are what the summarizer guarantees (docs/summary-format.md lists them):
 *   - counts within the PT_SUMMARY_MAX_* bounds (summary.h);
 *   - strings bounded, and the ones that key something (the worker, a metric) non-empty.
 *     A function may be unnamed: a trace can hold an event named "". Bytes that are not
 *     UTF-8 are not refused: every writer makes them safe (JSON: U+FFFD; the terminal:
 *     '?' for control characters);
 *   - nothing twice that the analysis keys by: step numbers, (class, name) of functions,
 *     metric names. The hardware section sized an array by workers and wrote one entry
 *     per matching metric: a repeated metric name overflowed it;
 *   - times within bounds, so that no sum the analysis makes can overflow: durations in
 *     [0, 2^60) ns, the window at most 30 days, the parts of the window and of each step
 *     (per class, idle, a function's union) no larger than their whole;
 *   - steps in order of their start, inside the window; finite floating-point values.
 * Each failure is one sentence naming the rule and the value. Names in it are cut short
 * and their control characters shown as '?', so a message is safe to print or log.
 * Cost: linear, plus sorting pointers to find repeats (O(n log n)); nothing is copied. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include "summarize/summary.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOWN_MAX 60        /* bytes of a name a message shows */
/* Parts of a rebuilt worker (compare/run.c) are rounded to the nanosecond one by one, so
 * their sum may pass their whole by a nanosecond per part. */
#define ROUNDING_SLACK_NS (PT_CLASS_COUNT + 1)

#define REFUSE(...) (pt_error_set(err, __VA_ARGS__), false)

/* A name as a message shows it: at most SHOWN_MAX bytes, control characters as '?'. */
static const char *shown(const char *name, char buf[SHOWN_MAX + 4])
{
    if (!name)
        return "(none)";
    size_t n = strnlen(name, SHOWN_MAX + 1);
    size_t kept = n > SHOWN_MAX ? SHOWN_MAX : n;
    for (size_t i = 0; i < kept; i++) {
        unsigned char c = (unsigned char)name[i];
        buf[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    memcpy(buf + kept, n > SHOWN_MAX ? "..." : "", n > SHOWN_MAX ? 4 : 1);
    return buf;
}

void pt_summary_describe(const pt_worker_summary *s, char *out, size_t cap)
{
    char name[SHOWN_MAX + 4];
    const char *who = s->name && s->name[0] ? shown(s->name, name) : "(unnamed worker)";
    if (s->rank >= 0)
        snprintf(out, cap, "%s (rank %" PRId32 ")", who, s->rank);
    else
        snprintf(out, cap, "%s", who);
}

/* ------------------------------------------------------------ values */

/* What a string may be: absent (NULL), present but possibly "", or non-empty. */
typedef enum text_rule { MAY_BE_ABSENT, PRESENT, NON_EMPTY } text_rule;

static bool text_ok(const char *what, const char *text, text_rule rule, pt_error *err)
{
    if (!text)
        return rule == MAY_BE_ABSENT || REFUSE("%s is missing", what);
    size_t n = strnlen(text, PT_SUMMARY_MAX_NAME + 1);
    if (rule == NON_EMPTY && n == 0)
        return REFUSE("%s is empty", what);
    if (n > PT_SUMMARY_MAX_NAME)
        return REFUSE("%s is longer than %u bytes", what, PT_SUMMARY_MAX_NAME);
    return true;
}

/* Whose value a rule is about: "step 11's ", "the compute function \"gemm\"'s ", or
 * nothing (the worker's own). Put into words only when a rule is broken, so checking a
 * valid summary formats nothing. */
typedef struct owner {
    const char *what;  /* NULL: the worker itself */
    const char *name;  /* quoted after what, or NULL */
    bool numbered;     /* number after what ("step 11") */
    int64_t number;
} owner;

#define WORKER ((owner){NULL, NULL, false, 0})
#define OWNER_TEXT_MAX (SHOWN_MAX + 64)

static const char *owner_text(owner o, char buf[OWNER_TEXT_MAX])
{
    char name[SHOWN_MAX + 4];
    if (!o.what)
        buf[0] = '\0';
    else if (o.name)
        snprintf(buf, OWNER_TEXT_MAX, "%s \"%s\"'s ", o.what, shown(o.name, name));
    else if (o.numbered)
        snprintf(buf, OWNER_TEXT_MAX, "%s %" PRId64 "'s ", o.what, o.number);
    else
        snprintf(buf, OWNER_TEXT_MAX, "%s's ", o.what);
    return buf;
}

#define REFUSE_OWNED(o, fmt, ...) (pt_error_set(err, "%s" fmt, owner_text(o, who), __VA_ARGS__), false)

static bool time_ok(owner o, const char *field, int64_t ns, int64_t max, pt_error *err)
{
    char who[OWNER_TEXT_MAX];
    return (ns >= 0 && ns <= max) ||
           REFUSE_OWNED(o, "%s is %" PRId64 " ns, outside 0 to %" PRId64 " ns", field, ns, max);
}

static bool count_ok(owner o, const char *field, uint64_t v, pt_error *err)
{
    char who[OWNER_TEXT_MAX];
    return v <= (uint64_t)INT64_MAX || REFUSE_OWNED(o, "%s is %" PRIu64 ", beyond int64", field, v);
}

static bool finite_ok(owner o, const char *field, double v, bool non_negative, pt_error *err)
{
    char who[OWNER_TEXT_MAX];
    if (!isfinite(v))
        return REFUSE_OWNED(o, "%s is not a finite number", field);
    return !non_negative || v >= 0 || REFUSE_OWNED(o, "%s is negative (%g)", field, v);
}

static bool at_least(const char *what, int64_t v, int64_t min, pt_error *err)
{
    return v >= min || REFUSE("%s is %" PRId64 ", below %" PRId64, what, v, min);
}

static const char *const exposed_field[PT_CLASS_COUNT] = {
    "exposed compute time", "exposed memory time", "exposed communication time", "exposed runtime time",
    "exposed python time"};

/* exposed time per class and idle: each within whole, their sum too. */
static bool parts_ok(owner o, const int64_t exposed[PT_CLASS_COUNT], int64_t idle, int64_t whole, pt_error *err)
{
    int64_t sum = 0; /* each part <= whole <= 2^60: no overflow */
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        if (!time_ok(o, exposed_field[c], exposed[c], whole, err))
            return false;
        sum += exposed[c];
    }
    if (!time_ok(o, "idle time", idle, whole, err))
        return false;
    sum += idle;
    char who[OWNER_TEXT_MAX];
    return sum <= whole + ROUNDING_SLACK_NS ||
           REFUSE_OWNED(o, "exposed and idle times add up to %" PRId64 " ns, more than its %" PRId64 " ns", sum,
                        whole);
}

/* ------------------------------------------------------------ repeats */

typedef int (*ptr_cmp)(const void *, const void *);

/* The first of ptrs (n pointers to items) equal to another under cmp, or NULL. Sorts
 * ptrs. */
static const void *repeated(const void **ptrs, size_t n, ptr_cmp cmp)
{
    qsort(ptrs, n, sizeof *ptrs, cmp);
    for (size_t i = 1; i < n; i++)
        if (cmp(&ptrs[i - 1], &ptrs[i]) == 0)
            return ptrs[i];
    return NULL;
}

static int cmp_step_number(const void *x, const void *y)
{
    const pt_step_summary *a = *(const pt_step_summary *const *)x, *b = *(const pt_step_summary *const *)y;
    return pt_cmp_i64(a->step, b->step);
}

static int cmp_function_key(const void *x, const void *y)
{
    const pt_function_summary *a = *(const pt_function_summary *const *)x;
    const pt_function_summary *b = *(const pt_function_summary *const *)y;
    int order = pt_cmp_i64(a->cls, b->cls);
    return order ? order : strcmp(a->name, b->name);
}

static int cmp_metric_name(const void *x, const void *y)
{
    const pt_metric_summary *a = *(const pt_metric_summary *const *)x, *b = *(const pt_metric_summary *const *)y;
    return strcmp(a->name, b->name);
}

/* Fills ptrs[i] = items + i * size and looks for a repeat. */
static const void *find_repeat(const void *items, size_t n, size_t size, ptr_cmp cmp)
{
    if (n < 2)
        return NULL;
    const void **ptrs = pt_xmalloc(n * sizeof *ptrs);
    for (size_t i = 0; i < n; i++)
        ptrs[i] = (const char *)items + i * size;
    const void *twice = repeated(ptrs, n, cmp);
    free(ptrs);
    return twice;
}

/* ------------------------------------------------------------ the parts of a summary */

static bool identity_ok(const pt_worker_summary *s, pt_error *err)
{
    if (!text_ok("the worker's name", s->name, NON_EMPTY, err) ||
        !text_ok("the host name", s->host, MAY_BE_ABSENT, err) ||
        !text_ok("the device name", s->device_name, MAY_BE_ABSENT, err) ||
        !text_ok("the backend", s->backend, MAY_BE_ABSENT, err) ||
        !text_ok("the producer", s->producer, MAY_BE_ABSENT, err) ||
        !text_ok("the software versions", s->software, MAY_BE_ABSENT, err))
        return false;
    if (s->rank < -1 || s->rank >= PT_MAX_WORLD_SIZE)
        return REFUSE("rank %" PRId32 " is outside -1 (unknown) to %d", s->rank, PT_MAX_WORLD_SIZE - 1);
    if (s->world_size != -1 && (s->world_size < 1 || s->world_size > PT_MAX_WORLD_SIZE))
        return REFUSE("world size %" PRId32 " is outside 1 to %d (or -1, unknown)", s->world_size, PT_MAX_WORLD_SIZE);
    if (s->rank >= 0 && s->world_size > 0 && s->rank >= s->world_size)
        return REFUSE("rank %" PRId32 " is not below its world size %" PRId32, s->rank, s->world_size);
    if (s->local_rank < -1 || s->local_rank >= PT_MAX_WORLD_SIZE)
        return REFUSE("local rank %" PRId32 " is outside -1 (unknown) to %d", s->local_rank, PT_MAX_WORLD_SIZE - 1);
    if ((unsigned)s->rank_source > PT_RANK_FROM_FILE_ORDER)
        return REFUSE("the rank's source (%u) is not one perftracker knows", (unsigned)s->rank_source);
    return at_least("the pid", s->pid, -1, err) && at_least("the device count", s->device_count, -1, err) &&
           count_ok(WORKER, "the event count", s->events, err) &&
           at_least("the dropped event count", s->dropped_events, -1, err) &&
           at_least("the hardware sample period", s->hw_sample_period_us, -1, err);
}

static bool window_ok(const pt_worker_summary *s, pt_error *err)
{
    /* Starts are Unix-epoch ns (the summarizer ignores an origin beyond 2116) or, without
     * a clock, small offsets; differences of two must fit int64. */
    if (s->window_start_ns <= -(INT64_C(1) << 62) || s->window_start_ns >= INT64_C(1) << 62)
        return REFUSE("the window starts at %" PRId64 " ns, beyond the year 2116", s->window_start_ns);
    if (!time_ok(WORKER, "the profiled window", s->window_ns, PT_SUMMARY_MAX_WINDOW_NS, err))
        return false;
    /* A window of 0 is a worker with no profile (a hang's, round.c): it holds nothing. */
    if (s->window_ns == 0 && (s->step_count || s->function_count || s->metric_count))
        return REFUSE("the profiled window is empty but holds %zu steps, %zu functions and %zu metrics",
                      s->step_count, s->function_count, s->metric_count);
    static const char *const busy_field[PT_CLASS_COUNT] = {"the busy compute time", "the busy memory time",
                                                           "the busy communication time", "the busy runtime time",
                                                           "the busy python time"};
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        if (!time_ok(WORKER, busy_field[c], s->union_ns[c], s->window_ns, err))
            return false;
    if (!parts_ok((owner){"the window", NULL, false, 0}, s->exposed_ns, s->idle_ns, s->window_ns, err))
        return false;
    if (!at_least("the hang step", s->hang_step, -1, err) ||
        !time_ok(WORKER, "the stall", s->stall_ns, PT_SUMMARY_MAX_NS, err))
        return false;
    if ((unsigned)s->stall_class >= PT_CLASS_COUNT)
        return REFUSE("the stall's class (%u) is not one perftracker knows", (unsigned)s->stall_class);
    return text_ok("the hang's stack", s->hang_stack, MAY_BE_ABSENT, err) &&
           text_ok("the stalled function", s->stall_function, MAY_BE_ABSENT, err);
}

static bool steps_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->step_count > PT_SUMMARY_MAX_STEPS)
        return REFUSE("%zu steps, more than the %u a summary may hold", s->step_count, PT_SUMMARY_MAX_STEPS);
    if (s->step_count && !s->steps)
        return REFUSE("%zu steps are counted but none is there", s->step_count);
    for (size_t i = 0; i < s->step_count; i++) {
        const pt_step_summary *st = &s->steps[i];
        if (st->step < 0)
            return REFUSE("step number %" PRId64 " is negative", st->step);
        if (st->dur_ns <= 0 || st->dur_ns > s->window_ns)
            return REFUSE("step %" PRId64 " lasts %" PRId64 " ns, outside 1 ns to the window's %" PRId64 " ns",
                          st->step, st->dur_ns, s->window_ns);
        if (st->start_ns < 0 || st->start_ns > s->window_ns - st->dur_ns)
            return REFUSE("step %" PRId64 " (from %" PRId64 " ns, %" PRId64 " ns long) is not inside the window of "
                          "%" PRId64 " ns", st->step, st->start_ns, st->dur_ns, s->window_ns);
        if (i > 0 && st->start_ns < s->steps[i - 1].start_ns)
            return REFUSE("step %" PRId64 " starts before step %" PRId64 ", which comes first", st->step,
                          s->steps[i - 1].step);
        if (!parts_ok((owner){"step", NULL, true, st->step}, st->exposed_ns, st->idle_ns, st->dur_ns, err))
            return false;
    }
    const pt_step_summary *twice = find_repeat(s->steps, s->step_count, sizeof *s->steps, cmp_step_number);
    return !twice || REFUSE("step %" PRId64 " appears twice", twice->step);
}

/* One piece of a step (before a sync point, or after the last): work by class, no
 * communication, each class and their sum within the piece. */
static bool work_ok(owner o, const int64_t busy[PT_CLASS_COUNT], int64_t length, pt_error *err)
{
    static const char *const work_field[PT_CLASS_COUNT] = {"compute work", "memory work", "communication work",
                                                           "runtime work", "python work"};
    char who[OWNER_TEXT_MAX];
    int64_t sum = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        if (!time_ok(o, work_field[c], busy[c], c == PT_CLASS_COMM ? 0 : length, err))
            return false;
        sum += busy[c];
    }
    return sum <= length + ROUNDING_SLACK_NS ||
           REFUSE_OWNED(o, "work adds up to %" PRId64 " ns, more than its %" PRId64 " ns", sum, length);
}

/* Sync points: only with per-step values, at most PT_SUMMARY_MAX_SYNCS_PER_STEP a step,
 * their ends inside the step and in time order; the work before each fits in the time
 * since the previous one. */
static bool syncs_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->has_syncs && s->step_count > PT_SUMMARY_MAX_STEP_VALUES)
        return REFUSE("sync points are given for %zu steps, more than the %d a summary gives them for", s->step_count,
                      PT_SUMMARY_MAX_STEP_VALUES);
    for (size_t i = 0; i < s->step_count; i++) {
        const pt_step_summary *st = &s->steps[i];
        owner step = {"step", NULL, true, st->step};
        char who[OWNER_TEXT_MAX];
        if (!s->has_syncs) {
            bool empty = st->sync_count == 0;
            for (int c = 0; c < PT_CLASS_COUNT; c++)
                empty &= st->tail_busy_ns[c] == 0;
            if (!empty)
                return REFUSE_OWNED(step, "sync points are given (%zu) but the summary has none", st->sync_count);
            continue;
        }
        if (st->sync_count > PT_SUMMARY_MAX_SYNCS_PER_STEP)
            return REFUSE_OWNED(step, "%zu sync points, more than %d", st->sync_count, PT_SUMMARY_MAX_SYNCS_PER_STEP);
        if (st->sync_count && !st->syncs)
            return REFUSE_OWNED(step, "%zu sync points are counted but none is there", st->sync_count);
        int64_t from = 0;
        for (size_t k = 0; k < st->sync_count; k++) {
            int64_t end = st->syncs[k].end_ns;
            if (end <= from || end > st->dur_ns)
                return REFUSE_OWNED(step, "sync point %zu ends at %" PRId64 " ns, not after %" PRId64
                                          " ns and within the step's %" PRId64 " ns", k, end, from, st->dur_ns);
            if (!work_ok(step, st->syncs[k].busy_ns, end - from, err))
                return false;
            from = end;
        }
        if (!work_ok(step, st->tail_busy_ns, st->dur_ns - from, err))
            return false;
    }
    return true;
}

/* A Python stack's time adds up over the threads that run it, so it may exceed the
 * window; every other class's is the union of its executions, never more. */
static int64_t exposed_bound(const pt_function_summary *f, int64_t whole)
{
    return f->cls == PT_CLASS_PYTHON ? PT_SUMMARY_MAX_NS : whole;
}

static bool function_ok(const pt_worker_summary *s, const pt_function_summary *f, pt_error *err)
{
    static const char *const kinds[PT_CLASS_COUNT] = {"the compute function", "the memory function",
                                                      "the communication function", "the runtime function",
                                                      "the python function"};
    if ((unsigned)f->cls >= PT_CLASS_COUNT)
        return REFUSE("a function's class (%u) is not one perftracker knows", (unsigned)f->cls);
    if (!text_ok("a function's name", f->name, PRESENT, err) ||
        !text_ok("a function's group", f->group, MAY_BE_ABSENT, err) ||
        !text_ok("a function's caller", f->caller, MAY_BE_ABSENT, err))
        return false;
    owner fn = {kinds[f->cls], f->name, false, 0};
    if (!count_ok(fn, "execution count", f->count, err) ||
        !time_ok(fn, "total time", f->total_ns, PT_SUMMARY_MAX_NS, err) ||
        !time_ok(fn, "exposed time", f->exposed_ns, exposed_bound(f, s->window_ns), err) ||
        !time_ok(fn, "waiting time", f->waiting_ns, PT_SUMMARY_MAX_NS, err) ||
        !time_ok(fn, "median", f->median_ns, PT_SUMMARY_MAX_NS, err) ||
        !time_ok(fn, "longest execution", f->max_ns, PT_SUMMARY_MAX_NS, err) ||
        !finite_ok(fn, "mean throughput", f->throughput_avg_pct, true, err) ||
        !finite_ok(fn, "throughput deviation", f->throughput_std_pct, true, err) ||
        !finite_ok(fn, "bus bandwidth", f->busbw_avg_gbps, true, err) ||
        !finite_ok(fn, "mean bytes per call", f->bytes_avg, true, err) ||
        !finite_ok(fn, "largest call's bytes", f->bytes_max, true, err))
        return false;
    char who[OWNER_TEXT_MAX];
    if (f->bytes_avg > f->bytes_max)
        return REFUSE_OWNED(fn, "its mean bytes per call (%g) are above its largest call's (%g)", f->bytes_avg,
                            f->bytes_max);
    if (f->step_count && (f->step_count != s->step_count || f->step_count > PT_SUMMARY_MAX_STEP_VALUES))
        return REFUSE_OWNED(fn, "per-step values are %zu for %zu steps (at most %d)", f->step_count, s->step_count,
                            PT_SUMMARY_MAX_STEP_VALUES);
    if (f->step_count && !f->step_exposed_ns)
        return REFUSE_OWNED(fn, "per-step values are counted (%zu) but none is there", f->step_count);
    for (size_t k = 0; k < f->step_count; k++)
        if (!time_ok(fn, "exposed time in a step", f->step_exposed_ns[k], exposed_bound(f, s->steps[k].dur_ns), err))
            return false;
    return true;
}

static bool functions_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->function_count > PT_SUMMARY_MAX_FUNCTIONS)
        return REFUSE("%zu functions, more than the %u a summary may hold", s->function_count,
                      PT_SUMMARY_MAX_FUNCTIONS);
    if (s->fn_store) /* moved there by the decoder once they had passed this check; never written since */
        return true;
    if (s->function_count && !s->functions)
        return REFUSE("%zu functions are counted but none is there", s->function_count);
    for (size_t i = 0; i < s->function_count; i++)
        if (!function_ok(s, &s->functions[i], err))
            return false;
    const pt_function_summary *twice =
        find_repeat(s->functions, s->function_count, sizeof *s->functions, cmp_function_key);
    char name[SHOWN_MAX + 4];
    return !twice ||
           REFUSE("the %s function \"%s\" appears twice", pt_class_name(twice->cls), shown(twice->name, name));
}

static bool metric_ok(const pt_metric_summary *m, pt_error *err)
{
    if (!text_ok("a metric's name", m->name, NON_EMPTY, err))
        return false;
    owner metric = {"metric", m->name, false, 0};
    char who[OWNER_TEXT_MAX];
    if (m->samples == 0)
        return REFUSE_OWNED(metric, "sample count is %d: it has no samples", 0);
    if (!count_ok(metric, "sample count", m->samples, err) || !finite_ok(metric, "mean", m->mean, false, err) ||
        !finite_ok(metric, "minimum", m->min, false, err) || !finite_ok(metric, "maximum", m->max, false, err))
        return false;
    /* The mean is a sum over samples divided by their count: rounding may put it a few
     * ulps outside [min, max], never more than this. */
    double slack = 1e-9 * fmax(fabs(m->min), fabs(m->max));
    if (m->min > m->max || m->mean < m->min - slack || m->mean > m->max + slack)
        return REFUSE_OWNED(metric, "mean %g is outside its minimum %g and maximum %g", m->mean, m->min, m->max);
    if (m->points > PT_SERIES_MAX_POINTS)
        return REFUSE_OWNED(metric, "series has %zu points, more than %d", m->points, PT_SERIES_MAX_POINTS);
    for (size_t k = 0; k < m->points; k++) {
        if (!finite_ok(metric, "series time", m->series_ms[k], true, err) ||
            !finite_ok(metric, "series value", m->series_value[k], false, err))
            return false;
        if (k > 0 && m->series_ms[k] < m->series_ms[k - 1])
            return REFUSE_OWNED(metric, "series goes back in time (%g ms after %g ms)", (double)m->series_ms[k],
                                (double)m->series_ms[k - 1]);
    }
    return true;
}

static bool metrics_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->metric_count > PT_SUMMARY_MAX_METRICS)
        return REFUSE("%zu metrics, more than the %d a summary may hold", s->metric_count, PT_SUMMARY_MAX_METRICS);
    if (s->metric_count && !s->metrics)
        return REFUSE("%zu metrics are counted but none is there", s->metric_count);
    for (size_t i = 0; i < s->metric_count; i++)
        if (!metric_ok(&s->metrics[i], err))
            return false;
    const pt_metric_summary *twice = find_repeat(s->metrics, s->metric_count, sizeof *s->metrics, cmp_metric_name);
    char name[SHOWN_MAX + 4];
    return !twice || REFUSE("metric \"%s\" appears twice", shown(twice->name, name));
}

static bool warnings_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->warning_count > PT_SUMMARY_MAX_WARNINGS)
        return REFUSE("%zu warnings, more than the %u a summary may hold", s->warning_count, PT_SUMMARY_MAX_WARNINGS);
    if (s->warning_count && !s->warnings)
        return REFUSE("%zu warnings are counted but none is there", s->warning_count);
    for (size_t i = 0; i < s->warning_count; i++)
        if (!text_ok("a warning", s->warnings[i], PRESENT, err))
            return false;
    return true;
}

/* ------------------------------------------------------------ the hang state */

static bool label_ok(const char *what, const char *text, text_rule rule, pt_error *err)
{
    if (!text_ok(what, text, rule, err))
        return false;
    return !text || strnlen(text, PT_SUMMARY_MAX_LABEL + 1) <= PT_SUMMARY_MAX_LABEL ||
           REFUSE("%s is longer than %u bytes", what, PT_SUMMARY_MAX_LABEL);
}

static bool threads_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->thread_count > PT_SUMMARY_MAX_THREADS)
        return REFUSE("%zu thread stacks, more than the %u a summary may hold", s->thread_count,
                      PT_SUMMARY_MAX_THREADS);
    if (s->thread_count && !s->threads)
        return REFUSE("%zu thread stacks are counted but none is there", s->thread_count);
    size_t training = 0;
    for (size_t i = 0; i < s->thread_count; i++) {
        const pt_thread_stack *t = &s->threads[i];
        if (!label_ok("a thread's name", t->name, PRESENT, err) || !text_ok("a thread's stack", t->stack, PRESENT, err))
            return false;
        if (t->ident < 0)
            return REFUSE("thread %zu's ident is %" PRId64 ", below 0", i, t->ident);
        training += t->training;
    }
    return training <= 1 || REFUSE("%zu threads are marked as the training thread (at most one is)", training);
}

static bool runs_ok(const pt_worker_summary *s, const pt_collective_group *g, pt_error *err)
{
    char name[SHOWN_MAX + 4];
    if (g->run_count > PT_SUMMARY_MAX_RUNS)
        return REFUSE("group \"%s\" lists %zu runs of ranks, more than %u", shown(g->name, name), g->run_count,
                      PT_SUMMARY_MAX_RUNS);
    if (g->run_count && !g->runs)
        return REFUSE("group \"%s\"'s runs of ranks are counted but not there", shown(g->name, name));
    int64_t after = -1;
    for (size_t k = 0; k < g->run_count; k++) {
        const pt_rank_run *r = &g->runs[k];
        if (r->first < 0 || r->last < r->first || r->last >= PT_MAX_WORLD_SIZE || r->stride < 1 ||
            ((int64_t)r->last - r->first) % r->stride != 0)
            return REFUSE("group \"%s\" has a run of ranks %" PRId32 "-%" PRId32 "/%" PRId32
                          " that is not first <= last < %d with last - first a multiple of stride >= 1",
                          shown(g->name, name), r->first, r->last, r->stride, PT_MAX_WORLD_SIZE);
        if (r->first <= after)
            return REFUSE("group \"%s\"'s ranks are not in increasing order (run %zu starts at %" PRId32 ")",
                          shown(g->name, name), k, r->first);
        if (s->world_size > 0 && r->last >= s->world_size)
            return REFUSE("group \"%s\" has rank %" PRId32 ", not below the world size %" PRId32,
                          shown(g->name, name), r->last, s->world_size);
        after = r->last;
    }
    if (!g->run_count)
        return true;
    int64_t members = pt_group_run_members(g);
    if (g->size >= 0 && members != g->size)
        return REFUSE("group \"%s\" says %" PRId32 " members but lists %" PRId64, shown(g->name, name), g->size,
                      members);
    return s->rank < 0 || pt_group_has_rank(g, s->rank) ||
           REFUSE("group \"%s\" does not list rank %" PRId32 ", whose calls in it the summary holds",
                  shown(g->name, name), s->rank);
}

static bool call_ok(const pt_collective_group *g, const pt_collective_call *c, int64_t after, pt_error *err)
{
    char name[SHOWN_MAX + 4];
    const char *gname = shown(g->name, name);
    if (c->seq < 1 || c->seq > PT_SUMMARY_MAX_SEQ)
        return REFUSE("group \"%s\" has a call numbered %" PRId64 ", outside 1 to 2^53", gname, c->seq);
    if (c->seq <= after)
        return REFUSE("group \"%s\"'s calls are not in increasing order of their numbers (%" PRId64 " after %" PRId64
                      ")", gname, c->seq, after);
    if (!label_ok("a collective's operation", c->op, NON_EMPTY, err) ||
        !label_ok("a collective's dtype", c->dtype, MAY_BE_ABSENT, err))
        return false;
    if (c->count < -1 || c->count > PT_SUMMARY_MAX_NS)
        return REFUSE("group \"%s\" call %" PRId64 " counts %" PRId64 " elements, outside -1 (unknown) to 2^60",
                      gname, c->seq, c->count);
    if (c->state < PT_CALL_ENTERED || c->state >= PT_CALL_STATE_COUNT)
        return REFUSE("group \"%s\" call %" PRId64 " has a state (%d) perftracker does not know", gname, c->seq,
                      (int)c->state);
    if (c->age_ns < -1 || c->age_ns > PT_SUMMARY_MAX_NS)
        return REFUSE("group \"%s\" call %" PRId64 " is %" PRId64 " ns old, outside -1 (unknown) to 2^60 ns", gname,
                      c->seq, c->age_ns);
    if (c->error && c->state != PT_CALL_FAILED)
        return REFUSE("group \"%s\" call %" PRId64 " has an error but did not fail", gname, c->seq);
    return !c->error || strnlen(c->error, PT_SUMMARY_MAX_ERROR + 1) <= PT_SUMMARY_MAX_ERROR ||
           REFUSE("group \"%s\" call %" PRId64 "'s error is longer than %u bytes", gname, c->seq,
                  PT_SUMMARY_MAX_ERROR);
}

static int cmp_group_name(const void *x, const void *y)
{
    const pt_collective_group *a = *(const pt_collective_group *const *)x, *b = *(const pt_collective_group *const *)y;
    return strcmp(a->name, b->name);
}

static bool groups_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->group_count > PT_SUMMARY_MAX_GROUPS)
        return REFUSE("%zu process groups, more than the %u a summary may hold", s->group_count, PT_SUMMARY_MAX_GROUPS);
    if (s->group_count && !s->groups)
        return REFUSE("%zu process groups are counted but none is there", s->group_count);
    for (size_t i = 0; i < s->group_count; i++) {
        const pt_collective_group *g = &s->groups[i];
        char name[SHOWN_MAX + 4];
        if (!label_ok("a process group's name", g->name, NON_EMPTY, err) ||
            !label_ok("a process group's backend", g->backend, MAY_BE_ABSENT, err))
            return false;
        if (g->size != -1 && (g->size < 1 || g->size > PT_MAX_WORLD_SIZE))
            return REFUSE("group \"%s\" has %" PRId32 " members, outside 1 to %d (or -1, unknown)",
                          shown(g->name, name), g->size, PT_MAX_WORLD_SIZE);
        if (!runs_ok(s, g, err))
            return false;
        if (g->call_count > PT_SUMMARY_MAX_CALLS)
            return REFUSE("group \"%s\" holds %zu calls, more than %u", shown(g->name, name), g->call_count,
                          PT_SUMMARY_MAX_CALLS);
        if (g->call_count && !g->calls)
            return REFUSE("group \"%s\"'s calls are counted but not there", shown(g->name, name));
        int64_t after = 0;
        for (size_t k = 0; k < g->call_count; k++) {
            if (!call_ok(g, &g->calls[k], after, err))
                return false;
            after = g->calls[k].seq;
        }
    }
    const pt_collective_group *twice = find_repeat(s->groups, s->group_count, sizeof *s->groups, cmp_group_name);
    char name[SHOWN_MAX + 4];
    return !twice || REFUSE("process group \"%s\" appears twice", shown(twice->name, name));
}

static bool hang_state_ok(const pt_worker_summary *s, pt_error *err)
{
    if (s->hang_idle_ns < -1 || s->hang_idle_ns > PT_SUMMARY_MAX_NS)
        return REFUSE("the time since the last step (%" PRId64 " ns) is outside -1 (unknown) to 2^60 ns",
                      s->hang_idle_ns);
    if (s->hang_step_ns < -1 || s->hang_step_ns > PT_SUMMARY_MAX_NS)
        return REFUSE("the mean step time at the hang report (%" PRId64 " ns) is outside -1 (unknown) to 2^60 ns",
                      s->hang_step_ns);
    return threads_ok(s, err) && groups_ok(s, err);
}

int pt_summary_check(const pt_worker_summary *s, pt_error *err)
{
    /* Steps before functions: a function's per-step values are checked against them. */
    bool ok = identity_ok(s, err) && window_ok(s, err) && steps_ok(s, err) && syncs_ok(s, err) && functions_ok(s, err) &&
              metrics_ok(s, err) && warnings_ok(s, err) && hang_state_ok(s, err);
    return ok ? 0 : -1;
}
