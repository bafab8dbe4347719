/* hf_int.h -- a Hugging Face tokenizer.json as loaded (hf_load.c) for encoding (hf_encode.c).
 * Private to src/text; the contract is in include/text/tokenizer.h, the rules in docs/tokenizers.md. */
#ifndef ATTNSWEEP_HF_INT_H
#define ATTNSWEEP_HF_INT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer_int.h"

/* HF_SPLIT_META: no pre-tokenizer, but no token has a "▁" after another character, so no merge
 * can cross the start of a "▁" run: cutting a segment there gives the same ids (hf_load.c). */
enum { HF_SPLIT_NONE, HF_SPLIT_GPT2, HF_SPLIT_LLAMA3, HF_SPLIT_QWEN2, HF_SPLIT_META };
enum { HF_NORM_NFC, HF_NORM_PREPEND, HF_NORM_REPLACE };
enum { HF_MAX_NORMS = 8 };

typedef struct {
    int kind;
    char *a, *b; /* Prepend: a; Replace: a -> b */
    size_t a_len, b_len;
} hf_norm;

/* An added token as matched: a normalized one (its "normalized": true) is looked for in the
 * normalized text, as its content normalized (then s is malloc'd: owned), the others in the
 * text as given (GPT-NeoX's runs of spaces are the first kind, "<|endoftext|>" the second). */
typedef struct {
    uint8_t *s;
    size_t len;
    int32_t id;
    int normalized, owned;
} hf_added;
enum { HF_ADDED_RAW = 1, HF_ADDED_NORM = 2 }; /* added_first's bits */

struct tk_hf {
    int byte_level;   /* a ByteLevel pre-tokenizer: model tokens are GPT-2 byte-level strings */
    int split;        /* HF_SPLIT_* */
    int prefix_space; /* ByteLevel add_prefix_space */
    hf_norm norm[HF_MAX_NORMS];
    int n_norm;
    int byte_fallback, ignore_merges, fuse_unk;
    int32_t unk_id, bos_id;
    int add_bos, add_bos_default;
    char bos_source[160]; /* where the default came from, for provenance */
    int32_t fallback_id[256]; /* "<0xXX>" tokens, -1 if absent */
    hf_added *added;
    size_t n_added;
    size_t n_added_norm;      /* how many of them are normalized */
    uint8_t added_first[256]; /* HF_ADDED_RAW / _NORM if some added token of that kind starts with this byte */
    /* the model vocabulary's token strings (byte-level: their bytes; else their UTF-8) -> id */
    uint8_t *sym_pool;
    size_t *sym_off;
    uint32_t *sym_len;
    size_t n_sym;
    int32_t *vix;
    size_t vix_mask;
    /* work buffers, grown as needed */
    uint8_t *buf[4];
    size_t buf_cap[4];
    int32_t *ids;
    size_t n_ids, ids_cap;
};

int32_t tk_hf_lookup(const struct tk_hf *hf, const uint8_t *s, size_t n);
/* s[0..n) through the file's normalizers (hf_encode.c), into a work buffer of hf (valid until
 * the next call) or s itself; NULL when out of memory. */
const uint8_t *tk_hf_normalized(struct tk_hf *hf, const uint8_t *s, size_t *n);

#endif
