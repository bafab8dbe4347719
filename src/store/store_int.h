/* store_int.h -- what the files of the results store share (private to src/store).
 *
 * store.h is the contract; this is the inside, split by concern:
 *   schema.c  the variables of results.md, how a cell is packed, and the HDF5
 *             view: creating, opening and writing datasets, dimension scales,
 *             attributes, /provenance
 *   schema_models.c  the model axis' coordinates and head_valid in the view
 *   replay.c  journal replay into memory, reconciling the view with it, and
 *             rebuilding the view from it
 *   store.c   the writer: open (lock, journal, view), dispatch, the commit
 *             protocol, close
 *   status.c  the status file (OUT.h5.status): writer and reader
 *   reader.c  reading an output without being its writer (merge, status)
 * Names shared between these files start with st_. */
#ifndef ATTNSWEEP_STORE_INT_H
#define ATTNSWEEP_STORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "cellwire.h"
#include "journal.h"
#include "store.h"

/* ---- the variables (schema.c) ---- */

/* The metric variables: every cr_var but the bookkeeping scalars; their file types are
 * cellwire.h's (cw_var_type). */
#define N_METRICS CW_N_VARS
typedef struct {
    const char *long_name, *units;
} st_metric_def;
extern const st_metric_def st_metric_defs[N_METRICS];

/* Bytes OUT.h5.reserve holds: more than HDF5's metadata cache (at most 32 MiB by default is
 * dirty only in huge files; a results file's is well under 1 MiB) needs to close the file. */
#define ST_RESERVE_BYTES (8u << 20)

/* ---- the writer's state ---- */

typedef struct {
    double start, end; /* end NaN while running / after a crash */
    char *hosts, *job;
    char *note; /* what this segment's open found wrong (journal damage), else "" */
    char *inputs; /* the inputs' identity this segment ran with (store_provenance), else "" */
    int32_t mpi_size, cells_done;
    /* the sweep's axes in this segment: models, windows, L values (0: not recorded, an older
     * writer), against which the next segment's extension is told */
    int32_t n_model, n_window, n_L;
    int32_t ended, end_signo; /* how it ended (ST_END_*; its end record, journal.h), signal */
} segment;

/* How a segment ended (JR_SEG_END status). 0: not recorded (an older writer) -- or no end
 * record at all when `end` is NaN (running, or crashed). */
enum { ST_END_UNKNOWN = 0, ST_END_COMPLETED = 1, ST_END_STOPPED = 2, ST_END_ERROR = 3 };

/* /provenance's words for segment k: how it ended, whether it extended the sweep. */
void st_segment_ended(const store *s, size_t k, char *out, size_t n);
void st_segment_extended(const store *s, size_t k, char *out, size_t n);

struct store {
    char path[4096], journal_path[4200], lock_path[4200], status_path[4200];
    char reserve_path[4200]; /* OUT.h5.reserve: disk space kept for a full disk (st_reserve_*) */
    int have_reserve;
    store_axes ax;      /* deep copies below; ax.n_model >= 1 */
    char **model_name, **model_path, **model_sha, **model_kind;
    char **model_cfg_sha;  /* [n_model] sha256 of each config.json, "" = not recorded */
    char **model_family;   /* [n_model] gpt2, gpt_neox, llama, qwen2; "" = not recorded */
    int32_t *model_n_layer, *model_n_head, *model_n_embd;
    int64_t *training_step;
    uint8_t *head_valid;   /* [n_model][n_layer][n_head] */
    int64_t *window_start;
    int32_t *Lv, *Nv, *layerv, *headv;
    double *Tv, *epsv;
    char **normv;
    cr_layout lay;
    size_t payload_bytes, var_offset[N_METRICS];
    unsigned char *packed; /* one cell's packed payload */
    int compress;          /* the view's chunks have shuffle + deflate (store_compressed) */
    int fletcher;          /* the view's cell chunks end with HDF5's Fletcher32 checksum
                            * (store_checksummed; cellwire_deflate.c "ASZ2") */
    size_t damaged;        /* done cells whose stored chunks failed their check at this open */
    unsigned char *dz_scratch; /* payload_bytes: shuffle buffer for cellwire_deflate.c */
    unsigned char *dz_buf;     /* cw_deflate_bound(): one cell deflated (salvage, compaction) */
    unsigned char *dz_conv;    /* dz_cap: a deflated cell in the other checksum form (chunks.c) */
    size_t dz_cap;

