/* cellwire_deflate.c -- a cell's values as the bytes HDF5 stores for shuffle + deflate chunks.
 *
 * Every metric variable's cell block is exactly one HDF5 chunk (src/store/schema.c: chunks are one
 * cell). With runtime.compress the datasets carry HDF5's shuffle filter and its deflate
 * filter at level 1; this file computes, outside HDF5, the bytes that pipeline produces
 * for a chunk, so the workers can compress and the master store them as they come
 * (H5Dwrite_chunk, src/store/chunks.c). The steps, as HDF5 1.10 defines them:
 *   shuffle  the chunk's n elements of size k bytes are transposed byte-wise: byte j of
 *            element i goes to j * n + i (all first bytes, then all second bytes, ...);
 *            elements of one byte, or a chunk of one element, are left as they are;
 *   deflate  one zlib stream (RFC 1950: header, deflate data, Adler-32) of the shuffled
 *            bytes, as zlib's compress2 at the filter's level writes it;
 *   fletcher32  (outputs created since stored chunks carry a checksum) the filter HDF5
 *            runs last appends the 4-byte Fletcher32 checksum of the deflated bytes
 *            (cellwire_fletcher32.c), so a reader -- h5py, xarray, h5dump, or the store itself
 *            checking a chunk raw -- notices a damaged chunk instead of decoding it.
 * zlib is deterministic for a given version, level and input, and the master's HDF5
 * links the same libz as the workers, so the bytes are HDF5's own: tests/unit/store/
 * test_deflate.c checks them against H5Dread_chunk of a file HDF5 wrote itself.
 *
 * The deflated form of a cell (what the workers send, the journal holds with JF_DEFLATE
 * and the view's chunks hold piece by piece), little-endian:
 *   "ASZ1" or "ASZ2"  uint32 n_vars (cw_nvars)  uint64 len[n_vars]  then the n_vars
 *   chunks in cr_var order, len[v] bytes each; "ASZ2": each chunk ends with its Fletcher32
 *   checksum (len[v] counts it), the chunk of a view with the fletcher32 filter.
 * It is self-describing, so the store checks a payload before writing it. */
#include "cellwire.h"

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#define DZ_MAGIC "ASZ1"
#define DZ_MAGIC_SUM "ASZ2" /* chunks end with their Fletcher32 checksum */
#define DZ_SUM 4
#define DZ_HEADER_BYTES(nv) (8 + 8 * (size_t)(nv))
/* HDF5's deflate level for runtime.compress (src/store/schema.c create_var). */
#define DZ_LEVEL 1

size_t cw_deflate_bound(const cr_layout *lay) {
    size_t at = DZ_HEADER_BYTES(cw_nvars(lay));
    for (int v = 0; v < cw_nvars(lay); v++)
        at += (size_t)compressBound((uLong)(lay->count[v] * cw_type_size(cw_var_type[v]))) + DZ_SUM;
    return at;
}

/* HDF5's shuffle of n elements of k bytes: out[j * n + i] = in[i * k + j]. */
static void shuffle(unsigned char *out, const unsigned char *in, size_t n, size_t k) {
    if (k == 1 || n <= 1) {
        memcpy(out, in, n * k);
        return;
    }
    if (k == 4) {
        unsigned char *o0 = out, *o1 = out + n, *o2 = out + 2 * n, *o3 = out + 3 * n;
        for (size_t i = 0; i < n; i++, in += 4) o0[i] = in[0], o1[i] = in[1], o2[i] = in[2], o3[i] = in[3];
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) out[j * n + i] = in[i * k + j];
}

/* The inverse: out[i * k + j] = in[j * n + i]. */
static void unshuffle(unsigned char *out, const unsigned char *in, size_t n, size_t k) {
    if (k == 1 || n <= 1) {
        memcpy(out, in, n * k);
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) out[i * k + j] = in[j * n + i];
}

static void put64(unsigned char *p, uint64_t x) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static uint64_t get64(const unsigned char *p) {
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | p[i];
    return x;
}

int cw_deflate_cell(const cr_layout *lay, const unsigned char *packed, unsigned char *out,
                       size_t cap, size_t *len, unsigned char *scratch, int fletcher32, as_err *err) {
    uint32_t nv = (uint32_t)cw_nvars(lay);
    if (cap < DZ_HEADER_BYTES(nv)) return as_fail(err, "deflate: %zu-byte buffer below the header", cap);
    memcpy(out, fletcher32 ? DZ_MAGIC_SUM : DZ_MAGIC, 4);
    for (int i = 0; i < 4; i++) out[4 + i] = (unsigned char)(nv >> (8 * i));
    size_t at = DZ_HEADER_BYTES(nv);
    for (int v = 0; v < (int)nv; v++) {
        size_t k = cw_type_size(cw_var_type[v]), n = lay->count[v];
        shuffle(scratch, packed, n, k);
        packed += n * k;
        size_t room = cap - at;
        if (fletcher32 && room < DZ_SUM)
            return as_fail(err, "deflate: variable %s: no room for its checksum", cr_var_name((cr_var)v));
        uLongf got = (uLongf)(room - (fletcher32 ? DZ_SUM : 0));
        int zr = compress2(out + at, &got, scratch, (uLong)(n * k), DZ_LEVEL);
        if (zr != Z_OK)
            return as_fail(err, "deflate: variable %s: zlib error %d (%zu bytes of room)",
                           cr_var_name((cr_var)v), zr, room);
        if (fletcher32) {
            cw_fletcher32_put(out + at, got);
            got += DZ_SUM;
        }
        put64(out + 8 + 8 * (size_t)v, (uint64_t)got);
        at += got;
    }
    *len = at;
    return 0;
}

