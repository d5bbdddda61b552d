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
 * program is trivial (a few hundred ops per layer, once per plan).
 *
 * A fault's ops are marked with it (they run where it is injected), and a fix's ops with
 * `unless` (they run where it is not): both are in every job's program, so the job and
 * its twin draw alike. Besides the GPT step there is an MLP's (slow_gpu_mlp: three GEMM
 * kernels), a pipeline stage's (GPipe over the GPT's blocks, sends and receives between
 * stages) and a single-GPU job's (no DDP). Every name follows a real torch 2.x Kineto trace:
 * C calls as their repr ("<built-in method poll of select.poll object at 0x...>"), the c10d
 * path of an all-reduce as the 8-rank DLRM trace has it (c10d::allreduce_ ->
 * record_param_comms -> nccl:all_reduce, 70-86 us of CPU). Calls: synth_faults.c only
 * (pt_fault_reports_saving, for a single-GPU job). */
#include "synth/model.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ kernels */

enum {
    K_EMBED, K_LN, K_GEMM_QKV, K_FLASH_FWD, K_GEMM_OUT, K_ADD, K_GEMM_FC1, K_GELU, K_GEMM_FC2,
    K_SOFTMAX, K_NLL, K_NLL_BWD, K_SOFTMAX_BWD, K_GEMM_FC2_DGRAD, K_GEMM_FC2_WGRAD, K_REDUCE,
    K_GELU_BWD, K_GEMM_FC1_DGRAD, K_GEMM_FC1_WGRAD, K_LN_BWD_INPUT, K_LN_BWD_GAMMA,
    K_GEMM_OUT_DGRAD, K_GEMM_OUT_WGRAD, K_FLASH_BWD, K_GEMM_QKV_DGRAD, K_GEMM_QKV_WGRAD,
    K_EMBED_BWD, K_ADAMW, K_NCCL_ALLREDUCE,
    /* unbucketed_allreduce's and the comm hook's p.grad /= world; pipeline transfers */
    K_DIV, K_SENDRECV,
    /* the MLP job (slow_gpu_mlp): bias+ReLU fused into the GEMMs' epilogues */
    K_MLP_FWD, K_MLP_DGRAD, K_MLP_WGRAD, K_MSE, K_MSE_BWD,
    K_COUNT
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
    [K_DIV] = KERNEL("void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> >, std::array<char*, 2ul> >(int, at::native::BUnaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> >, std::array<char*, 2ul>)", 1024, 1, 1, 128, 1, 1),
    [K_SENDRECV] = KERNEL("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 2, 1, 1, 640, 1, 1),
    [K_MLP_FWD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 8, 256, 1, 384, 1, 1),
    [K_MLP_DGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 8, 256, 1, 384, 1, 1),
    [K_MLP_WGRAD] = KERNEL("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_on_kernel__5x_cublas", 8, 16, 4, 384, 1, 1),
    [K_MSE] = KERNEL("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::(anonymous namespace)::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)", 16384, 1, 1, 128, 1, 1),
    [K_MSE_BWD] = KERNEL("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 4ul> >(int, at::native::(anonymous namespace)::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 4ul>)", 16384, 1, 1, 128, 1, 1),
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

/* empty_cache: a cudaFree's and a cudaMalloc's cost (of a few hundred MB each) at the
 * knob's 1: what the calibration scales. */
#define EMPTY_CACHE_FREE_US 95.0
#define GPT_ADAM_US 450.0

/* What a torch 2.x Kineto trace names a pybind11 method's owner in its repr (the h200
 * traces' "<built-in method rank of pybind11_builtins... object at 0x...>"). */
#define PYBIND_METHOD_OWNER                                                                   \
    "pybind11_builtins.pybind11_detail_function_record_v1_system_libstdcpp_gxx_abi_1xxx_use_" \
    "cxx11_abi_1 object"
#define EMPTY_CACHE_MALLOC_US 85.0

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

/* The ops from first on are the fix of a fault: they run only where it is not injected
 * (or is fixed), and only draw their numbers where it is. */
static void mark_unless(synth_program *p, size_t first, pt_fault_kind kind)
{
    for (size_t i = first; i < p->count; i++)
        p->ops[i].unless = (uint8_t)kind;
}

bool synth_job_has(const pt_synth_job *job, pt_fault_kind kind)
{
    return job->fault == kind || job->second_fault == kind;
}

bool synth_job_single_gpu(const pt_synth_job *job)
{
    return job->workers == 1 && pt_fault_reports_saving(job->fault);
}

/* A Python frame taking `share` of a fault's extra time (scale SCALE_STALL or
 * SCALE_LOADER_WAIT) on top of its own pre_us. */
static void py_share(synth_program *p, synth_scale scale, const char *frame, double pre_us, float share)
{
    push(p, scale, PT_CPU_PYTHON, frame, pre_us)->share = share;
}

static void runtime_call(synth_program *p, synth_op_kind kind, synth_scale scale, const char *api, double us_)
{
    add(p, kind, scale, api)->cpu_ns = us(us_);
}

/* ------------------------------------------------------------ the step */

/* Loader worker processes hand the training process its batch: it waits until one is
 * there (polling the queue's pipe), then takes over each tensor's shared memory through
 * the worker's resource sharer (a round trip to that process, slow when the worker is
 * busy). loader_starved's wait splits between the two (55%, 2 x 22.5%). */
static void worker_loader(synth_program *p)
{
    py(p, "torch/utils/data/dataloader.py(631): __next__", 30);
    py(p, "torch/utils/data/dataloader.py(1328): _next_data", 15);
    py(p, "torch/utils/data/dataloader.py(1294): _get_data", 6);
    py(p, "torch/utils/data/dataloader.py(1133): _try_get_data", 8);
    py(p, "multiprocessing/queues.py(103): get", 10);
    py(p, "multiprocessing/connection.py(253): poll", 3);
    py(p, "multiprocessing/connection.py(423): _poll", 3);
    py(p, "multiprocessing/connection.py(930): wait", 6);
    py(p, "selectors.py(402): select", 4);
    py_share(p, SCALE_LOADER_WAIT, "<built-in method poll of select.poll object at 0x7f3c29d1a0f0>", 15, 0.55f);
    POP_PYTHON(p, 1, 2, 3, 2, 2);
    py(p, "multiprocessing/connection.py(208): recv_bytes", 4);
    py(p, "multiprocessing/connection.py(413): _recv_bytes", 5);
    py(p, "multiprocessing/connection.py(378): _recv", 3);
    py(p, "<built-in function read>", 45);
    POP_PYTHON(p, 1, 2, 3, 2);
    py(p, "<built-in function loads>", 20);
    for (int tensor = 0; tensor < 2; tensor++) { /* input ids, labels */
        py(p, "torch/multiprocessing/reductions.py(512): rebuild_storage_fd", 14);
        py(p, "multiprocessing/resource_sharer.py(57): detach", 8);
        py(p, "multiprocessing/reduction.py(186): recv_handle", 6);
        py_share(p, SCALE_LOADER_WAIT, "<built-in method recvmsg of socket object at 0x7f3c29d1a230>", 30, 0.225f);
        POP_PYTHON(p, 1, 3, 4, 10);
    }
    POP_PYTHON(p, 4, 6, 3, 2);
    py(p, "torch/utils/data/dataloader.py(1378): _process_data", 6);
    py(p, "torch/utils/data/dataloader.py(1355): _try_put_index", 12);
    POP_PYTHON(p, 2, 3, 4, 5);
}

/* num_workers=0: the training process reads, tokenizes and collates every sample of the
 * batch itself (8 sequences), the time split over three leaf stacks, per batch 47% read,
 * 33% tokenize, 20% collate of what single_process_loader's knob makes it. */
static void in_process_loader(synth_program *p)
{
    py(p, "torch/utils/data/dataloader.py(631): __next__", 35);
    py(p, "torch/utils/data/dataloader.py(675): _next_data", 20);
    py(p, "torch/utils/data/_utils/fetch.py(51): fetch", 30);
    py(p, "torch/utils/data/_utils/fetch.py(54): <listcomp>", 10);
    for (int sample = 0; sample < 8; sample++) {
        py(p, "data.py(41): __getitem__", 8);
        py(p, "data.py(30): read_record", 5);
        push(p, SCALE_LOADER_WORK, PT_CPU_PYTHON,
             "<built-in method read of _io.BufferedReader object at 0x7f3c29d1a3b0>", 117.5);
        POP_PYTHON(p, 1, 3);
        py(p, "transformers/tokenization_utils_base.py(2803): __call__", 12);
        py(p, "transformers/tokenization_utils_fast.py(504): _batch_encode_plus", 9);
        push(p, SCALE_LOADER_WORK, PT_CPU_PYTHON,
             "<built-in method encode_batch of tokenizers.Tokenizer object at 0x7f3c29d1a4d0>", 82.5);
        POP_PYTHON(p, 1, 6, 4, 3);
    }
    POP_PYTHON(p, 2);
    py(p, "torch/utils/data/_utils/collate.py(270): default_collate", 8);
    py(p, "torch/utils/data/_utils/collate.py(127): collate", 10);
    py(p, "torch/utils/data/_utils/collate.py(155): collate_tensor_fn", 6);
    push(p, SCALE_LOADER_WORK, PT_CPU_PYTHON, "<built-in method stack of type object at 0x7f3c2a1e5c80>", 400);
    POP_PYTHON(p, 1, 3, 2, 4, 5, 10, 8);
}

static void data_loading(synth_program *p, const pt_synth_job *job)
{
    if (synth_job_has(job, PT_FAULT_LOADER_STARVED)) {
        worker_loader(p);
    } else if (synth_job_has(job, PT_FAULT_SINGLE_PROCESS_LOADER)) {
        size_t first = p->count;
        in_process_loader(p);
        mark_fault(p, first, PT_FAULT_SINGLE_PROCESS_LOADER);
        first = p->count;
        worker_loader(p); /* the fix: num_workers=4 */
        mark_unless(p, first, PT_FAULT_SINGLE_PROCESS_LOADER);
    } else {
        py(p, "torch/utils/data/dataloader.py(631): __next__", 35);
        py(p, "torch/utils/data/dataloader.py(675): _next_data", 20);
        push(p, SCALE_DATALOADER, PT_CPU_PYTHON, "torch/utils/data/_utils/fetch.py(51): fetch", 3000);
        POP_PYTHON(p, 5, 10, 8);
    }
    push(p, SCALE_GC, PT_CPU_PYTHON, "<built-in function collect>", 150);
    POP_PYTHON(p, 1);
}

/* An operator whose output needs new device memory: after torch.cuda.empty_cache() the
 * caching allocator has none left, so the operator calls cudaMalloc (empty_cache's fault). */
static void operator_kernel_alloc(synth_program *p, const pt_synth_job *job, const char *outer, const char *inner,
                                  int kernel, double gpu_us)
{
    if (!synth_job_has(job, PT_FAULT_EMPTY_CACHE)) {
        operator_kernel(p, outer, inner, kernel, gpu_us);
        return;
    }
    aten(p, outer, 6);
    aten(p, inner, 8);
    size_t first = p->count;
    runtime_call(p, OP_RUNTIME, SCALE_ALLOC, "cudaMalloc", EMPTY_CACHE_MALLOC_US);
    mark_fault(p, first, PT_FAULT_EMPTY_CACHE);
    launch(p, kernel, gpu_us);
    POP(p, 2);
    POP(p, 3);
}

/* torch.cuda.empty_cache() after a block: the allocator gives its cached blocks back,
 * one cudaFree each (each synchronizes the device). */
static void empty_cache(synth_program *p)
{
    size_t first = p->count;
    py(p, "torch/cuda/memory.py(192): empty_cache", 6);
    py(p, "<built-in function _cuda_emptyCache>", 4);
    for (int block = 0; block < 3; block++)
        runtime_call(p, OP_FREE, SCALE_ALLOC, "cudaFree", EMPTY_CACHE_FREE_US);
    POP_PYTHON(p, 3, 2);
    mark_fault(p, first, PT_FAULT_EMPTY_CACHE);
}

static void block_forward(synth_program *p, const pt_synth_job *job, int layer)
{
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "model.py(41): forward", 8);
    operator_kernel_alloc(p, job, "aten::layer_norm", "aten::native_layer_norm", K_LN, 28);
    operator_kernel_alloc(p, job, "aten::linear", "aten::addmm", K_GEMM_QKV, 310);
    aten(p, "aten::scaled_dot_product_attention", 7);
    operator_kernel_alloc(p, job, "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward",
                          K_FLASH_FWD, 470);
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
    operator_kernel_alloc(p, job, "aten::linear", "aten::addmm", K_GEMM_FC1, 420);
    operator_kernel(p, "aten::gelu", NULL, K_GELU, 57);
    operator_kernel(p, "aten::linear", "aten::addmm", K_GEMM_FC2, 415);
    operator_kernel(p, "aten::add", NULL, K_ADD, 24);
    if ((synth_job_has(job, PT_FAULT_HANG) || synth_job_has(job, PT_FAULT_HANG_ORDER)) && layer == job->layers / 2)
        add(p, OP_HANG, SCALE_FIXED, NULL)->fault = synth_job_has(job, PT_FAULT_HANG) ? PT_FAULT_HANG : PT_FAULT_HANG_ORDER;
    POP_PYTHON(p, 3, 2);
    if (synth_job_has(job, PT_FAULT_EMPTY_CACHE))
        empty_cache(p);
}

/* DistributedDataParallel's forward frames around the model's (only the fix of a
 * per-parameter all-reduce has them; a single-GPU job has none). */
static void ddp_forward_frames(synth_program *p, const pt_synth_job *job, bool open)
{
    if (!p->ddp)
        return;
    size_t first = p->count;
    if (open) {
        py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
        py(p, "torch/nn/parallel/distributed.py(1693): forward", 15);
        annotation(p, "DistributedDataParallel.forward", 10);
        py(p, "torch/nn/parallel/distributed.py(1519): _run_ddp_forward", 10);
    } else {
        POP_PYTHON(p, 3, 4, 4, 2);
    }
    if (synth_job_has(job, PT_FAULT_UNBUCKETED_ALLREDUCE))
        mark_unless(p, first, PT_FAULT_UNBUCKETED_ALLREDUCE);
}

static void forward(synth_program *p, const pt_synth_job *job)
{
    ddp_forward_frames(p, job, true);
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "model.py(88): forward", 10);
    operator_kernel(p, "aten::embedding", "aten::index_select", K_EMBED, 60);
    for (int layer = 0; layer < job->layers; layer++)
        block_forward(p, job, layer);
    POP_PYTHON(p, 4, 2);
    ddp_forward_frames(p, job, false);
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
/* An all-reduce that waits: inside torch.distributed.all_reduce (async_op=False) its
 * work.wait() makes the compute stream wait for it (cudaStreamWaitEvent), so nothing
 * queued after it overlaps it. */
static void wait_for_bucket(synth_program *p, int bucket)
{
    synth_op *wait = add(p, OP_WAIT_BUCKET, SCALE_LAUNCH, "cudaStreamWaitEvent");
    wait->index = (uint16_t)bucket;
    wait->cpu_ns = us(3);
}

/* grad /= world_size on the compute stream: reads and writes the fp32 tensor (~3 TB/s). */
static void divide_gradient(synth_program *p, int64_t nelems)
{
    aten(p, "aten::div_", 8);
    launch(p, K_DIV, 1.5 + (double)nelems * 8 / 3e6);
    POP(p, 3);
}

/* unoverlapped_allreduce: the faulty rank registered a comm hook of its own, which
 * all-reduces the bucket synchronously, then divides it (on the other ranks DDP's built-in
 * hook, in C++, launches the all-reduce and returns). Opens (or closes) its frames. */
static void sync_hook_frames(synth_program *p, bool open, int bucket, int64_t nelems)
{
    size_t first = p->count;
    if (open) {
        py(p, "train.py(52): allreduce_hook", 9);
        py(p, "torch/distributed/c10d_logger.py(79): wrapper", 5);
        py(p, "torch/distributed/distributed_c10d.py(2219): all_reduce", 14);
        aten(p, "c10d::allreduce_", 8);
    } else {
        POP(p, 5);
        wait_for_bucket(p, bucket);
        POP_PYTHON(p, 6, 4);
        divide_gradient(p, nelems);
        POP_PYTHON(p, 5);
    }
    mark_fault(p, first, PT_FAULT_UNOVERLAPPED_ALLREDUCE);
}

/* The last gradient of a bucket is final: DDP's reducer hook, inside that parameter's
 * AccumulateGrad node, reduces the bucket. NCCL: an all-reduce kernel launched on the
 * NCCL stream. Gloo: c10d::allreduce_ copies the bucket to the host on a side stream and
 * hands it to a gloo thread (the interpreter writes that thread's events). When the job
 * reduces every gradient by hand instead (unbucketed_allreduce), the hook is the fix. */
static void bucket_all_reduce(synth_program *p, const pt_synth_job *job, int64_t nelems)
{
    if (p->buckets >= SYNTH_MAX_DDP_BUCKETS || !p->ddp)
        return;
    aten(p, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 6);
    aten(p, "torch::autograd::AccumulateGrad", 3);
    POP(p, 2);
    size_t hook = p->count;
    bool sync_hook = synth_job_has(job, PT_FAULT_UNOVERLAPPED_ALLREDUCE);
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
        if (sync_hook)
            sync_hook_frames(p, true, p->buckets, nelems);
        aten(p, "nccl:all_reduce", 12);
        aten(p, "record_param_comms", 6);
        p->ops[p->count - 1].comms = true;
        p->ops[p->count - 1].index = (uint16_t)p->buckets;
        op = add(p, OP_BUCKET, SCALE_LAUNCH, "cudaLaunchKernel");
        op->cpu_ns = us(7);
        POP(p, 2, 3);
    }
    op->index = (uint16_t)p->buckets;
    if (sync_hook)
        sync_hook_frames(p, false, p->buckets, nelems);
    if (synth_job_has(job, PT_FAULT_UNBUCKETED_ALLREDUCE))
        mark_unless(p, hook, PT_FAULT_UNBUCKETED_ALLREDUCE);
    POP(p, 2);
    p->bucket_nelems[p->buckets++] = nelems;
}

