/* function_store.c -- columns of function records (function_store.h).
 *
 * Design: a column is cut in blocks of BLOCK slots. A block has room for a range of its
 * slots that doubles as slots outside it arrive (one worker's function is a cell, not
 * BLOCK of them; a block of a function every worker runs reaches BLOCK), and a column's
 * new block starts as wide as its widest one (such a function's blocks fill at once,
 * without the doublings). The directory of a column's blocks covers the blocks it has,
 * not every block from slot 0. In a block every field is its own array, allocated when
 * the first non-zero value arrives: 4 bytes a value (narrow) until one needs 8 (wide, the
 * block's array copied once). A record's presence and its count of per-step values are
 * one byte (state). Per slot the store keeps the columns of its functions in order, so
 * a worker's functions read back in the order they were listed.
 *
 * Cost: adding a summary first works out, under the lock, at most what it will allocate,
 * so pt_fn_store_adopt_within refuses one that would pass its limit before allocating
 * anything. First the worst any summary of its names could cost (worst_cost: one pass
 * over the names, ~1.7 MB a function); a job's summary, of tens of functions, is within
 * any share and needs no more. Above the limit, function by function (add_cost: new
 * columns and keys, blocks made or grown, arrays made or widened, the store's own
 * arrays), where a record that fits the arrays already there costs 0. Both count every
 * array at 8 bytes a cell and what malloc keeps beside it (pt_heap_cost). */
#define _POSIX_C_SOURCE 200809L
#include "summarize/function_store.h"
#include "util/common.h"
#include "util/input.h"
#include "util/strtab.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SHIFT 10
#define BLOCK (1u << BLOCK_SHIFT)
/* A record's state byte holds its count of per-step values. */
_Static_assert(PT_SUMMARY_MAX_STEP_VALUES < UINT8_MAX, "per-step values fit the state byte");
_Static_assert(BLOCK <= UINT16_MAX, "a block's range fits its 16-bit fields");
_Static_assert(sizeof(const char *) == sizeof(uint64_t), "a cell of every array is 8 bytes at most");

/* A record's integers (the first four are pt_fn_field's, in its order), its doubles (as
 * bits) and its strings. */
enum { INT_COUNT, INT_TOTAL, INT_EXPOSED, INT_MEDIAN, INT_WAITING, INT_MAX, INT_FIELDS };
enum { BITS_THROUGHPUT_AVG, BITS_THROUGHPUT_STD, BITS_BUSBW, BITS_BYTES_AVG, BITS_BYTES_MAX, BITS_FIELDS };
enum { TEXT_GROUP, TEXT_CALLER, TEXT_FIELDS };
_Static_assert((int)PT_FN_COUNT == INT_COUNT && (int)PT_FN_TOTAL == INT_TOTAL &&
               (int)PT_FN_EXPOSED == INT_EXPOSED && (int)PT_FN_MEDIAN == INT_MEDIAN,
               "pt_fn_field indexes a block's integers");

/* Integers of a block: none yet (all 0), narrow, or wide. */
typedef struct packed {
    int32_t *narrow;
    int64_t *wide;
} packed;

/* Room for the slots [lo, lo + cap) of the block's BLOCK slots: every array below has cap
 * cells (steps: cap x stride), slot lo + i at cell i. */
typedef struct block {
    packed ints[INT_FIELDS], steps;
    uint64_t *bits[BITS_FIELDS];
    const char **texts[TEXT_FIELDS];
    uint16_t stride;  /* per-step values room per slot */
    uint16_t lo, cap; /* beside state: a lookup reads them and it together */
    uint8_t state[];  /* [cap]: 0 absent, else 1 + its per-step values */
} block;

struct pt_fn_column {
    pt_class cls;
    const char *name; /* the store's key, after its class byte */
    block **blocks;   /* [k]: the block of slots from (first_block + k) * BLOCK on, or NULL */
    uint32_t first_block, block_count;
    uint16_t widest;  /* the largest room of its blocks: where a new one starts */
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
    size_t bytes;    /* its blocks, their arrays, directories and columns (allocated) */
};

/* What this thread's additions allocated for blocks, their arrays, directories and
 * columns, less what they freed: add_within moves it to the store's count under the
 * store's lock (the allocations are made on the adding thread, under that lock). */
static _Thread_local ptrdiff_t allocated;

