/* test_metrics_regimes.c -- the audit's findings: heads built directly as
 * kernel inputs in regimes no model here reaches, every metric against the float64 brute force
 * of metrics_ref.h (explicit differences, sep_ratio by the exact rewrite, entropy and grad_fd
 * in quad precision), every invariant per row, prefix cuts against separate passes.
 *
 * Regimes: an attention sink (key 0's logit 10-40 above the rest, small value norm, as in
 * GPT-2), the same with raw logits of magnitude 50-500, a GPT-2-like head (50-99% sink mass at
 * T = 8), large logits without a sink, value vectors of norm ~100 differing by 1e-3 relative,
 * exact duplicate vectors with tied logits (twins: same logit and same vector on both sides
 * of the cut), one selected token so dominant that s ~ a_i x_i, zero vectors (the sink's
 * among them), every vector identical or identical to 1e-7 under uniform attention (the Gram
 * expansions cancel completely: dist_true, dist_expect, d1, delta, r are 0 or tiny). Axes: N 1..16, T 1e-3..100, eps 1e-3, 0.1, 10, every normalizer, both row
 * modes, three cuts.
 *
 * Tolerances (what the kernel documents, not what it happens to reach):
 *   dist_true, dist_bound, dist_expect   1e-8 relative (metrics.h: the guarded Gram expansion
 *                                        keeps ~1e-8 relative) + 1e-13 max|x| (the brute
 *                                        force's own floor: its sums of n vectors round at
 *                                        ~n ulp |x|; the unguarded expansion gave 1e-8 |x|)
 *   sep_ratio, sep_marginal              inside the reference's band (metrics_ref.h)
 *   sep_lower, sep_upper                 1e-8 relative + 1e-10
 *   entropy, entropy_norm                1e-10 relative (no absolute slack: 1e-16 nats count)
 *   grad_exact                           1e-6 relative + 1e-12 (section 7; Jacobi's floor)
 *   grad_fd                              1e-8 relative (no absolute slack: the floor
 *                                        ulp(max a) / eps is what is tested)
 * Options: --dump-rows FILE writes a few sink rows (logits, vectors, N, T, the brute force's
 * N_s and marginal count) for tests/reference/sep_mpmath.py; --save FILE / --compare FILE
 * write / compare every output double (the FMA vs no-FMA build check, metrics_fma_agree). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"
#include "metrics_ref.h"

static unsigned long long rng_state = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

enum { R_SINK, R_SINK_RAW, R_GPT2LIKE, R_BIGLOGIT, R_NEARDUP, R_TWINS, R_DOMINANT, R_ZERO,
       R_SAME, R_NEARSAME, R_COUNT };
static const char *regime_name[R_COUNT] = {"sink",    "sink-raw-logits", "gpt2-like",
                                           "logits-50-500", "near-dup-1e-3", "twins-ties",
                                           "dominant", "zero-vectors", "identical-uniform",
                                           "near-identical-1e-7"};

/* scores [L][L] (NaN above the diagonal: never read), vectors [L][d] */
static void make_regime(float *scores, float *vec, int L, int d, int kind) {
    for (int i = 0; i < L * d; i++) vec[i] = (float)gauss();
    double *base = malloc(d * sizeof *base);
    for (int k = 0; k < d; k++) base[k] = gauss() / sqrt((double)d);
    for (int t = 0; t < L; t++)
        for (int j = 0; j < L; j++) {
            double v = 1.5 * gauss();
            switch (kind) {
            case R_SINK: v = j == 0 ? 10 + 30 * urand() + 3 : v; break;
            case R_SINK_RAW: v = 100 * gauss() + (j == 0 ? 300 + 40 * urand() : 0); break;
            case R_GPT2LIKE: v = 8 * gauss() + (j == 0 ? 8 * (log(t + 1.0) + 1 + 3 * urand()) : 0); break;
            case R_BIGLOGIT: v = (urand() < 0.5 ? -1 : 1) * (50 + 450 * urand()); break;
            case R_NEARDUP: v = 2 * gauss(); break;
            case R_TWINS: v = round(gauss()); break; /* many tied logits */
            case R_DOMINANT: v = j == (t * 3) % (t + 1) ? 60 + v : v; break;
            case R_ZERO: v = j == 0 ? 15 + v : v; break;
            case R_SAME: case R_NEARSAME: v = 0.5; break; /* uniform attention */
            }
            scores[t * L + j] = j <= t ? (float)v : NAN;
        }
    for (int i = 0; i < L; i++) {
        float *x = vec + i * d;
        if ((kind == R_SINK || kind == R_SINK_RAW || kind == R_GPT2LIKE) && i == 0)
            for (int k = 0; k < d; k++) x[k] *= 0.02f; /* the sink's small value norm */
        if (kind == R_NEARDUP) /* norm ~100, differing by ~1e-3 relative */
            for (int k = 0; k < d; k++) x[k] = (float)(100 * base[k] * sqrt((double)d) / 1.0 +
                                                       0.1 * gauss() / sqrt((double)d));
        if (kind == R_TWINS && i >= 2) /* pairs of identical vectors with identical logits */
            if (i % 2 == 1) memcpy(x, x - d, d * sizeof *x);
        if (kind == R_ZERO && i % 3 == 0) memset(x, 0, d * sizeof *x);
        /* every vector the same (N = 1: dist_true = dist_expect = delta = d1 = r = 0
         * exactly), or the same to 1e-7 relative: the Gram expansions cancel entirely */
        if (kind == R_SAME)
            for (int k = 0; k < d; k++) x[k] = (float)(3 * base[k]);
        if (kind == R_NEARSAME)
            for (int k = 0; k < d; k++) x[k] = (float)(3 * base[k]) * (1 + 1e-7f * (float)gauss());
    }
    if (kind == R_TWINS) /* tied logits for the twins: key i copies key i-1's logit */
        for (int t = 0; t < L; t++)
            for (int j = 3; j <= t; j += 2) scores[t * L + j] = scores[t * L + j - 1];
    free(base);
}

