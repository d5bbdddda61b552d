/* The Kineto writer against the project's own reader: every event kind written and read
 * back with its values exact (times to the nanosecond, names with characters that need
 * escaping, collective args, user annotations, process and thread names), plain and gzip;
 * the byte counter agrees with the file; failures leave no file behind. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/kineto_writer.h"
#include "trace/reader.h"

/* ------------------------------------------------------------ captured events */

typedef struct captured {
    pt_event ev;
    char *name;
    char *coll_name;
} captured;

typedef struct capture {
    captured *items;
    size_t count, cap;
    int warnings;
    char metadata[4][320]; /* "name pid tid key=value" */
    size_t metadata_count;
} capture;

static int on_event(void *ctx, const pt_event *ev)
{
    capture *c = ctx;
    if (c->count == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->items = realloc(c->items, c->cap * sizeof *c->items);
    }
    captured *k = &c->items[c->count++];
    k->ev = *ev;
    k->name = strndup(ev->name, ev->name_len);
    k->coll_name = ev->coll.name ? strndup(ev->coll.name, ev->coll.name_len) : NULL;
    return 0;
}

static void describe_metadata(const pt_trace_metadata *md, char *out, size_t size)
{
    char pid[48], value[64];
    if (md->pid_text)
        snprintf(pid, sizeof pid, "'%.*s'", (int)md->pid_text_len, md->pid_text);
    else
        snprintf(pid, sizeof pid, "%lld", (long long)md->pid);
    if (md->text)
        snprintf(value, sizeof value, "'%.*s'", (int)md->text_len, md->text);
    else
        snprintf(value, sizeof value, "%lld", (long long)md->number);
    snprintf(out, size, "%.*s %s %lld %.*s=%s", (int)md->name_len, md->name, pid, (long long)md->tid,
             (int)md->key_len, md->key, value);
}

static void on_metadata(void *ctx, const pt_trace_metadata *md)
{
    capture *c = ctx;
    if (c->metadata_count < 4)
        describe_metadata(md, c->metadata[c->metadata_count], sizeof c->metadata[0]);
    c->metadata_count++;
}

static void on_warning(void *ctx, const char *message)
{
    (void)message;
    ((capture *)ctx)->warnings++;
}

