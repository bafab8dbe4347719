/* sha256.c -- see sha256.h; a straight transcription of FIPS 180-4 sec. 6.2. */
#include "sha256.h"
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K[i] + w[i];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void sha256_init(sha256_ctx *ctx) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->state, H0, sizeof H0);
    ctx->total_len = 0;
    ctx->block_len = 0;
}

void sha256_update(sha256_ctx *ctx, const void *data, size_t len) {
    const unsigned char *p = data;
    ctx->total_len += len;
    if (ctx->block_len) {
        size_t take = 64 - ctx->block_len < len ? 64 - ctx->block_len : len;
        memcpy(ctx->block + ctx->block_len, p, take);
        ctx->block_len += take;
        p += take;
        len -= take;
        if (ctx->block_len < 64) return;
        compress(ctx->state, ctx->block);
        ctx->block_len = 0;
    }
    while (len >= 64) {
        compress(ctx->state, p);
        p += 64;
        len -= 64;
    }
    memcpy(ctx->block, p, len);
    ctx->block_len = len;
}

void sha256_final(sha256_ctx *ctx, unsigned char digest[32]) {
    uint64_t bits = ctx->total_len * 8;
    unsigned char pad[72] = {0x80};
    size_t pad_len = (ctx->block_len < 56 ? 56 : 120) - ctx->block_len;
    for (int i = 0; i < 8; i++) pad[pad_len + i] = (unsigned char)(bits >> (56 - 8 * i));
    uint64_t saved = ctx->total_len;
    sha256_update(ctx, pad, pad_len + 8);
    ctx->total_len = saved;
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (unsigned char)(ctx->state[i] >> 24);
        digest[4 * i + 1] = (unsigned char)(ctx->state[i] >> 16);
        digest[4 * i + 2] = (unsigned char)(ctx->state[i] >> 8);
        digest[4 * i + 3] = (unsigned char)ctx->state[i];
    }
}

void sha256_digest_to_hex(char hex[65], const unsigned char digest[32]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

void sha256_hex(char hex[65], const void *data, size_t len) {
    sha256_ctx ctx;
    unsigned char digest[32];
    sha256_init(&ctx);
    sha256_update(&ctx, data, len);
    sha256_final(&ctx, digest);
    sha256_digest_to_hex(hex, digest);
}

int sha256_file_hex(char hex[65], const char *path, as_err *err) {
    int fd = fileio_open_regular(path, 0, NULL, err);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return as_fail(err, "%s: cannot open: %s", path, strerror(errno));
    }
    sha256_ctx ctx;
    sha256_init(&ctx);
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&ctx, buf, got);
    int bad = ferror(f);
    fclose(f);
    if (bad) return as_fail(err, "%s: read error", path);
    unsigned char digest[32];
    sha256_final(&ctx, digest);
    sha256_digest_to_hex(hex, digest);
    return 0;
}
