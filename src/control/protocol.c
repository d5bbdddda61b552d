/* protocol.c -- encode and decode control-plane frames from one schema table.
 *
 * Each message type lists its fields (kind + offset into pt_ctl_msg + cap or range); the
 * encoder and the decoder walk the same list, and both apply the same checks: a byte
 * field's cap (and, for host names and paths, no NUL byte), a number's range, and the
 * relations between fields a message can break (a worker's rank inside its world size;
 * progress counters inside the job's; a relay's merged heartbeats, whose packed entries
 * get a heartbeat's ranges). A frame costs its fields' bytes plus 5, and
 * both directions are a single pass with no allocation. */
#define _POSIX_C_SOURCE 200809L
#include "control/protocol.h"

#include <inttypes.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

enum field_kind { F_U8, F_U32, F_I32, F_I64, F_FIXED32, F_BYTES };

typedef struct field {
    uint8_t kind;
    bool no_nul;      /* F_BYTES: a host name or a path, where a NUL byte would cut it short */
    uint16_t offset;
    uint32_t cap;     /* F_BYTES: longest accepted */
    int64_t min, max; /* numbers: the range accepted */
    const char *name;
} field;

#define NUM(k, m, lo, hi) {k, false, offsetof(pt_ctl_msg, m), 0, lo, hi, #m}
#define U8(m, lo, hi) NUM(F_U8, m, lo, hi)
#define U32(m) NUM(F_U32, m, 0, UINT32_MAX)
#define I32(m, lo, hi) NUM(F_I32, m, lo, hi)
#define I64(m, lo, hi) NUM(F_I64, m, lo, hi)
#define FIXED(m) {F_FIXED32, false, offsetof(pt_ctl_msg, m), 0, 0, 0, #m}
#define BYTES(m, cap) {F_BYTES, false, offsetof(pt_ctl_msg, m), cap, 0, 0, #m}
#define NAME(m, cap) {F_BYTES, true, offsetof(pt_ctl_msg, m), cap, 0, 0, #m}

/* The ranges, by meaning. */
#define STATUS(m) I32(m, INT32_MIN, INT32_MAX)
#define STEPS_DONE(m) I64(m, 0, PT_CTL_MAX_STEP)
#define DURATION(m) I64(m, 0, PT_CTL_MAX_DURATION_NS)
#define WINDOW(m) I32(m, 1, PT_CTL_MAX_STEPS)
#define COUNT(m) I32(m, 0, PT_CTL_MAX_WORLD)
#define PATH(m) NAME(m, PT_CTL_MAX_PATH)

#define WORKER_FIELDS                                                                              \
    I32(worker.rank, 0, PT_CTL_MAX_WORLD - 1), I32(worker.local_rank, -1, PT_CTL_MAX_WORLD - 1),   \
        I32(worker.world_size, 1, PT_CTL_MAX_WORLD), I32(worker.node_rank, -1, PT_CTL_MAX_WORLD - 1), \
        I64(worker.pid, -1, INT32_MAX), NAME(worker.host, PT_CTL_MAX_HOST)
/* A worker's connection as its relay (JOIN) or the coordinator (outcomes) saw it. */
#define CONNECTION_FIELDS I64(worker.uid, -1, UINT32_MAX), I64(worker.conn_pid, -1, INT32_MAX)
#define PROGRESS_FIELDS                                                                            \
    I32(progress.world_size, 1, PT_CTL_MAX_WORLD), COUNT(progress.connected), COUNT(progress.armed), \
        COUNT(progress.in_window), I64(progress.min_step, -1, PT_CTL_MAX_STEP),                    \
        I64(progress.max_step, -1, PT_CTL_MAX_STEP), COUNT(progress.traces_written),               \
        COUNT(progress.summaries), COUNT(progress.failed), COUNT(progress.hung)

static const field challenge_fields[] = {U32(version), FIXED(nonce)};
static const field auth_fields[] = {U32(version), U8(role, PT_CTL_ROLE_AGENT, PT_CTL_ROLE_RELAY), FIXED(nonce),
                                    FIXED(mac)};
static const field welcome_fields[] = {FIXED(mac)};
static const field text_fields[] = {BYTES(text, PT_CTL_MAX_TEXT)};
static const field join_fields[] = {WORKER_FIELDS, CONNECTION_FIELDS};
static const field heartbeat_fields[] = {U32(round), STEPS_DONE(steps_done), DURATION(mean_step_ns),
                                         DURATION(stalled_ns)};
