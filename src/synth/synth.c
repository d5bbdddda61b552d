/* synth.c -- the synthetic job's plan: the job's step programs, the rendezvous its
 * workers meet at, each fault's knob calibrated, and the lock-step schedule that fixes
 * when each rendezvous ends; the plan's lifecycle.
 *
 * Design. model.c writes one training step as a program of ops. A plan holds the job's
 * programs (one, or one per pipeline stage) and, for every step, each worker's start and
 * finish and each rendezvous's end, so that any worker's events can later be replayed
 * alone. The generator's files, each opening with its design, lowest first (a file calls
 * only files above it in this list, so no two call each other):
 *   - synth_faults.c: the fault kinds (names, defaults, the ranks and backend each
 *     needs), the job resolved and checked;
 *   - synth_emit.c: the emitter, events handed to a trace sink;
 *   - model.c: the step as a program of ops;
 *   - synth_sim.c: the interpreter, one worker's step simulated op by op (its clocks,
 *     streams, jitter and fault knobs; gloo's threads; pipeline transfers), writing
 *     through the emitter when it has one;
 *   - synth.c: the rendezvous and the lock-step driver below, one worker alone and the
 *     faults' knobs calibrated on it, the plan's lifecycle;
 *   - synth_worker.c: a worker's identity, and its events replayed from the plan into any
 *     trace sink;
 *   - synth_expected.c: expected.json, what the analysis should find;
 * and what they share (the plan, a worker's simulation, the emitter, the seeded draws) is
 * synth_state.h. This file calls synth_faults.c (the job resolved, the fault kinds),
 * model.c (the programs built and freed) and synth_sim.c (the interpreter, which it
 * drives).
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
 * receives per microbatch, GPipe); its ranks are stage-major, and each stage's replicas
 * all-reduce its gradients in a rendezvous of their own.
 *
 * A hang is not a knob: the hung worker's replay stops at the op marked for it, its
 * all-reduces never become ready, their ends are NEVER, and everyone else blocks in the
 * first one until the profiler stops (stop_at, HANG_WAIT_STEPS healthy steps after the
 * step it hung in began).
 *
 * Calibration. Faults are knobs calibrated once per plan: the knob is searched (bisection
 * on a jitter-free run of one worker alone, isolated_step) so that the faulty worker's
 * step grows by `severity` of a healthy one, whatever the mechanism (slower kernels, a
 * slower host CPU, a longer data loader, a blocking copy). Each of a job's two faults is
 * calibrated alone; a fault written fixed keeps its calibration but not its knobs, so the
 * job and its twin differ by what fixing the fault saves. Calibrating a fault runs the
 * worker's step a few dozen times: the knob doubled until the step is long enough, then
 * the interval halved until it is a millionth of the knob (at most 60 times). */
#include "synth/synth_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_STEP_TS_NS 5000000000LL
#define GLOO_BUSBW 3.0                  /* bytes/ns a CPU (gloo, TCP) all-reduce reaches */
#define MAX_CPU_SPREAD 0.9
#define NVLINK_BUSBW 60.0              /* bytes/ns (GB/s) an all-reduce reaches in a node */
#define NETWORK_BUSBW 30.0             /* ... and across nodes */
#define GPU_JITTER 0.02
#define CPU_JITTER 0.05
#define HANG_WAIT_STEPS 8              /* the profiler stops this many healthy steps after the hang
                                          began: past the 5 steps after which a hang is declared */
#define P2P_NVLINK_BW 150.0            /* bytes/ns a send reaches within a node */
#define P2P_NETWORK_BW 25.0            /* ... and across nodes */
#define SMALL_LATENCY_NS 15000         /* a latency-bound collective's floor within a node */
#define SMALL_LATENCY_NETWORK_NS 30000 /* ... and across nodes */
#define PIPELINE_TOKENS (4 * 2048)     /* a microbatch: 4 sequences of 2048 tokens, width 768 */
#define STALL_DEFAULT_NS 325000000LL   /* intermittent_stall: the mean stall when no severity is given */

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

static _Noreturn void driver_stuck(void)
{
    fprintf(stderr, "perftracker synth: internal error: the workers wait for each other\n");
    abort();
}

/* ------------------------------------------------------------ one worker alone */

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
    synth_sim_begin(&s, p, 0, 0, 0, NULL);
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
        pos = synth_run(&s, pos);
        rv_hear(&rv, log, s.arrival_count);
        if (pos == s.prog->count || s.stopped)
            break;
        if (!rv_resolve(p, &rv))
            driver_stuck();
    }
    int64_t step = s.cpu[0] + synth_step_gap(&s);
    free(live);
    free(log);
    free(end);
    rv_free(&rv);
    return step;
}

/* ------------------------------------------------------------ calibration */

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

/* The healthy step (what a severity is a fraction of), then each fault's knob. */
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
bool synth_op_in_job(const pt_synth_plan *p, const synth_op *op)
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
        live[op->index] = synth_op_in_job(p, op);
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

/* This step's transfer per rendezvous: the nominal one within +-GPU_JITTER. */
static void draw_transfers(const pt_synth_plan *p, int step, int64_t *transfer)
{
    uint64_t rng = stream_seed(p->job.seed, 0xffffffffu, (uint64_t)step, DRAW_TRANSFER);
    for (int k = 0; k < p->rv.count; k++)
        transfer[k] = scaled(p->rv.transfer_ns[k], 1.0 + GPU_JITTER * draw(&rng));
}

