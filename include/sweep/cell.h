/* cell.h -- one cell of the sweep: a text window's forward pass and every
 * metric of it, written into the flat result block of cellresult.h.
 *
 * A cell is (window, L). Because GPT-2 is causal, the rows t < L' of a pass at
 * L are the rows of a pass at L' < L (docs/metrics.md section 9), so one call may
 * serve several context lengths of the same window: cell_compute() runs the
 * forward pass once at the largest cut and the metrics module takes the means
 * for each cut. With one cut it is exactly "one cell".
 *
 * Per captured layer the forward pass calls back (forward.h); each measured head
 * goes through met_head() (metrics.h), whose per-head means are scattered into
 * the block at [.., layer index, head index]. After the last layer the
 * cross-head KS test and critical N (docs/metrics.md section 5) fill ks_* and
 * crit_N. Knows gpt2 + metrics + the grid's axes; nothing of MPI or HDF5.
 *
 * Model axis: the grid's layers and heads are the union over the sweep's models. A
 * (layer, head) the worker's model does not have is not computed: its values stay NaN
 * (the block's fill), and the KS test and crit_N use the model's own heads only, in
 * grid order -- so a model's cells equal those of a single-model run bit for bit.
 *
 * Logits: the metrics see the forward pass's raw scores q.k, or with
 * metrics.logits = "scaled" those scores divided by sqrt(d_head) in float32
 * (as GPT-2 and PyTorch form them), copied into a per-thread buffer.
 *
 * Threads: runtime.blas_threads is the number of threads per rank, for
 * OpenBLAS's sgemm and for the metrics: the heads of a layer are dealt to
 * that many threads (head ih to thread ih % threads), each with its own
 * metrics workspace. A head's values do not depend on the thread that
 * computes it, so results are the same bit for bit with any thread count.
 *
 * Memory: cell_worker_new() allocates everything once (the forward pass's
 * activation arena for the largest L of the grid, one metrics workspace and
 * per-head output per thread); cell_compute() allocates nothing (besides
 * starting threads-1 threads per measured layer). */
#ifndef ATTNSWEEP_CELL_H
#define ATTNSWEEP_CELL_H

#include <stddef.h>
#include <stdint.h>

#include "cellresult.h"
#include "config.h"
#include "errors.h"
#include "forward.h"
#include "grid.h"
#include "metrics.h"
#include "model.h"

#define CELL_MAX_CUTS GRID_UNIT_MAX_CUTS /* a unit's cuts share one pass */
#define CELL_MAX_THREADS 256

struct cell_worker;

/* What a cell needs of the sweep config: the grid's axes and the options of the metrics
 * (docs/metrics.md section 1). cell_spec_of() takes them from a validated config. */
typedef struct {
    const as_axes *axes;   /* not owned: must outlive the worker */
    as_vectors vectors;
    as_rows rows;
    as_logits logits;
    as_distance distance;
    double ssmax_scale;    /* resolved, never 0 */
    double entmax_alpha;   /* docs/metrics.md section 10.1 */
    int sigmoid_bias_set;
    double sigmoid_bias;
    int64_t seed;
    double ks_alpha;
    int threads;           /* metric threads per rank (runtime.blas_threads) */
    unsigned skip;         /* MET_SKIP_* (metrics.grad_exact, metrics.dist_expect = false) */
    uint32_t random_subsets; /* metrics.dist_random: K subsets per row, 0 when off */
    int ks_random;         /* metrics.ks_against = "random": KS and crit_N against dist_random */
    size_t sample_rows;    /* metrics.query_rows: 0 all, K "sample:K" (met_axes.sample_rows) */
} cell_spec;

cell_spec cell_spec_of(const as_config *cfg);
/* The same for model m of the config's model axis (its own resolved ssmax_scale). */
cell_spec cell_spec_of_model(const as_config *cfg, size_t m);

/* The worker: the forward pass's workspace, one metrics lane per thread (its workspace
 * and per-head output), the KS samples, the cuts and blocks of the call in progress.
 * Opaque: cell.c owns it. */
typedef struct cell_worker cell_worker;

/* Seconds spent, summed over calls (for timing summaries): the forward pass without the
 * metrics, the per-head metrics (met_head and the scatter into the blocks), the
 * cross-head KS tests; the same in CPU time (every thread's); forward passes run. */
typedef struct {
    double forward_s, metrics_s, ks_s;
    double forward_cpu_s, metrics_cpu_s;
    size_t passes;
} cell_timings;

/* Plans and allocates for the largest L of the spec's grid; NULL with err set when out of
 * memory. rank is recorded in the blocks' `rank`. pass_L: 0 runs the forward pass at the
 * largest cut; else always at this length (>= every cut), so a cut's result never depends
 * on which other cuts share its pass (a resumed run then equals an uninterrupted one bit
 * for bit, however the cuts were grouped). should_stop (may be NULL) is asked between
 * layers; nonzero abandons the cell (a stop was requested and its result would be thrown
 * away). The model and spec->axes must outlive the worker. */
cell_worker *cell_worker_new(const gpt2_model *model, const cell_spec *spec, int rank, size_t pass_L,
                             int (*should_stop)(void), as_err *err);
void cell_worker_free(cell_worker *w); /* NULL is fine */
/* The block layout of the spec's axes (cellresult.h): layout->total doubles per block. */
const cr_layout *cell_worker_layout(const cell_worker *w);
/* The timings summed since the last call, and zeroed. */
cell_timings cell_worker_take_timings(cell_worker *w);

/* Computes window `window` (tokens: at least max(cuts[ncuts-1], pass_L) ids) at each
 * context length cuts[0] < cuts[1] < ... (ncuts <= CELL_MAX_CUTS), writing the
 * block of cut c into blocks[c] (layout.total doubles each). */
int cell_compute(cell_worker *w, int64_t window, const int32_t *tokens, const size_t *cuts,
                 size_t ncuts, double *const *blocks, as_err *err);

#endif
