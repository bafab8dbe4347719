/* install.c -- installing tokenizer files into a model folder (GPT-2's or a synthetic vocabulary) and finding GPT-2's. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "tokenizer_int.h"

/* ------------------------------------------------------- installing files */

static int copy_file(const char *from, const char *to, as_err *err) {
    size_t n;
    char *buf = tk_read_file(from, &n, err);
    if (!buf) return -1;
    FILE *f = fopen(to, "wb");
    if (!f) { free(buf); return as_fail(err, "%s: cannot create: %s", to, strerror(errno)); }
    size_t w = fwrite(buf, 1, n, f);
    free(buf);
    if (fclose(f) || w != n) return as_fail(err, "%s: write error", to);
    return 0;
}

/* Writes s as a JSON string body (byte-level text is printable; only " and \ need escapes). */
static void put_json_token(FILE *f, const uint32_t byte_to_cp[256], const uint8_t *bytes, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = byte_to_cp[bytes[i]];
        if (cp == '"' || cp == '\\') fputc('\\', f);
        char u[4];
        fwrite(u, 1, tk_utf8_put(u, cp), f);
    }
    fputc('"', f);
}
static void put_bpe_token(FILE *f, const uint32_t byte_to_cp[256], const uint8_t *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char u[4];
        fwrite(u, 1, tk_utf8_put(u, byte_to_cp[bytes[i]]), f);
    }
}

static int write_synthetic_vocab(const char *vocab_path, const char *merges_path, size_t vocab_size, as_err *err) {
    static const char letters[] = "etaoinshrdlcumwfgypbvkjxqz";
    uint32_t byte_to_cp[256];
    int cp_to_byte[324];
    uint8_t order[256];
    tk_byte_unicode_tables(byte_to_cp, cp_to_byte, order);
    size_t n_merges = vocab_size - 257;
    /* token strings of the merges, stored back to back; BFS queue = creation order */
    size_t *off = malloc((n_merges + 52) * sizeof *off), *len = malloc((n_merges + 52) * sizeof *len);
    size_t pool_cap = 1 << 16, pool_len = 0;
    uint8_t *pool = malloc(pool_cap);
    FILE *fv = fopen(vocab_path, "wb"), *fm = fopen(merges_path, "wb");
    int rc = -1;
    if (!off || !len || !pool) { as_fail(err, "%s: out of memory", vocab_path); goto done; }
    if (!fv) { as_fail(err, "%s: cannot create: %s", vocab_path, strerror(errno)); goto done; }
    if (!fm) { as_fail(err, "%s: cannot create: %s", merges_path, strerror(errno)); goto done; }
    /* queue: " x" tokens (made by the first merges), then the single letters */
    size_t n_tok = 0, head = 0, made = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < 26; c++) {
            off[n_tok] = pool_len;
            if (pass == 0) pool[pool_len++] = ' ';
            pool[pool_len++] = (uint8_t)letters[c];
            len[n_tok++] = pass == 0 ? 2 : 1;
        }
    fputs("#version: 0.2\n", fm);
    fputc('{', fv);
    for (int i = 0; i < 256; i++) {
        if (i) fputs(", ", fv);
        put_json_token(fv, byte_to_cp, &order[i], 1);
        fprintf(fv, ": %d", i);
    }
    for (; made < n_merges && made < 26; made++) { /* "Ġ" + letter */
        uint8_t sp = ' ';
        put_bpe_token(fm, byte_to_cp, &sp, 1);
        fputc(' ', fm);
        put_bpe_token(fm, byte_to_cp, pool + off[made] + 1, 1);
        fputc('\n', fm);
        fputs(", ", fv);
        put_json_token(fv, byte_to_cp, pool + off[made], 2);
        fprintf(fv, ": %zu", 256 + made);
    }
    /* after the 26 space merges, every queue entry t (BFS) yields t + letter */
    size_t q_end = 52;
    while (made < n_merges) {
        size_t parent = head++;
        for (int c = 0; c < 26 && made < n_merges; c++) {
            if (pool_len + len[parent] + 1 > pool_cap) {
                uint8_t *np = realloc(pool, pool_cap * 2);
                if (!np) { as_fail(err, "%s: out of memory", vocab_path); goto done; }
                pool = np;
                pool_cap *= 2;
            }
            off[q_end] = pool_len;
            memcpy(pool + pool_len, pool + off[parent], len[parent]);
            pool[pool_len + len[parent]] = (uint8_t)letters[c];
            len[q_end] = len[parent] + 1;
            pool_len += len[q_end];
            put_bpe_token(fm, byte_to_cp, pool + off[parent], len[parent]);
            fputc(' ', fm);
            put_bpe_token(fm, byte_to_cp, (const uint8_t *)&letters[c], 1);
            fputc('\n', fm);
            fputs(", ", fv);
            put_json_token(fv, byte_to_cp, pool + off[q_end], len[q_end]);
            fprintf(fv, ": %zu", 256 + made);
            q_end++;
            made++;
        }
    }
    fprintf(fv, ", \"<|endoftext|>\": %zu}", vocab_size - 1);
    rc = 0;
done:
    if (fv && fclose(fv) && rc == 0) rc = as_fail(err, "%s: write error", vocab_path);
    if (fm && fclose(fm) && rc == 0) rc = as_fail(err, "%s: write error", merges_path);
    free(off);
    free(len);
    free(pool);
    return rc;
}

int tokenizer_install_vocab(const char *model_dir, size_t vocab_size, const char *gpt2_files_dir, as_err *err) {
    char vocab_out[4096], merges_out[4096], v[4096], m[4096];
    if (!tk_join_path(vocab_out, sizeof vocab_out, model_dir, "vocab.json") ||
        !tk_join_path(merges_out, sizeof merges_out, model_dir, "merges.txt"))
        return as_fail(err, "%s: path too long", model_dir);
    if (gpt2_files_dir && vocab_size >= 50257 && tk_find_pair(gpt2_files_dir, v, m, sizeof v) == 0) {
        if (copy_file(v, vocab_out, err) || copy_file(m, merges_out, err)) return -1;
        return 1;
    }
    if (vocab_size < 257)
        return as_fail(err, "%s: vocab_size %zu is too small for a byte-level vocabulary (need >= 257)", model_dir, vocab_size);
    if (vocab_size > INT32_MAX) return as_fail(err, "%s: vocab_size %zu too large", model_dir, vocab_size);
    return write_synthetic_vocab(vocab_out, merges_out, vocab_size, err) ? -1 : 0;
}

#ifndef AS_NPM_GPT2_DIR
#define AS_NPM_GPT2_DIR ""
#endif

int tokenizer_find_gpt2_files(char *out, size_t out_cap) {
    const char *env = getenv("ATTNSWEEP_GPT2_VOCAB");
    const char *cands[2] = {env, AS_NPM_GPT2_DIR};
    for (int i = 0; i < 2; i++) {
        if (!cands[i] || !cands[i][0] || !tokenizer_dir_has_files(cands[i])) continue;
        int n = snprintf(out, out_cap, "%s", cands[i]);
        if (n >= 0 && (size_t)n < out_cap) return 0;
    }
    return -1;
}