static const int32_t Ns[] = {1, 2, 4, 8, 16};
static const double Ts[] = {1e-3, 1e-2, 0.1, 1, 8, 100};
static const double epss[] = {1e-3, 1e-1, 10};
static const met_normalizer norms_paper[] = {MET_SOFTMAX, MET_SPARSEMAX, MET_SSMAX};
/* --normalizers new: the five of docs/metrics.md section 10.1 instead (a ctest of its own) */
static const met_normalizer norms_new[] = {MET_SA_SOFTMAX, MET_SA_SOFTMAX_NORM, MET_ENTMAX15,
                                           MET_SIGMOID, MET_SOFTMAX1};
/* --normalizers params: entmax at alpha = 1.25 (the long-double bisection reference) and
 * sigmoid with a configured bias, the two parameters of section 10.1 */
static const met_normalizer norms_params[] = {MET_ENTMAX15, MET_SIGMOID};
static const met_normalizer *norms = norms_paper;
static size_t n_norms = 3;
static double entmax_alpha = 0, sigmoid_bias = 0;
static int sigmoid_bias_set = 0;
enum { L_REG = 34, D_REG = 8 };

static const char *per_n_name[MET_NPERN] = {"dist_true", "dist_bound", "dist_expect",
                                            "sep_ratio", "sep_lower", "sep_upper",
                                            "sep_marginal", "rows_used"};
static const char *per_t_name[MET_NPERT] = {"entropy", "entropy_norm", "grad_exact", "grad_bound"};

/* worst error per variable over every case, in units of its tolerance */
static double worst_rel[MET_NPERN + MET_NPERT + 1];
static char worst_where[MET_NPERN + MET_NPERT + 1][256];

static void note(int v, double err, const char *label) {
    if (err > worst_rel[v]) {
        worst_rel[v] = err;
        snprintf(worst_where[v], sizeof worst_where[v], "%s", label);
    }
}

/* |got - want| against abs + rel |want|; records the relative error (want != 0) */
static void close_to(double got, double want, double abs_tol, double rel_tol, int v,
                     const char *label) {
    int ok = (isnan(got) && isnan(want)) || fabs(got - want) <= abs_tol + rel_tol * fabs(want);
    CHECK(ok, "%s: got %.17g want %.17g (|diff| %.3g)", label, got, want, fabs(got - want));
    /* the relative error where it means something: above the absolute floor */
    if (!isnan(want) && fabs(want) > 100 * abs_tol && want != 0)
        note(v, fabs(got - want) / fabs(want), label);
}

