/* kineto.c -- streaming reader for PyTorch-profiler (Kineto) Chrome-trace JSON.
 *
 * Design. A Kineto trace is one JSON object whose "traceEvents" array holds millions of
 * small, flat event objects; everything else (distributedInfo, deviceProperties,
 * baseTimeNanoseconds, ...) is small and may come before or after the array. So the
 * reader is two parsers:
 *   - a specialised event scanner that reads one event object at a time straight out of
 *     a fixed buffer, picks the dozen keys the analysis needs and skips the rest without
 *     building anything;
 *   - the generic tree parser (util/json.c) for the small top-level members.
 *
 * The buffer is refilled from pt_input (plain, gzip or zstd). Each event is parsed as a
 * unit: when the buffer ends inside one, the scanner reports NEED_MORE, the unconsumed
 * tail moves to the front, more bytes are read and the event is parsed again. Memory is
 * therefore one buffer (grown only for a single huge event, up to max_event_bytes;
 * beyond that the event is discarded in a streaming skip) no matter the file size.
 * Whitespace between the top level's tokens (before and after the object, around keys,
 * colons, brackets and the commas between events) is consumed as it is read, so a run
 * of any length streams through the buffer and never grows it; whitespace inside an
 * event or a top-level value is part of that value and counts toward its size.
 *
 * Cost. Every byte is looked at about once: strings are crossed with memchr, numbers
 * converted in place (times exactly, as integer nanoseconds), and skipped values walked
 * with a depth counter, never recursion, so deep nesting cannot overflow the stack.
 * A NUL written after the valid bytes stops every scanning loop without bounds checks.
 *
 * Hostile or odd bytes. A UTF-8 byte-order mark before the JSON is skipped. A NUL inside
 * a string (raw, or \u0000) becomes U+FFFD (replace_nuls), so two names that differ
 * after it stay two names, and so do top-level strings (host, device). A second "traceEvents" list is an error, not a merge: JSON
 * parsers keep the last of two equal keys and streaming readers both, so the file means
 * different traces to different tools.
 *
 * Variants handled: top-level object or bare event list (the "JSON array format"); CUDA
 * and ROCm; ts as Unix epoch microseconds or as an offset from baseTimeNanoseconds; ts/dur
 * as integers or fractions; tid/pid as numbers or strings ("stream 7" is stream 7). And
 * every generation of torch's profiler, each with its own category names (category_kind):
 *   - the legacy profiler (torch.autograd.profiler, and every build without Kineto): no
 *     "cat"; pid "CPU functions" for operators and record_function ranges, "CUDA
 *     functions" with the device as tid for kernels; ts relative to the profiler's start;
 *   - Kineto of early 2021 (torch 1.8): Operator, Runtime, Kernel, Memcpy, Memset, Python;
 *     tids as strings, GPU events under pid = device and tid "stream N"; flows "async"
 *     "launch"; spans of category "Trace" under pid "Traces"; no deviceProperties;
 *   - Kineto of mid-2021 to 2022 (torch 1.9-1.12): operators, ProfilerStep#N among them,
 *     as cpu_op; the other names turned into today's one by one (cuda_runtime late 2021,
 *     kernel, gpu_memcpy, gpu_memset in 2022), python_function added; numeric tids;
 *     flows "async_gpu", then "async_cpu_to_gpu"; deviceProperties;
 *   - torch 1.13 on: record_function ranges, the steps among them, as user_annotation and
 *     their GPU-side copies as gpu_user_annotation; cuda_driver; flows "ac2g"; ts from
 *     baseTimeNanoseconds.
 * Steps: torch's profiler marks each with a record_function range ProfilerStep#N, and
 * that range's category moved with the generations (none, Operator, cpu_op,
 * user_annotation), so any CPU-side event of that name is a step. Its copy on a GPU
 * stream (gpu_user_annotation, 2021's "User") belongs to a category the analysis ignores
 * and is no step. What the generations add beside the events the analysis does not read
 * (correlation ids, "External id" against "external id", flows) passes through untouched.
 *
 * Parallel spans (pt_kineto_read_span): a span of a large plain file is read from an
 * event start, the reader beginning inside the event list, and stops at the first event
 * start at or after the span's end, so consecutive spans verify each other: each must
 * stop exactly where the next begins. Where the file is cut is kineto_split.c's.
 *
 * Metadata records ("ph":"M": process and thread names) go to the sink's on_metadata
 * when it has one, and every other record the event model does not carry (flows,
 * instants, spans of other categories) to its on_other, as the object's text, so a
 * converted trace keeps them; the analysis asks for neither. */
#define _POSIX_C_SOURCE 200809L
#include "trace/reader.h"
#include "util/json.h"
#include "util/strtab.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_BUFFER (1u << 20)
/* A plain file smaller than INITIAL_BUFFER is read into a buffer of its size (at least
 * this): it fits whole, so the buffer never grows, and a small file does not cost 1 MiB. */
#define SMALL_FILE_BUFFER (4u << 10)
#define DEFAULT_MAX_EVENT_BYTES (64u << 20)
#define MAX_TOP_LEVEL_BYTES (64u << 20)
/* The members we read (distributedInfo, deviceProperties, ...) are a few KiB; a tree costs
 * up to ~30 times its text ([1,1,1,...]), so a larger one is ignored, not parsed. */
#define MAX_PARSED_TOP_LEVEL_BYTES (1u << 20)

enum scan_status { SCAN_OK = 0, SCAN_NEED_MORE = 1, SCAN_BAD = -1, SCAN_STOP = 2 };

typedef struct kineto_reader {
    pt_input *in;
    pt_trace_sink *sink;
    pt_trace_meta *meta;
    const pt_read_options *opts;
    pt_error *err;
    char *buf;           /* buf[len] is always '\0' (the scan sentinel) */
    size_t cap, len, pos;
    bool eof;
    uint64_t discarded;  /* bytes dropped from the front of buf so far */
    size_t max_event;
    pt_buf scratch;      /* unescaped names */
    pt_buf coll_scratch; /* unescaped collective names and metadata values */
    const char *bad_what;
    int64_t events_seen, events_malformed, events_oversized;
    bool saw_trace_events;
    char top_key[32];     /* the top-level key whose value comes next, when we read that
                             value ("traceEvents", top_level_key_wanted); else "" */
    uint64_t stop_at;     /* span reading: stop at the first event start >= this (0: never) */
    uint64_t stopped_at;  /* where it stopped, UINT64_MAX when the event list ended */
} kineto_reader;

/* ------------------------------------------------------------ scanning helpers */

static inline const char *skip_ws(const char *p)
{
    while (pt_json_is_space(*p))
        p++;
    return p;
}

/* The first '"', '\\' or NUL in [p, end), or end. Sixteen bytes per step with SSE2
 * (x86-64's baseline): strings are most of a trace's bytes and kernel names run to
 * hundreds. */
static inline bool string_special(char c)
{
    return c == '"' || c == '\\' || c == '\0';
}
#if defined(__SSE2__)
#include <emmintrin.h>
static inline const char *find_string_special(const char *p, const char *end)
{
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), zero = _mm_setzero_si128();
    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                   _mm_cmpeq_epi8(v, zero));
        int mask = _mm_movemask_epi8(hit);
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
    }
    while (p < end && !string_special(*p))
        p++;
    return p;
}
#else
static inline const char *find_string_special(const char *p, const char *end)
{
    while (p < end && !string_special(*p))
        p++;
    return p;
}
#endif