    /* per cell, [model][window][l_index] */
    uint8_t *status;
    int32_t *attempts, *rank;
    double *wall_time;
    unsigned char *in_flight;
    journal_record *last_commit; /* the record to rebuild a cell from */
    uint32_t *values_crc;        /* CRC-32 of each done cell's values as journaled: packed, or
                                  * deflated when deflated[c] */
    uint8_t *deflated;           /* 1: the cell was journaled deflated (JF_DEFLATE) */
    uint8_t *compacted;          /* 1: the values are only in the view (journal.h "Compaction") */
    uint64_t full_bytes;         /* payload bytes of full (uncompacted) commits in the journal */
    uint64_t compact_bytes;      /* compact once full_bytes reaches this */
    size_t lost;                 /* compacted cells the view no longer held at this open */

    unsigned char *batch;        /* packed values of the batch being committed */
    size_t batch_cap;            /* cells batch has room for */
    uint32_t *batch_crc;

    segment *segs;
    size_t n_segs, seg_index; /* this run's segment */
    int32_t committed_this_segment;
    int stop_signo; /* store_set_stop_signal: the signal this segment stops for, or 0 */
    double t_open;

    char *stored_config_text, *stored_config_sha;
    char *stored_inputs; /* the inputs' identity of the journal's last config record, or NULL */
    char created[64];
    int rebuilt;
    long long torn;
    char *damage_note; /* "" or the journal damage this open found (store_journal_damage) */

    journal *jr;
    journal_header jhdr; /* the journal's identity, kept by compaction */
    hid_t file, metric_ds[N_METRICS], status_ds, wall_ds, rank_ds, attempts_ds;
    int stored_models_checked; /* the view's model coordinates matched (st_open_view) */
    store_provenance prov; /* strings copied */
    char *prov_strings[18];
    int locked, lock_fd; /* lock_fd holds the kernel lock (lockfile.h) */
};

static inline size_t st_cell_at(const store *s, size_t m, size_t w, size_t l) {
    return (m * s->ax.n_window + w) * s->ax.n_L + l;
}
/* The (model, window, L index) of cell c. */
static inline void st_cell_of(const store *s, size_t c, size_t *m, size_t *w, size_t *l) {
    *l = c % s->ax.n_L;
    *w = c / s->ax.n_L % s->ax.n_window;
    *m = c / s->ax.n_L / s->ax.n_window;
}
/* The index of an L value on this sweep's axis, -1 when it is not on it (a journal record
 * names its cell's L by value). */
static inline int st_find_L(const store *s, int32_t L) {
    for (size_t i = 0; i < s->ax.n_L; i++)
        if (s->Lv[i] == L) return (int)i;
    return -1;
}

/* ---- small helpers (store.c) ---- */

double st_now(void);                                  /* seconds since the epoch */
void st_iso_time(char *out, size_t size, double t);   /* ISO 8601 UTC */
char *st_dupstr(const char *s);                       /* malloc'd copy; NULL -> "" */
int st_fsync_path(const char *path);                  /* open, fsync, close; -1 + errno */

/* ---- packing and the HDF5 view (schema.c) ---- */

/* Converts a block of doubles to the file's types (cellwire.h). */
void st_pack_block(const store *s, const double *block, unsigned char *out);
/* The packed image of a cell never written: the fill values. */
void st_fill_packed(const store *s, unsigned char *out);

hid_t st_utf8_vlen(void);     /* a variable-length UTF-8 string type (caller closes) */
hid_t st_file_access(void);   /* file access list: no HDF5 locking, strong close */

int st_create_view(store *s, const char *path, as_err *err);
/* Attribute writers (schema.c): an existing attribute of the name is replaced. */
int st_attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, size_t n, const void *data);
int st_attr_str(hid_t loc, const char *name, const char *value);
/* A 1-D dataset of file's (a coordinate) as malloc'd values of mtype, elem bytes each, its
 * length in *n. NULL when absent (*n untouched), not 1-D, empty or unreadable (*n its
 * length then). Call inside H5E_BEGIN_TRY: a missing dataset is an answer here. */
void *st_read_1d(hid_t file, const char *name, hid_t mtype, size_t elem, size_t *n);

/* ---- the model axis in the view (schema_models.c) ---- */

/* The model axis' auxiliary coordinates, named in every data variable's CF
 * `coordinates` attribute so xarray decodes them as coordinates. */
#define ST_MODEL_COORDS "model_path model_sha256 model_config_sha256 model_kind model_family model_n_layer model_n_head model_n_embd training_step"
int st_create_model_coords(hid_t file, const store *s); /* after the `model` scale exists */
int st_create_head_valid(hid_t file, const store *s);   /* after model, layer, head exist */
/* 1 when the view's model names or sha256s are not this store's (a rebuild then writes
 * them); the model count was checked with the other axes. */
int st_models_differ(const store *s, hid_t f);
int st_open_view(store *s);   /* 0 ok, 1 unusable or other axes (rebuild) */
void st_close_handles(store *s);
void st_discard_view(store *s, const char *path);
void st_discard_view_keep_name(store *s);
/* OUT.h5.reserve (schema.c): created at open (best effort: a disk without 8 MiB free simply
 * gets none), removed at close, and given up on a full disk so the view can still close.
 * A symbolic link at its name is refused (-1, err), never written through. */
