/* fuzz_util.h -- what every libFuzzer harness here shares: one private temp
 * directory per process (under $TMPDIR, removed at exit), and writing a
 * file inside it. Harnesses never write anywhere else. */
#ifndef ATTNSWEEP_FUZZ_UTIL_H
#define ATTNSWEEP_FUZZ_UTIL_H

#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_tmp[512];

static inline int fuzz_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static inline void fuzz_tmp_cleanup(void) {
    if (fuzz_tmp[0]) nftw(fuzz_tmp, fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Creates the process's temp dir once; aborts when it cannot (a harness
 * without its directory would test nothing). */
static inline const char *fuzz_tmp_dir(void) {
    if (fuzz_tmp[0]) return fuzz_tmp;
    const char *base = getenv("TMPDIR");
    snprintf(fuzz_tmp, sizeof fuzz_tmp, "%s/attnsweep-fuzz-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(fuzz_tmp)) {
        perror(fuzz_tmp);
        abort();
    }
    atexit(fuzz_tmp_cleanup);
    return fuzz_tmp;
}

/* Writes bytes to fuzz_tmp_dir()/rel (rel may name an existing subdirectory). */
static inline void fuzz_write(const char *rel, const void *data, size_t size, char *path_out,
                       size_t path_cap) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fuzz_tmp_dir(), rel);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
        perror(path);
        abort();
    }
    if (path_out) snprintf(path_out, path_cap, "%s", path);
}

static inline void fuzz_mkdir(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fuzz_tmp_dir(), rel);
    if (mkdir(path, 0700) && access(path, F_OK)) {
        perror(path);
        abort();
    }
}

/* A failed property: print it and abort so libFuzzer saves the input. */
#define FUZZ_ASSERT(cond, ...)                                                  \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "FUZZ_ASSERT %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            abort();                                                            \
        }                                                                       \
    } while (0)

#endif
