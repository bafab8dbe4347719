/* llama.c -- the Llama / Mistral / Qwen2 forward, fwd_llama (forward_int.h).
 *
 * Hugging Face's LlamaForCausalLM (Qwen2's adds q/k/v biases): embed_tokens;
 * per block RMSNorm -> q_proj [H D], k_proj, v_proj [KV D] (+ biases) ->
 * RoPE on all D dims (rotate_half) -> grouped-query attention, query head h
 * using kv head h / (H / KV) -> causal softmax(q.k / sqrt(D)) -> o_proj;
 * RMSNorm -> down_proj(silu(gate_proj x) * up_proj x); sequential residuals;
 * the final norm, then lm_head (or the tied embed_tokens). docs/families.md. */
#include <math.h>
#include <string.h>

#include "forward_int.h"
#include "gpt2.h"

/* q [H, L, D] and k, v [H, L, D] (kv head g copied to its H/KV query heads)
 * from wide [L, (H + 2 KV) D] = q | k | v, plus the biases when given. */
static void split_qkv(fwd_workspace *ws, const gpt2_block *b, size_t L, size_t H, size_t KV,
                      size_t D) {
    const size_t W = (H + 2 * KV) * D, group = H / KV;
    for (size_t t = 0; t < L; t++) {
        const float *row = ws->wide + t * W;
        for (size_t h = 0; h < H; h++) {
            const float *qs = row + h * D, *ks = row + H * D + (h / group) * D, *vs = ks + KV * D;
            float *qd = ws->q + (h * L + t) * D, *kd = ws->k + (h * L + t) * D,
                  *vd = ws->v + (h * L + t) * D;
            for (size_t i = 0; i < D; i++) {
                qd[i] = qs[i] + (b->q_b ? b->q_b[h * D + i] : 0.0f);
                kd[i] = ks[i] + (b->k_b ? b->k_b[(h / group) * D + i] : 0.0f);
                vd[i] = vs[i] + (b->v_b ? b->v_b[(h / group) * D + i] : 0.0f);
            }
        }
    }
}

/* resid += down(silu(gate x) * up x), x = ws->ln [L, C] */
static void swiglu_mlp(fwd_workspace *ws, const gpt2_block *b, size_t L, size_t C, size_t NI) {
    float *g = ws->wide; /* [L, 2I]: gate | up */
    fwd_linear(g, 2 * NI, ws->ln, C, b->gate_w, L, C, NI);
    fwd_linear(g + NI, 2 * NI, ws->ln, C, b->fc_w, L, C, NI);
    for (size_t t = 0; t < L; t++) {
        float *row = g + t * 2 * NI;
        for (size_t i = 0; i < NI; i++) {
            float x = row[i];
            row[i] = x / (1.0f + fwd_expf(-x)) * row[NI + i];
        }
    }
    fwd_linear(ws->merged, C, g, 2 * NI, b->mlp_proj_w, L, NI, C);
    for (size_t i = 0; i < L * C; i++) ws->resid[i] += ws->merged[i];
}

int fwd_llama(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
              const fwd_request *req, size_t n_blocks, as_err *err) {
    const gpt2_config *c = &m->cfg;
    const size_t C = c->n_embd, H = c->n_head, KV = c->n_kv_head, D = c->d_head, NI = c->n_inner;
    const size_t W = (H + 2 * KV) * D;
    const float eps = c->layer_norm_epsilon;
    const int need_logits = req->n_logit_positions > 0;
    float *resid = ws->resid, *ln = ws->ln;

    fwd_embed(resid, m->wte, tokens, L, C);
    fwd_rope_tables(ws->rope_cos, ws->rope_sin, c, L);
    for (size_t l = 0; l < n_blocks; l++) {
        const gpt2_block *b = &m->blocks[l];
        fwd_rmsnorm(ln, resid, b->ln_1_w, L, C, eps);
        fwd_linear(ws->wide, W, ln, C, b->q_w, L, C, H * D);
        fwd_linear(ws->wide + H * D, W, ln, C, b->k_w, L, C, KV * D);
        fwd_linear(ws->wide + (H + KV) * D, W, ln, C, b->v_w, L, C, KV * D);
        split_qkv(ws, b, L, H, KV, D);
        fwd_rope_apply(ws->q, ws->rope_cos, ws->rope_sin, H, L, D, c->rotary_dim);
        fwd_rope_apply(ws->k, ws->rope_cos, ws->rope_sin, H, L, D, c->rotary_dim);
        fwd_attention_pattern(ws, L, H, D);
        if (fwd_capture(ws, req, l, L, ln, err)) return -1;
        if (!need_logits && l + 1 == n_blocks) break; /* nothing downstream is wanted */

        fwd_attention_values(ws->merged, H * D, ws, L, H, D);
        fwd_linear(ws->aux, C, ws->merged, H * D, b->attn_proj_w, L, H * D, C);
        for (size_t i = 0; i < L * C; i++) resid[i] += ws->aux[i];
        fwd_rmsnorm(ln, resid, b->ln_2_w, L, C, eps);
        swiglu_mlp(ws, b, L, C, NI);
    }
    if (need_logits) {
        size_t n = req->n_logit_positions;
        for (size_t i = 0; i < n; i++)
            fwd_rmsnorm(ln + i * C, resid + req->logit_positions[i] * C, m->ln_f_w, 1, C, eps);
        fwd_lm_head(req->logits, ln, m->lm_head, n, C, c->vocab_size);
    }
    return 0;
}
