/* config.c -- see config.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unistd.h>

#include "fileio.h"
#include "sha256.h"

/* ---------------------------------------------------------------- keys -- */

const char *const config_known_keys[] = {
    "model", "output",
    "text.path", "text.format", "text.strip_gutenberg", "text.start_at", "text.start_occurrence",
    "windows.count", "windows.offset", "windows.stride",
    "grid.L", "grid.N", "grid.T", "grid.T.min", "grid.T.max", "grid.T.count",
    "grid.T.spacing", "grid.T.include", "grid.eps", "grid.normalizer", "grid.layers",
    "grid.heads",
    "metrics.vectors", "metrics.rows", "metrics.logits", "metrics.distance",
    "metrics.ks_alpha",
    "metrics.ssmax_scale", "metrics.seed",
    "runtime.blas_threads", "runtime.commit_every", "runtime.compress", "runtime.stop_grace",
    NULL,
};

/* Keys that hold members (grid.T may also be a plain list). */
static const char *const group_keys[] = {"text", "windows", "grid", "grid.T", "metrics",
                                         "runtime", NULL};

static int in_list(const char *const *list, const char *key) {
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(list[i], key)) return 1;
    return 0;
}

static int is_known_key(const char *key) {
    return in_list(config_known_keys, key) || in_list(group_keys, key);
}

static int lower(int c) { return tolower((unsigned char)c); }

/* Case-insensitive edit distance (for "did you mean"). */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63) la = 63;
    if (lb > 63) lb = 63;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (lower(a[i - 1]) != lower(b[j - 1]));
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

/* The known key closest to `key`: its last component against each known
 * key's last component, plus one when the parent differs (so `seed` at the
 * top level suggests metrics.seed). */
static const char *closest_known_key(const char *key) {
    const char *dot = strrchr(key, '.');
    const char *name = dot ? dot + 1 : key;
    size_t parent_len = dot ? (size_t)(dot - key) : 0;
    const char *best = NULL;
    size_t best_score = (size_t)-1;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *list = pass ? group_keys : config_known_keys;
        for (size_t i = 0; list[i]; i++) {
            const char *k = list[i];
            const char *kd = strrchr(k, '.');
            const char *kname = kd ? kd + 1 : k;
            size_t kparent_len = kd ? (size_t)(kd - k) : 0;
            int same_parent = kparent_len == parent_len && !strncmp(k, key, parent_len);
            size_t score = edit_distance(name, kname) + (same_parent ? 0 : 1);
            if (score < best_score) best_score = score, best = k;
        }
    }
    return best;
}

/* ------------------------------------------------------------- context -- */

static int override_mark; /* the hook of settings that came from --set */

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

typedef struct {
    char *text;
    size_t len, cap;
    struct src_line {
        unsigned file; /* index into files */
        unsigned line; /* 1-based */
    } *lines;
    size_t n_lines, lines_cap;
    char **files;
    size_t n_files;
    int oom;
} expansion;

static void exp_free(expansion *x) {
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
static int exp_where(const expansion *x, int line, const char **file, unsigned *file_line) {
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
static int exp_file(expansion *x, const char *path, const char *from, unsigned from_line, int depth,
                    char **text_out, as_err *err) {
    char *text = NULL;
    size_t len = 0;
    if (fileio_read_all(path, CONFIG_FILE_MAX_BYTES, "a config file", &text, &len, err)) {
        if (from) as_wrap(err, "%s:%u: @include", from, from_line);
        return -1;
    }
    char **files = realloc(x->files, (x->n_files + 1) * sizeof *files);
    if (!files) return free(text), as_fail(err, "%s: out of memory", path);
    x->files = files;
    x->files[x->n_files] = malloc(strlen(path) + 1);
    if (!x->files[x->n_files]) return free(text), as_fail(err, "%s: out of memory", path);
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
            char dir[AS_PATH_MAX];
            if (!closed || !m) {
                rc = as_fail(err, "%s:%u: @include needs a file name in double quotes", name, line);
            } else if (depth + 1 >= INCLUDE_MAX_DEPTH) {
                rc = as_fail(err, "%s:%u: @include \"%s\": includes nested more than %d deep (a loop?)",
                             name, line, inc, INCLUDE_MAX_DEPTH);
            } else {
                dir_of(dir, sizeof dir, path);
                if (inc[0] == '/' || !strcmp(dir, ".")) snprintf(full, sizeof full, "%s", inc);
                else if (snprintf(full, sizeof full, "%s/%s", dir, inc) >= (int)sizeof full)
                    rc = as_fail(err, "%s:%u: @include \"%s\": path too long", name, line, inc);
                if (rc == 0) rc = exp_file(x, full, name, line, depth + 1, NULL, err);
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
    if (rc == 0 && text_out) *text_out = text;
    else free(text);
    return rc;
}

typedef struct {
    config_t lc;
    const char *path; /* the config file as given */
    as_err *err;
    const expansion *x; /* the parsed text's line map */
} ctx;

static int from_override(const config_setting_t *s) {
    for (; s; s = config_setting_parent(s))
        if (config_setting_get_hook(s) == &override_mark) return 1;
    return 0;
}

/* "FILE:LINE: KEY: message", or "--set KEY: message", or "FILE: KEY: message". */
static int fail_key(ctx *c, const config_setting_t *s, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_key(ctx *c, const config_setting_t *s, const char *key, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s && from_override(s)) return as_fail(c->err, "--set %s: %s", key, msg);
    const char *file;
    unsigned line;
    if (s && exp_where(c->x, (int)config_setting_source_line(s), &file, &line))
        return as_fail(c->err, "%s:%u: %s: %s", file, line, key, msg);
    return as_fail(c->err, "%s: %s: %s", c->path, key, msg);
}

static const char *type_name(const config_setting_t *s) {
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    default: return "nothing";
    }
}

static int is_int(const config_setting_t *s) {
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}
static int is_number(const config_setting_t *s) {
    return is_int(s) || config_setting_type(s) == CONFIG_TYPE_FLOAT;
}
static int is_sequence(const config_setting_t *s) {
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST;
}
static double number_of(const config_setting_t *s) {
    if (config_setting_type(s) == CONFIG_TYPE_FLOAT) return config_setting_get_float(s);
    return (double)config_setting_get_int64(s);
}

/* The setting at a dotted key, or NULL when a part is missing or a parent is
 * not a group. */
static config_setting_t *find_key(config_setting_t *root, const char *key) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", key);
    config_setting_t *s = root;
    char *save = NULL;
    for (char *part = strtok_r(buf, ".", &save); part; part = strtok_r(NULL, ".", &save)) {
        if (!s || config_setting_type(s) != CONFIG_TYPE_GROUP) return NULL;
        s = config_setting_get_member(s, part);
    }
    return s;
}

static config_setting_t *get(ctx *c, const char *key) {
    return find_key(config_root_setting(&c->lc), key);
}

/* Refuses unknown keys anywhere in the tree. */
static int check_unknown(ctx *c, config_setting_t *group, const char *prefix) {
    for (int i = 0; i < config_setting_length(group); i++) {
        config_setting_t *m = config_setting_get_elem(group, (unsigned)i);
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", config_setting_name(m));
        if (!is_known_key(key))
            return fail_key(c, m, key, "unknown key (did you mean %s?)", closest_known_key(key));
        if (config_setting_type(m) == CONFIG_TYPE_GROUP && in_list(group_keys, key))
            if (check_unknown(c, m, key)) return -1;
    }
    return 0;
}

/* Every parent of a leaf key must be a group when present. */
static int check_groups(ctx *c) {
    for (size_t i = 0; group_keys[i]; i++) {
        if (!strcmp(group_keys[i], "grid.T")) continue; /* may be a list */
        config_setting_t *s = get(c, group_keys[i]);
        if (s && config_setting_type(s) != CONFIG_TYPE_GROUP)
            return fail_key(c, s, group_keys[i], "expected a group { ... }, got %s",
                            type_name(s));
    }
    return 0;
}

/* ------------------------------------------------------- scalar getters -- */

static int get_string(ctx *c, const char *key, const char *def, const char **out) {
    config_setting_t *s = get(c, key);
    if (!s) {
        if (!def) return as_fail(c->err, "%s: missing key %s (it has no default)", c->path, key);
        *out = def;
        return 0;
    }
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return fail_key(c, s, key, "expected a string, got %s", type_name(s));
    *out = config_setting_get_string(s);
    return 0;
}

static int get_bool(ctx *c, const char *key, int def, int *out) {
    config_setting_t *s = get(c, key);
    if (!s) return *out = def, 0;
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return fail_key(c, s, key, "expected true or false, got %s", type_name(s));
    *out = config_setting_get_bool(s);
    return 0;
}

static int get_int64(ctx *c, const char *key, int64_t def, int64_t *out) {
    config_setting_t *s = get(c, key);
    if (!s) return *out = def, 0;
    if (!is_int(s)) return fail_key(c, s, key, "expected an integer, got %s", type_name(s));
    *out = config_setting_get_int64(s);
    return 0;
}

/* A float key also takes an integer literal. */
static int get_double(ctx *c, const char *key, double def, double *out) {
    config_setting_t *s = get(c, key);
    if (!s) return *out = def, 0;
    if (!is_number(s)) return fail_key(c, s, key, "expected a number, got %s", type_name(s));
    *out = number_of(s);
    if (!isfinite(*out)) return fail_key(c, s, key, "must be finite");
    return 0;
}

/* One of the NULL-terminated names; *out = its index. */
static int get_choice(ctx *c, const char *key, const char *const *names, int def, int *out) {
    const char *v;
    if (get_string(c, key, names[def], &v)) return -1;
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) return *out = i, 0;
    char allowed[256] = "";
    for (int i = 0; names[i]; i++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s\"%s\"",
                 i ? " | " : "", names[i]);
    return fail_key(c, get(c, key), key, "\"%s\" is not one of %s", v, allowed);
}