static void capture_free(capture *c)
{
    for (size_t i = 0; i < c->count; i++)
        free(c->items[i].name), free(c->items[i].coll_name);
    free(c->items);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------ the events written */

static const char weird_name[] = "py \"quoted\" \\ back <tag> & \xc3\xa9t\xc3\xa9 \t tab\nnewline";

static pt_event make(pt_event_kind kind, const char *name, int64_t ts, int64_t dur, int64_t tid)
{
    pt_event ev;
    pt_event_init(&ev, kind);
    ev.name = name;
    ev.name_len = strlen(name);
    ev.ts_ns = ts;
    ev.dur_ns = dur;
    ev.tid = tid;
    return ev;
}

/* One of each kind, with values that exercise the formatting: sub-microsecond parts,
 * whole microseconds, zero durations, big timestamps. */
static size_t sample_events(pt_event *out)
{
    size_t n = 0;
    pt_event k = make(PT_EVENT_GPU_KERNEL, "sm90_gemm<128, 256>(Params)", 1234567890123, 456789, 7);
    k.device = 3;
    k.grid[0] = 36, k.grid[1] = 32, k.grid[2] = 1;
    k.block[0] = 384, k.block[1] = 1, k.block[2] = 1;
    out[n++] = k;
    pt_event nccl = make(PT_EVENT_GPU_KERNEL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                         1234567990000, 12000001, 28);
    nccl.device = 3;
    nccl.grid[0] = 24, nccl.grid[1] = 1, nccl.grid[2] = 1;
    nccl.block[0] = 640, nccl.block[1] = 1, nccl.block[2] = 1;
    nccl.coll.name = "allreduce";
    nccl.coll.name_len = 9;
    nccl.coll.in_nelems = 28311552;
    nccl.coll.out_nelems = 28311552;
    nccl.coll.group_size = 16;
    nccl.coll.dtype_bytes = 4;
    out[n++] = nccl;
    pt_event cp = make(PT_EVENT_GPU_MEMCPY, "Memcpy DtoH (Device -> Pinned)", 1234568000001, 2001, 7);
    cp.device = 3;
    cp.bytes = 4;
    out[n++] = cp;
    pt_event ms = make(PT_EVENT_GPU_MEMSET, "Memset (Device)", 1234568000500, 0, 7);
    ms.device = 3;
    ms.bytes = 1 << 20;
    out[n++] = ms;
    out[n++] = make(PT_EVENT_RUNTIME, "cudaLaunchKernel", 1234567880000, 5500, 4242);
    out[n++] = make(PT_EVENT_RUNTIME, "cuLaunchKernel", 1234567880100, 4999, 4242);
    out[n++] = make(PT_EVENT_CPU, "train.py(58): train_step", 1234567000000, 99000000, 4242);
    out[n++] = make(PT_EVENT_CPU, "aten::linear", 1234567800000, 12340, 4242);
    out[n++] = make(PT_EVENT_CPU, "<built-in method run_backward of torch._C._EngineBase object at 0x7f3c>",
                    1234567800001, 1, 4243);
    out[n++] = make(PT_EVENT_CPU, weird_name, 1234567800002, 7, 4242);
    pt_event note = make(PT_EVENT_CPU, "## forward ##", 1234567800003, 9, 4242);
    note.cpu_kind = PT_CPU_ANNOTATION;
    out[n++] = note;
    pt_event st = make(PT_EVENT_STEP, "ProfilerStep#12", 1234567000000, 100000000, 4242);
    st.step = 12;
    out[n++] = st;
    pt_event ctr = make(PT_EVENT_COUNTER, "gpu3.sm_active", 1234567000100, 0, 0);
    ctr.value = 87.25;
    ctr.device = 3;
    out[n++] = ctr;
    /* GPU 0's counter goes in GPU 0's process (pid 0), the host's in the worker's. */
    pt_event gpu0 = make(PT_EVENT_COUNTER, "gpu0.sm_active", 1234567000200, 0, 0);
    gpu0.value = 12.5;
    gpu0.device = 0;
    out[n++] = gpu0;
    pt_event host = make(PT_EVENT_COUNTER, "host.cpu_util", 1234567000300, 0, 0);
    host.value = 40;
    out[n++] = host;
    return n;
}

static void sample_meta(pt_trace_meta *m)
{
    pt_trace_meta_init(m);
    m->rank = 11;
    m->world_size = 16;
    m->local_rank = 3;
    m->pid = 4242;
    snprintf(m->host, sizeof m->host, "node1");
    snprintf(m->backend, sizeof m->backend, "nccl");
    snprintf(m->device_name, sizeof m->device_name, "NVIDIA H100 80GB HBM3");
    m->device_count = 8;
    m->clock_origin_ns = 1764403200000000000LL;
    snprintf(m->producer, sizeof m->producer, "test");
}

/* Two process/thread names, one with a string pid and a value that needs escaping. */
static const pt_trace_metadata sample_metadata[] = {
    {"process_name", 12, 4242, 0, NULL, 0, NULL, 0, "name", 4, "python3 \"train\" <1>", 19, 0},
    {"process_sort_index", 18, 0, 0, "Spans", 5, NULL, 0, "sort_index", 10, NULL, 0, 536870912},
};
static const char *const sample_metadata_described[] = {
    "process_name 4242 0 name='python3 \"train\" <1>'",
    "process_sort_index 'Spans' 0 sort_index=536870912",
};

static char *temp_path(const char *suffix)
{
    char *path = malloc(256);
    snprintf(path, 256, "/tmp/pt_test_writer_%d%s", (int)getpid(), suffix);
    return path;
}

static int write_file(const char *path, bool gz, const pt_event *events, size_t n, uint64_t *bytes)
{
    pt_error err = {{0}};
    pt_kineto_writer *w = pt_kineto_writer_open(path, gz, &err);
    assert_non_null(w);
    pt_trace_meta meta;
    sample_meta(&meta);
    pt_kineto_writer_meta(w, &meta);
    for (size_t i = 0; i < PT_ARRAY_LEN(sample_metadata); i++)
        assert_int_equal(pt_kineto_writer_metadata(w, &sample_metadata[i]), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pt_kineto_writer_event(w, &events[i]), 0);
    if (bytes)
        *bytes = pt_kineto_writer_bytes(w);
    return pt_kineto_writer_close(w, &err);
}

static void assert_same_event(const pt_event *want, const captured *got)
{
    const pt_event *ev = &got->ev;
    assert_int_equal(ev->kind, want->kind);
    if (want->kind == PT_EVENT_STEP)
        assert_string_equal(got->name, "ProfilerStep#12");
    else
        assert_string_equal(got->name, want->name);
    assert_int_equal(ev->ts_ns, want->ts_ns);
    if (want->kind != PT_EVENT_COUNTER)
        assert_int_equal(ev->dur_ns, want->dur_ns);
    assert_int_equal(ev->tid, want->tid);
    switch (want->kind) {
    case PT_EVENT_GPU_KERNEL:
        assert_int_equal(ev->device, want->device);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(ev->grid[i], want->grid[i]);
            assert_int_equal(ev->block[i], want->block[i]);
        }
        if (want->coll.name) {
            assert_non_null(got->coll_name);
            assert_string_equal(got->coll_name, want->coll.name);
        } else {
            assert_null(got->coll_name);
        }
        assert_int_equal(ev->coll.in_nelems, want->coll.in_nelems);
        assert_int_equal(ev->coll.out_nelems, want->coll.out_nelems);
        assert_int_equal(ev->coll.group_size, want->coll.group_size);
        assert_int_equal(ev->coll.dtype_bytes, want->coll.dtype_bytes);
        break;
    case PT_EVENT_GPU_MEMCPY:
    case PT_EVENT_GPU_MEMSET:
        assert_int_equal(ev->device, want->device);
        assert_int_equal(ev->bytes, want->bytes);
        break;
    case PT_EVENT_STEP:
        assert_int_equal(ev->step, want->step);
        break;
    case PT_EVENT_COUNTER:
        assert_true(ev->value == want->value);
        break;
    default:
        assert_int_equal(ev->device, -1);
        break;
    }
    if (want->kind == PT_EVENT_CPU) /* what the reader says unasked is its own business */
        assert_int_equal(ev->cpu_kind == PT_CPU_ANNOTATION, want->cpu_kind == PT_CPU_ANNOTATION);
}