static const field armed_fields[] = {U32(round), STATUS(status), BYTES(text, PT_CTL_MAX_TEXT), PATH(path)};
static const field summary_fields[] = {U32(round), STATUS(status), BYTES(text, PT_CTL_MAX_TEXT), PATH(path),
                                       BYTES(blob, PT_CTL_MAX_FRAME)};
/* Where a worker is: the stacks and collectives are text the analysis parses and checks
 * line by line (summarize/hang_state.c); here they are bounded and hold no NUL. */
#define SNAPSHOT_FIELDS                                                                            \
    DURATION(since_step_ns), NAME(threads, PT_CTL_MAX_SNAPSHOT), NAME(collectives, PT_CTL_MAX_SNAPSHOT)
static const field hang_fields[] = {U32(round), STEPS_DONE(steps_done), DURATION(mean_step_ns),
                                    DURATION(stalled_ns), BYTES(stack, PT_CTL_MAX_STACK), SNAPSHOT_FIELDS};
static const field auto_fields[] = {U8(kind, PT_AUTO_SLOWDOWN, PT_AUTO_COLLECTIVE_ERROR), STEPS_DONE(steps_done),
                                    DURATION(mean_step_ns), DURATION(best_mean_ns), DURATION(stalled_ns)};
static const field arm_fields[] = {U32(round), I64(start_step, 0, PT_CTL_MAX_STEP), WINDOW(steps), PATH(path)};
static const field round_fields[] = {U32(round)};
static const field trigger_fields[] = {I32(wait, 0, PT_CTL_MAX_WAIT), WINDOW(steps),
                                       U8(save_raw, PT_SAVE_RAW_NONE, PT_SAVE_RAW_ALL),
                                       I64(timeout_ms, 0, PT_CTL_MAX_TIMEOUT_MS), PATH(path)};
static const field started_fields[] = {U32(round), I64(start_step, 0, PT_CTL_MAX_STEP), WINDOW(steps),
                                       PROGRESS_FIELDS};
static const field progress_fields[] = {PROGRESS_FIELDS};
#define SEEN_FIELDS CONNECTION_FIELDS, NAME(worker.seen_from, PT_CTL_MAX_SEEN_FROM)
static const field worker_summary_fields[] = {WORKER_FIELDS, SEEN_FIELDS, PATH(path), BYTES(blob, PT_CTL_MAX_FRAME),
                                              SNAPSHOT_FIELDS};
static const field worker_failed_fields[] = {WORKER_FIELDS, SEEN_FIELDS, U8(kind, PT_FAIL_NEVER_CONNECTED, PT_FAIL_NOT_PROFILED),
                                             I64(steps_done, -1, PT_CTL_MAX_STEP), DURATION(stalled_ns),
                                             BYTES(text, PT_CTL_MAX_TEXT), BYTES(stack, PT_CTL_MAX_STACK),
                                             SNAPSHOT_FIELDS, DURATION(mean_step_ns)};
/* The inner frame is checked again, as a frame of its own, by whoever unwraps it. */
static const field relayed_fields[] = {I32(relayed_rank, 0, PT_CTL_MAX_WORLD - 1), BYTES(blob, PT_CTL_MAX_FRAME)};
static const field rank_lost_fields[] = {I32(relayed_rank, 0, PT_CTL_MAX_WORLD - 1), BYTES(text, PT_CTL_MAX_TEXT)};
/* Each entry is checked as its fields would be (beat_problem). */
static const field heartbeats_fields[] = {BYTES(blob, PT_CTL_MAX_BEATS * PT_CTL_BEAT_BYTES)};
static const field done_fields[] = {U32(round), PROGRESS_FIELDS};
static const field busy_fields[] = {BYTES(text, PT_CTL_MAX_TEXT), I64(timeout_ms, 0, PT_CTL_MAX_TIMEOUT_MS)};

typedef struct schema {
    pt_ctl_type type;
    const char *name;
    const field *fields;
    size_t count;
    bool worker, progress; /* carries a worker identity / round progress (checked together) */
    bool beats;            /* blob holds HEARTBEATS' entries */
} schema;

