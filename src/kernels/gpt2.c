/* gpt2.c -- see gpt2.h. */
#include "gpt2.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Causal products are done in row tiles of this many query rows: tile
 * [r0, r1) only needs keys [0, r1), so about half of the L x L work is
 * skipped while each sgemm stays big enough to run near full speed. */
#define ATTN_ROW_TILE 128

/* Every arena view starts on a 64-byte boundary. */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* Arena layout, in floats (L = max_L, C = n_embd, H = n_head):
 * resid [L, C]   residual stream
 * ln    [L, C]   LayerNorm output (ln_1, then ln_2, then ln_f rows)
 * wide  [L, 4C]  c_attn output [L, 3C], c_proj output [L, C], MLP hidden [L, 4C]
 * q,k,v [H, L, D] each
 * scores, pattern [H, L, L]
 * merged [L, C]  heads merged back (attention output), then MLP c_proj output */
static size_t arena_floats_for(const gpt2_config *cfg, size_t L) {
    size_t C = cfg->n_embd, H = cfg->n_head;
    return 2 * round16(L * C) + round16(L * 4 * C) + 3 * round16(L * C) +
           2 * round16(H * L * L) + round16(L * C);
}

size_t gpt2_workspace_bytes(const gpt2_config *cfg, size_t max_L) {
    return arena_floats_for(cfg, max_L) * sizeof(float);
}

int gpt2_workspace_init(gpt2_workspace *ws, const gpt2_config *cfg, size_t max_L,
                        as_err *err) {
    memset(ws, 0, sizeof *ws);
    if (cfg->n_head == 0 || cfg->n_embd % cfg->n_head != 0)
        return as_fail(err, "gpt2: n_embd %zu is not a multiple of n_head %zu", cfg->n_embd,
                       cfg->n_head);
    if (cfg->n_layer > GPT2_MAX_LAYERS)
        return as_fail(err, "gpt2: n_layer %zu exceeds the supported %d", cfg->n_layer,
                       GPT2_MAX_LAYERS);
    if (max_L < 1 || max_L > cfg->n_positions)
        return as_fail(err, "gpt2: context length %zu outside 1..n_positions=%zu", max_L,
                       cfg->n_positions);
    size_t n = arena_floats_for(cfg, max_L);
    void *p = NULL;
    if (posix_memalign(&p, 64, n * sizeof(float)) != 0)
        return as_fail(err, "gpt2: cannot allocate %.1f MB of activations for L=%zu",
                       n * sizeof(float) / 1e6, max_L);
    ws->cfg = *cfg;
    ws->max_L = max_L;
    ws->arena = p;
    ws->arena_floats = n;
    size_t L = max_L, C = cfg->n_embd, H = cfg->n_head;
    float *at = ws->arena;
    ws->resid = at;   at += round16(L * C);
    ws->ln = at;      at += round16(L * C);
    ws->wide = at;    at += round16(L * 4 * C);
    ws->q = at;       at += round16(L * C);
    ws->k = at;       at += round16(L * C);
    ws->v = at;       at += round16(L * C);
    ws->scores = at;  at += round16(H * L * L);
    ws->pattern = at; at += round16(H * L * L);
    ws->merged = at;  at += round16(L * C);
    return 0;
}

void gpt2_workspace_free(gpt2_workspace *ws) {
    free(ws->arena);
    memset(ws, 0, sizeof *ws);
}

double gpt2_forward_flops(const gpt2_config *cfg, size_t L, size_t n_blocks, size_t n_logits) {
    double C = (double)cfg->n_embd, Ld = (double)L;
    /* c_attn 3C^2 + c_proj C^2 + c_fc 4C^2 + mlp c_proj 4C^2, 2 FLOPs each */
    double proj = 24.0 * Ld * C * C;
    /* q.k and pattern@v over the L(L+1)/2 visible pairs, all heads (H*D = C) */
    double attn = 2.0 * 2.0 * C * Ld * (Ld + 1) / 2.0;
    return (double)n_blocks * (proj + attn) + 2.0 * (double)n_logits * C * (double)cfg->vocab_size;
}

/* ---------------------------------------------------------------- kernels */

