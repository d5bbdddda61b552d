/* hangs.c -- hangs: which rank is missing from which collective, and what does not match.
 *
 * In a real hang every rank's Python stack tends to look the same (blocked in some
 * collective, or in a .item() behind one), so the stacks alone cannot say who is at
 * fault; the order of the ranks' collectives can. Each worker's summary carries, per
 * process group, its last calls numbered in the order it made them (the collector's
 * bookkeeping at a hang report, or a trace's collective ops), and a group's calls line
 * up across its members by that number. Per group, in the order a user can act on:
 *
 *   1. a call that raised (gloo's "Connection reset by peer" when a peer aborted): a
 *      collective error, with the ranks it failed on and those that ended in it;
 *   2. the first call number the members disagree on -- another operation, element
 *      count or dtype: a mismatch; or, when the odd rank's call is the one the others
 *      make right after theirs (their history shows it), a skipped collective: its
 *      numbers run one ahead of theirs from there;
 *   3. the highest call any member reached, #K, and the members that never entered it:
 *      missing. Where each missing rank is instead -- its stack and its own last
 *      collective -- is the answer. A missing rank that itself waits in another group's
 *      call, for ranks that wait here, closes a cycle: groups entered in opposite orders;
 *   4. every member entered #K, with the same call, and none returned: the transport
 *      (the network, NCCL or gloo) is stuck, not a rank.
 * A group whose missing ranks all wait in some other group is only a consequence; the
 * group they wait in is reported instead. Each cause is one finding of category "hang"
 * naming the ranks at fault, with evidence.hang listing each rank's side (group, call
 * number, call, state, stack) for the page.
 *
 * Without collective state (older collectors, traces without collective args) the
 * stacks decide as before: workers that stopped outside any collective are the culprits,
 * and workers blocked in one wait for them. A worker that was still stepping when the
 * report was taken is never named as stopped.
 *
 * A hang is judged only when something stopped: a hang report's snapshots, or traces
 * that go on long after their last step. Cost: linear in the workers and in the members
 * of each group (a rank-to-worker table of world-size entries). */
#include "diagnose/finding.h"
#include "summarize/classify.h"
#include "util/strtab.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HANG_STEPS 5.0           /* stuck for 5x the step time (the paper's rule) */
#define PROGRESS_STEPS 2.0       /* a snapshot this soon after its last step: still stepping */
#define PROGRESS_FLOOR_NS 1000000000LL /* ... when its step time is unknown: a second */
#define MAX_ROWS 64              /* ranks shown side by side in evidence.hang */
#define NO_WORKER SIZE_MAX

/* ------------------------------------------------------------ what each rank says */

typedef struct rank_view {
    int32_t rank;
    size_t w;                          /* worker index, NO_WORKER: no summary */
    const pt_collective_group *g;      /* its record of the group, or NULL */
    const pt_collective_call *last;    /* its last call in the group, or NULL */
} rank_view;

typedef struct group_view {
    const char *name;
    const pt_collective_group *shape;  /* the record that lists the members */
    rank_view *ranks;
    size_t count;
    int64_t top;                       /* the highest call number a member reached */
} group_view;

typedef struct hang_ctx {
    const pt_analysis *a;
    size_t *worker_of;                 /* rank -> worker index (NO_WORKER) */
    size_t rank_limit;
    bool *knows;                       /* worker has collective state at all */
    bool *stopped;                     /* worker stopped stepping */
    bool *progressing;                 /* its snapshot shows it still stepping */
    group_view *groups;
    size_t group_count;
    bool *named;                       /* worker already named by a finding */
    int32_t *waiting_in;               /* rank -> group whose top call it is in (-1 none) */
    uint8_t *mark;                     /* rank -> scratch flags (MARK_*), cleared after use */
    int *status;
    finding_list *list;
} hang_ctx;

static int64_t last_seq(const rank_view *v)
{
    return v->last ? v->last->seq : 0;
}

static bool in_flight(const pt_collective_call *c)
{
    return c && (c->state == PT_CALL_ENTERED || c->state == PT_CALL_ISSUED);
}

static const pt_collective_call *call_at(const pt_collective_group *g, int64_t seq)
{
    for (size_t i = 0; g && i < g->call_count; i++)
        if (g->calls[i].seq == seq)
            return &g->calls[i];
    return NULL;
}

/* Same operation, and the same count and dtype where both sides know them. */
static bool same_call(const pt_collective_call *x, const pt_collective_call *y)
{
    return strcmp(x->op, y->op) == 0 && (x->count < 0 || y->count < 0 || x->count == y->count) &&
           (!x->dtype || !y->dtype || strcmp(x->dtype, y->dtype) == 0);
}

static const pt_worker_summary *summary_of(const hang_ctx *h, size_t w)
{
    return w == NO_WORKER ? NULL : h->a->workers[w];
}

/* ------------------------------------------------------------ gathering */

static const pt_collective_group *group_of(const pt_worker_summary *s, const char *name)
{
    for (size_t i = 0; i < s->group_count; i++)
        if (strcmp(s->groups[i].name, name) == 0)
            return &s->groups[i];
    return NULL;
}

static void add_rank(hang_ctx *h, group_view *gv, int32_t rank, size_t *cap)
{
    PT_GROW(gv->ranks, *cap, gv->count + 1);
    rank_view *v = &gv->ranks[gv->count++];
    v->rank = rank;
    v->w = rank >= 0 && (size_t)rank < h->rank_limit ? h->worker_of[rank] : NO_WORKER;
    const pt_worker_summary *s = summary_of(h, v->w);
    v->g = s ? group_of(s, gv->name) : NULL;
    v->last = v->g && v->g->call_count ? &v->g->calls[v->g->call_count - 1] : NULL;
}

