/* The streaming Kineto reader on crafted inputs: every variant it must accept, and the
 * errors it must report. A 4 KiB buffer forces events to straddle refills. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "trace/reader.h"
#include "util/buf.h"

typedef struct collected {
    pt_event events[64];
    char names[64][128];
    size_t name_lens[64];
    bool name_has_nul[64];
    size_t count;
    size_t total;
    int64_t dur_sum;
    int warnings;
    char last_warning[256];
    size_t metadata_count;
    char metadata[8][320]; /* "name pid tid key=value" */
} collected;

static int collect(void *ctx, const pt_event *ev)
{
    collected *c = ctx;
    c->total++;
    c->dur_sum += ev->dur_ns;
    if (c->count < 64) {
        c->events[c->count] = *ev;
        snprintf(c->names[c->count], sizeof c->names[0], "%.*s", (int)ev->name_len, ev->name);
        c->name_lens[c->count] = ev->name_len;
        c->name_has_nul[c->count] = memchr(ev->name, '\0', ev->name_len) != NULL;
        c->events[c->count].name = c->names[c->count];
        c->events[c->count].coll.name = NULL;
        c->count++;
    }
    return 0;
}

static void got_metadata(void *ctx, const pt_trace_metadata *md)
{
    collected *c = ctx;
    if (c->metadata_count < 8) {
        char pid[64], tid[64], value[64];
        if (md->pid_text)
            snprintf(pid, sizeof pid, "'%.*s'", (int)md->pid_text_len, md->pid_text);
        else
            snprintf(pid, sizeof pid, "%lld", (long long)md->pid);
        snprintf(tid, sizeof tid, "%lld", (long long)md->tid);
        if (md->text)
            snprintf(value, sizeof value, "'%.*s'", (int)md->text_len, md->text);
        else
            snprintf(value, sizeof value, "%lld", (long long)md->number);
        snprintf(c->metadata[c->metadata_count], sizeof c->metadata[0], "%.*s %s %s %.*s=%s", (int)md->name_len,
                 md->name, pid, tid, (int)md->key_len, md->key, value);
    }
    c->metadata_count++;
}

static void warned(void *ctx, const char *msg)
{
    collected *c = ctx;
    c->warnings++;
    snprintf(c->last_warning, sizeof c->last_warning, "%s", msg);
}

static char *temp_file(const char *content, size_t len, bool gzip)
{
    char *path = strdup("/tmp/pt-kineto-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    if (gzip) {
        gzFile g = gzopen(path, "wb");
        gzwrite(g, content, (unsigned)len);
        gzclose(g);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(content, 1, len, f);
        fclose(f);
    }
    return path;
}

static int read_bytes(const char *bytes, size_t len, bool gzip, size_t max_event, collected *c, pt_trace_meta *meta,
                      pt_error *err)
{
    char *path = temp_file(bytes, len, gzip);
    memset(c, 0, sizeof *c);
    pt_trace_sink sink = {c, collect, warned, got_metadata};
    pt_read_options opts = {NULL, NULL, max_event};
    pt_trace_meta_init(meta);
    memset(err, 0, sizeof *err);
    int rc = pt_trace_read(path, &sink, meta, &opts, err);
    unlink(path);
    free(path);
    return rc;
}

static int read_text(const char *text, bool gzip, size_t max_event, collected *c, pt_trace_meta *meta, pt_error *err)
{
    return read_bytes(text, strlen(text), gzip, max_event, c, meta, err);
}

