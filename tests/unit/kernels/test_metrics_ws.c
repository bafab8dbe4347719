/* test_metrics_ws.c -- met_head reads nothing of its workspace that it did not write first.
 * The same head is run in workspaces filled beforehand with zeros, with NaN bytes (0xff),
 * with 0x7f bytes (huge finite doubles) and with random bytes, and right after other heads
 * (what a worker's lane does: one workspace for all its heads and windows): every output
 * must be the same, bit for bit. This is what lets the cell reuse a workspace without
 * clearing 8 MB before each head. Grids: visible and full_row rows, per_token and
 * aggregate distances, the three normalizers, ties, exact twins, zero vectors, one non-finite
 * vector, lengths that are and are not multiples of the 16-column blocks. Then the row
 * blocks of grids with few T against the same T computed row by row. */
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

    /* Row blocks (met_rows_per_block): with one normalizer and fewer than 6 T, visible rows go
     * through met_head several at a time. A T of a one- or two-T grid (blocks of 6 or 3 rows)
     * must have the bits it has in a six-T grid (row by row), with cuts that end blocks early,
     * in a workspace that held other heads before. */
    static const double T6[] = {1e-3, 0.05, 1, 8, 100, 3};
    static const met_normalizer soft[] = {MET_SOFTMAX};
    long block_cases = 0, block_diffs = 0;
    for (int s = 0; s < 3; s++) {
        size_t L = Ls[s], dim = dims[s];
        size_t cuts[4] = {5, L / 3, L - 2, L}, ncuts = 4;
        met_axes a6 = {.N = Ns, .n_N = 7, .T = T6, .n_T = 6, .eps = eps, .n_eps = 3,
                       .norm = soft, .n_norm = 1, .seed = 9};
        size_t wsb = met_workspace_bytes(L, dim, &a6), n6 = met_out_count(&a6);
        double *ref = malloc(n6 * ncuts * sizeof *ref);
        for (int k = 0; k < 4; k++) {
            head_in h = make_head(L, dim, k);
            unsigned char *ws = malloc(wsb);
            fill(ws, wsb, 3);
            a6.head = k;
            CHECK(met_head(ref, ws, wsb, h.scores, L, h.vec, L, dim, cuts, ncuts, &a6, NULL) == 0,
                  "met_head (6 T)");
            free(ws);
            for (int pick = 0; pick < 9; pick++) { /* 6 single T, then 3 pairs */
                double Tsub[2];
                size_t iT6[2], nT = pick < 6 ? 1 : 2;
                iT6[0] = pick < 6 ? (size_t)pick : (size_t)(2 * (pick - 6));
                iT6[1] = iT6[0] + 1;
                for (size_t i = 0; i < nT; i++) Tsub[i] = T6[iT6[i]];
                met_axes a1 = a6;
                a1.T = Tsub, a1.n_T = nT;
                size_t wsb1 = met_workspace_bytes(L, dim, &a1), n1 = met_out_count(&a1);
                unsigned char *ws1 = malloc(wsb1);
                double *got = malloc(n1 * ncuts * sizeof *got);
                fill(ws1, wsb1, 1);
                CHECK(met_head(got, ws1, wsb1, h.scores, L, h.vec, L, dim, cuts, ncuts, &a1,
                               NULL) == 0, "met_head (few T)");
                for (size_t c = 0; c < ncuts; c++)
                    for (size_t i = 0; i < nT; i++) {
                        const double *o6 = ref + c * n6, *o1 = got + c * n1;
                        int same = 1;
                        for (int v = 0; v < MET_NPERN; v++)
                            for (size_t iN = 0; iN < a6.n_N; iN++)
                                same &= !memcmp(o6 + met_at_per_n(&a6, v, iN, iT6[i], 0),
                                                o1 + met_at_per_n(&a1, v, iN, i, 0), sizeof(double));
                        for (int v = 0; v < MET_NPERT; v++)
                            same &= !memcmp(o6 + met_at_per_t(&a6, v, iT6[i], 0),
                                            o1 + met_at_per_t(&a1, v, i, 0), sizeof(double));
                        for (size_t iE = 0; iE < a6.n_eps; iE++)
                            same &= !memcmp(o6 + met_at_grad_fd(&a6, iT6[i], iE, 0),
                                            o1 + met_at_grad_fd(&a1, i, iE, 0), sizeof(double));
                        block_cases++;
                        if (!same && block_diffs++ < 5)
                            fprintf(stderr, "  row blocks differ: L=%zu head kind %d, T=%g of a %zu-T grid, cut %zu\n",
                                    L, k, Tsub[i], nT, cuts[c]);
                    }
                free(ws1), free(got);
            }
            free(h.scores), free(h.vec);
        }
        free(ref);
    }
    CHECK(block_diffs == 0, "%ld of %ld (T, cut) results of few-T grids differ from the same T "
          "in a 6-T grid", block_diffs, block_cases);
    printf("test_metrics_ws: %ld (T, cut) results of 1- and 2-T grids (row blocks) against a 6-T "
           "grid, %ld differed\n", block_cases, block_diffs);
    printf("test_metrics_ws: %ld reruns in dirty workspaces, %ld differed\n", cases, mismatches);
    return check_summary("test_metrics_ws");
}
