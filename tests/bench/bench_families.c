/* bench_families.c -- one model's forward pass against OpenBLAS sgemm at the
 * forward's own projection shapes, for tests/bench/bench_families.sh (which
 * adds the PyTorch side and prints the table over the families).
 *
 *   bench_families --model DIR [--length 1024] [--threads 1] [--repeat 5]
 *
 * The forward timed is the whole model as the sweep runs it with every layer
 * captured (a no-op callback), plus the logits at the last position so that
 * the last block's MLP runs too. Each repeat times one forward, then one pass
 * of the projection sgemms right after it (so a shared machine's drift hits
 * both alike); a warm-up of each comes first. Output: one line of "key value"
 * pairs (the script reads them by key):
 *   family F layers N C c H h KV kv D d I i V v L l threads t repeat r
 *   flops X fwd_med s fwd_min s fwd_max s fwd_cpu_med s
 *   roof_gflops g roof_min g roof_max g
 * fwd_cpu_med is the process's CPU seconds per forward (all threads): against
 * threads x fwd_med it tells whether the run had the cores to itself.
 * flops is fwd_flops() (docs/performance.md, "Forward pass per family", gives
 * the formula); the roofline is the GFLOP/s of the projection sgemms alone. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forward.h"
#include "model.h"

#define MAX_REPEAT 64

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static int noop_layer(const fwd_layer_view *v, void *user, as_err *err) {
    (void)v, (void)user, (void)err;
    return 0;
}

/* The projection matmuls of one block, as the family's kernel calls them:
 * [L, in] x [in, out]; GPT-2's Conv1D weights are [in, out] (no transpose),
 * the others' nn.Linear weights [out, in]. SwiGLU has gate and up. */
typedef struct {
    int n;
    size_t in[5], out[5];
    int trans;
} proj_shapes;

static proj_shapes block_shapes(const gpt2_config *c) {
    size_t C = c->n_embd, QD = c->n_head * c->d_head, KD = c->n_kv_head * c->d_head;
    size_t NI = c->n_inner;
    int swiglu = c->family == MODEL_LLAMA || c->family == MODEL_QWEN2;
    proj_shapes s = {.trans = c->family != MODEL_GPT2};
    s.in[s.n] = C, s.out[s.n++] = QD + 2 * KD; /* q|k|v, fused or three sgemms of one width */
    s.in[s.n] = QD, s.out[s.n++] = C;
    s.in[s.n] = C, s.out[s.n++] = NI;
    if (swiglu) s.in[s.n] = C, s.out[s.n++] = NI;
    s.in[s.n] = NI, s.out[s.n++] = C;
    return s;
}

typedef struct {
    proj_shapes s;
    size_t L;
    float *x, *w, *y;
    double flops;
} roofline;

static int roofline_init(roofline *r, const gpt2_config *c, size_t L) {
    r->s = block_shapes(c);
    r->L = L;
    size_t in_max = 0, w_max = 0, out_max = 0;
    r->flops = 0;
    for (int i = 0; i < r->s.n; i++) {
        in_max = r->s.in[i] > in_max ? r->s.in[i] : in_max;
        out_max = r->s.out[i] > out_max ? r->s.out[i] : out_max;
        w_max = r->s.in[i] * r->s.out[i] > w_max ? r->s.in[i] * r->s.out[i] : w_max;
        r->flops += 2.0 * (double)L * (double)r->s.in[i] * (double)r->s.out[i];
    }
    r->x = malloc(L * in_max * sizeof *r->x);
    r->w = malloc(w_max * sizeof *r->w);
    r->y = malloc(L * out_max * sizeof *r->y);
    if (!r->x || !r->w || !r->y) return -1;
    /* small values of no special pattern: no denormals, no zeros to skip */
    for (size_t i = 0; i < L * in_max; i++) r->x[i] = (float)(i % 13) * 0.01f - 0.06f;
    for (size_t i = 0; i < w_max; i++) r->w[i] = (float)(i % 7) * 0.01f - 0.03f;
    return 0;
}

/* seconds of one pass of the block's projection sgemms */
static double roofline_pass(const roofline *r) {
    double t0 = now();
    for (int i = 0; i < r->s.n; i++) {
        int m = (int)r->L, n = (int)r->s.out[i], k = (int)r->s.in[i];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, r->s.trans ? CblasTrans : CblasNoTrans, m, n, k,
                    1.0f, r->x, k, r->w, r->s.trans ? k : n, 0.0f, r->y, n);
    }
    return now() - t0;
}

