/* metrics_int.h -- private declarations shared by the metrics.c files (not a public header). */
#ifndef AS_KERNELS_METRICS_INT_H
#define AS_KERNELS_METRICS_INT_H

#include "metrics.h"

#include <math.h>
#include <string.h>

/* Functions defined here are static in every file that includes this header (as they were in
 * the single metrics.c), so each caller keeps inlining them. */
#define MET_SHARED static __attribute__((unused))

#define MET_DEFAULT_CONTEXT 1024.0

/* The explicit differences of the cancellation fallbacks must not be contracted: a*y - s with
 * s = round(a*y) fused into one FMA gives the rounding error of a*y (1e-17) where the
 * difference of two equal products is 0 (exact twins: r = 0, delta = 0). */
#if defined(__clang__)
#define MET_NO_CONTRACT
#define MET_NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define MET_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#define MET_NO_CONTRACT_BODY
#else
#define MET_NO_CONTRACT
#define MET_NO_CONTRACT_BODY
#endif

/* ---------------- normalizers (section 10) ---------------- */

/* y [n] = exp(x [n]) for x <= 0 (softmax only exponentiates shifted logits), in a branch-free
 * loop the compiler vectorizes: glibc's scalar exp was a fifth of the head job. Method:
 * x = k ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 split in a 32-bit-exact head and a tail),
 * exp(r) by its degree-13 Taylor polynomial (truncation below 5e-18 relative), times 2^k built
 * in the exponent bits, applied as two factors so that results down to the subnormal range
 * (x >= -745.2) are rounded once, as exp does. Error: ~1 ulp against the correctly rounded
 * value. x < -746 gives 0 (exp underflows there anyway), NaN gives NaN. */
MET_SHARED void exp_nonpos(double *y, const double *x, size_t n) {
    const double log2e = 1.4426950408889634, shifter = 0x1.8p52;
    const double ln2_hi = 0x1.62e42fefa39efp-1, ln2_lo = 0x1.abc9e3b39803fp-56;
    for (size_t j = 0; j < n; j++) {
        double xj = x[j];
        double xc = xj < -746.0 ? -746.0 : xj;
        xc = xc > 0.0 ? 0.0 : xc;
        double kt = xc * log2e + shifter; /* round(xc log2e) in the low mantissa bits */
        double k = kt - shifter;
        double r = (xc - k * ln2_hi) - k * ln2_lo;
        double p = 1.0 / 6227020800.0;
        p = p * r + 1.0 / 479001600.0;
        p = p * r + 1.0 / 39916800.0;
        p = p * r + 1.0 / 3628800.0;
        p = p * r + 1.0 / 362880.0;
        p = p * r + 1.0 / 40320.0;
        p = p * r + 1.0 / 5040.0;
        p = p * r + 1.0 / 720.0;
        p = p * r + 1.0 / 120.0;
        p = p * r + 1.0 / 24.0;
        p = p * r + 1.0 / 6.0;
        p = p * r + 0.5;
        p = p * r + 1.0;
        p = p * r + 1.0;
        int64_t kb, ki;
        memcpy(&kb, &kt, sizeof kb);
        ki = kb - (int64_t)0x4338000000000000; /* = k, in [-1077, 0] */
        int64_t k1 = ki / 2, k2 = ki - k1;
        uint64_t b1 = (uint64_t)(k1 + 1023) << 52, b2 = (uint64_t)(k2 + 1023) << 52;
        double s1, s2;
        memcpy(&s1, &b1, sizeof s1);
        memcpy(&s2, &b2, sizeof s2);
        double e = p * s1 * s2;
        y[j] = xj < -746.0 ? 0.0 : (xj != xj ? xj : e);
    }
}

#define LANES 8
MET_SHARED double lane_sum(const double *x, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) acc[q] += x[i + q];
    for (; i < n; i++) acc[0] += x[i];
    double s = 0;
    for (int q = 0; q < LANES; q++) s += acc[q];
    return s;
}
MET_SHARED double lane_dot(const double *x, const double *y, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) acc[q] += x[i + q] * y[i + q];
    for (; i < n; i++) acc[0] += x[i] * y[i];
    double s = 0;
    for (int q = 0; q < LANES; q++) s += acc[q];
    return s;
}
/* grad_fd (docs/metrics.md section 7): a sum of squared weight changes below this has lost
 * digits to underflow (every change below ~1e-154 squares to 0 or a subnormal), so the norm is
 * taken again with the changes divided by the largest one. Above it nothing changes. */
