/* synth_sim.c -- the interpreter: one worker's step of the plan, simulated op by op.
 *
 * Design. model.c writes one training step as a program of ops. Running it for one
 * worker and step is a small simulation: two CPU threads (main and autograd), the
 * compute stream and the NCCL stream, each with a clock. CPU ops advance their thread's
 * clock; a launch call advances the CPU and queues the kernel, which starts at
 * max(launch end, stream free) and frees the stream when it ends; a synchronize moves the
 * CPU clock to the stream's. Durations are the nominal ones times this worker's fault
 * knobs, its persistent speed (+-1% GPU, +-2% CPU) and a bounded per-op jitter, drawn
 * from an RNG seeded by (seed, rank, step), so any worker's step can be replayed alone.
 * With `noise`, the jitter widens and some (rank, step) pairs run every kernel of the
 * step slower, as processes time-sharing one GPU do.
 *
 * Gloo. A ready bucket is copied to the host on its own side stream; a gloo thread (two,
 * taking buckets in turn) waits for that copy (cudaStreamSynchronize), takes part in the
 * CPU all-reduce until its common end, then copies the bucket back. The gloo threads'
 * events are written when the bucket is handed over, from the bucket's end time and
 * draws that depend only on (seed, rank, step, bucket), never on the op stream's RNG, so
 * a replay with or without the ends draws the same numbers. DDP's finalize (OP_FINALIZE)
 * then blocks the autograd thread, and with it the main thread's run_backward, until each
 * bucket is back.
 *
 * A pipeline block draws from a stream of its own, seeded by (replica, layer, microbatch,
 * direction), so a block moved to another stage keeps its numbers and the job without the
 * imbalance draws alike.
 *
 * A fault's own ops (marked with it in the program) run where it is injected. Where it is
 * written fixed they run on a copy of the worker that writes nothing, only to draw their
 * numbers; a fix's ops (marked `unless` the fault: DDP's buckets for a per-parameter
 * all-reduce, loader workers for single-process loading) do the same where the fault is:
 * the rest of the job is the faulty job's, draw for draw.
 *
 * The driver (synth.c) runs a worker until it needs a rendezvous end not known yet
 * (synth_run), and resumes it from what it saved (sim_state); the events come out of the
 * same run, through an emitter (synth_emit.c), when a worker is replayed from the plan
 * (synth_worker.c).
 *
 * Calls: synth_emit.c (the events, where the sim has an emitter) and synth_faults.c (the
 * plan's faults on this worker's rank); what it runs is model.c's program, read, not
 * called. */
#include "synth/synth_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LAUNCH_LATENCY_NS 1500
#define SYNC_RETURN_NS 3000
#define COMPUTE_STREAM 7
#define NCCL_STREAM 28
#define GLOO_STREAM_BASE 84             /* bucket b's copies: stream 84 + 4b, as torch's pool numbers them */
#define GLOO_PICKUP_NS 40000            /* a gloo thread takes a handed-over bucket */
#define NOISE_INFLATED_SHARE 0.25       /* (rank, step) pairs whose kernels run slower */
#define P2P_STREAM_BASE 44             /* pipeline: the streams to the stage below (44), above (45) */
#define STALL_SPREAD 0.23              /* intermittent_stall: each stall its mean +- this (250-400 ms) */

/* ------------------------------------------------------------ a worker in the plan */

/* Pipeline ranks are stage-major: stage s holds ranks s x replicas ... */
static int stage_of(const pt_synth_plan *p, int rank)
{
    return p->pipeline ? rank / p->replicas : 0;
}

static int replica_of(const pt_synth_plan *p, int rank)
{
    return p->pipeline ? rank % p->replicas : rank;
}

static const synth_program *program_of(const pt_synth_plan *p, int rank)
{
    return &p->progs[stage_of(p, rank)];
}

/* The rendezvous ids of a worker's bucket 0 and transfer key 0. */
static void rendezvous_bases(const pt_synth_plan *p, int rank, int *bucket, int *p2p)
{
    if (!p->pipeline) {
        *bucket = *p2p = 0;
        return;
    }
    *p2p = replica_of(p, rank) * p->p2p_keys;
    *bucket = p->replicas * p->p2p_keys + p->stage_rv_base[stage_of(p, rank)];
}

/* A fault's knobs on top of others' (each fault moves only its own). */
static void add_knobs(knobs *k, const knobs *fault)
{
    k->kernel *= fault->kernel;
    k->cpu *= fault->cpu;
    k->dataloader_extra_ns += fault->dataloader_extra_ns;
    k->gc_extra_ns += fault->gc_extra_ns;
    k->dtoh_ns += fault->dtoh_ns;
    k->stall_ns += fault->stall_ns;
    k->loader_wait_ns += fault->loader_wait_ns;
    k->loader_work += fault->loader_work;
    k->alloc += fault->alloc;
}

