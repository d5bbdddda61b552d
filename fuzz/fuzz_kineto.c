/* fuzz_kineto.c -- the Kineto (Chrome-trace JSON) reader, end to end.
 *
 * The input is a trace file's bytes: plain JSON, or gzip/zstd, recognised by magic as
 * pt_trace_read does for any file. It is summarized as `perftracker summarize` would and
 * the summary goes on through its encoding and, for one input in 16, the diagnosis
 * (fuzz_common.c). When the bytes hold an event
 * boundary ("},{") in their second half, that offset is also read as a span, the way a
 * large trace is read in parallel, where the reader starts in the middle of the list. */
#include "fuzz_common.h"

#include "summarize/summarize.h"
#include "trace/reader.h"

#include <string.h>

static int drop_event(void *ctx, const pt_event *ev)
{
    (void)ctx;
    /* Every event a reader hands out is usable as is: a name without a NUL (which would
     * cut it wherever it becomes a C string), a duration >= 0. */
    PT_FUZZ_CHECK(ev->dur_ns >= 0, "an event with a negative duration reached the sink");
    PT_FUZZ_CHECK(ev->name != NULL || ev->name_len == 0, "an event without a name pointer");
    PT_FUZZ_CHECK(!ev->name || !memchr(ev->name, '\0', ev->name_len), "a name with a NUL in it reached the sink");
    return 0;
}

static void read_span_at_boundary(const char *path, const uint8_t *data, size_t size)
{
    for (size_t i = size / 2; i + 2 < size; i++) {
        if (data[i] != '}' || data[i + 1] != ',' || data[i + 2] != '{')
            continue;
        pt_trace_sink sink = {NULL, drop_event, NULL};
        pt_trace_meta meta;
        pt_trace_meta_init(&meta);
        pt_error err = {{0}};
        uint64_t stopped_at = 0;
        uint64_t stop = size - i > 64 ? i + 2 + (size - i) / 2 : 0;
        if (pt_kineto_read_span(path, i + 2, stop, false, &sink, &meta, NULL, &stopped_at, &err) != 0)
            PT_FUZZ_CHECK(err.message[0], "a span was refused without a message");
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = pt_fuzz_file(data, size);
    pt_worker_summary *s = pt_fuzz_summarize(path, "node0_3_4711.json");
    if (s)
        pt_fuzz_exercise_summary(s, pt_fuzz_one_in(data, size, PT_FUZZ_DIAGNOSE_ONE_IN));
    read_span_at_boundary(path, data, size);
    return 0;
}