int cw_deflated_summed(const unsigned char *in) { return memcmp(in, DZ_MAGIC_SUM, 4) == 0; }
/* n_vars of a deflated cell's header (the caller checked the magic, or wrote it) */
static uint32_t dz_nv(const unsigned char *in) {
    return (uint32_t)in[4] | (uint32_t)in[5] << 8 | (uint32_t)in[6] << 16 | (uint32_t)in[7] << 24;
}

size_t cw_deflated_size(const cr_layout *lay, const unsigned char *in, size_t avail) {
    if (avail < 8 || (memcmp(in, DZ_MAGIC, 4) && memcmp(in, DZ_MAGIC_SUM, 4))) return 0;
    size_t sum = cw_deflated_summed(in) ? DZ_SUM : 0;
    /* the layout's count: a sampled cell is not one of an unsampled layout, nor the reverse */
    uint32_t nv = dz_nv(in);
    if (nv != (uint32_t)cw_nvars(lay) || avail < DZ_HEADER_BYTES(nv)) return 0;
    size_t at = DZ_HEADER_BYTES(nv);
    for (int v = 0; v < (int)nv; v++) {
        uint64_t l = get64(in + 8 + 8 * (size_t)v);
        /* a zlib stream is at least 8 bytes (header + Adler-32) and never far above
         * compressBound of what it holds (then the checksum, in "ASZ2") */
        size_t raw = lay->count[v] * cw_type_size(cw_var_type[v]);
        if (l < 8 + sum || l > (uint64_t)compressBound((uLong)raw) + sum || l > avail - at) return 0;
        at += (size_t)l;
    }
    return at;
}

size_t cw_deflated_var(const unsigned char *in, int v, const unsigned char **chunk) {
    size_t at = DZ_HEADER_BYTES(dz_nv(in));
    for (int u = 0; u < v; u++) at += (size_t)get64(in + 8 + 8 * (size_t)u);
    *chunk = in + at;
    return (size_t)get64(in + 8 + 8 * (size_t)v);
}

void cw_deflated_header(unsigned char *out, const uint64_t *len, int nv, int fletcher32) {
    memcpy(out, fletcher32 ? DZ_MAGIC_SUM : DZ_MAGIC, 4);
    for (int i = 0; i < 4; i++) out[4 + i] = (unsigned char)((uint32_t)nv >> (8 * i));
    for (int v = 0; v < nv; v++) put64(out + 8 + 8 * (size_t)v, len[v]);
}

size_t cw_deflated_header_bytes(int nv) { return DZ_HEADER_BYTES(nv); }

int cw_inflate_cell(const cr_layout *lay, const unsigned char *in, size_t len, unsigned char *packed,
                       unsigned char *scratch, as_err *err) {
    if (cw_deflated_size(lay, in, len) != len)
        return as_fail(err, "inflate: %zu bytes are not a deflated cell of this layout", len);
    int summed = cw_deflated_summed(in);
    for (int v = 0; v < cw_nvars(lay); v++) {
        size_t k = cw_type_size(cw_var_type[v]), n = lay->count[v];
        const unsigned char *chunk;
        size_t cl = cw_deflated_var(in, v, &chunk);
        if (summed) {
            if (!cw_fletcher32_ok(chunk, cl))
                return as_fail(err, "inflate: variable %s: the chunk fails its Fletcher32 checksum",
                               cr_var_name((cr_var)v));
            cl -= DZ_SUM;
        }
        uLongf got = (uLongf)(n * k);
        int zr = uncompress(scratch, &got, chunk, (uLong)cl);
        if (zr != Z_OK || got != n * k)
            return as_fail(err, "inflate: variable %s: zlib error %d or %lu bytes instead of %zu",
                           cr_var_name((cr_var)v), zr, (unsigned long)got, n * k);
        unshuffle(packed, scratch, n, k);
        packed += n * k;
    }
    return 0;
}

size_t cw_deflated_convert(const unsigned char *in, unsigned char *out, size_t cap, int fletcher32) {
    int summed = cw_deflated_summed(in);
    uint64_t lens[CW_N_VARS];
    if (dz_nv(in) > CW_N_VARS) return 0;
    int nv = (int)dz_nv(in);
    size_t at = DZ_HEADER_BYTES(nv);
    for (int v = 0; v < nv; v++) {
        const unsigned char *chunk;
        size_t cl = cw_deflated_var(in, v, &chunk), body = summed ? cl - DZ_SUM : cl;
        size_t want = body + (fletcher32 ? DZ_SUM : 0);
        if (cl < (summed ? DZ_SUM : 0) || want > cap - at) return 0;
        memcpy(out + at, chunk, body);
        if (fletcher32) cw_fletcher32_put(out + at, body);
        lens[v] = want;
        at += want;
    }
    cw_deflated_header(out, lens, nv, fletcher32);
    return at;
}
