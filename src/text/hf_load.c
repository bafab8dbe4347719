/* hf_load.c -- reading a Hugging Face tokenizer.json (and tokenizer_config.json) into a tokenizer.
 *
 * Supported (docs/tokenizers.md): model BPE (vocab, merges as "a b" strings or [a, b] lists,
 * byte_fallback, unk_token, fuse_unk, ignore_merges), added_tokens (normalized or not), normalizers NFC, Prepend,
 * Replace (a String pattern) and Sequences of them, pre-tokenizers ByteLevel and Split with the
 * GPT-2, Llama 3 or Qwen2 pattern followed by ByteLevel; the BOS from tokenizer_config.json's
 * add_bos_token or the post_processor's TemplateProcessing. Anything else is refused in one line
 * naming the field and its value. The decoder, truncation and padding are not read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "hf_int.h"
#include "json.h"
#include "sha256.h"

static const char *const split_patterns[] = {
    [HF_SPLIT_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    [HF_SPLIT_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                        "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [HF_SPLIT_QWEN2] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                       "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

typedef struct {
    tokenizer *t;
    struct tk_hf *hf;
    const char *path;
    as_err *err;
} loader;

/* The string member key of obj, or NULL. */
static const char *str_of(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->u.string.ptr : NULL;
}
static int bool_of(const json_value *obj, const char *key, int dflt) {
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_TRUE ? 1 : v && v->type == JSON_FALSE ? 0 : dflt;
}
static int refuse(loader *L, const char *field, const char *value, const char *why) {
    return as_fail(L->err, "%s: %s = %s is not supported (%s)", L->path, field, value ? value : "(missing)", why);
}

/* ---------------------------------------------------------------- normalizer */

static int add_norm(loader *L, const json_value *n, const char *field) {
    const char *type = str_of(n, "type");
    struct tk_hf *hf = L->hf;
    if (hf->n_norm == HF_MAX_NORMS) return refuse(L, field, "a longer Sequence", "at most 8 normalizers");
    hf_norm *d = &hf->norm[hf->n_norm];
    if (type && !strcmp(type, "NFC")) {
        d->kind = HF_NORM_NFC;
    } else if (type && !strcmp(type, "Prepend")) {
        const json_value *p = json_get(n, "prepend");
        if (!p || p->type != JSON_STRING) return refuse(L, field, "Prepend without a \"prepend\" string", "malformed");
        d->kind = HF_NORM_PREPEND;
        d->a = strdup(p->u.string.ptr);
        d->a_len = p->u.string.len;
    } else if (type && !strcmp(type, "Replace")) {
        const json_value *pat = json_get(n, "pattern"), *c = json_get(n, "content");
        const json_value *s = json_get(pat, "String");
        if (!s || s->type != JSON_STRING || !s->u.string.len)
            return refuse(L, field, "Replace with a Regex pattern", "only a non-empty String pattern");
        if (!c || c->type != JSON_STRING) return refuse(L, field, "Replace without \"content\"", "malformed");
        d->kind = HF_NORM_REPLACE;
        d->a = strdup(s->u.string.ptr);
        d->a_len = s->u.string.len;
        d->b = strdup(c->u.string.ptr);
        d->b_len = c->u.string.len;
    } else if (type && !strcmp(type, "Sequence")) {
        const json_value *list = json_get(n, "normalizers");
        if (!list || list->type != JSON_ARRAY) return refuse(L, field, "Sequence without \"normalizers\"", "malformed");
        for (size_t i = 0; i < list->u.array.count; i++)
            if (add_norm(L, &list->u.array.items[i], field)) return -1;
        return 0;
    } else {
        return refuse(L, field, type ? type : "(no type)", "NFC, Prepend, Replace and Sequence are");
    }
    if ((d->kind != HF_NORM_NFC && !d->a) || (d->kind == HF_NORM_REPLACE && !d->b))
        return as_fail(L->err, "%s: out of memory", L->path);
    hf->n_norm++;
    return 0;
}

/* ------------------------------------------------------------- pre_tokenizer */

