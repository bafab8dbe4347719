/* textsrc.h -- the token stream a sweep reads its windows from.
 *
 * A source is either
 *  - "text": a UTF-8 text file, encoded once per run with the model
 *    directory's tokenizer (tokenizer.h: GPT-2's files or a tokenizer.json),
 *    the BOS first when add_bos says so; anything else (a PDF, an
 *    archive, NUL bytes, invalid UTF-8) is refused first, saying how to
 *    convert it (textsrc_check_is_text). With strip_gutenberg, only
 *    the lines strictly between the line containing "*** START OF" and the
 *    line containing "*** END OF" are kept (the Project Gutenberg header and
 *    licence footer; "***START OF"/"***END OF" also match). A missing marker
 *    is an error naming the file, never a silent use of the whole text.
 *    With start_at (after stripping, before tokenizing), the text begins at
 *    the first byte of the start_occurrence-th occurrence (1-based, counted
 *    without overlaps) of that exact string: e.g. the second "BOOK ONE: 1805"
 *    of War and Peace skips its table of contents. Fewer occurrences is a
 *    one-line error naming text.start_at.
 *  - "tokens": token ids already encoded, recognised by content:
 *      .npy (any name): header parsed; 1-D, dtype '<u2', '<u4', '<i4' or '<i8';
 *      llm.c .bin: 256 int32 header, magic 20240520, version 1 = uint16 ids,
 *        version 2 = uint32 ids, header[2] = token count;
 *      raw .bin (nanoGPT style, no header): little-endian ids; the dtype
 *        must be given (TEXTSRC_U16 / TEXTSRC_U32).
 *    Every id must be < the model's vocab_size: an error names the file and
 *    the position of the first one that is not. The .npy header is parsed as
 *    the Python dict literal it is: exactly 'descr', 'fortran_order' and
 *    'shape', each once.
 * The file is read whole (fileio_read_all: a regular file, at most
 * TEXTSRC_TEXT_MAX_BYTES / TEXTSRC_TOKENS_MAX_BYTES); sha256 is of those bytes,
 * so the recorded digest is of what was loaded.
 * Windows: window w starts at offset + w * stride and a window at length L
 * covers tokens [start, start + L). textsrc_check_fit() says, before any
 * work, how many tokens the text has and how many the windows need. */
#ifndef ATTNSWEEP_TEXTSRC_H
#define ATTNSWEEP_TEXTSRC_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

typedef enum { TEXTSRC_TEXT = 0, TEXTSRC_TOKENS = 1 } textsrc_format;
typedef enum { TEXTSRC_DTYPE_AUTO = 0, TEXTSRC_U16 = 1, TEXTSRC_U32 = 2 } textsrc_dtype;

typedef enum { TEXTSRC_BOS_MODEL = 0, TEXTSRC_BOS_ON = 1, TEXTSRC_BOS_OFF = 2 } textsrc_bos;

typedef struct {
    const char *path;
    textsrc_format format;
    int strip_gutenberg;   /* text only */
    textsrc_dtype dtype;   /* tokens only; needed for raw files, checked against headers */
    const char *start_at;  /* text only; NULL or "" = from the beginning */
    int64_t start_occurrence; /* 1-based; 0 is taken as 1 */
    textsrc_bos add_bos;   /* text only (text.add_bos); zero: the model tokenizer's own rule */
} textsrc_spec;

typedef struct {
    int32_t *tokens;
    size_t n_tokens;
    char path[4096];
    char kind[48];         /* "text", "text (Gutenberg stripped)", "npy <u2", "llm.c uint16", "raw uint32", ... */
    size_t text_bytes;     /* text sources: bytes encoded (after stripping) */
    char sha256[65];       /* hex sha256 of the file's bytes as read (the ones loaded) */
    char vocab_sha256[65], merges_sha256[65]; /* text sources: the tokenizer files' (tokenizer.h) */
    char vocab_name[32], merges_name[32]; /* their names: vocab.json merges.txt, or tokenizer.json tokenizer_config.json */
    char tokenizer_files[1024]; /* text sources: tokenizer_describe(), for the results file */
    int add_bos;           /* text sources: whether the tokens start with the BOS */
    size_t text_begin;     /* text sources: byte offset in the file of the first byte encoded */
} textsrc;

/* Whole-file read limits (fileio_read_all); a larger file is refused, naming the limit. */
#define TEXTSRC_TEXT_MAX_BYTES ((size_t)4 << 30)    /* a text to tokenize: 4 GiB */
#define TEXTSRC_TOKENS_MAX_BYTES ((size_t)64 << 30) /* a token file: 64 GiB */

/* Loads the source. model_dir: where the tokenizer files are (text only;
 * may be NULL for tokens). vocab_size: the model's; ids must be below it. */
int textsrc_load(textsrc *ts, const textsrc_spec *spec, const char *model_dir, size_t vocab_size,
                 as_err *err);
void textsrc_free(textsrc *ts);

/* "text" | "tokens" and "uint16" | "uint32" (also "u2"/"u4", "<u2"/"<u4"); -1 + err otherwise. */
int textsrc_parse_format(const char *s, textsrc_format *out, as_err *err);
int textsrc_parse_dtype(const char *s, textsrc_dtype *out, as_err *err);

/* First token of window w: offset + w * stride. */
int64_t textsrc_window_start(int64_t offset, int64_t stride, int64_t w);
/* starts[w] for w < count. */
void textsrc_window_starts(int64_t *starts, int64_t count, int64_t offset, int64_t stride);
/* 0 when count windows of up to max_L tokens fit, else -1 and an error such as
 * "war.txt: has 1000 tokens, the windows need 2048 (offset 0 + (2 - 1) * stride 1024 + L 1024)". */
int textsrc_check_fit(const textsrc *ts, int64_t count, int64_t offset, int64_t stride, int64_t max_L,
                      as_err *err);
/* tokens[start .. start + L), or NULL when that runs past the end. */
const int32_t *textsrc_window(const textsrc *ts, int64_t start, int64_t L);

/* The start of the k-th (1-based) non-overlapping occurrence of marker in
 * text[begin..end) into *at; -1 and a one-line error naming text.start_at and
 * path when there are fewer. */
int textsrc_find_start(const char *text, size_t begin, size_t end, const char *marker, int64_t k,
                       size_t *at, const char *path, as_err *err);

/* 0 when b[0..n) is UTF-8 text; else -1 and one line naming path, what the
 * bytes are and how to convert them: a known binary magic (PDF, ZIP, gzip,
 * xz, zstd, a UTF-16 byte-order mark), a NUL byte, or a byte that
 * starts no well-formed UTF-8 sequence (offset and line given). A text
 * source is checked before strip_gutenberg and start_at look at it. */
int textsrc_check_is_text(const unsigned char *b, size_t n, const char *path, as_err *err);

/* The Gutenberg body of text[0..len): [*begin, *end). Errors name path. */
int textsrc_strip_gutenberg(const char *text, size_t len, size_t *begin, size_t *end, const char *path,
                            as_err *err);

#endif
