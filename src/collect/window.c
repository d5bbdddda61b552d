/* window.c -- a profiled window's storage and its conversion to a raw trace (see
 * window.h). Writing walks the arena chunk by chunk, so each thread's calls reach the
 * trace writer in start order within one (kind, thread) block, which is what makes the
 * start-time deltas small. */
#define _POSIX_C_SOURCE 200809L
#include "collect/window.h"
#include "trace/native_writer.h"
#include "util/step_number.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pt_window *pt_window_open(const pt_window_plan *plan, const pt_window_limits *limits, int64_t first_step,
                          int64_t now, pt_error *err)
{
    pt_window *w = calloc(1, sizeof *w);
    if (!w) {
        pt_error_set(err, "out of memory opening a profiling window");
        return NULL;
    }
    w->plan = *plan;
    w->plan.steps = PT_MAX(1, PT_MIN(plan->steps, PT_MAX_WINDOW_STEPS));
    w->first_step = first_step;
    w->wall_origin_ns = pt_wall_ns() - pt_now_ns();
    w->ticks_are_ns = !pt_ticks_are_tsc;
    w->tick_begin = w->tick_end = pt_ticks();
    pt_trace_meta_init(&w->meta);
    w->sample_period_us = -1;
    w->sampler_cpu_pct = -1;
    pthread_mutex_init(&w->names_lock, NULL);
    pthread_mutex_init(&w->gpu_lock, NULL);
    pthread_mutex_init(&w->warn_lock, NULL);
    pt_names_init(&w->names);
    w->step_marks = malloc(((size_t)w->plan.steps + 1) * sizeof *w->step_marks);
    w->threads = calloc(PT_MAX_THREADS, sizeof *w->threads);
    w->gpu_cap = limits->max_gpu_records;
    w->gpu = w->gpu_cap ? malloc(w->gpu_cap * sizeof *w->gpu) : NULL;
    w->sample_cap = limits->max_samples;
    w->samples = w->sample_cap ? malloc(w->sample_cap * sizeof *w->samples) : NULL;
    bool ok = w->step_marks && w->threads && (w->gpu || !w->gpu_cap) && (w->samples || !w->sample_cap) &&
              pt_functab_init(&w->funcs, 4096) == 0 && pt_arena_init(&w->arena, limits->max_cpu_records) == 0;
    if (!ok) {
        pt_error_set(err, "out of memory opening a profiling window (PERFTRACKER_MAX_EVENTS=%zu)",
                     limits->max_cpu_records);
        pt_window_free(w);
        return NULL;
    }
    if (pt_window_name(w, "<unknown>", 9) != PT_WINDOW_UNKNOWN_NAME) {
        pt_error_set(err, "out of memory opening a profiling window");
        pt_window_free(w);
        return NULL;
    }
    w->step_marks[w->marks++] = now;
    return w;
}

void pt_window_free(pt_window *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->thread_count; i++)
        free(w->threads[i]);
    free(w->threads);
    pt_arena_free(&w->arena);
    pt_functab_free(&w->funcs);
    pt_names_free(&w->names);
    free(w->step_marks);
    free(w->gpu);
    free(w->samples);
    free(w->facts);
    pthread_mutex_destroy(&w->names_lock);
    pthread_mutex_destroy(&w->gpu_lock);
    pthread_mutex_destroy(&w->warn_lock);
    free(w);
}

pt_thread_log *pt_window_add_thread(pt_window *w, int64_t tid)
{
    if (w->thread_count == PT_MAX_THREADS) {
        w->threads_refused++;
        return NULL;
    }
    pt_thread_log *t = malloc(sizeof *t);
    if (!t) {
        w->threads_refused++;
        return NULL;
    }
    pt_thread_log_init(t, &w->arena, w->thread_count, tid);
    w->threads[w->thread_count++] = t;
    return t;
}

uint32_t pt_window_name(pt_window *w, const char *s, size_t n)
{
    pthread_mutex_lock(&w->names_lock);
    uint32_t id = pt_names_intern(&w->names, s, n);
    pthread_mutex_unlock(&w->names_lock);
    return id;
}

void pt_window_warn(pt_window *w, const char *fmt, ...)
{
    pthread_mutex_lock(&w->warn_lock);
    if (w->warning_count < PT_MAX_WARNINGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->warnings[w->warning_count++], sizeof w->warnings[0], fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&w->warn_lock);
}

