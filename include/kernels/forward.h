/* forward.h -- the forward pass of every model family (float32, OpenBLAS)
 * with streamed per-layer attention capture: one interface, one kernel file
 * per family (gpt2.c, neox.c, llama.c; what each computes: docs/families.md).
 *
 * Semantics are those of Hugging Face's eager *ForCausalLM of the family,
 * positions 0..L-1 (every window is a fresh context), float32 throughout
 * except the rotary angles (t * inv_freq, cos, sin: double, then rounded).
 *
 * Memory: fwd_workspace_init() sizes ONE arena for the longest context the
 * run needs (max_L); fwd_forward() allocates nothing. A workspace is used by
 * one thread at a time.
 *
 * Capture is streamed: right after block l's attention pattern is computed,
 * the caller's callback sees that layer's tensors (fwd_layer_view); the
 * buffers are reused by the next layer, so a callback that needs anything
 * later must copy it. Only one layer's L x L matrices exist at a time. The
 * view is the same for every family (docs/metrics.md, "What the metrics see
 * per family"): q and k after the rotary embedding; the head axis is the
 * query heads, and under grouped-query attention k and v of head h are those
 * of its kv group (h / (n_head / n_kv_head)), copied.
 *
 * Work done is only what was asked for: blocks past the deepest captured
 * layer are not run (nor the MLP of that deepest block) unless logits are
 * requested; the LM head runs only for the positions listed in the request. */
#ifndef ATTNSWEEP_FORWARD_H
#define ATTNSWEEP_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "model.h"

/* The most layers a capture mask can name. */
#define FWD_MAX_LAYERS 64

/* One layer's attention, valid only during the callback.
 * H = n_head (query heads), D = d_head, C = n_embd, L = sequence length. */
typedef struct {
    size_t layer;   /* block index, 0-based */
    size_t L, n_head, d_head, n_embd;
    /* [H, L, D] each, after the projection's bias (and, for the rotary
     * families, q and k after RoPE); head h's rows start at q + h*L*D. */
    const float *q, *k, *v;
    /* [H, L, L]: raw q.k WITHOUT the 1/sqrt(D) factor. Row t is valid for
     * j <= t only; entries above the diagonal are unspecified. */
    const float *scores;
    /* [H, L, L]: the model's attention weights softmax(q.k / sqrt(D)) over
     * j <= t; exactly 0 above the diagonal. */
    const float *pattern;
    /* [L, C]: the block's input-norm output (the input of the q/k/v
     * projection); shared by the layer's heads (metrics vectors = "resid"). */
    const float *ln1;
} fwd_layer_view;

/* Returns 0 to go on; non-zero aborts the forward pass, which then returns -1
 * with the callback's err message (wrapped with the layer). */
typedef int (*fwd_layer_fn)(const fwd_layer_view *view, void *user, as_err *err);

typedef struct {
    /* Bit l set: call on_layer after block l's attention. 0 = no capture. */
    uint64_t capture_mask;
    fwd_layer_fn on_layer;
    void *user;
    /* Next-token logits at the listed positions (each < L, at most max_L of
     * them, repeats allowed), written as
     * logits[i * vocab_size + token] for i < n_logit_positions. With
     * n_logit_positions = 0 no LM head runs (and logits may be NULL). */
    const size_t *logit_positions;
    size_t n_logit_positions;
    float *logits;
} fwd_request;

typedef struct {
    gpt2_config cfg;
    size_t max_L;
    float *arena;
    size_t arena_floats;
    /* views into the arena (forward.c gives the shapes) */
    float *resid, *ln, *aux, *wide, *q, *k, *v, *scores, *pattern, *merged, *rope_cos, *rope_sin;
} fwd_workspace;

/* Sizes the arena for contexts up to max_L (1 <= max_L <= n_positions, and
 * within a sliding window the model applies: full causal attention is all
 * the kernels compute). */
int fwd_workspace_init(fwd_workspace *ws, const gpt2_config *cfg, size_t max_L, as_err *err);
void fwd_workspace_free(fwd_workspace *ws);
/* Bytes the arena for max_L would take (for planning memory per rank). */
size_t fwd_workspace_bytes(const gpt2_config *cfg, size_t max_L);

/* Runs the forward pass over tokens[0..L). Checks L against the workspace,
 * token ids against the vocabulary, the mask against n_layer and logit
 * positions against L; returns 0 or -1 with err set. */
int fwd_forward(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
                const fwd_request *req, as_err *err);

/* FLOPs (multiply-add = 2) of n_blocks full blocks at length L plus an LM
 * head at n_logits positions, counting the causal attention products over the
 * L(L+1)/2 visible (t, j) pairs only -- the useful work; the kernels also do
 * the upper halves of the diagonal tiles. For the benchmark's roofline. */
double fwd_flops(const gpt2_config *cfg, size_t L, size_t n_blocks, size_t n_logits);

/* ---- kernels of the rotary families (pure; exposed for the unit tests) ---- */

/* out[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * w. out, x: [rows, n]. */
void fwd_rmsnorm(float *out, const float *x, const float *w, size_t rows, size_t n, float eps);

/* The rotary tables for positions 0..L-1: angle a = t * inv_freq[i], i <
 * rot/2, inv_freq[i] = theta^(-2i/rot) scaled as cfg->rope_scaling says
 * (docs/families.md); cos_t, sin_t: [L, rot/2]. */
void fwd_rope_tables(float *cos_t, float *sin_t, const gpt2_config *cfg, size_t L);

/* Rotates the first rot dims of every row of x [H, L, D] (rotate_half
 * convention: pairs (i, i + rot/2)) by the tables above. */
void fwd_rope_apply(float *x, const float *cos_t, const float *sin_t, size_t H, size_t L,
                    size_t D, size_t rot);

#endif
