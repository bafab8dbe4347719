/* cell.c -- see cell.h. */
#include "cell.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"
#include "clock.h"

/* One thread's share of a layer's heads. */
typedef struct {
    struct cell_worker *w;
    size_t lane;                 /* heads lane, lane + threads, ... */
    void *met_ws;
    double *head_out;            /* [CELL_MAX_CUTS][met_out_count] one head's means */
    float *scaled;               /* [L_max][L_max] metrics.logits = "scaled": q.k / sqrt(d_head); else NULL */
    met_axes axes;               /* window/layer/head keys are set per head */
    const void *view;            /* the fwd_layer_view being measured */
    size_t il;                   /* its index in the grid's layer list */
    double cpu_s;                /* CPU seconds of this lane's metrics, summed */
    int rc;
    as_err err;
} cell_lane;

struct cell_worker {
    const gpt2_model *model;
    cell_spec spec;
    cr_layout layout;
    fwd_workspace fwd;
    met_axes axes;               /* the template of every lane's axes */
    size_t met_ws_bytes;         /* per lane */
    cell_lane *lanes;            /* [threads] */
    size_t threads;
    double *ks_x, *ks_y;         /* [n_layer * n_head] the two KS samples */
    unsigned char *ks_present;   /* [n_layer * n_head] 1: a head of the model, a KS sample */
    double *ks_p;                /* [n_N] p-values of one (T, normalizer) */
    double *ks_scratch;          /* ks_scratch_doubles() */
    int rank;                    /* recorded in the block's `rank` */
    int (*should_stop)(void);    /* cell_worker_new */
    size_t pass_L;               /* cell_worker_new */
    double forward_s, metrics_s, ks_s; /* cell_timings */
    double forward_cpu_s, metrics_cpu_s;
    size_t passes;
    /* per call */
    size_t cuts[CELL_MAX_CUTS];
    size_t ncuts;
    double *const *blocks;
    int64_t window;
};

static size_t vector_dim(const cell_worker *w) {
    const gpt2_config *m = &w->model->cfg;
    return w->spec.vectors == AS_VECTORS_RESID ? m->n_embd : m->d_head;
}

cell_spec cell_spec_of(const as_config *cfg) { return cell_spec_of_model(cfg, 0); }

cell_spec cell_spec_of_model(const as_config *cfg, size_t m) {
    return (cell_spec){.axes = &cfg->axes, .vectors = cfg->vectors, .rows = cfg->rows,
                       .logits = cfg->logits, .distance = cfg->distance,
                       .ssmax_scale = cfg->models ? cfg->models[m].ssmax_scale : cfg->ssmax_scale,
                       .entmax_alpha = cfg->entmax_alpha, .sigmoid_bias_set = cfg->sigmoid_bias_set,
                       .sigmoid_bias = cfg->sigmoid_bias,
                       .seed = cfg->seed, .ks_alpha = cfg->ks_alpha, .threads = cfg->blas_threads,
                       .skip = (cfg->grad_exact ? 0u : MET_SKIP_GRAD_EXACT) |
                               (cfg->dist_expect ? 0u : MET_SKIP_DIST_EXPECT),
                       .random_subsets = cfg->dist_random ? (uint32_t)cfg->random_subsets : 0,
                       .ks_random = cfg->ks_against == AS_KS_RANDOM,
                       .sample_rows = (size_t)cfg->query_rows};
}

/* Whether the grid's (layer index il, head index ih) exists in the worker's model: the
 * axes are the union over the sweep's models, and a smaller model leaves the rest NaN. */
static int head_present(const cell_worker *w, size_t il, size_t ih) {
    const as_axes *a = w->spec.axes;
    return (size_t)a->layer[il] < w->model->cfg.n_layer && (size_t)a->head[ih] < w->model->cfg.n_head;
}

static void worker_release(cell_worker *w);

