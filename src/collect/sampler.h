/* sampler.h -- the hardware sampler: one thread, started and stopped with each window.
 *
 * Every tick (period_us, 100 µs by default) it reads the cheap, fast-changing GPU values
 * (utilization, SM clock and power through NVML); every 10 ms the values the OS or driver
 * refresh more slowly (this process's CPU use; host CPU utilization from /proc/stat, whose
 * clock ticks are 10 ms; memory; the bytes the host's network links sent, nic.h; GPU
 * memory used); and at the GPM period the GPU
 * Performance Monitoring rates. Without a GPU the thread wakes only every 10 ms: each
 * wake-up costs CPU (at 100 µs, about a fifth of a core on a small VM), and nothing on
 * the host changes faster. Sleeping is by absolute deadlines, so a slow read does not
 * shift later ticks; when a tick overruns, the next one starts from now and the achieved
 * period (written to the trace) says so.
 *
 * Samples go into the window's preallocated array, which only this thread writes until
 * it is joined; a full array drops and counts. */
#ifndef PT_COLLECT_SAMPLER_H
#define PT_COLLECT_SAMPLER_H

#include "collect/nvml.h"
#include "collect/window.h"

typedef struct pt_sampler_config {
    int32_t period_us;       /* fast tier; <= 0 disables the sampler */
    int32_t gpm_period_ms;
    pt_nvml *nvml;           /* NULL: host metrics only (borrowed, not closed) */
} pt_sampler_config;

typedef struct pt_sampler pt_sampler;

/* Starts sampling into w. NULL with err set when the thread cannot start. */
pt_sampler *pt_sampler_start(pt_window *w, const pt_sampler_config *cfg, pt_error *err);
/* Stops and joins the thread and records the achieved period in w. */
void pt_sampler_stop(pt_sampler *s);

/* The "cpu" line of /proc/stat's text as busy and total clock ticks (user, nice, system,
 * idle, iowait, irq, softirq, steal; idle and iowait are not busy). */
typedef struct pt_cpu_jiffies {
    uint64_t busy, total;
} pt_cpu_jiffies;
/* Host CPU utilization in % since the reading in *prev, which this reading replaces; -1
 * for the first reading or when the counters did not advance. Apart from the thread so
 * that a test can give it the text. */
double pt_host_cpu_percent(const char *stat_text, pt_cpu_jiffies *prev);

#endif
