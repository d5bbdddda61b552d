/* make_seeds.c -- builds the fuzz targets' seed corpora, and writes native raw traces for
 * the reliability tests.
 *
 *   make_seeds corpus OUT_DIR [SUMMARY_SOURCE_TRACE...]
 *       OUT_DIR/<target>/ for every fuzz target: synthetic workers as Kineto JSON (plain,
 *       gzip), as native raw traces (zstd, and the decompressed stream the native target
 *       mutates), as summaries (files and bare payloads); summaries of the traces given
 *       (the real traces in ../shared/data/traces); one frame of every control-plane
 *       message and a stream of them; sessions of authenticated peers with a coordinator
 *       (a triggered round, an automatic one, a hang report, hostile values: the format
 *       is fuzz/fuzz_coordinator.c's); JSON documents (a whole report among them); request
 *       paths for the display rules. Nothing here is checked in: scripts/fuzz.sh and the
 *       replay tests build it into the build tree, and fuzz/build_corpus.py adds trimmed
 *       copies of the real traces.
 *   make_seeds native OUT.ptrace [--rank R] [--workers N] [--steps S] [--pace-us US]
 *       One synthetic worker as the collector's raw trace (with hardware samples, a
 *       warning fact and collector facts). --pace-us sleeps that long after every event,
 *       so a test can kill the writer mid-file (the writer writes OUT.ptrace.partial and
 *       renames it at close).
 *   make_seeds zstd IN OUT
 *       Compresses IN into one zstd frame with a checksum (the tests' .zst inputs, where
 *       no zstd program is installed).
 *
 * Small on purpose: 1-layer, 2-step workers (tens of KB), so libFuzzer spends its time
 * mutating rather than re-reading big inputs; and "fit-" copies of the same workers
 * thinned to every step and the first few events of each kind (a few KB), which fit the
 * targets' max_len (fuzz/<target>.options) whole, and make the coordinator's and the
 * frames' summaries. */
#define _GNU_SOURCE
#include "control/protocol.h"
#include "diagnose/diagnose.h"
#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "util/tar.h"
#include "synth/synth.h"
#include "trace/kineto_writer.h"
#include "trace/native_writer.h"
#include "util/buf.h"
#include "util/input.h"
#include "util/json.h"
#include "util/strtab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "make_seeds: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die("cannot create", path);
}

static void write_bytes(const char *dir, const char *name, const void *data, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
        die("cannot write", path);
}

static pt_synth_plan *small_plan(int workers, int steps, pt_fault_kind fault)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = workers, job.steps = steps, job.layers = 1, job.fault = fault;
    pt_error err = {{0}};
    pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
    if (!plan)
        die("synth", err.message);
    return plan;
}

/* ------------------------------------------------------------ thinned workers */

/* Passes on every step and the first `limit` events of each other kind (limit 0: all). */
#define FIT_EVENTS_PER_KIND 6

typedef struct thin_sink {
    pt_trace_sink inner;
    int limit;
    int seen[PT_EVENT_KIND_COUNT];
} thin_sink;

static int thin_event(void *ctx, const pt_event *ev)
{
    thin_sink *t = ctx;
    if (t->limit && ev->kind != PT_EVENT_STEP && t->seen[ev->kind]++ >= t->limit)
        return 0;
    return t->inner.on_event(t->inner.ctx, ev);
}

static void thin_warning(void *ctx, const char *message)
{
    thin_sink *t = ctx;
    if (t->inner.on_warning)
        t->inner.on_warning(t->inner.ctx, message);
}

static void thin_metadata(void *ctx, const pt_trace_metadata *md)
{
    thin_sink *t = ctx;
    if (t->inner.on_metadata)
        t->inner.on_metadata(t->inner.ctx, md);
}

/* Worker rank's events through a thin_sink of limit into inner. 0 or -1 with err. */
static int thin_worker(const pt_synth_plan *plan, int rank, int limit, pt_trace_sink inner, pt_trace_meta *meta,
                       pt_error *err)
{
    thin_sink t = {inner, limit, {0}};
    pt_trace_sink sink = {&t, thin_event, thin_warning, thin_metadata};
    return pt_synth_plan_worker(plan, rank, &sink, meta, err);
}

/* ------------------------------------------------------------ native raw traces */

