/* timeline.h -- sets of time intervals, and the one question the analysis keeps asking:
 * "how much of [a, b) is covered by this set?".
 *
 * A timeline is sorted, merged, and carries prefix sums of its lengths, so coverage of
 * any span is two binary searches: O(log n). That is what makes bottleneck ratios (time
 * not hidden under higher-priority activity) cheap for millions of events. */
#ifndef PT_SUMMARIZE_TIMELINE_H
#define PT_SUMMARIZE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pt_interval {
    int64_t start, end; /* [start, end) */
} pt_interval;

typedef struct pt_timeline {
    pt_interval *spans; /* sorted, disjoint, non-adjacent */
    int64_t *prefix;    /* prefix[i] = total length of spans[0..i) */
    size_t count;
} pt_timeline;

/* Builds a timeline from arbitrary intervals (sorted here; empty ones dropped). */
void pt_timeline_build(pt_timeline *t, const pt_interval *intervals, size_t n);
/* out = a ∪ b. */
void pt_timeline_union(pt_timeline *out, const pt_timeline *a, const pt_timeline *b);
/* out = a \ b: the time a covers and b does not. */
void pt_timeline_subtract(pt_timeline *out, const pt_timeline *a, const pt_timeline *b);
/* Length of timeline ∩ [a, b). */
int64_t pt_timeline_covered(const pt_timeline *t, int64_t a, int64_t b);
int64_t pt_timeline_total(const pt_timeline *t);
void pt_timeline_free(pt_timeline *t);

/* Stable LSD radix sort of n 64-bit keys: on return order[] holds the indices 0..n-1 in
 * key order. Passes cover only the bits the largest key uses. order must hold n
 * entries; scratch is allocated internally. Linear time, which matters because traces
 * arrive only partly sorted and hold millions of events. */
void pt_radix_order(const uint64_t *keys, size_t n, uint32_t *order);
/* Same, but refines an existing order (stable): sorts order[] by keys[order[i]]. Used to
 * sort by several keys, least significant first. */
void pt_radix_reorder(const uint64_t *keys, size_t n, uint32_t *order);

#endif
