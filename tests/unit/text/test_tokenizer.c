/* test_tokenizer.c -- tokenizer tests that need no npm: the synthetic
 * vocabulary, robustness (empty, NUL, invalid UTF-8, a 1 MB run of one
 * letter), heap vs quadratic merge, JSON escapes, error messages. The
 * byte-exact comparison with GPT-2 is test_tokenizer_oracle.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "tokenizer.h"

static char tmp[] = "/tmp/tok_test_XXXXXX";

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
}

/* Reference: OpenAI's encoder.py merge loop on one piece (lowest-ranked pair
 * of merges.txt, every occurrence left to right, repeat), over strings of
 * raw bytes; merges given as parallel arrays of left/right byte strings. */
typedef struct { char *l, *r; } merge_rule;
static size_t ref_bpe(const merge_rule *rules, size_t n_rules, const char *piece, size_t n, char **parts) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) { parts[k] = calloc(n + 1, 1); parts[k][0] = piece[i]; k++; }
    for (;;) {
        size_t best = n_rules;
        for (size_t i = 0; i + 1 < k; i++)
            for (size_t r = 0; r < best; r++)
                if (!strcmp(parts[i], rules[r].l) && !strcmp(parts[i + 1], rules[r].r)) { best = r; break; }
        if (best == n_rules) break;
        size_t o = 0;
        for (size_t i = 0; i < k;) {
            if (i + 1 < k && !strcmp(parts[i], rules[best].l) && !strcmp(parts[i + 1], rules[best].r)) {
                strcat(parts[i], parts[i + 1]);
                free(parts[i + 1]);
                parts[o++] = parts[i];
                i += 2;
            } else parts[o++] = parts[i++];
        }
        k = o;
    }
    return k;
}

static void check_synthetic(size_t size) {
    char dir[256], cmd[512];
    snprintf(dir, sizeof dir, "%s/v%zu", tmp, size);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0, "mkdir");
    as_err err = {{0}};
    CHECK(tokenizer_install_vocab(dir, size, NULL, &err) == 0, "install %zu: %s", size, err.msg);
    tokenizer *t = tokenizer_load(dir, &err);
    CHECK(t != NULL, "load synthetic %zu: %s", size, err.msg);
    if (!t) return;
    CHECK(tokenizer_vocab_size(t) == size, "vocab size %zu want %zu", tokenizer_vocab_size(t), size);
    CHECK(tokenizer_eot_id(t) == (int32_t)size - 1, "eot %d want %zu", tokenizer_eot_id(t), size - 1);
    /* every id present and distinct (sorted by bytes) */
    size_t dup = 0, missing = 0;
    for (size_t i = 0; i < size; i++) {
        size_t li;
        const char *bi = tokenizer_token_bytes(t, (int32_t)i, &li);
        if (!bi) { missing++; continue; }
        if (size <= 5000)
            for (size_t j = i + 1; j < size; j++) {
                size_t lj;
                const char *bj = tokenizer_token_bytes(t, (int32_t)j, &lj);
                dup += bj && li == lj && !memcmp(bi, bj, li);
            }
    }
    CHECK(missing == 0 && dup == 0, "vocab %zu: %zu ids missing, %zu duplicate strings", size, missing, dup);
    const char *text = "The quick brown fox jumps over the lazy dog; the end.\n Émile's café 日本 😀 \xff\x00 ok";
    size_t len = strlen(text) + 5, n = 0, nb = 0;
    int32_t ids[256];
    char back[1024];
    CHECK(tokenizer_encode(t, text, len, ids, 256, &n, &err) == 0, "encode: %s", err.msg);
    CHECK(tokenizer_decode(t, ids, n, back, sizeof back, &nb, &err) == 0 && nb == len && !memcmp(back, text, len),
          "synthetic %zu: decode(encode(x)) != x", size);
    for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && (size_t)ids[i] < size - 1, "id %d out of range", ids[i]);

    /* against the reference merge loop, piece by piece, with merges.txt read here */
    if (size == 5000) {
        char path[300];
        snprintf(path, sizeof path, "%s/merges.txt", dir);
        FILE *f = fopen(path, "r");
        merge_rule *rules = calloc(size, sizeof *rules);
        size_t nr = 0;
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (line[0] == '#') continue;
            line[strcspn(line, "\n")] = 0;
            char *sp = strchr(line, ' ');
            *sp = 0;
            const char *src[2] = {line, sp + 1};
            for (int k = 0; k < 2; k++) { /* synthetic merges use letters and U+0120 (= space) only */
                char *o = calloc(strlen(src[k]) + 1, 1), *w = o;
                for (const char *p = src[k]; *p; p++) {
                    if ((unsigned char)p[0] == 0xC4 && (unsigned char)p[1] == 0xA0) { *w++ = ' '; p++; }
                    else *w++ = *p;
                }
                if (k) rules[nr].r = o; else rules[nr].l = o;
            }
            nr++;
        }
        fclose(f);
        CHECK(nr == size - 257, "merges.txt has %zu merges, want %zu", nr, size - 257);
        const char *words[] = {" the", " tea", "eat", " inshrdl", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", " zebra", "etaoin"};
        for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
            char *parts[64];
            size_t k = ref_bpe(rules, nr, words[w], strlen(words[w]), parts);
            CHECK(tokenizer_encode(t, words[w], strlen(words[w]), ids, 256, &n, &err) == 0, "encode");
            int same = n == k;
            for (size_t i = 0; i < k; i++) {
                size_t l;
                const char *b = same ? tokenizer_token_bytes(t, ids[i], &l) : NULL;
                same = same && b && l == strlen(parts[i]) && !memcmp(b, parts[i], l);
                free(parts[i]);
            }
            CHECK(same, "synthetic BPE of '%s' differs from the reference merge loop (%zu vs %zu parts)", words[w], n, k);
        }
        for (size_t r = 0; r < nr; r++) { free(rules[r].l); free(rules[r].r); }
        free(rules);
    }
    tokenizer_free(t);
}

