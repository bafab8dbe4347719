/* json.c -- see json.h. A recursive-descent parser; recursion is bounded by
 * JSON_MAX_DEPTH. Decoded strings go into one pool sized from the input:
 * a decoded string plus its NUL never exceeds its quoted source text. */
#include "json.h"
#include "fileio.h"

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct json_doc {
    json_value root;
    char *pool;
};

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    char *pool;
    size_t pool_used;
    as_err *err;
} parser;

/* Objects at least this large get a hash index; smaller ones are scanned. */
enum { INDEX_MIN_MEMBERS = 16 };

static void value_free(json_value *v) {
    if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->u.array.count; i++) value_free(&v->u.array.items[i]);
        free(v->u.array.items);
    } else if (v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->u.object.count; i++) value_free(&v->u.object.members[i].value);
        free(v->u.object.members);
        free(v->u.object.index);
    }
    v->type = JSON_NULL;
}

static int fail_at(parser *p, size_t pos, const char *what) {
    return as_fail(p->err, "byte %zu: %s", pos, what);
}

static int fail_char(parser *p, const char *expected) {
    if (p->pos >= p->len) return as_fail(p->err, "byte %zu: unexpected end of input, expected %s",
                                          p->pos, expected);
    unsigned char c = p->s[p->pos];
    if (c >= 0x20 && c < 0x7f)
        return as_fail(p->err, "byte %zu: unexpected character '%c', expected %s", p->pos, c,
                       expected);
    return as_fail(p->err, "byte %zu: unexpected byte 0x%02x, expected %s", p->pos, c, expected);
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static uint64_t hash_key(const char *key, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits of a \u escape at p->pos. */
static int read_hex4(parser *p, unsigned *out) {
    if (p->len - p->pos < 4) return fail_at(p, p->pos, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p->s[p->pos + i]);
        if (d < 0) return fail_at(p, p->pos + i, "invalid hex digit in \\u escape");
        v = v * 16 + (unsigned)d;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

static size_t utf8_encode(char *dst, unsigned cp) {
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence starting at p->pos (lead byte >= 0x80),
 * or 0: rejects overlong forms, surrogates and code points above U+10FFFF. */
static size_t utf8_sequence_len(const parser *p) {
    const unsigned char *s = p->s + p->pos;
    size_t avail = p->len - p->pos;
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return 0;
    if (avail < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

/* p->pos is at the opening quote. */
static int parse_string(parser *p, const char **out, size_t *out_len) {
    size_t start = p->pos;
    p->pos++;
    char *dst = p->pool + p->pool_used;
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len) return fail_at(p, start, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return fail_at(p, p->pos, "control character in string (must be escaped)");
        if (c >= 0x80) {
            size_t k = utf8_sequence_len(p);
            if (!k) return fail_at(p, p->pos, "invalid UTF-8 in string");
            memcpy(dst + n, p->s + p->pos, k);
            n += k;
            p->pos += k;
            continue;
        }
        if (c != '\\') {
            dst[n++] = (char)c;
            p->pos++;
            continue;
        }
        size_t esc = p->pos;
        p->pos++;
        if (p->pos >= p->len) return fail_at(p, esc, "unterminated escape");
        unsigned char e = p->s[p->pos++];
        switch (e) {
        case '"': dst[n++] = '"'; break;
        case '\\': dst[n++] = '\\'; break;
        case '/': dst[n++] = '/'; break;
        case 'b': dst[n++] = '\b'; break;
        case 'f': dst[n++] = '\f'; break;
        case 'n': dst[n++] = '\n'; break;
        case 'r': dst[n++] = '\r'; break;
        case 't': dst[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (read_hex4(p, &cp)) return -1;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail_at(p, esc, "unpaired low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                    return fail_at(p, esc, "high surrogate \\u escape not followed by a low one");
                p->pos += 2;
                unsigned low;
                if (read_hex4(p, &low)) return -1;
                if (low < 0xDC00 || low > 0xDFFF)
                    return fail_at(p, esc, "high surrogate \\u escape not followed by a low one");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            n += utf8_encode(dst + n, cp);
            break;
        }
        default:
            if (e >= 0x20 && e < 0x7f)
                return as_fail(p->err, "byte %zu: invalid escape '\\%c' in string", esc, e);
            return fail_at(p, esc, "invalid escape in string");
        }
    }
    dst[n] = '\0';
    p->pool_used += n + 1;
    *out = dst;
    *out_len = n;
    return 0;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *p, json_value *out) {
    size_t start = p->pos;
    const unsigned char *s = p->s;
    size_t i = p->pos;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len || !is_digit(s[i])) return fail_at(p, start, "invalid number");
    if (s[i] == '0') {
        i++;
        if (i < p->len && is_digit(s[i])) return fail_at(p, start, "leading zero in number");
    } else {
        while (i < p->len && is_digit(s[i])) i++;
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || !is_digit(s[i])) return fail_at(p, start, "invalid number (digit expected after '.')");
        while (i < p->len && is_digit(s[i])) i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len || !is_digit(s[i])) return fail_at(p, start, "invalid number (digit expected in exponent)");
        while (i < p->len && is_digit(s[i])) i++;
    }
    char buf[512];
    size_t n = i - start;
    if (n >= sizeof buf) return fail_at(p, start, "number longer than 511 characters");
    memcpy(buf, s + start, n);
    buf[n] = '\0';
    /* strtod follows LC_NUMERIC; JSON's decimal point is always '.' */
    const char *point = localeconv()->decimal_point;
    if (point[0] != '.' && point[0] && !point[1]) {
        char *dot = strchr(buf, '.');
        if (dot) *dot = point[0];
    }
    errno = 0;
    double v = strtod(buf, NULL);
    if (errno == ERANGE && (v > 1.0 || v < -1.0)) return fail_at(p, start, "number out of range");
    out->type = JSON_NUMBER;
    out->u.number = v;
    p->pos = i;
    return 0;
}

static int parse_literal(parser *p, json_value *out) {
    static const struct {
        const char *word;
        json_type type;
    } words[] = {{"true", JSON_TRUE}, {"false", JSON_FALSE}, {"null", JSON_NULL}};
    for (size_t w = 0; w < 3; w++) {
        size_t n = strlen(words[w].word);
        if (p->len - p->pos >= n && !memcmp(p->s + p->pos, words[w].word, n)) {
            out->type = words[w].type;
            p->pos += n;
            return 0;
        }
    }
    return fail_char(p, "a value");
}

static int parse_value(parser *p, json_value *out, int depth);

static int parse_array(parser *p, json_value *out, int depth) {
    p->pos++; /* '[' */
    json_value *items = NULL;
    size_t count = 0, cap = 0;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        goto done;
    }
    for (;;) {
        if (count == cap) {
            cap = cap ? 2 * cap : 4;
            json_value *grown = realloc(items, cap * sizeof *items);
            if (!grown) {
                fail_at(p, p->pos, "out of memory");
                goto fail;
            }
            items = grown;
        }
        if (parse_value(p, &items[count], depth + 1)) goto fail;
        count++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        fail_char(p, "',' or ']' in array");
        goto fail;
    }
done:
    out->type = JSON_ARRAY;
    out->u.array.items = items;
    out->u.array.count = count;
    return 0;
fail:
    for (size_t i = 0; i < count; i++) value_free(&items[i]);
    free(items);
    return -1;
}

/* Builds the hash index of a large object, or checks a small one by
 * scanning; either way a duplicate key is an error. */
static int object_finish(parser *p, json_value *obj) {
    json_member *m = obj->u.object.members;
    size_t count = obj->u.object.count;
    if (count < INDEX_MIN_MEMBERS) {
        for (size_t i = 1; i < count; i++)
            for (size_t j = 0; j < i; j++)
                if (m[i].key_len == m[j].key_len && !memcmp(m[i].key, m[j].key, m[i].key_len))
                    return as_fail(p->err, "byte %zu: duplicate key \"%s\"", m[i].value.offset,
                                   m[i].key);
        return 0;
    }
    size_t cap = 32;
    while (cap < 2 * count) cap *= 2;
    uint32_t *index = calloc(cap, sizeof *index);
    if (!index) return fail_at(p, obj->offset, "out of memory");
    for (size_t i = 0; i < count; i++) {
        size_t slot = (size_t)hash_key(m[i].key, m[i].key_len) & (cap - 1);
        while (index[slot]) {
            const json_member *other = &m[index[slot] - 1];
            if (other->key_len == m[i].key_len && !memcmp(other->key, m[i].key, m[i].key_len)) {
                free(index);
                return as_fail(p->err, "byte %zu: duplicate key \"%s\"", m[i].value.offset,
                               m[i].key);
            }
            slot = (slot + 1) & (cap - 1);
        }
        index[slot] = (uint32_t)(i + 1);
    }
    obj->u.object.index = index;
    obj->u.object.index_cap = cap;
    return 0;
}

static int parse_object(parser *p, json_value *out, int depth) {
    p->pos++; /* '{' */
    json_member *members = NULL;
    size_t count = 0, cap = 0;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        goto done;
    }
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != '"') {
            fail_char(p, "a string key in object");
            goto fail;
        }
        if (count == cap) {
            cap = cap ? 2 * cap : 4;
            if (cap > UINT32_MAX - 1) {
                fail_at(p, p->pos, "object has too many members");
                goto fail;
            }
            json_member *grown = realloc(members, cap * sizeof *members);
            if (!grown) {
                fail_at(p, p->pos, "out of memory");
                goto fail;
            }
            members = grown;
        }
        json_member *m = &members[count];
        if (parse_string(p, &m->key, &m->key_len)) goto fail;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':') {
            fail_char(p, "':' after object key");
            goto fail;
        }
        p->pos++;
        if (parse_value(p, &m->value, depth + 1)) goto fail;
        count++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            break;
        }
        fail_char(p, "',' or '}' in object");
        goto fail;
    }
