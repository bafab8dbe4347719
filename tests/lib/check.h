/* check.h -- the few assertions our C unit tests use.
 *
 * CHECK records a failure and goes on, so one run lists every broken case;
 * check_summary() prints "N passed, N failed" and returns the exit code. */
#ifndef ATTNSWEEP_CHECK_H
#define ATTNSWEEP_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (cond) {                                                       \
            check_passed++;                                               \
        } else {                                                          \
            check_failed++;                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

/* |got - want| <= abs_tol + rel_tol * |want|; NaN equals NaN. label: a string
 * naming the case (build it with snprintf when it needs numbers). */
#define CHECK_CLOSE(got, want, abs_tol, rel_tol, label)                       \
    do {                                                                      \
        double g_ = (got), w_ = (want);                                       \
        int ok_ = (isnan(g_) && isnan(w_)) ||                                 \
                  fabs(g_ - w_) <= (abs_tol) + (rel_tol) * fabs(w_);          \
        CHECK(ok_, "%s: got %.10g want %.10g", (label), g_, w_);              \
    } while (0)

static inline int check_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
