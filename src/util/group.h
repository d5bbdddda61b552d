/* group.h -- counting sort by key: items grouped by a small integer key (a function, a
 * metric, a node) in two linear passes, where a comparison sort would cost n log n and
 * would not keep the items' order within a key. */
#ifndef PT_UTIL_GROUP_H
#define PT_UTIL_GROUP_H

#include <stddef.h>
#include <stdint.h>

/* Groups n items by key (keys[i] < key_count), stable: out receives the items, those of
 * key 0 first, each key's in their order in items. items NULL: the items are their
 * indices (size_t, item_size ignored). Returns key_count + 1 offsets (free() them): key
 * k's items are out[first[k]] .. out[first[k + 1] - 1]. */
size_t *pt_group_by_key(const uint32_t *keys, size_t n, size_t key_count, const void *items, size_t item_size,
                        void *out);

#endif
