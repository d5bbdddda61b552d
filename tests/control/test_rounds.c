/* Whole rounds in one process: a real coordinator, simulated workers running real agents
 * (tests/control/fake_fleet.c), and the CLI's library call (pt_trigger_run). Each test
 * checks the report the round produced, not just that it ran: the worker with the slow
 * GPU is found, a dead worker is reported by rank and the rest analysed, a hung worker
 * is a "hang" finding with its Python stack, wrong keys are refused and logged, raw
 * traces are kept per --save-raw-trace, and a slowdown triggers a round by itself.
 * Built into the ASan tree (label sanitized) and the TSan tree (label tsan). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/client.h"
#include "control/coordinator.h"
#include "control/relay.h"
#include "control_test_util.h"
#include "fake_fleet.h"
#include "summarize/summary_io.h"
#include "util/input.h"

#define MS 1000000LL
#define SECRET "round-test-secret"

/* ---------------------------------------------------------------- captured log lines */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pt_buf log_text;

static void capture_log(void *ctx, const char *line)
{
    (void)ctx;
    pthread_mutex_lock(&log_lock);
    pt_buf_puts(&log_text, line);
    pt_buf_putc(&log_text, '\n');
    pthread_mutex_unlock(&log_lock);
}

static bool log_contains(const char *needle)
{
    pthread_mutex_lock(&log_lock);
    bool found = log_text.data && strstr(log_text.data, needle);
    pthread_mutex_unlock(&log_lock);
    return found;
}

/* ---------------------------------------------------------------- a job in a box */

typedef struct job {
    pt_coordinator *coordinator;
    fake_fleet *fleet;
    char out_dir[64];
    char coordinator_addr[64];
} job;

static pt_key agent_key(const char *secret)
{
    return ctl_test_agent_key(secret, SECRET);
}

static void start_coordinator_timeout(job *j, int32_t world_size, bool auto_rounds, int64_t heartbeat_timeout_ns);

static void start_coordinator(job *j, int32_t world_size, bool auto_rounds)
{
    start_coordinator_timeout(j, world_size, auto_rounds, 5000 * MS);
}

static void start_coordinator_timeout(job *j, int32_t world_size, bool auto_rounds, int64_t heartbeat_timeout_ns)
{
    setenv("PERFTRACKER_SECRET", SECRET, 1);
    snprintf(j->out_dir, sizeof j->out_dir, "/tmp/pt-rounds-XXXXXX");
    assert_non_null(mkdtemp(j->out_dir));
    pt_coordinator_config cfg;
    pt_coordinator_config_defaults(&cfg);
    cfg.port = 0;
    cfg.world_size = world_size;
    pt_job_env env = {0};
    pt_error err;
    assert_int_equal(pt_auth_agent_key(&cfg.agent_key, &err), 1);
    assert_int_equal(pt_auth_create_control_key(&env, &cfg.control_key, &err), 0);
    cfg.auto_trigger = auto_rounds;
    cfg.local_socket = true; /* as a job's: agents started from the environment on this machine use it */
    cfg.heartbeat_timeout_ns = heartbeat_timeout_ns;
    cfg.summary_timeout_ns = 5000 * MS;
    cfg.probe_timeout_ns = 1000 * MS;
    cfg.join_grace_ns = 500 * MS;
    cfg.auto_wait = 2;
    cfg.auto_steps = 2;
    /* One automatic round per test: the first starts at once (nothing came before it),
     * and a second would replace last_report_dir. With no spacing, a loaded machine ran
     * a second round before the test looked, which then read that round's report
     * (auto_rounds 2, or a hang report from a later probe naming rank 0 too). */
    cfg.auto_interval_ns = 3600000 * MS;
    snprintf(cfg.auto_output_dir, sizeof cfg.auto_output_dir, "%s/auto", j->out_dir);
    cfg.log.fn = capture_log;
    j->coordinator = pt_coordinator_start(&cfg, &err);
    assert_non_null(j->coordinator);
    snprintf(j->coordinator_addr, sizeof j->coordinator_addr, "127.0.0.1:%u",
             (unsigned)pt_coordinator_port(j->coordinator));
}

static void base_fleet(const job *j, fake_fleet_config *fc, int32_t world_size)
{
    fake_fleet_config_init(fc, world_size);
    fc->coordinator_port = pt_coordinator_port(j->coordinator);
    fc->key = agent_key(SECRET);
    fc->log.fn = capture_log;
}

static void wait_joined(fake_fleet *f, int want)
{
    for (int i = 0; i < 1000 && fake_fleet_joined(f) < want; i++)
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    assert_int_equal(fake_fleet_joined(f), want);
}

static int trigger(const job *j, pt_ctl_save_raw save_raw, pt_trigger_result *result, pt_error *err)
{
    pt_trigger_request req = {2, 2, save_raw, j->out_dir, true, 20000, j->coordinator_addr};
    return pt_trigger_run(&req, NULL, result, err);
}

static void remove_tree(const char *path)
{
    assert_int_equal(ctl_test_remove_tree(path), 0);
}

static void stop_job(job *j)
{
    fake_fleet_stop(j->fleet);
    pt_coordinator_stop(j->coordinator);
    remove_tree(j->out_dir);
}

static pt_json *read_json(const char *path)
{
    pt_error err;
    size_t len;
    char *text = pt_read_file(path, 64u << 20, &len, &err);
    assert_non_null(text);
    pt_json *doc = pt_json_parse(text, len, 64, &err);
    free(text);
    assert_non_null(doc);
    return doc;
}

static const pt_json *worker_entry(const pt_json *report, int rank)
{
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; workers && i < workers->count; i++)
        if (pt_json_get_number(workers->items[i], "rank", -1) == rank)
            return workers->items[i];
    return NULL;
}

/* The first finding of category, or NULL. */
static const pt_json *finding(const pt_json *report, const char *category)
{
    const pt_json *findings = pt_json_get(pt_json_get(report, "diagnosis"), "findings");
    for (size_t i = 0; findings && i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "category", ""), category) == 0)
            return findings->items[i];
    return NULL;
}

static bool names_rank(const pt_json *f, int rank)
{
    const pt_json *workers = pt_json_get(f, "workers");
    for (size_t i = 0; workers && i < workers->count; i++)
        if (workers->items[i]->integer == rank)
            return true;
    return false;
}


static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strlen(de->d_name) > strlen(suffix) &&
            strcmp(de->d_name + strlen(de->d_name) - strlen(suffix), suffix) == 0)
            n++;
    closedir(d);
    return n;
}

/* ---------------------------------------------------------------- tests */