typedef struct native_sink {
    pt_native_writer *w;
    pt_strtab names; /* ids match the writer's: both count first appearances from 0 */
    unsigned pace_us;
    int failed;
} native_sink;

static uint32_t native_string(native_sink *ns, const char *s, size_t n)
{
    size_t before = ns->names.count;
    uint32_t id = pt_strtab_intern(&ns->names, s, n);
    if (ns->names.count > before && pt_native_writer_string(ns->w, s, n) != id)
        ns->failed = 1;
    return id;
}

static int native_event(void *ctx, const pt_event *ev)
{
    native_sink *ns = ctx;
    uint32_t name = native_string(ns, ev->name, ev->name_len);
    uint32_t coll = ev->coll.name ? native_string(ns, ev->coll.name, ev->coll.name_len) : PT_NATIVE_NO_STRING;
    if (pt_native_writer_event(ns->w, ev, name, coll) != 0)
        ns->failed = 1;
    if (ns->pace_us)
        nanosleep(&(struct timespec){0, (long)ns->pace_us * 1000}, NULL);
    return ns->failed;
}

/* One synthetic worker, plus what only the collector records: hardware samples, a
 * warning, hang and drop facts. */
static void write_native(const pt_synth_plan *plan, int rank, int limit, const char *path, unsigned pace_us)
{
    pt_error err = {{0}};
    native_sink ns = {pt_native_writer_open(path, &err), {0}, pace_us, 0};
    if (!ns.w)
        die("native writer", err.message);
    pt_strtab_init(&ns.names);
    pt_trace_meta meta;
    pt_synth_plan_meta(plan, rank, &meta);
    meta.hw_sample_period_us = 100;
    meta.dropped_events = 3;
    pt_native_writer_meta(ns.w, &meta);
    pt_native_writer_fact(ns.w, "warning", "the sampler was late twice");
    pt_trace_sink sink = {&ns, native_event, NULL, NULL};
    if (thin_worker(plan, rank, limit, sink, &meta, &err) != 0 || ns.failed)
        die("native events", err.message[0] ? err.message : "writer failed");
    for (int i = 0; i < (limit ? limit : 64); i++) {
        pt_event ev;
        pt_event_init(&ev, PT_EVENT_COUNTER);
        ev.name = i % 2 ? "gpu0.sm_active" : "host.cpu_util";
        ev.name_len = strlen(ev.name);
        ev.ts_ns = (int64_t)i * 100000;
        ev.value = (i * 37) % 100;
        ev.device = 0;
        native_event(&ns, &ev);
    }
    pt_native_writer_fact_int(ns.w, "hang_step", rank == 0 ? 11 : -1); /* known last, as in a hang */
    if (pt_native_writer_close(ns.w, &err) != 0)
        die("native close", err.message);
    pt_strtab_free(&ns.names);
}

/* The decompressed stream of a native trace: what the native fuzz target mutates. */
static void write_decompressed(const char *src, const char *dir, const char *name)
{
    size_t len;
    pt_error err = {{0}};
    char *data = pt_read_file(src, 64u << 20, &len, &err);
    if (!data)
        die(src, err.message);
    write_bytes(dir, name, data, len);
    free(data);
}

/* ------------------------------------------------------------ Kineto and summaries */

static void write_kineto(const pt_synth_plan *plan, int rank, const char *path, bool gzip)
{
    pt_error err = {{0}};
    pt_kineto_writer *w = pt_kineto_writer_open(path, gzip, &err);
    if (!w)
        die("kineto writer", err.message);
    pt_trace_meta meta;
    pt_synth_plan_meta(plan, rank, &meta);
    pt_kineto_writer_meta(w, &meta);
    pt_trace_sink sink = pt_kineto_writer_sink(w);
    if (pt_synth_plan_worker(plan, rank, &sink, &meta, &err) != 0 || pt_kineto_writer_close(w, &err) != 0)
        die("kineto", err.message);
}

