/* cupti.c -- CUPTI Activity API through dlopen (see cupti.h).
 *
 * Lifecycle: the library is loaded and the buffer callbacks registered on the first
 * window (once per process; CUPTI allows one subscriber). Each window enables the
 * activity kinds, and disables them at its end; the writer thread then forces a flush,
 * which hands every pending buffer to buffer_completed, and detaches the window. Buffers
 * that CUPTI returns later (nothing is attached) are freed unread.
 *
 * Cost: CUPTI's own (records are written by the driver); ours is one conversion per
 * record on CUPTI's thread, plus one lock per buffer (8 MB, thousands of records). */
#define _GNU_SOURCE
#include "collect/cupti.h"
#include "collect/cupti_convert.h"

#ifndef PT_HAVE_CUPTI

bool pt_cupti_compiled(void) { return false; }

int pt_cupti_start(pt_window *w, const char *const *lib_candidates, pt_error *err)
{
    (void)w, (void)lib_candidates;
    pt_error_set(err, "this build has no CUPTI support (CUPTI headers were not found when it was compiled)");
    return -1;
}

void pt_cupti_stop(void) {}
void pt_cupti_flush(pt_window *w) { (void)w; }
void pt_cupti_after_fork_child(void) {}

#else

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES (8u << 20)
#define BUFFER_ALIGN 8

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
};

typedef struct cupti_api {
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
    CUptiResult (*timestamp)(uint64_t *);
    CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);
    CUptiResult (*result_string)(CUptiResult, const char **);
} cupti_api;

static struct {
    pthread_mutex_t lock;   /* guards window and the fields below it */
    void *lib;
    cupti_api api;
    bool registered;
    bool own_clock;         /* CUPTI uses our timestamps */
    pt_window *window;      /* where completed buffers go; NULL between windows */
    int64_t clock_offset_ns;
    char *(*cxa_demangle)(const char *, char *, size_t *, int *);
} g = {PTHREAD_MUTEX_INITIALIZER};

bool pt_cupti_compiled(void) { return true; }

static uint64_t CUPTIAPI our_clock(void)
{
    return (uint64_t)pt_now_ns();
}

static const char *result_text(CUptiResult rc)
{
    const char *s = NULL;
    if (g.api.result_string)
        g.api.result_string(rc, &s);
    return s ? s : "CUPTI error";
}

/* ------------------------------------------------------------ loading */

static bool resolve(void *lib)
{
    cupti_api *a = &g.api;
#define SYM(field, name) *(void **)(&a->field) = dlsym(lib, name)
    SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    SYM(enable, "cuptiActivityEnable");
    SYM(disable, "cuptiActivityDisable");
    SYM(flush_all, "cuptiActivityFlushAll");
    SYM(next_record, "cuptiActivityGetNextRecord");
    SYM(dropped, "cuptiActivityGetNumDroppedRecords");
    SYM(callback_name, "cuptiGetCallbackName");
    SYM(timestamp, "cuptiGetTimestamp");
    SYM(register_timestamp, "cuptiActivityRegisterTimestampCallback");
    SYM(result_string, "cuptiGetResultString");
#undef SYM
    return a->register_callbacks && a->enable && a->disable && a->flush_all && a->next_record && a->timestamp;
}

static bool load(const char *const *candidates, pt_error *err)
{
    static const char *const defaults[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12",
                                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                                           "/usr/local/cuda/lib64/libcupti.so", NULL};
    static const char *const loaded_names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8",
                                               "libcupti.so", NULL};
    if (g.lib)
        return true;
    /* A CUPTI already in the process (torch's Kineto links one) must be the one we use:
     * two copies would fight over the same driver callbacks. */
    for (const char *const *name = loaded_names; *name; name++) {
        void *lib = dlopen(*name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib && resolve(lib)) {
            g.lib = lib;
            *(void **)(&g.cxa_demangle) = dlsym(RTLD_DEFAULT, "__cxa_demangle");
            return true;
        }
        if (lib)
            dlclose(lib);
    }
    const char *const *list = candidates && candidates[0] ? candidates : defaults;
    for (; *list; list++) {
        void *lib = dlopen(*list, RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            continue;
        if (resolve(lib)) {
            g.lib = lib;
            *(void **)(&g.cxa_demangle) = dlsym(RTLD_DEFAULT, "__cxa_demangle");
            return true;
        }
        dlclose(lib);
    }
    pt_error_set(err, "libcupti was not found (looked in the torch wheel, /usr/local/cuda and the library path; "
                      "set PERFTRACKER_CUPTI_LIB)");
    return false;
}

