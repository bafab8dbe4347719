/* cmd_merge.c -- attnsweep merge [--out OUT] SHARD...: join a job array's shard files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "merge.h"
#include "store.h"

static const char merge_about[] =
    "Joins the files of `attnsweep run CONFIG --shard I/K` (OUT.shard-I-of-K.h5, one per\n"
    "array task) into one results file whose values equal a single run's bit for bit.\n"
    "The output is an ordinary results store (HDF5 file + journal + status): run\n"
    "`attnsweep run CONFIG` on it to compute any cells the shards did not finish.\n"
    "The shard files are only read; the output is written to a temporary name and\n"
    "renamed into place. /provenance keeps every shard's segments plus one for the merge.\n";
static const char merge_exit[] =
    "An existing OUT.h5 of the shards' config is joined: its cells are merged in (shards\n"
    "started next to it skip them), and it is replaced by the merged file.\n"
    "\n"
    "Refused (one line naming the file): shards of another config, axes, weights or\n"
    "text; a missing shard (without --partial); a cell done in two shards (or in a\n"
    "shard and the existing output) with different values; an existing output of\n"
    "another config, or without its journal (without --force).\n"
    "\n"
    "Exit: 0 merged; 1 refused or failed (nothing written); 2 bad usage.\n";

int cmd_merge(int argc, char **argv) {
    arg_list shards = {0};
    merge_opts o = {0};
    const arg_opt opts[] = {
        OPT_STRING("out", "OUT.h5", &o.out, "the merged file (default: the shard name without .shard-I-of-K)"),
        OPT_FLAG("partial", &o.partial,
                 "merge even when shards of 0..K-1 are missing (their cells stay\npending)"),
        OPT_FLAG("force", &o.force, "replace an existing output (and its journal) without reading it"),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep merge", .positional = "SHARD.h5", .min_pos = 1,
                     .max_pos = SIZE_MAX, .pos = &shards, .description = merge_about,
                     .epilogue = merge_exit, .opts = opts};
    int code;
    if (args_parse(&spec, argc, argv, &code)) return code;
    o.shards = shards.v;
    o.n_shards = shards.n;
    merge_summary sum;
    as_err err = {{0}};
    store_library_init(); /* a full disk must not crash the exit (store.h) */
    int rc = merge_shards(&o, &sum, &err);
    args_free(&spec);
    if (rc) {
        fprintf(stderr, "attnsweep merge: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    fprintf(stderr, "attnsweep merge: %s: %zu of %d shards%s, %zu of %zu cells done, %zu failed, "
                    "%zu provenance segments carried over\n",
            sum.out, sum.shards_given, sum.shard_count,
            sum.joined_existing ? " joined with the cells the existing output held" : "", sum.done,
            sum.total, sum.failed, sum.segments);
    if (sum.missing[0])
        fprintf(stderr, "attnsweep merge: shards %s were missing\n", sum.missing);
    if (sum.done + sum.failed < sum.total)
        fprintf(stderr, "attnsweep merge: %zu cells pending: run `attnsweep run CONFIG` (the "
                        "config's output %s) to compute them\n",
                sum.total - sum.done - sum.failed, sum.out);
    return AS_EXIT_OK;
}
