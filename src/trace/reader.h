/* reader.h -- one interface for every trace format.
 *
 * pt_trace_read() sniffs the (decompressed) first bytes of a file and hands it to the
 * reader that recognises them: Kineto Chrome-trace JSON, or perftracker's native raw
 * trace. A reader streams events into a sink and fills the trace's metadata; none of
 * them holds the whole file. Adding a format (nsys, say) is one more entry in the table
 * in reader.c. */
#ifndef PT_TRACE_READER_H
#define PT_TRACE_READER_H

#include "trace/event.h"
#include "util/common.h"
#include "util/input.h"

#include <stdbool.h>

/* Called now and then with the bytes of the underlying file consumed so far. */
typedef void (*pt_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct pt_read_options {
    pt_progress_fn progress;
    void *progress_ctx;
    size_t max_event_bytes;  /* larger events are skipped with a warning; 0 = default */
} pt_read_options;

typedef struct pt_trace_reader {
    const char *name;
    /* True when the first bytes of the decompressed stream look like this format. */
    bool (*sniff)(const unsigned char *head, size_t n);
    int (*read)(pt_input *in, pt_trace_sink *sink, pt_trace_meta *meta,
                const pt_read_options *opts, pt_error *err);
} pt_trace_reader;

/* Returns 0 on success. On failure err says what is wrong, in one sentence without the
 * file name. Events already delivered to the sink stay delivered; callers that must not
 * half-read a file (a worker killed mid-write) discard the sink's state on failure. */
int pt_trace_read(const char *path, pt_trace_sink *sink, pt_trace_meta *meta,
                  const pt_read_options *opts, pt_error *err);

extern const pt_trace_reader pt_kineto_reader;
extern const pt_trace_reader pt_native_reader;

#endif