/* unbucketed_allreduce: the parameters in model.parameters() order (the tied embedding;
 * per block its layer norms, attention and MLP weights and biases; the final layer norm),
 * as many elements in all as DDP's buckets hold, up to the biases. */
static int gpt_parameters(int layers, int64_t *nelems, int cap)
{
    static const int64_t block[] = {768,     768,  1769472, 2304,    589824, 768,
                                    768,     768,  3538944, 4608,    3538944, 768};
    int n = 0;
    if (n < cap)
        nelems[n++] = EMBED_PARAMS;
    for (int layer = 0; layer < layers; layer++)
        for (size_t i = 0; i < PT_ARRAY_LEN(block) && n < cap; i++)
            nelems[n++] = block[i];
    for (int i = 0; i < 2 && n < cap; i++)
        nelems[n++] = 768;
    return n;
}

/* average_gradients(model), after the backward: for every parameter, a synchronous
 * torch.distributed.all_reduce of its gradient, then grad /= world. Every call costs
 * ~100 us of CPU (c10d::allreduce_ is 70-86 us in a real 8-rank NCCL trace) and a
 * latency-bound collective, and none of it overlaps the backward. */
static void average_gradients(synth_program *p, const pt_synth_job *job)
{
    int64_t params[SYNTH_MAX_BUCKETS];
    int n = gpt_parameters(job->layers, params, SYNTH_MAX_BUCKETS - p->buckets);
    size_t first = p->count;
    py(p, "train.py(64): average_gradients", 20);
    for (int i = 0; i < n; i++) {
        int bucket = p->buckets;
        py(p, "torch/distributed/c10d_logger.py(79): wrapper", 8);
        py(p, "torch/distributed/distributed_c10d.py(2219): all_reduce", 18);
        aten(p, "c10d::allreduce_", 5);
        aten(p, "record_param_comms", 8);
        p->ops[p->count - 1].comms = true;
        p->ops[p->count - 1].index = (uint16_t)bucket;
        annotation(p, "nccl:all_reduce", 18);
        synth_op *op = add(p, OP_BUCKET, SCALE_LAUNCH, "cudaLaunchKernel");
        op->cpu_ns = us(7);
        op->index = (uint16_t)bucket;
        POP_PYTHON(p, 22);
        POP(p, 12, 4);
        wait_for_bucket(p, bucket);
        POP_PYTHON(p, 6, 5);
        divide_gradient(p, params[i]);
        p->bucket_small[bucket] = true;
        p->bucket_nelems[p->buckets++] = params[i];
    }
    POP_PYTHON(p, 5);
    mark_fault(p, first, PT_FAULT_UNBUCKETED_ALLREDUCE);
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
            bucket_all_reduce(p, job, (int64_t)in_bucket * block_params);
            in_bucket = 0;
        }
    }
    node(p, "autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0",
         "aten::embedding_dense_backward", embed, embed_us, 1, false);
    bucket_all_reduce(p, job, (int64_t)in_bucket * block_params + (gloo ? GLOO_EMBED_PARAMS : EMBED_PARAMS));
    if (gloo)
        finalize_buckets(p);
    add(p, OP_JOIN, SCALE_FIXED, NULL);
    POP_PYTHON(p, 30, 3, 4, 6);
}

