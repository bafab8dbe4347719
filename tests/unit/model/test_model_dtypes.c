/* test_model_dtypes.c -- F16 and BF16 weights loaded into float32.
 *
 * 1. The conversions on every 16-bit pattern: BF16 and F16 -> float32 against
 *    the IEEE formula (ldexp), subnormals included, inf/NaN kept as inf/NaN;
 *    float32 -> 16 bits -> float32 gives back every finite pattern; the
 *    rounding (ties to even, F16 overflow, F16 subnormals, NaN) on chosen
 *    float32 values computed by hand.
 * 2. synth --dtype: the tiny preset written as F32, F16 and BF16 with one
 *    seed. Each 16-bit file's arena must equal, bit for bit, the F32 arena
 *    rounded with st_f32_to_* and widened again (the loader converts every
 *    tensor, in the arena order of model.h, and the rounding is the writer's);
 *    the F16 file must exercise F16 subnormals. A NaN or an infinity in a
 *    16-bit tensor is refused naming the file and tensor.
 * tests/reference/dtypes_check.py checks the same against torch, through
 *   test_model_dtypes --widen OUT       OUT: 65536 F16 then 65536 BF16 patterns as float32
 *   test_model_dtypes --round IN OUT    IN: float32s; OUT: their F16 then their BF16 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "safetensors.h"
#include "synth.h"

static uint32_t bits_of(float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

static float float_of(uint32_t b) {
    float v;
    memcpy(&v, &b, 4);
    return v;
}

static void test_all_patterns(void) {
    int bad_f16 = 0, bad_bf16 = 0, bad_rt16 = 0, bad_rtbf = 0, subnormals = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int sign = (h & 0x8000) != 0;
        /* F16: 1 sign, 5 exponent (bias 15), 10 mantissa */
        int e = (h >> 10) & 31, m = h & 1023;
        float f = sft_f16_to_f32((uint16_t)h);
        if (e == 31) {
            bad_f16 += m ? !isnan(f) : !(isinf(f) && (signbit(f) != 0) == sign);
        } else {
            double want = e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24);
            if (sign) want = -want;
            bad_f16 += (double)f != want || (signbit(f) != 0) != sign;
            subnormals += e == 0 && m != 0;
            bad_rt16 += sft_f32_to_f16(f) != h;
        }
        /* BF16: 1 sign, 8 exponent (bias 127), 7 mantissa */
        int be = (h >> 7) & 255, bm = h & 127;
        float b = sft_bf16_to_f32((uint16_t)h);
        if (be == 255) {
            bad_bf16 += bm ? !isnan(b) : !(isinf(b) && (signbit(b) != 0) == sign);
        } else {
            double want = be ? ldexp(128.0 + bm, be - 134) : ldexp((double)bm, -133);
            if (sign) want = -want;
            bad_bf16 += (double)b != want || (signbit(b) != 0) != sign;
            bad_rtbf += sft_f32_to_bf16(b) != h;
        }
    }
    CHECK(bad_f16 == 0, "%d F16 patterns convert wrongly", bad_f16);
    CHECK(bad_bf16 == 0, "%d BF16 patterns convert wrongly", bad_bf16);
    CHECK(subnormals == 2 * 1023, "%d F16 subnormals seen", subnormals);
    CHECK(bad_rt16 == 0, "%d finite F16 patterns do not survive f32 and back", bad_rt16);
    CHECK(bad_rtbf == 0, "%d finite BF16 patterns do not survive f32 and back", bad_rtbf);

    /* rounding, by hand */
    const struct {
        float v;
        uint16_t f16, bf16;
    } cases[] = {
        {1.0f, 0x3C00, 0x3F80},
        {-2.0f, 0xC000, 0xC000},
        {1.0f + 0x1p-11f, 0x3C00, 0x3F80},            /* F16 tie, even stays */
        {1.0f + 3 * 0x1p-11f, 0x3C02, 0x3F80},        /* F16 tie, odd rounds up */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01, 0x3F80}, /* just above the tie */
        {1.0f + 0x1p-8f, 0x3C04, 0x3F80},             /* BF16 tie, even stays */
        {1.0f + 3 * 0x1p-8f, 0x3C0C, 0x3F82},         /* BF16 tie, odd rounds up */
        {65504.0f, 0x7BFF, 0x4780},                   /* F16 max; BF16 rounds to 65536 */
        {65519.0f, 0x7BFF, 0x4780},
        {65520.0f, 0x7C00, 0x4780},                   /* F16 tie at the top: inf */
        {-1e6f, 0xFC00, 0xC974},
        {0x1p-24f, 0x0001, 0x3380},                   /* smallest F16 subnormal */
        {0x1p-25f, 0x0000, 0x3300},                   /* tie to even: zero */
        {0x1p-25f + 0x1p-40f, 0x0001, 0x3300},
        {3 * 0x1p-25f, 0x0002, 0x33C0},               /* tie 1.5 -> 2 */
        {-0x1p-14f + 0x1p-26f, 0x8400, 0xB880},       /* rounds up into the normals */
        {0x1p-130f, 0x0000, 0x0008},                  /* F32 subnormal; BF16 keeps it */
        {-0.0f, 0x8000, 0x8000},
        {3.4028235e38f, 0x7C00, 0x7F80},              /* FLT_MAX: BF16 rounds to inf */
        {INFINITY, 0x7C00, 0x7F80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = sft_f32_to_f16(cases[i].v), b = sft_f32_to_bf16(cases[i].v);
        CHECK(h == cases[i].f16, "f16(%a) = 0x%04X want 0x%04X", (double)cases[i].v, h,
              cases[i].f16);
        CHECK(b == cases[i].bf16, "bf16(%a) = 0x%04X want 0x%04X", (double)cases[i].v, b,
              cases[i].bf16);
    }
    CHECK(isnan(sft_f16_to_f32(sft_f32_to_f16(NAN))) && isnan(sft_bf16_to_f32(sft_f32_to_bf16(NAN))),
          "NaN stays NaN");
    CHECK(isnan(sft_bf16_to_f32(sft_f32_to_bf16(float_of(0x7F800001u)))),
          "a NaN whose payload sits in the dropped bits stays NaN");
}

