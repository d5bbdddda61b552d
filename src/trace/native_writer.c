/* native_writer.c -- the raw-trace encoder (see native_writer.h, native_format.h).
 *
 * Events are staged column by column in a fixed block (BLOCK_EVENTS per kind and thread);
 * a full block, or a change of kind/thread/device, encodes the block's columns into the
 * section buffer and streams it through zstd to the file. Strings accumulate in their own
 * section and are always flushed before the events that may refer to them. Cost per
 * event: a few stores while staging, then one varint per column; zstd (level 3) does the
 * rest at a few hundred MB/s. Memory: about 1.2 MB of buffers plus the zstd context. */
#define _POSIX_C_SOURCE 200809L
#include "trace/native_writer.h"
#include "trace/native_format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define BLOCK_EVENTS 4096
#define STRINGS_FLUSH_BYTES (256u << 10)
#define SECTION_CAP (BLOCK_EVENTS * PT_NATIVE_MAX_EVENT_BYTES + 64)
#define ZSTD_LEVEL 3

struct pt_native_writer {
    int fd;
    char path[PATH_MAX];
    char partial_path[PATH_MAX + 16];
    ZSTD_CCtx *zstd;
    unsigned char *out;        /* compressed bytes on their way to the file */
    size_t out_cap;
    uint64_t file_bytes;
    unsigned char *section;    /* one encoded section */
    unsigned char *strings;    /* pending STRINGS payload (after its header) */
    size_t strings_len;
    uint32_t strings_first, strings_pending, strings_total;
    int64_t (*staged)[BLOCK_EVENTS]; /* [column][event] */
    size_t staged_count;
    pt_event_kind staged_kind;
    int64_t staged_tid;
    int32_t staged_device;
    uint64_t events_total;
    bool failed;
    pt_error error;
};

/* ------------------------------------------------------------ bytes to the file */

static int fail(pt_native_writer *w, const char *fmt, const char *detail)
{
    if (!w->failed)
        pt_error_set(&w->error, fmt, detail);
    w->failed = true;
    return -1;
}

static int write_all(pt_native_writer *w, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t done = write(w->fd, p, n);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return fail(w, "cannot write the raw trace: %s", strerror(errno));
        }
        p += done, n -= (size_t)done;
        w->file_bytes += (uint64_t)done;
    }
    return 0;
}

static int compress(pt_native_writer *w, const void *data, size_t n, ZSTD_EndDirective mode)
{
    if (w->failed)
        return -1;
    ZSTD_inBuffer in = {data, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {w->out, w->out_cap, 0};
        size_t left = ZSTD_compressStream2(w->zstd, &out, &in, mode);
        if (ZSTD_isError(left))
            return fail(w, "zstd failed: %s", ZSTD_getErrorName(left));
        if (out.pos && write_all(w, w->out, out.pos) < 0)
            return -1;
        bool input_done = in.pos == in.size;
        if (mode == ZSTD_e_end ? left == 0 : input_done)
            return 0;
    }
}

static int emit_section(pt_native_writer *w, uint8_t type, const unsigned char *payload, size_t len)
{
    unsigned char head[16], *p = head;
    *p++ = type;
    p = pt_put_varint(p, len);
    if (compress(w, head, (size_t)(p - head), ZSTD_e_continue) < 0)
        return -1;
    return compress(w, payload, len, ZSTD_e_continue);
}

/* ------------------------------------------------------------ strings */

/* One STRINGS section: its header, then the encoded strings in up to two pieces. */
static int emit_strings(pt_native_writer *w, uint32_t first, uint32_t count, const void *a, size_t an,
                        const void *b, size_t bn)
{
    unsigned char head[24], *p = head;
    p = pt_put_varint(p, first);
    p = pt_put_varint(p, count);
    unsigned char sec[16], *q = sec;
    *q++ = PT_NATIVE_STRINGS;
    q = pt_put_varint(q, (size_t)(p - head) + an + bn);
    if (compress(w, sec, (size_t)(q - sec), ZSTD_e_continue) < 0 ||
        compress(w, head, (size_t)(p - head), ZSTD_e_continue) < 0 || compress(w, a, an, ZSTD_e_continue) < 0)
        return -1;
    return bn ? compress(w, b, bn, ZSTD_e_continue) : 0;
}

