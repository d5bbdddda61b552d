/* cupti_convert.h -- one CUPTI activity record -> one pt_gpu_record.
 *
 * Kept apart from cupti.c so tests can feed it synthetic CUpti_Activity* records
 * (tests/collector/test_cupti_convert.c) without a GPU. Names follow what PyTorch's
 * profiler (Kineto) writes, so a report reads the same whichever collector made it:
 *   kernels   the name CUPTI gives ("_ZN2at6native..."): the summarizer demangles it
 *             (summarize/demangle.c) as Kineto does, once per distinct name, instead of
 *             the collector paying a demangling per kernel record;
 *   memcpy    "Memcpy HtoD (Pageable -> Device)"; memset "Memset (Device)";
 *   API calls the callback name without its version suffix ("cudaLaunchKernel").
 * NCCL kernels get their collective from the kernel name ("ncclDevKernel_AllReduce_Sum_
 * f32_RING_LL" -> "allreduce", 4-byte elements); CUPTI does not say the message size. */
#ifndef PT_COLLECT_CUPTI_CONVERT_H
#define PT_COLLECT_CUPTI_CONVERT_H

#include "collect/window.h"

#include <stdbool.h>

typedef struct pt_cupti_names {
    void *ctx;
    uint32_t (*intern)(void *ctx, const char *s, size_t n);
    /* domain 0: runtime API, 1: driver API. NULL when unknown. */
    const char *(*api_name)(void *ctx, int domain, uint32_t cbid);
} pt_cupti_names;

/* record points to a CUpti_Activity. clock_offset_ns is added to CUPTI timestamps.
 * Returns false for records of kinds that are not kept. */
bool pt_cupti_convert(const void *record, const pt_cupti_names *names, int64_t clock_offset_ns,
                      pt_gpu_record *out);

/* The collective and element size an NCCL kernel name says, if any; the name may be
 * mangled ("_Z38ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgs...") or not. */
bool pt_nccl_kernel_collective(const char *name, const char **collective, int32_t *dtype_bytes);

/* The length of a CUPTI API name without its version suffix ("cudaLaunchKernel_v7000"
 * -> 16, "cuMemcpyHtoD_v2" -> 12). */
size_t pt_cuda_api_name_len(const char *name);

#endif
