/* neox.c -- the GPT-NeoX (Pythia) forward, fwd_neox (forward_int.h).
 *
 * Hugging Face's GPTNeoXForCausalLM: embed_in (no position embedding);
 * per block LayerNorm (biased variance) -> fused query_key_value, whose
 * output is [H][3][D] per position (q, k, v interleaved per head) -> RoPE on
 * the first rotary_dim dims of each q and k head (rotate_half) -> causal
 * softmax(q.k / sqrt(D)) -> dense; the MLP dense_h_to_4h -> exact (erf) GELU
 * -> dense_4h_to_h. Parallel residual x + attn(ln1(x)) + mlp(ln2(x)) when
 * use_parallel_residual, else the sequential form. final_layer_norm, then
 * embed_out (or the tied embed_in). docs/families.md. */
#include <math.h>
#include <string.h>

#include "forward_int.h"
#include "gpt2.h"

/* x[t, i] = gelu(x[t, i] + b[i]) = 0.5 y (1 + erf(y / sqrt 2)), in place; x [rows, ld], n used */
static void bias_gelu_erf(float *x, size_t ld, const float *b, size_t rows, size_t n) {
    for (size_t t = 0; t < rows; t++) {
        float *row = x + t * ld;
        for (size_t i = 0; i < n; i++) {
            float y = row[i] + b[i];
            row[i] = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
        }
    }
}

/* q, k, v [H, L, D] from the fused output wide [L, 3C] plus its bias */
static void split_qkv(fwd_workspace *ws, const float *wide, const float *bias, size_t L, size_t H,
                      size_t D) {
    for (size_t t = 0; t < L; t++) {
        const float *row = wide + t * 3 * H * D;
        for (size_t h = 0; h < H; h++) {
            size_t src = h * 3 * D, dst = (h * L + t) * D;
            for (size_t i = 0; i < D; i++) {
                ws->q[dst + i] = row[src + i] + bias[src + i];
                ws->k[dst + i] = row[src + D + i] + bias[src + D + i];
                ws->v[dst + i] = row[src + 2 * D + i] + bias[src + 2 * D + i];
            }
        }
    }
}

/* y [rows, n] (stride ld) += b */
static void add_bias(float *y, size_t ld, const float *b, size_t rows, size_t n) {
    for (size_t t = 0; t < rows; t++)
        for (size_t i = 0; i < n; i++) y[t * ld + i] += b[i];
}

/* resid += mlp(ln2(resid_in)); ln2 of resid_in = ws->ln on entry */
static void mlp(fwd_workspace *ws, const gpt2_block *b, size_t L, size_t C, size_t NI) {
    fwd_linear(ws->wide, NI, ws->ln, C, b->fc_w, L, C, NI);
    bias_gelu_erf(ws->wide, NI, b->fc_b, L, NI);
    fwd_linear(ws->merged, C, ws->wide, NI, b->mlp_proj_w, L, NI, C);
    for (size_t t = 0; t < L; t++)
        for (size_t i = 0; i < C; i++) ws->resid[t * C + i] += ws->merged[t * C + i] + b->mlp_proj_b[i];
}

int fwd_neox(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
             const fwd_request *req, size_t n_blocks, as_err *err) {
    const gpt2_config *c = &m->cfg;
    const size_t C = c->n_embd, H = c->n_head, D = c->d_head, NI = c->n_inner;
    const float eps = c->layer_norm_epsilon;
    const int need_logits = req->n_logit_positions > 0;
    float *resid = ws->resid, *ln = ws->ln;

    fwd_embed(resid, m->wte, tokens, L, C);
    fwd_rope_tables(ws->rope_cos, ws->rope_sin, c, L);
    for (size_t l = 0; l < n_blocks; l++) {
        const gpt2_block *b = &m->blocks[l];
        gpt2_layernorm(ln, resid, b->ln_1_w, b->ln_1_b, L, C, eps);
        fwd_linear(ws->wide, 3 * C, ln, C, b->attn_w, L, C, 3 * C);
        split_qkv(ws, ws->wide, b->attn_b, L, H, D);
        fwd_rope_apply(ws->q, ws->rope_cos, ws->rope_sin, H, L, D, c->rotary_dim);
        fwd_rope_apply(ws->k, ws->rope_cos, ws->rope_sin, H, L, D, c->rotary_dim);
        fwd_attention_pattern(ws, L, H, D);
        if (fwd_capture(ws, req, l, L, ln, err)) return -1;
        if (!need_logits && l + 1 == n_blocks) break; /* nothing downstream is wanted */

        fwd_attention_values(ws->merged, C, ws, L, H, D);
        fwd_linear(ws->aux, C, ws->merged, C, b->attn_proj_w, L, C, C);
        add_bias(ws->aux, C, b->attn_proj_b, L, C);
        if (c->parallel_residual) {
            /* x + attn(ln1(x)) + mlp(ln2(x)): ln2 reads x before the attention lands */
            gpt2_layernorm(ln, resid, b->ln_2_w, b->ln_2_b, L, C, eps);
            for (size_t i = 0; i < L * C; i++) resid[i] += ws->aux[i];
        } else {
            for (size_t i = 0; i < L * C; i++) resid[i] += ws->aux[i];
            gpt2_layernorm(ln, resid, b->ln_2_w, b->ln_2_b, L, C, eps);
        }
        mlp(ws, b, L, C, NI);
    }
    if (need_logits) {
        size_t n = req->n_logit_positions;
        for (size_t i = 0; i < n; i++)
            gpt2_layernorm(ln + i * C, resid + req->logit_positions[i] * C, m->ln_f_w, m->ln_f_b,
                           1, C, eps);
        fwd_lm_head(req->logits, ln, m->lm_head, n, C, c->vocab_size);
    }
    return 0;
}
