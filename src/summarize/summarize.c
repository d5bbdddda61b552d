/* summarize.c -- reduce one worker's events to its summary: the sink that keeps a compact
 * record per event, the pipeline that reduces them once the stream ends, and the entry
 * points (a file, or one big plain file read in parallel spans).
 *
 * Pipeline (reduce), once the reader has pushed every event; the file that holds each
 * stage opens with its design:
 *   0. gloo's collectives, when the trace does not name them (a raw trace: they run in C++
 *      on gloo's threads), are found from gloo's copies to pinned memory and back around
 *      them and become CPU annotations like Kineto's (summarize_window.c).
 *   1. Window: from the first ProfilerStep's start to the last one's end (the whole trace
 *      when no steps were marked; the first PT_SUMMARY_MAX_STEPS steps when there are
 *      more, with a warning). Everything is clipped to it (summarize_window.c).
 *   2. Timelines: one union of intervals per activity class, then layered by priority,
 *      H1 = compute, H2 = H1 ∪ memory, H3 = H2 ∪ communication, H4 = H3 ∪ runtime,
 *      H5 = H4 ∪ Python work. A class's exposed (bottleneck) time is |H_k| - |H_{k-1}|,
 *      and one interval's exposed time is its length minus its coverage by H_{k-1}, an
 *      O(log n) query (summarize_window.c, timeline.c).
 *   3. Python: per thread, CPU events sorted by (start, longer first, depth) rebuild the
 *      call tree with a stack. Each frame's exclusive segments are work, or waiting when
 *      the frame is a builtin or operator that handed its work to other threads (or an
 *      annotation); work minus its coverage by H4 accumulates on the frame's full call
 *      stack, interned as (parent stack, frame), and builds H5 (summarize_python.c).
 *   4. Per function: count, total, the median of its executions (counting sort by
 *      function, then quickselect per function: linear time), and exposed time from the
 *      union of its executions, in total and per step (summarize_functions.c).
 *   5. Only the functions that matter are kept (caps in summarize_functions.c), so the
 *      summary stays tens of kilobytes whatever the trace size.
 *   6. Sync points: per step, the collectives the worker was blocked in and the work
 *      before each, for the step model (summarize_sync.c).
 * Stages 3 and 4 both add to a function's accumulator (summarize_accounts.c). The
 * records and the reduction's state the stages share are in summarize_state.h. This
 * file adds the counters' series, what the worker did after its last step (a stall), and
 * who the worker is (its trace's metadata, or its file name).
 *
 * Memory is the compact records and each function's clipped executions: ~65 bytes per
 * kept event at peak, a fraction of the JSON. A caller's memory budget (pt_read_options)
 * bounds it: a worker that would need more is refused, not half-analysed (on_event). */
#include "summarize/summarize_state.h"
#include "summarize/classify.h"
#include "summarize/summary_io.h"
#include "util/buf.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A trace of 3 GB holds ~20 million events; a compression bomb of valid events holds as
 * many as it likes. Beyond the budget (PERFTRACKER_ANALYZE_MAX_EVENTS) events are counted, not
 * kept, so memory stays bounded (~60 bytes per kept event) and the summary covers the
 * trace's first part, with a warning saying so. */
#define DEFAULT_MAX_EVENTS 40000000ULL

/* Times a real trace can hold: starts from 36 years before its clock origin to the year
 * 2116 in Unix-epoch nanoseconds, durations under 36 years. Anything else comes from a
 * corrupt or hostile file; dropping it at the door keeps ts + dur and the difference of
 * any two times inside int64 (2^62 + 2^60 + 2^60 < 2^63). Sums of many clipped lengths
 * saturate instead (add_saturating). */
static inline bool time_in_range(const pt_event *ev)
{
    return ev->ts_ns > -(INT64_C(1) << 60) && ev->ts_ns < (INT64_C(1) << 62) && ev->dur_ns >= 0 &&
           ev->dur_ns < (INT64_C(1) << 60);
}

/* The memory budget. What the summarizer holds while reading is its records and its
 * interned names; finishing then needs about as much again (layers, per-function
 * executions, sorting), measured on the synthetic traces: 2.2 M mixed events peak at
 * ~70 bytes each for ~38 held. So a worker may hold half its budget while reading. Past
 * that, reading stops and the worker is refused (pt_summarize_file): half a worker
 * compared with its whole peers would mislead the diagnosis more than its absence. */
#define FINISH_FACTOR 2

