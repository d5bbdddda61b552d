/* function_store.c -- columns of function records (function_store.h).
 *
 * Design: a column is cut in blocks of BLOCK slots, allocated when a slot of the block
 * first has the function (a function a few workers run costs a few blocks, not one cell
 * per worker of the job). In a block every field is its own array, allocated when the
 * first non-zero value arrives: 4 bytes a value (narrow) until one needs 8 (wide, the
 * block's array copied once). A record's presence and its count of per-step values are
 * one byte (state). Per slot the store keeps the columns of its functions in order, so
 * a worker's functions read back in the order they were listed. */
#define _POSIX_C_SOURCE 200809L
#include "summarize/function_store.h"
#include "util/common.h"
#include "util/strtab.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SHIFT 10
#define BLOCK (1u << BLOCK_SHIFT)
/* A record's state byte holds its count of per-step values. */
_Static_assert(PT_SUMMARY_MAX_STEP_VALUES < UINT8_MAX, "per-step values fit the state byte");

/* Integers of a block: none yet (all 0), narrow, or wide. */
typedef struct packed {
    int32_t *narrow;
    int64_t *wide;
} packed;

typedef struct block {
    uint8_t state[BLOCK]; /* 0 absent, else 1 + its per-step values */
    size_t stride;        /* per-step values room per slot */
    packed count, total, exposed, waiting, median, max, steps;
    uint64_t *throughput_avg, *throughput_std, *busbw; /* bits of the doubles */
    const char **group, **caller;
} block;

struct pt_fn_column {
    pt_class cls;
    const char *name; /* the store's key, after its class byte */
    block **blocks;
    size_t block_count;
};

struct pt_fn_store {
    pthread_mutex_t lock;
    pt_strtab keys; /* class byte + name -> column */
    pt_fn_column **columns;
    size_t column_count, column_cap;
    uint32_t *slot_first, *slot_functions; /* [slot]: its run of `order` */
    size_t slot_count, slot_cap, live;
    uint8_t *rank_taken; /* [rank]: slot `rank` is held, for rank < rank_slots */
    size_t rank_slots;   /* slots [0, rank_slots) are the ranks' (pt_fn_store_expect_ranks) */
    uint32_t *order; /* column ids, slot after slot */
    size_t order_count, order_cap;
};

static int64_t packed_get(const packed *p, size_t i)
{
    return p->wide ? p->wide[i] : p->narrow ? p->narrow[i] : 0;
}

static void packed_set(packed *p, size_t i, int64_t v, size_t len)
{
    if (!p->wide) {
        if (v == (int32_t)v) {
            if (!p->narrow && v == 0)
                return;
            if (!p->narrow)
                p->narrow = pt_xcalloc(len, sizeof *p->narrow);
            p->narrow[i] = (int32_t)v;
            return;
        }
        p->wide = pt_xcalloc(len, sizeof *p->wide);
        for (size_t k = 0; p->narrow && k < len; k++)
            p->wide[k] = p->narrow[k];
        free(p->narrow);
        p->narrow = NULL;
    }
    p->wide[i] = v;
}

static void packed_free(packed *p)
{
    free(p->narrow);
    free(p->wide);
}

static void bits_set(uint64_t **array, size_t i, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    if (!*array && bits == 0)
        return;
    if (!*array)
        *array = pt_xcalloc(BLOCK, sizeof **array);
    (*array)[i] = bits;
}

static double bits_get(const uint64_t *array, size_t i)
{
    double v = 0;
    if (array)
        memcpy(&v, &array[i], sizeof v);
    return v;
}

static void string_set(const char ***array, size_t i, const char *v)
{
    if (!*array && !v)
        return;
    if (!*array)
        *array = pt_xcalloc(BLOCK, sizeof **array);
    (*array)[i] = v;
}

/* Room for `need` per-step values per slot: the block's values move to the new stride. */
static void widen_steps(block *b, size_t need)
{
    packed wider = {0};
    size_t len = BLOCK * need;
    for (size_t i = 0; i < BLOCK; i++)
        for (size_t k = 0; k < b->stride && b->state[i]; k++)
            packed_set(&wider, i * need + k, packed_get(&b->steps, i * b->stride + k), len);
    packed_free(&b->steps);
    b->steps = wider;
    b->stride = need;
}

static void block_free(block *b)
{
    if (!b)
        return;
    packed *fields[] = {&b->count, &b->total, &b->exposed, &b->waiting, &b->median, &b->max, &b->steps};
    for (size_t i = 0; i < PT_ARRAY_LEN(fields); i++)
        packed_free(fields[i]);
    free(b->throughput_avg);
    free(b->throughput_std);
    free(b->busbw);
    free(b->group);
    free(b->caller);
    free(b);
}

