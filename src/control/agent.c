/* agent.c -- the worker side of the control plane: one background thread per training
 * process that keeps a connection to the job's coordinator, arms profiling windows,
 * ships the finished window's summary, reports hangs, and (opt-in) asks for rounds by
 * itself when the job slows down.
 *
 * The training thread never waits on this code. The collector's status hook is sampled
 * every poll (100 ms) from this thread with lock-free reads; arm_window is a flag flip in
 * the collector; the only lock is the one-slot mailbox pt_agent_finish_window fills from
 * the collector's writer thread. Memory is bounded: one connection's buffers, one pending
 * summary, one snapshot buffer (a hang report's stacks and collectives, 192 KB, taken at the
 * first snapshot). Tests and the simulated fleet may drive agents from their own loop
 * instead of a thread each (pt_agent_create_driven). Where the
 * worker is -- every thread's stack and its collectives -- is sent whenever a probe asks,
 * its own stall passes the threshold, or a collective raised (then also on the way out,
 * before BYE, so a process ending on that error leaves its state behind). A CANCEL drops
 * the window through the collector and is answered with a SUMMARY of its round without a
 * profile once the collector is free; an ARM the collector refuses while it is still busy
 * is retried at each poll until its start step. Every failure (coordinator unreachable, refused, a dropped
 * connection) becomes a rate-limited log line and a retry with exponential backoff;
 * nothing here exits, aborts or raises a signal in the host process.
 *
 * Trust. An agent whose coordinator (or node relay) is on its machine connects through
 * that server's Unix socket, checks the socket's owner is its own user, and needs no
 * key: the server asks the kernel who it is (trust.h). Only a link that crosses machines
 * proves the agent key. With a configured secret every agent has it from the start.
 * Otherwise rank 0's process makes the job's secret (auth.h), publishes it only when some
 * rank is on another machine, and those ranks' agents wait for it: Python takes it from
 * the job's torch.distributed store on the training thread, at PerfTracker() and at
 * step() (never here, so this thread never waits on the store or the GIL), and hands it
 * over with pt_agent_offer_job_secret -- a copy under a lock and a wake-up. Until then
 * such an agent does not connect, and says once why.
 *
 * The process-wide API of agent.h is at the end: it reads the environment, starts the
 * coordinator too when this process is rank 0, and holds the one pt_agent. In a job that
 * uses the relay tree (relay.h, pt_relay_wanted) every agent connects to its node's relay
 * on loopback instead, and local rank 0's process hosts that relay, started once it has
 * the agent key. */
#define _GNU_SOURCE
#include "control/agent_instance.h"
#include "control/autotrigger.h"
#include "control/coordinator.h"
#include "control/relay.h"
#include "util/step_number.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 1000
#define HANDSHAKE_TIMEOUT_NS (10 * 1000000000LL)
#define BACKOFF_MIN_NS (50 * 1000000LL)
#define BACKOFF_MAX_NS (5 * 1000000000LL)
#define REFUSED_BACKOFF_NS (30 * 1000000000LL)
#define UNREACHABLE_LOG_AFTER_NS (30 * 1000000000LL)
#define PROGRESS_HEARTBEAT_NS (100 * 1000000LL)
#define WINDOW_LOST_STEPS 100
#define NO_SECRET_LOG_AFTER_NS (10 * 1000000000LL)

enum link_state { LINK_DOWN, LINK_HANDSHAKE, LINK_READY };

/* The one-slot mailbox between the collector's writer thread and the agent thread. */
typedef struct finished_window {
    bool present;
    uint8_t *summary;
    size_t len;
    int status;
    char raw_trace_path[PT_CTL_MAX_PATH];
    char why[512];       /* why the window failed, for the CLI and the report */
} finished_window;

struct pt_agent {
    pt_agent_config cfg;
    pt_agent_hooks hooks;
    pthread_t thread;
    bool driven;                 /* no thread of its own: pt_agent_drive turns it (agent_instance.h) */
    atomic_bool stop;
    atomic_bool say_bye;
    atomic_bool joined;
    atomic_int refusals;
    int wake_fd;

    pthread_mutex_t mailbox_lock;
    finished_window mailbox;

    /* The job secret, handed over from the training thread (key_lock guards offered). */
    pthread_mutex_t key_lock;
    pt_key offered_key;
    atomic_bool key_offered;
    atomic_bool waiting_for_key; /* no agent key yet: do not connect */
    int64_t created_ns;
    bool said_no_key;

    /* Agent-thread state from here on. */
    pt_conn conn;
    enum link_state link;
    uint8_t server_nonce[PT_CTL_NONCE_BYTES], client_nonce[PT_CTL_NONCE_BYTES];
    int64_t handshake_deadline_ns;
    int64_t next_connect_ns, backoff_ns, unreachable_since_ns, last_unreachable_log_ns;
    uint32_t armed_round;
    bool window_active;          /* armed, and its summary not sent yet */
    int64_t window_start_step;   /* where the armed window opens (followed across step sources) */
    int64_t window_end_step;     /* start + steps of the armed window */
    int32_t window_steps;
    uint32_t cancelled_round;    /* the armed window's round was cancelled: drop its summary */
    /* An ARM the collector refused while busy (an earlier window still being dropped or
     * written): retried every poll until it is armed or its start step comes. */
    bool arm_pending;
    uint32_t pending_round;
    int64_t pending_start_step;
    int32_t pending_steps;
    char pending_path[PT_CTL_MAX_PATH];
    pt_step_tracker tracker;
    int64_t steps_done, last_step_end_ns, mean_step_ns, stalled_ns;
    int64_t last_heartbeat_ns, heartbeat_steps;
    int64_t hang_reported_steps; /* the step a hang was reported in, -1 when none */
    int64_t next_auto_ns;
    unsigned random_state;
    bool failure_unsent;         /* a collective raised; its snapshot is not sent yet */
    /* The snapshot a hang report sends, one allocation: stack, threads, collectives. */
    char *stack;                 /* PT_CTL_MAX_STACK bytes */
    char *threads;               /* PT_CTL_MAX_SNAPSHOT bytes */
    char *collectives;           /* PT_CTL_MAX_SNAPSHOT bytes */
};

void pt_agent_config_defaults(pt_agent_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->rank = cfg->local_rank = cfg->node_rank = -1;
    cfg->heartbeat_ns = 1000000000LL;
    cfg->poll_ns = 100000000LL;
    cfg->hang_floor_ns = 10 * 1000000000LL;
    cfg->hang_factor = 5.0;
    cfg->auto_threshold = 0.05;
    cfg->auto_interval_ns = 600 * 1000000000LL;
}