#define SCHEMA(t, name, f) {t, name, f, PT_ARRAY_LEN(f), false, false}
#define SCHEMA_WP(t, name, f, w, p) {t, name, f, PT_ARRAY_LEN(f), w, p}
static const schema schemas[] = {
    SCHEMA(PT_CTL_CHALLENGE, "challenge", challenge_fields),
    SCHEMA(PT_CTL_AUTH, "auth", auth_fields),
    SCHEMA(PT_CTL_WELCOME, "welcome", welcome_fields),
    SCHEMA(PT_CTL_REFUSED, "refused", text_fields),
    SCHEMA_WP(PT_CTL_JOIN, "join", join_fields, true, false),
    SCHEMA(PT_CTL_HEARTBEAT, "heartbeat", heartbeat_fields),
    SCHEMA(PT_CTL_ARMED, "armed", armed_fields),
    SCHEMA(PT_CTL_SUMMARY, "summary", summary_fields),
    SCHEMA(PT_CTL_HANG, "hang", hang_fields),
    SCHEMA(PT_CTL_AUTO_REQUEST, "auto-request", auto_fields),
    {PT_CTL_BYE, "bye", NULL, 0, false, false},
    SCHEMA(PT_CTL_RELAYED, "relayed", relayed_fields),
    SCHEMA(PT_CTL_RANK_LOST, "rank-lost", rank_lost_fields),
    {PT_CTL_HEARTBEATS, "heartbeats", heartbeats_fields, PT_ARRAY_LEN(heartbeats_fields), false, false, true},
    SCHEMA(PT_CTL_ARM, "arm", arm_fields),
    SCHEMA(PT_CTL_PROBE, "probe", round_fields),
    SCHEMA(PT_CTL_CANCEL, "cancel", round_fields),
    SCHEMA(PT_CTL_TRIGGER, "trigger", trigger_fields),
    {PT_CTL_CANCEL_ROUND, "cancel-round", NULL, 0, false, false},
    SCHEMA_WP(PT_CTL_ROUND_STARTED, "round-started", started_fields, false, true),
    SCHEMA_WP(PT_CTL_PROGRESS, "progress", progress_fields, false, true),
    SCHEMA_WP(PT_CTL_WORKER_SUMMARY, "worker-summary", worker_summary_fields, true, false),
    SCHEMA_WP(PT_CTL_WORKER_FAILED, "worker-failed", worker_failed_fields, true, false),
    SCHEMA_WP(PT_CTL_ROUND_DONE, "round-done", done_fields, false, true),
    SCHEMA(PT_CTL_ERROR, "error", text_fields),
    SCHEMA_WP(PT_CTL_ROUND_CANCELLED, "round-cancelled", done_fields, false, true),
    SCHEMA(PT_CTL_BUSY, "busy", busy_fields),
    SCHEMA(PT_CTL_NOTICE, "notice", text_fields),
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
    m->worker.uid = m->worker.conn_pid = -1; /* unknown unless someone saw them */
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

/* ---------------------------------------------------------------- checks */

static int64_t number_of(const field *f, const pt_ctl_msg *m)
{
    const char *src = (const char *)m + f->offset;
    switch (f->kind) {
    case F_U8: return *(const uint8_t *)src;
    case F_U32: return *(const uint32_t *)src;
    case F_I32: return *(const int32_t *)src;
    default: return *(const int64_t *)src;
    }
}

/* NULL when the field's value is acceptable, else why not (in buf). */
static const char *field_problem(const field *f, const pt_ctl_msg *m, char *buf, size_t cap)
{
    if (f->kind == F_FIXED32)
        return NULL;
    if (f->kind == F_BYTES) {
        const pt_ctl_bytes *b = (const pt_ctl_bytes *)((const char *)m + f->offset);
        if (b->len > f->cap)
            snprintf(buf, cap, "%s is %" PRIu32 " bytes, longer than its limit of %" PRIu32, f->name, b->len, f->cap);
        else if (f->no_nul && b->len && memchr(b->data, 0, b->len))
            snprintf(buf, cap, "%s holds a NUL byte", f->name);
        else
            return NULL;
        return buf;
    }
    int64_t v = number_of(f, m);
    if (v >= f->min && v <= f->max)
        return NULL;
    snprintf(buf, cap, "%s %" PRId64 " is outside %" PRId64 "..%" PRId64, f->name, v, f->min, f->max);
    return buf;
}

/* ---------------------------------------------------------------- heartbeats' entries */

/* Little endian, as every number on the wire. */
static uint8_t *put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void pt_ctl_beat_put(uint8_t dst[PT_CTL_BEAT_BYTES], const pt_ctl_beat *b)
{
    uint8_t *p = put_le(dst, (uint32_t)b->rank, 4);
    p = put_le(p, (uint64_t)b->steps_done, 8);
    p = put_le(p, (uint64_t)b->mean_step_ns, 8);
    p = put_le(p, (uint64_t)b->stalled_ns, 8);
    put_le(p, (uint64_t)b->held_ns, 8);
}

size_t pt_ctl_beat_count(const pt_ctl_msg *m)
{
    return m->blob.len / PT_CTL_BEAT_BYTES;
}

pt_ctl_beat pt_ctl_beat_get(const pt_ctl_msg *m, size_t i)
{
    const uint8_t *p = m->blob.data + i * PT_CTL_BEAT_BYTES;
    return (pt_ctl_beat){(int32_t)(uint32_t)get_le(p, 4), (int64_t)get_le(p + 4, 8), (int64_t)get_le(p + 12, 8),
                         (int64_t)get_le(p + 20, 8), (int64_t)get_le(p + 28, 8)};
}

/* NULL when every entry is whole and inside the ranges a heartbeat's fields have. */
static const char *beats_problem(const pt_ctl_msg *m, char *buf, size_t cap)
{
    if (m->blob.len % PT_CTL_BEAT_BYTES) {
        snprintf(buf, cap, "blob is %" PRIu32 " bytes, not a whole number of %d-byte entries", m->blob.len,
                 PT_CTL_BEAT_BYTES);
        return buf;
    }
    for (size_t i = 0; i < pt_ctl_beat_count(m); i++) {
        pt_ctl_beat b = pt_ctl_beat_get(m, i);
        const char *bad = b.rank < 0 || b.rank >= PT_CTL_MAX_WORLD                   ? "rank"
                          : b.steps_done < 0 || b.steps_done > PT_CTL_MAX_STEP       ? "steps_done"
                          : b.mean_step_ns < 0 || b.mean_step_ns > PT_CTL_MAX_DURATION_NS ? "mean_step_ns"
                          : b.stalled_ns < 0 || b.stalled_ns > PT_CTL_MAX_DURATION_NS ? "stalled_ns"
                          : b.held_ns < 0 || b.held_ns > PT_CTL_MAX_BEAT_HOLD_NS     ? "held_ns"
                                                                                     : NULL;
        if (bad) {
            snprintf(buf, cap, "entry %zu: %s is out of its range", i, bad);
            return buf;
        }
    }
    return NULL;
}

/* The relations between fields: a worker's ranks inside its world size, a round's
 * counters inside the job's, and a relay's merged heartbeats each a heartbeat's. */
static const char *relation_problem(const schema *s, const pt_ctl_msg *m, char *buf, size_t cap)
{
    if (s->beats)
        return beats_problem(m, buf, cap);
    const pt_ctl_worker *w = &m->worker;
    if (s->worker && (w->rank >= w->world_size || w->local_rank >= w->world_size || w->node_rank >= w->world_size)) {
        snprintf(buf, cap, "worker rank %d (local rank %d, node %d) is not inside its world size %d", w->rank,
                 w->local_rank, w->node_rank, w->world_size);
        return buf;
    }
    const pt_ctl_progress *p = &m->progress;
    if (s->progress) {
        int32_t most = PT_MAX(PT_MAX(PT_MAX(p->connected, p->armed), PT_MAX(p->in_window, p->traces_written)),
                              PT_MAX(PT_MAX(p->summaries, p->failed), p->hung));
        if (most > p->world_size) {
            snprintf(buf, cap, "a progress counter (%d) exceeds the world size %d", most, p->world_size);
            return buf;
        }
    }
    return NULL;
}

static const char *message_problem(const schema *s, const pt_ctl_msg *m, char *buf, size_t cap)
{
    for (size_t i = 0; i < s->count; i++) {
        const char *problem = field_problem(&s->fields[i], m, buf, cap);
        if (problem)
            return problem;
    }
    return relation_problem(s, m, buf, cap);
}

int pt_ctl_check(const pt_ctl_msg *m, pt_error *err)
{
    const schema *s = find_schema(m->type);
    char why[256];
    const char *problem = s ? message_problem(s, m, why, sizeof why) : "unknown message type";
    if (!problem)
        return 0;
    pt_error_set(err, "%s message: %s", s ? s->name : "unknown", problem);
    return -1;
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
    default: return 4 + (size_t)((const pt_ctl_bytes *)((const char *)m + f->offset))->len;
    }
}

size_t pt_ctl_encoded_size(const pt_ctl_msg *m)
{
    const schema *s = find_schema(m->type);
    char why[256];
    if (!s || message_problem(s, m, why, sizeof why))
        return 0;
    size_t total = 4 + 1;
    for (size_t i = 0; i < s->count; i++)
        total += field_size(&s->fields[i], m);
    return total - 4 > PT_CTL_MAX_FRAME ? 0 : total;
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
    char why[256];
    const char *problem = message_problem(s, m, why, sizeof why);
    if (problem) {
        pt_error_set(err, "%s message: %s", s->name, problem);
        return -1;
    }
    return (ssize_t)(4 + (size_t)body_len);
}
