/* test_metrics_random.c -- dist_random, dist_random_se and dist_random_upper (docs/metrics.md
 * section 4.6) against a float64 brute force of the definition: every N-subset of a row
 * enumerated, the distance formed from the vectors themselves (no Gram matrix), both readings.
 *
 * What it protects, with its tolerance:
 *  - the exact paths (C(n, N) <= K, min(N, n - N) = 1 aggregate, N = n - 1 per token): E||Z||
 *    to 1e-11 relative, standard error exactly 0;
 *  - the Monte-Carlo path: each estimate within 5 of its own standard errors of the exact
 *    E||Z|| (K = 64: a t with 63 degrees of freedom passes 5 with probability 1 - 1e-5, and
 *    the draws are seeded, so the verdict is reproducible), and the mean of 400 estimates
 *    under different keys within 5 standard errors of that mean (unbiased sampling: a draw
 *    that favoured some keys would move it by many of them);
 *  - dist_random_upper = sqrt(E||Z||^2) of the enumeration to 1e-10 relative, and Jensen's
 *    order dist_expect <= dist_random <= dist_random_upper;
 *  - the head job: dist_random of met_head equals the mean over rows of the kernel on each
 *    row, is the same for any normalizer list and reruns to the same bits, and is NaN when
 *    random_subsets = 0. */
#include "check.h"
#include "metrics.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM 3
#define NMAX 12

static uint64_t rng = 0x1234567887654321ull;
static double unif(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* brute force: E||Z|| and the upper bound of section 4.6 over all N-subsets (aggregate:
 * sqrt(E||Z||^2); per token: ((n - N) / n) sum_i sqrt(E[||a_i x_i - s||^2 | i unselected])),
 * and dist_expect (sections 4.3, 4.5) */
static void brute(double *mean, double *upper, double *expect, const double *a, const double *x,
                  int n, int N, int aggregate) {
    double sum = 0, sum2 = 0, cnt = 0, di2[NMAX] = {0}, dcnt[NMAX] = {0};
    for (uint32_t mask = 0; mask < (1u << n); mask++) {
        if (__builtin_popcount(mask) != N) continue;
        double s[DIM] = {0}, u[DIM] = {0};
        for (int j = 0; j < n; j++)
            for (int k = 0; k < DIM; k++) {
                if (mask >> j & 1) s[k] += a[j] * x[j * DIM + k];
                else u[k] += a[j] * x[j * DIM + k];
            }
        double z = 0;
        if (aggregate) {
            for (int k = 0; k < DIM; k++) z += (u[k] - s[k]) * (u[k] - s[k]);
            z = sqrt(z);
        } else {
            for (int j = 0; j < n; j++) {
                if (mask >> j & 1) continue;
                double d = 0;
                for (int k = 0; k < DIM; k++) {
                    double t = a[j] * x[j * DIM + k] - s[k];
                    d += t * t;
                }
                z += sqrt(d);
                di2[j] += d, dcnt[j] += 1;
            }
        }
        sum += z, sum2 += z * z, cnt += 1;
    }
    *mean = sum / cnt, *upper = sqrt(sum2 / cnt);
    if (!aggregate) {
        double t = 0;
        for (int i = 0; i < n; i++) t += sqrt(di2[i] / dcnt[i]);
        *upper = (double)(n - N) / n * t;
    }
    double S[DIM] = {0};
    for (int j = 0; j < n; j++)
        for (int k = 0; k < DIM; k++) S[k] += a[j] * x[j * DIM + k];
    if (aggregate) {
        double nS = 0;
        for (int k = 0; k < DIM; k++) nS += S[k] * S[k];
        *expect = fabs((double)(n - 2 * N)) / n * sqrt(nS);
        return;
    }
    double beta = (double)N / (n - 1), t = 0;
    for (int i = 0; i < n; i++) {
        double d = 0;
        for (int k = 0; k < DIM; k++) {
            double v = a[i] * x[i * DIM + k] - beta * (S[k] - a[i] * x[i * DIM + k]);
            d += v * v;
        }
        t += sqrt(d);
    }
    *expect = (double)(n - N) / n * t;
}

typedef struct {
    double a[2 * NMAX], x[NMAX * DIM], G[NMAX * NMAX], x_sq[NMAX], e[2 * NMAX], S_sq[2];
} row_case;

static void make_row(row_case *c, int n) {
    for (int j = 0; j < n * DIM; j++) c->x[j] = 2 * unif() - 1;
    for (int iT = 0; iT < 2; iT++) { /* two temperatures: a spread row and a peaked one */
        double z[NMAX], mx = -1e300, s = 0;
        for (int j = 0; j < n; j++) z[j] = (iT ? 6.0 : 1.0) * (2 * unif() - 1), mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < n; j++) s += c->a[iT * NMAX + j] = exp(z[j] - mx);
        for (int j = 0; j < n; j++) c->a[iT * NMAX + j] /= s;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double g = 0;
            for (int k = 0; k < DIM; k++) g += c->x[i * DIM + k] * c->x[j * DIM + k];
            c->G[i * NMAX + j] = g;
        }
    for (int j = 0; j < n; j++) c->x_sq[j] = c->G[j * NMAX + j];
    met_random_prep(c->e, c->S_sq, c->a, NMAX, 2, c->G, NMAX, (size_t)n);
}

