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
 * Lock-step. Work that ends at the same moment on every participant once the last one is
 * ready -- an all-reduce (every worker, or a pipeline stage's replicas), a pipeline
 * send/receive pair -- is a rendezvous: end = max(latest ready, the end of the one before
 * it on the same stream) + its transfer. The plan's driver runs every worker's step until
 * the worker needs a rendezvous end not known yet (the optimizer's wait for the last NCCL
 * all-reduce, gloo's finalize, a synchronous all-reduce's wait, a receive), ends each
 * rendezvous that heard from all its participants, and runs the waiting workers on, until
 * all finish the step; it keeps per worker only where it paused (sim_state). For a plain
 * data-parallel job that is two runs per worker and step: to the optimizer's wait (every
 * bucket then ends), and to the end. Per step that is O(workers x ops) work (x the
 * rendezvous a worker waits on one by one, for a per-parameter all-reduce or a pipeline)
 * and O(workers + rendezvous) memory; emitting a worker later replays its steps with the
 * stored starts and ends, so the events come out without holding any of them.
 *
 * A pipeline job (pipeline_imbalance) has one program per stage (its blocks, its sends and
 * receives per microbatch, GPipe); its ranks are stage-major. A block there draws from a
 * stream of its own, seeded by (replica, layer, microbatch, direction), so a block moved to
 * another stage keeps its numbers and the job without the imbalance draws alike.
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
 * nothing, only to draw their numbers; a fix's ops (marked `unless` the fault: DDP's
 * buckets for a per-parameter all-reduce, loader workers for single-process loading) do
 * the same where the fault is: the rest of the job is the faulty job's, draw for draw, so
 * the two jobs' step times differ by what fixing the fault saves. expected.json of the
 * structural kinds carries that saving, from the two plans' step ends. */
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
#define P2P_STREAM_BASE 44             /* pipeline: the streams to the stage below (44), above (45) */
#define P2P_NVLINK_BW 150.0            /* bytes/ns a send reaches within a node */
#define P2P_NETWORK_BW 25.0            /* ... and across nodes */
#define SMALL_LATENCY_NS 15000         /* a latency-bound collective's floor within a node */
#define SMALL_LATENCY_NETWORK_NS 30000 /* ... and across nodes */
#define PIPELINE_MICROBATCHES 8
#define PIPELINE_TOKENS (4 * 2048)     /* a microbatch: 4 sequences of 2048 tokens, width 768 */
#define STALL_PERIOD 4                 /* intermittent_stall: one step in four */
#define STALL_FIRST 2                  /* ... the third profiled step first */
#define STALL_SPREAD 0.23              /* ... each stall its mean +- this (250-400 ms) */
#define STALL_DEFAULT_NS 325000000LL
#define UNBUCKETED_MAX_LAYERS 80       /* 12 gradients per block and DDP's buckets: < SYNTH_MAX_BUCKETS */
#define PIPELINE_MAX_STAGES 16

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
    "unbucketed_allreduce", "unoverlapped_allreduce", "intermittent_stall", "loader_starved",
    "single_process_loader", "slow_gpu_mlp", "empty_cache", "pipeline_imbalance", "absent_straggler",
};

bool pt_fault_is_hang(pt_fault_kind kind)
{
    return kind >= PT_FAULT_HANG && kind <= PT_FAULT_HANG_TRANSPORT;
}

bool pt_fault_reports_saving(pt_fault_kind kind)
{
    return kind >= PT_FAULT_UNBUCKETED_ALLREDUCE && kind < PT_FAULT_KIND_COUNT;
}

/* Faults of every rank (no --rank): a code or configuration every worker runs. */
static bool every_rank(pt_fault_kind kind)
{
    return kind == PT_FAULT_COMMON_MEMCPY || kind == PT_FAULT_UNBUCKETED_ALLREDUCE ||
           kind == PT_FAULT_LOADER_STARVED || kind == PT_FAULT_SINGLE_PROCESS_LOADER || kind == PT_FAULT_EMPTY_CACHE;
}

/* Faults whose size follows from the model, not from --severity. */
static bool has_severity(pt_fault_kind kind)
{
    return kind != PT_FAULT_UNBUCKETED_ALLREDUCE && kind != PT_FAULT_UNOVERLAPPED_ALLREDUCE &&
           kind != PT_FAULT_PIPELINE_IMBALANCE;
}

/* A kind's --severity when none is given (0: intermittent_stall's is set from the healthy
 * step, for a 250-400 ms stall). */
static double default_severity(pt_fault_kind kind)
{
    switch (kind) {
    case PT_FAULT_COMMON_MEMCPY:
        return 0.11; /* ~10% of the step */
    case PT_FAULT_EMPTY_CACHE:
        return 0.59; /* fixing it saves ~37% */
    case PT_FAULT_INTERMITTENT_STALL:
        return 0;
    default:
        return 0.3;
    }
}

/* The fewest workers a kind makes sense with. */
static int min_workers(pt_fault_kind kind)
{
    switch (kind) {
    case PT_FAULT_NONE:
    case PT_FAULT_COMMON_MEMCPY:
    case PT_FAULT_INTERMITTENT_STALL:
    case PT_FAULT_LOADER_STARVED:
    case PT_FAULT_SINGLE_PROCESS_LOADER:
    case PT_FAULT_EMPTY_CACHE:
        return 1;
    case PT_FAULT_TWO_SLOW:
        return 3;
    default:
        return 2; /* a faulty rank and a healthy one, or peers to all-reduce with */
    }
}

/* The NCCL-only kinds: their collectives are GPU kernels. */
static bool needs_nccl(pt_fault_kind kind)
{
    return (pt_fault_is_hang(kind) && kind != PT_FAULT_HANG) || kind == PT_FAULT_UNBUCKETED_ALLREDUCE ||
           kind == PT_FAULT_UNOVERLAPPED_ALLREDUCE || kind == PT_FAULT_PIPELINE_IMBALANCE;
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
    job->layers = 0;
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
    DRAW_STALL = 0x21,       /* intermittent_stall: this occurrence's length */
    DRAW_BLOCK = 0x23,       /* pipeline: a block's own stream (with its layer, microbatch) */
    DRAW_GLOO = 0x40         /* + bucket: the gloo thread's calls and copy back */
};

/* ------------------------------------------------------------ the plan */

typedef struct knobs {
    double kernel;                    /* compute kernel time multiplier */
    double cpu;                       /* every CPU-side duration's multiplier */
    int64_t dataloader_extra_ns, gc_extra_ns;
    int64_t dtoh_ns;                  /* the blocking copy's duration */
    int64_t stall_ns;                 /* intermittent_stall: the mean stall */
    int64_t loader_wait_ns;           /* loader_starved: the wait for a batch, per step */
    double loader_work;               /* single_process_loader: its work's multiplier */
    double alloc;                     /* empty_cache: cudaFree's and cudaMalloc's multiplier */
} knobs;

#define HEALTHY_KNOBS ((knobs){1, 1, 0, 0, 0, 0, 0, 0, 0})

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

/* Every rendezvous of a step (see the driver): who takes part, which one it follows on
 * the same stream, whether the job makes it at all, and its nominal transfer. Data
 * parallel: one per bucket. Pipeline: per replica its transfers (keys), then per stage
 * its buckets. */
typedef struct rendezvous_table {
    int count;
    int *participants;
    int *prev;                        /* -1: none */
    bool *live;
    int64_t *transfer_ns;
} rendezvous_table;

