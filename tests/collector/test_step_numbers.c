/* The collector's step numbers (util/step_number.h, collector.c): the window opens where
 * every rank opens it when the step source changes under a waiting window, ends early at
 * a change of source inside it, and carries the count people read in its trace. The
 * collector is driven as module.c drives it, without Python: steps numbered as autostep's
 * sources number them, a window armed as the agent arms it, its raw trace read back. */
#define _GNU_SOURCE
#include "collect/collector.h"
#include "trace/reader.h"
#include "util/step_number.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define SPAN PT_STEP_SOURCE_SPAN
#define LEARNED (PT_STEP_SOURCE_LEARNED * SPAN)
#define OPTIMIZER (PT_STEP_SOURCE_OPTIMIZER * SPAN)
#define EXPLICIT (PT_STEP_SOURCE_EXPLICIT * SPAN)

static char raw_dir[64];

typedef struct steps_seen {
    int64_t first, last;
    int count;
    char warnings[4][256];
    int warning_count;
} steps_seen;

static int on_event(void *ctx, const pt_event *ev)
{
    steps_seen *s = ctx;
    if (ev->kind == PT_EVENT_STEP) {
        if (!s->count++)
            s->first = ev->step;
        s->last = ev->step;
    }
    return 0;
}

/* The step action of a step numbered n (0: a plain step()), the window started or ended
 * as module.c does on BEGIN and END. */
static pt_step_action step(int64_t n)
{
    pt_step_action a = n ? pt_collector_step_to(n) : pt_collector_step();
    if (a == PT_STEP_BEGIN) {
        pt_collector_start_sources(false);
        pt_window *w = pt_collector_window();
        w->meta.pid = getpid();
        snprintf(w->meta.host, sizeof w->meta.host, "stephost");
    } else if (a == PT_STEP_END) {
        pt_window_close_threads(pt_collector_window());
        pt_collector_end_window();
    }
    return a;
}

static void on_warning(void *ctx, const char *message)
{
    steps_seen *s = ctx;
    if (s->warning_count < 4)
        snprintf(s->warnings[s->warning_count++], sizeof s->warnings[0], "%s", message);
}

#define ENDED_EARLY "the window ended early: the steps were found anew inside it"

static int warnings_with(const steps_seen *s, const char *text)
{
    int n = 0;
    for (int i = 0; i < s->warning_count; i++)
        n += strstr(s->warnings[i], text) != NULL;
    return n;
}

static steps_seen last_trace(void)
{
    assert_true(pt_collector_wait_idle(30));
    pt_collector_stats stats;
    pt_collector_stats_get(&stats);
    assert_int_equal(stats.last_status, 0);
    steps_seen seen = {0};
    pt_trace_sink sink = {&seen, on_event, on_warning, NULL, NULL};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    pt_error err;
    assert_int_equal(pt_trace_read(stats.last_trace, &sink, &meta, NULL, &err), 0);
    unlink(stats.last_trace);
    return seen;
}

static int64_t steps_done(void)
{
    int64_t steps, last, mean;
    pt_collector_status(&steps, &last, &mean);
    return steps;
}

/* Armed before any step (level 0, "--wait 3"): the first learned step counts as the
 * first of the three, so the window opens at learned step 3 on every rank. */
static void test_a_window_armed_before_the_first_step_waits_in_the_new_source(void **state)
{
    (void)state;
    assert_int_equal(pt_collector_arm(3, 2, raw_dir), 0);
    assert_int_equal(step(LEARNED + 1), PT_STEP_NONE);
    assert_int_equal(step(LEARNED + 2), PT_STEP_NONE);
    assert_int_equal(step(LEARNED + 3), PT_STEP_BEGIN);
    assert_int_equal(step(LEARNED + 4), PT_STEP_MARK);
    assert_int_equal(step(LEARNED + 5), PT_STEP_END);
    steps_seen seen = last_trace();
    assert_int_equal(seen.count, 2);
    assert_int_equal(seen.first, 3); /* the count, not the (source, count) number */
    assert_int_equal(seen.last, 4);
}

/* At its start step in its own source; a number never goes back: a step_to below the
 * count is one step more. */
static void test_numbered_steps(void **state)
{
    (void)state;
    assert_int_equal(pt_collector_arm(LEARNED + 9, 1, raw_dir), 0);
    assert_int_equal(step(LEARNED + 8), PT_STEP_NONE);
    assert_int_equal(step(LEARNED + 5), PT_STEP_BEGIN); /* not below 8: 9 */
    assert_int_equal(steps_done(), LEARNED + 9);
    assert_int_equal(step(LEARNED + 10), PT_STEP_END);
    steps_seen seen = last_trace();
    assert_int_equal(seen.first, 9);
    assert_int_equal(warnings_with(&seen, ENDED_EARLY), 0);
}

/* A better source inside the window: it ends there, with what it has. */
static void test_a_change_of_source_ends_the_window(void **state)
{
    (void)state;
    assert_int_equal(pt_collector_arm(LEARNED + 12, 5, raw_dir), 0);
    assert_int_equal(step(LEARNED + 11), PT_STEP_NONE);
    assert_int_equal(step(LEARNED + 12), PT_STEP_BEGIN);
    assert_int_equal(step(LEARNED + 13), PT_STEP_MARK);
    assert_int_equal(step(OPTIMIZER + 1), PT_STEP_END);
    steps_seen seen = last_trace();
    assert_int_equal(seen.count, 2);
    assert_int_equal(seen.first, 12);
    assert_int_equal(warnings_with(&seen, ENDED_EARLY), 1);
}

/* The script's own step() takes over while a window waits (renumbered to explicit 0):
 * the two steps still to go are its first two. */
static void test_renumbering_keeps_the_steps_left(void **state)
{
    (void)state;
    assert_int_equal(pt_collector_arm(OPTIMIZER + 4, 1, raw_dir), 0);
    assert_int_equal(step(OPTIMIZER + 2), PT_STEP_NONE);
    pt_collector_renumber(EXPLICIT);
    assert_int_equal(steps_done(), EXPLICIT);
    pt_collector_renumber(OPTIMIZER + 9); /* never back */
    assert_int_equal(steps_done(), EXPLICIT);
    assert_int_equal(step(0), PT_STEP_NONE);
    assert_int_equal(step(0), PT_STEP_BEGIN);
    assert_int_equal(step(0), PT_STEP_END);
    assert_int_equal(last_trace().first, 2);
}

static int set_up(void **state)
{
    (void)state;
    snprintf(raw_dir, sizeof raw_dir, "/tmp/pt-steps-%d/", (int)getpid());
    pt_collect_config cfg = {.limits = {1000, 100, 100}, .sample_period_us = 0, .gpu = false, .gpu_index = -1};
    pt_error err;
    return pt_collector_init(&cfg, &err);
}

static int tear_down(void **state)
{
    (void)state;
    pt_collector_shutdown();
    rmdir(raw_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_window_armed_before_the_first_step_waits_in_the_new_source),
        cmocka_unit_test(test_numbered_steps),
        cmocka_unit_test(test_a_change_of_source_ends_the_window),
        cmocka_unit_test(test_renumbering_keeps_the_steps_left),
    };
    return cmocka_run_group_tests(tests, set_up, tear_down);
}