static void compare(const double *got, const double *want, const met_axes *ax, double xmax,
                    const char *what) {
    char label[200];
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++)
                for (int v = 0; v < MET_NPERN; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    snprintf(label, sizeof label, "%s %s N=%d T=%g %s", what, per_n_name[v],
                             ax->N[iN], ax->T[iT], met_normalizer_name(ax->norm[iZ]));
                    if (v == MET_SEP_RATIO || v == MET_SEP_MARGINAL) {
                        if (isnan(want[at])) {
                            CHECK(isnan(got[at]), "%s: got %g want NaN", label, got[at]);
                            continue;
                        }
                        CHECK(got[at] >= ref_lo[at] - 1e-12 && got[at] <= ref_hi[at] + 1e-12,
                              "%s: got %.10g outside the reference's band [%.10g, %.10g] "
                              "(plain count %.10g)", label, got[at], ref_lo[at], ref_hi[at],
                              want[at]);
                        note(v, fabs(got[at] - want[at]), label);
                    } else if (v == MET_ROWS_USED) {
                        CHECK(got[at] == want[at], "%s: %g vs %g", label, got[at], want[at]);
                    } else if (v == MET_SEP_LOWER || v == MET_SEP_UPPER) {
                        close_to(got[at], want[at], 1e-10, 1e-8, v, label);
                    } else {
                        close_to(got[at], want[at], 1e-13 * xmax, 1e-8, v, label);
                    }
                }
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                snprintf(label, sizeof label, "%s %s T=%g %s", what, per_t_name[v], ax->T[iT],
                         met_normalizer_name(ax->norm[iZ]));
                if (v == MET_GRAD_EXACT)
                    close_to(got[at], want[at], 1e-12, 1e-6, MET_NPERN + v, label);
                else
                    close_to(got[at], want[at], 0, 1e-10, MET_NPERN + v, label);
            }
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                snprintf(label, sizeof label, "%s grad_fd T=%g eps=%g %s", what, ax->T[iT],
                         ax->eps[iE], met_normalizer_name(ax->norm[iZ]));
                close_to(got[at], want[at], 0, 1e-8, MET_NPERN + MET_NPERT, label);
            }
        }
}

static met_axes regime_axes(int full) {
    met_axes ax = {.N = Ns, .n_N = 5, .T = Ts, .n_T = 6, .eps = epss, .n_eps = 3, .norm = norms,
                   .n_norm = n_norms, .entmax_alpha = entmax_alpha,
                   .sigmoid_bias_set = sigmoid_bias_set, .sigmoid_bias = sigmoid_bias, .full_row = full, .seed = 16, .window = 1, .layer = 2,
                   .head = 3};
    return ax;
}

static double max_norm(const float *vec, int L, int d) {
    double mx = 0;
    for (int i = 0; i < L; i++) {
        double s = 0;
        for (int k = 0; k < d; k++) s += (double)vec[i * d + k] * vec[i * d + k];
        mx = sqrt(s) > mx ? sqrt(s) : mx;
    }
    return mx;
}

/* every regime, both row modes, three cuts, against the brute force; also saves every
 * output double (save) or compares them with another build's (cmp) */
