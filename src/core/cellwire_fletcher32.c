/* cellwire_fletcher32.c -- the checksum HDF5's Fletcher32 filter (H5Z_FILTER_FLETCHER32) appends to
 * every chunk, computed outside HDF5 so the workers' compressed chunks carry it (cellwire_deflate.c)
 * and the store checks stored chunks without inflating them (src/store/chunks.c).
 *
 * The definition (Fletcher, "An arithmetic checksum for serial transmissions", 1982, in
 * the 16-bit-word form HDF5 uses; docs/results.md "Checksums"):
 *   the n bytes are read as big-endian 16-bit words w_1..w_k (k = ceil(n / 2); an odd last
 *   byte b is the word b * 256);
 *   sum1 = w_1 + ... + w_k,  sum2 = sum over i of (w_1 + ... + w_i), both modulo 65535 in
 *   ones'-complement form: a nonzero sum that is a multiple of 65535 is 0xffff, only a sum
 *   of exactly 0 (all bytes zero) is 0;
 *   checksum = sum2 << 16 | sum1, stored after the chunk as 4 bytes, least significant
 *   first (HDF5's UINT32ENCODE).
 * tests/unit/store/test_deflate.c checks this against the bytes HDF5's filter stores.
 *
 * Blocks of B words are summed as S = sum w_i and W = sum (B - i) w_i (i = 0..B-1), so
 * sum2 gains B * sum1 + W and sum1 gains S: two independent sums per block, which the
 * compiler vectorizes, where the running form's sum2 += sum1 is one long dependency. */
#include "cellwire.h"

#include <string.h>

/* Words per block: W <= 65535 * B (B + 1) / 2 stays below 2^32 for B = 128. */
enum { FL_BLOCK = 128 };

/* a value reduced modulo 65535 in ones'-complement form (nonzero -> 1..0xffff) */
static uint32_t ones_mod(uint64_t x) {
    if (!x) return 0;
    uint32_t r = (uint32_t)(x % 65535u);
    return r ? r : 0xffffu;
}

uint32_t cw_fletcher32(const unsigned char *p, size_t n) {
    size_t words = n / 2;
    uint64_t s1 = 0, s2 = 0; /* exact modulo 65535, plus "anything nonzero seen" below */
    int nonzero = 0;
    while (words) {
        size_t b = words < FL_BLOCK ? words : FL_BLOCK;
        uint32_t S = 0, W = 0;
        for (size_t i = 0; i < b; i++) {
            uint32_t w = (uint32_t)p[2 * i] << 8 | p[2 * i + 1];
            S += w;
            W += (uint32_t)(b - i) * w;
        }
        nonzero |= S != 0;
        s2 = (s2 + (uint64_t)b * s1 + W) % 65535u;
        s1 = (s1 + S) % 65535u;
        p += 2 * b, words -= b;
    }
    if (n % 2) {
        uint32_t w = (uint32_t)p[0] << 8;
        nonzero |= w != 0;
        s1 = (s1 + w) % 65535u;
        s2 = (s2 + s1) % 65535u;
    }
    if (!nonzero) return 0;
    /* both sums are nonzero once any word is (sum2 adds every prefix sum) */
    return ones_mod(s2 ? s2 : 65535u) << 16 | ones_mod(s1 ? s1 : 65535u);
}

void cw_fletcher32_put(unsigned char *chunk, size_t n) {
    uint32_t f = cw_fletcher32(chunk, n);
    for (int i = 0; i < 4; i++) chunk[n + i] = (unsigned char)(f >> (8 * i));
}

int cw_fletcher32_ok(const unsigned char *chunk, size_t len) {
    if (len < 4) return 0;
    uint32_t f = cw_fletcher32(chunk, len - 4), stored = 0;
    for (int i = 3; i >= 0; i--) stored = stored << 8 | chunk[len - 4 + (size_t)i];
    return f == stored;
}
