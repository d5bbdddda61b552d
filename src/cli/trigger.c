/* trigger.c -- `perftracker --trigger-on --auto-analyze [options]` (also `c4d_perftracker
 * ...`, the vendor's name, and `perftracker trigger ...`): profile the running job now.
 *
 * Run on the machine of the job's rank 0 (the master container), as the job's user: the
 * job file rank 0 published there says where the job's coordinator is and where its key
 * is, so the shell needs no variables (--job, or MASTER_ADDR/MASTER_PORT, picks one of
 * several jobs). Only this user's job files are trusted, root's included: root profiles
 * another user's job by running this as that user (runuser -u USER -- perftracker ...). The work is pt_trigger_run (src/control/client.c); this file parses the
 * vendor's flags, prints progress on stderr and the report on stdout (report_text.c: the
 * verdict first). Ctrl-C (SIGINT, or SIGTERM) cancels the round on every worker and
 * removes its folder; a second one kills the CLI at once. A closed output (`| head`, a
 * pager quit early) does not: SIGPIPE is ignored, so the round still ends with a whole
 * report in its folder instead of a partial folder and a dead CLI, and the lines that can
 * no longer be printed are dropped. Exit status: 0 every worker profiled; 3 report written
 * but some workers failed, hung or went missing (each named on stderr); 1 no report (a
 * round where no worker was profiled says why); 2 bad command line; 130 interrupted. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "control/client.h"
#include "control/round.h"
#include "report/report.h"
#include "summarize/summary_io.h"
#include "util/phase.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perftracker --trigger-on --auto-analyze [--wait N] [--steps N]\n"
            "                   [--output-dir DIR] [--save-raw-trace none|master|all]\n"
            "                   [--timeout S] [--job ID] [--coordinator H:P] [--quiet | --verbose]\n"
            "       (also: c4d_perftracker ..., perftracker trigger ...)\n"
            "  Profile every worker of the running job for N steps and write the report to\n"
            "  DIR/<timestamp>/ (report.json, PerfDisplay/, raw_trace/). Run it on the machine of\n"
            "  the job's rank 0, as the job's user: it finds the running job by itself\n"
            "  (`perftracker jobs` lists them). It trusts only this user's jobs; as root, run it\n"
            "  as the job's user (runuser -u USER -- perftracker --trigger-on ...).\n"
            "  --wait N           steps to wait before profiling (default 5)\n"
            "  --steps N          steps to profile (default 2; 2-3 recommended)\n"
            "  --output-dir DIR   where the round folder goes (default %s, or\n"
            "                     /tmp/perftracker-<uid>[.XXXXXX]/output when another user owns that)\n"
            "  --save-raw-trace W keep raw traces of none (default), master (rank 0) or all\n"
            "                     workers, in <round>/raw_trace/; with none each worker deletes\n"
            "                     its trace once it is summarized\n"
            "  --auto-analyze     write the report (without it only the summaries are kept)\n"
            "  --timeout S        give up on workers after S seconds (default: from step time;\n"
            "                     the CLI itself ends the round S + 30 s after it started)\n"
            "  --job ID           which job, when several run here (ID: the JOB column of\n"
            "                     `perftracker jobs`; MASTER_ADDR/MASTER_PORT pick one too)\n"
            "  --coordinator H:P  the coordinator's address, for a job that registered nowhere here\n"
            "  -q, --quiet        print only the verdict and findings\n"
            "  -v, --verbose      print the report's sections as JSON log lines (the seed's form)\n"
            "                     instead of their rounded digest\n"
            "Ctrl-C cancels the round on every worker and keeps nothing of it.\n"
            "Exit status: 0 every worker profiled; 3 report written, some workers failed, hung or\n"
            "missing; 1 no report; 2 bad command line; 130 interrupted.\n",
            PT_DEFAULT_OUTPUT_DIR);
}

/* "--flag value" or "--flag=value"; NULL when argv[*i] is another option. A flag given
 * last, without its value, sets *missing to it. */