static size_t held_bytes(const pt_summarizer *s)
{
    return s->records_bytes + s->names.bytes + s->kernel_keys.bytes + s->kernel_names.mangled.bytes;
}

/* ------------------------------------------------------------ the sink */

static void note_kernel_stream(pt_summarizer *s, int64_t stream)
{
    for (size_t i = 0; i < s->kernel_stream_count; i++)
        if (s->kernel_streams[i] == stream)
            return;
    if (s->kernel_stream_count < MAX_KERNEL_STREAMS)
        s->kernel_streams[s->kernel_stream_count++] = stream;
    else
        s->many_kernel_streams = true;
}

static int on_event(void *ctx, const pt_event *ev)
{
    pt_summarizer *s = ctx;
    s->events++;
    if (!time_in_range(ev)) {
        s->out_of_range++;
        return 0;
    }
    if (s->kept++ >= s->max_kept) {
        s->over_budget++;
        return 0;
    }
    if (s->memory_budget && held_bytes(s) > s->memory_budget / FINISH_FACTOR) {
        s->over_memory = true;
        return 1; /* stops the reader */
    }
    int64_t end = ev->ts_ns + ev->dur_ns;
    if (ev->kind != PT_EVENT_COUNTER && ev->kind != PT_EVENT_STEP)
        s->trace_end = PT_MAX(s->trace_end, end);
    if (PT_UNLIKELY(ev->coll.group != NULL))
        pt_coll_log_add(s->coll_log, ev);
    switch (ev->kind) {
    case PT_EVENT_GPU_KERNEL: {
        kernel_key k = {pt_demangler_intern(&s->kernel_names, &s->names, ev->name, ev->name_len),
                        {ev->grid[0], ev->grid[1], ev->grid[2]},
                        {ev->block[0], ev->block[1], ev->block[2]}};
        span_rec r = {ev->ts_ns, end, pt_strtab_intern(&s->kernel_keys, (const char *)&k, sizeof k), NO_ID};
        if (ev->coll.name || ev->coll.in_nelems > 0) {
            coll_rec c = {ev->coll.in_nelems, ev->coll.out_nelems, ev->coll.group_size, ev->coll.dtype_bytes,
                          ev->coll.name ? pt_strtab_intern(&s->names, ev->coll.name, ev->coll.name_len) : NO_ID};
            r.aux = (uint32_t)s->colls_count;
            PUSH(s, colls, c);
        }
        PUSH(s, kernels, r);
        note_kernel_stream(s, ev->tid);
        break;
    }
    case PT_EVENT_GPU_MEMCPY:
    case PT_EVENT_GPU_MEMSET: {
        span_rec r = {ev->ts_ns, end, pt_strtab_intern(&s->names, ev->name, ev->name_len), NO_ID};
        PUSH(s, memops, r);
        int direction = ev->kind == PT_EVENT_GPU_MEMCPY ? pt_pinned_copy_direction(ev->name, ev->name_len) : 0;
        if (PT_UNLIKELY(direction != 0)) {
            pinned_copy c = {ev->ts_ns, end, ev->tid, ev->bytes, direction > 0};
            PUSH(s, pinned, c);
        }
        break;
    }
    case PT_EVENT_RUNTIME: {
        runtime_rec r = {ev->ts_ns, end, ev->tid, pt_strtab_intern(&s->names, ev->name, ev->name_len)};
        PUSH(s, runtime, r);
        break;
    }
    case PT_EVENT_CPU: {
        cpu_rec r = {ev->ts_ns, end, ev->tid, pt_strtab_intern(&s->names, ev->name, ev->name_len),
                     (int16_t)PT_MAX(PT_MIN(ev->depth, INT16_MAX), -1), (uint8_t)ev->cpu_kind};
        PUSH(s, cpu, r);
        break;
    }
    case PT_EVENT_STEP: {
        step_rec r = {ev->ts_ns, end, ev->step};
        PUSH(s, steps, r);
        break;
    }
    case PT_EVENT_COUNTER: {
        counter_rec r = {ev->ts_ns, pt_strtab_intern(&s->names, ev->name, ev->name_len), ev->value};
        PUSH(s, counters, r);
        break;
    }
    case PT_EVENT_KIND_COUNT:
        break;
    }
    return 0;
}

static void on_warning(void *ctx, const char *message)
{
    pt_summarizer *s = ctx;
    char *copy = pt_xstrdup(message);
    PUSH(s, warnings, copy);
}

