/* coord_round.c -- a round, from TRIGGER (or an agent's AUTO_REQUEST, or a hang report)
 * to its end: the start step, ARM and PROBE for each worker, its outcome (summary or
 * failure, relayed to the CLI or collected into the automatic round's report), the
 * deadline that settles whoever is left, and CANCEL for windows a finished round leaves
 * open. coordinator.c's design comment describes the state machine. */
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

/* ---------------------------------------------------------------- round output */

bool coord_terminal(const round_worker *rw)
{
    return rw->state == RW_DONE || rw->state == RW_FAILED;
}

/* A worker's last snapshot while it is current (it made no step since): a hang's, or,
 * with collectives, that of a worker whose collective had just failed. */
static const snapshot *current_snapshot(const worker *w, bool hang)
{
    return w->snap.taken && w->snap.steps_done == w->steps_done && (hang || w->snap.collectives) ? &w->snap : NULL;
}

static pt_round_snapshot shown_snapshot(const snapshot *snap)
{
    return (pt_round_snapshot){snap ? snap->stack : NULL, snap ? snap->threads : NULL,
                               snap ? snap->collectives : NULL, snap ? snap->since_step_ns : 0,
                               snap ? snap->mean_step_ns : 0};
}

void coord_emit_failure(pt_coordinator *c, int32_t rank, int kind, const char *text, int64_t now)
{
    round *r = c->round;
    const worker *w = &c->workers[rank];
    r->w[rank].state = RW_FAILED;
    r->progress_dirty = true;
    const snapshot *snap = current_snapshot(w, kind == PT_FAIL_HANG); /* goes with it */
    pt_round_snapshot shown = shown_snapshot(snap);
    int64_t steps = w->ever_joined ? pt_step_count(w->steps_done) : -1;
    pt_ctl_worker id = coord_identity_of(c, rank);
    bool answered_probe = kind == PT_FAIL_HANG && r->kind == ROUND_HANG_REPORT && w->stalled_ns == 0;
    if (kind != PT_FAIL_NEVER_CONNECTED && kind != PT_FAIL_NOT_PROFILED && !answered_probe)
        pt_ctl_logf(&c->cfg.log, "round %u: rank %d %s%s%s", r->id, rank, pt_ctl_failure_name(kind), *text ? ": " : "",
                    text);
    if (r->local) {
        pt_round_add_failure(r->local, &id, kind, steps, w->stalled_ns, text, snap ? &shown : NULL);
        return;
    }
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_WORKER_FAILED);
    m.worker = id;
    m.kind = (uint8_t)kind;
    m.steps_done = steps;
    m.stalled_ns = w->stalled_ns;
    m.text = pt_ctl_str(text);
    m.stack = pt_ctl_str(shown.stack);
    m.threads = pt_ctl_str(shown.threads);
    m.collectives = pt_ctl_str(shown.collectives);
    m.since_step_ns = snap ? snap->since_step_ns : 0;
    m.mean_step_ns = snap ? snap->mean_step_ns : 0;
    coord_send_to(c, r->control, &m, now);
}

void coord_emit_summary(pt_coordinator *c, int32_t rank, const pt_ctl_msg *summary, int64_t now)
{
    round *r = c->round;
    r->w[rank].state = RW_DONE;
    r->progress_dirty = true;
    pt_ctl_worker id = coord_identity_of(c, rank);
    /* A worker that sent its collectives since its last step ended its window because one
     * failed (the agent sends them as the error comes, before the window): they go with
     * the summary, whose trace saw the call but not its error. */
    const snapshot *snap = current_snapshot(&c->workers[rank], false);
    pt_round_snapshot shown = shown_snapshot(snap);
    if (r->local) {
        char path[PT_CTL_MAX_PATH];
        pt_ctl_copy_str(path, sizeof path, summary->path);
        pt_error err;
        if (pt_round_add_summary(r->local, &id, path, summary->blob.data, summary->blob.len, snap ? &shown : NULL,
                                 &err) < 0)
            pt_ctl_logf(&c->cfg.log, "round %u: rank %d sent a bad summary: %s", r->id, rank, err.message);
        return;
    }
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_WORKER_SUMMARY);
    m.worker = id;
    m.path = summary->path;
    m.blob = summary->blob;
    m.threads = pt_ctl_str(shown.threads);
    m.collectives = pt_ctl_str(shown.collectives);
    m.since_step_ns = shown.since_step_ns;
    coord_send_to(c, r->control, &m, now);
}

