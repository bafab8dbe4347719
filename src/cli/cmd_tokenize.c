/* cmd_tokenize.c -- attnsweep tokenize: text -> ids with the model's tokenizer (GPT-2's files or
 * a tokenizer.json), and --decode ids -> text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "fileio.h"
#include "textsrc.h"
#include "tokenizer.h"

static const char tokenize_about[] =
    "Encodes FILE (stdin when absent) with the model directory's tokenizer (GPT-2's\n"
    "vocab.json + merges.txt, else its tokenizer.json) and prints the token ids,\n"
    "space-separated, on one line. With --decode, reads whitespace-separated ids\n"
    "and writes the text they stand for.\n";
static const char tokenize_notes[] =
    "GPT-2's files: \"<|endoftext|>\" in the text is encoded as plain characters,\n"
    "never as id 50256; invalid UTF-8 is encoded byte-level and decodes unchanged.\n"
    "tokenizer.json: the ids Hugging Face's tokenizers give, special tokens in the\n"
    "text included; invalid UTF-8 is read as U+FFFD. The BOS is the model's rule\n"
    "(text.add_bos's default; docs/tokenizers.md) unless --bos or --no-bos.\n";

static int encode_span(tokenizer *t, const char *s, size_t n, FILE *out, as_err *err) {
    size_t k;
    int32_t *ids;
    if (tokenizer_encode_alloc(t, s, n, &ids, &k, err)) return -1;
    for (size_t i = 0; i < k; i++) fprintf(out, i ? " %d" : "%d", (int)ids[i]);
    fputc('\n', out);
    free(ids);
    return 0;
}

/* Parses the ids of s[0..n) and writes their bytes to out (when out is not
 * NULL); line_no names the input line in errors (0 = whole stream). */
static int decode_pass(const tokenizer *t, const char *s, size_t n, size_t line_no, FILE *out, as_err *err) {
    size_t i = 0, k = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        if (i == n) break;
        size_t start = i;
        long v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && v <= 1000000000L) v = v * 10 + (s[i++] - '0');
        if (i == start || (i < n && !(s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))) {
            size_t e = start;
            while (e < n && !(s[e] == ' ' || s[e] == '\t' || s[e] == '\n' || s[e] == '\r')) e++;
            if (line_no) return as_fail(err, "line %zu, id %zu: '%.*s' is not a token id", line_no, k + 1, (int)(e - start > 40 ? 40 : e - start), s + start);
            return as_fail(err, "id %zu: '%.*s' is not a token id", k + 1, (int)(e - start > 40 ? 40 : e - start), s + start);
        }
        size_t len;
        const char *b = v <= INT32_MAX ? tokenizer_token_bytes(t, (int32_t)v, &len) : NULL;
        if (!b) {
            if (line_no) return as_fail(err, "line %zu, id %zu: %ld is not in the vocabulary (%zu ids)", line_no, k + 1, v, tokenizer_vocab_size(t));
            return as_fail(err, "id %zu: %ld is not in the vocabulary (%zu ids)", k + 1, v, tokenizer_vocab_size(t));
        }
        if (out) fwrite(b, 1, len, out);
        k++;
    }
    return 0;
}

/* Checks every id first, so a bad id leaves no partial text behind. */
static int decode_span(const tokenizer *t, const char *s, size_t n, size_t line_no, FILE *out, as_err *err) {
    if (decode_pass(t, s, n, line_no, NULL, err)) return -1;
    return decode_pass(t, s, n, line_no, out, err);
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    int lines = 0, decode = 0, bos = 0, no_bos = 0;
    arg_list pos = {0};
    const arg_opt opts[] = {
        OPT_STRING_REQUIRED("model", "DIR", &model,
                            "directory with vocab.json + merges.txt (or encoder.json + vocab.bpe),\n"
                            "or with tokenizer.json (+ tokenizer_config.json)"),
        OPT_FLAG("lines", &lines,
                 "one output line per input line (each line encoded without its\n"
                 "newline; with --decode, each line of ids becomes one text line)"),
        OPT_FLAG("decode", &decode, "ids in, text out"),
        OPT_FLAG("bos", &bos, "start each encoded text with the BOS token"),
        OPT_FLAG("no-bos", &no_bos, "never add a BOS token"),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep tokenize", .positional = "FILE", .max_pos = 1, .pos = &pos,
                     .description = tokenize_about, .epilogue = tokenize_notes, .opts = opts};
    int code;
    if (args_parse(&spec, argc, argv, &code)) return code;
    if (pos.n) file = pos.v[0];
    args_free(&spec);
    as_err err = {{0}};
    tokenizer *t = tokenizer_load(model, &err);
    if (t && (bos || no_bos) && (bos && no_bos ? as_fail(&err, "--bos and --no-bos contradict each other") :
                                  tokenizer_set_add_bos(t, bos ? 1 : 0, &err))) {
        tokenizer_free(t);
        t = NULL;
    }
    if (!t) { fprintf(stderr, "attnsweep tokenize: %s\n", err.msg); return AS_EXIT_ERROR; }
    size_t n = 0;
    char *text = NULL;
    int read_rc = file && strcmp(file, "-")
                      ? fileio_read_all(file, TEXTSRC_TEXT_MAX_BYTES, "a text file", &text, &n, &err)
                      : fileio_read_stream(stdin, "stdin", TEXTSRC_TEXT_MAX_BYTES, "a text file", &text, &n, &err);
    if (read_rc) {
        fprintf(stderr, "attnsweep tokenize: %s\n", err.msg);
        tokenizer_free(t);
        return AS_EXIT_ERROR;
    }
    int rc = 0;
    if (!lines) {
        rc = decode ? decode_span(t, text, n, 0, stdout, &err) : encode_span(t, text, n, stdout, &err);
    } else {
        size_t line_no = 0;
        for (size_t i = 0; i < n && rc == 0;) {
            size_t e = i;
            while (e < n && text[e] != '\n') e++;
            line_no++;
            if (decode) {
                rc = decode_span(t, text + i, e - i, line_no, stdout, &err);
                if (!rc) fputc('\n', stdout);
            } else {
                rc = encode_span(t, text + i, e - i, stdout, &err);
            }
            i = e + 1;
        }
    }
    free(text);
    tokenizer_free(t);
    if (fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, "attnsweep tokenize: write error on stdout\n");
        return AS_EXIT_ERROR;
    }
    if (rc) {
        fprintf(stderr, "attnsweep tokenize: %s%s%s\n", file ? file : "stdin", ": ", err.msg);
        return AS_EXIT_ERROR;
    }
    return AS_EXIT_OK;
}
