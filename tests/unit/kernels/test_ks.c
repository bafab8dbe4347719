/* test_ks.c -- the two-sample KS statistic and exact p-value (docs/metrics.md section 5) against
 * (1) scipy.stats.ks_2samp(method="exact") on the cases tests/reference/ks_ref.py wrote (fixture
 *     ks_ref_scipy; path in argv[1] or ks_ref_cases.txt in the working directory), and
 * (2) exhaustive enumeration of every split of the pooled sample for small sizes (the
 *     permutation distribution of D, an independent definition of the exact p-value).
 * Also: NaN policy, the critical-N rule, and the cross-head test of a cell block
 * (ks_cross_heads, which the sweep and the Python package share): its samples are the
 * present heads' means in the block, D against a brute force of the ECDFs of samples
 * gathered here, p against ks_2samp_exact of them; what per_N_T or a switched-off second
 * sample leaves out stays NaN. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ks.h"

static double urand(unsigned long long *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * 0x1p-53;
}

/* D of a labelled pooled sample; ranks 0..m+n-1 are all distinct (continuous data) */
static double d_of_labels(const int *lab, int m, int n) {
    int i = 0, j = 0;
    double d = 0;
    for (int k = 0; k < m + n; k++) {
        if (lab[k]) i++; else j++;
        double v = fabs((double)i / m - (double)j / n);
        if (v > d) d = v;
    }
    return d;
}

/* sup over the pooled values v of |F1(v) - F2(v)|, each ECDF counting the values <= v */
static double d_brute(const double *x, size_t m, const double *y, size_t n) {
    double d = 0;
    for (size_t k = 0; k < m + n; k++) {
        double v = k < m ? x[k] : y[k - m], f1 = 0, f2 = 0;
        for (size_t i = 0; i < m; i++) f1 += x[i] <= v;
        for (size_t j = 0; j < n; j++) f2 += y[j] <= v;
        if (fabs(f1 / (double)m - f2 / (double)n) > d) d = fabs(f1 / (double)m - f2 / (double)n);
    }
    return d;
}

enum { XL = 2, XH = 3, XN = 3, XT = 2, XZ = 2 };

/* One block: every head's dist_true, dist_expect and dist_random means; the absent heads'
 * far out of the others' range, so a test that took them would show it. */
static void fill_block(double *b, const cr_layout *y, const unsigned char *present, unsigned long long *seed) {
    for (size_t i = 0; i < y->total; i++) b[i] = NAN;
    for (size_t n = 0; n < XN; n++)
        for (size_t t = 0; t < XT; t++)
            for (size_t z = 0; z < XZ; z++)
                for (size_t h = 0; h < XL * XH; h++) {
                    double far = present[h] ? 0 : 1000;
                    b[cr_at_per_n(y, CR_DIST_TRUE, n, t, z, h / XH, h % XH)] = urand(seed) + far;
                    b[cr_at_per_n(y, CR_DIST_EXPECT, n, t, z, h / XH, h % XH)] = 0.6 * urand(seed) - far;
                    b[cr_at_per_n(y, CR_DIST_RANDOM, n, t, z, h / XH, h % XH)] = 0.3 + urand(seed) - far;
                }
}

