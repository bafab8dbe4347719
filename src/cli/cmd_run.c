/* cmd_run.c -- attnsweep run CONFIG: run or resume a sweep under MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "store.h"
#include "launch.h"

static const char run_about[] =
    "Runs the sweep CONFIG describes (configs/example.cfg documents every key) and\n"
    "writes its results file. Rank 0 is the master; the other ranks compute cells.\n"
    "With one rank the same process does both. Rank 0 mostly sleeps, so cores + 1\n"
    "ranks is natural: Open MPI then wants --oversubscribe (mpirun -np 3 --oversubscribe\n"
    "on 2 cores).\n"
    "\n"
    "Resume is the default: run the same command again after a time limit, a crash\n"
    "or kill -9 and only the cells not yet done are computed. A changed config is\n"
    "refused (the message names each differing key with its stored and new value),\n"
    "except added windows or L values, which extend the file.\n"
    "\n"
    "Given a results file (a name ending in .h5 or .nc, or --from OUT.h5) instead of\n"
    "CONFIG, run resumes it with the config stored in it; --set still applies on top\n"
    "(e.g. --set windows.count=8 extends it without retyping earlier --set options).\n";
static const char run_exit[] =
    "Exit: 0 every cell done; 1 error (or some cells failed: run again to retry them);\n"
    "2 bad usage; 3 stopped by SIGTERM/SIGINT/SIGUSR1 after saving: run again to resume.\n"
    "SIGUSR1 or a first Ctrl-C let the running cells finish (runtime.stop_grace); a\n"
    "second Ctrl-C or SIGTERM abandons them (pending). Under mpirun, Ctrl-C is mpirun's\n"
    "(it kills the ranks): send mpirun SIGUSR1 instead (docs/usage.md, \"Stopping a run\").\n"
    "\n"
    "Environment (for measurements; results do not depend on them):\n"
    "  ATTNSWEEP_TIMINGS=1          one line per rank at the end: where the time went\n"
    "  ATTNSWEEP_SYNC_COMMIT=1      the master commits on its receiving thread (no writer\n"
    "                               thread), to compare the two on a real sweep\n"
    "  ATTNSWEEP_PRIVATE_WEIGHTS=1  every rank loads its own weights copy instead of one\n"
    "                               shared copy per node (memory comparisons)\n"
    "  OPENBLAS_CORETYPE=CORE       OpenBLAS's kernels (SkylakeX, Haswell, ...). Unset, attnsweep\n"
    "                               sets it to the CPU's own level where OpenBLAS took the CPU\n"
    "                               for an older one (ATTNSWEEP_BLAS_DETECTED keeps that core\n"
    "                               name); `attnsweep --version` says which run. The forward's\n"
    "                               float rounding, not its meaning, differs between cores.\n";

/* --shard I/K into the run_opts the option points at. */
static int parse_shard(const arg_opt *o, const char *v, const char **why) {
    run_opts *opts = o->value;
    char tail;
    if (sscanf(v, "%d/%d%c", &opts->shard_index, &opts->shard_count, &tail) != 2 ||
        opts->shard_count < 1 || opts->shard_index < 0 || opts->shard_index >= opts->shard_count) {
        *why = "is not I/K with 0 <= I < K";
        return -1;
    }
    return 0;
}

/* The command line into *opts (sets and the config or output path point into argv or
 * *sets, which the caller frees). 0 to go on, else 1 with *code. */