static int byte_level(loader *L, const json_value *p, int alone) {
    L->hf->byte_level = 1;
    L->hf->prefix_space = bool_of(p, "add_prefix_space", 1);
    int use_regex = bool_of(p, "use_regex", 1);
    if (!alone && (use_regex || L->hf->prefix_space))
        return refuse(L, "pre_tokenizer.pretokenizers[1]", "ByteLevel with use_regex or add_prefix_space after a Split",
                      "after a Split only ByteLevel(add_prefix_space false, use_regex false)");
    if (use_regex) L->hf->split = HF_SPLIT_GPT2;
    return 0;
}

static int split_rule(loader *L, const json_value *p) {
    const char *re = str_of(json_get(p, "pattern"), "Regex"), *beh = str_of(p, "behavior");
    if (!re) return refuse(L, "pre_tokenizer.pretokenizers[0].pattern", "a String pattern", "only a Regex");
    for (int k = HF_SPLIT_GPT2; k <= HF_SPLIT_QWEN2; k++)
        if (!strcmp(re, split_patterns[k])) L->hf->split = k;
    if (L->hf->split == HF_SPLIT_NONE)
        return refuse(L, "pre_tokenizer.pretokenizers[0].pattern.Regex", re, "only the GPT-2, Llama 3 and Qwen2 patterns");
    if (!beh || strcmp(beh, "Isolated")) return refuse(L, "pre_tokenizer.pretokenizers[0].behavior", beh, "only Isolated");
    if (bool_of(p, "invert", 0)) return refuse(L, "pre_tokenizer.pretokenizers[0].invert", "true", "only false");
    return 0;
}

static int load_pre_tokenizer(loader *L, const json_value *p) {
    if (!p || p->type == JSON_NULL) return 0;
    const char *type = str_of(p, "type");
    if (type && !strcmp(type, "ByteLevel")) return byte_level(L, p, 1);
    if (type && !strcmp(type, "Sequence")) {
        const json_value *list = json_get(p, "pretokenizers");
        if (!list || list->type != JSON_ARRAY) return refuse(L, "pre_tokenizer", "Sequence without \"pretokenizers\"", "malformed");
        size_t n = list->u.array.count;
        const json_value *it = list->u.array.items;
        /* a member we do not implement (Metaspace, Digits, Punctuation, ...) is named itself */
        for (size_t i = 0; i < n; i++) {
            const char *ti = str_of(&it[i], "type");
            if (ti && (!strcmp(ti, "Split") || !strcmp(ti, "ByteLevel"))) continue;
            char field[64];
            snprintf(field, sizeof field, "pre_tokenizer.pretokenizers[%zu].type", i);
            return refuse(L, field, ti, "inside a Sequence only Split and ByteLevel are implemented");
        }
        if (n == 1 && !strcmp(str_of(&it[0], "type"), "ByteLevel")) return byte_level(L, &it[0], 1);
        if (n != 2 || strcmp(str_of(&it[0], "type"), "Split") || strcmp(str_of(&it[1], "type"), "ByteLevel"))
            return refuse(L, "pre_tokenizer", "this Sequence", "only [Split, ByteLevel] or [ByteLevel]");
        if (split_rule(L, &it[0])) return -1;
        return byte_level(L, &it[1], 0);
    }
    return refuse(L, "pre_tokenizer.type", type, "ByteLevel, a Sequence of Split and ByteLevel, or null");
}

/* -------------------------------------------------------------------- vocab */

static int index_put(struct tk_hf *hf, int32_t id) {
    size_t k = tk_hash_bytes(hf->sym_pool + hf->sym_off[id], hf->sym_len[id]) & hf->vix_mask;
    while (hf->vix[k] >= 0) {
        int32_t o = hf->vix[k];
        if (hf->sym_len[o] == hf->sym_len[id] && !memcmp(hf->sym_pool + hf->sym_off[o], hf->sym_pool + hf->sym_off[id], hf->sym_len[id]))
            return -1;
        k = (k + 1) & hf->vix_mask;
    }
    hf->vix[k] = id;
    return 0;
}

