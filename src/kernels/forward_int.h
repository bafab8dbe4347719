/* forward_int.h -- what the family forwards share (private to src/kernels/).
 * forward.c checks the request, sizes the workspace and dispatches; each
 * family's file runs its blocks with these pieces. */
#ifndef ATTNSWEEP_FORWARD_INT_H
#define ATTNSWEEP_FORWARD_INT_H

#include <stdint.h>

#include "forward.h"

/* exp(x) of gpt2_expf (gpt2.h: its accuracy and clamps), defined here and
 * inline: a call to gpt2_expf from another file is one scalar call per
 * element, which kept llama.c's SwiGLU loop from vectorizing. */
static inline float fwd_expf(float x) {
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

/* The family forwards: run blocks [0, n_blocks) over tokens[0..L), capture
 * as req asks, and the LM head when req lists positions. The request is
 * checked (forward.c). */
int fwd_gpt2(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
             const fwd_request *req, size_t n_blocks, as_err *err);
int fwd_neox(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
             const fwd_request *req, size_t n_blocks, as_err *err);
int fwd_llama(fwd_workspace *ws, const gpt2_model *m, const int32_t *tokens, size_t L,
              const fwd_request *req, size_t n_blocks, as_err *err);

/* scores and pattern of every head from ws->q, ws->k [H, L, D] (causal row
 * tiles; softmax(q.k / sqrt(D))). */
void fwd_attention_pattern(fwd_workspace *ws, size_t L, size_t H, size_t D);

/* out[t, h*D + i] (row stride ld) = sum_j pattern_h[t, j] v_h[j, i]. */
void fwd_attention_values(float *out, size_t ld, const fwd_workspace *ws, size_t L, size_t H,
                          size_t D);

/* Calls req->on_layer for layer l when the mask asks; the view's ln1 is ln. */
int fwd_capture(const fwd_workspace *ws, const fwd_request *req, size_t l, size_t L,
                const float *ln, as_err *err);

/* y [rows, out] (row stride ldy) = x [rows, in] (row stride ldx) W^T,
 * W [out, in] (nn.Linear's layout). */
void fwd_linear(float *y, size_t ldy, const float *x, size_t ldx, const float *W, size_t rows,
                size_t in, size_t out);

/* logits [n, V] = normed [n, C] head^T, head [V, C]. */
void fwd_lm_head(float *logits, const float *normed, const float *head, size_t n, size_t C,
                 size_t V);

/* resid[t, :] = embedding row tokens[t]. */
void fwd_embed(float *resid, const float *table, const int32_t *tokens, size_t L, size_t C);

#endif
