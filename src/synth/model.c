/* model.c -- the modelled training step (see model.h and docs/synth.md).
 *
 * A GPT-style decoder trained with DistributedDataParallel under bf16 autocast on H100s:
 * per step, the data loader, a pinned host-to-device copy of the batch, the forward pass
 * (per block: layer norms, QKV/out/MLP GEMMs, flash attention, GELU, residual adds), the
 * loss, the backward pass on the autograd thread with one gradient all-reduce per bucket
 * of three blocks (the last bucket also holds the embedding), the fused AdamW step, then
 * loss.item(), whose synchronize blocks the CPU until the GPU is done, and logging.
 * Frames are filed as a torch 2.x Kineto trace files them: Python frames
 * (python_function), operators and autograd nodes (cpu_op), record_function ranges
 * (user_annotation: DistributedDataParallel.forward, Optimizer.step#AdamW.step).
 *
 * The backend decides how a ready bucket is reduced. NCCL: the DDP hook launches an
 * all-reduce kernel on the NCCL stream. Gloo: the hook (c10d::allreduce_) copies the
 * bucket to pinned host memory on a side stream and hands it to a gloo thread, which
 * all-reduces it on the CPU and copies it back; DDP's finalize, at the end of the
 * backward, waits for every bucket and copies it into the gradients, so the main
 * thread's run_backward stays blocked until the last all-reduce is done.
 *
 * Nominal durations are chosen so a healthy step is ~80-105 ms with GPU utilisation of
 * ~70-80%, exposed communication well under 30%, every copy kind well under 1% and every
 * Python stack under 5% of the step; flash attention's backward is the costliest kernel
 * by a clear margin, so a uniformly slower GPU is named by it. The cost of building the
 * program is trivial (a few hundred ops per layer, once per plan). */
#include "synth/model.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ kernels */

enum {
    K_EMBED, K_LN, K_GEMM_QKV, K_FLASH_FWD, K_GEMM_OUT, K_ADD, K_GEMM_FC1, K_GELU, K_GEMM_FC2,
    K_SOFTMAX, K_NLL, K_NLL_BWD, K_SOFTMAX_BWD, K_GEMM_FC2_DGRAD, K_GEMM_FC2_WGRAD, K_REDUCE,
    K_GELU_BWD, K_GEMM_FC1_DGRAD, K_GEMM_FC1_WGRAD, K_LN_BWD_INPUT, K_LN_BWD_GAMMA,
    K_GEMM_OUT_DGRAD, K_GEMM_OUT_WGRAD, K_FLASH_BWD, K_GEMM_QKV_DGRAD, K_GEMM_QKV_WGRAD,
    K_EMBED_BWD, K_ADAMW, K_NCCL_ALLREDUCE, K_COUNT
};

#define KERNEL(name, gx, gy, gz, bx, by, bz) {name, sizeof(name) - 1, {gx, gy, gz}, {bx, by, bz}}

