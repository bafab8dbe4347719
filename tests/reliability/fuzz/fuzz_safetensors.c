/* fuzz_safetensors.c -- libFuzzer harness for the safetensors reader and
 * the model loader on top of it.
 *
 * Each input is the whole bytes of a model.safetensors file. It is written
 * into the process's temp dir next to a fixed config.json (a 1-layer GPT-2
 * with n_embd 4, vocab 8, n_positions 4: a valid file is ~1.5 KB), then
 *   1. sft_open(); on success the documented invariants are asserted (header
 *      and data sizes add up, every tensor's byte range lies inside the data
 *      section and matches shape x dtype size, the ranges tile the data
 *      section, sft_find() finds every tensor by name) and every float tensor
 *      is read with sft_read_f32() (no NaN/inf may come out of a success);
 *   2. model_load() on the directory, which checks names and shapes against
 *      the config and copies the weights.
 * Build and run: tests/reliability/fuzz/build.sh, tests/reliability/fuzz/run.sh safetensors 60. */
#include "fuzz_util.h"

#include <math.h>
#include <stdint.h>

#include "model.h"
#include "safetensors.h"

static char model_dir[600];
static char st_path[1100];

static void init_once(void) {
    if (model_dir[0]) return;
    fuzz_mkdir("model");
    static const char config[] =
        "{\"model_type\": \"gpt2\", \"n_layer\": 1, \"n_head\": 2, \"n_embd\": 4, "
        "\"n_positions\": 4, \"vocab_size\": 8, \"layer_norm_epsilon\": 1e-5, "
        "\"activation_function\": \"gelu_new\"}";
    fuzz_write("model/config.json", config, sizeof config - 1, NULL, 0);
    snprintf(model_dir, sizeof model_dir, "%s/model", fuzz_tmp_dir());
}

static int by_begin(const void *a, const void *b) {
    const sft_tensor *x = *(const sft_tensor *const *)a, *y = *(const sft_tensor *const *)b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

static void check_open_file(const sft_file *f) {
    FUZZ_ASSERT(8 + f->header_len + f->data_len == f->file_size, "sizes %zu + %zu != %zu",
                f->header_len, f->data_len, f->file_size);
    FUZZ_ASSERT(f->data == f->map + 8 + f->header_len, "data pointer");
    const sft_tensor **order = malloc((f->n_tensors + 1) * sizeof *order);
    FUZZ_ASSERT(order != NULL, "out of memory");
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sft_tensor *t = &f->tensors[i];
        FUZZ_ASSERT(memchr(t->name, 0, sizeof t->name) != NULL, "name not terminated");
        FUZZ_ASSERT(t->ndim <= SFT_MAX_DIMS, "ndim %zu", t->ndim);
        FUZZ_ASSERT(t->begin <= t->end && t->end <= f->data_len, "%s: range [%zu, %zu) of %zu",
                    t->name, t->begin, t->end, f->data_len);
        size_t numel = 1;
        for (size_t d = 0; d < t->ndim; d++) numel *= t->shape[d];
        FUZZ_ASSERT(numel == t->numel, "%s: numel %zu != product %zu", t->name, t->numel, numel);
        FUZZ_ASSERT(t->numel * sft_dtype_size(t->dtype) == t->end - t->begin, "%s: bytes",
                    t->name);
        const sft_tensor *found = sft_find(f, t->name);
        FUZZ_ASSERT(found && !strcmp(found->name, t->name), "sft_find(%s)", t->name);
        order[i] = t;
    }
    /* Tiling: sorted by begin, each starts where the previous ended. Zero-size
     * tensors may share an offset, so sort is by begin and compare ends. */
    qsort(order, f->n_tensors, sizeof *order, by_begin);
    size_t at = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        FUZZ_ASSERT(order[i]->begin == at, "%s begins at %zu, previous ended at %zu",
                    order[i]->name, order[i]->begin, at);
        at = order[i]->end;
    }
    FUZZ_ASSERT(at == f->data_len, "tensors cover %zu of %zu data bytes", at, f->data_len);
    free(order);

    for (size_t i = 0; i < f->n_tensors; i++) {
        const sft_tensor *t = &f->tensors[i];
        if (t->dtype != SFT_F32 && t->dtype != SFT_F16 && t->dtype != SFT_BF16) continue;
        float *dst = malloc(t->numel ? t->numel * sizeof *dst : 1);
        FUZZ_ASSERT(dst != NULL, "out of memory");
        as_err err;
        if (sft_read_f32(f, t, dst, &err) == 0)
            for (size_t k = 0; k < t->numel; k++)
                FUZZ_ASSERT(isfinite(dst[k]), "%s[%zu] not finite after success", t->name, k);
        free(dst);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    fuzz_write("model/model.safetensors", data, size, st_path, sizeof st_path);

    sft_file f;
    as_err err;
    if (sft_open(&f, st_path, &err) == 0) {
        check_open_file(&f);
        sft_close(&f);
    } else {
        /* Not asserted one line: messages quote input values (paths, names) verbatim. */
        FUZZ_ASSERT(err.msg[0], "failure without a message");
    }

    gpt2_model m;
    if (model_load(&m, model_dir, &err) == 0) {
        FUZZ_ASSERT(m.arena_floats == model_param_count(&m.cfg), "arena size");
        for (size_t k = 0; k < m.arena_floats; k++)
            FUZZ_ASSERT(isfinite(m.arena[k]), "weight %zu not finite", k);
        model_free(&m);
    } else {
        /* Not asserted one line: messages quote input values (paths, names) verbatim. */
        FUZZ_ASSERT(err.msg[0], "failure without a message");
    }
    return 0;
}
