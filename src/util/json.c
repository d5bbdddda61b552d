/* json.c -- JSON tree, writer and recursive-descent parser.
 *
 * The writer escapes '<', '>' and '&' as \u003c, \u003e, \u0026: kernel names are full of
 * them and the report is embedded in a web page, so a report can never close a <script>
 * element or inject markup. Doubles are written in their shortest exact form so a report
 * read back gives the same numbers (analyze on summaries == analyze on traces). */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_json *json_new(pt_json_type type)
{
    pt_json *v = pt_xcalloc(1, sizeof *v);
    v->type = type;
    return v;
}

pt_json *pt_json_null(void) { return json_new(PT_JSON_NULL); }

pt_json *pt_json_bool(bool b)
{
    pt_json *v = json_new(PT_JSON_BOOL);
    v->boolean = b;
    return v;
}

pt_json *pt_json_number(double d)
{
    pt_json *v = json_new(PT_JSON_NUMBER);
    v->number = d;
    return v;
}

pt_json *pt_json_number_rounded(double d, int digits)
{
    pt_json *v = pt_json_number(d);
    v->digits = (int8_t)(digits < 1 ? 1 : digits > 17 ? 17 : digits);
    return v;
}

pt_json *pt_json_int(int64_t i)
{
    pt_json *v = json_new(PT_JSON_NUMBER);
    v->is_integer = true;
    v->integer = i;
    v->number = (double)i;
    return v;
}

pt_json *pt_json_string_n(const char *s, size_t n)
{
    pt_json *v = json_new(PT_JSON_STRING);
    v->string = pt_xstrndup(s, n);
    v->string_len = n;
    return v;
}

pt_json *pt_json_string(const char *s) { return pt_json_string_n(s, strlen(s)); }
pt_json *pt_json_array(void) { return json_new(PT_JSON_ARRAY); }
pt_json *pt_json_object(void) { return json_new(PT_JSON_OBJECT); }

void pt_json_free(pt_json *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->count; i++) {
        pt_json_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

pt_json *pt_json_push(pt_json *array, pt_json *value)
{
    PT_GROW(array->items, array->cap, array->count + 1);
    array->items[array->count++] = value;
    return value;
}

static ptrdiff_t find_key(const pt_json *object, const char *key)
{
    if (!object || object->type != PT_JSON_OBJECT)
        return -1;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0)
            return (ptrdiff_t)i;
    return -1;
}

pt_json *pt_json_set(pt_json *object, const char *key, pt_json *value)
{
    ptrdiff_t at = find_key(object, key);
    if (at >= 0) {
        pt_json_free(object->items[at]);
        object->items[at] = value;
        return value;
    }
    return pt_json_add(object, key, value);
}

pt_json *pt_json_add(pt_json *object, const char *key, pt_json *value)
{
    size_t cap = object->cap;
    PT_GROW(object->items, object->cap, object->count + 1);
    if (object->cap != cap || !object->keys)
        object->keys = pt_xrealloc(object->keys, object->cap * sizeof *object->keys);
    object->keys[object->count] = pt_xstrdup(key);
    object->items[object->count++] = value;
    return value;
}

pt_json *pt_json_get(const pt_json *object, const char *key)
{
    ptrdiff_t at = find_key(object, key);
    return at >= 0 ? object->items[at] : NULL;
}

double pt_json_get_number(const pt_json *object, const char *key, double fallback)
{
    const pt_json *v = pt_json_get(object, key);
    return v && v->type == PT_JSON_NUMBER ? v->number : fallback;
}

const char *pt_json_get_string(const pt_json *object, const char *key, const char *fallback)
{
    const pt_json *v = pt_json_get(object, key);
    return v && v->type == PT_JSON_STRING ? v->string : fallback;
}