/* A flat job of world workers whose rank slow_rank has the slow GPU, every worker joined. */
static void start_job_with_a_slow_gpu(job *j, int32_t world, int32_t slow_rank)
{
    start_coordinator(j, world, false);
    fake_fleet_config fc;
    base_fleet(j, &fc, world);
    fc.special_rank = slow_rank;
    fc.special.faulty_profile = true;
    j->fleet = fake_fleet_start(&fc);
    wait_joined(j->fleet, world);
}

static void test_round_finds_the_slow_gpu(void **state)
{
    (void)state;
    job j = {0};
    start_job_with_a_slow_gpu(&j, 16, 15);

    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_ALL, &result, &err), 0);
    assert_int_equal(result.summaries, 16);
    assert_int_equal(result.failed, 0);
    assert_int_equal(result.world_size, 16);
    assert_non_null(result.report);
    const pt_json *job_facts = pt_json_get(result.report, "job");
    assert_int_equal((int)pt_json_get_number(job_facts, "workers_analyzed", 0), 16);
    assert_int_equal(pt_json_get(job_facts, "missing_ranks")->count, 0);
    const pt_json *slow = finding(result.report, "gpu_compute");
    assert_non_null(slow);
    assert_true(names_rank(slow, 15));
    assert_false(names_rank(slow, 3));

    /* Everything is on disk: the report, the page, each summary, each raw trace. */
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", result.round_dir);
    pt_json *on_disk = read_json(path);
    assert_int_equal((int)pt_json_get_number(pt_json_get(on_disk, "job"), "workers_analyzed", 0), 16);
    pt_json_free(on_disk);
    snprintf(path, sizeof path, "%s/PerfDisplay", result.round_dir);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/summaries", result.round_dir);
    assert_int_equal(count_files(path, ".ptsum"), 16);
    snprintf(path, sizeof path, "%s/raw_trace", result.round_dir);
    assert_int_equal(count_files(path, ".ptrace"), 16);
    assert_string_equal(pt_json_get_string(worker_entry(result.report, 15), "raw_trace", ""),
                        "raw_trace/fakenode1_7_100015.ptrace");
    pt_json_free(result.report);

    /* A second round on the same job works too (state was reset). */
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 16);
    snprintf(path, sizeof path, "%s/raw_trace", result.round_dir);
    assert_int_equal(access(path, F_OK), -1);
    pt_json_free(result.report);

    /* Without --auto-analyze the round drops each summary once checked
     * (pt_round_drop_summaries): it still counts every one and writes every one. */
    pt_trigger_request collect_only = {2, 2, PT_SAVE_RAW_NONE, j.out_dir, false, 20000, j.coordinator_addr};
    assert_int_equal(pt_trigger_run(&collect_only, NULL, &result, &err), 0);
    assert_int_equal(result.summaries, 16);
    assert_int_equal(result.failed, 0);
    assert_null(result.report);
    snprintf(path, sizeof path, "%s/summaries", result.round_dir);
    assert_int_equal(count_files(path, ".ptsum"), 16);
    snprintf(path, sizeof path, "%s/summaries/fakenode1_7_100015.ptsum", result.round_dir);
    pt_worker_summary *kept = pt_summary_read_file(path, &err);
    assert_non_null(kept);
    assert_int_equal(kept->rank, 15);
    pt_summary_free(kept);
    snprintf(path, sizeof path, "%s/report.json", result.round_dir);
    assert_int_equal(access(path, F_OK), -1);
    stop_job(&j);
}

/* Ctrl-C as trigger.c's handler reports it: the flag, set here as soon as the round starts. */
static volatile sig_atomic_t interrupt_flag;
static int busy_heard;

static void interrupt_at_start(void *ctx, uint32_t round, int64_t start_step, int32_t steps,
                               const pt_ctl_progress *p)
{
    (void)ctx, (void)round, (void)start_step, (void)steps, (void)p;
    interrupt_flag = 1;
}

static void count_busy(void *ctx, const char *text, int64_t wait_ms)
{
    (void)ctx, (void)wait_ms;
    assert_non_null(strstr(text, "still finish"));
    busy_heard++;
}

static size_t entries_in(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

/* The fake collectors cannot drop a window (no cancel hook): each runs to its end and its
 * agent answers the CANCEL then, so the next trigger meets draining workers and waits. */
/* A job past the bounded form's size (PERFTRACKER_REPORT_FULL_MAX, 4096 unless set; 8
 * here) gets its parts from the triggered round too, as from analyze: the page's node
 * drill-down and worker detail read them. Each part's workers are the round's, by rank,
 * and the slow rank's step is the longest there as in the summaries it sent. */
static void test_bounded_round_writes_the_parts_its_page_reads(void **state)
{
    (void)state;
    setenv("PERFTRACKER_REPORT_FULL_MAX", "8", 1);
    job j = {0};
    start_job_with_a_slow_gpu(&j, 16, 11);
    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    unsetenv("PERFTRACKER_REPORT_FULL_MAX");
    assert_int_equal(result.summaries, 16);
    const pt_json *parts = pt_json_get(pt_json_get(result.report, "scale"), "parts");
    assert_non_null(parts);
    const pt_json *files = pt_json_get(parts, "files");
    assert_non_null(files);
    assert_int_equal((int)files->count, 1); /* 1024 workers a part */
    const char *file = pt_json_get_string(files->items[0], "file", "");
    char path[1400];
    snprintf(path, sizeof path, "%s/%s/%s", result.round_dir, pt_json_get_string(parts, "folder", ""), file);
    pt_json *part = read_json(path);
    const pt_json *workers = pt_json_get(part, "workers");
    assert_non_null(workers);
    assert_int_equal((int)workers->count, 16);
    int slowest = -1;
    double slowest_ms = 0;
    for (size_t i = 0; i < workers->count; i++) {
        assert_int_equal((int)pt_json_get_number(workers->items[i], "rank", -1), (int)i);
        double ms = pt_json_get_number(workers->items[i], "step_time_ms", -1);
        assert_true(ms > 0);
        if (ms > slowest_ms)
            slowest_ms = ms, slowest = (int)i;
    }
    assert_int_equal(slowest, 11);
    pt_json_free(part);
    char stem[256];
    snprintf(stem, sizeof stem, "%s", file);
    char *dot = strrchr(stem, '.');
    if (dot)
        *dot = '\0';
    snprintf(path, sizeof path, "%s/PerfDisplay/parts/%s.js", result.round_dir, stem);
    assert_int_equal(access(path, R_OK), 0);
    pt_json_free(result.report);
    stop_job(&j);
}

static void test_interrupted_round_is_cancelled_everywhere_and_the_next_one_waits(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 8, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 8);
    fc.normal.step_ns = 200 * MS; /* the window is 2 steps away: the cancel comes first */
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 8);

    pt_trigger_request req = {2, 2, PT_SAVE_RAW_NONE, j.out_dir, true, 20000, j.coordinator_addr, NULL,
                              &interrupt_flag};
    pt_trigger_observer obs = {NULL, NULL, interrupt_at_start, NULL, NULL, count_busy};
    pt_trigger_result result;
    pt_error err;
    interrupt_flag = 0;
    assert_int_equal(pt_trigger_run(&req, &obs, &result, &err), -1);
    assert_true(result.cancelled && result.cancel_confirmed);
    assert_int_equal(result.cancelled_round, 1);
    assert_int_equal(result.cancelled_windows, 8);
    assert_false(result.round_dir_kept);
    assert_int_equal((int)entries_in(j.out_dir), 0);
    assert_true(log_contains("round 1 cancelled by its CLI; told 8 workers to drop their windows"));

    interrupt_flag = 0;
    obs.started = NULL;
    busy_heard = 0;
    assert_int_equal(pt_trigger_run(&req, &obs, &result, &err), 0);
    assert_int_equal(result.summaries, 8);
    assert_int_equal(result.failed, 0);
    assert_true(busy_heard > 0); /* the cancelled windows were still running */
    assert_int_equal((int)entries_in(j.out_dir), 1);
    pt_json_free(result.report);
    stop_job(&j);
}

