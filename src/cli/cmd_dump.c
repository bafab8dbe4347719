/* cmd_dump.c -- attnsweep dump: one window's attention internals to HDF5
 * (layout in dump.h and docs/results.md, "The dump file"). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dump.h"
#include "fileio.h"
#include "textsrc.h"
#include "gpt2.h"
#include "model.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: attnsweep dump --model DIR (--text FILE | --tokens FILE) --length L\n"
            "                      [--window-start K] [--layers LIST] --out FILE.h5\n\n"
            "Runs GPT-2 over tokens [K, K+L) and writes tokens, each listed layer's q, k, v\n"
            "[head, L, d_head], raw scores q.k [head, L, L] (NaN above the diagonal),\n"
            "attention pattern [head, L, L] and the last position's logits to FILE.h5\n"
            "(written to FILE.h5.tmp.PID, then renamed).\n\n"
            "  --model DIR         config.json + model.safetensors (Hugging Face layout)\n"
            "  --tokens FILE       token ids, read as `run` reads text.format = \"tokens\": .npy,\n"
            "                      llm.c .bin, or a raw little-endian .bin (uint16 unless\n"
            "                      --dtype uint32); any other file: whitespace-separated ids\n"
            "  --dtype TYPE        uint16 | uint32: the ids of a raw .bin (default uint16)\n"
            "  --text FILE         UTF-8 text, encoded with the model directory's GPT-2 tokenizer\n"
            "                      (vocab.json + merges.txt); --strip-gutenberg keeps only the\n"
            "                      Project Gutenberg body; --start-at STRING [--start-occurrence K]\n"
            "                      starts the text at the K-th occurrence of STRING (as the\n"
            "                      config's text.start_at, text.start_occurrence)\n"
            "  --length L          window length, 1..n_positions\n"
            "  --window-start K    first token of the window (default 0)\n"
            "  --layers LIST       e.g. 0,3,5-7 or all (default all)\n"
            "  --out FILE.h5       output file\n"
            "OpenBLAS threads: OPENBLAS_NUM_THREADS.\n");
}

static int parse_size(const char *s, size_t *out) {
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = (size_t)v;
    return 0;
}

/* "all" or "a,b,c-d" -> bit mask; -1 with a message on a bad list */
static int parse_layers(const char *s, size_t n_layer, uint64_t *mask, as_err *err) {
    if (!strcmp(s, "all")) {
        *mask = n_layer >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n_layer) - 1);
        return 0;
    }
    *mask = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || errno) return as_fail(err, "--layers '%s': expected numbers like 0,3,5-7", s);
        p = end;
        b = a;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno) return as_fail(err, "--layers '%s': bad range", s);
            p = end;
        }
        if (a < 0 || b < a || (size_t)b >= n_layer)
            return as_fail(err, "--layers '%s': layer range %ld-%ld outside 0..%zu", s, a, b,
                           n_layer - 1);
        for (long l = a; l <= b; l++) *mask |= (uint64_t)1 << l;
        if (*p == ',') p++;
        else if (*p) return as_fail(err, "--layers '%s': unexpected '%c'", s, *p);
    }
    if (!*mask) return as_fail(err, "--layers '%s': no layer named", s);
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* How --tokens FILE is read. A file with a .npy or llm.c header, or named .bin, is read as
 * `run` reads text.format = "tokens" (textsrc); a raw .bin is uint16 unless --dtype says
 * otherwise. Anything else is whitespace-separated ids. */
enum { TOKENS_ID_TEXT, TOKENS_HEADERED, TOKENS_RAW_BIN };
static int token_file_kind(const char *path) {
    unsigned char head[6] = {0};
    /* not fopen: a FIFO would block; a non-regular file is refused by the reader */
    int fd = fileio_open_regular(path, 0, NULL, NULL);
    ssize_t r = fd >= 0 ? read(fd, head, sizeof head) : 0;
    size_t got = r > 0 ? (size_t)r : 0;
    if (fd >= 0) close(fd);
    uint32_t magic = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 |
                     (uint32_t)head[3] << 24;
    if ((got == 6 && !memcmp(head, "\x93NUMPY", 6)) || (got >= 4 && magic == 20240520u))
        return TOKENS_HEADERED;
    return ends_with(path, ".bin") ? TOKENS_RAW_BIN : ends_with(path, ".npy") ? TOKENS_HEADERED
                                                                             : TOKENS_ID_TEXT;
}

