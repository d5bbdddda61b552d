/* windows.h -- do the workers' profiled windows hold the same iterations?
 *
 * The cross-worker comparison assumes they do: a straggler is a worker slower than its
 * peers at the same work. The control plane arms every rank at the same step number, and
 * the collectors number an iteration alike on every rank (util/step_number.h), so a round
 * lines up by construction; traces from elsewhere (torch.profiler schedules started at
 * different iterations, a rank armed late) may not. Two checks, each a warning naming the
 * ranks and the offset:
 *
 * - step numbers: workers whose first profiled step differs from the one most workers
 *   began with (any hosts: the numbers are the job's own count of iterations);
 * - the clock, between workers of one host (one clock): a window that begins and ends
 *   more than one step away from the window of the host's median worker (by start).
 *   Only beyond a step: within one, windows of the same iterations can differ by where
 *   each rank's step boundary falls (a step() before a collective is reached early by a
 *   fast rank and late by a slow one, up to a whole step apart), so a smaller offset is
 *   no evidence; its start and its end must both be off, the same way, so a window cut
 *   short (the job ended inside it) is not taken for a shifted one.
 *
 * Both read only the summaries; the cost is O(n log n) in workers. */
#ifndef PT_DIAGNOSE_WINDOWS_H
#define PT_DIAGNOSE_WINDOWS_H

#include "summarize/summary.h"
#include "util/json.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pt_window_shift {
    size_t worker;        /* index into the workers given */
    size_t reference;     /* the worker it is compared with */
    int64_t start_ns;     /* its window's start minus the reference's (clock check; 0 otherwise) */
    int64_t end_ns;       /* its window's end minus the reference's */
    int64_t step_ns;      /* the longer of the two workers' median steps (clock check) */
    int64_t first_step;   /* its first profiled step number, and the reference's */
    int64_t reference_first_step;
    int64_t last_step, reference_last_step;
} pt_window_shift;

/* Workers whose first profiled step number differs from the most common one (ties: the
 * lowest number); *count of them, in worker order. NULL when none. */
pt_window_shift *pt_window_step_shifts(pt_worker_summary *const *workers, size_t n, size_t *count);
/* Workers whose window begins and ends more than a step from their host's median
 * worker's (the same host's clock); *count of them. NULL when none. */
pt_window_shift *pt_window_clock_shifts(pt_worker_summary *const *workers, size_t n, size_t *count);
/* Both checks' warnings, pushed onto warnings (a JSON array). */
void pt_window_alignment_warnings(pt_worker_summary *const *workers, size_t n, pt_json *warnings);

#endif
