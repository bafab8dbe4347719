/* cmd_dump.c -- attnsweep dump (not built yet). */
#include <stdio.h>

#include "cli.h"

int cmd_dump(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnsweep dump: not implemented yet\n");
    return AS_EXIT_ERROR;
}
