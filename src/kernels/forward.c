/* forward.c -- see forward.h: the workspace, the request check, the dispatch
 * to the family's forward, and the pieces the families share (attention in
 * causal row tiles, the rotary tables, RMSNorm, the LM head). */
#include "forward.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward_int.h"
#include "gpt2.h"

/* Causal products are done in row tiles of this many query rows: tile
 * [r0, r1) only needs keys [0, r1), so about half of the L x L work is
 * skipped while each sgemm stays big enough to run near full speed. */
#define ATTN_ROW_TILE 128

/* Every arena view starts on a 64-byte boundary. */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* The width of `wide`, the projections' scratch [L, W]: gpt2 c_attn 3C then
 * the MLP's 4C; gpt_neox query_key_value 3C then the MLP's I; llama/qwen2 q|k|v
 * (H + 2 KV) D then gate|up 2I. */
static size_t wide_cols(const gpt2_config *c) {
    size_t qkv = (c->n_head + 2 * c->n_kv_head) * c->d_head;
    size_t mlp = c->family == MODEL_LLAMA || c->family == MODEL_QWEN2 ? 2 * c->n_inner : c->n_inner;
    return qkv > mlp ? qkv : mlp;
}

/* Arena layout, in floats (L = max_L, C = n_embd, H = n_head, QD = H D):
 * resid [L, C]   residual stream
 * ln    [L, C]   norm output (the block's two norms, then the final norm's rows)
 * aux   [L, C]   gpt_neox: the attention output, kept for the parallel residual
 * wide  [L, W]   projections (wide_cols)
 * q,k,v [H, L, D] each (k, v per query head: GQA groups copied)
 * scores, pattern [H, L, L]
 * merged [L, max(C, QD)]  heads merged back, then the MLP's output
 * rope_cos, rope_sin [L, rot/2] */
static size_t arena_floats_for(const gpt2_config *c, size_t L) {
    size_t C = c->n_embd, H = c->n_head, QD = H * c->d_head, M = C > QD ? C : QD;
    return 3 * round16(L * C) + round16(L * wide_cols(c)) + 3 * round16(L * QD) +
           2 * round16(H * L * L) + round16(L * M) + 2 * round16(L * (c->rotary_dim / 2));
}

size_t fwd_workspace_bytes(const gpt2_config *cfg, size_t max_L) {
    return arena_floats_for(cfg, max_L) * sizeof(float);
}

static int check_config(const gpt2_config *c, size_t max_L, as_err *err) {
    const char *f = model_family_name(c->family);
    if (c->family >= MODEL_N_FAMILIES) return as_fail(err, "forward: unknown model family");
    if (c->n_head == 0 || c->d_head == 0 || c->n_kv_head == 0 || c->n_head % c->n_kv_head)
        return as_fail(err, "%s: %zu heads of %zu dims over %zu kv heads is not a valid shape", f,
                       c->n_head, c->d_head, c->n_kv_head);
    if (c->family == MODEL_GPT2 && c->n_embd != c->n_head * c->d_head)
        return as_fail(err, "gpt2: n_embd %zu is not a multiple of n_head %zu", c->n_embd,
                       c->n_head);
    if (c->rotary_dim % 2 || c->rotary_dim > c->d_head)
        return as_fail(err, "%s: rotary_dim %zu must be even and at most d_head %zu", f,
                       c->rotary_dim, c->d_head);
    if (c->n_layer > FWD_MAX_LAYERS)
        return as_fail(err, "%s: n_layer %zu exceeds the supported %d", f, c->n_layer,
                       FWD_MAX_LAYERS);
    if (max_L < 1 || max_L > c->n_positions)
        return as_fail(err, "%s: context length %zu outside 1..n_positions=%zu", f, max_L,
                       c->n_positions);
    if (c->sliding_window && max_L > c->sliding_window)
        return as_fail(err, "%s: the model's sliding_window %zu would apply inside L = %zu "
                            "(attnsweep computes full causal attention); use L <= %zu", f,
                       c->sliding_window, max_L, c->sliding_window);
    return 0;
}

