/* summarize_python.c -- stage 3 of the pipeline (summarize.c): Python's time.
 *
 * Per thread, CPU events sorted by (start, longer first, depth) rebuild the call tree
 * with a stack (sort_cpu_events: one radix sort). Each frame's exclusive segments are
 * work, or waiting when the frame is a builtin or operator that handed its work to other
 * threads (handed_off_ns, against every thread's busy stretches), or an annotation; work
 * minus its coverage by H4 accumulates on the frame's full call stack, interned as
 * (parent stack, frame), and every thread's work builds H5, the Python layer
 * (account_python, sum_python_time). A second sweep of the same order puts each runtime
 * call under the innermost frame open when it starts, so a runtime API names the stack
 * it was called from most (attribute_runtime_calls, sum_main_caller). */
#include "summarize/summarize_state.h"
#include "summarize/classify.h"

#include <stdlib.h>
#include <string.h>

#define MAX_STACK_RENDER 16384

/* ------------------------------------------------------------ Python call stacks */

uint32_t sum_normalized_frame(reducer *r, uint32_t raw)
{
    sum_cover_name(r, raw);
    if (r->normalized[raw] == NO_ID) {
        pt_buf b = PT_BUF_INIT;
        pt_normalize_frame(&b, pt_strtab_get(&r->s->names, raw), pt_strtab_len(&r->s->names, raw));
        r->normalized[raw] = pt_strtab_intern(&r->s->names, pt_buf_cstr(&b), b.len);
        pt_buf_free(&b);
    }
    return r->normalized[raw];
}

static uint32_t stack_intern(reducer *r, uint32_t parent, uint32_t frame)
{
    uint32_t key[2] = {parent, frame};
    uint32_t id = pt_strtab_intern(&r->stacks, (const char *)key, sizeof key);
    if (id >= r->stack_cap) {
        PT_GROW(r->stack_parent, r->stack_cap, (size_t)id + 1);
        r->stack_frame = pt_xrealloc(r->stack_frame, r->stack_cap * sizeof *r->stack_frame);
    }
    r->stack_parent[id] = parent;
    r->stack_frame[id] = frame;
    return id;
}

/* Call-tree order within a thread: earlier start first; on equal starts the longer
 * (outer) event first, then the shallower. */
static bool cpu_before(const cpu_rec *a, const cpu_rec *b)
{
    if (a->start != b->start)
        return a->start < b->start;
    if (a->end != b->end)
        return a->end > b->end;
    return a->depth < b->depth;
}

/* Orders CPU events by (thread, start, longer first, depth). One radix sort on a
 * combined key (thread in the top bits, start below) does almost all the work; equal
 * starts, which are rare, are then put in order by insertion within their run. */