/* 16 bits -> float32 by the formula, not by the code under test. */
static float widen(uint16_t h, sft_dtype dtype) {
    if (dtype == SFT_BF16) return float_of((uint32_t)h << 16);
    int e = (h >> 10) & 31, m = h & 1023; /* finite only: the files hold no inf/NaN */
    double v = e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24);
    return (float)(h & 0x8000 ? -v : v);
}

/* The arena of a 16-bit file against the F32 arena rounded to that dtype. */
static void check_rounded(const gpt2_model *m32, const gpt2_model *m16, sft_dtype dtype,
                          const char *label) {
    CHECK(m32->arena_floats == m16->arena_floats, "%s: arena sizes", label);
    size_t bad = 0, subnormal = 0, changed = 0, first_bad = 0;
    for (size_t i = 0; i < m32->arena_floats; i++) {
        float v = m32->arena[i];
        uint16_t h = dtype == SFT_F16 ? sft_f32_to_f16(v) : sft_f32_to_bf16(v);
        float want = widen(h, dtype);
        if (bits_of(m16->arena[i]) != bits_of(want) && !bad++) first_bad = i;
        changed += bits_of(want) != bits_of(v);
        subnormal += dtype == SFT_F16 && (h & 0x7C00) == 0 && (h & 0x3FF) != 0;
    }
    CHECK(bad == 0, "%s: %zu of %zu floats differ from the rounded F32 arena (first at %zu: %a "
                    "vs F32 %a)",
          label, bad, m32->arena_floats, first_bad, (double)m16->arena[first_bad],
          (double)m32->arena[first_bad]);
    CHECK(changed > m32->arena_floats / 2, "%s: rounding changed only %zu floats", label, changed);
    if (dtype == SFT_F16)
        CHECK(subnormal > 100, "%s: only %zu F16 subnormals: the test misses them", label,
              subnormal);
    printf("%s: %zu floats, %zu changed by rounding, %zu F16 subnormals; arena equal\n", label,
           m32->arena_floats, changed, subnormal);
}

/* Overwrites element `index` of tensor `name` in DIR/model.safetensors with `pattern`. */
static int poke16(const char *dir, const char *name, size_t index, uint16_t pattern) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    sft_file f;
    as_err err;
    if (sft_open(&f, path, &err)) return -1;
    const sft_tensor *t = sft_find(&f, name);
    long offset = t ? (long)(f.data - f.map) + (long)t->begin + 2 * (long)index : -1;
    sft_close(&f);
    FILE *out = offset >= 0 ? fopen(path, "r+b") : NULL;
    if (!out) return -1;
    unsigned char le[2] = {(unsigned char)(pattern & 0xFF), (unsigned char)(pattern >> 8)};
    int ok = fseek(out, offset, SEEK_SET) == 0 && fwrite(le, 1, 2, out) == 2;
    return fclose(out) == 0 && ok ? 0 : -1;
}

