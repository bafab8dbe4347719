/* errors.c -- see errors.h. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int as_fail(as_err *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int as_wrap(as_err *err, const char *fmt, ...) {
    if (!err) return -1;
    char prefix[512], out[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* prefix is shorter than out, so "prefix: " always fits; the old message
     * is cut if the two together are too long. */
    size_t n = strlen(prefix);
    memcpy(out, prefix, n);
    out[n++] = ':';
    out[n++] = ' ';
    size_t room = sizeof out - n - 1, old = strnlen(err->msg, sizeof err->msg);
    if (old > room) old = room;
    memcpy(out + n, err->msg, old);
    out[n + old] = 0;
    memcpy(err->msg, out, sizeof out);
    return -1;
}
