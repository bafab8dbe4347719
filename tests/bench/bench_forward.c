/* bench_forward.c -- speed of the GPT-2 forward pass against two yardsticks:
 * OpenBLAS sgemm on the same projection shapes (the roofline) and the
 * PyTorch reference forward (tests/reference/ref_gpt2.py time).
 *
 *   bench_forward --model DIR [--lengths 64,256,1024] [--threads 1,2]
 *                 [--repeat R] [--ref tests/reference/ref_gpt2.py] [--python /usr/bin/python3]
 *                 [--no-torch]
 *
 * The forward pass timed is the sweep's: every layer captured (a no-op
 * callback) plus the logits at the last position, so all blocks run. Times
 * are the best of R runs after a warm-up. FLOPs are fwd_flops()
 * (causal attention counted over the visible pairs only). The roofline is
 * the rate of one pass of the four projection sgemms at [L, C] x [C, 3C |
 * C | 4C] and [L, 4C] x [4C, C]; fraction = (FLOPs / roofline) / time. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blas_core.h"
#include "forward.h"
#include "model.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_list(const char *s, size_t *out, int max) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        out[n++] = strtoul(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s) return -1;
    }
    return n;
}

static int noop_layer(const fwd_layer_view *v, void *user, as_err *err) {
    (void)v, (void)user, (void)err;
    return 0;
}

/* GFLOP/s of the projection sgemms at length L (best of `repeat`) */
static double sgemm_roofline(size_t L, size_t C, int repeat) {
    size_t in_dims[4] = {C, C, C, 4 * C}, out_dims[4] = {3 * C, C, 4 * C, C};
    float *a = calloc(L * 4 * C, sizeof *a), *w = calloc(4 * C * 4 * C, sizeof *w);
    float *y = calloc(L * 4 * C, sizeof *y);
    for (size_t i = 0; i < L * 4 * C; i++) a[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < 16 * C * C; i++) w[i] = (float)(i % 5) * 0.01f;
    double flops = 0, best = 1e30;
    for (int s = 0; s < 4; s++) flops += 2.0 * L * in_dims[s] * out_dims[s];
    for (int r = 0; r <= repeat; r++) { /* r = 0 warms up */
        double t0 = now();
        for (int s = 0; s < 4; s++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)L, (int)out_dims[s],
                        (int)in_dims[s], 1.0f, a, (int)in_dims[s], w, (int)out_dims[s], 0.0f, y,
                        (int)out_dims[s]);
        double dt = now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    free(a), free(w), free(y);
    return flops / best / 1e9;
}

/* PyTorch reference seconds per forward for each length (one python run per
 * thread count, so the weights are read once); -1 where it failed */