/* --------------------------------------------------------------- axes -- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}
static int cmp_f64(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts ascending; an exact duplicate is an error naming the key. */
static int sort_unique_i32(ctx *c, const config_setting_t *s, const char *key, int32_t *v,
                           size_t n) {
    qsort(v, n, sizeof *v, cmp_i32);
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1]) return fail_key(c, s, key, "duplicate value %d", (int)v[i]);
    return 0;
}
static int sort_unique_f64(ctx *c, const config_setting_t *s, const char *key, double *v,
                           size_t n) {
    qsort(v, n, sizeof *v, cmp_f64);
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1]) return fail_key(c, s, key, "duplicate value %.17g", v[i]);
    return 0;
}

#define AS_AXIS_MAX ((size_t)1 << 20)

/* An integer scalar or a non-empty array/list of integers in int32 range. */
static int read_int_list(ctx *c, config_setting_t *s, const char *key, int32_t **out,
                         size_t *n) {
    size_t count = is_sequence(s) ? (size_t)config_setting_length(s) : 1;
    if (!is_sequence(s) && !is_int(s))
        return fail_key(c, s, key, "expected a list of integers, got %s", type_name(s));
    if (count == 0) return fail_key(c, s, key, "empty list");
    int32_t *v = malloc(count * sizeof *v);
    if (!v) return fail_key(c, s, key, "out of memory");
    for (size_t i = 0; i < count; i++) {
        config_setting_t *e = is_sequence(s) ? config_setting_get_elem(s, (unsigned)i) : s;
        if (!is_int(e)) {
            free(v);
            return fail_key(c, s, key, "element %zu: expected an integer, got %s", i,
                            type_name(e));
        }
        long long x = config_setting_get_int64(e);
        if (x < INT32_MIN || x > INT32_MAX) {
            free(v);
            return fail_key(c, s, key, "element %zu: %lld is out of range", i, x);
        }
        v[i] = (int32_t)x;
    }
    *out = v, *n = count;
    return 0;
}

/* A number or a non-empty array/list of numbers (integers accepted). */
static int read_double_list(ctx *c, config_setting_t *s, const char *key, double **out,
                            size_t *n) {
    size_t count = is_sequence(s) ? (size_t)config_setting_length(s) : 1;
    if (!is_sequence(s) && !is_number(s))
        return fail_key(c, s, key, "expected a list of numbers, got %s", type_name(s));
    if (count == 0) return fail_key(c, s, key, "empty list");
    double *v = malloc(count * sizeof *v);
    if (!v) return fail_key(c, s, key, "out of memory");
    for (size_t i = 0; i < count; i++) {
        config_setting_t *e = is_sequence(s) ? config_setting_get_elem(s, (unsigned)i) : s;
        if (!is_number(e)) {
            free(v);
            return fail_key(c, s, key, "element %zu: expected a number, got %s", i,
                            type_name(e));
        }
        v[i] = number_of(e);
        if (!isfinite(v[i])) {
            free(v);
            return fail_key(c, s, key, "element %zu: must be finite", i);
        }
    }
    *out = v, *n = count;
    return 0;
}

static int parse_int_part(const char *p, const char *end, long long *out) {
    while (p < end && isspace((unsigned char)*p)) p++;
    while (end > p && isspace((unsigned char)end[-1])) end--;
    if (p == end) return -1;
    char buf[32];
    if ((size_t)(end - p) >= sizeof buf) return -1;
    memcpy(buf, p, (size_t)(end - p));
    buf[end - p] = 0;
    char *stop;
    errno = 0;
    long long v = strtoll(buf, &stop, 10);
    if (*stop || errno) return -1;
    *out = v;
    return 0;
}

