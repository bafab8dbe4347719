/* metrics_dir.c -- the counter-based directions of grad_fd (docs/metrics.md section 7).
 *
 * u of row t is a normalized vector of standard normals: normal j is one half of Box-Muller
 * pair j/2, whose two uniforms are splitmix64 hashes of the pair's counters under the row's
 * key. log and sin/cos are evaluated here by series in +, -, *, / only (IEEE defines each
 * exactly) with contraction off, in a loop over pairs the compiler vectorizes: libm's scalar
 * log and sincos were a third of a head's fixed cost (every row draws n normals per eps), and
 * glibc picks different variants (FMA or not) on different CPUs, where these give the same
 * bits on every machine and in every build. */
#include "metrics.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

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

/* ln u for u in [2^-54, 1) (normal numbers): u = m 2^e with m in [1/sqrt 2, sqrt 2), then
 * ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: eleven odd terms leave < 1e-18. The
 * exponent and mantissa come from the bits (no frexp call, no branch). */
static inline double log_unit(double u) {
    uint64_t b;
    memcpy(&b, &u, sizeof b);
    double e = (double)((int64_t)(b >> 52) - 1022); /* u = m 2^e, m in [0.5, 1) */
    uint64_t mb = (b & 0x000FFFFFFFFFFFFFull) | 0x3FE0000000000000ull;
    double m;
    memcpy(&m, &mb, sizeof m);
    int low = m < 0.70710678118654752;
    m = low ? m * 2.0 : m;
    e = low ? e - 1.0 : e;
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, p = 1.0 / 21;
    p = p * s2 + 1.0 / 19;
    p = p * s2 + 1.0 / 17;
    p = p * s2 + 1.0 / 15;
    p = p * s2 + 1.0 / 13;
    p = p * s2 + 1.0 / 11;
    p = p * s2 + 1.0 / 9;
    p = p * s2 + 1.0 / 7;
    p = p * s2 + 1.0 / 5;
    p = p * s2 + 1.0 / 3;
    p = p * s2 + 1.0;
    return e * 0.69314718055994530942 + 2.0 * s * p;
}

/* sin and cos of the angle 2 pi v, v in [0, 1): quadrant q = floor(4 v), r = 4 v - q; the
 * angle within the quadrant is r pi/2, or (1 - r) pi/2 with sin and cos swapped when r > 1/2
 * (1 - r is exact there), so the series run on [0, pi/4]: Taylor to x^17 and x^16, the next
 * terms below 1e-17 relative. */
static inline void sincos_turn(double *sn, double *cs, double v) {
    double q4 = v * 4.0, q = (double)(int64_t)q4, r = q4 - q; /* q = floor(q4): q4 >= 0 */
    int hi = r > 0.5;
    double x = (hi ? 1.0 - r : r) * 1.57079632679489661923, x2 = x * x;
    double ps = -1.0 / 355687428096000.0; /* -1/17! ... */
    ps = ps * x2 + 1.0 / 1307674368000.0;
    ps = ps * x2 - 1.0 / 6227020800.0;
    ps = ps * x2 + 1.0 / 39916800.0;
    ps = ps * x2 - 1.0 / 362880.0;
    ps = ps * x2 + 1.0 / 5040.0;
    ps = ps * x2 - 1.0 / 120.0;
    ps = ps * x2 + 1.0 / 6.0;
    double s = x - x * x2 * ps; /* x - x^3/3! + x^5/5! - ... */
    double pc = 1.0 / 20922789888000.0; /* 1/16! ... */
    pc = pc * x2 - 1.0 / 87178291200.0;
    pc = pc * x2 + 1.0 / 479001600.0;
    pc = pc * x2 - 1.0 / 3628800.0;
    pc = pc * x2 + 1.0 / 40320.0;
    pc = pc * x2 - 1.0 / 720.0;
    pc = pc * x2 + 1.0 / 24.0;
    pc = pc * x2 - 0.5;
    double c = 1.0 + x2 * pc;
    double s1 = hi ? c : s, c1 = hi ? s : c; /* sin, cos of r pi/2 */
    /* q in {0, 1, 2, 3} (v < 1), compared as a double: the selects vectorize */
    *sn = q == 0.0 ? s1 : q == 1.0 ? c1 : q == 2.0 ? -s1 : -c1;
    *cs = q == 0.0 ? c1 : q == 1.0 ? -s1 : q == 2.0 ? -c1 : s1;
}

