/* input.h -- read a file as a byte stream, transparently un-gzipping or un-zstd-ing it.
 *
 * Readers pull bytes through pt_input_read into their own buffer, so a 3 GB trace is
 * never held in memory. The compression is recognised by its magic bytes, not the file
 * name, and a truncated compressed stream is an error rather than a silent short read:
 * a worker killed while writing must not look like a shorter, valid trace. A regular
 * file ends at the size it had when opened; one that grew meanwhile is an error. */
#ifndef PT_UTIL_INPUT_H
#define PT_UTIL_INPUT_H

#include "common.h"

typedef enum pt_compression { PT_COMPRESSION_NONE, PT_COMPRESSION_GZIP, PT_COMPRESSION_ZSTD } pt_compression;

typedef struct pt_input pt_input;

pt_input *pt_input_open(const char *path, pt_error *err);
/* Reads up to n bytes. Returns the count, 0 at the end, -1 on error (err set), among
 * them reaching the size at open of a file that has grown since. */
ptrdiff_t pt_input_read(pt_input *in, void *dst, size_t n, pt_error *err);
pt_compression pt_input_compression(const pt_input *in);
/* Repositions an uncompressed input at a byte offset (for reading one file in parallel
 * spans). -1 on compressed input or failure. */
int pt_input_seek(pt_input *in, uint64_t offset, pt_error *err);
/* Bytes of the underlying file consumed so far, and its size at open (for progress). */
uint64_t pt_input_file_offset(const pt_input *in);
uint64_t pt_input_file_size(const pt_input *in);
void pt_input_close(pt_input *in);

/* Reads n bytes at offset at of fd, retrying short reads: n, fewer where the file ends,
 * or -1 with errno set. Thread-safe (pread): readers may share one descriptor. */
ptrdiff_t pt_pread_all(int fd, void *dst, size_t n, uint64_t at);

/* Reads a whole (small) file into memory, decompressing it. Fails above max_bytes, and
 * where its buffer would not fit what is left of this thread's memory share (counted only
 * while it reads: the caller counts what it keeps, PT_READ_FILE_HOLDS). */
char *pt_read_file(const char *path, size_t max_bytes, size_t *len_out, pt_error *err);
/* What the buffer pt_read_file returned with len bytes holds at most: it doubles from
 * 64 KiB. */
#define PT_READ_FILE_HOLDS(len) pt_heap_cost(PT_MAX((size_t)2 * (len), (size_t)64 << 10) + 1)

/* The memory share of the file this thread reads. analyze gives each file read at once
 * an equal part of the memory it may use; what reading and decoding the file allocates is
 * taken from the share before it is allocated (pt_share_take), and given back once freed,
 * so a file whose next step would pass its share is refused, not read further: a zstd
 * stream's window (at most half of what is left when it opens: the summarizer of a trace
 * holds up to half of the share itself), the bytes of a file held whole, a summary's
 * payload and what it decodes to, its functions' place in the store. Per thread; without
 * pt_share_begin nothing is counted and every take succeeds. */
void pt_share_begin(size_t bytes); /* 0: no limit */
void pt_share_end(void);
size_t pt_share_size(void);        /* 0 without a share */
size_t pt_share_left(void);        /* SIZE_MAX without a share */
/* Counts bytes against the share: false, and nothing counted, when they do not fit. */
bool pt_share_take(size_t bytes);
void pt_share_give(size_t bytes);
/* The error of a file refused by its share: what needed more (a phrase) and the share. */
void pt_share_error(pt_error *err, const char *what);

/* What an allocation of n bytes takes from the heap, at most: malloc's header and
 * rounding, whole pages for one it maps. For counting against a share. */
static inline size_t pt_heap_cost(size_t n)
{
    return n < (128u << 10) ? PT_MAX(n + 24, (size_t)32) : (n + 24 + 4095) / 4096 * 4096;
}

#endif