static void test_killed_worker_is_reported_and_the_rest_analysed(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 8, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 8);
    fc.special_rank = 3;
    fc.special.die_in_window = true;
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 8);

    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 7);
    assert_int_equal(result.failed, 1);
    assert_string_equal(pt_json_get_string(worker_entry(result.report, 3), "status", ""), "error");
    assert_string_equal(pt_json_get_string(worker_entry(result.report, 2), "status", ""), "normal");
    assert_true(ctl_test_warning_contains(result.report, "rank 3", "died"));
    assert_int_equal((int)pt_json_get_number(pt_json_get(result.report, "job"), "workers_analyzed", 0), 7);
    /* The lost rank leads the diagnosis and counts among the missing ranks. */
    const pt_json *findings = pt_json_get(pt_json_get(result.report, "diagnosis"), "findings");
    assert_true(findings && findings->count >= 1);
    assert_string_equal(pt_json_get_string(findings->items[0], "category", ""), "lost");
    const pt_json *named = pt_json_get(findings->items[0], "workers");
    assert_true(named && named->count == 1 && named->items[0]->integer == 3);
    assert_true(strstr(pt_json_get_string(findings->items[0], "summary", ""), "Rank 3 was lost") != NULL);
    assert_null(finding(result.report, "communication"));
    const pt_json *missing = pt_json_get(pt_json_get(result.report, "job"), "missing_ranks");
    assert_true(missing && missing->count == 1 && missing->items[0]->integer == 3);
    assert_true(log_contains("rank 3 died"));
    pt_json_free(result.report);
    stop_job(&j);
}

static void test_hung_worker_is_a_hang_finding_with_its_stack(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 8, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 8);
    fc.special_rank = 5;
    fc.special.hang_at_step = 1; /* before the window (which starts at step 2 or later) */
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 8);

    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    if (getenv("PT_TEST_VERBOSE"))
        fprintf(stderr, "%s\n", log_text.data);
    assert_int_equal(result.summaries, 7);
    assert_int_equal(result.failed, 1);
    const pt_json *hang = finding(result.report, "hang");
    assert_non_null(hang);
    assert_true(names_rank(hang, 5));
    assert_false(names_rank(hang, 4));
    assert_string_equal(pt_json_get_string(hang, "function", ""), FAKE_HANG_STACK);
    assert_string_equal(pt_json_get_string(pt_json_get(result.report, "diagnosis"), "verdict", ""), "hang");
    assert_string_equal(pt_json_get_string(worker_entry(result.report, 5), "status", ""), "hang");
    pt_json_free(result.report);
    stop_job(&j);
}

static void test_wrong_keys_are_refused_and_logged(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    fc.count = 3; /* ranks 0-2 hold the job's key */
    j.fleet = fake_fleet_start(&fc);
    fake_fleet_config intruder_cfg = fc;
    intruder_cfg.first_rank = 3;
    intruder_cfg.count = 1;
    intruder_cfg.key = agent_key("not-the-job-secret");
    fake_fleet *intruder = fake_fleet_start(&intruder_cfg);
    wait_joined(j.fleet, 3);
    for (int i = 0; i < 500 && fake_fleet_refusals(intruder) == 0; i++)
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    assert_int_equal(fake_fleet_refusals(intruder), 1);
    assert_int_equal(fake_fleet_joined(intruder), 0);
    assert_true(log_contains("refused a worker connection from 127.0.0.1"));
    assert_true(log_contains("wrong job key"));

    /* A CLI with the wrong secret cannot trigger. */
    pt_trigger_result result;
    pt_error err;
    setenv("PERFTRACKER_SECRET", "guessed", 1);
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), -1);
    assert_non_null(strstr(err.message, "refused"));
    assert_true(log_contains("refused a control connection"));
    pt_coordinator_stats stats;
    pt_coordinator_stats_get(j.coordinator, &stats);
    assert_int_equal(stats.refused, 2);
    assert_int_equal(stats.rounds_finished, 0);

    /* With the job's secret it can; the intruder's rank is reported as never connected. */
    setenv("PERFTRACKER_SECRET", SECRET, 1);
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 3);
    assert_int_equal(result.failed, 1);
    assert_true(ctl_test_warning_contains(result.report, "rank 3", "never connected"));
    pt_json_free(result.report);
    fake_fleet_stop(intruder);
    stop_job(&j);
}

static void test_save_raw_master_keeps_rank0_only(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_MASTER, &result, &err), 0);
    assert_int_equal(result.summaries, 4);
    char path[1200];
    snprintf(path, sizeof path, "%s/raw_trace", result.round_dir);
    assert_int_equal(count_files(path, ".ptrace"), 1);
    snprintf(path, sizeof path, "%s/raw_trace/fakenode0_0_100000.ptrace", result.round_dir);
    assert_int_equal(access(path, F_OK), 0);
    assert_string_equal(pt_json_get_string(worker_entry(result.report, 0), "raw_trace", ""),
                        "raw_trace/fakenode0_0_100000.ptrace");
    assert_null(pt_json_get(worker_entry(result.report, 1), "raw_trace"));
    pt_json_free(result.report);
    stop_job(&j);
}

static pt_coordinator_stats wait_auto_round(pt_coordinator *c)
{
    pt_coordinator_stats stats;
    for (int i = 0; i < 3000; i++) {
        pt_coordinator_stats_get(c, &stats);
        if (stats.auto_rounds > 0)
            break;
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    }
    assert_int_equal(stats.auto_rounds, 1);
    return stats;
}