/* The fused AdamW step: 4 kernels of adam_us each (reading and writing the parameters,
 * gradients and both moments: ~1.5 ms for the GPT's 162 M parameters). */
static void optimizer_step(synth_program *p, const pt_synth_job *job, double adam_us)
{
    py(p, "torch/optim/optimizer.py(373): wrapper", 30);
    annotation(p, "Optimizer.step#AdamW.step", 12);
    py(p, "torch/optim/adamw.py(187): step", 168);
    if (p->backend == PT_SYNTH_NCCL && p->ddp) { /* gloo: finalize already waited */
        add(p, OP_WAIT_COMM, SCALE_LAUNCH, "cudaStreamWaitEvent")->cpu_ns = us(3);
        if (synth_job_has(job, PT_FAULT_UNBUCKETED_ALLREDUCE)) /* DDP's wait: the fix's */
            p->ops[p->count - 1].unless = PT_FAULT_UNBUCKETED_ALLREDUCE;
    }
    py(p, "torch/optim/adamw.py(335): adamw", 20);
    py(p, "torch/optim/adamw.py(678): _fused_adamw", 60);
    aten(p, "aten::_fused_adamw_", 25);
    for (int i = 0; i < 4; i++)
        launch(p, K_ADAMW, adam_us);
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

/* intermittent_stall: a synchronous checkpoint after the step's logging (in the steps it
 * runs in: the interpreter's choice). torch.save pickles the state dict (60% of the
 * stall) and writes the archive's records (40%). */
static void save_checkpoint(synth_program *p)
{
    size_t first = p->count;
    py(p, "train.py(112): save_checkpoint", 40);
    py(p, "torch/serialization.py(862): save", 25);
    py(p, "torch/serialization.py(1088): _save", 30);
    py_share(p, SCALE_STALL, "<built-in method dump of _pickle.Pickler object at 0x7f3c29d1a5f0>", 50, 0.6f);
    POP_PYTHON(p, 5);
    py_share(p, SCALE_STALL, "<built-in method write_record of " PYBIND_METHOD_OWNER " at 0x7f3c29d1a710>", 20, 0.4f);
    POP_PYTHON(p, 2, 12, 8, 10);
    mark_fault(p, first, PT_FAULT_INTERMITTENT_STALL);
}

/* The step's start: the batch, train_step, zero_grad and (when it has inputs) the batch
 * copied to the device. Leaves train_step open. */
static void step_start(synth_program *p, const pt_synth_job *job, bool loads, bool copies)
{
    if (loads)
        data_loading(p, job);
    py(p, "train.py(58): train_step", 40);
    py(p, "torch/optim/optimizer.py(803): zero_grad", 900);
    POP_PYTHON(p, 5);
    if (copies)
        to_copy(p, OP_COPY, SCALE_FIXED, "Memcpy HtoD (Pinned -> Device)", 16 << 20, 350);
}

/* The step's end, from the optimizer: loss.item() (or, on a pipeline stage without the
 * loss, torch.cuda.synchronize()), train_step closed, then the logging and, where it is
 * injected, the checkpoint. */
static void step_end(synth_program *p, const pt_synth_job *job, bool has_loss, double adam_us)
{
    optimizer_step(p, job, adam_us);
    if (has_loss) {
        loss_item(p);
    } else {
        py(p, "torch/cuda/__init__.py(801): synchronize", 8);
        add(p, OP_SYNC, SCALE_LAUNCH, "cudaDeviceSynchronize")->cpu_ns = us(4);
        POP_PYTHON(p, 3);
    }
    POP_PYTHON(p, 15); /* train_step */
    py(p, "train.py(74): log_metrics", 2800);
    POP_PYTHON(p, 5);
    if (synth_job_has(job, PT_FAULT_INTERMITTENT_STALL))
        save_checkpoint(p);
}

static void gpt_step(synth_program *p, const pt_synth_job *job)
{
    step_start(p, job, true, true);
    forward(p, job);
    if (synth_job_has(job, PT_FAULT_BLOCKING_DTOH)) {
        size_t first = p->count;
        py(p, "metrics.py(23): activation_stats", 15);
        to_copy(p, OP_COPY_SYNC, SCALE_DTOH, "Memcpy DtoH (Device -> Pageable)", 0, 0);
        POP_PYTHON(p, 20);
        mark_fault(p, first, PT_FAULT_BLOCKING_DTOH);
    }
    backward(p, job);
    if (synth_job_has(job, PT_FAULT_UNBUCKETED_ALLREDUCE))
        average_gradients(p, job);
    step_end(p, job, true, GPT_ADAM_US);
}

/* ------------------------------------------------------------ the MLP job */

/* slow_gpu_mlp's job: a stack of --layers 2048-wide Linear layers on 32k tokens, bias and
 * ReLU fused into the GEMMs' epilogues (cuBLASLt), an MSE loss: its GPU time is three
 * GEMM kernels, the forward's and the backward's two, one DDP bucket per layer. */
#define MLP_LAYER_PARAMS (2048 * 2048 + 2048)
#define MLP_ADAM_US 120.0 /* 50 M parameters */

static void mlp_forward(synth_program *p, const pt_synth_job *job)
{
    ddp_forward_frames(p, job, true);
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "model.py(20): forward", 10);
    for (int layer = 0; layer < job->layers; layer++) {
        py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
        py(p, "torch/nn/modules/linear.py(116): forward", 6);
        operator_kernel(p, "aten::linear", "aten::_addmm_activation", K_MLP_FWD, 460);
        POP_PYTHON(p, 2, 2);
    }
    POP_PYTHON(p, 4, 2);
    ddp_forward_frames(p, job, false);
    py(p, "torch/nn/functional.py(3365): mse_loss", 10);
    aten(p, "aten::mse_loss", 5);
    launch(p, K_MSE, 40);
    launch(p, K_REDUCE, 20);
    POP(p, 3);
    POP_PYTHON(p, 2);
}

