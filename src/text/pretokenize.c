/* pretokenize.c -- GPT-2's pre-tokenizer pattern over the Unicode tables: unicode_class, tokenizer_piece_end. */
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"
#include "unicode_tables.h"

/* ------------------------------------------------------------------ unicode */

static const uint8_t ascii_class[128] = {
    ['\t'] = UC_SPACE, ['\n'] = UC_SPACE, ['\v'] = UC_SPACE, ['\f'] = UC_SPACE, ['\r'] = UC_SPACE,
    [' '] = UC_SPACE,
    ['0'] = UC_NUMBER, ['1'] = UC_NUMBER, ['2'] = UC_NUMBER, ['3'] = UC_NUMBER, ['4'] = UC_NUMBER,
    ['5'] = UC_NUMBER, ['6'] = UC_NUMBER, ['7'] = UC_NUMBER, ['8'] = UC_NUMBER, ['9'] = UC_NUMBER,
    ['A'] = UC_LETTER, ['B'] = UC_LETTER, ['C'] = UC_LETTER, ['D'] = UC_LETTER, ['E'] = UC_LETTER,
    ['F'] = UC_LETTER, ['G'] = UC_LETTER, ['H'] = UC_LETTER, ['I'] = UC_LETTER, ['J'] = UC_LETTER,
    ['K'] = UC_LETTER, ['L'] = UC_LETTER, ['M'] = UC_LETTER, ['N'] = UC_LETTER, ['O'] = UC_LETTER,
    ['P'] = UC_LETTER, ['Q'] = UC_LETTER, ['R'] = UC_LETTER, ['S'] = UC_LETTER, ['T'] = UC_LETTER,
    ['U'] = UC_LETTER, ['V'] = UC_LETTER, ['W'] = UC_LETTER, ['X'] = UC_LETTER, ['Y'] = UC_LETTER,
    ['Z'] = UC_LETTER,
    ['a'] = UC_LETTER, ['b'] = UC_LETTER, ['c'] = UC_LETTER, ['d'] = UC_LETTER, ['e'] = UC_LETTER,
    ['f'] = UC_LETTER, ['g'] = UC_LETTER, ['h'] = UC_LETTER, ['i'] = UC_LETTER, ['j'] = UC_LETTER,
    ['k'] = UC_LETTER, ['l'] = UC_LETTER, ['m'] = UC_LETTER, ['n'] = UC_LETTER, ['o'] = UC_LETTER,
    ['p'] = UC_LETTER, ['q'] = UC_LETTER, ['r'] = UC_LETTER, ['s'] = UC_LETTER, ['t'] = UC_LETTER,
    ['u'] = UC_LETTER, ['v'] = UC_LETTER, ['w'] = UC_LETTER, ['x'] = UC_LETTER, ['y'] = UC_LETTER,
    ['z'] = UC_LETTER,
};

int unicode_class(uint32_t cp) {
    if (cp < 128) return ascii_class[cp];
    switch (cp) { /* White_Space beyond ASCII (PropList.txt) */
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return UC_SPACE;
    default:
        if (cp >= 0x2000 && cp <= 0x200A) return UC_SPACE;
    }
    size_t lo = 0, hi = unicode_letter_number_range_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const unicode_range *r = &unicode_letter_number_ranges[mid];
        if (cp < r->first) hi = mid;
        else if (cp > r->last) lo = mid + 1;
        else return (int)r->cls;
    }
    return UC_OTHER;
}

/* Class of the code unit at pos and its length in bytes. A byte that does
 * not start a well-formed sequence (Unicode 3-7) is a 1-byte UC_OTHER unit. */
static inline int unit_at(const uint8_t *s, size_t len, size_t pos, size_t *unit_len) {
    uint8_t b = s[pos];
    if (b < 0x80) {
        *unit_len = 1;
        return ascii_class[b];
    }
    size_t left = len - pos;
    uint32_t cp;
    if (b >= 0xC2 && b <= 0xDF) {
        if (left < 2 || (s[pos + 1] & 0xC0) != 0x80) goto invalid;
        cp = ((uint32_t)(b & 0x1F) << 6) | (s[pos + 1] & 0x3F);
        *unit_len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        if (left < 3) goto invalid;
        uint8_t b1 = s[pos + 1], b2 = s[pos + 2];
        uint8_t lo1 = b == 0xE0 ? 0xA0 : 0x80, hi1 = b == 0xED ? 0x9F : 0xBF;
        if (b1 < lo1 || b1 > hi1 || (b2 & 0xC0) != 0x80) goto invalid;
        cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(b1 & 0x3F) << 6) | (b2 & 0x3F);
        *unit_len = 3;
    } else if (b >= 0xF0 && b <= 0xF4) {
        if (left < 4) goto invalid;
        uint8_t b1 = s[pos + 1], b2 = s[pos + 2], b3 = s[pos + 3];
        uint8_t lo1 = b == 0xF0 ? 0x90 : 0x80, hi1 = b == 0xF4 ? 0x8F : 0xBF;
        if (b1 < lo1 || b1 > hi1 || (b2 & 0xC0) != 0x80 || (b3 & 0xC0) != 0x80) goto invalid;
        cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(b1 & 0x3F) << 12) |
             ((uint32_t)(b2 & 0x3F) << 6) | (b3 & 0x3F);
        *unit_len = 4;
    } else {
        goto invalid;
    }
    return unicode_class(cp);
