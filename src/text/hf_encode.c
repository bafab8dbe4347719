/* hf_encode.c -- encoding with a tokenizer.json, in Hugging Face tokenizers' order:
 *   0. invalid UTF-8 becomes U+FFFD, one per maximal subpart (what a decoder with
 *      errors="replace" hands to Python's or Node's tokenizers: the library takes strings);
 *   1. the BOS, when on (tokenizer_set_add_bos; the rule is in docs/tokenizers.md);
 *   2. added tokens (special or not) are found in the text, leftmost then longest first, and
 *      become their ids; the text between them is a segment;
 *   3. each segment is normalized (NFC, Prepend, Replace in the file's order); the added tokens
 *      marked "normalized" are found in it likewise; what lies between them is pre-tokenized
 *      (ByteLevel's prefix space, then the Split pattern) into pieces;
 *   4. each piece is one BPE word: byte-level pieces start from their bytes, others from their
 *      characters (a character outside the vocabulary becomes its "<0xXX>" byte tokens with
 *      byte_fallback, else unk_token); with ignore_merges a piece that is a token is that token. */
#include <stdlib.h>
#include <string.h>

#include "hf_int.h"
#include "nfc_int.h"

static int grow(uint8_t **b, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    uint8_t *g = realloc(*b, c);
    if (!g) return -1;
    *b = g;
    *cap = c;
    return 0;
}

static int push_id(struct tk_hf *hf, int32_t id) {
    if (hf->n_ids == hf->ids_cap) {
        size_t c = hf->ids_cap ? 2 * hf->ids_cap : 4096;
        int32_t *g = realloc(hf->ids, c * sizeof *g);
        if (!g) return -1;
        hf->ids = g;
        hf->ids_cap = c;
    }
    hf->ids[hf->n_ids++] = id;
    return 0;
}

/* Valid UTF-8 of s[0..n) into out (room for 3n): each maximal ill-formed subpart (Unicode
 * chapter 3.9, "U+FFFD substitution of maximal subparts", as WHATWG's decoder does) is U+FFFD. */
static size_t clean_utf8(const uint8_t *s, size_t n, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        if (b < 0x80) { out[o++] = b; i++; continue; }
        int need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
        uint8_t lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80, hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
        size_t j = i + 1;
        int k = 0;
        for (; k < need && j < n; k++, j++) {
            if (s[j] < (k ? 0x80 : lo) || s[j] > (k ? 0xBF : hi)) break;
        }
        if (need && k == need) { memcpy(out + o, s + i, j - i); o += j - i; }
        else { memcpy(out + o, "\xEF\xBF\xBD", 3); o += 3; }
        i = need ? j : i + 1;
    }
    return o;
}

static inline size_t utf8_len(uint8_t b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

/* ------------------------------------------------------------------------ BPE */

static long bpe_bytes(tokenizer *t, const uint8_t *p, size_t n, int32_t *dst) {
    if (t->hf->ignore_merges) {
        int32_t id = tk_hf_lookup(t->hf, p, n);
        if (id >= 0) return dst[0] = id, 1;
    }
    for (size_t i = 0; i < n; i++) dst[i] = t->byte_id[p[i]];
    return tk_bpe_ids(t, dst, n);
}

static long bpe_chars(tokenizer *t, const uint8_t *p, size_t n, int32_t *dst) {
    const struct tk_hf *hf = t->hf;
    if (hf->ignore_merges) {
        int32_t id = tk_hf_lookup(hf, p, n);
        if (id >= 0) return dst[0] = id, 1;
    }
    size_t k = 0;
    int prev_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(p[i]);
        if (l > n - i) l = n - i;
        int32_t id = tk_hf_lookup(hf, p + i, l);
        int bytes = id < 0 && hf->byte_fallback;
        for (size_t b = 0; bytes && b < l; b++) bytes = hf->fallback_id[p[i + b]] >= 0;
        if (id >= 0) dst[k++] = id;
        else if (bytes) for (size_t b = 0; b < l; b++) dst[k++] = hf->fallback_id[p[i + b]];
        else if (hf->unk_id >= 0 && !(hf->fuse_unk && prev_unk)) dst[k++] = hf->unk_id;
        prev_unk = id < 0 && !bytes;
        i += l;
    }
    return tk_bpe_ids(t, dst, k);
}

/* ------------------------------------------------------------------ segments */

