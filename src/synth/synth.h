/* synth.h -- synthetic multi-worker training jobs with injected faults.
 *
 * The generator produces, for every worker of a data-parallel (pipeline_imbalance:
 * pipeline-parallel) PyTorch training job, the events a PyTorch-profiler (Kineto) trace of
 * it would hold: Python frames, ATen operators and annotations (each with its Kineto
 * category), CUDA runtime calls, compute kernels, memory copies and gradient all-reduces,
 * step by step, on the threads real jobs use (main, autograd, and gloo's two when the
 * backend is gloo). It is how the
 * analysis is tested (a fault is injected, the report must name it) and benchmarked at
 * scale (thousands of workers, gigabyte traces).
 *
 * The timing is causal and lock-step across workers: a kernel starts after its launch
 * call and after its stream predecessor; an all-reduce (an NCCL kernel, or a gloo
 * thread's gloo:all_reduce) starts on a worker when that worker gets there and ends on
 * every worker at the same moment, after the last one arrived plus the transfer time, so
 * healthy workers show long all-reduces (waiting) and a straggler the shortest. Workers
 * differ by a few percent of seeded, bounded jitter, so no two healthy workers are
 * identical and none looks faulty; `noise` adds the much larger, step-wise noise of
 * processes sharing one GPU. docs/synth.md describes the modelled step, the faults and
 * what the analysis is expected to find.
 *
 * Cost: pt_synth_plan_new() simulates every worker once to fix the collectives' end times
 * (O(workers x steps x ops), about 20 us per worker-step); then each worker's events are
 * produced on demand, one worker at a time, in O(its events) and constant memory. A plan
 * is read-only after creation, so threads may emit different workers from one plan. */
#ifndef PT_SYNTH_SYNTH_H
#define PT_SYNTH_SYNTH_H

#include "summarize/summary.h"
#include "trace/event.h"
#include "util/common.h"
#include "util/json.h"

#include <stdint.h>

typedef enum pt_fault_kind {
    PT_FAULT_NONE,            /* healthy: nothing to find */
    PT_FAULT_SLOW_GPU,        /* every compute kernel of the faulty rank(s) is slower */
    PT_FAULT_CPU_CONTENTION,  /* slow kernel launches and operators: the GPU starves */
    PT_FAULT_SLOW_DATALOADER, /* the data loader's fetch takes longer */
    PT_FAULT_GC_PAUSE,        /* a long gc.collect() in the training loop */
    PT_FAULT_BLOCKING_DTOH,   /* a large synchronous device-to-host copy every step */
    PT_FAULT_COMMON_MEMCPY,   /* every worker spends ~10% of its step in DtoD copies */
    PT_FAULT_TWO_SLOW,        /* slow_gpu on two ranks */
    PT_FAULT_HANG,            /* the faulty rank stops in a step; the others wait for it */
    /* Hangs the collectives explain (NCCL), in the step hang_step: */
    PT_FAULT_HANG_MISMATCH,   /* the faulty rank's first all-reduce is a broadcast: all block */
    PT_FAULT_HANG_SIZE,       /* ... has half the elements: all block */
    PT_FAULT_HANG_SKIP,       /* the faulty rank skips the next-to-last bucket's all-reduce */
    PT_FAULT_HANG_ORDER,      /* the faulty rank reduces over a second group first (and waits
                                 in .item()); the others in the first group: a deadlock */
    PT_FAULT_HANG_TRANSPORT,  /* every rank enters the first all-reduce; none returns */
    /* Faults whose cause is structural, spread over several functions or out of sight;
     * expected.json carries their true saving (docs/synth.md): */
    PT_FAULT_UNBUCKETED_ALLREDUCE,  /* every rank all-reduces each gradient on its own after
                                       the backward: ~150 latency-bound collectives a step */
    PT_FAULT_UNOVERLAPPED_ALLREDUCE,/* one rank's comm hook waits for each bucket's all-reduce
                                       on its compute stream: no overlap with its backward */
    PT_FAULT_INTERMITTENT_STALL,    /* one rank stalls 250-400 ms in save_checkpoint, one
                                       step in four */
    PT_FAULT_LOADER_STARVED,        /* every rank waits on its too few loader workers */
    PT_FAULT_SINGLE_PROCESS_LOADER, /* every rank (a single-GPU job at -n 1) loads and
                                       decodes its batches in the training process */
    PT_FAULT_SLOW_GPU_MLP,          /* a slower GPU in a job of two or three kernel names */
    PT_FAULT_EMPTY_CACHE,           /* torch.cuda.empty_cache() after every block, every rank */
    PT_FAULT_PIPELINE_IMBALANCE,    /* pipeline parallel: one stage holds more layers */
    PT_FAULT_ABSENT_STRAGGLER,      /* a slower GPU whose own trace is not written */
    PT_FAULT_KIND_COUNT
} pt_fault_kind;

