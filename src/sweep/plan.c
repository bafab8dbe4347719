/* plan.c -- see plan.h. The cost, memory and disk functions moved here from grid.c with
 * their formulas unchanged; plan_compute() gathers them into the plan cmd_plan prints. */
#include "plan.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell.h"
#include "cellresult.h"
#include "fileio.h"
#include "forward.h"
#include "metrics.h"

as_cost_model grid_cost_model_default(void) {
    as_cost_model m = {AS_COST_SGEMM_GFLOPS, AS_COST_THREAD_SCALE, AS_COST_METRIC_NS,
                       AS_COST_ROW_OPS};
    return m;
}

/* Blocks the forward pass runs: up to the deepest measured layer the model has (forward.h). */
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
    if (m->family != MODEL_GPT2) return fwd_flops(m, L, (size_t)nb, 0);
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

/* The sums over the rows n = 1..L of plan.h's metrics formula, in closed form (a plan costs
 * every cell of the grid, so no loop over the rows). */
double grid_metric_steps(size_t L, size_t heads, size_t d, const int32_t *N, size_t n_N, size_t n_T,
                         size_t n_norm, size_t n_eps, double row_ops) {
    double Ld = (double)L, keys = Ld * (Ld + 1) / 2; /* sum of n */
    double evals = 0, K = 0;                          /* sum of n * #{grid N < n}; the largest N */
    for (size_t i = 0; i < n_N; i++) {
        double v = (double)N[i];
        if (v > K) K = v;
        if (v < Ld) evals += keys - v * (v + 1) / 2;
    }
    /* sum of n * min(K, n - 1): n (n - 1) up to n = m = min(L, K + 1), then n K */
    double m = K + 1 < Ld ? K + 1 : Ld;
    double walk = (m - 1) * m * (m + 1) / 3 + K * (keys - m * (m + 1) / 2);
    double per_T = (double)(n_T * n_norm);
    return (double)heads * (((double)d + per_T * ((double)n_eps + row_ops)) * keys +
                            per_T * (evals + AS_COST_WALK_STEP * walk));
}

double grid_metric_seconds(const as_grid *g, size_t L) {
    const as_config *cfg = g->cfg;
    const as_axes *a = &cfg->axes;
    const gpt2_config *mc = g->model;
    size_t d = cfg->vectors == AS_VECTORS_RESID ? mc->n_embd : mc->d_head;
    size_t threads = cfg->blas_threads > 1 ? (size_t)cfg->blas_threads : 1;
    if (threads > a->n_head) threads = a->n_head; /* cell.c: metrics threads split the heads */
    double heads = (double)heads_of(cfg, mc);
    double steps = grid_metric_steps(L, heads_of(cfg, mc), d, a->N, a->n_N, a->n_T, a->n_norm,
                                     a->n_eps, g->cost.row_ops);
    /* what the metrics switches leave out (plan.h): the per-N terms at the T that
     * metrics.per_N_T skips, grad_exact's and dist_expect's per-key work */
    size_t n_W = a->n_T, n_soft = 0;
    if (a->per_N_at) {
        n_W = 0;
        for (size_t i = 0; i < a->n_T; i++) n_W += a->per_N_at[i] != 0;
    }
    for (size_t i = 0; i < a->n_norm; i++) n_soft += a->normalizer[i] == MET_SOFTMAX;
    double keys = 0.5 * (double)L * ((double)L + 1);
    if (n_W < a->n_T) {
        /* one (T, normalizer)'s per-N steps: a one-T grid without eps and row_ops */
        double per_n = grid_metric_steps(L, 1, 0, a->N, a->n_N, 1, 1, 0, AS_COST_WALK_OPS);
        steps -= heads * (double)((a->n_T - n_W) * a->n_norm) * per_n;
    }
    double skipped = 0;
    if (!cfg->dist_expect) skipped += (double)(n_W * a->n_norm) * AS_COST_DIST_EXPECT_OPS;
    if (!cfg->grad_exact) skipped += (double)(a->n_T * n_soft) * AS_COST_GRAD_EXACT_OPS;
    steps -= heads * keys * skipped;
    /* metrics.query_rows = "sample:K" (docs/metrics.md 9.1): the per-row work is K of the
     * L - 1 rows' (K spread evenly, so their keys too); what stays every row's (the Gram
     * matrix by dsyrk, delta's running minimum, the transposes) costs AS_COST_FIXED_SHARE of
     * the formula's d term */
    double rows = cfg->rows == AS_ROWS_FULL_ROW ? (double)L : (double)L - 1;
    if (cfg->query_rows && (double)cfg->query_rows < rows) {
        double gram = heads * (double)d * keys;
        steps = AS_COST_FIXED_SHARE * gram + (steps - gram) * (double)cfg->query_rows / rows;
    }
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
    cr_layout lay;
    grid_block_layout(&lay, cfg);
    return lay.total;
}