invalid:
    *unit_len = 1;
    return UC_OTHER;
}

/* End of the run of units of class cls starting at pos. */
static inline size_t class_run_end(const uint8_t *s, size_t len, size_t pos, int cls) {
    while (pos < len) {
        size_t n;
        if (unit_at(s, len, pos, &n) != cls) break;
        pos += n;
    }
    return pos;
}

/* Alternatives of GPT-2's pattern, tried in order at pos; the first that
 * matches wins (regex alternation is ordered, each branch greedy). */
size_t tokenizer_piece_end(const char *text, size_t len, size_t pos) {
    const uint8_t *s = (const uint8_t *)text;
    if (s[pos] == '\'' && pos + 1 < len) { /* 's|'t|'re|'ve|'m|'ll|'d */
        uint8_t c1 = s[pos + 1];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
        if (pos + 2 < len) {
            uint8_t c2 = s[pos + 2];
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
                return pos + 3;
        }
    }
    size_t n0;
    int cls0 = unit_at(s, len, pos, &n0);
    if (s[pos] == ' ' && pos + 1 < len) { /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ */
        size_t n1;
        int cls1 = unit_at(s, len, pos + 1, &n1);
        if (cls1 != UC_SPACE) return class_run_end(s, len, pos + 1 + n1, cls1);
    }
    if (cls0 != UC_SPACE) return class_run_end(s, len, pos + n0, cls0);
    /* \s+(?!\S) | \s+ : a run followed by non-space gives back its last unit
     * unless that would leave it empty. */
    size_t q = pos, last = pos, units = 0;
    while (q < len) {
        size_t n;
        if (unit_at(s, len, q, &n) != UC_SPACE) break;
        last = q;
        q += n;
        units++;
    }
    if (q == len || units < 2) return q;
    return last;
}

/* ------------------------------------------- Llama 3 and Qwen2 Split regexes */

/* (?i:'s|'t|'re|'ve|'m|'ll|'d): length of the contraction at pos, or 0. Case-insensitive
 * as Oniguruma folds case: U+017F (long s) folds to s. */
static size_t contraction_ci(const uint8_t *s, size_t len, size_t pos) {
    if (s[pos] != '\'' || pos + 1 >= len) return 0;
    uint8_t c1 = s[pos + 1] | 0x20;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (s[pos + 1] == 0xC5 && pos + 2 < len && s[pos + 2] == 0xBF) return 3;
    if (pos + 2 < len) {
        uint8_t c2 = s[pos + 2] | 0x20;
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    }
    return 0;
}

static inline int is_crlf(const uint8_t *s, size_t pos) { return s[pos] == '\r' || s[pos] == '\n'; }

/* The pattern of Llama 3 (max_digits 3) and Qwen2 (max_digits 1), alternatives tried in order:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,max_digits}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * Every code point is matched by one of them, so the pieces tile the text. */
size_t tk_split_llama3_end(const char *text, size_t len, size_t pos, int max_digits) {
    const uint8_t *s = (const uint8_t *)text;
    size_t c = contraction_ci(s, len, pos);
    if (c) return pos + c;
    size_t n0, n1 = 0;
    int cls0 = unit_at(s, len, pos, &n0);
    int cls1 = pos + n0 < len ? unit_at(s, len, pos + n0, &n1) : -1;
    if (cls0 != UC_LETTER && cls0 != UC_NUMBER && !is_crlf(s, pos) && cls1 == UC_LETTER)
        return class_run_end(s, len, pos + n0 + n1, UC_LETTER);
    if (cls0 == UC_LETTER) return class_run_end(s, len, pos + n0, UC_LETTER);
    if (cls0 == UC_NUMBER) {
        size_t q = pos + n0;
        for (int d = 1; d < max_digits && q < len; d++) {
            size_t n;
            if (unit_at(s, len, q, &n) != UC_NUMBER) break;
            q += n;
        }
        return q;
    }
    size_t q = pos;
    if (s[pos] == ' ' && cls1 == UC_OTHER) q = pos + 1;
    if (q < len && unit_at(s, len, q, &n0) == UC_OTHER) {
        q = class_run_end(s, len, q, UC_OTHER);
        while (q < len && is_crlf(s, q)) q++;
        return q;
    }
    /* white space from here: \s*[\r\n]+ ends after the run's last CR or LF */
    size_t end = pos, last = pos, last_crlf = 0, units = 0;
    while (end < len) {
        size_t n;
        if (unit_at(s, len, end, &n) != UC_SPACE) break;
        if (is_crlf(s, end)) last_crlf = end + 1;
        last = end;
        end += n;
        units++;
    }
    if (last_crlf) return last_crlf;
    if (end == len || units < 2) return end; /* \s+(?!\S), else \s+ */
    return last;
}
