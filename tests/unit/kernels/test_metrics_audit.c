/* test_metrics_audit.c -- the kernel audit's smaller findings, each on a constructed head of
 * the kind that exposed it, against the float64/quad brute force of metrics_ref.h or the
 * definition evaluated directly (docs/metrics.md sections 4, 6, 7). Small heads (L <= 12):
 * the whole file runs in well under a second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"
#include "metrics_ref.h"

/* run met_head on one cut Lc = L; returns the output block (caller frees) */
static double *run_head(const float *scores, const float *vec, int L, int d, const met_axes *ax) {
    size_t cut = (size_t)L, nout = met_out_count(ax), wsb = met_workspace_bytes(L, d, ax);
    void *ws = malloc(wsb);
    double *out = malloc(nout * sizeof *out);
    as_err err = {0};
    CHECK(met_head(out, ws, wsb, scores, L, vec, L, d, &cut, 1, ax, &err) == 0, "met_head");
    free(ws);
    return out;
}

/* grad_fd (section 7) when every weight change is below ~1e-154: the squares underflow and the
 * norm came out exactly 0. Rows of 8 keys at T = 1, 2 (and eps 1e-3, 10) against the quad
 * brute force, 1e-8 relative; at eps = 1e-3 every normalizer but sparsemax must give a
 * nonzero value. sink = 1: one dominant key, the rest 380-420 logits below (softmax, ssmax,
 * sparsemax: weights ~1e-170, changes ~1e-173); sink = 0: every logit 380-420 below 0, for
 * the normalizers of section 10.1 whose weights can then all be tiny (sigmoid, each weight
 * its own sigmoid; softmax1, whose null entry takes the mass). */
static void test_grad_fd_tiny(int sink, const met_normalizer *z1, size_t nz) {
    enum { L = 8, d = 4 };
    float scores[L * L], vec[L * d];
    for (int i = 0; i < L * d; i++) vec[i] = (float)(0.3 * ((i * 7) % 11) - 1.2);
    for (int t = 0; t < L; t++)
        for (int j = 0; j < L; j++)
            scores[t * L + j] = j > t ? NAN : (float)(j == 0 && sink ? 0 : -380 - 5 * ((j * 3 + t) % 9));
    static const int32_t N1[] = {1};
    static const double T1[] = {1, 2};
    static const double E1[] = {1e-3, 10};
    met_axes ax = {.N = N1, .n_N = 1, .T = T1, .n_T = 2, .eps = E1, .n_eps = 2, .norm = z1,
                   .n_norm = nz, .seed = 7, .window = 1, .layer = 2, .head = 3};
    double *got = run_head(scores, vec, L, d, &ax);
    double *want = calloc(met_out_count(&ax), sizeof *want);
    ref_head(want, scores, L, vec, L, d, &ax);
    for (size_t iT = 0; iT < 2; iT++)
        for (size_t iE = 0; iE < 2; iE++)
            for (size_t iZ = 0; iZ < nz; iZ++) {
                size_t at = met_at_grad_fd(&ax, iT, iE, iZ);
                char lab[96];
                snprintf(lab, sizeof lab, "grad_fd T=%g eps=%g %s (tiny changes)", T1[iT], E1[iE],
                         met_normalizer_name(z1[iZ]));
                CHECK_CLOSE(got[at], want[at], 0, 1e-8, lab);
                if (z1[iZ] != MET_SPARSEMAX && iE == 0)
                    CHECK(got[at] > 0 && want[at] > 0, "%s: exactly 0 (brute force %g)", lab,
                          want[at]);
            }
    free(got), free(want);
}

static void test_grad_fd_tiny_changes(void) {
    static const met_normalizer sink[] = {MET_SOFTMAX, MET_SSMAX, MET_SPARSEMAX};
    static const met_normalizer all_tiny[] = {MET_SIGMOID, MET_SOFTMAX1};
    test_grad_fd_tiny(1, sink, 3);
    test_grad_fd_tiny(0, all_tiny, 2);
}

/* Aggregate dist_true (section 4.5) where the unselected sum nearly cancels s: L = 2, row 1's
 * logits 1, 0 at T = 1 / (ln 2 (1 + 3e-14)), so a_0 = 2 a_1 (1 + 3e-14), and x_1 = 2 x_0:
 * a_1 x_1 - a_0 x_0 is ~1e-14 |x|. Formed as S - 2 s it carries S's rounding (~1e-16 |x|,
 * 1e-3 relative and more); both parts formed apart, it matches the brute force. */
