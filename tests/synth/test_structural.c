/* The structural fault kinds (unbucketed_allreduce ... absent_straggler) at scale, from
 * the events the generator streams (what the traces hold), without the plan's own times:
 *   - expected.json's true saving is the one the job and its twin show: each job's step is
 *     its slowest written worker's mean ProfilerStep, from the step events, at 8 to 256
 *     workers with noise;
 *   - the fault's mark (its frames, calls, kernels, blocks) is on the ranks expected.json
 *     names, and neither elsewhere nor in the twin;
 *   - the twin is the same job: every kernel the fault does not touch takes exactly as long
 *     in both (their draws line up), on every rank;
 *   - a pipeline's sends and receives pair up and end together on both sides;
 *   - the jobs the kinds cannot be are refused, at their boundaries. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth/synth.h"

/* ------------------------------------------------------------ what a worker streams */

#define MAX_STEPS 16
#define MAX_NAMES 4

/* One worker's events, reduced to what the checks need: its steps, the events named in
 * `names` (a trailing '*' matches a prefix), its NCCL kernels, and, when kept, its compute
 * kernels' durations in order. */
typedef struct tally {
    int steps;
    int64_t step_ns[MAX_STEPS];
    const char *const *names;
    int count[MAX_NAMES];
    int64_t total_ns[MAX_NAMES];
    int64_t nccl_ns;
    int nccl_count;
    int64_t compute_ns;
    int64_t *kernel_ns;          /* NULL: not kept */
    size_t kernels, kernel_cap;
} tally;

static bool matches(const pt_event *ev, const char *name)
{
    size_t n = strlen(name);
    if (n && name[n - 1] == '*')
        return ev->name_len >= n - 1 && memcmp(ev->name, name, n - 1) == 0;
    return ev->name_len == n && memcmp(ev->name, name, n) == 0;
}

static int on_event(void *ctx, const pt_event *ev)
{
    tally *t = ctx;
    if (ev->kind == PT_EVENT_STEP && t->steps < MAX_STEPS)
        t->step_ns[t->steps++] = ev->dur_ns;
    for (int i = 0; t->names && i < MAX_NAMES && t->names[i]; i++)
        if (matches(ev, t->names[i])) {
            t->count[i]++;
            t->total_ns[i] += ev->dur_ns;
        }
    if (ev->kind != PT_EVENT_GPU_KERNEL)
        return 0;
    if (ev->name_len > 4 && memcmp(ev->name, "nccl", 4) == 0) {
        t->nccl_ns += ev->dur_ns;
        t->nccl_count++;
        return 0;
    }
    t->compute_ns += ev->dur_ns;
    /* p.grad /= world is the per-parameter all-reduce's and the comm hook's own kernel */
    if (t->kernel_ns && !matches(ev, "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor*")) {
        PT_GROW(t->kernel_ns, t->kernel_cap, t->kernels + 1);
        t->kernel_ns[t->kernels++] = ev->dur_ns;
    }
    return 0;
}

static double mean_step_ms(const tally *t)
{
    int64_t sum = 0;
    for (int s = 0; s < t->steps; s++)
        sum += t->step_ns[s];
    return t->steps ? (double)sum / t->steps / 1e6 : 0;
}

/* ------------------------------------------------------------ a job and its twin */

typedef struct job_run {
    pt_synth_plan *plan;
    pt_json *expected;
    tally *t;                    /* per rank; no steps for a rank not written */
    int n;
    double step_ms;              /* the slowest written worker's mean step */
} job_run;

static pt_synth_plan *plan_of(const pt_synth_job *job)
{
    pt_error err = {{0}};
    pt_synth_plan *p = pt_synth_plan_new(job, &err);
    if (!p)
        fail_msg("plan %s: %s", pt_fault_name(job->fault), err.message);
    return p;
}

static void run_job(const pt_synth_job *job, const char *const *names, bool keep_kernels, job_run *out)
{
    out->plan = plan_of(job);
    out->expected = pt_synth_plan_expected(out->plan);
    out->n = job->workers;
    out->t = calloc((size_t)job->workers, sizeof *out->t);
    out->step_ms = 0;
    for (int r = 0; r < job->workers; r++) {
        tally *t = &out->t[r];
        t->names = names;
        if (keep_kernels)
            t->kernel_ns = malloc(sizeof *t->kernel_ns), t->kernel_cap = 1;
        if (!pt_synth_plan_writes(out->plan, r))
            continue;
        pt_trace_sink sink = {t, on_event, NULL};
        pt_trace_meta meta;
        pt_error err = {{0}};
        if (pt_synth_plan_worker(out->plan, r, &sink, &meta, &err) != 0)
            fail_msg("rank %d: %s", r, err.message);
        out->step_ms = fmax(out->step_ms, mean_step_ms(t));
    }
}

