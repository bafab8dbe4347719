/* run.h -- one run of a sweep, without MPI: the steps `attnsweep run` takes, as functions
 * over a `run` object. src/mpi/launch.c does the collectives between them (broadcasts,
 * the scheduler, one model's weights per node); a unit test drives them in one process.
 *
 * The order (each step fails with one line naming what to fix, before any result is
 * touched; "rank 0" steps run on the rank that owns the output):
 *   1. run_config: the config (a file, or the text stored in an output: run_stored_config)
 *      and its grid; the output's path (a shard's: run_shard_path); every rank;
 *      run_check_memory (rank 0): the ranks of a node against its memory, before any work;
 *   2. run_load_text (rank 0): the text, tokenized once, checked against the windows;
 *   3. run_check_models (rank 0): the model axis' files checked, so a bad one is refused
 *      before any results file exists; model 0 loaded (run_model_loaded records it);
 *      run_open_output (rank 0, run_output.c): the checks that protect results already
 *      written -- the config's changes, the inputs' hashes, the free disk -- then the store,
 *      with the run's provenance (run_hosts_list: where it ran);
 *   4. run_plan_units (rank 0): the cells still to do (model-major, the shard's share, less
 *      what the config's own output holds done), grouped into units (grid.h, grid_unit);
 *      then run_layout on every rank: how a unit's message is laid out;
 *   5. per model with pending units: its weights checked against the sha256 recorded
 *      (run_model_loaded), run_start_model (the cell worker for it), then run_compute_unit
 *      on the computing ranks and run_unit_dispatched / run_commit_units on rank 0 (the
 *      scheduler's callbacks; run_unit_name and run_units_per_commit say how it counts);
 *   6. run_close (rank 0): the store closed "finished", "interrupted" or "failed".
 * run_free releases everything. ATTNSWEEP_TIMINGS=1 (run_timings_row): run_print_timings
 * prints each rank's time split (forward pass, metrics, KS, transfer; wall and CPU) and
 * the commit's. */
#ifndef ATTNSWEEP_RUN_H
#define ATTNSWEEP_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "cell.h"
#include "config.h"
#include "errors.h"
#include "grid.h"
#include "model.h"
#include "store.h"
#include "textsrc.h"

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
     * config's output (run_shard_path); `attnsweep merge` joins the shards.
     * Round robin over the largest-first order gives every shard a similar
     * share of long and short cells. A shard started next to an existing output
     * of the same config skips the cells that output holds done (merge joins them
     * from it), so sharding a finished or half-done file computes only what is left. */
    int shard_index, shard_count;
    /* Start even when the output (results file + journal, grid_disk_bytes)
     * will not fit in the free space of its file system; by default such a
     * run is refused before anything is written. */
    int ignore_disk_space;
    double mem_limit;   /* --mem: a node's memory in bytes (0: SLURM_MEM_PER_NODE, else
                         * MemTotal; plan_memory_limit) that run_check_memory holds the
                         * grid's ranks on a node against */
} run_opts;

typedef enum { RUN_COMPLETE = 0, RUN_INTERRUPTED = 1, RUN_CELLS_FAILED = 2 } run_outcome;

typedef struct {
    size_t total, done_before, done, failed;   /* cells (of this shard) */
    /* windows (of this shard): done = every cell of the window done; this_run =
     * windows finished by this run; the unit of the progress lines */
    size_t windows_total, windows_done_before, windows_this_run, windows_failed;
    double elapsed_s;
    char output[4096];
} run_summary;

/* Seconds and counts for ATTNSWEEP_TIMINGS (one row per rank). */
enum { TM_RUN, TM_LOAD, TM_SCHED, TM_COMPUTE, TM_FORWARD, TM_METRICS, TM_KS, TM_CPU, TM_COMMIT,
       TM_COMMIT_CELLS, TM_UNITS, TM_FORWARD_CPU, TM_METRICS_CPU, TM_COMMIT_CPU, TM_DEFLATE,
       TM_DEFLATE_IN, TM_DEFLATE_OUT, TM_N };

/* What run_commit_units reads in status[i]: the unit's cells were computed (anything else:
 * they failed). The scheduler's SCHED_CELL_DONE has this value. */
