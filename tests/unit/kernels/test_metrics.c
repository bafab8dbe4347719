/* test_metrics.c -- every metric of metrics.md sections 4, 6, 7, 8, 9 against a brute-force
 * evaluation of its definition written here independently (double, O(n^2 d) and worse,
 * no Gram matrix, sort-based sparsemax, Jacobi eigenvalues for grad_exact), on random heads
 * of several sizes in both row modes, with ties, n = N + 1 rows, one-hot and uniform
 * attention, T in {1e-3, 8, 100}, every normalizer, and several prefix cuts. Then: prefix
 * cuts equal separate passes, the analytic grad_exact cases, the top-N tie rule, sparsemax's
 * exact zeros, and the direction generator. Invariants are in test_metrics_props.c. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"
#include "metrics_ref.h"

static unsigned long long rng_state = 88172645463325252ull;
static double urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

/* the reference pieces and ref_head: metrics_ref.h */

/* ---------------- inputs ---------------- */

enum { IN_RANDOM, IN_TIES, IN_ONEHOT, IN_UNIFORM, IN_DUPVEC };
static const char *in_name[] = {"random", "ties", "onehot", "uniform", "dupvec"};

/* scores [L][L] = q.k (NaN above the diagonal, which must never be read), vectors [L][d] */
static void make_head(float *scores, float *vec, int L, int d, int kind) {
    int dq = 6;
    double *q = malloc((size_t)L * dq * sizeof *q), *k = malloc((size_t)L * dq * sizeof *k);
    for (int i = 0; i < L * dq; i++) q[i] = 1.5 * gauss(), k[i] = 1.5 * gauss();
    for (int t = 0; t < L; t++)
        for (int j = 0; j < L; j++) {
            double v = 0;
            for (int c = 0; c < dq; c++) v += q[t * dq + c] * k[j * dq + c];
            if (kind == IN_TIES) v = round(v / 4); /* few distinct logits: many ties */
            if (kind == IN_ONEHOT) v = (j == (t * 7) % (t + 1)) ? 60.0 : 0.01 * v;
            if (kind == IN_UNIFORM) v = 0.25;
            scores[t * L + j] = j <= t ? (float)v : NAN;
        }
    for (int i = 0; i < L * d; i++) vec[i] = (float)gauss();
    if (kind == IN_DUPVEC) /* repeated tokens: identical vectors, distinct logits */
        for (int i = 3; i < L; i += 3)
            for (int c = 0; c < d; c++) vec[i * d + c] = vec[(i - 3) * d + c];
    free(q), free(k);
}

static const char *var_name_per_n[] = {"dist_true", "dist_bound", "dist_expect", "sep_ratio",
                                       "sep_lower", "sep_upper", "sep_marginal",
                                       "rows_used"};
static const char *var_name_per_t[] = {"entropy", "entropy_norm", "grad_exact", "grad_bound"};

static int compare_out(const double *got, const double *want, const met_axes *ax,
                       const char *what) {
    int bad = 0;
    char label[256];
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++)
                for (int v = 0; v < MET_NPERN; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    snprintf(label, sizeof label, "%s %s N=%d T=%g %s", what, var_name_per_n[v],
                             ax->N[iN], ax->T[iT], met_normalizer_name(ax->norm[iZ]));
                    int before = check_failed;
                    if ((v == MET_SEP_RATIO || v == MET_SEP_MARGINAL) && !isnan(want[at]) &&
                        ref_lo[at] != ref_hi[at])
                        CHECK(got[at] >= ref_lo[at] - 1e-12 && got[at] <= ref_hi[at] + 1e-12,
                              "%s: got %.10g outside the near-tie range [%.10g, %.10g]", label,
                              got[at], ref_lo[at], ref_hi[at]);
                    else
                        CHECK_CLOSE(got[at], want[at], 2e-7, 1e-7, label);
                    bad += check_failed != before;
                }
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                snprintf(label, sizeof label, "%s %s T=%g %s", what, var_name_per_t[v], ax->T[iT],
                         met_normalizer_name(ax->norm[iZ]));
                int before = check_failed;
                /* grad_exact: 1e-6 relative (section 7) */
                CHECK_CLOSE(got[at], want[at], 1e-12, v == MET_GRAD_EXACT ? 1e-6 : 1e-9, label);
                bad += check_failed != before;
            }
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                snprintf(label, sizeof label, "%s grad_fd T=%g eps=%g %s", what, ax->T[iT],
                         ax->eps[iE], met_normalizer_name(ax->norm[iZ]));
                int before = check_failed;
                CHECK_CLOSE(got[at], want[at], 1e-9, 1e-7, label);
                bad += check_failed != before;
            }
        }
    return bad;
}