/* Applies normalizer d to s[0..n) into *out; returns the new length or (size_t)-1. */
static size_t normalize(const hf_norm *d, const uint8_t *s, size_t n, uint8_t **out, size_t *cap) {
    if (d->kind == HF_NORM_NFC) {
        if (tk_nfc_quick_yes(s, n)) {
            if (grow(out, cap, n + 1)) return (size_t)-1;
            memcpy(*out, s, n);
            return n;
        }
        size_t m;
        return tk_nfc(s, n, out, &m, cap) ? (size_t)-1 : m;
    }
    if (d->kind == HF_NORM_PREPEND) {
        if (grow(out, cap, n + d->a_len + 1)) return (size_t)-1;
        if (!n) return 0; /* an empty text stays empty */
        memcpy(*out, d->a, d->a_len);
        memcpy(*out + d->a_len, s, n);
        return n + d->a_len;
    }
    size_t hits = 0;
    for (size_t i = 0; i + d->a_len <= n;)
        if (!memcmp(s + i, d->a, d->a_len)) { hits++; i += d->a_len; }
        else i++;
    if (grow(out, cap, n + hits * d->b_len + 1)) return (size_t)-1;
    size_t o = 0;
    for (size_t i = 0; i < n;)
        if (i + d->a_len <= n && !memcmp(s + i, d->a, d->a_len)) { memcpy(*out + o, d->b, d->b_len); o += d->b_len; i += d->a_len; }
        else (*out)[o++] = s[i++];
    return o;
}

static size_t piece_end(int split, const char *s, size_t n, size_t pos) {
    switch (split) {
    case HF_SPLIT_GPT2: return tokenizer_piece_end(s, n, pos);
    case HF_SPLIT_LLAMA3: return tk_split_llama3_end(s, n, pos, 3);
    case HF_SPLIT_QWEN2: return tk_split_llama3_end(s, n, pos, 1);
    case HF_SPLIT_META: /* before the next "▁" that follows another character */
        for (size_t i = pos + 1; i + 3 <= n; i++)
            if (!memcmp(s + i, "\xE2\x96\x81", 3) && !(i >= pos + 3 && !memcmp(s + i - 3, "\xE2\x96\x81", 3))) return i;
        return n;
    default: return n;
    }
}

const uint8_t *tk_hf_normalized(struct tk_hf *hf, const uint8_t *s, size_t *n) {
    int cur = -1; /* which work buffer holds the text; -1: s itself */
    for (int i = 0; i < hf->n_norm; i++) {
        int dst = cur == 1 ? 2 : 1;
        size_t m = normalize(&hf->norm[i], s, *n, &hf->buf[dst], &hf->buf_cap[dst]);
        if (m == (size_t)-1) return NULL;
        cur = dst;
        s = hf->buf[dst];
        *n = m;
    }
    return s;
}

/* One piece of normalized text without added tokens: ByteLevel's prefix space (HF adds it to
 * each such piece that does not start with a space), the Split, each word's BPE. */
static int encode_words(tokenizer *t, const uint8_t *s, size_t n, as_err *err) {
    struct tk_hf *hf = t->hf;
    if (!n) return 0;
    if (hf->prefix_space && s[0] != ' ') {
        if (grow(&hf->buf[3], &hf->buf_cap[3], n + 2)) return as_fail(err, "tokenizer_encode: out of memory");
        hf->buf[3][0] = ' ';
        memcpy(hf->buf[3] + 1, s, n++);
        s = hf->buf[3];
    }
    tk_piece_fn bpe = hf->byte_level ? bpe_bytes : bpe_chars;
    for (size_t pos = 0; pos < n;) {
        size_t end = piece_end(hf->split, (const char *)s, n, pos);
        if (end <= pos || end > n) return as_fail(err, "tokenizer_encode: internal error: empty piece at byte %zu", pos);
        size_t need = hf->n_ids + (end - pos);
        if (need > hf->ids_cap) {
            size_t c = hf->ids_cap ? hf->ids_cap : 4096;
            while (c < need) c *= 2;
            int32_t *g = realloc(hf->ids, c * sizeof *g);
            if (!g) return as_fail(err, "tokenizer_encode: out of memory for %zu tokens", need);
            hf->ids = g;
            hf->ids_cap = c;
        }
        long got = tk_piece_cached(t, s + pos, end - pos, hf->ids + hf->n_ids, bpe);
        if (got < 0) return as_fail(err, "tokenizer_encode: out of memory for a piece of %zu bytes", end - pos);
        hf->n_ids += (size_t)got;
        pos = end;
    }
    return 0;
}

