/* The collector's collective bookkeeping (src/collect/collectives.h) as the agent reads
 * it: from another thread, without a lock, while calls are made. Every snapshot taken
 * meanwhile must be text the analysis accepts (pt_hang_state_parse, then pt_summary_check)
 * with each group's calls in order; the ring keeps the last calls; a reused token is
 * ignored; names and errors that would break the line format are made safe; groups past
 * the table are not recorded; a failure is reported once. Run under ASan+UBSan and TSan. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collectives.h"
#include "summarize/hang_state.h"

static const int32_t world[] = {0, 1, 2, 3};

static pt_worker_summary *parsed(const char *text)
{
    pt_worker_summary *s = pt_summary_new();
    s->name = strdup("w");
    s->rank = 0;
    s->world_size = 4;
    pt_error err = {{0}};
    if (pt_hang_state_parse(s, NULL, text, &err) != 0)
        fail_msg("the snapshot does not parse: %s\n%s", err.message, text);
    if (pt_summary_check(s, &err) != 0)
        fail_msg("the snapshot breaks a rule: %s\n%s", err.message, text);
    return s;
}

static void test_calls_are_numbered_and_the_ring_keeps_the_last(void **state)
{
    (void)state;
    pt_coll_reset();
    int g = pt_coll_group("0", "gloo", world, 4);
    assert_true(g >= 0);
    uint64_t first = pt_coll_enter(g, 0, 1000, 0);
    assert_int_equal(pt_coll_token_seq(first), 1);
    pt_coll_leave(first, PT_COLL_COMPLETED, NULL);
    for (int i = 0; i < 40; i++)
        pt_coll_leave(pt_coll_enter(g, 1, 10, 0), PT_COLL_COMPLETED, NULL);
    uint64_t last = pt_coll_enter(g, 0, 1000, 0);
    pt_coll_leave(first, PT_COLL_FAILED, "reused"); /* its entry holds a later call now */
    char buf[8192];
    pt_coll_snapshot(buf, sizeof buf, pt_now_ns(), NULL);
    pt_worker_summary *s = parsed(buf);
    assert_int_equal(s->group_count, 1);
    const pt_collective_group *grp = &s->groups[0];
    assert_string_equal(grp->name, "0");
    assert_string_equal(grp->backend, "gloo");
    assert_int_equal(grp->size, 4);
    assert_int_equal(grp->call_count, PT_COLL_RING);
    assert_int_equal(grp->calls[PT_COLL_RING - 1].seq, (int64_t)pt_coll_token_seq(last));
    assert_int_equal(grp->calls[PT_COLL_RING - 1].state, PT_CALL_ENTERED);
    assert_string_equal(grp->calls[PT_COLL_RING - 1].op, "all_reduce");
    assert_int_equal(grp->calls[PT_COLL_RING - 1].count, 1000);
    assert_string_equal(grp->calls[PT_COLL_RING - 1].dtype, "float32");
    for (size_t i = 0; i + 1 < grp->call_count; i++)
        assert_int_equal(grp->calls[i].state, PT_CALL_COMPLETED);
    assert_false(pt_coll_take_failure()); /* the reused token's "failure" was ignored */
    pt_summary_free(s);
}

