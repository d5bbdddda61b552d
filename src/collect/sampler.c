/* sampler.c -- the hardware sampler thread (see sampler.h for tiers and costs). */
#define _GNU_SOURCE
#include "collect/sampler.h"
#include "collect/nic.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOW_PERIOD_NS 10000000LL

typedef struct host_metrics {
    int stat_fd, meminfo_fd, statm_fd;
    pt_cpu_jiffies prev_cpu;
    int64_t prev_cpu_ns, prev_tick_ns;
    long page_size;
    pt_nic_counters *nic;      /* NULL: no network counters on this host */
    uint64_t prev_nic_bytes;
    int64_t prev_nic_ns;       /* 0: no reading yet */
} host_metrics;

enum { M_PROC_CPU, M_HOST_CPU, M_HOST_MEM, M_PROC_RSS, M_NIC_TX, M_HOST_COUNT };
static const char *const host_names[M_HOST_COUNT] = {"proc.cpu_util", "host.cpu_util", "host.mem_used",
                                                     "proc.rss_mb", "host.nic_tx_mibps"};

/* Where the sampler's time goes, per kind of read: how the costly reads are found. */
enum { COST_NVML_POLLED, COST_NVML_BUFFERED, COST_NVML_MEMORY, COST_NVML_GPM, COST_HOST, COST_COUNT };
static const char *const cost_names[COST_COUNT] = {"nvml_polled", "nvml_buffered", "nvml_memory", "nvml_gpm", "host"};

/* The polled tier and GPM stretch their period so that their reads stay under these
 * shares of one core, whatever a read costs on this machine. */
#define POLLED_CPU_BUDGET 0.02
#define GPM_CPU_BUDGET 0.005

struct pt_sampler {
    pt_window *w;
    pt_sampler_config cfg;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    host_metrics host;
    uint32_t host_ids[M_HOST_COUNT];
    uint32_t fast_ids[PT_NVML_FAST], slow_ids[PT_NVML_SLOW], gpm_ids[PT_NVML_GPM];
    int64_t ticks, first_tick_ns, last_tick_ns;
    int64_t cpu_ns;                          /* the thread's CPU time, sampled at its end */
    int64_t cost_ns[COST_COUNT], reads[COST_COUNT];
    int64_t fast_count[PT_NVML_FAST], fast_first[PT_NVML_FAST], fast_last[PT_NVML_FAST];
};

static int64_t cpu_time_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void add_sample(pt_sampler *s, uint32_t metric, int64_t ts, double value)
{
    pt_window *w = s->w;
    if (metric == PT_NAMES_NONE)
        return;
    if (w->sample_count == w->sample_cap) {
        w->samples_dropped++;
        return;
    }
    w->samples[w->sample_count++] = (pt_counter_record){ts, value, metric};
}

/* Reads a small /proc file from the start through a descriptor kept open. */
static ssize_t read_proc(int fd, char *buf, size_t cap)
{
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, buf, cap - 1, 0);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

static unsigned long long field_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

double pt_host_cpu_percent(const char *stat_text, pt_cpu_jiffies *prev)
{
    unsigned long long v[8] = {0};
    sscanf(stat_text, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
           &v[6], &v[7]);
    uint64_t idle = v[3] + v[4], total = 0;
    for (int i = 0; i < 8; i++)
        total += v[i];
    uint64_t busy = total - idle;
    double percent = -1;
    if (prev->total && total > prev->total)
        percent = 100.0 * (double)(busy - prev->busy) / (double)(total - prev->total);
    prev->busy = busy, prev->total = total;
    return percent;
}