int config_parse_range(int32_t **values, size_t *count, const char *text, as_err *err) {
    long long part[3] = {0, 0, 1};
    int nparts = 0;
    const char *p = text;
    for (;;) {
        const char *colon = strchr(p, ':');
        const char *end = colon ? colon : p + strlen(p);
        if (nparts == 3 || parse_int_part(p, end, &part[nparts]))
            return as_fail(err, "\"%s\" is not a range \"a:b\" or \"a:b:step\" of integers", text);
        nparts++;
        if (!colon) break;
        p = colon + 1;
    }
    if (nparts < 2)
        return as_fail(err, "\"%s\" is not a range \"a:b\" or \"a:b:step\" of integers", text);
    long long a = part[0], b = part[1], step = part[2];
    if (step < 1) return as_fail(err, "range \"%s\": step must be >= 1", text);
    if (b < a) return as_fail(err, "range \"%s\": end %lld is below start %lld", text, b, a);
    if (a < INT32_MIN || b > INT32_MAX) return as_fail(err, "range \"%s\": out of range", text);
    unsigned long long n = (unsigned long long)((b - a) / step) + 1;
    if (n > AS_AXIS_MAX)
        return as_fail(err, "range \"%s\": %llu values, more than %zu", text, n, AS_AXIS_MAX);
    int32_t *v = malloc(n * sizeof *v);
    if (!v) return as_fail(err, "range \"%s\": out of memory", text);
    for (unsigned long long i = 0; i < n; i++) v[i] = (int32_t)(a + (long long)i * step);
    *values = v, *count = (size_t)n;
    return 0;
}

int config_make_T(double **values, size_t *count, double min, double max, int64_t n,
                  int log_spacing, const double *include, size_t n_include, as_err *err) {
    if (n < 1) return as_fail(err, "count must be >= 1");
    if (n > (int64_t)AS_AXIS_MAX) return as_fail(err, "count %lld is too large", (long long)n);
    if (!(min > 0)) return as_fail(err, "min must be > 0, got %g", min);
    if (!(max >= min)) return as_fail(err, "max (%g) must be >= min (%g)", max, min);
    if (n == 1 && max != min) return as_fail(err, "count = 1 needs min == max");
    if (n > 1 && max == min) return as_fail(err, "min == max needs count = 1");
    for (size_t i = 0; i < n_include; i++) {
        if (!(include[i] > 0)) return as_fail(err, "include: %g must be > 0", include[i]);
        for (size_t j = 0; j < i; j++)
            if (include[j] == include[i])
                return as_fail(err, "include: duplicate value %.17g", include[i]);
    }
    double *v = malloc(((size_t)n + n_include) * sizeof *v);
    if (!v) return as_fail(err, "out of memory");
    size_t m = 0;
    double lmin = log10(min), lmax = log10(max);
    for (int64_t i = 0; i < n; i++) {
        double f = n > 1 ? (double)i / (double)(n - 1) : 0.0;
        if (i == 0) v[m++] = min;
        else if (i == n - 1) v[m++] = max;
        else v[m++] = log_spacing ? pow(10.0, lmin + f * (lmax - lmin)) : min + f * (max - min);
    }
    /* An include value within 1e-9 (relative) of a generated one replaces it:
     * the typed value is the one a user will select on. */
    for (size_t i = 0; i < n_include; i++) {
        size_t k = 0;
        for (; k < (size_t)n; k++)
            if (fabs(v[k] - include[i]) <= 1e-9 * fabs(include[i])) break;
        if (k < (size_t)n) v[k] = include[i];
        else v[m++] = include[i];
    }
    qsort(v, m, sizeof *v, cmp_f64);
    for (size_t i = 1; i < m; i++)
        if (v[i] == v[i - 1]) {
            double same = v[i];
            free(v);
            return as_fail(err, "include: %.17g coincides with another value", same);
        }
    *values = v, *count = m;
    return 0;
}

static int read_N(ctx *c, as_axes *ax) {
    const char *key = "grid.N";
    config_setting_t *s = get(c, key);
    if (s && config_setting_type(s) != CONFIG_TYPE_STRING) {
        if (read_int_list(c, s, key, &ax->N, &ax->n_N)) return -1;
    } else {
        const char *text = s ? config_setting_get_string(s) : "1:128";
        as_err e;
        if (config_parse_range(&ax->N, &ax->n_N, text, &e)) return fail_key(c, s, key, "%s", e.msg);
    }
    if (sort_unique_i32(c, s, key, ax->N, ax->n_N)) return -1;
    if (ax->N[0] < 1) return fail_key(c, s, key, "%d: N must be >= 1", (int)ax->N[0]);
    return 0;
}

static int read_T(ctx *c, as_axes *ax) {
    config_setting_t *s = get(c, "grid.T");
    if (s && config_setting_type(s) != CONFIG_TYPE_GROUP) {
        if (read_double_list(c, s, "grid.T", &ax->T, &ax->n_T)) return -1;
        if (sort_unique_f64(c, s, "grid.T", ax->T, ax->n_T)) return -1;
        if (!(ax->T[0] > 0)) return fail_key(c, s, "grid.T", "%g: T must be > 0", ax->T[0]);
        return 0;
    }
    double min, max;
    int64_t count;
    int spacing;
    static const char *const spacings[] = {"linear", "log", NULL};
    if (get_double(c, "grid.T.min", 1e-3, &min) || get_double(c, "grid.T.max", 1e2, &max) ||
        get_int64(c, "grid.T.count", 21, &count) ||
        get_choice(c, "grid.T.spacing", spacings, 1, &spacing))
        return -1;
    if (!(min > 0)) return fail_key(c, get(c, "grid.T.min"), "grid.T.min", "T must be > 0, got %g", min);
    if (count < 1) return fail_key(c, get(c, "grid.T.count"), "grid.T.count", "must be >= 1");
    if (max < min)
        return fail_key(c, get(c, "grid.T.max"), "grid.T.max", "%g is below grid.T.min = %g", max, min);
    double *inc = NULL;
    size_t n_inc = 0;
    config_setting_t *si = get(c, "grid.T.include");
    if (si) {
        if (is_sequence(si) && config_setting_length(si) == 0) {
            /* include = [] means none */
        } else if (read_double_list(c, si, "grid.T.include", &inc, &n_inc)) {
            return -1;
        }
    } else if (!s) {
        static double native = 8.0; /* GPT-2's own attention temperature (docs/metrics.md section 1) */
        inc = malloc(sizeof *inc);
        if (!inc) return as_fail(c->err, "out of memory");
        inc[0] = native, n_inc = 1;
    }
    as_err e;
    int rc = config_make_T(&ax->T, &ax->n_T, min, max, count, spacing == 1, inc, n_inc, &e);
    free(inc);
    if (rc) {
        const char *sub = strstr(e.msg, "include") == e.msg ? "grid.T.include"
                          : strstr(e.msg, "count") == e.msg ? "grid.T.count" : "grid.T";
        return fail_key(c, get(c, sub) ? get(c, sub) : s, sub, "%s", e.msg);
    }
    return 0;
}

const char *config_logits_name(as_logits l) { return l == AS_LOGITS_SCALED ? "scaled" : "raw"; }

