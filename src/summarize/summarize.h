/* summarize.h -- the per-worker (map) step: events in, pt_worker_summary out.
 *
 * A pt_summarizer is a trace sink. It keeps a compact record per event (24-32 bytes,
 * names interned) instead of the JSON (400+ bytes), then, once the stream ends, finds
 * the profiled window, layers the activity classes by priority and reduces everything to
 * per-function statistics. */
#ifndef PT_SUMMARIZE_SUMMARIZE_H
#define PT_SUMMARIZE_SUMMARIZE_H

#include "summarize/summary.h"
#include "trace/reader.h"

typedef struct pt_summarizer pt_summarizer;

pt_summarizer *pt_summarizer_new(void);
/* The sink that feeds this summarizer (valid while it lives). */
pt_trace_sink pt_summarizer_sink(pt_summarizer *s);
/* Reduces what was fed. file_name names the worker (the seed's convention). Returns
 * NULL with err set when the trace holds nothing to analyse. */
pt_worker_summary *pt_summarizer_finish(pt_summarizer *s, const pt_trace_meta *meta,
                                        const char *file_name, pt_error *err);
void pt_summarizer_free(pt_summarizer *s);

/* Reads and summarizes one trace file (any format pt_trace_read knows). */
pt_worker_summary *pt_summarize_file(const char *path, const pt_read_options *opts, pt_error *err);

/* What a worker's file name says: the vendor's "<host>_<local_rank>_<pid>.json" and
 * the common "...rank3..." / "worker3..." forms. Absent parts stay -1 / "". */
typedef struct pt_file_name_facts {
    char host[PT_NAME_MAX];
    int32_t local_rank;
    int64_t pid;
    int32_t rank;
} pt_file_name_facts;

void pt_parse_worker_file_name(const char *file_name, pt_file_name_facts *facts);

/* A worker's summary from either a summary file (read as is) or a trace (summarized). */
pt_worker_summary *pt_load_worker(const char *path, const pt_read_options *opts, pt_error *err);

#endif
