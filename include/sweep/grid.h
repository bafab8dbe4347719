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
 * Cost model. The unit of work is a window (cell.h): one forward pass at the
 * grid's largest L serves every L of the window (prefix cuts), and the metrics
 * run once per cut. On one rank with blas_threads threads (seconds):
 *   window   = forward(L_max) + sum over the grid's L of metrics(L)
 *   forward(L) = (2 * P_blocks * L + 2 * n_blocks * L^2 * C) / (sgemm_gflops * 1e9 * speedup)
 *              P_blocks = parameters of the blocks run (no wte/wpe: the embedding is
 *              a lookup; no LM head); GPT-2 small at L = 1024: 174 + 19 = 193 GFLOP.
 *              sgemm_gflops is the forward pass's effective rate, not sgemm's peak.
 *   metrics(L) = metric_ns * 1e-9 * heads * (L^2 / 2) * (d + n_T * n_norm * (n_N + n_eps + row_ops))
 *              / speedup
 *              heads = measured (layer, head) pairs; L^2/2 = the visible keys of all rows;
 *              d = d_head (or n_embd for vectors = "resid") for the Gram row; per
 *              (T, normalizer) the N walk of docs/metrics.md 4.4, one grad_fd per eps and row_ops for softmax,
 *              entropy, grad_exact and separability.
 *   speedup = 1 + (threads - 1) * thread_scale (metrics: threads = min(blas_threads, heads)).
 * The switches of the metrics group (docs/performance.md): with the per-N family at n_W of
 * the n_T temperatures (metrics.per_N_T), row_ops splits into AS_COST_WALK_OPS per walked T
 * (separability's and dist_expect's per-key work) and the rest per T, so per (normalizer)
 *   n_W * (n_N + walk_ops) + n_T * (n_eps + row_ops - walk_ops)
 * (= the formula above when n_W = n_T); metrics.grad_exact = false takes
 * AS_COST_GRAD_EXACT_OPS off every softmax T, metrics.dist_expect = false
 * AS_COST_DIST_EXPECT_OPS off every walked T (grid_metric_seconds).
 * Fitted on measured runs of the paper's grid (README, Performance): GPT-2 small
 * and gpt2-medium (every GPT-2 size has d_head = 64, so the metrics scale with
 * the head count alone). A cell's own cost (grid_cell_cost: a pass at its L plus
 * its metrics) orders the dispatch; plan reports windows.
 * The constants are in as_cost_model (defaults below) so a measurement can
 * replace them (`attnsweep plan --sgemm-gflops X --metric-ns Y`). */
#ifndef ATTNSWEEP_GRID_H
#define ATTNSWEEP_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "errors.h"

typedef struct {
    double sgemm_gflops;  /* forward pass FLOP rate per BLAS thread (sgemm alone: ~100) */
    double thread_scale;  /* speedup of each extra BLAS thread (0.95: 190-205 on two) */
    double metric_ns;     /* nanoseconds per metric inner-loop step (see AS_COST_METRIC_NS) */
    double row_ops;       /* the per-key work per (T, normalizer) not tied to N or eps */
} as_cost_model;

/* Fitted on tests/bench/bench_paper.sh runs of the paper's grid, CPU seconds
 * (README, Performance, "plan against measured runs"): the forward pass ran at
 * 110 GFLOP/s (GPT-2 small, 193 GFLOP in 1.75 s) and 114 (gpt2-medium, 670 GFLOP
 * in 5.86 s); the metrics took 0.751 ns per step (small, 36 heads: 17.4 s) and
 * 0.760 (medium, all 384 heads: 188.1 s). Issue 14's kernel changes took the same paper
 * run's metrics from 69.1 to 66.1 CPU s per window (x 0.957): 0.73. */
#define AS_COST_SGEMM_GFLOPS 110.0
#define AS_COST_THREAD_SCALE 0.95
#define AS_COST_METRIC_NS 0.73
#define AS_COST_ROW_OPS 8.0
/* Fitted on bench_metrics --paper (L = 1024, 2 heads, one core, docs/performance.md): with
 * --per-n-T8 a head took 0.2705 of the full grid's CPU time, which the split above gives for
 * walk_ops = 4 (of row_ops = 8); --no-grad-exact took 0.035 s of the 0.247 s per head over
 * 22 T: 1.6 steps per T. dist_expect's share is taken from the fixed cost's profile (its S and
 * e were ~24 % of a minimal head): 3 of the walk's 4. Both are rough: the model is fitted on
 * the paper grid, where the walk over N dominates; on a minimal grid it underestimates what
 * the switches save (bench_metrics --minimal: 1.9x with both off, the model ~1.06x). */
