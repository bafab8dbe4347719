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

/* ---- the same compression with the x86 SHA extensions (SHA-NI) ----
 * Intel's SHA256RNDS2 does two rounds on the state split as {A,B,E,F} and
 * {C,D,G,H}; SHA256MSG1/MSG2 compute the message schedule four words at a
 * time: with X_g = w[4g..4g+3], X_g = MSG2(MSG1(X_{g-4}, X_{g-3}) +
 * w[4g-7..4g-4], X_{g-1}). Chosen at run time (CPUID), else the code above.
 * About 4x faster: 548 MB of GPT-2 small weights in ~0.4 s instead of 1.6 s. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SHA256_HAVE_NI 1

__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8], const unsigned char *p,
                                                                    size_t blocks) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_loadu_si128((const __m128i *)(const void *)&h[0]);     /* D C B A */
    __m128i s1 = _mm_loadu_si128((const __m128i *)(const void *)&h[4]);    /* H G F E */
    t = _mm_shuffle_epi32(t, 0xB1);                                         /* C D A B */
    s1 = _mm_shuffle_epi32(s1, 0x1B);                                       /* E F G H */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                 /* A B E F */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                      /* C D G H */
    for (; blocks; blocks--, p += 64) {
        __m128i abef = s0, cdgh = s1, x[4];
        for (int g = 0; g < 16; g++) {
            __m128i m;
            if (g < 4) {
                m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * g)), bswap);
            } else {
                m = _mm_sha256msg1_epu32(x[g & 3], x[(g + 1) & 3]);                 /* X_{g-4}, X_{g-3} */
                m = _mm_add_epi32(m, _mm_alignr_epi8(x[(g + 3) & 3], x[(g + 2) & 3], 4)); /* w[t-7] */
                m = _mm_sha256msg2_epu32(m, x[(g + 3) & 3]);                         /* + s1(w[t-2]) */
            }
            x[g & 3] = m;
            __m128i wk = _mm_add_epi32(m, _mm_loadu_si128((const __m128i *)(const void *)&K[4 * g]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, wk);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);                                        /* F E B A */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                                       /* D C H G */
    s0 = _mm_blend_epi16(t, s1, 0xF0);                                      /* D C B A */
    s1 = _mm_alignr_epi8(s1, t, 8);                                         /* H G F E */
    _mm_storeu_si128((__m128i *)(void *)&h[0], s0);
    _mm_storeu_si128((__m128i *)(void *)&h[4], s1);
}

static int cpu_has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 29) & 1; /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}
#endif

static int use_ni = -1; /* -1: not decided yet */

void sha256_force_portable(int on) {
#ifdef SHA256_HAVE_NI
    use_ni = on ? 0 : cpu_has_sha_ni();
#else
    (void)on;
    use_ni = 0;
#endif
}

int sha256_accelerated(void) {
    if (use_ni < 0) sha256_force_portable(0);
    return use_ni;
}

static void compress_blocks(uint32_t h[8], const unsigned char *p, size_t blocks) {
#ifdef SHA256_HAVE_NI
    if (sha256_accelerated()) {
        compress_ni(h, p, blocks);
        return;
    }
#endif
    for (; blocks; blocks--, p += 64) compress(h, p);
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
        compress_blocks(ctx->state, ctx->block, 1);
        ctx->block_len = 0;
    }
    if (len >= 64) {
        compress_blocks(ctx->state, p, len / 64);
        p += len / 64 * 64;
        len %= 64;
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
