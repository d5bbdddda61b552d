/* summary.h -- the per-worker summary: what one worker did in the profiled window,
 * reduced to per-function behaviour. It is the unit that travels from each worker to the
 * central analysis (summary_io.c gives its compact file format), so the diagnosis reads
 * nothing else: analyze on summaries gives exactly the report analyze on traces gives. */
#ifndef PT_SUMMARIZE_SUMMARY_H
#define PT_SUMMARIZE_SUMMARY_H

#include "trace/event.h"
#include "util/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Activity classes in priority order: time under a class hides every class after it. */
typedef enum pt_class {
    PT_CLASS_COMPUTE,  /* GPU compute kernels */
    PT_CLASS_MEMORY,   /* GPU memcpy / memset */
    PT_CLASS_COMM,     /* NCCL/RCCL kernels and blocking CPU collectives (gloo) */
    PT_CLASS_RUNTIME,  /* CUDA/HIP runtime and driver calls */
    PT_CLASS_PYTHON,   /* Python functions and operators on CPU threads */
    PT_CLASS_COUNT
} pt_class;

const char *pt_class_name(pt_class c); /* "compute", "memory", ... */

typedef struct pt_function_summary {
    pt_class cls;
    char *name;            /* kernel key, memcpy kind, API name, or Python stack */
    char *group;           /* communication only: "nvlink ring", "cpu gloo", ...; else NULL */
    uint64_t count;        /* executions (Python: calls of that exact stack) */
    int64_t total_ns;      /* time inside the window: GPU kernels and copies the summed
                              duration; CPU-side functions the union of their calls (two
                              threads at once count once); Python its exclusive time */
    int64_t exposed_ns;    /* bottleneck time: not hidden by higher-priority classes (of
                              the union of its calls, so never more than the window) */
    int64_t waiting_ns;    /* Python: exclusive time spent blocked, not working (a builtin
                              or operator waiting for work it handed to other threads:
                              backward, DDP); neither exposed nor in the Python layer */
    size_t step_count;     /* per-step exposed time, one per profiled step, or none */
    int64_t *step_exposed_ns;
    int64_t median_ns;     /* median duration of one execution */
    int64_t max_ns;
    char *caller;          /* runtime calls: the Python stack they spend most time under
                              (version 3), or NULL */
    double throughput_avg_pct; /* communication: bus bandwidth, % of link peak */
    double throughput_std_pct;
    double busbw_avg_gbps;
    double bytes_avg;      /* communication: a call's bytes (the size its bus bandwidth
                              counts: an all-gather's output), the mean over calls that
                              carry collective arguments, and the largest (version 6; 0
                              unknown) */
    double bytes_max;
} pt_function_summary;

/* A point of a step where this worker waited for its peers: the end of a collective it
 * was blocked in, waiting (a sync point of the step model, diagnose/whatif.c). Its work
 * since the previous sync point of the step (or the step's start) is split by class with
 * compute > memory > runtime > Python: the time the worker was busy, not waiting.
 * Communication is never work ([PT_CLASS_COMM] is 0), nor is a runtime call while a GPU
 * collective runs (a synchronize waiting for a peer) or a Python frame that waits; CPU
 * work on other threads while a CPU collective waits is. */
typedef struct pt_sync_point {
    int64_t end_ns;                  /* from the step's start */
    int64_t busy_ns[PT_CLASS_COUNT]; /* work before it, by class */
} pt_sync_point;

/* Sync points kept per step: those the worker waited in longest, when it has more. */
#define PT_SUMMARY_MAX_SYNCS_PER_STEP 16

typedef struct pt_step_summary {
    int64_t step;          /* N of ProfilerStep#N, or the ordinal */
    int64_t start_ns;      /* from the window start */
    int64_t dur_ns;
    int64_t exposed_ns[PT_CLASS_COUNT];
    int64_t idle_ns;
    /* With pt_worker_summary.has_syncs: the step's sync points in time order, and the work
     * after the last of them (or in the whole step, when there is none). */
    pt_sync_point *syncs;
    size_t sync_count;
    int64_t tail_busy_ns[PT_CLASS_COUNT];
} pt_step_summary;

#define PT_SERIES_MAX_POINTS 200
/* Functions carry their exposed time per step when a window has at most this many steps
 * (a few are profiled; the cap bounds a summary of a window of thousands). */
#define PT_SUMMARY_MAX_STEP_VALUES 64
/* Steps per worker: a profiled window is a few, a long one thousands. Each costs a row
 * in the summary and ~600 bytes in report.json, so a trace of a million steps (a 5.6 MB
 * gzip) would make a 600 MB report; beyond the cap the window ends with the last step
 * kept, with a warning (summarize.c). */
