/* synth_faults.c -- the fault kinds: their names, the ranks each is on, its default
 * severity and the workers and backend it needs; the job resolved and checked against
 * them; whether a fault of the plan is on a rank.
 *
 * Design. A fault is a kind with facts of its own (a hang or not, every rank's or one
 * rank's, with a severity or sized by the model, NCCL only or not) and, in a plan, a few
 * ranks and a knob (synth_fault). This file knows the kinds and checks a job against
 * them; it fills in what the job leaves to the kind (ranks, severity, hang step, pipeline
 * stages, the second fault's rank). What a fault does is elsewhere: its ops in the step
 * (model.c), its knob calibrated to its severity (synth.c), the knob applied and a fixed
 * fault's ops drawn but not written (synth_sim.c). A job holds up to two faults on
 * separate ranks; a fault written fixed (job.without) keeps its ranks.
 *
 * Calls: no other file of src/synth (the lowest of them, with synth_emit.c): model.c,
 * synth_sim.c, synth.c, synth_worker.c and synth_expected.c call it. Cost: a few
 * comparisons per job (at most PT_SYNTH_MAX_FAULT_RANKS ranks a fault), once. */
#include "synth/synth_state.h"

#include <string.h>

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
bool synth_every_rank(pt_fault_kind kind)
{
    return kind == PT_FAULT_COMMON_MEMCPY || kind == PT_FAULT_UNBUCKETED_ALLREDUCE ||
           kind == PT_FAULT_LOADER_STARVED || kind == PT_FAULT_SINGLE_PROCESS_LOADER || kind == PT_FAULT_EMPTY_CACHE;
}

/* Faults whose size follows from the model, not from --severity. */
bool synth_has_severity(pt_fault_kind kind)
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
 * synth_stuck_bucket gives on): the calls, not a stopped rank, are what is wrong. */
bool synth_all_enter(pt_fault_kind kind)
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

bool synth_fault_on(const synth_fault *f, int rank)
{
    if (synth_every_rank(f->kind))
        return true;
    for (int i = 0; i < f->rank_count; i++)
        if (f->ranks[i] == rank)
            return true;
    return false;
}

/* ------------------------------------------------------------ the job resolved */

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

int synth_resolve_job(pt_synth_job *job, pt_error *err)
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
    if (!synth_has_severity(job->fault) && job->severity != 0) {
        pt_error_set(err, "fault %s takes no severity: its cost follows from the model", pt_fault_name(job->fault));
        return -1;
    }
    if (job->severity == 0 && synth_has_severity(job->fault))
        job->severity = default_severity(job->fault);
    if (synth_has_severity(job->fault) && job->severity != 0 && !(job->severity > 0 && job->severity <= 100)) {
        pt_error_set(err, "severity must be in (0, 100]");
        return -1;
    }
    bool per_rank = job->fault != PT_FAULT_NONE && !synth_every_rank(job->fault);
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

