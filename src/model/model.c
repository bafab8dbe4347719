/* model.c -- see model.h. Loading is two passes over the safetensors
 * headers: first every tensor name, dtype and shape is matched against the
 * family's table (so a bad file fails before any memory is committed), then
 * the data is copied (and converted) into the arena. The families' config
 * readers and tables are family_*.c; the files (one or shards) shards.c. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_int.h"
#include "fileio.h"
#include "json.h"
#include "safetensors.h"

enum { ARENA_ALIGN = 64 };

static const model_family_ops *const families[MODEL_N_FAMILIES] = {
    [MODEL_GPT2] = &model_family_gpt2, [MODEL_NEOX] = &model_family_neox,
    [MODEL_LLAMA] = &model_family_llama, [MODEL_QWEN2] = &model_family_qwen2};

const char *model_family_name(model_family f) {
    static const char *const names[MODEL_N_FAMILIES] = {"gpt2", "gpt_neox", "llama", "qwen2"};
    return (unsigned)f < MODEL_N_FAMILIES ? names[f] : "?";
}

int model_read_size(const json_value *root, const char *path, const char *key, size_t dflt,
                    size_t max, size_t *out, as_err *err) {
    const json_value *v = json_get(root, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    size_t n;
    if (json_get_size(v, &n) || n == 0 || n > max) {
        if (v->type == JSON_NUMBER)
            return as_fail(err, "%s: key \"%s\" must be an integer in [1, %zu], got %g", path, key,
                           max, v->u.number);
        return as_fail(err, "%s: key \"%s\" must be an integer in [1, %zu], got a %s", path, key,
                       max, json_type_name(v->type));
    }
    *out = n;
    return 0;
}

int model_read_double(const json_value *root, const char *path, const char *key, double dflt,
                      double lo, double hi, double *out, as_err *err) {
    const json_value *v = json_get(root, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (v->type != JSON_NUMBER || !(v->u.number >= lo && v->u.number <= hi))
        return as_fail(err, "%s: key \"%s\" must be a number in [%g, %g]", path, key, lo, hi);
    *out = v->u.number;
    return 0;
}

int model_read_bool(const json_value *root, const char *path, const char *key, int dflt, int *out,
                    as_err *err) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return as_fail(err, "%s: key \"%s\" must be true or false, got a %s", path, key,
                       json_type_name(v->type));
    *out = v->type == JSON_TRUE;
    return 0;
}

int model_read_activation(gpt2_config *cfg, const json_value *root, const char *path,
                          const char *key, const char *dflt, const char *what, as_err *err) {
    snprintf(cfg->activation_function, sizeof cfg->activation_function, "%s", dflt);
    const json_value *act = json_get(root, key);
    if (!act) return 0;
    if (act->type != JSON_STRING)
        return as_fail(err, "%s: key \"%s\" must be a string, got a %s", path, key,
                       json_type_name(act->type));
    if (strcmp(act->u.string.ptr, dflt))
        return as_fail(err, "%s: key \"%s\" is \"%.64s\"; only \"%s\" (%s) is supported", path,
                       key, act->u.string.ptr, dflt, what);
    return 0;
}

int model_read_rope_scaling(gpt2_config *cfg, const json_value *root, const char *path,
                            as_err *err) {
    cfg->rope_scaling = ROPE_NONE;
    const json_value *rs = json_get(root, "rope_scaling");
    if (!rs || rs->type == JSON_NULL) return 0;
    if (rs->type != JSON_OBJECT)
        return as_fail(err, "%s: key \"rope_scaling\" must be null or an object", path);
    const json_value *type = json_get(rs, "rope_type");
    if (!type) type = json_get(rs, "type");
    if (!type || type->type != JSON_STRING)
        return as_fail(err, "%s: rope_scaling has no \"rope_type\" string", path);
    const char *t = type->u.string.ptr;
    if (!strcmp(t, "default")) return 0;
    if (strcmp(t, "linear") && strcmp(t, "llama3"))
        return as_fail(err, "%s: rope_scaling type \"%.64s\" is not supported (only \"linear\" "
                            "and \"llama3\")", path, t);
    if (model_read_double(rs, path, "factor", 1.0, 1e-6, 1e6, &cfg->rope_factor, err)) return -1;
    if (!json_get(rs, "factor"))
        return as_fail(err, "%s: rope_scaling \"%s\" needs a \"factor\"", path, t);
    cfg->rope_scaling = ROPE_LINEAR;
    if (!strcmp(t, "linear")) return 0;
    cfg->rope_scaling = ROPE_LLAMA3;
    if (model_read_double(rs, path, "low_freq_factor", 1.0, 1e-6, 1e6, &cfg->rope_low_freq_factor,
                          err) ||
        model_read_double(rs, path, "high_freq_factor", 4.0, 1e-6, 1e6,
                          &cfg->rope_high_freq_factor, err) ||
        model_read_size(rs, path, "original_max_position_embeddings", 8192, MODEL_MAX_POSITIONS,
                        &cfg->rope_original_max_positions, err))
        return -1;
    if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor))
        return as_fail(err, "%s: rope_scaling needs high_freq_factor > low_freq_factor", path);
    return 0;
}

/* model_type -> family; absent means gpt2 (files written before the key mattered). */
static int family_of(model_family *f, const json_value *root, const char *path, as_err *err) {
    const json_value *mt = json_get(root, "model_type");
    *f = MODEL_GPT2;
    if (!mt) return 0;
    const char *t = mt->type == JSON_STRING ? mt->u.string.ptr : NULL;
    for (int i = 0; t && i < MODEL_N_FAMILIES; i++)
        if (!strcmp(t, model_family_name((model_family)i))) {
            *f = (model_family)i;
            return 0;
        }
    if (t && !strcmp(t, "mistral")) { /* Llama's architecture; sliding_window is checked */
        *f = MODEL_LLAMA;
        return 0;
    }
    return as_fail(err, "%s: key \"model_type\" is %s%.64s%s; supported: \"gpt2\", \"gpt_neox\", "
                        "\"llama\", \"mistral\", \"qwen2\"",
                   path, t ? "\"" : "a ", t ? t : json_type_name(mt->type), t ? "\"" : "");
}

