/* plan.h -- what a sweep would cost, as data: the cost model of a grid's cells, and
 * the plan `attnsweep plan` prints (and prints as key=value lines with --porcelain).
 *
 * Cost model. The unit of work is a window (cell.h): one forward pass at the
 * grid's largest L serves every L of the window (prefix cuts), and the metrics
 * run once per cut. On one rank with blas_threads threads (seconds):
 *   window   = forward(L_max) + sum over the grid's L of metrics(L)
 *   forward(L) = (2 * P_blocks * L + 2 * n_blocks * L^2 * C) / (sgemm_gflops * 1e9 * speedup)
 *              P_blocks = parameters of the blocks run (no wte/wpe: the embedding is
 *              a lookup; no LM head); GPT-2 small at L = 1024: 174 + 19 = 193 GFLOP.
 *              sgemm_gflops is the forward pass's effective rate, not sgemm's peak.
 *   metrics(L) = metric_ns * 1e-9 * heads * sum over the rows n = 1..L of
 *                n * (d + n_T * n_norm * (n_eps + row_ops + #{grid N < n} + walk_step * min(N_max, n - 1)))
 *              / speedup
 *              heads = measured (layer, head) pairs; a row of n visible keys costs per key:
 *              d = d_head (or n_embd for vectors = "resid") for the Gram row; per
 *              (T, normalizer) one grad_fd per eps, row_ops for softmax, entropy and
 *              grad_exact, one evaluation per grid N the row has (N < n: docs/metrics.md 4.4
 *              and 6), and the walk of docs/metrics.md 4.4 itself: it adds one key per step
 *              up to the largest grid N (N_max), whatever the grid N between, at
 *              walk_step (AS_COST_WALK_STEP) of an evaluation per step. So a grid of few N
 *              up to a large N_max (a critical-N grid) costs by N_max's size, not by its count.
 *   speedup = 1 + (threads - 1) * thread_scale (metrics: threads = min(blas_threads, heads)).
 * The switches of the metrics group (docs/performance.md): the per-N terms (the
 * evaluations, the walk and AS_COST_WALK_OPS of row_ops: separability's and
 * dist_expect's per-key work) are paid only at the n_W temperatures metrics.per_N_T
 * names; metrics.grad_exact = false takes AS_COST_GRAD_EXACT_OPS off every softmax T,
 * metrics.dist_expect = false AS_COST_DIST_EXPECT_OPS off every walked T
 * (grid_metric_seconds). With every switch at its default this is the formula above.
 * Fitted on measured runs of the paper's grid (docs/performance.md, "`attnsweep plan`
 * against measured runs"): GPT-2 small and gpt2-medium (every GPT-2 size has
 * d_head = 64, so the metrics scale with the head count alone). A cell's own cost (grid_cell_cost: a pass at its L plus
 * its metrics) orders the dispatch; plan reports windows.
 * The constants are in as_cost_model (defaults below) so a measurement can
 * replace them (`attnsweep plan --sgemm-gflops X --metric-ns Y`). */
#ifndef ATTNSWEEP_PLAN_H
#define ATTNSWEEP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "grid.h"

/* The walk's cost per step and key, in evaluations of one grid N (metrics(L) above):
 * fitted on met_head CPU times at L = 1024, d = 64, 22 T, 3 eps, softmax, over six N
 * axes (1..128 in 28 steps as the paper, 1..128, {128}, powers of 2 to 512, {512}, the
 * quick start's 7 N): every one predicted within 18 % (docs/performance.md). */
#define AS_COST_WALK_STEP 0.087

/* Fitted on bench_metrics --paper (L = 1024, 2 heads, one core, docs/performance.md): with
 * --per-n-T8 a head took 0.2705 of the full grid's CPU time, which the split above gives for
 * walk_ops = 4 (of row_ops = 8); --no-grad-exact took 0.035 s of the 0.247 s per head over
 * 22 T: 1.6 steps per T. dist_expect's share is taken from the fixed cost's profile (its S and
 * e were ~24 % of a minimal head): 3 of the walk's 4. Both are rough: the model is fitted on
 * the paper grid, where the walk over N dominates; on a minimal grid it underestimates what
 * the switches save (bench_metrics --minimal: 1.9x with both off, the model ~1.06x). */
#define AS_COST_WALK_OPS 4.0
/* metrics.query_rows = "sample:K": a head's cost that does not shrink with the rows (the
 * Gram matrix, delta, the transposes), as a share of the d term above: fitted on
 * tests/bench/bench_long_context.sh (the fixed part of sample:64 and sample:256 at L = 1024
 * to 4096 was 0.24-0.43 of it; docs/performance.md "Long contexts"). */
#define AS_COST_FIXED_SHARE 0.35
#define AS_COST_GRAD_EXACT_OPS 1.6
#define AS_COST_DIST_EXPECT_OPS 3.0

/* How much smaller a compressed output's cells are than plain ones, for the disk space
 * and the write bandwidth alike: the least any cells measured have compressed
 * (synthetic random weights 1.48x; real paper cells 1.9-2.4x). Values decide the real
 * ratio, so the disk and bandwidth lines are estimates that err on the safe side. */
#define PLAN_DEFLATE_RATIO 1.4

/* PSS of one rank's process besides the buffers grid_rank_memory counts (code,
 * libraries, Open MPI's own buffers): measured ~12 MB per rank. */
#define AS_MEM_PROCESS_BYTES ((size_t)12 << 20)

as_cost_model grid_cost_model_default(void);

