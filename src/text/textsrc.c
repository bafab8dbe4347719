/* textsrc.c -- see textsrc.h. */
#include "textsrc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "sha256.h"
#include "tokenizer.h"

static unsigned char *read_all(const char *path, size_t max_bytes, const char *what, size_t *n, as_err *err) {
    char *buf = NULL;
    if (fileio_read_all(path, max_bytes, what, &buf, n, err)) return NULL;
    return (unsigned char *)buf;
}

static const char *find_marker_line(const char *s, size_t len, size_t from, const char *word, size_t *line_start,
                                    size_t *line_end) {
    /* "*** WORD OF" or "***WORD OF" anywhere on a line */
    char pat1[32], pat2[32];
    snprintf(pat1, sizeof pat1, "*** %s OF", word);
    snprintf(pat2, sizeof pat2, "***%s OF", word);
    for (size_t i = from; i < len;) {
        size_t e = i;
        while (e < len && s[e] != '\n') e++;
        for (int k = 0; k < 2; k++) {
            const char *p = k ? pat2 : pat1;
            size_t pl = strlen(p);
            for (size_t j = i; j + pl <= e; j++)
                if (s[j] == '*' && !memcmp(s + j, p, pl)) {
                    *line_start = i;
                    *line_end = e < len ? e + 1 : e;
                    return s + j;
                }
        }
        i = e + 1;
    }
    return NULL;
}

int textsrc_strip_gutenberg(const char *text, size_t len, size_t *begin, size_t *end, const char *path,
                            as_err *err) {
    size_t s0, s1, e0, e1;
    if (!find_marker_line(text, len, 0, "START", &s0, &s1))
        return as_fail(err, "%s: strip_gutenberg is on but there is no \"*** START OF\" line (not a Project Gutenberg text? set strip_gutenberg = false)", path);
    if (!find_marker_line(text, len, s1, "END", &e0, &e1))
        return as_fail(err, "%s: strip_gutenberg is on but there is no \"*** END OF\" line after the \"*** START OF\" line", path);
    *begin = s1;
    *end = e0;
    return 0;
}

int textsrc_find_start(const char *text, size_t begin, size_t end, const char *marker, int64_t k,
                       size_t *at, const char *path, as_err *err) {
    size_t m = strlen(marker);
    if (k < 1) k = 1;
    int64_t seen = 0;
    for (size_t i = begin; m && i + m <= end;) {
        const char *hit = memchr(text + i, marker[0], end - m + 1 - i);
        if (!hit) break;
        i = (size_t)(hit - text);
        if (!memcmp(text + i, marker, m)) {
            if (++seen == k) return *at = i, 0;
            i += m;
        } else {
            i++;
        }
    }
    if (!m) return as_fail(err, "text.start_at: empty marker");
    if (seen == 0)
        return as_fail(err, "text.start_at: \"%s\" does not occur in %s%s", marker, path,
                       begin ? " (after strip_gutenberg)" : "");
    return as_fail(err, "text.start_at: \"%s\" occurs %lld time%s in %s%s, text.start_occurrence asks for #%lld",
                   marker, (long long)seen, seen == 1 ? "" : "s", path, begin ? " (after strip_gutenberg)" : "",
                   (long long)k);
}

int textsrc_parse_format(const char *s, textsrc_format *out, as_err *err) {
    if (!strcmp(s, "text")) *out = TEXTSRC_TEXT;
    else if (!strcmp(s, "tokens")) *out = TEXTSRC_TOKENS;
    else return as_fail(err, "text.format: '%s' is not \"text\" or \"tokens\"", s);
    return 0;
}

