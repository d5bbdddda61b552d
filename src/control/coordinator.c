/* coordinator.c -- the control plane's server: one epoll loop on rank 0's agent thread.
 *
 * Design. One thread owns everything (peers, workers, the round), so there are no locks
 * except around the stats snapshot. Peers are non-blocking sockets in a level-triggered
 * epoll set; a peer closed while handling an event is only marked dead and freed at the
 * end of the loop iteration, so later events in the same batch never touch freed memory.
 * Costs: per worker ~300 bytes of state plus its connection's buffers while a frame is
 * in them (pt_conn_trim gives idle ones back); per heartbeat O(1); a timer tick every
 * 50 ms walks the round's workers once (during a round) and a twentieth of the peers, so
 * each peer's timers (silence, handshake, closing) are checked once a second; the counts
 * the stats show are kept as peers join and die, and the CLIs are a list of their own.
 * (A walk over all 112k peers every tick cost rank 0's training process 17% of a core
 * at 100k workers, idle: a cache miss per peer.) Nothing walks them per event: dead peers are reaped only in a
 * turn after one died, and a relay's ranks are a list of its own, so losing a relay costs
 * its node's ranks (a walk over every peer per turn made the coordinator O(W^2) at 100k
 * workers, whose heartbeats arrive in thousands of batches a second). Summaries are relayed to the CLI as they arrive and not kept here (automatic
 * rounds store them on disk via round.c); while CONTROL_BACKLOG bytes wait for the CLI,
 * workers and relays are not read, so what rank 0 holds does not grow with the job.
 *
 * The relay tree (relay.h). A relay is one connection (PEER_RELAY) carrying its node's
 * ranks: each relayed rank is a virtual peer -- a PEER_AGENT with no socket (via = its
 * relay) whose frames arrive unwrapped from RELAYED and leave wrapped in it -- so all of
 * the above treats it as any worker. A relay's RANK_LOST, or its own connection closing,
 * kills its ranks' virtual peers with that cause.
 *
 * What a peer can make us hold (docs/security.md). Every message was range-checked by the
 * decoder (protocol.h) before anything here reads it. Input is capped per peer by what it
 * has become: 1 KB before it authenticates, 4 KB after until it JOINs, 64 KB for a CLI,
 * one maximal frame for a worker. A frame over 64 KB must first take its size from one
 * input budget shared by all peers (128 MB); while it cannot, the peer is paused (not
 * read, so TCP holds the rest on its side), and resumes at a tick once room frees up. At
 * most max(256, world size) peers may wait to authenticate or JOIN: past that, and when
 * the process is out of file descriptors, the oldest of them is dropped so that a new
 * peer (the user's CLI) still gets in; with nobody to drop, a reserve descriptor accepts
 * the connection and closes it, or the listener pauses until the next tick, so a full
 * descriptor table never makes the loop spin. Those events are logged at most every 10 s.
 * A JOIN for a rank whose worker is connected and heard from is refused (the worker
 * keeps its place), and AUTO_REQUEST starts nothing unless the job opted in.
 *
 * A round: TRIGGER (or an agent's AUTO_REQUEST) -> start step = the highest step any
 * connected worker reached + wait -> ARM every worker (and any that joins later, if it
 * is still before the start step) -> heartbeats move the workers through the window ->
 * SUMMARY from each -> the round ends when every worker is settled: done, failed (died,
 * error, no summary in time, unresponsive), hung, or absent. The deadline (the CLI's
 * --timeout, or one derived from the step time) settles whoever is left. Hang reports
 * (AUTO_REQUEST of kind hang, or a collective that failed) PROBE every worker instead of
 * profiling, and every answer -- stopped or still stepping -- becomes that worker's
 * snapshot in the report: a hang is judged from every rank's stacks and collectives at
 * one moment. A triggered round PROBEs everyone as soon as one worker is hung. Each
 * worker's last snapshot is kept (all together within SNAPSHOT_BUDGET) and goes with its
 * outcome while it is current. A round that ends before its windows do -- its CLI asked
 * (CANCEL_ROUND, Ctrl-C), went away, or the deadline passed -- CANCELs every worker still
 * armed; such a worker drains until the SUMMARY that answers the CANCEL says its collector
 * is free, and a TRIGGER meanwhile hears BUSY (who, for about how long) instead of a round
 * in which every ARM is refused. */
#define _GNU_SOURCE
#include "control/coordinator_state.h"
#include "control/exit_files.h"
#include "util/step_number.h"

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

/* ---------------------------------------------------------------- configuration */

void pt_coordinator_config_defaults(pt_coordinator_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->bind_addr, sizeof cfg->bind_addr, "127.0.0.1");
    cfg->heartbeat_timeout_ns = 30 * SEC;
    cfg->summary_timeout_ns = 300 * SEC;
    cfg->probe_timeout_ns = 3 * SEC;
    cfg->handshake_timeout_ns = 10 * SEC;
    cfg->join_grace_ns = 10 * SEC;
    cfg->auto_output_dir[0] = '\0'; /* the default, with its per-user fallback */
    cfg->auto_wait = 5;
    cfg->auto_steps = 2;
    cfg->auto_interval_ns = 600 * SEC;
}

static uint8_t parse_save_raw(const char *s)
{
    return strcmp(s, "all") == 0 ? PT_SAVE_RAW_ALL : strcmp(s, "master") == 0 ? PT_SAVE_RAW_MASTER : PT_SAVE_RAW_NONE;
}