int st_reserve_create(store *s, as_err *err);
void st_reserve_release(store *s);
int st_write_root_attrs(store *s, hid_t file);
int st_write_segments(store *s, hid_t file);
int st_write_cell_values(store *s, size_t m, size_t w, size_t l, const unsigned char *packed);
/* Reads a cell's values from the open view (file f, the store's variables) into packed
 * form; 0 or -1. A file written before the model axis (no model dimension) holds model 0
 * only. */
int st_read_cell_values(const store *s, hid_t f, size_t m, size_t w, size_t l, unsigned char *packed);
/* ---- compressed chunks (cellwire_deflate.c, chunks.c) ---- */

/* The rank of variable v in the view (model, window, L first). */
int st_var_rank(cr_var v);
/* 1 when the view file f's metric datasets carry shuffle + deflate, 0 when not, -1 when
 * it cannot tell (no dist_true). */
int st_view_filters(hid_t f);
/* The view file f's cell form: ST_FORM_* bits, -1 when it cannot tell (no dist_true).
 * ST_FORM_DEFLATE: exactly shuffle + deflate 1 (+ fletcher32 last), what cellwire_deflate.c makes;
 * ST_FORM_FLETCHER: the last filter is fletcher32. */
enum { ST_FORM_DEFLATE = 1, ST_FORM_FLETCHER = 2 };
int st_view_form(hid_t f);
int st_file_form(const char *path);
/* Writes a deflated cell's chunks into the open view as they are (H5Dwrite_chunk). */
int st_write_cell_chunks(store *s, size_t m, size_t w, size_t l, const unsigned char *dz);
/* Reads a cell's stored chunks from view f (H5Dread_chunk) into the deflated form at out
 * (cap bytes); *len gets its size. fletcher32: the view's chunks end with the checksum
 * (the "ASZ2" form), each is verified. -1 when a chunk is missing, was stored with a
 * filter skipped, fails its checksum, or does not fit. A file from before the model axis
 * holds model 0 only. */
int st_read_cell_chunks(const store *s, hid_t f, size_t m, size_t w, size_t l, int fletcher32,
                        unsigned char *out, size_t cap, size_t *len);
/* s->dz_buf (dz_cap bytes) and s->dz_scratch, made on first use; 0 or -1. */
int st_dz_buffers(store *s);
/* A cell's values as journaled (packed, or deflated when deflated is 1) read back from
 * view f into s->packed or s->dz_buf; *out points at them, *len their size. 0 or -1. */
int st_read_cell_as(store *s, hid_t f, size_t m, size_t w, size_t l, int deflated,
                    const unsigned char **out, size_t *len);
/* st_read_cell_as checked against crc, the CRC-32 the journal holds for the cell's values
 * as journaled: 1 intact (*out, *len: the journaled bytes), 0 damaged or unreadable. A
 * deflated cell is compared in both checksum forms ("ASZ1"/"ASZ2": a cell journaled in one
 * and stored in the other, e.g. merged from an older shard). */
int st_cell_intact(store *s, hid_t f, size_t m, size_t w, size_t l, int deflated, uint32_t crc,
                   const unsigned char **out, size_t *len);
/* Writes a cell's values held in either form into the open view in its form. */
int st_write_cell_any(store *s, size_t m, size_t w, size_t l, const unsigned char *data, size_t len,
                      int deflated);

int st_write_bookkeeping_cell(store *s, size_t m, size_t w, size_t l);
int st_write_bookkeeping_all(store *s);

/* ---- the journal as the truth (replay.c) ---- */

int st_replay_journal(store *s, as_err *err);
int st_rebuild_view(store *s, as_err *err);
int st_reconcile_view(store *s, as_err *err); /* 1 = rebuild needed */

/* ---- compaction (compact.c) ---- */

/* Makes the view durable, reads every done cell whose values are still in the journal
 * back from it, and rewrites the journal with those cells compacted (journal.h
 * "Compaction"). 0, or -1 with err filled (the journal is then unchanged). */
int st_compact(store *s, as_err *err);
/* A store that only knows the layout of axes (reading an output without being its writer):
 * for st_read_cell_as and st_cell_intact; free its dz_buf, dz_conv and dz_scratch. */
void st_layout_store(store *s, const store_axes *axes);

/* ---- the status file (status.c) ---- */

/* Fills p's status fields, total, done, failed and the L rows (windows each) from
 * OUT.h5.status; 0, or -1 with one line naming the file and the key. */
int st_read_status_file(const char *status_path, store_progress *p, as_err *err);

#endif
