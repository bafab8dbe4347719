/* case_list.h -- a growing list of labelled byte strings for the tokenizer oracle tests
 * (test_tokenizer_oracle.c, test_hf_tokenizer.c): each test builds its corpus with add() and
 * add_bytes(), then hands every case to both encoders. One list per test program. */
#ifndef AS_TEST_CASE_LIST_H
#define AS_TEST_CASE_LIST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *bytes;
    size_t len;
    char label[64];
} test_case;

static test_case *cases;
static size_t n_cases, cap_cases;

static inline void add_bytes(const char *label, const char *b, size_t n) {
    if (n_cases == cap_cases) {
        cap_cases = cap_cases ? 2 * cap_cases : 256;
        cases = realloc(cases, cap_cases * sizeof *cases);
    }
    test_case *c = &cases[n_cases++];
    c->bytes = malloc(n + 1);
    memcpy(c->bytes, b, n);
    c->len = n;
    snprintf(c->label, sizeof c->label, "%s", label);
}
static inline void add(const char *label, const char *s) { add_bytes(label, s, strlen(s)); }

#endif
