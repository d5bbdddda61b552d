/* model.h -- internal to src/synth: one training step as a small program of ops.
 *
 * model.c writes the step of a data-parallel transformer job (data loader, forward,
 * backward with bucketed gradient all-reduces, optimizer, loss.item()) as a flat list
 * of ops; synth_sim.c interprets it per worker and step, with that worker's jitter and
 * fault knobs, to get times, and synth.c runs the workers in lock-step. Keeping the
 * "what" (names, nominal durations) here and the "when" (streams, waits, collectives) in
 * those lets each stay short. */
#ifndef PT_SYNTH_MODEL_H
#define PT_SYNTH_MODEL_H

#include "synth/synth.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which fault knob stretches an op's time on a faulty rank. Every CPU-side duration
 * (frames, operators, runtime calls) also stretches with cpu_contention's one factor. */
typedef enum synth_scale {
    SCALE_PYTHON,     /* Python frame CPU time */
    SCALE_OPERATOR,   /* ATen operator CPU time */
    SCALE_LAUNCH,     /* cudaLaunchKernel / cudaMemcpyAsync call */
    SCALE_KERNEL,     /* compute kernel duration (slow_gpu) */
    SCALE_FIXED,      /* GPU side not stretched: collectives, memcpy, syncs */
    SCALE_DATALOADER, /* + the slow_dataloader extra */
    SCALE_GC,         /* + the gc_pause extra */
    SCALE_DTOD,       /* duration is the common_memcpy knob */
    SCALE_DTOH,       /* duration is the blocking_dtoh knob */
    SCALE_STALL,      /* + `share` of this step's intermittent stall */
    SCALE_LOADER_WAIT,/* + `share` of the loader_starved wait */
    SCALE_LOADER_WORK,/* nominal x the single_process_loader work factor */
    SCALE_ALLOC       /* nominal x the empty_cache allocator factor (cudaFree, cudaMalloc) */
} synth_scale;

typedef enum synth_op_kind {
    OP_PUSH,       /* open a CPU frame `name`, then spend cpu_ns inside it */
    OP_POP,        /* spend cpu_ns, then close the innermost frame */
    OP_LAUNCH,     /* cudaLaunchKernel (cpu_ns), then kernel `index` (gpu_ns) on the compute stream */
    OP_COPY,       /* cudaMemcpyAsync, then a memcpy of kind `name` on the compute stream */
    OP_COPY_SYNC,  /* cudaMemcpy: the CPU blocks until the copy has run */
    OP_BUCKET,     /* cudaLaunchKernel of gradient bucket `index`'s all-reduce, NCCL stream */
    OP_GLOO_BUCKET,/* gloo: bucket `index` copied to the host on a side stream (cudaMemcpyAsync),
                      then all-reduced by a gloo thread, which copies it back */
    OP_FINALIZE,   /* gloo: DDP's finalize waits for bucket `index`'s all-reduce and copy back
                      (the CPU blocks, the compute stream waits: cudaStreamWaitEvent) */
    OP_FORK,       /* the autograd thread takes over from the main thread */
    OP_JOIN,       /* the main thread resumes when the autograd thread is done */
    OP_WAIT_COMM,  /* NCCL: cudaStreamWaitEvent, the compute stream waits for the last all-reduce */
    OP_SYNC,       /* cudaStreamSynchronize: the CPU waits for the compute stream */
    OP_HANG,       /* where a hung worker stops, in its hang step */
    OP_RUNTIME,    /* a runtime call `name` (cudaMalloc) of cpu_ns, with no GPU work */
    OP_FREE,       /* cudaFree: blocks until the device is idle, then spends cpu_ns */
    OP_WAIT_BUCKET,/* cudaStreamWaitEvent: the compute stream waits for bucket `index`'s
                      all-reduce (a synchronous comm hook's work.wait()) */
    OP_P2P,        /* pipeline: a send or receive (`index`: its key in the replica) on the
                      stream to the `peer` stage (0 below, 1 above) */
    OP_WAIT_P2P,   /* cudaStreamWaitEvent: the compute stream waits for receive `index` */
    OP_BLOCK,      /* pipeline: a transformer block begins; it draws from its own stream,
                      seeded by `bytes` (layer, microbatch, direction), wherever it runs */
    OP_BLOCK_END   /* ... and ends */
} synth_op_kind;

