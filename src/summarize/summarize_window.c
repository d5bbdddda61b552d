/* summarize_window.c -- stages 0 to 2 of the pipeline (summarize.c): the records made
 * whole, the profiled window, and the activity classes' timelines.
 *
 * Stage 0 adds what a raw trace leaves out: gloo's collectives, found from the pinned
 * copies around them (sum_infer_gloo_collectives). Stage 1 keeps one record per step
 * and the first PT_SUMMARY_MAX_STEPS of them, and takes the window from the first step's
 * start to the last one's end (every event's span when no step was marked). Stage 2
 * classifies each record (a kernel is a collective or compute, once per kernel key; a
 * CPU call is communication when it is a collective and no GPU collective exists), clips
 * it to the window and builds one timeline per class, then the layers H1..H4 by priority
 * (H5, Python's work, comes from summarize_python.c). A span's exposed time per class is
 * read off the layers: O(log n) per class (sum_fill_breakdown, timeline.c). */
#include "summarize/summarize_state.h"
#include "summarize/classify.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ gloo's host-staged collectives */

/* gloo reduces CUDA tensors through pinned host memory: each tensor is copied to the host
 * on one of gloo's own streams (Memcpy DtoH, Device -> Pinned), one of gloo's threads waits
 * for the copy, runs the collective on the CPU over TCP, then copies the result back on
 * the same stream (Memcpy HtoD, Pinned -> Device, as many bytes). Kineto records the
 * middle as a "gloo:all_reduce" annotation; the collector's raw trace, which records no
 * C++ calls, has only the copies around it. So, on a gloo job whose trace names no gloo
 * call, each stretch from the end of such a copy to the host to the start of the copy
 * back, on a stream that runs no kernel, is taken for one collective: an annotation
 * "gloo:collective", communication as on Kineto's twin (issue 17.10). */
#define INFERRED_GLOO_NAME "gloo:collective"

static int cmp_pinned(const void *a, const void *b)
{
    const pinned_copy *x = a, *y = b;
    if (x->stream != y->stream)
        return (x->stream > y->stream) - (x->stream < y->stream);
    return (x->start > y->start) - (x->start < y->start);
}

/* Whether the trace records gloo's calls itself (Kineto's gloo:* annotations). */
static bool records_gloo_calls(const pt_summarizer *s)
{
    for (size_t i = 0; i < s->cpu_count; i++) {
        size_t len = pt_strtab_len(&s->names, s->cpu[i].name);
        if (len >= 5 && memcmp(pt_strtab_get(&s->names, s->cpu[i].name), "gloo:", 5) == 0)
            return true;
    }
    return false;
}

static bool stream_runs_kernels(const pt_summarizer *s, int64_t stream)
{
    if (s->many_kernel_streams)
        return true;
    for (size_t i = 0; i < s->kernel_stream_count; i++)
        if (s->kernel_streams[i] == stream)
            return true;
    return false;
}

void sum_infer_gloo_collectives(pt_summarizer *s, const pt_trace_meta *meta)
{
    if (strcmp(meta->backend, "gloo") != 0 || s->pinned_count < 2 || records_gloo_calls(s))
        return;
    qsort(s->pinned, s->pinned_count, sizeof *s->pinned, cmp_pinned);
    uint32_t name = pt_strtab_intern(&s->names, INFERRED_GLOO_NAME, strlen(INFERRED_GLOO_NAME));
    for (size_t i = 0; i + 1 < s->pinned_count; i++) {
        const pinned_copy *out = &s->pinned[i], *back = &s->pinned[i + 1];
        if (!out->to_host || back->to_host || back->stream != out->stream || back->bytes != out->bytes ||
            back->start <= out->end || stream_runs_kernels(s, out->stream))
            continue;
        /* Its own thread, apart from every real one: the stream's, negated (CPU ids are >= 0). */
        cpu_rec r = {out->end, back->start, -1 - out->stream, name, 0, (uint8_t)PT_CPU_ANNOTATION};
        PUSH(s, cpu, r);
        i++; /* the copy back is not the next collective's copy out */
    }
}

/* ------------------------------------------------------------ classes */

/* The per-name caches cover every name interned so far; reduction interns a few more. */
void sum_cover_name(reducer *r, uint32_t id)
{
    if (id < r->name_slots)
        return;
    size_t slots = (size_t)id * 2 + 1024;
    r->normalized = pt_xrealloc(r->normalized, slots * sizeof *r->normalized);
    memset(r->normalized + r->name_slots, 0xff, (slots - r->name_slots) * sizeof *r->normalized);
    r->cpu_comm = pt_xrealloc(r->cpu_comm, slots);
    memset(r->cpu_comm + r->name_slots, 0, slots - r->name_slots);
    r->name_slots = slots;
}

