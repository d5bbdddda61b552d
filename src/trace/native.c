/* native.c -- reader for perftracker's raw trace (layout in native_format.h).
 *
 * Design. The file is read section by section through pt_input (which undoes the zstd
 * compression and checks its checksum); each EVENTS section's columns are decoded into
 * one scratch array and turned back into pt_event values for the sink. Strings live in
 * one growing arena indexed by id, so names handed to the sink stay valid while the
 * section is delivered.
 *
 * Trust nothing: every length is checked against the section and fixed limits, every
 * string id against the strings seen, and the END section must be present and agree
 * with what was read. A worker killed while writing leaves a file without END (or a cut
 * zstd frame); that file is refused with a sentence saying so, never taken for a shorter
 * trace.
 *
 * Cost: one pass, a few ns per column value; memory is the largest section (a few MB)
 * plus the strings. */
#include "trace/native_format.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct native_reader {
    pt_input *in;
    pt_trace_sink *sink;
    pt_trace_meta *meta;
    const pt_read_options *opts;
    pt_error *err;
    unsigned char *section;
    size_t section_cap;
    char *arena;               /* string bytes */
    size_t arena_len, arena_cap;
    size_t *str_off;
    uint32_t *str_len;
    size_t str_count, str_cap;
    int64_t *columns;          /* [column][event] scratch */
    size_t columns_cap;
    uint64_t events;
} native_reader;

static int corrupt(native_reader *r, const char *what)
{
    pt_error_set(r->err, "the raw trace is corrupt: %s", what);
    return -1;
}

/* Reads exactly n bytes. At a clean end of the stream returns 1 when allow_eof and
 * nothing was read; a short read is a truncated file. */