static void test_cross_heads(unsigned long long *seed) {
    cr_layout y;
    cr_layout_init(&y, XN, XT, 1, XZ, XL, XH);
    double *b = malloc(y.total * sizeof *b), x[XL * XH], e[XL * XH], p[XN], ref_p[XN];
    double *scratch = malloc(ks_scratch_doubles(XL * XH, XL * XH) * sizeof *scratch);
    int32_t N[XN] = {4, 1, 2};
    uint8_t per_n_T[XT] = {1, 0};
    unsigned char present[XL * XH] = {1, 1, 0, 1, 0, 1};
    met_axes ax = {.N = N, .n_N = XN, .n_T = XT, .n_norm = XZ, .per_n_T = per_n_T, .random_subsets = 2};
    const double alpha = 0.3;
    for (int ks_random = 0; ks_random < 2; ks_random++) {
        fill_block(b, &y, present, seed);
        ks_cross_heads(b, &y, &ax, ks_random, alpha, present, x, e, p, scratch);
        cr_var against = ks_random ? CR_DIST_RANDOM : CR_DIST_EXPECT;
        for (size_t t = 0; t < XT; t++)
            for (size_t z = 0; z < XZ; z++) {
                for (size_t n = 0; n < XN; n++) {
                    double xs[XL * XH], es[XL * XH], D, pv;
                    size_t k = 0;
                    for (size_t h = 0; h < XL * XH; h++)
                        if (present[h]) {
                            xs[k] = b[cr_at_per_n(&y, CR_DIST_TRUE, n, t, z, h / XH, h % XH)];
                            es[k++] = b[cr_at_per_n(&y, against, n, t, z, h / XH, h % XH)];
                        }
                    ks_2samp_exact(&D, &pv, xs, k, es, k, scratch);
                    ref_p[n] = pv;
                    double got_d = b[cr_at_ks(&y, CR_KS_STAT, n, t, z)], got_p = b[cr_at_ks(&y, CR_KS_PVALUE, n, t, z)];
                    if (!per_n_T[t]) {
                        CHECK(isnan(got_d) && isnan(got_p), "T %zu (per_N_T off): ks %g %g", t, got_d, got_p);
                        continue;
                    }
                    CHECK_CLOSE(got_d, d_brute(xs, k, es, k), 1e-15, 0, "cross-head D of the present heads");
                    CHECK(got_p == pv, "ks_random %d (N %zu, T %zu, z %zu): p %.17g, the samples' %.17g", ks_random,
                          n, t, z, got_p, pv);
                }
                double crit = b[cr_at_crit(&y, t, z)];
                if (per_n_T[t]) CHECK(crit == ks_critical_n(N, ref_p, XN, alpha), "crit_N %g", crit);
                else CHECK(isnan(crit), "crit_N at a T per_N_T leaves out: %g", crit);
            }
    }
    /* the second sample switched off: nothing is written */
    met_axes off[2] = {ax, ax};
    off[0].skip = MET_SKIP_DIST_EXPECT, off[1].random_subsets = 0;
    for (int ks_random = 0; ks_random < 2; ks_random++) {
        fill_block(b, &y, present, seed);
        ks_cross_heads(b, &y, &off[ks_random], ks_random, alpha, NULL, x, e, p, scratch);
        int untouched = 1;
        for (size_t t = 0; t < XT; t++)
            for (size_t z = 0; z < XZ; z++) {
                untouched &= isnan(b[cr_at_crit(&y, t, z)]) != 0;
                for (size_t n = 0; n < XN; n++) untouched &= isnan(b[cr_at_ks(&y, CR_KS_STAT, n, t, z)]) != 0;
            }
        CHECK(untouched, "ks_random %d with its second sample off: the test's values stay NaN", ks_random);
    }
    free(b), free(scratch);
}

static void exhaustive_case(int m, int n, unsigned long long *seed) {
    /* a random observed labelling; p = fraction of all C(m+n, m) labellings with D >= D_obs */
    int tot = m + n, lab[24];
    double x[24], y[24];
    int perm[24];
    for (int k = 0; k < tot; k++) perm[k] = k;
    for (int k = tot - 1; k > 0; k--) {
        int r = (int)(urand(seed) * (k + 1));
        int t = perm[k]; perm[k] = perm[r]; perm[r] = t;
    }
    memset(lab, 0, sizeof lab);
    for (int k = 0; k < m; k++) lab[perm[k]] = 1;
    int xi = 0, yi = 0;
    for (int k = 0; k < tot; k++) {
        if (lab[k]) x[xi++] = k + 0.25; else y[yi++] = k + 0.25;
    }
    double dobs = d_of_labels(lab, m, n);
    long long count = 0, all = 0;
    for (unsigned mask = 0; mask < (1u << tot); mask++) {
        if (__builtin_popcount(mask) != m) continue;
        int l2[24];
        for (int k = 0; k < tot; k++) l2[k] = (mask >> k) & 1;
        all++;
        if (d_of_labels(l2, m, n) >= dobs - 1e-12) count++;
    }
    double want = (double)count / (double)all;
    double scratch[128], D, p;
    ks_2samp_exact(&D, &p, x, (size_t)m, y, (size_t)n, scratch);
    char label[96];
    snprintf(label, sizeof label, "exhaustive m=%d n=%d D", m, n);
    CHECK_CLOSE(D, dobs, 1e-14, 0, label);
    snprintf(label, sizeof label, "exhaustive m=%d n=%d p", m, n);
    CHECK_CLOSE(p, want, 1e-12, 0, label);
}