static void job_free(job_run *j)
{
    for (int r = 0; r < j->n; r++)
        free(j->t[r].kernel_ns);
    free(j->t);
    pt_json_free(j->expected);
    pt_synth_plan_free(j->plan);
}

static const pt_json *finding_of(const job_run *j)
{
    const pt_json *findings = pt_json_get(j->expected, "findings");
    return findings && findings->count == 1 ? findings->items[0] : NULL;
}

/* Whether the job's finding names the rank (every rank, when it is all workers'). */
static bool named_rank(const job_run *j, int rank)
{
    const pt_json *f = finding_of(j);
    const pt_json *workers = f ? pt_json_get(f, "workers") : NULL;
    for (size_t i = 0; workers && i < workers->count; i++)
        if (workers->items[i]->integer == rank)
            return true;
    return false;
}

/* expected.json's true saving against the steps both jobs streamed; the twin finds nothing. */
static void check_saving(const job_run *fault, const job_run *twin, const char *what)
{
    double saving = (fault->step_ms - twin->step_ms) / fault->step_ms;
    for (int i = 0; i < 2; i++) {
        const pt_json *e = i ? twin->expected : fault->expected;
        double key = pt_json_get_number(e, "true_saving", -1);
        const pt_json *steps = pt_json_get(e, "step_ms");
        if (fabs(key - saving) > 2e-6 || fabs(pt_json_get_number(steps, "with_fault", 0) - fault->step_ms) > 1e-5 ||
            fabs(pt_json_get_number(steps, "without_fault", 0) - twin->step_ms) > 1e-5)
            fail_msg("%s: expected.json's true saving %.6f (steps %.4f, %.4f), the steps streamed %.6f (%.4f, %.4f)",
                     what, key, pt_json_get_number(steps, "with_fault", 0),
                     pt_json_get_number(steps, "without_fault", 0), saving, fault->step_ms, twin->step_ms);
    }
    if (saving < 0.02)
        fail_msg("%s: fixing it saves %.4f", what, saving);
    assert_int_equal(pt_json_get(twin->expected, "findings")->count, 0);
    assert_string_equal(pt_json_get_string(twin->expected, "verdict", ""), "healthy");
    if (!finding_of(fault))
        fail_msg("%s: no finding", what);
}

/* ------------------------------------------------------------ each kind's mark */

/* The fault's own event: `per_step` of them in each step on a rank the finding names (0:
 * at least one), none elsewhere, none in the twin. */
static void mark_count(const job_run *f, const job_run *t, const char *what, int per_step)
{
    for (int r = 0; r < f->n; r++) {
        if (!pt_synth_plan_writes(f->plan, r))
            continue;
        int got = f->t[r].count[0], want = named_rank(f, r) ? per_step * f->t[r].steps : 0;
        if ((per_step > 0 || !named_rank(f, r)) ? got != want : got == 0)
            fail_msg("%s: rank %d has %d of the fault's events, expected %d", what, r, got, want);
        if (t->t[r].count[0] != 0)
            fail_msg("%s: the twin's rank %d has %d of them", what, r, t->t[r].count[0]);
    }
}

/* The named ranks' GPU work takes longer by more than the noise; the others' does not. */
static void mark_slower_gpu(const job_run *f, const job_run *t, const char *what)
{
    for (int r = 0; r < f->n; r++) {
        if (!f->t[r].steps)
            continue;
        double ratio = (double)f->t[r].compute_ns / (double)t->t[r].compute_ns;
        if (named_rank(f, r) ? ratio < 1.2 : fabs(ratio - 1) > 1e-9)
            fail_msg("%s: rank %d's kernels take %.3f of the twin's", what, r, ratio);
    }
}