/* ------------------------------------------------------------ the interpreter */

void synth_sim_save(const sim *s, size_t pos, sim_state *st)
{
    *st = (sim_state){pos, s->rng, s->rng_outside_block, {s->cpu[0], s->cpu[1]}, s->thread, s->gpu_free, s->nccl_free,
                      {s->p2p_free[0], s->p2p_free[1]}, {s->p2p_last[0], s->p2p_last[1]}, s->microbatch, s->stopped,
                      s->stopped_at};
}

void synth_sim_restore(sim *s, const sim_state *st)
{
    s->rng = st->rng;
    s->rng_outside_block = st->rng_outside_block;
    s->cpu[0] = st->cpu[0], s->cpu[1] = st->cpu[1];
    s->thread = st->thread;
    s->gpu_free = st->gpu_free;
    s->nccl_free = st->nccl_free;
    s->p2p_free[0] = st->p2p_free[0], s->p2p_free[1] = st->p2p_free[1];
    s->p2p_last[0] = st->p2p_last[0], s->p2p_last[1] = st->p2p_last[1];
    s->microbatch = st->microbatch;
    s->stopped = st->stopped;
    s->stopped_at = st->stopped_at;
}

/* The rendezvous an op takes part in (its bucket's all-reduce, its send or receive), or -1. */
static int op_rendezvous(const sim *s, const synth_op *op)
{
    switch ((synth_op_kind)op->kind) {
    case OP_BUCKET:
    case OP_GLOO_BUCKET:
        return s->rv_bucket_base + op->index;
    case OP_P2P:
        return s->rv_p2p_base + op->index;
    default:
        return -1;
    }
}

/* The rendezvous whose end an op needs before it can run, or -1. */
int synth_op_needs_end(const sim *s, const synth_op *op)
{
    switch ((synth_op_kind)op->kind) {
    case OP_WAIT_COMM:
        return s->rv_bucket_base + s->prog->buckets - 1;
    case OP_FINALIZE:
    case OP_WAIT_BUCKET:
        return s->rv_bucket_base + op->index;
    case OP_P2P:
        return s->p2p_last[op->peer];       /* its stream's previous transfer */
    case OP_WAIT_P2P:
        return s->rv_p2p_base + op->index;
    default:
        return -1;
    }
}

static bool end_known(const sim *s, int rid)
{
    return rid < 0 || !s->known || s->known[rid];
}

/* The worker reached rendezvous rid, ready at that moment: logged for the driver. */
static void arrive(sim *s, int rid, int64_t ready)
{
    if (s->arrivals)
        s->arrivals[s->arrival_count++] = (arrival){rid, ready};
}

/* ------------------------------------------------------------ collectives' args */

/* The number a rank's all-reduce of bucket b in step `step` has in its group, as torch
 * counts them from the job's start (ProfilerStep numbers run from FIRST_STEP): only the
 * all-reduces the job makes count (a per-parameter job's DDP buckets are never made). */
int64_t synth_bucket_seq(const synth_program *prog, int step, int b)
{
    return (int64_t)(FIRST_STEP + step) * prog->live_buckets + prog->live_index[b] + 1;
}

/* The bucket from which the all-enter hangs never end. */
int synth_stuck_bucket(const pt_synth_plan *p)
{
    return p->job.fault == PT_FAULT_HANG_SKIP ? p->progs[0].buckets - 2 : 0;
}

static void group_args(pt_collective *c, const char *group, int32_t world_size, int64_t seq, int64_t nelems,
                       const char *op)
{
    memset(c, 0, sizeof *c);
    c->name = op;
    c->name_len = strlen(op);
    c->in_nelems = c->out_nelems = nelems;
    c->group_size = world_size;
    c->dtype_bytes = 4;
    c->dtype = "Float";
    c->dtype_len = 5;
    c->group = group;
    c->group_len = strlen(group);
    c->rank_start = 0;
    c->rank_stride = 1;
    c->seq = seq;
}

/* A pipeline job's gradient all-reduces run in the stage's data-parallel group ("1" for
 * stage 0, ...; its ranks consecutive); a data-parallel job's in the default group "0". */
static void bucket_group(const sim *s, pt_collective *c)
{
    const pt_synth_plan *p = s->plan;
    if (!p->pipeline)
        return;
    static const char *const names[] = {"1", "2", "3", "4", "5", "6", "7", "8"};
    int stage = stage_of(p, s->rank);
    c->group = stage < (int)PT_ARRAY_LEN(names) ? names[stage] : "9";
    c->group_len = 1;
    c->group_size = p->replicas;
    c->rank_start = stage * p->replicas;
}

/* What a rank's all-reduce of bucket b says (record_param_comms and the kernel alike),
 * with the fault's rank in the hang step changing it; false: that rank makes no such call
 * (it skipped one, so its calls run one ahead). */