static void test_against_reference(void) {
    static const int32_t Ns[] = {1, 2, 3, 5, 16};
    static const double Ts[] = {1e-3, 8, 100};
    static const double eps[] = {1e-3, 1e-1, 10};
    static const met_normalizer norms[] = {MET_SOFTMAX, MET_SPARSEMAX, MET_SSMAX};
    const int shapes[][2] = {{2, 1}, {3, 4}, {6, 3}, {17, 8}, {33, 5}};
    int ncases = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int kind = 0; kind < 5; kind++)
            for (int mode = 0; mode < 4; mode++) {
                int full = mode & 1, agg = mode >> 1; /* rows x metrics.distance */
                int L = shapes[sh][0], d = shapes[sh][1];
                float *scores = malloc((size_t)L * L * sizeof *scores);
                float *vec = malloc((size_t)L * d * sizeof *vec);
                make_head(scores, vec, L, d, kind);
                met_axes ax = {.N = Ns, .n_N = 5, .T = Ts, .n_T = 3, .eps = eps, .n_eps = 3,
                               .norm = norms, .n_norm = 3, .ssmax_scale = (kind & 1) ? 0.7 : 0,
                               .full_row = full, .aggregate = agg, .seed = 7, .window = 2,
                               .layer = 3, .head = (int64_t)sh};
                size_t cuts[3] = {(size_t)(L + 1) / 2, (size_t)L - (L > 2), (size_t)L};
                size_t nout = met_out_count(&ax), wsb = met_workspace_bytes(L, d, &ax);
                void *ws = malloc(wsb);
                double *got = malloc(3 * nout * sizeof *got), *want = malloc(nout * sizeof *want);
                as_err err;
                int rc = met_head(got, ws, wsb, scores, L, vec, L, d, cuts, 3, &ax, &err);
                CHECK(rc == 0, "met_head failed: %s", err.msg);
                for (int c = 0; c < 3; c++) {
                    ref_head(want, scores, L, vec, (int)cuts[c], d, &ax);
                    char what[96];
                    snprintf(what, sizeof what, "L=%d d=%d %s %s %s cut=%zu", L, d, in_name[kind],
                             full ? "full_row" : "visible", agg ? "aggregate" : "per_token",
                             cuts[c]);
                    compare_out(got + c * nout, want, &ax, what);
                    ncases++;
                }
                free(scores), free(vec), free(ws), free(got), free(want);
            }
    /* large N (the paper's K = 128 walk, n = N + 1 at t = 128) and a resid-sized dim (768) */
    static const int32_t Nbig[] = {1, 64, 128, 139};
    static const double Tbig[] = {8};
    static const met_normalizer soft[] = {MET_SOFTMAX};
    const int big[][2] = {{140, 64}, {20, 768}};
    for (int b = 0; b < 2; b++)
        for (int full = 0; full < 2; full++) {
            int L = big[b][0], d = big[b][1];
            float *scores = malloc((size_t)L * L * sizeof *scores);
            float *vec = malloc((size_t)L * d * sizeof *vec);
            make_head(scores, vec, L, d, IN_RANDOM);
            met_axes ax = {.N = Nbig, .n_N = 4, .T = Tbig, .n_T = 1, .eps = eps + 1, .n_eps = 1,
                           .norm = soft, .n_norm = 1, .full_row = full, .seed = 5};
            size_t cut = (size_t)L, nout = met_out_count(&ax), wsb = met_workspace_bytes(L, d, &ax);
            void *ws = malloc(wsb);
            double *got = malloc(nout * sizeof *got), *want = malloc(nout * sizeof *want);
            CHECK(met_head(got, ws, wsb, scores, L, vec, L, d, &cut, 1, &ax, NULL) == 0, "big run");
            ref_head(want, scores, L, vec, L, d, &ax);
            char what[96];
            snprintf(what, sizeof what, "L=%d d=%d %s", L, d, full ? "full_row" : "visible");
            compare_out(got, want, &ax, what);
            ncases++;
            free(scores), free(vec), free(ws), free(got), free(want);
        }
    printf("reference comparison: %d (head, cut) cases\n", ncases);
}

