/* family_int.h -- what model.c asks of a model family (private to src/model/).
 *
 * A family is a config.json reader and a tensor table. model.c does the rest
 * once for all: it opens the weights (one file or shards, shards.c), matches
 * every tensor of the files against the table (name, shape, dtype), and lays
 * the tensors out in the arena in table order. docs/families.md lists what each
 * family reads. */
#ifndef ATTNSWEEP_FAMILY_INT_H
#define ATTNSWEEP_FAMILY_INT_H

#include <stddef.h>

#include "json.h"
#include "model.h"
#include "safetensors.h"

/* One parameter tensor the config implies. */
typedef struct {
    char name[96];               /* its Hugging Face name (gpt2: without "transformer.") */
    size_t ndim, shape[2];
    const float **field;         /* where model.h wants the pointer; NULL when only counting */
    const sft_tensor *found;     /* matched tensor, and the file holding it */
    const sft_file *file;
} model_slot;

typedef struct {
    const char *noun; /* "GPT-2", "gpt_neox model", ... for "not part of a N-layer NOUN" */
    /* Fills cfg (cfg->family is set) from config.json's root object. */
    int (*config)(gpt2_config *cfg, const json_value *root, const char *path, as_err *err);
    /* Writes the slots in arena order into out (NULL: only counts them) and
     * returns their number. m NULL: the fields are left NULL. */
    size_t (*slots)(model_slot *out, const gpt2_config *c, gpt2_model *m);
    /* 1 for a tensor name the file may carry that is not a parameter (mask
     * buffers, rotary inv_freq). */
    int (*ignored)(const char *name, size_t n_layer);
    const char *strip_prefix; /* dropped from file names before matching, or NULL */
    const char *head_name;    /* the LM head's name; a tied model may still carry it */
} model_family_ops;

extern const model_family_ops model_family_gpt2, model_family_neox, model_family_llama,
    model_family_qwen2;

/* Appends slot name (printf format) with shape [d0] (d1 == 0) or [d0, d1]. */
void model_slot_add(model_slot *out, size_t *n, const float **field, size_t d0, size_t d1,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* 1 when name is PREFIX N REST with N a canonical decimal below n_layer;
 * *rest then points after the number. */
int model_layer_name(const char *name, const char *prefix, size_t n_layer, const char **rest);

/* config.json readers shared by the families: an absent key gets dflt; a
 * present one of the wrong type or outside the range is an error naming it.
 * read_size_key: integer in [1, max]; null counts as absent when null_ok. */
int model_read_size(const json_value *root, const char *path, const char *key, size_t dflt,
                    size_t max, size_t *out, as_err *err);
/* A number in (lo, hi) (open) when open, else [lo, hi]. */
int model_read_double(const json_value *root, const char *path, const char *key, double dflt,
                      double lo, double hi, double *out, as_err *err);
int model_read_bool(const json_value *root, const char *path, const char *key, int dflt, int *out,
                    as_err *err);
/* The activation: absent means dflt; any other than dflt is refused. */
int model_read_activation(gpt2_config *cfg, const json_value *root, const char *path,
                          const char *key, const char *dflt, const char *what, as_err *err);
/* rope_scaling: null/absent, {"type"|"rope_type": "linear", "factor"} or
 * {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings}; any other type is refused by name. */
int model_read_rope_scaling(gpt2_config *cfg, const json_value *root, const char *path,
                            as_err *err);

/* GPT-2's fixed shape rules from n_embd and n_head (no GQA, inner 4 C, tied LM head, q/k/v
 * biases): the config reader's and the synthetic presets' one source. */
void model_gpt2_derive(gpt2_config *cfg);

/* The bounds that keep every size product far from overflow. */
#define MODEL_MAX_LAYER 1024
#define MODEL_MAX_EMBD 65536
#define MODEL_MAX_INNER (1u << 20)
#define MODEL_MAX_POSITIONS (1u << 20)
#define MODEL_MAX_VOCAB (1u << 24)

/* The weights files of a directory: model.safetensors, or every shard of
 * model.safetensors.index.json (each opened once, in the order they first
 * appear in its weight_map; every tensor the map names must be in its shard). */
typedef struct {
    sft_file *files;
    size_t n_files;
    char index_path[4200]; /* "" for a single file */
} model_files;

int model_files_open(model_files *mf, const char *dir, as_err *err);
void model_files_close(model_files *mf);
/* Hex sha256 of the weights (single file: of it; sharded: of the index file,
 * then each shard in order), releasing the pages as it goes. */
int model_files_sha256(const model_files *mf, char hex[65], as_err *err);

#endif
