/* grid.c -- see grid.h. */
#include "grid.h"

#include <stdlib.h>
#include <string.h>

#include "cell.h"
#include "cellresult.h"
#include "gpt2.h"
#include "metrics.h"

as_cost_model grid_cost_model_default(void) {
    as_cost_model m = {AS_COST_SGEMM_GFLOPS, AS_COST_THREAD_SCALE, AS_COST_METRIC_NS,
                       AS_COST_ROW_OPS};
    return m;
}

/* qsort has no context argument: the L axis of the grid being sorted. */
static const as_grid *sorting_grid;

static int by_dispatch_order(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb, wa, la, wb, lb;
    grid_cell_of(sorting_grid, a, &wa, &la);
    grid_cell_of(sorting_grid, b, &wb, &lb);
    if (la != lb) return la > lb ? -1 : 1; /* L is sorted ascending: larger index = larger L */
    return (wa > wb) - (wa < wb);
}

int grid_init(as_grid *g, const as_config *cfg, as_err *err) {
    memset(g, 0, sizeof *g);
    g->cfg = cfg;
    g->n_windows = (size_t)cfg->windows_count;
    g->n_L = cfg->axes.n_L;
    g->n_cells = g->n_windows * g->n_L;
    g->n_models = cfg->n_model ? cfg->n_model : 1;
    g->model = cfg->models ? &cfg->models[0].cfg : &cfg->model;
    g->cost = grid_cost_model_default();
    g->window_start = malloc(g->n_windows * sizeof *g->window_start);
    g->dispatch = malloc(g->n_cells * sizeof *g->dispatch);
    if (!g->window_start || !g->dispatch) {
        size_t cells = g->n_cells; /* grid_free clears g */
        grid_free(g);
        return as_fail(err, "windows.count: %lld windows x %zu L values = %zu cells do not fit in "
                       "memory", (long long)cfg->windows_count, cfg->axes.n_L, cells);
    }
    for (size_t w = 0; w < g->n_windows; w++)
        g->window_start[w] = config_window_start(cfg, (int64_t)w);
    for (size_t c = 0; c < g->n_cells; c++) g->dispatch[c] = c;
    sorting_grid = g;
    qsort(g->dispatch, g->n_cells, sizeof *g->dispatch, by_dispatch_order);
    sorting_grid = NULL;
    return 0;
}

void grid_free(as_grid *g) {
    if (!g) return;
    free(g->window_start);
    free(g->dispatch);
    memset(g, 0, sizeof *g);
}

long grid_cell_find(const as_grid *g, size_t window, int32_t L) {
    if (window >= g->n_windows) return -1;
    const int32_t *ax = g->cfg->axes.L;
    size_t lo = 0, hi = g->n_L;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ax[mid] < L) lo = mid + 1;
        else hi = mid;
    }
    if (lo == g->n_L || ax[lo] != L) return -1;
    return (long)grid_cell_index(g, window, lo);
}

void grid_set_model(as_grid *g, size_t m) {
    g->model = g->cfg->models && m < g->cfg->n_model ? &g->cfg->models[m].cfg : &g->cfg->model;
}

/* Blocks the forward pass runs: up to the deepest measured layer the model has (gpt2.h). */
static size_t blocks_run(const as_config *cfg, const gpt2_config *m) {
    size_t deepest = (size_t)cfg->axes.layer[cfg->axes.n_layer - 1] + 1;
    return deepest < m->n_layer ? deepest : m->n_layer;
}

/* Measured (layer, head) pairs model m has (the grid's axes are the union over models). */
static size_t heads_of(const as_config *cfg, const gpt2_config *m) {
    size_t nl = 0, nh = 0;
    for (size_t i = 0; i < cfg->axes.n_layer; i++) nl += (size_t)cfg->axes.layer[i] < m->n_layer;
    for (size_t i = 0; i < cfg->axes.n_head; i++) nh += (size_t)cfg->axes.head[i] < m->n_head;
    return nl * nh;
}

static double flops_of(const as_config *cfg, const gpt2_config *m, size_t L) {
    double C = (double)m->n_embd, Ld = (double)L, nb = (double)blocks_run(cfg, m);
    /* per block: ln_1, c_attn (C x 3C), attn c_proj (C x C), ln_2, c_fc (C x 4C), mlp c_proj */
    double block_params = 12.0 * C * C + 13.0 * C;
    return 2.0 * block_params * nb * Ld + 2.0 * nb * Ld * Ld * C;
}

double grid_forward_flops(const as_config *cfg, size_t L) {
    return flops_of(cfg, cfg->models ? &cfg->models[0].cfg : &cfg->model, L);
}

