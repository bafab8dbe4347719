/* fuzz_model_config.c -- libFuzzer harness for the strict JSON parser and
 * model_config_read() (a model directory's config.json) on top of it.
 *
 * Each input is the bytes of a config.json.
 *   1. json_parse() on the buffer; on success the tree is walked and checked:
 *      strings are NUL-terminated at their length, offsets lie in the text,
 *      json_get_n() finds every member of every object (duplicate keys are
 *      refused, so it must be that very member), json_get_size() agrees with
 *      the number. The tree is then written back as JSON (strings escaped,
 *      numbers as %.17g) and parsed again: the two trees must be equal.
 *   2. The bytes are written to TMP/model/config.json and read with
 *      model_config_read(); a success must satisfy the documented limits. */
#include "fuzz_util.h"

#include <math.h>
#include <stdint.h>

#include "json.h"
#include "model.h"

/* A growable byte buffer for the re-serialised document. */
typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        b->p = realloc(b->p, cap);
        FUZZ_ASSERT(b->p != NULL, "out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_string(sbuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            sb_put(b, e, 6);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void write_value(sbuf *b, const json_value *v) {
    char num[40];
    switch (v->type) {
    case JSON_NULL: sb_put(b, "null", 4); break;
    case JSON_FALSE: sb_put(b, "false", 5); break;
    case JSON_TRUE: sb_put(b, "true", 4); break;
    case JSON_NUMBER:
        snprintf(num, sizeof num, "%.17g", v->u.number);
        sb_put(b, num, strlen(num));
        break;
    case JSON_STRING: sb_string(b, v->u.string.ptr, v->u.string.len); break;
    case JSON_ARRAY:
        sb_put(b, "[", 1);
        for (size_t i = 0; i < v->u.array.count; i++) {
            if (i) sb_put(b, ",", 1);
            write_value(b, &v->u.array.items[i]);
        }
        sb_put(b, "]", 1);
        break;
    case JSON_OBJECT:
        sb_put(b, "{", 1);
        for (size_t i = 0; i < v->u.object.count; i++) {
            const json_member *m = &v->u.object.members[i];
            if (i) sb_put(b, ",", 1);
            sb_string(b, m->key, m->key_len);
            sb_put(b, ":", 1);
            write_value(b, &m->value);
        }
        sb_put(b, "}", 1);
        break;
    }
}

static void check_value(const json_value *v, size_t text_len) {
    FUZZ_ASSERT(v->offset < text_len, "offset %zu beyond %zu", v->offset, text_len);
    size_t n;
    int64_t i64;
    switch (v->type) {
    case JSON_NUMBER:
        FUZZ_ASSERT(isfinite(v->u.number), "non-finite number");
        if (json_get_size(v, &n) == 0) FUZZ_ASSERT((double)n == v->u.number, "size %zu", n);
        if (json_get_int64(v, &i64) == 0)
            FUZZ_ASSERT((double)i64 == v->u.number, "int64 %lld", (long long)i64);
        break;
    case JSON_STRING:
        FUZZ_ASSERT(v->u.string.ptr[v->u.string.len] == 0, "string not terminated");
        break;
    case JSON_ARRAY:
        for (size_t k = 0; k < v->u.array.count; k++) check_value(&v->u.array.items[k], text_len);
        break;
    case JSON_OBJECT:
        for (size_t k = 0; k < v->u.object.count; k++) {
            const json_member *m = &v->u.object.members[k];
            FUZZ_ASSERT(m->key[m->key_len] == 0, "key not terminated");
            FUZZ_ASSERT(json_get_n(v, m->key, m->key_len) == &m->value, "json_get_n misses key %zu",
                        k);
            if (strlen(m->key) == m->key_len)
                FUZZ_ASSERT(json_get(v, m->key) == &m->value, "json_get misses key %zu", k);
            check_value(&m->value, text_len);
        }
        break;
    default: break;
    }
}

static int same_value(const json_value *a, const json_value *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JSON_NUMBER: return a->u.number == b->u.number;
    case JSON_STRING:
        return a->u.string.len == b->u.string.len &&
               !memcmp(a->u.string.ptr, b->u.string.ptr, a->u.string.len);
    case JSON_ARRAY:
        if (a->u.array.count != b->u.array.count) return 0;
        for (size_t k = 0; k < a->u.array.count; k++)
            if (!same_value(&a->u.array.items[k], &b->u.array.items[k])) return 0;
        return 1;
    case JSON_OBJECT:
        if (a->u.object.count != b->u.object.count) return 0;
        for (size_t k = 0; k < a->u.object.count; k++) {
            const json_member *x = &a->u.object.members[k], *y = &b->u.object.members[k];
            if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) ||
                !same_value(&x->value, &y->value))
                return 0;
        }
        return 1;
    default: return 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    as_err err;
    json_doc *doc = json_parse((const char *)data, size, &err);
    if (doc) {
        const json_value *root = json_root(doc);
        check_value(root, size);
        sbuf b = {0};
        write_value(&b, root);
        json_doc *again = json_parse(b.p, b.len, &err);
        FUZZ_ASSERT(again != NULL, "re-serialised document does not parse: %s", err.msg);
        FUZZ_ASSERT(same_value(root, json_root(again)), "round trip changed the tree");
        json_free(again);
        free(b.p);
        json_free(doc);
    } else {
        FUZZ_ASSERT(!strncmp(err.msg, "byte ", 5), "error does not start with 'byte N:': %s",
                    err.msg);
    }

    fuzz_mkdir("model");
    fuzz_write("model/config.json", data, size, NULL, 0);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/model", fuzz_tmp_dir());
    gpt2_config cfg;
    if (model_config_read(&cfg, dir, &err) == 0) {
        FUZZ_ASSERT(cfg.n_layer >= 1 && cfg.n_head >= 1 && cfg.n_embd >= 1 &&
                        cfg.n_positions >= 1 && cfg.vocab_size >= 1,
                    "a zero dimension");
        FUZZ_ASSERT(cfg.n_embd % cfg.n_head == 0, "n_embd %% n_head");
        FUZZ_ASSERT(cfg.layer_norm_epsilon > 0 && cfg.layer_norm_epsilon < 1, "epsilon");
        FUZZ_ASSERT(!strcmp(cfg.activation_function, "gelu_new"), "activation");
    }
    return 0;
}