/* One model's buffers (the model axis: only the model being computed is resident). */
static void rank_memory_of(as_rank_memory *m, const as_grid *g, const gpt2_config *mc) {
    const as_config *cfg = g->cfg;
    const as_axes *a = &cfg->axes;
    size_t Lmax = (size_t)config_max_L(cfg);
    size_t d = cfg->vectors == AS_VECTORS_RESID ? mc->n_embd : mc->d_head;
    size_t threads = cfg->blas_threads > 1 ? (size_t)cfg->blas_threads : 1;
    if (threads > a->n_head) threads = a->n_head;
    memset(m, 0, sizeof *m);
    m->weights = model_param_count(mc) * sizeof(float);
    m->activations = fwd_workspace_bytes(mc, Lmax);
    /* metrics.h's own workspace size for one head at the largest L, plus one
     * head's means for every L cut (cell.h runs the cuts of a window together),
     * for each metrics thread */
    met_normalizer *norms = malloc(a->n_norm * sizeof *norms);
    if (norms) {
        for (size_t i = 0; i < a->n_norm; i++) norms[i] = (met_normalizer)a->normalizer[i];
        met_axes ax = {.N = a->N, .n_N = a->n_N, .T = a->T, .n_T = a->n_T, .eps = a->eps,
                       .n_eps = a->n_eps, .norm = norms, .n_norm = a->n_norm,
                       .ssmax_scale = cfg->ssmax_scale, .full_row = cfg->rows == AS_ROWS_FULL_ROW,
                       .seed = (uint64_t)cfg->seed, .sample_rows = (size_t)cfg->query_rows,
                       .random_subsets = cfg->dist_random ? (uint32_t)cfg->random_subsets : 0};
        m->metrics = met_workspace_bytes(Lmax, d, &ax) + a->n_L * met_out_count(&ax) * sizeof(double);
        /* metrics.logits = "scaled": each thread's copy of a head's scores (cell.c) */
        if (cfg->logits == AS_LOGITS_SCALED) m->metrics += Lmax * Lmax * sizeof(float);
        free(norms);
    } else {
        m->metrics = sizeof(double) * (Lmax * Lmax + 2 * Lmax * d); /* the Gram matrix and X, Y */
    }
    m->metrics *= threads;
    m->cell_block = grid_block_doubles(cfg) * sizeof(double);
    m->unit_block = grid_unit_cells(g) * m->cell_block;
    m->worker = AS_MEM_PROCESS_BYTES + m->activations + m->metrics + 2 * m->unit_block;
    size_t per_commit = (size_t)cfg->commit_every / grid_unit_cells(g); /* the run's units per commit (run.c) */
    /* the master's receive slots (scheduler.c, writer.h): a batch of up to 2 x per_commit
     * units being written by the writer thread, and one receiving */
    m->master = AS_MEM_PROCESS_BYTES + (2 * (per_commit ? per_commit : 1) + 1) * m->unit_block;
    m->total = m->weights + m->worker;
}

/* The largest of each buffer over the sweep's models: a model switch frees one model's
 * weights and buffers before the next model's are made (run.c), so the peak is the
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
    size_t units = g->n_windows * grid_units_per_window(g);
    size_t per_worker = (units + workers - 1) / workers;
    size_t worker = m.worker - (per_worker < 2 ? m.unit_block : 0);
    size_t busy = units < workers ? units : workers;
    size_t master_bufs = (m.master - AS_MEM_PROCESS_BYTES) / (m.unit_block ? m.unit_block : 1);
    if (master_bufs > units) master_bufs = units;
    size_t idle = workers - busy; /* a worker without a unit holds its process only */
    return m.weights + AS_MEM_PROCESS_BYTES + master_bufs * m.unit_block + busy * worker +
           idle * AS_MEM_PROCESS_BYTES;
}