enum { RUN_UNIT_DONE = 1 };

/* What the run records of its surroundings (the provenance, store.h): none of it is MPI's
 * business to interpret, the launcher fills it in. */
typedef struct {
    const char *hosts;        /* "host1,host2" */
    const char *mpi_library;  /* the MPI library's version string */
    int size;                 /* ranks */
} run_env;

/* The scheduler's totals that the timings table prints. */
typedef struct {
    double elapsed_s, master_cpu_s;
    size_t commit_batches, largest_batch;
    int threaded_commit;
} run_sched_totals;

typedef struct {
    const run_opts *opts;        /* not owned: must outlive the run */
    as_config cfg;
    as_grid grid;
    int cfg_ok, grid_ok;
    int32_t *tokens;
    int64_t n_tokens;
    char (*model_sha)[65];       /* rank 0: [n_model] sha256 of each model.safetensors */
    cell_worker *worker;         /* the model being computed's, on a rank that computes */
    cr_layout layout;            /* the blocks' layout: the union axes, the same for every model */
    store *out;
    char out_path[4096];         /* the config's output, or this shard's */
    int rank;                    /* recorded in the blocks' `rank` */
    /* the units every rank knows (rank 0 builds them, the launcher shares them) */
    grid_unit *units;            /* model-major: every unit of model 0, then model 1, ... */
    size_t n_units, unit_cells;  /* unit_cells: blocks per unit buffer */
    size_t *model_units;         /* [n_model + 1]: model m's units are [model_units[m], model_units[m + 1]) */
    size_t slot_doubles;         /* one cell in a unit's message (see run.c, slot_doubles) */
    double *scratch;             /* computing: the unit's blocks of doubles before packing */
    int deflate;                 /* the output stores compressed chunks: the computing ranks
                                  * deflate their cells (cw_deflate_cell), rank 0 stores them
                                  * as sent; 2: with the chunks' Fletcher32 checksums */
    unsigned char *pack_buf, *dz_scratch; /* deflating: one cell packed; shuffle buffer */
    size_t cells_done, cells_failed; /* committed, counted in cells (rank 0) */
    size_t units_done, units_failed; /* the same in units (windows) */
    /* rank 0: sha256 of the inputs as read (the text's bytes, its tokenizer files) */
    char text_sha[65], vocab_sha[65], merges_sha[65];
    char vocab_name[32], merges_name[32]; /* the tokenizer's two files: vocab.json merges.txt, or tokenizer.json tokenizer_config.json */
    char tok_files[1024];                 /* textsrc's tokenizer_files: the provenance line */
    double timing[TM_N];
} run;

/* The output of shard I of K: "results/paper.h5" -> "results/paper.shard-I-of-K.h5"
 * (the suffix goes before a final ".h5" or ".nc", else at the end). */
int run_shard_path(char *out, size_t size, const char *output, int shard_index, int shard_count);

/* Zeroes r for rank `rank` of the run (opts must outlive r). */
void run_init(run *r, const run_opts *opts, int rank);
void run_free(run *r);

/* Step 1. stored_text: NULL loads opts->config_path; else the canonical config text that
 * opts->from_output holds (run_stored_config, on the rank that reads it), loaded with
 * output = that file. Also the output path (shard) and the BLAS thread count. */
int run_config(run *r, const char *stored_text, as_err *err);
/* The config text OUT.h5 was made with (its journal's newest config record, else the
 * file's config_text attribute), malloc'd into *text. */
int run_stored_config(const char *path, char **text, as_err *err);

/* Step 1, rank 0 (before the text, the weights or the output are touched): node_ranks
 * ranks on one node (the launcher counts them: rank 0's node) against the node's memory
 * (plan_memory_limit of opts->mem_limit; plan_memory_check's one line when they cannot
 * fit). */
int run_check_memory(const run *r, size_t node_ranks, as_err *err);

/* The text the config names, as textsrc_load takes it (`run` and `plan` read it so). */
textsrc_spec run_text_spec(const as_config *cfg);
/* Step 2 (rank 0): r->tokens, r->n_tokens and the inputs' sha256s. */
int run_load_text(run *r, as_err *err);

