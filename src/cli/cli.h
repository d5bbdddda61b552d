/* cli.h -- one function per subcommand (git's builtin/ pattern). main.c only dispatches;
 * each cmd_* parses its options, calls the library, and is the only place that prints. */
#ifndef PT_CLI_CLI_H
#define PT_CLI_CLI_H

int cmd_analyze(int argc, char **argv);
int cmd_summarize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_display(int argc, char **argv);
int cmd_trigger(int argc, char **argv);

/* Exit statuses, documented in README.md. */
enum {
    PT_EXIT_OK = 0,          /* report written; every input read */
    PT_EXIT_FAILURE = 1,     /* nothing useful could be produced */
    PT_EXIT_USAGE = 2,       /* bad command line */
    PT_EXIT_PARTIAL = 3      /* report written, but some inputs were unreadable or missing */
};

#endif