static const char *option_value(int argc, char **argv, int *i, const char *flag, const char **missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc)
        return argv[++*i];
    if (argv[*i][n] == '\0')
        *missing = flag;
    return NULL;
}

/* What each option's value is, for "--wait needs a value (...)". */
static const char *value_of(const char *flag)
{
    static const char *const values[][2] = {
        {"--wait", "a step count"}, {"--steps", "a step count, 1..1000"}, {"--output-dir", "a folder"},
        {"--save-raw-trace", "none, master or all"}, {"--timeout", "seconds"}, {"--coordinator", "HOST:PORT"},
        {"--job", "an ID from perftracker jobs"},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(values); i++)
        if (strcmp(values[i][0], flag) == 0)
            return values[i][1];
    return "its value";
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

typedef struct output_options {
    bool quiet, verbose;
} output_options;

static int parse_args(int argc, char **argv, pt_trigger_request *req, output_options *output)
{
    bool trigger_on = strcmp(argv[0], "trigger") == 0;
    const char *missing = NULL;
    for (int i = 1; i < argc && !missing; i++) {
        const char *v;
        int32_t seconds;
        if (strcmp(argv[i], "--trigger-on") == 0) {
            trigger_on = true;
        } else if (strcmp(argv[i], "--auto-analyze") == 0) {
            req->auto_analyze = true;
        } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            output->quiet = true;
        } else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            output->verbose = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(PT_EXIT_OK);
        } else if ((v = option_value(argc, argv, &i, "--wait", &missing))) {
            if (!parse_count(v, 0, 1000000, &req->wait))
                return fprintf(stderr, "perftracker: --wait wants a step count >= 0\n"), -1;
        } else if ((v = option_value(argc, argv, &i, "--steps", &missing))) {
            if (!parse_count(v, 1, 1000, &req->steps))
                return fprintf(stderr, "perftracker: --steps wants 1..1000\n"), -1;
        } else if ((v = option_value(argc, argv, &i, "--output-dir", &missing))) {
            req->output_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--save-raw-trace", &missing))) {
            if (strcmp(v, "none") == 0)
                req->save_raw = PT_SAVE_RAW_NONE;
            else if (strcmp(v, "master") == 0)
                req->save_raw = PT_SAVE_RAW_MASTER;
            else if (strcmp(v, "all") == 0)
                req->save_raw = PT_SAVE_RAW_ALL;
            else
                return fprintf(stderr, "perftracker: --save-raw-trace wants none, master or all\n"), -1;
        } else if ((v = option_value(argc, argv, &i, "--timeout", &missing))) {
            if (!parse_count(v, 1, 86400 * 7, &seconds))
                return fprintf(stderr, "perftracker: --timeout wants seconds\n"), -1;
            req->timeout_ms = (int64_t)seconds * 1000;
        } else if ((v = option_value(argc, argv, &i, "--coordinator", &missing))) {
            req->coordinator = v;
        } else if ((v = option_value(argc, argv, &i, "--job", &missing))) {
            req->job = v;
        } else if (!missing) {
            fprintf(stderr, "perftracker: unknown option %s\n\n", argv[i]);
            usage(stderr);
            return -1;
        }
    }
    if (missing) {
        fprintf(stderr, "perftracker: %s needs a value (%s)\n\n", missing, value_of(missing));
        usage(stderr);
        return -1;
    }
    if (!trigger_on) {
        fprintf(stderr, "perftracker: nothing to do without --trigger-on\n\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- progress on stderr */

/* A round can take minutes (a long --wait or --steps, slow steps): the line must keep
 * moving. Milestones (workers reached, traces written, summaries, failures) print within
 * half a second; step counts at most every 5 s; and a line that changed nothing is
 * repeated every 30 s with the time elapsed, so a quiet round is never mistaken for a
 * stuck CLI. */
#define MILESTONE_NS 500000000LL
#define STEPS_NS (5 * 1000000000LL)
#define STILL_NS (30 * 1000000000LL)
#define FAILURES_LISTED 32
#define FAILURE_LINES 1000 /* one line each, then the report: a huge job must not flood the terminal */

typedef struct progress_line {
    int32_t armed, traces, summaries, failed, hung;
    int64_t waited, profiled;
} progress_line;

typedef struct printer {
    int64_t start_step;
    int32_t wait, steps;
    int64_t began_ns, last_print_ns;
    progress_line shown;
    int32_t joined_shown;
    bool started, printed, busy_shown;
    pt_buf failures;           /* "rank 0 (missing), rank 3 (hang)" for the closing line */
    int32_t failures_count;
    char round_dir[1024];      /* said once the round starts: a refused round has none to speak of */
} printer;

static void on_connected(void *ctx, const char *coordinator, const char *round_dir, const char *note)
{
    printer *pr = ctx;
    pt_cli_print_lines(stderr, "perftracker: ", note);
    fprintf(stderr, "perftracker: connected to the job's coordinator at %s\n", coordinator);
    snprintf(pr->round_dir, sizeof pr->round_dir, "%s", round_dir);
}

static void on_started(void *ctx, uint32_t round, int64_t start_step, int32_t steps, const pt_ctl_progress *p)
{
    printer *pr = ctx;
    pr->start_step = start_step;
    pr->steps = steps;
    pr->started = true;
    fprintf(stderr, "perftracker: round %u: profiling steps %lld..%lld of %d workers (%d connected); round folder "
                    "%s\n", round, (long long)start_step, (long long)(start_step + steps - 1), p->world_size,
            p->connected, pr->round_dir);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void on_progress(void *ctx, const pt_ctl_progress *p)
{
    printer *pr = ctx;
    int64_t now = pt_now_ns();
    int64_t since = now - pr->last_print_ns;
    int elapsed = (int)((now - pr->began_ns) / 1000000000LL);
    if (!pr->started) { /* the coordinator is still waiting for workers to join */
        if (p->connected != pr->joined_shown || since >= STILL_NS) {
            fprintf(stderr, "perftracker: [%d:%02d] waiting for workers to join: %d/%d connected\n", elapsed / 60,
                    elapsed % 60, p->connected, p->world_size);
            pr->joined_shown = p->connected;
            pr->last_print_ns = now;
        }
        return;
    }
    /* The slowest worker decides both step counts: the round waits for it. */
    progress_line line = {p->armed, p->traces_written, p->summaries, p->failed, p->hung, 0, 0};
    if (p->min_step >= 0) {
        line.waited = clamp64(p->min_step - (pr->start_step - pr->wait), 0, pr->wait);
        line.profiled = clamp64(p->min_step - pr->start_step, 0, pr->steps);
    }
    bool milestone = line.armed != pr->shown.armed || line.traces != pr->shown.traces ||
                     line.summaries != pr->shown.summaries || line.failed != pr->shown.failed ||
                     line.hung != pr->shown.hung;
    bool stepped = line.waited != pr->shown.waited || line.profiled != pr->shown.profiled;
    bool final = (int64_t)p->summaries + p->failed >= p->world_size;
    bool due = !pr->printed || (final && (milestone || stepped)) || (milestone && since >= MILESTONE_NS) ||
               (stepped && since >= STEPS_NS) || since >= STILL_NS;
    if (!due)
        return;
    fprintf(stderr, "perftracker: [%d:%02d] workers reached %d/%d | steps waited %lld/%d | steps profiled %lld/%d | "
                    "traces written %d/%d | summaries received %d/%d",
            elapsed / 60, elapsed % 60, p->armed, p->world_size, (long long)line.waited, pr->wait,
            (long long)line.profiled, pr->steps, p->traces_written, p->world_size, p->summaries, p->world_size);
    if (p->failed)
        fprintf(stderr, " | failed %d", p->failed);
    if (p->hung)
        fprintf(stderr, " (%d hung)", p->hung);
    fputc('\n', stderr);
    pr->shown = line;
    pr->printed = true;
    pr->last_print_ns = now;
}

static void on_worker(void *ctx, const pt_trigger_worker_event *e)
{
    printer *pr = ctx;
    char who[PT_HOST_MAX + 64];
    if (e->host[0] || e->pid >= 0)
        snprintf(who, sizeof who, "rank %d (%s, pid %lld)", e->rank, e->host[0] ? e->host : "?", (long long)e->pid);
    else
        snprintf(who, sizeof who, "rank %d", e->rank);
    /* Host and text come from the worker: filtered, they cannot drive the terminal. */
    if (e->kind == 0) { /* one line per summary would drown a big job's progress */
        if (e->steps < pr->steps)
            pt_cli_print(stderr, "perftracker: %s: profiled %d of the %d steps asked: its window was cut short (the "
                                 "job ended inside it)\n", who, e->steps, pr->steps);
        return;
    }
    if (pr->failures_count < FAILURE_LINES)
        pt_cli_print(stderr, "perftracker: %s: %s%s%s\n", who, pt_ctl_failure_name(e->kind), e->text[0] ? ": " : "",
                     e->text);
    else if (pr->failures_count == FAILURE_LINES)
        fprintf(stderr, "perftracker: more workers without a profile: the report's warnings name each\n");
    if (pr->failures_count++ < FAILURES_LISTED)
        pt_buf_printf(&pr->failures, "%srank %d (%s)", pr->failures.len ? ", " : "", e->rank,
                      pt_ctl_failure_name(e->kind));
}

static void on_busy(void *ctx, const char *text, int64_t wait_ms)
{
    printer *pr = ctx;
    int64_t now = pt_now_ns();
    if (pr->busy_shown && now - pr->last_print_ns < STILL_NS)
        return; /* asked again every second: said once, then every 30 s */
    pt_cli_print(stderr, "perftracker: %s; waiting for %s (about %lld s) before starting this round\n", text,
                 strstr(text, "1 worker ") == text ? "it" : "them", (long long)(wait_ms + 999) / 1000);
    pr->busy_shown = true;
    pr->last_print_ns = now;
}

static void on_notice(void *ctx, const char *text)
{
    (void)ctx; /* a text the coordinator or a worker made: filtered, it cannot drive the terminal */
    pt_cli_print(stderr, "perftracker: SECURITY: %s\n", text);
}

#define EXIT_INTERRUPTED 130 /* 128 + SIGINT, as shells report it */

/* SIGINT/SIGTERM: cancel the round (client.c notices within a poll). SA_RESETHAND: a
 * second Ctrl-C kills the CLI as usual; no SA_RESTART: the wait ends at once. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void catch_interrupts(bool on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_interrupt : SIG_DFL;
    sa.sa_flags = on ? SA_RESETHAND : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int report_cancelled(const pt_trigger_result *result)
{
    if (!result->cancel_confirmed)
        pt_cli_print(stderr, "perftracker: interrupted: the coordinator did not confirm the cancel in time; the "
                             "workers drop their windows once it sees this CLI gone\n");
    else if (result->cancelled_round)
        pt_cli_print(stderr, "perftracker: interrupted: round %u cancelled on every worker (%d dropped the window "
                             "they had armed)\n", result->cancelled_round, result->cancelled_windows);
    else
        pt_cli_print(stderr, "perftracker: interrupted before the round started: nothing was armed\n");
    if (result->round_dir[0] && result->round_dir_kept)
        pt_cli_print(stderr, "perftracker: kept %s: a worker wrote its raw trace there\n", result->round_dir);
    else if (result->round_dir[0])
        pt_cli_print(stderr, "perftracker: nothing was kept (%s removed)\n", result->round_dir);
    return EXIT_INTERRUPTED;
}

/* The last word on stderr: how many workers the report stands on, and who is not in it. */
static void print_outcome(printer *pr, const pt_trigger_result *result)
{
    if (!result->failed && result->summaries >= result->world_size)
        return;
    pt_cli_print(stderr, "perftracker: %d of %d workers profiled; without a profile: %s%s\n", result->summaries,
                 result->world_size, pt_buf_cstr(&pr->failures), pr->failures_count > FAILURES_LISTED ? ", ..." : "");
}

/* The report on stdout, then where it is and how to open it. A reader gone (EPIPE, with
 * SIGPIPE ignored) only ends the printing: the round folder is whole already; stderr, if
 * it is still open, says where. */
static void print_report(const pt_trigger_result *result, output_options output)
{
    pt_buf log = PT_BUF_INIT;
    pt_report_text_options text = {true, output.verbose};
    if (output.quiet)
        pt_report_render_verdict(result->report, &log);
    else
        pt_report_render_text(result->report, &text, &log);
    pt_cli_print(stdout, "%s", pt_buf_cstr(&log));
    pt_buf_free(&log);
    printf("PerfTracker report: %s/PerfDisplay/ (report.json: %s/report.json)\n", result->round_dir,
           result->round_dir);
    printf("View it: cd %s/PerfDisplay && python3 app.py (--port N when 5000 is taken), then open the address it "
           "prints; or: perftracker display %s\n", result->round_dir, result->round_dir);
    if (fflush(stdout) != 0 || ferror(stdout))
        fprintf(stderr, "perftracker: the output was closed before the report was printed; it is whole in %s\n",
                result->round_dir);
}

int cmd_trigger(int argc, char **argv)
{
    pt_trigger_request req = {5, 2, PT_SAVE_RAW_NONE, NULL, false, 0, NULL, NULL, NULL};
    output_options output = {false, false};
    if (parse_args(argc, argv, &req, &output) != 0)
        return PT_EXIT_USAGE;
    signal(SIGPIPE, SIG_IGN); /* a closed output must not cut the round short (see the top) */
    printer pr = {0};
    pr.wait = req.wait;
    pr.steps = req.steps;
    pr.began_ns = pt_now_ns();
    pr.failures = (pt_buf)PT_BUF_INIT;
    pt_trigger_observer obs = {&pr, on_connected, on_started, on_progress, on_worker, on_busy, on_notice};
    pt_trigger_result result;
    pt_error err = {{0}};
    req.interrupted = &interrupted;
    /* This process decodes the job's summaries as they come, then analyses them, then
     * exits: as analyze does, their functions' names go in one pool and their records in
     * one column store, a quarter of the memory (100,000 workers: the heap the kernel must
     * zero as it grows) and nothing to copy into a store before the analysis. Without a
     * report each is checked and freed (pt_round_drop_summaries): nothing to pool. */
    if (req.auto_analyze)
        pt_summary_share_names();
    pt_phase("round triggered");
    catch_interrupts(true);
    int run = pt_trigger_run(&req, &obs, &result, &err);
    catch_interrupts(false); /* the report is written: an interrupt now only stops the printing */
    if (run != 0 && !result.cancelled && interrupted) /* it stopped a connection or handshake */
        result.cancelled = result.cancel_confirmed = true;
    if (run != 0 && result.cancelled) {
        pt_buf_free(&pr.failures);
        return report_cancelled(&result);
    }
    if (run != 0) {
        pt_cli_print(stderr, "perftracker: %s\n", err.message);
        if (!strstr(result.hint, result.notes)) /* the no-job hint has them already */
            pt_cli_print_lines(stderr, "perftracker: ", result.notes);
        pt_cli_print_lines(stderr, "perftracker: ", result.hint);
        pt_buf_free(&pr.failures);
        return PT_EXIT_FAILURE;
    }
    print_outcome(&pr, &result);
    pt_buf_free(&pr.failures);
    /* Missing workers are a failure of the round, whatever else it found. */
    int rc = result.failed || result.summaries < result.world_size ? PT_EXIT_PARTIAL : PT_EXIT_OK;
    if (!result.report) {
        fprintf(stderr, "perftracker: %d summaries in %s/summaries (analyze them with: perftracker analyze -o %s "
                        "%s/summaries)\n",
                result.summaries, result.round_dir, result.round_dir, result.round_dir);
        return result.summaries ? rc : PT_EXIT_FAILURE;
    }
    print_report(&result, output);
    pt_json_free(result.report);
    pt_phase("report printed and freed");
    return rc; /* a report exists, even when it only says who hung or went missing */
}
