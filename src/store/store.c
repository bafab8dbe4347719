/* store.c -- see store.h. */
#include "store.h"
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>
#include <hdf5_hl.h>

#include "journal.h"
#include "lockfile.h"
#include "version.h"

/* ---------- the variables of results.md and how they are packed ---------- */

enum { D_WINDOW, D_L, D_N, D_T, D_EPS, D_NORM, D_LAYER, D_HEAD, D_COUNT };
static const char *const dim_names[D_COUNT] = {"window", "L", "N", "T", "eps", "normalizer",
                                               "layer", "head"};

typedef enum { VT_F32, VT_I32, VT_F64 } vtype;

/* The metric variables: every cr_var but the bookkeeping scalars. */
#define N_METRICS CR_WALL_TIME
static const struct {
    vtype type;
    const char *long_name, *units;
} metric_defs[N_METRICS] = {
    [CR_DIST_TRUE] = {VT_F32, "true distance of the top-N approximation (metrics.md section 2), mean over rows", NULL},
    [CR_DIST_BOUND] = {VT_F32, "Theorem 1 bound on the top-N distance (metrics.md section 2, reconstructed), mean over rows", NULL},
    [CR_DIST_EXPECT] = {VT_F32, "expected top-N distance under uniform selection (metrics.md section 2), mean over rows", NULL},
    [CR_SEP_RATIO] = {VT_F32, "fraction of the top-N tokens that are geometrically separable (metrics.md section 4), mean over rows", "1"},
    [CR_SEP_LOWER] = {VT_F32, "lower bound on the separable fraction (metrics.md section 4, reconstructed), mean over rows", "1"},
    [CR_SEP_UPPER] = {VT_F32, "upper bound on the separable fraction (metrics.md section 4, reconstructed), mean over rows", "1"},
    [CR_ROWS_USED] = {VT_I32, "rows that entered the means", NULL},
    [CR_ENTROPY] = {VT_F32, "attention entropy (metrics.md section 6), mean over rows", "nat"},
    [CR_ENTROPY_NORM] = {VT_F32, "attention entropy divided by ln n (metrics.md section 6), mean over rows", "1"},
    [CR_GRAD_EXACT] = {VT_F32, "spectral norm of the normalizer Jacobian (metrics.md section 5), mean over rows", NULL},
    [CR_GRAD_BOUND] = {VT_F32, "Corollary 3 gradient bound min(1/(4T), sqrt(2)) (metrics.md section 5)", NULL},
    [CR_GRAD_FD] = {VT_F32, "finite-difference gradient norm (metrics.md section 5), mean over rows", NULL},
    [CR_KS_STAT] = {VT_F64, "two-sample Kolmogorov-Smirnov statistic D of dist_true vs dist_expect across heads (metrics.md section 3)", "1"},
    [CR_KS_PVALUE] = {VT_F64, "exact two-sided Kolmogorov-Smirnov p-value (metrics.md section 3)", "1"},
    [CR_CRIT_N] = {VT_I32, "critical top-N (metrics.md section 3); -1 when no N qualifies", NULL},
};

static size_t vtype_size(vtype t) { return t == VT_F64 ? 8 : 4; }

/* Dimensions of a variable in the file (window and L first). */
static int var_dims(cr_var v, int dims[8]) {
    int n = 0;
    dims[n++] = D_WINDOW, dims[n++] = D_L;
    switch (cr_var_shape(v)) {
    case CR_SHAPE_PER_N:
        dims[n++] = D_N, dims[n++] = D_T, dims[n++] = D_NORM, dims[n++] = D_LAYER,
        dims[n++] = D_HEAD;
        break;
    case CR_SHAPE_PER_T:
        dims[n++] = D_T, dims[n++] = D_NORM, dims[n++] = D_LAYER, dims[n++] = D_HEAD;
        break;
    case CR_SHAPE_PER_T_EPS:
        dims[n++] = D_T, dims[n++] = D_EPS, dims[n++] = D_NORM, dims[n++] = D_LAYER,
        dims[n++] = D_HEAD;
        break;
    case CR_SHAPE_KS: dims[n++] = D_N, dims[n++] = D_T, dims[n++] = D_NORM; break;
    case CR_SHAPE_CRIT: dims[n++] = D_T, dims[n++] = D_NORM; break;
    case CR_SHAPE_SCALAR: break;
    }
    return n;
}

/* ---------- the store ---------- */

typedef struct {
    double start, end; /* end NaN while running / after a crash */
    char *hosts, *job;
    int32_t mpi_size, cells_done;
} segment;

struct store {
    char path[4096], journal_path[4200], lock_path[4200], status_path[4200];
    store_axes ax;      /* deep copies below */
    int64_t *window_start;
    int32_t *Lv, *Nv, *layerv, *headv;
    double *Tv, *epsv;
    char **normv;
    cr_layout lay;
    size_t payload_bytes, var_offset[N_METRICS];
    unsigned char *packed; /* one cell's packed payload */

    /* per cell, [window][l_index] */
    uint8_t *status;
    int32_t *attempts, *rank;
    double *wall_time;
    unsigned char *in_flight;
    journal_record *last_commit; /* the record to rebuild a cell from */

    segment *segs;
    size_t n_segs, seg_index; /* this run's segment */
    int32_t committed_this_segment;
    double t_open;

    char *stored_config_text, *stored_config_sha;
    char created[64];
    int rebuilt;
    long long torn;

