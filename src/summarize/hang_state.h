/* hang_state.h -- a hang report's snapshot of one worker, as text, into its summary.
 *
 * The collector writes two texts when a hang report asks where a worker is (formats in
 * src/control/agent.h and src/collect/collectives.h; docs/control-plane.md, "Hang
 * reports"): every Python thread's stack, and its collectives per process group. They
 * cross the network, so they are read as hostile: one record a line, every field checked
 * and bounded as pt_summary_check would (summary.h's PT_SUMMARY_MAX_* limits), and the
 * first bad line refuses the whole text with a sentence naming it. */
#ifndef PT_SUMMARIZE_HANG_STATE_H
#define PT_SUMMARIZE_HANG_STATE_H

#include "summarize/summary.h"

/* Fills s->threads (and hang_stack, when s has none, from the training thread's line)
 * and s->groups from the two texts (either may be NULL or ""). 0, or -1 with err set and
 * s's threads and groups left empty. */
int pt_hang_state_parse(pt_worker_summary *s, const char *threads, const char *collectives, pt_error *err);

/* A rank list in the run notation ("0-7", "0-56/8", "3,5", "-" for unknown) into runs.
 * 0, or -1 with err set. *runs is malloc'ed (NULL when there is none). */
int pt_rank_runs_parse(const char *text, size_t len, pt_rank_run **runs, size_t *count, pt_error *err);

#endif
