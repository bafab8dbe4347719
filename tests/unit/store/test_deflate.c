/* test_deflate.c -- compressed cells (src/core/cellwire_deflate.c, chunks.c, commit.c).
 *
 * The reference is HDF5 itself: each variable's cell block is written through HDF5's own
 * shuffle + deflate(1) filter pipeline into a dataset of one chunk (H5Dwrite), read back
 * raw (H5Dread_chunk), and compared byte for byte with what cw_deflate_cell made of
 * the same packed values; the deflated form's header is parsed here from its description
 * in cellwire_deflate.c, not with the store's own helpers. Then the store: deflated commits read
 * back equal to packed ones through the filters (compressed view) and inflated (plain
 * view); a journal of deflated payloads rebuilds a lost view; compacted deflated cells
 * come back from the old view's raw chunks when an extension rebuilds it; a damaged
 * payload is refused with nothing written; an existing view's filters, not the flag,
 * decide how a resumed store writes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "journal.h"
#include "store.h"
#include "store_fixture.h"

/* the metric variables of an unsampled layout (the store tests' fixture) */
enum { NV = CR_FIRST_SAMPLED };

static size_t elem_size(int v) {
    return v == CR_KS_STAT || v == CR_KS_PVALUE ? 8 : 4;
}

static uint64_t get64(const unsigned char *p) {
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | p[i];
    return x;
}

/* A block with structure and noise, so deflate has work and the shuffle matters:
 * smooth means, NaN holes, counts, tiny p-values. */
static void fill_noisy(double *b, const cr_layout *lay, unsigned seed) {
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (int v = 0; v < CR_NVARS; v++)
        for (size_t k = 0; k < lay->count[v]; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            double u = (double)(x >> 11) / 9007199254740992.0;
            double val = exp(-(double)k / 97.0) * (1.0 + 0.01 * u);
            if (v == CR_ROWS_USED || v == CR_CRIT_N) val = (double)(k % 50) + (u < 0.1 ? 1 : 0);
            if (v == CR_KS_PVALUE) val = pow(u, 12.0);
            if (v == CR_DIST_BOUND && k % 37 == 0) val = NAN;
            b[lay->offset[v] + k] = val;
        }
}

/* The chunk HDF5 stores for n elements of variable v (its pipeline: shuffle, deflate 1, and
 * with sum fletcher32). */
static unsigned char *hdf5_chunk(int v, const unsigned char *data, size_t n, int sum, hsize_t *size) {
    const char *path = "test_deflate.ref.h5";
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dim = n;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &dim);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 1);
    if (sum) H5Pset_fletcher32(dcpl);
    hid_t t = elem_size(v) == 8 ? H5T_IEEE_F64LE : (v == CR_ROWS_USED || v == CR_CRIT_N || v == CR_CRIT_N_CENSORED || v == CR_ROWS_SAMPLED) ? H5T_STD_I32LE
                                                                                          : H5T_IEEE_F32LE;
    hid_t ds = H5Dcreate2(f, "x", t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(ds);
    H5Fclose(f);
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ds = H5Dopen2(f, "x", H5P_DEFAULT);
    hsize_t off = 0;
    uint32_t mask = 1;
    *size = 0;
    H5Dget_chunk_storage_size(ds, &off, size);
    unsigned char *buf = malloc(*size ? *size : 1);
    if (H5Dread_chunk(ds, H5P_DEFAULT, &off, &mask, buf) < 0 || mask != 0) *size = 0;
    H5Dclose(ds);
    H5Fclose(f);
    H5Pclose(dcpl);
    H5Sclose(sp);
    unlink(path);
    return buf;
}

