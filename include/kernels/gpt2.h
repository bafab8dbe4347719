/* gpt2.h -- GPT-2's kernels. Its forward pass runs through fwd_forward
 * (forward.h), which dispatches to gpt2.c for model_type "gpt2".
 *
 * Semantics are those of Hugging Face's eager GPT2LMHeadModel: token +
 * learned position embeddings (positions 0..L-1: every window is a fresh
 * context), pre-LayerNorm blocks (biased variance, eps from the config),
 * fused c_attn (Conv1D, y = x @ W + b), causal attention with weights
 * softmax(q.k / sqrt(d_head)), tanh GELU ("gelu_new"), residuals, ln_f and
 * logits through the tied wte.
 *
 * The kernels below are pure functions over plain arrays. */
#ifndef ATTNSWEEP_GPT2_H
#define ATTNSWEEP_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "model.h"

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
/* The same for rows [r0, r1) only (the forward's causal row tiles). */
void gpt2_causal_softmax_rows(float *pattern, const float *scores, size_t L, size_t r0, size_t r1,
                              float sqrt_d);

/* exp(x) in float with relative error below 2e-7 for x in [-87, 88];
 * 0 below -87.3, about 2^127 above 88.3 and for NaN (propagating NaN stops
 * GCC from vectorizing the softmax loop; finite weights never produce it).
 * Written so that loops over it vectorize. */
float gpt2_expf(float x);

#endif
