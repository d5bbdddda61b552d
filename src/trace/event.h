/* event.h -- the one event model every trace reader produces.
 *
 * A reader (Kineto JSON, perftracker's native raw trace, a synthetic generator) turns its
 * input into a stream of pt_event values pushed into a pt_trace_sink, one at a time. The
 * summarizer is the usual sink. Nothing here owns memory: strings point into the reader's
 * buffer and are valid only during the callback, so a reader can stream a file of any size
 * through a fixed buffer and the sink decides what to keep.
 *
 * Times are integer nanoseconds on the trace's own clock; meta.clock_origin_ns converts
 * them to Unix-epoch nanoseconds. Integers avoid the rounding drift of summing doubles
 * and make "analyze on summaries == analyze on traces" exact. */
#ifndef PT_TRACE_EVENT_H
#define PT_TRACE_EVENT_H

#include <stddef.h>
#include <stdint.h>

typedef enum pt_event_kind {
    PT_EVENT_GPU_KERNEL,  /* any GPU kernel; the summarizer tells compute from NCCL/RCCL */
    PT_EVENT_GPU_MEMCPY,  /* name is the kind, e.g. "Memcpy DtoH (Device -> Pinned)" */
    PT_EVENT_GPU_MEMSET,
    PT_EVENT_RUNTIME,     /* CUDA/HIP runtime or driver API call on a CPU thread */
    PT_EVENT_CPU,         /* Python function, operator or annotation: a CPU call-tree node */
    PT_EVENT_STEP,        /* one training step (ProfilerStep#N or a collector step mark) */
    PT_EVENT_COUNTER,     /* one hardware sample: name = metric, value */
    PT_EVENT_KIND_COUNT
} pt_event_kind;

/* What a CPU event is, when the producer says. It decides whether the event's own time can
 * be waiting rather than work (summarize_python.c): a Python function runs the
 * interpreter, but a C call or an operator may block on another thread or the GPU, and an
 * annotation is a label around code, not code. PT_CPU_UNKNOWN: the summarizer tells by
 * the name. */
typedef enum pt_cpu_kind {
    PT_CPU_UNKNOWN = 0,
    PT_CPU_PYTHON,     /* python_function: "file.py(12): f", or a builtin "<built-in method x>" */
    PT_CPU_OPERATOR,   /* cpu_op: "aten::mm", autograd nodes, c10d ops */
    PT_CPU_ANNOTATION  /* user_annotation: record_function ranges, "## backward ##" */
} pt_cpu_kind;

/* What a collective's args say (an NCCL kernel's, or record_param_comms'), when the
 * profiler recorded it. The process group and the call's number let the hang analysis
 * line the ranks' calls up (summarize/collective_log.c). */
typedef struct pt_collective {
    const char *name;       /* "allreduce", "_allgather_base", ... (NULL when unknown) */
    size_t name_len;
    int64_t in_nelems;
    int64_t out_nelems;
    int32_t group_size;
    int32_t dtype_bytes;    /* 0 when unknown */
    const char *dtype;      /* as written ("Float"), NULL when unknown */
    size_t dtype_len;
    const char *group;      /* "Process Group Name" ("0": the default group), NULL unknown */
    size_t group_len;
    const char *ranks;      /* "Process Group Ranks" ("[0, 1, 2, 3]"), NULL unknown */
    size_t ranks_len;
    int32_t rank_start, rank_stride; /* "Global rank start", "... stride"; -1 unknown */
    int64_t seq;            /* "Seq": the call's number in its group; -1 unknown */
} pt_collective;

typedef struct pt_event {
    pt_event_kind kind;
    const char *name;       /* not NUL-terminated; valid during the callback only */
    size_t name_len;
    int64_t ts_ns;          /* start, trace clock */
    int64_t dur_ns;         /* >= 0 */
    int64_t tid;            /* CPU thread id, or GPU stream */
    int32_t device;         /* GPU ordinal, -1 for CPU events */
    int32_t depth;          /* CPU call depth when the producer knows it, else -1 */
    pt_cpu_kind cpu_kind;   /* PT_EVENT_CPU only */
    int32_t grid[3];        /* kernels; zeros when unknown */
    int32_t block[3];
    int64_t bytes;          /* memcpy/memset size, 0 when unknown */
    int64_t step;           /* PT_EVENT_STEP: N of ProfilerStep#N, else -1 */
    double value;           /* PT_EVENT_COUNTER sample */
    pt_collective coll;
} pt_event;

/* Where the worker's global rank came from; reported so users can trust it or not. */
typedef enum pt_rank_source {
    PT_RANK_UNKNOWN = 0,
    PT_RANK_FROM_TRACE,      /* distributedInfo.rank, or the collector's own record */
    PT_RANK_FROM_FILE_NAME,
    PT_RANK_FROM_FILE_ORDER
} pt_rank_source;