/* Where the gradient all-reduces run: NCCL kernels on a GPU stream, or gloo on CPU
 * threads (each bucket copied to the host and back). */
typedef enum pt_synth_backend { PT_SYNTH_NCCL, PT_SYNTH_GLOO } pt_synth_backend;

#define PT_SYNTH_MAX_FAULT_RANKS 8
#define PT_SYNTH_MAX_NOISE 0.5
#define PT_SYNTH_MAX_WORKERS (1 << 20)
#define PT_SYNTH_MAX_LAYERS 512

typedef struct pt_synth_job {
    int workers;          /* world size */
    int steps;            /* profiled steps per worker */
    int gpus_per_node;    /* workers per host: host "node<rank / gpus_per_node>" */
    int layers;           /* transformer blocks per step (event count grows with it); 0:
                             12 (pt_synth_job_init) */
    uint64_t seed;
    pt_fault_kind fault;
    int fault_ranks[PT_SYNTH_MAX_FAULT_RANKS];
    int fault_rank_count; /* 0: the fault's default ({world-1}; two_slow {1, world-2}) */
    double severity;      /* extra step time as a fraction of a healthy step; 0: the
                             fault's default (0.3; common_memcpy 0.11, ~10% of the step;
                             empty_cache 0.59; intermittent_stall: the stall in healthy
                             steps, 325 ms); unbucketed_allreduce, unoverlapped_allreduce
                             and pipeline_imbalance take none (it must stay 0) */
    int hang_step;        /* hang: the step index (0-based) it stops in; -1: the last */
    int pipeline_stages;  /* pipeline_imbalance: stages (0: 4 when the workers divide by 4,
                             else as many as workers); workers / stages data-parallel
                             replicas */
    pt_synth_backend backend;
    double noise;         /* 0: a few percent of jitter. X in (0, 0.5]: every GPU op's time
                             varies by +-X, every CPU op's by +-2.5X (at most 90%), and a
                             quarter of (rank, step) pairs run all that step's kernels
                             X/2 to 3X/2 slower (processes time-sharing one GPU) */
    /* A second fault on other ranks (PT_FAULT_NONE: none): slow_gpu, cpu_contention,
     * slow_dataloader, gc_pause or blocking_dtoh, of another kind than the first. */
    pt_fault_kind second_fault;
    int second_ranks[PT_SYNTH_MAX_FAULT_RANKS];
    int second_rank_count; /* 0: the highest rank the first fault leaves healthy */
    double second_severity; /* 0: 0.3 */
    /* The same job with faults fixed (PT_SYNTH_WITHOUT_*): the same seed and noise, the
     * same events but the fixed fault's own, whose random draws are still made so that
     * every other op draws what it drew with the fault. So the true saving of fixing a
     * fault is known: the step with it against the step without. */
    unsigned without;
} pt_synth_job;

#define PT_SYNTH_WITHOUT_FIRST 1u
#define PT_SYNTH_WITHOUT_SECOND 2u
#define PT_SYNTH_WITHOUT_ALL (PT_SYNTH_WITHOUT_FIRST | PT_SYNTH_WITHOUT_SECOND)

/* Defaults: 8 workers, 3 steps, 8 GPUs per node, 12 layers, seed 1, healthy, nccl, no
 * noise. */
/* Whether a fault is one of the hangs (the verdict is "hang"). */
bool pt_fault_is_hang(pt_fault_kind kind);
/* Whether expected.json carries the fault's true saving (the kinds from unbucketed_allreduce
 * on; the others' answer keys stay as they were). */