static void round_trip(bool gz)
{
    pt_event events[16];
    size_t n = sample_events(events);
    char *path = temp_path(gz ? ".json.gz" : ".json");
    assert_int_equal(write_file(path, gz, events, n, NULL), 0);

    capture c = {0};
    pt_trace_sink sink = {&c, on_event, on_warning, on_metadata};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    int rc = pt_trace_read(path, &sink, &meta, NULL, &err);
    if (rc != 0)
        fail_msg("read back failed: %s", err.message);
    assert_int_equal(c.warnings, 0);
    assert_int_equal(c.count, n);
    for (size_t i = 0; i < n; i++)
        assert_same_event(&events[i], &c.items[i]);
    assert_int_equal(c.metadata_count, PT_ARRAY_LEN(sample_metadata));
    for (size_t i = 0; i < PT_ARRAY_LEN(sample_metadata); i++)
        assert_string_equal(c.metadata[i], sample_metadata_described[i]);

    pt_trace_meta want;
    sample_meta(&want);
    assert_int_equal(meta.rank, want.rank);
    assert_int_equal(meta.world_size, want.world_size);
    assert_int_equal(meta.pid, want.pid);
    assert_string_equal(meta.host, want.host);
    assert_string_equal(meta.backend, want.backend);
    assert_string_equal(meta.device_name, want.device_name);
    assert_int_equal(meta.device_count, want.device_count);
    assert_int_equal(meta.clock_origin_ns, want.clock_origin_ns);
    capture_free(&c);
    unlink(path);
    free(path);
}

static void test_round_trip_plain(void **state)
{
    (void)state;
    round_trip(false);
}

static void test_round_trip_gzip(void **state)
{
    (void)state;
    round_trip(true);
}