int fwd_workspace_init(fwd_workspace *ws, const gpt2_config *cfg, size_t max_L, as_err *err) {
    memset(ws, 0, sizeof *ws);
    if (check_config(cfg, max_L, err)) return -1;
    size_t n = arena_floats_for(cfg, max_L);
    void *p = NULL;
    if (posix_memalign(&p, 64, n * sizeof(float)) != 0)
        return as_fail(err, "%s: cannot allocate %.1f MB of activations for L=%zu",
                       model_family_name(cfg->family), n * sizeof(float) / 1e6, max_L);
    ws->cfg = *cfg;
    ws->max_L = max_L;
    ws->arena = p;
    ws->arena_floats = n;
    size_t L = max_L, C = cfg->n_embd, H = cfg->n_head, QD = H * cfg->d_head;
    size_t M = C > QD ? C : QD, R = L * (cfg->rotary_dim / 2);
    float *at = ws->arena;
    ws->resid = at;    at += round16(L * C);
    ws->ln = at;       at += round16(L * C);
    ws->aux = at;      at += round16(L * C);
    ws->wide = at;     at += round16(L * wide_cols(cfg));
    ws->q = at;        at += round16(L * QD);
    ws->k = at;        at += round16(L * QD);
    ws->v = at;        at += round16(L * QD);
    ws->scores = at;   at += round16(H * L * L);
    ws->pattern = at;  at += round16(H * L * L);
    ws->merged = at;   at += round16(L * M);
    ws->rope_cos = at; at += round16(R);
    ws->rope_sin = at;
    return 0;
}

void fwd_workspace_free(fwd_workspace *ws) {
    free(ws->arena);
    memset(ws, 0, sizeof *ws);
}

double fwd_flops(const gpt2_config *c, size_t L, size_t n_blocks, size_t n_logits) {
    double C = (double)c->n_embd, Ld = (double)L, NI = (double)c->n_inner;
    double QD = (double)(c->n_head * c->d_head), KD = (double)(c->n_kv_head * c->d_head);
    int swiglu = c->family == MODEL_LLAMA || c->family == MODEL_QWEN2;
    /* q, k, v and output projections, the MLP's two (SwiGLU: three) matrices; 2 FLOPs each */
    double proj = 2.0 * Ld * (C * (QD + 2.0 * KD) + QD * C + (swiglu ? 3.0 : 2.0) * C * NI);
    /* q.k and pattern@v over the L(L+1)/2 visible pairs, all query heads */
    double attn = 2.0 * 2.0 * QD * Ld * (Ld + 1) / 2.0;
    return (double)n_blocks * (proj + attn) + 2.0 * (double)n_logits * C * (double)c->vocab_size;
}

static int check_request(const fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens,
                         size_t L, const fwd_request *req, as_err *err) {
    const gpt2_config *c = &m->cfg;
    const char *f = model_family_name(c->family);
    if (ws->cfg.family != c->family || ws->cfg.n_embd != c->n_embd ||
        ws->cfg.n_head != c->n_head || ws->cfg.n_layer != c->n_layer ||
        ws->cfg.n_kv_head != c->n_kv_head || ws->cfg.d_head != c->d_head ||
        ws->cfg.n_inner != c->n_inner || ws->cfg.rotary_dim != c->rotary_dim)
        return as_fail(err, "%s: workspace was sized for another model config", f);
    if (L < 1 || L > ws->max_L)
        return as_fail(err, "%s: length %zu outside 1..%zu (the workspace's max_L)", f, L,
                       ws->max_L);
    for (size_t t = 0; t < L; t++)
        if (tokens[t] < 0 || (size_t)tokens[t] >= c->vocab_size)
            return as_fail(err, "%s: token %d at position %zu is outside the vocabulary of %zu",
                           f, tokens[t], t, c->vocab_size);
    if (c->n_layer < FWD_MAX_LAYERS && (req->capture_mask >> c->n_layer) != 0)
        return as_fail(err, "%s: capture mask 0x%llx names a layer >= n_layer=%zu", f,
                       (unsigned long long)req->capture_mask, c->n_layer);
    if (req->capture_mask && !req->on_layer)
        return as_fail(err, "%s: capture mask set but no callback", f);
    if (req->n_logit_positions > ws->max_L) /* the final norm's rows live in the [max_L, C] ln */
        return as_fail(err, "%s: %zu logit positions, at most %zu (max_L)", f,
                       req->n_logit_positions, ws->max_L);
    if (req->n_logit_positions && (!req->logits || !req->logit_positions))
        return as_fail(err, "%s: logit positions requested without an output buffer", f);
    for (size_t i = 0; i < req->n_logit_positions; i++)
        if (req->logit_positions[i] >= L)
            return as_fail(err, "%s: logit position %zu outside 0..%zu", f,
                           req->logit_positions[i], L - 1);
    return 0;
}

