/* config_text.c -- the canonical config text (sorted keys, resolved values) that the sha256 covers. */
#include "config_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- names -- */

const char *const cfg_text_format_names[] = {[AS_TEXT_PLAIN] = "text", [AS_TEXT_TOKENS] = "tokens", NULL};
const char *const cfg_vectors_names[] = {[AS_VECTORS_VALUE] = "value", [AS_VECTORS_RESID] = "resid", NULL};
const char *const cfg_rows_names[] = {[AS_ROWS_VISIBLE] = "visible", [AS_ROWS_FULL_ROW] = "full_row", NULL};
const char *const cfg_logits_names[] = {[AS_LOGITS_RAW] = "raw", [AS_LOGITS_SCALED] = "scaled", NULL};
const char *const cfg_distance_names[] = {[AS_DISTANCE_PER_TOKEN] = "per_token",
                                          [AS_DISTANCE_AGGREGATE] = "aggregate", NULL};
const char *const cfg_ks_against_names[] = {[AS_KS_EXPECT] = "expect", [AS_KS_RANDOM] = "random", NULL};

/* names[v] when v is one of the enum's values (the entries before the NULL), else "?" */
static const char *name_of(const char *const *names, int v) {
    for (int i = 0; names[i]; i++)
        if (i == v) return names[i];
    return "?";
}

const char *config_text_format_name(as_text_format f) { return name_of(cfg_text_format_names, (int)f); }
const char *config_vectors_name(as_vectors v) { return name_of(cfg_vectors_names, (int)v); }
const char *config_rows_name(as_rows r) { return name_of(cfg_rows_names, (int)r); }
const char *config_logits_name(as_logits l) { return name_of(cfg_logits_names, (int)l); }
const char *config_ks_against_name(as_ks_against k) { return name_of(cfg_ks_against_names, (int)k); }
const char *config_distance_name(as_distance d) { return name_of(cfg_distance_names, (int)d); }

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
char *cfg_canonical_text(const as_config *cfg) {
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
    if (!cfg->dist_expect) sb_printf(&b, "dist_expect = false;\n  ");
    if (cfg->dist_random) sb_printf(&b, "dist_random = true;\n  ");
    if (cfg->distance != AS_DISTANCE_PER_TOKEN)
        sb_printf(&b, "distance = \"%s\";\n  ", config_distance_name(cfg->distance));
    if (cfg->entmax_alpha != 1.5) {
        sb_printf(&b, "entmax_alpha = ");
        sb_double(&b, cfg->entmax_alpha);
        sb_printf(&b, ";\n  ");
    }
    if (!cfg->grad_exact) sb_printf(&b, "grad_exact = false;\n  ");
    if (cfg->ks_against != AS_KS_EXPECT)
        sb_printf(&b, "ks_against = \"%s\";\n  ", config_ks_against_name(cfg->ks_against));
    sb_printf(&b, "ks_alpha = ");
    sb_double(&b, cfg->ks_alpha);
    /* Keys added after results files existed appear only when they differ from
     * their default, so those files' canonical text (and resume) is unchanged. */
    if (cfg->logits != AS_LOGITS_RAW) sb_printf(&b, ";\n  logits = \"%s\"", config_logits_name(cfg->logits));
    if (a->per_N_at) { /* the grid T it names, in grid order */
        double *v = malloc((a->n_T ? a->n_T : 1) * sizeof *v);
        size_t k = 0;
        if (!v) b.oom = 1;
        for (size_t t = 0; v && t < a->n_T; t++)
            if (a->per_N_at[t]) v[k++] = a->T[t];
        sb_printf(&b, ";\n  per_N_T = ");
        if (v) sb_f64_list(&b, v, k);
        free(v);
    }
    if (cfg->query_rows) sb_printf(&b, ";\n  query_rows = \"sample:%lld\"", (long long)cfg->query_rows);
    if (cfg->dist_random) sb_printf(&b, ";\n  random_subsets = %d", cfg->random_subsets);
    sb_printf(&b, ";\n  rows = \"%s\";\n  seed = ", config_rows_name(cfg->rows));
    sb_int64(&b, cfg->seed);
    if (cfg->sigmoid_bias_set) {
        sb_printf(&b, ";\n  sigmoid_bias = ");
        sb_double(&b, cfg->sigmoid_bias);
    }
    /* resolved: one value when every model resolves alike, else 0 (per model, config.h) */
    double ssmax = cfg->ssmax_scale;
    for (size_t m = 1; m < cfg->n_model; m++)
        if (cfg->models[m].ssmax_scale != ssmax) ssmax = 0.0;
    sb_printf(&b, ";\n  ssmax_scale = ");
    sb_double(&b, ssmax);
    sb_printf(&b, ";\n  vectors = \"%s\";\n};\nmodel = ",
              config_vectors_name(cfg->vectors));
    /* one model: a string, as before the model axis (so older files keep their sha256) */
    if (cfg->n_model <= 1) {
        sb_string(&b, cfg->model_dir);
    } else {
        sb_printf(&b, "[");
        for (size_t m = 0; m < cfg->n_model; m++) {
            if (m) sb_printf(&b, ", ");
            sb_string(&b, cfg->models[m].dir);
        }
        sb_printf(&b, "]");
    }
    sb_printf(&b, ";\noutput = ");
    sb_string(&b, cfg->output);
    /* compress only when off (it is on by default), so that configs without the key keep
     * the sha256 they had before it existed. Harmless to change either way (a runtime key):
     * an existing output keeps the form its datasets have. */
    sb_printf(&b, ";\nruntime = {\n  blas_threads = %d;\n  commit_every = %d;\n%s};\n",
              cfg->blas_threads, cfg->commit_every, cfg->compress ? "" : "  compress = false;\n");
    /* add_bos only when set, so that configs without the key keep their sha256 */
    sb_printf(&b, "text = {\n%s  format = \"%s\";\n  path = ",
              cfg->add_bos == AS_BOS_ON ? "  add_bos = true;\n" : cfg->add_bos == AS_BOS_OFF ? "  add_bos = false;\n" : "",
              config_text_format_name(cfg->text_format));
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
