/* candidates.c -- candidate fixes the per-function rules miss (see candidates.h), each
 * costed by the step model as the step time it saves.
 *
 * The decision. A candidate is kept when the step time its fix saves beyond the findings
 * already made is above the step-to-step noise (the typical worker's: the median over
 * workers of each one's robust spread of step times, 1.4826 x MAD, so one rank's stall
 * in one step does not raise it) and above 1% of the step (PT_MIN_SAVING_SHARE). With
 * fewer than two steps the noise is unknown and the peers' floor (3% of the step)
 * stands in for it. No share of
 * the step decides alone; the floors that stay are the share of the step at which an
 * every-worker Python subtree is judged (JUDGED_SUBTREE) and the overlap's
 * (OVERLAP_FLOOR), below, and they are in docs/report-schema.md.
 *
 * Python subtrees. Summaries key Python time by whole call stacks (exclusive time), so
 * one cause spread over several stacks (a data loader's fetch, collate and pin-memory
 * frames) is several small rows. Here the stacks make a tree of frames, and each frame
 * counts the time of every stack through it (inclusive). Which frame names the cause:
 * from each root of the main program down, frames of the user's own code through which
 * nearly all of the step's Python passes (the rest, the frame's own time and its other
 * children, is under the decision) are the program's spine (`<module>`, `main`, the
 * training loop); the frames called from the spine's last frame are the step's
 * activities (`next(loader)`, the forward pass, `save_checkpoint`, logging). A root that
 * is not the user's code (an autograd engine thread, an annotation) is an activity
 * itself, but for a launcher's (below). An activity holding the excess is named at a function: below an annotation, a
 * module's label, an operator or a builtin (no code a user changes), at the first
 * function holding all of the excess (within the decision), none when there is none;
 * then down through the user's own functions while one of them holds it all, and never
 * into PyTorch's or a library's: the frame named is the user's function that does the
 * work, or the library call the user's loop makes (`DataLoader.__next__`), the frame a
 * user would change. User code is a `file.py: function` frame whose file is not
 * PyTorch's (`torch/...`) nor an installed package's or the standard library's
 * (site-packages, dist-packages, lib/python, or a standard module as the collector names
 * it: `multiprocessing/process.py`). A root that is a module's label or a library's
 * function holding a user frame that holds all its time (within the decision) is a
 * launcher (torch.multiprocessing.spawn's frames, runpy's): the user's spine starts at
 * that frame.
 *  - On one rank (3 workers or more, as the peers): the rank's time in the frame above
 *    the typical worker's, step by step (the frame's rows' per-step medians summed),
 *    counted in the steps where it stands out of the workers' spread there
 *    (SPREAD_SIGMAS) and clears the peers' floor (3% of the step). Found in every profiled step, it is a slow function spread over
 *    stacks; found in some only, an intermittent stall (a synchronous checkpoint, a log
 *    flush): the finding says in which steps, and that profiling more steps shows whether
 *    it recurs. Its fix removes, per step, the rank's time in each of the frame's stacks
 *    above the other workers' median (one part per stack).
 *  - On every worker of a GPU job (on (almost) every one, as the common rules; not on
 *    GPUs known to be shared by several workers, where a worker's Python does not idle
 *    the GPU), when the typical worker's time in the frame is above JUDGED_SUBTREE of the
 *    step by the decision. Its fix moves the frame's work off the step (loader workers, a
 *    background thread, asynchronous I/O): it removes all of every worker's time there
 *    (a loader with enough workers leaves 0.3 ms of `__next__` in the main process). An
 *    every-worker Python finding of the common rules on a stack inside the frame is
 *    taken in (its stack is one of the parts): the frame replaces it. Where a CPU-bound
 *    finding stays that the frame does not explain, the frame is one piece of the CPU
 *    side that finding names: not added (the joint saving would count it twice).
 * A per-rank subtree is kept only when it saves more than the findings made (the peers'
 * finding on one stack of it may name the cause already); it then takes in the peers'
 * findings on its stacks about that rank. None is looked for when no worker of the job
 * was seen waiting (pt_job_waits_unseen: a CPU job's collectives on gloo's threads): a
 * rank's time above the others' is then its wait for them as much as its work (a real
 * 3-rank gloo job: rank 1's backward 20.6 ms longer in one step, waiting).
 *
 * Communication (comm is not work in the model: a fix shortens the waits of its
 * segments, so the saving is capped by the waits no worker's work sets, as for the
 * exposed-communication finding):
 *  - Overlap, per rank: the share of a worker's compute time with its communication
 *    running beside it (communication busy but not exposed, over compute busy; not the
 *    share of its communication hidden, which a rank with less compute, waiting more,
 *    has lower without any fault: noisy synthetic gloo jobs, 64% against 75%, all at
 *    94% of their compute). A rank covering less of its compute than the others (below
 *    their median by more than OVERLAP_SIGMAS of their spread and by OVERLAP_FLOOR of
 *    it: its collectives on its compute stream, or waited for at once) stops in them
 *    before its work goes on: the step model counts those waits, in collectives no other
 *    worker waited in, as its own (whatif.h), and overlapped they go; the model says what
 *    that saves, as the rank then arrives where its work puts it, against the others'
 *    work and noise (synthetic unoverlapped_allreduce, 8 to 128 workers, noise 0 to 0.3:
 *    within 0.6 points of the true saving; the share of its communication the others
 *    hide would say 12.8% for a true 6.7% at 8 workers and noise 0.1, as the ranks the
 *    noise slows then set the pace). Summaries without sync points show
 *    no such waits: it then saves the share of its communication time the others hide
 *    (less what it hides already), never more than its exposed communication less one
 *    call (the last has nothing left to hide under), its compute, nor the waits no
 *    worker's work sets. A rank that
 *    exposes less than the others wait (by the decision) is late for its work, not its
 *    communication (the others' collectives run on under their compute meanwhile:
 *    synthetic slow_gpu at 5%, 29% covered against 46%): not judged here, unless it
 *    hides under OVERLAP_FLOOR of the share of its communication the others hide (a
 *    late rank's collectives, short as nobody waits in them, hide as much: 52% against
 *    41-63% in every synthetic straggler kind; one not overlapped hides none, and with
 *    noise the others wait in theirs for the noise too, so it exposes a little less than
 *    they do: 43.9 ms against 45.4 at 16 workers, noise 0.1). Nor is a rank
 *    another rank covers nearly as little as (closer to it than to the others' median):
 *    ranks of one role do (a healthy pipeline's last stage: 29% against 57-87% in the
 *    middle stages).
 *  - Bucketing, on every worker: a collective row whose calls pay their latency (above
 *    the decision: a call's time holds its wait for the other ranks, read as latency)
 *    saves what bucketing.c says a bucketed job, overlapped with the backward pass, no
 *    longer waits: at least that latency, and of what the collectives take past the last
 *    worker's work (the exposed time, capped by the waits no worker's work sets: the
 *    others' waits for its noise stay) all but the last bucket's transfer. The finding
 *    explains both (its excess_ms), so the rolled-up exposed-communication finding goes.
 *    It is named by the user's function that makes the calls (the stacks and runtime
 *    callers through torch.distributed), else by the collective.
 *
 * Cost: the frame tree is one node per distinct stack prefix; the per-step medians are
 * O(rows x workers x steps), as the peers' pass; per-rank candidates look at the
 * MAX_RANKS ranks whose Python time is furthest above the typical worker's. */
#include "diagnose/bucketing.h"
#include "diagnose/candidates.h"
#include "diagnose/costing.h"
#include "diagnose/whatif.h"
#include "summarize/classify.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A step's own Python (feeding its data, its loop) is normal work: an every-worker subtree
 * is judged when it takes more than this share of the step on (almost) every worker, the
 * share the common rules judge one stack at (findings.c COMMON_PYTHON). The h200 jobs'
 * healthy random-batch loaders take 10% (kineto) to 16% (native, four ranks sharing a
 * GPU: not judged, see python_idles_gpu); a starved or single-process loader 23-30%. */
