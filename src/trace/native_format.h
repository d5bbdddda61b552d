/* native_format.h -- the layout of perftracker's raw trace, shared by its writer
 * (native_writer.c) and reader (native.c). docs/raw-trace-format.md is the prose version.
 *
 * The file is one zstd frame (with zstd's content checksum) of this byte stream:
 *
 *   header   "\x89PTRACE\n" then u16 version, u16 flags (little endian)
 *   section* u8 type, varint payload length, payload
 *
 * Sections:
 *   META     facts about the worker: varint count, then (string key, u8 type, value) with
 *            type 'i' (zigzag varint), 's' (string) or 'f' (8-byte IEEE double). Unknown
 *            keys are ignored, so new facts never break old readers. May repeat; the
 *            last value of a key wins (facts known only at the end come last).
 *   STRINGS  varint first id (must equal the number of strings so far), varint count,
 *            count strings. Event names refer to strings by id.
 *   EVENTS   one block of events of one kind from one thread (or GPU stream):
 *            u8 kind, varint count, zigzag tid, zigzag device, then the kind's columns
 *            (column_sets below), each holding count values back to back. Start times are
 *            zigzag deltas from the previous event's start in the block; doubles are 8
 *            raw bytes; everything else is a (zigzag) varint.
 *   END      varint events written, varint strings written. A file without it was cut
 *            short (a worker killed while writing) and is refused whole.
 *
 * A string is a varint length and its bytes. Columns make each field's values sit
 * together (delta times, small ids), which is what lets zstd shrink the trace to a few
 * bytes per event. */
#ifndef PT_TRACE_NATIVE_FORMAT_H
#define PT_TRACE_NATIVE_FORMAT_H

#include "trace/event.h"

#include <stddef.h>
#include <stdint.h>

#define PT_NATIVE_MAGIC "\x89PTRACE\n"
#define PT_NATIVE_MAGIC_LEN 8
#define PT_NATIVE_VERSION 1
#define PT_NATIVE_HEADER_LEN 12

enum pt_native_section {
    PT_NATIVE_END = 0,
    PT_NATIVE_META = 1,
    PT_NATIVE_STRINGS = 2,
    PT_NATIVE_EVENTS = 3
};

/* Limits a reader enforces (and the writer respects) so a corrupt length cannot make
 * the reader allocate without bound. */
#define PT_NATIVE_MAX_SECTION (64u << 20)
#define PT_NATIVE_MAX_STRING (1u << 20)

typedef enum pt_native_column {
    PT_COL_NAME,       /* string id */
    PT_COL_START,      /* ns, delta-coded */
    PT_COL_DUR,
    PT_COL_DEPTH,
    PT_COL_GRID_X, PT_COL_GRID_Y, PT_COL_GRID_Z,
    PT_COL_BLOCK_X, PT_COL_BLOCK_Y, PT_COL_BLOCK_Z,
    PT_COL_COLL_NAME,  /* string id + 1, 0 = none */
    PT_COL_COLL_IN, PT_COL_COLL_OUT, PT_COL_COLL_GROUP, PT_COL_COLL_DTYPE,
    PT_COL_BYTES,
    PT_COL_STEP,
    PT_COL_VALUE,      /* double */
    PT_COL_COUNT
} pt_native_column;

#define PT_NATIVE_MAX_COLUMNS 14

typedef struct pt_native_column_set {
    uint8_t count;
    uint8_t columns[PT_NATIVE_MAX_COLUMNS];
} pt_native_column_set;

/* Which columns each event kind stores, in order. */
static const pt_native_column_set pt_native_column_sets[PT_EVENT_KIND_COUNT] = {
    [PT_EVENT_GPU_KERNEL] = {14, {PT_COL_NAME, PT_COL_START, PT_COL_DUR, PT_COL_GRID_X, PT_COL_GRID_Y,
                                  PT_COL_GRID_Z, PT_COL_BLOCK_X, PT_COL_BLOCK_Y, PT_COL_BLOCK_Z,
                                  PT_COL_COLL_NAME, PT_COL_COLL_IN, PT_COL_COLL_OUT, PT_COL_COLL_GROUP,
                                  PT_COL_COLL_DTYPE}},
    [PT_EVENT_GPU_MEMCPY] = {4, {PT_COL_NAME, PT_COL_START, PT_COL_DUR, PT_COL_BYTES}},
    [PT_EVENT_GPU_MEMSET] = {4, {PT_COL_NAME, PT_COL_START, PT_COL_DUR, PT_COL_BYTES}},
    [PT_EVENT_RUNTIME] = {3, {PT_COL_NAME, PT_COL_START, PT_COL_DUR}},
    [PT_EVENT_CPU] = {4, {PT_COL_NAME, PT_COL_START, PT_COL_DUR, PT_COL_DEPTH}},
    [PT_EVENT_STEP] = {4, {PT_COL_NAME, PT_COL_START, PT_COL_DUR, PT_COL_STEP}},
    [PT_EVENT_COUNTER] = {3, {PT_COL_NAME, PT_COL_START, PT_COL_VALUE}},
};

/* The most bytes one event can take in a block: every column a 10-byte varint. */
#define PT_NATIVE_MAX_EVENT_BYTES (PT_NATIVE_MAX_COLUMNS * 10)

static inline uint64_t pt_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t pt_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Appends v as LEB128 at p (at most 10 bytes); returns the end. */
static inline unsigned char *pt_put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Reads a varint from [*p, end). Returns 0, or -1 when it runs past end or over 64 bits. */
static inline int pt_get_varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

#endif
