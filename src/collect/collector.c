/* collector.c -- step counting, arming, the window lifecycle and the writer thread
 * (see collector.h for the threads and what each may touch).
 *
 * The summary is made by a separate process (`perftracker summarize`, spawned with
 * posix_spawn, which does not copy the training process's page tables): the analysis
 * library treats running out of memory as fatal and must never take the training job
 * down with it, and a crash there costs one summary, not the job. */
#define _GNU_SOURCE
#include "collect/collector.h"
#include "collect/cupti.h"
#include "collect/log.h"
#include "collect/sampler.h"
#include "util/step_number.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_SUMMARY_BYTES (64u << 20)
/* Kernels launched in the last step may still be running when the window closes; CUPTI
 * reports a kernel only once it has finished. */
#define GPU_SETTLE_NS 200000000LL

static struct {
    pthread_mutex_t lock;          /* guards everything marked (L) */
    pthread_cond_t changed;
    bool initialized;              /* (L) */
    pt_collect_config cfg;         /* written once by init, read-only after */

    _Atomic int64_t steps_done;    /* written by the training thread only */
    _Atomic int64_t last_step_ns;
    _Atomic int64_t mean_step_ns;
    atomic_int attention;          /* step() must take the slow path */
    atomic_int cancel;             /* pt_collector_cancel: drop the waiting plan or the open window */

    bool has_plan;                 /* (L) armed, not yet seen by the training thread */
    pt_window_plan plan;           /* (L) */
    bool busy;                     /* (L) armed, open or being written */

    bool waiting;                  /* training thread: a plan waits for its start step */
    pt_window_plan waiting_plan;
    pt_window *open;               /* training thread: the window being recorded */
    pt_sampler *sampler;
    bool cupti_on;
    bool gpu_reported;

    pt_nvml *nvml;                 /* (L) opened by the writer thread at start */
    pthread_t writer;
    bool writer_started;
    pt_window *queued;             /* (L) closed window for the writer */
    bool writing;                  /* (L) the writer is processing a window */
    bool queued_cupti;             /* (L) */
    bool stop;                     /* (L) */
    pt_collector_stats stats;      /* (L) */
} C = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* ------------------------------------------------------------ step() */

/* Training thread, under C.lock: the plan the agent armed becomes the one that waits. */
static void take_plan_locked(void)
{
    if (C.has_plan) {
        C.waiting = true;
        C.waiting_plan = C.plan;
        C.has_plan = false;
    }
}

/* The step numbered n, whose previous step was `previous` (util/step_number.h: a number
 * carries its step source). The common path is the one atomic test of `attention`. */