int32_t tk_hf_lookup(const struct tk_hf *hf, const uint8_t *s, size_t n) {
    size_t k = tk_hash_bytes(s, n) & hf->vix_mask;
    for (;;) {
        int32_t id = hf->vix[k];
        if (id < 0 || (hf->sym_len[id] == n && !memcmp(hf->sym_pool + hf->sym_off[id], s, n))) return id;
        k = (k + 1) & hf->vix_mask;
    }
}

/* The largest id of model.vocab and added_tokens, + 1. */
static int count_ids(loader *L, const json_value *vocab, const json_value *added, size_t *n_ids) {
    int64_t max = -1, id;
    for (size_t i = 0; i < vocab->u.object.count; i++) {
        const json_member *m = &vocab->u.object.members[i];
        if (json_get_int64(&m->value, &id) || id < 0 || id >= INT32_MAX)
            return as_fail(L->err, "%s: model.vocab[\"%.60s\"]: the id must be an integer in [0, 2^31)", L->path, m->key);
        if (id > max) max = id;
    }
    for (size_t i = 0; added && i < added->u.array.count; i++) {
        const json_value *v = json_get(&added->u.array.items[i], "id");
        if (!v || json_get_int64(v, &id) || id < 0 || id >= INT32_MAX)
            return as_fail(L->err, "%s: added_tokens[%zu].id must be an integer in [0, 2^31)", L->path, i);
        if (id > max) max = id;
    }
    *n_ids = (size_t)(max + 1);
    return 0;
}

/* A token's bytes when decoded: byte-level strings mapped back; SentencePiece-style "▁" is a
 * space and "<0xXX>" (with byte_fallback) the byte XX. Returns the length written to out. */
static size_t decoded(const struct tk_hf *hf, const int cp_to_byte[324], const uint8_t *s, size_t n, uint8_t *out) {
    if (hf->byte_level) return tk_byte_level_to_bytes(cp_to_byte, s, n, out);
    unsigned x;
    if (hf->byte_fallback && n == 6 && sscanf((const char *)s, "<0x%2X>", &x) == 1 && s[5] == '>') {
        out[0] = (uint8_t)x;
        return 1;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;)
        if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) { out[o++] = ' '; i += 3; }
        else out[o++] = s[i++];
    return o;
}

/* 1 when s[0..n) is the content of one of the added tokens. */
static int is_added(const json_value *added, const char *s, size_t n) {
    for (size_t i = 0; added && i < added->u.array.count; i++) {
        const json_value *c = json_get(&added->u.array.items[i], "content");
        if (c && c->type == JSON_STRING && c->u.string.len == n && !memcmp(c->u.string.ptr, s, n)) return 1;
    }
    return 0;
}

