/* config.c -- reading and validating the config keys into as_config (see config.h). */
#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sha256.h"

/* ---------------------------------------------------------------- keys -- */

const char *const config_known_keys[] = {
    "model", "output",
    "text.path", "text.format", "text.strip_gutenberg", "text.start_at", "text.start_occurrence",
    "text.add_bos",
    "windows.count", "windows.offset", "windows.stride",
    "grid.L", "grid.N", "grid.T", "grid.T.min", "grid.T.max", "grid.T.count",
    "grid.T.spacing", "grid.T.include", "grid.eps", "grid.normalizer", "grid.layers",
    "grid.heads",
    "metrics.vectors", "metrics.rows", "metrics.logits", "metrics.distance",
    "metrics.ks_alpha",
    "metrics.ssmax_scale", "metrics.seed", "metrics.per_N_T", "metrics.grad_exact",
    "metrics.dist_expect", "metrics.entmax_alpha", "metrics.sigmoid_bias",
    "metrics.dist_random", "metrics.random_subsets", "metrics.ks_against", "metrics.query_rows",
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
size_t cfg_edit_distance(const char *a, const char *b) {
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

/* Words a user may write for a key whose name is a symbol (T, L, N, eps) or singular where
 * ours is plural: spelling distance cannot find these (temperature is closer to `path`
 * than to `T`). */
static const struct {
    const char *word, *key;
} key_synonyms[] = {
    {"temperature", "grid.T"}, {"temperatures", "grid.T"}, {"temp", "grid.T"},
    {"length", "grid.L"}, {"lengths", "grid.L"}, {"context", "grid.L"}, {"context_length", "grid.L"},
    {"seq_len", "grid.L"}, {"top_n", "grid.N"}, {"topn", "grid.N"}, {"k", "grid.N"},
    {"epsilon", "grid.eps"}, {"normalizers", "grid.normalizer"}, {"norm", "grid.normalizer"},
    {"alpha", "metrics.ks_alpha"}, {"file", "text.path"}, {"windows_count", "windows.count"},
};

/* The known key closest to `key`: a synonym of its last component first, else its last
 * component against each known key's last component, plus one when the parent differs
 * (so `seed` at the top level suggests metrics.seed). */
static const char *closest_known_key(const char *key) {
    const char *dot = strrchr(key, '.');
    const char *name = dot ? dot + 1 : key;
    size_t parent_len = dot ? (size_t)(dot - key) : 0;
    for (size_t i = 0; i < sizeof key_synonyms / sizeof key_synonyms[0]; i++)
        if (!strcasecmp(name, key_synonyms[i].word)) return key_synonyms[i].key;
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
            size_t score = cfg_edit_distance(name, kname) + (same_parent ? 0 : 1);
            if (score < best_score) best_score = score, best = k;
        }
    }
    return best;
}

/* ------------------------------------------------------------- context -- */

int cfg_override_mark; /* the hook of settings that came from --set */

int cfg_from_override(const config_setting_t *s) {
    for (; s; s = config_setting_parent(s))
        if (config_setting_get_hook(s) == &cfg_override_mark) return 1;
    return 0;
}

/* "FILE:LINE: KEY: message", or "--set KEY: message", or "FILE: KEY: message". */
int cfg_fail_key(ctx *c, const config_setting_t *s, const char *key, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s && cfg_from_override(s)) return as_fail(c->err, "--set %s: %s", key, msg);
    const char *file;
    unsigned line;
    if (s && cfg_exp_where(c->x, (int)config_setting_source_line(s), &file, &line))
        return as_fail(c->err, "%s:%u: %s: %s", file, line, key, msg);
    return as_fail(c->err, "%s: %s: %s", c->path, key, msg);
}