static int flush_strings(pt_native_writer *w)
{
    if (!w->strings_pending)
        return 0;
    if (emit_strings(w, w->strings_first, w->strings_pending, w->strings, w->strings_len, NULL, 0) < 0)
        return -1;
    w->strings_first = w->strings_total;
    w->strings_pending = 0;
    w->strings_len = 0;
    return 0;
}

uint32_t pt_native_writer_string(pt_native_writer *w, const char *s, size_t n)
{
    if (w->failed)
        return PT_NATIVE_NO_STRING;
    if (n > PT_NATIVE_MAX_STRING)
        n = PT_NATIVE_MAX_STRING; /* a pathological name is cut, not fatal */
    if (w->strings_len + n + 10 > STRINGS_FLUSH_BYTES && flush_strings(w) < 0)
        return PT_NATIVE_NO_STRING;
    if (n + 10 > STRINGS_FLUSH_BYTES) { /* a huge string travels in a section of its own */
        unsigned char len[10];
        size_t len_n = (size_t)(pt_put_varint(len, n) - len);
        if (emit_strings(w, w->strings_total, 1, len, len_n, s, n) < 0)
            return PT_NATIVE_NO_STRING;
        w->strings_first = ++w->strings_total;
        return w->strings_total - 1;
    }
    unsigned char *p = pt_put_varint(w->strings + w->strings_len, n);
    memcpy(p, s, n);
    w->strings_len = (size_t)(p + n - w->strings);
    w->strings_pending++;
    return w->strings_total++;
}

/* ------------------------------------------------------------ events */

static int flush_block(pt_native_writer *w)
{
    if (!w->staged_count)
        return 0;
    if (flush_strings(w) < 0)
        return -1;
    const pt_native_column_set *set = &pt_native_column_sets[w->staged_kind];
    unsigned char *p = w->section;
    *p++ = (unsigned char)w->staged_kind;
    p = pt_put_varint(p, w->staged_count);
    p = pt_put_varint(p, pt_zigzag(w->staged_tid));
    p = pt_put_varint(p, pt_zigzag(w->staged_device));
    for (unsigned c = 0; c < set->count; c++) {
        const int64_t *col = w->staged[c];
        pt_native_column kind = (pt_native_column)set->columns[c];
        int64_t prev = 0;
        for (size_t i = 0; i < w->staged_count; i++) {
            if (kind == PT_COL_VALUE) {
                for (int b = 0; b < 8; b++) /* little endian whatever the host */
                    *p++ = (unsigned char)((uint64_t)col[i] >> (8 * b));
            } else if (kind == PT_COL_START) {
                p = pt_put_varint(p, pt_zigzag(col[i] - prev));
                prev = col[i];
            } else if (kind == PT_COL_NAME || kind == PT_COL_COLL_NAME) {
                p = pt_put_varint(p, (uint64_t)col[i]);
            } else {
                p = pt_put_varint(p, pt_zigzag(col[i]));
            }
        }
    }
    w->staged_count = 0;
    return emit_section(w, PT_NATIVE_EVENTS, w->section, (size_t)(p - w->section));
}

static int64_t column_value(const pt_event *ev, pt_native_column c, uint32_t name, uint32_t coll)
{
    switch (c) {
    case PT_COL_NAME: return name;
    case PT_COL_START: return ev->ts_ns;
    case PT_COL_DUR: return ev->dur_ns;
    case PT_COL_DEPTH: return ev->depth;
    case PT_COL_GRID_X: return ev->grid[0];
    case PT_COL_GRID_Y: return ev->grid[1];
    case PT_COL_GRID_Z: return ev->grid[2];
    case PT_COL_BLOCK_X: return ev->block[0];
    case PT_COL_BLOCK_Y: return ev->block[1];
    case PT_COL_BLOCK_Z: return ev->block[2];
    case PT_COL_COLL_NAME: return coll == PT_NATIVE_NO_STRING ? 0 : (int64_t)coll + 1;
    case PT_COL_COLL_IN: return ev->coll.in_nelems;
    case PT_COL_COLL_OUT: return ev->coll.out_nelems;
    case PT_COL_COLL_GROUP: return ev->coll.group_size;
    case PT_COL_COLL_DTYPE: return ev->coll.dtype_bytes;
    case PT_COL_BYTES: return ev->bytes;
    case PT_COL_STEP: return ev->step;
    case PT_COL_VALUE: {
        int64_t bits;
        memcpy(&bits, &ev->value, sizeof bits);
        return bits;
    }
    case PT_COL_COUNT: break;
    }
    return 0;
}

