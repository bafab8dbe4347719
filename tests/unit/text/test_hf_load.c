/* test_hf_load.c -- tokenizer.json without npm: a tiny SentencePiece-style BPE written here
 * (Prepend/Replace "▁", byte fallback, a <s> template) encodes as worked out by hand; the BOS
 * rule and its overrides (tokenizer_config.json, text.add_bos) and the provenance line; the
 * choice of GPT-2's files over tokenizer.json; NFC on known cases; an added token with
 * "normalized": true found in the normalized text; and every refusal of the loader (a
 * pre-tokenizer we do not implement named also inside a Sequence): one line naming
 * tokenizer.json's field and value. The byte-exact comparison with
 * Hugging Face's library is tests/reference/test_hf_tokenizer.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tokenizer.h"

static char tmp[] = "/tmp/hf_load_XXXXXX";

static void write_file(const char *name, const char *s) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
}

/* The tiny tokenizer.json: ids 0-2 specials, 3..258 the byte tokens <0x00>..<0xFF>, then
 * "▁" 259, "a" 260, "b" 261, "ab" 262, "▁ab" 263, "é" 264; merges "a b", "▁ ab". The six
 * strings patch it: model type, normalizer, pre_tokenizer, added token flag, post_processor,
 * extra model fields. */
static char *tiny_json(const char *type, const char *norm, const char *pre, const char *lstrip, const char *post,
                       const char *extra) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n,
                          "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
                          "\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"lstrip\": %s,"
                          " \"rstrip\": false, \"single_word\": false, \"normalized\": false},\n"
                          " {\"id\": 1, \"content\": \"<s>\", \"special\": true},"
                          " {\"id\": 2, \"content\": \"</s>\", \"special\": true}],\n"
                          "\"normalizer\": %s, \"pre_tokenizer\": %s, \"post_processor\": %s, \"decoder\": null,\n"
                          "\"model\": {\"type\": \"%s\", \"unk_token\": \"<unk>\", "
                          "\"byte_fallback\": true, \"fuse_unk\": true%s, \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2",
                          lstrip, norm, pre, post, type, extra);
    for (int b = 0; b < 256; b++) n += (size_t)snprintf(s + n, cap - n, ", \"<0x%02X>\": %d", b, 3 + b);
    n += (size_t)snprintf(s + n, cap - n, ", \"\xe2\x96\x81\": 259, \"a\": 260, \"b\": 261, \"ab\": 262, "
                                          "\"\xe2\x96\x81" "ab\": 263, \"\xc3\xa9\": 264},\n"
                                          "\"merges\": [\"a b\", [\"\xe2\x96\x81\", \"ab\"]]}}\n");
    return s;
}

static const char *SP_NORM = "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"},"
                             " {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]}";
static const char *BOS_TEMPLATE = "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
                                  "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], "
                                  "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}}";

static void write_tiny(const char *type, const char *norm, const char *pre, const char *lstrip, const char *post,
                       const char *extra) {
    char *s = tiny_json(type, norm, pre, lstrip, post, extra);
    write_file("tokenizer.json", s);
    free(s);
}

static void expect_ids(tokenizer *t, const char *text, const int32_t *want, size_t nw, const char *label) {
    as_err err = {0};
    int32_t *got = NULL;
    size_t n = 0;
    int rc = tokenizer_encode_alloc(t, text, strlen(text), &got, &n, &err);
    int same = rc == 0 && n == nw && (!n || !memcmp(got, want, n * sizeof *got));
    CHECK(same, "%s: got %zu ids (first %d), want %zu (first %d) %s", label, n, n ? got[0] : -1, nw, nw ? want[0] : -1, err.msg);
    free(got);
}

