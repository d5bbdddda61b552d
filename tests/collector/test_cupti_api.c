/* CUDA API calls through the callback path, without a GPU: synthetic entry/exit
 * callbacks (CUpti_CallbackData when CUPTI's headers are here) shaped like a PyTorch
 * step, drained into a real window. Checked: which calls are kept (names from the H200
 * traces in ../shared/data/traces/h200), that a driver call inside a runtime call is
 * never recorded, what is counted and reported as trace facts, threads recording at
 * once (this test also runs under ThreadSanitizer), a full pool, and a call that
 * straddles two windows. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/cupti_api.h"

/* ------------------------------------------------------------ the filter */

static void kept_names(void **state)
{
    (void)state;
    /* Every API name of the native H200 trace, as CUPTI names it. */
    static const char *const kept[] = {
        "cudaLaunchKernel_v7000", "cudaLaunchKernelExC_v11060", "cuLaunchKernel", "cuLaunchKernelEx",
        "cudaMemcpyAsync_v3020", "cudaMemsetAsync_v3020", "cudaEventSynchronize_v3020", "cudaStreamWaitEvent_v3020",
        "cudaStreamSynchronize_v3020", "cudaDeviceSynchronize_v3020", "cudaMalloc_v3020", "cudaFree_v3020",
        "cudaMallocAsync_v11020", "cudaFreeAsync_v11020", "cudaHostAlloc_v3020", "cudaFreeHost_v3020",
        "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoDAsync_v2", "cuMemsetD32Async", "cuCtxSynchronize",
        "cuStreamSynchronize_ptsz", "cudaGraphLaunch_v10000", "cuStreamWaitValue32_v2", "cuMemCreate",
        "cuMemRelease", "cudaLaunchHostFunc_v10000", "cudaMemcpy2DAsync_v3020",
    };
    static const char *const counted[] = {
        "cudaGetDevice_v3020", "cuDevicePrimaryCtxGetState", "cudaGetLastError_v3020", "cuKernelGetName",
        "cuCtxGetCurrent", "cudaStreamIsCapturing_v10000", "cuKernelGetFunction", "cudaDeviceGetAttribute_v5000",
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cudaFuncGetAttributes_v3020",
        "cudaEventQuery_v3020", "cuFuncGetAttribute", "cudaEventRecordWithFlags_v11010", "cudaEventRecord_v3020",
        "cudaEventElapsedTime_v3020", "cudaEventCreateWithFlags_v3020", "cudaEventDestroy_v3020",
        "cudaFuncSetAttribute_v9000", "cudaStreamQuery_v3020", "cuMemGetInfo_v2", "cudaMemGetInfo_v3020",
        "cuPointerGetAttribute", "cudaSetDevice_v3020", "cuMemAdvise",
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(kept); i++)
        if (!pt_cuda_api_kept(kept[i]))
            fail_msg("%s should be kept", kept[i]);
    for (size_t i = 0; i < PT_ARRAY_LEN(counted); i++)
        if (pt_cuda_api_kept(counted[i]))
            fail_msg("%s should only be counted", counted[i]);
    assert_false(pt_cuda_api_kept(NULL));
}

/* ------------------------------------------------------------ a synthetic CUDA */

enum { RT_GET_DEVICE = 1, RT_LAUNCH = 2, RT_MEMCPY = 3, RT_SYNC = 4 };
enum { DRV_LAUNCH = 1, DRV_MEMCPY = 2, DRV_CTX_CURRENT = 3 };

static const char *api_name(void *ctx, int domain, uint32_t cbid)
{
    (void)ctx;
    static const char *const runtime[] = {NULL, "cudaGetDevice_v3020", "cudaLaunchKernel_v7000",
                                          "cudaMemcpyAsync_v3020", "cudaStreamSynchronize_v3020"};
    static const char *const driver[] = {NULL, "cuLaunchKernel", "cuMemcpyAsync", "cuCtxGetCurrent"};
    if (domain == 0)
        return cbid < PT_ARRAY_LEN(runtime) ? runtime[cbid] : NULL;
    return cbid < PT_ARRAY_LEN(driver) ? driver[cbid] : NULL;
}

typedef struct call {
    int domain;
    uint32_t cbid;
    uint64_t correlation; /* CUPTI keeps this word per call, from entry to exit */
} call;

#ifdef PT_HAVE_CUPTI
/* Through the real CUPTI callback, with the structs CUPTI passes. */
static void callback(pt_api_recorder *r, call *c, CUpti_ApiCallbackSite site)
{
    CUpti_CallbackData data;
    memset(&data, 0, sizeof data);
    data.callbackSite = site;
    data.correlationData = &c->correlation;
    pt_cupti_api_callback(r, c->domain ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, c->cbid, &data);
}

static void enter(pt_api_recorder *r, call *c) { callback(r, c, CUPTI_API_ENTER); }
static void leave(pt_api_recorder *r, call *c) { callback(r, c, CUPTI_API_EXIT); }
#else
static void enter(pt_api_recorder *r, call *c) { pt_api_enter(r, c->domain, c->cbid, &c->correlation); }
static void leave(pt_api_recorder *r, call *c) { pt_api_exit(r, c->domain, c->cbid, &c->correlation); }
#endif

