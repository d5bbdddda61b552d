/* classify.h -- what names mean: which kernels are collectives, which CPU calls wait on
 * communication, how Python frames are named, and what link a collective runs over.
 *
 * All knowledge of NCCL/RCCL/gloo naming lives here, so when a library renames its
 * kernels there is one place to teach. */
#ifndef PT_SUMMARIZE_CLASSIFY_H
#define PT_SUMMARIZE_CLASSIFY_H

#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>

/* ncclKernel_*, ncclDevKernel_*, rccl, msccl kernels. */
bool pt_kernel_is_collective(const char *name, size_t n);
/* CPU-side collective calls: gloo:/nccl:/c10d:: operators and torch.distributed's
 * blocking Python entry points (barrier, all_reduce, ...). */
bool pt_cpu_is_collective(const char *name, size_t n);
/* A memcpy between device and pinned host memory, by its Kineto/CUPTI name: 1 to the host
 * ("Memcpy DtoH (Device -> Pinned)"), -1 back to the device ("Memcpy HtoD (Pinned ->
 * Device)"), 0 any other. gloo stages a CUDA collective through one of each. */
int pt_pinned_copy_direction(const char *name, size_t n);
/* Appends the seed's frame name: "pkg/file.py(12): f" -> "pkg/file.py: f", and
 * "<built-in method m of T object at 0x7f3a...>" -> "<built-in method m of T object at 0x>". */
void pt_normalize_frame(pt_buf *out, const char *name, size_t n);

/* A Python frame's file as the collector names it, relative to the standard library, is
 * one of its modules: "multiprocessing/process.py", "threading.py" (len: the file's
 * length, ".py" included). */
bool pt_file_in_stdlib(const char *file, size_t len);

/* What a runtime or driver API does, for the advice a finding about it gives. */
typedef enum pt_runtime_kind {
    PT_RUNTIME_LAUNCH,  /* cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, graph launches */
    PT_RUNTIME_SYNC,    /* cudaStreamSynchronize, cudaDeviceSynchronize, event waits */
    PT_RUNTIME_COPY,    /* cudaMemcpy*, cudaMemset* */
    PT_RUNTIME_MEMORY,  /* cudaMalloc, cudaFree, host allocations */
    PT_RUNTIME_OTHER
} pt_runtime_kind;
pt_runtime_kind pt_runtime_kind_of(const char *name);
/* HIP (ROCm) rather than CUDA: "hipLaunchKernel", "hipMemcpyAsync". */
bool pt_runtime_is_hip(const char *name);

/* "ring", "tree", "sendrecv", "nvls", "collnet", "alltoall" or "other". */
const char *pt_collective_pattern(const char *kernel_name, size_t n);
/* A point-to-point transfer (pattern "sendrecv"): a pipeline's activations, or an
 * all-to-all NCCL runs as sends and receives. */
bool pt_collective_is_point_to_point(const char *kernel_name);
/* "nvlink", "xgmi", "pcie" or "network" from the GPU model and whether the group fits in
 * one node (group_size <= devices on the node). */
const char *pt_collective_link(const char *device_name, int device_count, int group_size);
/* Peak unidirectional bandwidth per GPU of that link, GB/s (an estimate by GPU model). */
double pt_link_peak_gbps(const char *link, const char *device_name);
/* NCCL's bus-bandwidth correction for a collective over n ranks, and which message size
 * it applies to (true: the output size, as for all-gather). */
double pt_busbw_factor(const char *collective, size_t len, int n, bool *uses_output_size);

#endif
