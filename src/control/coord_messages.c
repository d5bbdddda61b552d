/* coord_messages.c -- what each kind of authenticated peer may say, decoded and
 * range-checked before anything here reads it: an agent's JOIN (one connection per rank:
 * claim_rank says who keeps a rank claimed twice), heartbeats, HANG snapshots, ARMED,
 * SUMMARY, AUTO_REQUEST and BYE; a relay's JOIN, RELAYED frames of its ranks, merged
 * HEARTBEATS and RANK_LOST; a CLI's TRIGGER and CANCEL_ROUND. */
#define _GNU_SOURCE
#include "control/coordinator_state.h"
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

/* ---------------------------------------------------------------- agent messages */

/* Tells the peer why it is not welcome, and closes its connection once that is sent. */
void coord_refuse(pt_coordinator *c, peer *p, const char *why, int64_t now)
{
    pt_ctl_msg r;
    pt_ctl_msg_init(&r, PT_CTL_REFUSED);
    r.text = pt_ctl_str(why);
    coord_send_to(c, p, &r, now);
    p->closing = true;
}

/* Whether the peer has closed (or reset) its connection, by a peek that never blocks. */
static bool connection_gone(const peer *p)
{
    if (p->via)
        return p->via->dead; /* its relay says RANK_LOST when its connection drops */
    char byte;
    ssize_t n = recv(p->conn.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* A second connection claims a rank whose worker is connected. The rank's own process on
 * this machine (vouched for by the kernel) takes it from a connection that only holds the
 * key; otherwise the connection already there keeps it while it is alive (heard from
 * within the heartbeat timeout: a link dead without a word is dropped by the timeout, and
 * the real worker, refused meanwhile, retries). Either way the report names the claim:
 * two connections for one rank means one of them is not the job's. True when p takes it. */
static bool claim_rank(pt_coordinator *c, peer *p, worker *w, int32_t rank, int64_t now)
{
    peer *holder = w->peer;
    pthread_mutex_lock(&c->stats_lock);
    c->stats.rank_conflicts++;
    pthread_mutex_unlock(&c->stats_lock);
    char kind[32];
    snprintf(kind, sizeof kind, "rank-%d", rank);
    if (p->vouched && !holder->vouched) {
        pt_notices_add(&c->notices, kind, "rank %d was held by a connection from %s that only showed the job's key; "
                       "the rank's own process on this machine (%s) took its place", rank, holder->addr, p->addr);
        pt_ctl_logf(&c->cfg.log, "rank %d: replacing the connection from %s, which only showed the job's key, with "
                    "the rank's own process on this machine (%s)", rank, holder->addr, p->addr);
        kill_peer(c, holder, now, "replaced by the rank's own process on this machine");
        return true;
    }
    char why[200];
    snprintf(why, sizeof why, "rank %d is already connected (from %.64s)", rank, holder->addr);
    pt_notices_add(&c->notices, kind, "a second connection claimed rank %d: %s while %s held it, and was refused; "
                   "one of them is not the job's", rank, p->addr, holder->addr);
    coord_stranger_logf(c, now, "refused a worker from %s: %s", p->addr, why);
    coord_refuse(c, p, why, now);
    return false;
}

/* What the report says of how the worker connected (trust.h): the kernel's uid and pid
 * for a peer of the Unix socket, the address for TCP, and its relay's view for a rank
 * behind a relay. */
static void note_connection(worker *w, const peer *p)
{
    w->seen_uid = p->cred_uid;
    w->seen_pid = p->cred_pid;
    if (p->via)
        snprintf(w->seen_from, sizeof w->seen_from, "%.80s, through the relay of node %d (%.60s)", p->addr,
                 p->via->node_rank, p->via->addr);
    else if (p->cred_uid >= 0)
        snprintf(w->seen_from, sizeof w->seen_from, "%.80s, uid %lld", p->addr, (long long)p->cred_uid);
    else
        snprintf(w->seen_from, sizeof w->seen_from, "%.80s", p->addr);
}

static void on_join(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    int32_t rank = m->worker.rank;
    if (p->rank >= 0) {
        coord_stranger_logf(c, now, "refused a second JOIN from %s (rank %d, already joined as rank %d)", p->addr, rank,
                      p->rank);
        coord_refuse(c, p, "this connection has joined already", now);
        return;
    }
    if (rank < 0 || rank >= c->cfg.world_size || m->worker.world_size != c->cfg.world_size) {
        coord_stranger_logf(c, now, "refused a worker from %s: rank %d of world size %d does not fit this job (world size "
                      "%d)", p->addr, rank, m->worker.world_size, c->cfg.world_size);
        coord_refuse(c, p, "rank or world size does not match this job", now);
        return;
    }
    worker *w = &c->workers[rank];
    if (w->peer && w->peer != p && connection_gone(w->peer)) /* its worker reconnected before we saw the EOF */
        kill_peer(c, w->peer, now, "closed by the peer");
    if (w->peer && w->peer != p && !claim_rank(c, p, w, rank, now))
        return;
    w->peer = p;
    p->rank = rank;
    c->waiting_peers--;
    c->joined_agents++;
    p->conn.in_limit = coord_input_limit(p);
    w->ever_joined = true;
    w->exited = false;
    w->local_rank = m->worker.local_rank;
    w->node_rank = m->worker.node_rank;
    w->world_size = m->worker.world_size;
    w->pid = m->worker.pid;
    pt_ctl_copy_str(w->host, sizeof w->host, m->worker.host);
    note_connection(w, p);
}

static char *copy_text(pt_ctl_bytes b)
{
    char *t = b.len ? malloc((size_t)b.len + 1) : NULL;
    if (t)
        pt_ctl_copy_str(t, (size_t)b.len + 1, b);
    return t;
}

void coord_forget_snapshot(pt_coordinator *c, snapshot *snap)
{
    free(snap->stack), free(snap->threads), free(snap->collectives);
    c->snapshot_bytes -= snap->bytes;
    memset(snap, 0, sizeof *snap);
}

static void remember_snapshot(pt_coordinator *c, worker *w, const pt_ctl_msg *m, int64_t now)
{
    coord_forget_snapshot(c, &w->snap);
    snapshot *snap = &w->snap;
    size_t wanted = (size_t)m->stack.len + m->threads.len + m->collectives.len;
    snap->stack = copy_text(m->stack);
    snap->bytes = m->stack.len;
    if (c->snapshot_bytes + wanted <= SNAPSHOT_BUDGET) {
        snap->threads = copy_text(m->threads);
        snap->collectives = copy_text(m->collectives);
        snap->bytes = wanted;
    } else if (now - c->last_budget_log_ns > 60 * SEC) {
        pt_ctl_logf(&c->cfg.log, "hang snapshots hold %zu MB: keeping only the training stack of rank %d",
                    c->snapshot_bytes >> 20, (int)(w - c->workers));
        c->last_budget_log_ns = now;
    }
    c->snapshot_bytes += snap->bytes;
    snap->since_step_ns = m->since_step_ns;
    snap->mean_step_ns = m->mean_step_ns;
    snap->steps_done = m->steps_done;
    snap->taken = true;
}

/* The automatic round's folder: made under the configured (or default) output folder, or,
 * for an in-memory round (the fuzz target's seam), only named there. 0 or -1 with err. */
static int make_auto_round_dir(pt_coordinator *c, char *dir, size_t cap, pt_error *err)
{
    char output_dir[sizeof c->cfg.auto_output_dir], note[512];
    snprintf(output_dir, sizeof output_dir, "%s", c->cfg.auto_output_dir);
    if (c->cfg.auto_in_memory) {
        snprintf(dir, cap, "%s/in-memory", output_dir[0] ? output_dir : PT_DEFAULT_OUTPUT_DIR);
        return 0;
    }
    if (!output_dir[0]) {
        pt_round_default_output_dir(output_dir, sizeof output_dir, note, sizeof note);
        if (note[0])
            pt_ctl_logf(&c->cfg.log, "automatic round: %s", note);
    }
    return pt_round_make_dir(output_dir, dir, cap, err);
}

static void start_auto_round(pt_coordinator *c, int32_t rank, const pt_ctl_msg *m, int64_t now)
{
    bool hang = m->kind == PT_AUTO_HANG || m->kind == PT_AUTO_COLLECTIVE_ERROR;
    if (!c->cfg.auto_trigger) {
        if (!c->last_opt_in_log_ns || now - c->last_opt_in_log_ns > 60 * SEC) {
            pt_ctl_logf(&c->cfg.log, "refused rank %d's request for an automatic %s round: this job did not opt in "
                        "(PERFTRACKER_AUTO_TRIGGER=1 or PerfTracker(auto_trigger=True) on rank 0)", rank,
                        hang ? "hang report" : "profiling");
            c->last_opt_in_log_ns = now;
        }
        return;
    }
    if (c->round || now < c->next_auto_ns) {
        if (now - c->last_busy_log_ns > 60 * SEC) {
            pt_ctl_logf(&c->cfg.log, "rank %d asked for an automatic %s round; not now (%s)", rank,
                        hang ? "hang report" : "profiling", c->round ? "a round is running" : "rate limit");
            c->last_busy_log_ns = now;
        }
        return;
    }
    c->next_auto_ns = now + c->cfg.auto_interval_ns;
    char dir[PT_CTL_MAX_PATH];
    pt_error err;
    round *r = coord_new_round(c, hang ? ROUND_HANG_REPORT : ROUND_AUTO, now);
    if (!r || make_auto_round_dir(c, dir, sizeof dir, &err) != 0) {
        pt_ctl_logf(&c->cfg.log, "cannot start an automatic round: %s", r ? err.message : "out of memory");
        coord_free_round(r);
        return;
    }
    r->local = c->cfg.auto_in_memory ? pt_round_new_in_memory(dir, c->cfg.world_size)
                                     : pt_round_new(dir, c->cfg.world_size);
    if (m->kind == PT_AUTO_COLLECTIVE_ERROR)
        pt_round_add_warning(r->local, "automatic hang report: a collective of rank %d raised an error (at step %lld)",
                             rank, (long long)pt_step_count(m->steps_done));
    else if (hang)
        pt_round_add_warning(r->local, "automatic hang report: rank %d made no step for %.1f s (mean step %.1f ms)",
                             rank, (double)m->stalled_ns / 1e9, (double)m->mean_step_ns / 1e6);
    else
        pt_round_add_warning(r->local, "automatic round: rank %d's last 50 steps averaged %.1f ms, %.1f%% above "
                             "its recent best of %.1f ms", rank, (double)m->mean_step_ns / 1e6,
                             m->best_mean_ns > 0 ? 100.0 * ((double)m->mean_step_ns / (double)m->best_mean_ns - 1)
                                                 : 0.0, (double)m->best_mean_ns / 1e6);
    if (hang) {
        coord_begin_hang_report(c, r, now);
    } else {
        char raw[PT_CTL_MAX_PATH + 16];
        snprintf(raw, sizeof raw, "%s/raw_trace", dir);
        coord_begin_profiling(c, r, c->cfg.auto_wait, c->cfg.auto_steps, c->cfg.auto_save_raw, raw, 0, now);
    }
}

static bool for_this_round(const pt_coordinator *c, uint32_t id, int32_t rank)
{
    return c->round && c->round->id == id && !coord_terminal(&c->round->w[rank]);
}

/* A worker's heartbeat, sent directly or merged by its relay: heard_ns is when the agent
 * sent it (a relay holds one up to a heartbeat period and says for how long), which the
 * step estimates count from. */
/* A worker's step count moved from `before` to `after`. When its step source changed since
 * it was armed (util/step_number.h), its collector moved the window (pt_step_retarget):
 * the round follows (pt_step_follow), so the progress line and the window's end stay
 * right. The collector decides where the window is; this tracks it as closely as the
 * heartbeats tell. */
static void follow_step_source(pt_coordinator *c, int32_t rank, int64_t before, int64_t after)
{
    round *r = c->round;
    if (!r || r->kind == ROUND_HANG_REPORT || !r->w[rank].arm_sent)
        return;
    r->w[rank].start_step = pt_step_follow(r->w[rank].start_step, before, after);
}

static void set_steps(pt_coordinator *c, int32_t rank, int64_t steps_done)
{
    worker *w = &c->workers[rank];
    follow_step_source(c, rank, w->steps_done, steps_done);
    w->steps_done = steps_done;
}

static void on_heartbeat(pt_coordinator *c, int32_t rank, int64_t steps_done, int64_t mean_step_ns,
                         int64_t stalled_ns, int64_t heard_ns, int64_t now)
{
    worker *w = &c->workers[rank];
    w->stepping = steps_done > w->steps_done;
    set_steps(c, rank, steps_done);
    w->steps_heard_ns = heard_ns;
    w->mean_step_ns = mean_step_ns;
    w->stalled_ns = stalled_ns;
    c->heartbeats++;
    coord_advance_worker(c, rank, now);
}

void coord_on_agent_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    if (m->type == PT_CTL_JOIN) {
        on_join(c, p, m, now);
        return;
    }
    int32_t rank = p->rank;
    if (rank < 0)
        return; /* nothing counts before JOIN */
    worker *w = &c->workers[rank];
    switch (m->type) {
    case PT_CTL_HEARTBEAT:
        on_heartbeat(c, rank, m->steps_done, m->mean_step_ns, m->stalled_ns, now, now);
        break;
    case PT_CTL_ARMED:
        if (!for_this_round(c, m->round, rank))
            break;
        if (m->status != 0) {
            char text[PT_CTL_MAX_TEXT + 1];
            pt_ctl_copy_str(text, sizeof text, m->text);
            coord_emit_failure(c, rank, PT_FAIL_ERROR, text, now);
        } else {
            c->round->w[rank].acked = true;
            c->round->progress_dirty = true;
        }
        break;
    case PT_CTL_SUMMARY:
        if (w->draining_round && m->round == w->draining_round)
            w->draining_round = 0; /* the cancelled window is gone: its collector is free */
        if (!for_this_round(c, m->round, rank) || c->round->kind == ROUND_HANG_REPORT)
            break;
        if (m->status != 0 || m->blob.len == 0) {
            char text[PT_CTL_MAX_TEXT + 1];
            pt_ctl_copy_str(text, sizeof text, m->text);
            coord_emit_failure(c, rank, PT_FAIL_ERROR, text[0] ? text : "the collector sent no summary", now);
        } else {
            coord_emit_summary(c, rank, m, now);
        }
        break;
    case PT_CTL_HANG:
        set_steps(c, rank, m->steps_done);
        w->steps_heard_ns = now;
        w->stalled_ns = m->stalled_ns;
        remember_snapshot(c, w, m, now);
        /* A hang report decides from every worker's snapshot, taken now: one still
         * stepping is as much evidence as one that stopped (it may be the one the
         * others wait for, blocked in Python before their collective). */
        if (c->round && c->round->kind == ROUND_HANG_REPORT && !coord_terminal(&c->round->w[rank]))
            coord_emit_failure(c, rank, PT_FAIL_HANG, "", now);
        else
            coord_advance_worker(c, rank, now);
        break;
    case PT_CTL_AUTO_REQUEST:
        set_steps(c, rank, m->steps_done);
        w->steps_heard_ns = now;
        start_auto_round(c, rank, m, now);
        break;
    case PT_CTL_BYE:
        w->exited = true;
        if (c->round && !coord_terminal(&c->round->w[rank]) && c->round->w[rank].arm_sent)
            coord_emit_failure(c, rank, PT_FAIL_EXITED, "the process exited", now);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- relay messages */

/* "the relay of node 3 (rank 24 on gpu-3, 10.0.0.3:41234)", for the lines about its ranks. */
void coord_relay_name(const peer *relay, char *dst, size_t cap)
{
    snprintf(dst, cap, "the relay of node %d (rank %d on %.80s, %.60s)", relay->node_rank, relay->rank, relay->host,
             relay->addr);
}

/* The relay says who it is (its own worker's identity) before it relays anything. */
static void on_relay_join(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    if (m->worker.world_size != c->cfg.world_size) {
        coord_stranger_logf(c, now, "refused a relay from %s: world size %d does not match this job's %d", p->addr,
                      m->worker.world_size, c->cfg.world_size);
        coord_refuse(c, p, "world size does not match this job", now);
        return;
    }
    p->rank = m->worker.rank;
    p->node_rank = m->worker.node_rank;
    pt_ctl_copy_str(p->host, sizeof p->host, m->worker.host);
    c->waiting_peers--;
    c->joined_relays++;
    p->conn.in_limit = coord_input_limit(p);
}

static peer *relayed_peer(pt_coordinator *c, const peer *relay, int32_t rank)
{
    peer *q = c->workers[rank].peer;
    return q && q->via == relay && !q->dead ? q : NULL;
}

/* A rank's JOIN through the relay: a virtual peer for it, then the flat job's JOIN. */
static void relayed_join(pt_coordinator *c, peer *relay, int32_t rank, const pt_ctl_msg *inner, int64_t now)
{
    peer *old = relayed_peer(c, relay, rank);
    if (old) /* the relay closed its connection and took a new one before saying so */
        kill_peer(c, old, now, "replaced by a new connection through its relay");
    peer *q = calloc(1, sizeof *q);
    if (!q || (c->peer_count == c->peer_cap &&
               !(c->peers = realloc(c->peers, (c->peer_cap = c->peer_cap ? c->peer_cap * 2 : 64) * sizeof *c->peers)))) {
        pt_ctl_logf(&c->cfg.log, "out of memory: not taking rank %d through its relay", rank);
        free(q);
        return;
    }
    pt_conn_init(&q->conn, -1, 0);
    q->kind = PEER_AGENT;
    q->via = relay;
    q->rank = -1;
    q->relayed_rank = rank;
    q->accepted_ns = q->last_heard_ns = now;
    /* What the relay saw of its local connection (a JOIN's connection fields), which it
     * vouches for as far as the coordinator vouches for the relay itself. */
    q->vouched = relay->vouched;
    q->cred_uid = inner->type == PT_CTL_JOIN ? inner->worker.uid : -1;
    q->cred_pid = inner->type == PT_CTL_JOIN ? inner->worker.conn_pid : -1;
    if (q->cred_pid > 0)
        snprintf(q->addr, sizeof q->addr, "pid %lld on node %d", (long long)q->cred_pid, relay->node_rank);
    else
        snprintf(q->addr, sizeof q->addr, "relay %.40s", relay->addr);
    q->via_next = relay->relayed;
    if (relay->relayed)
        relay->relayed->via_prev = q;
    relay->relayed = q;
    c->peers[c->peer_count++] = q;
    c->waiting_peers++;
    coord_on_agent_message(c, q, inner, now);
    if (q->rank < 0 && !q->dead)
        kill_peer(c, q, now, "its JOIN was refused");
}

/* The relay's merged heartbeats: each counts as its rank's own (the decoder checked every
 * entry's ranges); an entry for a rank the relay does not hold is ignored, as its frames. */
static void on_relay_beats(pt_coordinator *c, peer *relay, const pt_ctl_msg *m, int64_t now)
{
    for (size_t i = 0; i < pt_ctl_beat_count(m); i++) {
        pt_ctl_beat b = pt_ctl_beat_get(m, i);
        peer *q = b.rank < c->cfg.world_size ? relayed_peer(c, relay, b.rank) : NULL;
        if (!q || q->rank < 0)
            continue;
        q->last_heard_ns = now;
        on_heartbeat(c, b.rank, b.steps_done, b.mean_step_ns, b.stalled_ns, now - b.held_ns, now);
    }
}

void coord_on_relay_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    if (p->rank < 0) {
        if (m->type == PT_CTL_JOIN)
            on_relay_join(c, p, m, now);
        else
            coord_bad_frame(c, p, "a relay must say who it is (JOIN) first", now);
        return;
    }
    int32_t rank = m->relayed_rank;
    if ((m->type == PT_CTL_RELAYED || m->type == PT_CTL_RANK_LOST) && rank >= c->cfg.world_size) {
        coord_bad_frame(c, p, "the relay named a rank outside the job", now);
        return;
    }
    c->relay_frames++;
    if (m->type == PT_CTL_HEARTBEAT)
        return; /* the relay's own keepalive, with no rank to carry: being read was the point */
    if (m->type == PT_CTL_HEARTBEATS) {
        on_relay_beats(c, p, m, now);
        return;
    }
    if (m->type == PT_CTL_RANK_LOST) {
        peer *q = relayed_peer(c, p, rank);
        char text[PT_CTL_MAX_TEXT + 1];
        pt_ctl_copy_str(text, sizeof text, m->text);
        if (q)
            kill_peer(c, q, now, text);
        return;
    }
    if (m->type != PT_CTL_RELAYED) {
        coord_bad_frame(c, p, "a relay sent a message relays do not send", now);
        return;
    }
    /* The rank's own frame: checked as any agent's. The relay bound its connection to the
     * rank it JOINed as; a JOIN must name that rank. */
    pt_ctl_msg inner;
    pt_error err;
    ssize_t used = pt_ctl_decode(m->blob.data, m->blob.len, &inner, &err);
    if (used != (ssize_t)m->blob.len || inner.type < PT_CTL_JOIN || inner.type > PT_CTL_BYE ||
        (inner.type == PT_CTL_JOIN && inner.worker.rank != rank)) {
        char why[600];
        snprintf(why, sizeof why, "the relay sent a bad frame for rank %d: %.500s", rank,
                 used < 0 ? err.message : "not one agent message of that rank");
        coord_bad_frame(c, p, why, now);
        return;
    }
    if (inner.type == PT_CTL_JOIN) {
        relayed_join(c, p, rank, &inner, now);
        return;
    }
    peer *q = relayed_peer(c, p, rank);
    if (!q)
        return; /* refused, or replaced: nothing it says counts */
    q->last_heard_ns = now;
    coord_on_agent_message(c, q, &inner, now);
}

/* ---------------------------------------------------------------- control messages */

/* The user interrupted the CLI (Ctrl-C): its round ends now, on every worker, and the CLI
 * hears how many workers dropped a window. A CLI without a round hears the same with
 * round 0 (the round had not started, or ended as it asked). */
static void cancel_for_cli(pt_coordinator *c, peer *p, int64_t now)
{
    round *r = c->round && c->round->control == p ? c->round : NULL;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_ROUND_CANCELLED);
    m.progress = coord_progress_of(c);
    if (r) {
        m.round = r->id;
        m.progress.armed = coord_cancel_windows(c, r, now);
        pt_ctl_logf(&c->cfg.log, "round %u cancelled by its CLI; told %d workers to drop their windows", r->id,
                    m.progress.armed);
        c->round = NULL;
        coord_free_round(r);
    } else {
        m.progress.armed = 0;
    }
    coord_send_to(c, p, &m, now);
}

/* Workers still finishing a cancelled round's window would refuse an ARM: a trigger now
 * hears BUSY, with who and for about how long, instead of a round of refusals. */
static bool reply_busy(pt_coordinator *c, peer *p, int64_t now)
{
    int32_t draining = 0, first = -1;
    uint32_t round_id = 0;
    int64_t wait_ns = 0, since_ns = 0;
    for (int32_t i = 0; i < c->cfg.world_size; i++) {
        worker *w = &c->workers[i];
        if (!w->draining_round)
            continue;
        if (!w->peer || now >= w->drain_until_ns) {
            w->draining_round = 0; /* gone, or past any window's end: believe it free */
            continue;
        }
        if (first < 0)
            first = i, round_id = w->draining_round, since_ns = now - w->cancelled_ns;
        draining++;
        double steps = (double)PT_MAX(w->drain_end_step - w->steps_done, 1);
        int64_t estimate = (int64_t)PT_MIN(steps * (double)PT_MAX(w->mean_step_ns, 0), (double)DRAIN_BOUND_NS) + SEC;
        wait_ns = PT_MAX(wait_ns, PT_MIN(estimate, w->drain_until_ns - now));
    }
    if (!draining)
        return false;
    char text[320];
    snprintf(text, sizeof text, "%d worker%s (rank %d%s) still finish%s the window of round %u, cancelled %.0f s "
             "ago, and would refuse a new one: it ends at %s next step, about %.0f s from now", (int)draining,
             draining == 1 ? "" : "s", (int)first, draining > 1 ? " and others" : "", draining == 1 ? "es" : "",
             round_id, (double)since_ns / 1e9, draining == 1 ? "its" : "their", (double)wait_ns / 1e9);
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_BUSY);
    m.text = pt_ctl_str(text);
    m.timeout_ms = PT_MAX(wait_ns / MS, 1);
    coord_send_to(c, p, &m, now);
    return true;
}

void coord_on_control_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    if (m->type == PT_CTL_CANCEL_ROUND) {
        cancel_for_cli(c, p, now);
        return;
    }
    if (m->type != PT_CTL_TRIGGER)
        return;
    char text[256];
    if (!c->round && reply_busy(c, p, now))
        return;
    if (c->round) {
        snprintf(text, sizeof text, "round %u is still running (started %.0f s ago); try again when it ends",
                 c->round->id, (double)(now - c->round->started_ns) / 1e9);
        coord_reply_error(c, p, text, now);
        return;
    }
    round *r = coord_new_round(c, ROUND_TRIGGERED, now);
    if (!r) {
        coord_reply_error(c, p, "the coordinator is out of memory", now);
        return;
    }
    r->control = p;
    r->wait = m->wait, r->steps = m->steps, r->save_raw = m->save_raw;
    r->timeout_ns = m->timeout_ms * MS; /* at most a week: the decoder checked it */
    pt_ctl_copy_str(r->raw_dir, sizeof r->raw_dir, m->path);
    r->gathering = true;
    r->gather_until_ns = now + c->cfg.join_grace_ns;
    c->round = r;
    coord_end_gathering(c, r, now); /* begins at once when everyone is here */
}