/* Where a worker is on the round's scale of steps, as the CLI shows it (the count in the
 * round's step source: util/step_number.h): its steps since its own start step, from the
 * round's. A worker past its window (its summary here, or its steps beyond the window's
 * last) has profiled every step, whatever its last heartbeat said: a summary can arrive
 * before the heartbeat that shows the last step, and "traces written" must never run ahead
 * of "steps profiled". */
static int64_t shown_position(const round *r, const round_worker *rw, const worker *w)
{
    int64_t at = w->steps_done - rw->start_step + r->start_step;
    if (rw->window_over || rw->state == RW_DONE)
        at = PT_MAX(at, r->start_step + r->steps);
    int64_t shown = at - (r->start_step - pt_step_count(r->start_step));
    return PT_MIN(PT_MAX(shown, 0), PT_CTL_MAX_STEP);
}

pt_ctl_progress coord_progress_of(const pt_coordinator *c)
{
    const round *r = c->round;
    pt_ctl_progress p = {c->cfg.world_size, 0, 0, 0, -1, -1, 0, 0, 0, 0};
    for (int32_t i = 0; i < c->cfg.world_size; i++) {
        const worker *w = &c->workers[i];
        const round_worker *rw = r ? &r->w[i] : NULL;
        if (w->peer && w->peer->kind == PEER_AGENT)
            p.connected++;
        if (!rw)
            continue;
        if (rw->acked)
            p.armed++;
        if (rw->acked && w->steps_done >= rw->start_step)
            p.in_window++;
        if (rw->arm_sent && w->ever_joined) {
            int64_t at = shown_position(r, rw, w);
            p.min_step = p.min_step < 0 ? at : PT_MIN(p.min_step, at);
            p.max_step = PT_MAX(p.max_step, at);
        }
        if (rw->window_over || rw->state == RW_DONE)
            p.traces_written++;
        p.summaries += rw->state == RW_DONE;
        p.failed += rw->state == RW_FAILED || rw->state == RW_HUNG;
        p.hung += rw->state == RW_HUNG;
    }
    if (r && r->kind == ROUND_HANG_REPORT)
        p.summaries = 0; /* nothing is profiled */
    return p;
}

static void send_progress(pt_coordinator *c, int64_t now, bool force)
{
    round *r = c->round;
    if (!r || !r->control)
        return;
    if (!force && !(r->progress_dirty && now - r->progress_sent_ns >= PROGRESS_MIN_NS) &&
        now - r->progress_sent_ns < KEEPALIVE_NS)
        return;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_PROGRESS);
    m.progress = coord_progress_of(c);
    coord_send_to(c, r->control, &m, now);
    r->progress_dirty = false;
    r->progress_sent_ns = now;
}

/* ---------------------------------------------------------------- round state machine */

static void send_arm(pt_coordinator *c, int32_t rank, int64_t now)
{
    round *r = c->round;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_ARM);
    m.round = r->id;
    m.start_step = r->start_step;
    m.steps = r->steps;
    r->w[rank].start_step = r->start_step;
    bool keep = r->save_raw == PT_SAVE_RAW_ALL || (r->save_raw == PT_SAVE_RAW_MASTER && rank == 0);
    m.path = pt_ctl_str(keep ? r->raw_dir : "");
    r->w[rank].arm_sent = true;
    r->w[rank].state = RW_ARMED; /* before sending: a failed send settles it as died */
    coord_queue_to(c, c->workers[rank].peer, &m, false, now);
}

/* Asks every connected worker where it is, now: the snapshots a hang is judged from are
 * taken at one moment, from the workers that stopped and from those still stepping. */
static void probe_all(pt_coordinator *c, round *r, int64_t now)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_PROBE);
    m.round = r->id;
    r->probed = true;
    for (int32_t i = 0; i < c->cfg.world_size && c->round == r; i++)
        if (c->workers[i].peer && !coord_terminal(&r->w[i]))
            coord_queue_to(c, c->workers[i].peer, &m, false, now); /* like the ARMs: one write per relay */
}