static void test_regimes(FILE *save, FILE *cmp) {
    const int L = L_REG, d = D_REG;
    float *scores = malloc(L * L * sizeof *scores), *vec = malloc(L * d * sizeof *vec);
    long ncmp = 0, cmp_bad = 0;
    double cmp_worst = 0;
    for (int kind = 0; kind < R_COUNT; kind++) {
        make_regime(scores, vec, L, d, kind);
        double xmax = max_norm(vec, L, d);
        for (int mode = 0; mode < 4; mode++) {
            int full = mode & 1; /* rows x metrics.distance */
            met_axes ax = regime_axes(full);
            ax.aggregate = mode >> 1;
            size_t cuts[3] = {L / 2, 3 * L / 4, L}, nout = met_out_count(&ax);
            size_t wsb = met_workspace_bytes(L, d, &ax);
            void *ws = malloc(wsb);
            double *got = malloc(3 * nout * sizeof *got), *want = malloc(nout * sizeof *want);
            as_err err;
            CHECK(met_head(got, ws, wsb, scores, L, vec, L, d, cuts, 3, &ax, &err) == 0,
                  "met_head: %s", err.msg);
            for (int c = 0; c < 3; c++) {
                ref_head(want, scores, L, vec, (int)cuts[c], d, &ax);
                char what[96];
                snprintf(what, sizeof what, "%s %s %s cut=%zu", regime_name[kind],
                         full ? "full_row" : "visible", ax.aggregate ? "aggregate" : "per_token",
                         cuts[c]);
                compare(got + c * nout, want, &ax, xmax, what);
            }
            if (save) fwrite(got, sizeof *got, 3 * nout, save);
            if (cmp) { /* another build (no FMA): equal to round-off, counts within marginal */
                double *other = malloc(3 * nout * sizeof *other);
                CHECK(fread(other, sizeof *other, 3 * nout, cmp) == 3 * nout, "short --compare file");
                for (int c = 0; c < 3; c++)
                    for (size_t iN = 0; iN < ax.n_N; iN++)
                        for (size_t iT = 0; iT < ax.n_T; iT++)
                            for (size_t iZ = 0; iZ < ax.n_norm; iZ++) {
                                const double *g = got + c * nout, *o = other + c * nout;
                                size_t at = met_at_per_n(&ax, MET_SEP_RATIO, iN, iT, iZ);
                                size_t am = met_at_per_n(&ax, MET_SEP_MARGINAL, iN, iT, iZ);
                                double mg = g[am] > o[am] ? g[am] : o[am];
                                if (!(fabs(g[at] - o[at]) <= mg + 1e-12) && !isnan(g[at])) {
                                    if (cmp_bad < 5)
                                        fprintf(stderr, "%s cut %d N=%d T=%g: sep_ratio %.6g vs %.6g (marginal %.3g)\n",
                                                regime_name[kind], c, Ns[iN], Ts[iT], g[at], o[at], mg);
                                    cmp_bad++;
                                }
                            }
                for (size_t i = 0; i < 3 * nout; i++) {
                    double g = got[i], o = other[i];
                    ncmp++;
                    if (isnan(g) && isnan(o)) continue;
                    double rel = fabs(g - o) / (fabs(o) > 1e-300 ? fabs(o) : 1);
                    /* the counting variables are compared above */
                    size_t per = nout, in_n = MET_NPERN * ax.n_N * ax.n_T * ax.n_norm;
                    size_t k = i % per;
                    double floor_ = 0; /* the absolute floors of the brute-force comparison */
                    if (k < in_n) {
                        int v = (int)(k / (ax.n_N * ax.n_T * ax.n_norm));
                        if (v == MET_SEP_RATIO || v == MET_SEP_MARGINAL) continue;
                        floor_ = v <= MET_DIST_EXPECT ? 1e-13 * xmax : 1e-14;
                    }
                    if (fabs(g - o) <= floor_) continue;
                    if (rel > cmp_worst) cmp_worst = rel;
                    if (!(rel <= 1e-9)) cmp_bad++;
                }
                free(other);
            }
            free(ws), free(got), free(want);
        }
    }
    if (cmp) {
        printf("FMA vs no-FMA: %ld doubles, worst relative difference %.3g above the absolute "
               "floors (counts within sep_marginal), %ld beyond tolerance\n", ncmp, cmp_worst,
               cmp_bad);
        CHECK(cmp_bad == 0, "%ld outputs differ between the builds", cmp_bad);
    }
    free(scores), free(vec);
}

/* per-row invariants of docs/metrics.md (sections 4, 6, 7, 8) in every regime: with a cut at
 * every length, row t's value is (sum over rows < t+1) - (sum over rows < t) */
