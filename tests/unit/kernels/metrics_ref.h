/* metrics_ref.h -- the float64 brute force of docs/metrics.md sections 4, 6, 7, 8, 9 that
 * test_metrics.c and test_metrics_regimes.c check met_head against, written independently of
 * metrics.c: O(n^2 d) and worse, no Gram matrix (every distance is an explicit difference
 * a_i x_i - s formed entry by entry), sort-based sparsemax, Jacobi eigenvalues for grad_exact.
 *  - sep_ratio decides D_i < r with the exact rewrite D_i^2 - |s|^2 = a_i^2 |y_i|^2 -
 *    2 a_i (s . y_i) (s = s^y formed explicitly): comparing D_i < r in float64 follows the
 *    rounding once the selected weights fall below ~1e-16 of the dominant one (both round to
 *    |s|). The library's N_s must fall in the band of decisions whose margin exceeds the
 *    rounding of the rewrite itself (1e-12 a (a + 2|s|), ref_lo / ref_hi): a weight 1e-30 of
 *    the dominant one is decided by a margin of that size, and the rewrite resolves it.
 *    sep_marginal counts |D_i^2 - r^2| <= 1e-12 |s|^2 (band: 0.5x .. 2x that threshold).
 *  - dist_bound takes the unselected mass as the sum of the unselected weights.
 *  - entropy and grad_fd are evaluated in quad precision (__float128; long double without
 *    libquadmath): in float64, grad_fd's softmax difference has a floor of ulp(max a) / eps and
 *    the entropy of a near-one-hot row loses R in log(1 + R), which is what is being tested.
 *    The weights are float64 softmax/sparsemax of the shifted logits (l - max l) / T. */
#ifndef ATTNSWEEP_METRICS_REF_H
#define ATTNSWEEP_METRICS_REF_H

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#ifdef AS_HAVE_QUADMATH
#include <quadmath.h>
typedef __float128 refq;
#define REFQ_EXP expq
#define REFQ_LOG logq
#define REFQ_LOG1P log1pq
#define REFQ_SQRT sqrtq
#else
typedef long double refq;
#define REFQ_EXP expl
#define REFQ_LOG logl
#define REFQ_LOG1P log1pl
#define REFQ_SQRT sqrtl
#endif

#define REF_MARGINAL 1e-12

static void ref_softmax(double *a, const double *z, int n) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < n; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < n; j++) s += exp(z[j] - mx);
    for (int j = 0; j < n; j++) a[j] = exp(z[j] - mx) / s;
}

/* sort-based sparsemax (Martins & Astudillo's formula), a different algorithm from the
 * library's Michelot iteration */
static void ref_sparsemax(double *a, const double *z0, int n) {
    /* on z - max z: sparsemax is shift-invariant, and tau = (sum - 1) / k of unshifted large
     * logits loses the 1 (sum a - 1 ~ 1e-10 at T = 1e-3) */
    double *zs = malloc(n * sizeof *zs), *z = malloc(n * sizeof *z), mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = z0[j] > mx ? z0[j] : mx;
    for (int j = 0; j < n; j++) z[j] = z0[j] - mx;
    memcpy(zs, z, n * sizeof *zs);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && zs[j] > zs[j - 1]; j--) {
            double t = zs[j]; zs[j] = zs[j - 1]; zs[j - 1] = t;
        }
    double cum = 0, tau = 0;
    for (int k = 1; k <= n; k++) {
        cum += zs[k - 1];
        if (1 + k * zs[k - 1] > cum) tau = (cum - 1) / k;
    }
    for (int j = 0; j < n; j++) a[j] = z[j] > tau ? z[j] - tau : 0;
    free(zs), free(z);
}

/* quad softmax of z [n] (already shifted or not) */
static void ref_softmax_q(refq *a, const refq *z, int n) {
    refq mx = z[0], s = 0;
    for (int j = 1; j < n; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < n; j++) s += REFQ_EXP(z[j] - mx);
    for (int j = 0; j < n; j++) a[j] = REFQ_EXP(z[j] - mx) / s;
}

/* cyclic Jacobi: largest eigenvalue of a symmetric n x n matrix (destroys M) */
static double ref_max_eig(double *M, int n) {
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) off += M[p * n + q] * M[p * n + q];
        if (off < 1e-300) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = M[p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double theta = (M[q * n + q] - M[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) {
                    double mkp = M[k * n + p], mkq = M[k * n + q];
                    M[k * n + p] = c * mkp - s * mkq;
                    M[k * n + q] = s * mkp + c * mkq;
                }
                for (int k = 0; k < n; k++) {
                    double mpk = M[p * n + k], mqk = M[q * n + k];
                    M[p * n + k] = c * mpk - s * mqk;
                    M[q * n + k] = s * mpk + c * mqk;
                }
            }
    }
    double mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = M[i * n + i] > mx ? M[i * n + i] : mx;
    return mx;
}

/* ---- section 10.1, each from its own definition ---- */

/* 1.5-entmax by the sort-based exact algorithm (Peters, Niculae and Martins 2019, Algorithm 2:
 * for each k the tau of the k largest, the support the largest k with x_(k) > tau_k), a
 * different algorithm from the library's bisection */
