/* group.c -- counting sort by key (group.h): one pass counts each key's items, one places
 * them after the keys before it. */
#include "util/group.h"
#include "util/common.h"

#include <stdlib.h>
#include <string.h>

size_t *pt_group_by_key(const uint32_t *keys, size_t n, size_t key_count, const void *items, size_t item_size,
                        void *out)
{
    size_t *first = pt_xcalloc(key_count + 1, sizeof *first);
    for (size_t i = 0; i < n; i++)
        first[keys[i] + 1]++;
    for (size_t k = 0; k < key_count; k++)
        first[k + 1] += first[k];
    size_t *next = pt_xmalloc((key_count ? key_count : 1) * sizeof *next);
    memcpy(next, first, key_count * sizeof *next);
    if (!items) {
        size_t *index = out;
        for (size_t i = 0; i < n; i++)
            index[next[keys[i]]++] = i;
    } else {
        const unsigned char *from = items;
        unsigned char *to = out;
        for (size_t i = 0; i < n; i++)
            memcpy(to + next[keys[i]]++ * item_size, from + i * item_size, item_size);
    }
    free(next);
    return first;
}