static int by_rank(const void *x, const void *y)
{
    const rank_view *a = x, *b = y;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* The members of a group: as its records list them (the first that does), else the
 * ranks that report it. */
static void gather_group(hang_ctx *h, group_view *gv)
{
    const pt_analysis *a = h->a;
    size_t cap = 0;
    for (size_t w = 0; w < a->n && !gv->shape; w++) {
        const pt_collective_group *g = group_of(a->workers[w], gv->name);
        if (g && g->run_count)
            gv->shape = g;
    }
    if (gv->shape) {
        for (size_t k = 0; k < gv->shape->run_count; k++) {
            const pt_rank_run *run = &gv->shape->runs[k];
            for (int64_t r = run->first; r <= run->last; r += run->stride)
                add_rank(h, gv, (int32_t)r, &cap);
        }
        return;
    }
    for (size_t w = 0; w < a->n; w++)
        if (group_of(a->workers[w], gv->name) && a->workers[w]->rank >= 0)
            add_rank(h, gv, a->workers[w]->rank, &cap);
    qsort(gv->ranks, gv->count, sizeof *gv->ranks, by_rank);
}

static int by_name(const void *x, const void *y)
{
    const group_view *a = x, *b = y;
    return strcmp(a->name, b->name);
}

static void gather(hang_ctx *h)
{
    const pt_analysis *a = h->a;
    int32_t max_rank = -1;
    for (size_t w = 0; w < a->n; w++)
        max_rank = PT_MAX(max_rank, a->workers[w]->rank);
    size_t cap = 0;
    pt_strtab names; /* each group once, however many workers report it */
    pt_strtab_init(&names);
    for (size_t w = 0; w < a->n; w++)
        for (size_t i = 0; i < a->workers[w]->group_count; i++) {
            const pt_collective_group *g = &a->workers[w]->groups[i];
            for (size_t k = 0; k < g->run_count; k++)
                max_rank = PT_MAX(max_rank, g->runs[k].last);
            size_t before = names.count;
            pt_strtab_intern(&names, g->name, strlen(g->name));
            if (names.count > before) {
                PT_GROW(h->groups, cap, h->group_count + 1);
                memset(&h->groups[h->group_count], 0, sizeof *h->groups);
                h->groups[h->group_count++].name = g->name;
            }
        }
    pt_strtab_free(&names);
    h->rank_limit = (size_t)(max_rank + 1);
    h->worker_of = pt_xmalloc((h->rank_limit ? h->rank_limit : 1) * sizeof *h->worker_of);
    for (size_t r = 0; r < h->rank_limit; r++)
        h->worker_of[r] = NO_WORKER;
    for (size_t w = 0; w < a->n; w++)
        if (a->workers[w]->rank >= 0 && h->worker_of[a->workers[w]->rank] == NO_WORKER)
            h->worker_of[a->workers[w]->rank] = w;
    if (h->group_count)
        qsort(h->groups, h->group_count, sizeof *h->groups, by_name);
    h->waiting_in = pt_xmalloc((h->rank_limit ? h->rank_limit : 1) * sizeof *h->waiting_in);
    h->mark = pt_xcalloc(h->rank_limit ? h->rank_limit : 1, 1);
    for (size_t r = 0; r < h->rank_limit; r++)
        h->waiting_in[r] = -1;
    for (size_t i = 0; i < h->group_count; i++) {
        group_view *gv = &h->groups[i];
        gather_group(h, gv);
        for (size_t k = 0; k < gv->count; k++)
            gv->top = PT_MAX(gv->top, last_seq(&gv->ranks[k]));
        for (size_t k = 0; k < gv->count; k++) {
            const rank_view *v = &gv->ranks[k];
            if ((size_t)v->rank < h->rank_limit && h->waiting_in[v->rank] < 0 && in_flight(v->last) &&
                last_seq(v) == gv->top)
                h->waiting_in[v->rank] = (int32_t)i;
        }
    }
}

/* ------------------------------------------------------------ sentences and evidence */

/* "all_reduce #12 (1000 x float32)"; without the number when seq is 0. */
static void put_call(pt_buf *b, const pt_collective_call *c, int64_t seq)
{
    pt_buf_puts(b, c->op);
    if (seq > 0)
        pt_buf_printf(b, " #%" PRId64, seq);
    if (c->count >= 0 || c->dtype) {
        pt_buf_puts(b, " (");
        if (c->count >= 0)
            pt_buf_printf(b, "%" PRId64 "%s", c->count, c->dtype ? " x " : " elements");
        if (c->dtype)
            pt_buf_puts(b, c->dtype);
        pt_buf_puts(b, ")");
    }
}

/* "rank 3", "ranks 0, 1 and 2", "ranks 0-1022" (runs of 3 or more contiguous ranks). */
static void put_ranks(pt_buf *b, const int32_t *ranks, size_t n)
{
    if (n == 0) {
        pt_buf_puts(b, "no rank");
        return;
    }
    pt_buf_puts(b, n == 1 ? "rank " : "ranks ");
    size_t items = 0, shown = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && ranks[j] == ranks[j - 1] + 1)
            j++;
        size_t len = j - i < 3 ? 1 : j - i;
        bool last_item = i + len == n;
        if (items == 8) {
            pt_buf_printf(b, " and %zu more", n - shown);
            return;
        }
        pt_buf_puts(b, items == 0 ? "" : last_item ? " and " : ", ");
        if (len == 1)
            pt_buf_printf(b, "%d", ranks[i]);
        else
            pt_buf_printf(b, "%d-%d", ranks[i], ranks[j - 1]);
        items++;
        shown += len;
        i += len;
    }
}

static void put_group(pt_buf *b, const group_view *gv)
{
    pt_buf_printf(b, "process group %s", gv->name);
    if (gv->shape && gv->count) {
        int32_t *ranks = pt_xmalloc(gv->count * sizeof *ranks);
        for (size_t i = 0; i < gv->count; i++)
            ranks[i] = gv->ranks[i].rank;
        pt_buf_puts(b, " (");
        put_ranks(b, ranks, gv->count);
        pt_buf_puts(b, ")");
        free(ranks);
    }
}

/* The innermost frames of a stack, as sentences quote it. */
static void put_where(pt_buf *b, const char *stack)
{
    pt_buf shortened = PT_BUF_INIT;
    pt_short_function_name(PT_CLASS_PYTHON, stack, &shortened);
    pt_buf_printf(b, "`%s`", shortened.data ? shortened.data : stack);
    pt_buf_free(&shortened);
}

static const char *stack_of(const pt_worker_summary *s)
{
    if (!s)
        return NULL;
    if (s->hang_stack && *s->hang_stack)
        return s->hang_stack;
    if (s->stall_function && *s->stall_function && s->stall_ns > 0)
        return s->stall_function;
    return NULL;
}