static pt_worker_summary *synth_summary(const pt_synth_plan *plan, int rank, int limit)
{
    pt_error err = {{0}};
    pt_worker_summary *s = NULL;
    if (!limit) {
        s = pt_synth_plan_summary(plan, rank, &err);
    } else {
        pt_summarizer *sz = pt_summarizer_new();
        pt_trace_meta meta;
        pt_trace_meta_init(&meta);
        char stem[256];
        pt_synth_plan_worker_stem(plan, rank, stem, sizeof stem);
        if (thin_worker(plan, rank, limit, pt_summarizer_sink(sz), &meta, &err) == 0)
            s = pt_summarizer_finish(sz, &meta, stem, &err);
        pt_summarizer_free(sz);
    }
    if (!s)
        die("summarize", err.message);
    return s;
}

/* A summary file and its bare payload (decompressed, no header): the summary target
 * wraps inputs that lack the magic, so mutations land in the field decoder. */
static void write_summary_seeds(const pt_worker_summary *s, const char *dir, const char *stem, pt_buf *encoded)
{
    pt_buf_reset(encoded);
    pt_summary_encode(s, encoded);
    char name[512];
    snprintf(name, sizeof name, "%s.ptsum", stem);
    write_bytes(dir, name, encoded->data, encoded->len);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/%s", dir, name);
    snprintf(name, sizeof name, "%s.payload", stem);
    /* The payload is the zstd frame after the 24-byte header: decompress it through
     * pt_input by writing the frame alone to a scratch file. */
    char frame_path[4096];
    snprintf(frame_path, sizeof frame_path, "%s/.frame.zst", dir);
    FILE *f = fopen(frame_path, "wb");
    if (!f || fwrite(encoded->data + 24, 1, encoded->len - 24, f) != encoded->len - 24 || fclose(f) != 0)
        die("cannot write", frame_path);
    write_decompressed(frame_path, dir, name);
    unlink(frame_path);
}

/* ------------------------------------------------------------ control-plane frames */

static void add_frame(pt_buf *stream, const char *dir, const char *prefix, const pt_ctl_msg *m)
{
    size_t n = pt_ctl_encoded_size(m);
    if (n == 0)
        die("encoding a frame", pt_ctl_type_name(m->type));
    uint8_t *frame = pt_xmalloc(n);
    pt_ctl_encode(m, frame, n);
    char name[64];
    snprintf(name, sizeof name, "%s%s.frame", prefix, pt_ctl_type_name(m->type));
    if (dir) /* NULL: only into the stream */
        write_bytes(dir, name, frame, n);
    pt_buf_append(stream, frame, n);
    free(frame);
}

static void fill_worker(pt_ctl_msg *m)
{
    m->worker = (pt_ctl_worker){3, 3, 8, 0, 4711, pt_ctl_str("node0")};
}

/* One frame of each type (those that carry a summary carry this one), and all of them in
 * one stream; file names start with prefix. */
static void write_protocol_seeds(const char *dir, const pt_buf *summary, const char *prefix)
{
    static const pt_ctl_type types[] = {
        PT_CTL_CHALLENGE, PT_CTL_AUTH, PT_CTL_WELCOME, PT_CTL_REFUSED, PT_CTL_JOIN, PT_CTL_HEARTBEAT,
        PT_CTL_ARMED, PT_CTL_SUMMARY, PT_CTL_HANG, PT_CTL_AUTO_REQUEST, PT_CTL_BYE, PT_CTL_ARM, PT_CTL_PROBE,
        PT_CTL_TRIGGER, PT_CTL_ROUND_STARTED, PT_CTL_PROGRESS, PT_CTL_WORKER_SUMMARY, PT_CTL_WORKER_FAILED,
        PT_CTL_ROUND_DONE, PT_CTL_ERROR};
    pt_buf stream = PT_BUF_INIT;
    for (size_t i = 0; i < PT_ARRAY_LEN(types); i++) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, types[i]);
        for (int k = 0; k < PT_CTL_NONCE_BYTES; k++)
            m.nonce[k] = (uint8_t)k, m.mac[k] = (uint8_t)(255 - k);
        m.role = PT_CTL_ROLE_AGENT;
        m.round = 2, m.status = 0, m.wait = 5, m.steps = 2, m.start_step = 17, m.timeout_ms = 60000;
        m.steps_done = 15, m.mean_step_ns = 88000000, m.best_mean_ns = 80000000, m.stalled_ns = 0;
        m.kind = types[i] == PT_CTL_WORKER_FAILED ? PT_FAIL_HANG : PT_AUTO_SLOWDOWN;
        m.save_raw = PT_SAVE_RAW_MASTER;
        m.progress = (pt_ctl_progress){8, 8, 8, 8, 15, 17, 7, 6, 1, 1};
        fill_worker(&m);
        m.text = pt_ctl_str("wrong job key");
        m.path = pt_ctl_str("/tmp/perftracker/output/20260101_000000/raw_trace");
        m.stack = pt_ctl_str("train.py: <module>|train.py: train|model.py: forward");
        m.blob = pt_ctl_blob(summary->data, summary->len);
        if (!prefix[0] || types[i] == PT_CTL_SUMMARY || types[i] == PT_CTL_WORKER_SUMMARY)
            add_frame(&stream, dir, prefix, &m);
        else
            add_frame(&stream, NULL, prefix, &m);
    }
    /* A relay's merged heartbeats: one node's eight ranks. */
    uint8_t entries[8 * PT_CTL_BEAT_BYTES];
    for (int32_t r = 0; r < 8; r++)
        pt_ctl_beat_put(entries + r * PT_CTL_BEAT_BYTES, &(pt_ctl_beat){8 + r, 15 + r, 88000000, r == 5 ? 900000000 : 0,
                                                                        250000000});
    pt_ctl_msg beats;
    pt_ctl_msg_init(&beats, PT_CTL_HEARTBEATS);
    beats.blob = pt_ctl_blob(entries, sizeof entries);
    add_frame(&stream, prefix[0] ? NULL : dir, prefix, &beats);
    char name[64];
    snprintf(name, sizeof name, "%sall-frames.stream", prefix);
    write_bytes(dir, name, stream.data, stream.len);
    pt_buf_free(&stream);
}