static void *store_calloc(size_t n, size_t size)
{
    allocated += (ptrdiff_t)pt_heap_cost(n * size);
    return pt_xcalloc(n, size);
}

static void store_free(void *p, size_t bytes)
{
    if (p)
        allocated -= (ptrdiff_t)pt_heap_cost(bytes);
    free(p);
}

/* f's values in the block's order: integers, doubles as bits, strings (as bits). */
#define RECORD_INTS(f) {(int64_t)(f)->count, (f)->total_ns, (f)->exposed_ns, (f)->median_ns, (f)->waiting_ns, \
                        (f)->max_ns}
static void record_cells(const pt_function_summary *f, uint64_t bits[BITS_FIELDS], uint64_t texts[TEXT_FIELDS])
{
    memcpy(&bits[BITS_THROUGHPUT_AVG], &f->throughput_avg_pct, sizeof(uint64_t));
    memcpy(&bits[BITS_THROUGHPUT_STD], &f->throughput_std_pct, sizeof(uint64_t));
    memcpy(&bits[BITS_BUSBW], &f->busbw_avg_gbps, sizeof(uint64_t));
    memcpy(&bits[BITS_BYTES_AVG], &f->bytes_avg, sizeof(uint64_t));
    memcpy(&bits[BITS_BYTES_MAX], &f->bytes_max, sizeof(uint64_t));
    texts[TEXT_GROUP] = (uint64_t)(uintptr_t)f->group;
    texts[TEXT_CALLER] = (uint64_t)(uintptr_t)f->caller;
}

/* pt_summary_check refuses more per-step values than readers have room for; a record that
 * was never checked keeps none rather than overrun them. */
static size_t record_steps(const pt_function_summary *f)
{
    return f->step_count <= PT_SUMMARY_MAX_STEP_VALUES ? f->step_count : 0;
}

static bool fits_narrow(int64_t v)
{
    return v == (int32_t)v;
}

static int64_t packed_get(const packed *p, size_t i)
{
    return p->wide ? p->wide[i] : p->narrow ? p->narrow[i] : 0;
}

/* packed_set where p's array has to be made or widened first. */
static void packed_grow_and_set(packed *p, size_t i, int64_t v, size_t len)
{
    if (fits_narrow(v)) {
        p->narrow = store_calloc(len, sizeof *p->narrow);
        p->narrow[i] = (int32_t)v;
        return;
    }
    p->wide = store_calloc(len, sizeof *p->wide);
    for (size_t k = 0; p->narrow && k < len; k++)
        p->wide[k] = p->narrow[k];
    store_free(p->narrow, len * sizeof *p->narrow);
    p->narrow = NULL;
    p->wide[i] = v;
}

static inline void packed_set(packed *p, size_t i, int64_t v, size_t len)
{
    if (p->wide)
        p->wide[i] = v;
    else if (p->narrow && fits_narrow(v))
        p->narrow[i] = (int32_t)v;
    else if (p->narrow || v != 0)
        packed_grow_and_set(p, i, v, len);
}

static void packed_free(packed *p)
{
    free(p->narrow);
    free(p->wide);
}

/* packed_free of an array of len cells in a store that stays. */
static void packed_release(packed *p, size_t len)
{
    store_free(p->narrow, len * sizeof *p->narrow);
    store_free(p->wide, len * sizeof *p->wide);
    p->narrow = NULL;
    p->wide = NULL;
}

/* A cell of an array that exists once one value is not 0 (the doubles' bits, strings):
 * the array, made when it has to be. */
static void *cell_set(void *array, size_t i, uint64_t bits, size_t len)
{
    if (!array && bits == 0)
        return NULL;
    if (!array)
        array = store_calloc(len, sizeof(uint64_t));
    memcpy((char *)array + i * sizeof(uint64_t), &bits, sizeof bits);
    return array;
}

static double bits_get(const uint64_t *array, size_t i)
{
    double v = 0;
    if (array)
        memcpy(&v, &array[i], sizeof v);
    return v;
}

/* Room for `need` per-step values per slot: the block's values move to the new stride. */
static void widen_steps(block *b, size_t need)
{
    packed wider = {0};
    size_t len = (size_t)b->cap * need;
    for (size_t i = 0; i < b->cap; i++)
        for (size_t k = 0; k < b->stride && b->state[i]; k++)
            packed_set(&wider, i * need + k, packed_get(&b->steps, i * b->stride + k), len);
    packed_release(&b->steps, (size_t)b->cap * b->stride);
    b->steps = wider;
    b->stride = (uint16_t)need;
}