static void test_slowdown_triggers_a_round_by_itself(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, true);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    fc.auto_trigger = true;
    fc.normal.step_ns = 10 * MS;
    fc.special = fc.normal;
    fc.special_rank = 2;
    fc.special.slow_from_step = 120; /* 1.2 s at 10 ms, then 50 steps at 13 ms */
    fc.special.slow_factor = 1.3;
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    pt_coordinator_stats stats = wait_auto_round(j.coordinator);
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", stats.last_report_dir);
    pt_json *report = read_json(path);
    assert_true(ctl_test_warning_contains(report, "automatic round: rank 2", "above"));
    assert_int_equal((int)pt_json_get_number(pt_json_get(report, "job"), "workers_analyzed", 0), 4);
    assert_true(strncmp(stats.last_report_dir, j.out_dir, strlen(j.out_dir)) == 0);
    assert_true(log_contains("automatic trigger: slowdown"));
    pt_json_free(report);
    stop_job(&j);
}

static void test_hang_triggers_a_hang_report_by_itself(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, true);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    fc.auto_trigger = true;
    fc.special_rank = 1;
    fc.special.hang_at_step = 20;
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    pt_coordinator_stats stats = wait_auto_round(j.coordinator);
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", stats.last_report_dir);
    pt_json *report = read_json(path);
    const pt_json *hang = finding(report, "hang");
    assert_non_null(hang);
    assert_true(names_rank(hang, 1));
    assert_false(names_rank(hang, 0));
    assert_string_equal(pt_json_get_string(hang, "function", ""), FAKE_HANG_STACK);
    pt_json_free(report);
    stop_job(&j);
}

/* The inverted report: a hang report took a stack only from the worker that
 * noticed first (one of those waiting in the collective) and listed the rank blocked in
 * Python, still short of its own stall threshold, as "still stepping, not profiled" --
 * then named the ranks it had not looked at as the ones that stopped. Now every worker's
 * stacks and collectives are taken at the probe and the matching names the rank missing
 * from the call the others wait in. */
#define WAITING_STACK "fake_train.py: <module>|fake_train.py: train|torch/distributed/distributed_c10d.py: all_reduce"
#define PYTHON_STACK "fake_train.py: <module>|fake_train.py: train|fake_train.py: load_batch"
static void test_hang_report_takes_every_rank_at_once(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, true);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    fc.auto_trigger = true;
    fc.normal.hang_at_step = 20; /* ranks 0-2 wait in all_reduce #41 ... */
    fc.normal.stack = WAITING_STACK;
    fc.normal.collectives = "group\t0\tgloo\t4\t0-3\ncall\t40\tbroadcast\t10\tfloat32\tcompleted\t90000\n"
                            "call\t41\tall_reduce\t1000\tfloat32\tentered\t80000\n";
    fc.special_rank = 3; /* ... for rank 3, in Python, whose own stall is not yet long */
    fc.special = fc.normal;
    fc.special.hang_at_step = 25;
    fc.special.stack = PYTHON_STACK;
    fc.special.collectives = "group\t0\tgloo\t4\t0-3\ncall\t40\tbroadcast\t10\tfloat32\tcompleted\t90000\n";
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    pt_coordinator_stats stats = wait_auto_round(j.coordinator);
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", stats.last_report_dir);
    pt_json *report = read_json(path);
    const pt_json *hang = finding(report, "hang");
    assert_non_null(hang);
    for (int r = 0; r < 3; r++)
        assert_false(names_rank(hang, r));
    assert_true(names_rank(hang, 3));
    assert_string_equal(pt_json_get_string(hang, "function", ""), PYTHON_STACK);
    const pt_json *evidence = pt_json_get(pt_json_get(hang, "evidence"), "hang");
    assert_string_equal(pt_json_get_string(evidence, "kind", ""), "missing");
    assert_int_equal((int)pt_json_get_number(evidence, "seq", 0), 41);
    assert_false(ctl_test_warning_contains(report, "not profiled", NULL));
    pt_json_free(report);
    stop_job(&j);
}

/* A window its collector could not finish is reported with the cause the collector gave
 * (it used to read "out of memory copying the summary", whatever had happened). */
static void test_failed_window_reports_its_cause(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    fc.special_rank = 2;
    fc.special.window_error = "cannot write /full/node0_2_100002.ptrace: No space left on device";
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 3);
    assert_int_equal(result.failed, 1);
    assert_true(ctl_test_warning_contains(result.report, "rank 2", "No space left on device"));
    assert_false(ctl_test_warning_contains(result.report, "out of memory", NULL));
    pt_json_free(result.report);
    stop_job(&j);
}

/* Agents that opted in ask for automatic rounds, but the job (rank 0's coordinator) did
 * not: nothing starts, and the coordinator says why. */
static void test_auto_request_without_opt_in_is_refused(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    fc.auto_trigger = true;
    fc.auto_interval_ns = 0;
    fc.special_rank = 1;
    fc.special.hang_at_step = 20;
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    for (int i = 0; i < 1000 && !log_contains("did not opt in"); i++)
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    assert_true(log_contains("refused rank 1's request for an automatic hang report round: this job did not opt in"));
    pt_coordinator_stats stats;
    pt_coordinator_stats_get(j.coordinator, &stats);
    assert_int_equal(stats.auto_rounds, 0);
    assert_false(stats.round_running);
    stop_job(&j);
}

/* Unauthenticated bytes cost the coordinator at most a small buffer, then the connection. */
static void test_unauthenticated_flood_is_dropped(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 2, false);
    pt_error err;
    int fd = pt_net_connect("127.0.0.1", pt_coordinator_port(j.coordinator), 1000, &err);
    assert_true(fd >= 0);
    uint8_t junk[8192] = {0xff, 0xff, 0xff, 0x03}; /* declares a 64 MB frame */
    ssize_t sent = send(fd, junk, sizeof junk, MSG_NOSIGNAL);
    assert_true(sent > 1024);
    struct pollfd p = {fd, POLLIN, 0};
    bool closed = false;
    for (int i = 0; i < 200 && !closed; i++) { /* the challenge arrives first, then EOF */
        if (poll(&p, 1, 20) > 0) {
            char buf[256];
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            closed = n == 0 || (n < 0 && errno != EAGAIN);
        }
    }
    close(fd);
    assert_true(closed);
    assert_true(log_contains("more than the 1024 it may send"));

    fake_fleet_config fc; /* and the job is unharmed */
    base_fleet(&j, &fc, 2);
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 2);
    pt_trigger_result result;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 2);
    pt_json_free(result.report);
    stop_job(&j);
}