static int load_vocab(loader *L, const json_value *vocab, const json_value *added) {
    tokenizer *t = L->t;
    struct tk_hf *hf = L->hf;
    if (!vocab || vocab->type != JSON_OBJECT) return refuse(L, "model.vocab", "not an object", "a {\"token\": id} object");
    if (count_ids(L, vocab, added, &t->n_ids)) return -1;
    size_t count = vocab->u.object.count, pool_cap = 1, cap = 1;
    for (size_t i = 0; i < count; i++) pool_cap += vocab->u.object.members[i].key_len;
    for (size_t i = 0; added && i < added->u.array.count; i++) {
        const json_value *c = json_get(&added->u.array.items[i], "content");
        if (!c || c->type != JSON_STRING || !c->u.string.len)
            return as_fail(L->err, "%s: added_tokens[%zu].content must be a non-empty string", L->path, i);
        pool_cap += c->u.string.len;
    }
    while (cap < 2 * count + 2) cap <<= 1;
    t->pool = malloc(pool_cap);
    t->tok_off = calloc(t->n_ids, sizeof *t->tok_off);
    t->tok_len = calloc(t->n_ids, sizeof *t->tok_len);
    hf->sym_pool = malloc(pool_cap);
    hf->sym_off = calloc(t->n_ids, sizeof *hf->sym_off);
    hf->sym_len = calloc(t->n_ids, sizeof *hf->sym_len);
    hf->vix = malloc(cap * sizeof *hf->vix);
    hf->vix_mask = cap - 1;
    if (!t->pool || !t->tok_off || !t->tok_len || !hf->sym_pool || !hf->sym_off || !hf->sym_len || !hf->vix)
        return as_fail(L->err, "%s: out of memory", L->path);
    memset(hf->vix, 0xFF, cap * sizeof *hf->vix);
    int cp_to_byte[324];
    uint32_t byte_to_cp[256];
    uint8_t order[256];
    tk_byte_unicode_tables(byte_to_cp, cp_to_byte, order);
    size_t sym_len = 0;
    for (size_t i = 0; i < count; i++) {
        const json_member *m = &vocab->u.object.members[i];
        int64_t id;
        json_get_int64(&m->value, &id);
        size_t n = decoded(hf, cp_to_byte, (const uint8_t *)m->key, m->key_len, t->pool + t->pool_len);
        if ((n == (size_t)-1 || n == 0) && is_added(added, m->key, m->key_len))
            continue; /* e.g. GPT-NeoX's "  ": no BPE word can reach it; the added token stands */
        if (n == (size_t)-1 || n == 0)
            return as_fail(L->err, "%s: model.vocab: token \"%.60s\" is not GPT-2 byte-level text (the pre_tokenizer is ByteLevel)", L->path, m->key);
        if (t->tok_len[id]) return as_fail(L->err, "%s: model.vocab: id %lld appears twice", L->path, (long long)id);
        t->tok_off[id] = t->pool_len;
        t->tok_len[id] = (uint32_t)n;
        hf->sym_off[id] = sym_len;
        if (hf->byte_level) memcpy(hf->sym_pool + sym_len, t->pool + t->pool_len, n);
        else memcpy(hf->sym_pool + sym_len, m->key, n = m->key_len);
        hf->sym_len[id] = (uint32_t)n;
        sym_len += n;
        t->pool_len += t->tok_len[id];
        if (t->tok_len[id] > t->max_token_len) t->max_token_len = t->tok_len[id];
        if (index_put(hf, (int32_t)id)) return as_fail(L->err, "%s: model.vocab: token \"%.60s\" appears twice", L->path, m->key);
    }
    hf->n_sym = count;
    return 0;
}

/* ------------------------------------------------------------------- merges */