static void mlp_backward(synth_program *p, const pt_synth_job *job)
{
    static const int loss[] = {K_MSE_BWD};
    static const double loss_us[] = {45};
    py(p, "torch/_tensor.py(576): backward", 15);
    py(p, "torch/autograd/__init__.py(253): backward", 20);
    py(p, "torch/autograd/graph.py(860): _engine_run_backward", 8);
    py(p, "<built-in method run_backward of torch._C._EngineBase object at 0x7f3c2a1e5b40>", 25);
    add(p, OP_FORK, SCALE_FIXED, NULL);
    node(p, "autograd::engine::evaluate_function: MseLossBackward0", "MseLossBackward0", "aten::mse_loss_backward",
         loss, loss_us, 1, false);
    for (int layer = job->layers - 1; layer >= 0; layer--) {
        aten(p, "autograd::engine::evaluate_function: AddmmActivationBackward0", 9);
        aten(p, "AddmmActivationBackward0", 6);
        operator_kernel(p, "aten::mm", NULL, K_MLP_DGRAD, 460);
        operator_kernel(p, "aten::mm", NULL, K_MLP_WGRAD, 480);
        POP(p, 2, 4);
        accumulate_grad(p);
        bucket_all_reduce(p, job, MLP_LAYER_PARAMS);
    }
    add(p, OP_JOIN, SCALE_FIXED, NULL);
    POP_PYTHON(p, 30, 3, 4, 6);
}