/* p at '"'. On success body and n delimit the raw contents, and escaped says whether
 * they need unescaped(): backslash escapes, or a raw NUL (not JSON, but a name must not
 * be cut at it; unescaped() makes it U+FFFD). */
static int scan_string(const char **pp, const char *end, const char **body, size_t *n, bool *escaped)
{
    const char *start = *pp + 1;
    const char *q = find_string_special(start, end);
    if (q >= end)
        return SCAN_NEED_MORE;
    *escaped = *q != '"';
    while (*q != '"') { /* walk escapes so an escaped quote does not end the string */
        q += *q == '\\' ? 2 : 1;
        if (q >= end)
            return SCAN_NEED_MORE;
        q = find_string_special(q, end);
        if (q >= end)
            return SCAN_NEED_MORE;
    }
    *body = start;
    *n = (size_t)(q - start);
    *pp = q + 1;
    return SCAN_OK;
}

static inline bool is_delimiter(char c)
{
    return c == ',' || c == '}' || c == ']' || pt_json_is_space(c);
}

/* Numbers that are not plain decimals (exponents) go through strtod on a copy. */
static int scan_number_slow(const char **pp, const char *end, double *out)
{
    const char *p = *pp;
    while (p < end && !is_delimiter(*p))
        p++;
    if (p >= end)
        return SCAN_NEED_MORE;
    char tmp[64];
    size_t n = (size_t)(p - *pp);
    if (n == 0 || n >= sizeof tmp)
        return SCAN_BAD;
    memcpy(tmp, *pp, n);
    tmp[n] = '\0';
    char *stop;
    double v = strtod(tmp, &stop);
    if (stop != tmp + n)
        return SCAN_BAD;
    *out = v;
    *pp = p;
    return SCAN_OK;
}

static const int64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

/* A decimal number scaled by 10^scale_digits and rounded to an integer: microseconds to
 * nanoseconds exactly (scale 3), a counter value in millionths (scale 6), or a plain
 * integer (scale 0). */
static int scan_scaled(const char **pp, const char *end, int scale_digits, int64_t *out)
{
    const char *p = *pp;
    bool negative = false;
    if (*p == '-')
        negative = true, p++;
    uint64_t whole = 0;
    const char *digits = p;
    while (*p >= '0' && *p <= '9') {
        if (p - digits >= 18)
            goto slow; /* would overflow: let strtod saturate it */
        whole = whole * 10 + (uint64_t)(*p++ - '0');
    }
    if (p == digits)
        return p >= end ? SCAN_NEED_MORE : SCAN_BAD;
    int64_t frac = 0;
    int frac_digits = 0;
    bool round_up = false;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (frac_digits < scale_digits)
                frac = frac * 10 + (*p - '0'), frac_digits++;
            else if (frac_digits++ == scale_digits)
                round_up = *p >= '5';
            p++;
        }
    }
    if (*p == 'e' || *p == 'E')
        goto slow;
    if (p >= end)
        return SCAN_NEED_MORE;
    if (!is_delimiter(*p))
        return SCAN_BAD;
    for (int i = frac_digits; i < scale_digits; i++)
        frac *= 10;
    if (whole >= (uint64_t)INT64_MAX / (uint64_t)pow10[scale_digits])
        goto slow; /* scaling would overflow: the slow path refuses what int64 cannot hold */
    int64_t v = (int64_t)whole * pow10[scale_digits] + frac + (round_up ? 1 : 0);
    *out = negative ? -v : v;
    *pp = p;
    return SCAN_OK;
slow:;
    double d;
    int rc = scan_number_slow(pp, end, &d);
    if (rc != SCAN_OK)
        return rc;
    d *= (double)pow10[scale_digits]; /* every scale, not only 3: counters use 6 */
    if (!isfinite(d) || d > 9.2e18 || d < -9.2e18)
        return SCAN_BAD;
    *out = (int64_t)llround(d);
    return SCAN_OK;
}

/* Skips one JSON value of any kind without recursion. */
static int skip_value(const char **pp, const char *end)
{
    const char *p = *pp;
    const char *body;
    size_t n;
    bool esc;
    if (*p == '"') {
        int rc = scan_string(&p, end, &body, &n, &esc);
        if (rc == SCAN_OK)
            *pp = p;
        return rc;
    }
    if (*p != '{' && *p != '[') { /* number or literal */
        while (p < end && !is_delimiter(*p)) {
            if (*p == '{' || *p == '[' || *p == '"' || *p == ':')
                return SCAN_BAD;
            p++;
        }
        if (p >= end)
            return SCAN_NEED_MORE;
        if (p == *pp)
            return SCAN_BAD;
        *pp = p;
        return SCAN_OK;
    }
    size_t depth = 0;
    for (;;) {
        if (p >= end)
            return SCAN_NEED_MORE;
        char c = *p;
        if (c == '"') {
            int rc = scan_string(&p, end, &body, &n, &esc);
            if (rc != SCAN_OK)
                return rc;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                *pp = p + 1;
                return SCAN_OK;
            }
        } else if (c == '\0') {
            return SCAN_BAD;
        }
        p++;
    }
}

/* Expects `c` after optional whitespace. */
static int expect_char(const char **pp, const char *end, char c)
{
    const char *p = skip_ws(*pp);
    if (p >= end)
        return SCAN_NEED_MORE;
    if (*p != c)
        return SCAN_BAD;
    *pp = p + 1;
    return SCAN_OK;
}

/* Reads `"key" :` and leaves p at the value. */
static int scan_key(const char **pp, const char *end, const char **key, size_t *key_len)
{
    const char *p = skip_ws(*pp);
    if (p >= end)
        return SCAN_NEED_MORE;
    if (*p != '"')
        return SCAN_BAD;
    bool esc;
    int rc = scan_string(&p, end, key, key_len, &esc);
    if (rc != SCAN_OK)
        return rc;
    if ((rc = expect_char(&p, end, ':')) != SCAN_OK)
        return rc;
    p = skip_ws(p);
    if (p >= end)
        return SCAN_NEED_MORE;
    *pp = p;
    return SCAN_OK;
}

/* After a member: `,` (more follow, returns 1 via *more) or the closing bracket. */
static int scan_separator(const char **pp, const char *end, char close, bool *more)
{
    const char *p = skip_ws(*pp);
    if (p >= end)
        return SCAN_NEED_MORE;
    if (*p == ',')
        *more = true;
    else if (*p == close)
        *more = false;
    else
        return SCAN_BAD;
    *pp = p + 1;
    return SCAN_OK;
}

#define KEY_IS(lit) (key_len == sizeof(lit) - 1 && memcmp(key, lit, sizeof(lit) - 1) == 0)
#define TRY(expr)                 \
    do {                          \
        int rc_ = (expr);         \
        if (rc_ != SCAN_OK)       \
            return rc_;           \
    } while (0)

/* ------------------------------------------------------------ one event */

enum { CATEGORY_IGNORED = -1, CATEGORY_ABSENT = -2 }; /* raw_event.category besides the kinds */

