/* synth_emit.c -- the emitter: a worker's events, as the interpreter and the replay make
 * them, handed to a pt_trace_sink (the Kineto writer, the summarizer).
 *
 * Design. The interpreter (synth_sim.c) writes through an emitter, which hands each event
 * to the sink as soon as it is known: a runtime call, and right after it the GPU work it
 * launched; a CPU frame when it closes (the frames the program opens wait on a stack per
 * thread, main and autograd, in the emitter); a collective's kernel with its arguments.
 * The replay (synth_worker.c) adds each step's ProfilerStep. Once the sink refuses an
 * event, nothing more is handed to it (refused). Cost: O(1) per event, no memory.
 *
 * Calls: no other file of src/synth (the lowest of them, with synth_faults.c): synth_sim.c
 * and synth_worker.c call it. */
#include "synth/synth_state.h"

#include <stdio.h>

/* ------------------------------------------------------------ emission */

static void emit(emitter *em, const pt_event *ev)
{
    if (!em->refused && em->sink->on_event(em->sink->ctx, ev) != 0)
        em->refused = 1;
}

static void span_event(pt_event *ev, pt_event_kind kind, const char *name, size_t name_len, int64_t start,
                       int64_t dur, int64_t tid)
{
    pt_event_init(ev, kind);
    ev->name = name;
    ev->name_len = name_len;
    ev->ts_ns = start;
    ev->dur_ns = dur;
    ev->tid = tid;
}

void synth_emit_span(emitter *em, pt_event_kind kind, const char *name, size_t name_len, int64_t start,
                     int64_t dur, int64_t tid)
{
    pt_event ev;
    span_event(&ev, kind, name, name_len, start, dur, tid);
    emit(em, &ev);
}

void synth_emit_cpu(emitter *em, const char *name, size_t name_len, pt_cpu_kind cpu_kind, int64_t start, int64_t dur,
                    int64_t tid)
{
    pt_event ev;
    span_event(&ev, PT_EVENT_CPU, name, name_len, start, dur, tid);
    ev.cpu_kind = cpu_kind;
    emit(em, &ev);
}

void synth_emit_frame(emitter *em, const frame *f, int64_t end, int64_t tid, const pt_collective *coll)
{
    pt_event ev;
    span_event(&ev, PT_EVENT_CPU, f->name, f->name_len, f->start, PT_MAX(end - f->start, 0), tid);
    ev.cpu_kind = f->cpu_kind;
    if (coll)
        ev.coll = *coll;
    emit(em, &ev);
}

void synth_emit_gpu(emitter *em, pt_event_kind kind, const char *name, size_t name_len, const synth_kernel *k,
                    int64_t start, int64_t dur, int64_t stream, int64_t bytes)
{
    pt_event ev;
    span_event(&ev, kind, name, name_len, start, dur, stream);
    ev.device = em->device;
    ev.bytes = bytes;
    if (k)
        for (int i = 0; i < 3; i++)
            ev.grid[i] = k->grid[i], ev.block[i] = k->block[i];
    emit(em, &ev);
}

/* A collective's kernel (an all-reduce, a pipeline send or receive) on its stream. */
void synth_emit_all_reduce(emitter *em, const synth_kernel *k, int64_t start, int64_t end, const pt_collective *coll,
                           int64_t stream)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_GPU_KERNEL);
    ev.name = k->name;
    ev.name_len = k->name_len;
    ev.ts_ns = start;
    ev.dur_ns = end - start;
    ev.tid = stream;
    ev.device = em->device;
    for (int i = 0; i < 3; i++)
        ev.grid[i] = k->grid[i], ev.block[i] = k->block[i];
    ev.coll = *coll;
    emit(em, &ev);
}

/* One hardware sample: a counter's value at ts. */
void synth_emit_counter(emitter *em, const char *name, size_t name_len, int64_t ts, double value)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_COUNTER);
    ev.name = name;
    ev.name_len = name_len;
    ev.ts_ns = ts;
    ev.tid = em->tid[0];
    ev.value = value;
    emit(em, &ev);
}

/* A step's ProfilerStep span on the main thread, numbered from FIRST_STEP. */
void synth_emit_step(emitter *em, int step, int64_t start, int64_t end)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_STEP);
    char name[32];
    int n = snprintf(name, sizeof name, "ProfilerStep#%d", FIRST_STEP + step);
    ev.name = name;
    ev.name_len = (size_t)n;
    ev.step = FIRST_STEP + step;
    ev.ts_ns = start;
    ev.dur_ns = end - start;
    ev.tid = em->tid[0];
    emit(em, &ev);
}

