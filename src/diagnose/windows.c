/* windows.c -- do the workers' profiled windows hold the same iterations? (windows.h) */
#include "diagnose/windows.h"
#include "util/buf.h"
#include "util/common.h"
#include "util/stats.h"

#include <stdlib.h>
#include <string.h>

#define EPOCH_2001_NS INT64_C(1000000000000000000) /* earlier starts are not wall-clock times */
#define MAX_NAMED 8                                /* shifted workers named per warning */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t first_step(const pt_worker_summary *s)
{
    return s->steps[0].step;
}

static int64_t last_step(const pt_worker_summary *s)
{
    return s->steps[s->step_count - 1].step;
}

/* ------------------------------------------------------------ step numbers */

/* The first step most workers began with; ties go to the lowest. */
static int64_t common_first_step(pt_worker_summary *const *workers, size_t n, size_t with_steps)
{
    int64_t *firsts = pt_xmalloc(with_steps * sizeof *firsts);
    size_t k = 0;
    for (size_t w = 0; w < n; w++)
        if (workers[w]->step_count)
            firsts[k++] = first_step(workers[w]);
    qsort(firsts, k, sizeof *firsts, cmp_i64);
    int64_t best = firsts[0];
    size_t best_run = 0;
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && firsts[j] == firsts[i])
            j++;
        if (j - i > best_run)
            best_run = j - i, best = firsts[i];
        i = j;
    }
    free(firsts);
    return best;
}

pt_window_shift *pt_window_step_shifts(pt_worker_summary *const *workers, size_t n, size_t *count)
{
    *count = 0;
    size_t with_steps = 0;
    for (size_t w = 0; w < n; w++)
        with_steps += workers[w]->step_count > 0;
    if (with_steps < 2)
        return NULL;
    int64_t common = common_first_step(workers, n, with_steps);
    size_t reference = 0;
    while (!workers[reference]->step_count || first_step(workers[reference]) != common)
        reference++;
    pt_window_shift *out = NULL;
    size_t cap = 0;
    for (size_t w = 0; w < n; w++) {
        const pt_worker_summary *s = workers[w], *r = workers[reference];
        if (!s->step_count || first_step(s) == common)
            continue;
        PT_GROW(out, cap, *count + 1);
        out[(*count)++] = (pt_window_shift){w, reference, 0, 0, 0, first_step(s), common, last_step(s), last_step(r)};
    }
    return out;
}

/* ------------------------------------------------------------ one host's clock */

typedef struct timed_worker {
    const char *host;
    int64_t start;
    size_t index;
} timed_worker;

static int cmp_host_then_start(const void *a, const void *b)
{
    const timed_worker *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : cmp_i64(&x->start, &y->start);
}

static int64_t median_step_ns(const pt_worker_summary *s)
{
    int64_t *durations = pt_xmalloc(s->step_count * sizeof *durations);
    for (size_t i = 0; i < s->step_count; i++)
        durations[i] = s->steps[i].dur_ns;
    int64_t median = pt_median_i64(durations, s->step_count);
    free(durations);
    return median;
}

/* Whether a's window is more than a step away from the reference's at both ends, the
 * same way (windows.h says why a step, and why both ends). */
static bool shifted(int64_t start_ns, int64_t end_ns, int64_t step_ns)
{
    return step_ns > 0 && ((start_ns > step_ns && end_ns > step_ns) || (start_ns < -step_ns && end_ns < -step_ns));
}

static void compare_with_host_median(pt_worker_summary *const *workers, const timed_worker *group, size_t k,
                                     pt_window_shift **out, size_t *cap, size_t *count)
{
    const pt_worker_summary *r = workers[group[(k - 1) / 2].index];
    int64_t r_end = r->window_start_ns + r->window_ns, r_step = median_step_ns(r);
    for (size_t i = 0; i < k; i++) {
        const pt_worker_summary *s = workers[group[i].index];
        if (s == r)
            continue;
        int64_t start = s->window_start_ns - r->window_start_ns;
        int64_t end = s->window_start_ns + s->window_ns - r_end;
        int64_t step = PT_MAX(median_step_ns(s), r_step);
        if (!shifted(start, end, step))
            continue;
        PT_GROW(*out, *cap, *count + 1);
        (*out)[(*count)++] = (pt_window_shift){group[i].index, group[(k - 1) / 2].index, start, end, step,
                                               first_step(s), first_step(r), last_step(s), last_step(r)};
    }
}