static void check_kind_at_scale(pt_fault_kind kind, int workers, int steps, double noise)
{
    static const char *const marks[PT_FAULT_KIND_COUNT][MAX_NAMES] = {
        [PT_FAULT_UNBUCKETED_ALLREDUCE] = {"train.py(64): average_gradients"},
        [PT_FAULT_UNOVERLAPPED_ALLREDUCE] = {"train.py(52): allreduce_hook"},
        [PT_FAULT_INTERMITTENT_STALL] = {"train.py(112): save_checkpoint"},
        [PT_FAULT_LOADER_STARVED] = {"<built-in method poll of select.poll object at 0x7f3c29d1a0f0>"},
        [PT_FAULT_SINGLE_PROCESS_LOADER] = {"<built-in method encode_batch of tokenizers.Tokenizer object at 0x7f3c29d1a4d0>"},
        [PT_FAULT_EMPTY_CACHE] = {"cudaMalloc", "cudaFree"},
        [PT_FAULT_PIPELINE_IMBALANCE] = {"void pytorch_flash::flash_fwd_kernel*"},
    };
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.fault = kind;
    job.workers = workers;
    job.steps = steps;
    job.noise = noise;
    job.seed = 40 + (uint64_t)kind;
    job_run f, t;
    run_job(&job, marks[kind], false, &f);
    job.without = PT_SYNTH_WITHOUT_ALL;
    run_job(&job, marks[kind], false, &t);
    char what[96];
    snprintf(what, sizeof what, "%s -n %d --noise %g", pt_fault_name(kind), workers, noise);
    check_saving(&f, &t, what);
    const pt_json *finding = finding_of(&f);
    int layers = (int)pt_json_get_number(f.expected, "layers", 0);
    switch (kind) {
    case PT_FAULT_UNBUCKETED_ALLREDUCE: /* every parameter's all-reduce, every step, every rank */
        mark_count(&f, &t, what, 1);
        for (int r = 0; r < workers; r++)
            assert_int_equal(f.t[r].nccl_count, (12 * layers + 3) * steps);
        break;
    case PT_FAULT_UNOVERLAPPED_ALLREDUCE: /* the hook on each of the 4 buckets */
        mark_count(&f, &t, what, 4);
        break;
    case PT_FAULT_INTERMITTENT_STALL: /* steps 12 .. of 10 .. 10 + steps - 1 */
        mark_count(&f, &t, what, 0);
        for (int r = 0; r < workers; r++)
            assert_int_equal(f.t[r].count[0], named_rank(&f, r) ? (int)pt_json_get(finding, "stall_steps")->count : 0);
        break;
    case PT_FAULT_LOADER_STARVED: { /* every rank polls its queue, waiting 55% of the extra there */
        double extra = pt_json_get_number(f.expected, "severity", 0) * pt_json_get_number(f.expected, "healthy_step_ms", 0);
        for (int r = 0; r < workers; r++) {
            double waited = (double)f.t[r].total_ns[0] / 1e6 / steps, twin = (double)t.t[r].total_ns[0] / 1e6 / steps;
            if (waited < 0.4 * extra || twin > 0.1)
                fail_msg("%s: rank %d polls %.2f ms per step (twin %.3f), expected ~%.2f", what, r, waited, twin,
                         0.55 * extra);
        }
        break;
    }
    case PT_FAULT_SINGLE_PROCESS_LOADER: /* 8 samples tokenized per step, every rank */
        mark_count(&f, &t, what, 8);
        break;
    case PT_FAULT_EMPTY_CACHE: /* per block 4 cudaMalloc and 3 cudaFree, every rank */
        mark_count(&f, &t, what, 4 * layers);
        for (int r = 0; r < workers; r++)
            assert_int_equal(f.t[r].count[1], 3 * layers * steps);
        break;
    case PT_FAULT_PIPELINE_IMBALANCE: { /* the heavy stage runs a block more per microbatch */
        const pt_json *per_stage = pt_json_get(f.expected, "layers_per_stage");
        int stages = (int)per_stage->count, replicas = workers / stages;
        for (int r = 0; r < workers; r++) {
            int want = (int)per_stage->items[r / replicas]->integer * 8 * steps;
            assert_int_equal(f.t[r].count[0], want);
            assert_int_equal(t.t[r].count[0], layers / stages * 8 * steps);
            assert_int_equal(named_rank(&f, r), r / replicas == (int)pt_json_get_number(finding, "stage", -1));
        }
        break;
    }
    case PT_FAULT_SLOW_GPU_MLP:
    case PT_FAULT_ABSENT_STRAGGLER:
        mark_slower_gpu(&f, &t, what);
        for (int r = 0; r < workers; r++) /* only the culprits are left out */
            assert_int_equal(pt_synth_plan_writes(f.plan, r),
                             kind != PT_FAULT_ABSENT_STRAGGLER || !named_rank(&f, r));
        break;
    default:
        fail_msg("%s: no check", what);
    }
    job_free(&f);
    job_free(&t);
}

