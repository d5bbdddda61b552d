/* cupti_convert.c -- CUPTI activity records to GPU records (see cupti_convert.h).
 *
 * The record structs are versioned (CUpti_ActivityKernel10 in CUDA 13, ...9 in 12.x);
 * each version only appends fields, and the ones read here sit in the common prefix, so
 * records from a newer CUPTI than the headers read correctly. */
#define _POSIX_C_SOURCE 200809L
#include "collect/cupti_convert.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ NCCL kernel names */

static bool token_is(const char *t, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(t, word, n) == 0;
}

static int32_t dtype_bytes_of(const char *t, size_t n)
{
    static const struct {
        const char *token;
        int32_t bytes;
    } types[] = {
        {"f32", 4},      {"float", 4},   {"f16", 2},      {"half", 2},     {"bf16", 2},     {"__nv_bfloat16", 2},
        {"f64", 8},      {"double", 8},  {"i8", 1},       {"u8", 1},       {"int8_t", 1},   {"uint8_t", 1},
        {"i32", 4},      {"u32", 4},     {"int32_t", 4},  {"uint32_t", 4}, {"i64", 8},      {"u64", 8},
        {"int64_t", 8},  {"uint64_t", 8}, {"f8e4m3", 1},  {"f8e5m2", 1},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(types); i++)
        if (token_is(t, n, types[i].token))
            return types[i].bytes;
    return 0;
}

bool pt_nccl_kernel_collective(const char *name, const char **collective, int32_t *dtype_bytes)
{
    static const struct {
        const char *token, *collective;
    } ops[] = {
        {"AllReduce", "allreduce"},   {"AllGather", "allgather"}, {"ReduceScatter", "reducescatter"},
        {"Broadcast", "broadcast"},   {"Reduce", "reduce"},       {"SendRecv", "sendrecv"},
        {"AllToAll", "alltoall"},     {"Send", "send"},           {"Recv", "recv"},
    };
    const char *end = NULL;
    if (name[0] == '_' && name[1] == 'Z' && name[2] >= '1' && name[2] <= '9') {
        /* A mangled function name: "_Z" <length> <identifier> <parameter types>. */
        char *after;
        unsigned long n = strtoul(name + 2, &after, 10);
        end = after + strnlen(after, n);
        name = after;
    }
    if (strncmp(name, "ncclDevKernel_", 14) != 0 && strncmp(name, "ncclKernel_", 11) != 0)
        return false;
    *collective = NULL;
    *dtype_bytes = 0;
    if (!end)
        end = strchr(name, '(');
    if (!end)
        end = name + strlen(name);
    for (const char *t = strchr(name, '_') + 1; t < end;) {
        const char *stop = t;
        while (stop < end && *stop != '_')
            stop++;
        size_t n = (size_t)(stop - t);
        for (size_t i = 0; i < PT_ARRAY_LEN(ops) && !*collective; i++)
            if (token_is(t, n, ops[i].token))
                *collective = ops[i].collective;
        if (!*dtype_bytes)
            *dtype_bytes = dtype_bytes_of(t, n);
        t = stop + 1;
    }
    return *collective != NULL;
}

size_t pt_cuda_api_name_len(const char *name)
{
    size_t n = strlen(name);
    const char *version = strstr(name, "_v"); /* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" */
    if (version && version[2] >= '0' && version[2] <= '9')
        n = (size_t)(version - name);
    return n;
}

#ifdef PT_HAVE_CUPTI
#include <cupti.h>

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kernel_record;
typedef CUpti_ActivityMemcpy6 memcpy_record;
typedef CUpti_ActivityMemset4 memset_record;
#else
typedef CUpti_ActivityKernel9 kernel_record;
typedef CUpti_ActivityMemcpy5 memcpy_record;
typedef CUpti_ActivityMemset4 memset_record;
#endif

