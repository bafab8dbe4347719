/* family_neox.c -- GPT-NeoX / Pythia (model_type "gpt_neox"): config.json and
 * the tensor table of Hugging Face's GPTNeoXForCausalLM (docs/families.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "family_int.h"

static int read_neox_config(gpt2_config *cfg, const json_value *root, const char *path,
                            as_err *err) {
    /* Defaults are Hugging Face GPTNeoXConfig's. */
    double eps, pct;
    int attention_bias;
    if (model_read_size(root, path, "num_hidden_layers", 44, MODEL_MAX_LAYER, &cfg->n_layer, err) ||
        model_read_size(root, path, "num_attention_heads", 64, MODEL_MAX_EMBD, &cfg->n_head, err) ||
        model_read_size(root, path, "hidden_size", 6144, MODEL_MAX_EMBD, &cfg->n_embd, err) ||
        model_read_size(root, path, "intermediate_size", 24576, MODEL_MAX_INNER, &cfg->n_inner,
                        err) ||
        model_read_size(root, path, "vocab_size", 50432, MODEL_MAX_VOCAB, &cfg->vocab_size, err) ||
        model_read_size(root, path, "max_position_embeddings", 2048, MODEL_MAX_POSITIONS,
                        &cfg->n_positions, err) ||
        model_read_double(root, path, "rotary_pct", 0.25, 1e-9, 1.0, &pct, err) ||
        model_read_double(root, path, "rotary_emb_base", 10000.0, 1.0, 1e12, &cfg->rope_theta,
                          err) ||
        model_read_double(root, path, "layer_norm_eps", 1e-5, 1e-30, 0.5, &eps, err) ||
        model_read_bool(root, path, "use_parallel_residual", 1, &cfg->parallel_residual, err) ||
        model_read_bool(root, path, "tie_word_embeddings", 0, &cfg->tied_head, err) ||
        model_read_bool(root, path, "attention_bias", 1, &attention_bias, err) ||
        model_read_activation(cfg, root, path, "hidden_act", "gelu", "exact erf gelu", err) ||
        model_read_rope_scaling(cfg, root, path, err))
        return -1;
    if (!attention_bias)
        return as_fail(err, "%s: key \"attention_bias\" false is not supported (Pythia's "
                            "attention has biases)", path);
    if (cfg->n_embd % cfg->n_head)
        return as_fail(err, "%s: key \"hidden_size\" (%zu) is not divisible by "
                            "\"num_attention_heads\" (%zu)", path, cfg->n_embd, cfg->n_head);
    cfg->layer_norm_epsilon = (float)eps;
    cfg->n_kv_head = cfg->n_head;
    cfg->d_head = cfg->n_embd / cfg->n_head;
    /* Hugging Face: rotary_ndims = int(head_size * rotary_pct) */
    cfg->rotary_dim = (size_t)((double)cfg->d_head * pct);
    if (cfg->rotary_dim == 0 || cfg->rotary_dim % 2)
        return as_fail(err, "%s: key \"rotary_pct\" %g of head_dim %zu gives %zu rotary dims; "
                            "it must give a positive even number", path, pct, cfg->d_head,
                       cfg->rotary_dim);
    cfg->qkv_bias = 1;
    return 0;
}

/* Slots in arena order: embed_in, blocks, final_layer_norm, embed_out. */
static size_t slots_neox(model_slot *out, const gpt2_config *c, gpt2_model *m) {
    size_t n = 0, C = c->n_embd, I = c->n_inner;
#define F(field) (m ? &(field) : NULL)
    model_slot_add(out, &n, F(m->wte), c->vocab_size, C, "gpt_neox.embed_in.weight");
    for (size_t l = 0; l < c->n_layer; l++) {
        gpt2_block *b = m ? &m->blocks[l] : NULL;
#define P "gpt_neox.layers.%zu."
        model_slot_add(out, &n, F(b->ln_1_w), C, 0, P "input_layernorm.weight", l);
        model_slot_add(out, &n, F(b->ln_1_b), C, 0, P "input_layernorm.bias", l);
        model_slot_add(out, &n, F(b->attn_w), 3 * C, C, P "attention.query_key_value.weight", l);
        model_slot_add(out, &n, F(b->attn_b), 3 * C, 0, P "attention.query_key_value.bias", l);
        model_slot_add(out, &n, F(b->attn_proj_w), C, C, P "attention.dense.weight", l);
        model_slot_add(out, &n, F(b->attn_proj_b), C, 0, P "attention.dense.bias", l);
        model_slot_add(out, &n, F(b->ln_2_w), C, 0, P "post_attention_layernorm.weight", l);
        model_slot_add(out, &n, F(b->ln_2_b), C, 0, P "post_attention_layernorm.bias", l);
        model_slot_add(out, &n, F(b->fc_w), I, C, P "mlp.dense_h_to_4h.weight", l);
        model_slot_add(out, &n, F(b->fc_b), I, 0, P "mlp.dense_h_to_4h.bias", l);
        model_slot_add(out, &n, F(b->mlp_proj_w), C, I, P "mlp.dense_4h_to_h.weight", l);
        model_slot_add(out, &n, F(b->mlp_proj_b), C, 0, P "mlp.dense_4h_to_h.bias", l);
#undef P
    }
    model_slot_add(out, &n, F(m->ln_f_w), C, 0, "gpt_neox.final_layer_norm.weight");
    model_slot_add(out, &n, F(m->ln_f_b), C, 0, "gpt_neox.final_layer_norm.bias");
    if (!c->tied_head) model_slot_add(out, &n, F(m->lm_head), c->vocab_size, C, "embed_out.weight");
#undef F
    return n;
}

/* Buffers older transformers versions saved in Pythia's files: the causal
 * mask (attention.bias, attention.masked_bias) and rotary_emb.inv_freq. */
static int ignored_neox(const char *name, size_t n_layer) {
    const char *p;
    return model_layer_name(name, "gpt_neox.layers.", n_layer, &p) &&
           (!strcmp(p, ".attention.bias") || !strcmp(p, ".attention.masked_bias") ||
            !strcmp(p, ".attention.rotary_emb.inv_freq"));
}

const model_family_ops model_family_neox = {
    .noun = "gpt_neox model", .config = read_neox_config, .slots = slots_neox,
    .ignored = ignored_neox, .strip_prefix = NULL, .head_name = "embed_out.weight"};