/* Rank 0's coordinator runs inside a training process and reads every rank's heartbeat:
 * at one a second, 100,000 workers cost it 100,000 entries a second for as long as the
 * job runs (relays merge them into fewer frames, not fewer entries), and rank 0 becomes
 * the job's straggler. Past 20,000 workers the period grows with the world instead. The
 * 5 s ceiling keeps six periods inside the coordinator's 30 s silence timeout; a hang is
 * still reported at once (send_hang does not wait for a heartbeat) and a round's start
 * step is chosen from each count plus the steps its mean step time says it made since. */
#define RANK0_HEARTBEATS_PER_SECOND 20000
#define MAX_DEFAULT_HEARTBEAT_NS (5 * 1000000000LL)

int64_t pt_agent_default_heartbeat_ns(int32_t world_size)
{
    int64_t scaled = (int64_t)PT_MAX(world_size, 0) * (1000000000LL / RANK0_HEARTBEATS_PER_SECOND);
    return PT_MIN(PT_MAX(scaled, 1000000000LL), MAX_DEFAULT_HEARTBEAT_NS);
}

int pt_agent_config_from_env(pt_agent_config *cfg, pt_job_env *env, pt_error *err)
{
    pt_agent_config_defaults(cfg);
    int rc = pt_job_env_read(env, true, err);
    if (rc != 0)
        return rc;
    cfg->rank = env->rank, cfg->local_rank = env->local_rank, cfg->world_size = env->world_size;
    cfg->node_rank = env->node_rank, cfg->pid = env->pid;
    snprintf(cfg->host, sizeof cfg->host, "%s", env->host);
    if (pt_agent_coordinator_is_here(env)) { /* its Unix socket: the kernel vouches for both ends */
        pt_coordinator_socket_for(env->coordinator_port, cfg->coordinator_host, sizeof cfg->coordinator_host);
        cfg->coordinator_port = 0;
    } else {
        snprintf(cfg->coordinator_host, sizeof cfg->coordinator_host, "%s", env->coordinator_host);
        cfg->coordinator_port = env->coordinator_port;
    }
    cfg->heartbeat_ns = pt_env_int("PERFTRACKER_HEARTBEAT_MS", pt_agent_default_heartbeat_ns(env->world_size) / 1000000, 10,
                                   600000) * 1000000LL;
    cfg->poll_ns = PT_MIN(cfg->poll_ns, cfg->heartbeat_ns);
    cfg->hang_floor_ns = pt_env_int("PERFTRACKER_HANG_MIN_MS", 10000, 10, 86400000) * 1000000LL;
    cfg->auto_interval_ns = pt_env_int("PERFTRACKER_AUTO_INTERVAL_S", 600, 0, 86400 * 30) * 1000000000LL;
    cfg->auto_threshold = (double)pt_env_int("PERFTRACKER_AUTO_THRESHOLD_PCT", 5, 1, 1000) / 100.0;
    snprintf(cfg->log.prefix, sizeof cfg->log.prefix, "perftracker[rank %d]: ", env->rank);
    int configured = pt_auth_agent_key(&cfg->key, err);
    if (configured < 0)
        return -1;
    /* Rank 0 makes the job secret; the ranks on other machines wait for it. Those on rank
     * 0's machine need none: they connect through the coordinator's Unix socket. */
    cfg->key_pending = configured == 0 && !pt_net_is_local_socket(cfg->coordinator_host);
    return 0;
}

bool pt_agent_coordinator_is_here(const pt_job_env *env)
{
    return env->rank == 0 || pt_job_env_single_node(env) || pt_net_is_local_address(env->coordinator_host);
}

bool pt_agent_job_on_one_machine(const pt_job_env *env)
{
    return pt_job_env_single_node(env) || pt_net_is_loopback_address(env->coordinator_host);
}

/* ---------------------------------------------------------------- connection */

static void link_down(pt_agent *a, int64_t now, int64_t backoff_ns, const char *why)
{
    if (a->link == LINK_READY) {
        char where[PT_HOST_MAX + 16];
        pt_net_endpoint_name(a->cfg.coordinator_host, a->cfg.coordinator_port, where, sizeof where);
        pt_ctl_logf(&a->cfg.log, "lost the coordinator at %s (%s); reconnecting", where, why);
    }
    pt_conn_close(&a->conn);
    a->link = LINK_DOWN;
    a->arm_pending = false; /* its round gave this worker up as it lost the link */
    atomic_store(&a->joined, false);
    a->next_connect_ns = now + backoff_ns;
}

static int64_t next_backoff(pt_agent *a)
{
    int64_t b = a->backoff_ns ? PT_MIN(a->backoff_ns * 2, BACKOFF_MAX_NS) : BACKOFF_MIN_NS;
    a->backoff_ns = b;
    return b / 2 + (int64_t)(rand_r(&a->random_state) % (unsigned)(b / 2 / 1000 + 1)) * 1000; /* jitter */
}

static void try_connect(pt_agent *a, int64_t now)
{
    pt_error err;
    int fd = pt_net_connect(a->cfg.coordinator_host, a->cfg.coordinator_port, CONNECT_TIMEOUT_MS, &err);
    if (fd < 0) {
        if (!a->unreachable_since_ns)
            a->unreachable_since_ns = now;
        /* Workers start before rank 0's coordinator listens: stay quiet for a while. */
        if (now - a->unreachable_since_ns > UNREACHABLE_LOG_AFTER_NS &&
            now - a->last_unreachable_log_ns > 10 * UNREACHABLE_LOG_AFTER_NS) {
            pt_ctl_logf(&a->cfg.log, "%s (still retrying)", err.message);
            a->last_unreachable_log_ns = now;
        }
        a->next_connect_ns = now + next_backoff(a);
        return;
    }
    pt_conn_init(&a->conn, fd, PT_CTL_MAX_FRAME + (1u << 20));
    a->conn.in_limit = 64u << 10; /* the coordinator only ever sends small frames */
    a->link = LINK_HANDSHAKE;
    a->handshake_deadline_ns = now + HANDSHAKE_TIMEOUT_NS;
}

/* Takes the job secret's key if the training thread has handed it over: true when the
 * agent may connect. */