static void mlp_step(synth_program *p, const pt_synth_job *job)
{
    step_start(p, job, true, true);
    mlp_forward(p, job);
    mlp_backward(p, job);
    step_end(p, job, true, MLP_ADAM_US);
}

/* ------------------------------------------------------------ pipeline stages */

/* A send or receive of one microbatch's activations (or their gradients) to the stage
 * below (peer 0) or above (1), as torch.distributed.pipelining issues it; a receive's
 * work.wait() makes the compute stream wait for the data. */
static void p2p(synth_program *p, bool send, int peer, int key)
{
    py(p, "torch/distributed/pipelining/schedules.py(598): _batch_p2p", 12);
    py(p, "torch/distributed/distributed_c10d.py(2436): batch_isend_irecv", 15);
    aten(p, send ? "c10d::send" : "c10d::recv_", 8);
    synth_op *comms = push(p, SCALE_OPERATOR, PT_CPU_OPERATOR, "record_param_comms", 10);
    comms->comms = comms->p2p = true;
    comms->send = send;
    comms->peer = (uint8_t)peer;
    comms->index = (uint16_t)key;
    annotation(p, send ? "nccl:send" : "nccl:recv", 12);
    synth_op *op = add(p, OP_P2P, SCALE_LAUNCH, "cudaLaunchKernel");
    op->cpu_ns = us(7);
    op->send = send;
    op->peer = (uint8_t)peer;
    op->index = (uint16_t)key;
    POP_PYTHON(p, 15);
    POP(p, 14, 4);
    POP_PYTHON(p, 6, 3);
    if (!send) {
        py(p, "<built-in method wait of " PYBIND_METHOD_OWNER " at 0x7f3c29d1a830>", 3);
        synth_op *wait = add(p, OP_WAIT_P2P, SCALE_LAUNCH, "cudaStreamWaitEvent");
        wait->cpu_ns = us(3);
        wait->index = (uint16_t)key;
        POP_PYTHON(p, 2);
    }
}

