/* summary_io.c -- encode/decode the summary file (see docs/summary-format.md).
 *
 * The decoder reads bytes anyone may have written (a file, a peer's SUMMARY frame): every
 * length and count is checked against what is left and against summary.h's bounds as it
 * is read, and a string holding a NUL byte is refused (it would be cut there, and two
 * distinct names would become one). What it decoded then goes through pt_summary_check,
 * the one validator of every rule the analysis relies on, so no caller ever holds a
 * decoded summary that breaks one. With shared names (pt_summary_share_names), the
 * checked functions then move to the column store (function_store.h). */
#define _POSIX_C_SOURCE 200809L
#include "summarize/summary_io.h"
#include "summarize/function_store.h"
#include "util/input.h"
#include "util/output.h"
#include "util/strtab.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define MAX_PAYLOAD (256u << 20)
#define HEADER_BYTES 24 /* magic 8, version 4, flags 4, payload size 8 */

/* ------------------------------------------------------------ encoding */

static void put_uvarint(pt_buf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (unsigned char)v;
    pt_buf_append(b, tmp, n);
}

static void put_varint(pt_buf *b, int64_t v)
{
    put_uvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); /* zigzag */
}

/* Fixed-width values (the header's fields, the bits of floats) are little-endian. */
static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_fixed(pt_buf *b, uint64_t v, int bytes)
{
    unsigned char tmp[8];
    put_le(tmp, v, bytes);
    pt_buf_append(b, tmp, (size_t)bytes);
}

static void put_double(pt_buf *b, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, 8);
    put_fixed(b, bits, 8);
}

static void put_float(pt_buf *b, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    put_fixed(b, bits, 4);
}

static void put_string(pt_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_uvarint(b, n);
    pt_buf_append(b, s, n);
}

static void put_step(pt_buf *b, const pt_step_summary *st)
{
    put_varint(b, st->step);
    put_varint(b, st->start_ns);
    put_varint(b, st->dur_ns);
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        put_varint(b, st->exposed_ns[c]);
    put_varint(b, st->idle_ns);
}

static void put_work(pt_buf *b, const int64_t busy[PT_CLASS_COUNT])
{
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        if (c != PT_CLASS_COMM) /* never work */
            put_varint(b, busy[c]);
}

/* Version 3: whether steps carry sync points, then each step's. */
static void put_syncs(pt_buf *b, const pt_worker_summary *s)
{
    put_uvarint(b, s->has_syncs);
    for (size_t i = 0; i < s->step_count && s->has_syncs; i++) {
        const pt_step_summary *st = &s->steps[i];
        put_uvarint(b, st->sync_count);
        for (size_t k = 0; k < st->sync_count; k++) {
            put_varint(b, st->syncs[k].end_ns);
            put_work(b, st->syncs[k].busy_ns);
        }
        put_work(b, st->tail_busy_ns);
    }
}

static void put_metric(pt_buf *b, const pt_metric_summary *m)
{
    put_string(b, m->name);
    put_uvarint(b, m->samples);
    put_double(b, m->mean);
    put_double(b, m->min);
    put_double(b, m->max);
    put_uvarint(b, m->points);
    for (size_t k = 0; k < m->points; k++) {
        put_float(b, m->series_ms[k]);
        put_float(b, m->series_value[k]);
    }
}

static void put_optional_string(pt_buf *b, const char *s)
{
    put_uvarint(b, s != NULL);
    if (s)
        put_string(b, s);
}

