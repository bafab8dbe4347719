/* test_store.c -- the results store: create, commit, reopen; values read back
 * with the plain HDF5 API against the fixture's formula; a crash (child killed
 * without close) with a torn journal; the HDF5 file deleted or corrupted and
 * rebuilt from the journal bit for bit; extension with an added window and L;
 * config-change and shrink refusals that leave the files unchanged; locks. */
#include <float.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "lockfile.h"
#include "store_fixture.h"

static const char *OUT = "test_store.tmp.h5";
static char JPATH[256], LPATH[256], SPATH[256];

static void remove_all(void) {
    unlink(OUT), unlink(JPATH), unlink(LPATH), unlink(SPATH);
}

static long long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (long long)st.st_size;
}

/* Reads a whole dataset as doubles (HDF5 converts; NaN stays NaN). */
static double *read_all(const char *path, const char *name, size_t *n) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(sp);
    double *buf = malloc(*n * sizeof *buf);
    H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Sclose(sp), H5Dclose(d), H5Fclose(f);
    return buf;
}

static int dims_of(const char *path, const char *name, hsize_t *dims) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    int r = H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp), H5Dclose(d), H5Fclose(f);
    return r;
}

/* Checks every metric of every cell against the formula (done cells) or the
 * fill (others). status_want[w][l] from the caller's own bookkeeping. */
static void check_file(const char *label, size_t nw, size_t nl, const int status_want[4][3]) {
    cr_layout lay;
    cr_layout_init(&lay, 3, 2, 2, 2, 2, 3);
    size_t n;
    double *st = read_all(OUT, "status", &n);
    CHECK(st && n == nw * nl, "%s: status has %zu cells", label, n);
    if (!st) return;
    for (size_t w = 0; w < nw; w++)
        for (size_t l = 0; l < nl; l++)
            CHECK(st[w * nl + l] == status_want[w][l], "%s: status(%zu,%zu) = %g want %d", label, w,
                  l, st[w * nl + l], status_want[w][l]);
    free(st);
    int mismatches = 0;
    for (int v = 0; v < CR_FIRST_SAMPLED; v++) { /* an unsampled layout */
        double *x = read_all(OUT, cr_var_name((cr_var)v), &n);
        if (!x || n != nw * nl * lay.count[v]) {
            CHECK(0, "%s: %s has %zu values", label, cr_var_name((cr_var)v), n);
            free(x);
            continue;
        }
        for (size_t w = 0; w < nw; w++)
            for (size_t l = 0; l < nl; l++)
                for (size_t k = 0; k < lay.count[v]; k++) {
                    double got = x[(w * nl + l) * lay.count[v] + k];
                    double want = status_want[w][l] == STORE_DONE ? fx_value(v, (int)w, fx_L[l], k)
                                  : fx_is_int(v)                   ? (double)STORE_INT_FILL
                                                                   : NAN;
                    int same = (isnan(got) && isnan(want)) || got == want;
                    if (!same && mismatches++ < 5)
                        CHECK(0, "%s: %s(%zu,%zu)[%zu] = %g want %g", label,
                              cr_var_name((cr_var)v), w, l, k, got, want);
                }
        free(x);
    }
    CHECK(mismatches == 0, "%s: %d value mismatches", label, mismatches);
}

static double *make_block(int w, int Lv) {
    cr_layout lay;
    cr_layout_init(&lay, 3, 2, 2, 2, 2, 3);
    double *b = malloc(lay.total * sizeof *b);
    fx_fill_block(b, &lay, w, Lv);
    return b;
}

static int commit_one(store *s, size_t w, size_t l, as_err *err) {
    double *b = make_block((int)w, fx_L[l]);
    store_cell c = {w, l, STORE_DONE, 1, 10.0, 11.0, 1.0, .model = 0};
    const double *bp = b;
    int rc = store_mark_dispatched(s, 0, w, l, 1, 10.0, err) || store_commit_batch(s, &c, &bp, 1, err);
    free(b);
    return rc;
}

static char *slurp(const char *p) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