/* Agents outlive their coordinator: when it comes back on the same port they rejoin. */
static void test_agents_reconnect_after_coordinator_restart(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 4, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 4);
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 4);
    uint16_t port = pt_coordinator_port(j.coordinator);
    pt_coordinator_stop(j.coordinator);
    for (int i = 0; i < 500 && fake_fleet_joined(j.fleet) > 0; i++)
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    assert_int_equal(fake_fleet_joined(j.fleet), 0);

    pt_coordinator_config cfg;
    pt_coordinator_config_defaults(&cfg);
    cfg.port = port;
    cfg.world_size = 4;
    pt_job_env env = {0};
    pt_error err;
    assert_int_equal(pt_auth_agent_key(&cfg.agent_key, &err), 1);
    assert_int_equal(pt_auth_create_control_key(&env, &cfg.control_key, &err), 0);
    cfg.log.fn = capture_log;
    j.coordinator = pt_coordinator_start(&cfg, &err);
    assert_non_null(j.coordinator);
    wait_joined(j.fleet, 4);
    pt_trigger_result result;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 4);
    pt_json_free(result.report);
    assert_true(log_contains("lost the coordinator"));
    stop_job(&j);
}


/* ---------------------------------------------------------------- agent.h, as the collector uses it */

typedef struct process_worker {
    int64_t t0;
    pthread_mutex_t lock;
    int64_t start_step;
    int32_t steps; /* 0: not armed */
} process_worker;

/* 10 ms steps, 15 ms from step 200: a slowdown for the automatic trigger. */
static int64_t process_steps(const process_worker *w, int64_t now, int64_t *last_end)
{
    int64_t t = now - w->t0, fast = 200 * 10 * MS;
    int64_t n = t < fast ? t / (10 * MS) : 200 + (t - fast) / (15 * MS);
    *last_end = w->t0 + (n <= 200 ? n * 10 * MS : fast + (n - 200) * 15 * MS);
    return n;
}

static void process_status(void *ctx, int64_t *steps_done, int64_t *last_step_end_ns, int64_t *mean_step_ns)
{
    *steps_done = process_steps(ctx, pt_now_ns(), last_step_end_ns);
    *mean_step_ns = 10 * MS;
}

static int process_arm(void *ctx, int64_t start_step, int32_t steps, const char *raw_trace_path)
{
    process_worker *w = ctx;
    (void)raw_trace_path;
    pthread_mutex_lock(&w->lock);
    w->start_step = start_step;
    w->steps = steps;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static void test_process_agent_api_and_auto_trigger_argument(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 2, true);
    process_worker pw = {pt_now_ns(), PTHREAD_MUTEX_INITIALIZER, 0, 0};
    pt_agent_hooks hooks = {&pw, process_arm, process_status, NULL};
    pt_error err;
    unsetenv("RANK");
    unsetenv("MASTER_ADDR");
    assert_int_equal(pt_agent_start(&hooks, &err), 1); /* not a distributed job: nothing started */

    char port[16];
    snprintf(port, sizeof port, "%u", (unsigned)pt_coordinator_port(j.coordinator) - 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("PERFTRACKER_HEARTBEAT_MS", "100", 1);
    unsetenv("PERFTRACKER_AUTO_TRIGGER");
    pt_agent_set_auto_trigger(1); /* PerfTracker(auto_trigger=True) */
    assert_int_equal(pt_agent_start(&hooks, &err), 0);
    assert_int_equal(pt_agent_start(&hooks, &err), -1); /* one agent per process */

    fake_fleet_config fc; /* rank 0, steady */
    base_fleet(&j, &fc, 2);
    fc.count = 1;
    fc.normal.step_ns = 10 * MS;
    j.fleet = fake_fleet_start(&fc);

    /* Play the collector: when the armed window has passed, hand over a summary. */
    pt_worker_summary *s = pt_summary_new();
    s->rank = 1;
    s->world_size = 2;
    s->local_rank = 1;
    s->name = pt_xstrdup("proc_1_1.ptrace");
    s->window_ns = 20 * MS;
    s->idle_ns = 20 * MS;
    pt_buf blob = PT_BUF_INIT;
    pt_summary_encode(s, &blob);
    pt_summary_free(s);
    pt_coordinator_stats stats = {0};
    bool delivered = false;
    for (int i = 0; i < 1500 && stats.auto_rounds == 0; i++) {
        int64_t last_end;
        int64_t n = process_steps(&pw, pt_now_ns(), &last_end);
        pthread_mutex_lock(&pw.lock);
        bool due = pw.steps && !delivered && n >= pw.start_step + pw.steps;
        pthread_mutex_unlock(&pw.lock);
        if (due) {
            pt_agent_window_done(blob.data, blob.len, "", 0, NULL);
            delivered = true;
        }
        pt_coordinator_stats_get(j.coordinator, &stats);
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    }
    assert_true(delivered);
    assert_int_equal(stats.auto_rounds, 1);
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", stats.last_report_dir);
    pt_json *report = read_json(path);
    assert_true(ctl_test_warning_contains(report, "automatic round: rank 1", "above"));
    assert_int_equal((int)pt_json_get_number(pt_json_get(report, "job"), "workers_analyzed", 0), 2);
    pt_json_free(report);
    pt_agent_stop();
    pt_agent_stop(); /* idempotent */
    pt_buf_free(&blob);
    const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "PERFTRACKER_HEARTBEAT_MS"};
    for (size_t i = 0; i < PT_ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
    pt_agent_set_auto_trigger(0);
    stop_job(&j);
}

/* ---------------------------------------------------------------- the relay tree */

/* A fleet whose nodes of 8 ranks each reach the coordinator through their node's relay
 * (every relay on a Unix socket of its own, named with the coordinator's port number). */
static void tree_fleet(const job *j, fake_fleet_config *fc, int32_t world_size, bool driven)
{
    base_fleet(j, fc, world_size);
    fc->tree = true;
    fc->driven = driven;
    fc->relay_port = pt_coordinator_port(j->coordinator);
}

/* Until the coordinator's stats (refreshed every tick) show the relays and the agents. */
static void wait_tree(job *j, int relays, int agents)
{
    pt_coordinator_stats st = {0};
    for (int i = 0; i < 1000; i++) {
        pt_coordinator_stats_get(j->coordinator, &st);
        if (st.relays == relays && st.agents == agents)
            break;
        nanosleep(&(struct timespec){0, 10 * MS}, NULL);
    }
    assert_int_equal(st.relays, relays);
    assert_int_equal(st.agents, agents);
}

/* Through the tree the round is the flat one's: every rank's summary, the fault named,
 * and rank 0 holds one connection per node. */
static void test_tree_round_finds_the_slow_gpu(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 32, false);
    fake_fleet_config fc;
    tree_fleet(&j, &fc, 32, false);
    fc.special_rank = 29;
    fc.special.faulty_profile = true;
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 32);
    wait_tree(&j, 4, 32);

    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 32);
    assert_int_equal(result.failed, 0);
    const pt_json *job_facts = pt_json_get(result.report, "job");
    assert_int_equal((int)pt_json_get_number(job_facts, "workers_analyzed", 0), 32);
    assert_int_equal(pt_json_get(job_facts, "missing_ranks")->count, 0);
    const pt_json *slow = finding(result.report, "gpu_compute");
    assert_non_null(slow);
    assert_true(names_rank(slow, 29));
    assert_false(names_rank(slow, 3));
    char path[1200];
    snprintf(path, sizeof path, "%s/summaries", result.round_dir);
    assert_int_equal(count_files(path, ".ptsum"), 32);
    pt_json_free(result.report);
    stop_job(&j);
}

