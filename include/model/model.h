/* model.h -- a GPT-2 model directory in the Hugging Face layout, loaded.
 *
 * A model directory holds config.json and model.safetensors (and, for the
 * tokenizer, vocab.json + merges.txt). model_load() reads the config, checks
 * every tensor of the safetensors file against it and copies the weights
 * into one aligned arena sized from the config up front. Nothing else
 * allocates weights.
 *
 * Layouts (C = n_embd, V = vocab_size, P = n_positions), all row-major float32.
 * Conv1D weights are kept exactly as Hugging Face stores them, [in, out],
 * so that y[t, :] = x[t, :] @ W + b.                                        */
#ifndef ATTNSWEEP_MODEL_H
#define ATTNSWEEP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

typedef struct {
    size_t n_layer;
    size_t n_head;
    size_t n_embd;
    size_t n_positions;
    size_t vocab_size;
    float layer_norm_epsilon;
    char activation_function[32]; /* "gelu_new" (tanh form) is the only one accepted */
} gpt2_config;

typedef struct {
    const float *ln_1_w, *ln_1_b;       /* [C] */
    const float *attn_w, *attn_b;       /* c_attn: [C, 3C], [3C]; q | k | v along the output */
    const float *attn_proj_w, *attn_proj_b; /* attn.c_proj: [C, C], [C] */
    const float *ln_2_w, *ln_2_b;       /* [C] */
    const float *fc_w, *fc_b;           /* mlp.c_fc: [C, 4C], [4C] */
    const float *mlp_proj_w, *mlp_proj_b; /* mlp.c_proj: [4C, C], [C] */
} gpt2_block;

typedef struct {
    gpt2_config cfg;
    const float *wte;          /* [V, C]; also the LM head (tied) */
    const float *wpe;          /* [P, C] */
    const float *ln_f_w, *ln_f_b; /* [C] */
    gpt2_block *blocks;        /* [n_layer] */
    float *arena;              /* every tensor above points into this one block */
    size_t arena_floats;
    int arena_borrowed;        /* model_load_into: the caller owns the arena */
    char dir[4096];            /* the directory it was loaded from */
    char weights_sha256[65];   /* hex sha256 of model.safetensors, for provenance */
} gpt2_model;

/* Reads DIR/config.json. Missing keys get GPT-2's defaults only where
 * Hugging Face's GPT2Config has one; wrong types or impossible values are
 * errors naming the key. */
int model_config_read(gpt2_config *cfg, const char *dir, as_err *err);

/* Number of float32 parameters the config implies (the arena size). */
size_t model_param_count(const gpt2_config *cfg);

/* What made a model directory, from its config.json alone (recorded as the
 * results file's `model_kind` so that a table says whose numbers it shows):
 *   "synthetic-random"  written by `attnsweep synth` ("attnsweep_synthetic": true);
 *   "gpt2"              the shapes of a GPT-2 release (12/12/768, 24/16/1024,
 *                       36/20/1280 or 48/25/1600 layers/heads/width, vocab 50257,
 *                       1024 positions) and no "training_note" -- the weights
 *                       themselves are not checked;
 *   "other"             anything else, e.g. a model trained for the tests.
 * "other" too when config.json cannot be read. */
const char *model_kind(const char *dir);

/* Loads DIR (config.json + model.safetensors). On failure nothing is left
 * allocated and err names the file and tensor. */
int model_load(gpt2_model *m, const char *dir, as_err *err);

/* Bytes of the weights arena (model_param_count floats, rounded up to the
 * 64-byte alignment model_load_into needs). */
size_t model_arena_bytes(const gpt2_config *cfg);

/* Like model_load, but the weights live in `arena` (64-byte aligned, at least
 * model_arena_bytes bytes), which the caller owns -- e.g. one copy shared by
 * the ranks of a node. With fill = 1 the weights are read into it and
 * weights_sha256 is computed; with fill = 0 the file is still opened and every
 * tensor checked against config.json, but only the pointers are set (another
 * process fills the arena) and weights_sha256 is left empty. model_free does
 * not free a borrowed arena. */
int model_load_into(gpt2_model *m, const char *dir, float *arena, int fill, as_err *err);

void model_free(gpt2_model *m);

#endif
