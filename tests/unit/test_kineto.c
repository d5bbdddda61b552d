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
    size_t count;
    size_t total;
    int64_t dur_sum;
    int warnings;
    char last_warning[256];
} collected;

static int collect(void *ctx, const pt_event *ev)
{
    collected *c = ctx;
    c->total++;
    c->dur_sum += ev->dur_ns;
    if (c->count < 64) {
        c->events[c->count] = *ev;
        snprintf(c->names[c->count], sizeof c->names[0], "%.*s", (int)ev->name_len, ev->name);
        c->events[c->count].name = c->names[c->count];
        c->events[c->count].coll.name = NULL;
        c->count++;
    }
    return 0;
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

static int read_text(const char *text, bool gzip, size_t max_event, collected *c, pt_trace_meta *meta, pt_error *err)
{
    char *path = temp_file(text, strlen(text), gzip);
    memset(c, 0, sizeof *c);
    pt_trace_sink sink = {c, collect, warned};
    pt_read_options opts = {NULL, NULL, max_event};
    pt_trace_meta_init(meta);
    memset(err, 0, sizeof *err);
    int rc = pt_trace_read(path, &sink, meta, &opts, err);
    unlink(path);
    free(path);
    return rc;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_trace_plain_and_gzip), cmocka_unit_test(test_bare_list),
        cmocka_unit_test(test_many_events_small_buffer), cmocka_unit_test(test_oversized_event_is_skipped),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