static void free_on_unwind(void *s)
{
    pt_summarizer_free(s);
}

pt_summarizer *pt_summarizer_new(void)
{
    pt_summarizer *s = pt_xcalloc(1, sizeof *s);
    pt_unwind_push(free_on_unwind, s); /* a worker out of memory mid-read releases it */
    const char *budget = getenv("PERFTRACKER_ANALYZE_MAX_EVENTS");
    s->max_kept = budget && atoll(budget) > 0 ? (uint64_t)atoll(budget) : DEFAULT_MAX_EVENTS;
    pt_strtab_init(&s->names);
    pt_strtab_init(&s->kernel_keys);
    pt_demangler_init(&s->kernel_names);
    s->coll_log = pt_coll_log_new();
    s->trace_end = INT64_MIN;
    return s;
}

pt_trace_sink pt_summarizer_sink(pt_summarizer *s)
{
    pt_trace_sink sink = {s, on_event, on_warning};
    return sink;
}

void pt_summarizer_free(pt_summarizer *s)
{
    if (!s)
        return;
    pt_unwind_pop(s);
    pt_strtab_free(&s->names);
    pt_strtab_free(&s->kernel_keys);
    pt_demangler_free(&s->kernel_names);
    pt_coll_log_free(s->coll_log);
    pt_free_strings(s->warnings, s->warnings_count);
    free(s->kernels);
    free(s->colls);
    free(s->memops);
    free(s->runtime);
    free(s->pinned);
    free(s->cpu);
    free(s->steps);
    free(s->counters);
    free(s);
}

/* ------------------------------------------------------------ counters */

static int cmp_counter(const void *a, const void *b)
{
    const counter_rec *x = a, *y = b;
    int order = pt_cmp_i64(x->metric, y->metric);
    return order ? order : pt_cmp_i64(x->ts, y->ts);
}

static void emit_metrics(reducer *r, pt_worker_summary *out)
{
    pt_summarizer *s = r->s;
    if (!s->counters_count)
        return;
    qsort(s->counters, s->counters_count, sizeof *s->counters, cmp_counter);
    double window_ms = (double)(r->w1 - r->w0) / 1e6;
    size_t dropped_metrics = 0;
    for (size_t i = 0; i < s->counters_count;) {
        size_t j = i;
        while (j < s->counters_count && s->counters[j].metric == s->counters[i].metric)
            j++;
        pt_metric_summary m = {0};
        double sum = 0, bucket_sum[PT_SERIES_MAX_POINTS] = {0};
        uint32_t bucket_n[PT_SERIES_MAX_POINTS] = {0};
        for (size_t k = i; k < j; k++) {
            const counter_rec *c = &s->counters[k];
            if (c->ts < r->w0 || c->ts > r->w1 || !isfinite(c->value))
                continue;
            m.min = m.samples ? fmin(m.min, c->value) : c->value;
            m.max = m.samples ? fmax(m.max, c->value) : c->value;
            m.samples++;
            sum += c->value;
            double t = (double)(c->ts - r->w0) / 1e6;
            size_t b = window_ms > 0 ? (size_t)(t / window_ms * PT_SERIES_MAX_POINTS) : 0;
            b = PT_MIN(b, (size_t)PT_SERIES_MAX_POINTS - 1);
            bucket_sum[b] += c->value;
            bucket_n[b]++;
        }
        if (m.samples && out->metric_count == PT_SUMMARY_MAX_METRICS) {
            dropped_metrics++;
        } else if (m.samples) {
            m.name = pt_xstrdup(pt_strtab_get(&s->names, s->counters[i].metric));
            m.mean = sum / (double)m.samples;
            for (size_t b = 0; b < PT_SERIES_MAX_POINTS; b++) {
                if (!bucket_n[b])
                    continue;
                m.series_ms[m.points] = (float)((b + 0.5) * window_ms / PT_SERIES_MAX_POINTS);
                m.series_value[m.points++] = (float)(bucket_sum[b] / bucket_n[b]);
            }
            out->metrics = pt_xrealloc(out->metrics, (out->metric_count + 1) * sizeof *out->metrics);
            out->metrics[out->metric_count++] = m;
        }
        i = j;
    }
    if (dropped_metrics)
        pt_summary_add_warning(out, "%zu counters beyond the first %d were not summarized", dropped_metrics,
                               PT_SUMMARY_MAX_METRICS);
}

/* ------------------------------------------------------------ file names */