/* 8 to 256 workers, with noise. */
static void test_saving_at_scale(void **state)
{
    (void)state;
    check_kind_at_scale(PT_FAULT_UNBUCKETED_ALLREDUCE, 64, 2, 0.1);
    check_kind_at_scale(PT_FAULT_UNOVERLAPPED_ALLREDUCE, 32, 3, 0.1);
    check_kind_at_scale(PT_FAULT_INTERMITTENT_STALL, 16, 5, 0.2);
    check_kind_at_scale(PT_FAULT_LOADER_STARVED, 256, 2, 0.1);
    check_kind_at_scale(PT_FAULT_SINGLE_PROCESS_LOADER, 16, 3, 0.3);
    check_kind_at_scale(PT_FAULT_SLOW_GPU_MLP, 128, 3, 0.05);
    check_kind_at_scale(PT_FAULT_EMPTY_CACHE, 8, 2, 0.3);
    check_kind_at_scale(PT_FAULT_PIPELINE_IMBALANCE, 64, 2, 0.05);
    check_kind_at_scale(PT_FAULT_ABSENT_STRAGGLER, 256, 2, 0.1);
}

/* ------------------------------------------------------------ the twin draws alike */

/* Same seed, same noise: every kernel the fault does not touch takes exactly as long in
 * the job and its twin, on every rank (a draw out of line would move all that follow). */
static void check_same_draws(pt_fault_kind kind, int workers, double noise, pt_synth_backend backend)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.fault = kind;
    job.workers = workers;
    job.noise = noise;
    job.backend = backend;
    job.steps = kind == PT_FAULT_INTERMITTENT_STALL ? 4 : 2;
    job.seed = 77;
    job_run f, t;
    run_job(&job, NULL, true, &f);
    job.without = PT_SYNTH_WITHOUT_ALL;
    run_job(&job, NULL, true, &t);
    bool slower = kind == PT_FAULT_SLOW_GPU_MLP || kind == PT_FAULT_ABSENT_STRAGGLER;
    for (int r = 0; r < workers; r++) {
        const tally *a = &f.t[r], *b = &t.t[r];
        if (!a->steps || (slower && named_rank(&f, r)))
            continue; /* the slower GPU's kernels are all the fault's */
        if (a->kernels != b->kernels || memcmp(a->kernel_ns, b->kernel_ns, a->kernels * sizeof *a->kernel_ns) != 0)
            fail_msg("%s: rank %d's kernels differ from its twin's (%zu vs %zu kernels)", pt_fault_name(kind), r,
                     a->kernels, b->kernels);
    }
    job_free(&f);
    job_free(&t);
}

static void test_twin_draws_alike(void **state)
{
    (void)state;
    check_same_draws(PT_FAULT_UNBUCKETED_ALLREDUCE, 3, 0.3, PT_SYNTH_NCCL);
    check_same_draws(PT_FAULT_UNOVERLAPPED_ALLREDUCE, 4, 0.3, PT_SYNTH_NCCL);
    check_same_draws(PT_FAULT_INTERMITTENT_STALL, 2, 0.3, PT_SYNTH_GLOO);
    check_same_draws(PT_FAULT_LOADER_STARVED, 3, 0.3, PT_SYNTH_GLOO);
    check_same_draws(PT_FAULT_SINGLE_PROCESS_LOADER, 1, 0.3, PT_SYNTH_NCCL);
    check_same_draws(PT_FAULT_SINGLE_PROCESS_LOADER, 2, 0.3, PT_SYNTH_NCCL);
    check_same_draws(PT_FAULT_SLOW_GPU_MLP, 3, 0.3, PT_SYNTH_NCCL);
    check_same_draws(PT_FAULT_EMPTY_CACHE, 2, 0.3, PT_SYNTH_NCCL);
    check_same_draws(PT_FAULT_ABSENT_STRAGGLER, 3, 0.3, PT_SYNTH_NCCL);
}

