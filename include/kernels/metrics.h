/* metrics.h -- the paper's per-head metrics (docs/metrics.md, sections 1-11),
 * computed exactly over ONE head's captured arrays. No MPI, HDF5 or config here.
 *
 * Inputs (float32, as captured; all accumulation in double):
 *   scores  [L][ld]   raw logits q_t . k_j WITHOUT 1/sqrt(d_head) (section 1). Only j <= t is
 *                     ever read, so the dump's NaN above the diagonal is harmless.
 *   vectors [L][dim]  token vectors x_j: value vectors (dim = d_head) or, with
 *                     vectors="resid", the layer's ln_1 output (dim = C). The choice is the
 *                     caller's: this module only sees "the vectors".
 *
 * Decisions where the paper leaves room (docs/metrics.md section 13 lists them all):
 *  - Top-N order (section 3): indices sorted by raw logit, descending, ties -> lower index.
 *    This is T- and normalizer-independent. For softmax/ssmax it equals the order of a_j
 *    whenever the a_j differ; where a_j tie only because of underflow (T = 1e-3) or
 *    sparsemax's exact zeros, the logit order decides (the limit of the untied order).
 *  - rows="full_row" (section 2): row t has n = Lc entries (Lc = the cut's context length),
 *    a_j = 0 and logit -inf for j > t; masked keys rank after every visible key (lower index
 *    first) and are ordinary "unselected" tokens in d1, dist_true, dist_expect, r; delta is the min
 *    pairwise distance over all Lc normalized vectors; entropy_norm divides by ln Lc; ssmax
 *    uses ln Lc; the normalizer itself only sees the t+1 visible logits; grad_fd's direction
 *    u is a unit vector over the t+1 visible entries (perturbing a -inf logit changes
 *    nothing). Every row then has n = Lc >= 2, so all Lc rows enter the N-independent means
 *    and the per-N means when Lc > N. full_row rows depend on Lc, so prefix cuts cost one
 *    pass per cut (visible rows are shared: one pass serves every cut).
 *  - distance="aggregate" (the second reading of section 4): dist_true =
 *    || sum_{i not in I_N} a_i x_i - s || = || S - 2 s || (S = sum_j a_j x_j), dist_bound =
 *    U d1 + |U - A| m (U the unselected mass, summed over its weights), dist_expect = (|n - 2N| / n) ||S|| (the norm of
 *    the expected difference for I_N uniform: P(i in I_N) = N/n). Separability is unchanged.
 *  - ssmax (section 10): a = softmax((s ln n) * l / T), s = ssmax_scale (0 -> 1/ln 1024).
 *  - The five normalizers after ssmax (section 10.1, metrics_norm.c): top-N by weight, which
 *    is the logit order except for sa_softmax (negative logits; its rows with a different
 *    order walk each T alone); entropy of |a| / sum |a|; grad_exact for sigmoid, softmax1,
 *    entmax15, NaN for sa_softmax and sa_softmax_norm; d1 is taken by a row's first walk.
 *  - grad_exact is NaN for sparsemax and ssmax (section 10); grad_bound is the
 *    T-only curve min(1/(4T), sqrt 2) for every normalizer.
 *  - A zero vector x_j normalizes to y_j = 0 (section 6). If the radius r is 0, no selected
 *    token can be strictly inside: N_s = 0 and sep_lower = 0 (avoids 0/0). delta of a single
 *    vector is +inf, but such rows (n = 1) never enter per-N means.
 *  - Entropy uses ln a_j = z_j - z_max - ln Z for softmax/ssmax (exact identity, no log per
 *    entry) with ln Z = ln c + log1p(R / c) (c maximal entries, R the rest: near-one-hot rows
 *    keep R < 1e-16); sparsemax sums -a ln a over its nonzero entries. Both normalizers shift
 *    the logits by their maximum before scaling by 1/T (l_j - max l is exact for float32
 *    logits in double).
 *  - sep_ratio (section 6) decides D_i < r by the exact rewrite g_i < min_{j unselected} g_j,
 *    g = D^2 - |s^y|^2 = a^2 |y|^2 - 2 a (s^y . y): no |s^y|^2 to cancel, so a selected weight
 *    1e-30 of the dominant one is decided by its true margin (a direct evaluation of D_i and
 *    r rounds both to |s^y| and counts by round-off). sep_marginal = the share of selected i
 *    with |D_i^2 - r^2| <= 1e-12 |s^y|^2: decisions a float evaluation of D_i could not make
 *    (and exact ties: twins, where N_s is the strict-< convention). Where g underflows
 *    (weights below DBL_MIN: logit gaps above ~708 T), N_s is decided on g held as sign and
 *    ln|g| from the log weights (metrics.c, tiny_weight_count; docs/metrics.md section 6.2).
 *    Where the radius took its explicit fallback (r^2 below 1e-6 |s^y|^2), g's rounding
 *    (~1e-16 a |s^y|) can exceed margins of size r^2, so N_s counts D_i^2 < r^2 with D_i^2
 *    an explicit difference too (metrics.c, direct_count).
 *  - sep_lower, sep_upper (section 6.1): B = A - a_i and Q - a_i^2 of the one selected key
 *    above A / 2 are the sums over the other keys (A - a_i cancels there; met_sep_xi).
 *  - dist_bound uses the unselected mass U summed from the tail (U_N = U_{N+1} + a_order[N]),
 *    not 1 - A (which is 0 below 1e-16 and made the bound 0 < dist_true).
 *  - grad_fd (softmax, ssmax) without the difference of two nearly equal softmaxes:
 *    a'_j - a_j = a_j (expm1(d_j) - mu) / (1 + mu), d = f eps (u - u_p) (p the dominant entry),
 *    mu = sum a_j expm1(d_j), when max |d| <= 1/2; otherwise the perturbed softmax, its
 *    changes taken directly except the dominant one's, minus their sum. Sparsemax: the direct
 *    difference (its weights are affine in z on a support). For every normalizer, where the
 *    squared changes underflow (all below ~1e-154) the norm is taken again with the changes
 *    divided by the largest.
 *  - NaN in the visible logits or vectors is not trapped: it propagates into that head's
 *    means (ks.h then drops that head from the sample).
 *
 * Method and cost (n = row length, K = min(max N, n-1), d = dim, n_T temperatures, nZ
 * normalizers, nE eps values):
 *  - one Gram matrix G = X X^T per head in DOUBLE (X converted to double, cblas_dsyrk,
 *    O(L^2 d)); distances come from ||a_i x_i - s||^2 = a_i^2 G_ii - 2 a_i c_i + ||s||^2
 *    with c_i = sum_{j in I_N} a_j G_ij (section 4.4). Double keeps the expansion's
 *    cancellation at ~1e-8 relative in the distance (float would give ~3e-4): a square below
 *    1e-6 of its terms' magnitude (near-duplicates within ~1e-3, exact twins) is evaluated
 *    again as an explicit difference (dist_true, dist_expect, r, d1, delta; one min per entry
 *    in the O(n) pass, the fallback never runs in realistic heads). |x_j|^2 is summed from X
 *    (not dsyrk's diagonal), so exact duplicates normalize to equal y.
 *  - per row: top-K selection O(n + K log K) once (T-independent); d1, m for every N by a
 *    running max over the added selected column, O(K n) once per row, fused into the first
 *    row block of the c update below (the same G rows, read once).
 *  - per (row, normalizer), all T at once: the weights of every T form A [n_T][n]; c (for x)
 *    and c^y (for y = x/|x|) of every T are updated together as N walks upward through the
 *    sorted order, one register-blocked kernel call per stretch between consecutive grid N
 *    ([2 n_T] x [stretch] times the G rows of the stretch, read in place, no gather),
 *    O(n_T K n) flops; each (grid N, T) then costs O(n) (dist_true, sep D_i, dist_expect) in
 *    a branch-free 8-lane loop (r = min D_i taken over squares, one sqrt) plus O(N)
 *    vectorized over the selected set; dist_expect uses S = A X and e = S X^T (the same
 *    kernel, O(n_T n d)).
 *  - exact zeros: at small T most weights underflow to exactly 0. When every vector entry is
 *    finite (checked once per head; otherwise nothing is skipped, so NaN/inf propagate as
 *    before), zero weights are skipped: the c update stops each block of T rows at its last
 *    nonzero selected weight; a T with at most n/4 nonzero weights lists them once and S, e
 *    and the O(n) pass visit only them, the zero-weight entries adding their common term
 *    (||s||, beta ||S||, ||s^y||) times their count. Skipping 0 * (finite) terms leaves S, e,
 *    c bit-identical; only the order of the O(n) pass's sums changes (round-off).
 *  - per (row, T, normalizer): a in O(n) with a vectorized exp (~1 ulp; metrics.c);
 *    entropy O(n); grad_exact solves the secular equation sum_j a_j/(a_j - lambda) = 0 by
 *    the two-pole rational model iteration of LAPACK's dlaed4 with a bisection safeguard,
 *    O(n) per pass, 2-5 passes over the nonzero weights below the second largest (compacted
 *    once, summed in 8 lanes; one division per entry, 1/(a_j - lambda) used twice, wherever
 *    lambda - a2 >= 2^-1000 so that it cannot overflow, else a_j/(a_j - lambda) and that over
 *    (a_j - lambda) again: ~1 ulp more per term than two divisions, same-sign sums; against the
 *    two-division version grad_exact moved by 2e-16 relative on the minimal grid and up to
 *    1.7e-13 on the paper grid (bench_metrics --check: where the stopping test lands on a
 *    neighbouring iterate, within the solver's own ~1e-13), far inside the tests' 1e-6);
 *    grad_fd O(n) per eps.
 *    Total per head: O(L^2 d + L n_T nZ (K L + n_N L + L d + nE L)) for visible rows.
 *  - Sums use 8 fixed lanes (the order does not depend on the CPU's vector width) and a*b+c
 *    may be fused (FMA where the target has it): results agree with a serial evaluation to
 *    round-off; builds with and without FMA agree to ~1e-12 relative and in sep_ratio up to
 *    sep_marginal (test metrics_fma_agree); prefix cuts equal separate passes the same way.
 *  - delta: running minimum over t of min_{i<t} |y_i - y_t|, O(n) per row (8 lanes; a row
 *    with a cancelled square is done again with the explicit differences).
 *  - dist_expect's S and e read the vectors as captured (float, widened exactly to double:
 *    the same products as a double copy, half the bytes per row).
 *  Where the time goes (phase profile, what was tried): docs/performance.md.
 *  Switches (met_axes.per_n_T, .skip; docs/metrics.md section 14): the walk over N runs for
 *  the per-N T only, grad_exact's secular equation and dist_expect's S, e and terms are not
 *  evaluated when off; every output not switched off keeps its bits (test_metrics_skip).
 */