/* A runtime call, with the driver calls the runtime makes inside it. */
static void runtime_call(pt_api_recorder *r, uint32_t cbid, uint32_t nested_driver)
{
    call outer = {0, cbid, 0};
    enter(r, &outer);
    for (int i = 0; i < 2 && nested_driver; i++) {
        call inner = {1, nested_driver, 0};
        enter(r, &inner);
        leave(r, &inner);
    }
    leave(r, &outer);
}

static void driver_call(pt_api_recorder *r, uint32_t cbid)
{
    call c = {1, cbid, 0};
    enter(r, &c);
    leave(r, &c);
}

/* One "step" of a framework: per launch a few queries and the launch itself (whose
 * runtime makes two driver calls), a library launching through the driver directly, a
 * copy and a synchronization. Kept and recorded per step: 10 + 2 + 1 + 1 = 14. */
static void framework_step(pt_api_recorder *r)
{
    for (int k = 0; k < 10; k++) {
        runtime_call(r, RT_GET_DEVICE, 0);
        runtime_call(r, RT_GET_DEVICE, 0);
        runtime_call(r, RT_LAUNCH, DRV_LAUNCH);
    }
    driver_call(r, DRV_CTX_CURRENT);
    driver_call(r, DRV_LAUNCH);
    driver_call(r, DRV_LAUNCH);
    runtime_call(r, RT_MEMCPY, DRV_MEMCPY);
    runtime_call(r, RT_SYNC, 0);
}

static pt_window *new_window(void)
{
    pt_window_plan plan = {.start_step = 1, .steps = 1};
    pt_window_limits limits = {1024, 100000, 16};
    pt_error err;
    pt_window *w = pt_window_open(&plan, &limits, 1, pt_now_ns(), &err);
    assert_non_null(w);
    return w;
}

static void close_window(pt_window *w)
{
    w->tick_end = pt_ticks();
    pt_window_mark_step(w, pt_now_ns());
}

static int64_t fact(const pt_window *w, const char *key)
{
    for (size_t i = 0; i < w->fact_count; i++)
        if (strcmp(w->facts[i].key, key) == 0)
            return w->facts[i].value;
    return -1;
}

static size_t records_named(const pt_window *w, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < w->gpu_count; i++)
        if (strcmp(w->names.strings[w->gpu[i].name], name) == 0)
            n++;
    return n;
}

static void one_thread(void **state)
{
    (void)state;
    pt_api_recorder r;
    assert_int_equal(pt_api_recorder_init(&r, 10000), 0);
    pt_api_recorder_classify(&r, api_name, NULL);
    assert_true(r.kept[0][RT_LAUNCH] && r.kept[1][DRV_LAUNCH] && !r.kept[0][RT_GET_DEVICE]);
    pt_window *w = new_window();
    pt_api_recorder_begin(&r);
    for (int step = 0; step < 3; step++)
        framework_step(&r);
    close_window(w);
    pt_api_totals t = pt_api_recorder_drain(&r, w, api_name, NULL);

    assert_int_equal(t.recorded, 3 * 14);
    assert_int_equal(w->gpu_count, 3 * 14);
    assert_int_equal(records_named(w, "cudaLaunchKernel"), 30);
    assert_int_equal(records_named(w, "cuLaunchKernel"), 6); /* the direct ones only */
    assert_int_equal(records_named(w, "cudaMemcpyAsync"), 3);
    assert_int_equal(records_named(w, "cuMemcpyAsync"), 0); /* never at both levels */
    assert_int_equal(records_named(w, "cudaStreamSynchronize"), 3);
    assert_int_equal(records_named(w, "cudaGetDevice"), 0);
    assert_int_equal(t.counted, 3 * (20 + 1));
    assert_int_equal(t.nested_driver, 3 * (20 + 2));
    assert_int_equal(t.dropped, 0);
    assert_int_equal(fact(w, "cuda_api_count.cudaGetDevice"), 60);
    assert_int_equal(fact(w, "cuda_api_count.cuCtxGetCurrent"), 3);
    assert_int_equal(fact(w, "cuda_api_count.cudaLaunchKernel"), -1); /* recorded, so not in the counts */
    assert_int_equal(fact(w, "cuda_api_calls_recorded"), 42);
    assert_int_equal(fact(w, "cuda_driver_calls_in_runtime"), 66);
    int64_t tid = w->gpu[0].stream;
    for (size_t i = 0; i < w->gpu_count; i++) {
        const pt_gpu_record *g = &w->gpu[i];
        assert_int_equal(g->kind, PT_EVENT_RUNTIME);
        assert_true(g->end_ns >= g->start_ns);
        assert_true(g->start_ns >= w->step_marks[0] && g->end_ns <= w->step_marks[w->marks - 1]);
        assert_int_equal(g->stream, tid);
        if (i)
            assert_true(g->start_ns >= w->gpu[i - 1].start_ns);
    }

    /* The pool was emptied: a second window starts from nothing. */
    pt_window *w2 = new_window();
    pt_api_recorder_begin(&r);
    framework_step(&r);
    close_window(w2);
    t = pt_api_recorder_drain(&r, w2, api_name, NULL);
    assert_int_equal(t.recorded, 14);
    assert_int_equal(fact(w2, "cuda_api_count.cudaGetDevice"), 20);
    pt_window_free(w2);
    pt_window_free(w);
    pt_api_recorder_free(&r);
}