static int parse_run_args(run_opts *opts, arg_list *sets, int argc, char **argv, int *code) {
    const char *from = NULL;
    double every = 0;
    arg_list pos = {0};
    const arg_opt table[] = {
        OPT_STRING("from", "OUT.h5", &from, "resume OUT.h5 with its stored config"),
        OPT_LIST("set", "key=value", sets, "override a config key (libconfig syntax: grid.L=[64,128])"),
        OPT_FLAG("new", &opts->fresh, "refuse to resume: fail if the output already exists"),
        OPT_POSITIVE("progress-every", "S", &every, "seconds between progress lines on stderr (default 5)"),
        OPT_CALLBACK("shard", "I/K", opts, parse_shard,
                     "compute only shard I (0-based) of K, into OUT.shard-I-of-K.h5;\n"
                     "`attnsweep merge` joins the K shard files into OUT"),
        OPT_FLAG("ignore-disk-space", &opts->ignore_disk_space,
                 "start even when the output will not fit in the free space\n"
                 "of its file system (refused by default, before any write)"),
        OPT_CALLBACK("mem", "SIZE", &opts->mem_limit, cli_parse_mem,
                     "the memory of a node (4G, 512M); default SLURM_MEM_PER_NODE,\n"
                     "else MemTotal: a grid whose ranks on a node need more is\n"
                     "refused before any work (attnsweep plan shows the need)"),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep run", .usage_prefix = "mpirun -np P [--oversubscribe] attnsweep run",
                     .usage_extra = "       mpirun -np P attnsweep run OUT.h5 [--set key=value]...   (or --from OUT.h5)\n",
                     .positional = "CONFIG", .max_pos = 1, .pos = &pos, .description = run_about,
                     .epilogue = run_exit, .opts = table};
    if (args_parse(&spec, argc, argv, code)) return 1;
    const char *config = pos.n ? pos.v[0] : NULL;
    free(pos.v);
    *code = AS_EXIT_USAGE;
    if (config && from) {
        fprintf(stderr, "attnsweep run: one CONFIG or --from OUT.h5, not both\n");
        return 1;
    }
    if (!config && !from) {
        fprintf(stderr, "attnsweep run: missing CONFIG (try --help)\n");
        return 1;
    }
    size_t n = config ? strlen(config) : 0;
    if (n > 3 && (!strcmp(config + n - 3, ".h5") || !strcmp(config + n - 3, ".nc"))) from = config;
    if (from && opts->fresh) {
        fprintf(stderr, "attnsweep run: --new cannot resume %s (it starts a new output from a CONFIG)\n", from);
        return 1;
    }
    if (from) opts->from_output = from;
    else opts->config_path = config;
    opts->progress_every_s = every;
    opts->sets = sets->v;
    opts->n_sets = sets->n;
    return 0;
}

int cmd_run(int argc, char **argv) {
    run_opts opts = {0};
    arg_list sets = {0};
    int code;
    if (parse_run_args(&opts, &sets, argc, argv, &code)) {
        free(sets.v);
        return code;
    }
    const char **set_list = sets.v;
    run_summary sum;
    as_err err = {{0}};
    int rank = 0;
    int rc = launch_main(&argc, &argv, &opts, &sum, &rank, &err);
    code = AS_EXIT_OK;
    if (rc < 0) {
        if (rank == 0) fprintf(stderr, "attnsweep run: %s\n", err.msg);
        code = AS_EXIT_ERROR;
    } else if (rank == 0) {
        fprintf(stderr, "attnsweep run: %s: %zu/%zu windows done, %zu this run, %zu failed "
                        "(cells %zu/%zu, %zu before this run), %.1f s\n",
                sum.output, sum.windows_done_before + sum.windows_this_run, sum.windows_total,
                sum.windows_this_run, sum.windows_failed, sum.done_before + sum.done, sum.total,
                sum.done_before, sum.elapsed_s);
        if (rc == RUN_INTERRUPTED)
            fprintf(stderr, "attnsweep run: interrupted; run the same command again to resume\n");
        if (rc == RUN_CELLS_FAILED)
            fprintf(stderr, "attnsweep run: %zu cells failed (messages above); run again to retry them\n",
                    sum.failed);
    }
    if (rc == RUN_INTERRUPTED) code = AS_EXIT_RESUMABLE;
    if (rc == RUN_CELLS_FAILED) code = AS_EXIT_ERROR;
    free(set_list);
    return code;
}
