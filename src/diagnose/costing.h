/* costing.h -- what fixing a finding saves, from the step model (costing.c): its
 * impact, its excess, and the joint saving of a list; the producers of findings
 * (peers.c, candidates.c, findings.c) call it, and it calls none of them. */
#ifndef PT_DIAGNOSE_COSTING_H
#define PT_DIAGNOSE_COSTING_H

#include "diagnose/finding.h"

#include <stddef.h>

struct pt_whatif;
struct pt_fix;

/* A finding's impact: the share of the modelled step its fix saves; its excess, the
 * named worker's with the most; with several workers, what fixing that one alone saves. */
void pt_cost_finding(const pt_analysis *a, const struct pt_whatif *m, finding *f);
/* Fixing every finding of list at once (but those left_out marks, when given): each
 * one's removal together (what two of them remove twice is removed once), plus
 * overlapped communication; the report's joint_impact. */
double pt_joint_saving(const pt_analysis *a, const struct pt_whatif *m, const finding_list *list, const bool *left_out);
/* A saving worth a finding is at least this share of the step: a candidate fix's
 * (candidates.c, with the step-to-step noise) and a finding's on the evidence of time
 * (findings.c). */
#define PT_MIN_SAVING_SHARE 0.01
/* The classes fixing f removes time from. */
unsigned pt_fix_mask(const finding *f);
/* What fixing f removes, into fix (and into also, when given). Only `only` when it is a
 * worker index (SIZE_MAX: every worker f names). mean_excess[w] gets each worker's
 * excess per step, steps_over_floor[w] the steps in which it reaches the floor (either
 * may be NULL). */
void pt_remove_finding(const pt_analysis *a, const struct pt_whatif *m, const finding *f, struct pt_fix *fix,
                       struct pt_fix *also, size_t only, double *mean_excess, size_t *steps_over_floor);

#endif
