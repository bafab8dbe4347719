/* bench_master.c -- can one master keep up with W workers on the paper grid?
 *
 * The master's work per window of configs/paper.cfg (6 L values x 28 N x 22 T x 3 eps,
 * 144 heads): receive one unit message of 6 packed cells, commit the cells (HDF5 view +
 * journal + fsync, store_commit_packed, as attnsweep run's commit callback does), and
 * the journal's compaction whenever 1 GiB of values is whole in it, and at the close.
 * The master's own queue (src/mpi/writer.c) carries the results: the main thread
 * "receives" each window into a free slot (a memcpy stands in for MPI's copy out of
 * the network or shared memory) as fast as slots come free, so the windows arrive
 * faster than any 2,000 workers send them and the rate measured is what the master
 * sustains. Two paths, alternating in one run:
 *   sync    the commit on the receiving thread (the master before the writer thread)
 *   thread  a writer thread commits while the main thread receives (group commit)
 * and prints windows/s of each (receive to the end of store_close, compaction
 * included) against the rate W workers produce: W / WINDOW_S (WINDOW_S: seconds one
 * worker needs per window; 96.6 s of compute per window per worker measured with
 * bench_paper.sh, i.e. 48.3 s per window on 2 cores; the default 48.3 is the stricter
 * reading; `attnsweep plan` estimates 72 s for GPT-2 small with the current kernels),
 * and the ratio thread / sync pair by pair. DIR on tmpfs takes the disk out.
 *
 * --forms LIST compares how the cells are stored instead (on the path MODE names; "both"
 * means the writer thread here), alternating the forms run by run, ratios pair by pair
 * against the first form:
 *   plain     float32 chunks, no filter (STORE_COMPRESSED off)
 *   hdf5      shuffle + deflate 1 through HDF5's filter pipeline on the master (packed
 *             cells, STORE_COMPRESSED: runtime.compress before the workers deflated)
 *   deflated  the workers deflate (cw_deflate_cell, timed here once per window as the
 *             worker's cost), the master writes the chunks as sent (store_commit_deflated)
 * --cells FILE takes the 6 cells of one window from FILE (6 x 2,937,176 bytes: the packed
 * cells of a paper window, cr_var order, file types; tools/paper_cells.py writes it
 * from a results file) instead of the synthetic sine values, which compress differently.
 * usage: bench_master DIR [WINDOWS] [WORKERS] [WINDOW_S] [COMMIT_EVERY] [RUNS] [sync|thread|both]
 *                     [BATCH_MAX] [--forms plain,deflated] [--cells FILE]
 *                     (BATCH_MAX: windows; default 2 x commit_every's, as the scheduler) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "writer.h"

enum { CELLS = 6 };

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

enum { F_PLAIN, F_HDF5, F_DEFLATED, F_COUNT };
static const char *const form_names[F_COUNT] = {"plain", "hdf5", "deflated"};

typedef struct {
    store *s;
    size_t pb;     /* bytes per cell in a message: packed, or the deflated bound */
    int deflated;  /* cells arrive deflated (store_commit_deflated) */
} bench_ctx;

/* One store call for held cells, in the form they arrived (packed or deflated). */
static int commit_held(bench_ctx *b, const store_cell *sc, const unsigned char *const *pk, size_t n,
                       as_err *err) {
    return b->deflated ? store_commit_deflated(b->s, sc, pk, n, err)
                       : store_commit_packed(b->s, sc, pk, n, err);
}

