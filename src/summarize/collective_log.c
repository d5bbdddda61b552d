/* collective_log.c -- a trace's collectives into the summary's groups (collective_log.h).
 *
 * Records are kept as they come (a few per step), then per group sorted: the CPU ops are
 * the calls; an NCCL group's kernels, matched by Seq when both carry it (else in order,
 * as NCCL runs a communicator's kernels in order), tell whether a call's GPU work ran.
 * Only the last CALLS_KEPT calls of a group go into the summary, like the collector's
 * ring. Strings (group, op, dtype, ranks) are interned in the log's own table, so
 * merging two logs is appending records with their strings re-interned. */
#include "summarize/collective_log.h"
#include "summarize/hang_state.h"
#include "util/strtab.h"

#include <stdlib.h>
#include <string.h>

#define CALLS_KEPT 16
#define NO_ID UINT32_MAX
#define AT_END_SLACK_NS 1000 /* an op ending this close to the trace's end was still running */

typedef struct coll_record {
    int64_t start, end;
    int64_t count, seq;
    uint32_t group, op, dtype, ranks;   /* interned, NO_ID when absent */
    int32_t size, rank_start, rank_stride;
    bool gpu;
} coll_record;

struct pt_coll_log {
    pt_strtab strings;
    coll_record *records;
    size_t count, cap;
};

pt_coll_log *pt_coll_log_new(void)
{
    pt_coll_log *log = pt_xcalloc(1, sizeof *log);
    pt_strtab_init(&log->strings);
    return log;
}

void pt_coll_log_free(pt_coll_log *log)
{
    if (!log)
        return;
    pt_strtab_free(&log->strings);
    free(log->records);
    free(log);
}

static uint32_t intern(pt_coll_log *log, const char *s, size_t n)
{
    return s && n ? pt_strtab_intern(&log->strings, s, n) : NO_ID;
}

void pt_coll_log_add(pt_coll_log *log, const pt_event *ev)
{
    const pt_collective *c = &ev->coll;
    if (!c->group || !c->group_len || c->group_len > PT_SUMMARY_MAX_LABEL ||
        (ev->kind != PT_EVENT_CPU && ev->kind != PT_EVENT_GPU_KERNEL))
        return;
    PT_GROW(log->records, log->cap, log->count + 1);
    coll_record *r = &log->records[log->count++];
    r->start = ev->ts_ns;
    r->end = ev->ts_ns + ev->dur_ns;
    r->count = c->in_nelems >= 0 ? c->in_nelems : -1;
    r->seq = c->seq;
    r->group = intern(log, c->group, c->group_len);
    r->op = c->name && c->name_len <= PT_SUMMARY_MAX_LABEL ? intern(log, c->name, c->name_len) : NO_ID;
    r->dtype = c->dtype && c->dtype_len <= PT_SUMMARY_MAX_LABEL ? intern(log, c->dtype, c->dtype_len) : NO_ID;
    r->ranks = c->ranks && c->ranks_len <= 64 * 1024 ? intern(log, c->ranks, c->ranks_len) : NO_ID;
    r->size = c->group_size;
    r->rank_start = c->rank_start;
    r->rank_stride = c->rank_stride;
    r->gpu = ev->kind == PT_EVENT_GPU_KERNEL;
}

void pt_coll_log_merge(pt_coll_log *dst, const pt_coll_log *src)
{
    for (size_t i = 0; i < src->count; i++) {
        coll_record r = src->records[i];
        uint32_t *ids[] = {&r.group, &r.op, &r.dtype, &r.ranks};
        for (size_t k = 0; k < PT_ARRAY_LEN(ids); k++)
            if (*ids[k] != NO_ID)
                *ids[k] = pt_strtab_intern(&dst->strings, pt_strtab_get(&src->strings, *ids[k]),
                                           pt_strtab_len(&src->strings, *ids[k]));
        PT_GROW(dst->records, dst->cap, dst->count + 1);
        dst->records[dst->count++] = r;
    }
}

/* ------------------------------------------------------------ finishing */

static int by_group_then_start(const void *x, const void *y)
{
    const coll_record *a = x, *b = y;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    if (a->gpu != b->gpu)
        return a->gpu ? 1 : -1;
    return a->start < b->start ? -1 : a->start > b->start;
}

static char *string_of(const pt_coll_log *log, uint32_t id)
{
    return id == NO_ID ? NULL : pt_xstrndup(pt_strtab_get(&log->strings, id), pt_strtab_len(&log->strings, id));
}

/* The group's members: its rank list, else its first rank and stride. */
static void group_members(const pt_coll_log *log, const coll_record *r, size_t n, pt_collective_group *g)
{
    for (size_t i = 0; i < n && !g->run_count; i++) {
        pt_error err;
        if (r[i].ranks != NO_ID)
            pt_rank_runs_parse(pt_strtab_get(&log->strings, r[i].ranks), pt_strtab_len(&log->strings, r[i].ranks),
                               &g->runs, &g->run_count, &err);
    }
    for (size_t i = 0; i < n && !g->run_count; i++) {
        if (r[i].rank_start >= 0 && r[i].rank_stride >= 1 && r[i].size >= 1 &&
            (int64_t)r[i].rank_start + (int64_t)r[i].rank_stride * (r[i].size - 1) < PT_MAX_WORLD_SIZE) {
            g->runs = pt_xmalloc(sizeof *g->runs);
            g->runs[0] = (pt_rank_run){r[i].rank_start, r[i].rank_start + r[i].rank_stride * (r[i].size - 1),
                                       r[i].size > 1 ? r[i].rank_stride : 1};
            g->run_count = 1;
        }
    }
    g->size = -1;
    for (size_t i = 0; i < n && g->size < 0; i++)
        if (r[i].size >= 1 && r[i].size <= PT_MAX_WORLD_SIZE)
            g->size = r[i].size;
}