int fwd_forward(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
                const fwd_request *req, as_err *err) {
    if (check_request(ws, m, tokens, L, req, err) != 0) return -1;
    size_t deepest = 0; /* 1 + the deepest captured layer */
    for (size_t l = 0; l < m->cfg.n_layer; l++)
        if (req->capture_mask >> l & 1) deepest = l + 1;
    const size_t n_blocks = req->n_logit_positions > 0 ? m->cfg.n_layer : deepest;
    switch (m->cfg.family) {
    case MODEL_GPT2: return fwd_gpt2(ws, m, tokens, L, req, n_blocks, err);
    case MODEL_NEOX: return fwd_neox(ws, m, tokens, L, req, n_blocks, err);
    case MODEL_LLAMA:
    case MODEL_QWEN2: return fwd_llama(ws, m, tokens, L, req, n_blocks, err);
    default: return as_fail(err, "forward: unknown model family");
    }
}

/* ---------------------------------------------------------- shared pieces */

void fwd_attention_pattern(fwd_workspace *ws, size_t L, size_t H, size_t D) {
    const float sqrt_d = sqrtf((float)D);
    for (size_t h = 0; h < H; h++) {
        const float *qh = ws->q + h * L * D, *kh = ws->k + h * L * D;
        float *sh = ws->scores + h * L * L, *ph = ws->pattern + h * L * L;
        for (size_t r0 = 0; r0 < L; r0 += ATTN_ROW_TILE) {
            size_t r1 = r0 + ATTN_ROW_TILE < L ? r0 + ATTN_ROW_TILE : L;
            /* scores[r0:r1, 0:r1] = q[r0:r1] k[0:r1]^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)r1, (int)D,
                        1.0f, qh + r0 * D, (int)D, kh, (int)D, 0.0f, sh + r0 * L, (int)L);
            gpt2_causal_softmax_rows(ph, sh, L, r0, r1, sqrt_d);
        }
    }
}

void fwd_attention_values(float *out, size_t ld, const fwd_workspace *ws, size_t L, size_t H,
                          size_t D) {
    for (size_t h = 0; h < H; h++) {
        const float *ph = ws->pattern + h * L * L, *vh = ws->v + h * L * D;
        for (size_t r0 = 0; r0 < L; r0 += ATTN_ROW_TILE) {
            size_t r1 = r0 + ATTN_ROW_TILE < L ? r0 + ATTN_ROW_TILE : L;
            /* out[r0:r1, head h] = pattern[r0:r1, 0:r1] v[0:r1] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)D,
                        (int)r1, 1.0f, ph + r0 * L, (int)L, vh, (int)D, 0.0f, out + r0 * ld + h * D,
                        (int)ld);
        }
    }
}

int fwd_capture(const fwd_workspace *ws, const fwd_request *req, size_t l, size_t L,
                const float *ln, as_err *err) {
    if (!(req->capture_mask >> l & 1)) return 0;
    const gpt2_config *c = &ws->cfg;
    fwd_layer_view view = {.layer = l, .L = L, .n_head = c->n_head, .d_head = c->d_head,
                           .n_embd = c->n_embd, .q = ws->q, .k = ws->k, .v = ws->v,
                           .scores = ws->scores, .pattern = ws->pattern, .ln1 = ln};
    if (req->on_layer(&view, req->user, err) != 0) return as_wrap(err, "layer %zu callback", l);
    return 0;
}

void fwd_linear(float *y, size_t ldy, const float *x, size_t ldx, const float *W, size_t rows,
                size_t in, size_t out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out, (int)in, 1.0f, x,
                (int)ldx, W, (int)in, 0.0f, y, (int)ldy);
}

void fwd_lm_head(float *logits, const float *normed, const float *head, size_t n, size_t C,
                 size_t V) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)V, (int)C, 1.0f, normed,
                (int)C, head, (int)C, 0.0f, logits, (int)V);
}

void fwd_embed(float *resid, const float *table, const int32_t *tokens, size_t L, size_t C) {
    for (size_t t = 0; t < L; t++) memcpy(resid + t * C, table + (size_t)tokens[t] * C, C * sizeof(float));
}

/* -------------------------------------------------- kernels of the rotary families */

void fwd_rmsnorm(float *out, const float *x, const float *w, size_t rows, size_t n, float eps) {
    for (size_t t = 0; t < rows; t++) {
        const float *xr = x + t * n;
        float *orow = out + t * n;
        float lanes[16] = {0};
        size_t j = 0;
        for (; j + 16 <= n; j += 16)
            for (int u = 0; u < 16; u++) lanes[u] += xr[j + u] * xr[j + u];
        double s = 0.0;
        for (; j < n; j++) s += (double)xr[j] * xr[j];
        for (int u = 0; u < 16; u++) s += lanes[u];
        float inv = (float)(1.0 / sqrt(s / (double)n + (double)eps));
        for (size_t i = 0; i < n; i++) orow[i] = xr[i] * inv * w[i];
    }
}

/* inv_freq[i] of docs/families.md "Rotary embedding": theta^(-2i/rot), then
 * linear scaling divides by factor; llama3 divides the long wavelengths by
 * factor, keeps the short ones and interpolates between. */
static double inv_freq(const gpt2_config *c, size_t i) {
    double f = pow(c->rope_theta, -(double)(2 * i) / (double)c->rotary_dim);
    if (c->rope_scaling == ROPE_LINEAR) return f / c->rope_factor;
    if (c->rope_scaling != ROPE_LLAMA3) return f;
    const double two_pi = 6.283185307179586476925;
    double old = (double)c->rope_original_max_positions, wavelen = two_pi / f;
    double low_wavelen = old / c->rope_low_freq_factor, high_wavelen = old / c->rope_high_freq_factor;
    if (wavelen < high_wavelen) return f;
    if (wavelen > low_wavelen) return f / c->rope_factor;
    double smooth = (old / wavelen - c->rope_low_freq_factor) /
                    (c->rope_high_freq_factor - c->rope_low_freq_factor);
    return (1.0 - smooth) * f / c->rope_factor + smooth * f;
}

void fwd_rope_tables(float *cos_t, float *sin_t, const gpt2_config *cfg, size_t L) {
    size_t half = cfg->rotary_dim / 2;
    for (size_t i = 0; i < half; i++) {
        double f = inv_freq(cfg, i);
        for (size_t t = 0; t < L; t++) {
            double a = (double)t * f;
            cos_t[t * half + i] = (float)cos(a);
            sin_t[t * half + i] = (float)sin(a);
        }
    }
}

void fwd_rope_apply(float *x, const float *cos_t, const float *sin_t, size_t H, size_t L,
                    size_t D, size_t rot) {
    size_t half = rot / 2;
    for (size_t h = 0; h < H; h++)
        for (size_t t = 0; t < L; t++) {
            float *row = x + (h * L + t) * D;
            const float *c = cos_t + t * half, *s = sin_t + t * half;
            for (size_t i = 0; i < half; i++) {
                float a = row[i], b = row[i + half];
                row[i] = a * c[i] - b * s[i];
                row[i + half] = b * c[i] + a * s[i];
            }
        }
}
