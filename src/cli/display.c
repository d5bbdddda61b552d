/* display.c -- `perftracker display`: not built yet; its issue replaces this file. */
#include "cli/cli.h"

#include <stdio.h>

int cmd_display(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "perftracker: 'display' is not available in this build yet\n");
    return PT_EXIT_FAILURE;
}