static void test_equals_hdf5(size_t n_N, size_t n_T, size_t n_eps, size_t n_layer, size_t n_head,
                             unsigned seed, int sum, int sampled) {
    cr_layout lay;
    cr_layout_init(&lay, n_N, n_T, n_eps, 1, n_layer, n_head);
    cr_layout_sample(&lay, sampled); /* metrics.query_rows = "sample:K": the SE variables too */
    const int nv = sampled ? CR_WALL_TIME : CR_FIRST_SAMPLED;
    double *block = malloc(lay.total * sizeof *block);
    size_t pb = cw_pack_bytes(&lay), cap = cw_deflate_bound(&lay);
    unsigned char *packed = malloc(pb), *dz = malloc(cap), *scratch = malloc(pb), *back = malloc(pb);
    fill_noisy(block, &lay, seed);
    cw_pack_cell(&lay, block, packed);
    size_t len = 0;
    as_err err;
    CHECK(cw_deflate_cell(&lay, packed, dz, cap, &len, scratch, sum, &err) == 0, "deflate: %s", err.msg);
    CHECK(memcmp(dz, sum ? "ASZ2" : "ASZ1", 4) == 0 && dz[4] == nv && !dz[5] && !dz[6] && !dz[7], "header magic and count");
    CHECK(cw_deflated_size(&lay, dz, cap) == len, "self-described size %zu", len);
    size_t at = 8 + 8 * nv, off = 0;
    int equal = 0;
    for (int v = 0; v < nv; v++) {
        size_t cl = (size_t)get64(dz + 8 + 8 * (size_t)v), n = lay.count[v];
        hsize_t hs;
        unsigned char *ref = hdf5_chunk(v, packed + off, n, sum, &hs);
        int same = hs == cl && at + cl <= len && memcmp(ref, dz + at, cl) == 0;
        CHECK(same, "%s (%zu elements of %zu bytes): our chunk %zu bytes, HDF5's %llu bytes%s",
              cr_var_name((cr_var)v), n, elem_size(v), cl, (unsigned long long)hs,
              hs == cl ? ", other bytes" : "");
        equal += same;
        free(ref);
        at += cl, off += n * elem_size(v);
    }
    CHECK(at == len, "chunks fill the payload: %zu of %zu", at, len);
    CHECK(cw_inflate_cell(&lay, dz, len, back, scratch, &err) == 0 && memcmp(back, packed, pb) == 0,
          "inflate gives the packed values back");
    printf("layout %zux%zux%zu, %zux%zu heads%s: %zu bytes packed, %zu deflated (%.2fx); %d of %d "
           "chunks equal to HDF5's\n", n_N, n_T, n_eps, n_layer, n_head, sum ? ", Fletcher32" : "",
           pb, len, (double)pb / (double)len, equal, nv);
    /* a damaged header is not a cell */
    dz[8 + 5] ^= 0x40; /* a length past what the layout allows */
    CHECK(cw_deflated_size(&lay, dz, cap) == 0, "an impossible length is refused");
    dz[8 + 5] ^= 0x40;
    dz[8] ^= 0x01; /* a plausible length: the sizes no longer add up to the payload */
    CHECK(cw_inflate_cell(&lay, dz, len, back, scratch, &err) != 0, "inflate refuses a changed length");
    dz[8] ^= 0x01;
    dz[at - 3] ^= 0xff; /* inside the last chunk's Adler-32 (with sum: its Fletcher32) */
    CHECK(cw_inflate_cell(&lay, dz, len, back, scratch, &err) != 0, "inflate refuses a damaged stream");
    dz[at - 3] ^= 0xff;
    if (sum) {
        dz[8 + 8 * nv + 2] ^= 0x10; /* inside the first chunk's deflate data: its checksum fails */
        CHECK(cw_inflate_cell(&lay, dz, len, back, scratch, &err) != 0 && strstr(err.msg, "Fletcher32"),
              "inflate refuses a chunk that fails its checksum: %s", err.msg);
        dz[8 + 8 * nv + 2] ^= 0x10;
    }
    free(block), free(packed), free(dz), free(scratch), free(back);
}

/* ---- the Fletcher32 checksum alone (src/core/cellwire_fletcher32.c) ---- */

uint32_t cw_fletcher32(const unsigned char *p, size_t n);

/* The checksum HDF5's fletcher32 filter appends to a chunk of n bytes (uint8 elements, the
 * filter alone), as stored: the last 4 bytes of H5Dread_chunk, least significant first. */
