/* metrics.c -- see metrics.h; section numbers refer to docs/metrics.md. */
#include "metrics.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

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
static void exp_nonpos(double *y, const double *x, size_t n) {
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
#define LANES 8
static double lane_sum(const double *x, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) acc[q] += x[i + q];
    for (; i < n; i++) acc[0] += x[i];
    double s = 0;
    for (int q = 0; q < LANES; q++) s += acc[q];
    return s;
}
static double lane_dot(const double *x, const double *y, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) acc[q] += x[i + q] * y[i + q];
    for (; i < n; i++) acc[0] += x[i] * y[i];
    double s = 0;
    for (int q = 0; q < LANES; q++) s += acc[q];
    return s;
}
/* sum_j (s x_j - y_j)^2 */
static double lane_sqdiff(const double *x, double s, const double *y, size_t n) {
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

/* Softmax of z = f l over n >= 1 entries, the hot path of the head job: x [n] gets
 * z_j - max z = f (l_j - max l) (the entropy needs it), a [n] the weights (a may alias l).
 * Shift, then scale (docs/metrics.md section 10): l_j - max l is exact for float32 logits held
 * in double, so the only rounding is the one product (scaling first rounded f l_j, whose
 * error is relative to |f l_j|, before the shift cancelled it). Returns ln Z of the shifted
 * logits (log_partition). NaN logits are skipped by the max and propagate through exp and the
 * sum, as in met_softmax. */
static double softmax_scaled(double *a, double *x, const double *l, double f, size_t n) {
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

static double ssmax_factor(double scale, size_t n) {
    double s = scale > 0 ? scale : 1.0 / log(MET_DEFAULT_CONTEXT);
    return s * log((double)n);
}

/* Returns ln Z of the shifted logits for softmax/ssmax (entropy identity), 0 for sparsemax;
 * zmax_out gets max z. z is scratch [nv]. */
static double weights_with_z(double *a, double *z, double *zmax_out, const double *l, size_t nv,
                             size_t n, double T, met_normalizer zn, double ssmax_scale) {
    double f = 1.0 / T;
    if (zn == MET_SSMAX) f *= ssmax_factor(ssmax_scale, n);
    /* shift, then scale (see softmax_scaled) */
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
    double lmax = -INFINITY; /* shift, then scale (see softmax_scaled) */
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
static double softmax_change_norm(const double *a, size_t p, const double *l, const double *u,
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
        return sqrt(ss);
    }
    for (size_t j = 0; j < n; j++) ap[j] = l[j] + eps * u[j];
    softmax_scaled(ap, z, ap, f, n);
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
        size_t j = 0;
        for (; j + LANES <= m; j += LANES)
            for (int l = 0; l < LANES; l++) {
                double x = rest[j + l];
                int keep = !masked || (x > 0 && x < a2);
                double den = (x - o) - sg * v; /* a_j - lambda, never 0 for the kept j */
                den = keep ? den : 1.0;
                double q = (keep ? x : 0.0) / den;
                Rl[l] += q;
                dRl[l] += q / den;
            }
        for (; j < m; j++) {
            double x = rest[j];
            int keep = !masked || (x > 0 && x < a2);
            double den = (x - o) - sg * v;
            den = keep ? den : 1.0;
            double q = (keep ? x : 0.0) / den;
            Rl[0] += q;
            dRl[0] += q / den;
        }
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
static double jacobian_norm(const double *a, size_t n, double *rest) {
    double a1, a2, done;
    size_t cnt2;
    if (jacobian_poles(&done, &a1, &a2, &cnt2, a, n)) return done;
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
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

/* ---------------- top-N order (section 3) ---------------- */

static inline int ranks_before(const double *l, uint32_t i, uint32_t j) {
    double li = l[i], lj = l[j];
    if (isnan(li)) li = -INFINITY;
    if (isnan(lj)) lj = -INFINITY;
    return li > lj || (li == lj && i < j);
}

/* Partial quicksort: leaves idx[0..K) sorted and holding the K first elements of the
 * (logit desc, index asc) total order. Keys are all distinct, so Lomuto cannot degenerate
 * on ties. */
static void partial_sort(uint32_t *idx, size_t lo, size_t hi, size_t K, const double *l) {
    while (hi - lo > 16) {
        size_t m = lo + (hi - lo) / 2, r = hi - 1;
        /* median of three into position r */
        if (ranks_before(l, idx[m], idx[lo])) { uint32_t t = idx[m]; idx[m] = idx[lo]; idx[lo] = t; }
        if (ranks_before(l, idx[r], idx[lo])) { uint32_t t = idx[r]; idx[r] = idx[lo]; idx[lo] = t; }
        if (ranks_before(l, idx[m], idx[r])) { uint32_t t = idx[m]; idx[m] = idx[r]; idx[r] = t; }
        uint32_t piv = idx[r];
        size_t s = lo;
        for (size_t i = lo; i < r; i++)
            if (ranks_before(l, idx[i], piv)) {
                uint32_t t = idx[i]; idx[i] = idx[s]; idx[s] = t;
                s++;
            }
        idx[r] = idx[s];
        idx[s] = piv;
        /* [lo, s) before pivot, s pivot, (s, hi) after */
        if (s + 1 < K) {
            partial_sort(idx, lo, s, K, l);
            lo = s + 1;
        } else {
            hi = s;
        }
    }
    for (size_t i = lo + 1; i < hi; i++) {
        uint32_t x = idx[i];
        size_t j = i;
        while (j > lo && ranks_before(l, x, idx[j - 1])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
}

void met_topk_order(uint32_t *order, uint32_t *scratch, const double *l, size_t n, size_t K) {
    if (K > n) K = n;
    for (size_t j = 0; j < n; j++) scratch[j] = (uint32_t)j;
    partial_sort(scratch, 0, n, K, l);
    memcpy(order, scratch, K * sizeof *order);
}

/* ---------------- counter-based directions (section 7) ---------------- */

static inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t met_direction_key(uint64_t seed, int64_t window, int64_t layer, int64_t head, int64_t t,
                           int64_t eps_index) {
    uint64_t k = mix64(seed ^ 0x6174746e73776570ull);
    k = mix64(k ^ (uint64_t)window);
    k = mix64(k ^ (uint64_t)layer);
    k = mix64(k ^ (uint64_t)head);
    k = mix64(k ^ (uint64_t)t);
    return mix64(k ^ (uint64_t)eps_index);
}

/* Box-Muller on the pair p = j/2: two hashed counters give two uniforms. */
static inline void normal_pair(double *z0, double *z1, uint64_t key, uint64_t p) {
    uint64_t r1 = mix64(key ^ mix64(2 * p)), r2 = mix64(key ^ mix64(2 * p + 1));
    double u1 = ((double)(r1 >> 11) + 0.5) * 0x1p-53; /* (0, 1): log is finite */
    double u2 = (double)(r2 >> 11) * 0x1p-53;
    double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
    *z0 = rad * cos(ang);
    *z1 = rad * sin(ang);
}

double met_normal(uint64_t key, uint64_t j) {
    double z0, z1;
    normal_pair(&z0, &z1, key, j >> 1);
    return (j & 1) ? z1 : z0;
}

void met_direction(double *u, size_t n, uint64_t key) {
    double ss = 0;
    for (size_t j = 0; j < n; j += 2) {
        double z0, z1;
        normal_pair(&z0, &z1, key, j >> 1);
        u[j] = z0;
        ss += z0 * z0;
        if (j + 1 < n) {
            u[j + 1] = z1;
            ss += z1 * z1;
        }
    }
    double inv = 1.0 / sqrt(ss);
    for (size_t j = 0; j < n; j++) u[j] *= inv;
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
    double *XT;        /* [dim][L] X transposed (e = S X^T reads its rows) */
    double *G;         /* [L][L] Gram matrix G_ij = x_i . x_j */
    double *x_sq;      /* [L] |x_j|^2 = G_jj */
    double *x_norm;    /* [L] |x_j| */
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
    double *sel_gather; /* [5][K] per selected q: a, c, c^y, |y|^2, the sep_upper exponent */
    /* grid bookkeeping and accumulators */
    double *acc, *cntN;
    double cntT;
    int finite; /* every vector entry finite: zero weights may be skipped (0 * x = 0) */
    uint32_t *uN, *uOf, *iota, *uStart, *uIdx;
} met_ws;

#define NVAL 7 /* per-N values: dist_true dist_bound dist_expect sep_ratio sep_lower sep_upper
                 sep_marginal (the MET_ order up to MET_ROWS_USED) */

static size_t axes_unique_n(const met_axes *ax, uint32_t *uN, uint32_t *uOf) {
    /* sorted unique N values; uOf[iN] = index of N[iN] in uN */
    size_t nU = 0;
    for (size_t i = 0; i < ax->n_N; i++) {
        uint32_t v = (uint32_t)ax->N[i];
        size_t p = 0;
        while (p < nU && uN[p] < v) p++;
        if (p < nU && uN[p] == v) continue;
        memmove(uN + p + 1, uN + p, (nU - p) * sizeof *uN);
        uN[p] = v;
        nU++;
    }
    for (size_t i = 0; i < ax->n_N; i++) {
        size_t p = 0;
        while (uN[p] != (uint32_t)ax->N[i]) p++;
        uOf[i] = (uint32_t)p;
    }
    return nU;
}

size_t met_out_count(const met_axes *ax) {
    return (MET_NPERN * ax->n_N + MET_NPERT + ax->n_eps) * ax->n_T * ax->n_norm;
}

static size_t carve(met_ws *w, char *base, size_t L, size_t dim, const met_axes *ax) {
    size_t nout = met_out_count(ax), at = 0;
    size_t n_N = ax->n_N ? ax->n_N : 1, n_T = ax->n_T;
#define TAKE(ptr, count, type)                                  \
    do {                                                        \
        if (base) (ptr) = (type *)(void *)(base + at);          \
        at += (((count) * sizeof(type)) + 63) / 64 * 64;        \
    } while (0)
    size_t Kmax = 1;
    for (size_t i = 0; i < ax->n_N; i++)
        if ((size_t)ax->N[i] > Kmax) Kmax = (size_t)ax->N[i];
    if (Kmax > L) Kmax = L;
    w->U_ld = Kmax + 1;
    TAKE(w->X, L * dim, double);
    TAKE(w->XT, dim * L, double);
    TAKE(w->G, L * L, double);
    TAKE(w->x_sq, L, double);
    TAKE(w->x_norm, L, double);
    TAKE(w->x_inv, L, double);
    TAKE(w->y_sq, L, double);
    TAKE(w->delta_run, L, double);
    TAKE(w->l, L, double);
    TAKE(w->z, L, double);
    TAKE(w->ap, L, double);
    TAKE(w->u, (ax->n_eps ? ax->n_eps : 1) * L, double);
    TAKE(w->u_range, 2 * (ax->n_eps ? ax->n_eps : 1), double);
    TAKE(w->a_T, n_T * L, double);
    TAKE(w->order, L, uint32_t);
    TAKE(w->scratch, L, uint32_t);
    TAKE(w->S_T, n_T * dim, double);
    TAKE(w->e_T, n_T * L, double);
    TAKE(w->S_sq_T, n_T, double);
    TAKE(w->sparse_T, n_T, uint32_t);
    TAKE(w->nz_idx_T, n_T * L, uint32_t);
    TAKE(w->nnz_T, n_T, uint32_t);
    TAKE(w->sel_w, 2 * n_T * Kmax, double);
    TAKE(w->sel_w_end, 2 * n_T, uint32_t);
    TAKE(w->c_T, 2 * n_T * L, double);
    TAKE(w->A_T, n_T, double);
    TAKE(w->Q_T, n_T, double);
    TAKE(w->zero_sel_T, n_T, size_t);
    TAKE(w->is_unsel, L, double);
    TAKE(w->sel_inf, L, double);
    TAKE(w->rank, L, uint32_t);
    TAKE(w->d1_sq_run, L, double);
    TAKE(w->d1_N, n_N, double);
    TAKE(w->not_topK, L, double);
    TAKE(w->U_T, n_T * (Kmax + 1), double);
    TAKE(w->s_vec, dim, double);
    TAKE(w->m_N, n_N, double);
    TAKE(w->sel_gather, 5 * Kmax, double);
    TAKE(w->acc, nout, double);
    TAKE(w->cntN, n_N, double);
    TAKE(w->uN, n_N, uint32_t);
    TAKE(w->uOf, n_N, uint32_t);
    TAKE(w->iota, L > dim ? L : dim, uint32_t);
    TAKE(w->uStart, n_N + 1, uint32_t);
    TAKE(w->uIdx, n_N, uint32_t);
#undef TAKE
    return at;
}

size_t met_workspace_bytes(size_t L_max, size_t dim, const met_axes *ax) {
    met_ws w;
    return carve(&w, NULL, L_max, dim, ax) + 64;
}

/* C [rows][ldc] += W [rows][ldw] (columns k0..k1) times the G rows order[k0..k1), over
 * columns 0..n-1: the c / c^y update of one stretch of N (section 4.4). Columns
 * [n, n16) are computed too (n16 = n rounded up to 16 where it fits in ldc = ldg; G is zeroed
 * there, the values are never read) so that the scalar tail is rare. A register-
 * blocked kernel instead of dgemm: the G rows are read in place (dgemm needed them gathered
 * into a [K][n] copy, then packed again), and the stretches are short (1, 1, 2, 4, ... for
 * the doubling grid) where dgemm's packing does not pay. Blocks of 6 rows x 16 columns keep
 * 12 vector accumulators; GCC's vector extension compiles to AVX-512, AVX2 or SSE alike. */
typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8i __attribute__((vector_size(64)));

/* unaligned vector load / store (macros: a v8d function argument or return value would
 * change the ABI where AVX-512 is not enabled, and GCC warns about it) */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8d))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v8d))

#define CK_ROWS 6
/* one block of R rows (R <= CK_ROWS, a constant after inlining) x 16 columns at i */
static inline __attribute__((always_inline)) void c_block(double *C, size_t ldc, const double *W,
                                                          size_t ldw, const double *G, size_t ldg,
                                                          const uint32_t *order, size_t k0,
                                                          size_t k1, size_t i, const int R) {
    v8d acc0[CK_ROWS], acc1[CK_ROWS];
    for (int r = 0; r < R; r++) {
        LOAD8(acc0[r], C + r * ldc + i);
        LOAD8(acc1[r], C + r * ldc + i + 8);
    }
    for (size_t k = k0; k < k1; k++) {
        const double *g = G + (size_t)order[k] * ldg + i;
        v8d g0, g1;
        LOAD8(g0, g);
        LOAD8(g1, g + 8);
        for (int r = 0; r < R; r++) {
            double wv = W[r * ldw + k];
            acc0[r] += wv * g0;
            acc1[r] += wv * g1;
        }
    }
    for (int r = 0; r < R; r++) {
        STORE8(C + r * ldc + i, acc0[r]);
        STORE8(C + r * ldc + i + 8, acc1[r]);
    }
}

/* kend (or NULL): row r of W is zero from column kend[r] on, so a block of rows stops at the
 * largest kend of its rows (exact: the skipped terms are 0 * G with G finite, which the caller
 * guarantees before passing kend). md (or NULL): also the running maximum of section 4.2's d1,
 * md_i = max over the stretch's p of |x_i - x_p|^2 = gd_i + gd_p - 2 G_pi, done on the 16
 * columns just read, while the G rows are in L1 (a separate pass read them from memory). */
static void c_update(double *C, size_t ldc, size_t rows, const double *W, size_t ldw,
                     const double *G, size_t ldg, const uint32_t *order, size_t k0, size_t k1,
                     size_t n, size_t n16, const uint32_t *kend, double *md, const double *gd) {
    /* row blocks outside: the first block streams each G row of the stretch from memory (the
     * prefetcher follows a few long streams, not 64 short ones), the others find it in L2 */
    for (size_t r0 = 0; r0 < rows; r0 += CK_ROWS) {
        double *Cr = C + r0 * ldc;
        const double *Wr = W + r0 * ldw;
        size_t R = rows - r0 < CK_ROWS ? rows - r0 : CK_ROWS;
        size_t kb = k1;
        if (kend) {
            kb = k0;
            for (size_t r = r0; r < r0 + R; r++) {
                size_t e = kend[r] < k1 ? kend[r] : k1;
                kb = e > kb ? e : kb;
            }
        }
        int do_md = md && r0 == 0;
        if (kb == k0 && !do_md) continue;
        for (size_t i = 0; i < n16; i += 16) {
            if (kb > k0) switch (R) {
            case 6: c_block(Cr, ldc, Wr, ldw, G, ldg, order, k0, kb, i, 6); break;
            case 5: c_block(Cr, ldc, Wr, ldw, G, ldg, order, k0, kb, i, 5); break;
            case 4: c_block(Cr, ldc, Wr, ldw, G, ldg, order, k0, kb, i, 4); break;
            case 3: c_block(Cr, ldc, Wr, ldw, G, ldg, order, k0, kb, i, 3); break;
            case 2: c_block(Cr, ldc, Wr, ldw, G, ldg, order, k0, kb, i, 2); break;
            default: c_block(Cr, ldc, Wr, ldw, G, ldg, order, k0, kb, i, 1); break;
            }
            if (do_md) { /* on the 16 columns just read (L1); max as a bit select */
                v8d m0, m1, g0, g1;
                LOAD8(m0, md + i);
                LOAD8(m1, md + i + 8);
                LOAD8(g0, gd + i);
                LOAD8(g1, gd + i + 8);
                for (size_t k = k0; k < k1; k++) {
                    uint32_t p = order[k];
                    const double *Gp = G + (size_t)p * ldg + i;
                    double gpp = gd[p];
                    v8d x0, x1;
                    LOAD8(x0, Gp);
                    LOAD8(x1, Gp + 8);
                    v8d d0 = g0 + gpp - 2 * x0, d1 = g1 + gpp - 2 * x1;
                    v8i k0m = d0 > m0, k1m = d1 > m1; /* false for NaN: m stays */
                    m0 = (v8d)(((v8i)d0 & k0m) | ((v8i)m0 & ~k0m));
                    m1 = (v8d)(((v8i)d1 & k1m) | ((v8i)m1 & ~k1m));
                }
                STORE8(md + i, m0);
                STORE8(md + i + 8, m1);
            }
        }
    }
    /* leftover columns */
    for (size_t r = 0; r < rows; r++) {
        size_t kb = kend && kend[r] < k1 ? kend[r] : k1;
        for (size_t i = n16; i < n; i++) {
            double c = C[r * ldc + i];
            for (size_t k = k0; k < kb; k++) c += W[r * ldw + k] * G[(size_t)order[k] * ldg + i];
            C[r * ldc + i] = c;
        }
    }
    if (md)
        for (size_t k = k0; k < k1; k++) {
            uint32_t p = order[k];
            const double *Gp = G + (size_t)p * ldg;
            double gpp = gd[p];
            for (size_t i = n16; i < n; i++) {
                double dd = gd[i] + gpp - 2 * Gp[i];
                md[i] = dd > md[i] ? dd : md[i];
            }
        }
}

/* ---------------- sections 4 and 6 per row: the phases of row_per_n ---------------- */

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

/* What the O(n) pass of one (grid N, T) reads: per entry j, its weight a_j, |x_j|^2, c_j,
 * e_j, |y_j|^2, 1/|x_j|, |x_j| c^y_j and the selection masks; per row, |s|^2, |S|^2 and
 * dist_expect's factors alpha = 1 + beta, beta = N / (n - 1); for the fallbacks, X, S, the
 * selected set order[0..N) and a scratch vector for s. */
typedef struct {
    const double *a, *x_sq, *c, *e, *y_sq, *x_inv, *cy, *is_unsel, *sel_inf;
    double s_sq, S_sq, alpha, beta;
    const double *X, *S, *x_norm;
    const uint32_t *order;
    size_t dim, N;
    double *s_vec;
} unsel_in;

/* y_i [k] = x_i [k] / |x_i| (0 for a zero vector), by division as docs/metrics.md section 6
 * writes it: the fallbacks below must not add the rounding of 1/|x| to a difference they
 * compute because the expansion could not */
static inline double y_of(const double *x, size_t k, double norm) {
    return norm > 0 ? x[k] / norm : 0.0;
}

/* s = sum_{i in I_N} a_i x_i (norm = NULL) or s^y = sum a_i y_i (norm = x_norm), formed
 * explicitly into s [dim]. */
MET_NO_CONTRACT static void form_s(double *s, const unsel_in *in, const double *norm) {
    MET_NO_CONTRACT_BODY
    memset(s, 0, in->dim * sizeof *s);
    for (size_t q = 0; q < in->N; q++) {
        uint32_t i = in->order[q];
        double ai = in->a[i];
        const double *xi = in->X + (size_t)i * in->dim;
        for (size_t k = 0; k < in->dim; k++) s[k] += ai * (norm ? y_of(xi, k, norm[i]) : xi[k]);
    }
}

/* |alpha y - s|^2 with y = x / norm, as an explicit difference */
MET_NO_CONTRACT static double sq_diff_y(const double *x, double norm, double alpha,
                                        const double *s, size_t dim) {
    MET_NO_CONTRACT_BODY
    double t = 0;
    for (size_t k = 0; k < dim; k++) {
        double d = alpha * y_of(x, k, norm) - s[k];
        t += d * d;
    }
    return t;
}

/* |alpha x - beta s|^2 for two vectors of dim entries, as an explicit difference */
MET_NO_CONTRACT static double sq_diff(const double *x, double alpha, const double *s, double beta,
                                      size_t dim) {
    MET_NO_CONTRACT_BODY
    double t = 0;
    for (size_t k = 0; k < dim; k++) {
        double d = alpha * x[k] - beta * s[k];
        t += d * d;
    }
    return t;
}

/* docs/metrics.md sections 4 and 6, the O(n) part of one grid N at one T: over unselected j,
 * the sum of |a_j x_j - s| (dist_true) and the minimum of g_j = D_j^2 - |s^y|^2 =
 * a_j^2 |y_j|^2 - 2 a_j (s^y . y_j) (section 6's exact rewrite: no |s^y|^2 to cancel against,
 * so the order of the g_j is right even for weights 1e-30 of the dominant one); over every j,
 * the dist_expect sum of |a_j x_j - beta (S - a_j x_j)| = |alpha a_j x_j - beta S|.
 * Entries: j = 0..n-1 when idx is NULL (dense), else the nidx listed entries idx [nidx], the
 * n - nidx others having a_j = 0 and finite vectors, so that each has the same terms
 * (|a_j x_j - s| = |s|, the dist_expect term beta |S|, g_j = 0), added once times their
 * count (zero_sel of them are selected). Entries whose expansion cancels (MET_CANCEL) are
 * left out of the lanes and done again directly after them. Eight independent lanes keep the
 * sums vectorizable without reassociation flags (the lane order is fixed, so results do not
 * depend on the CPU). Inlined twice: the dense copy has no index loads. */
static inline __attribute__((always_inline)) void
unselected_terms(double *t_true, double *t_exp, double *g_min_out, const unsel_in *in, size_t n,
                 const uint32_t *idx, size_t nidx, size_t zero_sel) {
    const double *a = in->a, *x_sq = in->x_sq, *c = in->c, *e = in->e, *y_sq = in->y_sq,
                 *x_inv = in->x_inv, *cy = in->cy, *is_unsel = in->is_unsel,
                 *sel_inf = in->sel_inf;
    const double s_sq = in->s_sq, alpha = in->alpha, beta = in->beta;
    double at[LANES] = {0}, ae[LANES] = {0}, rm[LANES], gl[LANES];
    for (int q = 0; q < LANES; q++) rm[q] = INFINITY, gl[q] = INFINITY;
    double a2 = alpha * alpha, ab2 = 2 * alpha * beta, b2S2 = beta * beta * in->S_sq;
    size_t m = idx ? nidx : n, i = 0;
    /* gl: the minimum of each square's value minus MET_CANCEL times its magnitude; a
     * negative one sends the pass to the explicit differences (the selected entries' own
     * dist_true terms do not count: + sel_inf) */
#define MET_UNSEL_TERM(lane, j)                                                     \
    do {                                                                            \
        double aj = a[j], pj = aj * aj * x_sq[j];                                   \
        double ex = a2 * pj - ab2 * aj * e[j] + b2S2;                               \
        ae[lane] += sqrt(ex > 0 ? ex : 0);                                          \
        double dt = pj - 2 * aj * c[j] + s_sq;                                      \
        at[lane] += is_unsel[j] * sqrt(dt > 0 ? dt : 0);                            \
        double ge = ex - MET_CANCEL * (a2 * pj + b2S2);                             \
        double gt = dt - MET_CANCEL * (pj + s_sq) + sel_inf[j];                     \
        ge = gt < ge ? gt : ge;                                                     \
        gl[lane] = ge < gl[lane] ? ge : gl[lane];                                   \
        double g = aj * aj * y_sq[j] - 2 * aj * x_inv[j] * cy[j] + sel_inf[j];      \
        rm[lane] = g < rm[lane] ? g : rm[lane];                                     \
    } while (0)
    for (; i + LANES <= m; i += LANES)
        for (int q = 0; q < LANES; q++) {
            size_t j = idx ? idx[i + q] : i + q;
            MET_UNSEL_TERM(q, j);
        }
    for (; i < m; i++) {
        size_t j = idx ? idx[i] : i;
        MET_UNSEL_TERM(0, j);
    }
#undef MET_UNSEL_TERM
    double st = 0, se = 0, g_min = INFINITY, guard = INFINITY;
    for (int q = 0; q < LANES; q++) {
        st += at[q];
        se += ae[q];
        g_min = rm[q] < g_min ? rm[q] : g_min;
        guard = gl[q] < guard ? gl[q] : guard;
    }
    if (guard < 0) { /* some square cancelled: the sums again, those entries explicitly */
        form_s(in->s_vec, in, NULL);
        st = se = 0;
        for (size_t q = 0; q < m; q++) {
            size_t j = idx ? idx[q] : q;
            double aj = a[j], pj = aj * aj * x_sq[j];
            const double *xj = in->X + j * in->dim;
            double ex = a2 * pj - ab2 * aj * e[j] + b2S2;
            if (ex < MET_CANCEL * (a2 * pj + b2S2))
                ex = sq_diff(xj, alpha * aj, in->S, beta, in->dim);
            se += sqrt(ex > 0 ? ex : 0);
            if (!(is_unsel[j] > 0)) continue;
            double dt = pj - 2 * aj * c[j] + s_sq;
            if (dt < MET_CANCEL * (pj + s_sq)) dt = sq_diff(xj, aj, in->s_vec, 1.0, in->dim);
            st += is_unsel[j] * sqrt(dt > 0 ? dt : 0);
        }
    }
    if (idx) {
        size_t z = n - nidx, zu = z - zero_sel; /* zero-weight entries, of them unselected */
        st += (double)zu * sqrt(s_sq > 0 ? s_sq : 0);
        se += (double)z * sqrt(b2S2 > 0 ? b2S2 : 0);
        if (zu > 0 && 0 < g_min) g_min = 0;
    }
    *t_true = st, *t_exp = se, *g_min_out = g_min;
}

/* docs/metrics.md section 6's radius r = min_{j not in I_N} |s^y - a_j y_j| from g_min =
 * r^2 - |s^y|^2; where that sum cancels (an unselected a_j y_j within ~1e-3 of s^y), the
 * minimum again over explicit differences. */
static double radius(double g_min, double sy_sq, const unsel_in *in, size_t n) {
    double r2 = g_min + sy_sq;
    if (!(r2 < MET_CANCEL * sy_sq)) return sqrt(r2 > 0 ? r2 : 0);
    form_s(in->s_vec, in, in->x_norm);
    double best = INFINITY;
    for (size_t j = 0; j < n; j++) {
        if (!(in->is_unsel[j] > 0)) continue;
        double d = sq_diff_y(in->X + j * in->dim, in->x_norm[j], in->a[j], in->s_vec, in->dim);
        best = d < best ? d : best;
    }
    return sqrt(best);
}

/* Which T are sparse: with finite vectors, a T with at most n/4 nonzero weights lists them
 * once (nz_idx_T, in index order); S, e and the O(n) pass then visit only them. Skipping
 * 0 * (finite) terms leaves S, e, c bit-identical. */
static void list_nonzero_weights(met_ws *w, size_t n, size_t K) {
    const size_t L = w->L, n_T = w->ax->n_T;
    const double *nt = w->not_topK;
    for (size_t iT = 0; iT < n_T; iT++) {
        const double *a = w->a_T + iT * L;
        /* the same pass sums section 4.2's unselected mass outside the top K, U_K */
        double cl[LANES] = {0}, ul[LANES] = {0};
        size_t j = 0;
        for (; j + LANES <= n; j += LANES)
            for (int q = 0; q < LANES; q++) {
                cl[q] += a[j + q] != 0 ? 1.0 : 0.0;
                ul[q] += a[j + q] * nt[j + q];
            }
        for (; j < n; j++) {
            cl[0] += a[j] != 0 ? 1.0 : 0.0;
            ul[0] += a[j] * nt[j];
        }
        double c = 0, uk = 0;
        for (int q = 0; q < LANES; q++) c += cl[q], uk += ul[q];
        w->U_T[iT * w->U_ld + K] = uk;
        size_t nz = w->finite ? (size_t)c : 0;
        w->sparse_T[iT] = w->finite && 4 * nz <= n;
        if (!w->sparse_T[iT]) continue;
        uint32_t *idx = w->nz_idx_T + iT * L;
        size_t m = 0;
        for (size_t j = 0; j < n; j++) {
            idx[m] = (uint32_t)j;
            m += a[j] != 0;
        }
        w->nnz_T[iT] = (uint32_t)m;
    }
}

/* docs/metrics.md section 4.3, dist_expect's pieces for every T: S = sum_j a_j x_j (only
 * j < nv weigh), e_j = x_j . S, |S|^2. Dense runs of T use the c-update kernel (S = A X over
 * the rows of X, e = S X^T over the rows of XT [dim][L]; both shapes are short-and-wide,
 * where dgemm's packing does not pay); sparse T the same sums in the same order over their
 * nonzero weights. */
static void expect_sums(met_ws *w, size_t n, size_t nv, size_t n16) {
    const size_t L = w->L, n_T = w->ax->n_T, dim = w->dim;
    for (size_t iT = 0; iT < n_T; iT++) {
        if (!w->sparse_T[iT]) continue;
        const double *a = w->a_T + iT * L;
        const uint32_t *idx = w->nz_idx_T + iT * L;
        size_t m = w->nnz_T[iT];
        double *S = w->S_T + iT * dim, *E = w->e_T + iT * L;
        memset(S, 0, dim * sizeof *S);
        for (size_t q = 0; q < m; q++) {
            const double *xj = w->X + (size_t)idx[q] * dim;
            double aj = a[idx[q]];
            for (size_t k = 0; k < dim; k++) S[k] += aj * xj[k];
        }
        for (size_t q = 0; q < m; q++) {
            const double *xj = w->X + (size_t)idx[q] * dim;
            double ej = 0;
            for (size_t k = 0; k < dim; k++) ej += S[k] * xj[k];
            E[idx[q]] = ej;
        }
    }
    for (size_t r0 = 0; r0 < n_T;) { /* dense runs of T */
        if (w->sparse_T[r0]) {
            r0++;
            continue;
        }
        size_t r1 = r0;
        while (r1 < n_T && !w->sparse_T[r1]) r1++;
        memset(w->S_T + r0 * dim, 0, (r1 - r0) * dim * sizeof *w->S_T);
        c_update(w->S_T + r0 * dim, dim, r1 - r0, w->a_T + r0 * L, L, w->X, dim, w->iota, 0, nv,
                 dim, dim / 16 * 16, NULL, NULL, NULL);
        for (size_t r = r0; r < r1; r++) memset(w->e_T + r * L, 0, n16 * sizeof *w->e_T);
        c_update(w->e_T + r0 * L, L, r1 - r0, w->S_T + r0 * dim, dim, w->XT, L, w->iota, 0, dim,
                 n, n16 / 16 * 16, NULL, NULL, NULL);
        r0 = r1;
    }
    for (size_t iT = 0; iT < n_T; iT++) {
        double S2 = 0;
        const double *S = w->S_T + iT * dim;
        for (size_t k = 0; k < dim; k++) S2 += S[k] * S[k];
        w->S_sq_T[iT] = S2;
    }
}

/* The weights of the selection walk in sorted order (sections 4 and 6): row 2T of sel_w holds
 * a_{order[k]}, row 2T+1 a_{order[k]} / |x_{order[k]}| (the weights of s^y), interleaved so
 * that a 6-row block of c_update holds 3 neighbouring T, which have similar sparsity.
 * sel_w_end[r]: row r is 0 from there on (weights fall along the logit order, so at small T
 * most of the K columns are exact zeros). */
static void selection_weights(met_ws *w, size_t K) {
    const size_t L = w->L, n_T = w->ax->n_T;
    const uint32_t *order = w->order;
    for (size_t iT = 0; iT < n_T; iT++) {
        const double *a = w->a_T + iT * L;
        double *wc = w->sel_w + 2 * iT * K, *wy = wc + K;
        uint32_t last = 0;
        for (size_t k = 0; k < K; k++) {
            uint32_t p = order[k];
            double apk = a[p];
            wc[k] = apk;
            wy[k] = apk * w->x_inv[p];
            last = apk != 0 ? (uint32_t)(k + 1) : last; /* NaN counts as nonzero */
        }
        w->sel_w_end[2 * iT] = w->sel_w_end[2 * iT + 1] = last;
        /* section 4's unselected mass, summed from the tail: U_K over the entries outside
         * the top K, then U_k = U_{k+1} + a_{order[k]} */
        double *U = w->U_T + iT * w->U_ld;
        /* U[K]: list_nonzero_weights */
        for (size_t k = K; k-- > 0;) U[k] = U[k + 1] + wc[k];
    }
}

/* I_N empty: c = c^y = 0, every entry unselected, A = Q = 0, and (when d1 is computed, on
 * the first normalizer) the running max of d1 at 0. */
static void start_walk(met_ws *w, size_t n, size_t n16, double *d1_sq_run) {
    const size_t L = w->L, n_T = w->ax->n_T;
    for (size_t r = 0; r < 2 * n_T; r++) memset(w->c_T + r * L, 0, n16 * sizeof *w->c_T);
    for (size_t iT = 0; iT < n_T; iT++) w->A_T[iT] = 0, w->Q_T[iT] = 0, w->zero_sel_T[iT] = 0;
    if (d1_sq_run) {
        for (size_t i = 0; i < n16; i++) {
            w->rank[i] = UINT32_MAX;
            d1_sq_run[i] = 0;
        }
        double mx = 0;
        for (size_t i = 0; i < n; i++) mx = w->x_sq[i] > mx ? w->x_sq[i] : mx;
        w->x_sq_max = mx;
    }
    for (size_t i = 0; i < n; i++) {
        w->is_unsel[i] = 1.0;
        w->sel_inf[i] = 0.0;
    }
}

/* I_N grows from order[0..k0) to order[0..N): c and |x| c^y of every T gain the G rows of the
 * stretch (one c_update for all T), the masks move, and (d1_sq_run non-NULL) docs/metrics.md
 * section 4.2's d1 = max_{i not in I_N, j in I_N} |x_i - x_j| and m = max_{j in I_N} |x_j| are
 * taken into d1_N[u], m_N[u]; *m is the running m. */
static void grow_selection(met_ws *w, size_t k0, size_t N, size_t n, size_t n16, size_t K,
                           double *d1_sq_run, double *m, size_t u) {
    const size_t L = w->L, n_T = w->ax->n_T;
    const uint32_t *order = w->order;
    const uint32_t *end = w->finite ? w->sel_w_end : NULL; /* 0 * inf would be NaN */
    c_update(w->c_T, L, 2 * n_T, w->sel_w, K, w->G, L, order, k0, N, n, n16 / 16 * 16, end,
             d1_sq_run, w->x_sq);
    for (size_t q = k0; q < N; q++) {
        w->is_unsel[order[q]] = 0.0;
        w->sel_inf[order[q]] = INFINITY;
    }
    if (!d1_sq_run) return;
    for (size_t q = k0; q < N; q++) {
        uint32_t p = order[q];
        w->rank[p] = (uint32_t)q;
        if (w->x_norm[p] > *m) *m = w->x_norm[p];
    }
    double dl[LANES] = {0};
    const uint32_t *rank = w->rank;
    size_t k = N - 1, i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) {
            double v = rank[i + q] > k ? d1_sq_run[i + q] : 0.0;
            dl[q] = v > dl[q] ? v : dl[q];
        }
    for (; i < n; i++) {
        double v = rank[i] > k ? d1_sq_run[i] : 0.0;
        dl[0] = v > dl[0] ? v : dl[0];
    }
    double d1sq = 0;
    for (int q = 0; q < LANES; q++) d1sq = dl[q] > d1sq ? dl[q] : d1sq;
    if (d1sq < MET_CANCEL * 2 * w->x_sq_max) { /* every pair nearly equal: cancelled */
        d1sq = 0;
        for (size_t j = 0; j < n; j++) {
            if (rank[j] <= k) continue;
            for (size_t q = 0; q < N; q++) {
                double dd = sq_diff(w->X + j * w->dim, 1.0, w->X + (size_t)order[q] * w->dim,
                                    1.0, w->dim);
                d1sq = dd > d1sq ? dd : d1sq;
            }
        }
    }
    w->d1_N[u] = sqrt(d1sq);
    w->m_N[u] = *m;
}

/* docs/metrics.md sections 4 and 6: A = sum_{i in I_N} a_i and Q = sum_{i in I_N} a_i^2 of
 * one T, grown by the stretch order[k0..N). */
static void selected_mass(met_ws *w, size_t iT, size_t k0, size_t N) {
    const double *a = w->a_T + iT * w->L;
    double A = w->A_T[iT], Q = w->Q_T[iT];
    size_t zsel = w->zero_sel_T[iT];
    for (size_t q = k0; q < N; q++) {
        double ap = a[w->order[q]];
        A += ap;
        Q += ap * ap;
        zsel += ap == 0;
    }
    w->A_T[iT] = A, w->Q_T[iT] = Q, w->zero_sel_T[iT] = zsel;
}

/* The selected entries of one T gathered once (weight, c, c^y = c^y_j scaled by 1/|x_j|,
 * |y|^2) into sel_gather; returns |s|^2 = sum_{j in I_N} a_j c_j (section 4) and sets
 * *sy_sq = |s^y|^2 = sum_{j in I_N} a_j c^y_j (section 6). */
static double gather_selected(met_ws *w, size_t iT, size_t N, size_t K, double *sy_sq) {
    const double *a = w->a_T + iT * w->L, *c = w->c_T + 2 * iT * w->L, *cy = c + w->L;
    double *sa = w->sel_gather, *sc = sa + K, *scy = sc + K, *syy = scy + K;
    for (size_t q = 0; q < N; q++) {
        uint32_t j = w->order[q];
        sa[q] = a[j], sc[q] = c[j], scy[q] = w->x_inv[j] * cy[j], syy[q] = w->y_sq[j];
    }
    *sy_sq = lane_dot(sa, scy, N);
    return lane_dot(sa, sc, N);
}

/* docs/metrics.md section 6 over the selected set of one T: N_s = #{i in I_N : D_i < r}
 * (returned), decided as g_i < g_min with g = D^2 - |s^y|^2 = a_i^2 |y_i|^2 - 2 a_i c^y_i
 * (the exact rewrite), *marginal = #{i : |g_i - g_min| <= MET_MARGINAL |s^y|^2}, and the
 * reconstructed bounds' sums, *xi_sum = sum_i xi_i and *upper_sum =
 * sum_i exp(-(max(0, xi_i - r))^2 / 2). Lanes keep it vectorizable; the exponents (<= 0) go
 * to exp_nonpos. */
static size_t separability(double *xi_sum, double *upper_sum, size_t *marginal,
                           const double *sel_gather, size_t K, size_t N, double A, double Q,
                           double sy_sq, double g_min, double r, double delta) {
    const double *sa = sel_gather, *scy = sa + 2 * K, *syy = sa + 3 * K;
    double *sarg = (double *)sel_gather + 4 * K;
    double d2h = 0.5 * delta * delta, nsl[LANES] = {0}, nml[LANES] = {0}, xil[LANES] = {0};
    double tie = MET_MARGINAL * sy_sq;
#define MET_SEP_TERM(lane, q)                                                       \
    do {                                                                            \
        double ai = sa[q];                                                          \
        double g = ai * ai * syy[q] - 2 * ai * scy[q];                              \
        nsl[lane] += g < g_min ? 1.0 : 0.0;                                         \
        nml[lane] += fabs(g - g_min) <= tie ? 1.0 : 0.0;                            \
        double B = A - ai, Qi = Q - ai * ai;                                        \
        double xi2 = B * B - d2h * (B * B - Qi);                                    \
        double xi = sqrt(xi2 > 0 ? xi2 : 0);                                        \
        xil[lane] += xi;                                                            \
        double ex = xi - r;                                                         \
        sarg[q] = ex > 0 ? -0.5 * ex * ex : 0.0;                                    \
    } while (0)
    size_t q = 0;
    for (; q + LANES <= N; q += LANES)
        for (int l = 0; l < LANES; l++) MET_SEP_TERM(l, q + l);
    for (; q < N; q++) MET_SEP_TERM(0, q);
#undef MET_SEP_TERM
    exp_nonpos(sarg, sarg, N);
    double up = lane_sum(sarg, N), xisum = 0, nsum = 0, msum = 0;
    for (int l = 0; l < LANES; l++) xisum += xil[l], nsum += nsl[l], msum += nml[l];
    *xi_sum = xisum, *upper_sum = up, *marginal = (size_t)msum;
    return (size_t)nsum;
}

/* Section 4 in the aggregate reading (metrics.distance = "aggregate"): with S = sum_j a_j x_j
 * and s the selected part, the unselected sum minus s is S - 2 s, so
 *   dist_true   = |S - 2 s|, |S - 2s|^2 = |S|^2 - 4 S.s + 4 |s|^2, S.s = sum_{j in I_N} a_j e_j
 *                 (explicitly where that cancels, MET_CANCEL),
 *   dist_bound  = U d1 + |U - A| m (U the unselected mass: |sum_u a_i (x_i - s/A) + (U - A) s/A|),
 *   dist_expect = |E over uniform I_N of (S - 2 s)| = (|n - 2N| / n) |S| (P(j in I_N) = N/n).
 * sel_gather holds the selected weights in order (gather_selected). */
static void aggregate_distance(double *val, const unsel_in *in, size_t n, const double *sel_gather,
                               double U, double A, double d1, double m) {
    const double *sa = sel_gather;
    double Ss = 0, S_sq = in->S_sq, s_sq = in->s_sq;
    for (size_t q = 0; q < in->N; q++) /* a zero weight's e_j may be unset (sparse T) */
        Ss += sa[q] != 0 ? sa[q] * in->e[in->order[q]] : 0.0;
    double v2 = S_sq - 4 * Ss + 4 * s_sq;
    if (v2 < MET_CANCEL * (S_sq + 4 * s_sq)) {
        form_s(in->s_vec, in, NULL);
        v2 = sq_diff(in->S, 1.0, in->s_vec, 2.0, in->dim);
    }
    val[MET_DIST_TRUE] = sqrt(v2 > 0 ? v2 : 0);
    val[MET_DIST_BOUND] = U * d1 + fabs(U - A) * m;
    double k = (double)n - 2.0 * (double)in->N;
    val[MET_DIST_EXPECT] = fabs(k) / (double)n * sqrt(S_sq > 0 ? S_sq : 0);
}

/* Sections 4 and 6 of one row at one normalizer, every T and every grid N at once. The
 * weights of all T are in a_T [n_T][L]. As N walks up through the sorted order, c_T
 * accumulates c_j and |x_j| c^y_j of every T (grow_selection: one kernel call per stretch
 * between consecutive grid N, so each G row is read once per row instead of once per T); each
 * (grid N, T) then costs O(n) (unselected_terms) plus O(N) (separability). */
static void row_per_n(met_ws *w, size_t n, size_t nv, size_t K, double delta, size_t iZ) {
    const met_axes *ax = w->ax;
    const size_t L = w->L, n_T = ax->n_T;
    size_t n16 = (n + 15) / 16 * 16;
    if (n16 > L) n16 = n; /* c_update then finishes the last columns one by one */

    for (size_t j = 0; j < n; j++) w->not_topK[j] = 1.0;
    for (size_t k = 0; k < K; k++) w->not_topK[w->order[k]] = 0.0;
    list_nonzero_weights(w, n, K);
    expect_sums(w, n, nv, n16);
    selection_weights(w, K);
    double *d1_sq_run = iZ == 0 ? w->d1_sq_run : NULL; /* d1, m: T- and normalizer-free */
    start_walk(w, n, n16, d1_sq_run);
    double m = 0;
    size_t k0 = 0;
    for (size_t u = 0; u < w->nU && w->uN[u] <= K; u++) {
        size_t N = w->uN[u];
        grow_selection(w, k0, N, n, n16, K, d1_sq_run, &m, u);
        double beta = (double)N / (double)(n - 1);
        for (size_t iT = 0; iT < n_T; iT++) {
            selected_mass(w, iT, k0, N);
            double A = w->A_T[iT], Q = w->Q_T[iT];
            double sy_sq, s_sq = gather_selected(w, iT, N, K, &sy_sq);
            const double *c = w->c_T + 2 * iT * L;
            unsel_in in = {.a = w->a_T + iT * L, .x_sq = w->x_sq, .c = c, .e = w->e_T + iT * L,
                           .y_sq = w->y_sq, .x_inv = w->x_inv, .cy = c + L,
                           .is_unsel = w->is_unsel, .sel_inf = w->sel_inf, .s_sq = s_sq,
                           .S_sq = w->S_sq_T[iT], .alpha = 1.0 + beta, .beta = beta, .X = w->X,
                           .x_norm = w->x_norm, .S = w->S_T + iT * w->dim, .order = w->order, .dim = w->dim, .N = N,
                           .s_vec = w->s_vec};
            double t_true, t_exp, g_min;
            if (w->sparse_T[iT])
                unselected_terms(&t_true, &t_exp, &g_min, &in, n, w->nz_idx_T + iT * L,
                                 w->nnz_T[iT], w->zero_sel_T[iT]);
            else
                unselected_terms(&t_true, &t_exp, &g_min, &in, n, NULL, n, 0);
            double r = radius(g_min, sy_sq, &in, n);
            double xisum, up, U = w->U_T[iT * w->U_ld + N];
            size_t Nm, Ns = separability(&xisum, &up, &Nm, w->sel_gather, K, N, A, Q, sy_sq,
                                         g_min, r, delta);
            double val[NVAL];
            /* section 4 */
            if (ax->aggregate) {
                aggregate_distance(val, &in, n, w->sel_gather, U, A, w->d1_N[u], w->m_N[u]);
            } else {
                val[MET_DIST_TRUE] = t_true;
                val[MET_DIST_BOUND] = U * w->d1_N[u] + ((double)(n - N) * A - U) * w->m_N[u];
                val[MET_DIST_EXPECT] = (double)(n - N) / (double)n * t_exp;
            }
            /* section 6 */
            val[MET_SEP_RATIO] = (double)Ns / (double)N;
            double lower = r > 0 ? 1.0 - xisum / ((double)N * r) : 0.0;
            val[MET_SEP_LOWER] = lower > 0 ? lower : 0.0;
            val[MET_SEP_UPPER] = up / (double)N;
            val[MET_SEP_MARGINAL] = (double)Nm / (double)N;
            /* section 9: scatter to every grid index holding this N */
            for (size_t g = w->uStart[u]; g < w->uStart[u + 1]; g++) {
                size_t iN = w->uIdx[g];
                for (int v = 0; v < NVAL; v++) w->acc[met_at_per_n(ax, v, iN, iT, iZ)] += val[v];
            }
        }
        k0 = N;
    }
}

/* One row t: n entries (n = nv = t+1 for visible rows, n = Lc for full_row). */
static void process_row(met_ws *w, size_t t, size_t n, double delta) {
    const met_axes *ax = w->ax;
    const size_t L = w->L;
    size_t nv = t + 1;
    if (n < 2) return; /* no metric is defined on a one-key row (section 9) */
    const float *srow = w->scores + t * w->ld;
    for (size_t j = 0; j < nv; j++) w->l[j] = (double)srow[j];

    /* T-independent: the top-K order (section 3) */
    size_t K = w->Kmax < n - 1 ? w->Kmax : n - 1;
    size_t Kv = K < nv ? K : nv;
    met_topk_order(w->order, w->scratch, w->l, nv, Kv);
    for (size_t k = Kv; k < K; k++) w->order[k] = (uint32_t)(nv + (k - Kv));
    /* d1 and m per grid N: in row_per_n, fused with the c update (same G rows) */
    for (size_t iN = 0; iN < ax->n_N; iN++)
        if ((size_t)ax->N[iN] < n) w->cntN[iN] += 1;
    w->cntT += 1;

    for (size_t iE = 0; iE < ax->n_eps; iE++) {
        double *uu = w->u + iE * L, lo = INFINITY, hi = -INFINITY;
        met_direction(uu, nv,
                      met_direction_key(ax->seed, ax->window, ax->layer, ax->head, (int64_t)t,
                                        (int64_t)iE));
        for (size_t j = 0; j < nv; j++) {
            lo = uu[j] < lo ? uu[j] : lo;
            hi = uu[j] > hi ? uu[j] : hi;
        }
        w->u_range[2 * iE] = lo, w->u_range[2 * iE + 1] = hi;
    }

    double lnn = log((double)n);
    for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
        met_normalizer zn = ax->norm[iZ];
        for (size_t iT = 0; iT < ax->n_T; iT++) {
            double T = ax->T[iT];
            double *a = w->a_T + iT * L;
            /* logit factor of the normalizer (section 10) */
            double f = 1.0 / T;
            if (zn == MET_SSMAX) f *= ssmax_factor(ax->ssmax_scale, n);
            /* section 8: entropy; softmax/ssmax use ln a_j = z_j - zmax - lnZ */
            double H = 0;
            if (zn == MET_SPARSEMAX) {
                weights_with_z(a, w->z, NULL, w->l, nv, n, T, zn, ax->ssmax_scale);
                for (size_t j = 0; j < nv; j++)
                    if (a[j] > 0) H -= a[j] * log(a[j]);
            } else {
                double lnZ = softmax_scaled(a, w->z, w->l, f, nv);
                for (size_t j = nv; j < n; j++) a[j] = 0.0;
                H = lnZ - lane_dot(a, w->z, nv);
                if (H < 0) H = 0;
            }
            double *acc = w->acc;
            acc[met_at_per_t(ax, MET_ENTROPY, iT, iZ)] += H;
            acc[met_at_per_t(ax, MET_ENTROPY_NORM, iT, iZ)] += H / lnn;
            /* section 7 */
            if (zn == MET_SOFTMAX)
                acc[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] +=
                    jacobian_norm(a, nv, w->ap) / T;
            size_t p = w->order[0]; /* the dominant entry: the largest logit's weight */
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                double eps = ax->eps[iE];
                const double *uu = w->u + iE * L;
                double dn;
                if (zn == MET_SPARSEMAX) {
                    /* z is free again (entropy is done); ap is both the perturbed logits and
                     * the output: each z[j] is taken from it before the normalizer writes */
                    for (size_t j = 0; j < nv; j++) w->ap[j] = w->l[j] + eps * uu[j];
                    weights_with_z(w->ap, w->z, NULL, w->ap, nv, n, T, zn, ax->ssmax_scale);
                    dn = sqrt(lane_sqdiff(w->ap, 1.0, a, nv));
                } else {
                    dn = softmax_change_norm(a, p, w->l, uu, w->u_range[2 * iE],
                                             w->u_range[2 * iE + 1], f, eps, nv, w->ap, w->z);
                }
                acc[met_at_grad_fd(ax, iT, iE, iZ)] += dn / eps;
            }
        }
        row_per_n(w, n, nv, K, delta, iZ);
    }
}