#define MET_FD_TINY 0x1p-900
/* sum_j (s x_j - y_j)^2 */
MET_SHARED double lane_sqdiff(const double *x, double s, const double *y, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) {
            double d = s * x[i + q] - y[i + q];
            acc[q] += d * d;
        }
    for (; i < n; i++) {
        double d = s * x[i] - y[i];
        acc[0] += d * d;
    }
    double t = 0;
    for (int q = 0; q < LANES; q++) t += acc[q];
    return t;
}
/* || s x - y || (n entries; y NULL: || s x ||) given t = its square: sqrt(t), or where the
 * squares underflowed (t < MET_FD_TINY) the norm again with the entries divided by the largest */
MET_SHARED double norm_from_sq(const double *x, double s, const double *y, size_t n, double t) {
    if (!(t < MET_FD_TINY)) return sqrt(t);
    double big = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(s * x[i] - (y ? y[i] : 0.0));
        big = d > big ? d : big;
    }
    if (!(big > 0)) return sqrt(t);
    t = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (s * x[i] - (y ? y[i] : 0.0)) / big;
        t += d * d;
    }
    return big * sqrt(t);
}
/* || s x - y || (n entries), scaled by the largest difference where the squares underflow */
MET_SHARED double lane_normdiff(const double *x, double s, const double *y, size_t n) {
    return norm_from_sq(x, s, y, n, lane_sqdiff(x, s, y, n));
}

MET_SHARED double ssmax_factor(double scale, size_t n) {
    double s = scale > 0 ? scale : 1.0 / log(MET_DEFAULT_CONTEXT);
    return s * log((double)n);
}


/* Cancellation guard of the Gram expansions (docs/metrics.md section 4.4): a squared
 * distance |p - q|^2 = |p|^2 - 2 p.q + |q|^2 whose value falls below MET_CANCEL (|p|^2 + |q|^2)
 * has lost more than ~6 of its digits to the subtraction (the Gram sums carry ~(d + N) ulps);
 * such entries are evaluated again as an explicit difference. Realistic heads never get
 * there: it takes vectors equal to ~1e-3 relative (near-duplicates, exact twins). */
#define MET_CANCEL 1e-6
/* sep_marginal (docs/metrics.md section 6): a selected i whose |D_i^2 - r^2| is at most
 * MET_MARGINAL |s^y|^2 is inside or outside by a margin no float evaluation of D_i itself
 * resolves (D_i and r both round to |s^y|). */
#define MET_MARGINAL 1e-12

/* y_i [k] = x_i [k] / |x_i| (0 for a zero vector), by division as docs/metrics.md section 6
 * writes it: the fallbacks below must not add the rounding of 1/|x| to a difference they
 * compute because the expansion could not */
static inline double y_of(const double *x, size_t k, double norm) {
    return norm > 0 ? x[k] / norm : 0.0;
}

/* |alpha y - s|^2 with y = x / norm, as an explicit difference */
MET_NO_CONTRACT MET_SHARED double sq_diff_y(const double *x, double norm, double alpha,
                                        const double *s, size_t dim) {
    MET_NO_CONTRACT_BODY
    double t = 0;
    for (size_t k = 0; k < dim; k++) {
        double d = alpha * y_of(x, k, norm) - s[k];
        t += d * d;
    }
    return t;
}

/* ---------------- the head job ---------------- */

/* Workspace of one head job. Names follow docs/metrics.md: x_j the token vectors, y_j =
 * x_j / |x_j| (section 6), G = X X^T, a the weights of one row at one T, I_N the top-N set
 * (section 3) grown in the sorted order `order`. "_T" arrays hold one entry (or one row) per
 * temperature of the grid, for the normalizer being processed. */
