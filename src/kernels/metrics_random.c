/* metrics_random.c -- dist_random, its Monte-Carlo standard error and dist_random_upper
 * (docs/metrics.md section 4.6): the expected distance E||Z|| of a uniformly random N-subset,
 * where dist_expect (sections 4.3, 4.5) is the norm of an expectation, below it by Jensen.
 *
 * Exact where the expectation has few terms: aggregate reading with min(N, n - N) = 1 (n
 * subsets of one key, O(n)), per-token reading with N = n - 1 (one unselected key, O(n)),
 * and any N with C(n, N) <= K (every subset enumerated). Otherwise K subsets drawn by a
 * partial Fisher-Yates shuffle from a counter-based generator under the row's key, the same
 * subsets for every T (common random numbers: the T curves differ by the weights, not by
 * the draw). Distances use the Gram matrix as section 4.4 does; squares are clamped at 0. */
#include "metrics.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static inline uint64_t rnd_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* an integer uniform in [0, m): the high word of a 64 x 64-bit product (bias below m / 2^64) */
static inline size_t rnd_below(uint64_t key, uint64_t ctr, size_t m) {
    unsigned __int128 p = (unsigned __int128)rnd_mix(key ^ rnd_mix(ctr)) * (uint64_t)m;
    return (size_t)(p >> 64);
}

size_t met_random_scratch_doubles(size_t n, size_t n_T, size_t K) { return n_T * (n + K + 1); }

void met_random_prep(double *e_T, double *S_sq_T, const double *a_T, size_t lda, size_t n_T,
                     const double *G, size_t ldG, size_t n) {
    /* e = a G (G symmetric: e_j = x_j . S), |S|^2 = a . e */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n_T, (int)n, (int)n, 1.0, a_T,
                (int)lda, G, (int)ldG, 0.0, e_T, (int)lda);
    for (size_t iT = 0; iT < n_T; iT++) {
        double s = 0;
        for (size_t j = 0; j < n; j++) s += a_T[iT * lda + j] * e_T[iT * lda + j];
        S_sq_T[iT] = s;
    }
}

/* C(n, m) if it is at most cap, else cap + 1 (C(n, i) grows with i up to n / 2: taking
 * the smaller of m and n - m, no partial product passes the cap before the result does) */
static double choose_capped(size_t n, size_t m, double cap) {
    double c = 1;
    if (n - m < m) m = n - m;
    for (size_t i = 0; i < m; i++) {
        c = c * (double)(n - i) / (double)(i + 1);
        if (c > cap) return cap + 1;
    }
    return c;
}

/* the next m-subset of [0, n) in lexicographic order; 0 after the last */
static int next_subset(uint32_t *idx, size_t m, size_t n) {
    size_t i = m;
    while (i > 0 && idx[i - 1] == n - m + i - 1) i--;
    if (i == 0) return 0;
    idx[i - 1]++;
    for (size_t k = i; k < m; k++) idx[k] = idx[k - 1] + 1;
    return 1;
}

typedef struct {
    const double *a_T, *G, *x_sq, *e_T, *S_sq_T;
    size_t lda, ldG, n_T, n;
    double *c;      /* [n_T][n] c_j = sum_{i in I} a_i G_ij (per-token reading) */
    uint32_t *mark; /* [n] 1 for selected keys */
} rnd_row;

/* Z of one subset idx [m] at every T into val [n_T] (stride vs). Aggregate: idx is I or its
 * complement (||S - 2 s_I|| is the same for both); per token: idx = I. */
static void subset_values(double *val, size_t vs, const rnd_row *r, const uint32_t *idx, size_t m,
                          int aggregate) {
    const size_t n = r->n, lda = r->lda;
    for (size_t iT = 0; iT < r->n_T; iT++) {
        const double *a = r->a_T + iT * lda, *e = r->e_T + iT * lda;
        if (aggregate) { /* ||S - 2 s||^2 = |S|^2 - 4 s.S + 4 |s|^2 */
            double ss = 0, sS = 0;
            for (size_t q = 0; q < m; q++) {
                const double *Gq = r->G + (size_t)idx[q] * r->ldG;
                double inner = 0;
                for (size_t p = 0; p < m; p++) inner += a[idx[p]] * Gq[idx[p]];
                ss += a[idx[q]] * inner;
                sS += a[idx[q]] * e[idx[q]];
            }
            double z2 = r->S_sq_T[iT] - 4 * sS + 4 * ss;
            val[iT * vs] = sqrt(z2 > 0 ? z2 : 0);
            continue;
        }
        double *c = r->c + iT * n;
        memset(c, 0, n * sizeof *c);
        for (size_t q = 0; q < m; q++) {
            const double *Gq = r->G + (size_t)idx[q] * r->ldG;
            double aq = a[idx[q]];
            for (size_t j = 0; j < n; j++) c[j] += aq * Gq[j];
        }
        double ss = 0;
        for (size_t q = 0; q < m; q++) ss += a[idx[q]] * c[idx[q]];
        double t = 0; /* sum_{j not in I} ||a_j x_j - s|| (section 4.1) */
        for (size_t j = 0; j < n; j++) {
            double d2 = a[j] * a[j] * r->x_sq[j] - 2 * a[j] * c[j] + ss;
            t += r->mark[j] ? 0.0 : sqrt(d2 > 0 ? d2 : 0);
        }
        val[iT * vs] = t;
    }
}