static const synth_kernel kernels[K_COUNT] = {
    [K_EMBED] = KERNEL("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)", 1056, 1, 1, 128, 1, 1),
    [K_LN] = KERNEL("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", 8192, 1, 1, 256, 1, 1),
    [K_GEMM_QKV] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 36, 32, 1, 384, 1, 1),
    [K_FLASH_FWD] = KERNEL("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)", 16, 4, 12, 128, 1, 1),
    [K_GEMM_OUT] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 12, 64, 1, 384, 1, 1),
    [K_ADD] = KERNEL("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", 6144, 1, 1, 128, 1, 1),
    [K_GEMM_FC1] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 48, 32, 1, 384, 1, 1),
    [K_GELU] = KERNEL("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)", 24576, 1, 1, 128, 1, 1),
    [K_GEMM_FC2] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_on_kernel__5x_cublas", 12, 64, 2, 384, 1, 1),
    [K_SOFTMAX] = KERNEL("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)", 8192, 1, 1, 1024, 1, 1),
    [K_NLL] = KERNEL("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)", 1, 1, 1, 32, 1, 1),
    [K_NLL_BWD] = KERNEL("void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*, long const*, float const*, float const*, bool, int, int, long, long)", 1, 1, 1, 32, 1, 1),
    [K_SOFTMAX_BWD] = KERNEL("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)", 8192, 1, 1, 1024, 1, 1),
    [K_GEMM_FC2_DGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 48, 32, 1, 384, 1, 1),
    [K_GEMM_FC2_WGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 12, 48, 1, 384, 1, 1),
    [K_REDUCE] = KERNEL("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<c10::BFloat16, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<c10::BFloat16, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)", 48, 8, 1, 32, 16, 1),
    [K_GELU_BWD] = KERNEL("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)", 24576, 1, 1, 128, 1, 1),
    [K_GEMM_FC1_DGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_on_kernel__5x_cublas", 12, 64, 2, 384, 1, 1),
    [K_GEMM_FC1_WGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 48, 12, 1, 384, 1, 1),
    [K_LN_BWD_INPUT] = KERNEL("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)", 8192, 1, 1, 256, 1, 1),
    [K_LN_BWD_GAMMA] = KERNEL("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<c10::BFloat16, float>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16*, c10::BFloat16*)", 48, 1, 1, 32, 32, 1),
    [K_GEMM_OUT_DGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 12, 64, 1, 384, 1, 1),
    [K_GEMM_OUT_WGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 12, 12, 1, 384, 1, 1),
    [K_FLASH_BWD] = KERNEL("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, false, false, false, false, false, true, false, false>(pytorch_flash::Flash_bwd_params)", 32, 4, 12, 256, 1, 1),
    [K_GEMM_QKV_DGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 12, 64, 3, 384, 1, 1),
    [K_GEMM_QKV_WGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 36, 12, 1, 384, 1, 1),
    [K_EMBED_BWD] = KERNEL("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, c10::BFloat16*, int, long, int, int)", 48, 1, 1, 32, 32, 1),
    [K_ADAMW] = KERNEL("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool const*, float const*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool const*, float const*)", 320, 1, 1, 512, 1, 1),
    [K_NCCL_ALLREDUCE] = KERNEL("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 24, 1, 1, 640, 1, 1),
};

const char *const synth_outer_frames[2] = {"train.py(131): <module>", "train.py(97): train"};

/* Parameters per transformer block and in the (tied) embedding, fp32 gradients. Gloo
 * copies every bucket through the host and reduces it on the CPU, so its job reduces
 * gradients sized as gloo jobs' are: an eighth of a block's per bucket and a 1 M
 * embedding (the kernels stay the same). Its copies then cost ~1% of the step, as on
 * real gloo jobs, even when a straggler leaves them nothing to hide behind; the full
 * gradients would cost 10%. */
#define BLOCK_PARAMS 9437184
#define EMBED_PARAMS 49152000
#define BLOCKS_PER_BUCKET 3
#define GLOO_BUCKET_PARAMS (BLOCK_PARAMS / 8)
#define GLOO_EMBED_PARAMS 1048576

/* ------------------------------------------------------------ builder */

static int64_t us(double v)
{
    return (int64_t)(v * 1000.0 + 0.5);
}

static synth_op *add(synth_program *p, synth_op_kind kind, synth_scale scale, const char *name)
{
    PT_GROW(p->ops, p->cap, p->count + 1);
    synth_op *op = &p->ops[p->count++];
    memset(op, 0, sizeof *op);
    op->kind = (uint8_t)kind;
    op->scale = (uint8_t)scale;
    op->name = name;
    op->name_len = name ? strlen(name) : 0;
    return op;
}

/* Opens a frame of the given Kineto kind, then spends pre_us inside it. */
static synth_op *push(synth_program *p, synth_scale scale, pt_cpu_kind cpu_kind, const char *name, double pre_us)
{
    synth_op *op = add(p, OP_PUSH, scale, name);
    op->cpu_kind = (uint8_t)cpu_kind;
    op->cpu_ns = us(pre_us);
    return op;
}

static void py(synth_program *p, const char *frame, double pre_us)
{
    push(p, SCALE_PYTHON, PT_CPU_PYTHON, frame, pre_us);
}

static void aten(synth_program *p, const char *op_name, double pre_us)
{
    push(p, SCALE_OPERATOR, PT_CPU_OPERATOR, op_name, pre_us);
}

/* A record_function range (torch.profiler's user_annotation). */
static void annotation(synth_program *p, const char *label, double pre_us)
{
    push(p, SCALE_PYTHON, PT_CPU_ANNOTATION, label, pre_us);
}

/* Closes frames, innermost first: each number is the time (us) a frame spends after what
 * it called has returned. POP closes operators, POP_PYTHON Python frames and annotations. */
static void pop_frames(synth_program *p, synth_scale scale, const double *post_us, size_t n)
{
    for (size_t i = 0; i < n; i++)
        add(p, OP_POP, scale, NULL)->cpu_ns = us(post_us[i]);
}
#define POST_TIMES(...) (const double[]){__VA_ARGS__}, sizeof((const double[]){__VA_ARGS__}) / sizeof(double)
#define POP(p, ...) pop_frames(p, SCALE_OPERATOR, POST_TIMES(__VA_ARGS__))
#define POP_PYTHON(p, ...) pop_frames(p, SCALE_PYTHON, POST_TIMES(__VA_ARGS__))

static void launch(synth_program *p, int kernel, double gpu_us)
{
    synth_op *op = add(p, OP_LAUNCH, SCALE_KERNEL, "cudaLaunchKernel");
    op->index = (uint16_t)kernel;
    op->cpu_ns = us(5.5);
    op->gpu_ns = us(gpu_us);
}

/* aten::<outer> -> aten::<inner> -> one kernel: the shape of most operators. */
static void operator_kernel(synth_program *p, const char *outer, const char *inner, int kernel, double gpu_us)
{
    aten(p, outer, 6);
    if (inner)
        aten(p, inner, 8);
    launch(p, kernel, gpu_us);
    if (inner)
        POP(p, 2);
    POP(p, 3);
}

static void copy(synth_program *p, synth_op_kind kind, synth_scale scale, const char *memcpy_kind, int64_t bytes,
                 double gpu_us)
{
    synth_op *op = add(p, kind, scale, memcpy_kind);
    op->cpu_ns = us(kind == OP_COPY_SYNC ? 9 : 6);
    op->gpu_ns = us(gpu_us);
    op->bytes = bytes;
}

/* x.to(device) and friends: aten::to -> aten::_to_copy -> aten::copy_ -> a copy. */
static void to_copy(synth_program *p, synth_op_kind kind, synth_scale scale, const char *memcpy_kind, int64_t bytes,
                    double gpu_us)
{
    aten(p, "aten::to", 4);
    aten(p, "aten::_to_copy", 9);
    aten(p, "aten::copy_", 5);
    copy(p, kind, scale, memcpy_kind, bytes, gpu_us);
    POP(p, 2, 3, 2);
}

/* The ops from first on belong to a fault: they run only where it is injected. */
static void mark_fault(synth_program *p, size_t first, pt_fault_kind kind)
{
    for (size_t i = first; i < p->count; i++)
        p->ops[i].fault = (uint8_t)kind;
}

bool synth_job_has(const pt_synth_job *job, pt_fault_kind kind)
{
    return job->fault == kind || job->second_fault == kind;
}

/* ------------------------------------------------------------ the step */

static void data_loading(synth_program *p)
{
    py(p, "torch/utils/data/dataloader.py(631): __next__", 35);
    py(p, "torch/utils/data/dataloader.py(675): _next_data", 20);
    push(p, SCALE_DATALOADER, PT_CPU_PYTHON, "torch/utils/data/_utils/fetch.py(51): fetch", 3000);
    POP_PYTHON(p, 5, 10, 8);
    push(p, SCALE_GC, PT_CPU_PYTHON, "<built-in function collect>", 150);
    POP_PYTHON(p, 1);
}

static void block_forward(synth_program *p, const pt_synth_job *job, int layer)
{
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "model.py(41): forward", 8);
    operator_kernel(p, "aten::layer_norm", "aten::native_layer_norm", K_LN, 28);
    operator_kernel(p, "aten::linear", "aten::addmm", K_GEMM_QKV, 310);
    aten(p, "aten::scaled_dot_product_attention", 7);
    operator_kernel(p, "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward", K_FLASH_FWD, 470);
    POP(p, 2);
    if (synth_job_has(job, PT_FAULT_COMMON_MEMCPY)) {
        /* A needless .contiguous() of the attention output in every block. */
        size_t first = p->count;
        aten(p, "aten::contiguous", 4);
        aten(p, "aten::clone", 6);
        aten(p, "aten::copy_", 5);
        copy(p, OP_COPY, SCALE_DTOD, "Memcpy DtoD (Device -> Device)", 0, 0);
        POP(p, 2, 2, 2);
        mark_fault(p, first, PT_FAULT_COMMON_MEMCPY);
    }
    operator_kernel(p, "aten::linear", "aten::addmm", K_GEMM_OUT, 110);
    operator_kernel(p, "aten::add", NULL, K_ADD, 24);
    operator_kernel(p, "aten::layer_norm", "aten::native_layer_norm", K_LN, 28);
    operator_kernel(p, "aten::linear", "aten::addmm", K_GEMM_FC1, 420);
    operator_kernel(p, "aten::gelu", NULL, K_GELU, 57);
    operator_kernel(p, "aten::linear", "aten::addmm", K_GEMM_FC2, 415);
    operator_kernel(p, "aten::add", NULL, K_ADD, 24);
    if ((synth_job_has(job, PT_FAULT_HANG) || synth_job_has(job, PT_FAULT_HANG_ORDER)) && layer == job->layers / 2)
        add(p, OP_HANG, SCALE_FIXED, NULL)->fault = synth_job_has(job, PT_FAULT_HANG) ? PT_FAULT_HANG : PT_FAULT_HANG_ORDER;
    POP_PYTHON(p, 3, 2);
}

