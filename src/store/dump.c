/* dump.c -- see dump.h. */
#include "dump.h"

#include <errno.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dump_writer {
    hid_t file;
    char path[4096];
    char tmp_path[4200];
    size_t L;
    float *staging; /* [L, L] */
    size_t n_head, d_head; /* 0 until the first layer made the head and d_head scales */
};

/* The dump follows the netCDF-4 data model, like the results file, so xarray opens it: every
 * axis is a 1-D coordinate in the root group made an HDF5 dimension scale, and every dataset,
 * in the root or in a layer group, has its axes attached (netCDF lets a group use the
 * dimensions of its ancestors). The scales are position, key_position, head, d_head, vocab. */
static int write_attr_string(hid_t loc, const char *name, const char *value);

/* Creates root coordinate NAME[n] = 0..n-1 (int32) and makes it a dimension scale. */
static int create_index_scale(dump_writer *w, const char *name, size_t n, const char *long_name,
                              as_err *err) {
    int32_t *values = malloc((n ? n : 1) * sizeof *values);
    if (!values) return as_fail(err, "%s: out of memory for coordinate %s", w->tmp_path, name);
    for (size_t i = 0; i < n; i++) values[i] = (int32_t)i;
    hsize_t dims[1] = {n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t ds = space < 0 ? -1 : H5Dcreate2(w->file, name, H5T_NATIVE_INT32, space, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT);
    int ok = ds >= 0 && H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0 &&
             H5DSset_scale(ds, name) >= 0 && write_attr_string(ds, "long_name", long_name) == 0 &&
             write_attr_string(ds, "units", "1") == 0;
    if (ds >= 0) H5Dclose(ds);
    if (space >= 0) H5Sclose(space);
    free(values);
    return ok ? 0 : as_fail(err, "%s: cannot write coordinate %s", w->tmp_path, name);
}

/* Attaches the root scales named in axes (one per dimension of loc/name) and sets long_name
 * and units. */
static int describe(dump_writer *w, hid_t loc, const char *name, const char *const *axes,
                    int rank, const char *long_name, const char *units, as_err *err) {
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    int ok = ds >= 0;
    for (int d = 0; ok && d < rank; d++) {
        hid_t scale = H5Dopen2(w->file, axes[d], H5P_DEFAULT);
        ok = scale >= 0 && H5DSattach_scale(ds, scale, (unsigned)d) >= 0;
        if (scale >= 0) H5Dclose(scale);
    }
    ok = ok && write_attr_string(ds, "long_name", long_name) == 0 &&
         write_attr_string(ds, "units", units) == 0;
    if (ds >= 0) H5Dclose(ds);
    return ok ? 0 : as_fail(err, "%s: cannot attach the axes of dataset %s", w->tmp_path, name);
}

/* rank-n float32/int32 dataset from one contiguous buffer */
static int write_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                         const void *data, const char *path, as_err *err) {
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t ds = space < 0 ? -1 : H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT,
                                           H5P_DEFAULT);
    int ok = ds >= 0 && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    if (ds >= 0) H5Dclose(ds);
    if (space >= 0) H5Sclose(space);
    return ok ? 0 : as_fail(err, "%s: cannot write dataset %s", path, name);
}

static int write_attr_string(hid_t loc, const char *name, const char *value) {
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, type, value) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    return ok ? 0 : -1;
}

static int write_attr_int64(hid_t loc, const char *name, int64_t value) {
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &value) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(space);
    return ok ? 0 : -1;
}