static const char *full_trace =
    "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100\"}, {\"id\": 1}],\n"
    " \"traceEvents\": [\n"
    "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#7\", \"pid\": 11, \"tid\": 11,"
    " \"ts\": 1000.5, \"dur\": 100},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void k<float>(int)\", \"pid\": 0, \"tid\": 7, \"ts\": 1001.25,"
    " \"dur\": 2.0005, \"args\": {\"device\": 3, \"stream\": 7, \"grid\": [320, 1, 1], \"block\": [512, 2, 1],"
    " \"Input Dims\": [[1, 2], [3]], \"nested\": {\"a\": [{\"b\": \"}]\"}]}}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)\", \"pid\": 0,"
    " \"tid\": 20, \"ts\": 1010, \"dur\": 50, \"args\": {\"Collective name\": \"allreduce\", \"In msg nelems\": 1024,"
    " \"Out msg nelems\": 1024, \"Group size\": 8, \"dtype\": \"BFloat16\"}},\n"
    "  {\"ph\": \"X\", \"cat\": \"Memcpy\", \"name\": \"Memcpy DtoH (Device -> Pinned)\", \"pid\": 0, \"tid\": 7,"
    " \"ts\": 1070, \"dur\": 3, \"args\": {\"bytes\": 4096}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 11, \"tid\": 11,"
    " \"ts\": 1000.9, \"dur\": 0.3},\n"
    "  {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"a\\u003cb\\\"c\\\\d.py(3): f\", \"pid\": 11,"
    " \"tid\": 11, \"ts\": 1000.6, \"dur\": 99},\n"
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"no timing\", \"pid\": 11, \"tid\": 11},\n"
    "  {\"ph\": \"f\", \"cat\": \"ac2g\", \"id\": 5, \"pid\": 0, \"tid\": 7, \"ts\": 1001, \"bp\": \"e\"},\n"
    "  {\"ph\": \"C\", \"name\": \"gpu0.sm_active_pct\", \"pid\": 0, \"ts\": 1005, \"args\": {\"value\": 55.25}}\n"
    " ],\n"
    " \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 5, \"world_size\": 8},\n"
    " \"baseTimeNanoseconds\": 1711964646000000000\n"
    "}\n";

static void check_full_trace(const collected *c, const pt_trace_meta *meta)
{
    assert_int_equal(c->count, 7);
    assert_int_equal(c->events[0].kind, PT_EVENT_STEP);
    assert_int_equal(c->events[0].step, 7);
    assert_true(c->events[0].ts_ns == 1000500);
    const pt_event *k = &c->events[1];
    assert_int_equal(k->kind, PT_EVENT_GPU_KERNEL);
    assert_true(k->ts_ns == 1001250 && k->dur_ns == 2001); /* 2.0005 us rounds to 2001 ns */
    assert_int_equal(k->device, 3);
    assert_int_equal(k->tid, 7);
    assert_int_equal(k->grid[0], 320);
    assert_int_equal(k->block[1], 2);
    const pt_event *n = &c->events[2];
    assert_int_equal(n->coll.in_nelems, 1024);
    assert_int_equal(n->coll.group_size, 8);
    assert_int_equal(n->coll.dtype_bytes, 2);
    assert_int_equal(c->events[3].kind, PT_EVENT_GPU_MEMCPY);
    assert_int_equal(c->events[3].bytes, 4096);
    assert_int_equal(c->events[4].kind, PT_EVENT_RUNTIME);
    assert_int_equal(c->events[5].kind, PT_EVENT_CPU);
    assert_string_equal(c->names[5], "a<b\"c\\d.py(3): f");
    assert_int_equal(c->events[6].kind, PT_EVENT_COUNTER);
    assert_true(c->events[6].value == 55.25);
    assert_int_equal(meta->rank, 5);
    assert_int_equal(meta->world_size, 8);
    assert_int_equal(meta->device_count, 2);
    assert_string_equal(meta->device_name, "NVIDIA H100");
    assert_true(meta->clock_origin_ns == 1711964646000000000LL);
    assert_string_equal(meta->backend, "nccl");
    assert_int_equal(c->warnings, 1); /* the event without ts/dur */
}

static void test_full_trace_plain_and_gzip(void **state)
{
    (void)state;
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(full_trace, false, 0, &c, &meta, &err), 0);
    check_full_trace(&c, &meta);
    assert_int_equal(read_text(full_trace, true, 0, &c, &meta, &err), 0);
    check_full_trace(&c, &meta);
    /* A 512-byte buffer: every event straddles a refill at least once. */
    assert_int_equal(read_text(full_trace, false, 512, &c, &meta, &err), 0);
    check_full_trace(&c, &meta);
}

