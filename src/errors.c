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
    char prefix[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}