/* ---------------------------------------------------------------- writing */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not valid. */
static size_t utf8_sequence_length(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        n = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (n > avail)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

static void write_string(pt_buf *out, const char *s, size_t n, bool html_safe)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    pt_buf_reserve(out, n + 2);
    pt_buf_putc(out, '"');
    size_t run = 0; /* bytes copied verbatim, flushed in one append */
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        const char *esc = NULL;
        char uesc[7];
        size_t len = 1;
        if (c >= 0x80) {
            len = utf8_sequence_length(p + i, n - i);
            if (len == 0) {
                esc = "\\ufffd";
                len = 1;
            }
        } else if (c == '"') {
            esc = "\\\"";
        } else if (c == '\\') {
            esc = "\\\\";
        } else if (c == '\n') {
            esc = "\\n";
        } else if (c == '\t') {
            esc = "\\t";
        } else if (c == '\r') {
            esc = "\\r";
        } else if (c < 0x20 || c == 0x7f || (html_safe && (c == '<' || c == '>' || c == '&'))) {
            uesc[0] = '\\', uesc[1] = 'u', uesc[2] = '0', uesc[3] = '0';
            uesc[4] = hex[c >> 4], uesc[5] = hex[c & 15], uesc[6] = 0;
            esc = uesc;
        }
        if (esc) {
            pt_buf_append(out, s + i - run, run);
            run = 0;
            pt_buf_puts(out, esc);
        } else {
            run += len;
        }
        i += len;
    }
    pt_buf_append(out, s + n - run, run);
    pt_buf_putc(out, '"');
}

void pt_json_write_string(pt_buf *out, const char *s, size_t n)
{
    write_string(out, s, n, true);
}

/* v as "%.*g" with digits would write it, when that is plain decimal notation and the
 * rounding is unambiguous: the digits scaled to an integer, the point put in, trailing
 * zeros dropped. A report holds millions of such numbers and snprintf's exact decimal
 * conversion was a tenth of a 100k-worker analysis. Returns false to leave it to
 * snprintf: exponent notation, a fraction within 1e-6 of a half (the binary value decides
 * there, which the scaled product cannot see), a carry into another digit. The equality
 * with snprintf is tested over millions of values (test_json.c). */
static bool format_g_fast(char *dst, size_t cap, double v, int digits)
{
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                                   1e15, 1e16, 1e17, 1e18, 1e19};
    double a = fabs(v);
    if (digits < 1 || digits > 15 || !(a >= 1e-4) || a >= pow10[digits] || cap < 48)
        return false;
    int x = (int)floor(log10(a)); /* the decimal exponent; checked below */
    int decimals = digits - 1 - x; /* 0 .. digits + 3 */
    if (x < -4 || x >= digits || decimals > 18)
        return false;
    double scaled = decimals >= 0 ? a * pow10[decimals] : a / pow10[-decimals];
    if (scaled < pow10[digits - 1] || scaled >= pow10[digits])
        return false; /* log10 rounded across a power of ten */
    double whole = floor(scaled), frac = scaled - whole;
    if (fabs(frac - 0.5) < 1e-6)
        return false;
    uint64_t n = (uint64_t)whole + (frac > 0.5);
    if (n >= (uint64_t)pow10[digits])
        return false; /* 9.999995 -> 10.0000: another exponent */
    char num[16]; /* the digits, most significant first: exactly `digits` of them */
    for (int i = digits - 1; i >= 0; i--)
        num[i] = (char)('0' + n % 10), n /= 10;
    int point = digits - decimals; /* digits before the point; <= 0 for 0.00ddd */
    int first_decimal = PT_MAX(point, 0), end = digits;
    while (end > first_decimal && num[end - 1] == '0')
        end--; /* %g drops the fraction's trailing zeros */
    char *p = dst;
    if (v < 0)
        *p++ = '-';
    if (point <= 0) {
        *p++ = '0';
    } else {
        memcpy(p, num, (size_t)point);
        p += point;
    }
    if (end > first_decimal) {
        *p++ = '.';
        for (int i = point; i < 0; i++)
            *p++ = '0';
        memcpy(p, num + first_decimal, (size_t)(end - first_decimal));
        p += end - first_decimal;
    }
    *p = '\0';
    return true;
}

