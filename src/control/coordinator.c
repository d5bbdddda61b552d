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
#include "control/coordinator.h"
#include "control/exit_files.h"
#include "control/round.h"
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

#define SEC 1000000000LL
#define MS 1000000LL
#define TICK_NS (50 * MS)
#define PEER_SWEEP_NS (1 * SEC)  /* every peer's timers are checked once per sweep, a slice per tick */
#define PROGRESS_MIN_NS (100 * MS)
#define KEEPALIVE_NS (1 * SEC)
#define AGENT_OUT_LIMIT (1u << 20)
#define CONTROL_OUT_LIMIT (1u << 30)
#define HANDSHAKE_IN_LIMIT 1024                      /* AUTH is 74 bytes */
#define UNJOINED_IN_LIMIT 4096                       /* JOIN is at most 296 */
#define CONTROL_IN_LIMIT (64u << 10)
#define AGENT_IN_LIMIT (4 + (size_t)PT_CTL_MAX_FRAME) /* one summary of any size the protocol allows */
#define FREE_INPUT (64u << 10)                       /* a frame up to this needs no share of the budget */
#define INPUT_BUDGET ((size_t)128 << 20)             /* what the larger frames of all peers may hold */
#define MIN_WAITING_PEERS 256
#define MAX_CONTROL_PEERS 16
#define ACCEPT_BATCH 256
#define SHED_LOG_NS (10 * SEC)
#define STRANGER_LOG_BURST 10
#define RELAY_OUT_LIMIT (16u << 20)                  /* ARMs and probes for a node's ranks */
#define RELAY_ENVELOPE 16                            /* RELAYED's bytes around a rank's frame */
#define CONTROL_BACKLOG ((size_t)8 << 20)            /* summaries queued for the CLI before workers wait */

/* A relay (relay.h) is one connection that carries its node's ranks: each rank it relays
 * is a virtual peer here, a PEER_AGENT with no socket whose frames come and go wrapped on
 * its relay's connection (peer.via), so everything after the wrapping is the flat job's
 * code, unchanged. */
enum peer_kind { PEER_HANDSHAKE, PEER_AGENT, PEER_CONTROL, PEER_RELAY };

typedef struct peer {
    pt_conn conn;
    enum peer_kind kind;
    uint8_t nonce[PT_CTL_NONCE_BYTES];
    int64_t accepted_ns, last_heard_ns;
    char addr[64];
    int32_t rank;          /* agents and relays after JOIN, else -1 */
    struct peer *via;      /* a rank behind a relay: that relay's peer (no socket of its own) */
    struct peer *via_prev, *via_next; /* such a rank's place in its relay's list, ... */
    struct peer *relayed;  /* ... which a relay starts here: its ranks, so losing it costs its node, not the job */
    int32_t relayed_rank;  /* such a rank's number, from before its JOIN is accepted */
    int32_t node_rank;     /* a relay's node */
    char host[PT_HOST_MAX]; /* a relay's host */
    /* The kernel's word on who it is (trust.h): a peer of the Unix socket runs as this user
     * (others are closed at accept), with this uid and pid; -1 on TCP. A relayed rank
     * carries what its relay saw, and is vouched for when its relay is. */
    bool vouched;
    int64_t cred_uid, cred_pid;
    bool closing;          /* close once the queue is flushed (after REFUSED) */
    bool dead;
    bool paused;           /* not read: its frame waits for room in the input budget */
    bool held;             /* not read: the CLI has CONTROL_BACKLOG bytes of summaries to take first */
    uint32_t events;       /* what epoll watches for it */
    size_t admitted;       /* the input budget its current frame holds */
} peer;

/* Where a worker was, as its last HANG said (each text NULL when it sent none). */
typedef struct snapshot {
    char *stack, *threads, *collectives;
    size_t bytes;          /* held, counted against SNAPSHOT_BUDGET */
    int64_t since_step_ns, mean_step_ns;
    int64_t steps_done;    /* its step count then: a snapshot is current while it stays */
    bool taken;
} snapshot;

typedef struct worker {
    peer *peer;            /* NULL while not connected */
    bool ever_joined;
    bool exited;           /* said BYE */
    int32_t local_rank, node_rank, world_size;
    int64_t pid;
    char host[PT_HOST_MAX];
    int64_t seen_uid, seen_pid;  /* its connection's credentials, -1 where unknown (peer.cred_*) */
    char seen_from[PT_CTL_MAX_SEEN_FROM + 1]; /* how it connected, for the report */
    int64_t steps_done, mean_step_ns, stalled_ns;
    int64_t steps_heard_ns; /* when steps_done was reported */
    bool stepping;         /* that report showed steps made since the one before it */
    snapshot snap;         /* its last HANG: where it was */
    /* A round ended before its window did (cancelled): its collector may still hold that
     * window, and an ARM now would find it busy. Draining until a SUMMARY of that round
     * (the agent answers every CANCEL with one) says it is free, it goes away, or
     * drain_until_ns passes. */
    uint32_t draining_round;
    int64_t cancelled_ns, drain_until_ns;
    int64_t drain_end_step;  /* its window ends by this step (its next one, once cancelled) */
} worker;