static void sample_host_slow(pt_sampler *s, int64_t now)
{
    host_metrics *h = &s->host;
    char buf[4096];
    if (read_proc(h->stat_fd, buf, sizeof buf) > 0) {
        double percent = pt_host_cpu_percent(buf, &h->prev_cpu);
        if (percent >= 0)
            add_sample(s, s->host_ids[M_HOST_CPU], now, percent);
    }
    if (read_proc(h->meminfo_fd, buf, sizeof buf) > 0) {
        double total = (double)field_after(buf, "MemTotal:"), avail = (double)field_after(buf, "MemAvailable:");
        if (total > 0)
            add_sample(s, s->host_ids[M_HOST_MEM], now, 100.0 * (total - avail) / total);
    }
    if (read_proc(h->statm_fd, buf, sizeof buf) > 0) {
        unsigned long long size = 0, resident = 0;
        if (sscanf(buf, "%llu %llu", &size, &resident) == 2)
            add_sample(s, s->host_ids[M_PROC_RSS], now, (double)resident * (double)h->page_size / (1024.0 * 1024.0));
    }
}

/* The host's network bytes sent since the last host sample, as a rate (nic.h). */
static void sample_nic(pt_sampler *s, int64_t now)
{
    host_metrics *h = &s->host;
    uint64_t bytes;
    if (!h->nic || !pt_nic_counters_read(h->nic, &bytes)) {
        h->prev_nic_ns = 0;
        return;
    }
    double rate = h->prev_nic_ns ? pt_nic_rate_mibps(h->prev_nic_bytes, bytes, now - h->prev_nic_ns) : -1;
    if (rate >= 0)
        add_sample(s, s->host_ids[M_NIC_TX], now, rate);
    h->prev_nic_bytes = bytes, h->prev_nic_ns = now;
}

/* This process's CPU use since the last host sample (the kernel accounts it in ns). */
static void sample_process_cpu(pt_sampler *s, int64_t now)
{
    host_metrics *h = &s->host;
    int64_t cpu = cpu_time_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (h->prev_tick_ns && now > h->prev_tick_ns)
        add_sample(s, s->host_ids[M_PROC_CPU], now, 100.0 * (double)(cpu - h->prev_cpu_ns) / (double)(now - h->prev_tick_ns));
    h->prev_cpu_ns = cpu, h->prev_tick_ns = now;
}

static void add_fast(pt_sampler *s, int metric, int64_t ts, double value)
{
    if (!s->fast_count[metric]++)
        s->fast_first[metric] = ts;
    s->fast_last[metric] = ts;
    add_sample(s, s->fast_ids[metric], ts, value);
}

/* Charges the time since *since to one kind of read; returns the read's cost. */
static int64_t charge(pt_sampler *s, int kind, int64_t *since)
{
    int64_t now = pt_now_ns(), cost = now - *since;
    s->cost_ns[kind] += cost;
    s->reads[kind]++;
    *since = now;
    return cost;
}

static int64_t sample_polled(pt_sampler *s, unsigned which, int64_t now)
{
    double v[PT_NVML_FAST];
    int64_t t = now;
    unsigned valid = pt_nvml_read_fast(s->cfg.nvml, which, v);
    for (int i = 0; i < PT_NVML_FAST; i++)
        if (valid & (1u << i))
            add_fast(s, i, now, v[i]);
    return charge(s, COST_NVML_POLLED, &t);
}

static void buffered_sample(void *ctx, int metric, uint64_t epoch_us, double value)
{
    pt_sampler *s = ctx;
    /* The driver stamps samples with the wall clock; the trace's times are monotonic. */
    add_fast(s, metric, (int64_t)epoch_us * 1000 - s->w->wall_origin_ns, value);
}

static void sample_buffered(pt_sampler *s)
{
    int64_t t = pt_now_ns();
    uint64_t since = (uint64_t)((s->first_tick_ns + s->w->wall_origin_ns) / 1000);
    pt_nvml_read_buffered(s->cfg.nvml, since, buffered_sample, s);
    charge(s, COST_NVML_BUFFERED, &t);
}

/* One read of a slower NVML tier (memory, GPM): the values it marks valid, under their
 * metric ids; its cost is charged to cost_kind and returned. */
static int64_t sample_tier(pt_sampler *s, int64_t now, unsigned (*read)(pt_nvml *, double *), const uint32_t *ids,
                           int count, int cost_kind)
{
    double v[PT_MAX(PT_NVML_SLOW, PT_NVML_GPM)];
    int64_t t = now;
    unsigned valid = read(s->cfg.nvml, v);
    for (int i = 0; i < count; i++)
        if (valid & (1u << i))
            add_sample(s, ids[i], now, v[i]);
    return charge(s, cost_kind, &t);
}

