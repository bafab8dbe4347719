/* test_model.c -- model_config_read / model_load on small hand-built model
 * directories: every tensor lands at the right place with the right values
 * (F32, F16, BF16, "transformer." prefix, odd data offset, non-parameter
 * buffers), and every defect is rejected with a message naming the tensor
 * or config key. Also synth_write: refusal, --force, determinism.
 *
 * `test_model --dump DIR OUT` loads DIR and writes the arena as raw
 * float32 to OUT (tests/reference/loader_check.py compares it with numpy's reading). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "sha256.h"
#include "synth.h"

/* The small model: 2 layers, 2 heads, C = 4, P = 8, V = 10. */
enum { L = 2, C = 4, P = 8, V = 10 };
static char dir[64];

typedef struct {
    const char *prefix;   /* "" or "transformer." */
    const char *dtype;    /* dtype of every parameter: F32, F16, BF16 */
    int header_pad;       /* spaces after the JSON (shifts the data start) */
    const char *skip;     /* omit this tensor */
    const char *extra;    /* add an unknown F32 [1] tensor with this name */
    const char *bad_shape; /* this tensor's first dimension + 1 */
    const char *bad_dtype; /* this tensor is I32 */
    const char *nan_in;   /* element 1 of this tensor is NaN */
    int buffers;          /* add h.N.attn.bias, h.N.attn.masked_bias, lm_head.weight */
    int lm_head_rows;     /* lm_head.weight rows when buffers (default V) */
} variant;

typedef struct {
    char name[80];
    const char *dtype;
    size_t ndim, shape[4];
    int param_index; /* -1 for buffers */
} entry;

/* The parameters in model.h's arena order, named as Hugging Face names them. */
static size_t list_params(entry *e) {
    size_t n = 0;
#define ADD(nm, nd, s0, s1) \
    (snprintf(e[n].name, sizeof e[n].name, "%s", nm), e[n].ndim = nd, e[n].shape[0] = s0, \
     e[n].shape[1] = s1, e[n].param_index = (int)n, n++)
    char nm[80];
    ADD("wte.weight", 2, V, C);
    ADD("wpe.weight", 2, P, C);
    for (int l = 0; l < L; l++) {
#define B(suffix) (snprintf(nm, sizeof nm, "h.%d.%s", l, suffix), nm)
        ADD(B("ln_1.weight"), 1, C, 0);
        ADD(B("ln_1.bias"), 1, C, 0);
        ADD(B("attn.c_attn.weight"), 2, C, 3 * C);
        ADD(B("attn.c_attn.bias"), 1, 3 * C, 0);
        ADD(B("attn.c_proj.weight"), 2, C, C);
        ADD(B("attn.c_proj.bias"), 1, C, 0);
        ADD(B("ln_2.weight"), 1, C, 0);
        ADD(B("ln_2.bias"), 1, C, 0);
        ADD(B("mlp.c_fc.weight"), 2, C, 4 * C);
        ADD(B("mlp.c_fc.bias"), 1, 4 * C, 0);
        ADD(B("mlp.c_proj.weight"), 2, 4 * C, C);
        ADD(B("mlp.c_proj.bias"), 1, C, 0);
#undef B
    }
    ADD("ln_f.weight", 1, C, 0);
    ADD("ln_f.bias", 1, C, 0);
#undef ADD
    return n;
}

/* Value of element i of parameter p: quarter-integers in [-2, 2], exact in F16 and BF16. */
static float param_value(int p, size_t i) { return (float)((int)((p * 5 + i) % 17) - 8) * 0.25f; }

static size_t numel(const entry *e) {
    size_t n = 1;
    for (size_t d = 0; d < e->ndim; d++) n *= e->shape[d];
    return n;
}

static uint16_t to_f16(float v) { /* exact for quarter-integers |v| <= 2 */
    if (isnan(v)) return 0x7E00;
    if (v == 0) return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    double a = fabs(v);
    int e = 0;
    while (a >= 2) a /= 2, e++;
    while (a < 1) a *= 2, e--;
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((a - 1) * 1024));
}
static uint16_t to_bf16(float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return (uint16_t)(b >> 16); /* exact: quarter-integers have <= 8 significant bits */
}

