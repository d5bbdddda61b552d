/* relay.c -- the per-node relay (relay.h; docs/control-plane.md, "The relay tree").
 *
 * Design. One epoll set holds the listener, the upstream connection (to the coordinator)
 * and the node's local connections; pt_relay_turn drains what is ready without waiting,
 * so one thread may drive one relay or a thousand. Upstream follows the agent's link
 * states (down, handshake, ready) and reconnects with the same backoff; while it is not
 * ready the node's connections are accepted and closed at once, and when it is lost they
 * are all closed, so every agent goes back to its own reconnect loop and JOINs again
 * through the relay once it is back (the coordinator keeps no relay state to rebuild).
 *
 * A local connection goes handshake -> authenticated -> joined. Until it has JOINed
 * nothing it sends leaves the relay; after, every frame it sends is checked by the decoder
 * (one of the agent's message types, bounded as the coordinator bounds it), and sent
 * upstream byte for byte inside RELAYED with the rank it joined as. What comes back for a
 * rank is decoded (a type the coordinator sends agents) and queued on that rank's
 * connection. Heartbeats are the exception: a rank's latest waits, replacing the one before,
 * and the node's go up together in one HEARTBEATS frame at most beat_hold_ns (a heartbeat
 * period) after the first of them, each with how long it was held -- so rank 0 reads one
 * frame per node per period, not one per rank (and during a window, where agents beat
 * every 100 ms, ten times fewer still). Whatever else a rank sends goes up after the held
 * heartbeats (a rank's frames keep their order), and a heartbeat that changes whether
 * the rank is stalled goes at once (a hang is judged from it). Upstream is never silent
 * for more than a second: with no rank's frame to
 * carry (none has joined yet, or none is left) the relay sends a HEARTBEAT of its own,
 * so the relay of a node whose ranks start late is not dropped as dead (at 100k workers
 * on a loaded machine the coordinator dropped thousands so, and the join never ended).
 * Backpressure: while more than BACKLOG bytes wait to go upstream, local
 * connections are not read (TCP holds the rest on the agents' side, whose queues are
 * bounded), so a relay holds at most BACKLOG plus one frame.
 *
 * Costs: per local connection its buffers (a few KB, a summary's size while one passes)
 * and ~100 bytes; per frame one decode and one copy. No timer walks more than the node's
 * connections. */
#define _GNU_SOURCE
#include "control/relay.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define SEC 1000000000LL
#define MS 1000000LL
#define CONNECT_TIMEOUT_MS 1000
#define HANDSHAKE_TIMEOUT_NS (10 * SEC)
#define BACKOFF_MIN_NS (50 * MS)
#define BACKOFF_MAX_NS (5 * SEC)
#define PERIODIC_NS (100 * MS)
#define KEEPALIVE_NS (1 * SEC) /* upstream never stays silent longer than this or the hold */
#define BACKLOG ((size_t)4 << 20)
#define UP_OUT_LIMIT ((size_t)PT_CTL_MAX_FRAME + BACKLOG + (1u << 20))
#define LOCAL_OUT_LIMIT ((size_t)1 << 20)
#define HANDSHAKE_IN_LIMIT 1024
#define UNJOINED_IN_LIMIT 4096
#define ENVELOPE 16 /* RELAYED's own bytes around the inner frame */
#define BEAT_HOLD_NS (1 * SEC) /* the default hold: the agents' default heartbeat */
/* The longest hold: the agents' longest default heartbeat (a 100k job's, agent.c), so rank 0
 * reads about one frame per node per heartbeat period at any size, 2,500 a second at 100k. */
#define BEAT_HOLD_MAX_NS (5 * SEC)
/* Why a joined rank's connection closes when nothing went wrong with it (not logged). */
#define WORKER_CLOSED "closed by the worker"
#define RELAY_LOST_COORDINATOR "the relay lost the coordinator"

enum up_state { UP_DOWN, UP_HANDSHAKE, UP_READY };
enum local_state { LOCAL_HANDSHAKE, LOCAL_AUTHENTICATED, LOCAL_JOINED };

typedef struct local {
    pt_conn conn;
    enum local_state state;
    uint8_t nonce[PT_CTL_NONCE_BYTES];
    int32_t rank;          /* once joined, else -1 */
    int64_t accepted_ns;
    bool closing;          /* close once its queue is flushed (after REFUSED) */
    bool dead;
    uint32_t events;
    /* its latest heartbeat, while it waits for the node's next HEARTBEATS */
    bool beat_held;
    bool stall_sent; /* the last heartbeat that went up said it was stalled */
    pt_ctl_beat beat;
    int64_t beat_heard_ns;
} local;