typedef struct raw_event {
    char ph;
    int category;            /* pt_event_kind, -1 ignored, -2 unknown */
    pt_cpu_kind cpu_kind;
    bool has_ts, has_dur;
    const char *name;
    size_t name_len;
    bool name_escaped;
    int64_t ts_ns, dur_ns;
    int64_t tid, pid;
    int64_t stream;
    bool has_stream;
    bool pid_is_name;        /* pid was a string without a number in it ("CPU functions") */
    const char *pid_text, *tid_text; /* pid and tid when they were strings (without escapes) */
    size_t pid_text_len, tid_text_len;
    bool legacy_kernel;      /* pid "CUDA functions": a kernel in the legacy profiler's format */
    /* "ph":"M" records: their one argument (args {"name": "python3"}, {"sort_index": 7}). */
    const char *md_key, *md_text;
    size_t md_key_len, md_text_len;
    bool md_text_escaped, has_md_value;
    int64_t md_number;
    pt_event ev;             /* args land here directly */
    const char *coll_name;
    size_t coll_name_len;
    bool coll_escaped;
    /* Counter ("ph":"C") args: the first numeric value. */
    double counter_value;
    bool has_counter_value;
} raw_event;

static bool equals_ignoring_case(const char *lower, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower[i] != (char)tolower((unsigned char)s[i]) || lower[i] == '\0')
            return false;
    return lower[n] == '\0';
}

static int category_kind(const char *s, size_t n, pt_cpu_kind *cpu_kind)
{
    static const struct {
        const char *name;
        int kind;
        pt_cpu_kind cpu_kind;
    } table[] = {
        /* today's name, and the one Kineto wrote before (header comment), case aside */
        {"kernel", PT_EVENT_GPU_KERNEL, PT_CPU_UNKNOWN},     /* "Kernel" */
        {"gpu_memcpy", PT_EVENT_GPU_MEMCPY, PT_CPU_UNKNOWN}, {"memcpy", PT_EVENT_GPU_MEMCPY, PT_CPU_UNKNOWN},
        {"gpu_memset", PT_EVENT_GPU_MEMSET, PT_CPU_UNKNOWN}, {"memset", PT_EVENT_GPU_MEMSET, PT_CPU_UNKNOWN},
        {"cuda_runtime", PT_EVENT_RUNTIME, PT_CPU_UNKNOWN},  {"runtime", PT_EVENT_RUNTIME, PT_CPU_UNKNOWN},
        {"cpu_op", PT_EVENT_CPU, PT_CPU_OPERATOR},           {"operator", PT_EVENT_CPU, PT_CPU_OPERATOR},
        {"python_function", PT_EVENT_CPU, PT_CPU_PYTHON},    {"python", PT_EVENT_CPU, PT_CPU_PYTHON},
        /* no older name: record_function ranges apart from operators, driver calls */
        {"user_annotation", PT_EVENT_CPU, PT_CPU_ANNOTATION}, {"cuda_driver", PT_EVENT_RUNTIME, PT_CPU_UNKNOWN},
    };
    *cpu_kind = PT_CPU_UNKNOWN;
    for (size_t i = 0; i < PT_ARRAY_LEN(table); i++) {
        if (equals_ignoring_case(table[i].name, s, n)) {
            *cpu_kind = table[i].cpu_kind;
            return table[i].kind;
        }
    }
    return -1;
}

/* Bytes per element of the dtype names PyTorch writes into NCCL kernel args. */
static int32_t dtype_bytes(const char *s, size_t n)
{
    static const char *const names_by_size[][5] = {
        {"byte", "char", "bool", "int8", "uint8"}, /* 1 byte */
        {"half", "bfloat16", "short", "float16"},  /* 2 */
        {"float", "int", "int32"},                 /* 4 */
        {"double", "long", "int64"},               /* 8 */
    };
    for (size_t size = 0; size < PT_ARRAY_LEN(names_by_size); size++)
        for (size_t i = 0; i < PT_ARRAY_LEN(names_by_size[size]) && names_by_size[size][i]; i++)
            if (equals_ignoring_case(names_by_size[size][i], s, n))
                return (int32_t)1 << size;
    if (n >= 6 && equals_ignoring_case("float8", s, 6))
        return 1;
    return 0;
}

/* A number scaled as scan_scaled does, or nothing. Anything the reader cannot hold as
 * an int64 -- valid JSON of another type ("abc", {}, null), NaN, or a number out of
 * range -- leaves *has false and is skipped, so one odd event is counted malformed (or
 * one argument ignored) instead of the whole file being refused as bad JSON. */
static int scan_held_number(const char **pp, const char *end, int scale_digits, int64_t *out, bool *has)
{
    const char *start = *pp;
    *has = false;
    if (*start == '-' || (*start >= '0' && *start <= '9')) {
        int rc = scan_scaled(pp, end, scale_digits, out);
        if (rc != SCAN_BAD) {
            *has = rc == SCAN_OK;
            return rc;
        }
        *pp = start;
    }
    return skip_value(pp, end);
}

static int scan_time(const char **pp, const char *end, int64_t *out, bool *has)
{
    return scan_held_number(pp, end, 3, out, has);
}

static int scan_int(const char **pp, const char *end, int64_t *out)
{
    if (**pp == '"') { /* some producers quote numbers; treat as absent */
        const char *body;
        size_t n;
        bool esc;
        *out = 0;
        return scan_string(pp, end, &body, &n, &esc);
    }
    bool has;
    int rc = scan_held_number(pp, end, 0, out, &has);
    if (!has)
        *out = 0;
    return rc;
}

/* "grid": [x, y, z] */
static int scan_dim3(const char **pp, const char *end, int32_t out[3])
{
    const char *p = *pp;
    if (*p != '[')
        return skip_value(pp, end);
    p++;
    for (int i = 0;; i++) {
        p = skip_ws(p);
        if (p >= end)
            return SCAN_NEED_MORE;
        if (*p == ']' && i == 0)
            break;
        int64_t v;
        TRY(scan_int(&p, end, &v));
        if (i < 3)
            out[i] = (int32_t)(v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : v);
        bool more;
        TRY(scan_separator(&p, end, ']', &more));
        if (!more) {
            *pp = p;
            return SCAN_OK;
        }
    }
    *pp = p + 1;
    return SCAN_OK;
}

/* Enters an object (p at '{'): *empty says it was "{}" and has been consumed whole. */
static int open_object(const char **pp, const char *end, bool *empty)
{
    const char *p = skip_ws(*pp + 1);
    if (p >= end)
        return SCAN_NEED_MORE;
    *empty = *p == '}';
    *pp = *empty ? p + 1 : p;
    return SCAN_OK;
}

/* A metadata record keeps its first argument that is a string or an integer. */
static int scan_metadata_value(const char **pp, const char *end, const char *key, size_t key_len, raw_event *re)
{
    const char *p = *pp;
    bool plain_key = memchr(key, '\\', key_len) == NULL;
    if (re->has_md_value || !plain_key || (*p != '"' && *p != '-' && (*p < '0' || *p > '9')))
        return skip_value(pp, end);
    if (*p == '"') {
        TRY(scan_string(pp, end, &re->md_text, &re->md_text_len, &re->md_text_escaped));
        re->has_md_value = true;
    } else {
        TRY(scan_held_number(pp, end, 0, &re->md_number, &re->has_md_value));
    }
    if (re->has_md_value)
        re->md_key = key, re->md_key_len = key_len;
    return SCAN_OK;
}

