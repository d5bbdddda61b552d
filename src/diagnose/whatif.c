/* whatif.c -- the step model (see whatif.h): segments, each worker's work in them, and
 * the time a fix saves.
 *
 * Segments. Each summary gives, per step, the collectives its worker waited in (sync
 * points) and its work before each, by class (summary.h, pt_sync_point). A sync point
 * is the job's when every worker waited there: its ends are matched across workers by
 * time (their windows are on one clock; within max(1 ms, 3% of a step)), starting from
 * the worker that waited in the fewest, so a collective one worker merely overlapped
 * with its own work does not cut the others' segments. A worker's work between two of
 * the job's sync points is one piece, and what it waited in its other sync points there
 * (from the previous one's end, less its work since) its own waits, when fewer than
 * half the other workers waited in one ending then and it has them in every step
 * (own_wait_in, keep_steady_own_waits); the piece after a step's last sync point and the
 * next step's first piece are one segment (the step boundary is no sync point), and so
 * are the last step's tail and the first step's head (see build_segments). A segment
 * lasts as long as its last worker's work, own waits and wait: the wait is what the fix
 * of no worker shortens (the transfer, seen by the worker that arrived last). A step
 * with no sync point of the job (none seen: a collector that cannot see gloo's threads,
 * or workers that disagree) ends its segment at its end, as if the job synchronized
 * there, which is what a data-parallel step does. Summaries without sync points (older
 * ones, windows over 64 steps) give one piece per step from its exposed time: work is
 * everything but communication and idle time.
 *
 * Placing a fix. A finding says how much of a worker's work of some classes goes per
 * step; the model puts it in that step's pieces where the worker's work of those classes
 * is above the typical worker's (a slow data loader is in the piece before the first
 * sync point, not in the optimizer's), in proportion, and never more than the worker has
 * there.
 *
 * What it does not see: overlap inside a segment (removing hidden work saves nothing,
 * so findings are of exposed time), collectives' transfer changing, and workers that
 * share a device slowing each other (removing one worker's kernels helps its GPU's
 * other workers too; the model says what it saves on that worker alone).
 *
 * Cost: building is O(workers x steps x sync points); a saving is O(workers x
 * segments). Memory: a few doubles per worker, piece and class. */
#include "diagnose/whatif.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_TOLERANCE_NS 1000000
#define MATCH_TOLERANCE_SHARE 0.03
#define MAX_PIECES_PER_STEP (PT_SUMMARY_MAX_SYNCS_PER_STEP + 1)

struct pt_whatif {
    size_t n;             /* workers */
    size_t steps;         /* steps modelled */
    bool by_step;         /* real steps, not one pseudo-step */
    size_t pieces;        /* all steps' pieces */
    size_t *piece_base;   /* [s]: the step's first piece; [steps] = pieces */
    size_t *segment_of;   /* [p] */
    size_t segments, sync_segments;
    double *busy;         /* [(p * n + w) * PT_CLASS_COUNT + c], ms */
    double *median_busy;  /* [p * PT_CLASS_COUNT + c]: the typical worker's */
    double *own_wait;     /* [p * n + w]: ms waited in collectives only that worker waited in */
    double *seg_busy;     /* [j * n + w] */
    double *seg_own;      /* [j * n + w]: own_wait summed over the segment */
    double *seg_wait;     /* [j]: what its last worker waits in it (the transfer: nobody's
                             work sets it) */
    size_t *seg_step;     /* [j] */
    double total_ms;      /* T over the modelled steps */
};

struct pt_fix {
    const pt_whatif *m;
    double *removed;      /* like busy */
    double *unblocked;    /* like own_wait: own waits removed */
};

/* ------------------------------------------------------------ pieces */

/* A worker's work by class as ms, from ns (communication is never work). */
static void work_ms(double *out, const int64_t busy[PT_CLASS_COUNT], double scale)
{
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        out[c] += c == PT_CLASS_COMM ? 0 : (double)busy[c] / 1e6 * scale;
}

typedef struct builder {
    pt_whatif *m;
    size_t cap;           /* pieces allocated */
    double *length;       /* [p * n + w] */
    bool *ends_segment;   /* [p] */
} builder;

