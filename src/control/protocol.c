/* protocol.c -- encode and decode control-plane frames from one schema table.
 *
 * Each message type lists its fields (kind + offset into pt_ctl_msg + cap); the encoder
 * and the decoder walk the same list. A frame costs its fields' bytes plus 5, and both
 * directions are a single pass with no allocation. */
#define _POSIX_C_SOURCE 200809L
#include "control/protocol.h"

#include <stddef.h>
#include <string.h>

enum field_kind { F_U8, F_U32, F_I32, F_I64, F_FIXED32, F_BYTES };

typedef struct field {
    uint8_t kind;
    uint16_t offset;
    uint32_t cap; /* F_BYTES: longest accepted */
} field;

#define U8(m) {F_U8, offsetof(pt_ctl_msg, m), 0}
#define U32(m) {F_U32, offsetof(pt_ctl_msg, m), 0}
#define I32(m) {F_I32, offsetof(pt_ctl_msg, m), 0}
#define I64(m) {F_I64, offsetof(pt_ctl_msg, m), 0}
#define FIXED(m) {F_FIXED32, offsetof(pt_ctl_msg, m), 0}
#define BYTES(m, cap) {F_BYTES, offsetof(pt_ctl_msg, m), cap}

#define WORKER_FIELDS                                                                       \
    I32(worker.rank), I32(worker.local_rank), I32(worker.world_size), I32(worker.node_rank), \
        I64(worker.pid), BYTES(worker.host, PT_CTL_MAX_HOST)
#define PROGRESS_FIELDS                                                                      \
    I32(progress.world_size), I32(progress.connected), I32(progress.armed),                 \
        I32(progress.in_window), I64(progress.min_step), I64(progress.max_step),            \
        I32(progress.traces_written), I32(progress.summaries), I32(progress.failed),        \
        I32(progress.hung)

static const field challenge_fields[] = {U32(version), FIXED(nonce)};
static const field auth_fields[] = {U32(version), U8(role), FIXED(nonce), FIXED(mac)};
static const field welcome_fields[] = {FIXED(mac)};
static const field text_fields[] = {BYTES(text, PT_CTL_MAX_TEXT)};
static const field join_fields[] = {WORKER_FIELDS};
static const field heartbeat_fields[] = {U32(round), I64(steps_done), I64(mean_step_ns), I64(stalled_ns)};
static const field armed_fields[] = {U32(round), I32(status), BYTES(text, PT_CTL_MAX_TEXT),
                                     BYTES(path, PT_CTL_MAX_PATH)};
static const field summary_fields[] = {U32(round), I32(status), BYTES(text, PT_CTL_MAX_TEXT),
                                       BYTES(path, PT_CTL_MAX_PATH), BYTES(blob, PT_CTL_MAX_FRAME)};
static const field hang_fields[] = {U32(round), I64(steps_done), I64(mean_step_ns), I64(stalled_ns),
                                    BYTES(stack, PT_CTL_MAX_STACK)};
static const field auto_fields[] = {U8(kind), I64(steps_done), I64(mean_step_ns), I64(best_mean_ns),
                                    I64(stalled_ns)};
static const field arm_fields[] = {U32(round), I64(start_step), I32(steps), BYTES(path, PT_CTL_MAX_PATH)};
static const field round_fields[] = {U32(round)};
static const field trigger_fields[] = {I32(wait), I32(steps), U8(save_raw), I64(timeout_ms),
                                       BYTES(path, PT_CTL_MAX_PATH)};
static const field started_fields[] = {U32(round), I64(start_step), I32(steps), PROGRESS_FIELDS};
static const field progress_fields[] = {PROGRESS_FIELDS};
static const field worker_summary_fields[] = {WORKER_FIELDS, BYTES(path, PT_CTL_MAX_PATH),
                                              BYTES(blob, PT_CTL_MAX_FRAME)};
static const field worker_failed_fields[] = {WORKER_FIELDS, U8(kind), I64(steps_done), I64(stalled_ns),
                                             BYTES(text, PT_CTL_MAX_TEXT), BYTES(stack, PT_CTL_MAX_STACK)};
static const field done_fields[] = {U32(round), PROGRESS_FIELDS};

typedef struct schema {
    pt_ctl_type type;
    const char *name;
    const field *fields;
    size_t count;
} schema;