struct pt_relay {
    pt_relay_config cfg;
    int listen_fd, epoll_fd;
    uint16_t port;
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    atomic_int joined;
    atomic_bool up_ready;
    /* upstream */
    pt_conn up;
    enum up_state up_state;
    uint8_t server_nonce[PT_CTL_NONCE_BYTES], client_nonce[PT_CTL_NONCE_BYTES];
    int64_t up_deadline_ns, next_connect_ns, backoff_ns, last_periodic_ns, last_unreachable_log_ns;
    int64_t last_sent_up_ns;
    int64_t last_foreign_log_ns; /* when a connection from another user was last logged */
    unsigned random_state;
    bool reading_locals;   /* false while the upstream backlog is over BACKLOG */
    uint32_t up_events;
    /* the node's connections */
    local **locals;
    int32_t local_count;
    int32_t locals_cap;
    /* What lets a turn skip its walks over the locals (each a cache miss: at 12,500 relays
     * turned ten times a second, the simulated fleet's idle relays spent most of their
     * time in those walks): locals not joined yet (a handshake deadline to watch), locals
     * killed and not reaped, and whether a local's frames wait for backpressure to end. */
    int32_t unjoined, unreaped;
    bool frames_waiting;
    /* merged heartbeats */
    int64_t beats_since_ns; /* when the oldest held heartbeat arrived; 0: none held */
    int64_t beat_hold_ns;
    uint8_t *beat_entries;  /* locals_cap entries */
};

/* ---------------------------------------------------------------- the switch */

bool pt_relay_wanted(int32_t world_size, int32_t local_world_size)
{
    const char *mode = pt_env_str("PERFTRACKER_RELAY", "auto");
    if (strcmp(mode, "0") == 0)
        return false;
    bool several_per_node = local_world_size > 1 && local_world_size < world_size;
    if (strcmp(mode, "1") == 0)
        return several_per_node;
    return several_per_node && world_size >= pt_env_int("PERFTRACKER_RELAY_MIN_WORLD", 256, 1, PT_CTL_MAX_WORLD);
}

uint16_t pt_relay_port_for(uint16_t coordinator_port)
{
    return (uint16_t)pt_env_int("PERFTRACKER_RELAY_PORT", coordinator_port < 65535 ? coordinator_port + 1 : 0, 0,
                                65535);
}

/* The user's id is in the name so that two users' jobs on one node with the same port do
 * not meet (each end still refuses a peer of another user, net.c). */
void pt_relay_socket_for(uint16_t coordinator_port, char *dst, size_t cap)
{
    snprintf(dst, cap, "@perftracker-relay-%lu-%u", (unsigned long)geteuid(),
             (unsigned)pt_relay_port_for(coordinator_port));
}

/* ---------------------------------------------------------------- epoll bookkeeping */

