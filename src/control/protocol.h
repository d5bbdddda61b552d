/* protocol.h -- the control plane's wire format: length-prefixed binary frames.
 *
 *   frame := u32 body_len (little endian) | body
 *   body  := u8 type | the type's fields, in the order of its schema (protocol.c)
 *   field := u8 | u32 | i32 | i64 (little endian) | 32 fixed bytes | u32 len + len bytes
 *
 * One table per message type drives both the encoder and the decoder, so the two cannot
 * drift apart. The decoder is a pure function over bytes (no allocation, no I/O): every
 * length is checked against what is left and against a per-field cap, every number
 * against the range its message allows (a timeout, a step count, a rank: the bounds
 * below), host names and paths must hold no NUL byte, unknown types and trailing bytes
 * are errors, and byte fields point into the caller's buffer (valid while it is). So a
 * message that decodes can be used as it is, with no arithmetic on it overflowing; the
 * encoder refuses the same values. That is what makes it safe to feed from the network
 * and easy to fuzz. The message flow is in docs/control-plane.md. */
#ifndef PT_CONTROL_PROTOCOL_H
#define PT_CONTROL_PROTOCOL_H

#include "util/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PT_CTL_VERSION 4 /* 2: a worker-summary carries the collectives a failure left;
                           3: relays merge their ranks' heartbeats (HEARTBEATS);
                           4: workers' connections as the coordinator saw them, NOTICE */
#define PT_CTL_NONCE_BYTES 32
#define PT_CTL_MAX_FRAME (64u << 20)   /* a summary is tens of KB; this bounds a bad peer */
#define PT_CTL_MAX_HOST 255
#define PT_CTL_MAX_TEXT 4096
#define PT_CTL_MAX_PATH 4096
#define PT_CTL_MAX_STACK 65536
#define PT_CTL_MAX_SNAPSHOT 65536  /* a hang report's threads and collectives, each */

/* The ranges the decoder accepts (and the encoder sends). */
#define PT_CTL_MAX_WORLD (1 << 20)                         /* world size; ranks below it */
#define PT_CTL_MAX_STEP (1LL << 53)                        /* step counts and step numbers */
#define PT_CTL_MAX_WAIT 1000000                            /* a trigger's --wait, in steps */
#define PT_CTL_MAX_STEPS 1000                              /* a window's length, in steps */
#define PT_CTL_MAX_TIMEOUT_MS (7LL * 86400 * 1000)         /* a trigger's --timeout: a week */
#define PT_CTL_MAX_DURATION_NS (30LL * 86400 * 1000000000) /* step times, stalls: 30 days */

typedef enum pt_ctl_type {
    /* handshake (either role) */
    PT_CTL_CHALLENGE = 1,   /* coordinator -> peer: version, nonce */
    PT_CTL_AUTH = 2,        /* peer -> coordinator: version, role, nonce, mac */
    PT_CTL_WELCOME = 3,     /* coordinator -> peer: mac (proves the coordinator knows the key) */
    PT_CTL_REFUSED = 4,     /* coordinator -> peer: text */
    /* agent -> coordinator */
    PT_CTL_JOIN = 10,       /* worker identity */
    PT_CTL_HEARTBEAT = 11,  /* steps_done, mean_step_ns, stalled_ns, round */
    PT_CTL_ARMED = 12,      /* round, status, text, path (raw trace it will write) */
    PT_CTL_SUMMARY = 13,    /* round, status, text, path, blob (pt_summary_encode bytes) */
    PT_CTL_HANG = 14,       /* round, steps_done, mean_step_ns, stalled_ns, stack, since_step_ns,
                               threads, collectives: where the worker is (a probe's answer, its
                               own stall, or a collective that failed) */
    PT_CTL_AUTO_REQUEST = 15, /* kind, steps_done, mean_step_ns (recent), best_mean_ns, stalled_ns */
    PT_CTL_BYE = 16,        /* the process is exiting cleanly */
    /* relay <-> coordinator (the per-node tree, relay.h) */
    PT_CTL_RELAYED = 17,    /* relayed_rank, blob: one frame from (or for) that rank of the relay's node,
                               as the rank's agent wrote it (or the coordinator writes it for the rank) */
    PT_CTL_RANK_LOST = 18,  /* relayed_rank, text: the rank's connection to the relay dropped */
    PT_CTL_HEARTBEATS = 19, /* blob: the latest heartbeat of each of its ranks that sent one since
                               the last HEARTBEATS, PT_CTL_BEAT_BYTES each (pt_ctl_beat) */
    /* coordinator -> agent */
    PT_CTL_ARM = 20,        /* round, start_step, steps, path (raw trace dir, "" = private) */
    PT_CTL_PROBE = 21,      /* round: answer with HANG now (status, stacks, collectives) */
    PT_CTL_CANCEL = 22,     /* round: the round was cancelled; drop its window (its SUMMARY, or
                               a failed one, still says when the collector is free again) */
    /* control (CLI) -> coordinator */
    PT_CTL_TRIGGER = 30,    /* wait, steps, save_raw, timeout_ms, path (raw trace dir) */
    PT_CTL_CANCEL_ROUND = 31, /* the user interrupted the CLI: cancel its round on every worker */
    /* coordinator -> control */
    PT_CTL_ROUND_STARTED = 40, /* round, start_step, steps, progress */
    PT_CTL_PROGRESS = 41,      /* progress */
    PT_CTL_WORKER_SUMMARY = 42, /* worker, path (raw trace), blob */
    PT_CTL_WORKER_FAILED = 43,  /* worker, kind (pt_ctl_failure), steps_done, stalled_ns, text, stack,
                                   since_step_ns, threads, collectives, mean_step_ns (its last HANG's) */
    PT_CTL_ROUND_DONE = 44,     /* round, progress */
    PT_CTL_ERROR = 45,          /* text */
    PT_CTL_ROUND_CANCELLED = 46, /* round, progress (as it stood: `armed` workers dropped a window) */
    PT_CTL_BUSY = 47,           /* text, timeout_ms: workers still finish an earlier round's
                                   window; TRIGGER again in about timeout_ms */
    PT_CTL_NOTICE = 48          /* text: something the coordinator refused that the round's report
                                   must name (another user's process, a rank claimed twice) */
} pt_ctl_type;

