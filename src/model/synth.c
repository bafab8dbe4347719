/* synth.c -- see synth.h. */
#include "synth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "safetensors.h"
#include "family_int.h"
#include "synth_int.h"

#define GOLDEN 0x9e3779b97f4a7c15ull
#define INIT_STD 0.02

/* splitmix64's output function: the n-th value of the stream starting at
 * state s is mix(s + (n + 1) * GOLDEN), so any element is reachable
 * directly and tensors need not be generated in order. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, uint64_t stream) {
    return mix64(seed + GOLDEN) ^ mix64(stream * 2 + 1 + GOLDEN);
}

/* The elementary functions below use only +, -, *, / and frexp, which
 * IEEE 754 defines exactly, in a fixed order: unlike libm's log/sin/cos
 * (which glibc dispatches to FMA variants on some CPUs) they give the same
 * bits on every machine, so a seed gives the same file everywhere. They
 * must not be contracted into fused multiply-adds. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

double synth_det_log(double x) {
    int e;
    double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752) {
        m *= 2.0;
        e -= 1;
    }
    /* log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: 11 odd terms
     * leave an error below 1e-18 */
    static const double inv_odd[11] = {1.0 / 1,  1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9, 1.0 / 11,
                                       1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21};
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, sum = 0.0;
    for (int k = 10; k >= 0; k--) sum = sum * s2 + inv_odd[k];
    return (double)e * 0.69314718055994530942 + 2.0 * s * sum;
}

void synth_det_sincos_turns(double t, double *sin_out, double *cos_out) {
    /* quadrant of the angle 2 pi t, then Taylor series on [0, pi/2):
     * the x^27/27! term is below 2e-23 there */
    double q4 = t * 4.0;
    double quadrant = floor(q4);
    double x = (q4 - quadrant) * 1.57079632679489661923;
    /* step[k] = -1 / (k (k - 1)): the ratio of consecutive Taylor terms */
    static const double step[28] = {
        0, 0, -1.0 / 2, -1.0 / 6, -1.0 / 12, -1.0 / 20, -1.0 / 30, -1.0 / 42, -1.0 / 56,
        -1.0 / 72, -1.0 / 90, -1.0 / 110, -1.0 / 132, -1.0 / 156, -1.0 / 182, -1.0 / 210,
        -1.0 / 240, -1.0 / 272, -1.0 / 306, -1.0 / 342, -1.0 / 380, -1.0 / 420, -1.0 / 462,
        -1.0 / 506, -1.0 / 552, -1.0 / 600, -1.0 / 650, -1.0 / 702};
    double x2 = x * x, sn = 0.0, cs = 0.0;
    for (int k = 27; k >= 3; k -= 2) sn = (sn + 1.0) * (x2 * step[k]);
    sn = x * (1.0 + sn);
    for (int k = 26; k >= 2; k -= 2) cs = (cs + 1.0) * (x2 * step[k]);
    cs = 1.0 + cs;
    int q = (int)quadrant & 3;
    double s = q == 0 ? sn : q == 1 ? cs : q == 2 ? -sn : -cs;
    double c = q == 0 ? cs : q == 1 ? -sn : q == 2 ? -cs : sn;
    *sin_out = s;
    *cos_out = c;
}

/* Both normals of Box-Muller pair k of the stream. */
static void normal_pair(uint64_t key, uint64_t k, double *z0, double *z1) {
    uint64_t a = mix64(key + (2 * k + 1) * GOLDEN);
    uint64_t b = mix64(key + (2 * k + 2) * GOLDEN);
    double u1 = ((double)(a >> 11) + 1.0) * 0x1p-53; /* (0, 1]: log is finite */
    double u2 = (double)(b >> 11) * 0x1p-53;         /* [0, 1) */
    double r = sqrt(-2.0 * synth_det_log(u1));       /* sqrt is correctly rounded */
    double s, c;
    synth_det_sincos_turns(u2, &s, &c);
    *z0 = r * c;
    *z1 = r * s;
}