#define PT_NAME_MAX 256

typedef struct pt_trace_meta {
    int32_t rank;            /* -1 when the trace does not say */
    int32_t local_rank;      /* -1 when unknown */
    int32_t world_size;      /* -1 when unknown */
    int64_t pid;             /* -1 when unknown */
    char host[PT_NAME_MAX];
    char backend[32];        /* "nccl", "gloo", ... */
    char device_name[PT_NAME_MAX]; /* first GPU's model, "" on CPU-only traces */
    int32_t device_count;
    char software[PT_NAME_MAX]; /* versions of what ran the job, "name version" joined by
                                   ", " ("torch 2.5.1, cuda 12.4, nccl 2.21.5"), "" unknown */
    int64_t clock_origin_ns; /* add to ts_ns for Unix-epoch ns (baseTimeNanoseconds) */
    char producer[32];       /* "kineto", "perftracker", "synth" */
    /* Collector-only facts about the profiled window, -1 when absent. */
    int64_t hang_step;       /* step the worker stopped in, when it hung */
    int32_t dropped_events;
    int32_t hw_sample_period_us;
} pt_trace_meta;

void pt_trace_meta_init(pt_trace_meta *meta);
/* Fills the fields dst does not know yet from src (for traces read in parallel spans). */
void pt_trace_meta_merge(pt_trace_meta *dst, const pt_trace_meta *src);

/* The meta's fields by name, in the order the native format writes them: the one list
 * that pt_trace_meta_init, pt_trace_meta_merge and the native writer and reader (whose
 * facts carry these names) go by. An int field's "unknown" is what init gives it; a
 * count saturates at INT32_MAX where another 32-bit field keeps the low bits. */
typedef enum pt_meta_type { PT_META_I32, PT_META_I64, PT_META_COUNT32, PT_META_STRING } pt_meta_type;
typedef struct pt_meta_field {
    const char *key;
    pt_meta_type type;
    size_t offset, size; /* the member's; a string's size is its capacity */
    int64_t unknown;
} pt_meta_field;
extern const pt_meta_field pt_meta_fields[];
extern const size_t pt_meta_field_count;
/* The field named key (key_len bytes), or NULL. */
const pt_meta_field *pt_meta_field_named(const char *key, size_t key_len);
int64_t pt_meta_int(const pt_trace_meta *m, const pt_meta_field *f);
void pt_meta_set_int(pt_trace_meta *m, const pt_meta_field *f, int64_t v);
/* A string field's text, and setting it (cut to its capacity). */
const char *pt_meta_string(const pt_trace_meta *m, const pt_meta_field *f);
void pt_meta_set_string(pt_trace_meta *m, const pt_meta_field *f, const char *s, size_t n);

/* A Chrome-trace metadata record ("ph":"M"): what a viewer calls a process or a thread
 * (process_name, thread_name, process_labels, *_sort_index). The analysis has no use for
 * them; a writer that converts a trace keeps them. Strings are valid during the callback
 * only, like an event's. */
typedef struct pt_trace_metadata {
    const char *name;       /* "process_name", "thread_name", ... */
    size_t name_len;
    int64_t pid, tid;
    const char *pid_text;   /* the pid as the trace wrote it when that was a string, else NULL */
    size_t pid_text_len;
    const char *tid_text;   /* likewise */
    size_t tid_text_len;
    const char *key;        /* its one argument: "name", "labels", "sort_index", ... */
    size_t key_len;
    const char *text;       /* the argument's value when it is a string, else NULL */
    size_t text_len;
    int64_t number;         /* the value when it is an integer */
} pt_trace_metadata;

/* A sink receives every event; returning non-zero stops the reader (it reports an error).
 * on_warning is optional and receives one human sentence (no file name: the caller adds
 * it). on_metadata is optional: readers skip metadata records when it is NULL. on_other
 * is optional too: an event record the model above does not carry (a flow arrow's start
 * or end, "ph":"s"/"f"; an instant, "i"; a span of a category the analysis ignores), as
 * the JSON text of its object, which the reader has parsed whole (valid during the call
 * only); a converter keeps them, so Perfetto still draws launch -> kernel arrows. */
typedef struct pt_trace_sink {
    void *ctx;
    int (*on_event)(void *ctx, const pt_event *ev);
    void (*on_warning)(void *ctx, const char *message);
    void (*on_metadata)(void *ctx, const pt_trace_metadata *md);
    void (*on_other)(void *ctx, const char *json, size_t len);
} pt_trace_sink;

void pt_event_init(pt_event *ev, pt_event_kind kind);

#endif