/* A 32-worker tree job (4 relays), joined, then idle for idle_s: the heartbeats rank 0
 * took and the relay frames it read meanwhile, and its stats after. heartbeat_ns 0: the
 * fleet's default. The job is left running. */
static pt_coordinator_stats idle_tree(job *j, int64_t heartbeat_ns, int idle_s, uint64_t *beats, uint64_t *frames)
{
    start_coordinator(j, 32, false);
    fake_fleet_config fc;
    tree_fleet(j, &fc, 32, false);
    if (heartbeat_ns > 0)
        fc.heartbeat_ns = heartbeat_ns;
    j->fleet = fake_fleet_start(&fc);
    wait_joined(j->fleet, 32);
    wait_tree(j, 4, 32);
    pt_coordinator_stats before, after;
    pt_coordinator_stats_get(j->coordinator, &before);
    nanosleep(&(struct timespec){idle_s, 0}, NULL);
    pt_coordinator_stats_get(j->coordinator, &after);
    *beats = after.heartbeats - before.heartbeats;
    *frames = after.relay_frames - before.relay_frames;
    return after;
}

/* Each relay merges its node's heartbeats: over two idle seconds rank 0 takes every
 * worker's heartbeats (32 workers at 200 ms) in a few frames per node, not one frame per
 * heartbeat -- the cost that grew with the job at 100k workers -- and a round through the
 * merged tree still has every summary. */
static void test_tree_relays_merge_their_nodes_heartbeats(void **state)
{
    (void)state;
    job j = {0};
    uint64_t beats, frames;
    idle_tree(&j, 0, 2, &beats, &frames);
    print_message("2 s idle: %llu heartbeats in %llu frames from 4 relays\n", (unsigned long long)beats,
                  (unsigned long long)frames);
    assert_true(beats >= 32);         /* every worker was heard */
    assert_true(beats >= 3 * frames); /* one by one, frames >= beats */

    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 32);
    assert_int_equal(result.failed, 0);
    pt_json_free(result.report);
    stop_job(&j);
}

/* A big job's agents beat less often (agent.c: 5 s at 100k workers), and their relays
 * hold heartbeats for that period, keepalives included: rank 0 reads about one frame per
 * node per period (when the hold stopped at 1 s, relays sent one a second whatever the
 * period). Here 2 s heartbeats, 6 s idle, 4 relays: at most 4 frames each, not 6. */
static void test_tree_relays_hold_heartbeats_for_their_period(void **state)
{
    (void)state;
    job j = {0};
    uint64_t beats, frames;
    pt_coordinator_stats after = idle_tree(&j, 2000 * MS, 6, &beats, &frames);
    print_message("6 s idle, 2 s heartbeats: %llu heartbeats in %llu frames from 4 relays\n",
                  (unsigned long long)beats, (unsigned long long)frames);
    assert_true(beats >= 32); /* every worker was heard */
    if (frames > 4 * 4)
        fail_msg("%llu frames from 4 relays in 6 s of 2 s heartbeats (at most 16)", (unsigned long long)frames);
    assert_int_equal(after.relays, 4); /* a hold is not silence */
    assert_int_equal(after.agents, 32);
    stop_job(&j);
}

/* A relay dies as its node's window begins, its agents alive (driven from one thread):
 * its 8 ranks are named lost, with the relay as the cause, and every other rank's summary
 * still arrives. */
static void test_tree_relay_killed_mid_round_names_its_ranks(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 32, false);
    fake_fleet_config fc;
    tree_fleet(&j, &fc, 32, true);
    fc.kill_relay_node = 2; /* ranks 16..23 */
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 32);
    wait_tree(&j, 4, 32);

    pt_trigger_result result;
    pt_error err;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 24);
    assert_int_equal(result.failed, 8);
    for (int rank = 0; rank < 32; rank++) {
        const pt_json *w = worker_entry(result.report, rank);
        bool lost = rank >= 16 && rank < 24;
        assert_non_null(w);
        assert_string_equal(pt_json_get_string(w, "status", ""), lost ? "error" : "normal");
    }
    assert_true(ctl_test_warning_contains(result.report, "rank 16", "the relay of node 2"));
    assert_true(ctl_test_warning_contains(result.report, "rank 23", "the relay of node 2"));
    assert_false(ctl_test_warning_contains(result.report, "rank 15", NULL));
    pt_json_free(result.report);
    stop_job(&j);
}

/* A peer with the agent key playing a relay. */

static void send_now(pt_conn *c, const pt_ctl_msg *m)
{
    assert_int_equal(ctl_test_send_now(c, m), 0);
}

static void relay_handshake(const job *j, pt_conn *c)
{
    pt_error err;
    int fd = pt_net_connect("127.0.0.1", pt_coordinator_port(j->coordinator), 1000, &err);
    assert_true(fd >= 0);
    pt_conn_init(c, fd, 1u << 20);
    pt_ctl_msg m, reply;
    assert_int_equal(ctl_test_next_msg(c, &m), 1);
    assert_int_equal(m.type, PT_CTL_CHALLENGE);
    pt_key key = agent_key(SECRET);
    pt_ctl_msg_init(&reply, PT_CTL_AUTH);
    reply.role = PT_CTL_ROLE_RELAY;
    memset(reply.nonce, 7, sizeof reply.nonce);
    pt_auth_client_proof(&key, PT_CTL_ROLE_RELAY, m.nonce, reply.nonce, reply.mac);
    send_now(c, &reply);
    assert_int_equal(ctl_test_next_msg(c, &m), 1);
    assert_int_equal(m.type, PT_CTL_WELCOME);
    pt_ctl_msg_init(&reply, PT_CTL_JOIN);
    reply.worker = (pt_ctl_worker){8, 0, 16, 1, 4242, pt_ctl_str("intruder")};
    send_now(c, &reply);
}