#define AS_COST_WALK_OPS 4.0
#define AS_COST_GRAD_EXACT_OPS 1.6
#define AS_COST_DIST_EXPECT_OPS 3.0
/* PSS of one rank's process besides the buffers grid_rank_memory counts (code,
 * libraries, Open MPI's own buffers): measured ~12 MB per rank. */
#define AS_MEM_PROCESS_BYTES ((size_t)12 << 20)

as_cost_model grid_cost_model_default(void);

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

/* The cost functions below then estimate model m of the config's model axis. */
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

/* Estimated seconds of one cell at context length L (model above), and its
 * two parts; FLOPs of the forward pass; one window (the unit of work). */
double grid_forward_flops(const as_config *cfg, size_t L);
double grid_forward_seconds(const as_grid *g, size_t L);
/* Inner-loop steps of the metrics term for `heads` heads at length L (the
 * formula above without metric_ns); tests/bench/bench_plan_cost.c divides a
 * measured met_head time by it to re-measure metric_ns. */
double grid_metric_steps(size_t L, size_t heads, size_t d, size_t n_N, size_t n_T, size_t n_norm,
                         size_t n_eps, double row_ops);
double grid_metric_seconds(const as_grid *g, size_t L);
double grid_cell_cost(const as_grid *g, size_t cell);
double grid_window_cost(const as_grid *g);

/* Memory (bytes; what /proc/PID/smaps_rollup's PSS sums to over the ranks of a
 * node). The weights exist once per node (an MPI-3 shared window, sweep.c).
 * A worker holds the activation arena gpt2_workspace_bytes(max L), one metrics
 * workspace met_workspace_bytes(max L) plus one head's means per L cut for each
 * metrics thread, and two unit buffers of n_L cell result blocks (it fills one
 * while the other is sent; with one unit to compute it touches one), plus the
 * process itself (libraries, MPI, the token ids). The master holds the process
 * and the unit buffers it receives into (commit_every cells' worth, at least
 * one unit, plus one). With one rank, that rank computes alone.
 * grid_node_memory(ranks): weights + master + (ranks - 1) * worker.
 * With several models each buffer is the largest model's (one model is resident at a time). */
typedef struct {
    size_t weights, activations, metrics, cell_block, unit_block;
    size_t worker;  /* one worker rank, both unit buffers touched */
    size_t master;  /* rank 0 with every receive buffer touched */
    size_t total;   /* weights + worker: one rank's view, as before */
} as_rank_memory;
void grid_rank_memory(as_rank_memory *m, const as_grid *g);
/* Sum of PSS over `ranks` ranks on one node (all of the sweep's ranks). */
size_t grid_node_memory(const as_grid *g, size_t ranks);

/* Doubles in one cell's result block (cr_layout_init over the axes). */
size_t grid_block_doubles(const as_config *cfg);

/* Bytes of the results file for all cells of every model: the metric variables as float32
 * (ks_stat/ks_pvalue float64, rows_used/crit_N int32), the per-cell
 * bookkeeping (status u8, attempts i32, rank i32, wall_time f64), and the axes.
 * Excludes HDF5 metadata and provenance. */
double grid_output_bytes(const as_grid *g);

/* Disk space a complete sweep takes: the results file (grid_output_bytes)
 * and its journal, which holds the same packed values again until it is
 * compacted, plus GRID_DISK_SLACK for HDF5 metadata, provenance and dispatch
 * records. compressed (runtime.compress): both copies as deflated chunks,
 * counted at GRID_DEFLATE_MIN_RATIO, the least any cells measured have
 * compressed (synthetic random weights 1.48x; real paper cells 1.9-2.4x):
 * values decide the real ratio, so this is an estimate, not a bound. */
#define GRID_DISK_SLACK (256.0 * 1024)
#define GRID_DEFLATE_MIN_RATIO 1.4
double grid_disk_bytes(const as_grid *g, int compressed);

/* An output larger than this makes `attnsweep plan` warn (a typo in
 * windows.count or an axis is the usual cause). */
#define GRID_SANE_DISK_BYTES (10.0 * 1024 * 1024 * 1024 * 1024)

#endif
