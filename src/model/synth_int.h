/* synth_int.h -- what synth.c and synth_families.c share (private to src/model/):
 * the tensor plan, its generator-backed writer and the file helpers. */
#ifndef ATTNSWEEP_SYNTH_INT_H
#define ATTNSWEEP_SYNTH_INT_H

#include <stdint.h>
#include <stdio.h>

#include "synth.h"

/* How one tensor is filled. */
typedef enum { FILL_NORMAL, FILL_ONES, FILL_ZEROS, FILL_C_ATTN, FILL_CAUSAL, FILL_QKV_ROWS } fill_kind;

typedef struct {
    sft_spec spec;
    char name[96];
    fill_kind fill;
    double std;    /* FILL_NORMAL; FILL_C_ATTN / FILL_QKV_ROWS: std of the v part */
    double qk_std; /* FILL_C_ATTN: std of the q and k columns; FILL_QKV_ROWS: of the q, k rows */
    size_t period; /* FILL_QKV_ROWS: 3 D, the rows of one head's q | k | v */
} synth_tensor;

/* Appends one tensor to the plan t (n of them so far). */
void synth_tensor_add(synth_tensor *t, size_t *n, const char *name, size_t ndim, const size_t *shape,
                      fill_kind fill, double std);

/* Writes the n planned tensors (tensor i is stream i of seed) to path, all as dtype,
 * through a temporary file renamed into place. */
int synth_write_tensors(const char *path, synth_tensor *t, size_t n, uint64_t seed, sft_dtype dtype,
                        as_err *err);

int synth_mkdir_parents(const char *dir, as_err *err);
/* Closes f; on any error removes tmp. Then renames tmp -> final. */
int synth_finish_file(FILE *f, const char *tmp, const char *final, int ok, as_err *err);

/* The family presets (synth_families.c): fills cfg for name, 1 when it is one, else 0. */
int synth_family_preset(gpt2_config *cfg, const char *name);
/* config.json + model.safetensors of a gpt_neox / llama / qwen2 cfg in the Hugging Face layout. */
int synth_family_write(const char *dir, const gpt2_config *cfg, const char *preset, uint64_t seed,
                       double qk_std, sft_dtype dtype, as_err *err);

#endif
