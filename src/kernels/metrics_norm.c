/* metrics_norm.c -- the normalizers and their gradients (docs/metrics.md sections 7, 8, 10). */
#include "metrics.h"

#include <cblas.h>
#include <math.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* Speed notes: the build compiles with -fno-math-errno (CMakeLists.txt). sqrt never sees a
 * negative argument in the hot loops (clamped first), so errno handling only blocks their
 * vectorization. The pragma below lets the compiler fuse a*b+c into one FMA in this file (ISO
 * C mode, -std=c11, turns contraction off; the c / c^y kernel runs at half speed without it).
 * This is not -ffast-math: IEEE semantics, NaN and inf are unchanged, no reassociation; a fused
 * multiply-add only rounds once instead of twice. Every quantity that cancels (distances by the
 * Gram expansion) is clamped at 0 before sqrt, as before. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "metrics_int.h"


/* ln Z of the shifted logits x (max 0) from exp(x) = e: Z = c + R with c the count of the
 * maximal entries (exp(0) = 1 exactly) and R the rest, so ln Z = ln c + log1p(R / c) keeps R's
 * digits in near-one-hot rows, where log(1 + R) would round R < 1e-16 away (docs/metrics.md
 * section 8). NaN entries fall into R and propagate. Returns Z in *Z. */
static double log_partition(double *Z, const double *x, const double *e, size_t n) {
    double cl[8] = {0}, rl[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int q = 0; q < 8; q++) {
            int top = x[i + q] == 0;
            cl[q] += top ? 1.0 : 0.0;
            rl[q] += top ? 0.0 : e[i + q];
        }
    for (; i < n; i++) {
        int top = x[i] == 0;
        cl[0] += top ? 1.0 : 0.0;
        rl[0] += top ? 0.0 : e[i];
    }
    double c = 0, R = 0;
    for (int q = 0; q < 8; q++) c += cl[q], R += rl[q];
    *Z = c + R;
    if (!(c > 0)) return log(*Z); /* all logits NaN: NaN */
    return log(c) + log1p(R / c);
}

double met_softmax(double *a, const double *z, size_t n) {
    double zmax = -INFINITY;
    for (size_t j = 0; j < n; j++)
        if (z[j] > zmax) zmax = z[j];
    for (size_t j = 0; j < n; j++) a[j] = z[j] - zmax;
    exp_nonpos(a, a, n);
    double cl = 0, R = 0; /* ln Z as in log_partition (z may alias a: count exp = 1) */
    for (size_t j = 0; j < n; j++) {
        int top = a[j] == 1.0;
        cl += top ? 1.0 : 0.0;
        R += top ? 0.0 : a[j];
    }
    double sum = cl + R, inv = 1.0 / sum;
    for (size_t j = 0; j < n; j++) a[j] *= inv;
    return cl > 0 ? log(cl) + log1p(R / cl) : log(sum);
}

/* Sums in 8 independent lanes, combined in a fixed order: vectorizable without reassociation
 * flags, and the result does not depend on the CPU. */

/* Softmax of z = f l over n >= 1 entries, the hot path of the head job: x [n] gets
 * z_j - max z = f (l_j - max l) (the entropy needs it), a [n] the weights (a may alias l).
 * Shift, then scale (docs/metrics.md section 10): l_j - max l is exact for float32 logits held
 * in double, so the only rounding is the one product (scaling first rounded f l_j, whose
 * error is relative to |f l_j|, before the shift cancelled it). Returns ln Z of the shifted
 * logits (log_partition). NaN logits are skipped by the max and propagate through exp and the
 * sum, as in met_softmax. */
double met_softmax_scaled(double *a, double *x, const double *l, double f, size_t n) {
    double mx[LANES];
    for (int q = 0; q < LANES; q++) mx[q] = -INFINITY;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) {
            double z = l[i + q];
            mx[q] = z > mx[q] ? z : mx[q];
        }
    for (; i < n; i++) mx[0] = l[i] > mx[0] ? l[i] : mx[0];
    double lmax = -INFINITY;
    for (int q = 0; q < LANES; q++) lmax = mx[q] > lmax ? mx[q] : lmax;
    for (size_t j = 0; j < n; j++) x[j] = (l[j] - lmax) * f;
    exp_nonpos(a, x, n);
    double sum, lnZ = log_partition(&sum, x, a, n), inv = 1.0 / sum;
    for (size_t j = 0; j < n; j++) a[j] *= inv;
    return lnZ;
}

/* Michelot: tau = (sum_{S} z - 1)/|S| with S shrinking to {z > tau}; tau only grows and S
 * is exactly the support when it stops changing. */
/* Michelot on logits already shifted to max 0 (a may alias z: a is written last) */
static void sparsemax_shifted(double *a, const double *z, size_t n) {
    double sum = 0;
    for (size_t j = 0; j < n; j++) sum += z[j];
    size_t k = n;
    double tau = (sum - 1.0) / (double)k;
    for (;;) {
        double s2 = 0;
        size_t k2 = 0;
        for (size_t j = 0; j < n; j++)
            if (z[j] > tau) {
                s2 += z[j];
                k2++;
            }
        /* exact arithmetic shrinks the set until it is stable; rounding can make tau dip and
         * the set regrow, so stop as soon as it stops shrinking (at most n passes) */
        if (k2 >= k || k2 == 0) break;
        k = k2;
        tau = (s2 - 1.0) / (double)k;
    }
    for (size_t j = 0; j < n; j++) a[j] = z[j] > tau ? z[j] - tau : 0.0;
}

