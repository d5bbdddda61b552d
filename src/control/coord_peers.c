/* coord_peers.c -- a peer's buffers and its place in the coordinator's lists: how much
 * input it may hold for what it has become (coordinator.c's design comment gives the
 * figures), the shared input budget for large frames, the CLIs' list, what is queued for
 * a peer (wrapped for its relay when it has one), an ERROR for a CLI, and log lines
 * about peers not trusted yet, which come in a burst and then as a count. */
#define _GNU_SOURCE
#include "control/coordinator_state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- peers */

/* Lines about peers that have not proven anything yet (a refused handshake, a dropped
 * connection, a refused JOIN): the first STRANGER_LOG_BURST of every 10 s, then a count,
 * so a flood of connections never becomes a flood of log lines. */
void coord_flush_stranger_log(pt_coordinator *c, int64_t now)
{
    if (now - c->stranger_log.window_ns < SHED_LOG_NS)
        return;
    if (c->stranger_log.suppressed)
        pt_ctl_logf(&c->cfg.log, "... and %llu more such line(s) about unauthenticated or refused peers in the last "
                    "%.0f s", (unsigned long long)c->stranger_log.suppressed,
                    (double)(now - c->stranger_log.window_ns) / 1e9);
    c->stranger_log.window_ns = now;
    c->stranger_log.lines = 0;
    c->stranger_log.suppressed = 0;
}

void coord_stranger_logf(pt_coordinator *c, int64_t now, const char *fmt, ...)
{
    coord_flush_stranger_log(c, now);
    if (c->stranger_log.lines >= STRANGER_LOG_BURST) {
        c->stranger_log.suppressed++;
        return;
    }
    c->stranger_log.lines++;
    char line[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pt_ctl_logf(&c->cfg.log, "%s", line);
}

/* Reads unless paused, writes while something is queued. */
void coord_update_interest(pt_coordinator *c, peer *p)
{
    uint32_t want = (p->paused || p->held ? 0 : EPOLLIN) | (pt_conn_pending(&p->conn) > 0 ? EPOLLOUT : 0);
    if (want == p->events || p->dead || p->conn.fd < 0)
        return;
    struct epoll_event ev = {want, {.ptr = p}};
    epoll_ctl(c->epoll_fd, EPOLL_CTL_MOD, p->conn.fd, &ev);
    p->events = want;
}

/* The most a peer may send in one frame, by what it has shown it is. */
size_t coord_input_limit(const peer *p)
{
    switch (p->kind) {
    case PEER_HANDSHAKE: return HANDSHAKE_IN_LIMIT;
    case PEER_CONTROL: return CONTROL_IN_LIMIT;
    case PEER_RELAY: return p->rank >= 0 ? AGENT_IN_LIMIT + RELAY_ENVELOPE : UNJOINED_IN_LIMIT;
    default: return p->rank >= 0 ? AGENT_IN_LIMIT : UNJOINED_IN_LIMIT;
    }
}

bool coord_waiting(const peer *p)
{
    return p->kind == PEER_HANDSHAKE || ((p->kind == PEER_AGENT || p->kind == PEER_RELAY) && p->rank < 0);
}

/* The CLIs are a list of their own (at most MAX_CONTROL_PEERS), so the bytes queued for
 * them are summed at every tick without a walk over the job's peers. */
void coord_list_control(pt_coordinator *c, peer *p)
{
    c->controls[c->control_peers++] = p;
}

void coord_unlist_control(pt_coordinator *c, const peer *p)
{
    for (size_t i = 0; i < c->control_peers; i++)
        if (c->controls[i] == p) {
            c->controls[i] = c->controls[--c->control_peers];
            return;
        }
}

void coord_release_input(pt_coordinator *c, peer *p)
{
    c->input_admitted -= p->admitted;
    p->admitted = 0;
}

/* Whether p may read now. A frame over FREE_INPUT first takes its size from the shared
 * budget (a frame over the peer's limit is left to pt_conn_read, which refuses it). */
bool coord_admit_input(pt_coordinator *c, peer *p)
{
    size_t frame = pt_conn_frame_size(&p->conn);
    size_t need = frame > FREE_INPUT && frame <= p->conn.in_limit ? frame : 0;
    if (need == p->admitted)
        return true;
    coord_release_input(c, p);
    if (need == 0)
        return true;
    if (c->input_admitted + need > INPUT_BUDGET)
        return false;
    p->admitted = need;
    c->input_admitted += need;
    return true;
}


/* A frame for a rank behind a relay: encoded, then wrapped for the relay's connection. */
static int wrap_for_relay(pt_coordinator *c, const peer *p, const pt_ctl_msg *m, pt_ctl_msg *wrapped, pt_error *err)
{
    size_t size = pt_ctl_encoded_size(m);
    if (size == 0 || size > PT_CTL_MAX_FRAME - RELAY_ENVELOPE) {
        pt_error_set(err, "cannot encode a %s message for rank %d", pt_ctl_type_name(m->type), p->relayed_rank);
        return -1;
    }
    if (size > c->scratch_cap) {
        uint8_t *grown = realloc(c->scratch, size);
        if (!grown) {
            pt_error_set(err, "out of memory");
            return -1;
        }
        c->scratch = grown, c->scratch_cap = size;
    }
    pt_ctl_encode(m, c->scratch, c->scratch_cap);
    pt_ctl_msg_init(wrapped, PT_CTL_RELAYED);
    wrapped->relayed_rank = p->relayed_rank;
    wrapped->blob = pt_ctl_blob(c->scratch, size);
    return 0;
}

/* Queues m for p (through its relay, wrapped, when it has one) and, with flush, writes it
 * now. Without, it waits for the peer's next turn (EPOLLOUT is asked for): a round's start
 * queues the ARMs of every rank and each relay's eight leave in one write, not eight. */
void coord_queue_to(pt_coordinator *c, peer *p, const pt_ctl_msg *m, bool flush, int64_t now)
{
    if (!p || p->dead)
        return;
    pt_error err;
    pt_ctl_msg wrapped;
    if (p->via) {
        if (wrap_for_relay(c, p, m, &wrapped, &err) != 0) {
            kill_peer(c, p, now, err.message);
            return;
        }
        m = &wrapped;
        p = p->via;
    }
    if (pt_conn_send(&p->conn, m, &err) != 0 || (flush && pt_conn_flush(&p->conn, &err) != 0)) {
        kill_peer(c, p, now, err.message);
        return;
    }
    coord_update_interest(c, p);
}

void coord_send_to(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    coord_queue_to(c, p, m, true, now);
}

/* An ERROR for p (a CLI told why its trigger or frame was refused). */
void coord_reply_error(pt_coordinator *c, peer *p, const char *text, int64_t now)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_ERROR);
    m.text = pt_ctl_str(text);
    coord_send_to(c, p, &m, now);
}

pt_ctl_worker coord_identity_of(const pt_coordinator *c, int32_t rank)
{
    const worker *w = &c->workers[rank];
    pt_ctl_worker id = {rank, -1, c->cfg.world_size, -1, -1, {NULL, 0}, -1, -1, {NULL, 0}};
    if (w->ever_joined) {
        id.local_rank = w->local_rank, id.node_rank = w->node_rank, id.pid = w->pid;
        id.host = pt_ctl_str(w->host);
        id.uid = w->seen_uid, id.conn_pid = w->seen_pid;
        id.seen_from = pt_ctl_str(w->seen_from);
    }
    return id;
}