/* Box-Muller on the pair p = j/2: two hashed counters h1 = mix64(2p), h2 = mix64(2p + 1)
 * give two uniforms */
static inline void normal_pair_h(double *z0, double *z1, uint64_t key, uint64_t h1, uint64_t h2) {
    uint64_t r1 = mix64(key ^ h1), r2 = mix64(key ^ h2);
    double u1 = ((double)(int64_t)(r1 >> 11) + 0.5) * 0x1p-53; /* (0, 1): log is finite */
    double u2 = (double)(int64_t)(r2 >> 11) * 0x1p-53;
    double rad = sqrt(-2.0 * log_unit(u1)), sn, cs;
    sincos_turn(&sn, &cs, u2);
    *z0 = rad * cs;
    *z1 = rad * sn;
}
static inline void normal_pair(double *z0, double *z1, uint64_t key, uint64_t p) {
    normal_pair_h(z0, z1, key, mix64(2 * p), mix64(2 * p + 1));
}

void met_direction_counters(uint64_t *ctr, size_t m) {
    for (size_t c = 0; c < m; c++) ctr[c] = mix64(c);
}

double met_normal(uint64_t key, uint64_t j) {
    double z0, z1;
    normal_pair(&z0, &z1, key, j >> 1);
    return (j & 1) ? z1 : z0;
}

/* pairs p0 .. p0 + m - 1 into z0 [m], z1 [m] (the loop that vectorizes) */
static void normal_pairs(double *restrict z0, double *restrict z1, uint64_t key, uint64_t p0,
                         size_t m, const uint64_t *ctr) {
    if (ctr)
        for (size_t q = 0; q < m; q++) {
            double a, b;
            normal_pair_h(&a, &b, key, ctr[2 * (p0 + q)], ctr[2 * (p0 + q) + 1]);
            z0[q] = a;
            z1[q] = b;
        }
    else
        for (size_t q = 0; q < m; q++) {
            double a, b;
            normal_pair(&a, &b, key, p0 + q);
            z0[q] = a;
            z1[q] = b;
        }
}

/* pairs in chunks: normal_pairs into z0, z1, then u takes them interleaved */
#define DIR_CHUNK 64
void met_direction(double *u, size_t n, uint64_t key) { met_direction_ctr(u, n, key, NULL); }

void met_direction_ctr(double *u, size_t n, uint64_t key, const uint64_t *ctr) {
    double z0[DIR_CHUNK], z1[DIR_CHUNK], acc[8] = {0};
    size_t np = (n + 1) / 2;
    for (size_t p0 = 0; p0 < np; p0 += DIR_CHUNK) {
        size_t m = np - p0 < DIR_CHUNK ? np - p0 : DIR_CHUNK;
        normal_pairs(z0, z1, key, p0, m, ctr);
        for (size_t q = 0; q < m; q++) {
            size_t j = 2 * (p0 + q);
            u[j] = z0[q];
            if (j + 1 < n) u[j + 1] = z1[q];
        }
    }
    /* |u|^2 in 8 fixed lanes over j (the order does not depend on the vector width) */
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int q = 0; q < 8; q++) acc[q] += u[j + q] * u[j + q];
    for (; j < n; j++) acc[0] += u[j] * u[j];
    double ss = 0;
    for (int q = 0; q < 8; q++) ss += acc[q];
    double inv = 1.0 / sqrt(ss);
    for (size_t i = 0; i < n; i++) u[i] *= inv;
}