/* Reads whitespace-separated token ids (dump's own convenience format) into a malloc'd array. */
static int read_id_text(const char *path, int32_t **out, size_t *count, as_err *err) {
    char *buf = NULL;
    size_t len = 0;
    if (fileio_read_all(path, TEXTSRC_TOKENS_MAX_BYTES, "a token file", &buf, &len, err)) return -1;
    const unsigned char *b = (const unsigned char *)buf;
    int rc = 0;
    size_t n = 0;
    int32_t *ids = malloc((len / 2 + 1) * sizeof *ids); /* len bytes hold at most (len + 1) / 2 ids */
    if (!ids) rc = as_fail(err, "%s: out of memory", path);
    for (size_t i = 0; rc == 0 && i < len;) {
        while (i < len && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r')) i++;
        if (i == len) break;
        size_t j = i;
        while (j < len && !(b[j] == ' ' || b[j] == '\n' || b[j] == '\t' || b[j] == '\r')) j++;
        char word[64];
        if (j - i >= sizeof word) {
            rc = as_fail(err, "%s: token %zu is not a number (too long)", path, n);
            break;
        }
        memcpy(word, buf + i, j - i);
        word[j - i] = 0;
        char *end;
        errno = 0;
        long v = strtol(word, &end, 10);
        if (*end || errno || v < 0 || v > INT32_MAX)
            rc = as_fail(err, "%s: token %zu ('%s') is not a non-negative integer", path, n, word);
        else
            ids[n++] = (int32_t)v;
        i = j;
    }
    free(buf);
    if (rc != 0) {
        free(ids);
        return -1;
    }
    *out = ids;
    *count = n;
    return 0;
}

static int write_layer(const gpt2_layer_view *view, void *user, as_err *err) {
    return dump_write_layer(user, view, err);
}

int cmd_dump(int argc, char **argv) {
    const char *model_dir = NULL, *text = NULL, *tokens_path = NULL, *out = NULL;
    const char *length_s = NULL, *start_s = "0", *layers_s = "all", *dtype_s = NULL;
    const char *start_at = NULL, *start_occ_s = "1";
    int strip_gutenberg = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return AS_EXIT_OK;
        }
        if (!strcmp(a, "--strip-gutenberg")) {
            strip_gutenberg = 1;
            continue;
        }
        const char **slot = !strcmp(a, "--model")          ? &model_dir
                            : !strcmp(a, "--text")         ? &text
                            : !strcmp(a, "--tokens")       ? &tokens_path
                            : !strcmp(a, "--length")       ? &length_s
                            : !strcmp(a, "--window-start") ? &start_s
                            : !strcmp(a, "--layers")       ? &layers_s
                            : !strcmp(a, "--out")          ? &out
                            : !strcmp(a, "--dtype")        ? &dtype_s
                            : !strcmp(a, "--start-at")     ? &start_at
                            : !strcmp(a, "--start-occurrence") ? &start_occ_s
                                                           : NULL;
        if (!slot) {
            fprintf(stderr, "attnsweep dump: unknown option '%s' (try --help)\n", a);
            return AS_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attnsweep dump: %s needs a value\n", a);
            return AS_EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    const char *missing = !model_dir ? "--model" : !length_s ? "--length" : !out ? "--out"
                          : (!text && !tokens_path) ? "--tokens or --text" : NULL;
    if (missing) {
        fprintf(stderr, "attnsweep dump: %s is required (try --help)\n", missing);
        return AS_EXIT_USAGE;
    }
    if (text && tokens_path) {
        fprintf(stderr, "attnsweep dump: give --text or --tokens, not both\n");
        return AS_EXIT_USAGE;
    }
    size_t L, start, start_occ;
    if ((start_at && !text) || parse_size(start_occ_s, &start_occ) != 0 || start_occ < 1) {
        fprintf(stderr, "attnsweep dump: %s\n", start_at && !text ? "--start-at needs --text"
                                                 : "--start-occurrence is not a positive integer");
        return AS_EXIT_USAGE;
    }
    if (parse_size(length_s, &L) != 0 || L < 1) {
        fprintf(stderr, "attnsweep dump: --length '%s' is not a positive integer\n", length_s);
        return AS_EXIT_USAGE;
    }
    if (parse_size(start_s, &start) != 0) {
        fprintf(stderr, "attnsweep dump: --window-start '%s' is not a non-negative integer\n",
                start_s);
        return AS_EXIT_USAGE;
    }

    as_err err = {{0}};
    gpt2_model model;
    if (model_load(&model, model_dir, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    const gpt2_config *cfg = &model.cfg;
    int32_t *all = NULL;
    size_t n_all = 0;
    uint64_t mask = 0;
    gpt2_workspace ws = {0};
    dump_writer *w = NULL;
    float *logits = NULL;
    int rc = AS_EXIT_ERROR;
    if (L > cfg->n_positions) {
        fprintf(stderr, "attnsweep dump: --length %zu exceeds the model's n_positions %zu\n", L,
                cfg->n_positions);
        rc = AS_EXIT_USAGE;
        goto done;
    }
    if (parse_layers(layers_s, cfg->n_layer, &mask, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        rc = AS_EXIT_USAGE;
        goto done;
    }
    textsrc_spec spec = {.path = text, .format = TEXTSRC_TEXT, .strip_gutenberg = strip_gutenberg,
                         .start_at = start_at, .start_occurrence = (int64_t)start_occ};
    int kind = text ? TOKENS_ID_TEXT : token_file_kind(tokens_path);
    if (kind != TOKENS_ID_TEXT) {
        spec = (textsrc_spec){.path = tokens_path, .format = TEXTSRC_TOKENS,
                              .dtype = kind == TOKENS_RAW_BIN ? TEXTSRC_U16 : TEXTSRC_DTYPE_AUTO};
        if (dtype_s && textsrc_parse_dtype(dtype_s, &spec.dtype, &err) != 0) {
            fprintf(stderr, "attnsweep dump: --dtype '%s' is not uint16 or uint32\n", dtype_s);
            rc = AS_EXIT_USAGE;
            goto done;
        }
    }
    if (spec.path) {
        textsrc ts;
        if (textsrc_load(&ts, &spec, model_dir, cfg->vocab_size, &err) != 0) {
            fprintf(stderr, "attnsweep dump: %s\n", err.msg);
            goto done;
        }
        all = ts.tokens, n_all = ts.n_tokens;
        tokens_path = spec.path;
    } else if (read_id_text(tokens_path, &all, &n_all, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        goto done;
    }
    if (start > n_all || L > n_all - start) {
        fprintf(stderr,
                "attnsweep dump: window [%zu, %zu) needs %zu tokens but %s has %zu\n", start,
                start + L, start + L, tokens_path, n_all);
        rc = AS_EXIT_USAGE;
        goto done;
    }
    const int32_t *tokens = all + start;
    for (size_t t = 0; t < L; t++)
        if ((size_t)tokens[t] >= cfg->vocab_size) {
            fprintf(stderr, "attnsweep dump: %s: token %zu is id %d, outside the vocabulary of %zu\n",
                    tokens_path, start + t, tokens[t], cfg->vocab_size);
            goto done;
        }
    logits = malloc(cfg->vocab_size * sizeof *logits);
    if (!logits) {
        fprintf(stderr, "attnsweep dump: out of memory for the logits\n");
        goto done;
    }
    if (gpt2_workspace_init(&ws, cfg, L, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        goto done;
    }
    dump_provenance prov = {.window_start = start, .model_dir = model_dir,
                            .weights_sha256 = model.weights_sha256};
    w = dump_open(out, tokens, L, &prov, &err);
    if (!w) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        goto done;
    }
    size_t last = L - 1;
    gpt2_request req = {.capture_mask = mask, .on_layer = write_layer, .user = w,
                        .logit_positions = &last, .n_logit_positions = 1, .logits = logits};
    if (gpt2_forward(&ws, &model, tokens, L, &req, &err) != 0 ||
        dump_write_logits(w, logits, cfg->vocab_size, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        goto done;
    }
    dump_writer *closing = w;
    w = NULL;
    if (dump_close(closing, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        goto done;
    }
    rc = AS_EXIT_OK;
done:
    dump_abort(w);
    gpt2_workspace_free(&ws);
    free(logits);
    free(all);
    model_free(&model);
    return rc;
}
