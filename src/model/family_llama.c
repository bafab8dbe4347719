/* family_llama.c -- Llama (model_type "llama", "mistral") and Qwen2 ("qwen2"):
 * config.json and the tensor table of Hugging Face's LlamaForCausalLM,
 * MistralForCausalLM and Qwen2ForCausalLM, which differ only in the q/k/v
 * biases (qwen2 always, llama with attention_bias) and the sliding window
 * (docs/families.md). */
#include <stdio.h>
#include <string.h>

#include "family_int.h"

/* A key that is absent or null. */
static int absent(const json_value *root, const char *key) {
    const json_value *v = json_get(root, key);
    return !v || v->type == JSON_NULL;
}

/* The sliding window that applies from some layer on, or 0: Mistral's
 * sliding_window (null = none) on every layer; Qwen2's on the layers from
 * max_window_layers on when use_sliding_window. */
static int read_window(gpt2_config *cfg, const json_value *root, const char *path, int qwen2,
                       as_err *err) {
    cfg->sliding_window = 0;
    const json_value *mt = json_get(root, "model_type");
    int mistral = mt && mt->type == JSON_STRING && !strcmp(mt->u.string.ptr, "mistral");
    if (!qwen2 && !mistral) return 0;
    size_t window = 0, from = 0;
    int use = 1;
    if (qwen2 && model_read_bool(root, path, "use_sliding_window", 0, &use, err)) return -1;
    const json_value *mwl = json_get(root, "max_window_layers"); /* 0 is valid: every layer */
    if (qwen2 && !mwl) from = 28;
    else if (qwen2 && (json_get_size(mwl, &from) || from > MODEL_MAX_LAYER))
        return as_fail(err, "%s: key \"max_window_layers\" must be an integer in [0, %u]", path,
                       MODEL_MAX_LAYER);
    if (!use || absent(root, "sliding_window") || (qwen2 && from >= cfg->n_layer)) return 0;
    if (model_read_size(root, path, "sliding_window", 4096, MODEL_MAX_POSITIONS, &window, err))
        return -1;
    cfg->sliding_window = window;
    return 0;
}

static int read_common(gpt2_config *cfg, const json_value *root, const char *path, int qwen2,
                       as_err *err) {
    /* Defaults are Hugging Face LlamaConfig's (Qwen2Config's where they differ). */
    double eps;
    int attention_bias, mlp_bias;
    if (model_read_size(root, path, "num_hidden_layers", 32, MODEL_MAX_LAYER, &cfg->n_layer, err) ||
        model_read_size(root, path, "num_attention_heads", 32, MODEL_MAX_EMBD, &cfg->n_head, err) ||
        model_read_size(root, path, "hidden_size", 4096, MODEL_MAX_EMBD, &cfg->n_embd, err) ||
        model_read_size(root, path, "intermediate_size", qwen2 ? 22016 : 11008, MODEL_MAX_INNER,
                        &cfg->n_inner, err) ||
        model_read_size(root, path, "vocab_size", qwen2 ? 151936 : 32000, MODEL_MAX_VOCAB,
                        &cfg->vocab_size, err) ||
        model_read_size(root, path, "max_position_embeddings", qwen2 ? 32768 : 2048,
                        MODEL_MAX_POSITIONS, &cfg->n_positions, err) ||
        model_read_double(root, path, "rms_norm_eps", 1e-6, 1e-30, 0.5, &eps, err) ||
        model_read_double(root, path, "rope_theta", 10000.0, 1.0, 1e12, &cfg->rope_theta, err) ||
        model_read_bool(root, path, "tie_word_embeddings", 0, &cfg->tied_head, err) ||
        model_read_bool(root, path, "attention_bias", 0, &attention_bias, err) ||
        model_read_bool(root, path, "mlp_bias", 0, &mlp_bias, err) ||
        model_read_activation(cfg, root, path, "hidden_act", "silu", "SwiGLU's SiLU", err) ||
        model_read_rope_scaling(cfg, root, path, err))
        return -1;
    if (mlp_bias) return as_fail(err, "%s: key \"mlp_bias\" true is not supported", path);
    cfg->n_kv_head = cfg->n_head;
    if (!absent(root, "num_key_value_heads") &&
        model_read_size(root, path, "num_key_value_heads", cfg->n_head, MODEL_MAX_EMBD,
                        &cfg->n_kv_head, err))
        return -1;
    if (cfg->n_head % cfg->n_kv_head)
        return as_fail(err, "%s: key \"num_key_value_heads\" (%zu) does not divide "
                            "\"num_attention_heads\" (%zu)", path, cfg->n_kv_head, cfg->n_head);
    if (absent(root, "head_dim")) {
        if (cfg->n_embd % cfg->n_head)
            return as_fail(err, "%s: key \"hidden_size\" (%zu) is not divisible by "
                                "\"num_attention_heads\" (%zu) and no \"head_dim\" is given",
                           path, cfg->n_embd, cfg->n_head);
        cfg->d_head = cfg->n_embd / cfg->n_head;
    } else if (model_read_size(root, path, "head_dim", 0, MODEL_MAX_EMBD, &cfg->d_head, err)) {
        return -1;
    }
    if (cfg->d_head % 2)
        return as_fail(err, "%s: head_dim %zu is odd; the rotary embedding rotates pairs", path,
                       cfg->d_head);
    cfg->layer_norm_epsilon = (float)eps;
    cfg->rotary_dim = cfg->d_head;
    cfg->qkv_bias = qwen2 || attention_bias;
    /* Llama's attention_bias also puts a bias on o_proj, which the table lacks. */
    if (!qwen2 && attention_bias)
        return as_fail(err, "%s: key \"attention_bias\" true is not supported for llama", path);
    return read_window(cfg, root, path, qwen2, err);
}