/* Fills the zeroed w; on failure what was allocated is released by the caller. */
static int worker_plan(cell_worker *w, const gpt2_model *model, const cell_spec *spec, int rank,
                       as_err *err) {
    w->model = model;
    w->spec = *spec;
    w->rank = rank;
    const as_axes *a = spec->axes;
    cr_layout_init(&w->layout, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    cr_layout_sample(&w->layout, spec->sample_rows != 0);
    w->axes = (met_axes){
        .N = a->N, .n_N = a->n_N, .T = a->T, .n_T = a->n_T, .eps = a->eps, .n_eps = a->n_eps,
        .norm = a->normalizer, .n_norm = a->n_norm, .ssmax_scale = spec->ssmax_scale,
        .entmax_alpha = spec->entmax_alpha, .sigmoid_bias_set = spec->sigmoid_bias_set,
        .sigmoid_bias = spec->sigmoid_bias,
        .full_row = spec->rows == AS_ROWS_FULL_ROW, .seed = (uint64_t)spec->seed,
        .aggregate = spec->distance == AS_DISTANCE_AGGREGATE,
        .per_n_T = a->per_N_at, .skip = spec->skip, .random_subsets = spec->random_subsets,
        .sample_rows = spec->sample_rows,
    };

    size_t max_L = a->n_L ? (size_t)a->L[a->n_L - 1] : 0; /* L is sorted ascending */
    if (fwd_workspace_init(&w->fwd, &model->cfg, max_L, err)) return -1;
    w->met_ws_bytes = met_workspace_bytes(max_L, vector_dim(w), &w->axes);
    w->threads = spec->threads > 1 ? (size_t)spec->threads : 1;
    if (w->threads > a->n_head) w->threads = a->n_head ? a->n_head : 1;
    if (w->threads > CELL_MAX_THREADS) w->threads = CELL_MAX_THREADS;
    w->lanes = calloc(w->threads, sizeof *w->lanes);
    if (!w->lanes) return as_fail(err, "out of memory (metrics threads)");
    for (size_t i = 0; i < w->threads; i++) {
        cell_lane *ln = &w->lanes[i];
        ln->w = w, ln->lane = i, ln->axes = w->axes;
        ln->met_ws = malloc(w->met_ws_bytes);
        ln->head_out = malloc(CELL_MAX_CUTS * met_out_count(&w->axes) * sizeof(double));
        if (spec->logits == AS_LOGITS_SCALED) ln->scaled = malloc(max_L * max_L * sizeof(float));
        if (!ln->met_ws || !ln->head_out || (spec->logits == AS_LOGITS_SCALED && !ln->scaled))
            return as_fail(err, "out of memory: metrics workspace of %zu bytes for L = %zu (thread %zu)",
                           w->met_ws_bytes, max_L, i);
    }
    w->ks_x = malloc(a->n_layer * a->n_head * sizeof(double));
    w->ks_y = malloc(a->n_layer * a->n_head * sizeof(double));
    w->ks_present = malloc(a->n_layer * a->n_head + 1);
    w->ks_p = malloc(a->n_N * sizeof(double));
    w->ks_scratch = malloc(ks_scratch_doubles(a->n_layer * a->n_head, a->n_layer * a->n_head) *
                           sizeof(double));
    if (!w->ks_x || !w->ks_y || !w->ks_present || !w->ks_p || !w->ks_scratch)
        return as_fail(err, "out of memory: metrics workspace of %zu bytes for L = %zu",
                       w->met_ws_bytes, max_L);
    for (size_t i = 0; i < a->n_layer * a->n_head; i++)
        w->ks_present[i] = (unsigned char)head_present(w, i / a->n_head, i % a->n_head);
    return 0;
}

cell_worker *cell_worker_new(const gpt2_model *model, const cell_spec *spec, int rank, size_t pass_L,
                             int (*should_stop)(void), as_err *err) {
    cell_worker *w = calloc(1, sizeof *w);
    if (!w) {
        as_fail(err, "out of memory (cell worker)");
        return NULL;
    }
    if (worker_plan(w, model, spec, rank, err)) {
        cell_worker_free(w);
        return NULL;
    }
    w->pass_L = pass_L;
    w->should_stop = should_stop;
    return w;
}

const cr_layout *cell_worker_layout(const cell_worker *w) { return &w->layout; }

cell_timings cell_worker_take_timings(cell_worker *w) {
    cell_timings t = {.forward_s = w->forward_s, .metrics_s = w->metrics_s, .ks_s = w->ks_s,
                      .forward_cpu_s = w->forward_cpu_s, .metrics_cpu_s = w->metrics_cpu_s,
                      .passes = w->passes};
    w->forward_s = w->metrics_s = w->ks_s = w->forward_cpu_s = w->metrics_cpu_s = 0;
    w->passes = 0;
    return t;
}

void cell_worker_free(cell_worker *w) {
    if (!w) return;
    worker_release(w);
    free(w);
}

static void worker_release(cell_worker *w) {
    fwd_workspace_free(&w->fwd);
    for (size_t i = 0; w->lanes && i < w->threads; i++) {
        free(w->lanes[i].met_ws);
        free(w->lanes[i].head_out);
        free(w->lanes[i].scaled);
    }
    free(w->lanes);
    free(w->ks_x);
    free(w->ks_y);
    free(w->ks_present);
    free(w->ks_p);
    free(w->ks_scratch);
    memset(w, 0, sizeof *w);
}


/* One lane's heads of the current layer. Writes only its own heads' places
 * in the blocks, so lanes run side by side. */
static int lane_heads(cell_lane *ln) {
    cell_worker *w = ln->w;
    const fwd_layer_view *view = ln->view;
    const as_axes *a = w->spec.axes;
    size_t L = view->L, D = view->d_head;
    double c0 = as_thread_cpu_s();
    for (size_t ih = ln->lane; ih < a->n_head; ih += w->threads) {
        size_t h = (size_t)a->head[ih];
        if (h >= view->n_head) continue; /* not in this model: masked (NaN) */
        const float *scores = view->scores + h * L * L;
        if (ln->scaled) {
            /* metrics.logits = "scaled": q.k / sqrt(d_head), the visible part of each row */
            const float sqrt_d = (float)sqrt((double)D);
            for (size_t t = 0; t < L; t++)
                for (size_t j = 0; j <= t; j++) ln->scaled[t * L + j] = scores[t * L + j] / sqrt_d;
            scores = ln->scaled;
        }
        const float *vectors = view->v + h * L * D;
        size_t dim = D;
        if (w->spec.vectors == AS_VECTORS_RESID) vectors = view->ln1, dim = view->n_embd;
        ln->axes.window = w->window;
        ln->axes.layer = (int64_t)view->layer;
        ln->axes.head = (int64_t)h;
        /* The workspace is reused as it is: met_head writes everything it reads
         * (ctest test_metrics_ws reruns heads in zeroed, NaN-filled, random and
         * used workspaces and asserts the same bits), so a head's result does not
         * depend on which head or window this lane did before. Clearing it was
         * 8 MB per head at L = 1024: ~7% of a minimal grid's metrics. */
        if (met_head(ln->head_out, ln->met_ws, w->met_ws_bytes, scores, L, vectors, L, dim, w->cuts,
                     w->ncuts, &ln->axes, &ln->err)) {
            ln->cpu_s += as_thread_cpu_s() - c0;
            return as_wrap(&ln->err, "head %zu", h);
        }
        met_scatter_head(w->blocks, &w->layout, &w->axes, ln->head_out, w->ncuts, ln->il, ih);
    }
    ln->cpu_s += as_thread_cpu_s() - c0;
    return 0;
}

static void *lane_thread(void *arg) {
    cell_lane *ln = arg;
    ln->rc = lane_heads(ln);
    return NULL;
}

/* The forward pass's per-layer callback: every measured head of this layer. */
static int on_layer(const fwd_layer_view *view, void *user, as_err *err) {
    cell_worker *w = user;
    const as_axes *a = w->spec.axes;
    size_t il = 0;
    while (il < a->n_layer && (size_t)a->layer[il] != view->layer) il++;
    if (il == a->n_layer) return 0; /* not a measured layer */
    if (w->should_stop && w->should_stop())
        return as_fail(err, "abandoned: the sweep is stopping");
    double t0 = as_monotonic_s();
    pthread_t tid[CELL_MAX_THREADS];
    int started[CELL_MAX_THREADS] = {0};
    for (size_t i = 0; i < w->threads; i++) {
        cell_lane *ln = &w->lanes[i];
        ln->view = view, ln->il = il, ln->rc = 0, ln->err.msg[0] = 0;
        /* A thread that cannot start leaves its heads to this one, below. */
        if (i > 0 && i < CELL_MAX_THREADS) started[i] = pthread_create(&tid[i], NULL, lane_thread, ln) == 0;
    }
    w->lanes[0].rc = lane_heads(&w->lanes[0]);
    for (size_t i = 1; i < w->threads; i++) {
        if (i < CELL_MAX_THREADS && started[i]) pthread_join(tid[i], NULL);
        else w->lanes[i].rc = lane_heads(&w->lanes[i]);
    }
    w->metrics_s += as_monotonic_s() - t0;
    for (size_t i = 0; i < w->threads; i++)
        if (w->lanes[i].rc) {
            *err = w->lanes[i].err;
            return -1;
        }
    return 0;
}

/* docs/metrics.md section 5: per (N, T, normalizer) a KS test between the heads'
 * mean dist_true and mean dist_expect (metrics.ks_against = "random": dist_random);
 * crit_N is the smallest N whose p-value exceeds ks_alpha, -1 when none does. The model's
 * own heads only (a masked head is not a sample), in grid order. */
static void cross_head_tests(cell_worker *w, double *b) {
    ks_cross_heads(b, &w->layout, &w->axes, w->spec.ks_random, w->spec.ks_alpha, w->ks_present, w->ks_x,
                   w->ks_y, w->ks_p, w->ks_scratch);
}

int cell_compute(cell_worker *w, int64_t window, const int32_t *tokens, const size_t *cuts,
                 size_t ncuts, double *const *blocks, as_err *err) {
    double t0 = as_monotonic_s();
    if (ncuts < 1 || ncuts > CELL_MAX_CUTS)
        return as_fail(err, "cell: %zu context lengths in one call (1..%d allowed)", ncuts,
                       CELL_MAX_CUTS);
    for (size_t c = 0; c < ncuts; c++) {
        if (cuts[c] < 1 || (c && cuts[c] <= cuts[c - 1]))
            return as_fail(err, "cell: context lengths must ascend (got %zu after %zu)", cuts[c],
                           c ? cuts[c - 1] : 0);
        w->cuts[c] = cuts[c];
        for (size_t i = 0; i < w->layout.total; i++) blocks[c][i] = NAN;
    }
    w->ncuts = ncuts;
    w->blocks = blocks;
    w->window = window;

    const as_axes *a = w->spec.axes;
    fwd_request req = {.on_layer = on_layer, .user = w};
    for (size_t il = 0; il < a->n_layer; il++)
        if ((size_t)a->layer[il] < w->model->cfg.n_layer) req.capture_mask |= 1ull << a->layer[il];
    size_t L = cuts[ncuts - 1];
    if (w->pass_L) {
        if (w->pass_L < L)
            return as_fail(err, "cell: cut L = %zu is longer than the pass (%zu)", L, w->pass_L);
        L = w->pass_L;
    }
    double metrics_before = w->metrics_s, c0 = as_process_cpu_s(), lanes_cpu_before = 0;
    for (size_t i = 0; i < w->threads; i++) lanes_cpu_before += w->lanes[i].cpu_s;
    if (fwd_forward(&w->fwd, w->model, tokens, L, &req, err))
        return as_wrap(err, "window %lld at L = %zu", (long long)window, L);
    double t_ks = as_monotonic_s();
    w->forward_s += (t_ks - t0) - (w->metrics_s - metrics_before);
    double lanes_cpu = -lanes_cpu_before;
    for (size_t i = 0; i < w->threads; i++) lanes_cpu += w->lanes[i].cpu_s;
    w->metrics_cpu_s += lanes_cpu;
    w->forward_cpu_s += (as_process_cpu_s() - c0) - lanes_cpu;

    for (size_t c = 0; c < ncuts; c++) cross_head_tests(w, blocks[c]);
    double t1 = as_monotonic_s();
    w->ks_s += t1 - t_ks;
    w->passes++;
    double seconds = (t1 - t0) / (double)ncuts;
    for (size_t c = 0; c < ncuts; c++) {
        blocks[c][w->layout.offset[CR_WALL_TIME]] = seconds;
        blocks[c][w->layout.offset[CR_RANK]] = w->rank;
        /* docs/metrics.md 9.1: min(K, the cut's rows with a metric) -- met_sample_rows' count */
        size_t first = w->axes.full_row ? 0 : 1, m = cuts[c] - first, K = w->spec.sample_rows;
        if (w->layout.sampled) blocks[c][w->layout.offset[CR_ROWS_SAMPLED]] = (double)(K < m ? K : m);
    }
    return 0;
}
