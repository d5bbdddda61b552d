/* collectives.c -- the collective bookkeeping behind collectives.h.
 *
 * Layout: a fixed table of groups; each group holds its identity (written once, before
 * the group is published by raising group_count with release order), a sequence counter
 * and a ring of entries. Entry i of a group holds the call whose sequence number s has
 * s % PT_COLL_RING == i. Each entry is a seqlock: the writer makes its version odd,
 * stores the fields (relaxed atomics), makes it even again (release); the reader reads
 * the version, the fields, the version again, and keeps the entry only when both reads
 * agree and are even. Writers of one entry are one thread at a time in practice (the GIL
 * serializes the Python wrappers; only 16 concurrent calls in one group could share an
 * entry), and the worst a race does is drop that entry from one snapshot.
 *
 * The error text of a failed call is the only non-atomic payload: one per group, behind
 * one mutex that the training thread takes only when a call raised and the agent only
 * while it copies. */
#define _POSIX_C_SOURCE 200809L
#include "collect/collectives.h"

#include "util/common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pt_coll_op_names[] = {
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
    "monitored_barrier", "send", "recv", "all_gather_object", "broadcast_object_list", "coalesced",
};
const size_t pt_coll_op_count = PT_ARRAY_LEN(pt_coll_op_names);

const char *const pt_coll_dtype_names[] = {
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
    "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "other",
};
const size_t pt_coll_dtype_count = PT_ARRAY_LEN(pt_coll_dtype_names);

const char *pt_coll_state_name(int state)
{
    switch (state) {
    case PT_COLL_ENTERED: return "entered";
    case PT_COLL_ISSUED: return "issued";
    case PT_COLL_COMPLETED: return "completed";
    case PT_COLL_FAILED: return "failed";
    default: return "unknown";
    }
}

#define SEQ_BITS 48
#define SEQ_MASK ((UINT64_C(1) << SEQ_BITS) - 1)
#define READ_TRIES 4

typedef struct entry {
    atomic_uint_fast32_t version;
    atomic_uint_fast64_t seq;
    atomic_int_fast64_t count;
    atomic_int_fast64_t enter_ns;
    atomic_uint_fast32_t op_dtype_state; /* op << 16 | dtype << 8 | state */
} entry;

typedef struct group {
    /* Identity: written before the group is published, then only read. */
    char name[PT_COLL_NAME_MAX];
    char backend[PT_COLL_NAME_MAX];
    char ranks[PT_COLL_RANKS_MAX];
    int32_t size;
    atomic_bool retired;         /* replaced by a group of the same name with other ranks */
    atomic_uint_fast64_t next_seq;
    entry ring[PT_COLL_RING];
    /* The last failed call's error, under error_lock. */
    uint64_t error_seq;
    char error[PT_COLL_ERROR_MAX];
} group;

static group groups[PT_COLL_MAX_GROUPS];
static atomic_int group_count;
static atomic_bool failure_pending;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------ registration */

/* Text safe for a tab-separated line: control characters become '?'. */
static bool copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    dst[n] = '\0';
    return true;
}

/* Sorted ranks in the run notation: "0-7", "0-56/8", "3,5". False when it does not fit. */
static bool format_ranks(char *dst, size_t cap, const int32_t *ranks, size_t n)
{
    size_t used = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        int64_t stride = j < n ? (int64_t)ranks[j] - ranks[i] : 1;
        while (j < n && stride > 0 && (int64_t)ranks[j] - ranks[j - 1] == stride)
            j++;
        if (j - i < 3 && stride != 1)
            j = i + 1; /* two ranks apart: write them one by one */
        int w;
        const char *sep = used ? "," : "";
        if (j - i == 1)
            w = snprintf(dst + used, cap - used, "%s%d", sep, (int)ranks[i]);
        else if (stride == 1)
            w = snprintf(dst + used, cap - used, "%s%d-%d", sep, (int)ranks[i], (int)ranks[j - 1]);
        else
            w = snprintf(dst + used, cap - used, "%s%d-%d/%lld", sep, (int)ranks[i], (int)ranks[j - 1],
                         (long long)stride);
        if (w < 0 || (size_t)w >= cap - used)
            return false;
        used += (size_t)w;
        i = j;
    }
    return true;
}

static void reset_group(group *g)
{
    for (size_t i = 0; i < PT_COLL_RING; i++) {
        atomic_store_explicit(&g->ring[i].seq, 0, memory_order_relaxed);
        atomic_store_explicit(&g->ring[i].version, 0, memory_order_release);
    }
    atomic_store_explicit(&g->next_seq, 0, memory_order_release);
    pthread_mutex_lock(&error_lock);
    g->error_seq = 0;
    g->error[0] = '\0';
    pthread_mutex_unlock(&error_lock);
}

