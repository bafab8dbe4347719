/* tokenizer_int.h -- what the tokenizer's files share (private to src/text; names start with tk_).
 *
 *   pretokenize.c  GPT-2's pre-tokenizer pattern over the Unicode tables
 *   tokenizer.c    vocab.json / merges.txt loading, BPE merges (heap, piece cache), encode/decode
 *   install.c      installing tokenizer files into a model folder, finding GPT-2's files */
#ifndef ATTNSWEEP_TOKENIZER_INT_H
#define ATTNSWEEP_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "tokenizer.h"
#include "unicode_tables.h"

/* GPT-2's bytes_to_unicode tables: byte -> code point, code point -> byte (-1 if
 * none), and the order of ids 0..255 in GPT-2's vocabulary. */
void tk_byte_unicode_tables(uint32_t byte_to_cp[256], int cp_to_byte[324], uint8_t id_order[256]);
/* GPT-2 byte-level text s[0..n) (valid UTF-8) back to raw bytes into out (never longer);
 * (size_t)-1 when a code point is not in the byte-level alphabet. */
size_t tk_byte_level_to_bytes(const int cp_to_byte[324], const uint8_t *s, size_t n, uint8_t *out);
/* Writes cp as UTF-8 into out (room for 4); returns the byte count. */
size_t tk_utf8_put(char *out, uint32_t cp);
/* Reads a tokenizer file whole (malloc'd), or NULL with err set. */
char *tk_read_file(const char *path, size_t *n, as_err *err);
/* out = dir/name; 0 when it does not fit. */
int tk_join_path(char *out, size_t cap, const char *dir, const char *name);
/* The vocab/merges pair in dir (vocab.json + merges.txt, or encoder.json + vocab.bpe); 0 if found. */
int tk_find_pair(const char *dir, char *vocab, char *merges, size_t cap);

uint64_t tk_hash_bytes(const uint8_t *p, size_t n);
static inline uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

typedef struct {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} merge_slot;

typedef struct { /* one cached piece */
    uint64_t hash;
    uint32_t text_off, text_len; /* in cache_text */
    uint32_t ids_off, n_ids;     /* in cache_ids */
} cache_slot;

enum { CACHE_SLOTS = 1 << 16, CACHE_MAX_PIECE = 64, CACHE_TEXT_CAP = 2 << 20 };

struct tokenizer {
    struct tk_hf *hf; /* NULL: GPT-2 files (vocab.json + merges.txt); else a tokenizer.json (hf_load.c) */
    /* id -> bytes */
    uint8_t *pool;
    size_t pool_len;
    size_t *tok_off;
    uint32_t *tok_len; /* 0 = id unused */
    size_t n_ids;      /* max id + 1 */
    size_t max_token_len;
    int32_t eot;
    int gpt2_add_bos; /* GPT-2 files: "<|endoftext|>" first when text.add_bos = true */
    /* bytes -> id (only while loading merges) */
    int32_t byte_id[256];
    /* pair -> merge */
    merge_slot *merges;
    size_t merge_mask;
    /* piece cache */
    cache_slot *cache;
    size_t cache_used;
    uint8_t *cache_text;
    size_t cache_text_len;
    int32_t *cache_ids;
    size_t cache_ids_len;
    int cache_disabled;
    /* scratch for BPE, grown to the longest piece seen */
    size_t scratch_cap;
    int32_t *s_tok, *s_next, *s_prev;
    struct heap_entry *heap;
    size_t heap_threshold;
    char vocab_path[4096], merges_path[4096];
    char vocab_sha256[65], merges_sha256[65]; /* of the bytes parsed */
};

/* BPE merges over ids[0..n) in place (lowest rank first, leftmost on ties); the new count, -1 out of memory. */
long tk_bpe_ids(tokenizer *t, int32_t *ids, size_t n);
/* A piece's ids into dst (room for n) through the piece cache; bpe computes a piece the cache lacks. */
typedef long (*tk_piece_fn)(tokenizer *t, const uint8_t *p, size_t n, int32_t *dst);
long tk_piece_cached(tokenizer *t, const uint8_t *p, size_t n, int32_t *dst, tk_piece_fn bpe);
int tk_cache_alloc(tokenizer *t);

/* End of the piece at pos under the Llama 3 (max_digits 3) or Qwen2 (1) Split pattern;
 * text is valid UTF-8 (pretokenize.c). */
size_t tk_split_llama3_end(const char *text, size_t len, size_t pos, int max_digits);

/* hf_load.c / hf_encode.c: a tokenizer.json (t->hf set). */
struct tk_hf;
tokenizer *tk_hf_load(const char *json_path, const char *config_path, as_err *err);
void tk_hf_free(struct tk_hf *hf);
int tk_hf_encode(tokenizer *t, const char *text, size_t len, int32_t *out, size_t out_cap, size_t *n_out, as_err *err);
int tk_hf_encode_alloc(tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n_out, as_err *err);

static inline const merge_slot *tk_merge_find(const tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = hash_u64(key) & t->merge_mask;
    for (;;) {
        const merge_slot *s = &t->merges[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & t->merge_mask;
    }
}

#endif