typedef struct {
    size_t L, dim, ld, nU, Kmax, nout, U_ld;
    const met_axes *ax;
    const float *scores;
    /* per head */
    double *X;         /* [L][dim] x_j in double */
    const float *Xf;   /* [L][dim] x_j as captured (the caller's vectors: X = (double) Xf) */
    float *XTf;        /* [dim][L] Xf transposed (e = S X^T reads its rows) */
    double *G;         /* [L][L] Gram matrix G_ij = x_i . x_j */
    double *x_sq;      /* [L] |x_j|^2 = G_jj */
    double *x_norm;    /* [L] |x_j| */
    double *x_sq_pmax; /* [L] max_{i <= j} |x_i|^2 (NaN skipped; 0 for all-zero) */
    uint64_t *dir_ctr; /* [L + 2] the directions' counter hashes (met_direction_counters) */
    double *x_inv;     /* [L] 1 / |x_j|, 0 for a zero vector */
    double *y_sq;      /* [L] |y_j|^2: 1, or 0 for a zero vector */
    double *delta_run; /* [L] delta of row t: min_{i < j <= t} |y_i - y_j| (section 6) */
    /* per row */
    double *l;         /* [L] raw logits l_j of the row (section 3) */
    double *z;         /* [L] scaled logits, scratch of the normalizers */
    double *ap;        /* [L] perturbed weights of grad_fd (section 7), scratch */
    double *u;         /* [n_eps][L] grad_fd directions (section 7) */
    double *u_range;   /* [n_eps][2] min and max of each direction's entries */
    double *a_T;       /* [n_T][L] weights a_j of every T */
    uint32_t *order;   /* [L] top-K order (section 3): I_N = order[0 .. N) */
    uint32_t *scratch; /* [L] */
    /* section 4.3, dist_expect: S = sum_j a_j x_j over every j, e_j = x_j . S, |S|^2 */
    double *S_T;       /* [n_T][dim] */
    double *e_T;       /* [n_T][L] */
    double *S_sq_T;    /* [n_T] */
    uint32_t *sparse_T;  /* [n_T] 1: at most n/4 weights are nonzero, visit only those */
    uint32_t *nz_idx_T;  /* [n_T][L] indices of the nonzero weights (sparse T only) */
    uint32_t *nnz_T;     /* [n_T] their count */
    /* sections 4 and 6, grown with N: c_j = sum_{i in I_N} a_i G_ij and
     * |x_j| c^y_j = sum_{i in I_N} (a_i / |x_i|) G_ij, so that
     * |a_j x_j - s|^2 = a_j^2 |x_j|^2 - 2 a_j c_j + |s|^2 and likewise for y */
    double *sel_w;     /* [2 n_T][K]: row 2T a_{order[k]}, row 2T+1 a_{order[k]} / |x_{order[k]}| */
    uint32_t *sel_w_end; /* [2 n_T] row r of sel_w is 0 from this column on */
    double *c_T;       /* [2 n_T][L]: row 2T c_j, row 2T+1 |x_j| c^y_j */
    double *A_T;       /* [n_T] selected mass A = sum_{i in I_N} a_i */
    double *Q_T;       /* [n_T] sum_{i in I_N} a_i^2 (section 6's Q, before removing i) */
    size_t *zero_sel_T; /* [n_T] selected entries of weight exactly 0 */
    double *is_unsel;  /* [L] 1 for j not in I_N, 0 in I_N */
    double *sel_inf;   /* [L] +inf for j in I_N, 0 otherwise (keeps them out of min D_j) */
    uint32_t *rank;    /* [L] position of j in order when j in I_N, UINT32_MAX otherwise */
    double *d1_sq_run; /* [L] max_{p in I_N} |x_j - x_p|^2 (section 4.2's d1, before the max over j) */
    double *d1_N, *m_N; /* [nU] d1 and m of each unique grid N (normalizer-independent) */
    double x_sq_max;   /* max_j |x_j|^2 over the row (scale of d1's cancellation guard) */
    double *not_topK;  /* [L] 1 for j outside the top-K order[0..K), 0 inside */
    double *U_T;       /* [n_T][K+1] unselected mass U_N = sum_{j not in I_N} a_j, summed
                        * directly (U_N = U_{N+1} + a_{order[N]}), not as 1 - A */
    double *s_vec;     /* [dim] s or s^y formed explicitly (cancellation fallbacks) */
    double *sel_gather; /* [5][K] per selected q: 1/|x|, c, c^y, |y|^2, the sep_upper exponent */
    /* row blocks (met_rows_per_block): order, a_T, S_T, e_T, S_sq_T, sparse_T, nz_idx_T, nnz_T
     * and U_T hold rows_per_block slots, one per row of a block, back to back, so that the
     * block's dist_expect sums are one kernel call; the pointers above address the current
     * slot (met_select_slot) */
    size_t rows_per_block;
    uint32_t *order0, *sparse_T0, *nz_idx_T0, *nnz_T0;
    double *a_T0, *S_T0, *e_T0, *S_sq_T0, *U_T0;
    /* grid bookkeeping and accumulators */
    double *acc, *cntN;
    double cntT;
    /* metrics.query_rows = "sample:K" (section 9.1; carved only then): the cut's rows, one
     * row's values (acc while a row runs) and the sums of their squares */
    uint32_t *samp_rows;
    double *row_acc, *acc_sq;
    int finite; /* every vector entry finite: zero weights may be skipped (0 * x = 0) */
    /* metrics.per_N_T (metrics.h): the walk over N runs for the n_W grid T wT [n_W] only;
     * grid T iT keeps its weights in slot slotT [iT] of a_T, the walked T in slots 0 .. n_W
     * (so that they stay one matrix for the kernels), in grid order. Every T walked: both
     * are the identity. The "_T" arrays of the walk (S_T .. U_T) are indexed by slot. */
    size_t n_W;
    uint32_t *wT, *slotT;
    int do_expect;     /* dist_expect's S and e are needed (on, or the aggregate reading) */
    int do_grad_exact; /* metrics.grad_exact */
    uint32_t *uN, *uOf, *iota, *uStart, *uIdx;
    /* section 10.1 */
    double *y_scr;      /* [L] scratch of the new normalizers' grad_fd */
    int d1_valid;       /* d1_N, m_N hold the row's logit-order d1 and m (the first walk's) */
    /* sa_softmax's top-N order is by weight and depends on T (section 3): a row where it
     * differs from the logit order walks each T alone, with its own order, d1 and m, into
     * sa_acc (one T, one normalizer), added into acc afterwards */
    uint32_t *sa_order, *sa_idx, *sa_tmp; /* [L] */
    double *sa_acc;     /* [met_out_count of one T and one normalizer] */
    double *d1_N_alt, *m_N_alt; /* [nU] */
    /* section 4.6, dist_random (ax->random_subsets > 0): e = a G and |S|^2 of the walked T,
     * the kernel's scratch and its output of one N */
    double *rnd_e, *rnd_S_sq, *rnd_d, *rnd_out;
    uint32_t *rnd_i;
} met_ws;