double synth_normal(uint64_t seed, uint64_t stream, uint64_t i) {
    double z0, z1;
    normal_pair(stream_key(seed, stream), i / 2, &z0, &z1);
    return i % 2 ? z1 : z0;
}

/* The GPT-2 family's shapes (Hugging Face openai-community/gpt2*). */
static const struct {
    const char *name;
    size_t n_layer, n_head, n_embd, n_positions;
} presets[] = {
    {"tiny", 2, 4, 64, 128},
    {"gpt2", 12, 12, 768, 1024},
    {"gpt2-medium", 24, 16, 1024, 1024},
    {"gpt2-large", 36, 20, 1280, 1024},
    {"gpt2-xl", 48, 25, 1600, 1024},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

int synth_preset(gpt2_config *cfg, const char *preset, as_err *err) {
    memset(cfg, 0, sizeof *cfg);
    if (synth_family_preset(cfg, preset)) return 0;
    cfg->layer_norm_epsilon = 1e-5f;
    strcpy(cfg->activation_function, "gelu_new");
    cfg->vocab_size = 50257;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(preset, presets[i].name)) {
            cfg->n_layer = presets[i].n_layer;
            cfg->n_head = presets[i].n_head;
            cfg->n_embd = presets[i].n_embd;
            cfg->n_positions = presets[i].n_positions;
            model_gpt2_derive(cfg);
            return 0;
        }
    return as_fail(err, "unknown preset '%s' (expected %s)", preset, SYNTH_PRESET_NAMES);
}

int synth_dtype_parse(sft_dtype *dtype, const char *name, as_err *err) {
    if (!strcmp(name, "f32") || !strcmp(name, "F32")) *dtype = SFT_F32;
    else if (!strcmp(name, "f16") || !strcmp(name, "F16")) *dtype = SFT_F16;
    else if (!strcmp(name, "bf16") || !strcmp(name, "BF16")) *dtype = SFT_BF16;
    else return as_fail(err, "unknown dtype '%s' (expected f32, f16 or bf16)", name);
    return 0;
}