static void write_double_digits(pt_buf *out, double v, int digits)
{
    char tmp[160];
    if (!format_g_fast(tmp, sizeof tmp, v, digits))
        snprintf(tmp, sizeof tmp, "%.*g", digits, v);
    pt_buf_puts(out, tmp);
}

/* Test seam: format_g_fast, which test_json.c compares with snprintf. */
bool pt_json_format_g_fast(char *dst, size_t cap, double v, int digits)
{
    return format_g_fast(dst, cap, v, digits);
}

static void write_integer(pt_buf *out, long long v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do
        *--p = (char)('0' + u % 10), u /= 10;
    while (u);
    if (v < 0)
        *--p = '-';
    pt_buf_append(out, p, (size_t)(tmp + sizeof tmp - p));
}

void pt_json_write_double(pt_buf *out, double v)
{
    if (!isfinite(v)) {
        pt_buf_puts(out, "null");
        return;
    }
    if (v == 0) { /* also turns -0 into 0 */
        pt_buf_putc(out, '0');
        return;
    }
    char tmp[160];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(tmp, sizeof tmp, "%.*g", digits, v);
        if (digits == 17 || strtod(tmp, NULL) == v)
            break;
    }
    pt_buf_puts(out, tmp);
}

static void write_indent(pt_buf *out, int indent, int level)
{
    if (indent < 0)
        return;
    pt_buf_putc(out, '\n');
    for (int i = 0; i < indent * level; i++)
        pt_buf_putc(out, ' ');
}

static void write_value(pt_buf *out, const pt_json *v, int indent, int level, bool html_safe)
{
    switch (v->type) {
    case PT_JSON_NULL:
        pt_buf_puts(out, "null");
        break;
    case PT_JSON_BOOL:
        pt_buf_puts(out, v->boolean ? "true" : "false");
        break;
    case PT_JSON_NUMBER:
        if (v->is_integer)
            write_integer(out, (long long)v->integer);
        else if (v->digits > 0 && isfinite(v->number))
            write_double_digits(out, v->number, v->digits);
        else
            pt_json_write_double(out, v->number);
        break;
    case PT_JSON_STRING:
        write_string(out, v->string, v->string_len, html_safe);
        break;
    case PT_JSON_ARRAY:
    case PT_JSON_OBJECT: {
        bool is_object = v->type == PT_JSON_OBJECT;
        pt_buf_putc(out, is_object ? '{' : '[');
        /* Arrays of scalars stay on one line: step lists and heatmap rows read better. */
        bool flat = !is_object;
        for (size_t i = 0; flat && i < v->count; i++)
            flat = v->items[i]->type != PT_JSON_ARRAY && v->items[i]->type != PT_JSON_OBJECT;
        for (size_t i = 0; i < v->count; i++) {
            if (i)
                pt_buf_puts(out, flat && indent >= 0 ? ", " : ",");
            if (!flat)
                write_indent(out, indent, level + 1);
            if (is_object) {
                write_string(out, v->keys[i], strlen(v->keys[i]), html_safe);
                pt_buf_puts(out, indent >= 0 ? ": " : ":");
            }
            write_value(out, v->items[i], indent, level + 1, html_safe);
        }
        if (v->count && !flat)
            write_indent(out, indent, level);
        pt_buf_putc(out, is_object ? '}' : ']');
        break;
    }
    }
}

void pt_json_write(pt_buf *out, const pt_json *v, int indent)
{
    write_value(out, v, indent, 0, true);
}

void pt_json_write_for_terminal(pt_buf *out, const pt_json *v, int indent)
{
    write_value(out, v, indent, 0, false);
}

/* ---------------------------------------------------------------- parsing */

typedef struct parser {
    const char *p, *end, *start;
    int depth, max_depth;
    pt_error *err;
} parser;

static pt_json *parse_value(parser *ps);

