/* bench_metrics.c -- time all metrics of one GPT-2-small-shaped layer (12 heads, d_head 64) at
 * L = 1024 with the paper grid N in {1,2,4,...,128}, 21 temperatures log-spaced 1e-3..1e2,
 * eps in {1e-3, 1e-1, 10}, softmax, and prefix cuts L in {32,...,1024} (one pass serves all
 * six). Inputs are synthetic: Gaussian q, k, v, with q and k scaled so that GPT-2's native
 * softmax(q.k/8) is clearly non-uniform. For comparison it times a direct O(n d) evaluation
 * per (row, N, T) of dist_true, dist_expect and the separability radius/count (d1 of the
 * bound alone would cost O(N n d) directly and is left out, in the direct method's favour)
 * on every 16th row of one head, and extrapolates by the row lengths.
 * usage: bench_metrics [L] [heads] [Nall] [options]  (run with OPENBLAS_NUM_THREADS=1); Nall = 1
 * takes N = 1..128 (grid.N's default "1:128", configs/example.cfg) instead of the powers of two.
 * Options: --no-direct skips the direct comparison; --norms3 runs softmax, sparsemax and ssmax;
 * --save FILE writes every output double; --check FILE compares against a saved run (e.g. of an
 * earlier version of metrics.c) and prints the worst relative difference per variable;
 * --poison fills the workspace with NaN bytes before every head (outputs must not change:
 * met_head may not read what it did not write); --bad-vectors puts a NaN into head 0's
 * vectors and an inf into head 1's (NaN must propagate as in the saved run); --paper takes
 * configs/paper.cfg's N (28 values, 1..16 then coarser to 128) and T (21 log-spaced + 8.0).
 * Besides the grid's time it prints, from the same run:
 *  - the fixed cost per head: met_head on the same heads with the minimal grid N = [1],
 *    T = [8], eps = [0.1] (what every head pays before its first (N, T): Gram, delta, top-K);
 *  - a roofline line: the (row, key, N, T) steps the grid counts (docs/metrics.md 4.4: two
 *    square roots and ~20 multiply-adds each, plus the c update's 2 K multiply-adds per
 *    (row, key, T)), the minimum time they need at this box's double sqrt and FMA throughput
 *    (measured here with tight loops), and the kernel's fraction of that time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }
/* CPU time of this process: the machine is shared, wall time would measure the neighbours */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static volatile double sink;

/* direct evaluation for one row: every quantity from x itself, O(n d) per (N, T) */
static void direct_row(const float *scores, const float *v, int t, int d, const int32_t *Ns,
                       int n_N, const double *Ts, int n_T, double *a, double *xs, int *ord) {
    int n = t + 1;
    for (int j = 0; j < n; j++) ord[j] = j;
    /* order by logit (qsort-free insertion of the top 128 is enough for the direct method) */
    int K = n - 1 < 128 ? n - 1 : 128;
    for (int k = 0; k < K; k++) {
        int b = k;
        for (int j = k + 1; j < n; j++)
            if (scores[t * 1024 + ord[j]] > scores[t * 1024 + ord[b]]) b = j;
        int tmp = ord[k]; ord[k] = ord[b]; ord[b] = tmp;
    }
    double s[64], sy[64], S[64], acc = 0;
    for (int iT = 0; iT < n_T; iT++) {
        double mx = -INFINITY, Z = 0;
        for (int j = 0; j < n; j++) mx = fmax(mx, scores[t * 1024 + j] / Ts[iT]);
        for (int j = 0; j < n; j++) Z += a[j] = exp(scores[t * 1024 + j] / Ts[iT] - mx);
        for (int j = 0; j < n; j++) a[j] /= Z;
        for (int k = 0; k < d; k++) S[k] = 0;
        for (int j = 0; j < n; j++)
            for (int k = 0; k < d; k++) S[k] += a[j] * v[j * d + k];
        for (int iN = 0; iN < n_N; iN++) {
            int N = Ns[iN];
            if (N >= n) continue;
            for (int k = 0; k < d; k++) s[k] = sy[k] = 0;
            for (int q = 0; q < N; q++) {
                int j = ord[q];
                double nj = 0;
                for (int k = 0; k < d; k++) nj += (double)v[j * d + k] * v[j * d + k];
                nj = 1 / sqrt(nj);
                for (int k = 0; k < d; k++) s[k] += a[j] * v[j * d + k], sy[k] += a[j] * nj * v[j * d + k];
            }
            double dt = 0, ex = 0, r = INFINITY, beta = (double)N / (n - 1);
            for (int i = 0; i < n; i++) {
                double d2 = 0, e2 = 0, y2 = 0, ni = 0;
                for (int k = 0; k < d; k++) ni += (double)v[i * d + k] * v[i * d + k];
                ni = 1 / sqrt(ni);
                for (int k = 0; k < d; k++) {
                    double ax = a[i] * v[i * d + k];
                    d2 += (ax - s[k]) * (ax - s[k]);
                    double ee = ax - beta * (S[k] - ax);
                    e2 += ee * ee;
                    double yy = ax * ni - sy[k];
                    y2 += yy * yy;
                }
                ex += sqrt(e2);
                dt += sqrt(d2);
                r = fmin(r, sqrt(y2));
            }
            acc += dt + ex + r;
        }
    }
    (void)xs;
    sink = acc;
}

