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

/* UTF-8 validity from its definition (RFC 3629): the lead byte's leading ones
 * give the length, continuations are 10xxxxxx, and the code point must need
 * exactly that many bytes, be at most U+10FFFF and not a surrogate. NUL is
 * refused too (a text has none). The reference for textsrc_check_is_text. */
static int ref_is_text(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned b = s[i];
        size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        if (!b || !len || i + len > n) return 0;
        uint32_t cp = len == 1 ? b : b & (0x7Fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] >> 6) != 2) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        size_t need = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (need != len || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

/* Every 1- and 2-byte string, every 3-byte one with a multi-byte lead, and 4-byte
 * ones over every lead and second byte, against the definition (no message:
 * err NULL); then each refusal's one line. */
static void check_not_text(void) {
    as_err err = {{0}};
    long bad = 0, tried = 0;
    unsigned char s[4];
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        tried++, bad += (textsrc_check_is_text(s, 1, "x", NULL) == 0) != ref_is_text(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            tried++, bad += (textsrc_check_is_text(s, 2, "x", NULL) == 0) != ref_is_text(s, 2);
            /* an ASCII lead or a stray continuation decides the 3-byte string at once */
            for (unsigned c = 0; c < 256 && a >= 0xC0; c++) {
                s[2] = (unsigned char)c;
                tried++, bad += (textsrc_check_is_text(s, 3, "x", NULL) == 0) != ref_is_text(s, 3);
            }
            if (a < 0xF0) continue;
            static const unsigned char tails[] = {0x00, 0x41, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
            for (size_t i = 0; i < sizeof tails; i++)
                for (size_t j = 0; j < sizeof tails; j++) {
                    s[2] = tails[i], s[3] = tails[j];
                    tried++, bad += (textsrc_check_is_text(s, 4, "x", NULL) == 0) != ref_is_text(s, 4);
                }
        }
    }
    CHECK(bad == 0, "%ld of %ld byte strings judged unlike the UTF-8 definition", bad, tried);
    static const struct {
        const char *bytes;
        size_t n;
        const char *want1, *want2;
    } cases[] = {
        {"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", 14, "a PDF", "pdftotext"},
        {"PK\x03\x04\x14\0\0\0", 8, "ZIP", "unzip"},
        {"\x1f\x8b\x08\0\0\0\0\0", 8, "gzip", "gunzip"},
        {"\xff\xfeH\0i\0", 6, "UTF-16", "iconv -f UTF-16"},
        {"\xfd" "7zXZ\0\0", 7, "xz", "unxz"},
        {"line one\nline two\0\0\x01", 20, "NUL byte at offset 17 (line 2)", "text.format = \"tokens\""},
        {"caf\xc3\xa9\nna\xefve\n", 13, "byte 0xEF at offset 8, line 2", "iconv -f LATIN1 -t UTF-8"},
        {"caf\xe9 au lait", 12, "byte 0xE9 at offset 3, line 1", "iconv"},
        {"\xed\xa0\x80 surrogate", 13, "byte 0xED at offset 0", "iconv"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = textsrc_check_is_text((const unsigned char *)cases[k].bytes, cases[k].n, "in.txt", &err);
        CHECK(rc == -1 && strstr(err.msg, "in.txt") && strstr(err.msg, cases[k].want1) &&
                  strstr(err.msg, cases[k].want2) && !strchr(err.msg, '\n'),
              "case %zu: rc %d, '%s'", k, rc, err.msg);
    }
    const char *fine = "\xef\xbb\xbf" "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 %PDF- later\r\n";
    CHECK(textsrc_check_is_text((const unsigned char *)fine, strlen(fine), "ok.txt", &err) == 0, "valid: %s", err.msg);
    /* through textsrc_load: a PDF is refused before the Gutenberg check could suggest strip_gutenberg = false */
    char path[300];
    snprintf(path, sizeof path, "%s/paper.pdf", tmp);
    write_text(path, "%PDF-1.4\n1 0 obj << >> endobj\n*** START OF X ***\n");
    textsrc_spec spec = {.path = path, .format = TEXTSRC_TEXT, .strip_gutenberg = 1};
    textsrc ts;
    CHECK(textsrc_load(&ts, &spec, tmp, 2000, &err) == -1 && strstr(err.msg, "pdftotext") &&
              !strstr(err.msg, "strip_gutenberg"), "pdf through load: %s", err.msg);
}

int main(void) {
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    const char *python = getenv("AS_PYTHON");
    check_token_files(python ? python : "/usr/bin/python3");
    check_text();
    check_npy_header();
    check_not_text();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_summary("test_textsrc");
}