#define JUDGED_SUBTREE 0.15
#define MOST_WORKERS 0.9      /* an every-worker finding: on (almost) every worker, as findings.c's */
#define MAX_RANKS 16           /* ranks looked at for per-rank subtrees */
#define MAX_FRAMES 3           /* frames kept per rank (and on every worker) */
#define MAX_PARTS 64           /* stacks a subtree finding removes (largest first) */
#define SPREAD_SIGMAS 5.0      /* a rank's excess in a step stands out of the workers' spread */
#define MAX_OVERLAP_RANKS 8
#define OVERLAP_SIGMAS 5.0     /* a rank overlaps less than the others beyond their spread ... */
/* ... and by half their share at least:
 * ranks of a healthy job cover their compute a few points apart, by which collective
 * each waits in (quiet synthetic jobs: 52% against 54%, beyond a spread of a point),
 * while a rank that does not overlap covers none of it. */
#define OVERLAP_FLOOR 0.5
#define STEPS_SAID 4           /* steps an intermittent finding lists */
#define NO_FRAME SIZE_MAX

/* Strings that mark the findings made here (compared by address). */
static const char METRIC_RANK_SUBTREE[] = "ms per step above the typical worker, in the frame and the code it calls";
static const char METRIC_ALL_SUBTREE[] = "share of the step in the frame and the code it calls (median over workers)";
static const char METRIC_OVERLAP[] = "share of its communication time hidden under its own work";
static const char METRIC_BUCKETS[] = "calls per step (median over workers)";

static bool made_here(const finding *f)
{
    return f->metric == METRIC_RANK_SUBTREE || f->metric == METRIC_ALL_SUBTREE || f->metric == METRIC_OVERLAP ||
           f->metric == METRIC_BUCKETS;
}

/* ------------------------------------------------------------ the decision */

typedef struct context {
    const pt_analysis *a;
    const pt_whatif *m;
    size_t steps;          /* the model's */
    double step_ms;        /* the modelled step */
    double decision_ms;    /* a saving worth a finding: above the noise and 1% of the step */
    double *step_len;      /* [w * steps + s]: each worker's step length */
    double *typical_len;   /* [s]: the median worker's */
} context;

/* The typical worker's step-to-step noise: the median over workers of the robust spread
 * of its step times (pt_spread_of: 1.4826 x MAD). NAN below two steps. */
static double step_noise_ms(const context *c)
{
    size_t n = c->a->n, steps = c->steps;
    if (!pt_whatif_by_step(c->m) || steps < 2 || n == 0)
        return NAN;
    double *spread = pt_xmalloc(n * sizeof *spread), *scratch = pt_xmalloc(2 * steps * sizeof *scratch);
    for (size_t w = 0; w < n; w++)
        spread[w] = pt_spread_of(c->step_len + w * steps, steps, scratch).sigma;
    double noise = pt_median(spread, n);
    free(spread);
    free(scratch);
    return noise;
}

static void context_init(context *c, const pt_analysis *a, const pt_whatif *m)
{
    memset(c, 0, sizeof *c);
    c->a = a, c->m = m;
    c->steps = pt_whatif_steps(m);
    c->step_ms = pt_whatif_step_ms(m);
    size_t n = a->n, steps = c->steps;
    c->step_len = pt_xmalloc((n * steps + 1) * sizeof *c->step_len);
    c->typical_len = pt_xmalloc((steps + 1) * sizeof *c->typical_len);
    double *column = pt_xmalloc((n + 1) * sizeof *column);
    for (size_t s = 0; s < steps; s++) {
        for (size_t w = 0; w < n; w++)
            column[w] = c->step_len[w * steps + s] = pt_whatif_by_step(m) ? (double)a->workers[w]->steps[s].dur_ns / 1e6
                                                                           : a->step_ms[w];
        c->typical_len[s] = pt_median(column, n);
    }
    free(column);
    double noise = step_noise_ms(c);
    c->decision_ms = fmax(isfinite(noise) ? noise : pt_floor_ms(a), PT_MIN_SAVING_SHARE * c->step_ms);
}

static void context_free(context *c)
{
    free(c->step_len);
    free(c->typical_len);
}

/* A row's exposed ms in each modelled step, out[w * steps + s] (per-step values when the
 * functions carry them for these steps, else the window's mean per step). */
static void row_step_values(const context *c, const pt_fn_row *row, double *out)
{
    const pt_analysis *a = c->a;
    size_t steps = c->steps;
    if (pt_whatif_by_step(c->m) && a->function_steps == steps) {
        pt_row_step_ms(a, row, out);
        return;
    }
    double *mean = pt_xmalloc((a->n + 1) * sizeof *mean);
    pt_row_exposed_ms(a, row, mean);
    for (size_t i = 0; i < a->n * steps; i++)
        out[i] = mean[i / steps];
    free(mean);
}

/* What adding finding `index` of list saves beyond the others (those in left_out, when
 * given, left out of both), as a share of the step. */
static double marginal_saving(const context *c, const finding_list *list, size_t index, const bool *left_out)
{
    bool *out = pt_xcalloc(list->count + 1, sizeof *out);
    if (left_out)
        memcpy(out, left_out, list->count * sizeof *out);
    out[index] = false;
    double with = pt_joint_saving(c->a, c->m, list, out);
    out[index] = true;
    double without = pt_joint_saving(c->a, c->m, list, out);
    free(out);
    return with - without;
}

static bool worth_it(const context *c, double share)
{
    return share * c->step_ms >= c->decision_ms;
}

/* ------------------------------------------------------------ the frame tree */

typedef struct frame {
    size_t parent, first_child, next_sibling;
    const char *path;     /* the stack down to this frame: path[0 .. path_len) */
    size_t path_len, label; /* the frame's own label starts at path + label */
    bool function;        /* a Python function (`file.py: name`) */
    bool user;            /* ... of the user's own code */
} frame;

typedef struct frame_tree {
    frame *frames;
    size_t count, cap;
    size_t *slots, slot_mask;    /* (parent, label) -> frame + 1; 0 empty */
    const pt_fn_row **rows;      /* the Python rows */
    size_t *leaf;                /* [k]: the frame of row k's whole stack */
    size_t row_count, steps;
    double *median;              /* [k * steps + s]: row k's median over workers in step s */
    double *typical;             /* [f * steps + s]: the median rows summed over the frame's stacks */
} frame_tree;

static bool has_at(const char *s, size_t len, size_t at, const char *what)
{
    size_t k = strlen(what);
    return at + k <= len && memcmp(s + at, what, k) == 0;
}

static bool contains(const char *s, size_t len, const char *what)
{
    for (size_t i = 0; i < len; i++)
        if (has_at(s, len, i, what))
            return true;
    return false;
}

/* Where a `file.py: function` frame's file name ends (at ".py: "), or len: not a
 * function (a builtin, an operator, an annotation, a module's label). */
static size_t file_end(const char *label, size_t len)
{
    size_t file = 0;
    while (file < len && !has_at(label, len, file, ".py: "))
        file++;
    return file;
}

/* A function of the user's program: not PyTorch's nor a package's (see the header
 * comment). */
static bool user_frame(const char *label, size_t len)
{
    size_t file = file_end(label, len);
    if (file == len)
        return false;
    return !has_at(label, len, 0, "torch/") && !contains(label, file, "site-packages/") &&
           !contains(label, file, "dist-packages/") && !contains(label, file, "/lib/python") &&
           !contains(label, file, "<frozen") && !pt_file_in_stdlib(label, file + 3);
}

static uint64_t label_hash(size_t parent, const char *label, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)parent * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)label[i]) * 1099511628211ull;
    return h;
}

static size_t frame_of(frame_tree *t, size_t parent, const char *path, size_t label, size_t end)
{
    size_t len = end - label;
    for (size_t i = (size_t)label_hash(parent, path + label, len) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        if (!t->slots[i]) {
            PT_GROW(t->frames, t->cap, t->count + 1);
            frame *f = &t->frames[t->count];
            *f = (frame){parent, NO_FRAME, NO_FRAME, path, end, label, file_end(path + label, len) < len,
                         user_frame(path + label, len)};
            if (parent != NO_FRAME) {
                f->next_sibling = t->frames[parent].first_child;
                t->frames[parent].first_child = t->count;
            }
            t->slots[i] = ++t->count;
            return t->count - 1;
        }
        const frame *f = &t->frames[t->slots[i] - 1];
        if (f->parent == parent && f->path_len - f->label == len && memcmp(f->path + f->label, path + label, len) == 0)
            return t->slots[i] - 1;
    }
}