static void test_bare_list(void **state)
{
    (void)state;
    collected c;
    pt_trace_meta meta;
    pt_error err;
    const char *text = "[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"ts\":5,\"dur\":1,\"tid\":\"main\"}]";
    assert_int_equal(read_text(text, false, 0, &c, &meta, &err), 0);
    assert_int_equal(c.count, 1);
    assert_int_equal(meta.rank, -1);
}

/* What torch.autograd.profiler's export_chrome_trace writes (torch 1.x, and every CPU-only
 * build): a bare list, no "cat", pid "CPU functions" for operators and record_function
 * ranges, "CUDA functions" with tid = device for kernels (older versions), flows with
 * cat "cpu_to_cuda", and remote events whose tid is a sentence. */
static const char legacy_trace[] =
    "[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 159, \"dur\": 32, \"tid\": 1, \"pid\": \"CPU functions\", "
    "\"args\": {}}, "
    "{\"name\": \"ProfilerStep#4\", \"ph\": \"X\", \"ts\": 217, \"dur\": 441, \"tid\": 1, \"pid\": \"CPU functions\", "
    "\"args\": {}}, "
    "{\"name\": \"aten::mm\", \"ph\": \"X\", \"ts\": 258.5, \"dur\": 190, \"tid\": 1, \"pid\": \"CPU functions\", "
    "\"args\": {}}, "
    "{\"name\": \"aten::mm\", \"ph\": \"s\", \"ts\": 258, \"tid\": 1, \"pid\": \"CPU functions\", \"id\": 0, "
    "\"cat\": \"cpu_to_cuda\", \"args\": {}}, "
    "{\"name\": \"gemm_kernel\", \"ph\": \"X\", \"ts\": 270, \"dur\": 12, \"tid\": 1, \"pid\": \"CUDA functions\", "
    "\"args\": {}}, "
    "{\"name\": \"rpc_async\", \"ph\": \"X\", \"ts\": 300, \"dur\": 2, \"tid\": \" node_id:0, thread_id:7 \", "
    "\"pid\": \"CPU functions\", \"args\": {}}]";

static void test_legacy_profiler_array(void **state)
{
    (void)state;
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(legacy_trace, false, 0, &c, &meta, &err), 0);
    assert_int_equal(c.count, 5); /* the flow is not a timed event */
    assert_int_equal(c.warnings, 0);
    assert_int_equal(c.events[0].kind, PT_EVENT_CPU);
    assert_string_equal(c.names[0], "aten::zeros");
    assert_int_equal(c.events[0].tid, 1);
    assert_int_equal(c.events[0].device, -1);
    assert_int_equal(c.events[0].cpu_kind, PT_CPU_UNKNOWN); /* the format cannot tell ops from ranges */
    assert_int_equal(c.events[1].kind, PT_EVENT_STEP);
    assert_int_equal(c.events[1].step, 4);
    assert_true(c.events[1].ts_ns == 217000 && c.events[1].dur_ns == 441000);
    assert_int_equal(c.events[2].kind, PT_EVENT_CPU);
    assert_true(c.events[2].ts_ns == 258500);
    assert_int_equal(c.events[3].kind, PT_EVENT_GPU_KERNEL);
    assert_string_equal(c.names[3], "gemm_kernel");
    assert_int_equal(c.events[3].device, 1);
    assert_int_equal(c.events[3].tid, 0);
    assert_int_equal(c.events[4].kind, PT_EVENT_CPU);
    assert_int_equal(c.events[4].tid, 0); /* the first number of " node_id:0, thread_id:7 " */
    /* "CPU functions" is a label, not a process id. */
    assert_int_equal(meta.pid, -1);
    assert_int_equal(meta.rank, -1);
}

