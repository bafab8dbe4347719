/* reader.c -- reading an output without being its writer: its description
 * (attnsweep merge) and how far it got (attnsweep status). See store.h. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "fileio.h"

/* ---------- reading an output without opening it as a writer ---------- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The axes that may not change between segments, hashed. */
uint64_t store_axes_fingerprint(const store_axes *a) {
    uint64_t h = 1469598103934665603ull;
    h = fnv1a(h, a->N, a->n_N * sizeof *a->N);
    h = fnv1a(h, a->T, a->n_T * sizeof *a->T);
    h = fnv1a(h, a->eps, a->n_eps * sizeof *a->eps);
    for (size_t i = 0; i < a->n_norm; i++) h = fnv1a(h, a->normalizer[i], strlen(a->normalizer[i]) + 1);
    h = fnv1a(h, a->layer, a->n_layer * sizeof *a->layer);
    h = fnv1a(h, a->head, a->n_head * sizeof *a->head);
    if (a->sampled) h = fnv1a(h, "query_rows", 10); /* unsampled: the fingerprint as before */
    return h;
}

size_t store_payload_bytes(const store_axes *a) {
    cr_layout lay;
    cr_layout_init(&lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    cr_layout_sample(&lay, a->sampled);
    size_t at = 0;
    for (int v = 0; v < N_METRICS; v++) at += lay.count[v] * cw_type_size(cw_var_type[v]);
    return at;
}

enum { DESC_STRINGS = 16 };
typedef struct {
    int64_t *window_start;
    int32_t *L, *N, *layer, *head;
    double *T, *eps;
    char **norm;
    size_t n_norm;
    char *str[DESC_STRINGS];
    /* the model axis (absent in files from before it: n_model 0) */
    size_t n_model;
    char **model_name, **model_path, **model_sha, **model_kind, **model_cfg_sha, **model_family;
    int32_t *model_n_layer, *model_n_head, *model_n_embd;
    int64_t *training_step;
    uint8_t *head_valid;
} desc_owned;

static void free_strings(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

void store_description_free(store_description *d) {
    if (!d || !d->owned) return;
    desc_owned *o = d->owned;
    free(o->window_start), free(o->L), free(o->N), free(o->layer), free(o->head);
    free(o->T), free(o->eps);
    for (size_t i = 0; o->norm && i < o->n_norm; i++) free(o->norm[i]);
    free(o->norm);
    for (int i = 0; i < DESC_STRINGS; i++) free(o->str[i]);
    free_strings(o->model_name, o->n_model), free_strings(o->model_path, o->n_model);
    free_strings(o->model_sha, o->n_model), free_strings(o->model_kind, o->n_model);
    free_strings(o->model_cfg_sha, o->n_model), free_strings(o->model_family, o->n_model);
    free(o->model_n_layer), free(o->model_n_head), free(o->model_n_embd), free(o->training_step);
    free(o->head_valid);
    free(o);
    memset(d, 0, sizeof *d);
}

/* A root string attribute, malloc'd ("" when absent); NULL when it is not a string. */
static char *desc_attr_str(hid_t file, const char *name) {
    if (H5Aexists(file, name) <= 0) return st_dupstr("");
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    if (a < 0) return NULL;
    hid_t t = H5Aget_type(a);
    char *out = NULL;
    if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
        hid_t mt = st_utf8_vlen();
        char *v = NULL;
        if (H5Aread(a, mt, &v) >= 0) {
            out = st_dupstr(v);
            H5free_memory(v);
        }
        H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    return out;
}

static int desc_attr_num(hid_t file, const char *name, hid_t mtype, void *out) {
    if (H5Aexists(file, name) <= 0) return -1;
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    if (a < 0) return -1;
    int rc = H5Aread(a, mtype, out) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

/* A 1-D string dataset as malloc'd copies; NULL on error. */
static char **desc_read_strings(hid_t file, const char *name, size_t *n) {
    hid_t str = st_utf8_vlen();
    char **raw = st_read_1d(file, name, str, sizeof(char *), n);
    H5Tclose(str);
    if (!raw) return NULL;
    char **out = calloc(*n, sizeof *out);
    int ok = out != NULL;
    for (size_t i = 0; i < *n; i++) {
        if (out) ok &= (out[i] = st_dupstr(raw[i])) != NULL;
        H5free_memory(raw[i]);
    }
    free(raw);
    if (!ok) free_strings(out, *n), out = NULL;
    return out;
}

/* The model axis of a results file (store.h), or n_model 0 for a file written before it.
 * NULL when fine, else the name of what could not be read. */
static const char *desc_models(hid_t file, desc_owned *o, store_axes *a) {
    if (H5Lexists(file, "model", H5P_DEFAULT) <= 0) return NULL;
    size_t n = 0, k;
    o->model_name = desc_read_strings(file, "model", &n);
    if (!o->model_name) return "model";
    o->n_model = n;
    o->model_path = desc_read_strings(file, "model_path", &k);
    if (!o->model_path || k != n) return "model_path";
    o->model_sha = desc_read_strings(file, "model_sha256", &k);
    if (!o->model_sha || k != n) return "model_sha256";
    /* model_kind came a little after the model axis: absent, the root attribute stands */
    if (H5Lexists(file, "model_kind", H5P_DEFAULT) > 0) {
        o->model_kind = desc_read_strings(file, "model_kind", &k);
        if (!o->model_kind || k != n) return "model_kind";
    }
    /* model_config_sha256 came later still: absent, nothing is recorded (NULL) */
    if (H5Lexists(file, "model_config_sha256", H5P_DEFAULT) > 0) {
        o->model_cfg_sha = desc_read_strings(file, "model_config_sha256", &k);
        if (!o->model_cfg_sha || k != n) return "model_config_sha256";
    }
    /* model_family came with the families: absent, nothing is recorded (NULL) */
    if (H5Lexists(file, "model_family", H5P_DEFAULT) > 0) {
        o->model_family = desc_read_strings(file, "model_family", &k);
        if (!o->model_family || k != n) return "model_family";
    }
    o->model_n_layer = st_read_1d(file, "model_n_layer", H5T_NATIVE_INT32, 4, &k);
    if (!o->model_n_layer || k != n) return "model_n_layer";
    o->model_n_head = st_read_1d(file, "model_n_head", H5T_NATIVE_INT32, 4, &k);
    if (!o->model_n_head || k != n) return "model_n_head";
    o->model_n_embd = st_read_1d(file, "model_n_embd", H5T_NATIVE_INT32, 4, &k);
    if (!o->model_n_embd || k != n) return "model_n_embd";
    o->training_step = st_read_1d(file, "training_step", H5T_NATIVE_INT64, 8, &k);
    if (!o->training_step || k != n) return "training_step";
    size_t hv = n * a->n_layer * a->n_head;
    o->head_valid = malloc(hv ? hv : 1);
    hid_t ds = H5Dopen2(file, "head_valid", H5P_DEFAULT);
    int ok = o->head_valid && ds >= 0 &&
             H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, o->head_valid) >= 0;
    if (ds >= 0) H5Dclose(ds);
    if (!ok) return "head_valid";
    a->n_model = n;
    a->model_name = (const char *const *)o->model_name;
    a->model_path = (const char *const *)o->model_path;
    a->model_sha256 = (const char *const *)o->model_sha;
    a->model_kind = (const char *const *)o->model_kind;
    a->model_config_sha256 = (const char *const *)o->model_cfg_sha;
    a->model_family = (const char *const *)o->model_family;
    a->model_n_layer = o->model_n_layer, a->model_n_head = o->model_n_head;
    a->model_n_embd = o->model_n_embd, a->training_step = o->training_step;
    a->head_valid = o->head_valid;
    return NULL;
}

int store_describe(const char *path, store_description *d, as_err *err) {
    memset(d, 0, sizeof *d);
    desc_owned *o = calloc(1, sizeof *o);
    if (!o) return as_fail(err, "%s: out of memory", path);
    d->owned = o;
    hid_t fapl = st_file_access(), file;
    H5E_BEGIN_TRY { file = H5Fopen(path, H5F_ACC_RDONLY, fapl); } H5E_END_TRY;
    H5Pclose(fapl);
    if (file < 0) {
        store_description_free(d);
        return as_fail(err, "%s: not a readable HDF5 results file", path);
    }
    const char *bad = NULL;
    store_axes *a = &d->axes;
    store_provenance *p = &d->prov;
    H5E_BEGIN_TRY {
        size_t nw = 0, nws = 0, nnorm = 0;
        int32_t *widx = st_read_1d(file, "window", H5T_NATIVE_INT32, 4, &nw);
        free(widx);
        o->window_start = st_read_1d(file, "window_start", H5T_NATIVE_INT64, 8, &nws);
        o->L = st_read_1d(file, "L", H5T_NATIVE_INT32, 4, &a->n_L);
        o->N = st_read_1d(file, "N", H5T_NATIVE_INT32, 4, &a->n_N);
        o->T = st_read_1d(file, "T", H5T_NATIVE_DOUBLE, 8, &a->n_T);
        o->eps = st_read_1d(file, "eps", H5T_NATIVE_DOUBLE, 8, &a->n_eps);
        o->layer = st_read_1d(file, "layer", H5T_NATIVE_INT32, 4, &a->n_layer);
        o->head = st_read_1d(file, "head", H5T_NATIVE_INT32, 4, &a->n_head);
        hid_t str = st_utf8_vlen();
        char **raw = st_read_1d(file, "normalizer", str, sizeof(char *), &nnorm);
        if (raw) {
            o->norm = calloc(nnorm, sizeof *o->norm);
            o->n_norm = o->norm ? nnorm : 0;
            for (size_t i = 0; i < nnorm; i++) {
                if (o->norm) o->norm[i] = st_dupstr(raw[i]);
                H5free_memory(raw[i]);
            }
            free(raw);
        }
        H5Tclose(str);
        if (!o->window_start || nws != nw) bad = "window_start";
        else if (!o->L) bad = "L";
        else if (!o->N) bad = "N";
        else if (!o->T) bad = "T";
        else if (!o->eps) bad = "eps";
        else if (!o->norm) bad = "normalizer";
        else if (!o->layer) bad = "layer";
        else if (!o->head) bad = "head";
        a->n_window = nw;
        if (!bad) bad = desc_models(file, o, a);
        a->window_start = o->window_start, a->L = o->L, a->N = o->N, a->T = o->T;
        a->eps = o->eps, a->layer = o->layer, a->head = o->head;
        a->n_norm = o->n_norm;
        a->normalizer = (const char *const *)o->norm;

        static const char *const names[] = {"config_text", "config_sha256", "model_dir",
                                            "weights_sha256", "text_path", "text_sha256",
                                            "tokenizer_files", "mpi_library", "openblas_config"};
        const char **fields[] = {&p->config_text, &p->config_sha256, &p->model_dir,
                                 &p->weights_sha256, &p->text_path, &p->text_sha256,
                                 &p->tokenizer_files, &p->mpi_library, &p->openblas_config};
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !bad; i++) {
            o->str[i] = desc_attr_str(file, names[i]);
            if (!o->str[i]) bad = names[i];
            *fields[i] = o->str[i];
        }
        /* vectors / rows: a string in current files, a number in older ones */
        if (!bad) {
            o->str[9] = desc_attr_str(file, "vectors");
            o->str[10] = desc_attr_str(file, "rows");
            if (o->str[9]) p->vectors_name = o->str[9];
            else if (desc_attr_num(file, "vectors", H5T_NATIVE_LONG, &p->vectors)) bad = "vectors";
            if (o->str[10]) p->rows_name = o->str[10];
            else if (desc_attr_num(file, "rows", H5T_NATIVE_LONG, &p->rows)) bad = "rows";
        }
        if (!bad && desc_attr_num(file, "ks_alpha", H5T_NATIVE_DOUBLE, &p->ks_alpha)) bad = "ks_alpha";
        if (!bad && desc_attr_num(file, "seed", H5T_NATIVE_UINT64, &p->seed)) bad = "seed";
        o->str[11] = st_dupstr("");
        p->hosts = p->slurm_job_id = o->str[11];
        /* absent in older files: "" (logits then means "raw") */
        o->str[12] = desc_attr_str(file, "logits");
        o->str[13] = desc_attr_str(file, "model_kind");
        if (!bad && (!o->str[12] || !o->str[13])) bad = !o->str[12] ? "logits" : "model_kind";
        p->logits_name = o->str[12], p->model_kind = o->str[13];
        /* absent in older files: "" (not recorded) */
        o->str[14] = desc_attr_str(file, "model_config_sha256");
        if (!bad && !o->str[14]) bad = "model_config_sha256";
        p->model_config_sha256 = o->str[14];
        /* absent in older files: "" (every row); "sample:K": the SE variables are there */
        o->str[15] = desc_attr_str(file, "query_rows");
        if (!bad && !o->str[15]) bad = "query_rows";
        p->query_rows_name = o->str[15];
        a->sampled = o->str[15] && !strncmp(o->str[15], "sample:", 7);
    } H5E_END_TRY;
    H5Fclose(file);
    if (bad) {
        store_description_free(d);
        return as_fail(err, "%s: cannot read '%s' from the results file", path, bad);
    }
    return 0;
}

/* ---------- how far a sweep got (attnsweep status) ---------- */

void store_progress_free(store_progress *p) {
    if (!p) return;
    free(p->per_L);
    free(p->per_model);
    memset(p, 0, sizeof *p);
}

static store_progress_L *progress_row(store_progress *p, int32_t L) {
    for (size_t i = 0; i < p->n_L; i++)
        if (p->per_L[i].L == L) return &p->per_L[i];
    store_progress_L *grown = realloc(p->per_L, (p->n_L + 1) * sizeof *grown);
    if (!grown) return NULL;
    p->per_L = grown;
    store_progress_L *r = &p->per_L[p->n_L++];
    memset(r, 0, sizeof *r);
    r->L = L;
    return r;
}

/* The last commit of each (model, window, L) cell decides its state. */
typedef struct {
    uint32_t model;
    int32_t window, L;
    uint8_t status;
} cell_state;

/* The row of model m (grown as needed; names and totals come from the status file). */
static store_progress_model *progress_model(store_progress *p, size_t m) {
    if (m >= p->n_model) {
        store_progress_model *grown = realloc(p->per_model, (m + 1) * sizeof *grown);
        if (!grown) return NULL;
        memset(grown + p->n_model, 0, (m + 1 - p->n_model) * sizeof *grown);
        p->per_model = grown;
        p->n_model = m + 1;
    }
    return &p->per_model[m];
}

/* Done and failed cells by the journal, into p's L rows (zeroed first). A quick
 * look (payload checksums skipped), as a run may be appending. */
static int progress_from_journal(const char *jpath, store_progress *p, as_err *err) {
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, err);
    if (!j) return -1;
    cell_state *cells = NULL;
    size_t n = 0, cap = 0;
    journal_record r;
    int got, rc = 0;
    while ((got = journal_next(j, &r, err)) == 1) {
        if (r.type != JR_COMMIT) continue;
        size_t i = 0;
        while (i < n && !(cells[i].model == r.model && cells[i].window == r.window && cells[i].L == r.L)) i++;
        if (i == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                cell_state *grown = realloc(cells, cap * sizeof *grown);
                if (!grown) {
                    rc = as_fail(err, "%s: out of memory", jpath);
                    break;
                }
                cells = grown;
            }
            cells[n++] = (cell_state){r.model, r.window, r.L, 0};
        }
        cells[i].status = (uint8_t)r.status;
    }
    journal_close(j);
    if (got < 0) rc = -1;
    for (size_t i = 0; i < p->n_L; i++) p->per_L[i].done = p->per_L[i].failed = 0;
    for (size_t i = 0; i < p->n_model; i++) p->per_model[i].done = p->per_model[i].failed = 0;
    p->done = p->failed = 0;
    uint32_t n_model = 1;
    for (size_t i = 0; i < n && !rc; i++) {
        store_progress_L *row = progress_row(p, cells[i].L);
        store_progress_model *mrow = progress_model(p, cells[i].model);
        if (cells[i].model + 1 > n_model) n_model = cells[i].model + 1;
        if (!row || !mrow) rc = as_fail(err, "%s: out of memory", jpath);
        else if (cells[i].status == STORE_DONE) row->done++, mrow->done++, p->done++;
        else if (cells[i].status == STORE_FAILED) row->failed++, mrow->failed++, p->failed++;
    }
    /* windows (of a model) with every L done: count done cells per (model, window) */
    int32_t max_w = -1;
    for (size_t i = 0; i < n; i++) if (cells[i].window > max_w) max_w = cells[i].window;
    size_t per_model_w = (size_t)max_w + 1;
    size_t *per_w = !rc && max_w >= 0 && p->n_L ? calloc(n_model * per_model_w, sizeof *per_w) : NULL;
    for (size_t i = 0; per_w && i < n; i++)
        if (cells[i].status == STORE_DONE && cells[i].window >= 0)
            per_w[cells[i].model * per_model_w + (size_t)cells[i].window]++;
    p->windows_done = 0;
    for (size_t w = 0; per_w && w < n_model * per_model_w; w++) p->windows_done += per_w[w] >= p->n_L;
    free(per_w);
    free(cells);
    return rc;
}