static int read_normalizer(ctx *c, as_axes *ax) {
    const char *key = "grid.normalizer";
    config_setting_t *s = get(c, key);
    size_t n = !s ? 1 : is_sequence(s) ? (size_t)config_setting_length(s) : 1;
    if (s && !is_sequence(s) && config_setting_type(s) != CONFIG_TYPE_STRING)
        return fail_key(c, s, key, "expected a list of strings, got %s", type_name(s));
    if (n == 0) return fail_key(c, s, key, "empty list");
    if (n > 3) return fail_key(c, s, key, "%zu entries: each of softmax, sparsemax, ssmax at most once", n);
    ax->normalizer = malloc(n * sizeof *ax->normalizer);
    if (!ax->normalizer) return as_fail(c->err, "out of memory");
    ax->n_norm = 0;
    int has_softmax = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = "softmax";
        if (s) {
            config_setting_t *e = is_sequence(s) ? config_setting_get_elem(s, (unsigned)i) : s;
            if (config_setting_type(e) != CONFIG_TYPE_STRING)
                return fail_key(c, s, key, "element %zu: expected a string, got %s", i,
                                type_name(e));
            name = config_setting_get_string(e);
        }
        int z = met_normalizer_from_name(name);
        if (z < 0) {
            met_normalizer best = MET_SOFTMAX;
            for (int k = 1; k < MET_N_NORMALIZERS; k++)
                if (edit_distance(name, met_normalizer_name((met_normalizer)k)) <
                    edit_distance(name, met_normalizer_name(best)))
                    best = (met_normalizer)k;
            return fail_key(c, s, key, "unknown normalizer \"%s\" (did you mean %s?)", name,
                            met_normalizer_name(best));
        }
        for (size_t k = 0; k < ax->n_norm; k++)
            if ((int)ax->normalizer[k] == z)
                return fail_key(c, s, key, "duplicate value \"%s\"", name);
        if (z == MET_SOFTMAX) has_softmax = 1;
        else ax->normalizer[ax->n_norm++] = (met_normalizer)z;
    }
    /* softmax is always first (docs/metrics.md section 10) */
    if (has_softmax) {
        memmove(ax->normalizer + 1, ax->normalizer, ax->n_norm * sizeof *ax->normalizer);
        ax->normalizer[0] = MET_SOFTMAX;
        ax->n_norm++;
    }
    return 0;
}

/* "all" or a list of indices in [0, limit). */
static int read_index_list(ctx *c, const char *key, size_t limit, const char *what,
                           int32_t **out, size_t *n) {
    config_setting_t *s = get(c, key);
    if (!s || config_setting_type(s) == CONFIG_TYPE_STRING) {
        if (s && strcmp(config_setting_get_string(s), "all"))
            return fail_key(c, s, key, "\"%s\": expected \"all\" or a list of indices",
                            config_setting_get_string(s));
        *out = malloc((limit ? limit : 1) * sizeof **out);
        if (!*out) return as_fail(c->err, "out of memory");
        for (size_t i = 0; i < limit; i++) (*out)[i] = (int32_t)i;
        *n = limit;
        return 0;
    }
    if (read_int_list(c, s, key, out, n) || sort_unique_i32(c, s, key, *out, *n)) return -1;
    if ((*out)[0] < 0 || (size_t)(*out)[*n - 1] >= limit) {
        int32_t bad = (*out)[0] < 0 ? (*out)[0] : (*out)[*n - 1];
        return fail_key(c, s, key, "%d is out of range 0..%zu (the model has %s = %zu)", (int)bad,
                        limit - 1, what, limit);
    }
    return 0;
}

/* -------------------------------------------------------------- paths -- */

/* Joins base and p (unless p is absolute) and removes "." and ".." lexically. */
static int resolve_path(char *out, size_t size, const char *base, const char *p) {
    char joined[2 * AS_PATH_MAX + 2];
    if (p[0] == '/') snprintf(joined, sizeof joined, "%s", p);
    else snprintf(joined, sizeof joined, "%s/%s", base, p);
    char *parts[1024];
    size_t np = 0;
    char *save = NULL;
    for (char *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (!strcmp(tok, ".")) continue;
        if (!strcmp(tok, "..")) {
            if (np) np--;
            continue;
        }
        if (np == 1024) return -1;
        parts[np++] = tok;
    }
    size_t at = 0;
    out[0] = 0;
    if (np == 0) return snprintf(out, size, "/") >= (int)size ? -1 : 0;
    for (size_t i = 0; i < np; i++) {
        int w = snprintf(out + at, size - at, "/%s", parts[i]);
        if (w < 0 || (size_t)w >= size - at) return -1;
        at += (size_t)w;
    }
    return 0;
}

static int get_path(ctx *c, const char *key, const char *config_dir, char *out) {
    const char *v;
    if (get_string(c, key, NULL, &v)) return -1;
    config_setting_t *s = get(c, key);
    if (!*v) return fail_key(c, s, key, "empty path");
    char cwd[AS_PATH_MAX];
    const char *base = config_dir;
    if (from_override(s)) {
        if (!getcwd(cwd, sizeof cwd)) return fail_key(c, s, key, "cannot read the current directory");
        base = cwd;
    }
    if (resolve_path(out, AS_PATH_MAX, base, v)) return fail_key(c, s, key, "path too long");
    return 0;
}

/* ---------------------------------------------------------- overrides -- */

static config_setting_t *copy_setting(config_setting_t *parent, const char *name,
                                      const config_setting_t *src) {
    int type = config_setting_type(src);
    config_setting_t *dst = config_setting_add(parent, name, type);
    if (!dst) return NULL;
    switch (type) {
    case CONFIG_TYPE_INT: config_setting_set_int(dst, config_setting_get_int(src)); break;
    case CONFIG_TYPE_INT64: config_setting_set_int64(dst, config_setting_get_int64(src)); break;
    case CONFIG_TYPE_FLOAT: config_setting_set_float(dst, config_setting_get_float(src)); break;
    case CONFIG_TYPE_BOOL: config_setting_set_bool(dst, config_setting_get_bool(src)); break;
    case CONFIG_TYPE_STRING: config_setting_set_string(dst, config_setting_get_string(src)); break;
    default:
        for (int i = 0; i < config_setting_length(src); i++) {
            const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
            if (!copy_setting(dst, type == CONFIG_TYPE_GROUP ? config_setting_name(e) : NULL, e))
                return NULL;
        }
    }
    config_setting_set_hook(dst, &override_mark);
    return dst;
}

static int bare_word(const char *v) {
    if (!*v) return 0;
    for (const char *p = v; *p; p++)
        if (strchr("\"[](){};=,#\\", *p) || isspace((unsigned char)*p)) return 0;
    return 1;
}