static int model_config_from_json(gpt2_config *cfg, const json_value *root, const char *path,
                                  as_err *err) {
    if (root->type != JSON_OBJECT)
        return as_fail(err, "%s: top level is a %s, expected an object", path,
                       json_type_name(root->type));
    if (family_of(&cfg->family, root, path, err)) return -1;
    return families[cfg->family]->config(cfg, root, path, err);
}

int model_config_read(gpt2_config *cfg, const char *dir, as_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    memset(cfg, 0, sizeof *cfg);
    json_doc *doc = json_parse_file(path, err);
    if (!doc) return -1;
    int rc = model_config_from_json(cfg, json_root(doc), path, err);
    json_free(doc);
    return rc;
}

const char *model_kind(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    as_err err;
    json_doc *doc = json_parse_file(path, &err);
    if (!doc) return "other";
    const json_value *root = json_root(doc);
    const char *kind = "other";
    const json_value *synth = json_get(root, "attnsweep_synthetic");
    gpt2_config c = {0};
    if (synth && synth->type == JSON_TRUE) {
        kind = "synthetic-random";
    } else if (!json_get(root, "training_note") && model_config_from_json(&c, root, path, &err) == 0 &&
               c.family == MODEL_GPT2 && c.vocab_size == 50257 && c.n_positions == 1024) {
        static const size_t release[][3] = {{12, 12, 768}, {24, 16, 1024}, {36, 20, 1280}, {48, 25, 1600}};
        for (size_t i = 0; i < 4; i++)
            if (c.n_layer == release[i][0] && c.n_head == release[i][1] && c.n_embd == release[i][2])
                kind = "gpt2";
    }
    json_free(doc);
    return kind;
}

int model_layer_name(const char *name, const char *prefix, size_t n_layer, const char **rest) {
    size_t np = strlen(prefix);
    if (strncmp(name, prefix, np)) return 0;
    const char *p = name + np;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    size_t n = 0;
    while (*p >= '0' && *p <= '9') {
        n = n * 10 + (size_t)(*p - '0');
        if (n >= n_layer) return 0;
        p++;
    }
    *rest = p;
    return 1;
}

