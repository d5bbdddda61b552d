/* test_hostile_summary.c -- a hostile SUMMARY frame cannot crash whoever collects the
 * round (issue 15, item 1).
 *
 * In an automatic round the collector is rank 0's coordinator thread, inside the training
 * process: coordinator.c hands every SUMMARY frame's bytes to pt_round_add_summary and,
 * when the round ends, runs pt_round_report (the diagnosis) right there. A summary that
 * repeated a metric name overflowed the hardware section's heap array, and the training
 * job died with "malloc(): invalid size". The CLI collects triggered rounds with the same
 * two calls. So this test is that path without the sockets: a round of 4 where ranks 0, 1
 * and 3 send valid summaries and rank 2 sends each saved crasher of
 * fuzz/regressions/summary/ (argv[1]) in turn. Each crasher is refused when it arrives,
 * with the rule it broke; the report is written, names rank 2 as failed with that
 * reason, and analyses the other three. */
#define _GNU_SOURCE
#include "check.h"
#include "control/round.h"
#include "summarize/summary_io.h"
#include "synth/synth.h"
#include "util/input.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 4
#define HOSTILE_RANK 2

static pt_buf valid[WORKERS];

static void make_valid_summaries(void)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = WORKERS, job.steps = 2, job.layers = 1;
    pt_error err = {{0}};
    for (int r = 0; r < WORKERS; r++) {
        pt_worker_summary *s = pt_synth_summary(&job, r, &err);
        if (!s)
            abort();
        pt_summary_encode(s, &valid[r]);
        pt_summary_free(s);
    }
}

static bool warned(const pt_json *report, const char *a, const char *b)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    for (size_t i = 0; warnings && i < warnings->count; i++)
        if (strstr(warnings->items[i]->string, a) && strstr(warnings->items[i]->string, b))
            return true;
    return false;
}

static const char *status_of(const pt_json *report, int rank)
{
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; workers && i < workers->count; i++)
        if (pt_json_get_number(workers->items[i], "rank", -2) == rank)
            return pt_json_get_string(workers->items[i], "status", "");
    return "(absent)";
}

static void round_with(const char *file, const char *bytes, size_t len)
{
    char top[] = "/tmp/pt-hostile-summary-XXXXXX", dir[4096];
    if (!mkdtemp(top))
        abort();
    pt_error err = {{0}};
    CHECK(pt_round_make_dir(top, dir, sizeof dir, &err) == 0, "round dir: %s", err.message);
    pt_round *r = pt_round_new(dir, WORKERS);
    char refusal[sizeof err.message] = "";
    for (int rank = 0; rank < WORKERS; rank++) {
        pt_ctl_worker w = {rank, rank, WORKERS, 0, 10000 + rank, pt_ctl_str("node0")};
        const void *blob = rank == HOSTILE_RANK ? bytes : valid[rank].data;
        size_t n = rank == HOSTILE_RANK ? len : valid[rank].len;
        int steps = pt_round_add_summary(r, &w, NULL, blob, n, NULL, &err);
        if (rank == HOSTILE_RANK) {
            CHECK(steps < 0 && err.message[0], "%s: the hostile summary was accepted", file);
            snprintf(refusal, sizeof refusal, "%s", err.message);
        } else {
            CHECK(steps >= 0, "%s: rank %d's valid summary refused: %s", file, rank, err.message);
        }
    }
    pt_json *report = pt_round_report(r, &err);
    CHECK(report != NULL, "%s: no report: %s", file, err.message);
    if (report) {
        const pt_json *job = pt_json_get(report, "job");
        CHECK(pt_json_get_number(job, "workers_analyzed", -1) == 3, "%s: %g workers analysed, not 3", file,
              pt_json_get_number(job, "workers_analyzed", -1));
        CHECK(strcmp(status_of(report, HOSTILE_RANK), "error") == 0, "%s: rank 2 is %s, not error", file,
              status_of(report, HOSTILE_RANK));
        for (int rank = 0; rank < WORKERS; rank++)
            CHECK(rank == HOSTILE_RANK || strcmp(status_of(report, rank), "normal") == 0, "%s: rank %d is %s", file,
                  rank, status_of(report, rank));
        CHECK(refusal[0] && warned(report, "rank 2", refusal), "%s: no warning naming rank 2 and \"%s\"", file,
              refusal);
        pt_json_free(report);
    }
    printf("%s: refused: %s\n", file, refusal);
    pt_round_free(r);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
}

/* A valid summary of `names` Python stacks nobody else has: each costs the collector a
 * name and a column, which the round's memory share must count before paying for. */
static void make_name_bomb(size_t names, pt_buf *out)
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = WORKERS, job.steps = 2, job.layers = 1;
    pt_error err = {{0}};
    pt_worker_summary *s = pt_synth_summary(&job, HOSTILE_RANK, &err);
    if (!s)
        abort();
    size_t first = s->function_count;
    s->functions = realloc(s->functions, (first + names) * sizeof *s->functions);
    if (!s->functions)
        abort();
    for (size_t i = 0; i < names; i++) {
        pt_function_summary *f = &s->functions[first + i];
        memset(f, 0, sizeof *f);
        f->cls = PT_CLASS_PYTHON;
        char name[64];
        snprintf(name, sizeof name, "train.py: step|bomb.py: f%zu", i);
        f->name = pt_xstrdup(name);
        f->count = 1, f->total_ns = 1000, f->median_ns = 1000, f->max_ns = 1000;
    }
    s->function_count = first + names;
    pt_summary_encode(s, out);
    pt_summary_free(s);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_hostile_summary fuzz/regressions/summary\n");
        return 2;
    }
    make_valid_summaries();
    DIR *d = opendir(argv[1]);
    CHECK(d != NULL, "cannot open %s", argv[1]);
    size_t rounds = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], de->d_name);
        size_t len;
        pt_error err = {{0}};
        char *bytes = pt_read_file(path, 1 << 20, &len, &err);
        CHECK(bytes != NULL, "%s: %s", path, err.message);
        if (bytes)
            round_with(de->d_name, bytes, len), rounds++;
        free(bytes);
    }
    if (d)
        closedir(d);
    CHECK(rounds >= 3, "only %zu crashers in %s", rounds, argv[1]);

    /* A valid summary too big for the round's memory: 300 000 names under a 64 MiB budget
     * (PERFTRACKER_ANALYZE_MEMORY_MB, read as the round starts). It decodes with no
     * budget, so the refusal is the budget's. */
    pt_buf bomb = PT_BUF_INIT;
    make_name_bomb(300000, &bomb);
    pt_error err = {{0}};
    pt_worker_summary *whole = pt_summary_decode(bomb.data, bomb.len, &err);
    CHECK(whole != NULL, "the name bomb does not decode without a budget: %s", err.message);
    pt_summary_free(whole);
    setenv("PERFTRACKER_ANALYZE_MEMORY_MB", "64", 1);
    round_with("name-bomb (300000 names, 64 MiB)", (const char *)bomb.data, bomb.len);
    unsetenv("PERFTRACKER_ANALYZE_MEMORY_MB");
    pt_buf_free(&bomb);
    for (int r = 0; r < WORKERS; r++)
        pt_buf_free(&valid[r]);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("PASS: %zu hostile summaries refused by the round's collector, the other workers analysed\n", rounds);
    return 0;
}