/* The sequence in main() runs with the journal kept whole (STORE_KEEP_JOURNAL), so it can
 * rebuild a deleted or corrupted view alone; test_compacted() the default. */
#define KEEP STORE_KEEP_JOURNAL

static long long journal_payload_bytes(void);

/* The default: every close compacts the journal (journal.h "Compaction"). The values
 * are then only in the view; resume and extension take them from it; a view that no
 * longer holds them loses those cells to recomputation (never wrong values). */
static void test_compacted(void) {
    remove_all();
    as_err err = {{0}};
    store_axes ax = fx_axes(2, 2);
    store_provenance prov = fx_prov("a = 1;\n", "sha-one");
    int want[4][3] = {{0}};
    store *s = store_open(OUT, &ax, &prov, STORE_NEW, 0, &err);
    CHECK(s != NULL, "compacted: create: %s", err.msg);
    if (!s) return;
    size_t payload = store_payload_bytes(&ax);
    CHECK(commit_one(s, 0, 0, &err) == 0 && commit_one(s, 1, 1, &err) == 0, "compacted: commits: %s", err.msg);
    long long whole = file_size(JPATH);
    CHECK(whole > (long long)(2 * payload), "compacted: the journal holds the values before the close");
    CHECK(store_close(s, "interrupted", &err) == 0, "compacted: close: %s", err.msg);
    long long small = file_size(JPATH);
    CHECK(small < whole - (long long)(2 * payload) + 200, "compacted: journal %lld bytes after the "
          "close, %lld before (values %zu bytes each)", small, whole, payload);
    CHECK(journal_payload_bytes() < 1000, "compacted: no values left in the journal");
    want[0][0] = want[1][1] = STORE_DONE;
    check_file("compacted: after close", 2, 2, want);
    /* resume: the state from the compacted journal, the view as it is */
    s = store_open(OUT, &ax, &prov, STORE_RESUME, 0, &err);
    CHECK(s && !store_was_rebuilt(s) && store_count(s, STORE_DONE) == 2, "compacted: resume: %s", err.msg);
    if (s) {
        CHECK(commit_one(s, 0, 1, &err) == 0, "compacted: commit after resume: %s", err.msg);
        store_close(s, "interrupted", &err);
    }
    want[0][1] = STORE_DONE;
    check_file("compacted: after resume", 2, 2, want);
    /* extension: the rebuilt view takes the compacted cells from the old one */
    store_axes grown = fx_axes(3, 3);
    s = store_open(OUT, &grown, &prov, STORE_RESUME, 0, &err);
    CHECK(s && store_was_rebuilt(s) && store_count(s, STORE_DONE) == 3 && !store_journal_damage(s)[0],
          "compacted: extension keeps the 3 done cells: %s", s ? store_journal_damage(s) : err.msg);
    if (s) {
        CHECK(commit_one(s, 2, 2, &err) == 0, "compacted: commit after extension: %s", err.msg);
        store_close(s, "interrupted", &err);
    }
    want[2][2] = STORE_DONE;
    check_file("compacted: extended", 3, 3, want);
    /* a corrupted view: its cells cannot be rebuilt from a compacted journal; they are
     * pending again, said so, and computed again (never wrong values) */
    {
        FILE *f = fopen(OUT, "r+b");
        char junk[2048];
        memset(junk, 0x5A, sizeof junk);
        fwrite(junk, 1, sizeof junk, f);
        fclose(f);
    }
    s = store_open(OUT, &grown, &prov, STORE_RESUME, 0, &err);
    CHECK(s && store_was_rebuilt(s) && store_count(s, STORE_DONE) == 0 &&
              strstr(store_journal_damage(s), "4 done cells compacted"),
          "compacted: a corrupted view: cells pending again, said so: %s",
          s ? store_journal_damage(s) : err.msg);
    if (s) {
        CHECK(store_cell_attempts(s, 0, 0, 0) == 1, "compacted: attempts kept: %d", store_cell_attempts(s, 0, 0, 0));
        CHECK(commit_one(s, 0, 0, &err) == 0, "compacted: recompute: %s", err.msg);
        store_close(s, "interrupted", &err);
    }
    int only[4][3] = {{STORE_DONE}};
    check_file("compacted: after a corrupted view", 3, 3, only);
    /* the lost cells stay pending (the journal says so); the recomputed one is done */
    s = store_open(OUT, &grown, &prov, STORE_RESUME, 0, &err);
    CHECK(s && !store_was_rebuilt(s) && store_count(s, STORE_DONE) == 1 &&
              store_cell_status(s, 0, 1, 1) == STORE_PENDING, "compacted: reopen after the loss: %s", err.msg);
    if (s) store_close(s, "finished", &err);
    remove_all();
}