static pt_json *call_json(const pt_collective_call *c)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "seq", pt_json_int(c->seq));
    pt_json_add(j, "op", pt_json_string(c->op));
    pt_json_add(j, "count", pt_json_int(c->count));
    pt_json_add(j, "dtype", c->dtype ? pt_json_string(c->dtype) : pt_json_null());
    pt_json_add(j, "state", pt_json_string(pt_call_state_name(c->state)));
    if (c->error)
        pt_json_add(j, "error", pt_json_string(c->error));
    return j;
}

/* One rank's side of a finding: its role, the group, its call there (at seq, else its
 * last), and where its training thread is. */
static pt_json *rank_row(const hang_ctx *h, int32_t rank, size_t w, const char *role, const char *group,
                         const pt_collective_call *call)
{
    pt_json *row = pt_json_object();
    pt_json_add(row, "rank", pt_json_int(rank));
    pt_json_add(row, "role", pt_json_string(role));
    pt_json_add(row, "group", pt_json_string(group));
    pt_json_add(row, "call", call ? call_json(call) : pt_json_null());
    const pt_worker_summary *s = summary_of(h, w);
    const char *stack = stack_of(s);
    pt_json_add(row, "stack", stack ? pt_json_string(stack) : pt_json_null());
    pt_json_add(row, "answered", pt_json_bool(s != NULL));
    return row;
}

typedef struct evidence {
    pt_json *root, *rows;
    size_t rows_left;  /* rows beyond MAX_ROWS are counted, not shown */
} evidence;

static evidence evidence_new(const char *kind, const group_view *gv, const pt_collective_call *call)
{
    evidence e = {pt_json_object(), NULL, 0};
    pt_json_add(e.root, "kind", pt_json_string(kind));
    pt_json_add(e.root, "group", gv ? pt_json_string(gv->name) : pt_json_null());
    pt_json_add(e.root, "seq", call ? pt_json_int(call->seq) : pt_json_null());
    pt_json_add(e.root, "call", call ? call_json(call) : pt_json_null());
    e.rows = pt_json_add(e.root, "ranks", pt_json_array());
    return e;
}

static void evidence_row(evidence *e, pt_json *row)
{
    if (e->rows->count < MAX_ROWS)
        pt_json_push(e->rows, row);
    else
        e->rows_left++, pt_json_free(row);
}

/* Adds the finding: named workers get status 2. */
static finding *emit(hang_ctx *h, const char *function, const int32_t *culprits, size_t n, pt_buf *sentence,
                     evidence *e)
{
    bool news = n == 0;
    for (size_t i = 0; i < n && !news; i++) {
        size_t w = (size_t)culprits[i] < h->rank_limit ? h->worker_of[culprits[i]] : NO_WORKER;
        news = w == NO_WORKER || !h->named[w];
    }
    if (!news) { /* a consequence of a cause already reported about the same ranks */
        pt_json_free(e->root);
        pt_buf_free(sentence);
        return NULL;
    }
    finding *f = pt_finding_add(h->list, "hang", function, "workers");
    f->metric = "step the worker was in (-1: unknown)";
    f->impact = 1.0;
    for (size_t i = 0; i < n; i++) {
        size_t w = (size_t)culprits[i] < h->rank_limit ? h->worker_of[culprits[i]] : NO_WORKER;
        if (w == NO_WORKER || h->named[w])
            continue;
        h->named[w] = true;
        pt_finding_name_worker(f, w, (double)h->a->workers[w]->hang_step);
        h->status[w] = 2;
    }
    if (e->rows_left)
        pt_json_add(e->root, "more_ranks", pt_json_int((int64_t)e->rows_left));
    f->hang = e->root;
    f->summary = pt_buf_take(sentence);
    return f;
}

/* ------------------------------------------------------------ 1. errors */

static bool find_error(hang_ctx *h, group_view *gv)
{
    const pt_collective_call *failed = NULL;
    for (size_t i = 0; i < gv->count && !failed; i++)
        for (size_t k = 0; gv->ranks[i].g && k < gv->ranks[i].g->call_count; k++)
            if (gv->ranks[i].g->calls[k].state == PT_CALL_FAILED) {
                failed = &gv->ranks[i].g->calls[k];
                break;
            }
    if (!failed)
        return false;
    int32_t *on = pt_xmalloc(gv->count * sizeof *on), *gone = pt_xmalloc(gv->count * sizeof *gone);
    size_t n_on = 0, n_gone = 0;
    evidence e = evidence_new("collective_error", gv, failed);
    for (size_t i = 0; i < gv->count; i++) {
        const rank_view *v = &gv->ranks[i];
        const pt_collective_call *mine = call_at(v->g, failed->seq);
        if (mine && mine->state == PT_CALL_FAILED) {
            on[n_on++] = v->rank;
            evidence_row(&e, rank_row(h, v->rank, v->w, "failed", gv->name, mine));
        } else if (v->w == NO_WORKER) {
            gone[n_gone++] = v->rank;
            evidence_row(&e, rank_row(h, v->rank, v->w, "no answer", gv->name, NULL));
        } else {
            evidence_row(&e, rank_row(h, v->rank, v->w, "other", gv->name, mine ? mine : v->last));
        }
    }
    pt_buf s = PT_BUF_INIT, fn = PT_BUF_INIT;
    pt_buf_puts(&s, "The collective ");
    put_call(&s, failed, failed->seq);
    pt_buf_puts(&s, " of ");
    put_group(&s, gv);
    pt_buf_puts(&s, " failed on ");
    put_ranks(&s, on, n_on);
    if (failed->error)
        pt_buf_printf(&s, ": `%s`", failed->error);
    if (n_gone) {
        pt_buf_puts(&s, "; ");
        put_ranks(&s, gone, n_gone);
        pt_buf_printf(&s, " ended without a word (%s process died or never answered)", n_gone == 1 ? "its" : "their");
        if (gv->shape && gv->shape->backend && strcmp(gv->shape->backend, "gloo") == 0)
            pt_buf_puts(&s, ": gloo aborts a process that receives more data than its call expects, so look for a "
                            "size or dtype mismatch there (its stderr says `op.preamble.length <= op.nbytes`)");
    }
    pt_buf_puts(&s, ". The error ended the collective, not a hang: fix its cause before restarting.");
    pt_buf_printf(&fn, "%s #%" PRId64 " failed", failed->op, failed->seq);
    emit(h, fn.data, n_gone ? gone : on, n_gone ? n_gone : n_on, &s, &e);
    pt_buf_free(&fn);
    free(on), free(gone);
    return true;
}