static bool all_digits(const char *s, size_t n)
{
    if (n == 0 || n > 9)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int32_t rank_after_word(const char *name, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = name; *p; p++) {
        size_t k = 0;
        while (k < wl && p[k] && tolower((unsigned char)p[k]) == word[k])
            k++;
        if (k < wl)
            continue;
        const char *d = p + wl;
        if (*d == '-' || *d == '_')
            d++;
        if (*d < '0' || *d > '9')
            continue;
        long v = 0;
        while (*d >= '0' && *d <= '9' && v < 100000000)
            v = v * 10 + (*d++ - '0');
        return (int32_t)v;
    }
    return -1;
}

void pt_parse_worker_file_name(const char *file_name, pt_file_name_facts *facts)
{
    facts->host[0] = '\0';
    facts->local_rank = -1;
    facts->pid = -1;
    facts->rank = rank_after_word(file_name, "rank");
    if (facts->rank < 0)
        facts->rank = rank_after_word(file_name, "worker");
    /* "<host>_<local_rank>_<pid>" before the extensions (hosts may contain dots). */
    char stem[PT_NAME_MAX];
    snprintf(stem, sizeof stem, "%s", file_name);
    static const char *const extensions[] = {".gz", ".zst", ".json", ".trace", ".pt", ".ptrace", ".ptsum"};
    for (bool stripped = true; stripped;) {
        stripped = false;
        for (size_t i = 0; i < PT_ARRAY_LEN(extensions); i++) {
            size_t n = strlen(stem), m = strlen(extensions[i]);
            if (n > m && strcmp(stem + n - m, extensions[i]) == 0) {
                stem[n - m] = '\0';
                stripped = true;
            }
        }
    }
    char *last = strrchr(stem, '_');
    if (!last || !all_digits(last + 1, strlen(last + 1)))
        return;
    *last = '\0';
    char *mid = strrchr(stem, '_');
    if (!mid || !all_digits(mid + 1, strlen(mid + 1)) || mid == stem)
        return;
    *mid = '\0';
    facts->pid = atol(last + 1);
    facts->local_rank = atoi(mid + 1);
    snprintf(facts->host, sizeof facts->host, "%s", stem);
}

static void fill_identity(pt_worker_summary *out, const pt_trace_meta *meta, const char *file_name)
{
    pt_file_name_facts facts;
    pt_parse_worker_file_name(file_name, &facts);
    out->name = pt_xstrdup(file_name);
    out->host = pt_xstrdup(meta->host[0] ? meta->host : facts.host);
    out->local_rank = meta->local_rank >= 0 ? meta->local_rank : facts.local_rank;
    out->pid = meta->pid >= 0 ? meta->pid : facts.pid;
    out->world_size = meta->world_size <= PT_MAX_WORLD_SIZE ? meta->world_size : -1;
    if (meta->world_size > PT_MAX_WORLD_SIZE)
        pt_summary_add_warning(out, "world size %d ignored (more than the %d workers perftracker analyses)",
                               meta->world_size, PT_MAX_WORLD_SIZE);
    if (meta->rank >= PT_MAX_WORLD_SIZE || facts.rank >= PT_MAX_WORLD_SIZE)
        pt_summary_add_warning(out, "rank %d ignored (more than the %d workers perftracker analyses)",
                               meta->rank >= PT_MAX_WORLD_SIZE ? meta->rank : facts.rank, PT_MAX_WORLD_SIZE);
    if (meta->rank >= 0 && meta->rank < PT_MAX_WORLD_SIZE) {
        out->rank = meta->rank;
        out->rank_source = PT_RANK_FROM_TRACE;
    } else if (facts.rank >= 0 && facts.rank < PT_MAX_WORLD_SIZE) {
        out->rank = facts.rank;
        out->rank_source = PT_RANK_FROM_FILE_NAME;
        pt_summary_add_warning(out, "rank %d taken from the file name (the trace has no distributedInfo.rank)",
                               facts.rank);
    }
    out->device_name = pt_xstrdup(meta->device_name);
    out->device_count = meta->device_count;
    out->backend = pt_xstrdup(meta->backend);
    out->producer = pt_xstrdup(meta->producer);
    out->software = meta->software[0] ? pt_xstrdup(meta->software) : NULL;
    out->dropped_events = meta->dropped_events;
    out->hw_sample_period_us = meta->hw_sample_period_us;
    out->hang_step = meta->hang_step;
}

/* ------------------------------------------------------------ stalls */

