/* Who may join a job as a worker (src/control/trust.h): a real coordinator with its Unix
 * socket, real agents (tests/control/fake_fleet.c) and raw connections, and the CLI's
 * library call (pt_trigger_run) for the report each round writes.
 *
 * Each test pins one rule a bug in coordinator.c, agent.c or trust.c would break: a
 * worker on the socket is taken on the kernel's word whatever key it holds; a TCP worker
 * on this machine with a store-published key is refused, and taken when the key is the
 * user's own secret (the boundary of agent_key_public); another user's process on the
 * socket is closed before a byte (as root); a rank's own process on the socket takes its
 * rank from a key-only holder, and a second key-only claim is refused; every refusal is
 * named in the next round's report, and each worker's entry says how it connected.
 * Built into the ASan tree (label sanitized) and the TSan tree (label tsan). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/client.h"
#include "control/coordinator.h"
#include "control_test_util.h"
#include "fake_fleet.h"

#define MS 1000000LL
#define SECRET "trust-test-secret"
#define WORLD 4

typedef struct job {
    pt_coordinator *coordinator;
    fake_fleet *fleet;
    char out_dir[64];
    char coordinator_addr[64];
    char socket_name[PT_HOST_MAX];
} job;

static pt_key agent_key(const char *secret)
{
    return ctl_test_agent_key(secret, SECRET);
}

/* key_public: the agent key is the store-published kind (no PERFTRACKER_SECRET). */
static void start_job(job *j, bool key_public)
{
    setenv("PERFTRACKER_SECRET", SECRET, 1);
    snprintf(j->out_dir, sizeof j->out_dir, "/tmp/pt-trust-XXXXXX");
    assert_non_null(mkdtemp(j->out_dir));
    pt_coordinator_config cfg;
    pt_coordinator_config_defaults(&cfg);
    cfg.world_size = WORLD;
    pt_job_env env = {0};
    pt_error err;
    assert_int_equal(pt_auth_agent_key(&cfg.agent_key, &err), 1);
    assert_int_equal(pt_auth_create_control_key(&env, &cfg.control_key, &err), 0);
    cfg.local_socket = true;
    cfg.agent_key_public = key_public;
    cfg.join_grace_ns = 500 * MS;
    cfg.summary_timeout_ns = 5000 * MS;
    j->coordinator = pt_coordinator_start(&cfg, &err);
    assert_non_null(j->coordinator);
    uint16_t port = pt_coordinator_port(j->coordinator);
    snprintf(j->coordinator_addr, sizeof j->coordinator_addr, "127.0.0.1:%u", (unsigned)port);
    pt_coordinator_socket_for(port, j->socket_name, sizeof j->socket_name);
}

/* A fleet of `count` workers from first_rank, through the socket or over TCP, with key. */
static fake_fleet *start_fleet(const job *j, int32_t first_rank, int32_t count, bool through_socket, pt_key key)
{
    fake_fleet_config fc;
    fake_fleet_config_init(&fc, WORLD);
    fc.first_rank = first_rank;
    fc.count = count;
    fc.key = key;
    if (through_socket) {
        snprintf(fc.coordinator_host, sizeof fc.coordinator_host, "%s", j->socket_name);
        fc.coordinator_port = 0;
    } else {
        fc.coordinator_port = pt_coordinator_port(j->coordinator);
    }
    return fake_fleet_start(&fc);
}

static pt_coordinator_stats stats_when(const job *j, bool (*done)(const pt_coordinator_stats *, int), int want)
{
    pt_coordinator_stats st = {0};
    for (int i = 0; i < 1000; i++) {
        pt_coordinator_stats_get(j->coordinator, &st);
        if (done(&st, want))
            break;
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    }
    return st;
}

static bool agents_are(const pt_coordinator_stats *st, int want) { return st->agents == want; }
static bool refused_local_reach(const pt_coordinator_stats *st, int want) { return (int)st->refused_local >= want; }
static bool conflicts_reach(const pt_coordinator_stats *st, int want) { return (int)st->rank_conflicts >= want; }