/* Estimated seconds of one cell at context length L (model above), and its
 * two parts; FLOPs of the forward pass; one window (the unit of work). */
double grid_forward_flops(const as_config *cfg, size_t L);
double grid_forward_seconds(const as_grid *g, size_t L);
/* Inner-loop steps of the metrics term for `heads` heads at length L (the
 * formula above without metric_ns); tests/bench/bench_plan_cost.c divides a
 * measured met_head time by it to re-measure metric_ns. */
double grid_metric_steps(size_t L, size_t heads, size_t d, const int32_t *N, size_t n_N, size_t n_T,
                         size_t n_norm, size_t n_eps, double row_ops);
double grid_metric_seconds(const as_grid *g, size_t L);
double grid_cell_cost(const as_grid *g, size_t cell);
double grid_window_cost(const as_grid *g);

/* Memory (bytes; what /proc/PID/smaps_rollup's PSS sums to over the ranks of a
 * node). The weights exist once per node (an MPI-3 shared window, src/mpi/weights.c).
 * A worker holds the activation arena fwd_workspace_bytes(max L), one metrics
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

/* The memory a run must fit in, bytes (docs/performance.md "Long contexts"): given > 0
 * (--mem of plan and run), else SLURM_MEM_PER_NODE (MB, what sbatch --mem sets), else
 * MemTotal of /proc/meminfo (MemAvailable moves with the other processes: a run is refused
 * only where it clearly cannot fit); 0 when none is known (nothing is then refused).
 * *source names which ("--mem", "SLURM_MEM_PER_NODE", "MemTotal"). */
double plan_memory_limit(double given, const char **source);
/* The /proc/meminfo line `key` ("MemTotal", "MemAvailable") in bytes; 0 when unknown. */
double plan_meminfo(const char *key);
/* 0 when `ranks` ranks on one node (grid_node_memory) fit limit (0: unknown, fits), else -1
 * with one line: what a node needs at the grid's largest L, a worker's share, the limit. */
int plan_memory_check(const as_grid *g, size_t ranks, double limit, const char *source, as_err *err);
/* "4G", "512M", "1.5GiB", "2048" (bytes) -> bytes (binary units, K M G T); -1 if malformed. */
double plan_parse_bytes(const char *s);

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
 * counted at PLAN_DEFLATE_RATIO. */
#define GRID_DISK_SLACK (256.0 * 1024)
double grid_disk_bytes(const as_grid *g, int compressed);

/* An output larger than this makes `attnsweep plan` warn (a typo in
 * windows.count or an axis is the usual cause). */
#define GRID_SANE_DISK_BYTES (10.0 * 1024 * 1024 * 1024 * 1024)

/* --- the plan: everything `attnsweep plan` reports, computed, no printing --- */

/* The rank counts the plan always shows (2, 8 and 32 ranks), before --ranks P. */
#define PLAN_RANK_ROWS 3
/* The node totals shown for 1, 2, 4, 8 and 16 ranks, before --ranks P. */
#define PLAN_NODE_ROWS 5

typedef struct {
    double forward_s;  /* the forward pass at the largest L */
    double metrics_s;  /* the metrics of every L */
    double window_s;   /* one window: forward_s + metrics_s */
} plan_model_time;

typedef struct {
    size_t ranks, workers;
    double seconds;    /* wall time: rounds of windows per model, summed over the models */
} plan_rounds;

typedef struct {
    const as_grid *grid;     /* not owned (its cost model is the plan's) */
    size_t n_models, n_windows, n_L, n_cells; /* n_cells: every model's */
    size_t L_max;
    plan_model_time *model;  /* [n_models] */
    double total_s;          /* rank seconds of every window of every model */
    double window_s;         /* the mean window (the rank estimates use it) */
    /* an existing output (plan_opts.done given): what is left of it */
    int have_progress;
    size_t windows_done, windows_left, cells_left;
    double to_go_s;          /* rank seconds of the cells not done: an extension costs its new
                              * cells only (per window a pass at its largest pending L) */
    plan_rounds rounds[PLAN_RANK_ROWS + 1]; /* 2, 8, 32 ranks, then --ranks P */
    size_t n_rounds;
    as_rank_memory mem;
    size_t node_ranks[PLAN_NODE_ROWS + 1], node_bytes[PLAN_NODE_ROWS + 1]; /* then --ranks P */
    size_t n_node;
    double output_bytes, cell_bytes; /* the results file; one cell of it */
    double disk_bytes, free_bytes;   /* file + journal; free where it goes (-1: unknown) */
    double deflate_ratio;            /* PLAN_DEFLATE_RATIO when compressed, else 1 */
    double write_per_window, write_rate; /* bytes written per window; per second by write_workers */
    size_t write_workers;            /* --ranks P - 1, else 2000 (a large cluster) */
    /* warnings (plan's stderr lines) */
    int disk_short;          /* the output and journal exceed the free space */
    int disk_huge;           /* ... exceed GRID_SANE_DISK_BYTES */
    int too_long;            /* over a year even on 64 ranks */
    double wall64_s;
} as_plan;

typedef struct {
    size_t ranks;            /* --ranks P (0: none) */
    /* An existing output's cells, [n_models * n_cells] (model * n_cells + grid_cell_index):
     * nonzero = done. NULL: no output (or no readable journal). */
    const unsigned char *done;
} plan_opts;

/* The plan of g (with its cost model as set) into p; -1 with err when out of memory.
 * g's model is left at 0. */
int plan_compute(as_plan *p, as_grid *g, const plan_opts *o, as_err *err);
void plan_free(as_plan *p);

#endif
