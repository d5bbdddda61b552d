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
 *   outcomes  sends failures for ranks -1, N and N+7, two for rank 0, then ROUND_DONE.
 * Prints "ready" once it listens and "connected" for every peer that connects (so a test
 * can tell that the CLI never talked to it). Removes its files on SIGTERM. */
#define _POSIX_C_SOURCE 200809L
#include "control/auth.h"
#include "control/jobfile.h"
#include "control/net.h"

#include <errno.h>
#include <poll.h>
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

static void send_failure(pt_conn *c, int32_t rank, int32_t world)
{
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_WORKER_FAILED);
    m.worker = (pt_ctl_worker){rank, 0, world, 0, 4242, pt_ctl_str("liarhost")};
    m.kind = PT_FAIL_DIED;
    m.steps_done = 3;
    m.text = pt_ctl_str("the hostile coordinator says so");
    send_msg(c, &m);
}

/* One CLI's round, told whatever `mode` says. */
static void lie(pt_conn *c, const pt_key *key, int32_t world, const char *mode)
{
    pt_ctl_msg trigger;
    if (handshake(c, key, &trigger) != 0)
        return;
    pt_ctl_msg started = progress_msg(PT_CTL_ROUND_STARTED, world);
    started.start_step = 10;
    started.steps = trigger.steps;
    if (send_msg(c, &started) != 0)
        return;
    if (strcmp(mode, "progress") == 0) {
        pt_ctl_msg p = progress_msg(PT_CTL_PROGRESS, world);
        while (!stop_requested && send_msg(c, &p) == 0)
            nanosleep(&(struct timespec){0, 200000000}, NULL);
    } else if (strcmp(mode, "outcomes") == 0) {
        const int32_t ranks[] = {-1, world, world + 7, 0, 0};
        for (size_t i = 0; i < PT_ARRAY_LEN(ranks); i++)
            send_failure(c, ranks[i], world);
        pt_ctl_msg done = progress_msg(PT_CTL_ROUND_DONE, world);
        send_msg(c, &done);
        pt_ctl_msg m;
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
