/* tokenizer.c -- see tokenizer.h. GPT-2 byte-level BPE: vocab/merges loading, BPE merges, encode/decode.
 *
 * vocab.json is read by a small dedicated reader (the file is one flat
 * object {"string": integer, ...}; strings may use every JSON escape
 * including \uXXXX surrogate pairs). Token strings are GPT-2's byte-level
 * alphabet (each byte shown as one printable code point); they are turned
 * back into raw bytes on load, so everything below works on bytes. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "sha256.h"
#include "json.h"
#include "tokenizer_int.h"
#include "hf_int.h"


/* ------------------------------------------------------- byte-level alphabet */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * other 68 bytes map to U+0100.. in byte order. Byte order of this list is
 * also the order of ids 0..255 in GPT-2's vocabulary. */
static int byte_is_printable(int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}
void tk_byte_unicode_tables(uint32_t byte_to_cp[256], int cp_to_byte[324], uint8_t id_order[256]) {
    int n = 0, k = 0;
    for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++)
        if (byte_is_printable(b)) {
            byte_to_cp[b] = (uint32_t)b;
            id_order[k++] = (uint8_t)b;
        }
    for (int b = 0; b < 256; b++)
        if (!byte_is_printable(b)) {
            byte_to_cp[b] = 256u + (uint32_t)n++;
            id_order[k++] = (uint8_t)b;
        }
    for (int b = 0; b < 256; b++) cp_to_byte[byte_to_cp[b]] = b;
}

size_t tk_utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes valid UTF-8 s[0..n) of byte-level code points into raw bytes
 * (in place is fine: output is never longer). Returns the byte count, or
 * (size_t)-1 when a code point is not in the byte-level alphabet. */
size_t tk_byte_level_to_bytes(const int cp_to_byte[324], const uint8_t *s, size_t n, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        uint8_t b = s[i];
        if (b < 0x80) { cp = b; i += 1; }
        else if ((b & 0xE0) == 0xC0 && i + 1 < n) { cp = ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F); i += 2; }
        else return (size_t)-1;
        if (cp >= 324 || cp_to_byte[cp] < 0) return (size_t)-1;
        out[o++] = (uint8_t)cp_to_byte[cp];
    }
    return o;
}

/* -------------------------------------------------------------- hash tables */

uint64_t tk_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

/* ---------------------------------------------------------------- file I/O */

/* vocab.json (GPT-2: 1 MB) and merges.txt (456 KB), read whole. */
#define TOKENIZER_FILE_MAX_BYTES ((size_t)256 << 20)

char *tk_read_file(const char *path, size_t *n, as_err *err) {
    char *buf = NULL;
    if (fileio_read_all(path, TOKENIZER_FILE_MAX_BYTES, "a tokenizer file", &buf, n, err)) return NULL;
    return buf;
}

int tk_join_path(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < cap;
}

/* ------------------------------------------------------- vocab.json reader */

/* Parses the whole {"token": id, ...} object (json.h: strict RFC 8259) into t's
 * id -> bytes table. */