int pt_coordinator_config_from_env(pt_coordinator_config *cfg, const pt_job_env *env, pt_error *err)
{
    pt_coordinator_config_defaults(cfg);
    /* Where to listen: only where the workers are. A single-node job stays on loopback;
     * otherwise the other nodes must reach MASTER_ADDR, so bind that address when it is one
     * of ours, else (a Kubernetes service name, a NAT address) every interface. The agents
     * and the CLI still have to authenticate. PERFTRACKER_BIND overrides. */
    const char *bind = pt_env_str("PERFTRACKER_BIND", NULL);
    if (!bind)
        bind = pt_job_env_single_node(env) ? "127.0.0.1"
               : pt_net_is_local_address(env->coordinator_host) ? env->coordinator_host
                                                                : "0.0.0.0";
    snprintf(cfg->bind_addr, sizeof cfg->bind_addr, "%s", bind);
    cfg->port = env->coordinator_port;
    cfg->world_size = env->world_size;
    cfg->heartbeat_timeout_ns = pt_env_int("PERFTRACKER_HEARTBEAT_TIMEOUT_S", 30, 1, 86400) * SEC;
    cfg->summary_timeout_ns = pt_env_int("PERFTRACKER_SUMMARY_TIMEOUT_S", 300, 1, 86400) * SEC;
    cfg->join_grace_ns = pt_env_int("PERFTRACKER_JOIN_GRACE_S", 10, 0, 3600) * SEC;
    snprintf(cfg->auto_output_dir, sizeof cfg->auto_output_dir, "%s", pt_env_str("PERFTRACKER_AUTO_OUTPUT_DIR", ""));
    cfg->auto_wait = (int32_t)pt_env_int("PERFTRACKER_AUTO_WAIT", 5, 0, 100000);
    cfg->auto_steps = (int32_t)pt_env_int("PERFTRACKER_AUTO_STEPS", 2, 1, 1000);
    cfg->auto_save_raw = parse_save_raw(pt_env_str("PERFTRACKER_AUTO_SAVE_RAW", "none"));
    cfg->auto_interval_ns = pt_env_int("PERFTRACKER_AUTO_INTERVAL_S", 600, 0, 86400 * 30) * SEC;
    cfg->auto_trigger = pt_env_int("PERFTRACKER_AUTO_TRIGGER", 0, 0, 1) != 0;
    snprintf(cfg->log.prefix, sizeof cfg->log.prefix, "perftracker[coordinator]: ");
    int configured = pt_auth_agent_key(&cfg->agent_key, err);
    if (configured < 0 || (configured == 0 && pt_auth_new_job_secret(cfg->job_secret, &cfg->agent_key, err) != 0) ||
        pt_auth_create_control_key(env, &cfg->control_key, err) != 0)
        return -1;
    cfg->publish = true;
    cfg->local_socket = true;
    cfg->agent_key_public = configured == 0;
    pt_job_record_for_self(&cfg->job, env);
    snprintf(cfg->job.key_file, sizeof cfg->job.key_file, "%s", cfg->control_key.file);
    return 0;
}

/* The job file: where a CLI on this machine reaches us. Loopback and wildcard binds are
 * reached on 127.0.0.1; a specific address there. */
static void publish_job_file(pt_coordinator *c)
{
    pt_job_record *job = &c->cfg.job;
    const char *bind = c->cfg.bind_addr;
    bool any = strcmp(bind, "0.0.0.0") == 0 || strcmp(bind, "::") == 0 || strncmp(bind, "127.", 4) == 0;
    snprintf(job->connect_host, sizeof job->connect_host, "%s", any ? "127.0.0.1" : bind);
    job->port = c->port;
    pt_error err;
    if (pt_job_file_write(job, &err) != 0) {
        pt_ctl_logf(&c->cfg.log, "the CLI will not find this job by itself (%s); give it MASTER_ADDR/MASTER_PORT "
                    "or --coordinator", err.message);
        job->file[0] = '\0';
    }
    /* A SIGTERM from the launcher skips every atexit handler: these go with the process. */
    pt_exit_files_add(job->file);
    pt_exit_files_add(c->cfg.control_key.file);
}

/* At a clean stop nothing may stay behind that says a job runs here. */
static void unpublish(pt_coordinator *c)
{
    if (!c->cfg.publish || c->owner != getpid())
        return;
    if (c->cfg.job.file[0])
        unlink(c->cfg.job.file);
    if (c->cfg.control_key.file[0])
        unlink(c->cfg.control_key.file);
    pt_exit_files_remove(c->cfg.job.file);
    pt_exit_files_remove(c->cfg.control_key.file);
}

/* ---------------------------------------------------------------- handshake */

/* A TCP peer on this machine that proved the job's key as a worker. The job's workers
 * here connect through the Unix socket, and the key derives from a secret that travelled
 * through the job's store, which other users of the machine can read: so this is someone
 * who read it, or a worker that could not reach the socket. Refused either way, and named
 * in the next report. */
static void refuse_local_tcp_worker(pt_coordinator *c, peer *p, int64_t now)
{
    pthread_mutex_lock(&c->stats_lock);
    c->stats.refused_local++;
    pthread_mutex_unlock(&c->stats_lock);
    pt_notices_add(&c->notices, "local-tcp-worker", "a process on this machine (%s) offered the job's key as a worker "
                   "over TCP and was refused: the job's workers on this machine connect through the socket %s, so it "
                   "may have read the key's secret from the job's torch.distributed store", p->addr, c->local_name);
    coord_stranger_logf(c, now, "refused a worker from %s: workers on this machine connect through the socket %s", p->addr,
                  c->local_name);
    char why[PT_HOST_MAX + 96];
    snprintf(why, sizeof why, "workers on this machine connect through the socket %s, not over TCP", c->local_name);
    coord_refuse(c, p, why, now);
}