enum rw_state { RW_PENDING, RW_ARMED, RW_DONE, RW_FAILED, RW_HUNG };

/* Snapshots held at once, all workers together (each is at most 192 KB): beyond it a
 * worker's stacks and collectives are dropped (its training stack is kept), so a hang
 * report of a huge job cannot grow rank 0's process without bound. */
#define SNAPSHOT_BUDGET (256u << 20)

typedef struct round_worker {
    uint8_t state;
    bool arm_sent, acked, window_over;
    int64_t window_over_ns;
    int64_t start_step;    /* where its window opens: the round's, moved as its collector moves
                              it when its step source changes (follow_step_source) */
} round_worker;

enum round_kind { ROUND_TRIGGERED, ROUND_AUTO, ROUND_HANG_REPORT };

typedef struct round {
    uint32_t id;
    enum round_kind kind;
    peer *control;         /* ROUND_TRIGGERED: the CLI */
    pt_round *local;       /* automatic kinds: collected here */
    int64_t start_step;
    int32_t steps, wait;
    uint8_t save_raw;
    char raw_dir[PT_CTL_MAX_PATH];
    int64_t started_ns, deadline_ns;
    round_worker *w;       /* [world_size] */
    bool progress_dirty;
    bool abandoned;        /* the CLI went away: drop it at the next tick */
    bool gathering;        /* waiting (until gather_until_ns) for workers still joining */
    bool probed;           /* every worker was asked where it is (a hang in this round) */
    int64_t gather_until_ns, timeout_ns;
    int64_t progress_sent_ns;
} round;

struct pt_coordinator {
    pt_coordinator_config cfg;
    int listen_fd, epoll_fd, wake_fd;
    int local_fd;            /* the Unix socket for this machine's workers (cfg.local_socket), or -1 */
    char local_name[PT_HOST_MAX];
    pt_notices notices;      /* peers refused for who they are: every round's report names them */
    uint16_t port;
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    worker *workers;
    peer **peers;
    size_t peer_count, peer_cap;
    size_t dead_peers;       /* marked dead since the last reap: a turn walks the peers only when some are */
    round *round;
    uint32_t next_round_id;
    int64_t next_auto_ns, last_tick_ns, last_busy_log_ns, last_opt_in_log_ns;
    size_t snapshot_bytes;   /* held by the workers' snapshots (SNAPSHOT_BUDGET) */
    int64_t last_budget_log_ns;
    size_t input_admitted;   /* the sum of the peers' admitted */
    size_t waiting_peers;    /* not yet authenticated, or authenticated agents before JOIN */
    size_t control_peers;
    peer *controls[MAX_CONTROL_PEERS + 1]; /* the authenticated CLIs (their queued bytes: the stats) */
    size_t held_peers;       /* peers held for the CLI's backlog */
    size_t paused_peers;     /* peers paused for room in the input budget (a tick walks all while any are) */
    int32_t joined_agents, joined_relays; /* live, joined: the stats */
    size_t sweep_cursor;     /* the next peer whose timers a tick checks */
    double sweep_owed;       /* peers due in the coming slice, fractions carried over */
    uint64_t heartbeats;     /* heartbeats taken, direct or merged (the stats) */
    uint64_t relay_frames;   /* frames read from relays once they said who they are */
    uint64_t peer_checks;    /* peers whose timers the sweep checked (the stats) */
    uint8_t *scratch;        /* a frame for a relayed rank, before it is wrapped */
    size_t scratch_cap;
    int reserve_fd;          /* /dev/null, given up to accept (and close) a connection with no fd left */
    bool listener_paused;    /* both listeners, until the next tick */
    struct {                 /* load shed since the last log line */
        int64_t logged_ns;
        uint64_t dropped, turned_away;
        char why[96];
    } shed;
    struct {                 /* lines about peers not yet trusted (refused, dropped): a burst, then a count */
        int64_t window_ns;
        int lines;
        uint64_t suppressed;
    } stranger_log;
    pthread_mutex_t stats_lock;
    pt_coordinator_stats stats;
    pid_t owner;           /* the process that may remove the published files */
};

static void finish_round(pt_coordinator *c, int64_t now);

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

/* ---------------------------------------------------------------- peers */