float gpt2_expf(float x) {
    /* exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2/2; degree-7
     * Taylor for exp(r) has truncation error < 6e-9 there. ln2 is split in a
     * high part exact in float times n and a low correction. */
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    /* plain compares and the 1.5 * 2^23 rounding trick instead of
     * fminf/fmaxf/floorf: those keep GCC from vectorizing without fast-math */
    float xc = x < -87.3f ? -87.3f : x;
    xc = xc <= 88.3f ? xc : 88.3f; /* NaN too: keeps the int conversion defined */
    const float round_magic = 12582912.0f; /* 1.5 * 2^23 */
    float n = (xc * log2e + round_magic) - round_magic;
    float r = (xc - n * ln2_hi) - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n through the exponent bits; a union (not memcpy) keeps the loops
     * calling this vectorizable */
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) << 23};
    float y = p * scale.f;
    return x < -87.3f ? 0.0f : y;
}

static float lane_sum(const float *a, size_t n);
static float lane_centered_sumsq(const float *a, size_t n, float mean);

void gpt2_layernorm(float *out, const float *x, const float *w, const float *b, size_t rows,
                    size_t n, float eps) {
    for (size_t t = 0; t < rows; t++) {
        const float *xr = x + t * n;
        float *orow = out + t * n;
        float mean = lane_sum(xr, n) / (float)n;
        float var = lane_centered_sumsq(xr, n, mean) / (float)n; /* biased, as torch */
        float inv = (float)(1.0 / sqrt((double)var + (double)eps));
        for (size_t i = 0; i < n; i++) orow[i] = (xr[i] - mean) * inv * w[i] + b[i];
    }
}

void gpt2_bias_gelu(float *x, const float *bias, size_t rows, size_t n) {
    /* 0.5 y (1 + tanh(u)) = y * sigmoid(2u) = y / (1 + exp(-2u)): no
     * cancellation for negative y, and one exp instead of a tanh. */
    const float two_c = 2.0f * 0.7978845608028654f; /* 2 sqrt(2/pi) */
    for (size_t t = 0; t < rows; t++) {
        float *row = x + t * n;
        for (size_t i = 0; i < n; i++) {
            float y = row[i] + bias[i];
            float u2 = two_c * (y + 0.044715f * y * y * y);
            row[i] = y / (1.0f + gpt2_expf(-u2));
        }
    }
}

/* Sum and max over 16 independent lanes so the loops vectorize without
 * reassociation flags. */
static float lane_max(const float *a, size_t n) {
    float lanes[16];
    for (int u = 0; u < 16; u++) lanes[u] = -INFINITY;
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int u = 0; u < 16; u++) lanes[u] = a[j + u] > lanes[u] ? a[j + u] : lanes[u];
    float m = -INFINITY;
    for (; j < n; j++) m = a[j] > m ? a[j] : m;
    for (int u = 0; u < 16; u++) m = lanes[u] > m ? lanes[u] : m;
    return m;
}

static float lane_sum(const float *a, size_t n) {
    float lanes[16] = {0};
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int u = 0; u < 16; u++) lanes[u] += a[j + u];
    double s = 0.0;
    for (; j < n; j++) s += a[j];
    for (int u = 0; u < 16; u++) s += lanes[u];
    return (float)s;
}

/* sum of (a[j] - mean)^2, lanes as above */
static float lane_centered_sumsq(const float *a, size_t n, float mean) {
    float lanes[16] = {0};
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int u = 0; u < 16; u++) {
            float d = a[j + u] - mean;
            lanes[u] += d * d;
        }
    double s = 0.0;
    for (; j < n; j++) s += (double)(a[j] - mean) * (a[j] - mean);
    for (int u = 0; u < 16; u++) s += lanes[u];
    return (float)s;
}

/* rows [r0, r1) of one head's causal softmax (see gpt2_causal_softmax) */
static void causal_softmax_rows(float *pattern, const float *scores, size_t L, size_t r0,
                                size_t r1, float sqrt_d) {
    const float inv_sqrt_d = 1.0f / sqrt_d;
    for (size_t t = r0; t < r1; t++) {
        const float *s = scores + t * L;
        float *p = pattern + t * L;
        size_t n = t + 1;
        /* Hugging Face divides by sqrt(d) and torch's softmax divides by
         * the sum; multiplying by reciprocals is within 1 ulp (exact for
         * sqrt(d) = 8) and much cheaper */
        for (size_t j = 0; j < n; j++) p[j] = s[j] * inv_sqrt_d;
        float m = lane_max(p, n);
        for (size_t j = 0; j < n; j++) p[j] = gpt2_expf(p[j] - m);
        float inv_sum = 1.0f / lane_sum(p, n);
        for (size_t j = 0; j < n; j++) p[j] *= inv_sum;
        if (n < L) memset(p + n, 0, (L - n) * sizeof(float));
    }
}

