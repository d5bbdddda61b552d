/* hang_state.c -- parses a hang report's snapshot texts (hang_state.h).
 *
 *   thread <TAB> name <TAB> ident <TAB> training(0/1) <TAB> stack
 *   group  <TAB> name <TAB> backend ("-": unknown) <TAB> size <TAB> ranks
 *   call   <TAB> seq <TAB> op <TAB> count <TAB> dtype <TAB> state <TAB> age_us [<TAB> error]
 *
 * Lines are read one at a time, fields split on tabs with their count checked, numbers
 * parsed in full (no trailing bytes, in range), strings bounded. A call belongs to the
 * group line above it. Cost: linear in the text, which the protocol caps at 64 KB. */
#define _POSIX_C_SOURCE 200809L
#include "summarize/hang_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 8

typedef struct line {
    const char *field[MAX_FIELDS];
    size_t len[MAX_FIELDS];
    size_t count;
    size_t number; /* 1-based, for messages */
} line;

/* Splits [p, end) on tabs; false when it has more than MAX_FIELDS fields. The last field
 * (a stack, an error) keeps any tab it holds only when max_split says so. */
static bool split(const char *p, const char *end, size_t max_split, line *out)
{
    out->count = 0;
    while (out->count < MAX_FIELDS) {
        const char *tab = out->count + 1 < max_split ? memchr(p, '\t', (size_t)(end - p)) : NULL;
        const char *stop = tab ? tab : end;
        out->field[out->count] = p;
        out->len[out->count] = (size_t)(stop - p);
        out->count++;
        if (!tab)
            return true;
        p = tab + 1;
    }
    return false;
}

static bool is(const line *l, size_t i, const char *word)
{
    return l->len[i] == strlen(word) && memcmp(l->field[i], word, l->len[i]) == 0;
}

/* A whole field as an integer in [min, max]. */
static bool number(const line *l, size_t i, int64_t min, int64_t max, int64_t *out)
{
    char buf[32];
    if (l->len[i] == 0 || l->len[i] >= sizeof buf)
        return false;
    memcpy(buf, l->field[i], l->len[i]);
    buf[l->len[i]] = '\0';
    char *stop;
    errno = 0;
    long long v = strtoll(buf, &stop, 10);
    if (errno || *stop || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static char *text(const line *l, size_t i)
{
    return pt_xstrndup(l->field[i], l->len[i]);
}

#define BAD(...) (pt_error_set(err, __VA_ARGS__), -1)

/* ------------------------------------------------------------ ranks */

typedef struct run_builder {
    pt_rank_run *runs;
    size_t count, cap;
    bool open;         /* runs[count - 1] may still grow by single ranks */
    int64_t last;      /* highest rank so far, -1 none */
} run_builder;

static int add_run(run_builder *b, int64_t first, int64_t last, int64_t stride, bool single, pt_error *err)
{
    if (first <= b->last)
        return BAD("ranks are not in increasing order (%" PRId64 " after %" PRId64 ")", first, b->last);
    if (single && b->open) {
        pt_rank_run *r = &b->runs[b->count - 1];
        int64_t gap = first - r->last;
        if (r->first == r->last || gap == r->stride) {
            r->stride = (int32_t)gap;
            r->last = (int32_t)first;
            b->last = first;
            return 0;
        }
    }
    if (b->count >= PT_SUMMARY_MAX_RUNS)
        return BAD("more than %u runs of ranks", PT_SUMMARY_MAX_RUNS);
    PT_GROW(b->runs, b->cap, b->count + 1);
    b->runs[b->count++] = (pt_rank_run){(int32_t)first, (int32_t)last, (int32_t)stride};
    b->open = single;
    b->last = last;
    return 0;
}

/* One item: "a", "a-b" or "a-b/s". */
static int parse_rank_item(const char *p, const char *end, run_builder *b, pt_error *err)
{
    int64_t v[3] = {0, 0, 1};
    int parts = 0;
    const char *seps = "-/";
    while (p < end && parts < 3) {
        char buf[16];
        size_t n = 0;
        while (p < end && *p >= '0' && *p <= '9' && n < sizeof buf - 1)
            buf[n++] = *p++;
        if (n == 0 || n >= 8)
            return BAD("a rank is not a number below %d", PT_MAX_WORLD_SIZE);
        buf[n] = '\0';
        v[parts] = strtoll(buf, NULL, 10);
        if (v[parts] >= PT_MAX_WORLD_SIZE)
            return BAD("rank %" PRId64 " is not below %d", v[parts], PT_MAX_WORLD_SIZE);
        parts++;
        if (p < end) {
            if (parts > 2 || *p != seps[parts - 1])
                return BAD("unexpected '%c' in a rank list", *p);
            p++;
        }
    }
    if (p != end || (parts == 3 && v[2] < 1))
        return BAD("a run of ranks is not \"first-last/stride\" with stride >= 1");
    if (parts == 1)
        return add_run(b, v[0], v[0], 1, true, err);
    if (v[1] < v[0] || (v[1] - v[0]) % v[2] != 0)
        return BAD("run %" PRId64 "-%" PRId64 "/%" PRId64 " does not end on its stride", v[0], v[1], v[2]);
    return add_run(b, v[0], v[1], v[2], false, err);
}

int pt_rank_runs_parse(const char *text, size_t len, pt_rank_run **runs, size_t *count, pt_error *err)
{
    *runs = NULL;
    *count = 0;
    const char *p = text, *end = text + len;
    while (p < end && (*p == ' ' || *p == '['))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == ']'))
        end--;
    if (end - p == 1 && *p == '-')
        return 0;
    run_builder b = {NULL, 0, 0, false, -1};
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *a = p, *z = stop;
        while (a < z && *a == ' ')
            a++;
        while (z > a && z[-1] == ' ')
            z--;
        if (parse_rank_item(a, z, &b, err) != 0) {
            free(b.runs);
            return -1;
        }
        p = comma ? comma + 1 : end;
    }
    *runs = b.runs;
    *count = b.count;
    return 0;
}