static void test_aggregate_cancel(void) {
    enum { L = 2, d = 5 };
    float scores[L * L] = {1, NAN, 1, 0}, vec[L * d];
    static const int32_t N1[] = {1};
    static const double T1[] = {1.4426950408889634 / (1 + 3e-14)};
    static const met_normalizer z1[] = {MET_SOFTMAX};
    met_axes ax = {.N = N1, .n_N = 1, .T = T1, .n_T = 1, .norm = z1, .n_norm = 1,
                   .aggregate = 1, .seed = 3};
    double worst = 0;
    for (int c = 0; c < 8; c++) { /* eight vectors: the rounding of S varies with them */
        for (int k = 0; k < d; k++) {
            vec[k] = (float)(0.7 + 0.31 * k + 0.173 * c * (k % 3));
            vec[d + k] = 2 * vec[k];
        }
        double *got = run_head(scores, vec, L, d, &ax);
        double *want = calloc(met_out_count(&ax), sizeof *want);
        ref_head(want, scores, L, vec, L, d, &ax);
        size_t at = met_at_per_n(&ax, MET_DIST_TRUE, 0, 0, 0);
        CHECK(want[at] > 0, "the case cancels to a nonzero value (%g)", want[at]);
        double e = fabs(got[at] - want[at]) / want[at];
        worst = e > worst ? e : worst;
        free(got), free(want);
    }
    CHECK(worst <= 1e-6, "aggregate dist_true, unselected sum ~ s: %.3g relative off the brute force", worst);
}

/* Section 6.2 where weights underflow: a sink head with raw logits (key 0 some 300 above keys
 * of spread 100, as test_metrics_regimes' sink-raw-logits) at T = 0.1 has logit gaps of
 * 10^3-10^4 T: every weight but the sink's is 0 in double, and each selected one used to tie
 * at g = 0 with the unselected ones and count outside (sep_ratio 1/N). The referee: the count
 * in quad precision (exponent range 1e-4932: every weight here is representable), weights
 * from the shifted logits, y and s^y formed explicitly, g_i = a_i^2 |y_i|^2 - 2 a_i s.y_i
 * against the least unselected g. A decision whose margin is below 1e-20 of |g| is a tie
 * the library may take either way (the band [lo, hi]). */
static unsigned long long rs = 0x9E3779B97F4A7C15ull;
static double ur(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return ((double)(rs >> 11) + 0.5) * 0x1p-53;
}
static double gs(void) { return sqrt(-2 * log(ur())) * cos(6.283185307179586 * ur()); }

static void quad_count(double *lo, double *hi, const float *scores, const float *vec, int L, int d,
                       int t, int N, double f) {
    int n = t + 1, ord[64], insel[64];
    refq a[64], y[64][16], sy[16] = {0}, g[64], lmax = scores[t * L];
    for (int j = 0; j < n; j++) lmax = scores[t * L + j] > lmax ? scores[t * L + j] : lmax;
    refq Z = 0;
    for (int j = 0; j < n; j++) Z += REFQ_EXP((refq)f * ((refq)scores[t * L + j] - lmax));
    for (int j = 0; j < n; j++) a[j] = REFQ_EXP((refq)f * ((refq)scores[t * L + j] - lmax)) / Z;
    for (int j = 0; j < n; j++) {
        refq nn = 0;
        for (int k = 0; k < d; k++) nn += (refq)vec[j * d + k] * vec[j * d + k];
        nn = REFQ_SQRT(nn);
        for (int k = 0; k < d; k++) y[j][k] = nn > 0 ? vec[j * d + k] / nn : 0;
        ord[j] = j;
    }
    for (int i = 1; i < n; i++) /* logit descending, ties to the lower index */
        for (int j = i; j > 0 && scores[t * L + ord[j]] > scores[t * L + ord[j - 1]]; j--) {
            int tt = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = tt;
        }
    memset(insel, 0, sizeof insel);
    for (int q = 0; q < N; q++) insel[ord[q]] = 1;
    for (int j = 0; j < n; j++)
        if (insel[j])
            for (int k = 0; k < d; k++) sy[k] += a[j] * y[j][k];
    refq gmin = (refq)1e30;
    for (int j = 0; j < n; j++) {
        refq p = 0, yy = 0;
        for (int k = 0; k < d; k++) p += sy[k] * y[j][k], yy += y[j][k] * y[j][k];
        g[j] = a[j] * a[j] * yy - 2 * a[j] * p;
        if (!insel[j] && g[j] < gmin) gmin = g[j];
    }
    int nlo = 0, nhi = 0;
    for (int i = 0; i < n; i++) {
        if (!insel[i]) continue;
        refq m = g[i] - gmin, ag = g[i] < 0 ? -g[i] : g[i], am = gmin < 0 ? -gmin : gmin;
        refq big = ag > am ? ag : am;
        nlo += m < -(refq)1e-20 * big;
        nhi += m < (refq)1e-20 * big;
    }
    *lo += (double)nlo / N, *hi += (double)nhi / N;
}

