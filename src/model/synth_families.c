/* synth_families.c -- the synthetic presets of the rotary families (synth.h):
 * config.json with the keys of Hugging Face's config class and model.safetensors
 * with its tensor names and nn.Linear [out, in] layouts, random weights. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "synth_int.h"

#define INIT_STD 0.02

/* The shapes of the published checkpoints (Hugging Face EleutherAI/pythia-70m,
 * -160m, HuggingFaceTB/SmolLM-135M, Qwen/Qwen2-0.5B) and two tiny ones for tests. */
static const struct {
    const char *name;
    model_family family;
    size_t n_layer, n_head, n_kv_head, n_embd, n_inner, vocab, positions;
    double theta, eps;
    int tied;
} presets[] = {
    {"pythia-tiny", MODEL_NEOX, 2, 4, 4, 64, 256, 50257, 1024, 10000, 1e-5, 0},
    {"pythia-70m", MODEL_NEOX, 6, 8, 8, 512, 2048, 50304, 2048, 10000, 1e-5, 0},
    {"pythia-160m", MODEL_NEOX, 12, 12, 12, 768, 3072, 50304, 2048, 10000, 1e-5, 0},
    {"llama-tiny", MODEL_LLAMA, 2, 4, 2, 64, 128, 50257, 1024, 10000, 1e-6, 0},
    {"smollm-135m", MODEL_LLAMA, 30, 9, 3, 576, 1536, 49152, 2048, 10000, 1e-5, 1},
    {"qwen2-0.5b", MODEL_QWEN2, 24, 14, 2, 896, 4864, 151936, 32768, 1000000, 1e-6, 1},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

int synth_family_preset(gpt2_config *cfg, const char *name) {
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (strcmp(name, presets[i].name)) continue;
        memset(cfg, 0, sizeof *cfg);
        cfg->family = presets[i].family;
        cfg->n_layer = presets[i].n_layer;
        cfg->n_head = presets[i].n_head;
        cfg->n_kv_head = presets[i].n_kv_head;
        cfg->n_embd = presets[i].n_embd;
        cfg->d_head = presets[i].n_embd / presets[i].n_head;
        cfg->n_inner = presets[i].n_inner;
        cfg->vocab_size = presets[i].vocab;
        cfg->n_positions = presets[i].positions;
        cfg->rope_theta = presets[i].theta;
        cfg->layer_norm_epsilon = (float)presets[i].eps;
        cfg->tied_head = presets[i].tied;
        cfg->parallel_residual = 1;
        cfg->qkv_bias = cfg->family != MODEL_LLAMA;
        cfg->rotary_dim = cfg->family == MODEL_NEOX ? cfg->d_head / 4 : cfg->d_head;
        snprintf(cfg->activation_function, sizeof cfg->activation_function, "%s",
                 cfg->family == MODEL_NEOX ? "gelu" : "silu");
        return 1;
    }
    return 0;
}

#define ADD1(fill, std, d0, ...) \
    (snprintf(name, sizeof name, __VA_ARGS__), synth_tensor_add(t, &n, name, 1, (size_t[]){d0}, fill, std))
#define ADD2(fill, std, d0, d1, ...) \
    (snprintf(name, sizeof name, __VA_ARGS__), synth_tensor_add(t, &n, name, 2, (size_t[]){d0, d1}, fill, std))

