/* diff.c -- `perftracker diff [-o OUT] [-j THREADS] [--quiet] BEFORE AFTER`.
 *
 * Each side is one run: a trace or summary file, a directory of them (read exactly as
 * `analyze` reads a job, by pt_cli_read_job), an analyze output directory, or a
 * report.json (which carries less; the diff says so). The comparison is the library's
 * (compare/diff.c); this file only finds out what each argument is, reads it, and writes
 * OUT/diff.json, OUT/PerfDisplay/ and a short summary on stdout. Exit status: 0 diff
 * written; 3 written, but some inputs were unreadable or invalid (pt_summary_check); 1 a
 * run had nothing readable or the diff could not be written; 2 bad command line. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "compare/diff.h"
#include "report/diff_report.h"
#include "report/report.h"
#include "util/input.h"
#include "util/json.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_OUT "perftracker-diff"
#define MAX_REPORT_BYTES ((size_t)1 << 30)
#define REPORT_MAX_DEPTH 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perftracker diff [-o OUT] [-j THREADS] [--quiet] BEFORE AFTER\n"
            "  Compare two runs of a job and say what changed: step time, each class's exposed\n"
            "  time, the functions whose time per step changed beyond noise, the functions added\n"
            "  and removed, and why. BEFORE and AFTER are each a trace or summary file (Kineto\n"
            "  JSON, .json.gz, .ptrace, .ptsum, a .tar of .ptsum files), a directory of them (one\n"
            "  file per worker), an analyze output directory, or a report.json (less detail; the\n"
            "  diff says what).\n"
            "  -o OUT       output directory (default ./%s): OUT/diff.json, OUT/PerfDisplay/\n"
            "  -j THREADS   files read in parallel (default: number of CPUs)\n"
            "  -q, --quiet  print only the verdict line, not the summary\n"
            "Exit status: 0 diff written; 3 written, some inputs unreadable or invalid; 1 a run had nothing\n"
            "readable; 2 bad command line.\n",
            DEFAULT_OUT);
}

typedef enum input_kind { INPUT_TRACES, INPUT_SUMMARIES, INPUT_REPORT } input_kind;

/* The next byte of f that is not JSON whitespace, or EOF. */
static int next_non_space(FILE *f)
{
    int c;
    while ((c = getc(f)) != EOF && pt_json_is_space(c)) {
    }
    return c;
}

/* The first key of a JSON document, when it is one of perftracker's ("report_version",
 * "diff_version"): the writer puts it first. Traces are not parsed here. */
static const char *document_kind(const char *path)
{
    if (!pt_ends_with(path, ".json"))
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    /* JSON's whitespace around the '{' may be of any length: read through, not windowed. */
    char head[64] = {0};
    size_t n = 0;
    int c = next_non_space(f);
    if (c == '{' && (c = next_non_space(f)) != EOF) {
        head[n++] = (char)c;
        n += fread(head + n, 1, sizeof head - 1 - n, f);
    }
    fclose(f);
    if (strncmp(head, "\"report_version\"", 16) == 0)
        return "report";
    if (strncmp(head, "\"diff_version\"", 14) == 0)
        return "diff";
    return NULL;
}

/* What a directory holds: worker files (all summaries?), else a report.json. */
static int classify_dir(const char *dir, input_kind *kind, pt_buf *path)
{
    DIR *d = opendir(dir);
    if (!d) {
        pt_cli_print(stderr, "perftracker: %s: cannot open directory\n", dir);
        return -1;
    }
    size_t workers = 0, summaries = 0;
    bool report = false, diff = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        report |= strcmp(de->d_name, "report.json") == 0;
        diff |= strcmp(de->d_name, "diff.json") == 0;
        if (pt_cli_is_worker_file(de->d_name) && strcmp(de->d_name, "diff.json") != 0) {
            workers++;
            summaries += pt_ends_with(de->d_name, ".ptsum") || pt_ends_with(de->d_name, ".tar");
        }
    }
    closedir(d);
    pt_buf_puts(path, dir);
    if (workers) {
        *kind = summaries == workers ? INPUT_SUMMARIES : INPUT_TRACES;
        return 0;
    }
    if (report) {
        *kind = INPUT_REPORT;
        pt_buf_puts(path, "/report.json");
        return 0;
    }
    pt_cli_print(stderr, "perftracker: %s: %s\n", dir,
                 diff ? "holds a diff (diff.json), not a run: give the runs it compared"
                      : "holds no trace, summary or report.json");
    return -1;
}