/* Version 3: the hang state (stacks of every thread, collectives per group). */
static void put_hang_state(pt_buf *b, const pt_worker_summary *s)
{
    put_varint(b, s->hang_idle_ns);
    put_varint(b, s->hang_step_ns);
    put_uvarint(b, s->thread_count);
    for (size_t i = 0; i < s->thread_count; i++) {
        const pt_thread_stack *t = &s->threads[i];
        put_string(b, t->name);
        put_varint(b, t->ident);
        put_uvarint(b, t->training);
        put_string(b, t->stack);
    }
    put_uvarint(b, s->group_count);
    for (size_t i = 0; i < s->group_count; i++) {
        const pt_collective_group *g = &s->groups[i];
        put_string(b, g->name);
        put_optional_string(b, g->backend);
        put_varint(b, g->size);
        put_uvarint(b, g->run_count);
        for (size_t k = 0; k < g->run_count; k++) {
            put_varint(b, g->runs[k].first);
            put_varint(b, g->runs[k].last);
            put_varint(b, g->runs[k].stride);
        }
        put_uvarint(b, g->call_count);
        for (size_t k = 0; k < g->call_count; k++) {
            const pt_collective_call *c = &g->calls[k];
            put_varint(b, c->seq);
            put_string(b, c->op);
            put_varint(b, c->count);
            put_optional_string(b, c->dtype);
            put_uvarint(b, (uint64_t)c->state);
            put_varint(b, c->age_ns);
            put_optional_string(b, c->error);
        }
    }
}

static void encode_payload(const pt_worker_summary *s, pt_buf *b)
{
    put_varint(b, s->rank);
    put_uvarint(b, (uint64_t)s->rank_source);
    put_varint(b, s->local_rank);
    put_varint(b, s->world_size);
    put_varint(b, s->pid);
    put_string(b, s->name);
    put_string(b, s->host);
    put_string(b, s->device_name);
    put_string(b, s->backend);
    put_string(b, s->producer);
    put_varint(b, s->device_count);
    put_string(b, s->software);
    put_varint(b, s->window_start_ns);
    put_varint(b, s->window_ns);
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        put_varint(b, s->union_ns[c]);
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        put_varint(b, s->exposed_ns[c]);
    put_varint(b, s->idle_ns);
    put_uvarint(b, s->events);
    put_varint(b, s->dropped_events);
    put_varint(b, s->hw_sample_period_us);
    put_varint(b, s->hang_step);
    put_uvarint(b, s->hang_stack != NULL);
    if (s->hang_stack)
        put_string(b, s->hang_stack);
    put_varint(b, s->stall_ns);
    put_uvarint(b, (uint64_t)s->stall_class);
    put_uvarint(b, s->stall_function != NULL);
    if (s->stall_function)
        put_string(b, s->stall_function);

    put_uvarint(b, s->step_count);
    for (size_t i = 0; i < s->step_count; i++)
        put_step(b, &s->steps[i]);
    put_syncs(b, s);

    /* String table: function names and communication groups, each stored once. */
    pt_strtab strings;
    pt_strtab_init(&strings);
    uint32_t *name_ids = pt_xmalloc((s->function_count + 1) * sizeof *name_ids);
    uint32_t *group_ids = pt_xmalloc((s->function_count + 1) * sizeof *group_ids);
    uint32_t *caller_ids = pt_xmalloc((s->function_count + 1) * sizeof *caller_ids);
    pt_function_summary record;
    int64_t steps[PT_SUMMARY_MAX_STEP_VALUES];
    for (size_t i = 0; i < s->function_count; i++) {
        const pt_function_summary *f = pt_summary_function(s, i, &record, NULL);
        name_ids[i] = pt_strtab_intern(&strings, f->name, strlen(f->name));
        group_ids[i] = f->group ? pt_strtab_intern(&strings, f->group, strlen(f->group)) + 1 : 0;
        caller_ids[i] = f->caller ? pt_strtab_intern(&strings, f->caller, strlen(f->caller)) + 1 : 0;
    }
    put_uvarint(b, strings.count);
    for (size_t i = 0; i < strings.count; i++) {
        put_uvarint(b, pt_strtab_len(&strings, (uint32_t)i));
        pt_buf_append(b, pt_strtab_get(&strings, (uint32_t)i), pt_strtab_len(&strings, (uint32_t)i));
    }
    put_uvarint(b, s->function_count);
    for (size_t i = 0; i < s->function_count; i++) {
        const pt_function_summary *f = pt_summary_function(s, i, &record, steps);
        put_uvarint(b, (uint64_t)f->cls);
        put_uvarint(b, name_ids[i]);
        put_uvarint(b, group_ids[i]);
        put_uvarint(b, f->count);
        put_varint(b, f->total_ns);
        put_varint(b, f->exposed_ns);
        put_varint(b, f->median_ns);
        put_varint(b, f->max_ns);
        put_double(b, f->throughput_avg_pct);
        put_double(b, f->throughput_std_pct);
        put_double(b, f->busbw_avg_gbps);
        put_varint(b, f->waiting_ns);
        put_uvarint(b, f->step_count);
        for (size_t k = 0; k < f->step_count; k++)
            put_varint(b, f->step_exposed_ns[k]);
        put_uvarint(b, caller_ids[i]);
    }
    free(name_ids);
    free(group_ids);
    free(caller_ids);
    pt_strtab_free(&strings);

    put_uvarint(b, s->metric_count);
    for (size_t i = 0; i < s->metric_count; i++)
        put_metric(b, &s->metrics[i]);
    put_uvarint(b, s->warning_count);
    for (size_t i = 0; i < s->warning_count; i++)
        put_string(b, s->warnings[i]);
    put_hang_state(b, s);
}