done:
    out->type = JSON_OBJECT;
    out->u.object.members = members;
    out->u.object.count = count;
    out->u.object.index = NULL;
    out->u.object.index_cap = 0;
    if (object_finish(p, out)) {
        value_free(out);
        return -1;
    }
    return 0;
fail:
    for (size_t i = 0; i < count; i++) value_free(&members[i].value);
    free(members);
    return -1;
}

static int parse_value(parser *p, json_value *out, int depth) {
    out->type = JSON_NULL;
    skip_ws(p);
    out->offset = p->pos;
    if (depth > JSON_MAX_DEPTH) return fail_at(p, p->pos, "nesting deeper than 64 levels");
    if (p->pos >= p->len) return fail_char(p, "a value");
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_object(p, out, depth);
    case '[': return parse_array(p, out, depth);
    case '"':
        out->type = JSON_STRING;
        if (parse_string(p, &out->u.string.ptr, &out->u.string.len)) {
            out->type = JSON_NULL;
            return -1;
        }
        return 0;
    case 't':
    case 'f':
    case 'n': return parse_literal(p, out);
    default:
        if (c == '-' || is_digit(c)) return parse_number(p, out);
        return fail_char(p, "a value");
    }
}

json_doc *json_parse(const char *text, size_t len, as_err *err) {
    json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) {
        as_fail(err, "byte 0: out of memory");
        return NULL;
    }
    doc->pool = malloc(len + 1);
    if (!doc->pool) {
        free(doc);
        as_fail(err, "byte 0: out of memory (%zu bytes of JSON)", len);
        return NULL;
    }
    parser p = {(const unsigned char *)text, len, 0, doc->pool, 0, err};
    if (parse_value(&p, &doc->root, 1)) {
        json_free(doc);
        return NULL;
    }
    skip_ws(&p);
    if (p.pos != len) {
        fail_char(&p, "end of input after the top-level value");
        json_free(doc);
        return NULL;
    }
    return doc;
}