static void ref_entmax15(double *a, const double *z, int n) {
    double *x = malloc(n * sizeof *x), *xs = malloc(n * sizeof *xs), mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < n; j++) x[j] = (z[j] - mx) / 2, xs[j] = x[j];
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && xs[j] > xs[j - 1]; j--) {
            double t = xs[j]; xs[j] = xs[j - 1]; xs[j - 1] = t;
        }
    double tau = 0;
    for (int k = 1; k <= n; k++) {
        double mean = 0, ss = 0;
        for (int i = 0; i < k; i++) mean += xs[i];
        mean /= k;
        for (int i = 0; i < k; i++) ss += (xs[i] - mean) * (xs[i] - mean);
        double dl = (1 - ss) / k;
        if (dl < 0) break;
        double tk = mean - sqrt(dl);
        if (xs[k - 1] > tk) tau = tk; else break;
    }
    for (int j = 0; j < n; j++) a[j] = x[j] > tau ? (x[j] - tau) * (x[j] - tau) : 0;
    free(x), free(xs);
}

/* alpha-entmax for alpha != 1.5 in extended precision: bisection on tau of
 * sum [(alpha - 1)(z - max z) - tau]_+^(1/(alpha-1)) = 1, 72 halvings of [-1, 0] (below
 * long double's 64-bit resolution of tau), then normalized; only entries above -1 enter */
static void ref_entmax_alpha(double *a, const double *z, int n, double alpha) {
    long double mx = -INFINITY, lo = -1, hi = 0, pw = 1.0L / (alpha - 1);
    for (int j = 0; j < n; j++) mx = z[j] > mx ? z[j] : mx;
    for (int it = 0; it < 72; it++) {
        long double mid = (lo + hi) / 2, s = 0;
        for (int j = 0; j < n; j++) {
            long double d = (alpha - 1) * ((long double)z[j] - mx) - mid;
            if (d > 0) s += powl(d, pw);
        }
        if (s >= 1) lo = mid; else hi = mid;
    }
    long double s = 0;
    for (int j = 0; j < n; j++) {
        long double d = (alpha - 1) * ((long double)z[j] - mx) - lo;
        s += d > 0 ? powl(d, pw) : 0;
    }
    for (int j = 0; j < n; j++) {
        long double d = (alpha - 1) * ((long double)z[j] - mx) - lo;
        a[j] = (double)(d > 0 ? powl(d, pw) / s : 0);
    }
}

/* quad weights of sa_softmax, sa_softmax_norm, sigmoid, softmax1 for the logits lq [n] at T
 * (b: sigmoid's bias); softmax1's null weight in *a0 */
static void ref_new_q(refq *a, refq *a0, const refq *lq, int n, double T, met_normalizer zn,
                      double b) {
    refq mx = lq[0], mn = lq[0];
    for (int j = 1; j < n; j++) mx = lq[j] > mx ? lq[j] : mx, mn = lq[j] < mn ? lq[j] : mn;
    *a0 = 0;
    if (zn == MET_SIGMOID) {
        for (int j = 0; j < n; j++) {
            refq u = lq[j] / (refq)T + (refq)b;
            a[j] = u >= 0 ? 1 / (1 + REFQ_EXP(-u)) : REFQ_EXP(u) / (1 + REFQ_EXP(u));
        }
        return;
    }
    if (zn == MET_SOFTMAX1) { /* exp(z_j) / (1 + sum exp(z)), all over exp(c), c = max(z, 0) */
        refq c = mx > 0 ? mx / (refq)T : 0, s = REFQ_EXP(-c);
        for (int j = 0; j < n; j++) s += REFQ_EXP(lq[j] / (refq)T - c);
        for (int j = 0; j < n; j++) a[j] = REFQ_EXP(lq[j] / (refq)T - c) / s;
        *a0 = REFQ_EXP(-c) / s;
        return;
    }
    refq *zq = malloc(n * sizeof *zq);
    for (int j = 0; j < n; j++) zq[j] = lq[j] / (refq)T;
    ref_softmax_q(a, zq, n);
    refq m = mn < 0 ? mn : 0, M = mx > 0 ? mx : 0;
    for (int j = 0; j < n; j++) {
        if (zn == MET_SA_SOFTMAX) a[j] *= zq[j];
        else if (M > m) a[j] *= (lq[j] - m) / (M - m);
    }
    free(zq);
}

/* The same weights in float64 (what sections 4 and 6 see: a weight that underflows in double
 * is 0 there, as in the library; quad would keep 1e-320 and decide separability by it) */
static void ref_new_d(double *a, const double *l, int n, double T, met_normalizer zn, double b) {
    double mx = l[0], mn = l[0];
    for (int j = 1; j < n; j++) mx = l[j] > mx ? l[j] : mx, mn = l[j] < mn ? l[j] : mn;
    if (zn == MET_SIGMOID) {
        for (int j = 0; j < n; j++) { /* e^u / (1 + e^u) below 0: 1 / (1 + e^-u) overflows */
            double u = l[j] / T + b;
            a[j] = u >= 0 ? 1 / (1 + exp(-u)) : exp(u) / (1 + exp(u));
        }
        return;
    }
    if (zn == MET_SOFTMAX1) {
        double c = mx > 0 ? mx / T : 0, s = exp(-c);
        for (int j = 0; j < n; j++) s += exp(l[j] / T - c);
        for (int j = 0; j < n; j++) a[j] = exp(l[j] / T - c) / s;
        return;
    }
    double *z = malloc(n * sizeof *z), m = mn < 0 ? mn : 0, M = mx > 0 ? mx : 0;
    for (int j = 0; j < n; j++) z[j] = l[j] / T;
    ref_softmax(a, z, n);
    for (int j = 0; j < n; j++) {
        if (zn == MET_SA_SOFTMAX) a[j] *= z[j];
        else if (M > m) a[j] *= (l[j] - m) / (M - m);
    }
    free(z);
}