void synth_tensor_add(synth_tensor *t, size_t *n, const char *name, size_t ndim, const size_t *shape,
                      fill_kind fill, double std) {
    synth_tensor *s = &t[(*n)++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->spec.name = s->name;
    s->spec.dtype = SFT_F32; /* write_weights sets the file's dtype */
    s->spec.ndim = ndim;
    for (size_t d = 0; d < ndim; d++) s->spec.shape[d] = shape[d];
    s->fill = fill;
    s->std = std;
    s->qk_std = 0;
    s->period = 0;
}

/* The tensors of a Hugging Face GPT-2 file, in our file order. */
static size_t tensors_gpt2(synth_tensor *t, const gpt2_config *c, double qk_std) {
    size_t n = 0, C = c->n_embd, P = c->n_positions;
    double proj_std = INIT_STD / sqrt(2.0 * (double)c->n_layer);
    char name[64];
    synth_tensor_add(t, &n, "wte.weight", 2, (size_t[]){c->vocab_size, C}, FILL_NORMAL, INIT_STD);
    synth_tensor_add(t, &n, "wpe.weight", 2, (size_t[]){P, C}, FILL_NORMAL, INIT_STD);
    for (size_t l = 0; l < c->n_layer; l++) {
#define NAME(suffix) (snprintf(name, sizeof name, "h.%zu.%s", l, suffix), name)
        synth_tensor_add(t, &n, NAME("ln_1.weight"), 1, (size_t[]){C}, FILL_ONES, 0);
        synth_tensor_add(t, &n, NAME("ln_1.bias"), 1, (size_t[]){C}, FILL_ZEROS, 0);
        synth_tensor_add(t, &n, NAME("attn.bias"), 4, (size_t[]){1, 1, P, P}, FILL_CAUSAL, 0);
        synth_tensor_add(t, &n, NAME("attn.c_attn.weight"), 2, (size_t[]){C, 3 * C}, FILL_C_ATTN, INIT_STD);
        t[n - 1].qk_std = qk_std;
        synth_tensor_add(t, &n, NAME("attn.c_attn.bias"), 1, (size_t[]){3 * C}, FILL_ZEROS, 0);
        synth_tensor_add(t, &n, NAME("attn.c_proj.weight"), 2, (size_t[]){C, C}, FILL_NORMAL, proj_std);
        synth_tensor_add(t, &n, NAME("attn.c_proj.bias"), 1, (size_t[]){C}, FILL_ZEROS, 0);
        synth_tensor_add(t, &n, NAME("ln_2.weight"), 1, (size_t[]){C}, FILL_ONES, 0);
        synth_tensor_add(t, &n, NAME("ln_2.bias"), 1, (size_t[]){C}, FILL_ZEROS, 0);
        synth_tensor_add(t, &n, NAME("mlp.c_fc.weight"), 2, (size_t[]){C, 4 * C}, FILL_NORMAL, INIT_STD);
        synth_tensor_add(t, &n, NAME("mlp.c_fc.bias"), 1, (size_t[]){4 * C}, FILL_ZEROS, 0);
        synth_tensor_add(t, &n, NAME("mlp.c_proj.weight"), 2, (size_t[]){4 * C, C}, FILL_NORMAL, proj_std);
        synth_tensor_add(t, &n, NAME("mlp.c_proj.bias"), 1, (size_t[]){C}, FILL_ZEROS, 0);
#undef NAME
    }
    synth_tensor_add(t, &n, "ln_f.weight", 1, (size_t[]){C}, FILL_ONES, 0);
    synth_tensor_add(t, &n, "ln_f.bias", 1, (size_t[]){C}, FILL_ZEROS, 0);
    return n;
}

static size_t numel(const sft_spec *s) {
    size_t n = 1;
    for (size_t d = 0; d < s->ndim; d++) n *= s->shape[d];
    return n;
}

/* Element `first + j` (j < count) of tensor t, stream = its index. */
static void fill_chunk(float *out, const synth_tensor *t, uint64_t seed, uint64_t stream,
                       size_t first, size_t count) {
    uint64_t key = stream_key(seed, stream);
    uint64_t cached_pair = UINT64_MAX;
    double z0 = 0, z1 = 0;
    size_t cols = t->spec.ndim >= 2 ? t->spec.shape[t->spec.ndim - 1] : 1;
    for (size_t j = 0; j < count; j++) {
        size_t i = first + j;
        switch (t->fill) {
        case FILL_ONES: out[j] = 1.0f; break;
        case FILL_ZEROS: out[j] = 0.0f; break;
        case FILL_CAUSAL: out[j] = (i % cols) <= (i / cols) % cols ? 1.0f : 0.0f; break;
        case FILL_NORMAL:
        case FILL_QKV_ROWS:
        case FILL_C_ATTN: {
            if (i / 2 != cached_pair) {
                cached_pair = i / 2;
                normal_pair(key, cached_pair, &z0, &z1);
            }
            double z = i % 2 ? z1 : z0;
            double std = t->std;
            /* c_attn columns: [0, C) query, [C, 2C) key, [2C, 3C) value */
            if (t->fill == FILL_C_ATTN && i % cols < 2 * (cols / 3)) std = t->qk_std;
            /* query_key_value rows: per head q, k, v blocks of period / 3 rows each */
            if (t->fill == FILL_QKV_ROWS && (i / cols) % t->period < 2 * (t->period / 3)) std = t->qk_std;
            out[j] = (float)(std * z);
            break;
        }
        }
    }
}

int synth_mkdir_parents(const char *dir, as_err *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return as_fail(err, "%s: path too long", dir);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return as_fail(err, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return as_fail(err, "%s: not a directory", dir);
    return 0;
}

/* Closes f; on any error removes tmp. Then renames tmp -> final. */
int synth_finish_file(FILE *f, const char *tmp, const char *final, int ok, as_err *err) {
    if (fflush(f) || ferror(f)) ok = 0;
    if (ok && fsync(fileno(f))) ok = 0;
    if (fclose(f)) ok = 0;
    if (!ok) {
        unlink(tmp);
        return as_fail(err, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (rename(tmp, final)) {
        int e = errno;
        unlink(tmp);
        return as_fail(err, "%s: cannot rename to %s: %s", tmp, final, strerror(e));
    }
    return 0;
}

static int write_weights(const char *dir, const gpt2_config *c, uint64_t seed, double qk_std,
                         sft_dtype dtype, as_err *err) {
    size_t max_tensors = 4 + 13 * c->n_layer;
    synth_tensor *t = calloc(max_tensors, sizeof *t);
    if (!t) return as_fail(err, "out of memory");
    size_t n = tensors_gpt2(t, c, qk_std);
    char final[4200];
    snprintf(final, sizeof final, "%s/model.safetensors", dir);
    int rc = synth_write_tensors(final, t, n, seed, dtype, err);
    free(t);
    return rc;
}

int synth_write_tensors(const char *final, synth_tensor *t, size_t n, uint64_t seed,
                        sft_dtype dtype, as_err *err) {
    sft_spec *specs = malloc(n * sizeof *specs);
    if (!specs) {
        free(t);
        return as_fail(err, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        t[i].spec.dtype = dtype;
        specs[i] = t[i].spec;
    }
    unsigned char *header;
    size_t header_len, data_len;
    int rc = sft_header_build(&header, &header_len, &data_len, specs, n, "{\"format\":\"pt\"}", err);
    free(specs);
    if (rc) return -1;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", final, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(header);
        return as_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
    }
    enum { CHUNK = 1 << 16 };
    float *buf = malloc(CHUNK * sizeof *buf);
    unsigned char *half = malloc(CHUNK * 2);
    int ok = buf && half && fwrite(header, 1, header_len, f) == header_len;
    for (size_t i = 0; ok && i < n; i++) {
        size_t total = numel(&t[i].spec);
        for (size_t first = 0; ok && first < total; first += CHUNK) {
            size_t count = total - first < CHUNK ? total - first : CHUNK;
            fill_chunk(buf, &t[i], seed, i, first, count);
            if (dtype == SFT_F32) {
                ok = fwrite(buf, sizeof *buf, count, f) == count; /* little-endian host */
                continue;
            }
            /* the float32 values rounded to nearest even, stored little-endian */
            for (size_t j = 0; j < count; j++) {
                uint16_t h = dtype == SFT_F16 ? sft_f32_to_f16(buf[j]) : sft_f32_to_bf16(buf[j]);
                half[2 * j] = (unsigned char)(h & 0xFF);
                half[2 * j + 1] = (unsigned char)(h >> 8);
            }
            ok = fwrite(half, 2, count, f) == count;
        }
    }
    free(buf);
    free(half);
    free(header);
    return synth_finish_file(f, tmp, final, ok, err);
}

static int write_config(const char *dir, const gpt2_config *c, const char *preset, uint64_t seed,
                        double qk_std, sft_dtype dtype, as_err *err) {
    /* The keys and values of Hugging Face's config.json for the GPT-2 family;
     * medium, large and xl add n_special, predict_special_tokens and
     * task_specific_params; a 16-bit file's torch_dtype names its dtype (F32 files
     * stay byte-identical to those written before 16-bit dtypes existed). */
    int family = strcmp(preset, "tiny") && strcmp(preset, "gpt2");
    const char *torch_dtype = dtype == SFT_F16 ? "float16" : dtype == SFT_BF16 ? "bfloat16" : "float32";
    char final[4200], tmp[4300];
    snprintf(final, sizeof final, "%s/config.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", final, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return as_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
    int ok = fprintf(f,
                     "{\n"
                     "  \"activation_function\": \"gelu_new\",\n"
                     "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
                     "  \"attn_pdrop\": 0.1,\n"
                     "  \"bos_token_id\": 50256,\n"
                     "  \"embd_pdrop\": 0.1,\n"
                     "  \"eos_token_id\": 50256,\n"
                     "  \"initializer_range\": 0.02,\n"
                     "  \"layer_norm_epsilon\": %.9g,\n"
                     "  \"model_type\": \"gpt2\",\n"
                     "  \"n_ctx\": %zu,\n"
                     "  \"n_embd\": %zu,\n"
                     "  \"n_head\": %zu,\n"
                     "  \"n_inner\": null,\n"
                     "  \"n_layer\": %zu,\n"
                     "  \"n_positions\": %zu,\n"
                     "%s"
                     "  \"resid_pdrop\": 0.1,\n"
                     "  \"scale_attn_weights\": true,\n"
                     "  \"summary_activation\": null,\n"
                     "  \"summary_first_dropout\": 0.1,\n"
                     "  \"summary_proj_to_labels\": true,\n"
                     "  \"summary_type\": \"cls_index\",\n"
                     "  \"summary_use_proj\": true,\n"
                     "%s"
                     "%s%s%s"
                     "  \"vocab_size\": %zu,\n"
                     "  \"attnsweep_synthetic\": true,\n"
                     "  \"attnsweep_preset\": \"%s\",\n"
                     "  \"attnsweep_seed\": %llu,\n"
                     "  \"attnsweep_qk_init_std\": %.9g,\n"
                     "  \"attnsweep_qk_logit_std_target\": %.9g\n"
                     "}\n",
                     (double)c->layer_norm_epsilon, c->n_positions, c->n_embd, c->n_head,
                     c->n_layer, c->n_positions,
                     family ? "  \"n_special\": 0,\n  \"predict_special_tokens\": true,\n" : "",
                     family ? "  \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, "
                              "\"max_length\": 50}},\n"
                            : "",
                     dtype == SFT_F32 ? "" : "  \"torch_dtype\": \"",
                     dtype == SFT_F32 ? "" : torch_dtype, dtype == SFT_F32 ? "" : "\",\n",
                     c->vocab_size, preset, (unsigned long long)seed,
                     qk_std, SYNTH_QK_LOGIT_STD) > 0;
    return synth_finish_file(f, tmp, final, ok, err);
}

int synth_write_config(const char *dir, const gpt2_config *cfg, const char *preset_name,
                       uint64_t seed, sft_dtype dtype, int force, as_err *err) {
    if (dtype != SFT_F32 && dtype != SFT_F16 && dtype != SFT_BF16)
        return as_fail(err, "%s: synthetic weights are F32, F16 or BF16, not %s", dir,
                       sft_dtype_name(dtype));
    char config_path[4200], weights_path[4200];
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);
    snprintf(weights_path, sizeof weights_path, "%s/model.safetensors", dir);
    if (!force && (fileio_exists(config_path, 0) || fileio_exists(weights_path, 0)))
        return as_fail(err, "%s: already holds a model (use --force to overwrite)", dir);
    for (const char *p = preset_name; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            return as_fail(err, "preset name must not contain quotes, backslashes or controls");
    if (synth_mkdir_parents(dir, err)) return -1;
    double qk_std = sqrt(SYNTH_QK_LOGIT_STD / (double)cfg->n_embd);
    if (cfg->family != MODEL_GPT2) return synth_family_write(dir, cfg, preset_name, seed, qk_std, dtype, err);
    /* weights first: a directory with a config.json is complete */
    if (write_weights(dir, cfg, seed, qk_std, dtype, err)) return -1;
    return write_config(dir, cfg, preset_name, seed, qk_std, dtype, err);
}

int synth_write_dtype(const char *dir, const char *preset, uint64_t seed, sft_dtype dtype, int force,
                      as_err *err) {
    gpt2_config cfg;
    if (synth_preset(&cfg, preset, err)) return -1;
    return synth_write_config(dir, &cfg, preset, seed, dtype, force, err);
}

int synth_write(const char *dir, const char *preset, uint64_t seed, int force, as_err *err) {
    return synth_write_dtype(dir, preset, seed, SFT_F32, force, err);
}