static void block_free(block *b)
{
    if (!b)
        return;
    for (size_t k = 0; k < INT_FIELDS; k++)
        packed_free(&b->ints[k]);
    packed_free(&b->steps);
    for (size_t k = 0; k < BITS_FIELDS; k++)
        free(b->bits[k]);
    for (size_t k = 0; k < TEXT_FIELDS; k++)
        free(b->texts[k]);
    free(b);
}

static block *block_new(size_t lo, size_t cap)
{
    block *b = store_calloc(1, sizeof *b + cap);
    b->lo = (uint16_t)lo;
    b->cap = (uint16_t)cap;
    return b;
}

static bool holds(const block *b, size_t i)
{
    return i >= b->lo && i < (size_t)b->lo + b->cap;
}

/* The room a block needs to hold slot i too: doubled until it does (a copy of its arrays
 * each time), within its BLOCK slots. */
static void grown_range(const block *b, size_t i, size_t *lo, size_t *cap)
{
    size_t from = PT_MIN((size_t)b->lo, i), to = PT_MAX((size_t)b->lo + b->cap, i + 1), c = b->cap;
    while (c < to - from)
        c *= 2;
    c = PT_MIN(c, (size_t)BLOCK);
    *lo = PT_MIN(from, BLOCK - c);
    *cap = c;
}

/* Where a new block of col starts around slot i: as wide as its widest block (a function
 * most workers run fills its blocks; one that few run stays small), aligned to its room. */
static void first_range(const pt_fn_column *col, size_t i, size_t *lo, size_t *cap)
{
    *cap = col && col->widest ? col->widest : 1;
    *lo = i & ~(*cap - 1);
}

/* An array of len cells (size bytes each) as one of new_len cells, its cells from shift
 * on; the old one is freed. */
static void *moved(void *old, size_t size, size_t len, size_t shift, size_t new_len)
{
    if (!old)
        return NULL;
    char *a = store_calloc(new_len, size);
    memcpy(a + shift * size, old, len * size);
    store_free(old, len * size);
    return a;
}

static void move_packed(packed *p, size_t width, size_t len, size_t shift, size_t new_len)
{
    p->narrow = moved(p->narrow, width * sizeof *p->narrow, len, shift, new_len);
    p->wide = moved(p->wide, width * sizeof *p->wide, len, shift, new_len);
}

/* b with room for [lo, lo + cap), which holds its range: a new block; b is freed. */
static block *grow_block(block *b, size_t lo, size_t cap)
{
    block *g = block_new(lo, cap);
    size_t shift = b->lo - lo, len = b->cap;
    memcpy(g->state + shift, b->state, len);
    g->stride = b->stride;
    for (size_t k = 0; k < INT_FIELDS; k++) {
        g->ints[k] = b->ints[k];
        move_packed(&g->ints[k], 1, len, shift, cap);
    }
    g->steps = b->steps;
    move_packed(&g->steps, b->stride, len, shift, cap);
    for (size_t k = 0; k < BITS_FIELDS; k++)
        g->bits[k] = moved(b->bits[k], sizeof(uint64_t), len, shift, cap);
    for (size_t k = 0; k < TEXT_FIELDS; k++)
        g->texts[k] = moved((void *)b->texts[k], sizeof(uint64_t), len, shift, cap);
    store_free(b, sizeof *b + b->cap);
    return g;
}

/* The blocks [first, end) col's directory covers once it has a place for block at. */
static void directory_range(const pt_fn_column *col, size_t at, size_t *first, size_t *end)
{
    *first = col->block_count ? PT_MIN((size_t)col->first_block, at) : at;
    *end = col->block_count ? PT_MAX((size_t)col->first_block + col->block_count, at + 1) : at + 1;
}

/* col's block of slot, NULL when it has none; *i its cell there. */
static block *block_of(const pt_fn_column *col, uint32_t slot, size_t *i)
{
    size_t at = (size_t)(slot >> BLOCK_SHIFT) - col->first_block; /* wraps below the first */
    block *b = at < col->block_count ? col->blocks[at] : NULL;
    *i = (size_t)(slot & (BLOCK - 1)) - (b ? b->lo : 0); /* wraps below its range */
    return b && *i < b->cap ? b : NULL;
}

