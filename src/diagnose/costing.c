/* costing.c -- what fixing a finding saves, from the step model (whatif.h): the costing
 * every producer of findings uses (peers.c, candidates.c, findings.c's common problems
 * and its merge of one cause's findings), below all of them.
 *
 * Design. Fixing a finding removes, in each modelled step, the named workers' value of
 * what it fixes (a function's row, a class, or all their work) above the workers it
 * does not name, or, for a problem every worker has (PT_FIX_COMMON), above the share of
 * the step it is expected to take (own_excess). A finding merged from parts removes
 * what its parts remove together; one rolled up over a class, its own excess or its
 * parts' together, whichever is more (finding_excess). The removals go into a pt_fix,
 * and the step model replays the job without them: the impact is the share of the
 * modelled step that saves, everything else unchanged. Exposed communication every
 * worker shares is not work: its saving is what nobody's work sets, above what is
 * expected (communication_saving). A pipeline stage's work moved to the others is
 * counted from the workers' work alone (pipeline_saving): the waits that then pace are
 * another stage's bubble, which the model does not hold. The joint saving removes every
 * finding at once, so what two findings remove twice is removed once (and adds these
 * two kinds' savings).
 *
 * Cost: a finding's costing is O(workers x modelled steps) plus one replay of the step
 * model; the joint saving one replay for the whole list. */
#include "diagnose/costing.h"
#include "diagnose/whatif.h"
#include "util/stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Per modelled step, each worker's value of what fixing f removes from, in ms:
 * out[w * steps + s]. */
static void fix_values(const pt_analysis *a, const pt_whatif *m, const finding *f, double *out)
{
    size_t steps = pt_whatif_steps(m), n = a->n;
    bool by_step = pt_whatif_by_step(m);
    if (f->fix == PT_FIX_WORK) {
        for (size_t w = 0; w < n; w++)
            for (size_t s = 0; s < steps; s++)
                out[w * steps + s] = pt_whatif_work_ms(m, w, s);
        return;
    }
    double *mean = pt_xmalloc((n ? n : 1) * sizeof *mean), *per_step = pt_xmalloc((n * steps + 1) * sizeof *per_step);
    if (f->row && by_step && a->function_steps == steps) {
        pt_row_step_ms(a, f->row, out);
    } else if (f->row) {
        pt_row_exposed_ms(a, f->row, mean);
        for (size_t i = 0; i < n * steps; i++)
            out[i] = mean[i / steps];
    } else {
        memset(out, 0, n * steps * sizeof *out);
        for (int c = 0; c < PT_CLASS_COUNT; c++) {
            if (!(f->classes & PT_CLASS_BIT(c)))
                continue;
            if (by_step)
                pt_class_step_ms(a, (pt_class)c, per_step);
            else
                pt_class_exposed_ms(a, (pt_class)c, mean);
            for (size_t i = 0; i < n * steps; i++)
                out[i] += by_step ? per_step[i] : mean[i / steps];
        }
    }
    free(mean);
    free(per_step);
}

static double step_length_ms(const pt_analysis *a, const pt_whatif *m, size_t w, size_t s)
{
    return pt_whatif_by_step(m) ? (double)a->workers[w]->steps[s].dur_ns / 1e6 : a->step_ms[w];
}

unsigned pt_fix_mask(const finding *f)
{
    return f->fix == PT_FIX_WORK ? PT_WORK_CLASSES : f->row ? PT_CLASS_BIT(f->row->cls) : f->classes;
}

/* What fixing f itself removes, per modelled step, into out[w * steps + s] (0 where it
 * removes nothing): each named worker's value above the others' (the median of the
 * workers f does not name) or, for a finding about every worker, above what it is
 * expected to take. Only `only` when it is a worker index. Returns the classes. */