static void write_config(const char *text) {
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static const char *good_config = "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 4, \"n_positions\": 8, "
                                 "\"n_ctx\": 8, \"vocab_size\": 10, \"layer_norm_epsilon\": 1e-05, "
                                 "\"activation_function\": \"gelu_new\", \"model_type\": \"gpt2\"}";

/* Writes DIR/model.safetensors for the variant with a header of our own text. */
static void write_model(const variant *v) {
    entry e[64];
    size_t n = list_params(e);
    for (size_t k = 0; k < n; k++) e[k].dtype = v->dtype ? v->dtype : "F32";
    if (v->buffers) {
        for (int l = 0; l < L; l++) {
            entry *b = &e[n++];
            snprintf(b->name, sizeof b->name, "h.%d.attn.bias", l);
            b->dtype = "F32", b->ndim = 4, b->shape[0] = 1, b->shape[1] = 1, b->shape[2] = P,
            b->shape[3] = P, b->param_index = -1;
            b = &e[n++];
            snprintf(b->name, sizeof b->name, "h.%d.attn.masked_bias", l);
            b->dtype = "F32", b->ndim = 0, b->param_index = -1;
        }
        entry *b = &e[n++];
        snprintf(b->name, sizeof b->name, "lm_head.weight");
        b->dtype = "F32", b->ndim = 2, b->shape[0] = v->lm_head_rows ? (size_t)v->lm_head_rows : V,
        b->shape[1] = C, b->param_index = -1;
    }
    if (v->extra) {
        entry *b = &e[n++];
        snprintf(b->name, sizeof b->name, "%s", v->extra);
        b->dtype = "F32", b->ndim = 1, b->shape[0] = 1, b->param_index = -1;
    }
    char *header = malloc(65536);
    size_t hl = (size_t)sprintf(header, "{\"__metadata__\":{\"format\":\"pt\"}");
    unsigned char *data = malloc(1 << 20);
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        entry *t = &e[k];
        if (v->skip && !strcmp(t->name, v->skip)) continue;
        size_t shape0 = t->shape[0];
        if (v->bad_shape && !strcmp(t->name, v->bad_shape)) t->shape[0]++;
        if (v->bad_dtype && !strcmp(t->name, v->bad_dtype)) t->dtype = "I32";
        int half = !strcmp(t->dtype, "F16") || !strcmp(t->dtype, "BF16");
        size_t count = numel(t), begin = off;
        for (size_t i = 0; i < count; i++) {
            float x = t->param_index >= 0 ? param_value(t->param_index, i % (shape0 * (t->ndim > 1 ? t->shape[1] : 1))) : 1.0f;
            if (v->nan_in && !strcmp(t->name, v->nan_in) && i == 1) x = NAN;
            if (half) {
                uint16_t h = !strcmp(t->dtype, "F16") ? to_f16(x) : to_bf16(x);
                data[off++] = (unsigned char)(h & 0xFF);
                data[off++] = (unsigned char)(h >> 8);
            } else {
                memcpy(data + off, &x, 4);
                off += 4;
            }
        }
        const char *prefix = strncmp(t->name, "lm_head", 7) ? (v->prefix ? v->prefix : "") : "";
        hl += (size_t)sprintf(header + hl, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[", prefix,
                              t->name, t->dtype);
        for (size_t d = 0; d < t->ndim; d++)
            hl += (size_t)sprintf(header + hl, d ? ",%zu" : "%zu", t->shape[d]);
        hl += (size_t)sprintf(header + hl, "],\"data_offsets\":[%zu,%zu]}", begin, off);
    }
    hl += (size_t)sprintf(header + hl, "}%*s", v->header_pad, "");
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, hl, f);
    fwrite(data, 1, off, f);
    fclose(f);
    free(header);
    free(data);
}

