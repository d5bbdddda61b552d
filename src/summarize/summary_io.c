/* summary_io.c -- encode/decode the summary file (see docs/summary-format.md).
 *
 * The decoder reads bytes anyone may have written (a file, a peer's SUMMARY frame): every
 * length and count is checked against what is left and against summary.h's bounds as it
 * is read, and a string holding a NUL byte is refused (it would be cut there, and two
 * distinct names would become one). What it decoded then goes through pt_summary_check,
 * the one validator of every rule the analysis relies on, so no caller ever holds a
 * decoded summary that breaks one. With shared names (pt_summary_share_names), the
 * checked summary's strings then go to the pool and its functions to the column store
 * (function_store.h): a refused summary leaves nothing in either.
 *
 * Memory: what decoding a summary allocates (its bytes, the decompressed payload, every
 * array and string decoded from it, its names in the pool, its functions in the store) is
 * counted against the memory share of the file being read (util/input.h) before it is
 * allocated; the first that does not fit ends the decoding, and the summary is refused
 * saying so. A 2.8 MB summary may name a million functions (its cap), which decode to
 * ~150 MB of records: the share, not the file's size, is what says it is too much. */
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
        put_double(b, f->bytes_avg);
        put_double(b, f->bytes_max);
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
    bool over_share;   /* what it decodes to does not fit the file's memory share */
    size_t left;       /* of the share when decoding began, less taken */
    size_t taken;      /* what it decoded holds, taken from the share once decoded */
    size_t records;    /* of taken, for the function records (freed once in the store) */
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

/* Counts n items of size bytes, about to be allocated, against the file's memory share
 * (what was left of it when decoding began: the decoder's own count, taken from the share
 * in one go once it is done): false, and the cursor broken, where they do not fit. */
static inline bool afford(cursor *c, size_t n, size_t size)
{
    size_t bytes = pt_heap_cost(n * size);
    if (bytes > c->left) {
        c->over_share = true;
        broken(c, "does not fit its memory share");
        return false;
    }
    c->left -= bytes;
    c->taken += bytes;
    return true;
}

/* A count of items that take size bytes each once decoded (counted against the share;
 * 0: the caller counts them itself). */
static uint64_t get_count(cursor *c, uint64_t max, size_t size)
{
    uint64_t n = get_uvarint(c);
    if (n > max || n > (uint64_t)(c->end - c->p)) { /* every item takes at least a byte */
        broken(c, "count out of range");
        return 0;
    }
    if (size && !afford(c, (size_t)n, size))
        return 0;
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

/* A string (never NULL: "" where it is broken), and its length in *len. */
static char *get_string_len(cursor *c, size_t *len)
{
    uint64_t n = get_uvarint(c);
    *len = 0;
    if (n > PT_SUMMARY_MAX_NAME || n > (uint64_t)(c->end - c->p)) {
        broken(c, "string length out of range");
        return pt_xstrdup("");
    }
    if (memchr(c->p, '\0', (size_t)n)) {
        broken(c, "a string holds a NUL byte");
        return pt_xstrdup("");
    }
    if (!afford(c, 1, (size_t)n + 1))
        return pt_xstrdup("");
    char *s = pt_xstrndup((const char *)c->p, (size_t)n);
    c->p += n;
    *len = (size_t)n;
    return s;
}

static char *get_string(cursor *c)
{
    size_t len;
    return get_string_len(c, &len);
}

static void decode_steps(cursor *c, pt_worker_summary *s)
{
    s->step_count = (size_t)get_count(c, PT_SUMMARY_MAX_STEPS, sizeof *s->steps);
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
        size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_SYNCS_PER_STEP, sizeof *st->syncs);
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
    size_t taken = c->taken;
    size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_STEP_VALUES, sizeof *f->step_exposed_ns);
    c->records += c->taken - taken;
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

size_t pt_summary_kept_bytes(void)
{
    pthread_mutex_lock(&name_pool_lock);
    size_t bytes = name_pool ? name_pool->bytes + pt_fn_store_bytes(function_store) : 0;
    pthread_mutex_unlock(&name_pool_lock);
    return bytes;
}

static void unlock_on_unwind(void *lock)
{
    pthread_mutex_unlock(lock);
}