/* "key=value": value in libconfig syntax, or a bare word taken as a string. */
static int apply_set(ctx *c, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq) return as_fail(c->err, "--set %s: expected key=value", arg);
    char key[128];
    size_t kl = (size_t)(eq - arg);
    while (kl && isspace((unsigned char)arg[kl - 1])) kl--;
    const char *k0 = arg;
    while (isspace((unsigned char)*k0)) k0++, kl--;
    if (kl == 0 || kl >= sizeof key) return as_fail(c->err, "--set %s: expected key=value", arg);
    memcpy(key, k0, kl);
    key[kl] = 0;
    if (!is_known_key(key))
        return as_fail(c->err, "--set %s: unknown key (did you mean %s?)", key,
                       closest_known_key(key));
    const char *value = eq + 1;
    size_t vl = strlen(value);
    char *text = malloc(vl + 16);
    if (!text) return as_fail(c->err, "--set %s: out of memory", key);
    config_t tmp;
    config_init(&tmp);
    snprintf(text, vl + 16, "v = %s;", value);
    int ok = config_read_string(&tmp, text) == CONFIG_TRUE;
    if (!ok && bare_word(value)) {
        config_destroy(&tmp);
        config_init(&tmp);
        snprintf(text, vl + 16, "v = \"%s\";", value);
        ok = config_read_string(&tmp, text) == CONFIG_TRUE;
    }
    free(text);
    if (!ok) {
        as_fail(c->err, "--set %s: '%s' is not a libconfig value (%s)", key, value,
                config_error_text(&tmp));
        config_destroy(&tmp);
        return -1;
    }
    config_setting_t *src = config_setting_get_member(config_root_setting(&tmp), "v");
    /* "grid.T=[1.0]; output=\"x.h5\"" parses as two settings: the second must not vanish */
    if (!src || config_setting_length(config_root_setting(&tmp)) != 1) {
        as_fail(c->err, "--set %s: '%s' holds more than one value (text after the first; give each key its own --set)",
                key, value);
        config_destroy(&tmp);
        return -1;
    }

    /* walk (creating groups) to the parent, then replace the member */
    char path[128];
    snprintf(path, sizeof path, "%s", key);
    config_setting_t *parent = config_root_setting(&c->lc);
    char *name = path;
    for (char *dot; (dot = strchr(name, '.')); name = dot + 1) {
        *dot = 0;
        config_setting_t *m = config_setting_get_member(parent, name);
        if (!m) {
            m = config_setting_add(parent, name, CONFIG_TYPE_GROUP);
            if (m) config_setting_set_hook(m, &override_mark);
        } else if (config_setting_type(m) != CONFIG_TYPE_GROUP) {
            config_destroy(&tmp);
            *dot = '.';
            return as_fail(c->err, "--set %s: %.*s is not a group in %s", key,
                           (int)(dot - path), path, c->path);
        }
        parent = m;
        *dot = '.';
    }
    if (config_setting_get_member(parent, name)) config_setting_remove(parent, name);
    int rc = copy_setting(parent, name, src) ? 0 : as_fail(c->err, "--set %s: cannot set", key);
    config_destroy(&tmp);
    return rc;
}

/* ---------------------------------------------------------- canonical -- */

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        /* NULL + 0 is undefined behaviour: the first call sizes an empty buffer. */
        int w = vsnprintf(b->s ? b->s + b->len : NULL, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)w < b->cap - b->len) {
            b->len += (size_t)w;
            return;
        }
        size_t cap = (b->cap + (size_t)w + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = cap;
    }
}

/* Shortest %g form that reads back to the same double, always a libconfig float. */
static void sb_double(sbuf *b, double x) {
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    sb_printf(b, "%s", buf);
}

static void sb_string(sbuf *b, const char *s) {
    sb_printf(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') sb_printf(b, "\\%c", *s);
        else sb_printf(b, "%c", *s);
    }
    sb_printf(b, "\"");
}

static void sb_i32_list(sbuf *b, const int32_t *v, size_t n) {
    sb_printf(b, "[");
    for (size_t i = 0; i < n; i++) sb_printf(b, "%s%d", i ? ", " : "", (int)v[i]);
    sb_printf(b, "]");
}

static void sb_f64_list(sbuf *b, const double *v, size_t n) {
    sb_printf(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) sb_printf(b, ", ");
        sb_double(b, v[i]);
    }
    sb_printf(b, "]");
}

static void sb_int64(sbuf *b, int64_t v) {
    /* libconfig needs the L suffix beyond int32 */
    if (v < INT32_MIN || v > INT32_MAX) sb_printf(b, "%lldL", (long long)v);
    else sb_printf(b, "%lld", (long long)v);
}

