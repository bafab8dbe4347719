/* sweep_int.h -- what the files of `attnsweep run` share (not a public header): the unit of
 * dispatch, the run's state, and opening the output (sweep_store.c). */
#ifndef AS_MPI_SWEEP_INT_H
#define AS_MPI_SWEEP_INT_H

#include <mpi.h>
#include <stdint.h>

#include "cell.h"
#include "config.h"
#include "grid.h"
#include "store.h"
#include "sweep.h"
#include "weights.h"

/* The unit of dispatch: the pending L values of one window, computed from
 * one forward pass (cell.h). l_mask bit k stands for L index l_lo + k; a
 * window with more than UNIT_MAX_CUTS L values gets one unit per 64 of them. */
enum { UNIT_MAX_CUTS = CELL_MAX_CUTS };
typedef struct {
    int64_t model;   /* index into the config's model axis */
    int64_t window;
    int64_t l_lo;
    uint64_t l_mask;
} sweep_unit;

/* Seconds and counts for ATTNSWEEP_TIMINGS (one row per rank). */
enum { TM_RUN, TM_LOAD, TM_SCHED, TM_COMPUTE, TM_FORWARD, TM_METRICS, TM_KS, TM_CPU, TM_COMMIT,
       TM_COMMIT_CELLS, TM_UNITS, TM_FORWARD_CPU, TM_METRICS_CPU, TM_COMMIT_CPU, TM_DEFLATE,
       TM_DEFLATE_IN, TM_DEFLATE_OUT, TM_N };

typedef struct {
    as_config cfg;
    as_grid grid;
    int cfg_ok, grid_ok;
    int32_t *tokens;
    int64_t n_tokens;
    node_weights w;              /* the model being computed (w.index), one copy per node */
    char (*model_sha)[65];       /* rank 0: [n_model] sha256 of each model.safetensors */
    cell_worker worker;
    int worker_ok;
    store *out;
    char out_path[4096];         /* the config's output, or this shard's */
    int rank, size;
    /* the units every rank knows (rank 0 builds them, then broadcasts) */
    sweep_unit *units;           /* model-major: every unit of model 0, then model 1, ... */
    size_t n_units, unit_cells;  /* unit_cells: blocks per unit buffer */
    size_t *model_units;         /* [n_model + 1]: model m's units are [model_units[m], model_units[m + 1]) */
    size_t slot_doubles;         /* one cell in a unit's message (see compute_unit) */
    double *scratch;             /* worker: the unit's blocks of doubles before packing */
    int deflate;                 /* the output stores compressed chunks: workers deflate their
                                  * cells (store_deflate_cell), the master stores them as sent;
                                  * 2: with the chunks' Fletcher32 checksums (store_checksummed) */
    unsigned char *pack_buf, *dz_scratch; /* worker, deflating: one cell packed; shuffle buffer */
    size_t cells_done, cells_failed; /* committed, counted in cells (rank 0) */
    /* rank 0: sha256 of the inputs as read (the text's bytes, its tokenizer files) */
    char text_sha[65], vocab_sha[65], merges_sha[65];
    char vocab_name[32], merges_name[32]; /* the tokenizer's two files: vocab.json merges.txt, or tokenizer.json tokenizer_config.json */
    char tok_files[1024];                 /* textsrc's tokenizer_files: the provenance line */
    size_t units_done, units_failed; /* the same in units (windows) */
    double timing[TM_N];
} sweep_state;

/* sweep_store.c: rank 0 opens (or creates) the output with every check that protects results
 * already written -- the config's changes, the inputs' hashes, the disk's free space -- and
 * the other ranks learn the outcome. */
int sweep_open_store(sweep_state *st, MPI_Comm comm, const sweep_opts *opts, as_err *err);

/* Rank 0, a shard: the cells the config's own output (next to the shard) holds done,
 * [n_model * n_cells], when that output exists with this run's config (its journal is the
 * truth); NULL otherwise (no output, another config, or unreadable: then nothing is
 * skipped). *held counts them. */
unsigned char *sweep_existing_done(const sweep_state *st, const sweep_opts *opts, size_t *held);

#endif