static int scipy_cases(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s (written by tests/reference/ks_ref.py, fixture ks_ref_scipy)", path);
    if (!f) return 0;
    int ncase = 0;
    size_t n1, n2;
    double worst = 0;
    while (fscanf(f, "%zu %zu", &n1, &n2) == 2) {
        double *x = malloc(n1 * sizeof *x), *y = malloc(n2 * sizeof *y);
        double *s = malloc(ks_scratch_doubles(n1, n2) * sizeof *s);
        for (size_t i = 0; i < n1; i++) CHECK(fscanf(f, "%lf", &x[i]) == 1, "read x");
        for (size_t i = 0; i < n2; i++) CHECK(fscanf(f, "%lf", &y[i]) == 1, "read y");
        double Dw, pw, D, p;
        CHECK(fscanf(f, "%lf %lf", &Dw, &pw) == 2, "read D p");
        ks_2samp_exact(&D, &p, x, n1, y, n2, s);
        char label[96];
        snprintf(label, sizeof label, "scipy case %d (%zu vs %zu) D", ncase, n1, n2);
        CHECK_CLOSE(D, Dw, 1e-12, 0, label);
        snprintf(label, sizeof label, "scipy case %d (%zu vs %zu) p", ncase, n1, n2);
        CHECK_CLOSE(p, pw, 1e-6, 0, label);
        if (fabs(p - pw) > worst) worst = fabs(p - pw);
        /* symmetric in the samples */
        double D2, p2;
        ks_2samp_exact(&D2, &p2, y, n2, x, n1, s);
        CHECK(D2 == D && fabs(p2 - p) < 1e-12, "case %d not symmetric", ncase);
        free(x), free(y), free(s);
        ncase++;
    }
    fclose(f);
    printf("scipy cases: %d, worst |p - p_scipy| = %.3g\n", ncase, worst);
    return ncase;
}

int main(int argc, char **argv) {
    int n = scipy_cases(argc > 1 ? argv[1] : "ks_ref_cases.txt");
    CHECK(n >= 50, "only %d scipy cases", n);

    unsigned long long seed = 12345;
    int sizes[][2] = {{1, 1}, {1, 5}, {2, 3}, {3, 3}, {4, 7}, {5, 5}, {6, 9}, {8, 8}, {7, 10},
                      {3, 12}, {9, 9}, {10, 6}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int rep = 0; rep < 3; rep++) exhaustive_case(sizes[k][0], sizes[k][1], &seed);

    /* fully separated samples: D = 1 and p = 2 / C(m1 + m2, m1) (the two paths through a
     * corner), far below 1e-16 for the sizes of the sweep (144 heads): the p-value must be
     * accumulated as the mass leaving the band, not as 1 - P(inside) */
    static const int sep_sizes[][2] = {{10, 10}, {30, 30}, {40, 25}, {144, 144}};
    for (size_t k = 0; k < sizeof sep_sizes / sizeof sep_sizes[0]; k++) {
        int m1 = sep_sizes[k][0], m2 = sep_sizes[k][1];
        double *xs = malloc(m1 * sizeof *xs), *ys = malloc(m2 * sizeof *ys);
        double *sc = malloc(ks_scratch_doubles(m1, m2) * sizeof *sc);
        for (int i = 0; i < m1; i++) xs[i] = i;
        for (int i = 0; i < m2; i++) ys[i] = 1000 + i;
        double Ds, ps, want = 2 * exp(lgamma(m1 + 1.0) + lgamma(m2 + 1.0) - lgamma(m1 + m2 + 1.0));
        ks_2samp_exact(&Ds, &ps, xs, m1, ys, m2, sc);
        char label[96];
        snprintf(label, sizeof label, "separated %d vs %d: p = 2/C(m1+m2, m1) = %.3g", m1, m2, want);
        CHECK(Ds == 1, "separated samples D = %g", Ds);
        CHECK_CLOSE(ps, want, 0, 1e-9, label);
        free(xs), free(ys), free(sc);
    }
    /* identical samples: D = 0, p = 1 */
    double s[64], D, p, x[5] = {1, 2, 3, 4, 5};
    ks_2samp_exact(&D, &p, x, 5, x, 5, s);
    CHECK(D == 0 && p == 1, "identical samples D=%g p=%g", D, p);
    /* NaN policy: dropped per sample; all-NaN sample gives NaN */
    double xn[6] = {1, NAN, 2, 3, 4, 5}, yn[2] = {NAN, NAN}, D2, p2;
    ks_2samp_exact(&D, &p, xn, 6, x, 5, s);
    ks_2samp_exact(&D2, &p2, x, 5, x, 5, s);
    CHECK(D == D2 && p == p2, "NaN not dropped: D=%g p=%g", D, p);
    ks_2samp_exact(&D, &p, x, 5, yn, 2, s);
    CHECK(isnan(D) && isnan(p), "empty sample must give NaN");
    /* critical N: smallest N with p > alpha, NaN never qualifies, -1 if none */
    int32_t Ns[5] = {8, 1, 2, 4, 16};
    double pv[5] = {0.5, 1e-5, NAN, 0.02, 0.9};
    CHECK(ks_critical_n(Ns, pv, 5, 0.01) == 4, "crit N %d", ks_critical_n(Ns, pv, 5, 0.01));
    CHECK(ks_critical_n(Ns, pv, 5, 0.95) == -1, "crit N none");
    CHECK(ks_critical_n(Ns, pv, 5, 1e-5) == 4, "strict p > alpha at N=1; NaN at N=2 skipped");
    test_cross_heads(&seed);
    return check_summary("test_ks");
}