/* Keys sorted by name at each level (strcmp order), values resolved. */
static char *canonical_text(const as_config *cfg) {
    sbuf b = {0};
    const as_axes *a = &cfg->axes;
    sb_printf(&b, "# attnsweep canonical config (sorted keys, resolved values)\n");
    sb_printf(&b, "grid = {\n  L = ");
    sb_i32_list(&b, a->L, a->n_L);
    sb_printf(&b, ";\n  N = ");
    sb_i32_list(&b, a->N, a->n_N);
    sb_printf(&b, ";\n  T = ");
    sb_f64_list(&b, a->T, a->n_T);
    sb_printf(&b, ";\n  eps = ");
    sb_f64_list(&b, a->eps, a->n_eps);
    sb_printf(&b, ";\n  heads = ");
    sb_i32_list(&b, a->head, a->n_head);
    sb_printf(&b, ";\n  layers = ");
    sb_i32_list(&b, a->layer, a->n_layer);
    sb_printf(&b, ";\n  normalizer = [");
    for (size_t i = 0; i < a->n_norm; i++)
        sb_printf(&b, "%s\"%s\"", i ? ", " : "", met_normalizer_name(a->normalizer[i]));
    sb_printf(&b, "];\n};\nmetrics = {\n  ");
    /* (added later too: only when not the default, see below) */
    if (cfg->distance != AS_DISTANCE_PER_TOKEN) sb_printf(&b, "distance = \"aggregate\";\n  ");
    sb_printf(&b, "ks_alpha = ");
    sb_double(&b, cfg->ks_alpha);
    /* Keys added after results files existed appear only when they differ from
     * their default, so those files' canonical text (and resume) is unchanged. */
    if (cfg->logits != AS_LOGITS_RAW) sb_printf(&b, ";\n  logits = \"%s\"", config_logits_name(cfg->logits));
    sb_printf(&b, ";\n  rows = \"%s\";\n  seed = ", cfg->rows == AS_ROWS_VISIBLE ? "visible" : "full_row");
    sb_int64(&b, cfg->seed);
    sb_printf(&b, ";\n  ssmax_scale = ");
    sb_double(&b, cfg->ssmax_scale);
    sb_printf(&b, ";\n  vectors = \"%s\";\n};\nmodel = ",
              cfg->vectors == AS_VECTORS_VALUE ? "value" : "resid");
    sb_string(&b, cfg->model_dir);
    sb_printf(&b, ";\noutput = ");
    sb_string(&b, cfg->output);
    /* compress only when on, so that files written before the key existed keep their sha256 */
    sb_printf(&b, ";\nruntime = {\n  blas_threads = %d;\n  commit_every = %d;\n%s};\n",
              cfg->blas_threads, cfg->commit_every, cfg->compress ? "  compress = true;\n" : "");
    sb_printf(&b, "text = {\n  format = \"%s\";\n  path = ",
              cfg->text_format == AS_TEXT_PLAIN ? "text" : "tokens");
    sb_string(&b, cfg->text_path);
    if (cfg->start_at[0]) {
        sb_printf(&b, ";\n  start_at = ");
        sb_string(&b, cfg->start_at);
        if (cfg->start_occurrence != 1) {
            sb_printf(&b, ";\n  start_occurrence = ");
            sb_int64(&b, cfg->start_occurrence);
        }
    }
    sb_printf(&b, ";\n  strip_gutenberg = %s;\n};\nwindows = {\n  count = ",
              cfg->strip_gutenberg ? "true" : "false");
    sb_int64(&b, cfg->windows_count);
    sb_printf(&b, ";\n  offset = ");
    sb_int64(&b, cfg->windows_offset);
    sb_printf(&b, ";\n  stride = ");
    sb_int64(&b, cfg->windows_stride);
    sb_printf(&b, ";\n};\n");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* --------------------------------------------------------------- load -- */

int64_t config_window_start(const as_config *cfg, int64_t w) {
    return cfg->windows_offset + w * cfg->windows_stride;
}

int32_t config_max_L(const as_config *cfg) { return cfg->axes.L[cfg->axes.n_L - 1]; }

int64_t config_tokens_needed(const as_config *cfg) {
    return config_window_start(cfg, cfg->windows_count - 1) + config_max_L(cfg);
}

void config_free(as_config *cfg) {
    if (!cfg) return;
    free(cfg->file_text);
    free(cfg->canonical);
    free(cfg->axes.L);
    free(cfg->axes.N);
    free(cfg->axes.T);
    free(cfg->axes.eps);
    free(cfg->axes.normalizer);
    free(cfg->axes.layer);
    free(cfg->axes.head);
    memset(cfg, 0, sizeof *cfg);
}

static int load_values(ctx *c, as_config *cfg, const char *const *sets, size_t n_sets) {
    as_err *err = c->err;
    for (size_t i = 0; i < n_sets; i++)
        if (apply_set(c, sets[i])) return -1;
    config_setting_t *root = config_root_setting(&c->lc);
    if (check_unknown(c, root, "") || check_groups(c)) return -1;

    if (get_path(c, "model", cfg->dir, cfg->model_dir) ||
        get_path(c, "text.path", cfg->dir, cfg->text_path) ||
        get_path(c, "output", cfg->dir, cfg->output))
        return -1;
    static const char *const formats[] = {"text", "tokens", NULL};
    static const char *const vectors[] = {"value", "resid", NULL};
    static const char *const rows[] = {"visible", "full_row", NULL};
    static const char *const logits[] = {"raw", "scaled", NULL};
    static const char *const distances[] = {"per_token", "aggregate", NULL};
    int fmt, vec, row, lgt, dist;
    const char *start_at;
    if (get_choice(c, "text.format", formats, 0, &fmt) ||
        get_bool(c, "text.strip_gutenberg", 1, &cfg->strip_gutenberg) ||
        get_string(c, "text.start_at", "", &start_at) ||
        get_int64(c, "text.start_occurrence", 1, &cfg->start_occurrence) ||
        get_choice(c, "metrics.vectors", vectors, 0, &vec) ||
        get_choice(c, "metrics.rows", rows, 0, &row) ||
        get_choice(c, "metrics.logits", logits, 0, &lgt) ||
        get_choice(c, "metrics.distance", distances, 0, &dist))
        return -1;
    cfg->distance = (as_distance)dist;
    cfg->text_format = (as_text_format)fmt;
    cfg->vectors = (as_vectors)vec;
    cfg->rows = (as_rows)row;
    cfg->logits = (as_logits)lgt;
    if (strlen(start_at) >= sizeof cfg->start_at)
        return fail_key(c, get(c, "text.start_at"), "text.start_at", "longer than %zu bytes",
                        sizeof cfg->start_at - 1);
    if (start_at[0] && strchr(start_at, '\n'))
        return fail_key(c, get(c, "text.start_at"), "text.start_at",
                        "must not contain a line break (it is matched inside the text as is)");
    snprintf(cfg->start_at, sizeof cfg->start_at, "%s", start_at);
    if (cfg->start_at[0] && cfg->text_format != AS_TEXT_PLAIN)
        return fail_key(c, get(c, "text.start_at"), "text.start_at",
                        "applies to format = \"text\" only (a token file has no text to search)");
    if (cfg->start_occurrence < 1 || cfg->start_occurrence > INT32_MAX)
        return fail_key(c, get(c, "text.start_occurrence"), "text.start_occurrence",
                        "must be in 1..%d", INT32_MAX);
    if (!cfg->start_at[0] && get(c, "text.start_occurrence"))
        return fail_key(c, get(c, "text.start_occurrence"), "text.start_occurrence",
                        "needs text.start_at");

    /* the model first: the defaults of L, stride, layers, heads come from it */
    if (model_config_read(&cfg->model, cfg->model_dir, err))
        return fail_key(c, get(c, "model"), "model", "%s", err->msg);
    const gpt2_config *mc = &cfg->model;

    as_axes *ax = &cfg->axes;
    config_setting_t *s = get(c, "grid.L");
    if (s) {
        if (read_int_list(c, s, "grid.L", &ax->L, &ax->n_L)) return -1;
    } else {
        /* default: 32, 64, ... up to the model's context (GPT-2: ... 1024) */
        ax->L = malloc(32 * sizeof *ax->L);
        if (!ax->L) return as_fail(err, "out of memory");
        for (size_t L = 32; L <= mc->n_positions && ax->n_L < 32; L *= 2) ax->L[ax->n_L++] = (int32_t)L;
        if (ax->n_L == 0) ax->L[ax->n_L++] = (int32_t)mc->n_positions;
    }
    if (sort_unique_i32(c, s, "grid.L", ax->L, ax->n_L)) return -1;
    if (ax->L[0] < 2) return fail_key(c, s, "grid.L", "%d: L must be >= 2", (int)ax->L[0]);
    if ((size_t)ax->L[ax->n_L - 1] > mc->n_positions)
        return fail_key(c, s, "grid.L", "%d exceeds the model's context n_positions = %zu (%s)",
                        (int)ax->L[ax->n_L - 1], mc->n_positions, cfg->model_dir);

    if (read_N(c, ax)) return -1;
    if (ax->N[0] >= ax->L[ax->n_L - 1])
        return fail_key(c, get(c, "grid.N"), "grid.N",
                        "every N is >= the largest L (%d): no row has an unselected token",
                        (int)ax->L[ax->n_L - 1]);
    if (read_T(c, ax)) return -1;

    s = get(c, "grid.eps");
    if (s) {
        if (read_double_list(c, s, "grid.eps", &ax->eps, &ax->n_eps)) return -1;
    } else {
        static const double def_eps[] = {1e-3, 1e-1, 10.0}; /* the paper's, docs/metrics.md section 7 */
        ax->eps = malloc(sizeof def_eps);
        if (!ax->eps) return as_fail(err, "out of memory");
        memcpy(ax->eps, def_eps, sizeof def_eps);
        ax->n_eps = 3;
    }
    if (sort_unique_f64(c, s, "grid.eps", ax->eps, ax->n_eps)) return -1;
    if (!(ax->eps[0] > 0)) return fail_key(c, s, "grid.eps", "%g: eps must be > 0", ax->eps[0]);

    if (read_normalizer(c, ax) ||
        read_index_list(c, "grid.layers", mc->n_layer, "n_layer", &ax->layer, &ax->n_layer) ||
        read_index_list(c, "grid.heads", mc->n_head, "n_head", &ax->head, &ax->n_head))
        return -1;

    if (get_int64(c, "windows.count", 1, &cfg->windows_count) ||
        get_int64(c, "windows.offset", 0, &cfg->windows_offset) ||
        get_int64(c, "windows.stride", ax->L[ax->n_L - 1], &cfg->windows_stride))
        return -1;
    if (cfg->windows_count < 1 || cfg->windows_count > INT32_MAX)
        return fail_key(c, get(c, "windows.count"), "windows.count", "must be in 1..%d", INT32_MAX);
    if (cfg->windows_offset < 0)
        return fail_key(c, get(c, "windows.offset"), "windows.offset", "must be >= 0");
    if (cfg->windows_stride < 1)
        return fail_key(c, get(c, "windows.stride"), "windows.stride", "must be >= 1");
    if (cfg->windows_stride > (INT64_MAX / 2 - cfg->windows_offset) / cfg->windows_count)
        return fail_key(c, get(c, "windows.stride"), "windows.stride", "windows reach beyond 2^62 tokens");

    if (get_double(c, "metrics.ks_alpha", 0.01, &cfg->ks_alpha) ||
        get_double(c, "metrics.ssmax_scale", 0.0, &cfg->ssmax_scale) ||
        get_int64(c, "metrics.seed", 1, &cfg->seed))
        return -1;
    if (!(cfg->ks_alpha > 0 && cfg->ks_alpha < 1))
        return fail_key(c, get(c, "metrics.ks_alpha"), "metrics.ks_alpha",
                        "%g is not in (0, 1)", cfg->ks_alpha);
    if (cfg->ssmax_scale < 0)
        return fail_key(c, get(c, "metrics.ssmax_scale"), "metrics.ssmax_scale",
                        "must be >= 0 (0 = 1/ln(n_positions))");
    if (cfg->ssmax_scale == 0) /* docs/metrics.md section 10: ssmax equals softmax at full context */
        cfg->ssmax_scale = mc->n_positions > 1 ? 1.0 / log((double)mc->n_positions) : 1.0;
    if (cfg->seed < 0) return fail_key(c, get(c, "metrics.seed"), "metrics.seed", "must be >= 0");

    int64_t bt, ce;
    if (get_int64(c, "runtime.blas_threads", 1, &bt) ||
        get_int64(c, "runtime.commit_every", 8, &ce))
        return -1;
    if (bt < 1 || bt > 4096)
        return fail_key(c, get(c, "runtime.blas_threads"), "runtime.blas_threads", "must be in 1..4096");
    /* The master holds commit_every + 1 result blocks (~11 MB each at paper
     * scale) in memory, so a typo like 8000000 must not reach the allocator. */
    if (ce < 1 || ce > 4096)
        return fail_key(c, get(c, "runtime.commit_every"), "runtime.commit_every", "must be in 1..4096");
    cfg->blas_threads = (int)bt, cfg->commit_every = (int)ce;
    if (get_bool(c, "runtime.compress", 0, &cfg->compress)) return -1;
    /* Not part of the canonical text: how long a stop waits changes no result, and the job
     * script passes a different value whenever the warning time differs. */
    if (get_double(c, "runtime.stop_grace", AS_STOP_GRACE_DEFAULT_S, &cfg->stop_grace)) return -1;
    if (!(cfg->stop_grace > 0 && cfg->stop_grace <= AS_STOP_GRACE_MAX_S))
        return fail_key(c, get(c, "runtime.stop_grace"), "runtime.stop_grace",
                        "must be in (0, %g] seconds", AS_STOP_GRACE_MAX_S);

    cfg->canonical = canonical_text(cfg);
    if (!cfg->canonical) return as_fail(err, "%s: out of memory", c->path);
    sha256_hex(cfg->sha256, cfg->canonical, strlen(cfg->canonical));
    return 0;
}

int config_load(as_config *cfg, const char *path, const char *const *sets, size_t n_sets,
                as_err *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    char *real = realpath(path, NULL);
    if (!real) return as_fail(err, "%s: cannot open: %s", path, strerror(errno));
    char *slash = strrchr(real, '/');
    if (slash == real) snprintf(cfg->dir, sizeof cfg->dir, "/");
    else snprintf(cfg->dir, sizeof cfg->dir, "%.*s", (int)(slash - real), real);
    free(real);
    expansion x = {0};
    if (exp_file(&x, path, NULL, 0, 0, &cfg->file_text, err)) {
        exp_free(&x);
        return -1;
    }

    ctx c = {.path = path, .err = err, .x = &x};
    config_init(&c.lc);
    /* every @include is expanded above; one libconfig still saw would fail
     * to open rather than read a file relative to the current directory */
    config_set_include_dir(&c.lc, "/dev/null");
    int rc;
    if (config_read_string(&c.lc, x.text ? x.text : "") != CONFIG_TRUE) {
        const char *file = path;
        unsigned line = (unsigned)config_error_line(&c.lc);
        exp_where(&x, config_error_line(&c.lc), &file, &line);
        rc = as_fail(err, "%s:%u: %s", file, line, config_error_text(&c.lc));
    } else {
        rc = load_values(&c, cfg, sets, n_sets);
    }
    config_destroy(&c.lc);
    exp_free(&x);
    if (rc) config_free(cfg);
    return rc;
}

int config_load_text(as_config *cfg, const char *text, const char *origin,
                     const char *const *sets, size_t n_sets, as_err *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", origin);
    if (!getcwd(cfg->dir, sizeof cfg->dir)) return as_fail(err, "cannot read the current directory: %s", strerror(errno));
    cfg->file_text = strdup(text);
    if (!cfg->file_text) return as_fail(err, "%s: out of memory", origin);
    ctx c = {.path = origin, .err = err};
    config_init(&c.lc);
    config_set_include_dir(&c.lc, cfg->dir);
    int rc;
    if (config_read_string(&c.lc, text) != CONFIG_TRUE)
        rc = as_fail(err, "%s:%d: %s", origin, config_error_line(&c.lc), config_error_text(&c.lc));
    else
        rc = load_values(&c, cfg, sets, n_sets);
    config_destroy(&c.lc);
    if (rc) config_free(cfg);
    return rc;
}

/* --------------------------------------------------------------- diff -- */

const char *config_diff_kind_name(as_diff_kind k) {
    switch (k) {
    case AS_DIFF_HARMLESS: return "harmless";
    case AS_DIFF_PATH: return "path moved";
    case AS_DIFF_EXTEND: return "extension";
    default: return "refused";
    }
}

static int settings_equal(const config_setting_t *a, const config_setting_t *b) {
    if (is_number(a) && is_number(b)) {
        if (is_int(a) && is_int(b)) return config_setting_get_int64(a) == config_setting_get_int64(b);
        return number_of(a) == number_of(b);
    }
    int ta = config_setting_type(a), tb = config_setting_type(b);
    if (is_sequence(a) && is_sequence(b)) {
        if (config_setting_length(a) != config_setting_length(b)) return 0;
        for (int i = 0; i < config_setting_length(a); i++)
            if (!settings_equal(config_setting_get_elem(a, (unsigned)i),
                                config_setting_get_elem(b, (unsigned)i)))
                return 0;
        return 1;
    }
    if (ta != tb) return 0;
    if (ta == CONFIG_TYPE_STRING) return !strcmp(config_setting_get_string(a), config_setting_get_string(b));
    if (ta == CONFIG_TYPE_BOOL) return config_setting_get_bool(a) == config_setting_get_bool(b);
    if (ta == CONFIG_TYPE_GROUP) {
        if (config_setting_length(a) != config_setting_length(b)) return 0;
        for (int i = 0; i < config_setting_length(a); i++) {
            const config_setting_t *ea = config_setting_get_elem(a, (unsigned)i);
            const config_setting_t *eb = config_setting_get_member(b, config_setting_name(ea));
            if (!eb || !settings_equal(ea, eb)) return 0;
        }
        return 1;
    }
    return 0;
}

/* new L holds every old L (and more) */
static int is_superset(const config_setting_t *old, const config_setting_t *new) {
    if (!is_sequence(old) || !is_sequence(new)) return 0;
    if (config_setting_length(new) <= config_setting_length(old)) return 0;
    for (int i = 0; i < config_setting_length(old); i++) {
        const config_setting_t *o = config_setting_get_elem(old, (unsigned)i);
        int found = 0;
        for (int j = 0; j < config_setting_length(new) && !found; j++)
            found = settings_equal(o, config_setting_get_elem(new, (unsigned)j));
        if (!found) return 0;
    }
    return 1;
}

static as_diff_kind classify(const char *key, const config_setting_t *old,
                             const config_setting_t *new) {
    if (!strcmp(key, "output") || !strncmp(key, "runtime.", 8)) return AS_DIFF_HARMLESS;
    if (!old || !new) return AS_DIFF_REFUSED;
    if (!strcmp(key, "model") || !strcmp(key, "text.path")) return AS_DIFF_PATH;
    if (!strcmp(key, "windows.count") && is_int(old) && is_int(new) &&
        config_setting_get_int64(new) > config_setting_get_int64(old))
        return AS_DIFF_EXTEND;
    if (!strcmp(key, "grid.L") && is_superset(old, new)) return AS_DIFF_EXTEND;
    return AS_DIFF_REFUSED;
}

/* A setting's value in config syntax, shortened to fit (ending in "..."). */
static void render_value(char *out, size_t size, const config_setting_t *s) {
    size_t at = 0;
    out[0] = 0;
#define PUT(...) do { int w_ = snprintf(out + at, at < size ? size - at : 0, __VA_ARGS__); \
                      if (w_ > 0) at += (size_t)w_; } while (0)
    if (!s) {
        PUT("(absent)");
    } else if (is_sequence(s) || config_setting_type(s) == CONFIG_TYPE_GROUP) {
        int group = config_setting_type(s) == CONFIG_TYPE_GROUP;
        PUT("%s", group ? "{ " : "[");
        for (int i = 0; i < config_setting_length(s) && at < size; i++) {
            char item[64];
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            render_value(item, sizeof item, e);
            if (group) PUT("%s = %s; ", config_setting_name(e), item);
            else PUT("%s%s", i ? ", " : "", item);
        }
        PUT("%s", group ? "}" : "]");
    } else if (is_int(s)) {
        PUT("%lld", (long long)config_setting_get_int64(s));
    } else if (is_number(s)) {
        PUT("%.10g", number_of(s));
    } else if (config_setting_type(s) == CONFIG_TYPE_BOOL) {
        PUT("%s", config_setting_get_bool(s) ? "true" : "false");
    } else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        PUT("\"%s\"", config_setting_get_string(s));
    }
