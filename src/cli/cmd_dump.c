/* cmd_dump.c -- attnsweep dump: one window's attention internals to HDF5
 * (layout in dump.h and docs/results.md, "The dump file"). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "dump.h"
#include "fileio.h"
#include "textsrc.h"
#include "forward.h"
#include "model.h"

static const char dump_about[] =
    "Runs GPT-2 over tokens [K, K+L) and writes tokens, each listed layer's q, k, v\n"
    "[head, L, d_head], raw scores q.k [head, L, L] (NaN above the diagonal),\n"
    "attention pattern [head, L, L] and the last position's logits to FILE.h5\n"
    "(written to FILE.h5.tmp.PID, then renamed).\n";

/* The command line of dump. */
typedef struct {
    const char *model_dir, *text, *tokens_path, *out, *layers_s, *dtype_s, *start_at;
    long long length, start, start_occ;
    int strip_gutenberg;
} dump_args;

/* 0 to go on, else 1 with *code (help printed, or a usage error). */
static int parse_dump_args(dump_args *d, int argc, char **argv, int *code) {
    *d = (dump_args){.layers_s = "all", .start_occ = 1};
    const arg_opt opts[] = {
        OPT_STRING_REQUIRED("model", "DIR", &d->model_dir,
                            "config.json + model.safetensors (Hugging Face layout)"),
        OPT_STRING("tokens", "FILE", &d->tokens_path,
                   "token ids, read as `run` reads text.format = \"tokens\": .npy,\n"
                   "llm.c .bin, or a raw little-endian .bin (uint16 unless\n"
                   "--dtype uint32); any other file: whitespace-separated ids"),
        OPT_STRING("dtype", "TYPE", &d->dtype_s, "uint16 | uint32: the ids of a raw .bin (default uint16)"),
        OPT_STRING("text", "FILE", &d->text,
                   "UTF-8 text, encoded with the model directory's GPT-2 tokenizer\n"
                   "(vocab.json + merges.txt)"),
        OPT_FLAG("strip-gutenberg", &d->strip_gutenberg, "with --text: keep only the Project Gutenberg body"),
        OPT_STRING("start-at", "STRING", &d->start_at,
                   "with --text: start the text at the K-th occurrence of STRING (as the\n"
                   "config's text.start_at, text.start_occurrence)"),
        OPT_INT("start-occurrence", "K", &d->start_occ, 1, LLONG_MAX, "which occurrence of --start-at (default 1)"),
        OPT_INT_REQUIRED("length", "L", &d->length, 1, LLONG_MAX, "window length, 1..n_positions"),
        OPT_INT("window-start", "K", &d->start, 0, LLONG_MAX, "first token of the window (default 0)"),
        OPT_STRING("layers", "LIST", &d->layers_s, "e.g. 0,3,5-7 or all (default all)"),
        OPT_STRING_REQUIRED("out", "FILE.h5", &d->out, "output file"),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep dump", .description = dump_about,
                     .epilogue = "OpenBLAS threads: OPENBLAS_NUM_THREADS.\n", .opts = opts};
    if (args_parse(&spec, argc, argv, code)) return 1;
    *code = AS_EXIT_USAGE;
    if (!d->text && !d->tokens_path) {
        fprintf(stderr, "attnsweep dump: --tokens or --text is required (try --help)\n");
        return 1;
    }
    if (d->text && d->tokens_path) {
        fprintf(stderr, "attnsweep dump: give --text or --tokens, not both\n");
        return 1;
    }
    if (d->start_at && !d->text) {
        fprintf(stderr, "attnsweep dump: --start-at needs --text\n");
        return 1;
    }
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

static int write_layer(const fwd_layer_view *view, void *user, as_err *err) {
    return dump_write_layer(user, view, err);
}

/* The token stream of --text or --tokens into *all; the window [start, start + L) must lie
 * in it with every id in the vocabulary. 0, or the exit code after its message. */
static int load_tokens(const dump_args *d, const gpt2_config *cfg, int32_t **all, size_t *n_all) {
    as_err err = {{0}};
    size_t L = (size_t)d->length, start = (size_t)d->start;
    const char *tokens_path = d->tokens_path;
    textsrc_spec spec = {.path = d->text, .format = TEXTSRC_TEXT, .strip_gutenberg = d->strip_gutenberg,
                         .start_at = d->start_at, .start_occurrence = (int64_t)d->start_occ};
    int kind = d->text ? TOKENS_ID_TEXT : token_file_kind(tokens_path);
    if (kind != TOKENS_ID_TEXT) {
        spec = (textsrc_spec){.path = tokens_path, .format = TEXTSRC_TOKENS,
                              .dtype = kind == TOKENS_RAW_BIN ? TEXTSRC_U16 : TEXTSRC_DTYPE_AUTO};
        if (d->dtype_s && textsrc_parse_dtype(d->dtype_s, &spec.dtype, &err) != 0) {
            fprintf(stderr, "attnsweep dump: --dtype '%s' is not uint16 or uint32\n", d->dtype_s);
            return AS_EXIT_USAGE;
        }
    }
    if (spec.path) {
        textsrc ts;
        if (textsrc_load(&ts, &spec, d->model_dir, cfg->vocab_size, &err) != 0) {
            fprintf(stderr, "attnsweep dump: %s\n", err.msg);
            return AS_EXIT_ERROR;
        }
        *all = ts.tokens, *n_all = ts.n_tokens;
        tokens_path = spec.path;
    } else if (read_id_text(tokens_path, all, n_all, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    if (start > *n_all || L > *n_all - start) {
        fprintf(stderr, "attnsweep dump: window [%zu, %zu) needs %zu tokens but %s has %zu\n", start,
                start + L, start + L, tokens_path, *n_all);
        return AS_EXIT_USAGE;
    }
    for (size_t t = 0; t < L; t++)
        if ((size_t)(*all)[start + t] >= cfg->vocab_size) {
            fprintf(stderr, "attnsweep dump: %s: token %zu is id %d, outside the vocabulary of %zu\n",
                    tokens_path, start + t, (*all)[start + t], cfg->vocab_size);
            return AS_EXIT_ERROR;
        }
    return 0;
}

/* The forward pass over the window, each captured layer and the logits to d->out. */
static int write_dump(const dump_args *d, const gpt2_model *model, const int32_t *tokens,
                      uint64_t mask, as_err *err) {
    const gpt2_config *cfg = &model->cfg;
    size_t L = (size_t)d->length, last = L - 1;
    fwd_workspace ws = {0};
    dump_writer *w = NULL;
    float *logits = malloc(cfg->vocab_size * sizeof *logits);
    int rc = -1;
    if (!logits) {
        as_fail(err, "out of memory for the logits");
        goto done;
    }
    if (fwd_workspace_init(&ws, cfg, L, err) != 0) goto done;
    dump_provenance prov = {.window_start = (size_t)d->start, .model_dir = d->model_dir,
                            .weights_sha256 = model->weights_sha256};
    w = dump_open(d->out, tokens, L, &prov, err);
    if (!w) goto done;
    fwd_request req = {.capture_mask = mask, .on_layer = write_layer, .user = w,
                        .logit_positions = &last, .n_logit_positions = 1, .logits = logits};
    if (fwd_forward(&ws, model, tokens, L, &req, err) != 0 ||
        dump_write_logits(w, logits, cfg->vocab_size, err) != 0)
        goto done;
    dump_writer *closing = w;
    w = NULL;
    rc = dump_close(closing, err);
done:
    dump_abort(w);
    fwd_workspace_free(&ws);
    free(logits);
    return rc;
}

int cmd_dump(int argc, char **argv) {
    dump_args d;
    int rc;
    if (parse_dump_args(&d, argc, argv, &rc)) return rc;
    as_err err = {{0}};
    gpt2_model model;
    if (model_load(&model, d.model_dir, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    const gpt2_config *cfg = &model.cfg;
    int32_t *all = NULL;
    size_t n_all = 0;
    uint64_t mask = 0;
    rc = AS_EXIT_USAGE;
    if ((size_t)d.length > cfg->n_positions) {
        fprintf(stderr, "attnsweep dump: --length %lld exceeds the model's n_positions %zu\n", d.length,
                cfg->n_positions);
    } else if (parse_layers(d.layers_s, cfg->n_layer, &mask, &err) != 0) {
        fprintf(stderr, "attnsweep dump: %s\n", err.msg);
    } else if ((rc = load_tokens(&d, cfg, &all, &n_all)) == 0) {
        rc = AS_EXIT_OK;
        if (write_dump(&d, &model, all + d.start, mask, &err)) {
            fprintf(stderr, "attnsweep dump: %s\n", err.msg);
            rc = AS_EXIT_ERROR;
        }
    }
    free(all);
    model_free(&model);
    return rc;
}
