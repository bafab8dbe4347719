/* gpt2.c -- see gpt2.h: GPT-2's kernels and its forward (fwd_gpt2, forward_int.h). */
#include "gpt2.h"

#include "forward_int.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- kernels */

/* the body is fwd_expf (forward_int.h), inline there so that the other
 * families' loops over it vectorize too */
float gpt2_expf(float x) { return fwd_expf(x); }

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

void gpt2_causal_softmax_rows(float *pattern, const float *scores, size_t L, size_t r0, size_t r1,
                              float sqrt_d) {
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
    gpt2_causal_softmax_rows(pattern, scores, L, 0, L, sqrt_d);
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

int fwd_gpt2(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
             const fwd_request *req, size_t n_blocks, as_err *err) {
    const gpt2_config *cfg = &m->cfg;
    const size_t C = cfg->n_embd, H = cfg->n_head, D = C / H, V = cfg->vocab_size;
    const int need_logits = req->n_logit_positions > 0;
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
        fwd_attention_pattern(ws, L, H, D);
        if (fwd_capture(ws, req, l, L, ln, err)) return -1;
        if (!need_logits && l + 1 == n_blocks) break; /* nothing downstream is wanted */

        fwd_attention_values(merged, C, ws, L, H, D);
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
        fwd_lm_head(req->logits, ln, m->wte, n, C, V); /* tied head: wte [V, C] */
    }
    return 0;
}