/* Step 3 (rank 0, before the store opens): allocates r->model_sha; for models 1.. the
 * sha256 of the weights as loading computes it (model.safetensors, or the index and its
 * shards: model_weights_sha256) and every tensor checked against config.json without
 * reading the values (their NaN and Inf are checked when each is loaded, at its turn).
 * Model 0, loaded in full first, gives its own sha256 (run_model_loaded). */
int run_check_models(run *r, as_err *err);
/* Rank 0, model m's weights just loaded: the first load of model 0 records its sha256;
 * any other load must hash to the sha256 recorded (the one the store keeps), so a file
 * rewritten during the run is refused in one line. */
int run_model_loaded(run *r, size_t m, const gpt2_model *model, as_err *err);

/* Step 3 (rank 0, run_output.c): r->model_sha must hold every model's weights sha256. */
int run_open_output(run *r, const run_env *env, as_err *err);
/* The provenance's host list (run_env.hosts): the distinct names among n records of
 * `stride` bytes each (NUL-terminated; the launcher gathers one per rank), in the order
 * first seen, "a,b", cut to fit out. */
void run_hosts_list(char *out, size_t size, const char *names, size_t stride, size_t n);
/* Rank 0, a shard: the cells the config's own output (next to the shard) holds done,
 * [n_model * n_cells], when that output exists with this run's config (its journal is the
 * truth); NULL otherwise (no output, another config, or unreadable: then nothing is
 * skipped). *held counts them. */
unsigned char *run_existing_done(const run *r, size_t *held);

/* Step 4 (rank 0): the summary's counts, the units, r->deflate. model_windows_before
 * ([n_model], zeroed) receives each model's windows done before this run. */
int run_plan_units(run *r, run_summary *sum, size_t *model_windows_before, as_err *err);
/* On a rank that receives the units: room for n of them and the model index. */
int run_alloc_units(run *r, size_t n, as_err *err);
/* Every rank, once the units and r->deflate are known: unit_cells, the block layout of
 * the union axes, slot_doubles. */
void run_layout(run *r);

/* Step 5: what the progress lines call model m's units: "windows", or "windows of NAME"
 * on a model axis. */
void run_unit_name(const run *r, size_t m, char *out, size_t size);
/* Units per commit call: runtime.commit_every counts cells, a unit holds up to
 * unit_cells of them (at least 1). */
size_t run_units_per_commit(const run *r);
/* Step 5: the cell worker for model m (computes: this rank computes units). */
int run_start_model(run *r, size_t m, const gpt2_model *model, int computes,
                    int (*should_stop)(void), as_err *err);
/* Unit `unit` into out: unit_cells slots of slot_doubles each (wall_time, rank, then
 * the cell as the file stores it). */
int run_compute_unit(run *r, int64_t unit, double *out, as_err *err);
/* Rank 0: n finished units (blocks[i] as run_compute_unit wrote it, status[i] ==
 * RUN_UNIT_DONE when computed) into the store, up to 64 cells per store call. */
int run_commit_units(run *r, const int64_t *units, double *const *blocks, const int *status,
                     size_t n, as_err *err);
/* Rank 0: unit `unit` goes to rank worker (journaled as an attempt). */
void run_unit_dispatched(run *r, int64_t unit, int worker);

/* Step 6 (rank 0): closes the output "failed" (srun < 0), "interrupted" (srun == 1) or
 * "finished", recording the signal that stopped it (0: none) for /provenance; returns the
 * run_outcome (failed_units > 0: RUN_CELLS_FAILED), or -1. */
int run_close(run *r, int srun, size_t failed_units, int signo, run_summary *sum, as_err *err);

/* The cell worker's time split into the rank's totals (once per worker). */
void run_add_worker_timings(run *r);
/* ATTNSWEEP_TIMINGS=1: completes this rank's row (the last model's worker, the process's
 * CPU time) and returns 1, and the launcher brings every row to rank 0; 0: no table. */
int run_timings_row(run *r);
/* Rank 0: the table, from every rank's timing rows (all: [size][TM_N]). */
void run_print_timings(const run *r, const double *all, int size, const run_sched_totals *t);

#endif