#undef PUT
    if (at >= size && size > 4) memcpy(out + size - 4, "...", 4);
}

static void diff_add(as_config_diff *d, const char *key, as_diff_kind k,
                     const config_setting_t *old, const config_setting_t *new) {
    if (k > d->verdict) d->verdict = k;
    if (d->n == AS_DIFF_MAX) return;
    snprintf(d->item[d->n].key, sizeof d->item[d->n].key, "%s", key);
    render_value(d->item[d->n].old_value, sizeof d->item[d->n].old_value, old);
    render_value(d->item[d->n].new_value, sizeof d->item[d->n].new_value, new);
    d->item[d->n++].kind = k;
}

/* Leaves of `a` compared with `b`; with only_missing, records leaves of `a`
 * absent from `b` (the second walk, over the new config). */
static void diff_walk(as_config_diff *d, const config_setting_t *a, config_setting_t *broot,
                      const char *prefix, int a_is_new) {
    for (int i = 0; i < config_setting_length(a); i++) {
        const config_setting_t *m = config_setting_get_elem(a, (unsigned)i);
        char key[128];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", config_setting_name(m));
        config_setting_t *other = find_key(broot, key);
        if (config_setting_type(m) == CONFIG_TYPE_GROUP && other &&
            config_setting_type(other) == CONFIG_TYPE_GROUP) {
            diff_walk(d, m, broot, key, a_is_new);
            continue;
        }
        if (a_is_new) {
            if (!other) diff_add(d, key, classify(key, NULL, m), NULL, m);
        } else if (!other || !settings_equal(m, other)) {
            diff_add(d, key, classify(key, m, other), m, other);
        }
    }
}

