/* The native raw trace: every field of every event kind survives a write and a read;
 * meta facts and warnings come back; a cut, unterminated or damaged file is refused with
 * a sentence saying so; and the format is at most a tenth of the same events as Kineto
 * JSON. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "trace/kineto_writer.h"
#include "trace/native_format.h"
#include "trace/native_writer.h"
#include "trace/reader.h"
#include "util/buf.h"

/* ------------------------------------------------------------ helpers */

typedef struct kept_event {
    pt_event ev;
    char name[96];
    char coll[32];
} kept_event;

typedef struct capture {
    kept_event *events;
    size_t count, cap;
    char warnings[8][256];
    int warning_count;
} capture;

static int on_event(void *ctx, const pt_event *ev)
{
    capture *c = ctx;
    PT_GROW(c->events, c->cap, c->count + 1);
    kept_event *k = &c->events[c->count++];
    k->ev = *ev;
    snprintf(k->name, sizeof k->name, "%.*s", (int)ev->name_len, ev->name);
    snprintf(k->coll, sizeof k->coll, "%.*s", ev->coll.name ? (int)ev->coll.name_len : 0,
             ev->coll.name ? ev->coll.name : "");
    return 0;
}

static void on_warning(void *ctx, const char *message)
{
    capture *c = ctx;
    if (c->warning_count < 8)
        snprintf(c->warnings[c->warning_count++], sizeof c->warnings[0], "%s", message);
}

static int read_trace(const char *path, capture *c, pt_trace_meta *meta, pt_error *err)
{
    memset(c, 0, sizeof *c);
    pt_trace_sink sink = {c, on_event, on_warning};
    pt_trace_meta_init(meta);
    return pt_trace_read(path, &sink, meta, NULL, err);
}

static char *temp_path(const char *suffix)
{
    static int counter;
    char *p = malloc(256);
    snprintf(p, 256, "/tmp/pt-native-%d-%d%s", (int)getpid(), counter++, suffix);
    return p;
}

static pt_trace_meta sample_meta(void)
{
    pt_trace_meta m;
    pt_trace_meta_init(&m);
    m.rank = 3, m.local_rank = 1, m.world_size = 8, m.pid = 4711;
    snprintf(m.host, sizeof m.host, "node-a");
    snprintf(m.backend, sizeof m.backend, "gloo");
    snprintf(m.device_name, sizeof m.device_name, "NVIDIA H200");
    m.device_count = 8;
    m.clock_origin_ns = 1700000000123456789LL;
    snprintf(m.producer, sizeof m.producer, "perftracker");
    m.hang_step = 41;
    m.dropped_events = 17;
    m.hw_sample_period_us = 103;
    return m;
}

/* A deterministic mix: CPU calls on three threads (switching blocks often and filling
 * some beyond one block), kernels with and without collectives, memcpy, memset,
 * runtime calls, steps and counters. */
static size_t make_events(pt_event *out, uint32_t *names, uint32_t *colls, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        pt_event *ev = &out[k];
        pt_event_kind kind = (pt_event_kind)(i < n / 2 ? PT_EVENT_CPU : (i % 7));
        pt_event_init(ev, kind);
        ev->ts_ns = 1000000 + (int64_t)i * 997 - (int64_t)(i % 5) * 3000; /* not monotonic */
        ev->dur_ns = (int64_t)(i % 13) * 1234567;
        ev->tid = kind == PT_EVENT_CPU ? (int64_t)((i / 5000) % 3) * 100 - 50 : (int64_t)(i % 4);
        ev->device = kind == PT_EVENT_CPU || kind == PT_EVENT_RUNTIME ? -1 : (int32_t)(i % 2);
        names[k] = (uint32_t)(i % 5);
        colls[k] = PT_NATIVE_NO_STRING;
        switch (kind) {
        case PT_EVENT_CPU: ev->depth = (int32_t)(i % 40) - 1; break;
        case PT_EVENT_GPU_KERNEL:
            ev->grid[0] = 320, ev->grid[1] = (int32_t)(i % 3), ev->grid[2] = 1;
            ev->block[0] = 512, ev->block[1] = 1, ev->block[2] = (int32_t)i;
            if (i % 2) {
                colls[k] = 5;
                ev->coll.in_nelems = (int64_t)i * 1024;
                ev->coll.out_nelems = (int64_t)i * 2048;
                ev->coll.group_size = 8;
                ev->coll.dtype_bytes = 2;
            }
            break;
        case PT_EVENT_GPU_MEMCPY:
        case PT_EVENT_GPU_MEMSET: ev->bytes = (int64_t)i << 20; break;
        case PT_EVENT_STEP: ev->step = (int64_t)i; break;
        case PT_EVENT_COUNTER:
            ev->value = (double)i / 3.0 - 17.25;
            ev->dur_ns = 0; /* counters are instants */
            break;
        default: break;
        }
        k++;
    }
    return k;
}

