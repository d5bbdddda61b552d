/* test_parser_edges.c -- the parser behaviours issue 6 fixed, pinned as plain assertions
 * (the fuzz replays pin the crashers; these pin the intended results).
 *
 *  - a counter written with an exponent ("1.5e2") reads as 150, not 0.00015;
 *  - a ts in microseconds too large for int64 nanoseconds, a ts that is a string, a NaN
 *    dur: only that event is dropped (counted in a warning), the file is read;
 *  - a number at the very end of an unterminated buffer parses without reading past it
 *    (the buffer here is exactly the digits, so ASan sees any overread);
 *  - a summary claiming a rank or world size above PT_MAX_WORLD_SIZE is refused, and a
 *    trace claiming one keeps its events with the claim ignored and a warning. */
#define _GNU_SOURCE
#include "check.h"
#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "trace/reader.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct seen {
    int events, counters;
    double counter_value;
    char warning[512];
} seen;

static int on_event(void *ctx, const pt_event *ev)
{
    seen *s = ctx;
    s->events++;
    if (ev->kind == PT_EVENT_COUNTER)
        s->counters++, s->counter_value = ev->value;
    return 0;
}

static void on_warning(void *ctx, const char *message)
{
    seen *s = ctx;
    snprintf(s->warning, sizeof s->warning, "%s", message);
}

static char *temp_file(const char *text)
{
    char *path = strdup("/tmp/pt-parser-edges-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        abort();
    close(fd);
    return path;
}

static int read_text(const char *text, seen *s, pt_trace_meta *meta, pt_error *err)
{
    char *path = temp_file(text);
    memset(s, 0, sizeof *s);
    pt_trace_sink sink = {s, on_event, on_warning};
    pt_trace_meta_init(meta);
    int rc = pt_trace_read(path, &sink, meta, NULL, err);
    unlink(path);
    free(path);
    return rc;
}

static void counter_with_exponent(void)
{
    seen s;
    pt_trace_meta meta;
    pt_error err = {{0}};
    int rc = read_text("{\"traceEvents\":[{\"ph\":\"C\",\"name\":\"gpu0.sm_active\",\"ts\":1,\"args\":{\"value\":1.5e2}}]}",
                       &s, &meta, &err);
    CHECK(rc == 0, "read failed: %s", err.message);
    CHECK(s.counters == 1 && s.counter_value == 150.0, "counter 1.5e2 read as %g (%d counters)", s.counter_value,
          s.counters);
}

static void odd_times_drop_one_event(void)
{
    static const char *const odd[] = {"\"ts\":16941282014295447,\"dur\":1", "\"ts\":\"abc\",\"dur\":1",
                                      "\"ts\":1,\"dur\":NaN", "\"ts\":1e400,\"dur\":1",
                                      "\"ts\":{\"a\":[1]},\"dur\":1", "\"ts\":1,\"dur\":-1e30"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"bad\",%s},"
                 "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"good\",\"ts\":5,\"dur\":2}]}",
                 odd[i]);
        seen s;
        pt_trace_meta meta;
        pt_error err = {{0}};
        int rc = read_text(text, &s, &meta, &err);
        CHECK(rc == 0, "%s: the file was refused: %s", odd[i], err.message);
        CHECK(s.events == 1, "%s: %d events delivered, expected the good one only", odd[i], s.events);
        CHECK(strstr(s.warning, "1 events lacked a usable ts, dur or name") != NULL, "%s: warning '%s'", odd[i],
              s.warning);
    }
}

static void number_at_end_of_buffer(void)
{
    char *digits = malloc(4); /* exactly "1700", no terminator: ASan catches an overread */
    memcpy(digits, "1700", 4);
    pt_error err = {{0}};
    pt_json *v = pt_json_parse(digits, 4, 8, &err);
    CHECK(v && v->is_integer && v->integer == 1700, "\"1700\" without a terminator parsed wrong");
    pt_json_free(v);
    free(digits);
}

static void impossible_ranks(void)
{
    /* A trace: its events stay, its claims go, with warnings. */
    char *path = temp_file("{\"distributedInfo\":{\"rank\":999999999,\"world_size\":999999999},\"traceEvents\":["
                           "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op\",\"ts\":1,\"dur\":5}]}");
    pt_error err = {{0}};
    pt_worker_summary *s = pt_summarize_file(path, NULL, &err);
    unlink(path);
    free(path);
    CHECK(s != NULL, "a trace claiming rank 999999999 was refused: %s", err.message);
    if (s) {
        CHECK(s->rank == -1 && s->world_size == -1, "claims kept: rank %d, world size %d", s->rank, s->world_size);
        int warned = 0;
        for (size_t i = 0; i < s->warning_count; i++)
            warned += strstr(s->warnings[i], "999999999 ignored") != NULL;
        CHECK(warned == 2, "%d warnings about the ignored claims, expected 2", warned);
        /* The same claim in a summary (from the network) is refused. */
        s->rank = PT_MAX_WORLD_SIZE;
        pt_buf b = PT_BUF_INIT;
        pt_summary_encode(s, &b);
        pt_worker_summary *back = pt_summary_decode(b.data, b.len, &err);
        CHECK(back == NULL && strstr(err.message, "rank 1048576 is outside"), "a summary with rank 2^20 decoded: %s",
              err.message);
        pt_summary_free(back);
        pt_buf_free(&b);
        pt_summary_free(s);
    }
}

int main(void)
{
    counter_with_exponent();
    odd_times_drop_one_event();
    number_at_end_of_buffer();
    impossible_ranks();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("PASS: parser edge cases\n");
    return 0;
}