/* The two halves of merges[i]: "a b" or ["a", "b"]. */
static int split_merge(loader *L, const json_value *m, size_t i, const char **a, size_t *al, const char **b, size_t *bl) {
    if (m->type == JSON_ARRAY && m->u.array.count == 2 && m->u.array.items[0].type == JSON_STRING &&
        m->u.array.items[1].type == JSON_STRING) {
        *a = m->u.array.items[0].u.string.ptr, *al = m->u.array.items[0].u.string.len;
        *b = m->u.array.items[1].u.string.ptr, *bl = m->u.array.items[1].u.string.len;
        return 0;
    }
    const char *sp = m->type == JSON_STRING ? strchr(m->u.string.ptr, ' ') : NULL;
    if (!sp || strchr(sp + 1, ' ') || sp == m->u.string.ptr || !sp[1])
        return as_fail(L->err, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", L->path, i);
    *a = m->u.string.ptr, *al = (size_t)(sp - m->u.string.ptr);
    *b = sp + 1, *bl = m->u.string.len - *al - 1;
    return 0;
}

static int load_merges(loader *L, const json_value *merges) {
    tokenizer *t = L->t;
    struct tk_hf *hf = L->hf;
    if (!merges || merges->type != JSON_ARRAY) return refuse(L, "model.merges", "not a list", "a list of merges");
    size_t n = merges->u.array.count, cap = 2, longest = 0;
    while (cap < 2 * n + 2) cap <<= 1;
    for (size_t i = 0; i < n; i++) { /* a merge's text is at least as long as its tokens' bytes */
        const json_value *m = &merges->u.array.items[i];
        size_t l = m->type == JSON_STRING ? m->u.string.len
                   : m->type == JSON_ARRAY && m->u.array.count == 2 && m->u.array.items[0].type == JSON_STRING &&
                           m->u.array.items[1].type == JSON_STRING
                       ? m->u.array.items[0].u.string.len + m->u.array.items[1].u.string.len
                       : 0;
        if (l > longest) longest = l;
    }
    t->merges = malloc(cap * sizeof *t->merges);
    t->merge_mask = cap - 1;
    uint8_t *ab = malloc(2 * longest + 2), *buf = malloc(longest + 1);
    int cp_to_byte[324];
    uint32_t byte_to_cp[256];
    uint8_t order[256];
    tk_byte_unicode_tables(byte_to_cp, cp_to_byte, order);
    int rc = -1;
    if (!t->merges || !ab || !buf) { as_fail(L->err, "%s: out of memory", L->path); goto done; }
    for (size_t k = 0; k < cap; k++) t->merges[k].key = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *a = "", *b = "";
        size_t al = 0, bl = 0;
        if (split_merge(L, &merges->u.array.items[i], i, &a, &al, &b, &bl)) goto done;
        size_t la = hf->byte_level ? tk_byte_level_to_bytes(cp_to_byte, (const uint8_t *)a, al, buf) : al;
        if (la == (size_t)-1) goto missing;
        memcpy(ab, hf->byte_level ? buf : (const uint8_t *)a, la);
        size_t lb = hf->byte_level ? tk_byte_level_to_bytes(cp_to_byte, (const uint8_t *)b, bl, buf) : bl;
        if (lb == (size_t)-1) goto missing;
        memcpy(ab + la, hf->byte_level ? buf : (const uint8_t *)b, lb);
        int32_t ia = tk_hf_lookup(hf, ab, la), ib = tk_hf_lookup(hf, ab + la, lb), iab = tk_hf_lookup(hf, ab, la + lb);
        if (ia < 0 || ib < 0 || iab < 0) goto missing;
        uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        size_t k = hash_u64(key) & t->merge_mask;
        while (t->merges[k].key != UINT64_MAX && t->merges[k].key != key) k = (k + 1) & t->merge_mask;
        if (t->merges[k].key == UINT64_MAX) *(&t->merges[k]) = (merge_slot){key, (uint32_t)i, iab};
        continue;
    missing:
        as_fail(L->err, "%s: model.merges[%zu] (\"%.40s\" + \"%.40s\") names a token missing from model.vocab", L->path, i, a, b);
        goto done;
    }
    rc = 0;
done:
    free(ab);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------- added tokens */

/* An added token with "normalized": true is what HF's library looks for in the normalized
 * text: its content through the normalizers (unchanged by NFC for GPT-NeoX's runs of
 * spaces). One that normalizes to nothing never matches (len 0). */
static int normalized_added(loader *L, hf_added *d) {
    size_t n = d->len;
    const uint8_t *z = tk_hf_normalized(L->hf, d->s, &n);
    uint8_t *copy = z ? malloc(n + 1) : NULL;
    if (!copy) return as_fail(L->err, "%s: out of memory", L->path);
    memcpy(copy, z, n);
    d->s = copy, d->len = n, d->normalized = d->owned = 1;
    L->hf->n_added_norm++;
    return 0;
}

static int load_added(loader *L, const json_value *added) {
    tokenizer *t = L->t;
    struct tk_hf *hf = L->hf;
    if (!added || added->type == JSON_NULL) return 0;
    if (added->type != JSON_ARRAY) return refuse(L, "added_tokens", "not a list", "a list of tokens");
    hf->added = calloc(added->u.array.count + 1, sizeof *hf->added);
    if (!hf->added) return as_fail(L->err, "%s: out of memory", L->path);
    static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
    for (size_t i = 0; i < added->u.array.count; i++) {
        const json_value *a = &added->u.array.items[i], *c = json_get(a, "content");
        for (int f = 0; f < 3; f++)
            if (bool_of(a, flags[f], 0)) {
                char field[64];
                snprintf(field, sizeof field, "added_tokens[%zu].%s", i, flags[f]);
                return refuse(L, field, "true", "added tokens are matched exactly, without stripping");
            }
        int64_t id;
        json_get_int64(json_get(a, "id"), &id);
        hf_added *d = &hf->added[hf->n_added++];
        d->s = (uint8_t *)t->pool + t->pool_len;
        d->len = c->u.string.len;
        d->id = (int32_t)id;
        memcpy(d->s, c->u.string.ptr, d->len);
        /* an added token decodes as its content, whatever the vocabulary holds for its id */
        t->tok_off[id] = t->pool_len;
        t->tok_len[id] = (uint32_t)d->len;
        t->pool_len += d->len;
        if (d->len > t->max_token_len) t->max_token_len = d->len;
        if (bool_of(a, "normalized", 0) && normalized_added(L, d)) return -1;
        if (d->len) hf->added_first[d->s[0]] |= d->normalized ? HF_ADDED_NORM : HF_ADDED_RAW;
    }
    return 0;
}

/* ---------------------------------------------------------------- the model */

static int32_t id_of(const struct tk_hf *hf, const tokenizer *t, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < hf->n_added; i++)
        if (hf->added[i].len == n && !memcmp(hf->added[i].s, s, n)) return hf->added[i].id;
    if (hf->byte_level) { /* model strings are bytes here: compare the decoded pool */
        for (size_t id = 0; id < t->n_ids; id++)
            if (t->tok_len[id] == n && !memcmp(t->pool + t->tok_off[id], s, n)) return (int32_t)id;
        return -1;
    }
    return tk_hf_lookup(hf, (const uint8_t *)s, n);
}