/* The place in col's directory of block `at`, the directory grown to hold it. */
static block **place_of(pt_fn_column *col, size_t at)
{
    size_t first, end;
    directory_range(col, at, &first, &end);
    if (first != col->first_block || end - first != col->block_count) {
        block **blocks = store_calloc(end - first, sizeof *blocks);
        if (col->block_count)
            memcpy(blocks + (col->first_block - first), col->blocks, col->block_count * sizeof *blocks);
        store_free(col->blocks, col->block_count * sizeof *blocks);
        col->blocks = blocks;
        col->first_block = (uint32_t)first;
        col->block_count = (uint32_t)(end - first);
    }
    return &col->blocks[at - col->first_block];
}

static void put_record(pt_fn_column *col, uint32_t slot, const pt_function_summary *f)
{
    size_t i = slot & (BLOCK - 1), lo, cap;
    block **place = place_of(col, slot >> BLOCK_SHIFT);
    if (!*place) {
        first_range(col, i, &lo, &cap);
        *place = block_new(lo, cap);
    } else if (!holds(*place, i)) {
        grown_range(*place, i, &lo, &cap);
        *place = grow_block(*place, lo, cap);
    }
    block *b = *place;
    col->widest = PT_MAX(col->widest, b->cap);
    i -= b->lo;
    size_t len = b->cap, step_count = record_steps(f);
    b->state[i] = (uint8_t)(1 + step_count);
    const int64_t ints[INT_FIELDS] = RECORD_INTS(f);
    for (size_t k = 0; k < INT_FIELDS; k++)
        packed_set(&b->ints[k], i, ints[k], len);
    if (step_count > b->stride)
        widen_steps(b, step_count);
    for (size_t k = 0; k < step_count; k++)
        packed_set(&b->steps, i * b->stride + k, f->step_exposed_ns[k], len * b->stride);
    uint64_t bits[BITS_FIELDS], texts[TEXT_FIELDS];
    record_cells(f, bits, texts);
    for (size_t k = 0; k < BITS_FIELDS; k++)
        b->bits[k] = cell_set(b->bits[k], i, bits[k], len);
    for (size_t k = 0; k < TEXT_FIELDS; k++)
        b->texts[k] = cell_set((void *)b->texts[k], i, texts[k], len);
}

/* ------------------------------------------------------------ what an addition costs */

/* What packed_set allocates to store v in p (an array of len cells): a narrow array where
 * it has none and v is not 0, a wide one (the narrow one beside it while copied) where v
 * does not fit 4 bytes. */
static inline size_t packed_cost(const packed *p, int64_t v, size_t len)
{
    if (p->wide || v == 0 || (p->narrow && fits_narrow(v)))
        return 0;
    return fits_narrow(v) ? pt_heap_cost(len * sizeof(int32_t)) : pt_heap_cost(len * sizeof(int64_t));
}

static size_t packed_size(const packed *p, size_t len)
{
    return p->wide ? pt_heap_cost(len * sizeof(int64_t)) : p->narrow ? pt_heap_cost(len * sizeof(int32_t)) : 0;
}

/* What put_record allocates for f in b (NULL: a block still to make) with room cap there
 * (more than b's: b grows to it first). */
static size_t record_cost(const block *b, size_t cap, const pt_function_summary *f)
{
    static const block none;
    bool grows = !b || b->cap != cap;
    const block *was = b ? b : &none;
    size_t cost = grows ? pt_heap_cost(sizeof *b + cap) : 0;
    const int64_t ints[INT_FIELDS] = RECORD_INTS(f);
    for (size_t k = 0; k < INT_FIELDS; k++)
        cost += (grows ? packed_size(&was->ints[k], cap) : 0) + packed_cost(&was->ints[k], ints[k], cap);
    size_t stride = was->stride, step_count = record_steps(f);
    if (grows)
        cost += packed_size(&was->steps, cap * stride);
    if (step_count > stride) { /* widen_steps: every value to a new array, narrow then wide at most */
        stride = step_count;
        cost += pt_heap_cost(cap * stride * sizeof(int32_t)) + pt_heap_cost(cap * stride * sizeof(int64_t));
    } else {
        for (size_t k = 0; k < step_count; k++) /* the first value that makes or widens the array */
            if (packed_cost(&was->steps, f->step_exposed_ns[k], cap * stride)) {
                cost += pt_heap_cost(cap * stride * sizeof(int64_t)) * 2;
                break;
            }
    }
    uint64_t bits[BITS_FIELDS], texts[TEXT_FIELDS];
    record_cells(f, bits, texts);
    for (size_t k = 0; k < BITS_FIELDS; k++)
        cost += (was->bits[k] ? grows : bits[k] != 0) ? pt_heap_cost(cap * sizeof(uint64_t)) : 0;
    for (size_t k = 0; k < TEXT_FIELDS; k++)
        cost += (was->texts[k] ? grows : texts[k] != 0) ? pt_heap_cost(cap * sizeof(uint64_t)) : 0;
    return cost;
}