static void watch(pt_relay *r, int fd, void *tag, uint32_t *current, uint32_t want)
{
    if (fd < 0 || *current == want)
        return;
    struct epoll_event ev = {want, {.ptr = tag}};
    epoll_ctl(r->epoll_fd, *current ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
    *current = want;
}

static void local_interest(pt_relay *r, local *l)
{
    uint32_t want = (r->reading_locals || l->state != LOCAL_JOINED ? EPOLLIN : 0) |
                    (pt_conn_pending(&l->conn) > 0 ? EPOLLOUT : 0);
    watch(r, l->conn.fd, l, &l->events, want ? want : EPOLLRDHUP);
}

static void up_interest(pt_relay *r)
{
    if (r->up_state == UP_DOWN)
        return;
    watch(r, r->up.fd, &r->up, &r->up_events, EPOLLIN | (pt_conn_pending(&r->up) > 0 ? EPOLLOUT : 0));
}

/* Stops or resumes reading the node's joined ranks as the upstream backlog crosses BACKLOG. */
static void update_backpressure(pt_relay *r)
{
    bool reading = pt_conn_pending(&r->up) <= BACKLOG;
    if (reading == r->reading_locals)
        return;
    r->reading_locals = reading;
    for (int32_t i = 0; i < r->local_count; i++)
        if (!r->locals[i]->dead)
            local_interest(r, r->locals[i]);
}

/* ---------------------------------------------------------------- upstream */

static void send_up(pt_relay *r, const pt_ctl_msg *m);
static void reap_locals(pt_relay *r);

static void kill_local(pt_relay *r, local *l, const char *why)
{
    if (l->dead)
        return;
    l->dead = true;
    r->unreaped++;
    if (l->state != LOCAL_JOINED)
        r->unjoined--;
    if (l->conn.fd >= 0)
        epoll_ctl(r->epoll_fd, EPOLL_CTL_DEL, l->conn.fd, NULL);
    if (l->state == LOCAL_JOINED && l->rank >= 0) {
        atomic_fetch_sub(&r->joined, 1);
        if (strcmp(why, WORKER_CLOSED) != 0 && strcmp(why, RELAY_LOST_COORDINATOR) != 0)
            pt_ctl_logf(&r->cfg.log, "relay: dropping rank %d: %s", l->rank, why); /* we close it: say why */
        if (r->up_state == UP_READY) {
            char text[400];
            snprintf(text, sizeof text, "its connection to the relay on %.100s dropped (%.180s)", r->cfg.host, why);
            pt_ctl_msg m;
            pt_ctl_msg_init(&m, PT_CTL_RANK_LOST);
            m.relayed_rank = l->rank;
            m.text = pt_ctl_str(text);
            send_up(r, &m);
        }
    }
}

/* The agent's backoff: 50 ms doubling to 5 s, with jitter. */
static void schedule_reconnect(pt_relay *r, int64_t now)
{
    int64_t b = r->backoff_ns ? PT_MIN(r->backoff_ns * 2, BACKOFF_MAX_NS) : BACKOFF_MIN_NS;
    r->backoff_ns = b;
    r->next_connect_ns = now + b / 2 + (int64_t)(rand_r(&r->random_state) % (unsigned)(b / 2 / 1000 + 1)) * 1000;
}

static void up_down(pt_relay *r, int64_t now, const char *why)
{
    if (r->up_state == UP_READY)
        pt_ctl_logf(&r->cfg.log, "relay: lost the coordinator at %s:%u (%s); closing the node's %d connection(s) "
                    "and reconnecting", r->cfg.coordinator_host, (unsigned)r->cfg.coordinator_port, why,
                    r->local_count);
    r->up_state = UP_DOWN;
    atomic_store(&r->up_ready, false);
    if (r->up.fd >= 0)
        epoll_ctl(r->epoll_fd, EPOLL_CTL_DEL, r->up.fd, NULL);
    pt_conn_close(&r->up);
    r->up_events = 0;
    for (int32_t i = 0; i < r->local_count; i++)
        kill_local(r, r->locals[i], RELAY_LOST_COORDINATOR);
    schedule_reconnect(r, now);
}

static void send_up(pt_relay *r, const pt_ctl_msg *m)
{
    pt_error err;
    if (r->up_state == UP_DOWN)
        return;
    if (pt_conn_send(&r->up, m, &err) != 0) {
        up_down(r, pt_now_ns(), err.message);
        return;
    }
    r->last_sent_up_ns = pt_now_ns();
    update_backpressure(r);
}

static void try_connect(pt_relay *r, int64_t now)
{
    pt_error err;
    int fd = pt_net_connect(r->cfg.coordinator_host, r->cfg.coordinator_port,
                            r->cfg.connect_timeout_ms > 0 ? r->cfg.connect_timeout_ms : CONNECT_TIMEOUT_MS, &err);
    if (fd < 0) {
        if (now - r->last_unreachable_log_ns > 300 * SEC) {
            pt_ctl_logf(&r->cfg.log, "relay: %s (still retrying)", err.message);
            r->last_unreachable_log_ns = now;
        }
        schedule_reconnect(r, now);
        return;
    }
    pt_conn_init(&r->up, fd, UP_OUT_LIMIT);
    r->up.in_limit = 1u << 20; /* the coordinator sends small frames, each wrapped once */
    r->up_state = UP_HANDSHAKE;
    r->up_deadline_ns = now + HANDSHAKE_TIMEOUT_NS;
    up_interest(r);
}

static void on_challenge(pt_relay *r, const pt_ctl_msg *m, int64_t now)
{
    pt_ctl_msg reply;
    if (pt_auth_answer_challenge(&r->cfg.key, PT_CTL_ROLE_RELAY, m, r->server_nonce, r->client_nonce, &reply) != 0) {
        up_down(r, now, "protocol version mismatch");
        return;
    }
    send_up(r, &reply);
}

static void on_welcome(pt_relay *r, const pt_ctl_msg *m, int64_t now)
{
    /* A coordinator on this machine is reached through its Unix socket, whose owner
     * pt_net_connect checked is this user: no key to prove, and none needed. */
    if (!pt_net_is_local_socket(r->cfg.coordinator_host) &&
        !pt_auth_server_proven(&r->cfg.key, PT_CTL_ROLE_RELAY, r->server_nonce, r->client_nonce, m->mac)) {
        pt_ctl_logf(&r->cfg.log, "relay: the peer at %s:%u does not know the job key; not relaying to it",
                    r->cfg.coordinator_host, (unsigned)r->cfg.coordinator_port);
        up_down(r, now, "server proof mismatch");
        return;
    }
    r->up_state = UP_READY;
    r->backoff_ns = 0;
    atomic_store(&r->up_ready, true);
    pt_ctl_msg join; /* who the relay is, for the coordinator's messages about its node */
    pt_ctl_msg_init(&join, PT_CTL_JOIN);
    join.worker = (pt_ctl_worker){r->cfg.rank, 0, r->cfg.world_size, r->cfg.node_rank, r->cfg.pid,
                                  pt_ctl_str(r->cfg.host), -1, -1, {NULL, 0}};
    send_up(r, &join);
}

static local *find_rank(pt_relay *r, int32_t rank)
{
    for (int32_t i = 0; i < r->local_count; i++) {
        local *l = r->locals[i];
        if (!l->dead && l->state == LOCAL_JOINED && l->rank == rank)
            return l;
    }
    return NULL;
}

static void send_local(pt_relay *r, local *l, const pt_ctl_msg *m)
{
    pt_error err;
    if (pt_conn_send(&l->conn, m, &err) != 0) {
        kill_local(r, l, err.message);
        return;
    }
    local_interest(r, l);
}

/* A frame the coordinator wrote for one of the node's ranks. */
static void on_relayed_down(pt_relay *r, const pt_ctl_msg *m, int64_t now)
{
    pt_ctl_msg inner;
    pt_error err;
    ssize_t used = pt_ctl_decode(m->blob.data, m->blob.len, &inner, &err);
    bool for_agent = used > 0 && (inner.type == PT_CTL_ARM || inner.type == PT_CTL_PROBE ||
                                  inner.type == PT_CTL_CANCEL || inner.type == PT_CTL_REFUSED);
    if (used != (ssize_t)m->blob.len || !for_agent) {
        up_down(r, now, used < 0 ? err.message : "the coordinator relayed a frame that is not for an agent");
        return;
    }
    local *l = find_rank(r, m->relayed_rank);
    if (!l)
        return; /* it left; its RANK_LOST is on the way */
    send_local(r, l, &inner);
    if (inner.type == PT_CTL_REFUSED) { /* the coordinator does not take it: it speaks for nobody now */
        atomic_fetch_sub(&r->joined, 1);
        l->state = LOCAL_AUTHENTICATED;
        l->rank = -1;
        l->beat_held = false;
        l->closing = true;
    }
}

static void on_up_message(pt_relay *r, const pt_ctl_msg *m, int64_t now)
{
    if (r->up_state == UP_HANDSHAKE) {
        if (m->type == PT_CTL_CHALLENGE)
            on_challenge(r, m, now);
        else if (m->type == PT_CTL_WELCOME)
            on_welcome(r, m, now);
        else if (m->type == PT_CTL_REFUSED)
            up_down(r, now, "the coordinator refused the relay");
        return;
    }
    if (m->type == PT_CTL_RELAYED)
        on_relayed_down(r, m, now);
    else if (m->type == PT_CTL_REFUSED)
        up_down(r, now, "the coordinator refused the relay");
}

static void service_up(pt_relay *r, uint32_t events, int64_t now)
{
    pt_error err;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        int rc = pt_conn_read(&r->up, &err);
        pt_ctl_msg m;
        int got = 0;
        while (r->up_state != UP_DOWN && (got = pt_conn_next(&r->up, &m, &err)) == 1)
            on_up_message(r, &m, now);
        if (r->up_state != UP_DOWN && (rc < 0 || got < 0)) {
            up_down(r, now, err.message);
            return;
        }
    }
    if (r->up_state != UP_DOWN && pt_conn_flush(&r->up, &err) != 0) {
        up_down(r, now, err.message);
        return;
    }
    update_backpressure(r);
    up_interest(r);
}