#define SCHEMA(t, name, f) {t, name, f, PT_ARRAY_LEN(f)}
static const schema schemas[] = {
    SCHEMA(PT_CTL_CHALLENGE, "challenge", challenge_fields),
    SCHEMA(PT_CTL_AUTH, "auth", auth_fields),
    SCHEMA(PT_CTL_WELCOME, "welcome", welcome_fields),
    SCHEMA(PT_CTL_REFUSED, "refused", text_fields),
    SCHEMA(PT_CTL_JOIN, "join", join_fields),
    SCHEMA(PT_CTL_HEARTBEAT, "heartbeat", heartbeat_fields),
    SCHEMA(PT_CTL_ARMED, "armed", armed_fields),
    SCHEMA(PT_CTL_SUMMARY, "summary", summary_fields),
    SCHEMA(PT_CTL_HANG, "hang", hang_fields),
    SCHEMA(PT_CTL_AUTO_REQUEST, "auto-request", auto_fields),
    {PT_CTL_BYE, "bye", NULL, 0},
    SCHEMA(PT_CTL_ARM, "arm", arm_fields),
    SCHEMA(PT_CTL_PROBE, "probe", round_fields),
    SCHEMA(PT_CTL_TRIGGER, "trigger", trigger_fields),
    SCHEMA(PT_CTL_ROUND_STARTED, "round-started", started_fields),
    SCHEMA(PT_CTL_PROGRESS, "progress", progress_fields),
    SCHEMA(PT_CTL_WORKER_SUMMARY, "worker-summary", worker_summary_fields),
    SCHEMA(PT_CTL_WORKER_FAILED, "worker-failed", worker_failed_fields),
    SCHEMA(PT_CTL_ROUND_DONE, "round-done", done_fields),
    SCHEMA(PT_CTL_ERROR, "error", text_fields),
};

static const schema *find_schema(int type)
{
    for (size_t i = 0; i < PT_ARRAY_LEN(schemas); i++)
        if ((int)schemas[i].type == type)
            return &schemas[i];
    return NULL;
}

const char *pt_ctl_type_name(int type)
{
    const schema *s = find_schema(type);
    return s ? s->name : "unknown";
}

const char *pt_ctl_failure_name(int kind)
{
    static const char *const names[] = {
        [PT_FAIL_NEVER_CONNECTED] = "never connected", [PT_FAIL_DIED] = "died",
        [PT_FAIL_EXITED] = "exited", [PT_FAIL_HANG] = "hang",
        [PT_FAIL_NOT_REACHED] = "did not reach the window", [PT_FAIL_NO_SUMMARY] = "no summary",
        [PT_FAIL_ERROR] = "collector error", [PT_FAIL_UNRESPONSIVE] = "unresponsive",
        [PT_FAIL_BAD_SUMMARY] = "bad summary", [PT_FAIL_NOT_PROFILED] = "not profiled",
        [PT_FAIL_COORDINATOR_LOST] = "missing",
    };
    if (kind > 0 && (size_t)kind < PT_ARRAY_LEN(names) && names[kind])
        return names[kind];
    return "unknown";
}

void pt_ctl_msg_init(pt_ctl_msg *m, pt_ctl_type type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->version = PT_CTL_VERSION;
}

pt_ctl_bytes pt_ctl_str(const char *s)
{
    pt_ctl_bytes b = {(const uint8_t *)s, s ? (uint32_t)strnlen(s, PT_CTL_MAX_FRAME) : 0};
    return b;
}

pt_ctl_bytes pt_ctl_blob(const void *data, size_t len)
{
    pt_ctl_bytes b = {data, (uint32_t)PT_MIN(len, (size_t)UINT32_MAX)};
    return b;
}

void pt_ctl_copy_str(char *dst, size_t cap, pt_ctl_bytes b)
{
    if (cap == 0)
        return;
    size_t n = PT_MIN((size_t)b.len, cap - 1);
    for (size_t i = 0; i < n; i++)
        dst[i] = b.data[i] ? (char)b.data[i] : '?';
    dst[n] = '\0';
}

/* ---------------------------------------------------------------- encoding */

static size_t field_size(const field *f, const pt_ctl_msg *m)
{
    switch (f->kind) {
    case F_U8: return 1;
    case F_U32:
    case F_I32: return 4;
    case F_I64: return 8;
    case F_FIXED32: return 32;
    default: {
        const pt_ctl_bytes *b = (const pt_ctl_bytes *)((const char *)m + f->offset);
        return b->len > f->cap ? 0 : 4 + (size_t)b->len;
    }
    }
}

