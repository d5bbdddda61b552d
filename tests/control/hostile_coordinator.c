/* hostile_coordinator -- a coordinator that lies to the CLI, for the tests of what the
 * CLI believes (test_hostile_coordinator.py, test_fresh_machine.py).
 *
 *   hostile_coordinator --world N --after-start close|progress|outcomes
 *
 * It registers like rank 0's coordinator does -- the same job file and control key
 * (jobfile.c, auth.c) in the runtime directory the environment names (MASTER_ADDR,
 * MASTER_PORT, PERFTRACKER_KEY_DIR) -- and speaks the real protocol with the real key,
 * so the CLI has every reason to believe it. After the handshake and the TRIGGER it
 * announces a round of N workers, then:
 *   close     hangs up (the CLI must name every unheard rank, without quadratic work);
 *   progress  sends PROGRESS every 200 ms forever (the CLI must end the round itself);
 *   outcomes  sends failures for rank N+3 (of a world of N+4, as the message says), for
 *             rank 0 twice, then for rank -1, then ROUND_DONE.
 * The real encoder refuses what the decoder refuses (protocol.c), so a value outside the
 * protocol's ranges -- a world of 2^31-1, rank -1 -- is sent by patching the bytes of a
 * valid frame (send_lie): the CLI must stand on its decoder, not on a polite peer.
 * Prints "ready" once it listens and "connected" for every peer that connects (so a test
 * can tell that the CLI never talked to it). Removes its files on SIGTERM. */
#define _POSIX_C_SOURCE 200809L
#include "control/auth.h"
#include "control/jobfile.h"
#include "control/net.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int send_msg(pt_conn *c, const pt_ctl_msg *m)
{
    pt_error err;
    if (pt_conn_send(c, m, &err) != 0)
        return -1;
    while (pt_conn_pending(c) > 0) {
        if (pt_conn_flush(c, &err) != 0)
            return -1;
        struct pollfd p = {c->fd, POLLOUT, 0};
        if (pt_conn_pending(c) > 0)
            poll(&p, 1, 1000);
    }
    return 0;
}

/* Where a lie goes in a frame: the length (4 bytes) and the type (1), then the fields in
 * the order of their message's schema (protocol.c). */
#define STARTED_WORLD_AT (4 + 1 + 4 + 8 + 4) /* round, start_step, steps, then progress.world_size */
#define FAILED_RANK_AT (4 + 1)               /* worker.rank comes first */

/* Sends m's frame with the 32-bit field at byte `at` replaced by `lie`, bypassing the
 * encoder's range checks: the bytes a hostile coordinator can write. */
static int send_lie(pt_conn *c, const pt_ctl_msg *m, size_t at, int32_t lie)
{
    uint8_t frame[8192];
    size_t len = pt_ctl_encode(m, frame, sizeof frame);
    if (len < at + 4) {
        fprintf(stderr, "hostile_coordinator: no field at byte %zu of a %s frame\n", at, pt_ctl_type_name(m->type));
        return -1;
    }
    for (int i = 0; i < 4; i++)
        frame[at + (size_t)i] = (uint8_t)((uint32_t)lie >> (8 * i));
    for (size_t sent = 0; sent < len;) {
        ssize_t n = send(c->fd, frame + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            poll(&(struct pollfd){c->fd, POLLOUT, 0}, 1, 1000);
            continue;
        }
        if (n <= 0)
            return -1;
        sent += (size_t)n;
    }
    return 0;
}

/* The next message within 10 s: 1, or -1. */
static int recv_msg(pt_conn *c, pt_ctl_msg *m)
{
    pt_error err;
    for (int waited = 0; waited < 100 && !stop_requested; waited++) {
        int got = pt_conn_next(c, m, &err);
        if (got != 0)
            return got;
        struct pollfd p = {c->fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0 && pt_conn_read(c, &err) < 0)
            return -1;
    }
    return -1;
}

static int handshake(pt_conn *c, const pt_key *key, pt_ctl_msg *trigger)
{
    pt_ctl_msg challenge, m, welcome;
    pt_error err;
    pt_ctl_msg_init(&challenge, PT_CTL_CHALLENGE);
    if (pt_random_bytes(challenge.nonce, sizeof challenge.nonce, &err) != 0 || send_msg(c, &challenge) != 0 ||
        recv_msg(c, &m) != 1 || m.type != PT_CTL_AUTH)
        return -1;
    uint8_t expected[PT_SHA256_BYTES];
    pt_auth_client_proof(key, m.role, challenge.nonce, m.nonce, expected);
    if (!pt_equal_ct(expected, m.mac, sizeof expected)) {
        fprintf(stderr, "hostile_coordinator: the CLI did not prove the key\n");
        return -1;
    }
    pt_ctl_msg_init(&welcome, PT_CTL_WELCOME);
    pt_auth_server_proof(key, m.role, challenge.nonce, m.nonce, welcome.mac);
    if (send_msg(c, &welcome) != 0 || recv_msg(c, trigger) != 1 || trigger->type != PT_CTL_TRIGGER)
        return -1;
    return 0;
}