/* Loads the variant and checks every tensor against param_value. */
static void expect_load(const char *label, const variant *v) {
    write_config(good_config);
    write_model(v);
    gpt2_model m;
    as_err err = {{0}};
    if (model_load(&m, dir, &err)) {
        CHECK(0, "%s: load failed: %s", label, err.msg);
        return;
    }
    entry e[64];
    size_t n = list_params(e);
    const float *fields[64];
    size_t k = 0;
    fields[k++] = m.wte;
    fields[k++] = m.wpe;
    for (int l = 0; l < L; l++) {
        const gpt2_block *b = &m.blocks[l];
        const float *f[] = {b->ln_1_w, b->ln_1_b, b->attn_w, b->attn_b, b->attn_proj_w,
                            b->attn_proj_b, b->ln_2_w, b->ln_2_b, b->fc_w, b->fc_b,
                            b->mlp_proj_w, b->mlp_proj_b};
        for (size_t j = 0; j < 12; j++) fields[k++] = f[j];
    }
    fields[k++] = m.ln_f_w;
    fields[k++] = m.ln_f_b;
    CHECK(k == n, "%s: %zu fields for %zu params", label, k, n);
    int bad = 0;
    size_t expect_offset = 0;
    for (size_t p = 0; p < n; p++) {
        if (fields[p] != m.arena + expect_offset) bad++;
        for (size_t i = 0; i < numel(&e[p]); i++)
            if (fields[p][i] != param_value((int)p, i)) bad++;
        expect_offset += numel(&e[p]);
    }
    CHECK(bad == 0, "%s: %d wrong values or pointers", label, bad);
    CHECK(expect_offset == m.arena_floats && m.arena_floats == model_param_count(&m.cfg),
          "%s: arena %zu floats, params %zu", label, m.arena_floats, expect_offset);
    CHECK(((uintptr_t)m.arena % 64) == 0, "%s: arena not 64-byte aligned", label);
    CHECK(m.cfg.n_layer == L && m.cfg.n_head == 2 && m.cfg.n_embd == C && m.cfg.n_positions == P &&
              m.cfg.vocab_size == V && m.cfg.layer_norm_epsilon == 1e-5f,
          "%s: config", label);
    char path[128], hex[65];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    sha256_file_hex(hex, path, &err);
    CHECK(!strcmp(hex, m.weights_sha256), "%s: sha256 %s vs %s", label, m.weights_sha256, hex);
    CHECK(!strcmp(m.dir, dir), "%s: dir", label);
    model_free(&m);
}

static void expect_reject(const char *label, const char *config, const variant *v,
                          const char *want1, const char *want2) {
    write_config(config);
    write_model(v);
    gpt2_model m;
    as_err err = {{0}};
    int rc = model_load(&m, dir, &err);
    CHECK(rc == -1, "%s: accepted", label);
    if (rc == 0) model_free(&m);
    CHECK(m.arena == NULL && m.blocks == NULL, "%s: memory left after failure", label);
    CHECK(strstr(err.msg, dir) != NULL, "%s: message lacks the directory: %s", label, err.msg);
    CHECK(strstr(err.msg, want1) != NULL, "%s: message lacks '%s': %s", label, want1, err.msg);
    if (want2) CHECK(strstr(err.msg, want2) != NULL, "%s: lacks '%s': %s", label, want2, err.msg);
}

static void test_loads(void) {
    expect_load("plain F32", &(variant){0});
    expect_load("F16", &(variant){.dtype = "F16"});
    expect_load("BF16", &(variant){.dtype = "BF16"});
    expect_load("transformer. prefix", &(variant){.prefix = "transformer."});
    for (int pad = 1; pad < 8; pad++) /* data starts at every offset mod 8 */
        expect_load("padded header", &(variant){.header_pad = pad});
    expect_load("buffers and tied lm_head", &(variant){.buffers = 1, .prefix = "transformer."});
}