void model_slot_add(model_slot *out, size_t *n, const float **field, size_t d0, size_t d1,
                    const char *fmt, ...) {
    if (out) {
        model_slot *s = &out[*n];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->name, sizeof s->name, fmt, ap);
        va_end(ap);
        s->ndim = d1 ? 2 : 1;
        s->shape[0] = d0;
        s->shape[1] = d1;
        s->field = field;
        s->found = NULL;
        s->file = NULL;
    }
    (*n)++;
}

size_t model_param_count(const gpt2_config *cfg) {
    const model_family_ops *ops = families[cfg->family];
    size_t n = ops->slots(NULL, cfg, NULL), total = 0;
    model_slot *slots = calloc(n, sizeof *slots);
    if (!slots) return 0;
    ops->slots(slots, cfg, NULL);
    for (size_t k = 0; k < n; k++) total += slots[k].shape[0] * (slots[k].ndim == 2 ? slots[k].shape[1] : 1);
    free(slots);
    return total;
}

static void format_shape(char *buf, size_t size, const size_t *shape, size_t ndim) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (size_t d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %zu" : "%zu", shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* The slot named `name`, or NULL: a linear scan (gpt2-xl has 580 slots; a
 * load matches them once). */
static model_slot *find_slot(model_slot *slots, size_t n_slots, const char *name) {
    for (size_t k = 0; k < n_slots; k++)
        if (!strcmp(slots[k].name, name)) return &slots[k];
    return NULL;
}

/* One tensor of a file against the table: its slot, dtype and shape. */
static int match_one(model_slot *slots, size_t n_slots, const model_family_ops *ops,
                     const sft_file *f, const sft_tensor *t, const gpt2_config *c, as_err *err) {
    char got[128], want[128];
    format_shape(got, sizeof got, t->shape, t->ndim);
    const char *name = t->name;
    size_t np = ops->strip_prefix ? strlen(ops->strip_prefix) : 0;
    if (np && !strncmp(name, ops->strip_prefix, np)) name += np;
    if (ops->ignored(name, c->n_layer)) return 0;
    if (c->tied_head && !strcmp(t->name, ops->head_name)) {
        /* a tied head may still be stored; the logits use the embedding */
        if (t->ndim != 2 || t->shape[0] != c->vocab_size || t->shape[1] != c->n_embd)
            return as_fail(err, "%s: tensor %s has shape %s, expected [%zu, %zu] (tied to the "
                                "embedding)", f->path, t->name, got, c->vocab_size, c->n_embd);
        return 0;
    }
    model_slot *s = find_slot(slots, n_slots, name);
    if (!s)
        return as_fail(err, "%s: unknown tensor %s (not part of a %zu-layer %s)", f->path, t->name,
                       c->n_layer, ops->noun);
    if (s->found)
        return as_fail(err, "%s: tensor %s appears twice (as %s and %s)", f->path, s->name,
                       s->found->name, t->name);
    if (t->dtype != SFT_F32 && t->dtype != SFT_F16 && t->dtype != SFT_BF16)
        return as_fail(err, "%s: tensor %s has dtype %s; expected F32 (F16, BF16 accepted)",
                       f->path, t->name, sft_dtype_name(t->dtype));
    int shape_ok = t->ndim == s->ndim;
    for (size_t d = 0; shape_ok && d < s->ndim; d++) shape_ok = t->shape[d] == s->shape[d];
    if (!shape_ok) {
        format_shape(want, sizeof want, s->shape, s->ndim);
        return as_fail(err, "%s: tensor %s has shape %s, expected %s from config.json", f->path,
                       t->name, got, want);
    }
    s->found = t;
    s->file = f;
    return 0;
}

/* Matches every tensor of the files to a slot (or to a known non-parameter)
 * and checks dtype and shape; then checks no slot is missing. */
static int match_tensors(model_slot *slots, size_t n_slots, const model_files *mf,
                         const gpt2_config *c, as_err *err) {
    const model_family_ops *ops = families[c->family];
    for (size_t i = 0; i < mf->n_files; i++)
        for (size_t j = 0; j < mf->files[i].n_tensors; j++)
            if (match_one(slots, n_slots, ops, &mf->files[i], &mf->files[i].tensors[j], c, err))
                return -1;
    for (size_t k = 0; k < n_slots; k++)
        if (!slots[k].found)
            return as_fail(err, "%s: missing tensor %s",
                           mf->index_path[0] ? mf->index_path : mf->files[0].path, slots[k].name);
    return 0;
}