/* The pool's lock for interning: an allocation that fails under it (analyze's
 * pt_run_guarded) must not leave it held for the other decoding threads. */
static void lock_pool(void)
{
    pthread_mutex_lock(&name_pool_lock);
    pt_unwind_push(unlock_on_unwind, &name_pool_lock);
}

static void unlock_pool(void)
{
    pt_unwind_pop(&name_pool_lock);
    pthread_mutex_unlock(&name_pool_lock);
}

static bool names_pooled(void)
{
    pthread_mutex_lock(&name_pool_lock);
    bool on = name_pool != NULL;
    pthread_mutex_unlock(&name_pool_lock);
    return on;
}

/* The pool's copy of owned (freed), under the pool's lock; NULL stays NULL. */
static char *pooled_locked(char *owned)
{
    if (!owned)
        return NULL;
    char *shared = (char *)pt_strtab_get(name_pool, pt_strtab_intern(name_pool, owned, strlen(owned)));
    free(owned);
    return shared;
}

void pt_summary_pool_call_names(pt_worker_summary *s)
{
    if (!names_pooled() || !s->group_count)
        return;
    lock_pool(); /* once for them all: the decoding threads would queue on one per string */
    for (size_t i = 0; i < s->group_count; i++)
        for (size_t k = 0; k < s->groups[i].call_count; k++) {
            pt_collective_call *call = &s->groups[i].calls[k];
            call->op = pooled_locked(call->op);
            call->dtype = pooled_locked(call->dtype);
        }
    unlock_pool();
}

/* A summary's string table (names, groups, callers) while it is decoded: its functions
 * point into it until the summary has passed its check, and only then get the pool's
 * copies or their own (table_strings_kept), so nothing of a refused summary is pooled. */
typedef struct string_table {
    char **strings;
    uint32_t *lengths;
    size_t count;
    uint32_t *refs;      /* [3 x function]: its name's, group's, caller's string (UINT32_MAX: none) */
} string_table;

static void string_table_free(string_table *t)
{
    pt_free_strings(t->strings, t->count);
    free(t->lengths);
    free(t->refs);
    memset(t, 0, sizeof *t);
}

/* The pool's copies of the table's strings that its functions name (shared[i], NULL for
 * one none names: a table may hold strings nothing refers to), interned under one lock
 * (not one per string: the decoding threads would queue on it); NULL when the pool's
 * growth does not fit the file's memory share (counted before, at most; what it did not
 * take is given back). */
static char **pooled_table(const string_table *t, size_t function_count)
{
    size_t counted = pt_heap_cost((t->count ? t->count : 1) * sizeof(char *));
    if (!pt_share_take(counted))
        return NULL;
    char **shared = pt_xcalloc(t->count ? t->count : 1, sizeof *shared);
    size_t named = 0, bytes = 0;
    for (size_t i = 0; i < 3 * function_count; i++) {
        uint32_t ref = t->refs[i];
        if (ref != UINT32_MAX && !shared[ref]) {
            shared[ref] = t->strings[ref]; /* marked: the pool's copy replaces it below */
            named++;
            bytes += t->lengths[ref];
        }
    }
    lock_pool();
    size_t bound = pt_strtab_growth_bound(name_pool, named, bytes), before = name_pool->bytes;
    bool fits = pt_share_take(bound);
    for (size_t i = 0; fits && i < t->count; i++)
        if (shared[i])
            shared[i] = (char *)pt_strtab_get(name_pool, pt_strtab_intern(name_pool, shared[i], t->lengths[i]));
    if (fits)
        pt_share_give(bound - PT_MIN(bound, name_pool->bytes - before));
    unlock_pool();
    if (!fits) {
        free(shared);
        pt_share_give(counted);
        return NULL;
    }
    return shared; /* never written through: shared_function_names says so; the caller
                      frees it, and it is counted until the file is done */
}

/* The table's string i as the summary keeps it: the pool's (shared), or its own. */
static char *table_string(const string_table *t, char *const *shared, uint32_t ref)
{
    return shared ? shared[ref] : pt_xstrdup(t->strings[ref]);
}

/* The functions' strings, which point into the table, become the summary's own (the
 * pool's when pooled): false when they do not fit the file's memory share. */