void pt_summary_encode(const pt_worker_summary *s, pt_buf *out)
{
    pt_buf payload = PT_BUF_INIT;
    encode_payload(s, &payload);
    size_t bound = ZSTD_compressBound(payload.len);
    pt_buf_reserve(out, HEADER_BYTES + bound);
    unsigned char *h = (unsigned char *)out->data + out->len;
    memcpy(h, PT_SUMMARY_MAGIC, 8);
    put_le(h + 8, PT_SUMMARY_VERSION, 4);
    put_le(h + 12, 0, 4);
    put_le(h + 16, payload.len, 8);
    size_t z = ZSTD_compress(h + HEADER_BYTES, bound, payload.data ? payload.data : "", payload.len, 9);
    if (ZSTD_isError(z)) { /* cannot happen with a correct bound; keep the file valid anyway */
        fprintf(stderr, "perftracker: zstd failed: %s\n", ZSTD_getErrorName(z));
        abort();
    }
    out->len += HEADER_BYTES + z;
    out->data[out->len] = '\0';
    pt_buf_free(&payload);
}

/* ------------------------------------------------------------ decoding */

typedef struct cursor {
    const unsigned char *p, *end;
    bool bad;
    const char *what;
    uint32_t version;  /* fields added by later versions are read only from those */
} cursor;

static void broken(cursor *c, const char *what)
{
    if (!c->bad)
        c->what = what;
    c->bad = true;
    c->p = c->end;
}

static uint64_t get_uvarint(cursor *c)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) {
            broken(c, "ends inside a number");
            return 0;
        }
        unsigned char byte = *c->p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return v;
    }
    broken(c, "number too long");
    return 0;
}

