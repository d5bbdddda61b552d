/* display.c -- `perftracker display DIR`: serve a PerfDisplay folder on 127.0.0.1:5000.
 *
 *   perftracker display OUT[/PerfDisplay] [--port 5000] [--bind 127.0.0.1]
 *   perftracker display --report OUT/report.json OUT/PerfDisplay [--no-serve]
 *
 * OUT, the folder analyze, diff or a round wrote, serves its PerfDisplay/. With --report
 * it first (re)writes the folder from a report.json, which also refreshes an old
 * PerfDisplay with this binary's page. It serves until SIGINT or SIGTERM. A port another
 * program holds is said so, with how to pick another. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "display/server.h"
#include "report/perfdisplay.h"
#include "report/report.h"
#include "util/input.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_REPORT_BYTES ((size_t)4 << 30)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perftracker display [options] DIR\n"
            "Serve the PerfDisplay folder DIR until Ctrl-C: OUT/PerfDisplay, or OUT itself (the\n"
            "folder analyze, diff or a round wrote). Inside the page's folder, `python3 app.py`\n"
            "does the same.\n\n"
            "  --port N         port to listen on (default 5000; 0 = any free port)\n"
            "  --bind ADDR      address to listen on (default 127.0.0.1; 0.0.0.0 exposes the\n"
            "                   report to the network)\n"
            "  --report FILE    first write DIR from this report.json (and the parts beside it)\n"
            "  --no-serve       only write DIR (with --report), do not serve\n"
            "  -h, --help       this help\n"
            "Exit status: 0 stopped by Ctrl-C or SIGTERM (or written, with --no-serve); 1 no page in DIR,\n"
            "the port is taken, or --report could not be written; 2 bad command line.\n");
}

static bool has_file(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%.4096s/%.64s", dir, name);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/PerfDisplay: the page inside the folder analyze, diff or the trigger wrote. */
static void inner_folder(const char *dir, char *inner, size_t cap)
{
    snprintf(inner, cap, "%.4096s%sPerfDisplay", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/");
}

/* `perftracker display OUT` for the folder analyze or the trigger wrote serves its page,
 * OUT/PerfDisplay; a folder with a report.json and no page is told how to write one.
 * 0 with *dir the folder to serve, or -1 (said). */
static int resolve_folder(const char **dir, char *inner, size_t cap)
{
    if (has_file(*dir, "index.html"))
        return 0;
    inner_folder(*dir, inner, cap);
    if (has_file(inner, "index.html")) {
        pt_cli_print(stderr, "perftracker display: serving %s, the page of the report in %s\n", inner, *dir);
        *dir = inner;
        return 0;
    }
    pt_cli_print(stderr, "perftracker display: %s: no PerfDisplay page in it (no index.html, nor "
                         "PerfDisplay/index.html)\n", *dir);
    if (has_file(*dir, "report.json"))
        pt_cli_print(stderr, "perftracker display: it holds a report.json: write its page with perftracker display "
                             "--report %s/report.json %s\n", *dir, inner);
    return -1;
}

static int write_display(const char *report_path, const char *dir)
{
    pt_error err = {{0}};
    size_t len = 0;
    char *report = pt_read_file(report_path, MAX_REPORT_BYTES, &len, &err);
    if (!report || pt_perfdisplay_write(dir, report, len, &err) != 0) {
        fprintf(stderr, "perftracker display: %s\n", err.message);
        free(report);
        return -1;
    }
    /* A bounded report's parts sit beside it: the page's node drill-down and worker
     * detail load them from its own folder. */
    size_t copied = 0;
    pt_buf problems = PT_BUF_INIT;
    pt_report_copy_parts(report_path, report, len, dir, &copied, &problems, &err);
    free(report);
    /* The report's names are in them: printed with control characters replaced. */
    pt_cli_print_lines(stderr, "perftracker display: warning: ", problems.data);
    pt_buf_free(&problems);
    fprintf(stderr, "perftracker display: wrote %s%s", dir,
            pt_perfdisplay_has_charts() ? "" : " (charts not bundled in this build)");
    if (copied)
        fprintf(stderr, ", with the %zu part(s) of the report's workers", copied);
    fputc('\n', stderr);
    return 0;
}

static int serve(const pt_display_options *options)
{
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    /* Blocked before the server's threads exist, so they inherit the mask and the signal
     * is only ever taken by sigwait below. */
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

    pt_error err = {{0}};
    pt_display_server *server = pt_display_start(options, &err);
    if (!server) {
        pt_cli_print(stderr, "perftracker display: %s\n", err.message);
        return PT_EXIT_FAILURE;
    }
    const char *host = pt_display_bind_address(server);
    bool v6 = strchr(host, ':') != NULL;
    printf("PerfDisplay: serving %s at http://%s%s%s:%u/ (Ctrl-C to stop)\n", options->dir,
           v6 ? "[" : "", host, v6 ? "]" : "", (unsigned)pt_display_port(server));
    fflush(stdout);
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    pt_display_stop(server);
    fprintf(stderr, "perftracker display: stopped\n");
    return PT_EXIT_OK;
}

int cmd_display(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"port", required_argument, NULL, 'p'}, {"bind", required_argument, NULL, 'b'},
        {"report", required_argument, NULL, 'r'}, {"no-serve", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    pt_display_options options = {.bind = "127.0.0.1", .port = 5000};
    const char *report_path = NULL;
    bool no_serve = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (c) {
        case 'p': {
            char *end;
            long port = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || port < 0 || port > 65535) {
                fprintf(stderr, "perftracker display: --port %s: not a port number\n", optarg);
                return PT_EXIT_USAGE;
            }
            options.port = (uint16_t)port;
            break;
        }
        case 'b': options.bind = optarg; break;
        case 'r': report_path = optarg; break;
        case 'n': no_serve = true; break;
        case 'h': usage(stdout); return PT_EXIT_OK;
        default: usage(stderr); return PT_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || (no_serve && !report_path)) {
        usage(stderr);
        return PT_EXIT_USAGE;
    }
    options.dir = argv[optind];
    if (report_path && write_display(report_path, options.dir) != 0)
        return PT_EXIT_FAILURE;
    if (no_serve)
        return PT_EXIT_OK;
    char inner[4120];
    if (resolve_folder(&options.dir, inner, sizeof inner) != 0)
        return PT_EXIT_FAILURE;
    return serve(&options);
}