/* shape 0: the sink's vector 0.02 of the others' scale, the rest isotropic (about half the
 * selected keys point away from s^y); shape 1: every vector a common mean plus noise
 * (x_j = m + e_j, as value vectors are), so the selected keys lie inside the ball: at
 * T = 0.1, N = 16 the definition counts 1.0 where tying every underflowed key at g = 0
 * leaves little more than the sink (0.070; shape 0: 0.625 against 0.070). want_min is the
 * least referee count the case must reach at softmax, T = 0.1, N = 16 (so that it stays
 * the case it is about). */
static void test_sep_underflow_shape(int shape, double want_min) {
    enum { L = 24, d = 8 };
    float scores[L * L], vec[L * d], mean[d];
    for (int t = 0; t < L; t++)
        for (int j = 0; j < L; j++)
            scores[t * L + j] = j > t ? NAN : (float)(100 * gs() + (j == 0 ? 300 + 40 * ur() : 0));
    for (int k = 0; k < d && shape == 1; k++) mean[k] = (float)gs();
    for (int i = 0; i < L * d; i++)
        vec[i] = shape == 0 ? (float)gs() * (i < d ? 0.02f : 1.0f)
                            : mean[i % d] + 1.5f * (float)gs();
    static const int32_t N1[] = {1, 2, 4, 8, 16};
    static const double T1[] = {1, 0.3, 0.1};
    static const met_normalizer z1[] = {MET_SOFTMAX, MET_SSMAX};
    met_axes ax = {.N = N1, .n_N = 5, .T = T1, .n_T = 3, .norm = z1, .n_norm = 2, .seed = 5};
    double *got = run_head(scores, vec, L, d, &ax);
    for (size_t iZ = 0; iZ < 2; iZ++)
        for (size_t iT = 0; iT < 3; iT++)
            for (size_t iN = 0; iN < 5; iN++) {
                double lo = 0, hi = 0, rows = 0;
                for (int t = 1; t < L; t++) {
                    if (N1[iN] >= t + 1) continue;
                    double f = 1 / T1[iT];
                    if (z1[iZ] == MET_SSMAX) f *= log(t + 1.0) / log(1024.0);
                    quad_count(&lo, &hi, scores, vec, L, d, t, N1[iN], f);
                    rows += 1;
                }
                lo /= rows, hi /= rows;
                double sr = got[met_at_per_n(&ax, MET_SEP_RATIO, iN, iT, iZ)];
                CHECK(sr >= lo - 1e-12 && sr <= hi + 1e-12,
                      "sep_ratio shape %d %s T=%g N=%d (weights underflow): %.6f, quad referee "
                      "[%.6f, %.6f]", shape, met_normalizer_name(z1[iZ]), T1[iT], N1[iN], sr, lo, hi);
                if (iZ == 0 && T1[iT] == 0.1 && N1[iN] == 16)
                    CHECK(lo >= want_min, "shape %d: the referee counts %.6f at T = 0.1, N = 16, "
                          "not the case this test is about (>= %.3f)", shape, lo, want_min);
            }
    free(got);
}

static void test_sep_underflow(void) {
    test_sep_underflow_shape(0, 0.6);
    test_sep_underflow_shape(1, 0.9);
}