static int read_llama_config(gpt2_config *cfg, const json_value *root, const char *path,
                             as_err *err) {
    return read_common(cfg, root, path, 0, err);
}

static int read_qwen2_config(gpt2_config *cfg, const json_value *root, const char *path,
                             as_err *err) {
    return read_common(cfg, root, path, 1, err);
}

/* Slots in arena order: embed_tokens, blocks, norm, lm_head (untied). */
static size_t slots_llama(model_slot *out, const gpt2_config *c, gpt2_model *m) {
    size_t n = 0, C = c->n_embd, I = c->n_inner, QD = c->n_head * c->d_head,
           KD = c->n_kv_head * c->d_head;
#define F(field) (m ? &(field) : NULL)
    model_slot_add(out, &n, F(m->wte), c->vocab_size, C, "model.embed_tokens.weight");
    for (size_t l = 0; l < c->n_layer; l++) {
        gpt2_block *b = m ? &m->blocks[l] : NULL;
#define P "model.layers.%zu."
        model_slot_add(out, &n, F(b->ln_1_w), C, 0, P "input_layernorm.weight", l);
        model_slot_add(out, &n, F(b->q_w), QD, C, P "self_attn.q_proj.weight", l);
        if (c->qkv_bias) model_slot_add(out, &n, F(b->q_b), QD, 0, P "self_attn.q_proj.bias", l);
        model_slot_add(out, &n, F(b->k_w), KD, C, P "self_attn.k_proj.weight", l);
        if (c->qkv_bias) model_slot_add(out, &n, F(b->k_b), KD, 0, P "self_attn.k_proj.bias", l);
        model_slot_add(out, &n, F(b->v_w), KD, C, P "self_attn.v_proj.weight", l);
        if (c->qkv_bias) model_slot_add(out, &n, F(b->v_b), KD, 0, P "self_attn.v_proj.bias", l);
        model_slot_add(out, &n, F(b->attn_proj_w), C, QD, P "self_attn.o_proj.weight", l);
        model_slot_add(out, &n, F(b->ln_2_w), C, 0, P "post_attention_layernorm.weight", l);
        model_slot_add(out, &n, F(b->gate_w), I, C, P "mlp.gate_proj.weight", l);
        model_slot_add(out, &n, F(b->fc_w), I, C, P "mlp.up_proj.weight", l);
        model_slot_add(out, &n, F(b->mlp_proj_w), C, I, P "mlp.down_proj.weight", l);
#undef P
    }
    model_slot_add(out, &n, F(m->ln_f_w), C, 0, "model.norm.weight");
    if (!c->tied_head) model_slot_add(out, &n, F(m->lm_head), c->vocab_size, C, "lm_head.weight");
#undef F
    return n;
}

/* rotary_emb.inv_freq, which older transformers versions saved per layer. */
static int ignored_llama(const char *name, size_t n_layer) {
    const char *p;
    return model_layer_name(name, "model.layers.", n_layer, &p) &&
           !strcmp(p, ".self_attn.rotary_emb.inv_freq");
}

const model_family_ops model_family_llama = {
    .noun = "llama model", .config = read_llama_config, .slots = slots_llama,
    .ignored = ignored_llama, .strip_prefix = NULL, .head_name = "lm_head.weight"};

const model_family_ops model_family_qwen2 = {
    .noun = "qwen2 model", .config = read_qwen2_config, .slots = slots_llama,
    .ignored = ignored_llama, .strip_prefix = NULL, .head_name = "lm_head.weight"};