/* What put_record allocates for f at slot of col (NULL: a column still to make). */
static size_t column_cost(const pt_fn_column *col, uint32_t slot, const pt_function_summary *f)
{
    size_t at = slot >> BLOCK_SHIFT, i = slot & (BLOCK - 1), cost = 0, lo, cap;
    static const pt_fn_column no_column;
    const pt_fn_column *c = col ? col : &no_column;
    size_t first, end;
    directory_range(c, at, &first, &end);
    if (end - first != c->block_count || first != c->first_block)
        cost += pt_heap_cost((end - first) * sizeof(block *));
    const block *b = at - c->first_block < c->block_count ? c->blocks[at - c->first_block] : NULL;
    if (!b)
        first_range(c, i, &lo, &cap);
    else if (!holds(b, i))
        grown_range(b, i, &lo, &cap);
    else
        cap = b->cap;
    return cost + record_cost(b, cap, f);
}

/* What pt_grow may allocate to take an array of cap cells (size bytes) to need: the new
 * one, doubled, beside the old while realloc copies. */
static size_t growth_cost(size_t cap, size_t need, size_t size, size_t first_cap)
{
    if (need <= cap)
        return 0;
    size_t grown = cap ? cap : first_cap;
    while (grown < need)
        grown *= 2;
    return pt_heap_cost(grown * size) + cap * size;
}

/* ------------------------------------------------------------ the store */

/* A column's key: its class as one byte, then its name (in buf when it fits). */
#define KEY_BUF 256
static char *key_of(const pt_function_summary *f, size_t len, char buf[KEY_BUF])
{
    char *key = len + 2 <= KEY_BUF ? buf : pt_xmalloc(len + 2);
    key[0] = (char)('0' + f->cls);
    memcpy(key + 1, f->name, len + 1);
    return key;
}

/* f's column, UINT32_MAX where the store has none. */
static uint32_t find_column(const pt_fn_store *st, const pt_function_summary *f)
{
    char buf[KEY_BUF];
    size_t len = strlen(f->name);
    char *key = key_of(f, len, buf);
    uint32_t id = pt_strtab_find(&st->keys, key, len + 1);
    if (key != buf)
        free(key);
    return id;
}