#define NVAL 7 /* per-N values: dist_true dist_bound dist_expect sep_ratio sep_lower sep_upper
                 sep_marginal (the MET_ order up to MET_ROWS_USED) */

/* metrics_norm.c: normalizers, grad_fd, grad_exact (called once per row and T) */
double met_softmax_scaled(double *a, double *x, const double *l, double f, size_t n);
double met_weights_with_z(double *a, double *z, double *zmax_out, const double *l, size_t nv,
                          size_t n, double T, met_normalizer zn, double ssmax_scale);
double met_softmax_change_norm(const double *a, size_t p, const double *l, const double *u,
                               double u_lo, double u_hi, double f, double eps, size_t n, double *ap,
                               double *z);
double met_jacobian_norm(const double *a, size_t n, double *rest);
/* Rows per block of visible rows: dist_expect's S = a X and e = X S of a grid with few T read
 * each float vector once for the whole block instead of once per row (the kernel keeps up to
 * 6 rows in registers). One normalizer and fewer than 6 T only (d1 of a row is shared by its
 * normalizers, and a grid with 6 T or more fills the kernel's rows by itself); 1 otherwise. */
static inline size_t met_rows_per_block(const met_axes *ax) {
    if (ax->full_row || ax->n_norm != 1 || ax->n_T >= 6) return 1;
    /* a block is there for dist_expect's sums, over every T's slot: all T walked */
    if (ax->skip & MET_SKIP_DIST_EXPECT) return 1;
    for (size_t iT = 0; ax->per_n_T && iT < ax->n_T; iT++)
        if (!ax->per_n_T[iT]) return 1;
    if (ax->norm[0] == MET_SA_SOFTMAX) return 1; /* its order may differ per T: row by row */
    return 6 / ax->n_T;
}
/* metrics.c: one row of the head job (called once per row by met_head in metrics_head.c), or
 * the visible rows t0 .. t0 + nrows - 1 (nrows <= rows_per_block, finite vectors) as a block */
void met_process_row(met_ws *w, size_t t, size_t n, double delta);
/* the means of a cut from acc and the counts (section 9); zeroing them for the next cut */
void met_finish_cut(double *out, met_ws *w);
void met_reset_acc(met_ws *w);
/* metrics_rows.c (section 9.1): every cut on its sampled rows, means and SE into out (nout
 * per cut); met_exact_se: SE 0 where a mean of out is a number (every row was taken) */
void met_sampled_cuts(double *out, met_ws *w, const size_t *cuts, size_t ncuts);
void met_exact_se(double *out, const met_axes *ax);
void met_process_rows(met_ws *w, size_t t0, size_t nrows);
/* metrics_head.c: dist_random of row t (n keys) at normalizer iZ, every walked T and grid N */
void met_random_row(met_ws *w, size_t t, size_t n, size_t iZ);

#endif