void met_sparsemax(double *a, const double *z, size_t n) {
    /* on z - max z (docs/metrics.md section 10): tau is then O(1) whatever the logits' size, so
     * sum a - 1 stays at round-off (unshifted, (sum z - 1)/k lost the 1 at T = 1e-3) */
    double zmax = -INFINITY;
    for (size_t j = 0; j < n; j++)
        if (z[j] > zmax) zmax = z[j];
    if (!(zmax > -INFINITY)) zmax = 0; /* all NaN: let NaN through */
    for (size_t j = 0; j < n; j++) a[j] = z[j] - zmax;
    sparsemax_shifted(a, a, n);
}


/* Returns ln Z of the shifted logits for softmax/ssmax (entropy identity), 0 for sparsemax;
 * zmax_out gets max z. z is scratch [nv]. */
double met_weights_with_z(double *a, double *z, double *zmax_out, const double *l, size_t nv,
                             size_t n, double T, met_normalizer zn, double ssmax_scale) {
    double f = 1.0 / T;
    if (zn == MET_SSMAX) f *= ssmax_factor(ssmax_scale, n);
    /* shift, then scale (see met_softmax_scaled) */
    double lmax = -INFINITY;
    for (size_t j = 0; j < nv; j++)
        if (l[j] > lmax) lmax = l[j];
    for (size_t j = 0; j < nv; j++) z[j] = (l[j] - lmax) * f;
    double zmax = lmax * f, lnZ = 0;
    if (zn == MET_SPARSEMAX)
        sparsemax_shifted(a, z, nv); /* z - max z = 0 at the max already */
    else
        lnZ = met_softmax(a, z, nv);
    for (size_t j = nv; j < n; j++) a[j] = 0.0;
    if (zmax_out) *zmax_out = zmax;
    return lnZ;
}

void met_weights(double *a, const double *l, size_t nv, size_t n, double T, met_normalizer zn,
                 double ssmax_scale) {
    /* in place: both normalizers write a[j] only in element-wise passes after reading z */
    double f = 1.0 / T;
    if (zn == MET_SSMAX) f *= ssmax_factor(ssmax_scale, n);
    double lmax = -INFINITY; /* shift, then scale (see met_softmax_scaled) */
    for (size_t j = 0; j < nv; j++)
        if (l[j] > lmax) lmax = l[j];
    if (!(lmax > -INFINITY)) lmax = 0;
    for (size_t j = 0; j < nv; j++) a[j] = (l[j] - lmax) * f;
    if (zn == MET_SPARSEMAX)
        met_sparsemax(a, a, nv);
    else
        met_softmax(a, a, nv);
    for (size_t j = nv; j < n; j++) a[j] = 0.0;
}

/* ---------------- grad_fd (section 7) ---------------- */

/* expm1(x) for |x| <= 0.5 by its Taylor polynomial to x^16 (truncation below 2e-18 relative),
 * branch-free so that the loops calling it vectorize. */
static inline double expm1_small(double x) {
    double p = 1.0 / 20922789888000.0;
    p = p * x + 1.0 / 1307674368000.0;
    p = p * x + 1.0 / 87178291200.0;
    p = p * x + 1.0 / 6227020800.0;
    p = p * x + 1.0 / 479001600.0;
    p = p * x + 1.0 / 39916800.0;
    p = p * x + 1.0 / 3628800.0;
    p = p * x + 1.0 / 362880.0;
    p = p * x + 1.0 / 40320.0;
    p = p * x + 1.0 / 5040.0;
    p = p * x + 1.0 / 720.0;
    p = p * x + 1.0 / 120.0;
    p = p * x + 1.0 / 24.0;
    p = p * x + 1.0 / 6.0;
    p = p * x + 0.5;
    p = p * x + 1.0;
    return p * x;
}

/* docs/metrics.md section 7: |softmax(f (l + eps u)) - softmax(f l)|_2 for the row's weights
 * a = softmax(f l) over n entries, dominant entry p (a_p = max a), without subtracting the two
 * nearly equal softmaxes (their difference has an absolute floor of ulp(max a), and the
 * dominant weight's change is lost entirely where 1 - 1 = 0). With delta_j = f eps (u_j - u_p)
 * (softmax is shift-invariant), E_j = expm1(delta_j) and mu = sum_j a_j E_j, exactly
 *   a'_j - a_j = a_j (E_j - mu) / (1 + mu),
 * used when every |delta_j| <= 1/2 (expm1 by a polynomial there). Otherwise the perturbed
 * softmax is formed (ap: scratch [n], z: scratch [n]), a'_j - a_j taken directly for j != p
 * (no cancellation of the dominant 1) and the dominant's change as minus their sum (both
 * rows sum to 1). */
