/* coordinator_state.h -- the coordinator's state and the functions its files share
 * (coordinator.c: configuration, handshake, the event loop and the API; coord_peers.c:
 * each peer's buffers and what it may send; coord_round.c: a round's outcomes and its
 * state machine; coord_messages.c: what agents, relays and CLIs say). Internal to
 * src/control: nothing outside these four files includes it. One thread owns all of it
 * (coordinator.c's design comment says how), so none of these functions locks. Calls go
 * one way, coordinator.c -> coord_messages.c -> coord_round.c -> coord_peers.c, but for
 * one: a peer's end (kill_peer, coordinator.c's coord_kill_peer_as, and its
 * coord_bad_frame) is called by whoever finds a peer gone or hostile -- a failed send in
 * coord_peers.c, a relay's bad frame in coord_messages.c -- at once, because it fails
 * the rank's window (coord_round.c) and tells the CLI in the same turn. */
#ifndef PT_CONTROL_COORDINATOR_STATE_H
#define PT_CONTROL_COORDINATOR_STATE_H

#include "control/coordinator.h"
#include "control/round.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

#define kill_peer(c, p, now, why) coord_kill_peer_as(c, p, now, PT_FAIL_DIED, why)
#define DRAIN_BOUND_NS (30 * SEC) /* plus its steps: how long a cancelled window may keep a worker */

/* Shared across the coordinator's files (each defined where its comment is). */
bool coord_admit_input(pt_coordinator *c, peer *p);
void coord_advance_worker(pt_coordinator *c, int32_t rank, int64_t now);
void coord_bad_frame(pt_coordinator *c, peer *p, const char *why, int64_t now);
void coord_begin_hang_report(pt_coordinator *c, round *r, int64_t now);
void coord_begin_profiling(pt_coordinator *c, round *r, int32_t wait, int32_t steps, uint8_t save_raw,
                            const char *raw_dir, int64_t timeout_ns, int64_t now);
int32_t coord_cancel_windows(pt_coordinator *c, round *r, int64_t now);
void coord_check_round(pt_coordinator *c, int64_t now);
bool coord_cli_backlogged(const pt_coordinator *c);
void coord_emit_failure(pt_coordinator *c, int32_t rank, int kind, const char *text, int64_t now);
void coord_emit_summary(pt_coordinator *c, int32_t rank, const pt_ctl_msg *summary, int64_t now);
void coord_end_gathering(pt_coordinator *c, round *r, int64_t now);
void coord_finish_round(pt_coordinator *c, int64_t now);
void coord_flush_stranger_log(pt_coordinator *c, int64_t now);
void coord_forget_snapshot(pt_coordinator *c, snapshot *snap);
void coord_free_round(round *r);
pt_ctl_worker coord_identity_of(const pt_coordinator *c, int32_t rank);
size_t coord_input_limit(const peer *p);
void coord_kill_peer_as(pt_coordinator *c, peer *p, int64_t now, int failure, const char *why);
void coord_list_control(pt_coordinator *c, peer *p);
round *coord_new_round(pt_coordinator *c, enum round_kind kind, int64_t now);
void coord_on_agent_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now);
void coord_on_control_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now);
void coord_on_relay_message(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now);
pt_ctl_progress coord_progress_of(const pt_coordinator *c);
void coord_queue_to(pt_coordinator *c, peer *p, const pt_ctl_msg *m, bool flush, int64_t now);
void coord_refuse(pt_coordinator *c, peer *p, const char *why, int64_t now);
void coord_relay_name(const peer *relay, char *dst, size_t cap);
void coord_release_input(pt_coordinator *c, peer *p);
void coord_reply_error(pt_coordinator *c, peer *p, const char *text, int64_t now);
void coord_send_to(pt_coordinator *c, peer *p, const pt_ctl_msg *m, int64_t now);
void coord_stranger_logf(pt_coordinator *c, int64_t now, const char *fmt, ...) PT_PRINTF(3, 4);
bool coord_terminal(const round_worker *rw);
void coord_unlist_control(pt_coordinator *c, const peer *p);
void coord_update_interest(pt_coordinator *c, peer *p);
bool coord_waiting(const peer *p);

#endif
