/* funcs.h -- which name a callable has: (code object | method def, type) -> name id.
 *
 * The profile hook sees a code object (Python function) or a C function's method
 * definition and bound type on every call. Building "file.py: f" from them takes Python
 * API calls and string formatting, so it happens once per distinct callable; after that
 * a call costs one hash probe on two pointers. The keys stay valid because the hook holds
 * a reference to every code object and type it names until the window ends.
 *
 * Only the thread holding the GIL touches the table, so it needs no lock. Growth is the
 * only allocation, once per doubling; if it fails, the callable is named by the
 * caller's fallback instead. */
#ifndef PT_COLLECT_FUNCS_H
#define PT_COLLECT_FUNCS_H

#include <stddef.h>
#include <stdint.h>

#define PT_FUNC_NONE UINT32_MAX

typedef struct pt_func_slot {
    const void *key, *key2;
    uint32_t name;
} pt_func_slot;

typedef struct pt_functab {
    pt_func_slot *slots;
    size_t mask;      /* slot count - 1 */
    size_t count;
} pt_functab;

int pt_functab_init(pt_functab *t, size_t expected);
void pt_functab_free(pt_functab *t);
/* 0, or -1 when the table could not grow (the entry is then not remembered). */
int pt_functab_add(pt_functab *t, const void *key, const void *key2, uint32_t name);

static inline size_t pt_functab_hash(const void *key, const void *key2)
{
    uint64_t h = ((uint64_t)(uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ULL;
    h ^= ((uint64_t)(uintptr_t)key2 >> 4) * 0xC2B2AE3D27D4EB4FULL;
    return (size_t)(h ^ (h >> 29));
}

static inline uint32_t pt_functab_find(const pt_functab *t, const void *key, const void *key2)
{
    for (size_t i = pt_functab_hash(key, key2) & t->mask;; i = (i + 1) & t->mask) {
        const pt_func_slot *s = &t->slots[i];
        if (s->key == key && s->key2 == key2)
            return s->name;
        if (!s->key)
            return PT_FUNC_NONE;
    }
}

#endif