static size_t add_pieces(builder *b, size_t count)
{
    pt_whatif *m = b->m;
    size_t first = m->pieces;
    if (first + count > b->cap) {
        size_t cap = PT_MAX(b->cap * 2, first + count);
        m->busy = pt_xrealloc(m->busy, cap * m->n * PT_CLASS_COUNT * sizeof *m->busy);
        m->own_wait = pt_xrealloc(m->own_wait, cap * m->n * sizeof *m->own_wait);
        b->length = pt_xrealloc(b->length, cap * m->n * sizeof *b->length);
        b->ends_segment = pt_xrealloc(b->ends_segment, cap * sizeof *b->ends_segment);
        b->cap = cap;
    }
    memset(m->busy + first * m->n * PT_CLASS_COUNT, 0, count * m->n * PT_CLASS_COUNT * sizeof *m->busy);
    memset(m->own_wait + first * m->n, 0, count * m->n * sizeof *m->own_wait);
    memset(b->length + first * m->n, 0, count * m->n * sizeof *b->length);
    memset(b->ends_segment + first, 0, count * sizeof *b->ends_segment);
    m->pieces += count;
    return first;
}

static double *piece_busy(const pt_whatif *m, size_t p, size_t w)
{
    return m->busy + (p * m->n + w) * PT_CLASS_COUNT;
}

/* A step that is one piece: its exposed time (no sync points) or all its work. */
static void whole_step_piece(builder *b, const pt_analysis *a, size_t s, bool syncs)
{
    pt_whatif *m = b->m;
    size_t p = add_pieces(b, 1);
    b->ends_segment[p] = true;
    for (size_t w = 0; w < m->n; w++) {
        const pt_step_summary *st = &a->workers[w]->steps[s];
        double *busy = piece_busy(m, p, w);
        if (syncs) {
            for (size_t k = 0; k < st->sync_count; k++)
                work_ms(busy, st->syncs[k].busy_ns, 1);
            work_ms(busy, st->tail_busy_ns, 1);
        } else {
            work_ms(busy, st->exposed_ns, 1);
        }
        b->length[p * m->n + w] = (double)st->dur_ns / 1e6;
    }
}

static int64_t sync_time(const pt_worker_summary *s, size_t step, size_t k)
{
    return s->window_start_ns + s->steps[step].start_ns + s->steps[step].syncs[k].end_ns;
}

/* The job's sync points of step s: match[g * n + w] is worker w's sync point for the
 * g-th. Returns how many (see the header comment). */
static size_t match_syncs(const pt_analysis *a, size_t s, int64_t tolerance, size_t *match)
{
    size_t n = a->n, ref = 0;
    for (size_t w = 1; w < n; w++)
        if (a->workers[w]->steps[s].sync_count < a->workers[ref]->steps[s].sync_count)
            ref = w;
    size_t *next = pt_xcalloc(n, sizeof *next), found = 0;
    const pt_step_summary *rs = &a->workers[ref]->steps[s];
    for (size_t k = 0; k < rs->sync_count; k++) {
        int64_t t = sync_time(a->workers[ref], s, k);
        bool everywhere = true;
        for (size_t w = 0; w < n && everywhere; w++) {
            const pt_step_summary *st = &a->workers[w]->steps[s];
            size_t best = SIZE_MAX;
            int64_t best_off = tolerance + 1;
            for (size_t i = next[w]; i < st->sync_count; i++) {
                int64_t off = llabs(sync_time(a->workers[w], s, i) - t);
                if (off < best_off)
                    best_off = off, best = i;
            }
            everywhere = best != SIZE_MAX;
            match[found * n + w] = best;
        }
        if (!everywhere)
            continue;
        for (size_t w = 0; w < n; w++)
            next[w] = match[found * n + w] + 1;
        found++;
    }
    free(next);
    return found;
}

static int by_time(const void *x, const void *y)
{
    return pt_cmp_i64(*(const int64_t *)x, *(const int64_t *)y);
}

/* Every worker's sync points' ends in one step, sorted, on the job's clock (see
 * own_wait_in); none when a worker's list is cut (PT_SUMMARY_MAX_SYNCS_PER_STEP, those it
 * waited in longest): the lists then cannot tell who else waited in one. */
typedef struct step_view {
    int64_t *ends; /* room for MAX_PIECES_PER_STEP per worker */
    size_t syncs;
} step_view;

