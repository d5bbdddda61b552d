/* input.c -- plain, gzip (zlib inflate, multi-member) and zstd streaming input.
 *
 * A regular file is read up to the size it had when it was opened, never further: a
 * file that keeps growing (a writer still at work, or someone appending forever) would
 * otherwise be followed until the disk is full. Reaching that size while the file has
 * grown is an error that says so. Zero bytes after the last gzip member are padding, as
 * `gzip -d` takes them (tape and block-device copies leave them); zstd has no such
 * convention (`zstd -d` refuses them) and neither do we. Every open input is registered
 * with the current allocation guard (common.h), so a worker that runs out of memory
 * mid-read still closes its file.
 *
 * A zstd frame names the window its decoder must hold (up to 128 MiB here, whatever the
 * frame's size: 4 KB can ask for it). Under a memory share (input.h) the decoder is told
 * the largest window that fits half of what is left of the share (ZSTD_d_windowLogMax),
 * so a frame asking for more is refused before its window is allocated, and what the
 * decoder holds is counted against the share as it grows. A gzip window is 32 KB: not
 * counted. */
#define _POSIX_C_SOURCE 200809L
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#define RAW_CHUNK (256 * 1024)
/* A file smaller than RAW_CHUNK gets a buffer of its size (at least this): reads never go
 * past the size at open, so more would never be used. */
#define RAW_CHUNK_MIN (4 * 1024)

struct pt_input {
    int fd;
    const char *name;            /* for messages */
    pt_compression compression;
    uint64_t file_size, file_offset;
    unsigned char *raw;          /* compressed bytes read but not yet consumed */
    size_t raw_cap, raw_len, raw_pos;
    bool raw_eof;
    bool stream_done;            /* a complete compressed frame/member just ended */
    z_stream gz;
    ZSTD_DCtx *zstd;
    size_t zstd_window_max;      /* the largest window its frames may ask for */
    size_t zstd_counted;         /* what the decoder holds, counted against the share */
};

/* ------------------------------------------------------------ the memory share */

static _Thread_local struct {
    size_t size, used; /* size 0: no share */
} share;

void pt_share_begin(size_t bytes)
{
    share.size = bytes;
    share.used = 0;
}

void pt_share_end(void)
{
    share.size = share.used = 0;
}

size_t pt_share_size(void)
{
    return share.size;
}

size_t pt_share_left(void)
{
    return share.size ? share.size - share.used : SIZE_MAX;
}

bool pt_share_take(size_t bytes)
{
    if (!share.size)
        return true;
    if (bytes > share.size - share.used)
        return false;
    share.used += bytes;
    return true;
}

void pt_share_give(size_t bytes)
{
    share.used -= PT_MIN(bytes, share.used);
}

void pt_share_error(pt_error *err, const char *what)
{
    pt_error_set(err, "needs more memory than its share (%zu MiB) %s: refused rather than half-read (a smaller "
                      "-j gives each file of an analysis a larger share; PERFTRACKER_ANALYZE_MEMORY_MB sets the "
                      "memory shared)", share.size >> 20, what);
}

/* What a zstd decoder holds beside its window: its context (~160 KB) and its buffers of
 * a block in and two blocks out (128 KB each). */
#define ZSTD_DECODER_BESIDE_WINDOW ((size_t)640 << 10)
#define ZSTD_WINDOW_LOG_MIN 10 /* the format's smallest window */
#define ZSTD_WINDOW_LOG_MAX 27 /* zstd's own default limit, 128 MiB */

/* The largest window log whose decoder fits `room` bytes; 0 when none does. */
static int window_log_within(size_t room)
{
    int log = ZSTD_WINDOW_LOG_MAX;
    while (log >= ZSTD_WINDOW_LOG_MIN && ((size_t)1 << log) + ZSTD_DECODER_BESIDE_WINDOW > room)
        log--;
    return log >= ZSTD_WINDOW_LOG_MIN ? log : 0;
}

/* Counts what the decoder holds now against the share (it grows when a frame's window
 * is set up). */
static bool count_zstd_decoder(pt_input *in, pt_error *err)
{
    size_t now = ZSTD_sizeof_DStream(in->zstd);
    if (now <= in->zstd_counted)
        return true;
    if (!pt_share_take(now - in->zstd_counted)) {
        pt_share_error(err, "to decompress it (its zstd decoder)");
        return false;
    }
    in->zstd_counted = now;
    return true;
}

/* A new zstd decoder whose frames may ask for a window that fits half of what is left
 * of the share. */
static bool open_zstd(pt_input *in, pt_error *err)
{
    in->zstd = ZSTD_createDCtx();
    if (!in->zstd) {
        pt_error_set(err, "zstd initialisation failed (out of memory)");
        return false;
    }
    size_t left = pt_share_left();
    int log = left == SIZE_MAX ? ZSTD_WINDOW_LOG_MAX : window_log_within(left / 2);
    in->zstd_window_max = (size_t)1 << log;
    if (!log) {
        pt_share_error(err, "to decompress it (a zstd decoder needs at least 1 MiB)");
        return false;
    }
    if (ZSTD_isError(ZSTD_DCtx_setParameter(in->zstd, ZSTD_d_windowLogMax, log))) {
        pt_error_set(err, "zstd initialisation failed (window limit)");
        return false;
    }
    return count_zstd_decoder(in, err);
}