static void fail(parser *ps, const char *what)
{
    if (ps->err && !ps->err->message[0])
        pt_error_set(ps->err, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

size_t pt_json_space_run(const char *p, size_t n)
{
    size_t i = 0;
    for (; i < n && i < 16; i++) /* most runs are a newline and some indent */
        if (!pt_json_is_space(p[i]))
            return i;
#if defined(__SSE2__)
    const __m128i space = _mm_set1_epi8(' '), tab = _mm_set1_epi8('\t'), lf = _mm_set1_epi8('\n'),
                  cr = _mm_set1_epi8('\r');
    for (; n - i >= 16; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(v, tab)),
                                  _mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
        unsigned mask = (unsigned)_mm_movemask_epi8(ws);
        if (mask != 0xFFFF)
            return i + (size_t)__builtin_ctz(~mask);
    }
#endif
    while (i < n && pt_json_is_space(p[i]))
        i++;
    return i;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && pt_json_is_space(*ps->p))
        ps->p++;
}

static bool read_hex4(const char **pp, const char *end, uint32_t *out)
{
    const char *p = *pp;
    if (end - p < 4)
        return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = pt_hex_digit(p[i]);
        if (h < 0)
            return false;
        v = v << 4 | (uint32_t)h;
    }
    *pp = p + 4;
    *out = v;
    return true;
}