    journal *jr;
    hid_t file, metric_ds[N_METRICS], status_ds, wall_ds, rank_ds, attempts_ds;
    store_provenance prov; /* strings copied */
    char *prov_strings[13];
    int locked;
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void iso_time(char *out, size_t size, double t) {
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int store_sidecar(char *out, size_t size, const char *path, const char *suffix) {
    int n = snprintf(out, size, "%s%s", path, suffix);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static char *dupstr(const char *s) {
    s = s ? s : "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The axes that may not change between segments, hashed. */
static uint64_t axes_fingerprint(const store_axes *a) {
    uint64_t h = 1469598103934665603ull;
    h = fnv1a(h, a->N, a->n_N * sizeof *a->N);
    h = fnv1a(h, a->T, a->n_T * sizeof *a->T);
    h = fnv1a(h, a->eps, a->n_eps * sizeof *a->eps);
    for (size_t i = 0; i < a->n_norm; i++) h = fnv1a(h, a->normalizer[i], strlen(a->normalizer[i]) + 1);
    h = fnv1a(h, a->layer, a->n_layer * sizeof *a->layer);
    h = fnv1a(h, a->head, a->n_head * sizeof *a->head);
    return h;
}

static size_t cell_at(const store *s, size_t w, size_t l) { return w * s->ax.n_L + l; }
size_t store_total(const store *s) { return s->ax.n_window * s->ax.n_L; }
size_t store_block_doubles(const store *s) { return s->lay.total; }
int store_was_rebuilt(const store *s) { return s->rebuilt; }
long long store_torn_bytes(const store *s) { return s->torn; }
int store_cell_status(const store *s, size_t w, size_t l) { return s->status[cell_at(s, w, l)]; }
int store_cell_attempts(const store *s, size_t w, size_t l) { return s->attempts[cell_at(s, w, l)]; }
size_t store_count(const store *s, int status) {
    size_t n = 0;
    for (size_t i = 0; i < store_total(s); i++) n += s->status[i] == status;
    return n;
}

static int find_L(const store *s, int32_t L) {
    for (size_t i = 0; i < s->ax.n_L; i++)
        if (s->Lv[i] == L) return (int)i;
    return -1;
}

/* Converts a block of doubles to the file's types (see store.h "Packing"). */
static void pack_block(const store *s, const double *block, unsigned char *out) {
    for (int v = 0; v < N_METRICS; v++) {
        const double *src = block + s->lay.offset[v];
        unsigned char *dst = out + s->var_offset[v];
        size_t n = s->lay.count[v];
        switch (metric_defs[v].type) {
        case VT_F32:
            for (size_t i = 0; i < n; i++) {
                float f = (float)src[i];
                memcpy(dst + 4 * i, &f, 4);
            }
            break;
        case VT_I32:
            for (size_t i = 0; i < n; i++) {
                double x = src[i];
                int32_t k = isnan(x) || x > 2147483647.0 || x < -2147483647.0
                                ? STORE_INT_FILL : (int32_t)llround(x);
                memcpy(dst + 4 * i, &k, 4);
            }
            break;
        case VT_F64: memcpy(dst, src, 8 * n); break;
        }
    }
}

/* The packed image of a cell never written: the fill values. */
static void fill_packed(const store *s, unsigned char *out) {
    for (int v = 0; v < N_METRICS; v++) {
        unsigned char *dst = out + s->var_offset[v];
        float fnan = NAN;
        double dnan = NAN;
        int32_t ifill = STORE_INT_FILL;
        for (size_t i = 0; i < s->lay.count[v]; i++) {
            switch (metric_defs[v].type) {
            case VT_F32: memcpy(dst + 4 * i, &fnan, 4); break;
            case VT_I32: memcpy(dst + 4 * i, &ifill, 4); break;
            case VT_F64: memcpy(dst + 8 * i, &dnan, 8); break;
            }
        }
    }
}

/* ---------- HDF5 helpers ---------- */

static hid_t utf8_vlen(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, size_t n,
                      const void *data) {
    if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
    hsize_t dim = n;
    hid_t sp = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
    hid_t a = H5Acreate2(loc, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mtype, data);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return rc < 0 ? -1 : 0;
}

static int attr_str(hid_t loc, const char *name, const char *value) {
    hid_t t = utf8_vlen();
    const char *v = value ? value : "";
    int rc = attr_write(loc, name, t, t, 1, &v);
    H5Tclose(t);
    return rc;
}

static int attr_i32(hid_t loc, const char *name, int32_t v) {
    return attr_write(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &v);
}

static int attr_f64(hid_t loc, const char *name, double v) {
    return attr_write(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &v);
}

static hid_t file_type(vtype t) {
    return t == VT_F32 ? H5T_IEEE_F32LE : t == VT_I32 ? H5T_STD_I32LE : H5T_IEEE_F64LE;
}
static hid_t mem_type(vtype t) {
    return t == VT_F32 ? H5T_NATIVE_FLOAT : t == VT_I32 ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE;
}

static size_t axis_len(const store *s, int d) {
    switch (d) {
    case D_WINDOW: return s->ax.n_window;
    case D_L: return s->ax.n_L;
    case D_N: return s->ax.n_N;
    case D_T: return s->ax.n_T;
    case D_EPS: return s->ax.n_eps;
    case D_NORM: return s->ax.n_norm;
    case D_LAYER: return s->ax.n_layer;
    default: return s->ax.n_head;
    }
}

/* A variable with NaN/int fill (fill_time alloc), chunked one cell per chunk
 * (or contiguous for the small (window, L) bookkeeping arrays). */
static hid_t create_var(hid_t file, const store *s, const char *name, vtype t, const int *dims,
                        int rank, int chunk_per_cell, const void *fill, const char *long_name,
                        const char *units) {
    hsize_t shape[8], chunk[8];
    for (int i = 0; i < rank; i++) {
        shape[i] = axis_len(s, dims[i]);
        chunk[i] = (dims[i] == D_WINDOW || dims[i] == D_L) ? 1 : shape[i];
    }
    hid_t sp = H5Screate_simple(rank, shape, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunk_per_cell) H5Pset_chunk(dcpl, rank, chunk);
    else H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    if (fill) {
        H5Pset_fill_value(dcpl, mem_type(t), fill);
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC);
    }
    hid_t ds = H5Dcreate2(file, name, file_type(t), sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(sp);
    if (ds < 0) return -1;
    int rc = 0;
    if (fill) rc |= attr_write(ds, "_FillValue", file_type(t), mem_type(t), 1, fill);
    rc |= attr_str(ds, "long_name", long_name);
    if (units) rc |= attr_str(ds, "units", units);
    for (int i = 0; i < rank; i++) {
        hid_t scale = H5Dopen2(file, dim_names[dims[i]], H5P_DEFAULT);
        if (scale < 0 || H5DSattach_scale(ds, scale, (unsigned)i) < 0) rc = -1;
        if (scale >= 0) H5Dclose(scale);
    }
    if (rc) {
        H5Dclose(ds);
        return -1;
    }
    return ds;
}

/* A 1-D coordinate variable made a dimension scale. */
static int create_coord(hid_t file, const char *name, hid_t ftype, hid_t mtype, size_t n,
                        const void *data, const char *long_name, const char *units) {
    hsize_t dim = n;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t ds = H5Dcreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    if (ds < 0) return -1;
    int rc = H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 ? -1 : 0;
    rc |= H5DSset_scale(ds, name) < 0 ? -1 : 0;
    rc |= attr_str(ds, "long_name", long_name);
    if (units) rc |= attr_str(ds, "units", units);
    H5Dclose(ds);
    return rc;
}

static int write_root_attrs(store *s, hid_t file) {
    const store_provenance *p = &s->prov;
    char buf[256];
    int rc = 0;
    rc |= attr_str(file, "title", "attnsweep: limitations of normalization in attention (arXiv 2508.17821) on GPT-2");
    rc |= attr_str(file, "program_version", AS_VERSION);
    rc |= attr_str(file, "git_commit", AS_GIT_COMMIT);
    rc |= attr_i32(file, "git_dirty", AS_GIT_DIRTY);
    rc |= attr_str(file, "config_text", p->config_text);
    rc |= attr_str(file, "config_sha256", p->config_sha256);
    rc |= attr_str(file, "model_dir", p->model_dir);
    rc |= attr_str(file, "weights_sha256", p->weights_sha256);
    rc |= attr_str(file, "text_path", p->text_path);
    rc |= attr_str(file, "text_sha256", p->text_sha256);
    rc |= attr_str(file, "tokenizer_files", p->tokenizer_files);
    rc |= attr_str(file, "created", s->created);
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
    rc |= attr_str(file, "hdf5_version", buf);
    rc |= attr_str(file, "mpi_library", p->mpi_library);
    rc |= attr_str(file, "openblas_config", p->openblas_config);
    if (p->vectors_name && p->vectors_name[0]) rc |= attr_str(file, "vectors", p->vectors_name);
    else rc |= attr_write(file, "vectors", H5T_STD_I64LE, H5T_NATIVE_LONG, 1, &p->vectors);
    if (p->rows_name && p->rows_name[0]) rc |= attr_str(file, "rows", p->rows_name);
    else rc |= attr_write(file, "rows", H5T_STD_I64LE, H5T_NATIVE_LONG, 1, &p->rows);
    rc |= attr_f64(file, "ks_alpha", p->ks_alpha);
    rc |= attr_write(file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &p->seed);
    rc |= attr_str(file, "dist_bound_note",
                   "dist_bound is the paper's Theorem 1 bound as reconstructed in metrics.md "
                   "section 2 (the printed formula is ambiguous); reconstructed");
    rc |= attr_str(file, "separability_bounds_note",
                   "sep_lower and sep_upper are our reconstruction of Theorem 2 from its proof "
                   "sketch (metrics.md section 4); reconstructed");
    rc |= attr_str(file, "status_note", "a cell (window, L) is finished when status == 1; "
                   "metrics may legitimately be NaN");
    return rc;
}

/* (Re)writes /provenance from the in-memory segment list. */
static int write_segments(store *s, hid_t file) {
    hid_t g;
    H5E_BEGIN_TRY { g = H5Gopen2(file, "provenance", H5P_DEFAULT); } H5E_END_TRY;
    int fresh = g < 0;
    if (fresh) g = H5Gcreate2(file, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    static const struct {
        const char *name, *long_name, *units;
        int kind; /* 0 i32, 1 f64, 2 string */
    } cols[] = {
        {"segment", "run segment number", NULL, 0},
        {"start", "segment start", "seconds since 1970-01-01 00:00:00", 1},
        {"end", "segment end (NaN: still running or killed)", "seconds since 1970-01-01 00:00:00", 1},
        {"hosts", "hosts of the segment", NULL, 2},
        {"mpi_size", "MPI ranks", NULL, 0},
        {"slurm_job_id", "SLURM job id (empty outside SLURM)", NULL, 2},
        {"cells_done", "cells committed in the segment", NULL, 0},
    };
    const size_t ncols = sizeof cols / sizeof cols[0];
    size_t n = s->n_segs;
    int rc = 0;
    hid_t str = utf8_vlen();
    hid_t seg_scale = -1;
    for (size_t c = 0; c < ncols && !rc; c++) {
        hid_t ftype = cols[c].kind == 0 ? H5T_STD_I32LE : cols[c].kind == 1 ? H5T_IEEE_F64LE : str;
        hid_t mtype = cols[c].kind == 0 ? H5T_NATIVE_INT32 : cols[c].kind == 1 ? H5T_NATIVE_DOUBLE : str;
        hid_t ds;
        hsize_t dim = n, maxdim = H5S_UNLIMITED, chunk = 16;
        if (fresh) {
            hid_t sp = H5Screate_simple(1, &dim, &maxdim);
            hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
            H5Pset_chunk(dcpl, 1, &chunk);
            if (cols[c].kind == 1) {
                double nan = NAN;
                H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &nan);
            }
            ds = H5Dcreate2(g, cols[c].name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            H5Pclose(dcpl);
            H5Sclose(sp);
            if (ds < 0) { rc = -1; break; }
            rc |= attr_str(ds, "long_name", cols[c].long_name);
            if (cols[c].units) rc |= attr_str(ds, "units", cols[c].units);
            if (cols[c].kind == 1) {
                double nan = NAN;
                rc |= attr_write(ds, "_FillValue", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &nan);
            }
            if (c == 0) rc |= H5DSset_scale(ds, "segment") < 0 ? -1 : 0;
            else rc |= H5DSattach_scale(ds, seg_scale, 0) < 0 ? -1 : 0;
        } else {
            ds = H5Dopen2(g, cols[c].name, H5P_DEFAULT);
            if (ds < 0 || H5Dset_extent(ds, &dim) < 0) { rc = -1; if (ds >= 0) H5Dclose(ds); break; }
        }
        if (n) {
            void *buf = malloc(n * 8);
            if (!buf) { rc = -1; H5Dclose(ds); break; }
            for (size_t i = 0; i < n; i++) {
                const segment *sg = &s->segs[i];
                switch (c) {
                case 0: ((int32_t *)buf)[i] = (int32_t)i; break;
                case 1: ((double *)buf)[i] = sg->start; break;
                case 2: ((double *)buf)[i] = sg->end; break;
                case 3: ((const char **)buf)[i] = sg->hosts; break;
                case 4: ((int32_t *)buf)[i] = sg->mpi_size; break;
                case 5: ((const char **)buf)[i] = sg->job; break;
                case 6: ((int32_t *)buf)[i] = sg->cells_done; break;
                }
            }
            if (H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) rc = -1;
            free(buf);
        }
        if (c == 0) seg_scale = ds;
        else H5Dclose(ds);
    }
    if (seg_scale >= 0) H5Dclose(seg_scale);
    H5Tclose(str);
    H5Gclose(g);
    return rc;
}

/* Errors are the caller's to report (one line), so HDF5 prints no stack. */
static void close_handles(store *s) {
    H5E_BEGIN_TRY {
        for (int v = 0; v < N_METRICS; v++)
            if (s->metric_ds[v] >= 0) H5Dclose(s->metric_ds[v]), s->metric_ds[v] = -1;
        hid_t *hs[] = {&s->status_ds, &s->wall_ds, &s->rank_ds, &s->attempts_ds};
        for (size_t i = 0; i < 4; i++)
            if (*hs[i] >= 0) H5Dclose(*hs[i]), *hs[i] = -1;
        if (s->file >= 0) H5Fclose(s->file);
    } H5E_END_TRY;
    s->file = -1;
}

/* Closes and removes a view being built that failed (typically: the disk is
 * full). HDF5 1.10 cannot survive a failed H5Fclose: the file stays in its ID
 * table half destroyed and library termination (at MPI_Finalize) crashes on
 * it (HDFFV-11052). Truncating the doomed file first gives its space back, so
 * the metadata writes of the close succeed. */
static void discard_view(store *s, const char *path) {
    if (truncate(path, 0)) { /* the close may then fail; nothing better to do */ }
    if (s->file >= 0) H5E_BEGIN_TRY { H5Fflush(s->file, H5F_SCOPE_GLOBAL); } H5E_END_TRY;
    close_handles(s);
    unlink(path);
}

/* The same for OUT.h5 itself, which keeps its (empty) name: an empty OUT.h5
 * does not open, so the next store_open rebuilds it from the journal. */
static void discard_view_keep_name(store *s) {
    if (s->file < 0) return;
    if (truncate(s->path, 0)) { /* see discard_view */ }
    H5E_BEGIN_TRY { H5Fflush(s->file, H5F_SCOPE_GLOBAL); } H5E_END_TRY;
    close_handles(s);
}

static hid_t file_access(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* Our lock file keeps writers apart; HDF5's locks fail on some cluster FS. */
    H5Pset_file_locking(fapl, 0, 1);
    /* Close everything on H5Fclose even if a handle leaked on an error path. */
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    return fapl;
}

/* Creates a complete, empty HDF5 view at path (fails if it exists). */
static int create_view(store *s, const char *path, as_err *err) {
    hid_t fapl = file_access();
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl); } H5E_END_TRY;
    H5Pclose(fapl);
    if (file < 0) return as_fail(err, "%s: cannot create HDF5 file", path);
    s->file = file;
    int rc = 0;
    size_t nw = s->ax.n_window;
    int32_t *widx = malloc((nw ? nw : 1) * sizeof *widx);
    if (!widx) rc = -1;
    for (size_t i = 0; i < nw && widx; i++) widx[i] = (int32_t)i;
    hid_t str = utf8_vlen();
    H5E_BEGIN_TRY {
        if (!rc) rc |= create_coord(file, "window", H5T_STD_I32LE, H5T_NATIVE_INT32, nw, widx,
                                    "text window index (first token at window_start)", NULL);
        rc |= create_coord(file, "L", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_L, s->Lv,
                           "context length", "tokens");
        rc |= create_coord(file, "N", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_N, s->Nv,
                           "top-N", NULL);
        rc |= create_coord(file, "T", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s->ax.n_T, s->Tv,
                           "temperature applied to raw logits (GPT-2's own attention: T = 8)", "1");
        rc |= create_coord(file, "eps", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s->ax.n_eps, s->epsv,
                           "perturbation size of grad_fd", NULL);
        rc |= create_coord(file, "normalizer", str, str, s->ax.n_norm, s->normv,
                           "attention normalizer", NULL);
        rc |= create_coord(file, "layer", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_layer,
                           s->layerv, "transformer block (0-based)", NULL);
        rc |= create_coord(file, "head", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_head, s->headv,
                           "head within the block (0-based)", NULL);
        for (int v = 0; v < N_METRICS && !rc; v++) {
            int dims[8];
            int rank = var_dims((cr_var)v, dims);
            float fnan = NAN;
            double dnan = NAN;
            int32_t ifill = STORE_INT_FILL;
            const void *fill = metric_defs[v].type == VT_F32 ? (const void *)&fnan
                               : metric_defs[v].type == VT_F64 ? (const void *)&dnan
                                                                : (const void *)&ifill;
            s->metric_ds[v] = create_var(file, s, cr_var_name((cr_var)v), metric_defs[v].type, dims,
                                         rank, 1, fill, metric_defs[v].long_name,
                                         metric_defs[v].units);
            if (s->metric_ds[v] < 0) rc = -1;
        }
        int cdims[2] = {D_WINDOW, D_L};
        if (!rc) {
            hsize_t dim = nw;
            hid_t sp = H5Screate_simple(1, &dim, NULL);
            hid_t ds = H5Dcreate2(file, "window_start", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
            H5Sclose(sp);
            if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                   s->window_start) < 0)
                rc = -1;
            if (ds >= 0) {
                rc |= attr_str(ds, "long_name", "token offset of the window's first token in the text");
                rc |= attr_str(ds, "units", "tokens");
                hid_t scale = H5Dopen2(file, "window", H5P_DEFAULT);
                if (scale < 0 || H5DSattach_scale(ds, scale, 0) < 0) rc = -1;
                if (scale >= 0) H5Dclose(scale);
                H5Dclose(ds);
            }
        }
        if (!rc) {
            double dnan = NAN;
            int32_t minus1 = -1;
            hsize_t shape[2] = {nw, s->ax.n_L};
            hid_t sp = H5Screate_simple(2, shape, NULL);
            hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
            H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
            uint8_t pending = STORE_PENDING;
            H5Pset_fill_value(dcpl, H5T_NATIVE_UINT8, &pending);
            H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC);
            s->status_ds = H5Dcreate2(file, "status", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl,
                                      H5P_DEFAULT);
            H5Pclose(dcpl);
            H5Sclose(sp);
            if (s->status_ds < 0) rc = -1;
            else {
                uint8_t flags[3] = {0, 1, 2};
                rc |= attr_write(s->status_ds, "flag_values", H5T_STD_U8LE, H5T_NATIVE_UINT8, 3, flags);
                rc |= attr_str(s->status_ds, "flag_meanings", "pending done failed");
                rc |= attr_str(s->status_ds, "long_name", "cell status (the truth about which cells are done)");
                for (int i = 0; i < 2; i++) {
                    hid_t scale = H5Dopen2(file, dim_names[cdims[i]], H5P_DEFAULT);
                    if (scale < 0 || H5DSattach_scale(s->status_ds, scale, (unsigned)i) < 0) rc = -1;
                    if (scale >= 0) H5Dclose(scale);
                }
            }
            if (!rc) {
                s->wall_ds = create_var(file, s, "wall_time", VT_F64, cdims, 2, 0, &dnan,
                                        "wall-clock time of the cell", "s");
                s->rank_ds = create_var(file, s, "rank", VT_I32, cdims, 2, 0, &minus1,
                                        "MPI rank that computed the cell", NULL);
                s->attempts_ds = create_var(file, s, "attempts", VT_I32, cdims, 2, 0, NULL,
                                            "times the cell was dispatched", NULL);
                if (s->wall_ds < 0 || s->rank_ds < 0 || s->attempts_ds < 0) rc = -1;
            }
        }
        if (!rc) rc |= write_root_attrs(s, file);
        if (!rc) rc |= write_segments(s, file);
    } H5E_END_TRY;
    H5Tclose(str);
    free(widx);
    if (rc) {
        discard_view(s, path);
        return as_fail(err, "%s: cannot lay out the results file (HDF5 error)", path);
    }
    return 0;
}

/* Opens the view read-write and checks its axes. 0 ok, 1 unusable or other
 * axes (rebuild), -1 never. */
static int open_view(store *s) {
    hid_t fapl = file_access();
    int rc = 0;
    H5E_BEGIN_TRY {
        s->file = H5Fopen(s->path, H5F_ACC_RDWR, fapl);
        if (s->file < 0) rc = 1;
        for (int v = 0; v < N_METRICS && !rc; v++) {
            s->metric_ds[v] = H5Dopen2(s->file, cr_var_name((cr_var)v), H5P_DEFAULT);
            if (s->metric_ds[v] < 0) rc = 1;
        }
        if (!rc) {
            s->status_ds = H5Dopen2(s->file, "status", H5P_DEFAULT);
            s->wall_ds = H5Dopen2(s->file, "wall_time", H5P_DEFAULT);
            s->rank_ds = H5Dopen2(s->file, "rank", H5P_DEFAULT);
            s->attempts_ds = H5Dopen2(s->file, "attempts", H5P_DEFAULT);
            if (s->status_ds < 0 || s->wall_ds < 0 || s->rank_ds < 0 || s->attempts_ds < 0) rc = 1;
        }
        /* Axes: window_start and L must match exactly; the others are checked
         * through the journal fingerprint, but their lengths must match here. */
        for (int d = 0; d < D_COUNT && !rc; d++) {
            hid_t ds = H5Dopen2(s->file, dim_names[d], H5P_DEFAULT);
            hsize_t n = 0;
            if (ds >= 0) {
                hid_t sp = H5Dget_space(ds);
                if (H5Sget_simple_extent_ndims(sp) != 1 || H5Sget_simple_extent_dims(sp, &n, NULL) < 0)
                    n = (hsize_t)-1;
                H5Sclose(sp);
                if (n == axis_len(s, d) && d == D_L) {
                    int32_t *buf = malloc(n * sizeof *buf);
                    if (!buf || H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ||
                        memcmp(buf, s->Lv, n * sizeof *buf))
                        rc = 1;
                    free(buf);
                }
                H5Dclose(ds);
            }
            if (ds < 0 || n != axis_len(s, d)) rc = 1;
        }
        if (!rc) {
            hid_t ds = H5Dopen2(s->file, "window_start", H5P_DEFAULT);
            size_t n = s->ax.n_window;
            int64_t *buf = malloc(n * sizeof *buf);
            if (ds < 0 || !buf ||
                H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ||
                memcmp(buf, s->window_start, n * sizeof *buf))
                rc = 1;
            free(buf);
            if (ds >= 0) H5Dclose(ds);
        }
    } H5E_END_TRY;
    H5Pclose(fapl);
    if (rc) close_handles(s);
    return rc;
}

static int write_cell_values(store *s, size_t w, size_t l, const unsigned char *packed) {
    int rc = 0;
    for (int v = 0; v < N_METRICS && !rc; v++) {
        int dims[8];
        int rank = var_dims((cr_var)v, dims);
        hsize_t start[8] = {w, l}, count[8] = {1, 1};
        for (int i = 2; i < rank; i++) start[i] = 0, count[i] = axis_len(s, dims[i]);
        hid_t fs = H5Dget_space(s->metric_ds[v]);
        /* Memory space of the selection's own shape: HDF5 then maps the cell
         * to its chunk in one piece instead of element by element. */
        hid_t ms = H5Screate_simple(rank, count, NULL);
        if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dwrite(s->metric_ds[v], mem_type(metric_defs[v].type), ms, fs, H5P_DEFAULT,
                     packed + s->var_offset[v]) < 0)
            rc = -1;
        H5Sclose(ms);
        H5Sclose(fs);
    }
    return rc;
}