#ifndef ATTNSWEEP_METRICS_H
#define ATTNSWEEP_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cellresult.h"
#include "errors.h"

/* The normalizers (docs/metrics.md section 10; section 10.1 for the five after ssmax). The
 * enum order is the file's: stored results index the normalizer coordinate by name, never by
 * this number. */
typedef enum {
    MET_SOFTMAX = 0,
    MET_SPARSEMAX = 1,
    MET_SSMAX = 2,
    MET_SA_SOFTMAX = 3,      /* Self-Adjust Softmax: z * softmax(z) */
    MET_SA_SOFTMAX_NORM = 4, /* its normalized variant: (z - m) / (M - m) * softmax(z) */
    MET_ENTMAX15 = 5,        /* alpha-entmax, alpha = entmax_alpha (1.5 by default) */
    MET_SIGMOID = 6,         /* sigmoid(z + b) elementwise, b = -ln n by default */
    MET_SOFTMAX1 = 7,        /* exp(z_i) / (1 + sum_j exp(z_j)) */
    MET_N_NORMALIZERS
} met_normalizer;

/* The ONE table of the normalizers' names (config values, the store's normalizer coordinate,
 * the recorded config) <-> enum (-1 when unknown). Inline: the config layer parses the names
 * without linking the kernels' code. */