int pt_native_writer_event(pt_native_writer *w, const pt_event *ev, uint32_t name_id, uint32_t coll_name_id)
{
    if (w->failed)
        return -1;
    if ((unsigned)ev->kind >= PT_EVENT_KIND_COUNT)
        return fail(w, "%s", "an event of unknown kind was given to the raw-trace writer");
    if (name_id >= w->strings_total || (coll_name_id != PT_NATIVE_NO_STRING && coll_name_id >= w->strings_total))
        return fail(w, "%s", "an event refers to a string that was never written");
    bool same_block = w->staged_count && w->staged_kind == ev->kind && w->staged_tid == ev->tid &&
                      w->staged_device == ev->device;
    if ((!same_block || w->staged_count == BLOCK_EVENTS) && flush_block(w) < 0)
        return -1;
    w->staged_kind = ev->kind;
    w->staged_tid = ev->tid;
    w->staged_device = ev->device;
    const pt_native_column_set *set = &pt_native_column_sets[ev->kind];
    for (unsigned c = 0; c < set->count; c++)
        w->staged[c][w->staged_count] = column_value(ev, (pt_native_column)set->columns[c], name_id, coll_name_id);
    w->staged_count++;
    w->events_total++;
    return 0;
}

/* ------------------------------------------------------------ meta */

typedef struct fact_builder {
    unsigned char *p;
    uint32_t count;
} fact_builder;

static void put_key(fact_builder *b, const char *key, char type)
{
    size_t n = strlen(key);
    b->p = pt_put_varint(b->p, n);
    memcpy(b->p, key, n);
    b->p += n;
    *b->p++ = (unsigned char)type;
    b->count++;
}

static void put_int(fact_builder *b, const char *key, int64_t v)
{
    put_key(b, key, 'i');
    b->p = pt_put_varint(b->p, pt_zigzag(v));
}

static void put_str(fact_builder *b, const char *key, const char *v)
{
    size_t n = strnlen(v, PT_NAME_MAX * 4);
    put_key(b, key, 's');
    b->p = pt_put_varint(b->p, n);
    memcpy(b->p, v, n);
    b->p += n;
}

/* Facts are built in the section buffer (after a 5-byte gap for their count), which
 * flushing staged events and strings also uses: so flush first, then build. A fact
 * written after events (a hang step known late) must not share the buffer with them. */
static int begin_facts(pt_native_writer *w, fact_builder *b)
{
    if (w->failed || flush_block(w) < 0 || flush_strings(w) < 0)
        return -1;
    b->p = w->section + 5;
    b->count = 0;
    return 0;
}

static int emit_facts(pt_native_writer *w, fact_builder *b)
{
    unsigned char count[10];
    size_t n = (size_t)(pt_put_varint(count, b->count) - count);
    unsigned char *start = w->section + 5 - n;
    memcpy(start, count, n);
    return emit_section(w, PT_NATIVE_META, start, (size_t)(b->p - start));
}

int pt_native_writer_meta(pt_native_writer *w, const pt_trace_meta *m)
{
    fact_builder b;
    if (begin_facts(w, &b) < 0)
        return -1;
    for (size_t i = 0; i < pt_meta_field_count; i++) {
        const pt_meta_field *f = &pt_meta_fields[i];
        if (f->type == PT_META_STRING)
            put_str(&b, f->key, pt_meta_string(m, f));
        else
            put_int(&b, f->key, pt_meta_int(m, f));
    }
    return emit_facts(w, &b);
}