/* torch.profiler's step ranges carried a different category in each generation: none
 * (the legacy profiler), Operator (Kineto of torch 1.8), cpu_op (1.9-1.12), user_annotation
 * (1.13 on). Each is a step. The GPU-side copy of the range (gpu_user_annotation, and 2021's
 * "User" spans on "stream N user") is no step: it would give the step GPU times. A name
 * that is not exactly ProfilerStep#<digits> stays an ordinary CPU event. */
static void test_steps_whatever_the_category(void **state)
{
    (void)state;
    static const char text[] =
        "{\"traceEvents\": [\n"
        " {\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"ProfilerStep#3\", \"pid\": 9, \"tid\": \"9\", \"ts\": 100,"
        " \"dur\": 10},\n"
        " {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#4\", \"pid\": 9, \"tid\": 9, \"ts\": 110,"
        " \"dur\": 10},\n"
        " {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#5\", \"pid\": 9, \"tid\": 9,"
        " \"ts\": 120, \"dur\": 10},\n"
        " {\"ph\": \"X\", \"name\": \"ProfilerStep#0\", \"pid\": \"CPU functions\", \"tid\": 1, \"ts\": 130,"
        " \"dur\": 10},\n"
        " {\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#5\", \"pid\": 0, \"tid\": 7,"
        " \"ts\": 121, \"dur\": 8},\n"
        " {\"ph\": \"X\", \"cat\": \"User\", \"name\": \"ProfilerStep#3\", \"pid\": 0, \"tid\": \"stream 7 user\","
        " \"ts\": 101, \"dur\": 8},\n"
        " {\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"ProfilerStep#\", \"pid\": 9, \"tid\": 9, \"ts\": 140,"
        " \"dur\": 1},\n"
        " {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#12a\", \"pid\": 9, \"tid\": 9, \"ts\": 141,"
        " \"dur\": 1}\n"
        "]}";
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(text, false, 0, &c, &meta, &err), 0);
    assert_int_equal(c.count, 6); /* the two GPU-side copies are not events */
    static const int64_t steps[] = {3, 4, 5, 0};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(c.events[i].kind, PT_EVENT_STEP);
        assert_int_equal(c.events[i].step, steps[i]);
        assert_true(c.events[i].ts_ns == 100000 + 10000 * (int64_t)i && c.events[i].dur_ns == 10000);
    }
    assert_int_equal(c.events[4].kind, PT_EVENT_CPU);
    assert_string_equal(c.names[4], "ProfilerStep#");
    assert_int_equal(c.events[4].cpu_kind, PT_CPU_OPERATOR);
    assert_int_equal(c.events[5].kind, PT_EVENT_CPU);
    assert_int_equal(c.events[5].step, -1);
}

/* Kineto of 2021 (torch 1.8): capitalised categories, tids as strings, GPU events under
 * pid = device and tid "stream N", a peer-to-peer copy with fromDevice/inDevice/toDevice
 * instead of device, "Python" for Python functions, a "Trace" span under pid "Traces",
 * "async" flows, and no deviceProperties. Each event lands in the class today's name for
 * it gives. */