/* ------------------------------------------------------------ lines */

static int parse_thread(pt_worker_summary *s, const line *l, pt_error *err)
{
    int64_t ident, training;
    if (l->count != 5 || !is(l, 0, "thread"))
        return BAD("line %zu is not \"thread, name, ident, training, stack\"", l->number);
    if (l->len[1] > PT_SUMMARY_MAX_LABEL || l->len[4] > PT_SUMMARY_MAX_NAME)
        return BAD("line %zu: a thread's name or stack is too long", l->number);
    if (!number(l, 2, 0, INT64_MAX, &ident) || !number(l, 3, 0, 1, &training))
        return BAD("line %zu: a thread's ident or training flag is not a number in range", l->number);
    if (s->thread_count >= PT_SUMMARY_MAX_THREADS)
        return BAD("more than %u threads", PT_SUMMARY_MAX_THREADS);
    for (size_t i = 0; i < s->thread_count && training; i++)
        if (s->threads[i].training)
            return BAD("line %zu: a second training thread", l->number);
    s->threads = pt_xrealloc(s->threads, (s->thread_count + 1) * sizeof *s->threads);
    pt_thread_stack *t = &s->threads[s->thread_count++];
    t->name = is(l, 1, "-") ? pt_xstrdup("") : text(l, 1);
    t->ident = ident;
    t->training = training != 0;
    t->stack = text(l, 4);
    return 0;
}

static int parse_group(pt_worker_summary *s, const line *l, pt_error *err)
{
    int64_t size;
    if (l->count != 5 || !is(l, 0, "group"))
        return BAD("line %zu is not \"group, name, backend, size, ranks\"", l->number);
    if (l->len[1] == 0 || l->len[1] > PT_SUMMARY_MAX_LABEL || l->len[2] > PT_SUMMARY_MAX_LABEL)
        return BAD("line %zu: a group's name is empty or a name too long", l->number);
    if (!number(l, 3, -1, PT_MAX_WORLD_SIZE, &size) || size == 0)
        return BAD("line %zu: a group's size is not -1 or 1 to %d", l->number, PT_MAX_WORLD_SIZE);
    for (size_t i = 0; i < s->group_count; i++)
        if (strlen(s->groups[i].name) == l->len[1] && memcmp(s->groups[i].name, l->field[1], l->len[1]) == 0)
            return BAD("line %zu: group %.*s appears twice", l->number, (int)PT_MIN(l->len[1], 60), l->field[1]);
    if (s->group_count >= PT_SUMMARY_MAX_GROUPS)
        return BAD("more than %u process groups", PT_SUMMARY_MAX_GROUPS);
    pt_rank_run *runs;
    size_t run_count;
    pt_error why;
    if (pt_rank_runs_parse(l->field[4], l->len[4], &runs, &run_count, &why) != 0)
        return BAD("line %zu: %s", l->number, why.message);
    s->groups = pt_xrealloc(s->groups, (s->group_count + 1) * sizeof *s->groups);
    pt_collective_group *g = &s->groups[s->group_count++];
    memset(g, 0, sizeof *g);
    g->name = text(l, 1);
    g->backend = is(l, 2, "-") || l->len[2] == 0 ? NULL : text(l, 2);
    g->size = (int32_t)size;
    g->runs = runs;
    g->run_count = run_count;
    return 0;
}

