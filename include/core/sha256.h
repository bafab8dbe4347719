/* sha256.h -- SHA-256 (FIPS 180-4), for the provenance of weights, configs
 * and text files (results record the digest of every input they used).
 * Incremental: init, update any number of times, final. */
#ifndef ATTNSWEEP_SHA256_H
#define ATTNSWEEP_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

typedef struct {
    uint32_t state[8];
    uint64_t total_len; /* bytes hashed so far */
    unsigned char block[64];
    size_t block_len;
} sha256_ctx;

void sha256_init(sha256_ctx *ctx);
void sha256_update(sha256_ctx *ctx, const void *data, size_t len);
void sha256_final(sha256_ctx *ctx, unsigned char digest[32]);

/* One-shot digest as 64 lowercase hex characters + NUL. */
void sha256_hex(char hex[65], const void *data, size_t len);
void sha256_digest_to_hex(char hex[65], const unsigned char digest[32]);

/* 1 when the x86 SHA extensions are used (chosen at the first hash, from
 * CPUID); the result is the same either way. sha256_force_portable(1) makes
 * every later hash use the portable code (tests compare the two). */
int sha256_accelerated(void);
void sha256_force_portable(int on);

/* Digest of a whole file (read in chunks); errors name the path. */
int sha256_file_hex(char hex[65], const char *path, as_err *err);

#endif
