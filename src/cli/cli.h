/* cli.h -- one function per subcommand (git's builtin/ pattern). main.c only dispatches;
 * each cmd_* parses its options, calls the library, and is the only place that prints. */
#ifndef PT_CLI_CLI_H
#define PT_CLI_CLI_H

#include "util/common.h"

#include <stdio.h>

int cmd_analyze(int argc, char **argv);
int cmd_summarize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_display(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
int cmd_jobs(int argc, char **argv);

/* fprintf for everything the CLI prints: control characters from hostile inputs (file,
 * function and worker names, warnings) become '?' (terminal.c). */
void pt_cli_print(FILE *out, const char *fmt, ...) PT_PRINTF(2, 3);
/* Each '\n'-separated line of text, after prefix, through pt_cli_print. */
void pt_cli_print_lines(FILE *out, const char *prefix, const char *text);

/* Exit statuses, documented in README.md. */
enum {
    PT_EXIT_OK = 0,          /* report written; every input read */
    PT_EXIT_FAILURE = 1,     /* nothing useful could be produced */
    PT_EXIT_USAGE = 2,       /* bad command line */
    PT_EXIT_PARTIAL = 3      /* report written, but some inputs were unreadable or missing */
};

#endif
