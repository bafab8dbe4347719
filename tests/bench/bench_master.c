/* bench_master.c -- can one master keep up with W workers on the paper grid?
 *
 * The master's work per window of configs/paper.cfg (6 L values x 28 N x 22 T x 3 eps,
 * 144 heads): receive one unit message of 6 packed cells (a memcpy into the receive
 * buffer stands in for MPI's copy out of the network), commit the cells (HDF5 view +
 * journal + fsync, store_commit_packed, commit_every cells per batch), and the journal's
 * compaction whenever 1 GiB of values is whole in it, and at the close. Runs WINDOWS
 * windows as fast as the store takes them and prints the sustained windows/s against
 * the rate W workers produce: W / WINDOW_S (WINDOW_S: seconds one worker needs per
 * window; 96.6 s of compute per window per worker measured with bench_paper.sh, i.e.
 * 48.3 s per window on 2 cores; the default 48.3 is the stricter reading).
 * usage: bench_master DIR [WINDOWS] [WORKERS] [WINDOW_S] [COMMIT_EVERY] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static long long size_of(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (long long)st.st_size;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_master DIR [WINDOWS] [WORKERS] [WINDOW_S] [COMMIT_EVERY]\n");
        return 2;
    }
    size_t nw = argc > 2 ? (size_t)atoi(argv[2]) : 40;
    double workers = argc > 3 ? atof(argv[3]) : 2000, window_s = argc > 4 ? atof(argv[4]) : 48.3;
    size_t every = argc > 5 ? (size_t)atoi(argv[5]) : 6;
    char out[4096], side[4200];
    snprintf(out, sizeof out, "%s/bench_master.h5", argv[1]);
    const char *sfx[] = {"", ".journal", ".status", ".lock"};
    for (int i = 0; i < 4; i++) snprintf(side, sizeof side, "%s%s", out, sfx[i]), unlink(side);
    int32_t L[6] = {1024, 512, 256, 128, 64, 32}, layer[12], head[12];
    int32_t N[28] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                     20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128};
    double T[22], eps[3] = {1e-3, 1e-1, 10.0};
    for (int i = 0; i < 22; i++) T[i] = pow(10.0, -3 + 5.0 * i / 21);
    for (int i = 0; i < 12; i++) layer[i] = head[i] = i;
    int64_t *ws = malloc(nw * sizeof *ws);
    for (size_t i = 0; i < nw; i++) ws[i] = 1024 * (int64_t)i;
    const char *norm[] = {"softmax"};
    store_axes ax = {nw, ws, 6, L, 28, N, 22, T, 3, eps, 1, norm, 12, layer, 12, head};
    store_provenance prov = {.config_text = "bench", .config_sha256 = "bench", .hosts = "localhost",
                             .mpi_size = 1};
    as_err err;
    store *s = store_open(out, &ax, &prov, STORE_NEW, 0, &err);
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cr_layout lay;
    cr_layout_init(&lay, 28, 22, 3, 1, 12, 12);
    size_t pb = store_pack_bytes(&lay);
    /* one window's message as the workers send it: 6 packed cells */
    unsigned char *sent = malloc(6 * pb), *recv = malloc(60 * pb);
    double *block = malloc(lay.total * sizeof *block);
    for (int c = 0; c < 6; c++) {
        for (size_t i = 0; i < lay.total; i++) block[i] = 1.0 + 0.3 * sin(0.001 * i + c) + 1e-3 * (rand() % 1000);
        store_pack_cell(&lay, block, sent + c * pb);
    }
    store_cell cells[64];
    const unsigned char *pk[64];
    size_t held = 0;
    double t0 = now(), c0 = cpu();
    /* as attnsweep run: commit_every / 6 windows (at least one) per batch */
    size_t per_batch = every / 6 ? every / 6 : 1;
    if (per_batch > 10) per_batch = 10;
    for (size_t w = 0; w < nw; w++) {
        unsigned char *r = recv + (w % per_batch) * 6 * pb;
        memcpy(r, sent, 6 * pb); /* the receive */
        for (int c = 0; c < 6; c++) {
            cells[held] = (store_cell){w, (size_t)c, STORE_DONE, 1, 0, 1, 1};
            pk[held++] = r + c * pb;
        }
        if (held == 6 * per_batch || w + 1 == nw) {
            if (store_commit_packed(s, cells, pk, held, &err)) goto fail;
            held = 0;
        }
    }
    double t1 = now();
    if (store_close(s, "finished", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t2 = now(), c2 = cpu();
    snprintf(side, sizeof side, "%s.journal", out);
    double mb = 6.0 * (double)pb * (double)nw / 1e6;
    double sustained = (double)nw / (t2 - t0), required = workers / window_s;
    printf("paper grid: %zu windows x 6 cells of %.2f MB (float32, as stored and as sent), commit_every %zu\n",
           nw, pb / 1e6, every);
    printf("master: %.2f s wall (%.2f s commits + %.2f s close with the last compaction), %.2f s cpu: "
           "%.2f ms wall and %.2f ms cpu per MB\n", t2 - t0, t1 - t0, t2 - t1, c2 - c0,
           1e3 * (t2 - t0) / mb, 1e3 * (c2 - c0) / mb);
    printf("disk: HDF5 %.1f MB, journal %.2f MB\n", size_of(out) / 1e6, size_of(side) / 1e6);
    printf("sustained %.1f windows/s (%.0f MB/s); required for %.0f workers at %.1f s per window: "
           "%.1f windows/s (%.0f MB/s): %s (%.2fx)\n", sustained, sustained * 6 * pb / 1e6, workers,
           window_s, required, required * 6 * pb / 1e6, sustained >= required ? "KEEPS UP" : "FALLS BEHIND",
           sustained / required);
    for (int i = 0; i < 4; i++) snprintf(side, sizeof side, "%s%s", out, sfx[i]), unlink(side);
    return 0;
fail:
    fprintf(stderr, "%s\n", err.msg);
    return 1;
}
