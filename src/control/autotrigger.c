/* autotrigger.c -- rolling step statistics for the automatic trigger.
 *
 * O(1) per step and ~600 bytes per worker: a ring of the last 50 step times with a running
 * sum, and a ring of 20 block means. Several steps between two samples (fast jobs, slow
 * polls) are spread evenly over the elapsed time, which keeps the 50-step mean exact. */
#include "control/autotrigger.h"
#include "util/stats.h"

#include <math.h>
#include <string.h>

void pt_step_tracker_init(pt_step_tracker *t)
{
    memset(t, 0, sizeof *t);
    t->last_steps = -1;
}

void pt_step_tracker_reset(pt_step_tracker *t)
{
    int64_t steps = t->last_steps, end = t->last_end_ns;
    pt_step_tracker_init(t);
    t->last_steps = steps, t->last_end_ns = end;
}

static void push_step(pt_step_tracker *t, int64_t dur_ns)
{
    if (t->count == PT_STEP_WINDOW)
        t->ring_sum -= t->ring[t->pos];
    else
        t->count++;
    t->ring[t->pos] = dur_ns;
    t->ring_sum += dur_ns;
    t->pos = (t->pos + 1) % PT_STEP_WINDOW;

    t->block_sum += dur_ns;
    if (++t->block_fill == PT_STEP_WINDOW) {
        t->blocks[t->block_pos] = t->block_sum / PT_STEP_WINDOW;
        t->block_pos = (t->block_pos + 1) % PT_STEP_HISTORY;
        if (t->block_count < PT_STEP_HISTORY)
            t->block_count++;
        t->block_sum = 0;
        t->block_fill = 0;
    }
}

void pt_step_tracker_observe(pt_step_tracker *t, int64_t steps_done, int64_t last_step_end_ns, bool counted)
{
    if (t->last_steps < 0 || steps_done < t->last_steps || last_step_end_ns <= 0) {
        t->last_steps = steps_done; /* first sample, or the counter restarted */
        t->last_end_ns = last_step_end_ns;
        return;
    }
    int64_t new_steps = steps_done - t->last_steps;
    int64_t elapsed = last_step_end_ns - t->last_end_ns;
    if (new_steps <= 0 || elapsed <= 0)
        return;
    if (counted && t->last_end_ns > 0) {
        int64_t per_step = elapsed / new_steps;
        int64_t pushes = new_steps < PT_STEP_WINDOW ? new_steps : PT_STEP_WINDOW;
        for (int64_t i = 0; i < pushes; i++)
            push_step(t, per_step);
    }
    t->last_steps = steps_done;
    t->last_end_ns = last_step_end_ns;
}

int64_t pt_step_tracker_recent_mean(const pt_step_tracker *t)
{
    return t->count == PT_STEP_WINDOW ? t->ring_sum / PT_STEP_WINDOW : 0;
}

int64_t pt_step_tracker_best_mean(const pt_step_tracker *t)
{
    int64_t best = 0;
    for (int i = 0; i < t->block_count; i++)
        if (best == 0 || t->blocks[i] < best)
            best = t->blocks[i];
    return best;
}

double pt_step_tracker_noise(const pt_step_tracker *t)
{
    /* Median and median absolute deviation, so the slow block being judged does not widen
     * the margin it is judged by. */
    double values[PT_STEP_HISTORY], deviations[PT_STEP_HISTORY];
    int n = t->block_count;
    if (n < 2)
        return 0;
    for (int i = 0; i < n; i++)
        values[i] = (double)t->blocks[i];
    double median = pt_median(values, (size_t)n);
    for (int i = 0; i < n; i++)
        deviations[i] = fabs((double)t->blocks[i] - median);
    return median > 0 ? 1.4826 * pt_median(deviations, (size_t)n) / median : 0;
}

bool pt_step_tracker_slowdown(const pt_step_tracker *t, double threshold)
{
    int64_t recent = pt_step_tracker_recent_mean(t), best = pt_step_tracker_best_mean(t);
    if (recent <= 0 || t->block_count < PT_STEP_MIN_BLOCKS)
        return false;
    /* The best is a minimum, so on a noisy job the rolling mean strays 5% above it by
     * chance: the margin is also at least three times the job's block-to-block noise. */
    double margin = fmax(threshold, 3.0 * pt_step_tracker_noise(t));
    return (double)recent > (double)best * (1.0 + margin);
}

int64_t pt_hang_stalled_ns(int64_t now_ns, int64_t steps_done, int64_t last_step_end_ns,
                           int64_t mean_step_ns, double factor, int64_t floor_ns)
{
    if (steps_done <= 0 || last_step_end_ns <= 0 || now_ns <= last_step_end_ns)
        return 0; /* before the first step nothing says how long a step should take */
    int64_t stalled = now_ns - last_step_end_ns;
    int64_t limit = (int64_t)((double)mean_step_ns * factor);
    if (limit < floor_ns)
        limit = floor_ns;
    return stalled > limit ? stalled : 0;
}