/* Shannon entropy of |a| / sum |a| in quad, the dominant entry's log by log1p of the rest */
static refq ref_entropy_abs_q(const refq *a, int n) {
    int k = 0;
    for (int j = 1; j < n; j++)
        if (fabsl((long double)a[j]) > fabsl((long double)a[k])) k = j;
    refq big = a[k] < 0 ? -a[k] : a[k], R = 0, H;
    if (big == 0) return 0;
    for (int j = 0; j < n; j++)
        if (j != k) R += a[j] < 0 ? -a[j] : a[j];
    refq S = big + R, lnS = REFQ_LOG(big) + REFQ_LOG1P(R / big);
    H = big / S * REFQ_LOG1P(R / big);
    for (int j = 0; j < n; j++) {
        refq aj = a[j] < 0 ? -a[j] : a[j];
        if (j != k && aj > 0) H += aj / S * (lnS - REFQ_LOG(aj));
    }
    return H;
}

/* sa_softmax's order by weight (section 3) for logits l [n] at T, as a comparison of two
 * weights z e^z (common 1/Z dropped) in the log domain: sign first, then for positive z the
 * larger z, for negative z the smaller ln|z| + z; ties to the lower index (insertion sort) */
static int ref_sa_before(double li, double lj, double T) {
    int si = li > 0 ? 2 : li == 0 ? 1 : 0, sj = lj > 0 ? 2 : lj == 0 ? 1 : 0;
    if (si != sj) return si > sj;
    if (si == 2) return li > lj;
    if (si == 1) return 0;
    double zi = li / T, zj = lj / T;
    return log(-zi) + zi < log(-zj) + zj;
}

/* || ax x - ay y ||, entry by entry */
static double norm_diff(const double *x, const double *y, double ax, double ay, int d) {
    double s = 0;
    for (int k = 0; k < d; k++) {
        double v = ax * x[k] - ay * y[k];
        s += v * v;
    }
    return sqrt(s);
}

/* Section 6's count on one row: s = s^y = sum_{i in I_N} a_i y_i explicitly (s [d] scratch,
 * g [n] scratch), r = min over unselected of |s - a_j y_j| from explicit differences, and the
 * decisions by g_i = D_i^2 - |s|^2 = a_i^2 |y_i|^2 - 2 a_i (s . y_i): *Ns = #{g_i < g_min},
 * *Nm = #{|g_i - g_min| <= REF_MARGINAL |s|^2}, with the bands of ref_lo / ref_hi. */
static void ref_sep_row(int *Ns, int *Nm, double *r_out, int *Nlo, int *Nhi, int *Nmlo,
                        int *Nmhi, const double *a, const double *Y, const int *insel, int n,
                        int d, double *s, double *g) {
    memset(s, 0, d * sizeof *s);
    for (int j = 0; j < n; j++)
        if (insel[j])
            for (int k = 0; k < d; k++) s[k] += a[j] * Y[j * d + k];
    double s2 = 0, r = INFINITY, gmin = INFINITY, am = 0;
    for (int k = 0; k < d; k++) s2 += s[k] * s[k];
    for (int i = 0; i < n; i++) {
        double sy = 0, yy = 0;
        for (int k = 0; k < d; k++) sy += s[k] * Y[i * d + k], yy += Y[i * d + k] * Y[i * d + k];
        g[i] = a[i] * a[i] * yy - 2 * a[i] * sy;
        if (!insel[i]) {
            double D = norm_diff(Y + i * d, s, a[i], 1, d);
            r = D < r ? D : r;
            if (g[i] < gmin) gmin = g[i], am = a[i];
        }
    }
    double tie = REF_MARGINAL * s2, sn = sqrt(s2);
    *Ns = *Nm = *Nlo = *Nhi = *Nmlo = *Nmhi = 0;
    for (int i = 0; i < n; i++) {
        if (!insel[i]) continue;
        double mg = g[i] - gmin;
        /* the decision's own rounding: g_j = a_j (a_j |y_j|^2 - 2 s.y_j) carries ~1e-15 of
         * a_j (a_j + 2 |s|); a margin below 1e-12 of that is a tie in any float evaluation
         * (exact twins), larger ones are decided, however small against |s|^2; |a| for
         * sa_softmax's negative weights */
        double amb = 1e-12 * (fabs(a[i]) + fabs(am)) * (fabs(a[i]) + fabs(am) + 2 * sn);
        *Ns += mg < 0;
        *Nlo += mg < -amb;
        *Nhi += mg < amb;
        *Nm += fabs(mg) <= tie;
        *Nmlo += fabs(mg) <= 0.5 * tie;
        *Nmhi += fabs(mg) <= 2 * tie;
    }
    *r_out = r;
}

/* Section 6.2's count where double weights underflow (softmax / ssmax rows whose selected
 * weights fall below DBL_MIN): every g = D^2 - |s|^2 = e^lam (e^lam |y|^2 - 2 s.y) from the
 * log weights lam [n] (quad: z - ln Z; -inf for masked keys), held as its sign and
 * logarithm in quad, s scaled by the largest selected weight of nonzero y. Two g of one sign
 * whose logarithms differ by <= 1e-9 are a tie the library may take either way (its lam
 * carries the rounding of f (l - l_max), ~1e-16 of |z|): they widen the band only. */
