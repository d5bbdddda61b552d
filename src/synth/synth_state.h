/* synth_state.h -- what the synthetic job's files share: the plan (struct pt_synth_plan),
 * a fault's knobs, a worker's simulation (sim) and the emitter it writes through, the
 * seeded draws, and the functions one file calls in another, prefixed synth_ (as
 * model.h's are). synth.c's design comment lists the files and what each holds, lowest
 * first: a file calls only files before it there (the declarations below keep that order).
 * Internal to src/synth: nothing outside synth_faults.c, synth_emit.c, synth_sim.c,
 * synth.c, synth_worker.c and synth_expected.c includes it; everything else in them is
 * static. */
#ifndef PT_SYNTH_SYNTH_STATE_H
#define PT_SYNTH_SYNTH_STATE_H

#include "synth/model.h"
#include "synth/synth.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NEVER (INT64_MAX / 4)
#define MAX_FRAME_DEPTH 64
#define FIRST_STEP 10                  /* ProfilerStep numbers start here, after wait/warmup */
#define GLOO_THREADS 2
#define PIPELINE_MICROBATCHES 8
#define STALL_PERIOD 4                 /* intermittent_stall: one step in four */
#define STALL_FIRST 2                  /* ... the third profiled step first */

/* ------------------------------------------------------------ randomness */

static inline uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t stream_seed(uint64_t seed, uint64_t rank, uint64_t step, uint64_t purpose)
{
    return mix64(mix64(mix64(seed ^ 0x5ca1ab1e) ^ rank) ^ (step * 0x100 + purpose));
}

/* splitmix64: one add and one mix per draw; uniform in [-1, 1). */
static inline double draw(uint64_t *state)
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

/* A nominal time times a factor (jitter, speed, a knob), to the nearest nanosecond. */
static inline int64_t scaled(int64_t ns, double factor)
{
    return ns ? (int64_t)llround((double)ns * factor) : 0;
}

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

/* Every rendezvous of a step (see the driver, synth.c): who takes part, which one it follows on
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

static inline unsigned kind_bit(pt_fault_kind kind)
{
    return 1u << kind;
}

/* A plan's rows: a step's starts and finishes per rank, its rendezvous' ends. */
static inline int64_t *start_row(const pt_synth_plan *p, int step)
{
    return p->start + (size_t)step * (size_t)p->job.workers;
}

static inline int64_t *finish_row(const pt_synth_plan *p, int step)
{
    return p->finish + (size_t)step * (size_t)p->job.workers;
}

static inline int64_t *end_row(const pt_synth_plan *p, int step)
{
    return p->end + (size_t)step * (size_t)p->rv.count;
}

/* ------------------------------------------------------------ a worker simulated, and its emitter */

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

/* A rendezvous a worker reached, with the moment it was ready there (see the driver, synth.c). */
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

/* ------------------------------------------------------------ shared functions */

/* synth_faults.c: the fault kinds, the job resolved. */
bool synth_every_rank(pt_fault_kind kind);
bool synth_has_severity(pt_fault_kind kind);
bool synth_all_enter(pt_fault_kind kind);
bool synth_fault_on(const synth_fault *f, int rank);
int synth_resolve_job(pt_synth_job *job, pt_error *err);

/* synth_emit.c: events into the emitter's sink. */
void synth_emit_span(emitter *em, pt_event_kind kind, const char *name, size_t name_len, int64_t start, int64_t dur,
                     int64_t tid);
void synth_emit_cpu(emitter *em, const char *name, size_t name_len, pt_cpu_kind cpu_kind, int64_t start, int64_t dur,
                    int64_t tid);
void synth_emit_frame(emitter *em, const frame *f, int64_t end, int64_t tid, const pt_collective *coll);
void synth_emit_gpu(emitter *em, pt_event_kind kind, const char *name, size_t name_len, const synth_kernel *k,
                    int64_t start, int64_t dur, int64_t stream, int64_t bytes);
void synth_emit_all_reduce(emitter *em, const synth_kernel *k, int64_t start, int64_t end, const pt_collective *coll,
                           int64_t stream);
void synth_emit_step(emitter *em, int step, int64_t start, int64_t end);
void synth_emit_counter(emitter *em, const char *name, size_t name_len, int64_t ts, double value);

/* synth_sim.c: the interpreter. */
void synth_sim_begin(sim *s, const pt_synth_plan *p, int rank, int step, int64_t t, emitter *em);
size_t synth_run(sim *s, size_t from);
void synth_sim_save(const sim *s, size_t pos, sim_state *st);
void synth_sim_restore(sim *s, const sim_state *st);
int synth_op_needs_end(const sim *s, const synth_op *op);
void synth_arrive_never_after(sim *s, size_t pos);
int64_t synth_step_gap(sim *s);
int64_t synth_bucket_seq(const synth_program *prog, int step, int b);
int synth_stuck_bucket(const pt_synth_plan *p);
bool synth_is_stall_step(int step);

/* synth.c: the plan's schedule. */
bool synth_op_in_job(const pt_synth_plan *p, const synth_op *op);
void synth_emit_link_counters(const pt_synth_plan *p, int rank, int64_t from, int64_t to, emitter *em);

#endif
