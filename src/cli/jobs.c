/* jobs.c -- `perftracker jobs`: the jobs on this machine that the trigger can profile.
 *
 * Each running job's rank 0 publishes a job file (src/control/jobfile.h); this lists them
 * on stdout, one line each, with the ID `--trigger-on --job ID` takes. On stderr it says
 * what else it found: a squatted runtime directory and where it looks instead, other
 * users' job files (ignored), files of jobs that are gone (removed), and processes of
 * distributed jobs that cannot be profiled from here and why (still starting, no
 * collector loaded, the control plane off, rank 0 elsewhere, another user's). Exit status
 * 0 (even with no job: listing none is an answer), 2 bad command line. */
#include "cli/cli.h"
#include "control/discover.h"

#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: perftracker jobs\n"
                 "  List the running jobs on this machine that `perftracker --trigger-on` can profile:\n"
                 "  those whose rank 0 runs here under `perftracker run` or with PerfTracker() in its\n"
                 "  training script, as this user (root included: another user's job files are named on\n"
                 "  stderr, not trusted; run the trigger as that user to profile its job). The JOB column\n"
                 "  is what the trigger's --job takes when several run.\n"
                 "Exit status: 0 listed (no job running is an answer too); 2 bad command line.\n");
}

int cmd_jobs(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return PT_EXIT_OK;
        }
        pt_cli_print(stderr, "perftracker jobs: unknown argument %s\n\n", argv[i]);
        usage(stderr);
        return PT_EXIT_USAGE;
    }
    pt_job_list jobs;
    pt_jobs_list(&jobs);
    pt_buf text = PT_BUF_INIT;
    if (jobs.count) {
        pt_jobs_format(&jobs, &text);
        pt_cli_print(stdout, "%s", pt_buf_cstr(&text));
    } else {
        pt_cli_print(stderr, "perftracker: no running job has registered in %s\n", jobs.dir);
    }
    pt_buf_reset(&text);
    pt_jobs_explain(&jobs, &text);
    pt_cli_print_lines(stderr, "perftracker: ", pt_buf_cstr(&text));
    pt_buf_free(&text);
    pt_job_list_free(&jobs);
    return PT_EXIT_OK;
}
