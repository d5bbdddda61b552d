/* cupti.c -- CUPTI through dlopen (see cupti.h).
 *
 * Lifecycle: the library is loaded, the buffer callbacks registered and the buffer pool
 * allocated on the first window (once per process). Each window subscribes to the
 * runtime and driver callbacks and enables the activity kinds; its end disables them;
 * the writer thread then forces a flush (every buffer comes back), converts the
 * completed buffers and drains the API recorder into the window, and unsubscribes, so
 * another tool may subscribe between windows.
 *
 * Cost on the training threads: CUPTI's own per kernel/memcpy/memset record, plus per API
 * call one callback that counts it and, for the few kept calls, reads the clock twice
 * (cupti_api.c). Buffers come from a pool of BUFFER_COUNT preallocated ones (a malloc
 * only when CUPTI wants more), and a completed buffer costs one compare-and-swap. All
 * conversion (names, memcpy kinds, NCCL collectives) happens on the writer thread after
 * the window. */
#define _GNU_SOURCE
#include "collect/cupti.h"
#include "collect/cupti_api.h"
#include "collect/cupti_convert.h"

#ifndef PT_HAVE_CUPTI

bool pt_cupti_compiled(void) { return false; }

int pt_cupti_start(pt_window *w, const pt_cupti_config *cfg, pt_error *err)
{
    (void)w, (void)cfg;
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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* 4 MB holds ~20,000 kernel records, a few steps of a launch-bound model; CUPTI returns a
 * buffer when it is full or flushed, and asks for the next. */
#define BUFFER_BYTES (4u << 20)
#define BUFFER_COUNT 8

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
};

typedef struct activity_buffer {
    struct activity_buffer *next; /* on the completed list */
    size_t valid;
    atomic_bool busy;             /* handed to CUPTI, or waiting to be converted */
    bool pooled;
    _Alignas(16) uint8_t data[];  /* what CUPTI fills (it wants 8-byte alignment) */
} activity_buffer;

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
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    CUptiResult (*enable_runtime_api)(CUpti_CallbackId, uint8_t); /* CUDA 12.x+ */
} cupti_api;

static struct {
    pthread_mutex_t lock;          /* window lifecycle only; never taken by a callback */
    void *lib;
    cupti_api api;
    bool registered;
    bool own_clock;                /* CUPTI uses our timestamps */
    pt_window *window;             /* the window being recorded or flushed; NULL between */
    int64_t clock_offset_ns;

    pt_api_recorder recorder;
    bool recorder_ready;
    CUpti_SubscriberHandle subscriber;
    bool subscribed;               /* this window's API calls come through callbacks */
    bool count_all;                /* ... every call (else the kept ones only) */
    bool runtime_activity;         /* fallback: kept runtime calls as activity records */

    activity_buffer *pool[BUFFER_COUNT];
    _Atomic(activity_buffer *) completed; /* pushed by buffer_completed, taken by the flush */
    _Atomic uint64_t extra_buffers;       /* buffers beyond the pool (malloc'd) */
    _Atomic uint64_t dropped_records;     /* records CUPTI itself dropped */
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
    SYM(subscribe, "cuptiSubscribe");
    SYM(unsubscribe, "cuptiUnsubscribe");
    SYM(enable_domain, "cuptiEnableDomain");
    SYM(enable_callback, "cuptiEnableCallback");
    SYM(enable_runtime_api, "cuptiActivityEnableRuntimeApi");
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
            return true;
        }
        dlclose(lib);
    }
    pt_error_set(err, "libcupti was not found (looked in the torch wheel, /usr/local/cuda and the library path; "
                      "set PERFTRACKER_CUPTI_LIB)");
    return false;
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

/* ------------------------------------------------------------ activity buffers */

