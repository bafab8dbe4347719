/* cmd_tokenize.c -- attnsweep tokenize (not built yet). */
#include <stdio.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "attnsweep tokenize: not implemented yet\n");
    return AS_EXIT_ERROR;
}