static void put_record(pt_fn_column *col, uint32_t slot, const pt_function_summary *f)
{
    size_t at = slot >> BLOCK_SHIFT, i = slot & (BLOCK - 1);
    if (at >= col->block_count) {
        col->blocks = pt_xrealloc(col->blocks, (at + 1) * sizeof *col->blocks);
        memset(col->blocks + col->block_count, 0, (at + 1 - col->block_count) * sizeof *col->blocks);
        col->block_count = at + 1;
    }
    if (!col->blocks[at])
        col->blocks[at] = pt_xcalloc(1, sizeof *col->blocks[at]);
    block *b = col->blocks[at];
    /* pt_summary_check refuses more per-step values than readers have room for; a record
     * that was never checked keeps none rather than overrun them. */
    size_t step_count = f->step_count <= PT_SUMMARY_MAX_STEP_VALUES ? f->step_count : 0;
    b->state[i] = (uint8_t)(1 + step_count);
    packed_set(&b->count, i, (int64_t)f->count, BLOCK);
    packed_set(&b->total, i, f->total_ns, BLOCK);
    packed_set(&b->exposed, i, f->exposed_ns, BLOCK);
    packed_set(&b->waiting, i, f->waiting_ns, BLOCK);
    packed_set(&b->median, i, f->median_ns, BLOCK);
    packed_set(&b->max, i, f->max_ns, BLOCK);
    if (step_count > b->stride)
        widen_steps(b, step_count);
    for (size_t k = 0; k < step_count; k++)
        packed_set(&b->steps, i * b->stride + k, f->step_exposed_ns[k], BLOCK * b->stride);
    bits_set(&b->throughput_avg, i, f->throughput_avg_pct);
    bits_set(&b->throughput_std, i, f->throughput_std_pct);
    bits_set(&b->busbw, i, f->busbw_avg_gbps);
    string_set(&b->group, i, f->group);
    string_set(&b->caller, i, f->caller);
}

static uint32_t column_of(pt_fn_store *st, pt_class cls, const char *name)
{
    size_t len = strlen(name);
    char *key = pt_xmalloc(len + 2);
    key[0] = (char)('0' + cls);
    memcpy(key + 1, name, len + 1);
    uint32_t id = pt_strtab_intern(&st->keys, key, len + 1);
    free(key);
    if (id == st->column_count) {
        PT_GROW(st->columns, st->column_cap, st->column_count + 1);
        pt_fn_column *col = pt_xcalloc(1, sizeof *col);
        col->cls = cls;
        col->name = pt_strtab_get(&st->keys, id) + 1;
        st->columns[st->column_count++] = col;
    }
    return id;
}

pt_fn_store *pt_fn_store_new(void)
{
    pt_fn_store *st = pt_xcalloc(1, sizeof *st);
    pthread_mutex_init(&st->lock, NULL);
    pt_strtab_init(&st->keys);
    return st;
}

/* Drops every column and slot (the lock stays). */
static void store_clear(pt_fn_store *st)
{
    for (size_t c = 0; c < st->column_count; c++) {
        for (size_t k = 0; k < st->columns[c]->block_count; k++)
            block_free(st->columns[c]->blocks[k]);
        free(st->columns[c]->blocks);
        free(st->columns[c]);
    }
    free(st->columns);
    free(st->slot_first);
    free(st->slot_functions);
    free(st->order);
    free(st->rank_taken);
    pt_strtab_free(&st->keys);
    pthread_mutex_t lock = st->lock;
    memset(st, 0, sizeof *st);
    st->lock = lock;
    pt_strtab_init(&st->keys);
}

