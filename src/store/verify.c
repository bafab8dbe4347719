/* verify.c -- checking an output's stored chunks without being its writer (attnsweep
 * status): every done cell the journal names is read back from the HDF5 view and compared
 * with the journal's CRC-32 of its values, and with the Fletcher32 checksums its chunks
 * carry (chunks.c: raw chunks, nothing inflated). See store.h store_verify_file. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

/* The last commit of each cell of the journal at jpath: done[c] 1 when it says done,
 * crc[c] the CRC-32 of its values as journaled, dz[c] 1 when journaled deflated. */
static int last_commits(const char *jpath, const store_axes *a, size_t n_model, uint8_t *done,
                        uint32_t *crc, uint8_t *dz, as_err *err) {
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, err);
    if (!j) return -1;
    journal_record r;
    int got;
    while ((got = journal_next(j, &r, err)) == 1) {
        if (r.type != JR_COMMIT) continue;
        size_t li = 0;
        while (li < a->n_L && a->L[li] != r.L) li++;
        if (li == a->n_L || r.window < 0 || (size_t)r.window >= a->n_window || r.model >= n_model)
            continue; /* not on the file's axes: the writer's open deals with it */
        size_t c = ((size_t)r.model * a->n_window + (size_t)r.window) * a->n_L + li;
        done[c] = r.status == STORE_DONE;
        dz[c] = (r.flags & JF_DEFLATE) != 0;
        crc[c] = r.payload_crc;
        if (done[c] && (r.flags & JF_COMPACT)) {
            unsigned char d[JOURNAL_COMPACT_BYTES];
            if (r.payload_len != JOURNAL_COMPACT_BYTES || journal_read_payload(j, &r, d, err)) {
                journal_close(j);
                return as_fail(err, "%s: bad compacted record of cell (model %u, window %d, L %d)",
                               jpath, r.model, r.window, r.L);
            }
            memcpy(&crc[c], d, 4);
        }
    }
    journal_close(j);
    return got < 0 ? -1 : 0;
}

int store_verify_file(const char *path, size_t *checked, size_t *damaged, as_err *err) {
    *checked = *damaged = 0;
    char jpath[4200];
    if (store_sidecar(jpath, sizeof jpath, path, ".journal")) return as_fail(err, "%s: path too long", path);
    store_description d;
    if (store_describe(path, &d, err)) return -1;
    const store_axes *a = &d.axes;
    size_t n_model = a->n_model ? a->n_model : 1, n = n_model * a->n_window * a->n_L;
    store s;
    st_layout_store(&s, a);
    uint8_t *done = calloc(n ? n : 1, 1), *dz = calloc(n ? n : 1, 1);
    uint32_t *crc = calloc(n ? n : 1, sizeof *crc);
    s.packed = malloc(s.payload_bytes ? s.payload_bytes : 1);
    int rc = 0;
    if (!done || !dz || !crc || !s.packed) rc = as_fail(err, "%s: out of memory", path);
    if (!rc) rc = last_commits(jpath, a, n_model, done, crc, dz, err);
    hid_t fapl = st_file_access(), f = -1;
    if (!rc) {
        H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, fapl); } H5E_END_TRY;
        if (f < 0) rc = as_fail(err, "%s: not a readable HDF5 results file", path);
    }
    for (size_t c = 0; c < n && !rc; c++) {
        if (!done[c]) continue;
        size_t l = c % a->n_L, w = c / a->n_L % a->n_window, m = c / a->n_L / a->n_window;
        const unsigned char *vals;
        size_t len;
        (*checked)++;
        if (!st_cell_intact(&s, f, m, w, l, dz[c], crc[c], &vals, &len)) (*damaged)++;
    }
    if (f >= 0) H5E_BEGIN_TRY { H5Fclose(f); } H5E_END_TRY;
    H5Pclose(fapl);
    free(done), free(dz), free(crc), free(s.packed);
    free(s.dz_buf), free(s.dz_conv), free(s.dz_scratch);
    store_description_free(&d);
    return rc;
}
