/* config_axes.c -- the grid axes: integer and number lists, N ranges, the T grid, normalizers, indices. */
#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
int cfg_sort_unique_i32(ctx *c, const config_setting_t *s, const char *key, int32_t *v,
                        size_t n) {
    qsort(v, n, sizeof *v, cmp_i32);
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1]) return cfg_fail_key(c, s, key, "duplicate value %d", (int)v[i]);
    return 0;
}
int cfg_sort_unique_f64(ctx *c, const config_setting_t *s, const char *key, double *v,
                        size_t n) {
    qsort(v, n, sizeof *v, cmp_f64);
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1]) return cfg_fail_key(c, s, key, "duplicate value %.17g", v[i]);
    return 0;
}

#define AS_AXIS_MAX ((size_t)1 << 20)

/* An integer scalar or a non-empty array/list of integers in int32 range. */
int cfg_read_int_list(ctx *c, config_setting_t *s, const char *key, int32_t **out,
                      size_t *n) {
    size_t count = is_sequence(s) ? (size_t)config_setting_length(s) : 1;
    if (!is_sequence(s) && !is_int(s))
        return cfg_fail_key(c, s, key, "expected a list of integers, got %s", cfg_type_name(s));
    if (count == 0) return cfg_fail_key(c, s, key, "empty list");
    int32_t *v = malloc(count * sizeof *v);
    if (!v) return cfg_fail_key(c, s, key, "out of memory");
    for (size_t i = 0; i < count; i++) {
        config_setting_t *e = is_sequence(s) ? config_setting_get_elem(s, (unsigned)i) : s;
        if (!is_int(e)) {
            free(v);
            return cfg_fail_key(c, s, key, "element %zu: expected an integer, got %s", i,
                            cfg_type_name(e));
        }
        long long x = config_setting_get_int64(e);
        if (x < INT32_MIN || x > INT32_MAX) {
            free(v);
            return cfg_fail_key(c, s, key, "element %zu: %lld is out of range", i, x);
        }
        v[i] = (int32_t)x;
    }
    *out = v, *n = count;
    return 0;
}

