/* summarize.c -- `perftracker summarize TRACE -o SUMMARY [--json]`: the per-worker (map)
 * step. The summary is what a worker sends to the central analysis. */
#include "cli/cli.h"
#include "cli/progress.h"
#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "summarize/summary_json.h"
#include "util/output.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: perftracker summarize TRACE -o SUMMARY [--json]\n"
                 "  Reduce one worker's trace (Kineto JSON, .gz, or a perftracker raw trace) to its\n"
                 "  summary file (docs/summary-format.md), which `perftracker analyze` also reads.\n"
                 "  -o SUMMARY  the summary file to write\n"
                 "  --json      print the summary as JSON on stdout (with or without -o)\n"
                 "Exit status: 0 written; 1 the trace could not be read or SUMMARY written; 2 bad command line.\n");
}

/* Large traces take seconds: show the bytes read (the reader calls back per buffer). */
static void on_bytes(void *ctx, uint64_t done, uint64_t total)
{
    pt_progress *bar = ctx;
    if (!bar->active && total >= (64u << 20))
        pt_progress_start(bar, "MB", total >> 20);
    pt_progress_update(bar, done >> 20, NULL);
}

int cmd_summarize(int argc, char **argv)
{
    pt_cli_trace_args a = {"summarize", usage, "--json", "the summary file to write", NULL, NULL, false};
    int status;
    if (!pt_cli_parse_trace_args(argc, argv, &a, &status))
        return status;
    const char *input = a.input, *output = a.output;
    bool json = a.flag_given;
    if (!output && !json)
        return pt_cli_usage_error(a.command, usage,
                                  "-o SUMMARY is missing (the file to write), or --json to print the summary", NULL);
    pt_error err = {{0}};
    if (output && pt_check_writable(output, false, &err) != 0) { /* before reading a trace of gigabytes */
        pt_cli_print(stderr, "perftracker: %s\n", err.message);
        return PT_EXIT_FAILURE;
    }
    pt_progress bar = {0};
    pt_read_options opts = {on_bytes, &bar, 0, 1};
    pt_worker_summary *s = pt_load_worker(input, &opts, &err);
    if (bar.active)
        pt_progress_finish(&bar, bar.total, NULL);
    if (!s) {
        pt_cli_print(stderr, "perftracker: %s: %s\n", input, err.message);
        return PT_EXIT_FAILURE;
    }
    for (size_t i = 0; i < s->warning_count; i++)
        pt_cli_print(stderr, "perftracker: warning: %s: %s\n", input, s->warnings[i]);
    int rc = PT_EXIT_OK;
    if (output && pt_summary_write_file(s, output, &err) != 0) {
        pt_cli_print(stderr, "perftracker: %s\n", err.message);
        rc = PT_EXIT_FAILURE;
    }
    if (json) {
        pt_json *j = pt_summary_to_json(s);
        pt_buf b = PT_BUF_INIT;
        pt_json_write(&b, j, 2);
        puts(pt_buf_cstr(&b));
        pt_buf_free(&b);
        pt_json_free(j);
    }
    pt_summary_free(s);
    return rc;
}