double met_softmax_change_norm(const double *a, size_t p, const double *l, const double *u,
                                  double umin, double umax, double f, double eps, size_t n,
                                  double *ap, double *z) {
    /* max_j |delta_j| from the direction's range (umin, umax: min and max of u [n]) */
    double fe = f * eps, up = u[p], dlo = fe * (up - umin), dhi = fe * (umax - up);
    double dmax = dlo > dhi ? dlo : dhi;
    size_t i = 0;
    double acc[LANES] = {0};
    if (dmax <= 0.5) {
        double mul[LANES] = {0};
        for (; i + LANES <= n; i += LANES)
            for (int q = 0; q < LANES; q++) {
                double E = expm1_small(fe * (u[i + q] - up));
                ap[i + q] = E;
                mul[q] += a[i + q] * E;
            }
        for (; i < n; i++) {
            double E = expm1_small(fe * (u[i] - up));
            ap[i] = E;
            mul[0] += a[i] * E;
        }
        double mu = 0;
        for (int q = 0; q < LANES; q++) mu += mul[q];
        double inv = 1.0 / (1.0 + mu);
        for (i = 0; i + LANES <= n; i += LANES)
            for (int q = 0; q < LANES; q++) {
                double d = a[i + q] * (ap[i + q] - mu) * inv;
                acc[q] += d * d;
            }
        for (; i < n; i++) {
            double d = a[i] * (ap[i] - mu) * inv;
            acc[0] += d * d;
        }
        double ss = 0;
        for (int q = 0; q < LANES; q++) ss += acc[q];
        if (ss < MET_FD_TINY) { /* the squares underflowed: again, scaled by the largest */
            double big = 0;
            for (i = 0; i < n; i++) {
                double d = fabs(a[i] * (ap[i] - mu) * inv);
                big = d > big ? d : big;
            }
            if (!(big > 0)) return sqrt(ss);
            ss = 0;
            for (i = 0; i < n; i++) {
                double d = a[i] * (ap[i] - mu) * inv / big;
                ss += d * d;
            }
            return big * sqrt(ss);
        }
        return sqrt(ss);
    }
    for (size_t j = 0; j < n; j++) ap[j] = l[j] + eps * u[j];
    met_softmax_scaled(ap, z, ap, f, n);
    double rl[LANES] = {0};
    for (i = 0; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) {
            double d = i + q == p ? 0.0 : ap[i + q] - a[i + q];
            rl[q] += d;
            acc[q] += d * d;
        }
    for (; i < n; i++) {
        double d = i == p ? 0.0 : ap[i] - a[i];
        rl[0] += d;
        acc[0] += d * d;
    }
    double ss = 0, rest = 0;
    for (int q = 0; q < LANES; q++) ss += acc[q], rest += rl[q];
    if (ss + rest * rest < MET_FD_TINY) { /* underflowed squares: scaled by the largest */
        double big = fabs(rest);
        for (i = 0; i < n; i++) {
            double d = i == p ? 0.0 : fabs(ap[i] - a[i]);
            big = d > big ? d : big;
        }
        if (!(big > 0)) return sqrt(ss + rest * rest);
        double sc = (rest / big) * (rest / big);
        for (i = 0; i < n; i++) {
            double d = i == p ? 0.0 : (ap[i] - a[i]) / big;
            sc += d * d;
        }
        return big * sqrt(sc);
    }
    return sqrt(ss + rest * rest);
}

/* ---------------- grad_exact (section 7) ---------------- */

/* For a on the simplex (sum a = 1, which softmax gives), the secular equation of the rank-one
 * update diag(a) - a a^T, sum_j a_j^2/(a_j - lambda) = 1, equals lambda * sum_j a_j/(a_j -
 * lambda) = 0: phi(lambda) = sum_j a_j/(a_j - lambda) = 0 has no "1" left to cancel against,
 * so tiny eigenvalues near one-hot rows keep their relative accuracy. The largest root lies in
 * (a2, a1) (interlacing), where phi rises from -inf to +inf.
 * Iteration (the rational "two poles + constant" model of LAPACK's dlaed4): the poles a1 and
 * a2 (with its ties, weight W2 = a2 * count) are kept exactly; the remaining terms R, with
 * value and slope matched at the current lambda, become C + S/(a2 - mu). The model's root is
 * the next iterate (a quadratic, solved without cancellation); it is exact for n = 2 and
 * converges in 2-4 passes of O(n) otherwise (plain Newton needed 10-35). Lambda is held as
 * an offset v from the nearer pole (lambda = o + sg v), so rows whose root sits at v ~ 1e-200
 * from a pole keep full relative accuracy; a bracket on v falls back to bisection. */
/* The solver on the rest terms: rest [m] holds the a_j with 0 < a_j < a2 (zero weights add
 * nothing to phi and are left out, which makes sparse rows at small T cheap), or, with
 * masked, all weights, of which only those are kept. Sums in 8 lanes (vectorizable). Two
 * divisions, not a reciprocal: 1/den overflows where den is subnormal (near-one-hot rows at
 * T = 1e-3 have roots ~1e-313), a_j/den does not. */