/* Every Python row's stack as frames, and the typical worker's time per frame and step. */
static void tree_build(frame_tree *t, const context *c)
{
    const pt_analysis *a = c->a;
    memset(t, 0, sizeof *t);
    t->steps = c->steps;
    size_t frames = 0;
    for (size_t i = 0; i < a->row_count; i++)
        if (a->rows[i].cls == PT_CLASS_PYTHON) {
            t->row_count++;
            for (const char *p = a->rows[i].name; *p; p++)
                frames += *p == '|';
            frames++;
        }
    size_t slots = 16;
    while (slots < 2 * frames)
        slots *= 2;
    t->slots = pt_xcalloc(slots, sizeof *t->slots);
    t->slot_mask = slots - 1;
    t->rows = pt_xmalloc((t->row_count + 1) * sizeof *t->rows);
    t->leaf = pt_xmalloc((t->row_count + 1) * sizeof *t->leaf);
    size_t k = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        if (a->rows[i].cls != PT_CLASS_PYTHON)
            continue;
        const char *name = a->rows[i].name;
        size_t parent = NO_FRAME, label = 0, end = 0;
        for (;; end++)
            if (name[end] == '|' || !name[end]) {
                parent = frame_of(t, parent, name, label, end);
                if (!name[end])
                    break;
                label = end + 1;
            }
        t->rows[k] = &a->rows[i];
        t->leaf[k++] = parent;
    }
    size_t steps = t->steps, n = a->n;
    t->median = pt_xmalloc((t->row_count * steps + 1) * sizeof *t->median);
    t->typical = pt_xcalloc(t->count * steps + 1, sizeof *t->typical);
    double *values = pt_xmalloc((n * steps + 1) * sizeof *values), *column = pt_xmalloc((n + 1) * sizeof *column);
    for (k = 0; k < t->row_count; k++) {
        row_step_values(c, t->rows[k], values);
        for (size_t s = 0; s < steps; s++) {
            for (size_t w = 0; w < n; w++)
                column[w] = values[w * steps + s];
            t->median[k * steps + s] = pt_median(column, n);
        }
        for (size_t f = t->leaf[k]; f != NO_FRAME; f = t->frames[f].parent)
            for (size_t s = 0; s < steps; s++)
                t->typical[f * steps + s] += t->median[k * steps + s];
    }
    free(values);
    free(column);
}

static void tree_free(frame_tree *t)
{
    free(t->frames);
    free(t->slots);
    free(t->rows);
    free(t->leaf);
    free(t->median);
    free(t->typical);
}

static double mean_of(const double *per_step, size_t steps)
{
    double sum = 0;
    for (size_t s = 0; s < steps; s++)
        sum += per_step[s];
    return steps ? sum / (double)steps : 0;
}

/* The mean over steps of a frame's per-step values, each counted from 0 up. */
static double held(const frame_tree *t, const double *per_frame_step, size_t f)
{
    double sum = 0;
    for (size_t s = 0; s < t->steps; s++)
        sum += fmax(0, per_frame_step[f * t->steps + s]);
    return t->steps ? sum / (double)t->steps : 0;
}

/* Row k's stack runs through frame f. */
static bool row_under(const frame_tree *t, size_t k, size_t f)
{
    for (size_t g = t->leaf[k]; g != NO_FRAME; g = t->frames[g].parent)
        if (g == f)
            return true;
    return false;
}

/* The child of f the typical worker spends the most time in, when it holds all of f's
 * time but the decision; else NO_FRAME. */
static size_t child_holding_all(const frame_tree *t, size_t f, double decision_ms)
{
    size_t best = NO_FRAME;
    for (size_t ch = t->frames[f].first_child; ch != NO_FRAME; ch = t->frames[ch].next_sibling)
        if (best == NO_FRAME ||
            mean_of(t->typical + ch * t->steps, t->steps) > mean_of(t->typical + best * t->steps, t->steps))
            best = ch;
    if (best == NO_FRAME)
        return NO_FRAME;
    double rest = mean_of(t->typical + f * t->steps, t->steps) - mean_of(t->typical + best * t->steps, t->steps);
    return rest < decision_ms ? best : NO_FRAME;
}

/* The user's frame a root that is not the user's code starts, holding all of its time:
 * a launcher (a module's label or a library's function: torch.multiprocessing.spawn's
 * frames, runpy's) runs the user's program below it; NO_FRAME when none does, or the
 * root is no launcher (an annotation: an autograd thread's). */
static size_t launched(const frame_tree *t, size_t root, double decision_ms)
{
    const frame *r = &t->frames[root];
    size_t len = r->path_len - r->label;
    if (!r->function && !(len >= 10 && memcmp(r->path + r->path_len - 10, ": <module>", 10) == 0))
        return NO_FRAME;
    size_t f = root;
    while (f != NO_FRAME && !t->frames[f].user)
        f = child_holding_all(t, f, decision_ms);
    return f;
}

/* The step's activities (see the header comment): below each user root's spine (or the
 * spine of the user's program a launcher runs), or the root itself. Returns how many,
 * into out (room for t->count). */
static size_t activities(const frame_tree *t, double decision_ms, size_t *out)
{
    size_t count = 0;
    for (size_t r = 0; r < t->count; r++) {
        if (t->frames[r].parent != NO_FRAME)
            continue;
        size_t spine = t->frames[r].user ? r : launched(t, r, decision_ms);
        if (spine == NO_FRAME) {
            out[count++] = r;
            continue;
        }
        for (;;) {
            size_t best = child_holding_all(t, spine, decision_ms);
            if (best == NO_FRAME || !t->frames[best].user)
                break;
            spine = best;
        }
        for (size_t ch = t->frames[spine].first_child; ch != NO_FRAME; ch = t->frames[ch].next_sibling)
            out[count++] = ch;
    }
    return count;
}

/* The child of f holding the most of the excess, when it holds all of f's (within the
 * decision); else NO_FRAME. */
static size_t child_holding(const frame_tree *t, const double *excess, size_t f, double decision_ms)
{
    size_t best = NO_FRAME;
    for (size_t ch = t->frames[f].first_child; ch != NO_FRAME; ch = t->frames[ch].next_sibling)
        if (best == NO_FRAME || held(t, excess, ch) > held(t, excess, best))
            best = ch;
    return best != NO_FRAME && held(t, excess, best) >= held(t, excess, f) - decision_ms ? best : NO_FRAME;
}

/* From an activity holding the excess to the frame a user would change: a function (an
 * annotation, a module's label, an operator or a builtin is no code to change: below one,
 * the first function holding the excess; NO_FRAME when there is none), then down through
 * the user's own functions while one of them holds it all (within the decision). */
static size_t refine(const frame_tree *t, const double *excess, size_t f, double decision_ms)
{
    while (f != NO_FRAME && !t->frames[f].function)
        f = child_holding(t, excess, f, decision_ms);
    while (f != NO_FRAME && t->frames[f].user) {
        size_t next = child_holding(t, excess, f, decision_ms);
        if (next == NO_FRAME || !t->frames[next].user)
            break;
        f = next;
    }
    return f;
}

typedef struct chosen {
    size_t frame;
    double held;
} chosen;

static int by_held(const void *x, const void *y)
{
    const chosen *a = x, *b = y;
    int order = pt_cmp_desc(a->held, b->held);
    return order ? order : (a->frame > b->frame) - (a->frame < b->frame);
}

/* The frames holding an excess: each activity holding at least the decision, refined;
 * the largest MAX_FRAMES, into out. Returns how many. */
static size_t frames_holding(const frame_tree *t, const double *excess, double decision_ms, chosen *out)
{
    size_t *tops = pt_xmalloc((t->count + 1) * sizeof *tops);
    size_t count = activities(t, decision_ms, tops), found = 0;
    chosen *all = pt_xmalloc((count + 1) * sizeof *all);
    for (size_t i = 0; i < count; i++)
        if (held(t, excess, tops[i]) >= decision_ms) {
            size_t f = refine(t, excess, tops[i], decision_ms);
            if (f != NO_FRAME)
                all[found++] = (chosen){f, held(t, excess, f)};
        }
    qsort(all, found, sizeof *all, by_held);
    found = PT_MIN(found, (size_t)MAX_FRAMES);
    memcpy(out, all, found * sizeof *out);
    free(all);
    free(tops);
    return found;
}

/* ------------------------------------------------------------ subtree findings */

typedef struct part_order {
    size_t row;
    double weight;
} part_order;

static int by_weight(const void *x, const void *y)
{
    const part_order *a = x, *b = y;
    int order = pt_cmp_desc(a->weight, b->weight);
    return order ? order : (a->row > b->row) - (a->row < b->row);
}