typedef struct stall_probe {
    int64_t from, to;     /* [last step end, trace end) */
    int64_t best;
    pt_class cls;
    uint32_t name;        /* interned name, or a kernel key when is_kernel */
    bool is_kernel;
} stall_probe;

static void probe(stall_probe *p, int64_t start, int64_t end, pt_class cls, uint32_t name, bool is_kernel)
{
    int64_t overlap = PT_MIN(end, p->to) - PT_MAX(start, p->from);
    /* Prefer a collective on ties: being blocked in one is what a hang looks like. */
    if (overlap > p->best || (overlap == p->best && overlap > 0 && cls == PT_CLASS_COMM)) {
        p->best = overlap;
        p->cls = cls;
        p->name = name;
        p->is_kernel = is_kernel;
    }
}

/* What the worker was doing after its last complete step, when the trace goes on. */
static void find_stall(reducer *r, pt_worker_summary *out)
{
    pt_summarizer *s = r->s;
    if (!s->steps_count)
        return;
    stall_probe p = {r->w1, r->w1, 0, PT_CLASS_PYTHON, NO_ID, false};
    for (size_t i = 0; i < s->kernels_count; i++)
        p.to = PT_MAX(p.to, s->kernels[i].end);
    for (size_t i = 0; i < s->memops_count; i++)
        p.to = PT_MAX(p.to, s->memops[i].end);
    for (size_t i = 0; i < s->runtime_count; i++)
        p.to = PT_MAX(p.to, s->runtime[i].end);
    for (size_t i = 0; i < s->cpu_count; i++)
        p.to = PT_MAX(p.to, s->cpu[i].end);
    if (p.to <= p.from)
        return;
    for (size_t i = 0; i < s->kernels_count; i++) {
        const span_rec *k = &s->kernels[i];
        bool comm = sum_kernel_is_collective(r, k->key);
        probe(&p, k->start, k->end, comm ? PT_CLASS_COMM : PT_CLASS_COMPUTE, k->key, true);
    }
    for (size_t i = 0; i < s->memops_count; i++)
        probe(&p, s->memops[i].start, s->memops[i].end, PT_CLASS_MEMORY, s->memops[i].key, false);
    for (size_t i = 0; i < s->runtime_count; i++)
        probe(&p, s->runtime[i].start, s->runtime[i].end, PT_CLASS_RUNTIME, s->runtime[i].key, false);
    for (size_t i = 0; i < s->cpu_count; i++) {
        const cpu_rec *e = &s->cpu[i];
        pt_class c = sum_name_is_cpu_collective(r, e->name) ? PT_CLASS_COMM : PT_CLASS_PYTHON;
        probe(&p, e->start, e->end, c, sum_normalized_frame(r, e->name), false);
    }
    out->stall_ns = p.to - p.from;
    if (p.name == NO_ID)
        return;
    out->stall_class = p.cls;
    uint32_t name = p.is_kernel ? kernel_key_of(&s->kernel_keys, p.name).name : p.name;
    out->stall_function = pt_xstrdup(pt_strtab_get(&s->names, name));
}

/* ------------------------------------------------------------ finish */

/* Frees the reduction state; also what an allocation guard's unwind calls (common.h),
 * which is why the state lives on the heap. */
static void reducer_free(void *arg)
{
    reducer *r = arg;
    pt_unwind_pop(r);
    for (int c = 0; c <= PT_CLASS_COUNT; c++)
        pt_timeline_free(&r->layer[c]);
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        pt_timeline_free(&r->own[c]);
    pt_timeline_free(&r->gpu_comm);
    pt_timeline_free(&r->work_runtime);
    pt_timeline_free(&r->work);
    pt_strtab_free(&r->call_sites);
    free(r->call_site_ns);
    free(r->cpu_order);
    pt_strtab_free(&r->func_index);
    pt_strtab_free(&r->stacks);
    free(r->funcs);
    free(r->exec_func);
    free(r->exec_dur);
    free(r->stack_parent);
    free(r->stack_frame);
    free(r->normalized);
    free(r->cpu_comm);
    free(r->kernel_comm);
    free(r->step_exposed);
    free(r);
}

static void summary_free_on_unwind(void *out)
{
    pt_summary_free(out);
}

