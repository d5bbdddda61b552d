/* test_parser_edges.c -- the parser behaviours issue 6 fixed, pinned as plain assertions
 * (the fuzz replays pin the crashers; these pin the intended results).
 *
 *  - a counter written with an exponent ("1.5e2") reads as 150, not 0.00015;
 *  - a ts in microseconds too large for int64 nanoseconds, a ts that is a string, a NaN
 *    dur: only that event is dropped (counted in a warning), the file is read;
 *  - a number at the very end of an unterminated buffer parses without reading past it
 *    (the buffer here is exactly the digits, so ASan sees any overread);
 *  - a summary claiming a rank or world size above PT_MAX_WORLD_SIZE is refused, and a
 *    trace claiming one keeps its events with the claim ignored and a warning;
 *  - JSON whitespace of any length between a trace's tokens reads as the trace without
 *    it: runs one byte either side of every window a reader once held them in (the
 *    sniffed head, its chunk, the reader's largest buffer), in every top-level place;
 *    and the parallel-span splitter finds an event start across a run longer than its
 *    read window (tests/reliability/json_whitespace.py: the same through analyze). */
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

/* ------------------------------------------------------------ temporary files */

#define MIB ((size_t)1 << 20)
/* The windows a run of whitespace was once bounded by: reader.c's sniffed head and the
 * chunk it reads through whitespace with; kineto.c's largest buffer (MAX_TOP_LEVEL_BYTES,
 * DEFAULT_MAX_EVENT_BYTES) and the splitter's read window (SPLIT_WINDOW). */
#define SNIFF_HEAD 64
#define SNIFF_CHUNK ((size_t)64 << 10)
#define READER_WINDOW (64 * MIB)
#define SPLIT_WINDOW MIB
#define SPACES " \t\r\n" /* every JSON whitespace byte, mixed */

/* A file's pieces: text, or (text NULL) a run of `spaces` whitespace bytes. */
typedef struct piece {
    const char *text;
    size_t spaces;
} piece;

static void write_run(int fd, size_t n)
{
    static char run[MIB];
    if (!run[0])
        for (size_t i = 0; i < sizeof run; i++)
            run[i] = SPACES[i % 4];
    for (size_t done = 0; done < n;) {
        size_t take = n - done < sizeof run ? n - done : sizeof run;
        if (write(fd, run, take) != (ssize_t)take)
            abort();
        done += take;
    }
}

/* Writes the pieces to a new temporary file; *offsets (when given) gets where each piece
 * starts. */
static char *write_pieces(const piece *pieces, size_t n, uint64_t *offsets)
{
    char *path = strdup("/tmp/pt-parser-edges-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (offsets)
            offsets[i] = at;
        if (pieces[i].text) {
            size_t len = strlen(pieces[i].text);
            if (write(fd, pieces[i].text, len) != (ssize_t)len)
                abort();
            at += len;
        } else {
            write_run(fd, pieces[i].spaces);
            at += pieces[i].spaces;
        }
    }
    close(fd);
    return path;
}

