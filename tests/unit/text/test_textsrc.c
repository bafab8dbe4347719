/* test_textsrc.c -- text sources: token files written by numpy and by Python's
 * struct (llm.c header, raw), Gutenberg stripping, windows, and the errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "textsrc.h"
#include "tokenizer.h"

static char tmp[] = "/tmp/textsrc_test_XXXXXX";

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
}

/* ids i -> (i * 7919 + 13) % 50000, the values the Python writer uses */
static int32_t expected_id(size_t i) { return (int32_t)((i * 7919 + 13) % 50000); }

static void check_token_files(const char *python) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && '%s' -c '\n"
             "import numpy as np, struct\n"
             "ids = (np.arange(3000, dtype=np.int64) * 7919 + 13) %% 50000\n"
             "for d in [\"u2\", \"u4\", \"i4\", \"i8\"]: np.save(\"t_\" + d + \".npy\", ids.astype(\"<\" + d))\n"
             "np.save(\"t_be.npy\", ids.astype(\">u2\"))\n"
             "np.save(\"t_2d.npy\", ids.astype(\"<u2\").reshape(30, 100))\n"
             "np.save(\"t_neg.npy\", np.array([1, 2, -5], dtype=\"<i4\"))\n"
             "np.save(\"t_big.npy\", np.array([1, 50257, 3], dtype=\"<u4\"))\n"
             "ids.astype(\"<u2\").tofile(\"raw16.bin\")\n"
             "ids.astype(\"<u4\").tofile(\"raw32.bin\")\n"
             "for v, d in [(1, \"<u2\"), (2, \"<u4\")]:\n"
             "    h = np.zeros(256, dtype=\"<i4\"); h[0] = 20240520; h[1] = v; h[2] = len(ids)\n"
             "    open(\"llmc%%d.bin\" %% v, \"wb\").write(h.tobytes() + ids.astype(d).tobytes())\n"
             "'",
             tmp, python);
    CHECK(system(cmd) == 0, "python writer failed: %s", cmd);
    const char *ok_files[][2] = {{"t_u2.npy", "npy <u2"}, {"t_u4.npy", "npy <u4"}, {"t_i4.npy", "npy <i4"},
                                 {"t_i8.npy", "npy <i8"}, {"llmc1.bin", "llm.c uint16"}, {"llmc2.bin", "llm.c uint32"},
                                 {"raw16.bin", "raw uint16"}, {"raw32.bin", "raw uint32"}};
    as_err err = {{0}};
    for (size_t k = 0; k < sizeof ok_files / sizeof *ok_files; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", tmp, ok_files[k][0]);
        textsrc_spec spec = {.path = path, .format = TEXTSRC_TOKENS, .dtype = TEXTSRC_DTYPE_AUTO};
        if (!strcmp(ok_files[k][0], "raw16.bin")) spec.dtype = TEXTSRC_U16;
        if (!strcmp(ok_files[k][0], "raw32.bin")) spec.dtype = TEXTSRC_U32;
        textsrc ts;
        int rc = textsrc_load(&ts, &spec, NULL, 50257, &err);
        CHECK(rc == 0, "%s: %s", path, err.msg);
        if (rc) continue;
        size_t bad = 0;
        for (size_t i = 0; i < ts.n_tokens; i++) bad += ts.tokens[i] != expected_id(i);
        CHECK(ts.n_tokens == 3000 && bad == 0, "%s: %zu tokens, %zu wrong", path, ts.n_tokens, bad);
        CHECK(!strcmp(ts.kind, ok_files[k][1]), "%s: kind '%s' want '%s'", path, ts.kind, ok_files[k][1]);
        textsrc_free(&ts);
    }
    struct { const char *file; textsrc_dtype dt; size_t vocab; const char *want; } bad[] = {
        {"t_be.npy", TEXTSRC_DTYPE_AUTO, 50257, "'>u2' is not one of"},
        {"t_2d.npy", TEXTSRC_DTYPE_AUTO, 50257, "2 dimensions"},
        {"t_neg.npy", TEXTSRC_DTYPE_AUTO, 50257, "token 2 is -5"},
        {"t_big.npy", TEXTSRC_DTYPE_AUTO, 50257, "token 1 is 50257"},
        {"t_u2.npy", TEXTSRC_DTYPE_AUTO, 1000, "token 1 is 7932"},
        {"raw16.bin", TEXTSRC_DTYPE_AUTO, 50257, "give its dtype"},
        {"llmc1.bin", TEXTSRC_U32, 50257, "llm.c header says uint16"},
        {"missing.bin", TEXTSRC_U16, 50257, "cannot open"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", tmp, bad[k].file);
        textsrc_spec spec = {.path = path, .format = TEXTSRC_TOKENS, .dtype = bad[k].dt};
        textsrc ts;
        CHECK(textsrc_load(&ts, &spec, NULL, bad[k].vocab, &err) == -1, "%s accepted", bad[k].file);
        CHECK(strstr(err.msg, bad[k].want) && strstr(err.msg, bad[k].file), "%s: message '%s' lacks '%s' or the file", bad[k].file, err.msg, bad[k].want);
    }
    /* truncated raw uint32 file */
    char path[4200];
    snprintf(path, sizeof path, "%s/odd.bin", tmp);
    write_text(path, "abc");
    textsrc_spec spec = {.path = path, .format = TEXTSRC_TOKENS, .dtype = TEXTSRC_U32};
    textsrc ts;
    CHECK(textsrc_load(&ts, &spec, NULL, 50257, &err) == -1 && strstr(err.msg, "not a whole number"), "odd: %s", err.msg);
}