static int ref_glog_less(int sa, refq ma, int sb, refq mb) {
    if (sa != sb) return sa < sb;
    if (sa == 0) return 0;
    return sa > 0 ? ma < mb : ma > mb;
}
static void ref_sep_row_log(int *Ns, int *Nlo, int *Nhi, const refq *lam, const double *Y,
                            const int *insel, int n, int d) {
    refq *sq = calloc(d, sizeof *sq), *m = malloc(n * sizeof *m);
    int *sg = malloc(n * sizeof *sg);
    /* s = e^lref sum e^(lam - lref) y (lref: the largest selected lam of nonzero y), so that
     * weights below even quad's range (T = 1e-3: lam ~ -1e4) keep their ratios */
    refq lref = -INFINITY;
    for (int j = 0; j < n; j++) {
        double yy = 0;
        for (int k = 0; k < d; k++) yy += Y[j * d + k] * Y[j * d + k];
        if (insel[j] && yy > 0 && lam[j] > lref) lref = lam[j];
    }
    int s0 = lref == -INFINITY; /* s = 0: g = e^(2 lam) |y|^2 */
    for (int j = 0; j < n; j++) {
        double yy = 0;
        for (int k = 0; k < d; k++) yy += Y[j * d + k] * Y[j * d + k];
        if (insel[j] && !s0 && yy > 0) /* a zero vector adds 0 (its factor may overflow) */
            for (int k = 0; k < d; k++) sq[k] += REFQ_EXP(lam[j] - lref) * (refq)Y[j * d + k];
    }
    int smin = 2, imin = -1;
    refq mmin = 0;
    for (int j = 0; j < n; j++) {
        refq p = 0, yy = 0;
        for (int k = 0; k < d; k++) p += sq[k] * Y[j * d + k], yy += (refq)Y[j * d + k] * Y[j * d + k];
        /* g = e^(lam + lref) v; a zero vector's v is 0 (its e^(lam - lref) may overflow) */
        refq v = s0 ? yy : (yy > 0 ? REFQ_EXP(lam[j] - lref) * yy : 0) - 2 * p;
        sg[j] = lam[j] == -INFINITY || v == 0 ? 0 : (v > 0 ? 1 : -1);
        m[j] = sg[j] ? lam[j] + (s0 ? lam[j] : lref) + REFQ_LOG(v > 0 ? v : -v) : 0;
        if (!insel[j] && (imin < 0 || ref_glog_less(sg[j], m[j], smin, mmin)))
            smin = sg[j], mmin = m[j], imin = j;
    }
    *Ns = *Nlo = *Nhi = 0;
    for (int i = 0; i < n; i++) {
        if (!insel[i]) continue;
        refq dm = m[i] - mmin;
        int tie = sg[i] == smin && sg[i] != 0 && (dm < 0 ? -dm : dm) <= (refq)1e-9;
        int less = ref_glog_less(sg[i], m[i], smin, mmin);
        *Ns += less;
        *Nlo += less && !tie;
        *Nhi += less || tie;
    }
    free(sq), free(m), free(sg);
}

/* Band of the counting variables (sep_ratio, sep_marginal): the library must fall in
 * [ref_lo, ref_hi] at those indices (elsewhere they are unused). */
static double *ref_lo, *ref_hi;

/* |F(lp) - F(lq)|^2 in quad for sa_softmax, sa_softmax_norm, sigmoid, softmax1 (aq = F(lq),
 * a0q softmax1's null weight). Quad alone does not do it where a weight is within 1e-34 of 1
 * (a sink at small T: 1 - 1 = 0 while the change is 1e-45): sigmoid's change of a weight
 * near 1 is taken on the complements 1 - sigma(u) = sigma(-u); softmax1's dominant entry
 * (the largest logit, or the null one) changes by minus the sum of the other changes (with
 * the null entry, the weights sum to 1); sa_softmax's c_j p_j (c_j = z_j, or the factor of
 * sa_softmax_norm) changes by c'_j (p'_j - p_j) + (c'_j - c_j) p_j, the softmax's dominant
 * change again minus the others'. */
static void ref_change_q(refq *ddq, const refq *lq, const refq *lp, const refq *aq, refq a0q,
                         int n, double T, met_normalizer zn, double b) {
    refq *bq = malloc(n * sizeof *bq), a0p, dd = 0;
    int p = 0;
    for (int j = 1; j < n; j++) p = lq[j] > lq[p] ? j : p;
    if (zn == MET_SIGMOID) {
        for (int j = 0; j < n; j++) {
            refq u0 = lq[j] / (refq)T + (refq)b, u1 = lp[j] / (refq)T + (refq)b, v0, v1;
            refq s0 = u0 >= 0 ? -u0 : u0, s1 = u0 >= 0 ? -u1 : u1; /* complements if u0 >= 0 */
            v0 = s0 >= 0 ? 1 / (1 + REFQ_EXP(-s0)) : REFQ_EXP(s0) / (1 + REFQ_EXP(s0));
            v1 = s1 >= 0 ? 1 / (1 + REFQ_EXP(-s1)) : REFQ_EXP(s1) / (1 + REFQ_EXP(s1));
            dd += (v1 - v0) * (v1 - v0);
        }
    } else if (zn == MET_SOFTMAX1) {
        ref_new_q(bq, &a0p, lp, n, T, zn, b);
        refq rest = a0p - a0q, d2 = 0;
        int vis = lq[p] > 0; /* the dominant entry is visible, else it is the null one */
        for (int j = 0; j < n; j++) {
            refq d = bq[j] - aq[j];
            if (vis && j == p) continue;
            if (vis) rest += d;
            d2 += d * d;
        }
        dd = vis ? d2 + rest * rest : d2;
    } else {
        refq *z0 = malloc(n * sizeof *z0), *z1 = malloc(n * sizeof *z1), *p0 = malloc(n * sizeof *p0);
        refq mn0 = lq[0], mx0 = lq[0], mn1 = lp[0], mx1 = lp[0], rest = 0;
        for (int j = 0; j < n; j++) {
            z0[j] = lq[j] / (refq)T, z1[j] = lp[j] / (refq)T;
            mn0 = lq[j] < mn0 ? lq[j] : mn0, mx0 = lq[j] > mx0 ? lq[j] : mx0;
            mn1 = lp[j] < mn1 ? lp[j] : mn1, mx1 = lp[j] > mx1 ? lp[j] : mx1;
        }
        ref_softmax_q(p0, z0, n);
        ref_softmax_q(bq, z1, n);
        refq m0 = mn0 < 0 ? mn0 : 0, M0 = mx0 > 0 ? mx0 : 0, m1 = mn1 < 0 ? mn1 : 0, M1 = mx1 > 0 ? mx1 : 0;
        for (int j = 0; j < n; j++)
            if (j != p) rest += bq[j] - p0[j];
        for (int j = 0; j < n; j++) {
            refq dp = j == p ? -rest : bq[j] - p0[j], c0, c1;
            if (zn == MET_SA_SOFTMAX) {
                c0 = z0[j], c1 = z1[j];
            } else {
                c0 = M0 > m0 ? (lq[j] - m0) / (M0 - m0) : 1;
                c1 = M1 > m1 ? (lp[j] - m1) / (M1 - m1) : 1;
            }
            refq d = c1 * dp + (c1 - c0) * p0[j];
            dd += d * d;
        }
        free(z0), free(z1), free(p0);
    }
    free(bq);
    *ddq = dd;
}