static char *temp_file(const char *text)
{
    piece whole = {text, 0};
    return write_pieces(&whole, 1, NULL);
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

/* ------------------------------------------------------------ runs of whitespace */

#define EVENT(name, ts) \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" name "\",\"pid\":0,\"tid\":7,\"ts\":" #ts ",\"dur\":5}"

/* The trace cut at each place its top level allows whitespace: a run goes between part
 * i and part i + 1 (place_names[i]). Members before and after the list, so meta shows
 * that both were read. */
static const char *const trace_parts[] = {
    "",
    "{",
    "\"distributedInfo\":{\"rank\":2,\"world_size\":4},\"traceEvents\"",
    ":",
    "[",
    EVENT("k1", 10),
    ",",
    EVENT("k2", 20) "," EVENT("k3", 30),
    "]",
    ",",
    "\"deviceProperties\":[{\"name\":\"GPU-X\"}]",
    "}",
    "",
};
#define PLACES (sizeof trace_parts / sizeof *trace_parts - 1)
static const char *const place_names[PLACES] = {
    "before the object",       "before the first key",  "between a key and its ':'", "between ':' and the list",
    "before the first event",  "between an event and ','", "between ',' and an event", "before the list's ']'",
    "between ']' and ','",     "between ',' and a key", "before the object's '}'",   "after the object",
};

/* The trace with `spaces` whitespace bytes at place (after `lead`, "" or a byte-order
 * mark), read whole: it must read as the trace without them (three events, the members
 * on both sides of the list). */
static void read_with_run(const char *lead, size_t place, size_t spaces)
{
    piece pieces[PLACES + 3];
    size_t n = 0;
    pieces[n++] = (piece){lead, 0};
    for (size_t i = 0; i <= PLACES; i++) {
        pieces[n++] = (piece){trace_parts[i], 0};
        if (i == place)
            pieces[n++] = (piece){NULL, spaces};
    }
    char *path = write_pieces(pieces, n, NULL);
    seen s = {0};
    pt_trace_sink sink = {&s, on_event, on_warning};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err = {{0}};
    int rc = pt_trace_read(path, &sink, &meta, NULL, &err);
    unlink(path);
    free(path);
    CHECK(rc == 0, "%zu bytes of whitespace %s: refused: %s", spaces, place_names[place], err.message);
    CHECK(s.events == 3, "%zu bytes of whitespace %s: %d events, expected 3", spaces, place_names[place], s.events);
    CHECK(meta.rank == 2 && meta.world_size == 4 && meta.device_count == 1 && strcmp(meta.device_name, "GPU-X") == 0,
          "%zu bytes of whitespace %s: rank %d, world size %d, %d devices '%s': a member was lost", spaces,
          place_names[place], meta.rank, meta.world_size, meta.device_count, meta.device_name);
    CHECK(!s.warning[0], "%zu bytes of whitespace %s: warned '%s'", spaces, place_names[place], s.warning);
}

/* Every place, with runs one byte either side of each window. */
static void whitespace_of_any_length(void)
{
    static const size_t small[] = {0, 1, SNIFF_HEAD - 1, SNIFF_HEAD, SNIFF_HEAD + 1, SNIFF_CHUNK - 1, SNIFF_CHUNK,
                                   SNIFF_CHUNK + 1};
    for (size_t place = 0; place < PLACES; place++) {
        for (size_t i = 0; i < sizeof small / sizeof *small; i++)
            read_with_run("", place, small[i]);
        for (size_t spaces = READER_WINDOW - 1; spaces <= READER_WINDOW + 1; spaces++)
            read_with_run("", place, spaces);
    }
    for (size_t i = 0; i < sizeof small / sizeof *small; i++) /* a byte-order mark, then the run */
        read_with_run("\xEF\xBB\xBF", 0, small[i]);
}

/* What is not a trace says so whatever the whitespace before it: only whitespace, or
 * whitespace and then text, is "not a trace" at any length, as it is at one byte. */
static void whitespace_before_no_trace(void)
{
    static const size_t lengths[] = {1, SNIFF_HEAD + 1, SNIFF_CHUNK - 1, SNIFF_CHUNK, SNIFF_CHUNK + 1};
    static const char *const after[] = {"", "hello"};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        for (size_t a = 0; a < 2; a++) {
            piece pieces[] = {{NULL, lengths[i]}, {after[a], 0}};
            char *path = write_pieces(pieces, 2, NULL);
            seen s = {0};
            pt_trace_sink sink = {&s, on_event, on_warning};
            pt_trace_meta meta;
            pt_trace_meta_init(&meta);
            pt_error err = {{0}};
            int rc = pt_trace_read(path, &sink, &meta, NULL, &err);
            unlink(path);
            free(path);
            CHECK(rc != 0 && strstr(err.message, "not a trace"), "%zu bytes of whitespace and '%s': %s", lengths[i],
                  after[a], rc == 0 ? "read as a trace" : err.message);
        }
    }
}

/* Reads the file in the spans pt_kineto_split chose; the events they delivered in all,
 * -1 when a span failed or did not end where the next begins. */
static int read_spans(const char *path, const uint64_t *starts, size_t n)
{
    seen s = {0};
    for (size_t i = 0; i < n; i++) {
        pt_trace_sink sink = {&s, on_event, on_warning};
        pt_trace_meta meta;
        pt_trace_meta_init(&meta);
        pt_error err = {{0}};
        uint64_t stop = i + 1 < n ? starts[i + 1] : 0, stopped_at = 0;
        if (pt_kineto_read_span(path, starts[i], stop, false, &sink, &meta, NULL, &stopped_at, &err) != 0 ||
            stopped_at != (i + 1 < n ? stop : UINT64_MAX))
            return -1;
    }
    return s.events;
}