/* A JOIN for `rank`, as a relay would wrap it, claiming to be `claims`. */
static void relayed_join(pt_conn *c, int32_t rank, int32_t claims)
{
    pt_ctl_msg join, wrapped;
    pt_ctl_msg_init(&join, PT_CTL_JOIN);
    join.worker = (pt_ctl_worker){claims, 1, 16, 1, 4243, pt_ctl_str("intruder")};
    uint8_t frame[512];
    size_t n = pt_ctl_encode(&join, frame, sizeof frame);
    assert_true(n > 0);
    pt_ctl_msg_init(&wrapped, PT_CTL_RELAYED);
    wrapped.relayed_rank = rank;
    wrapped.blob = pt_ctl_blob(frame, n);
    send_now(c, &wrapped);
}

/* A relay holding the agent key cannot take the place of a rank that is connected and
 * heard from (its JOIN is refused, wrapped for that rank), and one whose envelope names
 * one rank and whose JOIN another is dropped; the round after it has every real worker. */
static void test_tree_hostile_relay_cannot_take_a_live_rank(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 16, false);
    fake_fleet_config fc;
    base_fleet(&j, &fc, 16);
    j.fleet = fake_fleet_start(&fc);
    wait_joined(j.fleet, 16);

    pt_conn relay;
    relay_handshake(&j, &relay);
    relayed_join(&relay, 3, 3);
    pt_ctl_msg m, inner;
    pt_error err;
    assert_int_equal(ctl_test_next_msg(&relay, &m), 1);
    assert_int_equal(m.type, PT_CTL_RELAYED);
    assert_int_equal(m.relayed_rank, 3);
    assert_true(pt_ctl_decode(m.blob.data, m.blob.len, &inner, &err) > 0);
    assert_int_equal(inner.type, PT_CTL_REFUSED);
    char text[256];
    pt_ctl_copy_str(text, sizeof text, inner.text);
    assert_non_null(strstr(text, "rank 3 is already connected"));
    relayed_join(&relay, 4, 5); /* an envelope for rank 4 around rank 5's JOIN */
    assert_int_equal(ctl_test_next_msg(&relay, &m), -1);
    pt_conn_close(&relay);

    pt_trigger_result result;
    assert_int_equal(trigger(&j, PT_SAVE_RAW_NONE, &result, &err), 0);
    assert_int_equal(result.summaries, 16);
    assert_int_equal(result.failed, 0);
    assert_true(log_contains("the relay sent a bad frame for rank 4"));
    pt_json_free(result.report);
    stop_job(&j);
}

/* A node's relay listens on an abstract Unix socket, which has no permissions: a peer of
 * another user that connects is closed before the challenge (and logged), and an agent
 * refuses a socket another user took the name of. Needs root, to be another user. */

static int squat_as_nobody(const char *name, int ready_fd, int done_fd)
{
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 2;
    pt_error err;
    int fd = pt_net_listen(name, 0, NULL, &err);
    char byte = fd >= 0 ? 'y' : 'n';
    if (write(ready_fd, &byte, 1) != 1 || read(done_fd, &byte, 1) < 0)
        return 3;
    return 0;
}

/* The relay of node 1 (ranks 8-15) of a 16-rank job, on a socket named for this test. */
static void node1_relay_config(const job *j, const char *name, pt_relay_config *rc)
{
    memset(rc, 0, sizeof *rc);
    rc->rank = 8, rc->node_rank = 1, rc->world_size = 16, rc->pid = getpid();
    snprintf(rc->host, sizeof rc->host, "node1");
    snprintf(rc->listen_host, sizeof rc->listen_host, "@perftracker-test-%d-%s", (int)getpid(), name);
    snprintf(rc->coordinator_host, sizeof rc->coordinator_host, "127.0.0.1");
    rc->coordinator_port = pt_coordinator_port(j->coordinator);
    rc->key = agent_key(SECRET);
}

static void test_tree_relay_socket_refuses_another_user(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: needs root, to connect as another user\n");
        skip();
    }
    job j = {0};
    start_coordinator(&j, 16, false);
    pt_relay_config rc;
    node1_relay_config(&j, "relay", &rc);
    rc.log.fn = capture_log;
    pt_error err;
    pt_relay *relay = pt_relay_create(&rc, &err);
    assert_non_null(relay);
    assert_int_equal(pt_relay_start_thread(relay, &err), 0);
    wait_tree(&j, 1, 0);
    pid_t child = fork();
    if (child == 0)
        _exit(ctl_test_connect_as_nobody(rc.listen_host));
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(log_contains("relay: refused a connection from user 65534"));
    /* This user's peer still gets the challenge. */
    int own = pt_net_connect(rc.listen_host, 0, 1000, &err);
    assert_true(own >= 0);
    struct pollfd p = {own, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 5000), 1);
    char frame[64];
    assert_true(read(own, frame, sizeof frame) > 0);
    close(own);
    pt_relay_destroy(relay);
    stop_job(&j);

    /* The agent's side: a name another user holds is refused before the handshake. */
    char squatted[64];
    snprintf(squatted, sizeof squatted, "@perftracker-test-%d-squat", (int)getpid());
    int ready[2], done[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(done), 0);
    child = fork();
    if (child == 0)
        _exit(squat_as_nobody(squatted, ready[1], done[0]));
    char byte = 0;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    assert_int_equal(byte, 'y');
    assert_int_equal(pt_net_connect(squatted, 0, 1000, &err), -1);
    assert_non_null(strstr(err.message, "is held by user 65534, not this one (0): refused"));
    assert_int_equal(write(done[1], "x", 1), 1);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 2; i++)
        close(ready[i]), close(done[i]);
}

/* A local connection that never JOINs is closed at the deadline, however many others
 * come and go meanwhile: the relay skips its walk over the locals while none is unjoined,
 * and that count must survive a connection closed by its peer and one that joins. */
static bool closed_within(int fd, int ms)
{
    char buf[256];
    for (int waited = 0; waited < ms; waited += 50) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) == 1) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EAGAIN))
                return true;
        }
    }
    return false;
}