static pt_step_action step_numbered(int64_t n, int64_t previous)
{
    int64_t now = pt_now_ns();
    int64_t last = atomic_load_explicit(&C.last_step_ns, memory_order_relaxed);
    if (last) {
        /* An exponential mean over roughly the last 8 steps: integer, branch-free. */
        int64_t mean = atomic_load_explicit(&C.mean_step_ns, memory_order_relaxed);
        int64_t dur = now - last;
        atomic_store_explicit(&C.mean_step_ns, mean ? mean + (dur - mean) / 8 : dur, memory_order_relaxed);
    }
    atomic_store_explicit(&C.steps_done, n, memory_order_relaxed);
    atomic_store_explicit(&C.last_step_ns, now, memory_order_relaxed);
    if (PT_LIKELY(!atomic_load_explicit(&C.attention, memory_order_acquire)))
        return PT_STEP_NONE;

    int64_t tick = pt_ticks(); /* read beside `now`: a reference point for the recorder clock */
    if (C.open && atomic_load_explicit(&C.cancel, memory_order_acquire))
        return PT_STEP_END; /* the caller stops recording; pt_collector_end_window drops it */
    if (C.open) {
        pt_window_mark_step(C.open, now);
        C.open->tick_end = tick;
        if (pt_step_source(n) != pt_step_source(C.open->first_step)) {
            /* Its steps so far were another source's (the clock's): the window ends here
             * rather than mix them with iterations. */
            pt_window_warn(C.open, "the window ended early: the steps were found anew inside it (a better step "
                                   "source showed itself), so it has fewer steps than asked");
            return PT_STEP_END;
        }
        return n - C.open->first_step >= C.open->plan.steps ? PT_STEP_END : PT_STEP_MARK;
    }
    pthread_mutex_lock(&C.lock);
    take_plan_locked();
    bool dropped = false;
    if (atomic_exchange_explicit(&C.cancel, 0, memory_order_acq_rel) && C.waiting) {
        C.waiting = false; /* nothing else is in flight while a plan waits */
        C.busy = false;
        dropped = true;
        pthread_cond_broadcast(&C.changed);
    }
    if (C.waiting)
        C.waiting_plan.start_step = pt_step_retarget(C.waiting_plan.start_step, previous, n);
    bool start = C.waiting && n >= C.waiting_plan.start_step;
    if (!C.waiting)
        atomic_store_explicit(&C.attention, 0, memory_order_relaxed);
    void (*done)(const void *, size_t, const char *, int, const char *) = C.cfg.window_done;
    pthread_mutex_unlock(&C.lock);
    if (dropped && done)
        done(NULL, 0, "", 1, "the round was cancelled");
    if (!start)
        return PT_STEP_NONE;

    C.waiting = false;
    pt_error err;
    C.open = pt_window_open(&C.waiting_plan, &C.cfg.limits, n, now, &err);
    if (C.open)
        C.open->tick_begin = C.open->tick_end = tick;
    if (!C.open) {
        pt_collect_log(PT_LOG_FAILURE, "profiling window skipped: %s", err.message);
        pthread_mutex_lock(&C.lock);
        C.busy = false;
        C.stats.windows_failed++;
        snprintf(C.stats.last_error, sizeof C.stats.last_error, "%s", err.message);
        pthread_cond_broadcast(&C.changed);
        pthread_mutex_unlock(&C.lock);
        return PT_STEP_NONE;
    }
    return PT_STEP_BEGIN;
}

pt_step_action pt_collector_step(void)
{
    int64_t previous = atomic_load_explicit(&C.steps_done, memory_order_relaxed);
    return step_numbered(previous + 1, previous);
}

pt_step_action pt_collector_step_to(int64_t number)
{
    int64_t previous = atomic_load_explicit(&C.steps_done, memory_order_relaxed);
    number = number < PT_STEP_NUMBER_MAX ? number : PT_STEP_NUMBER_MAX;
    return step_numbered(number > previous ? number : previous + 1, previous);
}

void pt_collector_renumber(int64_t number)
{
    int64_t previous = atomic_load_explicit(&C.steps_done, memory_order_relaxed);
    if (number <= previous || number > PT_STEP_NUMBER_MAX)
        return;
    pthread_mutex_lock(&C.lock);
    take_plan_locked();
    if (C.waiting) /* the next step is the first of the new source's */
        C.waiting_plan.start_step = pt_step_retarget(C.waiting_plan.start_step, previous, number + 1);
    atomic_store_explicit(&C.steps_done, number, memory_order_relaxed);
    pthread_mutex_unlock(&C.lock);
}

pt_window *pt_collector_window(void)
{
    return C.open;
}

int64_t pt_collector_last_step_ns(void)
{
    return atomic_load_explicit(&C.last_step_ns, memory_order_relaxed);
}

void pt_collector_status(int64_t *steps_done, int64_t *last_step_end_ns, int64_t *mean_step_ns)
{
    *steps_done = atomic_load_explicit(&C.steps_done, memory_order_relaxed);
    *last_step_end_ns = atomic_load_explicit(&C.last_step_ns, memory_order_relaxed);
    *mean_step_ns = atomic_load_explicit(&C.mean_step_ns, memory_order_relaxed);
}

