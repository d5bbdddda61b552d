/* names.h -- string interning that never exits: the collector's variant of util/strtab.
 *
 * util/strtab treats running out of memory as fatal, which is right for the CLI and wrong
 * inside a training process. This table reports failure as PT_NAMES_NONE instead and
 * keeps working for the names it already holds. It hashes with util's pt_hash_bytes and
 * probes linearly in a power-of-two table kept at most half full. Not thread-safe: the
 * window guards it with a mutex (interning happens once per distinct name, never per
 * event). */
#ifndef PT_COLLECT_NAMES_H
#define PT_COLLECT_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define PT_NAMES_NONE UINT32_MAX

typedef struct pt_names {
    uint32_t *slots;     /* id + 1, 0 = empty */
    size_t slot_count;
    char **strings;      /* NUL-terminated copies */
    uint32_t *lengths;
    size_t count, cap;
} pt_names;

void pt_names_init(pt_names *t);
void pt_names_free(pt_names *t);
uint32_t pt_names_intern(pt_names *t, const char *s, size_t n);

#endif
