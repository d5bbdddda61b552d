/* trigger.c -- `perftracker --trigger-on --auto-analyze [options]` (also `c4d_perftracker
 * ...`, the vendor's name, and `perftracker trigger ...`): profile the running job now.
 *
 * Run in the shell of the job's master container: the environment there (MASTER_ADDR,
 * MASTER_PORT) says where the job's coordinator is, and the key file rank 0 wrote proves
 * this user may trigger. The work is pt_trigger_run (src/control/client.c); this file
 * parses the vendor's flags, prints progress on stderr and the report's sections on
 * stdout. Exit status: 0 every worker profiled; 3 report written but some workers
 * failed, hung or went missing; 1 no report; 2 bad command line. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "control/client.h"
#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_OUTPUT_DIR "/tmp/perftracker/output"

typedef struct printer {
    pt_ctl_progress last;
    int64_t start_step;
    int32_t wait, steps;
    int64_t last_print_ns;
    bool started;
} printer;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perftracker --trigger-on --auto-analyze [--wait N] [--steps N]\n"
            "                   [--output-dir DIR] [--save-raw-trace none|master|all]\n"
            "       (also: c4d_perftracker ..., perftracker trigger ...)\n"
            "  Profile every worker of the running job for N steps and write the report to\n"
            "  DIR/<timestamp>/ (report.json, PerfDisplay/, raw_trace/). Run it in the shell of\n"
            "  the job's master (rank 0) container: MASTER_ADDR/MASTER_PORT locate the job.\n"
            "  --wait N           steps to wait before profiling (default 5)\n"
            "  --steps N          steps to profile (default 2; 2-3 recommended)\n"
            "  --output-dir DIR   where the round folder goes (default %s)\n"
            "  --save-raw-trace W keep raw traces of none (default), master (rank 0) or all\n"
            "                     workers, in <round>/raw_trace/; with none each worker deletes\n"
            "                     its trace once it is summarized\n"
            "  --auto-analyze     write the report (without it only the summaries are kept)\n"
            "  --timeout S        give up on workers after S seconds (default: from step time)\n"
            "  --coordinator H:P  the coordinator's address, if the environment lacks it\n"
            "  --quiet            do not print the report sections\n"
            "Exit status: 0 every worker profiled; 3 report written, some workers failed, hung or\n"
            "missing; 1 no report; 2 bad command line.\n",
            DEFAULT_OUTPUT_DIR);
}

/* "--flag value" or "--flag=value". */
static const char *option_value(int argc, char **argv, int *i, const char *flag)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static bool parse_count(const char *text, long lo, long hi, int32_t *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int32_t)v;
    return true;
}