/* Lines about peers that have not proven anything yet (a refused handshake, a dropped
 * connection, a refused JOIN): the first STRANGER_LOG_BURST of every 10 s, then a count,
 * so a flood of connections never becomes a flood of log lines. */
static void flush_stranger_log(pt_coordinator *c, int64_t now)
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

static void stranger_logf(pt_coordinator *c, int64_t now, const char *fmt, ...) PT_PRINTF(3, 4);
static void stranger_logf(pt_coordinator *c, int64_t now, const char *fmt, ...)
{
    flush_stranger_log(c, now);
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
static void update_interest(pt_coordinator *c, peer *p)
{
    uint32_t want = (p->paused || p->held ? 0 : EPOLLIN) | (pt_conn_pending(&p->conn) > 0 ? EPOLLOUT : 0);
    if (want == p->events || p->dead || p->conn.fd < 0)
        return;
    struct epoll_event ev = {want, {.ptr = p}};
    epoll_ctl(c->epoll_fd, EPOLL_CTL_MOD, p->conn.fd, &ev);
    p->events = want;
}

/* The most a peer may send in one frame, by what it has shown it is. */
static size_t input_limit(const peer *p)
{
    switch (p->kind) {
    case PEER_HANDSHAKE: return HANDSHAKE_IN_LIMIT;
    case PEER_CONTROL: return CONTROL_IN_LIMIT;
    case PEER_RELAY: return p->rank >= 0 ? AGENT_IN_LIMIT + RELAY_ENVELOPE : UNJOINED_IN_LIMIT;
    default: return p->rank >= 0 ? AGENT_IN_LIMIT : UNJOINED_IN_LIMIT;
    }
}

static bool waiting(const peer *p)
{
    return p->kind == PEER_HANDSHAKE || ((p->kind == PEER_AGENT || p->kind == PEER_RELAY) && p->rank < 0);
}

/* The CLIs are a list of their own (at most MAX_CONTROL_PEERS), so the bytes queued for
 * them are summed at every tick without a walk over the job's peers. */
static void list_control(pt_coordinator *c, peer *p)
{
    c->controls[c->control_peers++] = p;
}

static void unlist_control(pt_coordinator *c, const peer *p)
{
    for (size_t i = 0; i < c->control_peers; i++)
        if (c->controls[i] == p) {
            c->controls[i] = c->controls[--c->control_peers];
            return;
        }
}

static void release_input(pt_coordinator *c, peer *p)
{
    c->input_admitted -= p->admitted;
    p->admitted = 0;
}

/* Whether p may read now. A frame over FREE_INPUT first takes its size from the shared
 * budget (a frame over the peer's limit is left to pt_conn_read, which refuses it). */
static bool admit_input(pt_coordinator *c, peer *p)
{
    size_t frame = pt_conn_frame_size(&p->conn);
    size_t need = frame > FREE_INPUT && frame <= p->conn.in_limit ? frame : 0;
    if (need == p->admitted)
        return true;
    release_input(c, p);
    if (need == 0)
        return true;
    if (c->input_admitted + need > INPUT_BUDGET)
        return false;
    p->admitted = need;
    c->input_admitted += need;
    return true;
}

static void kill_peer_as(pt_coordinator *c, peer *p, int64_t now, int failure, const char *why);
static void bad_frame(pt_coordinator *c, peer *p, const char *why, int64_t now);
static bool cli_backlogged(const pt_coordinator *c);
#define kill_peer(c, p, now, why) kill_peer_as(c, p, now, PT_FAIL_DIED, why)

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
static void queue_to(pt_coordinator *c, peer *p, const pt_ctl_msg *m, bool flush, int64_t now)
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
    update_interest(c, p);
}

static void send_to(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    queue_to(c, p, m, true, now);
}

static pt_ctl_worker identity_of(const pt_coordinator *c, int32_t rank)
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

/* ---------------------------------------------------------------- round output */

static bool terminal(const round_worker *rw)
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

static void emit_failure(pt_coordinator *c, int32_t rank, int kind, const char *text, int64_t now)
{
    round *r = c->round;
    const worker *w = &c->workers[rank];
    r->w[rank].state = RW_FAILED;
    r->progress_dirty = true;
    const snapshot *snap = current_snapshot(w, kind == PT_FAIL_HANG); /* goes with it */
    pt_round_snapshot shown = shown_snapshot(snap);
    int64_t steps = w->ever_joined ? pt_step_count(w->steps_done) : -1;
    pt_ctl_worker id = identity_of(c, rank);
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
    send_to(c, r->control, &m, now);
}

