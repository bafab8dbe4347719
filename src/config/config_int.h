/* config_int.h -- private to src/config/config*.c: the parse context and the helpers the config files share. */
#ifndef ATTNSWEEP_CONFIG_INT_H
#define ATTNSWEEP_CONFIG_INT_H

#include <libconfig.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The text of a config file with its @includes expanded, and each line's FILE:LINE
 * (config_include.c). */
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

/* One parse: the libconfig tree and where its settings came from. */
typedef struct {
    config_t lc;
    const char *path; /* the config file as given */
    as_err *err;
    const expansion *x; /* the parsed text's line map */
} ctx;

/* ------------------------------------------------- setting types -- */

static inline int is_int(const config_setting_t *s) {
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}
static inline int is_number(const config_setting_t *s) {
    return is_int(s) || config_setting_type(s) == CONFIG_TYPE_FLOAT;
}
static inline int is_sequence(const config_setting_t *s) {
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST;
}
static inline double number_of(const config_setting_t *s) {
    if (config_setting_type(s) == CONFIG_TYPE_FLOAT) return config_setting_get_float(s);
    return (double)config_setting_get_int64(s);
}

/* config_include.c */
int cfg_exp_file(expansion *x, const char *path, const char *from, unsigned from_line, int depth,
                 char **text_out, as_err *err);
/* The same for a config given as text (a stored config), named name in messages; its
 * relative @include paths resolve against dir. */
int cfg_exp_text(expansion *x, const char *name, const char *text, const char *dir, as_err *err);
void cfg_exp_free(expansion *x);
int cfg_exp_where(const expansion *x, int line, const char **file, unsigned *file_line);

/* config.c: keys, context, scalar getters */
extern int cfg_override_mark; /* the hook of settings that came from --set */
size_t cfg_edit_distance(const char *a, const char *b);
int cfg_fail_key(ctx *c, const config_setting_t *s, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *cfg_type_name(const config_setting_t *s);
config_setting_t *cfg_find_key(config_setting_t *root, const char *key);
config_setting_t *cfg_get(ctx *c, const char *key);
int cfg_get_int64(ctx *c, const char *key, int64_t def, int64_t *out);
int cfg_get_double(ctx *c, const char *key, double def, double *out);
int cfg_get_choice(ctx *c, const char *key, const char *const *names, int def, int *out);
int cfg_from_override(const config_setting_t *s);
int cfg_resolve_path(char *out, size_t size, const char *base, const char *p);

/* config_models.c: the key `model` (a directory or a list) into cfg->models, n_model,
 * model_dir, model, max_n_layer, max_n_head */
int cfg_read_models(ctx *c, as_config *cfg);

/* config_axes.c */
int cfg_sort_unique_i32(ctx *c, const config_setting_t *s, const char *key, int32_t *v, size_t n);
int cfg_sort_unique_f64(ctx *c, const config_setting_t *s, const char *key, double *v, size_t n);
int cfg_read_int_list(ctx *c, config_setting_t *s, const char *key, int32_t **out, size_t *n);
int cfg_read_double_list(ctx *c, config_setting_t *s, const char *key, double **out, size_t *n);
int cfg_read_N(ctx *c, as_axes *ax);
int cfg_read_T(ctx *c, as_axes *ax);
int cfg_read_normalizer(ctx *c, as_axes *ax);
int cfg_read_per_N_T(ctx *c, as_axes *ax);
int cfg_read_index_list(ctx *c, const char *key, size_t limit, const char *what, int32_t **out,
                        size_t *n);

/* config_text.c */
char *cfg_canonical_text(const as_config *cfg);
/* The name tables behind config_*_name (config.h), in enum order, NULL-terminated: the
 * choices cfg_get_choice offers. */
extern const char *const cfg_text_format_names[], *const cfg_vectors_names[],
    *const cfg_rows_names[], *const cfg_logits_names[], *const cfg_distance_names[],
    *const cfg_ks_against_names[];

#endif