static double speedup(const as_grid *g, double threads) {
    return 1.0 + (threads - 1.0) * g->cost.thread_scale;
}

double grid_forward_seconds(const as_grid *g, size_t L) {
    double rate = g->cost.sgemm_gflops * 1e9 * speedup(g, (double)g->cfg->blas_threads);
    return flops_of(g->cfg, g->model, L) / rate;
}

double grid_metric_steps(size_t L, size_t heads, size_t d, size_t n_N, size_t n_T, size_t n_norm,
                         size_t n_eps, double row_ops) {
    double per_key = (double)d + (double)(n_T * n_norm) * ((double)n_N + (double)n_eps + row_ops);
    return (double)heads * 0.5 * (double)L * (double)L * per_key;
}

double grid_metric_seconds(const as_grid *g, size_t L) {
    const as_config *cfg = g->cfg;
    const as_axes *a = &cfg->axes;
    const gpt2_config *mc = g->model;
    size_t d = cfg->vectors == AS_VECTORS_RESID ? mc->n_embd : mc->n_embd / mc->n_head;
    size_t threads = cfg->blas_threads > 1 ? (size_t)cfg->blas_threads : 1;
    if (threads > a->n_head) threads = a->n_head; /* cell.c: metrics threads split the heads */
    double steps = grid_metric_steps(L, heads_of(cfg, mc), d, a->n_N, a->n_T, a->n_norm, a->n_eps,
                                     g->cost.row_ops);
    /* what the metrics switches leave out (grid.h): the walk over N at the T that
     * metrics.per_N_T skips, grad_exact's and dist_expect's per-key work */
    size_t n_W = a->n_T, n_soft = 0;
    if (a->per_N_at) {
        n_W = 0;
        for (size_t i = 0; i < a->n_T; i++) n_W += a->per_N_at[i] != 0;
    }
    for (size_t i = 0; i < a->n_norm; i++) n_soft += a->normalizer[i] == MET_SOFTMAX;
    double skipped = (double)(a->n_T - n_W) * (double)a->n_norm * ((double)a->n_N + AS_COST_WALK_OPS);
    if (!cfg->dist_expect) skipped += (double)n_W * (double)a->n_norm * AS_COST_DIST_EXPECT_OPS;
    if (!cfg->grad_exact) skipped += (double)a->n_T * (double)n_soft * AS_COST_GRAD_EXACT_OPS;
    steps -= (double)heads_of(cfg, mc) * 0.5 * (double)L * (double)L * skipped;
    return g->cost.metric_ns * 1e-9 * steps / speedup(g, (double)threads);
}

double grid_cell_cost(const as_grid *g, size_t cell) {
    size_t w, li;
    grid_cell_of(g, cell, &w, &li);
    size_t L = (size_t)g->cfg->axes.L[li];
    return grid_forward_seconds(g, L) + grid_metric_seconds(g, L);
}

double grid_window_cost(const as_grid *g) {
    const as_axes *a = &g->cfg->axes;
    double t = grid_forward_seconds(g, (size_t)config_max_L(g->cfg));
    for (size_t i = 0; i < a->n_L; i++) t += grid_metric_seconds(g, (size_t)a->L[i]);
    return t;
}

