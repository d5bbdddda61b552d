/* options.c -- options that several commands share, parsed one way for all of them: those
 * of the commands that read jobs (analyze, diff: -o OUT, -j THREADS (also -jN), --quiet
 * (-q), -h/--help; analyze's --verbose (-v) and --force), and those of the commands that
 * turn one trace into one file (summarize, export: TRACE -o OUT and a flag of their own).
 * An option missing its value says so by name, not "unknown option". */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

/* "-o" or "-j" as the last argument: its value is missing, which "unknown option" would hide. */
static int missing_value(const pt_cli_job_options *o, const char *flag, const char *what)
{
    pt_cli_print(stderr, "perftracker: %s: %s needs a value (%s)\n", o->command, flag, what);
    return -1;
}

int pt_cli_job_option(int argc, char **argv, int *i, pt_cli_job_options *o)
{
    const char *arg = argv[*i];
    bool last = *i + 1 >= argc;
    if (strcmp(arg, "-o") == 0 && last) {
        return missing_value(o, arg, "the output folder");
    } else if (strcmp(arg, "-j") == 0 && last) {
        return missing_value(o, arg, "the number of threads, 1..256");
    } else if (strcmp(arg, "-o") == 0) {
        o->out_dir = argv[++*i];
    } else if (strcmp(arg, "-j") == 0 || (strncmp(arg, "-j", 2) == 0 && arg[2])) {
        o->threads = atoi(arg[2] ? arg + 2 : argv[++*i]);
        if (o->threads < 1 || o->threads > 256) {
            pt_cli_print(stderr, "perftracker: -j wants 1..256 threads\n");
            return -1;
        }
    } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
        o->quiet = true;
    } else if (o->report_options && (strcmp(arg, "--verbose") == 0 || strcmp(arg, "-v") == 0)) {
        o->verbose = true;
    } else if (o->report_options && strcmp(arg, "--force") == 0) {
        o->force = true;
    } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        o->usage(stdout);
        exit(PT_EXIT_OK);
    } else if (arg[0] == '-' && arg[1]) {
        pt_cli_print(stderr, "perftracker: %s: unknown option %s\n", o->command, arg);
        return -1;
    } else {
        return 0;
    }
    return 1;
}

int pt_cli_usage_error(const char *command, void (*usage)(FILE *out), const char *what, const char *arg)
{
    pt_cli_print(stderr, "perftracker %s: %s%s%s\n\n", command, what, arg ? ": " : "", arg ? arg : "");
    usage(stderr);
    return PT_EXIT_USAGE;
}

bool pt_cli_parse_trace_args(int argc, char **argv, pt_cli_trace_args *a, int *exit_status)
{
    char needs_output[128];
    const char *bad = NULL, *bad_arg = NULL;
    for (int i = 1; i < argc && !bad; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-o") == 0 && i + 1 < argc) {
            a->output = argv[++i];
        } else if (strcmp(arg, a->flag) == 0) {
            a->flag_given = true;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            a->usage(stdout);
            *exit_status = PT_EXIT_OK;
            return false;
        } else if (strcmp(arg, "-o") == 0) {
            snprintf(needs_output, sizeof needs_output, "-o needs %s", a->output_what);
            bad = needs_output, bad_arg = arg;
        } else if (arg[0] == '-') {
            bad = "unknown option", bad_arg = arg;
        } else if (a->input) {
            bad = "one trace at a time; a second was given", bad_arg = arg;
        } else {
            a->input = arg;
        }
    }
    if (!bad && !a->input)
        bad = "which trace? give TRACE";
    if (!bad)
        return true;
    *exit_status = pt_cli_usage_error(a->command, a->usage, bad, bad_arg);
    return false;
}
