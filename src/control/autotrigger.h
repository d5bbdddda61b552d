/* autotrigger.h -- the paper's automatic trigger, as a pure state machine over step times.
 *
 * The agent samples the collector's step counter (steps_done, last_step_end_ns) every
 * poll and feeds it here. A slowdown is the mean of the last 50 steps being more than 5%
 * above the recent best (the lowest 50-step block mean of the last 20 blocks, i.e. ~1000
 * steps) -- and beyond three times the job's own block-to-block noise, because the best
 * of 20 noisy blocks sits below their typical value; a hang is no step for 5x the mean step time (and at least a floor, so GC pauses
 * and checkpoints of fast jobs are not hangs). Profiled steps are left out: profiling
 * slows a step, and that must not look like a regression. No clock and no I/O here, so
 * tests drive it with made-up times. */
#ifndef PT_CONTROL_AUTOTRIGGER_H
#define PT_CONTROL_AUTOTRIGGER_H

#include <stdbool.h>
#include <stdint.h>

#define PT_STEP_WINDOW 50   /* steps in the rolling mean */
#define PT_STEP_HISTORY 20  /* block means kept for "recent best" */
#define PT_STEP_MIN_BLOCKS 3 /* history needed before judging (150 steps) */

typedef struct pt_step_tracker {
    int64_t last_steps;      /* steps_done at the previous sample, -1 before the first */
    int64_t last_end_ns;
    int64_t ring[PT_STEP_WINDOW];
    int count, pos;
    int64_t ring_sum;
    int64_t block_sum;       /* the block being filled */
    int block_fill;
    int64_t blocks[PT_STEP_HISTORY];
    int block_count, block_pos;
} pt_step_tracker;

void pt_step_tracker_init(pt_step_tracker *t);
/* A sample of the collector's counters. counted=false: these steps were profiled (or
 * otherwise unusual) and only move the baseline forward. */
void pt_step_tracker_observe(pt_step_tracker *t, int64_t steps_done, int64_t last_step_end_ns, bool counted);
/* Mean of the last PT_STEP_WINDOW counted steps; 0 until that many were seen. */
int64_t pt_step_tracker_recent_mean(const pt_step_tracker *t);
/* The lowest completed block mean in the history; 0 while there is none. */
int64_t pt_step_tracker_best_mean(const pt_step_tracker *t);
/* True when the recent mean exceeds the best by more than threshold (0.05 = 5%) and by
 * more than three times the job's own block-to-block noise, once PT_STEP_MIN_BLOCKS blocks
 * of history exist. */
bool pt_step_tracker_slowdown(const pt_step_tracker *t, double threshold);
/* Robust relative spread of the block means in the history: 1.4826 x MAD / median (the
 * standard deviation for normal noise); 0 with fewer than two blocks. */
double pt_step_tracker_noise(const pt_step_tracker *t);
/* Forget the history (after a round, so the same regression is not reported again at once
 * and the next best is measured afresh). */
void pt_step_tracker_reset(pt_step_tracker *t);

/* How long the worker has been stuck in its current step, or 0 when that is not (yet) a
 * hang: no step for max(factor x mean_step_ns, floor_ns) since the last step ended. */
int64_t pt_hang_stalled_ns(int64_t now_ns, int64_t steps_done, int64_t last_step_end_ns,
                           int64_t mean_step_ns, double factor, int64_t floor_ns);

#endif