static void test_invariants(void) {
    const int L = L_REG, d = D_REG;
    float *scores = malloc(L * L * sizeof *scores), *vec = malloc(L * d * sizeof *vec);
    met_axes ax = regime_axes(0);
    size_t nout = met_out_count(&ax), cuts[L_REG];
    for (int c = 0; c < L; c++) cuts[c] = (size_t)c + 1;
    size_t wsb = met_workspace_bytes(L, d, &ax);
    void *ws = malloc(wsb);
    double *out = malloc(L * nout * sizeof *out);
    long checked = 0, bad = 0;
    for (int kind = 0; kind < R_COUNT; kind++) {
        make_regime(scores, vec, L, d, kind);
        double xmax = max_norm(vec, L, d); /* the bound's own rounding: ((n-N)A - U) m */
        CHECK(met_head(out, ws, wsb, scores, L, vec, L, d, cuts, L, &ax, NULL) == 0, "run");
        for (int t = 1; t < L; t++) {
            const double *cur = out + t * nout, *prev = out + (t - 1) * nout;
            for (size_t iT = 0; iT < ax.n_T; iT++)
                for (size_t iZ = 0; iZ < ax.n_norm; iZ++) {
                    double T = Ts[iT];
#define ROW_T(var) (cur[met_at_per_t(&ax, var, iT, iZ)] * t - \
                    (t > 1 ? prev[met_at_per_t(&ax, var, iT, iZ)] * (t - 1) : 0))
                    double en = ROW_T(MET_ENTROPY_NORM), ge = ROW_T(MET_GRAD_EXACT);
                    int ok = en >= -1e-9 && en <= 1 + 1e-9;
                    if (norms[iZ] == MET_SOFTMAX) ok &= ge <= (1 + 1e-9) / (2 * T);
                    /* section 10.1: sigmoid's Jacobian is at most 1/(4T); softmax1's is a
                     * principal submatrix of a softmax Jacobian, at most 1/(2T); entmax's,
                     * diag(s) minus a positive rank-one term, at most max s / T <= 1/T */
                    if (norms[iZ] == MET_SIGMOID) ok &= ge <= (1 + 1e-9) / (4 * T);
                    if (norms[iZ] == MET_SOFTMAX1) ok &= ge <= (1 + 1e-9) / (2 * T);
                    if (norms[iZ] == MET_ENTMAX15) ok &= ge <= (1 + 1e-9) / T;
                    if (!ok && bad < 5)
                        fprintf(stderr, "%s row %d T=%g %s: entropy_norm %g grad_exact %g\n",
                                regime_name[kind], t, T, met_normalizer_name(norms[iZ]), en, ge);
                    for (size_t iN = 0; iN < ax.n_N; iN++) {
                        double used = cur[met_at_per_n(&ax, MET_ROWS_USED, iN, iT, iZ)];
                        double pused = prev[met_at_per_n(&ax, MET_ROWS_USED, iN, iT, iZ)];
                        if (used == pused) continue;
#define ROW_N(var) (cur[met_at_per_n(&ax, var, iN, iT, iZ)] * used - \
                    (pused > 0 ? prev[met_at_per_n(&ax, var, iN, iT, iZ)] * pused : 0))
                        double dt = ROW_N(MET_DIST_TRUE), db = ROW_N(MET_DIST_BOUND);
                        double sr = ROW_N(MET_SEP_RATIO), sm = ROW_N(MET_SEP_MARGINAL);
                        double sl = ROW_N(MET_SEP_LOWER), su = ROW_N(MET_SEP_UPPER);
                        double tol = 1e-9 * used;
                        /* slack: the rounding of the differenced sums only (a sink row's bound
                         * can be 1e-60, so no absolute slack beyond that) */
                        double mag = 0;
                        for (int v = MET_DIST_TRUE; v <= MET_DIST_BOUND; v++)
                            mag += fabs(cur[met_at_per_n(&ax, v, iN, iT, iZ)] * used) +
                                   fabs(pused > 0 ? prev[met_at_per_n(&ax, v, iN, iT, iZ)] * pused : 0);
                        /* section 10.1: sa_softmax's negative weights void the bound */
                        int bok = norms[iZ] == MET_SA_SOFTMAX ||
                                  dt <= db + 1e-9 * fabs(db) + 1e-13 * mag + 1e-13 * xmax;
                        int rok = bok &&
                                  sr >= -tol && sr <= 1 + tol && sm >= -tol && sm <= 1 + tol &&
                                  sl >= -tol && sl <= 1 + tol && su >= -tol && su <= 1 + tol;
                        if (!rok && bad < 5)
                            fprintf(stderr, "%s row %d N=%d T=%g %s: dist %g <= bound %g? "
                                    "sep %g marginal %g lower %g upper %g\n",
                                    regime_name[kind], t, Ns[iN], T,
                                    met_normalizer_name(norms[iZ]), dt, db, sr, sm, sl, su);
                        bad += !rok;
                        checked++;
                    }
                    bad += !ok;
                    checked++;
                }
        }
    }
    printf("invariants: %ld (row, N, T, normalizer) checks in %d regimes\n", checked, R_COUNT);
    CHECK(bad == 0, "%ld invariant violations", bad);
    free(scores), free(vec), free(ws), free(out);
}