static bool have_key(pt_agent *a, int64_t now)
{
    if (!atomic_load(&a->waiting_for_key))
        return true;
    if (atomic_load(&a->key_offered)) {
        pthread_mutex_lock(&a->key_lock);
        a->cfg.key = a->offered_key;
        memset(&a->offered_key, 0, sizeof a->offered_key);
        pthread_mutex_unlock(&a->key_lock);
        atomic_store(&a->waiting_for_key, false);
        if (a->said_no_key)
            pt_ctl_logf(&a->cfg.log, "received the job secret; connecting to the coordinator");
        return true;
    }
    if (!a->said_no_key && now - a->created_ns > NO_SECRET_LOG_AFTER_NS) {
        pt_ctl_logf(&a->cfg.log, "not connecting to the coordinator: this worker has not received the job secret "
                    "from rank 0. Rank 0 hands it over through the job's torch.distributed store once "
                    "init_process_group() has run and PerfTracker() is constructed there and here (and step() is "
                    "called); a job without torch.distributed needs PERFTRACKER_SECRET or PERFTRACKER_SECRET_FILE "
                    "set for every rank");
        a->said_no_key = true;
    }
    return false;
}

static void send_or_drop(pt_agent *a, const pt_ctl_msg *m)
{
    pt_error err;
    if (pt_conn_send(&a->conn, m, &err) != 0)
        pt_ctl_logf(&a->cfg.log, "dropped a %s message: %s", pt_ctl_type_name(m->type), err.message);
}

/* What the collector says, inside the ranges the protocol carries (a counter past 2^53
 * steps or a step of more than 30 days is clamped, never sent as a frame the
 * coordinator would refuse). */
static int64_t clamp_steps(int64_t steps)
{
    return PT_MIN(PT_MAX(steps, 0), PT_CTL_MAX_STEP);
}

static int64_t clamp_duration(int64_t ns)
{
    return PT_MIN(PT_MAX(ns, 0), PT_CTL_MAX_DURATION_NS);
}

/* What a heartbeat and a hang report both say: the round, the steps done, the mean
 * step and how long the worker has been stalled. */
static pt_ctl_msg progress_msg(const pt_agent *a, pt_ctl_type type, int64_t stalled_ns)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, type);
    m.round = a->armed_round;
    m.steps_done = clamp_steps(a->steps_done);
    m.mean_step_ns = clamp_duration(a->mean_step_ns);
    m.stalled_ns = clamp_duration(stalled_ns);
    return m;
}

static void send_heartbeat(pt_agent *a, int64_t now)
{
    pt_ctl_msg m = progress_msg(a, PT_CTL_HEARTBEAT, a->stalled_ns);
    send_or_drop(a, &m);
    a->last_heartbeat_ns = now;
    a->heartbeat_steps = a->steps_done;
}

/* The buffer is taken at the first snapshot, not before: most workers never send one, and
 * a simulated fleet of 100k agents in few processes must not map 192 KB each. */
static void take_snapshot(pt_agent *a)
{
    if (!a->stack) {
        char *buf = malloc(PT_CTL_MAX_STACK + 2 * PT_CTL_MAX_SNAPSHOT);
        if (!buf)
            return; /* sent without stacks */
        a->stack = buf;
        a->threads = buf + PT_CTL_MAX_STACK;
        a->collectives = a->threads + PT_CTL_MAX_SNAPSHOT;
    }
    a->stack[0] = a->threads[0] = a->collectives[0] = '\0';
    if (a->hooks.snapshot) {
        pt_agent_snapshot snap = {a->stack, PT_CTL_MAX_STACK, a->threads, PT_CTL_MAX_SNAPSHOT, a->collectives,
                                  PT_CTL_MAX_SNAPSHOT};
        a->hooks.snapshot(a->hooks.ctx, &snap);
        a->stack[PT_CTL_MAX_STACK - 1] = a->threads[PT_CTL_MAX_SNAPSHOT - 1] = '\0';
        a->collectives[PT_CTL_MAX_SNAPSHOT - 1] = '\0';
    }
}

static void sample_status(pt_agent *a, int64_t now);

/* Where this worker is, with every thread's stack and its collectives, taken now:
 * whenever it is asked (a probe), it stopped stepping, or a collective raised. */
static void send_hang(pt_agent *a)
{
    /* The time since its last step is measured now, from the collector's own count, not
     * from the last poll's: a poll's age (and the stacks' wait for the GIL) is not time
     * without a step, and a healthy rank would read as stopped. */
    int64_t now = pt_now_ns();
    sample_status(a, now);
    int64_t since_step_ns = a->last_step_end_ns > 0 && now > a->last_step_end_ns ? now - a->last_step_end_ns : 0;
    take_snapshot(a);
    pt_ctl_msg m = progress_msg(a, PT_CTL_HANG, a->stalled_ns); /* as just sampled */
    m.since_step_ns = clamp_duration(since_step_ns);
    m.stack = pt_ctl_str(a->stack);
    m.threads = pt_ctl_str(a->threads);
    m.collectives = pt_ctl_str(a->collectives);
    send_or_drop(a, &m);
    a->failure_unsent = false;
}

static void send_auto_request(pt_agent *a, uint8_t kind, int64_t now)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_AUTO_REQUEST);
    m.kind = kind;
    m.steps_done = clamp_steps(a->steps_done);
    m.mean_step_ns = clamp_duration(kind == PT_AUTO_SLOWDOWN ? pt_step_tracker_recent_mean(&a->tracker)
                                                             : a->mean_step_ns);
    m.best_mean_ns = clamp_duration(pt_step_tracker_best_mean(&a->tracker));
    m.stalled_ns = clamp_duration(a->stalled_ns);
    send_or_drop(a, &m);
    a->next_auto_ns = now + a->cfg.auto_interval_ns;
    pt_ctl_logf(&a->cfg.log, "automatic trigger: %s at step %lld (recent mean %.1f ms, best %.1f ms)",
                kind == PT_AUTO_SLOWDOWN ? "slowdown" : kind == PT_AUTO_HANG ? "hang" : "a collective failed",
                (long long)a->steps_done,
                (double)m.mean_step_ns / 1e6, (double)m.best_mean_ns / 1e6);
}

/* mkdir -p for the raw trace directory. pt_make_dirs (report.h) would do, but it uses the
 * allocators that exit on failure, which the training process must never risk. */
static int make_dirs(const char *path, char *why, size_t why_cap)
{
    char buf[PT_CTL_MAX_PATH];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                snprintf(why, why_cap, "cannot create %.300s: %s", buf, strerror(errno));
                return -1;
            }
            *p = saved;
            if (!saved)
                return 0;
        }
    }
}

