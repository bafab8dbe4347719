/* xorshift.h -- the tests' random numbers: xorshift64 with the state in the caller's hands,
 * uniforms in (0, 1) and Box-Muller normals. Deterministic: a test's inputs are the same on
 * every machine. (Older unit tests keep a private copy of the same three lines.) */
#ifndef ATTNSWEEP_TEST_XORSHIFT_H
#define ATTNSWEEP_TEST_XORSHIFT_H

#include <math.h>
#include <stdint.h>

static inline uint64_t xs_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
static inline double xs_uniform(uint64_t *s) { return ((double)(xs_next(s) >> 11) + 0.5) * 0x1p-53; }
static inline double xs_gauss(uint64_t *s) {
    double u = xs_uniform(s), v = xs_uniform(s);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

#endif