static void test_rejections(void) {
    const variant plain = {0};
    expect_reject("missing tensor", good_config, &(variant){.skip = "h.1.mlp.c_fc.bias"},
                  "missing tensor h.1.mlp.c_fc.bias", NULL);
    expect_reject("missing wte", good_config, &(variant){.skip = "wte.weight"},
                  "missing tensor wte.weight", NULL);
    expect_reject("unknown tensor", good_config, &(variant){.extra = "h.0.attn.rotary"},
                  "unknown tensor h.0.attn.rotary", NULL);
    expect_reject("layer out of range", good_config, &(variant){.extra = "h.2.ln_1.weight"},
                  "unknown tensor h.2.ln_1.weight", NULL);
    expect_reject("buffer of a missing layer", good_config, &(variant){.extra = "h.7.attn.bias"},
                  "unknown tensor h.7.attn.bias", NULL);
    expect_reject("prefixed lm_head", good_config,
                  &(variant){.extra = "transformer.lm_head.weight"},
                  "unknown tensor transformer.lm_head.weight", NULL);
    expect_reject("both spellings", good_config, &(variant){.extra = "transformer.ln_f.bias"},
                  "tensor ln_f.bias appears twice", NULL);
    expect_reject("wrong shape", good_config, &(variant){.bad_shape = "h.0.attn.c_attn.weight"},
                  "tensor h.0.attn.c_attn.weight has shape [5, 12], expected [4, 12]", NULL);
    expect_reject("wrong shape wte", good_config, &(variant){.bad_shape = "wte.weight"},
                  "tensor wte.weight has shape [11, 4]", NULL);
    expect_reject("wrong dtype", good_config, &(variant){.bad_dtype = "h.1.ln_2.bias"},
                  "tensor h.1.ln_2.bias has dtype I32", NULL);
    expect_reject("NaN", good_config, &(variant){.nan_in = "h.1.attn.c_proj.weight"},
                  "tensor h.1.attn.c_proj.weight", "NaN");
    expect_reject("NaN in F16", good_config, &(variant){.dtype = "F16", .nan_in = "ln_f.weight"},
                  "tensor ln_f.weight", "NaN");
    expect_reject("lm_head shape", good_config, &(variant){.buffers = 1, .lm_head_rows = 9},
                  "lm_head.weight has shape [9, 4]", NULL);

    /* config.json values: the message names the key */
    static const struct {
        const char *label, *config, *want;
    } configs[] = {
        {"n_embd % n_head", "{\"n_layer\":2,\"n_head\":3,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10}",
         "\"n_embd\" (4) is not divisible by \"n_head\" (3)"},
        {"activation", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10,"
                       "\"activation_function\":\"relu\"}", "\"activation_function\" is \"relu\""},
        {"activation type", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,"
                            "\"vocab_size\":10,\"activation_function\":1}", "\"activation_function\""},
        {"n_layer 0", "{\"n_layer\":0,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10}",
         "key \"n_layer\""},
        {"n_layer string", "{\"n_layer\":\"2\",\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10}",
         "key \"n_layer\" must be an integer in [1, 1024], got a string"},
        {"n_head fraction", "{\"n_layer\":2,\"n_head\":2.5,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10}",
         "key \"n_head\""},
        {"vocab negative", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":-10}",
         "key \"vocab_size\""},
        {"n_positions huge", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":1e300,\"vocab_size\":10}",
         "key \"n_positions\""},
        {"n_ctx bad", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_ctx\":null,\"vocab_size\":10}",
         "key \"n_ctx\""},
        {"epsilon", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10,"
                    "\"layer_norm_epsilon\":-1}", "key \"layer_norm_epsilon\""},
        {"model_type", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10,"
                       "\"model_type\":\"bert\"}", "key \"model_type\""},
        {"n_inner", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10,"
                    "\"n_inner\":7}", "key \"n_inner\""},
        {"not an object", "[2]", "expected an object"},
        {"bad JSON", "{\"n_layer\":2,}", "config.json: byte 13"},
        {"bad escape", "{\"n_layer\\x\":2}", "config.json: byte 9: invalid escape"},
        /* a config that disagrees with the weights: a tensor shape names it */
        {"config vs weights", "{\"n_layer\":2,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":11}",
         "tensor wte.weight has shape [10, 4], expected [11, 4]"},
        {"too few layers", "{\"n_layer\":1,\"n_head\":2,\"n_embd\":4,\"n_positions\":8,\"vocab_size\":10}",
         "unknown tensor h.1."},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        expect_reject(configs[i].label, configs[i].config, &plain, configs[i].want, NULL);

    /* missing files */
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    gpt2_model m;
    as_err err = {{0}};
    CHECK(model_load(&m, dir, &err) == -1 && strstr(err.msg, "config.json"), "no config: %s",
          err.msg);
    write_config(good_config);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    CHECK(model_load(&m, dir, &err) == -1 && strstr(err.msg, "model.safetensors"),
          "no weights: %s", err.msg);
    /* truncated weights: cut the last 3 bytes */
    write_model(&plain);
    struct stat st;
    stat(path, &st);
    CHECK(truncate(path, st.st_size - 3) == 0, "truncate");
    CHECK(model_load(&m, dir, &err) == -1 && strstr(err.msg, "tensor ln_f.bias") &&
              strstr(err.msg, "past the end"),
          "truncated: %s", err.msg);
}