static int write_element(hid_t ds, hid_t mtype, size_t w, size_t l, const void *value) {
    hsize_t start[2] = {w, l}, count[2] = {1, 1}, one = 1;
    hid_t fs = H5Dget_space(ds);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    int rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                     H5Dwrite(ds, mtype, ms, fs, H5P_DEFAULT, value) < 0
                 ? -1 : 0;
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static int write_bookkeeping_cell(store *s, size_t w, size_t l) {
    size_t c = cell_at(s, w, l);
    int rc = 0;
    rc |= write_element(s->status_ds, H5T_NATIVE_UINT8, w, l, &s->status[c]);
    rc |= write_element(s->wall_ds, H5T_NATIVE_DOUBLE, w, l, &s->wall_time[c]);
    rc |= write_element(s->rank_ds, H5T_NATIVE_INT32, w, l, &s->rank[c]);
    rc |= write_element(s->attempts_ds, H5T_NATIVE_INT32, w, l, &s->attempts[c]);
    return rc;
}

static int write_bookkeeping_all(store *s) {
    int rc = 0;
    rc |= H5Dwrite(s->status_ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->status) < 0;
    rc |= H5Dwrite(s->wall_ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->wall_time) < 0;
    rc |= H5Dwrite(s->rank_ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->rank) < 0;
    rc |= H5Dwrite(s->attempts_ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->attempts) < 0;
    return rc ? -1 : 0;
}

/* ---------- journal replay ---------- */

static int replay_journal(store *s, as_err *err) {
    journal_record r;
    int got;
    journal_rewind(s->jr);
    while ((got = journal_next(s->jr, &r, err)) == 1) {
        if (r.type == JR_CONFIG) {
            char *text = malloc(r.payload_len + 1);
            if (!text) return as_fail(err, "%s: out of memory", s->journal_path);
            if (journal_read_payload(s->jr, &r, text, err)) {
                free(text);
                return -1;
            }
            text[r.payload_len] = 0;
            /* The sha256 is the first line, the text follows. */
            char *nl = strchr(text, '\n');
            free(s->stored_config_text);
            free(s->stored_config_sha);
            s->stored_config_sha = NULL;
            s->stored_config_text = NULL;
            if (nl) {
                *nl = 0;
                s->stored_config_sha = dupstr(text);
                s->stored_config_text = dupstr(nl + 1);
            }
            free(text);
            if (!s->created[0]) iso_time(s->created, sizeof s->created, r.t_start);
            continue;
        }
        if (r.type == JR_SEG_BEGIN || r.type == JR_SEG_END) {
            size_t k = (size_t)r.window;
            if (r.window < 0 || k > s->n_segs)
                return as_fail(err, "%s: segment record %d out of order", s->journal_path, r.window);
            if (k == s->n_segs) {
                if (r.type != JR_SEG_BEGIN)
                    return as_fail(err, "%s: segment %d ends before it begins", s->journal_path, r.window);
                segment *grown = realloc(s->segs, (s->n_segs + 1) * sizeof *grown);
                if (!grown) return as_fail(err, "%s: out of memory", s->journal_path);
                s->segs = grown;
                segment *sg = &s->segs[s->n_segs++];
                memset(sg, 0, sizeof *sg);
                sg->end = NAN;
            }
            segment *sg = &s->segs[k];
            if (r.type == JR_SEG_BEGIN) {
                char *text = calloc(1, r.payload_len + 2);
                if (!text || journal_read_payload(s->jr, &r, text, err)) {
                    free(text);
                    return as_fail(err, "%s: cannot read segment %d", s->journal_path, r.window);
                }
                free(sg->hosts);
                free(sg->job);
                sg->hosts = dupstr(text);
                sg->job = dupstr(text + strlen(text) + 1 <= text + r.payload_len ? text + strlen(text) + 1 : "");
                free(text);
                sg->start = r.t_start;
                sg->mpi_size = r.rank;
            } else {
                sg->end = r.t_end;
                sg->cells_done = (int32_t)r.attempt;
            }
            continue;
        }
        /* JR_DISPATCH or JR_COMMIT: a cell, by window index and L value. */
        int li = find_L(s, r.L);
        if (r.window < 0 || (size_t)r.window >= s->ax.n_window || li < 0)
            return as_fail(err, "%s: journal holds cell (window %d, L %d) outside this sweep's "
                           "axes; windows and L values may be added, not removed",
                           s->journal_path, r.window, r.L);
        if (s->window_start[r.window] != r.window_start)
            return as_fail(err, "%s: window %d started at token %lld in the journal, %lld now: "
                           "the text or the window plan changed; use a new output",
                           s->journal_path, r.window, (long long)r.window_start,
                           (long long)s->window_start[r.window]);
        size_t c = cell_at(s, (size_t)r.window, (size_t)li);
        if (r.type == JR_DISPATCH) {
            s->attempts[c]++;
            s->in_flight[c] = 1;
        } else {
            if (!s->in_flight[c]) s->attempts[c]++; /* committed without a dispatch record */
            s->in_flight[c] = 0;
            if ((int32_t)r.attempt > s->attempts[c]) s->attempts[c] = (int32_t)r.attempt;
            if (r.status == STORE_DONE && r.payload_len != s->payload_bytes)
                return as_fail(err, "%s: cell (window %d, L %d) has %llu payload bytes, expected %zu",
                               s->journal_path, r.window, r.L, (unsigned long long)r.payload_len,
                               s->payload_bytes);
            s->status[c] = (uint8_t)(r.status == STORE_DONE ? STORE_DONE : STORE_FAILED);
            s->wall_time[c] = r.wall_time;
            s->rank[c] = r.rank;
            s->last_commit[c] = r;
        }
    }
    /* Cells in flight at a crash stay pending; their dispatch already counted
     * as an attempt. */
    memset(s->in_flight, 0, store_total(s));
    return got < 0 ? -1 : 0;
}

/* ---------- rebuild ---------- */

static int fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Writes a complete view from the in-memory state (journal replay) into
 * OUT.h5.tmp.PID and renames it over OUT.h5; leaves the view open. */
static int rebuild_view(store *s, as_err *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", s->path, (long)getpid());
    unlink(tmp); /* ours from an earlier failed attempt of this pid, if any */
    close_handles(s);
    if (create_view(s, tmp, err)) return -1;
    int rc = 0;
    H5E_BEGIN_TRY {
        for (size_t w = 0; w < s->ax.n_window && !rc; w++)
            for (size_t l = 0; l < s->ax.n_L && !rc; l++) {
                size_t c = cell_at(s, w, l);
                if (s->status[c] != STORE_DONE) continue;
                if (journal_read_payload(s->jr, &s->last_commit[c], s->packed, err)) {
                    rc = -1;
                    break;
                }
                if (write_cell_values(s, w, l, s->packed)) rc = as_fail(err, "%s: cannot write cell", tmp);
            }
        if (!rc && write_bookkeeping_all(s)) rc = as_fail(err, "%s: cannot write status", tmp);
        if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0)
            rc = as_fail(err, "%s: cannot write the rebuilt file (disk full?)", tmp);
    } H5E_END_TRY;
    if (rc) discard_view(s, tmp);
    close_handles(s);
    if (!rc && fsync_path(tmp)) rc = as_fail(err, "%s: fsync failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, s->path)) rc = as_fail(err, "%s: cannot rename to %s: %s", tmp, s->path, strerror(errno));
    if (rc) {
        unlink(tmp);
        return -1;
    }
    fileio_sync_parent_dir(s->path);
    s->rebuilt = 1;
    if (open_view(s)) return as_fail(err, "%s: rebuilt file does not reopen", s->path);
    return 0;
}

/* Compares the opened view with the journal: 1 = rebuild needed. Cells the
 * file marks done/failed that the journal does not are fixed in place. */
static int reconcile_view(store *s, as_err *err) {
    size_t n = store_total(s);
    uint8_t *fst = malloc(n ? n : 1);
    if (!fst) return as_fail(err, "%s: out of memory", s->path);
    int rc = 0;
    H5E_BEGIN_TRY {
        if (H5Dread(s->status_ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, fst) < 0) rc = 1;
    } H5E_END_TRY;
    for (size_t c = 0; c < n && !rc; c++)
        if (s->status[c] == STORE_DONE && fst[c] != STORE_DONE) rc = 1;
    if (!rc) {
        /* Values the file holds for a cell the journal does not call done go
         * back to the fill, so the view shows exactly the journal. */
        int filled = 0;
        H5E_BEGIN_TRY {
            for (size_t c = 0; c < n && !rc; c++) {
                if (fst[c] != STORE_DONE || s->status[c] == STORE_DONE) continue;
                if (!filled) fill_packed(s, s->packed), filled = 1;
                if (write_cell_values(s, c / s->ax.n_L, c % s->ax.n_L, s->packed)) rc = 1;
            }
            if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) rc = 1;
            /* Also brings attempts up to date (dispatches since the last close). */
            if (!rc && (write_bookkeeping_all(s) || H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0)) rc = 1;
        } H5E_END_TRY;
    }
    free(fst);
    return rc;
}

