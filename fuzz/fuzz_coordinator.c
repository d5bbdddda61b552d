/* fuzz_coordinator.c -- the coordinator's state machine after authentication
 * (src/control/coordinator.c, through its test seam).
 *
 * A peer that holds a key -- any worker's agent, or the CLI -- may send anything after the
 * handshake, so everything the coordinator does with those frames (joins, heartbeats,
 * rounds started, armed, summarized, hung, automatic rounds, goodbyes, the caps on what
 * it buffers) must hold for any bytes in any order. The target builds a detached
 * coordinator (no listening socket, no thread), hands it one end of socketpairs as four
 * authenticated agents and one authenticated CLI, writes the input's frames into the
 * other ends and turns the loop by hand on a clock the input moves.
 *
 * Input: byte 0 sets up the job (world size 1 + (b & 7); bit 3: the job opted in to
 * automatic rounds; bits 4-6 all set: automatic rounds write their folders to disk, as a
 * job's do, otherwise they are collected and reported in memory through the seam
 * pt_round_new_in_memory -- the same diagnosis and report text, without the files, which
 * cost most of an input's time); then records, each
 *   a byte with bit 7 set: the clock moves ((b & 0x7f) + 1) x 50 ms, and the loop turns;
 *   else peer = b % 5 (0-3: the agents, 4: the CLI), u16 length (little endian), that
 *   many bytes written to the peer's socket; the loop turns.
 * fuzz/make_seeds.c writes seeds in this form: a whole triggered round, an automatic one,
 * a hang report.
 *
 * Properties: every frame the coordinator sends decodes (it never sends what its own
 * decoder would refuse, whatever it was fed), and it stops cleanly with nothing leaked.
 * Rounds on disk write under a private temporary folder, emptied after such an input. */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include "control/coordinator.h"
#include "control/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PEERS 5
#define SETUP_ON_DISK 0x70
#define CONTROL_PEER 4
#define TICK_NS (50 * 1000000LL)

typedef struct far_end {
    int fd;            /* the end this target writes into and reads from; -1 once closed */
    uint8_t in[1 << 16];
    size_t in_len;
} far_end;

static char auto_dir[64];

/* Silent, unless PT_FUZZ_VERBOSE is set (to see what a seed or a crasher makes it do). */
static void quiet(void *ctx, const char *line)
{
    (void)ctx;
    if (getenv("PT_FUZZ_VERBOSE"))
        fprintf(stderr, "coordinator: %s\n", line);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

static void remove_auto_dir(void)
{
    nftw(auto_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(auto_dir);
}

/* What the coordinator sent one peer: read it all and check that every frame decodes. */
static void drain(far_end *e)
{
    while (e->fd >= 0) {
        if (e->in_len == sizeof e->in) /* a frame larger than we keep: its start was checked */
            e->in_len = 0;
        ssize_t n = recv(e->fd, e->in + e->in_len, sizeof e->in - e->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n <= 0) { /* the coordinator closed it (refused, dropped) */
            close(e->fd);
            e->fd = -1;
            break;
        }
        e->in_len += (size_t)n;
        size_t at = 0;
        for (;;) {
            pt_ctl_msg m;
            pt_error err = {{0}};
            ssize_t used = pt_ctl_decode(e->in + at, e->in_len - at, &m, &err);
            PT_FUZZ_CHECK(used >= 0, "the coordinator sent a frame its own decoder refuses");
            if (used == 0)
                break;
            at += (size_t)used;
        }
        memmove(e->in, e->in + at, e->in_len - at);
        e->in_len -= at;
    }
}

/* One poll() finds the peers with something to read, so an idle turn costs one system
 * call instead of a failed recv() per peer; each readable one is drained as before. */
static void turn(pt_coordinator *c, far_end *ends, int64_t now)
{
    pt_coordinator_turn(c, now);
    struct pollfd ready[PEERS];
    for (int i = 0; i < PEERS; i++)
        ready[i] = (struct pollfd){ends[i].fd, POLLIN, 0}; /* a closed one (-1) is skipped */
    if (poll(ready, PEERS, 0) <= 0)
        return;
    for (int i = 0; i < PEERS; i++)
        if (ready[i].revents)
            drain(&ends[i]);
}

static pt_coordinator *new_coordinator(uint8_t setup, far_end *ends, int64_t now)
{
    pt_coordinator_config cfg;
    pt_coordinator_config_defaults(&cfg);
    cfg.world_size = 1 + (setup & 7);
    cfg.auto_trigger = (setup & 8) != 0;
    cfg.auto_in_memory = (setup & SETUP_ON_DISK) != SETUP_ON_DISK;
    cfg.auto_interval_ns = 0;
    cfg.join_grace_ns = 200 * 1000000LL;
    snprintf(cfg.auto_output_dir, sizeof cfg.auto_output_dir, "%s", auto_dir);
    memset(cfg.agent_key.bytes, 0x11, sizeof cfg.agent_key.bytes);
    memset(cfg.control_key.bytes, 0x22, sizeof cfg.control_key.bytes);
    cfg.log.fn = quiet;
    pt_error err = {{0}};
    pt_coordinator *c = pt_coordinator_create_detached(&cfg, &err);
    PT_FUZZ_CHECK(c != NULL, "cannot create a detached coordinator");
    for (int i = 0; i < PEERS; i++) {
        int pair[2];
        PT_FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0, "socketpair");
        PT_FUZZ_CHECK(pt_coordinator_adopt(c, pair[0], i == CONTROL_PEER, now, &err) == 0, "adopt");
        ends[i].fd = pair[1];
        ends[i].in_len = 0;
        fcntl(pair[1], F_SETFL, O_NONBLOCK);
    }
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool on_disk = (data[0] & SETUP_ON_DISK) == SETUP_ON_DISK;
    if (on_disk && !auto_dir[0]) {
        const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(auto_dir, sizeof auto_dir, "%s/pt-fuzz-coordinator-XXXXXX", tmp);
        PT_FUZZ_CHECK(mkdtemp(auto_dir) != NULL, "cannot make a temporary folder");
        atexit(remove_auto_dir);
    }
    static far_end ends[PEERS];
    int64_t now = 1000 * 1000000000LL;
    pt_coordinator *c = new_coordinator(data[0], ends, now);
    size_t at = 1;
    while (at < size) {
        uint8_t tag = data[at++];
        if (tag & 0x80) {
            now += ((tag & 0x7f) + 1) * TICK_NS;
        } else {
            if (size - at < 2)
                break;
            size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
            len = len < size - at ? len : size - at;
            far_end *e = &ends[tag % PEERS];
            if (e->fd >= 0 && len)
                (void)send(e->fd, data + at, len, MSG_DONTWAIT | MSG_NOSIGNAL);
            at += len;
        }
        turn(c, ends, now);
    }
    for (int i = 0; i < 3; i++) { /* a few ticks more, so timeouts and the round's end run */
        now += 20 * TICK_NS;
        turn(c, ends, now);
    }
    pt_coordinator_stop(c);
    for (int i = 0; i < PEERS; i++)
        if (ends[i].fd >= 0)
            close(ends[i].fd);
    if (on_disk)
        nftw(auto_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
