/* config_models.c -- the key `model`: one model directory or a list of them (the
 * results file's model axis, docs/results.md "The model axis").
 *
 *   model = "models/gpt2";                                   one model
 *   model = ["ckpt/wp-step100", "ckpt/wp-step400", "ckpt/wp"]; a model axis, in this order
 *
 * Each directory is read and checked here, before any weight is touched: config.json
 * (model_config_read) and its optional integer "training_step" (else the step a name like
 * Pythia's "step1000" states); the name of a model is
 * its directory's basename and must be unique (the `model` coordinate); every model must
 * read text with the same tokenizer (vocab.json, merges.txt, tokenizer.json and
 * tokenizer_config.json identical by sha256, or
 * absent from every directory), because the text is tokenized once for all of them
 * (with text.format = "tokens" nothing is tokenized and the files are not compared). */
#include "config_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "sha256.h"

/* The step a checkpoint's directory name states: "stepN" (Pythia's revisions, fetched by
 * jobs/fetch-model.sh --revisions into DIR/stepN) or "checkpoint-N" (Stanford CRFM's GPT-2
 * runs), N decimal digits only; -1 for any other name. */
static int64_t step_of_name(const char *name) {
    const char *d = !strncmp(name, "step", 4) ? name + 4 : !strncmp(name, "checkpoint-", 11) ? name + 11 : NULL;
    if (!d || !*d || strlen(d) > 18) return -1; /* 18 digits fit an int64 */
    int64_t v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return -1;
        v = 10 * v + (*d - '0');
    }
    return v;
}

/* The checkpoint's training step: "training_step" of dir/config.json when it has one (an
 * error when not an integer >= 0), else the step its directory name states, else -1. */
static int read_training_step(const char *dir, const char *name, int64_t *step, as_err *err) {
    char path[AS_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    *step = -1;
    json_doc *doc = json_parse_file(path, err);
    if (!doc) return -1;
    const json_value *v = json_get(json_root(doc), "training_step");
    int rc = 0;
    if (v && v->type != JSON_NULL && (json_get_int64(v, step) || *step < 0))
        rc = as_fail(err, "%s: key \"training_step\" must be an integer >= 0", path);
    else if (!v || v->type == JSON_NULL)
        *step = step_of_name(name);
    json_free(doc);
    return rc;
}

/* sha256 of dir/name, or "absent" when the file does not exist. */
static int file_digest(char hex[65], const char *dir, const char *name, as_err *err) {
    char path[AS_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) {
        snprintf(hex, 65, "absent");
        return 0;
    }
    return sha256_file_hex(hex, path, err);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

int cfg_read_models(ctx *c, as_config *cfg) {
    config_setting_t *s = cfg_get(c, "model");
    if (!s) return as_fail(c->err, "%s: missing key model (it has no default)", c->path);
    int is_list = config_setting_type(s) == CONFIG_TYPE_ARRAY || config_setting_type(s) == CONFIG_TYPE_LIST;
    if (!is_list && config_setting_type(s) != CONFIG_TYPE_STRING)
        return cfg_fail_key(c, s, "model", "expected a string (a model directory) or a list of them, got %s",
                            cfg_type_name(s));
    size_t n = is_list ? (size_t)config_setting_length(s) : 1;
    if (n == 0) return cfg_fail_key(c, s, "model", "empty list: give at least one model directory");
    if (n > AS_MODEL_MAX) return cfg_fail_key(c, s, "model", "%zu models; at most %d", n, AS_MODEL_MAX);
    cfg->models = calloc(n, sizeof *cfg->models);
    if (!cfg->models) return as_fail(c->err, "out of memory");
    cfg->n_model = n;

    char base_dir[AS_PATH_MAX];
    if (cfg_from_override(s)) {
        if (!getcwd(base_dir, sizeof base_dir)) return cfg_fail_key(c, s, "model", "cannot read the current directory");
    } else {
        snprintf(base_dir, sizeof base_dir, "%s", cfg->dir);
    }
    char digest0[4][65] = {"", "", "", ""};
    const config_setting_t *fmt = cfg_get(c, "text.format");
    int pre_tokenized = fmt && config_setting_type(fmt) == CONFIG_TYPE_STRING &&
                        !strcmp(config_setting_get_string(fmt), "tokens");
    for (size_t m = 0; m < n; m++) {
        as_model_spec *ms = &cfg->models[m];
        const config_setting_t *e = is_list ? config_setting_get_elem(s, (unsigned)m) : s;
        if (config_setting_type(e) != CONFIG_TYPE_STRING)
            return cfg_fail_key(c, s, "model", "element %zu is %s, expected a directory (string)", m,
                                cfg_type_name(e));
        const char *v = config_setting_get_string(e);
        if (!*v) return cfg_fail_key(c, s, "model", "empty path%s", is_list ? " in the list" : "");
        if (cfg_resolve_path(ms->dir, sizeof ms->dir, base_dir, v))
            return cfg_fail_key(c, s, "model", "path too long");
        snprintf(ms->name, sizeof ms->name, "%.255s", base_name(ms->dir));
        for (size_t k = 0; k < m; k++)
            if (!strcmp(cfg->models[k].name, ms->name))
                return cfg_fail_key(c, s, "model", "two models are named %s (%s and %s): the model "
                                    "coordinate is the directory's name, so give them distinct names",
                                    ms->name, cfg->models[k].dir, ms->dir);
        if (model_config_read(&ms->cfg, ms->dir, c->err) ||
            read_training_step(ms->dir, ms->name, &ms->training_step, c->err))
            return cfg_fail_key(c, s, "model", "%s", c->err->msg);
        if (ms->cfg.n_layer > cfg->max_n_layer) cfg->max_n_layer = ms->cfg.n_layer;
        if (ms->cfg.n_head > cfg->max_n_head) cfg->max_n_head = ms->cfg.n_head;
        /* one model: nothing to compare its tokenizer with; pre-tokenized text: no
         * tokenizer is used (the ids must fit each model's vocabulary, checked per pass) */
        if (n == 1 || pre_tokenized) continue;
        static const char *const files[] = {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"};
        for (int f = 0; f < 4; f++) {
            char hex[65];
            if (file_digest(hex, ms->dir, files[f], c->err)) return cfg_fail_key(c, s, "model", "%s", c->err->msg);
            if (m == 0) memcpy(digest0[f], hex, sizeof hex);
            else if (strcmp(hex, digest0[f]))
                return cfg_fail_key(c, s, "model", "%s and %s have different tokenizers (%s differs); the "
                                    "models of one sweep read the same tokens, so give them the same "
                                    "tokenizer files", cfg->models[0].dir, ms->dir, files[f]);
        }
    }
    snprintf(cfg->model_dir, sizeof cfg->model_dir, "%s", cfg->models[0].dir);
    cfg->model = cfg->models[0].cfg;
    return 0;
}
