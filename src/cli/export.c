/* export.c -- `perftracker export`: not built yet; its issue replaces this file. */
#include "cli/cli.h"

#include <stdio.h>

int cmd_export(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "perftracker: 'export' is not available in this build yet\n");
    return PT_EXIT_FAILURE;
}