static void test_kineto_2021_categories(void **state)
{
    (void)state;
    static const char text[] =
        "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n"
        "  {\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": 990, \"dur\": 500, \"pid\": \"Traces\", \"tid\": \"PyTorch "
        "Profiler\", \"name\": \"PyTorch Profiler (0)\", \"args\": {\"Op count\": 0}},\n"
        "  {\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"Traces\", "
        "\"tid\": \"Trace PyTorch Profiler\", \"ts\": 990},\n"
        "  {\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"ProfilerStep#2\", \"pid\": 4321, \"tid\": \"4321\", "
        "\"ts\": 1000, \"dur\": 400, \"args\": {\"Input dims\": [], \"Device\": 4321, \"External id\": 1}},\n"
        "  {\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"aten::mm\", \"pid\": 4321, \"tid\": \"4321\", "
        "\"ts\": 1010, \"dur\": 50, \"args\": {\"Device\": 4321, \"External id\": 2}},\n"
        "  {\"ph\": \"X\", \"cat\": \"Python\", \"name\": \"train.py(12): step\", \"pid\": 4321, \"tid\": \"4321\", "
        "\"ts\": 1005, \"dur\": 300},\n"
        "  {\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 4321, \"tid\": \"4321\", "
        "\"ts\": 1020, \"dur\": 5, \"args\": {\"cbid\": 211, \"correlation\": 77, \"external id\": 2}},\n"
        "  {\"ph\": \"s\", \"id\": 77, \"pid\": 4321, \"tid\": 4321, \"ts\": 1020, \"cat\": \"async\", "
        "\"name\": \"launch\"},\n"
        "  {\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"volta_sgemm_128x64_nn\", \"pid\": 0, "
        "\"tid\": \"stream 7\", \"ts\": 1030, \"dur\": 200, \"args\": {\"queued\": 0, \"device\": 0, "
        "\"context\": 1, \"stream\": 7, \"correlation\": 77, \"external id\": 2, \"grid\": [16, 8, 1], "
        "\"block\": [256, 1, 1]}},\n"
        "  {\"ph\": \"f\", \"id\": 77, \"pid\": 0, \"tid\": \"stream 7\", \"ts\": 1030, \"cat\": \"async\", "
        "\"name\": \"launch\", \"bp\": \"e\"},\n"
        "  {\"ph\": \"X\", \"cat\": \"Memcpy\", \"name\": \"Memcpy PtoP (Device -> Device)\", \"pid\": 1, "
        "\"tid\": \"stream 9\", \"ts\": 1240, \"dur\": 20, \"args\": {\"fromDevice\": 0, \"inDevice\": 1, "
        "\"toDevice\": 1, \"stream\": 9, \"correlation\": 78, \"external id\": 3, \"bytes\": 65536}},\n"
        "  {\"ph\": \"X\", \"cat\": \"Memset\", \"name\": \"Memset (Device)\", \"pid\": 0, \"tid\": \"stream 7\", "
        "\"ts\": 1270, \"dur\": 4, \"args\": {\"device\": 0, \"stream\": 7, \"bytes\": 4096}},\n"
        "  {\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", \"tid\": \"\", \"ts\": 1490}\n"
        "]}\n";
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(text, false, 0, &c, &meta, &err), 0);
    assert_int_equal(c.count, 7); /* the span of category Trace, the flows and the instants are not */
    assert_int_equal(c.warnings, 0);
    assert_int_equal(c.events[0].kind, PT_EVENT_STEP);
    assert_int_equal(c.events[0].step, 2);
    const pt_event *mm = &c.events[1];
    assert_int_equal(mm->kind, PT_EVENT_CPU);
    assert_int_equal(mm->cpu_kind, PT_CPU_OPERATOR);
    assert_int_equal(mm->tid, 4321);
    assert_int_equal(mm->device, -1); /* "Device" is the operator's process, not a GPU */
    assert_int_equal(c.events[2].kind, PT_EVENT_CPU);
    assert_int_equal(c.events[2].cpu_kind, PT_CPU_PYTHON);
    assert_int_equal(c.events[3].kind, PT_EVENT_RUNTIME);
    assert_int_equal(c.events[3].tid, 4321);
    const pt_event *k = &c.events[4];
    assert_int_equal(k->kind, PT_EVENT_GPU_KERNEL);
    assert_int_equal(k->device, 0);
    assert_int_equal(k->tid, 7);
    assert_int_equal(k->grid[0], 16);
    assert_int_equal(k->block[0], 256);
    const pt_event *copy = &c.events[5];
    assert_int_equal(copy->kind, PT_EVENT_GPU_MEMCPY);
    assert_int_equal(copy->device, 1); /* no "device": the pid is the device */
    assert_int_equal(copy->tid, 9);
    assert_int_equal(copy->bytes, 65536);
    assert_int_equal(c.events[6].kind, PT_EVENT_GPU_MEMSET);
    assert_int_equal(c.events[6].bytes, 4096);
    assert_int_equal(meta.pid, 4321);
    assert_int_equal(meta.device_count, 0);
}

