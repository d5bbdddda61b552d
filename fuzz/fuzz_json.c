/* fuzz_json.c -- the generic JSON parser and the HTML-safe writer (src/util/json.c).
 *
 * The parser reads the top-level members of every trace (distributedInfo, ...) and
 * report.json when PerfDisplay is refreshed; the writer produces report.json and the
 * page's data.js. Properties checked for every input:
 *   - whatever parses, writes; what the writer writes parses back and re-writes to the
 *     same bytes (compact and pretty agree);
 *   - any bytes written as a string literal come out valid UTF-8 with no raw '<', '>',
 *     '&' or control byte (the page embeds the report in a <script>: docs/security.md),
 *     and parse back to the input itself when the input was valid UTF-8. */
#include "fuzz_common.h"

#include "util/buf.h"
#include "util/json.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

PT_FUZZ_CHECKER static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || len > n - i)
            return false;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

/* v written into out (emptied first; indent as pt_json_write takes it). */
static void rewrite(pt_buf *out, const pt_json *v, int indent)
{
    pt_buf_reset(out);
    pt_json_write(out, v, indent);
}

/* The writer's text parsed back; what names the check that fails when it does not. */
static pt_json *parse_back(const pt_buf *text, const char *what)
{
    pt_error err = {{0}};
    pt_json *v = pt_json_parse(text->data, text->len, 1 << 20, &err);
    PT_FUZZ_CHECK(v != NULL, what);
    return v;
}

/* Whether text holds a byte the HTML-safe writer must never emit raw: '<', '>', '&', and
 * with controls set, a control byte or DEL. */
PT_FUZZ_CHECKER static bool holds_unsafe_byte(const pt_buf *text, bool controls)
{
    for (size_t i = 0; i < text->len; i++) {
        unsigned char c = (unsigned char)text->data[i];
        if (c == '<' || c == '>' || c == '&' || (controls && (c < 0x20 || c == 0x7f)))
            return true;
    }
    return false;
}

static bool same_text(const pt_buf *a, const pt_buf *b)
{
    return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static void check_tree_round_trip(const pt_json *v)
{
    pt_buf once = PT_BUF_INIT, twice = PT_BUF_INIT, pretty = PT_BUF_INIT;
    rewrite(&once, v, -1);
    pt_json *again = parse_back(&once, "the writer's output does not parse back");
    rewrite(&twice, again, -1);
    pt_json *normal = parse_back(&twice, "the writer's output does not parse back (second pass)");
    rewrite(&once, normal, -1);
    PT_FUZZ_CHECK(same_text(&once, &twice), "write(parse(write(v))) differs from write(v)");
    rewrite(&pretty, normal, 2);
    pt_json *from_pretty = parse_back(&pretty, "pretty output does not parse back");
    rewrite(&once, from_pretty, -1);
    PT_FUZZ_CHECK(same_text(&once, &twice), "pretty and compact output disagree");
    PT_FUZZ_CHECK(!holds_unsafe_byte(&twice, false), "raw '<', '>' or '&' in the writer's output");
    pt_json_free(again);
    pt_json_free(normal);
    pt_json_free(from_pretty);
    pt_buf_free(&once);
    pt_buf_free(&twice);
    pt_buf_free(&pretty);
}

static void check_string_literal(const uint8_t *data, size_t size)
{
    pt_buf lit = PT_BUF_INIT;
    pt_json_write_string(&lit, (const char *)data, size);
    PT_FUZZ_CHECK(valid_utf8((const unsigned char *)lit.data, lit.len), "a written string is not valid UTF-8");
    PT_FUZZ_CHECK(!holds_unsafe_byte(&lit, true), "a written string holds a raw control byte, '<', '>' or '&'");
    pt_error err = {{0}};
    pt_json *back = pt_json_parse(lit.data, lit.len, 4, &err);
    PT_FUZZ_CHECK(back && back->type == PT_JSON_STRING, "a written string does not parse back");
    if (valid_utf8(data, size))
        PT_FUZZ_CHECK(back->string_len == size && memcmp(back->string, data, size) == 0,
                      "valid UTF-8 does not survive a write and a parse unchanged");
    pt_json_free(back);
    pt_buf_free(&lit);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_error err = {{0}};
    pt_json *v = pt_json_parse((const char *)data, size, 64, &err);
    if (v)
        check_tree_round_trip(v);
    else
        PT_FUZZ_CHECK(err.message[0], "a parse failed without a message");
    pt_json_free(v);

    check_string_literal(data, size);

    pt_buf out = PT_BUF_INIT;
    pt_json_unescape((const char *)data, size, &out);
    pt_buf_free(&out);
    return 0;
}