bool pt_fault_reports_saving(pt_fault_kind kind);
void pt_synth_job_init(pt_synth_job *job);

const char *pt_fault_name(pt_fault_kind kind);  /* "slow_gpu", ... */
int pt_fault_parse(const char *name, pt_fault_kind *kind); /* 0, or -1 when unknown */
const char *pt_synth_backend_name(pt_synth_backend backend); /* "nccl", "gloo" */
int pt_synth_backend_parse(const char *name, pt_synth_backend *backend); /* 0, or -1 */

typedef struct pt_synth_plan pt_synth_plan;

/* Validates the job and fixes its schedule. NULL with err set when the job is invalid. */
pt_synth_plan *pt_synth_plan_new(const pt_synth_job *job, pt_error *err);
void pt_synth_plan_free(pt_synth_plan *plan);
/* The job as resolved: default ranks and severity filled in. */
const pt_synth_job *pt_synth_plan_job(const pt_synth_plan *plan);

/* Worker rank's identity: rank, world size, host, local rank, pid, device, clock origin.
 * Known before any event, so a writer can be told before the events stream. */
void pt_synth_plan_meta(const pt_synth_plan *plan, int rank, pt_trace_meta *meta);
/* The vendor's trace file name without extension: "<host>_<local_rank>_<pid>". */
void pt_synth_plan_worker_stem(const pt_synth_plan *plan, int rank, char *out, size_t cap);
/* Whether the job's output holds worker rank's trace: false for absent_straggler's
 * culprits (their events can still be generated, for tests). */
bool pt_synth_plan_writes(const pt_synth_plan *plan, int rank);

/* Streams worker rank's events into sink and fills meta. Deterministic for (job, rank):
 * the same job gives the same events in the same order. Each GPU activity is delivered
 * right after the runtime call that launched it. 0, or -1 with err set (bad rank, or
 * the sink refused an event). */
int pt_synth_plan_worker(const pt_synth_plan *plan, int rank, pt_trace_sink *sink, pt_trace_meta *meta,
                         pt_error *err);

/* Convenience for one worker of a small job: plans, emits, frees (O(workers) each call;
 * use a plan to emit many workers). */
int pt_synth_worker(const pt_synth_job *job, int rank, pt_trace_sink *sink, pt_trace_meta *meta, pt_error *err);

/* Worker rank summarized in memory, as `perftracker summarize` would summarize its trace,
 * and named as that trace ("<stem>.json"): NULL with err set. The pt_synth_summary form
 * plans, summarizes and frees, like pt_synth_worker. */
pt_worker_summary *pt_synth_plan_summary(const pt_synth_plan *plan, int rank, pt_error *err);
pt_worker_summary *pt_synth_summary(const pt_synth_job *job, int rank, pt_error *err);

/* What the analysis should find, as JSON (a fixed fault finds nothing; "without" lists
 * the fixed ones, "second_fault" the second when there is one):
 *   {"fault": "slow_gpu", "verdict": "healthy"|"degraded"|"hang", "severity": 0.3,
 *    "workers": 8, "steps": 3, "seed": 1, "backend": "nccl", "noise": 0,
 *    "findings": [ {"category": "gpu_compute", "function": "<key as the summary keys it>",
 *                   "workers": [7], "all_workers": false, "worker_names": ["node0_7_10007.json"]} ]}
 * findings is empty for a healthy job; for a hang, "function" is null, "hang_step" is the
 * ProfilerStep it stopped in and "others_blocked_in" what the others wait in (the NCCL
 * kernel, or gloo:all_reduce). The structural kinds (pt_fault_reports_saving) add
 * "true_saving" and "step_ms" {"with_fault", "without_fault"} (the slowest written
 * worker's mean step, with the fault and in the twin), and per finding "parts" (the
 * functions its time shows in) and what locates it ("stall_steps", "missing_ranks",
 * "stage", "layers_per_stage", "collectives_per_step"); docs/synth.md. 0, or -1 with err
 * set when the job is invalid. */
int pt_synth_expected(const pt_synth_job *job, pt_json **out, pt_error *err);
pt_json *pt_synth_plan_expected(const pt_synth_plan *plan);

#endif
