/* chunks.c -- compressed cells in the HDF5 view: direct chunk writes and reads.
 *
 * A cell of a metric variable is one chunk (schema.c). When the view's datasets carry
 * exactly shuffle + deflate level 1 (what runtime.compress creates), a cell deflated by a
 * worker (cellwire_deflate.c) is written chunk by chunk with H5Dwrite_chunk: HDF5's filter
 * pipeline is skipped, the bytes are the ones it would have stored, and any reader
 * (h5py, xarray, h5dump) decodes them with the filters built into every HDF5. Reading
 * the chunks back raw (H5Dread_chunk) gives the journaled bytes again, which is how
 * compaction checks a compressed cell: no inflate, one CRC over what is stored. See
 * store_int.h. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

int st_view_form(hid_t f) {
    int rc = -1;
    H5E_BEGIN_TRY {
        hid_t ds = H5Dopen2(f, cr_var_name(CR_DIST_TRUE), H5P_DEFAULT);
        hid_t dcpl = ds >= 0 ? H5Dget_create_plist(ds) : -1;
        if (dcpl >= 0) {
            int n = H5Pget_nfilters(dcpl);
            H5Z_filter_t id[8];
            unsigned cd0[8];
            for (int i = 0; i < n && i < 8; i++) {
                unsigned flags, cd[4] = {0};
                size_t ncd = 4;
                char name[64];
                id[i] = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
                cd0[i] = ncd >= 1 ? cd[0] : 0;
            }
            rc = 0;
            /* a checksum last covers the stored bytes, whatever came before it */
            int sum = n >= 1 && n <= 8 && id[n - 1] == H5Z_FILTER_FLETCHER32;
            if (sum) rc |= ST_FORM_FLETCHER;
            /* the filters cellwire_deflate.c reproduces, in their order; any other pipeline
             * (an h5repack'd file, another level) is written through HDF5 instead */
            if (n - sum == 2 && id[0] == H5Z_FILTER_SHUFFLE && id[1] == H5Z_FILTER_DEFLATE && cd0[1] == 1)
                rc |= ST_FORM_DEFLATE;
            H5Pclose(dcpl);
        }
        if (ds >= 0) H5Dclose(ds);
    } H5E_END_TRY;
    return rc;
}

int st_view_filters(hid_t f) {
    int form = st_view_form(f);
    return form < 0 ? -1 : (form & ST_FORM_DEFLATE) != 0;
}

int st_file_form(const char *path) {
    hid_t fapl = st_file_access(), f;
    int rc = -1;
    H5E_BEGIN_TRY {
        f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        if (f >= 0) {
            rc = st_view_form(f);
            H5Fclose(f);
        }
    } H5E_END_TRY;
    H5Pclose(fapl);
    return rc;
}

int store_file_compressed(const char *path) {
    int form = st_file_form(path);
    return form < 0 ? -1 : (form & ST_FORM_DEFLATE) != 0;
}

int store_file_checksummed(const char *path) {
    int form = st_file_form(path);
    return form < 0 ? -1 : (form & ST_FORM_FLETCHER) != 0;
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
    /* a cell deflated in the other checksum form (a journal or a shard from before
     * checksums, or one of them into an older view): its chunks as this view stores them */
    if (cw_deflated_summed(dz) != s->fletcher) {
        if (st_dz_buffers(s) || !cw_deflated_convert(dz, s->dz_conv, s->dz_cap, s->fletcher)) return -1;
        dz = s->dz_conv;
    }
    for (int v = 0; v < cw_nvars(&s->lay); v++) {
        hsize_t off[9];
        const unsigned char *chunk;
        size_t n = cw_deflated_var(dz, v, &chunk);
        if (chunk_offset(s->metric_ds[v], (cr_var)v, m, w, l, off) ||
            H5Dwrite_chunk(s->metric_ds[v], H5P_DEFAULT, 0, off, n, chunk) < 0)
            return -1;
    }
    return 0;
}

