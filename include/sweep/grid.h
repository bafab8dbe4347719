/* grid.h -- the cells of a sweep, their order and their cost.
 *
 * A cell is one (window, L) pair: one forward pass and every N, T, eps,
 * normalizer, layer and head of that pass (docs/results.md). Cells are numbered
 * window-major, cell = window * n_L + l_index, so growing windows.count
 * appends cells and keeps every old index. Growing grid.L inserts values into
 * the sorted L axis and shifts l_index: a store must key cells by
 * (window, L value) -- grid_cell_find() maps them back.
 *
 * Dispatch order: largest L first (longest cells first balances the tail of
 * a run), then window ascending.
 *
 * The cost of the cells (time, memory, disk) is include/sweep/plan.h's; the grid
 * carries the constants of its cost model (below) so a measurement can replace them. */
#ifndef ATTNSWEEP_GRID_H
#define ATTNSWEEP_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "cellresult.h"
#include "config.h"
#include "errors.h"

typedef struct {
    double sgemm_gflops;  /* forward pass FLOP rate per BLAS thread (sgemm alone: ~100) */
    double thread_scale;  /* speedup of each extra BLAS thread (0.95: 190-205 on two) */
    double metric_ns;     /* nanoseconds per metric inner-loop step (see AS_COST_METRIC_NS) */
    double row_ops;       /* the per-key work per (T, normalizer) not tied to N or eps */
} as_cost_model;

/* Fitted on tests/bench/bench_paper.sh runs of the paper's grid, CPU seconds
 * (docs/performance.md, "`attnsweep plan` against measured runs"): the forward pass ran at
 * 110 GFLOP/s (GPT-2 small, 193 GFLOP in 1.75 s) and 114 (gpt2-medium, 670 GFLOP
 * in 5.86 s); the metrics took 0.751 ns per step (small, 36 heads: 17.4 s) and
 * 0.760 (medium, all 384 heads: 188.1 s). Later kernel changes took the same paper
 * run's metrics from 69.1 to 66.1 CPU s per window (x 0.957): 0.73. Costing the walk
 * over N by its largest N (plan.h, AS_COST_WALK_STEP) counts 1.258x more steps in the
 * paper's window than the formula those were fitted with, so the same measured runs
 * give 0.73 / 1.258 = 0.58 per step. Re-measured on an idle core after the kernels' later
 * changes (docs/performance.md, "`attnsweep plan` against measured runs"): five runs
 * (quick start, paper and critical-N grids of the trained test model, the paper grid and the
 * full cross product of GPT-2 small) took 2.13-2.96x the metrics that rate planned; their
 * geometric mean 2.49 gives 1.44 ns, which puts all five within 0.86-1.19x. */
#define AS_COST_SGEMM_GFLOPS 110.0
#define AS_COST_THREAD_SCALE 0.95
#define AS_COST_METRIC_NS 1.44
#define AS_COST_ROW_OPS 8.0

typedef struct {
    const as_config *cfg;   /* not owned; must outlive the grid */
    size_t n_windows, n_L, n_cells;
    int64_t *window_start;  /* [n_windows] first token of each window */
    size_t *dispatch;       /* [n_cells] cell indices, largest L first, then window */
    as_cost_model cost;
    /* The model axis: the cells above are one model's; every model has the same cells
     * (the sweep runs them model after model). The cost functions use `model`
     * (grid_set_model; model 0 after grid_init); memory is the largest model's. */
    size_t n_models;
    const gpt2_config *model;
} as_grid;

/* The cost functions (plan.h) then estimate model m of the config's model axis. */
void grid_set_model(as_grid *g, size_t m);

int grid_init(as_grid *g, const as_config *cfg, as_err *err);
void grid_free(as_grid *g);

static inline size_t grid_cell_index(const as_grid *g, size_t window, size_t l_index) {
    return window * g->n_L + l_index;
}
static inline void grid_cell_of(const as_grid *g, size_t cell, size_t *window, size_t *l_index) {
    *window = cell / g->n_L;
    *l_index = cell % g->n_L;
}
/* The cell of (window, L value), or -1 when the window or L is not in the grid. */
long grid_cell_find(const as_grid *g, size_t window, int32_t L);

/* One cell's block layout for cfg (cellresult.h): the union axes of every model, with the
 * sampled variables when metrics.query_rows = "sample:K" (docs/metrics.md 9.1). The run's
 * blocks and the plan's sizes both come from it. */
void grid_block_layout(cr_layout *lay, const as_config *cfg);

/* The unit of work: the pending L values of one window of one model, computed from one
 * forward pass (cell.h). l_mask bit k stands for L index l_lo + k; a window with more
 * than GRID_UNIT_MAX_CUTS L values gets one unit per GRID_UNIT_MAX_CUTS of them. The run
 * (run.h) builds the units, the plan (plan.h) counts them. */
#define GRID_UNIT_MAX_CUTS 64
typedef struct {
    int64_t model;   /* index into the config's model axis */
    int64_t window;
    int64_t l_lo;
    uint64_t l_mask;
} grid_unit;

/* Cells of the largest unit (the blocks of a unit buffer), and units per window. */
static inline size_t grid_unit_cells(const as_grid *g) {
    return g->n_L < GRID_UNIT_MAX_CUTS ? g->n_L : GRID_UNIT_MAX_CUTS;
}
static inline size_t grid_units_per_window(const as_grid *g) {
    return (g->n_L + GRID_UNIT_MAX_CUTS - 1) / GRID_UNIT_MAX_CUTS;
}

#endif