/* ------------------------------------------------------------ arming */

int pt_collector_arm(int64_t start_step, int32_t steps, const char *raw_trace_path)
{
    if (steps <= 0 || strlen(raw_trace_path ? raw_trace_path : "") >= PATH_MAX)
        return -1;
    pthread_mutex_lock(&C.lock);
    int rc = -1;
    if (C.initialized && !C.busy) {
        C.plan.start_step = start_step;
        C.plan.steps = steps;
        snprintf(C.plan.raw_path, sizeof C.plan.raw_path, "%s", raw_trace_path ? raw_trace_path : "");
        C.has_plan = true;
        C.busy = true;
        atomic_store_explicit(&C.cancel, 0, memory_order_relaxed); /* a late cancel of an older window */
        atomic_store_explicit(&C.attention, 1, memory_order_release);
        rc = 0;
    }
    pthread_mutex_unlock(&C.lock);
    return rc;
}

/* ------------------------------------------------------------ recording sources */

void pt_collector_start_sources(bool cuda_in_use)
{
    pt_window *w = C.open;
    pt_error err;
    pthread_mutex_lock(&C.lock);
    pt_nvml *nvml = C.nvml;
    pthread_mutex_unlock(&C.lock);
    if (C.cfg.sample_period_us > 0) {
        pt_sampler_config sc = {C.cfg.sample_period_us, C.cfg.gpm_period_ms, nvml};
        C.sampler = pt_sampler_start(w, &sc, &err);
        if (!C.sampler)
            pt_window_warn(w, "no hardware samples: %s", err.message);
    }
    C.cupti_on = false;
    const char *why = NULL;
    if (!C.cfg.gpu)
        why = "GPU collection is disabled (PERFTRACKER_GPU=0)";
    else if (!cuda_in_use)
        why = "no CUDA device is in use by this process";
    else if (pt_cupti_start(w, &(pt_cupti_config){C.cfg.cupti_libs, C.cfg.limits.max_gpu_records,
                                                  C.cfg.count_api_calls}, &err) == 0)
        C.cupti_on = true;
    else
        why = err.message;
    if (why) {
        pt_window_warn(w, "GPU activity not recorded: %s", why);
        if (!C.gpu_reported)
            pt_collect_log(PT_LOG_INFO, "GPU collection unavailable (%s); recording Python functions and "
                                        "host metrics only", why);
        C.gpu_reported = true;
    }
    /* The first step starts now that recording does: starting CUPTI and the sampler
     * (tens of milliseconds) is the collector's time, not the job's first step. */
    pt_window_restart_first_step(w, pt_now_ns(), pt_ticks());
}

static void stop_sources(void)
{
    if (C.cupti_on)
        pt_cupti_stop();
    pt_sampler_stop(C.sampler);
    C.sampler = NULL;
}

void pt_collector_end_window(void)
{
    pt_window *w = C.open;
    if (!w)
        return;
    stop_sources();
    C.open = NULL;
    if (atomic_exchange_explicit(&C.cancel, 0, memory_order_acq_rel)) { /* nobody wants it: not written */
        if (C.cupti_on)
            pt_cupti_flush(w);
        C.cupti_on = false;
        pt_window_free(w);
        pthread_mutex_lock(&C.lock);
        C.busy = false;
        if (!C.has_plan && !C.waiting)
            atomic_store_explicit(&C.attention, 0, memory_order_relaxed);
        void (*done)(const void *, size_t, const char *, int, const char *) = C.cfg.window_done;
        pthread_cond_broadcast(&C.changed);
        pthread_mutex_unlock(&C.lock);
        pt_collect_log(PT_LOG_INFO, "profiling window dropped: its round was cancelled");
        if (done)
            done(NULL, 0, "", 1, "the round was cancelled");
        return;
    }
    pthread_mutex_lock(&C.lock);
    C.queued = w;
    C.queued_cupti = C.cupti_on;
    C.cupti_on = false;
    if (!C.has_plan && !C.waiting)
        atomic_store_explicit(&C.attention, 0, memory_order_relaxed);
    pthread_cond_broadcast(&C.changed);
    pthread_mutex_unlock(&C.lock);
}