static double dscr[4096];
static uint32_t iscr[2 * NMAX];

static void kernel_cases(void) {
    const size_t K = 64;
    for (int n = 2; n <= NMAX; n++)
        for (int N = 1; N < n; N++)
            for (int agg = 0; agg < 2; agg++) {
                row_case c;
                make_row(&c, n);
                double out[6];
                met_dist_random(out, dscr, iscr, c.a, NMAX, 2, c.G, NMAX, c.x_sq, c.e, c.S_sq,
                                (size_t)n, (size_t)N, agg, K, 0xabcdef00u + (uint64_t)(n * 100 + N));
                double nck = 1;
                for (int i = 0; i < N; i++) nck = nck * (n - i) / (i + 1);
                int m = agg && n - N < N ? n - N : N;
                int exact = (agg && m == 1) || (!agg && N == n - 1) || nck <= (double)K;
                for (int iT = 0; iT < 2; iT++) {
                    double mean, m2, ex;
                    brute(&mean, &m2, &ex, c.a + iT * NMAX, c.x, n, N, agg);
                    char lab[96];
                    snprintf(lab, sizeof lab, "n=%d N=%d %s T%d", n, N, agg ? "aggregate" : "per_token", iT);
                    if (exact) {
                        CHECK_CLOSE(out[3 * iT], mean, 1e-15, 1e-11, lab);
                        CHECK(out[3 * iT + 1] == 0, "%s: exact, se^2 = %g", lab, out[3 * iT + 1]);
                    } else {
                        double se = sqrt(out[3 * iT + 1]);
                        CHECK(fabs(out[3 * iT] - mean) <= 5 * se + 1e-14 * mean,
                              "%s: MC %.10g exact %.10g se %.3g", lab, out[3 * iT], mean, se);
                        CHECK(se > 0, "%s: MC with se %g", lab, se);
                    }
                    CHECK_CLOSE(out[3 * iT + 2], m2, 1e-14, 1e-10, lab);
                    CHECK(ex <= mean * (1 + 1e-12) + 1e-15 && mean <= m2 * (1 + 1e-12) + 1e-15,
                          "%s: Jensen order %g <= %g <= %g", lab, ex, mean, m2);
                }
            }
}

/* 400 estimates under different keys: their mean is within 5 standard errors of E||Z|| */
static void unbiased(void) {
    for (int agg = 0; agg < 2; agg++) {
        const int n = 11, N = 4, R = 400;
        const size_t K = 8;
        row_case c;
        make_row(&c, n);
        double mean, m2, ex, sum = 0, var = 0, out[6];
        brute(&mean, &m2, &ex, c.a, c.x, n, N, agg);
        for (int r = 0; r < R; r++) {
            met_dist_random(out, dscr, iscr, c.a, NMAX, 2, c.G, NMAX, c.x_sq, c.e, c.S_sq, n, N,
                            agg, K, 0x5eedu + (uint64_t)r * 7919);
            sum += out[0], var += out[1];
        }
        double est = sum / R, se = sqrt(var) / R;
        CHECK(fabs(est - mean) <= 5 * se, "%s: mean of %d estimates %.10g, exact %.10g, se %.3g",
              agg ? "aggregate" : "per_token", R, est, mean, se);
        printf("unbiased %s: exact %.8f, mean of %d K=%zu estimates %.8f (%.2f se)\n",
               agg ? "aggregate" : "per_token", mean, R, K, est, (est - mean) / se);
    }
}

