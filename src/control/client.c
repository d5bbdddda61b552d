/* client.c -- the CLI's side of a round: connect, authenticate, trigger, collect, report.
 *
 * One blocking connection driven by poll(). The coordinator sends progress at least once
 * a second, so 30 s of silence means it is gone; the round then ends with what arrived
 * (every summary is already on disk) and the rest counted as missing.
 *
 * The coordinator is found through a job file of this user's and proves the key, yet it
 * is another process, and a buggy or hostile one must not make the CLI run forever or
 * exhaust the machine. The decoder (protocol.c) holds every field to its range -- world
 * sizes and ranks to 2^20, steps, durations --, so a message that decodes needs no more
 * checks of its own; one that does not is the coordinator breaking the protocol: the CLI
 * stops reading it there and says which field and range (before the round starts, the
 * round is refused). What the decoder cannot know is the round (round_guard below): an
 * outcome for a rank outside the round's world, or for a rank already settled, is
 * ignored and counted; a window other than the one asked refuses the round; summaries
 * together may take at most 2 GiB; counters are clamped to the round's world size; the
 * wait for workers to join and the round itself end at limits derived from --timeout.
 * Memory: the decoded summaries, which the diagnosis needs anyway -- at most one per
 * rank.
 *
 * Interrupted (the caller's flag, set by its signal handler), the CLI sends CANCEL_ROUND,
 * waits at most 5 s for ROUND_CANCELLED and removes the round folder. Told BUSY (workers
 * still drop a cancelled round's window), it waits and asks again for at most 2 minutes.
 * A round in which no worker has anything to diagnose writes no report (round.h). */
#define _POSIX_C_SOURCE 200809L
#include "control/client.h"
#include "control/discover.h"
#include "control/net.h"
#include "control/round.h"
#include "summarize/summary.h"
#include "util/phase.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 3000
#define HANDSHAKE_TIMEOUT_MS 10000
#define SILENCE_LIMIT_MS 30000
#define SEC_NS 1000000000LL
/* Limits on what a coordinator may make the CLI do (see the top of this file). */
#define ROUND_SUMMARY_BYTES_MAX (2ull << 30)
#define GATHER_LIMIT_NS ((3600 + 60) * SEC_NS) /* PERFTRACKER_JOIN_GRACE_S is at most 3600 */
#define ROUND_SLACK_NS (30 * SEC_NS)           /* after the round's deadline, for its last messages */
#define ROUND_LIMIT_DEFAULT_NS (7 * 86400 * SEC_NS) /* without --timeout: the longest --timeout */
/* A round's world size, decoded, sizes its records (round.c). */
_Static_assert(PT_CTL_MAX_WORLD <= PT_MAX_WORLD_SIZE, "the decoder admits worlds the round cannot hold");

/* receive()'s answer when the coordinator sent bytes the decoder refuses. */
#define INVALID_MESSAGE (-2)
/* receive()'s answer when the user interrupted the CLI. */
#define INTERRUPTED (-3)
#define CANCEL_CONFIRM_MS 5000
#define BUSY_WAIT_MAX_S 120

static bool interrupted(const volatile sig_atomic_t *flag)
{
    return flag && *flag;
}

/* Waits up to timeout_ms for the next message: 1, 0 (timeout), -1 (closed or failed;
 * err), INVALID_MESSAGE (err: the decoder's reason, naming the message, the field and its
 * range), INTERRUPTED (*stop was set; a signal ends the wait at once). */
static int receive(pt_conn *c, pt_ctl_msg *m, int timeout_ms, const volatile sig_atomic_t *stop, pt_error *err)
{
    int64_t deadline = pt_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        if (interrupted(stop))
            return INTERRUPTED;
        int got = pt_conn_next(c, m, err);
        if (got < 0)
            return INVALID_MESSAGE;
        if (got > 0)
            return got;
        int64_t left = (deadline - pt_now_ns()) / 1000000;
        if (left <= 0)
            return 0;
        struct pollfd p = {c->fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno != EINTR) {
            pt_error_set(err, "poll: %s", strerror(errno));
            return -1;
        }
        if (rc > 0 && pt_conn_read(c, err) < 0)
            return -1;
    }
}

