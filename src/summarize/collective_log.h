/* collective_log.h -- a trace's collectives, per process group, for the hang analysis.
 *
 * Kineto writes a collective's args on the CPU op that issues it (record_param_comms) and,
 * for NCCL, on its kernel: the operation, the element count and dtype, the process
 * group's name and ranks, and (torch 2.3+) its sequence number. A trace cut short by a
 * hang holds what each rank's collectives had reached when it stopped, so the ranks'
 * last calls per group, lined up by number, say who is missing and what does not match
 * (diagnose/hangs.c), the same way a hang report's bookkeeping does. The log keeps one
 * small record per collective event (a trace holds few) and gives each group its last
 * calls in the summary. */
#ifndef PT_SUMMARIZE_COLLECTIVE_LOG_H
#define PT_SUMMARIZE_COLLECTIVE_LOG_H

#include "summarize/summary.h"
#include "trace/event.h"

typedef struct pt_coll_log pt_coll_log;

pt_coll_log *pt_coll_log_new(void);
void pt_coll_log_free(pt_coll_log *log);
/* Keeps ev when it is a collective of a named process group (others are ignored). */
void pt_coll_log_add(pt_coll_log *log, const pt_event *ev);
/* Appends src's records (a trace read in parallel spans). */
void pt_coll_log_merge(pt_coll_log *dst, const pt_coll_log *src);
/* out->groups from the records: per group its last calls, numbered by their Seq (or in
 * order), oldest first; a call still running when the trace ends (it ends with the trace,
 * trace_end, and after the last step, window_end: the trace went on because it did not
 * return) is entered; an NCCL call whose kernel never ran, issued. Rank lists that do
 * not hold out->rank, or reach past its world size, are dropped with a warning. */
void pt_coll_log_finish(const pt_coll_log *log, int64_t trace_end, int64_t window_end, const char *backend,
                        pt_worker_summary *out);

#endif
