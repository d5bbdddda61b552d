/* trust.h -- who is on the other end of a connection to the coordinator, and what a
 * round must be told of the peers it turned away.
 *
 * Trust on one machine comes from the kernel. A worker on the coordinator's machine
 * connects through the coordinator's abstract Unix socket, whose peer credentials
 * (SO_PEERCRED) say its uid and pid: the job's user is accepted without a key, anyone
 * else is closed before a byte. A worker on another machine has only the job's key,
 * which derives from a secret that travels through the job's torch.distributed store,
 * so a TCP peer on this machine that offers that key as a worker is refused: whoever
 * holds it may have read it from the store, and the real workers here have the socket.
 * What was refused is kept (pt_notices) and goes into the round's report, so an attempt
 * is never only a log line in rank 0's output. */
#ifndef PT_CONTROL_TRUST_H
#define PT_CONTROL_TRUST_H

#include "control/protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "@perftracker-coord-<uid>-<port>": the coordinator's Unix socket for the workers on its
 * machine, named by the user and the coordinator's TCP port so that two jobs, or two
 * users, never meet on one name. */
void pt_coordinator_socket_for(uint16_t port, char *dst, size_t cap);

/* A connected peer as the kernel describes it. */
typedef struct pt_peer_identity {
    bool unix_socket;          /* came through a Unix socket: uid and pid are the kernel's */
    int64_t uid, pid;          /* -1 where unknown (TCP); pid 0: outside our pid namespace */
    char seen_from[PT_CTL_MAX_SEEN_FROM + 1]; /* "pid 4242 (uid 1000) on this machine", "10.0.0.7:41822" */
} pt_peer_identity;

void pt_peer_identify(int fd, pt_peer_identity *id);

/* What a round's report must say about peers the coordinator refused: a line per kind of
 * event with the first example and how many more there were, so a flood of attempts
 * costs a few lines. Bounded: PT_NOTICE_KINDS kinds, each line at most PT_CTL_MAX_TEXT. */
#define PT_NOTICE_KINDS 16
typedef struct pt_notices {
    struct {
        char kind[32];
        char *first;           /* the first event's sentence */
        uint64_t count;
    } entry[PT_NOTICE_KINDS];
    size_t used;
    uint64_t dropped;          /* events of kinds past PT_NOTICE_KINDS */
    uint64_t generation;       /* changes with every event: whether anything is new */
} pt_notices;

/* Records an event of `kind` ("other-user", "rank-claimed", ...). */
void pt_notices_add(pt_notices *n, const char *kind, const char *fmt, ...) PT_PRINTF(3, 4);
/* The number of lines pt_notices_line gives. */
size_t pt_notices_lines(const pt_notices *n);
/* Line i: the first event's sentence, then "(N times in all)" when it recurred. */
void pt_notices_line(const pt_notices *n, size_t i, char *dst, size_t cap);
void pt_notices_free(pt_notices *n);

#endif