static void add_reading_warnings(const pt_summarizer *s, size_t steps_dropped, pt_worker_summary *out)
{
    for (size_t i = 0; i < s->warnings_count; i++)
        pt_summary_add_warning(out, "%s", s->warnings[i]);
    if (steps_dropped)
        pt_summary_add_warning(out, "the trace marks %zu steps; the first %u were analysed (ProfilerStep#%lld "
                                    "to #%lld, the window ends there) and the %zu after them were not",
                               (size_t)PT_SUMMARY_MAX_STEPS + steps_dropped, PT_SUMMARY_MAX_STEPS,
                               (long long)s->steps[0].step, (long long)s->steps[s->steps_count - 1].step,
                               steps_dropped);
    if (s->out_of_range)
        pt_summary_add_warning(out, "%llu events with impossible times (beyond 2116, or a duration over 36 years) were ignored",
                               (unsigned long long)s->out_of_range);
    if (s->over_budget)
        pt_summary_add_warning(out, "the trace holds more than %llu events; the %llu after them were counted but not "
                                    "analysed (PERFTRACKER_ANALYZE_MAX_EVENTS raises the budget)",
                               (unsigned long long)s->max_kept, (unsigned long long)s->over_budget);
    if (s->kernels_count + s->memops_count == 0)
        pt_summary_add_warning(out, "no GPU events: CPU-only analysis for this worker");
}
static void reduce(reducer *r, const pt_trace_meta *meta, bool window_cut, pt_worker_summary *out)
{
    pt_summarizer *s = r->s;
    sum_infer_gloo_collectives(s, meta);
    pt_strtab_init(&r->func_index);
    r->step_values = s->steps_count <= PT_SUMMARY_MAX_STEP_VALUES ? s->steps_count : 0;
    pt_strtab_init(&r->stacks);
    sum_cover_name(r, (uint32_t)s->names.count);

    for (size_t i = 0; i < s->kernels_count && !r->has_gpu_collectives; i++)
        r->has_gpu_collectives = sum_kernel_is_collective(r, s->kernels[i].key);
    sum_build_layers(r);
    sum_account_gpu_and_runtime(r);
    sum_account_cpu_collectives(r);
    sum_python_time(r);
    int64_t *medians = sum_compute_medians(r);
    free(r->exec_func), r->exec_func = NULL;
    free(r->exec_dur), r->exec_dur = NULL;
    sum_settle_functions(r);

    /* Event times are within time_in_range; an origin beyond 2116 is no clock and could
     * overflow the sum (a hostile trace's baseTimeNanoseconds or clock_origin_ns). */
    if (meta->clock_origin_ns > -(INT64_C(1) << 62) && meta->clock_origin_ns < (INT64_C(1) << 62)) {
        out->window_start_ns = meta->clock_origin_ns + r->w0;
    } else {
        out->window_start_ns = r->w0;
        pt_summary_add_warning(out, "clock origin %lld ns ignored (beyond the year 2116)",
                               (long long)meta->clock_origin_ns);
    }
    out->window_ns = r->w1 - r->w0;
    out->events = s->events;
    sum_fill_breakdown(r, r->w0, r->w1, out->exposed_ns, &out->idle_ns);
    memcpy(out->union_ns, r->own_total, sizeof out->union_ns);
    sum_emit_functions(r, out, medians);
    sum_emit_steps(r, out);
    sum_emit_sync_points(r, out);
    sum_merge_same_names(out);
    emit_metrics(r, out);
    if (!window_cut) { /* after a cut window the trace goes on because we stopped, not the worker */
        find_stall(r, out);
        pt_coll_log_finish(s->coll_log, s->trace_end, s->steps_count ? r->w1 : INT64_MIN, r->meta->backend, out);
    }
    free(medians);
}

pt_worker_summary *pt_summarizer_finish(pt_summarizer *s, const pt_trace_meta *meta, const char *file_name,
                                        pt_error *err)
{
    sum_dedupe_steps(s);
    size_t steps_dropped = sum_bound_steps(s);
    int64_t w0, w1;
    if (!sum_find_window(s, meta, &w0, &w1)) {
        pt_error_set(err, "the trace holds no timed events to analyse");
        return NULL;
    }
    reducer *r = pt_xcalloc(1, sizeof *r);
    pt_unwind_push(reducer_free, r);
    r->s = s, r->meta = meta, r->w0 = w0, r->w1 = w1;
    pt_worker_summary *out = pt_summary_new();
    pt_unwind_push(summary_free_on_unwind, out);
    fill_identity(out, meta, file_name);
    add_reading_warnings(s, steps_dropped, out);
    reduce(r, meta, steps_dropped > 0, out);
    pt_unwind_pop(out);
    reducer_free(r);
    return out;
}