static int64_t get_varint(cursor *c)
{
    uint64_t u = get_uvarint(c);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static int32_t get_i32(cursor *c)
{
    int64_t v = get_varint(c);
    if (v < INT32_MIN || v > INT32_MAX)
        broken(c, "value out of range");
    return (int32_t)v;
}

static uint64_t get_count(cursor *c, uint64_t max)
{
    uint64_t n = get_uvarint(c);
    if (n > max || n > (uint64_t)(c->end - c->p)) { /* every item takes at least a byte */
        broken(c, "count out of range");
        return 0;
    }
    return n;
}

static uint64_t get_fixed(cursor *c, int bytes)
{
    if (c->end - c->p < bytes) {
        broken(c, "ends inside a number");
        return 0;
    }
    uint64_t v = get_le(c->p, bytes);
    c->p += bytes;
    return v;
}

static double get_double(cursor *c)
{
    uint64_t bits = get_fixed(c, 8);
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

static float get_float(cursor *c)
{
    uint32_t bits = (uint32_t)get_fixed(c, 4);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static char *get_string(cursor *c)
{
    uint64_t n = get_uvarint(c);
    if (n > PT_SUMMARY_MAX_NAME || n > (uint64_t)(c->end - c->p)) {
        broken(c, "string length out of range");
        return pt_xstrdup("");
    }
    if (memchr(c->p, '\0', (size_t)n)) {
        broken(c, "a string holds a NUL byte");
        return pt_xstrdup("");
    }
    char *s = pt_xstrndup((const char *)c->p, (size_t)n);
    c->p += n;
    return s;
}

static void decode_steps(cursor *c, pt_worker_summary *s)
{
    s->step_count = (size_t)get_count(c, PT_SUMMARY_MAX_STEPS);
    s->steps = pt_xcalloc(s->step_count ? s->step_count : 1, sizeof *s->steps);
    for (size_t i = 0; i < s->step_count; i++) {
        pt_step_summary *st = &s->steps[i];
        st->step = get_varint(c);
        st->start_ns = get_varint(c);
        st->dur_ns = get_varint(c);
        for (int k = 0; k < PT_CLASS_COUNT; k++)
            st->exposed_ns[k] = get_varint(c);
        st->idle_ns = get_varint(c);
    }
}

static void get_work(cursor *c, int64_t busy[PT_CLASS_COUNT])
{
    for (int k = 0; k < PT_CLASS_COUNT; k++)
        busy[k] = k == PT_CLASS_COMM ? 0 : get_varint(c);
}

/* Version 3: each step's sync points (their values are checked by pt_summary_check). */
static void decode_syncs(cursor *c, pt_worker_summary *s)
{
    s->has_syncs = get_uvarint(c) != 0;
    for (size_t i = 0; i < s->step_count && s->has_syncs && !c->bad; i++) {
        pt_step_summary *st = &s->steps[i];
        size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_SYNCS_PER_STEP);
        st->syncs = pt_xcalloc(n ? n : 1, sizeof *st->syncs);
        st->sync_count = n;
        for (size_t k = 0; k < n; k++) {
            st->syncs[k].end_ns = get_varint(c);
            get_work(c, st->syncs[k].busy_ns);
        }
        get_work(c, st->tail_busy_ns);
    }
}

/* Version 2: waiting time and per-step exposed time; as many steps as the summary has. */
static void decode_step_values(cursor *c, const pt_worker_summary *s, pt_function_summary *f)
{
    f->waiting_ns = get_varint(c);
    size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_STEP_VALUES);
    if (n && n != s->step_count) {
        broken(c, "a function's per-step values do not match the steps");
        return;
    }
    f->step_exposed_ns = n ? pt_xmalloc(n * sizeof *f->step_exposed_ns) : NULL;
    for (size_t k = 0; k < n && !c->bad; k++)
        f->step_exposed_ns[k] = get_varint(c);
    f->step_count = c->bad ? 0 : n;
}

/* The shared pool of pt_summary_share_names, and the store its summaries' functions move
 * to: NULL until asked for, then for good (its strings are pointed to by summaries that
 * may outlive any owner that could free it; the store empties itself when its last
 * summary is freed). */
static pthread_mutex_t name_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pt_strtab *name_pool;
static pt_fn_store *function_store;

void pt_summary_share_names(void)
{
    pthread_mutex_lock(&name_pool_lock);
    if (!name_pool) {
        name_pool = pt_xmalloc(sizeof *name_pool);
        pt_strtab_init(name_pool);
        function_store = pt_fn_store_new();
    }
    pthread_mutex_unlock(&name_pool_lock);
}

void pt_summary_expect_ranks(size_t world)
{
    pthread_mutex_lock(&name_pool_lock);
    if (function_store)
        pt_fn_store_expect_ranks(function_store, world);
    pthread_mutex_unlock(&name_pool_lock);
}

/* A function's string as the summary keeps it: the pool's copy (pooled), or its own. */
static char *function_string(const char *text, bool pooled)
{
    if (!pooled)
        return pt_xstrdup(text);
    pthread_mutex_lock(&name_pool_lock);
    const char *shared = pt_strtab_get(name_pool, pt_strtab_intern(name_pool, text, strlen(text)));
    pthread_mutex_unlock(&name_pool_lock);
    return (char *)shared; /* never written through: shared_function_names says so */
}

/* A string get_string made, as the summary keeps it: pooled, the pool's copy (owned is
 * freed); else owned itself. NULL stays NULL. */
static char *shared_string(char *owned, bool pooled)
{
    if (!owned || !pooled)
        return owned;
    char *shared = function_string(owned, true);
    free(owned);
    return shared;
}

static bool names_pooled(void)
{
    pthread_mutex_lock(&name_pool_lock);
    bool on = name_pool != NULL;
    pthread_mutex_unlock(&name_pool_lock);
    return on;
}

void pt_summary_pool_call_names(pt_worker_summary *s)
{
    if (!names_pooled())
        return;
    for (size_t i = 0; i < s->group_count; i++)
        for (size_t k = 0; k < s->groups[i].call_count; k++) {
            pt_collective_call *call = &s->groups[i].calls[k];
            call->op = shared_string(call->op, true);
            call->dtype = shared_string(call->dtype, true);
        }
}

/* The pool's copies of a summary's string table, taken under one lock (not one per
 * function and string: the decoding threads would queue on it). */
static char **pooled_table(char *const *strings, size_t n)
{
    char **shared = pt_xmalloc((n ? n : 1) * sizeof *shared);
    pthread_mutex_lock(&name_pool_lock);
    for (size_t i = 0; i < n; i++)
        shared[i] = (char *)pt_strtab_get(name_pool, pt_strtab_intern(name_pool, strings[i], strlen(strings[i])));
    pthread_mutex_unlock(&name_pool_lock);
    return shared; /* never written through: shared_function_names says so */
}

/* The summary's copy of table string i: the pool's (shared), or its own. */
static char *table_string(char *const *strings, char *const *shared, size_t i)
{
    return shared ? shared[i] : pt_xstrdup(strings[i]);
}

static void decode_functions(cursor *c, pt_worker_summary *s)
{
    size_t nstrings = (size_t)get_count(c, 2 * (uint64_t)PT_SUMMARY_MAX_FUNCTIONS); /* names and groups */
    char **strings = pt_xcalloc(nstrings ? nstrings : 1, sizeof *strings);
    for (size_t i = 0; i < nstrings; i++)
        strings[i] = get_string(c);
    char **shared = s->shared_function_names ? pooled_table(strings, nstrings) : NULL;
    s->function_count = 0;
    size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_FUNCTIONS);
    s->functions = pt_xcalloc(n ? n : 1, sizeof *s->functions);
    for (size_t i = 0; i < n && !c->bad; i++) {
        pt_function_summary *f = &s->functions[s->function_count];
        uint64_t cls = get_uvarint(c), name = get_uvarint(c), group = get_uvarint(c);
        if (cls >= PT_CLASS_COUNT || name >= nstrings || group > nstrings) {
            broken(c, "function refers to a missing string or class");
            break;
        }
        f->cls = (pt_class)cls;
        f->name = table_string(strings, shared, name);
        f->group = group ? table_string(strings, shared, group - 1) : NULL;
        s->function_count++;
        f->count = get_uvarint(c);
        f->total_ns = get_varint(c);
        f->exposed_ns = get_varint(c);
        f->median_ns = get_varint(c);
        f->max_ns = get_varint(c);
        f->throughput_avg_pct = get_double(c);
        f->throughput_std_pct = get_double(c);
        f->busbw_avg_gbps = get_double(c);
        if (c->version >= 2)
            decode_step_values(c, s, f);
        if (c->version >= 3) {
            uint64_t caller = get_uvarint(c);
            if (caller > nstrings) {
                broken(c, "a function's caller refers to a missing string");
                break;
            }
            f->caller = caller ? table_string(strings, shared, caller - 1) : NULL;
        }
    }
    free(shared);
    pt_free_strings(strings, nstrings);
}

