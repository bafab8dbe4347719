/* test_metrics_rows.c -- metrics.query_rows = "sample:K" (docs/metrics.md section 9.1).
 * Protects: the row rule (deterministic, one row inside each of K equal strata, ascending,
 * K >= the rows gives every row, a new key moves rows, every position of a stratum is
 * reachable); a head with K >= its rows keeping the bits of the unsampled head (SE 0); the
 * same rows for every head of a cell (the per-N means, which do not depend on the head's
 * directions, are equal across head ids); the sampled means and their standard errors
 * against a float64 recomputation from the per-row values (taken as differences of the
 * unsampled head's prefix cuts, 1e-9 relative), dist_random and dist_random_upper among them
 * (metrics.dist_random on: their row-sampling SE beside the Monte-Carlo dist_random_se, which
 * has none); and the sampled means within 5 SE of the full ones on random heads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"
#include "xorshift.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double gauss(void) { return xs_gauss(&rng); }

static void row_rule(void) {
    uint32_t r1[300], r2[300];
    size_t L = 257, first = 1, m = L - first;
    for (size_t K = 1; K <= 300; K += 37) {
        size_t k = met_sample_rows(r1, K, first, L, met_row_key(3, 4, (int64_t)L));
        size_t k2 = met_sample_rows(r2, K, first, L, met_row_key(3, 4, (int64_t)L));
        CHECK(k == (K < m ? K : m), "K=%zu: %zu rows", K, k);
        CHECK(k == k2 && !memcmp(r1, r2, k * sizeof *r1), "K=%zu: not deterministic", K);
        for (size_t i = 0; i < k; i++) {
            size_t lo = first + i * m / k, hi = first + (i + 1) * m / k;
            if (K >= m) lo = first + i, hi = lo + 1; /* every row */
            CHECK(r1[i] >= lo && r1[i] < hi, "K=%zu: row %zu = %u outside [%zu, %zu)", K, i,
                  r1[i], lo, hi);
            CHECK(!i || r1[i] > r1[i - 1], "K=%zu: rows not ascending at %zu", K, i);
        }
    }
    /* a different window or L moves some rows; the seed too */
    met_sample_rows(r1, 16, 1, L, met_row_key(3, 4, (int64_t)L));
    int moved[3] = {0, 0, 0};
    met_sample_rows(r2, 16, 1, L, met_row_key(3, 5, (int64_t)L));
    moved[0] = memcmp(r1, r2, 16 * sizeof *r1) != 0;
    met_sample_rows(r2, 16, 1, L, met_row_key(4, 4, (int64_t)L));
    moved[1] = memcmp(r1, r2, 16 * sizeof *r1) != 0;
    met_sample_rows(r2, 16, 1, L, met_row_key(3, 4, (int64_t)L + 1));
    moved[2] = memcmp(r1, r2, 16 * sizeof *r1) != 0;
    CHECK(moved[0] && moved[1] && moved[2], "window %d seed %d L %d", moved[0], moved[1], moved[2]);
    /* every position of a stratum of width 8 is drawn over 400 keys (uniform in the stratum) */
    int seen[8] = {0};
    for (int key = 0; key < 400; key++) {
        met_sample_rows(r1, 4, 0, 32, met_row_key(1, key, 32));
        seen[r1[2] - 16] = 1;
    }
    int all = 1;
    for (int i = 0; i < 8; i++) all &= seen[i];
    CHECK(all, "a position of stratum 2 was never drawn");
    CHECK(met_sample_rows(r1, 5, 1, 1, 7) == 0, "L = first: no rows");
}

typedef struct {
    size_t L, d;
    float *scores, *vec;
} head_in;

static head_in make_head(size_t L, size_t d) {
    head_in h = {L, d, malloc(L * L * sizeof(float)), malloc(L * d * sizeof(float))};
    for (size_t t = 0; t < L; t++)
        for (size_t j = 0; j < L; j++) h.scores[t * L + j] = j <= t ? (float)(3 * gauss()) : NAN;
    for (size_t i = 0; i < L * d; i++) h.vec[i] = (float)gauss();
    return h;
}

static int run(double *out, const head_in *h, const size_t *cuts, size_t ncuts, const met_axes *ax) {
    size_t wsb = met_workspace_bytes(h->L, h->d, ax);
    void *ws = malloc(wsb);
    as_err err;
    int rc = met_head(out, ws, wsb, h->scores, h->L, h->vec, h->L, h->d, cuts, ncuts, ax, &err);
    CHECK(rc == 0, "met_head: %s", err.msg);
    free(ws);
    return rc;
}