/* ---------- open / close ---------- */

/* Removes OUT.h5.tmp.* and OUT.h5.status.tmp.* left by a writer that died
 * mid-rebuild or mid-status: we hold the lock, so none of them is live. */
static void remove_stale_temps(const store *s) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", s->path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : s->path;
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    char p1[4200], p2[4200];
    snprintf(p1, sizeof p1, "%s.tmp.", base);
    snprintf(p2, sizeof p2, "%s.status.tmp.", base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, p1, strlen(p1)) && strncmp(e->d_name, p2, strlen(p2))) continue;
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        unlink(full);
    }
    closedir(d);
}


static void store_free(store *s) {
    if (!s) return;
    close_handles(s);
    journal_close(s->jr);
    free(s->window_start);
    free(s->Lv), free(s->Nv), free(s->layerv), free(s->headv), free(s->Tv), free(s->epsv);
    if (s->normv)
        for (size_t i = 0; i < s->ax.n_norm; i++) free(s->normv[i]);
    free(s->normv);
    free(s->packed);
    free(s->status), free(s->attempts), free(s->rank), free(s->wall_time), free(s->in_flight);
    free(s->last_commit);
    for (size_t i = 0; i < s->n_segs; i++) free(s->segs[i].hosts), free(s->segs[i].job);
    free(s->segs);
    free(s->stored_config_text), free(s->stored_config_sha);
    for (size_t i = 0; i < sizeof s->prov_strings / sizeof s->prov_strings[0]; i++)
        free(s->prov_strings[i]);
    free(s);
}