/* ------------------------------------------------------------ 2. mismatches */

/* Whether, in ranks' history, a call like `at` is followed right after by one like
 * `next`: the deviant's call at seq is what the others make after their call at seq. */
static bool follows_in_history(const pt_collective_group *g, const pt_collective_call *at,
                               const pt_collective_call *next)
{
    for (size_t i = 0; g && i + 1 < g->call_count; i++)
        if (g->calls[i + 1].seq == g->calls[i].seq + 1 && same_call(&g->calls[i], at) &&
            same_call(&g->calls[i + 1], next))
            return true;
    return false;
}

static const char *difference(const pt_collective_call *x, const pt_collective_call *y)
{
    if (strcmp(x->op, y->op) != 0)
        return "operation";
    if (x->count >= 0 && y->count >= 0 && x->count != y->count)
        return "size";
    return "dtype";
}

static int by_signature(const void *x, const void *y)
{
    const pt_collective_call *a = *(const pt_collective_call *const *)x, *b = *(const pt_collective_call *const *)y;
    int order = strcmp(a->op, b->op);
    if (order)
        return order;
    if (a->count != b->count)
        return a->count < b->count ? -1 : 1;
    return strcmp(a->dtype ? a->dtype : "", b->dtype ? b->dtype : "");
}

/* The call most members made at seq (calls: scratch of gv->count), by sorting them:
 * O(n log n) for groups of any size. NULL when no member has one. */
static const pt_collective_call *majority_at(const group_view *gv, int64_t seq, const pt_collective_call **calls)
{
    size_t n = 0;
    for (size_t i = 0; i < gv->count; i++) {
        const pt_collective_call *c = call_at(gv->ranks[i].g, seq);
        if (c)
            calls[n++] = c;
    }
    if (!n)
        return NULL;
    qsort(calls, n, sizeof *calls, by_signature);
    const pt_collective_call *best = calls[0];
    size_t best_run = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && by_signature(&calls[i], &calls[j]) == 0)
            j++;
        if (j - i > best_run)
            best = calls[i], best_run = j - i;
        i = j;
    }
    return best;
}

static bool find_mismatch(hang_ctx *h, group_view *gv)
{
    /* The calls every member with a record holds, lowest first: the first disagreement is
     * the cause, later ones follow from it. */
    int64_t lo = 1, hi = INT64_MAX;
    size_t with = 0;
    for (size_t i = 0; i < gv->count; i++) {
        const pt_collective_group *g = gv->ranks[i].g;
        if (!g || !g->call_count)
            continue;
        with++;
        lo = PT_MAX(lo, g->calls[0].seq);
        hi = PT_MIN(hi, g->calls[g->call_count - 1].seq);
    }
    if (with < 2)
        return false;
    const pt_collective_call **calls = pt_xmalloc(gv->count * sizeof *calls);
    bool found = false;
    for (int64_t seq = lo; seq <= hi && !found; seq++) {
        const pt_collective_call *major = majority_at(gv, seq, calls);
        size_t deviants = 0;
        if (!major)
            continue;
        for (size_t i = 0; i < gv->count; i++) {
            const pt_collective_call *c = call_at(gv->ranks[i].g, seq);
            deviants += c && !same_call(c, major);
        }
        if (!deviants)
            continue;
        int32_t *odd = pt_xmalloc(gv->count * sizeof *odd), *rest = pt_xmalloc(gv->count * sizeof *rest);
        size_t n_odd = 0, n_rest = 0;
        const pt_collective_call *theirs = NULL;
        bool skipped = true;
        evidence e = evidence_new("mismatch", gv, major);
        for (size_t i = 0; i < gv->count; i++) {
            const rank_view *v = &gv->ranks[i];
            const pt_collective_call *c = call_at(v->g, seq);
            if (!c) {
                evidence_row(&e, rank_row(h, v->rank, v->w, "unknown", gv->name, v->last));
                continue;
            }
            if (same_call(c, major)) {
                rest[n_rest++] = v->rank;
                evidence_row(&e, rank_row(h, v->rank, v->w, "agrees", gv->name, c));
                continue;
            }
            odd[n_odd++] = v->rank;
            theirs = theirs ? theirs : c;
            evidence_row(&e, rank_row(h, v->rank, v->w, "differs", gv->name, c));
            /* Skipped: what it called at seq is what the others call after `major`. */
            bool follows = false;
            for (size_t k = 0; k < gv->count && !follows; k++) {
                const pt_collective_call *o = call_at(gv->ranks[k].g, seq);
                follows = o && same_call(o, major) && follows_in_history(gv->ranks[k].g, major, c);
                const pt_collective_call *next = call_at(gv->ranks[k].g, seq + 1);
                follows = follows || (o && same_call(o, major) && next && same_call(next, c));
            }
            skipped = skipped && follows;
        }
        pt_buf s = PT_BUF_INIT, fn = PT_BUF_INIT, their_call = PT_BUF_INIT, major_call = PT_BUF_INIT;
        put_call(&their_call, theirs, 0);
        put_call(&major_call, major, 0);
        if (skipped) {
            pt_json_set(e.root, "kind", pt_json_string("skipped"));
            put_ranks(&s, odd, n_odd);
            s.data[0] = (char)(s.data[0] - 'a' + 'A');
            pt_buf numbered = PT_BUF_INIT;
            put_call(&numbered, major, seq);
            pt_buf_printf(&s, " skipped %s of ", numbered.data);
            pt_buf_free(&numbered);
            put_group(&s, gv);
            pt_buf_printf(&s, ": %s #%" PRId64 " is %s, the call the other ranks make after %s, so %s call numbers "
                              "run one ahead of theirs from there; ",
                          n_odd == 1 ? "its" : "their", seq, their_call.data, major->op, n_odd == 1 ? "its" : "their");
            put_ranks(&s, rest, n_rest);
            pt_buf_printf(&s, " %s in %s #%" PRId64 ". Look for a condition that leaves the call out on ",
                          n_rest == 1 ? "waits" : "wait", major->op, seq);
            put_ranks(&s, odd, n_odd);
            pt_buf_puts(&s, ".");
            pt_buf_printf(&fn, "skipped %s #%" PRId64, major->op, seq);
        } else {
            const char *what = difference(theirs, major);
            pt_buf_printf(&s, "Ranks disagree on call #%" PRId64 " of ", seq);
            put_group(&s, gv);
            pt_buf_printf(&s, ", %s %s mismatch: ", strcmp(what, "operation") == 0 ? "an" : "a", what);
            put_ranks(&s, odd, n_odd);
            pt_buf_printf(&s, " called %s where ", their_call.data);
            put_ranks(&s, rest, n_rest);
            pt_buf_printf(&s, " called %s; every rank of a group must make the same collectives, with the same "
                              "sizes and dtypes, in the same order.", major_call.data);
            pt_buf_printf(&fn, "%s #%" PRId64 " where the others call %s", theirs->op, seq, major->op);
            pt_json_set(e.root, "mismatch", pt_json_string(what));
        }
        emit(h, fn.data, odd, n_odd, &s, &e);
        pt_buf_free(&fn), pt_buf_free(&their_call), pt_buf_free(&major_call);
        free(odd), free(rest);
        found = true;
    }
    free(calls);
    return found;
}