static const char *const string_table[] = {"train.py: <module>", "train.py: step", "<built-in function sleep>",
                                           "ampere_sgemm_128x64_nn", "Memcpy HtoD (Pageable -> Device)",
                                           "allreduce"};

static void write_trace(const char *path, const pt_event *events, const uint32_t *names, const uint32_t *colls,
                        size_t n)
{
    pt_error err;
    pt_native_writer *w = pt_native_writer_open(path, &err);
    assert_non_null(w);
    pt_trace_meta m = sample_meta();
    assert_int_equal(pt_native_writer_meta(w, &m), 0);
    assert_int_equal(pt_native_writer_fact(w, "warning", "the sampler was late"), 0);
    assert_int_equal(pt_native_writer_fact(w, "some_future_fact", "ignored by old readers"), 0);
    for (size_t i = 0; i < PT_ARRAY_LEN(string_table); i++)
        assert_int_equal(pt_native_writer_string(w, string_table[i], strlen(string_table[i])), i);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pt_native_writer_event(w, &events[i], names[i], colls[i]), 0);
    assert_int_equal(pt_native_writer_close(w, &err), 0);
}

/* ------------------------------------------------------------ tests */

static void every_field_round_trips(void **state)
{
    (void)state;
    enum { N = 30000 };
    pt_event *events = calloc(N, sizeof *events);
    uint32_t *names = calloc(N, sizeof *names), *colls = calloc(N, sizeof *colls);
    size_t n = make_events(events, names, colls, N);
    char *path = temp_path(".ptrace");
    write_trace(path, events, names, colls, n);

    capture c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_trace(path, &c, &meta, &err), 0);
    assert_int_equal(c.count, n);
    for (size_t i = 0; i < n; i++) {
        const pt_event *a = &events[i], *b = &c.events[i].ev;
        assert_int_equal(b->kind, a->kind);
        assert_string_equal(c.events[i].name, string_table[names[i]]);
        assert_int_equal(b->ts_ns, a->ts_ns);
        assert_int_equal(b->dur_ns, a->dur_ns);
        assert_int_equal(b->tid, a->tid);
        assert_int_equal(b->device, a->device);
        if (a->kind == PT_EVENT_CPU)
            assert_int_equal(b->depth, a->depth);
        assert_memory_equal(b->grid, a->grid, sizeof a->grid);
        assert_memory_equal(b->block, a->block, sizeof a->block);
        assert_int_equal(b->bytes, a->bytes);
        assert_int_equal(b->step, a->step);
        assert_true(b->value == a->value); /* bit-exact */
        assert_string_equal(c.events[i].coll, colls[i] == PT_NATIVE_NO_STRING ? "" : "allreduce");
        assert_int_equal(b->coll.in_nelems, a->coll.in_nelems);
        assert_int_equal(b->coll.out_nelems, a->coll.out_nelems);
        assert_int_equal(b->coll.group_size, a->coll.group_size);
        assert_int_equal(b->coll.dtype_bytes, a->coll.dtype_bytes);
    }
    assert_int_equal(meta.rank, 3);
    assert_int_equal(meta.local_rank, 1);
    assert_int_equal(meta.world_size, 8);
    assert_int_equal(meta.pid, 4711);
    assert_string_equal(meta.host, "node-a");
    assert_string_equal(meta.backend, "gloo");
    assert_string_equal(meta.device_name, "NVIDIA H200");
    assert_int_equal(meta.device_count, 8);
    assert_int_equal(meta.clock_origin_ns, 1700000000123456789LL);
    assert_string_equal(meta.producer, "perftracker");
    assert_int_equal(meta.hang_step, 41);
    assert_int_equal(meta.dropped_events, 17);
    assert_int_equal(meta.hw_sample_period_us, 103);
    assert_int_equal(c.warning_count, 1);
    assert_string_equal(c.warnings[0], "the sampler was late");
    unlink(path);
    free(path), free(c.events), free(events), free(names), free(colls);
}

