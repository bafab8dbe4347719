/* gpt2.h -- the GPT-2 forward pass (float32, OpenBLAS) with streamed
 * per-layer attention capture.
 *
 * Semantics are those of Hugging Face's eager GPT2LMHeadModel: token +
 * learned position embeddings (positions 0..L-1: every window is a fresh
 * context), pre-LayerNorm blocks (biased variance, eps from the config),
 * fused c_attn (Conv1D, y = x @ W + b), causal attention with weights
 * softmax(q.k / sqrt(d_head)), tanh GELU ("gelu_new"), residuals, ln_f and
 * logits through the tied wte.
 *
 * Memory: gpt2_workspace_init() sizes ONE arena for the longest context the
 * run needs (max_L); gpt2_forward() allocates nothing. A workspace is used by
 * one thread at a time.
 *
 * Capture is streamed: right after block l's attention pattern is computed,
 * the caller's callback sees that layer's tensors (gpt2_layer_view); the
 * buffers are reused by the next layer, so a callback that needs anything
 * later must copy it. Only one layer's L x L matrices exist at a time.
 *
 * Work done is only what was asked for: blocks past the deepest captured
 * layer are not run (nor the MLP of that deepest block) unless logits are
 * requested; the LM head (ln_f + tied wte) runs only for the positions listed
 * in the request.                                                            */
#ifndef ATTNSWEEP_GPT2_H
#define ATTNSWEEP_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "model.h"

/* The most layers a capture mask can name (GPT-2 XL has 48). */
#define GPT2_MAX_LAYERS 64

/* One layer's attention, valid only during the callback.
 * H = n_head, D = d_head, C = n_embd, L = sequence length. */
typedef struct {
    size_t layer;   /* block index, 0-based */
    size_t L, n_head, d_head, n_embd;
    /* [H, L, D] each, after the c_attn bias; head h's rows start at
     * q + h*L*D (a plain row-major [L, D] array). */
    const float *q, *k, *v;
    /* [H, L, L]: raw q.k WITHOUT the 1/sqrt(D) factor. Row t is valid for
     * j <= t only; entries above the diagonal are unspecified. */
    const float *scores;
    /* [H, L, L]: GPT-2's attention weights softmax(q.k / sqrt(D)) over
     * j <= t; exactly 0 above the diagonal. */
    const float *pattern;
    /* [L, C]: the block's ln_1 output (the input of c_attn); shared by the
     * layer's heads (metrics option vectors = "resid"). */
    const float *ln1;
} gpt2_layer_view;

/* Returns 0 to go on; non-zero aborts the forward pass, which then returns -1
 * with the callback's err message (wrapped with the layer). */
typedef int (*gpt2_layer_fn)(const gpt2_layer_view *view, void *user, as_err *err);

typedef struct {
    /* Bit l set: call on_layer after block l's attention. 0 = no capture. */
    uint64_t capture_mask;
    gpt2_layer_fn on_layer;
    void *user;
    /* Next-token logits at the listed positions (each < L, at most max_L of
     * them, repeats allowed), written as
     * logits[i * vocab_size + token] for i < n_logit_positions. With
     * n_logit_positions = 0 no LM head runs (and logits may be NULL). */
    const size_t *logit_positions;
    size_t n_logit_positions;
    float *logits;
} gpt2_request;

typedef struct {
    gpt2_config cfg;
    size_t max_L;
    size_t max_logit_positions;
    float *arena;
    size_t arena_floats;
    /* views into the arena (see gpt2.c for shapes) */
    float *resid, *ln, *wide, *q, *k, *v, *scores, *pattern, *merged;
} gpt2_workspace;

/* Sizes the arena for contexts up to max_L (1 <= max_L <= n_positions). */
int gpt2_workspace_init(gpt2_workspace *ws, const gpt2_config *cfg, size_t max_L,
                        as_err *err);
void gpt2_workspace_free(gpt2_workspace *ws);
/* Bytes the arena for max_L would take (for planning memory per rank). */
size_t gpt2_workspace_bytes(const gpt2_config *cfg, size_t max_L);

/* Runs the forward pass over tokens[0..L). Checks L against the workspace,
 * token ids against the vocabulary, the mask against n_layer and logit
 * positions against L; returns 0 or -1 with err set. */
int gpt2_forward(gpt2_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
                 const gpt2_request *req, as_err *err);

/* FLOPs (multiply-add = 2) of n_blocks full blocks at length L plus an LM
 * head at n_logits positions, counting the causal attention products over the
 * L(L+1)/2 visible (t, j) pairs only -- the useful work; the kernels also do
 * the upper halves of the diagonal tiles. For the benchmark's roofline. */
double gpt2_forward_flops(const gpt2_config *cfg, size_t L, size_t n_blocks, size_t n_logits);

/* ---- kernels (pure; exposed for the unit tests) ---- */

/* out[t, :] = (x[t, :] - mean) / sqrt(var + eps) * w + b, biased variance.
 * out, x: [rows, n]; w, b: [n]. out may equal x. */
void gpt2_layernorm(float *out, const float *x, const float *w, const float *b, size_t rows,
                    size_t n, float eps);

/* x[i] = gelu_new(x[i] + bias[i % n]) = 0.5 y (1 + tanh(sqrt(2/pi)(y + 0.044715 y^3)))
 * with y = x + bias, in place. x: [rows, n]; bias: [n]. */
void gpt2_bias_gelu(float *x, const float *bias, size_t rows, size_t n);

/* Causal softmax of one score matrix: for row t, pattern[t, j] =
 * exp(s_j - m) / sum_{i<=t} exp(s_i - m) with s_j = scores[t, j] / sqrt_d and
 * m the row's max, for j <= t; pattern[t, j] = 0 for j > t.
 * scores, pattern: [L, L] (row stride L). */
void gpt2_causal_softmax(float *pattern, const float *scores, size_t L, float sqrt_d);

/* exp(x) in float with relative error below 2e-7 for x in [-87, 88];
 * 0 below -87.3, about 2^127 above 88.3 and for NaN (propagating NaN stops
 * GCC from vectorizing the softmax loop; finite weights never produce it).
 * Written so that loops over it vectorize. */
float gpt2_expf(float x);

#endif
