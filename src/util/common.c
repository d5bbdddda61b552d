/* common.c -- allocation that cannot fail, errors as values, clocks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void out_of_memory(size_t n)
{
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