/* ------------------------------------------------------------ 3. missing ranks, cycles */

typedef struct missing_info {
    int64_t top;                       /* #K: the first call a missing member has not joined */
    const pt_collective_call *call;    /* a waiting member's call #K */
    int32_t *waiting, *missing;        /* members at the highest call any reached; those behind */
    size_t n_waiting, n_missing;
} missing_info;

/* The earliest call v still has in flight, or 0: NCCL members issue the later calls too,
 * and block in that one. */
static int64_t first_in_flight(const rank_view *v)
{
    int64_t first = 0;
    for (size_t k = 0; v->g && k < v->g->call_count; k++)
        if (in_flight(&v->g->calls[k]) && (!first || v->g->calls[k].seq < first))
            first = v->g->calls[k].seq;
    return first;
}

static bool missing_of(const hang_ctx *h, const group_view *gv, missing_info *m)
{
    memset(m, 0, sizeof *m);
    int64_t highest = 0;
    const rank_view *ahead = NULL;
    for (size_t i = 0; i < gv->count; i++)
        if (last_seq(&gv->ranks[i]) > highest)
            highest = last_seq(&gv->ranks[i]), ahead = &gv->ranks[i];
    if (!highest)
        return false;
    m->waiting = pt_xmalloc(gv->count * sizeof *m->waiting);
    m->missing = pt_xmalloc(gv->count * sizeof *m->missing);
    m->top = highest;
    int64_t blocked_in = highest; /* the earliest call a waiting member has in flight */
    bool placed = false;          /* a missing member with a summary says which call it lacks */
    for (size_t i = 0; i < gv->count; i++) {
        const rank_view *v = &gv->ranks[i];
        bool known = v->w != NO_WORKER && h->knows[v->w];
        if (last_seq(v) == highest) {
            m->waiting[m->n_waiting++] = v->rank;
            int64_t first = first_in_flight(v);
            if (first > 0)
                blocked_in = PT_MIN(blocked_in, first);
        } else if (known || v->w == NO_WORKER) {
            m->missing[m->n_missing++] = v->rank;
            if (known) { /* one without a summary could be anywhere: it says nothing of where */
                m->top = PT_MIN(m->top, last_seq(v) + 1);
                placed = true;
            }
        }
    }
    if (!placed) /* only members without a summary are missing: where the others block says */
        m->top = blocked_in;
    /* The call they wait for is the first one a missing rank has not made (NCCL ranks
     * issue the later ones too and block in that one). */
    const pt_collective_call *c = call_at(ahead->g, m->top);
    m->call = c ? c : ahead->last;
    return m->n_missing > 0;
}

static void free_missing(missing_info *m)
{
    free(m->waiting), free(m->missing);
}

/* The group (other than gv) whose top call rank r waits in, or NULL. */
static const group_view *waits_in(const hang_ctx *h, int32_t r, const group_view *gv, const pt_collective_call **call)
{
    if (r < 0 || (size_t)r >= h->rank_limit || h->waiting_in[r] < 0)
        return NULL;
    const group_view *o = &h->groups[h->waiting_in[r]];
    if (o == gv)
        return NULL;
    for (size_t k = 0; k < o->count; k++)
        if (o->ranks[k].rank == r) {
            *call = o->ranks[k].last;
            return o;
        }
    return NULL;
}

/* Flags of a rank in the scratch table, for membership in O(1). */
enum { MARK_WAITING = 1, MARK_MISSING = 2 };

static void mark_ranks(hang_ctx *h, const int32_t *ranks, size_t n, uint8_t flag, bool on)
{
    for (size_t i = 0; i < n; i++)
        if (ranks[i] >= 0 && (size_t)ranks[i] < h->rank_limit)
            h->mark[ranks[i]] = on ? (uint8_t)(h->mark[ranks[i]] | flag) : (uint8_t)(h->mark[ranks[i]] & ~flag);
}

static bool marked(const hang_ctx *h, int32_t r, uint8_t flag)
{
    return r >= 0 && (size_t)r < h->rank_limit && (h->mark[r] & flag);
}

