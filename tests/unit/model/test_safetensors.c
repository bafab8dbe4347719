/* test_safetensors.c -- the safetensors reader on hand-written files:
 * every header defect is rejected with a message naming the file and the
 * tensor; F16/BF16 convert to the exact floats computed by hand; data that
 * starts at an odd offset reads correctly. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "safetensors.h"

static char dir[64];
static char path[128];

/* Writes header (declared length = its strlen unless declared >= 0), then data. */
static void write_raw(const char *header, long long declared, const void *data, size_t data_len) {
    FILE *f = fopen(path, "wb");
    uint64_t n = declared >= 0 ? (uint64_t)declared : strlen(header);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(n >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (data_len) fwrite(data, 1, data_len, f);
    fclose(f);
}

static void expect_reject(const char *label, const char *want1, const char *want2) {
    sft_file f;
    as_err err = {{0}};
    int rc = sft_open(&f, path, &err);
    CHECK(rc == -1, "%s: accepted", label);
    if (rc == 0) sft_close(&f);
    CHECK(strstr(err.msg, path) != NULL, "%s: message lacks the path: %s", label, err.msg);
    CHECK(strstr(err.msg, want1) != NULL, "%s: message lacks '%s': %s", label, want1, err.msg);
    if (want2) CHECK(strstr(err.msg, want2) != NULL, "%s: message lacks '%s': %s", label, want2, err.msg);
}

static unsigned char zeros[256];

static void test_rejections(void) {
    /* shorter than the 8-byte length */
    FILE *f = fopen(path, "wb");
    fwrite("\x05\0\0", 1, 3, f);
    fclose(f);
    expect_reject("3-byte file", "too short", NULL);

    const char *two = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    write_raw(two, (long long)strlen(two) + 100, zeros, 12);
    expect_reject("header length > file", "header length", "exceeds");

    write_raw(two, -1, zeros, 10); /* truncated: b's last 2 bytes missing */
    expect_reject("truncated", "tensor b", "past the end");

    write_raw(two, -1, zeros, 16);
    expect_reject("trailing bytes", "4 bytes after the last tensor", NULL);

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", -1, zeros, 12);
    expect_reject("overlap", "tensor b", "overlap tensor a");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", -1, zeros, 16);
    expect_reject("gap", "tensor b", "gap");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", -1, zeros, 12);
    expect_reject("gap at start", "tensor a", "gap");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,40]}}", -1, zeros, 12);
    expect_reject("offsets disagree with shape", "tensor b", "needs 4");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[100,112]}}", -1, zeros, 12);
    expect_reject("offsets past end", "tensor a", "past the end");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,0]}}", -1, zeros, 12);
    expect_reject("end before begin", "tensor a", "end before");

    write_raw("{\"a\":{\"dtype\":\"F33\",\"shape\":[3],\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("unknown dtype", "tensor a", "unknown dtype \"F33\"");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[-3],\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("negative shape", "tensor a", "shape[0]");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12.5]}}", -1, zeros, 12);
    expect_reject("fractional offset", "tensor a", "data_offsets");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3]}}", -1, zeros, 12);
    expect_reject("no offsets", "tensor a", "data_offsets");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12],\"x\":1}}", -1, zeros, 12);
    expect_reject("extra key", "tensor a", "unknown key \"x\"");

    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
              "\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("shape overflow", "tensor a", "overflow");

    write_raw("{\"__metadata__\":{\"format\":3}}", -1, zeros, 0);
    expect_reject("metadata value not a string", "__metadata__", "format");

    write_raw("[1,2]", -1, zeros, 0);
    expect_reject("array header", "expected an object", NULL);

    /* JSON syntax: the message says where */
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}", -1, zeros, 12);
    expect_reject("unclosed object", "header JSON", "byte 54: unexpected end");
    write_raw("{\"a\\q\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("bad escape", "header JSON", "invalid escape");
    write_raw("{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("lone surrogate", "header JSON", "surrogate");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3,],\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("trailing comma", "header JSON", "byte 31:");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[12,12]}}", -1, zeros, 12);
    expect_reject("duplicate tensor", "duplicate key \"a\"", NULL);
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[03],\"data_offsets\":[0,12]}}", -1, zeros, 12);
    expect_reject("leading zero", "header JSON", "leading zero");

    /* a header that would be valid JSON were it not cut by its length */
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 20, zeros, 0);
    expect_reject("header cut", "header JSON", "byte 20");

    /* nonexistent file */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/nope.safetensors", dir);
    sft_file sf;
    as_err err = {{0}};
    CHECK(sft_open(&sf, missing, &err) == -1 && strstr(err.msg, "nope.safetensors"), "missing: %s",
          err.msg);
}

static void put16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v & 0xFF);
    p[1] = (unsigned char)(v >> 8);
}

/* F32, F16 and BF16 tensors behind a header of odd length (data at file
 * offset 8 + 85: not 2-, 4- or 8-aligned). */
