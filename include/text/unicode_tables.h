/* unicode_tables.h -- the character classes GPT-2's pre-tokenizer needs.
 *
 * GPT-2 splits text with the pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * so every code point falls in exactly one of four classes: letter (\p{L}:
 * Lu Ll Lt Lm Lo), number (\p{N}: Nd Nl No), white space (\s, the Unicode
 * White_Space property as Python's `regex` and tiktoken's Rust regex define
 * it) or other. src/text/unicode_tables.c holds the letter/number ranges, generated
 * by tools/gen_unicode_tables.py from Python's unicodedata (Unicode 14.0.0). */
#ifndef ATTNSWEEP_UNICODE_TABLES_H
#define ATTNSWEEP_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

enum { UC_OTHER = 0, UC_LETTER = 1, UC_NUMBER = 2, UC_SPACE = 3 };

typedef struct {
    uint32_t first, last; /* inclusive */
    uint32_t cls;         /* UC_LETTER or UC_NUMBER */
} unicode_range;

extern const unicode_range unicode_letter_number_ranges[]; /* sorted, disjoint */
extern const size_t unicode_letter_number_range_count;
extern const char unicode_tables_version[];

/* The class of code point cp (any value; > 0x10FFFF and surrogates are
 * UC_OTHER). White_Space: U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A,
 * 2028, 2029, 202F, 205F, 3000. Note JavaScript's \s differs: it has U+FEFF
 * and lacks U+0085. */
int unicode_class(uint32_t cp);

#endif