/* Names are escaped HTML-safe: no raw '<', '>' or '&' reaches the file. */
static void test_names_escaped(void **state)
{
    (void)state;
    pt_event events[16];
    size_t n = sample_events(events);
    char *path = temp_path(".json");
    uint64_t counted = 0;
    assert_int_equal(write_file(path, false, events, n, &counted), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    assert_null(strchr(buf, '<'));
    assert_null(strchr(buf, '>'));
    assert_null(strchr(buf, '&'));
    assert_non_null(strstr(buf, "\"cat\":\"python_function\",\"name\":\"train.py(58): train_step\""));
    assert_non_null(strstr(buf, "\"cat\":\"cpu_op\",\"name\":\"aten::linear\""));
    assert_non_null(strstr(buf, "\"cat\":\"cuda_driver\",\"name\":\"cuLaunchKernel\""));
    assert_non_null(strstr(buf, "\"ts\":1234567890.123,\"dur\":456.789"));
    assert_non_null(strstr(buf, "\"cat\":\"user_annotation\",\"name\":\"## forward ##\""));
    assert_non_null(strstr(buf, "{\"ph\":\"C\",\"name\":\"gpu3.sm_active\",\"pid\":3,"));
    assert_non_null(strstr(buf, "{\"ph\":\"C\",\"name\":\"gpu0.sm_active\",\"pid\":0,"));
    assert_non_null(strstr(buf, "{\"ph\":\"C\",\"name\":\"host.cpu_util\",\"pid\":4242,"));
    assert_non_null(strstr(buf, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":\"Spans\",\"tid\":0,"
                                "\"args\":{\"sort_index\":536870912}}"));
    /* The byte counter agrees with the file: read before close, it is exactly where the
     * last event ends and the top-level members written at close begin. */
    static const char tail[] = "\n],\n\"baseTimeNanoseconds\":";
    assert_true(counted > 0 && counted + sizeof tail - 1 < len);
    assert_memory_equal(buf + counted, tail, sizeof tail - 1);
    assert_int_equal(buf[counted - 1], '}');
    unlink(path);
    free(path);
}

/* Counting mode writes nothing and reports the same bytes the file would hold. */
static void test_count_only(void **state)
{
    (void)state;
    pt_event events[16];
    size_t n = sample_events(events);
    char *path = temp_path("_count.json");
    uint64_t in_file = 0, counted = 0;
    assert_int_equal(write_file(path, false, events, n, &in_file), 0);
    assert_int_equal(write_file(NULL, false, events, n, &counted), 0);
    assert_true(in_file > 0);
    assert_int_equal(in_file, counted);
    unlink(path);
    free(path);
}

/* Many events cross the internal flush threshold; all come back, in order. */
static void test_many_events(void **state)
{
    (void)state;
    enum { N = 30000 };
    pt_event *events = calloc(N, sizeof *events);
    for (int i = 0; i < N; i++) {
        events[i] = make(PT_EVENT_GPU_KERNEL, "void at::native::vectorized_elementwise_kernel<4>(int)",
                         1000000007LL * i + i % 1000, 1000 + i, 7);
        events[i].device = 0;
        events[i].grid[0] = i;
    }
    char *path = temp_path("_many.json.gz");
    assert_int_equal(write_file(path, true, events, N, NULL), 0);
    capture c = {0};
    pt_trace_sink sink = {&c, on_event, on_warning};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    assert_int_equal(pt_trace_read(path, &sink, &meta, NULL, &err), 0);
    assert_int_equal(c.count, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c.items[i].ev.ts_ns, events[i].ts_ns);
        assert_int_equal(c.items[i].ev.dur_ns, events[i].dur_ns);
        assert_int_equal(c.items[i].ev.grid[0], i);
    }
    capture_free(&c);
    unlink(path);
    free(path);
    free(events);
}

static void test_open_failure(void **state)
{
    (void)state;
    pt_error err = {{0}};
    assert_null(pt_kineto_writer_open("/nonexistent-dir/x/trace.json", false, &err));
    assert_non_null(strstr(err.message, "/nonexistent-dir/x/trace.json"));
}

/* Discarding removes the partial file. */
static void test_discard(void **state)
{
    (void)state;
    char *path = temp_path("_discard.json");
    pt_error err = {{0}};
    pt_kineto_writer *w = pt_kineto_writer_open(path, false, &err);
    assert_non_null(w);
    pt_event ev = make(PT_EVENT_CPU, "aten::mm", 1, 2, 3);
    assert_int_equal(pt_kineto_writer_event(w, &ev), 0);
    pt_kineto_writer_discard(w);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    free(path);
}

/* A write error (a full device) is reported at close and the file removed. */
static void test_write_error(void **state)
{
    (void)state;
    struct stat st;
    if (stat("/dev/full", &st) != 0)
        skip();
    pt_error err = {{0}};
    pt_kineto_writer *w = pt_kineto_writer_open("/dev/full", false, &err);
    if (!w)
        skip();
    pt_event ev = make(PT_EVENT_CPU, "aten::mm", 1, 2, 3);
    for (int i = 0; i < 20000; i++)
        pt_kineto_writer_event(w, &ev);
    assert_int_equal(pt_kineto_writer_close(w, &err), -1);
    assert_non_null(strstr(err.message, "cannot write"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_plain),
        cmocka_unit_test(test_round_trip_gzip),
        cmocka_unit_test(test_names_escaped),
        cmocka_unit_test(test_count_only),
        cmocka_unit_test(test_many_events),
        cmocka_unit_test(test_open_failure),
        cmocka_unit_test(test_discard),
        cmocka_unit_test(test_write_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
