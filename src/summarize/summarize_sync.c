/* summarize_sync.c -- the sync points a summary carries for the step model
 * (diagnose/whatif.c, pt_sync_point in summary.h).
 *
 * Per step, a sync point is the end of a stretch of collectives (calls less than
 * SYNC_GAP_NS apart are one) in whose last millisecond the worker mostly waited: it was
 * blocked, not working beside the collective. For each, the work before it since the
 * previous one, by class, as the model counts work: compute ∪ memory, then runtime calls
 * not under a GPU collective, then Python work outside runtime calls (build_work_layers).
 * At most PT_SUMMARY_MAX_SYNCS_PER_STEP per step, those waited in longest, and only when
 * the summary keeps per-step values. Each is O(log n) on the timelines. */
#include "summarize/summarize_state.h"

#include <stdlib.h>
#include <string.h>

/* Collective calls less than this apart are one wait: back-to-back kernels on one
 * stream, a gloo thread picking up the next bucket. */
#define SYNC_GAP_NS 20000
/* A collective is a sync point when the worker waited in most of its last stretch (up to
 * this long): it was blocked, not working while the collective ran beside its work. */
#define SYNC_LOOKBACK_NS 1000000
#define SYNC_MIN_WAIT_NS 5000

/* Work as the step model counts it (see pt_sync_point): H2 = compute ∪ memory, then
 * runtime calls not under a GPU collective (a synchronize while the GPU runs only NCCL
 * waits for a peer), then Python work outside runtime calls (an operator's own time
 * holds the runtime calls it makes, a blocking synchronize among them). */
static void build_work_layers(reducer *r)
{
    pt_timeline runtime_free, python_own;
    pt_timeline_subtract(&runtime_free, &r->own[PT_CLASS_RUNTIME], &r->gpu_comm);
    pt_timeline_subtract(&python_own, &r->own[PT_CLASS_PYTHON], &r->own[PT_CLASS_RUNTIME]);
    pt_timeline_union(&r->work_runtime, &r->layer[PT_CLASS_MEMORY + 1], &runtime_free);
    pt_timeline_union(&r->work, &r->work_runtime, &python_own);
    pt_timeline_free(&runtime_free);
    pt_timeline_free(&python_own);
}

/* Work in [a, b) by class, in the model's priority (compute > memory > runtime > Python). */
static void work_by_class(const reducer *r, int64_t a, int64_t b, int64_t busy[PT_CLASS_COUNT])
{
    int64_t compute = pt_timeline_covered(&r->layer[PT_CLASS_COMPUTE + 1], a, b);
    int64_t device = pt_timeline_covered(&r->layer[PT_CLASS_MEMORY + 1], a, b);
    int64_t runtime = pt_timeline_covered(&r->work_runtime, a, b);
    int64_t all = pt_timeline_covered(&r->work, a, b);
    busy[PT_CLASS_COMPUTE] = compute;
    busy[PT_CLASS_MEMORY] = device - compute;
    busy[PT_CLASS_COMM] = 0;
    busy[PT_CLASS_RUNTIME] = runtime - device;
    busy[PT_CLASS_PYTHON] = all - runtime;
}

typedef struct sync_candidate {
    int64_t end, wait; /* wait: in the collective's last stretch */
} sync_candidate;

static int cmp_candidate_wait(const void *a, const void *b)
{
    const sync_candidate *x = a, *y = b;
    int order = pt_cmp_i64(y->wait, x->wait); /* longest wait first */
    return order ? order : pt_cmp_i64(x->end, y->end);
}

static int cmp_candidate_end(const void *a, const void *b)
{
    return pt_cmp_i64(((const sync_candidate *)a)->end, ((const sync_candidate *)b)->end);
}

/* The collectives of [a, b) the worker was blocked in, ends in time order (at most
 * PT_SUMMARY_MAX_SYNCS_PER_STEP: those it waited longest in). Returns how many. */
static size_t step_sync_points(const reducer *r, int64_t a, int64_t b, sync_candidate *out)
{
    const pt_timeline *comm = &r->own[PT_CLASS_COMM];
    size_t lo = 0, hi = comm->count; /* first span ending after a */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (comm->spans[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    sync_candidate *all = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = lo; i < comm->count && comm->spans[i].start < b;) {
        int64_t start = comm->spans[i].start, end = comm->spans[i].end;
        for (i++; i < comm->count && comm->spans[i].start - end < SYNC_GAP_NS; i++)
            end = PT_MAX(end, comm->spans[i].end);
        if (end <= a || end > b) /* a wait that ends in the next step is that step's */
            continue;
        int64_t from = PT_MAX(PT_MAX(start, a), end - SYNC_LOOKBACK_NS);
        int64_t wait = (end - from) - pt_timeline_covered(&r->work, from, end);
        if (wait < SYNC_MIN_WAIT_NS || 2 * wait < end - from)
            continue;
        PT_GROW(all, cap, n + 1);
        all[n++] = (sync_candidate){end, wait};
    }
    if (n > PT_SUMMARY_MAX_SYNCS_PER_STEP) {
        qsort(all, n, sizeof *all, cmp_candidate_wait);
        n = PT_SUMMARY_MAX_SYNCS_PER_STEP;
    }
    if (n) { /* never qsort or memcpy from NULL: UB */
        qsort(all, n, sizeof *all, cmp_candidate_end);
        memcpy(out, all, n * sizeof *out);
    }
    free(all);
    return n;
}

/* Each step's sync points and the work before each, for the step model; only with
 * per-step values (a window of at most PT_SUMMARY_MAX_STEP_VALUES steps). */
void sum_emit_sync_points(reducer *r, pt_worker_summary *out)
{
    if (!r->step_values)
        return;
    build_work_layers(r);
    out->has_syncs = true;
    sync_candidate found[PT_SUMMARY_MAX_SYNCS_PER_STEP];
    for (size_t i = 0; i < out->step_count; i++) {
        pt_step_summary *st = &out->steps[i];
        int64_t a = r->s->steps[i].start, b = r->s->steps[i].end;
        st->sync_count = step_sync_points(r, a, b, found);
        st->syncs = pt_xcalloc(st->sync_count ? st->sync_count : 1, sizeof *st->syncs);
        int64_t from = a;
        for (size_t k = 0; k < st->sync_count; k++) {
            st->syncs[k].end_ns = found[k].end - a;
            work_by_class(r, from, found[k].end, st->syncs[k].busy_ns);
            from = found[k].end;
        }
        work_by_class(r, from, b, st->tail_busy_ns);
    }
}
