/* test_json.c -- the strict JSON parser: accepted documents decode to the
 * values written by hand below; rejected ones fail with "byte N:" at the
 * offending offset. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"

static json_doc *parse(const char *text) {
    as_err err = {{0}};
    json_doc *doc = json_parse(text, strlen(text), &err);
    CHECK(doc != NULL, "parse '%s': %s", text, err.msg);
    return doc;
}

/* Must fail; the message must contain `want` (e.g. "byte 3:"). */
static void reject(const char *text, size_t len, const char *want) {
    as_err err = {{0}};
    json_doc *doc = json_parse(text, len, &err);
    CHECK(doc == NULL, "accepted bad JSON '%s'", text);
    json_free(doc);
    CHECK(strstr(err.msg, want) != NULL, "'%s': message '%s' lacks '%s'", text, err.msg, want);
}
#define REJECT(text, want) reject(text, sizeof(text) - 1, want)

static void test_values(void) {
    json_doc *doc = parse(" {\"a\": [1, -2.5e2, 0, true, false, null], \"b\": {\"c\": \"x\"},"
                          " \"e\": 1E+2, \"f\": -0, \"g\": 0.125} \n");
    if (!doc) return;
    const json_value *r = json_root(doc);
    CHECK(r->type == JSON_OBJECT && r->u.object.count == 5, "root");
    const json_value *a = json_get(r, "a");
    CHECK(a && a->type == JSON_ARRAY && a->u.array.count == 6, "a");
    CHECK(a->u.array.items[0].u.number == 1.0, "a[0]");
    CHECK(a->u.array.items[1].u.number == -250.0, "a[1]");
    CHECK(a->u.array.items[3].type == JSON_TRUE, "true");
    CHECK(a->u.array.items[4].type == JSON_FALSE, "false");
    CHECK(a->u.array.items[5].type == JSON_NULL, "null");
    CHECK(a->offset == 7, "offset of a: %zu", a->offset);
    const json_value *c = json_get(json_get(r, "b"), "c");
    CHECK(c && c->type == JSON_STRING && !strcmp(c->u.string.ptr, "x"), "b.c");
    CHECK(json_get(r, "e")->u.number == 100.0, "1E+2");
    CHECK(json_get(r, "g")->u.number == 0.125, "0.125");
    CHECK(json_get(r, "zz") == NULL, "absent key");
    CHECK(!strcmp(r->u.object.members[1].key, "b"), "file order");
    size_t n;
    int64_t i;
    CHECK(json_get_size(&a->u.array.items[0], &n) == 0 && n == 1, "size");
    CHECK(json_get_size(&a->u.array.items[1], &n) == -1, "negative is not a size");
    CHECK(json_get_int64(&a->u.array.items[1], &i) == 0 && i == -250, "int64");
    CHECK(json_get_size(json_get(r, "g"), &n) == -1, "0.125 is not integral");
    json_free(doc);
}

static void test_strings(void) {
    /* escapes: \" \\ \/ \b \f \n \r \t, BMP \u, surrogate pair U+1F600 = F0 9F 98 80,
     * \u00e9 = C3 A9, raw UTF-8 e-acute passes through, \u0000 embeds a NUL */
    json_doc *doc = parse("[\"q\\\"b\\\\s\\/\\b\\f\\n\\r\\t\", \"\\u0041\\u00e9\\u20AC\","
                          " \"\\ud83d\\ude00\", \"caf\xc3\xa9\", \"a\\u0000b\"]");
    if (!doc) return;
    const json_value *r = json_root(doc);
    const json_value *s = r->u.array.items;
    CHECK(!strcmp(s[0].u.string.ptr, "q\"b\\s/\b\f\n\r\t"), "simple escapes");
    CHECK(!strcmp(s[1].u.string.ptr, "A\xc3\xa9\xe2\x82\xac"), "BMP escapes: %s", s[1].u.string.ptr);
    CHECK(!strcmp(s[2].u.string.ptr, "\xf0\x9f\x98\x80") && s[2].u.string.len == 4, "surrogate pair");
    CHECK(!strcmp(s[3].u.string.ptr, "caf\xc3\xa9"), "raw UTF-8");
    CHECK(s[4].u.string.len == 3 && !memcmp(s[4].u.string.ptr, "a\0b", 3), "embedded NUL");
    json_free(doc);
}