static int parse_call(pt_worker_summary *s, const line *l, pt_error *err)
{
    static const char *const states[] = {"entered", "issued", "completed", "failed"};
    int64_t seq, count, age_us;
    if ((l->count != 7 && l->count != 8) || !is(l, 0, "call"))
        return BAD("line %zu is not \"call, seq, op, count, dtype, state, age_us[, error]\"", l->number);
    if (!s->group_count)
        return BAD("line %zu: a call before any group", l->number);
    pt_collective_group *g = &s->groups[s->group_count - 1];
    if (!number(l, 1, 1, PT_SUMMARY_MAX_SEQ, &seq) || !number(l, 3, -1, PT_SUMMARY_MAX_NS, &count) ||
        !number(l, 6, 0, PT_SUMMARY_MAX_NS / 1000, &age_us))
        return BAD("line %zu: a call's number, count or age is not a number in range", l->number);
    if (g->call_count && seq <= g->calls[g->call_count - 1].seq)
        return BAD("line %zu: call %" PRId64 " does not follow call %" PRId64, l->number, seq,
                   g->calls[g->call_count - 1].seq);
    if (l->len[2] == 0 || l->len[2] > PT_SUMMARY_MAX_LABEL || l->len[4] > PT_SUMMARY_MAX_LABEL)
        return BAD("line %zu: a call's operation is empty or a name too long", l->number);
    int state = 0;
    for (size_t i = 0; i < PT_ARRAY_LEN(states); i++)
        if (is(l, 5, states[i]))
            state = (int)i + PT_CALL_ENTERED;
    if (!state)
        return BAD("line %zu: a call's state is not entered, issued, completed or failed", l->number);
    if (l->count == 8 && (state != PT_CALL_FAILED || l->len[7] > PT_SUMMARY_MAX_ERROR))
        return BAD("line %zu: an error on a call that did not fail, or longer than %u bytes", l->number,
                   PT_SUMMARY_MAX_ERROR);
    if (g->call_count >= PT_SUMMARY_MAX_CALLS)
        return BAD("line %zu: more than %u calls in one group", l->number, PT_SUMMARY_MAX_CALLS);
    g->calls = pt_xrealloc(g->calls, (g->call_count + 1) * sizeof *g->calls);
    pt_collective_call *c = &g->calls[g->call_count++];
    c->seq = seq;
    c->op = text(l, 2);
    c->count = count;
    c->dtype = l->len[4] == 0 || is(l, 4, "-") ? NULL : text(l, 4);
    c->state = (pt_call_state)state;
    c->age_ns = age_us * 1000;
    c->error = l->count == 8 ? text(l, 7) : NULL;
    return 0;
}

typedef int (*line_parser)(pt_worker_summary *s, const line *l, pt_error *err);

static int parse_lines(pt_worker_summary *s, const char *t, size_t max_split, line_parser parse_line,
                       const char *what, pt_error *err)
{
    if (!t)
        return 0;
    const char *p = t, *end = t + strlen(t);
    size_t number = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        line l;
        l.number = ++number;
        if (stop > p) {
            if (!split(p, stop, max_split, &l))
                return BAD("%s line %zu has too many fields", what, number);
            pt_error why;
            if (parse_line(s, &l, &why) != 0)
                return BAD("%s: %s", what, why.message);
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

static int parse_collective_line(pt_worker_summary *s, const line *l, pt_error *err)
{
    return l->count && is(l, 0, "group") ? parse_group(s, l, err) : parse_call(s, l, err);
}

int pt_hang_state_parse(pt_worker_summary *s, const char *threads, const char *collectives, pt_error *err)
{
    if (parse_lines(s, threads, 5, parse_thread, "the thread stacks", err) != 0 ||
        parse_lines(s, collectives, 8, parse_collective_line, "the collectives", err) != 0) {
        pt_summary_free_hang_state(s);
        return -1;
    }
    for (size_t i = 0; i < s->thread_count && !s->hang_stack; i++)
        if (s->threads[i].training && s->threads[i].stack[0])
            s->hang_stack = pt_xstrdup(s->threads[i].stack);
    return 0;
}