static void on_auth(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    const pt_key *key = m->role == PT_CTL_ROLE_AGENT || m->role == PT_CTL_ROLE_RELAY ? &c->cfg.agent_key
                        : m->role == PT_CTL_ROLE_CONTROL ? &c->cfg.control_key
                                                          : NULL;
    uint8_t expected[PT_SHA256_BYTES];
    if (key)
        pt_auth_client_proof(key, m->role, p->nonce, m->nonce, expected);
    /* A worker or relay on the Unix socket is this user's process (the kernel said so at
     * accept): it needs no key, and on a single-node job has none. */
    bool worker_role = m->role == PT_CTL_ROLE_AGENT || m->role == PT_CTL_ROLE_RELAY;
    bool proven = key && ((worker_role && p->vouched) || pt_equal_ct(expected, m->mac, sizeof expected));
    if (m->type != PT_CTL_AUTH || m->version != PT_CTL_VERSION || !proven) {
        pthread_mutex_lock(&c->stats_lock);
        c->stats.refused++;
        pthread_mutex_unlock(&c->stats_lock);
        coord_stranger_logf(c, now, "refused a %s connection from %s: %s",
                      m->role == PT_CTL_ROLE_CONTROL ? "control" : m->role == PT_CTL_ROLE_AGENT ? "worker"
                      : m->role == PT_CTL_ROLE_RELAY ? "relay" : "peer",
                      p->addr, m->type != PT_CTL_AUTH || m->version != PT_CTL_VERSION ? "protocol mismatch"
                                                                                     : "wrong job key");
        if (worker_role && m->type == PT_CTL_AUTH && m->version == PT_CTL_VERSION)
            pt_notices_add(&c->notices, "wrong-key", "a %s from %s failed authentication (not the job's key) and "
                           "was refused", m->role == PT_CTL_ROLE_RELAY ? "relay" : "worker", p->addr);
        coord_refuse(c, p, "authentication failed: this job's key is needed", now);
        return;
    }
    if (worker_role && !p->vouched && c->cfg.agent_key_public && pt_net_peer_is_on_this_host(p->conn.fd)) {
        refuse_local_tcp_worker(c, p, now);
        return;
    }
    if (m->role == PT_CTL_ROLE_CONTROL && c->control_peers >= MAX_CONTROL_PEERS) {
        coord_stranger_logf(c, now, "refused a control connection from %s: %d CLIs are connected already", p->addr,
                      MAX_CONTROL_PEERS);
        coord_refuse(c, p, "too many control connections", now);
        return;
    }
    pt_ctl_msg w;
    pt_ctl_msg_init(&w, PT_CTL_WELCOME);
    pt_auth_server_proof(key, m->role, p->nonce, m->nonce, w.mac);
    p->kind = m->role == PT_CTL_ROLE_AGENT ? PEER_AGENT : m->role == PT_CTL_ROLE_RELAY ? PEER_RELAY : PEER_CONTROL;
    p->conn.in_limit = coord_input_limit(p);
    if (p->kind == PEER_RELAY)
        p->conn.out_limit = RELAY_OUT_LIMIT;
    if (p->kind == PEER_CONTROL) {
        c->waiting_peers--;
        coord_list_control(c, p);
        p->conn.out_limit = CONTROL_OUT_LIMIT;
        pt_ctl_logf(&c->cfg.log, "control connection from %s", p->addr);
    }
    coord_send_to(c, p, &w, now);
}

/* ---------------------------------------------------------------- the loop */

void coord_kill_peer_as(pt_coordinator *c, peer *p, int64_t now, int failure, const char *why)
{
    if (p->dead)
        return;
    p->dead = true;
    c->dead_peers++;
    if (p->via) { /* out of its relay's list */
        if (p->via_prev)
            p->via_prev->via_next = p->via_next;
        else
            p->via->relayed = p->via_next;
        if (p->via_next)
            p->via_next->via_prev = p->via_prev;
        p->via_prev = p->via_next = NULL;
    }
    if (p->conn.fd >= 0)
        epoll_ctl(c->epoll_fd, EPOLL_CTL_DEL, p->conn.fd, NULL);
    coord_release_input(c, p);
    if (p->held)
        p->held = false, c->held_peers--;
    if (p->paused)
        p->paused = false, c->paused_peers--;
    if (coord_waiting(p))
        c->waiting_peers--;
    else if (p->kind == PEER_CONTROL)
        coord_unlist_control(c, p);
    else if (p->kind == PEER_AGENT)
        c->joined_agents--;
    else if (p->kind == PEER_RELAY)
        c->joined_relays--;
    if (p->kind == PEER_AGENT && p->rank >= 0 && c->workers[p->rank].peer == p) {
        int32_t rank = p->rank;
        c->workers[rank].peer = NULL;
        c->workers[rank].draining_round = 0; /* it gets a new collector, or none */
        round *r = c->round;
        if (r && !coord_terminal(&r->w[rank]) && r->w[rank].arm_sent) {
            bool exited = c->workers[rank].exited;
            char text[200];
            snprintf(text, sizeof text, "%s at step %lld (%s)", exited ? "exited" : "connection lost",
                     (long long)pt_step_count(c->workers[rank].steps_done), why);
            coord_emit_failure(c, rank, exited ? PT_FAIL_EXITED : failure, text, now);
        } else if (!c->workers[rank].exited) {
            pt_ctl_logf(&c->cfg.log, "rank %d disconnected (%s)", rank, why);
        }
    }
    if (p->kind == PEER_RELAY && p->rank >= 0) {
        /* Every rank it carried is lost with it, and says why. */
        char name[200], text[600];
        coord_relay_name(p, name, sizeof name);
        /* lines below hold name (< 200) and why */
        snprintf(text, sizeof text, "%s was lost: %s", name, why);
        int32_t lost = 0;
        for (; p->relayed; lost++)
            coord_kill_peer_as(c, p->relayed, now, failure, text); /* which takes it off the list */
        pt_ctl_logf(&c->cfg.log, "%s: its %d rank(s) are lost with it", text, lost);
    }
    if (p->kind == PEER_CONTROL && c->round && c->round->control == p) {
        /* Freed at the next tick, never here: a caller up the stack may be using it. */
        pt_ctl_logf(&c->cfg.log, "round %u abandoned: the CLI went away (%s)", c->round->id, why);
        c->round->control = NULL;
        c->round->abandoned = true;
    }
}