typedef struct synth_kernel {
    const char *name;
    size_t name_len;
    int32_t grid[3], block[3];
} synth_kernel;

typedef struct synth_op {
    uint8_t kind;        /* synth_op_kind */
    uint8_t scale;       /* synth_scale */
    uint8_t cpu_kind;    /* OP_PUSH: pt_cpu_kind, what Kineto files the frame under */
    uint8_t fault;       /* pt_fault_kind the op is part of (PT_FAULT_NONE: every job's): it
                            runs where that fault is injected and not fixed */
    uint8_t unless;      /* pt_fault_kind whose fix the op is (PT_FAULT_NONE: none): it runs
                            where that fault is not injected, or is fixed; where it is
                            injected it only draws its numbers (so both jobs draw alike) */
    bool comms;          /* OP_PUSH of record_param_comms for bucket `index` (args on it),
                            or, with `send` or a receive, for p2p key `index` */
    bool p2p;            /* OP_PUSH comms / OP_P2P: a pipeline transfer, not a bucket */
    bool send;           /* ... a send (else a receive) */
    uint8_t peer;        /* ... to or from the stage below (0) or above (1) */
    uint16_t index;      /* kernel (OP_LAUNCH) or bucket (OP_BUCKET, comms) */
    const char *name;    /* frame name or memcpy kind */
    size_t name_len;
    int64_t cpu_ns;      /* nominal CPU time */
    int64_t gpu_ns;      /* nominal GPU time */
    int64_t bytes;       /* copies */
    float share;         /* SCALE_STALL, SCALE_LOADER_WAIT: this op's part of the extra */
} synth_op;

/* Collectives per step: DDP's buckets (at most SYNTH_MAX_DDP_BUCKETS, as always) and one
 * all-reduce per parameter when gradients are not bucketed. */
#define SYNTH_MAX_BUCKETS 1024
#define SYNTH_MAX_DDP_BUCKETS 256
/* Gloo: a bucket's copies between device and pinned host memory, bytes per ns (PCIe). */
#define SYNTH_PINNED_COPY_BW 50.0

typedef struct synth_program {
    synth_op *ops;
    size_t count, cap;
    size_t phase_c;                 /* the first op that waits on peers (OP_WAIT_COMM or OP_FINALIZE):
                                       ops before it never do */
    pt_synth_backend backend;
    bool ddp;                       /* DistributedDataParallel: false for a single-GPU job */
    int buckets;
    int ddp_buckets;                /* of them, DDP's */
    int64_t bucket_nelems[SYNTH_MAX_BUCKETS];
    bool bucket_small[SYNTH_MAX_BUCKETS]; /* a parameter's own all-reduce: latency-bound */
    int live_buckets;               /* buckets the job all-reduces (not only draws) */
    uint16_t live_index[SYNTH_MAX_BUCKETS]; /* a bucket's number among them */
    const synth_kernel *kernels;    /* indexed by synth_op.index */
    size_t kernel_count;
    int nccl_kernel;                /* index of the all-reduce kernel */
    int p2p_kernel;                 /* ... and of the pipeline's send/receive kernel */
} synth_program;

/* One pipeline stage: which of the job's blocks it holds, and its neighbours. */
typedef struct synth_stage {
    int index, stages;
    int first_layer, layers;
    int microbatches;
    bool ddp;                       /* its replicas all-reduce its gradients */
} synth_stage;

/* The frames every worker's trace sits in, outermost first. */
extern const char *const synth_outer_frames[2];

void synth_program_build(synth_program *p, const pt_synth_job *job);
/* A pipeline-parallel job's step on one stage (GPipe). */
void synth_program_build_stage(synth_program *p, const pt_synth_job *job, const synth_stage *stage);
/* A pipeline transfer's key within its replica (OP_P2P's index). */
int synth_p2p_key(int stage, int microbatch, int microbatches, bool backward);
/* A single-GPU job: one worker of a kind that models it so, without DDP. */
bool synth_job_single_gpu(const pt_synth_job *job);
/* The job injects a fault of this kind (first or second; fixed ones too: their ops stay
 * in the program, to draw their numbers). */
bool synth_job_has(const pt_synth_job *job, pt_fault_kind kind);
void synth_program_free(synth_program *p);

#endif
