/* test_metrics_props.c -- invariants of docs/metrics.md over many random rows (property tests):
 *   dist_true <= dist_bound (section 4), 0 <= sep_ratio, sep_lower, sep_upper <= 1 (section 6),
 *   grad_exact <= 1/(2T) and grad_fd <= grad_exact * (1 + 1e-2) when eps/T <= 1e-2 (the
 *   directional derivative is bounded by the spectral norm; section 7),
 *   0 <= entropy_norm <= 1 (section 8), no NaN where the definition gives a number.
 * Per-row values come from met_head itself: with a cut at every length 1..L, row t's value
 * is (sum over rows < t+1) - (sum over rows < t), the sums being mean * rows_used. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"

static unsigned long long rng_state = 0x853c49e6748fea9bull;
static double urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

int main(void) {
    static const int32_t Ns[] = {1, 2, 3, 5, 8};
    static const double Ts[] = {1e-3, 0.1, 1, 8, 100};
    static const double eps[] = {1e-3, 1e-1, 10};
    static const met_normalizer norms[] = {MET_SOFTMAX, MET_SPARSEMAX, MET_SSMAX};
    const int L = 24, nheads = 250;
    met_axes ax = {.N = Ns, .n_N = 5, .T = Ts, .n_T = 5, .eps = eps, .n_eps = 3, .norm = norms,
                   .n_norm = 3, .seed = 11};
    size_t nout = met_out_count(&ax), cuts[24];
    for (int c = 0; c < L; c++) cuts[c] = (size_t)c + 1;
    size_t wsb = met_workspace_bytes(L, 16, &ax);
    void *ws = malloc(wsb);
    double *out = malloc(L * nout * sizeof *out);
    float scores[24 * 24], vec[24 * 16];
    long rows = 0, viol_bound = 0, viol_sep = 0, viol_grad = 0, viol_fd = 0, viol_ent = 0, nans = 0;
    long fd_checked = 0;
    double worst_fd = 0;
    for (int h = 0; h < nheads; h++) {
        int d = 1 + h % 16;
        double sc = pow(10, -1 + 2.5 * urand()); /* logit scale: near-uniform to one-hot */
        for (int t = 0; t < L; t++)
            for (int j = 0; j < L; j++) {
                double v = sc * gauss();
                if (h % 4 == 1) v = round(v); /* ties */
                scores[t * L + j] = j <= t ? (float)v : NAN;
            }
        double vs = pow(10, -2 + 4 * urand());
        for (int i = 0; i < L * d; i++) vec[i] = (float)(vs * gauss() + (h % 3 == 2 ? vs : 0));
        ax.head = h;
        CHECK(met_head(out, ws, wsb, scores, L, vec, L, d, cuts, L, &ax, NULL) == 0, "met_head");
        for (int t = 1; t < L; t++) { /* row t = cut t+1 minus cut t */
            const double *cur = out + (size_t)t * nout, *prev = out + (size_t)(t - 1) * nout;
            rows++;
            for (size_t iT = 0; iT < ax.n_T; iT++)
                for (size_t iZ = 0; iZ < ax.n_norm; iZ++) {
                    double T = Ts[iT];
                    /* per-T: rows with n >= 2 below cut c are c - 1 */
#define ROWV_T(var) (cur[met_at_per_t(&ax, var, iT, iZ)] * t - \
                     (t > 1 ? prev[met_at_per_t(&ax, var, iT, iZ)] * (t - 1) : 0))
                    double en = ROWV_T(MET_ENTROPY_NORM);
                    if (isnan(en)) nans++;
                    if (!(en >= -1e-9 && en <= 1 + 1e-9)) viol_ent++;
                    if (norms[iZ] == MET_SOFTMAX) {
                        double ge = ROWV_T(MET_GRAD_EXACT);
                        if (isnan(ge)) nans++;
                        if (!(ge <= (1 + 1e-9) / (2 * T))) viol_grad++;
                        for (size_t iE = 0; iE < ax.n_eps; iE++) {
                            if (eps[iE] / T > 1e-2) continue;
                            size_t at = met_at_grad_fd(&ax, iT, iE, iZ);
                            double fd = cur[at] * t - (t > 1 ? prev[at] * (t - 1) : 0);
                            fd_checked++;
                            if (!(fd <= ge * (1 + 1e-2) + 1e-9 / T)) viol_fd++;
                            if (ge > 1e-6 / T && fd / ge > worst_fd) worst_fd = fd / ge;
                        }
                    }
                    for (size_t iN = 0; iN < ax.n_N; iN++) {
                        double used = cur[met_at_per_n(&ax, MET_ROWS_USED, iN, iT, iZ)];
                        double pused = prev[met_at_per_n(&ax, MET_ROWS_USED, iN, iT, iZ)];
                        if (used == pused) continue; /* row t skipped: n <= N */
#define ROWV_N(var) (cur[met_at_per_n(&ax, var, iN, iT, iZ)] * used - \
                     (pused > 0 ? prev[met_at_per_n(&ax, var, iN, iT, iZ)] * pused : 0))
                        double dt = ROWV_N(MET_DIST_TRUE), db = ROWV_N(MET_DIST_BOUND);
                        double sr = ROWV_N(MET_SEP_RATIO), sl = ROWV_N(MET_SEP_LOWER),
                               su = ROWV_N(MET_SEP_UPPER);
                        if (isnan(dt) || isnan(db) || isnan(sr) || isnan(sl) || isnan(su)) nans++;
                        if (!(dt <= db + 1e-9 * (1 + fabs(db) + fabs(dt)) * used)) {
                            if (viol_bound < 5)
                                fprintf(stderr, "bound: head %d row %d N=%d T=%g %s: %g > %g\n", h,
                                        t, Ns[iN], T, met_normalizer_name(norms[iZ]), dt, db);
                            viol_bound++;
                        }
                        double tol = 1e-9 * used;
                        if (!(sr >= -tol && sr <= 1 + tol && sl >= -tol && sl <= 1 + tol &&
                              su >= -tol && su <= 1 + tol))
                            viol_sep++;
                    }
                }
        }
    }
    printf("rows %ld (x %zu T x %zu normalizers); grad_fd checks %ld, worst grad_fd/grad_exact %.6f\n",
           rows, ax.n_T, ax.n_norm, fd_checked, worst_fd);
    CHECK(viol_bound == 0, "dist_true > dist_bound in %ld (row, N, T, normalizer)", viol_bound);
    CHECK(viol_sep == 0, "sep_* outside [0,1] in %ld cases", viol_sep);
    CHECK(viol_grad == 0, "grad_exact > 1/(2T) in %ld cases", viol_grad);
    CHECK(viol_fd == 0, "grad_fd > grad_exact (1 + 1e-2) in %ld cases", viol_fd);
    CHECK(viol_ent == 0, "entropy_norm outside [0,1] in %ld cases", viol_ent);
    CHECK(nans == 0, "%ld NaN values where the definition gives a number", nans);
    CHECK(fd_checked > 1000, "too few grad_fd checks: %ld", fd_checked);
    free(ws), free(out);
    return check_summary("test_metrics_props");
}