static void test_tree_relay_closes_a_local_that_never_joins(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 16, false);
    pt_relay_config rc;
    node1_relay_config(&j, "join", &rc);
    rc.join_timeout_ms = 1500;
    rc.log.fn = capture_log;
    pt_error err;
    pt_relay *relay = pt_relay_create(&rc, &err);
    assert_non_null(relay);
    assert_int_equal(pt_relay_start_thread(relay, &err), 0);
    wait_tree(&j, 1, 0);
    int64_t t0 = pt_now_ns();
    int idle = pt_net_connect(rc.listen_host, 0, 1000, &err);
    int quitter = pt_net_connect(rc.listen_host, 0, 1000, &err);
    assert_true(idle >= 0 && quitter >= 0);
    close(quitter); /* closed by its peer before it joined */
    pt_agent_config ac;
    pt_agent_config_defaults(&ac);
    ac.rank = 9, ac.local_rank = 1, ac.node_rank = 1, ac.world_size = 16, ac.pid = 4242;
    snprintf(ac.host, sizeof ac.host, "node1");
    snprintf(ac.coordinator_host, sizeof ac.coordinator_host, "%s", rc.listen_host);
    ac.key = rc.key;
    ac.log.fn = capture_log;
    process_worker pw = {pt_now_ns(), PTHREAD_MUTEX_INITIALIZER, 0, 0};
    pt_agent_hooks hooks = {&pw, process_arm, process_status, NULL};
    pt_agent *agent = pt_agent_create(&ac, &hooks, &err);
    assert_non_null(agent);
    wait_tree(&j, 1, 1);
    assert_true(closed_within(idle, 8000));
    int64_t waited_ms = (pt_now_ns() - t0) / MS;
    assert_true(waited_ms >= 1400); /* not before its deadline */
    close(idle);
    /* The joined agent is not closed by the deadline. */
    nanosleep(&(struct timespec){2, 0}, NULL);
    wait_tree(&j, 1, 1);
    pt_agent_destroy(agent, true);
    pt_relay_destroy(relay);
    stop_job(&j);
}

/* The process API in tree mode: local rank 0 of node 1 (rank 8 of 16) hosts its node's
 * relay, and its own agent reaches the coordinator through it; at stop both go. */
static void test_process_agent_api_hosts_the_node_relay(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator(&j, 16, false);
    uint16_t relay_port = 0;
    pt_error err;
    int probe = pt_net_listen("127.0.0.1", 0, &relay_port, &err);
    assert_true(probe >= 0);
    close(probe);
    char port[16], relay[16];
    snprintf(port, sizeof port, "%u", (unsigned)pt_coordinator_port(j.coordinator) - 1);
    snprintf(relay, sizeof relay, "%u", (unsigned)relay_port);
    setenv("RANK", "8", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("GROUP_RANK", "1", 1);
    setenv("WORLD_SIZE", "16", 1);
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("PERFTRACKER_COORDINATOR", j.coordinator_addr, 1); /* a "multi-node" job on one machine */
    setenv("PERFTRACKER_RELAY", "1", 1);
    setenv("PERFTRACKER_RELAY_PORT", relay, 1);
    process_worker pw = {pt_now_ns(), PTHREAD_MUTEX_INITIALIZER, 0, 0};
    pt_agent_hooks hooks = {&pw, process_arm, process_status, NULL};
    assert_int_equal(pt_agent_start(&hooks, &err), 0);
    wait_tree(&j, 1, 1);
    pt_agent_stop();
    wait_tree(&j, 0, 0);
    const char *vars[] = {"RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "PERFTRACKER_COORDINATOR", "PERFTRACKER_RELAY", "PERFTRACKER_RELAY_PORT"};
    for (size_t i = 0; i < PT_ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
    stop_job(&j);
}

/* A node's relay is up before any of its ranks has joined (they start late, or the
 * machine is loaded): the coordinator, which drops a silent relay after the heartbeat
 * timeout, hears its keepalive and keeps it -- at 100k workers on a loaded machine,
 * thousands of relays were dropped so, reconnected, and the join never ended. */
static void test_tree_relay_with_no_ranks_yet_is_not_dropped(void **state)
{
    (void)state;
    job j = {0};
    start_coordinator_timeout(&j, 16, false, 2000 * MS);
    pt_relay_config rc;
    memset(&rc, 0, sizeof rc);
    rc.rank = 8, rc.node_rank = 1, rc.world_size = 16, rc.pid = getpid();
    snprintf(rc.host, sizeof rc.host, "latenode1");
    snprintf(rc.listen_host, sizeof rc.listen_host, "127.0.0.1");
    snprintf(rc.coordinator_host, sizeof rc.coordinator_host, "127.0.0.1");
    rc.coordinator_port = pt_coordinator_port(j.coordinator);
    rc.key = agent_key(SECRET);
    rc.log.fn = capture_log;
    pt_error err;
    pt_relay *relay = pt_relay_create(&rc, &err);
    assert_non_null(relay);
    assert_int_equal(pt_relay_start_thread(relay, &err), 0);
    wait_tree(&j, 1, 0);
    /* Two and a half heartbeat timeouts with nothing to relay. */
    nanosleep(&(struct timespec){5, 0}, NULL);
    assert_false(log_contains("the relay of rank 8: no heartbeat"));
    assert_false(log_contains("the relay of node 1 (rank 8 on latenode1"));
    assert_true(pt_relay_is_up(relay));
    wait_tree(&j, 1, 0);
    pt_relay_destroy(relay);
    stop_job(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_finds_the_slow_gpu),
        cmocka_unit_test(test_bounded_round_writes_the_parts_its_page_reads),
        cmocka_unit_test(test_killed_worker_is_reported_and_the_rest_analysed),
        cmocka_unit_test(test_interrupted_round_is_cancelled_everywhere_and_the_next_one_waits),
        cmocka_unit_test(test_hung_worker_is_a_hang_finding_with_its_stack),
        cmocka_unit_test(test_wrong_keys_are_refused_and_logged),
        cmocka_unit_test(test_save_raw_master_keeps_rank0_only),
        cmocka_unit_test(test_slowdown_triggers_a_round_by_itself),
        cmocka_unit_test(test_hang_triggers_a_hang_report_by_itself),
        cmocka_unit_test(test_hang_report_takes_every_rank_at_once),
        cmocka_unit_test(test_unauthenticated_flood_is_dropped),
        cmocka_unit_test(test_failed_window_reports_its_cause),
        cmocka_unit_test(test_auto_request_without_opt_in_is_refused),
        cmocka_unit_test(test_agents_reconnect_after_coordinator_restart),
        cmocka_unit_test(test_process_agent_api_and_auto_trigger_argument),
        cmocka_unit_test(test_tree_round_finds_the_slow_gpu),
        cmocka_unit_test(test_tree_relays_merge_their_nodes_heartbeats),
        cmocka_unit_test(test_tree_relays_hold_heartbeats_for_their_period),
        cmocka_unit_test(test_tree_relay_killed_mid_round_names_its_ranks),
        cmocka_unit_test(test_tree_hostile_relay_cannot_take_a_live_rank),
        cmocka_unit_test(test_tree_relay_with_no_ranks_yet_is_not_dropped),
        cmocka_unit_test(test_tree_relay_socket_refuses_another_user),
        cmocka_unit_test(test_tree_relay_closes_a_local_that_never_joins),
        cmocka_unit_test(test_process_agent_api_hosts_the_node_relay),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pt_buf_free(&log_text);
    return rc;
}