/* Whether existing finding e is a Python finding about g's workers (every worker, or the
 * one g names) on a stack inside g's frame: g takes it in. */
static bool inside(const finding *e, const finding *g)
{
    if (e == g || made_here(e) || e->cls != PT_CLASS_PYTHON || strcmp(e->category, "python") != 0 ||
        e->all_workers != g->all_workers)
        return false;
    if (!g->all_workers && (e->worker_count != 1 || e->workers[0] != g->workers[0]))
        return false;
    return strcmp(e->function, g->function) == 0 || pt_stack_is_ancestor(g->function, e->function);
}

/* The findings the last one of list takes in (inside), into taken (list->count). */
static void mark_inside(const finding_list *list, bool *taken)
{
    size_t last = list->count - 1;
    for (size_t e = 0; e < last; e++)
        taken[e] = inside(&list->items[e], &list->items[last]);
    taken[last] = false;
}

/* Drops the findings taken in by the last one; hardware evidence explaining them explains
 * it instead. */
static void take_in(finding_list *list, bool *taken)
{
    size_t last = list->count - 1;
    for (size_t e = 0; e < list->count; e++)
        if (list->items[e].explains && taken[list->items[e].explains - 1])
            list->items[e].explains = last + 1;
    pt_finding_list_drop(list, taken);
}

/* A frame's finding, its parts still to add. */
static finding *subtree_finding(finding_list *list, const frame_tree *t, size_t f, const char *metric)
{
    char *path = pt_xstrndup(t->frames[f].path, t->frames[f].path_len);
    finding *g = pt_finding_add(list, "python", path, "Python functions");
    free(path);
    g->fix = PT_FIX_ROW;
    g->cls = PT_CLASS_PYTHON;
    g->classes = PT_CLASS_BIT(PT_CLASS_PYTHON);
    g->metric = metric;
    return g;
}

static finding *add_part(finding *g)
{
    g->parts = pt_xrealloc(g->parts, (g->part_count + 1) * sizeof *g->parts);
    finding *p = &g->parts[g->part_count++];
    memset(p, 0, sizeof *p);
    return p;
}

static void part_of_row(finding *p, const pt_fn_row *row, pt_fix_kind fix)
{
    p->category = "python";
    p->function = pt_xstrdup(row->name);
    p->section = "Python functions";
    p->metric = "bottleneck ms per step";
    p->fix = fix;
    p->row = row;
    p->cls = PT_CLASS_PYTHON;
    p->classes = PT_CLASS_BIT(PT_CLASS_PYTHON);
}

/* "`dataloader.py: __next__`": the frame's own label. */
static void put_frame(const frame_tree *t, size_t f, pt_buf *out)
{
    const frame *fr = &t->frames[f];
    pt_buf_putc(out, '`');
    pt_buf_append(out, fr->path + fr->label, fr->path_len - fr->label);
    pt_buf_putc(out, '`');
}

/* " (`fetch` 9.8 ms, `collate` 3.3 ms and 2 more)": the parts' own frames and excess. */
static void put_parts(const finding *g, pt_buf *out)
{
    if (g->part_count < 2)
        return;
    pt_buf_puts(out, " (");
    for (size_t i = 0; i < g->part_count && i < 3; i++) {
        const char *name = g->parts[i].function, *last = strrchr(name, '|');
        pt_buf_printf(out, "%s`%s` ", i ? ", " : "", last ? last + 1 : name);
        pt_put_ms(out, g->parts[i].excess_ms);
    }
    if (g->part_count > 3)
        pt_buf_printf(out, " and %zu more", g->part_count - 3);
    pt_buf_putc(out, ')');
}

/* Rank w's subtree at f: one part per stack under f where w spends more than the other
 * workers, removed above their median step by step. */
static void rank_subtree_parts(const context *c, const frame_tree *t, size_t f, size_t w, const double *row_rank,
                               finding *g)
{
    size_t steps = t->steps;
    part_order *order = pt_xmalloc((t->row_count + 1) * sizeof *order);
    size_t count = 0;
    for (size_t k = 0; k < t->row_count; k++) {
        if (!row_under(t, k, f))
            continue;
        double above = 0;
        for (size_t s = 0; s < steps; s++)
            above += fmax(0, row_rank[k * steps + s] - t->median[k * steps + s]);
        if (above > 0)
            order[count++] = (part_order){k, above};
    }
    qsort(order, count, sizeof *order, by_weight);
    for (size_t i = 0; i < count && i < MAX_PARTS; i++) {
        finding *p = add_part(g);
        part_of_row(p, t->rows[order[i].row], PT_FIX_ROW);
        pt_finding_name_worker(p, w, order[i].weight / (double)steps);
        pt_cost_finding(c->a, c->m, p);
    }
    free(order);
}

/* The steps in which a rank's excess in frame f stands out (into above): at least the
 * decision, the peers' floor for time above the others (pt_floor_ms, 3% of the step: a
 * CPU job's 2.24 ms in one step of 92, its step-to-step noise 0.4 ms by the workers'
 * MAD, is no stall) and SPREAD_SIGMAS times the spread of the frame's time across the
 * workers in that step (1.4826 x MAD: a loader whose time swings by a third from rank to
 * rank, as on processes sharing a GPU, is not one rank's stall). Returns how many. */
static size_t steps_standing_out(const context *c, const frame_tree *t, size_t f, const double *excess, bool *above)
{
    const pt_analysis *a = c->a;
    size_t n = a->n, steps = t->steps, count = 0;
    double *frame_ms = pt_xcalloc(n * steps + 1, sizeof *frame_ms);
    double *values = pt_xmalloc((n * steps + 1) * sizeof *values);
    for (size_t k = 0; k < t->row_count; k++) {
        if (!row_under(t, k, f))
            continue;
        row_step_values(c, t->rows[k], values);
        for (size_t i = 0; i < n * steps; i++)
            frame_ms[i] += values[i];
    }
    double *column = pt_xmalloc((n + 1) * sizeof *column), *scratch = pt_xmalloc((2 * n + 2) * sizeof *scratch);
    for (size_t s = 0; s < steps; s++) {
        for (size_t v = 0; v < n; v++)
            column[v] = frame_ms[v * steps + s];
        pt_spread spread = pt_spread_of(column, n, scratch);
        above[s] = excess[f * steps + s] >= fmax(fmax(c->decision_ms, pt_floor_ms(a)), SPREAD_SIGMAS * spread.sigma);
        count += above[s];
    }
    free(column);
    free(scratch);
    free(frame_ms);
    free(values);
    return count;
}

static void describe_rank_subtree(const context *c, const frame_tree *t, size_t f, const double *excess,
                                  const bool *above, finding *g)
{
    const pt_analysis *a = c->a;
    size_t w = g->workers[0], steps = t->steps, happened = 0, listed = 0;
    double in_steps = 0;
    pt_buf when = PT_BUF_INIT, s = PT_BUF_INIT;
    for (size_t i = 0; i < steps; i++) {
        double e = excess[f * steps + i];
        if (!above[i])
            continue;
        happened++, in_steps += e;
        if (pt_whatif_by_step(c->m) && listed < STEPS_SAID) {
            pt_buf_printf(&when, "%sstep %lld: ", listed ? ", " : "", (long long)a->workers[w]->steps[i].step);
            pt_put_ms(&when, e);
            listed++;
        }
    }
    bool intermittent = pt_whatif_by_step(c->m) && happened < steps;
    pt_ranks_phrase(a, g, &s);
    if (intermittent) {
        pt_buf_puts(&s, " spends ");
        pt_put_ms(&s, happened ? in_steps / (double)happened : 0);
        pt_buf_puts(&s, " more than the other ranks in ");
    } else {
        pt_buf_puts(&s, " spends ");
        pt_put_ms(&s, g->values[0]);
        pt_buf_puts(&s, " more per step than the other ranks in ");
    }
    put_frame(t, f, &s);
    pt_buf_puts(&s, " and the code it calls");
    put_parts(g, &s);
    if (intermittent)
        pt_buf_printf(&s, " in %zu of the %zu profiled steps (%s%s), ", happened, steps, when.data ? when.data : "",
                      happened > listed ? ", ..." : "");
    else
        pt_buf_printf(&s, ", in %s profiled step%s, ", steps > 1 ? "every" : "its", steps > 1 ? "" : "");
    pt_buf_puts(&s, "while the others wait for it");
    pt_put_saving(a, g, c->step_ms, &s);
    if (intermittent)
        pt_buf_puts(&s, ". An intermittent stall (a synchronous checkpoint, a log flush, a collection): profile more "
                        "steps (--steps) to see how often it recurs, and make the work asynchronous, less frequent or "
                        "shared by every rank.");
    else
        pt_buf_puts(&s, "; speed this code up on that rank, or move it off the step (a background thread or worker).");
    g->summary = pt_buf_take(&s);
    pt_buf_free(&when);
}