static uint32_t column_of(pt_fn_store *st, const pt_function_summary *f)
{
    char buf[KEY_BUF];
    size_t len = strlen(f->name);
    char *key = key_of(f, len, buf);
    uint32_t id = pt_strtab_intern(&st->keys, key, len + 1);
    if (key != buf)
        free(key);
    if (id == st->column_count) {
        PT_GROW(st->columns, st->column_cap, st->column_count + 1);
        pt_fn_column *col = store_calloc(1, sizeof *col);
        col->cls = f->cls;
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

#define FIRST_SLOT_CAP 1024

/* Room for slots [0, need): a slot no summary holds lists no functions. */
static void reserve_slots(pt_fn_store *st, size_t need)
{
    if (need <= st->slot_cap)
        return;
    size_t cap = st->slot_cap ? st->slot_cap : FIRST_SLOT_CAP;
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

static bool own_rank_slot(const pt_fn_store *st, int64_t rank)
{
    return rank >= 0 && (uint64_t)rank < st->rank_slots && !st->rank_taken[rank];
}

/* The slot take_slot will give: the rank's own when it is expected and free, else the
 * next past them. */
static uint32_t next_slot(const pt_fn_store *st, int64_t rank)
{
    return own_rank_slot(st, rank) ? (uint32_t)rank : (uint32_t)st->slot_count;
}

static uint32_t take_slot(pt_fn_store *st, int64_t rank)
{
    if (own_rank_slot(st, rank)) {
        st->rank_taken[rank] = 1;
        return (uint32_t)rank;
    }
    reserve_slots(st, st->slot_count + 1);
    return (uint32_t)st->slot_count++;
}

/* What the store's own arrays may allocate for new_columns more columns and s at slot. */
static size_t arrays_cost(const pt_fn_store *st, const pt_worker_summary *s, uint32_t slot, size_t new_columns)
{
    return growth_cost(st->column_cap, st->column_count + new_columns, sizeof *st->columns, 8) +
           growth_cost(st->order_cap, st->order_count + s->function_count, sizeof *st->order, 8) +
           2 * growth_cost(st->slot_cap, (size_t)slot + 1, sizeof *st->slot_first, FIRST_SLOT_CAP);
}

/* At most what adding s at slot allocates whatever its functions hold and whatever the
 * store has: each a new column and key, a directory reaching every block, a block grown
 * to BLOCK with each array moved and a wide one made, its per-step values moved and
 * widened to the most a record has. One pass over the names: a summary whose worst is
 * within the limit (a job's, of tens of functions) needs no closer count. */
static size_t worst_cost(const pt_fn_store *st, const pt_worker_summary *s, uint32_t slot)
{
    size_t key_bytes = 0, keys_apart = 0;
    for (size_t i = 0; i < s->function_count; i++) {
        pt_function_summary record;
        size_t len = strlen(pt_summary_function(s, i, &record, NULL)->name);
        key_bytes += len + 1;
        keys_apart += len + 2 > KEY_BUF ? pt_heap_cost(len + 2) : 0;
    }
    size_t blocks = PT_MAX(st->slot_count, (size_t)slot + 1) / BLOCK + 1, cell = sizeof(int64_t);
    size_t each = pt_heap_cost(sizeof(pt_fn_column)) + pt_heap_cost(blocks * sizeof(block *)) +
                  pt_heap_cost(sizeof(block) + BLOCK) + INT_FIELDS * 2 * pt_heap_cost(BLOCK * cell) +
                  3 * pt_heap_cost(BLOCK * PT_SUMMARY_MAX_STEP_VALUES * cell) +
                  (BITS_FIELDS + TEXT_FIELDS) * pt_heap_cost(BLOCK * cell);
    return s->function_count * each + keys_apart + pt_strtab_growth_bound(&st->keys, s->function_count, key_bytes) +
           arrays_cost(st, s, slot, s->function_count);
}

/* At most what adding s at slot allocates, function by function; ids[i] is then its i-th
 * function's column (UINT32_MAX: one to make). */
static size_t add_cost(const pt_fn_store *st, const pt_worker_summary *s, uint32_t slot, uint32_t *ids)
{
    size_t cost = 0, new_columns = 0, key_bytes = 0;
    int64_t steps[PT_SUMMARY_MAX_STEP_VALUES];
    for (size_t i = 0; i < s->function_count; i++) {
        pt_function_summary record;
        const pt_function_summary *f = pt_summary_function(s, i, &record, steps);
        ids[i] = find_column(st, f);
        if (ids[i] == UINT32_MAX) {
            size_t len = strlen(f->name);
            new_columns++;
            key_bytes += len + 1;
            cost += pt_heap_cost(sizeof(pt_fn_column)) + (len + 2 > KEY_BUF ? pt_heap_cost(len + 2) : 0);
        }
        cost += column_cost(ids[i] == UINT32_MAX ? NULL : st->columns[ids[i]], slot, f);
    }
    return cost + pt_strtab_growth_bound(&st->keys, new_columns, key_bytes) + arrays_cost(st, s, slot, new_columns);
}

static uint32_t add_locked(pt_fn_store *st, const pt_worker_summary *s, int64_t rank, const uint32_t *ids)
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
        uint32_t id = ids && ids[i] != UINT32_MAX ? ids[i] : column_of(st, f);
        st->order[st->order_count++] = id;
        put_record(st->columns[id], slot, f);
    }
    return slot;
}

static void unlock_on_unwind(void *lock)
{
    pthread_mutex_unlock(lock);
}

/* Adds s (at its rank's slot, rank >= 0) when what that may allocate is within limit:
 * true and *slot, else false and nothing changed. *cost: that bound either way. */
static bool add_within(pt_fn_store *st, const pt_worker_summary *s, int64_t rank, size_t limit, uint32_t *slot,
                       size_t *cost)
{
    pthread_mutex_lock(&st->lock);
    /* An allocation that fails in here (analyze's pt_run_guarded) must not leave the store
     * locked for the other threads. */
    pt_unwind_push(unlock_on_unwind, &st->lock);
    uint32_t *ids = NULL;
    *cost = worst_cost(st, s, next_slot(st, rank));
    if (*cost > limit) {
        size_t ids_size = (s->function_count ? s->function_count : 1) * sizeof *ids;
        ids = pt_xmalloc(ids_size);
        pt_unwind_push(free, ids);
        *cost = pt_heap_cost(ids_size) + add_cost(st, s, next_slot(st, rank), ids);
    }
    bool fits = *cost <= limit;
    ptrdiff_t before = allocated;
    if (fits)
        *slot = add_locked(st, s, rank, ids);
    st->bytes += (size_t)(allocated - before);
    if (ids)
        pt_unwind_pop(ids);
    free(ids);
    pt_unwind_pop(&st->lock);
    pthread_mutex_unlock(&st->lock);
    return fits;
}

uint32_t pt_fn_store_add(pt_fn_store *st, const pt_worker_summary *s)
{
    uint32_t slot = 0;
    size_t cost;
    add_within(st, s, -1, SIZE_MAX, &slot, &cost);
    return slot;
}

bool pt_fn_store_adopt_within(pt_fn_store *st, pt_worker_summary *s, size_t limit, size_t *cost)
{
    uint32_t slot;
    if (!add_within(st, s, s->rank, limit, &slot, cost))
        return false;
    for (size_t i = 0; i < s->function_count; i++)
        free(s->functions[i].step_exposed_ns);
    free(s->functions);
    s->functions = NULL;
    s->fn_store = st;
    s->fn_slot = slot;
    return true;
}

void pt_fn_store_adopt(pt_fn_store *st, pt_worker_summary *s)
{
    size_t cost;
    pt_fn_store_adopt_within(st, s, SIZE_MAX, &cost);
}

size_t pt_fn_store_bytes(pt_fn_store *st)
{
    pthread_mutex_lock(&st->lock);
    size_t bytes = st->bytes + st->keys.bytes + st->column_cap * sizeof *st->columns +
                   st->order_cap * sizeof *st->order + 2 * st->slot_cap * sizeof *st->slot_first + st->rank_slots;
    pthread_mutex_unlock(&st->lock);
    return bytes;
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
    size_t i;
    const block *b = block_of(col, slot, &i);
    *value = 0;
    if (!b || !b->state[i])
        return false;
    *value = packed_get(&b->ints[field], i);
    return true;
}

const pt_function_summary *pt_fn_store_get(const pt_fn_column *col, uint32_t slot, pt_function_summary *out,
                                           int64_t *steps)
{
    size_t i;
    const block *b = block_of(col, slot, &i);
    if (!b || !b->state[i])
        return NULL;
    out->cls = col->cls;
    out->name = (char *)col->name;
    out->group = b->texts[TEXT_GROUP] ? (char *)b->texts[TEXT_GROUP][i] : NULL;
    out->caller = b->texts[TEXT_CALLER] ? (char *)b->texts[TEXT_CALLER][i] : NULL;
    out->count = (uint64_t)packed_get(&b->ints[INT_COUNT], i);
    out->total_ns = packed_get(&b->ints[INT_TOTAL], i);
    out->exposed_ns = packed_get(&b->ints[INT_EXPOSED], i);
    out->waiting_ns = packed_get(&b->ints[INT_WAITING], i);
    out->median_ns = packed_get(&b->ints[INT_MEDIAN], i);
    out->max_ns = packed_get(&b->ints[INT_MAX], i);
    out->step_count = b->state[i] - 1u;
    for (size_t k = 0; steps && k < out->step_count; k++)
        steps[k] = packed_get(&b->steps, i * b->stride + k);
    out->step_exposed_ns = steps && out->step_count ? steps : NULL;
    out->throughput_avg_pct = bits_get(b->bits[BITS_THROUGHPUT_AVG], i);
    out->throughput_std_pct = bits_get(b->bits[BITS_THROUGHPUT_STD], i);
    out->busbw_avg_gbps = bits_get(b->bits[BITS_BUSBW], i);
    out->bytes_avg = bits_get(b->bits[BITS_BYTES_AVG], i);
    out->bytes_max = bits_get(b->bits[BITS_BYTES_MAX], i);
    return out;
}