/* Load shedding is logged at most every SHED_LOG_NS, with what happened since: a flood of
 * connections must not become a flood of log lines. */
static void flush_shed_log(pt_coordinator *c, int64_t now)
{
    if (!c->shed.dropped && !c->shed.turned_away)
        return;
    if (c->shed.logged_ns && now - c->shed.logged_ns < SHED_LOG_NS)
        return;
    if (!c->shed.logged_ns)
        pt_ctl_logf(&c->cfg.log, "%s: shedding load -- dropping the oldest connections still waiting to "
                    "authenticate or join, or turning new ones away when none is left to drop (counts follow at "
                    "most every %.0f s)", c->shed.why, (double)SHED_LOG_NS / 1e9);
    else
        pt_ctl_logf(&c->cfg.log, "%s: in the last %.0f s, dropped %llu connection(s) still waiting to authenticate "
                    "or join and turned away %llu", c->shed.why, (double)(now - c->shed.logged_ns) / 1e9,
                    (unsigned long long)c->shed.dropped, (unsigned long long)c->shed.turned_away);
    c->shed.logged_ns = now;
    c->shed.dropped = c->shed.turned_away = 0;
}

static void note_shed(pt_coordinator *c, int64_t now, const char *why, bool dropped)
{
    snprintf(c->shed.why, sizeof c->shed.why, "%s", why);
    if (dropped)
        c->shed.dropped++;
    else
        c->shed.turned_away++;
    flush_shed_log(c, now);
}

/* Drops the oldest peer still waiting to authenticate or join, closing its descriptor at
 * once so that it can be reused. Peers are kept in the order they came. */
static bool shed_oldest_waiting(pt_coordinator *c, int64_t now, const char *why)
{
    for (size_t i = 0; i < c->peer_count; i++) {
        peer *p = c->peers[i];
        if (p->dead || !coord_waiting(p) || p->via)
            continue;
        kill_peer(c, p, now, why);
        close(p->conn.fd);
        p->conn.fd = -1;
        note_shed(c, now, why, true);
        return true;
    }
    return false;
}

static size_t max_waiting_peers(const pt_coordinator *c)
{
    return PT_MAX((size_t)MIN_WAITING_PEERS, (size_t)c->cfg.world_size);
}

/* A connection to the Unix socket: this user's process is vouched for by the kernel; any
 * other user's is closed before a byte, and named in the next report. False when closed. */
static bool vouch_local(pt_coordinator *c, int fd, peer *p, int64_t now)
{
    pt_peer_identity id;
    pt_peer_identify(fd, &id);
    if (id.unix_socket && id.uid == (int64_t)geteuid()) {
        p->vouched = true;
        p->cred_uid = id.uid;
        p->cred_pid = id.pid;
        return true;
    }
    pthread_mutex_lock(&c->stats_lock);
    c->stats.refused_local++;
    pthread_mutex_unlock(&c->stats_lock);
    pt_notices_add(&c->notices, "other-user", "a process of user %lld (pid %lld) connected to the coordinator's "
                   "socket %s and was closed: only the job's user may join", (long long)id.uid, (long long)id.pid,
                   c->local_name);
    coord_stranger_logf(c, now, "closed a connection to %s from another user (uid %lld, pid %lld)", c->local_name,
                  (long long)id.uid, (long long)id.pid);
    return false;
}