/* A pipeline transfer's key in its replica: microbatch j's activations from stage s to
 * s + 1 (forward) or their gradients back (backward). */
int synth_p2p_key(int stage, int microbatch, int microbatches, bool backward)
{
    return (stage * microbatches + microbatch) * 2 + (backward ? 1 : 0);
}

static void block_bracket(synth_program *p, int layer, int microbatch, bool backward, bool begin)
{
    synth_op *op = add(p, begin ? OP_BLOCK : OP_BLOCK_END, SCALE_FIXED, NULL);
    op->bytes = ((int64_t)layer << 20) | ((int64_t)microbatch << 1) | (backward ? 1 : 0);
}

static void stage_forward(synth_program *p, const pt_synth_job *job, const synth_stage *st, int j)
{
    bool last = st->index == st->stages - 1;
    if (st->index > 0)
        p2p(p, false, 0, synth_p2p_key(st->index - 1, j, st->microbatches, false));
    py(p, "torch/distributed/pipelining/stage.py(596): forward_one_chunk", 25);
    py(p, "torch/nn/modules/module.py(1527): _call_impl", 6);
    py(p, "model.py(88): forward", 10);
    if (st->index == 0)
        operator_kernel(p, "aten::embedding", "aten::index_select", K_EMBED, 60);
    for (int l = st->first_layer; l < st->first_layer + st->layers; l++) {
        block_bracket(p, l, j, false, true);
        block_forward(p, job, l);
        block_bracket(p, l, j, false, false);
    }
    POP_PYTHON(p, 4, 2);
    if (last) {
        py(p, "torch/nn/functional.py(3059): cross_entropy", 12);
        aten(p, "aten::cross_entropy_loss", 5);
        operator_kernel(p, "aten::log_softmax", "aten::_log_softmax", K_SOFTMAX, 120);
        operator_kernel(p, "aten::nll_loss_nd", "aten::nll_loss_forward", K_NLL, 15);
        POP(p, 2);
        POP_PYTHON(p, 2);
    }
    POP_PYTHON(p, 8);
    if (!last)
        p2p(p, true, 1, synth_p2p_key(st->index, j, st->microbatches, false));
}