/* CPU-side collective calls count as communication only when no GPU collective kernel
 * exists: in NCCL jobs they merely enqueue the kernel (the kernel is the communication),
 * in gloo/CPU jobs they are the communication. */
bool sum_name_is_cpu_collective(reducer *r, uint32_t name)
{
    if (r->has_gpu_collectives)
        return false;
    sum_cover_name(r, name);
    if (!r->cpu_comm[name]) {
        const pt_strtab *names = &r->s->names;
        r->cpu_comm[name] = pt_cpu_is_collective(pt_strtab_get(names, name), pt_strtab_len(names, name)) ? 1 : 2;
    }
    return r->cpu_comm[name] == 1;
}

/* Classified once per distinct kernel key (the name test scans the whole name). */
bool sum_kernel_is_collective(reducer *r, uint32_t key)
{
    if (!r->kernel_comm) {
        size_t n = r->s->kernel_keys.count;
        r->kernel_comm = pt_xmalloc(n ? n : 1);
        const pt_strtab *names = &r->s->names;
        for (size_t id = 0; id < n; id++) {
            kernel_key k = kernel_key_of(&r->s->kernel_keys, (uint32_t)id);
            r->kernel_comm[id] = pt_kernel_is_collective(pt_strtab_get(names, k.name), pt_strtab_len(names, k.name));
        }
    }
    return r->kernel_comm[key];
}

/* ------------------------------------------------------------ window and layers */

static int cmp_step_start(const void *a, const void *b)
{
    const step_rec *x = a, *y = b;
    int c = pt_cmp_i64(x->start, y->start);
    return c ? c : pt_cmp_i64(x->step, y->step);
}

static int cmp_step_number(const void *a, const void *b)
{
    const step_rec *x = a, *y = b;
    int c = pt_cmp_i64(x->step, y->step);
    if (!c)
        c = pt_cmp_i64(x->start, y->start);
    return c ? c : pt_cmp_i64(x->end, y->end);
}

/* Keeps one record per step number (Kineto repeats ProfilerStep on some threads): its
 * earliest non-empty one, the steps then in time order. Two sorts, O(n log n): a 5.6 MB
 * gzip marks a million steps. */
void sum_dedupe_steps(pt_summarizer *s)
{
    if (!s->steps_count)
        return;
    qsort(s->steps, s->steps_count, sizeof *s->steps, cmp_step_number);
    size_t kept = 0;
    for (size_t i = 0; i < s->steps_count; i++) {
        const step_rec *r = &s->steps[i];
        if (r->end > r->start && (kept == 0 || s->steps[kept - 1].step != r->step))
            s->steps[kept++] = *r;
    }
    s->steps_count = kept;
    qsort(s->steps, s->steps_count, sizeof *s->steps, cmp_step_start);
}

/* Keeps the first PT_SUMMARY_MAX_STEPS steps, so the window ends with the last of them;
 * returns how many were dropped. The summary and the report carry a row per step. */
size_t sum_bound_steps(pt_summarizer *s)
{
    if (s->steps_count <= PT_SUMMARY_MAX_STEPS)
        return 0;
    size_t dropped = s->steps_count - PT_SUMMARY_MAX_STEPS;
    s->steps_count = PT_SUMMARY_MAX_STEPS;
    return dropped;
}

static void extend(int64_t *lo, int64_t *hi, int64_t start, int64_t end)
{
    if (start < *lo)
        *lo = start;
    if (end > *hi)
        *hi = end;
}

static void earliest_start_after(int64_t *best, int64_t after, int64_t start)
{
    if (start > after && start < *best)
        *best = start;
}

/* The collector opens its window inside step(), before its hooks are installed, so the
 * first step's first milliseconds hold nothing but the frames already open (stamped with
 * the step's start). The profiled time starts when recording did: at the first event
 * that begins inside that step. */
static void skip_unrecorded_start(pt_summarizer *s)
{
    step_rec *first = &s->steps[0];
    int64_t begin = first->end;
    for (size_t i = 0; i < s->kernels_count; i++)
        earliest_start_after(&begin, first->start, s->kernels[i].start);
    for (size_t i = 0; i < s->memops_count; i++)
        earliest_start_after(&begin, first->start, s->memops[i].start);
    for (size_t i = 0; i < s->runtime_count; i++)
        earliest_start_after(&begin, first->start, s->runtime[i].start);
    for (size_t i = 0; i < s->cpu_count; i++)
        earliest_start_after(&begin, first->start, s->cpu[i].start);
    if (begin < first->end)
        first->start = begin;
}