/* One rank's frames: each kept when it saves beyond the findings already made. */
static void rank_subtrees(const context *c, const frame_tree *t, size_t w, const double *row_rank, finding_list *list)
{
    size_t steps = t->steps;
    double *excess = pt_xcalloc(t->count * steps + 1, sizeof *excess);
    for (size_t k = 0; k < t->row_count; k++)
        for (size_t f = t->leaf[k]; f != NO_FRAME; f = t->frames[f].parent)
            for (size_t s = 0; s < steps; s++)
                excess[f * steps + s] += row_rank[k * steps + s] - t->median[k * steps + s];
    chosen found[MAX_FRAMES];
    size_t count = frames_holding(t, excess, c->decision_ms, found);
    bool *above = pt_xmalloc((steps + 1) * sizeof *above);
    for (size_t i = 0; i < count; i++) {
        finding *g = subtree_finding(list, t, found[i].frame, METRIC_RANK_SUBTREE);
        pt_finding_name_worker(g, w, found[i].held);
        g->median = mean_of(t->typical + found[i].frame * steps, steps);
        rank_subtree_parts(c, t, found[i].frame, w, row_rank, g);
        pt_cost_finding(c->a, c->m, g);
        g->values[0] = g->excess_ms;
        /* Beyond every finding made: a peer finding on one of its stacks that holds the
         * excess already names the cause (the stack is in the frame); one that holds a
         * part of it becomes a part. */
        bool *taken = pt_xcalloc(list->count, sizeof *taken);
        mark_inside(list, taken);
        double beyond = marginal_saving(c, list, list->count - 1, NULL);
        if (!g->part_count || !worth_it(c, g->impact) || !worth_it(c, beyond) ||
            !steps_standing_out(c, t, found[i].frame, excess, above)) {
            pt_finding_drop_last(list);
        } else {
            describe_rank_subtree(c, t, found[i].frame, excess, above, g);
            take_in(list, taken); /* their stacks are its parts */
        }
        free(taken);
    }
    free(above);
    free(excess);
}

typedef struct ranked {
    size_t w;
    double above;
} ranked;

static int by_above(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    int order = pt_cmp_desc(a->above, b->above);
    return order ? order : (a->w > b->w) - (a->w < b->w);
}

/* The ranks whose Python time is above the typical worker's by the decision in some step,
 * furthest first (at most MAX_RANKS). */
static size_t ranks_above(const context *c, ranked *out)
{
    const pt_analysis *a = c->a;
    size_t n = a->n, steps = c->steps, count = 0;
    double *values = pt_xcalloc(n * steps + 1, sizeof *values), *column = pt_xmalloc((n + 1) * sizeof *column);
    double *typical = pt_xmalloc((steps + 1) * sizeof *typical);
    for (size_t i = 0; i < a->row_count; i++) {
        if (a->rows[i].cls != PT_CLASS_PYTHON)
            continue;
        double *row = pt_xmalloc((n * steps + 1) * sizeof *row);
        row_step_values(c, &a->rows[i], row);
        for (size_t j = 0; j < n * steps; j++)
            values[j] += row[j];
        free(row);
    }
    for (size_t s = 0; s < steps; s++) {
        for (size_t w = 0; w < n; w++)
            column[w] = values[w * steps + s];
        typical[s] = pt_median(column, n);
    }
    ranked *all = pt_xmalloc((n + 1) * sizeof *all);
    for (size_t w = 0; w < n; w++) {
        double most = 0;
        for (size_t s = 0; s < steps; s++)
            most = fmax(most, values[w * steps + s] - typical[s]);
        if (most >= c->decision_ms)
            all[count++] = (ranked){w, most};
    }
    qsort(all, count, sizeof *all, by_above);
    count = PT_MIN(count, (size_t)MAX_RANKS);
    memcpy(out, all, count * sizeof *out);
    free(all);
    free(values);
    free(column);
    free(typical);
    return count;
}

static void per_rank_subtrees(const context *c, finding_list *list)
{
    const pt_analysis *a = c->a;
    if (a->n < 3)
        return;
    ranked ranks[MAX_RANKS];
    size_t count = ranks_above(c, ranks);
    if (!count)
        return;
    frame_tree t;
    tree_build(&t, c);
    size_t steps = t.steps, n = a->n, per_rank = t.row_count * steps + 1;
    double *values = pt_xmalloc((n * steps + 1) * sizeof *values);
    double *row_rank = pt_xmalloc(count * per_rank * sizeof *row_rank); /* [r][k * steps + s] */
    for (size_t k = 0; k < t.row_count; k++) {
        row_step_values(c, t.rows[k], values);
        for (size_t r = 0; r < count; r++)
            memcpy(row_rank + r * per_rank + k * steps, values + ranks[r].w * steps, steps * sizeof *values);
    }
    for (size_t r = 0; r < count; r++)
        rank_subtrees(c, &t, ranks[r].w, row_rank + r * per_rank, list);
    free(values);
    free(row_rank);
    tree_free(&t);
}

/* Every worker's time in f, removed: one part per stack under f (the fix moves the work
 * off the step: loader workers, a background thread, asynchronous I/O). */
static void every_worker_parts(const context *c, const frame_tree *t, size_t f, finding *g)
{
    const pt_analysis *a = c->a;
    size_t steps = t->steps;
    part_order *order = pt_xmalloc((t->row_count + 1) * sizeof *order);
    size_t count = 0;
    for (size_t k = 0; k < t->row_count; k++)
        if (row_under(t, k, f))
            order[count++] = (part_order){k, mean_of(t->median + k * steps, steps)};
    qsort(order, count, sizeof *order, by_weight);
    double *ratio = pt_xmalloc((a->n + 1) * sizeof *ratio);
    for (size_t i = 0; i < count && i < MAX_PARTS; i++) {
        finding *p = add_part(g);
        part_of_row(p, t->rows[order[i].row], PT_FIX_COMMON);
        p->all_workers = true;
        p->metric = "bottleneck ratio (median over workers)";
        pt_row_exposed_ratio(a, p->row, ratio);
        for (size_t w = 0; w < a->n; w++)
            pt_finding_name_worker(p, w, ratio[w]);
        p->median = pt_median_of(ratio, a->n, a->scratch);
        pt_cost_finding(a, c->m, p);
    }
    free(ratio);
    free(order);
}

static const char *subtree_advice(const frame_tree *t, size_t f)
{
    const frame *fr = &t->frames[f];
    if (contains(fr->path + fr->label, fr->path_len - fr->label, "dataloader"))
        return "the GPU idles meanwhile: load data in background workers (DataLoader num_workers, pin_memory, "
               "prefetch_factor) so the next batch is ready when the step asks for it.";
    return "the GPU idles meanwhile: move this work off the critical path (a background thread or process, "
           "asynchronous I/O, less often) or speed it up.";
}

static bool rolled_up_on_every_worker(const finding *f);
static double unexplained_ms(const context *c, const finding_list *list, const finding *g);

/* A rolled-up finding over Python on every worker (a CPU-bound job) that the subtrees
 * found do not explain: the frame is one piece of CPU-side work among others, which that
 * finding names (and the joint saving would count its time twice). */
static bool cpu_bound_beyond(const context *c, const finding_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        const finding *g = &list->items[i];
        if (rolled_up_on_every_worker(g) && (g->classes & PT_CLASS_BIT(PT_CLASS_PYTHON)) &&
            unexplained_ms(c, list, g) >= c->decision_ms)
            return true;
    }
    return false;
}

