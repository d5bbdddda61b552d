/* candidates.h -- candidate fixes the per-function rules miss: each is a change a user
 * could make, costed by the step model (whatif.h) as the step time it saves, and kept
 * when that saving is above the step-to-step noise and 1% of the step (candidates.c says
 * how each is found and costed):
 *
 *  - a Python subtree's time removed, counted inclusively at the frame a user would
 *    change (`DataLoader.__next__`, `save_checkpoint`): on one rank, above the other
 *    ranks, in every profiled step or only in some (an intermittent stall, said so); or
 *    on every worker, above what a step's own Python is expected to take;
 *  - one rank's communication overlapped with its compute, where the other ranks hide
 *    theirs and that rank does not;
 *  - many small collectives bucketed: each call's cost above what its bytes take at the
 *    bandwidth it reaches, on every worker.
 *
 * A candidate becomes a finding only when it saves that much beyond the findings already
 * made (what they remove is not claimed twice); an every-worker finding made by the
 * common rules inside a subtree found here becomes a part of it, and a rolled-up
 * every-worker finding (the CPU side of a CPU-bound job, exposed communication, uneven
 * work) that saves nothing beyond the candidates found is dropped: they name its cause. */
#ifndef PT_DIAGNOSE_CANDIDATES_H
#define PT_DIAGNOSE_CANDIDATES_H

#include "diagnose/finding.h"

struct pt_whatif;

typedef enum pt_candidate_phase {
    /* About one rank, like the peer findings, and before the common rules: a rank the
     * others wait for explains their waiting (findings.c judges exposed communication
     * and uneven work only when no such finding does). */
    PT_CANDIDATES_PER_RANK,
    /* About every worker, after the common rules, whose findings it may take in. */
    PT_CANDIDATES_EVERY_WORKER
} pt_candidate_phase;

void pt_candidate_findings(const pt_analysis *a, const struct pt_whatif *m, finding_list *list,
                           pt_candidate_phase phase);

#endif
