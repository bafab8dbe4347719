/* model.c -- see model.h. Loading is two passes over the safetensors
 * header: first every tensor name, dtype and shape is matched against the
 * config (so a bad file fails before any memory is committed), then the
 * data is copied (and converted) into the arena. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "json.h"
#include "safetensors.h"
#include "sha256.h"

enum { ARENA_ALIGN = 64 };

/* Bounds that keep every size product far from overflow; real GPT-2 sizes
 * (xl: 48 layers, 1600 wide, 1024 positions, 50257 tokens) sit well inside. */
#define MAX_LAYER 1024
#define MAX_EMBD 65536
#define MAX_POSITIONS (1u << 20)
#define MAX_VOCAB (1u << 24)

static int read_size_key(const json_value *root, const char *path, const char *key, size_t dflt,
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

static int config_from_json(gpt2_config *cfg, const json_value *root, const char *path,
                            as_err *err) {
    if (root->type != JSON_OBJECT)
        return as_fail(err, "%s: top level is a %s, expected an object", path,
                       json_type_name(root->type));
    /* Defaults are Hugging Face GPT2Config's. */
    if (read_size_key(root, path, "n_layer", 12, MAX_LAYER, &cfg->n_layer, err) ||
        read_size_key(root, path, "n_head", 12, MAX_EMBD, &cfg->n_head, err) ||
        read_size_key(root, path, "n_embd", 768, MAX_EMBD, &cfg->n_embd, err) ||
        read_size_key(root, path, "vocab_size", 50257, MAX_VOCAB, &cfg->vocab_size, err))
        return -1;
    /* Old configs carry n_ctx next to n_positions; HF reads n_positions. */
    const char *positions_key = json_get(root, "n_positions") || !json_get(root, "n_ctx")
                                    ? "n_positions"
                                    : "n_ctx";
    if (read_size_key(root, path, positions_key, 1024, MAX_POSITIONS, &cfg->n_positions, err))
        return -1;

    const json_value *model_type = json_get(root, "model_type");
    if (model_type && (model_type->type != JSON_STRING || strcmp(model_type->u.string.ptr, "gpt2")))
        return as_fail(err, "%s: key \"model_type\" must be \"gpt2\"", path);

    cfg->layer_norm_epsilon = 1e-5f;
    const json_value *eps = json_get(root, "layer_norm_epsilon");
    if (eps) {
        if (eps->type != JSON_NUMBER || !(eps->u.number > 0.0 && eps->u.number < 1.0) ||
            (float)eps->u.number <= 0.0f)
            return as_fail(err, "%s: key \"layer_norm_epsilon\" must be a number in (0, 1)", path);
        cfg->layer_norm_epsilon = (float)eps->u.number;
    }

    strcpy(cfg->activation_function, "gelu_new");
    const json_value *act = json_get(root, "activation_function");
    if (act) {
        if (act->type != JSON_STRING)
            return as_fail(err, "%s: key \"activation_function\" must be a string, got a %s",
                           path, json_type_name(act->type));
        if (strcmp(act->u.string.ptr, "gelu_new"))
            return as_fail(err,
                           "%s: key \"activation_function\" is \"%.64s\"; only \"gelu_new\" "
                           "(tanh gelu) is supported",
                           path, act->u.string.ptr);
    }

    if (cfg->n_embd % cfg->n_head)
        return as_fail(err, "%s: key \"n_embd\" (%zu) is not divisible by \"n_head\" (%zu)", path,
                       cfg->n_embd, cfg->n_head);

    /* The MLP width is hard-wired to 4 n_embd (model.h); say so rather than
     * mis-read a file built otherwise. */
    const json_value *inner = json_get(root, "n_inner");
    if (inner && inner->type != JSON_NULL) {
        size_t n;
        if (json_get_size(inner, &n) || n != 4 * cfg->n_embd)
            return as_fail(err, "%s: key \"n_inner\" must be null or 4 * n_embd (%zu)", path,
                           4 * cfg->n_embd);
    }
    return 0;
}

int model_config_read(gpt2_config *cfg, const char *dir, as_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    memset(cfg, 0, sizeof *cfg);
    json_doc *doc = json_parse_file(path, err);
    if (!doc) return -1;
    int rc = config_from_json(cfg, json_root(doc), path, err);
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
    } else if (!json_get(root, "training_note") && config_from_json(&c, root, path, &err) == 0 &&
               c.vocab_size == 50257 && c.n_positions == 1024) {
        static const size_t release[][3] = {{12, 12, 768}, {24, 16, 1024}, {36, 20, 1280}, {48, 25, 1600}};
        for (size_t i = 0; i < 4; i++)
            if (c.n_layer == release[i][0] && c.n_head == release[i][1] && c.n_embd == release[i][2])
                kind = "gpt2";
    }
    json_free(doc);
    return kind;
}