int model_weights_sha256(const char *dir, char hex[65], as_err *err) {
    model_files mf;
    if (model_files_open(&mf, dir, err)) return -1;
    int rc = model_files_sha256(&mf, hex, err);
    model_files_close(&mf);
    return rc;
}

void model_free(gpt2_model *m) {
    if (!m) return;
    if (!m->arena_borrowed) free(m->arena);
    m->arena_borrowed = 0;
    free(m->blocks);
    m->arena = NULL;
    m->blocks = NULL;
    m->arena_floats = 0;
}

size_t model_arena_bytes(const gpt2_config *cfg) {
    return (model_param_count(cfg) * sizeof(float) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

/* model_load (arena NULL: allocate one) and model_load_into share this. */
static int load_weights(gpt2_model *m, const char *dir, float *arena, int fill, as_err *err) {
    memset(m, 0, sizeof *m);
    if (strlen(dir) >= sizeof m->dir) return as_fail(err, "%s: directory path too long", dir);
    strcpy(m->dir, dir);
    if (model_config_read(&m->cfg, dir, err)) return -1;
    const model_family_ops *ops = families[m->cfg.family];

    model_files mf;
    if (model_files_open(&mf, dir, err)) return -1;
    const char *path = mf.index_path[0] ? mf.index_path : mf.files[0].path;

    size_t n_slots = ops->slots(NULL, &m->cfg, NULL);
    model_slot *slots = calloc(n_slots, sizeof *slots);
    m->blocks = calloc(m->cfg.n_layer, sizeof *m->blocks);
    if (!slots || !m->blocks) {
        as_fail(err, "%s: out of memory", path);
        goto fail;
    }
    ops->slots(slots, &m->cfg, m);
    if (match_tensors(slots, n_slots, &mf, &m->cfg, err)) goto fail;

    m->arena_floats = model_param_count(&m->cfg);
    size_t bytes = model_arena_bytes(&m->cfg);
    if (arena && (uintptr_t)arena % ARENA_ALIGN) {
        as_fail(err, "%s: the weights arena given is not %d-byte aligned", path, ARENA_ALIGN);
        goto fail;
    }
    m->arena = arena ? arena : aligned_alloc(ARENA_ALIGN, bytes);
    m->arena_borrowed = arena != NULL;
    if (!m->arena) {
        char size[32];
        fileio_format_size(size, sizeof size, (double)bytes); /* not MB: a small model is 0 MB */
        as_fail(err, "%s: cannot allocate %s (%zu bytes) for the weights", path, size, bytes);
        goto fail;
    }
    if (fill && model_files_sha256(&mf, m->weights_sha256, err)) goto fail;
    size_t used = 0;
    for (size_t k = 0; k < n_slots; k++) {
        float *dst = m->arena + used;
        if (fill && sft_read_f32(slots[k].file, slots[k].found, dst, err)) goto fail;
        if (fill) sft_release(slots[k].file, slots[k].found);
        *slots[k].field = dst;
        used += slots[k].found->numel;
    }
    if (used != m->arena_floats) {
        as_fail(err, "%s: internal error: %zu floats loaded, arena holds %zu", path, used,
                m->arena_floats);
        goto fail;
    }
    if (!m->lm_head) m->lm_head = m->wte; /* tied */
    free(slots);
    model_files_close(&mf);
    return 0;
fail:
    free(slots);
    model_files_close(&mf);
    model_free(m);
    return -1;
}

int model_load(gpt2_model *m, const char *dir, as_err *err) {
    return load_weights(m, dir, NULL, 1, err);
}

int model_load_into(gpt2_model *m, const char *dir, float *arena, int fill, as_err *err) {
    if (!arena) {
        memset(m, 0, sizeof *m);
        return as_fail(err, "%s: no arena given for the weights", dir);
    }
    return load_weights(m, dir, arena, fill, err);
}