static void *dupmem(const void *p, size_t n) {
    void *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

static int copy_axes(store *s, const store_axes *a, as_err *err) {
    const char *what = NULL;
    if (!a->n_window) what = "window";
    else if (!a->n_L) what = "L";
    else if (!a->n_N) what = "N";
    else if (!a->n_T) what = "T";
    else if (!a->n_eps) what = "eps";
    else if (!a->n_norm) what = "normalizer";
    else if (!a->n_layer) what = "layer";
    else if (!a->n_head) what = "head";
    if (what) return as_fail(err, "%s: axis %s is empty", s->path, what);
    for (size_t i = 0; i < a->n_L; i++)
        for (size_t k = 0; k < i; k++)
            if (a->L[i] == a->L[k]) return as_fail(err, "%s: L value %d appears twice", s->path, a->L[i]);
    s->ax = *a;
    s->window_start = dupmem(a->window_start, a->n_window * sizeof *a->window_start);
    s->Lv = dupmem(a->L, a->n_L * sizeof *a->L);
    s->Nv = dupmem(a->N, a->n_N * sizeof *a->N);
    s->Tv = dupmem(a->T, a->n_T * sizeof *a->T);
    s->epsv = dupmem(a->eps, a->n_eps * sizeof *a->eps);
    s->layerv = dupmem(a->layer, a->n_layer * sizeof *a->layer);
    s->headv = dupmem(a->head, a->n_head * sizeof *a->head);
    s->normv = calloc(a->n_norm, sizeof *s->normv);
    int ok = s->window_start && s->Lv && s->Nv && s->Tv && s->epsv && s->layerv && s->headv && s->normv;
    for (size_t i = 0; ok && i < a->n_norm; i++) ok = (s->normv[i] = dupstr(a->normalizer[i])) != NULL;
    if (!ok) return as_fail(err, "%s: out of memory", s->path);
    s->ax.window_start = s->window_start, s->ax.L = s->Lv, s->ax.N = s->Nv, s->ax.T = s->Tv;
    s->ax.eps = s->epsv, s->ax.layer = s->layerv, s->ax.head = s->headv;
    s->ax.normalizer = (const char *const *)s->normv;
    cr_layout_init(&s->lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    size_t at = 0;
    for (int v = 0; v < N_METRICS; v++) {
        s->var_offset[v] = at;
        at += s->lay.count[v] * vtype_size(metric_defs[v].type);
    }
    s->payload_bytes = at;
    size_t n = store_total(s);
    s->packed = malloc(at);
    s->status = calloc(n, 1);
    s->attempts = calloc(n, sizeof *s->attempts);
    s->rank = malloc(n * sizeof *s->rank);
    s->wall_time = malloc(n * sizeof *s->wall_time);
    s->in_flight = calloc(n, 1);
    s->last_commit = calloc(n, sizeof *s->last_commit);
    if (!s->packed || !s->status || !s->attempts || !s->rank || !s->wall_time || !s->in_flight ||
        !s->last_commit)
        return as_fail(err, "%s: out of memory for %zu cells", s->path, n);
    for (size_t i = 0; i < n; i++) s->rank[i] = -1, s->wall_time[i] = NAN;
    return 0;
}

static void copy_provenance(store *s, const store_provenance *p) {
    s->prov = *p;
    const char **fields[] = {&s->prov.config_text, &s->prov.config_sha256, &s->prov.model_dir,
                             &s->prov.weights_sha256, &s->prov.text_path, &s->prov.text_sha256,
                             &s->prov.tokenizer_files, &s->prov.mpi_library,
                             &s->prov.openblas_config, &s->prov.hosts, &s->prov.slurm_job_id,
                             &s->prov.vectors_name, &s->prov.rows_name};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        s->prov_strings[i] = dupstr(*fields[i]);
        *fields[i] = s->prov_strings[i];
    }
}

static int append_config(store *s, as_err *err) {
    size_t a = strlen(s->prov.config_sha256), b = strlen(s->prov.config_text);
    char *payload = malloc(a + 1 + b);
    if (!payload) return as_fail(err, "%s: out of memory", s->journal_path);
    memcpy(payload, s->prov.config_sha256, a);
    payload[a] = '\n';
    memcpy(payload + a + 1, s->prov.config_text, b);
    journal_record r = {.type = JR_CONFIG, .window = -1, .t_start = now_seconds(),
                        .payload_len = a + 1 + b};
    int rc = journal_append(s->jr, &r, payload, err);
    free(payload);
    return rc;
}

/* This run's segment, in memory (the view shows it from now on). */
static int add_segment(store *s, as_err *err) {
    segment *grown = realloc(s->segs, (s->n_segs + 1) * sizeof *grown);
    if (!grown) return as_fail(err, "%s: out of memory", s->journal_path);
    s->segs = grown;
    segment *sg = &s->segs[s->n_segs];
    sg->start = s->t_open, sg->end = NAN;
    sg->hosts = dupstr(s->prov.hosts), sg->job = dupstr(s->prov.slurm_job_id);
    sg->mpi_size = s->prov.mpi_size, sg->cells_done = 0;
    s->seg_index = s->n_segs++;
    return 0;
}

/* ... and in the journal. */
static int append_segment_begin(store *s, as_err *err) {
    size_t a = strlen(s->prov.hosts), b = strlen(s->prov.slurm_job_id);
    char *payload = malloc(a + 1 + b + 1);
    if (!payload) return as_fail(err, "%s: out of memory", s->journal_path);
    memcpy(payload, s->prov.hosts, a + 1);
    memcpy(payload + a + 1, s->prov.slurm_job_id, b + 1);
    journal_record r = {.type = JR_SEG_BEGIN, .window = (int32_t)s->seg_index,
                        .rank = s->prov.mpi_size, .t_start = s->t_open, .payload_len = a + b + 2};
    int rc = journal_append(s->jr, &r, payload, err);
    free(payload);
    return rc;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

store *store_open(const char *path, const store_axes *axes, const store_provenance *prov,
                  store_mode mode, int flags, as_err *err) {
    store *s = calloc(1, sizeof *s);
    if (!s) {
        as_fail(err, "%s: out of memory", path);
        return NULL;
    }
    s->file = s->status_ds = s->wall_ds = s->rank_ds = s->attempts_ds = -1;
    for (int v = 0; v < N_METRICS; v++) s->metric_ds[v] = -1;
    s->t_open = now_seconds();
    if (store_sidecar(s->path, sizeof s->path, path, "") ||
        store_sidecar(s->journal_path, sizeof s->journal_path, path, ".journal") ||
        store_sidecar(s->lock_path, sizeof s->lock_path, path, ".lock") ||
        store_sidecar(s->status_path, sizeof s->status_path, path, ".status")) {
        as_fail(err, "%s: path too long", path);
        store_free(s);
        return NULL;
    }
    copy_provenance(s, prov);
    if (copy_axes(s, axes, err)) {
        store_free(s);
        return NULL;
    }
    int created_journal = 0;
    if (fileio_make_parent_dirs(s->path, err)) {
        store_free(s);
        return NULL;
    }
    if (lock_acquire(s->lock_path, NULL, err)) {
        store_free(s);
        return NULL;
    }
    s->locked = 1;
    remove_stale_temps(s);
    int have_journal = exists(s->journal_path), have_file = exists(s->path);
    journal_header want;
    memset(&want, 0, sizeof want);
    snprintf(want.config_sha256, sizeof want.config_sha256, "%s", s->prov.config_sha256);
    uint64_t sizes[6] = {axes->n_N, axes->n_T, axes->n_eps, axes->n_norm, axes->n_layer, axes->n_head};
    memcpy(want.layout, sizes, sizeof sizes);
    want.payload_bytes = s->payload_bytes;
    want.axes_fingerprint = axes_fingerprint(axes);

    if (mode == STORE_NEW && (have_journal || have_file)) {
        as_fail(err, "%s: output exists (new output requested); choose another name or resume",
                have_file ? s->path : s->journal_path);
        goto fail;
    }
    if (!have_journal && have_file) {
        as_fail(err, "%s: output exists but its journal %s is missing, so its state cannot be "
                "trusted; move the file away or restore the journal", s->path, s->journal_path);
        goto fail;
    }
    if (!have_journal) {
        s->jr = journal_create(s->journal_path, &want, err);
        if (!s->jr) goto fail;
        created_journal = 1;
        iso_time(s->created, sizeof s->created, s->t_open);
        if (add_segment(s, err) || append_config(s, err) || append_segment_begin(s, err) ||
            journal_sync(s->jr, err))
            goto fail;
        s->stored_config_sha = dupstr(s->prov.config_sha256);
        s->stored_config_text = dupstr(s->prov.config_text);
        if (rebuild_view(s, err)) goto fail;
        s->rebuilt = 0; /* a fresh file, not a rebuild */
    } else {
        journal_header got;
        off_t torn = 0;
        s->jr = journal_open(s->journal_path, JOURNAL_WRITABLE, &got, &torn, err);
        if (!s->jr) goto fail;
        s->torn = (long long)torn;
        if (memcmp(got.layout, want.layout, sizeof want.layout) || got.payload_bytes != want.payload_bytes) {
            as_fail(err, "%s: written with N,T,eps,normalizer,layer,head sizes %llu,%llu,%llu,%llu,"
                    "%llu,%llu; the config now gives %zu,%zu,%zu,%zu,%zu,%zu (only windows and L "
                    "may grow); use a new output", s->journal_path,
                    (unsigned long long)got.layout[0], (unsigned long long)got.layout[1],
                    (unsigned long long)got.layout[2], (unsigned long long)got.layout[3],
                    (unsigned long long)got.layout[4], (unsigned long long)got.layout[5],
                    axes->n_N, axes->n_T, axes->n_eps, axes->n_norm, axes->n_layer, axes->n_head);
            goto fail;
        }
        if (got.axes_fingerprint != want.axes_fingerprint) {
            as_fail(err, "%s: the N, T, eps, normalizer, layer or head values differ from the ones "
                    "the journal was written with (only windows and L may grow); use a new output",
                    s->journal_path);
            goto fail;
        }
        if (replay_journal(s, err)) goto fail;
        if (!s->stored_config_sha || strcmp(s->stored_config_sha, s->prov.config_sha256)) {
            if (!(flags & STORE_ALLOW_CONFIG_CHANGE)) {
                as_fail(err, "%s: config changed since the last run (sha256 %.12s..., now %.12s...)",
                        s->path, s->stored_config_sha ? s->stored_config_sha : "none",
                        s->prov.config_sha256);
                goto fail;
            }
        }
        if (!s->created[0]) iso_time(s->created, sizeof s->created, s->t_open);
        if (add_segment(s, err)) goto fail;
        if (!have_file || open_view(s) || reconcile_view(s, err)) {
            if (rebuild_view(s, err)) goto fail;
        } else {
            int rc;
            H5E_BEGIN_TRY {
                rc = write_root_attrs(s, s->file) || write_segments(s, s->file) ||
                     H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0;
            } H5E_END_TRY;
            if (rc) {
                as_fail(err, "%s: cannot update provenance", s->path);
                goto fail;
            }
        }
    }
    /* Journal this segment (and a changed config) only once the view is
     * usable, so a failed open leaves the journal as it was. */
    if (have_journal) {
        int changed = !s->stored_config_sha || strcmp(s->stored_config_sha, s->prov.config_sha256);
        if ((changed && append_config(s, err)) || append_segment_begin(s, err) ||
            journal_sync(s->jr, err))
            goto fail;
    }
    if (store_write_status(s, 0, "running", err)) goto fail;
    return s;

fail:
    close_handles(s);
    journal_close(s->jr);
    s->jr = NULL;
    if (created_journal) unlink(s->journal_path);
    if (s->locked) lock_release(s->lock_path, NULL);
    store_free(s);
    return NULL;
}

/* ---------- test-only hook: pauses between the steps of the commit protocol ----------
 * ATTNSWEEP_TEST_COMMIT_DELAY_MS=ms makes the writer sleep ms at each phase
 * below and, when ATTNSWEEP_TEST_PHASE_FILE names a file, first append
 * "SEQ PHASE\n" to it, so a crash test (tests/reliability/test_torture.py) can SIGKILL the
 * job inside a chosen phase. Unset (the normal case) it costs one branch on a
 * cached int. Phases: "dispatch_written" (a dispatch record appended, not
 * synced), "data_flushed", "status_flushed", "journal_written" (commit
 * records appended, before the fsync), "journal_synced". */
static int test_delay_ms = -1; /* -1: environment not read yet */
static const char *test_phase_file;

static void test_phase(const char *phase) {
    if (test_delay_ms == 0) return;
    if (test_delay_ms < 0) {
        const char *v = getenv("ATTNSWEEP_TEST_COMMIT_DELAY_MS");
        test_delay_ms = v && atoi(v) > 0 ? atoi(v) : 0;
        test_phase_file = getenv("ATTNSWEEP_TEST_PHASE_FILE");
        if (test_delay_ms == 0) return;
    }
    static unsigned long seq;
    if (test_phase_file && *test_phase_file) {
        int fd = open(test_phase_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            char line[96];
            int n = snprintf(line, sizeof line, "%lu %s\n", ++seq, phase);
            if (write(fd, line, (size_t)n) < 0) { /* best effort: test only */ }
            close(fd);
        }
    }
    struct timespec ts = {test_delay_ms / 1000, (long)(test_delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

int store_mark_dispatched(store *s, size_t w, size_t l, int rank, double t_start, as_err *err) {
    if (w >= s->ax.n_window || l >= s->ax.n_L)
        return as_fail(err, "%s: cell (%zu, %zu) outside the axes", s->path, w, l);
    size_t c = cell_at(s, w, l);
    journal_record r = {.type = JR_DISPATCH, .window = (int32_t)w, .L = s->Lv[l],
                        .window_start = s->window_start[w], .attempt = (uint32_t)s->attempts[c] + 1,
                        .rank = rank, .t_start = t_start};
    if (journal_append(s->jr, &r, NULL, err)) return -1;
    s->attempts[c]++;
    s->in_flight[c] = 1;
    test_phase("dispatch_written");
    return 0;
}

/* An HDF5 write of a commit failed (in practice: the disk is full). The view
 * is then inconsistent and, worse, HDF5 1.10 crashes at exit on a file whose
 * close fails (see discard_view). The journal holds every finished cell and
 * the provenance, so the view is given up (truncated: the next run rebuilds
 * it from the journal) and the writer stops with one line. */
static int commit_view_failed(store *s, const char *what, as_err *err) {
    int saved = errno;
    discard_view_keep_name(s);
    return as_fail(err, "%s: cannot write %s (HDF5 error%s); finished cells are safe in the journal "
                   "and the file is rebuilt from it by the next run", s->path, what,
                   saved == ENOSPC || saved == EDQUOT || saved == EFBIG ? ": disk full" : "");
}

int store_commit_batch(store *s, const store_cell *cells, const double *const *blocks, size_t n,
                       as_err *err) {
    for (size_t i = 0; i < n; i++)
        if (cells[i].window >= s->ax.n_window || cells[i].l_index >= s->ax.n_L ||
            (cells[i].status != STORE_DONE && cells[i].status != STORE_FAILED) ||
            (cells[i].status == STORE_DONE && !blocks[i]))
            return as_fail(err, "%s: bad commit of cell (%zu, %zu) status %d", s->path,
                           cells[i].window, cells[i].l_index, cells[i].status);
    int rc = 0;
    /* 1. data, flush */
    H5E_BEGIN_TRY {
        for (size_t i = 0; i < n && !rc; i++) {
            if (!blocks[i] || cells[i].status != STORE_DONE) continue;
            pack_block(s, blocks[i], s->packed);
            if (write_cell_values(s, cells[i].window, cells[i].l_index, s->packed)) rc = -1;
        }
        if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) rc = -1;
    } H5E_END_TRY;
    if (rc) return commit_view_failed(s, "cell results", err);
    test_phase("data_flushed");
    /* 2. status and bookkeeping, flush */
    for (size_t i = 0; i < n; i++) {
        size_t c = cell_at(s, cells[i].window, cells[i].l_index);
        if (!s->in_flight[c]) s->attempts[c]++;
        s->in_flight[c] = 0;
        s->status[c] = (uint8_t)cells[i].status;
        /* The block's own bookkeeping wins; a failed cell's block may be all NaN. */
        double wt = blocks[i] ? blocks[i][s->lay.offset[CR_WALL_TIME]] : NAN;
        double rk = blocks[i] ? blocks[i][s->lay.offset[CR_RANK]] : NAN;
        s->wall_time[c] = isnan(wt) ? cells[i].wall_time : wt;
        s->rank[c] = isnan(rk) || rk < 0 || rk > 2147483647.0 ? cells[i].rank : (int32_t)rk;
    }
    H5E_BEGIN_TRY {
        for (size_t i = 0; i < n && !rc; i++)
            rc = write_bookkeeping_cell(s, cells[i].window, cells[i].l_index);
        if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) rc = -1;
    } H5E_END_TRY;
    if (rc) return commit_view_failed(s, "cell status", err);
    test_phase("status_flushed");
    /* 3. journal, fsync: from here the cells are done. */
    for (size_t i = 0; i < n; i++) {
        size_t w = cells[i].window, l = cells[i].l_index, c = cell_at(s, w, l);
        int with_data = blocks[i] && cells[i].status == STORE_DONE;
        if (with_data) pack_block(s, blocks[i], s->packed);
        journal_record r = {.type = JR_COMMIT, .window = (int32_t)w, .L = s->Lv[l],
                            .window_start = s->window_start[w], .status = (uint32_t)cells[i].status,
                            .attempt = (uint32_t)s->attempts[c], .rank = s->rank[c],
                            .t_start = cells[i].t_start, .t_end = cells[i].t_end,
                            .wall_time = s->wall_time[c],
                            .payload_len = with_data ? s->payload_bytes : 0};
        if (journal_append(s->jr, &r, with_data ? s->packed : NULL, err)) return -1;
        r.payload_offset = journal_size(s->jr) - (off_t)r.payload_len;
        r.payload_crc = journal_crc32(0, s->packed, with_data ? r.payload_len : 0);
        s->last_commit[c] = r;
        s->committed_this_segment++;
    }
    test_phase("journal_written");
    if (journal_sync(s->jr, err)) return -1;
    test_phase("journal_synced");
    size_t in_flight = 0;
    for (size_t c = 0; c < store_total(s); c++) in_flight += s->in_flight[c];
    return store_write_status(s, in_flight, "running", err);
}

static void json_string(FILE *f, const char *v) {
    fputc('"', f);
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f), fputc(*p, f);
        else if ((unsigned char)*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

int store_write_status(store *s, size_t in_flight, const char *state, as_err *err) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", s->status_path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return as_fail(err, "%s: cannot write status: %s", tmp, strerror(errno));
    double now = now_seconds();
    size_t done = store_count(s, STORE_DONE), failed = store_count(s, STORE_FAILED);
    char started[64], updated[64];
    iso_time(started, sizeof started, s->t_open);
    iso_time(updated, sizeof updated, now);
    double hours = (now - s->t_open) / 3600.0;
    fprintf(f, "{\n  \"format\": \"attnsweep-status-1\",\n  \"output\": ");
    json_string(f, s->path);
    fprintf(f, ",\n  \"state\": ");
    json_string(f, state);
    fprintf(f, ",\n  \"total\": %zu,\n  \"done\": %zu,\n  \"failed\": %zu,\n  \"in_flight\": %zu,\n"
               "  \"pending\": %zu,\n  \"windows\": %zu,\n",
            store_total(s), done, failed, in_flight, store_total(s) - done - failed - in_flight,
            s->ax.n_window);
    fprintf(f, "  \"L\": [");
    for (size_t l = 0; l < s->ax.n_L; l++) fprintf(f, "%s%d", l ? ", " : "", s->Lv[l]);
    fprintf(f, "],\n  \"done_per_L\": [");
    for (size_t l = 0; l < s->ax.n_L; l++) {
        size_t d = 0;
        for (size_t w = 0; w < s->ax.n_window; w++) d += s->status[cell_at(s, w, l)] == STORE_DONE;
        fprintf(f, "%s%zu", l ? ", " : "", d);
    }
    fprintf(f, "],\n  \"cells_this_segment\": %d,\n  \"rate_cells_per_hour\": %.3f,\n",
            s->committed_this_segment, hours > 0 ? s->committed_this_segment / hours : 0.0);
    fprintf(f, "  \"segment_started\": \"%s\",\n  \"updated\": \"%s\",\n  \"updated_unix\": %.3f,\n",
            started, updated, now);
    fprintf(f, "  \"pid\": %ld,\n  \"host\": ", (long)getpid());
    json_string(f, lock_hostname());
    fprintf(f, ",\n  \"slurm_job_id\": ");
    json_string(f, s->prov.slurm_job_id);
    fprintf(f, "\n}\n");
    int bad = ferror(f);
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, s->status_path)) {
        int saved = errno;
        unlink(tmp);
        return as_fail(err, "%s: cannot write status file: %s", s->status_path, strerror(saved));
    }
    return 0;
}

int store_close(store *s, const char *state, as_err *err) {
    if (!s) return 0;
    int rc = 0;
    segment *sg = &s->segs[s->seg_index];
    sg->end = now_seconds();
    sg->cells_done = s->committed_this_segment;
    journal_record r = {.type = JR_SEG_END, .window = (int32_t)s->seg_index, .t_end = sg->end,
                        .attempt = (uint32_t)s->committed_this_segment};
    if (journal_append(s->jr, &r, NULL, err) || journal_sync(s->jr, err)) rc = -1;
    int h5rc;
    H5E_BEGIN_TRY {
        h5rc = write_segments(s, s->file) || write_bookkeeping_all(s) ||
               H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0;
    } H5E_END_TRY;
    if (h5rc && !rc) rc = as_fail(err, "%s: cannot write provenance at close", s->path);
    close_handles(s);
    if (store_write_status(s, 0, state ? state : "finished", rc ? NULL : err)) rc = -1;
    if (lock_release(s->lock_path, rc ? NULL : err)) rc = -1;
    store_free(s);
    return rc;
}

int store_peek_config(const char *path, char **text, char **sha256, as_err *err) {
    *text = *sha256 = NULL;
    char jpath[4200];
    if (store_sidecar(jpath, sizeof jpath, path, ".journal")) return as_fail(err, "%s: path too long", path);
    if (!exists(jpath)) return 0;
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, err);
    if (!j) return -1;
    journal_record r, last = {0};
    int got, found = 0;
    while ((got = journal_next(j, &r, err)) == 1)
        if (r.type == JR_CONFIG) last = r, found = 1;
    int rc = got < 0 ? -1 : 0;
    if (!rc && found) {
        char *buf = malloc(last.payload_len + 1);
        if (!buf || journal_read_payload(j, &last, buf, err)) {
            free(buf);
            rc = -1;
        } else {
            buf[last.payload_len] = 0;
            char *nl = strchr(buf, '\n');
            if (nl) {
                *nl = 0;
                *sha256 = dupstr(buf);
                *text = dupstr(nl + 1);
            }
            free(buf);
        }
    }
    journal_close(j);
    if (rc) return -1;
    return found && *text ? 1 : as_fail(err, "%s: journal holds no config record", jpath);
}

