/* cell.c -- see cell.h. */
#include "cell.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static size_t vector_dim(const cell_worker *w) {
    const gpt2_config *m = &w->model->cfg;
    return w->cfg->vectors == AS_VECTORS_RESID ? m->n_embd : m->n_embd / m->n_head;
}

int cell_worker_init(cell_worker *w, const gpt2_model *model, const as_config *cfg, int rank,
                     as_err *err) {
    memset(w, 0, sizeof *w);
    w->model = model;
    w->cfg = cfg;
    w->rank = rank;
    const as_axes *a = &cfg->axes;
    cr_layout_init(&w->layout, a->nN, a->nT, a->nEps, a->nNorm, a->nLayers, a->nHeads);

    w->norms = calloc(a->nNorm, sizeof *w->norms);
    if (!w->norms) return as_fail(err, "out of memory (normalizer list)");
    for (size_t z = 0; z < a->nNorm; z++) {
        int id = met_normalizer_from_name(config_normalizer_name(a->normalizer[z]));
        if (id < 0) {
            cell_worker_free(w);
            return as_fail(err, "grid.normalizer: '%s' is not known to the metrics",
                           config_normalizer_name(a->normalizer[z]));
        }
        w->norms[z] = (met_normalizer)id;
    }
    w->axes = (met_axes){
        .N = a->N, .nN = a->nN, .T = a->T, .nT = a->nT, .eps = a->eps, .nEps = a->nEps,
        .norm = w->norms, .nNorm = a->nNorm, .ssmax_scale = cfg->ssmax_scale,
        .full_row = cfg->rows == AS_ROWS_FULL_ROW, .seed = (uint64_t)cfg->seed,
    };

    size_t max_L = (size_t)config_max_L(cfg);
    if (gpt2_workspace_init(&w->fwd, &model->cfg, max_L, err)) {
        cell_worker_free(w);
        return -1;
    }
    w->met_ws_bytes = met_workspace_bytes(max_L, vector_dim(w), &w->axes);
    w->met_ws = malloc(w->met_ws_bytes);
    w->head_out = malloc(CELL_MAX_CUTS * met_out_count(&w->axes) * sizeof(double));
    w->ks_x = malloc(a->nLayers * a->nHeads * sizeof(double));
    w->ks_y = malloc(a->nLayers * a->nHeads * sizeof(double));
    w->ks_p = malloc(a->nN * sizeof(double));
    w->ks_scratch = malloc(ks_scratch_doubles(a->nLayers * a->nHeads, a->nLayers * a->nHeads) *
                           sizeof(double));
    if (!w->met_ws || !w->head_out || !w->ks_x || !w->ks_y || !w->ks_p || !w->ks_scratch) {
        cell_worker_free(w);
        return as_fail(err, "out of memory: metrics workspace of %zu bytes for L = %zu",
                       w->met_ws_bytes, max_L);
    }
    return 0;
}

void cell_worker_free(cell_worker *w) {
    gpt2_workspace_free(&w->fwd);
    free(w->norms);
    free(w->met_ws);
    free(w->head_out);
    free(w->ks_x);
    free(w->ks_y);
    free(w->ks_p);
    free(w->ks_scratch);
    memset(w, 0, sizeof *w);
}

/* Copies one head's means (metrics.h order) into the cell blocks at
 * (layer index il, head index ih), for every cut. */
static void scatter_head(cell_worker *w, size_t il, size_t ih) {
    const met_axes *ax = &w->axes;
    const cr_layout *y = &w->layout;
    size_t per_cut = met_out_count(ax);
    for (size_t c = 0; c < w->ncuts; c++) {
        const double *o = w->head_out + c * per_cut;
        double *b = w->blocks[c];
        for (int v = 0; v < MET_NPERN; v++)
            for (size_t n = 0; n < ax->nN; n++)
                for (size_t t = 0; t < ax->nT; t++)
                    for (size_t z = 0; z < ax->nNorm; z++)
                        b[cr_at_per_n(y, (cr_var)(CR_DIST_TRUE + v), n, t, z, il, ih)] =
                            o[met_at_per_n(ax, v, n, t, z)];
        for (int v = 0; v < MET_NPERT; v++)
            for (size_t t = 0; t < ax->nT; t++)
                for (size_t z = 0; z < ax->nNorm; z++)
                    b[cr_at_per_t(y, (cr_var)(CR_ENTROPY + v), t, z, il, ih)] =
                        o[met_at_per_t(ax, v, t, z)];
        for (size_t t = 0; t < ax->nT; t++)
            for (size_t e = 0; e < ax->nEps; e++)
                for (size_t z = 0; z < ax->nNorm; z++)
                    b[cr_at_grad_fd(y, t, e, z, il, ih)] = o[met_at_grad_fd(ax, t, e, z)];
    }
}