/* ------------------------------------------------------------ parallel spans */

/* Appends src's records to dst, re-interning names: the result is what one summarizer
 * fed with dst's events and then src's would hold. */
static void merge_summarizer(pt_summarizer *dst, const pt_summarizer *src)
{
    uint32_t *name_map = pt_xmalloc((src->names.count ? src->names.count : 1) * sizeof *name_map);
    for (size_t i = 0; i < src->names.count; i++)
        name_map[i] = pt_strtab_intern(&dst->names, pt_strtab_get(&src->names, (uint32_t)i),
                                       pt_strtab_len(&src->names, (uint32_t)i));
    uint32_t *key_map = pt_xmalloc((src->kernel_keys.count ? src->kernel_keys.count : 1) * sizeof *key_map);
    for (size_t i = 0; i < src->kernel_keys.count; i++) {
        kernel_key k = kernel_key_of(&src->kernel_keys, (uint32_t)i);
        k.name = name_map[k.name];
        key_map[i] = pt_strtab_intern(&dst->kernel_keys, (const char *)&k, sizeof k);
    }
    size_t coll_base = dst->colls_count;
    for (size_t i = 0; i < src->colls_count; i++) {
        coll_rec c = src->colls[i];
        if (c.name != NO_ID)
            c.name = name_map[c.name];
        PUSH(dst, colls, c);
    }
    for (size_t i = 0; i < src->kernels_count; i++) {
        span_rec r = src->kernels[i];
        r.key = key_map[r.key];
        if (r.aux != NO_ID)
            r.aux += (uint32_t)coll_base;
        PUSH(dst, kernels, r);
    }
#define MERGE_NAMED(field, name_field)                 \
    for (size_t i = 0; i < src->field##_count; i++) {   \
        __typeof__(src->field[0]) r = src->field[i];    \
        r.name_field = name_map[r.name_field];           \
        PUSH(dst, field, r);                             \
    }
    MERGE_NAMED(memops, key)
    MERGE_NAMED(runtime, key)
    MERGE_NAMED(cpu, name)
    MERGE_NAMED(counters, metric)
#undef MERGE_NAMED
    for (size_t i = 0; i < src->steps_count; i++)
        PUSH(dst, steps, src->steps[i]);
    for (size_t i = 0; i < src->pinned_count; i++)
        PUSH(dst, pinned, src->pinned[i]);
    for (size_t i = 0; i < src->kernel_stream_count; i++)
        note_kernel_stream(dst, src->kernel_streams[i]);
    dst->many_kernel_streams |= src->many_kernel_streams;
    for (size_t i = 0; i < src->warnings_count; i++) {
        char *w = pt_xstrdup(src->warnings[i]);
        PUSH(dst, warnings, w);
    }
    pt_coll_log_merge(dst->coll_log, src->coll_log);
    dst->trace_end = PT_MAX(dst->trace_end, src->trace_end);
    dst->events += src->events;
    dst->out_of_range += src->out_of_range;
    dst->over_budget += src->over_budget;
    dst->kept += src->kept;
    free(name_map);
    free(key_map);
}

#define MAX_SPANS 16

typedef struct span_progress {
    const pt_read_options *user; /* the caller's callback */
    _Atomic uint64_t done[MAX_SPANS];
    size_t spans;
} span_progress;

typedef struct span_job {
    const char *path;
    uint64_t start, stop;
    bool bare_list;
    const pt_read_options *opts;
    pt_summarizer *summarizer;
    pt_trace_meta meta;
    uint64_t stopped_at;
    int rc;
    pt_error err;
    span_progress *progress;
    size_t index;
} span_job;

/* Each span reports its own file offset; the caller sees the bytes of all spans. */
static void on_span_progress(void *ctx, uint64_t offset, uint64_t total)
{
    span_job *j = ctx;
    span_progress *p = j->progress;
    atomic_store(&p->done[j->index], offset > j->start ? offset - j->start : 0);
    uint64_t sum = 0;
    for (size_t i = 0; i < p->spans; i++)
        sum += atomic_load(&p->done[i]);
    p->user->progress(p->user->progress_ctx, PT_MIN(sum, total), total);
}

static void read_span_body(void *arg)
{
    span_job *j = arg;
    pt_trace_sink sink = pt_summarizer_sink(j->summarizer);
    pt_trace_meta_init(&j->meta);
    pt_read_options opts = *j->opts;
    if (opts.progress)
        opts.progress = on_span_progress, opts.progress_ctx = j;
    j->rc = pt_kineto_read_span(j->path, j->start, j->stop, j->bare_list, &sink, &j->meta, &opts, &j->stopped_at,
                                &j->err);
}

