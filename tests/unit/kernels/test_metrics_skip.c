/* test_metrics_skip.c -- what a config switches off is missing, and nothing else moves.
 * met_axes.per_n_T (metrics.per_N_T) computes the per-N family at some T only, and
 * met_axes.skip (metrics.grad_exact / metrics.dist_expect = false) drops a family. Against
 * the same head with everything on: every skipped output is NaN, and every other output has
 * the same bits (the walk over N of one T does not depend on the other T, a block of rows
 * gives the row-by-row bits), except dist_true without dist_expect, which agrees to 1e-13
 * (a row whose dist_expect expansion cancels no longer takes dist_true's sum to the serial
 * fallback pass with it). Grids: visible and full_row rows, per_token and aggregate
 * distances, one and three normalizers, 5 T (row by row) and 2 T (row blocks), masks with
 * one, two and no T; heads with ties and twins, one-hot rows, one inf vector entry. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next64(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}
static double urand(void) { return ((double)(next64() >> 11) + 0.5) * 0x1p-53; }
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

/* kind 0: Gaussian; 1: rounded logits (ties) and twin vectors; 2: large logits (one-hot at
 * small T); 3: one inf entry in the vectors (nothing may be skipped as 0 * x) */
static void make_head(float *scores, float *vec, size_t L, size_t dim, int kind) {
    double sc = kind == 2 ? 40 : 4;
    for (size_t t = 0; t < L; t++)
        for (size_t j = 0; j < L; j++) {
            double v = sc * gauss();
            if (kind == 1) v = round(v);
            scores[t * L + j] = j <= t ? (float)v : NAN;
        }
    for (size_t i = 0; i < L * dim; i++) vec[i] = (float)gauss();
    if (kind == 1)
        for (size_t i = 0; i + 3 < L; i += 7) memcpy(vec + (i + 3) * dim, vec + i * dim, dim * sizeof(float));
    if (kind == 3) vec[9 * dim + 1] = INFINITY;
}

static int same_bits(double a, double b) {
    if (isnan(a) && isnan(b)) return 1;
    return memcmp(&a, &b, sizeof a) == 0;
}

/* flag [met_out_count(ax)]: 1 where ax (per_n_T, skip) switches the output off */
static void skipped_outputs(unsigned char *flag, const met_axes *ax) {
    memset(flag, 0, met_out_count(ax));
    for (int v = 0; v < MET_NPERN; v++)
        for (size_t iN = 0; iN < ax->n_N; iN++)
            for (size_t iT = 0; iT < ax->n_T; iT++)
                for (size_t iZ = 0; iZ < ax->n_norm; iZ++)
                    flag[met_at_per_n(ax, v, iN, iT, iZ)] =
                        (ax->per_n_T && !ax->per_n_T[iT]) ||
                        (v == MET_DIST_EXPECT && (ax->skip & MET_SKIP_DIST_EXPECT));
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++)
            flag[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] = (ax->skip & MET_SKIP_GRAD_EXACT) != 0;
}