static void test_encode(void) {
    write_tiny("BPE", SP_NORM, "null", "false", BOS_TEMPLATE, "");
    as_err err = {0};
    tokenizer *t = tokenizer_load(tmp, &err);
    CHECK(t != NULL, "tiny tokenizer: %s", err.msg);
    if (!t) return;
    CHECK(!strcmp(tokenizer_kind(t), "tokenizer.json BPE"), "kind %s", tokenizer_kind(t));
    CHECK(tokenizer_vocab_size(t) == 265, "vocab size %zu", tokenizer_vocab_size(t));
    CHECK(tokenizer_add_bos(t) == 1 && tokenizer_bos_id(t) == 1, "the template's <s> is the default BOS");
    /* "ab ab" -> "▁ab▁ab" -> ▁ab ▁ab */
    expect_ids(t, "ab ab", (const int32_t[]){1, 263, 263}, 3, "ab ab");
    /* "c" is not in the vocabulary: its byte token <0x63> = 3 + 0x63 */
    expect_ids(t, "abc", (const int32_t[]){1, 263, 3 + 0x63}, 3, "byte fallback");
    /* e + combining acute is not NFC'd here (no NFC normalizer): bytes of U+0301 fall back */
    expect_ids(t, "\xc3\xa9", (const int32_t[]){1, 259, 264}, 3, "a vocabulary character");
    /* added tokens split the text; each segment gets its own "▁" */
    expect_ids(t, "ab</s>ab", (const int32_t[]){1, 263, 2, 263}, 4, "special token inside the text");
    expect_ids(t, "", (const int32_t[]){1}, 1, "empty text: the BOS alone");
    /* invalid UTF-8: U+FFFD, not in the vocabulary: its three bytes */
    expect_ids(t, "\xff", (const int32_t[]){1, 259, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD}, 5, "invalid byte");
    CHECK(tokenizer_set_add_bos(t, 0, &err) == 0, "add_bos off");
    expect_ids(t, "ab", (const int32_t[]){263}, 1, "no BOS");
    char line[1024];
    CHECK(tokenizer_describe(t, line, sizeof line) == 0 && strstr(line, "tokenizer.json sha256=") &&
          strstr(line, "add_bos = false") && strstr(line, "post_processor"), "describe: %s", line);
    CHECK(tokenizer_set_add_bos(t, -1, &err) == 0 && tokenizer_add_bos(t), "back to the default");
    size_t len;
    const char *b = tokenizer_token_bytes(t, 263, &len);
    CHECK(b && len == 3 && !memcmp(b, " ab", 3), "decode of ▁ab is \" ab\"");
    b = tokenizer_token_bytes(t, 3 + 0x0A, &len);
    CHECK(b && len == 1 && b[0] == '\n', "decode of <0x0A> is a newline");
    tokenizer_free(t);
    /* tokenizer_config.json's add_bos_token wins over the template */
    write_file("tokenizer_config.json", "{\"add_bos_token\": false, \"bos_token\": \"<s>\"}");
    t = tokenizer_load(tmp, &err);
    CHECK(t && !tokenizer_add_bos(t) && tokenizer_bos_id(t) == 1, "add_bos_token = false wins");
    tokenizer_free(t);
    write_file("tokenizer_config.json", "{\"add_bos_token\": true, \"bos_token\": {\"content\": \"</s>\"}}");
    t = tokenizer_load(tmp, &err);
    CHECK(t && tokenizer_add_bos(t) && tokenizer_bos_id(t) == 2, "bos_token as an object");
    tokenizer_free(t);
    write_file("tokenizer_config.json", "{\"add_bos_token\": true, \"bos_token\": \"<nope>\"}");
    write_tiny("BPE", SP_NORM, "null", "false", "null", "");
    t = tokenizer_load(tmp, &err);
    CHECK(!t && strstr(err.msg, "tokenizer_config.json") && strstr(err.msg, "add_bos_token"), "unknown bos: %s", err.msg);
    tokenizer_free(t);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp);
    unlink(path);
    t = tokenizer_load(tmp, &err);
    CHECK(t && !tokenizer_add_bos(t), "no template, no config: no BOS");
    CHECK(t && tokenizer_set_add_bos(t, 1, &err) == -1, "add_bos = true with no BOS named is refused");
    CHECK(strstr(err.msg, "text.add_bos"), "the refusal names text.add_bos: %s", err.msg);
    tokenizer_free(t);
}

