/* test_hostile_worker.c -- a worker that holds the agent key speaks only for itself
 * (docs/security.md, "What is authenticated").
 *
 * The agent key is weak without PERFTRACKER_SECRET, so a worker's claims are checked
 * against what the job already knows:
 *   1. against a real coordinator, over a raw socket with a correct handshake: a JOIN
 *      whose rank is outside the job, or whose world size differs from the job's, is
 *      answered REFUSED and the connection closed; a fitting JOIN is accepted; a second
 *      JOIN for that rank while its first connection lives is refused, and the first
 *      keeps its place;
 *   2. in a round (pt_round, what the CLI and the coordinator collect into): a summary
 *      claiming another rank and a world size of 2^20 is filed under its agent's rank,
 *      with a warning, and the report is sized by the job's world size; a host name full
 *      of "../" and markup names a file inside <round>/summaries/, nowhere else. */
#define _GNU_SOURCE
#include "check.h"
#include "control/auth.h"
#include "control/coordinator.h"
#include "control/net.h"
#include "control/protocol.h"
#include "control/round.h"
#include "summarize/summary_io.h"
#include "synth/synth.h"

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------ 1. hostile JOINs */

static void send_msg(int fd, const pt_ctl_msg *m)
{
    uint8_t buf[4096];
    size_t n = pt_ctl_encode(m, buf, sizeof buf);
    if (n == 0 || send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
        abort();
}

/* Reads one frame (or returns -1 when the peer closed first), waiting up to 5 s. */
static int recv_msg(int fd, pt_ctl_msg *m, uint8_t *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        pt_error err = {{0}};
        ssize_t n = pt_ctl_decode(buf, len, m, &err);
        if (n > 0)
            return 0;
        if (n < 0)
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0)
            return -1;
        ssize_t got = recv(fd, buf + len, cap - len, 0);
        if (got <= 0)
            return -1;
        len += (size_t)got;
    }
}

/* Connects, authenticates as an agent, sends JOIN; returns the fd or -1. */
static int join_as(uint16_t port, const pt_key *key, int32_t rank, int32_t world_size)
{
    pt_error err = {{0}};
    int fd = pt_net_connect("127.0.0.1", port, 5000, &err);
    if (fd < 0)
        return -1;
    uint8_t buf[8192];
    pt_ctl_msg challenge, welcome;
    if (recv_msg(fd, &challenge, buf, sizeof buf) != 0 || challenge.type != PT_CTL_CHALLENGE) {
        close(fd);
        return -1;
    }
    pt_ctl_msg auth;
    pt_ctl_msg_init(&auth, PT_CTL_AUTH);
    auth.role = PT_CTL_ROLE_AGENT;
    memset(auth.nonce, 0x5a, sizeof auth.nonce);
    pt_auth_client_proof(key, PT_CTL_ROLE_AGENT, challenge.nonce, auth.nonce, auth.mac);
    send_msg(fd, &auth);
    if (recv_msg(fd, &welcome, buf, sizeof buf) != 0 || welcome.type != PT_CTL_WELCOME) {
        close(fd);
        return -1;
    }
    /* By hand, as a hostile peer would: our encoder refuses a rank outside its world. */
    uint8_t raw[64], *p = raw + 4;
    *p++ = PT_CTL_JOIN;
    int32_t ints[4] = {rank, 0, world_size, 0};
    for (int f = 0; f < 4; f++)
        for (int i = 0; i < 4; i++)
            *p++ = (uint8_t)((uint32_t)ints[f] >> (8 * i));
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)((uint64_t)4242 >> (8 * i));
    memcpy(p, "\4\0\0\0evil", 8);
    p += 8;
    memset(p, 0xff, 16); /* its connection's uid and pid, as a relay would say them: -1, unknown */
    p += 16;
    uint32_t body = (uint32_t)(p - raw - 4);
    for (int i = 0; i < 4; i++)
        raw[i] = (uint8_t)(body >> (8 * i));
    if (send(fd, raw, (size_t)(p - raw), MSG_NOSIGNAL) != p - raw)
        abort();
    return fd;
}

/* After a JOIN: REFUSED then close (refused), or silence (accepted). A JOIN the decoder
 * refuses (self-contradictory: a rank outside its own world size) is closed without a
 * word: nothing in it can be answered. */
static bool closed(int fd)
{
    char more;
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 5000) > 0 && recv(fd, &more, 1, 0) <= 0;
}

static bool refused_and_closed(int fd)
{
    uint8_t buf[8192];
    pt_ctl_msg m;
    bool refused = recv_msg(fd, &m, buf, sizeof buf) == 0 && m.type == PT_CTL_REFUSED;
    char more;
    struct pollfd p = {fd, POLLIN, 0};
    bool closed = poll(&p, 1, 5000) > 0 && recv(fd, &more, 1, 0) == 0;
    return refused && closed;
}