static bool table_strings_kept(const string_table *t, pt_worker_summary *s, bool pooled)
{
    char **shared = NULL;
    if (pooled && !(shared = pooled_table(t, s->function_count)))
        return false;
    if (!pooled) { /* a copy of each string per function that names it */
        size_t bytes = 0;
        for (size_t i = 0; i < 3 * s->function_count; i++)
            bytes += t->refs[i] == UINT32_MAX ? 0 : pt_heap_cost(t->lengths[t->refs[i]] + 1);
        if (!pt_share_take(bytes))
            return false;
    }
    for (size_t i = 0; i < s->function_count; i++) {
        pt_function_summary *f = &s->functions[i];
        const uint32_t *ref = &t->refs[3 * i];
        f->name = table_string(t, shared, ref[0]);
        f->group = ref[1] != UINT32_MAX ? table_string(t, shared, ref[1]) : NULL;
        f->caller = ref[2] != UINT32_MAX ? table_string(t, shared, ref[2]) : NULL;
    }
    free(shared);
    return true;
}

/* Before a summary whose functions still point into the table is freed. */
static void forget_table_strings(pt_worker_summary *s)
{
    for (size_t i = 0; s->functions && i < s->function_count; i++)
        s->functions[i].name = s->functions[i].group = s->functions[i].caller = NULL;
}

static void decode_functions(cursor *c, pt_worker_summary *s, string_table *t)
{
    size_t nstrings = (size_t)get_count(c, 2 * (uint64_t)PT_SUMMARY_MAX_FUNCTIONS,
                                        sizeof *t->strings + sizeof *t->lengths); /* names and groups */
    t->strings = pt_xmalloc((nstrings ? nstrings : 1) * sizeof *t->strings); /* each is set below */
    t->lengths = pt_xmalloc((nstrings ? nstrings : 1) * sizeof *t->lengths);
    for (size_t i = 0; i < nstrings; i++) {
        size_t len;
        t->strings[i] = get_string_len(c, &len);
        t->lengths[i] = (uint32_t)len;
    }
    t->count = nstrings;
    s->function_count = 0;
    size_t taken = c->taken;
    size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_FUNCTIONS, sizeof *s->functions);
    c->records += c->taken - taken;
    if (!afford(c, 3 * n, sizeof *t->refs))
        n = 0;
    s->functions = pt_xcalloc(n ? n : 1, sizeof *s->functions);
    t->refs = pt_xmalloc((n ? 3 * n : 1) * sizeof *t->refs);
    for (size_t i = 0; i < n && !c->bad; i++) {
        pt_function_summary *f = &s->functions[s->function_count];
        uint64_t cls = get_uvarint(c), name = get_uvarint(c), group = get_uvarint(c);
        if (cls >= PT_CLASS_COUNT || name >= nstrings || group > nstrings) {
            broken(c, "function refers to a missing string or class");
            break;
        }
        uint32_t *ref = &t->refs[3 * i];
        ref[0] = (uint32_t)name;
        ref[1] = ref[2] = UINT32_MAX;
        f->cls = (pt_class)cls;
        f->name = t->strings[name];
        if (group)
            f->group = t->strings[ref[1] = (uint32_t)(group - 1)];
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
            if (caller)
                f->caller = t->strings[ref[2] = (uint32_t)(caller - 1)];
        }
        if (c->version >= PT_SUMMARY_VERSION_BYTES) {
            f->bytes_avg = get_double(c);
            f->bytes_max = get_double(c);
        }
    }
}