void pt_window_fact_int(pt_window *w, const char *key, int64_t value)
{
    pthread_mutex_lock(&w->warn_lock);
    if (w->fact_count == w->fact_cap) {
        size_t cap = w->fact_cap ? 2 * w->fact_cap : 64;
        pt_window_fact *facts = realloc(w->facts, cap * sizeof *facts);
        if (facts) {
            w->facts = facts;
            w->fact_cap = cap;
        }
    }
    if (w->fact_count < w->fact_cap) {
        pt_window_fact *f = &w->facts[w->fact_count++];
        snprintf(f->key, sizeof f->key, "%s", key);
        f->value = value;
    }
    pthread_mutex_unlock(&w->warn_lock);
}

void pt_window_restart_first_step(pt_window *w, int64_t now, int64_t tick)
{
    if (w->marks == 1) {
        w->step_marks[0] = now;
        w->tick_begin = w->tick_end = tick;
    }
}

void pt_window_mark_step(pt_window *w, int64_t now)
{
    if (w->marks <= w->plan.steps)
        w->step_marks[w->marks++] = now;
}

void pt_window_add_gpu(pt_window *w, const pt_gpu_record *r)
{
    pthread_mutex_lock(&w->gpu_lock);
    if (!w->gpu_closed && w->gpu_count < w->gpu_cap)
        w->gpu[w->gpu_count++] = *r;
    else
        w->gpu_dropped++;
    pthread_mutex_unlock(&w->gpu_lock);
}

void pt_window_close_threads(pt_window *w)
{
    for (uint32_t i = 0; i < w->thread_count; i++)
        pt_thread_log_close(w->threads[i], w->tick_end);
}

int64_t pt_window_ticks_to_ns(const pt_window *w, int64_t ticks)
{
    int64_t ns0 = w->step_marks[0], ns1 = w->step_marks[w->marks - 1];
    int64_t span = w->tick_end - w->tick_begin;
    if (w->ticks_are_ns || span <= 0 || ns1 <= ns0)
        return ticks;
    /* 128-bit intermediate: ticks far from the reference points must not overflow. */
    __int128 scaled = (__int128)(ticks - w->tick_begin) * (ns1 - ns0);
    return ns0 + (int64_t)(scaled / span);
}

uint64_t pt_window_dropped(const pt_window *w)
{
    uint64_t n = w->gpu_dropped + w->samples_dropped;
    for (uint32_t i = 0; i < w->thread_count; i++)
        n += w->threads[i]->dropped;
    return n;
}

uint64_t pt_window_cpu_records(const pt_window *w)
{
    uint64_t n = 0;
    size_t used = pt_arena_chunks_used(&w->arena);
    for (size_t i = 0; i < used; i++)
        n += w->arena.chunks[i].used;
    return n;
}

/* ------------------------------------------------------------ writing */

typedef struct trace_out {
    pt_window *w;
    pt_native_writer *nw;
} trace_out;

static int write_cpu(trace_out *o)
{
    pt_window *w = o->w;
    size_t used = pt_arena_chunks_used(&w->arena);
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_CPU);
    for (size_t c = 0; c < used; c++) {
        const pt_chunk *chunk = &w->arena.chunks[c];
        ev.tid = w->threads[chunk->thread]->tid;
        for (uint32_t i = 0; i < chunk->used; i++) {
            const pt_cpu_record *r = &chunk->records[i];
            int64_t end = r->end_ns >= r->start_ns ? r->end_ns : w->tick_end;
            ev.ts_ns = pt_window_ticks_to_ns(w, r->start_ns);
            ev.dur_ns = PT_MAX(pt_window_ticks_to_ns(w, end) - ev.ts_ns, 0);
            ev.depth = r->depth;
            if (pt_native_writer_event(o->nw, &ev, r->name, PT_NATIVE_NO_STRING) != 0)
                return -1;
        }
    }
    return 0;
}

static int write_steps(trace_out *o)
{
    pt_window *w = o->w;
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_STEP);
    ev.tid = w->meta.pid;
    for (int32_t i = 0; i + 1 < w->marks; i++) {
        char name[48];
        ev.step = pt_step_count(w->first_step) + i; /* the number people read: the count in its source */
        ev.ts_ns = w->step_marks[i];
        ev.dur_ns = w->step_marks[i + 1] - w->step_marks[i];
        int n = snprintf(name, sizeof name, "ProfilerStep#%lld", (long long)ev.step);
        uint32_t id = pt_native_writer_string(o->nw, name, (size_t)n);
        if (id == PT_NATIVE_NO_STRING || pt_native_writer_event(o->nw, &ev, id, PT_NATIVE_NO_STRING) != 0)
            return -1;
    }
    return 0;
}