static void send_armed(pt_agent *a, uint32_t round, int status, const char *text, const char *path)
{
    pt_ctl_msg reply;
    pt_ctl_msg_init(&reply, PT_CTL_ARMED);
    reply.round = round;
    reply.status = status;
    reply.text = pt_ctl_str(text);
    reply.path = pt_ctl_str(path);
    send_or_drop(a, &reply);
}

/* Arms the pending window. A busy collector (the window of an earlier round still being
 * dropped or written, which takes up to a step and a write) is asked again at the next
 * poll while the start step is still ahead; after that the worker says why it has none. */
static void try_arm(pt_agent *a)
{
    int rc = a->hooks.arm_window ? a->hooks.arm_window(a->hooks.ctx, a->pending_start_step, a->pending_steps,
                                                       a->pending_path) : -1;
    if (rc != 0 && a->hooks.arm_window && a->steps_done < a->pending_start_step)
        return; /* still pending */
    char text[512] = "";
    if (rc != 0 && a->window_active)
        snprintf(text, sizeof text, "the collector could not arm the window: it was still busy with the window of "
                 "round %u when this round's began (step %lld)", a->armed_round,
                 (long long)pt_step_count(a->pending_start_step));
    else if (rc != 0)
        snprintf(text, sizeof text, "the collector could not arm the window: it was busy with another one (one the "
                 "training script armed itself, with PerfTracker(wait=..., steps=...) or PERFTRACKER_WAIT/_STEPS), "
                 "still open or being written when this round's began (step %lld)",
                 (long long)pt_step_count(a->pending_start_step));
    a->arm_pending = false;
    if (rc == 0) {
        a->armed_round = a->pending_round;
        a->window_active = true;
        a->window_start_step = a->pending_start_step;
        a->window_steps = a->pending_steps;
        a->window_end_step = a->pending_start_step + a->pending_steps;
    }
    send_armed(a, a->pending_round, rc, text, a->pending_path);
}

static void handle_arm(pt_agent *a, const pt_ctl_msg *m)
{
    char dir[PT_CTL_MAX_PATH], text[512] = "";
    pt_ctl_copy_str(dir, sizeof dir, m->path);
    a->pending_path[0] = '\0';
    if (dir[0] && make_dirs(dir, text, sizeof text) == 0) {
        char name[PT_HOST_MAX + 64];
        pt_worker_file_name(name, sizeof name, a->cfg.host, a->cfg.local_rank, a->cfg.pid, ".ptrace");
        snprintf(a->pending_path, sizeof a->pending_path, "%.3500s/%.500s", dir, name);
    }
    a->arm_pending = true;
    a->pending_round = m->round;
    a->pending_start_step = m->start_step;
    a->pending_steps = m->steps;
    try_arm(a);
}

/* Every CANCEL is answered with a SUMMARY of its round that carries no profile: at once
 * when no window of that round is in flight here, else once the collector has dropped
 * it (deliver_finished_window). The coordinator waits for that before it arms again. */
static void send_cancelled(pt_agent *a, uint32_t round)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_SUMMARY);
    m.round = round;
    m.status = 1;
    m.text = pt_ctl_str("the round was cancelled");
    send_or_drop(a, &m);
}

static void handle_cancel(pt_agent *a, const pt_ctl_msg *m)
{
    if (a->arm_pending && a->pending_round == m->round)
        a->arm_pending = false; /* never armed: nothing to drop */
    if (!a->window_active || a->armed_round != m->round) {
        send_cancelled(a, m->round);
        return;
    }
    pt_ctl_logf(&a->cfg.log, "round %u was cancelled: dropping its window", m->round);
    a->cancelled_round = m->round;
    if (a->hooks.cancel_window)
        a->hooks.cancel_window(a->hooks.ctx);
}

static void handle_challenge(pt_agent *a, const pt_ctl_msg *m, int64_t now)
{
    pt_ctl_msg reply;
    if (pt_auth_answer_challenge(&a->cfg.key, PT_CTL_ROLE_AGENT, m, a->server_nonce, a->client_nonce, &reply) != 0) {
        link_down(a, now, REFUSED_BACKOFF_NS, "protocol version mismatch");
        return;
    }
    send_or_drop(a, &reply);
}

static void handle_welcome(pt_agent *a, const pt_ctl_msg *m, int64_t now)
{
    /* Through a Unix socket (the coordinator's, or the node's relay) the peer is this user's
     * process: pt_net_connect asked the kernel. Over TCP it proves the job key. */
    if (!pt_net_is_local_socket(a->cfg.coordinator_host) &&
        !pt_auth_server_proven(&a->cfg.key, PT_CTL_ROLE_AGENT, a->server_nonce, a->client_nonce, m->mac)) {
        char where[PT_HOST_MAX + 16];
        pt_net_endpoint_name(a->cfg.coordinator_host, a->cfg.coordinator_port, where, sizeof where);
        pt_ctl_logf(&a->cfg.log, "the peer at %s does not know the job key; not joining it", where);
        link_down(a, now, REFUSED_BACKOFF_NS, "server proof mismatch");
        return;
    }
    a->link = LINK_READY;
    a->backoff_ns = 0;
    a->unreachable_since_ns = 0;
    pt_ctl_msg join;
    pt_ctl_msg_init(&join, PT_CTL_JOIN);
    join.worker.rank = a->cfg.rank;
    join.worker.local_rank = a->cfg.local_rank;
    join.worker.world_size = a->cfg.world_size;
    join.worker.node_rank = a->cfg.node_rank;
    join.worker.pid = a->cfg.pid;
    join.worker.host = pt_ctl_str(a->cfg.host);
    send_or_drop(a, &join);
    send_heartbeat(a, now);
    atomic_store(&a->joined, true);
}

static void handle_message(pt_agent *a, const pt_ctl_msg *m, int64_t now)
{
    if (a->link == LINK_HANDSHAKE) {
        if (m->type == PT_CTL_CHALLENGE) {
            handle_challenge(a, m, now);
        } else if (m->type == PT_CTL_WELCOME) {
            handle_welcome(a, m, now);
        }
    }
    if (m->type == PT_CTL_REFUSED) {
        char why[256];
        pt_ctl_copy_str(why, sizeof why, m->text);
        pt_ctl_logf(&a->cfg.log, "the coordinator refused this worker: %s", why);
        atomic_fetch_add(&a->refusals, 1);
        link_down(a, now, REFUSED_BACKOFF_NS, why);
    }
    if (a->link != LINK_READY)
        return;
    if (m->type == PT_CTL_ARM)
        handle_arm(a, m);
    else if (m->type == PT_CTL_CANCEL)
        handle_cancel(a, m);
    else if (m->type == PT_CTL_PROBE)
        send_hang(a);
}