int pt_coll_group(const char *name, const char *backend, const int32_t *ranks, size_t rank_count)
{
    char gname[PT_COLL_NAME_MAX], gbackend[PT_COLL_NAME_MAX], granks[PT_COLL_RANKS_MAX];
    if (!name || !name[0] || !copy_field(gname, sizeof gname, name) ||
        !copy_field(gbackend, sizeof gbackend, backend ? backend : "") || rank_count == 0 ||
        rank_count > (size_t)INT32_MAX || !format_ranks(granks, sizeof granks, ranks, rank_count))
        return -1;
    if (ranks[0] < 0)
        return -1;
    for (size_t i = 1; i < rank_count; i++)
        if (ranks[i] <= ranks[i - 1])
            return -1;
    pthread_mutex_lock(&registry_lock);
    int n = atomic_load_explicit(&group_count, memory_order_relaxed), found = -1;
    for (int i = 0; i < n; i++) {
        group *g = &groups[i];
        if (atomic_load_explicit(&g->retired, memory_order_relaxed) || strcmp(g->name, gname) != 0)
            continue;
        if (strcmp(g->ranks, granks) == 0 && strcmp(g->backend, gbackend) == 0) {
            reset_group(g);
            found = i;
        } else {
            atomic_store_explicit(&g->retired, true, memory_order_release);
        }
    }
    if (found < 0 && n < PT_COLL_MAX_GROUPS) {
        group *g = &groups[n];
        memcpy(g->name, gname, sizeof gname);
        memcpy(g->backend, gbackend, sizeof gbackend);
        memcpy(g->ranks, granks, sizeof granks);
        g->size = (int32_t)rank_count;
        atomic_store_explicit(&g->retired, false, memory_order_relaxed);
        reset_group(g);
        atomic_store_explicit(&group_count, n + 1, memory_order_release);
        found = n;
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

/* ------------------------------------------------------------ calls */

static void write_entry(entry *e, uint64_t seq, int64_t count, int64_t enter_ns, uint32_t packed)
{
    uint_fast32_t v = atomic_load_explicit(&e->version, memory_order_relaxed);
    atomic_store_explicit(&e->version, v | 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&e->seq, seq, memory_order_relaxed);
    atomic_store_explicit(&e->count, count, memory_order_relaxed);
    atomic_store_explicit(&e->enter_ns, enter_ns, memory_order_relaxed);
    atomic_store_explicit(&e->op_dtype_state, packed, memory_order_relaxed);
    atomic_store_explicit(&e->version, (v | 1) + 1, memory_order_release);
}

uint64_t pt_coll_enter(int g, int op, int64_t count, int dtype)
{
    if (g < 0 || g >= atomic_load_explicit(&group_count, memory_order_acquire) || op < 0 ||
        (size_t)op >= pt_coll_op_count)
        return 0;
    if (dtype < 0 || (size_t)dtype >= pt_coll_dtype_count)
        dtype = (int)pt_coll_dtype_count - 1;
    group *gr = &groups[g];
    uint64_t seq = (atomic_fetch_add_explicit(&gr->next_seq, 1, memory_order_relaxed) + 1) & SEQ_MASK;
    uint32_t packed = (uint32_t)op << 16 | (uint32_t)dtype << 8 | PT_COLL_ENTERED;
    write_entry(&gr->ring[seq % PT_COLL_RING], seq, count < -1 ? -1 : count, pt_now_ns(), packed);
    return (uint64_t)(g + 1) << SEQ_BITS | seq;
}

void pt_coll_leave(uint64_t token, int state, const char *error)
{
    int g = (int)(token >> SEQ_BITS) - 1;
    uint64_t seq = token & SEQ_MASK;
    if (g < 0 || g >= atomic_load_explicit(&group_count, memory_order_acquire) || seq == 0 ||
        state < PT_COLL_ISSUED || state > PT_COLL_FAILED)
        return;
    group *gr = &groups[g];
    entry *e = &gr->ring[seq % PT_COLL_RING];
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
        return; /* reused by a later call */
    uint32_t packed = (uint32_t)atomic_load_explicit(&e->op_dtype_state, memory_order_relaxed);
    write_entry(e, seq, atomic_load_explicit(&e->count, memory_order_relaxed),
                atomic_load_explicit(&e->enter_ns, memory_order_relaxed), (packed & ~0xffu) | (uint32_t)state);
    if (state == PT_COLL_FAILED) {
        pthread_mutex_lock(&error_lock);
        gr->error_seq = seq;
        gr->error[0] = '\0';
        if (error) {
            size_t n = strnlen(error, sizeof gr->error - 1);
            for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)error[i];
                gr->error[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
            }
            gr->error[n] = '\0';
        }
        pthread_mutex_unlock(&error_lock);
        atomic_store_explicit(&failure_pending, true, memory_order_release);
    }
}

bool pt_coll_take_failure(void)
{
    return atomic_exchange_explicit(&failure_pending, false, memory_order_acq_rel);
}

/* ------------------------------------------------------------ snapshot */

typedef struct entry_copy {
    uint64_t seq;
    int64_t count, enter_ns;
    uint32_t packed;
} entry_copy;

static bool read_entry(const entry *e, entry_copy *out)
{
    for (int tries = 0; tries < READ_TRIES; tries++) {
        uint_fast32_t v1 = atomic_load_explicit(&e->version, memory_order_acquire);
        if (v1 & 1)
            continue;
        out->seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
        out->count = atomic_load_explicit(&e->count, memory_order_relaxed);
        out->enter_ns = atomic_load_explicit(&e->enter_ns, memory_order_relaxed);
        out->packed = (uint32_t)atomic_load_explicit(&e->op_dtype_state, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->version, memory_order_relaxed) == v1)
            return v1 != 0 && out->seq != 0;
    }
    return false;
}