size_t model_param_count(const gpt2_config *cfg) {
    size_t C = cfg->n_embd;
    size_t per_block = 2 * C                  /* ln_1 */
                       + C * 3 * C + 3 * C    /* c_attn */
                       + C * C + C            /* attn.c_proj */
                       + 2 * C                /* ln_2 */
                       + C * 4 * C + 4 * C    /* c_fc */
                       + 4 * C * C + C;       /* mlp.c_proj */
    return cfg->vocab_size * C + cfg->n_positions * C + cfg->n_layer * per_block + 2 * C;
}

/* One parameter tensor the config implies. */
typedef struct {
    char name[64]; /* Hugging Face name without the "transformer." prefix */
    size_t ndim, shape[2];
    const float **field; /* where model.h wants the pointer */
    const sft_tensor *found;
} slot;

/* Block tensors in arena order; shapes in units of C. */
static const struct {
    const char *suffix;
    size_t ndim, rows, cols; /* [rows*C] or [rows*C, cols*C] */
    size_t field_offset;
} block_tensors[] = {
    {"ln_1.weight", 1, 1, 0, offsetof(gpt2_block, ln_1_w)},
    {"ln_1.bias", 1, 1, 0, offsetof(gpt2_block, ln_1_b)},
    {"attn.c_attn.weight", 2, 1, 3, offsetof(gpt2_block, attn_w)},
    {"attn.c_attn.bias", 1, 3, 0, offsetof(gpt2_block, attn_b)},
    {"attn.c_proj.weight", 2, 1, 1, offsetof(gpt2_block, attn_proj_w)},
    {"attn.c_proj.bias", 1, 1, 0, offsetof(gpt2_block, attn_proj_b)},
    {"ln_2.weight", 1, 1, 0, offsetof(gpt2_block, ln_2_w)},
    {"ln_2.bias", 1, 1, 0, offsetof(gpt2_block, ln_2_b)},
    {"mlp.c_fc.weight", 2, 1, 4, offsetof(gpt2_block, fc_w)},
    {"mlp.c_fc.bias", 1, 4, 0, offsetof(gpt2_block, fc_b)},
    {"mlp.c_proj.weight", 2, 4, 1, offsetof(gpt2_block, mlp_proj_w)},
    {"mlp.c_proj.bias", 1, 1, 0, offsetof(gpt2_block, mlp_proj_b)},
};
enum { N_BLOCK_TENSORS = sizeof block_tensors / sizeof block_tensors[0] };

static void set_slot(slot *s, const char *name, size_t ndim, size_t d0, size_t d1,
                     const float **field) {
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->field = field;
    s->found = NULL;
}

/* Slots in arena order: wte, wpe, blocks, ln_f. */
static void build_slots(slot *slots, gpt2_model *m) {
    const gpt2_config *c = &m->cfg;
    size_t C = c->n_embd, k = 0;
    set_slot(&slots[k++], "wte.weight", 2, c->vocab_size, C, &m->wte);
    set_slot(&slots[k++], "wpe.weight", 2, c->n_positions, C, &m->wpe);
    for (size_t l = 0; l < c->n_layer; l++)
        for (size_t t = 0; t < N_BLOCK_TENSORS; t++) {
            char name[64];
            snprintf(name, sizeof name, "h.%zu.%s", l, block_tensors[t].suffix);
            const float **field =
                (const float **)((char *)&m->blocks[l] + block_tensors[t].field_offset);
            set_slot(&slots[k++], name, block_tensors[t].ndim, block_tensors[t].rows * C,
                     block_tensors[t].cols * C, field);
        }
    set_slot(&slots[k++], "ln_f.weight", 1, C, 0, &m->ln_f_w);
    set_slot(&slots[k++], "ln_f.bias", 1, C, 0, &m->ln_f_b);
}

/* Parses "h.N.rest" with N a canonical decimal below n_layer. */
static int parse_layer(const char *name, size_t n_layer, size_t *layer, const char **rest) {
    if (strncmp(name, "h.", 2)) return 0;
    const char *p = name + 2;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    size_t n = 0;
    while (*p >= '0' && *p <= '9') {
        n = n * 10 + (size_t)(*p - '0');
        if (n >= n_layer) return 0;
        p++;
    }
    if (*p != '.') return 0;
    *layer = n;
    *rest = p + 1;
    return 1;
}