static int load_model(loader *L, const json_value *model, const json_value *added) {
    struct tk_hf *hf = L->hf;
    tokenizer *t = L->t;
    const char *type = str_of(model, "type");
    if (!type || strcmp(type, "BPE")) return refuse(L, "model.type", type, "only BPE");
    const json_value *drop = json_get(model, "dropout");
    if (drop && drop->type == JSON_NUMBER && drop->u.number != 0)
        return refuse(L, "model.dropout", "a non-zero value", "dropout makes the encoding random");
    static const char *const affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const char *v = str_of(model, affix[k]);
        if (v && v[0]) { char f[48]; snprintf(f, sizeof f, "model.%s", affix[k]); return refuse(L, f, v, "only null or \"\""); }
    }
    hf->byte_fallback = bool_of(model, "byte_fallback", 0);
    hf->ignore_merges = bool_of(model, "ignore_merges", 0);
    hf->fuse_unk = bool_of(model, "fuse_unk", 0);
    if (load_vocab(L, json_get(model, "vocab"), added) || load_merges(L, json_get(model, "merges")) ||
        load_added(L, added))
        return -1;
    const char *unk = str_of(model, "unk_token");
    hf->unk_id = unk ? id_of(hf, t, unk) : -1;
    if (unk && hf->unk_id < 0) return refuse(L, "model.unk_token", unk, "it is not in the vocabulary");
    for (int b = 0; b < 256; b++) {
        uint8_t one = (uint8_t)b;
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        hf->fallback_id[b] = hf->byte_fallback ? tk_hf_lookup(hf, (const uint8_t *)hex, 6) : -1;
        t->byte_id[b] = hf->byte_level ? tk_hf_lookup(hf, &one, 1) : -1;
        if (hf->byte_level && t->byte_id[b] < 0)
            return as_fail(L->err, "%s: model.vocab has no token for byte 0x%02X (a ByteLevel vocabulary has all 256)", L->path, b);
    }
    return 0;
}

/* ---------------------------------------------------------------------- BOS */