/* ---- the box's throughput, measured in this run (the roofline line) ---- */

/* double square roots per second: y = sqrt(x) over an L1-resident array, which the compiler
 * vectorizes as it does the kernel's O(n) pass (checked: vsqrtpd zmm with -march=native) */
__attribute__((noinline)) static void sqrt_pass(double *restrict y, const double *restrict x, int m) {
    for (int i = 0; i < m; i++) y[i] = sqrt(x[i]);
}
static double sqrt_rate(void) {
    enum { M = 2048 };
    static double x[M], y[M];
    for (int i = 0; i < M; i++) x[i] = 1.0 + i * 0.37;
    double best = 0, s = 0;
    for (int rep = 0; rep < 5; rep++) {
        long iters = 2000;
        double t0 = now();
        for (long it = 0; it < iters; it++) {
            sqrt_pass(y, x, M);
            x[it & (M - 1)] = y[(it * 7) & (M - 1)] + 1.0; /* each pass depends on the last */
        }
        double dt = now() - t0, r = (double)iters * M / dt;
        best = r > best ? r : best;
        s += y[5];
    }
    sink = s;
    return best;
}

/* fused multiply-adds per second: 16 independent accumulators of 8 doubles */
typedef double bench_v8d __attribute__((vector_size(64)));
__attribute__((optimize("fp-contract=fast"))) static double fma_rate(void) {
    bench_v8d acc[16], m, c;
    for (int q = 0; q < 8; q++) m[q] = 0.999999, c[q] = 1e-7 * q;
    for (int r = 0; r < 16; r++)
        for (int q = 0; q < 8; q++) acc[r][q] = r + q;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        long iters = 4000000;
        double t0 = now();
        for (long it = 0; it < iters; it++)
            for (int r = 0; r < 16; r++) acc[r] = acc[r] * m + c;
        double dt = now() - t0, rr = (double)iters * 16 * 8 / dt;
        best = rr > best ? rr : best;
    }
    double s = 0;
    for (int r = 0; r < 16; r++) s += acc[r][0];
    sink = s;
    return best;
}

static const char *var_names[MET_NPERN + MET_NPERT + 1] = {
    "dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower", "sep_upper",
    "sep_marginal", "rows_used",
    "entropy", "entropy_norm", "grad_exact", "grad_bound", "grad_fd"};

/* index of the variable an output slot belongs to (per_N, then per_T, then grad_fd) */
static int var_of_slot(const met_axes *ax, size_t at) {
    size_t perN = ax->n_N * ax->n_T * ax->n_norm, perT = ax->n_T * ax->n_norm;
    if (at < MET_NPERN * perN) return (int)(at / perN);
    at -= MET_NPERN * perN;
    if (at < MET_NPERT * perT) return MET_NPERN + (int)(at / perT);
    return MET_NPERN + MET_NPERT;
}