const char *cfg_type_name(const config_setting_t *s) {
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

/* The setting at a dotted key, or NULL when a part is missing or a parent is
 * not a group. */
config_setting_t *cfg_find_key(config_setting_t *root, const char *key) {
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

config_setting_t *cfg_get(ctx *c, const char *key) {
    return cfg_find_key(config_root_setting(&c->lc), key);
}

/* Refuses unknown keys anywhere in the tree. */
static int check_unknown(ctx *c, config_setting_t *group, const char *prefix) {
    for (int i = 0; i < config_setting_length(group); i++) {
        config_setting_t *m = config_setting_get_elem(group, (unsigned)i);
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", config_setting_name(m));
        if (!is_known_key(key))
            return cfg_fail_key(c, m, key, "unknown key (did you mean %s?)", closest_known_key(key));
        if (config_setting_type(m) == CONFIG_TYPE_GROUP && in_list(group_keys, key))
            if (check_unknown(c, m, key)) return -1;
    }
    return 0;
}

/* Every parent of a leaf key must be a group when present. */
static int check_groups(ctx *c) {
    for (size_t i = 0; group_keys[i]; i++) {
        if (!strcmp(group_keys[i], "grid.T")) continue; /* may be a list */
        config_setting_t *s = cfg_get(c, group_keys[i]);
        if (s && config_setting_type(s) != CONFIG_TYPE_GROUP)
            return cfg_fail_key(c, s, group_keys[i], "expected a group { ... }, got %s",
                            cfg_type_name(s));
    }
    return 0;
}

/* ------------------------------------------------------- scalar getters -- */

static int get_string(ctx *c, const char *key, const char *def, const char **out) {
    config_setting_t *s = cfg_get(c, key);
    if (!s) {
        if (!def) return as_fail(c->err, "%s: missing key %s (it has no default)", c->path, key);
        *out = def;
        return 0;
    }
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return cfg_fail_key(c, s, key, "expected a string, got %s", cfg_type_name(s));
    *out = config_setting_get_string(s);
    return 0;
}

static int get_bool(ctx *c, const char *key, int def, int *out) {
    config_setting_t *s = cfg_get(c, key);
    if (!s) return *out = def, 0;
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return cfg_fail_key(c, s, key, "expected true or false, got %s", cfg_type_name(s));
    *out = config_setting_get_bool(s);
    return 0;
}

int cfg_get_int64(ctx *c, const char *key, int64_t def, int64_t *out) {
    config_setting_t *s = cfg_get(c, key);
    if (!s) return *out = def, 0;
    if (!is_int(s)) return cfg_fail_key(c, s, key, "expected an integer, got %s", cfg_type_name(s));
    *out = config_setting_get_int64(s);
    return 0;
}

/* A float key also takes an integer literal. */
int cfg_get_double(ctx *c, const char *key, double def, double *out) {
    config_setting_t *s = cfg_get(c, key);
    if (!s) return *out = def, 0;
    if (!is_number(s)) return cfg_fail_key(c, s, key, "expected a number, got %s", cfg_type_name(s));
    *out = number_of(s);
    if (!isfinite(*out)) return cfg_fail_key(c, s, key, "must be finite");
    return 0;
}

/* One of the NULL-terminated names; *out = its index. */
int cfg_get_choice(ctx *c, const char *key, const char *const *names, int def, int *out) {
    const char *v;
    if (get_string(c, key, names[def], &v)) return -1;
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) return *out = i, 0;
    char allowed[256] = "";
    for (int i = 0; names[i]; i++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s\"%s\"",
                 i ? " | " : "", names[i]);
    return cfg_fail_key(c, cfg_get(c, key), key, "\"%s\" is not one of %s", v, allowed);
}

/* -------------------------------------------------------------- paths -- */

/* Joins base and p (unless p is absolute) and removes "." and ".." lexically. */
int cfg_resolve_path(char *out, size_t size, const char *base, const char *p) {
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
    config_setting_t *s = cfg_get(c, key);
    if (!*v) return cfg_fail_key(c, s, key, "empty path");
    char cwd[AS_PATH_MAX];
    const char *base = config_dir;
    if (cfg_from_override(s)) {
        if (!getcwd(cwd, sizeof cwd)) return cfg_fail_key(c, s, key, "cannot read the current directory");
        base = cwd;
    }
    if (cfg_resolve_path(out, AS_PATH_MAX, base, v)) return cfg_fail_key(c, s, key, "path too long");
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
    config_setting_set_hook(dst, &cfg_override_mark);
    return dst;
}

static int bare_word(const char *v) {
    if (!*v) return 0;
    for (const char *p = v; *p; p++)
        if (strchr("\"[](){};=,#\\", *p) || isspace((unsigned char)*p)) return 0;
    return 1;
}

/* What to do about a libconfig parse error whose own words do not say it: "" or a hint
 * starting with a space. libconfig lists hold one scalar type, so [0.5, 1, 8.0] (an int
 * among floats) is "mismatched element type". */
static const char *lc_hint(const char *lc_error) {
    if (lc_error && strstr(lc_error, "mismatched element type"))
        return " (a list holds one type: write every number of it as a float, e.g. [0.5, 1.0, 8.0] "
               "instead of [0.5, 1, 8.0])";
    return "";
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
        as_fail(c->err, "--set %s: '%s' is not a libconfig value (%s)%s", key, value,
                config_error_text(&tmp), lc_hint(config_error_text(&tmp)));
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

    /* A whole group (--set 'grid={L=[64];}') would replace the file's group, its other
     * keys silently back to their defaults: refused. grid.T's group is one value (the
     * T axis given by min, max, count). */
    if (config_setting_type(src) == CONFIG_TYPE_GROUP && in_list(group_keys, key) &&
        strcmp(key, "grid.T")) {
        const char *example = key;
        for (size_t i = 0; config_known_keys[i]; i++)
            if (!strncmp(config_known_keys[i], key, kl) && config_known_keys[i][kl] == '.') {
                example = config_known_keys[i];
                break;
            }
        config_destroy(&tmp);
        return as_fail(c->err, "--set %s: sets the whole group, which would reset its other keys "
                       "to their defaults; set each key on its own (--set %s=...)", key, example);
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
            if (m) config_setting_set_hook(m, &cfg_override_mark);
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
    free(cfg->axes.per_N_at);
    free(cfg->models);
    memset(cfg, 0, sizeof *cfg);
}

/* text.* and the metrics' readings (vectors, rows, logits, distance): the choices first, so
 * a wrong spelling is reported before any value that depends on it. */
static int read_text_and_readings(ctx *c, as_config *cfg) {
    int fmt, vec, row, lgt, dist, bos;
    const char *start_at;
    if (cfg_get_choice(c, "text.format", cfg_text_format_names, 0, &fmt) ||
        get_bool(c, "text.strip_gutenberg", 1, &cfg->strip_gutenberg) ||
        get_string(c, "text.start_at", "", &start_at) ||
        cfg_get_int64(c, "text.start_occurrence", 1, &cfg->start_occurrence) ||
        get_bool(c, "text.add_bos", -1, &bos) ||
        cfg_get_choice(c, "metrics.vectors", cfg_vectors_names, 0, &vec) ||
        cfg_get_choice(c, "metrics.rows", cfg_rows_names, 0, &row) ||
        cfg_get_choice(c, "metrics.logits", cfg_logits_names, 0, &lgt) ||
        cfg_get_choice(c, "metrics.distance", cfg_distance_names, 0, &dist))
        return -1;
    cfg->distance = (as_distance)dist;
    cfg->text_format = (as_text_format)fmt;
    cfg->vectors = (as_vectors)vec;
    cfg->rows = (as_rows)row;
    cfg->logits = (as_logits)lgt;
    cfg->add_bos = bos < 0 ? AS_BOS_MODEL : bos ? AS_BOS_ON : AS_BOS_OFF;
    if (bos >= 0 && cfg->text_format != AS_TEXT_PLAIN)
        return cfg_fail_key(c, cfg_get(c, "text.add_bos"), "text.add_bos",
                        "applies to format = \"text\" only (a token file is used as it is)");
    if (strlen(start_at) >= sizeof cfg->start_at)
        return cfg_fail_key(c, cfg_get(c, "text.start_at"), "text.start_at", "longer than %zu bytes",
                        sizeof cfg->start_at - 1);
    if (start_at[0] && strchr(start_at, '\n'))
        return cfg_fail_key(c, cfg_get(c, "text.start_at"), "text.start_at",
                        "must not contain a line break (it is matched inside the text as is)");
    snprintf(cfg->start_at, sizeof cfg->start_at, "%s", start_at);
    if (cfg->start_at[0] && cfg->text_format != AS_TEXT_PLAIN)
        return cfg_fail_key(c, cfg_get(c, "text.start_at"), "text.start_at",
                        "applies to format = \"text\" only (a token file has no text to search)");
    if (cfg->start_occurrence < 1 || cfg->start_occurrence > INT32_MAX)
        return cfg_fail_key(c, cfg_get(c, "text.start_occurrence"), "text.start_occurrence",
                        "must be in 1..%d", INT32_MAX);
    if (!cfg->start_at[0] && cfg_get(c, "text.start_occurrence"))
        return cfg_fail_key(c, cfg_get(c, "text.start_occurrence"), "text.start_occurrence",
                        "needs text.start_at");
    return 0;
}

/* grid.L: given, or 32, 64, ... up to the smallest context of the models; every L must fit
 * every model's context. */
static int read_L(ctx *c, as_config *cfg) {
    size_t min_positions = cfg->models[0].cfg.n_positions;
    for (size_t m = 1; m < cfg->n_model; m++)
        if (cfg->models[m].cfg.n_positions < min_positions) min_positions = cfg->models[m].cfg.n_positions;
    as_axes *ax = &cfg->axes;
    config_setting_t *s = cfg_get(c, "grid.L");
    if (s && config_setting_type(s) == CONFIG_TYPE_STRING) { /* a range, as grid.N takes */
        as_err e;
        if (config_parse_range(&ax->L, &ax->n_L, config_setting_get_string(s), &e))
            return cfg_fail_key(c, s, "grid.L", "%s", e.msg);
    } else if (s) {
        if (cfg_read_int_list(c, s, "grid.L", &ax->L, &ax->n_L)) return -1;
    } else {
        /* default: 32, 64, ... up to the model's context (GPT-2: ... 1024) */
        ax->L = malloc(32 * sizeof *ax->L);
        if (!ax->L) return as_fail(c->err, "out of memory");
        for (size_t L = 32; L <= min_positions && ax->n_L < 32; L *= 2) ax->L[ax->n_L++] = (int32_t)L;
        if (ax->n_L == 0) ax->L[ax->n_L++] = (int32_t)min_positions;
    }
    if (cfg_sort_unique_i32(c, s, "grid.L", ax->L, ax->n_L)) return -1;
    if (ax->L[0] < 2) return cfg_fail_key(c, s, "grid.L", "%d: L must be >= 2", (int)ax->L[0]);
    for (size_t m = 0; m < cfg->n_model; m++)
        if ((size_t)ax->L[ax->n_L - 1] > cfg->models[m].cfg.n_positions)
            return cfg_fail_key(c, s, "grid.L", "%d exceeds the model's context n_positions = %zu (%s)",
                                (int)ax->L[ax->n_L - 1], cfg->models[m].cfg.n_positions,
                                cfg->models[m].dir);
    /* the kernels compute full causal attention (docs/families.md, "Sliding windows") */
    for (size_t m = 0; m < cfg->n_model; m++)
        if (cfg->models[m].cfg.sliding_window &&
            (size_t)ax->L[ax->n_L - 1] > cfg->models[m].cfg.sliding_window)
            return cfg_fail_key(c, s, "grid.L", "%d exceeds the model's sliding_window = %zu (%s), "
                                "inside which attnsweep computes full causal attention",
                                (int)ax->L[ax->n_L - 1], cfg->models[m].cfg.sliding_window,
                                cfg->models[m].dir);
    return 0;
}

/* grid.*: after the models (cfg_read_models), whose shapes give the defaults of L, layers
 * and heads -- L up to the smallest context, layers and heads of the largest model. */
static int read_grid(ctx *c, as_config *cfg) {
    as_axes *ax = &cfg->axes;
    if (read_L(c, cfg) || cfg_read_N(c, ax)) return -1;
    if (ax->N[0] >= ax->L[ax->n_L - 1])
        return cfg_fail_key(c, cfg_get(c, "grid.N"), "grid.N",
                        "every N is >= the largest L (%d): no row has an unselected token",
                        (int)ax->L[ax->n_L - 1]);
    if (cfg_read_T(c, ax)) return -1;

    config_setting_t *s = cfg_get(c, "grid.eps");
    if (s) {
        if (cfg_read_double_list(c, s, "grid.eps", &ax->eps, &ax->n_eps)) return -1;
    } else {
        static const double def_eps[] = {1e-3, 1e-1, 10.0}; /* the paper's, docs/metrics.md section 7 */
        ax->eps = malloc(sizeof def_eps);
        if (!ax->eps) return as_fail(c->err, "out of memory");
        memcpy(ax->eps, def_eps, sizeof def_eps);
        ax->n_eps = 3;
    }
    if (cfg_sort_unique_f64(c, s, "grid.eps", ax->eps, ax->n_eps)) return -1;
    if (!(ax->eps[0] > 0)) return cfg_fail_key(c, s, "grid.eps", "%g: eps must be > 0", ax->eps[0]);

    return cfg_read_normalizer(c, ax) ||
                   cfg_read_index_list(c, "grid.layers", cfg->max_n_layer, "n_layer", &ax->layer,
                                       &ax->n_layer) ||
                   cfg_read_index_list(c, "grid.heads", cfg->max_n_head, "n_head", &ax->head,
                                       &ax->n_head)
               ? -1
               : 0;
}

/* windows.*: the stride defaults to the largest L (windows side by side). */
static int read_windows(ctx *c, as_config *cfg) {
    if (cfg_get_int64(c, "windows.count", 1, &cfg->windows_count) ||
        cfg_get_int64(c, "windows.offset", 0, &cfg->windows_offset) ||
        cfg_get_int64(c, "windows.stride", config_max_L(cfg), &cfg->windows_stride))
        return -1;
    if (cfg->windows_count < 1 || cfg->windows_count > INT32_MAX)
        return cfg_fail_key(c, cfg_get(c, "windows.count"), "windows.count", "must be in 1..%d", INT32_MAX);
    if (cfg->windows_offset < 0)
        return cfg_fail_key(c, cfg_get(c, "windows.offset"), "windows.offset", "must be >= 0");
    if (cfg->windows_stride < 1)
        return cfg_fail_key(c, cfg_get(c, "windows.stride"), "windows.stride", "must be >= 1");
    if (cfg->windows_stride > (INT64_MAX / 2 - cfg->windows_offset) / cfg->windows_count)
        return cfg_fail_key(c, cfg_get(c, "windows.stride"), "windows.stride", "windows reach beyond 2^62 tokens");
    return 0;
}

/* metrics.dist_random, random_subsets and ks_against: docs/metrics.md section 4.6 */
static int read_random(ctx *c, as_config *cfg) {
    int64_t K;
    int ks;
    if (get_bool(c, "metrics.dist_random", 0, &cfg->dist_random) ||
        cfg_get_int64(c, "metrics.random_subsets", 32, &K) ||
        cfg_get_choice(c, "metrics.ks_against", cfg_ks_against_names, 0, &ks))
        return -1;
    if (K < 2 || K > 1000000)
        return cfg_fail_key(c, cfg_get(c, "metrics.random_subsets"), "metrics.random_subsets",
                            "must be in 2..1000000 (a standard error needs two draws)");
    if (!cfg->dist_random && cfg_get(c, "metrics.random_subsets"))
        return cfg_fail_key(c, cfg_get(c, "metrics.random_subsets"), "metrics.random_subsets",
                            "applies with metrics.dist_random = true only");
    cfg->random_subsets = (int)K, cfg->ks_against = (as_ks_against)ks;
    if (cfg->ks_against == AS_KS_RANDOM && !cfg->dist_random)
        return cfg_fail_key(c, cfg_get(c, "metrics.ks_against"), "metrics.ks_against",
                            "\"random\" needs metrics.dist_random = true");
    return 0;
}

/* metrics.query_rows = "all" | "sample:K" (docs/metrics.md section 9.1). A K above a cut's
 * row count is not an error (that cut takes every row): one K serves a grid of several L. */
static int read_query_rows(ctx *c, as_config *cfg) {
    const char *v;
    if (get_string(c, "metrics.query_rows", "all", &v)) return -1;
    cfg->query_rows = 0;
    if (!strcmp(v, "all")) return 0;
    char *end = NULL;
    long long k = -1;
    if (!strncmp(v, "sample:", 7) && v[7] >= '0' && v[7] <= '9') k = strtoll(v + 7, &end, 10);
    if (k < 1 || k > INT32_MAX || !end || *end)
        return cfg_fail_key(c, cfg_get(c, "metrics.query_rows"), "metrics.query_rows",
                            "\"%s\": expected \"all\" or \"sample:K\" with K in 1..%d query rows "
                            "per head and context length", v, INT32_MAX);
    cfg->query_rows = k;
    return 0;
}

/* metrics.* numbers and switches (the readings are read with the text keys). */
static int read_metrics(ctx *c, as_config *cfg) {
    if (cfg_get_double(c, "metrics.ks_alpha", 0.01, &cfg->ks_alpha) ||
        cfg_get_double(c, "metrics.ssmax_scale", 0.0, &cfg->ssmax_scale) ||
        cfg_get_int64(c, "metrics.seed", 1, &cfg->seed))
        return -1;
    if (!(cfg->ks_alpha > 0 && cfg->ks_alpha < 1))
        return cfg_fail_key(c, cfg_get(c, "metrics.ks_alpha"), "metrics.ks_alpha",
                        "%g is not in (0, 1)", cfg->ks_alpha);
    if (cfg->ssmax_scale < 0)
        return cfg_fail_key(c, cfg_get(c, "metrics.ssmax_scale"), "metrics.ssmax_scale",
                        "must be >= 0 (0 = 1/ln(n_positions))");
    /* docs/metrics.md section 10.1 */
    if (cfg_get_double(c, "metrics.entmax_alpha", 1.5, &cfg->entmax_alpha) ||
        cfg_get_double(c, "metrics.sigmoid_bias", 0.0, &cfg->sigmoid_bias))
        return -1;
    if (!(cfg->entmax_alpha > 1 && cfg->entmax_alpha <= 2))
        return cfg_fail_key(c, cfg_get(c, "metrics.entmax_alpha"), "metrics.entmax_alpha",
                            "%g is not in (1, 2] (1 would be softmax, 2 is sparsemax)",
                            cfg->entmax_alpha);
    cfg->sigmoid_bias_set = cfg_get(c, "metrics.sigmoid_bias") != NULL;
    /* docs/metrics.md section 10: ssmax equals softmax at full context, per model */
    cfg->ssmax_given = cfg->ssmax_scale;
    for (size_t m = 0; m < cfg->n_model; m++) {
        size_t P = cfg->models[m].cfg.n_positions;
        cfg->models[m].ssmax_scale = cfg->ssmax_given > 0 ? cfg->ssmax_given
                                     : P > 1 ? 1.0 / log((double)P) : 1.0;
    }
    cfg->ssmax_scale = cfg->models[0].ssmax_scale;
    if (cfg->seed < 0) return cfg_fail_key(c, cfg_get(c, "metrics.seed"), "metrics.seed", "must be >= 0");
    if (get_bool(c, "metrics.grad_exact", 1, &cfg->grad_exact) ||
        get_bool(c, "metrics.dist_expect", 1, &cfg->dist_expect) || cfg_read_per_N_T(c, &cfg->axes))
        return -1;
    if (read_random(c, cfg)) return -1;
    return read_query_rows(c, cfg);
}

static int read_runtime(ctx *c, as_config *cfg) {
    int64_t bt, ce;
    if (cfg_get_int64(c, "runtime.blas_threads", 1, &bt) ||
        cfg_get_int64(c, "runtime.commit_every", 8, &ce))
        return -1;
    if (bt < 1 || bt > 4096)
        return cfg_fail_key(c, cfg_get(c, "runtime.blas_threads"), "runtime.blas_threads", "must be in 1..4096");
    /* The master holds 2 x commit_every + 1 result blocks (~11 MB each at paper
     * scale) in memory, so a typo like 8000000 must not reach the allocator. */
    if (ce < 1 || ce > 4096)
        return cfg_fail_key(c, cfg_get(c, "runtime.commit_every"), "runtime.commit_every", "must be in 1..4096");
    cfg->blas_threads = (int)bt, cfg->commit_every = (int)ce;
    /* on by default: the workers deflate, the master stores the bytes (docs/performance.md,
     * "Compressed results at no cost to the master") */
    if (get_bool(c, "runtime.compress", 1, &cfg->compress)) return -1;
    /* Not part of the canonical text: how long a stop waits changes no result, and the job
     * script passes a different value whenever the warning time differs. */
    if (cfg_get_double(c, "runtime.stop_grace", AS_STOP_GRACE_DEFAULT_S, &cfg->stop_grace)) return -1;
    if (!(cfg->stop_grace > 0 && cfg->stop_grace <= AS_STOP_GRACE_MAX_S))
        return cfg_fail_key(c, cfg_get(c, "runtime.stop_grace"), "runtime.stop_grace",
                        "must be in (0, %g] seconds", AS_STOP_GRACE_MAX_S);
    return 0;
}

/* The --set overrides, the unknown-key check, then every key group in the order its
 * defaults depend on (the models before the grid, the grid before the windows), then the
 * canonical text and its sha256. */
static int load_values(ctx *c, as_config *cfg, const char *const *sets, size_t n_sets) {
    for (size_t i = 0; i < n_sets; i++)
        if (apply_set(c, sets[i])) return -1;
    if (check_unknown(c, config_root_setting(&c->lc), "") || check_groups(c)) return -1;
    if (cfg_read_models(c, cfg) ||
        get_path(c, "text.path", cfg->dir, cfg->text_path) ||
        get_path(c, "output", cfg->dir, cfg->output) ||
        read_text_and_readings(c, cfg) || read_grid(c, cfg) || read_windows(c, cfg) ||
        read_metrics(c, cfg) || read_runtime(c, cfg))
        return -1;
    cfg->canonical = cfg_canonical_text(cfg);
    if (!cfg->canonical) return as_fail(c->err, "%s: out of memory", c->path);
    sha256_hex(cfg->sha256, cfg->canonical, strlen(cfg->canonical));
    return 0;
}

/* The expanded text x (named origin in messages) parsed by libconfig, then every key read
 * (load_values); x is freed, and cfg too on failure. */
static int parse_and_load(as_config *cfg, const char *origin, expansion *x, const char *const *sets,
                          size_t n_sets, as_err *err) {
    ctx c = {.path = origin, .err = err, .x = x};
    config_init(&c.lc);
    /* every @include is expanded already; one libconfig still saw would fail
     * to open rather than read a file relative to the current directory */
    config_set_include_dir(&c.lc, "/dev/null");
    int rc;
    if (config_read_string(&c.lc, x->text ? x->text : "") != CONFIG_TRUE) {
        const char *file = origin;
        unsigned line = (unsigned)config_error_line(&c.lc);
        cfg_exp_where(x, config_error_line(&c.lc), &file, &line);
        rc = as_fail(err, "%s:%u: %s%s", file, line, config_error_text(&c.lc),
                     lc_hint(config_error_text(&c.lc)));
    } else {
        rc = load_values(&c, cfg, sets, n_sets);
    }
    config_destroy(&c.lc);
    cfg_exp_free(x);
    if (rc) config_free(cfg);
    return rc;
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
    if (cfg_exp_file(&x, path, NULL, 0, 0, &cfg->file_text, err)) {
        cfg_exp_free(&x);
        return -1;
    }

    return parse_and_load(cfg, path, &x, sets, n_sets, err);
}

int config_load_text(as_config *cfg, const char *text, const char *origin,
                     const char *const *sets, size_t n_sets, as_err *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", origin);
    if (!getcwd(cfg->dir, sizeof cfg->dir)) return as_fail(err, "cannot read the current directory: %s", strerror(errno));
    cfg->file_text = strdup(text);
    if (!cfg->file_text) return as_fail(err, "%s: out of memory", origin);
    /* @include expanded like a file's (config_include.c), so a stored config that
     * includes a FIFO is refused in one line instead of blocking libconfig's open */
    expansion x = {0};
    if (cfg_exp_text(&x, origin, text, cfg->dir, err)) {
        cfg_exp_free(&x);
        config_free(cfg);
        return -1;
    }
    return parse_and_load(cfg, origin, &x, sets, n_sets, err);
}