/* Two groups, each waited in by ranks the other misses: entered in opposite orders. */
static bool find_deadlock(hang_ctx *h, group_view *gv, missing_info *m)
{
    bool *tried = pt_xcalloc(h->group_count ? h->group_count : 1, sizeof *tried);
    mark_ranks(h, m->waiting, m->n_waiting, MARK_WAITING, true);
    bool found = false;
    for (size_t i = 0; i < m->n_missing && !found; i++) {
        const pt_collective_call *other_call = NULL;
        const group_view *other = waits_in(h, m->missing[i], gv, &other_call);
        if (!other || tried[other - h->groups])
            continue;
        tried[other - h->groups] = true;
        missing_info om;
        if (!missing_of(h, other, &om)) {
            free_missing(&om);
            continue;
        }
        bool cycle = false;
        for (size_t k = 0; k < om.n_missing && !cycle; k++)
            cycle = marked(h, om.missing[k], MARK_WAITING);
        if (!cycle) {
            free_missing(&om);
            continue;
        }
        found = true;
        evidence e = evidence_new("deadlock", gv, m->call);
        pt_json *groups = pt_json_add(e.root, "groups", pt_json_array());
        pt_json_push(groups, pt_json_string(gv->name));
        pt_json_push(groups, pt_json_string(other->name));
        for (size_t k = 0; k < m->n_waiting; k++) {
            int32_t r = m->waiting[k];
            size_t w = (size_t)r < h->rank_limit ? h->worker_of[r] : NO_WORKER;
            evidence_row(&e, rank_row(h, r, w, "waits", gv->name, m->call));
        }
        for (size_t k = 0; k < om.n_waiting; k++) {
            int32_t r = om.waiting[k];
            size_t w = (size_t)r < h->rank_limit ? h->worker_of[r] : NO_WORKER;
            evidence_row(&e, rank_row(h, r, w, "waits", other->name, om.call));
        }
        pt_buf s = PT_BUF_INIT, fn = PT_BUF_INIT;
        pt_buf_printf(&s, "Process groups %s and %s are entered in opposite orders: ", gv->name, other->name);
        put_ranks(&s, m->waiting, m->n_waiting);
        pt_buf_printf(&s, " wait in %s #%" PRId64 " of group %s for ", m->call->op, m->top, gv->name);
        put_ranks(&s, om.waiting, om.n_waiting);
        pt_buf_printf(&s, ", which %s in %s #%" PRId64 " of group %s for them: a deadlock. Enter the process "
                          "groups in the same order on every rank.", om.n_waiting == 1 ? "waits" : "wait", om.call->op,
                      om.top, other->name);
        pt_buf_printf(&fn, "group %s %s #%" PRId64 " / group %s %s #%" PRId64, gv->name, m->call->op, m->top,
                      other->name, om.call->op, om.top);
        size_t n = m->n_waiting + om.n_waiting;
        int32_t *all = pt_xmalloc(n * sizeof *all);
        memcpy(all, m->waiting, m->n_waiting * sizeof *all);
        memcpy(all + m->n_waiting, om.waiting, om.n_waiting * sizeof *all);
        emit(h, fn.data, all, n, &s, &e);
        free(all);
        pt_buf_free(&fn);
        free_missing(&om);
    }
    mark_ranks(h, m->waiting, m->n_waiting, MARK_WAITING, false);
    free(tried);
    return found;
}

/* The missing ranks' own last collective, in any group: where their collectives stopped. */
static const pt_collective_call *own_last_call(const pt_worker_summary *s, const char **group)
{
    const pt_collective_call *best = NULL;
    for (size_t i = 0; s && i < s->group_count; i++) {
        const pt_collective_group *g = &s->groups[i];
        if (!g->call_count)
            continue;
        const pt_collective_call *c = &g->calls[g->call_count - 1];
        if (!best || (c->age_ns >= 0 && best->age_ns >= 0 && c->age_ns < best->age_ns)) {
            best = c;
            *group = g->name;
        }
    }
    return best;
}

static bool find_missing(hang_ctx *h, group_view *gv, bool roots_only)
{
    missing_info m;
    if (!missing_of(h, gv, &m)) {
        free_missing(&m);
        return false;
    }
    if (find_deadlock(h, gv, &m)) {
        free_missing(&m);
        return true;
    }
    /* Missing ranks that wait in another group are a consequence: that group is reported. */
    bool all_elsewhere = true;
    for (size_t i = 0; i < m.n_missing; i++) {
        const pt_collective_call *c;
        all_elsewhere = all_elsewhere && waits_in(h, m.missing[i], gv, &c) != NULL;
    }
    if (roots_only && all_elsewhere) {
        free_missing(&m);
        return false;
    }
    evidence e = evidence_new("missing", gv, m.call);
    mark_ranks(h, m.missing, m.n_missing, MARK_MISSING, true);
    mark_ranks(h, m.waiting, m.n_waiting, MARK_WAITING, true);
    for (size_t i = 0; i < gv->count; i++) {
        const rank_view *v = &gv->ranks[i];
        bool missing = marked(h, v->rank, MARK_MISSING);
        if (!missing && !marked(h, v->rank, MARK_WAITING))
            continue;
        evidence_row(&e, rank_row(h, v->rank, v->w, missing ? (v->w == NO_WORKER ? "no answer" : "missing") : "waits",
                                  gv->name, missing ? v->last : call_at(v->g, m.top)));
    }
    mark_ranks(h, m.missing, m.n_missing, MARK_MISSING, false);
    mark_ranks(h, m.waiting, m.n_waiting, MARK_WAITING, false);
    pt_buf s = PT_BUF_INIT, call = PT_BUF_INIT;
    put_call(&call, m.call, m.top);
    put_ranks(&s, m.missing, m.n_missing);
    s.data[0] = (char)(s.data[0] - 'a' + 'A');
    pt_buf_printf(&s, " %s not joined %s of ", m.n_missing == 1 ? "has" : "have", call.data);
    put_group(&s, gv);
    pt_buf_puts(&s, ", which ");
    put_ranks(&s, m.waiting, m.n_waiting);
    pt_buf_printf(&s, " %s in", m.n_waiting == 1 ? "waits" : "wait");
    /* Where the first few missing ranks are instead. */
    size_t told = 0;
    for (size_t i = 0; i < m.n_missing && told < 3; i++) {
        int32_t r = m.missing[i];
        size_t w = (size_t)r < h->rank_limit ? h->worker_of[r] : NO_WORKER;
        const pt_worker_summary *sw = summary_of(h, w);
        pt_buf_printf(&s, "; rank %d ", r);
        if (!sw) {
            pt_buf_puts(&s, "has no summary (see the warnings: it died, did not answer, or its trace could not be "
                            "read)");
            told++;
            continue;
        }
        const char *stack = stack_of(sw);
        const pt_collective_call *c = NULL;
        if (stack && sw->hang_step >= 0) {
            pt_buf_puts(&s, "is in ");
            put_where(&s, stack);
            pt_buf_puts(&s, " instead");
        } else if (stack) { /* a trace: where it ends, not a stack */
            pt_buf_puts(&s, "stopped: its trace ends in ");
            put_where(&s, stack);
        } else if (sw->hang_step < 0) {
            pt_buf_puts(&s, "stopped before it: its trace ends");
        } else {
            pt_buf_puts(&s, "is elsewhere (no stack)");
        }
        const char *other_group = NULL;
        const pt_collective_call *other_call = NULL;
        const group_view *waiting_elsewhere = waits_in(h, r, gv, &other_call);
        for (size_t k = 0; k < gv->count; k++)
            if (gv->ranks[k].rank == r)
                c = gv->ranks[k].last;
        if (waiting_elsewhere) {
            pt_buf printed = PT_BUF_INIT;
            put_call(&printed, other_call, other_call->seq);
            pt_buf_printf(&s, ", waiting in %s of group %s", printed.data, waiting_elsewhere->name);
            pt_buf_free(&printed);
        } else if (c) {
            pt_buf_printf(&s, " (its last call in this group: %s #%" PRId64 ", %s)", c->op, c->seq,
                          pt_call_state_name(c->state));
        } else if ((c = own_last_call(sw, &other_group)) != NULL) {
            pt_buf_printf(&s, " (no call in this group yet; its last collective: %s #%" PRId64 " of group %s, %s)",
                          c->op, c->seq, other_group, pt_call_state_name(c->state));
        } else {
            pt_buf_puts(&s, " (no collective yet)");
        }
        told++;
    }
    if (m.n_missing > told)
        pt_buf_printf(&s, "; and %zu more", m.n_missing - told);
    pt_buf_puts(&s, ". Find why it does not reach the call (py-spy dump that process) before restarting the job.");
    /* The function: where the first missing rank is (what the old report named). */
    size_t w0 = (size_t)m.missing[0] < h->rank_limit ? h->worker_of[m.missing[0]] : NO_WORKER;
    const char *stack0 = stack_of(summary_of(h, w0));
    pt_buf fn = PT_BUF_INIT;
    if (stack0)
        pt_buf_puts(&fn, stack0);
    else
        pt_buf_printf(&fn, "missing from %s #%" PRId64, m.call->op, m.top);
    emit(h, fn.data, m.missing, m.n_missing, &s, &e);
    pt_buf_free(&fn), pt_buf_free(&call);
    free_missing(&m);
    return true;
}

