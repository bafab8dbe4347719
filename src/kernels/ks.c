/* ks.c -- see ks.h (docs/metrics.md section 5). */
#include "ks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t ks_scratch_doubles(size_t n1, size_t n2) { return n1 + n2 + (n2 > n1 ? n2 : n1) + 2; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t keep_finite_sorted(double *dst, const double *src, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(src[i])) dst[k++] = src[i];
    qsort(dst, k, sizeof *dst, cmp_double);
    return k;
}

double ks_pvalue_exact(size_t n1, size_t n2, uint64_t H, double *p) {
    if (H == 0) return 1.0;
    /* p[j] = probability of being at (i, j) having stayed strictly inside; out = the mass
     * that leaves the band, summed as it leaves (1 - P(inside) would round every p-value below
     * ~1e-16 to a multiple of the double spacing near 1) */
    for (size_t j = 0; j <= n2; j++) p[j] = 0;
    p[0] = 1.0;
    double out = 0;
    for (size_t i = 0; i <= n1; i++) {
        for (size_t j = 0; j <= n2; j++) {
            /* arrival from the left (i-1, j) is already in p[j] from the previous row, scaled
             * below; arrival from below (i, j-1) is added here */
            if (j > 0) {
                size_t ri = n1 - i, rj = n2 - (j - 1);
                p[j] += p[j - 1] * (double)rj / (double)(ri + rj);
            }
            int64_t diff = (int64_t)(i * n2) - (int64_t)(j * n1);
            if ((uint64_t)llabs(diff) >= H) {
                out += p[j];
                p[j] = 0;
            }
        }
        if (i == n1) break;
        /* step right from (i, j) to (i+1, j) */
        for (size_t j = 0; j <= n2; j++) {
            size_t ri = n1 - i, rj = n2 - j;
            p[j] *= (double)ri / (double)(ri + rj);
        }
    }
    return out < 0 ? 0 : (out > 1 ? 1 : out);
}

void ks_2samp_exact(double *stat, double *pvalue, const double *x, size_t n1, const double *y,
                    size_t n2, double *scratch) {
    double *xs = scratch, *ys = scratch + n1;
    size_t m = keep_finite_sorted(xs, x, n1), n = keep_finite_sorted(ys, y, n2);
    if (m == 0 || n == 0) {
        *stat = NAN;
        *pvalue = NAN;
        return;
    }
    /* walk the merged order; evaluate |i n - j m| after all copies of a value */
    size_t i = 0, j = 0;
    uint64_t H = 0;
    while (i < m || j < n) {
        double v = (j >= n || (i < m && xs[i] <= ys[j])) ? xs[i] : ys[j];
        while (i < m && xs[i] == v) i++;
        while (j < n && ys[j] == v) j++;
        int64_t diff = (int64_t)(i * n) - (int64_t)(j * m);
        uint64_t ad = (uint64_t)llabs(diff);
        if (ad > H) H = ad;
    }
    *stat = (double)H / ((double)m * (double)n);
    *pvalue = ks_pvalue_exact(m, n, H, scratch + n1 + n2);
}

int32_t ks_critical_n(const int32_t *N, const double *pvalue, size_t n_N, double alpha) {
    int32_t best = -1;
    for (size_t i = 0; i < n_N; i++)
        if (pvalue[i] > alpha && (best < 0 || N[i] < best)) best = N[i];
    return best;
}

void ks_cross_heads(double *b, const cr_layout *y, const met_axes *ax, int ks_random, double alpha,
                    const unsigned char *present, double *x, double *e, double *p, double *scratch) {
    const cr_var against = ks_random ? CR_DIST_RANDOM : CR_DIST_EXPECT;
    /* the second sample switched off: its values are NaN, and so stay the test's */
    if (ks_random ? !ax->random_subsets : (ax->skip & MET_SKIP_DIST_EXPECT) != 0) return;
    size_t all = y->n_layer * y->n_head, heads = 0;
    for (size_t i = 0; i < all; i++) heads += !present || present[i];
    for (size_t t = 0; t < y->n_T; t++)
        for (size_t z = 0; z < y->n_norm; z++) {
            if (ax->per_n_T && !ax->per_n_T[t]) continue; /* metrics.per_N_T */
            for (size_t n = 0; n < y->n_N; n++) {
                size_t k = 0;
                for (size_t i = 0; i < all; i++) {
                    if (present && !present[i]) continue;
                    x[k] = b[cr_at_per_n(y, CR_DIST_TRUE, n, t, z, i / y->n_head, i % y->n_head)];
                    e[k++] = b[cr_at_per_n(y, against, n, t, z, i / y->n_head, i % y->n_head)];
                }
                ks_2samp_exact(&b[cr_at_ks(y, CR_KS_STAT, n, t, z)], &p[n], x, heads, e, heads, scratch);
                b[cr_at_ks(y, CR_KS_PVALUE, n, t, z)] = p[n];
            }
            b[cr_at_crit(y, t, z)] = ks_critical_n(ax->N, p, y->n_N, alpha);
        }
}