/* ---------------------------------------------------------------- the node's connections */

static void refuse_local(pt_relay *r, local *l, const char *why)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_REFUSED);
    m.text = pt_ctl_str(why);
    send_local(r, l, &m);
    l->closing = true;
}

/* Every local connection runs as this user (accept_locals asked the kernel), so the
 * handshake asks for no key: the node's ranks need none, only the relay itself does when
 * its coordinator is on another machine. */
static void on_local_auth(pt_relay *r, local *l, const pt_ctl_msg *m)
{
    if (m->type != PT_CTL_AUTH || m->version != PT_CTL_VERSION || m->role != PT_CTL_ROLE_AGENT) {
        refuse_local(r, l, "protocol mismatch: not an agent of this perftracker version");
        return;
    }
    pt_ctl_msg w;
    pt_ctl_msg_init(&w, PT_CTL_WELCOME);
    pt_auth_server_proof(&r->cfg.key, PT_CTL_ROLE_AGENT, l->nonce, m->nonce, w.mac);
    l->state = LOCAL_AUTHENTICATED;
    l->conn.in_limit = UNJOINED_IN_LIMIT;
    send_local(r, l, &w);
}

/* Sends `raw` (one frame as the rank wrote it) upstream inside RELAYED. */
static void forward_up(pt_relay *r, int32_t rank, const uint8_t *raw, size_t len)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_RELAYED);
    m.relayed_rank = rank;
    m.blob = pt_ctl_blob(raw, len);
    send_up(r, &m);
}