/* The kernel of the call numbered seq (the ordinal-th call of the group), or NULL. */
static const coll_record *kernel_of(const coll_record *k, size_t nk, int64_t seq, size_t ordinal)
{
    bool numbered = nk && k[0].seq >= 0;
    if (!numbered)
        return ordinal < nk ? &k[ordinal] : NULL;
    for (size_t i = 0; i < nk; i++)
        if (k[i].seq == seq)
            return &k[i];
    return NULL;
}

static void fill_call(const pt_coll_log *log, const coll_record *r, int64_t seq, pt_call_state state,
                      pt_collective_call *c)
{
    c->seq = seq;
    c->op = r->op != NO_ID ? string_of(log, r->op) : pt_xstrdup("unknown");
    c->count = r->count >= 0 && r->count <= PT_SUMMARY_MAX_NS ? r->count : -1;
    c->dtype = string_of(log, r->dtype);
    c->state = state;
    c->age_ns = -1;
}

/* One group's calls from its records (CPU ops first, then kernels, each by start). */
/* Still running when the trace stopped: it ends with the trace, past the last step (a
 * rank whose trace simply ends -- stopped in Python -- has its last call done before). */
static bool running_at_end(const coll_record *r, int64_t trace_end, int64_t window_end)
{
    return r->end >= trace_end - AT_END_SLACK_NS && r->end > window_end;
}

static void group_calls(const pt_coll_log *log, const coll_record *r, size_t n, int64_t trace_end,
                        int64_t window_end, pt_collective_group *g)
{
    size_t ncpu = 0;
    while (ncpu < n && !r[ncpu].gpu)
        ncpu++;
    const coll_record *calls = ncpu ? r : r + ncpu, *kernels = r + ncpu;
    size_t ncalls = ncpu ? ncpu : n - ncpu, nk = n - ncpu;
    g->calls = pt_xcalloc(CALLS_KEPT, sizeof *g->calls);
    int64_t last_seq = 0;
    size_t first = ncalls > CALLS_KEPT * 4 ? ncalls - CALLS_KEPT * 4 : 0; /* room for repeats dropped */
    for (size_t i = first; i < ncalls; i++) {
        const coll_record *call = &calls[i];
        int64_t seq = call->seq >= 0 ? call->seq : (int64_t)i + 1;
        if (seq <= last_seq || seq > PT_SUMMARY_MAX_SEQ)
            continue; /* a repeat (the op and a nested record of it), or out of order */
        last_seq = seq;
        bool running = running_at_end(call, trace_end, window_end);
        pt_call_state state = running ? PT_CALL_ENTERED : PT_CALL_COMPLETED;
        if (ncpu && nk && !running) {
            const coll_record *k = kernel_of(kernels, nk, seq, i);
            state = !k ? PT_CALL_ISSUED : running_at_end(k, trace_end, window_end) ? PT_CALL_ENTERED : PT_CALL_COMPLETED;
        }
        if (g->call_count == CALLS_KEPT) {
            free(g->calls[0].op), free(g->calls[0].dtype);
            memmove(g->calls, g->calls + 1, (CALLS_KEPT - 1) * sizeof *g->calls);
            g->call_count--;
        }
        fill_call(log, call, seq, state, &g->calls[g->call_count++]);
    }
}

void pt_coll_log_finish(const pt_coll_log *log, int64_t trace_end, int64_t window_end, const char *backend,
                        pt_worker_summary *out)
{
    if (!log->count)
        return;
    qsort(log->records, log->count, sizeof *log->records, by_group_then_start);
    size_t groups = 0;
    for (size_t i = 0; i < log->count; i++)
        groups += i == 0 || log->records[i].group != log->records[i - 1].group;
    groups = PT_MIN(groups, (size_t)PT_SUMMARY_MAX_GROUPS);
    out->groups = pt_xcalloc(groups, sizeof *out->groups);
    for (size_t i = 0; i < log->count && out->group_count < groups;) {
        size_t j = i;
        while (j < log->count && log->records[j].group == log->records[i].group)
            j++;
        pt_collective_group *g = &out->groups[out->group_count++];
        g->name = string_of(log, log->records[i].group);
        g->backend = backend && *backend ? pt_xstrdup(backend) : NULL;
        group_members(log, log->records + i, j - i, g);
        int64_t members = pt_group_run_members(g);
        bool foreign = g->run_count && ((out->rank >= 0 && !pt_group_has_rank(g, out->rank)) ||
                                        (out->world_size > 0 && g->runs[g->run_count - 1].last >= out->world_size));
        if (foreign) {
            pt_summary_add_warning(out, "process group %s's rank list does not hold this worker (rank %d) or "
                                        "reaches past its world size; its members are taken as unknown",
                                   g->name, (int)out->rank);
            free(g->runs);
            g->runs = NULL;
            g->run_count = 0;
        } else if (g->run_count) {
            g->size = (int32_t)members;
        }
        group_calls(log, log->records + i, j - i, trace_end, window_end, g);
        i = j;
    }
}