static void sleep_until(int64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

static void *sampler_main(void *arg)
{
    pt_sampler *s = arg;
    int64_t cpu_start = cpu_time_ns(CLOCK_THREAD_CPUTIME_ID);
    pt_nvml *nvml = s->cfg.nvml;
    /* Polled: the fast metrics the driver does not buffer. Without any, nothing changes
     * faster than the 10 ms tier, and the thread wakes only then (each wake-up costs CPU:
     * at 100 us, about a fifth of a core on a small VM). */
    unsigned polled = nvml ? ~pt_nvml_buffered(nvml) & ((1u << PT_NVML_FAST) - 1) : 0;
    int64_t asked = (int64_t)s->cfg.period_us * 1000;
    int64_t period = polled ? asked : PT_MAX(asked, SLOW_PERIOD_NS);
    int64_t gpm_asked = (int64_t)PT_MAX(s->cfg.gpm_period_ms, 1) * 1000000, gpm_period = gpm_asked;
    int64_t polled_cost = 0; /* running mean of one polled read */
    int64_t next = pt_now_ns(), next_slow = next, next_gpm = next;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        int64_t now = pt_now_ns();
        if (!s->ticks)
            s->first_tick_ns = now;
        s->last_tick_ns = now;
        s->ticks++;
        if (polled) {
            int64_t cost = sample_polled(s, polled, now);
            polled_cost = polled_cost ? polled_cost + (cost - polled_cost) / 8 : cost;
            period = PT_MAX(asked, (int64_t)((double)polled_cost / POLLED_CPU_BUDGET));
        }
        if (now >= next_slow) {
            int64_t t = now;
            sample_process_cpu(s, now);
            sample_host_slow(s, now);
            sample_nic(s, now);
            charge(s, COST_HOST, &t);
            if (nvml) {
                sample_buffered(s);
                sample_tier(s, now, pt_nvml_read_slow, s->slow_ids, PT_NVML_SLOW, COST_NVML_MEMORY);
                if (now >= next_gpm && pt_nvml_has_gpm(nvml)) {
                    int64_t cost = sample_tier(s, now, pt_nvml_read_gpm, s->gpm_ids, PT_NVML_GPM, COST_NVML_GPM);
                    gpm_period = PT_MAX(gpm_asked, (int64_t)((double)cost / GPM_CPU_BUDGET));
                    next_gpm = now + gpm_period;
                }
            }
            next_slow = now + SLOW_PERIOD_NS;
        }
        next += period;
        int64_t after = pt_now_ns();
        if (next < after)
            next = after; /* overran: restart from now, the achieved period will show it */
        else
            sleep_until(next);
    }
    if (nvml && s->ticks) /* the last samples the driver took before the window closed */
        sample_buffered(s);
    s->cpu_ns = cpu_time_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    return NULL;
}

static void name_metrics(pt_sampler *s)
{
    pt_window *w = s->w;
    for (int i = 0; i < M_HOST_COUNT; i++)
        s->host_ids[i] = pt_window_name(w, host_names[i], strlen(host_names[i]));
    if (!s->cfg.nvml)
        return;
    char name[64];
    int gpu = pt_nvml_device_index(s->cfg.nvml);
#define NAME_ALL(ids, names, count)                                                   \
    for (int i = 0; i < (count); i++) {                                               \
        int n = snprintf(name, sizeof name, "gpu%d.%s", gpu < 0 ? 0 : gpu, (names)[i]); \
        (ids)[i] = pt_window_name(w, name, (size_t)n);                                 \
    }
    NAME_ALL(s->fast_ids, pt_nvml_fast_names, PT_NVML_FAST)
    NAME_ALL(s->slow_ids, pt_nvml_slow_names, PT_NVML_SLOW)
    NAME_ALL(s->gpm_ids, pt_nvml_gpm_names, PT_NVML_GPM)
#undef NAME_ALL
}

