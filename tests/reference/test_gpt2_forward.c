/* test_gpt2_forward.c -- the float32 forward pass on a small random model
 * built in memory, against a brute-force double-precision GPT-2 written here
 * from the formulas (no BLAS, no shared code). Also checks the request
 * contract: capture order and mask, skipped layers, the callback abort, logits
 * at chosen positions, and the argument errors.
 *
 * Tolerances (float32 vs double on values of order 1-10): q, k, v, scores
 * 1e-4 * max|ref| per layer tensor; pattern 1e-5 absolute; logits 1e-4 * max|ref|. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward.h"

enum { NL = 3, NH = 2, C = 16, D = C / NH, V = 37, P = 160 };

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double uniform(double lo, double hi) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 2685821657736338717ull;
    return lo + (hi - lo) * (double)(r >> 11) / 9007199254740992.0;
}

static float *fill(float *at, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) at[i] = (float)uniform(lo, hi);
    return at;
}

static gpt2_block blocks[NL];
static float weights[V * C + P * C + 2 * C +
                     NL * (4 * C + 3 * C * C + 3 * C + C * C + C + 4 * C * C + 4 * C + 4 * C * C + C)];

static void build_model(gpt2_model *m) {
    memset(m, 0, sizeof *m);
    m->cfg = (gpt2_config){.n_layer = NL, .n_head = NH, .n_embd = C, .n_positions = P,
                           .vocab_size = V, .layer_norm_epsilon = 1e-5f, .n_kv_head = NH,
                           .d_head = C / NH, .n_inner = 4 * C, .tied_head = 1, .qkv_bias = 1};
    strcpy(m->cfg.activation_function, "gelu_new");
    float *at = weights;
    m->wte = fill(at, V * C, -0.5, 0.5), at += V * C;
    m->wpe = fill(at, P * C, -0.2, 0.2), at += P * C;
    m->ln_f_w = fill(at, C, 0.7, 1.3), at += C;
    m->ln_f_b = fill(at, C, -0.1, 0.1), at += C;
    for (int l = 0; l < NL; l++) {
        gpt2_block *b = &blocks[l];
        b->ln_1_w = fill(at, C, 0.7, 1.3), at += C;
        b->ln_1_b = fill(at, C, -0.1, 0.1), at += C;
        b->attn_w = fill(at, 3 * C * C, -0.5, 0.5), at += 3 * C * C;
        b->attn_b = fill(at, 3 * C, -0.2, 0.2), at += 3 * C;
        b->attn_proj_w = fill(at, C * C, -0.3, 0.3), at += C * C;
        b->attn_proj_b = fill(at, C, -0.1, 0.1), at += C;
        b->ln_2_w = fill(at, C, 0.7, 1.3), at += C;
        b->ln_2_b = fill(at, C, -0.1, 0.1), at += C;
        b->fc_w = fill(at, 4 * C * C, -0.5, 0.5), at += 4 * C * C;
        b->fc_b = fill(at, 4 * C, -0.2, 0.2), at += 4 * C;
        b->mlp_proj_w = fill(at, 4 * C * C, -0.2, 0.2), at += 4 * C * C;
        b->mlp_proj_b = fill(at, C, -0.1, 0.1), at += C;
    }
    m->blocks = blocks;
}

/* ---- brute-force double reference ---- */
typedef struct {
    double *q, *k, *v, *scores, *pattern, *ln1; /* per layer: [H,L,D] x3, [H,L,L] x2, [L,C] */
    double *logits;                             /* [L, V]: every position */
} reference;

