/* schema_models.c -- the model axis of the HDF5 view (docs/results.md "The model axis"):
 * the model coordinates (model_path, model_sha256, model_config_sha256, model_kind, model_family,
 * model_n_layer, model_n_head, model_n_embd, training_step: auxiliary coordinates over `model`),
 * head_valid, and the
 * check that an existing view holds this store's models. The `model` dimension scale
 * itself is created with the other axes (schema.c). See store_int.h. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include <hdf5.h>
#include <hdf5_hl.h>

/* A 1-D variable over the model axis (an auxiliary coordinate). */
static int create_model_var(hid_t file, const store *s, const char *name, hid_t ftype, hid_t mtype,
                            const void *data, const char *long_name, const char *units) {
    hsize_t dim = s->ax.n_model;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t ds = H5Dcreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    if (ds < 0) return -1;
    int rc = H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 ? -1 : 0;
    rc |= st_attr_str(ds, "long_name", long_name);
    if (units) rc |= st_attr_str(ds, "units", units);
    hid_t scale = H5Dopen2(file, "model", H5P_DEFAULT);
    if (scale < 0 || H5DSattach_scale(ds, scale, 0) < 0) rc = -1;
    if (scale >= 0) H5Dclose(scale);
    H5Dclose(ds);
    return rc;
}

int st_create_model_coords(hid_t file, const store *s) {
    hid_t str = st_utf8_vlen();
    int rc = 0;
    rc |= create_model_var(file, s, "model_path", str, str, s->model_path,
                           "model directory as the config resolved it", NULL);
    rc |= create_model_var(file, s, "model_sha256", str, str, s->model_sha,
                           "sha256 of the model's model.safetensors", NULL);
    rc |= create_model_var(file, s, "model_config_sha256", str, str, s->model_cfg_sha,
                           "sha256 of the model's config.json (empty: not recorded)", NULL);
    rc |= create_model_var(file, s, "model_kind", str, str, s->model_kind,
                           "whose numbers these are: synthetic-random, gpt2 or other (not GPT-2)", NULL);
    rc |= create_model_var(file, s, "model_family", str, str, s->model_family,
                           "model family that config.json's model_type picks: gpt2, gpt_neox, llama "
                           "(also mistral) or qwen2 (empty: not recorded)", NULL);
    rc |= create_model_var(file, s, "model_n_layer", H5T_STD_I32LE, H5T_NATIVE_INT32, s->model_n_layer,
                           "number of transformer blocks of the model", "1");
    rc |= create_model_var(file, s, "model_n_head", H5T_STD_I32LE, H5T_NATIVE_INT32, s->model_n_head,
                           "attention heads per block of the model", "1");
    rc |= create_model_var(file, s, "model_n_embd", H5T_STD_I32LE, H5T_NATIVE_INT32, s->model_n_embd,
                           "residual stream width of the model", "1");
    rc |= create_model_var(file, s, "training_step", H5T_STD_I64LE, H5T_NATIVE_INT64, s->training_step,
                           "training step of the checkpoint (config.json training_step, else the "
                           "directory name stepN or checkpoint-N; -1: neither)", "1");
    H5Tclose(str);
    return rc;
}

/* head_valid (model, layer, head): which (layer, head) of the union axes a model has. */
int st_create_head_valid(hid_t file, const store *s) {
    hsize_t shape[3] = {s->ax.n_model, s->ax.n_layer, s->ax.n_head};
    hid_t sp = H5Screate_simple(3, shape, NULL);
    hid_t ds = H5Dcreate2(file, "head_valid", H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    if (ds < 0) return -1;
    int rc = H5Dwrite(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->head_valid) < 0 ? -1 : 0;
    uint8_t flags[2] = {0, 1};
    rc |= st_attr_write(ds, "flag_values", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, flags);
    rc |= st_attr_str(ds, "flag_meanings", "masked present");
    rc |= st_attr_str(ds, "long_name", "1 where the model has this (layer, head); 0 where its values "
                                    "are masked (NaN, int fill)");
    rc |= st_attr_str(ds, "coordinates", ST_MODEL_COORDS);
    static const char *const dims[3] = {"model", "layer", "head"};
    for (int i = 0; i < 3; i++) {
        hid_t scale = H5Dopen2(file, dims[i], H5P_DEFAULT);
        if (scale < 0 || H5DSattach_scale(ds, scale, (unsigned)i) < 0) rc = -1;
        if (scale >= 0) H5Dclose(scale);
    }
    H5Dclose(ds);
    return rc;
}

/* 1 when the view's model names or sha256s are not this store's (a rebuild then
 * writes them); the model count was checked with the other axes. */
int st_models_differ(const store *s, hid_t f) {
    hid_t str = st_utf8_vlen();
    int differ = 0;
    const char *names[2] = {"model", "model_sha256"};
    char *const *want[2] = {s->model_name, s->model_sha};
    for (int k = 0; k < 2 && !differ; k++) {
        hid_t ds = H5Dopen2(f, names[k], H5P_DEFAULT);
        char **got = calloc(s->ax.n_model, sizeof *got);
        if (ds < 0 || !got || H5Dread(ds, str, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) < 0) differ = 1;
        for (size_t m = 0; got && m < s->ax.n_model; m++) {
            if (!differ && (!got[m] || strcmp(got[m], want[k][m]))) differ = 1;
            if (got[m]) H5free_memory(got[m]);
        }
        free(got);
        if (ds >= 0) H5Dclose(ds);
    }
    H5Tclose(str);
    return differ;
}