static void test_synth_dtypes(const char *dir) {
    char d32[300], d16[300], dbf[300];
    snprintf(d32, sizeof d32, "%s/f32", dir);
    snprintf(d16, sizeof d16, "%s/f16", dir);
    snprintf(dbf, sizeof dbf, "%s/bf16", dir);
    as_err err = {{0}};
    CHECK(synth_write_dtype(d32, "tiny", 11, SFT_F32, 0, &err) == 0, "f32: %s", err.msg);
    CHECK(synth_write_dtype(d16, "tiny", 11, SFT_F16, 0, &err) == 0, "f16: %s", err.msg);
    CHECK(synth_write_dtype(dbf, "tiny", 11, SFT_BF16, 0, &err) == 0, "bf16: %s", err.msg);
    CHECK(synth_write_dtype(dbf, "tiny", 11, SFT_I32, 1, &err) == -1 && strstr(err.msg, "I32"),
          "I32 refused: %s", err.msg);
    sft_dtype dt;
    CHECK(synth_dtype_parse(&dt, "bf16", &err) == 0 && dt == SFT_BF16, "parse bf16");
    CHECK(synth_dtype_parse(&dt, "fp8", &err) == -1 && strstr(err.msg, "fp8"), "parse fp8");

    /* the files declare the dtype for every tensor and are half the size */
    char path[400];
    snprintf(path, sizeof path, "%s/model.safetensors", dbf);
    sft_file f;
    if (sft_open(&f, path, &err) == 0) {
        size_t n_bf16 = 0;
        for (size_t i = 0; i < f.n_tensors; i++) n_bf16 += f.tensors[i].dtype == SFT_BF16;
        CHECK(n_bf16 == f.n_tensors && f.n_tensors == 4 + 13 * 2, "%zu of %zu tensors BF16",
              n_bf16, f.n_tensors);
        sft_close(&f);
    } else {
        CHECK(0, "open %s: %s", path, err.msg);
    }

    gpt2_model m32, m16, mbf;
    if (model_load(&m32, d32, &err)) {
        CHECK(0, "load f32: %s", err.msg);
        return;
    }
    CHECK(model_load(&m16, d16, &err) == 0, "load f16: %s", err.msg);
    CHECK(model_load(&mbf, dbf, &err) == 0, "load bf16: %s", err.msg);
    if (m16.arena) check_rounded(&m32, &m16, SFT_F16, "tiny F16");
    if (mbf.arena) check_rounded(&m32, &mbf, SFT_BF16, "tiny BF16");
    CHECK(strcmp(m16.weights_sha256, m32.weights_sha256) && strcmp(mbf.weights_sha256, m16.weights_sha256),
          "each file has its own sha256");
    model_free(&m32);
    model_free(&m16);
    model_free(&mbf);

    /* a NaN, an infinity: refused, naming the file and the tensor */
    gpt2_model bad;
    CHECK(poke16(dbf, "h.1.mlp.c_fc.weight", 17, 0x7FC1) == 0, "poke NaN");
    CHECK(model_load(&bad, dbf, &err) == -1 && strstr(err.msg, "bf16/model.safetensors") &&
              strstr(err.msg, "tensor h.1.mlp.c_fc.weight") && strstr(err.msg, "element 17 is NaN"),
          "BF16 NaN: %s", err.msg);
    CHECK(poke16(d16, "wpe.weight", 3, 0xFC00) == 0, "poke -inf");
    CHECK(model_load(&bad, d16, &err) == -1 && strstr(err.msg, "f16/model.safetensors") &&
              strstr(err.msg, "tensor wpe.weight") && strstr(err.msg, "element 3 is infinite"),
          "F16 -inf: %s", err.msg);
}

static int widen_table(const char *out) {
    FILE *f = fopen(out, "wb");
    if (!f) return 1;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t h = 0; h < 65536; h++) {
            float v = pass ? sft_bf16_to_f32((uint16_t)h) : sft_f16_to_f32((uint16_t)h);
            fwrite(&v, 4, 1, f); /* little-endian host (safetensors.h) */
        }
    return fclose(f) != 0;
}

static int round_file(const char *in, const char *out) {
    FILE *f = fopen(in, "rb"), *g = fopen(out, "wb");
    if (!f || !g) return 1;
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f) / 4;
    rewind(f);
    float *v = malloc(n * 4 + 4);
    uint16_t *h = malloc(n * 2 + 2);
    if (!v || !h || fread(v, 4, n, f) != n) return 1;
    for (size_t i = 0; i < n; i++) h[i] = sft_f32_to_f16(v[i]);
    fwrite(h, 2, n, g);
    for (size_t i = 0; i < n; i++) h[i] = sft_f32_to_bf16(v[i]);
    fwrite(h, 2, n, g);
    free(v);
    free(h);
    fclose(f);
    return fclose(g) != 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--widen")) return widen_table(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "--round")) return round_file(argv[2], argv[3]);
    char dir[] = "/tmp/test_model_dtypes.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_all_patterns();
    test_synth_dtypes(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_model_dtypes");
}
