/* abi.h -- a stable C ABI over the metrics for foreign callers (the Python package's ctypes
 * binding, python/attnsweep/_native.py), exported by libattnsweep_kernels.so.
 *
 * Why a shim: met_axes (metrics.h) grows fields as metrics are added; a caller that mirrors
 * it byte for byte would break silently. This header is the contract instead: plain arrays,
 * fixed-width integers, and an options struct that only grows at its end, with its own size
 * and AS_ABI_VERSION checked on every call (a mismatch is an error, never a misread).
 *
 * as_abi_cell computes what one cell of the sweep holds for the given heads: met_head per
 * head (docs/metrics.md sections 4-10), then the cross-head KS test and crit_N (section 5)
 * over all given heads, exactly as src/sweep/cell.c does -- the same kernels, the same
 * order, so the values equal the sweep's bit for bit on the same scores and vectors.
 *
 *   out     [ncuts][as_abi_layout total] doubles, the cell block of include/core/cellresult.h
 *           (its wall_time and rank are set to NaN and -1)
 *   scores  [n_layer][n_head][L][L] float32 raw logits q.k (only j <= t is read)
 *   vectors [n_layer][n_head][L][dim] float32, read at vectors + l * vec_layer_stride +
 *           h * vec_head_stride (in floats; vec_head_stride = 0 shares one [L][dim] block per
 *           layer between its heads, as vectors = "resid" does)
 *   layer_id [n_layer], head_id [n_head]: the model's layer and head numbers (they key the
 *           random directions of grad_fd, section 7)
 *   cuts    [ncuts] ascending context lengths 1..L (means over the rows t < cut)
 * Returns 0, or -1 with a one-line message in err [err_len].
 */
#ifndef ATTNSWEEP_ABI_H
#define ATTNSWEEP_ABI_H

#include <stdint.h>

#define AS_ABI_VERSION 2u /* 2: random_subsets, ks_random */

#if defined(__GNUC__)
#define AS_ABI_EXPORT __attribute__((visibility("default")))
#else
#define AS_ABI_EXPORT
#endif

typedef struct {
    uint32_t size;        /* sizeof(as_abi_options) as the caller built it */
    uint32_t version;     /* AS_ABI_VERSION */
    const int32_t *N;
    uint64_t n_N;
    const double *T;
    uint64_t n_T;
    const double *eps;
    uint64_t n_eps;
    const int32_t *normalizer; /* met_normalizer values (as_abi_normalizer_name) */
    uint64_t n_norm;
    const uint8_t *per_N_T;    /* [n_T] 1 where the per-N family is computed; NULL: all T */
    double ssmax_scale;        /* 0 -> 1/ln 1024 */
    double entmax_alpha;       /* 0 -> 1.5 */
    double sigmoid_bias;
    int32_t sigmoid_bias_set;
    int32_t full_row;          /* rows = "full_row" */
    int32_t aggregate;         /* distance = "aggregate" */
    int32_t scaled_d_head;     /* > 0: logits = "scaled", scores / sqrt(d_head) in float32 */
    int32_t grad_exact;        /* 0: metrics.grad_exact = false */
    int32_t dist_expect;       /* 0: metrics.dist_expect = false */
    uint64_t seed;
    int64_t window;
    double ks_alpha;
    uint32_t random_subsets;   /* metrics.dist_random: K >= 2 subsets per row; 0: off */
    int32_t ks_random;         /* metrics.ks_against = "random" (needs random_subsets) */
} as_abi_options;

AS_ABI_EXPORT uint32_t as_abi_version(void);
/* The cell block's variables: count, the file's name and shape class (cr_shape) of each. */
AS_ABI_EXPORT int32_t as_abi_nvars(void);
AS_ABI_EXPORT const char *as_abi_var_name(int32_t v);
AS_ABI_EXPORT int32_t as_abi_var_shape(int32_t v);
/* offset [as_abi_nvars] of each variable in the block; returns the block's doubles. The
 * variables of a sampled sweep (metrics.query_rows, cellresult.h) hold no doubles here: their
 * offset is the next variable's. */
AS_ABI_EXPORT uint64_t as_abi_layout(uint64_t *offset, uint64_t n_N, uint64_t n_T, uint64_t n_eps,
                                     uint64_t n_norm, uint64_t n_layer, uint64_t n_head);
/* The normalizers' names by enum value ("?" past the last); -1 for an unknown name. */
AS_ABI_EXPORT const char *as_abi_normalizer_name(int32_t z);
AS_ABI_EXPORT int32_t as_abi_normalizer_count(void);

AS_ABI_EXPORT int32_t as_abi_cell(double *out, const float *scores, const float *vectors,
                                  uint64_t n_layer, uint64_t n_head, uint64_t L, uint64_t dim,
                                  uint64_t vec_layer_stride, uint64_t vec_head_stride,
                                  const int64_t *layer_id, const int64_t *head_id,
                                  const uint64_t *cuts, uint64_t ncuts, const as_abi_options *opt,
                                  char *err, uint64_t err_len);

#endif