static void forward(synth_program *p, const pt_synth_job *job)
{
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "torch/nn/parallel/distributed.py(1693): forward", 15);
    annotation(p, "DistributedDataParallel.forward", 10);
    py(p, "torch/nn/parallel/distributed.py(1519): _run_ddp_forward", 10);
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "model.py(88): forward", 10);
    operator_kernel(p, "aten::embedding", "aten::index_select", K_EMBED, 60);
    for (int layer = 0; layer < job->layers; layer++)
        block_forward(p, job, layer);
    POP_PYTHON(p, 4, 2, 3, 4, 4, 2);
    py(p, "torch/nn/functional.py(3059): cross_entropy", 12);
    aten(p, "aten::cross_entropy_loss", 5);
    operator_kernel(p, "aten::log_softmax", "aten::_log_softmax", K_SOFTMAX, 120);
    operator_kernel(p, "aten::nll_loss_nd", "aten::nll_loss_forward", K_NLL, 15);
    POP(p, 2);
    POP_PYTHON(p, 2);
}

/* A parameter's gradient is final: the engine runs its AccumulateGrad node. */
static void accumulate_grad(synth_program *p)
{
    aten(p, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 6);
    aten(p, "torch::autograd::AccumulateGrad", 3);
    POP(p, 2, 2);
}

