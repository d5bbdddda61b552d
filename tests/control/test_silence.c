/* When the coordinator calls a worker silent (src/control/coordinator.c, check_peer).
 *
 * A worker is dropped as unresponsive after PERFTRACKER_HEARTBEAT_TIMEOUT_S without a
 * word. But rank 0 may be the slow one: starved of CPU, it reads a peer long after the
 * peer wrote, and one turn of its loop serves at most 256 ready peers before its tick.
 * Words that wait unread in the kernel are not silence: at 100k workers on a loaded
 * machine the tick named thousands of healthy ranks unresponsive so. The coordinator is
 * detached (pt_coordinator_create_detached): its clock is the test's, so "long after" is
 * exact and nothing depends on how loaded the machine running the test is. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/coordinator.h"
#include "control/protocol.h"

#define WORKERS 300 /* more than one turn's 256 events */
#define SEC 1000000000LL
#define TIMEOUT_S 5
#define SILENT_RANK (WORKERS - 1)

static char log_text[1 << 16];
static size_t log_len;

static void capture_log(void *ctx, const char *line)
{
    (void)ctx;
    size_t n = strlen(line);
    if (log_len + n + 2 < sizeof log_text) {
        memcpy(log_text + log_len, line, n);
        log_len += n;
        log_text[log_len++] = '\n';
        log_text[log_len] = '\0';
    }
}