typedef struct worker_arg {
    pt_api_recorder *r;
    int steps;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    for (int i = 0; i < a->steps; i++)
        framework_step(a->r);
    return NULL;
}

static void threads_at_once(void **state)
{
    (void)state;
    enum { THREADS = 6, STEPS = 200 };
    pt_api_recorder r;
    /* Threads take whole chunks: room for one partly used chunk each. */
    assert_int_equal(pt_api_recorder_init(&r, THREADS * STEPS * 14 + THREADS * PT_API_CHUNK_RECORDS), 0);
    pt_api_recorder_classify(&r, api_name, NULL);
    pt_window *w = new_window();
    pt_api_recorder_begin(&r);
    pthread_t threads[THREADS];
    worker_arg arg = {&r, STEPS};
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, worker, &arg), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    close_window(w);
    pt_api_totals t = pt_api_recorder_drain(&r, w, api_name, NULL);
    assert_int_equal(t.recorded, THREADS * STEPS * 14);
    assert_int_equal(t.counted, THREADS * STEPS * 21);
    assert_int_equal(t.dropped, 0);
    assert_int_equal(fact(w, "cuda_api_count.cudaGetDevice"), THREADS * STEPS * 20);
    /* Each thread's calls carry its own id. */
    int64_t tids[THREADS] = {0};
    size_t per[THREADS] = {0}, distinct = 0;
    for (size_t i = 0; i < w->gpu_count; i++) {
        size_t k = 0;
        while (k < distinct && tids[k] != w->gpu[i].stream)
            k++;
        if (k == distinct) {
            assert_true(distinct < THREADS);
            tids[distinct++] = w->gpu[i].stream;
        }
        per[k]++;
    }
    assert_int_equal(distinct, THREADS);
    for (size_t k = 0; k < distinct; k++)
        assert_int_equal(per[k], STEPS * 14);
    pt_window_free(w);
    pt_api_recorder_free(&r);
}

static void full_pool_drops_and_counts(void **state)
{
    (void)state;
    pt_api_recorder r;
    assert_int_equal(pt_api_recorder_init(&r, 1), 0); /* one chunk */
    pt_api_recorder_classify(&r, api_name, NULL);
    pt_window *w = new_window();
    pt_api_recorder_begin(&r);
    for (int i = 0; i < 100; i++)
        framework_step(&r); /* 1400 kept calls for 512 places */
    close_window(w);
    pt_api_totals t = pt_api_recorder_drain(&r, w, api_name, NULL);
    assert_int_equal(t.recorded, PT_API_CHUNK_RECORDS);
    assert_int_equal(t.dropped, 1400 - PT_API_CHUNK_RECORDS);
    assert_int_equal(fact(w, "cuda_api_calls_dropped"), 1400 - PT_API_CHUNK_RECORDS);
    assert_int_equal(w->warning_count, 1);
    assert_non_null(strstr(w->warnings[0], "PERFTRACKER_MAX_GPU_EVENTS"));
    pt_window_free(w);
    pt_api_recorder_free(&r);
}

static void call_across_windows(void **state)
{
    (void)state;
    pt_api_recorder r;
    assert_int_equal(pt_api_recorder_init(&r, 1000), 0);
    pt_api_recorder_classify(&r, api_name, NULL);
    pt_window *w = new_window();
    pt_api_recorder_begin(&r);
    call sync = {0, RT_SYNC, 0};
    enter(&r, &sync); /* a synchronization still waiting when the window ends */
    close_window(w);
    pt_api_recorder_drain(&r, w, api_name, NULL);
    assert_int_equal(records_named(w, "cudaStreamSynchronize"), 1);
    assert_int_equal(w->gpu[0].end_ns, pt_window_ticks_to_ns(w, w->tick_end)); /* closed at the window's end */

    pt_window *w2 = new_window();
    pt_api_recorder_begin(&r);
    leave(&r, &sync); /* returns in the next window: must not touch that window's records */
    call get = {0, RT_GET_DEVICE, 0};
    enter(&r, &get); /* the thread's runtime depth starts again from 0 */
    leave(&r, &get);
    driver_call(&r, DRV_LAUNCH);
    close_window(w2);
    pt_api_totals t = pt_api_recorder_drain(&r, w2, api_name, NULL);
    assert_int_equal(t.recorded, 1);
    assert_int_equal(t.nested_driver, 0);
    assert_int_equal(records_named(w2, "cuLaunchKernel"), 1);
    pt_window_free(w2);
    pt_window_free(w);
    pt_api_recorder_free(&r);
}

int main(void)
{
    pt_ticks_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kept_names),
        cmocka_unit_test(one_thread),
        cmocka_unit_test(threads_at_once),
        cmocka_unit_test(full_pool_drops_and_counts),
        cmocka_unit_test(call_across_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