size_t pt_ctl_encoded_size(const pt_ctl_msg *m)
{
    const schema *s = find_schema(m->type);
    if (!s)
        return 0;
    size_t total = 4 + 1;
    for (size_t i = 0; i < s->count; i++) {
        size_t n = field_size(&s->fields[i], m);
        if (n == 0)
            return 0;
        total += n;
    }
    return total - 4 > PT_CTL_MAX_FRAME ? 0 : total;
}

static uint8_t *put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

size_t pt_ctl_encode(const pt_ctl_msg *m, uint8_t *dst, size_t cap)
{
    size_t total = pt_ctl_encoded_size(m);
    if (total == 0 || total > cap)
        return 0;
    const schema *s = find_schema(m->type);
    uint8_t *p = put_le(dst, total - 4, 4);
    *p++ = (uint8_t)m->type;
    for (size_t i = 0; i < s->count; i++) {
        const field *f = &s->fields[i];
        const char *src = (const char *)m + f->offset;
        switch (f->kind) {
        case F_U8: *p++ = *(const uint8_t *)src; break;
        case F_U32: p = put_le(p, *(const uint32_t *)src, 4); break;
        case F_I32: p = put_le(p, (uint32_t)*(const int32_t *)src, 4); break;
        case F_I64: p = put_le(p, (uint64_t)*(const int64_t *)src, 8); break;
        case F_FIXED32: memcpy(p, src, 32), p += 32; break;
        default: {
            const pt_ctl_bytes *b = (const pt_ctl_bytes *)src;
            p = put_le(p, b->len, 4);
            if (b->len)
                memcpy(p, b->data, b->len);
            p += b->len;
        }
        }
    }
    return total;
}

/* ---------------------------------------------------------------- decoding */

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static const char *decode_field(const field *f, const uint8_t **pp, const uint8_t *end, pt_ctl_msg *m)
{
    static const size_t fixed_sizes[] = {[F_U8] = 1, [F_U32] = 4, [F_I32] = 4, [F_I64] = 8,
                                         [F_FIXED32] = 32, [F_BYTES] = 4};
    const uint8_t *p = *pp;
    char *dst = (char *)m + f->offset;
    if ((size_t)(end - p) < fixed_sizes[f->kind])
        return "frame ends inside a field";
    switch (f->kind) {
    case F_U8: *(uint8_t *)dst = *p; break;
    case F_U32: *(uint32_t *)dst = (uint32_t)get_le(p, 4); break;
    case F_I32: *(int32_t *)dst = (int32_t)(uint32_t)get_le(p, 4); break;
    case F_I64: *(int64_t *)dst = (int64_t)get_le(p, 8); break;
    case F_FIXED32: memcpy(dst, p, 32); break;
    default: {
        uint32_t len = (uint32_t)get_le(p, 4);
        if (len > f->cap)
            return "a byte field is longer than its limit";
        if ((size_t)(end - p - 4) < len)
            return "a byte field runs past the frame";
        pt_ctl_bytes *b = (pt_ctl_bytes *)dst;
        b->data = p + 4;
        b->len = len;
        *pp = p + 4 + len;
        return NULL;
    }
    }
    *pp = p + fixed_sizes[f->kind];
    return NULL;
}

ssize_t pt_ctl_decode(const void *data, size_t len, pt_ctl_msg *m, pt_error *err)
{
    const uint8_t *bytes = data;
    if (len < 4)
        return 0;
    uint32_t body_len = (uint32_t)get_le(bytes, 4);
    if (body_len == 0 || body_len > PT_CTL_MAX_FRAME) {
        pt_error_set(err, "frame length %u is out of range", body_len);
        return -1;
    }
    if (len - 4 < body_len)
        return 0;
    const schema *s = find_schema(bytes[4]);
    if (!s) {
        pt_error_set(err, "unknown message type %u", bytes[4]);
        return -1;
    }
    pt_ctl_msg_init(m, s->type);
    m->version = 0;
    const uint8_t *p = bytes + 5, *end = bytes + 4 + body_len;
    for (size_t i = 0; i < s->count; i++) {
        const char *problem = decode_field(&s->fields[i], &p, end, m);
        if (problem) {
            pt_error_set(err, "%s message: %s", s->name, problem);
            return -1;
        }
    }
    if (p != end) {
        pt_error_set(err, "%s message: %zu unexpected trailing bytes", s->name, (size_t)(end - p));
        return -1;
    }
    return (ssize_t)(4 + (size_t)body_len);
}