/* ------------------------------------------------------------ coordinator sessions */

/* One record of fuzz_coordinator's input: the frame written to a peer (split into
 * records of at most 65535 bytes). */
static void to_peer(pt_buf *in, int peer, const pt_ctl_msg *m)
{
    size_t n = pt_ctl_encoded_size(m);
    if (n == 0)
        die("encoding a frame", pt_ctl_type_name(m->type));
    uint8_t *frame = pt_xmalloc(n);
    pt_ctl_encode(m, frame, n);
    for (size_t at = 0; at < n; at += 65535) {
        size_t piece = PT_MIN(n - at, (size_t)65535);
        uint8_t head[3] = {(uint8_t)peer, (uint8_t)(piece & 0xff), (uint8_t)(piece >> 8)};
        pt_buf_append(in, head, 3);
        pt_buf_append(in, frame + at, piece);
    }
    free(frame);
}

static void clock_moves(pt_buf *in, int ticks)
{
    pt_buf_putc(in, (char)(0x80 | (ticks - 1)));
}

static void join_all(pt_buf *in, int world, int64_t steps)
{
    for (int rank = 0; rank < 4 && rank < world; rank++) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_JOIN);
        m.worker = (pt_ctl_worker){rank, rank, world, 0, 1000 + rank, pt_ctl_str("node0")};
        to_peer(in, rank, &m);
        pt_ctl_msg_init(&m, PT_CTL_HEARTBEAT);
        m.steps_done = steps, m.mean_step_ns = 20000000;
        to_peer(in, rank, &m);
    }
}

static void heartbeats(pt_buf *in, int world, int64_t steps, uint32_t round)
{
    for (int rank = 0; rank < 4 && rank < world; rank++) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_HEARTBEAT);
        m.round = round, m.steps_done = steps, m.mean_step_ns = 20000000;
        to_peer(in, rank, &m);
    }
}

static void window(pt_buf *in, int world, uint32_t round, const pt_buf *summary)
{
    for (int rank = 0; rank < 4 && rank < world; rank++) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_ARMED);
        m.round = round;
        to_peer(in, rank, &m);
    }
    clock_moves(in, 4);
    heartbeats(in, world, 400, round);
    for (int rank = 0; rank < 4 && rank < world; rank++) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_SUMMARY);
        m.round = round;
        m.status = rank == 3 ? 1 : 0;
        m.text = pt_ctl_str(rank == 3 ? "cannot write the raw trace: No space left on device" : "");
        m.blob = pt_ctl_blob(summary->data, rank == 3 ? 0 : summary->len);
        to_peer(in, rank, &m);
    }
    clock_moves(in, 20);
}