static void ref_layernorm(double *out, const double *x, const float *w, const float *b, size_t L) {
    for (size_t t = 0; t < L; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < C; i++) mean += x[t * C + i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (x[t * C + i] - mean) * (x[t * C + i] - mean);
        var /= C;
        for (int i = 0; i < C; i++)
            out[t * C + i] = (x[t * C + i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
    }
}

static void ref_forward(reference *r, const gpt2_model *m, const int32_t *tok, size_t L) {
    double *x = calloc(L * C, sizeof *x), *h = calloc(L * C, sizeof *h);
    double *o = calloc(L * C, sizeof *o), *f = calloc(L * 4 * C, sizeof *f);
    for (size_t t = 0; t < L; t++)
        for (int i = 0; i < C; i++) x[t * C + i] = (double)m->wte[tok[t] * C + i] + m->wpe[t * C + i];
    for (int l = 0; l < NL; l++) {
        const gpt2_block *b = &m->blocks[l];
        double *q = r->q + l * NH * L * D, *k = r->k + l * NH * L * D, *v = r->v + l * NH * L * D;
        double *s = r->scores + l * NH * L * L, *p = r->pattern + l * NH * L * L;
        ref_layernorm(h, x, b->ln_1_w, b->ln_1_b, L);
        memcpy(r->ln1 + l * L * C, h, L * C * sizeof *h);
        for (size_t t = 0; t < L; t++)
            for (int j = 0; j < 3 * C; j++) {
                double acc = b->attn_b[j];
                for (int i = 0; i < C; i++) acc += h[t * C + i] * b->attn_w[i * 3 * C + j];
                int part = j / C, hh = (j % C) / D, d = j % D;
                double *dst = part == 0 ? q : part == 1 ? k : v;
                dst[(hh * L + t) * D + d] = acc;
            }
        for (int hh = 0; hh < NH; hh++)
            for (size_t t = 0; t < L; t++) {
                double mx = -INFINITY, z = 0;
                for (size_t j = 0; j < L; j++) {
                    double acc = 0;
                    for (int d = 0; d < D; d++) acc += q[(hh * L + t) * D + d] * k[(hh * L + j) * D + d];
                    s[(hh * L + t) * L + j] = acc;
                    if (j <= t && acc / sqrt(D) > mx) mx = acc / sqrt(D);
                }
                for (size_t j = 0; j <= t; j++) z += exp(s[(hh * L + t) * L + j] / sqrt(D) - mx);
                for (size_t j = 0; j < L; j++)
                    p[(hh * L + t) * L + j] = j <= t ? exp(s[(hh * L + t) * L + j] / sqrt(D) - mx) / z : 0;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (size_t j = 0; j <= t; j++) acc += p[(hh * L + t) * L + j] * v[(hh * L + j) * D + d];
                    o[t * C + hh * D + d] = acc;
                }
            }
        for (size_t t = 0; t < L; t++)
            for (int j = 0; j < C; j++) {
                double acc = b->attn_proj_b[j];
                for (int i = 0; i < C; i++) acc += o[t * C + i] * b->attn_proj_w[i * C + j];
                x[t * C + j] += acc;
            }
        ref_layernorm(h, x, b->ln_2_w, b->ln_2_b, L);
        for (size_t t = 0; t < L; t++)
            for (int j = 0; j < 4 * C; j++) {
                double acc = b->fc_b[j];
                for (int i = 0; i < C; i++) acc += h[t * C + i] * b->fc_w[i * 4 * C + j];
                f[t * 4 * C + j] =
                    0.5 * acc * (1 + tanh(sqrt(2 / M_PI) * (acc + 0.044715 * acc * acc * acc)));
            }
        for (size_t t = 0; t < L; t++)
            for (int j = 0; j < C; j++) {
                double acc = b->mlp_proj_b[j];
                for (int i = 0; i < 4 * C; i++) acc += f[t * 4 * C + i] * b->mlp_proj_w[i * C + j];
                x[t * C + j] += acc;
            }
    }
    ref_layernorm(h, x, m->ln_f_w, m->ln_f_b, L);
    for (size_t t = 0; t < L; t++)
        for (int w = 0; w < V; w++) {
            double acc = 0;
            for (int i = 0; i < C; i++) acc += h[t * C + i] * m->wte[w * C + i];
            r->logits[t * V + w] = acc;
        }
    free(x), free(h), free(o), free(f);
}

/* ---- the callback under test ---- */
typedef struct {
    const reference *ref;
    size_t L;
    int calls;
    size_t order[NL];
    int abort_at; /* layer whose callback fails, -1 for none */
} capture_check;

static double max_abs(const double *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

static void compare_tensor(const char *what, size_t layer, size_t L, const float *got,
                           const double *want, size_t n, double tol, int causal_rows) {
    double worst = 0;
    int bad_zero = 0;
    for (size_t i = 0; i < n; i++) {
        if (causal_rows) { /* [H, L, L]: only j <= t is defined / must be 0 above */
            size_t t = (i / L) % L, j = i % L;
            if (j > t) {
                if (causal_rows == 2 && got[i] != 0.0f) bad_zero = 1;
                continue;
            }
        }
        worst = fmax(worst, fabs(got[i] - want[i]));
    }
    CHECK(worst <= tol, "L=%zu layer %zu %s: max |diff| %.3g > %.3g", L, layer, what, worst, tol);
    CHECK(!bad_zero, "L=%zu layer %zu %s: non-zero above the diagonal", L, layer, what);
}

static int on_layer(const fwd_layer_view *v, void *user, as_err *err) {
    capture_check *c = user;
    size_t L = c->L, l = v->layer;
    if (c->calls < NL) c->order[c->calls] = l;
    c->calls++;
    CHECK(v->L == L && v->n_head == NH && v->d_head == D && v->n_embd == C, "view sizes");
    const reference *r = c->ref;
    const double *q = r->q + l * NH * L * D, *k = r->k + l * NH * L * D, *vv = r->v + l * NH * L * D;
    const double *s = r->scores + l * NH * L * L, *p = r->pattern + l * NH * L * L;
    compare_tensor("q", l, L, v->q, q, NH * L * D, 1e-4 * max_abs(q, NH * L * D), 0);
    compare_tensor("k", l, L, v->k, k, NH * L * D, 1e-4 * max_abs(k, NH * L * D), 0);
    compare_tensor("v", l, L, v->v, vv, NH * L * D, 1e-4 * max_abs(vv, NH * L * D), 0);
    compare_tensor("scores", l, L, v->scores, s, NH * L * L, 1e-4 * max_abs(s, NH * L * L), 1);
    compare_tensor("pattern", l, L, v->pattern, p, NH * L * L, 1e-5, 2);
    const double *ln1 = r->ln1 + l * L * C;
    compare_tensor("ln1", l, L, v->ln1, ln1, L * C, 1e-4 * max_abs(ln1, L * C), 0);
    if ((int)l == c->abort_at) return as_fail(err, "test abort");
    return 0;
}

static void run_case(const gpt2_model *m, fwd_workspace *ws, size_t L) {
    int32_t *tok = malloc(L * sizeof *tok);
    for (size_t t = 0; t < L; t++) tok[t] = (int32_t)(uniform(0, V));
    reference r = {
        .q = calloc(NL * NH * L * D, sizeof(double)), .k = calloc(NL * NH * L * D, sizeof(double)),
        .v = calloc(NL * NH * L * D, sizeof(double)),
        .scores = calloc(NL * NH * L * L, sizeof(double)),
        .pattern = calloc(NL * NH * L * L, sizeof(double)), .ln1 = calloc(NL * L * C, sizeof(double)),
        .logits = calloc(L * V, sizeof(double))};
    ref_forward(&r, m, tok, L);
    as_err err = {{0}};

    /* every layer + logits at the last and the first positions */
    capture_check cc = {.ref = &r, .L = L, .abort_at = -1};
    size_t pos[2] = {L - 1, 0};
    float logits[2 * V];
    fwd_request req = {.capture_mask = (1u << NL) - 1, .on_layer = on_layer, .user = &cc,
                        .logit_positions = pos, .n_logit_positions = 2, .logits = logits};
    CHECK(fwd_forward(ws, m, tok, L, &req, &err) == 0, "forward L=%zu: %s", L, err.msg);
    CHECK(cc.calls == NL, "L=%zu: %d callbacks, want %d", L, cc.calls, NL);
    for (int l = 0; l < NL && l < cc.calls; l++) CHECK(cc.order[l] == (size_t)l, "callback order");
    for (int i = 0; i < 2; i++) {
        const double *want = r.logits + pos[i] * V;
        double tol = 1e-4 * max_abs(want, V), worst = 0;
        for (int w = 0; w < V; w++) worst = fmax(worst, fabs(logits[i * V + w] - want[w]));
        CHECK(worst <= tol, "L=%zu logits at %zu: max |diff| %.3g > %.3g", L, pos[i], worst, tol);
    }

    /* only layer 1, no logits: one callback */
    cc = (capture_check){.ref = &r, .L = L, .abort_at = -1};
    req = (fwd_request){.capture_mask = 1u << 1, .on_layer = on_layer, .user = &cc};
    CHECK(fwd_forward(ws, m, tok, L, &req, &err) == 0, "forward layer 1: %s", err.msg);
    CHECK(cc.calls == 1 && cc.order[0] == 1, "mask 1<<1: %d calls", cc.calls);

    /* a failing callback stops the pass with its message */
    cc = (capture_check){.ref = &r, .L = L, .abort_at = 0};
    req = (fwd_request){.capture_mask = 7, .on_layer = on_layer, .user = &cc};
    err.msg[0] = 0;
    CHECK(fwd_forward(ws, m, tok, L, &req, &err) == -1, "aborting callback returns -1");
    CHECK(cc.calls == 1, "abort after layer 0: %d calls", cc.calls);
    CHECK(strstr(err.msg, "test abort") && strstr(err.msg, "layer 0"), "abort message '%s'", err.msg);

    free(tok);
    free(r.q), free(r.k), free(r.v), free(r.scores), free(r.pattern), free(r.ln1), free(r.logits);
}

int main(void) {
    gpt2_model m;
    build_model(&m);
    fwd_workspace ws;
    as_err err = {{0}};
    CHECK(fwd_workspace_init(&ws, &m.cfg, P, &err) == 0, "init: %s", err.msg);
    /* 1 (single token), 7, 129 and 160 (cross the 128-row attention tile) */
    const size_t Ls[] = {1, 7, 129, 160};
    for (size_t i = 0; i < sizeof Ls / sizeof Ls[0]; i++) run_case(&m, &ws, Ls[i]);

    /* layers past the deepest captured one are never touched: poison block 2 */
    gpt2_block saved = blocks[2];
    memset(&blocks[2], 0, sizeof blocks[2]);
    int32_t tok[5] = {1, 2, 3, 4, 5};
    int calls = 0;
    capture_check cc = {.L = 5, .abort_at = -1};
    (void)calls;
    reference r = {.q = calloc(NL * NH * 5 * D, 8), .k = calloc(NL * NH * 5 * D, 8),
                   .v = calloc(NL * NH * 5 * D, 8), .scores = calloc(NL * NH * 25, 8),
                   .pattern = calloc(NL * NH * 25, 8), .ln1 = calloc(NL * 5 * C, 8),
                   .logits = calloc(5 * V, 8)};
    blocks[2] = saved;
    ref_forward(&r, &m, tok, 5);
    memset(&blocks[2], 0, sizeof blocks[2]);
    cc.ref = &r;
    fwd_request req = {.capture_mask = 3, .on_layer = on_layer, .user = &cc};
    CHECK(fwd_forward(&ws, &m, tok, 5, &req, &err) == 0, "poisoned block 2 skipped: %s", err.msg);
    CHECK(cc.calls == 2, "poisoned run: %d calls", cc.calls);
    blocks[2] = saved;
    free(r.q), free(r.k), free(r.v), free(r.scores), free(r.pattern), free(r.ln1), free(r.logits);

    /* argument errors */
    int32_t bad[3] = {1, V, 2};
    req = (fwd_request){0};
    CHECK(fwd_forward(&ws, &m, bad, 3, &req, &err) == -1 && strstr(err.msg, "position 1"),
          "token outside the vocabulary: '%s'", err.msg);
    CHECK(fwd_forward(&ws, &m, tok, 0, &req, &err) == -1, "L = 0 rejected");
    int32_t *many = calloc(P + 1, sizeof *many);
    CHECK(fwd_forward(&ws, &m, many, P + 1, &req, &err) == -1, "L > max_L rejected");
    free(many);
    req.capture_mask = 1u << NL;
    req.on_layer = on_layer;
    CHECK(fwd_forward(&ws, &m, tok, 5, &req, &err) == -1 && strstr(err.msg, "n_layer"),
          "mask beyond n_layer: '%s'", err.msg);
    size_t far = 5;
    float lg[V];
    req = (fwd_request){.logit_positions = &far, .n_logit_positions = 1, .logits = lg};
    CHECK(fwd_forward(&ws, &m, tok, 5, &req, &err) == -1, "logit position >= L rejected");
    fwd_workspace ws2;
    CHECK(fwd_workspace_init(&ws2, &m.cfg, P + 1, &err) == -1 && strstr(err.msg, "n_positions"),
          "max_L > n_positions rejected: '%s'", err.msg);
    fwd_workspace_free(&ws);
    return check_summary("test_gpt2_forward");
}
