/* whatif.h -- the step model: what a step would take if some work were removed.
 *
 * A step is a chain of sync points, the blocking collectives every worker waits in.
 * Between two of them each worker is busy for a while, then waits; the collective ends
 * when the last worker has arrived, plus its own transfer time. A worker also arrives
 * later by what it waits in collectives the other workers do not wait in with it, step
 * after step (its own communication blocking its work: a collective on its compute
 * stream, waited for at once): its own waits. So a segment between two sync points lasts as long as its last
 * worker's work and own waits plus that worker's wait (the transfer and what else
 * nobody's work sets), and the step is the sum of its segments:
 *
 *     T = sum over segments j of  (max_w (busy[w][j] + own[w][j]) + wait[j])
 *
 * A fix removes work (or own waits) from some workers in some segments; the model gives
 * the time saved, everything else unchanged (the waits stay, the last worker of a
 * segment may become another), which is a finding's impact (findings.c). whatif.c
 * explains where the segments come from and how work to remove is placed in them. The
 * busiest worker of a segment (pt_whatif_pacer) is judged by its work alone. */
#ifndef PT_DIAGNOSE_WHATIF_H
#define PT_DIAGNOSE_WHATIF_H

#include "diagnose/analysis.h"

typedef struct pt_whatif pt_whatif;

/* The model of an analysis's workers over their aligned steps (one pseudo-step, the
 * window per step, when steps cannot be compared). Never fails. */
pt_whatif *pt_whatif_new(const pt_analysis *a);
void pt_whatif_free(pt_whatif *m);

/* Steps the model covers (per-step values given to a fix are for these), and whether
 * they are real steps (false: one pseudo-step of per-step averages). */
size_t pt_whatif_steps(const pt_whatif *m);
bool pt_whatif_by_step(const pt_whatif *m);
/* Segments and how many of them were cut by sync points seen in every worker's steps
 * (the rest end where a step ends). */
size_t pt_whatif_segments(const pt_whatif *m);
size_t pt_whatif_sync_segments(const pt_whatif *m);
/* Modelled ms per step: the baseline, T / steps. */
double pt_whatif_step_ms(const pt_whatif *m);
/* Per step: the time nobody's work sets (transfers, waits no fix of a worker shortens). */
double pt_whatif_unshortened_ms(const pt_whatif *m);
/* Worker w's work in step s (ms, all classes), as the model counts it. */
double pt_whatif_work_ms(const pt_whatif *m, size_t w, size_t s);
/* Worker w's work in segment j (ms). */
double pt_whatif_segment_work_ms(const pt_whatif *m, size_t j, size_t w);
/* The worker whose work sets segment j's length (the busiest), and by how much it is
 * ahead of the next (ms). */
size_t pt_whatif_pacer(const pt_whatif *m, size_t j, double *margin_ms);
/* The step a segment ends in. */
size_t pt_whatif_segment_step(const pt_whatif *m, size_t j);

/* Work to remove, accumulated: any number of pieces from any workers. */
typedef struct pt_fix pt_fix;
pt_fix *pt_fix_new(const pt_whatif *m);
void pt_fix_free(pt_fix *fix);
/* Removes ms of worker w's work of the classes in mask (PT_CLASS_BIT) from step s: placed
 * in the step's pieces where that worker's work of those classes exceeds the typical
 * worker's (else where it has that work), never more than it has there. */
void pt_fix_remove(pt_fix *fix, size_t w, size_t s, unsigned mask, double ms);
/* Removes up to ms of worker w's own waits in step s (collectives only it waited in:
 * its communication blocking its work), as overlapping that communication would. */
void pt_fix_unblock(pt_fix *fix, size_t w, size_t s, double ms);
/* Worker w's own waits in step s (ms), as the model counts them. */
double pt_whatif_own_wait_ms(const pt_whatif *m, size_t w, size_t s);
/* The fraction of the modelled step time the fix saves, in [0, 1]. */
double pt_whatif_saving(const pt_whatif *m, const pt_fix *fix);


#endif