static void stop_job(job *j)
{
    fake_fleet_stop(j->fleet);
    pt_coordinator_stop(j->coordinator);
    assert_int_equal(ctl_test_remove_tree(j->out_dir), 0);
}

static pt_json *run_round(const job *j)
{
    pt_trigger_request req = {2, 2, PT_SAVE_RAW_NONE, j->out_dir, true, 20000, j->coordinator_addr};
    pt_trigger_result result;
    pt_error err;
    assert_int_equal(pt_trigger_run(&req, NULL, &result, &err), 0);
    return result.report;
}


static int security_warnings(const pt_json *report)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    int n = 0;
    for (size_t i = 0; warnings && i < warnings->count; i++)
        n += strncmp(warnings->items[i]->string, "security: ", 10) == 0;
    return n;
}

/* ---------------------------------------------------------------- raw workers */


static void send_now(pt_conn *c, const pt_ctl_msg *m)
{
    assert_int_equal(ctl_test_send_now(c, m), 0);
}

/* A worker that authenticates at host:port with key and JOINs as rank; the type of the
 * coordinator's answer to the handshake (WELCOME, REFUSED) is returned, and c stays open. */
static int raw_join(pt_conn *c, const char *host, uint16_t port, const pt_key *key, int32_t rank)
{
    pt_error err;
    int fd = pt_net_connect(host, port, 1000, &err);
    assert_true(fd >= 0);
    pt_conn_init(c, fd, 1u << 20);
    pt_ctl_msg m, reply;
    assert_int_equal(ctl_test_next_msg(c, &m), 1);
    assert_int_equal(m.type, PT_CTL_CHALLENGE);
    uint8_t server_nonce[PT_CTL_NONCE_BYTES], client_nonce[PT_CTL_NONCE_BYTES];
    assert_int_equal(pt_auth_answer_challenge(key, PT_CTL_ROLE_AGENT, &m, server_nonce, client_nonce, &reply), 0);
    send_now(c, &reply);
    if (ctl_test_next_msg(c, &m) != 1 || m.type != PT_CTL_WELCOME)
        return m.type == PT_CTL_REFUSED ? PT_CTL_REFUSED : -1;
    pt_ctl_msg_init(&reply, PT_CTL_JOIN);
    reply.worker = (pt_ctl_worker){rank, 0, WORLD, 0, 4242, pt_ctl_str("claimant"), -1, -1, {NULL, 0}};
    send_now(c, &reply);
    return PT_CTL_WELCOME;
}

/* Whether the coordinator closed c (after a REFUSED, or at once) within ms. */
static bool closed_within(pt_conn *c, int ms)
{
    pt_error err;
    pt_ctl_msg m;
    for (int waited = 0; waited < ms; waited += 10) {
        while (pt_conn_next(c, &m, &err) == 1)
            ;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        poll(&pfd, 1, 10);
        if (pt_conn_read(c, &err) < 0)
            return true;
    }
    return false;
}

/* ---------------------------------------------------------------- tests */

/* Workers on the socket need no key (these hold a wrong one) and the report shows each as
 * this user's process, by the kernel's uid and pid. */
static void test_coordinator_socket_takes_this_users_workers_without_a_key(void **state)
{
    (void)state;
    job j = {0};
    start_job(&j, true);
    j.fleet = start_fleet(&j, 0, WORLD, true, agent_key("not-the-job-secret"));
    assert_int_equal(stats_when(&j, agents_are, WORLD).agents, WORLD);
    pt_json *report = run_round(&j);
    const pt_json *workers = pt_json_get(report, "workers");
    assert_int_equal((int)workers->count, WORLD);
    for (size_t i = 0; i < workers->count; i++) {
        const pt_json *c = pt_json_get(workers->items[i], "connection");
        assert_non_null(c);
        assert_int_equal((int64_t)pt_json_get_number(c, "uid", -2), (int64_t)geteuid());
        assert_int_equal((int64_t)pt_json_get_number(c, "pid", -2), (int64_t)getpid());
        assert_non_null(strstr(pt_json_get_string(c, "seen_from", ""), "on this machine"));
    }
    assert_int_equal(security_warnings(report), 0); /* nothing was refused: nothing to say */
    pt_json_free(report);
    stop_job(&j);
}