static void emit_summary(pt_coordinator *c, int32_t rank, const pt_ctl_msg *summary, int64_t now)
{
    round *r = c->round;
    r->w[rank].state = RW_DONE;
    r->progress_dirty = true;
    pt_ctl_worker id = identity_of(c, rank);
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
    send_to(c, r->control, &m, now);
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

static pt_ctl_progress progress_of(const pt_coordinator *c)
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
    m.progress = progress_of(c);
    send_to(c, r->control, &m, now);
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
    queue_to(c, c->workers[rank].peer, &m, false, now);
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
        if (c->workers[i].peer && !terminal(&r->w[i]))
            queue_to(c, c->workers[i].peer, &m, false, now); /* like the ARMs: one write per relay */
}

/* A worker said something about where it is: move it along the round. */
static void advance_worker(pt_coordinator *c, int32_t rank, int64_t now)
{
    round *r = c->round;
    if (!r)
        return;
    round_worker *rw = &r->w[rank];
    const worker *w = &c->workers[rank];
    if (terminal(rw) || !w->peer || r->abandoned || r->gathering)
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
            emit_failure(c, rank, PT_FAIL_NOT_REACHED, text, now);
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

static round *new_round(pt_coordinator *c, enum round_kind kind, int64_t now)
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

static void free_round(round *r)
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
static void begin_profiling(pt_coordinator *c, round *r, int32_t wait, int32_t steps, uint8_t save_raw,
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
        m.progress = progress_of(c);
        send_to(c, r->control, &m, now);
    }
    for (int32_t i = 0; i < c->cfg.world_size && c->round == r; i++)
        if (c->workers[i].peer)
            advance_worker(c, i, now);
}

static void begin_hang_report(pt_coordinator *c, round *r, int64_t now)
{
    r->deadline_ns = now + c->cfg.probe_timeout_ns;
    c->round = r;
    pt_ctl_logf(&c->cfg.log, "round %u: hang report, asking every worker where it is", r->id);
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        if (c->workers[i].peer)
            r->w[i].arm_sent = true;
    probe_all(c, r, now);
}

static void reply_error(pt_coordinator *c, peer *p, const char *text, int64_t now);

/* A trigger that arrives while workers are still joining (the job just started) waits
 * for them a little, so the start step is computed over everyone. */
static void end_gathering(pt_coordinator *c, round *r, int64_t now)
{
    int64_t max_step;
    int32_t connected = connected_agents(c, now, &max_step);
    if (connected < c->cfg.world_size && now < r->gather_until_ns) {
        if (r->control && now - r->progress_sent_ns >= KEEPALIVE_NS) {
            pt_ctl_msg m;
            pt_ctl_msg_init(&m, PT_CTL_PROGRESS);
            m.progress = progress_of(c);
            send_to(c, r->control, &m, now);
            r->progress_sent_ns = now;
        }
        return;
    }
    r->gathering = false;
    if (connected == 0) {
        reply_error(c, r->control, "no worker of the job is connected to the coordinator (is the training running "
                    "with PerfTracker()?)", now);
        c->round = NULL;
        free_round(r);
        return;
    }
    begin_profiling(c, r, r->wait, r->steps, r->save_raw, r->raw_dir, r->timeout_ns, now);
}

#define DRAIN_BOUND_NS (30 * SEC) /* plus its steps: how long a cancelled window may keep a worker */

/* The round ends before its windows do (cancelled by the user, its CLI gone, or past its
 * deadline): every worker still armed is told to drop its window, and drains (see
 * worker.draining_round) meanwhile. Returns how many were told. */
static int32_t cancel_windows(pt_coordinator *c, round *r, int64_t now)
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
        send_to(c, w->peer, &m, now);
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
            send_to(c, r->control, &m, now);
        }
        if (r->local)
            pt_round_add_warning(r->local, "security: %s", line);
    }
}