void pt_fn_store_free(pt_fn_store *st)
{
    if (!st)
        return;
    store_clear(st);
    pt_strtab_free(&st->keys);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* Room for slots [0, need): a slot no summary holds lists no functions. */
static void reserve_slots(pt_fn_store *st, size_t need)
{
    if (need <= st->slot_cap)
        return;
    size_t cap = st->slot_cap ? st->slot_cap : 1024;
    while (cap < need)
        cap *= 2;
    st->slot_first = pt_xrealloc(st->slot_first, cap * sizeof *st->slot_first);
    st->slot_functions = pt_xrealloc(st->slot_functions, cap * sizeof *st->slot_functions);
    memset(st->slot_first + st->slot_cap, 0, (cap - st->slot_cap) * sizeof *st->slot_first);
    memset(st->slot_functions + st->slot_cap, 0, (cap - st->slot_cap) * sizeof *st->slot_functions);
    st->slot_cap = cap;
}

void pt_fn_store_expect_ranks(pt_fn_store *st, size_t world)
{
    pthread_mutex_lock(&st->lock);
    if (st->slot_count == 0 && world > 0 && world <= UINT32_MAX / 2) {
        reserve_slots(st, world);
        st->rank_taken = pt_xcalloc(world, sizeof *st->rank_taken);
        st->rank_slots = st->slot_count = world;
    }
    pthread_mutex_unlock(&st->lock);
}

/* The rank's own slot when it is expected and free, else the next past them. */
static uint32_t take_slot(pt_fn_store *st, int64_t rank)
{
    if (rank >= 0 && (uint64_t)rank < st->rank_slots && !st->rank_taken[rank]) {
        st->rank_taken[rank] = 1;
        return (uint32_t)rank;
    }
    reserve_slots(st, st->slot_count + 1);
    return (uint32_t)st->slot_count++;
}

static uint32_t add_locked(pt_fn_store *st, const pt_worker_summary *s, int64_t rank)
{
    uint32_t slot = take_slot(st, rank);
    st->live++;
    PT_GROW(st->order, st->order_cap, st->order_count + s->function_count);
    st->slot_first[slot] = (uint32_t)st->order_count;
    st->slot_functions[slot] = (uint32_t)s->function_count;
    int64_t steps[PT_SUMMARY_MAX_STEP_VALUES];
    for (size_t i = 0; i < s->function_count; i++) {
        pt_function_summary record;
        const pt_function_summary *f = pt_summary_function(s, i, &record, steps);
        uint32_t id = column_of(st, f->cls, f->name);
        st->order[st->order_count++] = id;
        put_record(st->columns[id], slot, f);
    }
    return slot;
}

uint32_t pt_fn_store_add(pt_fn_store *st, const pt_worker_summary *s)
{
    pthread_mutex_lock(&st->lock);
    uint32_t slot = add_locked(st, s, -1);
    pthread_mutex_unlock(&st->lock);
    return slot;
}

void pt_fn_store_adopt(pt_fn_store *st, pt_worker_summary *s)
{
    pthread_mutex_lock(&st->lock);
    uint32_t slot = add_locked(st, s, s->rank);
    pthread_mutex_unlock(&st->lock);
    for (size_t i = 0; i < s->function_count; i++)
        free(s->functions[i].step_exposed_ns);
    free(s->functions);
    s->functions = NULL;
    s->fn_store = st;
    s->fn_slot = slot;
}

void pt_fn_store_release_slot(pt_fn_store *st, uint32_t slot)
{
    (void)slot; /* its values are freed with everyone's: a block holds many slots */
    pthread_mutex_lock(&st->lock);
    if (st->live && --st->live == 0)
        store_clear(st);
    pthread_mutex_unlock(&st->lock);
}

const pt_fn_column *pt_fn_store_function(const pt_fn_store *st, uint32_t slot, size_t i)
{
    return st->columns[st->order[st->slot_first[slot] + i]];
}

const pt_function_summary *pt_summary_function(const pt_worker_summary *s, size_t i, pt_function_summary *out,
                                               int64_t *steps)
{
    if (!s->fn_store)
        return &s->functions[i];
    return pt_fn_store_get(pt_fn_store_function(s->fn_store, s->fn_slot, i), s->fn_slot, out, steps);
}

pt_class pt_fn_column_class(const pt_fn_column *col) { return col->cls; }
const char *pt_fn_column_name(const pt_fn_column *col) { return col->name; }

bool pt_fn_store_value(const pt_fn_column *col, uint32_t slot, pt_fn_field field, int64_t *value)
{
    size_t at = slot >> BLOCK_SHIFT, i = slot & (BLOCK - 1);
    const block *b = at < col->block_count ? col->blocks[at] : NULL;
    *value = 0;
    if (!b || !b->state[i])
        return false;
    const packed *p = field == PT_FN_COUNT ? &b->count : field == PT_FN_TOTAL ? &b->total
                      : field == PT_FN_EXPOSED ? &b->exposed : &b->median;
    *value = packed_get(p, i);
    return true;
}

const pt_function_summary *pt_fn_store_get(const pt_fn_column *col, uint32_t slot, pt_function_summary *out,
                                           int64_t *steps)
{
    size_t at = slot >> BLOCK_SHIFT, i = slot & (BLOCK - 1);
    const block *b = at < col->block_count ? col->blocks[at] : NULL;
    if (!b || !b->state[i])
        return NULL;
    out->cls = col->cls;
    out->name = (char *)col->name;
    out->group = b->group ? (char *)b->group[i] : NULL;
    out->caller = b->caller ? (char *)b->caller[i] : NULL;
    out->count = (uint64_t)packed_get(&b->count, i);
    out->total_ns = packed_get(&b->total, i);
    out->exposed_ns = packed_get(&b->exposed, i);
    out->waiting_ns = packed_get(&b->waiting, i);
    out->median_ns = packed_get(&b->median, i);
    out->max_ns = packed_get(&b->max, i);
    out->step_count = b->state[i] - 1u;
    for (size_t k = 0; steps && k < out->step_count; k++)
        steps[k] = packed_get(&b->steps, i * b->stride + k);
    out->step_exposed_ns = steps && out->step_count ? steps : NULL;
    out->throughput_avg_pct = bits_get(b->throughput_avg, i);
    out->throughput_std_pct = bits_get(b->throughput_std, i);
    out->busbw_avg_gbps = bits_get(b->busbw, i);
    return out;
}