pt_window_shift *pt_window_clock_shifts(pt_worker_summary *const *workers, size_t n, size_t *count)
{
    *count = 0;
    timed_worker *timed = pt_xmalloc((n ? n : 1) * sizeof *timed);
    size_t m = 0;
    for (size_t w = 0; w < n; w++) {
        const pt_worker_summary *s = workers[w];
        if (s->host && s->host[0] && s->window_start_ns > EPOCH_2001_NS && s->window_ns > 0 && s->step_count)
            timed[m++] = (timed_worker){s->host, s->window_start_ns, w};
    }
    qsort(timed, m, sizeof *timed, cmp_host_then_start);
    pt_window_shift *out = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && strcmp(timed[j].host, timed[i].host) == 0)
            j++;
        if (j - i >= 2)
            compare_with_host_median(workers, timed + i, j - i, &out, &cap, count);
        i = j;
    }
    free(timed);
    return out;
}

/* ------------------------------------------------------------ warnings */

static void name_worker(pt_buf *b, const pt_worker_summary *s)
{
    if (s->rank >= 0)
        pt_buf_printf(b, "rank %d", s->rank);
    else
        pt_buf_printf(b, "%s", s->name ? s->name : "a worker");
}

static void step_warning(pt_worker_summary *const *workers, const pt_window_shift *shift, size_t count,
                         pt_json *warnings)
{
    pt_buf b = PT_BUF_INIT;
    const pt_worker_summary *r = workers[shift[0].reference];
    pt_buf_printf(&b, "the profiled windows do not hold the same steps: most workers (");
    name_worker(&b, r);
    pt_buf_printf(&b, " among them) profiled steps %lld-%lld, but ", (long long)shift[0].reference_first_step,
                  (long long)shift[0].reference_last_step);
    for (size_t i = 0; i < count && i < MAX_NAMED; i++) {
        int64_t apart = shift[i].first_step - shift[i].reference_first_step;
        pt_buf_printf(&b, "%s", i ? "; " : "");
        name_worker(&b, workers[shift[i].worker]);
        pt_buf_printf(&b, " steps %lld-%lld (%lld step%s %s)", (long long)shift[i].first_step,
                      (long long)shift[i].last_step, (long long)(apart < 0 ? -apart : apart),
                      apart == 1 || apart == -1 ? "" : "s", apart < 0 ? "earlier" : "later");
    }
    if (count > MAX_NAMED)
        pt_buf_printf(&b, "; and %zu more workers", count - MAX_NAMED);
    pt_buf_puts(&b, ": the comparison across workers compares different iterations of the job");
    pt_json_push(warnings, pt_json_string(b.data));
    pt_buf_free(&b);
}

static void clock_warning(pt_worker_summary *const *workers, const pt_window_shift *shift, size_t count,
                          pt_json *warnings)
{
    pt_buf b = PT_BUF_INIT;
    const pt_worker_summary *r = workers[shift[0].reference];
    pt_buf_printf(&b, "the profiled windows on host %s do not line up in time (one clock): ", r->host);
    for (size_t i = 0; i < count && i < MAX_NAMED; i++) {
        const pt_window_shift *x = &shift[i];
        bool later = x->start_ns > 0;
        int64_t start = later ? x->start_ns : -x->start_ns, end = later ? x->end_ns : -x->end_ns;
        pt_buf_printf(&b, "%s", i ? "; " : "");
        name_worker(&b, workers[x->worker]);
        pt_buf_printf(&b, "'s window starts %.2f s and ends %.2f s %s than ", (double)start / 1e9, (double)end / 1e9,
                      later ? "later" : "earlier");
        name_worker(&b, workers[x->reference]);
        pt_buf_printf(&b, "'s (%.1f steps of %.2f s)", (double)PT_MIN(start, end) / (double)x->step_ns,
                      (double)x->step_ns / 1e9);
    }
    if (count > MAX_NAMED)
        pt_buf_printf(&b, "; and %zu more workers", count - MAX_NAMED);
    pt_buf_puts(&b, ": more than a step apart, they profiled different iterations, and the comparison across "
                    "workers compares different work");
    pt_json_push(warnings, pt_json_string(b.data));
    pt_buf_free(&b);
}

void pt_window_alignment_warnings(pt_worker_summary *const *workers, size_t n, pt_json *warnings)
{
    size_t count;
    pt_window_shift *shifts = pt_window_step_shifts(workers, n, &count);
    if (count)
        step_warning(workers, shifts, count, warnings);
    free(shifts);
    shifts = pt_window_clock_shifts(workers, n, &count);
    for (size_t i = 0; i < count;) { /* one warning per host: its shifts share their reference */
        size_t j = i;
        while (j < count && shifts[j].reference == shifts[i].reference)
            j++;
        clock_warning(workers, shifts + i, j - i, warnings);
        i = j;
    }
    free(shifts);
}
