/* The recorder's rules (recorder.h), driven without Python: nesting and depth, leaves
 * that do not match the top, depth overflow, the arena cap keeping records closed under
 * ancestry, and a window written by pt_window_write read back through the native
 * reader. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/funcs.h"
#include "collect/names.h"
#include "collect/window.h"
#include "trace/reader.h"

/* Distinct keys, as code objects would be. */
static const char K[8][1] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static pt_cpu_record *records(pt_arena *a, size_t chunk)
{
    return a->chunks[chunk].records;
}

static void nesting_sets_depth_and_times(void **state)
{
    (void)state;
    pt_arena arena;
    assert_int_equal(pt_arena_init(&arena, 100), 0);
    pt_thread_log t;
    pt_thread_log_init(&t, &arena, 0, 42);
    pt_thread_log_enter(&t, K[1], 10, 100);     /* a        */
    pt_thread_log_enter(&t, K[2], 20, 110);     /*   b      */
    pt_thread_log_enter(&t, K[3], 30, 120);     /*     c    */
    pt_thread_log_leave(&t, K[3], 130);
    pt_thread_log_leave(&t, K[2], 140);
    pt_thread_log_enter(&t, K[4], 40, 140);     /*   d (zero-length) */
    pt_thread_log_leave(&t, K[4], 140);
    pt_thread_log_enter(&t, K[5], 50, 150);     /*   e, still open */
    pt_thread_log_close(&t, 500);
    assert_int_equal(t.depth, 0);
    pt_cpu_record *r = records(&arena, 0);
    assert_int_equal(arena.chunks[0].used, 5);
    int64_t expect[5][4] = {{10, 0, 100, 500}, {20, 1, 110, 140}, {30, 2, 120, 130}, {40, 1, 140, 140},
                            {50, 1, 150, 500}};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r[i].name, expect[i][0]);
        assert_int_equal(r[i].depth, expect[i][1]);
        assert_int_equal(r[i].start_ns, expect[i][2]);
        assert_int_equal(r[i].end_ns, expect[i][3]);
    }
    pt_arena_free(&arena);
}

static void unmatched_leaves_are_reconciled(void **state)
{
    (void)state;
    pt_arena arena;
    pt_arena_init(&arena, 100);
    pt_thread_log t;
    pt_thread_log_init(&t, &arena, 0, 1);
    /* A leave for a call entered before the window: ignored and counted. */
    pt_thread_log_enter(&t, K[1], 1, 10);
    pt_thread_log_leave(&t, K[7], 15);
    assert_int_equal(t.unmatched, 1);
    assert_int_equal(t.depth, 1);
    /* A missed leave (b, c): a's leave closes them at the same time. */
    pt_thread_log_enter(&t, K[2], 2, 20);
    pt_thread_log_enter(&t, K[3], 3, 30);
    pt_thread_log_leave(&t, K[1], 40);
    assert_int_equal(t.depth, 0);
    pt_thread_log_close(&t, 100);
    pt_cpu_record *r = records(&arena, 0);
    assert_int_equal(r[0].end_ns, 40);
    assert_int_equal(r[1].end_ns, 40);
    assert_int_equal(r[2].end_ns, 40);
    /* A leave with nothing open. */
    pt_thread_log_leave(&t, K[1], 50);
    assert_int_equal(t.unmatched, 2);
    pt_arena_free(&arena);
}

static void depth_beyond_the_limit_is_counted(void **state)
{
    (void)state;
    pt_arena arena;
    pt_arena_init(&arena, 4 * PT_CHUNK_RECORDS);
    pt_thread_log *t = malloc(sizeof *t);
    pt_thread_log_init(t, &arena, 0, 1);
    for (int i = 0; i < PT_MAX_DEPTH + 10; i++)
        pt_thread_log_enter(t, K[i % 8], (uint32_t)i, i);
    assert_int_equal(t->depth, PT_MAX_DEPTH);
    assert_int_equal(t->overflow, 10);
    for (int i = PT_MAX_DEPTH + 9; i >= 0; i--)
        pt_thread_log_leave(t, K[i % 8], 1000 + i);
    assert_int_equal(t->depth, 0);
    assert_int_equal(t->overflow, 0);
    assert_int_equal(t->unmatched, 0);
    pt_thread_log_close(t, 5000);
    /* The outermost call ended last, the innermost recorded one first. */
    assert_int_equal(records(&arena, 0)[0].end_ns, 1000);
    assert_int_equal(records(&arena, 0)[PT_MAX_DEPTH - 1].end_ns, 1000 + PT_MAX_DEPTH - 1);
    free(t);
    pt_arena_free(&arena);
}

static void a_full_arena_keeps_ancestors_and_counts_drops(void **state)
{
    (void)state;
    pt_arena arena;
    pt_arena_init(&arena, 1); /* one chunk */
    pt_thread_log t;
    pt_thread_log_init(&t, &arena, 0, 1);
    pt_thread_log_enter(&t, K[1], 1, 0); /* the root, recorded first */
    for (int i = 0; i < PT_CHUNK_RECORDS + 100; i++) {
        pt_thread_log_enter(&t, K[2], 2, 10 + i);
        pt_thread_log_leave(&t, K[2], 11 + i);
    }
    pt_thread_log_leave(&t, K[1], 99999);
    pt_thread_log_close(&t, 100000);
    assert_int_equal(arena.chunks[0].used, PT_CHUNK_RECORDS);
    assert_int_equal(t.dropped, 101);
    assert_int_equal(records(&arena, 0)[0].end_ns, 99999); /* the root kept its end */
    assert_int_equal(pt_arena_chunks_used(&arena), 1);
    pt_arena_free(&arena);
}

