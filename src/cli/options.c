/* options.c -- the options the commands that read jobs share (analyze, diff): -o OUT,
 * -j THREADS (also -jN), --quiet (-q) and -h/--help, parsed one way for both. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

int pt_cli_job_option(int argc, char **argv, int *i, pt_cli_job_options *o)
{
    const char *arg = argv[*i];
    if (strcmp(arg, "-o") == 0 && *i + 1 < argc) {
        o->out_dir = argv[++*i];
    } else if ((strcmp(arg, "-j") == 0 && *i + 1 < argc) || (strncmp(arg, "-j", 2) == 0 && arg[2])) {
        o->threads = atoi(arg[2] ? arg + 2 : argv[++*i]);
        if (o->threads < 1 || o->threads > 256) {
            pt_cli_print(stderr, "perftracker: -j wants 1..256 threads\n");
            return -1;
        }
    } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
        o->quiet = true;
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