#define PT_SUMMARY_MAX_STEPS 10000u
/* Hardware metrics per worker: a collector samples about a hundred (a dozen per GPU);
 * each costs 1.7 KB in memory, so the cap keeps a hostile summary of a few hundred bytes
 * (a zstd frame of zeros) from asking for gigabytes. */
#define PT_SUMMARY_MAX_METRICS 4096

/* The largest job perftracker describes rank by rank: 2^20 workers, ten times the largest
 * deployment the paper reports. A rank or world size beyond it comes from a corrupt or
 * hostile file; believing one made the report list up to 16 M missing ranks (20 GB for a
 * trace claiming world_size 999999999). Readers ignore such claims with a warning. */
#define PT_MAX_WORLD_SIZE (1 << 20)

/* What a valid summary holds (pt_summary_check; docs/summary-format.md lists every rule).
 * Counts: steps as PT_SUMMARY_MAX_STEPS above, functions as many as a summary file may
 * carry, warnings a few. Names:
 * a C++ kernel name or a 256-frame Python stack is tens of KB; 1 MiB bounds what one
 * string can cost. Times: the summarizer drops events of 2^60 ns (36 years) or more, so
 * no duration, total or median reaches it; no profiled window is longer than 30 days.
 * Within these bounds any sum the analysis makes of a worker's times (a few hundred
 * windows' worth at most) stays far inside int64. */
#define PT_SUMMARY_MAX_FUNCTIONS (1u << 20)
#define PT_SUMMARY_MAX_WARNINGS 4096u
#define PT_SUMMARY_MAX_NAME (1u << 20)
#define PT_SUMMARY_MAX_NS (INT64_C(1) << 60)
#define PT_SUMMARY_MAX_WINDOW_NS (INT64_C(30) * 86400 * 1000000000)

typedef struct pt_metric_summary {
    char *name;            /* "gpu0.sm_active", "host.cpu_util", ... */
    uint64_t samples;
    double mean, min, max;
    size_t points;         /* downsampled series: (ms from window start, mean value) */
    float series_ms[PT_SERIES_MAX_POINTS];
    float series_value[PT_SERIES_MAX_POINTS];
} pt_metric_summary;

/* Where a worker was in its collectives, per process group (summary version 4): from the
 * collector's bookkeeping at a hang report, or from a trace's collective ops. The hang
 * analysis (diagnose/hangs.c) matches the groups' calls across workers by sequence number. */
typedef enum pt_call_state {
    PT_CALL_ENTERED = 1,   /* called, not returned (blocked in it, or still running) */
    PT_CALL_ISSUED,        /* returned a handle (async, or a GPU collective enqueued); not known done */
    PT_CALL_COMPLETED,
    PT_CALL_FAILED,        /* raised; error says what */
    PT_CALL_STATE_COUNT
} pt_call_state;

const char *pt_call_state_name(pt_call_state state); /* "entered", ... */

typedef struct pt_collective_call {
    int64_t seq;           /* 1.. in the group, as this worker numbers its calls */
    char *op;              /* "all_reduce", "broadcast", ... */
    int64_t count;         /* elements of its input, -1 unknown */
    char *dtype;           /* "float32", ...; NULL unknown */
    pt_call_state state;
    int64_t age_ns;        /* how long before the snapshot it was entered, -1 unknown */
    char *error;           /* PT_CALL_FAILED: what it raised (may be NULL); else NULL */
} pt_collective_call;

/* Members of a group: first, first + stride, ..., last. */
typedef struct pt_rank_run {
    int32_t first, last, stride;
} pt_rank_run;

typedef struct pt_collective_group {
    char *name;            /* the process group's name ("0": the default group) */
    char *backend;         /* "gloo", "nccl", ...; NULL unknown */
    int32_t size;          /* members, -1 unknown */
    pt_rank_run *runs;     /* members' global ranks in order (none: unknown) */
    size_t run_count;
    pt_collective_call *calls; /* this worker's last calls in the group, oldest first */
    size_t call_count;
} pt_collective_group;

typedef struct pt_thread_stack {
    char *name;            /* threading's name ("MainThread"), may be "" */
    int64_t ident;         /* threading.get_ident() */
    bool training;         /* the thread that calls step() */
    char *stack;           /* frames joined with '|', outermost first; may be "" */
} pt_thread_stack;

/* Bounds of the hang state (pt_summary_check; docs/summary-format.md). */
#define PT_SUMMARY_MAX_THREADS 1024u
#define PT_SUMMARY_MAX_GROUPS 256u
#define PT_SUMMARY_MAX_RUNS 256u
#define PT_SUMMARY_MAX_CALLS 64u
#define PT_SUMMARY_MAX_LABEL 256u      /* a group, op, dtype or thread name, bytes */
#define PT_SUMMARY_MAX_ERROR 4096u
#define PT_SUMMARY_MAX_SEQ (INT64_C(1) << 53)
/* The summary version that carries the hang state. */
#define PT_SUMMARY_VERSION_HANG_STATE 4
/* The summary version that carries the software versions (pt_worker_summary.software). */
#define PT_SUMMARY_VERSION_SOFTWARE 5
/* The summary version that carries a collective's bytes per call (pt_function_summary). */
#define PT_SUMMARY_VERSION_BYTES 6