static void long_strings_and_many_names(void **state)
{
    (void)state;
    char *path = temp_path(".ptrace");
    pt_error err;
    pt_native_writer *w = pt_native_writer_open(path, &err);
    assert_non_null(w);
    /* 40k names (several STRINGS sections) and one name longer than a section buffer. */
    char name[64];
    for (int i = 0; i < 40000; i++) {
        int len = snprintf(name, sizeof name, "mod%d.py: f%d", i % 97, i);
        assert_int_equal(pt_native_writer_string(w, name, (size_t)len), (uint32_t)i);
    }
    size_t big_len = 300000;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    assert_int_equal(pt_native_writer_string(w, big, big_len), 40000);
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_CPU);
    ev.tid = 1;
    for (uint32_t id = 0; id <= 40000; id += 1000) {
        ev.ts_ns = id;
        assert_int_equal(pt_native_writer_event(w, &ev, id, PT_NATIVE_NO_STRING), 0);
    }
    ev.ts_ns = 1;
    assert_int_equal(pt_native_writer_event(w, &ev, 40000, PT_NATIVE_NO_STRING), 0);
    /* A name id that was never written is refused (and the file with it). */
    assert_int_equal(pt_native_writer_event(w, &ev, 40001, PT_NATIVE_NO_STRING), -1);
    assert_int_equal(pt_native_writer_close(w, &err), -1);
    assert_int_equal(access(path, F_OK), -1);

    w = pt_native_writer_open(path, &err);
    for (int i = 0; i < 40000; i++) {
        int len = snprintf(name, sizeof name, "mod%d.py: f%d", i % 97, i);
        pt_native_writer_string(w, name, (size_t)len);
    }
    pt_native_writer_string(w, big, big_len);
    ev.ts_ns = 5;
    assert_int_equal(pt_native_writer_event(w, &ev, 40000, PT_NATIVE_NO_STRING), 0);
    ev.ts_ns = 6;
    assert_int_equal(pt_native_writer_event(w, &ev, 39999, PT_NATIVE_NO_STRING), 0);
    assert_int_equal(pt_native_writer_close(w, &err), 0);
    capture c;
    pt_trace_meta meta;
    assert_int_equal(read_trace(path, &c, &meta, &err), 0);
    assert_int_equal(c.count, 2);
    assert_int_equal(strlen(c.events[0].name), sizeof c.events[0].name - 1); /* kept name is cut */
    assert_memory_equal(c.events[0].name, big, sizeof c.events[0].name - 1);
    assert_string_equal(c.events[1].name, "mod35.py: f39999"); /* 39999 % 97 == 35 */
    unlink(path);
    free(path), free(big), free(c.events);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void copy_prefix(const char *from, const char *to, long n)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, in), (size_t)n);
    fwrite(buf, 1, (size_t)n, out);
    fclose(in), fclose(out);
    free(buf);
}

static void a_cut_file_is_refused_whole(void **state)
{
    (void)state;
    enum { N = 20000 };
    pt_event *events = calloc(N, sizeof *events);
    uint32_t *names = calloc(N, sizeof *names), *colls = calloc(N, sizeof *colls);
    size_t n = make_events(events, names, colls, N);
    char *path = temp_path(".ptrace"), *cut = temp_path(".ptrace");
    write_trace(path, events, names, colls, n);
    long size = file_size(path);
    for (int k = 1; k < 10; k++) {
        copy_prefix(path, cut, size * k / 10);
        capture c;
        pt_trace_meta meta;
        pt_error err;
        assert_int_equal(read_trace(cut, &c, &meta, &err), -1);
        assert_non_null(strstr(err.message, "truncated"));
        assert_true(c.count < n);
        free(c.events);
    }
    copy_prefix(path, cut, size - 1); /* even one byte short */
    capture c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_trace(cut, &c, &meta, &err), -1);
    free(c.events);
    unlink(path), unlink(cut);
    free(path), free(cut), free(events), free(names), free(colls);
}

/* Builds a valid zstd file around a hand-made decompressed stream. */
static void write_zstd(const char *path, const unsigned char *data, size_t n)
{
    size_t cap = ZSTD_compressBound(n);
    void *out = malloc(cap);
    size_t z = ZSTD_compress(out, cap, data, n, 1);
    assert_false(ZSTD_isError(z));
    FILE *f = fopen(path, "wb");
    fwrite(out, 1, z, f);
    fclose(f);
    free(out);
}

static size_t header(unsigned char *p)
{
    memcpy(p, PT_NATIVE_MAGIC, PT_NATIVE_MAGIC_LEN);
    p[8] = PT_NATIVE_VERSION, p[9] = 0, p[10] = p[11] = 0;
    return PT_NATIVE_HEADER_LEN;
}

static void expect_refused(const unsigned char *stream, size_t n, const char *phrase)
{
    char *path = temp_path(".ptrace");
    write_zstd(path, stream, n);
    capture c;
    pt_trace_meta meta;
    pt_error err;
    assert_int_equal(read_trace(path, &c, &meta, &err), -1);
    if (!strstr(err.message, phrase))
        fail_msg("expected \"%s\" in \"%s\"", phrase, err.message);
    unlink(path);
    free(path);
    free(c.events);
}