/* A span that runs out of memory fails alone; the caller then reads the file whole. */
static void *read_span(void *arg)
{
    span_job *j = arg;
    if (!pt_run_guarded(read_span_body, j, NULL))
        j->rc = -1;
    return NULL;
}

/* Reads one big plain Kineto file in spans on several threads. NULL when the file does
 * not split, the spans disagree, or they could not all start or get memory: the caller
 * then reads it sequentially, which also produces the precise error message for a broken
 * file. The spans share the caller's memory budget. */
static pt_worker_summary *summarize_in_spans(const char *path, const pt_read_options *opts, pt_error *err)
{
    uint64_t starts[MAX_SPANS];
    bool bare_list;
    pt_error split_err = {{0}};
    size_t n = pt_kineto_split(path, (size_t)PT_MIN(opts->threads, MAX_SPANS), starts, &bare_list, &split_err);
    if (n < 2)
        return NULL;
    span_job jobs[MAX_SPANS];
    pthread_t tids[MAX_SPANS];
    span_progress progress = {.user = opts, .spans = n};
    size_t started = 0;
    for (size_t i = 0; i < n; i++) {
        jobs[i] = (span_job){.path = path, .start = starts[i], .stop = i + 1 < n ? starts[i + 1] : 0,
                             .bare_list = bare_list, .opts = opts, .summarizer = pt_summarizer_new(),
                             .progress = &progress, .index = i, .rc = -1};
        jobs[i].summarizer->memory_budget = opts->memory_budget / n;
        atomic_init(&progress.done[i], 0);
    }
    while (started < n && pthread_create(&tids[started], NULL, read_span, &jobs[started]) == 0)
        started++;
    bool agree = started == n;
    for (size_t i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        agree &= jobs[i].rc == 0 && (i + 1 == n || jobs[i].stopped_at == starts[i + 1]);
    }
    pt_worker_summary *out = NULL;
    if (agree) {
        for (size_t i = 1; i < n; i++) {
            merge_summarizer(jobs[0].summarizer, jobs[i].summarizer);
            pt_trace_meta_merge(&jobs[0].meta, &jobs[i].meta);
            pt_summarizer_free(jobs[i].summarizer); /* merged: its memory goes back now */
            jobs[i].summarizer = NULL;
        }
        jobs[0].summarizer->memory_budget = opts->memory_budget;
        out = pt_summarizer_finish(jobs[0].summarizer, &jobs[0].meta, pt_basename(path), err);
    }
    for (size_t i = n; i-- > 0;)
        pt_summarizer_free(jobs[i].summarizer);
    return out;
}

pt_worker_summary *pt_summarize_file(const char *path, const pt_read_options *opts, pt_error *err)
{
    if (opts && opts->threads > 1) {
        pt_worker_summary *out = summarize_in_spans(path, opts, err);
        if (out)
            return out;
    }
    pt_summarizer *s = pt_summarizer_new();
    s->memory_budget = opts ? opts->memory_budget : 0;
    pt_trace_sink sink = pt_summarizer_sink(s);
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_worker_summary *out = NULL;
    if (pt_trace_read(path, &sink, &meta, opts, err) == 0)
        out = pt_summarizer_finish(s, &meta, pt_basename(path), err);
    else if (s->over_memory)
        pt_error_set(err,
                     "needs more memory than its share (%zu MiB) after %llu events: refused rather than "
                     "half-analysed (a smaller -j gives each file a larger share)",
                     s->memory_budget >> 20, (unsigned long long)s->events);
    pt_summarizer_free(s);
    return out;
}

pt_worker_summary *pt_load_worker(const char *path, const pt_read_options *opts, pt_error *err)
{
    /* pt_input_open, not fopen: it refuses what is not a regular file (a FIFO would block
     * fopen forever) with the message the user then sees. */
    unsigned char head[16];
    pt_input *in = pt_input_open(path, err);
    if (!in)
        return NULL;
    ptrdiff_t n = pt_input_read(in, head, sizeof head, err);
    pt_input_close(in);
    if (n < 0)
        return NULL;
    if (pt_summary_sniff(head, (size_t)n))
        return pt_summary_read_file(path, err);
    return pt_summarize_file(path, opts, err);
}