/* At the size the file had at open: the end, unless it has grown since. */
static ptrdiff_t end_at_size_at_open(pt_input *in, pt_error *err)
{
    struct stat st;
    if (fstat(in->fd, &st) == 0 && (uint64_t)st.st_size > in->file_size) {
        pt_error_set(err,
                     "the file grew while it was read (%llu bytes when opened, %llu now): it is still being "
                     "written; analyse it once it is complete",
                     (unsigned long long)in->file_size, (unsigned long long)st.st_size);
        return -1;
    }
    return 0;
}

static ptrdiff_t read_fd(pt_input *in, void *dst, size_t n, pt_error *err)
{
    if (in->file_offset >= in->file_size)
        return end_at_size_at_open(in, err);
    n = (size_t)PT_MIN((uint64_t)n, in->file_size - in->file_offset);
    for (;;) {
        ssize_t got = read(in->fd, dst, n);
        if (got >= 0) {
            in->file_offset += (uint64_t)got;
            return got;
        }
        if (errno != EINTR) {
            pt_error_set(err, "read failed: %s", strerror(errno));
            return -1;
        }
    }
}

/* Makes compressed bytes available in raw[raw_pos..raw_len). Returns false on error. */
static bool fill_raw(pt_input *in, pt_error *err)
{
    if (in->raw_pos < in->raw_len || in->raw_eof)
        return true;
    ptrdiff_t got = read_fd(in, in->raw, in->raw_cap, err);
    if (got < 0)
        return false;
    in->raw_pos = 0;
    in->raw_len = (size_t)got;
    in->raw_eof = got == 0;
    return true;
}

static void close_on_unwind(void *in)
{
    pt_input_close(in);
}

