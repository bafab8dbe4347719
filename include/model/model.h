/* model.h -- a model directory in the Hugging Face layout, loaded: one
 * interface for every family (docs/families.md).
 *
 * A model directory holds config.json and model.safetensors -- or the shards
 * model.safetensors.index.json names -- (and, for the tokenizer, vocab.json +
 * merges.txt). config.json's "model_type" picks the family: "gpt2" (also when
 * the key is absent), "gpt_neox", "llama" (and "mistral"), "qwen2"; any other
 * is refused in one line naming it. model_load() reads the config, checks
 * every tensor against the family's tensor table (names, shapes, dtypes) and
 * copies the weights into one aligned arena sized from the config up front.
 * Nothing else allocates weights.
 *
 * All row-major float32. C = n_embd (hidden_size), V = vocab_size,
 * P = n_positions, H = n_head, KV = n_kv_head, D = d_head, I = n_inner.
 * GPT-2's Conv1D weights are kept as Hugging Face stores them, [in, out]
 * (y = x @ W + b); the other families' nn.Linear weights as theirs, [out, in]
 * (y = x @ W^T + b). Which fields a family fills is listed at gpt2_block.
 * (The type names are GPT-2's for history: they hold any family.)        */
#ifndef ATTNSWEEP_MODEL_H
#define ATTNSWEEP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

typedef enum { MODEL_GPT2, MODEL_NEOX, MODEL_LLAMA, MODEL_QWEN2, MODEL_N_FAMILIES } model_family;

/* "gpt2", "gpt_neox", "llama", "qwen2": config.json's model_type. */
const char *model_family_name(model_family f);

typedef enum { ROPE_NONE, ROPE_LINEAR, ROPE_LLAMA3 } model_rope_scaling;

typedef struct {
    model_family family;
    size_t n_layer;
    size_t n_head;
    size_t n_embd;
    size_t n_positions;
    size_t vocab_size;
    float layer_norm_epsilon;     /* LayerNorm eps (gpt2, gpt_neox); RMSNorm eps (llama, qwen2) */
    char activation_function[32]; /* gpt2 "gelu_new", gpt_neox "gelu" (erf), llama "silu" */
    size_t n_kv_head;   /* key/value heads (GQA); n_head but for llama/qwen2 */
    size_t d_head;      /* n_embd / n_head unless config.json's head_dim says otherwise */
    size_t n_inner;     /* MLP width: 4 C for gpt2, intermediate_size otherwise */
    size_t rotary_dim;  /* leading dims of each head that RoPE rotates (even; 0 for gpt2) */
    double rope_theta;  /* rotary base: rotary_emb_base (gpt_neox), rope_theta (llama) */
    model_rope_scaling rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    size_t rope_original_max_positions; /* llama3 scaling's original_max_position_embeddings */
    int parallel_residual; /* gpt_neox use_parallel_residual */
    int tied_head;         /* the LM head is the token embedding */
    int qkv_bias;          /* q/k/v projections carry biases (qwen2; llama attention_bias) */
    size_t sliding_window; /* qwen2/mistral: the window applied from layer 0 on; 0 = none */
} gpt2_config;

/* One block. gpt2 fills every field but q/k/v/gate; gpt_neox fills
 * ln_1/ln_2 (input_/post_attention_layernorm), attn (query_key_value [3C, C]
 * per head q | k | v interleaved, [3C]), attn_proj (dense [C, C], [C]),
 * fc (dense_h_to_4h [I, C], [I]), mlp_proj (dense_4h_to_h [C, I], [C]);
 * llama/qwen2 fill ln_1_w, ln_2_w (RMSNorm), q_w [H D, C], k_w, v_w
 * [KV D, C] (q_b, k_b, v_b when qkv_bias), attn_proj_w (o_proj [C, H D]),
 * gate_w, fc_w (gate_proj, up_proj [I, C]) and mlp_proj_w (down_proj [C, I]).
 * Fields a family does not fill are NULL. */
typedef struct {
    const float *ln_1_w, *ln_1_b;       /* [C] */
    const float *attn_w, *attn_b;       /* c_attn: [C, 3C], [3C]; q | k | v along the output */
    const float *attn_proj_w, *attn_proj_b; /* attn.c_proj: [C, C], [C] */
    const float *ln_2_w, *ln_2_b;       /* [C] */
    const float *fc_w, *fc_b;           /* mlp.c_fc: [C, 4C], [4C] */
    const float *mlp_proj_w, *mlp_proj_b; /* mlp.c_proj: [4C, C], [C] */
    const float *q_w, *q_b, *k_w, *k_b, *v_w, *v_b; /* llama/qwen2 q/k/v_proj */
    const float *gate_w;                /* llama/qwen2 mlp.gate_proj [I, C] */
} gpt2_block;

typedef struct {
    gpt2_config cfg;
    const float *wte;          /* [V, C] wte / embed_in / embed_tokens */
    const float *wpe;          /* [P, C]; gpt2 only (NULL for the rotary families) */
    const float *lm_head;      /* [V, C]: wte when tied, else lm_head / embed_out */
    const float *ln_f_w, *ln_f_b; /* [C] */
    gpt2_block *blocks;        /* [n_layer] */
    float *arena;              /* every tensor above points into this one block */
    size_t arena_floats;
    int arena_borrowed;        /* model_load_into: the caller owns the arena */
    char dir[4096];            /* the directory it was loaded from */
    char weights_sha256[65];   /* hex sha256 of model.safetensors (sharded: of the index file
                                  followed by each shard in the index's order), for provenance */
} gpt2_model;

/* Reads DIR/config.json. Missing keys get the family's defaults only where
 * Hugging Face's config class has one; wrong types, impossible values and
 * features not implemented (a rope_scaling type, an activation) are errors
 * naming the key. */
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

/* Loads DIR (config.json + model.safetensors or its shards). On failure nothing is left
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

/* The weights_sha256 model_load records for DIR, without loading: the sha256 of
 * model.safetensors, or of the index file followed by each shard in the index's order. */
int model_weights_sha256(const char *dir, char hex[65], as_err *err);

void model_free(gpt2_model *m);

#endif
