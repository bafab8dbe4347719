/* cmd_merge.c -- attnsweep merge [--out OUT] SHARD...: join a job array's shard files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "merge.h"
#include "store.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: attnsweep merge [--out OUT.h5] [--partial] [--force] SHARD.h5...\n"
            "\n"
            "Joins the files of `attnsweep run CONFIG --shard I/K` (OUT.shard-I-of-K.h5, one per\n"
            "array task) into one results file whose values equal a single run's bit for bit.\n"
            "The output is an ordinary results store (HDF5 file + journal + status): run\n"
            "`attnsweep run CONFIG` on it to compute any cells the shards did not finish.\n"
            "The shard files are only read; the output is written to a temporary name and\n"
            "renamed into place. /provenance keeps every shard's segments plus one for the merge.\n"
            "\n"
            "  --out OUT.h5   the merged file (default: the shard name without .shard-I-of-K)\n"
            "  --partial      merge even when shards of 0..K-1 are missing (their cells stay\n"
            "                 pending)\n"
            "  --force        replace an existing output (and its journal)\n"
            "\n"
            "Refused (one line naming the file): shards of another config, axes, weights or\n"
            "text; a missing shard (without --partial); a cell done in two shards with\n"
            "different values; an existing output (without --force).\n"
            "\n"
            "Exit: 0 merged; 1 refused or failed (nothing written); 2 bad usage.\n");
}

int cmd_merge(int argc, char **argv) {
    const char **shards = calloc((size_t)argc, sizeof *shards);
    if (!shards) {
        fprintf(stderr, "attnsweep merge: out of memory\n");
        return AS_EXIT_ERROR;
    }
    merge_opts o = {.shards = shards};
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(shards);
            return AS_EXIT_OK;
        } else if (!strcmp(a, "--out") && i + 1 < argc) {
            o.out = argv[++i];
        } else if (!strncmp(a, "--out=", 6) && a[6]) {
            o.out = a + 6;
        } else if (!strcmp(a, "--partial")) {
            o.partial = 1;
        } else if (!strcmp(a, "--force")) {
            o.force = 1;
        } else if (!strcmp(a, "--")) {
            while (++i < argc) shards[o.n_shards++] = argv[i];
        } else if (a[0] == '-') {
            fprintf(stderr, "attnsweep merge: unknown or incomplete option '%s' (try --help)\n", a);
            bad = 1;
        } else {
            shards[o.n_shards++] = a;
        }
    }
    if (!bad && !o.n_shards) {
        fprintf(stderr, "attnsweep merge: no shard files given (try --help)\n");
        bad = 1;
    }
    if (bad) {
        free(shards);
        return AS_EXIT_USAGE;
    }
    merge_summary sum;
    as_err err = {{0}};
    store_library_init(); /* a full disk must not crash the exit (store.h) */
    int rc = merge_shards(&o, &sum, &err);
    free(shards);
    if (rc) {
        fprintf(stderr, "attnsweep merge: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    fprintf(stderr, "attnsweep merge: %s: %zu of %d shards, %zu of %zu cells done, %zu failed, "
                    "%zu provenance segments carried over\n",
            sum.out, sum.shards_given, sum.shard_count, sum.done, sum.total, sum.failed,
            sum.segments);
    if (sum.missing[0])
        fprintf(stderr, "attnsweep merge: shards %s were missing\n", sum.missing);
    if (sum.done + sum.failed < sum.total)
        fprintf(stderr, "attnsweep merge: %zu cells pending: run `attnsweep run CONFIG` (the "
                        "config's output %s) to compute them\n",
                sum.total - sum.done - sum.failed, sum.out);
    return AS_EXIT_OK;
}