/* Whether global rank r is a member of g (false when its members are unknown). */
bool pt_group_has_rank(const pt_collective_group *g, int32_t r);
/* Number of members the runs list. */
int64_t pt_group_run_members(const pt_collective_group *g);

typedef struct pt_worker_summary {
    int32_t rank;
    pt_rank_source rank_source;
    int32_t local_rank;
    int32_t world_size;
    int64_t pid;
    char *name;            /* the trace file's base name, as the seed names workers */
    char *host;
    char *device_name;
    char *backend;
    char *producer;
    char *software;        /* versions of what ran it ("torch 2.5.1, cuda 12.4"), or NULL
                              (version 5) */
    int32_t device_count;
    int64_t window_start_ns;  /* Unix epoch ns */
    int64_t window_ns;
    int64_t union_ns[PT_CLASS_COUNT];   /* busy time per class, overlap included */
    int64_t exposed_ns[PT_CLASS_COUNT]; /* layered by priority; sums with idle to window */
    int64_t idle_ns;
    uint64_t events;
    int64_t dropped_events;   /* collector ring overflow, -1 unknown */
    int32_t hw_sample_period_us;
    int64_t hang_step;        /* >= 0: a hang report's snapshot of the worker, in this step */
    char *hang_stack;         /* the training thread's Python stack then, when known */
    int64_t hang_idle_ns;     /* then: time since its last step; -1 unknown */
    int64_t hang_step_ns;     /* then: its mean step time; -1 unknown */
    pt_thread_stack *threads; /* then: every Python thread */
    size_t thread_count;
    pt_collective_group *groups; /* its collectives, per process group (snapshot or trace) */
    size_t group_count;
    /* Activity after the last complete step: a trace that goes on long after its last
     * step was stuck in something (the longest activity there, and its class). */
    int64_t stall_ns;
    pt_class stall_class;
    char *stall_function;
    pt_step_summary *steps;
    size_t step_count;
    bool has_syncs;           /* steps carry their sync points (version 3, at most
                                 PT_SUMMARY_MAX_STEP_VALUES steps) */
    pt_function_summary *functions; /* NULL when they live in fn_store */
    size_t function_count;
    struct pt_fn_store *fn_store; /* or NULL: the column store its functions were moved to
                                     (function_store.h; the decoder's, with shared names) */
    uint32_t fn_slot;             /* their slot there */
    bool shared_function_names; /* functions' name, group and caller, and collective calls'
                                   op and dtype, live in the decoder's shared pool
                                   (pt_summary_share_names), not in s */
    pt_metric_summary *metrics;
    size_t metric_count;
    char **warnings;
    size_t warning_count;
    /* Its process as the coordinator saw the connection that brought it (a round's
     * summaries; never in a file, whose claims are the worker's own): how it connected
     * ("pid 4242 (uid 1000) on this machine", an address), and the uid and pid the
     * kernel gave, -1 where it could not say. NULL seen_from: not known. */
    char *seen_from;
    int64_t seen_uid, seen_pid;
} pt_worker_summary;

pt_worker_summary *pt_summary_new(void);
void pt_summary_free(pt_worker_summary *s);
/* Frees the threads and groups only (a parser that failed half way). */
void pt_summary_free_hang_state(pt_worker_summary *s);
void pt_summary_add_warning(pt_worker_summary *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The one validator every summary passes before any analysis reads it: the decoder
 * (files, frames from the network) and pt_diagnose (every worker, however it was made)
 * both call it. 0 when s keeps every rule; else -1 with err naming the rule it broke
 * and the value (names shown short, control characters as '?'). Never changes s.
 * Functions in a store (fn_store) are not checked again: the decoder moved them there
 * only once they had passed, and nothing writes them since. */
int pt_summary_check(const pt_worker_summary *s, pt_error *err);
/* "node0_3_10003.json (rank 3)": the worker as warnings name it, safe to print and
 * short, whatever its name holds. */
void pt_summary_describe(const pt_worker_summary *s, char *out, size_t cap);

/* Median step duration, or the window when no steps were marked. */
int64_t pt_summary_step_ns(const pt_worker_summary *s);
/* The function (cls, name) among s's records, or NULL (also when they are in a store). */
const pt_function_summary *pt_summary_find(const pt_worker_summary *s, pt_class cls, const char *name);

#endif