void gpt2_causal_softmax(float *pattern, const float *scores, size_t L, float sqrt_d) {
    causal_softmax_rows(pattern, scores, L, 0, L, sqrt_d);
}

/* --------------------------------------------------------------- forward */

/* y = x @ W for x [rows, in], W [in, out] (Conv1D layout), y [rows, out] */
static void conv1d(float *y, const float *x, const float *W, size_t rows, size_t in, size_t out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)out, (int)in, 1.0f, x,
                (int)in, W, (int)out, 0.0f, y, (int)out);
}

/* resid += y + b, y [rows, n] */
static void add_bias_residual(float *resid, const float *y, const float *b, size_t rows,
                              size_t n) {
    for (size_t t = 0; t < rows; t++)
        for (size_t i = 0; i < n; i++) resid[t * n + i] += y[t * n + i] + b[i];
}

static int check_request(const gpt2_workspace *ws, const gpt2_model *m, const int32_t *tokens,
                         size_t L, const gpt2_request *req, as_err *err) {
    const gpt2_config *c = &m->cfg;
    if (ws->cfg.n_embd != c->n_embd || ws->cfg.n_head != c->n_head ||
        ws->cfg.n_layer != c->n_layer)
        return as_fail(err, "gpt2: workspace was sized for another model config");
    if (L < 1 || L > ws->max_L)
        return as_fail(err, "gpt2: length %zu outside 1..%zu (the workspace's max_L)", L,
                       ws->max_L);
    for (size_t t = 0; t < L; t++)
        if (tokens[t] < 0 || (size_t)tokens[t] >= c->vocab_size)
            return as_fail(err, "gpt2: token %d at position %zu is outside the vocabulary of %zu",
                           tokens[t], t, c->vocab_size);
    if (c->n_layer < GPT2_MAX_LAYERS && (req->capture_mask >> c->n_layer) != 0)
        return as_fail(err, "gpt2: capture mask 0x%llx names a layer >= n_layer=%zu",
                       (unsigned long long)req->capture_mask, c->n_layer);
    if (req->capture_mask && !req->on_layer)
        return as_fail(err, "gpt2: capture mask set but no callback");
    if (req->n_logit_positions > ws->max_L) /* the ln_f rows live in the [max_L, C] ln buffer */
        return as_fail(err, "gpt2: %zu logit positions, at most %zu (max_L)",
                       req->n_logit_positions, ws->max_L);
    if (req->n_logit_positions && (!req->logits || !req->logit_positions))
        return as_fail(err, "gpt2: logit positions requested without an output buffer");
    for (size_t i = 0; i < req->n_logit_positions; i++)
        if (req->logit_positions[i] >= L)
            return as_fail(err, "gpt2: logit position %zu outside 0..%zu", req->logit_positions[i],
                           L - 1);
    return 0;
}