/* One fact on its own: a string (value) or, when value is NULL, an integer. */
static int write_fact(pt_native_writer *w, const char *key, const char *value, int64_t number)
{
    if (strlen(key) > 256)
        return fail(w, "%s", "a fact key is too long");
    fact_builder b;
    if (begin_facts(w, &b) < 0)
        return -1;
    if (value)
        put_str(&b, key, value);
    else
        put_int(&b, key, number);
    return emit_facts(w, &b);
}

int pt_native_writer_fact(pt_native_writer *w, const char *key, const char *value)
{
    return write_fact(w, key, value, 0);
}

int pt_native_writer_fact_int(pt_native_writer *w, const char *key, int64_t value)
{
    return write_fact(w, key, NULL, value);
}

/* ------------------------------------------------------------ open / close */

static void free_writer(pt_native_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    ZSTD_freeCCtx(w->zstd);
    free(w->out);
    free(w->section);
    free(w->strings);
    free(w->staged);
    free(w);
}

pt_native_writer *pt_native_writer_open(const char *path, pt_error *err)
{
    pt_native_writer *w = calloc(1, sizeof *w);
    if (!w) {
        pt_error_set(err, "out of memory opening the raw trace");
        return NULL;
    }
    w->fd = -1;
    if (strlen(path) >= sizeof w->path) {
        pt_error_set(err, "the raw trace path is too long");
        free(w);
        return NULL;
    }
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->partial_path, sizeof w->partial_path, "%s.partial", path);
    w->out_cap = ZSTD_CStreamOutSize();
    w->out = malloc(w->out_cap);
    w->section = malloc(SECTION_CAP);
    w->strings = malloc(STRINGS_FLUSH_BYTES);
    w->staged = malloc(sizeof(int64_t[PT_NATIVE_MAX_COLUMNS][BLOCK_EVENTS]));
    w->zstd = ZSTD_createCCtx();
    if (!w->out || !w->section || !w->strings || !w->staged || !w->zstd) {
        pt_error_set(err, "out of memory opening the raw trace");
        free_writer(w);
        return NULL;
    }
    ZSTD_CCtx_setParameter(w->zstd, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    ZSTD_CCtx_setParameter(w->zstd, ZSTD_c_checksumFlag, 1);
    /* The folder may be one the CLI chose in a shared place: never follow or reuse what is
     * at the name (a crashed run's leftover is removed, a planted symlink too, not its target). */
    unlink(w->partial_path);
    w->fd = open(w->partial_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        pt_error_set(err, "cannot create %s: %s", w->partial_path, strerror(errno));
        free_writer(w);
        return NULL;
    }
    unsigned char header[PT_NATIVE_HEADER_LEN];
    memcpy(header, PT_NATIVE_MAGIC, PT_NATIVE_MAGIC_LEN);
    header[8] = PT_NATIVE_VERSION & 0xff, header[9] = PT_NATIVE_VERSION >> 8;
    header[10] = header[11] = 0;
    if (compress(w, header, sizeof header, ZSTD_e_continue) < 0) {
        *err = w->error;
        pt_native_writer_discard(w);
        return NULL;
    }
    return w;
}

uint64_t pt_native_writer_bytes(const pt_native_writer *w)
{
    return w->file_bytes;
}

int pt_native_writer_close(pt_native_writer *w, pt_error *err)
{
    if (flush_block(w) == 0 && flush_strings(w) == 0) {
        unsigned char end[32], *p = end;
        p = pt_put_varint(p, w->events_total);
        p = pt_put_varint(p, w->strings_total);
        if (emit_section(w, PT_NATIVE_END, end, (size_t)(p - end)) == 0)
            compress(w, NULL, 0, ZSTD_e_end);
    }
    if (!w->failed && close(w->fd) != 0)
        fail(w, "cannot write the raw trace: %s", strerror(errno));
    w->fd = -1;
    if (!w->failed && rename(w->partial_path, w->path) != 0)
        fail(w, "cannot rename the raw trace into place: %s", strerror(errno));
    if (w->failed) {
        *err = w->error;
        unlink(w->partial_path);
        free_writer(w);
        return -1;
    }
    free_writer(w);
    return 0;
}

void pt_native_writer_discard(pt_native_writer *w)
{
    if (!w)
        return;
    unlink(w->partial_path);
    free_writer(w);
}