static const int32_t Ns[] = {1, 4, 16};
static const double Ts[] = {0.05, 1, 8};
static const double eps[] = {1e-2};
static const met_normalizer norms[] = {MET_SOFTMAX, MET_SPARSEMAX};

static met_axes axes(int full_row, size_t K, int64_t head) {
    return (met_axes){.N = Ns, .n_N = 3, .T = Ts, .n_T = 3, .eps = eps, .n_eps = 1, .norm = norms,
                      .n_norm = 2, .seed = 11, .window = 6, .layer = 2, .head = head,
                      .full_row = full_row, .sample_rows = K, .random_subsets = 4};
}

/* The N index of output i when it is a per-N mean (the per-N family or dist_random's block,
 * section 4.6), else -1; *var gets its variable: MET_* of the per-N family, MET_NPERN +
 * MET_DIST_RANDOM* of the random block, -1 for the rest. */
static long n_index(const met_axes *a, size_t i, int *var) {
    size_t blk = a->n_T * a->n_norm, nperN = MET_NPERN * a->n_N * blk;
    size_t rnd0 = met_at_random(a, 0, 0, 0, 0);
    *var = -1;
    if (i < nperN) return *var = (int)(i / (a->n_N * blk)), (long)((i / blk) % a->n_N);
    if (i < rnd0) return -1;
    *var = MET_NPERN + (int)((i - rnd0) / (a->n_N * blk));
    return (long)(((i - rnd0) / blk) % a->n_N);
}

/* K >= the rows: the unsampled bits, SE 0 (NaN where the mean is) */
static void all_rows_keep_bits(const head_in *h) {
    size_t cuts[2] = {h->L / 2, h->L};
    for (int full = 0; full < 2; full++) {
        met_axes a0 = axes(full, 0, 1), aK = axes(full, h->L, 1);
        size_t n0 = met_out_count(&a0), nm = met_mean_count(&aK);
        double *o0 = malloc(2 * n0 * sizeof *o0), *oK = malloc(2 * met_out_count(&aK) * sizeof *oK);
        run(o0, h, cuts, 2, &a0);
        run(oK, h, cuts, 2, &aK);
        CHECK(met_out_count(&aK) == 2 * n0, "SE block size");
        long diff = 0, se_bad = 0;
        for (size_t c = 0; c < 2; c++)
            for (size_t i = 0; i < nm; i++) {
                double a = o0[c * n0 + i], b = oK[c * 2 * nm + i], se = oK[c * 2 * nm + nm + i];
                diff += memcmp(&a, &b, sizeof a) != 0;
                se_bad += isnan(a) ? !isnan(se) : !(se == 0 || isnan(se));
            }
        CHECK(diff == 0, "full_row=%d: %ld means differ from the unsampled head", full, diff);
        CHECK(se_bad == 0, "full_row=%d: %ld SE not 0 / NaN", full, se_bad);
        free(o0), free(oK);
    }
}

/* Per-row values of the unsampled visible head from its prefix cuts 1..L: value of row t =
 * sum(t + 1) - sum(t), sum(c) = mean(c) * count(c). */
static void row_values(double *x, const head_in *h, const met_axes *a0, size_t nm) {
    size_t L = h->L, *cuts = malloc(L * sizeof *cuts);
    for (size_t c = 0; c < L; c++) cuts[c] = c + 1;
    double *o = malloc(L * nm * sizeof *o);
    run(o, h, cuts, L, a0);
    for (size_t c = 0; c < L; c++)
        for (size_t i = 0; i < nm; i++) {
            int var;
            long iN = n_index(a0, i, &var);
            double cnt = iN < 0 ? (double)c /* rows 1 .. c */
                                : (double)c + 1 > Ns[iN] ? (double)c + 1 - Ns[iN] : 0;
            double s = cnt > 0 ? o[c * nm + i] * cnt : 0, sp = 0;
            if (c) {
                double cp = iN < 0 ? (double)c - 1 : (double)c > Ns[iN] ? (double)c - Ns[iN] : 0;
                sp = cp > 0 ? o[(c - 1) * nm + i] * cp : 0;
            }
            x[c * nm + i] = s - sp;
        }
    free(cuts), free(o);
}

