/* errors.c -- see errors.h. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A message is one line, whatever a file name, key or value it quotes holds:
 * control characters are written as \n, \t, \r or \xHH (cut if it gets too long). */
static void one_line(char *msg, size_t size) {
    char out[sizeof ((as_err *)0)->msg];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && n + 5 < sizeof out; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            out[n++] = (char)*p;
        } else {
            const char *esc = *p == '\n' ? "\\n" : *p == '\t' ? "\\t" : *p == '\r' ? "\\r" : NULL;
            n += esc ? (size_t)snprintf(out + n, 3, "%s", esc)
                     : (size_t)snprintf(out + n, 5, "\\x%02x", *p);
        }
    }
    out[n] = 0;
    snprintf(msg, size, "%s", out);
}

int as_fail(as_err *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    one_line(err->msg, sizeof err->msg);
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
    one_line(err->msg, sizeof err->msg);
    return -1;
}
