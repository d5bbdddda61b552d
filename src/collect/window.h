/* window.h -- everything one profiled window records, and how it becomes a raw trace.
 *
 * A window is opened by the training thread at a step() boundary, filled by the profile
 * hook (CPU calls, per thread), the CUPTI buffer callback (GPU activity) and the
 * hardware sampler (counters), closed at a later step() boundary and then handed whole
 * to the writer thread, which writes it (pt_window_write) and frees it. Each kind of data
 * has exactly one writer while the window is open:
 *   CPU records  their own thread (under the GIL), chunks from the shared arena;
 *   GPU records  the writer thread after the window (CUPTI's buffers and the API
 *                recorder are converted there), under gpu_lock;
 *   counters     the sampler thread; read only after it is joined;
 *   names        whoever interns, under names_lock (once per distinct name).
 * All memory is reserved when the window opens; a full buffer drops and counts.
 * Nothing here exits on a failed allocation (this runs inside the training job). */
#ifndef PT_COLLECT_WINDOW_H
#define PT_COLLECT_WINDOW_H

#include "collect/funcs.h"
#include "collect/names.h"
#include "collect/recorder.h"
#include "trace/event.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#define PT_MAX_THREADS 4096
#define PT_MAX_WARNINGS 16
#define PT_MAX_WINDOW_STEPS 100000

typedef struct pt_gpu_record {
    int64_t start_ns, end_ns;
    int64_t stream;          /* GPU stream; CPU thread id for runtime/driver calls */
    int64_t bytes;
    int64_t coll_in, coll_out;
    uint32_t name;
    uint32_t coll_name;      /* PT_NAMES_NONE unless an identified collective */
    int32_t device;
    int32_t grid[3], block[3];
    int32_t group_size, dtype_bytes;
    uint8_t kind;            /* pt_event_kind */
} pt_gpu_record;

typedef struct pt_counter_record {
    int64_t ts_ns;
    double value;
    uint32_t metric;         /* name id */
} pt_counter_record;

/* What to profile: from the agent (arm_window) or the local trigger. */
typedef struct pt_window_plan {
    int64_t start_step;
    int32_t steps;
    char raw_path[PATH_MAX]; /* "" = private temp file, deleted after summarizing */
} pt_window_plan;

/* A number the trace carries as a META fact (API call counts, the sampler's cost). */
typedef struct pt_window_fact {
    char key[128];
    int64_t value;
} pt_window_fact;

typedef struct pt_window_limits {
    size_t max_cpu_records;
    size_t max_gpu_records;
    size_t max_samples;
} pt_window_limits;

typedef struct pt_window {
    pt_window_plan plan;
    int64_t first_step;            /* the number of the step that opened it (util/step_number.h) */
    int64_t *step_marks;           /* plan.steps + 1 step() times */
    int32_t marks;
    int64_t wall_origin_ns;        /* Unix-epoch ns minus monotonic ns, at open */
    /* Recorder ticks at the first and last step() (beside step_marks' ns); CPU records are
     * mapped to ns between these points when written. ticks_are_ns: no mapping. */
    int64_t tick_begin, tick_end;
    bool ticks_are_ns;
    pt_trace_meta meta;            /* identity, filled by the Python side at open */

    pt_arena arena;
    pt_thread_log **threads;
    uint32_t thread_count;
    uint64_t threads_refused;
    pt_functab funcs;

    pthread_mutex_t names_lock;
    pt_names names;

    pthread_mutex_t gpu_lock;
    pt_gpu_record *gpu;
    size_t gpu_count, gpu_cap;
    uint64_t gpu_dropped;
    bool gpu_closed;               /* no more GPU records accepted */
    uint64_t api_recorded;         /* CUDA API calls recorded / only counted (writer thread) */
    uint64_t api_counted;

    pt_counter_record *samples;    /* sampler thread only */
    size_t sample_count, sample_cap;
    uint64_t samples_dropped;
    int32_t sample_period_us;      /* achieved, -1 when not sampled */
    double sampler_cpu_pct;        /* the sampler thread's CPU share of one core, -1 when not sampled */
    char sampler_reads[256];       /* what each kind of read cost: "nvml_buffered 40 us x 300, ..." */

    pthread_mutex_t warn_lock;
    char warnings[PT_MAX_WARNINGS][256];
    int warning_count;

    pt_window_fact *facts;         /* under warn_lock */
    size_t fact_count, fact_cap;
} pt_window;

pt_window *pt_window_open(const pt_window_plan *plan, const pt_window_limits *limits, int64_t first_step,
                          int64_t now, pt_error *err);
void pt_window_free(pt_window *w);

/* A thread log for a new thread, or NULL past PT_MAX_THREADS / when memory is short. */
pt_thread_log *pt_window_add_thread(pt_window *w, int64_t tid);
/* Name id 0 is "<unknown>", what a callable is called when memory for its name ran out. */
#define PT_WINDOW_UNKNOWN_NAME 0u

/* Interns a name (thread-safe); PT_NAMES_NONE when memory is short. */
uint32_t pt_window_name(pt_window *w, const char *s, size_t n);
/* A sentence that travels in the trace as a warning (thread-safe; the first 16 kept). */
void pt_window_warn(pt_window *w, const char *fmt, ...) PT_PRINTF(2, 3);
/* A numeric fact for the trace's META (thread-safe; dropped when memory is short). */
void pt_window_fact_int(pt_window *w, const char *key, int64_t value);
/* A step() boundary inside the window. */
void pt_window_mark_step(pt_window *w, int64_t now);
/* Moves the window's start (its first step mark and the matching clock reading) to now,
 * before anything is recorded: the window opens in step(), recording starts later. */
void pt_window_restart_first_step(pt_window *w, int64_t now, int64_t tick);
/* Adds one GPU record (thread-safe); counts a drop when full or closed. */
void pt_window_add_gpu(pt_window *w, const pt_gpu_record *r);
/* Closes every thread's open calls at the window's last step (tick_end); the recorders
 * must be stopped. */
void pt_window_close_threads(pt_window *w);
/* Recorder ticks -> CLOCK_MONOTONIC ns, by the window's two reference points. */
int64_t pt_window_ticks_to_ns(const pt_window *w, int64_t ticks);

/* Totals across threads, for the trace's meta and the log. */
uint64_t pt_window_dropped(const pt_window *w);
uint64_t pt_window_cpu_records(const pt_window *w);

/* Writes the raw trace. 0, or -1 with err set. */
int pt_window_write(pt_window *w, const char *path, pt_error *err);

#endif
