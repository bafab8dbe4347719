/* bench_hash.c -- what hashing an input costs (docs/reliability.md "What hashing the inputs
 * costs"): sha256 of FILE in memory with the SHA extensions (when the CPU has
 * them) and with the portable code, of FILE read from the page cache, and,
 * given MODEL_DIR, a whole model_load (which hashes model.safetensors).
 * Wall and CPU seconds: on a shared machine the CPU figure is the one to use.
 *
 * usage: bench_hash FILE [MODEL_DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fileio.h"
#include "model.h"
#include "sha256.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: bench_hash FILE [MODEL_DIR]\n");
        return 2;
    }
    as_err err = {{0}};
    char hex[65], *buf = NULL;
    size_t n = 0;
    if (fileio_read_all(argv[1], 0, NULL, &buf, &n, &err)) {
        fprintf(stderr, "bench_hash: %s\n", err.msg);
        return 1;
    }
    for (int portable = 0; portable < 2; portable++) {
        sha256_force_portable(portable);
        if (!portable && !sha256_accelerated()) continue;
        double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        sha256_hex(hex, buf, n);
        w = clock_s(CLOCK_MONOTONIC) - w, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c;
        printf("%-8s %.1f MB in memory: %.3f s wall, %.3f s cpu (%.0f MB/s of cpu)\n",
               portable ? "portable" : "sha-ni", (double)n / 1e6, w, c, (double)n / 1e6 / c);
    }
    free(buf);
    sha256_force_portable(0);
    double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (sha256_file_hex(hex, argv[1], &err)) {
        fprintf(stderr, "bench_hash: %s\n", err.msg);
        return 1;
    }
    printf("file read + hash: %.3f s wall, %.3f s cpu (%s)\n", clock_s(CLOCK_MONOTONIC) - w,
           clock_s(CLOCK_PROCESS_CPUTIME_ID) - c, hex);
    if (argc == 3) {
        gpt2_model m;
        w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (model_load(&m, argv[2], &err)) {
            fprintf(stderr, "bench_hash: %s\n", err.msg);
            return 1;
        }
        printf("model_load %s: %.3f s wall, %.3f s cpu\n", argv[2], clock_s(CLOCK_MONOTONIC) - w,
               clock_s(CLOCK_PROCESS_CPUTIME_ID) - c);
        model_free(&m);
    }
    return 0;
}