/* Payload bytes of the JR_COMMIT records in the journal (parsed from journal.h's layout). */
static long long journal_payload_bytes(void) {
    FILE *f = fopen(JPATH, "rb");
    if (!f) return -1;
    long long total = 0;
    unsigned char rec[JOURNAL_RECORD_BYTES];
    fseek(f, JOURNAL_HEADER_BYTES, SEEK_SET);
    while (fread(rec, 1, sizeof rec, f) == sizeof rec) {
        uint32_t type;
        uint64_t len;
        memcpy(&type, rec + 4, 4);
        memcpy(&len, rec + 64, 8);
        if (type == JR_COMMIT) total += (long long)len;
        fseek(f, (long)len, SEEK_CUR);
    }
    fclose(f);
    return total;
}

/* crit_N = -1 ("no N of the grid passed") is packed as the int fill with crit_N_censored = 1,
 * so no mean over windows can count it as a critical N; a found crit_N stays with 0, and a
 * crit_N not computed (NaN) leaves both the fill. */
static void test_censored_packing(void) {
    cr_layout lay;
    cr_layout_init(&lay, 2, 2, 1, 2, 1, 1);
    double *b = malloc(lay.total * sizeof *b);
    unsigned char *out = malloc(cw_pack_bytes(&lay));
    for (size_t i = 0; i < lay.total; i++) b[i] = NAN;
    const double crit[4] = {-1, 4, NAN, 1};
    for (size_t i = 0; i < 4; i++) b[cr_at_crit(&lay, i / 2, i % 2)] = crit[i];
    cw_pack_cell(&lay, b, out);
    size_t at = 0, at_crit = 0, at_cens = 0;
    for (int v = 0; v < CR_WALL_TIME; v++) {
        if (v == CR_CRIT_N) at_crit = at;
        if (v == CR_CRIT_N_CENSORED) at_cens = at;
        at += lay.count[v] * (v == CR_KS_STAT || v == CR_KS_PVALUE ? 8 : 4);
    }
    CHECK(at == cw_pack_bytes(&lay), "packed bytes %zu vs %zu", at, cw_pack_bytes(&lay));
    const int32_t want_crit[4] = {STORE_INT_FILL, 4, STORE_INT_FILL, 1};
    const int32_t want_cens[4] = {1, 0, STORE_INT_FILL, 0};
    for (size_t i = 0; i < 4; i++) {
        int32_t c, z;
        memcpy(&c, out + at_crit + 4 * i, 4);
        memcpy(&z, out + at_cens + 4 * i, 4);
        CHECK(c == want_crit[i] && z == want_cens[i], "crit_N %g packs as %d / censored %d, want %d / %d",
              crit[i], c, z, want_crit[i], want_cens[i]);
    }
    free(b), free(out);
}

/* The float32 floor docs/results.md states ("Variables"): a mean below half of float32's
 * smallest subnormal (FLT_TRUE_MIN, ~1.4e-45) is stored as 0, one below FLT_MIN (~1.2e-38) as
 * the nearest subnormal (fewer digits: relative error up to FLT_TRUE_MIN / 2 / value), a
 * normal one to float32's 2^-24. The packing is what the view and the journal store
 * (cellwire.h), so it is checked there; tests/integration/test_docs_results.py checks the
 * doc's two numbers against float32's. */