static void finish_round(pt_coordinator *c, int64_t now)
{
    round *r = c->round;
    int32_t hung = 0;
    int32_t cancelled = cancel_windows(c, r, now); /* whoever is still armed will not be waited for */
    if (cancelled)
        pt_ctl_logf(&c->cfg.log, "round %u: told %d workers still in the window to drop it", r->id, cancelled);
    for (int32_t i = 0; i < c->cfg.world_size; i++)
        hung += r->w[i].state == RW_HUNG;
    for (int32_t i = 0; i < c->cfg.world_size; i++) {
        round_worker *rw = &r->w[i];
        const worker *w = &c->workers[i];
        if (terminal(rw))
            continue;
        if (rw->state == RW_HUNG)
            emit_failure(c, i, PT_FAIL_HANG, "", now);
        else if (!w->ever_joined)
            emit_failure(c, i, PT_FAIL_NEVER_CONNECTED, "", now);
        else if (!rw->arm_sent)
            emit_failure(c, i, w->exited ? PT_FAIL_EXITED : PT_FAIL_DIED,
                         w->peer ? "" : "disconnected before the round", now);
        else if (r->kind == ROUND_HANG_REPORT)
            emit_failure(c, i, PT_FAIL_UNRESPONSIVE, "did not answer the hang probe", now);
        else if (rw->window_over)
            emit_failure(c, i, PT_FAIL_NO_SUMMARY, "the window ended but no summary arrived in time", now);
        else {
            char text[160];
            int64_t first = pt_step_count(rw->start_step);
            snprintf(text, sizeof text, "at step %lld when the round timed out (window: steps %lld..%lld)",
                     (long long)pt_step_count(w->steps_done), (long long)first, (long long)(first + r->steps - 1));
            emit_failure(c, i, PT_FAIL_NOT_REACHED, text, now);
        }
    }
    pt_ctl_progress progress = progress_of(c);
    progress.hung = hung; /* settled as failures above, but still hangs */
    pt_ctl_logf(&c->cfg.log, "round %u finished: %d summaries, %d failed (%d hung)", r->id, progress.summaries,
                progress.failed, hung);
    tell_notices(c, r, now);
    if (r->control) {
        pt_ctl_msg m;
        pt_ctl_msg_init(&m, PT_CTL_ROUND_DONE);
        m.round = r->id;
        m.progress = progress;
        send_to(c, r->control, &m, now);
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
    free_round(r);
}

static void check_round(pt_coordinator *c, int64_t now)
{
    round *r = c->round;
    if (!r)
        return;
    if (r->abandoned) { /* its CLI went away without a word (killed): cancel it as if it had asked */
        int32_t told = cancel_windows(c, r, now);
        pt_ctl_logf(&c->cfg.log, "round %u cancelled: its CLI went away; told %d workers to drop their windows",
                    r->id, told);
        c->round = NULL;
        free_round(r);
        return;
    }
    if (r->gathering) {
        end_gathering(c, r, now);
        return;
    }
    bool settled = true;
    for (int32_t i = 0; i < c->cfg.world_size && c->round == r; i++) {
        round_worker *rw = &r->w[i];
        if (terminal(rw) || rw->state == RW_HUNG)
            continue;
        if (!rw->arm_sent && !c->workers[i].peer)
            continue; /* absent: settled unless it joins */
        if (rw->window_over && now - rw->window_over_ns > c->cfg.summary_timeout_ns) {
            emit_failure(c, i, PT_FAIL_NO_SUMMARY, "the window ended but no summary arrived in time", now);
            continue;
        }
        settled = false;
    }
    if (c->round == r && (settled || now >= r->deadline_ns))
        finish_round(c, now);
    else if (c->round == r)
        send_progress(c, now, false);
}

/* ---------------------------------------------------------------- agent messages */

/* Tells the peer why it is not welcome, and closes its connection once that is sent. */
static void refuse(pt_coordinator *c, peer *p, const char *why, int64_t now)
{
    pt_ctl_msg r;
    pt_ctl_msg_init(&r, PT_CTL_REFUSED);
    r.text = pt_ctl_str(why);
    send_to(c, p, &r, now);
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
    stranger_logf(c, now, "refused a worker from %s: %s", p->addr, why);
    refuse(c, p, why, now);
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
        stranger_logf(c, now, "refused a second JOIN from %s (rank %d, already joined as rank %d)", p->addr, rank,
                      p->rank);
        refuse(c, p, "this connection has joined already", now);
        return;
    }
    if (rank < 0 || rank >= c->cfg.world_size || m->worker.world_size != c->cfg.world_size) {
        stranger_logf(c, now, "refused a worker from %s: rank %d of world size %d does not fit this job (world size "
                      "%d)", p->addr, rank, m->worker.world_size, c->cfg.world_size);
        refuse(c, p, "rank or world size does not match this job", now);
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
    p->conn.in_limit = input_limit(p);
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

static void forget_snapshot(pt_coordinator *c, snapshot *snap)
{
    free(snap->stack), free(snap->threads), free(snap->collectives);
    c->snapshot_bytes -= snap->bytes;
    memset(snap, 0, sizeof *snap);
}

static void remember_snapshot(pt_coordinator *c, worker *w, const pt_ctl_msg *m, int64_t now)
{
    forget_snapshot(c, &w->snap);
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
    round *r = new_round(c, hang ? ROUND_HANG_REPORT : ROUND_AUTO, now);
    if (!r || make_auto_round_dir(c, dir, sizeof dir, &err) != 0) {
        pt_ctl_logf(&c->cfg.log, "cannot start an automatic round: %s", r ? err.message : "out of memory");
        free_round(r);
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
        begin_hang_report(c, r, now);
    } else {
        char raw[PT_CTL_MAX_PATH + 16];
        snprintf(raw, sizeof raw, "%s/raw_trace", dir);
        begin_profiling(c, r, c->cfg.auto_wait, c->cfg.auto_steps, c->cfg.auto_save_raw, raw, 0, now);
    }
}

static bool for_this_round(const pt_coordinator *c, uint32_t id, int32_t rank)
{
    return c->round && c->round->id == id && !terminal(&c->round->w[rank]);
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
    advance_worker(c, rank, now);
}

static void on_agent_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
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
            emit_failure(c, rank, PT_FAIL_ERROR, text, now);
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
            emit_failure(c, rank, PT_FAIL_ERROR, text[0] ? text : "the collector sent no summary", now);
        } else {
            emit_summary(c, rank, m, now);
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
        if (c->round && c->round->kind == ROUND_HANG_REPORT && !terminal(&c->round->w[rank]))
            emit_failure(c, rank, PT_FAIL_HANG, "", now);
        else
            advance_worker(c, rank, now);
        break;
    case PT_CTL_AUTO_REQUEST:
        set_steps(c, rank, m->steps_done);
        w->steps_heard_ns = now;
        start_auto_round(c, rank, m, now);
        break;
    case PT_CTL_BYE:
        w->exited = true;
        if (c->round && !terminal(&c->round->w[rank]) && c->round->w[rank].arm_sent)
            emit_failure(c, rank, PT_FAIL_EXITED, "the process exited", now);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- relay messages */

/* "the relay of node 3 (rank 24 on gpu-3, 10.0.0.3:41234)", for the lines about its ranks. */
static void relay_name(const peer *relay, char *dst, size_t cap)
{
    snprintf(dst, cap, "the relay of node %d (rank %d on %.80s, %.60s)", relay->node_rank, relay->rank, relay->host,
             relay->addr);
}

/* The relay says who it is (its own worker's identity) before it relays anything. */
static void on_relay_join(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    if (m->worker.world_size != c->cfg.world_size) {
        stranger_logf(c, now, "refused a relay from %s: world size %d does not match this job's %d", p->addr,
                      m->worker.world_size, c->cfg.world_size);
        refuse(c, p, "world size does not match this job", now);
        return;
    }
    p->rank = m->worker.rank;
    p->node_rank = m->worker.node_rank;
    pt_ctl_copy_str(p->host, sizeof p->host, m->worker.host);
    c->waiting_peers--;
    c->joined_relays++;
    p->conn.in_limit = input_limit(p);
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
    on_agent_message(c, q, inner, now);
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

static void on_relay_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
{
    if (p->rank < 0) {
        if (m->type == PT_CTL_JOIN)
            on_relay_join(c, p, m, now);
        else
            bad_frame(c, p, "a relay must say who it is (JOIN) first", now);
        return;
    }
    int32_t rank = m->relayed_rank;
    if ((m->type == PT_CTL_RELAYED || m->type == PT_CTL_RANK_LOST) && rank >= c->cfg.world_size) {
        bad_frame(c, p, "the relay named a rank outside the job", now);
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
        bad_frame(c, p, "a relay sent a message relays do not send", now);
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
        bad_frame(c, p, why, now);
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
    on_agent_message(c, q, &inner, now);
}

/* ---------------------------------------------------------------- control messages */

static void reply_error(pt_coordinator *c, peer *p, const char *text, int64_t now)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_ERROR);
    m.text = pt_ctl_str(text);
    send_to(c, p, &m, now);
}

/* The user interrupted the CLI (Ctrl-C): its round ends now, on every worker, and the CLI
 * hears how many workers dropped a window. A CLI without a round hears the same with
 * round 0 (the round had not started, or ended as it asked). */
static void cancel_for_cli(pt_coordinator *c, peer *p, int64_t now)
{
    round *r = c->round && c->round->control == p ? c->round : NULL;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_ROUND_CANCELLED);
    m.progress = progress_of(c);
    if (r) {
        m.round = r->id;
        m.progress.armed = cancel_windows(c, r, now);
        pt_ctl_logf(&c->cfg.log, "round %u cancelled by its CLI; told %d workers to drop their windows", r->id,
                    m.progress.armed);
        c->round = NULL;
        free_round(r);
    } else {
        m.progress.armed = 0;
    }
    send_to(c, p, &m, now);
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
    send_to(c, p, &m, now);
    return true;
}

static void on_control_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now)
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
        reply_error(c, p, text, now);
        return;
    }
    round *r = new_round(c, ROUND_TRIGGERED, now);
    if (!r) {
        reply_error(c, p, "the coordinator is out of memory", now);
        return;
    }
    r->control = p;
    r->wait = m->wait, r->steps = m->steps, r->save_raw = m->save_raw;
    r->timeout_ns = m->timeout_ms * MS; /* at most a week: the decoder checked it */
    pt_ctl_copy_str(r->raw_dir, sizeof r->raw_dir, m->path);
    r->gathering = true;
    r->gather_until_ns = now + c->cfg.join_grace_ns;
    c->round = r;
    end_gathering(c, r, now); /* begins at once when everyone is here */
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
    stranger_logf(c, now, "refused a worker from %s: workers on this machine connect through the socket %s", p->addr,
                  c->local_name);
    char why[PT_HOST_MAX + 96];
    snprintf(why, sizeof why, "workers on this machine connect through the socket %s, not over TCP", c->local_name);
    refuse(c, p, why, now);
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
        stranger_logf(c, now, "refused a %s connection from %s: %s",
                      m->role == PT_CTL_ROLE_CONTROL ? "control" : m->role == PT_CTL_ROLE_AGENT ? "worker"
                      : m->role == PT_CTL_ROLE_RELAY ? "relay" : "peer",
                      p->addr, m->type != PT_CTL_AUTH || m->version != PT_CTL_VERSION ? "protocol mismatch"
                                                                                     : "wrong job key");
        if (worker_role && m->type == PT_CTL_AUTH && m->version == PT_CTL_VERSION)
            pt_notices_add(&c->notices, "wrong-key", "a %s from %s failed authentication (not the job's key) and "
                           "was refused", m->role == PT_CTL_ROLE_RELAY ? "relay" : "worker", p->addr);
        refuse(c, p, "authentication failed: this job's key is needed", now);
        return;
    }
    if (worker_role && !p->vouched && c->cfg.agent_key_public && pt_net_peer_is_on_this_host(p->conn.fd)) {
        refuse_local_tcp_worker(c, p, now);
        return;
    }
    if (m->role == PT_CTL_ROLE_CONTROL && c->control_peers >= MAX_CONTROL_PEERS) {
        stranger_logf(c, now, "refused a control connection from %s: %d CLIs are connected already", p->addr,
                      MAX_CONTROL_PEERS);
        refuse(c, p, "too many control connections", now);
        return;
    }
    pt_ctl_msg w;
    pt_ctl_msg_init(&w, PT_CTL_WELCOME);
    pt_auth_server_proof(key, m->role, p->nonce, m->nonce, w.mac);
    p->kind = m->role == PT_CTL_ROLE_AGENT ? PEER_AGENT : m->role == PT_CTL_ROLE_RELAY ? PEER_RELAY : PEER_CONTROL;
    p->conn.in_limit = input_limit(p);
    if (p->kind == PEER_RELAY)
        p->conn.out_limit = RELAY_OUT_LIMIT;
    if (p->kind == PEER_CONTROL) {
        c->waiting_peers--;
        list_control(c, p);
        p->conn.out_limit = CONTROL_OUT_LIMIT;
        pt_ctl_logf(&c->cfg.log, "control connection from %s", p->addr);
    }
    send_to(c, p, &w, now);
}