static void describe_every_worker_subtree(const context *c, const frame_tree *t, size_t f, finding *g)
{
    const pt_analysis *a = c->a;
    size_t above = 0;
    for (size_t k = 0; k < g->worker_count; k++)
        above += g->values[k] > g->expected;
    pt_buf s = PT_BUF_INIT;
    char pct[PT_PERCENT_LEN];
    if (a->n == 1)
        pt_buf_puts(&s, "The worker spends ");
    else if (above == a->n)
        pt_buf_puts(&s, "Every worker spends ");
    else
        pt_buf_printf(&s, "%zu of the %zu workers spend a median of ", above, a->n);
    pt_buf_printf(&s, "%s of each step in ", pt_percent(pct, 100 * g->median));
    put_frame(t, f, &s);
    pt_buf_puts(&s, " and the code it calls");
    put_parts(g, &s);
    pt_buf_printf(&s, ", not hidden by GPU work (more than the %s a step's own Python may take)",
                  pt_percent(pct, 100 * JUDGED_SUBTREE));
    pt_put_saving(a, g, c->step_ms, &s);
    pt_buf_puts(&s, "; ");
    pt_buf_puts(&s, subtree_advice(t, f));
    g->summary = pt_buf_take(&s);
}

/* Worker w's GPU is known to be shared: its host is known and has more workers than GPUs. */
static bool gpu_known_shared(const pt_analysis *a, size_t w)
{
    const pt_worker_summary *s = a->workers[w];
    if (!s->host || !*s->host || s->device_count <= 0)
        return false;
    int64_t on_host = 0;
    for (size_t v = 0; v < a->n; v++)
        on_host += a->workers[v]->host && strcmp(a->workers[v]->host, s->host) == 0;
    return on_host > s->device_count;
}

/* Without a GPU, Python is the work itself; on GPUs known to be shared by several workers,
 * a worker's Python runs while the others' kernels keep its GPU busy (h200 native jobs:
 * four ranks on one H200, their random-batch loaders 16% of a step), so its exposed time
 * is not the GPU idling: neither is judged. */
static bool python_idles_gpu(const pt_analysis *a)
{
    if (a->gpu_workers != a->n)
        return false;
    for (size_t w = 0; w < a->n; w++)
        if (!gpu_known_shared(a, w))
            return true;
    return false;
}

static void every_worker_subtrees(const context *c, finding_list *list)
{
    const pt_analysis *a = c->a;
    if (a->n == 0 || !python_idles_gpu(a))
        return;
    frame_tree t;
    tree_build(&t, c);
    size_t steps = t.steps;
    double *excess = pt_xmalloc((t.count * steps + 1) * sizeof *excess);
    for (size_t f = 0; f < t.count; f++)
        for (size_t s = 0; s < steps; s++)
            excess[f * steps + s] = t.typical[f * steps + s] - JUDGED_SUBTREE * c->typical_len[s];
    chosen found[MAX_FRAMES];
    size_t count = frames_holding(&t, excess, c->decision_ms, found);
    double *share = pt_xmalloc((a->n + 1) * sizeof *share);
    for (size_t i = 0; i < count; i++) {
        size_t f = found[i].frame;
        finding *g = subtree_finding(list, &t, f, METRIC_ALL_SUBTREE);
        g->fix = PT_FIX_COMMON;
        g->all_workers = true;
        g->expected = JUDGED_SUBTREE;
        every_worker_parts(c, &t, f, g);
        for (size_t w = 0; w < a->n; w++) { /* each worker's share of its step in the frame */
            double ms = 0;
            for (size_t p = 0; p < g->part_count; p++)
                ms += g->parts[p].values[w] * pt_window_ms(a, w);
            share[w] = a->step_ms[w] > 0 ? ms / a->steps[w] / a->step_ms[w] : 0;
        }
        for (size_t w = 0; w < a->n; w++)
            pt_finding_name_worker(g, w, share[w]);
        g->median = pt_median_of(share, a->n, a->scratch);
        size_t above = 0;
        for (size_t w = 0; w < a->n; w++)
            above += share[w] > g->expected;
        if ((double)above < MOST_WORKERS * (double)a->n) { /* some workers' alone: the peers' to judge */
            pt_finding_drop_last(list);
            continue;
        }
        pt_cost_finding(a, c->m, g);
        bool *taken = pt_xcalloc(list->count, sizeof *taken);
        mark_inside(list, taken);
        double beyond = marginal_saving(c, list, list->count - 1, taken);
        if (!g->part_count || !worth_it(c, g->impact) || !worth_it(c, beyond) || cpu_bound_beyond(c, list)) {
            pt_finding_drop_last(list);
        } else {
            describe_every_worker_subtree(c, &t, f, g);
            take_in(list, taken); /* their stacks are its parts */
        }
        free(taken);
    }
    free(share);
    free(excess);
    tree_free(&t);
}

/* ------------------------------------------------------------ communication */

/* What fixing a communication finding saves: ms per step, at most the waits no worker's
 * work sets (its collectives' time is the others' wait, not work, in the model). */
static double communication_share(const context *c, double saving_ms)
{
    return c->step_ms > 0 ? fmin(1, fmax(0, fmin(saving_ms, pt_whatif_unshortened_ms(c->m)) / c->step_ms)) : 0;
}

/* A frame of a collective call: torch.distributed's Python or the operators it runs. */
static bool collective_frame(const char *label, size_t len)
{
    return has_at(label, len, 0, "torch/distributed/") || contains(label, len, "c10d::") ||
           has_at(label, len, 0, "nccl:") || has_at(label, len, 0, "gloo:") ||
           (len == strlen("record_param_comms") && has_at(label, len, 0, "record_param_comms"));
}

/* How much of stack names the user's function that makes a collective call in it (up to
 * its last user frame before the first collective frame); 0 when it makes none, or none
 * of the user's functions does (DDP's reducer calls from C++). */
static size_t issuing_prefix(const char *stack)
{
    size_t start = 0, user_end = 0;
    for (size_t i = 0;; i++) {
        if (stack[i] != '|' && stack[i])
            continue;
        if (collective_frame(stack + start, i - start))
            return user_end;
        if (user_frame(stack + start, i - start))
            user_end = i;
        if (!stack[i])
            return 0;
        start = i + 1;
    }
}

/* The user's function that makes worker w's collective calls: of its Python stacks and
 * its runtime calls' callers that make one, the one with the most calls (a new string);
 * NULL when none does. */
static char *issuing_function(const pt_analysis *a, size_t w)
{
    const char *best = NULL;
    size_t best_len = 0;
    uint64_t most = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_PYTHON && row->cls != PT_CLASS_RUNTIME)
            continue;
        pt_function_summary cell;
        const pt_function_summary *fn = pt_row_function(a, row, w, &cell);
        const char *stack = !fn ? NULL : row->cls == PT_CLASS_PYTHON ? row->name : fn->caller;
        size_t len = stack ? issuing_prefix(stack) : 0;
        if (len && fn->count > most)
            best = stack, best_len = len, most = fn->count;
    }
    return best ? pt_xstrndup(best, best_len) : NULL;
}

/* A communication finding about worker w's collectives (row): named by the user's
 * function that makes them, else by the collective. */
static finding *communication_finding(const pt_analysis *a, finding_list *list, size_t w, const pt_fn_row *row,
                                      const char *metric)
{
    char *issuer = issuing_function(a, w);
    finding *f = pt_finding_add(list, "communication", issuer ? issuer : row->name, "Communication");
    free(issuer);
    f->fix = PT_FIX_COMMON;
    f->classes = PT_CLASS_BIT(PT_CLASS_COMM);
    f->cls = PT_CLASS_COMM;
    f->metric = metric;
    return f;
}

/* Worker w's collective with the most exposed time, and its per-call time (ms). */
static const pt_fn_row *largest_collective(const pt_analysis *a, size_t w, double *call_ms)
{
    const pt_fn_row *best = NULL;
    int64_t most = -1;
    *call_ms = 0;
    for (size_t i = 0; i < a->row_count; i++) {
        if (a->rows[i].cls != PT_CLASS_COMM)
            continue;
        pt_function_summary cell;
        const pt_function_summary *fn = pt_row_function(a, &a->rows[i], w, &cell);
        if (fn && fn->exposed_ns > most)
            most = fn->exposed_ns, best = &a->rows[i], *call_ms = (double)fn->median_ns / 1e6;
    }
    return best;
}

/* " (made by `train.py: average_gradients`)" when the finding is named by the function. */
static void put_issuer(const finding *f, const pt_fn_row *row, pt_buf *out)
{
    if (strcmp(f->function, row->name) == 0)
        return;
    const char *last = strrchr(f->function, '|');
    pt_buf_printf(out, ", made by `%s`", last ? last + 1 : f->function);
}