/* ---------------------------------------------------------------- periodic work */

static void sample_status(pt_agent *a, int64_t now)
{
    int64_t steps = 0, last_end = 0, mean = 0;
    if (a->hooks.status)
        a->hooks.status(a->hooks.ctx, &steps, &last_end, &mean);
    if (pt_step_source(steps) != pt_step_source(a->steps_done)) { /* the steps are found anew (util/step_number.h) */
        pt_step_tracker_init(&a->tracker); /* their times restart */
        if (a->window_active) { /* and the collector moved the window with them */
            a->window_start_step = pt_step_follow(a->window_start_step, a->steps_done, steps);
            a->window_end_step = a->window_start_step + a->window_steps;
        }
    }
    pt_step_tracker_observe(&a->tracker, steps, last_end, !a->window_active);
    a->steps_done = steps;
    a->last_step_end_ns = last_end;
    a->mean_step_ns = mean > 0 ? mean : pt_step_tracker_recent_mean(&a->tracker);
    a->stalled_ns = pt_hang_stalled_ns(now, steps, last_end, a->mean_step_ns, a->cfg.hang_factor,
                                       a->cfg.hang_floor_ns);
    if (a->window_active && steps > a->window_end_step + WINDOW_LOST_STEPS) {
        /* The collector has not reported this window (aborted, its writer stuck, or
         * still summarizing: a starved host): stop treating steps as profiled, or the
         * automatic trigger would stay off. A summary that comes later is still sent. */
        pt_ctl_logf(&a->cfg.log, "the window of round %u ended %d steps ago and its summary is not ready; its steps "
                    "no longer count as profiled (a late summary is still sent)", a->armed_round, WINDOW_LOST_STEPS);
        a->window_active = false;
    }
    if (a->stalled_ns == 0)
        a->hang_reported_steps = -1;
}

static void periodic(pt_agent *a, int64_t now)
{
    sample_status(a, now);
    if (a->arm_pending && a->link == LINK_READY)
        try_arm(a);
    if (a->hooks.collective_failed && a->hooks.collective_failed(a->hooks.ctx))
        a->failure_unsent = true;
    if (a->link != LINK_READY)
        return;
    if (a->failure_unsent) {
        /* Sent before the process is likely to end (the error propagates): the report
         * shows the failed call even if nobody asks this worker again. */
        send_hang(a);
        if (a->cfg.auto_trigger && now >= a->next_auto_ns)
            send_auto_request(a, PT_AUTO_COLLECTIVE_ERROR, now);
    }
    if (a->stalled_ns > 0 && a->hang_reported_steps != a->steps_done) {
        send_hang(a);
        a->hang_reported_steps = a->steps_done;
        if (a->cfg.auto_trigger && now >= a->next_auto_ns)
            send_auto_request(a, PT_AUTO_HANG, now);
    }
    if (a->cfg.auto_trigger && !a->window_active && now >= a->next_auto_ns &&
        pt_step_tracker_slowdown(&a->tracker, a->cfg.auto_threshold)) {
        send_auto_request(a, PT_AUTO_SLOWDOWN, now);
        pt_step_tracker_reset(&a->tracker);
    }
    /* In a window every step is news (the CLI shows steps profiled), at a tenth of the
     * period: a big job's longer period slows these too, since all its ranks step at once. */
    bool stepped = a->steps_done != a->heartbeat_steps;
    int64_t progress_ns = PT_MAX(PROGRESS_HEARTBEAT_NS, a->cfg.heartbeat_ns / 10);
    if (now - a->last_heartbeat_ns >= a->cfg.heartbeat_ns ||
        (stepped && a->window_active && now - a->last_heartbeat_ns >= progress_ns))
        send_heartbeat(a, now);
}

static void deliver_finished_window(pt_agent *a)
{
    /* Called on every turn: a driven fleet turns 400,000 agents a second, so the 4.6 KB
     * window is copied (and the mailbox cleared) only when one is there. */
    finished_window w;
    bool taken = false;
    pthread_mutex_lock(&a->mailbox_lock);
    if (a->mailbox.present && a->link == LINK_READY) {
        w = a->mailbox;
        memset(&a->mailbox, 0, sizeof a->mailbox);
        taken = true;
    }
    pthread_mutex_unlock(&a->mailbox_lock);
    if (!taken)
        return;
    /* Where it stands first, so the coordinator's step counts (and the CLI's progress)
     * are current when the summary lands. */
    sample_status(a, pt_now_ns());
    send_heartbeat(a, pt_now_ns());
    a->window_active = false;
    if (a->cancelled_round && a->cancelled_round == a->armed_round) { /* nobody waits for its profile */
        send_cancelled(a, a->armed_round);
        a->cancelled_round = 0;
        free(w.summary);
        return;
    }
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_SUMMARY);
    m.round = a->armed_round;
    m.status = w.status;
    m.text = pt_ctl_str(w.status == 0 ? "" : w.why[0] ? w.why : "the collector failed to finish the window");
    m.path = pt_ctl_str(w.raw_trace_path);
    m.blob = pt_ctl_blob(w.summary, w.summary ? w.len : 0);
    send_or_drop(a, &m);
    free(w.summary);
}

/* ---------------------------------------------------------------- the thread */

static int poll_timeout_ms(const pt_agent *a, int64_t now)
{
    int64_t wait = a->cfg.poll_ns;
    if (a->link == LINK_DOWN)
        wait = PT_MIN(wait, PT_MAX(a->next_connect_ns - now, 0));
    return (int)((wait + 999999) / 1000000);
}

static void service_socket(pt_agent *a, short revents, int64_t now)
{
    pt_error err;
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        int rc = pt_conn_read(&a->conn, &err);
        pt_ctl_msg m;
        int got;
        while (a->link != LINK_DOWN && (got = pt_conn_next(&a->conn, &m, &err)) == 1)
            handle_message(a, &m, now);
        if (a->link != LINK_DOWN && (rc < 0 || got < 0)) {
            link_down(a, now, next_backoff(a), err.message);
            return;
        }
    }
    if (a->link != LINK_DOWN && pt_conn_flush(&a->conn, &err) != 0)
        link_down(a, now, next_backoff(a), err.message);
}

/* The process is leaving: a window it finished on the way out (the job ended inside it)
 * still goes to the coordinator, then BYE, so the round hears "exited" only from a
 * worker that had nothing more to send. */
