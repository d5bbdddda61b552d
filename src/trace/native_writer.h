/* native_writer.h -- writes perftracker's raw trace (layout in native_format.h and
 * docs/raw-trace-format.md).
 *
 * It runs inside the training process (the collector's writer thread), so unlike the
 * analysis code it never exits on a failed allocation: every call returns an error the
 * collector can report, and its memory is fixed at open (one block of staged events,
 * one section buffer, the zstd context: a few MB whatever the trace size).
 *
 * The caller owns names: it appends each distinct string once with
 * pt_native_writer_string and refers to it by the returned id, so the collector can hand
 * over the ids it already uses instead of re-hashing names. Events go in grouped by
 * (kind, tid, device) for the best compression, but any order is valid.
 *
 * The trace is written to "<path>.partial" and renamed to path by a successful close, so
 * a half-written trace is never found under the final name. */
#ifndef PT_TRACE_NATIVE_WRITER_H
#define PT_TRACE_NATIVE_WRITER_H

#include "trace/event.h"
#include "util/common.h"

#define PT_NATIVE_NO_STRING UINT32_MAX

typedef struct pt_native_writer pt_native_writer;

/* NULL with err set when the file cannot be created or memory is short. */
pt_native_writer *pt_native_writer_open(const char *path, pt_error *err);
/* Writes every field of meta (again, if called twice: the last value wins). */
int pt_native_writer_meta(pt_native_writer *w, const pt_trace_meta *meta);
/* A free-form fact ("warning" facts reach the reader's sink as warnings). */
int pt_native_writer_fact(pt_native_writer *w, const char *key, const char *value);
int pt_native_writer_fact_int(pt_native_writer *w, const char *key, int64_t value);
/* Appends a string; returns its id, or PT_NATIVE_NO_STRING after an error. */
uint32_t pt_native_writer_string(pt_native_writer *w, const char *s, size_t n);
/* ev->name is ignored: name_id gives it. coll_name_id is the collective's name or
 * PT_NATIVE_NO_STRING. */
int pt_native_writer_event(pt_native_writer *w, const pt_event *ev, uint32_t name_id, uint32_t coll_name_id);
/* Compressed bytes written to the file so far. */
uint64_t pt_native_writer_bytes(const pt_native_writer *w);
/* Finishes the file, renames it into place and frees w. 0, or -1 with err set (the
 * partial file is then removed). */
int pt_native_writer_close(pt_native_writer *w, pt_error *err);
/* Abandons the file: removes it and frees w. */
void pt_native_writer_discard(pt_native_writer *w);

#endif
