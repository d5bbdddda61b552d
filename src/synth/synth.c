/* synth.c -- the synthetic job: schedule, per-worker interpretation, expected findings.
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
 * Lock-step. Until the first op that waits on peers (the optimizer's wait for the last
 * NCCL all-reduce; gloo's finalize), nothing a worker does depends on them: the compute
 * stream does not wait for the collectives, and handing a bucket over does not block the
 * CPU. So the plan runs that first phase for every worker and keeps only, per bucket,
 * the latest moment any worker was ready: end[k] = max(latest ready[k], end[k-1]) +
 * transfer[k], the same on every rank. The second phase then gives each worker's next
 * step start. Per step that is O(workers x ops) work and O(workers) memory; emitting a
 * worker later replays its steps with the stored starts and ends, so the events come out
 * without holding any of them.
 *
 * Faults are knobs calibrated once per plan: the knob is searched (bisection on a
 * jitter-free replay of one worker alone) so that the faulty worker's step grows by
 * `severity` of a healthy one, whatever the mechanism (slower kernels, a slower host CPU,
 * a longer data loader, a blocking copy). A hang is not a knob: the hung worker's replay
 * stops at the op marked for it, its all-reduces never become ready, their ends are
 * NEVER, and everyone else blocks in the first one until the profiler stops (stop_at).
 * A job holds up to two faults on separate ranks, each calibrated alone. A fault written
 * fixed (job.without) keeps its ranks and calibration but not its knobs, and its own ops
 * (marked with their fault in the program) run on a copy of the worker that writes
 * nothing, only to draw their numbers: the rest of the job is the faulty job's, draw for
 * draw, so the two jobs' step times differ by what fixing the fault saves. */
#include "synth/synth.h"
#include "synth/model.h"
#include "summarize/classify.h"
#include "summarize/summarize.h"
#include "util/buf.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NEVER (INT64_MAX / 4)
#define MAX_FRAME_DEPTH 64
#define FIRST_STEP 10                  /* ProfilerStep numbers start here, after wait/warmup */
#define CLOCK_ORIGIN_NS 1764403200000000000LL /* 2025-11-29T08:00:00Z */
#define FIRST_STEP_TS_NS 5000000000LL
#define LAUNCH_LATENCY_NS 1500
#define SYNC_RETURN_NS 3000
#define COMPUTE_STREAM 7
#define NCCL_STREAM 28
#define GLOO_STREAM_BASE 84             /* bucket b's copies: stream 84 + 4b, as torch's pool numbers them */
#define GLOO_THREADS 2
#define GLOO_THREAD_TID 16              /* gloo thread i: pid + 16 + i */
#define AUTOGRAD_THREAD_TID 37          /* pid + 37 */
#define GLOO_PICKUP_NS 40000            /* a gloo thread takes a handed-over bucket */
#define GLOO_BUSBW 3.0                  /* bytes/ns a CPU (gloo, TCP) all-reduce reaches */
#define NOISE_INFLATED_SHARE 0.25       /* (rank, step) pairs whose kernels run slower */
#define MAX_CPU_SPREAD 0.9
#define DEVICE_NAME "NVIDIA H100 80GB HBM3"
#define NVLINK_BUSBW 60.0              /* bytes/ns (GB/s) an all-reduce reaches in a node */
#define NETWORK_BUSBW 30.0             /* ... and across nodes */
#define GPU_JITTER 0.02
#define CPU_JITTER 0.05
#define HANG_WAIT_STEPS 8              /* the profiler stops this many healthy steps after the hang
                                          began: past the 5 steps after which a hang is declared */

/* ------------------------------------------------------------ names */

static const char *const backend_names[] = {"nccl", "gloo"};

const char *pt_synth_backend_name(pt_synth_backend backend)
{
    return backend == PT_SYNTH_GLOO ? backend_names[1] : backend_names[0];
}

int pt_synth_backend_parse(const char *name, pt_synth_backend *backend)
{
    for (int i = 0; i < (int)PT_ARRAY_LEN(backend_names); i++)
        if (strcmp(name, backend_names[i]) == 0) {
            *backend = (pt_synth_backend)i;
            return 0;
        }
    return -1;
}

static const char *const fault_names[PT_FAULT_KIND_COUNT] = {
    "none", "slow_gpu", "cpu_contention", "slow_dataloader", "gc_pause",
    "blocking_dtoh", "common_memcpy", "two_slow", "hang",
    "hang_mismatch", "hang_size", "hang_skip", "hang_order", "hang_transport",
};

bool pt_fault_is_hang(pt_fault_kind kind)
{
    return kind >= PT_FAULT_HANG && kind <= PT_FAULT_HANG_TRANSPORT;
}

/* Hangs in which every rank reaches its all-reduces and they never end (from the bucket
 * stuck_bucket gives on): the calls, not a stopped rank, are what is wrong. */
static bool all_enter(pt_fault_kind kind)
{
    return kind == PT_FAULT_HANG_MISMATCH || kind == PT_FAULT_HANG_SIZE || kind == PT_FAULT_HANG_SKIP ||
           kind == PT_FAULT_HANG_TRANSPORT;
}

const char *pt_fault_name(pt_fault_kind kind)
{
    return kind >= 0 && kind < PT_FAULT_KIND_COUNT ? fault_names[kind] : "unknown";
}

int pt_fault_parse(const char *name, pt_fault_kind *kind)
{
    for (int i = 0; i < PT_FAULT_KIND_COUNT; i++)
        if (strcmp(name, fault_names[i]) == 0) {
            *kind = (pt_fault_kind)i;
            return 0;
        }
    if (strcmp(name, "healthy") == 0) {
        *kind = PT_FAULT_NONE;
        return 0;
    }
    return -1;
}

void pt_synth_job_init(pt_synth_job *job)
{
    memset(job, 0, sizeof *job);
    job->workers = 8;
    job->steps = 3;
    job->gpus_per_node = 8;
    job->layers = 12;
    job->seed = 1;
    job->fault = PT_FAULT_NONE;
    job->hang_step = -1;
    job->backend = PT_SYNTH_NCCL;
    job->noise = 0;
}

/* ------------------------------------------------------------ randomness */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t stream_seed(uint64_t seed, uint64_t rank, uint64_t step, uint64_t purpose)
{
    return mix64(mix64(mix64(seed ^ 0x5ca1ab1e) ^ rank) ^ (step * 0x100 + purpose));
}