static void write_coordinator_seeds(const char *dir, const pt_buf *summary)
{
    pt_buf in = PT_BUF_INIT;
    pt_ctl_msg m;

    pt_buf_putc(&in, 3); /* a triggered round on 4 workers */
    join_all(&in, 4, 10);
    pt_ctl_msg_init(&m, PT_CTL_TRIGGER);
    m.wait = 2, m.steps = 2, m.timeout_ms = 60000, m.save_raw = PT_SAVE_RAW_MASTER;
    m.path = pt_ctl_str("/tmp/perftracker/output/20260101_000000/raw_trace");
    to_peer(&in, 4, &m);
    clock_moves(&in, 1);
    window(&in, 4, 1, summary);
    pt_ctl_msg_init(&m, PT_CTL_BYE);
    to_peer(&in, 1, &m);
    write_bytes(dir, "triggered-round", in.data, in.len);

    pt_buf_reset(&in); /* an automatic round, on 6 workers of which 4 are here */
    pt_buf_putc(&in, 5 | 8);
    join_all(&in, 6, 100);
    pt_ctl_msg_init(&m, PT_CTL_AUTO_REQUEST);
    m.kind = PT_AUTO_SLOWDOWN, m.steps_done = 100, m.mean_step_ns = 30000000, m.best_mean_ns = 20000000;
    to_peer(&in, 2, &m);
    clock_moves(&in, 1);
    window(&in, 6, 1, summary);
    write_bytes(dir, "automatic-round", in.data, in.len);
    in.data[0] |= 0x70; /* the same round with its folder written to disk */
    write_bytes(dir, "automatic-round-on-disk", in.data, in.len);

    pt_buf_reset(&in); /* a hang report */
    pt_buf_putc(&in, 3 | 8);
    join_all(&in, 4, 50);
    pt_ctl_msg_init(&m, PT_CTL_HANG);
    m.steps_done = 50, m.mean_step_ns = 20000000, m.stalled_ns = 20000000000LL;
    m.stack = pt_ctl_str("train.py: <module>|train.py: train|<built-in function sleep>");
    to_peer(&in, 1, &m);
    pt_ctl_msg_init(&m, PT_CTL_AUTO_REQUEST);
    m.kind = PT_AUTO_HANG, m.steps_done = 50, m.mean_step_ns = 20000000, m.stalled_ns = 20000000000LL;
    to_peer(&in, 1, &m);
    clock_moves(&in, 1);
    for (int rank = 0; rank < 4; rank++) {
        pt_ctl_msg_init(&m, PT_CTL_HANG);
        m.round = 1, m.steps_done = 50, m.stalled_ns = rank == 1 ? 21000000000LL : 0;
        to_peer(&in, rank, &m);
    }
    clock_moves(&in, 80);
    write_bytes(dir, "hang-report", in.data, in.len);

    pt_buf_reset(&in); /* a rank joined twice, a JOIN outside the job, a trigger while one runs */
    pt_buf_putc(&in, 1);
    join_all(&in, 2, 5);
    pt_ctl_msg_init(&m, PT_CTL_JOIN);
    m.worker = (pt_ctl_worker){0, 0, 2, 0, 9, pt_ctl_str("impostor")};
    to_peer(&in, 2, &m);
    m.worker = (pt_ctl_worker){1, 0, 2, 0, 9, pt_ctl_str("impostor")};
    to_peer(&in, 3, &m);
    pt_ctl_msg_init(&m, PT_CTL_TRIGGER);
    m.steps = 1000, m.wait = 1000000, m.timeout_ms = 1;
    to_peer(&in, 4, &m);
    to_peer(&in, 4, &m);
    clock_moves(&in, 127);
    write_bytes(dir, "hostile", in.data, in.len);
    pt_buf_free(&in);
}

/* ------------------------------------------------------------ JSON and request paths */