static void finish_cut(double *out, met_ws *w) {
    const met_axes *ax = w->ax;
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
                double cnt = w->cntN[iN];
                for (int v = 0; v < NVAL; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    out[at] = cnt > 0 ? w->acc[at] / cnt : NAN;
                }
                out[met_at_per_n(ax, MET_ROWS_USED, iN, iT, iZ)] = cnt;
            }
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            double cnt = w->cntT;
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                out[at] = cnt > 0 ? w->acc[at] / cnt : NAN;
            }
            double T = ax->T[iT], gb = 1.0 / (4.0 * T);
            out[met_at_per_t(ax, MET_GRAD_BOUND, iT, iZ)] =
                cnt > 0 ? (gb < sqrt(2.0) ? gb : sqrt(2.0)) : NAN;
            if (ax->norm[iZ] != MET_SOFTMAX) out[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] = NAN;
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                out[at] = cnt > 0 ? w->acc[at] / cnt : NAN;
            }
        }
}

static void reset_acc(met_ws *w) {
    memset(w->acc, 0, w->nout * sizeof *w->acc);
    memset(w->cntN, 0, (w->ax->n_N ? w->ax->n_N : 1) * sizeof *w->cntN);
    w->cntT = 0;
}

int met_head(double *out, void *workspace, size_t workspace_bytes, const float *scores,
             size_t ld_scores, const float *vectors, size_t L, size_t dim, const size_t *cuts,
             size_t ncuts, const met_axes *ax, as_err *err) {
    if (L == 0 || dim == 0 || ld_scores < L)
        return as_fail(err, "metrics: bad head shape L=%zu dim=%zu ld=%zu", L, dim, ld_scores);
    if (L > UINT32_MAX - 1) return as_fail(err, "metrics: L=%zu too large", L);
    if (ax->n_N == 0 || ax->n_T == 0 || ax->n_norm == 0)
        return as_fail(err, "metrics: empty N, T or normalizer axis");
    for (size_t i = 0; i < ax->n_N; i++)
        if (ax->N[i] < 1) return as_fail(err, "metrics: N[%zu]=%d must be >= 1", i, (int)ax->N[i]);
    for (size_t i = 0; i < ax->n_T; i++)
        if (!(ax->T[i] > 0) || !isfinite(ax->T[i]))
            return as_fail(err, "metrics: T[%zu]=%g must be finite and > 0", i, ax->T[i]);
    for (size_t i = 0; i < ax->n_eps; i++)
        if (!(ax->eps[i] > 0))
            return as_fail(err, "metrics: eps[%zu]=%g must be > 0", i, ax->eps[i]);
    for (size_t i = 0; i < ax->n_norm; i++)
        if ((int)ax->norm[i] < 0 || (int)ax->norm[i] > MET_SSMAX)
            return as_fail(err, "metrics: normalizer[%zu]=%d unknown", i, (int)ax->norm[i]);
    for (size_t c = 0; c < ncuts; c++)
        if (cuts[c] < 1 || cuts[c] > L || (c && cuts[c] < cuts[c - 1]))
            return as_fail(err, "metrics: cut %zu = %zu must be ascending in [1, %zu]", c,
                           cuts[c], L);
    size_t need = met_workspace_bytes(L, dim, ax);
    if (workspace_bytes < need)
        return as_fail(err, "metrics: workspace of %zu bytes, need %zu for L=%zu dim=%zu",
                       workspace_bytes, need, L, dim);
    if (ncuts == 0) return 0;

    met_ws w;
    memset(&w, 0, sizeof w);
    char *base = (char *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    carve(&w, base, L, dim, ax);
    w.L = L, w.dim = dim, w.ld = ld_scores, w.ax = ax, w.scores = scores;
    w.nout = met_out_count(ax);
    w.nU = axes_unique_n(ax, w.uN, w.uOf);
    w.Kmax = w.uN[w.nU - 1];
    /* grid indices of each unique N, grouped: uIdx[uStart[u] .. uStart[u+1]) */
    for (size_t u = 0, g = 0; u < w.nU; u++) {
        w.uStart[u] = (uint32_t)g;
        for (size_t iN = 0; iN < ax->n_N; iN++)
            if (w.uOf[iN] == u) w.uIdx[g++] = (uint32_t)iN;
        w.uStart[u + 1] = (uint32_t)g;
    }
    size_t Lmax = cuts[ncuts - 1];

    /* Gram matrix in double over the rows any cut uses; the rest of G is zeroed because
     * c_update reads whole 16-column blocks past the row's n */
    memset(w.G, 0, L * L * sizeof *w.G);
    w.finite = 1;
    for (size_t i = 0; i < Lmax * dim; i++) {
        w.X[i] = (double)vectors[i];
        if (!isfinite(w.X[i])) w.finite = 0;
    }
    /* zero past Lmax too: the kernels read whole 16-column blocks */
    memset(w.x_sq, 0, L * sizeof *w.x_sq);
    /* XT [dim][L]: X transposed, zero past Lmax (c_update reads whole 16-column blocks) */
    memset(w.XT, 0, dim * L * sizeof *w.XT);
    for (size_t i = 0; i < Lmax; i++)
        for (size_t k = 0; k < dim; k++) w.XT[k * L + i] = w.X[i * dim + k];
    for (size_t i = 0; i < (L > dim ? L : dim); i++) w.iota[i] = (uint32_t)i;
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)Lmax, (int)dim, 1.0, w.X, (int)dim,
                0.0, w.G, (int)L);
    for (size_t i = 0; i < Lmax; i++) {
        for (size_t j = i + 1; j < Lmax; j++) w.G[i * L + j] = w.G[j * L + i];
        /* |x_i|^2 summed from X itself, not G_ii: dsyrk may round the diagonal of two
         * identical rows differently, and y_i = x_i / |x_i| of exact duplicates must be equal
         * (delta = 0, r = 0 for twins) */
        double sq = 0;
        for (size_t k = 0; k < dim; k++) sq += w.X[i * dim + k] * w.X[i * dim + k];
        w.x_sq[i] = sq;
        w.x_norm[i] = sqrt(w.x_sq[i]);
        w.x_inv[i] = w.x_norm[i] > 0 ? 1.0 / w.x_norm[i] : 0.0;
        w.y_sq[i] = w.x_norm[i] > 0 ? 1.0 : 0.0;
    }
    /* delta (section 6): running minimum over t of |y_i - y_t|, i < t */
    double run = INFINITY;
    for (size_t t = 0; t < Lmax; t++) {
        const double *Gt = w.G + t * L;
        for (size_t i = 0; i < t; i++) {
            double d2 = w.y_sq[i] + w.y_sq[t] - 2 * w.x_inv[i] * w.x_inv[t] * Gt[i];
            if (d2 < MET_CANCEL * (w.y_sq[i] + w.y_sq[t])) { /* near-duplicates: directly */
                for (size_t k = 0; k < dim; k++) w.s_vec[k] = y_of(w.X + t * dim, k, w.x_norm[t]);
                d2 = sq_diff_y(w.X + i * dim, w.x_norm[i], 1.0, w.s_vec, dim);
            }
            d2 = d2 > 0 ? d2 : 0;
            if (d2 < run) run = d2;
        }
        w.delta_run[t] = sqrt(run);
    }

    size_t nout = w.nout;
    if (!ax->full_row) {
        reset_acc(&w);
        size_t c = 0;
        for (size_t t = 0; t < Lmax; t++) {
            process_row(&w, t, t + 1, w.delta_run[t]);
            while (c < ncuts && cuts[c] == t + 1) finish_cut(out + nout * c++, &w);
        }
    } else {
        for (size_t c = 0; c < ncuts; c++) {
            if (c && cuts[c] == cuts[c - 1]) {
                memcpy(out + nout * c, out + nout * (c - 1), nout * sizeof *out);
                continue;
            }
            reset_acc(&w);
            size_t Lc = cuts[c];
            for (size_t t = 0; t < Lc; t++) process_row(&w, t, Lc, w.delta_run[Lc - 1]);
            finish_cut(out + nout * c, &w);
        }
    }
    return 0;
}