static inline __attribute__((always_inline)) double
jacobian_norm_rest(const double *rest, size_t m, double a1, double a2, size_t cnt2,
                   const int masked) {
    const double g = a1 - a2, W2 = a2 * (double)cnt2;
    /* first pass at the midpoint decides the nearer pole; lambda = o + sg v, v in (0, hi] */
    double o = a2, sg = 1, v = 0.5 * g, lo = 0, hi = g;
    int first = 1;
    for (int it = 0; it < 100; it++) {
        /* rest R = sum over 0 < a_j < a2 of a_j/(a_j - lambda), and its lambda-slope */
        double Rl[LANES] = {0}, dRl[LANES] = {0};
        /* |a_j - lambda| >= lambda - a2 for every kept j: where that is at least 2^-1000,
         * no 1/den can overflow and one division per entry serves both terms (q = x (1/den),
         * q / den = q (1/den): one more rounding each, ~1 ulp; every term of R has the sign of
         * -1 and every term of dR the sign of +1, so no cancellation amplifies it, see
         * docs/metrics.md section 7). Divisions were the Jacobian's throughput limit. */
        const int recip = (sg > 0 ? v : g - v) >= 0x1p-1000;
#define MET_JAC_TERM(l, x_, RECIP)                                                  \
    do {                                                                            \
        double x = (x_);                                                            \
        int keep = !masked || (x > 0 && x < a2);                                    \
        double den = (x - o) - sg * v; /* a_j - lambda, never 0 for the kept j */   \
        den = keep ? den : 1.0;                                                     \
        double xk = keep ? x : 0.0, q;                                              \
        if (RECIP) {                                                                \
            double rd = 1.0 / den;                                                  \
            q = xk * rd;                                                            \
            dRl[l] += q * rd;                                                       \
        } else {                                                                    \
            q = xk / den;                                                           \
            dRl[l] += q / den;                                                      \
        }                                                                           \
        Rl[l] += q;                                                                 \
    } while (0)
        size_t j = 0;
        if (recip)
            for (; j + LANES <= m; j += LANES)
                for (int l = 0; l < LANES; l++) MET_JAC_TERM(l, rest[j + l], 1);
        else
            for (; j + LANES <= m; j += LANES)
                for (int l = 0; l < LANES; l++) MET_JAC_TERM(l, rest[j + l], 0);
        for (; j < m; j++) {
            if (recip)
                MET_JAC_TERM(0, rest[j], 1);
            else
                MET_JAC_TERM(0, rest[j], 0);
        }
#undef MET_JAC_TERM
        double R = 0, dR = 0;
        for (int l = 0; l < LANES; l++) R += Rl[l], dR += dRl[l];
        double x = sg > 0 ? v : g - v; /* lambda - a2 */
        double y = sg > 0 ? g - v : v; /* a1 - lambda */
        double phi = a1 / y - W2 / x + R;
        if (first) {
            first = 0;
            if (phi == 0) return o + sg * v;
            if (phi < 0) { /* root in (mid, a1): measure from a1 */
                o = a1, sg = -1, lo = 0, hi = v;
            } else {
                lo = 0, hi = v;
            }
        } else {
            if (phi == 0) break;
            /* phi rises with lambda; v runs with lambda when sg = +1, against it when -1 */
            if ((phi > 0) == (sg > 0))
                hi = v;
            else
                lo = v;
        }
        /* model C + S/(a2 - mu) + a1/(a1 - mu) with S = W2 + dR x^2, C = R + dR x (<= 0) */
        double S = W2 + dR * x * x, C = R + dR * x;
        if (C > 0) C = 0; /* only rounding can make it positive */
        double vn;
        if (sg > 0) { /* xn = distance from a2: C xn^2 - b xn + S g = 0, the root in (0, g) */
            double b = C * g + S + a1, disc = sqrt(b * b - 4 * C * S * g);
            vn = b > 0 ? 2 * S * g / (b + disc) : (b - disc) / (2 * C);
        } else { /* yn = distance from a1: |C| yn^2 - |b'| yn + a1 g = 0, the smaller root */
            double bp = S + a1 - C * g, disc = bp * bp + 4 * C * a1 * g;
            vn = 2 * a1 * g / (bp + sqrt(disc > 0 ? disc : 0));
        }
        /* the bracket ends are admissible: at convergence the model lands on the last v */
        if (!(vn >= lo && vn <= hi)) vn = 0.5 * (lo + hi);
        double step = fabs(vn - v);
        v = vn;
        if (step <= 1e-12 * v || hi - lo <= 4e-16 * hi) break;
    }
    return o + sg * v;
}

/* The two largest distinct weights a1 > a2 and their counts, in two vectorizable passes.
 * Returns 1 when the answer is already known (*done: repeated a1, one-hot or zero row). NaN
 * entries are skipped (never > or == anything), as the serial scan did. */
static int jacobian_poles(double *done, double *a1o, double *a2o, size_t *cnt2o,
                          const double *a, size_t n) {
    double ml[LANES];
    for (int l = 0; l < LANES; l++) ml[l] = -1;
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) ml[l] = a[j + l] > ml[l] ? a[j + l] : ml[l];
    for (; j < n; j++) ml[0] = a[j] > ml[0] ? a[j] : ml[0];
    double a1 = -1;
    for (int l = 0; l < LANES; l++) a1 = ml[l] > a1 ? ml[l] : a1;
    if (!(a1 > 0)) return *done = 0.0, 1;
    double c1l[LANES] = {0}, m2l[LANES] = {0};
    for (j = 0; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            double x = a[j + l];
            c1l[l] += x == a1 ? 1.0 : 0.0;
            double y = x < a1 ? x : 0.0;
            m2l[l] = y > m2l[l] ? y : m2l[l];
        }
    for (; j < n; j++) {
        double x = a[j];
        c1l[0] += x == a1 ? 1.0 : 0.0;
        double y = x < a1 ? x : 0.0;
        m2l[0] = y > m2l[0] ? y : m2l[0];
    }
    double cnt1 = 0, a2 = 0;
    for (int l = 0; l < LANES; l++) cnt1 += c1l[l], a2 = m2l[l] > a2 ? m2l[l] : a2;
    if (cnt1 >= 2) return *done = a1, 1; /* repeated largest weight: a1 is the eigenvalue */
    if (!(a2 > 0)) return *done = 0.0, 1; /* one-hot: diag(a1 - a1^2, 0...) = 0 */
    double c2l[LANES] = {0};
    for (j = 0; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) c2l[l] += a[j + l] == a2 ? 1.0 : 0.0;
    for (; j < n; j++) c2l[0] += a[j] == a2 ? 1.0 : 0.0;
    double cnt2 = 0;
    for (int l = 0; l < LANES; l++) cnt2 += c2l[l];
    *a1o = a1, *a2o = a2, *cnt2o = (size_t)cnt2;
    return 0;
}

