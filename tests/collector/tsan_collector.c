/* The collector's threads together, for ThreadSanitizer (label `tsan`): a training
 * thread stepping and recording calls, two more "Python" threads recording under a mutex
 * that stands for the GIL, an agent thread arming windows and polling the status hook, a
 * GPU-callback thread adding records and interning names while windows are open, the
 * hardware sampler, and the writer thread writing, summarizing (by spawning the CLI given
 * as argv[1]) and reporting. Two windows are profiled; both traces must read back with
 * the expected steps and events and both summaries must be reported. Then the agent
 * cancels two more (its round was cancelled), one while it waits for its start step and
 * one while it is open: neither is written, and each is reported as a failure.
 *   usage: tsan_collector PERFTRACKER_CLI */
#define _GNU_SOURCE
#include "collect/collector.h"
#include "trace/reader.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STEPS 90
#define WINDOW_STEPS 3
#define LONG_WINDOW_STEPS 10 /* open long enough for the agent to cancel it while it is */

static pthread_mutex_t gil = PTHREAD_MUTEX_INITIALIZER;
static pt_window *open_window;               /* under gil */
static pt_thread_log *worker_logs[2];         /* under gil */
static atomic_bool finished;
static atomic_int summaries_reported, summary_failures;
static pthread_mutex_t gpu_attach = PTHREAD_MUTEX_INITIALIZER;
static pt_window *gpu_window;                 /* under gpu_attach, as cupti.c keeps it */
static char raw_dir[64];

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void window_done(const void *summary, size_t len, const char *raw, int status, const char *why)
{
    (void)summary, (void)raw, (void)why;
    if (status == 0 && len > 0)
        atomic_fetch_add(&summaries_reported, 1);
    else
        atomic_fetch_add(&summary_failures, 1);
}

static void *python_worker(void *arg)
{
    int index = (int)(intptr_t)arg;
    static const char keys[2][4] = {{0}, {0}};
    while (!atomic_load(&finished)) {
        pthread_mutex_lock(&gil);
        pt_thread_log *t = worker_logs[index];
        if (t) {
            int64_t now = pt_ticks();
            pt_thread_log_enter(t, &keys[index][0], 1, now);
            pt_thread_log_enter(t, &keys[index][1], 1, now + 10);
            pt_thread_log_leave(t, &keys[index][1], now + 20);
            pt_thread_log_leave(t, &keys[index][0], now + 30);
        }
        pthread_mutex_unlock(&gil);
        nap_us(50);
    }
    return NULL;
}

static void *gpu_callbacks(void *arg)
{
    (void)arg;
    int n = 0;
    while (!atomic_load(&finished)) {
        pthread_mutex_lock(&gpu_attach);
        if (gpu_window) {
            char name[32];
            int len = snprintf(name, sizeof name, "kernel_%d", n++ % 5);
            pt_gpu_record r = {0};
            r.kind = PT_EVENT_GPU_KERNEL;
            r.start_ns = pt_now_ns();
            r.end_ns = r.start_ns + 1000;
            r.name = pt_window_name(gpu_window, name, (size_t)len);
            r.coll_name = PT_NAMES_NONE;
            r.grid[0] = r.block[0] = 1;
            pt_window_add_gpu(gpu_window, &r);
        }
        pthread_mutex_unlock(&gpu_attach);
        nap_us(100);
    }
    return NULL;
}

static void *agent(void *arg)
{
    (void)arg;
    int armed = 0;
    int64_t long_start = 0;
    int64_t steps = 0, last = 0, mean = 0, previous_steps = -1;
    while (!atomic_load(&finished)) {
        pt_collector_status(&steps, &last, &mean);
        if (steps < previous_steps) {
            fprintf(stderr, "steps went backwards: %lld < %lld\n", (long long)steps, (long long)previous_steps);
            abort();
        }
        previous_steps = steps;
        if (armed == 0 && steps >= 5 && pt_collector_arm(steps + 3, WINDOW_STEPS, raw_dir) == 0)
            armed = 1;
        else if (armed == 1 && steps >= 30 && pt_collector_arm(steps + 2, WINDOW_STEPS, raw_dir) == 0)
            armed = 2;
        else if (armed == 2 && steps >= 45 && pt_collector_arm(steps + 5, WINDOW_STEPS, raw_dir) == 0) {
            pt_collector_cancel(); /* before its start step */
            armed = 3;
        } else if (armed == 3 && steps >= 60 && pt_collector_arm(steps + 1, LONG_WINDOW_STEPS, raw_dir) == 0) {
            long_start = steps + 1;
            armed = 4;
        } else if (armed == 4 && steps >= long_start + 2) {
            pt_collector_cancel(); /* open */
            armed = 5;
        }
        nap_us(200);
    }
    return NULL;
}

static void begin(void)
{
    pt_collector_start_sources(false);
    pt_window *w = pt_collector_window();
    w->meta.pid = getpid();
    w->meta.rank = 0;
    snprintf(w->meta.host, sizeof w->meta.host, "tsanhost");
    open_window = w;
    worker_logs[0] = pt_window_add_thread(w, 1001);
    worker_logs[1] = pt_window_add_thread(w, 1002);
    pthread_mutex_lock(&gpu_attach);
    gpu_window = w;
    pthread_mutex_unlock(&gpu_attach);
}