static unsigned own_excess(const pt_analysis *a, const pt_whatif *m, const finding *f, size_t only, double *out)
{
    size_t steps = pt_whatif_steps(m), n = a->n;
    double *values = pt_xmalloc((n * steps + 1) * sizeof *values), *column = pt_xmalloc((n ? n : 1) * sizeof *column);
    bool *named = pt_xcalloc(n ? n : 1, sizeof *named);
    size_t named_count = 0;
    for (size_t k = 0; k < f->worker_count; k++)
        named_count += !named[f->workers[k]], named[f->workers[k]] = true;
    fix_values(a, m, f, values);
    memset(out, 0, n * steps * sizeof *out);
    for (size_t s = 0; s < steps; s++) {
        double reference = 0, stage = 0;
        if (f->microbatches) {
            /* The stage's work above every worker's mean is moved to the other stages, the
             * same on each of its replicas (the mean of the named), not their noise. */
            for (size_t w = 0; w < n; w++) {
                reference += values[w * steps + s] / (double)n;
                stage += named[w] ? values[w * steps + s] / (double)named_count : 0;
            }
        } else if (f->fix != PT_FIX_COMMON) {
            size_t k = 0;
            for (size_t w = 0; w < n; w++)
                if (!named[w] || named_count == n)
                    column[k++] = values[w * steps + s];
            reference = pt_median_of(column, k, a->scratch);
        }
        for (size_t w = 0; w < n; w++) {
            if (!named[w] || (only != SIZE_MAX && w != only))
                continue;
            double base = f->fix == PT_FIX_COMMON ? f->expected * step_length_ms(a, m, w, s) : reference;
            out[w * steps + s] = fmax(0, (f->microbatches ? stage : values[w * steps + s]) - base);
        }
    }
    free(values);
    free(column);
    free(named);
    return pt_fix_mask(f);
}

/* What fixing f removes, per modelled step (as own_excess): a finding merged from parts
 * (pt_merge_causes) removes what its parts remove together -- their functions are
 * different, so their excesses add up -- and one rolled up over a class removes its
 * own excess or its parts' together, whichever is more (the class holds them). */
static unsigned finding_excess(const pt_analysis *a, const pt_whatif *m, const finding *f, size_t only, double *out)
{
    size_t cells = a->n * pt_whatif_steps(m);
    if (!f->part_count)
        return own_excess(a, m, f, only, out);
    unsigned mask = f->covers_parts ? own_excess(a, m, f, only, out) : 0;
    double *sum = pt_xcalloc(cells + 1, sizeof *sum), *part = pt_xmalloc((cells + 1) * sizeof *part);
    for (size_t i = 0; i < f->part_count; i++) {
        mask |= finding_excess(a, m, &f->parts[i], only, part);
        for (size_t c = 0; c < cells; c++)
            sum[c] += part[c];
    }
    for (size_t c = 0; c < cells; c++)
        out[c] = f->covers_parts ? fmax(out[c], sum[c]) : sum[c];
    free(sum);
    free(part);
    return mask;
}

void pt_remove_finding(const pt_analysis *a, const pt_whatif *m, const finding *f, pt_fix *fix, pt_fix *also,
                           size_t only, double *mean_excess, size_t *steps_over_floor)
{
    size_t steps = pt_whatif_steps(m), n = a->n;
    double *excess = pt_xmalloc((n * steps + 1) * sizeof *excess);
    unsigned mask = finding_excess(a, m, f, only, excess);
    /* A pipeline stage's work moved sets the pace of M - 1 of M microbatches (pipeline.c). */
    double paced = f->microbatches ? (double)(f->microbatches - 1) / (double)f->microbatches : 1;
    for (size_t s = 0; s < steps; s++)
        for (size_t w = 0; w < n; w++) {
            double e = excess[w * steps + s];
            if (e <= 0)
                continue;
            pt_fix_remove(fix, w, s, mask, paced * e);
            if (also)
                pt_fix_remove(also, w, s, mask, paced * e);
            if (mean_excess)
                mean_excess[w] += e / (double)steps;
            if (steps_over_floor && e >= pt_floor_ms(a))
                steps_over_floor[w]++;
        }
    free(excess);
}

double pt_kernel_calls(const pt_analysis *a, const finding *f, size_t w)
{
    if (f->part_count) {
        double calls = 0;
        for (size_t i = 0; i < f->part_count; i++)
            calls += pt_kernel_calls(a, &f->parts[i], w);
        return calls;
    }
    if (!f->row)
        return 0;
    pt_function_summary cell;
    const pt_function_summary *fn = pt_row_function(a, f->row, w, &cell);
    return fn && a->steps[w] ? (double)fn->count / (double)a->steps[w] : 0;
}