static void hostile_joins(void)
{
    pt_coordinator_config cfg;
    pt_coordinator_config_defaults(&cfg);
    cfg.port = 0;
    cfg.world_size = 4;
    memset(cfg.agent_key.bytes, 0x11, sizeof cfg.agent_key.bytes);
    memset(cfg.control_key.bytes, 0x22, sizeof cfg.control_key.bytes);
    pt_error err = {{0}};
    pt_coordinator *c = pt_coordinator_start(&cfg, &err);
    CHECK(c != NULL, "coordinator: %s", err.message);
    if (!c)
        return;
    uint16_t port = pt_coordinator_port(c);

    int fd = join_as(port, &cfg.agent_key, 7, 4); /* a rank outside its own world */
    CHECK(fd >= 0 && closed(fd), "a JOIN as rank 7 of 4 was not refused");
    if (fd >= 0)
        close(fd);
    fd = join_as(port, &cfg.agent_key, 7, 8); /* a rank outside the job */
    CHECK(fd >= 0 && refused_and_closed(fd), "a JOIN as rank 7 of 8 was not refused");
    if (fd >= 0)
        close(fd);
    fd = join_as(port, &cfg.agent_key, 1, 1 << 20); /* a world size unlike the job's */
    CHECK(fd >= 0 && refused_and_closed(fd), "a JOIN claiming world size 2^20 was not refused");
    if (fd >= 0)
        close(fd);
    fd = join_as(port, &cfg.agent_key, 1, 4); /* a fitting JOIN */
    pt_coordinator_stats st = {0};
    for (int i = 0; i < 100 && st.agents < 1; i++) {
        usleep(20000);
        pt_coordinator_stats_get(c, &st);
    }
    CHECK(fd >= 0 && st.agents == 1, "a fitting JOIN was not accepted (%d agents)", st.agents);
    int impostor = join_as(port, &cfg.agent_key, 1, 4); /* rank 1 again, while it is connected */
    CHECK(impostor >= 0 && refused_and_closed(impostor), "a JOIN as live rank 1 was not refused");
    if (impostor >= 0)
        close(impostor);
    struct pollfd first = {fd, POLLIN, 0};
    CHECK(fd >= 0 && poll(&first, 1, 200) == 0, "the first rank 1 lost its connection to the impostor");
    pt_coordinator_stats_get(c, &st);
    CHECK(st.agents == 1, "rank 1 is not connected after the impostor (%d agents)", st.agents);
    if (fd >= 0)
        close(fd);
    pt_coordinator_stop(c);
}

/* ------------------------------------------------------------ 2. hostile summaries */

static pt_worker_summary *synth_summary(int rank)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = 4, job.steps = 2, job.layers = 1;
    pt_error err = {{0}};
    pt_worker_summary *s = pt_synth_summary(&job, rank, &err);
    if (!s)
        abort();
    return s;
}

static bool file_exists_below(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    bool found = false;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        found |= strstr(de->d_name, needle) != NULL;
    if (d)
        closedir(d);
    return found;
}

static void hostile_summaries(void)
{
    char top[] = "/tmp/pt-hostile-XXXXXX";
    if (!mkdtemp(top))
        abort();
    char dir[4096];
    pt_error err = {{0}};
    CHECK(pt_round_make_dir(top, dir, sizeof dir, &err) == 0, "round dir: %s", err.message);
    pt_round *r = pt_round_new(dir, 4);
    for (int rank = 0; rank < 3; rank++) {
        pt_worker_summary *s = synth_summary(rank);
        const char *host = "node0";
        if (rank == 2) { /* the liar: another rank, a huge world, a path and markup for a host */
            s->rank = 0;
            s->world_size = 1 << 20;
            host = "../../escaped/<img src=x>";
        }
        pt_buf blob = PT_BUF_INIT;
        pt_summary_encode(s, &blob);
        pt_ctl_worker w = {rank, rank, 4, 0, 10000 + rank, pt_ctl_str(host)};
        CHECK(pt_round_add_summary(r, &w, NULL, blob.data, blob.len, NULL, &err) >= 0, "summary %d: %s", rank,
              err.message);
        pt_buf_free(&blob);
        pt_summary_free(s);
    }
    pt_json *report = pt_round_report(r, &err);
    CHECK(report != NULL, "report: %s", err.message);
    if (report) {
        const pt_json *job = pt_json_get(report, "job");
        CHECK(pt_json_get_number(job, "world_size", -1) == 4, "the liar sized the job: world_size %g",
              pt_json_get_number(job, "world_size", -1));
        const pt_json *missing = pt_json_get(job, "missing_ranks");
        CHECK(missing && missing->count == 1 && missing->items[0]->integer == 3, "missing ranks should be [3]");
        const pt_json *workers = pt_json_get(report, "workers");
        int ranks_seen[4] = {0};
        for (size_t i = 0; workers && i < workers->count; i++) {
            double rank = pt_json_get_number(workers->items[i], "rank", -1);
            const char *status = pt_json_get_string(workers->items[i], "status", "");
            if (rank >= 0 && rank < 4 && strcmp(status, "missing") != 0)
                ranks_seen[(int)rank]++;
        }
        CHECK(ranks_seen[0] == 1 && ranks_seen[1] == 1 && ranks_seen[2] == 1,
              "each agent's rank once: %d %d %d", ranks_seen[0], ranks_seen[1], ranks_seen[2]);
        const pt_json *warnings = pt_json_get(report, "warnings");
        bool warned = false;
        for (size_t i = 0; warnings && i < warnings->count; i++)
            warned |= strstr(warnings->items[i]->string, "its agent rank 2; the agent's is used") != NULL;
        CHECK(warned, "no warning that the summary's rank was overridden");
        pt_json_free(report);
    }
    char summaries[4200], escaped[4200];
    snprintf(summaries, sizeof summaries, "%s/summaries", dir);
    snprintf(escaped, sizeof escaped, "%s/escaped", top);
    CHECK(file_exists_below(summaries, "escaped"), "the liar's summary was not stored under summaries/");
    CHECK(access(escaped, F_OK) != 0, "a host name made the round write outside its directory");
    pt_round_free(r);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
}

int main(void)
{
    hostile_joins();
    hostile_summaries();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("PASS: a worker speaks only for itself\n");
    return 0;
}
