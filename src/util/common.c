/* common.c -- allocation that cannot fail (or unwinds to a guard), errors as values,
 * clocks, the memory left to this process. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ guarded work */

#define MAX_UNWIND 32

typedef struct unwind_entry {
    void (*release)(void *);
    void *arg;
} unwind_entry;

typedef struct guard {
    jmp_buf env;
    size_t asked;
    unwind_entry entries[MAX_UNWIND];
    size_t count;
    size_t overflow; /* registrations beyond MAX_UNWIND: not released, only counted */
    struct guard *outer;
} guard;

static _Thread_local guard *current_guard;

void pt_unwind_push(void (*release)(void *), void *arg)
{
    guard *g = current_guard;
    if (!g)
        return;
    if (g->count == MAX_UNWIND) {
        g->overflow++;
        return;
    }
    g->entries[g->count++] = (unwind_entry){release, arg};
}

void pt_unwind_pop(void *arg)
{
    guard *g = current_guard;
    if (!g)
        return;
    /* Normally the newest; a release out of order is found and taken out. */
    for (size_t i = g->count; i-- > 0;) {
        if (g->entries[i].arg == arg) {
            memmove(&g->entries[i], &g->entries[i + 1], (g->count - i - 1) * sizeof g->entries[0]);
            g->count--;
            return;
        }
    }
    if (g->overflow)
        g->overflow--;
}

bool pt_run_guarded(void (*fn)(void *), void *arg, size_t *asked_bytes)
{
    /* On the heap, not the stack: what changes in an automatic object between setjmp and
     * longjmp is indeterminate afterwards (C11 7.13.2.1). A guard that cannot be had
     * (a few hundred bytes) leaves fn unguarded. */
    guard *g = calloc(1, sizeof *g);
    if (!g) {
        fn(arg);
        return true;
    }
    g->outer = current_guard;
    current_guard = g;
    bool completed = true;
    if (setjmp(g->env) == 0) {
        fn(arg);
    } else {
        /* Released with the guard still current: a release that frees something
         * registered pops it, and finds nothing (the entries are taken off first). */
        size_t n = g->count;
        g->count = 0;
        for (size_t i = n; i-- > 0;)
            g->entries[i].release(g->entries[i].arg);
        if (asked_bytes)
            *asked_bytes = g->asked;
        completed = false;
    }
    current_guard = g->outer;
    free(g);
    return completed;
}

static void out_of_memory(size_t n)
{
    guard *g = current_guard;
    if (g) {
        g->asked = n;
        longjmp(g->env, 1);
    }
    fprintf(stderr, "perftracker: out of memory (asked for %zu bytes)\n", n);
    exit(70);
}

void *pt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory(n);
    return p;
}

void *pt_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory(n * size);
    return p;
}

void *pt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        out_of_memory(n);
    return q;
}

char *pt_xstrdup(const char *s)
{
    return pt_xstrndup(s, strlen(s));
}

char *pt_xstrndup(const char *s, size_t n)
{
    char *d = pt_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *pt_xvformat(size_t max, const char *fmt, va_list ap)
{
    char *s = pt_xmalloc(max);
    int n = vsnprintf(s, max, fmt, ap);
    size_t len = n < 0 ? 0 : PT_MIN((size_t)n, max - 1);
    s[len] = '\0';
    return pt_xrealloc(s, len + 1);
}

void pt_free_strings(char **strings, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(strings[i]);
    free(strings);
}

void pt_grow(void **items, size_t *cap, size_t need, size_t elem_size)
{
    if (need <= *cap)
        return;
    size_t new_cap = *cap ? *cap : 8;
    while (new_cap < need)
        new_cap *= 2;
    *items = pt_xrealloc(*items, new_cap * elem_size);
    *cap = new_cap;
}

void pt_error_set(pt_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

int64_t pt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t pt_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *pt_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *pt_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return pt_xstrdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = pt_xmalloc(n + 1);
    memcpy(dir, path, n);
    dir[n] = '\0';
    return dir;
}

bool pt_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* SOURCE_DATE_EPOCH (the reproducible-builds convention) pins the timestamp, so two runs
 * over the same inputs give byte-identical documents. */
void pt_iso_now(char *buf, size_t cap)
{
    const char *fixed = getenv("SOURCE_DATE_EPOCH");
    time_t now = fixed && *fixed ? (time_t)strtoll(fixed, NULL, 10) : time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ------------------------------------------------------------ memory left */

static size_t below(size_t limit, size_t used)
{
    return limit > used ? limit - used : 0;
}

/* The first number on the line of `path` that starts with `key` (the whole file when key
 * is ""), or -1. */
static long long read_number(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256];
    long long value = -1;
    size_t key_len = strlen(key);
    while (value < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, key_len) != 0)
            continue;
        char *end;
        long long v = strtoll(line + key_len, &end, 10);
        if (end != line + key_len && v >= 0)
            value = v;
        if (!key_len)
            break;
    }
    fclose(f);
    return value;
}

size_t pt_analysis_memory(void)
{
    const char *given = getenv("PERFTRACKER_ANALYZE_MEMORY_MB");
    long long given_mb = given ? atoll(given) : 0;
    return given_mb > 0 ? (size_t)PT_MIN(given_mb, (long long)(SIZE_MAX >> 21)) << 20 : pt_memory_headroom();
}

size_t pt_memory_headroom(void)
{
    size_t headroom = SIZE_MAX;
    long page = sysconf(_SC_PAGESIZE);
    /* /proc/self/statm: size resident shared text lib data dt, in pages. */
    unsigned long long size_pages = 0, data_pages = 0, skip;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f) {
        if (fscanf(f, "%llu %llu %llu %llu %llu %llu", &size_pages, &skip, &skip, &skip, &skip, &data_pages) != 6)
            size_pages = data_pages = 0;
        fclose(f);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        headroom = PT_MIN(headroom, below((size_t)rl.rlim_cur, (size_t)(size_pages * (unsigned long long)page)));
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        headroom = PT_MIN(headroom, below((size_t)rl.rlim_cur, (size_t)(data_pages * (unsigned long long)page)));
    long long cgroup_max = read_number("/sys/fs/cgroup/memory.max", ""); /* "max" reads as -1 */
    long long cgroup_now = read_number("/sys/fs/cgroup/memory.current", "");
    if (cgroup_max >= 0 && cgroup_now >= 0)
        headroom = PT_MIN(headroom, below((size_t)cgroup_max, (size_t)cgroup_now));
    long long available_kb = read_number("/proc/meminfo", "MemAvailable:");
    if (available_kb >= 0)
        headroom = PT_MIN(headroom, (size_t)available_kb * 1024);
    return headroom;
}
