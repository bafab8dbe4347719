/* chunks.c -- compressed cells in the HDF5 view: direct chunk writes and reads.
 *
 * A cell of a metric variable is one chunk (schema.c). When the view's datasets carry
 * exactly shuffle + deflate level 1 (what runtime.compress creates), a cell deflated by a
 * worker (deflate.c) is written chunk by chunk with H5Dwrite_chunk: HDF5's filter
 * pipeline is skipped, the bytes are the ones it would have stored, and any reader
 * (h5py, xarray, h5dump) decodes them with the filters built into every HDF5. Reading
 * the chunks back raw (H5Dread_chunk) gives the journaled bytes again, which is how
 * compaction checks a compressed cell: no inflate, one CRC over what is stored. See
 * store_int.h. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

int st_view_filters(hid_t f) {
    int rc = -1;
    H5E_BEGIN_TRY {
        hid_t ds = H5Dopen2(f, cr_var_name(CR_DIST_TRUE), H5P_DEFAULT);
        hid_t dcpl = ds >= 0 ? H5Dget_create_plist(ds) : -1;
        if (dcpl >= 0) {
            int n = H5Pget_nfilters(dcpl);
            rc = 0;
            if (n == 2) {
                unsigned flags, cd[4];
                size_t ncd = 4;
                char name[64];
                H5Z_filter_t f0 = H5Pget_filter2(dcpl, 0, &flags, &ncd, cd, sizeof name, name, NULL);
                ncd = 4;
                H5Z_filter_t f1 = H5Pget_filter2(dcpl, 1, &flags, &ncd, cd, sizeof name, name, NULL);
                /* the filters deflate.c reproduces, in their order; any other pipeline
                 * (an h5repack'd file, another level) is written through HDF5 instead */
                rc = f0 == H5Z_FILTER_SHUFFLE && f1 == H5Z_FILTER_DEFLATE && ncd >= 1 && cd[0] == 1;
            }
            H5Pclose(dcpl);
        }
        if (ds >= 0) H5Dclose(ds);
    } H5E_END_TRY;
    return rc;
}

int store_file_compressed(const char *path) {
    hid_t fapl = st_file_access(), f;
    int rc = -1;
    H5E_BEGIN_TRY {
        f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        if (f >= 0) {
            rc = st_view_filters(f);
            H5Fclose(f);
        }
    } H5E_END_TRY;
    H5Pclose(fapl);
    return rc;
}

/* The chunk offset of cell (m, w, l) in dataset ds, and whether the dataset is from
 * before the model axis (one dimension fewer: then only model 0 is there). */
static int chunk_offset(hid_t ds, cr_var v, size_t m, size_t w, size_t l, hsize_t off[9]) {
    hid_t sp = H5Dget_space(ds);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    int want = st_var_rank(v);
    if (nd != want && nd != want - 1) return -1;
    if (nd == want - 1 && m != 0) return -1;
    memset(off, 0, 9 * sizeof off[0]);
    int at = 0;
    if (nd == want) off[at++] = m;
    off[at++] = w, off[at++] = l;
    return 0;
}

int st_write_cell_chunks(store *s, size_t m, size_t w, size_t l, const unsigned char *dz) {
    for (int v = 0; v < N_METRICS; v++) {
        hsize_t off[9];
        const unsigned char *chunk;
        size_t n = st_deflated_var(dz, v, &chunk);
        if (chunk_offset(s->metric_ds[v], (cr_var)v, m, w, l, off) ||
            H5Dwrite_chunk(s->metric_ds[v], H5P_DEFAULT, 0, off, n, chunk) < 0)
            return -1;
    }
    return 0;
}

int st_read_cell_chunks(const store *s, hid_t f, size_t m, size_t w, size_t l, unsigned char *out,
                        size_t cap, size_t *len) {
    (void)s;
    uint64_t lens[N_METRICS];
    size_t at = st_deflated_header_bytes();
    int rc = 0;
    for (int v = 0; v < N_METRICS && !rc; v++) {
        hid_t ds = H5Dopen2(f, cr_var_name((cr_var)v), H5P_DEFAULT);
        if (ds < 0) return -1;
        hsize_t off[9], size = 0;
        uint32_t mask = 0;
        if (chunk_offset(ds, (cr_var)v, m, w, l, off) || H5Dget_chunk_storage_size(ds, off, &size) < 0 ||
            size == 0 || size > cap - at || H5Dread_chunk(ds, H5P_DEFAULT, off, &mask, out + at) < 0 ||
            mask != 0)
            rc = -1;
        H5Dclose(ds);
        lens[v] = size;
        at += (size_t)size;
    }
    if (rc) return -1;
    st_deflated_header(out, lens);
    *len = at;
    return 0;
}

/* s->dz_buf and s->dz_scratch, made on first use. */
int st_dz_buffers(store *s) {
    if (s->dz_buf) return 0;
    s->dz_cap = store_deflate_bound(&s->lay);
    s->dz_buf = malloc(s->dz_cap);
    s->dz_scratch = malloc(s->payload_bytes ? s->payload_bytes : 1);
    if (s->dz_buf && s->dz_scratch) return 0;
    free(s->dz_buf), free(s->dz_scratch);
    s->dz_buf = s->dz_scratch = NULL;
    return -1;
}

int st_read_cell_as(store *s, hid_t f, size_t m, size_t w, size_t l, int deflated,
                    const unsigned char **out, size_t *len) {
    if (!deflated) {
        if (st_read_cell_values(s, f, m, w, l, s->packed)) return -1;
        *out = s->packed, *len = s->payload_bytes;
        return 0;
    }
    if (st_dz_buffers(s)) return -1;
    *out = s->dz_buf;
    if (f == s->file ? s->compress : st_view_filters(f) == 1) return st_read_cell_chunks(s, f, m, w, l, s->dz_buf, s->dz_cap, len);
    /* a cell journaled deflated in a view that stores it plain (e.g. a rebuild with other
     * filters): deflate what the view holds, which gives the journaled bytes when the
     * values are the same (zlib is deterministic) */
    as_err ignored;
    if (st_read_cell_values(s, f, m, w, l, s->packed) ||
        store_deflate_cell(&s->lay, s->packed, s->dz_buf, s->dz_cap, len, s->dz_scratch, &ignored))
        return -1;
    return 0;
}

int st_write_cell_any(store *s, size_t m, size_t w, size_t l, const unsigned char *data, size_t len,
                      int deflated) {
    if (!deflated) return st_write_cell_values(s, m, w, l, data);
    if (s->compress) return st_write_cell_chunks(s, m, w, l, data);
    as_err ignored;
    if (st_dz_buffers(s) || store_inflate_cell(&s->lay, data, len, s->packed, s->dz_scratch, &ignored))
        return -1;
    return st_write_cell_values(s, m, w, l, s->packed);
}
