/* cellresult.h -- the results of one cell (one text window at one context
 * length L), as one flat block of doubles.
 *
 * One flat block because three modules pass it along: the cell computes it,
 * the scheduler ships it from a worker to the master in one MPI message, and
 * the store writes it into the HDF5 file (variables of docs/results.md
 * without their leading window and L dimensions). Integer quantities
 * (rows_used, crit_N) are stored as exact doubles in the block.
 *
 * Variable shapes inside the block, C order (last index fastest):
 *   per_N vars  [n_N][n_T][n_norm][n_layer][n_head]   dist_true dist_bound dist_expect
 *                                                sep_ratio sep_lower sep_upper sep_marginal
 *                                                rows_used
 *   per_T vars  [n_T][n_norm][n_layer][n_head]       entropy entropy_norm grad_exact grad_bound
 *   grad_fd     [n_T][n_eps][n_norm][n_layer][n_head]
 *   ks vars     [n_N][n_T][n_norm]                  ks_stat ks_pvalue
 *   crit_N      [n_T][n_norm]
 *   crit_N_censored [n_T][n_norm]  not filled by the cell: the store derives it from crit_N
 *                                  when it packs the block (cellwire.h)
 *   per_N vars  dist_random dist_random_se dist_random_upper (metrics.dist_random; NaN when off)
 * then, only in a SAMPLED layout (metrics.query_rows = "sample:K", docs/metrics.md 9.1;
 * count 0 otherwise, so an unsampled block is main's block, byte for byte once packed):
 *   the standard error of each per-row mean, with its mean's shape: dist_true_se ..
 *   sep_marginal_se (per_N), entropy_se entropy_norm_se grad_exact_se (per_T), grad_fd_se,
 *   dist_random_rows_se dist_random_upper_se (per_N: dist_random_se is already the name of
 *   dist_random's Monte-Carlo SE, so its row-sampling SE takes <var>_rows_se);
 *   rows_sampled [1]: the query rows of the N-independent means (rows_used counts the per-N)
 * followed by the bookkeeping scalars wall_time (seconds) and rank. */
#ifndef ATTNSWEEP_CELLRESULT_H
#define ATTNSWEEP_CELLRESULT_H

#include <stddef.h>

typedef enum {
    CR_DIST_TRUE, CR_DIST_BOUND, CR_DIST_EXPECT,
    CR_SEP_RATIO, CR_SEP_LOWER, CR_SEP_UPPER, CR_SEP_MARGINAL, CR_ROWS_USED,
    CR_ENTROPY, CR_ENTROPY_NORM, CR_GRAD_EXACT, CR_GRAD_BOUND,
    CR_GRAD_FD,
    CR_KS_STAT, CR_KS_PVALUE,
    CR_CRIT_N, CR_CRIT_N_CENSORED,
    CR_DIST_RANDOM, CR_DIST_RANDOM_SE, CR_DIST_RANDOM_UPPER,
    /* sampled layouts only, and last of the metrics: an unsampled layout is the one above */
    CR_DIST_TRUE_SE, CR_DIST_BOUND_SE, CR_DIST_EXPECT_SE, CR_SEP_RATIO_SE, CR_SEP_LOWER_SE,
    CR_SEP_UPPER_SE, CR_SEP_MARGINAL_SE, CR_ENTROPY_SE, CR_ENTROPY_NORM_SE, CR_GRAD_EXACT_SE,
    CR_GRAD_FD_SE, CR_DIST_RANDOM_ROWS_SE, CR_DIST_RANDOM_UPPER_SE, CR_ROWS_SAMPLED,
    CR_WALL_TIME, CR_RANK,
    CR_NVARS
} cr_var;

typedef enum { CR_SHAPE_PER_N, CR_SHAPE_PER_T, CR_SHAPE_PER_T_EPS, CR_SHAPE_KS,
               CR_SHAPE_CRIT, CR_SHAPE_SCALAR } cr_shape;

/* The variables a sampled layout adds: CR_FIRST_SAMPLED .. CR_WALL_TIME - 1. */
#define CR_FIRST_SAMPLED CR_DIST_TRUE_SE

typedef struct {
    size_t n_N, n_T, n_eps, n_norm, n_layer, n_head;
    int sampled;             /* the variables of metrics.query_rows = "sample:K" are there */
    size_t offset[CR_NVARS]; /* where each variable starts in the block */
    size_t count[CR_NVARS];  /* how many doubles it holds */
    size_t total;            /* doubles in the whole block */
} cr_layout;

/* Fills the offsets for the given axis sizes (unsampled: the sampled variables hold 0). */
void cr_layout_init(cr_layout *lay, size_t n_N, size_t n_T, size_t n_eps, size_t n_norm,
                    size_t n_layer, size_t n_head);
/* Turns the sampled variables on (or off) and recomputes the offsets. */
void cr_layout_sample(cr_layout *lay, int sampled);
/* Whether v exists in lay (every variable but the sampled ones of an unsampled layout);
 * the SE variable of a per-row mean (CR_NVARS for a variable without one). */
static inline int cr_var_in(const cr_layout *lay, int v) { return lay->sampled || v < CR_FIRST_SAMPLED || v >= CR_WALL_TIME; }
cr_var cr_var_se(cr_var mean);

/* Name in the results file ("dist_true", ...), and which shape it has. */
const char *cr_var_name(cr_var v);
cr_shape cr_var_shape(cr_var v);

/* Index helpers into the block (no bounds checks: the caller owns the loops). */
static inline size_t cr_at_per_n(const cr_layout *y, cr_var v, size_t n, size_t t, size_t z,
                                 size_t l, size_t h) {
    return y->offset[v] + (((n * y->n_T + t) * y->n_norm + z) * y->n_layer + l) * y->n_head + h;
}
static inline size_t cr_at_per_t(const cr_layout *y, cr_var v, size_t t, size_t z, size_t l,
                                 size_t h) {
    return y->offset[v] + ((t * y->n_norm + z) * y->n_layer + l) * y->n_head + h;
}
static inline size_t cr_at_grad_fd(const cr_layout *y, size_t t, size_t e, size_t z, size_t l,
                                   size_t h) {
    return y->offset[CR_GRAD_FD] + (((t * y->n_eps + e) * y->n_norm + z) * y->n_layer + l) * y->n_head + h;
}
static inline size_t cr_at_ks(const cr_layout *y, cr_var v, size_t n, size_t t, size_t z) {
    return y->offset[v] + (n * y->n_T + t) * y->n_norm + z;
}
static inline size_t cr_at_crit(const cr_layout *y, size_t t, size_t z) {
    return y->offset[CR_CRIT_N] + t * y->n_norm + z;
}

#endif