size_t grid_block_doubles(const as_config *cfg) {
    const as_axes *a = &cfg->axes;
    cr_layout lay;
    cr_layout_init(&lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    return lay.total;
}

/* Cells of one unit of work (sweep.c: a window's L values, at most CELL_MAX_CUTS). */
static size_t unit_cells(const as_grid *g) {
    return g->n_L < CELL_MAX_CUTS ? g->n_L : CELL_MAX_CUTS;
}

/* One model's buffers (the model axis: only the model being computed is resident). */
static void rank_memory_of(as_rank_memory *m, const as_grid *g, const gpt2_config *mc) {
    const as_config *cfg = g->cfg;
    const as_axes *a = &cfg->axes;
    size_t Lmax = (size_t)config_max_L(cfg);
    size_t d = cfg->vectors == AS_VECTORS_RESID ? mc->n_embd : mc->n_embd / mc->n_head;
    size_t threads = cfg->blas_threads > 1 ? (size_t)cfg->blas_threads : 1;
    if (threads > a->n_head) threads = a->n_head;
    memset(m, 0, sizeof *m);
    m->weights = model_param_count(mc) * sizeof(float);
    m->activations = gpt2_workspace_bytes(mc, Lmax);
    /* metrics.h's own workspace size for one head at the largest L, plus one
     * head's means for every L cut (cell.h runs the cuts of a window together),
     * for each metrics thread */
    met_normalizer *norms = malloc(a->n_norm * sizeof *norms);
    if (norms) {
        for (size_t i = 0; i < a->n_norm; i++) norms[i] = (met_normalizer)a->normalizer[i];
        met_axes ax = {.N = a->N, .n_N = a->n_N, .T = a->T, .n_T = a->n_T, .eps = a->eps,
                       .n_eps = a->n_eps, .norm = norms, .n_norm = a->n_norm,
                       .ssmax_scale = cfg->ssmax_scale, .full_row = cfg->rows == AS_ROWS_FULL_ROW,
                       .seed = (uint64_t)cfg->seed};
        m->metrics = met_workspace_bytes(Lmax, d, &ax) + a->n_L * met_out_count(&ax) * sizeof(double);
        free(norms);
    } else {
        m->metrics = sizeof(double) * (Lmax * Lmax + 2 * Lmax * d); /* the Gram matrix and X, Y */
    }
    m->metrics *= threads;
    m->cell_block = grid_block_doubles(cfg) * sizeof(double);
    m->unit_block = unit_cells(g) * m->cell_block;
    m->worker = AS_MEM_PROCESS_BYTES + m->activations + m->metrics + 2 * m->unit_block;
    size_t per_commit = (size_t)cfg->commit_every / unit_cells(g); /* sweep.c's units_per_commit */
    /* the master's receive slots (scheduler.c, writer.h): a batch of up to 2 x per_commit
     * units being written by the writer thread, and one receiving */
    m->master = AS_MEM_PROCESS_BYTES + (2 * (per_commit ? per_commit : 1) + 1) * m->unit_block;
    m->total = m->weights + m->worker;
}

/* The largest of each buffer over the sweep's models: a model switch frees one model's
 * weights and buffers before the next model's are made (sweep.c), so the peak is the
 * largest model's, never two models' at once. */
void grid_rank_memory(as_rank_memory *m, const as_grid *g) {
    const as_config *cfg = g->cfg;
    size_t n = cfg->models ? cfg->n_model : 0;
    rank_memory_of(m, g, n ? &cfg->models[0].cfg : &cfg->model);
    for (size_t k = 1; k < n; k++) {
        as_rank_memory o;
        rank_memory_of(&o, g, &cfg->models[k].cfg);
#define MAX_(f) if (o.f > m->f) m->f = o.f
        MAX_(weights); MAX_(activations); MAX_(metrics); MAX_(worker); MAX_(master); MAX_(total);
#undef MAX_
    }
}

size_t grid_node_memory(const as_grid *g, size_t ranks) {
    as_rank_memory m;
    grid_rank_memory(&m, g);
    if (ranks <= 1) return m.weights + m.worker;
    /* buffers touched: a worker fills its second unit buffer only when it gets a
     * second unit; the master receives into at most one buffer per unit */
    size_t workers = ranks - 1;
    size_t units = g->n_windows * ((g->n_L + CELL_MAX_CUTS - 1) / CELL_MAX_CUTS);
    size_t per_worker = (units + workers - 1) / workers;
    size_t worker = m.worker - (per_worker < 2 ? m.unit_block : 0);
    size_t busy = units < workers ? units : workers;
    size_t master_bufs = (m.master - AS_MEM_PROCESS_BYTES) / (m.unit_block ? m.unit_block : 1);
    if (master_bufs > units) master_bufs = units;
    size_t idle = workers - busy; /* a worker without a unit holds its process only */
    return m.weights + AS_MEM_PROCESS_BYTES + master_bufs * m.unit_block + busy * worker +
           idle * AS_MEM_PROCESS_BYTES;
}

double grid_output_bytes(const as_grid *g) {
    const as_axes *a = &g->cfg->axes;
    cr_layout lay;
    cr_layout_init(&lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    double per_cell = 0;
    for (int v = 0; v < CR_NVARS; v++) {
        if (v == CR_WALL_TIME || v == CR_RANK) continue;
        double width = (v == CR_KS_STAT || v == CR_KS_PVALUE) ? 8.0 : 4.0;
        per_cell += width * (double)lay.count[v];
    }
    per_cell += 1 + 4 + 4 + 8; /* status, attempts, rank, wall_time */
    double axes = 4.0 * (double)(a->n_L + a->n_N + a->n_layer + a->n_head) +
                  8.0 * (double)(a->n_T + a->n_eps + g->n_windows * 2) + 16.0 * (double)a->n_norm;
    return per_cell * (double)g->n_cells * (double)g->n_models + axes;
}

double grid_disk_bytes(const as_grid *g, int compressed) {
    return 2.0 * grid_output_bytes(g) / (compressed ? GRID_DEFLATE_MIN_RATIO : 1.0) + GRID_DISK_SLACK;
}