static bool bucket_call(const sim *s, int b, pt_collective *c)
{
    const pt_synth_plan *p = s->plan;
    int64_t nelems = s->prog->bucket_nelems[b];
    const char *op = "allreduce";
    if ((s->active & kind_bit(p->job.fault)) && s->step == p->job.hang_step && b >= synth_stuck_bucket(p)) {
        switch (p->job.fault) {
        case PT_FAULT_HANG_MISMATCH:
            op = b == synth_stuck_bucket(p) ? "broadcast" : op;
            break;
        case PT_FAULT_HANG_SIZE:
            nelems = b == synth_stuck_bucket(p) ? PT_MAX(nelems / 2, 1) : nelems;
            break;
        case PT_FAULT_HANG_SKIP:
            if (b + 1 >= p->progs[0].buckets)
                return false;
            nelems = p->progs[0].bucket_nelems[b + 1];
            break;
        default:
            break;
        }
    }
    group_args(c, "0", p->job.workers, synth_bucket_seq(s->prog, s->step, b), nelems, op);
    bucket_group(s, c);
    return true;
}

/* A pipeline send or receive, as torch records it (bf16 activations; the point-to-point
 * calls are not numbered in the group's sequence). */
static void p2p_call(const sim *s, const synth_op *op, pt_collective *c)
{
    group_args(c, "0", s->plan->job.workers, -1, s->plan->p2p_nelems, op->send ? "send" : "recv");
    c->dtype_bytes = 2;
    c->dtype = "BFloat16";
    c->dtype_len = 8;
    c->rank_start = c->rank_stride = -1;
}

static double jitter_factor(sim *s, double spread)
{
    return s->nominal ? 1.0 : 1.0 + spread * draw(&s->rng);
}

/* The time a CPU-side duration takes on this worker: nominal x jitter x its persistent
 * speed x the host knob (cpu_contention stretches all of them alike). */
static double cpu_factor(const sim *s, double jitter)
{
    return jitter * s->speed_cpu * s->knobs.cpu;
}

/* An op's nominal CPU time on this worker, before jitter: some faults' knobs scale it. */
static int64_t nominal_cpu(const sim *s, const synth_op *op)
{
    switch (op->scale) {
    case SCALE_LOADER_WORK:
        return scaled(op->cpu_ns, s->knobs.loader_work);
    case SCALE_ALLOC:
        return scaled(op->cpu_ns, s->knobs.alloc);
    default:
        return op->cpu_ns;
    }
}

/* The part of a fault's extra time that this op takes (not stretched: it is waiting,
 * or a fixed amount of work). */
static int64_t share_of(int64_t extra, float share)
{
    return (int64_t)llround((double)extra * (double)share);
}

static int64_t cpu_time(sim *s, const synth_op *op)
{
    int64_t t = scaled(nominal_cpu(s, op), cpu_factor(s, jitter_factor(s, s->plan->cpu_spread)));
    switch (op->scale) {
    case SCALE_DATALOADER:
        return t + s->knobs.dataloader_extra_ns;
    case SCALE_GC:
        return t + s->knobs.gc_extra_ns;
    case SCALE_STALL:
        return t + share_of(s->stall_ns, op->share);
    case SCALE_LOADER_WAIT:
        return t + share_of(s->knobs.loader_wait_ns, op->share);
    default:
        return t;
    }
}

static int64_t gpu_time(sim *s, const synth_op *op)
{
    double f = jitter_factor(s, s->plan->gpu_spread);
    switch (op->scale) {
    case SCALE_KERNEL:
        return scaled(op->gpu_ns, f * s->speed_gpu * s->knobs.kernel * s->kernel_inflation);
    case SCALE_DTOD:
        return scaled(s->plan->dtod_ns, f);
    case SCALE_DTOH:
        return scaled(s->knobs.dtoh_ns, f);
    default:
        return scaled(op->gpu_ns, f);
    }
}

/* Queues GPU work of duration dur on the compute stream after a launch ending at t. */
static int64_t queue_on_stream(sim *s, int64_t t, int64_t dur)
{
    int64_t start = PT_MAX(t + LAUNCH_LATENCY_NS, s->gpu_free);
    s->gpu_free = start >= NEVER ? NEVER : start + dur;
    return start;
}

static void op_push(sim *s, const synth_op *op)
{
    if (s->em) {
        emitter *em = s->em;
        int d = em->depth[s->thread];
        if (d < MAX_FRAME_DEPTH)
            em->stack[s->thread][d] = (frame){op->name, op->name_len, s->cpu[s->thread], (pt_cpu_kind)op->cpu_kind,
                                              op->comms ? op : NULL};
        em->depth[s->thread] = d + 1;
    }
    s->cpu[s->thread] += cpu_time(s, op);
}