static void describe_overlap(const context *c, finding *f, const pt_fn_row *row, double typical, double exposed_ms,
                             double alone_ms)
{
    char pct[PT_PERCENT_LEN], other[PT_PERCENT_LEN];
    pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
    pt_short_function_name(PT_CLASS_COMM, row->name, &name);
    pt_ranks_phrase(c->a, f, &s);
    pt_buf_printf(&s, " hides %s of its communication time under its own work, against a median of %s on the other "
                      "ranks: its collectives (most in `%s`",
                  pt_percent(pct, 100 * f->values[0]), pt_percent(other, 100 * typical),
                  name.data ? name.data : row->name);
    put_issuer(f, row, &s);
    pt_buf_puts(&s, ") run after its computation instead of beside it, ");
    pt_put_ms(&s, exposed_ms);
    pt_buf_puts(&s, " per step exposed");
    if (alone_ms > 0) {
        pt_buf_puts(&s, ", of which it waits ");
        pt_put_ms(&s, alone_ms);
        pt_buf_puts(&s, " per step in collectives the others do not wait in, before its work goes on");
    }
    pt_buf_puts(&s, ", and the others wait for it");
    pt_put_saving(c->a, f, c->step_ms, &s);
    if (alone_ms <= 0)
        pt_buf_puts(&s, " by hiding as much as they do");
    pt_buf_puts(&s, "; launch its collectives on a communication stream, not the "
                    "compute stream, and wait for them only when their result is needed (DDP's gradient buckets, "
                    "async_op=True), not right after each.");
    f->summary = pt_buf_take(&s);
    pt_buf_free(&name);
}

typedef struct overlap_rank {
    size_t w;
    double saving_ms, exposed_ms, alone_ms;
} overlap_rank;

static int by_saving_ms(const void *x, const void *y)
{
    const overlap_rank *a = x, *b = y;
    int order = pt_cmp_desc(a->saving_ms, b->saving_ms);
    return order ? order : (a->w > b->w) - (a->w < b->w);
}

/* The median over the workers but w of per[v] x scale[v]. */
static double others_median(const pt_analysis *a, size_t w, double (*value)(const pt_analysis *, size_t),
                            double *others, double *scratch)
{
    size_t k = 0;
    for (size_t v = 0; v < a->n; v++)
        if (v != w)
            others[k++] = value(a, v);
    return pt_median_of(others, k, scratch);
}

/* Worker v's communication per step, ms: busy, exposed, and hidden under its work. */
static double comm_busy_ms(const pt_analysis *a, size_t v)
{
    return (double)a->workers[v]->union_ns[PT_CLASS_COMM] / 1e6 / a->steps[v];
}

static double comm_exposed_ms(const pt_analysis *a, size_t v)
{
    return (double)a->workers[v]->exposed_ns[PT_CLASS_COMM] / 1e6 / a->steps[v];
}

static double comm_hidden_ms(const pt_analysis *a, size_t v)
{
    return comm_busy_ms(a, v) - comm_exposed_ms(a, v);
}

/* A rank hiding less of its communication than the others (its hidden share below
 * theirs by more than their spread and by the decision in ms): overlapped with its
 * compute, what it exposes would shrink to one call (the last one has nothing left to
 * hide under), never by more than its compute could cover (see the header comment). */
static double compute_ms(const pt_analysis *a, size_t v)
{
    return (double)a->workers[v]->union_ns[PT_CLASS_COMPUTE] / 1e6 / a->steps[v];
}

/* The share of worker v's compute time with its communication running beside it. */
static double compute_covered(const pt_analysis *a, size_t v)
{
    return compute_ms(a, v) > 0 ? fmin(1, comm_hidden_ms(a, v) / compute_ms(a, v)) : 0;
}

static double comm_hidden_share(const pt_analysis *a, size_t v)
{
    return comm_busy_ms(a, v) > 0 ? comm_hidden_ms(a, v) / comm_busy_ms(a, v) : 0;
}

/* Rank w's own waits, ms per step: collectives only it waited in (the step model's). */
static double own_waits_ms(const context *c, size_t w)
{
    double sum = 0;
    for (size_t s = 0; s < c->steps; s++)
        sum += pt_whatif_own_wait_ms(c->m, w, s);
    return c->steps ? sum / (double)c->steps : 0;
}

/* What overlapping rank w's communication with its compute saves, ms per step (0: it is
 * not a rank that overlaps less than the others; see the header comment). */
static double overlap_saving_ms(const context *c, size_t w, double *others, double *scratch)
{
    const pt_analysis *a = c->a;
    size_t k = 0;
    for (size_t v = 0; v < a->n; v++)
        if (v != w)
            others[k++] = compute_covered(a, v);
    pt_spread spread = pt_spread_of(others, k, scratch);
    double mine = compute_covered(a, w), gap = spread.median - mine, call_ms;
    if (gap <= OVERLAP_SIGMAS * spread.sigma || gap < OVERLAP_FLOOR * spread.median ||
        !largest_collective(a, w, &call_ms))
        return 0;
    for (size_t i = 0; i < k; i++)
        if (others[i] < mine + gap / 2)
            return 0; /* another rank covers as little: a group's structure (a pipeline stage) */
    double exposed = comm_exposed_ms(a, w), others_hide = others_median(a, w, comm_hidden_share, others, scratch);
    bool hides_as_much = comm_hidden_share(a, w) >= OVERLAP_FLOOR * others_hide;
    if (hides_as_much && exposed < others_median(a, w, comm_exposed_ms, others, scratch) - c->decision_ms)
        return 0; /* late for its work (see the header comment) */
    if (!pt_whatif_sync_segments(c->m) || own_waits_ms(c, w) <= 0) {
        double hides_less = (others_hide - comm_hidden_share(a, w)) * comm_busy_ms(a, w);
        return fmin(fmax(0, fmin(fmin(exposed - call_ms, hides_less), compute_ms(a, w))),
                    pt_whatif_unshortened_ms(c->m));
    }
    pt_fix *fix = pt_fix_new(c->m);
    for (size_t s = 0; s < c->steps; s++)
        pt_fix_unblock(fix, w, s, INFINITY);
    double saving = pt_whatif_saving(c->m, fix) * c->step_ms;
    pt_fix_free(fix);
    return saving;
}

static void per_rank_overlap(const context *c, finding_list *list)
{
    const pt_analysis *a = c->a;
    size_t n = a->n;
    if (n < 3)
        return;
    for (size_t w = 0; w < n; w++)
        if (comm_busy_ms(a, w) <= 0)
            return; /* a worker without collectives: nothing to compare */
    overlap_rank *found = pt_xmalloc(n * sizeof *found);
    double *others = pt_xmalloc(n * sizeof *others), *scratch = pt_xmalloc(2 * n * sizeof *scratch);
    size_t count = 0;
    for (size_t w = 0; w < n; w++) {
        double saving = overlap_saving_ms(c, w, others, scratch);
        if (saving >= c->decision_ms)
            found[count++] = (overlap_rank){w, saving, comm_exposed_ms(a, w), own_waits_ms(c, w)};
    }
    qsort(found, count, sizeof *found, by_saving_ms);
    for (size_t i = 0; i < count && i < MAX_OVERLAP_RANKS; i++) {
        size_t w = found[i].w;
        double call_ms;
        const pt_fn_row *row = largest_collective(a, w, &call_ms);
        finding *f = communication_finding(a, list, w, row, METRIC_OVERLAP);
        pt_finding_name_worker(f, w, comm_hidden_share(a, w));
        f->median = others_median(a, w, comm_hidden_share, others, scratch);
        f->impact = f->alone = c->step_ms > 0 ? fmin(1, found[i].saving_ms / c->step_ms) : 0;
        f->excess_ms = f->impact * c->step_ms;
        f->worst = w;
        double beyond = marginal_saving(c, list, list->count - 1, NULL);
        if (!worth_it(c, f->impact) || !worth_it(c, beyond)) {
            pt_finding_drop_last(list);
            continue;
        }
        describe_overlap(c, f, row, f->median, found[i].exposed_ms, found[i].alone_ms);
    }
    free(others);
    free(scratch);
    free(found);
}

