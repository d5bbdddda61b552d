/* trigger.c -- `perftracker trigger`: not built yet; its issue replaces this file. */
#include "cli/cli.h"

#include <stdio.h>

int cmd_trigger(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "perftracker: 'trigger' is not available in this build yet\n");
    return PT_EXIT_FAILURE;
}