/* text.start_at: the k-th occurrence, after stripping, before tokenizing */
static void check_start_at(const char *model) {
    as_err err = {{0}};
    char path[300];
    snprintf(path, sizeof path, "%s/toc.txt", tmp);
    /* "BOOK ONE" inside the licence header must not count: stripping comes first */
    write_text(path, "BOOK ONE header\n*** START OF X ***\nContents\n  BOOK ONE\n  CHAPTER I\n\n"
                     "BOOK ONE\n\nCHAPTER I\n\nWell, Prince.\n*** END OF X ***\nBOOK ONE\n");
    const char *body = "BOOK ONE\n\nCHAPTER I\n\nWell, Prince.\n";
    textsrc_spec spec = {.path = path, .format = TEXTSRC_TEXT, .strip_gutenberg = 1, .start_at = "BOOK ONE",
                         .start_occurrence = 2};
    textsrc ts;
    int rc = textsrc_load(&ts, &spec, model, 2000, &err);
    CHECK(rc == 0, "start_at: %s", err.msg);
    if (rc == 0) {
        tokenizer *t = tokenizer_load(model, &err);
        char back[512];
        size_t nb = 0;
        CHECK(t && tokenizer_decode(t, ts.tokens, ts.n_tokens, back, sizeof back, &nb, &err) == 0, "decode");
        CHECK(nb == strlen(body) && !memcmp(back, body, nb), "start_at 2: text is '%.*s'", (int)nb, back);
        const char *file = "BOOK ONE header\n*** START OF X ***\nContents\n  BOOK ONE\n  CHAPTER I\n\n";
        CHECK(ts.text_begin == strlen(file), "text_begin %zu want %zu", ts.text_begin, strlen(file));
        tokenizer_free(t);
        textsrc_free(&ts);
    }
    spec.start_occurrence = 3; /* the one after END OF is stripped away */
    CHECK(textsrc_load(&ts, &spec, model, 2000, &err) == -1 && strstr(err.msg, "text.start_at") &&
              strstr(err.msg, "occurs 2 times") && strstr(err.msg, "#3") && !strchr(err.msg, '\n'),
          "start_at 3: %s", err.msg);
    spec.start_at = "CHAPTER XIX", spec.start_occurrence = 1;
    CHECK(textsrc_load(&ts, &spec, model, 2000, &err) == -1 && strstr(err.msg, "text.start_at") &&
              strstr(err.msg, "does not occur") && strstr(err.msg, "toc.txt"),
          "start_at missing: %s", err.msg);
    /* plain text, occurrence 1: from the first byte of the match */
    spec.strip_gutenberg = 0, spec.start_at = "Well";
    rc = textsrc_load(&ts, &spec, model, 2000, &err);
    CHECK(rc == 0 && ts.text_bytes == strlen("Well, Prince.\n*** END OF X ***\nBOOK ONE\n"),
          "start_at Well: rc %d, %zu bytes: %s", rc, ts.text_bytes, err.msg);
    if (rc == 0) textsrc_free(&ts);
}