static void end(void)
{
    open_window = NULL;
    worker_logs[0] = worker_logs[1] = NULL;
    pthread_mutex_lock(&gpu_attach);
    gpu_window = NULL;
    pthread_mutex_unlock(&gpu_attach);
    pt_window_close_threads(pt_collector_window());
    pt_collector_end_window();
}

typedef struct tally {
    int cpu, steps, kernels, counters;
} tally;

static int count(void *ctx, const pt_event *ev)
{
    tally *t = ctx;
    t->cpu += ev->kind == PT_EVENT_CPU;
    t->steps += ev->kind == PT_EVENT_STEP;
    t->kernels += ev->kind == PT_EVENT_GPU_KERNEL;
    t->counters += ev->kind == PT_EVENT_COUNTER;
    return 0;
}

int main(int argc, char **argv)
{
    snprintf(raw_dir, sizeof raw_dir, "/tmp/pt-tsan-%d/", (int)getpid());
    char summaries[96];
    snprintf(summaries, sizeof summaries, "%ssummaries", raw_dir);
    pt_collect_config cfg = {.limits = {100000, 10000, 100000}, .sample_period_us = 200, .gpm_period_ms = 100,
                             .gpu = false, .gpu_index = -1, .window_done = window_done};
    snprintf(cfg.cli_path, sizeof cfg.cli_path, "%s", argc > 1 ? argv[1] : "");
    snprintf(cfg.summary_dir, sizeof cfg.summary_dir, "%s", summaries);
    pt_error err;
    if (pt_collector_init(&cfg, &err) != 0) {
        fprintf(stderr, "init: %s\n", err.message);
        return 1;
    }
    pthread_t threads[4];
    pthread_create(&threads[0], NULL, python_worker, (void *)0);
    pthread_create(&threads[1], NULL, python_worker, (void *)1);
    pthread_create(&threads[2], NULL, gpu_callbacks, NULL);
    pthread_create(&threads[3], NULL, agent, NULL);

    static const char main_key[1] = {0};
    pt_thread_log *mine = NULL;
    for (int s = 0; s < STEPS; s++) {
        pthread_mutex_lock(&gil);
        if (mine && open_window) {
            int64_t now = pt_ticks();
            pt_thread_log_enter(mine, main_key, 1, now);
            pt_thread_log_leave(mine, main_key, now + 100);
        }
        pt_step_action a = pt_collector_step();
        if (a == PT_STEP_BEGIN) {
            begin();
            mine = pt_window_add_thread(open_window, getpid());
        } else if (a == PT_STEP_END) {
            mine = NULL;
            end();
        }
        pthread_mutex_unlock(&gil);
        nap_us(2000);
        if (s == 20 || s == 40 || s == STEPS - 1)
            pt_collector_wait_idle(30); /* let a window finish before the next is armed */
    }
    atomic_store(&finished, true);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    bool idle = pt_collector_wait_idle(60);
    pt_collector_stats stats;
    pt_collector_stats_get(&stats);
    pt_collector_shutdown();

    int failures = 0;
#define CHECK(cond, ...)                          \
    do {                                          \
        if (!(cond)) {                            \
            fprintf(stderr, "FAIL: " __VA_ARGS__); \
            fprintf(stderr, "\n");                \
            failures++;                           \
        }                                         \
    } while (0)
    CHECK(idle, "the collector did not become idle");
    CHECK(stats.steps_done == STEPS, "steps_done %lld", (long long)stats.steps_done);
    CHECK(stats.windows_done == 2, "windows_done %lld (failed %lld: %s)", (long long)stats.windows_done,
          (long long)stats.windows_failed, stats.last_error);
    CHECK(stats.windows_failed == 0, "windows_failed %lld: %s", (long long)stats.windows_failed, stats.last_error);
    CHECK(atomic_load(&summaries_reported) == 2 && atomic_load(&summary_failures) == 2,
          "summaries reported: %d, failures %d (want 2 and the 2 cancelled windows)", atomic_load(&summaries_reported),
          atomic_load(&summary_failures));
    tally t = {0};
    pt_trace_sink sink = {&t, count, NULL};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    int rc = pt_trace_read(stats.last_trace, &sink, &meta, NULL, &err);
    CHECK(rc == 0, "reading %s: %s", stats.last_trace, err.message);
    CHECK(t.steps == WINDOW_STEPS, "steps in the trace: %d", t.steps);
    CHECK(t.cpu > 3, "CPU events in the trace: %d", t.cpu);
    CHECK(t.kernels > 0, "kernels in the trace: %d", t.kernels);
    CHECK(t.counters > 0, "hardware samples in the trace: %d", t.counters);
    CHECK(strcmp(meta.host, "tsanhost") == 0, "host %s", meta.host);
    printf("tsan_collector: %d windows, last trace %s: %d CPU calls, %d steps, %d kernels, %d samples (period %d us)\n",
           (int)stats.windows_done, stats.last_trace, t.cpu, t.steps, t.kernels, t.counters,
           stats.last_sample_period_us);
    char cleanup[256];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", raw_dir);
    if (system(cleanup) != 0)
        fprintf(stderr, "could not remove %s\n", raw_dir);
    return failures ? 1 : 0;
}