static int read_exact(native_reader *r, void *dst, size_t n, bool allow_eof)
{
    size_t got = 0;
    while (got < n) {
        ptrdiff_t k = pt_input_read(r->in, (char *)dst + got, n - got, r->err);
        if (k < 0) {
            if (strstr(r->err->message, "truncated")) {
                char cause[sizeof r->err->message];
                snprintf(cause, sizeof cause, "%s", r->err->message);
                pt_error_set(r->err, "the raw trace is truncated after %llu events: %s (the worker probably "
                                     "stopped while writing it)", (unsigned long long)r->events, cause);
            }
            return -1;
        }
        if (k == 0) {
            if (got == 0 && allow_eof)
                return 1;
            pt_error_set(r->err, "the raw trace is truncated: it ends inside a section after %llu events "
                                 "(the worker probably stopped while writing it)",
                         (unsigned long long)r->events);
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

static int read_varint(native_reader *r, uint64_t *out)
{
    unsigned char bytes[10];
    for (size_t i = 0; i < sizeof bytes; i++) {
        if (read_exact(r, &bytes[i], 1, false) != 0)
            return -1;
        if (!(bytes[i] & 0x80)) {
            const unsigned char *p = bytes;
            return pt_get_varint(&p, bytes + i + 1, out) == 0 ? 0 : corrupt(r, "bad section length");
        }
    }
    return corrupt(r, "bad section length");
}

/* ------------------------------------------------------------ sections */

static int get_string(native_reader *r, const unsigned char **p, const unsigned char *end, const char **s,
                      size_t *n)
{
    uint64_t len;
    if (pt_get_varint(p, end, &len) != 0 || len > (uint64_t)(end - *p))
        return corrupt(r, "a string runs past its section");
    *s = (const char *)*p;
    *n = (size_t)len;
    *p += len;
    return 0;
}

static void copy_field(char *dst, size_t cap, const char *s, size_t n)
{
    n = PT_MIN(n, cap - 1);
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static void apply_string_fact(native_reader *r, const char *key, size_t kn, const char *s, size_t n)
{
    const pt_meta_field *f = pt_meta_field_named(key, kn);
    if (f && f->type == PT_META_STRING) {
        pt_meta_set_string(r->meta, f, s, n);
    } else if (kn == 7 && memcmp(key, "warning", 7) == 0 && r->sink->on_warning) {
        char message[512];
        copy_field(message, sizeof message, s, n);
        r->sink->on_warning(r->sink->ctx, message);
    }
}

static int read_meta(native_reader *r, const unsigned char *p, const unsigned char *end)
{
    uint64_t count;
    if (pt_get_varint(&p, end, &count) != 0)
        return corrupt(r, "bad META section");
    for (uint64_t i = 0; i < count; i++) {
        const char *key, *s;
        size_t kn, n;
        if (get_string(r, &p, end, &key, &kn) != 0 || p >= end)
            return corrupt(r, "bad META entry");
        char type = (char)*p++;
        if (type == 'i') {
            uint64_t v;
            if (pt_get_varint(&p, end, &v) != 0)
                return corrupt(r, "bad META integer");
            const pt_meta_field *f = pt_meta_field_named(key, kn);
            if (f && f->type != PT_META_STRING)
                pt_meta_set_int(r->meta, f, pt_unzigzag(v));
        } else if (type == 's') {
            if (get_string(r, &p, end, &s, &n) != 0)
                return -1;
            apply_string_fact(r, key, kn, s, n);
        } else if (type == 'f') {
            if (end - p < 8)
                return corrupt(r, "bad META double");
            p += 8; /* no double facts are defined yet */
        } else {
            return corrupt(r, "unknown META value type");
        }
    }
    return 0;
}

static int read_strings(native_reader *r, const unsigned char *p, const unsigned char *end)
{
    uint64_t first, count;
    if (pt_get_varint(&p, end, &first) != 0 || pt_get_varint(&p, end, &count) != 0)
        return corrupt(r, "bad STRINGS section");
    if (first != r->str_count)
        return corrupt(r, "strings out of order");
    if (count > (uint64_t)(end - p))
        return corrupt(r, "string count larger than its section");
    for (uint64_t i = 0; i < count; i++) {
        const char *s;
        size_t n;
        if (get_string(r, &p, end, &s, &n) != 0)
            return -1;
        PT_GROW(r->str_off, r->str_cap, r->str_count + 1);
        r->str_len = pt_xrealloc(r->str_len, r->str_cap * sizeof *r->str_len);
        PT_GROW(r->arena, r->arena_cap, r->arena_len + n + 1);
        memcpy(r->arena + r->arena_len, s, n);
        r->arena[r->arena_len + n] = '\0';
        r->str_off[r->str_count] = r->arena_len;
        r->str_len[r->str_count++] = (uint32_t)n;
        r->arena_len += n + 1;
    }
    return p == end ? 0 : corrupt(r, "bytes left over in a STRINGS section");
}

static int decode_columns(native_reader *r, const pt_native_column_set *set, size_t count,
                          const unsigned char **pp, const unsigned char *end)
{
    const unsigned char *p = *pp;
    for (unsigned c = 0; c < set->count; c++) {
        int64_t *col = r->columns + (size_t)c * count;
        pt_native_column kind = (pt_native_column)set->columns[c];
        int64_t prev = 0;
        for (size_t i = 0; i < count; i++) {
            uint64_t v;
            if (kind == PT_COL_VALUE) {
                if (end - p < 8)
                    return corrupt(r, "an event block is cut short");
                v = 0;
                for (int b = 0; b < 8; b++)
                    v |= (uint64_t)p[b] << (8 * b);
                p += 8;
                col[i] = (int64_t)v;
                continue;
            }
            if (pt_get_varint(&p, end, &v) != 0)
                return corrupt(r, "an event block is cut short");
            if (kind == PT_COL_START)
                col[i] = prev = (int64_t)((uint64_t)prev + (uint64_t)pt_unzigzag(v)); /* wraps, never UB */
            else if (kind == PT_COL_NAME || kind == PT_COL_COLL_NAME)
                col[i] = (int64_t)PT_MIN(v, (uint64_t)INT64_MAX);
            else
                col[i] = pt_unzigzag(v);
        }
    }
    *pp = p;
    return 0;
}

static int string_ref(native_reader *r, int64_t id, const char **s, size_t *n)
{
    if (id < 0 || (uint64_t)id >= r->str_count)
        return corrupt(r, "an event names a string that does not exist");
    *s = r->arena + r->str_off[id];
    *n = r->str_len[id];
    return 0;
}

static int fill_event(native_reader *r, pt_event *ev, pt_native_column c, int64_t v)
{
    switch (c) {
    case PT_COL_NAME: return string_ref(r, v, &ev->name, &ev->name_len);
    case PT_COL_START: ev->ts_ns = v; break;
    case PT_COL_DUR:
        if (v < 0)
            return corrupt(r, "an event has a negative duration");
        ev->dur_ns = v;
        break;
    case PT_COL_DEPTH: ev->depth = (int32_t)v; break;
    case PT_COL_GRID_X: ev->grid[0] = (int32_t)v; break;
    case PT_COL_GRID_Y: ev->grid[1] = (int32_t)v; break;
    case PT_COL_GRID_Z: ev->grid[2] = (int32_t)v; break;
    case PT_COL_BLOCK_X: ev->block[0] = (int32_t)v; break;
    case PT_COL_BLOCK_Y: ev->block[1] = (int32_t)v; break;
    case PT_COL_BLOCK_Z: ev->block[2] = (int32_t)v; break;
    case PT_COL_COLL_NAME:
        if (v > 0)
            return string_ref(r, v - 1, &ev->coll.name, &ev->coll.name_len);
        break;
    case PT_COL_COLL_IN: ev->coll.in_nelems = v; break;
    case PT_COL_COLL_OUT: ev->coll.out_nelems = v; break;
    case PT_COL_COLL_GROUP: ev->coll.group_size = (int32_t)v; break;
    case PT_COL_COLL_DTYPE: ev->coll.dtype_bytes = (int32_t)v; break;
    case PT_COL_BYTES: ev->bytes = v; break;
    case PT_COL_STEP: ev->step = v; break;
    case PT_COL_VALUE: memcpy(&ev->value, &v, sizeof v); break;
    case PT_COL_COUNT: break;
    }
    return 0;
}

static int read_events(native_reader *r, const unsigned char *p, const unsigned char *end)
{
    if (p >= end || *p >= PT_EVENT_KIND_COUNT)
        return corrupt(r, "an event block of unknown kind");
    pt_event_kind kind = (pt_event_kind)*p++;
    uint64_t count, tid, device;
    if (pt_get_varint(&p, end, &count) != 0 || pt_get_varint(&p, end, &tid) != 0 ||
        pt_get_varint(&p, end, &device) != 0)
        return corrupt(r, "bad event block header");
    const pt_native_column_set *set = &pt_native_column_sets[kind];
    if (count > (uint64_t)(end - p) / set->count) /* every value of every column takes a byte */
        return corrupt(r, "event count larger than its block");
    size_t need = (size_t)count * set->count;
    if (need > r->columns_cap || !r->columns) { /* never NULL: NULL + 0 is UB */
        r->columns = pt_xrealloc(r->columns, need * sizeof *r->columns);
        r->columns_cap = need;
    }
    if (decode_columns(r, set, (size_t)count, &p, end) != 0)
        return -1;
    if (p != end)
        return corrupt(r, "bytes left over in an event block");
    for (size_t i = 0; i < count; i++) {
        pt_event ev;
        pt_event_init(&ev, kind);
        ev.tid = pt_unzigzag(tid);
        ev.device = (int32_t)pt_unzigzag(device);
        if (kind == PT_EVENT_CPU) /* the collector's CPU events are its profile hook's frames */
            ev.cpu_kind = PT_CPU_PYTHON;
        for (unsigned c = 0; c < set->count; c++)
            if (fill_event(r, &ev, (pt_native_column)set->columns[c], r->columns[(size_t)c * count + i]) != 0)
                return -1;
        r->events++;
        if (r->sink->on_event(r->sink->ctx, &ev) != 0) {
            pt_error_set(r->err, "the reader was stopped by its consumer");
            return -1;
        }
    }
    return 0;
}

static int check_end(native_reader *r, const unsigned char *p, const unsigned char *end)
{
    uint64_t events, strings;
    if (pt_get_varint(&p, end, &events) != 0 || pt_get_varint(&p, end, &strings) != 0)
        return corrupt(r, "bad END section");
    if (events != r->events || strings != r->str_count)
        return corrupt(r, "the END section does not match the events and strings read");
    unsigned char extra;
    int rc = read_exact(r, &extra, 1, true);
    if (rc < 0)
        return -1;
    return rc == 1 ? 0 : corrupt(r, "data follows the END section");
}

/* ------------------------------------------------------------ driver */

static int read_sections(native_reader *r)
{
    unsigned char header[PT_NATIVE_HEADER_LEN];
    if (read_exact(r, header, sizeof header, false) != 0)
        return -1;
    unsigned version = header[8] | (unsigned)header[9] << 8;
    if (memcmp(header, PT_NATIVE_MAGIC, PT_NATIVE_MAGIC_LEN) != 0)
        return corrupt(r, "bad magic");
    if (version != PT_NATIVE_VERSION) {
        pt_error_set(r->err, "raw trace version %u is not supported (this build reads version %d)", version,
                     PT_NATIVE_VERSION);
        return -1;
    }
    for (;;) {
        unsigned char type;
        int rc = read_exact(r, &type, 1, true);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            pt_error_set(r->err, "the raw trace is truncated: it has no END section after %llu events "
                                 "(the worker probably stopped while writing it)",
                         (unsigned long long)r->events);
            return -1;
        }
        uint64_t len;
        if (read_varint(r, &len) != 0)
            return -1;
        if (len > PT_NATIVE_MAX_SECTION)
            return corrupt(r, "a section is larger than the format allows");
        if (len > r->section_cap || !r->section) { /* never NULL: NULL + 0 below is UB */
            r->section = pt_xrealloc(r->section, (size_t)len);
            r->section_cap = (size_t)len;
        }
        if (read_exact(r, r->section, (size_t)len, false) != 0)
            return -1;
        const unsigned char *p = r->section, *end = r->section + len;
        if (r->opts && r->opts->progress)
            r->opts->progress(r->opts->progress_ctx, pt_input_file_offset(r->in), pt_input_file_size(r->in));
        switch (type) {
        case PT_NATIVE_META: rc = read_meta(r, p, end); break;
        case PT_NATIVE_STRINGS: rc = read_strings(r, p, end); break;
        case PT_NATIVE_EVENTS: rc = read_events(r, p, end); break;
        case PT_NATIVE_END: return check_end(r, p, end);
        default: rc = 0; break; /* a section type from a newer minor writer: skip it */
        }
        if (rc != 0)
            return -1;
    }
}

static int native_read(pt_input *in, pt_trace_sink *sink, pt_trace_meta *meta, const pt_read_options *opts,
                       pt_error *err)
{
    native_reader r = {0};
    r.in = in, r.sink = sink, r.meta = meta, r.opts = opts, r.err = err;
    snprintf(meta->producer, sizeof meta->producer, "perftracker");
    int rc = read_sections(&r);
    free(r.section);
    free(r.arena);
    free(r.str_off);
    free(r.str_len);
    free(r.columns);
    return rc;
}

static bool native_sniff(const unsigned char *head, size_t n)
{
    return n >= PT_NATIVE_MAGIC_LEN && memcmp(head, PT_NATIVE_MAGIC, PT_NATIVE_MAGIC_LEN) == 0;
}

const pt_trace_reader pt_native_reader = {"perftracker", native_sniff, native_read};