/* Exact twins straddling the cut (section 6.2): key 1 and key 2 have the same logit and the
 * same vector, N = 2 selects key 0 and key 1, key 2 is unselected, so D_1 = D_2 >= r and key 1
 * is outside by the strict <. Every other unselected key has a much smaller weight and a
 * vector orthogonal-ish to s^y, so key 2 decides r. Random vectors and logits over 200 heads
 * of one row each: the count must be exactly that of key 0 (g_0 < g_2 decided by a wide
 * margin) -- sep_ratio 0.5 -- in every one; a selected and an unselected g formed by two
 * different expressions round differently and count key 1 inside. */
static void test_twins_straddling(void) {
    enum { L = 6, d = 6 };
    float scores[L * L], vec[L * d];
    static const int32_t N1[] = {2};
    static const double T1[] = {1};
    static const met_normalizer z1[] = {MET_SOFTMAX};
    met_axes ax = {.N = N1, .n_N = 1, .T = T1, .n_T = 1, .norm = z1, .n_norm = 1, .seed = 9};
    int bad = 0;
    for (int h = 0; h < 200; h++) {
        for (int i = 0; i < L * L; i++) scores[i] = NAN;
        for (int i = 0; i < L * d; i++) vec[i] = (float)gs();
        memcpy(vec + 2 * d, vec + d, d * sizeof *vec);
        /* only the last row matters for N = 2 < n ... rows 2..5 all enter; give every row
         * the same shape: key 0 top, keys 1, 2 twins, keys 3.. 30 logits below */
        float l1 = (float)(-1 - ur());
        for (int t = 0; t < L; t++)
            for (int j = 0; j <= t; j++)
                scores[t * L + j] = j == 0 ? 0.0f : j <= 2 ? l1 : -30.0f - (float)ur();
        double *got = run_head(scores, vec, L, d, &ax);
        double *want = calloc(met_out_count(&ax), sizeof *want);
        ref_head(want, scores, L, vec, L, d, &ax);
        size_t at = met_at_per_n(&ax, MET_SEP_RATIO, 0, 0, 0);
        /* rows t = 2..5 (n > N); the twin decides r in each with t >= 2 */
        double sr = got[at];
        if (!(fabs(sr - want[at]) <= 1e-12)) bad++;
        if (bad == 1 && !(fabs(sr - want[at]) <= 1e-12))
            fprintf(stderr, "twins head %d: sep_ratio %.6f, brute force %.6f\n", h, sr, want[at]);
        free(got), free(want);
    }
    CHECK(bad == 0, "exact twins straddling the cut: %d of 200 heads counted by round-off", bad);
}

/* Twins at the top with N = 1 (section 6): keys 0 and 1 share the largest logit and the
 * vector, so s^y = a_0 y_0 = a_1 y_1 and r = |s^y - a_1 y_1| = 0 exactly (the radius's
 * explicit fallback); D_0 = 0 is not < 0, N_s = 0 in every row. The count is the direct
 * D-form's there (test_sep_fallback_margin); without it g_0 and g_1 (= -|s^y|^2) must come
 * from one expression: formed apart, 189 of the 800 cells counted key 0 inside. */
static void test_twins_top(void) {
    enum { L = 5, d = 7 };
    float scores[L * L], vec[L * d];
    static const int32_t N1[] = {1};
    static const double T1[] = {0.5, 3};
    static const met_normalizer z1[] = {MET_SOFTMAX, MET_SPARSEMAX};
    met_axes ax = {.N = N1, .n_N = 1, .T = T1, .n_T = 2, .norm = z1, .n_norm = 2, .seed = 4};
    int bad = 0;
    for (int h = 0; h < 200; h++) {
        for (int i = 0; i < L * d; i++) vec[i] = (float)(gs() * (1 + 10 * ur()));
        memcpy(vec + d, vec, d * sizeof *vec);
        for (int t = 0; t < L; t++)
            for (int j = 0; j < L; j++)
                scores[t * L + j] = j > t ? NAN : j <= 1 ? 2.0f : (float)(-3 * ur());
        double *got = run_head(scores, vec, L, d, &ax);
        for (size_t iT = 0; iT < 2; iT++)
            for (size_t iZ = 0; iZ < 2; iZ++) {
                double v = got[met_at_per_n(&ax, MET_SEP_RATIO, 0, iT, iZ)];
                if (v != 0 && bad++ == 0)
                    fprintf(stderr, "twins at the top: head %d T=%g %s: sep_ratio %g\n", h, T1[iT], met_normalizer_name(z1[iZ]), v);
            }
        free(got);
    }
    CHECK(bad == 0, "twins at the top, N = 1 (r = 0): %d of 800 cells count a token inside", bad);
}