static void test_float32_floor(void) {
    cr_layout lay;
    cr_layout_init(&lay, 3, 2, 1, 2, 1, 1);
    double *b = malloc(lay.total * sizeof *b);
    unsigned char *out = malloc(cw_pack_bytes(&lay));
    const double vals[] = {1e-46, 7e-46, -3e-46, 1e-44, 1e-40, 3e-39, 1e-37, 1e-30, 0.25};
    const size_t nv = sizeof vals / sizeof *vals, at0 = lay.offset[CR_DIST_TRUE];
    CHECK(lay.count[CR_DIST_TRUE] >= nv, "layout holds %zu dist_true values", lay.count[CR_DIST_TRUE]);
    for (size_t i = 0; i < lay.total; i++) b[i] = 1;
    for (size_t i = 0; i < nv; i++) b[at0 + i] = vals[i];
    cw_pack_cell(&lay, b, out);
    size_t at = 0; /* dist_true's bytes: the variables before it */
    for (int v = 0; v < CR_DIST_TRUE; v++) at += lay.count[v] * cw_type_size(cw_var_type[v]);
    const double tmin = FLT_TRUE_MIN, nmin = FLT_MIN; /* (float) FLT_TRUE_MIN / 2 is 0 */
    for (size_t i = 0; i < nv; i++) {
        float f;
        memcpy(&f, out + at + 4 * i, 4);
        double x = vals[i], err = fabs((double)f - x) / fabs(x);
        if (fabs(x) < tmin / 2)
            CHECK(f == 0, "mean %g below FLT_TRUE_MIN / 2 stored as %g, not 0", x, (double)f);
        else if (fabs(x) < nmin)
            CHECK(f != 0 && fpclassify(f) == FP_SUBNORMAL && err <= tmin / 2 / fabs(x),
                  "mean %g below FLT_MIN stored as %g (%.3g relative): not the nearest subnormal",
                  x, (double)f, err);
        else
            CHECK(err <= 0x1p-24, "mean %g stored as %g (%.3g relative)", x, (double)f, err);
    }
    free(b), free(out);
}