static void test_conversions(void) {
    const char *header_fmt =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"f32\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
        "\"f16\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[12,24]},"
        "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
        "\"i32\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[32,36]},"
        "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[36,36]}}%*s";
    char header[1024];
    int pad = 0;
    snprintf(header, sizeof header, header_fmt, pad, "");
    while (strlen(header) % 8 != 5) { /* force an odd data start */
        pad++;
        snprintf(header, sizeof header, header_fmt, pad, "");
    }
    unsigned char data[36];
    float f32[3] = {1.5f, -0.0f, 3.0e-39f}; /* includes a float32 subnormal */
    memcpy(data, f32, 12);
    const uint16_t half[6] = {0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF, 0x8000};
    const float half_want[6] = {1.0f, -2.0f, 0.333251953125f, 5.9604644775390625e-8f /* 2^-24 */,
                                65504.0f, -0.0f};
    for (int i = 0; i < 6; i++) put16(data + 12 + 2 * i, half[i]);
    const uint16_t bf[4] = {0x3F80, 0xC049, 0x0001, 0x7F7F};
    const float bf_want[4] = {1.0f, -3.140625f, 9.18354961579912e-41f /* 2^-133 */,
                              3.3895313892515355e38f /* (2 - 2^-7) * 2^127 */};
    for (int i = 0; i < 4; i++) put16(data + 24 + 2 * i, bf[i]);
    memset(data + 32, 0, 4);
    write_raw(header, -1, data, sizeof data);

    sft_file f;
    as_err err = {{0}};
    if (sft_open(&f, path, &err)) {
        CHECK(0, "conversions file rejected: %s", err.msg);
        return;
    }
    CHECK(((uintptr_t)f.data & 1) == 1, "data section should start at an odd address");
    CHECK(f.n_tensors == 5, "n_tensors %zu", f.n_tensors);
    const sft_tensor *t = sft_find(&f, "f32");
    float out[8];
    CHECK(t && sft_read_f32(&f, t, out, &err) == 0, "f32: %s", err.msg);
    for (int i = 0; i < 3; i++) CHECK(memcmp(&out[i], &f32[i], 4) == 0, "f32[%d] = %g", i, out[i]);
    t = sft_find(&f, "f16");
    CHECK(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6, "f16 shape");
    CHECK(t && sft_read_f32(&f, t, out, &err) == 0, "f16: %s", err.msg);
    for (int i = 0; i < 6; i++)
        CHECK(memcmp(&out[i], &half_want[i], 4) == 0, "f16[%d] = %.10g want %.10g", i, out[i],
              half_want[i]);
    t = sft_find(&f, "bf16");
    CHECK(t && sft_read_f32(&f, t, out, &err) == 0, "bf16: %s", err.msg);
    for (int i = 0; i < 4; i++)
        CHECK(memcmp(&out[i], &bf_want[i], 4) == 0, "bf16[%d] = %.10g want %.10g", i, out[i],
              bf_want[i]);
    t = sft_find(&f, "i32");
    CHECK(t && sft_read_f32(&f, t, out, &err) == -1 && strstr(err.msg, "tensor i32") &&
              strstr(err.msg, "dtype I32"),
          "i32 must be refused: %s", err.msg);
    t = sft_find(&f, "empty");
    CHECK(t && t->numel == 0 && sft_read_f32(&f, t, out, &err) == 0, "empty tensor");
    CHECK(sft_find(&f, "__metadata__") == NULL, "metadata is not a tensor");
    sft_close(&f);

    /* every F16 bit pattern against the IEEE formula (finite ones) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31) {
            float v = sft_f16_to_f32((uint16_t)h);
            if (m ? !isnan(v) : !isinf(v)) bad++;
            continue;
        }
        double want = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
        if (h & 0x8000) want = -want;
        if ((double)sft_f16_to_f32((uint16_t)h) != want) bad++;
    }
    CHECK(bad == 0, "%d F16 patterns convert wrongly", bad);
}

static void test_nonfinite(void) {
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                    "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[12,16]}}";
    unsigned char data[16] = {0};
    float nan_value = NAN;
    memcpy(data + 4, &nan_value, 4);
    put16(data + 14, 0xFC00); /* -inf */
    write_raw(h, -1, data, sizeof data);
    sft_file f;
    as_err err = {{0}};
    if (sft_open(&f, path, &err)) {
        CHECK(0, "nonfinite file rejected at open: %s", err.msg);
        return;
    }
    float out[3];
    CHECK(sft_read_f32(&f, sft_find(&f, "w"), out, &err) == -1 && strstr(err.msg, "tensor w") &&
              strstr(err.msg, "element 1 is NaN"),
          "NaN: %s", err.msg);
    CHECK(sft_read_f32(&f, sft_find(&f, "h"), out, &err) == -1 && strstr(err.msg, "tensor h") &&
              strstr(err.msg, "element 1 is infinite"),
          "inf: %s", err.msg);
    sft_close(&f);
}

/* sft_header_build's output parses back to the same specs. */
static void test_writer(void) {
    sft_spec specs[2] = {{"x\"y", SFT_F32, 2, {2, 3}}, {"z", SFT_BF16, 1, {5}}};
    unsigned char *buf;
    size_t len, data_len;
    as_err err = {{0}};
    CHECK(sft_header_build(&buf, &len, &data_len, specs, 2, "{\"format\":\"pt\"}", &err) == 0,
          "build: %s", err.msg);
    CHECK(len % 8 == 0 && data_len == 34, "len %zu data %zu", len, data_len);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, len, f);
    fwrite(zeros, 1, data_len, f);
    fclose(f);
    free(buf);
    sft_file sf;
    CHECK(sft_open(&sf, path, &err) == 0, "reopen: %s", err.msg);
    if (!sf.map) return;
    const sft_tensor *t = sft_find(&sf, "x\"y");
    CHECK(t && t->dtype == SFT_F32 && t->shape[1] == 3 && t->begin == 0 && t->end == 24, "x\"y");
    t = sft_find(&sf, "z");
    CHECK(t && t->dtype == SFT_BF16 && t->begin == 24 && t->end == 34, "z");
    sft_close(&sf);
}

int main(void) {
    snprintf(dir, sizeof dir, "test_safetensors.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    test_rejections();
    test_conversions();
    test_nonfinite();
    test_writer();
    unlink(path);
    rmdir(dir);
    return check_summary("test_safetensors");
}