static void sampled_against_rows(const head_in *h) {
    size_t L = h->L, K = 48;
    met_axes a0 = axes(0, 0, 1), aK = axes(0, K, 1), aK2 = axes(0, K, 9);
    size_t nm = met_mean_count(&a0);
    double *x = malloc(L * nm * sizeof *x), *oK = malloc(2 * nm * sizeof *oK);
    double *oK2 = malloc(2 * nm * sizeof *oK2), *oall = malloc(nm * sizeof *oall);
    row_values(x, h, &a0, nm);
    size_t cut = L;
    run(oK, h, &cut, 1, &aK);
    run(oK2, h, &cut, 1, &aK2);
    run(oall, h, &cut, 1, &a0);
    uint32_t rows[64];
    size_t k = met_sample_rows(rows, K, 1, L, met_row_key(11, 6, (int64_t)L));
    CHECK(k == K, "%zu rows", k);
    long same = 0, close_mean = 0, close_se = 0, within = 0, checked = 0, rnd_checked = 0, mc_se = 0;
    size_t nperN = MET_NPERN * a0.n_N * a0.n_T * a0.n_norm;
    for (size_t i = 0; i < nm; i++) {
        int v;
        long n_at = n_index(&a0, i, &v);
        int perN = n_at >= 0;
        size_t iN = perN ? (size_t)n_at : 0;
        if (v == MET_ROWS_USED) continue;
        if (v == MET_NPERN + MET_DIST_RANDOM_SE) { /* the Monte-Carlo SE: no row SE of its own */
            mc_se += isnan(oK[nm + i]) && oK[i] >= 0;
            continue;
        }
        /* the same rows for head 1 and head 9: the per-N family does not see the head id
         * (dist_random's subsets do) */
        if (i < nperN) same += memcmp(&oK[i], &oK2[i], sizeof oK[i]) == 0;
        double S = 0, Q = 0, kk = 0, pop = perN ? (double)(L - (size_t)Ns[iN]) : (double)(L - 1);
        for (size_t r = 0; r < k; r++) {
            if (perN && rows[r] < (uint32_t)Ns[iN]) continue; /* a row with <= N keys */
            double v2 = x[rows[r] * nm + i];
            S += v2, Q += v2 * v2, kk += 1;
        }
        if (isnan(oall[i]) || kk < 2) continue;
        double mean = S / kk, var = 0;
        for (size_t r = 0; r < k; r++) {
            if (perN && rows[r] < (uint32_t)Ns[iN]) continue;
            double dv = x[rows[r] * nm + i] - mean;
            var += dv * dv;
        }
        double se = sqrt(var / (kk - 1) / kk * (1 - kk / pop)); /* two-pass, independent */
        double scale = fabs(mean) + sqrt(Q / kk); /* 1e-12 absolute below: the differences round */
        checked++;
        rnd_checked += v >= MET_NPERN;
        close_mean += fabs(oK[i] - mean) <= 1e-12 + 1e-9 * scale;
        close_se += fabs(oK[nm + i] - se) <= 1e-12 + 1e-9 * scale;
        /* the continuous means; a rare event (sep_lower, sep_marginal, sep_ratio near 0 or 1)
         * can miss every sampled row: SE 0 there says nothing (docs/metrics.md 9.1) */
        int rare = v == MET_SEP_RATIO || v == MET_SEP_LOWER || v == MET_SEP_UPPER || v == MET_SEP_MARGINAL;
        within += rare || fabs(oK[i] - oall[i]) <= 5 * oK[nm + i] + 1e-12 * scale;
        if (fabs(oK[i] - mean) > 1e-12 + 1e-9 * scale)
            fprintf(stderr, "  at %zu (var %d): sampled %.12g rows' mean %.12g\n", i, v, oK[i], mean);
    }
    CHECK(checked > 100, "only %ld means checked", checked);
    CHECK(rnd_checked >= (long)(2 * 2 * a0.n_T * a0.n_norm), "only %ld dist_random means checked", rnd_checked);
    CHECK(mc_se == (long)(a0.n_N * a0.n_T * a0.n_norm), "dist_random_se: %ld of %zu a number with a NaN row SE",
          mc_se, a0.n_N * a0.n_T * a0.n_norm);
    CHECK(same == (long)(nperN - a0.n_N * a0.n_T * a0.n_norm), "per-N means differ across heads (%ld same)", same);
    CHECK(close_mean == checked, "%ld of %ld sampled means off the rows' mean", checked - close_mean, checked);
    CHECK(close_se == checked, "%ld of %ld SE off the two-pass SE", checked - close_se, checked);
    CHECK(within == checked, "%ld of %ld sampled means more than 5 SE from the full mean",
          checked - within, checked);
    free(x), free(oK), free(oK2), free(oall);
}

int main(void) {
    row_rule();
    head_in h = make_head(160, 8);
    all_rows_keep_bits(&h);
    sampled_against_rows(&h);
    free(h.scores), free(h.vec);
    return check_summary("test_metrics_rows");
}
