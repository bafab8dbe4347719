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
#include "unicode_tables.h"

/* GPT-2's bytes_to_unicode tables: byte -> code point, code point -> byte (-1 if
 * none), and the order of ids 0..255 in GPT-2's vocabulary. */
void tk_byte_unicode_tables(uint32_t byte_to_cp[256], int cp_to_byte[324], uint8_t id_order[256]);
/* Writes cp as UTF-8 into out (room for 4); returns the byte count. */
size_t tk_utf8_put(char *out, uint32_t cp);
/* Reads a tokenizer file whole (malloc'd), or NULL with err set. */
char *tk_read_file(const char *path, size_t *n, as_err *err);
/* out = dir/name; 0 when it does not fit. */
int tk_join_path(char *out, size_t cap, const char *dir, const char *name);
/* The vocab/merges pair in dir (vocab.json + merges.txt, or encoder.json + vocab.bpe); 0 if found. */
int tk_find_pair(const char *dir, char *vocab, char *merges, size_t cap);

#endif