/* Process and thread names reach on_metadata with their ids as written (a string pid
 * stays a string); user annotations other than steps keep their kind. */
static void test_metadata_and_annotations(void **state)
{
    (void)state;
    static const char text[] =
        "{\"traceEvents\": [\n"
        " {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 4037, \"tid\": 0, \"ts\": 1, "
        "\"args\": {\"name\": \"trainer \\\"0\\\"\"}},\n"
        " {\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": \"Spans\", \"tid\": 0, "
        "\"args\": {\"sort_index\": 536870912}},\n"
        " {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 7, \"args\": {\"name\": \"stream 7 \"}},\n"
        " {\"ph\": \"M\", \"name\": \"no_args\", \"pid\": 0, \"tid\": 7},\n"
        " {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"## forward ##\", \"pid\": 4037, \"tid\": 4037, "
        "\"ts\": 10, \"dur\": 5},\n"
        " {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 4037, \"tid\": 4037, "
        "\"ts\": 11, \"dur\": 1}\n"
        "]}";
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(text, false, 0, &c, &meta, &err), 0);
    assert_int_equal(c.metadata_count, 3); /* a record without a value is not passed on */
    assert_string_equal(c.metadata[0], "process_name 4037 0 name='trainer \"0\"'");
    assert_string_equal(c.metadata[1], "process_sort_index 'Spans' 0 sort_index=536870912");
    assert_string_equal(c.metadata[2], "thread_name 0 7 name='stream 7 '");
    assert_int_equal(c.count, 2);
    assert_int_equal(c.events[0].kind, PT_EVENT_CPU);
    assert_int_equal(c.events[0].cpu_kind, PT_CPU_ANNOTATION);
    assert_int_equal(c.events[1].cpu_kind, PT_CPU_OPERATOR);
    assert_int_equal(meta.pid, 4037);
    /* A sink without on_metadata still reads the trace. */
    char *path = temp_file(text, strlen(text), false);
    memset(&c, 0, sizeof c);
    pt_trace_sink sink = {&c, collect, warned};
    pt_trace_meta_init(&meta);
    memset(&err, 0, sizeof err);
    assert_int_equal(pt_trace_read(path, &sink, &meta, NULL, &err), 0);
    assert_int_equal(c.count, 2);
    unlink(path);
    free(path);
}

static void test_many_events_small_buffer(void **state)
{
    (void)state;
    pt_buf b = PT_BUF_INIT;
    pt_buf_puts(&b, "{\"traceEvents\":[");
    int64_t expect = 0;
    for (int i = 0; i < 20000; i++) {
        pt_buf_printf(&b, "%s{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"kernel_%d\",\"ts\":%d.%03d,\"dur\":%d.5}",
                      i ? ",\n" : "", i % 7, i, i % 1000, i % 13);
        expect += (i % 13) * 1000 + 500;
    }
    pt_buf_puts(&b, "]}");
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(b.data, false, 4096, &c, &meta, &err), 0);
    assert_int_equal(c.total, 20000);
    assert_true(c.dur_sum == expect);
    pt_buf_free(&b);
}

static void test_oversized_event_is_skipped(void **state)
{
    (void)state;
    pt_buf b = PT_BUF_INIT;
    pt_buf_puts(&b, "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"");
    for (int i = 0; i < 20000; i++)
        pt_buf_puts(&b, "x\\\"y");
    pt_buf_puts(&b, "\",\"ts\":1,\"dur\":1},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ok\",\"ts\":2,\"dur\":1}]}");
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(b.data, false, 4096, &c, &meta, &err), 0);
    assert_int_equal(c.count, 1);
    assert_string_equal(c.names[0], "ok");
    assert_non_null(strstr(c.last_warning, "skipped"));
    pt_buf_free(&b);
}