/* ------------------------------------------------------------ 4. nobody returns */

static bool find_stuck(hang_ctx *h, group_view *gv)
{
    if (gv->count < 2)
        return false;
    /* The first call the first member has not returned from (an NCCL rank has issued the
     * later ones behind it): every member must be in it, with the same call, and none
     * may have finished anything after it. */
    const pt_collective_group *g0 = gv->ranks[0].g;
    const pt_collective_call *top = NULL;
    for (size_t k = 0; g0 && k < g0->call_count && !top; k++)
        if (in_flight(&g0->calls[k]))
            top = &g0->calls[k];
    if (!top)
        return false;
    for (size_t i = 0; i < gv->count; i++) {
        const pt_collective_call *c = call_at(gv->ranks[i].g, top->seq);
        if (!c || !in_flight(c) || !same_call(c, top) || gv->ranks[i].w == NO_WORKER)
            return false;
        for (size_t k = 0; k < gv->ranks[i].g->call_count; k++)
            if (gv->ranks[i].g->calls[k].seq > top->seq && gv->ranks[i].g->calls[k].state == PT_CALL_COMPLETED)
                return false;
    }
    evidence e = evidence_new("stuck_in_transport", gv, top);
    int32_t *all = pt_xmalloc(gv->count * sizeof *all);
    for (size_t i = 0; i < gv->count; i++) {
        all[i] = gv->ranks[i].rank;
        evidence_row(&e, rank_row(h, gv->ranks[i].rank, gv->ranks[i].w, "waits", gv->name,
                                  call_at(gv->ranks[i].g, top->seq)));
    }
    pt_buf s = PT_BUF_INIT, call = PT_BUF_INIT, fn = PT_BUF_INIT;
    put_call(&call, top, top->seq);
    pt_buf_puts(&s, "Every rank of ");
    put_group(&s, gv);
    pt_buf_printf(&s, " entered %s and none returned: no rank is missing and the calls match, so the "
                      "transport itself is stuck (the network between the ranks, or %s). Check the links and the "
                      "backend's own logs (NCCL_DEBUG=INFO, TORCH_NCCL_TRACE_BUFFER_SIZE for its Flight Recorder).",
                  call.data, gv->shape && gv->shape->backend ? gv->shape->backend : "the backend");
    pt_buf_printf(&fn, "%s #%" PRId64 " of group %s", top->op, top->seq, gv->name);
    finding *f = emit(h, fn.data, all, gv->count, &s, &e);
    if (f)
        f->all_workers = f->worker_count == h->a->n;
    pt_buf_free(&call), pt_buf_free(&fn);
    free(all);
    return true;
}

/* ------------------------------------------------------------ without collective state */

static bool stack_in_collective(const char *stack)
{
    if (!stack)
        return false;
    const char *frame = stack;
    for (const char *p = stack;; p++) {
        if (*p == '|' || *p == '\0') {
            if (pt_cpu_is_collective(frame, (size_t)(p - frame)) || pt_kernel_is_collective(frame, (size_t)(p - frame)))
                return true;
            if (!*p)
                return false;
            frame = p + 1;
        }
    }
}

/* The stacks decide: workers stopped outside a collective are the culprits; those
 * blocked in one wait for them (or, when every traced worker is blocked, for a worker
 * that is not among them). Workers already named are left alone. */
