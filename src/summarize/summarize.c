/* summarize.c -- reduce one worker's events to its summary.
 *
 * Pipeline, once the reader has pushed every event:
 *   0. gloo's collectives, when the trace does not name them (a raw trace: they run in C++
 *      on gloo's threads), are found from gloo's copies to pinned memory and back around
 *      them (infer_gloo_collectives) and become CPU annotations like Kineto's.
 *   1. Window: from the first ProfilerStep's start to the last one's end (the whole trace
 *      when no steps were marked; the first PT_SUMMARY_MAX_STEPS steps when there are
 *      more, with a warning). Everything is clipped to it.
 *   2. Timelines: one union of intervals per activity class, then layered by priority,
 *      H1 = compute, H2 = H1 ∪ memory, H3 = H2 ∪ communication, H4 = H3 ∪ runtime,
 *      H5 = H4 ∪ Python work. A class's exposed (bottleneck) time is |H_k| - |H_{k-1}|,
 *      and one interval's exposed time is its length minus its coverage by H_{k-1}, an
 *      O(log n) query (timeline.c).
 *   3. Python: per thread, CPU events sorted by (start, longer first, depth) rebuild the
 *      call tree with a stack. Each frame's exclusive segments are work, or waiting when
 *      the frame is a builtin or operator that handed its work to other threads (or an
 *      annotation); work minus its coverage by H4 accumulates on the frame's full call
 *      stack, interned as (parent stack, frame), and builds H5.
 *   4. Per function: count, total, the median of its executions (counting sort by
 *      function, then quickselect per function: linear time), and exposed time from the
 *      union of its executions, in total and per step.
 *   5. Only the functions that matter are kept (caps below), so the summary stays tens of
 *      kilobytes whatever the trace size.
 *
 * Memory is the compact records and each function's clipped executions: ~65 bytes per
 * kept event at peak, a fraction of the JSON. A caller's memory budget (pt_read_options)
 * bounds it: a worker that would need more is refused, not half-analysed (on_event). */
#include "summarize/summarize.h"
#include "summarize/classify.h"
#include "summarize/collective_log.h"
#include "summarize/demangle.h"
#include "summarize/summary_io.h"
#include "summarize/timeline.h"
#include "util/buf.h"
#include "util/group.h"
#include "util/stats.h"
#include "util/strtab.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How many functions of each class a summary keeps, and the share of the window below
 * which a function is dropped once the first few are kept. */
#define KEEP_ALWAYS 20
#define KEEP_MIN_SHARE 1e-4
static const size_t keep_max[PT_CLASS_COUNT] = {100, 24, 48, 40, 150};
#define MAX_STACK_RENDER 16384
#define NO_ID UINT32_MAX

typedef struct span_rec {
    int64_t start, end;
    uint32_t key;   /* interned name (or kernel key) */
    uint32_t aux;   /* kernels: index into colls, or NO_ID */
} span_rec;

typedef struct cpu_rec {
    int64_t start, end;
    int64_t tid;
    uint32_t name;
    int16_t depth;  /* clamped: only its order matters */
    uint8_t kind;   /* pt_cpu_kind */
} cpu_rec;

/* Runtime calls keep their thread: a call on another thread is that thread being busy
 * (see the waiting test in account_python). */
typedef struct runtime_rec {
    int64_t start, end;
    int64_t tid;
    uint32_t key;
} runtime_rec;

typedef struct coll_rec {
    int64_t in_nelems, out_nelems;
    int32_t group_size, dtype_bytes;
    uint32_t name; /* interned collective name, NO_ID when absent */
} coll_rec;

typedef struct step_rec {
    int64_t start, end, step;
} step_rec;

/* A copy between device and pinned host memory, kept with its stream and size: gloo
 * stages its collectives through such copies (infer_gloo_collectives). */
typedef struct pinned_copy {
    int64_t start, end;
    int64_t stream;
    int64_t bytes;
    bool to_host;
} pinned_copy;

#define MAX_KERNEL_STREAMS 32

typedef struct counter_rec {
    int64_t ts;
    uint32_t metric;
    double value;
} counter_rec;

typedef struct kernel_key {
    uint32_t name;
    int32_t grid[3], block[3];
} kernel_key;

/* Interned keys are packed bytes (no alignment): copy them out before use. */
static kernel_key kernel_key_of(const pt_strtab *keys, uint32_t id)
{
    kernel_key k;
    memcpy(&k, pt_strtab_get(keys, id), sizeof k);
    return k;
}

#define DEFINE_VEC(type, field) \
    type *field;                \
    size_t field##_count, field##_cap

struct pt_summarizer {
    pt_strtab names;
    pt_strtab kernel_keys; /* binary kernel_key -> id */
    pt_demangler kernel_names; /* native traces' mangled kernel names -> Kineto's text */
    DEFINE_VEC(span_rec, kernels);
    DEFINE_VEC(coll_rec, colls);
    DEFINE_VEC(span_rec, memops);
    DEFINE_VEC(runtime_rec, runtime);
    DEFINE_VEC(cpu_rec, cpu);
    DEFINE_VEC(step_rec, steps);
    DEFINE_VEC(counter_rec, counters);
    DEFINE_VEC(pinned_copy, pinned);
    int64_t kernel_streams[MAX_KERNEL_STREAMS]; /* the streams that ran kernels */
    size_t kernel_stream_count;
    bool many_kernel_streams; /* more than MAX_KERNEL_STREAMS: every stream may run kernels */
    DEFINE_VEC(char *, warnings);
    pt_coll_log *coll_log;  /* collectives of named process groups, for the hang analysis */
    int64_t trace_end;      /* the latest end of any kept event */
    uint64_t events;
    uint64_t out_of_range; /* events dropped for impossible times (time_in_range) */
    uint64_t kept, max_kept, over_budget; /* the event budget (see on_event) */
    size_t records_bytes;  /* the record arrays' capacity, in bytes */
    size_t memory_budget;  /* 0: none; else what held_bytes may reach (see on_event) */
    bool over_memory;      /* reading stopped: the worker needs more than memory_budget */
};

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

static inline int64_t add_saturating(int64_t a, int64_t b)
{
    int64_t sum;
    if (__builtin_add_overflow(a, b, &sum))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return sum;
}