static void describe_bucketing(const context *c, finding *f, const pt_fn_row *row, double call_ms, double throughput,
                               double latency_ms, double exposed_ms, double still_ms, double largest_mb)
{
    char pct[PT_PERCENT_LEN];
    pt_buf s = PT_BUF_INIT, name = PT_BUF_INIT;
    pt_short_function_name(PT_CLASS_COMM, row->name, &name);
    pt_buf_printf(&s, "%s %.0f calls per step of `%s`", c->a->n == 1 ? "The worker makes" : "Every worker makes",
                  f->median, name.data ? name.data : row->name);
    put_issuer(f, row, &s);
    pt_buf_puts(&s, ", a median of ");
    pt_put_ms(&s, call_ms);
    pt_buf_printf(&s, " each at %s of the link's peak bandwidth: each pays the collective's latency for few bytes (",
                  pt_percent(pct, throughput));
    pt_put_ms(&s, latency_ms);
    pt_buf_puts(&s, " per step in all), and ");
    pt_put_ms(&s, exposed_ms);
    pt_buf_puts(&s, " per step of them is exposed");
    if (largest_mb > 0) {
        pt_buf_puts(&s, "; bucketed, the job would still wait ");
        pt_put_ms(&s, still_ms);
        pt_buf_puts(&s, " for its last bucket (its largest tensor, ");
        pt_put_mb(&s, largest_mb);
        pt_buf_printf(&s, ", and up to %.0f MB of others), which no backward work is left to hide",
                      PT_BUCKET_BYTES / 1e6);
    }
    pt_put_saving(c->a, f, c->step_ms, &s);
    pt_buf_puts(&s, "; bucket the tensors into a few large collectives (DDP's gradient buckets, or flatten them "
                    "into one all-reduce) and overlap them with the backward pass.");
    f->summary = pt_buf_take(&s);
    pt_buf_free(&name);
}

/* A finding says the ranks analysed may be waiting for ranks of the job not analysed
 * (findings.c, waiting_for_missing). */
static bool waiting_for_ranks_not_analysed(const finding_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].rank_count)
            return true;
    return false;
}

/* Not on a partial job whose ranks analysed may be waiting for the others: their calls'
 * time is that wait, which no bucketing removes and none of it can be told from latency. */
static void every_worker_bucketing(const context *c, finding_list *list)
{
    const pt_analysis *a = c->a;
    size_t n = a->n;
    if (n == 0 || waiting_for_ranks_not_analysed(list))
        return;
    pt_bucketing *per = pt_xmalloc(n * sizeof *per);
    double *column = pt_xmalloc(n * sizeof *column);
    for (size_t i = 0; i < a->row_count; i++) {
        const pt_fn_row *row = &a->rows[i];
        if (row->cls != PT_CLASS_COMM)
            continue;
        for (size_t w = 0; w < n; w++)
            column[w] = (per[w] = pt_bucketing_of(a, row, w)).latency_ms;
        /* The calls pay their latency, above the noise: a call's time holds its wait for
         * the other ranks too (read as latency), which the noise's waits lengthen. */
        double typical = pt_median_of(column, n, a->scratch);
        if (typical < c->decision_ms)
            continue;
        for (size_t w = 0; w < n; w++)
            column[w] = (double)a->workers[w]->exposed_ns[PT_CLASS_COMM] / 1e6 / a->steps[w];
        double exposed = pt_median_of(column, n, a->scratch);
        /* What its collectives take past the last worker's work: the others' wait for
         * that worker's noise is in their exposed time, and stays when bucketed. */
        double waited = fmin(exposed, pt_whatif_unshortened_ms(c->m));
        size_t known = 0;
        for (size_t w = 0; w < n; w++)
            if (!isnan(per[w].last_share))
                column[known++] = per[w].last_share;
        double share = known * 2 > n ? pt_median_of(column, known, a->scratch) : NAN;
        double still = pt_bucketed_still_waits_ms(waited, fmin(typical, waited), share, c->step_ms);
        finding *f = communication_finding(a, list, 0, row, METRIC_BUCKETS);
        f->all_workers = true;
        for (size_t w = 0; w < n; w++)
            pt_finding_name_worker(f, w, column[w] = per[w].calls);
        f->median = pt_median_of(column, n, a->scratch);
        f->impact = f->alone = communication_share(c, fmax(typical, waited - still));
        f->excess_ms = f->impact * c->step_ms + still; /* the time it explains */
        /* Beyond the findings made but the exposed communication it explains (dropped by
         * drop_explained when it does). */
        bool *explained = pt_xcalloc(list->count, sizeof *explained);
        for (size_t k = 0; k + 1 < list->count; k++)
            explained[k] = rolled_up_on_every_worker(&list->items[k]) &&
                           list->items[k].classes == PT_CLASS_BIT(PT_CLASS_COMM);
        double beyond = marginal_saving(c, list, list->count - 1, explained);
        free(explained);
        if (!worth_it(c, f->impact) || !worth_it(c, beyond)) {
            pt_finding_drop_last(list);
            continue;
        }
        pt_function_summary cell;
        double throughput = 0, largest = 0;
        for (size_t w = 0; w < n; w++) {
            const pt_function_summary *fn = pt_row_function(a, row, w, &cell);
            column[w] = fn ? fn->throughput_avg_pct : 0;
        }
        throughput = pt_median_of(column, n, a->scratch);
        size_t sized = 0; /* the workers whose summaries say the calls' bytes */
        for (size_t w = 0; w < n; w++) {
            const pt_function_summary *fn = pt_row_function(a, row, w, &cell);
            if (!isnan(per[w].last_share))
                column[sized++] = fn->bytes_max;
        }
        largest = isnan(share) ? 0 : pt_median_of(column, sized, a->scratch) / 1e6;
        for (size_t w = 0; w < n; w++)
            column[w] = per[w].call_ms;
        describe_bucketing(c, f, row, pt_median_of(column, n, a->scratch), throughput, typical, exposed, still,
                           largest);
    }
    free(per);
    free(column);
}

/* ------------------------------------------------------------ rolled-up findings explained */

/* A finding about a whole class on every worker, above what the class is expected to
 * take, which a cause found here may explain: the CPU side of a CPU-bound job, exposed
 * communication. */
static bool rolled_up_on_every_worker(const finding *f)
{
    return f->all_workers && !made_here(f) && !f->rank_count && f->fix == PT_FIX_COMMON && !f->row;
}

/* A rolled-up finding's excess that the candidates found here do not explain, ms per
 * step on the typical worker: its share of the step less what it is expected to take
 * (exposed communication: its saving, which costing.c caps at the waits no worker's
 * work sets), less the candidates' savings in its classes, and for bucketing what a
 * bucketed job still waits (its excess_ms: the fix explains that time too, as the
 * transfer it cannot hide). (Not the joint saving: removals of one class on one worker
 * add up in it, so a rolled-up finding over a candidate's time seems to save more.) */
static double unexplained_ms(const context *c, const finding_list *list, const finding *g)
{
    double removed = 0;
    for (size_t k = 0; k < list->count; k++) {
        const finding *h = &list->items[k];
        if (made_here(h) && (h->classes & g->classes))
            removed += h->metric == METRIC_BUCKETS ? h->excess_ms : h->impact * c->step_ms;
    }
    bool communication = g->classes == PT_CLASS_BIT(PT_CLASS_COMM);
    return (communication ? g->impact : g->median - g->expected) * c->step_ms - removed;
}

/* Each such finding whose excess is (within the decision) what the candidates found here
 * remove from its classes is dropped: they name its cause. */
static void drop_explained(const context *c, finding_list *list)
{
    bool *drop = pt_xcalloc(list->count + 1, sizeof *drop);
    for (size_t i = 0; i < list->count; i++) {
        const finding *g = &list->items[i];
        if (!rolled_up_on_every_worker(g))
            continue;
        bool any = false;
        for (size_t k = 0; k < list->count; k++)
            any |= made_here(&list->items[k]) && (list->items[k].classes & g->classes);
        drop[i] = any && unexplained_ms(c, list, g) < c->decision_ms;
    }
    pt_finding_list_drop(list, drop);
    free(drop);
}

/* ------------------------------------------------------------ entry */

void pt_candidate_findings(const pt_analysis *a, const pt_whatif *m, finding_list *list, pt_candidate_phase phase)
{
    if (a->n == 0 || pt_whatif_step_ms(m) <= 0)
        return;
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->items[i].category, "hang") == 0)
            return; /* the job does not step: nothing to save */
    context c;
    context_init(&c, a, m);
    if (phase == PT_CANDIDATES_PER_RANK) {
        if (!pt_job_waits_unseen(a)) /* a rank's time above the others' may be its waiting */
            per_rank_subtrees(&c, list);
        per_rank_overlap(&c, list);
    } else {
        every_worker_subtrees(&c, list);
        every_worker_bucketing(&c, list);
        drop_explained(&c, list);
    }
    context_free(&c);
}