/* Scans an object (p at its '{'), handing each member's value to scan_member. */
typedef int (*member_scanner)(const char **pp, const char *end, const char *key, size_t key_len, raw_event *re);

static int scan_object(const char **pp, const char *end, member_scanner scan_member, raw_event *re)
{
    const char *p = *pp;
    bool empty;
    TRY(open_object(&p, end, &empty));
    for (bool more = !empty; more;) {
        const char *key;
        size_t key_len;
        TRY(scan_key(&p, end, &key, &key_len));
        TRY(scan_member(&p, end, key, key_len, re));
        TRY(scan_separator(&p, end, '}', &more));
    }
    *pp = p;
    return SCAN_OK;
}

/* One member of an event's "args". */
static int scan_arg(const char **pp, const char *end, const char *key, size_t key_len, raw_event *re)
{
    const char *p = *pp;
    int64_t v;
    if (re->ph == 'M') {
        TRY(scan_metadata_value(&p, end, key, key_len, re));
    } else if (KEY_IS("grid")) {
        TRY(scan_dim3(&p, end, re->ev.grid));
    } else if (KEY_IS("block")) {
        TRY(scan_dim3(&p, end, re->ev.block));
    } else if (KEY_IS("bytes")) {
        TRY(scan_int(&p, end, &re->ev.bytes));
    } else if (KEY_IS("device")) {
        TRY(scan_int(&p, end, &v));
        re->ev.device = (int32_t)v;
    } else if (KEY_IS("stream") && *p != '"') {
        TRY(scan_int(&p, end, &re->stream));
        re->has_stream = true;
    } else if (KEY_IS("Collective name") && *p == '"') {
        TRY(scan_string(&p, end, &re->coll_name, &re->coll_name_len, &re->coll_escaped));
    } else if (KEY_IS("In msg nelems") || KEY_IS("In msg size")) {
        TRY(scan_int(&p, end, &re->ev.coll.in_nelems));
    } else if (KEY_IS("Out msg nelems") || KEY_IS("Out msg size")) {
        TRY(scan_int(&p, end, &re->ev.coll.out_nelems));
    } else if (KEY_IS("Group size")) {
        TRY(scan_int(&p, end, &v));
        re->ev.coll.group_size = (int32_t)(v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : v);
    } else if (KEY_IS("dtype") && *p == '"') {
        const char *body;
        size_t n;
        bool esc;
        TRY(scan_string(&p, end, &body, &n, &esc));
        re->ev.coll.dtype_bytes = dtype_bytes(body, n);
        if (!esc)
            re->ev.coll.dtype = body, re->ev.coll.dtype_len = n;
    } else if ((KEY_IS("Process Group Name") || KEY_IS("Process Group Ranks")) && *p == '"') {
        /* Names and rank lists never need escapes; one that has them is left out. */
        const char *body;
        size_t n;
        bool esc;
        bool ranks = KEY_IS("Process Group Ranks");
        TRY(scan_string(&p, end, &body, &n, &esc));
        if (!esc && ranks)
            re->ev.coll.ranks = body, re->ev.coll.ranks_len = n;
        else if (!esc)
            re->ev.coll.group = body, re->ev.coll.group_len = n;
    } else if (KEY_IS("Global rank start") || KEY_IS("Global rank stride")) {
        TRY(scan_int(&p, end, &v));
        int32_t *field = KEY_IS("Global rank start") ? &re->ev.coll.rank_start : &re->ev.coll.rank_stride;
        *field = v < 0 || v > INT32_MAX ? -1 : (int32_t)v;
    } else if (KEY_IS("Seq")) {
        TRY(scan_int(&p, end, &v));
        re->ev.coll.seq = v < 0 ? -1 : v;
    } else if (re->ph == 'C' && !re->has_counter_value && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        int64_t micro;
        TRY(scan_held_number(&p, end, 6, &micro, &re->has_counter_value));
        re->counter_value = re->has_counter_value ? (double)micro / 1e6 : 0;
    } else {
        TRY(skip_value(&p, end));
    }
    *pp = p;
    return SCAN_OK;
}

static int scan_args(const char **pp, const char *end, raw_event *re)
{
    return **pp == '{' ? scan_object(pp, end, scan_arg, re) : skip_value(pp, end);
}

/* Reads any JSON scalar-or-string id (pid/tid) as an integer. Strings keep their first
 * number ("stream 7"); names without one ("CPU functions") are hashed, and *named says so.
 * *text is the string itself (NULL for numbers, and for strings with escapes). */
static int scan_id(const char **pp, const char *end, int64_t *out, const char **text, size_t *text_len, bool *named)
{
    *named = false;
    *text = NULL;
    if (**pp != '"')
        return scan_int(pp, end, out);
    const char *body;
    size_t n;
    bool esc;
    TRY(scan_string(pp, end, &body, &n, &esc));
    if (!esc)
        *text = body, *text_len = n;
    int64_t v = 0;
    bool digits = false;
    for (size_t i = 0; i < n && v < INT64_MAX / 20; i++) {
        if (body[i] >= '0' && body[i] <= '9')
            v = v * 10 + (body[i] - '0'), digits = true;
        else if (digits)
            break;
    }
    *named = !digits;
    *out = digits ? v : (int64_t)(pt_hash_bytes(body, n) & 0x3fffffffffffffffLL);
    return SCAN_OK;
}

static bool text_is(const char *text, size_t n, const char *literal)
{
    return text && n == strlen(literal) && memcmp(text, literal, n) == 0;
}

/* One member of an event. */
static int scan_event_member(const char **pp, const char *end, const char *key, size_t key_len, raw_event *re)
{
    const char *p = *pp;
    const char *body;
    size_t n;
    bool esc;
    switch (key_len) {
    case 2:
        if (KEY_IS("ph") && *p == '"') {
            TRY(scan_string(&p, end, &body, &n, &esc));
            re->ph = n ? body[0] : 0;
        } else if (KEY_IS("ts")) {
            TRY(scan_time(&p, end, &re->ts_ns, &re->has_ts));
        } else {
            TRY(skip_value(&p, end));
        }
        break;
    case 3:
        if (KEY_IS("cat") && *p == '"') {
            TRY(scan_string(&p, end, &body, &n, &esc));
            re->category = category_kind(body, n, &re->cpu_kind);
        } else if (KEY_IS("dur")) {
            TRY(scan_time(&p, end, &re->dur_ns, &re->has_dur));
        } else if (KEY_IS("tid")) {
            bool named;
            TRY(scan_id(&p, end, &re->tid, &re->tid_text, &re->tid_text_len, &named));
        } else if (KEY_IS("pid")) {
            TRY(scan_id(&p, end, &re->pid, &re->pid_text, &re->pid_text_len, &re->pid_is_name));
            re->legacy_kernel = text_is(re->pid_text, re->pid_text_len, "CUDA functions");
        } else {
            TRY(skip_value(&p, end));
        }
        break;
    case 4:
        if (KEY_IS("name") && *p == '"') {
            TRY(scan_string(&p, end, &re->name, &re->name_len, &re->name_escaped));
        } else if (KEY_IS("args")) {
            TRY(scan_args(&p, end, re));
        } else {
            TRY(skip_value(&p, end));
        }
        break;
    default:
        TRY(skip_value(&p, end));
    }
    *pp = p;
    return SCAN_OK;
}