/* The special token a TemplateProcessing puts before the text ("single"), if any. */
static int template_bos(loader *L, const json_value *tp, int32_t *bos) {
    const json_value *single = json_get(tp, "single"), *specials = json_get(tp, "special_tokens");
    if (!single || single->type != JSON_ARRAY) return refuse(L, "post_processor.single", "not a list", "malformed");
    int seen_text = 0;
    for (size_t i = 0; i < single->u.array.count; i++) {
        const json_value *it = &single->u.array.items[i], *sp = json_get(it, "SpecialToken");
        if (json_get(it, "Sequence")) { seen_text = 1; continue; }
        const char *name = str_of(sp, "id");
        if (!name) return refuse(L, "post_processor.single", "an item neither SpecialToken nor Sequence", "malformed");
        if (seen_text || *bos >= 0)
            return refuse(L, "post_processor.single", name, "only one special token, before the text (a BOS)");
        const json_value *ids = json_get(json_get(specials, name), "ids");
        int64_t id;
        if (!ids || ids->type != JSON_ARRAY || ids->u.array.count != 1 || json_get_int64(&ids->u.array.items[0], &id) ||
            id < 0 || (size_t)id >= L->t->n_ids)
            return refuse(L, "post_processor.special_tokens", name, "one id in the vocabulary per token");
        *bos = (int32_t)id;
    }
    return 0;
}

static int post_processor_bos(loader *L, const json_value *p, int32_t *bos) {
    if (!p || p->type == JSON_NULL) return 0;
    const char *type = str_of(p, "type");
    if (type && !strcmp(type, "TemplateProcessing")) return template_bos(L, p, bos);
    if (type && !strcmp(type, "ByteLevel")) return 0; /* offsets only */
    if (type && !strcmp(type, "Sequence")) {
        const json_value *list = json_get(p, "processors");
        for (size_t i = 0; list && list->type == JSON_ARRAY && i < list->u.array.count; i++)
            if (post_processor_bos(L, &list->u.array.items[i], bos)) return -1;
        return 0;
    }
    return refuse(L, "post_processor.type", type, "TemplateProcessing, ByteLevel, Sequence or null");
}

/* The BOS rule (docs/tokenizers.md): tokenizer_config.json's add_bos_token when it has one
 * (transformers rebuilds the template from it), else the post_processor's template. */
static int load_bos(loader *L, const json_value *post, const json_value *cfg, const char *cfg_path) {
    struct tk_hf *hf = L->hf;
    int32_t tpl = -1;
    if (post_processor_bos(L, post, &tpl)) return -1;
    const json_value *bt = json_get(cfg, "bos_token");
    const char *bos_name = bt && bt->type == JSON_STRING ? bt->u.string.ptr : str_of(bt, "content");
    const json_value *ab = json_get(cfg, "add_bos_token");
    int32_t named = bos_name ? id_of(hf, L->t, bos_name) : -1;
    if (ab && (ab->type == JSON_TRUE || ab->type == JSON_FALSE)) {
        hf->add_bos_default = ab->type == JSON_TRUE;
        hf->bos_id = named >= 0 ? named : tpl;
        if (hf->add_bos_default && hf->bos_id < 0)
            return as_fail(L->err, "%s: add_bos_token = true but bos_token names no token of the vocabulary", cfg_path);
        snprintf(hf->bos_source, sizeof hf->bos_source, "tokenizer_config.json add_bos_token = %s",
                 hf->add_bos_default ? "true" : "false");
    } else if (tpl >= 0) {
        hf->add_bos_default = 1;
        hf->bos_id = tpl;
        snprintf(hf->bos_source, sizeof hf->bos_source, "tokenizer.json post_processor");
    } else {
        hf->bos_id = named;
        snprintf(hf->bos_source, sizeof hf->bos_source, "neither tokenizer_config.json add_bos_token nor a post_processor template adds one");
    }
    hf->add_bos = hf->add_bos_default;
    return 0;
}

/* ------------------------------------------------------------------ loading */

void tk_hf_free(struct tk_hf *hf) {
    if (!hf) return;
    for (int i = 0; i < hf->n_norm; i++) { free(hf->norm[i].a); free(hf->norm[i].b); }
    for (size_t i = 0; i < hf->n_added; i++)
        if (hf->added[i].owned) free(hf->added[i].s);
    free(hf->added);
    free(hf->sym_pool);
    free(hf->sym_off);
    free(hf->sym_len);
    free(hf->vix);
    for (int i = 0; i < 4; i++) free(hf->buf[i]);
    free(hf->ids);
    free(hf);
}