static void decode_metrics(cursor *c, pt_worker_summary *s)
{
    size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_METRICS);
    /* None is the usual case (the synthetic job, a trace without the collector's
     * sampler): no allocation then, where one would cost the 1.6 KB of a metric. */
    s->metrics = n ? pt_xcalloc(n, sizeof *s->metrics) : NULL;
    for (size_t i = 0; i < n && !c->bad; i++) {
        pt_metric_summary *m = &s->metrics[s->metric_count++];
        m->name = get_string(c);
        m->samples = get_uvarint(c);
        m->mean = get_double(c);
        m->min = get_double(c);
        m->max = get_double(c);
        m->points = (size_t)get_uvarint(c);
        if (m->points > PT_SERIES_MAX_POINTS) {
            m->points = 0;
            broken(c, "metric series too long");
        }
        for (size_t k = 0; k < m->points; k++) {
            m->series_ms[k] = get_float(c);
            m->series_value[k] = get_float(c);
        }
    }
}

static char *get_optional_string(cursor *c)
{
    return get_uvarint(c) ? get_string(c) : NULL;
}

static void decode_hang_state(cursor *c, pt_worker_summary *s)
{
    s->hang_idle_ns = get_varint(c);
    s->hang_step_ns = get_varint(c);
    size_t nt = (size_t)get_count(c, PT_SUMMARY_MAX_THREADS);
    s->threads = pt_xcalloc(nt ? nt : 1, sizeof *s->threads);
    for (size_t i = 0; i < nt && !c->bad; i++) {
        pt_thread_stack *t = &s->threads[s->thread_count++];
        t->name = get_string(c);
        t->ident = get_varint(c);
        t->training = get_uvarint(c) != 0;
        t->stack = get_string(c);
    }
    size_t ng = (size_t)get_count(c, PT_SUMMARY_MAX_GROUPS);
    s->groups = pt_xcalloc(ng ? ng : 1, sizeof *s->groups);
    for (size_t i = 0; i < ng && !c->bad; i++) {
        pt_collective_group *g = &s->groups[s->group_count++];
        g->name = get_string(c);
        g->backend = get_optional_string(c);
        g->size = get_i32(c);
        size_t nr = (size_t)get_count(c, PT_SUMMARY_MAX_RUNS);
        g->runs = pt_xcalloc(nr ? nr : 1, sizeof *g->runs);
        for (size_t k = 0; k < nr && !c->bad; k++, g->run_count++) {
            g->runs[k].first = get_i32(c);
            g->runs[k].last = get_i32(c);
            g->runs[k].stride = get_i32(c);
        }
        size_t nc = (size_t)get_count(c, PT_SUMMARY_MAX_CALLS);
        g->calls = pt_xcalloc(nc ? nc : 1, sizeof *g->calls);
        for (size_t k = 0; k < nc && !c->bad; k++) {
            pt_collective_call *call = &g->calls[g->call_count++];
            call->seq = get_varint(c);
            call->op = shared_string(get_string(c), s->shared_function_names);
            call->count = get_varint(c);
            call->dtype = shared_string(get_optional_string(c), s->shared_function_names);
            uint64_t state = get_uvarint(c);
            call->state = state < PT_CALL_STATE_COUNT ? (pt_call_state)state : 0; /* 0: refused by the check */
            call->age_ns = get_varint(c);
            call->error = get_optional_string(c);
        }
    }
}

