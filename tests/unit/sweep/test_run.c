/* test_run.c -- the run without MPI (include/sweep/run.h), driven in one process over a
 * synthetic tiny model and a token file, as src/mpi/launch.c drives it on one rank:
 *   units     a fresh run's units: one per window (three L values share a pass), largest L
 *             first, every L in the mask; the summary's cell and window counts;
 *   commit    a committed unit's cells are done in the store, the others are not;
 *   resume    a run stopped after one unit, then resumed: the second run plans only the
 *             two windows left, counts the first as done before, and the finished file
 *             holds the same values, byte for byte, as an uninterrupted run;
 *   compress  the deflated path (the output compressed) stores the same values;
 *   shard     shards 0 and 1 of 2 take the cells at the even and odd positions of the
 *             dispatch order (derived here from grid.dispatch), disjoint and together
 *             all; a shard next to the finished output of its config skips every cell;
 *   path      run_shard_path's names;
 *   models    the model axis' checks: run_check_models records the sha256 of models 1..
 *             as loading computes it and refuses a model whose tensors its config.json
 *             contradicts, naming the file; run_model_loaded refuses model 1 rewritten
 *             after the check ("changed during the run"), and the host list of the
 *             provenance names each host once.
 *   memory    run_check_memory: a node of ranks that cannot fit --mem (or, without it,
 *             SLURM_MEM_PER_NODE) is refused in one line naming the limit, one with room
 *             passes (the limit set explicitly: the machine's load plays no part).
 * Values are compared as the file stores them (HDF5, every dataset but the per-run
 * bookkeeping wall_time, rank, attempts). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "run.h"
#include "synth.h"

static char dir[256];

static void write_tokens(const char *path, size_t n) {
    /* llm.c's .bin: 256 int32 header (magic, version 2 = uint32 ids, count), then the ids */
    int32_t head[256] = {20240520, 2, (int32_t)n};
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(head, sizeof head, 1, f);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = (uint32_t)(i * 7919 % 50257);
        fwrite(&id, sizeof id, 1, f);
    }
    fclose(f);
}

static void write_config(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/run.cfg", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs("model = \"tiny\";\ntext = { path = \"tokens.bin\"; format = \"tokens\"; };\n"
          "windows = { count = 3; offset = 0; stride = 64; };\n"
          "grid = { L = [16, 32, 64]; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [0.1];\n"
          "         normalizer = [\"softmax\", \"sparsemax\"]; };\n"
          "output = \"out.h5\";\nruntime = { commit_every = 4; compress = false; };\n", f);
    fclose(f);
}

typedef struct {
    run_summary sum;
    size_t n_units, units_of_model0;
    grid_unit units[8];
    int outcome;
    int committed_ok;  /* stop_after: the committed units' cells done, the rest not */
} run_result;

/* One run on "one rank": every step of launch.c without the collectives; stop_after > 0
 * commits that many units, then closes the output "interrupted". */
static int drive(const run_opts *o, size_t stop_after, run_result *res) {
    memset(res, 0, sizeof *res);
    run r;
    run_init(&r, o, 0);
    as_err err = {{0}};
    gpt2_model model;
    int have_model = 0, rc = -1;
    double *buf = NULL;
    size_t *before = NULL;
    if (run_config(&r, NULL, &err) || run_load_text(&r, &err)) goto out;
    if (run_check_models(&r, &err) || model_load(&model, r.cfg.models[0].dir, &err)) goto out;
    have_model = 1;
    if (run_model_loaded(&r, 0, &model, &err)) goto out;
    before = calloc(r.cfg.n_model, sizeof *before);
    run_env env = {.hosts = "test", .mpi_library = "none", .size = 1};
    if (run_open_output(&r, &env, &err) || run_plan_units(&r, &res->sum, before, &err)) goto out;
    run_layout(&r);
    res->n_units = r.n_units;
    res->units_of_model0 = r.model_units[1] - r.model_units[0];
    for (size_t i = 0; i < r.n_units && i < 8; i++) res->units[i] = r.units[i];
    if (run_start_model(&r, 0, &model, 1, NULL, &err)) goto out;
    buf = malloc(r.unit_cells * r.slot_doubles * sizeof *buf);
    size_t n = stop_after && stop_after < r.n_units ? stop_after : r.n_units;
    int status = RUN_UNIT_DONE, srun = n < r.n_units ? RUN_INTERRUPTED : RUN_COMPLETE;
    for (size_t i = 0; i < n; i++) {
        int64_t u = (int64_t)i;
        if (run_compute_unit(&r, u, buf, &err) || run_commit_units(&r, &u, &buf, &status, 1, &err)) goto out;
    }
    res->committed_ok = 1;
    for (size_t i = 0; i < r.n_units; i++)
        for (size_t k = 0; k < GRID_UNIT_MAX_CUTS; k++)
            if (r.units[i].l_mask >> k & 1) {
                int done = store_cell_status(r.out, 0, (size_t)r.units[i].window,
                                             (size_t)r.units[i].l_lo + k) == STORE_DONE;
                if (done != (i < n)) res->committed_ok = 0;
            }
    rc = 0;
    res->outcome = run_close(&r, srun, 0, 0, &res->sum, &err);
out:
    CHECK(rc == 0, "run: %s", err.msg);
    if (rc && r.out) run_close(&r, -1, 0, 0, &res->sum, &err);
    free(buf);
    free(before);
    cell_worker_free(r.worker), r.worker = NULL; /* before its model */
    if (have_model) model_free(&model);
    run_free(&r);
    return rc;
}

