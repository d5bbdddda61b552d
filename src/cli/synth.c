/* synth.c -- placeholder, being written. */
#include "cli/cli.h"

#include <stdio.h>

int cmd_synth(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "perftracker: 'synth' is not available in this build yet\n");
    return PT_EXIT_FAILURE;
}