static pt_ctl_msg progress_msg(pt_ctl_type type, int32_t world)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, type);
    m.round = 1;
    m.progress = (pt_ctl_progress){world, world, 0, 0, 3, 3, 0, 0, 0, 0};
    return m;
}

static pt_ctl_msg failure_msg(int32_t rank, int32_t world)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_WORKER_FAILED);
    m.worker = (pt_ctl_worker){rank, 0, world, 0, 4242, pt_ctl_str("liarhost")};
    m.kind = PT_FAIL_DIED;
    m.steps_done = 3;
    m.text = pt_ctl_str("the hostile coordinator says so");
    return m;
}

/* ROUND_STARTED for `world` workers, a lie patched in when the protocol has no such world. */
static int send_started(pt_conn *c, int32_t world, int32_t steps)
{
    bool lie = world < 1 || world > PT_CTL_MAX_WORLD;
    pt_ctl_msg started = progress_msg(PT_CTL_ROUND_STARTED, lie ? 1 : world);
    started.start_step = 10;
    started.steps = steps;
    return lie ? send_lie(c, &started, STARTED_WORLD_AT, world) : send_msg(c, &started);
}

/* One CLI's round, told whatever `mode` says. */
static void lie(pt_conn *c, const pt_key *key, int32_t world, const char *mode)
{
    pt_ctl_msg trigger;
    if (handshake(c, key, &trigger) != 0)
        return;
    if (send_started(c, world, trigger.steps) != 0)
        return;
    if (strcmp(mode, "progress") == 0) {
        pt_ctl_msg p = progress_msg(PT_CTL_PROGRESS, world);
        while (!stop_requested && send_msg(c, &p) == 0)
            nanosleep(&(struct timespec){0, 200000000}, NULL);
    } else if (strcmp(mode, "outcomes") == 0) {
        /* In the protocol's ranges, but not the round's (only the CLI knows it), then
         * rank 0 twice, then a rank no message may carry. */
        pt_ctl_msg m = failure_msg(world + 3, world + 4);
        send_msg(c, &m);
        m = failure_msg(0, world);
        send_msg(c, &m);
        send_msg(c, &m);
        send_lie(c, &m, FAILED_RANK_AT, -1);
        pt_ctl_msg done = progress_msg(PT_CTL_ROUND_DONE, world);
        send_msg(c, &done);
        recv_msg(c, &m); /* until the CLI hangs up */
    }
}

static int publish(const pt_job_env *env, uint16_t port, pt_key *key, pt_job_record *job)
{
    pt_error err;
    if (pt_auth_create_control_key(env, key, &err) != 0 || pt_auth_write_key_file(key, &err) != 0) {
        fprintf(stderr, "hostile_coordinator: %s\n", err.message);
        return -1;
    }
    pt_job_record_for_self(job, env);
    snprintf(job->connect_host, sizeof job->connect_host, "127.0.0.1");
    snprintf(job->key_file, sizeof job->key_file, "%s", key->file);
    job->port = port;
    if (pt_job_file_write(job, &err) != 0) {
        fprintf(stderr, "hostile_coordinator: %s\n", err.message);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long long world = 0;
    const char *mode = "close";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--world") == 0)
            world = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--after-start") == 0)
            mode = argv[i + 1];
    }
    if (world == 0 || world > INT32_MAX || world < INT32_MIN) {
        fprintf(stderr, "usage: hostile_coordinator --world N --after-start close|progress|outcomes\n");
        return 2;
    }
    pt_job_env env;
    pt_error err;
    if (pt_job_env_read(&env, false, &err) != 0) {
        fprintf(stderr, "hostile_coordinator: %s\n", err.message);
        return 1;
    }
    uint16_t port;
    int listen_fd = pt_net_listen("127.0.0.1", env.coordinator_port, &port, &err);
    pt_key key;
    pt_job_record job;
    if (listen_fd < 0 || publish(&env, port, &key, &job) != 0) {
        fprintf(stderr, "hostile_coordinator: %s\n", listen_fd < 0 ? err.message : "cannot register");
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("ready\n");
    fflush(stdout);
    while (!stop_requested) {
        struct pollfd p = {listen_fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        printf("connected\n");
        fflush(stdout);
        pt_conn c;
        pt_conn_init(&c, fd, 1u << 20);
        lie(&c, &key, (int32_t)world, mode);
        pt_conn_close(&c);
    }
    unlink(job.file);
    unlink(key.file);
    close(listen_fd);
    return 0;
}