static void test_refusals(void) {
    static const struct {
        const char *type, *norm, *pre, *lstrip, *post, *extra, *want;
    } bad[] = {
        {"Unigram", "null", "null", "false", "null", "", "model.type = Unigram"},
        {"BPE", "{\"type\": \"NFKC\"}", "null", "false", "null", "", "normalizer = NFKC"},
        {"BPE", "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \" \"}", "null", "false", "null", "",
         "Regex"},
        {"BPE", "null", "{\"type\": \"Metaspace\", \"replacement\": \"x\"}", "false", "null", "", "pre_tokenizer.type = Metaspace"},
        {"BPE", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, "
                        "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                        "\"use_regex\": false}]}", "false", "null", "", "pattern.Regex = \\s+"},
        /* a pre-tokenizer we do not implement is named, alone or inside a Sequence */
        {"BPE", "null", "{\"type\": \"WhitespaceSplit\"}", "false", "null", "", "pre_tokenizer.type = WhitespaceSplit"},
        {"BPE", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Metaspace\", \"replacement\": \"x\", "
                        "\"prepend_scheme\": \"always\", \"split\": false}]}", "false", "null", "",
         "pre_tokenizer.pretokenizers[0].type = Metaspace"},
        {"BPE", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                        "\"use_regex\": false}, {\"type\": \"Digits\", \"individual_digits\": true}]}", "false", "null", "",
         "pre_tokenizer.pretokenizers[1].type = Digits"},
        {"BPE", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"}, {\"use_regex\": false}]}",
         "false", "null", "", "pre_tokenizer.pretokenizers[1].type = (missing)"},
        {"BPE", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"}, {\"type\": \"Split\"}]}",
         "false", "null", "", "pre_tokenizer = this Sequence"},
        {"BPE", "null", "null", "true", "null", "", "added_tokens[0].lstrip = true"},
        {"BPE", "null", "null", "false", "{\"type\": \"BertProcessing\"}", "", "post_processor.type = BertProcessing"},
        {"BPE", "null", "null", "false", "{\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"A\"}}, "
                                         "{\"SpecialToken\": {\"id\": \"</s>\"}}], \"special_tokens\": {}}", "", "post_processor.single = </s>"},
        {"BPE", "null", "null", "false", "null", ", \"continuing_subword_prefix\": \"##\"", "model.continuing_subword_prefix = ##"},
        {"BPE", "null", "null", "false", "null", ", \"dropout\": 0.1", "model.dropout"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_tiny(bad[k].type, bad[k].norm, bad[k].pre, bad[k].lstrip, bad[k].post, bad[k].extra);
        as_err err = {0};
        tokenizer *t = tokenizer_load(tmp, &err);
        CHECK(!t, "case %zu (%s) loaded", k, bad[k].want);
        CHECK(strstr(err.msg, bad[k].want) && strstr(err.msg, "tokenizer.json") && !strchr(err.msg, '\n'),
              "case %zu: want \"%s\" in one line, got: %s", k, bad[k].want, err.msg);
        tokenizer_free(t);
    }
    /* a merge naming a token the vocabulary lacks */
    char *s = tiny_json("BPE", "null", "null", "false", "null", "");
    char *m = strstr(s, "\"a b\"");
    m[1] = 'q';
    write_file("tokenizer.json", s);
    free(s);
    as_err err = {0};
    tokenizer *t = tokenizer_load(tmp, &err);
    CHECK(!t && strstr(err.msg, "model.merges[0]"), "missing merge token: %s", err.msg);
    tokenizer_free(t);
    write_file("tokenizer.json", "{\"model\": [1, 2]}");
    t = tokenizer_load(tmp, &err);
    CHECK(!t && strstr(err.msg, "model"), "model not an object: %s", err.msg);
    write_file("tokenizer.json", "{\"model\": ");
    t = tokenizer_load(tmp, &err);
    CHECK(!t && strstr(err.msg, "tokenizer.json"), "truncated JSON names the file: %s", err.msg);
}

/* An added token with "normalized": true (GPT-NeoX's runs of spaces are such) is looked for
 * in the normalized text, as its content normalized: here "é" is NFC'd and gets the "▁" of
 * Prepend, so it matches "▁é" after the normalizers ran, also when the text spells é as
 * e + U+0301. Worked out by hand: "ab e\u0301" -> NFC "ab é" -> "▁ab▁é" -> ▁ab (263), the added
 * token (265). As a plain added token "é" it would not match the decomposed text at all. */
static void test_normalized_added(void) {
    char *s = tiny_json("BPE", "null", "null", "false", "null", "");
    const char *old = "{\"id\": 2, \"content\": \"</s>\", \"special\": true}";
    const char *add = ", {\"id\": 265, \"content\": \"\xc3\xa9\", \"special\": false, \"normalized\": true}";
    const char *norm = "\"normalizer\": null";
    const char *nfc_sp = "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
                         "{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"}, {\"type\": \"Replace\", "
                         "\"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]}";
    size_t cap = strlen(s) + strlen(add) + strlen(nfc_sp) + 1;
    char *t1 = malloc(cap), *at = strstr(s, old), *nat;
    snprintf(t1, cap, "%.*s%s%s", (int)(at - s + strlen(old)), s, add, at + strlen(old));
    nat = strstr(t1, norm);
    char *t2 = malloc(cap);
    snprintf(t2, cap, "%.*s%s%s", (int)(nat - t1), t1, nfc_sp, nat + strlen(norm));
    write_file("tokenizer.json", t2);
    free(s), free(t1), free(t2);
    as_err err = {0};
    tokenizer *t = tokenizer_load(tmp, &err);
    CHECK(t != NULL, "a normalized added token loads: %s", err.msg);
    if (!t) return;
    CHECK(tokenizer_set_add_bos(t, 0, &err) == 0, "add_bos off");
    expect_ids(t, "ab e\xcc\x81", (const int32_t[]){263, 265}, 2, "normalized added token, decomposed text");
    expect_ids(t, "ab \xc3\xa9", (const int32_t[]){263, 265}, 2, "normalized added token, precomposed text");
    /* at the start the Prepend "▁" belongs to the segment, so "é" alone is "▁é" too */
    expect_ids(t, "\xc3\xa9" "ab", (const int32_t[]){265, 262}, 2, "normalized added token first");
    size_t len;
    const char *b = tokenizer_token_bytes(t, 265, &len);
    CHECK(b && len == 2 && !memcmp(b, "\xc3\xa9", 2), "it decodes as its content, not the normalized form");
    tokenizer_free(t);
}

/* NFC through a tiny byte-level tokenizer.json is awkward; the NFC normalizer is checked by
 * its effect: decomposed and precomposed "é" give the same ids. */
static void test_nfc(void) {
    write_tiny("BPE", "{\"type\": \"NFC\"}", "null", "false", "null", "");
    as_err err = {0};
    tokenizer *t = tokenizer_load(tmp, &err);
    CHECK(t != NULL, "%s", err.msg);
    if (!t) return;
    expect_ids(t, "e\xcc\x81", (const int32_t[]){264}, 1, "e + U+0301 composes to U+00E9");
    expect_ids(t, "\xc3\xa9", (const int32_t[]){264}, 1, "U+00E9 stays");
    /* U+0065 U+0301 U+0323 (acute ccc 230, dot below 220): reordered, e + dot below composes to
     * U+1EB9, which takes no acute -- not in
     * the vocabulary, so byte tokens of E1 BA B9 then CC 81 */
    expect_ids(t, "e\xcc\x81\xcc\xa3",
               (const int32_t[]){3 + 0xE1, 3 + 0xBA, 3 + 0xB9, 3 + 0xCC, 3 + 0x81}, 5, "reordered then composed");
    tokenizer_free(t);
}

/* GPT-2's files win over a tokenizer.json beside them. */
static void test_choice(void) {
    write_tiny("BPE", SP_NORM, "null", "false", "null", "");
    as_err err = {0};
    CHECK(tokenizer_install_vocab(tmp, 300, NULL, &err) == 0, "%s", err.msg);
    tokenizer *t = tokenizer_load(tmp, &err);
    CHECK(t && !strcmp(tokenizer_kind(t), "gpt2"), "GPT-2 files first");
    CHECK(t && tokenizer_bos_id(t) == 299 && !tokenizer_add_bos(t), "GPT-2: <|endoftext|> is the BOS, off by default");
    CHECK(t && tokenizer_set_add_bos(t, 1, &err) == 0, "%s", err.msg);
    expect_ids(t, "", (const int32_t[]){299}, 1, "GPT-2 with add_bos");
    tokenizer_free(t);
}

int main(void) {
    if (!mkdtemp(tmp)) return 1;
    test_encode();
    test_refusals();
    test_normalized_added();
    test_nfc();
    test_choice();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_summary("test_hf_load");
}
