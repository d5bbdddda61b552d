/* relay.h -- the per-node relay of the control plane's tree (docs/control-plane.md, "The
 * relay tree").
 *
 * In a large job the first agent of each node (local rank 0) hosts a relay: its node's
 * agents connect to it on loopback instead of to the coordinator, and the relay keeps the
 * node's one connection to rank 0's coordinator. So rank 0 holds one socket per node, not
 * one per worker. Its ranks connect on its Unix socket, whose peer credentials vouch for
 * them (another user's connection is closed, this user's needs no key); upstream it
 * proves the agent key with the relay role when its coordinator is on another machine,
 * and connects through the coordinator's own Unix socket when it is on this one. A
 * rank's JOIN goes up with the uid and pid the kernel gave its connection. It forwards every frame of a joined rank unchanged, wrapped as RELAYED with that
 * rank (the rank it JOINed as: a connection cannot speak for another rank) -- but for
 * heartbeats, which it merges: the node's latest go up together once per beat_hold_ns in
 * one HEARTBEATS frame, each with how long it waited -- unwraps what
 * the coordinator sends for a rank, and says RANK_LOST, with why, the moment a rank's
 * connection drops. It keeps no round state: hangs, timeouts and outcomes stay the
 * coordinator's, one copy of that logic.
 *
 * A relay is driven by pt_relay_turn, from its own thread (pt_relay_start_thread, in a
 * training process) or from a loop that drives many (the simulated fleet): pt_relay_fd is
 * an epoll descriptor, readable when a turn has work. Nothing here blocks but the connect
 * to the coordinator (bounded, as the agent's). */
#ifndef PT_CONTROL_RELAY_H
#define PT_CONTROL_RELAY_H

#include "control/auth.h"
#include "control/net.h"

typedef struct pt_relay_config {
    int32_t rank, node_rank, world_size; /* the relay's own worker: local rank 0 of its node */
    int64_t pid;
    char host[PT_HOST_MAX];
    char listen_host[PT_HOST_MAX];      /* where the node's ranks connect: an abstract Unix
                                           socket "@name" (pt_relay_socket_for; net.h), or a
                                           TCP address (tests) */
    uint16_t listen_port;               /* TCP only; 0: any free port (tests) */
    char coordinator_host[PT_HOST_MAX];
    uint16_t coordinator_port;
    pt_key key;                         /* the agent key (unused when the coordinator is on this machine) */
    int32_t max_locals;                 /* connections from the node at once; 0: 256 (at most
                                           PT_CTL_MAX_BEATS) */
    int64_t beat_hold_ns;               /* how long a rank's heartbeat may wait to go up with the
                                           node's others (and upstream may stay silent, at least
                                           1 s); 0: 1 s, at most 5 s. The agents' heartbeat period
                                           is the natural value */
    int connect_timeout_ms;             /* 0: 1000. A loop driving many relays wants little: a
                                           coordinator whose accept backlog is full drops SYNs,
                                           and a connect then blocks the whole loop (retried
                                           with the backoff instead) */
    int join_timeout_ms;                /* 0: 10 s. How long a local connection may take to
                                           authenticate and JOIN before it is closed */
    pt_ctl_log log;
} pt_relay_config;

typedef struct pt_relay pt_relay;

/* Listens (no thread yet); connects to the coordinator at its first turn. NULL with err. */
pt_relay *pt_relay_create(const pt_relay_config *cfg, pt_error *err);
uint16_t pt_relay_port(const pt_relay *r);
/* An epoll descriptor: readable when pt_relay_turn has something to read or accept. */
int pt_relay_fd(const pt_relay *r);
/* Handles what is ready and the periodic work (reconnects, handshake deadlines). Never
 * blocks past the connect to the coordinator. One thread at a time. */
void pt_relay_turn(pt_relay *r, int64_t now);
/* Runs the turns on a thread of its own, signals blocked (a training process). */
int pt_relay_start_thread(pt_relay *r, pt_error *err);
/* Ranks joined through it now; whether it holds the coordinator. For tests. */
int pt_relay_joined(pt_relay *r);
bool pt_relay_is_up(pt_relay *r);
/* Stops the thread if any and closes every connection: the coordinator hears the relay
 * go, and names its ranks lost. NULL is fine. */
void pt_relay_destroy(pt_relay *r);

/* The tree's switch, from the environment (every rank computes the same answer):
 * PERFTRACKER_RELAY=1 always, 0 never, unset/auto for jobs of at least
 * PERFTRACKER_RELAY_MIN_WORLD (256) workers on more than one node with more than one
 * rank per node. The relay listens on the Unix socket @perftracker-relay-<uid>-<port>,
 * port being the coordinator's + 1 (MASTER_PORT + 2) or PERFTRACKER_RELAY_PORT: a node's
 * ranks all compute the same name, and another job's differs. */
bool pt_relay_wanted(int32_t world_size, int32_t local_world_size);
uint16_t pt_relay_port_for(uint16_t coordinator_port);
void pt_relay_socket_for(uint16_t coordinator_port, char *dst, size_t cap);

#endif