pt_input *pt_input_open(const char *path, pt_error *err)
{
    /* O_NONBLOCK: opening a FIFO (or a device) named like a trace must not wait for a
     * writer forever; it is refused below. Reads of regular files ignore the flag. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        pt_error_set(err, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_error_set(err, "not a regular file");
        close(fd);
        return NULL;
    }
    pt_input *in = pt_xcalloc(1, sizeof *in);
    in->fd = fd;
    in->file_size = (uint64_t)st.st_size;
    pt_unwind_push(close_on_unwind, in);
    in->raw_cap = (size_t)PT_MIN((uint64_t)RAW_CHUNK, PT_MAX(in->file_size, (uint64_t)RAW_CHUNK_MIN));
    in->raw = pt_xmalloc(in->raw_cap);
    if (!fill_raw(in, err)) {
        pt_input_close(in);
        return NULL;
    }
    const unsigned char *m = in->raw;
    if (in->raw_len >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
        in->compression = PT_COMPRESSION_GZIP;
        if (inflateInit2(&in->gz, 15 + 32) != Z_OK) {
            pt_error_set(err, "zlib initialisation failed");
            pt_input_close(in);
            return NULL;
        }
    } else if (in->raw_len >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) {
        in->compression = PT_COMPRESSION_ZSTD;
        if (!open_zstd(in, err)) {
            pt_input_close(in);
            return NULL;
        }
    }
    return in;
}

/* After a complete member: consumes zero bytes up to the next member or the end. */
static bool skip_zero_padding(pt_input *in, pt_error *err)
{
    for (;;) {
        while (in->raw_pos < in->raw_len && in->raw[in->raw_pos] == 0)
            in->raw_pos++;
        if (in->raw_pos < in->raw_len || in->raw_eof)
            return true;
        if (!fill_raw(in, err))
            return false;
    }
}

static ptrdiff_t read_gzip(pt_input *in, unsigned char *dst, size_t n, pt_error *err)
{
    in->gz.next_out = dst;
    in->gz.avail_out = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
    while (in->gz.avail_out > 0) {
        if (!fill_raw(in, err) || (in->stream_done && !skip_zero_padding(in, err)))
            return -1;
        if (in->raw_pos == in->raw_len) { /* end of file */
            if (!in->stream_done) {
                pt_error_set(err, "gzip stream is truncated (the file ends mid-stream)");
                return -1;
            }
            break;
        }
        if (in->stream_done) { /* another gzip member follows */
            inflateReset(&in->gz);
            in->stream_done = false;
        }
        in->gz.next_in = in->raw + in->raw_pos;
        in->gz.avail_in = (uInt)(in->raw_len - in->raw_pos);
        int rc = inflate(&in->gz, Z_NO_FLUSH);
        in->raw_pos = in->raw_len - in->gz.avail_in;
        if (rc == Z_STREAM_END) {
            in->stream_done = true;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            pt_error_set(err, "gzip data is corrupt (%s)", in->gz.msg ? in->gz.msg : "inflate error");
            return -1;
        }
        if (rc == Z_STREAM_END && in->gz.avail_out < n)
            break; /* hand out what this member produced */
    }
    return (ptrdiff_t)(n - in->gz.avail_out);
}

static ptrdiff_t read_zstd(pt_input *in, unsigned char *dst, size_t n, pt_error *err)
{
    ZSTD_outBuffer out = {dst, n, 0};
    while (out.pos < out.size) {
        if (!fill_raw(in, err))
            return -1;
        if (in->raw_pos == in->raw_len) {
            if (!in->stream_done) {
                pt_error_set(err, "zstd stream is truncated (the file ends mid-frame)");
                return -1;
            }
            break;
        }
        ZSTD_inBuffer zin = {in->raw, in->raw_len, in->raw_pos};
        size_t rc = ZSTD_decompressStream(in->zstd, &out, &zin);
        in->raw_pos = zin.pos;
        if (ZSTD_isError(rc) && ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) {
            char what[160];
            snprintf(what, sizeof what, "to decompress it: a zstd frame asks for a window larger than the %zu MiB "
                     "that half of what is left of the share allows", in->zstd_window_max >> 20);
            pt_share_error(err, what);
            return -1;
        }
        if (ZSTD_isError(rc)) {
            pt_error_set(err, "zstd data is corrupt (%s)", ZSTD_getErrorName(rc));
            return -1;
        }
        if (!count_zstd_decoder(in, err))
            return -1;
        in->stream_done = rc == 0;
        if (in->stream_done && out.pos > 0)
            break;
    }
    return (ptrdiff_t)out.pos;
}

ptrdiff_t pt_input_read(pt_input *in, void *dst, size_t n, pt_error *err)
{
    switch (in->compression) {
    case PT_COMPRESSION_GZIP:
        return read_gzip(in, dst, n, err);
    case PT_COMPRESSION_ZSTD:
        return read_zstd(in, dst, n, err);
    case PT_COMPRESSION_NONE:
        break;
    }
    if (in->raw_pos < in->raw_len) { /* the sniffed head */
        size_t take = PT_MIN(n, in->raw_len - in->raw_pos);
        memcpy(dst, in->raw + in->raw_pos, take);
        in->raw_pos += take;
        return (ptrdiff_t)take;
    }
    return read_fd(in, dst, n, err);
}

pt_compression pt_input_compression(const pt_input *in) { return in->compression; }

int pt_input_seek(pt_input *in, uint64_t offset, pt_error *err)
{
    if (in->compression != PT_COMPRESSION_NONE) {
        pt_error_set(err, "cannot seek in compressed input");
        return -1;
    }
    if (lseek(in->fd, (off_t)offset, SEEK_SET) < 0) {
        pt_error_set(err, "seek failed: %s", strerror(errno));
        return -1;
    }
    in->raw_pos = in->raw_len = 0;
    in->raw_eof = false;
    in->file_offset = offset;
    return 0;
}
uint64_t pt_input_file_offset(const pt_input *in) { return in->file_offset; }
uint64_t pt_input_file_size(const pt_input *in) { return in->file_size; }

void pt_input_close(pt_input *in)
{
    if (!in)
        return;
    pt_unwind_pop(in);
    if (in->compression == PT_COMPRESSION_GZIP)
        inflateEnd(&in->gz);
    ZSTD_freeDCtx(in->zstd);
    pt_share_give(in->zstd_counted);
    close(in->fd);
    free(in->raw);
    free(in);
}

ptrdiff_t pt_pread_all(int fd, void *dst, size_t n, uint64_t at)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)dst + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ptrdiff_t)got;
}

char *pt_read_file(const char *path, size_t max_bytes, size_t *len_out, pt_error *err)
{
    pt_input *in = pt_input_open(path, err);
    if (!in)
        return NULL;
    size_t cap = 64 * 1024, len = 0, counted = pt_heap_cost(cap + 1);
    char *data = NULL;
    if (!pt_share_take(counted)) {
        counted = 0;
        pt_share_error(err, "to hold it");
        goto fail;
    }
    data = pt_xmalloc(cap + 1);
    for (;;) {
        if (len == cap) {
            if (cap >= max_bytes) {
                pt_error_set(err, "file is larger than %zu bytes", max_bytes);
                goto fail;
            }
            /* The grown buffer is counted beside the old one: realloc may copy. */
            size_t grown = PT_MIN(cap * 2, max_bytes);
            if (!pt_share_take(pt_heap_cost(grown + 1))) {
                char what[96];
                snprintf(what, sizeof what, "to hold it (%zu MiB of it read)", len >> 20);
                pt_share_error(err, what);
                goto fail;
            }
            data = pt_xrealloc(data, grown + 1);
            pt_share_give(counted);
            counted = pt_heap_cost(grown + 1);
            cap = grown;
        }
        ptrdiff_t got = pt_input_read(in, data + len, cap - len, err);
        if (got < 0)
            goto fail;
        if (got == 0)
            break;
        len += (size_t)got;
    }
    pt_input_close(in);
    pt_share_give(counted);
    data[len] = '\0';
    *len_out = len;
    return data;
fail:
    free(data);
    pt_share_give(counted);
    pt_input_close(in);
    return NULL;
}