static void add_peer(pt_coordinator *c, int fd, bool authenticated_as_control, bool authenticated_as_agent,
                     bool from_local_socket, int64_t now)
{
    peer *p = calloc(1, sizeof *p);
    if (p) {
        p->cred_uid = p->cred_pid = -1;
        if (from_local_socket && !vouch_local(c, fd, p, now)) {
            free(p);
            close(fd);
            return;
        }
    }
    if (!p || (c->peer_count == c->peer_cap &&
               !(c->peers = realloc(c->peers, (c->peer_cap = c->peer_cap ? c->peer_cap * 2 : 64) * sizeof *c->peers)))) {
        pt_ctl_logf(&c->cfg.log, "out of memory: dropping a connection");
        free(p);
        close(fd);
        return;
    }
    if (authenticated_as_control && c->control_peers >= MAX_CONTROL_PEERS) { /* pt_coordinator_adopt's */
        free(p);
        close(fd);
        return;
    }
    pt_conn_init(&p->conn, fd, AGENT_OUT_LIMIT);
    p->kind = authenticated_as_control ? PEER_CONTROL : authenticated_as_agent ? PEER_AGENT : PEER_HANDSHAKE;
    p->rank = -1;
    p->conn.in_limit = coord_input_limit(p); /* nobody unauthenticated makes us buffer more than 1 KB */
    if (p->kind == PEER_CONTROL)
        p->conn.out_limit = CONTROL_OUT_LIMIT;
    p->accepted_ns = p->last_heard_ns = now;
    pt_net_peer_name(fd, p->addr, sizeof p->addr);
    p->events = EPOLLIN;
    struct epoll_event ev = {EPOLLIN, {.ptr = p}};
    pt_error err;
    if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0 || pt_random_bytes(p->nonce, sizeof p->nonce, &err) != 0) {
        close(fd);
        free(p);
        return;
    }
    c->peers[c->peer_count++] = p;
    if (p->kind == PEER_CONTROL) {
        coord_list_control(c, p);
        return;
    }
    c->waiting_peers++;
    if (p->kind == PEER_AGENT)
        return;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_CHALLENGE);
    memcpy(m.nonce, p->nonce, sizeof m.nonce);
    coord_send_to(c, p, &m, now);
}

/* Out of descriptors, both listeners stop being watched until the next tick; then both are
 * watched again. */
static void pause_listeners(pt_coordinator *c, bool pause)
{
    int fds[] = {c->listen_fd, c->local_fd};
    for (size_t i = 0; i < PT_ARRAY_LEN(fds); i++) {
        if (fds[i] < 0)
            continue;
        struct epoll_event ev = {pause ? 0 : EPOLLIN, {.ptr = i == 0 ? (void *)&c->listen_fd : (void *)&c->local_fd}};
        epoll_ctl(c->epoll_fd, EPOLL_CTL_MOD, fds[i], &ev);
    }
    c->listener_paused = pause;
}

/* With no descriptor left and nobody to drop: take the connection with the reserve
 * descriptor and close it (the client learns at once), or, without one, stop listening
 * until the next tick. Either way the listener stops being readable for now. */
static void turn_away(pt_coordinator *c, int listen_fd, int64_t now, const char *why)
{
    if (c->reserve_fd >= 0) {
        close(c->reserve_fd);
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            close(fd);
        c->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            note_shed(c, now, why, false);
            return;
        }
    }
    pause_listeners(c, true);
    note_shed(c, now, why, false);
}

static void accept_all(pt_coordinator *c, int listen_fd, int64_t now)
{
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            char why[96];
            snprintf(why, sizeof why, "cannot accept connections: %s", strerror(errno));
            if (!shed_oldest_waiting(c, now, why)) {
                turn_away(c, listen_fd, now, why);
                return;
            }
            continue;
        }
        if (fd < 0)
            return; /* EAGAIN: all taken */
        if (c->waiting_peers >= max_waiting_peers(c)) {
            char why[96];
            snprintf(why, sizeof why, "more than %zu connections waiting to authenticate", max_waiting_peers(c));
            shed_oldest_waiting(c, now, why);
        }
        add_peer(c, fd, false, false, listen_fd == c->local_fd, now);
    }
}

/* A frame the decoder refused: the CLI is told why (a trigger out of range is a user's
 * mistake to show); anyone else is dropped with a log line. */
void coord_bad_frame(pt_coordinator *c, peer *p, const char *why, int64_t now)
{
    if (coord_waiting(p))
        coord_stranger_logf(c, now, "dropping %s: %s", p->addr, why);
    else
        pt_ctl_logf(&c->cfg.log, "dropping %s: %s", p->addr, why);
    if (p->kind != PEER_CONTROL) {
        kill_peer(c, p, now, why);
        return;
    }
    char text[PT_CTL_MAX_TEXT];
    snprintf(text, sizeof text, "the coordinator refused a message: %s", why);
    coord_reply_error(c, p, text, now);
    p->closing = true;
}

static void handle_frames(pt_coordinator *c, peer *p, int64_t now)
{
    pt_error err;
    pt_ctl_msg m;
    int got;
    while (!p->dead && !p->closing && (got = pt_conn_next(&p->conn, &m, &err)) == 1) {
        if (p->kind == PEER_HANDSHAKE)
            on_auth(c, p, &m, now);
        else if (p->kind == PEER_AGENT)
            coord_on_agent_message(c, p, &m, now);
        else if (p->kind == PEER_RELAY)
            coord_on_relay_message(c, p, &m, now);
        else
            coord_on_control_message(c, p, &m, now);
    }
    if (!p->dead && !p->closing && got < 0)
        coord_bad_frame(c, p, err.message, now);
}