/* The forward pass's per-layer callback: every measured head of this layer. */
static int on_layer(const gpt2_layer_view *view, void *user, as_err *err) {
    cell_worker *w = user;
    const as_axes *a = &w->cfg->axes;
    size_t il = 0;
    while (il < a->nLayers && (size_t)a->layers[il] != view->layer) il++;
    if (il == a->nLayers) return 0; /* not a measured layer */
    if (w->should_stop && w->should_stop())
        return as_fail(err, "abandoned: the sweep is stopping");
    size_t L = view->L, D = view->d_head;
    for (size_t ih = 0; ih < a->nHeads; ih++) {
        size_t h = (size_t)a->heads[ih];
        const float *scores = view->scores + h * L * L;
        const float *vectors = view->v + h * L * D;
        size_t dim = D;
        if (w->cfg->vectors == AS_VECTORS_RESID) vectors = view->ln1, dim = view->n_embd;
        w->axes.window = w->window;
        w->axes.layer = (int64_t)view->layer;
        w->axes.head = (int64_t)h;
        if (met_head(w->head_out, w->met_ws, w->met_ws_bytes, scores, L, vectors, L, dim, w->cuts,
                     w->ncuts, &w->axes, err))
            return as_wrap(err, "head %zu", h);
        scatter_head(w, il, ih);
    }
    return 0;
}

/* metrics.md section 3: per (N, T, normalizer) a KS test between the heads'
 * mean dist_true and mean dist_expect; crit_N is the smallest N whose p-value
 * exceeds ks_alpha, -1 when none does. */
static void cross_head_tests(cell_worker *w, double *b) {
    const cr_layout *y = &w->layout;
    size_t heads = y->nLayer * y->nHead;
    for (size_t t = 0; t < y->nT; t++)
        for (size_t z = 0; z < y->nNorm; z++) {
            for (size_t n = 0; n < y->nN; n++) {
                for (size_t i = 0; i < heads; i++) {
                    w->ks_x[i] = b[cr_at_per_n(y, CR_DIST_TRUE, n, t, z, i / y->nHead, i % y->nHead)];
                    w->ks_y[i] = b[cr_at_per_n(y, CR_DIST_EXPECT, n, t, z, i / y->nHead, i % y->nHead)];
                }
                double *stat = &b[cr_at_ks(y, CR_KS_STAT, n, t, z)];
                ks_2samp_exact(stat, &w->ks_p[n], w->ks_x, heads, w->ks_y, heads, w->ks_scratch);
                b[cr_at_ks(y, CR_KS_PVALUE, n, t, z)] = w->ks_p[n];
            }
            b[cr_at_crit(y, t, z)] = ks_critical_n(w->cfg->axes.N, w->ks_p, y->nN, w->cfg->ks_alpha);
        }
}

int cell_compute(cell_worker *w, int64_t window, const int32_t *tokens, const size_t *cuts,
                 size_t ncuts, double *const *blocks, as_err *err) {
    double t0 = now_s();
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

    const as_axes *a = &w->cfg->axes;
    gpt2_request req = {.on_layer = on_layer, .user = w};
    for (size_t il = 0; il < a->nLayers; il++) req.capture_mask |= 1ull << a->layers[il];
    size_t L = cuts[ncuts - 1];
    if (gpt2_forward(&w->fwd, w->model, tokens, L, &req, err))
        return as_wrap(err, "window %lld at L = %zu", (long long)window, L);

    double seconds = (now_s() - t0) / (double)ncuts;
    for (size_t c = 0; c < ncuts; c++) {
        cross_head_tests(w, blocks[c]);
        blocks[c][w->layout.offset[CR_WALL_TIME]] = seconds;
        blocks[c][w->layout.offset[CR_RANK]] = w->rank;
    }
    return 0;
}