/* prefix cuts equal separate passes at each L (section 9) */
static void test_prefix_equals_separate(void) {
    static const int32_t Ns[] = {4, 1, 8};
    static const double Ts[] = {0.05, 8};
    static const double eps[] = {0.1};
    static const met_normalizer norms[] = {MET_SOFTMAX, MET_SSMAX};
    int L = 48, d = 7;
    float *scores = malloc((size_t)L * L * sizeof *scores), *vec = malloc((size_t)L * d * sizeof *vec);
    make_head(scores, vec, L, d, IN_RANDOM);
    for (int full = 0; full < 2; full++) {
        met_axes ax = {.N = Ns, .n_N = 3, .T = Ts, .n_T = 2, .eps = eps, .n_eps = 1, .norm = norms,
                       .n_norm = 2, .full_row = full, .seed = 3};
        size_t cuts[4] = {8, 16, 16, 48}, nout = met_out_count(&ax);
        size_t wsb = met_workspace_bytes(L, d, &ax);
        void *ws = malloc(wsb);
        double *all = malloc(4 * nout * sizeof *all), *one = malloc(nout * sizeof *one);
        CHECK(met_head(all, ws, wsb, scores, L, vec, L, d, cuts, 4, &ax, NULL) == 0, "prefix run");
        for (int c = 0; c < 4; c++) {
            size_t Lc = cuts[c], cut1 = Lc;
            CHECK(met_head(one, ws, wsb, scores, L, vec, Lc, d, &cut1, 1, &ax, NULL) == 0, "sep run");
            int same = 1;
            for (size_t i = 0; i < nout; i++) {
                double g = all[c * nout + i], w = one[i];
                if (!((isnan(g) && isnan(w)) || fabs(g - w) <= 1e-12 * (1 + fabs(w)))) same = 0;
            }
            CHECK(same, "%s cut %zu differs from a separate pass", full ? "full_row" : "visible", Lc);
        }
        free(ws), free(all), free(one);
    }
    free(scores), free(vec);
}

static void test_grad_exact_analytic(void) {
    double a[64];
    const double eps_list[] = {0.25, 1e-3, 1e-9, 1e-30, 1e-200};
    for (size_t k = 0; k < sizeof eps_list / sizeof eps_list[0]; k++) {
        double e = eps_list[k];
        a[0] = e, a[1] = 1 - e; /* two keys: lambda = 2 a1 a2 exactly (sum = 1) */
        char label[64];
        snprintf(label, sizeof label, "two-key eps=%g", e);
        CHECK_CLOSE(met_softmax_jacobian_norm(a, 2), 2 * a[0] * a[1], 0, 1e-12, label);
    }
    for (int n = 2; n < 64; n += 7) {
        for (int j = 0; j < n; j++) a[j] = 1.0 / n;
        CHECK_CLOSE(met_softmax_jacobian_norm(a, n), 1.0 / n, 0, 1e-14, "uniform: 1/n");
    }
    a[0] = 1, a[1] = 0, a[2] = 0;
    CHECK(met_softmax_jacobian_norm(a, 3) == 0, "one-hot: 0");
    /* random rows vs Jacobi, including peaked ones */
    double M[40 * 40], z[40];
    double worst = 0;
    for (int rep = 0; rep < 300; rep++) {
        int n = 2 + rep % 38;
        double sc = pow(10, -1 + 3 * urand());
        for (int j = 0; j < n; j++) z[j] = sc * gauss();
        ref_softmax(a, z, n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) M[i * n + j] = (i == j ? a[i] : 0) - a[i] * a[j];
        double want = ref_max_eig(M, n), got = met_softmax_jacobian_norm(a, n);
        CHECK_CLOSE(got, want, 1e-14, 1e-6, "grad_exact vs Jacobi");
        if (want > 1e-8 && fabs(got - want) / want > worst) worst = fabs(got - want) / want;
    }
    printf("grad_exact vs Jacobi: worst relative error %.3g over 300 rows\n", worst);
}