/* GPTNeoXForCausalLM's tensors, in file order. */
static size_t tensors_neox(synth_tensor *t, const gpt2_config *c, double qk_std) {
    size_t n = 0, C = c->n_embd, NI = c->n_inner;
    double proj_std = INIT_STD / sqrt(2.0 * (double)c->n_layer);
    char name[96];
    ADD2(FILL_NORMAL, INIT_STD, c->vocab_size, C, "gpt_neox.embed_in.weight");
    for (size_t l = 0; l < c->n_layer; l++) {
        ADD1(FILL_ONES, 0, C, "gpt_neox.layers.%zu.input_layernorm.weight", l);
        ADD1(FILL_ZEROS, 0, C, "gpt_neox.layers.%zu.input_layernorm.bias", l);
        ADD2(FILL_QKV_ROWS, INIT_STD, 3 * C, C, "gpt_neox.layers.%zu.attention.query_key_value.weight", l);
        t[n - 1].qk_std = qk_std;
        t[n - 1].period = 3 * c->d_head;
        ADD1(FILL_ZEROS, 0, 3 * C, "gpt_neox.layers.%zu.attention.query_key_value.bias", l);
        ADD2(FILL_NORMAL, proj_std, C, C, "gpt_neox.layers.%zu.attention.dense.weight", l);
        ADD1(FILL_ZEROS, 0, C, "gpt_neox.layers.%zu.attention.dense.bias", l);
        ADD1(FILL_ONES, 0, C, "gpt_neox.layers.%zu.post_attention_layernorm.weight", l);
        ADD1(FILL_ZEROS, 0, C, "gpt_neox.layers.%zu.post_attention_layernorm.bias", l);
        ADD2(FILL_NORMAL, INIT_STD, NI, C, "gpt_neox.layers.%zu.mlp.dense_h_to_4h.weight", l);
        ADD1(FILL_ZEROS, 0, NI, "gpt_neox.layers.%zu.mlp.dense_h_to_4h.bias", l);
        ADD2(FILL_NORMAL, proj_std, C, NI, "gpt_neox.layers.%zu.mlp.dense_4h_to_h.weight", l);
        ADD1(FILL_ZEROS, 0, C, "gpt_neox.layers.%zu.mlp.dense_4h_to_h.bias", l);
    }
    ADD1(FILL_ONES, 0, C, "gpt_neox.final_layer_norm.weight");
    ADD1(FILL_ZEROS, 0, C, "gpt_neox.final_layer_norm.bias");
    if (!c->tied_head) ADD2(FILL_NORMAL, INIT_STD, c->vocab_size, C, "embed_out.weight");
    return n;
}

/* LlamaForCausalLM's / Qwen2ForCausalLM's tensors, in file order. */
static size_t tensors_llama(synth_tensor *t, const gpt2_config *c, double qk_std) {
    size_t n = 0, C = c->n_embd, NI = c->n_inner, QD = c->n_head * c->d_head,
           KD = c->n_kv_head * c->d_head;
    double proj_std = INIT_STD / sqrt(2.0 * (double)c->n_layer);
    char name[96];
    ADD2(FILL_NORMAL, INIT_STD, c->vocab_size, C, "model.embed_tokens.weight");
    for (size_t l = 0; l < c->n_layer; l++) {
        ADD1(FILL_ONES, 0, C, "model.layers.%zu.input_layernorm.weight", l);
        ADD2(FILL_NORMAL, qk_std, QD, C, "model.layers.%zu.self_attn.q_proj.weight", l);
        if (c->qkv_bias) ADD1(FILL_ZEROS, 0, QD, "model.layers.%zu.self_attn.q_proj.bias", l);
        ADD2(FILL_NORMAL, qk_std, KD, C, "model.layers.%zu.self_attn.k_proj.weight", l);
        if (c->qkv_bias) ADD1(FILL_ZEROS, 0, KD, "model.layers.%zu.self_attn.k_proj.bias", l);
        ADD2(FILL_NORMAL, INIT_STD, KD, C, "model.layers.%zu.self_attn.v_proj.weight", l);
        if (c->qkv_bias) ADD1(FILL_ZEROS, 0, KD, "model.layers.%zu.self_attn.v_proj.bias", l);
        ADD2(FILL_NORMAL, proj_std, C, QD, "model.layers.%zu.self_attn.o_proj.weight", l);
        ADD1(FILL_ONES, 0, C, "model.layers.%zu.post_attention_layernorm.weight", l);
        ADD2(FILL_NORMAL, INIT_STD, NI, C, "model.layers.%zu.mlp.gate_proj.weight", l);
        ADD2(FILL_NORMAL, INIT_STD, NI, C, "model.layers.%zu.mlp.up_proj.weight", l);
        ADD2(FILL_NORMAL, proj_std, C, NI, "model.layers.%zu.mlp.down_proj.weight", l);
    }
    ADD1(FILL_ONES, 0, C, "model.norm.weight");
    if (!c->tied_head) ADD2(FILL_NORMAL, INIT_STD, c->vocab_size, C, "lm_head.weight");
    return n;
}

