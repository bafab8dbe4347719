/* sweep.h -- one run of a sweep, on every rank of an MPI communicator.
 *
 * The order of things (each step fails with one line naming what to fix,
 * before any result is touched):
 *   1. every rank loads and validates the config (config.h) and its grid;
 *   2. rank 0 loads the text (tokenized once per run), checks that the
 *      windows fit, and broadcasts the token ids;
 *   3. the model: rank 0 of each node reads the weights into an MPI-3
 *      shared-memory window, the node's other ranks map it (one copy per node;
 *      ATTNSWEEP_PRIVATE_WEIGHTS=1 gives every rank its own);
 *   4. rank 0 compares the config with the one the output was made with
 *      (a changed config is refused, except added windows or L values),
 *      opens the store (lock, journal, HDF5 view, provenance segment) and
 *      lists the cells not yet done, largest L first;
 *   5. the scheduler hands out units -- the pending L values of one window,
 *      computed from one forward pass at the grid's largest L (cell.h), so a
 *      result never depends on how cells were grouped, on the rank count or
 *      on resumes -- and rank 0 commits their cells in batches of up to 64
 *      (the scheduler's progress lines count units);
 *   6. rank 0 closes the store with the state "finished", "interrupted" or
 *      "failed".
 * Errors found on one rank are made known to all, so every rank returns the
 * same result. Only rank 0 fills err with the real message.
 * ATTNSWEEP_TIMINGS=1 prints, at the end, each rank's time split (forward
 * pass, metrics, KS, transfer; wall and CPU) and the master's commit time. */
#ifndef ATTNSWEEP_SWEEP_H
#define ATTNSWEEP_SWEEP_H

#include <mpi.h>
#include <stddef.h>

#include "errors.h"

typedef struct {
    const char *config_path;
    /* `run OUT.h5`: instead of config_path, resume with the config stored in
     * this results file (its journal's newest config record, else the file's
     * config_text attribute); sets apply on top, and output is this file. */
    const char *from_output;
    const char *const *sets;   /* "key=value" overrides */
    size_t n_sets;
    int fresh;                 /* refuse to resume an existing output */
    double progress_every_s;   /* 0: the scheduler's default */
    /* Sharding (a sweep split over a job array): with shard_count K > 0 this
     * run computes only the cells at positions i of the dispatch order with
     * i % K == shard_index, and writes them to OUT.shard-I-of-K.h5 next to the
     * config's output (sweep_shard_path); `attnsweep merge` joins the shards.
     * Round robin over the largest-first order gives every shard a similar
     * share of long and short cells. A shard started next to an existing output
     * of the same config skips the cells that output holds done (merge joins them
     * from it), so sharding a finished or half-done file computes only what is left. */
    int shard_index, shard_count;
    /* Start even when the output (results file + journal, grid_disk_bytes)
     * will not fit in the free space of its file system; by default such a
     * run is refused before anything is written. */
    int ignore_disk_space;
    double mem_limit;   /* --mem: a node's memory in bytes (0: SLURM_MEM_PER_NODE or
                         * MemAvailable, plan_memory_limit); a grid whose node cannot fit it
                         * is refused before any work */
} sweep_opts;

typedef enum { SWEEP_COMPLETE = 0, SWEEP_INTERRUPTED = 1, SWEEP_CELLS_FAILED = 2 } sweep_outcome;

typedef struct {
    size_t total, done_before, done, failed;   /* cells (of this shard) */
    /* windows (of this shard): done = every cell of the window done; this_run =
     * windows finished by this run; the unit of the progress lines */
    size_t windows_total, windows_done_before, windows_this_run, windows_failed;
    double elapsed_s;
    char output[4096];
} sweep_summary;

/* The output of shard I of K: "results/paper.h5" -> "results/paper.shard-I-of-K.h5"
 * (the suffix goes before a final ".h5" or ".nc", else at the end). */
int sweep_shard_path(char *out, size_t size, const char *output, int shard_index, int shard_count);

/* Returns a sweep_outcome, or -1 with err set (on rank 0). */
int sweep_run(MPI_Comm comm, const sweep_opts *opts, sweep_summary *summary, as_err *err);

#endif