/* One autograd node: evaluate_function: X -> X -> its kernels, each under one operator;
 * then, when it produced parameter gradients, their AccumulateGrad node. */
static void node(synth_program *p, const char *evaluate, const char *node_name, const char *op_name,
                 const int *kernel_ids, const double *gpu_us, int n, bool params)
{
    aten(p, evaluate, 9);
    aten(p, node_name, 6);
    for (int i = 0; i < n; i++)
        operator_kernel(p, op_name, NULL, kernel_ids[i], gpu_us[i]);
    POP(p, 2, 3);
    if (params)
        accumulate_grad(p);
}

static void linear_backward(synth_program *p, int dgrad, int wgrad, double dgrad_us, double wgrad_us)
{
    aten(p, "autograd::engine::evaluate_function: AddmmBackward0", 9);
    aten(p, "AddmmBackward0", 6);
    operator_kernel(p, "aten::mm", NULL, dgrad, dgrad_us);
    operator_kernel(p, "aten::mm", NULL, wgrad, wgrad_us);
    operator_kernel(p, "aten::sum", NULL, K_REDUCE, 20);
    POP(p, 2, 4);
    accumulate_grad(p);
}

static void block_backward(synth_program *p)
{
    static const int ln[] = {K_LN_BWD_INPUT, K_LN_BWD_GAMMA};
    static const double ln_us[] = {40, 35};
    static const int gelu[] = {K_GELU_BWD};
    static const double gelu_us[] = {72};
    static const int flash[] = {K_FLASH_BWD};
    static const double flash_us[] = {990};
    node(p, "autograd::engine::evaluate_function: AddBackward0", "AddBackward0", NULL, NULL, NULL, 0, false);
    linear_backward(p, K_GEMM_FC2_DGRAD, K_GEMM_FC2_WGRAD, 415, 430);
    node(p, "autograd::engine::evaluate_function: GeluBackward0", "GeluBackward0", "aten::gelu_backward", gelu, gelu_us,
         1, false);
    linear_backward(p, K_GEMM_FC1_DGRAD, K_GEMM_FC1_WGRAD, 420, 440);
    node(p, "autograd::engine::evaluate_function: NativeLayerNormBackward0", "NativeLayerNormBackward0",
         "aten::native_layer_norm_backward", ln, ln_us, 2, true);
    node(p, "autograd::engine::evaluate_function: AddBackward0", "AddBackward0", NULL, NULL, NULL, 0, false);
    linear_backward(p, K_GEMM_OUT_DGRAD, K_GEMM_OUT_WGRAD, 110, 115);
    node(p, "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
         "ScaledDotProductFlashAttentionBackward0", "aten::_flash_attention_backward", flash, flash_us, 1, false);
    linear_backward(p, K_GEMM_QKV_DGRAD, K_GEMM_QKV_WGRAD, 310, 325);
    node(p, "autograd::engine::evaluate_function: NativeLayerNormBackward0", "NativeLayerNormBackward0",
         "aten::native_layer_norm_backward", ln, ln_us, 2, true);
}

