/* cupti_api.c -- CUDA API calls: the callback's hot path, the kept-call filter and the
 * drain (see cupti_api.h). Independent of CUPTI except for the callback's signature, so
 * tests drive it with synthetic calls on any machine. */
#define _GNU_SOURCE
#include "collect/cupti_api.h"
#include "collect/cupti_convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PT_API_VALID 0x80000000u

/* ------------------------------------------------------------ which calls are kept */

bool pt_cuda_api_kept(const char *name)
{
    /* Prefixes, so per-thread-stream variants (_ptsz, _ptds), versions (_v2, _v7000) and
     * the Async/2D/3D/Peer/Ex families come along. */
    static const char *const prefixes[] = {
        "cudaLaunch",  "cuLaunch",   "cudaGraphLaunch",     "cuGraphLaunch",     /* launches */
        "cudaMemcpy",  "cuMemcpy",   "cudaMemset",          "cuMemset",          /* copies, sets */
        "cudaStreamWaitEvent",       "cuStreamWaitEvent",   "cuStreamWaitValue", /* waits */
        "cudaMalloc",  "cudaFree",   "cudaHostAlloc",       "cuMemAlloc",        /* memory */
        "cuMemFree",   "cuMemHostAlloc", "cuMemCreate",     "cuMemRelease",
    };
    if (!name)
        return false;
    if (strstr(name, "Synchronize")) /* device, stream, event, context */
        return true;
    for (size_t i = 0; i < PT_ARRAY_LEN(prefixes); i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------ set-up */

int pt_api_recorder_init(pt_api_recorder *r, size_t max_records)
{
    memset(r, 0, sizeof *r);
    r->chunk_count = PT_MAX((max_records + PT_API_CHUNK_RECORDS - 1) / PT_API_CHUNK_RECORDS, 1);
    /* calloc: untouched pages cost no memory until a window uses them. */
    r->records = calloc(r->chunk_count * PT_API_CHUNK_RECORDS, sizeof *r->records);
    r->threads = calloc(PT_API_MAX_THREADS, sizeof *r->threads);
    if (!r->records || !r->threads) {
        pt_api_recorder_free(r);
        return -1;
    }
    atomic_init(&r->generation, 0); /* no thread matches before the first window */
    return 0;
}

void pt_api_recorder_free(pt_api_recorder *r)
{
    free(r->records);
    free(r->threads);
    r->records = NULL;
    r->threads = NULL;
}

void pt_api_recorder_classify(pt_api_recorder *r, const char *(*name)(void *ctx, int domain, uint32_t cbid),
                              void *ctx)
{
    for (int d = 0; d < PT_API_DOMAINS; d++)
        for (uint32_t cbid = 0; cbid < PT_API_MAX_CBID - 1; cbid++)
            r->kept[d][cbid] = pt_cuda_api_kept(name(ctx, d, cbid));
}

/* Generations are unique across recorders, so a thread-local naming a freed recorder's
 * slot never matches a later recorder that happens to live at the same address. */
static atomic_uint next_generation = 1;

void pt_api_recorder_begin(pt_api_recorder *r)
{
    unsigned generation = atomic_fetch_add_explicit(&next_generation, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&r->generation, generation, memory_order_release);
}

/* ------------------------------------------------------------ the hot path */

/* Which recorder and window generation this thread's slot belongs to. */
static _Thread_local struct {
    const pt_api_recorder *owner;
    unsigned generation;
    pt_api_thread *slot;
} tls;

static inline void bump32(_Atomic uint32_t *c)
{
    /* One writer per counter (its thread): a plain increment, atomic only so the drain
     * may read it. */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static inline void bump64(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* The calling thread's slot in this window, claimed on its first call; NULL when the
 * slots ran out (the call is then only counted in r->refused). */
static pt_api_thread *claim_slot(pt_api_recorder *r, unsigned generation)
{
    tls.owner = r;
    tls.generation = generation;
    unsigned index = atomic_fetch_add_explicit(&r->threads_used, 1, memory_order_relaxed);
    tls.slot = index < PT_API_MAX_THREADS ? &r->threads[index] : NULL;
    if (tls.slot) {
        tls.slot->tid = (int64_t)syscall(SYS_gettid);
        tls.slot->runtime_depth = 0;
        tls.slot->next = tls.slot->limit = NULL;
    }
    return tls.slot;
}

static inline pt_api_thread *current_slot(pt_api_recorder *r, bool claim)
{
    unsigned generation = atomic_load_explicit(&r->generation, memory_order_acquire);
    if (PT_LIKELY(tls.owner == r && tls.generation == generation))
        return tls.slot;
    return claim ? claim_slot(r, generation) : NULL;
}

static pt_api_record *reserve(pt_api_recorder *r, pt_api_thread *t)
{
    if (PT_UNLIKELY(t->next == t->limit)) {
        size_t chunk = atomic_fetch_add_explicit(&r->next_chunk, 1, memory_order_relaxed);
        if (chunk >= r->chunk_count)
            return NULL;
        t->next = r->records + chunk * PT_API_CHUNK_RECORDS;
        t->limit = t->next + PT_API_CHUNK_RECORDS;
    }
    return t->next++;
}

void pt_api_enter(pt_api_recorder *r, int domain, uint32_t cbid, uint64_t *correlation)
{
    *correlation = 0;
    pt_api_thread *t = current_slot(r, true);
    if (PT_UNLIKELY(!t)) {
        atomic_fetch_add_explicit(&r->refused, 1, memory_order_relaxed);
        return;
    }
    if (domain == 1 && t->runtime_depth > 0) {
        bump64(&t->nested_driver); /* the runtime call around it is the one that counts */
        return;
    }
    if (domain == 0)
        t->runtime_depth++;
    uint32_t id = cbid < PT_API_MAX_CBID ? cbid : PT_API_MAX_CBID - 1;
    bump32(&t->counts[domain][id]);
    if (!r->kept[domain][id])
        return;
    pt_api_record *rec = reserve(r, t);
    if (PT_UNLIKELY(!rec)) {
        bump64(&t->dropped);
        return;
    }
    rec->start = pt_ticks();
    rec->tid = t->tid;
    atomic_store_explicit(&rec->end, 0, memory_order_relaxed);
    atomic_store_explicit(&rec->what, PT_API_VALID | (uint32_t)domain << 16 | id, memory_order_release);
    *correlation = (uint64_t)(uintptr_t)rec;
}

void pt_api_exit(pt_api_recorder *r, int domain, uint32_t cbid, uint64_t *correlation)
{
    (void)cbid;
    pt_api_thread *t = current_slot(r, false);
    if (PT_UNLIKELY(!t))
        return; /* entered in an earlier window, or the thread has no slot */
    if (domain == 1 && t->runtime_depth > 0)
        return; /* nested: counted on entry */
    if (domain == 0 && t->runtime_depth > 0)
        t->runtime_depth--;
    pt_api_record *rec = (pt_api_record *)(uintptr_t)*correlation;
    if (rec)
        atomic_store_explicit(&rec->end, pt_ticks(), memory_order_release);
}

#ifdef PT_HAVE_CUPTI
void CUPTIAPI pt_cupti_api_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                    const void *cbdata)
{
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
        return;
    const CUpti_CallbackData *call = cbdata;
    int d = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if (call->callbackSite == CUPTI_API_ENTER)
        pt_api_enter(userdata, d, cbid, call->correlationData);
    else
        pt_api_exit(userdata, d, cbid, call->correlationData);
}
#endif

/* ------------------------------------------------------------ the drain */

static const char *api_name(const char *(*name)(void *, int, uint32_t), void *ctx, int domain, uint32_t cbid,
                            char *fallback, size_t cap, size_t *len)
{
    const char *s = name ? name(ctx, domain, cbid) : NULL;
    if (!s) {
        snprintf(fallback, cap, "%s API %u", domain ? "driver" : "runtime", (unsigned)cbid);
        s = fallback;
    }
    *len = pt_cuda_api_name_len(s);
    return s;
}

static void drain_records(pt_api_recorder *r, pt_window *w, const char *(*name)(void *, int, uint32_t), void *ctx,
                          pt_api_totals *totals)
{
    size_t chunks = PT_MIN(atomic_load_explicit(&r->next_chunk, memory_order_acquire), r->chunk_count);
    uint32_t ids[PT_API_DOMAINS][PT_API_MAX_CBID]; /* name id per callback id, interned once */
    memset(ids, 0xff, sizeof ids);
    for (size_t i = 0; i < chunks * PT_API_CHUNK_RECORDS; i++) {
        pt_api_record *rec = &r->records[i];
        uint32_t what = atomic_load_explicit(&rec->what, memory_order_acquire);
        if (!(what & PT_API_VALID))
            continue;
        int domain = (int)(what >> 16 & 1);
        uint32_t cbid = what & 0xffff;
        if (ids[domain][cbid] == UINT32_MAX) {
            char fallback[48];
            size_t len;
            const char *s = api_name(name, ctx, domain, cbid, fallback, sizeof fallback, &len);
            ids[domain][cbid] = pt_window_name(w, s, len);
        }
        int64_t end = atomic_load_explicit(&rec->end, memory_order_acquire);
        pt_gpu_record g;
        memset(&g, 0, sizeof g);
        g.kind = PT_EVENT_RUNTIME;
        g.start_ns = pt_window_ticks_to_ns(w, rec->start);
        g.end_ns = pt_window_ticks_to_ns(w, end ? end : PT_MAX(w->tick_end, rec->start));
        g.stream = rec->tid;
        g.device = -1;
        g.name = ids[domain][cbid];
        g.coll_name = PT_NAMES_NONE;
        if (g.name != PT_NAMES_NONE && g.end_ns >= g.start_ns) {
            pt_window_add_gpu(w, &g);
            totals->recorded++;
        }
    }
    memset(r->records, 0, chunks * PT_API_CHUNK_RECORDS * sizeof *r->records);
    atomic_store_explicit(&r->next_chunk, 0, memory_order_relaxed);
}

static void drain_counts(pt_api_recorder *r, pt_window *w, const char *(*name)(void *, int, uint32_t), void *ctx,
                         pt_api_totals *totals)
{
    unsigned used = PT_MIN(atomic_load_explicit(&r->threads_used, memory_order_acquire), PT_API_MAX_THREADS);
    for (int d = 0; d < PT_API_DOMAINS; d++) {
        for (uint32_t cbid = 0; cbid < PT_API_MAX_CBID; cbid++) {
            uint64_t calls = 0;
            for (unsigned i = 0; i < used; i++)
                calls += atomic_load_explicit(&r->threads[i].counts[d][cbid], memory_order_relaxed);
            if (!calls || r->kept[d][cbid])
                continue;
            totals->counted += calls;
            char fallback[48], key[160];
            size_t len;
            const char *s = api_name(name, ctx, d, cbid, fallback, sizeof fallback, &len);
            snprintf(key, sizeof key, "cuda_api_count.%.*s", (int)len, s);
            pt_window_fact_int(w, key, (int64_t)calls);
        }
    }
    for (unsigned i = 0; i < used; i++) {
        totals->nested_driver += atomic_load_explicit(&r->threads[i].nested_driver, memory_order_relaxed);
        totals->dropped += atomic_load_explicit(&r->threads[i].dropped, memory_order_relaxed);
    }
    totals->dropped += atomic_exchange_explicit(&r->refused, 0, memory_order_relaxed);
    memset(r->threads, 0, used * sizeof *r->threads);
    atomic_store_explicit(&r->threads_used, 0, memory_order_relaxed);
}

pt_api_totals pt_api_recorder_drain(pt_api_recorder *r, pt_window *w,
                                    const char *(*name)(void *ctx, int domain, uint32_t cbid), void *ctx)
{
    pt_api_totals totals = {0};
    drain_records(r, w, name, ctx, &totals);
    drain_counts(r, w, name, ctx, &totals);
    pt_window_fact_int(w, "cuda_api_calls_recorded", (int64_t)totals.recorded);
    pt_window_fact_int(w, "cuda_api_calls_counted", (int64_t)totals.counted);
    pt_window_fact_int(w, "cuda_driver_calls_in_runtime", (int64_t)totals.nested_driver);
    if (totals.dropped) {
        pt_window_fact_int(w, "cuda_api_calls_dropped", (int64_t)totals.dropped);
        pt_window_warn(w, "%llu CUDA API calls were not recorded (the API record pool is full: raise "
                          "PERFTRACKER_MAX_GPU_EVENTS)", (unsigned long long)totals.dropped);
    }
    return totals;
}
