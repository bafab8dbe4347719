/* store_fixture.h -- small axes and synthetic cell blocks for the store tests.
 *
 * The value at flat position k of variable v in the block of cell (window w,
 * L value Lv) is v*10000 + w*1000 + Lv + k/16 for float variables and
 * v*10000 + w*1000 + Lv + k for the int32 ones (rows_used, crit_N); k = 0 of
 * dist_bound is NaN; crit_N_censored is 0 (what packing derives: every crit_N is found). All of these are exact in float32, so readers can compare
 * exactly; tests/integration/test_store_xarray.py recomputes the same formula. */
#ifndef ATTNSWEEP_STORE_FIXTURE_H
#define ATTNSWEEP_STORE_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cellresult.h"
#include "store.h"

static const int64_t fx_window_start[] = {0, 512, 1024, 1536};
static const int32_t fx_L[] = {16, 32, 64};
static const int32_t fx_N[] = {1, 2, 4};
static const double fx_T[] = {1.0, 8.0};
static const double fx_eps[] = {1e-3, 1e-2};
static const char *const fx_norm[] = {"softmax", "sparsemax"};
static const int32_t fx_layer[] = {0, 1};
static const int32_t fx_head[] = {0, 1, 2};

/* n_window windows (<= 4) and n_L L values (<= 3). */
static inline store_axes fx_axes(size_t n_window, size_t n_L) {
    store_axes a = {n_window, fx_window_start, n_L, fx_L, 3, fx_N, 2, fx_T, 2, fx_eps,
                    2, fx_norm, 2, fx_layer, 3, fx_head, .n_model = 0}; /* one model (store.h) */
    return a;
}

static inline store_provenance fx_prov(const char *config_text, const char *sha) {
    store_provenance p = {0};
    p.config_text = config_text;
    p.config_sha256 = sha;
    p.model_dir = "/models/gpt2";
    p.weights_sha256 = "ab12";
    p.text_path = "/data/text.txt";
    p.text_sha256 = "cd34";
    p.tokenizer_files = "vocab.json merges.txt";
    p.vectors = 0;
    p.vectors_name = "value";
    p.rows = 0;
    p.rows_name = "visible";
    p.ks_alpha = 0.05;
    p.seed = 12345;
    p.mpi_library = "Open MPI v4.1.4 (test)";
    p.openblas_config = "OpenBLAS 0.3.21 (test)";
    p.hosts = "testhost";
    p.mpi_size = 4;
    p.slurm_job_id = "";
    return p;
}

static inline int fx_is_int(int v) { return v == CR_ROWS_USED || v == CR_CRIT_N || v == CR_CRIT_N_CENSORED; }

static inline double fx_value(int v, int w, int Lv, size_t k) {
    if (v == CR_DIST_BOUND && k == 0) return NAN;
    if (v == CR_CRIT_N_CENSORED) return 0; /* what packing derives: every fixture crit_N is found */
    double base = v * 10000.0 + w * 1000.0 + Lv;
    return fx_is_int(v) ? base + (double)k : base + (double)k / 16.0;
}

static inline void fx_fill_block(double *block, const cr_layout *lay, int w, int Lv) {
    for (int v = 0; v < CR_WALL_TIME; v++)
        for (size_t k = 0; k < lay->count[v]; k++) block[lay->offset[v] + k] = fx_value(v, w, Lv, k);
    block[lay->offset[CR_WALL_TIME]] = 1.5 + w;
    block[lay->offset[CR_RANK]] = 1 + (w + Lv) % 3;
}

#endif