static void check_robustness(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/v50257", tmp);
    as_err err = {{0}};
    tokenizer *t = tokenizer_load(dir, &err);
    CHECK(t != NULL, "%s", err.msg);
    if (!t) return;
    size_t big = 1 << 20, n = 0, nb = 0;
    char *text = malloc(big), *back = malloc(big);
    int32_t *ids = malloc(big * sizeof *ids), *ids2 = malloc(big * sizeof *ids2);
    CHECK(tokenizer_encode(t, "", 0, ids, 0, &n, &err) == 0 && n == 0, "empty input gives no tokens");
    memset(text, 'e', big);
    clock_t c0 = clock(); /* CPU time: the machine is shared */
    CHECK(tokenizer_encode(t, text, big, ids, big, &n, &err) == 0, "1 MB run: %s", err.msg);
    double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
    CHECK(dt < 3.0, "1 MB run of one letter took %.2f s CPU (want < 3 s: merges must not be quadratic)", dt);
    printf("1 MB of 'e': %zu tokens in %.3f s CPU\n", n, dt);
    CHECK(tokenizer_decode(t, ids, n, back, big, &nb, &err) == 0 && nb == big && !memcmp(back, text, big), "1 MB round trip");
    /* random bytes (invalid UTF-8, NULs): never fails, round-trips, and heap == quadratic */
    uint64_t s = 88172645463325252ull;
    for (int rep = 0; rep < 50; rep++) {
        size_t len = 1 + (size_t)(rep * 977) % 4000;
        for (size_t i = 0; i < len; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            static const char pal[] = "etaoin shr\t\n'\x00\xff\x80\xe2\x82\xac.,!1";
            text[i] = rep % 2 ? (char)(s >> 24) : pal[(s >> 24) % (sizeof pal - 1)];
        }
        tokenizer_set_cache_disabled(t, 1);
        tokenizer_set_heap_threshold(t, 0);
        int ok1 = tokenizer_encode(t, text, len, ids, len, &n, &err) == 0;
        tokenizer_set_heap_threshold(t, SIZE_MAX);
        size_t n2 = 0;
        int ok2 = tokenizer_encode(t, text, len, ids2, len, &n2, &err) == 0;
        CHECK(ok1 && ok2 && n == n2 && !memcmp(ids, ids2, n * sizeof *ids), "rep %d: heap and quadratic merges differ", rep);
        CHECK(tokenizer_decode(t, ids, n, back, big, &nb, &err) == 0 && nb == len && !memcmp(back, text, len), "rep %d: round trip", rep);
    }
    tokenizer_set_cache_disabled(t, 0);
    tokenizer_set_heap_threshold(t, 24);
    /* too small an output buffer is an error, not an overflow */
    CHECK(tokenizer_encode(t, "\xff\xfe\xfd\xfc", 4, ids, 2, &n, &err) == -1, "small buffer must fail");
    CHECK(strstr(err.msg, "too small") != NULL, "message: %s", err.msg);
    int32_t bad[2] = {5, 999999};
    CHECK(tokenizer_decode(t, bad, 2, back, big, &nb, &err) == -1 && strstr(err.msg, "token 1: id 999999"), "bad id: %s", err.msg);
    /* the splitter: spot checks from GPT-2's pattern, by hand */
    const char *cases[][8] = {
        {"Hello world", "Hello", " world", NULL},
        {"a  b", "a", " ", " b", NULL},
        {"a \t\n b", "a", " \t\n", " b", NULL},
        {"x\t\ty", "x", "\t", "\t", "y", NULL},
        {"it's IT'S", "it", "'s", " IT", "'", "S", NULL},
        {"'''s", "'''", "s", NULL},
        {" 's  ", " '", "s", "  ", NULL},
        {"x ... 12ab", "x", " ...", " 12", "ab", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *in = cases[c][0];
        size_t len = strlen(in), pos = 0, k = 1;
        int ok = 1;
        while (pos < len) {
            size_t e = tokenizer_piece_end(in, len, pos);
            const char *w = cases[c][k++];
            ok = ok && w && strlen(w) == e - pos && !memcmp(w, in + pos, e - pos);
            pos = e;
        }
        CHECK(ok && cases[c][k] == NULL, "split of '%s'", in);
    }
    free(text); free(back); free(ids); free(ids2);
    tokenizer_free(t);
}

static void check_files(void) {
    char dir[256], path[300], path2[300];
    as_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/esc", tmp);
    snprintf(path, sizeof path, "mkdir -p %s", dir);
    CHECK(system(path) == 0, "mkdir");
    /* vocab.json written with \u escapes for every byte (GPT-2 order), + "\u0120t" */
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{ ", f);
    int id = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0, n = 0; b < 256; b++) {
            int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            if (pass == 0 && printable) fprintf(f, "\"\\u%04x\" : %d,\n", b, id++);
            if (!printable) { if (pass == 1) fprintf(f, "\"\\u%04X\":%d,", 256 + n, id++); n++; }
        }
    fprintf(f, "\"\\u0120t\": 256, \"<|endoftext|>\": 257 }\n");
    fclose(f);
    snprintf(path2, sizeof path2, "%s/vocab.bpe", dir);
    write_text(path2, "#version: 0.2\n\xc4\xa0 t\n");
    tokenizer *t = tokenizer_load(dir, &err);
    CHECK(t != NULL, "escaped vocab: %s", err.msg);
    if (t) {
        int32_t ids[8];
        size_t n = 0;
        CHECK(tokenizer_encode(t, " t\"\\", 4, ids, 8, &n, &err) == 0 && n == 3 && ids[0] == 256 && ids[1] == '"' - 33 && ids[2] == '\\' - 33,
              "escaped vocab encode: n=%zu", n);
        CHECK(tokenizer_eot_id(t) == 257, "eot");
        tokenizer_free(t);
    }
    struct { const char *vocab, *merges, *want; } bad[] = {
        {"{\"a\": 1", "", "unterminated|expected"},
        {"{\"\\ud83d\\ude00\": 0}", "", "not in GPT-2's byte-level alphabet"},
        {"{\"\\ud83d\": 0}", "", "surrogate"},
        {"{\"a\": 1.5}", "", "integer"},
        {"[1, 2]", "", "JSON object"},
        {"{\"a\": 0}", "", "no token for byte"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(path, bad[i].vocab);
        t = tokenizer_load(dir, &err);
        CHECK(t == NULL, "bad vocab %zu accepted", i);
        int found = 0;
        char want[128];
        snprintf(want, sizeof want, "%s", bad[i].want);
        for (char *w = strtok(want, "|"); w; w = strtok(NULL, "|")) found |= strstr(err.msg, w) != NULL;
        CHECK(found && strstr(err.msg, "encoder.json"), "bad vocab %zu: message '%s' lacks '%s' or the file name", i, err.msg, bad[i].want);
        tokenizer_free(t);
    }
    /* merges naming a token the vocabulary lacks: error names file and line */
    snprintf(dir, sizeof dir, "%s/v300", tmp);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    f = fopen(path, "a");
    fputs("zz qq\n", f);
    fclose(f);
    t = tokenizer_load(dir, &err);
    CHECK(t == NULL && strstr(err.msg, "merges.txt: line 45:"), "bad merge: %s", err.msg);
    CHECK(tokenizer_load("/nonexistent/dir", &err) == NULL && strstr(err.msg, "/nonexistent/dir: no tokenizer files"), "missing dir: %s", err.msg);
    CHECK(tokenizer_install_vocab(dir, 256, NULL, &err) == -1 && strstr(err.msg, "257"), "vocab 256: %s", err.msg);
    /* search order: $ATTNSWEEP_GPT2_VOCAB first */
    char found[4096];
    snprintf(dir, sizeof dir, "%s/esc", tmp);
    setenv("ATTNSWEEP_GPT2_VOCAB", dir, 1);
    CHECK(tokenizer_find_gpt2_files(found, sizeof found) == 0 && !strcmp(found, dir), "env dir not used");
    setenv("ATTNSWEEP_GPT2_VOCAB", "/nonexistent", 1);
    CHECK(tokenizer_find_gpt2_files(found, sizeof found) == -1 || strcmp(found, "/nonexistent"), "bad env dir used");
}

int main(void) {
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    check_synthetic(257);
    check_synthetic(300);
    check_synthetic(5000);
    check_synthetic(50257);
    check_robustness();
    check_files();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_summary("test_tokenizer");
}
