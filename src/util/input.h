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

/* Reads a whole (small) file into memory, decompressing it. Fails above max_bytes. */
char *pt_read_file(const char *path, size_t max_bytes, size_t *len_out, pt_error *err);

#endif