void pt_collector_abort_window(const char *why)
{
    pt_window *w = C.open;
    if (!w)
        return;
    stop_sources();
    if (C.cupti_on)
        pt_cupti_flush(w);
    C.open = NULL;
    pt_window_free(w);
    pt_collect_log(PT_LOG_FAILURE, "profiling window abandoned: %s", why);
    pthread_mutex_lock(&C.lock);
    C.busy = false;
    C.stats.windows_failed++;
    snprintf(C.stats.last_error, sizeof C.stats.last_error, "%s", why);
    if (!C.has_plan && !C.waiting)
        atomic_store_explicit(&C.attention, 0, memory_order_relaxed);
    pthread_cond_broadcast(&C.changed);
    pthread_mutex_unlock(&C.lock);
}

/* ------------------------------------------------------------ writer thread */

static void worker_file_name(const pt_window *w, char *out, size_t cap)
{
    const pt_trace_meta *m = &w->meta;
    int local = m->local_rank >= 0 ? m->local_rank : 0;
    snprintf(out, cap, "%s_%d_%lld.ptrace", m->host[0] ? m->host : "host", local, (long long)m->pid);
}

/* dir + "/" + name + ext into out; false when it does not fit. */
static bool path_join(char *out, size_t cap, const char *dir, const char *name, size_t name_len, const char *ext)
{
    size_t a = strlen(dir), c = strlen(ext);
    size_t slash = a && dir[a - 1] != '/';
    if (a + slash + name_len + c + 1 > cap)
        return false;
    memcpy(out, dir, a);
    if (slash)
        out[a] = '/';
    memcpy(out + a + slash, name, name_len);
    memcpy(out + a + slash + name_len, ext, c + 1);
    return true;
}