/* Row t of a section 10.1 normalizer at T: its float64 weights in a [n] (0 past nv), its
 * entropy (quad), grad_exact (Jacobi on the explicit Jacobian) and grad_fd (the quad
 * difference of the two weight rows; entmax: the float64 one) added into sum, and (for
 * sa_softmax) its order by weight in ord_sa [n]. l [n]: the raw logits (-inf past nv). */
static void ref_new_row(double *sum, double *a, int *ord_sa, const double *l, int nv, int n,
                        int t, double T, size_t iT, size_t iZ, const met_axes *ax) {
    met_normalizer zn = ax->norm[iZ];
    double alpha = ax->entmax_alpha > 0 ? ax->entmax_alpha : 1.5;
    double b = ax->sigmoid_bias_set ? ax->sigmoid_bias : -log((double)n);
    refq *lq = malloc(nv * sizeof *lq), *aq = malloc(nv * sizeof *aq), *apq = malloc(nv * sizeof *apq), a0q = 0;
    double *z = malloc(nv * sizeof *z), *ap = malloc(nv * sizeof *ap), *u = malloc(nv * sizeof *u);
    double *M = malloc((size_t)nv * nv * sizeof *M);
    for (int j = 0; j < nv; j++) lq[j] = l[j];
    if (zn == MET_ENTMAX15) {
        for (int j = 0; j < nv; j++) z[j] = l[j] / T;
        if (alpha == 1.5) ref_entmax15(a, z, nv); else ref_entmax_alpha(a, z, nv, alpha);
        for (int j = 0; j < nv; j++) aq[j] = a[j];
    } else {
        ref_new_q(aq, &a0q, lq, nv, T, zn, b);
        ref_new_d(a, l, nv, T, zn, b);
    }
    for (int j = nv; j < n; j++) a[j] = 0;
    /* entropy: softmax1's |a| / sum |a| is softmax(z): its quad entropy by ln Z, as above */
    refq Hq;
    if (zn == MET_SOFTMAX1) {
        refq mx = lq[0], c = 0, R = 0;
        for (int j = 1; j < nv; j++) mx = lq[j] > mx ? lq[j] : mx;
        for (int j = 0; j < nv; j++) {
            refq zj = (lq[j] - mx) / (refq)T;
            if (zj == 0) c += 1; else R += REFQ_EXP(zj);
        }
        refq lnZ = REFQ_LOG(c) + REFQ_LOG1P(R / c);
        Hq = 0;
        for (int j = 0; j < nv; j++) {
            refq zj = (lq[j] - mx) / (refq)T, pj = REFQ_EXP(zj - lnZ);
            if (pj > 0) Hq += pj * (lnZ - zj);
        }
    } else {
        Hq = ref_entropy_abs_q(aq, nv);
    }
    sum[met_at_per_t(ax, MET_ENTROPY, iT, iZ)] += (double)Hq;
    sum[met_at_per_t(ax, MET_ENTROPY_NORM, iT, iZ)] += (double)Hq / log((double)n);
    /* grad_exact */
    double ge = NAN;
    if (zn == MET_SIGMOID) {
        ge = 0;
        for (int j = 0; j < nv; j++) { /* a (1 - a) in quad: float64 loses digits where a ~ 1 */
            refq v = aq[j] * (1 - aq[j]);
            ge = fmax(ge, (double)v);
        }
    } else if (zn == MET_SOFTMAX1 || zn == MET_ENTMAX15) {
        double ssum = 0, *sv = malloc(nv * sizeof *sv);
        for (int j = 0; j < nv; j++) {
            sv[j] = zn == MET_SOFTMAX1 ? a[j] : (a[j] > 0 ? pow(a[j], 2 - alpha) : 0);
            ssum += sv[j];
        }
        for (int i = 0; i < nv; i++)
            for (int j = 0; j < nv; j++)
                M[i * nv + j] = zn == MET_SOFTMAX1 ? ((i == j) ? a[i] : 0) - a[i] * a[j]
                                                   : ((i == j) ? sv[i] : 0) - sv[i] * sv[j] / ssum;
        ge = ref_max_eig(M, nv);
        free(sv);
    }
    if (met_has_grad_exact(zn)) sum[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] += ge / T;
    /* grad_fd */
    for (size_t iE = 0; iE < ax->n_eps; iE++) {
        double eps = ax->eps[iE], un = 0, dd = 0, fdn = -1; /* fdn: the norm (quad branch) */
        uint64_t key = met_direction_key(ax->seed, ax->window, ax->layer, ax->head, t, iE);
        for (int j = 0; j < nv; j++) {
            u[j] = met_normal(key, j);
            un += u[j] * u[j];
        }
        if (zn == MET_ENTMAX15) {
            for (int j = 0; j < nv; j++) z[j] = (l[j] + eps * u[j] / sqrt(un)) / T;
            if (alpha == 1.5) ref_entmax15(ap, z, nv); else ref_entmax_alpha(ap, z, nv, alpha);
            for (int j = 0; j < nv; j++) dd += (ap[j] - a[j]) * (ap[j] - a[j]);
        } else {
            refq *lp = malloc(nv * sizeof *lp), ddq = 0;
            for (int j = 0; j < nv; j++) lp[j] = lq[j] + (refq)eps * ((refq)u[j] / REFQ_SQRT((refq)un));
            ref_change_q(&ddq, lq, lp, aq, a0q, nv, T, zn, b);
            fdn = (double)REFQ_SQRT(ddq); /* the root in quad: ddq may be below 1e-308 */
            free(lp);
        }
        sum[met_at_grad_fd(ax, iT, iE, iZ)] += (fdn >= 0 ? fdn : sqrt(dd)) / eps;
    }
    /* order by weight (sa_softmax): visible keys by ref_sa_before, masked ones after */
    for (int j = 0; j < n; j++) ord_sa[j] = j;
    for (int i = 1; i < nv; i++)
        for (int j = i; j > 0 && ref_sa_before(l[ord_sa[j]], l[ord_sa[j - 1]], T); j--) {
            int tt = ord_sa[j]; ord_sa[j] = ord_sa[j - 1]; ord_sa[j - 1] = tt;
        }
    free(lq), free(aq), free(apq), free(z), free(ap), free(u), free(M);
}