#define PUSH(s, field, value)                                                              \
    do {                                                                                   \
        size_t old_cap_ = (s)->field##_cap;                                                \
        PT_GROW((s)->field, (s)->field##_cap, (s)->field##_count + 1);                     \
        (s)->records_bytes += ((s)->field##_cap - old_cap_) * sizeof *(s)->field;          \
        (s)->field[(s)->field##_count++] = (value);                                        \
    } while (0)

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

/* ------------------------------------------------------------ reduction state */

/* One function being accumulated: (class, id) where id is a kernel key, a name or a
 * Python stack, depending on the class. */
typedef struct func_acc {
    pt_class cls;
    uint32_t id;
    uint64_t count;
    int64_t total_ns, exposed_ns, max_ns;
    int64_t waiting_ns;  /* Python: own time spent blocked (see account_python) */
    pt_interval *calls;  /* clipped executions in arrival order, settled at the end
                            (settle_functions); Python's work is accounted segment by
                            segment instead (account_work) */
    size_t call_count, call_cap;
    double tput_sum, tput_sq, busbw_sum;
    uint64_t tput_n;
    uint32_t group_name; /* communication: interned "link pattern" */
} func_acc;

typedef struct reducer {
    pt_summarizer *s;
    const pt_trace_meta *meta;
    int64_t w0, w1;
    pt_timeline layer[PT_CLASS_COUNT + 1]; /* layer[k] = H_k, layer[0] empty */
    pt_strtab func_index;                  /* binary {cls, id} -> index into funcs */
    func_acc *funcs;
    size_t funcs_count, funcs_cap;
    uint32_t *exec_func;                   /* one entry per execution, for medians */
    int64_t *exec_dur;
    size_t exec_count, exec_cap;
    pt_strtab stacks;                      /* binary {parent stack, frame} -> stack id */
    uint32_t *stack_parent, *stack_frame;
    size_t stack_cap;
    uint32_t *normalized;                  /* raw name id -> normalized frame name id */
    uint8_t *cpu_comm;                     /* raw name id -> 1 collective, 2 not, 0 unknown */
    size_t name_slots;                     /* entries in normalized[] and cpu_comm[] */
    int64_t own_total[PT_CLASS_COUNT];     /* |U_c|: each class's busy time, overlap included */
    /* For the sync points (emit_sync_points): the classes' own timelines where they are
     * kept (communication, runtime, Python work), GPU collectives alone, and work as the
     * step model counts it: H2 ∪ runtime not under a GPU collective (work_runtime), then
     * ∪ Python work (work). */
    pt_timeline own[PT_CLASS_COUNT];
    pt_timeline gpu_comm, work_runtime, work;
    /* Runtime calls' callers (attribute_runtime_calls): time per (API name, stack). */
    pt_strtab call_sites;                  /* binary {API name, stack} -> index */
    int64_t *call_site_ns;
    size_t call_site_cap;
    uint32_t *cpu_order;                   /* CPU events in (thread, start) order */
    bool has_gpu_collectives;
    uint8_t *kernel_comm;                  /* kernel key id -> is a collective */
    int64_t *step_exposed;                 /* [func * step_values + step] */
    size_t step_values;                    /* steps with per-function values, 0 if none */
} reducer;

/* The per-name caches cover every name interned so far; reduction interns a few more. */
static void cover_name(reducer *r, uint32_t id)
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

static bool clip(const reducer *r, int64_t *a, int64_t *b)
{
    if (*a < r->w0)
        *a = r->w0;
    if (*b > r->w1)
        *b = r->w1;
    return *b > *a;
}

static bool in_window(const reducer *r, int64_t start, int64_t end)
{
    if (end == start)
        return start >= r->w0 && start < r->w1;
    return start < r->w1 && end > r->w0;
}

static func_acc *func_get(reducer *r, pt_class cls, uint32_t id)
{
    uint32_t key[2] = {(uint32_t)cls, id};
    uint32_t index = pt_strtab_intern(&r->func_index, (const char *)key, sizeof key);
    if (index == r->funcs_count) {
        size_t old_cap = r->funcs_cap;
        PT_GROW(r->funcs, r->funcs_cap, r->funcs_count + 1);
        if (r->funcs_cap != old_cap && r->step_values) { /* one row of step values per function */
            r->step_exposed = pt_xrealloc(r->step_exposed, r->funcs_cap * r->step_values * sizeof *r->step_exposed);
            memset(r->step_exposed + old_cap * r->step_values, 0,
                   (r->funcs_cap - old_cap) * r->step_values * sizeof *r->step_exposed);
        }
        func_acc *f = &r->funcs[r->funcs_count++];
        memset(f, 0, sizeof *f);
        f->cls = cls;
        f->id = id;
        f->group_name = NO_ID;
    }
    return &r->funcs[index];
}

/* Exposed time is settled once every execution is known (settle_functions): the union of
 * a function's executions, not their sum, so calls running at once on several threads
 * count once. */
static void log_interval(func_acc *f, int64_t a, int64_t b)
{
    if (b <= a)
        return;
    PT_GROW(f->calls, f->call_cap, f->call_count + 1);
    f->calls[f->call_count++] = (pt_interval){a, b};
}

static int cmp_interval(const void *a, const void *b)
{
    const pt_interval *x = a, *y = b;
    return pt_cmp_i64(x->start, y->start);
}

/* Adds [a, b)'s exposed time to the steps it falls in. Steps are sorted and disjoint
 * (dedupe_steps), so the first is found by binary search. */
static void add_step_exposure(reducer *r, size_t func, const pt_timeline *above, int64_t a, int64_t b)
{
    const step_rec *steps = r->s->steps;
    size_t lo = 0, hi = r->step_values;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (steps[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < r->step_values && steps[k].start < b; k++) {
        int64_t x = PT_MAX(a, steps[k].start), y = PT_MIN(b, steps[k].end);
        if (y > x)
            r->step_exposed[func * r->step_values + k] += (y - x) - pt_timeline_covered(above, x, y);
    }
}

/* Accounts one execution of a span-like activity of class cls. */
static func_acc *account_span(reducer *r, pt_class cls, uint32_t id, int64_t start, int64_t end)
{
    if (!in_window(r, start, end))
        return NULL;
    func_acc *f = func_get(r, cls, id);
    int64_t a = start, b = end;
    int64_t len = clip(r, &a, &b) ? b - a : 0;
    f->count++;
    f->total_ns = add_saturating(f->total_ns, len);
    log_interval(f, a, b);
    if (end - start > f->max_ns)
        f->max_ns = end - start;
    if (r->exec_count == r->exec_cap) {
        PT_GROW(r->exec_func, r->exec_cap, r->exec_count + 1);
        r->exec_dur = pt_xrealloc(r->exec_dur, r->exec_cap * sizeof *r->exec_dur);
    }
    r->exec_func[r->exec_count] = (uint32_t)(f - r->funcs);
    r->exec_dur[r->exec_count++] = end - start;
    return f;
}

/* CPU-side collective calls count as communication only when no GPU collective kernel
 * exists: in NCCL jobs they merely enqueue the kernel (the kernel is the communication),
 * in gloo/CPU jobs they are the communication. */
static bool name_is_cpu_collective(reducer *r, uint32_t name)
{
    if (r->has_gpu_collectives)
        return false;
    cover_name(r, name);
    if (!r->cpu_comm[name]) {
        const pt_strtab *names = &r->s->names;
        r->cpu_comm[name] = pt_cpu_is_collective(pt_strtab_get(names, name), pt_strtab_len(names, name)) ? 1 : 2;
    }
    return r->cpu_comm[name] == 1;
}

/* Classified once per distinct kernel key (the name test scans the whole name). */
static bool kernel_is_collective(reducer *r, uint32_t key)
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
static void dedupe_steps(pt_summarizer *s)
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
static size_t bound_steps(pt_summarizer *s)
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

static bool find_window(pt_summarizer *s, const pt_trace_meta *meta, int64_t *w0, int64_t *w1)
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

typedef struct interval_vec {
    pt_interval *items;
    size_t count, cap;
} interval_vec;

static void add_clipped(const reducer *r, interval_vec *v, int64_t a, int64_t b)
{
    if (!clip(r, &a, &b))
        return;
    PT_GROW(v->items, v->cap, v->count + 1);
    v->items[v->count].start = a;
    v->items[v->count++].end = b;
}

/* layer[c + 1] = layer[c] ∪ the class's own intervals, which the sync points need for
 * communication, runtime and Python (r->own). */
static void add_layer(reducer *r, pt_class c, const pt_interval *items, size_t count)
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
static void build_layers(reducer *r)
{
    pt_summarizer *s = r->s;
    interval_vec v[PT_CLASS_COUNT] = {{0}}, gpu_comm = {0};
    for (size_t i = 0; i < s->kernels_count; i++) {
        pt_class c = kernel_is_collective(r, s->kernels[i].key) ? PT_CLASS_COMM : PT_CLASS_COMPUTE;
        add_clipped(r, &v[c], s->kernels[i].start, s->kernels[i].end);
        if (c == PT_CLASS_COMM)
            add_clipped(r, &gpu_comm, s->kernels[i].start, s->kernels[i].end);
    }
    pt_timeline_build(&r->gpu_comm, gpu_comm.items, gpu_comm.count);
    free(gpu_comm.items);
    for (size_t i = 0; i < s->memops_count; i++)
        add_clipped(r, &v[PT_CLASS_MEMORY], s->memops[i].start, s->memops[i].end);
    for (size_t i = 0; i < s->runtime_count; i++)
        add_clipped(r, &v[PT_CLASS_RUNTIME], s->runtime[i].start, s->runtime[i].end);
    for (size_t i = 0; i < s->cpu_count; i++)
        if (name_is_cpu_collective(r, s->cpu[i].name))
            add_clipped(r, &v[PT_CLASS_COMM], s->cpu[i].start, s->cpu[i].end);
    pt_timeline_build(&r->layer[0], NULL, 0);
    for (int c = 0; c < PT_CLASS_PYTHON; c++) {
        add_layer(r, (pt_class)c, v[c].items, v[c].count);
        free(v[c].items);
    }
}

static void fill_breakdown(const reducer *r, int64_t a, int64_t b, int64_t exposed[PT_CLASS_COUNT], int64_t *idle)
{
    int64_t below = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        int64_t upto = pt_timeline_covered(&r->layer[c + 1], a, b);
        exposed[c] = upto - below;
        below = upto;
    }
    *idle = (b - a) - below;
}

/* ------------------------------------------------------------ GPU, runtime, CPU comm */

static uint32_t comm_group_name(reducer *r, uint32_t kernel_name, const coll_rec *c)
{
    const pt_strtab *names = &r->s->names;
    const pt_trace_meta *m = r->meta;
    int group = c && c->group_size > 0 ? c->group_size : m->world_size;
    const char *link = pt_collective_link(m->device_name, m->device_count, group);
    const char *pattern = pt_collective_pattern(pt_strtab_get(names, kernel_name), pt_strtab_len(names, kernel_name));
    char buf[64];
    snprintf(buf, sizeof buf, "%s %s", link, pattern);
    return pt_strtab_intern(&r->s->names, buf, strlen(buf));
}

static void account_throughput(reducer *r, func_acc *f, const span_rec *k)
{
    const coll_rec *c = k->aux != NO_ID ? &r->s->colls[k->aux] : NULL;
    if (f->group_name == NO_ID)
        f->group_name = comm_group_name(r, f->id, c);
    if (!c || c->dtype_bytes <= 0 || k->end <= k->start || c->name == NO_ID)
        return;
    const pt_strtab *names = &r->s->names;
    bool use_out;
    int n = c->group_size > 0 ? c->group_size : 1;
    double factor = pt_busbw_factor(pt_strtab_get(names, c->name), pt_strtab_len(names, c->name), n, &use_out);
    double bytes = (double)(use_out ? c->out_nelems : c->in_nelems) * c->dtype_bytes;
    double busbw_gbps = bytes / (double)(k->end - k->start) * factor; /* bytes/ns == GB/s */
    const char *link = pt_collective_link(r->meta->device_name, r->meta->device_count, n);
    double pct = 100.0 * busbw_gbps / pt_link_peak_gbps(link, r->meta->device_name);
    f->tput_sum += pct;
    f->tput_sq += pct * pct;
    f->busbw_sum += busbw_gbps;
    f->tput_n++;
}

static void account_gpu_and_runtime(reducer *r)
{
    pt_summarizer *s = r->s;
    for (size_t i = 0; i < s->kernels_count; i++) {
        const span_rec *k = &s->kernels[i];
        if (!kernel_is_collective(r, k->key)) {
            account_span(r, PT_CLASS_COMPUTE, k->key, k->start, k->end);
            continue;
        }
        /* Collectives are keyed by kernel name alone, as the seed reports them. */
        func_acc *f = account_span(r, PT_CLASS_COMM, kernel_key_of(&s->kernel_keys, k->key).name, k->start, k->end);
        if (f)
            account_throughput(r, f, k);
    }
    for (size_t i = 0; i < s->memops_count; i++)
        account_span(r, PT_CLASS_MEMORY, s->memops[i].key, s->memops[i].start, s->memops[i].end);
    for (size_t i = 0; i < s->runtime_count; i++)
        account_span(r, PT_CLASS_RUNTIME, s->runtime[i].key, s->runtime[i].start, s->runtime[i].end);
}

/* ------------------------------------------------------------ Python call stacks */

static uint32_t normalized_frame(reducer *r, uint32_t raw)
{
    cover_name(r, raw);
    if (r->normalized[raw] == NO_ID) {
        pt_buf b = PT_BUF_INIT;
        pt_normalize_frame(&b, pt_strtab_get(&r->s->names, raw), pt_strtab_len(&r->s->names, raw));
        r->normalized[raw] = pt_strtab_intern(&r->s->names, pt_buf_cstr(&b), b.len);
        pt_buf_free(&b);
    }
    return r->normalized[raw];
}

static uint32_t stack_intern(reducer *r, uint32_t parent, uint32_t frame)
{
    uint32_t key[2] = {parent, frame};
    uint32_t id = pt_strtab_intern(&r->stacks, (const char *)key, sizeof key);
    if (id >= r->stack_cap) {
        PT_GROW(r->stack_parent, r->stack_cap, (size_t)id + 1);
        r->stack_frame = pt_xrealloc(r->stack_frame, r->stack_cap * sizeof *r->stack_frame);
    }
    r->stack_parent[id] = parent;
    r->stack_frame[id] = frame;
    return id;
}

/* Call-tree order within a thread: earlier start first; on equal starts the longer
 * (outer) event first, then the shallower. */
static bool cpu_before(const cpu_rec *a, const cpu_rec *b)
{
    if (a->start != b->start)
        return a->start < b->start;
    if (a->end != b->end)
        return a->end > b->end;
    return a->depth < b->depth;
}

/* Orders CPU events by (thread, start, longer first, depth). One radix sort on a
 * combined key (thread in the top bits, start below) does almost all the work; equal
 * starts, which are rare, are then put in order by insertion within their run. */
static void sort_cpu_events(pt_summarizer *s, uint32_t *order)
{
    size_t n = s->cpu_count;
    uint64_t *keys = pt_xmalloc((n ? n : 1) * sizeof *keys);
    int64_t min_start = INT64_MAX, max_start = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        min_start = PT_MIN(min_start, s->cpu[i].start);
        max_start = PT_MAX(max_start, s->cpu[i].start);
    }
    int start_bits = 1;
    while (start_bits < 63 && ((uint64_t)(max_start - min_start) >> start_bits) != 0)
        start_bits++;
    /* Threads: dense ids in order of first appearance. */
    pt_strtab tids;
    pt_strtab_init(&tids);
    uint32_t *thread = pt_xmalloc((n ? n : 1) * sizeof *thread);
    for (size_t i = 0; i < n; i++)
        thread[i] = pt_strtab_intern(&tids, (const char *)&s->cpu[i].tid, sizeof s->cpu[i].tid);
    int thread_bits = 1;
    while (thread_bits < 32 && (tids.count >> thread_bits) != 0)
        thread_bits++;
    pt_strtab_free(&tids);
    bool combined = start_bits + thread_bits <= 64;
    for (size_t i = 0; i < n; i++) {
        uint64_t start = (uint64_t)(s->cpu[i].start - min_start);
        keys[i] = combined ? (uint64_t)thread[i] << start_bits | start : start;
    }
    pt_radix_order(keys, n, order);
    if (!combined) { /* a window of centuries: thread as a second, more significant pass */
        for (size_t i = 0; i < n; i++)
            keys[i] = thread[i];
        pt_radix_reorder(keys, n, order);
    }
    for (size_t i = 1; i < n; i++) { /* insertion within runs of equal (thread, start) */
        uint32_t item = order[i];
        size_t j = i;
        while (j > 0 && thread[order[j - 1]] == thread[item] && s->cpu[order[j - 1]].start == s->cpu[item].start &&
               cpu_before(&s->cpu[item], &s->cpu[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = item;
    }
    free(thread);
    free(keys);
}

/* ------------------------------------------------------------ Python: work or waiting */

/* Calls on one thread less than this apart are one busy stretch: the thread runs
 * untraced native code between them (the autograd engine between two launches). */
#define BUSY_GAP_NS 100000
/* A frame that is not interpreter code is waiting when other threads' work, started and
 * finished inside it, covers at least this share of its own time. */
#define WAITING_SHARE 0.2

/* A stretch of time one thread was busy (its CPU events and runtime calls, gaps under
 * BUSY_GAP_NS closed). */
typedef struct envelope {
    int64_t start, end;
    int64_t tid;
} envelope;

typedef struct segment {
    int64_t start, end;
    uint32_t stack;
} segment;

typedef struct open_frame {
    int64_t start, end;
    int64_t segment_start; /* start of the exclusive segment now running */
    int64_t tid;
    size_t first_segment;  /* its exclusive segments are segments[first_segment..] */
    uint32_t stack;
    bool comm;             /* inside a collective: its time is communication, not Python */
    bool may_wait;         /* a C call or an operator: it can block */
    bool annotation;       /* a label around code: its own time is never Python work */
} open_frame;

typedef struct call_walk {
    open_frame *frames;
    size_t depth, frame_cap;
    segment *segments;
    size_t segment_count, segment_cap;
    envelope *envelopes;   /* sorted by start */
    size_t envelope_count;
    interval_vec busy;     /* this thread: its top-level frames, in time order */
    interval_vec waiting;  /* this thread: the exclusive segments that are waiting */
    interval_vec work;     /* every thread's busy time less its waiting: the Python layer */
} call_walk;

static int cmp_envelope(const void *a, const void *b)
{
    const envelope *x = a, *y = b;
    return pt_cmp_i64(x->start, y->start);
}

/* Busy stretches per thread, from CPU events and runtime calls in time order. */
static void build_envelopes(reducer *r, call_walk *w)
{
    pt_summarizer *s = r->s;
    size_t n = s->cpu_count + s->runtime_count;
    int64_t min_start = INT64_MAX;
    for (size_t i = 0; i < s->cpu_count; i++)
        min_start = PT_MIN(min_start, s->cpu[i].start);
    for (size_t i = 0; i < s->runtime_count; i++)
        min_start = PT_MIN(min_start, s->runtime[i].start);
    uint64_t *keys = pt_xmalloc((n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = (uint64_t)((i < s->cpu_count ? s->cpu[i].start : s->runtime[i - s->cpu_count].start) - min_start);
    uint32_t *order = pt_xmalloc((n ? n : 1) * sizeof *order);
    pt_radix_order(keys, n, order);
    free(keys);
    pt_strtab threads;
    pt_strtab_init(&threads);
    envelope *open = NULL; /* per dense thread id: the stretch being extended */
    size_t open_cap = 0, cap = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        int64_t tid = i < s->cpu_count ? s->cpu[i].tid : s->runtime[i - s->cpu_count].tid;
        int64_t a = i < s->cpu_count ? s->cpu[i].start : s->runtime[i - s->cpu_count].start;
        int64_t b = i < s->cpu_count ? s->cpu[i].end : s->runtime[i - s->cpu_count].end;
        uint32_t t = pt_strtab_intern(&threads, (const char *)&tid, sizeof tid);
        if (t >= open_cap) {
            size_t old = open_cap;
            PT_GROW(open, open_cap, (size_t)t + 1);
            for (size_t j = old; j < open_cap; j++)
                open[j] = (envelope){0, INT64_MIN, 0};
        }
        envelope *e = &open[t];
        if (e->end != INT64_MIN && a <= e->end + BUSY_GAP_NS) {
            e->end = PT_MAX(e->end, b);
            continue;
        }
        if (e->end != INT64_MIN) {
            PT_GROW(w->envelopes, cap, w->envelope_count + 1);
            w->envelopes[w->envelope_count++] = *e;
        }
        *e = (envelope){a, b, tid};
    }
    for (size_t t = 0; t < threads.count; t++) {
        PT_GROW(w->envelopes, cap, w->envelope_count + 1);
        w->envelopes[w->envelope_count++] = open[t];
    }
    qsort(w->envelopes, w->envelope_count, sizeof *w->envelopes, cmp_envelope);
    pt_strtab_free(&threads);
    free(open);
    free(order);
}

/* How much of a frame's exclusive time other threads spent working on stretches that
 * began and ended inside the frame: work it handed off and waited for (backward while
 * the autograd thread runs, a DDP call while gloo's threads reduce). A thread that was
 * busy before the frame began is not its doing. Capped at the exclusive time. */
static int64_t handed_off_ns(const call_walk *w, const open_frame *f, const segment *seg, size_t nseg, int64_t own)
{
    size_t lo = 0, hi = w->envelope_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->envelopes[mid].start < f->start)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t covered = 0;
    for (size_t i = lo; i < w->envelope_count && w->envelopes[i].start < f->end && covered < own; i++) {
        const envelope *x = &w->envelopes[i];
        if (x->end > f->end || x->tid == f->tid)
            continue;
        size_t a = 0, b = nseg; /* first segment ending after x starts */
        while (a < b) {
            size_t mid = (a + b) / 2;
            if (seg[mid].end <= x->start)
                a = mid + 1;
            else
                b = mid;
        }
        for (size_t k = a; k < nseg && seg[k].start < x->end; k++)
            covered += PT_MIN(seg[k].end, x->end) - PT_MAX(seg[k].start, x->start);
    }
    return PT_MIN(covered, own);
}

/* Interpreter code is work by definition; builtins ("<built-in method run_backward>",
 * "<method 'item' ...>") and operators may block. */
static bool may_wait(reducer *r, const cpu_rec *e)
{
    if (e->kind == PT_CPU_OPERATOR)
        return true;
    const char *name = pt_strtab_get(&r->s->names, e->name);
    size_t n = pt_strtab_len(&r->s->names, e->name);
    if (n >= 9 && (memcmp(name, "<built-in", 9) == 0 || memcmp(name, "<method ", 8) == 0))
        return true;
    if (e->kind == PT_CPU_PYTHON)
        return false;
    for (size_t i = 0; i + 4 <= n; i++) /* unknown producer: a "file.py..." frame is Python */
        if (name[i] == '.' && name[i + 1] == 'p' && name[i + 2] == 'y' && (name[i + 3] == '(' || name[i + 3] == ':'))
            return false;
    return true;
}

/* A frame's exclusive time from a to b. Inside a collective it is communication, neither
 * a stack's work nor the thread's: it joins the thread's waiting, so the Python layer
 * leaves it out (the layers hide it under communication anyway; the sync points' count
 * of work must not hold it). */
static void push_segment(reducer *r, call_walk *w, const open_frame *f, int64_t a, int64_t b)
{
    if (!clip(r, &a, &b))
        return;
    if (f->comm) {
        PT_GROW(w->waiting.items, w->waiting.cap, w->waiting.count + 1);
        w->waiting.items[w->waiting.count++] = (pt_interval){a, b};
        return;
    }
    PT_GROW(w->segments, w->segment_cap, w->segment_count + 1);
    w->segments[w->segment_count++] = (segment){a, b, f->stack};
}

/* One exclusive segment of work: a Python stack's exposed time is the part no higher
 * class covers. Accounted at once: a frame's segments never overlap one another on its
 * thread, and a stack is per thread in practice (its root frame names the thread's
 * entry point). */
static void account_work(reducer *r, func_acc *acc, int64_t a, int64_t b)
{
    const pt_timeline *above = &r->layer[PT_CLASS_PYTHON];
    acc->total_ns = add_saturating(acc->total_ns, b - a);
    acc->exposed_ns = add_saturating(acc->exposed_ns, (b - a) - pt_timeline_covered(above, a, b));
    if (r->step_values)
        add_step_exposure(r, (size_t)(acc - r->funcs), above, a, b);
}

/* A thread's work is its busy time (its top-level frames) less its waiting segments:
 * added to the Python layer when the walk leaves the thread. */
static void finish_thread(call_walk *w)
{
    interval_vec *busy = &w->busy, *wait = &w->waiting;
    if (wait->count) /* never qsort(NULL, 0): UB */
        qsort(wait->items, wait->count, sizeof *wait->items, cmp_interval);
    size_t k = 0;
    for (size_t i = 0; i < busy->count; i++) {
        int64_t a = busy->items[i].start, b = busy->items[i].end;
        for (; k < wait->count && wait->items[k].start < b; k++) {
            if (wait->items[k].end <= a)
                continue;
            if (wait->items[k].start > a) {
                PT_GROW(w->work.items, w->work.cap, w->work.count + 1);
                w->work.items[w->work.count++] = (pt_interval){a, wait->items[k].start};
            }
            a = PT_MAX(a, wait->items[k].end);
        }
        if (b > a) {
            PT_GROW(w->work.items, w->work.cap, w->work.count + 1);
            w->work.items[w->work.count++] = (pt_interval){a, b};
        }
    }
    busy->count = wait->count = 0;
}

/* A closing frame's exclusive segments become its stack's work, or its waiting. */
static void settle_frame(reducer *r, call_walk *w, const open_frame *f)
{
    size_t nseg = w->segment_count - f->first_segment;
    const segment *seg = nseg ? w->segments + f->first_segment : NULL;
    int64_t own = 0;
    for (size_t k = 0; k < nseg; k++)
        own += seg[k].end - seg[k].start;
    /* An annotation ("## backward ##", record_function ranges) wraps code; time in it
     * outside every traced call is the wait for what it wraps, or untraced. */
    bool waiting = f->annotation ||
                   (f->may_wait && own > 0 && (double)handed_off_ns(w, f, seg, nseg, own) >= WAITING_SHARE * (double)own);
    if (nseg) {
        func_acc *acc = func_get(r, PT_CLASS_PYTHON, f->stack);
        for (size_t k = 0; k < nseg; k++) {
            if (waiting) {
                acc->waiting_ns = add_saturating(acc->waiting_ns, seg[k].end - seg[k].start);
                PT_GROW(w->waiting.items, w->waiting.cap, w->waiting.count + 1);
                w->waiting.items[w->waiting.count++] = (pt_interval){seg[k].start, seg[k].end};
            } else {
                account_work(r, acc, seg[k].start, seg[k].end);
            }
        }
    }
    w->segment_count = f->first_segment;
}

static void close_frame(reducer *r, call_walk *w)
{
    open_frame *top = &w->frames[--w->depth];
    push_segment(r, w, top, top->segment_start, top->end);
    settle_frame(r, w, top);
    if (w->depth)
        w->frames[w->depth - 1].segment_start = top->end;
}

static void free_call_walk(call_walk *w)
{
    free(w->frames);
    free(w->segments);
    free(w->envelopes);
    free(w->busy.items);
    free(w->waiting.items);
    free(w->work.items);
}

/* Rebuilds every thread's call tree and splits each frame's exclusive time into work
 * (the Python layer, exposed where no higher class covers it) and waiting. */
static uint32_t *account_python(reducer *r, call_walk *w)
{
    pt_summarizer *s = r->s;
    size_t n = s->cpu_count;
    if (!n)
        return NULL;
    build_envelopes(r, w);
    uint32_t *order = pt_xmalloc(n * sizeof *order);
    sort_cpu_events(s, order);
    for (size_t k = 0; k < n; k++) {
        const cpu_rec *e = &s->cpu[order[k]];
        if (w->depth && e->tid != w->frames[0].tid) {
            while (w->depth)
                close_frame(r, w);
            finish_thread(w);
        }
        while (w->depth && w->frames[w->depth - 1].end <= e->start)
            close_frame(r, w);
        int64_t end = e->end;
        uint32_t parent = NO_ID;
        bool comm = name_is_cpu_collective(r, e->name);
        if (w->depth) {
            open_frame *top = &w->frames[w->depth - 1];
            push_segment(r, w, top, top->segment_start, e->start);
            end = PT_MIN(end, top->end); /* a child cannot outlive its parent */
            parent = top->stack;
            comm |= top->comm;
        } else {
            add_clipped(r, &w->busy, e->start, end);
        }
        uint32_t id = stack_intern(r, parent, normalized_frame(r, e->name));
        if (in_window(r, e->start, end)) {
            func_acc *f = func_get(r, PT_CLASS_PYTHON, id);
            f->count++;
            f->max_ns = PT_MAX(f->max_ns, end - e->start);
        }
        PT_GROW(w->frames, w->frame_cap, w->depth + 1);
        w->frames[w->depth++] = (open_frame){e->start,      end,  e->start,        e->tid,
                                             w->segment_count, id, comm, may_wait(r, e),
                                             e->kind == PT_CPU_ANNOTATION};
    }
    while (w->depth)
        close_frame(r, w);
    finish_thread(w);
    return order; /* CPU events in (thread, start) order, for attribute_runtime_calls */
}

/* ------------------------------------------------------------ runtime calls' callers */

typedef struct call_ref {
    int64_t tid, start;
    uint32_t index;
} call_ref;

static int cmp_call_ref(const void *a, const void *b)
{
    const call_ref *x = a, *y = b;
    int order = pt_cmp_i64(x->tid, y->tid);
    if (!order)
        order = pt_cmp_i64(x->start, y->start);
    return order ? order : pt_cmp_i64(x->index, y->index);
}

static void attribute_call(reducer *r, const runtime_rec *c, uint32_t stack)
{
    int64_t a = c->start, b = c->end;
    if (!clip(r, &a, &b))
        return;
    uint32_t key[2] = {c->key, stack};
    uint32_t at = pt_strtab_intern(&r->call_sites, (const char *)key, sizeof key);
    if (at >= r->call_site_cap) {
        size_t old = r->call_site_cap;
        PT_GROW(r->call_site_ns, r->call_site_cap, (size_t)at + 1);
        memset(r->call_site_ns + old, 0, (r->call_site_cap - old) * sizeof *r->call_site_ns);
    }
    r->call_site_ns[at] = add_saturating(r->call_site_ns[at], b - a);
}

/* The Python stack each runtime call ran under: per thread, its CPU events (in call-tree
 * order) and its runtime calls (in time order) are swept together, so a call is inside
 * the innermost frame open when it starts. What a cudaFree is for is the frame that
 * called it (torch.cuda.empty_cache), which the summary names (caller). */
static void attribute_runtime_calls(reducer *r, const uint32_t *cpu_order)
{
    pt_summarizer *s = r->s;
    if (!s->runtime_count || !cpu_order)
        return;
    call_ref *refs = pt_xmalloc(s->runtime_count * sizeof *refs);
    for (size_t i = 0; i < s->runtime_count; i++)
        refs[i] = (call_ref){s->runtime[i].tid, s->runtime[i].start, (uint32_t)i};
    qsort(refs, s->runtime_count, sizeof *refs, cmp_call_ref);
    uint32_t *calls = pt_xmalloc(s->runtime_count * sizeof *calls);
    for (size_t i = 0; i < s->runtime_count; i++)
        calls[i] = refs[i].index;
    free(refs);
    typedef struct open {
        int64_t end;
        uint32_t stack;
    } open;
    open *frames = NULL;
    size_t cap = 0;
    for (size_t k = 0; k < s->cpu_count;) {
        int64_t tid = s->cpu[cpu_order[k]].tid;
        size_t lo = 0, hi = s->runtime_count; /* this thread's first call */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s->runtime[calls[mid]].tid < tid)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t depth = 0, c = lo;
        for (; k < s->cpu_count && s->cpu[cpu_order[k]].tid == tid; k++) {
            const cpu_rec *e = &s->cpu[cpu_order[k]];
            for (; c < s->runtime_count && s->runtime[calls[c]].tid == tid && s->runtime[calls[c]].start < e->start; c++) {
                while (depth && frames[depth - 1].end <= s->runtime[calls[c]].start)
                    depth--;
                if (depth)
                    attribute_call(r, &s->runtime[calls[c]], frames[depth - 1].stack);
            }
            while (depth && frames[depth - 1].end <= e->start)
                depth--;
            uint32_t parent = depth ? frames[depth - 1].stack : NO_ID;
            int64_t end = depth ? PT_MIN(e->end, frames[depth - 1].end) : e->end;
            PT_GROW(frames, cap, depth + 1);
            frames[depth++] = (open){end, stack_intern(r, parent, normalized_frame(r, e->name))};
        }
        for (; c < s->runtime_count && s->runtime[calls[c]].tid == tid; c++) {
            while (depth && frames[depth - 1].end <= s->runtime[calls[c]].start)
                depth--;
            if (depth)
                attribute_call(r, &s->runtime[calls[c]], frames[depth - 1].stack);
        }
    }
    free(frames);
    free(calls);
}

/* The stack a runtime API spent most time under, or NO_ID. */
static uint32_t main_caller(const reducer *r, uint32_t api)
{
    uint32_t best = NO_ID;
    int64_t best_ns = 0;
    for (uint32_t i = 0; i < r->call_sites.count; i++) {
        uint32_t key[2];
        memcpy(key, pt_strtab_get(&r->call_sites, i), sizeof key);
        if (key[0] == api && r->call_site_ns[i] > best_ns)
            best_ns = r->call_site_ns[i], best = key[1];
    }
    return best;
}

/* CPU-side collectives (gloo jobs) are communication functions in their own right. */
static void account_cpu_collectives(reducer *r)
{
    pt_summarizer *s = r->s;
    char group[64];
    snprintf(group, sizeof group, "cpu %s", r->meta->backend[0] ? r->meta->backend : "collective");
    uint32_t group_id = pt_strtab_intern(&s->names, group, strlen(group));
    for (size_t i = 0; i < s->cpu_count; i++) {
        const cpu_rec *e = &s->cpu[i];
        if (!name_is_cpu_collective(r, e->name))
            continue;
        func_acc *f = account_span(r, PT_CLASS_COMM, normalized_frame(r, e->name), e->start, e->end);
        if (f)
            f->group_name = group_id;
    }
}

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

static void infer_gloo_collectives(pt_summarizer *s, const pt_trace_meta *meta)
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

/* ------------------------------------------------------------ medians */

static int64_t *compute_medians(reducer *r)
{
    size_t nf = r->funcs_count;
    int64_t *grouped = pt_xmalloc((r->exec_count ? r->exec_count : 1) * sizeof *grouped);
    size_t *offset = pt_group_by_key(r->exec_func, r->exec_count, nf, r->exec_dur, sizeof *r->exec_dur, grouped);
    int64_t *medians = pt_xcalloc(nf ? nf : 1, sizeof *medians);
    for (size_t f = 0; f < nf; f++)
        medians[f] = pt_median_i64(grouped + offset[f], offset[f + 1] - offset[f]);
    free(grouped);
    free(offset);
    return medians;
}

/* ------------------------------------------------------------ exposed time */

/* Per function: the union of its executions, its exposed part (not covered by a higher
 * class), and that per step. Each function's executions arrive in nearly always time
 * order and are sorted only when they are not; they are freed as soon as they are
 * settled. CPU-side functions report the union as their total (a call on two threads at
 * once is busy once); GPU kernels keep the summed duration, the seed's per-kernel
 * execution time. */
static void settle_functions(reducer *r)
{
    size_t nf = r->funcs_count;
    for (size_t f = 0; f < nf; f++) {
        func_acc *acc = &r->funcs[f];
        if (acc->cls == PT_CLASS_PYTHON) { /* accounted segment by segment (account_work) */
            acc->total_ns = add_saturating(acc->total_ns, acc->waiting_ns);
            continue;
        }
        pt_interval *g = acc->calls;
        size_t k = acc->call_count;
        bool sorted = true;
        for (size_t i = 1; i < k && sorted; i++)
            sorted = g[i - 1].start <= g[i].start;
        if (!sorted)
            qsort(g, k, sizeof *g, cmp_interval);
        const pt_timeline *above = &r->layer[acc->cls];
        int64_t busy = 0, exposed = 0;
        for (size_t i = 0; i < k;) {
            int64_t a = g[i].start, b = g[i].end;
            for (i++; i < k && g[i].start <= b; i++)
                b = PT_MAX(b, g[i].end);
            busy = add_saturating(busy, b - a);
            exposed = add_saturating(exposed, (b - a) - pt_timeline_covered(above, a, b));
            if (r->step_values)
                add_step_exposure(r, f, above, a, b);
        }
        free(acc->calls);
        acc->calls = NULL;
        acc->exposed_ns = exposed;
        if (acc->cls != PT_CLASS_COMPUTE && acc->cls != PT_CLASS_MEMORY)
            acc->total_ns = busy;
    }
}

/* ------------------------------------------------------------ output */

static void render_stack(const reducer *r, uint32_t stack, pt_buf *out)
{
    uint32_t frames[256];
    size_t depth = 0, total = 0;
    for (uint32_t at = stack; at != NO_ID; at = r->stack_parent[at]) {
        if (depth < PT_ARRAY_LEN(frames))
            frames[depth++] = r->stack_frame[at];
        total++;
    }
    /* Outermost first. A stack deeper than 256 frames keeps its innermost 256. */
    if (total > depth)
        pt_buf_puts(out, "...|");
    for (size_t i = depth; i-- > 0;) {
        pt_buf_append(out, pt_strtab_get(&r->s->names, frames[i]), pt_strtab_len(&r->s->names, frames[i]));
        if (i)
            pt_buf_putc(out, '|');
        if (out->len > MAX_STACK_RENDER)
            break;
    }
}

/* Compute kernels are keyed by kernel key (name + grid + block, the seed's
 * "name320_1_1|512_1_1"), Python by call stack, everything else by name. */
static void render_function_name(const reducer *r, const func_acc *f, pt_buf *out)
{
    const pt_strtab *names = &r->s->names;
    if (f->cls == PT_CLASS_PYTHON) {
        render_stack(r, f->id, out);
    } else if (f->cls == PT_CLASS_COMPUTE) {
        kernel_key k = kernel_key_of(&r->s->kernel_keys, f->id);
        pt_buf_append(out, pt_strtab_get(names, k.name), pt_strtab_len(names, k.name));
        if (k.grid[0] > 0)
            pt_buf_printf(out, "%d_%d_%d|%d_%d_%d", k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                          k.block[2]);
    } else {
        pt_buf_append(out, pt_strtab_get(names, f->id), pt_strtab_len(names, f->id));
    }
}

typedef struct ranked {
    const func_acc *f;
    size_t index;
    int64_t weight;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    int order = pt_cmp_i64(x->f->cls, y->f->cls);
    if (order == 0)
        order = pt_cmp_i64(y->weight, x->weight); /* heaviest first */
    return order ? order : pt_cmp_i64((int64_t)x->index, (int64_t)y->index); /* stable, deterministic */
}

/* Keeps, per class, the functions that carry time: the first KEEP_ALWAYS by weight
 * and then any above KEEP_MIN_SHARE of the window, up to keep_max. Runtime APIs are
 * ranked by total time (the seed's "execution time / monitoring duration"), the rest
 * by exposed time (Python: plus its waiting, so the frames a step blocks in stay visible). */
static void emit_functions(reducer *r, pt_worker_summary *out, const int64_t *medians)
{
    size_t n = r->funcs_count;
    ranked *order = pt_xmalloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) {
        const func_acc *f = &r->funcs[i];
        order[i] = (ranked){f, i, f->cls == PT_CLASS_RUNTIME ? f->total_ns : add_saturating(f->exposed_ns, f->waiting_ns)};
    }
    qsort(order, n, sizeof *order, cmp_ranked);
    out->functions = pt_xcalloc(n ? n : 1, sizeof *out->functions);
    int64_t floor_ns = (int64_t)((double)(r->w1 - r->w0) * KEEP_MIN_SHARE);
    size_t kept_in_class = 0;
    for (size_t i = 0; i < n; i++) {
        const func_acc *f = order[i].f;
        if (i == 0 || order[i - 1].f->cls != f->cls)
            kept_in_class = 0;
        if (f->count == 0 && f->total_ns == 0 && f->waiting_ns == 0)
            continue;
        if (kept_in_class >= keep_max[f->cls] || (kept_in_class >= KEEP_ALWAYS && order[i].weight < floor_ns))
            continue;
        kept_in_class++;
        pt_function_summary *fs = &out->functions[out->function_count++];
        pt_buf name = PT_BUF_INIT;
        render_function_name(r, f, &name);
        fs->cls = f->cls;
        fs->name = pt_buf_take(&name);
        if (f->group_name != NO_ID)
            fs->group = pt_xstrdup(pt_strtab_get(&r->s->names, f->group_name));
        fs->count = f->count;
        fs->total_ns = f->total_ns;
        fs->exposed_ns = f->exposed_ns;
        fs->waiting_ns = f->waiting_ns;
        if (r->step_values) {
            fs->step_count = r->step_values;
            fs->step_exposed_ns = pt_xmalloc(r->step_values * sizeof *fs->step_exposed_ns);
            memcpy(fs->step_exposed_ns, r->step_exposed + order[i].index * r->step_values,
                   r->step_values * sizeof *fs->step_exposed_ns);
        }
        fs->max_ns = f->max_ns;
        fs->median_ns = f->cls == PT_CLASS_PYTHON ? 0 : medians[order[i].index];
        uint32_t caller = f->cls == PT_CLASS_RUNTIME ? main_caller(r, f->id) : NO_ID;
        if (caller != NO_ID) {
            pt_buf stack = PT_BUF_INIT;
            render_stack(r, caller, &stack);
            fs->caller = pt_buf_take(&stack);
        }
        if (f->tput_n) {
            double mean = f->tput_sum / (double)f->tput_n;
            double var = f->tput_sq / (double)f->tput_n - mean * mean;
            fs->throughput_avg_pct = mean;
            fs->throughput_std_pct = var > 0 ? sqrt(var) : 0;
            fs->busbw_avg_gbps = f->busbw_sum / (double)f->tput_n;
        }
    }
    free(order);
}

/* Two functions can render to one name: Python stacks deeper than 256 frames keep only
 * their innermost frames, and a kernel literally named like another's "name|grid" key.
 * Nothing downstream could tell them apart, and the analysis keys functions by
 * (class, name), so they become one function: counts, times and per-step times add
 * (CPU-side and GPU times capped by the window and the step, which their union never
 * exceeds), and the heavier one, kept first, gives the median and throughput. */
static int cmp_function_name(const void *a, const void *b)
{
    const pt_function_summary *x = *(const pt_function_summary *const *)a, *y = *(const pt_function_summary *const *)b;
    int order = pt_cmp_i64(x->cls, y->cls);
    if (order == 0)
        order = strcmp(x->name, y->name);
    return order ? order : (x > y) - (x < y); /* the first kept (the heavier) first */
}

static void merge_into(pt_function_summary *into, pt_function_summary *from, const pt_worker_summary *out)
{
    bool unioned = into->cls != PT_CLASS_PYTHON; /* Python time adds up over threads */
    into->count = into->count + from->count < into->count ? UINT64_MAX : into->count + from->count;
    into->total_ns = add_saturating(into->total_ns, from->total_ns);
    into->waiting_ns = add_saturating(into->waiting_ns, from->waiting_ns);
    into->exposed_ns = add_saturating(into->exposed_ns, from->exposed_ns);
    if (unioned)
        into->exposed_ns = PT_MIN(into->exposed_ns, out->window_ns);
    if (unioned && into->cls != PT_CLASS_COMPUTE && into->cls != PT_CLASS_MEMORY)
        into->total_ns = PT_MIN(into->total_ns, out->window_ns);
    for (size_t k = 0; k < into->step_count && k < from->step_count; k++) {
        into->step_exposed_ns[k] = add_saturating(into->step_exposed_ns[k], from->step_exposed_ns[k]);
        if (unioned && k < out->step_count)
            into->step_exposed_ns[k] = PT_MIN(into->step_exposed_ns[k], out->steps[k].dur_ns);
    }
    into->max_ns = PT_MAX(into->max_ns, from->max_ns);
    if (!into->caller) /* a runtime API's caller: the first one's, else the other's */
        into->caller = from->caller, from->caller = NULL;
    free(from->name);
    free(from->group);
    free(from->caller);
    free(from->step_exposed_ns);
    from->name = NULL;
}

static void merge_same_names(pt_worker_summary *out)
{
    size_t n = out->function_count;
    if (n < 2)
        return;
    pt_function_summary **by_name = pt_xmalloc(n * sizeof *by_name);
    for (size_t i = 0; i < n; i++)
        by_name[i] = &out->functions[i];
    qsort(by_name, n, sizeof *by_name, cmp_function_name);
    size_t merged = 0;
    for (size_t i = 0; i < n;) {
        pt_function_summary *first = by_name[i];
        size_t j = i + 1;
        for (; j < n && by_name[j]->cls == first->cls && strcmp(by_name[j]->name, first->name) == 0; j++) {
            merge_into(first, by_name[j], out);
            merged++;
        }
        i = j;
    }
    free(by_name);
    if (!merged)
        return;
    size_t kept = 0; /* keep the ranked order of what remains */
    for (size_t i = 0; i < n; i++)
        if (out->functions[i].name)
            out->functions[kept++] = out->functions[i];
    out->function_count = kept;
    pt_summary_add_warning(out, "%zu functions shared a name with another (Python stacks deeper than 256 frames "
                                "cut to their innermost frames, or a kernel named like another's key) and were "
                                "merged with it", merged);
}

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

static void emit_steps(reducer *r, pt_worker_summary *out)
{
    pt_summarizer *s = r->s;
    out->step_count = s->steps_count;
    out->steps = pt_xcalloc(s->steps_count ? s->steps_count : 1, sizeof *out->steps);
    for (size_t i = 0; i < s->steps_count; i++) {
        pt_step_summary *st = &out->steps[i];
        st->step = s->steps[i].step;
        st->start_ns = s->steps[i].start - r->w0;
        st->dur_ns = s->steps[i].end - s->steps[i].start;
        fill_breakdown(r, s->steps[i].start, s->steps[i].end, st->exposed_ns, &st->idle_ns);
    }
}

/* ------------------------------------------------------------ sync points */

/* Collective calls less than this apart are one wait: back-to-back kernels on one
 * stream, a gloo thread picking up the next bucket. */
#define SYNC_GAP_NS 20000
/* A collective is a sync point when the worker waited in most of its last stretch (up to
 * this long): it was blocked, not working while the collective ran beside its work. */
#define SYNC_LOOKBACK_NS 1000000
#define SYNC_MIN_WAIT_NS 5000

/* Work as the step model counts it (see pt_sync_point): H2 = compute ∪ memory, then
 * runtime calls not under a GPU collective (a synchronize while the GPU runs only NCCL
 * waits for a peer), then Python work outside runtime calls (an operator's own time
 * holds the runtime calls it makes, a blocking synchronize among them). */
static void build_work_layers(reducer *r)
{
    pt_timeline runtime_free, python_own;
    pt_timeline_subtract(&runtime_free, &r->own[PT_CLASS_RUNTIME], &r->gpu_comm);
    pt_timeline_subtract(&python_own, &r->own[PT_CLASS_PYTHON], &r->own[PT_CLASS_RUNTIME]);
    pt_timeline_union(&r->work_runtime, &r->layer[PT_CLASS_MEMORY + 1], &runtime_free);
    pt_timeline_union(&r->work, &r->work_runtime, &python_own);
    pt_timeline_free(&runtime_free);
    pt_timeline_free(&python_own);
}

/* Work in [a, b) by class, in the model's priority (compute > memory > runtime > Python). */
static void work_by_class(const reducer *r, int64_t a, int64_t b, int64_t busy[PT_CLASS_COUNT])
{
    int64_t compute = pt_timeline_covered(&r->layer[PT_CLASS_COMPUTE + 1], a, b);
    int64_t device = pt_timeline_covered(&r->layer[PT_CLASS_MEMORY + 1], a, b);
    int64_t runtime = pt_timeline_covered(&r->work_runtime, a, b);
    int64_t all = pt_timeline_covered(&r->work, a, b);
    busy[PT_CLASS_COMPUTE] = compute;
    busy[PT_CLASS_MEMORY] = device - compute;
    busy[PT_CLASS_COMM] = 0;
    busy[PT_CLASS_RUNTIME] = runtime - device;
    busy[PT_CLASS_PYTHON] = all - runtime;
}

typedef struct sync_candidate {
    int64_t end, wait; /* wait: in the collective's last stretch */
} sync_candidate;

static int cmp_candidate_wait(const void *a, const void *b)
{
    const sync_candidate *x = a, *y = b;
    int order = pt_cmp_i64(y->wait, x->wait); /* longest wait first */
    return order ? order : pt_cmp_i64(x->end, y->end);
}

static int cmp_candidate_end(const void *a, const void *b)
{
    return pt_cmp_i64(((const sync_candidate *)a)->end, ((const sync_candidate *)b)->end);
}

/* The collectives of [a, b) the worker was blocked in, ends in time order (at most
 * PT_SUMMARY_MAX_SYNCS_PER_STEP: those it waited longest in). Returns how many. */
static size_t step_sync_points(const reducer *r, int64_t a, int64_t b, sync_candidate *out)
{
    const pt_timeline *comm = &r->own[PT_CLASS_COMM];
    size_t lo = 0, hi = comm->count; /* first span ending after a */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (comm->spans[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    sync_candidate *all = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = lo; i < comm->count && comm->spans[i].start < b;) {
        int64_t start = comm->spans[i].start, end = comm->spans[i].end;
        for (i++; i < comm->count && comm->spans[i].start - end < SYNC_GAP_NS; i++)
            end = PT_MAX(end, comm->spans[i].end);
        if (end <= a || end > b) /* a wait that ends in the next step is that step's */
            continue;
        int64_t from = PT_MAX(PT_MAX(start, a), end - SYNC_LOOKBACK_NS);
        int64_t wait = (end - from) - pt_timeline_covered(&r->work, from, end);
        if (wait < SYNC_MIN_WAIT_NS || 2 * wait < end - from)
            continue;
        PT_GROW(all, cap, n + 1);
        all[n++] = (sync_candidate){end, wait};
    }
    if (n > PT_SUMMARY_MAX_SYNCS_PER_STEP) {
        qsort(all, n, sizeof *all, cmp_candidate_wait);
        n = PT_SUMMARY_MAX_SYNCS_PER_STEP;
    }
    if (n) { /* never qsort or memcpy from NULL: UB */
        qsort(all, n, sizeof *all, cmp_candidate_end);
        memcpy(out, all, n * sizeof *out);
    }
    free(all);
    return n;
}

/* Each step's sync points and the work before each, for the step model; only with
 * per-step values (a window of at most PT_SUMMARY_MAX_STEP_VALUES steps). */
static void emit_sync_points(reducer *r, pt_worker_summary *out)
{
    if (!r->step_values)
        return;
    build_work_layers(r);
    out->has_syncs = true;
    sync_candidate found[PT_SUMMARY_MAX_SYNCS_PER_STEP];
    for (size_t i = 0; i < out->step_count; i++) {
        pt_step_summary *st = &out->steps[i];
        int64_t a = r->s->steps[i].start, b = r->s->steps[i].end;
        st->sync_count = step_sync_points(r, a, b, found);
        st->syncs = pt_xcalloc(st->sync_count ? st->sync_count : 1, sizeof *st->syncs);
        int64_t from = a;
        for (size_t k = 0; k < st->sync_count; k++) {
            st->syncs[k].end_ns = found[k].end - a;
            work_by_class(r, from, found[k].end, st->syncs[k].busy_ns);
            from = found[k].end;
        }
        work_by_class(r, from, b, st->tail_busy_ns);
    }
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
        bool comm = kernel_is_collective(r, k->key);
        probe(&p, k->start, k->end, comm ? PT_CLASS_COMM : PT_CLASS_COMPUTE, k->key, true);
    }
    for (size_t i = 0; i < s->memops_count; i++)
        probe(&p, s->memops[i].start, s->memops[i].end, PT_CLASS_MEMORY, s->memops[i].key, false);
    for (size_t i = 0; i < s->runtime_count; i++)
        probe(&p, s->runtime[i].start, s->runtime[i].end, PT_CLASS_RUNTIME, s->runtime[i].key, false);
    for (size_t i = 0; i < s->cpu_count; i++) {
        const cpu_rec *e = &s->cpu[i];
        pt_class c = name_is_cpu_collective(r, e->name) ? PT_CLASS_COMM : PT_CLASS_PYTHON;
        probe(&p, e->start, e->end, c, normalized_frame(r, e->name), false);
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
    infer_gloo_collectives(s, meta);
    pt_strtab_init(&r->func_index);
    r->step_values = s->steps_count <= PT_SUMMARY_MAX_STEP_VALUES ? s->steps_count : 0;
    pt_strtab_init(&r->stacks);
    cover_name(r, (uint32_t)s->names.count);

    for (size_t i = 0; i < s->kernels_count && !r->has_gpu_collectives; i++)
        r->has_gpu_collectives = kernel_is_collective(r, s->kernels[i].key);
    build_layers(r);
    account_gpu_and_runtime(r);
    account_cpu_collectives(r);
    call_walk walk = {0};
    pt_strtab_init(&r->call_sites);
    r->cpu_order = account_python(r, &walk);
    attribute_runtime_calls(r, r->cpu_order);
    add_layer(r, PT_CLASS_PYTHON, walk.work.items, walk.work.count);
    free_call_walk(&walk);
    int64_t *medians = compute_medians(r);
    free(r->exec_func), r->exec_func = NULL;
    free(r->exec_dur), r->exec_dur = NULL;
    settle_functions(r);

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
    fill_breakdown(r, r->w0, r->w1, out->exposed_ns, &out->idle_ns);
    memcpy(out->union_ns, r->own_total, sizeof out->union_ns);
    emit_functions(r, out, medians);
    emit_steps(r, out);
    emit_sync_points(r, out);
    merge_same_names(out);
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
    dedupe_steps(s);
    size_t steps_dropped = bound_steps(s);
    int64_t w0, w1;
    if (!find_window(s, meta, &w0, &w1)) {
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