/* DDP copying a reduced bucket into the gradients, within the device: bytes per ns. */
#define DEVICE_COPY_BW 1500.0

/* The last gradient of a bucket is final: DDP's reducer hook, inside that parameter's
 * AccumulateGrad node, reduces the bucket. NCCL: an all-reduce kernel launched on the
 * NCCL stream. Gloo: c10d::allreduce_ copies the bucket to the host on a side stream and
 * hands it to a gloo thread (the interpreter writes that thread's events). */
static void bucket_all_reduce(synth_program *p, int64_t nelems)
{
    if (p->buckets >= SYNTH_MAX_BUCKETS)
        return;
    aten(p, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 6);
    aten(p, "torch::autograd::AccumulateGrad", 3);
    POP(p, 2);
    synth_op *op;
    if (p->backend == PT_SYNTH_GLOO) {
        aten(p, "c10d::allreduce_", 30);
        aten(p, "aten::copy_", 6);
        op = add(p, OP_GLOO_BUCKET, SCALE_LAUNCH, "Memcpy DtoH (Device -> Pinned)");
        op->cpu_ns = us(12);
        op->bytes = nelems * 4;
        op->gpu_ns = (int64_t)((double)op->bytes / SYNTH_PINNED_COPY_BW);
        POP(p, 3, 25);
    } else {
        aten(p, "nccl:all_reduce", 12);
        aten(p, "record_param_comms", 6);
        p->ops[p->count - 1].comms = true;
        p->ops[p->count - 1].index = (uint16_t)p->buckets;
        op = add(p, OP_BUCKET, SCALE_LAUNCH, "cudaLaunchKernel");
        op->cpu_ns = us(7);
        POP(p, 2, 3);
    }
    op->index = (uint16_t)p->buckets;
    POP(p, 2);
    p->bucket_nelems[p->buckets++] = nelems;
}

/* Gloo: DDP's finalize, the engine's last callback, on the autograd thread. For every
 * bucket in order it waits for the all-reduce and the copy back (the compute stream waits
 * too), then copies the bucket into the parameters' gradients. */
static void finalize_buckets(synth_program *p)
{
    for (int b = 0; b < p->buckets; b++) {
        synth_op *wait = add(p, OP_FINALIZE, SCALE_LAUNCH, "cudaStreamWaitEvent");
        wait->index = (uint16_t)b;
        wait->cpu_ns = us(4);
        aten(p, "torch.distributed.ddp.reducer::copy_bucket_to_grad", 3);
        aten(p, "aten::copy_", 2);
        int64_t bytes = p->bucket_nelems[b] * 4;
        copy(p, OP_COPY, SCALE_FIXED, "Memcpy DtoD (Device -> Device)", bytes, (double)bytes / DEVICE_COPY_BW / 1000.0);
        POP(p, 2, 2);
    }
}

