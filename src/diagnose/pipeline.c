/* pipeline.c -- a pipeline stage's extra work is moved to the other stages, not removed.
 *
 * In a pipeline-parallel job (GPipe, 1F1B) each stage runs its share of the model's
 * layers for every microbatch, so the stages run the same kernels a different number of
 * times per step: a stage holding a layer more calls each of that layer's kernels once
 * more per microbatch, one holding a layer less, once less. The peers name the heavier
 * stage (work its ranks call more often than the others, peers.c); its fix is to move
 * layers to a lighter stage (the split points), which keeps the job's work and spreads
 * it. So the finding's fix (costing.c, own_excess) is:
 *  - its excess is the stage's, the mean of the ranks it names (each replica of the
 *    stage holds the same layers; moving one does not move a replica's noise), counted
 *    above the mean over every worker (the stages balanced: the work moved, not
 *    removed), not above the median of the others;
 *  - (M - 1) / M of it for M microbatches: the slowest stage sets the pace of every
 *    microbatch but one, and the pass of that one through every stage (the fill and the
 *    drain) costs each stage's time once, which moving work between stages does not
 *    change (GPipe's step: the stages' sum over one microbatch, plus M - 1 times the
 *    slowest stage's);
 *  - the saving is that share of what the busiest worker's work exceeds the busiest
 *    worker's after the move, step by step (costing.c, pipeline_saving), the lighter
 *    stages' workers holding the calls they lack at their own time per call: balanced,
 *    the pace is some stage's slow step (noise), and that stage's bubble replaces the
 *    one the stage moved had.
 * A job is a pipeline when every worker makes point-to-point transfers (collectives of
 * the send/receive kind, pt_collective_is_point_to_point) and some worker calls the finding's
 * kernels less often than the typical worker (a lighter stage: in a data-parallel job
 * every rank calls them as often, and a rank doing extra work does not make the others
 * do less). Microbatches: a stage at the end of the pipeline sends (or receives) each
 * microbatch's activations once and receives (or sends) its gradients once, so M is half
 * the fewest transfers per step any worker makes.
 *
 * Cost: O(rows x workers) to find the transfers, O(parts x workers) per finding. */
#include "diagnose/costing.h"
#include "diagnose/finding.h"
#include "diagnose/whatif.h"
#include "summarize/classify.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>

/* The job's microbatches per step: half the fewest point-to-point transfers (sends and
 * receives) any worker makes per step; 0 when the job is no pipeline. */
static size_t microbatches_of(const pt_analysis *a)
{
    if (a->n < 2)
        return 0;
    double *calls = pt_xcalloc(a->n, sizeof *calls), fewest = INFINITY;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_COMM || !pt_collective_is_point_to_point(row->name))
            continue;
        for (size_t w = 0; w < a->n; w++) {
            pt_function_summary cell;
            const pt_function_summary *fn = pt_row_function(a, row, w, &cell);
            calls[w] += fn ? (double)fn->count : 0;
        }
    }
    for (size_t w = 0; w < a->n; w++)
        fewest = fmin(fewest, a->steps[w] ? calls[w] / (double)a->steps[w] : 0);
    free(calls);
    return fewest >= 2 ? (size_t)(fewest / 2) : 0;
}

/* Extra GPU work of some workers (kernels they call more often than the others). */
static bool extra_gpu_calls(const finding *f)
{
    if (f->all_workers || !f->worker_count || f->fix == PT_FIX_NONE || f->fix == PT_FIX_COMMON)
        return false;
    if (!f->part_count)
        return f->row && f->row->cls == PT_CLASS_COMPUTE && f->evidence == PT_EVIDENCE_MORE_CALLS;
    for (size_t i = 0; i < f->part_count; i++)
        if (extra_gpu_calls(&f->parts[i]))
            return true;
    return false;
}

/* Some worker calls f's kernels less often than the typical worker: a lighter stage. */
static bool lighter_stage(const pt_analysis *a, const finding *f)
{
    double *calls = pt_xmalloc(a->n * sizeof *calls);
    for (size_t w = 0; w < a->n; w++)
        calls[w] = pt_kernel_calls(a, f, w);
    double typical = pt_median_of(calls, a->n, a->scratch);
    bool lighter = false;
    for (size_t w = 0; w < a->n && !lighter; w++)
        lighter = !pt_finding_names(f, w) && calls[w] < typical - 0.5;
    free(calls);
    return lighter;
}

static void mark(finding *f, size_t microbatches)
{
    f->microbatches = microbatches;
    for (size_t i = 0; i < f->part_count; i++)
        mark(&f->parts[i], microbatches);
}

void pt_pipeline_stages(const pt_analysis *a, const struct pt_whatif *m, finding_list *list, size_t first)
{
    size_t microbatches = microbatches_of(a);
    if (!microbatches)
        return;
    for (size_t i = first; i < list->count; i++) {
        finding *f = &list->items[i];
        if (!extra_gpu_calls(f) || !lighter_stage(a, f))
            continue;
        mark(f, microbatches);
        pt_cost_finding(a, m, f);
        for (size_t k = 0; k < f->part_count; k++)
            pt_cost_finding(a, m, &f->parts[k]);
        pt_describe_peer_finding(a, f, pt_whatif_step_ms(m));
    }
}
