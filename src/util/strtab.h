/* strtab.h -- string interning: each distinct string gets a dense id (0, 1, 2, ...).
 *
 * Traces repeat a few thousand names millions of times; interning turns every later
 * comparison into an integer compare and stores each name once. Open addressing with
 * linear probing on a power-of-two table, kept at most half full; strings live in large
 * chunks so interning does not call malloc per name. */
#ifndef PT_UTIL_STRTAB_H
#define PT_UTIL_STRTAB_H

#include "common.h"

typedef struct pt_strtab {
    uint32_t *slots;     /* id + 1, 0 = empty */
    size_t slot_count;   /* power of two */
    const char **strings;
    uint32_t *lengths;
    uint64_t *hashes;
    size_t count, cap;
    char *chunk;         /* current arena chunk */
    size_t chunk_used, chunk_size;
    char **chunks;
    size_t chunk_count, chunk_cap;
    size_t bytes;        /* heap held by the table, strings included (memory budgets) */
} pt_strtab;

void pt_strtab_init(pt_strtab *t);
void pt_strtab_free(pt_strtab *t);
uint32_t pt_strtab_intern(pt_strtab *t, const char *s, size_t n);
/* Returns the id of s, or UINT32_MAX when it was never interned. */
uint32_t pt_strtab_find(const pt_strtab *t, const char *s, size_t n);
static inline const char *pt_strtab_get(const pt_strtab *t, uint32_t id) { return t->strings[id]; }
static inline size_t pt_strtab_len(const pt_strtab *t, uint32_t id) { return t->lengths[id]; }

/* At most what interning `count` strings that t does not hold yet, of `bytes` bytes in
 * all, allocates: their copies (a new chunk, and as much again wasted at chunk ends at
 * most), the arrays and the slots doubled (the old beside the new while copied), malloc's
 * own bytes beside each. For callers that count memory before they use it. */
size_t pt_strtab_growth_bound(const pt_strtab *t, size_t count, size_t bytes);

uint64_t pt_hash_bytes(const void *data, size_t n);

#endif