static void damaged_streams_are_refused(void **state)
{
    (void)state;
    unsigned char s[256];
    size_t n = header(s);
    /* Well-formed start, no END: a worker killed between sections. */
    unsigned char *p = s + n;
    *p++ = PT_NATIVE_STRINGS, *p++ = 4, *p++ = 0, *p++ = 1, *p++ = 1, *p++ = 'x';
    expect_refused(s, (size_t)(p - s), "no END section");
    /* An event naming a string that does not exist. */
    p = s + n;
    *p++ = PT_NATIVE_EVENTS, *p++ = 7, *p++ = PT_EVENT_RUNTIME, *p++ = 1, *p++ = 0, *p++ = 1;
    *p++ = 7 /* name id */, *p++ = 2, *p++ = 2;
    expect_refused(s, (size_t)(p - s), "string that does not exist");
    /* A section length beyond the format's limit. */
    p = s + n;
    *p++ = PT_NATIVE_META;
    p = pt_put_varint(p, (uint64_t)PT_NATIVE_MAX_SECTION + 1);
    expect_refused(s, (size_t)(p - s), "larger than the format allows");
    /* An END that does not match what was read. */
    p = s + n;
    *p++ = PT_NATIVE_END, *p++ = 2, *p++ = 5, *p++ = 0;
    expect_refused(s, (size_t)(p - s), "does not match");
    /* A newer version. */
    n = header(s);
    s[8] = 99;
    expect_refused(s, n, "version 99");
    /* An event count larger than its block. */
    n = header(s);
    p = s + n;
    *p++ = PT_NATIVE_EVENTS, *p++ = 5, *p++ = PT_EVENT_CPU, *p++ = 0x7f, *p++ = 0, *p++ = 1, *p++ = 0;
    expect_refused(s, (size_t)(p - s), "count larger");
}

/* A realistic window: Python call stacks (a few hundred distinct frames, 40 deep) and
 * GPU kernels, written both ways. */
static void a_tenth_of_kineto_json(void **state)
{
    (void)state;
    enum { FRAMES = 300, EVENTS = 200000 };
    char frame_names[FRAMES][80];
    for (int i = 0; i < FRAMES; i++)
        snprintf(frame_names[i], sizeof frame_names[i], "megatron/core/module_%d.py: forward_%d", i % 40, i);
    char *path = temp_path(".ptrace");
    pt_error err;
    pt_native_writer *nw = pt_native_writer_open(path, &err);
    pt_kineto_writer *kw = pt_kineto_writer_open(NULL, false, &err);
    assert_non_null(nw);
    assert_non_null(kw);
    pt_trace_meta m = sample_meta();
    pt_native_writer_meta(nw, &m);
    pt_kineto_writer_meta(kw, &m);
    for (int i = 0; i < FRAMES; i++)
        pt_native_writer_string(nw, frame_names[i], strlen(frame_names[i]));
    uint32_t kernel = pt_native_writer_string(nw, "void at::native::vectorized_elementwise_kernel<4>", 50);
    int64_t t = 1000;
    unsigned seed = 12345;
    for (int i = 0; i < EVENTS; i++) {
        seed = seed * 1103515245u + 12345u;
        pt_event ev;
        bool gpu = i % 4 == 3;
        pt_event_init(&ev, gpu ? PT_EVENT_GPU_KERNEL : PT_EVENT_CPU);
        uint32_t name = gpu ? kernel : (uint32_t)((seed >> 8) % FRAMES);
        ev.name = gpu ? "void at::native::vectorized_elementwise_kernel<4>" : frame_names[name];
        ev.name_len = strlen(ev.name);
        t += 300 + (seed >> 20) % 2000;
        ev.ts_ns = t;
        ev.dur_ns = 500 + (int64_t)((seed >> 4) % 50000);
        ev.tid = gpu ? 7 : 4711;
        ev.device = gpu ? 0 : -1;
        ev.depth = gpu ? -1 : (int32_t)((seed >> 12) % 40);
        if (gpu) {
            ev.grid[0] = 1024, ev.grid[1] = ev.grid[2] = 1;
            ev.block[0] = 128, ev.block[1] = ev.block[2] = 1;
        }
        assert_int_equal(pt_native_writer_event(nw, &ev, name, PT_NATIVE_NO_STRING), 0);
        assert_int_equal(pt_kineto_writer_event(kw, &ev), 0);
    }
    uint64_t json_bytes = pt_kineto_writer_bytes(kw);
    assert_int_equal(pt_kineto_writer_close(kw, &err), 0);
    assert_int_equal(pt_native_writer_close(nw, &err), 0);
    long native = file_size(path);
    double ratio = (double)native / (double)json_bytes;
    print_message("native raw trace: %ld bytes, Kineto JSON: %llu bytes, ratio %.4f (%.2f bytes/event)\n", native,
                  (unsigned long long)json_bytes, ratio, (double)native / EVENTS);
    assert_true(ratio <= 0.1);
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_field_round_trips),
        cmocka_unit_test(long_strings_and_many_names),
        cmocka_unit_test(a_cut_file_is_refused_whole),
        cmocka_unit_test(damaged_streams_are_refused),
        cmocka_unit_test(a_tenth_of_kineto_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
