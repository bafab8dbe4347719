/* schema.c -- the variables of results.md and the HDF5 view
 * (datasets, dimension scales, attributes, /provenance). See store.h, store_int.h. */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>
#include <hdf5_hl.h>

#include "fileio.h"
#include "metrics.h" /* met_normalizer_name: inline, nothing of the kernels is linked */
#include "version.h"

/* ---------- the variables of results.md (packed as cellwire.h says) ---------- */

enum { D_MODEL, D_WINDOW, D_L, D_N, D_T, D_EPS, D_NORM, D_LAYER, D_HEAD, D_COUNT };
static const char *const dim_names[D_COUNT] = {"model", "window", "L", "N", "T", "eps",
                                               "normalizer", "layer", "head"};

/* The leading dimensions of a cell variable: a cell is (model, window, L). */
enum { CELL_DIMS = 3 };

const st_metric_def st_metric_defs[N_METRICS] = {
    [CR_DIST_TRUE] = {"mean over rows of the summed distance between unselected weighted vectors and the top-N context vector", "1"},
    [CR_DIST_BOUND] = {"mean over rows of the reconstructed Theorem 1 upper bound on the top-N distance", "1"},
    [CR_DIST_EXPECT] = {"mean over rows of the top-N distance expected for a uniformly random choice of N keys", "1"},
    [CR_SEP_RATIO] = {"mean over rows of the fraction of top-N keys geometrically separable from the unselected keys", "1"},
    [CR_SEP_LOWER] = {"mean over rows of the reconstructed Theorem 2 lower bound on the separable fraction", "1"},
    [CR_SEP_UPPER] = {"mean over rows of the reconstructed Theorem 2 upper bound on the separable fraction", "1"},
    [CR_SEP_MARGINAL] = {"mean over rows of the share of top-N keys whose separability decision rests on a margin |D_i^2 - r^2| <= 1e-12 |s|^2", "1"},
    [CR_ROWS_USED] = {"number of query rows in the per-N means (rows with more than N keys)", "1"},
    [CR_ENTROPY] = {"mean over rows of the attention entropy -sum(a ln a), in nats", "1"},
    [CR_ENTROPY_NORM] = {"mean over rows of the attention entropy divided by ln(number of keys)", "1"},
    [CR_GRAD_EXACT] = {"mean over rows of the spectral norm of the softmax Jacobian with respect to the raw logits", "1"},
    [CR_GRAD_BOUND] = {"Corollary 3 gradient curve min(1/(4T), sqrt(2)); not an upper bound on grad_exact", "1"},
    [CR_GRAD_FD] = {"mean over rows of the weight change per unit logit perturbation along a random direction", "1"},
    [CR_KS_STAT] = {"Kolmogorov-Smirnov statistic D between per-head mean dist_true and mean dist_expect (dist_random where the root attribute ks_against is \"random\")", "1"},
    [CR_KS_PVALUE] = {"exact two-sided Kolmogorov-Smirnov p-value of dist_true against dist_expect (dist_random where the root attribute ks_against is \"random\") across heads", "1"},
    [CR_CRIT_N] = {"critical top-N: smallest N whose Kolmogorov-Smirnov p-value exceeds ks_alpha (missing where none up to the largest N does: see crit_N_censored)", "1"},
    [CR_DIST_RANDOM] = {"mean over rows of the expected top-N distance E||Z|| for a uniformly random choice of N keys (exact or Monte Carlo; metrics.dist_random)", "1"},
    [CR_DIST_RANDOM_SE] = {"Monte-Carlo standard error of dist_random's mean over rows (0 where every row is exact)", "1"},
    [CR_DIST_RANDOM_UPPER] = {"mean over rows of sqrt(E||Z||^2) for a uniformly random choice of N keys: the second-moment upper bound of dist_random", "1"},
    [CR_CRIT_N_CENSORED] = {"1 where no N of the grid passed the Kolmogorov-Smirnov test (crit_N is then missing: the critical N is at least the largest N tested), 0 where crit_N was found", "1"},
    /* metrics.query_rows = "sample:K" only (docs/metrics.md section 9.1) */
    [CR_DIST_TRUE_SE] = {"standard error of dist_true's mean over the sampled rows", "1"},
    [CR_DIST_BOUND_SE] = {"standard error of dist_bound's mean over the sampled rows", "1"},
    [CR_DIST_EXPECT_SE] = {"standard error of dist_expect's mean over the sampled rows", "1"},
    [CR_SEP_RATIO_SE] = {"standard error of sep_ratio's mean over the sampled rows", "1"},
    [CR_SEP_LOWER_SE] = {"standard error of sep_lower's mean over the sampled rows", "1"},
    [CR_SEP_UPPER_SE] = {"standard error of sep_upper's mean over the sampled rows", "1"},
    [CR_SEP_MARGINAL_SE] = {"standard error of sep_marginal's mean over the sampled rows", "1"},
    [CR_ENTROPY_SE] = {"standard error of entropy's mean over the sampled rows", "1"},
    [CR_ENTROPY_NORM_SE] = {"standard error of entropy_norm's mean over the sampled rows", "1"},
    [CR_GRAD_EXACT_SE] = {"standard error of grad_exact's mean over the sampled rows", "1"},
    [CR_GRAD_FD_SE] = {"standard error of grad_fd's mean over the sampled rows", "1"},
    [CR_DIST_RANDOM_ROWS_SE] = {"standard error of dist_random's mean over the sampled rows (which rows; dist_random_se is the Monte-Carlo standard error of the draws)", "1"},
    [CR_DIST_RANDOM_UPPER_SE] = {"standard error of dist_random_upper's mean over the sampled rows", "1"},
    [CR_ROWS_SAMPLED] = {"number of sampled query rows in the N-independent means (entropy, entropy_norm, grad_exact, grad_fd); rows_used counts the per-N means' rows", "1"},
};

