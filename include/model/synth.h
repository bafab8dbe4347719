/* synth.h -- synthetic GPT-2 model directories (config.json +
 * model.safetensors in the exact Hugging Face layout), for tests and for
 * running the pipeline where the real weights are not reachable.
 *
 * Layout: keys without a "transformer." prefix, Conv1D weights [in, out],
 * all F32 (or all F16 or all BF16: the same float32 values rounded to nearest
 * even, so a 16-bit file loads to exactly the rounded F32 file), plus the h.N.attn.bias causal-mask buffers [1, 1, P, P] (lower
 * triangle of ones) that real files carry. No lm_head (tied to wte). The
 * vocabulary files are not written here.
 *
 * Presets: "tiny" = 2 layers, 4 heads, n_embd 64, 128 positions, 50257
 * tokens (so the real GPT-2 tokenizer can drive it); "gpt2" = GPT-2 small's
 * shapes (12 layers, 12 heads, 768, 1024 positions, 50257 tokens, 124M
 * parameters); "gpt2-medium" (24, 16, 1024: 355M), "gpt2-large" (36, 20,
 * 1280: 774M), "gpt2-xl" (48, 25, 1600: 1558M), all with 1024 positions and
 * 50257 tokens, and config.json with Hugging Face's keys for each. The
 * rotary families' presets (pythia-tiny, pythia-70m, pythia-160m, llama-tiny,
 * smollm-135m, qwen2-0.5b; src/model/synth_families.c) write their families'
 * config.json keys and tensor names, initialised the same way (q and k rows at
 * std_qk, the output and down projections at the residual std).
 *
 * Weights follow GPT-2's initialisation: every matrix and embedding
 * normal(0, 0.02), the two residual projections (attn.c_proj, mlp.c_proj)
 * normal(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weight 1 bias 0 --
 * except the query and key columns of c_attn. With std 0.02 the raw scores
 * q.k / sqrt(d_head) of a LayerNorm'ed input (unit-variance entries) have
 * std n_embd * std_qk^2, i.e. 0.31 for gpt2 and 0.026 for tiny: attention
 * would be almost uniform and the softmax experiments meaningless. So the
 * q and k columns get std_qk = sqrt(SYNTH_QK_LOGIT_STD / n_embd), which
 * puts that std at SYNTH_QK_LOGIT_STD = 3 (gpt2: std_qk 0.0625, 3.1x GPT-2's;
 * tiny: 0.2165, 10.8x). Measured on layer 0 of the written files (random
 * tokens, all query-key pairs and heads, tests/reference/loader_check.py, seed 1):
 * std 2.97 for gpt2 and 2.84 for tiny.
 * config.json records this as "attnsweep_synthetic": true plus the seed,
 * the preset and std_qk.
 *
 * Determinism: values come from splitmix64 streams keyed by (seed, tensor
 * index) and Box-Muller in double, rounded to float32. Box-Muller's log,
 * sin and cos are our own (synth_det_*: basic IEEE arithmetic in a fixed
 * order, no libm, no FMA contraction), so a seed gives the same bytes on
 * every IEEE-754 machine whatever its libm or CPU features. */
#ifndef ATTNSWEEP_SYNTH_H
#define ATTNSWEEP_SYNTH_H

#include <stdint.h>

#include "errors.h"
#include "model.h"
#include "safetensors.h"

#define SYNTH_QK_LOGIT_STD 3.0
#define SYNTH_PRESET_NAMES                                                                    \
    "tiny, gpt2, gpt2-medium, gpt2-large, gpt2-xl, pythia-tiny, pythia-70m, pythia-160m, "      \
    "llama-tiny, smollm-135m or qwen2-0.5b"

/* Fills cfg for one of SYNTH_PRESET_NAMES; an unknown preset is an error. */
int synth_preset(gpt2_config *cfg, const char *preset, as_err *err);

/* "f32", "f16", "bf16" (or upper case) -> SFT_F32, SFT_F16, SFT_BF16. */
int synth_dtype_parse(sft_dtype *dtype, const char *name, as_err *err);

/* Writes DIR/config.json and DIR/model.safetensors for the preset
 * (creating DIR and its parents). Refuses if either file exists unless
 * force. Each file is written to a temporary name and renamed into place. */
int synth_write(const char *dir, const char *preset, uint64_t seed, int force, as_err *err);

/* The same with every tensor stored as dtype (SFT_F32, SFT_F16 or SFT_BF16). */
int synth_write_dtype(const char *dir, const char *preset, uint64_t seed, sft_dtype dtype, int force,
                      as_err *err);

/* The same for any config (preset_name is recorded in config.json). */
int synth_write_config(const char *dir, const gpt2_config *cfg, const char *preset_name,
                       uint64_t seed, sft_dtype dtype, int force, as_err *err);

/* The generator, exposed for tests: the i-th standard normal of the stream
 * (seed, stream) -- values 2k and 2k+1 are one Box-Muller pair. */
double synth_normal(uint64_t seed, uint64_t stream, uint64_t i);

/* Natural log for x > 0 (finite), and sin / cos of the angle 2 pi t for
 * t in [0, 1); within a few ulp of libm's, but bit-reproducible. */
double synth_det_log(double x);
void synth_det_sincos_turns(double t, double *sin_out, double *cos_out);

#endif