static inline const char *met_normalizer_name(met_normalizer z) {
    static const char *const names[MET_N_NORMALIZERS] = {
        "softmax", "sparsemax", "ssmax", "sa_softmax", "sa_softmax_norm", "entmax15", "sigmoid",
        "softmax1"};
    return (unsigned)z < MET_N_NORMALIZERS ? names[z] : "?";
}
static inline int met_normalizer_from_name(const char *name) {
    for (int z = 0; z < MET_N_NORMALIZERS; z++)
        if (!strcmp(name, met_normalizer_name((met_normalizer)z))) return z;
    return -1;
}
/* Whether grad_exact is computed for z (docs/metrics.md section 10.1: NaN for the others,
 * with the reason there). */
static inline int met_has_grad_exact(met_normalizer z) {
    return z == MET_SOFTMAX || z == MET_ENTMAX15 || z == MET_SIGMOID || z == MET_SOFTMAX1;
}

/* The axes of one head job. N may be in any order and hold values >= 1; T > 0. */
typedef struct {
    const int32_t *N;
    size_t n_N;
    const double *T;
    size_t n_T;
    const double *eps;
    size_t n_eps;
    const met_normalizer *norm;
    size_t n_norm;
    double ssmax_scale; /* s of section 10; 0 -> 1/ln(1024) */
    double entmax_alpha; /* alpha of entmax15 (section 10.1); 0 -> 1.5 */
    int sigmoid_bias_set; /* 0: sigmoid's b = -ln n (n = the row's length), 1: b = sigmoid_bias */
    double sigmoid_bias;
    int full_row;       /* 0: rows="visible" (default), 1: rows="full_row" */
    int aggregate;      /* 0: distance="per_token" (default), 1: distance="aggregate" (below) */
    /* key of the counter-based direction generator (section 7): u depends only on
     * (seed, window, layer, head, t, eps index) */
    uint64_t seed;
    int64_t window, layer, head;
    /* metrics.per_N_T: per_n_T [n_T], 1 where the per-N family (distances, separability,
     * rows_used) is computed at T[iT], 0 where it is skipped (its outputs are NaN); NULL:
     * at every T. The per-N values of a computed T do not depend on which other T are. */
    const uint8_t *per_n_T;
    unsigned skip; /* MET_SKIP_* bits: families switched off (their outputs are NaN) */
    /* metrics.dist_random: K >= 2 subsets per row (metrics.random_subsets), 0: off (the
     * random block is NaN). Subsets depend only on (seed, window, layer, head, t, N). */
    uint32_t random_subsets;
    /* metrics.query_rows = "sample:K" (docs/metrics.md section 9.1): K query rows per cut, 0:
     * every row. K >= a cut's rows takes them all. Nonzero doubles met_out_count: the means,
     * then their standard errors at the same places (met_at_se). */
    size_t sample_rows;
} met_axes;
/* metrics.grad_exact = false, metrics.dist_expect = false: the work is not done */
enum { MET_SKIP_GRAD_EXACT = 1u, MET_SKIP_DIST_EXPECT = 2u };