static const char *memcpy_kind(uint8_t kind)
{
    static const char *const names[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
    return kind < PT_ARRAY_LEN(names) ? names[kind] : "Unknown";
}

static const char *memory_kind(unsigned kind)
{
    static const char *const names[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                        "Array",   "Managed",  "Device Static", "Managed Static"};
    return kind < PT_ARRAY_LEN(names) ? names[kind] : "Unknown";
}

/* What every GPU activity record says: its kind and its span on one device's stream. */
static void place_on_stream(pt_gpu_record *out, pt_event_kind kind, uint64_t start, uint64_t end, uint32_t device,
                            uint32_t stream)
{
    out->kind = kind;
    out->start_ns = (int64_t)start, out->end_ns = (int64_t)end;
    out->device = (int32_t)device;
    out->stream = stream;
}

static void convert_kernel(const kernel_record *k, const pt_cupti_names *names, pt_gpu_record *out)
{
    place_on_stream(out, PT_EVENT_GPU_KERNEL, k->start, k->end, k->deviceId, k->streamId);
    out->grid[0] = k->gridX, out->grid[1] = k->gridY, out->grid[2] = k->gridZ;
    out->block[0] = k->blockX, out->block[1] = k->blockY, out->block[2] = k->blockZ;
    const char *name = k->name ? k->name : "<unnamed kernel>";
    out->name = names->intern(names->ctx, name, strlen(name));
    const char *collective;
    int32_t dtype;
    if (pt_nccl_kernel_collective(name, &collective, &dtype)) {
        out->coll_name = names->intern(names->ctx, collective, strlen(collective));
        out->dtype_bytes = dtype;
    }
}

static void convert_memcpy(const memcpy_record *m, const pt_cupti_names *names, pt_gpu_record *out)
{
    char name[96];
    int n = snprintf(name, sizeof name, "Memcpy %s (%s -> %s)", memcpy_kind(m->copyKind), memory_kind(m->srcKind),
                     memory_kind(m->dstKind));
    place_on_stream(out, PT_EVENT_GPU_MEMCPY, m->start, m->end, m->deviceId, m->streamId);
    out->bytes = (int64_t)m->bytes;
    out->name = names->intern(names->ctx, name, (size_t)n);
}

static void convert_memset(const memset_record *m, const pt_cupti_names *names, pt_gpu_record *out)
{
    char name[64];
    int n = snprintf(name, sizeof name, "Memset (%s)", memory_kind(m->memoryKind));
    place_on_stream(out, PT_EVENT_GPU_MEMSET, m->start, m->end, m->deviceId, m->streamId);
    out->bytes = (int64_t)m->bytes;
    out->name = names->intern(names->ctx, name, (size_t)n);
}

static void convert_api(const CUpti_ActivityAPI *a, int domain, const pt_cupti_names *names, pt_gpu_record *out)
{
    char fallback[48];
    const char *name = names->api_name ? names->api_name(names->ctx, domain, a->cbid) : NULL;
    if (!name) {
        snprintf(fallback, sizeof fallback, "%s API %u", domain ? "driver" : "runtime", (unsigned)a->cbid);
        name = fallback;
    }
    size_t n = pt_cuda_api_name_len(name);
    out->kind = PT_EVENT_RUNTIME;
    out->start_ns = (int64_t)a->start, out->end_ns = (int64_t)a->end;
    out->device = -1;
    out->stream = a->threadId;
    out->name = names->intern(names->ctx, name, n);
}

bool pt_cupti_convert(const void *record, const pt_cupti_names *names, int64_t clock_offset_ns, pt_gpu_record *out)
{
    const CUpti_Activity *r = record;
    memset(out, 0, sizeof *out);
    out->coll_name = PT_NAMES_NONE;
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        convert_kernel(record, names, out);
        break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        convert_memcpy(record, names, out);
        break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        convert_memset(record, names, out);
        break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
        convert_api(record, 0, names, out);
        break;
    case CUPTI_ACTIVITY_KIND_DRIVER:
        convert_api(record, 1, names, out);
        break;
    default:
        return false;
    }
    if (out->name == PT_NAMES_NONE || out->end_ns < out->start_ns)
        return false;
    out->start_ns += clock_offset_ns;
    out->end_ns += clock_offset_ns;
    return true;
}

#else /* !PT_HAVE_CUPTI */

bool pt_cupti_convert(const void *record, const pt_cupti_names *names, int64_t clock_offset_ns, pt_gpu_record *out)
{
    (void)record, (void)names, (void)clock_offset_ns, (void)out;
    return false;
}

#endif
