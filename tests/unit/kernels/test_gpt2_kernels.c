/* test_gpt2_kernels.c -- the forward pass's elementwise kernels (layernorm,
 * bias + tanh GELU, causal softmax, exp) against brute-force double
 * implementations of the textbook formulas. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpt2.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
/* uniform in [lo, hi) (xorshift64*) */
static double uniform(double lo, double hi) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 2685821657736338717ull;
    return lo + (hi - lo) * (double)(r >> 11) / 9007199254740992.0;
}

static void test_expf(void) {
    double worst = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = (float)(-87.0 + 175.0 * i / 200000.0);
        double want = exp((double)x), got = gpt2_expf(x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    CHECK(worst < 2e-7, "gpt2_expf worst relative error %.3g on [-87, 88]", worst);
    CHECK(gpt2_expf(-100.0f) == 0.0f, "exp(-100) underflows to 0, got %g", gpt2_expf(-100.0f));
    CHECK(gpt2_expf(-INFINITY) == 0.0f, "exp(-inf) = 0, got %g", gpt2_expf(-INFINITY));
    CHECK(isfinite(gpt2_expf(NAN)), "exp(NaN) clamps (documented), got %g", gpt2_expf(NAN));
    CHECK(isfinite(gpt2_expf(1000.0f)), "exp(1000) clamps, got %g", gpt2_expf(1000.0f));
    CHECK(gpt2_expf(0.0f) == 1.0f, "exp(0) = 1, got %.9g", gpt2_expf(0.0f));
    printf("gpt2_expf: worst relative error %.3g\n", worst);
}

static void test_layernorm(void) {
    enum { ROWS = 5, N = 97 };
    float x[ROWS * N], w[N], b[N], out[ROWS * N];
    for (int i = 0; i < ROWS * N; i++) x[i] = (float)uniform(-3, 3) + (i / N) * 10.0f;
    for (int i = 0; i < N; i++) {
        w[i] = (float)uniform(0.5, 1.5);
        b[i] = (float)uniform(-0.5, 0.5);
    }
    const float eps = 1e-5f;
    gpt2_layernorm(out, x, w, b, ROWS, N, eps);
    for (int t = 0; t < ROWS; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < N; i++) mean += x[t * N + i];
        mean /= N;
        for (int i = 0; i < N; i++) var += (x[t * N + i] - mean) * (x[t * N + i] - mean);
        var /= N; /* biased, as torch.nn.LayerNorm */
        for (int i = 0; i < N; i++) {
            double want = (x[t * N + i] - mean) / sqrt(var + eps) * w[i] + b[i];
            CHECK_CLOSE(out[t * N + i], want, 1e-6, 1e-6, "layernorm");
        }
    }
    /* in place gives the same numbers */
    float y[ROWS * N];
    memcpy(y, x, sizeof y);
    gpt2_layernorm(y, y, w, b, ROWS, N, eps);
    CHECK(!memcmp(y, out, sizeof y), "layernorm in place differs from out of place");
    /* a constant row: variance 0, output = b (eps keeps it finite) */
    float c[N], co[N];
    for (int i = 0; i < N; i++) c[i] = 2.5f;
    gpt2_layernorm(co, c, w, b, 1, N, eps);
    for (int i = 0; i < N; i++) CHECK_CLOSE(co[i], b[i], 1e-6, 0, "layernorm constant row");
}

static void test_gelu(void) {
    enum { ROWS = 3, N = 1001 };
    static float x[ROWS * N], bias[N];
    for (int i = 0; i < N; i++) bias[i] = (float)uniform(-0.5, 0.5);
    for (int i = 0; i < ROWS * N; i++) x[i] = (float)(-12.0 + 24.0 * (i % N) / (N - 1)) + (i / N) * 0.1f;
    static float y[ROWS * N];
    memcpy(y, x, sizeof y);
    gpt2_bias_gelu(y, bias, ROWS, N);
    double worst = 0;
    for (int i = 0; i < ROWS * N; i++) {
        double v = (double)x[i] + (double)bias[i % N];
        double want = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
        /* float input rounding of x + bias is part of the kernel's contract */
        double tol = 2e-7 * fabs(v) + 1e-7;
        if (fabs(y[i] - want) > worst) worst = fabs(y[i] - want);
        CHECK_CLOSE(y[i], want, tol, 1e-6, "gelu_new");
    }
    printf("gelu: worst absolute error %.3g on [-12, 12]\n", worst);
}

static void test_softmax(void) {
    const size_t Ls[] = {1, 2, 7, 16, 17, 130};
    for (size_t c = 0; c < sizeof Ls / sizeof Ls[0]; c++) {
        size_t L = Ls[c];
        float *s = malloc(L * L * sizeof *s), *p = malloc(L * L * sizeof *p);
        for (size_t i = 0; i < L * L; i++) s[i] = (float)uniform(-60, 60);
        /* garbage above the diagonal must not leak in */
        for (size_t t = 0; t < L; t++)
            for (size_t j = t + 1; j < L; j++) s[t * L + j] = (j % 2) ? 1e30f : NAN;
        memset(p, 0x7f, L * L * sizeof *p);
        const float sqrt_d = 8.0f;
        gpt2_causal_softmax(p, s, L, sqrt_d);
        for (size_t t = 0; t < L; t++) {
            double m = -INFINITY, z = 0;
            for (size_t j = 0; j <= t; j++) m = fmax(m, s[t * L + j] / (double)sqrt_d);
            for (size_t j = 0; j <= t; j++) z += exp(s[t * L + j] / (double)sqrt_d - m);
            double row = 0;
            for (size_t j = 0; j < L; j++) {
                double want = j <= t ? exp(s[t * L + j] / (double)sqrt_d - m) / z : 0.0;
                char label[128];
                snprintf(label, sizeof label, "softmax L=%zu [%zu,%zu]", L, t, j);
                CHECK_CLOSE(p[t * L + j], want, 1e-7, 1e-6, label);
                if (j > t) CHECK(p[t * L + j] == 0.0f, "%s: not exactly 0 above the diagonal", label);
                row += p[t * L + j];
            }
            CHECK_CLOSE(row, 1.0, 1e-6, 0, "softmax row sum");
        }
        free(s);
        free(p);
    }
    /* a huge spread: the max is subtracted, nothing overflows */
    float s2[4] = {1e4f, 0, 1e4f, 1e4f - 8.0f}, p2[4];
    gpt2_causal_softmax(p2, s2, 2, 8.0f);
    CHECK_CLOSE(p2[2], 1.0 / (1.0 + exp(-1.0)), 1e-7, 1e-6, "softmax large scores [1,0]");
    CHECK_CLOSE(p2[3], exp(-1.0) / (1.0 + exp(-1.0)), 1e-7, 1e-6, "softmax large scores [1,1]");
    CHECK(p2[0] == 1.0f && p2[1] == 0.0f, "softmax row 0 = [1, 0], got [%g, %g]", p2[0], p2[1]);
}

int main(void) {
    test_expf();
    test_layernorm();
    test_gelu();
    test_softmax();
    return check_summary("test_gpt2_kernels");
}