int textsrc_parse_dtype(const char *s, textsrc_dtype *out, as_err *err) {
    if (!strcmp(s, "uint16") || !strcmp(s, "u2") || !strcmp(s, "<u2")) *out = TEXTSRC_U16;
    else if (!strcmp(s, "uint32") || !strcmp(s, "u4") || !strcmp(s, "<u4")) *out = TEXTSRC_U32;
    else return as_fail(err, "text.dtype: '%s' is not \"uint16\" or \"uint32\"", s);
    return 0;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Converts n little-endian values of `size` bytes (signed if is_signed) to
 * int32 ids, checking each against vocab_size. */
static int convert_ids(textsrc *ts, const unsigned char *p, size_t n, int size, int is_signed, size_t vocab_size,
                       as_err *err) {
    ts->tokens = malloc((n ? n : 1) * sizeof *ts->tokens);
    if (!ts->tokens) return as_fail(err, "%s: out of memory for %zu tokens", ts->path, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t u = 0;
        for (int b = 0; b < size; b++) u |= (uint64_t)p[i * (size_t)size + (size_t)b] << (8 * b);
        int negative = is_signed && (u >> (8 * size - 1)) & 1;
        if (negative || u >= vocab_size) {
            long long v = negative ? (long long)(u | (size < 8 ? ~0ull << (8 * size) : 0)) : (long long)u;
            free(ts->tokens);
            ts->tokens = NULL;
            return as_fail(err, "%s: token %zu is %lld, not an id of the model's vocabulary (0..%zu)", ts->path, i, v,
                           vocab_size - 1);
        }
        ts->tokens[i] = (int32_t)u;
    }
    ts->n_tokens = n;
    return 0;
}

/* ---- the .npy header: a Python dict literal, parsed as one ----
 * {'descr': '<u2', 'fortran_order': False, 'shape': (400,), } -- exactly the
 * three keys numpy writes, each once; strings in '...' or "..." (with
 * backslash escapes), True/False, and a tuple of non-negative integers. A key
 * or a string value that merely contains "'descr'" is just text here. */

enum { NPY_MAX_DIMS = 32 };
typedef struct {
    char descr[32];
    int fortran_order;
    size_t shape[NPY_MAX_DIMS];
    size_t dims;
} npy_header;

typedef struct {
    const char *s;
    size_t n, i;
} npy_reader;

static void npy_ws(npy_reader *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static int npy_peek(npy_reader *r, char c) {
    npy_ws(r);
    return r->i < r->n && r->s[r->i] == c;
}

/* A Python string literal into out (cut to size - 1); 0, or -1 when malformed. */
static int npy_string(npy_reader *r, char *out, size_t size) {
    npy_ws(r);
    if (r->i >= r->n || (r->s[r->i] != '\'' && r->s[r->i] != '"')) return -1;
    char q = r->s[r->i++];
    size_t m = 0;
    while (r->i < r->n && r->s[r->i] != q) {
        char c = r->s[r->i++];
        if (c == '\\') {
            if (r->i >= r->n) return -1;
            c = r->s[r->i++];
        }
        if (c == '\n') return -1;
        if (m + 1 < size) out[m++] = c;
    }
    if (r->i >= r->n) return -1;
    r->i++;
    out[m] = 0;
    return 0;
}

static int parse_npy_header(const char *s, size_t n, npy_header *h, const char *path, as_err *err) {
    memset(h, 0, sizeof *h);
    npy_reader r = {s, n, 0};
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    if (!npy_peek(&r, '{')) return as_fail(err, "%s: .npy header is not a dict", path);
    r.i++;
    for (;;) {
        if (npy_peek(&r, '}')) break;
        char key[64];
        if (npy_string(&r, key, sizeof key))
            return as_fail(err, "%s: .npy header: a key is not a string (at byte %zu)", path, r.i);
        if (!npy_peek(&r, ':')) return as_fail(err, "%s: .npy header: no ':' after '%s'", path, key);
        r.i++;
        if (!strcmp(key, "descr")) {
            if (seen_descr++) return as_fail(err, "%s: .npy header: 'descr' given twice", path);
            char v[64];
            if (npy_string(&r, v, sizeof v) || strlen(v) >= sizeof h->descr)
                return as_fail(err, "%s: .npy header: 'descr' is not a dtype string (a structured dtype?)", path);
            snprintf(h->descr, sizeof h->descr, "%s", v);
        } else if (!strcmp(key, "fortran_order")) {
            if (seen_fortran++) return as_fail(err, "%s: .npy header: 'fortran_order' given twice", path);
            npy_ws(&r);
            if (r.n - r.i >= 4 && !memcmp(r.s + r.i, "True", 4)) h->fortran_order = 1, r.i += 4;
            else if (r.n - r.i >= 5 && !memcmp(r.s + r.i, "False", 5)) h->fortran_order = 0, r.i += 5;
            else return as_fail(err, "%s: .npy header: 'fortran_order' is not True or False", path);
        } else if (!strcmp(key, "shape")) {
            if (seen_shape++) return as_fail(err, "%s: .npy header: 'shape' given twice", path);
            if (!npy_peek(&r, '(')) return as_fail(err, "%s: .npy header: 'shape' is not a tuple", path);
            r.i++;
            for (;;) {
                if (npy_peek(&r, ')')) break;
                if (r.i >= r.n || r.s[r.i] < '0' || r.s[r.i] > '9')
                    return as_fail(err, "%s: .npy header: 'shape' holds something that is not a non-negative integer", path);
                unsigned long long v = 0;
                while (r.i < r.n && r.s[r.i] >= '0' && r.s[r.i] <= '9') {
                    unsigned d = (unsigned)(r.s[r.i++] - '0');
                    if (v > (ULLONG_MAX - d) / 10 || v * 10 + d > SIZE_MAX)
                        return as_fail(err, "%s: .npy header: a 'shape' entry is too large", path);
                    v = v * 10 + d;
                }
                while (r.i < r.n && (r.s[r.i] == 'L' || r.s[r.i] == 'l')) r.i++; /* Python 2 longs */
                if (h->dims == NPY_MAX_DIMS) return as_fail(err, "%s: .npy header: more than %d dimensions", path, NPY_MAX_DIMS);
                h->shape[h->dims++] = (size_t)v;
                if (npy_peek(&r, ',')) r.i++;
                else if (!npy_peek(&r, ')')) return as_fail(err, "%s: .npy header: bad 'shape' tuple", path);
            }
            r.i++;
        } else {
            return as_fail(err, "%s: .npy header has the key '%s'; numpy writes only 'descr', 'fortran_order' and 'shape'",
                           path, key);
        }
        if (npy_peek(&r, ',')) r.i++;
        else if (!npy_peek(&r, '}')) return as_fail(err, "%s: .npy header: expected ',' or '}' (at byte %zu)", path, r.i);
    }
    r.i++;
    npy_ws(&r);
    if (r.i != r.n) return as_fail(err, "%s: .npy header: text after the dict", path);
    if (!seen_descr || !seen_fortran || !seen_shape)
        return as_fail(err, "%s: .npy header lacks %s", path,
                       !seen_descr ? "'descr'" : !seen_fortran ? "'fortran_order'" : "'shape'");
    return 0;
}

static int load_npy(textsrc *ts, const unsigned char *b, size_t n, size_t vocab_size, as_err *err) {
    if (n < 10) return as_fail(err, "%s: truncated .npy header", ts->path);
    size_t hlen, hoff;
    if (b[6] == 1) { hlen = (size_t)b[8] | (size_t)b[9] << 8; hoff = 10; }
    else if (b[6] == 2 || b[6] == 3) {
        if (n < 12) return as_fail(err, "%s: truncated .npy header", ts->path);
        hlen = le32(b + 8); hoff = 12;
    } else return as_fail(err, "%s: .npy format version %d is not supported", ts->path, b[6]);
    if (hoff + hlen > n) return as_fail(err, "%s: truncated .npy header", ts->path);
    npy_header h;
    if (parse_npy_header((const char *)b + hoff, hlen, &h, ts->path, err)) return -1;
    const char *descr = h.descr;
    int size, is_signed;
    if (!strcmp(descr, "<u2")) { size = 2; is_signed = 0; }
    else if (!strcmp(descr, "<u4")) { size = 4; is_signed = 0; }
    else if (!strcmp(descr, "<i4")) { size = 4; is_signed = 1; }
    else if (!strcmp(descr, "<i8")) { size = 8; is_signed = 1; }
    else return as_fail(err, "%s: .npy dtype '%s' is not one of '<u2', '<u4', '<i4', '<i8'", ts->path, descr);
    size_t dims = h.dims, count = 1;
    for (size_t k = 0; k < dims; k++) {
        if (h.shape[k] && count > SIZE_MAX / h.shape[k])
            return as_fail(err, "%s: .npy shape overflows", ts->path);
        count *= h.shape[k];
    }
    if (dims != 1) return as_fail(err, "%s: .npy array has %zu dimensions; a token file must be 1-D", ts->path, dims);
    size_t data = hoff + hlen;
    if ((n - data) / (size_t)size < count)
        return as_fail(err, "%s: .npy says %zu tokens but holds %zu bytes of data", ts->path, count, n - data);
    snprintf(ts->kind, sizeof ts->kind, "npy %s", descr);
    return convert_ids(ts, b + data, count, size, is_signed, vocab_size, err);
}

static int load_tokens(textsrc *ts, const textsrc_spec *spec, size_t vocab_size, as_err *err) {
    size_t n;
    unsigned char *b = read_all(spec->path, TEXTSRC_TOKENS_MAX_BYTES, "a token file", &n, err);
    if (!b) return -1;
    sha256_hex(ts->sha256, b, n);
    int rc;
    if (n >= 6 && !memcmp(b, "\x93NUMPY", 6)) {
        rc = load_npy(ts, b, n, vocab_size, err);
    } else if (n >= 1024 && le32(b) == 20240520u) {
        uint32_t version = le32(b + 4), count = le32(b + 8);
        int size = version == 1 ? 2 : version == 2 ? 4 : 0;
        if (!size) rc = as_fail(err, "%s: llm.c token file version %u is not 1 (uint16) or 2 (uint32)", ts->path, version);
        else if ((spec->dtype == TEXTSRC_U16 && size != 2) || (spec->dtype == TEXTSRC_U32 && size != 4))
            rc = as_fail(err, "%s: text.dtype says %s but the llm.c header says uint%d", ts->path,
                         spec->dtype == TEXTSRC_U16 ? "uint16" : "uint32", size * 8);
        else if ((n - 1024) / (size_t)size < count)
            rc = as_fail(err, "%s: llm.c header says %u tokens but the file holds %zu bytes after it", ts->path, count, n - 1024);
        else {
            snprintf(ts->kind, sizeof ts->kind, "llm.c uint%d", size * 8);
            rc = convert_ids(ts, b + 1024, count, size, 0, vocab_size, err);
        }
    } else if (spec->dtype == TEXTSRC_DTYPE_AUTO) {
        rc = as_fail(err, "%s: raw token file (no .npy or llm.c header): give its dtype, uint16 or uint32", ts->path);
    } else {
        int size = spec->dtype == TEXTSRC_U16 ? 2 : 4;
        if (n % (size_t)size)
            rc = as_fail(err, "%s: %zu bytes is not a whole number of uint%d tokens", ts->path, n, size * 8);
        else {
            snprintf(ts->kind, sizeof ts->kind, "raw uint%d", size * 8);
            rc = convert_ids(ts, b, n / (size_t)size, size, 0, vocab_size, err);
        }
    }
    free(b);
    return rc;
}

/* Length of the well-formed UTF-8 sequence at s[0..left) (Unicode table 3-7),
 * or 0 when none starts there. */
static size_t utf8_seq_len(const unsigned char *s, size_t left) {
    unsigned char b = s[0];
    if (b < 0x80) return 1;
    size_t len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (!len || left < len) return 0;
    unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return len;
}

/* Formats that are not text, known by their first bytes, and how to get text out of each. */
static const struct {
    const char *magic;
    size_t len;
    const char *what, *fix;
} not_text[] = {
    {"%PDF-", 5, "a PDF", "convert it first, e.g. pdftotext -enc UTF-8 FILE.pdf FILE.txt"},
    {"PK\x03\x04", 4, "a ZIP archive (also .epub, .docx)", "unzip it and point text.path at the text inside"},
    {"PK\x05\x06", 4, "an empty ZIP archive", "point text.path at a UTF-8 text"},
    {"\x1f\x8b", 2, "gzip-compressed", "decompress it first: gunzip -k FILE.gz"},
    {"\xfd" "7zXZ", 5, "xz-compressed", "decompress it first: unxz -k FILE.xz"},
    {"\x28\xb5\x2f\xfd", 4, "zstd-compressed", "decompress it first: unzstd FILE.zst"},
    {"\xff\xfe", 2, "UTF-16 (little-endian)", "convert it: iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8.txt"},
    {"\xfe\xff", 2, "UTF-16 (big-endian)", "convert it: iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8.txt"},
};

int textsrc_check_is_text(const unsigned char *b, size_t n, const char *path, as_err *err) {
    for (size_t k = 0; k < sizeof not_text / sizeof not_text[0]; k++)
        if (n >= not_text[k].len && !memcmp(b, not_text[k].magic, not_text[k].len))
            return as_fail(err, "%s: text.path is %s, not a UTF-8 text: %s", path, not_text[k].what, not_text[k].fix);
    size_t line = 1;
    for (size_t i = 0; i < n;) {
        if (b[i] == 0)
            return as_fail(err, "%s: text.path has a NUL byte at offset %zu (line %zu): a binary file, not a UTF-8 "
                           "text (token ids? set text.format = \"tokens\"; else convert it to plain text)", path, i, line);
        size_t len = utf8_seq_len(b + i, n - i);
        if (!len)
            return as_fail(err, "%s: text.path is not UTF-8 (byte 0x%02X at offset %zu, line %zu): convert it, e.g. "
                           "iconv -f LATIN1 -t UTF-8 FILE > FILE.utf8.txt (file -i FILE guesses the encoding)", path,
                           b[i], i, line);
        line += b[i] == '\n';
        i += len;
    }
    return 0;
}

static int load_text(textsrc *ts, const textsrc_spec *spec, const char *model_dir, size_t vocab_size, as_err *err) {
    if (!model_dir) return as_fail(err, "%s: a text source needs the model directory's tokenizer", ts->path);
    size_t n;
    unsigned char *b = read_all(spec->path, TEXTSRC_TEXT_MAX_BYTES, "a text file", &n, err);
    if (!b) return -1;
    sha256_hex(ts->sha256, b, n);
    size_t begin = 0, end = n;
    /* before the Gutenberg check, whose hint (strip_gutenberg = false) would let a binary's bytes be tokenized */
    if (textsrc_check_is_text(b, n, ts->path, err)) {
        free(b);
        return -1;
    }
    if (spec->strip_gutenberg && textsrc_strip_gutenberg((const char *)b, n, &begin, &end, ts->path, err)) {
        free(b);
        return -1;
    }
    if (spec->start_at && spec->start_at[0] &&
        textsrc_find_start((const char *)b, begin, end, spec->start_at, spec->start_occurrence, &begin, ts->path,
                           err)) {
        free(b);
        return -1;
    }
    tokenizer *tok = tokenizer_load(model_dir, err);
    if (!tok) { free(b); return -1; }
    snprintf(ts->vocab_sha256, sizeof ts->vocab_sha256, "%s", tokenizer_vocab_sha256(tok));
    snprintf(ts->merges_sha256, sizeof ts->merges_sha256, "%s", tokenizer_merges_sha256(tok));
    const char *vn = strrchr(tokenizer_vocab_path(tok), '/'), *mn = strrchr(tokenizer_merges_path(tok), '/');
    snprintf(ts->vocab_name, sizeof ts->vocab_name, "%s", vn ? vn + 1 : tokenizer_vocab_path(tok));
    snprintf(ts->merges_name, sizeof ts->merges_name, "%s", mn ? mn + 1 : tokenizer_merges_path(tok));
    int rc = 0;
    if (tokenizer_vocab_size(tok) > vocab_size)
        rc = as_fail(err, "%s: the tokenizer has %zu ids but the model only %zu", tokenizer_vocab_path(tok),
                     tokenizer_vocab_size(tok), vocab_size);
    if (!rc && tokenizer_set_add_bos(tok, spec->add_bos == TEXTSRC_BOS_ON ? 1 : spec->add_bos == TEXTSRC_BOS_OFF ? 0 : -1, err)) rc = as_wrap(err, "text.add_bos");
    if (!rc && tokenizer_describe(tok, ts->tokenizer_files, sizeof ts->tokenizer_files))
        rc = as_fail(err, "%s: the tokenizer's description does not fit", ts->path);
    size_t len = end - begin, k = 0;
    if (!rc && tokenizer_encode_alloc(tok, (const char *)b + begin, len, &ts->tokens, &k, err)) rc = as_wrap(err, "%s", ts->path);
    ts->add_bos = tokenizer_add_bos(tok);
    tokenizer_free(tok);
    free(b);
    if (rc) { free(ts->tokens); ts->tokens = NULL; return -1; }
    ts->n_tokens = k;
    ts->text_bytes = len;
    ts->text_begin = begin;
    snprintf(ts->kind, sizeof ts->kind, "%s%s", spec->strip_gutenberg ? "text (Gutenberg stripped)" : "text",
             spec->start_at && spec->start_at[0] ? ", from text.start_at" : "");
    return 0;
}

int textsrc_load(textsrc *ts, const textsrc_spec *spec, const char *model_dir, size_t vocab_size, as_err *err) {
    memset(ts, 0, sizeof *ts);
    if (!spec->path || !spec->path[0]) return as_fail(err, "text.path: empty");
    snprintf(ts->path, sizeof ts->path, "%s", spec->path);
    if (vocab_size == 0 || vocab_size > (size_t)INT32_MAX) return as_fail(err, "%s: model vocab_size %zu is not usable", spec->path, vocab_size);
    if (spec->format == TEXTSRC_TEXT) return load_text(ts, spec, model_dir, vocab_size, err);
    if (spec->format == TEXTSRC_TOKENS) return load_tokens(ts, spec, vocab_size, err);
    return as_fail(err, "%s: unknown text format %d", spec->path, (int)spec->format);
}

void textsrc_free(textsrc *ts) {
    free(ts->tokens);
    ts->tokens = NULL;
    ts->n_tokens = 0;
}

int64_t textsrc_window_start(int64_t offset, int64_t stride, int64_t w) { return offset + w * stride; }

void textsrc_window_starts(int64_t *starts, int64_t count, int64_t offset, int64_t stride) {
    for (int64_t w = 0; w < count; w++) starts[w] = textsrc_window_start(offset, stride, w);
}

int textsrc_check_fit(const textsrc *ts, int64_t count, int64_t offset, int64_t stride, int64_t max_L, as_err *err) {
    if (count < 1 || offset < 0 || stride < 0 || max_L < 1)
        return as_fail(err, "%s: windows need count >= 1, offset >= 0, stride >= 0 and L >= 1 (got count %lld, offset %lld, stride %lld, L %lld)",
                       ts->path, (long long)count, (long long)offset, (long long)stride, (long long)max_L);
    /* needed = offset + (count - 1) * stride + max_L, in 128 bits' worth of care */
    double approx = (double)offset + (double)(count - 1) * (double)stride + (double)max_L;
    int64_t needed = approx > 9e18 ? INT64_MAX : offset + (count - 1) * stride + max_L;
    if ((uint64_t)needed > (uint64_t)ts->n_tokens)
        return as_fail(err, "%s: has %zu tokens, the windows need %lld (offset %lld + (count %lld - 1) * stride %lld + L %lld)",
                       ts->path, ts->n_tokens, (long long)needed, (long long)offset, (long long)count, (long long)stride,
                       (long long)max_L);
    return 0;
}

const int32_t *textsrc_window(const textsrc *ts, int64_t start, int64_t L) {
    if (start < 0 || L < 0 || (uint64_t)start > ts->n_tokens || (uint64_t)L > ts->n_tokens - (uint64_t)start) return NULL;
    return ts->tokens + start;
}