/* The splitter, at the middle of a file, finds the next event start however far the
 * whitespace in "}" ws "," ws "{" carries it: here the '}' is the split target, and the
 * run after it ends with the '{' (or the '"' after it) one byte either side of the end
 * of the splitter's first read window. */
static void split_across_whitespace(void)
{
    static const char *const head = "{\"traceEvents\":[" EVENT("k0", 0) ",";
    static const char *const e1 = EVENT("k1", 10);
    static const char *const e2 = EVENT("k2", 20);
    for (size_t run = SPLIT_WINDOW - 4; run <= SPLIT_WINDOW - 2; run++) {
        /* Sizes making the '}' of e1 the target of a 2-way split, first_event +
         * (size - first_event) / 2: the bytes from the first event to that '}' (x) are
         * one more than the rest (y). */
        size_t first_event = strlen("{\"traceEvents\":[");
        size_t tail = 32 * MIB, before_e1;
        size_t y = run + 1 + strlen(e2) + tail + 2; /* after e1's '}': run, ",", e2, tail, "]}" */
        size_t x = y + 1;                             /* e0 ",", filler, e1 (its '}' included) */
        before_e1 = x - (strlen(head) - first_event) - strlen(e1);
        piece pieces[] = {{head, 0}, {NULL, before_e1}, {e1, 0}, {NULL, run}, {",", 0}, {e2, 0},
                          {NULL, tail}, {"]}", 0}};
        uint64_t offsets[sizeof pieces / sizeof *pieces];
        char *path = write_pieces(pieces, sizeof pieces / sizeof *pieces, offsets);
        uint64_t starts[2];
        bool bare_list = true;
        pt_error err = {{0}};
        size_t n = pt_kineto_split(path, 2, starts, &bare_list, &err);
        CHECK(n == 2 && starts[1] == offsets[5], "run of %zu after the split target: %zu spans, the second at %llu, "
              "expected e2's '{' at %llu", run, n, (unsigned long long)(n == 2 ? starts[1] : 0),
              (unsigned long long)offsets[5]);
        CHECK(!bare_list, "run of %zu: the object was taken for a bare list", run);
        if (n == 2) {
            int events = read_spans(path, starts, n);
            CHECK(events == 3, "run of %zu: the spans read %d events, expected 3", run, events);
        }
        unlink(path);
        free(path);
    }
}

/* The splitter with a run longer than the reader's largest buffer between two events, and
 * before the object: the spans still meet at event starts and read every event. */
static void spans_around_long_runs(void)
{
    static const char *const events = EVENT("k1", 10) "," EVENT("k2", 20) "," EVENT("k3", 30);
    const piece between[] = {{"{\"traceEvents\":[", 0}, {events, 0}, {",", 0}, {NULL, READER_WINDOW + 1},
                             {events, 0}, {"]}", 0}};
    const piece before[] = {{NULL, READER_WINDOW + 1}, {"{\"traceEvents\":[", 0}, {events, 0}, {",", 0},
                            {events, 0}, {"]}", 0}};
    const piece *files[] = {between, before};
    const char *names[] = {"between events", "before the object"};
    for (size_t f = 0; f < 2; f++) {
        char *path = write_pieces(files[f], 6, NULL);
        uint64_t starts[4];
        bool bare_list;
        pt_error err = {{0}};
        size_t n = pt_kineto_split(path, 4, starts, &bare_list, &err);
        CHECK(n >= 2, "%s: a 64 MiB run left the file unsplit (%zu span)", names[f], n);
        int got = read_spans(path, starts, n);
        CHECK(got == 6, "%s: %zu spans read %d events, expected 6", names[f], n, got);
        unlink(path);
        free(path);
    }
}


int main(void)
{
    counter_with_exponent();
    odd_times_drop_one_event();
    number_at_end_of_buffer();
    impossible_ranks();
    whitespace_of_any_length();
    whitespace_before_no_trace();
    split_across_whitespace();
    spans_around_long_runs();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("PASS: parser edge cases\n");
    return 0;
}