/* Per-cut output block of one head (doubles), C order, last index fastest:
 *   per_N  [MET_NPERN][n_N][n_T][n_norm]    dist_true dist_bound dist_expect sep_ratio
 *                                        sep_lower sep_upper sep_marginal rows_used
 *                                        (= cellresult order)
 *   per_T  [MET_NPERT][n_T][n_norm]        entropy entropy_norm grad_exact grad_bound
 *   grad_fd [n_T][n_eps][n_norm]
 *   random [MET_NRAND][n_N][n_T][n_norm]   dist_random dist_random_se dist_random_upper
 *                                        (section 4.6; NaN unless random_subsets > 0)
 * Means over the rows of section 9; a mean over zero rows is NaN (rows_used = 0).
 * dist_random_se is the standard error of dist_random's mean from the Monte-Carlo draws
 * (sqrt of the summed per-row variances over the row count; 0 where every row is exact). */
enum { MET_DIST_TRUE, MET_DIST_BOUND, MET_DIST_EXPECT, MET_SEP_RATIO, MET_SEP_LOWER,
       MET_SEP_UPPER, MET_SEP_MARGINAL, MET_ROWS_USED, MET_NPERN };
enum { MET_ENTROPY, MET_ENTROPY_NORM, MET_GRAD_EXACT, MET_GRAD_BOUND, MET_NPERT };
enum { MET_DIST_RANDOM, MET_DIST_RANDOM_SE, MET_DIST_RANDOM_UPPER, MET_NRAND };

size_t met_mean_count(const met_axes *ax); /* doubles of the means per cut */
size_t met_out_count(const met_axes *ax);  /* doubles per cut: the means (+ their SE, sampled) */
/* Where the standard error of the mean at index `at` is (ax->sample_rows > 0 only): SE =
 * s / sqrt(k) * sqrt(1 - k / rows), s the sample deviation of the k rows used out of the
 * mean's `rows` eligible ones (section 9.1); 0 where every eligible row was used, NaN where
 * the mean is NaN or k = 1. */
static inline size_t met_at_se(const met_axes *ax, size_t at) { return met_mean_count(ax) + at; }

/* Section 9.1, the row rule: rows [k] = the query rows of one cut, ascending: [first, L) cut
 * into K strata [first + floor(i m / K), first + floor((i + 1) m / K)), m = L - first, one row
 * drawn uniformly in each by a hash of (key, i); K >= m gives every row. Returns the count
 * (min(K, m)). key = met_row_key(seed, window, L): the same rows for every layer, head,
 * normalizer and model of the cell, whatever rank computes it. */