/* D_i < r where the radius took its explicit fallback (section 6.2) and the rewrite's g has
 * no digits left for the margin. Keys 0 and 1 share the top (logits 0 and -eta, eta =
 * 1e-11 .. 4e-11, x_1 = -x_0 exactly), so their part of s^y cancels to a_0 (1 - e^-eta) y_0,
 * ~1e-11; key 2 (logit -12, a_2 ~ 3e-6) is selected too (N = 3), and key 3, one float step
 * below it with the same vector or one perturbed by 1e-7, is unselected: D_2 =
 * |a_0 y_0 + a_1 y_1| and r = |s^y - a_3 y_3| are both ~1e-11 while g = D^2 - |s^y|^2 carries
 * a rounding of ~1e-16 a_2 a_0 ~ 1e-22 against margins D^2 - r^2 of that size. The referee:
 * D_i and r as explicit differences in extended precision; a decision whose margin is below
 * 1e-6 r^2 may go either way. 200 heads: 18 were off with g alone. */
static void test_sep_fallback_margin(void) {
    enum { L = 8, d = 6 };
    float scores[L * L], vec[L * d];
    static const int32_t N1[] = {3};
    static const double T1[] = {1};
    static const met_normalizer z1[] = {MET_SOFTMAX};
    met_axes ax = {.N = N1, .n_N = 1, .T = T1, .n_T = 1, .norm = z1, .n_norm = 1, .seed = 2};
    int bad = 0, decided = 0, inside = 0;
    for (int h = 0; h < 200; h++) {
        for (int i = 0; i < L * d; i++) vec[i] = (float)gs();
        for (int k = 0; k < d; k++) vec[d + k] = -vec[k];
        memcpy(vec + 3 * d, vec + 2 * d, d * sizeof *vec);
        if (h % 2) vec[3 * d + h % d] *= 1 + 1e-7f; /* key 3 a near-twin of key 2 */
        float eta = (float)(1e-11 * (1 + 3 * ur()));
        for (int t = 0; t < L; t++)
            for (int j = 0; j < L; j++)
                scores[t * L + j] = j > t ? NAN : j == 0 ? 0.0f : j == 1 ? -eta
                                  : j == 2 ? -12.0f : j == 3 ? nextafterf(-12.0f, -INFINITY)
                                  : (float)(-40 - ur());
        double *got = run_head(scores, vec, L, d, &ax);
        /* rows t = 3..7 enter (n > N); each row's count from the referee */
        double lo = 0, hi = 0;
        for (int t = 3; t < L; t++) {
            int n = t + 1;
            refq z = 0, a[L], y[L][d], sy[d] = {0}, D2[L], lmax = 0;
            for (int j = 0; j < n; j++) z += REFQ_EXP((refq)scores[t * L + j] - lmax);
            for (int j = 0; j < n; j++) {
                a[j] = REFQ_EXP((refq)scores[t * L + j] - lmax) / z;
                refq nn = 0;
                for (int k = 0; k < d; k++) nn += (refq)vec[j * d + k] * vec[j * d + k];
                for (int k = 0; k < d; k++) y[j][k] = vec[j * d + k] / REFQ_SQRT(nn);
            }
            for (int j = 0; j < 3; j++) /* I_N = keys 0, 1, 2 (the logit order) */
                for (int k = 0; k < d; k++) sy[k] += a[j] * y[j][k];
            refq r2 = 1e30L;
            for (int j = 0; j < n; j++) {
                D2[j] = 0;
                for (int k = 0; k < d; k++) D2[j] += (sy[k] - a[j] * y[j][k]) * (sy[k] - a[j] * y[j][k]);
                if (j >= 3 && D2[j] < r2) r2 = D2[j];
            }
            for (int i = 0; i < 3; i++) {
                refq m = D2[i] - r2;
                lo += m < -1e-6L * r2, hi += m < 1e-6L * r2;
                decided += (m < -1e-6L * r2) || !(m < 1e-6L * r2);
                inside += m < 0 && i == 2;
            }
        }
        lo /= 3.0 * (L - 3), hi /= 3.0 * (L - 3);
        double sr = got[met_at_per_n(&ax, MET_SEP_RATIO, 0, 0, 0)];
        if (!(sr >= lo - 1e-12 && sr <= hi + 1e-12) && bad++ < 3)
            fprintf(stderr, "fallback margin head %d: sep_ratio %.6f, referee [%.6f, %.6f]\n", h,
                    sr, lo, hi);
        free(got);
    }
    CHECK(decided > 0.9 * 200 * 3 * (L - 3), "the referee decides %d of %d", decided, 200 * 3 * (L - 3));
    CHECK(inside > 100 && inside < 0.9 * 200 * (L - 3),
          "key 2 inside in %d of %d rows: both outcomes occur", inside, 200 * (L - 3));
    CHECK(bad == 0, "D_i < r after the radius's explicit fallback: %d of 200 heads off the "
          "extended-precision count", bad);
}

