/* cmd_run.c -- attnsweep run (not built yet). */
#include <stdio.h>

#include "cli.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnsweep run: not implemented yet\n");
    return AS_EXIT_ERROR;
}