static int hdf5_fletcher32(const unsigned char *data, size_t n, uint32_t *sum) {
    const char *path = "test_deflate.f32.h5";
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dim = n;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &dim);
    H5Pset_fletcher32(dcpl);
    hid_t ds = H5Dcreate2(f, "x", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int rc = H5Dwrite(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 ? -1 : 0;
    hsize_t off = 0, size = 0;
    uint32_t mask = 1;
    unsigned char *buf = malloc(n + 4);
    if (!rc && (H5Dget_chunk_storage_size(ds, &off, &size) < 0 || size != n + 4 ||
                H5Dread_chunk(ds, H5P_DEFAULT, &off, &mask, buf) < 0 || mask != 0 || memcmp(buf, data, n)))
        rc = -1;
    *sum = 0;
    for (int i = 3; !rc && i >= 0; i--) *sum = *sum << 8 | buf[n + (size_t)i];
    free(buf);
    H5Dclose(ds), H5Pclose(dcpl), H5Sclose(sp), H5Fclose(f);
    unlink(path);
    return rc;
}

/* Lengths around HDF5's 360-word reduction step and our 128-word block, odd lengths (the
 * last byte a half word), and contents whose sums are 0 or a multiple of 65535 (the ones'-
 * complement 0xffff), against HDF5's own filter. */
static void test_fletcher32(void) {
    static const size_t lens[] = {1, 2, 3, 4, 255, 256, 257, 719, 720, 721, 722, 1441, 65535, 1000003};
    unsigned char *b = malloc(1000003);
    uint64_t x = 42;
    int cases = 0, equal = 0;
    for (int kind = 0; kind < 4; kind++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            size_t n = lens[i];
            for (size_t k = 0; k < n; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                b[k] = kind == 0 ? (unsigned char)x : kind == 1 ? 0 : kind == 2 ? 0xff : (unsigned char)(k % 2 ? 0xff : 0);
            }
            uint32_t want, got = cw_fletcher32(b, n);
            CHECK(hdf5_fletcher32(b, n, &want) == 0, "HDF5's fletcher32 chunk of %zu bytes", n);
            CHECK(got == want, "Fletcher32 of %zu %s bytes: ours %08x, HDF5's %08x", n,
                  kind == 0 ? "random" : kind == 1 ? "zero" : kind == 2 ? "0xff" : "0x00ff", got, want);
            cases++, equal += got == want;
        }
    printf("Fletcher32: %d of %d buffers equal to HDF5's filter\n", equal, cases);
    free(b);
}

/* ---- the store ---- */

static const char *out = "test_deflate.tmp.h5";

static void remove_output(void) {
    const char *suf[] = {"", ".journal", ".lock", ".status", ".reserve"};
    char p[256];
    for (size_t i = 0; i < sizeof suf / sizeof suf[0]; i++) {
        snprintf(p, sizeof p, "%s%s", out, suf[i]);
        unlink(p);
    }
}

/* Packs and deflates the fixture block of cell (w, l). */
static size_t cell_payload(const cr_layout *lay, size_t w, size_t l, unsigned char *packed, unsigned char *dz,
                           size_t cap) {
    double *b = malloc(lay->total * sizeof *b);
    unsigned char *scratch = malloc(cw_pack_bytes(lay));
    fx_fill_block(b, lay, (int)w, fx_L[l]);
    cw_pack_cell(lay, b, packed);
    size_t len = 0;
    as_err err;
    cw_deflate_cell(lay, packed, dz, cap, &len, scratch, 1, &err);
    free(b), free(scratch);
    return len;
}

/* Commits cells (w, l) of windows [w0, w1) deflated. */
static int commit_deflated(store *s, const cr_layout *lay, size_t w0, size_t w1, size_t n_L) {
    size_t cap = cw_deflate_bound(lay), pb = cw_pack_bytes(lay);
    unsigned char *packed = malloc(pb), *dz = malloc(cap);
    int rc = 0;
    as_err err;
    for (size_t w = w0; w < w1 && !rc; w++)
        for (size_t l = 0; l < n_L && !rc; l++) {
            cell_payload(lay, w, l, packed, dz, cap);
            store_cell c = {.window = w, .l_index = l, .status = STORE_DONE, .rank = 1, .wall_time = 1};
            const unsigned char *p = dz;
            rc = store_commit_deflated(s, &c, &p, 1, &err);
            if (rc) fprintf(stderr, "commit: %s\n", err.msg);
        }
    free(packed), free(dz);
    return rc;
}

/* Every done cell of the file equals the fixture, read through HDF5's filters. */
static int file_matches(const cr_layout *lay, size_t n_window, size_t n_L, int *filtered) {
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return 0;
    int ok = 1;
    *filtered = -1;
    double *b = malloc(lay->total * sizeof *b);
    for (int v = 0; v < NV && ok; v++) {
        hid_t ds = H5Dopen2(f, cr_var_name((cr_var)v), H5P_DEFAULT);
        hid_t dcpl = H5Dget_create_plist(ds);
        int nf = H5Pget_nfilters(dcpl);
        if (*filtered < 0) *filtered = nf >= 2; /* shuffle + deflate (+ fletcher32) */
        H5Pclose(dcpl);
        size_t n = lay->count[v], total = n_window * n_L * n;
        int is_int = fx_is_int(v), is64 = elem_size(v) == 8;
        void *all = malloc(total * 8);
        H5Dread(ds, is_int ? H5T_NATIVE_INT32 : is64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, H5S_ALL,
                H5S_ALL, H5P_DEFAULT, all);
        for (size_t w = 0; w < n_window && ok; w++)
            for (size_t l = 0; l < n_L && ok; l++)
                for (size_t k = 0; k < n && ok; k++) {
                    double want = fx_value(v, (int)w, fx_L[l], k), got;
                    size_t i = (w * n_L + l) * n + k;
                    got = is_int ? ((int32_t *)all)[i] : is64 ? ((double *)all)[i] : ((float *)all)[i];
                    if (!(got == want || (isnan(got) && isnan(want)))) {
                        fprintf(stderr, "%s cell (%zu, %zu) [%zu]: %g, want %g\n", cr_var_name((cr_var)v),
                                w, l, k, got, want);
                        ok = 0;
                    }
                }
        free(all);
        H5Dclose(ds);
    }
    free(b);
    H5Fclose(f);
    return ok;
}

static store *open_out(size_t n_window, int flags, as_err *err) {
    store_axes ax = fx_axes(n_window, 3);
    store_provenance pv = fx_prov("cfg", "sha");
    return store_open(out, &ax, &pv, STORE_RESUME, flags | STORE_ALLOW_CONFIG_CHANGE, err);
}

static void test_store(void) {
    as_err err;
    cr_layout lay;
    cr_layout_init(&lay, 3, 2, 2, 2, 2, 3);
    int filtered;

    /* compressed view: chunks as sent; the close compacts (raw-chunk read-back) */
    remove_output();
    store *s = open_out(2, STORE_COMPRESSED, &err);
    CHECK(s && store_compressed(s) == 1, "a new output with STORE_COMPRESSED is compressed");
    CHECK(s && commit_deflated(s, &lay, 0, 2, 3) == 0, "deflated commits");
    CHECK(s && store_close(s, "finished", &err) == 0, "close (compacts): %s", err.msg);
    CHECK(file_matches(&lay, 2, 3, &filtered) && filtered == 1, "h5 values through the filters");
    /* the journal's compacted deflated cells come back from the old view's raw chunks
     * when a third window rebuilds it; the new window is committed after */
    s = open_out(3, 0, &err);
    CHECK(s && store_was_rebuilt(s), "an extension rebuilds the view");
    CHECK(s && store_compressed(s) == 1, "the rebuild follows the old view's filters, not the flag");
    CHECK(s && store_count(s, STORE_DONE) == 6, "every compacted deflated cell salvaged: %zu of 6",
          s ? store_count(s, STORE_DONE) : 0);
    CHECK(s && commit_deflated(s, &lay, 2, 3, 3) == 0, "commit into the rebuilt view");
    /* a damaged payload: refused, nothing written */
    if (s) {
        size_t cap = cw_deflate_bound(&lay);
        unsigned char *packed = malloc(cw_pack_bytes(&lay)), *dz = malloc(cap);
        cell_payload(&lay, 0, 0, packed, dz, cap);
        memcpy(dz, "XXXX", 4);
        store_cell c = {.window = 0, .l_index = 0, .status = STORE_DONE, .rank = 1, .wall_time = 1};
        const unsigned char *p = dz;
        CHECK(store_commit_deflated(s, &c, &p, 1, &err) != 0 && strstr(err.msg, "damaged"),
              "a damaged payload is refused: %s", err.msg);
        free(packed), free(dz);
    }
    CHECK(s && store_close(s, "finished", &err) == 0, "close");
    CHECK(file_matches(&lay, 3, 3, &filtered) && filtered == 1, "rebuilt + extended values");

    /* the journal alone (never compacted) rebuilds a lost view from deflated payloads */
    remove_output();
    s = open_out(2, STORE_COMPRESSED | STORE_KEEP_JOURNAL, &err);
    CHECK(s && commit_deflated(s, &lay, 0, 2, 3) == 0, "deflated commits, journal kept");
    CHECK(s && store_close(s, "finished", &err) == 0, "close");
    unlink(out);
    s = open_out(2, STORE_COMPRESSED | STORE_KEEP_JOURNAL, &err);
    CHECK(s && store_was_rebuilt(s) && store_count(s, STORE_DONE) == 6, "rebuilt from the journal");
    if (s) store_close(s, "finished", &err);
    CHECK(file_matches(&lay, 2, 3, &filtered) && filtered == 1, "values rebuilt from deflated payloads");

    /* a plain output resumed with STORE_COMPRESSED stays plain: deflated cells are inflated */
    remove_output();
    s = open_out(2, 0, &err);
    CHECK(s && store_compressed(s) == 0, "a new output without the flag is plain");
    CHECK(s && store_close(s, "finished", &err) == 0, "close");
    s = open_out(2, STORE_COMPRESSED, &err);
    CHECK(s && store_compressed(s) == 0, "a plain output resumed with the flag stays plain");
    CHECK(s && commit_deflated(s, &lay, 0, 2, 3) == 0, "deflated commits into a plain view");
    CHECK(s && store_close(s, "finished", &err) == 0, "close");
    CHECK(file_matches(&lay, 2, 3, &filtered) && filtered == 0, "plain view, values equal");
    remove_output();
}

/* A version 3 journal (before compressed payloads) of a compressed view, as attnsweep
 * wrote it when runtime.compress made the master compress: plain payloads, never
 * compacted. A store that is to append deflated cells rewrites it as version 4 first; its
 * plain cells replay and read back unchanged. */
static void test_old_journal(void) {
    as_err err;
    cr_layout lay;
    cr_layout_init(&lay, 3, 2, 2, 2, 2, 3);
    remove_output();
    store *s = open_out(2, STORE_COMPRESSED | STORE_KEEP_JOURNAL, &err);
    double *b = malloc(lay.total * sizeof *b);
    for (size_t w = 0; s && w < 2; w++)
        for (size_t l = 0; l < 3; l++) {
            fx_fill_block(b, &lay, (int)w, fx_L[l]);
            store_cell c = {.window = w, .l_index = l, .status = STORE_DONE, .rank = 1, .wall_time = 1};
            const double *bp = b;
            CHECK(store_commit_batch(s, &c, &bp, 1, &err) == 0, "plain commit: %s", err.msg);
        }
    free(b);
    CHECK(s && store_close(s, "finished", &err) == 0, "close");
    /* the header as version 3 wrote it: version at byte 8, its CRC-32 in the last 4 bytes */
    char jp[256];
    snprintf(jp, sizeof jp, "%s.journal", out);
    FILE *f = fopen(jp, "r+b");
    unsigned char h[256];
    CHECK(f && fread(h, 1, 256, f) == 256, "read the header");
    h[8] = 3;
    uint32_t crc = journal_crc32(0, h, 252);
    memcpy(h + 252, &crc, 4);
    if (f) fseek(f, 0, SEEK_SET), fwrite(h, 1, 256, f), fclose(f);
    s = open_out(3, 0, &err);
    CHECK(s != NULL, "a version 3 journal opens: %s", s ? "" : err.msg);
    CHECK(s && store_compressed(s) == 1 && store_count(s, STORE_DONE) == 6, "its 6 plain cells replayed");
    CHECK(s && commit_deflated(s, &lay, 2, 3, 3) == 0, "deflated cells after them");
    CHECK(s && store_close(s, "finished", &err) == 0, "close: %s", err.msg);
    f = fopen(jp, "rb");
    CHECK(f && fread(h, 1, 12, f) == 12 && h[8] == 4, "rewritten as version 4");
    if (f) fclose(f);
    int filtered;
    CHECK(file_matches(&lay, 3, 3, &filtered) && filtered == 1, "old and new cells read back");
    remove_output();
}

int main(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (int sum = 0; sum <= 1; sum++) {
        test_equals_hdf5(3, 2, 2, 2, 3, 1, sum, 0);
        test_equals_hdf5(28, 22, 3, 4, 3, 2, sum, 0); /* the paper grid's N, T, eps; a small model */
        test_equals_hdf5(1, 1, 1, 1, 1, 3, sum, 0);   /* one element per chunk: shuffle is the identity */
        test_equals_hdf5(3, 2, 2, 2, 3, 4, sum, 1);   /* sampled: the SE variables' chunks too */
    }
    test_fletcher32();
    test_store();
    test_old_journal();
    return check_summary("test_deflate");
}