static void format_shape(char *buf, size_t size, const size_t *shape, size_t ndim) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (size_t d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %zu" : "%zu", shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* Matches every tensor of the file to a slot (or to a known non-parameter)
 * and checks dtype and shape; then checks no slot is missing. */
static int match_tensors(slot *slots, size_t n_slots, const sft_file *f, const gpt2_config *c,
                         as_err *err) {
    static const char prefix[] = "transformer.";
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sft_tensor *t = &f->tensors[i];
        char got[128], want[128];
        format_shape(got, sizeof got, t->shape, t->ndim);
        if (!strcmp(t->name, "lm_head.weight")) {
            /* GPT-2's LM head is tied to wte; the logits use wte. */
            if (t->ndim != 2 || t->shape[0] != c->vocab_size || t->shape[1] != c->n_embd)
                return as_fail(err,
                               "%s: tensor lm_head.weight has shape %s, expected [%zu, %zu] "
                               "(tied to wte)",
                               f->path, got, c->vocab_size, c->n_embd);
            continue;
        }
        const char *name = t->name;
        if (!strncmp(name, prefix, sizeof prefix - 1)) name += sizeof prefix - 1;
        size_t layer;
        const char *rest;
        int in_block = parse_layer(name, c->n_layer, &layer, &rest);
        /* Causal-mask buffers that older transformers versions saved. */
        if (in_block && (!strcmp(rest, "attn.bias") || !strcmp(rest, "attn.masked_bias"))) continue;
        slot *s = NULL;
        if (in_block) {
            for (size_t k = 0; k < N_BLOCK_TENSORS; k++)
                if (!strcmp(rest, block_tensors[k].suffix)) s = &slots[2 + layer * N_BLOCK_TENSORS + k];
        } else {
            const size_t globals[] = {0, 1, n_slots - 2, n_slots - 1};
            for (size_t k = 0; k < 4; k++)
                if (!strcmp(name, slots[globals[k]].name)) s = &slots[globals[k]];
        }
        if (!s)
            return as_fail(err, "%s: unknown tensor %s (not part of a %zu-layer GPT-2)", f->path,
                           t->name, c->n_layer);
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
    }
    for (size_t k = 0; k < n_slots; k++)
        if (!slots[k].found) return as_fail(err, "%s: missing tensor %s", f->path, slots[k].name);
    return 0;
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

    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    sft_file f;
    if (sft_open(&f, path, err)) return -1;

    size_t n_slots = 4 + m->cfg.n_layer * N_BLOCK_TENSORS;
    slot *slots = calloc(n_slots, sizeof *slots);
    m->blocks = calloc(m->cfg.n_layer, sizeof *m->blocks);
    if (!slots || !m->blocks) {
        as_fail(err, "%s: out of memory", path);
        goto fail;
    }
    build_slots(slots, m);
    if (match_tensors(slots, n_slots, &f, &m->cfg, err)) goto fail;

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
    /* Digest the file first, 64 MB at a time, dropping each piece's pages once hashed
     * (sft_release_bytes), so the mapped file never sits whole in RSS next to the
     * arena; the copy below faults them in again, tensor by tensor. */
    if (fill) {
        sha256_ctx sha;
        unsigned char digest[32];
        sha256_init(&sha);
        for (size_t at = 0; at < f.file_size;) {
            size_t n = f.file_size - at < ((size_t)64 << 20) ? f.file_size - at : (size_t)64 << 20;
            sha256_update(&sha, f.map + at, n);
            sft_release_bytes(&f, at, at + n);
            at += n;
        }
        sha256_final(&sha, digest);
        sha256_digest_to_hex(m->weights_sha256, digest);
    }
    size_t used = 0;
    for (size_t k = 0; k < n_slots; k++) {
        float *dst = m->arena + used;
        if (fill && sft_read_f32(&f, slots[k].found, dst, err)) goto fail;
        if (fill) sft_release(&f, slots[k].found);
        *slots[k].field = dst;
        used += slots[k].found->numel;
    }
    if (used != m->arena_floats) {
        as_fail(err, "%s: internal error: %zu floats loaded, arena holds %zu", path, used,
                m->arena_floats);
        goto fail;
    }
    free(slots);
    sft_close(&f);
    return 0;
fail:
    free(slots);
    sft_close(&f);
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