/* A relay authenticates with the agent key, as a worker does, but its role is its own (the
 * MAC covers the role): its connection carries the frames of its node's ranks (relay.h). */
typedef enum pt_ctl_role { PT_CTL_ROLE_AGENT = 1, PT_CTL_ROLE_CONTROL = 2, PT_CTL_ROLE_RELAY = 3 } pt_ctl_role;

typedef enum pt_ctl_save_raw { PT_SAVE_RAW_NONE = 0, PT_SAVE_RAW_MASTER = 1, PT_SAVE_RAW_ALL = 2 } pt_ctl_save_raw;

/* Why an agent asks for an automatic round: its job slowed down, it stopped stepping,
 * or one of its collectives raised (a hang report is taken at once). */
typedef enum pt_ctl_auto_kind { PT_AUTO_SLOWDOWN = 1, PT_AUTO_HANG = 2, PT_AUTO_COLLECTIVE_ERROR = 3 } pt_ctl_auto_kind;

/* Why a worker has no summary in a round (PT_CTL_WORKER_FAILED.kind). */
typedef enum pt_ctl_failure {
    PT_FAIL_NEVER_CONNECTED = 1, /* its agent never joined the coordinator */
    PT_FAIL_DIED,                /* the connection dropped mid-round */
    PT_FAIL_EXITED,              /* the process said goodbye (training ended) */
    PT_FAIL_HANG,                /* stopped stepping, or answered a hang report's probe:
                                    hang_step = steps_done, its stacks and collectives */
    PT_FAIL_NOT_REACHED,         /* never reached the window before the deadline */
    PT_FAIL_NO_SUMMARY,          /* passed the window but sent no summary in time */
    PT_FAIL_ERROR,               /* its collector reported a failure (text) */
    PT_FAIL_UNRESPONSIVE,        /* heartbeats stopped (frozen process or lost node) */
    PT_FAIL_BAD_SUMMARY,         /* a summary arrived but did not decode */
    PT_FAIL_NOT_PROFILED,        /* no longer sent (a hang report now takes every answer as
                                    a snapshot); still decoded from older coordinators */
    PT_FAIL_COORDINATOR_LOST     /* the CLI lost the coordinator (in rank 0's process) before
                                    this worker's outcome arrived; never sent on the wire */
} pt_ctl_failure;

const char *pt_ctl_failure_name(int kind); /* "died", "hang", ... */
const char *pt_ctl_type_name(int type);

/* One entry of HEARTBEATS: a rank's heartbeat as the relay last heard it, and how long
 * it held it (the coordinator dates the step count back by that much). On the wire: rank
 * (i32) then the four i64, little endian. */
typedef struct pt_ctl_beat {
    int32_t rank;
    int64_t steps_done, mean_step_ns, stalled_ns;
    int64_t held_ns;
} pt_ctl_beat;

#define PT_CTL_BEAT_BYTES 36
#define PT_CTL_MAX_BEATS 1024                      /* ranks of one node */
#define PT_CTL_MAX_BEAT_HOLD_NS (60LL * 1000000000) /* a relay holds one for a heartbeat's time */

/* A byte string inside a frame (not NUL-terminated). */
typedef struct pt_ctl_bytes {
    const uint8_t *data;
    uint32_t len;
} pt_ctl_bytes;