/* splitmix64: one add and one mix per draw; uniform in [-1, 1). */
static double draw(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = mix64(*state);
    return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

/* Purposes of the stateless draws (stream_seed's last argument): each (rank, step)
 * draws them from a seed of its own, so no op's draw moves another's. */
enum {
    DRAW_OPS = 0xA,          /* the op stream, phase one */
    DRAW_OPS_PHASE_C = 0xC,  /* the op stream, phase two */
    DRAW_SPEED = 0x5,        /* persistent speed (step 0) */
    DRAW_START = 0x7,        /* first step start (step 0) */
    DRAW_TRANSFER = 0xE,     /* all-reduce transfer times (rank 0xffffffff) */
    DRAW_INFLATION = 0x1F,   /* noise: this step's kernels run slower */
    DRAW_GLOO = 0x40         /* + bucket: the gloo thread's calls and copy back */
};

/* ------------------------------------------------------------ the plan */

typedef struct knobs {
    double kernel;                    /* compute kernel time multiplier */
    double cpu;                       /* every CPU-side duration's multiplier */
    int64_t dataloader_extra_ns, gc_extra_ns;
    int64_t dtoh_ns;                  /* the blocking copy's duration */
} knobs;

#define HEALTHY_KNOBS ((knobs){1, 1, 0, 0, 0})

/* One injected fault: its ranks (none for common_memcpy: every rank), its calibrated
 * knobs (each touches only its own fields), and whether this plan writes it fixed. */
typedef struct synth_fault {
    pt_fault_kind kind;
    const int *ranks;
    int rank_count;
    double severity;
    knobs knobs;
    bool fixed;
} synth_fault;

#define MAX_FAULTS 2

struct pt_synth_plan {
    pt_synth_job job;                 /* resolved */
    synth_program prog;
    synth_fault faults[MAX_FAULTS];
    int fault_count;
    int64_t dtod_ns;                  /* common_memcpy: each DtoD copy */
    int64_t healthy_step_ns;          /* jitter-free step of one worker alone */
    int64_t transfer_ns[SYNTH_MAX_BUCKETS]; /* nominal all-reduce time per bucket */
    double gpu_spread, cpu_spread;    /* per-op jitter: +- this fraction */
    int steps_run;                    /* steps simulated: through the hang step if any */
    int64_t *start;                   /* [step][rank], steps_run + 1 rows */
    int64_t *end;                     /* [step][bucket] all-reduce end on every rank */
    int64_t stop_at;                  /* hang: when the profiler stops; NEVER otherwise */
};

static bool fault_on(const synth_fault *f, int rank)
{
    if (f->kind == PT_FAULT_COMMON_MEMCPY)
        return true;
    for (int i = 0; i < f->rank_count; i++)
        if (f->ranks[i] == rank)
            return true;
    return false;
}

/* A fault's knobs on top of others' (each fault moves only its own). */
static void add_knobs(knobs *k, const knobs *fault)
{
    k->kernel *= fault->kernel;
    k->cpu *= fault->cpu;
    k->dataloader_extra_ns += fault->dataloader_extra_ns;
    k->gc_extra_ns += fault->gc_extra_ns;
    k->dtoh_ns += fault->dtoh_ns;
}

static unsigned kind_bit(pt_fault_kind kind)
{
    return 1u << kind;
}

/* ------------------------------------------------------------ emission */

typedef struct frame {
    const char *name;
    size_t name_len;
    int64_t start;
    pt_cpu_kind cpu_kind;
    int bucket;                       /* record_param_comms of this bucket, else -1 */
} frame;

enum { MAIN_THREAD, AUTOGRAD_THREAD, GLOO_THREAD_0, THREAD_COUNT = GLOO_THREAD_0 + GLOO_THREADS };

typedef struct emitter {
    pt_trace_sink *sink;
    int64_t tid[THREAD_COUNT];        /* main, autograd, gloo threads */
    int32_t device;
    int32_t world_size;
    frame stack[2][MAX_FRAME_DEPTH];  /* main and autograd: frames the program opens */
    int depth[2];
    int refused;                      /* the sink said stop */
} emitter;

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

static void emit_span(emitter *em, pt_event_kind kind, const char *name, size_t name_len, int64_t start,
                      int64_t dur, int64_t tid)
{
    pt_event ev;
    span_event(&ev, kind, name, name_len, start, dur, tid);
    emit(em, &ev);
}

static void emit_cpu(emitter *em, const char *name, size_t name_len, pt_cpu_kind cpu_kind, int64_t start, int64_t dur,
                     int64_t tid)
{
    pt_event ev;
    span_event(&ev, PT_EVENT_CPU, name, name_len, start, dur, tid);
    ev.cpu_kind = cpu_kind;
    emit(em, &ev);
}

static void emit_frame(emitter *em, const frame *f, int64_t end, int64_t tid, const pt_collective *coll)
{
    pt_event ev;
    span_event(&ev, PT_EVENT_CPU, f->name, f->name_len, f->start, PT_MAX(end - f->start, 0), tid);
    ev.cpu_kind = f->cpu_kind;
    if (coll)
        ev.coll = *coll;
    emit(em, &ev);
}

static void emit_gpu(emitter *em, pt_event_kind kind, const char *name, size_t name_len, const synth_kernel *k,
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

static void emit_all_reduce(emitter *em, const synth_kernel *k, int64_t start, int64_t end, const pt_collective *coll)
{
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_GPU_KERNEL);
    ev.name = k->name;
    ev.name_len = k->name_len;
    ev.ts_ns = start;
    ev.dur_ns = end - start;
    ev.tid = NCCL_STREAM;
    ev.device = em->device;
    for (int i = 0; i < 3; i++)
        ev.grid[i] = k->grid[i], ev.block[i] = k->block[i];
    ev.coll = *coll;
    emit(em, &ev);
}

/* Closes every frame still open on either thread at time t. */
static void close_frames(emitter *em, int64_t t)
{
    for (int th = 0; th < 2; th++)
        while (em->depth[th] > 0)
            emit_frame(em, &em->stack[th][--em->depth[th]], t, em->tid[th], NULL);
}

/* The trace ends while frames are open: like the profiler, which writes an operator or
 * a step when it ends, the generator writes nothing for them. */
static void drop_frames(emitter *em)
{
    em->depth[0] = em->depth[1] = 0;
}

/* ------------------------------------------------------------ the interpreter */

typedef struct sim {
    const pt_synth_plan *plan;
    knobs knobs;
    unsigned active;                  /* kind_bit of the faults this worker has */
    unsigned fixed;                   /* ... and of those it would have, written fixed */
    bool nominal;                     /* no jitter, unit speed: calibration */
    int rank, step;
    uint64_t rng;
    uint64_t rng_phase_c;             /* the second phase draws from its own stream */
    double speed_gpu, speed_cpu;
    double kernel_inflation;          /* noise: this step's kernels run this much slower */
    int64_t cpu[2];
    int thread;
    int64_t gpu_free;                 /* compute stream */
    int64_t nccl_free;
    const int64_t *coll_end;          /* this step's all-reduce ends; NULL while unknown */
    int64_t ready[SYNTH_MAX_BUCKETS];
    int64_t stop_at;                  /* the profiler stops here (hang); NEVER otherwise */
    bool hang_here;                   /* this worker hangs in this step */
    bool stopped;
    int64_t stopped_at;
    emitter *em;                      /* NULL: simulate only */
} sim;

/* ------------------------------------------------------------ collectives' args */

/* The number a rank's all-reduce of bucket b in step `step` has in the default group, as
 * torch counts them from the job's start (ProfilerStep numbers run from FIRST_STEP). */
static int64_t bucket_seq(const pt_synth_plan *p, int step, int b)
{
    return (int64_t)(FIRST_STEP + step) * p->prog.buckets + b + 1;
}

/* The bucket from which the all-enter hangs never end. */
static int stuck_bucket(const pt_synth_plan *p)
{
    return p->job.fault == PT_FAULT_HANG_SKIP ? p->prog.buckets - 2 : 0;
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

/* What a rank's all-reduce of bucket b says (record_param_comms and the kernel alike),
 * with the fault's rank in the hang step changing it; false: that rank makes no such call
 * (it skipped one, so its calls run one ahead). */
static bool bucket_call(const sim *s, int b, pt_collective *c)
{
    const pt_synth_plan *p = s->plan;
    int64_t nelems = p->prog.bucket_nelems[b];
    const char *op = "allreduce";
    if ((s->active & kind_bit(p->job.fault)) && s->step == p->job.hang_step && b >= stuck_bucket(p)) {
        switch (p->job.fault) {
        case PT_FAULT_HANG_MISMATCH:
            op = b == stuck_bucket(p) ? "broadcast" : op;
            break;
        case PT_FAULT_HANG_SIZE:
            nelems = b == stuck_bucket(p) ? PT_MAX(nelems / 2, 1) : nelems;
            break;
        case PT_FAULT_HANG_SKIP:
            if (b + 1 >= p->prog.buckets)
                return false;
            nelems = p->prog.bucket_nelems[b + 1];
            break;
        default:
            break;
        }
    }
    group_args(c, "0", p->job.workers, bucket_seq(p, s->step, b), nelems, op);
    return true;
}

static double jitter_factor(sim *s, double spread)
{
    return s->nominal ? 1.0 : 1.0 + spread * draw(&s->rng);
}

static int64_t scaled(int64_t ns, double factor)
{
    return ns ? (int64_t)llround((double)ns * factor) : 0;
}

/* The time a CPU-side duration takes on this worker: nominal x jitter x its persistent
 * speed x the host knob (cpu_contention stretches all of them alike). */
static double cpu_factor(const sim *s, double jitter)
{
    return jitter * s->speed_cpu * s->knobs.cpu;
}

static int64_t cpu_time(sim *s, const synth_op *op)
{
    int64_t t = scaled(op->cpu_ns, cpu_factor(s, jitter_factor(s, s->plan->cpu_spread)));
    switch (op->scale) {
    case SCALE_DATALOADER:
        return t + s->knobs.dataloader_extra_ns;
    case SCALE_GC:
        return t + s->knobs.gc_extra_ns;
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
                                              op->comms ? op->index : -1};
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
            bool comms = f->bucket >= 0 && bucket_call(s, f->bucket, &coll);
            emit_frame(em, f, s->cpu[s->thread], em->tid[s->thread], comms ? &coll : NULL);
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
        emit_span(s->em, PT_EVENT_RUNTIME, api, api_len, call_start, call, s->em->tid[s->thread]);
    return start;
}

static void op_launch(sim *s, const synth_op *op)
{
    int64_t dur;
    int64_t start = call_async(s, op, op->name, op->name_len, &dur);
    if (s->em && start < NEVER) {
        const synth_kernel *k = &s->plan->prog.kernels[op->index];
        emit_gpu(s->em, PT_EVENT_GPU_KERNEL, k->name, k->name_len, k, start, dur, COMPUTE_STREAM, 0);
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
        emit_gpu(s->em, PT_EVENT_GPU_MEMCPY, op->name, op->name_len, NULL, start, dur, COMPUTE_STREAM,
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
        emit_span(s->em, PT_EVENT_RUNTIME, "cudaMemcpy", 10, call_start, s->cpu[s->thread] - call_start,
                  s->em->tid[s->thread]);
        emit_gpu(s->em, PT_EVENT_GPU_MEMCPY, op->name, op->name_len, NULL, start, dur, COMPUTE_STREAM,
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
    s->ready[b] = PT_MAX(s->cpu[s->thread] + LAUNCH_LATENCY_NS, s->gpu_free);
    if (!s->coll_end)
        return;
    int64_t start = PT_MAX(s->ready[b], s->nccl_free);
    int64_t end = s->coll_end[b];
    s->nccl_free = end;
    pt_collective coll;
    if (s->em) {
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
        if (start < PT_MIN(end, s->stop_at) && bucket_call(s, b, &coll))
            emit_all_reduce(s->em, &s->plan->prog.kernels[s->plan->prog.nccl_kernel], start, PT_MIN(end, s->stop_at),
                            &coll);
    }
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
    int64_t end = s->coll_end[b];
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
    double bytes = (double)p->prog.bucket_nelems[b] * 4;
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
    emit_cpu(em, "gloo:all_reduce", 15, PT_CPU_ANNOTATION, pickup, end - pickup, tid);
    if (sync_end <= end)
        emit_span(em, PT_EVENT_RUNTIME, "cudaStreamSynchronize", 21, sync_start, sync_end - sync_start, tid);
    if (g.done > s->stop_at)
        return;
    emit_cpu(em, "aten::copy_", 11, PT_CPU_OPERATOR, g.copy_start, g.copy_dur, tid);
    emit_span(em, PT_EVENT_RUNTIME, "cudaMemcpyAsync", 15, g.call_start, g.call_dur, tid);
    emit_gpu(em, PT_EVENT_GPU_MEMCPY, "Memcpy HtoD (Pinned -> Device)", 30, NULL, g.htod_start, g.htod_dur,
             GLOO_STREAM_BASE + 4 * b, s->plan->prog.bucket_nelems[b] * 4);
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
    s->ready[b] = copied >= NEVER ? NEVER : copied + SYNC_RETURN_NS;
    if (!s->em || !s->coll_end)
        return;
    emit_span(s->em, PT_EVENT_RUNTIME, "cudaMemcpyAsync", 15, call_start, call, s->em->tid[s->thread]);
    if (start >= NEVER)
        return;
    emit_gpu(s->em, PT_EVENT_GPU_MEMCPY, op->name, op->name_len, NULL, start, dur, GLOO_STREAM_BASE + 4 * b, op->bytes);
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
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

/* ------------------------------------------------------------ waits and the loop */

static void op_wait_comm(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    int64_t last = s->coll_end[s->plan->prog.buckets - 1];
    s->gpu_free = last >= NEVER ? NEVER : PT_MAX(s->gpu_free, last);
    if (s->em)
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
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
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, done - call_start, s->em->tid[s->thread]);
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
    frame f = {"record_param_comms", 18, t, PT_CPU_OPERATOR, -1};
    emit_frame(s->em, &f, t + 9000, s->em->tid[s->thread], &coll);
    emit_span(s->em, PT_EVENT_RUNTIME, "cudaLaunchKernel", 16, t + 2000, 6000, s->em->tid[s->thread]);
    int64_t start = PT_MAX(t + 8000 + LAUNCH_LATENCY_NS, s->nccl_free);
    if (start < s->stop_at)
        emit_all_reduce(s->em, &s->plan->prog.kernels[s->plan->prog.nccl_kernel], start, s->stop_at, &coll);
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

/* A fixed fault's op: it draws its numbers, on a copy of the worker that writes nothing,
 * so every later op draws what it would have drawn with the fault; nothing else of it
 * is kept. */
static void exec_fixed(sim *s, const synth_op *op)
{
    sim copy = *s;
    copy.em = NULL;
    exec(&copy, op);
    s->rng = copy.rng;
}

/* Runs ops [from, to). The second phase draws from its own RNG stream so the plan can
 * replay it without replaying the first. */
static void run(sim *s, size_t from, size_t to)
{
    const synth_program *prog = &s->plan->prog;
    for (size_t i = from; i < to && !s->stopped; i++) {
        const synth_op *op = &prog->ops[i];
        if (i == prog->phase_c)
            s->rng = s->rng_phase_c;
        if (op->fault != PT_FAULT_NONE && !(s->active & kind_bit((pt_fault_kind)op->fault))) {
            if (s->fixed & kind_bit((pt_fault_kind)op->fault))
                exec_fixed(s, op);
            continue;
        }
        exec(s, op);
    }
}

/* A worker's step begins with the CPU at t and both streams idle. */
static void sim_begin(sim *s, const pt_synth_plan *p, int rank, int step, int64_t t, emitter *em)
{
    memset(s, 0, sizeof *s);
    s->plan = p;
    s->knobs = HEALTHY_KNOBS;
    for (int i = 0; i < p->fault_count; i++) {
        const synth_fault *f = &p->faults[i];
        if (!fault_on(f, rank))
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
    s->stop_at = p->stop_at;
    s->hang_here = (s->active & (kind_bit(PT_FAULT_HANG) | kind_bit(PT_FAULT_HANG_ORDER))) && step == p->job.hang_step;
    s->em = em;
}

/* The idle gap between one step's end and the next one's start (the loop's own work). */
static int64_t step_gap(sim *s)
{
    return scaled(20000, cpu_factor(s, jitter_factor(s, s->plan->cpu_spread)));
}

/* ------------------------------------------------------------ calibration */

/* One worker alone, without jitter, with the knobs and fault ops of `active`: its
 * all-reduces cost only the transfer. Returns the step length. */
static int64_t isolated_step(const pt_synth_plan *p, const knobs *k, unsigned active)
{
    sim s;
    sim_begin(&s, p, 0, 0, 0, NULL);
    s.knobs = *k;
    s.active = active;
    s.fixed = 0;
    s.hang_here = false;
    s.nominal = true;
    s.speed_gpu = s.speed_cpu = 1.0;
    s.kernel_inflation = 1.0;
    s.stop_at = NEVER;
    run(&s, 0, p->prog.phase_c);
    int64_t end[SYNTH_MAX_BUCKETS], last = 0;
    for (int b = 0; b < p->prog.buckets; b++)
        last = end[b] = PT_MAX(s.ready[b], last) + p->transfer_ns[b];
    s.coll_end = end;
    run(&s, p->prog.phase_c, p->prog.count);
    return s.cpu[0] + step_gap(&s);
}

typedef void (*knob_setter)(pt_synth_plan *p, knobs *k, double value);

static void set_slow_gpu(pt_synth_plan *p, knobs *k, double v) { (void)p, k->kernel = v; }
static void set_contention(pt_synth_plan *p, knobs *k, double v) { (void)p, k->cpu = v; }
static void set_dataloader(pt_synth_plan *p, knobs *k, double v) { (void)p, k->dataloader_extra_ns = (int64_t)v; }
static void set_gc(pt_synth_plan *p, knobs *k, double v) { (void)p, k->gc_extra_ns = (int64_t)v; }
static void set_dtoh(pt_synth_plan *p, knobs *k, double v) { (void)p, k->dtoh_ns = (int64_t)v; }
static void set_dtod(pt_synth_plan *p, knobs *k, double v) { (void)k, p->dtod_ns = (int64_t)v; }

/* Bisection for the knob value whose isolated step is `target` long; the step grows
 * monotonically with every knob. lo is the knob's neutral value. */
static void calibrate(pt_synth_plan *p, knobs *k, unsigned active, knob_setter set, double lo, double hi,
                      int64_t target)
{
    set(p, k, hi);
    while (isolated_step(p, k, active) < target && hi < 1e12)
        lo = hi, hi *= 2, set(p, k, hi);
    for (int i = 0; i < 60 && hi - lo > 1e-6 * hi; i++) {
        double mid = (lo + hi) / 2;
        set(p, k, mid);
        if (isolated_step(p, k, active) < target)
            lo = mid;
        else
            hi = mid;
    }
    set(p, k, hi);
}

/* Each fault's knob, alone on a healthy worker (a fixed fault's too: the plan knows what
 * it fixed). */
static void calibrate_fault(pt_synth_plan *p, synth_fault *f)
{
    knobs healthy = HEALTHY_KNOBS;
    int64_t step = p->healthy_step_ns;
    int64_t target = step + (int64_t)llround(f->severity * (double)step);
    unsigned active = kind_bit(f->kind);
    f->knobs = healthy;
    switch (f->kind) {
    case PT_FAULT_SLOW_GPU:
    case PT_FAULT_TWO_SLOW:
        calibrate(p, &f->knobs, active, set_slow_gpu, 1, 2, target);
        break;
    case PT_FAULT_CPU_CONTENTION:
        calibrate(p, &f->knobs, active, set_contention, 1, 2, target);
        break;
    case PT_FAULT_SLOW_DATALOADER:
        calibrate(p, &f->knobs, active, set_dataloader, 0, (double)step, target);
        break;
    case PT_FAULT_GC_PAUSE:
        calibrate(p, &f->knobs, active, set_gc, 0, (double)step, target);
        break;
    case PT_FAULT_BLOCKING_DTOH:
        calibrate(p, &f->knobs, active, set_dtoh, 0, (double)step, target);
        break;
    case PT_FAULT_COMMON_MEMCPY:
        calibrate(p, &f->knobs, active, set_dtod, 0, (double)step / p->job.layers, target);
        break;
    default:
        break;
    }
}

static void calibrate_faults(pt_synth_plan *p)
{
    knobs healthy = HEALTHY_KNOBS;
    p->healthy_step_ns = isolated_step(p, &healthy, 0);
    for (int i = 0; i < p->fault_count; i++)
        calibrate_fault(p, &p->faults[i]);
}

/* ------------------------------------------------------------ schedule */

static void set_transfers(pt_synth_plan *p)
{
    int n = p->job.workers;
    double busbw = p->job.backend == PT_SYNTH_GLOO ? GLOO_BUSBW : n <= p->job.gpus_per_node ? NVLINK_BUSBW : NETWORK_BUSBW;
    for (int b = 0; b < p->prog.buckets; b++) {
        double bytes = (double)p->prog.bucket_nelems[b] * 4;
        double t = n > 1 ? 2.0 * (n - 1) / n * bytes / busbw : 10000;
        p->transfer_ns[b] = (int64_t)llround(t);
    }
}

static int64_t *start_row(const pt_synth_plan *p, int step)
{
    return p->start + (size_t)step * (size_t)p->job.workers;
}

static int64_t *end_row(const pt_synth_plan *p, int step)
{
    return p->end + (size_t)step * (size_t)p->prog.buckets;
}

/* Where a worker's first phase left it: the second resumes from here. */
typedef struct resume_point {
    int64_t cpu[2];
    int64_t gpu_free;
    int thread;
} resume_point;

/* The lock-step schedule: per step, every worker's first phase, the all-reduce ends,
 * then every worker's second phase. */
static void schedule(pt_synth_plan *p)
{
    int w = p->job.workers, nb = p->prog.buckets;
    resume_point *resume = pt_xmalloc((size_t)w * sizeof *resume);
    int64_t *row0 = start_row(p, 0);
    for (int r = 0; r < w; r++) {
        uint64_t rng = stream_seed(p->job.seed, (uint64_t)r, 0, DRAW_START);
        row0[r] = FIRST_STEP_TS_NS + (int64_t)llround((draw(&rng) + 1.0) * 150000.0);
    }
    p->stop_at = NEVER;
    for (int step = 0; step < p->steps_run; step++) {
        int64_t latest[SYNTH_MAX_BUCKETS];
        for (int b = 0; b < nb; b++)
            latest[b] = 0;
        const int64_t *starts = start_row(p, step);
        for (int r = 0; r < w; r++) {
            sim s;
            sim_begin(&s, p, r, step, starts[r], NULL);
            s.stop_at = NEVER;
            run(&s, 0, p->prog.phase_c);
            if (s.stopped) { /* the hung worker never reaches its all-reduces */
                for (int b = 0; b < nb; b++)
                    latest[b] = NEVER;
                continue;
            }
            for (int b = 0; b < nb; b++)
                latest[b] = PT_MAX(latest[b], s.ready[b]);
            resume[r] = (resume_point){{s.cpu[0], s.cpu[1]}, s.gpu_free, s.thread};
        }
        int64_t *ends = end_row(p, step), last = 0;
        uint64_t rng = stream_seed(p->job.seed, 0xffffffffu, (uint64_t)step, DRAW_TRANSFER);
        bool stuck = all_enter(p->job.fault) && !(p->job.without & PT_SYNTH_WITHOUT_FIRST) && step == p->job.hang_step;
        for (int b = 0; b < nb; b++) {
            int64_t transfer = scaled(p->transfer_ns[b], 1.0 + GPU_JITTER * draw(&rng));
            int64_t arrived = PT_MAX(latest[b], last);
            if (stuck && b >= stuck_bucket(p))
                arrived = NEVER; /* every rank is in it, and it never ends */
            last = ends[b] = arrived >= NEVER ? NEVER : arrived + transfer;
        }
        if (last >= NEVER) { /* hang: the profiler stops HANG_WAIT_STEPS healthy steps later */
            int64_t first = NEVER;
            for (int r = 0; r < w; r++)
                first = PT_MIN(first, starts[r]);
            p->stop_at = first + HANG_WAIT_STEPS * p->healthy_step_ns;
            break;
        }
        int64_t *next = start_row(p, step + 1);
        for (int r = 0; r < w; r++) {
            sim s;
            sim_begin(&s, p, r, step, 0, NULL);
            s.stop_at = NEVER;
            s.cpu[0] = resume[r].cpu[0];
            s.cpu[1] = resume[r].cpu[1];
            s.gpu_free = resume[r].gpu_free;
            s.thread = resume[r].thread;
            s.coll_end = ends;
            s.rng = s.rng_phase_c;
            run(&s, p->prog.phase_c, p->prog.count);
            next[r] = s.cpu[0] + step_gap(&s);
        }
    }
    free(resume);
}

/* ------------------------------------------------------------ plan lifecycle */

/* Ranks 0..workers-1, each once, none of them in `taken` (count taken_count). */
static int check_ranks(const int *ranks, int count, const int *taken, int taken_count, int workers, pt_error *err)
{
    if (count < 0 || count > PT_SYNTH_MAX_FAULT_RANKS) {
        pt_error_set(err, "at most %d faulty ranks", PT_SYNTH_MAX_FAULT_RANKS);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        if (ranks[i] < 0 || ranks[i] >= workers) {
            pt_error_set(err, "faulty rank %d is not in 0..%d", ranks[i], workers - 1);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                pt_error_set(err, "faulty rank %d is given twice", ranks[i]);
                return -1;
            }
        for (int j = 0; j < taken_count; j++)
            if (taken[j] == ranks[i]) {
                pt_error_set(err, "rank %d has the first fault already: give the second other ranks", ranks[i]);
                return -1;
            }
    }
    return 0;
}

/* The second fault: one rank's kind unlike the first, on ranks of its own (default: the
 * highest rank the first leaves healthy). */
static int resolve_second_fault(pt_synth_job *job, pt_error *err)
{
    if (job->second_fault == PT_FAULT_NONE) {
        job->second_rank_count = 0;
        job->without &= ~PT_SYNTH_WITHOUT_SECOND;
        return 0;
    }
    static const pt_fault_kind allowed[] = {PT_FAULT_SLOW_GPU, PT_FAULT_CPU_CONTENTION, PT_FAULT_SLOW_DATALOADER,
                                            PT_FAULT_GC_PAUSE, PT_FAULT_BLOCKING_DTOH};
    bool ok = false;
    for (size_t i = 0; i < PT_ARRAY_LEN(allowed); i++)
        ok |= job->second_fault == allowed[i];
    if (!ok || job->second_fault == job->fault || pt_fault_is_hang(job->fault) || job->fault == PT_FAULT_NONE) {
        pt_error_set(err, "a second fault is one of slow_gpu, cpu_contention, slow_dataloader, gc_pause and "
                          "blocking_dtoh, of another kind than a first fault that is not none or hang");
        return -1;
    }
    if (job->second_severity == 0)
        job->second_severity = 0.3;
    if (!(job->second_severity > 0 && job->second_severity <= 100)) {
        pt_error_set(err, "severity must be in (0, 100]");
        return -1;
    }
    if (job->second_rank_count == 0) {
        int r = job->workers - 1;
        for (int i = 0; i < job->fault_rank_count; i++) /* below every rank of the first */
            for (int j = 0; j < job->fault_rank_count; j++)
                if (job->fault_ranks[j] == r)
                    r--;
        if (r < 0) {
            pt_error_set(err, "no rank is left for the second fault");
            return -1;
        }
        job->second_ranks[0] = r;
        job->second_rank_count = 1;
    }
    if (check_ranks(job->second_ranks, job->second_rank_count, job->fault_ranks, job->fault_rank_count, job->workers,
                    err) != 0)
        return -1;
    if (job->fault_rank_count + job->second_rank_count >= job->workers) {
        pt_error_set(err, "every rank is faulty: there is no healthy worker to compare with");
        return -1;
    }
    return 0;
}

/* A count from 1 to max, or "WHAT must be between 1 and MAX". */
static bool count_in_range(int value, int max, const char *what, pt_error *err)
{
    if (value >= 1 && value <= max)
        return true;
    pt_error_set(err, "%s must be between 1 and %d", what, max);
    return false;
}

static int resolve_job(pt_synth_job *job, pt_error *err)
{
    if (!count_in_range(job->workers, PT_SYNTH_MAX_WORKERS, "workers", err) ||
        !count_in_range(job->steps, 10000000, "steps", err) ||
        !count_in_range(job->layers, PT_SYNTH_MAX_LAYERS, "layers", err) ||
        !count_in_range(job->gpus_per_node, 64, "gpus per node", err))
        return -1;
    if ((int)job->fault < 0 || job->fault >= PT_FAULT_KIND_COUNT) {
        pt_error_set(err, "unknown fault kind %d", (int)job->fault);
        return -1;
    }
    if (job->backend != PT_SYNTH_NCCL && job->backend != PT_SYNTH_GLOO) {
        pt_error_set(err, "unknown backend %d", (int)job->backend);
        return -1;
    }
    if (!(job->noise >= 0 && job->noise <= PT_SYNTH_MAX_NOISE)) {
        pt_error_set(err, "noise must be in [0, %g]", PT_SYNTH_MAX_NOISE);
        return -1;
    }
    if (job->severity == 0)
        job->severity = job->fault == PT_FAULT_COMMON_MEMCPY ? 0.11 : 0.3;
    if (!(job->severity > 0 && job->severity <= 100)) {
        pt_error_set(err, "severity must be in (0, 100]");
        return -1;
    }
    bool per_rank = job->fault != PT_FAULT_NONE && job->fault != PT_FAULT_COMMON_MEMCPY;
    int needed = job->fault == PT_FAULT_TWO_SLOW ? 3 : per_rank ? 2 : 1;
    if (job->workers < needed) {
        pt_error_set(err, "fault %s needs at least %d workers", pt_fault_name(job->fault), needed);
        return -1;
    }
    if (!per_rank) {
        job->fault_rank_count = 0;
    } else if (job->fault_rank_count == 0) {
        if (job->fault == PT_FAULT_TWO_SLOW) {
            job->fault_ranks[0] = 1, job->fault_ranks[1] = job->workers - 2;
            job->fault_rank_count = 2;
        } else {
            job->fault_ranks[0] = job->workers - 1;
            job->fault_rank_count = 1;
        }
    }
    if (check_ranks(job->fault_ranks, job->fault_rank_count, NULL, 0, job->workers, err) != 0)
        return -1;
    if (per_rank && job->fault_rank_count == job->workers) {
        pt_error_set(err, "every rank is faulty: there is no healthy worker to compare with");
        return -1;
    }
    if (resolve_second_fault(job, err) != 0)
        return -1;
    if (job->without & ~PT_SYNTH_WITHOUT_ALL) {
        pt_error_set(err, "unknown faults to fix (%#x)", job->without);
        return -1;
    }
    if (pt_fault_is_hang(job->fault) && job->fault != PT_FAULT_HANG && job->backend != PT_SYNTH_NCCL) {
        pt_error_set(err, "fault %s is modelled on NCCL (--backend nccl)", pt_fault_name(job->fault));
        return -1;
    }
    if (pt_fault_is_hang(job->fault)) {
        if (job->steps < 2) {
            pt_error_set(err, "a hang needs at least 2 steps: a healthy one, then the one it stops in");
            return -1;
        }
        if (job->hang_step < 0)
            job->hang_step = job->steps - 1;
        if (job->hang_step < 1 || job->hang_step >= job->steps) {
            pt_error_set(err, "a hang needs a healthy step before it: hang step must be in 1..%d", job->steps - 1);
            return -1;
        }
    } else {
        job->hang_step = -1;
    }
    return 0;
}

pt_synth_plan *pt_synth_plan_new(const pt_synth_job *job_in, pt_error *err)
{
    pt_synth_job job = *job_in;
    if (resolve_job(&job, err) != 0)
        return NULL;
    pt_synth_plan *p = pt_xcalloc(1, sizeof *p);
    p->job = job;
    p->gpu_spread = job.noise > 0 ? PT_MAX(GPU_JITTER, job.noise) : GPU_JITTER;
    p->cpu_spread = job.noise > 0 ? PT_MIN(MAX_CPU_SPREAD, PT_MAX(CPU_JITTER, job.noise * CPU_JITTER / GPU_JITTER))
                                  : CPU_JITTER;
    synth_program_build(&p->prog, &job);
    set_transfers(p);
    p->stop_at = NEVER;
    if (job.fault != PT_FAULT_NONE)
        p->faults[p->fault_count++] = (synth_fault){job.fault, p->job.fault_ranks, job.fault_rank_count,
                                                    job.severity, HEALTHY_KNOBS, (job.without & PT_SYNTH_WITHOUT_FIRST) != 0};
    if (job.second_fault != PT_FAULT_NONE)
        p->faults[p->fault_count++] =
            (synth_fault){job.second_fault, p->job.second_ranks, job.second_rank_count, job.second_severity,
                          HEALTHY_KNOBS, (job.without & PT_SYNTH_WITHOUT_SECOND) != 0};
    calibrate_faults(p);
    bool hangs = pt_fault_is_hang(job.fault) && !(job.without & PT_SYNTH_WITHOUT_FIRST);
    p->steps_run = hangs ? job.hang_step + 1 : job.steps;
    if (job.fault == PT_FAULT_HANG_SKIP && p->prog.buckets < 2) {
        pt_error_set(err, "fault hang_skip needs two gradient buckets at least (more --layers)");
        synth_program_free(&p->prog);
        free(p);
        return NULL;
    }
    p->start = pt_xmalloc((size_t)(p->steps_run + 1) * (size_t)job.workers * sizeof *p->start);
    p->end = pt_xmalloc((size_t)p->steps_run * (size_t)p->prog.buckets * sizeof *p->end);
    schedule(p);
    return p;
}

void pt_synth_plan_free(pt_synth_plan *p)
{
    if (!p)
        return;
    synth_program_free(&p->prog);
    free(p->start);
    free(p->end);
    free(p);
}

const pt_synth_job *pt_synth_plan_job(const pt_synth_plan *p)
{
    return &p->job;
}

/* ------------------------------------------------------------ identity */

static int64_t worker_pid(int rank)
{
    return 10000 + rank;
}

void pt_synth_plan_meta(const pt_synth_plan *p, int rank, pt_trace_meta *meta)
{
    pt_trace_meta_init(meta);
    meta->rank = rank;
    meta->local_rank = rank % p->job.gpus_per_node;
    meta->world_size = p->job.workers;
    meta->pid = worker_pid(rank);
    snprintf(meta->host, sizeof meta->host, "node%d", rank / p->job.gpus_per_node);
    snprintf(meta->backend, sizeof meta->backend, "%s", pt_synth_backend_name(p->job.backend));
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

/* ------------------------------------------------------------ one worker */

static void emit_step(emitter *em, int step, int64_t start, int64_t end)
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

/* Replays one step with the plan's times and streams its events. Returns the time the
 * worker's trace ends if it ends in this step, else 0. */
static int64_t emit_worker_step(const pt_synth_plan *p, int rank, int step, emitter *em)
{
    sim s;
    int64_t start = start_row(p, step)[rank];
    sim_begin(&s, p, rank, step, start, em);
    s.coll_end = end_row(p, step);
    run(&s, 0, p->prog.count);
    if (s.stopped) { /* hang: nobody finishes this step */
        drop_frames(em);
        return s.stopped_at;
    }
    emit_step(em, step, start, s.cpu[0]);
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
            (frame){synth_outer_frames[i], strlen(synth_outer_frames[i]), first - 300000 + i * 100000, PT_CPU_PYTHON};
    int64_t trace_end = 0;
    for (int step = 0; step < p->steps_run && !trace_end && !em->refused; step++)
        trace_end = emit_worker_step(p, rank, step, em);
    if (!trace_end)
        trace_end = start_row(p, p->steps_run)[rank];
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

/* ------------------------------------------------------------ expected findings */

static void render_kernel_key(pt_buf *out, const synth_kernel *k)
{
    pt_buf_append(out, k->name, k->name_len);
    if (k->grid[0] > 0)
        pt_buf_printf(out, "%d_%d_%d|%d_%d_%d", k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                      k->block[2]);
}

/* The compute kernel with the largest nominal time per step: a uniform slowdown makes it
 * the biggest excess. */
static char *top_kernel_key(const synth_program *prog)
{
    int64_t total[64] = {0};
    for (size_t i = 0; i < prog->count; i++)
        if (prog->ops[i].kind == OP_LAUNCH && prog->ops[i].index < PT_ARRAY_LEN(total))
            total[prog->ops[i].index] += prog->ops[i].gpu_ns;
    size_t best = 0;
    for (size_t k = 1; k < prog->kernel_count && k < PT_ARRAY_LEN(total); k++)
        if (total[k] > total[best])
            best = k;
    pt_buf b = PT_BUF_INIT;
    render_kernel_key(&b, &prog->kernels[best]);
    return pt_buf_take(&b);
}

/* The main thread's Python stack, as the summarizer names it, at the first op with the
 * given scale: outer frames, then every open frame, normalized ("file.py: f"). */
static char *stack_at(const synth_program *prog, synth_scale scale)
{
    const synth_op *open[MAX_FRAME_DEPTH];
    int depth = 0;
    for (size_t i = 0; i < prog->count; i++) {
        const synth_op *op = &prog->ops[i];
        if (op->kind == OP_FORK)
            break; /* the autograd thread's frames are not on the main stack */
        if (op->kind == OP_POP && depth > 0)
            depth--;
        if (op->kind != OP_PUSH)
            continue;
        if (depth < MAX_FRAME_DEPTH)
            open[depth++] = op;
        if (op->scale != scale)
            continue;
        pt_buf b = PT_BUF_INIT;
        for (int f = 0; f < 2; f++) {
            pt_normalize_frame(&b, synth_outer_frames[f], strlen(synth_outer_frames[f]));
            pt_buf_putc(&b, '|');
        }
        for (int f = 0; f < depth; f++) {
            if (f)
                pt_buf_putc(&b, '|');
            pt_normalize_frame(&b, open[f]->name, open[f]->name_len);
        }
        return pt_buf_take(&b);
    }
    return pt_xstrdup("");
}

static pt_json *rank_list(const pt_synth_plan *p, const synth_fault *f, bool all)
{
    pt_json *list = pt_json_array();
    if (all) {
        for (int r = 0; r < p->job.workers; r++)
            pt_json_push(list, pt_json_int(r));
        return list;
    }
    int ranks[PT_SYNTH_MAX_FAULT_RANKS];
    int n = f->rank_count;
    memcpy(ranks, f->ranks, (size_t)n * sizeof *ranks);
    for (int i = 1; i < n; i++) /* sorted, as the report lists ranks */
        for (int j = i; j > 0 && ranks[j - 1] > ranks[j]; j--) {
            int t = ranks[j];
            ranks[j] = ranks[j - 1], ranks[j - 1] = t;
        }
    for (int i = 0; i < n; i++)
        pt_json_push(list, pt_json_int(ranks[i]));
    return list;
}

/* What the hang analysis must name: the kind, the group and the call number (and for
 * hang_order the second group), from the same numbering the traces carry. */
static void expected_hang(const pt_synth_plan *p, pt_json *f, bool all)
{
    const pt_synth_job *job = &p->job;
    static const char *const kinds[] = {
        [PT_FAULT_HANG] = "missing",          [PT_FAULT_HANG_MISMATCH] = "mismatch",
        [PT_FAULT_HANG_SIZE] = "mismatch",    [PT_FAULT_HANG_SKIP] = "skipped",
        [PT_FAULT_HANG_ORDER] = "deadlock",   [PT_FAULT_HANG_TRANSPORT] = "stuck_in_transport",
    };
    pt_json *h = pt_json_add(f, "hang", pt_json_object());
    pt_json_add(h, "kind", pt_json_string(kinds[job->fault]));
    pt_json_add(h, "group", pt_json_string("0"));
    if (job->backend == PT_SYNTH_GLOO) { /* gloo traces carry no collective args: the stacks decide */
        pt_json_set(h, "kind", pt_json_string("stopped"));
        pt_json_set(h, "group", pt_json_null());
        return;
    }
    pt_json_add(h, "seq", pt_json_int(bucket_seq(p, job->hang_step, stuck_bucket(p))));
    if (job->fault == PT_FAULT_HANG_MISMATCH || job->fault == PT_FAULT_HANG_SIZE)
        pt_json_add(h, "mismatch", pt_json_string(job->fault == PT_FAULT_HANG_SIZE ? "size" : "operation"));
    if (job->fault == PT_FAULT_HANG_ORDER) {
        pt_json *groups = pt_json_add(h, "groups", pt_json_array());
        pt_json_push(groups, pt_json_string("0"));
        pt_json_push(groups, pt_json_string("1"));
        /* every rank waits: the others in group 0, the faulty rank in group 1 */
        pt_json_set(f, "workers", rank_list(p, &p->faults[0], true));
    }
    (void)all;
}

/* The finding one injected fault should give. */
static void add_expected_finding(const pt_synth_plan *p, const synth_fault *fault, pt_json *findings)
{
    const char *category = NULL;
    char *function = NULL;
    bool all = false;
    switch (fault->kind) {
    case PT_FAULT_SLOW_GPU:
    case PT_FAULT_TWO_SLOW:
        category = "gpu_compute", function = top_kernel_key(&p->prog);
        break;
    case PT_FAULT_CPU_CONTENTION:
        category = "host", function = pt_xstrdup("CPU-side work: runtime calls and Python");
        break;
    case PT_FAULT_SLOW_DATALOADER:
        category = "python", function = stack_at(&p->prog, SCALE_DATALOADER);
        break;
    case PT_FAULT_GC_PAUSE:
        category = "python", function = stack_at(&p->prog, SCALE_GC);
        break;
    case PT_FAULT_BLOCKING_DTOH:
        category = "gpu_memory", function = pt_xstrdup("Memcpy DtoH (Device -> Pageable)");
        break;
    case PT_FAULT_COMMON_MEMCPY:
        category = "gpu_memory", function = pt_xstrdup("Memcpy DtoD (Device -> Device)"), all = true;
        break;
    case PT_FAULT_HANG:
    case PT_FAULT_HANG_MISMATCH:
    case PT_FAULT_HANG_SIZE:
    case PT_FAULT_HANG_SKIP:
    case PT_FAULT_HANG_ORDER:
        category = "hang";
        break;
    case PT_FAULT_HANG_TRANSPORT:
        category = "hang", all = true;
        break;
    default:
        return;
    }
    pt_json *f = pt_json_push(findings, pt_json_object());
    pt_json_add(f, "category", pt_json_string(category));
    pt_json_add(f, "function", function ? pt_json_string(function) : pt_json_null());
    pt_json_add(f, "fault", pt_json_string(pt_fault_name(fault->kind)));
    pt_json_add(f, "workers", rank_list(p, fault, all));
    pt_json_add(f, "all_workers", pt_json_bool(all));
    if (!all) {
        pt_json *names = pt_json_add(f, "worker_names", pt_json_array());
        const pt_json *ranks = pt_json_get(f, "workers");
        for (size_t i = 0; i < ranks->count; i++) {
            char stem[PT_NAME_MAX], name[PT_NAME_MAX + 8];
            pt_synth_plan_worker_stem(p, (int)ranks->items[i]->integer, stem, sizeof stem);
            snprintf(name, sizeof name, "%s.json", stem);
            pt_json_push(names, pt_json_string(name));
        }
    }
    if (pt_fault_is_hang(fault->kind))
        expected_hang(p, f, all);
    if (fault->kind == PT_FAULT_HANG) {
        const synth_kernel *k = &p->prog.kernels[p->prog.nccl_kernel];
        pt_json_add(f, "hang_step", pt_json_int(FIRST_STEP + p->job.hang_step));
        pt_json_add(f, "others_blocked_in", p->job.backend == PT_SYNTH_GLOO ? pt_json_string("gloo:all_reduce")
                                                                           : pt_json_string_n(k->name, k->name_len));
    }
    free(function);
}

pt_json *pt_synth_plan_expected(const pt_synth_plan *p)
{
    const pt_synth_job *job = &p->job;
    bool any = false, hang = false;
    for (int i = 0; i < p->fault_count; i++) {
        any |= !p->faults[i].fixed;
        hang |= !p->faults[i].fixed && pt_fault_is_hang(p->faults[i].kind);
    }
    pt_json *root = pt_json_object();
    pt_json_add(root, "fault", pt_json_string(pt_fault_name(job->fault)));
    pt_json_add(root, "verdict", pt_json_string(hang ? "hang" : any ? "degraded" : "healthy"));
    pt_json_add(root, "severity", pt_json_number(job->severity));
    if (job->second_fault != PT_FAULT_NONE) {
        pt_json_add(root, "second_fault", pt_json_string(pt_fault_name(job->second_fault)));
        pt_json_add(root, "second_severity", pt_json_number(job->second_severity));
    }
    pt_json *without = pt_json_add(root, "without", pt_json_array());
    for (int i = 0; i < p->fault_count; i++)
        if (p->faults[i].fixed)
            pt_json_push(without, pt_json_string(pt_fault_name(p->faults[i].kind)));
    pt_json_add(root, "workers", pt_json_int(job->workers));
    pt_json_add(root, "steps", pt_json_int(job->steps));
    pt_json_add(root, "layers", pt_json_int(job->layers));
    pt_json_add(root, "seed", pt_json_int((int64_t)job->seed));
    pt_json_add(root, "backend", pt_json_string(pt_synth_backend_name(job->backend)));
    pt_json_add(root, "noise", pt_json_number(job->noise));
    pt_json_add(root, "healthy_step_ms", pt_json_number_rounded((double)p->healthy_step_ns / 1e6, 6));
    pt_json *findings = pt_json_add(root, "findings", pt_json_array());
    for (int i = 0; i < p->fault_count; i++)
        if (!p->faults[i].fixed)
            add_expected_finding(p, &p->faults[i], findings);
    return root;
}

int pt_synth_expected(const pt_synth_job *job, pt_json **out, pt_error *err)
{
    pt_synth_plan *p = pt_synth_plan_new(job, err);
    if (!p)
        return -1;
    *out = pt_synth_plan_expected(p);
    pt_synth_plan_free(p);
    return 0;
}