static void service_peer(pt_coordinator *c, peer *p, uint32_t events, int64_t now)
{
    pt_error err;
    if ((p->paused || p->held) && (events & (EPOLLHUP | EPOLLERR))) {
        kill_peer(c, p, now, "connection closed while waiting for room");
        return;
    }
    if (!p->paused && !p->held && (p->kind == PEER_AGENT || p->kind == PEER_RELAY) && coord_cli_backlogged(c)) {
        p->held = true; /* resumed once the CLI has taken half of it (resume_held) */
        c->held_peers++;
        coord_update_interest(c, p);
        return;
    }
    if (!p->paused && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        int rc = 0;
        if (coord_admit_input(c, p)) {
            rc = pt_conn_read(&p->conn, &err);
            if (rc > 0)
                p->last_heard_ns = now;
        } else {
            p->paused = true; /* resumed by a tick once the budget has room */
            c->paused_peers++;
        }
        handle_frames(c, p, now);
        if (!p->dead && !p->closing && !p->paused)
            coord_admit_input(c, p); /* a finished frame gives its share back at once */
        if (!p->dead && rc < 0) {
            if (!p->conn.eof && coord_waiting(p))
                coord_stranger_logf(c, now, "dropping %s: %s", p->addr, err.message);
            else if (!p->conn.eof)
                pt_ctl_logf(&c->cfg.log, "dropping %s: %s", p->addr, err.message);
            kill_peer(c, p, now, err.message);
            return;
        }
    }
    if (!p->dead && pt_conn_flush(&p->conn, &err) != 0)
        kill_peer(c, p, now, err.message);
    if (!p->dead && p->closing && pt_conn_pending(&p->conn) == 0)
        kill_peer(c, p, now, "closed after refusal"); /* now, not at its turn in the sweep */
    if (!p->dead)
        coord_update_interest(c, p);
    if (!p->dead && p->kind != PEER_CONTROL)
        pt_conn_trim(&p->conn); /* one connection per worker or node: none keeps a buffer while idle */
}

/* Summaries flow to the CLI as fast as it takes them and no faster: while CONTROL_BACKLOG
 * bytes wait for it, workers and relays are not read (TCP holds the rest on their side),
 * so rank 0 never queues the whole job's summaries. */
bool coord_cli_backlogged(const pt_coordinator *c)
{
    const peer *cli = c->round ? c->round->control : NULL;
    return cli && !cli->dead && pt_conn_pending(&cli->conn) > CONTROL_BACKLOG;
}

static void resume_held(pt_coordinator *c, int64_t now)
{
    const peer *cli = c->round ? c->round->control : NULL;
    if (!c->held_peers || (cli && !cli->dead && pt_conn_pending(&cli->conn) > CONTROL_BACKLOG / 2))
        return;
    for (size_t i = 0; i < c->peer_count; i++) {
        peer *p = c->peers[i];
        if (p->held && !p->dead) {
            p->held = false;
            p->last_heard_ns = now; /* waiting on the CLI is not silence */
            coord_update_interest(c, p);
        }
    }
    c->held_peers = 0;
}

/* Whether bytes p (or the relay that carries it) sent wait in the kernel, unread: then p
 * is not silent, we are late -- rank 0 starved of CPU reads a relay long after it wrote,
 * and a tick that came first named healthy ranks unresponsive (thousands at 100k workers
 * on a loaded machine; also past one turn's 256 events, when more peers are ready). A
 * partial frame already in our buffer does not count: we read all there was, and wait
 * on the peer. */
static bool unread_input(const peer *p)
{
    const peer *carrier = p->via ? p->via : p;
    int queued = 0;
    return carrier->conn.fd >= 0 && ioctl(carrier->conn.fd, FIONREAD, &queued) == 0 && queued > 0;
}

/* A peer's timers, at a tick: closing after a refusal, the handshake's deadline, silence. */
static void check_peer(pt_coordinator *c, peer *p, int64_t now)
{
    if (p->closing && pt_conn_pending(&p->conn) == 0)
        kill_peer(c, p, now, "closed after refusal");
    else if (coord_waiting(p) && now - p->accepted_ns > c->cfg.handshake_timeout_ns)
        kill_peer(c, p, now, p->kind == PEER_HANDSHAKE ? "no authentication in time" : "no JOIN in time");
    else if ((p->kind == PEER_AGENT || p->kind == PEER_RELAY) && !p->paused && !p->held &&
             !(p->via && (p->via->paused || p->via->held)) && now - p->last_heard_ns > c->cfg.heartbeat_timeout_ns &&
             !unread_input(p)) {
        pt_ctl_logf(&c->cfg.log, "%s %d: no heartbeat for %.0f s; dropping it",
                    p->kind == PEER_RELAY ? "the relay of rank" : "rank", p->rank,
                    (double)(now - p->last_heard_ns) / 1e9);
        coord_kill_peer_as(c, p, now, PT_FAIL_UNRESPONSIVE, "no heartbeat");
    }
}

/* A slice of the peers per tick, so that each one's timers are checked once per
 * PEER_SWEEP_NS whatever the job's size; a long gap between ticks (a starved process, a
 * test's clock) checks every peer once. */
static void sweep_peers(pt_coordinator *c, int64_t now)
{
    int64_t since = PT_MAX(now - c->last_tick_ns, 0);
    c->sweep_owed = PT_MIN(c->sweep_owed + (double)c->peer_count * (double)since / (double)PEER_SWEEP_NS,
                           (double)c->peer_count);
    for (; c->sweep_owed >= 1 && c->peer_count > 0; c->sweep_owed--) {
        if (c->sweep_cursor >= c->peer_count)
            c->sweep_cursor = 0; /* also after a reap made the list shorter */
        peer *p = c->peers[c->sweep_cursor++];
        if (!p->dead)
            check_peer(c, p, now);
        c->peer_checks++;
    }
}

/* Peers paused for room in the input budget resume at the first tick with room: rare
 * (frames over 64 KB from many peers at once), so a walk over all of them then is fine. */