bool sum_find_window(pt_summarizer *s, const pt_trace_meta *meta, int64_t *w0, int64_t *w1)
{
    if (s->steps_count && strcmp(meta->producer, "perftracker") == 0)
        skip_unrecorded_start(s);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    if (s->steps_count) {
        for (size_t i = 0; i < s->steps_count; i++)
            extend(&lo, &hi, s->steps[i].start, s->steps[i].end);
    } else {
        for (size_t i = 0; i < s->kernels_count; i++)
            extend(&lo, &hi, s->kernels[i].start, s->kernels[i].end);
        for (size_t i = 0; i < s->memops_count; i++)
            extend(&lo, &hi, s->memops[i].start, s->memops[i].end);
        for (size_t i = 0; i < s->runtime_count; i++)
            extend(&lo, &hi, s->runtime[i].start, s->runtime[i].end);
        for (size_t i = 0; i < s->cpu_count; i++)
            extend(&lo, &hi, s->cpu[i].start, s->cpu[i].end);
    }
    *w0 = lo, *w1 = hi;
    return hi > lo;
}

/* ------------------------------------------------------------ timelines */

void sum_add_clipped(const reducer *r, interval_vec *v, int64_t a, int64_t b)
{
    if (!clip(r, &a, &b))
        return;
    PT_GROW(v->items, v->cap, v->count + 1);
    v->items[v->count].start = a;
    v->items[v->count++].end = b;
}

/* layer[c + 1] = layer[c] ∪ the class's own intervals, which the sync points need for
 * communication, runtime and Python (r->own). */
void sum_add_layer(reducer *r, pt_class c, const pt_interval *items, size_t count)
{
    pt_timeline own;
    pt_timeline_build(&own, items, count);
    r->own_total[c] = pt_timeline_total(&own);
    pt_timeline_union(&r->layer[c + 1], &r->layer[c], &own);
    if (c == PT_CLASS_COMPUTE || c == PT_CLASS_MEMORY)
        pt_timeline_free(&own);
    else
        r->own[c] = own;
}

/* The layers of every class but Python, whose work is known only once its call trees
 * tell work from waiting (account_python adds it). */
void sum_build_layers(reducer *r)
{
    pt_summarizer *s = r->s;
    interval_vec v[PT_CLASS_COUNT] = {{0}}, gpu_comm = {0};
    for (size_t i = 0; i < s->kernels_count; i++) {
        pt_class c = sum_kernel_is_collective(r, s->kernels[i].key) ? PT_CLASS_COMM : PT_CLASS_COMPUTE;
        sum_add_clipped(r, &v[c], s->kernels[i].start, s->kernels[i].end);
        if (c == PT_CLASS_COMM)
            sum_add_clipped(r, &gpu_comm, s->kernels[i].start, s->kernels[i].end);
    }
    pt_timeline_build(&r->gpu_comm, gpu_comm.items, gpu_comm.count);
    free(gpu_comm.items);
    for (size_t i = 0; i < s->memops_count; i++)
        sum_add_clipped(r, &v[PT_CLASS_MEMORY], s->memops[i].start, s->memops[i].end);
    for (size_t i = 0; i < s->runtime_count; i++)
        sum_add_clipped(r, &v[PT_CLASS_RUNTIME], s->runtime[i].start, s->runtime[i].end);
    for (size_t i = 0; i < s->cpu_count; i++)
        if (sum_name_is_cpu_collective(r, s->cpu[i].name))
            sum_add_clipped(r, &v[PT_CLASS_COMM], s->cpu[i].start, s->cpu[i].end);
    pt_timeline_build(&r->layer[0], NULL, 0);
    for (int c = 0; c < PT_CLASS_PYTHON; c++) {
        sum_add_layer(r, (pt_class)c, v[c].items, v[c].count);
        free(v[c].items);
    }
}

void sum_fill_breakdown(const reducer *r, int64_t a, int64_t b, int64_t exposed[PT_CLASS_COUNT], int64_t *idle)
{
    int64_t below = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        int64_t upto = pt_timeline_covered(&r->layer[c + 1], a, b);
        exposed[c] = upto - below;
        below = upto;
    }
    *idle = (b - a) - below;
}

void sum_emit_steps(reducer *r, pt_worker_summary *out)
{
    pt_summarizer *s = r->s;
    out->step_count = s->steps_count;
    out->steps = pt_xcalloc(s->steps_count ? s->steps_count : 1, sizeof *out->steps);
    for (size_t i = 0; i < s->steps_count; i++) {
        pt_step_summary *st = &out->steps[i];
        st->step = s->steps[i].step;
        st->start_ns = s->steps[i].start - r->w0;
        st->dur_ns = s->steps[i].end - s->steps[i].start;
        sum_fill_breakdown(r, s->steps[i].start, s->steps[i].end, st->exposed_ns, &st->idle_ns);
    }
}
