/* test_metrics_ws.c -- met_head reads nothing of its workspace that it did not write first.
 * The same head is run in workspaces filled beforehand with zeros, with NaN bytes (0xff),
 * with 0x7f bytes (huge finite doubles) and with random bytes, and right after other heads
 * (what a worker's lane does: one workspace for all its heads and windows): every output
 * must be the same, bit for bit. This is what lets the cell reuse a workspace without
 * clearing 8 MB before each head. Grids: visible and full_row rows, per_token and
 * aggregate distances, the three normalizers, ties, exact twins, zero vectors, one non-finite
 * vector, lengths that are and are not multiples of the 16-column blocks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"

static unsigned long long rng_state = 0x2545f4914f6cdd1dull;
static uint64_t next64(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}
static double urand(void) { return ((double)(next64() >> 11) + 0.5) * 0x1p-53; }
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

typedef struct {
    size_t L, dim;
    float *scores, *vec;
} head_in;

/* kind 0: Gaussian; 1: rounded logits (ties) and twin vectors; 2: large logits (one-hot at
 * small T) with a zero vector; 3: one inf entry in the vectors */
static head_in make_head(size_t L, size_t dim, int kind) {
    head_in h = {L, dim, malloc(L * L * sizeof(float)), malloc(L * dim * sizeof(float))};
    double sc = kind == 2 ? 40 : 4;
    for (size_t t = 0; t < L; t++)
        for (size_t j = 0; j < L; j++) {
            double v = sc * gauss();
            if (kind == 1) v = round(v);
            h.scores[t * L + j] = j <= t ? (float)v : NAN;
        }
    for (size_t i = 0; i < L * dim; i++) h.vec[i] = (float)gauss();
    if (kind == 1)
        for (size_t i = 0; i + 3 < L; i += 7) memcpy(h.vec + (i + 3) * dim, h.vec + i * dim, dim * sizeof(float));
    if (kind == 2) memset(h.vec + 5 * dim, 0, dim * sizeof(float));
    if (kind == 3) h.vec[9 * dim + 1] = INFINITY;
    return h;
}

static void fill(unsigned char *ws, size_t n, int how) {
    if (how == 0) memset(ws, 0, n);
    if (how == 1) memset(ws, 0xff, n);
    if (how == 2) memset(ws, 0x7f, n);
    if (how == 3)
        for (size_t i = 0; i < n; i++) ws[i] = (unsigned char)(next64() >> 56);
}

int main(void) {
    static const int32_t Ns[] = {1, 2, 3, 5, 8, 16, 20};
    static const double Ts[] = {1e-3, 0.05, 1, 8, 100};
    static const double eps[] = {1e-3, 1e-1, 10};
    static const met_normalizer norms[] = {MET_SOFTMAX, MET_SPARSEMAX, MET_SSMAX};
    const size_t Ls[] = {200, 64, 37}, dims[] = {16, 64, 5};
    long cases = 0, mismatches = 0;
    for (int cfg = 0; cfg < 4; cfg++) {
        met_axes ax = {.N = Ns, .n_N = 7, .T = Ts, .n_T = 5, .eps = eps, .n_eps = 3,
                       .norm = norms, .n_norm = 3, .seed = 5, .full_row = cfg & 1,
                       .aggregate = (cfg >> 1) & 1};
        for (int s = 0; s < 3; s++) {
            size_t L = Ls[s], dim = dims[s];
            size_t cuts[3] = {L / 4 > 0 ? L / 4 : 1, L / 2, L}, ncuts = 3;
            size_t wsb = met_workspace_bytes(L, dim, &ax), nout = met_out_count(&ax) * ncuts;
            unsigned char *ws = malloc(wsb);
            double *ref = malloc(nout * sizeof *ref), *out = malloc(nout * sizeof *out);
            head_in heads[4];
            for (int k = 0; k < 4; k++) heads[k] = make_head(L, dim, k);
            for (int k = 0; k < 4; k++) {
                ax.head = k;
                fill(ws, wsb, 0);
                CHECK(met_head(ref, ws, wsb, heads[k].scores, L, heads[k].vec, L, dim, cuts,
                               ncuts, &ax, NULL) == 0, "met_head");
                /* fresh workspaces of every fill, then after each of the other heads */
                for (int how = 1; how < 8; how++) {
                    if (how < 4) {
                        fill(ws, wsb, how);
                    } else {
                        int other = (k + how - 3) % 4;
                        ax.head = other;
                        CHECK(met_head(out, ws, wsb, heads[other].scores, L, heads[other].vec, L,
                                       dim, cuts, ncuts, &ax, NULL) == 0, "met_head (other)");
                        ax.head = k;
                    }
                    CHECK(met_head(out, ws, wsb, heads[k].scores, L, heads[k].vec, L, dim, cuts,
                                   ncuts, &ax, NULL) == 0, "met_head (again)");
                    cases++;
                    if (memcmp(out, ref, nout * sizeof *out) != 0) {
                        size_t at = 0;
                        while (at < nout && !memcmp(out + at, ref + at, sizeof *out)) at++;
                        if (mismatches++ < 5)
                            fprintf(stderr, "  differs: full_row=%d aggregate=%d L=%zu head kind %d, "
                                    "workspace %s %d: output %zu is %.17g, not %.17g\n",
                                    ax.full_row, ax.aggregate, L, k, how < 4 ? "fill" : "after head",
                                    how < 4 ? how : (k + how - 3) % 4, at, out[at], ref[at]);
                    }
                }
            }
            for (int k = 0; k < 4; k++) free(heads[k].scores), free(heads[k].vec);
            free(ws), free(ref), free(out);
        }
    }
    CHECK(mismatches == 0, "%ld of %ld reruns gave different bits: met_head read workspace it "
          "had not written", mismatches, cases);
    printf("test_metrics_ws: %ld reruns in dirty workspaces, %ld differed\n", cases, mismatches);
    return check_summary("test_metrics_ws");
}
