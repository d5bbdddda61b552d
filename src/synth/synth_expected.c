/* synth_expected.c -- expected.json: what the analysis should find in the job a plan
 * writes (pt_synth_plan_expected; its keys are in synth.h and docs/synth.md).
 *
 * Design. A finding's function is keyed as the summarizer keys it, read off the
 * program's ops: a kernel's name with its grid and block, or the Python stack of
 * normalized frames from the training loop's down to the frame named (stack_at,
 * frame_stack), so a change to the model moves the answer key with it. The ranks are the
 * fault's, a hang's call number the one the traces carry (synth_bucket_seq). The
 * structural kinds carry the true saving of fixing the fault: the job is planned again
 * with the fault written fixed if it was not (or injected if it was), and the two
 * plans' step ends are compared (add_true_saving). Cost: O(the programs' ops), and that
 * second plan for the structural kinds.
 *
 * Calls: synth_faults.c (the fault kinds' names and facts), synth_sim.c (a bucket's call
 * number, the stall steps, the stuck bucket), synth.c (which ops the job makes; the twin
 * plan made and freed) and synth_worker.c (the workers' file names, which are written);
 * the top of src/synth: no file of it calls this one. */
#include "synth/synth_state.h"
#include "summarize/classify.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

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
        if (!synth_op_in_job(p, op))
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
            if (synth_is_stall_step(step))
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
    pt_json_add(h, "seq", pt_json_int(synth_bucket_seq(&p->progs[0], job->hang_step, synth_stuck_bucket(p))));
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
    bool all = synth_every_rank(fault->kind);
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
    pt_json_add(root, "severity", synth_has_severity(job->fault) ? pt_json_number(job->severity) : pt_json_null());
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