/* The head's means straight from docs/metrics.md, for one cut Lc. out laid out as met_head's.
 * rows_out (or NULL): per row t the N-loop values of (N index 0, T 0, normalizer 0) for
 * per-row checks: [Lc][MET_ROWS_USED]. */
static void ref_head(double *out, const float *scores, int ld, const float *vec, int Lc, int d,
                     const met_axes *ax) {
    size_t nout = met_out_count(ax);
    free(ref_lo), free(ref_hi);
    ref_lo = calloc(nout, sizeof *ref_lo), ref_hi = calloc(nout, sizeof *ref_hi);
    double *sum = calloc(nout, sizeof *sum), *cntN = calloc(ax->n_N, sizeof *cntN), cntT = 0;
    double *X = malloc((size_t)Lc * d * sizeof *X), *Y = malloc((size_t)Lc * d * sizeof *Y);
    for (int i = 0; i < Lc; i++) {
        double nn = 0;
        for (int k = 0; k < d; k++) {
            X[i * d + k] = vec[i * d + k];
            nn += X[i * d + k] * X[i * d + k];
        }
        nn = sqrt(nn);
        for (int k = 0; k < d; k++) Y[i * d + k] = nn > 0 ? X[i * d + k] / nn : 0;
    }
    double *l = malloc(Lc * sizeof *l), *z = malloc(Lc * sizeof *z), *a = malloc(Lc * sizeof *a),
           *ap = malloc(Lc * sizeof *ap), *u = malloc(Lc * sizeof *u), *s = malloc(d * sizeof *s),
           *M = malloc((size_t)Lc * Lc * sizeof *M), *g = malloc(Lc * sizeof *g);
    refq *zq = malloc(Lc * sizeof *zq), *aq = malloc(Lc * sizeof *aq),
         *apq = malloc(Lc * sizeof *apq);
    int *ord = malloc(Lc * sizeof *ord), *insel = malloc(Lc * sizeof *insel);
    int *ord_sa = malloc(Lc * sizeof *ord_sa);
    for (int t = 0; t < Lc; t++) {
        int nv = t + 1, n = ax->full_row ? Lc : nv;
        if (n < 2) continue;
        for (int j = 0; j < n; j++) l[j] = j < nv ? scores[t * ld + j] : -INFINITY;
        double lmax = -INFINITY;
        for (int j = 0; j < nv; j++) lmax = l[j] > lmax ? l[j] : lmax;
        /* order: logit desc, lower index first on ties (insertion sort is stable) */
        for (int j = 0; j < n; j++) ord[j] = j;
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && l[ord[j]] > l[ord[j - 1]]; j--) {
                int tt = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = tt;
            }
        double delta = INFINITY; /* over the visible y (all Lc in full_row) */
        int ndel = ax->full_row ? Lc : nv;
        for (int i = 0; i < ndel; i++)
            for (int j = i + 1; j < ndel; j++) {
                double v = norm_diff(Y + i * d, Y + j * d, 1, 1, d);
                delta = v < delta ? v : delta;
            }
        cntT += 1;
        for (size_t iN = 0; iN < ax->n_N; iN++) cntN[iN] += ax->N[iN] < n;
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            met_normalizer zn = ax->norm[iZ];
            const int *ordz = ord;
            double f = 1;
            if (zn == MET_SSMAX)
                f = (ax->ssmax_scale > 0 ? ax->ssmax_scale : 1 / log(1024.0)) * log((double)n);
            for (size_t iT = 0; iT < ax->n_T; iT++) {
                double T = ax->T[iT];
                for (int j = 0; j < nv; j++) z[j] = f * (l[j] - lmax) / T;
                if (zn > MET_SSMAX) {
                    ref_new_row(sum, a, ord_sa, l, nv, n, t, T, iT, iZ, ax);
                    if (zn == MET_SA_SOFTMAX) ordz = ord_sa;
                    goto per_n;
                }
                if (zn == MET_SPARSEMAX) ref_sparsemax(a, z, nv); else ref_softmax(a, z, nv);
                for (int j = nv; j < n; j++) a[j] = 0;
                /* entropy: quad softmax weights (sparsemax: its float64 weights) */
                refq Hq = 0;
                if (zn == MET_SPARSEMAX) {
                    for (int j = 0; j < nv; j++)
                        if (a[j] > 0) Hq -= (refq)a[j] * REFQ_LOG((refq)a[j]);
                } else {
                    for (int j = 0; j < nv; j++) zq[j] = (refq)f * ((refq)l[j] - (refq)lmax) / (refq)T;
                    ref_softmax_q(aq, zq, nv);
                    /* -a_j ln a_j with ln a_j = z_j - ln Z exactly (max z = 0); ln Z =
                     * ln c + log1p(R / c): even quad rounds 1 + R to 1 for R < 1e-34, and the
                     * dominant entry's -a ln a = a R is a share 1/(1 + |z|) of the entropy */
                    refq c = 0, R = 0;
                    for (int j = 0; j < nv; j++)
                        if (zq[j] == 0) c += 1; else R += REFQ_EXP(zq[j]);
                    refq lnZ = REFQ_LOG(c) + REFQ_LOG1P(R / c);
                    for (int j = 0; j < nv; j++)
                        if (aq[j] > 0) Hq += aq[j] * (lnZ - zq[j]);
                }
                double H = (double)Hq;
                sum[met_at_per_t(ax, MET_ENTROPY, iT, iZ)] += H;
                sum[met_at_per_t(ax, MET_ENTROPY_NORM, iT, iZ)] += H / log((double)n);
                if (zn == MET_SOFTMAX) {
                    for (int i = 0; i < nv; i++)
                        for (int j = 0; j < nv; j++)
                            M[i * nv + j] = ((i == j) ? a[i] : 0) - a[i] * a[j];
                    sum[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] += ref_max_eig(M, nv) / T;
                }
                for (size_t iE = 0; iE < ax->n_eps; iE++) {
                    double eps = ax->eps[iE];
                    uint64_t key = met_direction_key(ax->seed, ax->window, ax->layer, ax->head, t, iE);
                    double un = 0;
                    for (int j = 0; j < nv; j++) {
                        u[j] = met_normal(key, j);
                        un += u[j] * u[j];
                    }
                    double dd = 0, fdn = -1; /* fdn: the norm itself (quad branch) */
                    if (zn == MET_SPARSEMAX) {
                        for (int j = 0; j < nv; j++) /* shifted, as above */
                            z[j] = f * ((l[j] - lmax) + eps * u[j] / sqrt(un)) / T;
                        ref_sparsemax(ap, z, nv);
                        for (int j = 0; j < nv; j++) dd += (ap[j] - a[j]) * (ap[j] - a[j]);
                    } else { /* the difference of two quad softmaxes */
                        for (int j = 0; j < nv; j++)
                            zq[j] = (refq)f * ((refq)l[j] + (refq)eps * ((refq)u[j] / REFQ_SQRT((refq)un))) / (refq)T;
                        ref_softmax_q(apq, zq, nv);
                        /* every change as a quad difference but the dominant entry's (the
                         * largest logit, p): 1 - 1 = 0 in quad too when the rest is below
                         * 1e-34, so its change is minus the others' (both rows sum to 1) */
                        int p = 0;
                        for (int j = 1; j < nv; j++) p = l[j] > l[p] ? j : p;
                        refq ddq = 0, rest = 0;
                        for (int j = 0; j < nv; j++)
                            if (j != p) {
                                refq dj = apq[j] - aq[j];
                                rest += dj;
                                ddq += dj * dj;
                            }
                        /* the root in quad: changes below ~1e-154 square below double's range */
                        fdn = (double)REFQ_SQRT(ddq + rest * rest);
                    }
                    sum[met_at_grad_fd(ax, iT, iE, iZ)] += (fdn >= 0 ? fdn : sqrt(dd)) / eps;
                }
            per_n:
                for (size_t iN = 0; iN < ax->n_N; iN++) {
                    int N = ax->N[iN];
                    if (N >= n) continue;
                    memset(insel, 0, n * sizeof *insel);
                    for (int q = 0; q < N; q++) insel[ordz[q]] = 1;
                    double A = 0, U = 0, m = 0, d1 = 0, dt = 0;
                    memset(s, 0, d * sizeof *s);
                    for (int j = 0; j < n; j++)
                        if (insel[j]) {
                            A += a[j];
                            for (int k = 0; k < d; k++) s[k] += a[j] * X[j * d + k];
                            double nj = norm_diff(X + j * d, X + j * d, 1, 0, d);
                            m = nj > m ? nj : m;
                        } else {
                            U += a[j];
                        }
                    for (int i = 0; i < n; i++) {
                        if (insel[i]) continue;
                        dt += norm_diff(X + i * d, s, a[i], 1, d);
                        for (int j = 0; j < n; j++)
                            if (insel[j]) {
                                double v = norm_diff(X + i * d, X + j * d, 1, 1, d);
                                d1 = v > d1 ? v : d1;
                            }
                    }
                    double bound = U * d1 + ((n - N) * A - U) * m;
                    /* expectation: ((n-N)/n) sum_i || a_i x_i - (N/(n-1)) sum_{j!=i} a_j x_j || */
                    double ex = 0;
                    for (int i = 0; i < n; i++) {
                        double acc2 = 0;
                        for (int k = 0; k < d; k++) {
                            double o = 0;
                            for (int j = 0; j < n; j++)
                                if (j != i) o += a[j] * X[j * d + k];
                            double v = a[i] * X[i * d + k] - (double)N / (n - 1) * o;
                            acc2 += v * v;
                        }
                        ex += sqrt(acc2);
                    }
                    ex *= (double)(n - N) / n;
                    if (ax->aggregate) { /* || sum_{i unselected} a_i x_i - s ||, formed entry
                                          * by entry; bound U d1 + |U - A| m; expectation
                                          * || E (unselected sum - s) || = |n - 2N| / n ||S|| */
                        double v2 = 0, S2 = 0;
                        for (int k = 0; k < d; k++) {
                            double o = 0, all = 0;
                            for (int j = 0; j < n; j++) {
                                if (!insel[j]) o += a[j] * X[j * d + k];
                                all += a[j] * X[j * d + k];
                            }
                            v2 += (o - s[k]) * (o - s[k]);
                            S2 += all * all;
                        }
                        dt = sqrt(v2);
                        bound = U * d1 + fabs(U - A) * m;
                        ex = fabs((double)n - 2.0 * N) / n * sqrt(S2);
                    }
                    double r, xs = 0, up = 0;
                    int Ns, Nm, Nlo, Nhi, Nmlo, Nmhi;
                    ref_sep_row(&Ns, &Nm, &r, &Nlo, &Nhi, &Nmlo, &Nmhi, a, Y, insel, n, d, s, g);
                    double amin_sel = INFINITY;
                    for (int q = 0; q < N; q++)
                        if (ord[q] < nv && fabs(a[ord[q]]) < fabs(amin_sel)) amin_sel = a[ord[q]];
                    /* g = a (a |y|^2 - 2 s.y) may underflow in double: in logs, in quad */
                    if ((zn == MET_SOFTMAX || zn == MET_SSMAX) && amin_sel < 1e-100) { /* exp weights only */
                        refq c = 0, R = 0, *lam = malloc(n * sizeof *lam);
                        for (int j = 0; j < nv; j++)
                            zq[j] = (refq)f * ((refq)l[j] - (refq)lmax) / (refq)T;
                        for (int j = 0; j < nv; j++)
                            if (zq[j] == 0) c += 1; else R += REFQ_EXP(zq[j]);
                        refq lnZ = REFQ_LOG(c) + REFQ_LOG1P(R / c);
                        for (int j = 0; j < n; j++) lam[j] = j < nv ? zq[j] - lnZ : -INFINITY;
                        ref_sep_row_log(&Ns, &Nlo, &Nhi, lam, Y, insel, n, d);
                        free(lam);
                    } else if (zn > MET_SSMAX && fabs(amin_sel) < 1e-100) {
                        /* The other normalizers have no log-domain decision (docs/metrics.md
                         * 10.1): where a selected |a| is below 1e-100 its g underflows, and its
                         * D_i < r is decided by round-off; those keys are not checked. */
                        int tiny = 0;
                        for (int q = 0; q < N; q++)
                            if (ord[q] < nv && fabs(a[ord[q]]) < 1e-100) tiny++;
                        Nlo = Nlo > tiny ? Nlo - tiny : 0;
                        Nhi = Nhi + tiny < N ? Nhi + tiny : N;
                    }
                    for (int i = 0; i < n; i++) {
                        if (!insel[i]) continue;
                        double B = 0, Q = 0; /* exclusive sums, as the definition reads */
                        for (int j = 0; j < n; j++)
                            if (insel[j] && j != i) B += a[j], Q += a[j] * a[j];
                        double xi2 = B * B - delta * delta / 2 * (B * B - Q);
                        double xi = sqrt(xi2 > 0 ? xi2 : 0);
                        xs += xi;
                        double e = xi - r > 0 ? xi - r : 0;
                        up += exp(-e * e / 2);
                    }
                    double lower = r > 0 ? 1 - xs / (N * r) : 0;
                    double vals[MET_ROWS_USED] = {dt, bound, ex, (double)Ns / N,
                                                  lower > 0 ? lower : 0, up / N, (double)Nm / N};
                    for (int v = 0; v < MET_ROWS_USED; v++) sum[met_at_per_n(ax, v, iN, iT, iZ)] += vals[v];
                    size_t at = met_at_per_n(ax, MET_SEP_RATIO, iN, iT, iZ);
                    ref_lo[at] += (double)Nlo / N, ref_hi[at] += (double)Nhi / N;
                    at = met_at_per_n(ax, MET_SEP_MARGINAL, iN, iT, iZ);
                    ref_lo[at] += (double)Nmlo / N, ref_hi[at] += (double)Nmhi / N;
                }
            }
        }
    }
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
                for (int v = 0; v < MET_ROWS_USED; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    out[at] = cntN[iN] > 0 ? sum[at] / cntN[iN] : NAN;
                    ref_lo[at] /= cntN[iN], ref_hi[at] /= cntN[iN];
                }
                out[met_at_per_n(ax, MET_ROWS_USED, iN, iT, iZ)] = cntN[iN];
            }
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                out[at] = cntT > 0 ? sum[at] / cntT : NAN;
            }
            double T = ax->T[iT];
            out[met_at_per_t(ax, MET_GRAD_BOUND, iT, iZ)] =
                cntT > 0 ? fmin(1 / (4 * T), sqrt(2.0)) : NAN;
            if (!met_has_grad_exact(ax->norm[iZ])) out[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] = NAN;
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                out[at] = cntT > 0 ? sum[at] / cntT : NAN;
            }
        }
    free(sum), free(cntN), free(X), free(Y), free(l), free(z), free(a), free(ap), free(u), free(s);
    free(M), free(g), free(ord), free(insel), free(zq), free(aq), free(apq), free(ord_sa);
}

#endif
