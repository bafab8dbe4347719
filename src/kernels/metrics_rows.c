/* metrics_rows.c -- metrics.query_rows = "sample:K": the row rule, the sampled cuts and the
 * standard errors of their means (docs/metrics.md section 9.1). */
#include "metrics.h"

#include <math.h>
#include <string.h>

#include "metrics_int.h"

static inline uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t met_row_key(uint64_t seed, int64_t window, int64_t L) {
    /* no layer, head or normalizer in the key: every head of a cell sees the same rows */
    uint64_t k = mix64(seed ^ 0x726f7773616d706cull); /* "rowsampl": not a direction key */
    k = mix64(k ^ (uint64_t)window);
    return mix64(k ^ (uint64_t)L);
}

size_t met_sample_rows(uint32_t *rows, size_t K, size_t first, size_t L, uint64_t key) {
    size_t m = L > first ? L - first : 0;
    if (K >= m) {
        for (size_t i = 0; i < m; i++) rows[i] = (uint32_t)(first + i);
        return m;
    }
    for (size_t i = 0; i < K; i++) {
        size_t lo = first + i * m / K, hi = first + (i + 1) * m / K; /* hi > lo: m > K */
        /* uniform in [lo, hi): the top 32 bits of the hash times the width (width < 2^32,
         * bias below 2^-32 per row) */
        uint64_t h = mix64(key ^ mix64((uint64_t)i)) >> 32;
        rows[i] = (uint32_t)(lo + (size_t)((h * (uint64_t)(hi - lo)) >> 32));
    }
    return K;
}

/* SE of a mean over k of `pop` eligible rows from its sum S and sum of squares Q (section
 * 9.1: the simple-random-sample formula with the finite-population factor). */
static double std_err(double mean, double S, double Q, double k, double pop) {
    if (isnan(mean)) return NAN;
    if (k >= pop) return 0.0;
    if (k < 2) return NAN;
    double var = (Q - S * S / k) / (k - 1);
    if (var < 0) var = 0; /* round-off of the one-pass sums */
    return sqrt(var / k * (1.0 - k / pop));
}

void met_exact_se(double *out, const met_axes *ax) {
    size_t nmean = met_mean_count(ax);
    for (size_t i = 0; i < nmean; i++) out[nmean + i] = isnan(out[i]) ? NAN : 0.0;
    /* counts and dist_random_se (a Monte-Carlo SE, not a mean over rows) have no SE */
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
                out[met_at_se(ax, met_at_per_n(ax, MET_ROWS_USED, iN, iT, iZ))] = NAN;
                out[met_at_se(ax, met_at_random(ax, MET_DIST_RANDOM_SE, iN, iT, iZ))] = NAN;
            }
}

/* The SE block of one cut (out: its means, already finished; acc and acc_sq: the sums). */
static void finish_se(double *out, const met_ws *w, size_t Lc) {
    const met_axes *ax = w->ax;
    met_exact_se(out, ax); /* NaN / 0 everywhere first; the sampled means below */
    double popT = ax->full_row ? (double)Lc : (double)Lc - 1;
    for (size_t iN = 0; iN < ax->n_N; iN++) {
        size_t N = (size_t)ax->N[iN];
        double popN = Lc > N ? (ax->full_row ? (double)Lc : (double)(Lc - N)) : 0;
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++)
                for (int v = 0; v < MET_ROWS_USED + 2; v++) {
                    /* the per-N means, then dist_random and dist_random_upper (section 4.6) */
                    size_t at = v < MET_ROWS_USED ? met_at_per_n(ax, v, iN, iT, iZ)
                                : met_at_random(ax, v == MET_ROWS_USED ? MET_DIST_RANDOM
                                                                       : MET_DIST_RANDOM_UPPER, iN, iT, iZ);
                    out[met_at_se(ax, at)] =
                        std_err(out[at], w->acc[at], w->acc_sq[at], w->cntN[iN], popN);
                }
    }
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            for (int v = 0; v < MET_NPERT; v++) {
                if (v == MET_GRAD_BOUND) continue; /* a curve of T, not a mean: SE 0 */
                size_t at = met_at_per_t(ax, v, iT, iZ);
                out[met_at_se(ax, at)] = std_err(out[at], w->acc[at], w->acc_sq[at], w->cntT, popT);
            }
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                out[met_at_se(ax, at)] = std_err(out[at], w->acc[at], w->acc_sq[at], w->cntT, popT);
            }
        }
}

void met_sampled_cuts(double *out, met_ws *w, const size_t *cuts, size_t ncuts) {
    const met_axes *ax = w->ax;
    size_t nmean = met_mean_count(ax), nout = w->nout, first = ax->full_row ? 0 : 1;
    double *acc = w->acc;
    for (size_t c = 0; c < ncuts; c++) {
        if (c && cuts[c] == cuts[c - 1]) {
            memcpy(out + nout * c, out + nout * (c - 1), nout * sizeof *out);
            continue;
        }
        size_t Lc = cuts[c];
        met_reset_acc(w);
        memset(w->acc_sq, 0, nmean * sizeof *w->acc_sq);
        size_t k = met_sample_rows(w->samp_rows, ax->sample_rows, first, Lc,
                                   met_row_key(ax->seed, ax->window, (int64_t)Lc));
        for (size_t i = 0; i < k; i++) {
            size_t t = w->samp_rows[i];
            /* one row alone into row_acc (0 + x = x: its values exactly), then summed in row
             * order into acc, as the unsampled path sums */
            memset(w->row_acc, 0, nmean * sizeof *w->row_acc);
            w->acc = w->row_acc;
            if (ax->full_row) met_process_row(w, t, Lc, w->delta_run[Lc - 1]);
            else met_process_row(w, t, t + 1, w->delta_run[t]);
            w->acc = acc;
            for (size_t j = 0; j < nmean; j++) {
                double x = w->row_acc[j];
                acc[j] += x;
                w->acc_sq[j] += x * x;
            }
        }
        met_finish_cut(out + nout * c, w);
        finish_se(out + nout * c, w, Lc);
    }
}
