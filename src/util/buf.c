/* buf.c -- growable byte buffer. Doubles on growth, so appends are amortized O(1). */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

void pt_buf_reserve(pt_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    b->data = pt_xrealloc(b->data, cap);
    b->cap = cap;
}

void pt_buf_append(pt_buf *b, const void *data, size_t n)
{
    pt_buf_reserve(b, n);
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void pt_buf_puts(pt_buf *b, const char *s)
{
    pt_buf_append(b, s, strlen(s));
}

void pt_buf_putc(pt_buf *b, char c)
{
    pt_buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void pt_buf_printf(pt_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    pt_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

const char *pt_buf_cstr(pt_buf *b)
{
    if (!b->data)
        pt_buf_reserve(b, 0), b->data[0] = '\0';
    return b->data;
}

void pt_buf_reset(pt_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void pt_buf_free(pt_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *pt_buf_take(pt_buf *b)
{
    pt_buf_cstr(b);
    char *data = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return data;
}