static bool is_directory(const char *path)
{
    struct stat st;
    size_t n = strlen(path);
    return (n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* Where this window's raw trace goes. tmpdir is set when it is a private one. */
static int choose_trace_path(const pt_window *w, char *path, size_t cap, char *tmpdir, size_t tcap, pt_error *err)
{
    char name[PT_NAME_MAX + 64];
    worker_file_name(w, name, sizeof name);
    tmpdir[0] = '\0';
    const char *raw = w->plan.raw_path;
    if (raw[0] && !is_directory(raw)) {
        snprintf(path, cap, "%s", raw);
        return 0;
    }
    if (raw[0]) {
        mkdir(raw, 0755);
        if (path_join(path, cap, raw, name, strlen(name), ""))
            return 0;
        pt_error_set(err, "the raw trace directory's path is too long");
        return -1;
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, tcap, "%s/perftracker-%d-XXXXXX", base && base[0] ? base : "/tmp", (int)getpid());
    if (!mkdtemp(tmpdir)) {
        pt_error_set(err, "cannot create a temporary directory for the raw trace: %s", strerror(errno));
        tmpdir[0] = '\0';
        return -1;
    }
    if (path_join(path, cap, tmpdir, name, strlen(name), ""))
        return 0;
    pt_error_set(err, "the temporary directory's path is too long");
    rmdir(tmpdir);
    tmpdir[0] = '\0';
    return -1;
}

static char *read_small_file(const char *path, size_t *len, pt_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 || (size_t)st.st_size > MAX_SUMMARY_BYTES) {
        pt_error_set(err, "the summary %s is missing or unreadable", path);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *data = malloc((size_t)st.st_size);
    size_t got = 0;
    while (data && got < (size_t)st.st_size) {
        ssize_t n = read(fd, data + got, (size_t)st.st_size - got);
        if (n <= 0 && errno != EINTR)
            break;
        if (n > 0)
            got += (size_t)n;
    }
    close(fd);
    if (!data || got != (size_t)st.st_size) {
        pt_error_set(err, "cannot read the summary %s", path);
        free(data);
        return NULL;
    }
    *len = got;
    return data;
}

/* Runs `perftracker summarize TRACE -o SUMMARY` and waits for it. */
static int spawn_summarize(const char *trace, const char *summary, pt_error *err)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        pt_error_set(err, "cannot summarize: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDERR_FILENO);
    char *argv[] = {(char *)C.cfg.cli_path, "summarize", (char *)trace, "-o", (char *)summary, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, C.cfg.cli_path, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        pt_error_set(err, "cannot run %s: %s", C.cfg.cli_path, strerror(rc));
        return -1;
    }
    char message[512] = "";
    size_t used = 0;
    for (;;) {
        char chunk[256];
        ssize_t n = read(pipefd[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t keep = PT_MIN((size_t)n, sizeof message - 1 - used);
        memcpy(message + used, chunk, keep);
        used += keep;
    }
    close(pipefd[0]);
    message[used] = '\0';
    while (used && (message[used - 1] == '\n' || message[used - 1] == ' '))
        message[--used] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        pt_error_set(err, "summarizing failed: %s", message[0] ? message : "the summarizer exited abnormally");
        return -1;
    }
    return 0;
}

typedef struct window_result {
    char trace[PATH_MAX];
    char summary[PATH_MAX];
    bool keep_trace;
    int status;
    pt_error err;
    char *summary_bytes;
    size_t summary_len;
} window_result;

static void summarize_window(const pt_window *w, window_result *res)
{
    if (!C.cfg.cli_path[0])
        return;
    bool local = C.cfg.summary_dir[0] != '\0';
    pthread_mutex_lock(&C.lock);
    bool reporting = C.cfg.window_done != NULL;
    pthread_mutex_unlock(&C.lock);
    if (!local && !reporting)
        return;
    bool ok;
    if (local) {
        char name[PT_NAME_MAX + 64];
        worker_file_name(w, name, sizeof name);
        mkdir(C.cfg.summary_dir, 0755);
        ok = path_join(res->summary, sizeof res->summary, C.cfg.summary_dir, name, strlen(name) - strlen(".ptrace"),
                       ".ptsum");
    } else {
        ok = path_join(res->summary, sizeof res->summary, "", res->trace, strlen(res->trace), ".ptsum");
    }
    if (!ok) {
        pt_error_set(&res->err, "the summary's path is too long");
        res->status = 1;
        return;
    }
    if (spawn_summarize(res->trace, res->summary, &res->err) != 0 ||
        !(res->summary_bytes = read_small_file(res->summary, &res->summary_len, &res->err)))
        res->status = 1;
    if (!local)
        unlink(res->summary);
}

static void record_result(const pt_window *w, const window_result *res)
{
    pthread_mutex_lock(&C.lock);
    pt_collector_stats *s = &C.stats;
    s->windows_done++;
    s->windows_failed += res->status != 0;
    s->last_status = res->status;
    snprintf(s->last_trace, sizeof s->last_trace, "%s", res->keep_trace ? res->trace : "");
    snprintf(s->last_summary, sizeof s->last_summary, "%s", C.cfg.summary_dir[0] ? res->summary : "");
    snprintf(s->last_error, sizeof s->last_error, "%s", res->status ? res->err.message : "");
    s->last_dropped = pt_window_dropped(w);
    s->last_cpu_records = pt_window_cpu_records(w);
    s->last_gpu_records = w->gpu_count;
    s->last_samples = w->sample_count;
    s->last_sample_period_us = w->sample_period_us;
    s->last_sampler_cpu_pct = w->sampler_cpu_pct;
    snprintf(s->last_sampler_reads, sizeof s->last_sampler_reads, "%s", w->sampler_reads);
    s->last_api_recorded = w->api_recorded;
    s->last_api_counted = w->api_counted;
    C.busy = false;
    C.writing = false;
    pthread_cond_broadcast(&C.changed);
    pthread_mutex_unlock(&C.lock);
}

static void process_window(pt_window *w, bool cupti_on)
{
    if (cupti_on) {
        struct timespec settle = {0, GPU_SETTLE_NS};
        nanosleep(&settle, NULL);
        pt_cupti_flush(w);
    }
    window_result res = {.status = 0};
    char tmpdir[PATH_MAX];
    res.keep_trace = w->plan.raw_path[0] != '\0';
    if (choose_trace_path(w, res.trace, sizeof res.trace, tmpdir, sizeof tmpdir, &res.err) != 0 ||
        pt_window_write(w, res.trace, &res.err) != 0) {
        res.status = 1;
        res.keep_trace = false;
    } else {
        summarize_window(w, &res);
    }
    int64_t first = pt_step_count(w->first_step); /* as people count steps */
    if (res.status)
        pt_collect_log(PT_LOG_FAILURE, "profiling window (steps %lld-%lld) failed: %s", (long long)first,
                       (long long)(first + w->marks - 2), res.err.message);
    else
        pt_collect_log(PT_LOG_INFO, "profiled steps %lld-%lld: %llu calls, %zu GPU records, %zu samples%s%s",
                       (long long)first, (long long)(first + w->marks - 2),
                       (unsigned long long)pt_window_cpu_records(w), w->gpu_count, w->sample_count,
                       res.keep_trace ? "; raw trace " : "", res.keep_trace ? res.trace : "");
    pthread_mutex_lock(&C.lock);
    void (*done)(const void *, size_t, const char *, int, const char *) = C.cfg.window_done;
    pthread_mutex_unlock(&C.lock);
    if (done)
        done(res.summary_bytes, res.summary_len, res.keep_trace ? res.trace : "", res.status,
             res.status ? res.err.message : "");
    if (!res.keep_trace && res.trace[0])
        unlink(res.trace);
    if (tmpdir[0])
        rmdir(tmpdir);
    record_result(w, &res);
    free(res.summary_bytes);
    pt_window_free(w);
}

static void *writer_main(void *arg)
{
    (void)arg;
    if (C.cfg.gpu_index >= 0 || C.cfg.gpu_uuid[0]) {
        pt_error err;
        pt_nvml *nvml = pt_nvml_open(C.cfg.gpu_uuid, C.cfg.gpu_index, &err);
        if (!nvml)
            pt_collect_log(PT_LOG_INFO, "no GPU hardware metrics: %s", err.message);
        pthread_mutex_lock(&C.lock);
        C.nvml = nvml;
        pthread_mutex_unlock(&C.lock);
    }
    pthread_mutex_lock(&C.lock);
    for (;;) {
        while (!C.queued && !C.stop)
            pthread_cond_wait(&C.changed, &C.lock);
        if (!C.queued)
            break;
        pt_window *w = C.queued;
        bool cupti_on = C.queued_cupti;
        C.queued = NULL;
        C.writing = true;
        pthread_mutex_unlock(&C.lock);
        process_window(w, cupti_on);
        pthread_mutex_lock(&C.lock);
    }
    pt_nvml *nvml = C.nvml;
    C.nvml = NULL;
    pthread_mutex_unlock(&C.lock);
    pt_nvml_close(nvml);
    return NULL;
}

/* ------------------------------------------------------------ init / shutdown */

int pt_collector_init(const pt_collect_config *cfg, pt_error *err)
{
    pthread_mutex_lock(&C.lock);
    int rc = 0;
    if (!C.initialized) {
        pt_ticks_init();
        C.cfg = *cfg;
        C.stop = false;
        C.stats.last_status = 0;
        int prc = pthread_create(&C.writer, NULL, writer_main, NULL);
        if (prc != 0) {
            pt_error_set(err, "cannot start the collector's writer thread: %s", strerror(prc));
            rc = -1;
        } else {
            C.writer_started = true;
            C.initialized = true;
        }
    }
    pthread_mutex_unlock(&C.lock);
    return rc;
}

void pt_collector_cancel(void)
{
    pthread_mutex_lock(&C.lock);
    bool dropped = C.has_plan; /* the training thread has not seen it: drop it here */
    if (dropped) {
        C.has_plan = false;
        C.busy = false;
        pthread_cond_broadcast(&C.changed);
    } else if (C.busy && !C.queued && !C.writing) { /* waiting or open: the training thread's */
        atomic_store_explicit(&C.cancel, 1, memory_order_release);
        atomic_store_explicit(&C.attention, 1, memory_order_release);
    }
    void (*done)(const void *, size_t, const char *, int, const char *) = C.cfg.window_done;
    pthread_mutex_unlock(&C.lock);
    if (dropped && done)
        done(NULL, 0, "", 1, "the round was cancelled");
}

void pt_collector_cancel_pending(void)
{
    pthread_mutex_lock(&C.lock);
    bool cancelled = C.has_plan || C.waiting;
    C.has_plan = false;
    C.waiting = false;
    if (!C.open && !C.queued && !C.writing)
        C.busy = false;
    if (!C.open)
        atomic_store_explicit(&C.attention, 0, memory_order_relaxed);
    void (*done)(const void *, size_t, const char *, int, const char *) = C.cfg.window_done;
    pthread_cond_broadcast(&C.changed);
    pthread_mutex_unlock(&C.lock);
    if (cancelled) {
        pt_collect_log(PT_LOG_INFO, "the program ended before its profiling window opened");
        if (done) /* tell whoever armed it that no summary is coming */
            done(NULL, 0, "", 1, "the program ended before its profiling window opened");
    }
}

void pt_collector_set_window_done(void (*fn)(const void *, size_t, const char *, int, const char *))
{
    pthread_mutex_lock(&C.lock);
    C.cfg.window_done = fn;
    pthread_mutex_unlock(&C.lock);
}

bool pt_collector_wait_idle(double timeout_s)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    int64_t ns = deadline.tv_nsec + (int64_t)(timeout_s * 1e9);
    deadline.tv_sec += (time_t)(ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&C.lock);
    int rc = 0;
    while (C.busy && rc == 0)
        rc = pthread_cond_timedwait(&C.changed, &C.lock, &deadline);
    bool idle = !C.busy;
    pthread_mutex_unlock(&C.lock);
    return idle;
}

void pt_collector_stats_get(pt_collector_stats *out)
{
    pthread_mutex_lock(&C.lock);
    *out = C.stats;
    out->busy = C.busy;
    pthread_mutex_unlock(&C.lock);
    out->steps_done = atomic_load_explicit(&C.steps_done, memory_order_relaxed);
}

void pt_collector_after_fork_child(void)
{
    /* The parent's windows and buffers stay behind as copy-on-write pages: freeing them
     * could touch locks another parent thread held at fork time. */
    pthread_mutex_init(&C.lock, NULL);
    pthread_cond_init(&C.changed, NULL);
    C.initialized = C.writer_started = C.busy = C.has_plan = C.waiting = C.stop = false;
    C.open = C.queued = NULL;
    C.sampler = NULL;
    C.nvml = NULL;
    C.cupti_on = false;
    atomic_store(&C.attention, 0);
    pt_cupti_after_fork_child();
}

void pt_collector_shutdown(void)
{
    pthread_mutex_lock(&C.lock);
    bool started = C.writer_started;
    C.stop = true;
    C.has_plan = false;
    pthread_cond_broadcast(&C.changed);
    pthread_mutex_unlock(&C.lock);
    if (started)
        pthread_join(C.writer, NULL);
    pthread_mutex_lock(&C.lock);
    C.writer_started = false;
    C.initialized = false;
    C.busy = C.open != NULL;
    pthread_mutex_unlock(&C.lock);
}