/* Without a journal: the HDF5 status variable and L coordinate, read-only. The
 * totals come from the file too (a status file's are only a cache of the journal). */
static int progress_from_view(const char *path, store_progress *p, as_err *err) {
    hid_t fapl = st_file_access(), f;
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, fapl); } H5E_END_TRY;
    H5Pclose(fapl);
    if (f < 0) return as_fail(err, "%s: no journal, and not a readable HDF5 results file", path);
    int rc = -1;
    uint8_t *st = NULL;
    int32_t *L = NULL;
    H5E_BEGIN_TRY {
        hid_t sd = H5Dopen2(f, "status", H5P_DEFAULT), Ld = H5Dopen2(f, "L", H5P_DEFAULT);
        /* status is (model, window, L); (window, L) in files from before the model axis */
        hsize_t d3[3] = {0, 0, 0}, dims[2] = {0, 0}, n_models = 1;
        if (sd >= 0 && Ld >= 0) {
            hid_t sp = H5Dget_space(sd);
            int nd = H5Sget_simple_extent_ndims(sp);
            if (nd == 3 && H5Sget_simple_extent_dims(sp, d3, NULL) == 3)
                n_models = d3[0], dims[0] = d3[0] * d3[1], dims[1] = d3[2];
            else if (nd == 2)
                H5Sget_simple_extent_dims(sp, dims, NULL);
            H5Sclose(sp);
        }
        size_t n = (size_t)(dims[0] * dims[1]);
        if (n && (st = malloc(n)) && (L = malloc(dims[1] * sizeof *L)) &&
            H5Dread(sd, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, st) >= 0 &&
            H5Dread(Ld, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, L) >= 0) {
            free(p->per_L);
            p->per_L = NULL, p->n_L = 0;
            p->total = n, p->done = p->failed = 0;
            /* the model rows keep the status file's names only: the counts, totals too,
             * are the view's (added to a status file's totals, they came out doubled) */
            for (size_t m = 0; m < p->n_model; m++)
                p->per_model[m].total = p->per_model[m].done = p->per_model[m].failed = 0;
            rc = 0;
            for (size_t l = 0; l < dims[1] && !rc; l++) {
                store_progress_L *row = progress_row(p, L[l]);
                if (!row) {
                    rc = -1;
                    break;
                }
                row->windows = dims[0];
                for (size_t w = 0; w < dims[0]; w++) {
                    uint8_t v = st[w * dims[1] + l];
                    if (v == STORE_DONE) row->done++, p->done++;
                    else if (v == STORE_FAILED) row->failed++, p->failed++;
                }
            }
            p->windows_done = 0;
            for (size_t w = 0; !rc && w < dims[0]; w++) {
                size_t k = 0, f = 0;
                for (size_t l = 0; l < dims[1]; l++) {
                    k += st[w * dims[1] + l] == STORE_DONE;
                    f += st[w * dims[1] + l] == STORE_FAILED;
                }
                p->windows_done += k == dims[1];
                /* (model, window) rows: dims[0] / n_models windows per model */
                store_progress_model *mrow = progress_model(p, (size_t)(w / (dims[0] / n_models)));
                if (!mrow) rc = -1;
                else mrow->done += k, mrow->failed += f, mrow->total += dims[1];
            }
            for (size_t l = 0; l < p->n_L; l++) p->per_L[l].windows = dims[0];
        }
        if (sd >= 0) H5Dclose(sd);
        if (Ld >= 0) H5Dclose(Ld);
        H5Fclose(f);
    } H5E_END_TRY;
    free(st);
    free(L);
    if (rc) return as_fail(err, "%s: no readable status or L variable", path);
    p->source = STORE_FROM_VIEW;
    return 0;
}

int store_read_progress(const char *path, store_progress *p, as_err *err) {
    memset(p, 0, sizeof *p);
    char jpath[4200], spath[4200];
    if (store_sidecar(jpath, sizeof jpath, path, ".journal") ||
        store_sidecar(spath, sizeof spath, path, ".status"))
        return as_fail(err, "%s: path too long", path);
    int have_journal = fileio_exists(jpath, 0), have_status = fileio_exists(spath, 0);
    int rc = have_status ? st_read_status_file(spath, p, err) : 0;
    if (!rc && have_journal) rc = progress_from_journal(jpath, p, err);
    else if (!rc) {
        /* The journal is the truth; the status file only caches its counts, so
         * without the journal they are not reported as if they were. */
        p->journal_missing = have_status || fileio_exists(path, 0);
        rc = progress_from_view(path, p, err);
    }
    if (rc) store_progress_free(p);
    return rc;
}
