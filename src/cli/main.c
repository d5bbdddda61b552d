/* main.c -- the perftracker command: dispatch to a subcommand, nothing else.
 * Invoked as `perftracker --trigger-on ...` or `c4d_perftracker --trigger-on ...` (the
 * vendor's name and flags), it runs the trigger workflow. Each subcommand's --help, the
 * man page (docs/perftracker.1, its text docs/cli.md) and the README's "Command line" list
 * the same options and exit statuses: tests/reliability/cli_reference.py compares them. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"run", cmd_run, "run a training job with the collector in it, unchanged (steps found on their own)"},
    {"analyze", cmd_analyze, "analyze traces or summaries of one job and write the report"},
    {"diff", cmd_diff, "compare two runs (traces, summaries or reports): what changed and why"},
    {"summarize", cmd_summarize, "reduce one worker's trace to its summary (the per-worker step)"},
    {"synth", cmd_synth, "generate a synthetic multi-worker job with injected faults"},
    {"export", cmd_export, "convert a raw trace to Chrome/Perfetto JSON"},
    {"display", cmd_display, "serve a PerfDisplay folder on http://127.0.0.1:5000/"},
    {"trigger", cmd_trigger, "profile a running job now (same as --trigger-on)"},
    {"jobs", cmd_jobs, "list the running jobs on this machine that the trigger can profile"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: perftracker <command> [options]\n"
                 "       perftracker run [--seconds S] [--] COMMAND [ARG...]\n"
                 "       perftracker --trigger-on --auto-analyze [--wait N] [--steps N]\n"
                 "                   [--output-dir DIR] [--save-raw-trace none|master|all] [...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\nRun `perftracker <command> --help` for a command's options; `man perftracker` (docs/cli.md)\n"
                 "describes them all.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return PT_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return PT_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("perftracker %s\n", PT_VERSION);
        return PT_EXIT_OK;
    }
    if (strncmp(name, "--", 2) == 0) /* the vendor's form: flags only */
        return cmd_trigger(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "perftracker: unknown command '%s'\n\n", name);
    usage(stderr);
    return PT_EXIT_USAGE;
}