static void test_topk_and_sparsemax(void) {
    double l[50];
    uint32_t order[50], scratch[50];
    for (int rep = 0; rep < 200; rep++) {
        int n = 1 + rep % 50, K = 1 + (rep * 7) % n;
        for (int j = 0; j < n; j++) l[j] = round(3 * gauss()); /* many ties */
        met_topk_order(order, scratch, l, n, K);
        /* reference: stable selection of the best remaining each time */
        int used[50] = {0}, ok = 1;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int j = 0; j < n; j++)
                if (!used[j] && (best < 0 || l[j] > l[best])) best = j;
            used[best] = 1;
            ok &= (int)order[k] == best;
        }
        CHECK(ok, "top-%d order of %d logits (ties to the lower index)", K, n);
    }
    /* NaN (ranks as -inf), -inf, +-0 ties and all-NaN rows, K = 1..3 (K = 1 has its own
     * argmax pass): the same stable selection with NaN mapped to -inf */
    for (int rep = 0; rep < 300; rep++) {
        int n = 1 + rep % 37, K = 1 + rep % 3;
        if (K > n) K = n;
        static const double sp[6] = {NAN, -INFINITY, 0.0, -0.0, 1.0, INFINITY};
        for (int j = 0; j < n; j++)
            l[j] = rep % 11 == 0 ? NAN : urand() < 0.6 ? sp[(int)(urand() * 6)] : round(2 * gauss());
        met_topk_order(order, scratch, l, n, K);
        int used[50] = {0}, ok = 1;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int j = 0; j < n; j++) {
                double v = isnan(l[j]) ? -INFINITY : l[j];
                double b = best < 0 ? 0 : isnan(l[best]) ? -INFINITY : l[best];
                if (!used[j] && (best < 0 || v > b)) best = j;
            }
            used[best] = 1;
            ok &= (int)order[k] == best;
        }
        CHECK(ok, "top-%d order of %d logits with NaN, +-inf and +-0", K, n);
    }
    double z[60], a[60], r[60];
    for (int rep = 0; rep < 300; rep++) {
        int n = 1 + rep % 60;
        double sc = pow(10, -2 + 4 * urand());
        for (int j = 0; j < n; j++) z[j] = sc * gauss();
        if (rep % 5 == 0) for (int j = 0; j < n; j++) z[j] = round(z[j]);
        met_sparsemax(a, z, n);
        ref_sparsemax(r, z, n);
        double s = 0;
        int ok = 1;
        for (int j = 0; j < n; j++) {
            s += a[j];
            ok &= fabs(a[j] - r[j]) <= 1e-12 * (1 + sc);
            if (r[j] == 0 && a[j] != 0) ok = 0; /* exact zeros */
            if (a[j] < 0) ok = 0;
        }
        CHECK(ok, "sparsemax n=%d scale %g vs sort-based reference", n, sc);
        CHECK(fabs(s - 1) < 1e-12, "sparsemax sums to %.17g", s);
    }
}