static void resume_paused(pt_coordinator *c, int64_t now)
{
    for (size_t i = 0; i < c->peer_count && c->paused_peers > 0; i++) {
        peer *p = c->peers[i];
        if (!p->dead && p->paused && coord_admit_input(c, p)) {
            p->paused = false;
            c->paused_peers--;
            p->last_heard_ns = now; /* waiting on us is not silence */
            coord_update_interest(c, p);
        }
    }
}

/* Every TICK_NS: a slice of the peers' timers, paused peers given room, the listener,
 * the round, the stats. */
static void tick(pt_coordinator *c, int64_t now)
{
    sweep_peers(c, now);
    if (c->paused_peers > 0)
        resume_paused(c, now);
    size_t unsent = 0;
    for (size_t i = 0; i < c->control_peers; i++)
        unsent += pt_conn_pending(&c->controls[i]->conn);
    if (c->listener_paused)
        pause_listeners(c, false);
    if (c->reserve_fd < 0 && c->listen_fd >= 0)
        c->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    flush_shed_log(c, now);
    coord_flush_stranger_log(c, now);
    coord_check_round(c, now);
    pthread_mutex_lock(&c->stats_lock);
    c->stats.agents = c->joined_agents;
    c->stats.relays = c->joined_relays;
    c->stats.round_running = c->round != NULL;
    c->stats.unsent_bytes = unsent;
    c->stats.heartbeats = c->heartbeats;
    c->stats.peer_checks = c->peer_checks;
    c->stats.relay_frames = c->relay_frames;
    pthread_mutex_unlock(&c->stats_lock);
}

static void reap_dead_peers(pt_coordinator *c)
{
    if (c->dead_peers == 0)
        return; /* the usual turn: a walk here, per turn, was O(world) per batch of heartbeats */
    c->dead_peers = 0;
    size_t kept = 0;
    for (size_t i = 0; i < c->peer_count; i++) {
        peer *p = c->peers[i];
        if (p->dead) {
            pt_conn_close(&p->conn);
            free(p);
        } else {
            c->peers[kept++] = p;
        }
    }
    c->peer_count = kept;
}

/* One pass: the events epoll has (waiting up to timeout_ms), the tick when due, the dead
 * peers freed. */
static void turn(pt_coordinator *c, int timeout_ms, bool real_time, int64_t now)
{
    struct epoll_event events[256];
    int n = epoll_wait(c->epoll_fd, events, PT_ARRAY_LEN(events), timeout_ms);
    if (real_time)
        now = pt_now_ns();
    for (int i = 0; i < n; i++) {
        void *tag = events[i].data.ptr;
        if (tag == &c->listen_fd || tag == &c->local_fd) {
            accept_all(c, *(int *)tag, now);
        } else if (tag == &c->wake_fd) {
            uint64_t drained;
            ssize_t ignored = read(c->wake_fd, &drained, sizeof drained);
            (void)ignored;
        } else if (!((peer *)tag)->dead) {
            service_peer(c, tag, events[i].events, now);
        }
    }
    resume_held(c, now);
    if (now - c->last_tick_ns >= TICK_NS) {
        tick(c, now);
        c->last_tick_ns = now;
    }
    reap_dead_peers(c);
}

static void *coordinator_main(void *arg)
{
    pt_coordinator *c = arg;
    while (!atomic_load(&c->stop))
        turn(c, (int)(TICK_NS / MS), true, 0);
    return NULL;
}

/* A job of N workers needs N sockets here, often past the default soft limit of 1024. */
static void raise_fd_limit(const pt_coordinator *c)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)c->cfg.world_size * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            pt_ctl_logf(&c->cfg.log, "cannot raise the open-file limit to %llu", (unsigned long long)want);
    }
}

/* The Unix socket for this machine's workers, named after the TCP port just bound. A name
 * that is taken (another process of any user holds it) keeps this machine's workers out,
 * not the job: said loudly, in the log and in every report. */
static void listen_local_socket(pt_coordinator *c)
{
    pt_coordinator_socket_for(c->port, c->local_name, sizeof c->local_name);
    pt_error err;
    c->local_fd = pt_net_listen(c->local_name, 0, NULL, &err);
    struct epoll_event ev = {EPOLLIN, {.ptr = &c->local_fd}};
    if (c->local_fd >= 0 && epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->local_fd, &ev) == 0)
        return;
    if (c->local_fd >= 0) {
        snprintf(err.message, sizeof err.message, "cannot watch %s: %s", c->local_name, strerror(errno));
        close(c->local_fd);
        c->local_fd = -1;
    }
    pt_ctl_logf(&c->cfg.log, "%s: the workers on this machine cannot join this job's profiling "
                "(PERFTRACKER_PORT moves the coordinator and its socket)", err.message);
    pt_notices_add(&c->notices, "no-local-socket", "%s: the workers on rank 0's machine could not join", err.message);
}