/* Every held heartbeat, in one HEARTBEATS frame. */
static void send_beats(pt_relay *r, int64_t now)
{
    size_t n = 0;
    for (int32_t i = 0; i < r->local_count; i++) {
        local *l = r->locals[i];
        if (l->dead || !l->beat_held || l->state != LOCAL_JOINED)
            continue;
        l->beat_held = false;
        l->beat.held_ns = PT_MIN(PT_MAX(now - l->beat_heard_ns, 0), PT_CTL_MAX_BEAT_HOLD_NS);
        pt_ctl_beat_put(r->beat_entries + n++ * PT_CTL_BEAT_BYTES, &l->beat);
    }
    r->beats_since_ns = 0;
    if (n == 0)
        return;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_HEARTBEATS);
    m.blob = pt_ctl_blob(r->beat_entries, n * PT_CTL_BEAT_BYTES);
    send_up(r, &m);
}

/* A joined rank's heartbeat: held (replacing the one it holds) to go up with the node's
 * others, unless it changes whether the rank is stalled, which goes at once. */
static void hold_beat(pt_relay *r, local *l, const pt_ctl_msg *m, const uint8_t *raw, size_t len)
{
    bool stalled = m->stalled_ns > 0;
    if (stalled != l->stall_sent) {
        l->beat_held = false; /* this one says more than the one held */
        l->stall_sent = stalled;
        forward_up(r, l->rank, raw, len);
        return;
    }
    int64_t now = pt_now_ns();
    l->beat = (pt_ctl_beat){l->rank, m->steps_done, m->mean_step_ns, m->stalled_ns, 0};
    l->beat_heard_ns = now;
    l->beat_held = true;
    if (r->beats_since_ns == 0)
        r->beats_since_ns = now;
}

/* One of a joined rank's frames: a heartbeat is held; anything else goes up after the
 * heartbeats held, so the coordinator reads each rank's frames in the order it sent them. */
static void forward_frame(pt_relay *r, local *l, const pt_ctl_msg *m, const uint8_t *raw, size_t len)
{
    if (m->type == PT_CTL_HEARTBEAT) {
        hold_beat(r, l, m, raw, len);
        return;
    }
    if (l->beat_held)
        send_beats(r, pt_now_ns());
    forward_up(r, l->rank, raw, len);
}

/* The rank's JOIN goes up with what the kernel says of its connection (its uid and pid),
 * for the coordinator's record of who each worker is. */
static void forward_join(pt_relay *r, local *l, const pt_ctl_msg *m, const uint8_t *raw, size_t len)
{
    uid_t uid;
    pid_t pid;
    pt_ctl_msg join = *m;
    uint8_t frame[4096]; /* a JOIN is at most ~330 bytes (protocol.c's bounds) */
    size_t n = 0;
    if (pt_net_peer_cred(l->conn.fd, &uid, &pid) == 0) {
        join.worker.uid = (int64_t)uid;
        join.worker.conn_pid = (int64_t)pid;
        n = pt_ctl_encode(&join, frame, sizeof frame);
    }
    if (n > 0)
        forward_up(r, l->rank, frame, n);
    else
        forward_up(r, l->rank, raw, len);
}

