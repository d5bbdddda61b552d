/* native_writer_late_facts.c -- regression test for the raw-trace writer
 * (src/trace/native_writer.c), found by the reliability suite and fixed in cbec89b.
 *
 * native_format.h says META sections "may repeat; the last value of a key wins (facts
 * known only at the end come last)". A fact written while events were staged was
 * corrupted: emit_facts() built the fact in w->section, then flush_block() encoded the
 * staged events into the same buffer before the fact went out, and the reader refused
 * the whole trace ("bad META entry"): a worker whose hang step is known late would have
 * lost its trace. The test writes 3 events, then a fact, closes, and reads the file back
 * with the fact applied. */
#define _GNU_SOURCE
#include "trace/native_writer.h"
#include "trace/reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int count_event(void *ctx, const pt_event *ev)
{
    (void)ev;
    ++*(int *)ctx;
    return 0;
}

int main(void)
{
    char path[] = "/tmp/pt-late-facts-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 2;
    close(fd);
    pt_error err = {{0}};
    pt_native_writer *w = pt_native_writer_open(path, &err);
    if (!w) {
        fprintf(stderr, "open: %s\n", err.message);
        return 2;
    }
    uint32_t name = pt_native_writer_string(w, "aten::mm", 8);
    for (int i = 0; i < 3; i++) {
        pt_event ev;
        pt_event_init(&ev, PT_EVENT_CPU);
        ev.ts_ns = 1000 * i, ev.dur_ns = 500;
        pt_native_writer_event(w, &ev, name, PT_NATIVE_NO_STRING);
    }
    pt_native_writer_fact_int(w, "hang_step", 41); /* known only at the end */
    if (pt_native_writer_close(w, &err) != 0) {
        fprintf(stderr, "close: %s\n", err.message);
        return 2;
    }
    int events = 0;
    pt_trace_sink sink = {&events, count_event, NULL};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    int rc = pt_trace_read(path, &sink, &meta, NULL, &err);
    unlink(path);
    if (rc != 0 || events != 3 || meta.hang_step != 41) {
        fprintf(stderr, "FAIL: a fact written after events: read rc %d (%s), %d events, hang_step %lld\n", rc,
                err.message, events, (long long)meta.hang_step);
        return 1;
    }
    printf("PASS: a fact written after events reads back\n");
    return 0;
}