double plan_parse_bytes(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || !isfinite(v)) return -1;
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (*end && !u) return -1;
    if (u) {
        for (const char *k = units; k <= u; k++) v *= 1024;
        end++;
        if (*end == 'i') end++;
        if (*end == 'B' || *end == 'b') end++;
    } else if (*end == 'B') {
        end++;
    }
    return *end ? -1 : v;
}

double plan_meminfo(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key);
    double kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) || line[n] != ':' || sscanf(line + n + 1, "%lf", &kib) != 1) kib = -1;
    fclose(f);
    return kib < 0 ? 0 : kib * 1024;
}

double plan_memory_limit(double given, const char **source) {
    *source = "--mem";
    if (given > 0) return given;
    const char *slurm = getenv("SLURM_MEM_PER_NODE"); /* MB; 0 means "all of the node" */
    char *end = NULL;
    double mb = slurm ? strtod(slurm, &end) : 0;
    if (slurm && end != slurm && mb > 0) {
        *source = "SLURM_MEM_PER_NODE";
        return mb * 1024 * 1024;
    }
    /* Not MemAvailable: it moves with every other process (page cache, other jobs), so a
     * loaded machine would refuse a run by chance; what exceeds the whole machine's memory
     * clearly cannot fit (cmd_plan warns about MemAvailable) */
    *source = "MemTotal";
    return plan_meminfo("MemTotal");
}

static void gib(char *buf, size_t n, double b) { /* "1.9 GiB", "288.0 KiB" */
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) b /= 1024, u++;
    snprintf(buf, n, "%.1f %s", b, unit[u]);
}

int plan_memory_check(const as_grid *g, size_t ranks, double limit, const char *source, as_err *err) {
    size_t need = grid_node_memory(g, ranks ? ranks : 1);
    if (!(limit > 0) || (double)need <= limit) return 0;
    as_rank_memory m;
    grid_rank_memory(&m, g);
    char b[5][24];
    gib(b[0], sizeof b[0], (double)need), gib(b[1], sizeof b[1], (double)m.worker);
    gib(b[2], sizeof b[2], (double)m.activations), gib(b[3], sizeof b[3], (double)m.metrics);
    gib(b[4], sizeof b[4], limit);
    return as_fail(err, "%s: %zu rank%s on a node need%s %s at L = %lld (a worker %s: activations %s, "
                   "metrics %s), more than the %s of %s; lower grid.L or runtime.blas_threads, run "
                   "fewer ranks per node, or raise the limit", g->cfg->path, ranks ? ranks : 1,
                   ranks > 1 ? "s" : "", ranks > 1 ? "" : "s", b[0], (long long)config_max_L(g->cfg), b[1], b[2], b[3],
                   b[4], source);
}

double grid_output_bytes(const as_grid *g) {
    const as_axes *a = &g->cfg->axes;
    cr_layout lay;
    grid_block_layout(&lay, g->cfg); /* sampled: the SE variables, about twice the file */
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
    return 2.0 * grid_output_bytes(g) / (compressed ? PLAN_DEFLATE_RATIO : 1.0) + GRID_DISK_SLACK;
}

/* --- the plan --------------------------------------------------------------- */

/* Rank seconds of model m's cells not done: per window with cells pending, a pass at
 * its largest pending L and the metrics of each pending L (the run's unit of work is
 * a window's pending cells, run.c). */
static double cost_to_go(const as_grid *g, const unsigned char *done, size_t *windows_left,
                         size_t *cells_left) {
    const as_axes *a = &g->cfg->axes;
    double t = 0;
    for (size_t w = 0; w < g->n_windows; w++) {
        size_t top = 0, pending = 0;
        double metrics = 0;
        for (size_t li = 0; li < g->n_L; li++) {
            if (done[grid_cell_index(g, w, li)]) continue;
            pending++;
            top = (size_t)a->L[li]; /* L ascending: the last pending is the largest */
            metrics += grid_metric_seconds(g, top);
        }
        if (!pending) continue;
        *windows_left += 1;
        *cells_left += pending;
        t += grid_forward_seconds(g, top) + metrics;
    }
    return t;
}

