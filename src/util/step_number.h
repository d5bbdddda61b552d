/* step_number.h -- what a step number means once it leaves its process.
 *
 * The control plane arms every rank at the same step number, so a number must name the
 * same training iteration on every rank. Under `perftracker run` the steps come from the
 * best source that has shown itself so far (python/perftracker/autostep.py): nothing yet,
 * the clock, a learned sequence, optimizer.step, the script's own step() calls. Each
 * source counts its own steps from the process's start, from events every rank sees alike
 * (the n-th optimizer step, the n-th cycle of collectives, the n-th S-second period of
 * the wall clock), never from the moment this rank happened to switch to it: ranks start
 * seconds apart and switch at their own moments, so a count carried over from the
 * previous source would differ from rank to rank.
 *
 * A step number is therefore a pair, (source, count), written as one integer
 *     number = source * PT_STEP_SOURCE_SPAN + count
 * so that numbers compare in the order sources replace each other: a rank that has
 * switched to a better source is ahead of every rank still on a worse one, the
 * coordinator's "highest step + --wait" arms on the best source any rank has, and a
 * window waiting for a step of a worse source opens on the better one (see
 * pt_step_retarget). A process without `perftracker run` counts step() calls in source 0,
 * so its numbers are its plain counts. The span is a decimal power so that a raw number
 * in a log still reads (3000000000012: optimizer step 12); people are shown the count
 * (pt_step_count). Every number stays below 2^53, the protocol's bound. */
#ifndef PT_UTIL_STEP_NUMBER_H
#define PT_UTIL_STEP_NUMBER_H

#include <stdint.h>

#define PT_STEP_SOURCE_SPAN INT64_C(1000000000000)
#define PT_STEP_NUMBER_MAX (INT64_C(1) << 53)
/* Sources, in the order they replace each other (autostep.py's _RANKS). */
enum { PT_STEP_SOURCE_NONE, PT_STEP_SOURCE_CLOCK, PT_STEP_SOURCE_LEARNED, PT_STEP_SOURCE_OPTIMIZER,
       PT_STEP_SOURCE_EXPLICIT, PT_STEP_SOURCE_COUNT };

/* The count within its source, as people read it (-1 and other negatives: unknown). */
static inline int64_t pt_step_count(int64_t number)
{
    return number >= 0 ? number % PT_STEP_SOURCE_SPAN : number;
}

static inline int pt_step_source(int64_t number)
{
    return number >= 0 ? (int)(number / PT_STEP_SOURCE_SPAN) : PT_STEP_SOURCE_NONE;
}

/* Where a window armed to open at step `start` opens, seen at the step numbered `now`
 * whose previous step was `previous`: when the source changed in between to a better one
 * (the rank was still on the clock, or had no step at all, when the round was armed), the
 * steps the window still waited for are waited for in the new source, this step counted
 * as the first of them. Every rank switches at the same event (the same optimizer step,
 * the same collective), where its previous number is the same too, so they all move the
 * window to the same step. Returns start itself when nothing changed. */
static inline int64_t pt_step_retarget(int64_t start, int64_t previous, int64_t now)
{
    if (pt_step_source(now) <= pt_step_source(start) || pt_step_source(previous) != pt_step_source(start))
        return start;
    int64_t left = start - previous; /* steps still to go in the old source, this one included */
    return left > 1 ? now + (left - 1) : now;
}

/* pt_step_retarget as another process follows it (the agent, the coordinator), seeing the
 * worker's step number go from `before` to `after` in its reports rather than step by
 * step: a source other than the clock counts its first step 1, so where the window went
 * is known exactly when `before` was the last step of the old source; a rank armed at a
 * worse source than it already had opens its window at its next step, about `after`. */
static inline int64_t pt_step_follow(int64_t start, int64_t before, int64_t after)
{
    int source = pt_step_source(after);
    if (source <= pt_step_source(start))
        return start;
    if (pt_step_source(before) != pt_step_source(start))
        return after;
    int64_t first = source == PT_STEP_SOURCE_CLOCK ? after : source * PT_STEP_SOURCE_SPAN + 1;
    return pt_step_retarget(start, before, first < after ? first : after);
}

#endif