/* The unselected mass is summed, not 1 - A, in the case where the bound is an equality. One
 * row decides the means (N = L - 1 leaves only the last row, n = N + 1): every selected
 * vector zero (m = 0), the one unselected key `gap` logits below: dist_true = U |x_u| and
 * dist_bound = U d1 = U |x_u| exactly, in both readings. 1 - A carries A's rounding (~1e-16)
 * into U: at gap 15-25 (U ~ 1e-7 .. 1e-11) that puts the bound up to ~1e-6 relative below
 * dist_true, from gap ~37 on 1 - A is 0 and so was the bound. */
static void test_bound_tiny_unselected(void) {
    enum { L = 6, d = 4 };
    float scores[L * L], vec[L * d];
    static const int32_t N1[] = {L - 1};
    static const double T1[] = {1, 0.5};
    static const met_normalizer n1[] = {MET_SOFTMAX, MET_SSMAX};
    static const int gaps[] = {15, 18, 20, 23, 25, 30, 40, 50, 60};
    double worst = 0;
    for (size_t ig = 0; ig < sizeof gaps / sizeof *gaps; ig++) {
        int gap = gaps[ig];
        memset(vec, 0, sizeof vec);
        for (int k = 0; k < d; k++) vec[(L - 1) * d + k] = (float)(1 + k);
        for (int t = 0; t < L; t++)
            for (int j = 0; j < L; j++)
                scores[t * L + j] = j > t ? NAN : (float)(j == L - 1 ? -gap : 0.1 * j);
        for (int aggregate = 0; aggregate < 2; aggregate++) {
            met_axes ax = {.N = N1, .n_N = 1, .T = T1, .n_T = 2, .norm = n1, .n_norm = 2,
                           .seed = 1, .aggregate = aggregate};
            size_t cut = L, nout = met_out_count(&ax), wsb = met_workspace_bytes(L, d, &ax);
            void *ws = malloc(wsb);
            double *out = malloc(nout * sizeof *out);
            CHECK(met_head(out, ws, wsb, scores, L, vec, L, d, &cut, 1, &ax, NULL) == 0, "run");
            for (size_t iT = 0; iT < 2; iT++)
                for (size_t iZ = 0; iZ < 2; iZ++) {
                    double dt = out[met_at_per_n(&ax, MET_DIST_TRUE, 0, iT, iZ)];
                    double db = out[met_at_per_n(&ax, MET_DIST_BOUND, 0, iT, iZ)];
                    double ex = dt > 0 ? (dt - db) / dt : 0;
                    worst = ex > worst ? ex : worst;
                    CHECK(dt > 0 && db >= dt * (1 - 1e-12),
                          "gap %d T=%g %s %s: dist_true %.17g > dist_bound %.17g, %.3g relative "
                          "(unselected mass as 1 - A?)", gap, T1[iT], met_normalizer_name(n1[iZ]),
                          aggregate ? "aggregate" : "per_token", dt, db, ex);
                }
            free(ws), free(out);
        }
    }
    printf("bound equality: dist_true exceeds dist_bound by at most %.3g relative\n", worst);
}

/* prefix cuts equal separate passes in these regimes (counts within the
 * marginal share, the rest to round-off: G of a longer pass may differ in its last bits) */