static void op_pop(sim *s, const synth_op *op)
{
    s->cpu[s->thread] += cpu_time(s, op);
    if (s->em && s->em->depth[s->thread] > 0) {
        emitter *em = s->em;
        int d = --em->depth[s->thread];
        if (d < MAX_FRAME_DEPTH) {
            const frame *f = &em->stack[s->thread][d];
            pt_collective coll;
            bool comms = f->comms && (f->comms->p2p ? (p2p_call(s, f->comms, &coll), true)
                                                     : bucket_call(s, f->comms->index, &coll));
            synth_emit_frame(em, f, s->cpu[s->thread], em->tid[s->thread], comms ? &coll : NULL);
        }
    }
}

/* An asynchronous call: the CPU spends `call` in the runtime API, then the GPU work of
 * `dur` queues behind the stream. Emits the API span; returns the GPU start. */
static int64_t call_async(sim *s, const synth_op *op, const char *api, size_t api_len, int64_t *dur)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    *dur = gpu_time(s, op);
    s->cpu[s->thread] += call;
    int64_t start = queue_on_stream(s, s->cpu[s->thread], *dur);
    if (s->em)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, api, api_len, call_start, call, s->em->tid[s->thread]);
    return start;
}

static void op_launch(sim *s, const synth_op *op)
{
    int64_t dur;
    int64_t start = call_async(s, op, op->name, op->name_len, &dur);
    if (s->em && start < NEVER) {
        const synth_kernel *k = &s->prog->kernels[op->index];
        synth_emit_gpu(s->em, PT_EVENT_GPU_KERNEL, k->name, k->name_len, k, start, dur, COMPUTE_STREAM, 0);
    }
}

/* Bytes a copy of that duration moves: ~1 TB/s on the device, ~10 GB/s to pageable memory. */
static int64_t copy_bytes(const synth_op *op, int64_t dur)
{
    if (op->bytes)
        return op->bytes;
    return op->scale == SCALE_DTOD ? dur * 1000 : dur * 10;
}

static void op_copy(sim *s, const synth_op *op)
{
    int64_t dur;
    int64_t start = call_async(s, op, "cudaMemcpyAsync", 15, &dur);
    if (s->em && start < NEVER)
        synth_emit_gpu(s->em, PT_EVENT_GPU_MEMCPY, op->name, op->name_len, NULL, start, dur, COMPUTE_STREAM,
                       copy_bytes(op, dur));
}

/* cudaMemcpy to pageable memory: the call returns only once the stream has drained and
 * the copy has run, so the CPU waits and the GPU does nothing else meanwhile. */
static void op_copy_sync(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    int64_t dur = gpu_time(s, op);
    int64_t start = queue_on_stream(s, call_start + call, dur);
    int64_t end = s->gpu_free;
    s->cpu[s->thread] = end >= NEVER ? NEVER : end + SYNC_RETURN_NS;
    if (s->em && start < NEVER) {
        synth_emit_span(s->em, PT_EVENT_RUNTIME, "cudaMemcpy", 10, call_start, s->cpu[s->thread] - call_start,
                        s->em->tid[s->thread]);
        synth_emit_gpu(s->em, PT_EVENT_GPU_MEMCPY, op->name, op->name_len, NULL, start, dur, COMPUTE_STREAM,
                       copy_bytes(op, dur));
    }
}

static void op_bucket(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    /* The NCCL stream waits for the gradients: everything queued on the compute stream. */
    int b = op->index;
    int64_t ready = PT_MAX(s->cpu[s->thread] + LAUNCH_LATENCY_NS, s->gpu_free);
    arrive(s, op_rendezvous(s, op), ready);
    if (!s->em)
        return;
    int64_t start = PT_MAX(ready, s->nccl_free);
    int64_t end = s->coll_end[op_rendezvous(s, op)];
    s->nccl_free = end;
    pt_collective coll;
    synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
    if (start < PT_MIN(end, s->stop_at) && bucket_call(s, b, &coll))
        synth_emit_all_reduce(s->em, &s->prog->kernels[s->prog->nccl_kernel], start, PT_MIN(end, s->stop_at), &coll,
                              NCCL_STREAM);
}

/* A synchronous all-reduce's work.wait(): the compute stream waits until bucket `index`'s
 * all-reduce is over, so nothing the backward queues after it overlaps it. */
