/* cmd_synth.c -- attnsweep synth: write a synthetic GPT-2 model directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "errors.h"
#include "synth.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: attnsweep synth --preset tiny|gpt2 --out DIR [--seed S] [--force]\n"
            "\n"
            "Writes DIR/config.json and DIR/model.safetensors: a GPT-2 with random weights in\n"
            "the exact Hugging Face layout (see include/synth.h for the initialisation).\n"
            "\n"
            "  --preset P  tiny (2 layers, 4 heads, 64 wide, 128 positions, 50257 tokens)\n"
            "              or gpt2 (GPT-2 small's shapes, 124M parameters, ~550 MB)\n"
            "  --out DIR   model directory (created with its parents)\n"
            "  --seed S    unsigned 64-bit seed (default 1); same seed, same bytes\n"
            "  --force     overwrite an existing model in DIR\n"
            "\n"
            "The vocabulary files (vocab.json, merges.txt) are not written.\n");
}

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *out = NULL;
    uint64_t seed = 1;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return AS_EXIT_OK;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--preset") || !strcmp(a, "--out") || !strcmp(a, "--seed")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "attnsweep synth: %s needs a value (try --help)\n", a);
                return AS_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--preset")) {
                preset = v;
            } else if (!strcmp(a, "--out")) {
                out = v;
            } else {
                char *end;
                errno = 0;
                unsigned long long s = strtoull(v, &end, 10);
                if (!*v || *end || errno || v[0] == '-' || v[0] == '+' || v[0] == ' ') {
                    fprintf(stderr,
                            "attnsweep synth: --seed '%s' is not an unsigned 64-bit integer\n", v);
                    return AS_EXIT_USAGE;
                }
                seed = (uint64_t)s;
            }
        } else {
            fprintf(stderr, "attnsweep synth: unknown argument '%s' (try --help)\n", a);
            return AS_EXIT_USAGE;
        }
    }
    if (!preset || !out) {
        fprintf(stderr, "attnsweep synth: --preset and --out are required (try --help)\n");
        return AS_EXIT_USAGE;
    }
    if (strcmp(preset, "tiny") && strcmp(preset, "gpt2")) {
        fprintf(stderr, "attnsweep synth: unknown preset '%s' (expected tiny or gpt2)\n", preset);
        return AS_EXIT_USAGE;
    }
    as_err err = {{0}};
    if (synth_write(out, preset, seed, force, &err)) {
        fprintf(stderr, "attnsweep synth: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    return AS_EXIT_OK;
}
