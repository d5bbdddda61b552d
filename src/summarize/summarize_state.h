/* summarize_state.h -- what the summarizer's files share: the compact records the sink
 * keeps (summarize.c), the reduction's state (reducer), and the functions one stage of
 * the pipeline calls in another, prefixed sum_. summarize.c's design comment lists the
 * stages and the file of each (summarize_window.c, summarize_python.c,
 * summarize_functions.c, summarize_sync.c; the accumulators both the Python and the
 * per-function stage write to are summarize_accounts.c's). Internal to src/summarize:
 * nothing outside these six files includes it; everything else in them is static. */
#ifndef PT_SUMMARIZE_SUMMARIZE_STATE_H
#define PT_SUMMARIZE_SUMMARIZE_STATE_H

#include "summarize/collective_log.h"
#include "summarize/demangle.h"
#include "summarize/summarize.h"
#include "summarize/timeline.h"
#include "util/buf.h"
#include "util/strtab.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define NO_ID UINT32_MAX

/* ------------------------------------------------------------ the sink's records */

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
 * stages its collectives through such copies (sum_infer_gloo_collectives). */
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
static inline kernel_key kernel_key_of(const pt_strtab *keys, uint32_t id)
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

/* Sums of many clipped lengths saturate (event times are bounded at the door: summarize.c's
 * time_in_range). */
static inline int64_t add_saturating(int64_t a, int64_t b)
{
    int64_t sum;
    if (__builtin_add_overflow(a, b, &sum))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return sum;
}

/* Appends a record and counts its array's growth against the memory budget (held_bytes). */
#define PUSH(s, field, value)                                                              \
    do {                                                                                   \
        size_t old_cap_ = (s)->field##_cap;                                                \
        PT_GROW((s)->field, (s)->field##_cap, (s)->field##_count + 1);                     \
        (s)->records_bytes += ((s)->field##_cap - old_cap_) * sizeof *(s)->field;          \
        (s)->field[(s)->field##_count++] = (value);                                        \
    } while (0)

/* ------------------------------------------------------------ the reduction's state */

/* One function being accumulated: (class, id) where id is a kernel key, a name or a
 * Python stack, depending on the class. */
typedef struct func_acc {
    pt_class cls;
    uint32_t id;
    uint64_t count;
    int64_t total_ns, exposed_ns, max_ns;
    int64_t waiting_ns;  /* Python: own time spent blocked (see account_python) */
    pt_interval *calls;  /* clipped executions in arrival order, settled at the end
                            (sum_settle_functions); Python's work is accounted segment by
                            segment instead (account_work) */
    size_t call_count, call_cap;
    double tput_sum, tput_sq, busbw_sum, bytes_sum, bytes_max;
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
    /* For the sync points (sum_emit_sync_points): the classes' own timelines where they
     * are kept (communication, runtime, Python work), GPU collectives alone, and work as
     * the step model counts it: H2 ∪ runtime not under a GPU collective (work_runtime),
     * then ∪ Python work (work). */
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

typedef struct interval_vec {
    pt_interval *items;
    size_t count, cap;
} interval_vec;

/* Clips [*a, *b) to the window; false when nothing is left. */
static inline bool clip(const reducer *r, int64_t *a, int64_t *b)
{
    if (*a < r->w0)
        *a = r->w0;
    if (*b > r->w1)
        *b = r->w1;
    return *b > *a;
}

/* Whether [start, end) falls in the window (an instant: when it is inside it). */
static inline bool in_window(const reducer *r, int64_t start, int64_t end)
{
    if (end == start)
        return start >= r->w0 && start < r->w1;
    return start < r->w1 && end > r->w0;
}

/* ------------------------------------------------------------ stages 0-2: summarize_window.c */

/* gloo's collectives, when a raw trace does not name them: CPU annotations of their own. */
void sum_infer_gloo_collectives(pt_summarizer *s, const pt_trace_meta *meta);
/* One record per step number, the steps in time order. */
void sum_dedupe_steps(pt_summarizer *s);
/* Keeps the first PT_SUMMARY_MAX_STEPS steps; returns how many were dropped. */
size_t sum_bound_steps(pt_summarizer *s);
/* The window [*w0, *w1): the steps', or else every event's; false when it is empty. */
bool sum_find_window(pt_summarizer *s, const pt_trace_meta *meta, int64_t *w0, int64_t *w1);
/* Grows the per-name caches (normalized[], cpu_comm[]) to cover name id. */
void sum_cover_name(reducer *r, uint32_t id);
/* Whether a CPU event of this name is communication (never when a GPU collective exists). */
bool sum_name_is_cpu_collective(reducer *r, uint32_t name);
/* Whether the kernel of this key is a collective. */
bool sum_kernel_is_collective(reducer *r, uint32_t key);
/* Appends [a, b) clipped to the window, when anything of it is left. */
void sum_add_clipped(const reducer *r, interval_vec *v, int64_t a, int64_t b);
/* layer[c + 1] = layer[c] ∪ the class's own intervals. */
void sum_add_layer(reducer *r, pt_class c, const pt_interval *items, size_t count);
/* The layers of every class but Python. */
void sum_build_layers(reducer *r);
/* Each class's exposed time in [a, b), and the time no class covers. */
void sum_fill_breakdown(const reducer *r, int64_t a, int64_t b, int64_t exposed[PT_CLASS_COUNT], int64_t *idle);
/* The summary's steps, each with its breakdown. */
void sum_emit_steps(reducer *r, pt_worker_summary *out);

/* ------------------------------------------------------------ stage 3: summarize_python.c */

/* Python's time: every thread's call tree split into work and waiting (account_python),
 * the runtime calls' callers, and the Python layer H5. */
void sum_python_time(reducer *r);
/* A raw frame name's normalized form, interned. */
uint32_t sum_normalized_frame(reducer *r, uint32_t raw);
/* A Python stack as "outermost|...|innermost". */
void sum_render_stack(const reducer *r, uint32_t stack, pt_buf *out);
/* The stack a runtime API spent most time under, or NO_ID. */
uint32_t sum_main_caller(const reducer *r, uint32_t api);

/* ------------------------------------------------------------ accumulators: summarize_accounts.c */

/* The accumulator of function (cls, id), made on first sight. */
func_acc *sum_func_get(reducer *r, pt_class cls, uint32_t id);
/* qsort order of pt_intervals: by start. */
int sum_cmp_interval(const void *a, const void *b);
/* Adds [a, b)'s exposed time (not under `above`) to the steps it falls in. */
void sum_add_step_exposure(reducer *r, size_t func, const pt_timeline *above, int64_t a, int64_t b);

/* ------------------------------------------------------------ stages 4-5: summarize_functions.c */

/* Kernels, memory operations and runtime calls as functions. */
void sum_account_gpu_and_runtime(reducer *r);
/* CPU-side collectives (gloo jobs) as communication functions. */
void sum_account_cpu_collectives(reducer *r);
/* Each function's median execution, indexed as r->funcs. */
int64_t *sum_compute_medians(reducer *r);
/* Each function's busy and exposed time, from the union of its executions. */
void sum_settle_functions(reducer *r);
/* The functions that carry time, per class, into the summary. */
void sum_emit_functions(reducer *r, pt_worker_summary *out, const int64_t *medians);
/* Functions that render to one name become one. */
void sum_merge_same_names(pt_worker_summary *out);

/* ------------------------------------------------------------ sync points: summarize_sync.c */

/* Each step's sync points and the work before each, for the step model. */
void sum_emit_sync_points(reducer *r, pt_worker_summary *out);

#endif