/* A worker said something about where it is: move it along the round. */
void coord_advance_worker(pt_coordinator *c, int32_t rank, int64_t now)
{
    round *r = c->round;
    if (!r)
        return;
    round_worker *rw = &r->w[rank];
    const worker *w = &c->workers[rank];
    if (coord_terminal(rw) || !w->peer || r->abandoned || r->gathering)
        return;
    r->progress_dirty = true;
    if (w->stalled_ns > 0) { /* the agent says it is stuck */
        rw->state = RW_HUNG;
        if (!r->probed && r->kind != ROUND_HANG_REPORT)
            probe_all(c, r, now);
        return;
    }
    if (rw->state == RW_HUNG)
        rw->state = rw->arm_sent ? RW_ARMED : RW_PENDING; /* it moved again */
    if (r->kind == ROUND_HANG_REPORT)
        return;
    if (!rw->arm_sent) {
        if (w->steps_done <= r->start_step) { /* at start_step: it starts at the next step */
            send_arm(c, rank, now);
        } else {
            char text[160];
            snprintf(text, sizeof text, "joined at step %lld, after the window (step %lld) began",
                     (long long)pt_step_count(w->steps_done), (long long)pt_step_count(r->start_step));
            coord_emit_failure(c, rank, PT_FAIL_NOT_REACHED, text, now);
        }
        return;
    }
    if (rw->acked && !rw->window_over && w->steps_done >= rw->start_step + r->steps) {
        rw->window_over = true;
        rw->window_over_ns = now;
    }
}

static int64_t default_deadline_ns(const pt_coordinator *c, int32_t wait, int32_t steps)
{
    int64_t step = 0;
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        step = PT_MAX(step, c->workers[i].mean_step_ns);
    if (step <= 0)
        step = SEC;
    /* In double: a worker may report a step of up to 30 days (the protocol's bound), and a
     * --wait of a million steps of that overflows 64 bits. */
    double expected = 4.0 * (double)(wait + steps + 2) * (double)step;
    int64_t bounded = expected < (double)PT_CTL_MAX_DURATION_NS ? (int64_t)expected : PT_CTL_MAX_DURATION_NS;
    return PT_MAX(bounded, 60 * SEC) + c->cfg.summary_timeout_ns;
}

round *coord_new_round(pt_coordinator *c, enum round_kind kind, int64_t now)
{
    round *r = calloc(1, sizeof *r);
    round_worker *w = calloc((size_t)c->cfg.world_size, sizeof *w);
    if (!r || !w) {
        free(r), free(w);
        return NULL;
    }
    r->id = ++c->next_round_id;
    r->kind = kind;
    r->w = w;
    r->started_ns = now;
    r->progress_dirty = true;
    return r;
}

void coord_free_round(round *r)
{
    if (!r)
        return;
    pt_round_free(r->local);
    free(r->w);
    free(r);
}

/* Where a worker is now: its last report plus the steps its mean step time says it made
 * since (heartbeats are a second apart; a fast job makes many steps in a second, and a
 * start step computed from stale counts would already be past when the ARM arrives) --
 * when it is still stepping: a worker whose count did not move between two heartbeats
 * is stuck (or in a step longer than a heartbeat), and a job hung at step 14 must not be
 * promised a window at step 20 before its stall threshold has passed. */
static int64_t estimated_step(const worker *w, int64_t now)
{
    if (w->stalled_ns > 0 || !w->stepping || w->mean_step_ns <= 0 || now <= w->steps_heard_ns)
        return w->steps_done;
    return w->steps_done + (now - w->steps_heard_ns) / w->mean_step_ns;
}

static int32_t connected_agents(const pt_coordinator *c, int64_t now, int64_t *max_step)
{
    int32_t n = 0;
    *max_step = 0;
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        if (c->workers[i].peer) {
            n++;
            *max_step = PT_MAX(*max_step, estimated_step(&c->workers[i], now));
        }
    return n;
}

/* Starts a profiling round; every connected worker is armed as its next heartbeat (or
 * this call) shows it is still before the start step. */
void coord_begin_profiling(pt_coordinator *c, round *r, int32_t wait, int32_t steps, uint8_t save_raw,
                            const char *raw_dir, int64_t timeout_ns, int64_t now)
{
    int64_t max_step;
    int32_t connected = connected_agents(c, now, &max_step);
    r->wait = wait, r->steps = steps, r->save_raw = save_raw;
    r->start_step = PT_MIN(max_step + wait, PT_CTL_MAX_STEP); /* both bounded: no overflow */
    if (raw_dir != r->raw_dir)
        snprintf(r->raw_dir, sizeof r->raw_dir, "%s", raw_dir ? raw_dir : "");
    r->deadline_ns = now + (timeout_ns > 0 ? timeout_ns : default_deadline_ns(c, wait, steps));
    c->round = r;
    int64_t first = pt_step_count(r->start_step);
    pt_ctl_logf(&c->cfg.log, "round %u: profiling steps %lld..%lld on %d/%d connected workers%s", r->id,
                (long long)first, (long long)(first + steps - 1), connected, c->cfg.world_size,
                r->kind == ROUND_AUTO ? " (automatic)" : "");
    if (r->control) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_ROUND_STARTED);
        m.round = r->id;
        m.start_step = first; /* the CLI shows counts; PROGRESS's positions are on the same scale */
        m.steps = steps;
        m.progress = coord_progress_of(c);
        coord_send_to(c, r->control, &m, now);
    }
    for (int32_t i = 0; i < c->cfg.world_size && c->round == r; i++)
        if (c->workers[i].peer)
            coord_advance_worker(c, i, now);
}

