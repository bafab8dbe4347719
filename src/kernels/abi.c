/* abi.c -- see abi.h. The per-head loop follows src/sweep/cell.c step for step (same
 * kernels, same order of heads) and the cross-head test is the sweep's own
 * (ks_cross_heads): that is what makes a foreign caller's numbers the sweep's bit for bit. */
#include "abi.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cellresult.h"
#include "ks.h"
#include "metrics.h"

uint32_t as_abi_version(void) { return AS_ABI_VERSION; }
int32_t as_abi_nvars(void) { return CR_NVARS; }
const char *as_abi_var_name(int32_t v) { return v >= 0 && v < CR_NVARS ? cr_var_name((cr_var)v) : "?"; }
int32_t as_abi_var_shape(int32_t v) { return v >= 0 && v < CR_NVARS ? (int32_t)cr_var_shape((cr_var)v) : -1; }
const char *as_abi_normalizer_name(int32_t z) { return met_normalizer_name((met_normalizer)z); }
int32_t as_abi_normalizer_count(void) { return MET_N_NORMALIZERS; }

uint64_t as_abi_layout(uint64_t *offset, uint64_t n_N, uint64_t n_T, uint64_t n_eps,
                       uint64_t n_norm, uint64_t n_layer, uint64_t n_head) {
    cr_layout y;
    cr_layout_init(&y, n_N, n_T, n_eps, n_norm, n_layer, n_head);
    for (int v = 0; v < CR_NVARS; v++) offset[v] = y.offset[v];
    return y.total;
}

/* The options as the kernels' axes; the window, layer and head keys are set per head. */
static int axes_of(met_axes *ax, const as_abi_options *o, as_err *err) {
    if (!o || o->version != AS_ABI_VERSION || o->size != sizeof *o)
        return as_fail(err, "libattnsweep_kernels: options of ABI version %u (%u bytes), this "
                       "library speaks version %u (%zu bytes): rebuild or reinstall the package",
                       o ? o->version : 0u, o ? o->size : 0u, AS_ABI_VERSION, sizeof *o);
    if (!o->n_N || !o->n_T || !o->n_eps || !o->n_norm)
        return as_fail(err, "every axis needs at least one value (N %llu, T %llu, eps %llu, "
                       "normalizer %llu given)", (unsigned long long)o->n_N,
                       (unsigned long long)o->n_T, (unsigned long long)o->n_eps,
                       (unsigned long long)o->n_norm);
    for (uint64_t i = 0; i < o->n_norm; i++)
        if (o->normalizer[i] < 0 || o->normalizer[i] >= MET_N_NORMALIZERS)
            return as_fail(err, "normalizer %d is not one of the %d known", o->normalizer[i],
                           MET_N_NORMALIZERS);
    if (o->ks_random && !o->random_subsets)
        return as_fail(err, "ks_against = \"random\" needs dist_random (random_subsets >= 2)");
    *ax = (met_axes){
        .N = o->N, .n_N = o->n_N, .T = o->T, .n_T = o->n_T, .eps = o->eps, .n_eps = o->n_eps,
        .norm = (const met_normalizer *)o->normalizer, .n_norm = o->n_norm,
        .ssmax_scale = o->ssmax_scale, .entmax_alpha = o->entmax_alpha,
        .sigmoid_bias_set = o->sigmoid_bias_set, .sigmoid_bias = o->sigmoid_bias,
        .full_row = o->full_row != 0, .aggregate = o->aggregate != 0, .seed = o->seed,
        .window = o->window, .per_n_T = o->per_N_T,
        .skip = (o->grad_exact ? 0u : MET_SKIP_GRAD_EXACT) | (o->dist_expect ? 0u : MET_SKIP_DIST_EXPECT),
        .random_subsets = o->random_subsets,
    };
    return 0;
}

typedef struct {
    void *ws;
    size_t ws_bytes;
    double *head_out, *x, *e, *p, *scratch;
    float *scaled;
    size_t *cuts;
    double **blocks; /* [ncuts]: cut c's block in the caller's out */
} abi_buffers;

static void buffers_free(abi_buffers *m) {
    free(m->ws), free(m->head_out), free(m->x), free(m->e), free(m->p), free(m->scratch);
    free(m->scaled), free(m->cuts), free(m->blocks);
}