/* The distance variables of the aggregate reading (docs/metrics.md section 4.5): other
 * quantities than st_metric_defs' per-token ones, so they are described as what they are. */
static const struct {
    cr_var v;
    const char *long_name;
} aggregate_long_names[] = {
    {CR_DIST_TRUE, "mean over rows of the distance between the summed unselected weighted vectors and the top-N context vector (aggregate reading)"},
    {CR_DIST_BOUND, "mean over rows of the aggregate reading's upper bound U d1 + |U - A| m on that distance (derived in docs/metrics.md section 4.5, not the paper's Theorem 1)"},
    {CR_DIST_EXPECT, "mean over rows of |n - 2N| / n times the norm of the full context vector: the aggregate distance's expectation term for a uniformly random choice of N keys"},
    {CR_DIST_RANDOM, "mean over rows of the expected aggregate distance E||S - 2 s|| for a uniformly random choice of N keys (exact or Monte Carlo; metrics.dist_random)"},
    {CR_DIST_RANDOM_UPPER, "mean over rows of sqrt(E||S - 2 s||^2) for a uniformly random choice of N keys: the second-moment upper bound of the aggregate dist_random"},
};

static int is_aggregate(const store *s) {
    return s->prov.distance_name && !strcmp(s->prov.distance_name, "aggregate");
}

static int is_scaled(const store *s) {
    return s->prov.logits_name && !strcmp(s->prov.logits_name, "scaled");
}

/* A metric's long_name in this file: the readings it was computed in decide (root attributes
 * `distance` and `logits`; with scaled logits the gradients are taken with respect to them,
 * docs/metrics.md section 1). */
static const char *metric_long_name(const store *s, cr_var v) {
    if (is_aggregate(s))
        for (size_t k = 0; k < sizeof aggregate_long_names / sizeof aggregate_long_names[0]; k++)
            if (aggregate_long_names[k].v == v) return aggregate_long_names[k].long_name;
    if (is_scaled(s) && v == CR_GRAD_EXACT)
        return "mean over rows of the spectral norm of the softmax Jacobian with respect to the scaled logits q.k / sqrt(d_head)";
    return st_metric_defs[v].long_name;
}