int main(void) {
    static const int32_t Ns[] = {1, 2, 5, 8, 20};
    static const double T5[] = {1e-3, 0.05, 1, 8, 100}, T2[] = {0.05, 8};
    static const double eps[] = {1e-3, 1e-1};
    /* sa_softmax: its own walk per T where its order differs from the logits (metrics.c) */
    static const met_normalizer norms[] = {MET_SOFTMAX, MET_SPARSEMAX, MET_SSMAX, MET_SA_SOFTMAX};
    static const uint8_t masks5[][5] = {{0, 0, 0, 1, 0}, {1, 0, 1, 0, 0}, {0, 0, 0, 0, 0}};
    static const uint8_t masks2[][2] = {{0, 1}, {1, 0}, {0, 0}};
    const size_t L = 53, dim = 16;
    float *scores = malloc(L * L * sizeof(float)), *vec = malloc(L * dim * sizeof(float));
    long compared = 0, nan_checked = 0;
    for (int cfg = 0; cfg < 16; cfg++) {
        int two_T = cfg & 1, one_norm = (cfg >> 1) & 1;
        met_axes full = {.N = Ns, .n_N = 5, .T = two_T ? T2 : T5, .n_T = two_T ? 2 : 5,
                         .eps = eps, .n_eps = 2, .norm = norms, .n_norm = one_norm ? 1 : 4,
                         .seed = 3, .full_row = (cfg >> 2) & 1, .aggregate = (cfg >> 3) & 1};
        size_t cuts[2] = {L / 2, L}, ncuts = 2, nout = met_out_count(&full);
        size_t wsb = met_workspace_bytes(L, dim, &full);
        double *ref = malloc(ncuts * nout * sizeof *ref), *out = malloc(ncuts * nout * sizeof *out);
        unsigned char *flag = malloc(nout);
        for (int kind = 0; kind < 4; kind++) {
            make_head(scores, vec, L, dim, kind);
            void *ws = malloc(wsb);
            CHECK(met_head(ref, ws, wsb, scores, L, vec, L, dim, cuts, ncuts, &full, NULL) == 0, "full");
            for (int m = -1; m < 3; m++)
                for (unsigned skip = 0; skip < 4; skip++) {
                    if (m < 0 && skip == 0) continue; /* the reference itself */
                    met_axes ax = full;
                    ax.per_n_T = m < 0 ? NULL : two_T ? masks2[m] : masks5[m];
                    ax.skip = skip;
                    size_t need = met_workspace_bytes(L, dim, &ax);
                    CHECK(need <= wsb, "workspace grew: %zu > %zu", need, wsb);
                    memset(out, 0x5a, ncuts * nout * sizeof *out);
                    skipped_outputs(flag, &ax);
                    CHECK(met_head(out, ws, wsb, scores, L, vec, L, dim, cuts, ncuts, &ax, NULL) == 0,
                          "skip run");
                    long bad = 0;
                    for (size_t c = 0; c < ncuts; c++)
                        for (size_t at = 0; at < nout; at++) {
                            double g = out[c * nout + at], w = ref[c * nout + at];
                            if (flag[at]) {
                                nan_checked++;
                                if (!isnan(g)) bad++;
                            } else {
                                compared++;
                                /* dist_true without dist_expect: a row where dist_expect's
                                 * expansion cancels (twins) no longer sends dist_true's sum to
                                 * the serial fallback pass: round-off (seen: 3e-16) */
                                int dt_var = at < ax.n_N * ax.n_T * ax.n_norm;
                                if ((ax.skip & MET_SKIP_DIST_EXPECT) && dt_var && !ax.aggregate
                                        ? !(same_bits(g, w) || fabs(g - w) <= 1e-13 * fabs(w))
                                        : !same_bits(g, w)) {
                                    if (bad++ < 3)
                                        fprintf(stderr, "  output %zu: %.17g, all on %.17g\n", at, g, w);
                                }
                            }
                        }
                    CHECK(bad == 0, "cfg %d kind %d mask %d skip %u: %ld outputs differ", cfg, kind,
                          m, skip, bad);
                }
            free(ws);
        }
        free(ref);
        free(out);
        free(flag);
    }
    /* an unknown skip bit is an error, not ignored */
    met_axes bad = {.N = Ns, .n_N = 1, .T = T2, .n_T = 1, .norm = norms, .n_norm = 1, .skip = 8};
    size_t wsb = met_workspace_bytes(L, dim, &bad);
    void *ws = malloc(wsb);
    double o[64];
    as_err err;
    CHECK(met_head(o, ws, wsb, scores, L, vec, L, dim, &L, 1, &bad, &err) != 0, "skip = 8 accepted");
    free(ws);
    printf("compared %ld outputs bit for bit, %ld skipped ones NaN\n", compared, nan_checked);
    CHECK(compared > 100000 && nan_checked > 10000, "too few cases");
    free(scores);
    free(vec);
    return check_summary("test_metrics_skip");
}