int main(int argc, char **argv) {
    const char *save = NULL, *check = NULL;
    int direct = 1, norms3 = 0, poison = 0, bad_vectors = 0, paper = 0, minimal = 0, npos = 0;
    int per_n_T8 = 0;
    unsigned skip = 0;
    char *pos[4] = {argv[0], 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: bench_metrics [L=1024] [heads=12] [Nall=0] [--no-direct] [--norms3]\n"
                   "                     [--save FILE | --check FILE] [--poison] [--bad-vectors]\n"
                   "                     [--paper | --minimal] [--per-n-T8] [--no-grad-exact]\n"
                   "                     [--no-dist-expect]\n"
                   "  Nall=1: N = 1..128 instead of 1,2,4,...,128\n"
                   "  --paper: configs/paper.cfg's N (28 values) and T (22: 21 log-spaced + 8.0)\n"
                   "  --minimal: the grid N = [1], T = [8], eps = [0.1] (the fixed cost alone)\n"
                   "  --no-direct: skip the direct O(n d) comparison\n"
                   "  --norms3: softmax, sparsemax and ssmax instead of softmax alone\n"
                   "  --save FILE / --check FILE: write every output / compare with a saved run\n"
                   "  --poison: fill the workspace with NaN bytes before every head (timed too)\n"
                   "  --bad-vectors: a NaN in head 0's vectors, an inf in head 1's\n"
                   "  --per-n-T8: the per-N family at T = 8 only (metrics.per_N_T = [8.0])\n"
                   "  --no-grad-exact, --no-dist-expect: those families off (metrics.grad_exact,\n"
                   "    metrics.dist_expect = false)\n");
            return 0;
        } else if (!strcmp(argv[i], "--no-direct")) {
            direct = 0;
        } else if (!strcmp(argv[i], "--bad-vectors")) {
            bad_vectors = 1;
        } else if (!strcmp(argv[i], "--poison")) {
            poison = 1;
        } else if (!strcmp(argv[i], "--paper")) {
            paper = 1;
        } else if (!strcmp(argv[i], "--minimal")) {
            minimal = 1;
        } else if (!strcmp(argv[i], "--per-n-T8")) {
            per_n_T8 = 1;
        } else if (!strcmp(argv[i], "--no-grad-exact")) {
            skip |= MET_SKIP_GRAD_EXACT;
        } else if (!strcmp(argv[i], "--no-dist-expect")) {
            skip |= MET_SKIP_DIST_EXPECT;
        } else if (!strcmp(argv[i], "--norms3")) {
            norms3 = 1;
        } else if ((!strcmp(argv[i], "--save") || !strcmp(argv[i], "--check")) && i + 1 < argc) {
            if (argv[i][2] == 's') save = argv[++i]; else check = argv[++i];
        } else if (argv[i][0] != '-' && npos < 3) {
            pos[1 + npos++] = argv[i];
        } else {
            fprintf(stderr, "bench_metrics: unknown argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    argc = 1 + npos;
    argv = pos;
    int L = argc > 1 ? atoi(argv[1]) : 1024, H = argc > 2 ? atoi(argv[2]) : 12, d = 64;
    if (L < 32 || L > 1024 || H < 1) {
        fprintf(stderr, "bench_metrics: L must be in [32, 1024] and heads >= 1\n");
        return 2;
    }
    int32_t Ns[128] = {1, 2, 4, 8, 16, 32, 64, 128};
    int n_N = 8;
    if (argc > 3 && atoi(argv[3]) == 1) {
        n_N = 128;
        for (int i = 0; i < 128; i++) Ns[i] = i + 1;
    }
    double Ts[22], eps[3] = {1e-3, 1e-1, 10};
    int n_T = 21;
    for (int i = 0; i < 21; i++) Ts[i] = pow(10, -3 + 5.0 * i / 20);
    if (paper) { /* configs/paper.cfg: grid.N, and grid.T's include = [8.0] (between 10^0.75, 10^1) */
        static const int32_t pN[28] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                                       15, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128};
        n_N = 28;
        memcpy(Ns, pN, sizeof pN);
        memmove(Ts + 16, Ts + 15, 6 * sizeof *Ts);
        Ts[15] = 8.0;
        n_T = 22;
    }
    int n_eps = 3;
    if (minimal) n_N = 1, Ns[0] = 1, n_T = 1, Ts[0] = 8.0, n_eps = 1, eps[0] = 0.1;
    met_normalizer norm[3] = {MET_SOFTMAX, MET_SPARSEMAX, MET_SSMAX};
    met_axes ax = {.N = Ns, .n_N = (size_t)n_N, .T = Ts, .n_T = (size_t)n_T, .eps = eps, .n_eps = (size_t)n_eps, .norm = norm,
                   .n_norm = norms3 ? 3 : 1, .seed = 1, .skip = skip};
    uint8_t at8[22] = {0};
    for (int i = 0; i < n_T; i++) at8[i] = Ts[i] == 8.0;
    if (per_n_T8) ax.per_n_T = at8;
    size_t cuts[6], ncuts = 0;
    for (int c = 32; c <= L; c *= 2) cuts[ncuts++] = (size_t)c;
    if (cuts[ncuts - 1] != (size_t)L) cuts[ncuts++] = (size_t)L;

    float *scores = malloc((size_t)H * L * L * sizeof *scores);
    float *vecs = malloc((size_t)H * L * d * sizeof *vecs);
    float *q = malloc((size_t)L * d * sizeof *q), *k = malloc((size_t)L * d * sizeof *k);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < L * d; i++) q[i] = (float)(0.8 * gauss()), k[i] = (float)(0.8 * gauss());
        for (int i = 0; i < L * d; i++) vecs[(size_t)h * L * d + i] = (float)gauss();
        for (int t = 0; t < L; t++)
            for (int j = 0; j < L; j++) {
                double s = 0;
                if (j <= t)
                    for (int c = 0; c < d; c++) s += q[t * d + c] * k[j * d + c];
                scores[(size_t)h * L * L + (size_t)t * L + j] = j <= t ? (float)s : NAN;
            }
    }
    if (bad_vectors) {
        vecs[(size_t)5 * d + 3] = NAN;
        if (H > 1) vecs[(size_t)L * d + (size_t)37 * d] = INFINITY;
    }
    /* how peaked is GPT-2's native softmax(l/8) here: mean max weight over rows */
    double maxw = 0;
    for (int t = 0; t < L; t++) {
        double mx = -INFINITY, Z = 0;
        for (int j = 0; j <= t; j++) mx = fmax(mx, scores[(size_t)t * L + j] / 8);
        for (int j = 0; j <= t; j++) Z += exp(scores[(size_t)t * L + j] / 8 - mx);
        maxw += 1 / Z;
    }
    printf("inputs: %d heads, L=%d, d_head=%d; mean max weight of softmax(qk/8) = %.3f (uniform: %.4f)\n",
           H, L, d, maxw / L, (log((double)L) + 0.5772) / L);

    size_t wsb = met_workspace_bytes(L, d, &ax), nout = met_out_count(&ax);
    void *ws = malloc(wsb);
    double *out = malloc(ncuts * nout * sizeof *out);
    printf("grid: N=%d values (max 128), T=%d, eps=%d, normalizers=%zu, cuts=%zu; workspace %.1f MB\n",
           n_N, n_T, n_eps, ax.n_norm, ncuts, wsb / 1e6);
    double *outs = (save || check) ? malloc((size_t)H * ncuts * nout * sizeof *outs) : NULL;
    double t0 = now();
    for (int h = 0; h < H; h++) {
        ax.head = h;
        if (poison) memset(ws, 0xff, wsb);
        as_err err;
        if (met_head(out, ws, wsb, scores + (size_t)h * L * L, L, vecs + (size_t)h * L * d, L, d,
                     cuts, ncuts, &ax, &err)) {
            fprintf(stderr, "bench_metrics: %s\n", err.msg);
            return 1;
        }
        if (outs) memcpy(outs + (size_t)h * ncuts * nout, out, ncuts * nout * sizeof *out);
    }
    double t_fast = now() - t0;

    /* the fixed cost per head: the same heads with the minimal grid N = [1], T = [8],
     * eps = [0.1] (Gram, delta, top-K, one weight vector per row) */
    int32_t N1[1] = {1};
    double T1[1] = {8.0}, E1[1] = {0.1};
    met_axes ax1 = ax;
    ax1.N = N1, ax1.n_N = 1, ax1.T = T1, ax1.n_T = 1, ax1.eps = E1, ax1.n_eps = 1, ax1.n_norm = 1;
    ax1.per_n_T = NULL; /* its one T is 8 */
    size_t wsb1 = met_workspace_bytes(L, d, &ax1);
    void *ws1 = malloc(wsb1);
    double *out1 = malloc(ncuts * met_out_count(&ax1) * sizeof *out1);
    double t1 = now();
    for (int h = 0; h < H; h++) {
        ax1.head = h;
        as_err err;
        if (met_head(out1, ws1, wsb1, scores + (size_t)h * L * L, L, vecs + (size_t)h * L * d, L,
                     d, cuts, ncuts, &ax1, &err)) {
            fprintf(stderr, "bench_metrics: %s\n", err.msg);
            return 1;
        }
    }
    double t_fixed = now() - t1;
    free(ws1), free(out1);

    /* the roofline: steps (row, key, N, T) of the grid (dense count: every key of every row,
     * N < n) and the c update's multiply-adds (2 per (row, key, T, selected k), k < K) */
    int32_t Nmax = 0;
    for (int i = 0; i < n_N; i++) Nmax = Ns[i] > Nmax ? Ns[i] : Nmax;
    double steps = 0, c_fma = 0, zT = (double)n_T * (double)ax.n_norm;
    for (int t = 1; t < L; t++) { /* row t has n = t + 1 keys; N must be < n */
        double n = t + 1, nN = 0;
        for (int i = 0; i < n_N; i++) nN += Ns[i] < n; /* unique N in these grids */
        double K = Nmax < t ? Nmax : t;
        steps += n * nN * zT;
        c_fma += 2 * n * K * zT;
    }
    steps *= H, c_fma *= H;
    double r_sqrt = sqrt_rate(), r_fma = fma_rate();
    double t_sqrt = 2 * steps / r_sqrt, t_fmas = (20 * steps + c_fma) / r_fma;
    double t_roof = t_sqrt > t_fmas ? t_sqrt : t_fmas;
    size_t nall = (size_t)H * ncuts * nout;
    if (save) {
        FILE *f = fopen(save, "wb");
        if (!f || fwrite(outs, sizeof *outs, nall, f) != nall || fclose(f)) {
            fprintf(stderr, "bench_metrics: cannot write %s\n", save);
            return 1;
        }
    }
    if (check) {
        double *ref = malloc(nall * sizeof *ref);
        FILE *f = fopen(check, "rb");
        if (!f || fread(ref, sizeof *ref, nall, f) != nall) {
            fprintf(stderr, "bench_metrics: cannot read %zu doubles from %s (same arguments?)\n",
                    nall, check);
            return 1;
        }
        fclose(f);
        /* worst |new - old| / (|old| + 1e-300) per variable; NaN must match NaN */
        double worst[MET_NPERN + MET_NPERT + 1] = {0};
        size_t worst_at[MET_NPERN + MET_NPERT + 1] = {0};
        long nan_mismatch = 0;
        for (size_t i = 0; i < nall; i++) {
            int v = var_of_slot(&ax, i % nout);
            double g = outs[i], w = ref[i];
            if (isnan(g) || isnan(w)) {
                nan_mismatch += isnan(g) != isnan(w);
                continue;
            }
            double r = fabs(g - w) / (fabs(w) + 1e-300);
            if (g == w) r = 0;
            if (r > worst[v]) worst[v] = r, worst_at[v] = i;
        }
        printf("check vs %s: NaN mismatches %ld; worst relative difference:\n", check, nan_mismatch);
        for (int v = 0; v < MET_NPERN + MET_NPERT + 1; v++) {
            size_t i = worst_at[v], at = i % nout;
            printf("  %-13s %.3g", var_names[v], worst[v]);
            if (worst[v] > 0 && v < MET_NPERN) { /* where: head, cut, N, T */
                size_t iZ = at % ax.n_norm, iT = at / ax.n_norm % ax.n_T, iN = at / ax.n_norm / ax.n_T % ax.n_N;
                printf("  (head %zu, L %zu, N %d, T %.3g, %s: %.17g vs %.17g)", i / nout / ncuts,
                       cuts[i / nout % ncuts], Ns[iN], Ts[iT], met_normalizer_name(norm[iZ]),
                       outs[i], ref[i]);
            }
            printf("\n");
        }
        free(ref);
    }
    free(outs);
    printf("met_head: %d heads in %.3f CPU s (%.3f s/head); all %zu prefix L included\n", H, t_fast,
           t_fast / H, ncuts);
    printf("fixed cost (grid N=[1], T=[8], eps=[0.1]): %.3f CPU s, %.4f s/head (%.1f%% of the "
           "grid's time)\n", t_fixed, t_fixed / H, 100 * t_fixed / t_fast);
    printf("steps (row, key, N, T): %.4g, %.3f ns/step (grid time minus fixed cost: %.3f ns/step)\n",
           steps, 1e9 * t_fast / steps, 1e9 * (t_fast - t_fixed) / steps);
    printf("roofline: sqrt %.3g/s, FMA %.3g/s (8-lane doubles, this run); 2 sqrt/step -> %.3f s, "
           "20 FMA/step + c update %.3g FMA -> %.3f s; bound %.3f s, kernel at %.0f%% of it\n",
           r_sqrt, r_fma, t_sqrt, c_fma, t_fmas, t_roof, 100 * t_roof / t_fast);
    size_t xN = minimal ? 0 : 3, xT = minimal ? 0 : 15;
    printf("  example (head %d, L=%d, N=%d, T=%.3g): dist_true %.4f dist_expect %.4f sep_ratio %.3f "
           "grad_exact %.5f entropy_norm %.3f\n", H - 1, L, Ns[xN], Ts[xT],
           out[(ncuts - 1) * nout + met_at_per_n(&ax, MET_DIST_TRUE, xN, xT, 0)],
           out[(ncuts - 1) * nout + met_at_per_n(&ax, MET_DIST_EXPECT, xN, xT, 0)],
           out[(ncuts - 1) * nout + met_at_per_n(&ax, MET_SEP_RATIO, xN, xT, 0)],
           out[(ncuts - 1) * nout + met_at_per_t(&ax, MET_GRAD_EXACT, xT, 0)],
           out[(ncuts - 1) * nout + met_at_per_t(&ax, MET_ENTROPY_NORM, xT, 0)]);

    if (!direct) {
        printf("full paper grid (144 heads) estimate: %.1f s on one core, %.1f s on two\n",
               t_fast / H * 144, t_fast / H * 72);
        free(scores), free(vecs), free(q), free(k), free(ws), free(out);
        return 0;
    }
    /* direct method on every 16th row of head 0, extrapolated by row length */
    double *a = malloc(L * sizeof *a), *xs = malloc(L * sizeof *xs);
    int *ord = malloc(L * sizeof *ord);
    double sub_n = 0, all_n = 0;
    for (int t = 0; t < L; t++) all_n += t + 1;
    t0 = now();
    for (int t = 7; t < L; t += 16) {
        direct_row(scores, vecs, t, d, Ns, n_N, Ts, 21, a, xs, ord);
        sub_n += t + 1;
    }
    double t_sub = now() - t0, t_direct_head = t_sub * all_n / sub_n;
    /* each cut costs ~ Lc^2, so six separate passes cost sum (Lc/L)^2 ~ 1.33 x the longest */
    double cut_factor = 0;
    for (size_t c = 0; c < ncuts; c++) cut_factor += pow((double)cuts[c] / L, 2);
    printf("direct O(n d) per (row, N, T), dist_true + dist_expect + sep radius only, ONE cut:\n"
           "  %.3f CPU s on %d rows of one head -> %.2f s/head extrapolated, %.1f s for %d heads "
           "(all %zu cuts by separate passes: x%.2f = %.1f s)\n",
           t_sub, (L - 7 + 15) / 16, t_direct_head, t_direct_head * H, H, ncuts, cut_factor,
           t_direct_head * H * cut_factor);
    printf("speed-up vs direct (one cut): %.1fx; full paper grid (144 heads) estimate: %.1f s on "
           "one core, %.1f s on two\n", t_direct_head * H / t_fast, t_fast / H * 144,
           t_fast / H * 72);
    free(scores), free(vecs), free(q), free(k), free(ws), free(out), free(a), free(xs), free(ord);
    return 0;
}