/* The store-published key over TCP from this machine is refused as a worker, and named in
 * the report; the same key as the user's own secret (agent_key_public false) is taken. */
static void test_local_tcp_worker_with_the_store_key_is_refused(void **state)
{
    (void)state;
    for (int key_public = 1; key_public >= 0; key_public--) {
        job j = {0};
        start_job(&j, key_public);
        pt_conn c;
        int answer = raw_join(&c, "127.0.0.1", pt_coordinator_port(j.coordinator), &(pt_key){0}, 3);
        pt_key real = agent_key(SECRET);
        pt_conn_close(&c);
        answer = raw_join(&c, "127.0.0.1", pt_coordinator_port(j.coordinator), &real, 3);
        if (key_public) {
            assert_int_equal(answer, PT_CTL_REFUSED);
            assert_true(stats_when(&j, refused_local_reach, 1).refused_local >= 1);
            assert_true(closed_within(&c, 2000));
        } else {
            assert_int_equal(answer, PT_CTL_WELCOME);
            assert_int_equal(stats_when(&j, agents_are, 1).agents, 1);
        }
        pt_conn_close(&c);
        j.fleet = start_fleet(&j, 0, WORLD, true, real);
        assert_int_equal(stats_when(&j, agents_are, WORLD).agents, WORLD);
        pt_json *report = run_round(&j);
        /* The wrong key is named either way; the TCP worker with the real key only when
         * that key could have come from the store. */
        assert_true(ctl_test_warning_contains(report, "security: a worker from 127.0.0.1", "failed authentication"));
        assert_int_equal(ctl_test_warning_contains(report, "security: a process on this machine", "over TCP"), key_public);
        pt_json_free(report);
        stop_job(&j);
    }
}


/* Another user's process on the coordinator's socket is closed before a byte, and the
 * next round's report names it. Needs root, to be another user. */
static void test_coordinator_socket_closes_another_user(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: needs root, to connect as another user\n");
        skip();
    }
    job j = {0};
    start_job(&j, true);
    pid_t child = fork();
    if (child == 0)
        _exit(ctl_test_connect_as_nobody(j.socket_name));
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal((int)stats_when(&j, refused_local_reach, 1).refused_local, 1);
    j.fleet = start_fleet(&j, 0, WORLD, true, agent_key(SECRET));
    assert_int_equal(stats_when(&j, agents_are, WORLD).agents, WORLD);
    pt_json *report = run_round(&j);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "(pid %d)", (int)child);
    assert_true(ctl_test_warning_contains(report, "security: a process of user 65534", pid_text));
    assert_int_equal((int)pt_json_get(report, "workers")->count, WORLD);
    pt_json_free(report);
    stop_job(&j);
}

/* A key-only holder of rank 1 (over TCP, the key being the user's own secret) loses it to
 * rank 1's process on the socket; a second key-only claim while the socket's worker holds
 * it is refused. Both claims are named; the round has every worker. */
static void test_a_ranks_own_process_takes_it_from_a_key_holder(void **state)
{
    (void)state;
    job j = {0};
    start_job(&j, false);
    pt_key real = agent_key(SECRET);
    pt_conn squatter;
    assert_int_equal(raw_join(&squatter, "127.0.0.1", pt_coordinator_port(j.coordinator), &real, 1), PT_CTL_WELCOME);
    assert_int_equal(stats_when(&j, agents_are, 1).agents, 1);
    j.fleet = start_fleet(&j, 0, WORLD, true, real); /* rank 1's own process among them */
    assert_int_equal((int)stats_when(&j, conflicts_reach, 1).rank_conflicts, 1);
    assert_true(closed_within(&squatter, 3000));
    pt_conn_close(&squatter);
    assert_int_equal(stats_when(&j, agents_are, WORLD).agents, WORLD);
    pt_conn late;
    assert_int_equal(raw_join(&late, "127.0.0.1", pt_coordinator_port(j.coordinator), &real, 2), PT_CTL_WELCOME);
    assert_int_equal((int)stats_when(&j, conflicts_reach, 2).rank_conflicts, 2);
    assert_true(closed_within(&late, 3000)); /* refused: rank 2's worker keeps its place */
    pt_conn_close(&late);
    assert_int_equal(stats_when(&j, agents_are, WORLD).agents, WORLD);
    pt_json *report = run_round(&j);
    assert_true(ctl_test_warning_contains(report, "security: rank 1 was held by a connection from 127.0.0.1",
                                     "took its place"));
    assert_true(ctl_test_warning_contains(report, "security: a second connection claimed rank 2", "was refused"));
    assert_int_equal((int)pt_json_get_number(pt_json_get(report, "job"), "workers_analyzed", 0), WORLD);
    pt_json_free(report);
    stop_job(&j);
}

