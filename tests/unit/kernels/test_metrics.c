/* test_metrics.c -- every metric of docs/metrics.md sections 4, 6, 7, 8, 9 against a brute-force
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

static unsigned long long rng_state = 88172645463325252ull;
static double urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

/* ---------------- reference pieces ---------------- */

static void ref_softmax(double *a, const double *z, int n) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < n; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < n; j++) s += exp(z[j] - mx);
    for (int j = 0; j < n; j++) a[j] = exp(z[j] - mx) / s;
}

/* sort-based sparsemax (Martins & Astudillo's formula), a different algorithm from the
 * library's Michelot iteration */
static void ref_sparsemax(double *a, const double *z, int n) {
    double *zs = malloc(n * sizeof *zs);
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
    free(zs);
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

static double norm_diff(const double *x, const double *y, double ax, double ay, int d) {
    double s = 0;
    for (int k = 0; k < d; k++) {
        double v = ax * x[k] - ay * y[k];
        s += v * v;
    }
    return sqrt(s);
}

/* sep_ratio counts D_i < r strictly: a selected D_i within rounding of r may land on either
 * side in any finite-precision evaluation (this reference included). The reference also
 * returns the means of the counts with a 1e-9 relative margin either way; the library must
 * fall between them. */
static double *sep_lo, *sep_hi;

/* The head's means straight from docs/metrics.md, for one cut Lc. out laid out as met_head's. */
static void ref_head(double *out, const float *scores, int ld, const float *vec, int Lc, int d,
                     const met_axes *ax) {
    size_t nout = met_out_count(ax);
    free(sep_lo), free(sep_hi);
    sep_lo = calloc(nout, sizeof *sep_lo), sep_hi = calloc(nout, sizeof *sep_hi);
    double *sum = calloc(nout, sizeof *sum), *cntN = calloc(ax->nN, sizeof *cntN), cntT = 0;
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
           *M = malloc((size_t)Lc * Lc * sizeof *M), *D = malloc(Lc * sizeof *D);
    int *ord = malloc(Lc * sizeof *ord), *insel = malloc(Lc * sizeof *insel);
    for (int t = 0; t < Lc; t++) {
        int nv = t + 1, n = ax->full_row ? Lc : nv;
        if (n < 2) continue;
        for (int j = 0; j < n; j++) l[j] = j < nv ? scores[t * ld + j] : -INFINITY;
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
        for (size_t iN = 0; iN < ax->nN; iN++) cntN[iN] += ax->N[iN] < n;
        for (size_t iZ = 0; iZ < ax->nNorm; iZ++) {
            met_normalizer zn = ax->norm[iZ];
            double f = 1;
            if (zn == MET_SSMAX)
                f = (ax->ssmax_scale > 0 ? ax->ssmax_scale : 1 / log(1024.0)) * log((double)n);
            for (size_t iT = 0; iT < ax->nT; iT++) {
                double T = ax->T[iT];
                for (int j = 0; j < nv; j++) z[j] = f * l[j] / T;
                if (zn == MET_SPARSEMAX) ref_sparsemax(a, z, nv); else ref_softmax(a, z, nv);
                for (int j = nv; j < n; j++) a[j] = 0;
                double H = 0;
                for (int j = 0; j < n; j++)
                    if (a[j] > 0) H -= a[j] * log(a[j]);
                sum[met_at_per_t(ax, MET_ENTROPY, iT, iZ)] += H;
                sum[met_at_per_t(ax, MET_ENTROPY_NORM, iT, iZ)] += H / log((double)n);
                if (zn == MET_SOFTMAX) {
                    for (int i = 0; i < nv; i++)
                        for (int j = 0; j < nv; j++)
                            M[i * nv + j] = ((i == j) ? a[i] : 0) - a[i] * a[j];
                    sum[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] += ref_max_eig(M, nv) / T;
                }
                for (size_t iE = 0; iE < ax->nEps; iE++) {
                    double eps = ax->eps[iE];
                    uint64_t key = met_direction_key(ax->seed, ax->window, ax->layer, ax->head, t, iE);
                    double un = 0;
                    for (int j = 0; j < nv; j++) {
                        u[j] = met_normal(key, j);
                        un += u[j] * u[j];
                    }
                    for (int j = 0; j < nv; j++) z[j] = f * (l[j] + eps * u[j] / sqrt(un)) / T;
                    if (zn == MET_SPARSEMAX) ref_sparsemax(ap, z, nv); else ref_softmax(ap, z, nv);
                    double dd = 0;
                    for (int j = 0; j < nv; j++) dd += (ap[j] - a[j]) * (ap[j] - a[j]);
                    sum[met_at_grad_fd(ax, iT, iE, iZ)] += sqrt(dd) / eps;
                }
                for (size_t iN = 0; iN < ax->nN; iN++) {
                    int N = ax->N[iN];
                    if (N >= n) continue;
                    memset(insel, 0, n * sizeof *insel);
                    for (int q = 0; q < N; q++) insel[ord[q]] = 1;
                    double A = 0, m = 0, d1 = 0, dt = 0;
                    memset(s, 0, d * sizeof *s);
                    for (int j = 0; j < n; j++)
                        if (insel[j]) {
                            A += a[j];
                            for (int k = 0; k < d; k++) s[k] += a[j] * X[j * d + k];
                            double nj = norm_diff(X + j * d, X + j * d, 1, 0, d);
                            m = nj > m ? nj : m;
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
                    double bound = (1 - A) * d1 + ((n - N) * A - (1 - A)) * m;
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
                    /* separability on y */
                    memset(s, 0, d * sizeof *s);
                    for (int j = 0; j < n; j++)
                        if (insel[j])
                            for (int k = 0; k < d; k++) s[k] += a[j] * Y[j * d + k];
                    double r = INFINITY;
                    for (int i = 0; i < n; i++) {
                        D[i] = norm_diff(Y + i * d, s, a[i], 1, d);
                        if (!insel[i] && D[i] < r) r = D[i];
                    }
                    int Ns = 0, Nlo = 0, Nhi = 0;
                    double xs = 0, up = 0;
                    for (int i = 0; i < n; i++) {
                        if (!insel[i]) continue;
                        Ns += D[i] < r;
                        Nlo += D[i] < r * (1 - 1e-9) - 1e-12;
                        Nhi += D[i] < r * (1 + 1e-9) + 1e-12;
                        double B = A - a[i], Q = 0;
                        for (int j = 0; j < n; j++)
                            if (insel[j] && j != i) Q += a[j] * a[j];
                        double xi2 = B * B - delta * delta / 2 * (B * B - Q);
                        double xi = sqrt(xi2 > 0 ? xi2 : 0);
                        xs += xi;
                        double e = xi - r > 0 ? xi - r : 0;
                        up += exp(-e * e / 2);
                    }
                    double lower = r > 0 ? 1 - xs / (N * r) : 0;
                    double vals[6] = {dt, bound, ex, (double)Ns / N, lower > 0 ? lower : 0, up / N};
                    for (int v = 0; v < 6; v++) sum[met_at_per_n(ax, v, iN, iT, iZ)] += vals[v];
                    sep_lo[met_at_per_n(ax, MET_SEP_RATIO, iN, iT, iZ)] += (double)Nlo / N;
                    sep_hi[met_at_per_n(ax, MET_SEP_RATIO, iN, iT, iZ)] += (double)Nhi / N;
                }
            }
        }
    }
    for (size_t iN = 0; iN < ax->nN; iN++)
        for (size_t iT = 0; iT < ax->nT; iT++)
            for (size_t iZ = 0; iZ < ax->nNorm; iZ++) {
                for (int v = 0; v < 6; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    out[at] = cntN[iN] > 0 ? sum[at] / cntN[iN] : NAN;
                }
                out[met_at_per_n(ax, MET_ROWS_USED, iN, iT, iZ)] = cntN[iN];
                size_t at = met_at_per_n(ax, MET_SEP_RATIO, iN, iT, iZ);
                sep_lo[at] /= cntN[iN], sep_hi[at] /= cntN[iN];
            }
    for (size_t iT = 0; iT < ax->nT; iT++)
        for (size_t iZ = 0; iZ < ax->nNorm; iZ++) {
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                out[at] = cntT > 0 ? sum[at] / cntT : NAN;
            }
            double T = ax->T[iT];
            out[met_at_per_t(ax, MET_GRAD_BOUND, iT, iZ)] =
                cntT > 0 ? fmin(1 / (4 * T), sqrt(2.0)) : NAN;
            if (ax->norm[iZ] != MET_SOFTMAX) out[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] = NAN;
            for (size_t iE = 0; iE < ax->nEps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                out[at] = cntT > 0 ? sum[at] / cntT : NAN;
            }
        }
    free(sum), free(cntN), free(X), free(Y), free(l), free(z), free(a), free(ap), free(u), free(s);
    free(M), free(D), free(ord), free(insel);
}

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
                                       "sep_lower", "sep_upper", "rows_used"};