static void function_table_grows_and_finds(void **state)
{
    (void)state;
    pt_functab t;
    assert_int_equal(pt_functab_init(&t, 4), 0);
    static char keys[5000];
    for (int i = 0; i < 5000; i++)
        assert_int_equal(pt_functab_add(&t, &keys[i], i % 2 ? &keys[0] : NULL, (uint32_t)i), 0);
    for (int i = 0; i < 5000; i++)
        assert_int_equal(pt_functab_find(&t, &keys[i], i % 2 ? &keys[0] : NULL), (uint32_t)i);
    assert_int_equal(pt_functab_find(&t, &keys[2], &keys[0]), PT_FUNC_NONE); /* other type */
    pt_functab_free(&t);

    pt_names n;
    pt_names_init(&n);
    char s[32];
    for (int i = 0; i < 3000; i++) {
        int len = snprintf(s, sizeof s, "name %d", i);
        assert_int_equal(pt_names_intern(&n, s, (size_t)len), (uint32_t)i);
    }
    assert_int_equal(pt_names_intern(&n, "name 1234", 9), 1234);
    assert_string_equal(n.strings[2999], "name 2999");
    pt_names_free(&n);
}

typedef struct counts {
    int cpu, steps, counters;
    int64_t cpu_dur[8];
    int depth0;
    char names[8][64];
} counts;

static int count_event(void *ctx, const pt_event *ev)
{
    counts *c = ctx;
    if (ev->kind == PT_EVENT_CPU && c->cpu < 8) {
        c->cpu_dur[c->cpu] = ev->dur_ns;
        snprintf(c->names[c->cpu], sizeof c->names[0], "%.*s", (int)ev->name_len, ev->name);
        c->depth0 += ev->depth == 0;
    }
    c->cpu += ev->kind == PT_EVENT_CPU;
    c->steps += ev->kind == PT_EVENT_STEP;
    c->counters += ev->kind == PT_EVENT_COUNTER;
    return 0;
}

static void a_window_becomes_a_trace(void **state)
{
    (void)state;
    pt_window_plan plan = {10, 2, ""};
    pt_window_limits limits = {1000, 10, 10};
    pt_error err;
    pt_window *w = pt_window_open(&plan, &limits, 10, 1000, &err);
    assert_non_null(w);
    w->ticks_are_ns = true; /* the records below carry ns directly */
    w->meta.pid = 77;
    w->meta.rank = 2;
    uint32_t main_id = pt_window_name(w, "train.py: <module>", 18);
    uint32_t f_id = pt_window_name(w, "train.py: f", 11);
    uint32_t metric = pt_window_name(w, "host.cpu_util", 13);
    pt_thread_log *t = pt_window_add_thread(w, 77);
    pt_thread_log_enter(t, K[1], main_id, 1000);
    pt_thread_log_enter(t, K[2], f_id, 1100);
    pt_thread_log_leave(t, K[2], 1400);
    pt_window_mark_step(w, 1500);
    pt_thread_log_enter(t, K[2], f_id, 1600); /* still open at the end */
    pt_window_mark_step(w, 2000);
    w->tick_end = 2000;
    w->samples[w->sample_count++] = (pt_counter_record){1200, 50.0, metric};
    pt_window_close_threads(w);
    char path[64];
    snprintf(path, sizeof path, "/tmp/pt-window-%d.ptrace", (int)getpid());
    assert_int_equal(pt_window_write(w, path, &err), 0);
    pt_window_free(w);

    counts c = {0};
    pt_trace_sink sink = {&c, count_event, NULL};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    assert_int_equal(pt_trace_read(path, &sink, &meta, NULL, &err), 0);
    assert_int_equal(c.cpu, 3);
    assert_int_equal(c.steps, 2);
    assert_int_equal(c.counters, 1);
    assert_string_equal(c.names[0], "train.py: <module>");
    assert_int_equal(c.cpu_dur[0], 1000);  /* open at the end: closed at the window end */
    assert_int_equal(c.cpu_dur[1], 300);
    assert_int_equal(c.cpu_dur[2], 400);
    assert_int_equal(c.depth0, 1);
    assert_int_equal(meta.rank, 2);
    assert_int_equal(meta.pid, 77);
    assert_int_equal(meta.dropped_events, 0);
    assert_string_equal(meta.producer, "perftracker");
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nesting_sets_depth_and_times),
        cmocka_unit_test(unmatched_leaves_are_reconciled),
        cmocka_unit_test(depth_beyond_the_limit_is_counted),
        cmocka_unit_test(a_full_arena_keeps_ancestors_and_counts_drops),
        cmocka_unit_test(function_table_grows_and_finds),
        cmocka_unit_test(a_window_becomes_a_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