static void say_goodbye(pt_agent *a)
{
    if (a->link != LINK_READY)
        return;
    pthread_mutex_lock(&a->mailbox_lock);
    bool had_summary = a->mailbox.present;
    pthread_mutex_unlock(&a->mailbox_lock);
    if (a->failure_unsent || (a->hooks.collective_failed && a->hooks.collective_failed(a->hooks.ctx))) {
        /* It ends because a collective raised: ask for the report now (rank 0's process
         * waits for a running round as it exits) and say where this worker is, before
         * its window's outcome settles it in a round. */
        int64_t now = pt_now_ns();
        sample_status(a, now); /* the step count it says must be the one it ends with */
        if (a->cfg.auto_trigger && now >= a->next_auto_ns)
            send_auto_request(a, PT_AUTO_COLLECTIVE_ERROR, now);
        send_hang(a);
    }
    deliver_finished_window(a);
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_BYE);
    send_or_drop(a, &m);
    pt_error err;
    /* Never hold up the process's exit for long: a summary is tens of KB, on loopback or
     * the job's own network. */
    int64_t give_up = pt_now_ns() + (had_summary ? 2000000000LL : 200000000LL);
    while (pt_conn_pending(&a->conn) > 0 && pt_now_ns() < give_up) {
        if (pt_conn_flush(&a->conn, &err) != 0)
            break;
        struct pollfd p = {a->conn.fd, POLLOUT, 0};
        poll(&p, 1, 20);
    }
}

/* What is due whenever the loop turns: the connection, the status, the mailbox. */
static void due_work(pt_agent *a, int64_t now)
{
    if (a->link == LINK_DOWN && now >= a->next_connect_ns && have_key(a, now))
        try_connect(a, now);
    if (a->link == LINK_HANDSHAKE && now > a->handshake_deadline_ns)
        link_down(a, now, next_backoff(a), "handshake timed out");
    periodic(a, now);
    deliver_finished_window(a);
}

/* Writes what is queued, then gives back the buffers nothing waits in: between frames
 * (a heartbeat every few seconds, a summary a round) an agent holds none, not the
 * largest it ever needed -- and a fleet of them on one machine (the simulated 100k)
 * reuses the same few buffers instead of faulting in a fresh summary's worth of pages
 * per agent per round. */
static void flush_and_trim(pt_agent *a)
{
    pt_conn_flush(&a->conn, NULL);
    pt_conn_trim(&a->conn);
}

static void *agent_main(void *arg)
{
    pt_agent *a = arg;
    while (!atomic_load(&a->stop)) {
        int64_t now = pt_now_ns();
        due_work(a, now);

        struct pollfd fds[2] = {{a->wake_fd, POLLIN, 0}, {a->conn.fd, POLLIN, 0}};
        if (a->link != LINK_DOWN && pt_conn_pending(&a->conn) > 0)
            fds[1].events |= POLLOUT;
        if (a->link != LINK_DOWN)
            flush_and_trim(a);
        int n = poll(fds, a->link != LINK_DOWN ? 2 : 1, poll_timeout_ms(a, now));
        if (n <= 0)
            continue;
        if (fds[0].revents & POLLIN) {
            uint64_t drained;
            ssize_t ignored = read(a->wake_fd, &drained, sizeof drained);
            (void)ignored;
        }
        if (a->link != LINK_DOWN && fds[1].revents)
            service_socket(a, fds[1].revents, pt_now_ns());
    }
    if (atomic_load(&a->say_bye))
        say_goodbye(a);
    pt_conn_close(&a->conn);
    return NULL;
}

/* Everything but the thread. A driven agent has no wake-up descriptor: its driver turns it. */
static pt_agent *new_agent(const pt_agent_config *cfg, const pt_agent_hooks *hooks, bool driven, pt_error *err)
{
    pt_agent *a = calloc(1, sizeof *a);
    int wake = driven ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!a || (!driven && wake < 0)) {
        pt_error_set(err, "cannot allocate the agent: %s", strerror(errno ? errno : ENOMEM));
        free(a);
        if (wake >= 0)
            close(wake);
        return NULL;
    }
    a->cfg = *cfg;
    a->hooks = *hooks;
    a->driven = driven;
    a->wake_fd = wake;
    a->hang_reported_steps = -1;
    a->random_state = (unsigned)(cfg->rank * 2654435761u) ^ (unsigned)pt_now_ns();
    a->created_ns = pt_now_ns();
    atomic_store(&a->waiting_for_key, cfg->key_pending);
    pthread_mutex_init(&a->mailbox_lock, NULL);
    pthread_mutex_init(&a->key_lock, NULL);
    pt_step_tracker_init(&a->tracker);
    pt_conn_init(&a->conn, -1, 0);
    return a;
}

pt_agent *pt_agent_create_driven(const pt_agent_config *cfg, const pt_agent_hooks *hooks, pt_error *err)
{
    return new_agent(cfg, hooks, true, err);
}

int pt_agent_fd(const pt_agent *a, short *events)
{
    *events = (short)(POLLIN | (a->link != LINK_DOWN && pt_conn_pending(&a->conn) > 0 ? POLLOUT : 0));
    return a->link != LINK_DOWN ? a->conn.fd : -1;
}

void pt_agent_drive(pt_agent *a, short revents, int64_t now)
{
    if (a->link != LINK_DOWN && revents)
        service_socket(a, revents, now);
    due_work(a, now);
    if (a->link != LINK_DOWN)
        flush_and_trim(a);
}

pt_agent *pt_agent_create(const pt_agent_config *cfg, const pt_agent_hooks *hooks, pt_error *err)
{
    pt_agent *a = new_agent(cfg, hooks, false, err);
    if (!a)
        return NULL;

    /* The thread must never receive the process's signals (Python handles SIGINT on its
     * main thread), so it starts with all of them blocked. */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, cfg->thread_stack_bytes ? cfg->thread_stack_bytes : 256 * 1024);
    int rc = pthread_create(&a->thread, &attr, agent_main, a);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc != 0) {
        pt_error_set(err, "cannot start the agent thread: %s", strerror(rc));
        close(a->wake_fd);
        pthread_mutex_destroy(&a->mailbox_lock);
        pthread_mutex_destroy(&a->key_lock);
        free(a);
        return NULL;
    }
    return a;
}

static void wake(pt_agent *a)
{
    if (a->wake_fd < 0)
        return; /* driven: its driver turns it */
    uint64_t one = 1;
    ssize_t ignored = write(a->wake_fd, &one, sizeof one);
    (void)ignored;
}