/* sqrt(E||Z||^2), exact for sampling without replacement (section 4.6): per key
 * Var(chi_i) = p (1 - p), Cov(chi_i, chi_j) = -p (1 - p) / (n - 1) */
static double upper_bound(const rnd_row *r, size_t iT, size_t N, int aggregate) {
    const size_t n = r->n;
    const double *a = r->a_T + iT * r->lda, *e = r->e_T + iT * r->lda;
    double Q = 0, S2 = r->S_sq_T[iT];
    for (size_t j = 0; j < n; j++) Q += a[j] * a[j] * r->x_sq[j];
    if (aggregate) {
        double p = (double)N / (double)n, f = 1 - 2 * p;
        double m2 = f * f * S2 + 4 * p * (1 - p) * ((double)n * Q - S2) / (double)(n - 1);
        return sqrt(m2 > 0 ? m2 : 0);
    }
    /* given i unselected, I is uniform among the other n - 1 keys: p' = N / (n - 1) */
    double p = (double)N / (double)(n - 1), t = 0;
    for (size_t i = 0; i < n; i++) {
        double wi2 = a[i] * a[i] * r->x_sq[i], wR = a[i] * e[i] - wi2;
        double R2 = S2 - 2 * a[i] * e[i] + wi2, Qi = Q - wi2;
        double var = n > 2 ? p * (1 - p) * ((double)(n - 1) * Qi - R2) / (double)(n - 2) : 0;
        double m2 = wi2 - 2 * p * wR + p * p * R2 + (var > 0 ? var : 0);
        t += sqrt(m2 > 0 ? m2 : 0);
    }
    return (double)(n - N) / (double)n * t;
}

void met_dist_random(double *out, double *dscr, uint32_t *iscr, const double *a_T, size_t lda,
                     size_t n_T, const double *G, size_t ldG, const double *x_sq,
                     const double *e_T, const double *S_sq_T, size_t n, size_t N, int aggregate,
                     size_t K, uint64_t key) {
    rnd_row r = {.a_T = a_T, .G = G, .x_sq = x_sq, .e_T = e_T, .S_sq_T = S_sq_T, .lda = lda,
                 .ldG = ldG, .n_T = n_T, .n = n, .c = dscr, .mark = iscr + n};
    double *vals = dscr + n_T * n; /* [n_T][K + 1] */
    uint32_t *idx = iscr;          /* [n] */
    size_t m = aggregate && n - N < N ? n - N : N, vs = K + 1;
    memset(r.mark, 0, n * sizeof *r.mark);
    for (size_t iT = 0; iT < n_T; iT++) {
        out[3 * iT + 0] = 0, out[3 * iT + 1] = 0;
        out[3 * iT + 2] = upper_bound(&r, iT, N, aggregate);
    }
    if (!aggregate && N == n - 1) { /* one unselected key k: ||a_k x_k - (S - a_k x_k)|| */
        for (size_t iT = 0; iT < n_T; iT++) {
            const double *a = a_T + iT * lda, *e = e_T + iT * lda;
            double t = 0;
            for (size_t k = 0; k < n; k++) {
                double z2 = S_sq_T[iT] - 4 * a[k] * e[k] + 4 * a[k] * a[k] * x_sq[k];
                t += sqrt(z2 > 0 ? z2 : 0);
            }
            out[3 * iT] = t / (double)n;
        }
        return;
    }
    double count = choose_capped(n, m, (double)K);
    if ((aggregate && m == 1) || count <= (double)K) { /* every subset, equally likely */
        for (size_t k = 0; k < m; k++) idx[k] = (uint32_t)k;
        double sub = 0;
        do {
            for (size_t k = 0; k < m; k++) r.mark[idx[k]] = 1;
            subset_values(vals, vs, &r, idx, m, aggregate);
            for (size_t k = 0; k < m; k++) r.mark[idx[k]] = 0;
            for (size_t iT = 0; iT < n_T; iT++) out[3 * iT] += vals[iT * vs];
            sub += 1;
        } while (next_subset(idx, m, n));
        for (size_t iT = 0; iT < n_T; iT++) out[3 * iT] /= sub;
        return;
    }
    /* Monte Carlo: K subsets of m keys by a partial Fisher-Yates shuffle of idx (from any
     * permutation, its first m entries after m steps are a uniform m-subset) */
    for (size_t j = 0; j < n; j++) idx[j] = (uint32_t)j;
    uint64_t ctr = 0;
    for (size_t s = 0; s < K; s++) {
        for (size_t k = 0; k < m; k++) {
            size_t j = k + rnd_below(key, ctr++, n - k);
            uint32_t t = idx[k];
            idx[k] = idx[j], idx[j] = t;
            r.mark[idx[k]] = 1;
        }
        subset_values(vals + s, vs, &r, idx, m, aggregate);
        for (size_t k = 0; k < m; k++) r.mark[idx[k]] = 0;
    }
    for (size_t iT = 0; iT < n_T; iT++) {
        const double *v = vals + iT * vs;
        double mean = 0, ss = 0;
        for (size_t s = 0; s < K; s++) mean += v[s];
        mean /= (double)K;
        for (size_t s = 0; s < K; s++) ss += (v[s] - mean) * (v[s] - mean);
        out[3 * iT] = mean;
        out[3 * iT + 1] = K > 1 ? ss / ((double)K * (double)(K - 1)) : NAN;
    }
}