int gpt2_forward(gpt2_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
                 const gpt2_request *req, as_err *err) {
    if (check_request(ws, m, tokens, L, req, err) != 0) return -1;
    const gpt2_config *cfg = &m->cfg;
    const size_t C = cfg->n_embd, H = cfg->n_head, D = C / H, V = cfg->vocab_size;
    const int need_logits = req->n_logit_positions > 0;
    size_t deepest = 0; /* 1 + the deepest captured layer */
    for (size_t l = 0; l < cfg->n_layer; l++)
        if (req->capture_mask >> l & 1) deepest = l + 1;
    const size_t n_blocks = need_logits ? cfg->n_layer : deepest;
    const float sqrt_d = sqrtf((float)D);
    float *resid = ws->resid, *ln = ws->ln, *wide = ws->wide, *merged = ws->merged;

    for (size_t t = 0; t < L; t++) {
        const float *te = m->wte + (size_t)tokens[t] * C, *pe = m->wpe + t * C;
        for (size_t i = 0; i < C; i++) resid[t * C + i] = te[i] + pe[i];
    }

    for (size_t l = 0; l < n_blocks; l++) {
        const gpt2_block *b = &m->blocks[l];
        gpt2_layernorm(ln, resid, b->ln_1_w, b->ln_1_b, L, C, cfg->layer_norm_epsilon);
        conv1d(wide, ln, b->attn_w, L, C, 3 * C);
        /* split q | k | v into per-head [L, D] arrays, adding the bias */
        for (size_t t = 0; t < L; t++) {
            const float *row = wide + t * 3 * C;
            for (size_t h = 0; h < H; h++) {
                size_t src = h * D, dst = (h * L + t) * D;
                for (size_t i = 0; i < D; i++) {
                    ws->q[dst + i] = row[src + i] + b->attn_b[src + i];
                    ws->k[dst + i] = row[C + src + i] + b->attn_b[C + src + i];
                    ws->v[dst + i] = row[2 * C + src + i] + b->attn_b[2 * C + src + i];
                }
            }
        }
        for (size_t h = 0; h < H; h++) {
            const float *qh = ws->q + h * L * D, *kh = ws->k + h * L * D;
            float *sh = ws->scores + h * L * L, *ph = ws->pattern + h * L * L;
            for (size_t r0 = 0; r0 < L; r0 += ATTN_ROW_TILE) {
                size_t r1 = r0 + ATTN_ROW_TILE < L ? r0 + ATTN_ROW_TILE : L;
                /* scores[r0:r1, 0:r1] = q[r0:r1] k[0:r1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)r1,
                            (int)D, 1.0f, qh + r0 * D, (int)D, kh, (int)D, 0.0f, sh + r0 * L,
                            (int)L);
                causal_softmax_rows(ph, sh, L, r0, r1, sqrt_d);
            }
        }
        if (req->capture_mask >> l & 1) {
            gpt2_layer_view view = {.layer = l, .L = L, .n_head = H, .d_head = D, .n_embd = C,
                                    .q = ws->q, .k = ws->k, .v = ws->v, .scores = ws->scores,
                                    .pattern = ws->pattern, .ln1 = ln};
            if (req->on_layer(&view, req->user, err) != 0)
                return as_wrap(err, "layer %zu callback", l);
        }
        if (!need_logits && l + 1 == n_blocks) break; /* nothing downstream is wanted */

        for (size_t h = 0; h < H; h++) {
            const float *ph = ws->pattern + h * L * L, *vh = ws->v + h * L * D;
            for (size_t r0 = 0; r0 < L; r0 += ATTN_ROW_TILE) {
                size_t r1 = r0 + ATTN_ROW_TILE < L ? r0 + ATTN_ROW_TILE : L;
                /* merged[r0:r1, head h] = pattern[r0:r1, 0:r1] v[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)D,
                            (int)r1, 1.0f, ph + r0 * L, (int)L, vh, (int)D, 0.0f,
                            merged + r0 * C + h * D, (int)C);
            }
        }
        conv1d(wide, merged, b->attn_proj_w, L, C, C);
        add_bias_residual(resid, wide, b->attn_proj_b, L, C);

        gpt2_layernorm(ln, resid, b->ln_2_w, b->ln_2_b, L, C, cfg->layer_norm_epsilon);
        conv1d(wide, ln, b->fc_w, L, C, 4 * C);
        gpt2_bias_gelu(wide, b->fc_b, L, 4 * C);
        conv1d(merged, wide, b->mlp_proj_w, L, 4 * C, C);
        add_bias_residual(resid, merged, b->mlp_proj_b, L, C);
    }

    if (need_logits) {
        size_t n = req->n_logit_positions;
        for (size_t i = 0; i < n; i++)
            gpt2_layernorm(ln + i * C, resid + req->logit_positions[i] * C, m->ln_f_w, m->ln_f_b,
                           1, C, cfg->layer_norm_epsilon);
        /* logits [n, V] = ln_f [n, C] wte^T, wte [V, C] (tied head) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)V, (int)C, 1.0f, ln,
                    (int)C, m->wte, (int)C, 0.0f, req->logits, (int)V);
    }
    return 0;
}
