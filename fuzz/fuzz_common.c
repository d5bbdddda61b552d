/* fuzz_common.c -- the in-memory file, the trace -> summary step and the downstream
 * pipeline every fuzz target shares (see fuzz_common.h). */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include "diagnose/diagnose.h"
#include "report/report.h"
#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "summarize/summary_json.h"
#include "synth/synth.h"
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void pt_fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: fuzz property broken: %s\n", file, line, what);
    abort();
}

const char *pt_fuzz_file(const void *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("pt-fuzz-input", MFD_CLOEXEC);
        PT_FUZZ_CHECK(fd >= 0, "memfd_create");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    PT_FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, (const char *)data + done, size - done, (off_t)done);
        PT_FUZZ_CHECK(n > 0, "pwrite");
        done += (size_t)n;
    }
    return path;
}

pt_worker_summary *pt_fuzz_summarize(const char *path, const char *file_name)
{
    pt_summarizer *sz = pt_summarizer_new();
    pt_trace_sink sink = pt_summarizer_sink(sz);
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    pt_worker_summary *s = NULL;
    if (pt_trace_read(path, &sink, &meta, NULL, &err) == 0)
        s = pt_summarizer_finish(sz, &meta, file_name, &err);
    pt_summarizer_free(sz);
    /* Users see this sentence on the CLI: a refusal must always say something. */
    PT_FUZZ_CHECK(s || err.message[0], "an input was refused without a message");
    return s;
}

/* A healthy worker to diagnose the fuzzed one against, kept encoded: the diagnosis may
 * annotate the summaries it is given, so every call decodes a fresh copy. */
static pt_buf reference;

static pt_worker_summary *reference_worker(void)
{
    if (!reference.len) {
        pt_synth_job job;
        pt_synth_job_init(&job);
        job.workers = 2, job.steps = 2, job.layers = 1;
        pt_error err = {{0}};
        pt_worker_summary *s = pt_synth_summary(&job, 1, &err);
        PT_FUZZ_CHECK(s != NULL, "synthesising and summarising the reference worker");
        pt_summary_encode(s, &reference);
        pt_summary_free(s);
    }
    pt_error err = {{0}};
    pt_worker_summary *s = pt_summary_decode(reference.data, reference.len, &err);
    PT_FUZZ_CHECK(s != NULL, "decoding the reference worker");
    return s;
}

/* encode(decode(encode(s))) == encode(s): the file format loses nothing the analysis
 * reads, for any summary a reader can produce. An encoded summary decodes exactly when
 * it keeps every rule (pt_summary_check): the decoder refuses what the checker refuses
 * (by the rule, or earlier by a bound of the format), and nothing else. Returns the
 * decoded copy, or NULL for an invalid summary. */
static pt_worker_summary *round_trip(const pt_worker_summary *s)
{
    pt_buf first = PT_BUF_INIT, second = PT_BUF_INIT;
    pt_summary_encode(s, &first);
    pt_error err = {{0}}, rule = {{0}};
    bool valid = pt_summary_check(s, &rule) == 0;
    pt_worker_summary *copy = pt_summary_decode(first.data, first.len, &err);
    if (!valid) {
        PT_FUZZ_CHECK(!copy && err.message[0], "the decoder must refuse an invalid summary");
        pt_buf_free(&first);
        return NULL;
    }
    if (!copy) {
        fprintf(stderr, "re-decoding an encoded summary failed: %s\n", err.message);
        PT_FUZZ_CHECK(0, "an encoded valid summary must decode");
    }
    pt_summary_encode(copy, &second);
    PT_FUZZ_CHECK(first.len == second.len && memcmp(first.data, second.data, first.len) == 0,
                  "re-encoding a decoded summary changed its bytes");
    pt_buf_free(&first);
    pt_buf_free(&second);
    return copy;
}

/* A report lists every rank of the job, so its cost grows with the world size a worker
 * claims (up to PT_MAX_WORLD_SIZE, seconds per input). That cost is linear and tested
 * by the bad-trace corpus ("huge_numbers"); here it would only slow the fuzzer down. */
#define FUZZ_MAX_WORLD 4096

bool pt_fuzz_replaying;

bool pt_fuzz_one_in(const uint8_t *data, size_t size, unsigned one_in)
{
    if (pt_fuzz_replaying)
        return true;
    uint32_t hash = 2166136261u; /* FNV-1a: the same input always gets the same answer */
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data[i]) * 16777619u;
    return hash % one_in == 0;
}

/* The fuzzed worker beside a healthy one (ranks may collide: that is a case too), then
 * alone, as the analysis would see a one-worker job; the report goes on into its text. */
static void diagnose_valid(pt_worker_summary *s, pt_worker_summary *copy)
{
    pt_buf text = PT_BUF_INIT;
    pt_worker_summary *workers[2] = {s, reference_worker()};
    const char *warning = "fuzz: one input warning";
    int32_t failed_rank = 7;
    const char *failed_name = "node0_7_10007.json";
    pt_job_input job = {workers, 2, -1, &warning, 1, &failed_rank, &failed_name, 1, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&job);
    pt_json_write(&text, report, 2);
    pt_report_render_log(report, &text);
    pt_json_free(report);

    pt_worker_summary *alone[1] = {copy};
    pt_job_input solo = {alone, 1, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    report = pt_diagnose(&solo);
    pt_buf_reset(&text);
    pt_json_write(&text, report, -1);
    pt_json_free(report);
    pt_buf_free(&text);
    pt_summary_free(workers[1]);
}

/* An invalid summary: the diagnosis refuses it and analyses the healthy worker. */
static void diagnose_invalid(pt_worker_summary *s)
{
    pt_worker_summary *workers[2] = {s, reference_worker()};
    pt_job_input job = {workers, 2, -1, NULL, 0, NULL, NULL, 0, "2026-01-01T00:00:00Z"};
    pt_json *report = pt_diagnose(&job);
    const pt_json *facts = pt_json_get(report, "job");
    PT_FUZZ_CHECK(pt_json_get_number(facts, "workers_analyzed", -1) == 1 &&
                      pt_json_get_number(facts, "workers_failed", -1) == 1,
                  "an invalid summary must be refused, the healthy worker analysed");
    pt_json_free(report);
    pt_summary_free(workers[1]);
}

void pt_fuzz_exercise_summary(pt_worker_summary *s, bool diagnose)
{
    pt_worker_summary *copy = round_trip(s);
    if (!copy) {
        if (diagnose)
            diagnose_invalid(s);
        pt_summary_free(s);
        return;
    }
    if (s->world_size <= FUZZ_MAX_WORLD && s->rank <= FUZZ_MAX_WORLD) {
        pt_buf text = PT_BUF_INIT;
        pt_json *as_json = pt_summary_to_json(s);
        pt_json_write(&text, as_json, -1);
        pt_json_free(as_json);
        pt_buf_free(&text);
        if (diagnose)
            diagnose_valid(s, copy);
    }
    pt_summary_free(copy);
    pt_summary_free(s);
}