static int write_family_config(const char *dir, const gpt2_config *c, const char *preset,
                               uint64_t seed, double qk_std, sft_dtype dtype, as_err *err) {
    const char *torch_dtype = dtype == SFT_F16 ? "float16" : dtype == SFT_BF16 ? "bfloat16" : "float32";
    char final[4200], tmp[4300];
    snprintf(final, sizeof final, "%s/config.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", final, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return as_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
    int ok;
    if (c->family == MODEL_NEOX)
        ok = fprintf(f,
                     "{\n  \"architectures\": [\"GPTNeoXForCausalLM\"],\n  \"model_type\": \"gpt_neox\",\n"
                     "  \"hidden_act\": \"gelu\",\n  \"hidden_size\": %zu,\n  \"intermediate_size\": %zu,\n"
                     "  \"layer_norm_eps\": %.9g,\n  \"max_position_embeddings\": %zu,\n"
                     "  \"num_attention_heads\": %zu,\n  \"num_hidden_layers\": %zu,\n"
                     "  \"rotary_emb_base\": %.9g,\n  \"rotary_pct\": 0.25,\n  \"tie_word_embeddings\": %s,\n"
                     "  \"use_parallel_residual\": true,\n  \"vocab_size\": %zu,\n",
                     c->n_embd, c->n_inner, (double)c->layer_norm_epsilon, c->n_positions, c->n_head,
                     c->n_layer, c->rope_theta, c->tied_head ? "true" : "false", c->vocab_size) > 0;
    else
        ok = fprintf(f,
                     "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
                     "  \"hidden_act\": \"silu\",\n  \"hidden_size\": %zu,\n  \"intermediate_size\": %zu,\n"
                     "  \"max_position_embeddings\": %zu,\n  \"num_attention_heads\": %zu,\n"
                     "  \"num_hidden_layers\": %zu,\n  \"num_key_value_heads\": %zu,\n"
                     "  \"rms_norm_eps\": %.9g,\n  \"rope_scaling\": null,\n  \"rope_theta\": %.9g,\n"
                     "  \"tie_word_embeddings\": %s,\n%s  \"vocab_size\": %zu,\n",
                     c->family == MODEL_QWEN2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
                     model_family_name(c->family), c->n_embd, c->n_inner, c->n_positions, c->n_head,
                     c->n_layer, c->n_kv_head, (double)c->layer_norm_epsilon, c->rope_theta,
                     c->tied_head ? "true" : "false",
                     c->family == MODEL_QWEN2 ? "  \"use_sliding_window\": false,\n" : "",
                     c->vocab_size) > 0;
    ok = ok && fprintf(f,
                       "  \"torch_dtype\": \"%s\",\n  \"attnsweep_synthetic\": true,\n"
                       "  \"attnsweep_preset\": \"%s\",\n  \"attnsweep_seed\": %llu,\n"
                       "  \"attnsweep_qk_init_std\": %.9g,\n  \"attnsweep_qk_logit_std_target\": %.9g\n}\n",
                       torch_dtype, preset, (unsigned long long)seed, qk_std, SYNTH_QK_LOGIT_STD) > 0;
    return synth_finish_file(f, tmp, final, ok, err);
}

int synth_family_write(const char *dir, const gpt2_config *cfg, const char *preset, uint64_t seed,
                       double qk_std, sft_dtype dtype, as_err *err) {
    synth_tensor *t = calloc(4 + 16 * cfg->n_layer, sizeof *t);
    if (!t) return as_fail(err, "out of memory");
    size_t n = cfg->family == MODEL_NEOX ? tensors_neox(t, cfg, qk_std) : tensors_llama(t, cfg, qk_std);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    /* weights first: a directory with a config.json is complete */
    int rc = synth_write_tensors(path, t, n, seed, dtype, err);
    free(t);
    return rc ? rc : write_family_config(dir, cfg, preset, seed, qk_std, dtype, err);
}