static void put_utf8(pt_buf *b, uint32_t cp)
{
    char tmp[4];
    size_t n;
    if (cp < 0x80)
        tmp[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        tmp[0] = (char)(0xC0 | cp >> 6), tmp[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        tmp[0] = (char)(0xE0 | cp >> 12), tmp[1] = (char)(0x80 | (cp >> 6 & 0x3F)),
        tmp[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        tmp[0] = (char)(0xF0 | cp >> 18), tmp[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
        tmp[2] = (char)(0x80 | (cp >> 6 & 0x3F)), tmp[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    pt_buf_append(b, tmp, n);
}

bool pt_json_unescape(const char *body, size_t n, pt_buf *out)
{
    const char *p = body, *end = body + n;
    while (p < end) {
        const char *run = p;
        while (p < end && *p != '\\')
            p++;
        pt_buf_append(out, run, (size_t)(p - run));
        if (p >= end)
            break;
        if (++p >= end)
            return false;
        char e = *p++;
        switch (e) {
        case '"': pt_buf_putc(out, '"'); break;
        case '\\': pt_buf_putc(out, '\\'); break;
        case '/': pt_buf_putc(out, '/'); break;
        case 'b': pt_buf_putc(out, '\b'); break;
        case 'f': pt_buf_putc(out, '\f'); break;
        case 'n': pt_buf_putc(out, '\n'); break;
        case 'r': pt_buf_putc(out, '\r'); break;
        case 't': pt_buf_putc(out, '\t'); break;
        case 'u': {
            uint32_t cp;
            if (!read_hex4(&p, end, &cp))
                return false;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                const char *save = p;
                uint32_t lo;
                p += 2;
                if (read_hex4(&p, end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    p = save, cp = 0xFFFD;
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            put_utf8(out, cp);
            break;
        }
        default:
            return false;
        }
    }
    return true;
}

/* Parses a string literal (p at the opening quote) into out. */
static bool parse_string_into(parser *ps, pt_buf *out)
{
    const char *body = ++ps->p;
    while (ps->p < ps->end && *ps->p != '"') {
        if ((unsigned char)*ps->p < 0x20) {
            fail(ps, "control character in string");
            return false;
        }
        if (*ps->p == '\\' && ps->end - ps->p < 2)
            break;
        ps->p += *ps->p == '\\' ? 2 : 1;
    }
    if (ps->p >= ps->end || *ps->p != '"') {
        fail(ps, "unterminated string");
        return false;
    }
    size_t n = (size_t)(ps->p - body);
    ps->p++; /* closing quote */
    if (!pt_json_unescape(body, n, out)) {
        fail(ps, "bad escape in string");
        return false;
    }
    return true;
}

static pt_json *parse_string(parser *ps)
{
    pt_buf b = PT_BUF_INIT;
    if (!parse_string_into(ps, &b)) {
        pt_buf_free(&b);
        return NULL;
    }
    pt_json *v = json_new(PT_JSON_STRING);
    v->string_len = b.len;
    v->string = pt_buf_take(&b);
    return v;
}

/* One or more digits, consumed; none makes the number bad. */
static bool parse_digits(parser *ps)
{
    const char *start = ps->p;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
        ps->p++;
    if (ps->p == start)
        fail(ps, "bad number");
    return ps->p != start;
}

static pt_json *parse_number(parser *ps)
{
    const char *s = ps->p;
    bool integer = true;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (!parse_digits(ps))
        return NULL;
    if (ps->p < ps->end && *ps->p == '.') {
        integer = false;
        ps->p++;
        if (!parse_digits(ps))
            return NULL;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integer = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (!parse_digits(ps))
            return NULL;
    }
    /* strtod/strtoll read until a non-digit, and the input need not be NUL-terminated
     * (a number can be its last byte), so both read a terminated copy. */
    char tmp[64];
    size_t n = (size_t)(ps->p - s);
    char *copy = n < sizeof tmp ? tmp : pt_xmalloc(n + 1);
    memcpy(copy, s, n);
    copy[n] = '\0';
    pt_json *v = pt_json_number(strtod(copy, NULL));
    if (integer && n <= 20) { /* keep 19-digit integers (epoch ns) exact */
        errno = 0;
        long long i = strtoll(copy, NULL, 10);
        if (errno == 0) {
            v->is_integer = true;
            v->integer = i;
        }
    }
    if (copy != tmp)
        free(copy);
    return v;
}

static bool expect_literal(parser *ps, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0) {
        fail(ps, "unexpected token");
        return false;
    }
    ps->p += n;
    return true;
}

static pt_json *parse_container(parser *ps, bool is_object)
{
    if (++ps->depth > ps->max_depth) {
        fail(ps, "nesting too deep");
        return NULL;
    }
    char close = is_object ? '}' : ']';
    pt_json *v = is_object ? pt_json_object() : pt_json_array();
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        if (is_object) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected object key");
                goto error;
            }
            pt_buf kb = PT_BUF_INIT;
            if (!parse_string_into(ps, &kb)) {
                pt_buf_free(&kb);
                goto error;
            }
            key = pt_buf_take(&kb);
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                fail(ps, "expected ':'");
                goto error;
            }
            ps->p++;
        }
        pt_json *item = parse_value(ps);
        if (!item) {
            free(key);
            goto error;
        }
        if (is_object) {
            pt_json_add(v, key, item);
            free(key);
        } else {
            pt_json_push(v, item);
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return v;
        }
        fail(ps, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto error;
    }
error:
    pt_json_free(v);
    return NULL;
}

static pt_json *parse_value(parser *ps)
{
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end of input");
        return NULL;
    }
    switch (*ps->p) {
    case '{': return parse_container(ps, true);
    case '[': return parse_container(ps, false);
    case '"': return parse_string(ps);
    case 't': return expect_literal(ps, "true") ? pt_json_bool(true) : NULL;
    case 'f': return expect_literal(ps, "false") ? pt_json_bool(false) : NULL;
    case 'n': return expect_literal(ps, "null") ? pt_json_null() : NULL;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps);
        fail(ps, "unexpected character");
        return NULL;
    }
}

pt_json *pt_json_parse(const char *text, size_t len, int max_depth, pt_error *err)
{
    parser ps = {text, text + len, text, 0, max_depth, err};
    if (err)
        err->message[0] = '\0';
    pt_json *v = parse_value(&ps);
    if (!v)
        return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "trailing characters after JSON value");
        pt_json_free(v);
        return NULL;
    }
    return v;
}