static const char *var_name_per_t[] = {"entropy", "entropy_norm", "grad_exact", "grad_bound"};

static int compare_out(const double *got, const double *want, const met_axes *ax,
                       const char *what) {
    int bad = 0;
    char label[256];
    for (size_t iN = 0; iN < ax->nN; iN++)
        for (size_t iT = 0; iT < ax->nT; iT++)
            for (size_t iZ = 0; iZ < ax->nNorm; iZ++)
                for (int v = 0; v < MET_NPERN; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    snprintf(label, sizeof label, "%s %s N=%d T=%g %s", what, var_name_per_n[v],
                             ax->N[iN], ax->T[iT], met_normalizer_name(ax->norm[iZ]));
                    int before = check_failed;
                    if (v == MET_SEP_RATIO && !isnan(want[at]) && sep_lo[at] != sep_hi[at])
                        CHECK(got[at] >= sep_lo[at] - 1e-12 && got[at] <= sep_hi[at] + 1e-12,
                              "%s: got %.10g outside the near-tie range [%.10g, %.10g]", label,
                              got[at], sep_lo[at], sep_hi[at]);
                    else
                        CHECK_CLOSE(got[at], want[at], 2e-7, 1e-7, label);
                    bad += check_failed != before;
                }
    for (size_t iT = 0; iT < ax->nT; iT++)
        for (size_t iZ = 0; iZ < ax->nNorm; iZ++) {
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                snprintf(label, sizeof label, "%s %s T=%g %s", what, var_name_per_t[v], ax->T[iT],
                         met_normalizer_name(ax->norm[iZ]));
                int before = check_failed;
                /* grad_exact: 1e-6 relative (section 7) */
                CHECK_CLOSE(got[at], want[at], 1e-12, v == MET_GRAD_EXACT ? 1e-6 : 1e-9, label);
                bad += check_failed != before;
            }
            for (size_t iE = 0; iE < ax->nEps; iE++) {
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
            for (int full = 0; full < 2; full++) {
                int L = shapes[sh][0], d = shapes[sh][1];
                float *scores = malloc((size_t)L * L * sizeof *scores);
                float *vec = malloc((size_t)L * d * sizeof *vec);
                make_head(scores, vec, L, d, kind);
                met_axes ax = {.N = Ns, .nN = 5, .T = Ts, .nT = 3, .eps = eps, .nEps = 3,
                               .norm = norms, .nNorm = 3, .ssmax_scale = (kind & 1) ? 0.7 : 0,
                               .full_row = full, .seed = 7, .window = 2, .layer = 3,
                               .head = (int64_t)sh};
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
                    snprintf(what, sizeof what, "L=%d d=%d %s %s cut=%zu", L, d, in_name[kind],
                             full ? "full_row" : "visible", cuts[c]);
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
            met_axes ax = {.N = Nbig, .nN = 4, .T = Tbig, .nT = 1, .eps = eps + 1, .nEps = 1,
                           .norm = soft, .nNorm = 1, .full_row = full, .seed = 5};
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
        met_axes ax = {.N = Ns, .nN = 3, .T = Ts, .nT = 2, .eps = eps, .nEps = 1, .norm = norms,
                       .nNorm = 2, .full_row = full, .seed = 3};
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
}

static void test_errors(void) {
    static const int32_t Nbad[] = {0};
    static const double Ts[] = {1};
    static const met_normalizer norms[] = {MET_SOFTMAX};
    met_axes ax = {.N = Nbad, .nN = 1, .T = Ts, .nT = 1, .norm = norms, .nNorm = 1};
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
