/* cellwire.h -- one cell on the wire: a block of doubles (cellresult.h) turned into the
 * bytes the results file stores, on the rank that computed it, so the master and the
 * store write them as they come.
 *
 * The type table: every metric variable (the cr_vars before the bookkeeping scalars) has
 * one file type, CW_F32 unless listed in cellwire.c (float32 means; int32 counts; float64
 * KS). Packing (cw_pack_cell): the variables follow each other in cr_var order, each in its
 * file type: float32 rounded to nearest (NaN stays NaN); rows_used, rows_sampled and crit_N rounded to
 * int32, NaN -> CW_INT_FILL; crit_N = -1, "no N of the grid passed", is stored as the fill
 * with crit_N_censored = 1, which the packing derives from crit_N (0 where one was found,
 * the fill where none was computed). The store writes those same bytes to the HDF5 view
 * and the journal, so a view rebuilt from the journal is bit-identical in its values.
 *
 * Deflated (cellwire_deflate.c): the bytes HDF5's shuffle + deflate level 1 (+ Fletcher32,
 * cellwire_fletcher32.c) filters store for each variable's chunk, computed outside HDF5, in
 * a self-describing form ("ASZ1"/"ASZ2", the chunk lengths, the chunks) that the store
 * checks before it writes them (H5Dwrite_chunk) and keeps in the journal as they are. */
#ifndef ATTNSWEEP_CELLWIRE_H
#define ATTNSWEEP_CELLWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cellresult.h"
#include "errors.h"

/* The metric variables: every cr_var but the bookkeeping scalars. */
#define CW_N_VARS CR_WALL_TIME
/* The metric variables a layout has, in cr_var order: all of them in a sampled layout, else
 * those before CR_FIRST_SAMPLED (cellresult.h), so an unsampled cell packs, deflates and
 * carries n_vars exactly as before the sampled variables existed. */
static inline int cw_nvars(const cr_layout *lay) { return lay->sampled ? CW_N_VARS : CR_FIRST_SAMPLED; }
/* The int32 fill (netCDF's default int fill). */
#define CW_INT_FILL (-2147483647)

typedef enum { CW_F32 = 0, CW_I32, CW_F64 } cw_type;
extern const cw_type cw_var_type[CW_N_VARS];
static inline size_t cw_type_size(cw_type t) { return t == CW_F64 ? 8 : 4; }

/* Packed bytes of one cell for this layout, and the packing itself (above). */
size_t cw_pack_bytes(const cr_layout *lay);
void cw_pack_cell(const cr_layout *lay, const double *block, unsigned char *out);

/* The deflated form. out must hold cw_deflate_bound() bytes, scratch cw_pack_bytes();
 * *len gets the bytes used. fletcher32: each chunk ends with its checksum ("ASZ2"). */
size_t cw_deflate_bound(const cr_layout *lay);
int cw_deflate_cell(const cr_layout *lay, const unsigned char *packed, unsigned char *out, size_t cap,
                    size_t *len, unsigned char *scratch, int fletcher32, as_err *err);
/* Bytes of the deflated cell at in (at most avail), 0 when it is not one of this layout. */
size_t cw_deflated_size(const cr_layout *lay, const unsigned char *in, size_t avail);
/* Back to the packed form (cw_pack_bytes() bytes); scratch as for cw_deflate_cell.
 * Chunks with checksums are verified first. */
int cw_inflate_cell(const cr_layout *lay, const unsigned char *in, size_t len, unsigned char *packed,
                    unsigned char *scratch, as_err *err);
/* The chunk of variable v in a deflated cell; returns its length. */
size_t cw_deflated_var(const unsigned char *in, int v, const unsigned char **chunk);
/* The header of nv variables (cw_nvars of the layout), len[nv]; fletcher32: the "ASZ2"
 * form (each chunk ends with its checksum) */
void cw_deflated_header(unsigned char *out, const uint64_t *len, int nv, int fletcher32);
size_t cw_deflated_header_bytes(int nv);
/* 1 when a deflated cell is in the "ASZ2" form (chunks end with their Fletcher32). */
int cw_deflated_summed(const unsigned char *in);
/* A deflated cell (either form, already checked) copied into the form fletcher32 asks for
 * (its checksums dropped or computed); its size, 0 when it does not fit in cap. */
size_t cw_deflated_convert(const unsigned char *in, unsigned char *out, size_t cap, int fletcher32);

/* HDF5's Fletcher32 checksum of p[0..n) (cellwire_fletcher32.c). */
uint32_t cw_fletcher32(const unsigned char *p, size_t n);
/* Appends the checksum of chunk[0..n) at chunk + n (4 bytes, as HDF5 stores it). */
void cw_fletcher32_put(unsigned char *chunk, size_t n);
/* 1 when the last 4 of len bytes are the Fletcher32 of the ones before. */
int cw_fletcher32_ok(const unsigned char *chunk, size_t len);

#endif
