/* errors.h -- how library code reports failure.
 *
 * Library functions never exit. They return -1 (or NULL) and fill an as_err
 * with one line that names what is wrong and where: the file, the config key,
 * the tensor. Only main() decides what to do with it. */
#ifndef ATTNSWEEP_ERRORS_H
#define ATTNSWEEP_ERRORS_H

#include <stddef.h>

typedef struct {
    char msg[1024];
} as_err;

/* Formats the message into err (if err is not NULL) and returns -1, so a
 * failing path reads `return as_fail(err, "%s: ...", path);`. */
int as_fail(as_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message: "context: old message". Returns -1. */
int as_wrap(as_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The process exit codes main() turns results into (the README documents them). */
enum {
    AS_EXIT_OK = 0,        /* success */
    AS_EXIT_ERROR = 1,     /* an error: one line on stderr */
    AS_EXIT_USAGE = 2,     /* bad command line */
    AS_EXIT_RESUMABLE = 3, /* interrupted by a stop signal; running again resumes */
};

#endif