void pt_agent_finish_window(pt_agent *a, const void *summary, size_t len, const char *raw_trace_path,
                            int status, const char *why)
{
    uint8_t *copy = summary && len ? malloc(len) : NULL;
    bool lost = summary && len && !copy;
    if (copy)
        memcpy(copy, summary, len);
    pthread_mutex_lock(&a->mailbox_lock);
    free(a->mailbox.summary); /* an undelivered older window is superseded */
    a->mailbox.present = true;
    a->mailbox.summary = copy;
    a->mailbox.len = copy ? len : 0;
    a->mailbox.status = lost ? -1 : status;
    if (lost)
        snprintf(a->mailbox.why, sizeof a->mailbox.why, "out of memory copying the %zu-byte summary", len);
    else
        snprintf(a->mailbox.why, sizeof a->mailbox.why, "%s", status != 0 && why ? why : "");
    snprintf(a->mailbox.raw_trace_path, sizeof a->mailbox.raw_trace_path, "%s", raw_trace_path ? raw_trace_path : "");
    pthread_mutex_unlock(&a->mailbox_lock);
    wake(a);
}

int pt_agent_offer_job_secret(pt_agent *a, const char *hex, size_t len, pt_error *err)
{
    pt_key key;
    if (pt_auth_agent_key_from_job_secret(hex, len, &key, err) != 0)
        return -1;
    if (!atomic_load(&a->waiting_for_key))
        return 0; /* it has one (a configured secret, or an earlier offer) */
    pthread_mutex_lock(&a->key_lock);
    a->offered_key = key;
    pthread_mutex_unlock(&a->key_lock);
    memset(&key, 0, sizeof key);
    atomic_store(&a->key_offered, true);
    wake(a);
    return 0;
}

bool pt_agent_waits_for_job_secret(pt_agent *a)
{
    return atomic_load(&a->waiting_for_key);
}

void pt_agent_destroy(pt_agent *a, bool say_bye)
{
    if (!a)
        return;
    atomic_store(&a->say_bye, say_bye);
    atomic_store(&a->stop, true);
    if (a->driven) {
        if (say_bye)
            say_goodbye(a);
        pt_conn_close(&a->conn);
    } else {
        wake(a);
        pthread_join(a->thread, NULL);
        close(a->wake_fd);
    }
    free(a->mailbox.summary);
    pthread_mutex_destroy(&a->mailbox_lock);
    pthread_mutex_destroy(&a->key_lock);
    memset(&a->cfg.key, 0, sizeof a->cfg.key);
    free(a->stack);
    free(a);
}

bool pt_agent_is_joined(pt_agent *a)
{
    return atomic_load(&a->joined);
}

int pt_agent_refusals(pt_agent *a)
{
    return atomic_load(&a->refusals);
}

/* ---------------------------------------------------------------- agent.h: the process's agent */

static pthread_mutex_t process_lock = PTHREAD_MUTEX_INITIALIZER;
static pt_agent *process_agent;
static pt_coordinator *process_coordinator;
static pid_t process_owner;
static int auto_trigger_requested;
/* Local rank 0 of a job in tree mode: its node's relay, and how to start it once the agent
 * key is known (at start on rank 0 or with a configured secret, else with the job secret). */
static pt_relay *process_relay;
static bool relay_pending;
static bool relay_key_pending; /* the relay reaches a coordinator on another machine and waits for the job secret */
static pt_relay_config process_relay_cfg;
/* Rank 0's job secret until Python has put it into the job's store; never written anywhere
 * else (no file, no environment, no log line). */
static char process_job_secret[PT_JOB_SECRET_HEX + 1];

void pt_agent_set_auto_trigger(int enabled)
{
    pthread_mutex_lock(&process_lock);
    auto_trigger_requested = enabled != 0;
    pthread_mutex_unlock(&process_lock);
}

static void start_relay_locked(const pt_key *key)
{
    if (!relay_pending)
        return;
    relay_pending = false;
    process_relay_cfg.key = *key;
    pt_error err;
    process_relay = pt_relay_create(&process_relay_cfg, &err);
    if (process_relay && pt_relay_start_thread(process_relay, &err) != 0) {
        pt_relay_destroy(process_relay);
        process_relay = NULL;
    }
    if (!process_relay)
        pt_ctl_logf(&process_relay_cfg.log, "cannot start this node's relay (%s): its ranks will not reach the "
                    "coordinator; PERFTRACKER_RELAY=0 makes every rank connect directly", err.message);
    memset(&process_relay_cfg.key, 0, sizeof process_relay_cfg.key);
}

/* Tree mode: this agent talks to its node's relay on its Unix socket; local rank 0 hosts it. */
static void plan_relay_locked(pt_agent_config *cfg, const pt_job_env *env)
{
    if (!pt_relay_wanted(env->world_size, env->local_world_size))
        return;
    char socket_name[PT_HOST_MAX];
    pt_relay_socket_for(env->coordinator_port, socket_name, sizeof socket_name);
    if (env->local_rank == 0) {
        pt_relay_config *rc = &process_relay_cfg;
        memset(rc, 0, sizeof *rc);
        rc->rank = env->rank, rc->node_rank = env->node_rank, rc->world_size = env->world_size, rc->pid = env->pid;
        snprintf(rc->host, sizeof rc->host, "%s", env->host);
        snprintf(rc->listen_host, sizeof rc->listen_host, "%s", socket_name);
        snprintf(rc->coordinator_host, sizeof rc->coordinator_host, "%s", cfg->coordinator_host);
        rc->coordinator_port = cfg->coordinator_port;
        rc->max_locals = PT_MAX(env->local_world_size * 2 + 8, 16);
        rc->beat_hold_ns = cfg->heartbeat_ns; /* the node's ranks beat at this period too */
        snprintf(rc->log.prefix, sizeof rc->log.prefix, "perftracker[relay %d]: ", env->node_rank);
        relay_pending = true;
    }
    snprintf(cfg->coordinator_host, sizeof cfg->coordinator_host, "%s", socket_name);
    cfg->coordinator_port = 0;
    /* The node's relay takes this worker on the kernel's word: only the relay's own link
     * to a coordinator on another machine needs the job key. */
    relay_key_pending = relay_pending && cfg->key_pending;
    cfg->key_pending = false;
}

