/* cupti.h -- GPU activity through CUPTI's Activity API, loaded with dlopen.
 *
 * CUPTI fills buffers we hand it with activity records (kernels, memcpy, memset,
 * runtime and driver API calls) and gives them back on its own thread; cupti.c converts
 * each record (cupti_convert.c) into the window's GPU records. Everything is enabled only
 * while a window is open, so an idle process pays nothing, and the library is found at
 * run time (the torch wheel's nvidia/cuda_cupti, /usr/local/cuda, LD_LIBRARY_PATH), so the
 * module imports on machines without CUDA. When CUPTI's headers were absent at build
 * time, every call reports that GPU collection was not compiled in.
 *
 * Timestamps: CUPTI is asked to use our clock (cuptiActivityRegisterTimestampCallback,
 * CUDA 11.6+); with an older CUPTI its timestamps are shifted by the offset measured when
 * the window opens. */
#ifndef PT_COLLECT_CUPTI_H
#define PT_COLLECT_CUPTI_H

#include "collect/window.h"

#include <stdbool.h>

/* Whether this build can collect GPU activity at all. */
bool pt_cupti_compiled(void);
/* Starts recording into w. lib_candidates: paths or sonames to try, NULL-terminated
 * (NULL: the defaults). 0, or -1 with err saying why GPU activity is unavailable. */
int pt_cupti_start(pt_window *w, const char *const *lib_candidates, pt_error *err);
/* Stops recording new activity (training thread, at the window's end). */
void pt_cupti_stop(void);
/* Delivers what CUPTI still holds to the window, then detaches it (writer thread). */
void pt_cupti_flush(pt_window *w);
/* In a forked child: no window is attached (CUPTI itself is not usable there anyway). */
void pt_cupti_after_fork_child(void);

#endif
