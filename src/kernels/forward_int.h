/* forward_int.h -- what the family forwards share (private to src/kernels/).
 * forward.c checks the request, sizes the workspace and dispatches; each
 * family's file runs its blocks with these pieces. */
#ifndef ATTNSWEEP_FORWARD_INT_H
#define ATTNSWEEP_FORWARD_INT_H

#include "forward.h"

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