static void test_prefix_vs_separate(void) {
    const int L = L_REG, d = D_REG;
    float *scores = malloc(L * L * sizeof *scores), *vec = malloc(L * d * sizeof *vec);
    long bad = 0, cmpd = 0;
    double worst = 0;
    for (int kind = 0; kind < R_COUNT; kind++) {
        make_regime(scores, vec, L, d, kind);
        for (int full = 0; full < 2; full++) {
            met_axes ax = regime_axes(full);
            size_t cuts[4] = {5, 17, 26, L}, nout = met_out_count(&ax);
            size_t wsb = met_workspace_bytes(L, d, &ax);
            void *ws = malloc(wsb);
            double *all = malloc(4 * nout * sizeof *all), *one = malloc(nout * sizeof *one);
            CHECK(met_head(all, ws, wsb, scores, L, vec, L, d, cuts, 4, &ax, NULL) == 0, "cuts");
            for (int c = 0; c < 4; c++) {
                size_t Lc = cuts[c], c1 = Lc;
                CHECK(met_head(one, ws, wsb, scores, L, vec, Lc, d, &c1, 1, &ax, NULL) == 0, "one");
                const double *g = all + c * nout;
                for (size_t i = 0; i < nout; i++) {
                    if (isnan(g[i]) && isnan(one[i])) continue;
                    cmpd++;
                    double diff = fabs(g[i] - one[i]);
                    size_t in_n = MET_NPERN * ax.n_N * ax.n_T * ax.n_norm;
                    int v = i < in_n ? (int)(i / (ax.n_N * ax.n_T * ax.n_norm)) : -1;
                    if (v == MET_SEP_RATIO || v == MET_SEP_MARGINAL) {
                        size_t rest = i % (ax.n_N * ax.n_T * ax.n_norm);
                        size_t am = (size_t)MET_SEP_MARGINAL * ax.n_N * ax.n_T * ax.n_norm + rest;
                        double mg = g[am] > one[am] ? g[am] : one[am];
                        if (!(diff <= mg + 1e-12)) {
                            if (bad < 5)
                                fprintf(stderr, "%s %s cut %zu: %s %.6g vs separate %.6g (marginal %.3g)\n",
                                        regime_name[kind], full ? "full_row" : "visible", Lc,
                                        per_n_name[v], g[i], one[i], mg);
                            bad++;
                        }
                        continue;
                    }
                    double rel = diff / (fabs(one[i]) > 1e-300 ? fabs(one[i]) : 1);
                    worst = rel > worst ? rel : worst;
                    /* sep_lower, sep_upper live in [0, 1]: 1e-14 absolute is their round-off
                     * (sep_lower = 1 - xi / (N r) cancels to 0 in the identical heads) */
                    int in01 = v == MET_SEP_LOWER || v == MET_SEP_UPPER;
                    if (!(rel <= 1e-9 || (in01 && diff <= 1e-14))) {
                        if (bad < 5)
                            fprintf(stderr, "%s %s cut %zu: output %zu %.17g vs separate %.17g\n",
                                    regime_name[kind], full ? "full_row" : "visible", Lc, i,
                                    g[i], one[i]);
                        bad++;
                    }
                }
            }
            free(ws), free(all), free(one);
        }
    }
    printf("prefix cuts vs separate passes: %ld values, worst relative difference %.3g\n", cmpd, worst);
    CHECK(bad == 0, "%ld values of a prefix cut differ from a separate pass", bad);
    free(scores), free(vec);
}

/* a few sink rows for tests/reference/sep_mpmath.py: the row's logits and vectors exactly (as
 * float32, %.9g round-trips), T, N, and the brute force's N_s and marginal count */