struct pt_synth_plan {
    pt_synth_job job;                 /* resolved */
    synth_program *progs;             /* the step: one program, or one per pipeline stage */
    int prog_count;
    synth_fault faults[MAX_FAULTS];
    int fault_count;
    int64_t dtod_ns;                  /* common_memcpy: each DtoD copy */
    int64_t healthy_step_ns;          /* jitter-free step of one worker alone */
    double gpu_spread, cpu_spread;    /* per-op jitter: +- this fraction */
    bool pipeline;                    /* pipeline_imbalance's job */
    int stages, replicas;             /* ... stages x replicas = workers, ranks stage-major */
    int heavy_stage;                  /* ... the stage the fault gives a block more */
    int *stage_layers;                /* ... blocks per stage, as written */
    int *stage_rv_base;               /* ... a stage's first bucket among the stages' buckets */
    int p2p_keys;                     /* ... transfers per replica per step */
    int64_t p2p_nelems;               /* ... one microbatch's activations */
    rendezvous_table rv;
    int max_arrivals;                 /* rendezvous ops in the longest program */
    int steps_run;                    /* steps simulated: through the hang step if any */
    int64_t *start;                   /* [step][rank], steps_run + 1 rows */
    int64_t *finish;                  /* [step][rank] when the step (ProfilerStep) ends */
    int64_t *end;                     /* [step][rendezvous] its end on every participant */
    int64_t stop_at;                  /* hang: when the profiler stops; NEVER otherwise */
};

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