/* ------------------------------------------------------------ the pipeline's transfers */

typedef struct p2p_log {
    int64_t ts[2048], end[2048];
    bool send[2048];
    int64_t stream[2048];
    int n;
} p2p_log;

static int on_p2p(void *ctx, const pt_event *ev)
{
    p2p_log *l = ctx;
    if (ev->kind == PT_EVENT_GPU_KERNEL && ev->coll.name && l->n < 2048 &&
        (ev->coll.name_len == 4 && (memcmp(ev->coll.name, "send", 4) == 0 || memcmp(ev->coll.name, "recv", 4) == 0))) {
        l->ts[l->n] = ev->ts_ns;
        l->end[l->n] = ev->ts_ns + ev->dur_ns;
        l->send[l->n] = ev->coll.name[0] == 's';
        l->stream[l->n++] = ev->tid;
    }
    return 0;
}

/* Stage s's k-th send up is stage s+1's k-th receive from below, and the other way for the
 * gradients: the two kernels end at the same moment, after both began; a receive starts
 * no earlier than the one before it on its stream ended. */
static void test_pipeline_pairs(void **state)
{
    (void)state;
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.fault = PT_FAULT_PIPELINE_IMBALANCE;
    job.workers = 8; /* 4 stages x 2 replicas: ranks 2s, 2s + 1 */
    job.steps = 2;
    job.noise = 0.2;
    pt_synth_plan *plan = plan_of(&job);
    p2p_log *log = calloc(8, sizeof *log);
    for (int r = 0; r < 8; r++) {
        pt_trace_sink sink = {&log[r], on_p2p, NULL};
        pt_trace_meta meta;
        pt_error err = {{0}};
        assert_int_equal(pt_synth_plan_worker(plan, r, &sink, &meta, &err), 0);
        int stage = r / 2, peers = (stage > 0) + (stage < 3);
        assert_int_equal(log[r].n, peers * 2 * 8 * 2); /* send and receive, per microbatch and step */
    }
    for (int r = 0; r + 2 < 8; r++) { /* rank r (stage s) and r + 2 (stage s + 1), one replica */
        const p2p_log *lo = &log[r], *hi = &log[r + 2];
        int64_t up_lo[64], up_hi[64], down_lo[64], down_hi[64], start_lo[64], start_hi[64];
        int a = 0, b = 0, c = 0, d = 0;
        for (int i = 0; i < lo->n; i++)
            if (lo->stream[i] == 45) { /* to the stage above */
                if (lo->send[i])
                    start_lo[a] = lo->ts[i], up_lo[a++] = lo->end[i];
                else
                    down_lo[c++] = lo->end[i];
            }
        for (int i = 0; i < hi->n; i++)
            if (hi->stream[i] == 44) { /* from the stage below */
                if (!hi->send[i])
                    start_hi[b] = hi->ts[i], up_hi[b++] = hi->end[i];
                else
                    down_hi[d++] = hi->end[i];
            }
        assert_int_equal(a, 16);
        assert_int_equal(a, b);
        assert_int_equal(c, d);
        for (int k = 0; k < a; k++) {
            assert_int_equal(up_lo[k], up_hi[k]);
            assert_true(up_lo[k] > start_lo[k] && up_hi[k] > start_hi[k]);
            if (k > 0)
                assert_true(start_hi[k] >= up_hi[k - 1]);
        }
        for (int k = 0; k < c; k++)
            assert_int_equal(down_lo[k], down_hi[k]);
    }
    free(log);
    pt_synth_plan_free(plan);
}

/* ------------------------------------------------------------ refused jobs */

static void expect(pt_synth_job job, const char *needle)
{
    pt_error err = {{0}};
    pt_synth_plan *p = pt_synth_plan_new(&job, &err);
    if (needle && p)
        fail_msg("%s -n %d accepted (%s)", pt_fault_name(job.fault), job.workers, needle);
    if (needle && !strstr(err.message, needle))
        fail_msg("message '%s' lacks '%s'", err.message, needle);
    if (!needle && !p)
        fail_msg("%s -n %d refused: %s", pt_fault_name(job.fault), job.workers, err.message);
    pt_synth_plan_free(p);
}

