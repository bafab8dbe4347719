/* crc32.c -- journal_crc32 (journal.h): CRC-32 as zlib's crc32 (IEEE 802.3
 * polynomial 0x04C11DB7, reflected, initial and final complement).
 *
 * Every byte the master commits is checksummed twice: once for the journal record
 * and once more when compaction reads the view back (store.h), so at paper size this
 * is a third of the commit's CPU with the slicing-by-8 table (~3 GB/s). On x86-64
 * with PCLMULQDQ the bulk is folded with carry-less multiplies instead (Gopal et al.,
 * "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel,
 * 2009), several times faster; the table handles the head, the tail and other CPUs.
 * Both give the same value (tests/unit/store/test_journal.c checks them against a
 * bit-by-bit CRC over lengths and alignments).
 *
 * The folding, in polynomials over GF(2) modulo P (degree 32). Bit t of a 16-byte
 * block read as a little-endian 128-bit number is the coefficient of x^(127-t) (the
 * CRC is reflected). A block B that lies D bits before the next one satisfies
 * B x^D = B_hi x^(D+64) + B_lo x^D, where B_hi is the block's low 64-bit word; so
 * B x^D == B_hi K_hi + B_lo K_lo (mod P) with K_hi = x^(D+32) mod P and
 * K_lo = x^(D-32) mod P, both stored reflected in 33 bits: the carry-less product of
 * a reflected 64-bit word and a reflected 33-bit constant is then aligned like a
 * block (the missing x^32 is the CRC's own). XORed into the block D bits later, the
 * 128-bit running value stays congruent to the message so far; once the message is
 * folded into one block X, CRC-register(message) = CRC-register(the 16 bytes of X,
 * from a zero register), which the table computes. Constants (computed with
 * x^n mod P): D = 512 (four blocks in flight) K_hi 0x154442bd4, K_lo 0x1c6e41596;
 * D = 128: K_hi 0x1751997d0, K_lo 0x0ccaa009e. */
#include "journal.h"

#include <pthread.h>
#include <string.h>

/* Slicing-by-8 tables: crc_table[k][b] is the CRC contribution of byte b
 * followed by k zero bytes, so eight bytes fold in per step (about 8x the
 * byte-wise loop). */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int have_clmul;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

/* The CRC register (no complements) after n bytes, from reg. */
static uint32_t crc_table_run(uint32_t reg, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4); /* little-endian host (see journal.h) */
        memcpy(&hi, p + 4, 4);
        lo ^= reg;
        reg = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
              crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
              crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8, n -= 8;
    }
    while (n--) reg = crc_table[0][(reg ^ *p++) & 0xFF] ^ (reg >> 8);
    return reg;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* One fold: x (D bits before the next block) times k = {K_hi, K_lo}. */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* The register after n bytes (n a multiple of 64, at least 64), from reg. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul_run(uint32_t reg, const unsigned char *p,
                                                                        size_t n) {
    const __m128i k512 = _mm_set_epi64x(0x1c6e41596ll, 0x154442bd4ll);
    const __m128i k128 = _mm_set_epi64x(0x0ccaa009ell, 0x1751997d0ll);
    __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    /* the register enters as the complement of the first 32 message bits would */
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)reg));
    p += 64, n -= 64;
    while (n >= 64) {
        x0 = _mm_xor_si128(fold(x0, k512), _mm_loadu_si128((const __m128i *)(const void *)p));
        x1 = _mm_xor_si128(fold(x1, k512), _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        x2 = _mm_xor_si128(fold(x2, k512), _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        x3 = _mm_xor_si128(fold(x3, k512), _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64, n -= 64;
    }
    /* four blocks into one, each 128 bits before the next */
    __m128i x = _mm_xor_si128(fold(x0, k128), x1);
    x = _mm_xor_si128(fold(x, k128), x2);
    x = _mm_xor_si128(fold(x, k128), x3);
    unsigned char last[16];
    _mm_storeu_si128((__m128i *)(void *)last, x);
    return crc_table_run(0, last, sizeof last);
}
#endif

uint32_t journal_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    uint32_t reg = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_clmul && n >= 256) {
        size_t bulk = n / 64 * 64;
        reg = crc_clmul_run(reg, p, bulk);
        p += bulk, n -= bulk;
    }
#endif
    return ~crc_table_run(reg, p, n);
}