static void op_wait_bucket(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    int64_t end = s->coll_end[s->rv_bucket_base + op->index];
    s->gpu_free = end >= NEVER ? NEVER : PT_MAX(s->gpu_free, end);
    if (s->em)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

/* A runtime call with no GPU work (cudaMalloc). */
static void op_runtime(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    if (s->em)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

/* cudaFree synchronizes the device: the call returns once the GPU has drained its
 * queue and the memory is released, so the CPU can no longer run ahead of the GPU. */
static void op_free(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t cost = cpu_time(s, op);
    int64_t drained = s->gpu_free >= NEVER ? NEVER : PT_MAX(call_start, s->gpu_free + SYNC_RETURN_NS);
    s->cpu[s->thread] = drained >= NEVER ? NEVER : drained + cost;
    if (s->em && drained < NEVER)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, s->cpu[s->thread] - call_start,
                        s->em->tid[s->thread]);
}

/* ------------------------------------------------------------ pipeline transfers */

/* A send or receive between neighbouring stages: the kernel starts on the stream to that
 * peer once launched and once the stream is free (a send also once the compute stream
 * has produced what it sends); both sides' kernels end together, when the later of the
 * two started plus the transfer. */
static void op_p2p(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    int rid = op_rendezvous(s, op);
    int last = s->p2p_last[op->peer];
    int64_t stream_free = last >= 0 ? s->coll_end[last] : s->p2p_free[op->peer];
    int64_t ready = PT_MAX(s->cpu[s->thread] + LAUNCH_LATENCY_NS, stream_free);
    if (op->send)
        ready = PT_MAX(ready, s->gpu_free);
    arrive(s, rid, ready);
    s->p2p_last[op->peer] = rid;
    if (!s->em)
        return;
    pt_collective coll;
    p2p_call(s, op, &coll);
    synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
    synth_emit_all_reduce(s->em, &s->prog->kernels[s->prog->p2p_kernel], ready, s->coll_end[rid], &coll,
                          P2P_STREAM_BASE + op->peer);
}

/* The receive's work.wait(): the compute stream waits for the data. */
static void op_wait_p2p(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    int64_t end = s->coll_end[s->rv_p2p_base + op->index];
    s->gpu_free = PT_MAX(s->gpu_free, end);
    if (s->em)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

/* A pipeline block draws from a stream of its own, seeded by what the block is (replica,
 * layer, microbatch, direction), so a layer moved to another stage keeps its numbers and
 * the ops around it keep theirs. */
static void op_block(sim *s, const synth_op *op, bool begin)
{
    if (!begin) {
        s->rng = s->rng_outside_block;
        return;
    }
    s->rng_outside_block = s->rng;
    const pt_synth_plan *p = s->plan;
    s->rng = mix64(stream_seed(p->job.seed, (uint64_t)replica_of(p, s->rank), (uint64_t)s->step, DRAW_BLOCK) ^
                   (uint64_t)op->bytes);
}

/* ------------------------------------------------------------ gloo */

/* A gloo thread's work on bucket b once its all-reduce has ended (coll_end[b]): the copy
 * back to the device, and when the thread is done. Drawn from (seed, rank, step, b)
 * alone, so the thread's events (written when the bucket is handed over) and DDP's
 * finalize (in the second phase) agree without sharing any state. */
typedef struct gloo_work {
    int64_t sync_call;               /* cudaStreamSynchronize's own cost */
    int64_t copy_start, copy_dur;    /* aten::copy_ */
    int64_t call_start, call_dur;    /* its cudaMemcpyAsync */
    int64_t htod_start, htod_dur;    /* the copy back on the bucket's stream */
    int64_t done;                    /* the thread is done: DDP's future completes */
} gloo_work;

static void gloo_copy_back(const sim *s, int b, gloo_work *g)
{
    const pt_synth_plan *p = s->plan;
    uint64_t rng = mix64(stream_seed(p->job.seed, (uint64_t)s->rank, (uint64_t)s->step, DRAW_GLOO) ^ (uint64_t)(b + 1));
    double cpu = s->nominal ? 0 : p->cpu_spread, gpu = s->nominal ? 0 : p->gpu_spread;
    double d[6];
    for (int i = 0; i < 6; i++)
        d[i] = draw(&rng);
    g->sync_call = scaled(6000, cpu_factor(s, 1 + cpu * d[0]));
    int64_t end = s->coll_end[s->rv_bucket_base + b];
    if (end >= NEVER) {
        g->copy_start = g->call_start = g->htod_start = g->done = NEVER;
        g->copy_dur = g->call_dur = g->htod_dur = 0;
        return;
    }
    g->copy_start = end + scaled(15000, cpu_factor(s, 1 + cpu * d[1]));
    g->call_start = g->copy_start + scaled(4000, cpu_factor(s, 1 + cpu * d[2]));
    g->call_dur = scaled(20000, cpu_factor(s, 1 + cpu * d[3]));
    g->copy_dur = g->call_start + g->call_dur + scaled(3000, cpu_factor(s, 1 + cpu * d[4])) - g->copy_start;
    g->htod_start = g->call_start + g->call_dur + LAUNCH_LATENCY_NS;
    double bytes = (double)s->prog->bucket_nelems[b] * 4;
    g->htod_dur = scaled((int64_t)(bytes / SYNTH_PINNED_COPY_BW), 1 + gpu * d[5]);
    g->done = g->copy_start + g->copy_dur + scaled(5000, cpu_factor(s, 1));
}

/* When the bucket's gloo thread takes it: after the hand-over, and after that thread's
 * previous bucket. */
static int64_t gloo_pickup(const sim *s, int b, int64_t handed_over)
{
    int64_t t = handed_over + scaled(GLOO_PICKUP_NS, cpu_factor(s, 1));
    if (b >= GLOO_THREADS) {
        gloo_work prev;
        gloo_copy_back(s, b - GLOO_THREADS, &prev);
        t = PT_MAX(t, prev.done);
    }
    return t;
}

/* The gloo thread's events for bucket b: gloo:all_reduce (a user_annotation, as torch
 * writes it) from pick-up to done, holding the wait for the copy to the host, then, after
 * the all-reduce's common end, the copy back. What is still running when the profiler
 * stops (a hang) is cut there; what never started is not written. */
static void emit_gloo_thread(sim *s, int b, int64_t handed_over, int64_t copied)
{
    emitter *em = s->em;
    int64_t tid = em->tid[GLOO_THREAD_0 + b % GLOO_THREADS];
    int64_t pickup = gloo_pickup(s, b, handed_over);
    if (pickup >= s->stop_at)
        return;
    gloo_work g;
    gloo_copy_back(s, b, &g);
    int64_t sync_start = pickup + scaled(2000, cpu_factor(s, 1));
    int64_t sync_end = PT_MAX(sync_start + g.sync_call, copied + SYNC_RETURN_NS);
    int64_t end = PT_MIN(g.done, s->stop_at);
    synth_emit_cpu(em, "gloo:all_reduce", 15, PT_CPU_ANNOTATION, pickup, end - pickup, tid);
    if (sync_end <= end)
        synth_emit_span(em, PT_EVENT_RUNTIME, "cudaStreamSynchronize", 21, sync_start, sync_end - sync_start, tid);
    if (g.done > s->stop_at)
        return;
    synth_emit_cpu(em, "aten::copy_", 11, PT_CPU_OPERATOR, g.copy_start, g.copy_dur, tid);
    synth_emit_span(em, PT_EVENT_RUNTIME, "cudaMemcpyAsync", 15, g.call_start, g.call_dur, tid);
    synth_emit_gpu(em, PT_EVENT_GPU_MEMCPY, "Memcpy HtoD (Pinned -> Device)", 30, NULL, g.htod_start, g.htod_dur,
                   GLOO_STREAM_BASE + 4 * b, s->prog->bucket_nelems[b] * 4);
}

/* c10d::allreduce_'s copy of bucket b to pinned host memory, on the bucket's side
 * stream once the compute stream has produced it; the bucket is ready for the CPU
 * all-reduce when the copy is done. */
static void op_gloo_bucket(sim *s, const synth_op *op)
{
    int b = op->index;
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    int64_t dur = gpu_time(s, op);
    s->cpu[s->thread] += call;
    int64_t start = PT_MAX(s->cpu[s->thread] + LAUNCH_LATENCY_NS, s->gpu_free);
    int64_t copied = start >= NEVER ? NEVER : start + dur;
    arrive(s, op_rendezvous(s, op), copied >= NEVER ? NEVER : copied + SYNC_RETURN_NS);
    if (!s->em)
        return;
    synth_emit_span(s->em, PT_EVENT_RUNTIME, "cudaMemcpyAsync", 15, call_start, call, s->em->tid[s->thread]);
    if (start >= NEVER)
        return;
    synth_emit_gpu(s->em, PT_EVENT_GPU_MEMCPY, op->name, op->name_len, NULL, start, dur, GLOO_STREAM_BASE + 4 * b,
                   op->bytes);
    emit_gloo_thread(s, b, s->cpu[s->thread], copied);
}

/* DDP's finalize for bucket b: the autograd thread blocks (nothing is written for the
 * wait) until the gloo thread is done, then makes the compute stream wait for the copy
 * back (cudaStreamWaitEvent). */
static void op_finalize(sim *s, const synth_op *op)
{
    gloo_work g;
    gloo_copy_back(s, op->index, &g);
    if (g.done >= s->stop_at) { /* a peer never came: the profiler stops us */
        s->cpu[s->thread] = s->stop_at;
        s->stopped = true;
        s->stopped_at = s->stop_at;
        return;
    }
    int64_t call_start = PT_MAX(s->cpu[s->thread], g.done);
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] = call_start + call;
    s->gpu_free = PT_MAX(s->gpu_free, g.htod_start + g.htod_dur);
    if (s->em)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

/* ------------------------------------------------------------ waits and the loop */

static void op_wait_comm(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    int64_t last = s->coll_end[s->rv_bucket_base + s->prog->buckets - 1];
    s->gpu_free = last >= NEVER ? NEVER : PT_MAX(s->gpu_free, last);
    if (s->em)
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

static void op_sync(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t done = PT_MAX(call_start + cpu_time(s, op), s->gpu_free >= NEVER ? NEVER : s->gpu_free + SYNC_RETURN_NS);
    if (done >= s->stop_at) { /* waiting for a peer that never comes: the profiler stops us */
        done = s->stop_at;
        s->stopped = true;
        s->stopped_at = done;
    }
    s->cpu[s->thread] = done;
    if (s->em && !s->stopped) /* a call still blocked when the profiler stops is never written */
        synth_emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, done - call_start,
                        s->em->tid[s->thread]);
}

/* hang_order: the faulty rank reduces a metric over a second process group ("1", every
 * rank) before the gradients and waits for it (loss.item()): its kernel runs until the
 * profiler stops, the synchronize is never written (it never ends), and its gradients'
 * all-reduces in group "0" are never made -- while the others wait in those. */
static void order_hang_call(sim *s)
{
    if (!s->em)
        return;
    int64_t t = s->cpu[s->thread];
    pt_collective coll;
    group_args(&coll, "1", s->plan->job.workers, 1, 1, "allreduce");
    frame f = {"record_param_comms", 18, t, PT_CPU_OPERATOR, NULL};
    synth_emit_frame(s->em, &f, t + 9000, s->em->tid[s->thread], &coll);
    synth_emit_span(s->em, PT_EVENT_RUNTIME, "cudaLaunchKernel", 16, t + 2000, 6000, s->em->tid[s->thread]);
    int64_t start = PT_MAX(t + 8000 + LAUNCH_LATENCY_NS, s->nccl_free);
    if (start < s->stop_at)
        synth_emit_all_reduce(s->em, &s->prog->kernels[s->prog->nccl_kernel], start, s->stop_at, &coll, NCCL_STREAM);
    s->cpu[s->thread] = t + 9000;
}

static void exec(sim *s, const synth_op *op)
{
        switch ((synth_op_kind)op->kind) {
        case OP_PUSH: op_push(s, op); break;
        case OP_POP: op_pop(s, op); break;
        case OP_LAUNCH: op_launch(s, op); break;
        case OP_COPY: op_copy(s, op); break;
        case OP_COPY_SYNC: op_copy_sync(s, op); break;
        case OP_BUCKET: op_bucket(s, op); break;
        case OP_GLOO_BUCKET: op_gloo_bucket(s, op); break;
        case OP_FINALIZE: op_finalize(s, op); break;
        case OP_WAIT_COMM: op_wait_comm(s, op); break;
        case OP_SYNC: op_sync(s, op); break;
        case OP_RUNTIME: op_runtime(s, op); break;
        case OP_FREE: op_free(s, op); break;
        case OP_WAIT_BUCKET: op_wait_bucket(s, op); break;
        case OP_P2P: op_p2p(s, op); break;
        case OP_WAIT_P2P: op_wait_p2p(s, op); break;
        case OP_BLOCK: op_block(s, op, true); break;
        case OP_BLOCK_END: op_block(s, op, false); break;
        case OP_FORK:
            s->cpu[1] = s->cpu[0];
            s->thread = 1;
            break;
        case OP_JOIN:
            s->cpu[0] = PT_MAX(s->cpu[0], s->cpu[1]);
            s->thread = 0;
            break;
        case OP_HANG:
            if (s->hang_here) {
                if (s->plan->job.fault == PT_FAULT_HANG_ORDER)
                    order_hang_call(s);
                s->stopped = true;
                s->stopped_at = s->cpu[s->thread];
            }
            break;
        }
}

/* An op that does not run here but must draw its numbers (a fixed fault's, or the fix of
 * a fault this worker has): it runs on a copy of the worker that writes nothing, so every
 * later op draws what it draws in the other job; nothing else of it is kept. */
static void exec_fixed(sim *s, const synth_op *op)
{
    sim copy = *s;
    copy.em = NULL;
    copy.arrivals = NULL;
    exec(&copy, op);
    s->rng = copy.rng;
}

/* intermittent_stall: the profiled steps whose checkpoint is saved (ProfilerStep#12,
 * #16, ...: one in four, the first in the third profiled step). */
bool synth_is_stall_step(int step)
{
    return step % STALL_PERIOD == STALL_FIRST;
}

typedef enum op_mode { MODE_RUN, MODE_DRAW, MODE_SKIP } op_mode;

/* Whether an op runs on this worker in this step, only draws its numbers, or is not
 * there at all. */
static op_mode op_mode_of(const sim *s, const synth_op *op)
{
    if (op->fault == PT_FAULT_INTERMITTENT_STALL && !synth_is_stall_step(s->step))
        return MODE_SKIP;
    if (op->fault != PT_FAULT_NONE && !(s->active & kind_bit((pt_fault_kind)op->fault)))
        return s->fixed & kind_bit((pt_fault_kind)op->fault) ? MODE_DRAW : MODE_SKIP;
    if (op->unless != PT_FAULT_NONE && (s->active & kind_bit((pt_fault_kind)op->unless)))
        return MODE_DRAW;
    return MODE_RUN;
}

/* Runs ops from `from` until the program ends, the worker stops (a hang) or an op needs
 * a rendezvous end not known yet; returns the op it stopped at. The second phase (from
 * the first op that waits on peers) draws from its own RNG stream. A rendezvous op that
 * does not run here is still reached (ready at 0), so every rendezvous hears from every
 * participant. */
size_t synth_run(sim *s, size_t from)
{
    const synth_program *prog = s->prog;
    size_t i = from;
    for (; i < prog->count && !s->stopped; i++) {
        const synth_op *op = &prog->ops[i];
        if (i == prog->phase_c)
            s->rng = s->rng_phase_c;
        op_mode mode = op_mode_of(s, op);
        if (mode == MODE_RUN || mode == MODE_DRAW)
            if (!end_known(s, synth_op_needs_end(s, op)))
                break;
        if (mode == MODE_RUN) {
            exec(s, op);
            continue;
        }
        int rid = op_rendezvous(s, op);
        if (rid >= 0)
            arrive(s, rid, 0);
        if (mode == MODE_DRAW)
            exec_fixed(s, op);
    }
    return i;
}

/* A worker's step begins with the CPU at t and both streams idle. */
void synth_sim_begin(sim *s, const pt_synth_plan *p, int rank, int step, int64_t t, emitter *em)
{
    memset(s, 0, sizeof *s);
    s->plan = p;
    s->prog = program_of(p, rank);
    s->knobs = HEALTHY_KNOBS;
    for (int i = 0; i < p->fault_count; i++) {
        const synth_fault *f = &p->faults[i];
        if (!synth_fault_on(f, rank))
            continue;
        if (f->fixed) {
            s->fixed |= kind_bit(f->kind);
        } else {
            s->active |= kind_bit(f->kind);
            add_knobs(&s->knobs, &f->knobs);
        }
    }
    s->rank = rank;
    s->step = step;
    s->rng = stream_seed(p->job.seed, (uint64_t)rank, (uint64_t)step, DRAW_OPS);
    s->rng_phase_c = stream_seed(p->job.seed, (uint64_t)rank, (uint64_t)step, DRAW_OPS_PHASE_C);
    uint64_t speed = stream_seed(p->job.seed, (uint64_t)rank, 0, DRAW_SPEED);
    s->speed_gpu = 1.0 + 0.01 * draw(&speed);
    s->speed_cpu = 1.0 + 0.02 * draw(&speed);
    s->kernel_inflation = 1.0;
    if (p->job.noise > 0) {
        uint64_t rng = stream_seed(p->job.seed, (uint64_t)rank, (uint64_t)step, DRAW_INFLATION);
        if ((draw(&rng) + 1.0) / 2.0 < NOISE_INFLATED_SHARE)
            s->kernel_inflation = 1.0 + p->job.noise * (1.0 + 0.5 * draw(&rng));
    }
    s->cpu[0] = s->cpu[1] = t;
    s->gpu_free = t;
    s->p2p_free[0] = s->p2p_free[1] = t;
    s->p2p_last[0] = s->p2p_last[1] = -1;
    rendezvous_bases(p, rank, &s->rv_bucket_base, &s->rv_p2p_base);
    if (s->knobs.stall_ns > 0 && synth_is_stall_step(step)) { /* this occurrence's length, +-STALL_SPREAD */
        uint64_t rng = stream_seed(p->job.seed, (uint64_t)rank, (uint64_t)step, DRAW_STALL);
        s->stall_ns = scaled(s->knobs.stall_ns, 1.0 + STALL_SPREAD * draw(&rng));
    }
    s->stop_at = p->stop_at;
    s->hang_here = (s->active & (kind_bit(PT_FAULT_HANG) | kind_bit(PT_FAULT_HANG_ORDER))) && step == p->job.hang_step;
    s->em = em;
}

/* The idle gap between one step's end and the next one's start (the loop's own work). */
int64_t synth_step_gap(sim *s)
{
    return scaled(20000, cpu_factor(s, jitter_factor(s, s->plan->cpu_spread)));
}

/* A worker that stopped (a hang) never reaches the rest of its rendezvous: they hear
 * NEVER from it. */
void synth_arrive_never_after(sim *s, size_t pos)
{
    for (size_t i = pos; i < s->prog->count; i++) {
        int rid = op_rendezvous(s, &s->prog->ops[i]);
        if (rid >= 0)
            arrive(s, rid, NEVER);
    }
}