/* ------------------------------------------------------------ the links' counters */

#define LINK_SAMPLE_NS 10000000LL /* the collector reads the network counters every 10 ms */

/* Adds `bytes` moved evenly over [a, b) to the bins of LINK_SAMPLE_NS from `from`. */
static void spread_bytes(double *bins, size_t count, int64_t from, int64_t a, int64_t b, double bytes)
{
    if (b <= a)
        return;
    for (size_t i = a > from ? (size_t)((a - from) / LINK_SAMPLE_NS) : 0; i < count; i++) {
        int64_t lo = from + (int64_t)i * LINK_SAMPLE_NS, hi = lo + LINK_SAMPLE_NS;
        if (lo >= b)
            break;
        int64_t overlap = PT_MIN(b, hi) - PT_MAX(a, lo);
        if (overlap > 0)
            bins[i] += bytes * (double)overlap / (double)(b - a);
    }
}

/* What the collector's counters read of rank's links from `from` to `to`, a sample every
 * LINK_SAMPLE_NS (the MiB/s since the one before): a data-parallel NCCL job's ring
 * all-reduce sends 2(n-1)/n of a bucket's bytes from every GPU over NVLink in one node
 * (gpuN.nvlink_tx_mibps), and as much out of each node over its network links across
 * nodes (host.nic_tx_mibps: every ring leaves the node once), evenly over its transfer,
 * the last [transfer] of the time it ends at. A pipeline's and gloo's traffic is not
 * modelled: no counter. */
void synth_emit_link_counters(const pt_synth_plan *p, int rank, int64_t from, int64_t to, emitter *em)
{
    int n = p->job.workers;
    size_t count = to > from ? (size_t)((to - from) / LINK_SAMPLE_NS) : 0;
    if (p->pipeline || p->job.backend == PT_SYNTH_GLOO || n < 2 || !count)
        return;
    const synth_program *prog = &p->progs[0];
    double *bins = pt_xcalloc(count, sizeof *bins);
    int64_t *transfer = pt_xmalloc((size_t)PT_MAX(p->rv.count, 1) * sizeof *transfer);
    for (int step = 0; step < p->steps_run; step++) {
        draw_transfers(p, step, transfer);
        const int64_t *end = end_row(p, step);
        for (int k = 0; k < p->rv.count && k < prog->buckets; k++)
            if (p->rv.live[k] && end[k] < NEVER)
                spread_bytes(bins, count, from, end[k] - transfer[k], end[k],
                             2.0 * (n - 1) / n * (double)prog->bucket_nelems[k] * 4);
    }
    char name[64];
    int len = n <= p->job.gpus_per_node
                  ? snprintf(name, sizeof name, "gpu%d.nvlink_tx_mibps", rank % p->job.gpus_per_node)
                  : snprintf(name, sizeof name, "host.nic_tx_mibps");
    for (size_t i = 0; i < count; i++) { /* in millionths, as a Kineto trace's counter is read */
        double mibps = bins[i] / (1024.0 * 1024.0) / ((double)LINK_SAMPLE_NS / 1e9);
        synth_emit_counter(em, name, (size_t)len, from + (int64_t)(i + 1) * LINK_SAMPLE_NS,
                           (double)llround(mibps * 1e6) / 1e6);
    }
    free(bins);
    free(transfer);
}

/* One worker's run until it blocks, stops or ends its step: what it reached is heard,
 * and where it left off kept. Returns whether it is done with the step. */
static bool advance_worker(pt_synth_plan *p, int r, int step, sim_state *state, rv_step *rv, arrival *log,
                           int *blocked_on)
{
    sim s;
    synth_sim_begin(&s, p, r, step, start_row(p, step)[r], NULL);
    synth_sim_restore(&s, state);
    s.stop_at = NEVER;
    s.coll_end = rv->end;
    s.known = rv->known;
    s.arrivals = log;
    s.arrival_count = 0;
    size_t pos = synth_run(&s, state->pos);
    bool done = s.stopped || pos == s.prog->count;
    if (s.stopped && !state->stopped)
        synth_arrive_never_after(&s, pos);
    rv_hear(rv, log, s.arrival_count);
    if (done && !s.stopped) {
        finish_row(p, step)[r] = s.cpu[0];
        start_row(p, step + 1)[r] = s.cpu[0] + synth_step_gap(&s);
    }
    *blocked_on = done ? -1 : synth_op_needs_end(&s, &s.prog->ops[pos]);
    synth_sim_save(&s, pos, state);
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
        if (synth_all_enter(p->job.fault) && !(p->job.without & PT_SYNTH_WITHOUT_FIRST) && step == p->job.hang_step)
            rv.stuck_from = synth_stuck_bucket(p);
        for (int r = 0; r < w; r++) {
            sim s;
            synth_sim_begin(&s, p, r, step, start_row(p, step)[r], NULL);
            synth_sim_save(&s, 0, &state[r]);
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

pt_synth_plan *pt_synth_plan_new(const pt_synth_job *job_in, pt_error *err)
{
    pt_synth_job job = *job_in;
    if (synth_resolve_job(&job, err) != 0)
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