/* the head job against the kernel, row by row */
static void head_cases(void) {
    enum { L = 10, D = 4 };
    float scores[L * L], vec[L * D];
    for (int i = 0; i < L * L; i++) scores[i] = (float)(3 * (2 * unif() - 1));
    for (int i = 0; i < L * D; i++) vec[i] = (float)(2 * unif() - 1);
    const int32_t Ns[] = {1, 3, 5};
    const double Ts[] = {0.5, 2.0};
    const met_normalizer z1[] = {MET_SOFTMAX}, z2[] = {MET_SPARSEMAX, MET_SOFTMAX};
    for (int agg = 0; agg < 2; agg++) {
        met_axes ax = {.N = Ns, .n_N = 3, .T = Ts, .n_T = 2, .norm = z1, .n_norm = 1,
                       .aggregate = agg, .seed = 7, .window = 2, .layer = 1, .head = 3,
                       .random_subsets = 16};
        met_axes ax2 = ax;
        ax2.norm = z2, ax2.n_norm = 2;
        size_t cut = L, nout = met_out_count(&ax), nout2 = met_out_count(&ax2);
        size_t wsb = met_workspace_bytes(L, D, &ax2) + met_workspace_bytes(L, D, &ax);
        void *ws = malloc(wsb);
        double *o1 = malloc(nout * sizeof *o1), *o1b = malloc(nout * sizeof *o1), *o2 = malloc(nout2 * sizeof *o2);
        as_err err = {0};
        CHECK(met_head(o1, ws, wsb, scores, L, vec, L, D, &cut, 1, &ax, &err) == 0, "%s", err.msg);
        CHECK(met_head(o2, ws, wsb, scores, L, vec, L, D, &cut, 1, &ax2, &err) == 0, "%s", err.msg);
        memset(ws, 0x7f, wsb);
        CHECK(met_head(o1b, ws, wsb, scores, L, vec, L, D, &cut, 1, &ax, &err) == 0, "%s", err.msg);
        CHECK(!memcmp(o1, o1b, nout * sizeof *o1), "%s: a rerun changed bits", agg ? "aggregate" : "per_token");
        /* the kernel row by row, weights from the definition (softmax of l / T) */
        double X[L * D], G[L * L], xs[L];
        for (int i = 0; i < L * D; i++) X[i] = vec[i];
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                double g = 0;
                for (int k = 0; k < D; k++) g += X[i * D + k] * X[j * D + k];
                G[i * L + j] = g;
            }
        for (int j = 0; j < L; j++) xs[j] = G[j * L + j];
        for (int iN = 0; iN < 3; iN++)
            for (int iT = 0; iT < 2; iT++) {
                double sum[3] = {0}, cnt = 0;
                for (int t = Ns[iN]; t < L; t++) { /* rows with n = t + 1 > N */
                    int n = t + 1;
                    double a[L], e[L], S2, mx = -1e300, s = 0, out[3];
                    for (int j = 0; j < n; j++) mx = scores[t * L + j] > mx ? scores[t * L + j] : mx;
                    for (int j = 0; j < n; j++) s += a[j] = exp((scores[t * L + j] - mx) / Ts[iT]);
                    for (int j = 0; j < n; j++) a[j] /= s;
                    met_random_prep(e, &S2, a, L, 1, G, L, n);
                    uint64_t key = met_direction_key(7 ^ 0x72616e646f6d4e53ull, 2, 1, 3, t, Ns[iN]);
                    met_dist_random(out, dscr, iscr, a, L, 1, G, L, xs, e, &S2, n, Ns[iN], agg, 16, key);
                    for (int v = 0; v < 3; v++) sum[v] += out[v];
                    cnt += 1;
                }
                char lab[64];
                snprintf(lab, sizeof lab, "head %s N=%d T=%g", agg ? "aggregate" : "per_token", Ns[iN], Ts[iT]);
                CHECK_CLOSE(o1[met_at_random(&ax, MET_DIST_RANDOM, iN, iT, 0)], sum[0] / cnt, 1e-14, 1e-9, lab);
                CHECK_CLOSE(o1[met_at_random(&ax, MET_DIST_RANDOM_SE, iN, iT, 0)], sqrt(sum[1]) / cnt, 1e-14, 1e-9, lab);
                CHECK_CLOSE(o1[met_at_random(&ax, MET_DIST_RANDOM_UPPER, iN, iT, 0)], sum[2] / cnt, 1e-14, 1e-9, lab);
                for (int v = 0; v < MET_NRAND; v++)
                    CHECK(o1[met_at_random(&ax, v, iN, iT, 0)] == o2[met_at_random(&ax2, v, iN, iT, 1)],
                          "%s: another normalizer list changed variable %d", lab, v);
                double de = o1[met_at_per_n(&ax, MET_DIST_EXPECT, iN, iT, 0)];
                double dr = o1[met_at_random(&ax, MET_DIST_RANDOM, iN, iT, 0)];
                CHECK(de <= o1[met_at_random(&ax, MET_DIST_RANDOM_UPPER, iN, iT, 0)] && dr > 0,
                      "%s: dist_expect %g above the upper bound", lab, de);
            }
        ax.random_subsets = 0;
        CHECK(met_head(o1, ws, wsb, scores, L, vec, L, D, &cut, 1, &ax, &err) == 0, "%s", err.msg);
        CHECK(isnan(o1[met_at_random(&ax, MET_DIST_RANDOM, 0, 0, 0)]), "off: NaN");
        ax.random_subsets = 1;
        CHECK(met_head(o1, ws, wsb, scores, L, vec, L, D, &cut, 1, &ax, &err) != 0 &&
                  strstr(err.msg, "random_subsets"), "K = 1 refused: %s", err.msg);
        free(ws), free(o1), free(o1b), free(o2);
    }
}

int main(void) {
    kernel_cases();
    unbiased();
    head_cases();
    return check_summary("test_metrics_random");
}