/* Dimensions of a variable in the file (model, window and L first). */
static int var_dims(cr_var v, int dims[9]) {
    int n = 0;
    dims[n++] = D_MODEL, dims[n++] = D_WINDOW, dims[n++] = D_L;
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

int st_var_rank(cr_var v) {
    int dims[9];
    return var_dims(v, dims);
}

void st_pack_block(const store *s, const double *block, unsigned char *out) {
    cw_pack_cell(&s->lay, block, out);
}

/* The packed image of a cell never written: the fill values. */
void st_fill_packed(const store *s, unsigned char *out) {
    for (int v = 0; v < cw_nvars(&s->lay); v++) {
        unsigned char *dst = out + s->var_offset[v];
        float fnan = NAN;
        double dnan = NAN;
        int32_t ifill = STORE_INT_FILL;
        for (size_t i = 0; i < s->lay.count[v]; i++) {
            switch (cw_var_type[v]) {
            case CW_F32: memcpy(dst + 4 * i, &fnan, 4); break;
            case CW_I32: memcpy(dst + 4 * i, &ifill, 4); break;
            case CW_F64: memcpy(dst + 8 * i, &dnan, 8); break;
            }
        }
    }
}

/* ---------- HDF5 helpers ---------- */

hid_t st_utf8_vlen(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

int st_attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, size_t n,
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

int st_attr_str(hid_t loc, const char *name, const char *value) {
    hid_t t = st_utf8_vlen();
    const char *v = value ? value : "";
    int rc = st_attr_write(loc, name, t, t, 1, &v);
    H5Tclose(t);
    return rc;
}

void *st_read_1d(hid_t file, const char *name, hid_t mtype, size_t elem, size_t *n) {
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0) return NULL;
    hid_t sp = H5Dget_space(ds);
    hsize_t dim = 0;
    void *buf = NULL;
    if (sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, &dim, NULL) == 1 &&
        dim > 0 && (buf = malloc((size_t)dim * elem)) &&
        H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    *n = (size_t)dim;
    return buf;
}

static int attr_i32(hid_t loc, const char *name, int32_t v) {
    return st_attr_write(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &v);
}

static int attr_f64(hid_t loc, const char *name, double v) {
    return st_attr_write(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &v);
}

static hid_t file_type(cw_type t) {
    return t == CW_F32 ? H5T_IEEE_F32LE : t == CW_I32 ? H5T_STD_I32LE : H5T_IEEE_F64LE;
}
static hid_t mem_type(cw_type t) {
    return t == CW_F32 ? H5T_NATIVE_FLOAT : t == CW_I32 ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE;
}

static size_t axis_len(const store *s, int d) {
    switch (d) {
    case D_MODEL: return s->ax.n_model;
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
 * (or contiguous for the small (window, L) bookkeeping arrays). With
 * STORE_COMPRESSED the chunks get shuffle + deflate level 1: both filters are
 * built into every HDF5, so h5py, xarray and netCDF read the file without
 * plugins. Level 1: higher levels gain ~2% on results files for more of the
 * master's CPU, which every commit already spends mostly on deflate. Cell chunks of views
 * created since checksums end with HDF5's Fletcher32 (built in too), so a damaged chunk
 * is an error for every reader, never other numbers (docs/results.md "Checksums"). */
static hid_t create_var(hid_t file, const store *s, const char *name, cw_type t, const int *dims,
                        int rank, int chunk_per_cell, const void *fill, const char *long_name,
                        const char *units) {
    hsize_t shape[9], chunk[9];
    for (int i = 0; i < rank; i++) {
        shape[i] = axis_len(s, dims[i]);
        chunk[i] = (dims[i] == D_MODEL || dims[i] == D_WINDOW || dims[i] == D_L) ? 1 : shape[i];
    }
    hid_t sp = H5Screate_simple(rank, shape, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunk_per_cell) {
        H5Pset_chunk(dcpl, rank, chunk);
        if (s->compress) {
            H5Pset_shuffle(dcpl);
            H5Pset_deflate(dcpl, 1);
        }
        /* last, so the checksum covers the bytes stored: a reader checks a chunk before
         * inflating it, and the store checks one raw (chunks.c) */
        if (s->fletcher) H5Pset_fletcher32(dcpl);
    }
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
    if (fill) rc |= st_attr_write(ds, "_FillValue", file_type(t), mem_type(t), 1, fill);
    rc |= st_attr_str(ds, "long_name", long_name);
    if (units) rc |= st_attr_str(ds, "units", units);
    if (dims[0] == D_MODEL) rc |= st_attr_str(ds, "coordinates", ST_MODEL_COORDS);
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
    rc |= st_attr_str(ds, "long_name", long_name);
    if (units) rc |= st_attr_str(ds, "units", units);
    H5Dclose(ds);
    return rc;
}

int st_write_root_attrs(store *s, hid_t file) {
    const store_provenance *p = &s->prov;
    char buf[256];
    int rc = 0;
    /* CF-1.8 root attributes; `history` is written with /provenance (st_write_segments) */
    rc |= st_attr_str(file, "Conventions", "CF-1.8");
    rc |= st_attr_str(file, "title", "Limitations of normalization in attention (arXiv 2508.17821): "
                                  "attnsweep results");
    snprintf(buf, sizeof buf, "attnsweep %s (git %s%s): model forward pass in float32 (OpenBLAS), "
             "metrics accumulated in double", AS_VERSION, AS_GIT_COMMIT, AS_GIT_DIRTY ? ", dirty" : "");
    rc |= st_attr_str(file, "source", buf);
    rc |= st_attr_str(file, "references",
                   "Mudarisov, Burtsev, Petrova, State: Limitations of Normalization in Attention "
                   "Mechanism, arXiv:2508.17821 (NeurIPS 2025). Variables: docs/metrics.md and "
                   "docs/results.md in the attnsweep repository");
    rc |= st_attr_str(file, "program_version", AS_VERSION);
    rc |= st_attr_str(file, "git_commit", AS_GIT_COMMIT);
    rc |= attr_i32(file, "git_dirty", AS_GIT_DIRTY);
    rc |= st_attr_str(file, "config_text", p->config_text);
    rc |= st_attr_str(file, "config_sha256", p->config_sha256);
    rc |= st_attr_str(file, "model_dir", p->model_dir);
    rc |= st_attr_str(file, "weights_sha256", p->weights_sha256);
    rc |= st_attr_str(file, "model_config_sha256", p->model_config_sha256);
    rc |= st_attr_str(file, "text_path", p->text_path);
    rc |= st_attr_str(file, "text_sha256", p->text_sha256);
    rc |= st_attr_str(file, "tokenizer_files", p->tokenizer_files);
    rc |= st_attr_str(file, "created", s->created);
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
    rc |= st_attr_str(file, "hdf5_version", buf);
    rc |= st_attr_str(file, "mpi_library", p->mpi_library);
    rc |= st_attr_str(file, "openblas_config", p->openblas_config);
    if (p->vectors_name && p->vectors_name[0]) rc |= st_attr_str(file, "vectors", p->vectors_name);
    else rc |= st_attr_write(file, "vectors", H5T_STD_I64LE, H5T_NATIVE_LONG, 1, &p->vectors);
    if (p->rows_name && p->rows_name[0]) rc |= st_attr_str(file, "rows", p->rows_name);
    else rc |= st_attr_write(file, "rows", H5T_STD_I64LE, H5T_NATIVE_LONG, 1, &p->rows);
    rc |= st_attr_str(file, "logits", p->logits_name && p->logits_name[0] ? p->logits_name : "raw");
    rc |= st_attr_str(file, "query_rows", p->query_rows_name && p->query_rows_name[0] ? p->query_rows_name : "all");
    rc |= st_attr_str(file, "distance",
                   p->distance_name && p->distance_name[0] ? p->distance_name : "per_token");
    if (p->model_kind && p->model_kind[0]) rc |= st_attr_str(file, "model_kind", p->model_kind);
    rc |= attr_f64(file, "ks_alpha", p->ks_alpha);
    /* docs/metrics.md section 4.6: which expectation ks_* and crit_N compare with */
    rc |= st_attr_str(file, "ks_against", p->ks_random ? "random" : "expect");
    rc |= st_attr_write(file, "random_subsets", H5T_STD_I64LE, H5T_NATIVE_LONG, 1, &p->random_subsets);
    rc |= st_attr_write(file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &p->seed);
    rc |= st_attr_str(file, "dist_bound_note",
                   is_aggregate(s)
                       ? "dist_bound is the aggregate reading's bound U d1 + |U - A| m, derived in "
                         "docs/metrics.md section 4.5 (not the paper's Theorem 1, which is of the "
                         "per-token reading); it is a valid upper bound on dist_true for each row"
                       : "dist_bound is a reconstruction of the paper's Theorem 1 bound (its printed "
                         "formula could not be read reliably); it is a valid upper bound on dist_true "
                         "for each row. See docs/metrics.md section 4.2");
    rc |= st_attr_str(file, "separability_bounds_note",
                   "sep_lower and sep_upper are a reconstruction of the paper's Theorem 2 bounds "
                   "from its proof sketch, not the paper's printed formulas. See docs/metrics.md "
                   "section 6.1");
    rc |= st_attr_str(file, "status_note", "a cell (model, window, L) is finished when status == 1; "
                   "metrics may legitimately be NaN; head_valid == 0 marks a (layer, head) the "
                   "model does not have (its values are NaN / int fill)");
    return rc;
}

/* "2026-12-01T08:55:47Z" for a time in seconds since the epoch (UTC). */
static void iso8601(char *out, size_t size, double t) {
    time_t secs = (time_t)t;
    struct tm tm;
    if (!isfinite(t) || !gmtime_r(&secs, &tm) || !strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, size, "unknown time");
}

/* The CF `history` root attribute: one line per run segment, each starting with its UTC start
 * time. Derived from the segment list, like /provenance, so a rebuilt or merged file tells the
 * same history. */
static int write_history(const store *s, hid_t file) {
    size_t cap = 256 * (s->n_segs + 1), len = 0;
    char *text = malloc(cap);
    if (!text) return -1;
    text[0] = 0;
    for (size_t i = 0; i < s->n_segs; i++) {
        const segment *sg = &s->segs[i];
        char start[32], end[32];
        iso8601(start, sizeof start, sg->start);
        iso8601(end, sizeof end, sg->end);
        int n = snprintf(text + len, cap - len,
                         "%s%s attnsweep run: segment %zu, %d MPI ranks%s%s, %d cells committed, %s",
                         len ? "\n" : "", start, i, (int)sg->mpi_size,
                         sg->job && sg->job[0] ? ", SLURM job " : "", sg->job ? sg->job : "",
                         (int)sg->cells_done, isfinite(sg->end) ? "ended " : "not ended (running or killed)");
        if (n < 0 || (size_t)n >= cap - len) break;
        len += (size_t)n;
        if (isfinite(sg->end)) len += (size_t)snprintf(text + len, cap - len, "%s", end);
    }
    int rc = 0;
    if (H5Aexists(file, "history") > 0 && H5Adelete(file, "history") < 0) rc = -1;
    if (!rc) rc = st_attr_str(file, "history", text);
    free(text);
    return rc;
}

/* A stop signal's name ("SIGINT"); the ones a sweep stops for, else its number. */
static void signal_name(char *out, size_t n, int signo) {
    static const struct { int no; const char *name; } names[] = {
        {SIGINT, "SIGINT"}, {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"}, {SIGHUP, "SIGHUP"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].no == signo) {
            snprintf(out, n, "%s", names[i].name);
            return;
        }
    snprintf(out, n, "signal %d", signo);
}

void st_segment_ended(const store *s, size_t k, char *out, size_t n) {
    const segment *sg = &s->segs[k];
    char sig[32];
    if (isnan(sg->end)) {
        /* no end record: the last segment may still be running; an earlier one was killed */
        snprintf(out, n, k + 1 < s->n_segs ? "crashed (no end record)" : "no end record (running, or crashed)");
        return;
    }
    switch (sg->ended) {
    case ST_END_COMPLETED: snprintf(out, n, "completed"); break;
    case ST_END_ERROR: snprintf(out, n, "error (the run's stderr says which)"); break;
    case ST_END_STOPPED:
        signal_name(sig, sizeof sig, sg->end_signo);
        /* SLURM's warning before a job's time limit is SIGUSR1 (jobs/attnsweep.sbatch) */
        if (sg->end_signo == SIGUSR1 && sg->job && sg->job[0]) snprintf(out, n, "time limit (SIGUSR1 in SLURM job %s)", sg->job);
        else if (sg->end_signo) snprintf(out, n, "stopped by signal %s", sig);
        else snprintf(out, n, "stopped by a signal");
        break;
    default: snprintf(out, n, "ended (how was not recorded: an older attnsweep)");
    }
}

void st_segment_extended(const store *s, size_t k, char *out, size_t n) {
    const segment *sg = &s->segs[k], *pv = k ? &s->segs[k - 1] : NULL;
    if (!pv) {
        snprintf(out, n, "first segment");
        return;
    }
    if (!sg->n_model || !pv->n_model) {
        snprintf(out, n, "not recorded (an older attnsweep)");
        return;
    }
    /* axes only grow (models, windows, L values may be added, never removed) */
    const char *what[3] = {"models", "windows", "L values"};
    int32_t was[3] = {pv->n_model, pv->n_window, pv->n_L}, now[3] = {sg->n_model, sg->n_window, sg->n_L};
    int at = snprintf(out, n, "no");
    for (int i = 0, any = 0; i < 3 && at >= 0 && (size_t)at < n; i++) {
        if (now[i] == was[i]) continue;
        at = any ? at : 0;
        at += snprintf(out + at, n - (size_t)at, "%s%s %d -> %d", any ? ", " : "yes: ", what[i], was[i], now[i]);
        any = 1;
    }
}

/* (Re)writes /provenance from the in-memory segment list, and the history it tells. */
int st_write_segments(store *s, hid_t file) {
    hid_t g;
    H5E_BEGIN_TRY { g = H5Gopen2(file, "provenance", H5P_DEFAULT); } H5E_END_TRY;
    int fresh = g < 0;
    if (fresh) g = H5Gcreate2(file, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    static const struct {
        const char *name, *long_name, *units;
        int kind; /* 0 i32, 1 f64, 2 string */
    } cols[] = {
        {"segment", "run segment number", "1", 0},
        {"start", "segment start time (UTC)", "seconds since 1970-01-01 00:00:00", 1},
        {"end", "segment end time (UTC; NaN while running or after a kill)", "seconds since 1970-01-01 00:00:00", 1},
        {"hosts", "host names of the segment's ranks", NULL, 2},
        {"mpi_size", "number of MPI ranks", "1", 0},
        {"slurm_job_id", "SLURM job id (empty outside SLURM)", NULL, 2},
        {"cells_done", "cells committed during the segment", "1", 0},
        {"note", "what the segment's open found wrong (journal damage skipped); empty when "
                 "nothing", NULL, 2},
        {"inputs", "sha256 of every input file the segment read, one 'KEY sha256=HEX' line each "
                   "(empty: not recorded)", NULL, 2},
        {"ended", "how the segment ended: completed, stopped by signal NAME, time limit, error, "
                  "crashed (no end record)", NULL, 2},
        {"extended", "whether the segment extended the sweep against the previous one (models, "
                     "windows, L values added)", NULL, 2},
    };
    const size_t ncols = sizeof cols / sizeof cols[0];
    size_t n = s->n_segs;
    int rc = 0;
    /* The note column exists only once some segment had something to say, so a
     * file that never met damage has the same layout as before notes existed. */
    int want_note = 0, want_inputs = 0;
    for (size_t i = 0; i < n; i++) want_note |= s->segs[i].note && s->segs[i].note[0];
    if (!fresh) H5E_BEGIN_TRY { want_note |= H5Lexists(g, "note", H5P_DEFAULT) > 0; } H5E_END_TRY;
    /* likewise the inputs column, once a segment recorded them (files of older writers) */
    for (size_t i = 0; i < n; i++) want_inputs |= s->segs[i].inputs && s->segs[i].inputs[0];
    if (!fresh) H5E_BEGIN_TRY { want_inputs |= H5Lexists(g, "inputs", H5P_DEFAULT) > 0; } H5E_END_TRY;
    hid_t str = st_utf8_vlen();
    hid_t seg_scale = -1;
    for (size_t c = 0; c < ncols && !rc; c++) {
        hid_t ftype = cols[c].kind == 0 ? H5T_STD_I32LE : cols[c].kind == 1 ? H5T_IEEE_F64LE : str;
        hid_t mtype = cols[c].kind == 0 ? H5T_NATIVE_INT32 : cols[c].kind == 1 ? H5T_NATIVE_DOUBLE : str;
        hid_t ds;
        hsize_t dim = n, maxdim = H5S_UNLIMITED, chunk = 16;
        int is_note = !strcmp(cols[c].name, "note"), is_inputs = !strcmp(cols[c].name, "inputs");
        int is_words = c >= 9; /* ended, extended: added to files of older writers too */
        int create = fresh;
        if ((is_note && !want_note) || (is_inputs && !want_inputs)) continue;
        if ((is_note || is_inputs || is_words) && !fresh)
            H5E_BEGIN_TRY { create = H5Lexists(g, cols[c].name, H5P_DEFAULT) <= 0; } H5E_END_TRY;
        if (create) {
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
            rc |= st_attr_str(ds, "long_name", cols[c].long_name);
            if (cols[c].units) rc |= st_attr_str(ds, "units", cols[c].units);
            if (cols[c].kind == 1) {
                double nan = NAN;
                rc |= st_attr_write(ds, "_FillValue", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &nan);
            }
            if (cols[c].kind == 1) rc |= st_attr_str(ds, "calendar", "standard");
            if (c == 0) rc |= H5DSset_scale(ds, "segment") < 0 ? -1 : 0;
            else rc |= H5DSattach_scale(ds, seg_scale, 0) < 0 ? -1 : 0;
        } else {
            ds = H5Dopen2(g, cols[c].name, H5P_DEFAULT);
            if (ds < 0 || H5Dset_extent(ds, &dim) < 0) { rc = -1; if (ds >= 0) H5Dclose(ds); break; }
        }
        if (n) {
            enum { WORDS = 160 };
            void *buf = malloc(n * 8);
            char *words = is_words ? malloc(n * WORDS) : NULL;
            if (!buf || (is_words && !words)) { rc = -1; free(buf); H5Dclose(ds); break; }
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
                case 7: ((const char **)buf)[i] = sg->note ? sg->note : ""; break;
                case 8: ((const char **)buf)[i] = sg->inputs ? sg->inputs : ""; break;
                case 9: st_segment_ended(s, i, words + i * WORDS, WORDS); break;
                case 10: st_segment_extended(s, i, words + i * WORDS, WORDS); break;
                }
                if (is_words) ((const char **)buf)[i] = words + i * WORDS;
            }
            if (H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) rc = -1;
            free(buf);
            free(words);
        }
        if (c == 0) seg_scale = ds;
        else H5Dclose(ds);
    }
    if (seg_scale >= 0) H5Dclose(seg_scale);
    H5Tclose(str);
    H5Gclose(g);
    return rc ? rc : write_history(s, file);
}

/* Errors are the caller's to report (one line), so HDF5 prints no stack. */
void st_close_handles(store *s) {
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

/* HDF5 1.10 (Debian 12: 1.10.8) cannot close a file once a flush of its metadata failed
 * (a full disk): the failed flush leaves the metadata cache's skip list enabled, so every
 * later flush, and the flush inside H5Fclose, fails at once ("H5C_set_slist_enabled():
 * slist already enabled?"), however much space is free by then. The failed H5Fclose
 * leaves the file in HDF5's ID table half destroyed, and library termination -- at
 * MPI_Finalize through HDF5's MPI_COMM_SELF attribute, or atexit -- then crashes on it
 * with SIGSEGV in H5F__close_cb (HDFFV-11052). So a command that writes results files
 * starts HDF5 before MPI (no attribute) with its exit handler off: at exit every file
 * the store opened is closed, or is one HDF5 cannot close, and nothing is left for
 * termination to do but that crash. */
void store_library_init(void) {
    H5dont_atexit();
    H5open();
}

/* Closes and removes a view being built that failed (typically: the disk is
 * full). Truncating the doomed file first gives its space back, so the metadata
 * writes of the close succeed when the flush that failed was of raw data; after a
 * failed metadata flush the close fails whatever the space (store_library_init). */
void st_discard_view(store *s, const char *path) {
    if (truncate(path, 0)) { /* the close may then fail; nothing better to do */ }
    if (s->file >= 0) H5E_BEGIN_TRY { H5Fflush(s->file, H5F_SCOPE_GLOBAL); } H5E_END_TRY;
    st_close_handles(s);
    unlink(path);
}

/* The same for OUT.h5 itself after a commit's write failed. With a compacted journal the
 * view holds the only copy of the compacted cells' values, so truncating it would cost
 * them all (recomputed, never wrong, but hours of work). So the reserve file is given up
 * first: its space lets the close's metadata writes succeed, and the view keeps every cell
 * committed before (the failed batch is in the journal, and the next open repairs the view
 * from it). Only when that flush still fails is the view truncated: an empty OUT.h5 does not
 * open, so the next store_open rebuilds it from the journal and the view's readable rest. */
void st_discard_view_keep_name(store *s) {
    if (s->file < 0) return;
    herr_t flushed = -1;
    if (s->have_reserve) {
        st_reserve_release(s);
        H5E_BEGIN_TRY { flushed = H5Fflush(s->file, H5F_SCOPE_GLOBAL); } H5E_END_TRY;
    }
    if (flushed < 0) {
        if (truncate(s->path, 0)) { /* see st_discard_view */ }
        H5E_BEGIN_TRY { H5Fflush(s->file, H5F_SCOPE_GLOBAL); } H5E_END_TRY;
    }
    st_close_handles(s);
}

int st_reserve_create(store *s, as_err *err) {
    /* O_NOFOLLOW (fileio.h): 8 MiB of zeros never go through a planted link */
    int fd = fileio_open_beside(s->reserve_path, O_WRONLY | O_CREAT | O_TRUNC, 0644,
                                "create the disk reserve", err);
    if (fd < 0 && errno == ELOOP) return -1;
    s->have_reserve = fd >= 0 && posix_fallocate(fd, 0, ST_RESERVE_BYTES) == 0;
    if (fd >= 0) close(fd);
    if (!s->have_reserve) unlink(s->reserve_path); /* no reserve: a full disk then costs more */
    return 0;
}

void st_reserve_release(store *s) {
    unlink(s->reserve_path);
    s->have_reserve = 0;
}

hid_t st_file_access(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* Our lock file keeps writers apart; HDF5's locks fail on some cluster FS. */
    H5Pset_file_locking(fapl, 0, 1);
    /* Close everything on H5Fclose even if a handle leaked on an error path. */
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    return fapl;
}

/* The normalizer coordinate's long_name: every name of the kernels' table
 * (met_normalizer_name), "a, b, ... or z". */
static void normalizer_long_name(char *buf, size_t size) {
    int at = snprintf(buf, size, "attention normalizer (");
    for (int z = 0; z < MET_N_NORMALIZERS && at > 0 && (size_t)at < size; z++)
        at += snprintf(buf + at, size - (size_t)at, "%s%s", z == 0 ? "" : z == MET_N_NORMALIZERS - 1 ? " or " : ", ",
                       met_normalizer_name((met_normalizer)z));
    if (at > 0 && (size_t)at < size) snprintf(buf + at, size - (size_t)at, "; docs/metrics.md section 10)");
}

/* window_start[window]: each window's first token, on the window dimension (inside the
 * caller's H5E_BEGIN_TRY). */
static int create_window_start(hid_t file, const store *s) {
    int rc = 0;
    hsize_t dim = s->ax.n_window;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t ds = H5Dcreate2(file, "window_start", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->window_start) < 0)
        rc = -1;
    if (ds >= 0) {
        rc |= st_attr_str(ds, "long_name", "token offset of the window's first token in the text");
        rc |= st_attr_str(ds, "units", "1");
        hid_t scale = H5Dopen2(file, "window", H5P_DEFAULT);
        if (scale < 0 || H5DSattach_scale(ds, scale, 0) < 0) rc = -1;
        if (scale >= 0) H5Dclose(scale);
        H5Dclose(ds);
    }
    return rc;
}

/* status, wall_time, rank, attempts [model][window][L]: the cells' bookkeeping (inside the
 * caller's H5E_BEGIN_TRY). */
static int create_bookkeeping(hid_t file, store *s) {
    double dnan = NAN;
    int32_t minus1 = -1;
    int rc = 0;
    int cdims[3] = {D_MODEL, D_WINDOW, D_L};
    hsize_t shape[3] = {s->ax.n_model, s->ax.n_window, s->ax.n_L};
    hid_t sp = H5Screate_simple(3, shape, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    uint8_t pending = STORE_PENDING;
    H5Pset_fill_value(dcpl, H5T_NATIVE_UINT8, &pending);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC);
    s->status_ds = H5Dcreate2(file, "status", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(sp);
    if (s->status_ds < 0) rc = -1;
    else {
        uint8_t flags[3] = {0, 1, 2};
        rc |= st_attr_write(s->status_ds, "flag_values", H5T_STD_U8LE, H5T_NATIVE_UINT8, 3, flags);
        rc |= st_attr_str(s->status_ds, "flag_meanings", "pending done failed");
        rc |= st_attr_str(s->status_ds, "long_name", "cell status (the truth about which cells are done)");
        rc |= st_attr_str(s->status_ds, "coordinates", ST_MODEL_COORDS);
        for (int i = 0; i < 3; i++) {
            hid_t scale = H5Dopen2(file, dim_names[cdims[i]], H5P_DEFAULT);
            if (scale < 0 || H5DSattach_scale(s->status_ds, scale, (unsigned)i) < 0) rc = -1;
            if (scale >= 0) H5Dclose(scale);
        }
    }
    if (!rc) {
        s->wall_ds = create_var(file, s, "wall_time", CW_F64, cdims, 3, 0, &dnan,
                                "wall-clock time spent computing the cell", "s");
        s->rank_ds = create_var(file, s, "rank", CW_I32, cdims, 3, 0, &minus1,
                                "MPI rank that computed the cell (-1: not computed)", "1");
        s->attempts_ds = create_var(file, s, "attempts", CW_I32, cdims, 3, 0, NULL,
                                    "number of times the cell was dispatched to a worker", "1");
        if (s->wall_ds < 0 || s->rank_ds < 0 || s->attempts_ds < 0) rc = -1;
    }
    return rc;
}

/* Creates a complete, empty HDF5 view at path (fails if it exists). */
int st_create_view(store *s, const char *path, as_err *err) {
    /* H5F_ACC_EXCL is open(O_CREAT | O_EXCL): a symbolic link at path, even one planted
     * after this check, makes it fail rather than be written through; the checks name
     * the link (fileio.h). */
    if (fileio_refuse_link(path, err)) return -1;
    hid_t fapl = st_file_access();
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl); } H5E_END_TRY;
    H5Pclose(fapl);
    if (file < 0 && fileio_refuse_link(path, err)) return -1;
    if (file < 0) return as_fail(err, "%s: cannot create HDF5 file", path);
    s->file = file;
    int rc = 0;
    size_t nw = s->ax.n_window;
    int32_t *widx = malloc((nw ? nw : 1) * sizeof *widx);
    if (!widx) rc = -1;
    for (size_t i = 0; i < nw && widx; i++) widx[i] = (int32_t)i;
    char norm_long_name[256];
    normalizer_long_name(norm_long_name, sizeof norm_long_name);
    hid_t str = st_utf8_vlen();
    H5E_BEGIN_TRY {
        if (!rc) rc |= create_coord(file, "model", str, str, s->ax.n_model, s->model_name,
                                    "model (the basename of its directory)", NULL);
        if (!rc) rc |= st_create_model_coords(file, s);
        if (!rc) rc |= create_coord(file, "window", H5T_STD_I32LE, H5T_NATIVE_INT32, nw, widx,
                                    "text window index (first token at window_start)", "1");
        rc |= create_coord(file, "L", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_L, s->Lv,
                           "context length in tokens", "1");
        rc |= create_coord(file, "N", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_N, s->Nv,
                           "number of top-weighted keys kept (top-N)", "1");
        rc |= create_coord(file, "T", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s->ax.n_T, s->Tv,
                           is_scaled(s) ? "temperature dividing the scaled logits q.k / sqrt(d_head) (GPT-2's own attention: T = 1)"
                                  : "temperature dividing the raw logits q.k (GPT-2's own attention: T = 8)", "1");
        rc |= create_coord(file, "eps", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s->ax.n_eps, s->epsv,
                           "size of the logit perturbation of the finite-difference gradient", "1");
        rc |= create_coord(file, "normalizer", str, str, s->ax.n_norm, s->normv, norm_long_name, NULL);
        rc |= create_coord(file, "layer", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_layer,
                           s->layerv, "transformer block (0-based)", "1");
        rc |= create_coord(file, "head", H5T_STD_I32LE, H5T_NATIVE_INT32, s->ax.n_head, s->headv,
                           "attention head within the block (0-based)", "1");
        for (int v = 0; v < cw_nvars(&s->lay) && !rc; v++) {
            int dims[9];
            int rank = var_dims((cr_var)v, dims);
            float fnan = NAN;
            double dnan = NAN;
            int32_t ifill = STORE_INT_FILL;
            const void *fill = cw_var_type[v] == CW_F32 ? (const void *)&fnan
                               : cw_var_type[v] == CW_F64 ? (const void *)&dnan
                                                                : (const void *)&ifill;
            s->metric_ds[v] = create_var(file, s, cr_var_name((cr_var)v), cw_var_type[v], dims,
                                         rank, 1, fill, metric_long_name(s, (cr_var)v),
                                         st_metric_defs[v].units);
            if (s->metric_ds[v] < 0) rc = -1;
        }
        if (!rc) rc |= st_create_head_valid(file, s);
        if (!rc) rc |= create_window_start(file, s);
        if (!rc) rc |= create_bookkeeping(file, s);
        if (!rc) rc |= st_write_root_attrs(s, file);
        if (!rc) rc |= st_write_segments(s, file);
    } H5E_END_TRY;
    H5Tclose(str);
    free(widx);
    if (rc) {
        st_discard_view(s, path);
        return as_fail(err, "%s: cannot lay out the results file (HDF5 error)", path);
    }
    return 0;
}

/* Opens the view read-write and checks its axes. 0 ok, 1 unusable or other
 * axes (rebuild), -1 never. */
int st_open_view(store *s) {
    hid_t fapl = st_file_access();
    int rc = 0;
    H5E_BEGIN_TRY {
        s->file = H5Fopen(s->path, H5F_ACC_RDWR, fapl);
        if (s->file < 0) rc = 1;
        for (int v = 0; v < cw_nvars(&s->lay) && !rc; v++) {
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
        if (!rc) rc = st_models_differ(s, s->file);
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
    if (rc) st_close_handles(s);
    return rc;
}

int st_write_cell_values(store *s, size_t m, size_t w, size_t l, const unsigned char *packed) {
    int rc = 0;
    for (int v = 0; v < cw_nvars(&s->lay) && !rc; v++) {
        int dims[9];
        int rank = var_dims((cr_var)v, dims);
        hsize_t start[9] = {m, w, l}, count[9] = {1, 1, 1};
        for (int i = CELL_DIMS; i < rank; i++) start[i] = 0, count[i] = axis_len(s, dims[i]);
        hid_t fs = H5Dget_space(s->metric_ds[v]);
        /* Memory space of the selection's own shape: HDF5 then maps the cell
         * to its chunk in one piece instead of element by element. */
        hid_t ms = H5Screate_simple(rank, count, NULL);
        if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dwrite(s->metric_ds[v], mem_type(cw_var_type[v]), ms, fs, H5P_DEFAULT,
                     packed + s->var_offset[v]) < 0)
            rc = -1;
        H5Sclose(ms);
        H5Sclose(fs);
    }
    return rc;
}

int st_read_cell_values(const store *s, hid_t f, size_t m, size_t w, size_t l, unsigned char *packed) {
    int rc = 0;
    for (int v = 0; v < cw_nvars(&s->lay) && !rc; v++) {
        int dims[9];
        int rank = var_dims((cr_var)v, dims);
        hsize_t start[9] = {m, w, l}, count[9] = {1, 1, 1};
        for (int i = CELL_DIMS; i < rank; i++) start[i] = 0, count[i] = axis_len(s, dims[i]);
        hid_t ds = H5Dopen2(f, cr_var_name((cr_var)v), H5P_DEFAULT);
        if (ds < 0) return -1;
        hid_t fs = H5Dget_space(ds);
        hid_t ms = H5Screate_simple(rank, count, NULL);
        /* a file written before the model axis: (window, L, ...), one model */
        hsize_t *fstart = start, *fcount = count;
        if (fs >= 0 && H5Sget_simple_extent_ndims(fs) == rank - 1) {
            if (m != 0) rc = -1;
            fstart = start + 1, fcount = count + 1;
        }
        if (rc || fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, fstart, NULL, fcount, NULL) < 0 ||
            H5Dread(ds, mem_type(cw_var_type[v]), ms, fs, H5P_DEFAULT,
                    packed + s->var_offset[v]) < 0)
            rc = -1;
        H5Sclose(ms);
        if (fs >= 0) H5Sclose(fs);
        H5Dclose(ds);
    }
    return rc;
}

static int write_element(hid_t ds, hid_t mtype, size_t m, size_t w, size_t l, const void *value) {
    hsize_t start[3] = {m, w, l}, count[3] = {1, 1, 1}, one = 1;
    hid_t fs = H5Dget_space(ds);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    int rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                     H5Dwrite(ds, mtype, ms, fs, H5P_DEFAULT, value) < 0
                 ? -1 : 0;
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

int st_write_bookkeeping_cell(store *s, size_t m, size_t w, size_t l) {
    size_t c = st_cell_at(s, m, w, l);
    int rc = 0;
    rc |= write_element(s->status_ds, H5T_NATIVE_UINT8, m, w, l, &s->status[c]);
    rc |= write_element(s->wall_ds, H5T_NATIVE_DOUBLE, m, w, l, &s->wall_time[c]);
    rc |= write_element(s->rank_ds, H5T_NATIVE_INT32, m, w, l, &s->rank[c]);
    rc |= write_element(s->attempts_ds, H5T_NATIVE_INT32, m, w, l, &s->attempts[c]);
    return rc;
}

int st_write_bookkeeping_all(store *s) {
    int rc = 0;
    rc |= H5Dwrite(s->status_ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->status) < 0;
    rc |= H5Dwrite(s->wall_ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->wall_time) < 0;
    rc |= H5Dwrite(s->rank_ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->rank) < 0;
    rc |= H5Dwrite(s->attempts_ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->attempts) < 0;
    return rc ? -1 : 0;
}