static pt_synth_job small(pt_fault_kind kind, int workers)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.fault = kind;
    job.workers = workers;
    job.steps = 2;
    job.layers = 3;
    return job;
}

static void test_refused_at_the_boundaries(void **state)
{
    (void)state;
    /* The fewest workers each kind makes sense with: n - 1 refused, n accepted. */
    static const struct {
        pt_fault_kind kind;
        int fewest;
    } fewest[] = {
        {PT_FAULT_UNBUCKETED_ALLREDUCE, 2},  {PT_FAULT_UNOVERLAPPED_ALLREDUCE, 2}, {PT_FAULT_LOADER_STARVED, 1},
        {PT_FAULT_SINGLE_PROCESS_LOADER, 1}, {PT_FAULT_SLOW_GPU_MLP, 2},           {PT_FAULT_EMPTY_CACHE, 1},
        {PT_FAULT_ABSENT_STRAGGLER, 2},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(fewest); i++) {
        if (fewest[i].fewest > 1)
            expect(small(fewest[i].kind, fewest[i].fewest - 1), "at least");
        expect(small(fewest[i].kind, fewest[i].fewest), NULL);
        expect(small(fewest[i].kind, fewest[i].fewest + 1), NULL);
    }
    pt_synth_job job = small(PT_FAULT_INTERMITTENT_STALL, 1); /* stalls in the third step */
    expect(job, "at least 3 steps");
    job.steps = 3;
    expect(job, NULL);
    job = small(PT_FAULT_UNOVERLAPPED_ALLREDUCE, 4); /* one rank's hook */
    job.fault_ranks[0] = 1, job.fault_ranks[1] = 2, job.fault_rank_count = 2;
    expect(job, "one rank");
    job = small(PT_FAULT_UNBUCKETED_ALLREDUCE, 2); /* 12 gradients per block */
    job.layers = 80;
    expect(job, NULL);
    job.layers = 81;
    expect(job, "at most 80 layers");
    job = small(PT_FAULT_UNBUCKETED_ALLREDUCE, 2); /* knobless kinds take no severity */
    job.severity = 0.2;
    expect(job, "takes no severity");
    job = small(PT_FAULT_UNOVERLAPPED_ALLREDUCE, 2);
    job.backend = PT_SYNTH_GLOO;
    expect(job, "NCCL");
    job = small(PT_FAULT_EMPTY_CACHE, 4); /* a second fault goes with the old kinds only */
    job.second_fault = PT_FAULT_SLOW_GPU;
    expect(job, "second fault");
    /* Pipelines: stages dividing the workers, 2 to 16 of them, at least 2 blocks each. */
    job = small(PT_FAULT_PIPELINE_IMBALANCE, 8);
    job.layers = 8; /* 4 stages x 2 */
    expect(job, NULL);
    job.layers = 7;
    expect(job, "multiple of 4");
    job.layers = 4;
    expect(job, "at least 2 per stage");
    job.layers = 12, job.pipeline_stages = 3;
    expect(job, "divide the workers");
    job.pipeline_stages = 2;
    expect(job, NULL);
    job.pipeline_stages = 1;
    expect(job, "stages must be");
    job = small(PT_FAULT_PIPELINE_IMBALANCE, 2);
    job.layers = 4;
    expect(job, NULL); /* 2 stages of 2: 3 and 1 */
}

/* The same job gives the same events; the absent straggler's events exist, unwritten. */
static void test_deterministic(void **state)
{
    (void)state;
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.fault = PT_FAULT_PIPELINE_IMBALANCE;
    job.workers = 4;
    job.steps = 2;
    job.noise = 0.3;
    job_run a, b;
    run_job(&job, NULL, true, &a);
    run_job(&job, NULL, true, &b);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(a.t[r].kernels, b.t[r].kernels);
        assert_memory_equal(a.t[r].kernel_ns, b.t[r].kernel_ns, a.t[r].kernels * sizeof *a.t[r].kernel_ns);
        assert_memory_equal(a.t[r].step_ns, b.t[r].step_ns, sizeof a.t[r].step_ns);
    }
    job_free(&a);
    job_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_at_the_boundaries),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_pipeline_pairs),
        cmocka_unit_test(test_twin_draws_alike),
        cmocka_unit_test(test_saving_at_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