const json_value *json_root(const json_doc *doc) { return doc ? &doc->root : NULL; }

void json_free(json_doc *doc) {
    if (!doc) return;
    value_free(&doc->root);
    free(doc->pool);
    free(doc);
}

json_doc *json_parse_file(const char *path, as_err *err) {
    char *buf = NULL;
    size_t len = 0;
    if (fileio_read_all(path, JSON_FILE_MAX_BYTES, "a JSON file", &buf, &len, err)) return NULL;
    json_doc *doc = json_parse(buf, len, err);
    free(buf);
    if (!doc) as_wrap(err, "%s", path);
    return doc;
}

const json_value *json_get_n(const json_value *obj, const char *key, size_t key_len) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    const json_member *m = obj->u.object.members;
    if (!obj->u.object.index) {
        for (size_t i = 0; i < obj->u.object.count; i++)
            if (m[i].key_len == key_len && !memcmp(m[i].key, key, key_len)) return &m[i].value;
        return NULL;
    }
    size_t cap = obj->u.object.index_cap;
    size_t slot = (size_t)hash_key(key, key_len) & (cap - 1);
    while (obj->u.object.index[slot]) {
        const json_member *c = &m[obj->u.object.index[slot] - 1];
        if (c->key_len == key_len && !memcmp(c->key, key, key_len)) return &c->value;
        slot = (slot + 1) & (cap - 1);
    }
    return NULL;
}

const json_value *json_get(const json_value *obj, const char *key) {
    return json_get_n(obj, key, strlen(key));
}

const char *json_type_name(json_type type) {
    switch (type) {
    case JSON_NULL: return "null";
    case JSON_FALSE:
    case JSON_TRUE: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "?";
}

static const double TWO_POW_53 = 9007199254740992.0;

int json_get_size(const json_value *v, size_t *out) {
    if (!v || v->type != JSON_NUMBER) return -1;
    double x = v->u.number;
    if (!(x >= 0.0 && x <= TWO_POW_53) || x != (double)(uint64_t)x) return -1;
    if ((uint64_t)x > SIZE_MAX) return -1;
    *out = (size_t)x;
    return 0;
}

int json_get_int64(const json_value *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER) return -1;
    double x = v->u.number;
    if (!(x >= -TWO_POW_53 && x <= TWO_POW_53) || x != (double)(int64_t)x) return -1;
    *out = (int64_t)x;
    return 0;
}
