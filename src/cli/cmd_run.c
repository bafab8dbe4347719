/* cmd_run.c -- attnsweep run CONFIG: run or resume a sweep under MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "signals.h"
#include "store.h"
#include "sweep.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: mpirun -np P [--oversubscribe] attnsweep run CONFIG [--set key=value]... [--new]\n"
            "                                  [--progress-every SECONDS] [--shard I/K]\n"
            "       mpirun -np P attnsweep run OUT.h5 [--set key=value]...   (or --from OUT.h5)\n"
            "\n"
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
            "(e.g. --set windows.count=8 extends it without retyping earlier --set options).\n"
            "\n"
            "  --from OUT.h5          resume OUT.h5 with its stored config\n"
            "  --set key=value        override a config key (libconfig syntax: grid.L=[64,128])\n"
            "  --new                  refuse to resume: fail if the output already exists\n"
            "  --progress-every S     seconds between progress lines on stderr (default 5)\n"
            "  --shard I/K            compute only shard I (0-based) of K, into OUT.shard-I-of-K.h5;\n"
            "                         `attnsweep merge` joins the K shard files into OUT\n"
            "  --ignore-disk-space    start even when the output will not fit in the free space\n"
            "                         of its file system (refused by default, before any write)\n"
            "\n"
            "Exit: 0 every cell done; 1 error (or some cells failed: run again to retry them);\n"
            "2 bad usage; 3 stopped by SIGTERM/SIGINT/SIGUSR1 after saving: run again to resume.\n");
}

int cmd_run(int argc, char **argv) {
    const char *config = NULL;
    int from = 0;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    size_t n_sets = 0;
    sweep_opts opts = {0};
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(sets);
            return AS_EXIT_OK;
        } else if (!strcmp(a, "--set") && i + 1 < argc) {
            sets[n_sets++] = argv[++i];
        } else if (!strncmp(a, "--set=", 6)) {
            sets[n_sets++] = a + 6;
        } else if (!strcmp(a, "--from") && i + 1 < argc) {
            if (config) {
                fprintf(stderr, "attnsweep run: one CONFIG or --from OUT.h5, not both\n");
                bad = 1;
            }
            config = argv[++i];
            from = 1;
        } else if (!strcmp(a, "--new")) {
            opts.fresh = 1;
        } else if (!strcmp(a, "--ignore-disk-space")) {
            opts.ignore_disk_space = 1;
        } else if (!strcmp(a, "--progress-every") && i + 1 < argc) {
            char *end;
            opts.progress_every_s = strtod(argv[++i], &end);
            if (*end || opts.progress_every_s <= 0) {
                fprintf(stderr, "attnsweep run: --progress-every needs a positive number of seconds, got '%s'\n", argv[i]);
                bad = 1;
            }
        } else if (!strcmp(a, "--shard") && i + 1 < argc) {
            char tail;
            if (sscanf(argv[++i], "%d/%d%c", &opts.shard_index, &opts.shard_count, &tail) != 2 ||
                opts.shard_count < 1 || opts.shard_index < 0 ||
                opts.shard_index >= opts.shard_count) {
                fprintf(stderr, "attnsweep run: --shard needs I/K with 0 <= I < K, got '%s'\n", argv[i]);
                bad = 1;
            }
        } else if (a[0] == '-' ) {
            fprintf(stderr, "attnsweep run: unknown or incomplete option '%s' (try --help)\n", a);
            bad = 1;
        } else if (!config) {
            config = a;
        } else {
            fprintf(stderr, "attnsweep run: one CONFIG only (got '%s' and '%s')\n", config, a);
            bad = 1;
        }
    }
    if (!bad && !config) {
        fprintf(stderr, "attnsweep run: missing CONFIG (try --help)\n");
        bad = 1;
    }
    if (bad) {
        free(sets);
        return AS_EXIT_USAGE;
    }
    size_t n = strlen(config);
    if (!from && n > 3 && (!strcmp(config + n - 3, ".h5") || !strcmp(config + n - 3, ".nc"))) from = 1;
    if (from && opts.fresh) {
        fprintf(stderr, "attnsweep run: --new cannot resume %s (it starts a new output from a CONFIG)\n", config);
        free(sets);
        return AS_EXIT_USAGE;
    }
    if (from) opts.from_output = config;
    else opts.config_path = config;
    opts.sets = sets;
    opts.n_sets = n_sets;

    /* FUNNELED: the master's writer thread (src/mpi/writer.c) commits while this
     * thread alone calls MPI; granted less, the master commits synchronously. */
    int thread_level = MPI_THREAD_SINGLE;
    store_library_init(); /* before MPI: a full disk must not crash the exit (store.h) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &thread_level);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    as_err err = {{0}};
    /* From here on a stop signal only sets a flag: a SIGTERM during start-up
     * (model loading, tokenizing) still ends in an orderly, resumable stop. */
    if (as_signals_install(&err)) {
        if (rank == 0) fprintf(stderr, "attnsweep run: %s\n", err.msg);
        MPI_Finalize();
        free(sets);
        return AS_EXIT_ERROR;
    }
    sweep_summary sum;
    int rc = sweep_run(MPI_COMM_WORLD, &opts, &sum, &err);
    int code = AS_EXIT_OK;
    if (rc < 0) {
        if (rank == 0) fprintf(stderr, "attnsweep run: %s\n", err.msg);
        code = AS_EXIT_ERROR;
    } else if (rank == 0) {
        fprintf(stderr, "attnsweep run: %s: %zu/%zu windows done, %zu this run, %zu failed "
                        "(cells %zu/%zu, %zu before this run), %.1f s\n",
                sum.output, sum.windows_done_before + sum.windows_this_run, sum.windows_total,
                sum.windows_this_run, sum.windows_failed, sum.done_before + sum.done, sum.total,
                sum.done_before, sum.elapsed_s);
        if (rc == SWEEP_INTERRUPTED)
            fprintf(stderr, "attnsweep run: interrupted; run the same command again to resume\n");
        if (rc == SWEEP_CELLS_FAILED)
            fprintf(stderr, "attnsweep run: %zu cells failed (messages above); run again to retry them\n",
                    sum.failed);
    }
    if (rc == SWEEP_INTERRUPTED) code = AS_EXIT_RESUMABLE;
    if (rc == SWEEP_CELLS_FAILED) code = AS_EXIT_ERROR;
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    free(sets);
    return code;
}
