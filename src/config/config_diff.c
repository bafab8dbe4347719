/* config_diff.c -- comparing two canonical configs for resume and extension: the verdicts. */
#include "config_int.h"

#include <stdio.h>
#include <string.h>

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

/* The i-th model directory of a `model` setting (a string is a list of one). */
static const char *nth_model(const config_setting_t *s, int i) {
    if (config_setting_type(s) == CONFIG_TYPE_STRING) return i == 0 ? config_setting_get_string(s) : NULL;
    const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
    return e && config_setting_type(e) == CONFIG_TYPE_STRING ? config_setting_get_string(e) : NULL;
}
static int count_models(const config_setting_t *s) {
    return config_setting_type(s) == CONFIG_TYPE_STRING ? 1 : config_setting_length(s);
}

/* The model list: models appended at the end extend the sweep (their cells are new);
 * one model's path changed in place is a moved path (refused, as for text.path);
 * models removed or reordered would give the stored cells other model indices. */
static as_diff_kind classify_models(const config_setting_t *old, const config_setting_t *new) {
    int no = count_models(old), nn = count_models(new), same = 0;
    for (int i = 0; i < no && i < nn; i++) {
        const char *a = nth_model(old, i), *b = nth_model(new, i);
        same += a && b && !strcmp(a, b);
    }
    if (nn > no && same == no) return AS_DIFF_EXTEND;
    if (nn == no) {
        /* the same directories in another order: refused; else a path changed */
        int permuted = 1;
        for (int i = 0; i < no && permuted; i++) {
            int found = 0;
            for (int k = 0; k < nn && !found; k++)
                found = nth_model(old, i) && nth_model(new, k) && !strcmp(nth_model(old, i), nth_model(new, k));
            permuted = found;
        }
        return permuted ? AS_DIFF_REFUSED : AS_DIFF_PATH;
    }
    return AS_DIFF_REFUSED;
}

static as_diff_kind classify(const char *key, const config_setting_t *old,
                             const config_setting_t *new) {
    if (!strcmp(key, "output") || !strncmp(key, "runtime.", 8)) return AS_DIFF_HARMLESS;
    if (!old || !new) return AS_DIFF_REFUSED;
    if (!strcmp(key, "model")) return classify_models(old, new);
    if (!strcmp(key, "text.path")) return AS_DIFF_PATH;
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
        config_setting_t *other = cfg_find_key(broot, key);
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

/* Models appended to a list whose contexts differ change the canonical
 * metrics.ssmax_scale (one resolved value becomes 0.0, "per model"; config.h). That is an
 * extension, not a change, when every stored model still resolves to the value it was
 * computed with: both texts are loaded (their models' config.json read) to tell. */
static void ssmax_of_appended_models(as_config_diff *d, const char *old_text, const char *new_text) {
    size_t at = d->n, models = d->n;
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(d->item[i].key, "metrics.ssmax_scale") && d->item[i].kind == AS_DIFF_REFUSED) at = i;
        if (!strcmp(d->item[i].key, "model") && d->item[i].kind == AS_DIFF_EXTEND) models = i;
    }
    if (at == d->n || models == d->n) return;
    as_config o, n;
    as_err err;
    if (config_load_text(&o, old_text, "stored config", NULL, 0, &err)) return;
    int same = config_load_text(&n, new_text, "new config", NULL, 0, &err) == 0;
    int kept = same && o.n_model <= n.n_model;
    for (size_t m = 0; kept && m < o.n_model; m++) kept = o.models[m].ssmax_scale == n.models[m].ssmax_scale;
    config_free(&o);
    if (same) config_free(&n);
    if (!kept) return;
    d->item[at].kind = AS_DIFF_EXTEND;
    d->verdict = AS_DIFF_HARMLESS;
    for (size_t i = 0; i < d->n; i++)
        if (d->item[i].kind > d->verdict) d->verdict = d->item[i].kind;
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
    if (!rc) ssmax_of_appended_models(out, old_canonical, new_canonical);
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

int config_diff_blocks(const as_config_diff *d, char *buf, size_t size) {
    buf[0] = 0;
    if (d->verdict != AS_DIFF_REFUSED && d->verdict != AS_DIFF_PATH) return 0;
    as_config_diff shown = *d;
    shown.n = 0;
    for (size_t i = 0; i < d->n; i++)
        if (d->item[i].kind != AS_DIFF_HARMLESS) shown.item[shown.n++] = d->item[i];
    config_diff_describe(&shown, buf, size);
    return 1;
}