/* ---------- reading an output without opening it as a writer ---------- */

uint64_t store_axes_fingerprint(const store_axes *axes) { return axes_fingerprint(axes); }

size_t store_payload_bytes(const store_axes *a) {
    cr_layout lay;
    cr_layout_init(&lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    size_t at = 0;
    for (int v = 0; v < N_METRICS; v++) at += lay.count[v] * vtype_size(metric_defs[v].type);
    return at;
}

enum { DESC_STRINGS = 12 };
typedef struct {
    int64_t *window_start;
    int32_t *L, *N, *layer, *head;
    double *T, *eps;
    char **norm;
    size_t n_norm;
    char *str[DESC_STRINGS];
} desc_owned;

void store_description_free(store_description *d) {
    if (!d || !d->owned) return;
    desc_owned *o = d->owned;
    free(o->window_start), free(o->L), free(o->N), free(o->layer), free(o->head);
    free(o->T), free(o->eps);
    for (size_t i = 0; o->norm && i < o->n_norm; i++) free(o->norm[i]);
    free(o->norm);
    for (int i = 0; i < DESC_STRINGS; i++) free(o->str[i]);
    free(o);
    memset(d, 0, sizeof *d);
}

/* A 1-D dataset of n values of mtype, malloc'd; NULL on error. */
static void *desc_read_1d(hid_t file, const char *name, hid_t mtype, size_t elem, size_t *n) {
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0) return NULL;
    hid_t sp = H5Dget_space(ds);
    hsize_t dim = 0;
    void *buf = NULL;
    if (H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, &dim, NULL) == 1 &&
        dim > 0 && (buf = malloc((size_t)dim * elem)) &&
        H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    H5Sclose(sp);
    H5Dclose(ds);
    *n = (size_t)dim;
    return buf;
}