int main(void) {
    test_censored_packing();
    test_float32_floor();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    store_sidecar(JPATH, sizeof JPATH, OUT, ".journal");
    store_sidecar(LPATH, sizeof LPATH, OUT, ".lock");
    store_sidecar(SPATH, sizeof SPATH, OUT, ".status");
    remove_all();
    as_err err = {{0}};
    store_axes ax = fx_axes(2, 2);
    store_provenance prov = fx_prov("a = 1;\n", "sha-one");
    int want[4][3] = {{0}};

    /* --- create, commit a batch of 2 and one failed cell, close --- */
    store *s = store_open(OUT, &ax, &prov, STORE_NEW, KEEP, &err);
    CHECK(s != NULL, "create: %s", err.msg);
    if (!s) return check_summary("test_store");
    CHECK(file_size(LPATH) > 0, "lock file while open");
    CHECK(store_total(s) == 4 && store_block_doubles(s) > 0, "total %zu", store_total(s));
    {
        double *b0 = make_block(0, fx_L[0]), *b1 = make_block(1, fx_L[1]);
        store_cell cells[3] = {{0, 0, STORE_DONE, 1, 1, 2, 1, .model = 0}, {1, 1, STORE_DONE, 2, 1, 2, 1, .model = 0},
                               {0, 1, STORE_FAILED, 3, 1, 2, 7.0, .model = 0}};
        const double *blocks[3] = {b0, b1, NULL};
        CHECK(store_commit_batch(s, cells, blocks, 3, &err) == 0, "batch: %s", err.msg);
        free(b0), free(b1);
    }
    want[0][0] = want[1][1] = STORE_DONE;
    want[0][1] = STORE_FAILED;
    CHECK(store_count(s, STORE_DONE) == 2 && store_count(s, STORE_FAILED) == 1, "counts");
    char *status = slurp(SPATH);
    CHECK(status && strstr(status, "\"done\": 2") && strstr(status, "\"failed\": 1") &&
              strstr(status, "\"total\": 4"), "status file: %s", status ? status : "(none)");
    free(status);
    CHECK(store_close(s, "finished", &err) == 0, "close: %s", err.msg);
    CHECK(file_size(LPATH) < 0, "lock removed at close");
    check_file("after close", 2, 2, want);

    /* --- reopen: state comes back from the journal --- */
    s = store_open(OUT, &ax, &prov, STORE_RESUME, KEEP, &err);
    CHECK(s != NULL, "reopen: %s", err.msg);
    if (s) {
        CHECK(!store_was_rebuilt(s), "a consistent file is not rebuilt");
        CHECK(store_cell_status(s, 0, 0, 0) == STORE_DONE && store_cell_status(s, 0, 1, 1) == STORE_DONE &&
                  store_cell_status(s, 0, 0, 1) == STORE_FAILED && store_cell_status(s, 0, 1, 0) == STORE_PENDING,
              "statuses after reopen");
        CHECK(store_cell_attempts(s, 0, 0, 0) == 1 && store_cell_attempts(s, 0, 1, 0) == 0, "attempts");
        /* retry the failed cell */
        CHECK(commit_one(s, 0, 1, &err) == 0, "retry: %s", err.msg);
        CHECK(store_cell_attempts(s, 0, 0, 1) == 2, "attempts after retry %d", store_cell_attempts(s, 0, 0, 1));
        CHECK(store_close(s, "interrupted", &err) == 0, "close 2: %s", err.msg);
    }
    want[0][1] = STORE_DONE;
    check_file("after retry", 2, 2, want);
    {
        size_t n;
        double *att = read_all(OUT, "attempts", &n);
        CHECK(att && att[0 * 2 + 1] == 2 && att[1 * 2 + 0] == 0, "attempts in file");
        free(att);
    }

    /* --- peek at the stored config --- */
    char *text = NULL, *sha = NULL;
    CHECK(store_peek_config(OUT, &text, &sha, &err) == 1 && text && !strcmp(text, "a = 1;\n") &&
              !strcmp(sha, "sha-one"), "peek config: %s", err.msg);
    free(text), free(sha);

    /* --- crash: a child commits (1,0) and dies without closing; its last
     * journal record is torn; the lock it leaves is stale --- */
    long long before = file_size(JPATH);
    pid_t child = fork();
    if (child == 0) {
        as_err e;
        store *c = store_open(OUT, &ax, &prov, STORE_RESUME, KEEP, &e);
        if (!c || commit_one(c, 1, 0, &e)) _exit(1);
        _exit(0); /* no close: like SIGKILL after the fsync */
    }
    int wst;
    waitpid(child, &wst, 0);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "crashing child committed");
    CHECK(file_size(LPATH) > 0, "dead child left its lock");
    long long after = file_size(JPATH);
    CHECK(after > before, "journal grew");
    /* Cut the commit record (the last one) in its payload. */
    CHECK(truncate(JPATH, after - 100) == 0, "truncate journal");
    s = store_open(OUT, &ax, &prov, STORE_RESUME, KEEP, &err);
    CHECK(s != NULL, "resume after crash (stale lock taken over): %s", err.msg);
    if (s) {
        CHECK(store_torn_bytes(s) > 0, "torn tail detected (%lld bytes)", store_torn_bytes(s));
        CHECK(store_cell_status(s, 0, 1, 0) == STORE_PENDING, "torn commit is pending");
        CHECK(store_cell_attempts(s, 0, 1, 0) == 1, "its dispatch counted as an attempt: %d",
              store_cell_attempts(s, 0, 1, 0));
        CHECK(!store_was_rebuilt(s), "file ahead of the journal is fixed in place, not rebuilt");
        CHECK(store_close(s, "interrupted", &err) == 0, "close 3: %s", err.msg);
    }
    check_file("after torn crash", 2, 2, want);

    /* --- the HDF5 file deleted: rebuilt from the journal --- */
    unlink(OUT);
    s = store_open(OUT, &ax, &prov, STORE_RESUME, KEEP, &err);
    CHECK(s && store_was_rebuilt(s), "rebuild after delete: %s", err.msg);
    if (s) store_close(s, "interrupted", &err);
    check_file("rebuilt after delete", 2, 2, want);

    /* --- the HDF5 file corrupted: rebuilt --- */
    {
        FILE *f = fopen(OUT, "r+b");
        char junk[2048];
        memset(junk, 0x5A, sizeof junk);
        fwrite(junk, 1, sizeof junk, f);
        fclose(f);
    }
    s = store_open(OUT, &ax, &prov, STORE_RESUME, KEEP, &err);
    CHECK(s && store_was_rebuilt(s), "rebuild after corruption: %s", err.msg);
    if (s) {
        CHECK(commit_one(s, 1, 0, &err) == 0, "commit after rebuild: %s", err.msg);
        CHECK(store_cell_attempts(s, 0, 1, 0) == 2, "attempts across crash %d", store_cell_attempts(s, 0, 1, 0));
        store_close(s, "finished", &err);
    }
    want[1][0] = STORE_DONE;
    check_file("rebuilt after corruption", 2, 2, want);
    {
        hid_t f = H5Fopen(OUT, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t d = H5Dopen2(f, "provenance/cells_done", H5P_DEFAULT);
        hid_t sp = H5Dget_space(d);
        hsize_t nseg = 0;
        H5Sget_simple_extent_dims(sp, &nseg, NULL);
        /* segments: create, reopen, crashed child, torn resume, delete, corrupt */
        CHECK(nseg == 6, "6 segments, got %llu", (unsigned long long)nseg);
        int32_t done[16] = {0};
        H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, done);
        CHECK(done[0] == 3 && done[1] == 1 && done[5] == 1, "cells per segment %d %d %d", done[0], done[1], done[5]);
        H5Sclose(sp), H5Dclose(d), H5Fclose(f);
    }
    /* A segment killed after a durable commit (no end record) still counts its cells. */
    child = fork();
    if (child == 0) {
        as_err e;
        store *c = store_open(OUT, &ax, &prov, STORE_RESUME, 0, &e);
        if (!c || commit_one(c, 1, 0, &e)) _exit(1);
        _exit(0); /* no close: like SIGKILL after the fsync */
    }
    waitpid(child, &wst, 0);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "killed child committed");
    s = store_open(OUT, &ax, &prov, STORE_RESUME, 0, &err);
    CHECK(s != NULL, "resume after the killed segment: %s", err.msg);
    if (s) store_close(s, "finished", &err);
    {
        hid_t f = H5Fopen(OUT, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t d = H5Dopen2(f, "provenance/cells_done", H5P_DEFAULT);
        hid_t e = H5Dopen2(f, "provenance/end", H5P_DEFAULT);
        int32_t done[16] = {0};
        double end[16] = {0};
        H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, done);
        H5Dread(e, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, end);
        CHECK(done[6] == 1 && end[6] != end[6], "killed segment: cells_done %d (want 1), end NaN", done[6]);
        CHECK(done[2] == 0, "crashed child's torn commit is not counted: %d", done[2]);
        H5Dclose(e), H5Dclose(d), H5Fclose(f);
    }

    /* --- a changed config is refused unless allowed; files unchanged --- */
    long long jsize = file_size(JPATH), hsize = file_size(OUT);
    /* The new config is long (over 64 KB, the limit of fixed-length string
     * attributes in the default format). */
    char *big = malloc(100001);
    for (int i = 0; i < 100000; i++) big[i] = i % 80 == 79 ? '\n' : (char)('a' + i % 26);
    big[100000] = 0;
    store_provenance prov2 = fx_prov(big, "sha-two");
    s = store_open(OUT, &ax, &prov2, STORE_RESUME, KEEP, &err);
    CHECK(s == NULL && strstr(err.msg, "config changed"), "config change refused: %s", err.msg);
    CHECK(file_size(JPATH) == jsize && file_size(OUT) == hsize && file_size(LPATH) < 0,
          "refusal leaves files unchanged");
    /* removing an L value is refused too */
    store_axes shrunk = fx_axes(2, 1);
    s = store_open(OUT, &shrunk, &prov, STORE_RESUME, STORE_ALLOW_CONFIG_CHANGE | KEEP, &err);
    CHECK(s == NULL && strstr(err.msg, "outside"), "shrink refused: %s", err.msg);
    CHECK(file_size(JPATH) == jsize && file_size(OUT) == hsize, "shrink refusal leaves files");
    s = store_open(OUT, &ax, &prov, STORE_NEW, KEEP, &err);
    CHECK(s == NULL && strstr(err.msg, "exists"), "STORE_NEW on an existing output: %s", err.msg);

    /* --- extension: a window and an L value appended --- */
    store_axes grown = fx_axes(3, 3);
    s = store_open(OUT, &grown, &prov2, STORE_RESUME, STORE_ALLOW_CONFIG_CHANGE | KEEP, &err);
    CHECK(s && store_was_rebuilt(s), "extension: %s", err.msg);
    if (s) {
        CHECK(store_total(s) == 9 && store_count(s, STORE_DONE) == 4, "extended counts");
        CHECK(commit_one(s, 2, 2, &err) == 0, "commit in a new cell: %s", err.msg);
        store_close(s, "interrupted", &err);
    }
    want[2][2] = STORE_DONE;
    hsize_t d7[9];
    CHECK(dims_of(OUT, "dist_true", d7) == 8 && d7[0] == 1 && d7[1] == 3 && d7[2] == 3,
          "extended dims %llu x %llu x %llu", (unsigned long long)d7[0], (unsigned long long)d7[1],
          (unsigned long long)d7[2]);
    check_file("extended", 3, 3, want);
    CHECK(store_peek_config(OUT, &text, &sha, &err) == 1 && !strcmp(sha, "sha-two") &&
              !strcmp(text, big), "new config stored");
    free(text), free(sha);
    {
        hid_t f = H5Fopen(OUT, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t a = H5Aopen(f, "config_text", H5P_DEFAULT);
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
        char *v = NULL;
        H5Aread(a, t, &v);
        CHECK(v && !strcmp(v, big), "100 KB config_text attribute round trip");
        H5free_memory(v);
        H5Tclose(t), H5Aclose(a), H5Fclose(f);
    }
    /* A temp file left by a writer killed mid-rebuild is removed at the next open. */
    char stale_tmp[300];
    snprintf(stale_tmp, sizeof stale_tmp, "%s.tmp.999999", OUT);
    fclose(fopen(stale_tmp, "w"));

    /* --- locks --- */
    {
        FILE *f = fopen(LPATH, "w");
        fprintf(f, "host=%s\npid=%ld\nslurm_job_id=77\nstarted=now\n", lock_hostname(), (long)getppid());
        fclose(f);
        s = store_open(OUT, &grown, &prov2, STORE_RESUME, KEEP, &err);
        CHECK(s == NULL && strstr(err.msg, "in use") && strstr(err.msg, "77"), "live lock refused: %s", err.msg);
        f = fopen(LPATH, "w");
        fprintf(f, "host=some-other-node\npid=1\nslurm_job_id=\nstarted=now\n");
        fclose(f);
        s = store_open(OUT, &grown, &prov2, STORE_RESUME, KEEP, &err);
        CHECK(s == NULL && strstr(err.msg, "some-other-node"), "foreign lock refused: %s", err.msg);
        CHECK(file_size(LPATH) > 0, "foreign lock left in place");
        pid_t dead = fork();
        if (dead == 0) _exit(0);
        waitpid(dead, NULL, 0);
        f = fopen(LPATH, "w");
        fprintf(f, "host=%s\npid=%ld\nslurm_job_id=\nstarted=now\n", lock_hostname(), (long)dead);
        fclose(f);
        s = store_open(OUT, &grown, &prov2, STORE_RESUME, KEEP, &err);
        CHECK(s != NULL, "stale lock taken over: %s", err.msg);
        if (s) store_close(s, "finished", &err);
        CHECK(file_size(LPATH) < 0, "lock removed");
        CHECK(file_size(stale_tmp) < 0, "stale temp file removed");
    }

    /* --- an output without its journal is refused --- */
    unlink(JPATH);
    s = store_open(OUT, &grown, &prov2, STORE_RESUME, KEEP, &err);
    CHECK(s == NULL && strstr(err.msg, "journal"), "file without journal refused: %s", err.msg);
    remove_all();
    free(big);
    test_compacted();
    return check_summary("test_store");
}