static activity_buffer *new_buffer(bool pooled)
{
    activity_buffer *b = NULL;
    if (posix_memalign((void **)&b, 64, sizeof *b + BUFFER_BYTES) != 0)
        return NULL;
    b->next = NULL;
    b->valid = 0;
    atomic_init(&b->busy, false);
    b->pooled = pooled;
    return b;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    activity_buffer *b = NULL;
    for (int i = 0; i < BUFFER_COUNT && !b; i++) {
        bool idle = false;
        if (g.pool[i] && atomic_compare_exchange_strong(&g.pool[i]->busy, &idle, true))
            b = g.pool[i];
    }
    if (!b && (b = new_buffer(false)) != NULL) {
        atomic_store(&b->busy, true);
        atomic_fetch_add_explicit(&g.extra_buffers, 1, memory_order_relaxed);
    }
    *buffer = b ? b->data : NULL;
    *size = b ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static activity_buffer *buffer_of(uint8_t *data)
{
    return (activity_buffer *)(data - offsetof(activity_buffer, data));
}

/* CUPTI's thread (or a flushing one): hand the buffer over and return at once. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *data, size_t size, size_t valid)
{
    (void)size;
    if (!data)
        return;
    size_t dropped = 0;
    if (g.api.dropped && g.api.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        atomic_fetch_add_explicit(&g.dropped_records, dropped, memory_order_relaxed);
    activity_buffer *b = buffer_of(data);
    b->valid = valid;
    activity_buffer *head = atomic_load_explicit(&g.completed, memory_order_relaxed);
    do
        b->next = head;
    while (!atomic_compare_exchange_weak_explicit(&g.completed, &head, b, memory_order_release,
                                                  memory_order_relaxed));
}

static void release_buffer(activity_buffer *b)
{
    if (b->pooled)
        atomic_store(&b->busy, false);
    else
        free(b);
}

static uint32_t intern_cb(void *ctx, const char *s, size_t n)
{
    return pt_window_name(ctx, s, n);
}

/* Converts the completed buffers into w (NULL: discards them), oldest first. */
static void take_completed(pt_window *w)
{
    activity_buffer *list = atomic_exchange_explicit(&g.completed, NULL, memory_order_acquire), *ordered = NULL;
    while (list) { /* the list is newest first */
        activity_buffer *next = list->next;
        list->next = ordered;
        ordered = list;
        list = next;
    }
    pt_cupti_names names = {w, intern_cb, api_name_cb};
    while (ordered) {
        activity_buffer *b = ordered;
        ordered = b->next;
        CUpti_Activity *record = NULL;
        while (w && b->valid && g.api.next_record(b->data, b->valid, &record) == CUPTI_SUCCESS) {
            pt_gpu_record r;
            if (pt_cupti_convert(record, &names, g.clock_offset_ns, &r))
                pt_window_add_gpu(w, &r);
        }
        release_buffer(b);
    }
}

/* ------------------------------------------------------------ API calls */

static bool set_runtime_activity(bool on)
{
    bool ok = g.api.enable_runtime_api != NULL;
    for (uint32_t cbid = 0; ok && cbid < PT_API_MAX_CBID - 1; cbid++)
        if (g.recorder.kept[0][cbid])
            ok = g.api.enable_runtime_api(cbid, on) == CUPTI_SUCCESS;
    return ok;
}

static void set_api_callbacks(bool on)
{
    static const CUpti_CallbackDomain domains[PT_API_DOMAINS] = {CUPTI_CB_DOMAIN_RUNTIME_API,
                                                                 CUPTI_CB_DOMAIN_DRIVER_API};
    for (int d = 0; d < PT_API_DOMAINS; d++) {
        if (g.count_all) {
            g.api.enable_domain(on, g.subscriber, domains[d]);
            continue;
        }
        for (uint32_t cbid = 0; cbid < PT_API_MAX_CBID - 1; cbid++)
            if (g.recorder.kept[d][cbid])
                g.api.enable_callback(on, g.subscriber, domains[d], cbid);
    }
}

/* Subscribes for this window's API calls, or falls back to activity records for the
 * kept runtime calls when another tool holds CUPTI's subscription. */
static void start_api(pt_window *w, const pt_cupti_config *cfg)
{
    g.subscribed = g.runtime_activity = false;
    if (!g.recorder_ready) {
        if (pt_api_recorder_init(&g.recorder, PT_MAX(cfg->max_api_records, 1)) != 0) {
            pt_window_warn(w, "CUDA API calls not recorded: out of memory for their records");
            return;
        }
        pt_api_recorder_classify(&g.recorder, api_name_cb, NULL);
        g.recorder_ready = true;
    }
    pt_api_recorder_begin(&g.recorder);
    CUptiResult rc = g.api.subscribe && g.api.enable_domain && g.api.enable_callback
                         ? g.api.subscribe(&g.subscriber, pt_cupti_api_callback, &g.recorder)
                         : CUPTI_ERROR_NOT_SUPPORTED;
    if (rc == CUPTI_SUCCESS) {
        g.subscribed = true;
        g.count_all = cfg->count_api_calls;
        set_api_callbacks(true);
        return;
    }
    if (set_runtime_activity(true)) {
        g.runtime_activity = true;
        pt_window_warn(w, "CUDA API calls beyond the kept ones are not counted, and driver calls not recorded: "
                          "another tool holds CUPTI's callback subscription (%s)", result_text(rc));
    } else {
        pt_window_warn(w, "CUDA API calls not recorded: CUPTI's callback subscription is taken (%s)",
                       result_text(rc));
    }
}

static void stop_api(void)
{
    if (g.subscribed)
        set_api_callbacks(false);
    if (g.runtime_activity)
        set_runtime_activity(false);
}

/* Writer thread, after the flush: the API records and counts into w, then let go of
 * the subscription. */
static void finish_api(pt_window *w)
{
    if (g.subscribed) {
        pt_api_totals t = pt_api_recorder_drain(&g.recorder, w, api_name_cb, NULL);
        w->api_recorded = t.recorded;
        w->api_counted = t.counted + t.nested_driver;
        if (!g.count_all)
            pt_window_warn(w, "CUDA API calls beyond the kept ones were not counted (PERFTRACKER_CUDA_API_COUNT=0)");
        g.api.unsubscribe(g.subscriber);
        g.subscribed = false;
    }
    g.runtime_activity = false;
}

/* ------------------------------------------------------------ windows */

static int setup_once(pt_error *err)
{
    if (g.registered)
        return 0;
    for (int i = 0; i < BUFFER_COUNT; i++)
        g.pool[i] = new_buffer(true); /* NULL is tolerated: CUPTI then gets malloc'd ones */
    CUptiResult rc = g.api.register_callbacks(buffer_requested, buffer_completed);
    if (rc != CUPTI_SUCCESS) {
        pt_error_set(err, "CUPTI refused our buffers: %s", result_text(rc));
        return -1;
    }
    g.own_clock = g.api.register_timestamp && g.api.register_timestamp(our_clock) == CUPTI_SUCCESS;
    g.registered = true;
    return 0;
}

int pt_cupti_start(pt_window *w, const pt_cupti_config *cfg, pt_error *err)
{
    pthread_mutex_lock(&g.lock);
    int result = -1;
    if (!load(cfg->libs, err) || setup_once(err) != 0)
        goto out;
    take_completed(NULL); /* anything CUPTI returned between windows */
    atomic_store(&g.extra_buffers, 0);
    atomic_store(&g.dropped_records, 0);
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
    start_api(w, cfg);
    g.window = w;
    result = 0;
out:
    pthread_mutex_unlock(&g.lock);
    return result;
}

void pt_cupti_stop(void)
{
    pthread_mutex_lock(&g.lock);
    if (g.window) {
        stop_api();
        for (size_t i = 0; i < PT_ARRAY_LEN(kinds); i++)
            g.api.disable(kinds[i]);
    }
    pthread_mutex_unlock(&g.lock);
}

void pt_cupti_flush(pt_window *w)
{
    pthread_mutex_lock(&g.lock);
    if (!w || g.window != w) {
        pthread_mutex_unlock(&g.lock);
        return;
    }
    /* Every buffer comes back through buffer_completed, which takes no lock. */
    g.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    take_completed(w);
    finish_api(w);
    uint64_t dropped = atomic_exchange(&g.dropped_records, 0), extra = atomic_load(&g.extra_buffers);
    if (extra)
        pt_window_fact_int(w, "cupti_extra_buffers", (int64_t)extra);
    g.window = NULL;
    pthread_mutex_unlock(&g.lock);
    pthread_mutex_lock(&w->gpu_lock);
    w->gpu_dropped += dropped;
    w->gpu_closed = true;
    pthread_mutex_unlock(&w->gpu_lock);
}

void pt_cupti_after_fork_child(void)
{
    pthread_mutex_init(&g.lock, NULL);
    g.window = NULL;
    g.subscribed = g.runtime_activity = false;
}

#endif
