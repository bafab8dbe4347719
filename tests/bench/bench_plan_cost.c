/* bench_plan_cost.c -- re-measure the constants of plan's cost model (grid.h).
 *
 * usage: bench_plan_cost [L] [maxN] [n_T]     (defaults 512 128 22)
 *
 * 1. sgemm rate on a GPT-2 small shape ([L, 768] x [768, 2304], c_attn) with
 *    the current OPENBLAS_NUM_THREADS -> --sgemm-gflops (divide by threads).
 * 2. met_head on one random head (d = 64, N = 1..maxN, n_T log-spaced T, 3 eps,
 *    softmax) divided by grid_metric_steps() -> --metric-ns.
 * Run with OPENBLAS_NUM_THREADS=1 on an otherwise idle machine. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "grid.h"
#include "plan.h"
#include "metrics.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* deterministic uniform(-1, 1) */
static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int main(int argc, char **argv) {
    size_t L = argc > 1 ? (size_t)atol(argv[1]) : 512;
    size_t maxN = argc > 2 ? (size_t)atol(argv[2]) : 128;
    size_t n_T = argc > 3 ? (size_t)atol(argv[3]) : 22;
    uint64_t seed = 1;

    /* 1. sgemm */
    size_t C = 768;
    float *x = malloc(L * C * sizeof *x), *w = malloc(C * 3 * C * sizeof *w),
          *y = malloc(L * 3 * C * sizeof *y);
    for (size_t i = 0; i < L * C; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < 3 * C * C; i++) w[i] = frand(&seed);
    int reps = 0;
    double t0 = now(), t;
    do {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)L, (int)(3 * C), (int)C, 1.0f,
                    x, (int)C, w, (int)(3 * C), 0.0f, y, (int)(3 * C));
        reps++;
    } while ((t = now() - t0) < 1.0);
    double gflops = 2.0 * (double)L * (double)C * 3.0 * (double)C * reps / t / 1e9;
    printf("sgemm [%zu x %zu] x [%zu x %zu]: %.1f GFLOP/s (all BLAS threads)\n", L, C, C, 3 * C,
           gflops);
    free(x), free(w), free(y);

    /* 2. one head's metrics */
    size_t d = 64;
    float *scores = malloc(L * L * sizeof *scores), *vec = malloc(L * d * sizeof *vec);
    for (size_t i = 0; i < L * L; i++) scores[i] = 8.0f * frand(&seed);
    for (size_t i = 0; i < L * d; i++) vec[i] = frand(&seed);
    int32_t *N = malloc(maxN * sizeof *N);
    for (size_t i = 0; i < maxN; i++) N[i] = (int32_t)(i + 1);
    double *T = malloc(n_T * sizeof *T), eps[3] = {1e-3, 1e-1, 10.0};
    for (size_t i = 0; i < n_T; i++) T[i] = n_T > 1 ? pow(10.0, -3.0 + 5.0 * (double)i / (double)(n_T - 1)) : 8.0;
    met_normalizer norm = MET_SOFTMAX;
    met_axes ax = {.N = N, .n_N = maxN, .T = T, .n_T = n_T, .eps = eps, .n_eps = 3, .norm = &norm,
                   .n_norm = 1, .ssmax_scale = 0, .full_row = 0, .seed = 1};
    size_t ws_bytes = met_workspace_bytes(L, d, &ax);
    void *ws = malloc(ws_bytes);
    double *out = malloc(met_out_count(&ax) * sizeof *out);
    size_t cut = L;
    as_err err;
    reps = 0;
    t0 = now();
    do {
        if (met_head(out, ws, ws_bytes, scores, L, vec, L, d, &cut, 1, &ax, &err)) {
            fprintf(stderr, "met_head: %s\n", err.msg);
            return 1;
        }
        reps++;
    } while ((t = now() - t0) < 1.0);
    double per_head = t / reps;
    double steps = grid_metric_steps(L, 1, d, N, maxN, n_T, 1, 3, AS_COST_ROW_OPS);
    printf("met_head L %zu, d %zu, N 1..%zu, %zu T, 3 eps, softmax: %.4f s per head\n", L, d, maxN,
           n_T, per_head);
    printf("=> --metric-ns %.3g   (grid.h default %.3g; row_ops %.0f)\n", per_head / steps * 1e9,
           AS_COST_METRIC_NS, AS_COST_ROW_OPS);
    printf("=> --sgemm-gflops %.0f per BLAS thread (set OPENBLAS_NUM_THREADS=1 to measure it)\n",
           gflops);
    free(scores), free(vec), free(N), free(T), free(ws), free(out);
    return 0;
}