/* For a on the simplex (sum a = 1, which softmax gives), the secular equation of the rank-one
 * update diag(a) - a a^T, sum_j a_j^2/(a_j - lambda) = 1, equals lambda * sum_j a_j/(a_j -
 * lambda) = 0: phi(lambda) = sum_j a_j/(a_j - lambda) = 0 has no "1" left to cancel against,
 * so tiny eigenvalues near one-hot rows keep their relative accuracy. The largest root lies in
 * (a2, a1) (interlacing), where phi rises from -inf to +inf.
 * Iteration (the rational "two poles + constant" model of LAPACK's dlaed4): the poles a1 and
 * a2 (with its ties, weight W2 = a2 * count) are kept exactly; the remaining terms R, with
 * value and slope matched at the current lambda, become C + S/(a2 - mu). The model's root is
 * the next iterate (a quadratic, solved without cancellation); it is exact for n = 2 and
 * converges in 2-4 passes of O(n) otherwise (plain Newton needed 10-35). Lambda is held as
 * an offset v from the nearer pole (lambda = o + sg v), so rows whose root sits at v ~ 1e-200
 * from a pole keep full relative accuracy; a bracket on v falls back to bisection.
 * rest: scratch [n] for the terms 0 < a_j < a2 (compacted once, so the passes skip zeros). */
double met_jacobian_norm(const double *a, size_t n, double *rest) {
    double a1, a2, done;
    size_t cnt2;
    if (jacobian_poles(&done, &a1, &a2, &cnt2, a, n)) return done;
    size_t m = 0, j = 0;
#if defined(__AVX512F__)
    /* 8 at a time: compress the kept lanes in a register, store all 8 (rest has n entries,
     * m + 8 <= j + 8 <= n), advance by their count; the same rest [0 .. m) as below */
    const __m512d zero = _mm512_setzero_pd(), hi = _mm512_set1_pd(a2);
    for (; j + 8 <= n; j += 8) {
        __m512d x = _mm512_loadu_pd(a + j);
        __mmask8 k = _mm512_cmp_pd_mask(x, zero, _CMP_GT_OQ) & _mm512_cmp_pd_mask(x, hi, _CMP_LT_OQ);
        _mm512_storeu_pd(rest + m, _mm512_maskz_compress_pd(k, x));
        m += (size_t)__builtin_popcount((unsigned)k);
    }
#endif
    for (; j < n; j++) {
        double x = a[j];
        rest[m] = x;
        m += (x > 0) & (x < a2); /* branch-free: zeros and weights mix unpredictably */
    }
    return jacobian_norm_rest(rest, m, a1, a2, cnt2, 0);
}

double met_softmax_jacobian_norm(const double *a, size_t n) {
    double a1, a2, done;
    size_t cnt2;
    if (jacobian_poles(&done, &a1, &a2, &cnt2, a, n)) return done;
    return jacobian_norm_rest(a, n, a1, a2, cnt2, 1); /* no scratch here: mask instead */
}

/* ---------------- the normalizers after ssmax (docs/metrics.md section 10.1) ---------------- */

static double softmax1_into(double *a, double *x, const double *l, size_t n, double f);

/* sigmoid(u) without overflow for any u */
static inline double sigmoid_of(double u) {
    if (u >= 0) return 1.0 / (1.0 + exp(-u));
    double e = exp(u);
    return e / (1.0 + e);
}

/* alpha-entmax of x [n] = (alpha - 1) (z - max z) (max x = 0), a [n] (may alias x):
 * a_j = [x_j - tau]_+^(1/(alpha-1)) with tau the root of sum_j a_j = 1 (Peters, Niculae and
 * Martins 2019, their eq. 9). tau lies in [-1, 0) (the top entry alone gives 1 at tau = -1,
 * every entry is 0 at tau = 0); bisection until the bracket is two neighbouring doubles finds
 * the support. For alpha = 1.5 tau is then taken exactly on that support from the quadratic
 * sum_{j in S} (x_j - tau)^2 = 1, tau = mean - sqrt((1 - sum (x_j - mean)^2) / k), so the
 * weights are the exact (sort-based) algorithm's; for other alpha the weights at the bracket's
 * lower end are divided by their sum, as the entmax authors' bisection does. NaN in x gives a
 * NaN row. */
static void entmax_shifted(double *a, const double *x, size_t n, double alpha) {
    double chk = 0;
    for (size_t j = 0; j < n; j++) chk += x[j];
    if (chk != chk) {
        for (size_t j = 0; j < n; j++) a[j] = NAN;
        return;
    }
    const double pw = 1.0 / (alpha - 1.0);
    const int sq = alpha == 1.5, lin = alpha == 2.0;
    double lo = -1.0, hi = 0.0;
    for (int it = 0; it < 2100; it++) {
        double mid = 0.5 * (lo + hi);
        if (!(mid > lo && mid < hi)) break;
        double s = 0;
        for (size_t j = 0; j < n; j++) {
            double d = x[j] - mid;
            if (d > 0) s += sq ? d * d : lin ? d : pow(d, pw);
        }
        if (s >= 1.0) lo = mid; else hi = mid;
    }
    if (sq) {
        size_t k = 0;
        double mean = 0, ss = 0;
        for (size_t j = 0; j < n; j++)
            if (x[j] > lo) mean += x[j], k++;
        mean /= (double)k;
        for (size_t j = 0; j < n; j++)
            if (x[j] > lo) ss += (x[j] - mean) * (x[j] - mean);
        double r = (1.0 - ss) / (double)k;
        double tau = mean - sqrt(r > 0 ? r : 0);
        for (size_t j = 0; j < n; j++) {
            double d = x[j] - tau;
            a[j] = d > 0 ? d * d : 0.0;
        }
        return;
    }
    double s = 0;
    for (size_t j = 0; j < n; j++) {
        double d = x[j] - lo;
        a[j] = d > 0 ? (lin ? d : pow(d, pw)) : 0.0;
        s += a[j];
    }
    for (size_t j = 0; j < n; j++) a[j] /= s;
}