/* GPipe's backward of microbatch j; DDP (with more than one replica) reduces the stage's
 * gradients in the last microbatch's backward, a bucket per three blocks. */
static void stage_backward(synth_program *p, const pt_synth_job *job, const synth_stage *st, int j)
{
    static const int loss[] = {K_NLL_BWD}, softmax[] = {K_SOFTMAX_BWD}, embed[] = {K_EMBED_BWD};
    static const double loss_us[] = {20}, softmax_us[] = {130}, embed_us[] = {240};
    bool last = st->index == st->stages - 1, reduce = j == st->microbatches - 1;
    if (!last)
        p2p(p, false, 1, synth_p2p_key(st->index, j, st->microbatches, true));
    py(p, "torch/distributed/pipelining/stage.py(660): backward_one_chunk", 25);
    py(p, "torch/autograd/__init__.py(253): backward", 20);
    py(p, "<built-in method run_backward of torch._C._EngineBase object at 0x7f3c2a1e5b40>", 25);
    add(p, OP_FORK, SCALE_FIXED, NULL);
    if (last) {
        node(p, "autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0", "aten::nll_loss_backward",
             loss, loss_us, 1, false);
        node(p, "autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0",
             "aten::_log_softmax_backward_data", softmax, softmax_us, 1, false);
    }
    int in_bucket = 0;
    for (int l = st->first_layer + st->layers - 1; l >= st->first_layer; l--) {
        block_bracket(p, l, j, true, true);
        block_backward(p);
        block_bracket(p, l, j, true, false);
        if (reduce && ++in_bucket == BLOCKS_PER_BUCKET && l > st->first_layer) {
            bucket_all_reduce(p, job, (int64_t)in_bucket * BLOCK_PARAMS);
            in_bucket = 0;
        }
    }
    if (st->index == 0)
        node(p, "autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0",
             "aten::embedding_dense_backward", embed, embed_us, 1, false);
    if (reduce)
        bucket_all_reduce(p, job, (int64_t)in_bucket * BLOCK_PARAMS + (st->index == 0 ? EMBED_PARAMS : 0));
    add(p, OP_JOIN, SCALE_FIXED, NULL);
    POP_PYTHON(p, 30, 4, 6);
    if (st->index > 0)
        p2p(p, true, 0, synth_p2p_key(st->index - 1, j, st->microbatches, true));
}