/* A number or a non-empty array/list of numbers (integers accepted). */
int cfg_read_double_list(ctx *c, config_setting_t *s, const char *key, double **out,
                         size_t *n) {
    size_t count = is_sequence(s) ? (size_t)config_setting_length(s) : 1;
    if (!is_sequence(s) && !is_number(s))
        return cfg_fail_key(c, s, key, "expected a list of numbers, got %s", cfg_type_name(s));
    if (count == 0) return cfg_fail_key(c, s, key, "empty list");
    double *v = malloc(count * sizeof *v);
    if (!v) return cfg_fail_key(c, s, key, "out of memory");
    for (size_t i = 0; i < count; i++) {
        config_setting_t *e = is_sequence(s) ? config_setting_get_elem(s, (unsigned)i) : s;
        if (!is_number(e)) {
            free(v);
            return cfg_fail_key(c, s, key, "element %zu: expected a number, got %s", i,
                            cfg_type_name(e));
        }
        v[i] = number_of(e);
        if (!isfinite(v[i])) {
            free(v);
            return cfg_fail_key(c, s, key, "element %zu: must be finite", i);
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

int cfg_read_N(ctx *c, as_axes *ax) {
    const char *key = "grid.N";
    config_setting_t *s = cfg_get(c, key);
    if (s && config_setting_type(s) != CONFIG_TYPE_STRING) {
        if (cfg_read_int_list(c, s, key, &ax->N, &ax->n_N)) return -1;
    } else {
        const char *text = s ? config_setting_get_string(s) : "1:128";
        as_err e;
        if (config_parse_range(&ax->N, &ax->n_N, text, &e)) return cfg_fail_key(c, s, key, "%s", e.msg);
    }
    if (cfg_sort_unique_i32(c, s, key, ax->N, ax->n_N)) return -1;
    if (ax->N[0] < 1) return cfg_fail_key(c, s, key, "%d: N must be >= 1", (int)ax->N[0]);
    return 0;
}

int cfg_read_T(ctx *c, as_axes *ax) {
    config_setting_t *s = cfg_get(c, "grid.T");
    if (s && config_setting_type(s) != CONFIG_TYPE_GROUP) {
        if (cfg_read_double_list(c, s, "grid.T", &ax->T, &ax->n_T)) return -1;
        if (cfg_sort_unique_f64(c, s, "grid.T", ax->T, ax->n_T)) return -1;
        if (!(ax->T[0] > 0)) return cfg_fail_key(c, s, "grid.T", "%g: T must be > 0", ax->T[0]);
        return 0;
    }
    double min, max;
    int64_t count;
    int spacing;
    static const char *const spacings[] = {"linear", "log", NULL};
    if (cfg_get_double(c, "grid.T.min", 1e-3, &min) || cfg_get_double(c, "grid.T.max", 1e2, &max) ||
        cfg_get_int64(c, "grid.T.count", 21, &count) ||
        cfg_get_choice(c, "grid.T.spacing", spacings, 1, &spacing))
        return -1;
    if (!(min > 0)) return cfg_fail_key(c, cfg_get(c, "grid.T.min"), "grid.T.min", "T must be > 0, got %g", min);
    if (count < 1) return cfg_fail_key(c, cfg_get(c, "grid.T.count"), "grid.T.count", "must be >= 1");
    if (max < min)
        return cfg_fail_key(c, cfg_get(c, "grid.T.max"), "grid.T.max", "%g is below grid.T.min = %g", max, min);
    double *inc = NULL;
    size_t n_inc = 0;
    config_setting_t *si = cfg_get(c, "grid.T.include");
    if (si) {
        if (is_sequence(si) && config_setting_length(si) == 0) {
            /* include = [] means none */
        } else if (cfg_read_double_list(c, si, "grid.T.include", &inc, &n_inc)) {
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
        return cfg_fail_key(c, cfg_get(c, sub) ? cfg_get(c, sub) : s, sub, "%s", e.msg);
    }
    return 0;
}

/* metrics.per_N_T: the grid T (within 1e-9 relative, like grid.T.include) at which the per-N
 * family is computed, as the mask ax->per_N_at [n_T]. Absent, or naming every grid T: NULL
 * (every T, and the canonical text without the key). After cfg_read_T. */
int cfg_read_per_N_T(ctx *c, as_axes *ax) {
    const char *key = "metrics.per_N_T";
    config_setting_t *s = cfg_get(c, key);
    if (!s) return 0;
    double *v = NULL;
    size_t n = 0;
    if (cfg_read_double_list(c, s, key, &v, &n)) return -1;
    ax->per_N_at = calloc(ax->n_T, 1);
    if (!ax->per_N_at) {
        free(v);
        return as_fail(c->err, "out of memory");
    }
    size_t marked = 0;
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        while (t < ax->n_T && !(fabs(v[i] - ax->T[t]) <= 1e-9 * fabs(ax->T[t]))) t++;
        if (t == ax->n_T) {
            double bad = v[i];
            free(v);
            return cfg_fail_key(c, s, key, "element %zu: %g is not a value of grid.T", i, bad);
        }
        if (ax->per_N_at[t]) {
            double bad = v[i];
            free(v);
            return cfg_fail_key(c, s, key, "element %zu: %g is listed twice", i, bad);
        }
        ax->per_N_at[t] = 1, marked++;
    }
    free(v);
    if (marked == ax->n_T) { /* every T: the default */
        free(ax->per_N_at);
        ax->per_N_at = NULL;
    }
    return 0;
}

int cfg_read_normalizer(ctx *c, as_axes *ax) {
    const char *key = "grid.normalizer";
    config_setting_t *s = cfg_get(c, key);
    size_t n = !s ? 1 : is_sequence(s) ? (size_t)config_setting_length(s) : 1;
    if (s && !is_sequence(s) && config_setting_type(s) != CONFIG_TYPE_STRING)
        return cfg_fail_key(c, s, key, "expected a list of strings, got %s", cfg_type_name(s));
    if (n == 0) return cfg_fail_key(c, s, key, "empty list");
    if (n > MET_N_NORMALIZERS)
        return cfg_fail_key(c, s, key, "%zu entries: each of the %d normalizers at most once", n,
                            (int)MET_N_NORMALIZERS);
    ax->normalizer = malloc(n * sizeof *ax->normalizer);
    if (!ax->normalizer) return as_fail(c->err, "out of memory");
    ax->n_norm = 0;
    int has_softmax = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = "softmax";
        if (s) {
            config_setting_t *e = is_sequence(s) ? config_setting_get_elem(s, (unsigned)i) : s;
            if (config_setting_type(e) != CONFIG_TYPE_STRING)
                return cfg_fail_key(c, s, key, "element %zu: expected a string, got %s", i,
                                cfg_type_name(e));
            name = config_setting_get_string(e);
        }
        int z = met_normalizer_from_name(name);
        if (z < 0) {
            met_normalizer best = MET_SOFTMAX;
            for (int k = 1; k < MET_N_NORMALIZERS; k++)
                if (cfg_edit_distance(name, met_normalizer_name((met_normalizer)k)) <
                    cfg_edit_distance(name, met_normalizer_name(best)))
                    best = (met_normalizer)k;
            return cfg_fail_key(c, s, key, "unknown normalizer \"%s\" (did you mean %s?)", name,
                            met_normalizer_name(best));
        }
        for (size_t k = 0; k < ax->n_norm; k++)
            if ((int)ax->normalizer[k] == z)
                return cfg_fail_key(c, s, key, "duplicate value \"%s\"", name);
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
int cfg_read_index_list(ctx *c, const char *key, size_t limit, const char *what,
                        int32_t **out, size_t *n) {
    config_setting_t *s = cfg_get(c, key);
    if (!s || config_setting_type(s) == CONFIG_TYPE_STRING) {
        if (s && strcmp(config_setting_get_string(s), "all"))
            return cfg_fail_key(c, s, key, "\"%s\": expected \"all\" or a list of indices",
                            config_setting_get_string(s));
        *out = malloc((limit ? limit : 1) * sizeof **out);
        if (!*out) return as_fail(c->err, "out of memory");
        for (size_t i = 0; i < limit; i++) (*out)[i] = (int32_t)i;
        *n = limit;
        return 0;
    }
    if (cfg_read_int_list(c, s, key, out, n) || cfg_sort_unique_i32(c, s, key, *out, *n)) return -1;
    if ((*out)[0] < 0 || (size_t)(*out)[*n - 1] >= limit) {
        int32_t bad = (*out)[0] < 0 ? (*out)[0] : (*out)[*n - 1];
        return cfg_fail_key(c, s, key, "%d is out of range 0..%zu (the model has %s = %zu)", (int)bad,
                        limit - 1, what, limit);
    }
    return 0;
}