static void decode_metrics(cursor *c, pt_worker_summary *s)
{
    size_t n = (size_t)get_count(c, PT_SUMMARY_MAX_METRICS, sizeof *s->metrics);
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
    size_t nt = (size_t)get_count(c, PT_SUMMARY_MAX_THREADS, sizeof *s->threads);
    s->threads = pt_xcalloc(nt ? nt : 1, sizeof *s->threads);
    for (size_t i = 0; i < nt && !c->bad; i++) {
        pt_thread_stack *t = &s->threads[s->thread_count++];
        t->name = get_string(c);
        t->ident = get_varint(c);
        t->training = get_uvarint(c) != 0;
        t->stack = get_string(c);
    }
    size_t ng = (size_t)get_count(c, PT_SUMMARY_MAX_GROUPS, sizeof *s->groups);
    s->groups = pt_xcalloc(ng ? ng : 1, sizeof *s->groups);
    for (size_t i = 0; i < ng && !c->bad; i++) {
        pt_collective_group *g = &s->groups[s->group_count++];
        g->name = get_string(c);
        g->backend = get_optional_string(c);
        g->size = get_i32(c);
        size_t nr = (size_t)get_count(c, PT_SUMMARY_MAX_RUNS, sizeof *g->runs);
        g->runs = pt_xcalloc(nr ? nr : 1, sizeof *g->runs);
        for (size_t k = 0; k < nr && !c->bad; k++, g->run_count++) {
            g->runs[k].first = get_i32(c);
            g->runs[k].last = get_i32(c);
            g->runs[k].stride = get_i32(c);
        }
        size_t nc = (size_t)get_count(c, PT_SUMMARY_MAX_CALLS, sizeof *g->calls);
        g->calls = pt_xcalloc(nc ? nc : 1, sizeof *g->calls);
        for (size_t k = 0; k < nc && !c->bad; k++) {
            pt_collective_call *call = &g->calls[g->call_count++];
            call->seq = get_varint(c);
            call->op = get_string(c); /* pooled once the summary has passed its check */
            call->count = get_varint(c);
            call->dtype = get_optional_string(c);
            uint64_t state = get_uvarint(c);
            call->state = state < PT_CALL_STATE_COUNT ? (pt_call_state)state : 0; /* 0: refused by the check */
            call->age_ns = get_varint(c);
            call->error = get_optional_string(c);
        }
    }
}

