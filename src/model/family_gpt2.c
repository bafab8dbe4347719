/* family_gpt2.c -- GPT-2 (model_type "gpt2"): config.json and the tensor
 * table of Hugging Face's GPT2LMHeadModel (docs/families.md). */
#include <stdio.h>
#include <string.h>

#include "family_int.h"

static int read_gpt2_config(gpt2_config *cfg, const json_value *root, const char *path,
                            as_err *err) {
    /* Defaults are Hugging Face GPT2Config's. */
    if (model_read_size(root, path, "n_layer", 12, MODEL_MAX_LAYER, &cfg->n_layer, err) ||
        model_read_size(root, path, "n_head", 12, MODEL_MAX_EMBD, &cfg->n_head, err) ||
        model_read_size(root, path, "n_embd", 768, MODEL_MAX_EMBD, &cfg->n_embd, err) ||
        model_read_size(root, path, "vocab_size", 50257, MODEL_MAX_VOCAB, &cfg->vocab_size, err))
        return -1;
    /* Old configs carry n_ctx next to n_positions; HF reads n_positions. */
    const char *positions_key = json_get(root, "n_positions") || !json_get(root, "n_ctx")
                                    ? "n_positions"
                                    : "n_ctx";
    if (model_read_size(root, path, positions_key, 1024, MODEL_MAX_POSITIONS, &cfg->n_positions,
                        err))
        return -1;

    cfg->layer_norm_epsilon = 1e-5f;
    const json_value *eps = json_get(root, "layer_norm_epsilon");
    if (eps) {
        if (eps->type != JSON_NUMBER || !(eps->u.number > 0.0 && eps->u.number < 1.0) ||
            (float)eps->u.number <= 0.0f)
            return as_fail(err, "%s: key \"layer_norm_epsilon\" must be a number in (0, 1)", path);
        cfg->layer_norm_epsilon = (float)eps->u.number;
    }
    if (model_read_activation(cfg, root, path, "activation_function", "gelu_new", "tanh gelu",
                              err))
        return -1;

    if (cfg->n_embd % cfg->n_head)
        return as_fail(err, "%s: key \"n_embd\" (%zu) is not divisible by \"n_head\" (%zu)", path,
                       cfg->n_embd, cfg->n_head);

    /* The MLP width is hard-wired to 4 n_embd; say so rather than mis-read a
     * file built otherwise. */
    const json_value *inner = json_get(root, "n_inner");
    if (inner && inner->type != JSON_NULL) {
        size_t n;
        if (json_get_size(inner, &n) || n != 4 * cfg->n_embd)
            return as_fail(err, "%s: key \"n_inner\" must be null or 4 * n_embd (%zu)", path,
                           4 * cfg->n_embd);
    }
    model_gpt2_derive(cfg);
    return 0;
}

void model_gpt2_derive(gpt2_config *cfg) {
    cfg->n_kv_head = cfg->n_head;
    cfg->d_head = cfg->n_embd / cfg->n_head;
    cfg->n_inner = 4 * cfg->n_embd;
    cfg->tied_head = 1;
    cfg->qkv_bias = 1;
}

/* Slots in arena order: wte, wpe, blocks, ln_f. */
static size_t slots_gpt2(model_slot *out, const gpt2_config *c, gpt2_model *m) {
    size_t n = 0, C = c->n_embd;
#define F(field) (m ? &(field) : NULL)
    model_slot_add(out, &n, F(m->wte), c->vocab_size, C, "wte.weight");
    model_slot_add(out, &n, F(m->wpe), c->n_positions, C, "wpe.weight");
    for (size_t l = 0; l < c->n_layer; l++) {
        gpt2_block *b = m ? &m->blocks[l] : NULL;
        model_slot_add(out, &n, F(b->ln_1_w), C, 0, "h.%zu.ln_1.weight", l);
        model_slot_add(out, &n, F(b->ln_1_b), C, 0, "h.%zu.ln_1.bias", l);
        model_slot_add(out, &n, F(b->attn_w), C, 3 * C, "h.%zu.attn.c_attn.weight", l);
        model_slot_add(out, &n, F(b->attn_b), 3 * C, 0, "h.%zu.attn.c_attn.bias", l);
        model_slot_add(out, &n, F(b->attn_proj_w), C, C, "h.%zu.attn.c_proj.weight", l);
        model_slot_add(out, &n, F(b->attn_proj_b), C, 0, "h.%zu.attn.c_proj.bias", l);
        model_slot_add(out, &n, F(b->ln_2_w), C, 0, "h.%zu.ln_2.weight", l);
        model_slot_add(out, &n, F(b->ln_2_b), C, 0, "h.%zu.ln_2.bias", l);
        model_slot_add(out, &n, F(b->fc_w), C, 4 * C, "h.%zu.mlp.c_fc.weight", l);
        model_slot_add(out, &n, F(b->fc_b), 4 * C, 0, "h.%zu.mlp.c_fc.bias", l);
        model_slot_add(out, &n, F(b->mlp_proj_w), 4 * C, C, "h.%zu.mlp.c_proj.weight", l);
        model_slot_add(out, &n, F(b->mlp_proj_b), C, 0, "h.%zu.mlp.c_proj.bias", l);
    }
    model_slot_add(out, &n, F(m->ln_f_w), C, 0, "ln_f.weight");
    model_slot_add(out, &n, F(m->ln_f_b), C, 0, "ln_f.bias");
#undef F
    return n;
}

/* Causal-mask buffers that older transformers versions saved: h.N.attn.bias
 * and h.N.attn.masked_bias. */
static int ignored_gpt2(const char *name, size_t n_layer) {
    const char *p;
    return model_layer_name(name, "h.", n_layer, &p) &&
           (!strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias"));
}

const model_family_ops model_family_gpt2 = {
    .noun = "GPT-2", .config = read_gpt2_config, .slots = slots_gpt2, .ignored = ignored_gpt2,
    .strip_prefix = "transformer.", .head_name = "lm_head.weight"};