/* ------------------------------------------------------------ buffers */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, BUFFER_ALIGN, BUFFER_BYTES) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static uint32_t intern_cb(void *ctx, const char *s, size_t n)
{
    return pt_window_name(ctx, s, n);
}

static const char *api_name_cb(void *ctx, int domain, uint32_t cbid)
{
    (void)ctx;
    const char *name = NULL;
    if (!g.api.callback_name ||
        g.api.callback_name(domain ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) !=
            CUPTI_SUCCESS)
        return NULL;
    return name;
}

static char *demangle_cb(void *ctx, const char *mangled)
{
    (void)ctx;
    if (!g.cxa_demangle || strncmp(mangled, "_Z", 2) != 0)
        return NULL;
    int status = -1;
    char *out = g.cxa_demangle(mangled, NULL, NULL, &status);
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    pthread_mutex_lock(&g.lock);
    pt_window *w = g.window;
    if (w && valid > 0) {
        pt_cupti_names names = {w, intern_cb, api_name_cb, demangle_cb};
        CUpti_Activity *record = NULL;
        while (g.api.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
            pt_gpu_record r;
            if (pt_cupti_convert(record, &names, g.clock_offset_ns, &r))
                pt_window_add_gpu(w, &r);
        }
        size_t dropped = 0;
        if (g.api.dropped && g.api.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
            pthread_mutex_lock(&w->gpu_lock);
            w->gpu_dropped += dropped;
            pthread_mutex_unlock(&w->gpu_lock);
        }
    }
    pthread_mutex_unlock(&g.lock);
    (void)size;
    free(buffer);
}

/* ------------------------------------------------------------ windows */

static int setup_once(pt_error *err)
{
    if (g.registered)
        return 0;
    CUptiResult rc = g.api.register_callbacks(buffer_requested, buffer_completed);
    if (rc != CUPTI_SUCCESS) {
        pt_error_set(err, "CUPTI refused our buffers: %s", result_text(rc));
        return -1;
    }
    g.own_clock = g.api.register_timestamp && g.api.register_timestamp(our_clock) == CUPTI_SUCCESS;
    g.registered = true;
    return 0;
}

int pt_cupti_start(pt_window *w, const char *const *lib_candidates, pt_error *err)
{
    pthread_mutex_lock(&g.lock);
    int result = -1;
    if (!load(lib_candidates, err) || setup_once(err) != 0)
        goto out;
    g.clock_offset_ns = 0;
    if (!g.own_clock) {
        uint64_t theirs = 0;
        if (g.api.timestamp(&theirs) == CUPTI_SUCCESS)
            g.clock_offset_ns = pt_now_ns() - (int64_t)theirs;
    }
    for (size_t i = 0; i < PT_ARRAY_LEN(kinds); i++) {
        CUptiResult rc = g.api.enable(kinds[i]);
        if (rc != CUPTI_SUCCESS) {
            pt_error_set(err, "CUPTI cannot record GPU activity: %s", result_text(rc));
            for (size_t j = 0; j < i; j++)
                g.api.disable(kinds[j]);
            goto out;
        }
    }
    g.window = w;
    result = 0;
out:
    pthread_mutex_unlock(&g.lock);
    return result;
}

void pt_cupti_stop(void)
{
    pthread_mutex_lock(&g.lock);
    bool active = g.window != NULL;
    pthread_mutex_unlock(&g.lock);
    if (!active)
        return;
    for (size_t i = 0; i < PT_ARRAY_LEN(kinds); i++)
        g.api.disable(kinds[i]);
}

void pt_cupti_flush(pt_window *w)
{
    pthread_mutex_lock(&g.lock);
    bool ours = g.window == w && w;
    pthread_mutex_unlock(&g.lock);
    if (!ours)
        return;
    /* Outside our lock: the flush calls buffer_completed, which takes it. */
    g.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&g.lock);
    g.window = NULL;
    pthread_mutex_unlock(&g.lock);
    pthread_mutex_lock(&w->gpu_lock);
    w->gpu_closed = true;
    pthread_mutex_unlock(&w->gpu_lock);
}

void pt_cupti_after_fork_child(void)
{
    pthread_mutex_init(&g.lock, NULL);
    g.window = NULL;
}

#endif