static void test_failures_and_hostile_names_stay_on_their_line(void **state)
{
    (void)state;
    pt_coll_reset();
    assert_int_equal(pt_coll_group("bad\tname", "gloo", world, 4), 0); /* kept, tab made safe */
    int g = 0;
    uint64_t t = pt_coll_enter(g, 0, 8, 3);
    pt_coll_leave(t, PT_COLL_FAILED, "Connection reset\tby\npeer");
    assert_true(pt_coll_take_failure());
    assert_false(pt_coll_take_failure());
    char buf[4096];
    pt_coll_snapshot(buf, sizeof buf, pt_now_ns(), NULL);
    pt_worker_summary *s = parsed(buf);
    assert_string_equal(s->groups[0].name, "bad?name");
    assert_int_equal(s->groups[0].calls[0].state, PT_CALL_FAILED);
    assert_string_equal(s->groups[0].calls[0].error, "Connection reset by peer");
    pt_summary_free(s);
    /* Unsorted or negative ranks, a name too long, a bad op: not recorded. */
    const int32_t unsorted[] = {2, 1};
    const int32_t negative[] = {-1, 0};
    char long_name[PT_COLL_NAME_MAX + 8];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(pt_coll_group("u", "gloo", unsorted, 2), -1);
    assert_int_equal(pt_coll_group("n", "gloo", negative, 2), -1);
    assert_int_equal(pt_coll_group(long_name, "gloo", world, 4), -1);
    assert_int_equal(pt_coll_enter(0, 999, 1, 0), 0);
    assert_int_equal(pt_coll_enter(77, 0, 1, 0), 0);
    /* A group re-created with the same ranks counts from 1 again. */
    pt_coll_enter(0, 0, 1, 0);
    assert_int_equal(pt_coll_group("bad\tname", "gloo", world, 4), 0);
    assert_int_equal(pt_coll_token_seq(pt_coll_enter(0, 0, 1, 0)), 1);
}

static void test_the_table_and_the_buffer_have_bounds(void **state)
{
    (void)state;
    pt_coll_reset();
    int made = 0;
    for (int i = 0; i < PT_COLL_MAX_GROUPS + 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "g%d", i);
        int g = pt_coll_group(name, "nccl", world, 4);
        if (g >= 0) {
            made++;
            pt_coll_enter(g, 0, 1, 0);
        }
    }
    assert_int_equal(made, PT_COLL_MAX_GROUPS);
    char small[300];
    size_t n = pt_coll_snapshot(small, sizeof small, pt_now_ns(), NULL);
    assert_true(n < sizeof small);
    pt_worker_summary *s = parsed(small); /* cut at a group's boundary: still valid */
    assert_true(s->group_count >= 1);
    pt_summary_free(s);
    /* Groups a better source replaced are left out. */
    char buf[16384];
    pt_coll_snapshot(buf, sizeof buf, pt_now_ns(), "group\tg0\tnccl\t4\t0-3\n");
    assert_null(strstr(buf, "group\tg0\t"));
    assert_non_null(strstr(buf, "group\tg1\t"));
}

/* ------------------------------------------------------------ concurrent reads */

static atomic_bool stop_writing;

static void *writer(void *arg)
{
    int g = *(int *)arg;
    while (!atomic_load(&stop_writing)) {
        uint64_t t = pt_coll_enter(g, 0, 4096, 0);
        pt_coll_leave(t, PT_COLL_COMPLETED, NULL);
        uint64_t u = pt_coll_enter(g, 11, 0, 14);
        pt_coll_leave(u, PT_COLL_ISSUED, NULL);
    }
    return NULL;
}

static void test_snapshots_while_calls_are_made(void **state)
{
    (void)state;
    pt_coll_reset();
    int groups[2] = {pt_coll_group("0", "gloo", world, 4), pt_coll_group("1", "gloo", world, 4)};
    atomic_store(&stop_writing, false);
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, writer, &groups[i]), 0);
    char buf[16384];
    for (int i = 0; i < 300; i++) {
        pt_coll_snapshot(buf, sizeof buf, pt_now_ns(), NULL);
        pt_worker_summary *s = parsed(buf);
        for (size_t k = 0; k < s->group_count; k++)
            assert_true(s->groups[k].call_count <= PT_COLL_RING);
        pt_summary_free(s);
    }
    atomic_store(&stop_writing, true);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_are_numbered_and_the_ring_keeps_the_last),
        cmocka_unit_test(test_failures_and_hostile_names_stay_on_their_line),
        cmocka_unit_test(test_the_table_and_the_buffer_have_bounds),
        cmocka_unit_test(test_snapshots_while_calls_are_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