/* A root string attribute, malloc'd ("" when absent); NULL when it is not a string. */
static char *desc_attr_str(hid_t file, const char *name) {
    if (H5Aexists(file, name) <= 0) return dupstr("");
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    if (a < 0) return NULL;
    hid_t t = H5Aget_type(a);
    char *out = NULL;
    if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
        hid_t mt = utf8_vlen();
        char *v = NULL;
        if (H5Aread(a, mt, &v) >= 0) {
            out = dupstr(v);
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

int store_describe(const char *path, store_description *d, as_err *err) {
    memset(d, 0, sizeof *d);
    desc_owned *o = calloc(1, sizeof *o);
    if (!o) return as_fail(err, "%s: out of memory", path);
    d->owned = o;
    hid_t fapl = file_access(), file;
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
        int32_t *widx = desc_read_1d(file, "window", H5T_NATIVE_INT32, 4, &nw);
        free(widx);
        o->window_start = desc_read_1d(file, "window_start", H5T_NATIVE_INT64, 8, &nws);
        o->L = desc_read_1d(file, "L", H5T_NATIVE_INT32, 4, &a->n_L);
        o->N = desc_read_1d(file, "N", H5T_NATIVE_INT32, 4, &a->n_N);
        o->T = desc_read_1d(file, "T", H5T_NATIVE_DOUBLE, 8, &a->n_T);
        o->eps = desc_read_1d(file, "eps", H5T_NATIVE_DOUBLE, 8, &a->n_eps);
        o->layer = desc_read_1d(file, "layer", H5T_NATIVE_INT32, 4, &a->n_layer);
        o->head = desc_read_1d(file, "head", H5T_NATIVE_INT32, 4, &a->n_head);
        hid_t str = utf8_vlen();
        char **raw = desc_read_1d(file, "normalizer", str, sizeof(char *), &nnorm);
        if (raw) {
            o->norm = calloc(nnorm, sizeof *o->norm);
            o->n_norm = o->norm ? nnorm : 0;
            for (size_t i = 0; i < nnorm; i++) {
                if (o->norm) o->norm[i] = dupstr(raw[i]);
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
        o->str[11] = dupstr("");
        p->hosts = p->slurm_job_id = o->str[11];
    } H5E_END_TRY;
    H5Fclose(file);
    if (bad) {
        store_description_free(d);
        return as_fail(err, "%s: cannot read '%s' from the results file", path, bad);
    }
    return 0;
}
