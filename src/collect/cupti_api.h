/* cupti_api.h -- CUDA runtime and driver calls, seen through CUPTI's callback API.
 *
 * What the analysis needs from the API calls is few of them: kernel launches,
 * memcpy/memset, synchronizations, event and stream waits, and malloc/free. A PyTorch step
 * makes ten to fifteen times more calls than that (cudaGetDevice, cuDevicePrimaryCtxGetState,
 * cudaGetLastError, cuKernelGetName, ...: about 20,000 per step for 1,300 kept ones in the
 * H200 traces of ../shared/data/traces/h200), and recording each as a CUPTI activity record
 * made the profiling window 1.3-1.9 times slower. So the API calls are not activity
 * records at all: one callback on entry and exit of every call
 *   - counts the call, per thread and per callback id (reported in the trace by name);
 *   - records start and end of a kept call into the thread's chunk of a preallocated pool;
 *   - ignores driver calls made inside a runtime call (cudaMemcpyAsync -> cuMemcpyAsync):
 *     the same work is never recorded at both levels, only counted once as nested.
 * The callback takes no lock, makes no system call (except once per thread per window, to
 * learn its thread id) and allocates nothing: a thread claims a slot of per-thread state
 * and chunks of records with one atomic increment each; the clock is the recorder's
 * (recorder.h: the TSC where it is the kernel's clock). Which callback ids are kept is
 * decided once, from their names (pt_cuda_api_kept), into a table the callback indexes.
 *
 * The writer thread drains the pool after the window, when no callback runs any more
 * (the domains are disabled, then the writer waits for the GPU to settle): records become
 * the window's RUNTIME records, counts become trace facts. */
#ifndef PT_COLLECT_CUPTI_API_H
#define PT_COLLECT_CUPTI_API_H

#include "collect/window.h"

#include <stdatomic.h>
#include <stdbool.h>

#define PT_API_DOMAINS 2          /* 0 runtime, 1 driver */
#define PT_API_MAX_CBID 1024      /* callback ids at or above share the last counter */
#define PT_API_MAX_THREADS 256    /* threads calling CUDA in one window */
#define PT_API_CHUNK_RECORDS 512

/* Whether the analysis keeps calls of this API (name as CUPTI gives it, version suffix
 * or not: "cudaLaunchKernel_v7000", "cuMemcpyAsync", "cudaStreamSynchronize_ptsz"). */
bool pt_cuda_api_kept(const char *name);

typedef struct pt_api_record {
    int64_t start;               /* recorder ticks */
    _Atomic int64_t end;         /* 0 until the call returns */
    int64_t tid;
    _Atomic uint32_t what;       /* domain << 16 | cbid, with PT_API_VALID; 0 = unused */
} pt_api_record;

typedef struct pt_api_thread {
    int64_t tid;
    int32_t runtime_depth;       /* runtime calls open on this thread */
    pt_api_record *next, *limit; /* the thread's current chunk */
    _Atomic uint32_t counts[PT_API_DOMAINS][PT_API_MAX_CBID];
    _Atomic uint64_t nested_driver; /* driver calls inside runtime calls */
    _Atomic uint64_t dropped;       /* kept calls the full pool could not record */
} pt_api_thread;

typedef struct pt_api_recorder {
    uint8_t kept[PT_API_DOMAINS][PT_API_MAX_CBID];
    pt_api_record *records;      /* chunk_count chunks of PT_API_CHUNK_RECORDS */
    size_t chunk_count;
    atomic_size_t next_chunk;
    pt_api_thread *threads;      /* PT_API_MAX_THREADS slots */
    atomic_uint threads_used;
    _Atomic uint64_t refused;    /* calls from threads beyond PT_API_MAX_THREADS */
    atomic_uint generation;      /* a new one per window: threads claim new slots */
} pt_api_recorder;

/* Room for max_records kept calls per window. 0, or -1 when memory is short. */
int pt_api_recorder_init(pt_api_recorder *r, size_t max_records);
void pt_api_recorder_free(pt_api_recorder *r);
/* Decides which callback ids are kept, from name(ctx, domain, cbid) (NULL: no such id). */
void pt_api_recorder_classify(pt_api_recorder *r, const char *(*name)(void *ctx, int domain, uint32_t cbid),
                              void *ctx);
/* A new window: threads claim fresh slots on their next call. No callback may run a
 * previous window's records any more (the pool was drained). */
void pt_api_recorder_begin(pt_api_recorder *r);

/* The callback's two halves. correlation: CUPTI's per-call word shared by entry and exit. */
void pt_api_enter(pt_api_recorder *r, int domain, uint32_t cbid, uint64_t *correlation);
void pt_api_exit(pt_api_recorder *r, int domain, uint32_t cbid, uint64_t *correlation);

typedef struct pt_api_totals {
    uint64_t recorded;           /* kept calls recorded */
    uint64_t counted;            /* other calls, counted only */
    uint64_t nested_driver;      /* driver calls inside runtime calls, counted only */
    uint64_t dropped;            /* kept calls not recorded (pool full, too many threads) */
} pt_api_totals;

/* Writer thread, once no callback runs: the window's RUNTIME records (calls still open
 * end at the window's end), and facts naming the counted calls
 * ("cuda_api_count.cudaGetDevice" = 11952) with the totals. Empties the pool. */
pt_api_totals pt_api_recorder_drain(pt_api_recorder *r, pt_window *w,
                                    const char *(*name)(void *ctx, int domain, uint32_t cbid), void *ctx);

#ifdef PT_HAVE_CUPTI
#include <cupti.h>
/* The CUPTI callback (userdata: the pt_api_recorder), for the runtime and driver
 * domains; other domains are ignored. */
void CUPTIAPI pt_cupti_api_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                    const void *cbdata);
#endif

#endif
