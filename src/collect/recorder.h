/* recorder.h -- the hot path: one record per call, written into per-thread chunks.
 *
 * Design (the _lsprof discipline). A profiled window owns one arena of fixed-size chunks,
 * allocated once when the window opens and capped by PERFTRACKER_MAX_EVENTS, so a
 * runaway program cannot exhaust memory. Each thread takes chunks one at a time (an
 * atomic increment, the only shared write, once per CHUNK_RECORDS calls) and fills them
 * alone, so the per-call path has no lock, no allocation, no syscall and creates no
 * Python object:
 *   enter: reserve the next record (start, depth, name; end = -1) and push it on the
 *          thread's shadow stack;
 *   leave: pop, write the end time.
 * Reserving at entry keeps a parent's record before its children's, so when the arena
 * is full the records kept are always closed under ancestry (the call tree stays valid)
 * and later calls are only counted as dropped. Records left open when the window ends
 * are closed at the window's end time.
 *
 * A leave that does not match the top of the stack (a C call that started before the
 * window, a frame the hook never saw enter) is reconciled by looking a few entries
 * down; a leave matching nothing is ignored. Depth beyond PT_MAX_DEPTH is counted, not
 * recorded. */
#ifndef PT_COLLECT_RECORDER_H
#define PT_COLLECT_RECORDER_H

#include "util/common.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_CHUNK_RECORDS 4096
#define PT_MAX_DEPTH 512

/* The recorder's clock. Reading CLOCK_MONOTONIC costs two to three times what reading the
 * TSC does, and the hook reads a clock twice per call, so on x86-64 machines whose kernel
 * clock is the TSC (invariant and synchronized across cores) records hold raw TSC ticks,
 * which the window maps to CLOCK_MONOTONIC ns when it is written (two reference points,
 * at its first and last step). Elsewhere the ticks are nanoseconds. */
extern bool pt_ticks_are_tsc;
/* Decides once per process (the answer must not change while a window is open). */
void pt_ticks_init(void);

static inline int64_t pt_ticks(void)
{
#if defined(__x86_64__)
    if (PT_LIKELY(pt_ticks_are_tsc))
        return (int64_t)__rdtsc();
#endif
    return pt_now_ns();
}

typedef struct pt_cpu_record {
    int64_t start_ns; /* recorder ticks until the window is written (see pt_ticks) */
    int64_t end_ns;   /* -1 while the call is open */
    uint32_t name;    /* id in the window's name table */
    int32_t depth;
} pt_cpu_record;

typedef struct pt_chunk {
    uint32_t thread;  /* index of the owning thread log */
    uint32_t used;    /* valid once the window is closed */
    pt_cpu_record records[PT_CHUNK_RECORDS];
} pt_chunk;

typedef struct pt_arena {
    pt_chunk *chunks;
    size_t chunk_count;
    atomic_size_t next_chunk;
} pt_arena;

typedef struct pt_frame_entry {
    const void *key;       /* code object / method def: what the matching leave carries */
    pt_cpu_record *record; /* NULL when the call was dropped */
} pt_frame_entry;

typedef struct pt_thread_log {
    pt_arena *arena;
    uint32_t index;
    int64_t tid;
    pt_chunk *chunk;       /* current chunk, NULL before the first call */
    pt_cpu_record *next, *limit;
    int32_t depth;
    int32_t overflow;      /* calls deeper than PT_MAX_DEPTH now open */
    bool exhausted;        /* the arena ran out: record nothing more */
    uint64_t dropped;
    uint64_t unmatched;    /* leaves that matched nothing */
    pt_frame_entry stack[PT_MAX_DEPTH];
} pt_thread_log;

/* max_records is rounded up to whole chunks. 0, or -1 when memory is short. */
int pt_arena_init(pt_arena *a, size_t max_records);
void pt_arena_free(pt_arena *a);
/* Chunks handed out so far (all of them once the window is closed). */
size_t pt_arena_chunks_used(const pt_arena *a);

void pt_thread_log_init(pt_thread_log *t, pt_arena *arena, uint32_t index, int64_t tid);
/* Slow paths of enter/leave. */
pt_cpu_record *pt_thread_log_refill(pt_thread_log *t);
void pt_thread_log_unwind(pt_thread_log *t, const void *key, int64_t now);
/* Closes every open call at `now` and seals the current chunk's count. The thread must
 * no longer be recording. */
void pt_thread_log_close(pt_thread_log *t, int64_t now);

static inline void pt_thread_log_enter(pt_thread_log *t, const void *key, uint32_t name, int64_t now)
{
    if (PT_UNLIKELY(t->depth >= PT_MAX_DEPTH)) {
        t->overflow++;
        return;
    }
    pt_cpu_record *r = t->next;
    if (PT_UNLIKELY(r == t->limit))
        r = pt_thread_log_refill(t);
    if (PT_LIKELY(r != NULL)) {
        t->next = r + 1;
        r->start_ns = now;
        r->end_ns = -1;
        r->name = name;
        r->depth = t->depth;
    } else {
        t->dropped++;
    }
    t->stack[t->depth].key = key;
    t->stack[t->depth].record = r;
    t->depth++;
}

static inline void pt_thread_log_leave(pt_thread_log *t, const void *key, int64_t now)
{
    if (PT_UNLIKELY(t->overflow)) {
        t->overflow--;
        return;
    }
    if (PT_UNLIKELY(t->depth == 0 || t->stack[t->depth - 1].key != key)) {
        pt_thread_log_unwind(t, key, now);
        return;
    }
    pt_cpu_record *r = t->stack[--t->depth].record;
    if (r)
        r->end_ns = now;
}

#endif