static void torch_seconds(double *out, const char *python, const char *ref, const char *model,
                          const size_t *lengths, int n_len, size_t threads, int repeat) {
    char list[256] = "", cmd[8192];
    for (int i = 0; i < n_len; i++) {
        out[i] = -1;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%zu", i ? "," : "",
                 lengths[i]);
    }
    snprintf(cmd, sizeof cmd,
             "OPENBLAS_NUM_THREADS=%zu OMP_NUM_THREADS=%zu '%s' '%s' time --model '%s' "
             "--length %s --threads %zu --repeat %d",
             threads, threads, python, ref, model, list, threads, repeat);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    size_t L;
    double s;
    while (fscanf(p, "%zu %lf", &L, &s) == 2)
        for (int i = 0; i < n_len; i++)
            if (lengths[i] == L) out[i] = s;
    pclose(p);
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *ref = "tests/reference/ref_gpt2.py", *python = "/usr/bin/python3";
    size_t lengths[8] = {64, 256, 1024}, threads[4] = {1, 2};
    int n_len = 3, n_thr = 2, repeat = 3, torch = 1;
    const char *better = getenv("OPENBLAS_CORETYPE") ? NULL
                         : blas_core_better(blas_core_running(), blas_cpu_isa());
    if (better) /* attnsweep itself would run these (blas_core.h) */
        fprintf(stderr, "bench_forward: OpenBLAS runs its %s kernels on a CPU that runs %s's; "
                "attnsweep runs the latter: set OPENBLAS_CORETYPE=%s to time what it runs\n",
                blas_core_running(), better, better);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v) model_dir = v, i++;
        else if (!strcmp(a, "--lengths") && v) n_len = parse_list(v, lengths, 8), i++;
        else if (!strcmp(a, "--threads") && v) n_thr = parse_list(v, threads, 4), i++;
        else if (!strcmp(a, "--repeat") && v) repeat = atoi(v), i++;
        else if (!strcmp(a, "--ref") && v) ref = v, i++;
        else if (!strcmp(a, "--python") && v) python = v, i++;
        else if (!strcmp(a, "--no-torch")) torch = 0;
        else {
            fprintf(stderr,
                    "usage: bench_forward --model DIR [--lengths 64,256,1024] [--threads 1,2]\n"
                    "       [--repeat R] [--ref tests/reference/ref_gpt2.py] [--python /usr/bin/python3] "
                    "[--no-torch]\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    if (!model_dir || n_len <= 0 || n_thr <= 0 || repeat < 1) {
        fprintf(stderr, "bench_forward: --model DIR is required (try --help)\n");
        return 2;
    }
    as_err err = {{0}};
    gpt2_model m;
    if (model_load(&m, model_dir, &err) != 0) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    size_t max_L = 0;
    for (int i = 0; i < n_len; i++) max_L = lengths[i] > max_L ? lengths[i] : max_L;
    fwd_workspace ws;
    if (fwd_workspace_init(&ws, &m.cfg, max_L, &err) != 0) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    int32_t *tokens = malloc(max_L * sizeof *tokens);
    for (size_t t = 0; t < max_L; t++) tokens[t] = (int32_t)((t * 7919 + 13) % m.cfg.vocab_size);
    float *logits = malloc(m.cfg.vocab_size * sizeof *logits);

    printf("GPT-2 forward (%zu layers, C=%zu), all layers captured + last-position logits; "
           "best of %d\n",
           m.cfg.n_layer, m.cfg.n_embd, repeat);
    printf("%7s %5s %10s %10s %9s %10s %10s %9s %9s\n", "threads", "L", "s/forward", "tokens/s",
           "GFLOP/s", "roofline", "fraction", "torch s", "speed-up");
    for (int ti = 0; ti < n_thr; ti++) {
        double torch_s[8];
        for (int li = 0; li < n_len; li++) torch_s[li] = -1;
        if (torch)
            torch_seconds(torch_s, python, ref, model_dir, lengths, n_len, threads[ti], repeat);
        openblas_set_num_threads((int)threads[ti]);
        for (int li = 0; li < n_len; li++) {
            size_t L = lengths[li], last = L - 1;
            fwd_request req = {.capture_mask = ((uint64_t)1 << m.cfg.n_layer) - 1,
                                .on_layer = noop_layer, .logit_positions = &last,
                                .n_logit_positions = 1, .logits = logits};
            double best = 1e30;
            for (int r = 0; r <= repeat; r++) {
                double t0 = now();
                if (fwd_forward(&ws, &m, tokens, L, &req, &err) != 0) {
                    fprintf(stderr, "bench_forward: %s\n", err.msg);
                    return 1;
                }
                double dt = now() - t0;
                if (r > 0 && dt < best) best = dt;
            }
            double flops = fwd_flops(&m.cfg, L, m.cfg.n_layer, 1);
            double roof = sgemm_roofline(L, m.cfg.n_embd, repeat);
            double ts = torch_s[li];
            printf("%7zu %5zu %10.4f %10.0f %9.1f %10.1f %9.0f%% %9.4f %8.2fx\n", threads[ti], L,
                   best, L / best, flops / best / 1e9, roof, 100.0 * flops / roof / 1e9 / best,
                   ts, ts > 0 ? ts / best : 0.0);
            fflush(stdout);
        }
    }
    free(tokens), free(logits);
    fwd_workspace_free(&ws);
    model_free(&m);
    return 0;
}