static bool fault_on(const synth_fault *f, int rank)
{
    if (every_rank(f->kind))
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
    k->stall_ns += fault->stall_ns;
    k->loader_wait_ns += fault->loader_wait_ns;
    k->loader_work += fault->loader_work;
    k->alloc += fault->alloc;
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
    const synth_op *comms;            /* record_param_comms: its op (the bucket, or the transfer) */
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

/* A collective's kernel (an all-reduce, a pipeline send or receive) on its stream. */
static void emit_all_reduce(emitter *em, const synth_kernel *k, int64_t start, int64_t end, const pt_collective *coll,
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

/* A rendezvous a worker reached, with the moment it was ready there (see the driver). */
typedef struct arrival {
    int rid;
    int64_t ready;
} arrival;

typedef struct sim {
    const pt_synth_plan *plan;
    const synth_program *prog;        /* the worker's program (its pipeline stage's) */
    knobs knobs;
    unsigned active;                  /* kind_bit of the faults this worker has */
    unsigned fixed;                   /* ... and of those it would have, written fixed */
    bool nominal;                     /* no jitter, unit speed: calibration */
    int rank, step;
    uint64_t rng;
    uint64_t rng_phase_c;             /* the second phase draws from its own stream */
    uint64_t rng_outside_block;       /* pipeline: the op stream while a block draws its own */
    double speed_gpu, speed_cpu;
    double kernel_inflation;          /* noise: this step's kernels run this much slower */
    int64_t cpu[2];
    int thread;
    int64_t gpu_free;                 /* compute stream */
    int64_t nccl_free;
    int64_t p2p_free[2];              /* pipeline: the streams to the stage below, above */
    int p2p_last[2];                  /* ... and the rendezvous last queued on each (-1) */
    int microbatch;                   /* pipeline: the microbatch the ops belong to */
    int rv_bucket_base, rv_p2p_base;  /* rendezvous id of this worker's bucket 0, p2p key 0 */
    const int64_t *coll_end;          /* this step's rendezvous ends (all-reduces, sends) */
    const bool *known;                /* which ends are known yet (NULL: all) */
    arrival *arrivals;                /* the driver's log of rendezvous reached (NULL: none) */
    int arrival_count;
    int64_t stall_ns;                 /* intermittent_stall: this step's stall (0: none) */
    int64_t stop_at;                  /* the profiler stops here (hang); NEVER otherwise */
    bool hang_here;                   /* this worker hangs in this step */
    bool stopped;
    int64_t stopped_at;
    emitter *em;                      /* NULL: simulate only */
} sim;

/* What running ops changes in a sim: a worker the driver pauses resumes from it. */
typedef struct sim_state {
    size_t pos;                       /* the next op */
    uint64_t rng, rng_outside_block;
    int64_t cpu[2];
    int thread;
    int64_t gpu_free, nccl_free, p2p_free[2];
    int p2p_last[2];
    int microbatch;
    bool stopped;
    int64_t stopped_at;
} sim_state;

static void sim_save(const sim *s, size_t pos, sim_state *st)
{
    *st = (sim_state){pos, s->rng, s->rng_outside_block, {s->cpu[0], s->cpu[1]}, s->thread, s->gpu_free, s->nccl_free,
                      {s->p2p_free[0], s->p2p_free[1]}, {s->p2p_last[0], s->p2p_last[1]}, s->microbatch, s->stopped,
                      s->stopped_at};
}

static void sim_restore(sim *s, const sim_state *st)
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
static int op_needs_end(const sim *s, const synth_op *op)
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
static int64_t bucket_seq(const synth_program *prog, int step, int b)
{
    return (int64_t)(FIRST_STEP + step) * prog->live_buckets + prog->live_index[b] + 1;
}

/* The bucket from which the all-enter hangs never end. */
static int stuck_bucket(const pt_synth_plan *p)
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
    if ((s->active & kind_bit(p->job.fault)) && s->step == p->job.hang_step && b >= stuck_bucket(p)) {
        switch (p->job.fault) {
        case PT_FAULT_HANG_MISMATCH:
            op = b == stuck_bucket(p) ? "broadcast" : op;
            break;
        case PT_FAULT_HANG_SIZE:
            nelems = b == stuck_bucket(p) ? PT_MAX(nelems / 2, 1) : nelems;
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
    group_args(c, "0", p->job.workers, bucket_seq(s->prog, s->step, b), nelems, op);
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
        const synth_kernel *k = &s->prog->kernels[op->index];
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
    int64_t ready = PT_MAX(s->cpu[s->thread] + LAUNCH_LATENCY_NS, s->gpu_free);
    arrive(s, op_rendezvous(s, op), ready);
    if (!s->em)
        return;
    int64_t start = PT_MAX(ready, s->nccl_free);
    int64_t end = s->coll_end[op_rendezvous(s, op)];
    s->nccl_free = end;
    pt_collective coll;
    emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
    if (start < PT_MIN(end, s->stop_at) && bucket_call(s, b, &coll))
        emit_all_reduce(s->em, &s->prog->kernels[s->prog->nccl_kernel], start, PT_MIN(end, s->stop_at), &coll,
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
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
}

/* A runtime call with no GPU work (cudaMalloc). */
static void op_runtime(sim *s, const synth_op *op)
{
    int64_t call_start = s->cpu[s->thread];
    int64_t call = cpu_time(s, op);
    s->cpu[s->thread] += call;
    if (s->em)
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
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
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, s->cpu[s->thread] - call_start,
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
    emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
    emit_all_reduce(s->em, &s->prog->kernels[s->prog->p2p_kernel], ready, s->coll_end[rid], &coll,
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
        emit_span(s->em, PT_EVENT_RUNTIME, op->name, op->name_len, call_start, call, s->em->tid[s->thread]);
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
    emit_cpu(em, "gloo:all_reduce", 15, PT_CPU_ANNOTATION, pickup, end - pickup, tid);
    if (sync_end <= end)
        emit_span(em, PT_EVENT_RUNTIME, "cudaStreamSynchronize", 21, sync_start, sync_end - sync_start, tid);
    if (g.done > s->stop_at)
        return;
    emit_cpu(em, "aten::copy_", 11, PT_CPU_OPERATOR, g.copy_start, g.copy_dur, tid);
    emit_span(em, PT_EVENT_RUNTIME, "cudaMemcpyAsync", 15, g.call_start, g.call_dur, tid);
    emit_gpu(em, PT_EVENT_GPU_MEMCPY, "Memcpy HtoD (Pinned -> Device)", 30, NULL, g.htod_start, g.htod_dur,
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
    int64_t last = s->coll_end[s->rv_bucket_base + s->prog->buckets - 1];
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
    frame f = {"record_param_comms", 18, t, PT_CPU_OPERATOR, NULL};
    emit_frame(s->em, &f, t + 9000, s->em->tid[s->thread], &coll);
    emit_span(s->em, PT_EVENT_RUNTIME, "cudaLaunchKernel", 16, t + 2000, 6000, s->em->tid[s->thread]);
    int64_t start = PT_MAX(t + 8000 + LAUNCH_LATENCY_NS, s->nccl_free);
    if (start < s->stop_at)
        emit_all_reduce(s->em, &s->prog->kernels[s->prog->nccl_kernel], start, s->stop_at, &coll, NCCL_STREAM);
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
static bool is_stall_step(int step)
{
    return step % STALL_PERIOD == STALL_FIRST;
}

typedef enum op_mode { MODE_RUN, MODE_DRAW, MODE_SKIP } op_mode;

/* Whether an op runs on this worker in this step, only draws its numbers, or is not
 * there at all. */
static op_mode op_mode_of(const sim *s, const synth_op *op)
{
    if (op->fault == PT_FAULT_INTERMITTENT_STALL && !is_stall_step(s->step))
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
static size_t run(sim *s, size_t from)
{
    const synth_program *prog = s->prog;
    size_t i = from;
    for (; i < prog->count && !s->stopped; i++) {
        const synth_op *op = &prog->ops[i];
        if (i == prog->phase_c)
            s->rng = s->rng_phase_c;
        op_mode mode = op_mode_of(s, op);
        if (mode == MODE_RUN || mode == MODE_DRAW)
            if (!end_known(s, op_needs_end(s, op)))
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
static void sim_begin(sim *s, const pt_synth_plan *p, int rank, int step, int64_t t, emitter *em)
{
    memset(s, 0, sizeof *s);
    s->plan = p;
    s->prog = program_of(p, rank);
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
    s->p2p_free[0] = s->p2p_free[1] = t;
    s->p2p_last[0] = s->p2p_last[1] = -1;
    rendezvous_bases(p, rank, &s->rv_bucket_base, &s->rv_p2p_base);
    if (s->knobs.stall_ns > 0 && is_stall_step(step)) { /* this occurrence's length, +-STALL_SPREAD */
        uint64_t rng = stream_seed(p->job.seed, (uint64_t)rank, (uint64_t)step, DRAW_STALL);
        s->stall_ns = scaled(s->knobs.stall_ns, 1.0 + STALL_SPREAD * draw(&rng));
    }
    s->stop_at = p->stop_at;
    s->hang_here = (s->active & (kind_bit(PT_FAULT_HANG) | kind_bit(PT_FAULT_HANG_ORDER))) && step == p->job.hang_step;
    s->em = em;
}

/* The idle gap between one step's end and the next one's start (the loop's own work). */
static int64_t step_gap(sim *s)
{
    return scaled(20000, cpu_factor(s, jitter_factor(s, s->plan->cpu_spread)));
}

/* ------------------------------------------------------------ the lock-step driver */

/* A step's rendezvous as the driver resolves them: an all-reduce (every worker, or a
 * pipeline stage's replicas) or a send/receive pair ends on every participant at the same
 * moment, once it has heard from all of them: max(latest ready, the end of the one before
 * it on the same stream) + its transfer. A rendezvous no participant runs (a per-parameter
 * job's DDP buckets) ends when the one before it does. */
typedef struct rv_step {
    int count;
    int64_t *latest;           /* latest ready among the participants heard from */
    int *heard;
    bool *known;               /* end[] known */
    int64_t *end;              /* the ends (the plan's row for the step) */
    const int64_t *transfer;   /* this step's transfer per rendezvous */
    int one_participant;       /* calibration: a worker alone */
    const bool *live;          /* which rendezvous the job makes (the plan's, or a worker alone's) */
    int stuck_from;            /* an all-enter hang's step: rendezvous from here never end; else -1 */
    bool never;                /* some end is NEVER: the job hangs in this step */
} rv_step;

static void rv_begin(const pt_synth_plan *p, rv_step *rv, int64_t *end, const int64_t *transfer)
{
    rv->count = p->rv.count;
    memset(rv->latest, 0, (size_t)rv->count * sizeof *rv->latest);
    memset(rv->heard, 0, (size_t)rv->count * sizeof *rv->heard);
    memset(rv->known, 0, (size_t)rv->count * sizeof *rv->known);
    rv->end = end;
    rv->transfer = transfer;
    rv->stuck_from = -1;
    rv->never = false;
    rv->live = p->rv.live;
}

static void rv_alloc(const pt_synth_plan *p, rv_step *rv)
{
    size_t n = p->rv.count > 0 ? (size_t)p->rv.count : 1;
    rv->latest = pt_xcalloc(n, sizeof *rv->latest);
    rv->heard = pt_xcalloc(n, sizeof *rv->heard);
    rv->known = pt_xcalloc(n, sizeof *rv->known);
    rv->one_participant = 0;
}

static void rv_free(rv_step *rv)
{
    free(rv->latest);
    free(rv->heard);
    free(rv->known);
}

static void rv_hear(rv_step *rv, const arrival *a, int n)
{
    for (int i = 0; i < n; i++) {
        rv->latest[a[i].rid] = PT_MAX(rv->latest[a[i].rid], a[i].ready);
        rv->heard[a[i].rid]++;
    }
}

/* Ends every rendezvous that has heard from all its participants and whose predecessor
 * has ended. Returns whether any did. */
static bool rv_resolve(const pt_synth_plan *p, rv_step *rv)
{
    bool any = false;
    for (int k = 0; k < rv->count; k++) {
        int prev = p->rv.prev[k];
        int participants = rv->one_participant ? 1 : p->rv.participants[k];
        if (rv->known[k] || rv->heard[k] < participants || (prev >= 0 && !rv->known[prev]))
            continue;
        int64_t base = prev >= 0 ? rv->end[prev] : 0;
        int64_t end = base;
        if (rv->live[k]) {
            int64_t arrived = PT_MAX(rv->latest[k], base);
            if (rv->stuck_from >= 0 && k >= rv->stuck_from)
                arrived = NEVER; /* every rank is in it, and it never ends */
            end = arrived >= NEVER ? NEVER : arrived + rv->transfer[k];
        }
        rv->end[k] = end;
        rv->known[k] = true;
        rv->never |= end >= NEVER;
        any = true;
    }
    return any;
}

/* A worker that stopped (a hang) never reaches the rest of its rendezvous: they hear
 * NEVER from it. */
static void arrive_never_after(sim *s, size_t pos)
{
    for (size_t i = pos; i < s->prog->count; i++) {
        int rid = op_rendezvous(s, &s->prog->ops[i]);
        if (rid >= 0)
            arrive(s, rid, NEVER);
    }
}

static _Noreturn void driver_stuck(void)
{
    fprintf(stderr, "perftracker synth: internal error: the workers wait for each other\n");
    abort();
}

/* ------------------------------------------------------------ calibration */

/* Which buckets a worker alone with the faults of `active` makes (the plan's liveness is
 * the whole job's; a healthy worker of a per-parameter job still makes DDP's). */
static void alone_live(const pt_synth_plan *p, const synth_program *prog, unsigned active, bool *live)
{
    for (int k = 0; k < p->rv.count; k++)
        live[k] = p->rv.live[k];
    for (size_t i = 0; i < prog->count; i++) {
        const synth_op *op = &prog->ops[i];
        if (op->kind != OP_BUCKET && op->kind != OP_GLOO_BUCKET)
            continue;
        bool has = op->fault != PT_FAULT_NONE && (active & kind_bit((pt_fault_kind)op->fault));
        bool fixes = op->unless != PT_FAULT_NONE && !(active & kind_bit((pt_fault_kind)op->unless));
        live[op->index] = has || fixes || (op->fault == PT_FAULT_NONE && op->unless == PT_FAULT_NONE);
    }
}

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
    rv_step rv;
    rv_alloc(p, &rv);
    int64_t *end = pt_xcalloc(p->rv.count > 0 ? (size_t)p->rv.count : 1, sizeof *end);
    arrival *log = pt_xmalloc((size_t)PT_MAX(p->max_arrivals, 1) * sizeof *log);
    rv_begin(p, &rv, end, p->rv.transfer_ns);
    rv.one_participant = 1;
    bool *live = pt_xcalloc(p->rv.count > 0 ? (size_t)p->rv.count : 1, sizeof *live);
    alone_live(p, s.prog, active, live);
    rv.live = live;
    s.coll_end = end;
    s.known = rv.known;
    s.arrivals = log;
    size_t pos = 0;
    for (;;) {
        s.arrival_count = 0;
        pos = run(&s, pos);
        rv_hear(&rv, log, s.arrival_count);
        if (pos == s.prog->count || s.stopped)
            break;
        if (!rv_resolve(p, &rv))
            driver_stuck();
    }
    int64_t step = s.cpu[0] + step_gap(&s);
    free(live);
    free(log);
    free(end);
    rv_free(&rv);
    return step;
}

typedef void (*knob_setter)(pt_synth_plan *p, knobs *k, double value);

static void set_slow_gpu(pt_synth_plan *p, knobs *k, double v) { (void)p, k->kernel = v; }
static void set_contention(pt_synth_plan *p, knobs *k, double v) { (void)p, k->cpu = v; }
static void set_dataloader(pt_synth_plan *p, knobs *k, double v) { (void)p, k->dataloader_extra_ns = (int64_t)v; }
static void set_gc(pt_synth_plan *p, knobs *k, double v) { (void)p, k->gc_extra_ns = (int64_t)v; }
static void set_dtoh(pt_synth_plan *p, knobs *k, double v) { (void)p, k->dtoh_ns = (int64_t)v; }
static void set_dtod(pt_synth_plan *p, knobs *k, double v) { (void)k, p->dtod_ns = (int64_t)v; }
static void set_loader_wait(pt_synth_plan *p, knobs *k, double v) { (void)p, k->loader_wait_ns = (int64_t)v; }
static void set_loader_work(pt_synth_plan *p, knobs *k, double v) { (void)p, k->loader_work = v; }
static void set_alloc(pt_synth_plan *p, knobs *k, double v) { (void)p, k->alloc = v; }

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
    case PT_FAULT_SLOW_GPU_MLP:
    case PT_FAULT_ABSENT_STRAGGLER:
        calibrate(p, &f->knobs, active, set_slow_gpu, 1, 2, target);
        break;
    case PT_FAULT_LOADER_STARVED:
        calibrate(p, &f->knobs, active, set_loader_wait, 0, (double)step, target);
        break;
    case PT_FAULT_SINGLE_PROCESS_LOADER:
        calibrate(p, &f->knobs, active, set_loader_work, 0, 2, target);
        break;
    case PT_FAULT_EMPTY_CACHE:
        calibrate(p, &f->knobs, active, set_alloc, 0, 2, target);
        break;
    case PT_FAULT_INTERMITTENT_STALL: /* not a knob to search: the stall is its length */
        if (f->severity == 0)
            f->severity = p->job.severity = (double)STALL_DEFAULT_NS / (double)step;
        f->knobs.stall_ns = (int64_t)llround(f->severity * (double)step);
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

/* A ring all-reduce of `bytes` over n ranks: 2(n-1)/n x bytes at the bus bandwidth. */
static int64_t ring_ns(int n, double bytes, double busbw)
{
    double t = n > 1 ? 2.0 * (n - 1) / n * bytes / busbw : 10000;
    return (int64_t)llround(t);
}

/* Whether a fault is injected and not written fixed. */
static bool fault_active(const pt_synth_plan *p, pt_fault_kind kind)
{
    for (int i = 0; i < p->fault_count; i++)
        if (p->faults[i].kind == kind && !p->faults[i].fixed)
            return true;
    return false;
}

/* Whether the job makes an op's call at all: a fault's ops where it is injected, its fix's
 * where it is not (these are every-rank faults when they gate collectives). */
static bool op_in_job(const pt_synth_plan *p, const synth_op *op)
{
    if (op->fault != PT_FAULT_NONE)
        return fault_active(p, (pt_fault_kind)op->fault);
    if (op->unless != PT_FAULT_NONE)
        return !fault_active(p, (pt_fault_kind)op->unless);
    return true;
}

static bool is_rendezvous_op(const synth_op *op)
{
    return op->kind == OP_BUCKET || op->kind == OP_GLOO_BUCKET || op->kind == OP_P2P;
}

/* Numbers the buckets the job all-reduces (their Seq) and notes which it makes; counts
 * the program's rendezvous ops. */
static int number_buckets(const pt_synth_plan *p, synth_program *prog, bool *live)
{
    int ops = 0;
    prog->live_buckets = 0;
    for (size_t i = 0; i < prog->count; i++) {
        const synth_op *op = &prog->ops[i];
        if (!is_rendezvous_op(op))
            continue;
        ops++;
        if (op->kind == OP_P2P)
            continue;
        live[op->index] = op_in_job(p, op);
        if (live[op->index])
            prog->live_index[op->index] = (uint16_t)prog->live_buckets++;
    }
    return ops;
}

static void rv_table_alloc(rendezvous_table *t, int count)
{
    size_t n = count > 0 ? (size_t)count : 1;
    t->count = count;
    t->participants = pt_xcalloc(n, sizeof *t->participants);
    t->prev = pt_xcalloc(n, sizeof *t->prev);
    t->live = pt_xcalloc(n, sizeof *t->live);
    t->transfer_ns = pt_xcalloc(n, sizeof *t->transfer_ns);
}

static void rv_table_free(rendezvous_table *t)
{
    free(t->participants);
    free(t->prev);
    free(t->live);
    free(t->transfer_ns);
}

static bool same_node(const pt_synth_plan *p, int a, int b)
{
    return a / p->job.gpus_per_node == b / p->job.gpus_per_node;
}

/* A data-parallel job's rendezvous: its buckets, every worker in each, chained on the
 * NCCL stream. A parameter's own (latency-bound) all-reduce costs a latency floor on top. */
static void data_parallel_rendezvous(pt_synth_plan *p)
{
    synth_program *prog = &p->progs[0];
    int n = p->job.workers;
    bool one_node = n <= p->job.gpus_per_node;
    double busbw = p->job.backend == PT_SYNTH_GLOO ? GLOO_BUSBW : one_node ? NVLINK_BUSBW : NETWORK_BUSBW;
    rv_table_alloc(&p->rv, prog->buckets);
    p->max_arrivals = number_buckets(p, prog, p->rv.live);
    for (int b = 0; b < prog->buckets; b++) {
        p->rv.participants[b] = n;
        p->rv.prev[b] = b - 1;
        p->rv.transfer_ns[b] = ring_ns(n, (double)prog->bucket_nelems[b] * 4, busbw);
        if (prog->bucket_small[b])
            p->rv.transfer_ns[b] += one_node ? SMALL_LATENCY_NS : SMALL_LATENCY_NETWORK_NS;
    }
}

/* A pipeline job's rendezvous: per replica its sends (a pair each: the latency floor plus
 * the activations at the link's bandwidth), then per stage its replicas' buckets. */
static void pipeline_rendezvous(pt_synth_plan *p)
{
    int r = p->replicas, keys = p->p2p_keys, buckets = 0;
    for (int s = 0; s < p->stages; s++)
        buckets += p->progs[s].buckets;
    rv_table_alloc(&p->rv, r * keys + buckets);
    for (int d = 0; d < r; d++)
        for (int k = 0; k < keys; k++) {
            int rid = d * keys + k, stage = k / 2 / PIPELINE_MICROBATCHES;
            bool near = same_node(p, stage * r + d, (stage + 1) * r + d);
            p->rv.participants[rid] = 2;
            p->rv.prev[rid] = -1;
            p->rv.live[rid] = true;
            double bytes = (double)p->p2p_nelems * 2;
            p->rv.transfer_ns[rid] = (near ? SMALL_LATENCY_NS : SMALL_LATENCY_NETWORK_NS) +
                                     (int64_t)llround(bytes / (near ? P2P_NVLINK_BW : P2P_NETWORK_BW));
        }
    for (int s = 0; s < p->stages; s++) {
        synth_program *prog = &p->progs[s];
        int base = r * keys + p->stage_rv_base[s];
        p->max_arrivals = PT_MAX(p->max_arrivals, number_buckets(p, prog, p->rv.live + base));
        double busbw = same_node(p, s * r, s * r + r - 1) ? NVLINK_BUSBW : NETWORK_BUSBW;
        for (int b = 0; b < prog->buckets; b++) {
            p->rv.participants[base + b] = r;
            p->rv.prev[base + b] = b > 0 ? base + b - 1 : -1;
            p->rv.transfer_ns[base + b] = ring_ns(r, (double)prog->bucket_nelems[b] * 4, busbw);
        }
    }
}

/* pipeline_imbalance's job: --pipeline-stages stages of layers / stages blocks, but for the
 * faulty rank's stage, which holds one more, taken from its neighbour (below it, or above
 * the first stage): a split point one block off. Written fixed, every stage holds as many. */
static void lay_out_pipeline(pt_synth_plan *p)
{
    const pt_synth_job *job = &p->job;
    int s = job->pipeline_stages, per = job->layers / s;
    p->pipeline = true;
    p->stages = s;
    p->replicas = job->workers / s;
    p->heavy_stage = job->fault_ranks[0] / p->replicas;
    p->stage_layers = pt_xmalloc((size_t)s * sizeof *p->stage_layers);
    p->stage_rv_base = pt_xmalloc((size_t)s * sizeof *p->stage_rv_base);
    for (int i = 0; i < s; i++)
        p->stage_layers[i] = per;
    if (!(job->without & PT_SYNTH_WITHOUT_FIRST)) {
        p->stage_layers[p->heavy_stage]++;
        p->stage_layers[p->heavy_stage > 0 ? p->heavy_stage - 1 : p->heavy_stage + 1]--;
    }
    p->p2p_keys = (s - 1) * PIPELINE_MICROBATCHES * 2;
    p->p2p_nelems = (int64_t)PIPELINE_TOKENS * 768;
    p->prog_count = s;
    p->progs = pt_xcalloc((size_t)s, sizeof *p->progs);
    int first = 0, buckets = 0;
    for (int i = 0; i < s; i++) {
        synth_stage st = {i, s, first, p->stage_layers[i], PIPELINE_MICROBATCHES, p->replicas > 1};
        synth_program_build_stage(&p->progs[i], job, &st);
        first += p->stage_layers[i];
        p->stage_rv_base[i] = buckets;
        buckets += p->progs[i].buckets;
    }
}

static int64_t *start_row(const pt_synth_plan *p, int step)
{
    return p->start + (size_t)step * (size_t)p->job.workers;
}

static int64_t *finish_row(const pt_synth_plan *p, int step)
{
    return p->finish + (size_t)step * (size_t)p->job.workers;
}

static int64_t *end_row(const pt_synth_plan *p, int step)
{
    return p->end + (size_t)step * (size_t)p->rv.count;
}

/* This step's transfer per rendezvous: the nominal one within +-GPU_JITTER. */
static void draw_transfers(const pt_synth_plan *p, int step, int64_t *transfer)
{
    uint64_t rng = stream_seed(p->job.seed, 0xffffffffu, (uint64_t)step, DRAW_TRANSFER);
    for (int k = 0; k < p->rv.count; k++)
        transfer[k] = scaled(p->rv.transfer_ns[k], 1.0 + GPU_JITTER * draw(&rng));
}

/* One worker's run until it blocks, stops or ends its step: what it reached is heard,
 * and where it left off kept. Returns whether it is done with the step. */
static bool advance_worker(pt_synth_plan *p, int r, int step, sim_state *state, rv_step *rv, arrival *log,
                           int *blocked_on)
{
    sim s;
    sim_begin(&s, p, r, step, start_row(p, step)[r], NULL);
    sim_restore(&s, state);
    s.stop_at = NEVER;
    s.coll_end = rv->end;
    s.known = rv->known;
    s.arrivals = log;
    s.arrival_count = 0;
    size_t pos = run(&s, state->pos);
    bool done = s.stopped || pos == s.prog->count;
    if (s.stopped && !state->stopped)
        arrive_never_after(&s, pos);
    rv_hear(rv, log, s.arrival_count);
    if (done && !s.stopped) {
        finish_row(p, step)[r] = s.cpu[0];
        start_row(p, step + 1)[r] = s.cpu[0] + step_gap(&s);
    }
    *blocked_on = done ? -1 : op_needs_end(&s, &s.prog->ops[pos]);
    sim_save(&s, pos, state);
    return done;
}

/* The lock-step schedule: per step, every worker runs until it needs a rendezvous end
 * not known yet; the rendezvous that heard from all their participants end; the waiting
 * workers go on; until every worker has finished the step (or the job hangs in it). */
static void schedule(pt_synth_plan *p)
{
    int w = p->job.workers;
    sim_state *state = pt_xmalloc((size_t)w * sizeof *state);
    int *blocked_on = pt_xmalloc((size_t)w * sizeof *blocked_on);
    bool *done = pt_xmalloc((size_t)w * sizeof *done);
    int64_t *transfer = pt_xmalloc((size_t)PT_MAX(p->rv.count, 1) * sizeof *transfer);
    arrival *log = pt_xmalloc((size_t)PT_MAX(p->max_arrivals, 1) * sizeof *log);
    rv_step rv;
    rv_alloc(p, &rv);
    int64_t *row0 = start_row(p, 0);
    for (int r = 0; r < w; r++) {
        uint64_t rng = stream_seed(p->job.seed, (uint64_t)r, 0, DRAW_START);
        row0[r] = FIRST_STEP_TS_NS + (int64_t)llround((draw(&rng) + 1.0) * 150000.0);
    }
    p->stop_at = NEVER;
    for (int step = 0; step < p->steps_run; step++) {
        draw_transfers(p, step, transfer);
        rv_begin(p, &rv, end_row(p, step), transfer);
        if (all_enter(p->job.fault) && !(p->job.without & PT_SYNTH_WITHOUT_FIRST) && step == p->job.hang_step)
            rv.stuck_from = stuck_bucket(p);
        for (int r = 0; r < w; r++) {
            sim s;
            sim_begin(&s, p, r, step, start_row(p, step)[r], NULL);
            sim_save(&s, 0, &state[r]);
            blocked_on[r] = -1;
            done[r] = false;
        }
        for (int left = w; left > 0;) {
            for (int r = 0; r < w; r++)
                if (!done[r] && (blocked_on[r] < 0 || rv.known[blocked_on[r]]) &&
                    advance_worker(p, r, step, &state[r], &rv, log, &blocked_on[r]))
                    done[r] = true, left--;
            bool ended = rv_resolve(p, &rv);
            if (rv.never) /* a hang: the profiler stops HANG_WAIT_STEPS healthy steps later */
                break;
            if (left > 0 && !ended) {
                bool can_run = false;
                for (int r = 0; r < w && !can_run; r++)
                    can_run = !done[r] && (blocked_on[r] < 0 || rv.known[blocked_on[r]]);
                if (!can_run)
                    driver_stuck();
            }
        }
        if (rv.never) {
            int64_t first = NEVER;
            for (int r = 0; r < w; r++)
                first = PT_MIN(first, start_row(p, step)[r]);
            p->stop_at = first + HANG_WAIT_STEPS * p->healthy_step_ns;
            break;
        }
    }
    rv_free(&rv);
    free(log);
    free(transfer);
    free(done);
    free(blocked_on);
    free(state);
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
    if (!ok || job->second_fault == job->fault || pt_fault_is_hang(job->fault) || job->fault == PT_FAULT_NONE ||
        pt_fault_reports_saving(job->fault)) {
        pt_error_set(err, "a second fault is one of slow_gpu, cpu_contention, slow_dataloader, gc_pause and "
                          "blocking_dtoh, of another kind than a first fault that is one of those, common_memcpy "
                          "or two_slow");
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

/* What the structural kinds need of the job besides ranks and severity. */
static int resolve_structural(pt_synth_job *job, pt_error *err)
{
    if (job->fault == PT_FAULT_UNOVERLAPPED_ALLREDUCE && job->fault_rank_count != 1) {
        pt_error_set(err, "fault unoverlapped_allreduce is one rank's (give one --rank)");
        return -1;
    }
    if (job->fault == PT_FAULT_INTERMITTENT_STALL && job->steps < STALL_FIRST + 1) {
        pt_error_set(err, "fault intermittent_stall needs at least %d steps: it stalls in the third, then one in %d",
                     STALL_FIRST + 1, STALL_PERIOD);
        return -1;
    }
    if (job->fault == PT_FAULT_UNBUCKETED_ALLREDUCE && job->layers > UNBUCKETED_MAX_LAYERS) {
        pt_error_set(err, "fault unbucketed_allreduce reduces %d gradients per block: at most %d layers", 12,
                     UNBUCKETED_MAX_LAYERS);
        return -1;
    }
    if (job->fault != PT_FAULT_PIPELINE_IMBALANCE) {
        job->pipeline_stages = 0;
        return 0;
    }
    if (job->pipeline_stages == 0)
        job->pipeline_stages = job->workers % 4 == 0 ? 4 : job->workers;
    int s = job->pipeline_stages;
    if (s < 2 || s > PIPELINE_MAX_STAGES || job->workers % s != 0) {
        pt_error_set(err, "pipeline stages must be 2..%d and divide the workers (%d)", PIPELINE_MAX_STAGES,
                     job->workers);
        return -1;
    }
    if (job->layers % s != 0 || job->layers / s < 2) {
        pt_error_set(err, "a pipeline of %d stages needs layers a multiple of %d, at least 2 per stage", s, s);
        return -1;
    }
    return 0;
}

static int resolve_job(pt_synth_job *job, pt_error *err)
{
    if (job->layers == 0)
        job->layers = 12;
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
    if (!has_severity(job->fault) && job->severity != 0) {
        pt_error_set(err, "fault %s takes no severity: its cost follows from the model", pt_fault_name(job->fault));
        return -1;
    }
    if (job->severity == 0 && has_severity(job->fault))
        job->severity = default_severity(job->fault);
    if (has_severity(job->fault) && job->severity != 0 && !(job->severity > 0 && job->severity <= 100)) {
        pt_error_set(err, "severity must be in (0, 100]");
        return -1;
    }
    bool per_rank = job->fault != PT_FAULT_NONE && !every_rank(job->fault);
    int needed = min_workers(job->fault);
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
            job->fault_ranks[0] = job->fault == PT_FAULT_INTERMITTENT_STALL ? 0 : job->workers - 1;
            job->fault_rank_count = 1;
        }
    }
    if (check_ranks(job->fault_ranks, job->fault_rank_count, NULL, 0, job->workers, err) != 0)
        return -1;
    /* A stall in one step of four is seen against the rank's other steps. */
    if (per_rank && job->fault_rank_count == job->workers && job->fault != PT_FAULT_INTERMITTENT_STALL) {
        pt_error_set(err, "every rank is faulty: there is no healthy worker to compare with");
        return -1;
    }
    if (resolve_structural(job, err) != 0)
        return -1;
    if (resolve_second_fault(job, err) != 0)
        return -1;
    if (job->without & ~PT_SYNTH_WITHOUT_ALL) {
        pt_error_set(err, "unknown faults to fix (%#x)", job->without);
        return -1;
    }
    if (needs_nccl(job->fault) && job->backend != PT_SYNTH_NCCL) {
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
    if (job.fault != PT_FAULT_NONE)
        p->faults[p->fault_count++] = (synth_fault){job.fault, p->job.fault_ranks, job.fault_rank_count,
                                                    job.severity, HEALTHY_KNOBS, (job.without & PT_SYNTH_WITHOUT_FIRST) != 0};
    if (job.second_fault != PT_FAULT_NONE)
        p->faults[p->fault_count++] =
            (synth_fault){job.second_fault, p->job.second_ranks, job.second_rank_count, job.second_severity,
                          HEALTHY_KNOBS, (job.without & PT_SYNTH_WITHOUT_SECOND) != 0};
    if (job.fault == PT_FAULT_PIPELINE_IMBALANCE) {
        lay_out_pipeline(p);
        pipeline_rendezvous(p);
    } else {
        p->prog_count = 1;
        p->progs = pt_xcalloc(1, sizeof *p->progs);
        synth_program_build(&p->progs[0], &job);
        data_parallel_rendezvous(p);
    }
    p->stop_at = NEVER;
    if (job.fault == PT_FAULT_HANG_SKIP && p->progs[0].buckets < 2) {
        pt_error_set(err, "fault hang_skip needs two gradient buckets at least (more --layers)");
        pt_synth_plan_free(p);
        return NULL;
    }
    calibrate_faults(p);
    bool hangs = pt_fault_is_hang(job.fault) && !(job.without & PT_SYNTH_WITHOUT_FIRST);
    p->steps_run = hangs ? job.hang_step + 1 : job.steps;
    p->start = pt_xmalloc((size_t)(p->steps_run + 1) * (size_t)job.workers * sizeof *p->start);
    p->finish = pt_xmalloc((size_t)p->steps_run * (size_t)job.workers * sizeof *p->finish);
    p->end = pt_xmalloc((size_t)p->steps_run * (size_t)PT_MAX(p->rv.count, 1) * sizeof *p->end);
    schedule(p);
    return p;
}

void pt_synth_plan_free(pt_synth_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->prog_count; i++)
        synth_program_free(&p->progs[i]);
    free(p->progs);
    rv_table_free(&p->rv);
    free(p->stage_layers);
    free(p->stage_rv_base);
    free(p->start);
    free(p->finish);
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
    return p->job.fault != PT_FAULT_ABSENT_STRAGGLER || !fault_on(&p->faults[0], rank);
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
    run(&s, 0);
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
            (frame){synth_outer_frames[i], strlen(synth_outer_frames[i]), first - 300000 + i * 100000, PT_CPU_PYTHON, NULL};
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

/* The stack, as the summarizer names it, of the first frame called `name` that the job
 * runs (the fault's own frames included, its fix's left out): on the main thread the
 * training loop's frames and every open frame; on the autograd thread its open frames. */
static char *frame_stack(const pt_synth_plan *p, const synth_program *prog, const char *name)
{
    const synth_op *open[2][MAX_FRAME_DEPTH];
    int depth[2] = {0, 0}, th = 0;
    for (size_t i = 0; i < prog->count; i++) {
        const synth_op *op = &prog->ops[i];
        if (!op_in_job(p, op))
            continue;
        if (op->kind == OP_FORK || op->kind == OP_JOIN) {
            th = op->kind == OP_FORK;
            depth[1] = 0;
        }
        if (op->kind == OP_POP && depth[th] > 0)
            depth[th]--;
        if (op->kind != OP_PUSH || depth[th] >= MAX_FRAME_DEPTH)
            continue;
        open[th][depth[th]++] = op;
        if (strcmp(op->name, name) != 0)
            continue;
        pt_buf b = PT_BUF_INIT;
        for (int f = 0; f < 2 && th == 0; f++) {
            pt_normalize_frame(&b, synth_outer_frames[f], strlen(synth_outer_frames[f]));
            pt_buf_putc(&b, '|');
        }
        for (int f = 0; f < depth[th]; f++) {
            if (f)
                pt_buf_putc(&b, '|');
            pt_normalize_frame(&b, open[th][f]->name, open[th][f]->name_len);
        }
        return pt_buf_take(&b);
    }
    return pt_xstrdup("");
}

static pt_json *stack_json(const pt_synth_plan *p, const synth_program *prog, const char *name)
{
    char *stack = frame_stack(p, prog, name);
    pt_json *j = pt_json_string(stack);
    free(stack);
    return j;
}

/* A kernel's key as the summarizer's: a compute kernel's name with its grid and block; a
 * collective's, its name. */
static pt_json *kernel_json(const synth_program *prog, int kernel)
{
    pt_buf b = PT_BUF_INIT;
    const synth_kernel *k = &prog->kernels[kernel];
    if (kernel == prog->nccl_kernel || kernel == prog->p2p_kernel)
        pt_buf_append(&b, k->name, k->name_len);
    else
        render_kernel_key(&b, k);
    pt_json *j = pt_json_string_n(b.data, b.len);
    pt_buf_free(&b);
    return j;
}

/* The compute kernels of a program, costliest (nominal time per step) first. */
static void kernels_by_cost(const synth_program *prog, int *order, int *count)
{
    int64_t total[64] = {0};
    for (size_t i = 0; i < prog->count; i++)
        if (prog->ops[i].kind == OP_LAUNCH && prog->ops[i].index < PT_ARRAY_LEN(total))
            total[prog->ops[i].index] += prog->ops[i].gpu_ns;
    *count = 0;
    for (int k = 0; k < (int)prog->kernel_count && k < (int)PT_ARRAY_LEN(total); k++)
        if (total[k] > 0)
            order[(*count)++] = k;
    for (int i = 1; i < *count; i++)
        for (int j = i; j > 0 && total[order[j - 1]] < total[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
}

/* The job's step as its written traces show it: the slowest written worker's mean
 * ProfilerStep (the pace of a lock-step job). */
static double written_step_ms(const pt_synth_plan *p)
{
    double worst = 0;
    for (int r = 0; r < p->job.workers; r++) {
        if (!pt_synth_plan_writes(p, r))
            continue;
        double sum = 0;
        for (int step = 0; step < p->steps_run; step++)
            sum += (double)(finish_row(p, step)[r] - start_row(p, step)[r]);
        worst = PT_MAX(worst, sum / p->steps_run / 1e6);
    }
    return worst;
}

/* What fixing the fault truly saves: the same job (seed, noise, knobs) planned with the
 * fault and without it, (step with - step without) / step with. */
static void add_true_saving(const pt_synth_plan *p, pt_json *root)
{
    pt_synth_job other = p->job;
    other.without ^= PT_SYNTH_WITHOUT_FIRST;
    pt_error err = {{0}};
    pt_synth_plan *q = pt_synth_plan_new(&other, &err);
    if (!q)
        return; /* the job planned once already: its counterpart plans too */
    bool fixed = (p->job.without & PT_SYNTH_WITHOUT_FIRST) != 0;
    double with = written_step_ms(fixed ? q : p), without = written_step_ms(fixed ? p : q);
    pt_synth_plan_free(q);
    pt_json *steps = pt_json_add(root, "step_ms", pt_json_object());
    pt_json_add(steps, "with_fault", pt_json_number_rounded(with, 6));
    pt_json_add(steps, "without_fault", pt_json_number_rounded(without, 6));
    pt_json_add(root, "true_saving", pt_json_number_rounded(with > 0 ? (with - without) / with : 0, 6));
}

/* The ranks of a pipeline stage. */
static pt_json *stage_ranks(const pt_synth_plan *p, int stage)
{
    pt_json *list = pt_json_array();
    for (int d = 0; d < p->replicas; d++)
        pt_json_push(list, pt_json_int(stage * p->replicas + d));
    return list;
}

/* A structural fault's finding: its category, the function a user would change, the
 * functions its time shows in ("parts"), and what else says where it is. */
static const char *add_structural_finding(const pt_synth_plan *p, const synth_fault *fault, pt_json *f)
{
    const synth_program *prog = &p->progs[p->pipeline ? p->heavy_stage : 0];
    pt_json *parts = pt_json_array();
    int order[64], n;
    const char *category = "other";
    switch (fault->kind) {
    case PT_FAULT_UNBUCKETED_ALLREDUCE:
        category = "communication";
        pt_json_add(f, "function", stack_json(p, prog, "train.py(64): average_gradients"));
        pt_json_push(parts, kernel_json(prog, prog->nccl_kernel));
        pt_json_push(parts, stack_json(p, prog, "torch/distributed/distributed_c10d.py(2219): all_reduce"));
        pt_json_add(f, "collectives_per_step", pt_json_int(prog->live_buckets));
        break;
    case PT_FAULT_UNOVERLAPPED_ALLREDUCE:
        category = "communication";
        pt_json_add(f, "function", stack_json(p, prog, "train.py(52): allreduce_hook"));
        pt_json_push(parts, kernel_json(prog, prog->nccl_kernel));
        pt_json_push(parts, pt_json_string("cudaStreamWaitEvent"));
        break;
    case PT_FAULT_INTERMITTENT_STALL: {
        category = "python";
        pt_json_add(f, "function", stack_json(p, prog, "train.py(112): save_checkpoint"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method dump of _pickle.Pickler object at 0x7f3c29d1a5f0>"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method write_record of pybind11_builtins.pybind11_detail_function_record_v1_system_libstdcpp_gxx_abi_1xxx_use_cxx11_abi_1 object at 0x7f3c29d1a710>"));
        pt_json *steps = pt_json_add(f, "stall_steps", pt_json_array());
        for (int step = 0; step < p->job.steps; step++)
            if (is_stall_step(step))
                pt_json_push(steps, pt_json_int(FIRST_STEP + step));
        break;
    }
    case PT_FAULT_LOADER_STARVED:
        category = "python";
        pt_json_add(f, "function", stack_json(p, prog, "torch/utils/data/dataloader.py(631): __next__"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method poll of select.poll object at 0x7f3c29d1a0f0>"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method recvmsg of socket object at 0x7f3c29d1a230>"));
        break;
    case PT_FAULT_SINGLE_PROCESS_LOADER:
        category = "python";
        pt_json_add(f, "function", stack_json(p, prog, "torch/utils/data/dataloader.py(631): __next__"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method read of _io.BufferedReader object at 0x7f3c29d1a3b0>"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method encode_batch of tokenizers.Tokenizer object at 0x7f3c29d1a4d0>"));
        pt_json_push(parts, stack_json(p, prog, "<built-in method stack of type object at 0x7f3c2a1e5c80>"));
        break;
    case PT_FAULT_SLOW_GPU_MLP:
    case PT_FAULT_PIPELINE_IMBALANCE:
        category = "gpu_compute";
        kernels_by_cost(prog, order, &n);
        pt_json_add(f, "function", kernel_json(prog, order[0]));
        for (int i = 0; i < n && i < 3; i++)
            pt_json_push(parts, kernel_json(prog, order[i]));
        break;
    case PT_FAULT_EMPTY_CACHE:
        category = "cuda_runtime";
        pt_json_add(f, "function", stack_json(p, prog, "torch/cuda/memory.py(192): empty_cache"));
        pt_json_push(parts, pt_json_string("cudaFree"));
        pt_json_push(parts, pt_json_string("cudaMalloc"));
        break;
    case PT_FAULT_ABSENT_STRAGGLER:
        category = "other"; /* the ranks not analysed: the others wait for one of them */
        pt_json_add(f, "function", pt_json_null());
        kernels_by_cost(prog, order, &n);
        pt_json_push(parts, kernel_json(prog, order[0])); /* what the absent rank runs slower */
        break;
    default:
        break;
    }
    pt_json_add(f, "parts", parts);
    return category;
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
    pt_json_add(h, "seq", pt_json_int(bucket_seq(&p->progs[0], job->hang_step, stuck_bucket(p))));
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

static void add_worker_names(const pt_synth_plan *p, pt_json *f, const char *key, const pt_json *ranks)
{
    pt_json *names = pt_json_add(f, key, pt_json_array());
    for (size_t i = 0; i < ranks->count; i++) {
        char stem[PT_NAME_MAX], name[PT_NAME_MAX + 8];
        pt_synth_plan_worker_stem(p, (int)ranks->items[i]->integer, stem, sizeof stem);
        snprintf(name, sizeof name, "%s.json", stem);
        pt_json_push(names, pt_json_string(name));
    }
}

/* A structural fault's expected finding (see add_structural_finding). */
static void add_expected_structural(const pt_synth_plan *p, const synth_fault *fault, pt_json *findings)
{
    pt_json *f = pt_json_push(findings, pt_json_object());
    pt_json_add(f, "category", pt_json_null()); /* first, as in every finding */
    bool all = every_rank(fault->kind);
    pt_json_set(f, "category", pt_json_string(add_structural_finding(p, fault, f)));
    pt_json_add(f, "fault", pt_json_string(pt_fault_name(fault->kind)));
    pt_json *ranks = pt_json_add(f, "workers", p->pipeline ? stage_ranks(p, p->heavy_stage) : rank_list(p, fault, all));
    pt_json_add(f, "all_workers", pt_json_bool(all));
    if (!all)
        add_worker_names(p, f, "worker_names", ranks);
    if (p->pipeline) {
        pt_json_add(f, "stage", pt_json_int(p->heavy_stage));
        pt_json *layers = pt_json_add(f, "layers_per_stage", pt_json_array());
        for (int s = 0; s < p->stages; s++)
            pt_json_push(layers, pt_json_int(p->stage_layers[s]));
    }
    if (fault->kind == PT_FAULT_ABSENT_STRAGGLER) /* named, but their traces are not in the output */
        pt_json_add(f, "missing_ranks", rank_list(p, fault, false));
}

/* The finding one injected fault should give. */
static void add_expected_finding(const pt_synth_plan *p, const synth_fault *fault, pt_json *findings)
{
    if (pt_fault_reports_saving(fault->kind)) {
        add_expected_structural(p, fault, findings);
        return;
    }
    const char *category = NULL;
    char *function = NULL;
    bool all = false;
    switch (fault->kind) {
    case PT_FAULT_SLOW_GPU:
    case PT_FAULT_TWO_SLOW:
        category = "gpu_compute", function = top_kernel_key(&p->progs[0]);
        break;
    case PT_FAULT_CPU_CONTENTION:
        category = "host", function = pt_xstrdup("CPU-side work: runtime calls and Python");
        break;
    case PT_FAULT_SLOW_DATALOADER:
        category = "python", function = stack_at(&p->progs[0], SCALE_DATALOADER);
        break;
    case PT_FAULT_GC_PAUSE:
        category = "python", function = stack_at(&p->progs[0], SCALE_GC);
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
        const synth_kernel *k = &p->progs[0].kernels[p->progs[0].nccl_kernel];
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
    pt_json_add(root, "severity", has_severity(job->fault) ? pt_json_number(job->severity) : pt_json_null());
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
    if (p->pipeline) {
        pt_json_add(root, "pipeline_stages", pt_json_int(p->stages));
        pt_json_add(root, "microbatches", pt_json_int(PIPELINE_MICROBATCHES));
        pt_json *layers = pt_json_add(root, "layers_per_stage", pt_json_array());
        for (int s = 0; s < p->stages; s++)
            pt_json_push(layers, pt_json_int(p->stage_layers[s]));
    }
    if (pt_fault_reports_saving(job->fault) && job->workers == 1)
        pt_json_add(root, "single_gpu", pt_json_bool(true));
    pt_json_add(root, "healthy_step_ms", pt_json_number_rounded((double)p->healthy_step_ns / 1e6, 6));
    pt_json *findings = pt_json_add(root, "findings", pt_json_array());
    for (int i = 0; i < p->fault_count; i++)
        if (!p->faults[i].fixed)
            add_expected_finding(p, &p->faults[i], findings);
    if (pt_fault_reports_saving(job->fault))
        add_true_saving(p, root);
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