static void on_local_join(pt_relay *r, local *l, const pt_ctl_msg *m, const uint8_t *raw, size_t len)
{
    const pt_ctl_worker *w = &m->worker;
    char why[200] = "";
    if (w->world_size != r->cfg.world_size)
        snprintf(why, sizeof why, "world size %d does not match this job's %d", w->world_size, r->cfg.world_size);
    else if (w->node_rank >= 0 && r->cfg.node_rank >= 0 && w->node_rank != r->cfg.node_rank)
        snprintf(why, sizeof why, "rank %d is on node %d; this relay serves node %d", w->rank, w->node_rank,
                 r->cfg.node_rank);
    else if (find_rank(r, w->rank))
        snprintf(why, sizeof why, "rank %d is already connected through this relay", w->rank);
    if (why[0]) {
        pt_ctl_logf(&r->cfg.log, "relay: refused a worker: %s", why);
        refuse_local(r, l, why);
        return;
    }
    l->state = LOCAL_JOINED;
    r->unjoined--;
    l->rank = w->rank;
    l->conn.in_limit = 4 + (size_t)PT_CTL_MAX_FRAME - ENVELOPE;
    atomic_fetch_add(&r->joined, 1);
    forward_join(r, l, m, raw, len);
    local_interest(r, l);
}

static bool from_agent(int type)
{
    return type == PT_CTL_JOIN || type == PT_CTL_HEARTBEAT || type == PT_CTL_ARMED || type == PT_CTL_SUMMARY ||
           type == PT_CTL_HANG || type == PT_CTL_AUTO_REQUEST || type == PT_CTL_BYE;
}

static void on_local_frames(pt_relay *r, local *l)
{
    pt_error err;
    pt_ctl_msg m;
    int got;
    size_t start = l->conn.in_off;
    while (!l->dead && !l->closing && (got = pt_conn_next(&l->conn, &m, &err)) == 1) {
        const uint8_t *raw = l->conn.in + start;
        size_t len = l->conn.in_off - start;
        start = l->conn.in_off;
        if (l->state == LOCAL_HANDSHAKE)
            on_local_auth(r, l, &m);
        else if (!from_agent(m.type))
            kill_local(r, l, "it sent a message agents do not send");
        else if (l->state == LOCAL_AUTHENTICATED && m.type == PT_CTL_JOIN)
            on_local_join(r, l, &m, raw, len);
        else if (l->state == LOCAL_JOINED && m.type != PT_CTL_JOIN)
            forward_frame(r, l, &m, raw, len);
        else
            kill_local(r, l, l->state == LOCAL_JOINED ? "a second JOIN" : "a message before JOIN");
        if (r->up_state == UP_DOWN)
            return; /* every local is closed now */
        if (!r->reading_locals && l->state == LOCAL_JOINED) {
            r->frames_waiting = true;
            break; /* the rest waits with what is unread */
        }
    }
    if (!l->dead && !l->closing && got < 0)
        kill_local(r, l, err.message);
}

static void service_local(pt_relay *r, local *l, uint32_t events)
{
    pt_error err;
    bool may_read = l->state != LOCAL_JOINED || r->reading_locals;
    if (may_read && (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))) {
        int rc = pt_conn_read(&l->conn, &err);
        on_local_frames(r, l);
        if (!l->dead && rc < 0) {
            kill_local(r, l, l->conn.eof ? WORKER_CLOSED : err.message);
            return;
        }
    } else if (events & (EPOLLHUP | EPOLLERR)) {
        kill_local(r, l, "connection reset");
        return;
    }
    if (!l->dead && pt_conn_flush(&l->conn, &err) != 0) {
        kill_local(r, l, err.message);
        return;
    }
    if (!l->dead && l->closing && pt_conn_pending(&l->conn) == 0) {
        kill_local(r, l, "refused");
        return;
    }
    if (!l->dead) {
        pt_conn_trim(&l->conn); /* as the agent at its end: no buffer kept between frames */
        local_interest(r, l);
    }
}

/* Frames read before backpressure stopped the reading wait in their buffers, where no
 * epoll event will announce them: handled once the upstream has room again. */
static void resume_buffered(pt_relay *r)
{
    if (!r->frames_waiting || !r->reading_locals)
        return;
    r->frames_waiting = false; /* set again by a local that stops for backpressure again */
    for (int32_t i = 0; i < r->local_count && r->reading_locals; i++) {
        local *l = r->locals[i];
        if (!l->dead && l->state == LOCAL_JOINED && l->conn.in_len > l->conn.in_off)
            on_local_frames(r, l);
    }
    reap_locals(r);
}