static int classify(const char *arg, input_kind *kind, pt_buf *path)
{
    struct stat st;
    if (stat(arg, &st) != 0) {
        pt_cli_print(stderr, "perftracker: %s: no such file or directory\n", arg);
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return classify_dir(arg, kind, path);
    const char *doc = document_kind(arg);
    if (doc && strcmp(doc, "diff") == 0) {
        pt_cli_print(stderr, "perftracker: %s: is a diff, not a run: give the runs it compared\n", arg);
        return -1;
    }
    pt_buf_puts(path, arg);
    bool summaries = pt_ends_with(arg, ".ptsum") || pt_ends_with(arg, ".tar"); /* an archive holds summaries only */
    *kind = doc ? INPUT_REPORT : summaries ? INPUT_SUMMARIES : INPUT_TRACES;
    return 0;
}

static int read_report_run(pt_diff_run *run, const char *label, const char *path)
{
    pt_error err = {{0}};
    size_t len = 0;
    char *text = pt_read_file(path, MAX_REPORT_BYTES, &len, &err);
    pt_json *doc = text ? pt_json_parse(text, len, REPORT_MAX_DEPTH, &err) : NULL;
    free(text);
    if (!doc || pt_diff_run_from_report(run, label, doc, path, &err) != 0) {
        pt_cli_print(stderr, "perftracker: %s: %s\n", path, err.message);
        return -1;
    }
    return 0;
}

/* The workers the run refused (pt_summary_check; its only warnings so far) are named on
 * stderr and make the exit status 3; a run left with none is an error. */
static int check_admitted(pt_diff_run *run, const char *path, bool *partial)
{
    for (size_t i = 0; i < run->refused && i < run->warning_count; i++)
        pt_cli_print(stderr, "perftracker: %s: %s (skipped; the other workers are still compared)\n", path,
                     run->warnings[i]);
    *partial |= run->refused > 0;
    if (run->worker_count > 0)
        return 0;
    pt_cli_print(stderr, "perftracker: %s: %s\n", path,
                 run->source == PT_RUN_REPORT && !run->refused ? "the report has no analysed worker"
                                                               : "no readable worker");
    pt_diff_run_free(run);
    return -1;
}

static int read_job_run(pt_diff_run *run, pt_cli_job *job, const char *label, const char *path, input_kind kind,
                        int threads, bool *partial)
{
    if (pt_cli_read_job(&path, 1, threads, job) != 0)
        return -1;
    for (size_t i = 0; i < job->failure_count; i++)
        pt_cli_print(stderr, "perftracker: %s (skipped; the other workers are still compared)\n", job->failures[i]);
    for (size_t w = 0; w < job->worker_count; w++)
        for (size_t k = 0; k < job->workers[w]->warning_count; k++)
            pt_cli_print(stderr, "perftracker: warning: %s: %s\n", job->workers[w]->name, job->workers[w]->warnings[k]);
    if (job->worker_count == 0) {
        pt_cli_print(stderr, "perftracker: %s: no readable worker\n", path);
        return -1;
    }
    pt_diff_run_from_summaries(run, label, kind == INPUT_SUMMARIES ? PT_RUN_SUMMARIES : PT_RUN_TRACES, job->workers,
                               job->worker_count);
    if (check_admitted(run, path, partial) != 0)
        return -1;
    for (size_t i = 0; i < job->failure_count; i++)
        pt_diff_run_warn(run, job->failures[i]);
    *partial |= job->failure_count > 0;
    return 0;
}

static int read_run(const char *label, input_kind kind, const char *path, int threads, pt_diff_run *run,
                    pt_cli_job *job, bool *partial)
{
    if (kind != INPUT_REPORT)
        return read_job_run(run, job, label, path, kind, threads, partial);
    return read_report_run(run, label, path) == 0 ? check_admitted(run, path, partial) : -1;
}

static int parse_args(int argc, char **argv, pt_cli_job_options *o, const char **runs)
{
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        int taken = pt_cli_job_option(argc, argv, &i, o);
        if (taken < 0)
            return -1;
        if (taken)
            continue;
        if (positional == 2) {
            pt_cli_print(stderr, "perftracker: diff: compares two runs; %s is a third\n", argv[i]);
            return -1;
        }
        runs[positional++] = argv[i];
    }
    if (positional != 2) {
        usage(stderr);
        return -1;
    }
    return 0;
}

int cmd_diff(int argc, char **argv)
{
    const char *args[2] = {NULL, NULL};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pt_cli_job_options o = {"diff", usage, DEFAULT_OUT, cpus > 0 ? (int)cpus : 1, false};
    if (parse_args(argc, argv, &o, args) != 0)
        return PT_EXIT_USAGE;
    const char *out_dir = o.out_dir;
    int threads = o.threads;
    bool quiet = o.quiet, partial = false;

    pt_diff_run runs[2];
    pt_cli_job jobs[2];
    input_kind kinds[2];
    pt_buf paths[2] = {PT_BUF_INIT, PT_BUF_INIT};
    memset(runs, 0, sizeof runs);
    memset(jobs, 0, sizeof jobs);
    int rc = PT_EXIT_OK;
    /* Both arguments are checked before either is read: reading a large run only to find
     * the other misspelt wastes minutes. */
    for (int i = 0; i < 2 && rc == PT_EXIT_OK; i++)
        if (classify(args[i], &kinds[i], &paths[i]) != 0)
            rc = PT_EXIT_FAILURE;
    for (int i = 0; i < 2 && rc == PT_EXIT_OK; i++)
        if (read_run(args[i], kinds[i], paths[i].data, threads, &runs[i], &jobs[i], &partial) != 0)
            rc = PT_EXIT_FAILURE;
    if (rc == PT_EXIT_OK) {
        pt_json *diff = pt_diff(&runs[0], &runs[1], NULL);
        if (pt_cli_write_document(out_dir, "diff.json", diff,
                                  quiet ? pt_diff_render_verdict : pt_diff_render_text) != 0) {
            rc = PT_EXIT_FAILURE;
        } else {
            pt_cli_print(stderr, "perftracker: diff written to %s/diff.json; open %s/PerfDisplay (python3 app.py)\n",
                         out_dir, out_dir);
            rc = partial ? PT_EXIT_PARTIAL : PT_EXIT_OK;
        }
        pt_json_free(diff);
    }
    for (int i = 0; i < 2; i++) {
        pt_diff_run_free(&runs[i]);
        pt_cli_job_free(&jobs[i]);
        pt_buf_free(&paths[i]);
    }
    return rc;
}