static void dump_rows(const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    const int L = L_REG, d = D_REG;
    float *scores = malloc(L * L * sizeof *scores), *vec = malloc(L * d * sizeof *vec);
    static const int kinds[] = {R_SINK, R_SINK_RAW, R_GPT2LIKE, R_TWINS};
    static const double dT[] = {0.1, 1, 8};
    static const int dN[] = {4, 8, 16};
    int nrows = 0;
    for (size_t kk = 0; kk < sizeof kinds / sizeof kinds[0]; kk++) {
        make_regime(scores, vec, L, d, kinds[kk]);
        for (int t = L - 6; t < L; t += 2) {
            int n = t + 1;
            for (size_t iT = 0; iT < 3; iT++)
                for (size_t iN = 0; iN < 3; iN++) {
                    int N = dN[iN];
                    double *l = malloc(n * sizeof *l), *z = malloc(n * sizeof *z),
                           *a = malloc(n * sizeof *a), *Y = malloc(n * d * sizeof *Y),
                           *s = malloc(d * sizeof *s), *g = malloc(n * sizeof *g);
                    int *ord = malloc(n * sizeof *ord), *insel = calloc(n, sizeof *insel);
                    double lmax = -INFINITY;
                    for (int j = 0; j < n; j++) l[j] = scores[t * L + j], lmax = l[j] > lmax ? l[j] : lmax;
                    for (int j = 0; j < n; j++) z[j] = (l[j] - lmax) / dT[iT];
                    ref_softmax(a, z, n);
                    for (int j = 0; j < n; j++) ord[j] = j;
                    for (int i = 1; i < n; i++)
                        for (int j = i; j > 0 && l[ord[j]] > l[ord[j - 1]]; j--) {
                            int tt = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = tt;
                        }
                    for (int q = 0; q < N; q++) insel[ord[q]] = 1;
                    for (int i = 0; i < n; i++) {
                        double nn = 0;
                        for (int k = 0; k < d; k++) nn += (double)vec[i * d + k] * vec[i * d + k];
                        nn = sqrt(nn);
                        for (int k = 0; k < d; k++) Y[i * d + k] = nn > 0 ? vec[i * d + k] / nn : 0;
                    }
                    int Ns_, Nm, a1, a2, a3, a4;
                    double r;
                    ref_sep_row(&Ns_, &Nm, &r, &a1, &a2, &a3, &a4, a, Y, insel, n, d, s, g);
                    /* the plain float64 comparison D_i < r, for contrast */
                    int plain = 0;
                    for (int i = 0; i < n; i++)
                        if (insel[i]) plain += norm_diff(Y + i * d, s, a[i], 1, d) < r;
                    fprintf(f, "row %s %d %d %d %.17g %d %d %d\n", regime_name[kinds[kk]], n, d, N,
                            dT[iT], Ns_, Nm, plain);
                    for (int j = 0; j < n; j++) fprintf(f, "%.9g ", (double)scores[t * L + j]);
                    fprintf(f, "\n");
                    for (int j = 0; j < n * d; j++) fprintf(f, "%.9g ", (double)vec[j]);
                    fprintf(f, "\n");
                    nrows++;
                    free(l), free(z), free(a), free(Y), free(s), free(g), free(ord), free(insel);
                }
        }
    }
    fclose(f);
    free(scores), free(vec);
    printf("dumped %d rows to %s\n", nrows, path);
}

int main(int argc, char **argv) {
    FILE *save = NULL, *cmp = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dump-rows")) {
            dump_rows(argv[i + 1]);
            return check_summary("test_metrics_regimes --dump-rows");
        }
        if (!strcmp(argv[i], "--normalizers") && !strcmp(argv[i + 1], "new")) {
            norms = norms_new, n_norms = 5;
            continue;
        }
        if (!strcmp(argv[i], "--normalizers") && !strcmp(argv[i + 1], "params")) {
            norms = norms_params, n_norms = 2;
            entmax_alpha = 1.25, sigmoid_bias_set = 1, sigmoid_bias = 1.5;
            continue;
        }
        if (!strcmp(argv[i], "--save")) save = fopen(argv[i + 1], "wb");
        if (!strcmp(argv[i], "--compare")) cmp = fopen(argv[i + 1], "rb");
        CHECK(save || cmp, "cannot open %s", argv[i + 1]);
    }
    test_regimes(save, cmp);
    if (save) fclose(save);
    if (cmp) fclose(cmp);
    if (!save && !cmp) {
        test_invariants();
        test_bound_tiny_unselected();
        test_prefix_vs_separate();
    }
    printf("worst relative error vs the brute force where |value| > 100x the absolute floor "
           "(sep_ratio, sep_marginal: count difference to the plain rewrite count, inside "
           "the tie band):\n");
    for (int v = 0; v < MET_NPERN + MET_NPERT + 1; v++) {
        const char *nm = v < MET_NPERN ? per_n_name[v]
                         : v < MET_NPERN + MET_NPERT ? per_t_name[v - MET_NPERN] : "grad_fd";
        printf("  %-13s %.3g  %s\n", nm, worst_rel[v], worst_where[v]);
    }
    return check_summary("test_metrics_regimes");
}