static int send_all(pt_conn *c, const pt_ctl_msg *m, pt_error *err)
{
    if (pt_conn_send(c, m, err) != 0)
        return -1;
    while (pt_conn_pending(c) > 0) {
        if (pt_conn_flush(c, err) != 0)
            return -1;
        struct pollfd p = {c->fd, POLLOUT, 0};
        if (pt_conn_pending(c) > 0 && poll(&p, 1, 1000) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

/* Which job, where to reach it, and where its control key is. */
typedef struct target {
    pt_job_env env;            /* coordinator_host/port name the job (key file name, messages) */
    char connect_host[PT_HOST_MAX];
    char key_file[PT_RUNTIME_PATH_MAX]; /* from a job file; "" = the secret or the env's key file */
    bool registered;           /* found through a job file */
    bool from_flag;            /* named by --coordinator */
    int64_t pid;               /* rank 0's, when registered */
} target;

static void set_hint(pt_trigger_result *out, const pt_buf *lines)
{
    snprintf(out->hint, sizeof out->hint, "%s", lines->len ? lines->data : "");
}

static void target_from_record(target *t, const pt_job_record *r)
{
    memset(t, 0, sizeof *t);
    t->env.master_port = r->master_port;
    t->env.world_size = r->world_size;
    snprintf(t->env.master_addr, sizeof t->env.master_addr, "%s", r->master_addr);
    snprintf(t->env.coordinator_host, sizeof t->env.coordinator_host, "%s", r->coordinator_host);
    t->env.coordinator_port = r->port;
    snprintf(t->connect_host, sizeof t->connect_host, "%s", r->connect_host);
    snprintf(t->key_file, sizeof t->key_file, "%s", r->key_file);
    t->registered = true;
    t->pid = r->pid;
}

static int target_from_flag(target *t, const char *spec, pt_error *err)
{
    memset(t, 0, sizeof *t);
    const char *colon = strrchr(spec, ':');
    long port = colon ? strtol(colon + 1, NULL, 10) : 0;
    if (!colon || colon == spec || port <= 0 || port > 65535 ||
        (size_t)(colon - spec) >= sizeof t->env.coordinator_host) {
        pt_error_set(err, "--coordinator wants host:port, not '%s'", spec);
        return -1;
    }
    snprintf(t->env.coordinator_host, sizeof t->env.coordinator_host, "%.*s", (int)(colon - spec), spec);
    t->env.coordinator_port = (uint16_t)port;
    snprintf(t->connect_host, sizeof t->connect_host, "%s", t->env.coordinator_host);
    t->from_flag = true;
    return 0;
}

/* No job file names the job: say so, and what was found instead. */
static int no_job_found(const pt_job_list *jobs, pt_trigger_result *out, pt_error *err)
{
    pt_error_set(err, "no running job found: no job has registered in %s (a job's rank 0 does when it runs under "
                 "`perftracker run` or its training script constructs PerfTracker())", jobs->dir);
    pt_buf lines = PT_BUF_INIT;
    pt_jobs_explain(jobs, &lines);
    if (lines.len == 0)
        pt_buf_puts(&lines, "no process of this user here is a worker of a distributed job (RANK and MASTER_PORT "
                            "in its environment). Start the training under `perftracker run` (perftracker run "
                            "python3 train.py: no change to the script), or with PerfTracker() in its script and "
                            "perftracker importable there; this shell needs nothing else.\n");
    set_hint(out, &lines);
    pt_buf_free(&lines);
    return -1;
}

/* The job to trigger: --coordinator; else the job files (the one running job, or the one
 * --job or this shell's MASTER_ADDR/MASTER_PORT picks); else the environment alone, as
 * before job files existed (a job whose rank 0 publishes elsewhere, PERFTRACKER_SECRET). */
static int find_job(const pt_trigger_request *req, target *t, pt_trigger_result *out, pt_error *err)
{
    if (req->coordinator)
        return target_from_flag(t, req->coordinator, err);
    pt_job_env env;
    pt_error env_err;
    int env_rc = pt_job_env_read(&env, false, &env_err);
    pt_job_list jobs;
    pt_jobs_list(&jobs);
    const pt_job_record *picked = NULL;
    int rc = 0;
    if (req->job) {
        picked = pt_jobs_find(&jobs, req->job);
        if (!picked) {
            pt_buf lines = PT_BUF_INIT;
            if (jobs.count)
                pt_jobs_format(&jobs, &lines);
            set_hint(out, &lines);
            pt_buf_free(&lines);
            pt_error_set(err, "no running job has the ID %s (%zu running: `perftracker jobs` lists them)", req->job,
                         jobs.count);
            rc = -1;
        }
    } else if (jobs.count == 1) {
        picked = &jobs.jobs[0];
    } else if (jobs.count > 1) {
        picked = env_rc >= 0 ? pt_jobs_match_env(&jobs, &env) : NULL; /* MASTER_PORT alone will do */
        if (!picked) {
            pt_buf lines = PT_BUF_INIT;
            pt_jobs_format(&jobs, &lines);
            set_hint(out, &lines);
            pt_buf_free(&lines);
            pt_error_set(err, "%zu jobs are running on this machine; pick one with --job ID (the JOB column below)",
                         jobs.count);
            rc = -1;
        }
    } else if (env_rc == 0) {
        memset(t, 0, sizeof *t);
        t->env = env;
        snprintf(t->connect_host, sizeof t->connect_host, "%s", env.coordinator_host);
    } else if (env_rc < 0) {
        pt_error_set(err, "%s", env_err.message);
        rc = -1;
    } else {
        rc = no_job_found(&jobs, out, err);
    }
    if (picked)
        target_from_record(t, picked);
    snprintf(out->notes, sizeof out->notes, "%s", jobs.notes ? jobs.notes : "");
    pt_job_list_free(&jobs);
    return rc;
}

/* Without a job file, a failed connection usually means there is no job with the
 * collector: say what MASTER_ADDR/MASTER_PORT pointed at, and what runs instead. */
static void explain_unreachable(const target *t, pt_error *err, pt_trigger_result *out)
{
    char why[256];
    snprintf(why, sizeof why, "%.250s", err->message);
    if (t->registered) {
        pt_error_set(err, "cannot reach the coordinator of the job rank 0 (pid %lld) registered, at %s:%u: %s",
                     (long long)t->pid, t->connect_host, (unsigned)t->env.coordinator_port, why);
        return;
    }
    if (t->from_flag) { /* the user's own address: no guess about the environment */
        pt_error_set(err, "no coordinator answers at %s:%u, the address --coordinator names (%s)",
                     t->env.coordinator_host, (unsigned)t->env.coordinator_port, why);
        pt_buf lines = PT_BUF_INIT;
        pt_buf_puts(&lines, "Check the address: rank 0's host, and the job's MASTER_PORT + 1 (or its "
                            "PERFTRACKER_PORT); `perftracker jobs` lists the jobs that registered here.\n");
        set_hint(out, &lines);
        pt_buf_free(&lines);
        return;
    }
    pt_error_set(err, "no running job found: nothing answers at %s:%u, where %s puts the job's coordinator (%s)",
                 t->env.coordinator_host, (unsigned)t->env.coordinator_port,
                 t->env.master_port > 0 ? "MASTER_ADDR/MASTER_PORT in this shell" : "the environment", why);
    pt_job_list jobs;
    pt_jobs_list(&jobs);
    pt_buf lines = PT_BUF_INIT;
    pt_jobs_explain(&jobs, &lines);
    pt_job_list_free(&jobs);
    if (lines.len == 0 && t->env.master_port > 0) {
        pt_error probe_err;
        int fd = pt_net_connect(t->connect_host, (uint16_t)t->env.master_port, CONNECT_TIMEOUT_MS, &probe_err);
        if (fd >= 0) {
            close(fd);
            pt_buf_printf(&lines, "something listens on MASTER_PORT %d (the job's rendezvous), so a job runs, but "
                                  "without the perftracker collector or with its coordinator elsewhere "
                                  "(PERFTRACKER_PORT)\n", (int)t->env.master_port);
        }
    }
    if (lines.len == 0)
        pt_buf_puts(&lines, "Is the training running, under `perftracker run` or with PerfTracker() in its training "
                            "script and perftracker importable there?\n");
    set_hint(out, &lines);
    pt_buf_free(&lines);
}

/* A single-node job's coordinator listens on loopback only: MASTER_ADDR first, then
 * 127.0.0.1 when MASTER_ADDR is one of ours. */
static int connect_to_job(target *t, char *name, size_t cap, pt_trigger_result *out, pt_error *err)
{
    uint16_t port = t->env.coordinator_port;
    int fd = pt_net_connect(t->connect_host, port, CONNECT_TIMEOUT_MS, err);
    if (fd < 0 && !t->registered && strcmp(t->connect_host, "127.0.0.1") != 0 &&
        pt_net_is_local_address(t->connect_host)) {
        pt_error first = *err;
        fd = pt_net_connect("127.0.0.1", port, CONNECT_TIMEOUT_MS, err);
        if (fd >= 0)
            snprintf(t->connect_host, sizeof t->connect_host, "127.0.0.1");
        else
            *err = first;
    }
    if (fd < 0)
        explain_unreachable(t, err, out);
    if (t->registered) /* say which job was picked, since nobody named it */
        snprintf(name, cap, "%s:%u (job %d, rank 0 is pid %lld)", t->connect_host, (unsigned)port,
                 t->env.master_port > 0 ? (int)t->env.master_port : (int)port, (long long)t->pid);
    else
        snprintf(name, cap, "%s:%u", t->connect_host, (unsigned)port);
    return fd;
}

static bool secret_configured(void)
{
    return pt_env_str("PERFTRACKER_SECRET", NULL) || pt_env_str("PERFTRACKER_SECRET_FILE", NULL);
}

/* A secret set in this shell wins, as it does for the job; else the key file the job file
 * names; else the key file the environment's coordinator address names. */
static int load_key(const target *t, const char *name, pt_key *key, pt_error *err)
{
    char why[300];
    if (t->key_file[0] && !secret_configured()) {
        if (pt_auth_read_key_file(t->key_file, key, err) == 0)
            return 0;
        snprintf(why, sizeof why, "%.290s", err->message);
        pt_error_set(err, "the job's coordinator answers at %s, but its key is not readable here (%s): run this as "
                     "the job's user", name, why);
        return -1;
    }
    if (t->registered && !t->key_file[0] && !secret_configured()) {
        pt_error_set(err, "the job at %s takes its keys from PERFTRACKER_SECRET (or PERFTRACKER_SECRET_FILE): set "
                     "the same in this shell", name);
        return -1;
    }
    if (pt_auth_load_control_key(&t->env, key, err) == 0)
        return 0;
    snprintf(why, sizeof why, "%.290s", err->message);
    pt_error_set(err, "the job's coordinator answers at %s, but this shell has no key for it (%s)", name, why);
    return -1;
}

/* " (the decoder's reason)" when receive() answered INVALID_MESSAGE, else "". */
static const char *invalid_detail(int got, const pt_error *err, char *buf, size_t cap)
{
    snprintf(buf, cap, got == INVALID_MESSAGE ? " (%.250s)" : "%.0s", err->message);
    return buf;
}

/* The handshake, in two halves around loading the key: the coordinator's greeting
 * proves it is one before we say that its key is missing. */
static int await_challenge(pt_conn *c, uint8_t server_nonce[PT_CTL_NONCE_BYTES], const char *name, pt_error *err)
{
    pt_ctl_msg m;
    int got = receive(c, &m, HANDSHAKE_TIMEOUT_MS, NULL, err);
    if (got <= 0 || m.type != PT_CTL_CHALLENGE || m.version != PT_CTL_VERSION) {
        char why[280];
        if (got != -1) /* else err says how the connection failed */
            pt_error_set(err, "the peer at %s did not greet like a perftracker coordinator%s", name,
                         invalid_detail(got, err, why, sizeof why));
        return -1;
    }
    memcpy(server_nonce, m.nonce, PT_CTL_NONCE_BYTES);
    return 0;
}

static int authenticate(pt_conn *c, const pt_key *key, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                        pt_error *err)
{
    pt_ctl_msg m;
    pt_ctl_msg auth;
    pt_ctl_msg_init(&auth, PT_CTL_AUTH);
    auth.role = PT_CTL_ROLE_CONTROL;
    if (pt_random_bytes(auth.nonce, sizeof auth.nonce, err) != 0)
        return -1;
    pt_auth_client_proof(key, PT_CTL_ROLE_CONTROL, server_nonce, auth.nonce, auth.mac);
    uint8_t client_nonce[PT_CTL_NONCE_BYTES];
    memcpy(client_nonce, auth.nonce, sizeof client_nonce);
    if (send_all(c, &auth, err) != 0)
        return -1;
    int got = receive(c, &m, HANDSHAKE_TIMEOUT_MS, NULL, err);
    if (got > 0 && m.type == PT_CTL_REFUSED) {
        char why[256];
        pt_ctl_copy_str(why, sizeof why, m.text);
        pt_error_set(err, "the coordinator refused this CLI: %s (key from %s)", why, key->source);
        return -1;
    }
    uint8_t expected[PT_SHA256_BYTES];
    pt_auth_server_proof(key, PT_CTL_ROLE_CONTROL, server_nonce, client_nonce, expected);
    if (got <= 0 || m.type != PT_CTL_WELCOME || !pt_equal_ct(expected, m.mac, sizeof expected)) {
        char why[280];
        if (got != -1) /* else err says how the connection failed */
            pt_error_set(err, "the coordinator could not prove it holds the job's key%s",
                         invalid_detail(got, err, why, sizeof why));
        return -1;
    }
    return 0;
}

static void worker_event(const pt_trigger_observer *obs, const pt_ctl_msg *m, int kind, int32_t steps)
{
    if (!obs || !obs->worker)
        return;
    char host[PT_HOST_MAX], text[PT_CTL_MAX_TEXT + 1], path[PT_CTL_MAX_PATH];
    pt_ctl_copy_str(host, sizeof host, m->worker.host);
    pt_ctl_copy_str(text, sizeof text, kind ? m->text : (pt_ctl_bytes){NULL, 0});
    pt_ctl_copy_str(path, sizeof path, kind ? (pt_ctl_bytes){NULL, 0} : m->path);
    pt_trigger_worker_event e = {m->worker.rank, host, m->worker.pid, kind, text, path, steps};
    obs->worker(obs->ctx, &e);
}

/* The coordinator lives in rank 0's process: when it goes away (or the CLI stops reading
 * it), every worker whose outcome had not arrived -- rank 0 first of all -- is named,
 * never silently dropped: the first UNHEARD_NAMED one by one, the rest counted in one
 * warning (and left missing, which the report counts), so a lost job of a million
 * workers costs a pass over its ranks, not a million records. refused: the decoder's
 * reason when the CLI stopped at an invalid message, else NULL (the coordinator left). */
#define UNHEARD_NAMED 1000

static void name_the_unheard(pt_round *r, int32_t world_size, const char *refused, const pt_trigger_observer *obs)
{
    int64_t unnamed = 0;
    char stopped[PT_CTL_MAX_TEXT];
    snprintf(stopped, sizeof stopped, "the CLI stopped reading the job's coordinator, which sent an invalid message "
             "(%.3000s), before this worker's summary arrived", refused ? refused : "");
    for (int32_t rank = 0, named = 0; rank < world_size; rank++) {
        if (pt_round_has_rank(r, rank))
            continue;
        if (named++ >= UNHEARD_NAMED) {
            unnamed++;
            continue;
        }
        const char *text = refused     ? stopped
                           : rank == 0 ? "its process hosted the job's coordinator, which went away before its "
                                         "summary arrived (the process ended or died)"
                                       : "the job's coordinator (in rank 0's process) went away before this "
                                         "worker's summary arrived";
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_WORKER_FAILED);
        m.worker = (pt_ctl_worker){rank, -1, world_size, -1, -1, {NULL, 0}};
        m.kind = PT_FAIL_COORDINATOR_LOST;
        m.text = pt_ctl_str(text);
        pt_round_add_failure(r, &m.worker, m.kind, -1, 0, text, NULL);
        worker_event(obs, &m, m.kind, 0);
    }
    if (unnamed)
        pt_round_add_warning(r, "%lld more workers were not heard from before %s (missing, counted in "
                                "job.missing_count)", (long long)unnamed,
                             refused ? "the CLI stopped reading the coordinator" : "the coordinator went away");
}

/* What the CLI holds a coordinator to while a round runs. */
typedef struct round_guard {
    int64_t limit_ns;           /* give up at this time: first for the round to start, then to end */
    int64_t round_timeout_ns;   /* how long the round may run once started */
    int32_t steps_asked;
    uint64_t summary_bytes;     /* kept so far (ROUND_SUMMARY_BYTES_MAX) */
    uint64_t ignored;           /* outcomes for ranks outside the job or already settled */
    uint64_t foreign_workers;   /* outcomes whose connection is another user's */
    uint64_t notices;           /* NOTICEs taken (at most ROUND_NOTICES_MAX; the rest counted) */
} round_guard;

/* A coordinator sends a notice per kind of refused connection (trust.h: at most 17): a
 * bound, so that a hostile one cannot flood the report and the terminal. */
#define ROUND_NOTICES_MAX 64

static void guard_init(round_guard *g, const pt_trigger_request *req, int64_t now)
{
    memset(g, 0, sizeof *g);
    g->steps_asked = req->steps;
    g->round_timeout_ns = (req->timeout_ms > 0 ? req->timeout_ms * 1000000 : ROUND_LIMIT_DEFAULT_NS) + ROUND_SLACK_NS;
    g->limit_ns = now + GATHER_LIMIT_NS;
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Counters can only describe the round's workers. The decoder holds them inside the
 * message's own world size (and steps to 2^53); once the round started, its world size
 * is the one that counts. world: the round's, or -1 before it started. */
static void sanitize_progress(pt_ctl_progress *p, int32_t world)
{
    if (world < 0)
        world = p->world_size;
    p->world_size = world;
    int32_t *counts[] = {&p->connected, &p->armed, &p->in_window, &p->traces_written, &p->summaries, &p->failed,
                         &p->hung};
    for (size_t i = 0; i < PT_ARRAY_LEN(counts); i++)
        *counts[i] = (int32_t)clamp_i64(*counts[i], 0, world);
}

/* ROUND_STARTED: the window asked, or the round is refused (its world size and start
 * step are in range, or it would not have decoded). */
static int round_started(const pt_ctl_msg *m, const round_guard *g, pt_error *err)
{
    if (m->steps != g->steps_asked) {
        pt_error_set(err, "the coordinator announced a window of %d steps from step %lld, not the %d steps asked: "
                     "refusing the round", (int)m->steps, (long long)m->start_step, (int)g->steps_asked);
        return -1;
    }
    return 0;
}

static void security_notice(pt_round *r, const pt_trigger_observer *obs, const char *text)
{
    if (r)
        pt_round_add_warning(r, "security: %s", text);
    if (obs && obs->notice)
        obs->notice(obs->ctx, text);
}

/* The coordinator's view of a worker's connection against what this CLI knows of the
 * job: its user is this one (only the job's user can read the control key). Its pid is
 * shown, not judged: a worker in a container of its own pid namespace gives its own pid
 * one number and the kernel another. Once per round: a hostile coordinator could say
 * it of every worker. */
static void check_identity(pt_round *r, const pt_ctl_msg *m, const pt_trigger_observer *obs, round_guard *g)
{
    const pt_ctl_worker *w = &m->worker;
    if (w->uid < 0 || w->uid == (int64_t)geteuid())
        return;
    if (g->foreign_workers++ > 0)
        return;
    char text[PT_CTL_MAX_SEEN_FROM + 256], seen[PT_CTL_MAX_SEEN_FROM + 1];
    pt_ctl_copy_str(seen, sizeof seen, w->seen_from);
    snprintf(text, sizeof text, "rank %d's connection (%s) belongs to user %lld, not the job's user %lld: its "
             "outcome is not the job's", (int)w->rank, seen, (long long)w->uid, (long long)geteuid());
    security_notice(r, obs, text);
}

/* An outcome for this rank may be recorded: the rank is in the job and has none yet. */
static bool accept_outcome(pt_round *r, pt_ctl_msg *m, int32_t world, round_guard *g, const pt_trigger_observer *obs)
{
    if (!pt_round_rank_open(r, m->worker.rank)) {
        g->ignored++;
        return false;
    }
    m->worker.world_size = world; /* the round's, whatever the message says */
    check_identity(r, m, obs, g);
    return true;
}

/* The snapshot a message relays -- stacks and collectives, already bounded by the decoder;
 * the round parses and checks them -- as strings the round can read (any: it has one). */
typedef struct relayed_snapshot {
    char *stack, *threads, *collectives;
    pt_round_snapshot snap;
    bool any;
} relayed_snapshot;

static void relayed_snapshot_take(relayed_snapshot *rs, const pt_ctl_msg *m)
{
    rs->stack = malloc((size_t)m->stack.len + 1), rs->threads = malloc((size_t)m->threads.len + 1);
    rs->collectives = malloc((size_t)m->collectives.len + 1);
    rs->any = m->stack.len || m->threads.len || m->collectives.len;
    if (rs->stack && rs->threads && rs->collectives) {
        pt_ctl_copy_str(rs->stack, (size_t)m->stack.len + 1, m->stack);
        pt_ctl_copy_str(rs->threads, (size_t)m->threads.len + 1, m->threads);
        pt_ctl_copy_str(rs->collectives, (size_t)m->collectives.len + 1, m->collectives);
    } else {
        rs->any = false;
    }
    rs->snap = (pt_round_snapshot){rs->stack, rs->threads, rs->collectives, m->since_step_ns, m->mean_step_ns};
}

static void relayed_snapshot_free(relayed_snapshot *rs)
{
    free(rs->stack), free(rs->threads), free(rs->collectives);
}

/* A worker without a summary, with the snapshot the coordinator relayed. */
static void add_failure_with_snapshot(pt_round *r, const pt_ctl_msg *m, const char *text)
{
    relayed_snapshot rs;
    relayed_snapshot_take(&rs, m);
    pt_round_add_failure(r, &m->worker, m->kind, m->steps_done, m->stalled_ns, text, rs.any ? &rs.snap : NULL);
    relayed_snapshot_free(&rs);
}

/* A worker's summary, with the collectives a failure left, when the coordinator relayed them. */
static int add_summary_with_snapshot(pt_round *r, const pt_ctl_msg *m, const char *path, pt_error *err)
{
    relayed_snapshot rs;
    relayed_snapshot_take(&rs, m);
    int steps = pt_round_add_summary(r, &m->worker, path, m->blob.data, m->blob.len, rs.any ? &rs.snap : NULL, err);
    relayed_snapshot_free(&rs);
    return steps;
}

static void record_summary(pt_round *r, pt_ctl_msg *m, round_guard *g, const pt_trigger_observer *obs,
                           pt_trigger_result *out)
{
    char path[PT_CTL_MAX_PATH];
    pt_error rerr;
    if (g->summary_bytes + m->blob.len > ROUND_SUMMARY_BYTES_MAX) {
        const char *text = "its summary was not kept: the round's summaries passed the CLI's 2 GiB budget";
        pt_round_add_failure(r, &m->worker, PT_FAIL_BAD_SUMMARY, -1, 0, text, NULL);
        m->text = pt_ctl_str(text);
        worker_event(obs, m, PT_FAIL_BAD_SUMMARY, 0);
        return;
    }
    g->summary_bytes += m->blob.len;
    pt_ctl_copy_str(path, sizeof path, m->path);
    int steps = add_summary_with_snapshot(r, m, path, &rerr);
    if (steps < 0) {
        m->text = pt_ctl_str(rerr.message);
        worker_event(obs, m, PT_FAIL_BAD_SUMMARY, 0);
        return;
    }
    if (steps < g->steps_asked) {
        out->cut_short++;
        pt_round_add_warning(r, "rank %d: profiled %d of the %d steps asked: its window was cut short (the job ended "
                                "inside it)", m->worker.rank, steps, g->steps_asked);
    }
    worker_event(obs, m, 0, steps);
}

static void note_ignored(pt_round *r, const round_guard *g)
{
    if (g->foreign_workers > 1)
        pt_round_add_warning(r, "security: %llu workers' connections belong to users other than the job's",
                             (unsigned long long)g->foreign_workers);
    if (g->notices > ROUND_NOTICES_MAX)
        pt_round_add_warning(r, "security: the coordinator sent %llu more notices than the %d kept",
                             (unsigned long long)(g->notices - ROUND_NOTICES_MAX), ROUND_NOTICES_MAX);
    if (g->ignored)
        pt_round_add_warning(r, "ignored %llu messages from the coordinator about ranks outside the job's %d or "
                                "already settled", (unsigned long long)g->ignored, (int)pt_round_world_size(r));
}

/* The round ended without ROUND_DONE (the coordinator went away, fell silent or passed
 * the CLI's limit): what arrived is the round, the rest is missing. */
static void end_without_coordinator(pt_round *r, const round_guard *g, const char *why,
                                    const pt_trigger_observer *obs, pt_trigger_result *out)
{
    out->coordinator_lost = true;
    pt_round_add_warning(r, "the connection to the coordinator was lost before the round ended (%s); workers not "
                            "heard from are missing", why);
    note_ignored(r, g);
    name_the_unheard(r, out->world_size, NULL, obs);
}

/* The coordinator sent a message the decoder refuses (why names the field and its
 * range): it is broken or hostile, so nothing after it is believed; what arrived before
 * is the round, the rest is missing. */
static void end_at_invalid_message(pt_round *r, const round_guard *g, const char *why,
                                   const pt_trigger_observer *obs, pt_trigger_result *out)
{
    pt_round_add_warning(r, "the coordinator sent an invalid message (%s): the CLI stopped reading it before the "
                            "round ended; workers not heard from are missing", why);
    note_ignored(r, g);
    name_the_unheard(r, out->world_size, why, obs);
}

/* Reads the round's messages into r until ROUND_DONE. 0, or -1 when the coordinator said
 * no or said something the CLI refuses to believe (err) -- losing the coordinator midway
 * is not an error, it is recorded. */

/* The user interrupted the CLI: the coordinator cancels the round on every worker and
 * says how many dropped a window. Whatever else arrives meanwhile is the cancelled
 * round's, and dropped. -1 always (err: interrupted). */
static int cancel_round(pt_conn *c, pt_trigger_result *out, pt_error *err)
{
    out->cancelled = true;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_CANCEL_ROUND);
    pt_error rerr;
    int64_t deadline = pt_now_ns() + (int64_t)CANCEL_CONFIRM_MS * 1000000;
    int got = send_all(c, &m, &rerr) == 0 ? 1 : -1;
    while (got > 0) {
        int left = (int)((deadline - pt_now_ns()) / 1000000);
        got = left > 0 ? receive(c, &m, left, NULL, &rerr) : 0;
        if (got > 0 && m.type == PT_CTL_ROUND_CANCELLED) {
            out->cancel_confirmed = true;
            out->cancelled_round = m.round;
            out->cancelled_windows = m.progress.armed;
            break;
        }
    }
    pt_error_set(err, "interrupted");
    return -1;
}

/* Workers still finish a cancelled round's window: wait as the coordinator suggests (at
 * most a second at a time, so the trigger goes out as soon as they are free) and ask
 * again, for at most BUSY_WAIT_MAX_S. 0 (asked again), -1 (err: gave up), INTERRUPTED. */
static int wait_until_free(pt_conn *c, const pt_ctl_msg *busy, const pt_ctl_msg *trigger, int64_t *since,
                           const pt_trigger_request *req, const pt_trigger_observer *obs, pt_error *err)
{
    char text[PT_CTL_MAX_TEXT + 1];
    pt_ctl_copy_str(text, sizeof text, busy->text);
    int64_t now = pt_now_ns();
    if (!*since)
        *since = now;
    if (now - *since > BUSY_WAIT_MAX_S * SEC_NS) {
        pt_error_set(err, "%s; waited %d s for them: try again in about %lld s", text, BUSY_WAIT_MAX_S,
                     (long long)(busy->timeout_ms + 999) / 1000);
        return -1;
    }
    if (obs && obs->busy)
        obs->busy(obs->ctx, text, busy->timeout_ms);
    struct timespec nap = {0, 100 * 1000000L};
    for (int64_t ms = 0; ms < PT_MIN(busy->timeout_ms, 1000); ms += 100) {
        if (interrupted(req->interrupted))
            return INTERRUPTED;
        nanosleep(&nap, NULL);
    }
    return send_all(c, trigger, err);
}

static int collect(pt_conn *c, pt_round **r, const char *dir, const pt_ctl_msg *trigger,
                   const pt_trigger_request *req, const pt_trigger_observer *obs, pt_trigger_result *out,
                   pt_error *err)
{
    int64_t last_heard = pt_now_ns(), busy_since = 0;
    round_guard g;
    guard_init(&g, req, last_heard);
    for (;;) {
        pt_ctl_msg m;
        pt_error rerr;
        int got = receive(c, &m, 1000, req->interrupted, &rerr);
        if (got == INTERRUPTED)
            return cancel_round(c, out, err);
        int64_t now = pt_now_ns();
        bool silent = got == 0 && now - last_heard >= (int64_t)SILENCE_LIMIT_MS * 1000000;
        bool overdue = now >= g.limit_ns;
        if (got == 0 && !silent && !overdue)
            continue;
        if (got == INVALID_MESSAGE) {
            if (*r) {
                end_at_invalid_message(*r, &g, rerr.message, obs, out);
                return 0;
            }
            pt_error_set(err, "the coordinator sent an invalid message (%s): refusing the round (a coordinator that "
                         "says so is broken or not a perftracker job's)", rerr.message);
            return -1;
        }
        if (got <= 0 || overdue) {
            const char *why = got < 0 ? rerr.message : "no answer";
            if (!*r && overdue)
                pt_error_set(err, "the coordinator did not start the round within %lld minutes (it waits at most an "
                             "hour for workers to join)", (long long)(GATHER_LIMIT_NS / 60 / SEC_NS));
            else if (!*r)
                pt_error_set(err, "the coordinator went away before the round started: %s", why);
            if (!*r)
                return -1;
            end_without_coordinator(*r, &g, overdue ? "the round passed the CLI's limit (--timeout + 30 s)"
                                                    : got < 0 ? rerr.message : "silence", obs, out);
            return 0;
        }
        last_heard = now;
        char text[PT_CTL_MAX_TEXT + 1];
        switch (m.type) {
        case PT_CTL_ERROR:
            pt_ctl_copy_str(text, sizeof text, m.text);
            pt_error_set(err, "the coordinator refused the round: %s", text);
            return -1;
        case PT_CTL_BUSY: {
            if (*r) {
                g.ignored++;
                break;
            }
            int rc = wait_until_free(c, &m, trigger, &busy_since, req, obs, err);
            if (rc == INTERRUPTED)
                return cancel_round(c, out, err);
            if (rc != 0)
                return -1;
            last_heard = pt_now_ns();
            break;
        }
        case PT_CTL_ROUND_STARTED:
            if (*r) {
                g.ignored++;
                break;
            }
            if (round_started(&m, &g, err) != 0)
                return -1;
            out->world_size = m.progress.world_size;
            *r = pt_round_new(dir, m.progress.world_size);
            pt_round_set_threads(*r, (int)PT_MIN(PT_MAX(sysconf(_SC_NPROCESSORS_ONLN), 1), 64));
            if (!req->auto_analyze)
                pt_round_drop_summaries(*r);
            g.limit_ns = now + g.round_timeout_ns;
            sanitize_progress(&m.progress, out->world_size);
            if (obs && obs->started)
                obs->started(obs->ctx, m.round, m.start_step, m.steps, &m.progress);
            break;
        case PT_CTL_PROGRESS:
            sanitize_progress(&m.progress, *r ? out->world_size : -1);
            if (obs && obs->progress)
                obs->progress(obs->ctx, &m.progress);
            break;
        case PT_CTL_WORKER_SUMMARY:
            if (*r && accept_outcome(*r, &m, out->world_size, &g, obs))
                record_summary(*r, &m, &g, obs, out);
            break;
        case PT_CTL_WORKER_FAILED:
            if (!*r || !accept_outcome(*r, &m, out->world_size, &g, obs))
                break;
            pt_ctl_copy_str(text, sizeof text, m.text);
            add_failure_with_snapshot(*r, &m, text);
            worker_event(obs, &m, m.kind, 0);
            break;
        case PT_CTL_NOTICE:
            if (g.notices++ >= ROUND_NOTICES_MAX)
                break;
            pt_ctl_copy_str(text, sizeof text, m.text);
            security_notice(*r, obs, text);
            break;
        case PT_CTL_ROUND_DONE:
            if (!*r) {
                pt_error_set(err, "the coordinator ended the round before it started it");
                return -1;
            }
            sanitize_progress(&m.progress, out->world_size);
            if (obs && obs->progress)
                obs->progress(obs->ctx, &m.progress);
            note_ignored(*r, &g);
            return 0;
        default:
            break;
        }
    }
}

/* Removes what the round left in its folder, and the folder when nothing else is there. */
static void discard_round(pt_round *r, pt_trigger_result *out)
{
    pt_round_discard(r, out->round_dir);
    out->round_dir_kept = access(out->round_dir, F_OK) == 0;
}

int pt_trigger_run(const pt_trigger_request *req, const pt_trigger_observer *obs, pt_trigger_result *out,
                   pt_error *err)
{
    memset(out, 0, sizeof *out);
    target t;
    pt_key key;
    char name[PT_HOST_MAX + 80];
    uint8_t server_nonce[PT_CTL_NONCE_BYTES];
    if (find_job(req, &t, out, err) != 0)
        return -1;
    int fd = connect_to_job(&t, name, sizeof name, out, err);
    if (fd < 0)
        return -1;
    pt_conn conn;
    pt_conn_init(&conn, fd, 1u << 20);
    pt_round *r = NULL;
    int rc = -1;
    char output_dir[PT_CTL_MAX_PATH], note[512] = "";
    if (req->output_dir)
        snprintf(output_dir, sizeof output_dir, "%s", req->output_dir);
    else
        pt_round_default_output_dir(output_dir, sizeof output_dir, note, sizeof note - 40);
    if (note[0])
        strcat(note, " (--output-dir chooses the folder)");
    if (await_challenge(&conn, server_nonce, name, err) != 0 || load_key(&t, name, &key, err) != 0)
        goto done;
    if (authenticate(&conn, &key, server_nonce, err) != 0) {
        if (t.key_file[0] && secret_configured())
            snprintf(out->hint, sizeof out->hint, "the job does not use PERFTRACKER_SECRET: its key is in %s, "
                     "which this shell ignores while PERFTRACKER_SECRET or PERFTRACKER_SECRET_FILE is set\n",
                     t.key_file);
        goto done;
    }
    if (pt_round_make_dir(output_dir, out->round_dir, sizeof out->round_dir, err) != 0)
        goto done;
    if (obs && obs->connected) {
        char notes[sizeof out->notes + sizeof note];
        snprintf(notes, sizeof notes, "%s%s", out->notes, note);
        obs->connected(obs->ctx, name, out->round_dir, notes);
    }

    char raw_dir[sizeof out->round_dir + 16];
    snprintf(raw_dir, sizeof raw_dir, "%s/raw_trace", out->round_dir);
    pt_ctl_msg trigger;
    pt_ctl_msg_init(&trigger, PT_CTL_TRIGGER);
    trigger.wait = req->wait;
    trigger.steps = req->steps;
    trigger.save_raw = (uint8_t)req->save_raw;
    trigger.timeout_ms = req->timeout_ms;
    trigger.path = pt_ctl_str(req->save_raw == PT_SAVE_RAW_NONE ? "" : raw_dir);
    if (interrupted(req->interrupted)) { /* before anything was asked of the job */
        out->cancelled = out->cancel_confirmed = true;
        pt_error_set(err, "interrupted");
        discard_round(NULL, out);
        goto done;
    }
    if (send_all(&conn, &trigger, err) != 0 ||
        collect(&conn, &r, out->round_dir, &trigger, req, obs, out, err) != 0) {
        discard_round(r, out); /* cancelled, or nothing was collected: leave no round folder behind */
        goto done;
    }
    out->summaries = (int32_t)pt_round_summary_count(r);
    out->failed = (int32_t)pt_round_failure_count(r);
    if (pt_round_nothing_to_diagnose(r, err)) {
        discard_round(r, out);
        goto done;
    }
    pt_phase("round collected");
    if (req->auto_analyze && !(out->report = pt_round_report(r, err)))
        goto done;
    rc = 0;
done:
    pt_round_free(r);
    pt_phase("round freed");
    pt_conn_close(&conn);
    return rc;
}