dump_writer *dump_open(const char *path, const int32_t *tokens, size_t L,
                       const dump_provenance *prov, as_err *err) {
    if (strlen(path) >= sizeof ((dump_writer *)0)->path) {
        as_fail(err, "%s: path too long", path);
        return NULL;
    }
    dump_writer *w = calloc(1, sizeof *w);
    float *staging = malloc(L * L * sizeof(float));
    if (!w || !staging) {
        free(w);
        free(staging);
        as_fail(err, "%s: cannot allocate the %zu x %zu staging matrix", path, L, L);
        return NULL;
    }
    w->staging = staging;
    w->L = L;
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s.tmp.%ld", path, (long)getpid());
    /* HDF5 1.10 crashes at exit on a file whose H5Fclose failed (HDFFV-11052; see discard):
     * a dump is one file per process, closed or discarded before exit, so the library's exit
     * handler has nothing to do but that crash. Only possible before the library starts. */
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* we report errors in one line ourselves */
    /* close every object with the file, even one an error path left open (see discard) */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    w->file = H5Fcreate(w->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (w->file < 0) {
        as_fail(err, "%s: cannot create the HDF5 file", w->tmp_path);
        free(w->staging);
        free(w);
        return NULL;
    }
    hsize_t dims[1] = {L};
    if (write_dataset(w->file, "tokens", H5T_NATIVE_INT32, 1, dims, tokens, w->tmp_path, err) !=
            0 ||
        write_attr_int64(w->file, "window_start", (int64_t)prov->window_start) != 0 ||
        write_attr_string(w->file, "model_dir", prov->model_dir ? prov->model_dir : "") != 0 ||
        write_attr_string(w->file, "weights_sha256",
                          prov->weights_sha256 ? prov->weights_sha256 : "") != 0 ||
        write_attr_string(w->file, "Conventions", "CF-1.8") != 0 ||
        write_attr_string(w->file, "title", "attnsweep dump: one window's attention inputs") != 0 ||
        create_index_scale(w, "position", L, "query position in the window (0-based)", err) != 0 ||
        create_index_scale(w, "key_position", L, "key position in the window (0-based)", err) != 0 ||
        describe(w, w->file, "tokens", (const char *const[]){"position"}, 1,
                 "token id at each position of the window", "1", err) != 0) {
        if (!err || !err->msg[0]) as_fail(err, "%s: cannot write the root attributes", w->tmp_path);
        dump_abort(w);
        return NULL;
    }
    return w;
}

int dump_write_layer(dump_writer *w, const fwd_layer_view *v, as_err *err) {
    if (v->L != w->L)
        return as_fail(err, "%s: layer of length %zu in a dump of length %zu", w->tmp_path, v->L,
                       w->L);
    if (!w->n_head) {
        if (create_index_scale(w, "head", v->n_head, "attention head within the layer (0-based)",
                               err) != 0 ||
            create_index_scale(w, "d_head", v->d_head, "component of a head's q, k, v vector",
                               err) != 0)
            return -1;
        w->n_head = v->n_head, w->d_head = v->d_head;
    } else if (v->n_head != w->n_head || v->d_head != w->d_head) {
        return as_fail(err, "%s: layer %zu has %zu heads of size %zu, earlier layers %zu of %zu",
                       w->tmp_path, v->layer, v->n_head, v->d_head, w->n_head, w->d_head);
    }
    char name[32];
    snprintf(name, sizeof name, "layer_%02zu", v->layer);
    hid_t g = H5Gcreate2(w->file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return as_fail(err, "%s: cannot create group %s", w->tmp_path, name);
    size_t L = v->L, H = v->n_head;
    hsize_t qdims[3] = {H, L, v->d_head}, sdims[3] = {H, L, L};
    int rc = 0;
    if (write_dataset(g, "q", H5T_NATIVE_FLOAT, 3, qdims, v->q, w->tmp_path, err) != 0 ||
        write_dataset(g, "k", H5T_NATIVE_FLOAT, 3, qdims, v->k, w->tmp_path, err) != 0 ||
        write_dataset(g, "v", H5T_NATIVE_FLOAT, 3, qdims, v->v, w->tmp_path, err) != 0 ||
        write_dataset(g, "pattern", H5T_NATIVE_FLOAT, 3, sdims, v->pattern, w->tmp_path, err) !=
            0)
        rc = -1;
    if (rc == 0) {
        /* scores: one head at a time through the staging matrix, NaN above
         * the diagonal (those entries are not defined by the forward pass) */
        hid_t space = H5Screate_simple(3, sdims, NULL);
        hsize_t mdims[2] = {L, L};
        hid_t mem = H5Screate_simple(2, mdims, NULL);
        hid_t ds = H5Dcreate2(g, "scores", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
        int ok = space >= 0 && mem >= 0 && ds >= 0;
        for (size_t h = 0; ok && h < H; h++) {
            const float *src = v->scores + h * L * L;
            for (size_t t = 0; t < L; t++)
                for (size_t j = 0; j < L; j++)
                    w->staging[t * L + j] = j <= t ? src[t * L + j] : NAN;
            hsize_t start[3] = {h, 0, 0}, count[3] = {1, L, L};
            ok = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
                 H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, w->staging) >= 0;
        }
        if (ds >= 0) H5Dclose(ds);
        if (mem >= 0) H5Sclose(mem);
        if (space >= 0) H5Sclose(space);
        if (!ok) rc = as_fail(err, "%s: cannot write dataset %s/scores", w->tmp_path, name);
    }
    const char *const vec_axes[] = {"head", "position", "d_head"};
    const char *const att_axes[] = {"head", "position", "key_position"};
    if (rc == 0 &&
        (describe(w, g, "q", vec_axes, 3, "query vectors (after the c_attn bias)", "1", err) != 0 ||
         describe(w, g, "k", vec_axes, 3, "key vectors (after the c_attn bias)", "1", err) != 0 ||
         describe(w, g, "v", vec_axes, 3, "value vectors (after the c_attn bias)", "1", err) != 0 ||
         describe(w, g, "scores", att_axes, 3,
                  "raw attention logits q.k without 1/sqrt(d_head); NaN for key > query", "1",
                  err) != 0 ||
         describe(w, g, "pattern", att_axes, 3,
                  "the model's own attention weights softmax(q.k/sqrt(d_head)); 0 for key > query",
                  "1", err) != 0))
        rc = -1;
    H5Gclose(g);
    return rc;
}

int dump_write_logits(dump_writer *w, const float *logits, size_t V, as_err *err) {
    hsize_t dims[1] = {V};
    if (write_dataset(w->file, "logits_last", H5T_NATIVE_FLOAT, 1, dims, logits, w->tmp_path,
                      err) != 0 ||
        create_index_scale(w, "vocab", V, "token id of the vocabulary", err) != 0)
        return -1;
    return describe(w, w->file, "logits_last", (const char *const[]){"vocab"}, 1,
                    "next-token logits at the window's last position", "1", err);
}

/* Throws away a dump that cannot be finished (typically: the disk is full).
 * HDF5 1.10 crashes at library shutdown on a file whose H5Fclose failed
 * (HDFFV-11052). The file's space is given back first, so the metadata writes
 * of the close usually succeed; when they do not (the metadata lands on more
 * pages of the now sparse file than the disk has), dump_open's H5dont_atexit
 * keeps the library from touching the half-closed file at exit. */
static void discard(dump_writer *w) {
    if (truncate(w->tmp_path, 0)) { /* the close may then fail; nothing better to do */ }
    H5E_BEGIN_TRY {
        H5Fflush(w->file, H5F_SCOPE_GLOBAL);
        H5Fclose(w->file);
    } H5E_END_TRY;
    remove(w->tmp_path);
}

int dump_close(dump_writer *w, as_err *err) {
    int rc = 0;
    herr_t flushed;
    H5E_BEGIN_TRY { flushed = H5Fflush(w->file, H5F_SCOPE_GLOBAL); } H5E_END_TRY;
    if (flushed < 0) {
        rc = as_fail(err, "%s: cannot write the HDF5 file (is the disk full?)", w->tmp_path);
        discard(w);
    } else if (H5Fclose(w->file) < 0) {
        rc = as_fail(err, "%s: cannot close the HDF5 file", w->tmp_path);
        remove(w->tmp_path);
    } else if (rename(w->tmp_path, w->path) != 0) {
        rc = as_fail(err, "%s: cannot rename onto %s: %s", w->tmp_path, w->path, strerror(errno));
        remove(w->tmp_path);
    }
    free(w->staging);
    free(w);
    return rc;
}

void dump_abort(dump_writer *w) {
    if (!w) return;
    discard(w);
    free(w->staging);
    free(w);
}
