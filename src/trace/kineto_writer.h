/* kineto_writer.h -- stream pt_event values out as PyTorch-profiler (Kineto) Chrome-trace
 * JSON, plain or gzip.
 *
 * The inverse of the Kineto reader (trace/kineto.c): what this writes, the reader reads
 * back with every field the Kineto format can carry intact (times exactly, as integer
 * nanoseconds), and Python's json module, chrome://tracing and Perfetto load it. Used
 * by the synthetic job generator (src/synth) and by `perftracker export` (native raw
 * traces to Chrome/Perfetto JSON).
 *
 * How each pt_event kind is written (the Kineto conventions):
 *   GPU_KERNEL   cat "kernel", pid = device, tid = stream; args device, stream, grid,
 *                block, and for collectives "Collective name", "In msg nelems",
 *                "Out msg nelems", "Group size", "dtype" and, when known, "Process Group
 *                Name", "Process Group Ranks", "Global rank start/stride", "Seq"
 *   GPU_MEMCPY   cat "gpu_memcpy" (name is the kind), args device, stream, bytes
 *   GPU_MEMSET   cat "gpu_memset", same args
 *   RUNTIME      cat "cuda_runtime", or "cuda_driver" for cu* driver calls
 *   CPU          by ev.cpu_kind: "user_annotation", "python_function" or "cpu_op";
 *                when unknown, "python_function" for Python frames ("file.py(12): f",
 *                "<built-in ...>"), else "cpu_op"; a collective's op (record_param_comms)
 *                with the kernels' collective args and "Rank"
 *   STEP         cat "user_annotation", name "ProfilerStep#<step>"
 *   COUNTER      ph "C", args {"value": v}
 *   metadata     ph "M" (process and thread names), given by pt_kineto_writer_metadata
 *   other        flows, instants and the like, as given (pt_kineto_writer_other)
 * CPU-side events carry the process id given by pt_kineto_writer_meta, so call it before
 * the first event; the top-level members (distributedInfo, deviceProperties,
 * baseTimeNanoseconds, host) are written at close, from the last meta given.
 *
 * What the format cannot carry, and the reader therefore does not give back: CPU call
 * depth (the reader rebuilds nesting from times), a counter value's digits beyond 1e-6,
 * and the collector-only meta facts (hang_step, dropped_events, hw_sample_period_us). */
#ifndef PT_TRACE_KINETO_WRITER_H
#define PT_TRACE_KINETO_WRITER_H

#include "trace/event.h"
#include "util/common.h"

#include <stdbool.h>

typedef struct pt_kineto_writer pt_kineto_writer;

/* Creates path: written under a temporary name in its checked folder and renamed over
 * path at close (util/outdir.h), so no symlink is followed; a device such as /dev/null is
 * written directly. gzip: write a .gz stream (zlib level 1: this is about
 * speed, not size). path NULL: write nothing and only count the bytes, to size a trace
 * before writing it. Returns NULL with err set on failure. */
pt_kineto_writer *pt_kineto_writer_open(const char *path, bool gzip, pt_error *err);
void pt_kineto_writer_meta(pt_kineto_writer *w, const pt_trace_meta *meta);
/* 0, or -1 once any write failed (the error is kept for close). */
int pt_kineto_writer_event(pt_kineto_writer *w, const pt_event *ev);
/* A metadata record (a process or thread name), written where it comes in the stream. */
int pt_kineto_writer_metadata(pt_kineto_writer *w, const pt_trace_metadata *md);
/* An event the model does not carry (a flow, an instant: pt_trace_sink.on_other), given
 * as its JSON object's text and written as it is (parsed and written again); text that
 * is not a JSON object is dropped. */
int pt_kineto_writer_other(pt_kineto_writer *w, const char *json, size_t len);
/* A sink that writes every event and metadata record it receives, so a reader can stream
 * into the writer. */
pt_trace_sink pt_kineto_writer_sink(pt_kineto_writer *w);
/* JSON bytes produced so far (before compression). */
uint64_t pt_kineto_writer_bytes(const pt_kineto_writer *w);
/* Finishes the document and frees w. 0, or -1 with err set; on failure the temporary
 * file is removed and path is left as it was, so a half-written trace never looks like a short valid one. */
int pt_kineto_writer_close(pt_kineto_writer *w, pt_error *err);
/* Abandons the file: removes it and frees w. */
void pt_kineto_writer_discard(pt_kineto_writer *w);

#endif