static int by_seq(const void *x, const void *y)
{
    const entry_copy *a = x, *b = y;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Appends a line if it fits whole; false when the buffer is full. */
static bool put_line(char *buf, size_t cap, size_t *used, const char *fmt, ...) PT_PRINTF(4, 5);
static bool put_line(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *used) {
        buf[*used] = '\0';
        return false;
    }
    *used += (size_t)n;
    return true;
}

static bool snapshot_group(group *g, char *buf, size_t cap, size_t *used, int64_t now_ns)
{
    entry_copy calls[PT_COLL_RING];
    size_t n = 0;
    for (size_t i = 0; i < PT_COLL_RING; i++)
        if (read_entry(&g->ring[i], &calls[n]))
            n++;
    qsort(calls, n, sizeof *calls, by_seq);
    char error[PT_COLL_ERROR_MAX];
    uint64_t error_seq;
    pthread_mutex_lock(&error_lock);
    error_seq = g->error_seq;
    memcpy(error, g->error, sizeof error);
    pthread_mutex_unlock(&error_lock);
    if (!put_line(buf, cap, used, "group\t%s\t%s\t%d\t%s\n", g->name, g->backend[0] ? g->backend : "-",
                  (int)g->size, g->ranks))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned op = calls[i].packed >> 16, dtype = (calls[i].packed >> 8) & 0xff, state = calls[i].packed & 0xff;
        int64_t age_us = now_ns > calls[i].enter_ns ? (now_ns - calls[i].enter_ns) / 1000 : 0;
        bool failed = state == PT_COLL_FAILED && calls[i].seq == error_seq && error[0];
        if (!put_line(buf, cap, used, "call\t%llu\t%s\t%lld\t%s\t%s\t%lld%s%s\n", (unsigned long long)calls[i].seq,
                      op < pt_coll_op_count ? pt_coll_op_names[op] : "unknown", (long long)calls[i].count,
                      dtype < pt_coll_dtype_count ? pt_coll_dtype_names[dtype] : "other", pt_coll_state_name((int)state),
                      (long long)age_us, failed ? "\t" : "", failed ? error : ""))
            return false;
    }
    return true;
}

/* Whether text holds the line "group<TAB>name<TAB>...". */
static bool names_group(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, "group\t", 6) == 0 && strncmp(p + 6, name, n) == 0 && p[6 + n] == '\t')
            return true;
    return false;
}

size_t pt_coll_snapshot(char *buf, size_t cap, int64_t now_ns, const char *replaced)
{
    if (!buf || cap == 0)
        return 0;
    size_t used = 0;
    buf[0] = '\0';
    int n = atomic_load_explicit(&group_count, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        group *g = &groups[i];
        if (atomic_load_explicit(&g->retired, memory_order_acquire) ||
            atomic_load_explicit(&g->next_seq, memory_order_acquire) == 0 || (replaced && names_group(replaced, g->name)))
            continue;
        size_t before = used;
        if (!snapshot_group(g, buf, cap, &used, now_ns)) {
            used = before; /* a group is shown whole or not at all */
            buf[used] = '\0';
            break;
        }
    }
    return used;
}

void pt_coll_reset(void)
{
    pthread_mutex_lock(&registry_lock);
    int n = atomic_load_explicit(&group_count, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        reset_group(&groups[i]);
    atomic_store_explicit(&group_count, 0, memory_order_release);
    atomic_store_explicit(&failure_pending, false, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}