double met_entmax_alpha(const met_axes *ax) { return ax->entmax_alpha > 0 ? ax->entmax_alpha : 1.5; }
double met_sigmoid_b(const met_axes *ax, size_t n) {
    return ax->sigmoid_bias_set ? ax->sigmoid_bias : -log((double)n);
}

/* Section 10.1: the weights a [n] of sa_softmax, sa_softmax_norm, entmax15, sigmoid and
 * softmax1 for the raw logits l [nv] at T (entries nv..n-1 = 0, full_row masking); a must not
 * alias l. x: scratch [nv]. Returns softmax1's null weight 1 / (1 + sum_j exp(z_j)) (the
 * share the "off-by-one" softmax gives to nothing), 0 for the others. */
double met_weights_ext(double *a, double *x, const double *l, size_t nv, size_t n, double T,
                       met_normalizer zn, const met_axes *ax) {
    double f = 1.0 / T, lmax = -INFINITY, lmin = INFINITY, a0 = 0;
    for (size_t j = 0; j < nv; j++) {
        if (l[j] > lmax) lmax = l[j];
        if (l[j] < lmin) lmin = l[j];
    }
    if (!(lmax > -INFINITY)) lmax = 0, lmin = 0; /* all NaN: let NaN through */
    switch (zn) {
    case MET_SA_SOFTMAX: /* z_j softmax(z)_j, z = l / T: softmax shifted then scaled */
        met_softmax_scaled(a, x, l, f, nv);
        for (size_t j = 0; j < nv; j++) a[j] *= l[j] * f;
        break;
    case MET_SA_SOFTMAX_NORM: { /* (z - m) / (M - m) softmax(z), m = min(z_min, 0), M =
                                 * max(0, z_max): the factor is the same on l (T cancels) */
        met_softmax_scaled(a, x, l, f, nv);
        double m = lmin < 0 ? lmin : 0, M = lmax > 0 ? lmax : 0;
        if (M > m) /* all logits 0: the factor is 0 / 0, taken as 1 (the weights are softmax's) */
            for (size_t j = 0; j < nv; j++) a[j] *= (l[j] - m) / (M - m);
        break;
    }
    case MET_ENTMAX15: {
        double alpha = met_entmax_alpha(ax), g = (alpha - 1.0) * f;
        for (size_t j = 0; j < nv; j++) x[j] = (l[j] - lmax) * g;
        entmax_shifted(a, x, nv, alpha);
        break;
    }
    case MET_SIGMOID: {
        double b = met_sigmoid_b(ax, n);
        for (size_t j = 0; j < nv; j++) a[j] = sigmoid_of(l[j] * f + b);
        break;
    }
    case MET_SOFTMAX1:
        a0 = softmax1_into(a, x, l, nv, f);
        break;
    default:
        for (size_t j = 0; j < nv; j++) a[j] = NAN;
    }
    for (size_t j = nv; j < n; j++) a[j] = 0.0;
    return a0;
}

/* Section 10.1's entropy of weights that need not sum to 1 or be positive: the Shannon
 * entropy of p_j = |a_j| / sum_k |a_k|. The dominant entry k's ln p_k = -log1p(R / |a_k|)
 * (R = the other |a_j| summed) keeps near-one-hot rows accurate, as ln Z = ln c + log1p(R / c)
 * does for softmax (section 8). A row of zero weights has entropy 0. */
double met_entropy_abs(const double *a, size_t nv) {
    size_t k = 0;
    double big = -1;
    for (size_t j = 0; j < nv; j++)
        if (fabs(a[j]) > big) big = fabs(a[j]), k = j;
    if (big == 0) return 0.0;
    if (!(big > 0)) return NAN;
    double R = 0;
    for (size_t j = 0; j < nv; j++)
        if (j != k) R += fabs(a[j]);
    double r = R / big, lnS = log(big) + log1p(r), S = big + R, H = big / S * log1p(r);
    for (size_t j = 0; j < nv; j++) {
        double aj = fabs(a[j]);
        if (j != k && aj > 0) H += aj / S * (lnS - log(aj));
    }
    return H > 0 ? H : 0.0;
}

/* Largest eigenvalue of diag(a) - a a^T for a >= 0 with sum a = 1 - a0, a0 > 0 (softmax1's
 * Jacobian with respect to z; section 10.1). Its secular equation 1 = sum_j a_j^2 / (a_j -
 * lambda) is, with a_j^2 / (a_j - lambda) = a_j + lambda a_j / (a_j - lambda), the
 * cancellation-free h(lambda) = a0 - lambda sum_j a_j / (a_j - lambda) = 0; h falls from +inf
 * to -inf between the two largest distinct weights a2 < a1 (interlacing). Lambda is held as an
 * offset v from the nearer pole (as met_jacobian_norm does) and found by Newton's method
 * safeguarded by bisection. A repeated a1 is itself the eigenvalue; a single nonzero weight
 * gives a1 (1 - a1) = a1 a0. */
