/* bench_scheduler.c -- how fast the scheduler moves cells, and how close the
 * makespan of a sweep with uneven cells comes to its lower bound.
 *
 * Run under mpirun, e.g.
 *   mpirun -np 4 --oversubscribe --allow-run-as-root build/bench_scheduler --cells 50000
 *   mpirun -np 17 --oversubscribe --allow-run-as-root build/bench_scheduler --cost-model l2 --cells 600
 *
 * --cost-model none: compute only fills the block (throughput of the protocol).
 * --cost-model l2:   cell i has context length L in {32,64,...,1024} (cycling,
 *                    dispatched largest L first, as the grid orders them) and
 *                    sleeps --unit-ms * (L/1024)^2; sleeping, not spinning, so
 *                    16+ ranks on 2 cores measure the scheduling and not the
 *                    oversubscription. Prints makespan / (sum of costs / workers),
 *                    and makespan / max(that, the longest cell).
 * --commit memcpy copies every block once (a stand-in for the store), none
 * does nothing; --commit-ms MS adds a sleep of MS per commit call (a store waiting
 * on its disk). --sync-commit commits on the receiving thread (the master before its
 * writer thread, writer.h) instead of the writer thread. Output: one line of numbers
 * on rank 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "scheduler.h"
#include "signals.h"

typedef struct {
    size_t block_doubles;
    int cost_l2;
    double unit_s;
} bench_compute;

static const int lengths[] = {1024, 512, 256, 128, 64, 32};
enum { N_LENGTHS = sizeof lengths / sizeof lengths[0] };

/* Cells are numbered so that id / ncells_per_L gives the L index: the
 * dispatch list 0..n-1 is then largest L first. */
static size_t cells_per_length;

static double cell_cost(const bench_compute *b, int64_t cell) {
    if (!b->cost_l2) return 0.0;
    size_t li = (size_t)cell / cells_per_length;
    if (li >= N_LENGTHS) li = N_LENGTHS - 1;
    double rel = lengths[li] / 1024.0;
    return b->unit_s * rel * rel;
}