static int scan_event(const char **pp, const char *end, raw_event *re)
{
    memset(re, 0, offsetof(raw_event, ev));
    re->category = CATEGORY_ABSENT;
    pt_event_init(&re->ev, PT_EVENT_CPU);
    re->has_counter_value = false;
    re->coll_name = NULL;
    return scan_object(pp, end, scan_event_member, re);
}

/* ------------------------------------------------------------ delivering events */

#define REPLACEMENT_CHARACTER "\xEF\xBF\xBD" /* U+FFFD */

/* Each NUL in b (from \u0000, or raw) becomes U+FFFD, in place: a name becomes a C string
 * wherever it is used (interned, printed), and cut at a NUL, "gemm\u0000A" and
 * "gemm\u0000B" would be one kernel. */
static void replace_nuls(pt_buf *b)
{
    size_t nuls = 0;
    for (size_t i = 0; i < b->len; i++)
        nuls += b->data[i] == '\0';
    if (!nuls)
        return;
    pt_buf_reserve(b, 2 * nuls);
    size_t from = b->len, to = b->len + 2 * nuls;
    b->len = to;
    b->data[to] = '\0';
    while (from > 0) { /* backwards, so nothing is overwritten before it is moved */
        char c = b->data[--from];
        if (c)
            b->data[--to] = c;
        else
            to -= 3, memcpy(b->data + to, REPLACEMENT_CHARACTER, 3);
    }
}

static const char *unescaped(pt_buf *scratch, const char *body, size_t n, size_t *out_len)
{
    pt_buf_reset(scratch);
    if (!pt_json_unescape(body, n, scratch)) { /* keep the raw bytes rather than drop it */
        pt_buf_reset(scratch);
        pt_buf_append(scratch, body, n);
    }
    replace_nuls(scratch);
    *out_len = scratch->len;
    return pt_buf_cstr(scratch);
}