double met_jacobian_norm_sub(const double *a, size_t n, double a0) {
    double a1 = -1, a2 = 0;
    size_t c1 = 0;
    for (size_t j = 0; j < n; j++)
        if (a[j] > a1) a1 = a[j];
    if (!(a1 > 0)) return a1 == 0 ? 0.0 : NAN;
    for (size_t j = 0; j < n; j++) {
        c1 += a[j] == a1;
        if (a[j] < a1 && a[j] > a2) a2 = a[j];
    }
    if (c1 >= 2) return a1;
    if (!(a2 > 0)) return a1 * a0;
    const double g = a1 - a2;
    double o = a2, sg = 1, v = 0.5 * g, lo = 0, hi = g;
    for (int it = 0; it < 300; it++) {
        double lam = o + sg * v, phi = 0, dphi = 0;
        for (size_t j = 0; j < n; j++) {
            if (!(a[j] > 0)) continue;
            double den = (a[j] - o) - sg * v, q = a[j] / den;
            phi += q;
            dphi += q / den * a[j];
        }
        double h = a0 - lam * phi; /* dh/dlambda = -sum a_j^2 / (a_j - lambda)^2 = -dphi */
        if (it == 0) {
            if (h == 0) return lam;
            if (h < 0) lo = 0, hi = v;          /* root in (a2, mid): measure from a2 */
            else o = a1, sg = -1, lo = 0, hi = v; /* root in (mid, a1): measure from a1 */
            v = 0.5 * hi;
            continue;
        }
        if (h == 0) break;
        /* h falls with lambda; v runs with lambda when sg = +1 */
        if ((h > 0) == (sg > 0)) lo = v; else hi = v;
        double vn = v + h / (sg * dphi); /* Newton: dv = -h / (sg dh/dlambda) */
        if (!(vn > lo && vn < hi)) vn = 0.5 * (lo + hi);
        double step = fabs(vn - v);
        v = vn;
        if (step <= 1e-15 * v || hi - lo <= 4e-16 * hi) break;
    }
    return o + sg * v;
}

/* Section 10.1's grad_exact of zn (met_has_grad_exact) with respect to the raw logits, for
 * the weights a [nv] of one row at T (a0: softmax1's null weight). b, rest: scratch [nv]. */
double met_grad_exact_ext(const double *a, const double *l, size_t nv, size_t n, double T,
                          met_normalizer zn, const met_axes *ax, double a0, double *b,
                          double *rest) {
    double f = 1.0 / T;
    if (zn == MET_SIGMOID) { /* diag(s (1 - s)): its largest entry, e / (1 + e)^2, e = e^-|u| */
        double bias = met_sigmoid_b(ax, n), mx = 0;
        for (size_t j = 0; j < nv; j++) {
            double e = exp(-fabs(l[j] * f + bias)), d = e / ((1 + e) * (1 + e));
            if (d > mx || d != d) mx = d;
        }
        return mx * f;
    }
    if (zn == MET_ENTMAX15) { /* diag(s) - s s^T / sum s, s = a^(2 - alpha) on the support:
                               * sum s times the softmax form diag(b) - b b^T of b = s / sum s */
        double alpha = met_entmax_alpha(ax), ss = 0;
        for (size_t j = 0; j < nv; j++) {
            b[j] = a[j] > 0 ? (alpha == 1.5 ? sqrt(a[j]) : pow(a[j], 2.0 - alpha)) : 0.0;
            ss += b[j];
        }
        for (size_t j = 0; j < nv; j++) b[j] /= ss;
        return ss * met_jacobian_norm(b, nv, rest) * f;
    }
    if (zn == MET_SOFTMAX1) return met_jacobian_norm_sub(a, nv, a0) * f;
    return NAN;
}

/* softmax1 of the logits l [n] at scale f into a [n] (a may alias l: l is read into x [n]
 * first); returns the null weight. Shifted by c = max(z_max, 0): every exponent <= 0, and the
 * 1 of the denominator becomes exp(-c). */
static double softmax1_into(double *a, double *x, const double *l, size_t n, double f) {
    double lmax = -INFINITY;
    for (size_t j = 0; j < n; j++)
        if (l[j] > lmax) lmax = l[j];
    double c = lmax > 0 ? lmax * f : 0;
    for (size_t j = 0; j < n; j++) x[j] = lmax > 0 ? (l[j] - lmax) * f : l[j] * f;
    exp_nonpos(a, x, n);
    double e0 = exp(-c), s = e0 + lane_sum(a, n), inv = 1.0 / s;
    for (size_t j = 0; j < n; j++) a[j] *= inv;
    return e0 * inv;
}

/* Section 10.1's grad_fd numerator: |F(l + eps u) - F(l)|_2 for the weights a [nv] = F(l) of
 * one row at T. p: the dominant entry (largest logit). ap: scratch [n], x, y: scratch [nv].
 *  - softmax1 and the two sa_softmax variants through the change of their softmax part,
 *    dp_j = p'_j - p_j (p = softmax(z) for sa_softmax; for softmax1 the (n+1)-entry softmax
 *    whose extra, null entry has logit 0 and no perturbation). Where every step
 *    |d_j| = |eps (u_j - u_q) / T| <= 1/2 (q the dominant entry, the null one for softmax1
 *    when it weighs most) by the exact identity of section 7, dp_j = p_j (expm1(d_j) - mu) /
 *    (1 + mu); otherwise from the perturbed softmax, directly for every entry but the dominant
 *    one, whose change is minus the sum of the others' (the entries sum to 1): never 1 - 1
 *    where the dominant weight is within 1e-16 of 1. Then sa_softmax's z'_j p'_j - z_j p_j =
 *    z_j dp_j + (eps u_j / T) p'_j and sa_softmax_norm's c'_j p'_j - c_j p_j =
 *    c'_j dp_j + (c'_j - c_j) p_j;
 *  - sigmoid: sigma(u') - sigma(u) = sinh(d / 2) / (2 cosh(u / 2) cosh(u' / 2)), d = u' - u
 *    = eps u_j / T, which has no difference of two nearly equal numbers (in logs past |d| 40);
 *  - entmax15: the plain difference of the two weight rows (piecewise polynomial in z, as
 *    sparsemax is piecewise affine). */
