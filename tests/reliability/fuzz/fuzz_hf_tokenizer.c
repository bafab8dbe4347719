/* fuzz_hf_tokenizer.c -- libFuzzer harness for the tokenizer.json encoder (hf_encode.c).
 *
 * Tokenizers: each directory of $ATTNSWEEP_HF_TOKENIZERS (colon-separated; ctest names the npm
 * fixture's Qwen2.5 and Llama 2-style ones: NFC, the Qwen2 Split, added tokens, "▁" and byte
 * fallback), else a tiny SentencePiece-style tokenizer.json written to the temp dir. The choice
 * is printed once at start.
 *
 * Each input is arbitrary bytes. Properties, from tokenizer.h:
 *   - encode succeeds, and every id is in the vocabulary;
 *   - the cached path and the heap merge without the cache give the same ids;
 *   - with the BOS on the ids are the BOS followed by the ids without it. */
#include "fuzz_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static tokenizer *toks[4];
static int n_toks;

static const char tiny[] =
    "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, {\"type\": \"Prepend\", "
    "\"prepend\": \"\xe2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": "
    "\"\xe2\x96\x81\"}]}, \"pre_tokenizer\": null, \"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
    " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"vocab\": "
    "{\"<unk>\": 0, \"<s>\": 1, \"\xe2\x96\x81\": 2, \"a\": 3, \"b\": 4, \"ab\": 5, \"\xe2\x96\x81" "a\": 6, \"<0x41>\": 7},"
    " \"merges\": [\"a b\", \"\xe2\x96\x81 a\"]}}";

static void init_once(void) {
    if (n_toks) return;
    as_err err;
    const char *env = getenv("ATTNSWEEP_HF_TOKENIZERS");
    char dirs[8192];
    if (env && env[0]) {
        snprintf(dirs, sizeof dirs, "%s", env);
    } else {
        fuzz_mkdir("tiny");
        char path[4096];
        fuzz_write("tiny/tokenizer.json", tiny, sizeof tiny - 1, path, sizeof path);
        snprintf(dirs, sizeof dirs, "%s/tiny", fuzz_tmp_dir());
    }
    for (char *d = strtok(dirs, ":"); d && n_toks < 4; d = strtok(NULL, ":")) {
        toks[n_toks] = tokenizer_load(d, &err);
        if (!toks[n_toks]) {
            fprintf(stderr, "fuzz_hf_tokenizer: %s\n", err.msg);
            abort();
        }
        fprintf(stderr, "fuzz_hf_tokenizer: %s (%s)\n", d, tokenizer_kind(toks[n_toks]));
        n_toks++;
    }
}

static int32_t *encode_or_die(tokenizer *t, const char *text, size_t len, size_t *n, const char *how) {
    as_err err;
    int32_t *ids = NULL;
    FUZZ_ASSERT(tokenizer_encode_alloc(t, text, len, &ids, n, &err) == 0, "encode (%s) of %zu bytes: %s", how, len, err.msg);
    for (size_t i = 0; i < *n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && (size_t)ids[i] < tokenizer_vocab_size(t), "id %d at %zu (%s)", ids[i], i, how);
    return ids;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    const char *text = (const char *)data;
    as_err err;
    for (int k = 0; k < n_toks; k++) {
        tokenizer *t = toks[k];
        size_t n, n2, n3;
        FUZZ_ASSERT(tokenizer_set_add_bos(t, 0, &err) == 0, "%s", err.msg);
        tokenizer_set_cache_disabled(t, 0);
        tokenizer_set_heap_threshold(t, 24);
        int32_t *a = encode_or_die(t, text, size, &n, "default");
        tokenizer_set_cache_disabled(t, 1);
        tokenizer_set_heap_threshold(t, 0);
        int32_t *b = encode_or_die(t, text, size, &n2, "heap, no cache");
        FUZZ_ASSERT(n2 == n && !memcmp(a, b, n * sizeof *a), "heap merge without the cache differs");
        tokenizer_set_cache_disabled(t, 0);
        tokenizer_set_heap_threshold(t, 24);
        int32_t *c = NULL;
        if (tokenizer_bos_id(t) >= 0 && tokenizer_set_add_bos(t, 1, &err) == 0) {
            c = encode_or_die(t, text, size, &n3, "with the BOS");
            FUZZ_ASSERT(n3 == n + 1 && c[0] == tokenizer_bos_id(t) && !memcmp(c + 1, a, n * sizeof *a), "BOS is not a prefix");
        }
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
