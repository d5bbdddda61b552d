/* common.h -- small helpers every perftracker module uses.
 *
 * The analysis side treats running out of memory as fatal (pt_xmalloc prints one line and
 * exits): a half-built report is worse than none, and the CLI is a short-lived process.
 * The one exception is work run under pt_run_guarded: there an allocation that fails
 * unwinds to the guard, which returns false, so one worker file that cannot be read in
 * the memory there is fails alone (analyze.c). Code that runs inside a training job
 * (collect/) never uses these; it degrades instead. */
#ifndef PT_UTIL_COMMON_H
#define PT_UTIL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>

#define PT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PT_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define PT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define PT_LIKELY(x) __builtin_expect(!!(x), 1)
#define PT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PT_PRINTF(fmt, args)
#define PT_LIKELY(x) (x)
#define PT_UNLIKELY(x) (x)
#endif

void *pt_xmalloc(size_t n);
void *pt_xcalloc(size_t n, size_t size);
void *pt_xrealloc(void *p, size_t n);
char *pt_xstrdup(const char *s);
char *pt_xstrndup(const char *s, size_t n);
/* vprintf's text as a new string, cut to max - 1 bytes as a char[max] would cut it. */
char *pt_xvformat(size_t max, const char *fmt, va_list ap);

/* Runs fn(arg). When an allocation by pt_x* fails inside it, the thread unwinds to here
 * (longjmp): each release registered with pt_unwind_push since is called, newest first,
 * *asked_bytes says what the failed request was, and the call returns false. What fn
 * allocated without registering it stays allocated: register what can grow large. Guards
 * nest and are per thread; outside one, a failed allocation still ends the process. */
bool pt_run_guarded(void (*fn)(void *arg), void *arg, size_t *asked_bytes);
/* Registers release(arg) for the unwind of the innermost guard on this thread (no-op
 * outside one); pt_unwind_pop(arg) takes it off again once arg is released normally. */
void pt_unwind_push(void (*release)(void *arg), void *arg);
void pt_unwind_pop(void *arg);

/* Bytes this process may still allocate: the least of what RLIMIT_AS and RLIMIT_DATA
 * leave above its current size, the cgroup's memory.max above memory.current, and the
 * machine's MemAvailable. SIZE_MAX when none of them is known. */
size_t pt_memory_headroom(void);
/* What the analysis may use: PERFTRACKER_ANALYZE_MEMORY_MB when set (a shared machine's
 * fair share, or more than MemAvailable when swap is fine), else pt_memory_headroom. */
size_t pt_analysis_memory(void);

/* Frees strings[0..count) and the array that holds them. */
void pt_free_strings(char **strings, size_t count);

/* Grow *items (of elem_size each) so that it holds at least need elements. */
void pt_grow(void **items, size_t *cap, size_t need, size_t elem_size);
#define PT_GROW(arr, cap, need) pt_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* Three-way comparisons for qsort comparators (-1, 0, 1); pt_cmp_desc puts the larger
 * double first. NaN has no order: keep it out of what is sorted. */
static inline int pt_cmp_i64(int64_t x, int64_t y)
{
    return (x > y) - (x < y);
}
static inline int pt_cmp_desc(double x, double y)
{
    return x == y ? 0 : x > y ? -1 : 1;
}

/* An error a library call hands back instead of printing: one sentence. */
typedef struct pt_error {
    char message[512];
} pt_error;

void pt_error_set(pt_error *err, const char *fmt, ...) PT_PRINTF(2, 3);

/* Monotonic clock in nanoseconds. */
int64_t pt_now_ns(void);
/* Wall clock in Unix-epoch nanoseconds. */
int64_t pt_wall_ns(void);
/* Now as ISO-8601 UTC ("2026-11-29T07:30:00Z"), or SOURCE_DATE_EPOCH when set. */
void pt_iso_now(char *buf, size_t cap);

/* The value of one hexadecimal digit (either case), or -1. */
static inline int pt_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The last path component of path (no allocation). */
const char *pt_basename(const char *path);
/* The folder path names a file in: "." without a slash, "/" for "/name". A new string. */
char *pt_dirname(const char *path);
/* Whether s ends with suffix ("" ends every string). */
bool pt_ends_with(const char *s, const char *suffix);

#endif
