/* funcs.c -- the callable -> name table (see funcs.h). */
#include "collect/funcs.h"

#include <stdlib.h>
#include <string.h>

int pt_functab_init(pt_functab *t, size_t expected)
{
    size_t n = 1024;
    while (n < expected * 2)
        n *= 2;
    t->slots = calloc(n, sizeof *t->slots);
    t->mask = t->slots ? n - 1 : 0;
    t->count = 0;
    return t->slots ? 0 : -1;
}

void pt_functab_free(pt_functab *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static void insert(pt_func_slot *slots, size_t mask, const void *key, const void *key2, uint32_t name)
{
    size_t i = pt_functab_hash(key, key2) & mask;
    while (slots[i].key && !(slots[i].key == key && slots[i].key2 == key2))
        i = (i + 1) & mask;
    slots[i] = (pt_func_slot){key, key2, name};
}

int pt_functab_add(pt_functab *t, const void *key, const void *key2, uint32_t name)
{
    if ((t->count + 1) * 2 > t->mask + 1) {
        size_t n = (t->mask + 1) * 2;
        pt_func_slot *slots = calloc(n, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i <= t->mask; i++)
            if (t->slots[i].key)
                insert(slots, n - 1, t->slots[i].key, t->slots[i].key2, t->slots[i].name);
        free(t->slots);
        t->slots = slots;
        t->mask = n - 1;
    }
    insert(t->slots, t->mask, key, key2, name);
    t->count++;
    return 0;
}