static int parse_args(int argc, char **argv, pt_trigger_request *req, bool *quiet)
{
    bool trigger_on = strcmp(argv[0], "trigger") == 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int32_t seconds;
        if (strcmp(argv[i], "--trigger-on") == 0) {
            trigger_on = true;
        } else if (strcmp(argv[i], "--auto-analyze") == 0) {
            req->auto_analyze = true;
        } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            *quiet = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(PT_EXIT_OK);
        } else if ((v = option_value(argc, argv, &i, "--wait"))) {
            if (!parse_count(v, 0, 1000000, &req->wait))
                return fprintf(stderr, "perftracker: --wait wants a step count >= 0\n"), -1;
        } else if ((v = option_value(argc, argv, &i, "--steps"))) {
            if (!parse_count(v, 1, 1000, &req->steps))
                return fprintf(stderr, "perftracker: --steps wants 1..1000\n"), -1;
        } else if ((v = option_value(argc, argv, &i, "--output-dir"))) {
            req->output_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--save-raw-trace"))) {
            if (strcmp(v, "none") == 0)
                req->save_raw = PT_SAVE_RAW_NONE;
            else if (strcmp(v, "master") == 0)
                req->save_raw = PT_SAVE_RAW_MASTER;
            else if (strcmp(v, "all") == 0)
                req->save_raw = PT_SAVE_RAW_ALL;
            else
                return fprintf(stderr, "perftracker: --save-raw-trace wants none, master or all\n"), -1;
        } else if ((v = option_value(argc, argv, &i, "--timeout"))) {
            if (!parse_count(v, 1, 86400 * 7, &seconds))
                return fprintf(stderr, "perftracker: --timeout wants seconds\n"), -1;
            req->timeout_ms = (int64_t)seconds * 1000;
        } else if ((v = option_value(argc, argv, &i, "--coordinator"))) {
            req->coordinator = v;
        } else {
            fprintf(stderr, "perftracker: unknown option %s\n\n", argv[i]);
            usage(stderr);
            return -1;
        }
    }
    if (!trigger_on) {
        fprintf(stderr, "perftracker: nothing to do without --trigger-on\n\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- progress on stderr */

static void on_connected(void *ctx, const char *coordinator, const char *round_dir)
{
    (void)ctx;
    fprintf(stderr, "perftracker: connected to the job's coordinator at %s\n", coordinator);
    fprintf(stderr, "perftracker: round folder %s\n", round_dir);
}

static void on_started(void *ctx, uint32_t round, int64_t start_step, int32_t steps, const pt_ctl_progress *p)
{
    printer *pr = ctx;
    pr->start_step = start_step;
    pr->steps = steps;
    pr->started = true;
    fprintf(stderr, "perftracker: round %u: profiling steps %lld..%lld of %d workers (%d connected)\n", round,
            (long long)start_step, (long long)(start_step + steps - 1), p->world_size, p->connected);
}

static void on_progress(void *ctx, const pt_ctl_progress *p)
{
    printer *pr = ctx;
    int64_t now = pt_now_ns();
    bool changed = memcmp(&pr->last, p, sizeof *p) != 0;
    bool final = p->summaries + p->failed >= p->world_size;
    if (!pr->started) { /* the coordinator is still waiting for workers to join */
        if (changed)
            fprintf(stderr, "perftracker: waiting for workers to join: %d/%d connected\n", p->connected,
                    p->world_size);
        pr->last = *p;
        return;
    }
    if (!changed || (!final && now - pr->last_print_ns < 500000000LL))
        return;
    int64_t base = pr->start_step - pr->wait;
    int64_t waited = p->min_step < 0 ? 0 : PT_MAX(0, PT_MIN(p->min_step - base, (int64_t)pr->wait));
    fprintf(stderr, "perftracker: workers reached %d/%d | steps waited %lld/%d | traces written %d/%d | "
                    "summaries received %d/%d",
            p->armed, p->world_size, (long long)waited, pr->wait, p->traces_written, p->world_size, p->summaries,
            p->world_size);
    if (p->failed)
        fprintf(stderr, " | failed %d", p->failed);
    if (p->hung)
        fprintf(stderr, " (%d hung)", p->hung);
    fputc('\n', stderr);
    pr->last = *p;
    pr->last_print_ns = now;
}

static void on_worker(void *ctx, const pt_trigger_worker_event *e)
{
    (void)ctx;
    if (e->kind == 0)
        return; /* one line per summary would drown a big job's progress */
    /* Host and text come from the worker: filtered, they cannot drive the terminal. */
    pt_cli_print(stderr, "perftracker: rank %d (%s, pid %lld): %s%s%s\n", e->rank, e->host[0] ? e->host : "?",
                 (long long)e->pid, pt_ctl_failure_name(e->kind), e->text[0] ? ": " : "", e->text);
}

int cmd_trigger(int argc, char **argv)
{
    pt_trigger_request req = {5, 2, PT_SAVE_RAW_NONE, DEFAULT_OUTPUT_DIR, false, 0, NULL};
    bool quiet = false;
    if (parse_args(argc, argv, &req, &quiet) != 0)
        return PT_EXIT_USAGE;
    printer pr = {0};
    pr.wait = req.wait;
    pr.last.min_step = -2;
    pt_trigger_observer obs = {&pr, on_connected, on_started, on_progress, on_worker};
    pt_trigger_result result;
    pt_error err = {{0}};
    if (pt_trigger_run(&req, &obs, &result, &err) != 0) {
        pt_cli_print(stderr, "perftracker: %s\n", err.message);
        return PT_EXIT_FAILURE;
    }
    int rc = result.failed || result.coordinator_lost || result.summaries < result.world_size ? PT_EXIT_PARTIAL
                                                                                             : PT_EXIT_OK;
    if (!result.report) {
        fprintf(stderr, "perftracker: %d summaries in %s/summaries (analyze them with: perftracker analyze -o %s "
                        "%s/summaries)\n",
                result.summaries, result.round_dir, result.round_dir, result.round_dir);
        return result.summaries ? rc : PT_EXIT_FAILURE;
    }
    if (!quiet) {
        pt_buf log = PT_BUF_INIT;
        pt_report_render_log(result.report, &log);
        pt_cli_print(stdout, "%s", pt_buf_cstr(&log));
        pt_buf_free(&log);
    }
    printf("PerfTracker report: %s/PerfDisplay/ (report.json: %s/report.json)\n", result.round_dir,
           result.round_dir);
    printf("View it: cd %s/PerfDisplay && python3 app.py, then open http://127.0.0.1:5000/\n", result.round_dir);
    fflush(stdout);
    pt_json_free(result.report);
    return rc; /* a report exists, even when it only says who hung or went missing */
}
