/* recorder.c -- the recorder's slow paths: arena setup, chunk refill, unwinding (see
 * recorder.h for the design). */
#define _POSIX_C_SOURCE 200809L
#include "collect/recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far below the top a leave may find its entry. Deeper mismatches are rarer than
 * they are costly to search for, and ignoring one only loses that call's end time. */
#define UNWIND_SEARCH 16

bool pt_ticks_are_tsc;

void pt_ticks_init(void)
{
#if defined(__x86_64__)
    static bool decided;
    if (decided)
        return;
    decided = true;
    /* The kernel only keeps "tsc" as its clocksource when the TSC is invariant and in step
     * on every CPU; PERFTRACKER_CLOCK=monotonic opts out. */
    const char *force = getenv("PERFTRACKER_CLOCK");
    if (force && strcmp(force, "monotonic") == 0)
        return;
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    char source[32] = "";
    if (f) {
        if (!fgets(source, sizeof source, f))
            source[0] = '\0';
        fclose(f);
    }
    pt_ticks_are_tsc = strncmp(source, "tsc", 3) == 0 && (source[3] == '\n' || source[3] == '\0');
#endif
}

int pt_arena_init(pt_arena *a, size_t max_records)
{
    size_t chunks = (max_records + PT_CHUNK_RECORDS - 1) / PT_CHUNK_RECORDS;
    if (chunks == 0)
        chunks = 1;
    /* malloc, not calloc: the pages are touched only as chunks are used, so an unused
     * cap costs address space, not memory. */
    a->chunks = malloc(chunks * sizeof *a->chunks);
    a->chunk_count = a->chunks ? chunks : 0;
    atomic_init(&a->next_chunk, 0);
    return a->chunks ? 0 : -1;
}

void pt_arena_free(pt_arena *a)
{
    free(a->chunks);
    a->chunks = NULL;
    a->chunk_count = 0;
}

size_t pt_arena_chunks_used(const pt_arena *a)
{
    size_t n = atomic_load_explicit(&((pt_arena *)a)->next_chunk, memory_order_acquire);
    return PT_MIN(n, a->chunk_count);
}

void pt_thread_log_init(pt_thread_log *t, pt_arena *arena, uint32_t index, int64_t tid)
{
    memset(t, 0, offsetof(pt_thread_log, stack));
    t->arena = arena;
    t->index = index;
    t->tid = tid;
}

static void seal_chunk(pt_thread_log *t)
{
    if (t->chunk)
        t->chunk->used = (uint32_t)(t->next - t->chunk->records);
}

pt_cpu_record *pt_thread_log_refill(pt_thread_log *t)
{
    seal_chunk(t);
    t->chunk = NULL;
    t->next = t->limit = NULL;
    if (t->exhausted)
        return NULL;
    size_t i = atomic_fetch_add_explicit(&t->arena->next_chunk, 1, memory_order_relaxed);
    if (i >= t->arena->chunk_count) {
        t->exhausted = true; /* full stays full: every later call is counted as dropped */
        return NULL;
    }
    pt_chunk *c = &t->arena->chunks[i];
    c->thread = t->index;
    c->used = 0;
    t->chunk = c;
    t->next = c->records;
    t->limit = c->records + PT_CHUNK_RECORDS;
    return t->next;
}

void pt_thread_log_unwind(pt_thread_log *t, const void *key, int64_t now)
{
    int32_t floor = t->depth > UNWIND_SEARCH ? t->depth - UNWIND_SEARCH : 0;
    for (int32_t d = t->depth - 1; d >= floor; d--) {
        if (t->stack[d].key != key)
            continue;
        /* Entries above d lost their own leave (an exception path the hook missed):
         * they end here too. */
        while (t->depth > d) {
            pt_cpu_record *r = t->stack[--t->depth].record;
            if (r)
                r->end_ns = now;
        }
        return;
    }
    t->unmatched++;
}

void pt_thread_log_close(pt_thread_log *t, int64_t now)
{
    while (t->depth > 0) {
        pt_cpu_record *r = t->stack[--t->depth].record;
        if (r)
            r->end_ns = now;
    }
    t->overflow = 0;
    seal_chunk(t);
}