static void stack_findings(hang_ctx *h)
{
    const pt_analysis *a = h->a;
    bool *blocked = pt_xcalloc(a->n ? a->n : 1, sizeof *blocked);
    bool *culprit = pt_xcalloc(a->n ? a->n : 1, sizeof *culprit);
    size_t nblocked = 0, nculprits = 0;
    const char *collective = NULL;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        if (!h->stopped[w] || h->named[w])
            continue;
        if (s->hang_step >= 0)
            blocked[w] = stack_in_collective(s->hang_stack);
        else
            blocked[w] = s->stall_class == PT_CLASS_COMM;
        if (blocked[w] && !collective && s->hang_step < 0)
            collective = s->stall_function;
        culprit[w] = !blocked[w];
        nblocked += blocked[w];
        nculprits += culprit[w];
    }
    /* Workers blocked in a collective wait for someone: those that are not blocked --
     * unless a hang report saw them still stepping. (A trace of a rank that stopped
     * just ends, inside its step: it shows no stall of its own.) */
    if (nblocked && !nculprits)
        for (size_t w = 0; w < a->n; w++)
            if (!blocked[w] && !h->progressing[w] && !h->named[w])
                culprit[w] = true, nculprits++;
    if (nculprits) {
        finding *f = pt_finding_add(h->list, "hang", "", "workers");
        f->metric = "step the worker stopped in";
        f->impact = 1.0;
        for (size_t w = 0; w < a->n; w++)
            if (culprit[w]) {
                pt_finding_name_worker(f, w, (double)a->workers[w]->hang_step);
                h->status[w] = 2;
                h->named[w] = true;
            }
        const pt_worker_summary *first = a->workers[f->workers[0]];
        free(f->function);
        f->function = pt_xstrdup(first->hang_stack ? first->hang_stack
                                 : first->stall_function && first->stall_class != PT_CLASS_COMM ? first->stall_function
                                                                                                 : "stopped stepping");
        pt_buf s = PT_BUF_INIT;
        pt_ranks_phrase(a, f, &s);
        pt_buf_printf(&s, " stopped making progress");
        if (first->hang_step >= 0)
            pt_buf_printf(&s, " in step %lld", (long long)first->hang_step);
        if (strcmp(f->function, "stopped stepping") != 0) { /* its innermost frames, not the stack key */
            pt_buf_puts(&s, " (last in ");
            put_where(&s, f->function);
            pt_buf_puts(&s, ")");
        }
        if (nblocked)
            pt_buf_printf(&s, "; %zu other worker%s %s blocked in %s waiting for %s", nblocked, nblocked == 1 ? "" : "s",
                          nblocked == 1 ? "is" : "are", collective ? collective : "a collective",
                          f->worker_count == 1 ? "it" : "them");
        pt_buf_puts(&s, ". Inspect that process (py-spy dump, gdb) before restarting the job.");
        f->summary = pt_buf_take(&s);
        evidence e = evidence_new("stopped", NULL, NULL);
        for (size_t w = 0; w < a->n; w++)
            if (culprit[w] || blocked[w])
                evidence_row(&e, rank_row(h, a->workers[w]->rank, w, culprit[w] ? "stopped" : "waits", "", NULL));
        f->hang = e.root;
    } else if (nblocked) {
        finding *f = pt_finding_add(h->list, "hang", collective ? collective : "collective", "workers");
        f->all_workers = nblocked == a->n;
        f->impact = 1.0;
        f->metric = "blocked after the last step, ms";
        for (size_t w = 0; w < a->n; w++)
            if (blocked[w]) {
                pt_finding_name_worker(f, w, (double)a->workers[w]->stall_ns / 1e6);
                h->status[w] = 2;
                h->named[w] = true;
            }
        pt_buf s = PT_BUF_INIT;
        pt_buf_printf(&s, "Every traced worker is blocked in %s: the worker they wait for is not among the traces "
                          "(see the missing ranks) or the network hangs.",
                      collective ? collective : "a collective");
        f->summary = pt_buf_take(&s);
        evidence e = evidence_new("blocked", NULL, NULL);
        for (size_t w = 0; w < a->n; w++)
            if (blocked[w])
                evidence_row(&e, rank_row(h, a->workers[w]->rank, w, "waits", "", NULL));
        f->hang = e.root;
    }
    free(blocked);
    free(culprit);
}

/* ------------------------------------------------------------ the pass */

static void classify_workers(hang_ctx *h)
{
    const pt_analysis *a = h->a;
    double stuck_ms = HANG_STEPS * a->median_step_ms;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        h->knows[w] = s->group_count > 0 || s->thread_count > 0;
        if (s->hang_step >= 0) {
            int64_t step_ns = s->hang_step_ns > 0 ? s->hang_step_ns : 0;
            int64_t progress_ns = step_ns > 0 ? (int64_t)(PROGRESS_STEPS * (double)step_ns) : PROGRESS_FLOOR_NS;
            h->progressing[w] = s->hang_idle_ns >= 0 && s->hang_idle_ns <= progress_ns;
            h->stopped[w] = !h->progressing[w];
        } else {
            h->stopped[w] = a->median_step_ms > 0 && (double)s->stall_ns / 1e6 > stuck_ms;
        }
    }
}

void pt_hang_findings(const pt_analysis *a, finding_list *list, int *status)
{
    hang_ctx h = {0};
    h.a = a;
    h.list = list;
    h.status = status;
    size_t n = a->n ? a->n : 1;
    h.knows = pt_xcalloc(n, sizeof *h.knows);
    h.stopped = pt_xcalloc(n, sizeof *h.stopped);
    h.progressing = pt_xcalloc(n, sizeof *h.progressing);
    h.named = pt_xcalloc(n, sizeof *h.named);
    classify_workers(&h);
    size_t stopped = 0;
    for (size_t w = 0; w < a->n; w++)
        stopped += h.stopped[w];
    gather(&h);
    size_t before = list->count;
    /* A failed collective is reported whether or not anything stopped: the job ended. */
    for (size_t i = 0; i < h.group_count; i++)
        find_error(&h, &h.groups[i]);
    if (stopped) {
        bool found = list->count > before;
        for (size_t i = 0; i < h.group_count && !found; i++)
            found = find_mismatch(&h, &h.groups[i]);
        for (int pass = 0; pass < 2 && !found; pass++) /* roots first, then any */
            for (size_t i = 0; i < h.group_count; i++)
                found |= find_missing(&h, &h.groups[i], pass == 0);
        for (size_t i = 0; i < h.group_count && !found; i++)
            found = find_stuck(&h, &h.groups[i]);
        if (!found)
            stack_findings(&h);
    }
    for (size_t i = 0; i < h.group_count; i++)
        free(h.groups[i].ranks);
    free(h.groups);
    free(h.worker_of);
    free(h.waiting_in);
    free(h.mark);
    free(h.knows);
    free(h.stopped);
    free(h.progressing);
    free(h.named);
}