/* Everything but the thread; listening unless detached (the test seam). */
static pt_coordinator *create(const pt_coordinator_config *cfg, bool listen, pt_error *err)
{
    if (cfg->world_size <= 0 || cfg->world_size > PT_CTL_MAX_WORLD) {
        pt_error_set(err, "invalid world size %d (1..%d)", cfg->world_size, PT_CTL_MAX_WORLD);
        return NULL;
    }
    pt_coordinator *c = calloc(1, sizeof *c);
    if (!c || !(c->workers = calloc((size_t)cfg->world_size, sizeof *c->workers))) {
        free(c);
        pt_error_set(err, "out of memory");
        return NULL;
    }
    c->cfg = *cfg;
    memset(c->cfg.job_secret, 0, sizeof c->cfg.job_secret); /* the other ranks' business, not ours */
    c->owner = getpid();
    c->listen_fd = c->local_fd = c->epoll_fd = c->wake_fd = c->reserve_fd = -1;
    pthread_mutex_init(&c->stats_lock, NULL);
    c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wev = {EPOLLIN, {.ptr = &c->wake_fd}};
    if (c->epoll_fd < 0 || c->wake_fd < 0 || epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->wake_fd, &wev) != 0) {
        pt_error_set(err, "cannot set up the coordinator's event loop: %s", strerror(errno));
        c->cfg.publish = false;
        pt_coordinator_stop(c);
        return NULL;
    }
    if (!listen)
        return c;
    raise_fd_limit(c);
    c->listen_fd = pt_net_listen(cfg->bind_addr, cfg->port, &c->port, err);
    c->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct epoll_event lev = {EPOLLIN, {.ptr = &c->listen_fd}};
    if (c->listen_fd < 0 || epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->listen_fd, &lev) != 0) {
        if (c->listen_fd >= 0)
            pt_error_set(err, "cannot set up the coordinator's event loop: %s", strerror(errno));
        c->cfg.publish = false; /* the port may be another job's: its files are not ours */
        pt_coordinator_stop(c);
        return NULL;
    }
    if (cfg->local_socket)
        listen_local_socket(c);
    return c;
}

pt_coordinator *pt_coordinator_start(const pt_coordinator_config *cfg, pt_error *err)
{
    pt_coordinator *c = create(cfg, true, err);
    if (!c)
        return NULL;
    if (c->cfg.publish && pt_auth_write_key_file(&c->cfg.control_key, err) != 0) {
        c->cfg.publish = false;
        pt_coordinator_stop(c);
        return NULL;
    }
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    int rc = pthread_create(&c->thread, NULL, coordinator_main, c);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    c->thread_started = rc == 0;
    if (rc != 0) {
        pt_error_set(err, "cannot start the coordinator thread: %s", strerror(rc));
        pt_coordinator_stop(c);
        return NULL;
    }
    pt_ctl_logf(&c->cfg.log, "listening on %s:%u for %d workers (control key: %s)", cfg->bind_addr,
                (unsigned)c->port, cfg->world_size, cfg->control_key.source);
    if (c->cfg.publish)
        publish_job_file(c);
    char squatted[PT_RUNTIME_PATH_MAX];
    if (c->cfg.publish && pt_runtime_dir_note(squatted, sizeof squatted))
        pt_ctl_logf(&c->cfg.log, "%s", squatted);
    return c;
}

pt_coordinator *pt_coordinator_create_detached(const pt_coordinator_config *cfg, pt_error *err)
{
    pt_coordinator_config detached = *cfg;
    detached.publish = false;
    return create(&detached, false, err);
}

int pt_coordinator_adopt(pt_coordinator *c, int fd, bool control, int64_t now, pt_error *err)
{
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        pt_error_set(err, "cannot make the socket non-blocking: %s", strerror(errno));
        return -1;
    }
    add_peer(c, fd, control, !control, false, now);
    return 0;
}

void pt_coordinator_turn(pt_coordinator *c, int64_t now)
{
    turn(c, 0, false, now);
}

uint16_t pt_coordinator_port(const pt_coordinator *c)
{
    return c->port;
}

void pt_coordinator_stats_get(pt_coordinator *c, pt_coordinator_stats *out)
{
    pthread_mutex_lock(&c->stats_lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->stats_lock);
}

void pt_coordinator_drain(pt_coordinator *c, int64_t timeout_ns)
{
    if (!c || !c->thread_started)
        return;
    int64_t deadline = pt_now_ns() + timeout_ns;
    bool said = false;
    for (;;) {
        pt_coordinator_stats s;
        nanosleep(&(struct timespec){0, TICK_NS}, NULL); /* a tick, so the stats are current */
        pt_coordinator_stats_get(c, &s);
        if (!s.round_running && s.unsent_bytes == 0)
            return;
        if (pt_now_ns() >= deadline) {
            pt_ctl_logf(&c->cfg.log, "exiting with the round unfinished: the workers not yet heard from are "
                        "reported missing");
            return;
        }
        if (!said && s.round_running) {
            pt_ctl_logf(&c->cfg.log, "the job is ending during a round: waiting up to %.0f s for the workers' "
                        "summaries", (double)timeout_ns / 1e9);
            said = true;
        }
    }
}

void pt_coordinator_stop(pt_coordinator *c)
{
    if (!c)
        return;
    unpublish(c);
    if (c->thread_started) {
        atomic_store(&c->stop, true);
        uint64_t one = 1;
        ssize_t ignored = write(c->wake_fd, &one, sizeof one);
        (void)ignored;
        pthread_join(c->thread, NULL);
    }
    for (size_t i = 0; i < c->peer_count; i++) {
        pt_conn_close(&c->peers[i]->conn);
        free(c->peers[i]);
    }
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        coord_forget_snapshot(c, &c->workers[i].snap);
    coord_free_round(c->round);
    free(c->peers);
    free(c->workers);
    free(c->scratch);
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    if (c->local_fd >= 0)
        close(c->local_fd);
    pt_notices_free(&c->notices);
    if (c->reserve_fd >= 0)
        close(c->reserve_fd);
    if (c->epoll_fd >= 0)
        close(c->epoll_fd);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    pthread_mutex_destroy(&c->stats_lock);
    free(c);
}