static int buffers_alloc(abi_buffers *m, const met_axes *ax, size_t L, size_t dim, size_t heads,
                         size_t ncuts, int scaled, as_err *err) {
    memset(m, 0, sizeof *m);
    m->ws_bytes = met_workspace_bytes(L, dim, ax);
    m->ws = malloc(m->ws_bytes);
    m->head_out = malloc(ncuts * met_out_count(ax) * sizeof(double));
    m->x = malloc(heads * sizeof(double));
    m->e = malloc(heads * sizeof(double));
    m->p = malloc(ax->n_N * sizeof(double));
    m->scratch = malloc(ks_scratch_doubles(heads, heads) * sizeof(double));
    m->scaled = scaled ? malloc(L * L * sizeof(float)) : NULL;
    m->cuts = malloc(ncuts * sizeof(size_t));
    m->blocks = malloc(ncuts * sizeof(double *));
    if (m->ws && m->head_out && m->x && m->e && m->p && m->scratch && m->cuts && m->blocks &&
        (m->scaled || !scaled))
        return 0;
    buffers_free(m);
    return as_fail(err, "out of memory: metrics workspace of %zu bytes for L = %zu", m->ws_bytes, L);
}

static int check_shape(uint64_t n_layer, uint64_t n_head, uint64_t L, uint64_t dim,
                       const uint64_t *cuts, uint64_t ncuts, as_err *err) {
    if (!n_layer || !n_head || !L || !dim)
        return as_fail(err, "empty input: %llu layers, %llu heads, L = %llu, dim = %llu",
                       (unsigned long long)n_layer, (unsigned long long)n_head,
                       (unsigned long long)L, (unsigned long long)dim);
    if (!ncuts) return as_fail(err, "no context length (cuts) given");
    for (uint64_t c = 0; c < ncuts; c++)
        if (cuts[c] < 1 || cuts[c] > L || (c && cuts[c] <= cuts[c - 1]))
            return as_fail(err, "context lengths must ascend within 1..%llu (got %llu at %llu)",
                           (unsigned long long)L, (unsigned long long)cuts[c], (unsigned long long)c);
    return 0;
}

static int cell(double *out, const float *scores, const float *vectors, uint64_t n_layer,
                uint64_t n_head, uint64_t L, uint64_t dim, uint64_t vls, uint64_t vhs,
                const int64_t *layer_id, const int64_t *head_id, const uint64_t *cuts,
                uint64_t ncuts, const as_abi_options *opt, as_err *err) {
    met_axes ax;
    if (axes_of(&ax, opt, err) || check_shape(n_layer, n_head, L, dim, cuts, ncuts, err)) return -1;
    cr_layout y;
    cr_layout_init(&y, ax.n_N, ax.n_T, ax.n_eps, ax.n_norm, n_layer, n_head);
    abi_buffers m;
    if (buffers_alloc(&m, &ax, L, dim, n_layer * n_head, ncuts, opt->scaled_d_head > 0, err)) return -1;
    for (uint64_t c = 0; c < ncuts; c++) m.cuts[c] = cuts[c], m.blocks[c] = out + c * y.total;
    for (size_t i = 0; i < ncuts * y.total; i++) out[i] = NAN;
    const float sqrt_d = (float)sqrt((double)opt->scaled_d_head); /* as src/sweep/cell.c forms it */
    for (size_t il = 0; il < n_layer; il++)
        for (size_t ih = 0; ih < n_head; ih++) {
            const float *s = scores + (il * n_head + ih) * L * L;
            if (m.scaled) {
                for (size_t t = 0; t < L; t++)
                    for (size_t j = 0; j <= t; j++) m.scaled[t * L + j] = s[t * L + j] / sqrt_d;
                s = m.scaled;
            }
            ax.layer = layer_id[il], ax.head = head_id[ih];
            if (met_head(m.head_out, m.ws, m.ws_bytes, s, L, vectors + il * vls + ih * vhs, L, dim,
                         m.cuts, ncuts, &ax, err)) {
                buffers_free(&m);
                return as_wrap(err, "layer %lld head %lld", (long long)layer_id[il], (long long)head_id[ih]);
            }
            met_scatter_head(m.blocks, &y, &ax, m.head_out, ncuts, il, ih);
        }
    for (uint64_t c = 0; c < ncuts; c++) {
        double *b = out + c * y.total;
        ks_cross_heads(b, &y, &ax, opt->ks_random, opt->ks_alpha, NULL, m.x, m.e, m.p, m.scratch);
        b[y.offset[CR_RANK]] = -1;
    }
    buffers_free(&m);
    return 0;
}

int32_t as_abi_cell(double *out, const float *scores, const float *vectors, uint64_t n_layer,
                    uint64_t n_head, uint64_t L, uint64_t dim, uint64_t vec_layer_stride,
                    uint64_t vec_head_stride, const int64_t *layer_id, const int64_t *head_id,
                    const uint64_t *cuts, uint64_t ncuts, const as_abi_options *opt, char *err,
                    uint64_t err_len) {
    as_err e = {{0}};
    int rc = cell(out, scores, vectors, n_layer, n_head, L, dim, vec_layer_stride, vec_head_stride,
                  layer_id, head_id, cuts, ncuts, opt, &e);
    if (rc && err && err_len) snprintf(err, err_len, "%s", e.msg);
    return rc;
}