static void check_text(void) {
    char model[300], path[300], cmd[400];
    as_err err = {{0}};
    snprintf(model, sizeof model, "%s/model", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", model);
    CHECK(system(cmd) == 0, "mkdir");
    CHECK(tokenizer_install_vocab(model, 2000, NULL, &err) == 0, "install: %s", err.msg);
    const char *body = "\n\nCHAPTER I\n\n\"Well, Prince,\" said she. It's 1805 -- caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac.\n\n";
    char text[2048];
    snprintf(text, sizeof text,
             "\xef\xbb\xbfThe Project Gutenberg eBook of War and Peace\r\n\r\n"
             "*** START OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\n%s"
             "*** END OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\nlicence text\n", body);
    snprintf(path, sizeof path, "%s/book.txt", tmp);
    write_text(path, text);
    textsrc_spec spec = {.path = path, .format = TEXTSRC_TEXT, .strip_gutenberg = 1};
    textsrc ts;
    int rc = textsrc_load(&ts, &spec, model, 2000, &err);
    CHECK(rc == 0, "text: %s", err.msg);
    if (rc == 0) {
        tokenizer *t = tokenizer_load(model, &err);
        char back[4096];
        size_t nb = 0;
        CHECK(tokenizer_decode(t, ts.tokens, ts.n_tokens, back, sizeof back, &nb, &err) == 0, "decode");
        CHECK(nb == strlen(body) && !memcmp(back, body, nb), "stripped text is not exactly the body: '%.*s'", (int)nb, back);
        CHECK(ts.text_bytes == strlen(body), "text_bytes %zu", ts.text_bytes);
        /* windows */
        int64_t starts[3];
        textsrc_window_starts(starts, 3, 2, 5);
        CHECK(starts[0] == 2 && starts[1] == 7 && starts[2] == 12, "window starts");
        int64_t n = (int64_t)ts.n_tokens;
        CHECK(textsrc_check_fit(&ts, 3, 2, 5, n - 12, &err) == 0, "exact fit: %s", err.msg);
        CHECK(textsrc_check_fit(&ts, 3, 2, 5, n - 11, &err) == -1, "one too many must fail");
        char want[256];
        snprintf(want, sizeof want, "has %lld tokens, the windows need %lld", (long long)n, (long long)n + 1);
        CHECK(strstr(err.msg, want) && strstr(err.msg, "book.txt"), "fit message: %s", err.msg);
        CHECK(textsrc_window(&ts, 12, n - 12) == ts.tokens + 12, "window pointer");
        CHECK(textsrc_window(&ts, 12, n - 11) == NULL, "window past the end");
        tokenizer_free(t);
        textsrc_free(&ts);
    }
    /* whole text without stripping has more tokens, BOM included */
    spec.strip_gutenberg = 0;
    CHECK(textsrc_load(&ts, &spec, model, 2000, &err) == 0 && ts.text_bytes == strlen(text), "unstripped: %s", err.msg);
    textsrc_free(&ts);
    /* markers missing */
    write_text(path, "no markers here\n");
    spec.strip_gutenberg = 1;
    CHECK(textsrc_load(&ts, &spec, model, 2000, &err) == -1 && strstr(err.msg, "START OF") && strstr(err.msg, "book.txt"), "no start: %s", err.msg);
    write_text(path, "*** START OF X ***\nbody\n");
    CHECK(textsrc_load(&ts, &spec, model, 2000, &err) == -1 && strstr(err.msg, "END OF"), "no end: %s", err.msg);
    write_text(path, "***START OF X***\nbody\n***END OF X***\n");
    CHECK(textsrc_load(&ts, &spec, model, 2000, &err) == 0 && ts.text_bytes == 5, "old-style markers: %s", err.msg);
    textsrc_free(&ts);
    /* tokenizer bigger than the model */
    CHECK(textsrc_load(&ts, &spec, model, 1000, &err) == -1 && strstr(err.msg, "2000 ids but the model only 1000"), "vocab: %s", err.msg);
    /* formats */
    textsrc_format fmt;
    textsrc_dtype dt;
    CHECK(textsrc_parse_format("tokens", &fmt, &err) == 0 && fmt == TEXTSRC_TOKENS, "format");
    CHECK(textsrc_parse_format("txt", &fmt, &err) == -1 && strstr(err.msg, "'txt'"), "bad format");
    CHECK(textsrc_parse_dtype("uint16", &dt, &err) == 0 && dt == TEXTSRC_U16, "dtype");
    CHECK(textsrc_parse_dtype("int8", &dt, &err) == -1, "bad dtype");
    check_start_at(model);
}

/* Writes a version-1 .npy file with header dict `dict` (padded as numpy pads
 * it) followed by `data_bytes` bytes of float32 1.0f values. */
static void write_npy(const char *path, const char *dict, size_t data_bytes) {
    size_t dl = strlen(dict), total = 10 + dl + 1;
    size_t pad = (64 - total % 64) % 64, hlen = dl + pad + 1;
    FILE *f = fopen(path, "wb");
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(hlen & 0xff), f);
    fputc((int)(hlen >> 8), f);
    fputs(dict, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    const unsigned char one[4] = {0x00, 0x00, 0x80, 0x3f}; /* 1.0f */
    for (size_t i = 0; i < data_bytes; i++) fputc(one[i % 4], f);
    fclose(f);
}

/* the header is a dict, parsed as one; a key's name inside
 * another value does not count. */
static void check_npy_header(void) {
    struct { const char *dict; const char *want; } cases[] = {
        /* float32 data behind a decoy "'descr': '<u2'" string: loaded as ids by a substring search */
        {"{'note': \"'descr': '<u2', 'fortran_order': False, 'shape': (8,), \", 'descr': '<f4', "
         "'fortran_order': False, 'shape': (8,), }", "'note'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (8,), 'x': \"'descr': '<u2'\"}", "'x'"},
        {"{'shape': (8,), 'fortran_order': False, 'descr': '<f4'}", "'<f4' is not one of"},
        {"{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (8,)}", "given twice"},
        {"{'descr': '<u2', 'fortran_order': False}", "lacks 'shape'"},
        {"{'descr': '<u2', 'fortran_order': maybe, 'shape': (8,)}", "True or False"},
        {"{'descr': '<u2', 'fortran_order': False, 'shape': (8, -1)}", "non-negative integer"},
        {"{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (8,)}", "not a dtype string"},
        {"{'descr': '<u2', 'fortran_order': False, 'shape': (8,)} junk", "text after the dict"},
        {"'descr': '<u2', 'fortran_order': False, 'shape': (8,)", "not a dict"},
    };
    as_err err = {{0}};
    char path[4200];
    snprintf(path, sizeof path, "%s/hdr.npy", tmp);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        write_npy(path, cases[k].dict, 32);
        textsrc_spec spec = {.path = path, .format = TEXTSRC_TOKENS, .dtype = TEXTSRC_DTYPE_AUTO};
        textsrc ts;
        int rc = textsrc_load(&ts, &spec, NULL, 50257, &err);
        CHECK(rc == -1, "header %zu accepted: %s", k, cases[k].dict);
        if (rc == 0) textsrc_free(&ts);
        else CHECK(strstr(err.msg, cases[k].want) && strstr(err.msg, "hdr.npy"), "header %zu: '%s' lacks '%s'", k,
                   err.msg, cases[k].want);
    }
    /* what numpy itself writes, in either key order, with a 2-style "L" and double quotes */
    const char *good[] = {"{'descr': '<u2', 'fortran_order': False, 'shape': (16,), }",
                          "{\"shape\": (16L,), \"descr\": \"<u2\", \"fortran_order\": False}"};
    for (size_t k = 0; k < 2; k++) {
        write_npy(path, good[k], 32);
        textsrc_spec spec = {.path = path, .format = TEXTSRC_TOKENS, .dtype = TEXTSRC_DTYPE_AUTO};
        textsrc ts;
        int rc = textsrc_load(&ts, &spec, NULL, 50257, &err);
        CHECK(rc == 0 && ts.n_tokens == 16 && ts.tokens[1] == 0x3f80, "good header %zu: %s", k, err.msg);
        if (rc == 0) textsrc_free(&ts);
    }
}

int main(void) {
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    const char *python = getenv("AS_PYTHON");
    check_token_files(python ? python : "/usr/bin/python3");
    check_text();
    check_npy_header();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_summary("test_textsrc");
}
