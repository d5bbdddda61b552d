/* json.h -- a small JSON tree: built by the analysis, written as report.json, and parsed
 * back for metadata, tests and the control plane.
 *
 * Objects keep insertion order (the report's key order is part of what users read) and
 * look keys up linearly, which is fine for the few hundred keys a report section holds.
 * The big inputs (traces) never go through this tree; trace/kineto.c streams them. */
#ifndef PT_UTIL_JSON_H
#define PT_UTIL_JSON_H

#include "buf.h"

#include <stdbool.h>

typedef enum pt_json_type {
    PT_JSON_NULL,
    PT_JSON_BOOL,
    PT_JSON_NUMBER,
    PT_JSON_STRING,
    PT_JSON_ARRAY,
    PT_JSON_OBJECT
} pt_json_type;

typedef struct pt_json pt_json;

struct pt_json {
    pt_json_type type;
    bool boolean;
    bool is_integer;     /* number written without a fraction, exactly */
    int8_t digits;       /* >0: write the number with this many significant digits */
    int64_t integer;
    double number;
    char *string;        /* NUL-terminated; may contain NUL when parsed from \u0000 */
    size_t string_len;
    size_t count;        /* array items or object members */
    size_t cap;
    pt_json **items;     /* array items, or object values */
    char **keys;         /* object keys */
};

pt_json *pt_json_null(void);
pt_json *pt_json_bool(bool v);
pt_json *pt_json_number(double v);
/* A number written with `digits` significant digits: compact display data. */
pt_json *pt_json_number_rounded(double v, int digits);
pt_json *pt_json_int(int64_t v);
pt_json *pt_json_string(const char *s);
pt_json *pt_json_string_n(const char *s, size_t n);
pt_json *pt_json_array(void);
pt_json *pt_json_object(void);
void pt_json_free(pt_json *v);

/* Array/object building. Ownership of value passes to the container. pt_json_set
 * replaces an existing key. Both return value for chaining. */
pt_json *pt_json_push(pt_json *array, pt_json *value);
pt_json *pt_json_set(pt_json *object, const char *key, pt_json *value);
/* Append a member without looking for an existing key: O(1), for builders that know
 * their keys are unique (and for the parser, where the first duplicate wins on get). */
pt_json *pt_json_add(pt_json *object, const char *key, pt_json *value);

pt_json *pt_json_get(const pt_json *object, const char *key);
/* Convenience readers with a default when the member is absent or of another type. */
double pt_json_get_number(const pt_json *object, const char *key, double fallback);
const char *pt_json_get_string(const pt_json *object, const char *key, const char *fallback);

/* indent < 0: compact one line; otherwise pretty with that many spaces per level.
 * Output is HTML-safe (see pt_json_write_string). */
void pt_json_write(pt_buf *out, const pt_json *v, int indent);
/* The same for a terminal: '<', '>' and '&' stay as they are, so kernel names and
 * "<module>" frames read naturally. Never for anything a browser may load. */
void pt_json_write_for_terminal(pt_buf *out, const pt_json *v, int indent);
/* Write s as a JSON string literal (quotes included), escaping what JSON requires and
 * also '<', '>' and '&' so the output is safe to embed in HTML. Invalid UTF-8 bytes
 * become U+FFFD. */
void pt_json_write_string(pt_buf *out, const char *s, size_t n);
/* Shortest decimal that reads back as exactly v ("null" for NaN/inf). */
void pt_json_write_double(pt_buf *out, double v);
/* Test seam: v written as snprintf's "%.*g" would in plain decimal notation, into dst
 * (cap >= 48); false where it leaves that to snprintf. */
bool pt_json_format_g_fast(char *dst, size_t cap, double v, int digits);

/* Decode the body of a JSON string literal (the bytes between the quotes) into out.
 * Lone surrogates become U+FFFD. Returns false on a malformed escape. */
bool pt_json_unescape(const char *body, size_t n, pt_buf *out);

/* JSON's whitespace (RFC 8259: space, tab, LF, CR). Every reader skips it with this, and
 * any amount of it: the streaming ones (trace/kineto.c, the sniffing in trace/reader.c)
 * consume a run as they read, never holding it whole. */
static inline bool pt_json_is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
/* The length of the run of JSON whitespace at the start of p[0..n): sixteen bytes a step
 * once a run is long (SSE2), for the places where a run may be of any length. */
size_t pt_json_space_run(const char *p, size_t n);
/* A UTF-8 byte-order mark: not JSON, but every JSON tool we know of takes one before it. */
#define PT_JSON_UTF8_BOM "\xEF\xBB\xBF"

/* Parse a whole document. Depth is limited (max_depth, e.g. 64) so crafted input
 * cannot exhaust the stack. Returns NULL with err set on any error. */
pt_json *pt_json_parse(const char *text, size_t len, int max_depth, pt_error *err);

#endif
