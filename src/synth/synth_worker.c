/* synth_worker.c -- one worker's trace: who the worker is (rank, host, pid, device, its
 * file's name) and its events, replayed from the plan into any pt_trace_sink (the Kineto
 * writer, the summarizer); the one-call forms that plan, emit and free.
 *
 * Design. A worker is replayed step by step with the plan's stored starts and rendezvous
 * ends: the interpreter (synth_sim.c) runs its step again, this time with an emitter
 * (synth_emit.c), and each step that ends writes its ProfilerStep; the training loop's
 * two frames enclose every step. A step a hang stops in writes no ProfilerStep, and the
 * frames still open then (the loop's too) are never written, as the profiler writes only
 * what ended. Cost: O(the worker's events) time, constant memory (the open frames).
 *
 * Calls: synth_faults.c (the backend's name, a fault's ranks), synth_emit.c (the emitter),
 * model.c (whether the job is a single GPU's, the loop's frames), synth_sim.c (the
 * interpreter) and synth.c (the plan made and freed, for the one-call forms). */
#include "synth/synth_state.h"
#include "summarize/summarize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLOCK_ORIGIN_NS 1764403200000000000LL /* 2025-11-29T08:00:00Z */
#define GLOO_THREAD_TID 16              /* gloo thread i: pid + 16 + i */
#define AUTOGRAD_THREAD_TID 37          /* pid + 37 */
#define DEVICE_NAME "NVIDIA H100 80GB HBM3"

/* ------------------------------------------------------------ open frames */

/* Closes every frame still open on either thread at time t. */
static void close_frames(emitter *em, int64_t t)
{
    for (int th = 0; th < 2; th++)
        while (em->depth[th] > 0)
            synth_emit_frame(em, &em->stack[th][--em->depth[th]], t, em->tid[th], NULL);
}

/* The trace ends while frames are open: like the profiler, which writes an operator or
 * a step when it ends, the generator writes nothing for them. */
static void drop_frames(emitter *em)
{
    em->depth[0] = em->depth[1] = 0;
}

/* ------------------------------------------------------------ identity */

static int64_t worker_pid(int rank)
{
    return 10000 + rank;
}

void pt_synth_plan_meta(const pt_synth_plan *p, int rank, pt_trace_meta *meta)
{
    pt_trace_meta_init(meta);
    meta->pid = worker_pid(rank);
    snprintf(meta->host, sizeof meta->host, "node%d", rank / p->job.gpus_per_node);
    if (!synth_job_single_gpu(&p->job)) { /* a job without torch.distributed has no distributedInfo */
        meta->rank = rank;
        meta->local_rank = rank % p->job.gpus_per_node;
        meta->world_size = p->job.workers;
        snprintf(meta->backend, sizeof meta->backend, "%s", pt_synth_backend_name(p->job.backend));
    }
    snprintf(meta->device_name, sizeof meta->device_name, "%s", DEVICE_NAME);
    meta->device_count = p->job.gpus_per_node;
    meta->clock_origin_ns = CLOCK_ORIGIN_NS;
    snprintf(meta->producer, sizeof meta->producer, "synth");
}

void pt_synth_plan_worker_stem(const pt_synth_plan *p, int rank, char *out, size_t cap)
{
    snprintf(out, cap, "node%d_%d_%lld", rank / p->job.gpus_per_node, rank % p->job.gpus_per_node,
             (long long)worker_pid(rank));
}

bool pt_synth_plan_writes(const pt_synth_plan *p, int rank)
{
    return p->job.fault != PT_FAULT_ABSENT_STRAGGLER || !synth_fault_on(&p->faults[0], rank);
}

/* ------------------------------------------------------------ one worker */

/* Replays one step with the plan's times and streams its events. Returns the time the
 * worker's trace ends if it ends in this step, else 0. */
static int64_t emit_worker_step(const pt_synth_plan *p, int rank, int step, emitter *em)
{
    sim s;
    int64_t start = start_row(p, step)[rank];
    synth_sim_begin(&s, p, rank, step, start, em);
    s.coll_end = end_row(p, step);
    synth_run(&s, 0);
    if (s.stopped) { /* hang: nobody finishes this step */
        drop_frames(em);
        return s.stopped_at;
    }
    synth_emit_step(em, step, start, s.cpu[0]);
    return 0;
}

int pt_synth_plan_worker(const pt_synth_plan *p, int rank, pt_trace_sink *sink, pt_trace_meta *meta, pt_error *err)
{
    if (rank < 0 || rank >= p->job.workers) {
        pt_error_set(err, "rank %d is not in 0..%d", rank, p->job.workers - 1);
        return -1;
    }
    pt_synth_plan_meta(p, rank, meta);
    emitter *em = pt_xcalloc(1, sizeof *em);
    em->sink = sink;
    em->tid[MAIN_THREAD] = meta->pid;
    em->tid[AUTOGRAD_THREAD] = meta->pid + AUTOGRAD_THREAD_TID;
    for (int i = 0; i < GLOO_THREADS; i++)
        em->tid[GLOO_THREAD_0 + i] = meta->pid + GLOO_THREAD_TID + i;
    em->device = meta->local_rank;
    em->world_size = p->job.workers;
    /* The training loop's own frames enclose every step. */
    int64_t first = start_row(p, 0)[rank];
    for (int i = 0; i < 2; i++)
        em->stack[0][em->depth[0]++] =
            (frame){synth_outer_frames[i], strlen(synth_outer_frames[i]), first - 300000 + i * 100000, PT_CPU_PYTHON, NULL};
    int64_t trace_end = 0;
    for (int step = 0; step < p->steps_run && !trace_end && !em->refused; step++)
        trace_end = emit_worker_step(p, rank, step, em);
    if (!trace_end)
        trace_end = start_row(p, p->steps_run)[rank];
    synth_emit_link_counters(p, rank, first, trace_end, em);
    close_frames(em, trace_end);
    int refused = em->refused;
    free(em);
    if (refused) {
        pt_error_set(err, "the consumer stopped the synthetic trace of rank %d", rank);
        return -1;
    }
    return 0;
}

int pt_synth_worker(const pt_synth_job *job, int rank, pt_trace_sink *sink, pt_trace_meta *meta, pt_error *err)
{
    pt_synth_plan *p = pt_synth_plan_new(job, err);
    if (!p)
        return -1;
    int rc = pt_synth_plan_worker(p, rank, sink, meta, err);
    pt_synth_plan_free(p);
    return rc;
}

pt_worker_summary *pt_synth_plan_summary(const pt_synth_plan *p, int rank, pt_error *err)
{
    pt_summarizer *sz = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(sz);
    pt_trace_meta meta;
    pt_worker_summary *s = NULL;
    if (pt_synth_plan_worker(p, rank, &sink, &meta, err) == 0) {
        char stem[PT_NAME_MAX], name[PT_NAME_MAX + 8];
        pt_synth_plan_worker_stem(p, rank, stem, sizeof stem);
        snprintf(name, sizeof name, "%s.json", stem);
        s = pt_summarizer_finish(sz, &meta, name, err);
    }
    pt_summarizer_free(sz);
    return s;
}

pt_worker_summary *pt_synth_summary(const pt_synth_job *job, int rank, pt_error *err)
{
    pt_synth_plan *p = pt_synth_plan_new(job, err);
    if (!p)
        return NULL;
    pt_worker_summary *s = pt_synth_plan_summary(p, rank, err);
    pt_synth_plan_free(p);
    return s;
}