static void backward(synth_program *p, const pt_synth_job *job)
{
    static const int loss[] = {K_NLL_BWD};
    static const double loss_us[] = {20};
    static const int softmax[] = {K_SOFTMAX_BWD};
    static const double softmax_us[] = {130};
    static const int embed[] = {K_EMBED_BWD};
    static const double embed_us[] = {240};
    py(p, "torch/_tensor.py(576): backward", 15);
    py(p, "torch/autograd/__init__.py(253): backward", 20);
    py(p, "torch/autograd/graph.py(860): _engine_run_backward", 8);
    py(p, "<built-in method run_backward of torch._C._EngineBase object at 0x7f3c2a1e5b40>", 25);
    add(p, OP_FORK, SCALE_FIXED, NULL);
    node(p, "autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0", "aten::nll_loss_backward",
         loss, loss_us, 1, false);
    node(p, "autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0",
         "aten::_log_softmax_backward_data", softmax, softmax_us, 1, false);
    bool gloo = p->backend == PT_SYNTH_GLOO;
    int per_bucket = gloo ? 1 : BLOCKS_PER_BUCKET;
    int64_t block_params = gloo ? GLOO_BUCKET_PARAMS : BLOCK_PARAMS;
    int in_bucket = 0;
    for (int layer = job->layers - 1; layer >= 0; layer--) {
        block_backward(p);
        if (++in_bucket == per_bucket && layer > 0) {
            bucket_all_reduce(p, (int64_t)in_bucket * block_params);
            in_bucket = 0;
        }
    }
    node(p, "autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0",
         "aten::embedding_dense_backward", embed, embed_us, 1, false);
    bucket_all_reduce(p, (int64_t)in_bucket * block_params + (gloo ? GLOO_EMBED_PARAMS : EMBED_PARAMS));
    if (gloo)
        finalize_buckets(p);
    add(p, OP_JOIN, SCALE_FIXED, NULL);
    POP_PYTHON(p, 30, 3, 4, 6);
}

static void optimizer_step(synth_program *p)
{
    py(p, "torch/optim/optimizer.py(373): wrapper", 30);
    annotation(p, "Optimizer.step#AdamW.step", 12);
    py(p, "torch/optim/adamw.py(187): step", 168);
    if (p->backend == PT_SYNTH_NCCL) /* gloo: finalize already waited */
        add(p, OP_WAIT_COMM, SCALE_LAUNCH, "cudaStreamWaitEvent")->cpu_ns = us(3);
    py(p, "torch/optim/adamw.py(335): adamw", 20);
    py(p, "torch/optim/adamw.py(678): _fused_adamw", 60);
    aten(p, "aten::_fused_adamw_", 25);
    for (int i = 0; i < 4; i++)
        launch(p, K_ADAMW, 450);
    POP(p, 5);
    POP_PYTHON(p, 4, 2, 6, 5, 5);
}

/* loss.item(): a 4-byte copy, then a synchronize that blocks until the GPU is done. */
static void loss_item(synth_program *p)
{
    aten(p, "aten::item", 5);
    aten(p, "aten::_local_scalar_dense", 7);
    copy(p, OP_COPY, SCALE_FIXED, "Memcpy DtoH (Device -> Pinned)", 4, 2);
    add(p, OP_SYNC, SCALE_LAUNCH, "cudaStreamSynchronize")->cpu_ns = us(4);
    POP(p, 3, 2);
}

void synth_program_build(synth_program *p, const pt_synth_job *job)
{
    memset(p, 0, sizeof *p);
    p->kernels = kernels;
    p->kernel_count = K_COUNT;
    p->nccl_kernel = K_NCCL_ALLREDUCE;
    p->backend = job->backend;
    data_loading(p);
    py(p, "train.py(58): train_step", 40);
    py(p, "torch/optim/optimizer.py(803): zero_grad", 900);
    POP_PYTHON(p, 5);
    to_copy(p, OP_COPY, SCALE_FIXED, "Memcpy HtoD (Pinned -> Device)", 16 << 20, 350);
    forward(p, job);
    if (synth_job_has(job, PT_FAULT_BLOCKING_DTOH)) {
        size_t first = p->count;
        py(p, "metrics.py(23): activation_stats", 15);
        to_copy(p, OP_COPY_SYNC, SCALE_DTOH, "Memcpy DtoH (Device -> Pageable)", 0, 0);
        POP_PYTHON(p, 20);
        mark_fault(p, first, PT_FAULT_BLOCKING_DTOH);
    }
    backward(p, job);
    optimizer_step(p);
    loss_item(p);
    POP_PYTHON(p, 15); /* train_step */
    py(p, "train.py(74): log_metrics", 2800);
    POP_PYTHON(p, 5);
    p->phase_c = p->count;
    for (size_t i = 0; i < p->count; i++)
        if (p->ops[i].kind == OP_WAIT_COMM || p->ops[i].kind == OP_FINALIZE) {
            p->phase_c = i;
            break;
        }
}

void synth_program_free(synth_program *p)
{
    free(p->ops);
    memset(p, 0, sizeof *p);
}