static void write_json_seeds(const char *dir, pt_worker_summary **workers, size_t n)
{
    static const char *const docs[] = {
        "{\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 3, \"world_size\": 8}}",
        "[{\"name\": \"<img src=x onerror=alert(1)>\", \"ts\": 1.5e3, \"dur\": -0, \"args\": {}}]",
        "{\"s\": \"\\u00e9\\ud83d\\ude00\\ud800 \\\\ \\\" \\/ \\b\\f\\n\\r\\t\", \"n\": [1e308, -1e-308, 12345678901234567890]}",
        "{\"baseTimeNanoseconds\": 1700000000123456789, \"deviceProperties\": [{\"name\": \"NVIDIA H100\"}]}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "{\"a\": true, \"b\": false, \"c\": null, \"a\": 1}",
    };
    char name[32];
    for (size_t i = 0; i < PT_ARRAY_LEN(docs); i++) {
        snprintf(name, sizeof name, "doc%zu.json", i);
        write_bytes(dir, name, docs[i], strlen(docs[i]));
    }
    pt_job_input job = {workers, n, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&job);
    pt_buf text = PT_BUF_INIT;
    pt_json_write(&text, report, 2);
    write_bytes(dir, "report.json", text.data, text.len);
    pt_buf_free(&text);
    pt_json_free(report);
}

static void write_path_seeds(const char *dir)
{
    static const char *const paths[] = {"/", "/index.html", "/assets/app.js", "/in.html", "/out.txt",
                                        "/raw_trace/node0_0_1.ptrace", "/%2e%2e/secret.txt", "/assets/",
                                        "/.hidden", "/raw_trace/../secret.txt", "/assets%2fapp.js"};
    char name[32];
    for (size_t i = 0; i < PT_ARRAY_LEN(paths); i++) {
        snprintf(name, sizeof name, "path%zu", i);
        write_bytes(dir, name, paths[i], strlen(paths[i]));
    }
}

/* ------------------------------------------------------------ archives */

/* A large round's summaries.tar in small: the workers' summaries as members, ended; the
 * same without its end marker (a collector that died); and a one-member archive. */
static void write_tar_seeds(const char *dir, pt_worker_summary *const *workers, size_t n)
{
    for (int variant = 0; variant < 3; variant++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.tar", dir, variant == 0 ? "round" : variant == 1 ? "unfinished" : "one");
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            die("cannot write", path);
        uint64_t end = 0;
        pt_error err;
        for (size_t i = 0; i < (variant == 2 ? 1 : n); i++) {
            pt_buf encoded = PT_BUF_INIT;
            pt_summary_encode(workers[i], &encoded);
            char name[64];
            snprintf(name, sizeof name, "node%zu_0_%zu.ptsum", i / 2, 100 + i);
            if (pt_tar_append(fd, &end, name, encoded.data, encoded.len, 0644, 1767225600, &err) != 0)
                die(err.message, path);
            pt_buf_free(&encoded);
        }
        if (variant != 1 && pt_tar_finish(fd, end, &err) != 0)
            die(err.message, path);
        close(fd);
    }
}

/* ------------------------------------------------------------ main */

static int corpus(const char *out, int ntraces, char **traces)
{
    static const char *const targets[] = {"kineto",       "native",      "summary", "json", "protocol",
                                          "display_path", "coordinator", "tar"};
    char dirs[PT_ARRAY_LEN(targets)][1024];
    if (strlen(out) > 900)
        die("output directory name too long", out);
    make_dir(out);
    for (size_t i = 0; i < PT_ARRAY_LEN(targets); i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/%s", out, targets[i]);
        make_dir(dirs[i]);
    }
    const char *kineto = dirs[0], *native = dirs[1], *summary = dirs[2], *json = dirs[3], *protocol = dirs[4];

    static const pt_fault_kind faults[] = {PT_FAULT_NONE, PT_FAULT_SLOW_GPU, PT_FAULT_HANG};
    pt_worker_summary *workers[8] = {0}, *thin[8] = {0};
    size_t nworkers = 0, nthin = 0;
    pt_buf encoded = PT_BUF_INIT;
    char path[4096], stem[256];
    for (size_t f = 0; f < PT_ARRAY_LEN(faults); f++) {
        pt_synth_plan *plan = small_plan(2, 2, faults[f]);
        for (int rank = 0; rank < 2; rank++) {
            const char *fault = pt_fault_name(faults[f]);
            snprintf(path, sizeof path, "%s/%s-%d.json", kineto, fault, rank);
            write_kineto(plan, rank, path, false);
            if (rank == 1) {
                snprintf(path, sizeof path, "%s/%s-%d.json.gz", kineto, fault, rank);
                write_kineto(plan, rank, path, true);
            }
            for (int fit = 0; fit < 2; fit++) { /* the whole worker, then its thinned copy */
                int limit = fit ? FIT_EVENTS_PER_KIND : 0;
                const char *prefix = fit ? "fit-" : "";
                snprintf(path, sizeof path, "%s/%s%s-%d.ptrace", native, prefix, fault, rank);
                write_native(plan, rank, limit, path, 0);
                snprintf(stem, sizeof stem, "%s%s-%d.stream", prefix, fault, rank);
                write_decompressed(path, native, stem);
                pt_worker_summary *s = synth_summary(plan, rank, limit);
                snprintf(stem, sizeof stem, "%s%s-%d", prefix, fault, rank);
                write_summary_seeds(s, summary, stem, &encoded);
                if (fit)
                    thin[nthin++] = s;
                else
                    workers[nworkers++] = s;
            }
        }
        pt_synth_plan_free(plan);
    }
    for (int i = 0; i < ntraces; i++) { /* real traces: their summaries */
        pt_error err = {{0}};
        pt_worker_summary *s = pt_summarize_file(traces[i], NULL, &err);
        if (!s) {
            fprintf(stderr, "make_seeds: %s: %s (skipped)\n", traces[i], err.message);
            continue;
        }
        snprintf(stem, sizeof stem, "real-%d", i);
        write_summary_seeds(s, summary, stem, &encoded);
        pt_summary_free(s);
    }
    pt_buf_reset(&encoded);
    pt_summary_encode(workers[1], &encoded);
    write_protocol_seeds(protocol, &encoded, "");
    pt_buf_reset(&encoded); /* the sessions carry the thinned summary: they fit max_len */
    pt_summary_encode(thin[1], &encoded);
    write_protocol_seeds(protocol, &encoded, "fit-");
    write_coordinator_seeds(dirs[6], &encoded);
    write_json_seeds(json, workers, nworkers);
    write_path_seeds(dirs[5]);
    write_tar_seeds(dirs[7], workers, nworkers);
    for (size_t i = 0; i < nworkers; i++)
        pt_summary_free(workers[i]);
    for (size_t i = 0; i < nthin; i++)
        pt_summary_free(thin[i]);
    pt_buf_free(&encoded);
    printf("make_seeds: seeds for %zu targets in %s\n", PT_ARRAY_LEN(targets), out);
    return 0;
}

static int native_one(int argc, char **argv)
{
    int rank = 0, workers = 2, steps = 2;
    unsigned pace_us = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rank") == 0)
            rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--workers") == 0)
            workers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--pace-us") == 0)
            pace_us = (unsigned)atoi(argv[i + 1]);
        else
            die("unknown option", argv[i]);
    }
    pt_synth_plan *plan = small_plan(workers, steps, PT_FAULT_NONE);
    write_native(plan, rank, 0, argv[2], pace_us);
    pt_synth_plan_free(plan);
    return 0;
}

