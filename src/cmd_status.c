/* cmd_status.c -- attnsweep status (not built yet). */
#include <stdio.h>

#include "cli.h"

int cmd_status(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnsweep status: not implemented yet\n");
    return AS_EXIT_ERROR;
}