/* One pipeline stage's step (GPipe): every microbatch's forward, then every backward. Stage
 * 0 loads the batch; the last stage too (its labels), and computes the loss. */
static void stage_step(synth_program *p, const pt_synth_job *job, const synth_stage *st)
{
    bool first = st->index == 0, last = st->index == st->stages - 1;
    step_start(p, job, first || last, first);
    py(p, "torch/distributed/pipelining/schedules.py(612): step", 30);
    py(p, "torch/distributed/pipelining/schedules.py(636): _step_microbatches", 20);
    for (int j = 0; j < st->microbatches; j++)
        stage_forward(p, job, st, j);
    for (int j = 0; j < st->microbatches; j++)
        stage_backward(p, job, st, j);
    POP_PYTHON(p, 10, 12);
    step_end(p, job, last, GPT_ADAM_US * st->layers / job->layers);
}

/* ------------------------------------------------------------ building */

static void program_init(synth_program *p, const pt_synth_job *job, bool ddp)
{
    memset(p, 0, sizeof *p);
    p->kernels = kernels;
    p->kernel_count = K_COUNT;
    p->nccl_kernel = K_NCCL_ALLREDUCE;
    p->p2p_kernel = K_SENDRECV;
    p->backend = job->backend;
    p->ddp = ddp;
}

/* The second phase (its own RNG stream) starts at the first op that waits on peers. */
static void program_finish(synth_program *p, bool second_phase)
{
    p->phase_c = p->count;
    for (size_t i = 0; i < p->count && second_phase; i++)
        if (p->ops[i].kind == OP_WAIT_COMM || p->ops[i].kind == OP_FINALIZE || p->ops[i].kind == OP_WAIT_BUCKET) {
            p->phase_c = i;
            break;
        }
}

void synth_program_build(synth_program *p, const pt_synth_job *job)
{
    program_init(p, job, !synth_job_single_gpu(job));
    if (synth_job_has(job, PT_FAULT_SLOW_GPU_MLP))
        mlp_step(p, job);
    else
        gpt_step(p, job);
    program_finish(p, true);
}

void synth_program_build_stage(synth_program *p, const pt_synth_job *job, const synth_stage *stage)
{
    program_init(p, job, stage->ddp);
    stage_step(p, job, stage);
    program_finish(p, false);
}

void synth_program_free(synth_program *p)
{
    free(p->ops);
    memset(p, 0, sizeof *p);
}
