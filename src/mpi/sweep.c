/* sweep.c -- see sweep.h. */
#include "sweep.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "cell.h"
#include "config.h"
#include "grid.h"
#include "model.h"
#include "plan.h"
#include "scheduler.h"
#include "sha256.h"
#include "clock.h"
#include "fileio.h"
#include "signals.h"
#include "store.h"
#include "textsrc.h"
#include "weights.h"

#include "sweep_int.h"

/* Every rank learns whether all ranks succeeded. */
static int all_ok(MPI_Comm comm, int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    return all;
}

/* Every rank leaves a sched_run with the same outcome: an error anywhere (rank 0's last
 * commit can fail after it told the workers the run was complete), else an interruption,
 * else complete. A rank that went on alone would wait for ever in the next model's load. */
static int agreed_outcome(MPI_Comm comm, int srun) {
    int mine = srun < 0 ? 2 : srun == SCHED_INTERRUPTED ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, comm);
    return all == 2 ? -1 : all == 1 ? SCHED_INTERRUPTED : SCHED_COMPLETE;
}

/* --- step 2: the text, loaded on rank 0 and broadcast --------------------- */

static int load_text(sweep_state *st, MPI_Comm comm, as_err *err) {
    int ok = 1;
    if (st->rank == 0) {
        textsrc ts;
        textsrc_spec spec = {.path = st->cfg.text_path,
                             .format = st->cfg.text_format == AS_TEXT_TOKENS ? TEXTSRC_TOKENS
                                                                             : TEXTSRC_TEXT,
                             .strip_gutenberg = st->cfg.strip_gutenberg,
                             .start_at = st->cfg.start_at,
                             .start_occurrence = st->cfg.start_occurrence};
        ok = textsrc_load(&ts, &spec, st->cfg.model_dir, st->cfg.model.vocab_size, err) == 0;
        if (ok) {
            ok = textsrc_check_fit(&ts, st->cfg.windows_count, st->cfg.windows_offset,
                                   st->cfg.windows_stride, config_max_L(&st->cfg), err) == 0;
            /* digests of the bytes just loaded, not of a second read */
            snprintf(st->text_sha, sizeof st->text_sha, "%s", ts.sha256);
            snprintf(st->vocab_sha, sizeof st->vocab_sha, "%s", ts.vocab_sha256);
            snprintf(st->merges_sha, sizeof st->merges_sha, "%s", ts.merges_sha256);
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

/* --- step 3: the models (weights.h: one model's weights per node at a time) --- */

/* --- step 4: the store: sweep_store.c --------------------------------------- */

/* --- step 5: scheduler callbacks ------------------------------------------ */

/* The L values of unit u, ascending; returns how many. */
static size_t unit_cuts(const sweep_state *st, const sweep_unit *u, size_t *cuts, size_t *l_index) {
    size_t n = 0;
    for (size_t k = 0; k < UNIT_MAX_CUTS; k++)
        if (u->l_mask >> k & 1) {
            size_t li = (size_t)u->l_lo + k;
            if (l_index) l_index[n] = li;
            cuts[n++] = (size_t)st->cfg.axes.L[li];
        }
    return n;
}

/* A unit's message holds one slot per cell: wall_time and rank as doubles, then the
 * cell packed as the file stores it (store_pack_cell: float32 means, int32 counts,
 * float64 KS), padded to a double. When the output is compressed the packed cell is then
 * deflated (store_deflate_cell: the chunk bytes HDF5's shuffle + deflate stores), so the
 * master writes it with no filter work of its own (README, Performance); the slot is
 * then sized for the worst case and zero past the payload. The metrics are accumulated in double and narrowed
 * here once, by the same code the master used before, so the file's bytes are the same;
 * the master receives half the bytes and writes them without converting. */
static size_t slot_doubles(const cr_layout *lay, int deflate) {
    size_t bytes = store_pack_bytes(lay), dz = store_deflate_bound(lay);
    if (deflate && dz > bytes) bytes = dz;
    return 2 + (bytes + sizeof(double) - 1) / sizeof(double);
}

static int compute_unit(void *ctx, int64_t unit, double *block_out, as_err *err) {
    sweep_state *st = ctx;
    const sweep_unit *u = &st->units[unit];
    size_t cuts[UNIT_MAX_CUTS];
    double *blocks[UNIT_MAX_CUTS];
    size_t n = unit_cuts(st, u, cuts, NULL), total = st->worker.layout.total;
    if (!st->scratch && !(st->scratch = malloc(st->unit_cells * total * sizeof *st->scratch)))
        return as_fail(err, "out of memory for a unit's %zu blocks", st->unit_cells);
    for (size_t k = 0; k < n; k++) blocks[k] = st->scratch + k * total;
    double t0 = as_monotonic_s();
    int rc = cell_compute(&st->worker, u->window, st->tokens + st->grid.window_start[u->window], cuts,
                          n, blocks, err);
    size_t pb = store_pack_bytes(&st->worker.layout), room = (st->slot_doubles - 2) * sizeof(double);
    if (rc == 0 && st->deflate && !st->pack_buf &&
        (!(st->pack_buf = malloc(pb ? pb : 1)) || !(st->dz_scratch = malloc(pb ? pb : 1))))
        rc = as_fail(err, "out of memory for deflating a cell (%zu bytes)", pb);
    for (size_t k = 0; k < n && rc == 0; k++) {
        double *slot = block_out + k * st->slot_doubles;
        slot[0] = blocks[k][st->worker.layout.offset[CR_WALL_TIME]];
        slot[1] = blocks[k][st->worker.layout.offset[CR_RANK]];
        slot[st->slot_doubles - 1] = 0; /* the padding, so a message is deterministic */
        unsigned char *out = (unsigned char *)(slot + 2);
        if (!st->deflate) {
            store_pack_cell(&st->worker.layout, blocks[k], out);
            continue;
        }
        double tz = as_monotonic_s();
        size_t len = 0;
        store_pack_cell(&st->worker.layout, blocks[k], st->pack_buf);
        rc = store_deflate_cell(&st->worker.layout, st->pack_buf, out, room, &len, st->dz_scratch,
                                st->deflate == 2, err);
        if (rc == 0) memset(out + len, 0, room - len);
        st->timing[TM_DEFLATE] += as_monotonic_s() - tz;
        st->timing[TM_DEFLATE_IN] += (double)pb, st->timing[TM_DEFLATE_OUT] += (double)len;
    }
    st->timing[TM_COMPUTE] += as_monotonic_s() - t0;
    st->timing[TM_UNITS] += 1;
    return rc;
}

/* Up to STORE_BATCH cells go to the store in one call (one journal write +
 * fsync and one HDF5 flush), so a commit costs about its bytes, not its
 * count; a unit's cells stay together in one call. */
enum { STORE_BATCH = 64 };

static int commit_held(sweep_state *st, const store_cell *sc, const unsigned char *const *pk, size_t n,
                       as_err *err) {
    return st->deflate ? store_commit_deflated(st->out, sc, pk, n, err)
                       : store_commit_packed(st->out, sc, pk, n, err);
}

static int commit_units(void *ctx, const int64_t *units, double *const *blocks, const int *status,
                        size_t n, as_err *err) {
    sweep_state *st = ctx;
    double t0 = as_monotonic_s(), c0 = as_thread_cpu_s();
    store_cell sc[STORE_BATCH];
    const unsigned char *pk[STORE_BATCH];
    size_t held = 0;
    for (size_t i = 0; i < n; i++) {
        const sweep_unit *u = &st->units[units[i]];
        size_t cuts[UNIT_MAX_CUTS], lis[UNIT_MAX_CUTS];
        size_t k = unit_cuts(st, u, cuts, lis);
        if (held + k > STORE_BATCH) {
            if (commit_held(st, sc, pk, held, err)) return -1;
            held = 0;
        }
        int ok = status[i] == SCHED_CELL_DONE;
        double now = as_wall_s();
        for (size_t c = 0; c < k; c++) {
            const double *b = blocks[i] + c * st->slot_doubles;
            double wall = ok ? b[0] : NAN, rk = ok ? b[1] : NAN;
            sc[held] = (store_cell){.model = (size_t)u->model, .window = (size_t)u->window, .l_index = lis[c],
                                    .status = ok ? STORE_DONE : STORE_FAILED,
                                    .rank = isnan(rk) || rk < 0 || rk > 2147483647.0 ? -1 : (int)rk,
                                    .t_start = ok ? now - wall * (double)k : now, .t_end = now,
                                    .wall_time = wall};
            pk[held++] = ok ? (const unsigned char *)(b + 2) : NULL;
        }
        if (ok) st->cells_done += k, st->units_done++;
        else st->cells_failed += k, st->units_failed++;
        st->timing[TM_COMMIT_CELLS] += (double)k;
    }
    if (held && commit_held(st, sc, pk, held, err)) return -1;
    st->timing[TM_COMMIT] += as_monotonic_s() - t0;
    st->timing[TM_COMMIT_CPU] += as_thread_cpu_s() - c0;
    return 0;
}

static void unit_dispatched(void *ctx, int64_t unit, int worker_rank) {
    sweep_state *st = ctx;
    const sweep_unit *u = &st->units[unit];
    size_t cuts[UNIT_MAX_CUTS], lis[UNIT_MAX_CUTS];
    size_t k = unit_cuts(st, u, cuts, lis);
    double now = as_wall_s();
    as_err ignored;
    /* An attempt that fails to journal is only a miscount; the commit that
     * follows reports real I/O trouble. */
    for (size_t c = 0; c < k; c++)
        (void)store_mark_dispatched(st->out, (size_t)u->model, (size_t)u->window, lis[c], worker_rank,
                                    now, &ignored);
}

/* Rank 0: groups the pending cells (model-major, then in dispatch order, largest L
 * first; todo[i] = model * n_cells + cell) into one unit per window of a model (per 64 L
 * values), ordered by model and then by their largest L. */
static int build_units(sweep_state *st, const int64_t *todo, size_t ntodo, as_err *err) {
    size_t chunks = (st->grid.n_L + UNIT_MAX_CUTS - 1) / UNIT_MAX_CUTS;
    size_t nm = st->cfg.n_model;
    st->model_units = calloc(nm + 1, sizeof *st->model_units);
    if (!st->model_units) return as_fail(err, "out of memory");
    int64_t *unit_of = malloc(nm * st->grid.n_windows * chunks * sizeof *unit_of);
    st->units = malloc((ntodo ? ntodo : 1) * sizeof *st->units);
    if (!unit_of || !st->units) {
        free(unit_of);
        return as_fail(err, "out of memory for the list of %zu cells", ntodo);
    }
    for (size_t i = 0; i < nm * st->grid.n_windows * chunks; i++) unit_of[i] = -1;
    st->n_units = 0;
    for (size_t i = 0; i < ntodo; i++) {
        size_t w, li, m = (size_t)todo[i] / st->grid.n_cells;
        grid_cell_of(&st->grid, (size_t)todo[i] % st->grid.n_cells, &w, &li);
        size_t key = (m * st->grid.n_windows + w) * chunks + li / UNIT_MAX_CUTS;
        if (unit_of[key] < 0) {
            unit_of[key] = (int64_t)st->n_units;
            st->model_units[m + 1] = st->n_units + 1;
            st->units[st->n_units++] = (sweep_unit){.model = (int64_t)m, .window = (int64_t)w,
                                                    .l_lo = (int64_t)(li / UNIT_MAX_CUTS * UNIT_MAX_CUTS),
                                                    .l_mask = 0};
        }
        sweep_unit *u = &st->units[unit_of[key]];
        u->l_mask |= 1ull << (li - (size_t)u->l_lo);
    }
    free(unit_of);
    /* todo is model-major, so each model's units are contiguous: fill the gaps of
     * models with no unit */
    for (size_t m = 1; m <= nm; m++)
        if (st->model_units[m] < st->model_units[m - 1]) st->model_units[m] = st->model_units[m - 1];
    return 0;
}

/* Every rank gets rank 0's units. */
static int share_units(sweep_state *st, MPI_Comm comm, as_err *err) {
    uint64_t n = st->n_units;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm);
    if (st->rank != 0) {
        st->n_units = (size_t)n;
        st->units = malloc((n ? n : 1) * sizeof *st->units);
    }
    if (st->rank != 0) st->model_units = calloc(st->cfg.n_model + 1, sizeof *st->model_units);
    if (!all_ok(comm, st->units != NULL && st->model_units != NULL))
        return as_fail(err, "out of memory for %zu units", (size_t)n);
    for (uint64_t at = 0; at < n; at += 1 << 24) {
        uint64_t k = n - at < (1u << 24) ? n - at : (1u << 24);
        MPI_Bcast(st->units + at, (int)(k * sizeof *st->units), MPI_BYTE, 0, comm);
    }
    MPI_Bcast(st->model_units, (int)((st->cfg.n_model + 1) * sizeof *st->model_units), MPI_BYTE, 0, comm);
    return 0;
}

/* The cell worker's time split into the rank's totals, once per worker (a model switch
 * makes a new one). */
static void add_worker_timings(sweep_state *st) {
    st->timing[TM_FORWARD] += st->worker.forward_s;
    st->timing[TM_METRICS] += st->worker.metrics_s;
    st->timing[TM_KS] += st->worker.ks_s;
    st->timing[TM_FORWARD_CPU] += st->worker.forward_cpu_s;
    st->timing[TM_METRICS_CPU] += st->worker.metrics_cpu_s;
    st->worker.forward_s = st->worker.metrics_s = st->worker.ks_s = 0;
    st->worker.forward_cpu_s = st->worker.metrics_cpu_s = 0;
}

/* ATTNSWEEP_TIMINGS=1: one line per rank on stderr (from rank 0), where the
 * time went. Worker "waiting" is its time in the scheduler outside compute:
 * sending results, receiving work and idling at the end. */
static void print_timings(sweep_state *st, MPI_Comm comm, const sched_stats *stats) {
    const char *on = getenv("ATTNSWEEP_TIMINGS");
    if (!on || on[0] != '1') return;
    add_worker_timings(st); /* the last model's worker (the earlier ones were added at their switch) */
    st->timing[TM_CPU] = as_process_cpu_s();
    double *all = st->rank == 0 ? malloc((size_t)st->size * TM_N * sizeof(double)) : NULL;
    MPI_Gather(st->timing, TM_N, MPI_DOUBLE, all, TM_N, MPI_DOUBLE, 0, comm);
    if (st->rank != 0 || !all) return;
    double fw = 0, me = 0, ks = 0, co = 0, fwc = 0, mec = 0, dz = 0, dz_in = 0, dz_out = 0;
    for (int r = 0; r < st->size; r++) {
        const double *t = all + (size_t)r * TM_N;
        fprintf(stderr,
                "timings: rank %d: run %.2f s (model load %.2f), in scheduler %.2f: compute %.2f "
                "[forward %.2f, metrics %.2f, ks %.2f, deflate %.3f] in %.0f units, waiting/transfer %.2f; "
                "cpu %.2f s [forward %.2f, metrics %.2f]\n",
                r, t[TM_RUN], t[TM_LOAD], t[TM_SCHED], t[TM_COMPUTE], t[TM_FORWARD], t[TM_METRICS],
                t[TM_KS], t[TM_DEFLATE], t[TM_UNITS], t[TM_SCHED] - t[TM_COMPUTE], t[TM_CPU], t[TM_FORWARD_CPU],
                t[TM_METRICS_CPU]);
        dz += t[TM_DEFLATE], dz_in += t[TM_DEFLATE_IN], dz_out += t[TM_DEFLATE_OUT];
        fw += t[TM_FORWARD], me += t[TM_METRICS], ks += t[TM_KS], co += t[TM_COMPUTE];
        fwc += t[TM_FORWARD_CPU], mec += t[TM_METRICS_CPU];
    }
    const double *m = all;
    double bytes = m[TM_COMMIT_CELLS] * (double)st->slot_doubles * sizeof(double);
    fprintf(stderr,
            "timings: master: commit %.3f s (cpu %.3f) for %.0f cells (%.1f MB of blocks, %.0f MB/s) "
            "%s in %zu batches (largest %zu windows), master cpu %.2f s; scheduler elapsed %.2f s\n",
            m[TM_COMMIT], m[TM_COMMIT_CPU], m[TM_COMMIT_CELLS], bytes / 1e6,
            m[TM_COMMIT] > 0 ? bytes / 1e6 / m[TM_COMMIT] : 0.0,
            stats->threaded_commit ? "on the writer thread" : "synchronous", stats->commit_batches,
            stats->largest_batch, stats->master_cpu_s, stats->elapsed_s);
    double windows = (double)st->grid.n_windows;
    fprintf(stderr,
            "timings: per window (%.0f windows, %.0f cells): scheduler wall %.2f s; compute %.2f s "
            "= forward %.2f + metrics %.2f + ks %.2f; commit %.3f s; cpu: forward %.2f, metrics %.2f\n",
            windows, m[TM_COMMIT_CELLS], stats->elapsed_s / windows, co / windows, fw / windows,
            me / windows, ks / windows, m[TM_COMMIT] / windows, fwc / windows, mec / windows);
    if (st->deflate)
        fprintf(stderr, "timings: deflate on the workers: %.3f s per window, %.1f MB -> %.1f MB per "
                "window (%.2fx)\n", dz / windows, dz_in / windows / 1e6, dz_out / windows / 1e6,
                dz_out > 0 ? dz_in / dz_out : 0.0);
    free(all);
}

/* --- step 1 for `run OUT.h5`: the config the output was made with ---------- */

/* Rank 0 reads the canonical config the output's journal holds (else the
 * HDF5 file's config_text attribute) and broadcasts it; every rank loads it
 * with the --set overrides, and output = OUT.h5 (the file may have moved). */
static int load_stored_config(sweep_state *st, MPI_Comm comm, const sweep_opts *opts, as_err *err) {
    char *text = NULL;
    int64_t len = -1;
    if (st->rank == 0) {
        char *sha = NULL;
        int found = store_peek_config_to_write(opts->from_output, &text, &sha, err);
        free(sha);
        if (found == 0) {
            store_description d;
            if (store_describe(opts->from_output, &d, err) == 0) {
                if (d.prov.config_text && d.prov.config_text[0]) text = strdup(d.prov.config_text);
                else as_fail(err, "%s: holds no stored config (config_text); run it with its CONFIG file",
                             opts->from_output);
                store_description_free(&d);
            }
        }
        if (text) len = (int64_t)strlen(text);
    }
    MPI_Bcast(&len, 1, MPI_INT64_T, 0, comm);
    if (len < 0) {
        free(text);
        return -1;
    }
    if (st->rank != 0) text = calloc((size_t)len + 1, 1);
    if (!all_ok(comm, text != NULL)) {
        free(text);
        return as_fail(err, "out of memory for a stored config of %lld bytes", (long long)len);
    }
    MPI_Bcast(text, (int)len, MPI_CHAR, 0, comm);
    char *abs = realpath(opts->from_output, NULL);
    char out_set[4200];
    snprintf(out_set, sizeof out_set, "output=\"%s\"", abs ? abs : opts->from_output);
    free(abs);
    const char **sets = calloc(opts->n_sets + 1, sizeof *sets);
    int rc = -1;
    if (sets) {
        sets[0] = out_set;
        for (size_t i = 0; i < opts->n_sets; i++) sets[i + 1] = opts->sets[i];
        char origin[4200];
        snprintf(origin, sizeof origin, "%s (stored config)", opts->from_output);
        rc = config_load_text(&st->cfg, text, origin, sets, opts->n_sets + 1, err);
    } else {
        as_fail(err, "out of memory");
    }
    free(sets);
    free(text);
    return rc;
}

/* --- the whole run ---------------------------------------------------------- */

static void state_free(sweep_state *st) {
    if (st->worker_ok) cell_worker_free(&st->worker);
    weights_free(&st->w);
    free(st->units);
    free(st->model_units);
    free(st->model_sha);
    free(st->scratch);
    free(st->pack_buf), free(st->dz_scratch);
    free(st->tokens);
    if (st->grid_ok) grid_free(&st->grid);
    if (st->cfg_ok) config_free(&st->cfg);
}

/* Before any work: the ranks on rank 0's node against its memory (plan_memory_check), decided
 * by rank 0 alone (MemAvailable moves between two reads). */
static int check_node_memory(sweep_state *st, MPI_Comm comm, const sweep_opts *opts, as_err *e) {
    MPI_Comm node;
    int node_ranks = 1;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &node_ranks);
        MPI_Comm_free(&node);
    }
    if (st->rank != 0) return 0;
    const char *source;
    double limit = plan_memory_limit(opts->mem_limit, &source);
    return plan_memory_check(&st->grid, (size_t)node_ranks, limit, source, e);
}

