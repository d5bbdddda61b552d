/* strtab.c -- string interning (see strtab.h). */
#include "strtab.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

#define CHUNK_SIZE (64 * 1024) /* strings are copied into chunks of this size (or their own) */
#define HEAP_EXTRA 4096         /* malloc's header and rounding: a page for a block it maps */

uint64_t pt_hash_bytes(const void *data, size_t n)
{
    /* Multiply-xor over 8-byte words; long names (C++ kernel signatures run to hundreds
     * of bytes) go through four independent lanes so the multiplies overlap. Good enough
     * for a table kept half empty; not for adversaries, who only get slower lookups. */
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    if (n >= 32) {
        uint64_t a = h, b = h ^ 0x9e3779b97f4a7c15ULL, c = h ^ 0xc2b2ae3d27d4eb4fULL, d = h ^ 0x165667b19e3779f9ULL;
        while (n >= 32) {
            a = (a ^ load64(p)) * 0x100000001b3ULL;
            b = (b ^ load64(p + 8)) * 0x100000001b3ULL;
            c = (c ^ load64(p + 16)) * 0x100000001b3ULL;
            d = (d ^ load64(p + 24)) * 0x100000001b3ULL;
            a ^= a >> 29, b ^= b >> 29, c ^= c >> 29, d ^= d >> 29;
            p += 32, n -= 32;
        }
        h = mix(a) ^ mix(b + 1) ^ mix(c + 2) ^ mix(d + 3);
    }
    while (n >= 8) {
        h = (h ^ load64(p)) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8, n -= 8;
    }
    while (n--)
        h = (h ^ *p++) * 0x100000001b3ULL;
    return mix(h);
}

void pt_strtab_init(pt_strtab *t)
{
    memset(t, 0, sizeof *t);
    t->slot_count = 1024;
    t->slots = pt_xcalloc(t->slot_count, sizeof *t->slots);
    t->bytes = t->slot_count * sizeof *t->slots;
}

void pt_strtab_free(pt_strtab *t)
{
    pt_free_strings(t->chunks, t->chunk_count);
    free(t->slots);
    free(t->strings);
    free(t->lengths);
    free(t->hashes);
    memset(t, 0, sizeof *t);
}

static char *arena_copy(pt_strtab *t, const char *s, size_t n)
{
    if (t->chunk_used + n + 1 > t->chunk_size) {
        size_t size = n + 1 > CHUNK_SIZE ? n + 1 : CHUNK_SIZE;
        PT_GROW(t->chunks, t->chunk_cap, t->chunk_count + 1);
        t->chunk = t->chunks[t->chunk_count++] = pt_xmalloc(size);
        t->bytes += size + sizeof *t->chunks;
        t->chunk_size = size;
        t->chunk_used = 0;
    }
    char *d = t->chunk + t->chunk_used;
    memcpy(d, s, n);
    d[n] = '\0';
    t->chunk_used += n + 1;
    return d;
}

size_t pt_strtab_growth_bound(const pt_strtab *t, size_t count, size_t bytes)
{
    if (!count)
        return 0;
    size_t need = t->count + count, cap = t->cap ? t->cap : 8, slots = t->slot_count;
    while (cap < need)
        cap *= 2;
    while (2 * need > slots)
        slots *= 2;
    size_t arrays = need > t->cap ? (cap + t->cap) * (sizeof *t->strings + sizeof *t->lengths + sizeof *t->hashes) +
                                        3 * HEAP_EXTRA : 0;
    size_t table = slots > t->slot_count ? 2 * slots * sizeof *t->slots + HEAP_EXTRA : 0;
    bool fit = bytes + count <= t->chunk_size - t->chunk_used; /* copied into the current chunk */
    size_t copies = fit ? 0 : CHUNK_SIZE + 2 * (bytes + count) + count * 32 + HEAP_EXTRA; /* a chunk each, at worst */
    return arrays + table + copies;
}

static void rehash(pt_strtab *t)
{
    size_t count = t->slot_count * 2;
    uint32_t *slots = pt_xcalloc(count, sizeof *slots);
    for (size_t id = 0; id < t->count; id++) {
        size_t i = t->hashes[id] & (count - 1);
        while (slots[i])
            i = (i + 1) & (count - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->bytes += (count - t->slot_count) * sizeof *slots;
    t->slot_count = count;
}

static size_t probe(const pt_strtab *t, const char *s, size_t n, uint64_t h)
{
    size_t i = h & (t->slot_count - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        if (t->hashes[id] == h && t->lengths[id] == n && memcmp(t->strings[id], s, n) == 0)
            return i;
        i = (i + 1) & (t->slot_count - 1);
    }
    return i;
}

uint32_t pt_strtab_find(const pt_strtab *t, const char *s, size_t n)
{
    size_t i = probe(t, s, n, pt_hash_bytes(s, n));
    return t->slots[i] ? t->slots[i] - 1 : UINT32_MAX;
}

uint32_t pt_strtab_intern(pt_strtab *t, const char *s, size_t n)
{
    uint64_t h = pt_hash_bytes(s, n);
    size_t i = probe(t, s, n, h);
    if (t->slots[i])
        return t->slots[i] - 1;
    size_t cap = t->cap;
    PT_GROW(t->strings, t->cap, t->count + 1);
    if (t->cap != cap) {
        t->lengths = pt_xrealloc(t->lengths, t->cap * sizeof *t->lengths);
        t->hashes = pt_xrealloc(t->hashes, t->cap * sizeof *t->hashes);
        t->bytes += (t->cap - cap) * (sizeof *t->strings + sizeof *t->lengths + sizeof *t->hashes);
    }
    uint32_t id = (uint32_t)t->count++;
    t->strings[id] = arena_copy(t, s, n);
    t->lengths[id] = (uint32_t)n;
    t->hashes[id] = h;
    t->slots[i] = id + 1;
    if (t->count * 2 > t->slot_count)
        rehash(t);
    return id;
}