static int read_vocab(tokenizer *t, const char *path, as_err *err) {
    size_t n;
    char *s = tk_read_file(path, &n, err);
    if (!s) return -1;
    sha256_hex(t->vocab_sha256, s, n);
    json_doc *doc = json_parse(s, n, err);
    free(s);
    if (!doc) return as_wrap(err, "%s", path);
    const json_value *root = json_root(doc);
    int cp_to_byte[324];
    uint32_t byte_to_cp[256];
    uint8_t order[256];
    tk_byte_unicode_tables(byte_to_cp, cp_to_byte, order);
    int rc = -1;
    if (root->type != JSON_OBJECT) { as_fail(err, "%s: expected a JSON object {\"token\": id, ...}", path); goto done; }
    /* A token's bytes are at most its UTF-8 key's; ids are below the member count for
     * a dense vocabulary, and a larger id is refused below. */
    size_t count = root->u.object.count, pool_cap = 1;
    for (size_t i = 0; i < count; i++) pool_cap += root->u.object.members[i].key_len;
    t->pool = malloc(pool_cap);
    t->tok_off = calloc(count + 1, sizeof *t->tok_off);
    t->tok_len = calloc(count + 1, sizeof *t->tok_len);
    if (!t->pool || !t->tok_off || !t->tok_len) { as_fail(err, "%s: out of memory", path); goto done; }
    for (size_t i = 0; i < count; i++) {
        const json_member *mb = &root->u.object.members[i];
        int64_t id64;
        if (mb->value.type != JSON_NUMBER || json_get_int64(&mb->value, &id64) || id64 < 0) {
            as_fail(err, "%s: byte %zu: token id must be a non-negative integer", path, mb->value.offset);
            goto done;
        }
        if ((uint64_t)id64 > count || id64 > INT32_MAX) {
            as_fail(err, "%s: id %lld is larger than the vocabulary can be", path, (long long)id64);
            goto done;
        }
        size_t id = (size_t)id64;
        size_t blen = tk_byte_level_to_bytes(cp_to_byte, (const uint8_t *)mb->key, mb->key_len, t->pool + t->pool_len);
        if (blen == (size_t)-1 || blen == 0) {
            as_fail(err, "%s: token \"%.60s\" (id %zu) is not in GPT-2's byte-level alphabet", path, mb->key, id);
            goto done;
        }
        if (t->tok_len[id]) { as_fail(err, "%s: id %zu appears twice", path, id); goto done; }
        t->tok_off[id] = t->pool_len;
        t->tok_len[id] = (uint32_t)blen;
        t->pool_len += blen;
        if (blen > t->max_token_len) t->max_token_len = blen;
        if (id + 1 > t->n_ids) t->n_ids = id + 1;
        if (blen == 1 && t->byte_id[t->pool[t->tok_off[id]]] < 0) t->byte_id[t->pool[t->tok_off[id]]] = (int32_t)id;
        if (blen == 13 && !memcmp(t->pool + t->tok_off[id], "<|endoftext|>", 13)) t->eot = (int32_t)id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) { as_fail(err, "%s: no token for byte 0x%02X (a byte-level vocabulary has all 256)", path, b); goto done; }
    rc = 0;
done:
    json_free(doc);
    return rc;
}

/* ------------------------------------------------------- merges.txt reader */

/* Bytes -> id table used only while reading merges. */
typedef struct {
    int32_t *slots;
    size_t mask;
} id_index;

static int32_t index_find(const tokenizer *t, const id_index *ix, const uint8_t *p, size_t n) {
    size_t i = tk_hash_bytes(p, n) & ix->mask;
    for (;;) {
        int32_t id = ix->slots[i];
        if (id < 0) return -1;
        if (t->tok_len[id] == n && !memcmp(t->pool + t->tok_off[id], p, n)) return id;
        i = (i + 1) & ix->mask;
    }
}

static int read_merges(tokenizer *t, const char *path, as_err *err) {
    size_t n;
    char *s = tk_read_file(path, &n, err);
    if (!s) return -1;
    sha256_hex(t->merges_sha256, s, n);
    int rc = -1;
    id_index ix = {0};
    size_t cap = 1;
    while (cap < 2 * t->n_ids) cap <<= 1;
    ix.slots = malloc(cap * sizeof *ix.slots);
    ix.mask = cap - 1;
    size_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += s[i] == '\n';
    size_t mcap = 1;
    while (mcap < 2 * lines) mcap <<= 1;
    t->merges = malloc(mcap * sizeof *t->merges);
    t->merge_mask = mcap - 1;
    uint8_t *a = malloc(n + 1), *ab = malloc(2 * n + 2);
    int cp_to_byte[324];
    uint32_t byte_to_cp[256];
    uint8_t order[256];
    tk_byte_unicode_tables(byte_to_cp, cp_to_byte, order);
    if (!ix.slots || !t->merges || !a || !ab) { as_fail(err, "%s: out of memory", path); goto done; }
    memset(ix.slots, 0xFF, cap * sizeof *ix.slots);
    for (size_t m = 0; m < mcap; m++) t->merges[m].key = UINT64_MAX;
    for (size_t id = 0; id < t->n_ids; id++) {
        if (!t->tok_len[id]) continue;
        const uint8_t *p = t->pool + t->tok_off[id];
        if (index_find(t, &ix, p, t->tok_len[id]) >= 0) continue; /* duplicate string: first id wins */
        size_t k = tk_hash_bytes(p, t->tok_len[id]) & ix.mask;
        while (ix.slots[k] >= 0) k = (k + 1) & ix.mask;
        ix.slots[k] = (int32_t)id;
    }
    uint32_t rank = 0;
    size_t line_no = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && s[e] != '\n') e++;
        size_t next = e + 1;
        line_no++;
        if (e > i && s[e - 1] == '\r') e--;
        if (e == i || (line_no == 1 && e - i >= 8 && !memcmp(s + i, "#version", 8))) { i = next; continue; }
        size_t sp = i;
        while (sp < e && s[sp] != ' ') sp++;
        if (sp == e || sp == i || sp + 1 == e || memchr(s + sp + 1, ' ', e - sp - 1)) {
            as_fail(err, "%s: line %zu: expected two tokens separated by one space", path, line_no);
            goto done;
        }
        size_t la = tk_byte_level_to_bytes(cp_to_byte, (const uint8_t *)s + i, sp - i, a);
        size_t lb = tk_byte_level_to_bytes(cp_to_byte, (const uint8_t *)s + sp + 1, e - sp - 1, ab + (la == (size_t)-1 ? 0 : la));
        if (la == (size_t)-1 || lb == (size_t)-1) {
            as_fail(err, "%s: line %zu: not GPT-2 byte-level text", path, line_no);
            goto done;
        }
        memcpy(ab, a, la);
        int32_t ia = index_find(t, &ix, a, la), ib = index_find(t, &ix, ab + la, lb), iab = index_find(t, &ix, ab, la + lb);
        if (ia < 0 || ib < 0 || iab < 0) {
            as_fail(err, "%s: line %zu: merge \"%.*s\" uses a token missing from the vocabulary", path, line_no,
                    (int)(e - i > 80 ? 80 : e - i), s + i);
            goto done;
        }
        uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        size_t k = hash_u64(key) & t->merge_mask;
        while (t->merges[k].key != UINT64_MAX && t->merges[k].key != key) k = (k + 1) & t->merge_mask;
        if (t->merges[k].key == UINT64_MAX) { /* a repeated pair keeps its first (lowest) rank */
            t->merges[k].key = key;
            t->merges[k].rank = rank;
            t->merges[k].merged = iab;
        }
        rank++;
        i = next;
    }
    rc = 0;