static int compress_file(const char *in, const char *out)
{
    size_t len;
    pt_error err = {{0}};
    char *data = pt_read_file(in, (size_t)1 << 31, &len, &err);
    if (!data)
        die(in, err.message);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    size_t cap = ZSTD_compressBound(len);
    char *frame = pt_xmalloc(cap);
    size_t n = ZSTD_compress2(cctx, frame, cap, data, len);
    if (ZSTD_isError(n))
        die("zstd", ZSTD_getErrorName(n));
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    const char *name = out;
    if (slash)
        *slash = '\0', name = slash + 1;
    write_bytes(slash ? dir : ".", name, frame, n);
    ZSTD_freeCCtx(cctx);
    free(frame);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "corpus") == 0)
        return corpus(argv[2], argc - 3, argv + 3);
    if (argc >= 3 && strcmp(argv[1], "native") == 0)
        return native_one(argc, argv);
    if (argc == 4 && strcmp(argv[1], "zstd") == 0)
        return compress_file(argv[2], argv[3]);
    fprintf(stderr, "usage: make_seeds corpus OUT_DIR [TRACE...]\n"
                    "       make_seeds native OUT.ptrace [--rank R] [--workers N] [--steps S] [--pace-us US]\n"
                    "       make_seeds zstd IN OUT\n");
    return 2;
}