/* Section 6.1's xi_i for the dominant selected key, whose B = A - a_i cancels (one weight
 * 1 - w next to many tiny ones summing to w = 1e-12 .. 1e-7): `--dump-xi FILE` writes each
 * case's weights, delta, the walk's A and Q (summed in order, as met_head does) and
 * met_sep_xi's xi for tests/reference/sep_xi_mpmath.py, which recomputes every xi from the
 * exclusive sums at 50 digits (1e-11 relative; A - a_i is 1e-4 off at w = 1e-12, 2e-9 at
 * 1e-7). Also cases without a dominant key (softmax of random logits). delta <= 1 keeps
 * xi^2 = B^2 (1 - delta^2/2) + (delta^2/2) Q_i >= B^2 / 2: no cancellation of its own. */
static int dump_xi(const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return check_summary("test_metrics_audit --dump-xi");
    static const double tiny_total[] = {1e-12, 1e-9, 1e-7};
    static const int M_tiny[] = {1, 4, 31, 100};
    static const double deltas[] = {0, 0.5, 1};
    double sa[128], xi[128];
    int cases = 0;
    for (int kind = 0; kind < 3 * 4 + 6; kind++)
        for (int id = 0; id < 3; id++) {
            int N;
            if (kind < 12) { /* dominant weight 1 - w and M tiny ones (at a position by kind) */
                double w = tiny_total[kind % 3], sum = 0;
                int M = M_tiny[kind / 3];
                N = M + 1;
                for (int q = 0; q < M; q++) sa[q + 1] = ur(), sum += sa[q + 1];
                for (int q = 0; q < M; q++) sa[q + 1] *= w / sum;
                sa[0] = 1 - w;
                int at = (kind / 3) % 2 ? M / 2 : 0; /* dominant first or in the middle */
                double t = sa[at]; sa[at] = sa[0], sa[0] = t;
            } else { /* softmax of random logits: no key, or one, above A / 2 by chance */
                N = 2 + 7 * (kind - 12);
                double z = 0, sc = 0.5 + kind - 12;
                for (int q = 0; q < N; q++) sa[q] = exp(sc * gs()), z += sa[q];
                for (int q = 0; q < N; q++) sa[q] /= z;
            }
            double A = 0, Q = 0;
            for (int q = 0; q < N; q++) A += sa[q], Q += sa[q] * sa[q];
            met_sep_xi(xi, sa, (size_t)N, A, Q, deltas[id]);
            fprintf(f, "case %d %.17g %.17g %.17g\n", N, deltas[id], A, Q);
            for (int q = 0; q < N; q++) fprintf(f, "%.17g%c", sa[q], q + 1 < N ? ' ' : '\n');
            for (int q = 0; q < N; q++) fprintf(f, "%.17g%c", xi[q], q + 1 < N ? ' ' : '\n');
            cases++;
        }
    fclose(f);
    CHECK(cases == 54, "%d cases written", cases);
    return check_summary("test_metrics_audit --dump-xi");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump-xi")) return dump_xi(argv[2]);
    test_grad_fd_tiny_changes();
    test_aggregate_cancel();
    test_sep_underflow();
    test_twins_straddling();
    test_twins_top();
    test_sep_fallback_margin();
    return check_summary("test_metrics_audit");
}