/* Per modelled step, each worker's ms in f's kernels (its row's, or its parts' summed). */
static void kernel_ms(const pt_analysis *a, const pt_whatif *m, const finding *f, double *out)
{
    size_t cells = a->n * pt_whatif_steps(m);
    if (!f->part_count) {
        fix_values(a, m, f, out);
        return;
    }
    double *part = pt_xmalloc((cells + 1) * sizeof *part);
    memset(out, 0, cells * sizeof *out);
    for (size_t i = 0; i < f->part_count; i++) {
        kernel_ms(a, m, &f->parts[i], part);
        for (size_t c = 0; c < cells; c++)
            out[c] += part[c];
    }
    free(part);
}

/* The work a pipeline's lighter stages take on when the heavy stage's is spread, per
 * modelled step, into gain[w * steps + s]: each worker that calls f's kernels less often
 * than the mean worker takes the calls it lacks, at its own time per call in that step
 * (its own speed, and its noise: a lighter stage on a slow step may pace once it holds
 * the layer moved), or at the typical worker's where it calls none of them. */
static void moved_in(const pt_analysis *a, const pt_whatif *m, const finding *f, double *gain)
{
    size_t steps = pt_whatif_steps(m), n = a->n;
    double *calls = pt_xmalloc((n ? n : 1) * sizeof *calls), mean = 0;
    double *ms = pt_xmalloc((n * steps + 1) * sizeof *ms), *per_call = pt_xmalloc((n ? n : 1) * sizeof *per_call);
    for (size_t w = 0; w < n; w++)
        calls[w] = pt_kernel_calls(a, f, w), mean += calls[w] / (double)n;
    kernel_ms(a, m, f, ms);
    for (size_t s = 0; s < steps; s++) {
        size_t k = 0;
        for (size_t w = 0; w < n; w++)
            if (calls[w] > 0)
                per_call[k++] = ms[w * steps + s] / calls[w];
        double typical = k ? pt_median_of(per_call, k, a->scratch) : 0;
        for (size_t w = 0; w < n; w++) {
            bool lighter = calls[w] < mean && !pt_finding_names(f, w);
            double own = calls[w] > 0 ? ms[w * steps + s] / calls[w] : typical;
            gain[w * steps + s] = lighter ? (mean - calls[w]) * own : 0;
        }
    }
    free(calls);
    free(ms);
    free(per_call);
}

/* A pipeline stage's work moved to the other stages (pipeline.c): GPipe's step is the
 * stages' sum over one microbatch plus M - 1 times the slowest stage's, so in each step
 * moving work saves (M - 1) / M of what the busiest worker's work exceeds the busiest
 * worker's after the move -- the stage moved less its excess, the lighter stages with
 * the work they take on at their own pace (moved_in) -- which, the stages balanced, is
 * some stage's worker on a slow step of its own (noise), not the stage moved (the sum
 * over one microbatch changes only by how much slower a lighter stage runs the work it
 * takes on, which this leaves out). The step model would keep the
 * waits the stage moved had (the last stage's short bubble), not the bubble of the
 * worker that then paces, so this is counted from the workers' work alone. Only `only`
 * moves when it is a worker index. */
static double pipeline_saving(const pt_analysis *a, const pt_whatif *m, const finding *f, size_t only)
{
    size_t steps = pt_whatif_steps(m), n = a->n;
    double *excess = pt_xmalloc((n * steps + 1) * sizeof *excess), saved = 0;
    double *waiting = pt_xmalloc((n * steps + 1) * sizeof *waiting);
    double *gain = pt_xmalloc((n * steps + 1) * sizeof *gain);
    bool by_step = pt_whatif_by_step(m) && a->aligned_steps == steps;
    finding_excess(a, m, f, only, excess);
    moved_in(a, m, f, gain);
    if (by_step)
        pt_waiting_step_ms(a, waiting);
    for (size_t s = 0; s < steps; s++) {
        double before = 0, after = 0;
        for (size_t w = 0; w < n; w++) {
            double work = by_step ? step_length_ms(a, m, w, s) - waiting[w * steps + s] : pt_whatif_work_ms(m, w, s);
            before = fmax(before, work);
            after = fmax(after, work - fmin(work, excess[w * steps + s]) + gain[w * steps + s]);
        }
        saved += (before - after) / (double)steps;
    }
    free(excess);
    free(waiting);
    free(gain);
    double step = pt_whatif_step_ms(m), paced = (double)(f->microbatches - 1) / (double)f->microbatches;
    return step > 0 ? fmin(1, fmax(0, paced * saved / step)) : 0;
}

double pt_waits_nobody_sets_ms(const pt_analysis *a, const pt_whatif *m, const finding *f)
{
    return fmin(f->median * a->median_step_ms, pt_whatif_unshortened_ms(m));
}