static void test_rejections(void) {
    REJECT("", "byte 0:");
    REJECT("   ", "byte 3:");
    REJECT("{\"a\":1", "byte 6:");
    REJECT("{\"a\":1,}", "byte 7:");         /* trailing comma */
    REJECT("[1,]", "byte 3:");
    REJECT("[1 2]", "byte 3:");
    REJECT("{\"a\" 1}", "byte 5:");
    REJECT("{a:1}", "byte 1:");
    REJECT("01", "byte 0: leading zero");
    REJECT("1.", "byte 0:");
    REJECT("-", "byte 0:");
    REJECT("1e", "byte 0:");
    REJECT("+1", "byte 0:");
    REJECT("NaN", "byte 0:");
    REJECT("1e999", "out of range");
    REJECT("tru", "byte 0:");
    REJECT("nul", "byte 0:");
    REJECT("[] x", "byte 3:");               /* trailing garbage */
    REJECT("\"abc", "unterminated string");
    REJECT("\"a\\x\"", "byte 2: invalid escape '\\x'");
    REJECT("\"a\\u12G4\"", "invalid hex digit");
    REJECT("\"\\u12\"", "byte");
    REJECT("\"\\ud800\"", "byte 1: high surrogate");
    REJECT("\"\\ud800\\u0041\"", "high surrogate");
    REJECT("\"\\udc00\"", "byte 1: unpaired low surrogate");
    REJECT("\"a\tb\"", "byte 2: control character");
    REJECT("\"\xff\"", "byte 1: invalid UTF-8");
    REJECT("\"\xc0\xaf\"", "invalid UTF-8");  /* overlong '/' */
    REJECT("\"\xed\xa0\x80\"", "invalid UTF-8"); /* encoded surrogate */
    REJECT("\"\xe2\x82\"", "invalid UTF-8");  /* truncated sequence */
    REJECT("{\"a\":1,\"a\":2}", "duplicate key \"a\"");
    REJECT("[1]\0", "byte 3:");               /* NUL after the value */
    /* nesting: 64 levels parse, 65 do not */
    char deep[200];
    for (int depth = 64; depth <= 65; depth++) {
        memset(deep, '[', (size_t)depth);
        memset(deep + depth, ']', (size_t)depth);
        as_err err = {{0}};
        json_doc *doc = json_parse(deep, 2 * (size_t)depth, &err);
        if (depth == 64) CHECK(doc != NULL, "64 levels: %s", err.msg);
        else CHECK(doc == NULL && strstr(err.msg, "byte 64: nesting"), "65 levels: %s", err.msg);
        json_free(doc);
    }
}

/* A 50257-key object (vocab.json's size): every key found at its value,
 * iteration in file order, duplicate detection through the hash index. */
static void test_large_object(void) {
    enum { N = 50257 };
    size_t cap = (size_t)N * 24 + 16;
    char *text = malloc(cap);
    size_t len = 0;
    text[len++] = '{';
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"tok\\u00e9%d\":%d", i ? "," : "", i, i);
    text[len++] = '}';
    as_err err = {{0}};
    json_doc *doc = json_parse(text, len, &err);
    CHECK(doc != NULL, "large object: %s", err.msg);
    if (doc) {
        const json_value *r = json_root(doc);
        CHECK(r->u.object.count == N, "count %zu", r->u.object.count);
        int bad = 0;
        char key[32];
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof key, "tok\xc3\xa9%d", i);
            const json_value *v = json_get(r, key);
            if (!v || v->u.number != i) bad++;
            if (strcmp(r->u.object.members[i].key, key)) bad++;
        }
        CHECK(bad == 0, "%d lookups wrong", bad);
        CHECK(json_get(r, "tok\xc3\xa9" "50257") == NULL, "absent key in large object");
        json_free(doc);
    }
    /* make the last key a duplicate of key 7 */
    len = 0;
    text[len++] = '{';
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"k%d\":1", i ? "," : "", i == N - 1 ? 7 : i);
    text[len++] = '}';
    doc = json_parse(text, len, &err);
    CHECK(doc == NULL && strstr(err.msg, "duplicate key \"k7\""), "large duplicate: %s", err.msg);
    json_free(doc);
    free(text);
}

int main(void) {
    test_values();
    test_strings();
    test_rejections();
    test_large_object();
    return check_summary("test_json");
}
