/* shards.c -- the weights files of a model directory: model.safetensors, or
 * the shards model.safetensors.index.json names (family_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_int.h"
#include "fileio.h"
#include "sha256.h"

void model_files_close(model_files *mf) {
    for (size_t i = 0; i < mf->n_files; i++) sft_close(&mf->files[i]);
    free(mf->files);
    mf->files = NULL;
    mf->n_files = 0;
}

/* A shard's file name from the index: a plain name inside the directory. */
static int check_shard_name(const char *index, const char *name, as_err *err) {
    if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return as_fail(err, "%s: shard \"%.200s\" is not a file name in the model directory",
                       index, name);
    return 0;
}

/* Opens each distinct shard of the weight_map once, in order of first mention. */
static int open_shards(model_files *mf, const char *dir, const json_value *map, as_err *err) {
    size_t n = map->u.object.count;
    const char **names = calloc(n ? n : 1, sizeof *names);
    mf->files = calloc(n ? n : 1, sizeof *mf->files);
    if (!names || !mf->files) {
        free(names);
        return as_fail(err, "%s: out of memory", mf->index_path);
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_value *v = &map->u.object.members[i].value;
        if (v->type != JSON_STRING) {
            rc = as_fail(err, "%s: weight_map entry \"%.200s\" is a %s, expected a file name",
                         mf->index_path, map->u.object.members[i].key, json_type_name(v->type));
            break;
        }
        size_t k = 0;
        while (k < mf->n_files && strcmp(names[k], v->u.string.ptr)) k++;
        if (k < mf->n_files) continue;
        if ((rc = check_shard_name(mf->index_path, v->u.string.ptr, err))) break;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, v->u.string.ptr);
        if (sft_open(&mf->files[mf->n_files], path, err)) {
            rc = as_wrap(err, "shard named by %s", mf->index_path);
            break;
        }
        names[mf->n_files++] = v->u.string.ptr;
    }
    /* every tensor the map names must be in its shard */
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_member *e = &map->u.object.members[i];
        size_t k = 0;
        while (strcmp(names[k], e->value.u.string.ptr)) k++;
        if (!sft_find(&mf->files[k], e->key))
            rc = as_fail(err, "%s: tensor %.200s is not in %s, where %s puts it",
                         mf->files[k].path, e->key, names[k], mf->index_path);
    }
    free(names);
    return rc;
}

int model_files_open(model_files *mf, const char *dir, as_err *err) {
    memset(mf, 0, sizeof *mf);
    char single[4200];
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    snprintf(mf->index_path, sizeof mf->index_path, "%s/model.safetensors.index.json", dir);
    if (fileio_exists(single, 0) || !fileio_exists(mf->index_path, 0)) {
        mf->index_path[0] = '\0';
        mf->files = calloc(1, sizeof *mf->files);
        if (!mf->files) return as_fail(err, "%s: out of memory", single);
        if (sft_open(&mf->files[0], single, err)) {
            free(mf->files);
            mf->files = NULL;
            return -1;
        }
        mf->n_files = 1;
        return 0;
    }
    json_doc *doc = json_parse_file(mf->index_path, err);
    if (!doc) return -1;
    const json_value *map = json_get(json_root(doc), "weight_map");
    int rc;
    if (!map || map->type != JSON_OBJECT || map->u.object.count == 0)
        rc = as_fail(err, "%s: no \"weight_map\" object of tensor names", mf->index_path);
    else
        rc = open_shards(mf, dir, map, err);
    json_free(doc);
    if (rc) model_files_close(mf);
    return rc;
}

static void hash_file(sha256_ctx *sha, const sft_file *f) {
    /* 64 MB at a time, dropping each piece's pages once hashed (sft_release_bytes),
     * so the mapped file never sits whole in RSS next to the arena */
    for (size_t at = 0; at < f->file_size;) {
        size_t n = f->file_size - at < ((size_t)64 << 20) ? f->file_size - at : (size_t)64 << 20;
        sha256_update(sha, f->map + at, n);
        sft_release_bytes(f, at, at + n);
        at += n;
    }
}

int model_files_sha256(const model_files *mf, char hex[65], as_err *err) {
    sha256_ctx sha;
    unsigned char digest[32];
    sha256_init(&sha);
    if (mf->index_path[0]) {
        char *text = NULL;
        size_t len = 0;
        if (fileio_read_all(mf->index_path, JSON_FILE_MAX_BYTES, "index file", &text, &len, err))
            return -1;
        sha256_update(&sha, text, len);
        free(text);
    }
    for (size_t i = 0; i < mf->n_files; i++) hash_file(&sha, &mf->files[i]);
    sha256_final(&sha, digest);
    sha256_digest_to_hex(hex, digest);
    return 0;
}
