/* reader.c -- picks the reader for a file by sniffing its decompressed first bytes.
 *
 * JSON may open with whitespace of any length (after a UTF-8 byte-order mark), so the
 * head the sniffers see is the file's first bytes with that run read through, a chunk at
 * a time, and handed on as one space: its first token, wherever it is. No binary format's
 * magic begins with JSON whitespace, so no other decision changes. */
#include "trace/reader.h"
#include "util/json.h"

#include <stdlib.h>
#include <string.h>

#define SNIFF_CHUNK ((size_t)64 << 10)

/* Fills dst[*n..cap) from the stream until it is full or the stream ends. */
static int read_into(pt_input *in, unsigned char *dst, size_t *n, size_t cap, pt_error *err)
{
    while (*n < cap) {
        ptrdiff_t got = pt_input_read(in, dst + *n, cap - *n, err);
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        *n += (size_t)got;
    }
    return 0;
}

/* The head to sniff (see the top of this file): its length, or -1 with err set. */
static ptrdiff_t read_head(pt_input *in, unsigned char *head, size_t cap, pt_error *err)
{
    unsigned char *chunk = pt_xmalloc(SNIFF_CHUNK);
    size_t n = 0, at = 0, kept = 0;
    if (read_into(in, chunk, &n, SNIFF_CHUNK, err) != 0)
        goto fail;
    if (n >= 3 && memcmp(chunk, PT_JSON_UTF8_BOM, 3) == 0)
        memcpy(head, chunk, 3), at = kept = 3;
    bool spaced = false;
    for (;;) {
        size_t run = pt_json_space_run((const char *)chunk + at, n - at);
        at += run, spaced |= run > 0;
        if (at < n || n < SNIFF_CHUNK) /* a token, or the end of the stream */
            break;
        n = at = 0;
        if (read_into(in, chunk, &n, SNIFF_CHUNK, err) != 0)
            goto fail;
    }
    if (spaced)
        head[kept++] = ' ';
    size_t take = PT_MIN(cap - kept, n - at), len = kept + take;
    memcpy(head + kept, chunk + at, take);
    if (at + take == n && n == SNIFF_CHUNK && read_into(in, head, &len, cap, err) != 0)
        goto fail; /* the token began at the chunk's end: the rest of the head follows */
    free(chunk);
    return (ptrdiff_t)len;
fail:
    free(chunk);
    return -1;
}

static const pt_trace_reader *const readers[] = {&pt_native_reader, &pt_kineto_reader};

int pt_trace_read(const char *path, pt_trace_sink *sink, pt_trace_meta *meta,
                  const pt_read_options *opts, pt_error *err)
{
    err->message[0] = '\0';
    pt_input *in = pt_input_open(path, err);
    if (!in)
        return -1;
    unsigned char head[64];
    ptrdiff_t n = read_head(in, head, sizeof head, err);
    pt_input_close(in);
    if (n < 0)
        return -1;
    if (n == 0) {
        pt_error_set(err, "the file is empty");
        return -1;
    }
    for (size_t i = 0; i < PT_ARRAY_LEN(readers); i++) {
        if (!readers[i]->sniff(head, (size_t)n))
            continue;
        /* Reopen rather than un-read: sniffing costs one extra open, and every reader
         * then sees a plain stream from byte 0. */
        in = pt_input_open(path, err);
        if (!in)
            return -1;
        int rc = readers[i]->read(in, sink, meta, opts, err);
        pt_input_close(in);
        return rc;
    }
    pt_error_set(err, "not a trace: neither Chrome/Kineto JSON nor a perftracker raw trace");
    return -1;
}

bool pt_trace_error_is_foreign_json(const pt_error *err)
{
    return strncmp(err->message, PT_JSON_NOT_A_TRACE, strlen(PT_JSON_NOT_A_TRACE)) == 0;
}