/* As run.c's run_commit_units: each unit (window) is 6 cells; up to 64 cells per store call. */
static int commit_windows(void *vctx, const int64_t *units, double *const *blocks, const int *status,
                          size_t n, as_err *err) {
    bench_ctx *b = vctx;
    store_cell sc[64];
    const unsigned char *pk[64];
    size_t held = 0;
    for (size_t i = 0; i < n; i++) {
        if (held + CELLS > 64) {
            if (commit_held(b, sc, pk, held, err)) return -1;
            held = 0;
        }
        for (int c = 0; c < CELLS; c++) {
            sc[held] = (store_cell){(size_t)units[i], (size_t)c, status[i] == 1 ? STORE_DONE : STORE_FAILED,
                                    1, 0, 1, 1, 0};
            pk[held++] = (const unsigned char *)blocks[i] + (size_t)c * b->pb;
        }
    }
    return held ? commit_held(b, sc, pk, held, err) : 0;
}

typedef struct {
    double wall, commits, close, cpu, windows_per_s;
    size_t batches, largest;
    long long h5, journal;
} run_result;

static const char *sfx[] = {"", ".journal", ".status", ".lock"};

static void clean(const char *out) {
    char side[4200];
    for (int i = 0; i < 4; i++) snprintf(side, sizeof side, "%s%s", out, sfx[i]), unlink(side);
}

static size_t batch_max_units; /* writer thread: most windows per batch */

static int run_once(const char *dir, int threaded, int form, size_t nw, size_t units_per_commit,
                    const unsigned char *sent, size_t pb, run_result *res) {
    char out[4096], side[4200];
    snprintf(out, sizeof out, "%s/bench_master.h5", dir);
    clean(out);
    int32_t L[6] = {1024, 512, 256, 128, 64, 32}, layer[12], head[12];
    int32_t N[28] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                     20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128};
    double T[22], eps[3] = {1e-3, 1e-1, 10.0};
    for (int i = 0; i < 22; i++) T[i] = pow(10.0, -3 + 5.0 * i / 21);
    for (int i = 0; i < 12; i++) layer[i] = head[i] = i;
    int64_t *ws = malloc(nw * sizeof *ws);
    for (size_t i = 0; i < nw; i++) ws[i] = 1024 * (int64_t)i;
    const char *norm[] = {"softmax"};
    /* one model: n_model = 0 (store.h) */
    store_axes ax = {.n_window = nw, .window_start = ws, .n_L = 6, .L = L,
                     .n_N = 28, .N = N, .n_T = 22, .T = T, .n_eps = 3, .eps = eps,
                     .n_norm = 1, .normalizer = norm, .n_layer = 12, .layer = layer, .n_head = 12, .head = head};
    store_provenance prov = {.config_text = "bench", .config_sha256 = "bench", .hosts = "localhost",
                             .mpi_size = 1};
    as_err err = {{0}};
    bench_ctx b = {store_open(out, &ax, &prov, STORE_NEW, form == F_PLAIN ? 0 : STORE_COMPRESSED, &err), pb,
                   form == F_DEFLATED};
    if (!b.s) goto fail;
    /* the scheduler's sizes (scheduler.c master_init) */
    writer_opts wo = {.slot_bytes = (CELLS * pb + 7) / 8 * 8, .block_offset = 0,
                      .commit_every = units_per_commit,
                      .batch_max = threaded ? batch_max_units : units_per_commit,
                      .max_dispatches = 16, .threaded = threaded,
                      .commit = commit_windows, .ctx = &b};
    wo.nslots = threaded ? writer_slots_for(wo.commit_every, wo.batch_max) : units_per_commit + 1;
    as_writer *w = writer_create(&wo, &err);
    if (!w) goto fail;
    double t0 = now(), c0 = cpu();
    for (size_t u = 0; u < nw; u++) {
        size_t slot;
        /* back-pressure: the writer is behind; wait without spinning, as the scheduler does */
        for (long ns = 20000; !writer_take_slot(w, &slot); ns = ns < 500000 ? 2 * ns : ns)
            nanosleep(&(struct timespec){0, ns}, NULL);
        memcpy(writer_slot(w, slot), sent, CELLS * pb);    /* the receive */
        if (writer_put_result(w, slot, (int64_t)u, 1, &err)) goto fail;
    }
    writer_stats wst;
    if (writer_finish(w, &wst, &err)) goto fail;
    double t1 = now();
    if (store_close(b.s, "finished", &err)) {
        b.s = NULL;
        goto fail;
    }
    double t2 = now(), c2 = cpu();
    snprintf(side, sizeof side, "%s.journal", out);
    *res = (run_result){.wall = t2 - t0, .commits = t1 - t0, .close = t2 - t1, .cpu = c2 - c0,
                        .windows_per_s = (double)nw / (t2 - t0), .batches = wst.batches,
                        .largest = wst.largest_batch, .h5 = size_of(out), .journal = size_of(side)};
    clean(out);
    free(ws);
    return 0;
