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
    int threads;             /* > 1: a large plain trace may be read in parallel spans */
    size_t memory_budget;    /* for the summarizer behind the sink: the bytes reading and
                                summarizing one file may use (0 = no limit); a file that
                                needs more is refused (pt_summarize_file) */
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

/* How the error of a file that is JSON but no trace at all begins (a label.json or a
 * config beside the traces, as opposed to a trace that is damaged): whoever reads a
 * folder of worker files skips it with a note instead of counting a failed worker. */
#define PT_JSON_NOT_A_TRACE "JSON but not a trace"
bool pt_trace_error_is_foreign_json(const pt_error *err);

extern const pt_trace_reader pt_kineto_reader;

/* Parallel reading of one large uncompressed Kineto file, in spans of whole events.
 * pt_kineto_split finds up to `parts` span starts: starts[0] = 0, and each later one the
 * offset of a '{' that looks like an event start (after "},"). It returns how many it
 * found (1 = do not split). Candidates are only likely event starts; the spans verify
 * each other: span i must end exactly where span i+1 starts (see pt_kineto_read_span),
 * otherwise the caller reads the file sequentially. */
size_t pt_kineto_split(const char *path, size_t parts, uint64_t *starts, bool *bare_list, pt_error *err);
/* Reads the span [start, stop): start == 0 parses from the top of the file; otherwise
 * start is an event start inside the event list. Reading stops at the first event start
 * at or after stop (stop == 0: read to the end), whose offset goes to *stopped_at
 * (UINT64_MAX when the event list ended first). */
int pt_kineto_read_span(const char *path, uint64_t start, uint64_t stop, bool bare_list, pt_trace_sink *sink,
                        pt_trace_meta *meta, const pt_read_options *opts, uint64_t *stopped_at, pt_error *err);
extern const pt_trace_reader pt_native_reader;

#endif
