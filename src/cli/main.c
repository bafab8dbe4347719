/* main.c -- build/attnsweep: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "version.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "run (or resume) a sweep: mpirun -np P attnsweep run CONFIG"},
    {"plan", cmd_plan, "print a sweep's grid, cell count, time, memory and output size"},
    {"status", cmd_status, "tell how far a sweep's results file got"},
    {"merge", cmd_merge, "join the shard files of a job array into one results file"},
    {"synth", cmd_synth, "write a synthetic GPT-2 model directory (Hugging Face layout)"},
    {"dump", cmd_dump, "write one window's q, k, v, scores, pattern and logits to HDF5"},
    {"tokenize", cmd_tokenize, "GPT-2 byte-level BPE: text to token ids and back"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: attnsweep COMMAND [options]   (attnsweep help COMMAND for more)\n"
                 "       attnsweep --version\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nattnsweep %s -- limits of softmax attention in GPT-2 (arXiv 2508.17821)\n",
            AS_VERSION);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return AS_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc >= 3) {
        /* attnsweep help CMD = attnsweep CMD --help */
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (!strcmp(argv[2], commands[i].name)) {
                char *args[] = {argv[2], "--help", NULL};
                return commands[i].fn(2, args);
            }
        fprintf(stderr, "attnsweep help: unknown command '%s' (try attnsweep --help)\n", argv[2]);
        return AS_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return AS_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("attnsweep %s (%s)\n", AS_VERSION, AS_GIT_COMMIT);
        return AS_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "attnsweep: unknown command '%s' (try attnsweep --help)\n", argv[1]);
    return AS_EXIT_USAGE;
}