/* Wall seconds of `ranks` ranks: the scheduler deals one model's windows at a time,
 * so rounds of (ranks - 1) windows per model, summed. */
static double rounds_seconds(const as_plan *p, size_t ranks) {
    size_t workers = ranks - 1;
    return (double)(p->n_models * ((p->n_windows + workers - 1) / workers)) * p->window_s;
}

static void plan_memory_and_disk(as_plan *p, const as_grid *g, size_t want) {
    const as_config *cfg = g->cfg;
    grid_rank_memory(&p->mem, g);
    for (size_t P = 1; P <= 16; P *= 2) {
        p->node_ranks[p->n_node] = P;
        p->node_bytes[p->n_node++] = grid_node_memory(g, P);
    }
    if (want >= 1) {
        p->node_ranks[p->n_node] = want;
        p->node_bytes[p->n_node++] = grid_node_memory(g, want);
    }
    p->output_bytes = grid_output_bytes(g);
    p->cell_bytes = p->n_cells ? p->output_bytes / (double)p->n_cells : 0;
    p->disk_bytes = grid_disk_bytes(g, cfg->compress);
    p->free_bytes = fileio_free_bytes(cfg->output);
    p->deflate_ratio = cfg->compress ? PLAN_DEFLATE_RATIO : 1.0;
    /* The write bandwidth the master needs (docs/performance.md): every byte goes to the
     * view and, until compaction, the journal. */
    if (p->window_s > 0 && p->n_windows) {
        p->write_per_window = 2.0 * p->output_bytes / (double)(p->n_windows * p->n_models) / p->deflate_ratio;
        p->write_workers = want >= 2 ? want - 1 : 2000;
        p->write_rate = p->write_per_window * (double)p->write_workers / p->window_s;
    }
    p->disk_short = p->free_bytes >= 0 && p->disk_bytes > p->free_bytes;
    p->disk_huge = p->disk_bytes > GRID_SANE_DISK_BYTES;
    p->wall64_s = rounds_seconds(p, 64);
    p->too_long = p->wall64_s > 365.0 * 86400;
}

int plan_compute(as_plan *p, as_grid *g, const plan_opts *o, as_err *err) {
    memset(p, 0, sizeof *p);
    p->grid = g;
    p->n_models = g->n_models;
    p->n_windows = g->n_windows;
    p->n_L = g->n_L;
    p->n_cells = g->n_cells * g->n_models;
    p->L_max = (size_t)config_max_L(g->cfg);
    p->model = calloc(p->n_models, sizeof *p->model);
    if (!p->model) return as_fail(err, "out of memory for the plan of %zu models", p->n_models);
    p->have_progress = o->done != NULL;
    for (size_t k = 0; k < p->n_models; k++) {
        grid_set_model(g, k);
        plan_model_time *t = &p->model[k];
        t->forward_s = grid_forward_seconds(g, p->L_max);
        t->window_s = grid_window_cost(g);
        t->metrics_s = t->window_s - t->forward_s;
        p->total_s += t->window_s * (double)g->n_windows;
        if (o->done) p->to_go_s += cost_to_go(g, o->done + k * g->n_cells, &p->windows_left, &p->cells_left);
    }
    grid_set_model(g, 0);
    p->window_s = p->n_windows ? p->total_s / (double)(p->n_windows * p->n_models) : 0;
    p->windows_done = p->n_windows * p->n_models - p->windows_left;
    for (size_t P = 2; P <= 32; P *= 4)
        p->rounds[p->n_rounds++] = (plan_rounds){P, P - 1, rounds_seconds(p, P)};
    if (o->ranks >= 2 && o->ranks != 2 && o->ranks != 8 && o->ranks != 32)
        p->rounds[p->n_rounds++] = (plan_rounds){o->ranks, o->ranks - 1, rounds_seconds(p, o->ranks)};
    plan_memory_and_disk(p, g, o->ranks);
    return 0;
}

void plan_free(as_plan *p) {
    if (!p) return;
    free(p->model);
    memset(p, 0, sizeof *p);
}