uint64_t met_row_key(uint64_t seed, int64_t window, int64_t L);
size_t met_sample_rows(uint32_t *rows, size_t K, size_t first, size_t L, uint64_t key);

/* Copies one head's means (this header's order, ncuts x met_out_count) into cell result
 * blocks (cellresult.h layout y) at layer index il, head index ih: blocks[c] for cut c. */
void met_scatter_head(double *const *blocks, const cr_layout *y, const met_axes *ax,
                      const double *head_out, size_t ncuts, size_t il, size_t ih);
static inline size_t met_at_per_n(const met_axes *ax, int var, size_t iN, size_t iT, size_t iZ) {
    return (((size_t)var * ax->n_N + iN) * ax->n_T + iT) * ax->n_norm + iZ;
}
static inline size_t met_at_per_t(const met_axes *ax, int var, size_t iT, size_t iZ) {
    return MET_NPERN * ax->n_N * ax->n_T * ax->n_norm + ((size_t)var * ax->n_T + iT) * ax->n_norm + iZ;
}
static inline size_t met_at_grad_fd(const met_axes *ax, size_t iT, size_t iE, size_t iZ) {
    return (MET_NPERN * ax->n_N + MET_NPERT) * ax->n_T * ax->n_norm + (iT * ax->n_eps + iE) * ax->n_norm + iZ;
}
static inline size_t met_at_random(const met_axes *ax, int var, size_t iN, size_t iT, size_t iZ) {
    return (MET_NPERN * ax->n_N + MET_NPERT + ax->n_eps) * ax->n_T * ax->n_norm +
           (((size_t)var * ax->n_N + iN) * ax->n_T + iT) * ax->n_norm + iZ;
}

/* Bytes of workspace met_head needs for contexts up to L_max with vectors of dim entries.
 * Allocate once per worker (64-byte alignment is not required, 8 is). */
size_t met_workspace_bytes(size_t L_max, size_t dim, const met_axes *ax);

/* The head job (sections 4, 6, 7, 8, 9). For each cut Lc = cuts[c] (ascending, 1 <= Lc <= L),
 * writes the means over rows t < Lc into out + c * met_out_count(ax); the result equals a
 * separate call with L = Lc. scores [L][ld_scores] (ld_scores >= L), vectors [L][dim].
 * Returns 0, or -1 with err filled (bad axes, workspace too small, unsorted cuts). */
int met_head(double *out, void *workspace, size_t workspace_bytes, const float *scores,
             size_t ld_scores, const float *vectors, size_t L, size_t dim, const size_t *cuts,
             size_t ncuts, const met_axes *ax, as_err *err);

/* ---- per-row kernels, exposed for tests and for callers that need one piece ---- */

/* Section 10: a [n] = F(z [n]) over n >= 1 logits already divided by T (and, for ssmax,
 * already multiplied by s ln n: this is plain softmax then). Softmax subtracts the max;
 * returns ln Z (of the shifted logits) for softmax, 0 for sparsemax. */
double met_softmax(double *a, const double *z, size_t n);
/* Euclidean projection onto the simplex (Michelot's iteration; exact zeros). */
void met_sparsemax(double *a, const double *z, size_t n);
/* Weights of one row: a [n] for logits l [nv] at temperature T with normalizer zn; entries
 * nv..n-1 (full_row masking) are 0. n_for_ssmax is the n of "ln n" (section 10). softmax,
 * sparsemax and ssmax only: the normalizers of section 10.1 take met_weights_ext. */
void met_weights(double *a, const double *l, size_t nv, size_t n, double T, met_normalizer zn,
                 double ssmax_scale);

/* Section 10.1 (metrics_norm.c documents each): the weights of the normalizers after ssmax
 * (a must not alias l; x scratch [nv]; returns softmax1's null weight, else 0), their
 * resolved parameters, the entropy of |a| / sum |a|, grad_exact with respect to the raw
 * logits (NaN where met_has_grad_exact is 0) and grad_fd's numerator |F(l + eps u) - F(l)|. */
double met_weights_ext(double *a, double *x, const double *l, size_t nv, size_t n, double T,
                       met_normalizer zn, const met_axes *ax);