void coord_begin_hang_report(pt_coordinator *c, round *r, int64_t now)
{
    r->deadline_ns = now + c->cfg.probe_timeout_ns;
    c->round = r;
    pt_ctl_logf(&c->cfg.log, "round %u: hang report, asking every worker where it is", r->id);
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        if (c->workers[i].peer)
            r->w[i].arm_sent = true;
    probe_all(c, r, now);
}


/* A trigger that arrives while workers are still joining (the job just started) waits
 * for them a little, so the start step is computed over everyone. */
void coord_end_gathering(pt_coordinator *c, round *r, int64_t now)
{
    int64_t max_step;
    int32_t connected = connected_agents(c, now, &max_step);
    if (connected < c->cfg.world_size && now < r->gather_until_ns) {
        if (r->control && now - r->progress_sent_ns >= KEEPALIVE_NS) {
            pt_ctl_msg m;
            pt_ctl_msg_init(&m, PT_CTL_PROGRESS);
            m.progress = coord_progress_of(c);
            coord_send_to(c, r->control, &m, now);
            r->progress_sent_ns = now;
        }
        return;
    }
    r->gathering = false;
    if (connected == 0) {
        coord_reply_error(c, r->control, "no worker of the job is connected to the coordinator (is the training running "
                    "with PerfTracker()?)", now);
        c->round = NULL;
        coord_free_round(r);
        return;
    }
    coord_begin_profiling(c, r, r->wait, r->steps, r->save_raw, r->raw_dir, r->timeout_ns, now);
}


/* The round ends before its windows do (cancelled by the user, its CLI gone, or past its
 * deadline): every worker still armed is told to drop its window, and drains (see
 * worker.draining_round) meanwhile. Returns how many were told. */
int32_t coord_cancel_windows(pt_coordinator *c, round *r, int64_t now)
{
    if (r->kind == ROUND_HANG_REPORT)
        return 0; /* it armed nothing */
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_CANCEL);
    m.round = r->id;
    int32_t told = 0;
    for (int32_t i = 0; i < c->cfg.world_size; i++) {
        worker *w = &c->workers[i];
        const round_worker *rw = &r->w[i];
        if (!rw->arm_sent || (rw->state != RW_ARMED && rw->state != RW_HUNG) || !w->peer)
            continue;
        coord_send_to(c, w->peer, &m, now);
        told++;
        if (rw->state == RW_HUNG || w->stalled_ns > 0)
            continue; /* stuck: its window ends when it moves again, and a new round finds the hang */
        w->draining_round = r->id;
        w->cancelled_ns = now;
        w->drain_end_step = PT_MIN(w->steps_done + 1, PT_CTL_MAX_STEP);
        /* In double: steps and step times are each bounded, their product is not. */
        double left = (double)PT_MAX(rw->start_step + r->steps - w->steps_done, 1) + 1;
        double bound = (double)DRAIN_BOUND_NS + left * (double)PT_MAX(w->mean_step_ns, 0);
        w->drain_until_ns = now + (int64_t)PT_MIN(bound, (double)PT_CTL_MAX_DURATION_NS);
    }
    return told;
}

/* Settles whoever is left and hands the round over (relay or local report). */
/* Every connection refused for who it was since the job started goes into the round's
 * report: an attempt on the job is the user's to know, whichever round follows it. */
static void tell_notices(pt_coordinator *c, round *r, int64_t now)
{
    char line[PT_CTL_MAX_TEXT];
    for (size_t i = 0; i < pt_notices_lines(&c->notices); i++) {
        pt_notices_line(&c->notices, i, line, sizeof line);
        if (r->control) {
            pt_ctl_msg m;
            pt_ctl_msg_init(&m, PT_CTL_NOTICE);
            m.text = pt_ctl_str(line);
            coord_send_to(c, r->control, &m, now);
        }
        if (r->local)
            pt_round_add_warning(r->local, "security: %s", line);
    }
}