static int compute_cell(void *ctx, int64_t cell, double *block, as_err *err) {
    (void)err;
    bench_compute *b = ctx;
    double cost = cell_cost(b, cell);
    if (cost > 0) {
        struct timespec ts = {(time_t)cost, (long)((cost - (double)(time_t)cost) * 1e9)};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    for (size_t k = 0; k < b->block_doubles; k++) block[k] = (double)cell + (double)k;
    return 0;
}

typedef struct {
    int copy;
    double sleep_s;
    size_t block_doubles;
    double *sink;
    double checksum;
} bench_commit;

static int commit_cells(void *ctx, const int64_t *cells, double *const *blocks, const int *status, size_t n,
                        as_err *err) {
    (void)cells;
    (void)status;
    (void)err;
    bench_commit *c = ctx;
    if (c->sleep_s > 0) {
        struct timespec ts = {(time_t)c->sleep_s, (long)((c->sleep_s - (double)(time_t)c->sleep_s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    if (!c->copy) return 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(c->sink, blocks[i], c->block_doubles * sizeof(double));
        if (c->block_doubles) c->checksum += c->sink[0];
    }
    return 0;
}

/* The makespan of the same list handed out greedily (each cell to the worker
 * that frees up first) with no communication cost: what the best
 * dynamic-pull scheduler could reach, to tell scheduling overhead from the
 * packing loss of the last round. */
static double greedy_makespan(const bench_compute *b, const int64_t *order, size_t n, int workers) {
    double *free_at = calloc((size_t)workers, sizeof *free_at);
    double makespan = 0;
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        for (int w = 1; w < workers; w++)
            if (free_at[w] < free_at[best]) best = w;
        free_at[best] += cell_cost(b, order[i]);
        if (free_at[best] > makespan) makespan = free_at[best];
    }
    free(free_at);
    return makespan;
}

static void usage(void) {
    printf("usage: bench_scheduler [--cells N] [--block DOUBLES] [--cost-model none|l2] [--unit-ms MS]\n"
           "                       [--commit none|memcpy] [--commit-ms MS] [--commit-every N] [--prefetch N]\n"
           "                       [--sync-commit 0|1]\n");
}

int main(int argc, char **argv) {
    int level = MPI_THREAD_SINGLE; /* FUNNELED, as attnsweep run: the master's writer thread */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &level);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t ncells = 20000, block = 16, commit_every = 8;
    int prefetch = 2, cost_l2 = 0, copy = 0, sync_commit = 0;
    double unit_ms = 200, commit_ms = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0) usage();
            MPI_Finalize();
            return 0;
        }
        if (!v) {
            if (rank == 0) fprintf(stderr, "bench_scheduler: %s needs a value\n", a);
            MPI_Finalize();
            return 2;
        }
        if (!strcmp(a, "--cells")) ncells = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--block")) block = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--cost-model")) cost_l2 = !strcmp(v, "l2");
        else if (!strcmp(a, "--unit-ms")) unit_ms = atof(v);
        else if (!strcmp(a, "--commit")) copy = !strcmp(v, "memcpy");
        else if (!strcmp(a, "--commit-every")) commit_every = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--commit-ms")) commit_ms = atof(v);
        else if (!strcmp(a, "--sync-commit")) sync_commit = atoi(v);
        else if (!strcmp(a, "--prefetch")) prefetch = atoi(v);
        else {
            if (rank == 0) fprintf(stderr, "bench_scheduler: unknown argument %s (see --help)\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    cells_per_length = (ncells + N_LENGTHS - 1) / N_LENGTHS;
    bench_compute bc = {.block_doubles = block, .cost_l2 = cost_l2, .unit_s = unit_ms * 1e-3};
    bench_commit cm = {.copy = copy, .sleep_s = commit_ms * 1e-3, .block_doubles = block};
    cm.sink = malloc((block ? block : 1) * sizeof(double));
    int64_t *order = NULL;
    double sum_cost = 0, max_cost = 0;
    if (rank == 0) {
        order = malloc((ncells ? ncells : 1) * sizeof *order);
        for (size_t i = 0; i < ncells; i++) {
            order[i] = (int64_t)i;
            double c = cell_cost(&bc, (int64_t)i);
            sum_cost += c;
            if (c > max_cost) max_cost = c;
        }
    }
    sched_opts o = {.block_doubles = block, .compute = compute_cell, .compute_ctx = &bc,
                    .commit = commit_cells, .master_ctx = &cm, .commit_every = commit_every,
                    .prefetch = prefetch, .progress_every_s = -1, .sync_commit = sync_commit};
    sched_stats st;
    as_err err = {{0}};
    FILE *quiet = fopen("/dev/null", "w");
    o.progress = quiet;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc = sched_run(MPI_COMM_WORLD, order, rank == 0 ? ncells : 0, &o, &st, &err);
    double elapsed = MPI_Wtime() - t0;
    if (rc < 0) fprintf(stderr, "bench_scheduler: rank %d: %s\n", rank, err.msg);
    if (rank == 0 && rc >= 0) {
        int workers = size > 1 ? size - 1 : 1;
        printf("ranks %d workers %d cells %zu block %zu doubles commit_every %zu prefetch %d cost %s, commit %s "
               "(%zu calls, largest %zu cells, %.2f s in commit): %.3f s, %.0f cells/s, master cpu %.2f s "
               "(%.0f%% of one core)",
               size, workers, ncells, block, commit_every, prefetch, cost_l2 ? "l2" : "none",
               st.threaded_commit ? "on the writer thread" : "synchronous", st.commit_batches, st.largest_batch,
               st.commit_s, elapsed, (double)(st.done + st.failed) / elapsed, st.master_cpu_s,
               100.0 * st.master_cpu_s / elapsed);
        if (cost_l2) {
            double bound = sum_cost / workers;
            double bound2 = bound > max_cost ? bound : max_cost;
            double greedy = greedy_makespan(&bc, order, ncells, workers);
            printf(", sum of costs %.2f s, bound %.3f s, makespan/bound %.3f, zero-overhead greedy "
                   "%.3f s (ratio %.3f), makespan/greedy %.3f",
                   sum_cost, bound2, elapsed / bound2, greedy, greedy / bound2, elapsed / greedy);
            /* The sleeps overshoot on a loaded machine: compare with what they really took too. */
            printf(", measured compute %.2f s (%.3f x nominal), makespan/(measured/workers) %.3f", st.compute_s,
                   st.compute_s / sum_cost, elapsed / (st.compute_s / workers));
        }
        printf("\n");
    }
    fclose(quiet);
    free(order);
    free(cm.sink);
    MPI_Finalize();
    return rc < 0 ? 1 : 0;
}
