/* sweep.c -- see sweep.h. */
#include "sweep.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cell.h"
#include "config.h"
#include "grid.h"
#include "model.h"
#include "scheduler.h"
#include "sha256.h"
#include "store.h"
#include "textsrc.h"

typedef struct {
    as_config cfg;
    as_grid grid;
    int cfg_ok, grid_ok;
    int32_t *tokens;
    int64_t n_tokens;
    gpt2_model model;
    int model_ok;
    cell_worker worker;
    int worker_ok;
    store *out;
    char out_path[4096];         /* the config's output, or this shard's */
    int rank, size;
} sweep_state;

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Every rank learns whether all ranks succeeded. */
static int all_ok(MPI_Comm comm, int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    return all;
}

/* --- step 2: the text, loaded on rank 0 and broadcast --------------------- */

static int load_text(sweep_state *st, MPI_Comm comm, char *text_sha, as_err *err) {
    int ok = 1;
    if (st->rank == 0) {
        textsrc ts;
        textsrc_spec spec = {.path = st->cfg.text_path,
                             .format = st->cfg.text_format == AS_TEXT_TOKENS ? TEXTSRC_TOKENS
                                                                             : TEXTSRC_TEXT,
                             .strip_gutenberg = st->cfg.strip_gutenberg};
        ok = textsrc_load(&ts, &spec, st->cfg.model_dir, st->cfg.model.vocab_size, err) == 0;
        if (ok) {
            ok = textsrc_check_fit(&ts, st->cfg.windows_count, st->cfg.windows_offset,
                                   st->cfg.windows_stride, config_max_L(&st->cfg), err) == 0;
            if (ok) ok = sha256_file_hex(text_sha, st->cfg.text_path, err) == 0;
            st->tokens = ts.tokens, st->n_tokens = (int64_t)ts.n_tokens;
            ts.tokens = NULL;
            textsrc_free(&ts);
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    if (!ok) return -1;
    MPI_Bcast(&st->n_tokens, 1, MPI_INT64_T, 0, comm);
    if (st->rank != 0) {
        st->tokens = malloc((size_t)st->n_tokens * sizeof(int32_t));
        if (!st->tokens) ok = 0;
    }
    if (!all_ok(comm, ok)) return as_fail(err, "out of memory for %lld token ids", (long long)st->n_tokens);
    /* Broadcast in pieces: a count argument is an int. */
    for (int64_t at = 0; at < st->n_tokens; at += 1 << 28) {
        int64_t n = st->n_tokens - at < (1 << 28) ? st->n_tokens - at : (1 << 28);
        MPI_Bcast(st->tokens + at, (int)n, MPI_INT32_T, 0, comm);
    }
    return 0;
}

/* --- step 4: the store ----------------------------------------------------- */

static void hosts_list(char *out, size_t size, MPI_Comm comm, int rank, int nranks) {
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *all = rank == 0 ? calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               comm);
    if (rank != 0) return;
    out[0] = 0;
    for (int r = 0; all && r < nranks; r++) {
        const char *h = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strcmp(h, all + (size_t)q * MPI_MAX_PROCESSOR_NAME);
        if (seen) continue;
        if (out[0]) strncat(out, ",", size - strlen(out) - 1);
        strncat(out, h, size - strlen(out) - 1);
    }
    free(all);
}

int sweep_shard_path(char *out, size_t size, const char *output, int shard_index, int shard_count) {
    size_t n = strlen(output);
    size_t stem = n;
    if (n > 3 && !strcmp(output + n - 3, ".h5")) stem = n - 3;
    else if (n > 3 && !strcmp(output + n - 3, ".nc")) stem = n - 3;
    int w = snprintf(out, size, "%.*s.shard-%d-of-%d%s", (int)stem, output, shard_index,
                     shard_count, output + stem);
    return w < 0 || (size_t)w >= size ? -1 : 0;
}

/* A changed config may resume only when it adds windows or L values. */
static int check_config_change(const as_config *cfg, const char *path, int *flags, as_err *err) {
    char *old_text = NULL, *old_sha = NULL;
    int found = store_peek_config(path, &old_text, &old_sha, err);
    if (found < 0) return -1;
    int rc = 0;
    if (found && strcmp(old_sha, cfg->sha256)) {
        as_config_diff d;
        if (config_diff(&d, old_text, cfg->canonical, err)) {
            rc = -1;
        } else if (d.verdict == AS_DIFF_REFUSED || d.verdict == AS_DIFF_PATH) {
            char what[768];
            config_diff_describe(&d, what, sizeof what);
            rc = as_fail(err,
                         "%s was made with another config (%s); only added windows or L values "
                         "can extend it: restore the config, or choose a new output",
                         path, what);
        } else {
            *flags |= STORE_ALLOW_CONFIG_CHANGE;
        }
    }
    free(old_text);
    free(old_sha);
    return rc;
}

static int open_store(sweep_state *st, MPI_Comm comm, const sweep_opts *opts, const char *text_sha,
                      as_err *err) {
    char hosts[4096];
    hosts_list(hosts, sizeof hosts, comm, st->rank, st->size);
    if (st->rank != 0) return 0;
    const as_config *c = &st->cfg;
    const as_axes *a = &c->axes;
    const char *norm_names[8];
    for (size_t z = 0; z < a->nNorm && z < 8; z++) norm_names[z] = config_normalizer_name(a->normalizer[z]);
    store_axes ax = {.n_window = st->grid.n_windows, .window_start = st->grid.window_start,
                     .n_L = a->nL, .L = a->L, .n_N = a->nN, .N = a->N, .n_T = a->nT, .T = a->T,
                     .n_eps = a->nEps, .eps = a->eps, .n_norm = a->nNorm, .normalizer = norm_names,
                     .n_layer = a->nLayers, .layer = a->layers, .n_head = a->nHeads, .head = a->heads};
    char mpi_lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(mpi_lib, &len);
    char tok_files[1024];
    snprintf(tok_files, sizeof tok_files, "%s", c->text_format == AS_TEXT_TOKENS
                                                    ? "(pre-tokenized text)"
                                                    : "vocab.json merges.txt of the model directory");
    store_provenance prov = {
        .config_text = c->canonical, .config_sha256 = c->sha256, .model_dir = c->model_dir,
        .weights_sha256 = st->model.weights_sha256, .text_path = c->text_path,
        .text_sha256 = text_sha, .tokenizer_files = tok_files, .vectors = c->vectors,
        .rows = c->rows, .vectors_name = c->vectors == AS_VECTORS_RESID ? "resid" : "value",
        .rows_name = c->rows == AS_ROWS_FULL_ROW ? "full_row" : "visible", .ks_alpha = c->ks_alpha, .seed = (uint64_t)c->seed,
        .mpi_library = mpi_lib, .openblas_config = openblas_get_config(), .hosts = hosts,
        .mpi_size = st->size, .slurm_job_id = getenv("SLURM_JOB_ID")};
    int flags = 0;
    if (!opts->fresh && check_config_change(c, st->out_path, &flags, err)) return -1;
    st->out = store_open(st->out_path, &ax, &prov, opts->fresh ? STORE_NEW : STORE_RESUME, flags, err);
    return st->out ? 0 : -1;
}

/* --- step 5: scheduler callbacks ------------------------------------------ */

static int compute_cell(void *ctx, int64_t cell, double *block_out, as_err *err) {
    sweep_state *st = ctx;
    size_t w, li;
    grid_cell_of(&st->grid, (size_t)cell, &w, &li);
    size_t L = (size_t)st->cfg.axes.L[li];
    double *blocks[1] = {block_out};
    return cell_compute(&st->worker, (int64_t)w, st->tokens + st->grid.window_start[w], &L, 1,
                        blocks, err);
}

static int commit_cells(void *ctx, const int64_t *cells, double *const *blocks, const int *status,
                        size_t n, as_err *err) {
    sweep_state *st = ctx;
    store_cell sc[64];
    const double *bl[64];
    size_t rank_at = st->worker.layout.offset[CR_RANK], wall_at = st->worker.layout.offset[CR_WALL_TIME];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 64 ? n - done : 64;
        double now = wall_now();
        for (size_t i = 0; i < k; i++) {
            const double *b = blocks[done + i];
            size_t w, li;
            grid_cell_of(&st->grid, (size_t)cells[done + i], &w, &li);
            int ok = status[done + i] == SCHED_CELL_DONE;
            double wall = ok ? b[wall_at] : NAN;
            sc[i] = (store_cell){.window = w, .l_index = li, .status = ok ? STORE_DONE : STORE_FAILED,
                                 .rank = ok ? (int)b[rank_at] : -1,
                                 .t_start = ok ? now - wall : now, .t_end = now, .wall_time = wall};
            bl[i] = ok ? b : NULL;
        }
        if (store_commit_batch(st->out, sc, bl, k, err)) return -1;
        done += k;
    }
    return 0;
}

