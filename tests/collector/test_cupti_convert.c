/* CUPTI activity records -> GPU records, on synthetic CUpti_Activity* structs (no GPU
 * needed): names as Kineto writes them, times shifted onto our clock, launch geometry,
 * bytes, NCCL collectives recognised from kernel names, and records of other kinds
 * skipped. Built only when CUPTI's headers are present. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "collect/cupti_convert.h"
#include "collect/names.h"

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kernel_record;
typedef CUpti_ActivityMemcpy6 memcpy_record;
#else
typedef CUpti_ActivityKernel9 kernel_record;
typedef CUpti_ActivityMemcpy5 memcpy_record;
#endif

static pt_names names;

static uint32_t intern(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    return pt_names_intern(&names, s, n);
}

static const char *api_name(void *ctx, int domain, uint32_t cbid)
{
    (void)ctx;
    if (domain == 0 && cbid == 211)
        return "cudaLaunchKernel_v7000";
    if (domain == 1 && cbid == 307)
        return "cuLaunchKernel";
    return NULL;
}

static const pt_cupti_names namer = {NULL, intern, api_name};

static const char *name_of(uint32_t id)
{
    return id == PT_NAMES_NONE ? "(none)" : names.strings[id];
}

static int setup(void **state)
{
    (void)state;
    pt_names_init(&names);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_names_free(&names);
    return 0;
}

static void kernel_records(void **state)
{
    (void)state;
    kernel_record k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 5000, k.end = 7500;
    k.deviceId = 3, k.streamId = 7;
    k.gridX = 320, k.gridY = 2, k.gridZ = 1;
    k.blockX = 512, k.blockY = 1, k.blockZ = 1;
    k.name = "_Z6gemm_kPfS_";
    pt_gpu_record r;
    assert_true(pt_cupti_convert(&k, &namer, 1000000, &r));
    assert_int_equal(r.kind, PT_EVENT_GPU_KERNEL);
    /* The name as CUPTI gives it: the summarizer demangles, once per distinct name. */
    assert_string_equal(name_of(r.name), "_Z6gemm_kPfS_");
    assert_int_equal(r.start_ns, 1005000);
    assert_int_equal(r.end_ns, 1007500);
    assert_int_equal(r.device, 3);
    assert_int_equal(r.stream, 7);
    assert_int_equal(r.grid[0], 320);
    assert_int_equal(r.grid[1], 2);
    assert_int_equal(r.block[0], 512);
    assert_int_equal(r.coll_name, PT_NAMES_NONE);

    /* An NCCL kernel: its collective and element size come from its (mangled) name. */
    k.name = "_Z38ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE";
    assert_true(pt_cupti_convert(&k, &namer, 0, &r));
    assert_string_equal(name_of(r.name), k.name);
    assert_string_equal(name_of(r.coll_name), "allreduce");
    assert_int_equal(r.dtype_bytes, 2);

    /* A name that does not demangle stays as it is; KIND_KERNEL is accepted too. */
    k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
    k.name = "plain_c_kernel";
    assert_true(pt_cupti_convert(&k, &namer, 0, &r));
    assert_string_equal(name_of(r.name), "plain_c_kernel");
}

static void memory_records(void **state)
{
    (void)state;
    memcpy_record m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 4000000, m.start = 10, m.end = 30, m.deviceId = 1, m.streamId = 9;
    pt_gpu_record r;
    assert_true(pt_cupti_convert(&m, &namer, 5, &r));
    assert_int_equal(r.kind, PT_EVENT_GPU_MEMCPY);
    assert_string_equal(name_of(r.name), "Memcpy HtoD (Pageable -> Device)");
    assert_int_equal(r.bytes, 4000000);
    assert_int_equal(r.start_ns, 15);
    assert_int_equal(r.end_ns, 35);
    assert_int_equal(r.stream, 9);

    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    assert_true(pt_cupti_convert(&m, &namer, 0, &r));
    assert_string_equal(name_of(r.name), "Memcpy DtoH (Device -> Pinned)");

    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    s.bytes = 1024, s.start = 100, s.end = 150, s.deviceId = 0, s.streamId = 2;
    assert_true(pt_cupti_convert(&s, &namer, 0, &r));
    assert_int_equal(r.kind, PT_EVENT_GPU_MEMSET);
    assert_string_equal(name_of(r.name), "Memset (Device)");
    assert_int_equal(r.bytes, 1024);
    assert_int_equal(r.end_ns - r.start_ns, 50);
}

static void api_records(void **state)
{
    (void)state;
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211;
    a.start = 1000, a.end = 1900, a.threadId = 4242;
    pt_gpu_record r;
    assert_true(pt_cupti_convert(&a, &namer, 0, &r));
    assert_int_equal(r.kind, PT_EVENT_RUNTIME);
    assert_string_equal(name_of(r.name), "cudaLaunchKernel");
    assert_int_equal(r.stream, 4242);
    assert_int_equal(r.device, -1);

    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 307;
    assert_true(pt_cupti_convert(&a, &namer, 0, &r));
    assert_string_equal(name_of(r.name), "cuLaunchKernel");

    a.cbid = 9999; /* unknown: still recorded, under a name that says what it is */
    assert_true(pt_cupti_convert(&a, &namer, 0, &r));
    assert_string_equal(name_of(r.name), "driver API 9999");
}

static void other_records_are_skipped(void **state)
{
    (void)state;
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    pt_gpu_record r;
    assert_false(pt_cupti_convert(&a, &namer, 0, &r));
    /* A record that ends before it starts is damaged: dropped. */
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211, a.start = 50, a.end = 40;
    assert_false(pt_cupti_convert(&a, &namer, 0, &r));
}

static void nccl_names(void **state)
{
    (void)state;
    static const struct {
        const char *name, *collective;
        int dtype;
    } cases[] = {
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather", 0},
        {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reducescatter", 4},
        {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "allreduce", 4},
        {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "sendrecv", 0},
        {"ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "broadcast", 0},
        {"ncclDevKernel_Reduce_Sum_f64_RING_LL", "reduce", 8},
        /* Mangled: only the identifier counts, not the parameter types after it. */
        {"_Z36ncclDevKernel_AllGather_RING_LL_i32_24ncclDevKernelArgsStorageILm4096EE", "allgather", 4},
        {"_Z29ncclDevKernel_SendRecv_f16_LL24ncclDevKernelArgsStorageILm4096EE", "sendrecv", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *coll = NULL;
        int32_t dtype = -1;
        assert_true(pt_nccl_kernel_collective(cases[i].name, &coll, &dtype));
        assert_string_equal(coll, cases[i].collective);
        assert_int_equal(dtype, cases[i].dtype);
    }
    const char *coll;
    int32_t dtype;
    assert_false(pt_nccl_kernel_collective("ampere_sgemm_128x64_nn", &coll, &dtype));
    assert_false(pt_nccl_kernel_collective("my_ncclDevKernel_lookalike", &coll, &dtype));
    assert_false(pt_nccl_kernel_collective("_Z6gemm_kPfS_", &coll, &dtype));
    assert_false(pt_nccl_kernel_collective("_Z99ncclDevKernel", &coll, &dtype));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernel_records),
        cmocka_unit_test(memory_records),
        cmocka_unit_test(api_records),
        cmocka_unit_test(other_records_are_skipped),
        cmocka_unit_test(nccl_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