/* splitmix64's finalizer with the golden-ratio increment, as metrics_dir.c documents */
static uint64_t ref_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void test_directions(void) {
    uint64_t k1 = met_direction_key(1, 0, 3, 5, 17, 2), k2 = met_direction_key(1, 0, 3, 5, 17, 2);
    CHECK(k1 == k2, "key deterministic");
    CHECK(met_direction_key(1, 0, 3, 5, 17, 1) != k1 && met_direction_key(2, 0, 3, 5, 17, 2) != k1 &&
              met_direction_key(1, 1, 3, 5, 17, 2) != k1 && met_direction_key(1, 0, 4, 5, 17, 2) != k1 &&
              met_direction_key(1, 0, 3, 6, 17, 2) != k1 && met_direction_key(1, 0, 3, 5, 18, 2) != k1,
          "every key part matters");
    double u[101], s = 0;
    met_direction(u, 101, k1);
    for (int j = 0; j < 101; j++) s += u[j] * u[j];
    CHECK_CLOSE(s, 1.0, 1e-14, 0, "unit direction");
    /* counter-based: entry j does not depend on how many were drawn */
    double v[7], nv = 0;
    for (int j = 0; j < 7; j++) nv += met_normal(k1, j) * met_normal(k1, j);
    met_direction(v, 7, k1);
    int ok = 1;
    for (int j = 0; j < 7; j++) ok &= fabs(v[j] - met_normal(k1, j) / sqrt(nv)) < 1e-15;
    CHECK(ok, "direction = normalized prefix of the stream");
    /* moments of the stream */
    double m1 = 0, m2 = 0, m4 = 0;
    int n = 200000;
    for (int j = 0; j < n; j++) {
        double g = met_normal(k2 ^ 99, j);
        m1 += g, m2 += g * g, m4 += g * g * g * g;
    }
    m1 /= n, m2 /= n, m4 /= n;
    CHECK(fabs(m1) < 0.01 && fabs(m2 - 1) < 0.015 && fabs(m4 - 3) < 0.08,
          "normal moments %g %g %g", m1, m2, m4);
    /* the library's series log and sin/cos (metrics_dir.c) against libm's on the stream's
     * own uniforms (the splitmix64 counters of docs/metrics.md section 7, restated here):
     * z0 = sqrt(-2 ln u1) cos(2 pi u2), z1 = ... sin. libm forms 2 pi u2 with one rounding
     * (<= 7e-16 of angle), so the two agree to a few 1e-16 times the radius */
    double worst = 0;
    for (uint64_t p = 0; p < 200000; p++) {
        uint64_t r1 = ref_mix64(k1 ^ ref_mix64(2 * p)), r2 = ref_mix64(k1 ^ ref_mix64(2 * p + 1));
        double u1 = ((double)(r1 >> 11) + 0.5) * 0x1p-53, u2 = (double)(r2 >> 11) * 0x1p-53;
        double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
        double e0 = fabs(met_normal(k1, 2 * p) - rad * cos(ang)) / (rad > 1 ? rad : 1);
        double e1 = fabs(met_normal(k1, 2 * p + 1) - rad * sin(ang)) / (rad > 1 ? rad : 1);
        worst = e0 > worst ? e0 : worst;
        worst = e1 > worst ? e1 : worst;
    }
    CHECK(worst < 2e-15, "normals vs libm Box-Muller: worst %.3g (scaled by max(1, radius))",
          worst);
}

static void test_errors(void) {
    static const int32_t Nbad[] = {0};
    static const double Ts[] = {1};
    static const met_normalizer norms[] = {MET_SOFTMAX};
    met_axes ax = {.N = Nbad, .n_N = 1, .T = Ts, .n_T = 1, .norm = norms, .n_norm = 1};
    float sc[4] = {0, NAN, 0, 0}, v[2] = {1, 2};
    double out[64];
    char ws[1 << 16];
    size_t cut = 2;
    as_err err = {{0}};
    CHECK(met_head(out, ws, sizeof ws, sc, 2, v, 2, 1, &cut, 1, &ax, &err) == -1 &&
              strstr(err.msg, "N[0]") != NULL, "N = 0 rejected: %s", err.msg);
    static const int32_t Ns[] = {1};
    ax.N = Ns;
    CHECK(met_head(out, ws, 8, sc, 2, v, 2, 1, &cut, 1, &ax, &err) == -1 &&
              strstr(err.msg, "workspace") != NULL, "small workspace rejected: %s", err.msg);
    size_t bad_cut = 3;
    CHECK(met_head(out, ws, sizeof ws, sc, 2, v, 2, 1, &bad_cut, 1, &ax, &err) == -1,
          "cut beyond L rejected");
    CHECK(met_normalizer_from_name("ssmax") == MET_SSMAX && met_normalizer_from_name("x") == -1,
          "normalizer names");
}

int main(void) {
    test_against_reference();
    test_prefix_equals_separate();
    test_grad_exact_analytic();
    test_topk_and_sparsemax();
    test_directions();
    test_errors();
    return check_summary("test_metrics");
}
