/* net.h -- the plumbing the coordinator, the agent and the CLI client share: TCP
 * sockets, a framed connection with bounded buffers, and log lines.
 *
 * Everything here can run inside a training process, so nothing exits or aborts on
 * failure: allocation failures and socket errors come back as -1 with a reason. */
#ifndef PT_CONTROL_NET_H
#define PT_CONTROL_NET_H

#include "control/protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where log lines go. The agent and the coordinator run inside the training process and
 * have no terminal of their own: by default a line goes to stderr with the prefix
 * (e.g. "perftracker[rank 0]: "); tests install fn to capture lines. */
typedef struct pt_ctl_log {
    void (*fn)(void *ctx, const char *line);
    void *ctx;
    char prefix[64];
} pt_ctl_log;

void pt_ctl_logf(const pt_ctl_log *log, const char *fmt, ...) PT_PRINTF(2, 3);

/* A non-blocking, close-on-exec listening socket on addr:port (port 0 = any free port;
 * *bound_port receives the port chosen). addr "@name" is the Unix socket of that name in
 * the abstract namespace (port ignored, *bound_port 0). Returns the fd or -1. */
int pt_net_listen(const char *addr, uint16_t port, uint16_t *bound_port, pt_error *err);
/* Connects to host:port within timeout_ms. Returns a non-blocking, close-on-exec fd or -1.
 * host "@name": the abstract Unix socket, refused (-1) unless its owner is this user. */
int pt_net_connect(const char *host, uint16_t port, int timeout_ms, pt_error *err);
/* Whether host names an abstract Unix socket ("@name"). */
bool pt_net_is_local_socket(const char *host);
/* "host:port", or "the socket @name", for log lines. */
void pt_net_endpoint_name(const char *host, uint16_t port, char *dst, size_t cap);
/* The uid of a Unix socket's peer (SO_PEERCRED): 0, or -1 for other sockets. */
int pt_net_peer_uid(int fd, uid_t *uid);
/* The same with the peer's pid as this process's pid namespace sees it (0 when the peer's
 * namespace is not visible from here). 0, or -1 for a socket that is not a Unix one. */
int pt_net_peer_cred(int fd, uid_t *uid, pid_t *pid);
/* Whether a connected socket's peer runs on this machine: a Unix socket, a loopback
 * address, or an address of one of this machine's interfaces. Such a peer can be asked
 * to prove who it is through the kernel (a Unix socket's SO_PEERCRED) instead of a secret
 * other users of the machine might read. */
bool pt_net_peer_is_on_this_host(int fd);
/* An accepted connection on a Unix socket: whether its peer runs as this user (always
 * true on TCP, which cannot say). */
bool pt_net_peer_is_this_user(int fd);
/* "a.b.c.d:port" of the socket's peer. */
void pt_net_peer_name(int fd, char *dst, size_t cap);
/* True when addr resolves to an address of one of this machine's interfaces. */
bool pt_net_is_local_address(const char *addr);
/* True when every address addr resolves to is a loopback one (127/8, ::1). */
bool pt_net_is_loopback_address(const char *addr);

/* A framed connection: bytes in, messages out, messages in, bytes out. */
typedef struct pt_conn {
    int fd;
    uint8_t *in;
    size_t in_len, in_off, in_cap;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    size_t out_limit;   /* refuse to queue past this many unsent bytes */
    size_t in_limit;    /* refuse a frame, or unread bytes, past this size (0: one maximal frame) */
    bool eof;           /* the last read failed because the peer closed (not an error) */
} pt_conn;

void pt_conn_init(pt_conn *c, int fd, size_t out_limit);
void pt_conn_close(pt_conn *c); /* closes fd, frees buffers */
/* Reads what the socket has. Returns 1 (read something), 0 (nothing now), -1 (closed or
 * error: err says which). Messages decoded earlier become invalid. */
int pt_conn_read(pt_conn *c, pt_error *err);
/* The next complete message from what was read: 1 (m filled; its byte fields point into
 * the connection's buffer until the next pt_conn_read), 0 (none yet), -1 (bad frame). */
int pt_conn_next(pt_conn *c, pt_ctl_msg *m, pt_error *err);
/* The size of the frame at the head of the input (header included) once its header has
 * arrived, else 0: what a reader must be ready to hold before the frame completes. */
size_t pt_conn_frame_size(const pt_conn *c);
/* Queues a message. -1 when it cannot be encoded or the queue would pass out_limit. */
int pt_conn_send(pt_conn *c, const pt_ctl_msg *m, pt_error *err);
/* Writes queued bytes. Returns 0 (all or some written; see pt_conn_pending) or -1. */
int pt_conn_flush(pt_conn *c, pt_error *err);
size_t pt_conn_pending(const pt_conn *c);
/* Gives both buffers back when nothing waits in them (everything read was handled, and
 * everything queued was written): rank 0 holds thousands of connections, mostly idle
 * between frames, and each would otherwise keep the largest buffer it ever needed. */
void pt_conn_trim(pt_conn *c);

#endif