/* Exposed communication every worker shares: what nobody's work sets, less what it is
 * expected to take (the transfer the last worker to arrive still waits), is what
 * overlapping it could save. */
static double communication_saving(const pt_analysis *a, const pt_whatif *m, const finding *f)
{
    double step = pt_whatif_step_ms(m);
    double saving = pt_waits_nobody_sets_ms(a, m, f) - f->expected * step;
    return step > 0 ? fmin(1, fmax(0, saving / step)) : 0;
}

void pt_cost_finding(const pt_analysis *a, const pt_whatif *m, finding *f)
{
    if (f->fix == PT_FIX_NONE)
        return;
    if (f->fix == PT_FIX_COMMON && !f->row && f->classes == PT_CLASS_BIT(PT_CLASS_COMM)) {
        f->impact = communication_saving(a, m, f);
        f->excess_ms = f->impact * pt_whatif_step_ms(m);
        return;
    }
    double *mean_excess = pt_xcalloc(a->n ? a->n : 1, sizeof *mean_excess);
    size_t *over_floor = pt_xcalloc(a->n ? a->n : 1, sizeof *over_floor);
    pt_fix *fix = pt_fix_new(m);
    pt_remove_finding(a, m, f, fix, NULL, SIZE_MAX, mean_excess, over_floor);
    f->impact = f->microbatches ? pipeline_saving(a, m, f, SIZE_MAX) : pt_whatif_saving(m, fix);
    pt_fix_free(fix);
    f->worst = f->worker_count ? f->workers[0] : 0;
    for (size_t k = 0; k < f->worker_count; k++)
        if (mean_excess[f->workers[k]] > mean_excess[f->worst])
            f->worst = f->workers[k];
    f->excess_ms = a->n ? mean_excess[f->worst] : 0;
    f->steps_total = pt_whatif_by_step(m) ? pt_whatif_steps(m) : 0;
    f->steps_slow = a->n ? over_floor[f->worst] : 0;
    free(over_floor);
    f->alone = f->impact;
    if (f->worker_count > 1 && !f->all_workers) {
        pt_fix *alone = pt_fix_new(m);
        pt_remove_finding(a, m, f, alone, NULL, f->worst, NULL, NULL);
        f->alone = f->microbatches ? pipeline_saving(a, m, f, f->worst) : pt_whatif_saving(m, alone);
        pt_fix_free(alone);
    }
    free(mean_excess);
}

struct pt_joint {
    const pt_analysis *a;
    const pt_whatif *m;
    pt_fix *all;
    double communication, pipeline;
};

pt_joint *pt_joint_new(const pt_analysis *a, const pt_whatif *m)
{
    pt_joint *j = pt_xcalloc(1, sizeof *j);
    j->a = a, j->m = m, j->all = pt_fix_new(m);
    return j;
}

void pt_joint_add(pt_joint *j, const finding *f)
{
    if (f->fix == PT_FIX_NONE)
        return;
    if (f->fix == PT_FIX_COMMON && !f->row && f->classes == PT_CLASS_BIT(PT_CLASS_COMM))
        j->communication = fmax(j->communication, f->impact);
    else if (f->microbatches)
        j->pipeline += f->impact; /* counted from the work alone (pipeline_saving) */
    else
        pt_remove_finding(j->a, j->m, f, j->all, NULL, SIZE_MAX, NULL, NULL);
}

double pt_joint_now(const pt_joint *j)
{
    return fmin(1, pt_whatif_saving(j->m, j->all) + j->communication + j->pipeline);
}

void pt_joint_free(pt_joint *j)
{
    if (!j)
        return;
    pt_fix_free(j->all);
    free(j);
}

double pt_joint_saving(const pt_analysis *a, const pt_whatif *m, const finding_list *list, const bool *left_out)
{
    pt_joint *joint = pt_joint_new(a, m);
    double given = 0;
    for (size_t i = 0; i < list->count; i++) {
        const finding *f = &list->items[i];
        if (left_out && left_out[i])
            continue;
        if (f->fix == PT_FIX_NONE && strcmp(f->category, "hardware") != 0)
            given = fmax(given, f->impact); /* a hang */
        pt_joint_add(joint, f);
    }
    double saving = pt_joint_now(joint);
    pt_joint_free(joint);
    return fmax(saving, given);
}