static void decode_payload(cursor *c, pt_worker_summary *s, string_table *t)
{
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
    decode_functions(c, s, t);
    decode_metrics(c, s);
    size_t nw = (size_t)get_count(c, PT_SUMMARY_MAX_WARNINGS, 0);
    for (size_t i = 0; i < nw && !c->bad; i++) {
        char *w = get_string(c);
        if (afford(c, 1, strlen(w) + 1 + sizeof *s->warnings)) /* the summary's copy of it */
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

/* What the thread's decompression context may hold while it decodes a payload: its
 * window (PAYLOAD_WINDOW_LOG_MAX) and buffers of a block in and two out, its tables. */
#define PAYLOAD_DECODER_MAX (((size_t)1 << PAYLOAD_WINDOW_LOG_MAX) + ((size_t)640 << 10))

/* Decompresses the zstd frame(s) into exactly payload_len bytes, or NULL with err. The
 * header's length is only a claim: the buffer grows with what the frames really yield, so
 * a few bytes claiming 256 MiB cost what they decompress to, not 256 MiB (and a window
 * beyond PAYLOAD_WINDOW_LOG_MAX is refused before zstd allocates it); each growth is
 * counted against the file's memory share first. *counted: what the buffer holds of the
 * share (the caller gives it back once it frees it). */
static unsigned char *decompress_payload(const unsigned char *frame, size_t frame_len, size_t payload_len,
                                         size_t *counted, pt_error *err)
{
    ZSTD_DCtx *dctx = thread_dctx();
    if (!dctx) {
        pt_error_set(err, "summary cannot be decompressed (zstd initialisation failed: out of memory)");
        return NULL;
    }
    size_t cap = PT_MIN(payload_len, (size_t)PAYLOAD_FIRST_BUFFER);
    *counted = pt_heap_cost(cap ? cap : 1);
    if (!pt_share_take(PAYLOAD_DECODER_MAX + *counted)) {
        pt_share_error(err, "to decompress it");
        return NULL;
    }
    unsigned char *out = pt_xmalloc(cap ? cap : 1);
    ZSTD_inBuffer in = {frame, frame_len, 0};
    ZSTD_outBuffer o = {out, cap, 0};
    const char *problem = NULL;
    bool over_share = false;
    size_t rc = 1; /* not at the end of a frame */
    while (!problem && !(rc == 0 && in.pos == in.size)) {
        if (o.pos == o.size && o.size < payload_len) {
            size_t grown = PT_MIN(payload_len, cap * 2);
            if (!pt_share_take(pt_heap_cost(grown))) { /* beside the old buffer: realloc may copy */
                over_share = true;
                break;
            }
            o.dst = out = pt_xrealloc(out, grown);
            o.size = cap = grown;
            pt_share_give(*counted);
            *counted = pt_heap_cost(grown);
        }
        size_t in_before = in.pos, out_before = o.pos;
        rc = ZSTD_decompressStream(dctx, &o, &in);
        if (ZSTD_isError(rc))
            problem = ZSTD_getErrorName(rc);
        else if (rc != 0 && in.pos == in_before && o.pos == out_before)
            problem = "size mismatch"; /* out of input (truncated), or beyond the claimed size */
    }
    pt_share_give(PAYLOAD_DECODER_MAX);
    if (!problem && !over_share && o.pos != payload_len)
        problem = "size mismatch";
    if (problem || over_share) {
        if (over_share) {
            char what[128];
            snprintf(what, sizeof what, "to decompress it (its payload would be %zu MiB; %zu MiB of it decoded)",
                     payload_len >> 20, o.pos >> 20);
            pt_share_error(err, what);
        } else {
            pt_error_set(err, "summary is corrupt or truncated (%s)", problem);
        }
        free(out);
        pt_share_give(*counted);
        return NULL;
    }
    return out;
}

/* The decoded summary as callers get it, once it has passed its check: its functions'
 * strings its own, or the pool's and its functions in the store. NULL with err when
 * decoding failed, it breaks a rule, or keeping it does not fit the file's share. */
static pt_worker_summary *checked(pt_worker_summary *s, const cursor *c, const string_table *t, pt_error *err)
{
    bool pooled = names_pooled();
    pt_error rule;
    if (c->bad && c->over_share) {
        pt_share_error(err, "to decode it");
    } else if (c->bad) {
        pt_error_set(err, "summary is corrupt: %s", c->what);
    } else if (pt_summary_check(s, &rule) != 0) {
        char who[128];
        pt_summary_describe(s, who, sizeof who);
        pt_error_set(err, "invalid summary of %s: %s", who, rule.message);
    } else if (!table_strings_kept(t, s, pooled)) {
        pt_share_error(err, "to hold its function names");
    } else {
        if (!pooled)
            return s;
        pt_summary_pool_call_names(s);
        s->shared_function_names = true; /* its strings are the pool's now */
        size_t cost;
        if (pt_fn_store_adopt_within(function_store, s, pt_share_left(), &cost)) {
            pt_share_take(cost); /* within what was left: it fits */
            pt_share_give(c->records); /* its records are freed: their values are in the store */
            return s;
        }
        char what[128];
        snprintf(what, sizeof what, "to hold its %zu functions (up to %zu MiB more)", s->function_count, cost >> 20);
        pt_share_error(err, what);
        pt_summary_free(s);
        return NULL;
    }
    forget_table_strings(s);
    pt_summary_free(s);
    return NULL;
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
    size_t payload_counted;
    unsigned char *payload =
        decompress_payload(h + HEADER_BYTES, len - HEADER_BYTES, (size_t)payload_len, &payload_counted, err);
    if (!payload)
        return NULL;
    cursor c = {payload, payload + payload_len, false, NULL, version, false, pt_share_left(), 0, 0};
    string_table table = {0};
    pt_worker_summary *s = pt_summary_new();
    decode_payload(&c, s, &table);
    pt_share_take(c.taken); /* within what was left: it fits */
    free(payload);
    pt_share_give(payload_counted);
    s = checked(s, &c, &table, err);
    string_table_free(&table);
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
    pt_worker_summary *s = NULL;
    size_t counted = PT_READ_FILE_HOLDS(len); /* pt_read_file counted it only while it read */
    if (pt_share_take(counted))
        s = pt_summary_decode(data, len, err);
    else
        pt_share_error(err, "to read it"), counted = 0;
    free(data);
    pt_share_give(counted);
    return s;
}

pt_worker_summary *pt_summary_read_at(int fd, uint64_t offset, uint64_t size, pt_error *err)
{
    if (size > MAX_PAYLOAD) {
        pt_error_set(err, "%llu bytes: more than a summary may be (%u MiB)", (unsigned long long)size,
                     MAX_PAYLOAD >> 20);
        return NULL;
    }
    size_t counted = pt_heap_cost(size ? (size_t)size : 1);
    if (!pt_share_take(counted)) {
        pt_share_error(err, "to read it");
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
    pt_share_give(counted);
    return s;
}
