/* cmd_synth.c -- attnsweep synth (not built yet). */
#include <stdio.h>

#include "cli.h"

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnsweep synth: not implemented yet\n");
    return AS_EXIT_ERROR;
}