pt_sampler *pt_sampler_start(pt_window *w, const pt_sampler_config *cfg, pt_error *err)
{
    if (cfg->period_us <= 0) {
        pt_error_set(err, "the hardware sampler is disabled (PERFTRACKER_SAMPLE_PERIOD_US=0)");
        return NULL;
    }
    pt_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        pt_error_set(err, "out of memory starting the hardware sampler");
        return NULL;
    }
    s->w = w;
    s->cfg = *cfg;
    atomic_init(&s->stop, false);
    s->host.stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    s->host.meminfo_fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    s->host.statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    s->host.page_size = sysconf(_SC_PAGESIZE);
    s->host.nic = pt_nic_counters_open("/sys");
    name_metrics(s);
    int rc = pthread_create(&s->thread, NULL, sampler_main, s);
    if (rc != 0) {
        pt_error_set(err, "cannot start the hardware sampler thread: %s", strerror(rc));
        pt_sampler_stop(s);
        return NULL;
    }
    s->started = true;
    return s;
}

static void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* The achieved period: the shortest mean interval between samples of one fast GPU
 * metric (the data's real resolution, buffered or polled), else between wake-ups. */
static int64_t achieved_period_ns(const pt_sampler *s)
{
    int64_t best = 0;
    for (int i = 0; i < PT_NVML_FAST; i++) {
        if (s->fast_count[i] < 2)
            continue;
        int64_t mean = (s->fast_last[i] - s->fast_first[i]) / (s->fast_count[i] - 1);
        if (mean > 0 && (!best || mean < best))
            best = mean;
    }
    if (!best && s->ticks > 1)
        best = (s->last_tick_ns - s->first_tick_ns) / (s->ticks - 1);
    return best;
}

/* Writes the achieved period, the sampler's CPU share and what each kind of read cost
 * into the window (the trace's META). */
static void report(pt_sampler *s)
{
    pt_window *w = s->w;
    int64_t period = achieved_period_ns(s), wall = s->last_tick_ns - s->first_tick_ns;
    if (period > 0)
        w->sample_period_us = (int32_t)PT_MAX(period / 1000, 1);
    if (wall > 0) {
        w->sampler_cpu_pct = 100.0 * (double)s->cpu_ns / (double)wall;
        pt_window_fact_int(w, "hw_sampler_cpu_ns", s->cpu_ns);
        pt_window_fact_int(w, "hw_sampler_wall_ns", wall);
    }
    size_t used = 0;
    for (int k = 0; k < COST_COUNT; k++) {
        if (!s->reads[k])
            continue;
        char key[64];
        snprintf(key, sizeof key, "hw_read_ns.%s", cost_names[k]);
        pt_window_fact_int(w, key, s->cost_ns[k] / s->reads[k]);
        int n = snprintf(w->sampler_reads + used, sizeof w->sampler_reads - used, "%s%s %.1f us x %lld",
                         used ? ", " : "", cost_names[k], (double)s->cost_ns[k] / (double)s->reads[k] / 1000.0,
                         (long long)s->reads[k]);
        if (n > 0)
            used = PT_MIN(used + (size_t)n, sizeof w->sampler_reads - 1);
    }
    bool polled = s->cfg.nvml && (~pt_nvml_buffered(s->cfg.nvml) & ((1u << PT_NVML_FAST) - 1));
    if (polled && w->sample_period_us > 2 * s->cfg.period_us)
        pt_window_warn(w, "the hardware sampler achieved one sample every %d us (asked for %d us; a read costs "
                          "%lld us here, and the sampler keeps its reads under %.0f%% of a core)",
                       w->sample_period_us, s->cfg.period_us,
                       (long long)(s->cost_ns[COST_NVML_POLLED] / PT_MAX(s->reads[COST_NVML_POLLED], 1) / 1000),
                       100 * POLLED_CPU_BUDGET);
}

void pt_sampler_stop(pt_sampler *s)
{
    if (!s)
        return;
    if (s->started) {
        atomic_store(&s->stop, true);
        pthread_join(s->thread, NULL);
        report(s);
    }
    close_fd(s->host.stat_fd);
    close_fd(s->host.meminfo_fd);
    close_fd(s->host.statm_fd);
    pt_nic_counters_close(s->host.nic);
    free(s);
}