static void step_view_build(step_view *v, const pt_analysis *a, size_t s)
{
    v->syncs = 0;
    for (size_t w = 0; w < a->n; w++)
        if (a->workers[w]->steps[s].sync_count >= PT_SUMMARY_MAX_SYNCS_PER_STEP)
            return;
    for (size_t w = 0; w < a->n; w++)
        for (size_t k = 0; k < a->workers[w]->steps[s].sync_count; k++)
            v->ends[v->syncs++] = sync_time(a->workers[w], s, k);
    qsort(v->ends, v->syncs, sizeof *v->ends, by_time);
}

/* How many of times[0 .. count) are before t. */
static size_t before(const int64_t *times, size_t count, int64_t t)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (times[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* What worker w waited in its sync point k of step s, a collective that is not the job's
 * sync point, as its own wait (ms; 0 when it is not): when fewer than half the other
 * workers waited in one ending within the tolerance of it (most of them waiting there
 * too, it is the job's, one worker's timing off by noise). Its wait is from the previous
 * sync point's end, less its work since. */
static double own_wait_in(const step_view *v, const pt_analysis *a, size_t w, size_t s, size_t k, int64_t tolerance)
{
    const pt_step_summary *st = &a->workers[w]->steps[s];
    if (!v->syncs)
        return 0;
    int64_t previous = k ? st->syncs[k - 1].end_ns : 0, worked = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        worked += st->syncs[k].busy_ns[c];
    int64_t wait = st->syncs[k].end_ns - previous - worked, end = sync_time(a->workers[w], s, k);
    size_t near = before(v->ends, v->syncs, end + tolerance + 1) - before(v->ends, v->syncs, end - tolerance) - 1;
    return wait > 0 && 2 * near < a->n - 1 ? (double)wait / 1e6 : 0;
}

/* Own waits are a worker's way of working (its collectives on its compute stream) only
 * when it has them in every modelled step (all but one of four or more, as the peers'
 * evidence of time): one step's are a worker that arrived early at collectives its
 * summary kept and the others' did not (each keeps those it waited in longest, and
 * only when it mostly waited), not a cause. */
static void keep_steady_own_waits(pt_whatif *m)
{
    for (size_t w = 0; w < m->n; w++) {
        size_t without = 0;
        for (size_t s = 0; s < m->steps; s++)
            without += pt_whatif_own_wait_ms(m, w, s) <= 0;
        if (without == 0 || (m->steps >= 4 && without == 1))
            continue;
        for (size_t p = 0; p < m->pieces; p++)
            m->own_wait[p * m->n + w] = 0;
    }
}

/* Step s cut at the job's sync points: worker w's local pieces between two of them sum
 * into one, their waits its own. */
static void synced_step_pieces(builder *b, const pt_analysis *a, size_t s, int64_t tolerance, size_t *match,
                               step_view *view)
{
    pt_whatif *m = b->m;
    size_t n = m->n, g = match_syncs(a, s, tolerance, match);
    if (g == 0) {
        whole_step_piece(b, a, s, true);
        return;
    }
    step_view_build(view, a, s);
    m->sync_segments += g;
    size_t p0 = add_pieces(b, g + 1);
    for (size_t k = 0; k < g; k++)
        b->ends_segment[p0 + k] = true;
    for (size_t w = 0; w < n; w++) {
        const pt_step_summary *st = &a->workers[w]->steps[s];
        size_t local = 0;
        int64_t from = 0;
        for (size_t k = 0; k <= g; k++) {
            size_t upto = k < g ? match[k * n + w] + 1 : st->sync_count;
            double *busy = piece_busy(m, p0 + k, w);
            for (; local < upto; local++) {
                work_ms(busy, st->syncs[local].busy_ns, 1);
                if (k == g || local != match[k * n + w])
                    m->own_wait[(p0 + k) * n + w] += own_wait_in(view, a, w, s, local, tolerance);
            }
            int64_t end = k < g ? st->syncs[match[k * n + w]].end_ns : st->dur_ns;
            if (k == g)
                work_ms(busy, st->tail_busy_ns, 1);
            b->length[(p0 + k) * n + w] = (double)(end - from) / 1e6;
            from = end;
        }
    }
}

/* No comparable steps: one pseudo-step, each worker's window per step. */
static void pseudo_step(builder *b, const pt_analysis *a)
{
    pt_whatif *m = b->m;
    size_t p = add_pieces(b, 1);
    b->ends_segment[p] = true;
    for (size_t w = 0; w < m->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        work_ms(piece_busy(m, p, w), s->exposed_ns, 1 / a->steps[w]);
        b->length[p * m->n + w] = pt_window_ms(a, w) / a->steps[w];
    }
}

/* ------------------------------------------------------------ segments */

/* When worker w arrives at segment j's end: its work and its own waits (ms). */
static double arrival(const pt_whatif *m, size_t j, size_t w)
{
    return m->seg_busy[j * m->n + w] + m->seg_own[j * m->n + w];
}

/* Pieces into segments: a segment ends where a piece ends at a sync point of the job (or
 * where a step without one ends). The window is one turn of a loop: what follows its
 * last sync point (the last step's tail) continues into what precedes its first (the
 * first step's head), as it does in every other step, so they are one segment. Cut
 * apart, the first would hold the others' wait for work done before the window and the
 * last that work again. */
static void build_segments(pt_whatif *m, const builder *b)
{
    size_t n = m->n, cap = m->pieces ? m->pieces : 1;
    m->segment_of = pt_xmalloc(cap * sizeof *m->segment_of);
    m->seg_step = pt_xcalloc(cap, sizeof *m->seg_step);
    size_t j = 0, s = 0;
    for (size_t p = 0; p < m->pieces; p++) {
        while (s + 1 < m->steps && m->piece_base[s + 1] <= p)
            s++;
        m->segment_of[p] = j;
        m->seg_step[j] = s;
        if (b->ends_segment[p] || p + 1 == m->pieces)
            j++;
    }
    m->segments = j;
    if (j > 1 && !b->ends_segment[m->pieces - 1]) { /* the loop closes */
        for (size_t p = m->pieces; p-- > 0 && m->segment_of[p] == j - 1;)
            m->segment_of[p] = 0;
        m->segments = j - 1;
    }
    m->seg_busy = pt_xcalloc(cap * (n ? n : 1), sizeof *m->seg_busy);
    m->seg_own = pt_xcalloc(cap * (n ? n : 1), sizeof *m->seg_own);
    m->seg_wait = pt_xcalloc(cap, sizeof *m->seg_wait);
    double *length = pt_xcalloc(cap * (n ? n : 1), sizeof *length);
    for (size_t p = 0; p < m->pieces; p++)
        for (size_t w = 0; w < n; w++) {
            size_t at = m->segment_of[p] * n + w;
            const double *busy = piece_busy(m, p, w);
            for (int c = 0; c < PT_CLASS_COUNT; c++)
                m->seg_busy[at] += busy[c];
            m->seg_own[at] += m->own_wait[p * n + w];
            length[at] += b->length[p * n + w];
        }
    /* A segment lasts as long as its last worker's work, own waits and wait. (Not the
     * typical worker's length: where the window cuts the loop, the others' wait for the
     * last worker's last work falls outside it.) */
    m->total_ms = 0;
    for (j = 0; j < m->segments; j++) {
        size_t top = 0;
        for (size_t w = 1; w < n; w++)
            if (arrival(m, j, w) > arrival(m, j, top))
                top = w;
        m->seg_wait[j] = n ? fmax(0, length[j * n + top] - arrival(m, j, top)) : 0;
        m->total_ms += n ? m->seg_wait[j] + arrival(m, j, top) : 0;
    }
    free(length);
}

static void typical_busy(pt_whatif *m, double *values, double *scratch)
{
    m->median_busy = pt_xcalloc((m->pieces ? m->pieces : 1) * PT_CLASS_COUNT, sizeof *m->median_busy);
    for (size_t p = 0; p < m->pieces; p++)
        for (int c = 0; c < PT_CLASS_COUNT; c++) {
            for (size_t w = 0; w < m->n; w++)
                values[w] = piece_busy(m, p, w)[c];
            m->median_busy[p * PT_CLASS_COUNT + c] = pt_median_of(values, m->n, scratch);
        }
}

pt_whatif *pt_whatif_new(const pt_analysis *a)
{
    pt_whatif *m = pt_xcalloc(1, sizeof *m);
    m->n = a->n;
    m->by_step = a->aligned_steps > 0;
    m->steps = m->by_step ? a->aligned_steps : 1;
    m->piece_base = pt_xcalloc(m->steps + 1, sizeof *m->piece_base);
    builder b = {m, 0, NULL, NULL};
    bool syncs = a->n > 0;
    for (size_t w = 0; w < a->n; w++)
        syncs &= a->workers[w]->has_syncs;
    int64_t tolerance = (int64_t)fmax(MATCH_TOLERANCE_NS, MATCH_TOLERANCE_SHARE * a->median_step_ms * 1e6);
    size_t *match = pt_xmalloc(MAX_PIECES_PER_STEP * (a->n ? a->n : 1) * sizeof *match);
    step_view view = {pt_xmalloc(MAX_PIECES_PER_STEP * (a->n ? a->n : 1) * sizeof *view.ends), 0};
    for (size_t s = 0; s < m->steps && a->n; s++) {
        m->piece_base[s] = m->pieces;
        if (!m->by_step)
            pseudo_step(&b, a);
        else if (syncs)
            synced_step_pieces(&b, a, s, tolerance, match, &view);
        else
            whole_step_piece(&b, a, s, false);
    }
    m->piece_base[m->steps] = m->pieces;
    free(match);
    free(view.ends);
    double *scratch = pt_xmalloc((a->n ? 2 * a->n : 2) * sizeof *scratch);
    double *values = pt_xmalloc((a->n ? a->n : 1) * sizeof *values);
    keep_steady_own_waits(m);
    build_segments(m, &b);
    typical_busy(m, values, scratch);
    free(values);
    free(scratch);
    free(b.length);
    free(b.ends_segment);
    return m;
}

void pt_whatif_free(pt_whatif *m)
{
    if (!m)
        return;
    free(m->piece_base);
    free(m->segment_of);
    free(m->busy);
    free(m->median_busy);
    free(m->seg_busy);
    free(m->own_wait);
    free(m->seg_own);
    free(m->seg_wait);
    free(m->seg_step);
    free(m);
}

size_t pt_whatif_steps(const pt_whatif *m) { return m->steps; }
bool pt_whatif_by_step(const pt_whatif *m) { return m->by_step; }
size_t pt_whatif_segments(const pt_whatif *m) { return m->segments; }
size_t pt_whatif_sync_segments(const pt_whatif *m) { return m->sync_segments; }
size_t pt_whatif_segment_step(const pt_whatif *m, size_t j) { return m->seg_step[j]; }

double pt_whatif_step_ms(const pt_whatif *m)
{
    return m->steps ? m->total_ms / (double)m->steps : 0;
}

double pt_whatif_unshortened_ms(const pt_whatif *m)
{
    double sum = 0;
    for (size_t j = 0; j < m->segments; j++)
        sum += m->seg_wait[j];
    return m->steps ? sum / (double)m->steps : 0;
}

double pt_whatif_work_ms(const pt_whatif *m, size_t w, size_t s)
{
    double sum = 0;
    for (size_t p = m->piece_base[s]; p < m->piece_base[s + 1]; p++)
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            sum += piece_busy(m, p, w)[c];
    return sum;
}

double pt_whatif_segment_work_ms(const pt_whatif *m, size_t j, size_t w)
{
    return m->seg_busy[j * m->n + w];
}

size_t pt_whatif_pacer(const pt_whatif *m, size_t j, double *margin_ms)
{
    size_t best = 0;
    double top = -1, second = 0;
    for (size_t w = 0; w < m->n; w++) {
        double v = m->seg_busy[j * m->n + w];
        if (v > top)
            second = fmax(top, 0), top = v, best = w;
        else if (v > second)
            second = v;
    }
    *margin_ms = m->n > 1 ? top - second : top;
    return best;
}

/* ------------------------------------------------------------ fixes */

pt_fix *pt_fix_new(const pt_whatif *m)
{
    pt_fix *fix = pt_xcalloc(1, sizeof *fix);
    fix->m = m;
    fix->removed = pt_xcalloc((m->pieces ? m->pieces : 1) * (m->n ? m->n : 1) * PT_CLASS_COUNT, sizeof *fix->removed);
    fix->unblocked = pt_xcalloc((m->pieces ? m->pieces : 1) * (m->n ? m->n : 1), sizeof *fix->unblocked);
    return fix;
}

void pt_fix_free(pt_fix *fix)
{
    if (!fix)
        return;
    free(fix->removed);
    free(fix->unblocked);
    free(fix);
}

/* What is left of worker w's work of the mask's classes in piece p. */
static double left_in(const pt_fix *fix, size_t p, size_t w, unsigned mask)
{
    const double *busy = piece_busy(fix->m, p, w), *gone = fix->removed + (p * fix->m->n + w) * PT_CLASS_COUNT;
    double left = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        if (mask & PT_CLASS_BIT(c))
            left += fmax(0, busy[c] - gone[c]);
    return left;
}

/* Takes ms out of piece p's classes in proportion to what is left of each. */
static double take(pt_fix *fix, size_t p, size_t w, unsigned mask, double ms)
{
    double left = left_in(fix, p, w, mask);
    ms = fmin(ms, left);
    if (ms <= 0)
        return 0;
    const double *busy = piece_busy(fix->m, p, w);
    double *gone = fix->removed + (p * fix->m->n + w) * PT_CLASS_COUNT;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        if (mask & PT_CLASS_BIT(c))
            gone[c] += ms * fmax(0, busy[c] - gone[c]) / left;
    return ms;
}

void pt_fix_remove(pt_fix *fix, size_t w, size_t s, unsigned mask, double ms)
{
    const pt_whatif *m = fix->m;
    if (!(ms > 0) || w >= m->n || s >= m->steps)
        return;
    size_t first = m->piece_base[s], count = m->piece_base[s + 1] - first;
    double weight[MAX_PIECES_PER_STEP] = {0}, sum = 0;
    for (size_t k = 0; k < count; k++) { /* where its work is above the typical worker's */
        const double *busy = piece_busy(m, first + k, w);
        for (int c = 0; c < PT_CLASS_COUNT; c++)
            if (mask & PT_CLASS_BIT(c))
                weight[k] += fmax(0, busy[c] - m->median_busy[(first + k) * PT_CLASS_COUNT + c]);
        sum += weight[k];
    }
    if (sum <= 0) /* else where it has such work */
        for (size_t k = 0; k < count; k++)
            sum += weight[k] = left_in(fix, first + k, w, mask);
    if (sum <= 0)
        return;
    double left = ms;
    for (size_t k = 0; k < count; k++)
        left -= take(fix, first + k, w, mask, ms * weight[k] / sum);
    for (size_t k = 0; k < count && left > 1e-12; k++) /* what a full piece could not hold */
        left -= take(fix, first + k, w, mask, left);
}

void pt_fix_unblock(pt_fix *fix, size_t w, size_t s, double ms)
{
    const pt_whatif *m = fix->m;
    if (!(ms > 0) || w >= m->n || s >= m->steps)
        return;
    for (size_t p = m->piece_base[s]; p < m->piece_base[s + 1] && ms > 0; p++) {
        size_t at = p * m->n + w;
        double take = fmin(ms, m->own_wait[at] - fix->unblocked[at]);
        if (take > 0)
            fix->unblocked[at] += take, ms -= take;
    }
}

double pt_whatif_own_wait_ms(const pt_whatif *m, size_t w, size_t s)
{
    double sum = 0;
    for (size_t p = m->piece_base[s]; p < m->piece_base[s + 1]; p++)
        sum += m->own_wait[p * m->n + w];
    return sum;
}

double pt_whatif_saving(const pt_whatif *m, const pt_fix *fix)
{
    if (m->total_ms <= 0)
        return 0;
    size_t n = m->n;
    double *gone = pt_xcalloc((m->segments ? m->segments : 1) * (n ? n : 1), sizeof *gone);
    for (size_t p = 0; p < m->pieces; p++)
        for (size_t w = 0; w < n; w++) {
            const double *r = fix->removed + (p * n + w) * PT_CLASS_COUNT;
            for (int c = 0; c < PT_CLASS_COUNT; c++)
                gone[m->segment_of[p] * n + w] += r[c];
            gone[m->segment_of[p] * n + w] += fix->unblocked[p * n + w];
        }
    double total = 0;
    for (size_t j = 0; j < m->segments; j++) {
        double fixed = 0;
        for (size_t w = 0; w < n; w++)
            fixed = fmax(fixed, arrival(m, j, w) - gone[j * n + w]);
        total += m->seg_wait[j] + fixed; /* the transfer and waits nobody's work sets stay */
    }
    free(gone);
    double saving = (m->total_ms - total) / m->total_ms;
    return fmin(1, fmax(0, saving));
}