int config_diff(as_config_diff *out, const char *old_canonical, const char *new_canonical,
                as_err *err) {
    memset(out, 0, sizeof *out);
    config_t a, b;
    config_init(&a);
    config_init(&b);
    int rc = 0;
    if (config_read_string(&a, old_canonical) != CONFIG_TRUE)
        rc = as_fail(err, "stored config, line %d: %s", config_error_line(&a), config_error_text(&a));
    else if (config_read_string(&b, new_canonical) != CONFIG_TRUE)
        rc = as_fail(err, "new config, line %d: %s", config_error_line(&b), config_error_text(&b));
    if (!rc) {
        diff_walk(out, config_root_setting(&a), config_root_setting(&b), "", 0);
        diff_walk(out, config_root_setting(&b), config_root_setting(&a), "", 1);
    }
    config_destroy(&a);
    config_destroy(&b);
    return rc;
}

void config_diff_describe(const as_config_diff *d, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = 0;
    if (d->n == 0) {
        snprintf(buf, size, "no difference");
        return;
    }
    for (size_t i = 0; i < d->n && at < size; i++) {
        int w = snprintf(buf + at, size - at, "%s%s (%s: stored %s, now %s)", i ? "; " : "",
                         d->item[i].key, config_diff_kind_name(d->item[i].kind),
                         d->item[i].old_value, d->item[i].new_value);
        if (w < 0) break;
        at += (size_t)w;
    }
}