static int write_gpu(trace_out *o)
{
    pt_window *w = o->w;
    for (size_t i = 0; i < w->gpu_count; i++) {
        const pt_gpu_record *r = &w->gpu[i];
        pt_event ev;
        pt_event_init(&ev, (pt_event_kind)r->kind);
        ev.ts_ns = r->start_ns;
        ev.dur_ns = PT_MAX(r->end_ns - r->start_ns, 0);
        ev.tid = r->stream;
        ev.device = r->kind == PT_EVENT_RUNTIME ? -1 : r->device;
        memcpy(ev.grid, r->grid, sizeof ev.grid);
        memcpy(ev.block, r->block, sizeof ev.block);
        ev.bytes = r->bytes;
        ev.coll.in_nelems = r->coll_in;
        ev.coll.out_nelems = r->coll_out;
        ev.coll.group_size = r->group_size;
        ev.coll.dtype_bytes = r->dtype_bytes;
        uint32_t coll = r->coll_name == PT_NAMES_NONE ? PT_NATIVE_NO_STRING : r->coll_name;
        if (pt_native_writer_event(o->nw, &ev, r->name, coll) != 0)
            return -1;
    }
    return 0;
}

static int write_samples(trace_out *o)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_COUNTER); /* on thread 0 */
    for (size_t i = 0; i < o->w->sample_count; i++) {
        const pt_counter_record *sample = &o->w->samples[i];
        ev.ts_ns = sample->ts_ns;
        ev.value = sample->value;
        if (pt_native_writer_event(o->nw, &ev, sample->metric, PT_NATIVE_NO_STRING) != 0)
            return -1;
    }
    return 0;
}

static int write_names(trace_out *o)
{
    /* The window's name ids become string ids 0..n-1, in order. */
    pthread_mutex_lock(&o->w->names_lock);
    int rc = 0;
    for (size_t i = 0; i < o->w->names.count && rc == 0; i++)
        if (pt_native_writer_string(o->nw, o->w->names.strings[i], o->w->names.lengths[i]) != (uint32_t)i)
            rc = -1;
    pthread_mutex_unlock(&o->w->names_lock);
    return rc;
}

static int write_facts(trace_out *o)
{
    pt_window *w = o->w;
    int rc = pt_native_writer_fact(o->nw, "perftracker_version", PT_VERSION);
    rc |= pt_native_writer_fact_int(o->nw, "window_first_step", pt_step_count(w->first_step));
    rc |= pt_native_writer_fact_int(o->nw, "window_steps", w->marks - 1);
    rc |= pt_native_writer_fact_int(o->nw, "cpu_records", (int64_t)pt_window_cpu_records(w));
    rc |= pt_native_writer_fact_int(o->nw, "gpu_records", (int64_t)w->gpu_count);
    rc |= pt_native_writer_fact_int(o->nw, "hw_samples", (int64_t)w->sample_count);
    for (int i = 0; i < w->warning_count; i++)
        rc |= pt_native_writer_fact(o->nw, "warning", w->warnings[i]);
    for (size_t i = 0; i < w->fact_count; i++)
        rc |= pt_native_writer_fact_int(o->nw, w->facts[i].key, w->facts[i].value);
    return rc ? -1 : 0;
}

int pt_window_write(pt_window *w, const char *path, pt_error *err)
{
    pt_native_writer *nw = pt_native_writer_open(path, err);
    if (!nw)
        return -1;
    trace_out o = {w, nw};
    uint64_t dropped = pt_window_dropped(w);
    if (dropped)
        pt_window_warn(w, "the collector's buffers filled up: %llu events were dropped "
                          "(raise PERFTRACKER_MAX_EVENTS or profile fewer steps)",
                       (unsigned long long)dropped);
    w->meta.dropped_events = (int32_t)PT_MIN(dropped, (uint64_t)INT32_MAX);
    w->meta.hw_sample_period_us = w->sample_period_us;
    w->meta.clock_origin_ns = w->wall_origin_ns;
    snprintf(w->meta.producer, sizeof w->meta.producer, "perftracker");
    int rc = pt_native_writer_meta(nw, &w->meta);
    rc = rc ? rc : write_facts(&o);
    rc = rc ? rc : write_names(&o);
    rc = rc ? rc : write_cpu(&o);
    rc = rc ? rc : write_steps(&o);
    rc = rc ? rc : write_gpu(&o);
    rc = rc ? rc : write_samples(&o);
    if (rc != 0) {
        /* The writer failed and keeps the cause: closing reports it and removes the file. */
        if (pt_native_writer_close(nw, err) == 0) {
            unlink(path);
            pt_error_set(err, "the window's names could not be written");
        }
        return -1;
    }
    return pt_native_writer_close(nw, err);
}