double met_entmax_alpha(const met_axes *ax);
double met_sigmoid_b(const met_axes *ax, size_t n);
double met_entropy_abs(const double *a, size_t nv);
double met_jacobian_norm_sub(const double *a, size_t n, double a0);
double met_grad_exact_ext(const double *a, const double *l, size_t nv, size_t n, double T,
                          met_normalizer zn, const met_axes *ax, double a0, double *b,
                          double *rest);
double met_change_norm_ext(const double *a, size_t p, const double *l, const double *u,
                           double eps, size_t nv, size_t n, double T, met_normalizer zn,
                           const met_axes *ax, double *ap, double *x, double *y);
/* Section 6.1: xi [N] of the selected weights sa [N] (A, Q: their sum and sum of squares,
 * delta: the row's smallest distance between normalized vectors), B = A - a_i and Q - a_i^2
 * taken as sums over the other keys for the one key above A / 2 (metrics.c). */
void met_sep_xi(double *xi, const double *sa, size_t N, double A, double Q, double delta);
/* Section 3 for sa_softmax: order [K] = the K largest weights z_j softmax(z)_j, z = l / T,
 * ties to the lower index, compared without forming the weights (positive logits by logit,
 * then zeros, then negative ones by ln|z| + z ascending); masked entries nv..n-1 after every
 * visible one. idx, tmp: scratch [nv] (uint32), key: scratch [nv]. */
void met_sa_order(uint32_t *order, uint32_t *idx, uint32_t *tmp, uint32_t *scratch, double *key,
                  const double *l, size_t nv, size_t K, double T);

/* Section 4.6 (metrics_random.c), one row of n keys at n_T temperatures: weights a_T
 * [n_T][lda], Gram matrix G [n][ldG], |x_j|^2 x_sq [n]. met_random_prep fills e_T [n_T][lda]
 * (e = a G) and S_sq_T [n_T] (|S|^2); met_dist_random then writes out [n_T][3] = the row's
 * E||Z|| over uniformly random N-subsets (1 <= N < n; exact or from K >= 2 draws keyed by key),
 * the variance of that estimate (0 where exact) and sqrt(E||Z||^2). Scratch: dscr
 * [met_random_scratch_doubles(n, n_T, K)], iscr [2 n]. */
size_t met_random_scratch_doubles(size_t n, size_t n_T, size_t K);
void met_random_prep(double *e_T, double *S_sq_T, const double *a_T, size_t lda, size_t n_T,
                     const double *G, size_t ldG, size_t n);
void met_dist_random(double *out, double *dscr, uint32_t *iscr, const double *a_T, size_t lda,
                     size_t n_T, const double *G, size_t ldG, const double *x_sq,
                     const double *e_T, const double *S_sq_T, size_t n, size_t N, int aggregate,
                     size_t K, uint64_t key);

/* Section 7: largest eigenvalue of diag(a) - a a^T (a >= 0, n entries; spectral norm of the
 * softmax Jacobian times T). Secular equation, 1e-13 relative in practice. */
double met_softmax_jacobian_norm(const double *a, size_t n);

/* Section 3 tie rule: order [k] (k < K) = the K largest logits l [n] in descending order,
 * ties to the lower index. scratch: n entries. */
void met_topk_order(uint32_t *order, uint32_t *scratch, const double *l, size_t n, size_t K);

/* Section 7 direction: u [n] = a unit vector, a normalized Gaussian from the counter-based
 * generator (splitmix64 hash of the counter, Box-Muller), keyed by met_direction_key. The
 * logarithm and sin/cos of Box-Muller are series in +, -, *, / only, contraction off
 * (metrics_dir.c): the same bits on every CPU and build (libm's differ between its FMA and
 * plain variants), within 8e-16 of libm's Box-Muller times the radius (test_metrics). */
uint64_t met_direction_key(uint64_t seed, int64_t window, int64_t layer, int64_t head, int64_t t,
                           int64_t eps_index);
void met_direction(double *u, size_t n, uint64_t key);
/* The same u with the key-independent inner hashes of the counters taken from ctr [m],
 * m >= n + 1, filled once by met_direction_counters (the same bits: half of the hashing of
 * every row and eps is the same for all of them). */
void met_direction_counters(uint64_t *ctr, size_t m);
void met_direction_ctr(double *u, size_t n, uint64_t key, const uint64_t *ctr);
/* The j-th standard normal of the stream (what met_direction normalizes). */
double met_normal(uint64_t key, uint64_t j);

#endif
