/* ks.h -- two-sample Kolmogorov-Smirnov test with the EXACT two-sided p-value, and the
 * critical top-N of Algorithm 3 (docs/metrics.md, section 5).
 *
 * D = sup_x |F1(x) - F2(x)| over the two empirical CDFs (ties within and across samples
 * are handled by evaluating after every copy of a value, as scipy does). The p-value is
 * P(D' >= D) under H0 for sample sizes (n1, n2), the value scipy.stats.ks_2samp(x, y,
 * method="exact") reports: with g = gcd(n1, n2) and D = h g/(n1 n2) for an integer h, the
 * merged order is a uniformly random lattice path from (0,0) to (n1,n2) and
 * p = 1 - P(|i n2 - j n1| < h g at every point of the path). The path probability is
 * propagated as a Markov chain (step right with probability (n1-i)/(n1-i+n2-j)), so every
 * number stays in [0,1]: no overflow at any size, O(n1 n2) time, O(n2) memory. Like scipy's
 * "exact" method it assumes continuous data: with ties the p-value is that of the observed D.
 *
 * NaN policy (decision): NaN entries are dropped from each sample on their own (a head whose
 * mean is NaN, e.g. rows_used = 0, is left out); if a sample is then empty, D and p are NaN.
 */
#ifndef ATTNSWEEP_KS_H
#define ATTNSWEEP_KS_H

#include <stddef.h>
#include <stdint.h>

#include "cellresult.h"
#include "metrics.h"

/* Doubles of scratch ks_2samp_exact needs. */
size_t ks_scratch_doubles(size_t n1, size_t n2);

/* x [n1], y [n2]; writes D and the exact two-sided p-value. scratch: ks_scratch_doubles. */
void ks_2samp_exact(double *stat, double *pvalue, const double *x, size_t n1, const double *y,
                    size_t n2, double *scratch);

/* Exact P(D >= h g/(n1 n2)) for sizes n1, n2 >= 1, with H = h g = the integer
 * max |i n2 - j n1| of the observed path. scratch: n2 + 1 doubles. */
double ks_pvalue_exact(size_t n1, size_t n2, uint64_t H, double *scratch);

/* Algorithm 3: the smallest N[i] whose pvalue[i] > alpha (NaN never qualifies); -1 if none.
 * N may be in any order. */
int32_t ks_critical_n(const int32_t *N, const double *pvalue, size_t n_N, double alpha);

/* The cross-head test of one cell (section 5), the sweep's and the Python package's alike.
 * b [y->total] is a cell block (cellresult.h layout y) whose per-head means are in place:
 * per (N, T, normalizer) ks_stat and ks_pvalue of ks_2samp_exact between the heads' mean
 * dist_true and mean dist_expect (ks_random: dist_random), the heads in (layer, head)
 * order; per (T, normalizer) crit_N = ks_critical_n at alpha. present [n_layer * n_head]
 * (NULL: every head) leaves out the heads that are no sample (on a model axis, those a
 * smaller model lacks). Nothing is written where the second sample is not computed (ax->skip
 * has MET_SKIP_DIST_EXPECT, or ks_random without ax->random_subsets) or at a T that
 * ax->per_n_T leaves out. x, e: [n_layer * n_head], p: [n_N], scratch:
 * ks_scratch_doubles(n_layer * n_head, n_layer * n_head). */
void ks_cross_heads(double *b, const cr_layout *y, const met_axes *ax, int ks_random, double alpha,
                    const unsigned char *present, double *x, double *e, double *p, double *scratch);

#endif