double met_change_norm_ext(const double *a, size_t p, const double *l, const double *u,
                           double eps, size_t nv, size_t n, double T, met_normalizer zn,
                           const met_axes *ax, double *ap, double *x, double *y) {
    double f = 1.0 / T, fe = f * eps, ss = 0;
    if (zn == MET_SIGMOID) {
        double bias = met_sigmoid_b(ax, n);
        for (size_t j = 0; j < nv; j++) {
            double v0 = l[j] * f + bias, d = fe * u[j], v1 = v0 + d, dd;
            double w = -0.5 * (fabs(v0) + fabs(v1)), den = (1 + exp(-fabs(v0))) * (1 + exp(-fabs(v1)));
            if (fabs(d) <= 40)
                dd = sinh(0.5 * d) * 2 * exp(w) / den;
            else
                dd = copysign(exp(0.5 * fabs(d) + log1p(-exp(-fabs(d))) + w - log(den)), d);
            y[j] = dd;
            ss += dd * dd;
        }
        return norm_from_sq(y, 1.0, NULL, nv, ss); /* every weight ~1e-170: squares underflow */
    }
    if (zn != MET_SOFTMAX1 && zn != MET_SA_SOFTMAX && zn != MET_SA_SOFTMAX_NORM) {
        for (size_t j = 0; j < nv; j++) y[j] = l[j] + eps * u[j];
        met_weights_ext(ap, x, y, nv, n, T, zn, ax);
        return lane_normdiff(ap, 1.0, a, nv);
    }
    /* p_j in ap (softmax1: its own weights and the null weight a0) */
    double a0 = 0, dnull = 0;
    if (zn == MET_SOFTMAX1) {
        memcpy(ap, a, nv * sizeof *ap);
        a0 = softmax1_into(y, x, l, nv, f); /* only for a0 (a holds the weights) */
    } else {
        met_softmax_scaled(ap, x, l, f, nv);
    }
    int null_dom = zn == MET_SOFTMAX1 && a0 > ap[p];
    double uq = null_dom ? 0.0 : u[p], dmax = null_dom ? 0.0 : fabs(fe * uq);
    for (size_t j = 0; j < nv; j++) {
        double d = fabs(fe * (u[j] - uq));
        dmax = d > dmax ? d : dmax;
    }
    if (dmax <= 0.5) {
        double mu = 0, En = zn == MET_SOFTMAX1 ? expm1_small(-fe * uq) : 0.0;
        for (size_t j = 0; j < nv; j++) {
            y[j] = expm1_small(fe * (u[j] - uq));
            mu += ap[j] * y[j];
        }
        mu += a0 * En;
        double inv = 1.0 / (1.0 + mu);
        for (size_t j = 0; j < nv; j++) y[j] = ap[j] * (y[j] - mu) * inv;
    } else {
        for (size_t j = 0; j < nv; j++) y[j] = l[j] + eps * u[j];
        double a0p = 0;
        if (zn == MET_SOFTMAX1)
            a0p = softmax1_into(y, x, y, nv, f);
        else
            met_softmax_scaled(y, x, y, f, nv);
        double rest = 0;
        dnull = a0p - a0;
        for (size_t j = 0; j < nv; j++) {
            y[j] -= ap[j];
            if (null_dom || j != p) rest += y[j];
        }
        if (!null_dom) y[p] = -(rest + dnull); /* dnull = 0 for sa_softmax */
    }
    if (zn == MET_SOFTMAX1) /* the null entry is no output */
        return norm_from_sq(y, 1.0, NULL, nv, lane_dot(y, y, nv));
    double m = 0, M = 0, m1 = 0, M1 = 0;
    if (zn == MET_SA_SOFTMAX_NORM) {
        double lmin = INFINITY, lmax = -INFINITY, kmin = INFINITY, kmax = -INFINITY;
        for (size_t j = 0; j < nv; j++) {
            double k = l[j] + eps * u[j];
            lmin = l[j] < lmin ? l[j] : lmin, lmax = l[j] > lmax ? l[j] : lmax;
            kmin = k < kmin ? k : kmin, kmax = k > kmax ? k : kmax;
        }
        m = lmin < 0 ? lmin : 0, M = lmax > 0 ? lmax : 0;
        m1 = kmin < 0 ? kmin : 0, M1 = kmax > 0 ? kmax : 0;
    }
    for (size_t j = 0; j < nv; j++) {
        double dp = y[j], d;
        if (zn == MET_SA_SOFTMAX) {
            d = l[j] * f * dp + fe * u[j] * (ap[j] + dp);
        } else {
            double c0 = M > m ? (l[j] - m) / (M - m) : 1.0;
            double c1 = M1 > m1 ? (l[j] + eps * u[j] - m1) / (M1 - m1) : 1.0;
            d = c1 * dp + (c1 - c0) * ap[j];
        }
        y[j] = d;
        ss += d * d;
    }
    return norm_from_sq(y, 1.0, NULL, nv, ss);
}