static int start_locked(const pt_agent_hooks *hooks, pt_error *err)
{
    if (process_agent && process_owner == getpid()) {
        pt_error_set(err, "the perftracker agent is already running in this process");
        return -1;
    }
    process_agent = NULL, process_coordinator = NULL, process_relay = NULL; /* a forked child inherits no threads */
    relay_pending = relay_key_pending = false;
    if (strcmp(pt_env_str("PERFTRACKER_AGENT", "1"), "0") == 0) {
        pt_error_set(err, "PERFTRACKER_AGENT=0");
        return 1;
    }
    pt_agent_config cfg;
    pt_job_env env;
    int rc = pt_agent_config_from_env(&cfg, &env, err);
    if (rc != 0)
        return rc;
    cfg.auto_trigger = pt_env_int("PERFTRACKER_AUTO_TRIGGER", auto_trigger_requested, 0, 1) != 0;
    plan_relay_locked(&cfg, &env);
    if (env.rank == 0) {
        pt_coordinator_config ccfg;
        if (pt_coordinator_config_from_env(&ccfg, &env, err) != 0)
            return -1;
        ccfg.auto_trigger = cfg.auto_trigger; /* the job opts in where rank 0 does */
        cfg.key = ccfg.agent_key;
        cfg.key_pending = false;
        /* Published only when some rank is on another machine: the ranks on this one
         * connect through the coordinator's socket, and a secret in the store is one other
         * users may read. */
        if (!pt_agent_job_on_one_machine(&env))
            snprintf(process_job_secret, sizeof process_job_secret, "%s", ccfg.job_secret);
        memset(ccfg.job_secret, 0, sizeof ccfg.job_secret);
        process_coordinator = pt_coordinator_start(&ccfg, err);
        memset(&ccfg, 0, sizeof ccfg);
        if (!process_coordinator) {
            memset(process_job_secret, 0, sizeof process_job_secret);
            return -1;
        }
    }
    if (!relay_key_pending)
        start_relay_locked(&cfg.key);
    process_agent = pt_agent_create(&cfg, hooks, err);
    memset(&cfg.key, 0, sizeof cfg.key);
    if (!process_agent) {
        pt_coordinator_stop(process_coordinator);
        process_coordinator = NULL;
        memset(process_job_secret, 0, sizeof process_job_secret);
        return -1;
    }
    process_owner = getpid();
    return 0;
}

int pt_agent_start(const pt_agent_hooks *hooks, pt_error *err)
{
    pthread_mutex_lock(&process_lock);
    int rc = start_locked(hooks, err);
    pthread_mutex_unlock(&process_lock);
    return rc;
}

void pt_agent_window_done(const void *summary, size_t len, const char *raw_trace_path, int status, const char *why)
{
    pthread_mutex_lock(&process_lock);
    if (process_agent && process_owner == getpid())
        pt_agent_finish_window(process_agent, summary, len, raw_trace_path, status, why);
    pthread_mutex_unlock(&process_lock);
}

bool pt_agent_job_secret_to_publish(char *hex, size_t cap)
{
    pthread_mutex_lock(&process_lock);
    bool have = process_agent && process_owner == getpid() && process_job_secret[0] && cap > PT_JOB_SECRET_HEX;
    if (have)
        snprintf(hex, cap, "%s", process_job_secret);
    pthread_mutex_unlock(&process_lock);
    return have;
}

void pt_agent_job_secret_published(void)
{
    pthread_mutex_lock(&process_lock);
    memset(process_job_secret, 0, sizeof process_job_secret);
    pthread_mutex_unlock(&process_lock);
}

bool pt_agent_needs_job_secret(void)
{
    pthread_mutex_lock(&process_lock);
    bool needs = process_agent && process_owner == getpid() &&
                 (pt_agent_waits_for_job_secret(process_agent) || (relay_pending && relay_key_pending));
    pthread_mutex_unlock(&process_lock);
    return needs;
}

int pt_agent_set_job_secret(const char *hex, size_t len, pt_error *err)
{
    pthread_mutex_lock(&process_lock);
    int rc = -1;
    if (process_agent && process_owner == getpid()) {
        rc = pt_agent_offer_job_secret(process_agent, hex, len, err);
        pt_key key;
        if (rc == 0 && relay_pending && pt_auth_agent_key_from_job_secret(hex, len, &key, err) == 0)
            start_relay_locked(&key);
        memset(&key, 0, sizeof key);
    } else
        pt_error_set(err, "the perftracker agent is not running in this process");
    pthread_mutex_unlock(&process_lock);
    return rc;
}

void pt_agent_abandon(const char *why)
{
    pthread_mutex_lock(&process_lock);
    if (process_agent && process_owner == getpid()) {
        pt_ctl_log log = {NULL, NULL, "perftracker: "};
        pt_ctl_logf(&log, "STOPPED for this job: %s. The training goes on unprofiled; perftracker trusts no worker "
                    "of this job any more. For a job on several machines set PERFTRACKER_SECRET (or "
                    "PERFTRACKER_SECRET_FILE) to a secret of your own, which never goes through the store", why);
        pt_agent_destroy(process_agent, true);
        pt_relay_destroy(process_relay);
        pt_coordinator_stop(process_coordinator);
    }
    process_agent = NULL, process_coordinator = NULL, process_relay = NULL;
    relay_pending = relay_key_pending = false;
    memset(process_job_secret, 0, sizeof process_job_secret);
    pthread_mutex_unlock(&process_lock);
}

void pt_agent_stop(void)
{
    pthread_mutex_lock(&process_lock);
    if (process_owner == getpid()) { /* in a forked child the threads do not exist */
        pt_agent_destroy(process_agent, true);
        /* The node's other ranks may still be sending what they profiled as the job ends:
         * the relay stays while any is connected (at most 2 s), then goes, and the
         * coordinator names whoever was still behind it. */
        for (int i = 0; i < 100 && process_relay && pt_relay_joined(process_relay) > 0; i++)
            nanosleep(&(struct timespec){0, 20000000}, NULL);
        pt_relay_destroy(process_relay);
        /* Rank 0 hosts the coordinator: the other workers may still be sending what they
         * profiled as the job ends, and the CLI waits for it. */
        pt_coordinator_drain(process_coordinator,
                             pt_env_int("PERFTRACKER_EXIT_TIMEOUT", 60, 0, 3600) * 1000000000LL);
        pt_coordinator_stop(process_coordinator);
    }
    process_agent = NULL, process_coordinator = NULL, process_relay = NULL;
    relay_pending = relay_key_pending = false;
    memset(process_job_secret, 0, sizeof process_job_secret);
    pthread_mutex_unlock(&process_lock);
}