/* ---------------------------------------------------------------- the loop */

static void kill_peer_as(pt_coordinator *c, peer *p, int64_t now, int failure, const char *why)
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
    release_input(c, p);
    if (p->held)
        p->held = false, c->held_peers--;
    if (p->paused)
        p->paused = false, c->paused_peers--;
    if (waiting(p))
        c->waiting_peers--;
    else if (p->kind == PEER_CONTROL)
        unlist_control(c, p);
    else if (p->kind == PEER_AGENT)
        c->joined_agents--;
    else if (p->kind == PEER_RELAY)
        c->joined_relays--;
    if (p->kind == PEER_AGENT && p->rank >= 0 && c->workers[p->rank].peer == p) {
        int32_t rank = p->rank;
        c->workers[rank].peer = NULL;
        c->workers[rank].draining_round = 0; /* it gets a new collector, or none */
        round *r = c->round;
        if (r && !terminal(&r->w[rank]) && r->w[rank].arm_sent) {
            bool exited = c->workers[rank].exited;
            char text[200];
            snprintf(text, sizeof text, "%s at step %lld (%s)", exited ? "exited" : "connection lost",
                     (long long)pt_step_count(c->workers[rank].steps_done), why);
            emit_failure(c, rank, exited ? PT_FAIL_EXITED : failure, text, now);
        } else if (!c->workers[rank].exited) {
            pt_ctl_logf(&c->cfg.log, "rank %d disconnected (%s)", rank, why);
        }
    }
    if (p->kind == PEER_RELAY && p->rank >= 0) {
        /* Every rank it carried is lost with it, and says why. */
        char name[200], text[600];
        relay_name(p, name, sizeof name);
        /* lines below hold name (< 200) and why */
        snprintf(text, sizeof text, "%s was lost: %s", name, why);
        int32_t lost = 0;
        for (; p->relayed; lost++)
            kill_peer_as(c, p->relayed, now, failure, text); /* which takes it off the list */
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
        if (p->dead || !waiting(p) || p->via)
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
    stranger_logf(c, now, "closed a connection to %s from another user (uid %lld, pid %lld)", c->local_name,
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
    p->conn.in_limit = input_limit(p); /* nobody unauthenticated makes us buffer more than 1 KB */
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
        list_control(c, p);
        return;
    }
    c->waiting_peers++;
    if (p->kind == PEER_AGENT)
        return;
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_CHALLENGE);
    memcpy(m.nonce, p->nonce, sizeof m.nonce);
    send_to(c, p, &m, now);
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
static void bad_frame(pt_coordinator *c, peer *p, const char *why, int64_t now)
{
    if (waiting(p))
        stranger_logf(c, now, "dropping %s: %s", p->addr, why);
    else
        pt_ctl_logf(&c->cfg.log, "dropping %s: %s", p->addr, why);
    if (p->kind != PEER_CONTROL) {
        kill_peer(c, p, now, why);
        return;
    }
    char text[PT_CTL_MAX_TEXT];
    snprintf(text, sizeof text, "the coordinator refused a message: %s", why);
    reply_error(c, p, text, now);
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
            on_agent_message(c, p, &m, now);
        else if (p->kind == PEER_RELAY)
            on_relay_message(c, p, &m, now);
        else
            on_control_message(c, p, &m, now);
    }
    if (!p->dead && !p->closing && got < 0)
        bad_frame(c, p, err.message, now);
}

