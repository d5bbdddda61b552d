/* parallel.h -- a loop over indices on several threads, for the reduce's per-worker and
 * per-part work (`analyze -j`). Each index runs once, on whichever thread takes it; the
 * body writes only what belongs to its index, so the results are the same at any thread
 * count and in any order of running. */
#ifndef PT_UTIL_PARALLEL_H
#define PT_UTIL_PARALLEL_H

#include <stddef.h>

/* body(ctx, i) for every i in [0, n), on up to `threads` threads, the caller's among them
 * (threads <= 1: the caller's alone, in order). Indices are taken off a shared counter in
 * runs of `run` (>= 1: fewer trips to the counter for cheap bodies). A thread that cannot
 * start leaves its indices to the others. Returns once every body has returned. */
void pt_parallel_for(size_t n, int threads, size_t run, void (*body)(void *ctx, size_t i), void *ctx);

#endif
