/* cli.h -- one function per subcommand (git's builtin/ pattern). main.c only dispatches;
 * each cmd_* parses its options, calls the library, and is the only place that prints. */
#ifndef PT_CLI_CLI_H
#define PT_CLI_CLI_H

#include "summarize/summary.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/common.h"

#include <stdio.h>

int cmd_analyze(int argc, char **argv);
int cmd_summarize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_display(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* One job's inputs read as `analyze` reads them (analyze.c), for the commands that compare
 * jobs: files and directories expanded, summarized in parallel with progress, ranks
 * assigned. Unreadable inputs are kept as "path: why" lines; a path that does not exist
 * is printed and makes it return -1. pt_cli_is_worker_file says whether a directory entry
 * is a trace or summary by its name. */
typedef struct pt_cli_job {
    pt_worker_summary **workers;
    size_t worker_count;
    char **failures;
    size_t failure_count;
} pt_cli_job;
/* Options of the commands that read jobs (options.c). pt_cli_job_option looks at argv[*i]:
 * 1 when it was one of them (its value consumed), 0 when it is not an option (an input),
 * -1 on a bad or unknown option, or one missing its value (printed). -h prints usage and
 * exits. --verbose and --force are options only where report_options is set (analyze). */
typedef struct pt_cli_job_options {
    const char *command;      /* "analyze", "diff": for messages */
    void (*usage)(FILE *out);
    const char *out_dir;
    int threads;
    bool quiet;
    bool report_options;      /* --verbose and --force are this command's */
    bool verbose;             /* parsed: the report's sections as JSON */
    bool force;               /* parsed: replace the report OUT holds */
} pt_cli_job_options;
int pt_cli_job_option(int argc, char **argv, int *i, pt_cli_job_options *o);

/* The commands that turn one trace into one file (summarize, export): TRACE, -o OUT and
 * one flag of their own, parsed one way (options.c). */
typedef struct pt_cli_trace_args {
    const char *command;     /* "summarize", "export": for messages */
    void (*usage)(FILE *out);
    const char *flag;        /* the command's own flag ("--json", "--gzip") */
    const char *output_what; /* what -o names, for "-o needs ..." */
    const char *input;       /* parsed: the trace */
    const char *output;      /* parsed: -o's value, or NULL */
    bool flag_given;         /* parsed */
} pt_cli_trace_args;
/* true when the command goes on (input set); false when it ends now with *exit_status:
 * after --help, or after a usage error (printed with the usage). */
bool pt_cli_parse_trace_args(int argc, char **argv, pt_cli_trace_args *a, int *exit_status);
/* "perftracker COMMAND: WHAT[: ARG]", then the usage, on stderr; returns PT_EXIT_USAGE. */
int pt_cli_usage_error(const char *command, void (*usage)(FILE *out), const char *what, const char *arg);
int pt_cli_read_job(const char *const *paths, size_t path_count, int threads, pt_cli_job *job);
void pt_cli_job_free(pt_cli_job *job);
bool pt_cli_is_worker_file(const char *name);
/* Writes doc as out_dir/file_name with its PerfDisplay folder, then prints what render
 * makes of it on stdout (the caller picks the verdict alone for --quiet). 0, or -1 when
 * it could not be written (printed). */
int pt_cli_write_document(const char *out_dir, const char *file_name, const pt_json *doc,
                          void (*render)(const pt_json *doc, pt_buf *out));
int cmd_jobs(int argc, char **argv);

/* fprintf for everything the CLI prints: control characters from hostile inputs (file,
 * function and worker names, warnings) become '?' (terminal.c). */
void pt_cli_print(FILE *out, const char *fmt, ...) PT_PRINTF(2, 3);
/* Each '\n'-separated line of text, after prefix, through pt_cli_print. */
void pt_cli_print_lines(FILE *out, const char *prefix, const char *text);

/* Exit statuses, documented in README.md and docs/perftracker.1. */
enum {
    PT_EXIT_OK = 0,          /* report written; every input read */
    PT_EXIT_FAILURE = 1,     /* nothing useful could be produced */
    PT_EXIT_USAGE = 2,       /* bad command line */
    PT_EXIT_PARTIAL = 3      /* report written, but some inputs were unreadable or missing */
};

#endif