fail:
    fprintf(stderr, "bench_master: %s\n", err.msg);
    if (b.s) store_close(b.s, "failed", &err);
    free(ws);
    return -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double deflate_window(const cr_layout *lay, const unsigned char *sent, size_t pb, unsigned char *out,
                             size_t dzb, double *bytes);

/* --forms: the store's forms side by side, alternating (see the top of the file). */
static int run_forms(const char *dir, const int *forms, int nforms, int threaded, size_t nw, size_t every,
                     int runs, double workers, double window_s, const cr_layout *lay, const unsigned char *sent,
                     size_t pb, const char *source) {
    size_t upc = every / CELLS ? every / CELLS : 1;
    if (batch_max_units < upc) batch_max_units = 2 * upc;
    size_t dzb = (cw_deflate_bound(lay) + 7) / 8 * 8;
    unsigned char *dz = malloc(CELLS * dzb);
    double dz_bytes = 0, dz_s = deflate_window(lay, sent, pb, dz, dzb, &dz_bytes);
    double raw = CELLS * (double)pb;
    printf("paper grid: %zu windows x %d cells of %.2f MB (%s); commit_every %zu cells = %zu window(s) per "
           "batch; %s path\n", nw, CELLS, pb / 1e6, source, every, upc, threaded ? "writer thread" : "sync");
    printf("worker: deflating one window (6 cells, %.1f MB) takes %.3f s of one core and gives %.1f MB "
           "(%.2fx)\n", raw / 1e6, dz_s, dz_bytes / 1e6, raw / dz_bytes);
    double r67 = workers / 67.0, r30 = workers / 30.0;
    printf("required for %.0f workers: %.1f windows/s at 67 s per window, %.1f at 30 s, %.1f at %.1f s\n",
           workers, r67, r30, workers / window_s, window_s);
    double w[F_COUNT][50], ratio[F_COUNT][50], mbw[F_COUNT] = {0};
    int nr = 0;
    for (int r = 0; r < runs; r++) {
        double got[F_COUNT];
        for (int k = 0; k < nforms; k++) {
            int f = forms[(k + r) % nforms]; /* rotate which goes first */
            run_result x;
            const unsigned char *msg = f == F_DEFLATED ? dz : sent;
            if (run_once(dir, threaded, f, nw, upc, msg, f == F_DEFLATED ? dzb : pb, &x)) return 1;
            printf("  %-8s %.2f s (%.2f s commits + %.2f s close), %.2f s cpu; HDF5 %.0f MB (%.2f MB per "
                   "window): %.1f windows/s\n", form_names[f], x.wall, x.commits, x.close, x.cpu, x.h5 / 1e6,
                   x.h5 / 1e6 / (double)nw, x.windows_per_s);
            fflush(stdout);
            got[f] = x.windows_per_s;
            mbw[f] = x.h5 / 1e6 / (double)nw;
        }
        for (int k = 0; k < nforms; k++) {
            w[forms[k]][nr] = got[forms[k]];
            ratio[forms[k]][nr] = got[forms[k]] / got[forms[0]];
        }
        nr++;
    }
    for (int k = 0; k < nforms; k++) {
        int f = forms[k];
        double m = median(w[f], nr), q = median(ratio[f], nr);
        printf("%-8s sustained %.1f windows/s (median of %d; %.2fx %s pair by pair); stores %.2f MB per "
               "window, writes ~%.2f MB per window (view + journal until compaction): %.2fx the 67 s rate "
               "(%.1f/s), %.2fx the 30 s rate (%.1f/s)\n",
               form_names[f], m, nr, q, form_names[forms[0]], mbw[f], 2 * mbw[f], m / r67, r67, m / r30, r30);
    }
    free(dz);
    return 0;
}

