/* nfc.c -- see nfc_int.h. Canonical decomposition, canonical ordering, canonical composition
 * (UAX #15 section 3, the Unicode Standard chapter 3.11), over tools/gen_nfc_tables.py's tables. */
#include "nfc_int.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_int.h"

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
       L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

/* Reads one code point of valid UTF-8 at s (the caller cleaned the text). */
static uint32_t utf8_get(const uint8_t *s, size_t *len) {
    uint8_t b = s[0];
    if (b < 0x80) return *len = 1, b;
    if (b < 0xE0) return *len = 2, ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
    if (b < 0xF0) return *len = 3, ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    *len = 4;
    return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = nfc_ccc_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (nfc_ccc[mid].cp == cp) return nfc_ccc[mid].ccc;
        if (nfc_ccc[mid].cp < cp) lo = mid + 1; else hi = mid;
    }
    return 0;
}

static const nfc_decomp_entry *decomp_of(uint32_t cp) {
    size_t lo = 0, hi = nfc_decomp_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (nfc_decomp[mid].cp == cp) return &nfc_decomp[mid];
        if (nfc_decomp[mid].cp < cp) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

/* The primary composite of a + b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = nfc_comp_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const nfc_comp_entry *e = &nfc_comp[mid];
        if (e->a == a && e->b == b) return e->c;
        if (e->a < a || (e->a == a && e->b < b)) lo = mid + 1; else hi = mid;
    }
    return 0;
}

int tk_nfc_quick_yes(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (s[i] < 0xCC) { i++; continue; } /* ASCII, continuation bytes, and leads below U+0300 */
        size_t l;
        uint32_t cp = utf8_get(s + i, &l);
        i += l;
        size_t lo = 0, hi = nfc_quick_count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (nfc_quick[mid] == cp) return 0;
            if (nfc_quick[mid] < cp) lo = mid + 1; else hi = mid;
        }
    }
    return 1;
}

/* Full canonical decomposition of cp appended to cps (room guaranteed by the caller: 4 per input byte). */
static size_t decompose(uint32_t cp, uint32_t *cps) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t si = cp - S_BASE, t = si % T_COUNT;
        cps[0] = L_BASE + si / N_COUNT;
        cps[1] = V_BASE + (si % N_COUNT) / T_COUNT;
        if (!t) return 2;
        cps[2] = T_BASE + t;
        return 3;
    }
    const nfc_decomp_entry *d = decomp_of(cp);
    if (!d) { cps[0] = cp; return 1; }
    size_t k = decompose(d->a, cps);
    if (d->b) k += decompose(d->b, cps + k);
    return k;
}

int tk_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n, size_t *cap) {
    /* a code point decomposes to at most 18 (U+FDFA is compatibility only; canonical: 4),
     * and every code point takes at least one byte */
    uint32_t *cps = malloc((4 * n + 4) * sizeof *cps);
    if (!cps) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = utf8_get(s + i, &l);
        i += l;
        m += decompose(cp, cps + m);
    }
    /* canonical ordering: a stable insertion sort of each run of non-starters by ccc */
    for (size_t i = 1; i < m; i++) {
        int ci = ccc_of(cps[i]);
        if (!ci) continue;
        uint32_t cp = cps[i];
        size_t j = i;
        while (j > 0 && ccc_of(cps[j - 1]) > ci) { cps[j] = cps[j - 1]; j--; }
        cps[j] = cp;
    }
    /* composition: a character joins the last starter when nothing between them blocks it
     * (nothing between, or the last one between has a lower, non-zero class) */
    size_t w = 0, starter = (size_t)-1;
    for (size_t i = 0; i < m; i++) {
        uint32_t cp = cps[i];
        int c = ccc_of(cp);
        if (starter != (size_t)-1) {
            int last = w == starter + 1 ? -1 : ccc_of(cps[w - 1]);
            uint32_t comp = last == -1 || (last != 0 && last < c) ? compose(cps[starter], cp) : 0;
            if (comp) { cps[starter] = comp; continue; }
        }
        if (c == 0) starter = w;
        cps[w++] = cp;
    }
    if (*cap < 4 * w + 1) {
        uint8_t *g = realloc(*out, 4 * w + 1);
        if (!g) { free(cps); return -1; }
        *out = g;
        *cap = 4 * w + 1;
    }
    size_t o = 0;
    for (size_t i = 0; i < w; i++) o += tk_utf8_put((char *)*out + o, cps[i]);
    *out_n = o;
    free(cps);
    return 0;
}