typedef struct pt_ctl_worker {
    int32_t rank;
    int32_t local_rank;
    int32_t world_size;
    int32_t node_rank;
    int64_t pid;
    pt_ctl_bytes host;
    /* The worker's process as the coordinator saw its connection, -1 where it cannot say:
     * the uid and pid a Unix socket's peer credentials give (a TCP peer has neither), and
     * seen_from, how it connected ("pid 123 (uid 0) on this machine", "10.0.0.7:41822",
     * "through relay of node 3 ..."). A JOIN carries a relay's view of its local rank; a
     * direct peer's JOIN fields are ignored. What the worker says of itself (host, pid)
     * is its own claim; these are the kernel's and the coordinator's. */
    int64_t uid;
    int64_t conn_pid;
    pt_ctl_bytes seen_from;
} pt_ctl_worker;
#define PT_CTL_MAX_SEEN_FROM 200

/* Counters the coordinator reports to the CLI while a round runs. */
typedef struct pt_ctl_progress {
    int32_t world_size;
    int32_t connected;       /* agents joined */
    int32_t armed;           /* agents that acknowledged the window ("workers reached") */
    int32_t in_window;       /* reached the start step */
    int64_t min_step;        /* lowest / highest steps_done among the round's workers */
    int64_t max_step;
    int32_t traces_written;  /* windows finished (raw trace written or summarized) */
    int32_t summaries;       /* summaries received */
    int32_t failed;          /* workers given up on, hangs included */
    int32_t hung;
} pt_ctl_progress;

/* Every field any message uses; a message reads only its schema's fields. */
typedef struct pt_ctl_msg {
    pt_ctl_type type;
    uint32_t version;
    uint8_t role;
    uint8_t save_raw;
    uint8_t kind;
    uint8_t nonce[PT_CTL_NONCE_BYTES];
    uint8_t mac[PT_CTL_NONCE_BYTES];
    uint32_t round;
    int32_t status;
    int32_t wait;
    int32_t steps;
    int64_t start_step;
    int64_t timeout_ms;
    int64_t steps_done;
    int64_t mean_step_ns;
    int64_t best_mean_ns;
    int64_t stalled_ns;
    int64_t since_step_ns;   /* HANG: time since its last step when the snapshot was taken */
    int32_t relayed_rank;    /* RELAYED, RANK_LOST: whose frame, or who was lost */
    pt_ctl_worker worker;
    pt_ctl_progress progress;
    pt_ctl_bytes text;
    pt_ctl_bytes path;
    pt_ctl_bytes stack;
    pt_ctl_bytes threads;     /* HANG, WORKER_FAILED: every thread's stack (agent.h) */
    pt_ctl_bytes collectives; /* HANG, WORKER_FAILED: the collective bookkeeping */
    pt_ctl_bytes blob;
} pt_ctl_msg;

void pt_ctl_msg_init(pt_ctl_msg *m, pt_ctl_type type);
pt_ctl_bytes pt_ctl_str(const char *s);          /* NULL -> empty */
pt_ctl_bytes pt_ctl_blob(const void *data, size_t len);
/* Copies b into dst as a C string (truncated to cap-1; NUL bytes become '?'). */
void pt_ctl_copy_str(char *dst, size_t cap, pt_ctl_bytes b);

/* HEARTBEATS' entries: b written into dst; entry i of a decoded message (every entry was
 * checked by the decoder: i < pt_ctl_beat_count(m)). */
void pt_ctl_beat_put(uint8_t dst[PT_CTL_BEAT_BYTES], const pt_ctl_beat *b);
size_t pt_ctl_beat_count(const pt_ctl_msg *m);
pt_ctl_beat pt_ctl_beat_get(const pt_ctl_msg *m, size_t i);

/* 0 when every field of m is inside its cap or range (what the decoder accepts), else -1
 * with err naming the field and the range. */
int pt_ctl_check(const pt_ctl_msg *m, pt_error *err);
/* Bytes the encoded frame takes, or 0 when pt_ctl_check refuses m, the frame would pass
 * PT_CTL_MAX_FRAME or the type is unknown. */
size_t pt_ctl_encoded_size(const pt_ctl_msg *m);
/* Writes the frame into dst; returns its size, or 0 (nothing usable) when it does not fit
 * or pt_ctl_encoded_size would return 0. */
size_t pt_ctl_encode(const pt_ctl_msg *m, uint8_t *dst, size_t cap);

/* Decodes the first frame of data. Returns its size (> 0) with *m filled, 0 when more bytes
 * are needed, or -1 when the bytes are not a valid frame or a field is out of its range
 * (err names the message, the field and the range). */
ssize_t pt_ctl_decode(const void *data, size_t len, pt_ctl_msg *m, pt_error *err);

#endif