static void expect_error(const char *text, bool gzip, const char *fragment)
{
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_not_equal(read_text(text, gzip, 0, &c, &meta, &err), 0);
    if (!strstr(err.message, fragment))
        fail_msg("error '%s' lacks '%s'", err.message, fragment);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("", false, "empty");
    expect_error("hello", false, "not a trace");
    expect_error("{\"a\": 1}", false, "not a Chrome/Kineto trace");
    expect_error("{\"traceEvents\": {}}", false, "not a list");
    expect_error("{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1", false, "truncated");
    expect_error("{\"traceEvents\": [{\"ph\":\"X\"} {\"ph\":\"X\"}]}", false, "malformed");
    expect_error("{\"traceEvents\": []} trailing", false, "after the end");
    /* A gzip stream cut short must not read as a shorter valid trace. */
    char *path = temp_file(full_trace, strlen(full_trace), true);
    FILE *f = fopen(path, "rb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    f = fopen(path, "wb");
    fwrite(buf, 1, n / 2, f);
    fclose(f);
    collected c;
    memset(&c, 0, sizeof c);
    pt_trace_sink sink = {&c, collect, warned};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    assert_int_not_equal(pt_trace_read(path, &sink, &meta, NULL, &err), 0);
    assert_non_null(strstr(err.message, "truncated"));
    unlink(path);
    free(path);
}

/* Names that differ only after a NUL stay two names, and hold no NUL: \u0000 and a raw
 * NUL byte (not JSON, but a writer's bug) both become U+FFFD, in top-level strings too. Cut at the NUL, "gemm"
 * stood for all four and their time merged. */
static void test_nul_in_names_stays_distinct(void **state)
{
    (void)state;
    static const char text[] =
        "{\"metadata\":{\"system\":{\"uname\":{\"node\":\"node\\u0000x\"}}},"
        "\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\\u0000A\",\"ts\":1,\"dur\":1},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\\u0000B\",\"ts\":2,\"dur\":1},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\0C\",\"ts\":3,\"dur\":1},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\0\\\"D\",\"ts\":4,\"dur\":1}]}";
    static const char *const want[] = {"gemm\xEF\xBF\xBD" "A", "gemm\xEF\xBF\xBD" "B", "gemm\xEF\xBF\xBD" "C",
                                       "gemm\xEF\xBF\xBD\"D"};
    collected c;
    pt_trace_meta meta;
    pt_error err;
    for (int gzip = 0; gzip < 2; gzip++) {
        assert_int_equal(read_bytes(text, sizeof text - 1, gzip, 0, &c, &meta, &err), 0);
        assert_int_equal(c.count, 4);
        for (size_t i = 0; i < 4; i++) {
            assert_false(c.name_has_nul[i]);
            assert_int_equal(c.name_lens[i], strlen(want[i]));
            assert_string_equal(c.names[i], want[i]);
        }
        assert_string_equal(meta.host, "node\xEF\xBF\xBD" "x"); /* a top-level string too */
    }
}

/* A UTF-8 byte-order mark before the JSON is skipped, plain and compressed. */
static void test_utf8_bom(void **state)
{
    (void)state;
    static const char text[] = "\xEF\xBB\xBF \n{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
                               "\"ts\":1,\"dur\":1}]}";
    collected c;
    pt_trace_meta meta;
    pt_error err;
    for (int gzip = 0; gzip < 2; gzip++) {
        assert_int_equal(read_text(text, gzip, 0, &c, &meta, &err), 0);
        assert_int_equal(c.count, 1);
        assert_string_equal(c.names[0], "k");
    }
    /* Only at the very start: a BOM inside is not whitespace. */
    expect_error("{\"traceEvents\":[]}\xEF\xBB\xBF", false, "after the end");
    expect_error("\xEF\xBB", false, "not a trace");
}

/* Two event lists: refused, naming the problem (JSON parsers keep the last, streaming
 * readers both: the file means different traces to different tools). */
static void test_second_trace_events_list(void **state)
{
    (void)state;
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"ts\":1,\"dur\":1}],"
                 "\"x\":1,\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"ts\":1,\"dur\":1}]}",
                 false, "a second \"traceEvents\" list");
    expect_error("{\"traceEvents\":[],\"traceEvents\":[]}", true, "a second \"traceEvents\" list");
}

