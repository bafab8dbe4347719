/* cmd_plan.c -- attnsweep plan (not built yet). */
#include <stdio.h>

#include "cli.h"

int cmd_plan(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnsweep plan: not implemented yet\n");
    return AS_EXIT_ERROR;
}
