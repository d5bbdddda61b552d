/* names.c -- non-fatal string interning (see names.h). */
#include "collect/names.h"
#include "util/strtab.h"

#include <stdlib.h>
#include <string.h>

void pt_names_init(pt_names *t)
{
    memset(t, 0, sizeof *t);
}

void pt_names_free(pt_names *t)
{
    pt_free_strings(t->strings, t->count);
    free(t->lengths);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static size_t slot_of(const pt_names *t, const char *s, size_t n, uint64_t h)
{
    size_t mask = t->slot_count - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        uint32_t id = t->slots[i];
        if (!id || (t->lengths[id - 1] == n && memcmp(t->strings[id - 1], s, n) == 0))
            return i;
    }
}

static int grow_slots(pt_names *t)
{
    size_t count = t->slot_count ? t->slot_count * 2 : 256;
    uint32_t *slots = calloc(count, sizeof *slots);
    if (!slots)
        return -1;
    uint32_t *old = t->slots;
    size_t old_count = t->slot_count;
    t->slots = slots;
    t->slot_count = count;
    for (size_t i = 0; i < old_count; i++) {
        uint32_t id = old[i];
        if (!id)
            continue;
        const char *s = t->strings[id - 1];
        size_t n = t->lengths[id - 1];
        t->slots[slot_of(t, s, n, pt_hash_bytes(s, n))] = id;
    }
    free(old);
    return 0;
}

static int grow_strings(pt_names *t)
{
    size_t cap = t->cap ? t->cap * 2 : 256;
    char **strings = realloc(t->strings, cap * sizeof *strings);
    if (!strings)
        return -1;
    t->strings = strings;
    uint32_t *lengths = realloc(t->lengths, cap * sizeof *lengths);
    if (!lengths)
        return -1;
    t->lengths = lengths;
    t->cap = cap;
    return 0;
}

uint32_t pt_names_intern(pt_names *t, const char *s, size_t n)
{
    if ((t->count + 1) * 2 > t->slot_count && grow_slots(t) != 0)
        return PT_NAMES_NONE;
    uint64_t h = pt_hash_bytes(s, n);
    size_t slot = slot_of(t, s, n, h);
    if (t->slots[slot])
        return t->slots[slot] - 1;
    if (t->count == t->cap && grow_strings(t) != 0)
        return PT_NAMES_NONE;
    char *copy = malloc(n + 1);
    if (!copy)
        return PT_NAMES_NONE;
    memcpy(copy, s, n);
    copy[n] = '\0';
    t->strings[t->count] = copy;
    t->lengths[t->count] = (uint32_t)n;
    t->slots[slot] = (uint32_t)++t->count;
    return (uint32_t)(t->count - 1);
}
