/* cupti.h -- GPU activity through CUPTI, loaded with dlopen.
 *
 * Two CUPTI interfaces, each for what it does cheaply:
 *   Activity API  kernels, memcpy, memset: the records the driver writes anyway. CUPTI
 *                 fills buffers from a pool we preallocate; a completed buffer is only
 *                 pushed on a lock-free list, and converted (cupti_convert.c) by the
 *                 writer thread after the window, off the training threads' path.
 *   Callback API  runtime and driver calls (cupti_api.h): kept calls recorded, the rest
 *                 only counted, none recorded twice. When another tool already owns
 *                 CUPTI's one callback subscription (torch.profiler's Kineto), the kept
 *                 runtime calls come as activity records instead (enabled one by one) and
 *                 the rest are not counted; the trace says so.
 * Everything is enabled only while a window is open, so an idle process pays nothing,
 * and the library is found at run time (the torch wheel's nvidia/cuda_cupti,
 * /usr/local/cuda, LD_LIBRARY_PATH), so the module imports on machines without CUDA.
 * When CUPTI's headers were absent at build time, every call reports that GPU collection
 * was not compiled in.
 *
 * Timestamps: CUPTI is asked to use our clock (cuptiActivityRegisterTimestampCallback,
 * CUDA 11.6+); with an older CUPTI its timestamps are shifted by the offset measured when
 * the window opens. API calls are timed by the recorder's clock, like Python calls. */
#ifndef PT_COLLECT_CUPTI_H
#define PT_COLLECT_CUPTI_H

#include "collect/window.h"

#include <stdbool.h>

typedef struct pt_cupti_config {
    const char *const *libs;   /* paths or sonames to try, NULL-terminated (NULL: defaults) */
    size_t max_api_records;    /* kept API calls per window */
    bool count_api_calls;      /* a callback on every API call, to count the ones not kept
                                  (false: callbacks on the kept calls only) */
} pt_cupti_config;

/* Whether this build can collect GPU activity at all. */
bool pt_cupti_compiled(void);
/* Starts recording into w. 0, or -1 with err saying why GPU activity is unavailable. */
int pt_cupti_start(pt_window *w, const pt_cupti_config *cfg, pt_error *err);
/* Stops recording new activity (training thread, at the window's end). */
void pt_cupti_stop(void);
/* Delivers what CUPTI still holds to the window, then detaches it (writer thread). */
void pt_cupti_flush(pt_window *w);
/* In a forked child: no window is attached (CUPTI itself is not usable there anyway). */
void pt_cupti_after_fork_child(void);

#endif