/* Zero bytes after the last gzip member are padding (`gzip -d` takes them); anything else
 * there is still corrupt. */
static void test_gzip_zero_padding(void **state)
{
    (void)state;
    static const char trace[] = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":1}]}";
    char *path = temp_file(trace, strlen(trace), true);
    FILE *f = fopen(path, "ab");
    static const char zeros[300000]; /* more than one 256 KiB read */
    fwrite(zeros, 1, sizeof zeros, f);
    fclose(f);
    collected c;
    memset(&c, 0, sizeof c);
    pt_trace_sink sink = {&c, collect, warned};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    assert_int_equal(pt_trace_read(path, &sink, &meta, NULL, &err), 0);
    assert_int_equal(c.count, 1);
    f = fopen(path, "ab");
    fputs("garbage", f);
    fclose(f);
    memset(&c, 0, sizeof c);
    pt_trace_meta_init(&meta);
    assert_int_not_equal(pt_trace_read(path, &sink, &meta, NULL, &err), 0);
    assert_non_null(strstr(err.message, "gzip data is corrupt"));
    unlink(path);
    free(path);
}

/* A file is read to the size it had at open: bytes appended after are not read, and
 * reaching that size while the file has grown is an error saying so. */
static void test_input_stops_at_size_at_open(void **state)
{
    (void)state;
    char *path = temp_file("0123456789", 10, false);
    pt_error err = {{0}};
    pt_input *in = pt_input_open(path, &err);
    assert_non_null(in);
    FILE *f = fopen(path, "ab");
    fputs("appended", f);
    fclose(f);
    char buf[64];
    assert_int_equal(pt_input_read(in, buf, sizeof buf, &err), 10);
    assert_int_equal(pt_input_read(in, buf, sizeof buf, &err), -1);
    assert_non_null(strstr(err.message, "grew while it was read (10 bytes when opened, 18 now)"));
    pt_input_close(in);
    /* Unchanged since open: the end is an ordinary end. */
    in = pt_input_open(path, &err);
    assert_int_equal(pt_input_read(in, buf, sizeof buf, &err), 18);
    assert_int_equal(pt_input_read(in, buf, sizeof buf, &err), 0);
    pt_input_close(in);
    unlink(path);
    free(path);
}

/* A top-level member we parse (deviceProperties, ...) larger than 1 MiB is ignored with a
 * warning: as a tree, [1,1,1,...] costs ~30 times its text. */
static void test_huge_top_level_member_is_ignored(void **state)
{
    (void)state;
    pt_buf b = PT_BUF_INIT;
    pt_buf_puts(&b, "{\"deviceProperties\":[");
    for (int i = 0; i < 600000; i++)
        pt_buf_puts(&b, i ? ",1" : "{\"name\":\"big\"}");
    pt_buf_puts(&b, "],\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":1}]}");
    collected c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_text(b.data, false, 0, &c, &meta, &err), 0);
    assert_int_equal(c.count, 1);
    assert_int_equal(meta.device_count, 0);
    assert_non_null(strstr(c.last_warning, "\"deviceProperties\""));
    pt_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_trace_plain_and_gzip), cmocka_unit_test(test_bare_list),
        cmocka_unit_test(test_legacy_profiler_array), cmocka_unit_test(test_metadata_and_annotations),
        cmocka_unit_test(test_many_events_small_buffer), cmocka_unit_test(test_oversized_event_is_skipped),
        cmocka_unit_test(test_errors), cmocka_unit_test(test_nul_in_names_stays_distinct),
        cmocka_unit_test(test_utf8_bom), cmocka_unit_test(test_second_trace_events_list),
        cmocka_unit_test(test_gzip_zero_padding), cmocka_unit_test(test_input_stops_at_size_at_open),
        cmocka_unit_test(test_huge_top_level_member_is_ignored), cmocka_unit_test(test_steps_whatever_the_category),
        cmocka_unit_test(test_kineto_2021_categories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
