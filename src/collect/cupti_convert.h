/* cupti_convert.h -- one CUPTI activity record -> one pt_gpu_record.
 *
 * Kept apart from cupti.c so tests can feed it synthetic CUpti_Activity* records
 * (tests/collector/test_cupti_convert.c) without a GPU. Names follow what PyTorch's
 * profiler (Kineto) writes, so a report reads the same whichever collector made it:
 *   kernels   demangled name ("void at::native::...");
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
    /* Optional: a malloc'd demangled name, or NULL to keep the name as is. */
    char *(*demangle)(void *ctx, const char *mangled);
} pt_cupti_names;

/* record points to a CUpti_Activity. clock_offset_ns is added to CUPTI timestamps.
 * Returns false for records of kinds that are not kept. */
bool pt_cupti_convert(const void *record, const pt_cupti_names *names, int64_t clock_offset_ns,
                      pt_gpu_record *out);

/* The collective and element size an NCCL kernel name says, if any. */
bool pt_nccl_kernel_collective(const char *name, const char **collective, int32_t *dtype_bytes);

#endif