static void send_frame(int fd, const pt_ctl_msg *m)
{
    uint8_t buf[512];
    size_t n = pt_ctl_encode(m, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void drain(int fd)
{
    uint8_t buf[4096];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
}

/* Whether the coordinator closed its end (it dropped the worker). */
static bool closed_by_coordinator(int fd)
{
    uint8_t buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        ;
    return n == 0;
}

/* A detached coordinator on the test's clock, with WORKERS workers joined over socket
 * pairs (far[r] is rank r's end). */
static pt_coordinator *joined_job(int far[WORKERS], int64_t *now)
{
    pt_coordinator_config cfg;
    pt_coordinator_config_defaults(&cfg);
    cfg.world_size = WORKERS;
    cfg.heartbeat_timeout_ns = TIMEOUT_S * SEC;
    memset(cfg.agent_key.bytes, 0x11, sizeof cfg.agent_key.bytes);
    memset(cfg.control_key.bytes, 0x22, sizeof cfg.control_key.bytes);
    cfg.log.fn = capture_log;
    log_len = 0;
    log_text[0] = '\0';
    pt_error err;
    pt_coordinator *c = pt_coordinator_create_detached(&cfg, &err);
    assert_non_null(c);

    *now = 1000 * SEC;
    for (int r = 0; r < WORKERS; r++) {
        int pair[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        assert_int_equal(pt_coordinator_adopt(c, pair[0], false, *now, &err), 0);
        far[r] = pair[1];
        char host[32];
        snprintf(host, sizeof host, "node%d", r / 8);
        pt_ctl_msg join;
        pt_ctl_msg_init(&join, PT_CTL_JOIN);
        join.worker = (pt_ctl_worker){r, r % 8, WORKERS, r / 8, 1000 + r, pt_ctl_str(host)};
        send_frame(far[r], &join);
    }
    for (int i = 0; i < 4; i++) /* 256 a turn: every JOIN read */
        pt_coordinator_turn(c, *now += SEC / 10);
    pt_coordinator_stats st;
    pt_coordinator_stats_get(c, &st);
    assert_int_equal(st.agents, WORKERS);
    return c;
}

static void heartbeat(int fd)
{
    drain(fd);
    pt_ctl_msg beat;
    pt_ctl_msg_init(&beat, PT_CTL_HEARTBEAT);
    beat.steps_done = 40;
    beat.mean_step_ns = SEC / 10;
    send_frame(fd, &beat);
}

static void test_words_waiting_unread_are_not_silence(void **state)
{
    (void)state;
    int far[WORKERS];
    int64_t now;
    pt_coordinator *c = joined_job(far, &now);
    pt_coordinator_stats st;

    /* Every worker but one speaks, and rank 0 reads them only after the timeout: its
     * first turn then serves 256 of them before its tick, the others wait unread. */
    for (int r = 0; r < WORKERS; r++)
        if (r != SILENT_RANK)
            heartbeat(far[r]);
    now += (TIMEOUT_S + 1) * SEC;
    for (int i = 0; i < 4; i++)
        pt_coordinator_turn(c, now += SEC / 20);

    for (int r = 0; r < WORKERS; r++)
        if (r != SILENT_RANK && closed_by_coordinator(far[r]))
            fail_msg("rank %d spoke before the timeout and was dropped as silent:\n%s", r, log_text);
    assert_true(closed_by_coordinator(far[SILENT_RANK])); /* the timeout still holds */
    char silent_line[96];
    snprintf(silent_line, sizeof silent_line, "rank %d: no heartbeat for", SILENT_RANK);
    assert_non_null(strstr(log_text, silent_line));
    pt_coordinator_stats_get(c, &st);
    assert_int_equal(st.agents, WORKERS - 1);

    pt_coordinator_stop(c);
    for (int r = 0; r < WORKERS; r++)
        close(far[r]);
}

/* The timers are checked a slice of the peers per tick, each peer about once a second:
 * a walk over every peer at every 50 ms tick cost rank 0's training process 17% of a
 * core at 100k idle workers (a cache miss per peer). Ticking 50 ms at a time for 8 s,
 * with every worker but one beating each second: about WORKERS checks a second (twenty
 * times that when each tick walks them all), no beating worker dropped, and the silent
 * one dropped within the timeout plus a sweep. */
static void test_timers_are_swept_once_a_second(void **state)
{
    (void)state;
    int far[WORKERS];
    int64_t now;
    pt_coordinator *c = joined_job(far, &now);
    for (int r = 0; r < WORKERS; r++)
        heartbeat(far[r]);
    pt_coordinator_turn(c, now += SEC / 20);
    int64_t silent_since = now;
    pt_coordinator_stats st;
    pt_coordinator_stats_get(c, &st);
    uint64_t checks0 = st.peer_checks;
    int64_t dropped_at = -1;
    const int ticks = 8 * 20;
    for (int t = 1; t <= ticks; t++) {
        if (t % 20 == 0)
            for (int r = 0; r < WORKERS; r++)
                if (r != SILENT_RANK)
                    heartbeat(far[r]);
        for (int i = 0; i < 2; i++) /* 256 events a turn */
            pt_coordinator_turn(c, now += i == 0 ? SEC / 20 : 0);
        if (dropped_at < 0 && closed_by_coordinator(far[SILENT_RANK]))
            dropped_at = now;
    }
    pt_coordinator_stats_get(c, &st);
    double per_second = (double)(st.peer_checks - checks0) / 8.0;
    if (per_second < WORKERS * 0.8 || per_second > WORKERS * 1.5)
        fail_msg("%.0f peer checks a second for %d peers (one sweep a second is %d)", per_second, WORKERS, WORKERS);
    for (int r = 0; r < WORKERS; r++)
        if (r != SILENT_RANK && closed_by_coordinator(far[r]))
            fail_msg("rank %d beat every second and was dropped:\n%s", r, log_text);
    assert_true(dropped_at > 0);
    int64_t late = dropped_at - silent_since - TIMEOUT_S * SEC;
    if (late < 0 || late > SEC + SEC / 10)
        fail_msg("the silent rank was dropped %.2f s after its timeout (at most a sweep, 1 s, later)", (double)late / SEC);
    assert_int_equal(st.agents, WORKERS - 1);

    pt_coordinator_stop(c);
    for (int r = 0; r < WORKERS; r++)
        close(far[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words_waiting_unread_are_not_silence),
        cmocka_unit_test(test_timers_are_swept_once_a_second),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
