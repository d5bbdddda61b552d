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
/* The same saving counted as findings are added, one by one (each finding's saving
 * beyond those above it): pt_joint_now is pt_joint_saving of those added so far, but
 * for hangs. */
typedef struct pt_joint pt_joint;
pt_joint *pt_joint_new(const pt_analysis *a, const struct pt_whatif *m);
void pt_joint_add(pt_joint *j, const finding *f);
double pt_joint_now(const pt_joint *j);
void pt_joint_free(pt_joint *j);
/* A saving worth a finding is at least this share of the step: a candidate fix's
 * (candidates.c, with the step-to-step noise) and a finding's on the evidence of time
 * (findings.c). */
#define PT_MIN_SAVING_SHARE 0.01
/* An exposed-communication finding's (PT_FIX_COMMON over communication) waits per step,
 * ms: the typical worker's (f->median of its step), no more than the waits no worker's
 * work sets. Its saving is that less what communication is expected to take. */
double pt_waits_nobody_sets_ms(const pt_analysis *a, const struct pt_whatif *m, const finding *f);
/* Worker w's calls per step of the kernels finding f is about (its row, or its parts'). */
double pt_kernel_calls(const pt_analysis *a, const finding *f, size_t w);
/* The classes fixing f removes time from. */
unsigned pt_fix_mask(const finding *f);
/* What fixing f removes, into fix (and into also, when given). Only `only` when it is a
 * worker index (SIZE_MAX: every worker f names). mean_excess[w] gets each worker's
 * excess per step, steps_over_floor[w] the steps in which it reaches the floor (either
 * may be NULL). */
void pt_remove_finding(const pt_analysis *a, const struct pt_whatif *m, const finding *f, struct pt_fix *fix,
                       struct pt_fix *also, size_t only, double *mean_excess, size_t *steps_over_floor);

#endif