/* Parses the file at path (NULL if absent and optional), its sha256 into sha. */
static json_doc *parse(const char *path, char sha[65], as_err *err) {
    size_t n;
    char *s = tk_read_file(path, &n, err);
    if (!s) return NULL;
    sha256_hex(sha, s, n);
    json_doc *doc = json_parse(s, n, err);
    free(s);
    if (!doc) as_wrap(err, "%s", path);
    else if (json_root(doc)->type != JSON_OBJECT) { as_fail(err, "%s: expected a JSON object", path); json_free(doc); doc = NULL; }
    return doc;
}

/* 1 when no vocabulary token has a "▁" right after a character other than "▁": then a merge
 * never joins a symbol ending before a "▁" run with one starting it (a merged symbol is a
 * token), and a SentencePiece-style segment -- one word, 3 MB for War and Peace -- can be
 * merged word by word, through the piece cache, with the same ids. */
static int no_inner_metaspace(const struct tk_hf *hf) {
    for (size_t k = 0; k <= hf->vix_mask; k++) {
        int32_t id = hf->vix[k];
        if (id < 0) continue;
        const uint8_t *p = hf->sym_pool + hf->sym_off[id];
        for (size_t i = 1; i + 3 <= hf->sym_len[id]; i++)
            if (!memcmp(p + i, "\xE2\x96\x81", 3) && !(i >= 3 && !memcmp(p + i - 3, "\xE2\x96\x81", 3))) return 0;
    }
    return 1;
}

static int load_all(loader *L, const json_value *root, const json_value *cfg, const char *cfg_path) {
    const json_value *norm = json_get(root, "normalizer"), *model = json_get(root, "model");
    if (norm && norm->type != JSON_NULL && add_norm(L, norm, "normalizer")) return -1;
    if (load_pre_tokenizer(L, json_get(root, "pre_tokenizer"))) return -1;
    if (!model || model->type != JSON_OBJECT) return refuse(L, "model", "not an object", "a BPE model");
    const json_value *added = json_get(root, "added_tokens");
    if (added && added->type != JSON_ARRAY && added->type != JSON_NULL) return refuse(L, "added_tokens", "not a list", "a list");
    if (load_model(L, model, added && added->type == JSON_ARRAY ? added : NULL)) return -1;
    if (!L->hf->byte_level && L->hf->split == HF_SPLIT_NONE && no_inner_metaspace(L->hf)) L->hf->split = HF_SPLIT_META;
    return load_bos(L, json_get(root, "post_processor"), cfg, cfg_path);
}

tokenizer *tk_hf_load(const char *json_path, const char *config_path, as_err *err) {
    tokenizer *t = calloc(1, sizeof *t);
    struct tk_hf *hf = t ? calloc(1, sizeof *hf) : NULL;
    if (!hf) { free(t); as_fail(err, "%s: out of memory", json_path); return NULL; }
    t->hf = hf;
    t->eot = -1;
    t->heap_threshold = 24;
    hf->unk_id = hf->bos_id = -1;
    snprintf(t->vocab_path, sizeof t->vocab_path, "%s", json_path);
    loader L = {t, hf, json_path, err};
    json_doc *doc = parse(json_path, t->vocab_sha256, err), *cfg = NULL;
    int rc = doc ? 0 : -1;
    if (!rc && config_path && fileio_exists(config_path, 1)) {
        snprintf(t->merges_path, sizeof t->merges_path, "%s", config_path);
        cfg = parse(config_path, t->merges_sha256, err);
        if (!cfg) rc = -1;
    }
    if (!rc) rc = load_all(&L, json_root(doc), cfg ? json_root(cfg) : NULL, config_path);
    if (!rc && tk_cache_alloc(t)) rc = as_fail(err, "%s: out of memory", json_path);
    json_free(doc);
    json_free(cfg);
    if (rc) { tokenizer_free(t); return NULL; }
    return t;
}