static void cell_dispatched(void *ctx, int64_t cell, int worker_rank) {
    sweep_state *st = ctx;
    size_t w, li;
    grid_cell_of(&st->grid, (size_t)cell, &w, &li);
    as_err ignored;
    /* An attempt that fails to journal is only a miscount; the commit that
     * follows reports real I/O trouble. */
    (void)store_mark_dispatched(st->out, w, li, worker_rank, wall_now(), &ignored);
}

/* --- the whole run ---------------------------------------------------------- */

static void state_free(sweep_state *st) {
    if (st->worker_ok) cell_worker_free(&st->worker);
    if (st->model_ok) model_free(&st->model);
    free(st->tokens);
    if (st->grid_ok) grid_free(&st->grid);
    if (st->cfg_ok) config_free(&st->cfg);
}

int sweep_run(MPI_Comm comm, const sweep_opts *opts, sweep_summary *sum, as_err *err) {
    double t0 = wall_now();
    sweep_state st;
    memset(&st, 0, sizeof st);
    memset(sum, 0, sizeof *sum);
    MPI_Comm_rank(comm, &st.rank);
    MPI_Comm_size(comm, &st.size);
    as_err local = {{0}};
    as_err *e = st.rank == 0 ? err : &local;
    int rc = -1;

    /* 1. config and grid: deterministic, so every rank agrees */
    st.cfg_ok = config_load(&st.cfg, opts->config_path, opts->sets, opts->n_sets, e) == 0;
    if (st.cfg_ok) st.grid_ok = grid_init(&st.grid, &st.cfg, e) == 0;
    if (!all_ok(comm, st.cfg_ok && st.grid_ok)) goto out;
    snprintf(st.out_path, sizeof st.out_path, "%s", st.cfg.output);
    if (opts->shard_count > 0 &&
        sweep_shard_path(st.out_path, sizeof st.out_path, st.cfg.output, opts->shard_index,
                         opts->shard_count)) {
        as_fail(e, "output: '%s' is too long for a shard name", st.cfg.output);
        goto out;
    }
    snprintf(sum->output, sizeof sum->output, "%s", st.out_path);
    openblas_set_num_threads(st.cfg.blas_threads);

    /* 2. text */
    char text_sha[65] = "";
    if (load_text(&st, comm, text_sha, e)) goto out;

    /* 3. model: every rank reads it */
    st.model_ok = model_load(&st.model, st.cfg.model_dir, e) == 0;
    if (!all_ok(comm, st.model_ok)) {
        if (st.rank == 0 && st.model_ok) as_fail(e, "the model failed to load on another rank");
        goto out;
    }

    /* 4. store, and the cells still to do */
    int ok = open_store(&st, comm, opts, text_sha, e) == 0;
    if (!all_ok(comm, ok)) goto out;
    int64_t *todo = NULL;
    size_t ntodo = 0;
    if (st.rank == 0) {
        todo = malloc(st.grid.n_cells * sizeof *todo);
        for (size_t i = 0; todo && i < st.grid.n_cells; i++) {
            size_t cell = st.grid.dispatch[i], w, li;
            if (opts->shard_count > 0 && (int)(i % (size_t)opts->shard_count) != opts->shard_index)
                continue;
            grid_cell_of(&st.grid, cell, &w, &li);
            if (store_cell_status(st.out, w, li) != STORE_DONE) todo[ntodo++] = (int64_t)cell;
        }
        size_t mine = 0;
        for (size_t i = 0; i < st.grid.n_cells; i++)
            mine += opts->shard_count <= 0 || (int)(i % (size_t)opts->shard_count) == opts->shard_index;
        sum->total = mine;
        sum->done_before = mine - ntodo;
        if (!todo) ok = 0, as_fail(e, "out of memory for the cell list");
    }

    /* 5. compute: workers (and rank 0 when alone) need a cell worker */
    int computes = st.size == 1 || st.rank != 0;
    if (ok && computes) st.worker_ok = cell_worker_init(&st.worker, &st.model, &st.cfg, st.rank, e) == 0;
    if (st.worker_ok) st.worker.should_stop = sched_should_stop;
    if (st.rank == 0 && !computes) cr_layout_init(&st.worker.layout, st.cfg.axes.nN, st.cfg.axes.nT,
                                                  st.cfg.axes.nEps, st.cfg.axes.nNorm,
                                                  st.cfg.axes.nLayers, st.cfg.axes.nHeads);
    if (!all_ok(comm, ok && (!computes || st.worker_ok))) {
        if (st.rank == 0 && !e->msg[0]) as_fail(e, "a worker rank could not allocate its memory");
        if (st.out) store_close(st.out, "failed", &local), st.out = NULL;
        free(todo);
        goto out;
    }
    sched_opts so = {.block_doubles = st.worker.layout.total, .compute = compute_cell,
                     .compute_ctx = &st, .commit = commit_cells, .dispatched = cell_dispatched,
                     .master_ctx = &st, .commit_every = (size_t)st.cfg.commit_every,
                     .progress_every_s = opts->progress_every_s};
    sched_stats stats = {0};
    int srun = sched_run(comm, todo, ntodo, &so, &stats, e);
    free(todo);

    /* 6. close */
    if (st.rank == 0) {
        sum->done = stats.done;
        sum->failed = stats.failed;
        const char *state = srun < 0 ? "failed" : srun == SCHED_INTERRUPTED ? "interrupted" : "finished";
        as_err close_err;
        if (store_close(st.out, state, srun < 0 ? &close_err : e) && srun >= 0) srun = -1;
        st.out = NULL;
    }
    if (srun < 0) goto out;
    rc = srun == SCHED_INTERRUPTED ? SWEEP_INTERRUPTED
         : (st.rank == 0 && stats.failed) ? SWEEP_CELLS_FAILED : SWEEP_COMPLETE;
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
out:
    sum->elapsed_s = wall_now() - t0;
    state_free(&st);
    return rc;
}