static void refuse_other_user(pt_relay *r, int fd, int64_t now)
{
    uid_t uid = (uid_t)-1;
    pt_net_peer_uid(fd, &uid);
    close(fd);
    if (now - r->last_foreign_log_ns > 60 * SEC) {
        pt_ctl_logf(&r->cfg.log, "relay: refused a connection from user %ld on %s: only this user's ranks (%ld) "
                    "may use it", uid == (uid_t)-1 ? -1L : (long)uid, r->cfg.listen_host, (long)geteuid());
        r->last_foreign_log_ns = now;
    }
}

static void accept_locals(pt_relay *r, int64_t now)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0)
            return;
        if (!pt_net_peer_is_this_user(fd)) { /* an abstract name has no permissions of its own */
            refuse_other_user(r, fd, now);
            continue;
        }
        local *l = r->up_state == UP_READY && r->local_count < r->locals_cap ? calloc(1, sizeof *l) : NULL;
        if (!l) { /* the agent retries with its backoff: the coordinator is not reachable now, or we are full */
            close(fd);
            continue;
        }
        pt_error err;
        pt_conn_init(&l->conn, fd, LOCAL_OUT_LIMIT);
        l->conn.in_limit = HANDSHAKE_IN_LIMIT;
        l->rank = -1;
        l->accepted_ns = now;
        if (pt_random_bytes(l->nonce, sizeof l->nonce, &err) != 0) {
            close(fd);
            free(l);
            continue;
        }
        r->locals[r->local_count++] = l;
        r->unjoined++;
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_CHALLENGE);
        memcpy(m.nonce, l->nonce, sizeof m.nonce);
        send_local(r, l, &m);
    }
}

static void reap_locals(pt_relay *r)
{
    if (r->unreaped == 0)
        return;
    r->unreaped = 0;
    int32_t kept = 0;
    for (int32_t i = 0; i < r->local_count; i++) {
        local *l = r->locals[i];
        if (l->dead) {
            pt_conn_close(&l->conn);
            free(l);
        } else {
            r->locals[kept++] = l;
        }
    }
    r->local_count = kept;
}

/* ---------------------------------------------------------------- the turn */

static int64_t join_timeout_ns(const pt_relay *r)
{
    return r->cfg.join_timeout_ms > 0 ? r->cfg.join_timeout_ms * MS : HANDSHAKE_TIMEOUT_NS;
}

static void periodic(pt_relay *r, int64_t now)
{
    if (r->up_state == UP_DOWN && now >= r->next_connect_ns)
        try_connect(r, now);
    if (r->up_state == UP_HANDSHAKE && now > r->up_deadline_ns)
        up_down(r, now, "handshake timed out");
    bool beats_due = r->beats_since_ns && now - r->beats_since_ns >= r->beat_hold_ns;
    if (r->up_state == UP_READY && (beats_due || now - r->last_sent_up_ns >= PT_MAX(KEEPALIVE_NS, r->beat_hold_ns))) {
        /* The held heartbeats; or, when nothing of its ranks' went up for a heartbeat's
         * time (none has joined yet, or none is left), a keepalive: the coordinator drops
         * a silent relay (its 30 s timeout is six of the longest holds). */
        if (beats_due) {
            send_beats(r, now);
        } else {
            pt_ctl_msg m;
            pt_ctl_msg_init(&m, PT_CTL_HEARTBEAT);
            send_up(r, &m);
        }
        pt_error err;
        if (r->up_state != UP_DOWN && pt_conn_flush(&r->up, &err) != 0)
            up_down(r, now, err.message);
        up_interest(r);
    }
    for (int32_t i = 0; i < r->local_count && r->unjoined > 0; i++) {
        local *l = r->locals[i];
        if (!l->dead && l->state != LOCAL_JOINED && now - l->accepted_ns > join_timeout_ns(r))
            kill_local(r, l, "no JOIN in time");
    }
}