static void sort_cpu_events(pt_summarizer *s, uint32_t *order)
{
    size_t n = s->cpu_count;
    uint64_t *keys = pt_xmalloc((n ? n : 1) * sizeof *keys);
    int64_t min_start = INT64_MAX, max_start = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        min_start = PT_MIN(min_start, s->cpu[i].start);
        max_start = PT_MAX(max_start, s->cpu[i].start);
    }
    int start_bits = 1;
    while (start_bits < 63 && ((uint64_t)(max_start - min_start) >> start_bits) != 0)
        start_bits++;
    /* Threads: dense ids in order of first appearance. */
    pt_strtab tids;
    pt_strtab_init(&tids);
    uint32_t *thread = pt_xmalloc((n ? n : 1) * sizeof *thread);
    for (size_t i = 0; i < n; i++)
        thread[i] = pt_strtab_intern(&tids, (const char *)&s->cpu[i].tid, sizeof s->cpu[i].tid);
    int thread_bits = 1;
    while (thread_bits < 32 && (tids.count >> thread_bits) != 0)
        thread_bits++;
    pt_strtab_free(&tids);
    bool combined = start_bits + thread_bits <= 64;
    for (size_t i = 0; i < n; i++) {
        uint64_t start = (uint64_t)(s->cpu[i].start - min_start);
        keys[i] = combined ? (uint64_t)thread[i] << start_bits | start : start;
    }
    pt_radix_order(keys, n, order);
    if (!combined) { /* a window of centuries: thread as a second, more significant pass */
        for (size_t i = 0; i < n; i++)
            keys[i] = thread[i];
        pt_radix_reorder(keys, n, order);
    }
    for (size_t i = 1; i < n; i++) { /* insertion within runs of equal (thread, start) */
        uint32_t item = order[i];
        size_t j = i;
        while (j > 0 && thread[order[j - 1]] == thread[item] && s->cpu[order[j - 1]].start == s->cpu[item].start &&
               cpu_before(&s->cpu[item], &s->cpu[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = item;
    }
    free(thread);
    free(keys);
}

/* ------------------------------------------------------------ Python: work or waiting */

/* Calls on one thread less than this apart are one busy stretch: the thread runs
 * untraced native code between them (the autograd engine between two launches). */
#define BUSY_GAP_NS 100000
/* A frame that is not interpreter code is waiting when other threads' work, started and
 * finished inside it, covers at least this share of its own time. */
#define WAITING_SHARE 0.2

/* A stretch of time one thread was busy (its CPU events and runtime calls, gaps under
 * BUSY_GAP_NS closed). */
typedef struct envelope {
    int64_t start, end;
    int64_t tid;
} envelope;

typedef struct segment {
    int64_t start, end;
    uint32_t stack;
} segment;

typedef struct open_frame {
    int64_t start, end;
    int64_t segment_start; /* start of the exclusive segment now running */
    int64_t tid;
    size_t first_segment;  /* its exclusive segments are segments[first_segment..] */
    uint32_t stack;
    bool comm;             /* inside a collective: its time is communication, not Python */
    bool may_wait;         /* a C call or an operator: it can block */
    bool annotation;       /* a label around code: its own time is never Python work */
} open_frame;

typedef struct call_walk {
    open_frame *frames;
    size_t depth, frame_cap;
    segment *segments;
    size_t segment_count, segment_cap;
    envelope *envelopes;   /* sorted by start */
    size_t envelope_count;
    interval_vec busy;     /* this thread: its top-level frames, in time order */
    interval_vec waiting;  /* this thread: the exclusive segments that are waiting */
    interval_vec work;     /* every thread's busy time less its waiting: the Python layer */
} call_walk;

static int cmp_envelope(const void *a, const void *b)
{
    const envelope *x = a, *y = b;
    return pt_cmp_i64(x->start, y->start);
}

/* Busy stretches per thread, from CPU events and runtime calls in time order. */
static void build_envelopes(reducer *r, call_walk *w)
{
    pt_summarizer *s = r->s;
    size_t n = s->cpu_count + s->runtime_count;
    int64_t min_start = INT64_MAX;
    for (size_t i = 0; i < s->cpu_count; i++)
        min_start = PT_MIN(min_start, s->cpu[i].start);
    for (size_t i = 0; i < s->runtime_count; i++)
        min_start = PT_MIN(min_start, s->runtime[i].start);
    uint64_t *keys = pt_xmalloc((n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = (uint64_t)((i < s->cpu_count ? s->cpu[i].start : s->runtime[i - s->cpu_count].start) - min_start);
    uint32_t *order = pt_xmalloc((n ? n : 1) * sizeof *order);
    pt_radix_order(keys, n, order);
    free(keys);
    pt_strtab threads;
    pt_strtab_init(&threads);
    envelope *open = NULL; /* per dense thread id: the stretch being extended */
    size_t open_cap = 0, cap = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        int64_t tid = i < s->cpu_count ? s->cpu[i].tid : s->runtime[i - s->cpu_count].tid;
        int64_t a = i < s->cpu_count ? s->cpu[i].start : s->runtime[i - s->cpu_count].start;
        int64_t b = i < s->cpu_count ? s->cpu[i].end : s->runtime[i - s->cpu_count].end;
        uint32_t t = pt_strtab_intern(&threads, (const char *)&tid, sizeof tid);
        if (t >= open_cap) {
            size_t old = open_cap;
            PT_GROW(open, open_cap, (size_t)t + 1);
            for (size_t j = old; j < open_cap; j++)
                open[j] = (envelope){0, INT64_MIN, 0};
        }
        envelope *e = &open[t];
        if (e->end != INT64_MIN && a <= e->end + BUSY_GAP_NS) {
            e->end = PT_MAX(e->end, b);
            continue;
        }
        if (e->end != INT64_MIN) {
            PT_GROW(w->envelopes, cap, w->envelope_count + 1);
            w->envelopes[w->envelope_count++] = *e;
        }
        *e = (envelope){a, b, tid};
    }
    for (size_t t = 0; t < threads.count; t++) {
        PT_GROW(w->envelopes, cap, w->envelope_count + 1);
        w->envelopes[w->envelope_count++] = open[t];
    }
    qsort(w->envelopes, w->envelope_count, sizeof *w->envelopes, cmp_envelope);
    pt_strtab_free(&threads);
    free(open);
    free(order);
}

/* How much of a frame's exclusive time other threads spent working on stretches that
 * began and ended inside the frame: work it handed off and waited for (backward while
 * the autograd thread runs, a DDP call while gloo's threads reduce). A thread that was
 * busy before the frame began is not its doing. Capped at the exclusive time. */
static int64_t handed_off_ns(const call_walk *w, const open_frame *f, const segment *seg, size_t nseg, int64_t own)
{
    size_t lo = 0, hi = w->envelope_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->envelopes[mid].start < f->start)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t covered = 0;
    for (size_t i = lo; i < w->envelope_count && w->envelopes[i].start < f->end && covered < own; i++) {
        const envelope *x = &w->envelopes[i];
        if (x->end > f->end || x->tid == f->tid)
            continue;
        size_t a = 0, b = nseg; /* first segment ending after x starts */
        while (a < b) {
            size_t mid = (a + b) / 2;
            if (seg[mid].end <= x->start)
                a = mid + 1;
            else
                b = mid;
        }
        for (size_t k = a; k < nseg && seg[k].start < x->end; k++)
            covered += PT_MIN(seg[k].end, x->end) - PT_MAX(seg[k].start, x->start);
    }
    return PT_MIN(covered, own);
}

/* Interpreter code is work by definition; builtins ("<built-in method run_backward>",
 * "<method 'item' ...>") and operators may block. */
static bool may_wait(reducer *r, const cpu_rec *e)
{
    if (e->kind == PT_CPU_OPERATOR)
        return true;
    const char *name = pt_strtab_get(&r->s->names, e->name);
    size_t n = pt_strtab_len(&r->s->names, e->name);
    if (n >= 9 && (memcmp(name, "<built-in", 9) == 0 || memcmp(name, "<method ", 8) == 0))
        return true;
    if (e->kind == PT_CPU_PYTHON)
        return false;
    for (size_t i = 0; i + 4 <= n; i++) /* unknown producer: a "file.py..." frame is Python */
        if (name[i] == '.' && name[i + 1] == 'p' && name[i + 2] == 'y' && (name[i + 3] == '(' || name[i + 3] == ':'))
            return false;
    return true;
}

/* A frame's exclusive time from a to b. Inside a collective it is communication, neither
 * a stack's work nor the thread's: it joins the thread's waiting, so the Python layer
 * leaves it out (the layers hide it under communication anyway; the sync points' count
 * of work must not hold it). */
static void push_segment(reducer *r, call_walk *w, const open_frame *f, int64_t a, int64_t b)
{
    if (!clip(r, &a, &b))
        return;
    if (f->comm) {
        PT_GROW(w->waiting.items, w->waiting.cap, w->waiting.count + 1);
        w->waiting.items[w->waiting.count++] = (pt_interval){a, b};
        return;
    }
    PT_GROW(w->segments, w->segment_cap, w->segment_count + 1);
    w->segments[w->segment_count++] = (segment){a, b, f->stack};
}

/* One exclusive segment of work: a Python stack's exposed time is the part no higher
 * class covers. Accounted at once: a frame's segments never overlap one another on its
 * thread, and a stack is per thread in practice (its root frame names the thread's
 * entry point). */
static void account_work(reducer *r, func_acc *acc, int64_t a, int64_t b)
{
    const pt_timeline *above = &r->layer[PT_CLASS_PYTHON];
    acc->total_ns = add_saturating(acc->total_ns, b - a);
    acc->exposed_ns = add_saturating(acc->exposed_ns, (b - a) - pt_timeline_covered(above, a, b));
    if (r->step_values)
        sum_add_step_exposure(r, (size_t)(acc - r->funcs), above, a, b);
}

/* A thread's work is its busy time (its top-level frames) less its waiting segments:
 * added to the Python layer when the walk leaves the thread. */
static void finish_thread(call_walk *w)
{
    interval_vec *busy = &w->busy, *wait = &w->waiting;
    if (wait->count) /* never qsort(NULL, 0): UB */
        qsort(wait->items, wait->count, sizeof *wait->items, sum_cmp_interval);
    size_t k = 0;
    for (size_t i = 0; i < busy->count; i++) {
        int64_t a = busy->items[i].start, b = busy->items[i].end;
        for (; k < wait->count && wait->items[k].start < b; k++) {
            if (wait->items[k].end <= a)
                continue;
            if (wait->items[k].start > a) {
                PT_GROW(w->work.items, w->work.cap, w->work.count + 1);
                w->work.items[w->work.count++] = (pt_interval){a, wait->items[k].start};
            }
            a = PT_MAX(a, wait->items[k].end);
        }
        if (b > a) {
            PT_GROW(w->work.items, w->work.cap, w->work.count + 1);
            w->work.items[w->work.count++] = (pt_interval){a, b};
        }
    }
    busy->count = wait->count = 0;
}

/* A closing frame's exclusive segments become its stack's work, or its waiting. */
static void settle_frame(reducer *r, call_walk *w, const open_frame *f)
{
    size_t nseg = w->segment_count - f->first_segment;
    const segment *seg = nseg ? w->segments + f->first_segment : NULL;
    int64_t own = 0;
    for (size_t k = 0; k < nseg; k++)
        own += seg[k].end - seg[k].start;
    /* An annotation ("## backward ##", record_function ranges) wraps code; time in it
     * outside every traced call is the wait for what it wraps, or untraced. */
    bool waiting = f->annotation ||
                   (f->may_wait && own > 0 && (double)handed_off_ns(w, f, seg, nseg, own) >= WAITING_SHARE * (double)own);
    if (nseg) {
        func_acc *acc = sum_func_get(r, PT_CLASS_PYTHON, f->stack);
        for (size_t k = 0; k < nseg; k++) {
            if (waiting) {
                acc->waiting_ns = add_saturating(acc->waiting_ns, seg[k].end - seg[k].start);
                PT_GROW(w->waiting.items, w->waiting.cap, w->waiting.count + 1);
                w->waiting.items[w->waiting.count++] = (pt_interval){seg[k].start, seg[k].end};
            } else {
                account_work(r, acc, seg[k].start, seg[k].end);
            }
        }
    }
    w->segment_count = f->first_segment;
}

static void close_frame(reducer *r, call_walk *w)
{
    open_frame *top = &w->frames[--w->depth];
    push_segment(r, w, top, top->segment_start, top->end);
    settle_frame(r, w, top);
    if (w->depth)
        w->frames[w->depth - 1].segment_start = top->end;
}

static void free_call_walk(call_walk *w)
{
    free(w->frames);
    free(w->segments);
    free(w->envelopes);
    free(w->busy.items);
    free(w->waiting.items);
    free(w->work.items);
}

/* Rebuilds every thread's call tree and splits each frame's exclusive time into work
 * (the Python layer, exposed where no higher class covers it) and waiting. */
static uint32_t *account_python(reducer *r, call_walk *w)
{
    pt_summarizer *s = r->s;
    size_t n = s->cpu_count;
    if (!n)
        return NULL;
    build_envelopes(r, w);
    uint32_t *order = pt_xmalloc(n * sizeof *order);
    sort_cpu_events(s, order);
    for (size_t k = 0; k < n; k++) {
        const cpu_rec *e = &s->cpu[order[k]];
        if (w->depth && e->tid != w->frames[0].tid) {
            while (w->depth)
                close_frame(r, w);
            finish_thread(w);
        }
        while (w->depth && w->frames[w->depth - 1].end <= e->start)
            close_frame(r, w);
        int64_t end = e->end;
        uint32_t parent = NO_ID;
        bool comm = sum_name_is_cpu_collective(r, e->name);
        if (w->depth) {
            open_frame *top = &w->frames[w->depth - 1];
            push_segment(r, w, top, top->segment_start, e->start);
            end = PT_MIN(end, top->end); /* a child cannot outlive its parent */
            parent = top->stack;
            comm |= top->comm;
        } else {
            sum_add_clipped(r, &w->busy, e->start, end);
        }
        uint32_t id = stack_intern(r, parent, sum_normalized_frame(r, e->name));
        if (in_window(r, e->start, end)) {
            func_acc *f = sum_func_get(r, PT_CLASS_PYTHON, id);
            f->count++;
            f->max_ns = PT_MAX(f->max_ns, end - e->start);
        }
        PT_GROW(w->frames, w->frame_cap, w->depth + 1);
        w->frames[w->depth++] = (open_frame){e->start,      end,  e->start,        e->tid,
                                             w->segment_count, id, comm, may_wait(r, e),
                                             e->kind == PT_CPU_ANNOTATION};
    }
    while (w->depth)
        close_frame(r, w);
    finish_thread(w);
    return order; /* CPU events in (thread, start) order, for attribute_runtime_calls */
}

/* ------------------------------------------------------------ runtime calls' callers */

typedef struct call_ref {
    int64_t tid, start;
    uint32_t index;
} call_ref;

static int cmp_call_ref(const void *a, const void *b)
{
    const call_ref *x = a, *y = b;
    int order = pt_cmp_i64(x->tid, y->tid);
    if (!order)
        order = pt_cmp_i64(x->start, y->start);
    return order ? order : pt_cmp_i64(x->index, y->index);
}

static void attribute_call(reducer *r, const runtime_rec *c, uint32_t stack)
{
    int64_t a = c->start, b = c->end;
    if (!clip(r, &a, &b))
        return;
    uint32_t key[2] = {c->key, stack};
    uint32_t at = pt_strtab_intern(&r->call_sites, (const char *)key, sizeof key);
    if (at >= r->call_site_cap) {
        size_t old = r->call_site_cap;
        PT_GROW(r->call_site_ns, r->call_site_cap, (size_t)at + 1);
        memset(r->call_site_ns + old, 0, (r->call_site_cap - old) * sizeof *r->call_site_ns);
    }
    r->call_site_ns[at] = add_saturating(r->call_site_ns[at], b - a);
}

/* The Python stack each runtime call ran under: per thread, its CPU events (in call-tree
 * order) and its runtime calls (in time order) are swept together, so a call is inside
 * the innermost frame open when it starts. What a cudaFree is for is the frame that
 * called it (torch.cuda.empty_cache), which the summary names (caller). */
static void attribute_runtime_calls(reducer *r, const uint32_t *cpu_order)
{
    pt_summarizer *s = r->s;
    if (!s->runtime_count || !cpu_order)
        return;
    call_ref *refs = pt_xmalloc(s->runtime_count * sizeof *refs);
    for (size_t i = 0; i < s->runtime_count; i++)
        refs[i] = (call_ref){s->runtime[i].tid, s->runtime[i].start, (uint32_t)i};
    qsort(refs, s->runtime_count, sizeof *refs, cmp_call_ref);
    uint32_t *calls = pt_xmalloc(s->runtime_count * sizeof *calls);
    for (size_t i = 0; i < s->runtime_count; i++)
        calls[i] = refs[i].index;
    free(refs);
    typedef struct open {
        int64_t end;
        uint32_t stack;
    } open;
    open *frames = NULL;
    size_t cap = 0;
    for (size_t k = 0; k < s->cpu_count;) {
        int64_t tid = s->cpu[cpu_order[k]].tid;
        size_t lo = 0, hi = s->runtime_count; /* this thread's first call */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s->runtime[calls[mid]].tid < tid)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t depth = 0, c = lo;
        for (; k < s->cpu_count && s->cpu[cpu_order[k]].tid == tid; k++) {
            const cpu_rec *e = &s->cpu[cpu_order[k]];
            for (; c < s->runtime_count && s->runtime[calls[c]].tid == tid && s->runtime[calls[c]].start < e->start; c++) {
                while (depth && frames[depth - 1].end <= s->runtime[calls[c]].start)
                    depth--;
                if (depth)
                    attribute_call(r, &s->runtime[calls[c]], frames[depth - 1].stack);
            }
            while (depth && frames[depth - 1].end <= e->start)
                depth--;
            uint32_t parent = depth ? frames[depth - 1].stack : NO_ID;
            int64_t end = depth ? PT_MIN(e->end, frames[depth - 1].end) : e->end;
            PT_GROW(frames, cap, depth + 1);
            frames[depth++] = (open){end, stack_intern(r, parent, sum_normalized_frame(r, e->name))};
        }
        for (; c < s->runtime_count && s->runtime[calls[c]].tid == tid; c++) {
            while (depth && frames[depth - 1].end <= s->runtime[calls[c]].start)
                depth--;
            if (depth)
                attribute_call(r, &s->runtime[calls[c]], frames[depth - 1].stack);
        }
    }
    free(frames);
    free(calls);
}

/* The stack a runtime API spent most time under, or NO_ID. */
uint32_t sum_main_caller(const reducer *r, uint32_t api)
{
    uint32_t best = NO_ID;
    int64_t best_ns = 0;
    for (uint32_t i = 0; i < r->call_sites.count; i++) {
        uint32_t key[2];
        memcpy(key, pt_strtab_get(&r->call_sites, i), sizeof key);
        if (key[0] == api && r->call_site_ns[i] > best_ns)
            best_ns = r->call_site_ns[i], best = key[1];
    }
    return best;
}

/* ------------------------------------------------------------ stage 3 whole */

void sum_python_time(reducer *r)
{
    call_walk walk = {0};
    pt_strtab_init(&r->call_sites);
    r->cpu_order = account_python(r, &walk);
    attribute_runtime_calls(r, r->cpu_order);
    sum_add_layer(r, PT_CLASS_PYTHON, walk.work.items, walk.work.count);
    free_call_walk(&walk);
}

/* ------------------------------------------------------------ rendering */

void sum_render_stack(const reducer *r, uint32_t stack, pt_buf *out)
{
    uint32_t frames[256];
    size_t depth = 0, total = 0;
    for (uint32_t at = stack; at != NO_ID; at = r->stack_parent[at]) {
        if (depth < PT_ARRAY_LEN(frames))
            frames[depth++] = r->stack_frame[at];
        total++;
    }
    /* Outermost first. A stack deeper than 256 frames keeps its innermost 256. */
    if (total > depth)
        pt_buf_puts(out, "...|");
    for (size_t i = depth; i-- > 0;) {
        pt_buf_append(out, pt_strtab_get(&r->s->names, frames[i]), pt_strtab_len(&r->s->names, frames[i]));
        if (i)
            pt_buf_putc(out, '|');
        if (out->len > MAX_STACK_RENDER)
            break;
    }
}
