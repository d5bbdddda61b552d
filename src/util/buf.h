/* buf.h -- a growable byte buffer, the one way this codebase builds strings. */
#ifndef PT_UTIL_BUF_H
#define PT_UTIL_BUF_H

#include "common.h"

typedef struct pt_buf {
    char *data; /* always NUL-terminated when len > 0 or after pt_buf_cstr */
    size_t len;
    size_t cap;
} pt_buf;

#define PT_BUF_INIT { NULL, 0, 0 }

void pt_buf_reserve(pt_buf *b, size_t extra);
void pt_buf_append(pt_buf *b, const void *data, size_t n);
void pt_buf_puts(pt_buf *b, const char *s);
void pt_buf_putc(pt_buf *b, char c);
void pt_buf_printf(pt_buf *b, const char *fmt, ...) PT_PRINTF(2, 3);
const char *pt_buf_cstr(pt_buf *b);
void pt_buf_reset(pt_buf *b);
void pt_buf_free(pt_buf *b);
/* Hand the bytes to the caller (NUL-terminated) and leave b empty. */
char *pt_buf_take(pt_buf *b);

#endif