/* The 6 cells of a window deflated as the workers send them, each in a slot of dzb bytes;
 * returns the seconds one worker spends (median of 3) and the deflated bytes in *bytes. */
static double deflate_window(const cr_layout *lay, const unsigned char *sent, size_t pb, unsigned char *out,
                             size_t dzb, double *bytes) {
    unsigned char *scratch = malloc(pb);
    double t[3];
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        *bytes = 0;
        for (int c = 0; c < CELLS; c++) {
            size_t len = 0;
            as_err err;
            if (cw_deflate_cell(lay, sent + (size_t)c * pb, out + (size_t)c * dzb, dzb, &len, scratch, 1, &err))
                fprintf(stderr, "bench_master: %s\n", err.msg);
            memset(out + (size_t)c * dzb + len, 0, dzb - len);
            *bytes += (double)len;
        }
        t[r] = now() - t0;
    }
    free(scratch);
    return median(t, 3);
}

int main(int argc, char **argv) {
    /* --forms and --cells anywhere; the rest is positional */
    int forms[F_COUNT], nforms = 0;
    const char *cells_file = NULL;
    int pos = 1;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--cells") && a + 1 < argc) {
            cells_file = argv[++a];
        } else if (!strcmp(argv[a], "--forms") && a + 1 < argc) {
            char list[256];
            snprintf(list, sizeof list, "%s", argv[++a]);
            for (char *tok = strtok(list, ","); tok && nforms < F_COUNT; tok = strtok(NULL, ",")) {
                int f = -1;
                for (int k = 0; k < F_COUNT; k++)
                    if (!strcmp(tok, form_names[k])) f = k;
                if (f < 0) {
                    fprintf(stderr, "bench_master: unknown form '%s' (plain, hdf5, deflated)\n", tok);
                    return 2;
                }
                forms[nforms++] = f;
            }
        } else {
            argv[pos++] = argv[a];
        }
    }
    argc = pos;
    if (argc < 2) {
        fprintf(stderr, "usage: bench_master DIR [WINDOWS] [WORKERS] [WINDOW_S] [COMMIT_EVERY] [RUNS] "
                        "[sync|thread|both] [BATCH_MAX]\n");
        return 2;
    }
    size_t nw = argc > 2 ? (size_t)atoi(argv[2]) : 120;
    double workers = argc > 3 ? atof(argv[3]) : 2000, window_s = argc > 4 ? atof(argv[4]) : 48.3;
    size_t every = argc > 5 ? (size_t)atoi(argv[5]) : 8;
    int runs = argc > 6 ? atoi(argv[6]) : 3;
    const char *mode = argc > 7 ? argv[7] : "both";
    batch_max_units = argc > 8 ? (size_t)atoi(argv[8]) : 0;
    if (runs < 1 || runs > 50 || nw < 1) return 2;
    int do_sync = strcmp(mode, "thread") != 0, do_thread = strcmp(mode, "sync") != 0;
    cr_layout lay;
    cr_layout_init(&lay, 28, 22, 3, 1, 12, 12);
    size_t pb = cw_pack_bytes(&lay);
    /* one window's message as the workers send it: 6 packed cells */
    unsigned char *sent = malloc(CELLS * pb);
    double *block = malloc(lay.total * sizeof *block);
    for (int c = 0; c < CELLS; c++) {
        for (size_t i = 0; i < lay.total; i++) block[i] = 1.0 + 0.3 * sin(0.001 * i + c) + 1e-3 * (rand() % 1000);
        cw_pack_cell(&lay, block, sent + c * pb);
    }
    free(block);
    if (cells_file) {
        FILE *cf = fopen(cells_file, "rb");
        size_t got = cf ? fread(sent, 1, CELLS * pb, cf) : 0;
        if (cf) fclose(cf);
        if (got != CELLS * pb) {
            fprintf(stderr, "bench_master: %s: want %zu bytes (6 packed paper cells), got %zu\n", cells_file,
                    CELLS * pb, got);
            return 2;
        }
    }
    if (nforms) {
        size_t nw2 = nw;
        return run_forms(argv[1], forms, nforms, strcmp(mode, "sync") != 0, nw2, every, runs, workers,
                         window_s, &lay, sent, pb, cells_file ? cells_file : "synthetic sine values");
    }
    /* as attnsweep run: commit_every cells -> commit_every / 6 windows per batch (at least one) */
    size_t upc = every / CELLS ? every / CELLS : 1;
    if (batch_max_units < upc) batch_max_units = 2 * upc; /* the scheduler's default */
    double mb = CELLS * (double)pb * (double)nw / 1e6, required = workers / window_s;
    printf("paper grid: %zu windows x %d cells of %.2f MB (float32, as stored and as sent) = %.0f MB per run; "
           "commit_every %zu cells = %zu window(s) per batch (writer thread: up to %zu)\n",
           nw, CELLS, pb / 1e6, mb, every, upc, batch_max_units);
    printf("required for %.0f workers at %.1f s per window: %.1f windows/s (%.0f MB/s)\n", workers, window_s,
           required, required * CELLS * pb / 1e6);
    double rs[50], rt[50], ratio[50];
    int ns = 0, nt = 0, nr = 0;
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 2; k++) {
            int threaded = (k + r) % 2; /* alternate which goes first */
            if (threaded ? !do_thread : !do_sync) continue;
            run_result x;
            if (run_once(argv[1], threaded, F_PLAIN, nw, upc, sent, pb, &x)) return 1;
            printf("  %-6s %.2f s (%.2f s commits + %.2f s close with the last compaction), %.2f s cpu = %.2f ms "
                   "wall, %.2f ms cpu per MB; %zu batches (largest %zu windows); HDF5 %.0f MB, journal %.2f MB: "
                   "%.1f windows/s\n",
                   threaded ? "thread" : "sync", x.wall, x.commits, x.close, x.cpu, 1e3 * x.wall / mb,
                   1e3 * x.cpu / mb, x.batches, x.largest, x.h5 / 1e6, x.journal / 1e6, x.windows_per_s);
            fflush(stdout);
            if (threaded) rt[nt++] = x.windows_per_s;
            else rs[ns++] = x.windows_per_s;
        }
        if (do_sync && do_thread) ratio[nr++] = rt[nt - 1] / rs[ns - 1];
    }
    for (int k = 0; k < 2; k++) {
        int n = k ? nt : ns;
        if (!n) continue;
        double m = median(k ? rt : rs, n);
        printf("%-6s sustained %.1f windows/s (median of %d, %.0f MB/s): %s for %.0f workers (%.2fx the "
               "required %.1f)\n",
               k ? "thread" : "sync", m, n, m * CELLS * pb / 1e6, m >= required ? "KEEPS UP" : "FALLS BEHIND",
               workers, m / required, required);
    }
    if (nr) {
        double lo = ratio[0], hi = ratio[0];
        for (int i = 1; i < nr; i++) lo = ratio[i] < lo ? ratio[i] : lo, hi = ratio[i] > hi ? ratio[i] : hi;
        printf("thread / sync: %.2fx (median of %d pairs, spread %.2f-%.2f)\n", median(ratio, nr), nr, lo, hi);
    }
    free(sent);
    return 0;
}