/* --wait at its bound: 0 starts the window at the highest step the workers reached, 1 a
 * step later; neither may start behind a worker (its window would be gone before the ARM
 * came), so both rounds profile every worker. */
static int64_t started_at;

static void note_start(void *ctx, uint32_t round, int64_t start_step, int32_t steps, const pt_ctl_progress *p)
{
    (void)ctx, (void)round, (void)steps, (void)p;
    started_at = start_step;
}

static void test_wait_zero_and_one_profile_every_worker(void **state)
{
    (void)state;
    job j = {0};
    start_job(&j, true);
    j.fleet = start_fleet(&j, 0, WORLD, true, agent_key(SECRET));
    assert_int_equal(stats_when(&j, agents_are, WORLD).agents, WORLD);
    nanosleep(&(struct timespec){0, 300 * MS}, NULL); /* some steps made and heard of */
    int64_t before = 0;
    for (int32_t wait = 0; wait <= 1; wait++) {
        pt_trigger_observer obs = {.started = note_start};
        pt_trigger_request req = {wait, 2, PT_SAVE_RAW_NONE, j.out_dir, true, 20000, j.coordinator_addr};
        pt_trigger_result result;
        pt_error err;
        started_at = -1;
        assert_int_equal(pt_trigger_run(&req, &obs, &result, &err), 0);
        assert_true(started_at > before); /* steps were made, and the second round came later */
        before = started_at;
        assert_int_equal(result.summaries, WORLD);
        assert_int_equal(result.failed, 0);
        pt_json_free(result.report);
    }
    stop_job(&j);
}

/* The notices are bounded: a line per kind, the rest counted, whatever the flood. */
static void test_notices_keep_a_line_per_kind(void **state)
{
    (void)state;
    pt_notices n = {0};
    for (int i = 0; i < 1000; i++)
        pt_notices_add(&n, "same", "event %d", i);
    assert_int_equal((int)pt_notices_lines(&n), 1);
    char line[256];
    pt_notices_line(&n, 0, line, sizeof line);
    assert_string_equal(line, "event 0 (1000 times in all)");
    for (int i = 0; i < PT_NOTICE_KINDS + 5; i++) {
        char kind[16];
        snprintf(kind, sizeof kind, "k%d", i);
        pt_notices_add(&n, kind, "kind %d", i);
    }
    /* PT_NOTICE_KINDS kinds (the first one's included), then one line for the rest */
    assert_int_equal((int)pt_notices_lines(&n), PT_NOTICE_KINDS + 1);
    pt_notices_line(&n, PT_NOTICE_KINDS - 1, line, sizeof line);
    assert_string_equal(line, "kind 14");
    pt_notices_line(&n, PT_NOTICE_KINDS, line, sizeof line);
    assert_non_null(strstr(line, "6 more refused connections"));
    pt_notices_free(&n);
    assert_int_equal((int)pt_notices_lines(&n), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notices_keep_a_line_per_kind),
        cmocka_unit_test(test_coordinator_socket_takes_this_users_workers_without_a_key),
        cmocka_unit_test(test_local_tcp_worker_with_the_store_key_is_refused),
        cmocka_unit_test(test_coordinator_socket_closes_another_user),
        cmocka_unit_test(test_a_ranks_own_process_takes_it_from_a_key_holder),
        cmocka_unit_test(test_wait_zero_and_one_profile_every_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