static void decode_payload(cursor *c, pt_worker_summary *s)
{
    s->shared_function_names = names_pooled();
    s->rank = get_i32(c);
    uint64_t source = get_uvarint(c);
    s->rank_source = source <= PT_RANK_FROM_FILE_ORDER ? (pt_rank_source)source : PT_RANK_UNKNOWN;
    s->local_rank = get_i32(c);
    s->world_size = get_i32(c);
    s->pid = get_varint(c);
    s->name = get_string(c);
    s->host = get_string(c);
    s->device_name = get_string(c);
    s->backend = get_string(c);
    s->producer = get_string(c);
    s->device_count = get_i32(c);
    if (c->version >= PT_SUMMARY_VERSION_SOFTWARE)
        s->software = get_string(c);
    s->window_start_ns = get_varint(c);
    s->window_ns = get_varint(c);
    for (int k = 0; k < PT_CLASS_COUNT; k++)
        s->union_ns[k] = get_varint(c);
    for (int k = 0; k < PT_CLASS_COUNT; k++)
        s->exposed_ns[k] = get_varint(c);
    s->idle_ns = get_varint(c);
    s->events = get_uvarint(c);
    s->dropped_events = get_varint(c);
    s->hw_sample_period_us = get_i32(c);
    s->hang_step = get_varint(c);
    if (get_uvarint(c))
        s->hang_stack = get_string(c);
    s->stall_ns = get_varint(c);
    uint64_t stall_class = get_uvarint(c);
    s->stall_class = stall_class < PT_CLASS_COUNT ? (pt_class)stall_class : PT_CLASS_PYTHON;
    if (get_uvarint(c))
        s->stall_function = get_string(c);
    decode_steps(c, s);
    if (c->version >= 3)
        decode_syncs(c, s);
    decode_functions(c, s);
    decode_metrics(c, s);
    size_t nw = (size_t)get_count(c, PT_SUMMARY_MAX_WARNINGS);
    for (size_t i = 0; i < nw && !c->bad; i++) {
        char *w = get_string(c);
        pt_summary_add_warning(s, "%s", w);
        free(w);
    }
    if (c->version >= PT_SUMMARY_VERSION_HANG_STATE && !c->bad)
        decode_hang_state(c, s);
    if (!c->bad && c->p != c->end)
        broken(c, "unexpected bytes after the summary");
}