static void test_configs(void) {
    gpt2_config cfg;
    as_err err = {{0}};
    /* {} gives GPT2Config's defaults, i.e. GPT-2 small */
    write_config("{}");
    CHECK(model_config_read(&cfg, dir, &err) == 0, "defaults: %s", err.msg);
    CHECK(cfg.n_layer == 12 && cfg.n_head == 12 && cfg.n_embd == 768 && cfg.n_positions == 1024 &&
              cfg.vocab_size == 50257 && cfg.layer_norm_epsilon == 1e-5f &&
              !strcmp(cfg.activation_function, "gelu_new"),
          "defaults");
    /* parameter counts Hugging Face reports for the four released sizes */
    static const struct {
        const char *config;
        size_t params;
    } sizes[] = {
        {"{\"n_layer\":12,\"n_head\":12,\"n_embd\":768,\"n_positions\":1024}", 124439808},
        {"{\"n_layer\":24,\"n_head\":16,\"n_embd\":1024,\"n_positions\":1024}", 354823168},
        {"{\"n_layer\":36,\"n_head\":20,\"n_embd\":1280,\"n_positions\":1024}", 774030080},
        {"{\"n_layer\":48,\"n_head\":25,\"n_embd\":1600,\"n_positions\":1024}", 1557611200},
    };
    for (size_t i = 0; i < 4; i++) {
        write_config(sizes[i].config);
        CHECK(model_config_read(&cfg, dir, &err) == 0, "size %zu: %s", i, err.msg);
        CHECK(model_param_count(&cfg) == sizes[i].params, "size %zu: %zu params", i,
              model_param_count(&cfg));
    }
    /* n_ctx is an alias only when n_positions is absent */
    write_config("{\"n_ctx\": 77}");
    CHECK(model_config_read(&cfg, dir, &err) == 0 && cfg.n_positions == 77, "n_ctx alias");
    write_config("{\"n_ctx\": 77, \"n_positions\": 99}");
    CHECK(model_config_read(&cfg, dir, &err) == 0 && cfg.n_positions == 99, "n_positions wins");
}