static void service_peer(pt_coordinator *c, peer *p, uint32_t events, int64_t now)
{
    pt_error err;
    if ((p->paused || p->held) && (events & (EPOLLHUP | EPOLLERR))) {
        kill_peer(c, p, now, "connection closed while waiting for room");
        return;
    }
    if (!p->paused && !p->held && (p->kind == PEER_AGENT || p->kind == PEER_RELAY) && cli_backlogged(c)) {
        p->held = true; /* resumed once the CLI has taken half of it (resume_held) */
        c->held_peers++;
        update_interest(c, p);
        return;
    }
    if (!p->paused && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        int rc = 0;
        if (admit_input(c, p)) {
            rc = pt_conn_read(&p->conn, &err);
            if (rc > 0)
                p->last_heard_ns = now;
        } else {
            p->paused = true; /* resumed by a tick once the budget has room */
            c->paused_peers++;
        }
        handle_frames(c, p, now);
        if (!p->dead && !p->closing && !p->paused)
            admit_input(c, p); /* a finished frame gives its share back at once */
        if (!p->dead && rc < 0) {
            if (!p->conn.eof && waiting(p))
                stranger_logf(c, now, "dropping %s: %s", p->addr, err.message);
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
        update_interest(c, p);
    if (!p->dead && p->kind != PEER_CONTROL)
        pt_conn_trim(&p->conn); /* one connection per worker or node: none keeps a buffer while idle */
}

/* Summaries flow to the CLI as fast as it takes them and no faster: while CONTROL_BACKLOG
 * bytes wait for it, workers and relays are not read (TCP holds the rest on their side),
 * so rank 0 never queues the whole job's summaries. */
static bool cli_backlogged(const pt_coordinator *c)
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
            update_interest(c, p);
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
    else if (waiting(p) && now - p->accepted_ns > c->cfg.handshake_timeout_ns)
        kill_peer(c, p, now, p->kind == PEER_HANDSHAKE ? "no authentication in time" : "no JOIN in time");
    else if ((p->kind == PEER_AGENT || p->kind == PEER_RELAY) && !p->paused && !p->held &&
             !(p->via && (p->via->paused || p->via->held)) && now - p->last_heard_ns > c->cfg.heartbeat_timeout_ns &&
             !unread_input(p)) {
        pt_ctl_logf(&c->cfg.log, "%s %d: no heartbeat for %.0f s; dropping it",
                    p->kind == PEER_RELAY ? "the relay of rank" : "rank", p->rank,
                    (double)(now - p->last_heard_ns) / 1e9);
        kill_peer_as(c, p, now, PT_FAIL_UNRESPONSIVE, "no heartbeat");
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
        if (!p->dead && p->paused && admit_input(c, p)) {
            p->paused = false;
            c->paused_peers--;
            p->last_heard_ns = now; /* waiting on us is not silence */
            update_interest(c, p);
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
    flush_stranger_log(c, now);
    check_round(c, now);
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
        forget_snapshot(c, &c->workers[i].snap);
    free_round(c->round);
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
