/* config_include.c -- the @include expansion of a config file and its line map to FILE:LINE. */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

/* ------------------------------------------------------------ @include --
 *
 * attnsweep expands @include itself instead of letting libconfig 1.5 open
 * the files: libconfig joins the include folder and the path even when the
 * path is absolute ("CFGDIR//etc/x.cfg"), opens a FIFO and waits forever, and
 * reports a missing file as "cannot open include file" without its name.
 * Here every file is read by fileio_read_all (regular files only, a size
 * limit); a relative path resolves against the folder of the file that
 * includes it, an absolute one is used as it is; the text libconfig parses is
 * the expansion, and a line map turns its line numbers back into FILE:LINE. */

enum { INCLUDE_MAX_DEPTH = 10 };
#define CONFIG_FILE_MAX_BYTES (16 * FILEIO_MiB)


void cfg_exp_free(expansion *x) {
    free(x->text);
    free(x->lines);
    for (size_t i = 0; i < x->n_files; i++) free(x->files[i]);
    free(x->files);
    memset(x, 0, sizeof *x);
}

/* Appends one line (without its newline) of file f, line `line`. */
static void exp_line(expansion *x, const char *s, size_t n, unsigned f, unsigned line) {
    if (x->oom) return;
    if (x->len + n + 2 > x->cap) {
        size_t cap = (x->len + n + 2) * 2;
        char *t = realloc(x->text, cap);
        if (!t) { x->oom = 1; return; }
        x->text = t, x->cap = cap;
    }
    if (x->n_lines == x->lines_cap) {
        size_t cap = x->lines_cap ? x->lines_cap * 2 : 256;
        struct src_line *l = realloc(x->lines, cap * sizeof *l);
        if (!l) { x->oom = 1; return; }
        x->lines = l, x->lines_cap = cap;
    }
    memcpy(x->text + x->len, s, n);
    x->len += n;
    x->text[x->len++] = '\n';
    x->text[x->len] = 0;
    x->lines[x->n_lines++] = (struct src_line){f, line};
}

/* FILE:LINE of line `line` (1-based) of the expansion; 0 when unknown. */
int cfg_exp_where(const expansion *x, int line, const char **file, unsigned *file_line) {
    if (!x || line < 1 || (size_t)line > x->n_lines) return 0;
    *file = x->files[x->lines[line - 1].file];
    *file_line = x->lines[line - 1].line;
    return 1;
}

/* Whether a block comment is open at the end of line s[0..n), given `open` at its start
 * (libconfig's comments: slash-star blocks, // and # to the end of the line). */
static int comment_open_after(const char *s, size_t n, int open) {
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        if (open) {
            if (s[i] == '*' && i + 1 < n && s[i + 1] == '/') open = 0, i++;
        } else if (in_str) {
            if (s[i] == '\\') i++;
            else if (s[i] == '"') in_str = 0;
        } else if (s[i] == '"') {
            in_str = 1;
        } else if (s[i] == '#' || (s[i] == '/' && i + 1 < n && s[i + 1] == '/')) {
            break;
        } else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
            open = 1, i++;
        }
    }
    return open;
}

/* The folder part of path ("." when it has none). */
static void dir_of(char *out, size_t size, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, size, ".");
    else if (slash == path) snprintf(out, size, "/");
    else snprintf(out, size, "%.*s", (int)(slash - path), path);
}

/* Expands file `path` (named so in messages) into x. from/from_line: the
 * @include that asked for it (NULL for the top file). text_out: the top
 * file's bytes, for provenance. */
static int exp_text(expansion *x, const char *path, const char *text, size_t len, const char *dir,
                    int depth, as_err *err);

int cfg_exp_file(expansion *x, const char *path, const char *from, unsigned from_line, int depth,
                 char **text_out, as_err *err) {
    char *text = NULL;
    size_t len = 0;
    if (fileio_read_all(path, CONFIG_FILE_MAX_BYTES, "a config file", &text, &len, err)) {
        if (from) as_wrap(err, "%s:%u: @include", from, from_line);
        return -1;
    }
    char dir[AS_PATH_MAX];
    dir_of(dir, sizeof dir, path);
    int rc = exp_text(x, path, text, len, dir, depth, err);
    if (rc == 0 && text_out) *text_out = text;
    else free(text);
    return rc;
}

int cfg_exp_text(expansion *x, const char *name, const char *text, const char *dir, as_err *err) {
    return exp_text(x, name, text, strlen(text), dir, 0, err);
}

/* Expands text (the bytes of `path`, named so in messages; relative @include paths
 * resolve against dir) into x. */
static int exp_text(expansion *x, const char *path, const char *text, size_t len, const char *dir,
                    int depth, as_err *err) {
    char **files = realloc(x->files, (x->n_files + 1) * sizeof *files);
    if (!files) return as_fail(err, "%s: out of memory", path);
    x->files = files;
    x->files[x->n_files] = malloc(strlen(path) + 1);
    if (!x->files[x->n_files]) return as_fail(err, "%s: out of memory", path);
    strcpy(x->files[x->n_files], path);
    unsigned me = (unsigned)x->n_files++;
    const char *name = x->files[me];
    int rc = 0, comment = 0;
    unsigned line = 1;
    for (size_t i = 0; i < len && rc == 0; line++) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        const char *s = text + i;
        size_t n = e - i, k = 0;
        while (k < n && (s[k] == ' ' || s[k] == '\t')) k++;
        int directive = !comment && n - k > 8 && !memcmp(s + k, "@include", 8) &&
                        (s[k + 8] == ' ' || s[k + 8] == '\t');
        if (directive) {
            k += 8;
            while (k < n && (s[k] == ' ' || s[k] == '\t')) k++;
            char inc[AS_PATH_MAX];
            size_t m = 0;
            int closed = 0;
            if (k < n && s[k] == '"') {
                for (k++; k < n && m + 1 < sizeof inc; k++) {
                    if (s[k] == '\\' && k + 1 < n) inc[m++] = s[++k];
                    else if (s[k] == '"') { closed = 1, k++; break; }
                    else inc[m++] = s[k];
                }
            }
            inc[m] = 0;
            char full[AS_PATH_MAX + 8];
            if (!closed || !m) {
                rc = as_fail(err, "%s:%u: @include needs a file name in double quotes", name, line);
            } else if (depth + 1 >= INCLUDE_MAX_DEPTH) {
                rc = as_fail(err, "%s:%u: @include \"%s\": includes nested more than %d deep (a loop?)",
                             name, line, inc, INCLUDE_MAX_DEPTH);
            } else {
                if (inc[0] == '/' || !strcmp(dir, ".")) snprintf(full, sizeof full, "%s", inc);
                else if (snprintf(full, sizeof full, "%s/%s", dir, inc) >= (int)sizeof full)
                    rc = as_fail(err, "%s:%u: @include \"%s\": path too long", name, line, inc);
                if (rc == 0) rc = cfg_exp_file(x, full, name, line, depth + 1, NULL, err);
            }
            /* what follows the closing quote stays on its line */
            if (rc == 0) exp_line(x, s + k, n - k, me, line);
        } else {
            exp_line(x, s, n, me, line);
            comment = comment_open_after(s, n, comment);
        }
        i = e + 1;
    }
    if (rc == 0 && x->oom) rc = as_fail(err, "%s: out of memory", name);
    return rc;
}