void pt_relay_turn(pt_relay *r, int64_t now)
{
    if (now - r->last_periodic_ns >= PERIODIC_NS) {
        periodic(r, now);
        r->last_periodic_ns = now;
    }
    struct epoll_event events[64];
    for (int round = 0; round < 16; round++) {
        int n = epoll_wait(r->epoll_fd, events, PT_ARRAY_LEN(events), 0);
        if (n <= 0)
            break;
        for (int i = 0; i < n; i++) {
            void *tag = events[i].data.ptr;
            if (tag == &r->listen_fd)
                accept_locals(r, now);
            else if (tag == &r->up && r->up_state != UP_DOWN)
                service_up(r, events[i].events, now);
            else if (tag != &r->up && !((local *)tag)->dead)
                service_local(r, tag, events[i].events);
        }
        if (r->up_state != UP_DOWN) {
            pt_error err;
            if (pt_conn_flush(&r->up, &err) != 0)
                up_down(r, now, err.message);
            up_interest(r);
        }
        reap_locals(r);
        if (n < (int)PT_ARRAY_LEN(events))
            break;
    }
    resume_buffered(r);
}

static void *relay_main(void *arg)
{
    pt_relay *r = arg;
    while (!atomic_load(&r->stop)) {
        struct epoll_event ev;
        int ignored = epoll_wait(r->epoll_fd, &ev, 1, (int)(PERIODIC_NS / MS)); /* only to sleep: the turn reads */
        (void)ignored;
        pt_relay_turn(r, pt_now_ns());
    }
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

pt_relay *pt_relay_create(const pt_relay_config *cfg, pt_error *err)
{
    if (cfg->world_size <= 0 || cfg->world_size > PT_CTL_MAX_WORLD || cfg->rank < 0 || cfg->rank >= cfg->world_size) {
        pt_error_set(err, "relay: rank %d of world size %d is not valid", cfg->rank, cfg->world_size);
        return NULL;
    }
    pt_relay *r = calloc(1, sizeof *r);
    int32_t cap = cfg->max_locals > 0 ? PT_MIN(cfg->max_locals, PT_CTL_MAX_BEATS) : 256;
    if (!r || !(r->locals = calloc((size_t)cap, sizeof *r->locals)) ||
        !(r->beat_entries = malloc((size_t)cap * PT_CTL_BEAT_BYTES))) {
        pt_error_set(err, "relay: out of memory");
        if (r)
            free(r->locals);
        free(r);
        return NULL;
    }
    r->cfg = *cfg;
    r->locals_cap = cap;
    r->beat_hold_ns = cfg->beat_hold_ns > 0 ? PT_MIN(cfg->beat_hold_ns, BEAT_HOLD_MAX_NS) : BEAT_HOLD_NS;
    r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    r->listen_fd = pt_net_listen(cfg->listen_host, cfg->listen_port, &r->port, err);
    if (r->epoll_fd < 0 || r->listen_fd < 0) {
        if (r->epoll_fd < 0)
            pt_error_set(err, "relay: epoll_create1: %s", strerror(errno));
        if (r->epoll_fd >= 0)
            close(r->epoll_fd);
        if (r->listen_fd >= 0)
            close(r->listen_fd);
        free(r->locals);
        free(r->beat_entries);
        free(r);
        return NULL;
    }
    uint32_t listen_events = 0;
    watch(r, r->listen_fd, &r->listen_fd, &listen_events, EPOLLIN);
    pt_conn_init(&r->up, -1, UP_OUT_LIMIT);
    r->up_state = UP_DOWN;
    r->reading_locals = true;
    r->random_state = (unsigned)(cfg->rank * 2654435761u) ^ (unsigned)pt_now_ns();
    r->last_periodic_ns = INT64_MIN / 2;
    return r;
}

uint16_t pt_relay_port(const pt_relay *r)
{
    return r->port;
}

int pt_relay_fd(const pt_relay *r)
{
    return r->epoll_fd;
}

int pt_relay_start_thread(pt_relay *r, pt_error *err)
{
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&r->thread, &attr, relay_main, r);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc != 0) {
        pt_error_set(err, "cannot start the relay thread: %s", strerror(rc));
        return -1;
    }
    r->thread_started = true;
    return 0;
}

int pt_relay_joined(pt_relay *r)
{
    return atomic_load(&r->joined);
}

bool pt_relay_is_up(pt_relay *r)
{
    return atomic_load(&r->up_ready);
}

void pt_relay_destroy(pt_relay *r)
{
    if (!r)
        return;
    atomic_store(&r->stop, true);
    if (r->thread_started)
        pthread_join(r->thread, NULL);
    for (int32_t i = 0; i < r->local_count; i++) {
        pt_conn_close(&r->locals[i]->conn);
        free(r->locals[i]);
    }
    pt_conn_close(&r->up);
    close(r->listen_fd);
    close(r->epoll_fd);
    free(r->locals);
    free(r->beat_entries);
    memset(&r->cfg.key, 0, sizeof r->cfg.key);
    free(r);
}