/* The longest added token of the kind asked (normalized or not) at s[pos..n), or NULL. */
static const hf_added *added_at(const struct tk_hf *hf, const uint8_t *s, size_t n, size_t pos, int normalized) {
    const hf_added *best = NULL;
    for (size_t i = 0; i < hf->n_added; i++) {
        const hf_added *a = &hf->added[i];
        if (a->normalized == normalized && a->len && a->len <= n - pos && (!best || a->len > best->len) &&
            !memcmp(s + pos, a->s, a->len))
            best = a;
    }
    return best;
}

/* Calls words(t, piece) on each piece of s[0..n) between the added tokens of the kind asked,
 * leftmost first and the longest at a position (HF's LeftmostLongest), pushing their ids. */
typedef int (*piece_fn)(tokenizer *t, const uint8_t *s, size_t n, as_err *err);
static int split_added(tokenizer *t, const uint8_t *s, size_t n, int normalized, piece_fn words, as_err *err) {
    struct tk_hf *hf = t->hf;
    uint8_t bit = normalized ? HF_ADDED_NORM : HF_ADDED_RAW;
    size_t seg = 0;
    for (size_t pos = 0; pos < n;) {
        const hf_added *a = hf->added_first[s[pos]] & bit ? added_at(hf, s, n, pos, normalized) : NULL;
        if (!a) { pos++; continue; }
        if (words(t, s + seg, pos - seg, err)) return -1;
        if (push_id(hf, a->id)) return as_fail(err, "tokenizer_encode: out of memory");
        pos += a->len;
        seg = pos;
    }
    return words(t, s + seg, n - seg, err);
}

/* A segment between the text's added tokens: normalized, then split at the normalized added
 * tokens, which HF looks for only in the normalized text. */
static int encode_segment(tokenizer *t, const uint8_t *s, size_t n, as_err *err) {
    struct tk_hf *hf = t->hf;
    if (!n) return 0;
    const uint8_t *z = tk_hf_normalized(hf, s, &n);
    if (!z) return as_fail(err, "tokenizer_encode: out of memory normalizing %zu bytes", n);
    return hf->n_added_norm ? split_added(t, z, n, 1, encode_words, err) : encode_words(t, z, n, err);
}

/* Encodes into hf->ids[0..hf->n_ids). */
static int encode(tokenizer *t, const char *text, size_t len, as_err *err) {
    struct tk_hf *hf = t->hf;
    hf->n_ids = 0;
    if (len > SIZE_MAX / 4 || grow(&hf->buf[0], &hf->buf_cap[0], 3 * len + 1))
        return as_fail(err, "tokenizer_encode: out of memory for a text of %zu bytes", len);
    size_t n = clean_utf8((const uint8_t *)text, len, hf->buf[0]);
    if (hf->add_bos && push_id(hf, hf->bos_id)) return as_fail(err, "tokenizer_encode: out of memory");
    return split_added(t, hf->buf[0], n, 0, encode_segment, err);
}

int tk_hf_encode(tokenizer *t, const char *text, size_t len, int32_t *out, size_t out_cap, size_t *n_out, as_err *err) {
    if (encode(t, text, len, err)) return -1;
    struct tk_hf *hf = t->hf;
    if (hf->n_ids > out_cap)
        return as_fail(err, "tokenizer_encode: output buffer of %zu ids too small for %zu (tokenizer_encode_alloc sizes it)",
                       out_cap, hf->n_ids);
    if (hf->n_ids) memcpy(out, hf->ids, hf->n_ids * sizeof *out); /* empty text: ids may be NULL */
    *n_out = hf->n_ids;
    return 0;
}

int tk_hf_encode_alloc(tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n_out, as_err *err) {
    if (encode(t, text, len, err)) return -1;
    struct tk_hf *hf = t->hf;
    *ids = malloc((hf->n_ids ? hf->n_ids : 1) * sizeof **ids);
    if (!*ids) return as_fail(err, "tokenizer_encode: out of memory for %zu tokens", hf->n_ids);
    if (hf->n_ids) memcpy(*ids, hf->ids, hf->n_ids * sizeof **ids); /* empty text: ids may be NULL */
    *n_out = hf->n_ids;
    return 0;
}