void coord_finish_round(pt_coordinator *c, int64_t now)
{
    round *r = c->round;
    int32_t hung = 0;
    int32_t cancelled = coord_cancel_windows(c, r, now); /* whoever is still armed will not be waited for */
    if (cancelled)
        pt_ctl_logf(&c->cfg.log, "round %u: told %d workers still in the window to drop it", r->id, cancelled);
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        hung += r->w[i].state == RW_HUNG;
    for (int32_t i = 0; i < c->cfg.world_size; i++) {
        round_worker *rw = &r->w[i];
        const worker *w = &c->workers[i];
        if (coord_terminal(rw))
            continue;
        if (rw->state == RW_HUNG)
            coord_emit_failure(c, i, PT_FAIL_HANG, "", now);
        else if (!w->ever_joined)
            coord_emit_failure(c, i, PT_FAIL_NEVER_CONNECTED, "", now);
        else if (!rw->arm_sent)
            coord_emit_failure(c, i, w->exited ? PT_FAIL_EXITED : PT_FAIL_DIED,
                         w->peer ? "" : "disconnected before the round", now);
        else if (r->kind == ROUND_HANG_REPORT)
            coord_emit_failure(c, i, PT_FAIL_UNRESPONSIVE, "did not answer the hang probe", now);
        else if (rw->window_over)
            coord_emit_failure(c, i, PT_FAIL_NO_SUMMARY, "the window ended but no summary arrived in time", now);
        else {
            char text[160];
            int64_t first = pt_step_count(rw->start_step);
            snprintf(text, sizeof text, "at step %lld when the round timed out (window: steps %lld..%lld)",
                     (long long)pt_step_count(w->steps_done), (long long)first, (long long)(first + r->steps - 1));
            coord_emit_failure(c, i, PT_FAIL_NOT_REACHED, text, now);
        }
    }
    pt_ctl_progress progress = coord_progress_of(c);
    progress.hung = hung; /* settled as failures above, but still hangs */
    pt_ctl_logf(&c->cfg.log, "round %u finished: %d summaries, %d failed (%d hung)", r->id, progress.summaries,
                progress.failed, hung);
    tell_notices(c, r, now);
    if (r->control) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_ROUND_DONE);
        m.round = r->id;
        m.progress = progress;
        coord_send_to(c, r->control, &m, now);
    }
    if (r->local) {
        pt_error err;
        pt_json *report = pt_round_report(r->local, &err);
        bool discarded = !report && pt_round_nothing_to_diagnose(r->local, NULL);
        if (discarded) /* no report: leave no empty round folder either */
            pt_round_discard(r->local, pt_round_dir(r->local));
        if (report)
            pt_ctl_logf(&c->cfg.log, "automatic round %u: report in %s/PerfDisplay/ (verdict: %s)", r->id,
                        pt_round_dir(r->local),
                        pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", "?"));
        else
            pt_ctl_logf(&c->cfg.log, "automatic round %u: no report: %s", r->id, err.message);
        pt_json_free(report);
        pthread_mutex_lock(&c->stats_lock);
        if (!discarded)
            snprintf(c->stats.last_report_dir, sizeof c->stats.last_report_dir, "%s", pt_round_dir(r->local));
        c->stats.auto_rounds++;
        pthread_mutex_unlock(&c->stats_lock);
    }
    pthread_mutex_lock(&c->stats_lock);
    c->stats.rounds_finished++;
    pthread_mutex_unlock(&c->stats_lock);
    c->round = NULL;
    coord_free_round(r);
}

void coord_check_round(pt_coordinator *c, int64_t now)
{
    round *r = c->round;
    if (!r)
        return;
    if (r->abandoned) { /* its CLI went away without a word (killed): cancel it as if it had asked */
        int32_t told = coord_cancel_windows(c, r, now);
        pt_ctl_logf(&c->cfg.log, "round %u cancelled: its CLI went away; told %d workers to drop their windows",
                    r->id, told);
        c->round = NULL;
        coord_free_round(r);
        return;
    }
    if (r->gathering) {
        coord_end_gathering(c, r, now);
        return;
    }
    bool settled = true;
    for (int32_t i = 0; i < c->cfg.world_size && c->round == r; i++) {
        round_worker *rw = &r->w[i];
        if (coord_terminal(rw) || rw->state == RW_HUNG)
            continue;
        if (!rw->arm_sent && !c->workers[i].peer)
            continue; /* absent: settled unless it joins */
        if (rw->window_over && now - rw->window_over_ns > c->cfg.summary_timeout_ns) {
            coord_emit_failure(c, i, PT_FAIL_NO_SUMMARY, "the window ended but no summary arrived in time", now);
            continue;
        }
        settled = false;
    }
    if (c->round == r && (settled || now >= r->deadline_ns))
        coord_finish_round(c, now);
    else if (c->round == r)
        send_progress(c, now, false);
}