static const char *const BOOKKEEPING[] = {"wall_time", "rank", "attempts", "model_path"};

/* Every dataset of a and b but the bookkeeping, byte for byte in their own types. */
static int same_file(const char *a, const char *b) {
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fa < 0 || fb < 0) return 0;
    H5G_info_t info;
    H5Gget_info(fa, &info);
    int same = 1;
    size_t compared = 0;
    for (hsize_t i = 0; i < info.nlinks && same; i++) {
        char name[256];
        H5Lget_name_by_idx(fa, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
        hid_t obj = H5Oopen(fa, name, H5P_DEFAULT);
        int is_set = obj >= 0 && H5Iget_type(obj) == H5I_DATASET;
        if (obj >= 0) H5Oclose(obj);
        if (!is_set) continue;
        int skip = 0;
        for (size_t k = 0; k < sizeof BOOKKEEPING / sizeof *BOOKKEEPING; k++) skip |= !strcmp(name, BOOKKEEPING[k]);
        if (skip) continue;
        hid_t da = H5Dopen2(fa, name, H5P_DEFAULT), db = H5Dopen2(fb, name, H5P_DEFAULT);
        if (db < 0) {
            CHECK(0, "%s: no %s", b, name);
            H5Dclose(da);
            return 0;
        }
        hid_t t = H5Dget_type(da), nt = H5Tget_native_type(t, H5T_DIR_DEFAULT);
        hid_t sa = H5Dget_space(da), sb = H5Dget_space(db);
        size_t n = (size_t)H5Sget_simple_extent_npoints(sa), bytes = n * H5Tget_size(nt);
        same = n == (size_t)H5Sget_simple_extent_npoints(sb);
        char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
        if (same && H5Tget_class(nt) != H5T_STRING) {
            H5Dread(da, nt, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
            H5Dread(db, nt, H5S_ALL, H5S_ALL, H5P_DEFAULT, y);
            same = memcmp(x, y, bytes) == 0;
            compared++;
        }
        CHECK(same, "%s vs %s: dataset %s differs", a, b, name);
        free(x), free(y);
        H5Sclose(sa), H5Sclose(sb), H5Tclose(nt), H5Tclose(t), H5Dclose(da), H5Dclose(db);
    }
    H5Fclose(fa), H5Fclose(fb);
    CHECK(compared > 10, "only %zu datasets compared", compared);
    return same && compared > 10;
}

static void test_units_and_resume(void) {
    const char *full_set[] = {"output=\"full.h5\""};
    run_opts o = {.config_path = "run.cfg", .sets = full_set, .n_sets = 1, .fresh = 1};
    run_result full;
    if (drive(&o, 0, &full)) return;
    CHECK(full.outcome == RUN_COMPLETE, "outcome %d", full.outcome);
    CHECK(full.n_units == 3 && full.units_of_model0 == 3, "%zu units", full.n_units);
    for (size_t i = 0; i < full.n_units && i < 3; i++)
        CHECK(full.units[i].window == (int64_t)i && full.units[i].l_lo == 0 && full.units[i].l_mask == 7 &&
                  full.units[i].model == 0,
              "unit %zu: window %lld mask %llx", i, (long long)full.units[i].window,
              (unsigned long long)full.units[i].l_mask);
    CHECK(full.sum.total == 9 && full.sum.done_before == 0 && full.sum.done == 9 && full.sum.failed == 0,
          "cells: total %zu before %zu done %zu", full.sum.total, full.sum.done_before, full.sum.done);
    CHECK(full.sum.windows_total == 3 && full.sum.windows_this_run == 3, "windows %zu", full.sum.windows_total);

    /* stopped after one unit, then resumed */
    const char *half_set[] = {"output=\"half.h5\""};
    run_opts h = {.config_path = "run.cfg", .sets = half_set, .n_sets = 1};
    run_result first, second;
    if (drive(&h, 1, &first) || drive(&h, 0, &second)) return;
    CHECK(first.outcome == RUN_INTERRUPTED && first.sum.done == 3, "first: outcome %d, %zu done",
          first.outcome, first.sum.done);
    CHECK(first.committed_ok, "the committed unit's cells are done, the others pending");
    CHECK(second.n_units == 2 && second.units[0].window == 1 && second.units[1].window == 2,
          "resume: %zu units", second.n_units);
    CHECK(second.sum.done_before == 3 && second.sum.windows_done_before == 1 && second.sum.done == 6,
          "resume: before %zu (%zu windows), done %zu", second.sum.done_before,
          second.sum.windows_done_before, second.sum.done);
    CHECK(second.outcome == RUN_COMPLETE, "resume outcome %d", second.outcome);
    CHECK(same_file("full.h5", "half.h5"), "a resumed run equals an uninterrupted one");

    /* compressed: the workers' deflate path */
    const char *z_set[] = {"output=\"z.h5\"", "runtime.compress=true"};
    run_opts z = {.config_path = "run.cfg", .sets = z_set, .n_sets = 2, .fresh = 1};
    run_result zr;
    if (drive(&z, 0, &zr) == 0) CHECK(same_file("full.h5", "z.h5"), "compressed equals uncompressed");
}

static void test_shards(void) {
    /* the dispatch order, as the grid gives it */
    as_config cfg;
    as_grid g;
    as_err err;
    if (config_load(&cfg, "run.cfg", NULL, 0, &err) || grid_init(&g, &cfg, &err)) {
        CHECK(0, "config: %s", err.msg);
        return;
    }
    unsigned char seen[64] = {0};
    for (int s = 0; s < 2; s++) {
        char out[64];
        snprintf(out, sizeof out, "output=\"sh.h5\"");
        const char *set[] = {out};
        run_opts o = {.config_path = "run.cfg", .sets = set, .n_sets = 1, .fresh = 1, .shard_index = s,
                      .shard_count = 2};
        run_result res;
        if (drive(&o, 0, &res)) break;
        size_t want = 0;
        for (size_t i = (size_t)s; i < g.n_cells; i += 2) want++;
        CHECK(res.sum.total == want && res.sum.done == want, "shard %d: %zu cells, want %zu", s,
              res.sum.total, want);
        /* each unit's cells are exactly this shard's positions of the dispatch order */
        for (size_t i = 0; i < g.n_cells; i++) {
            size_t w, li;
            grid_cell_of(&g, g.dispatch[i], &w, &li);
            int in_unit = 0;
            for (size_t u = 0; u < res.n_units; u++)
                in_unit |= res.units[u].window == (int64_t)w && (res.units[u].l_mask >> li & 1);
            CHECK(in_unit == ((int)(i % 2) == s), "shard %d: position %zu (window %zu, L index %zu)", s, i,
                  w, li);
            if (in_unit) seen[g.dispatch[i]]++;
        }
    }
    for (size_t c = 0; c < g.n_cells; c++) CHECK(seen[c] == 1, "cell %zu in %d shards", c, seen[c]);
    /* beside the finished output of the same config: nothing left to compute */
    const char *set[] = {"output=\"full.h5\""};
    run_opts o = {.config_path = "run.cfg", .sets = set, .n_sets = 1, .fresh = 1, .shard_index = 1,
                  .shard_count = 2};
    run_result res;
    if (drive(&o, 0, &res) == 0)
        CHECK(res.n_units == 0 && res.sum.done_before == res.sum.total && res.sum.total == 4,
              "a shard of a finished output: %zu units, %zu of %zu before", res.n_units,
              res.sum.done_before, res.sum.total);
    grid_free(&g);
    config_free(&cfg);
}

/* A config of the model axis [tiny, tiny2] with its checks, model 1 loaded after it. */
static void test_models(void) {
    as_err err = {{0}};
    if (synth_write("tiny2", "tiny", 2, 1, &err)) {
        CHECK(0, "synth: %s", err.msg);
        return;
    }
    const char *set[] = {"model=[\"tiny\", \"tiny2\"]", "output=\"models.h5\""};
    run_opts o = {.config_path = "run.cfg", .sets = set, .n_sets = 2, .fresh = 1};
    run r;
    run_init(&r, &o, 0);
    gpt2_model m1;
    int loaded = 0;
    if (run_config(&r, NULL, &err) || run_check_models(&r, &err) || model_load(&m1, "tiny2", &err)) {
        CHECK(0, "models: %s", err.msg);
        run_free(&r);
        return;
    }
    loaded = 1;
    CHECK(r.cfg.n_model == 2 && !strcmp(r.model_sha[1], m1.weights_sha256), "model 1's sha256 %s, loaded %s",
          r.model_sha[1], m1.weights_sha256);
    CHECK(run_model_loaded(&r, 1, &m1, &err) == 0, "model 1 as checked: %s", err.msg);
    model_free(&m1), loaded = 0;
    /* rewritten after the check: another seed, the same shapes */
    if (synth_write("tiny2", "tiny", 3, 1, &err) == 0 && model_load(&m1, "tiny2", &err) == 0) {
        loaded = 1;
        err.msg[0] = 0;
        CHECK(run_model_loaded(&r, 1, &m1, &err) == -1 && strstr(err.msg, "tiny2/model.safetensors: changed during the run"),
              "a model rewritten during the run: '%s'", err.msg);
    }
    if (loaded) model_free(&m1);
    run_free(&r);
    /* tensors config.json contradicts: refused by the check, naming the model */
    FILE *f = fopen("tiny2/config.json", "r+");
    char text[4096] = {0};
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    char *at = strstr(text, "\"n_embd\": ");
    if (f && n && at) {
        at[strlen("\"n_embd\": ")] = '4'; /* 64 -> 44: every tensor's shape is wrong */
        rewind(f);
        fwrite(text, 1, n, f);
    }
    if (f) fclose(f);
    CHECK(at != NULL, "tiny2/config.json has n_embd: %s", text);
    run_init(&r, &o, 0);
    err.msg[0] = 0;
    int rc = run_config(&r, NULL, &err) == 0 ? run_check_models(&r, &err) : 0;
    CHECK(rc == -1 && strstr(err.msg, "tiny2"), "a bad model 1 refused by the check: '%s'", err.msg);
    run_free(&r);
    /* the provenance's hosts: each once, in the order first seen */
    char names[4][8] = {"b", "a", "b", "c"}, hosts[16];
    run_hosts_list(hosts, sizeof hosts, names[0], sizeof names[0], 4);
    CHECK(!strcmp(hosts, "b,a,c"), "hosts '%s'", hosts);
    run_hosts_list(hosts, 4, names[0], sizeof names[0], 4);
    CHECK(!strcmp(hosts, "b,a"), "hosts cut to fit: '%s'", hosts);
}

static void test_shard_path(void) {
    char out[64];
    CHECK(run_shard_path(out, sizeof out, "res/p.h5", 2, 8) == 0 && !strcmp(out, "res/p.shard-2-of-8.h5"), "%s", out);
    CHECK(run_shard_path(out, sizeof out, "p.nc", 0, 2) == 0 && !strcmp(out, "p.shard-0-of-2.nc"), "%s", out);
    CHECK(run_shard_path(out, sizeof out, "p", 1, 3) == 0 && !strcmp(out, "p.shard-1-of-3"), "%s", out);
    CHECK(run_shard_path(out, 8, "long-name.h5", 1, 3) == -1, "a name too long for the buffer");
}

static int check_memory_with(double mem_limit, size_t ranks, as_err *err) {
    run_opts o = {.config_path = "run.cfg", .mem_limit = mem_limit};
    run r;
    run_init(&r, &o, 0);
    int rc = run_config(&r, NULL, err) ? -2 : run_check_memory(&r, ranks, err);
    run_free(&r);
    return rc;
}

static void test_memory(void) {
    as_err err = {{0}};
    unsetenv("SLURM_MEM_PER_NODE");
    int rc = check_memory_with(1 << 20, 2, &err);
    CHECK(rc == -1 && strstr(err.msg, "2 ranks on a node need") && strstr(err.msg, "of --mem") &&
          !strchr(err.msg, '\n'), "1 MiB for 2 ranks: %d %s", rc, err.msg);
    rc = check_memory_with(1e12, 2, &err);
    CHECK(rc == 0, "1 TB for 2 ranks: %d %s", rc, rc ? err.msg : "");
    setenv("SLURM_MEM_PER_NODE", "1", 1); /* MB */
    rc = check_memory_with(0, 1, &err);
    CHECK(rc == -1 && strstr(err.msg, "of SLURM_MEM_PER_NODE"), "SLURM_MEM_PER_NODE=1: %d %s", rc, err.msg);
    rc = check_memory_with(1e12, 1, &err);
    CHECK(rc == 0, "--mem before SLURM_MEM_PER_NODE: %d %s", rc, rc ? err.msg : "");
    unsetenv("SLURM_MEM_PER_NODE");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_run.XXXXXX");
    if (!mkdtemp(dir) || chdir(dir)) {
        perror(dir);
        return 1;
    }
    as_err err;
    if (synth_write("tiny", "tiny", 1, 1, &err)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return 1;
    }
    write_tokens("tokens.bin", 1024);
    write_config();
    test_shard_path();
    test_memory();
    test_units_and_resume();
    test_shards();
    test_models();
    int rc = check_summary("test_run");
    if (rc == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    }
    return rc;
}