int st_read_cell_chunks(const store *s, hid_t f, size_t m, size_t w, size_t l, int fletcher32,
                        unsigned char *out, size_t cap, size_t *len) {
    uint64_t lens[N_METRICS];
    int nv = cw_nvars(&s->lay);
    size_t at = cw_deflated_header_bytes(nv);
    int rc = 0;
    for (int v = 0; v < nv && !rc; v++) {
        hid_t ds = H5Dopen2(f, cr_var_name((cr_var)v), H5P_DEFAULT);
        if (ds < 0) return -1;
        hsize_t off[9], size = 0;
        uint32_t mask = 0;
        if (chunk_offset(ds, (cr_var)v, m, w, l, off) || H5Dget_chunk_storage_size(ds, off, &size) < 0 ||
            size == 0 || size > cap - at || H5Dread_chunk(ds, H5P_DEFAULT, off, &mask, out + at) < 0 ||
            mask != 0)
            rc = -1;
        /* the checksum HDF5's filter would verify before inflating, checked raw */
        if (!rc && fletcher32 && !cw_fletcher32_ok(out + at, (size_t)size)) rc = -1;
        H5Dclose(ds);
        lens[v] = size;
        at += (size_t)size;
    }
    if (rc) return -1;
    cw_deflated_header(out, lens, nv, fletcher32);
    *len = at;
    return 0;
}

/* s->dz_buf and s->dz_scratch, made on first use. */
int st_dz_buffers(store *s) {
    if (s->dz_buf) return 0;
    s->dz_cap = cw_deflate_bound(&s->lay);
    s->dz_buf = malloc(s->dz_cap);
    s->dz_conv = malloc(s->dz_cap);
    if (!s->dz_scratch) s->dz_scratch = malloc(s->payload_bytes ? s->payload_bytes : 1);
    if (s->dz_buf && s->dz_conv && s->dz_scratch) return 0;
    free(s->dz_buf), free(s->dz_conv), free(s->dz_scratch);
    s->dz_buf = s->dz_conv = s->dz_scratch = NULL;
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
    int form = f == s->file ? (s->compress ? ST_FORM_DEFLATE : 0) | (s->fletcher ? ST_FORM_FLETCHER : 0)
                            : st_view_form(f);
    if (form >= 0 && (form & ST_FORM_DEFLATE))
        return st_read_cell_chunks(s, f, m, w, l, (form & ST_FORM_FLETCHER) != 0, s->dz_buf, s->dz_cap, len);
    /* a cell journaled deflated in a view that stores it plain (e.g. a rebuild with other
     * filters): deflate what the view holds, which gives the journaled bytes when the
     * values are the same (zlib is deterministic) */
    as_err ignored;
    if (st_read_cell_values(s, f, m, w, l, s->packed) ||
        cw_deflate_cell(&s->lay, s->packed, s->dz_buf, s->dz_cap, len, s->dz_scratch, 0, &ignored))
        return -1;
    return 0;
}

int st_cell_intact(store *s, hid_t f, size_t m, size_t w, size_t l, int deflated, uint32_t crc,
                   const unsigned char **out, size_t *len) {
    int rc;
    H5E_BEGIN_TRY { rc = st_read_cell_as(s, f, m, w, l, deflated, out, len); } H5E_END_TRY;
    if (rc) return 0;
    if (journal_crc32(0, *out, *len) == crc) return 1;
    if (!deflated) return 0;
    /* journaled in the other checksum form: compared in that form */
    size_t n = cw_deflated_convert(*out, s->dz_conv, s->dz_cap, !cw_deflated_summed(*out));
    if (!n || journal_crc32(0, s->dz_conv, n) != crc) return 0;
    /* the caller gets the journaled bytes, in s->dz_buf as from st_read_cell_as */
    memcpy(s->dz_buf, s->dz_conv, n);
    *out = s->dz_buf, *len = n;
    return 1;
}

int st_write_cell_any(store *s, size_t m, size_t w, size_t l, const unsigned char *data, size_t len,
                      int deflated) {
    if (!deflated) return st_write_cell_values(s, m, w, l, data);
    if (s->compress) return st_write_cell_chunks(s, m, w, l, data);
    as_err ignored;
    if (st_dz_buffers(s) || cw_inflate_cell(&s->lay, data, len, s->packed, s->dz_scratch, &ignored))
        return -1;
    return st_write_cell_values(s, m, w, l, s->packed);
}