bool pt_summary_sniff(const void *head, size_t n)
{
    return n >= 8 && memcmp(head, PT_SUMMARY_MAGIC, 8) == 0;
}

/* The payload's first buffer, and the largest window a frame may ask for: the encoder
 * (level 9) uses at most 2^22, so this only refuses frames it never writes. */
#define PAYLOAD_FIRST_BUFFER (64u << 10)
#define PAYLOAD_WINDOW_LOG_MAX 23

/* Decompresses the zstd frame(s) into exactly payload_len bytes, or NULL with err. The
 * header's length is only a claim: the buffer grows with what the frames really yield, so
 * a few bytes claiming 256 MiB cost what they decompress to, not 256 MiB (and a window
 * beyond PAYLOAD_WINDOW_LOG_MAX is refused before zstd allocates it). */
/* One decompression context per thread, kept: a new one per summary (~100 KB, beyond
 * malloc's mmap threshold) was mapped, zeroed by the kernel and unmapped 100,000 times when
 * a CLI took a 100k-worker round, a fifth of its decode time. Freed as its thread ends. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;

static void free_dctx(void *dctx)
{
    ZSTD_freeDCtx(dctx);
}

static void make_dctx_key(void)
{
    if (pthread_key_create(&dctx_key, free_dctx) != 0)
        abort(); /* only when the process is out of keys: nothing here could go on */
}

static ZSTD_DCtx *thread_dctx(void)
{
    pthread_once(&dctx_once, make_dctx_key);
    ZSTD_DCtx *dctx = pthread_getspecific(dctx_key);
    if (dctx) {
        ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only); /* the window limit stays */
        return dctx;
    }
    dctx = ZSTD_createDCtx();
    if (!dctx || ZSTD_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, PAYLOAD_WINDOW_LOG_MAX)) ||
        pthread_setspecific(dctx_key, dctx) != 0) {
        ZSTD_freeDCtx(dctx);
        return NULL;
    }
    return dctx;
}

static unsigned char *decompress_payload(const unsigned char *frame, size_t frame_len, size_t payload_len,
                                         pt_error *err)
{
    ZSTD_DCtx *dctx = thread_dctx();
    if (!dctx) {
        pt_error_set(err, "summary cannot be decompressed (zstd initialisation failed: out of memory)");
        return NULL;
    }
    size_t cap = PT_MIN(payload_len, (size_t)PAYLOAD_FIRST_BUFFER);
    unsigned char *out = pt_xmalloc(cap ? cap : 1);
    ZSTD_inBuffer in = {frame, frame_len, 0};
    ZSTD_outBuffer o = {out, cap, 0};
    const char *problem = NULL;
    size_t rc = 1; /* not at the end of a frame */
    while (!problem && !(rc == 0 && in.pos == in.size)) {
        if (o.pos == o.size && o.size < payload_len) {
            cap = PT_MIN(payload_len, cap * 2);
            o.dst = out = pt_xrealloc(out, cap);
            o.size = cap;
        }
        size_t in_before = in.pos, out_before = o.pos;
        rc = ZSTD_decompressStream(dctx, &o, &in);
        if (ZSTD_isError(rc))
            problem = ZSTD_getErrorName(rc);
        else if (rc != 0 && in.pos == in_before && o.pos == out_before)
            problem = "size mismatch"; /* out of input (truncated), or beyond the claimed size */
    }
    if (!problem && o.pos != payload_len)
        problem = "size mismatch";
    if (problem) {
        pt_error_set(err, "summary is corrupt or truncated (%s)", problem);
        free(out);
        return NULL;
    }
    return out;
}