static void roofline_free(roofline *r) { free(r->x), free(r->w), free(r->y); }

static int usage(const char *why) {
    fprintf(stderr, "%s%susage: bench_families --model DIR [--length 1024] [--threads 1] "
                    "[--repeat 5]  (repeat 1..%d)\n",
            why ? "bench_families: " : "", why ? why : "", MAX_REPEAT);
    return 2;
}

int main(int argc, char **argv) {
    const char *model_dir = NULL;
    size_t L = 1024;
    int threads = 1, repeat = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v) model_dir = v, i++;
        else if (!strcmp(a, "--length") && v) L = strtoul(v, NULL, 10), i++;
        else if (!strcmp(a, "--threads") && v) threads = atoi(v), i++;
        else if (!strcmp(a, "--repeat") && v) repeat = atoi(v), i++;
        else if (!strcmp(a, "--help")) return usage(NULL), 0;
        else return usage("unknown argument; ");
    }
    if (!model_dir) return usage("--model DIR is required; ");
    if (repeat < 1 || repeat > MAX_REPEAT || threads < 1 || L < 1) return usage("bad number; ");
    openblas_set_num_threads(threads);

    as_err err = {{0}};
    gpt2_model m;
    if (model_load(&m, model_dir, &err) != 0) {
        fprintf(stderr, "bench_families: %s\n", err.msg);
        return 1;
    }
    const gpt2_config *c = &m.cfg;
    fwd_workspace ws;
    roofline roof;
    if (fwd_workspace_init(&ws, c, L, &err) != 0) {
        fprintf(stderr, "bench_families: %s: %s\n", model_dir, err.msg);
        return 1;
    }
    int32_t *tokens = malloc(L * sizeof *tokens);
    float *logits = malloc(c->vocab_size * sizeof *logits);
    if (!tokens || !logits || roofline_init(&roof, c, L) != 0) {
        fprintf(stderr, "bench_families: out of memory\n");
        return 1;
    }
    for (size_t t = 0; t < L; t++) tokens[t] = (int32_t)((t * 7919 + 13) % c->vocab_size);
    size_t last = L - 1;
    fwd_request req = {.capture_mask = c->n_layer >= 64 ? ~0ull : (1ull << c->n_layer) - 1,
                       .on_layer = noop_layer, .logit_positions = &last,
                       .n_logit_positions = 1, .logits = logits};
    double fwd_s[MAX_REPEAT], cpu_s[MAX_REPEAT], roof_g[MAX_REPEAT];
    for (int r = -1; r < repeat; r++) { /* r = -1 warms both up */
        double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (fwd_forward(&ws, &m, tokens, L, &req, &err) != 0) {
            fprintf(stderr, "bench_families: %s: %s\n", model_dir, err.msg);
            return 1;
        }
        double dt = now() - t0, dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        double rt = roofline_pass(&roof);
        if (r >= 0) fwd_s[r] = dt, cpu_s[r] = dc, roof_g[r] = roof.flops / rt / 1e9;
    }
    /* median() sorts: [0] and [repeat - 1] are then the extremes */
    double f_med = median(fwd_s, repeat), c_med = median(cpu_s, repeat);
    double r_med = median(roof_g, repeat);
    printf("family %s layers %zu C %zu H %zu KV %zu D %zu I %zu V %zu L %zu threads %d "
           "repeat %d flops %.6e fwd_med %.6f fwd_min %.6f fwd_max %.6f fwd_cpu_med %.6f "
           "roof_gflops %.3f "
           "roof_min %.3f roof_max %.3f\n",
           model_family_name(c->family), c->n_layer, c->n_embd, c->n_head, c->n_kv_head,
           c->d_head, c->n_inner, c->vocab_size, L, threads, repeat,
           fwd_flops(c, L, c->n_layer, 1), f_med, fwd_s[0], fwd_s[repeat - 1], c_med, r_med, roof_g[0],
           roof_g[repeat - 1]);
    roofline_free(&roof);
    free(tokens), free(logits);
    fwd_workspace_free(&ws);
    model_free(&m);
    return 0;
}
