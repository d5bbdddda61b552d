/* timeline.c -- interval sets with prefix sums, and a radix sort for building them. */
#include "summarize/timeline.h"
#include "util/common.h"

#include <stdlib.h>
#include <string.h>

void pt_radix_reorder(const uint64_t *keys, size_t n, uint32_t *order)
{
    if (n < 2)
        return;
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        max |= keys[order[i]];
    /* 16-bit digits: 4 passes over 64-bit keys, each also clearing and summing 65536
     * counters. Below that many keys the counters cost more than the passes, and 8-bit
     * digits (twice the passes, 256 counters) are cheaper. Same stable order either way. */
    int bits = n < 65536 ? 8 : 16;
    size_t digits = (size_t)1 << bits, mask = digits - 1;
    uint32_t *tmp = pt_xmalloc(n * sizeof *tmp);
    size_t *count = pt_xmalloc(digits * sizeof *count);
    for (int shift = 0; shift < 64 && (max >> shift) != 0; shift += bits) {
        memset(count, 0, digits * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[(keys[order[i]] >> shift) & mask]++;
        size_t sum = 0;
        for (size_t d = 0; d < digits; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(keys[order[i]] >> shift) & mask]++] = order[i];
        memcpy(order, tmp, n * sizeof *order);
    }
    free(count);
    free(tmp);
}

void pt_radix_order(const uint64_t *keys, size_t n, uint32_t *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    /* Already sorted input (common: one stream's kernels) costs one pass. */
    size_t i = 1;
    while (i < n && keys[i - 1] <= keys[i])
        i++;
    if (i < n)
        pt_radix_reorder(keys, n, order);
}

static void finish_prefix(pt_timeline *t)
{
    t->prefix = pt_xmalloc((t->count + 1) * sizeof *t->prefix);
    t->prefix[0] = 0;
    for (size_t i = 0; i < t->count; i++)
        t->prefix[i + 1] = t->prefix[i] + (t->spans[i].end - t->spans[i].start);
}

/* Adds iv to the spans, which it follows in start order: joined to the last span when
 * they overlap or touch, else a span of its own. */
static void append_span(pt_timeline *t, const pt_interval *iv)
{
    pt_interval *last = t->count ? &t->spans[t->count - 1] : NULL;
    if (last && iv->start <= last->end)
        last->end = PT_MAX(last->end, iv->end);
    else
        t->spans[t->count++] = *iv;
}

void pt_timeline_build(pt_timeline *t, const pt_interval *intervals, size_t n)
{
    memset(t, 0, sizeof *t);
    t->spans = pt_xmalloc((n ? n : 1) * sizeof *t->spans);
    if (n) {
        int64_t min = intervals[0].start;
        for (size_t i = 1; i < n; i++)
            min = PT_MIN(min, intervals[i].start);
        uint64_t *keys = pt_xmalloc(n * sizeof *keys);
        uint32_t *order = pt_xmalloc(n * sizeof *order);
        for (size_t i = 0; i < n; i++)
            keys[i] = (uint64_t)(intervals[i].start - min);
        pt_radix_order(keys, n, order);
        for (size_t k = 0; k < n; k++) {
            const pt_interval *iv = &intervals[order[k]];
            if (iv->end > iv->start)
                append_span(t, iv);
        }
        free(keys);
        free(order);
    }
    finish_prefix(t);
}

void pt_timeline_union(pt_timeline *out, const pt_timeline *a, const pt_timeline *b)
{
    memset(out, 0, sizeof *out);
    out->spans = pt_xmalloc((a->count + b->count + 1) * sizeof *out->spans);
    size_t i = 0, j = 0;
    while (i < a->count || j < b->count) {
        const pt_interval *next;
        if (j >= b->count || (i < a->count && a->spans[i].start <= b->spans[j].start))
            next = &a->spans[i++];
        else
            next = &b->spans[j++];
        append_span(out, next);
    }
    finish_prefix(out);
}

void pt_timeline_subtract(pt_timeline *out, const pt_timeline *a, const pt_timeline *b)
{
    memset(out, 0, sizeof *out);
    /* Each span of b splits at most one span of a in two: a's count plus b's bounds it. */
    out->spans = pt_xmalloc((a->count + b->count + 1) * sizeof *out->spans);
    size_t j = 0;
    for (size_t i = 0; i < a->count; i++) {
        int64_t start = a->spans[i].start, end = a->spans[i].end;
        while (j < b->count && b->spans[j].end <= start)
            j++;
        for (size_t k = j; k < b->count && b->spans[k].start < end; k++) {
            if (b->spans[k].start > start)
                out->spans[out->count++] = (pt_interval){start, b->spans[k].start};
            start = PT_MAX(start, b->spans[k].end);
        }
        if (end > start)
            out->spans[out->count++] = (pt_interval){start, end};
    }
    finish_prefix(out);
}

/* Length covered in (-inf, x). */
static int64_t covered_before(const pt_timeline *t, int64_t x)
{
    /* First span with start >= x. */
    size_t lo = 0, hi = t->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->spans[mid].start < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const pt_interval *prev = &t->spans[lo - 1];
    int64_t partial = prev->end < x ? prev->end - prev->start : x - prev->start;
    return t->prefix[lo - 1] + partial;
}

int64_t pt_timeline_covered(const pt_timeline *t, int64_t a, int64_t b)
{
    if (b <= a || t->count == 0)
        return 0;
    return covered_before(t, b) - covered_before(t, a);
}

int64_t pt_timeline_total(const pt_timeline *t)
{
    return t->prefix ? t->prefix[t->count] : 0;
}

void pt_timeline_free(pt_timeline *t)
{
    free(t->spans);
    free(t->prefix);
    memset(t, 0, sizeof *t);
}