int sweep_run(MPI_Comm comm, const sweep_opts *opts, sweep_summary *sum, as_err *err) {
    double t0 = as_wall_s();
    sweep_state st;
    memset(&st, 0, sizeof st);
    weights_init(&st.w);
    memset(sum, 0, sizeof *sum);
    MPI_Comm_rank(comm, &st.rank);
    MPI_Comm_size(comm, &st.size);
    as_err local = {{0}};
    as_err *e = st.rank == 0 ? err : &local;
    int rc = -1;

    /* 1. config and grid: deterministic, so every rank agrees */
    if (opts->from_output) {
        if (load_stored_config(&st, comm, opts, e) == 0) st.cfg_ok = 1;
    } else {
        st.cfg_ok = config_load(&st.cfg, opts->config_path, opts->sets, opts->n_sets, e) == 0;
    }
    if (st.cfg_ok) st.grid_ok = grid_init(&st.grid, &st.cfg, e) == 0;
    if (!all_ok(comm, st.cfg_ok && st.grid_ok)) goto out;
    if (!all_ok(comm, check_node_memory(&st, comm, opts, e) == 0)) goto out;
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
    if (load_text(&st, comm, e)) goto out;

    /* 3. the models checked (rank 0) and model 0 loaded, one copy per node; the others
     * are loaded when their cells run */
    double t_load = as_monotonic_s();
    st.model_sha = calloc(st.cfg.n_model, sizeof *st.model_sha);
    if (!all_ok(comm, st.model_sha != NULL)) {
        as_fail(e, "out of memory");
        goto out;
    }
    if (weights_check_models(&st.cfg, comm, st.model_sha, e) ||
        weights_load(&st.w, comm, st.cfg.models[0].dir, 0, NULL, e))
        goto out;
    if (st.rank == 0) memcpy(st.model_sha[0], st.w.model.weights_sha256, sizeof st.model_sha[0]);
    st.timing[TM_LOAD] = as_monotonic_s() - t_load;

    /* 4. store, and the cells still to do: model-major (every cell of model 0 in dispatch
     * order, then model 1, ...), so each model's weights are loaded once */
    int ok = sweep_open_store(&st, comm, opts, e) == 0;
    if (!all_ok(comm, ok)) goto out;
    int64_t *todo = NULL;
    size_t ntodo = 0, nm = st.cfg.n_model;
    size_t *model_windows_before = calloc(nm, sizeof *model_windows_before);
    if (st.rank == 0) {
        todo = malloc(nm * st.grid.n_cells * sizeof *todo);
        size_t mine = 0;
        for (size_t i = 0; i < st.grid.n_cells; i++)
            mine += opts->shard_count <= 0 || (int)(i % (size_t)opts->shard_count) == opts->shard_index;
        sum->total = mine * nm;
        /* windows: those with a cell in this shard, per model; done before = none pending */
        unsigned char *seen = calloc(st.grid.n_windows ? st.grid.n_windows : 1, 1);
        size_t held = 0, skipped = 0;
        unsigned char *existing = sweep_existing_done(&st, opts, &held);
        for (size_t m = 0; todo && seen && model_windows_before && m < nm; m++) {
            memset(seen, 0, st.grid.n_windows ? st.grid.n_windows : 1);
            for (size_t i = 0; i < st.grid.n_cells; i++) {
                size_t cell = st.grid.dispatch[i], w, li;
                if (opts->shard_count > 0 && (int)(i % (size_t)opts->shard_count) != opts->shard_index)
                    continue;
                grid_cell_of(&st.grid, cell, &w, &li);
                seen[w] |= 1;
                if (store_cell_status(st.out, m, w, li) != STORE_DONE) {
                    if (existing && existing[m * st.grid.n_cells + cell]) {
                        skipped++;
                        continue;
                    }
                    todo[ntodo++] = (int64_t)(m * st.grid.n_cells + cell);
                    seen[w] |= 2;
                }
            }
            for (size_t w = 0; w < st.grid.n_windows; w++) {
                sum->windows_total += seen[w] & 1;
                sum->windows_done_before += seen[w] == 1;
                model_windows_before[m] += seen[w] == 1;
            }
        }
        sum->done_before = sum->total - ntodo;
        if (skipped)
            fprintf(stderr, "attnsweep run: %zu cells of this shard are done in %s already: skipped "
                            "(`attnsweep merge` joins them from it)\n", skipped, st.cfg.output);
        free(existing);
        /* the model list, in the order the models run (one line each) */
        for (size_t m = 0; nm > 1 && model_windows_before && m < nm; m++)
            fprintf(stderr, "attnsweep run: model %zu %s (%s): %zu of %zu windows to do\n", m,
                    st.cfg.models[m].name, st.cfg.models[m].dir,
                    st.grid.n_windows - model_windows_before[m], st.grid.n_windows);
        if (!todo || !seen || !model_windows_before) ok = 0, as_fail(e, "out of memory for the cell list");
        else if (build_units(&st, todo, ntodo, e)) ok = 0;
        free(seen);
    }
    free(todo);
    /* how the output stores cells (its own datasets decide, store_compressed) */
    if (st.rank == 0 && st.out) st.deflate = store_compressed(st.out) ? 1 + store_checksummed(st.out) : 0;
    MPI_Bcast(&st.deflate, 1, MPI_INT, 0, comm);
    if (!all_ok(comm, ok) || share_units(&st, comm, e)) {
        if (st.out) store_close(st.out, "failed", &local), st.out = NULL;
        free(model_windows_before);
        goto out;
    }
    st.unit_cells = st.grid.n_L < UNIT_MAX_CUTS ? st.grid.n_L : UNIT_MAX_CUTS;
    int computes = st.size == 1 || st.rank != 0;
    /* the master's block layout: the union axes, the same for every model */
    cr_layout_init(&st.worker.layout, st.cfg.axes.n_N, st.cfg.axes.n_T, st.cfg.axes.n_eps,
                   st.cfg.axes.n_norm, st.cfg.axes.n_layer, st.cfg.axes.n_head);
    cr_layout_sample(&st.worker.layout, st.cfg.query_rows != 0); /* its SE variables */
    st.slot_doubles = slot_doubles(&st.worker.layout, st.deflate);
    /* commit_every counts cells; the scheduler counts units. */
    size_t units_per_commit = (size_t)st.cfg.commit_every / st.unit_cells;
    int64_t *unit_ids = malloc((st.n_units ? st.n_units : 1) * sizeof *unit_ids);
    for (size_t i = 0; unit_ids && i < st.n_units; i++) unit_ids[i] = (int64_t)i;
    if (!all_ok(comm, unit_ids != NULL)) {
        as_fail(e, "out of memory for the unit list");
        if (st.out) store_close(st.out, "failed", &local), st.out = NULL;
        free(unit_ids);
        free(model_windows_before);
        goto out;
    }

    /* 5. compute, one model after the other. A model switch is collective: every rank
     * has finished the previous model's units (sched_run returned on all ranks), then the
     * node frees that model's shared window and maps the next (weights_load, weights.h);
     * the cell worker's buffers are re-made for the new model (freed first, so the peak is
     * the largest model's). Models without pending cells are never loaded. */
    sched_stats stats = {0};
    int srun = SCHED_COMPLETE;
    const char *sync_env = getenv("ATTNSWEEP_SYNC_COMMIT");
    int sync_commit = sync_env && !strcmp(sync_env, "1");
    double t_sched = as_monotonic_s();
    for (size_t m = 0; m < nm && srun == SCHED_COMPLETE; m++) {
        size_t lo = st.model_units[m], hi = st.model_units[m + 1];
        if (hi == lo) continue;
        double tl = as_monotonic_s();
        ok = st.w.index == (long)m ||
             weights_load(&st.w, comm, st.cfg.models[m].dir, (long)m,
                          st.rank == 0 ? st.model_sha[m] : NULL, e) == 0;
        st.timing[TM_LOAD] += as_monotonic_s() - tl;
        if (!ok) {
            srun = -1;
            break;
        }
        if (st.worker_ok) add_worker_timings(&st), cell_worker_free(&st.worker), st.worker_ok = 0;
        cell_spec spec = cell_spec_of_model(&st.cfg, m);
        if (computes) st.worker_ok = cell_worker_init(&st.worker, &st.w.model, &spec, st.rank, e) == 0;
        if (st.worker_ok) st.worker.should_stop = sched_should_stop;
        /* Every cut comes from a pass at the grid's largest L, however the cuts
         * are grouped into units (a resume regroups them). */
        if (st.worker_ok) st.worker.pass_L = (size_t)config_max_L(&st.cfg);
        if (!computes) {
            cr_layout_init(&st.worker.layout, st.cfg.axes.n_N, st.cfg.axes.n_T, st.cfg.axes.n_eps,
                           st.cfg.axes.n_norm, st.cfg.axes.n_layer, st.cfg.axes.n_head);
            cr_layout_sample(&st.worker.layout, st.cfg.query_rows != 0);
        }
        if (!all_ok(comm, !computes || st.worker_ok)) {
            if (st.rank == 0 && !e->msg[0]) as_fail(e, "a worker rank could not allocate its memory");
            srun = -1;
            break;
        }
        char unit[300];
        if (nm > 1) snprintf(unit, sizeof unit, "windows of %s", st.cfg.models[m].name);
        else snprintf(unit, sizeof unit, "windows");
        sched_opts so = {.block_doubles = st.unit_cells * st.slot_doubles, .compute = compute_unit,
                         .compute_ctx = &st, .commit = commit_units, .dispatched = unit_dispatched,
                         .master_ctx = &st, .commit_every = units_per_commit ? units_per_commit : 1,
                         .progress_every_s = opts->progress_every_s, .unit = unit,
                         .grace_usr1_s = st.cfg.stop_grace,
                         /* the commit on the receiving thread, as before the writer thread:
                          * for benchmarks against the old path (README, Performance) */
                         .sync_commit = sync_commit,
                         .done_before = st.rank == 0 ? model_windows_before[m] : 0};
        sched_stats ms = {0};
        srun = sched_run(comm, st.rank == 0 ? unit_ids + lo : NULL, st.rank == 0 ? hi - lo : 0, &so,
                         &ms, e);
        stats.total += ms.total, stats.done += ms.done, stats.failed += ms.failed;
        stats.abandoned += ms.abandoned, stats.undispatched += ms.undispatched;
        stats.elapsed_s += ms.elapsed_s, stats.compute_s += ms.compute_s;
        stats.master_cpu_s += ms.master_cpu_s;
        stats.threaded_commit |= ms.threaded_commit;
        stats.commit_batches += ms.commit_batches, stats.commit_s += ms.commit_s;
        if (ms.largest_batch > stats.largest_batch) stats.largest_batch = ms.largest_batch;
        if (ms.signo) stats.signo = ms.signo;
        srun = agreed_outcome(comm, srun);
    }
    st.timing[TM_SCHED] = as_monotonic_s() - t_sched;
    free(unit_ids);
    free(model_windows_before);

    /* 6. close. Rank 0's outcome, its close included, is every rank's: the workers wait for
     * it in the broadcast whatever happened (a close that fails -- a disk full in the
     * journal's compaction -- must not leave them there for ever). */
    if (st.rank == 0) {
        sum->done = st.cells_done;
        sum->failed = st.cells_failed;
        sum->windows_this_run = st.units_done;
        sum->windows_failed = st.units_failed;
        const char *state = srun < 0 ? "failed" : srun == SCHED_INTERRUPTED ? "interrupted" : "finished";
        as_err close_err;
        store_set_stop_signal(st.out, stats.signo); /* /provenance: "stopped by signal NAME" */
        if (store_close(st.out, state, srun < 0 ? &close_err : e) && srun >= 0) srun = -1;
        st.out = NULL;
        rc = srun < 0 ? -1 : srun == SCHED_INTERRUPTED ? SWEEP_INTERRUPTED
             : stats.failed ? SWEEP_CELLS_FAILED : SWEEP_COMPLETE;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc < 0) goto out;
    st.timing[TM_RUN] = as_wall_s() - t0;
    print_timings(&st, comm, &stats);
out:
    sum->elapsed_s = as_wall_s() - t0;
    state_free(&st);
    return rc;
}