static void test_synth(void) {
    char sdir[96];
    snprintf(sdir, sizeof sdir, "%s/synth/a", dir);
    as_err err = {{0}};
    CHECK(synth_write(sdir, "tiny", 5, 0, &err) == 0, "synth: %s", err.msg);
    CHECK(synth_write(sdir, "tiny", 5, 0, &err) == -1 && strstr(err.msg, "--force"),
          "refuses to overwrite: %s", err.msg);
    CHECK(synth_write(sdir, "huge", 5, 1, &err) == -1 && strstr(err.msg, "huge"), "bad preset");
    gpt2_model m;
    if (model_load(&m, sdir, &err)) {
        CHECK(0, "load synth: %s", err.msg);
        return;
    }
    char first[65];
    strcpy(first, m.weights_sha256);
    /* the loaded values are the generator's, scaled as synth.h says */
    double qk_std = sqrt(SYNTH_QK_LOGIT_STD / 64.0), proj_std = 0.02 / sqrt(4.0);
    CHECK(m.wte[7] == (float)(0.02 * synth_normal(5, 0, 7)), "wte[7]");
    CHECK(m.wpe[3] == (float)(0.02 * synth_normal(5, 1, 3)), "wpe[3]");
    /* stream 5 = h.0.attn.c_attn.weight (wte, wpe, ln_1 w, b, attn.bias, c_attn) */
    CHECK(m.blocks[0].attn_w[1] == (float)(qk_std * synth_normal(5, 5, 1)), "q column");
    CHECK(m.blocks[0].attn_w[3 * 64 + 150] == (float)(0.02 * synth_normal(5, 5, 3 * 64 + 150)),
          "v column");
    CHECK(m.blocks[0].attn_proj_w[9] == (float)(proj_std * synth_normal(5, 7, 9)), "c_proj");
    CHECK(m.blocks[1].ln_1_w[5] == 1.0f && m.blocks[1].ln_1_b[5] == 0.0f, "LayerNorm init");
    model_free(&m);
    CHECK(synth_write(sdir, "tiny", 5, 1, &err) == 0, "--force: %s", err.msg);
    char path[160], hex[65];
    snprintf(path, sizeof path, "%s/model.safetensors", sdir);
    sha256_file_hex(hex, path, &err);
    CHECK(!strcmp(hex, first), "same seed, same bytes");
    CHECK(synth_write(sdir, "tiny", 6, 1, &err) == 0, "seed 6: %s", err.msg);
    sha256_file_hex(hex, path, &err);
    CHECK(strcmp(hex, first), "different seed, different bytes");
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", sdir);
    unlink(path);
    rmdir(sdir);
    snprintf(path, sizeof path, "%s/synth", dir);
    rmdir(path);
    /* the libm-free elementary functions agree with libm to a few ulp */
    double worst_log = 0, worst_trig = 0;
    for (uint64_t i = 1; i <= 100000; i++) {
        double x = (double)i / 100001.0;
        x = x * x * x; /* dense near 0 as Box-Muller's u1 can be */
        double got = synth_det_log(x), want = log(x);
        if (fabs(got - want) / fabs(want) > worst_log) worst_log = fabs(got - want) / fabs(want);
        double t = (double)(i - 1) / 100000.0, sn, cs;
        synth_det_sincos_turns(t, &sn, &cs);
        double ds = fabs(sn - sin(6.283185307179586 * t)), dc = fabs(cs - cos(6.283185307179586 * t));
        if (ds > worst_trig) worst_trig = ds;
        if (dc > worst_trig) worst_trig = dc;
    }
    CHECK(worst_log < 1e-15, "log rel error %g", worst_log);
    CHECK(worst_trig < 4e-15, "sin/cos abs error %g", worst_trig);
    CHECK(synth_det_log(1.0) == 0.0 && fabs(synth_det_log(0x1p-53) + 53 * log(2.0)) < 1e-13,
          "log endpoints");
    /* the Box-Muller normals have mean 0 and variance 1 */
    double sum = 0, sum2 = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        double z = synth_normal(1, 3, i);
        sum += z, sum2 += z * z;
    }
    CHECK(fabs(sum / 200000) < 0.01 && fabs(sum2 / 200000 - 1) < 0.02, "normal moments %g %g",
          sum / 200000, sum2 / 200000);
}

static int dump(const char *model_dir, const char *out) {
    gpt2_model m;
    as_err err = {{0}};
    if (model_load(&m, model_dir, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    FILE *f = fopen(out, "wb");
    int ok = f && fwrite(m.arena, sizeof(float), m.arena_floats, f) == m.arena_floats;
    if (f && fclose(f)) ok = 0;
    printf("%s %zu\n", m.weights_sha256, m.arena_floats);
    model_free(&m);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--dump")) return dump(argv[2], argv[3]);
    snprintf(dir, sizeof dir, "test_model.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_loads();
    test_rejections();
    test_configs();
    test_synth();
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
    return check_summary("test_model");
}