static int64_t parse_step_number(const char *name, size_t n)
{
    static const char prefix[] = "ProfilerStep#";
    size_t plen = sizeof prefix - 1;
    if (n <= plen || memcmp(name, prefix, plen) != 0)
        return -1;
    int64_t v = 0;
    for (size_t i = plen; i < n; i++) {
        if (name[i] < '0' || name[i] > '9' || v > INT64_MAX / 20)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static void deliver_metadata(kineto_reader *kr, const raw_event *re)
{
    if (!kr->sink->on_metadata || !re->name || !re->has_md_value)
        return;
    pt_trace_metadata md = {0};
    if (re->name_escaped)
        md.name = unescaped(&kr->scratch, re->name, re->name_len, &md.name_len);
    else
        md.name = re->name, md.name_len = re->name_len;
    md.pid = re->pid;
    md.tid = re->tid;
    md.pid_text = re->pid_text, md.pid_text_len = re->pid_text_len;
    md.tid_text = re->tid_text, md.tid_text_len = re->tid_text_len;
    md.key = re->md_key;
    md.key_len = re->md_key_len;
    if (re->md_text && re->md_text_escaped)
        md.text = unescaped(&kr->coll_scratch, re->md_text, re->md_text_len, &md.text_len);
    else
        md.text = re->md_text, md.text_len = re->md_text_len;
    md.number = re->md_number;
    kr->sink->on_metadata(kr->sink->ctx, &md);
}

/* The legacy profiler's events carry no "cat": kernels sit under pid "CUDA functions"
 * with the device as tid; the rest are CPU operators and record_function ranges, which
 * that format cannot tell apart (PT_CPU_UNKNOWN: the summarizer tells by the name). */
static void classify_uncategorised(raw_event *re)
{
    if (re->legacy_kernel) {
        re->category = PT_EVENT_GPU_KERNEL;
        re->ev.device = (int32_t)(re->tid < 0 ? 0 : re->tid > INT32_MAX ? INT32_MAX : re->tid);
        re->tid = 0; /* the stream is not recorded */
        return;
    }
    re->category = PT_EVENT_CPU;
}

/* An event record the model does not carry, to the sink that keeps them (event.h). */
static int deliver_other(kineto_reader *kr, const char *json, size_t len)
{
    if (kr->sink->on_other)
        kr->sink->on_other(kr->sink->ctx, json, len);
    return 0;
}

/* re, parsed from the len bytes at json (the whole object). */
static int deliver(kineto_reader *kr, raw_event *re, const char *json, size_t len)
{
    kr->events_seen++;
    pt_event *ev = &re->ev;
    if (re->ph == 'M') {
        if (!re->name || !re->has_md_value)
            return deliver_other(kr, json, len);
        deliver_metadata(kr, re);
        return 0;
    }
    if (re->ph == 'C') {
        if (!re->has_ts || !re->has_counter_value || !re->name)
            return deliver_other(kr, json, len);
        ev->kind = PT_EVENT_COUNTER;
        ev->value = re->counter_value;
        re->dur_ns = 0; /* a counter is a sample at ts: a "dur" on one (even negative) means nothing */
    } else {
        if (re->ph == 'X' && re->category == CATEGORY_ABSENT)
            classify_uncategorised(re);
        if (re->ph != 'X' || re->category < 0)
            return deliver_other(kr, json, len);
        if (!re->has_ts || !re->has_dur || re->dur_ns < 0 || !re->name) {
            kr->events_malformed++;
            return 0;
        }
        ev->kind = (pt_event_kind)re->category;
    }
    ev->ts_ns = re->ts_ns;
    ev->dur_ns = re->dur_ns;
    ev->tid = re->tid;
    if (ev->kind == PT_EVENT_GPU_KERNEL || ev->kind == PT_EVENT_GPU_MEMCPY || ev->kind == PT_EVENT_GPU_MEMSET) {
        if (re->has_stream)
            ev->tid = re->stream;
        if (ev->device < 0)
            ev->device = (int32_t)re->pid;
    } else {
        ev->device = -1;
        if (kr->meta->pid < 0 && ev->kind == PT_EVENT_CPU && !re->pid_is_name)
            kr->meta->pid = re->pid;
    }
    if (re->name_escaped)
        ev->name = unescaped(&kr->scratch, re->name, re->name_len, &ev->name_len);
    else
        ev->name = re->name, ev->name_len = re->name_len;
    if (re->coll_name) {
        if (re->coll_escaped)
            ev->coll.name = unescaped(&kr->coll_scratch, re->coll_name, re->coll_name_len, &ev->coll.name_len);
        else
            ev->coll.name = re->coll_name, ev->coll.name_len = re->coll_name_len;
    }
    ev->cpu_kind = ev->kind == PT_EVENT_CPU ? re->cpu_kind : PT_CPU_UNKNOWN;
    if (ev->kind == PT_EVENT_CPU) { /* whatever its generation's category (header comment) */
        int64_t step = parse_step_number(ev->name, ev->name_len);
        if (step >= 0) {
            ev->kind = PT_EVENT_STEP;
            ev->step = step;
        }
    }
    return kr->sink->on_event(kr->sink->ctx, ev);
}

/* ------------------------------------------------------------ top-level members */

/* object[key] when it is a string, NULs made U+FFFD as in names, into dst (cut to fit);
 * else dst stays as it was. */
static void copy_member_string(kineto_reader *kr, char *dst, size_t cap, const pt_json *object, const char *key)
{
    const pt_json *v = pt_json_get(object, key);
    if (!v || v->type != PT_JSON_STRING)
        return;
    pt_buf_reset(&kr->coll_scratch);
    pt_buf_append(&kr->coll_scratch, v->string, v->string_len);
    replace_nuls(&kr->coll_scratch);
    snprintf(dst, cap, "%s", pt_buf_cstr(&kr->coll_scratch));
}

/* The top-level version numbers Kineto records, and what the software list calls them. */
static const struct {
    const char *key, *name;
} software_keys[] = {
    {"cuda_runtime_version", "cuda runtime"}, {"cuda_driver_version", "cuda driver"},
    {"hip_runtime_version", "hip runtime"},   {"hip_driver_version", "hip driver"},
    {"cupti_version", "cupti"},               {"roctracer_version", "roctracer"},
};

/* "name version" onto meta->software, whatever order the members come in (cut to fit). */
static void add_software(pt_trace_meta *meta, const char *name, const pt_json *v)
{
    char version[64];
    if (v->type == PT_JSON_NUMBER && v->is_integer)
        snprintf(version, sizeof version, "%lld", (long long)v->integer);
    else if (v->type == PT_JSON_NUMBER)
        snprintf(version, sizeof version, "%g", v->number);
    else if (v->type == PT_JSON_STRING && v->string_len < sizeof version && !memchr(v->string, '\0', v->string_len))
        snprintf(version, sizeof version, "%.*s", (int)v->string_len, v->string);
    else
        return;
    size_t used = strlen(meta->software);
    snprintf(meta->software + used, sizeof meta->software - used, "%s%s %s", used ? ", " : "", name, version);
}

static void apply_top_level(kineto_reader *kr, const char *key, const pt_json *v)
{
    pt_trace_meta *meta = kr->meta;
    for (size_t i = 0; i < PT_ARRAY_LEN(software_keys); i++)
        if (strcmp(key, software_keys[i].key) == 0)
            add_software(meta, software_keys[i].name, v);
    if (strcmp(key, "distributedInfo") == 0 && v->type == PT_JSON_OBJECT) {
        const pt_json *rank = pt_json_get(v, "rank");
        if (rank && rank->type == PT_JSON_NUMBER && rank->number >= 0 && rank->number < 1e9)
            meta->rank = (int32_t)rank->number;
        double ws = pt_json_get_number(v, "world_size", -1);
        if (ws > 0 && ws < 1e9)
            meta->world_size = (int32_t)ws;
        copy_member_string(kr, meta->backend, sizeof meta->backend, v, "backend");
        const pt_json *nccl = pt_json_get(v, "nccl_version");
        if (nccl)
            add_software(meta, "nccl", nccl);
    } else if (strcmp(key, "deviceProperties") == 0 && v->type == PT_JSON_ARRAY) {
        meta->device_count = (int32_t)v->count;
        if (v->count)
            copy_member_string(kr, meta->device_name, sizeof meta->device_name, v->items[0], "name");
    } else if (strcmp(key, "baseTimeNanoseconds") == 0 && v->type == PT_JSON_NUMBER &&
               (v->is_integer || fabs(v->number) < 9.2e18)) { /* casting a larger double is UB */
        meta->clock_origin_ns = v->is_integer ? v->integer : (int64_t)v->number;
    } else if (strcmp(key, "metadata") == 0 && v->type == PT_JSON_OBJECT) {
        /* Some harnesses record the host and pid (e.g. TraceLens' metadata.system). */
        const pt_json *system = pt_json_get(v, "system");
        const pt_json *uname = pt_json_get(system, "uname");
        if (!meta->host[0])
            copy_member_string(kr, meta->host, sizeof meta->host, uname, "node");
        if (!meta->software[0]) /* what perftracker export writes */
            copy_member_string(kr, meta->software, sizeof meta->software, v, "software");
    }
}

static bool top_level_key_wanted(const char *key, size_t n)
{
    static const char *wanted[] = {"distributedInfo", "deviceProperties", "baseTimeNanoseconds", "metadata"};
    for (size_t i = 0; i < PT_ARRAY_LEN(wanted); i++)
        if (strlen(wanted[i]) == n && memcmp(wanted[i], key, n) == 0)
            return true;
    for (size_t i = 0; i < PT_ARRAY_LEN(software_keys); i++)
        if (strlen(software_keys[i].key) == n && memcmp(software_keys[i].key, key, n) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------ the driver */

enum reader_state {
    ST_START,
    ST_TOP_MEMBER,   /* at a top-level key or '}' */
    ST_TOP_COLON,    /* after a top-level key */
    ST_TOP_VALUE,    /* at a top-level value */
    ST_TOP_SEP,      /* after a top-level value */
    ST_EVENTS_FIRST, /* just after "traceEvents": [ */
    ST_EVENT,        /* at an array element */
    ST_EVENTS_SEP,   /* after an array element */
    ST_END
};

enum refill_status { REFILL_OK, REFILL_EOF, REFILL_FULL, REFILL_ERROR };

static void warn(kineto_reader *kr, const char *fmt, ...) PT_PRINTF(2, 3);
static void warn(kineto_reader *kr, const char *fmt, ...)
{
    if (!kr->sink->on_warning)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kr->sink->on_warning(kr->sink->ctx, msg);
}

/* Moves the unconsumed bytes to the front and reads more after them. */
static enum refill_status refill(kineto_reader *kr, size_t limit)
{
    if (kr->eof)
        return REFILL_EOF;
    if (kr->pos > 0) {
        memmove(kr->buf, kr->buf + kr->pos, kr->len - kr->pos);
        kr->discarded += kr->pos;
        kr->len -= kr->pos;
        kr->pos = 0;
    }
    if (kr->len == kr->cap) {
        if (kr->cap >= limit)
            return REFILL_FULL;
        kr->cap = PT_MIN(kr->cap * 2, limit);
        kr->buf = pt_xrealloc(kr->buf, kr->cap + 1);
    }
    ptrdiff_t got = pt_input_read(kr->in, kr->buf + kr->len, kr->cap - kr->len, kr->err);
    if (got < 0)
        return REFILL_ERROR;
    kr->len += (size_t)got;
    kr->buf[kr->len] = '\0';
    if (got == 0)
        kr->eof = true;
    if (kr->opts && kr->opts->progress)
        kr->opts->progress(kr->opts->progress_ctx, pt_input_file_offset(kr->in), pt_input_file_size(kr->in));
    return got == 0 ? REFILL_EOF : REFILL_OK;
}

/* Discards the JSON value starting at buf[pos] without holding it: a streaming walk
 * with a depth counter and string state, refilling as it goes. */
static int discard_value(kineto_reader *kr)
{
    size_t depth = 0;
    bool in_string = false, escaped = false, started = false;
    for (;;) {
        while (kr->pos < kr->len) {
            char c = kr->buf[kr->pos++];
            if (in_string) {
                if (escaped)
                    escaped = false;
                else if (c == '\\')
                    escaped = true;
                else if (c == '"') {
                    in_string = false;
                    if (depth == 0)
                        return SCAN_OK;
                }
                continue;
            }
            if (c == '"') {
                in_string = true;
                started = true;
            } else if (c == '{' || c == '[') {
                depth++;
                started = true;
            } else if (c == '}' || c == ']') {
                if (depth == 0) {
                    kr->pos--; /* belongs to the enclosing container */
                    return started ? SCAN_OK : SCAN_BAD;
                }
                if (--depth == 0)
                    return SCAN_OK;
            } else if (depth == 0 && started && is_delimiter(c)) {
                kr->pos--;
                return SCAN_OK;
            } else if (!is_delimiter(c)) {
                started = true;
            }
        }
        kr->pos = kr->len;
        enum refill_status rs = refill(kr, kr->cap);
        if (rs == REFILL_ERROR)
            return SCAN_BAD;
        if (rs == REFILL_EOF && kr->pos >= kr->len)
            return SCAN_NEED_MORE;
    }
}

/* The ',' or the closing bracket after a top-level member or an event: *state becomes
 * next (another follows) or closed. When neither comes, what names the expectation for
 * the error message. */
static int expect_separator(kineto_reader *kr, const char **pp, const char *end, char close, const char *what,
                            enum reader_state next, enum reader_state closed, enum reader_state *state)
{
    bool more;
    kr->bad_what = what;
    int rc = scan_separator(pp, end, close, &more);
    if (rc != SCAN_OK)
        return rc;
    kr->bad_what = NULL;
    *state = more ? next : closed;
    return SCAN_OK;
}

/* The top-level key at p, remembered in kr->top_key when its value is one we read. */
static int scan_top_key(kineto_reader *kr, const char **pp, const char *end)
{
    const char *key;
    size_t key_len;
    bool escaped;
    if (**pp != '"') {
        kr->bad_what = "expected a key or '}' in the top-level object";
        return SCAN_BAD;
    }
    TRY(scan_string(pp, end, &key, &key_len, &escaped));
    bool events = key_len == 11 && memcmp(key, "traceEvents", 11) == 0;
    kr->top_key[0] = '\0';
    if (events || top_level_key_wanted(key, key_len))
        snprintf(kr->top_key, sizeof kr->top_key, "%.*s", (int)key_len, key);
    return SCAN_OK;
}

/* The value of the top-level member kr->top_key names (p at its first byte): the event
 * list is entered; a member we read is parsed into meta; anything else is skipped. */
static int scan_top_value(kineto_reader *kr, const char **pp, const char *end, enum reader_state *state,
                          bool *oversized_unit)
{
    const char *p = *pp;
    if (strcmp(kr->top_key, "traceEvents") == 0) {
        if (*p != '[') {
            kr->bad_what = "\"traceEvents\" is not a list";
            return SCAN_BAD;
        }
        if (kr->saw_trace_events) {
            /* JSON parsers keep the last of two equal keys (Python, browsers' JSON.parse),
             * streaming ones read both: which events are the trace is not ours to guess,
             * and silently merging them would analyse a worker no other tool shows. */
            kr->bad_what = "a second \"traceEvents\" list: the file holds two traces, or one twice, and "
                           "tools disagree on which counts";
            return SCAN_BAD;
        }
        kr->saw_trace_events = true;
        *pp = p + 1;
        *state = ST_EVENTS_FIRST;
        return SCAN_OK;
    }
    const char *value = p;
    *oversized_unit = true; /* if the value does not fit, skip it in streaming mode */
    TRY(skip_value(&p, end));
    *oversized_unit = false;
    if (kr->top_key[0] && (size_t)(p - value) > MAX_PARSED_TOP_LEVEL_BYTES) {
        warn(kr, "the top-level \"%s\" (%zu KiB) was ignored: it should be a few KiB", kr->top_key,
             (size_t)(p - value) >> 10);
    } else if (kr->top_key[0]) {
        pt_error perr = {{0}};
        pt_json *v = pt_json_parse(value, (size_t)(p - value), 64, &perr);
        if (v)
            apply_top_level(kr, kr->top_key, v);
        pt_json_free(v);
    }
    *pp = p;
    *state = ST_TOP_SEP;
    return SCAN_OK;
}

/* One step of the top-level state machine over buf[pos..len). Every step begins where
 * JSON allows whitespace, and the whitespace is consumed at once, before the step needs
 * more bytes: so a run of any length streams through the buffer instead of filling it
 * like one huge value. A step's unit (a key, a value, an event, a separator) is the
 * smallest thing the grammar has between two such places. */
static int step(kineto_reader *kr, enum reader_state *state, bool *bare_list, bool *oversized_unit)
{
    const char *end = kr->buf + kr->len;
    const char *p = kr->buf + kr->pos;
    p += pt_json_space_run(p, (size_t)(end - p));
    kr->pos = (size_t)(p - kr->buf);
    if (p >= end)
        return SCAN_NEED_MORE;
    *oversized_unit = false;
    switch (*state) {
    case ST_START:
        if (kr->discarded == 0 && p == kr->buf && (unsigned char)*p == 0xEF) {
            /* A UTF-8 byte-order mark (Windows editors write one): not JSON, but what it
             * marks is, and every JSON tool we know of takes it. */
            if (end - p < 3)
                return SCAN_NEED_MORE;
            if (memcmp(p, PT_JSON_UTF8_BOM, 3) == 0) {
                p += 3;
                break;
            }
        }
        if (*p == '[') {
            *bare_list = true;
            kr->saw_trace_events = true;
            *state = ST_EVENTS_FIRST;
        } else if (*p == '{') {
            *state = ST_TOP_MEMBER;
        } else {
            kr->bad_what = "the file is not JSON (it must start with '{' or '[')";
            return SCAN_BAD;
        }
        p++;
        break;
    case ST_TOP_MEMBER:
        if (*p == '}') {
            p++;
            *state = ST_END;
            break;
        }
        TRY(scan_top_key(kr, &p, end));
        *state = ST_TOP_COLON;
        break;
    case ST_TOP_COLON:
        if (*p != ':') {
            kr->bad_what = "expected ':' after a top-level key";
            return SCAN_BAD;
        }
        p++;
        *state = ST_TOP_VALUE;
        break;
    case ST_TOP_VALUE:
        TRY(scan_top_value(kr, &p, end, state, oversized_unit));
        break;
    case ST_TOP_SEP:
        TRY(expect_separator(kr, &p, end, '}', "expected ',' or '}' after a top-level member", ST_TOP_MEMBER, ST_END,
                             state));
        break;
    case ST_EVENTS_FIRST:
        if (*p == ']') {
            p++;
            *state = *bare_list ? ST_END : ST_TOP_SEP;
            break;
        }
        *state = ST_EVENT;
        /* fall through */
    case ST_EVENT: {
        uint64_t at = kr->discarded + (uint64_t)(p - kr->buf);
        if (kr->stop_at && at >= kr->stop_at) {
            kr->stopped_at = at;
            return SCAN_STOP;
        }
        *oversized_unit = true;
        if (*p == '{') {
            raw_event re;
            const char *object = p;
            TRY(scan_event(&p, end, &re));
            if (deliver(kr, &re, object, (size_t)(p - object)) != 0) {
                kr->bad_what = "stopped by the consumer";
                return SCAN_BAD;
            }
        } else {
            TRY(skip_value(&p, end));
            kr->events_malformed++;
        }
        *oversized_unit = false;
        *state = ST_EVENTS_SEP;
        break;
    }
    case ST_EVENTS_SEP:
        TRY(expect_separator(kr, &p, end, ']', "expected ',' or ']' between events", ST_EVENT,
                             *bare_list ? ST_END : ST_TOP_SEP, state));
        break;
    case ST_END:
        kr->bad_what = "unexpected data after the end of the trace";
        return SCAN_BAD;
    }
    kr->pos = (size_t)(p - kr->buf);
    return SCAN_OK;
}

/* The input ended while the state machine wanted more: fine only after the last '}'. */
static int finish_at_eof(const kineto_reader *kr, enum reader_state state, pt_error *err)
{
    if (state == ST_END)
        return 0;
    bool in_member = state == ST_TOP_MEMBER || state == ST_TOP_COLON || state == ST_TOP_VALUE;
    if (state == ST_START)
        pt_error_set(err, "the file is empty");
    else if (in_member && !kr->saw_trace_events)
        pt_error_set(err, "the file ends before the JSON object is closed (truncated?)");
    else
        pt_error_set(err, "the file is truncated: it ends inside %s after %lld events",
                     in_member || state == ST_TOP_SEP ? "the top-level object" : "the event list",
                     (long long)kr->events_seen);
    return -1;
}

/* Runs the state machine from `state` until the input ends (or a span's stop). */
static int kineto_run(kineto_reader *kr, enum reader_state state, bool bare_list)
{
    pt_error *err = kr->err;
    bool oversized_unit = false;
    int result = -1;
    for (;;) {
        int rc = kr->pos < kr->len ? step(kr, &state, &bare_list, &oversized_unit) : SCAN_NEED_MORE;
        if (rc == SCAN_OK)
            continue;
        if (rc == SCAN_STOP)
            return 0;
        if (rc == SCAN_BAD) {
            if (!err->message[0])
                pt_error_set(err, "malformed JSON near byte %llu: %s",
                             (unsigned long long)(kr->discarded + kr->pos),
                             kr->bad_what ? kr->bad_what : "unexpected token");
            break;
        }
        /* SCAN_NEED_MORE */
        if (kr->eof) {
            result = finish_at_eof(kr, state, err);
            break;
        }
        enum refill_status rs = refill(kr, PT_MAX(kr->max_event, (size_t)MAX_TOP_LEVEL_BYTES));
        if (rs == REFILL_ERROR)
            break;
        if (rs == REFILL_FULL || (rs == REFILL_OK && kr->len - kr->pos > kr->max_event && oversized_unit)) {
            /* One value larger than we are willing to hold: skip it, keep the rest. */
            kr->pos += (size_t)(skip_ws(kr->buf + kr->pos) - (kr->buf + kr->pos));
            if (discard_value(kr) != SCAN_OK) {
                pt_error_set(err, "the file ends inside an oversized value (truncated?)");
                break;
            }
            kr->events_oversized++;
            state = state == ST_EVENT || state == ST_EVENTS_FIRST ? ST_EVENTS_SEP : ST_TOP_SEP;
        }
    }
    return result;
}

/* Frees the reader; also what an allocation guard's unwind calls (common.h), which is
 * why readers live on the heap. */
static void reader_release(void *arg)
{
    kineto_reader *kr = arg;
    pt_unwind_pop(kr);
    pt_buf_free(&kr->scratch);
    pt_buf_free(&kr->coll_scratch);
    free(kr->buf);
    free(kr);
}

static kineto_reader *reader_new(pt_input *in, pt_trace_sink *sink, pt_trace_meta *meta, const pt_read_options *opts,
                                 pt_error *err)
{
    kineto_reader *kr = pt_xcalloc(1, sizeof *kr);
    pt_unwind_push(reader_release, kr);
    kr->in = in, kr->sink = sink, kr->meta = meta, kr->opts = opts, kr->err = err;
    kr->max_event = opts && opts->max_event_bytes ? opts->max_event_bytes : DEFAULT_MAX_EVENT_BYTES;
    uint64_t want = INITIAL_BUFFER;
    if (pt_input_compression(in) == PT_COMPRESSION_NONE)
        want = PT_MIN(want, PT_MAX(pt_input_file_size(in) + 1, (uint64_t)SMALL_FILE_BUFFER));
    kr->cap = (size_t)PT_MIN(want, (uint64_t)kr->max_event);
    kr->buf = pt_xmalloc(kr->cap + 1);
    kr->buf[0] = '\0';
    kr->stopped_at = UINT64_MAX;
    snprintf(meta->producer, sizeof meta->producer, "kineto");
    return kr;
}

/* Says what was skipped, then frees the reader. */
static void reader_finish(kineto_reader *kr)
{
    if (kr->events_malformed)
        warn(kr, "%lld events lacked a usable ts, dur or name (missing, not a number, out of range or a "
                 "negative duration) and were ignored",
             (long long)kr->events_malformed);
    if (kr->events_oversized)
        warn(kr, "%lld values larger than %zu MiB were skipped", (long long)kr->events_oversized,
             kr->max_event >> 20);
    reader_release(kr);
}

static int kineto_read(pt_input *in, pt_trace_sink *sink, pt_trace_meta *meta,
                       const pt_read_options *opts, pt_error *err)
{
    kineto_reader *kr = reader_new(in, sink, meta, opts, err);
    int result = kineto_run(kr, ST_START, false);
    if (result == 0 && !kr->saw_trace_events) {
        pt_error_set(err, PT_JSON_NOT_A_TRACE ": it has no \"traceEvents\" list (not a Chrome/Kineto trace)");
        result = -1;
    }
    reader_finish(kr);
    return result;
}

/* ------------------------------------------------------------ a span of the file */

int pt_kineto_read_span(const char *path, uint64_t start, uint64_t stop, bool bare_list, pt_trace_sink *sink,
                        pt_trace_meta *meta, const pt_read_options *opts, uint64_t *stopped_at, pt_error *err)
{
    err->message[0] = '\0';
    pt_input *in = pt_input_open(path, err);
    if (!in)
        return -1;
    if (start > 0 && pt_input_seek(in, start, err) != 0) {
        pt_input_close(in);
        return -1;
    }
    kineto_reader *kr = reader_new(in, sink, meta, opts, err);
    kr->discarded = start;
    kr->stop_at = stop;
    if (start > 0)
        kr->saw_trace_events = true;
    int result = kineto_run(kr, start == 0 ? ST_START : ST_EVENT, bare_list);
    *stopped_at = kr->stopped_at;
    reader_finish(kr);
    pt_input_close(in);
    return result;
}

static bool kineto_sniff(const unsigned char *head, size_t n)
{
    size_t i = n >= 3 && memcmp(head, PT_JSON_UTF8_BOM, 3) == 0 ? 3 : 0;
    for (; i < n; i++) {
        if (pt_json_is_space(head[i]))
            continue;
        return head[i] == '{' || head[i] == '[';
    }
    return false;
}

const pt_trace_reader pt_kineto_reader = {"kineto", kineto_sniff, kineto_read};