done:
    free(ix.slots);
    free(a);
    free(ab);
    free(s);
    return rc;
}

/* ------------------------------------------------------------------ loading */

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    tk_hf_free(t->hf);
    free(t->pool);
    free(t->tok_off);
    free(t->tok_len);
    free(t->merges);
    free(t->cache);
    free(t->cache_text);
    free(t->cache_ids);
    free(t->s_tok);
    free(t->s_next);
    free(t->s_prev);
    free(t->heap);
    free(t);
}

tokenizer *tokenizer_load_files(const char *vocab_path, const char *merges_path, as_err *err) {
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) { as_fail(err, "%s: out of memory", vocab_path); return NULL; }
    t->eot = -1;
    t->heap_threshold = 24;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    snprintf(t->vocab_path, sizeof t->vocab_path, "%s", vocab_path);
    snprintf(t->merges_path, sizeof t->merges_path, "%s", merges_path);
    if (read_vocab(t, vocab_path, err) || read_merges(t, merges_path, err)) {
        tokenizer_free(t);
        return NULL;
    }
    if (tk_cache_alloc(t)) {
        as_fail(err, "%s: out of memory", vocab_path);
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

int tk_find_pair(const char *dir, char *vocab, char *merges, size_t cap) {
    static const char *const names[2][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
    for (int k = 0; k < 2; k++)
        if (tk_join_path(vocab, cap, dir, names[k][0]) && tk_join_path(merges, cap, dir, names[k][1]) &&
            fileio_exists(vocab, 1) && fileio_exists(merges, 1))
            return 0;
    return -1;
}

int tokenizer_dir_has_files(const char *dir) {
    char v[4096], m[4096];
    return dir && tk_find_pair(dir, v, m, sizeof v) == 0;
}

tokenizer *tokenizer_load(const char *model_dir, as_err *err) {
    char v[4096], m[4096];
    if (tk_find_pair(model_dir, v, m, sizeof v) == 0) return tokenizer_load_files(v, m, err);
    if (tk_join_path(v, sizeof v, model_dir, "tokenizer.json") && fileio_exists(v, 1) &&
        tk_join_path(m, sizeof m, model_dir, "tokenizer_config.json"))
        return tk_hf_load(v, m, err);
    as_fail(err, "%s: no tokenizer files (need tokenizer.json, or vocab.json + merges.txt, or encoder.json + vocab.bpe)", model_dir);
    return NULL;
}

int tokenizer_set_add_bos(tokenizer *t, int add, as_err *err) {
    if (add < 0) add = t->hf ? t->hf->add_bos_default : 0;
    int32_t bos = tokenizer_bos_id(t);
    if (add && bos < 0)
        return as_fail(err, "%s: text.add_bos = true but the tokenizer names no BOS token (set text.add_bos = false)", t->vocab_path);
    if (t->hf) t->hf->add_bos = add;
    else t->gpt2_add_bos = add;
    return 0;
}
int tokenizer_add_bos(const tokenizer *t) { return t->hf ? t->hf->add_bos : t->gpt2_add_bos; }
int tokenizer_add_bos_default(const tokenizer *t) { return t->hf ? t->hf->add_bos_default : 0; }
int32_t tokenizer_bos_id(const tokenizer *t) { return t->hf ? t->hf->bos_id : t->eot; }
const char *tokenizer_kind(const tokenizer *t) {
    if (!t->hf) return "gpt2";
    return t->hf->byte_level ? "tokenizer.json byte-level BPE" : "tokenizer.json BPE";
}

int tokenizer_describe(const tokenizer *t, char *out, size_t cap) {
    int32_t bos = tokenizer_bos_id(t);
    size_t bl = 0;
    const char *bs = bos >= 0 ? tokenizer_token_bytes(t, bos, &bl) : NULL;
    char bos_txt[200];
    if (tokenizer_add_bos(t)) snprintf(bos_txt, sizeof bos_txt, "add_bos = true (id %ld \"%.*s\")", (long)bos, (int)(bl > 64 ? 64 : bl), bs ? bs : "");
    else snprintf(bos_txt, sizeof bos_txt, "add_bos = false");
    const char *rule = t->hf ? t->hf->bos_source : "GPT-2 adds none";
    int n;
    if (!t->hf)
        n = snprintf(out, cap, "vocab.json merges.txt of the model directory; vocab.json sha256=%s; merges.txt sha256=%s; %s (default: %s)",
                     t->vocab_sha256, t->merges_sha256, bos_txt, rule);
    else if (t->merges_sha256[0])
        n = snprintf(out, cap, "tokenizer.json tokenizer_config.json of the model directory (%s); tokenizer.json sha256=%s; "
                     "tokenizer_config.json sha256=%s; %s (default: %s)", tokenizer_kind(t), t->vocab_sha256, t->merges_sha256, bos_txt, rule);
    else
        n = snprintf(out, cap, "tokenizer.json of the model directory (%s; no tokenizer_config.json); tokenizer.json sha256=%s; %s (default: %s)",
                     tokenizer_kind(t), t->vocab_sha256, bos_txt, rule);
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

size_t tokenizer_vocab_size(const tokenizer *t) { return t->n_ids; }
int32_t tokenizer_eot_id(const tokenizer *t) { return t->eot; }
const char *tokenizer_vocab_path(const tokenizer *t) { return t->vocab_path; }
const char *tokenizer_merges_path(const tokenizer *t) { return t->merges_path; }
const char *tokenizer_vocab_sha256(const tokenizer *t) { return t->vocab_sha256; }
const char *tokenizer_merges_sha256(const tokenizer *t) { return t->merges_sha256; }
size_t tokenizer_max_token_len(const tokenizer *t) { return t->max_token_len; }
void tokenizer_set_heap_threshold(tokenizer *t, size_t min_bytes) { t->heap_threshold = min_bytes; }
void tokenizer_set_cache_disabled(tokenizer *t, int disabled) { t->cache_disabled = disabled; }

const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || (size_t)id >= t->n_ids || !t->tok_len[id]) return NULL;
    *len = t->tok_len[id];
    return (const char *)t->pool + t->tok_off[id];
}

/* ---------------------------------------------------------------------- BPE */

struct heap_entry {
    uint32_t rank, pos; /* order: lowest rank, then leftmost */
    int32_t left, right; /* the pair's ids when pushed; stale if either changed */
};

static inline int heap_less(const struct heap_entry *a, const struct heap_entry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}
static void heap_push(struct heap_entry *h, size_t *n, struct heap_entry e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}
static struct heap_entry heap_pop(struct heap_entry *h, size_t *n) {
    struct heap_entry top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static int grow_scratch(tokenizer *t, size_t n) {
    if (n <= t->scratch_cap) return 0;
    size_t cap = t->scratch_cap ? t->scratch_cap : 256;
    while (cap < n) cap *= 2;
    int32_t *a = realloc(t->s_tok, cap * sizeof *a);
    if (a) t->s_tok = a;
    int32_t *b = realloc(t->s_next, cap * sizeof *b);
    if (b) t->s_next = b;
    int32_t *c = realloc(t->s_prev, cap * sizeof *c);
    if (c) t->s_prev = c;
    /* each merge pushes at most 2 entries onto the n-1 initial ones */
    struct heap_entry *h = realloc(t->heap, 3 * cap * sizeof *h);
    if (h) t->heap = h;
    if (!a || !b || !c || !h) return -1;
    t->scratch_cap = cap;
    return 0;
}

/* Short pieces: repeatedly merge the leftmost lowest-rank pair. */
static size_t bpe_simple(const tokenizer *t, int32_t *tok, size_t n) {
    while (n > 1) {
        uint32_t best = UINT32_MAX;
        size_t at = 0;
        int32_t merged = -1;
        for (size_t i = 0; i + 1 < n; i++) {
            const merge_slot *m = tk_merge_find(t, tok[i], tok[i + 1]);
            if (m && m->rank < best) { best = m->rank; at = i; merged = m->merged; }
        }
        if (merged < 0) break;
        tok[at] = merged;
        memmove(tok + at + 1, tok + at + 2, (n - at - 2) * sizeof *tok);
        n--;
    }
    return n;
}

/* Long pieces: the same merges in the same order, with a heap of candidate
 * pairs over a linked list; stale entries are skipped when popped. */
static size_t bpe_heap(tokenizer *t, size_t n, int32_t *out) {
    int32_t *tok = t->s_tok, *next = t->s_next, *prev = t->s_prev;
    struct heap_entry *h = t->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        const merge_slot *m = tk_merge_find(t, tok[i], tok[i + 1]);
        if (m) heap_push(h, &hn, (struct heap_entry){m->rank, (uint32_t)i, tok[i], tok[i + 1]});
    }
    while (hn) {
        struct heap_entry e = heap_pop(h, &hn);
        int32_t r = next[e.pos];
        if (tok[e.pos] != e.left || r < 0 || tok[r] != e.right) continue;
        const merge_slot *m = tk_merge_find(t, e.left, e.right);
        tok[e.pos] = m->merged;
        tok[r] = -1;
        next[e.pos] = next[r];
        if (next[r] >= 0) prev[next[r]] = (int32_t)e.pos;
        int32_t p = prev[e.pos], q = next[e.pos];
        if (p >= 0) {
            const merge_slot *mp = tk_merge_find(t, tok[p], tok[e.pos]);
            if (mp) heap_push(h, &hn, (struct heap_entry){mp->rank, (uint32_t)p, tok[p], tok[e.pos]});
        }
        if (q >= 0) {
            const merge_slot *mq = tk_merge_find(t, tok[e.pos], tok[q]);
            if (mq) heap_push(h, &hn, (struct heap_entry){mq->rank, e.pos, tok[e.pos], tok[q]});
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) out[k++] = tok[i];
    return k;
}

long tk_bpe_ids(tokenizer *t, int32_t *ids, size_t n) {
    if (n < 2) return (long)n;
    if (n < t->heap_threshold) return (long)bpe_simple(t, ids, n);
    if (grow_scratch(t, n)) return -1;
    memcpy(t->s_tok, ids, n * sizeof *ids);
    return (long)bpe_heap(t, n, ids);
}

/* BPE of one piece of GPT-2 bytes into out (room for n ids). Returns the id count or -1. */
static long bpe_piece(tokenizer *t, const uint8_t *p, size_t n, int32_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = t->byte_id[p[i]];
    return tk_bpe_ids(t, out, n);
}

static void cache_clear(tokenizer *t) {
    memset(t->cache, 0, CACHE_SLOTS * sizeof *t->cache);
    t->cache_used = t->cache_text_len = t->cache_ids_len = 0;
}

int tk_cache_alloc(tokenizer *t) {
    t->cache = calloc(CACHE_SLOTS, sizeof *t->cache);
    t->cache_text = malloc(CACHE_TEXT_CAP);
    t->cache_ids = malloc(CACHE_TEXT_CAP * sizeof *t->cache_ids);
    return t->cache && t->cache_text && t->cache_ids ? 0 : -1;
}

long tk_piece_cached(tokenizer *t, const uint8_t *p, size_t n, int32_t *dst, tk_piece_fn bpe) {
    int cacheable = !t->cache_disabled && n <= CACHE_MAX_PIECE && n > 1;
    if (!cacheable) return bpe(t, p, n, dst);
    uint64_t hsh = tk_hash_bytes(p, n);
    size_t slot = hsh & (CACHE_SLOTS - 1);
    for (;;) {
        cache_slot *c = &t->cache[slot];
        if (!c->n_ids) break;
        if (c->hash == hsh && c->text_len == n && !memcmp(t->cache_text + c->text_off, p, n)) {
            memcpy(dst, t->cache_ids + c->ids_off, c->n_ids * sizeof *dst);
            return c->n_ids;
        }
        slot = (slot + 1) & (CACHE_SLOTS - 1);
    }
    long got = bpe(t, p, n, dst);
    if (got <= 0) return got;
    if (t->cache_used >= CACHE_SLOTS / 2 || t->cache_text_len + n > CACHE_TEXT_CAP) {
        cache_clear(t);
        slot = hsh & (CACHE_SLOTS - 1);
        while (t->cache[slot].n_ids) slot = (slot + 1) & (CACHE_SLOTS - 1);
    }
    cache_slot *c = &t->cache[slot];
    c->hash = hsh;
    c->text_off = (uint32_t)t->cache_text_len;
    c->text_len = (uint32_t)n;
    c->ids_off = (uint32_t)t->cache_ids_len;
    c->n_ids = (uint32_t)got;
    memcpy(t->cache_text + t->cache_text_len, p, n);
    memcpy(t->cache_ids + t->cache_ids_len, dst, (size_t)got * sizeof *dst);
    t->cache_text_len += n;
    t->cache_ids_len += (size_t)got;
    t->cache_used++;
    return got;
}

static int too_small(size_t out_cap, as_err *err) {
    return as_fail(err, "tokenizer_encode: output buffer of %zu ids too small (tokenizer_encode_alloc sizes it)", out_cap);
}

int tokenizer_encode(tokenizer *t, const char *text, size_t len, int32_t *out, size_t out_cap,
                     size_t *n_out, as_err *err) {
    if (t->hf) return tk_hf_encode(t, text, len, out, out_cap, n_out, err);
    const uint8_t *s = (const uint8_t *)text;
    size_t k = 0;
    if (t->gpt2_add_bos) {
        if (!out_cap) return too_small(out_cap, err);
        out[k++] = t->eot;
    }
    for (size_t pos = 0; pos < len;) {
        size_t end = tokenizer_piece_end(text, len, pos), n = end - pos;
        if (end <= pos || end > len) /* cannot happen; guards the loop against a scanner bug */
            return as_fail(err, "tokenizer_encode: internal error: empty piece at byte %zu", pos);
        if (n > (size_t)INT32_MAX)
            return as_fail(err, "tokenizer_encode: a piece of %zu bytes at byte %zu is longer than 2 GiB", n, pos);
        int32_t small[CACHE_MAX_PIECE];
        int use_small = out_cap - k < n;
        if (use_small && n > CACHE_MAX_PIECE) return too_small(out_cap, err);
        int32_t *dst = use_small ? small : out + k;
        long got = tk_piece_cached(t, s + pos, n, dst, bpe_piece);
        if (got < 0) return as_fail(err, "tokenizer_encode: out of memory for a piece of %zu bytes", n);
        if (use_small) {
            if (out_cap - k < (size_t)got) return too_small(out_cap, err);
            memcpy(out + k, small, (size_t)got * sizeof *out);
        }
        k += (size_t)got;
        pos = end;
    }
    *n_out = k;
    return 0;
}

int tokenizer_encode_alloc(tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n_out, as_err *err) {
    *ids = NULL;
    *n_out = 0;
    if (t->hf) return tk_hf_encode_alloc(t, text, len, ids, n_out, err);
    int32_t *out = malloc((len + 1) * sizeof *out);
    if (!out) return as_fail(err, "tokenizer_encode: out of memory for %zu tokens", len);
    if (tokenizer_encode(t, text, len, out, len + 1, n_out, err)) { free(out); return -1; }
    int32_t *shrunk = realloc(out, (*n_out ? *n_out : 1) * sizeof *out);
    *ids = shrunk ? shrunk : out;
    return 0;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char *out, size_t out_cap,
                     size_t *n_out, as_err *err) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *b = tokenizer_token_bytes(t, ids[i], &l);
        if (!b) return as_fail(err, "token %zu: id %ld is not in the vocabulary (%zu ids)", i, (long)ids[i], t->n_ids);
        if (out_cap - o < l) return as_fail(err, "tokenizer_decode: output buffer of %zu bytes too small", out_cap);
        memcpy(out + o, b, l);
        o += l;
    }
    *n_out = o;
    return 0;
}