pt_worker_summary *pt_summary_decode(const void *data, size_t len, pt_error *err)
{
    const unsigned char *h = data;
    if (len < HEADER_BYTES || !pt_summary_sniff(h, len)) {
        pt_error_set(err, "not a perftracker summary (bad magic)");
        return NULL;
    }
    uint32_t version = (uint32_t)get_le(h + 8, 4);
    if (version < 1 || version > PT_SUMMARY_VERSION) {
        pt_error_set(err, "summary format version %u is not supported (this build reads 1 to %d)", version,
                     PT_SUMMARY_VERSION);
        return NULL;
    }
    uint64_t payload_len = get_le(h + 16, 8);
    if (payload_len > MAX_PAYLOAD) {
        pt_error_set(err, "summary payload too large (%llu bytes)", (unsigned long long)payload_len);
        return NULL;
    }
    unsigned char *payload = decompress_payload(h + HEADER_BYTES, len - HEADER_BYTES, (size_t)payload_len, err);
    if (!payload)
        return NULL;
    cursor c = {payload, payload + payload_len, false, NULL, version};
    pt_worker_summary *s = pt_summary_new();
    decode_payload(&c, s);
    free(payload);
    if (c.bad) {
        pt_error_set(err, "summary is corrupt: %s", c.what);
        pt_summary_free(s);
        return NULL;
    }
    pt_error rule;
    if (pt_summary_check(s, &rule) != 0) {
        char who[128];
        pt_summary_describe(s, who, sizeof who);
        pt_error_set(err, "invalid summary of %s: %s", who, rule.message);
        pt_summary_free(s);
        return NULL;
    }
    if (s->shared_function_names) /* checked: its functions move to the columns */
        pt_fn_store_adopt(function_store, s);
    return s;
}

int pt_summary_write_file(const pt_worker_summary *s, const char *path, pt_error *err)
{
    pt_buf b = PT_BUF_INIT;
    pt_summary_encode(s, &b);
    const void *parts[] = {b.data};
    size_t sizes[] = {b.len};
    int rc = pt_write_file_atomic(path, parts, sizes, 1, 0644, err);
    pt_buf_free(&b);
    return rc;
}

pt_worker_summary *pt_summary_read_file(const char *path, pt_error *err)
{
    size_t len;
    char *data = pt_read_file(path, MAX_PAYLOAD, &len, err);
    if (!data)
        return NULL;
    pt_worker_summary *s = pt_summary_decode(data, len, err);
    free(data);
    return s;
}

pt_worker_summary *pt_summary_read_at(int fd, uint64_t offset, uint64_t size, pt_error *err)
{
    if (size > MAX_PAYLOAD) {
        pt_error_set(err, "%llu bytes: more than a summary may be (%u MiB)", (unsigned long long)size,
                     MAX_PAYLOAD >> 20);
        return NULL;
    }
    char *data = pt_xmalloc(size ? (size_t)size : 1);
    ptrdiff_t got = pt_pread_all(fd, data, (size_t)size, offset);
    pt_worker_summary *s = NULL;
    if (got == (ptrdiff_t)size)
        s = pt_summary_decode(data, (size_t)size, err);
    else
        pt_error_set(err, "cannot read its %llu bytes at byte %llu: %s", (unsigned long long)size,
                     (unsigned long long)offset, got < 0 ? strerror(errno) : "the file ends before them");
    free(data);
    return s;
}
