/* bench_store.c -- file sizes and commit time of the results store for
 * paper-sized cells: N = 1..128 (128 values), 21 temperatures, 3 eps, one
 * normalizer, 12 layers x 12 heads; WINDOWS x 2 L values, commit_every cells
 * per batch. Values are smooth pseudo-random floats (like real metrics, not
 * compressible to nothing).
 * usage: bench_store DIR [WINDOWS] [COMMIT_EVERY] [compressed|doubles|keep]...
 * compressed: chunks with shuffle + deflate (STORE_COMPRESSED), to time what
 * compression costs the master per commit.
 * doubles: commit blocks of doubles (store_commit_batch: the master packs them, as
 * before the workers deflated), instead of cells the workers packed (store_commit_packed, what
 * attnsweep run does now).
 * keep: STORE_KEEP_JOURNAL (no compaction: the journal keeps a second copy).
 * Prints the commit time per MB of stored values, the close (with the journal's
 * compaction) and the disk used after the close. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long long size_of(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (long long)st.st_size;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_store DIR [WINDOWS] [COMMIT_EVERY] [compressed]\n");
        return 2;
    }
    size_t nw = argc > 2 ? (size_t)atoi(argv[2]) : 8, every = argc > 3 ? (size_t)atoi(argv[3]) : 8;
    int flags = 0, doubles = 0;
    for (int a = 4; a < argc; a++) {
        if (!strcmp(argv[a], "compressed")) flags |= STORE_COMPRESSED;
        else if (!strcmp(argv[a], "keep")) flags |= STORE_KEEP_JOURNAL;
        else if (!strcmp(argv[a], "doubles")) doubles = 1;
        else {
            fprintf(stderr, "bench_store: unknown option %s\n", argv[a]);
            return 2;
        }
    }
    char out[4096], side[4200];
    snprintf(out, sizeof out, "%s/bench_store.h5", argv[1]);
    const char *sfx[] = {"", ".journal", ".status", ".lock"};
    for (int i = 0; i < 4; i++) snprintf(side, sizeof side, "%s%s", out, sfx[i]), unlink(side);
    int32_t N[128], layer[12], head[12], L[2] = {512, 1024};
    double T[21], eps[3] = {1e-4, 1e-3, 1e-2};
    int64_t *ws = malloc(nw * sizeof *ws);
    for (int i = 0; i < 128; i++) N[i] = i + 1;
    for (int i = 0; i < 21; i++) T[i] = pow(2.0, -5 + 0.5 * i);
    for (int i = 0; i < 12; i++) layer[i] = head[i] = i;
    for (size_t i = 0; i < nw; i++) ws[i] = 1024 * (int64_t)i;
    const char *norm[] = {"softmax"};
    /* one model: n_model = 0 (store.h) */
    store_axes ax = {.n_window = nw, .window_start = ws, .n_L = 2, .L = L,
                     .n_N = 128, .N = N, .n_T = 21, .T = T, .n_eps = 3, .eps = eps,
                     .n_norm = 1, .normalizer = norm, .n_layer = 12, .layer = layer, .n_head = 12, .head = head};
    store_provenance prov = {.config_text = "bench", .config_sha256 = "bench", .hosts = "localhost",
                             .mpi_size = 1};
    as_err err;
    store *s = store_open(out, &ax, &prov, STORE_NEW, flags, &err);
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t nd = store_block_doubles(s);
    double **blocks = malloc(every * sizeof *blocks);
    for (size_t b = 0; b < every; b++) {
        blocks[b] = malloc(nd * sizeof **blocks);
        for (size_t i = 0; i < nd; i++) blocks[b][i] = 1.0 + 0.3 * sin(0.001 * i + b) + 1e-3 * (rand() % 1000);
    }
    cr_layout lay;
    cr_layout_init(&lay, 128, 21, 3, 1, 12, 12);
    size_t pb = cw_pack_bytes(&lay);
    unsigned char **packed = malloc(every * sizeof *packed);
    for (size_t b = 0; b < every; b++) {
        packed[b] = malloc(pb);
        cw_pack_cell(&lay, blocks[b], packed[b]);
    }
    store_cell *cells = calloc(every, sizeof *cells);
    size_t total = nw * 2, done = 0;
    double t0 = now();
    while (done < total) {
        size_t n = 0;
        for (; n < every && done + n < total; n++)
            cells[n] = (store_cell){(done + n) / 2, (done + n) % 2, STORE_DONE, 1, 0, 1, 1, 0};
        int rc = doubles ? store_commit_batch(s, cells, (const double *const *)blocks, n, &err)
                         : store_commit_packed(s, cells, (const unsigned char *const *)packed, n, &err);
        if (rc) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        done += n;
    }
    double t1 = now();
    if (store_close(s, "finished", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t2 = now();
    snprintf(side, sizeof side, "%s.journal", out);
    long long h5 = size_of(out), jr = size_of(side);
    printf("cell block: %zu doubles (%.2f MB as doubles)\n", nd, nd * 8 / 1e6);
    double mb = (double)pb * total / 1e6;
    printf("%zu cells, commit_every %zu, %s%s: %.3f s commit time, %.1f ms per cell, %.2f ms per MB "
           "stored (%.2f MB per cell as stored)\n", total, every,
           doubles ? "blocks of doubles" : "packed by the workers", flags & STORE_COMPRESSED ? ", compressed" : "",
           t1 - t0, 1e3 * (t1 - t0) / total, 1e3 * (t1 - t0) / mb, pb / 1e6);
    printf("close (%s): %.3f s\n", flags & STORE_KEEP_JOURNAL ? "journal kept whole"
           : "journal compacted: view fsynced, every cell read back", t2 - t1);
    printf("HDF5 %.2f MB (%.2f MB per cell), journal %.2f MB (%.4f MB per cell): disk %.2fx the "
           "results\n", h5 / 1e6, h5 / 1e6 / total, jr / 1e6, jr / 1e6 / total,
           (double)(h5 + jr) / (double)h5);
    t0 = now();
    unlink(out);
    s = store_open(out, &ax, &prov, STORE_RESUME, flags, &err);
    t1 = now();
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("rebuild from the journal after deleting the HDF5 file: %.3f s (%s, %zu of %zu cells "
           "done: %s)\n", t1 - t0, store_was_rebuilt(s) ? "rebuilt" : "NOT rebuilt",
           store_count(s, STORE_DONE), total, store_count(s, STORE_DONE) == total ? "all"
           : "compacted cells are recomputed");
    store_close(s, "finished", &err);
    for (int i = 0; i < 4; i++) snprintf(side, sizeof side, "%s%s", out, sfx[i]), unlink(side);
    return 0;
}
