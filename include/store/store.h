/* store.h -- the results store: journal (truth) + HDF5 view + lock + status.
 *
 * Only the master rank uses it; it knows files and HDF5, not MPI and not the
 * metrics. The HDF5 file follows docs/results.md (netCDF-4 data
 * model: every axis a dimension scale attached to every variable using it).
 *
 * Files next to the output OUT.h5:
 *   OUT.h5.journal  append-only checksummed journal (journal.h): the truth
 *   OUT.h5.lock     who writes (lockfile.h)
 *   OUT.h5.status   small JSON the writer replaces atomically (rename) after
 *                   every batch; `attnsweep status` reads it with the journal
 *   OUT.h5.tmp.PID  a file being rebuilt; renamed over OUT.h5 when complete,
 *                   removed on every error path
 *
 * Cells are (model index, window index, L value). Model and window indices and L
 * values, not positions, identify a cell in the journal, so a later segment may append
 * models or windows or L values (the file is then rebuilt with the larger axes). The
 * other axes (N, T, eps, normalizer, layer, head) are fixed for the life of
 * the journal (checked via the journal's layout sizes and axis fingerprint): a model
 * appended later must fit the layer and head axes the output has.
 *
 * The model axis (docs/results.md "The model axis"): every cell variable's first
 * dimension; coordinates model (name), model_path, model_sha256, model_n_layer,
 * model_n_head, model_n_embd, training_step; head_valid (model, layer, head) says which
 * (layer, head) of the union axes each model has. On resume each model's sha256 must
 * equal the stored one (a model rewritten in place is refused by the caller, src/sweep/run_output.c);
 * a view whose model names or sha256s differ from the store's is rebuilt from the journal.
 *
 * Commit protocol (docs/reliability.md, "Finished work survives any kill"): per batch, data into
 * HDF5 + H5Fflush; status/wall_time/rank/attempts + H5Fflush; journal records
 * + fsync. A cell is done only when the journal says so. At open, a file that
 * does not open, has other axes, or disagrees with the journal (a journal-done
 * cell not marked done) is rebuilt from the journal into OUT.h5.tmp.PID and
 * renamed over OUT.h5. Cells the file marks done that the journal does not
 * (crash between the flush and the fsync) are reset in place: status back to
 * the journal's, values back to the fill. The open journals its segment (and
 * a changed config) only after the view is usable; a failed open leaves the
 * journal and the file as they were. Leftover OUT.h5.tmp.* files of a writer
 * killed mid-rebuild are removed once the lock is held.
 *
 * Compaction (journal.h "Compaction"): once STORE_COMPACT_BYTES of values are whole
 * in the journal, and at every close, the view is fsynced, those cells are read back
 * and checked, and the journal is rewritten without their values. The journal + the
 * view are then the truth together: a rebuild takes compacted cells from the old view
 * (checked against their checksums) and recomputes those it cannot get back.
 *
 * Sizes at paper scale (128 N x 21 T x 3 eps x 1 normalizer x 144 heads):
 * 10.97 MB per cell in the HDF5 file; in the journal the same until it is compacted,
 * then ~100 bytes per cell.
 *
 * Packing: the file types of the metric variables and the conversion of a double block
 * are the cell wire's (cellwire.h, cw_pack_cell). The store writes those same bytes to the
 * HDF5 file and the journal, so a rebuilt file is bit-identical in its values; `attnsweep
 * run` packs on the workers and commits with store_commit_packed (half the MPI traffic).
 *
 * Fill values: float variables NaN; rows_used, crit_N, crit_N_censored STORE_INT_FILL
 * (netCDF's default int fill); rank -1. Each carries a _FillValue attribute of
 * its own type. status (0 = pending) and attempts (0) are written for every
 * cell and carry no _FillValue, so xarray keeps them integer. */
#ifndef ATTNSWEEP_STORE_H
#define ATTNSWEEP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cellresult.h"
#include "cellwire.h"
#include "errors.h"
#include "journal.h"

#define STORE_INT_FILL CW_INT_FILL

/* The journal is compacted when this many bytes of cell values are whole in it
 * (and at every close), so it stays within this of its compacted size. */
#define STORE_COMPACT_BYTES (1ull << 30)

enum { STORE_PENDING = 0, STORE_DONE = 1, STORE_FAILED = 2 };

/* The axes of a sweep, as plain arrays (the caller owns them). */
typedef struct {
    size_t n_window;
    const int64_t *window_start; /* [n_window] token offset of each window */
    size_t n_L;
    const int32_t *L;            /* [n_L] context lengths, distinct */
    size_t n_N;
    const int32_t *N;            /* [n_N] */
    size_t n_T;
    const double *T;             /* [n_T] */
    size_t n_eps;
    const double *eps;           /* [n_eps] */
    size_t n_norm;
    const char *const *normalizer; /* [n_norm] UTF-8 names */
    size_t n_layer;
    const int32_t *layer;        /* [n_layer] */
    size_t n_head;
    const int32_t *head;         /* [n_head] */
    /* The model axis. n_model = 0 means one model described by the provenance alone
     * (name "model", path prov.model_dir, sha256 prov.weights_sha256, shapes -1, every
     * head present): what callers written before the model axis get. */
    size_t n_model;
    const char *const *model_name;    /* [n_model] unique */
    const char *const *model_path;    /* [n_model] */
    const char *const *model_sha256;  /* [n_model] of model.safetensors; "" = unknown */
    const int32_t *model_n_layer, *model_n_head, *model_n_embd; /* [n_model] */
    const int64_t *training_step;     /* [n_model] -1 = not given */
    const char *const *model_kind;    /* [n_model] model_kind() of each; NULL = the provenance's */
    const char *const *model_config_sha256; /* [n_model] of each config.json; NULL = not recorded
                                             * (a file from before it: the provenance's, or "") */
    const char *const *model_family;  /* [n_model] the family config.json's model_type picks
                                       * (model_family_name); NULL = not recorded ("") */
    const uint8_t *head_valid;        /* [n_model][n_layer][n_head] 1 present, 0 masked; NULL = all 1 */
    /* metrics.query_rows = "sample:K": the cells hold the SE variables (cellresult.h); an
     * existing output says so by its root attribute query_rows */
    int sampled;
} store_axes;

/* Provenance (docs/results.md "Root attributes") and this run segment. Strings may
 * be NULL (stored as ""). */
typedef struct {
    const char *config_text, *config_sha256;
    const char *model_dir, *weights_sha256;
    const char *text_path, *text_sha256;
    const char *tokenizer_files;        /* e.g. "vocab.json merges.txt" with their sha256 */
    const char *model_config_sha256;    /* of model 0's config.json; "" = not recorded */
    /* The inputs' identity, kept in the journal's config record (journal.h): one line
     * "KEY sha256=HEX" per input file (store_inputs_lookup); NULL or "" = none given. */
    const char *inputs;
    long vectors, rows;                 /* metrics.vectors / metrics.rows as the config's enums */
    const char *vectors_name, *rows_name; /* their config spellings ("value", "visible"); when
                                           * given, stored instead of the numbers */
    const char *logits_name;            /* metrics.logits ("raw" | "scaled"); NULL/"" = "raw" */
    const char *query_rows_name;        /* metrics.query_rows ("all" | "sample:K"); NULL/"" = "all" */
    const char *model_kind;             /* model_kind() of the model directory; NULL = not stored */
    const char *distance_name;          /* metrics.distance ("per_token" | "aggregate") */
    double ks_alpha;
    int ks_random;                      /* metrics.ks_against = "random" (root attribute ks_against) */
    long random_subsets;                /* metrics.random_subsets, 0 when dist_random is off */
    uint64_t seed;
    const char *mpi_library;            /* MPI_Get_library_version, from the caller */
    const char *openblas_config;        /* openblas_get_config(), from the caller */
    /* this segment */
    const char *hosts;                  /* e.g. "node1,node2" */
    int mpi_size;
    const char *slurm_job_id;           /* NULL or "" outside SLURM */
} store_provenance;

typedef enum {
    STORE_RESUME = 0,        /* create, or resume an existing output (the default) */
    STORE_NEW = 1,           /* refuse if OUT.h5 or its journal exist */
} store_mode;

/* Flags for store_open. */
enum {
    STORE_ALLOW_CONFIG_CHANGE = 1, /* caller compared configs and accepts the new one */
    STORE_COMPRESSED = 2,          /* per-cell chunks with shuffle + deflate level 1 for a view
                                    * created now (an existing view keeps its own filters:
                                    * store_compressed); the workers compress (store_commit_deflated) */
    STORE_KEEP_JOURNAL = 4,        /* never compact: the journal keeps every value (2x the
                                    * disk) and can rebuild a lost view alone */
};

/* One finished (or failed) cell of a batch. */
typedef struct {
    size_t window;      /* index into axes.window_start */
    size_t l_index;     /* index into axes.L */
    int status;         /* STORE_DONE or STORE_FAILED */
    int rank;           /* worker rank */
    double t_start, t_end; /* seconds since the epoch */
    double wall_time;   /* seconds; used when block is NULL (failed cell) */
    size_t model;       /* index into the model axis (last, so older initializers mean model 0) */
} store_cell;

typedef struct store store;

/* Reads the config text and sha256 an existing output was last run with (the
 * newest config record of its journal), without locking, so the caller can
 * diff it against its own before store_open. *text and *sha256 are malloc'd
 * (caller frees). Returns 1 when found, 0 when there is no journal, -1 on error. */
int store_peek_config(const char *path, char **text, char **sha256, as_err *err);

/* store_peek_config for a run about to write path: refuses, with store_open's "in use"
 * message, an output whose lock another process holds -- looked at before the journal
 * is read and again when reading it fails, so a run started at the same instant as
 * another, which may find its journal still without a config record, is told "in use"
 * -- and refuses a journal that is a symbolic link (fileio.h). */
int store_peek_config_to_write(const char *path, char **text, char **sha256, as_err *err);

/* The inputs' identity the output's journal holds (its last config record, journal.h): 1
 * and *inputs (malloc'd, the caller frees) when it records them, 0 with *inputs NULL when
 * there is no journal or its config record is from before they were kept (then nothing
 * can be compared), -1 on error. */
int store_peek_inputs(const char *path, char **inputs, as_err *err);

/* The HEX of line "KEY sha256=HEX" in an inputs text, into hex; NULL when it has none. */
const char *store_inputs_lookup(const char *inputs, const char *key, char hex[65]);

/* Creates or resumes OUT.h5 (see the top of this file). flags: STORE_ALLOW_*.
 * A resume whose stored config sha256 differs from prov->config_sha256 fails
 * unless STORE_ALLOW_CONFIG_CHANGE. Starts a provenance segment. */
store *store_open(const char *path, const store_axes *axes, const store_provenance *prov,
                  store_mode mode, int flags, as_err *err);

/* What happened at open: 1 when the HDF5 view was rebuilt from the journal. */
int store_was_rebuilt(const store *s);
/* Bytes of torn journal tail dropped at open. */
long long store_torn_bytes(const store *s);
/* "" when the journal was intact; else one line naming the journal, how many damaged
 * records were skipped and their byte ranges (journal.h "damage"). The same note is
 * in this segment's row of /provenance (column note). The caller prints it. */
const char *store_journal_damage(const store *s);

/* Per-cell state (indices into the axes). */
int store_cell_status(const store *s, size_t model, size_t window, size_t l_index);
int store_cell_attempts(const store *s, size_t model, size_t window, size_t l_index);
/* Cells of one model with the given status. */
size_t store_count_model(const store *s, size_t model, int status);
size_t store_count(const store *s, int status);
size_t store_total(const store *s);
/* Doubles in one cell's block (cellresult.h layout). */
size_t store_block_doubles(const store *s);

/* The packing and the deflated form of a cell are core's (cellwire.h: cw_pack_cell,
 * cw_deflate_cell): the ranks that compute cells produce the bytes the store writes. */

/* Records that a cell was handed to a worker (attempts + 1, journaled; made
 * durable with the next commit batch). */
int store_mark_dispatched(store *s, size_t model, size_t window, size_t l_index, int rank,
                          double t_start, as_err *err);

/* Commits n cells: blocks[i] is the cell's block (store_block_doubles()
 * doubles, cellresult.h layout), may be NULL for a failed cell. A failed
 * cell's values are not stored (they read as fill/NaN); only its wall_time
 * and rank are, from the block when they are numbers there, else from
 * cells[i]. Follows the commit protocol above, then rewrites the status
 * file. The blocks are only read during the call. */
int store_commit_batch(store *s, const store_cell *cells, const double *const *blocks, size_t n,
                       as_err *err);

/* store_commit_batch for cells already packed (cw_pack_cell, cw_pack_bytes() each;
 * NULL for a failed cell). wall_time and rank come from cells[i]. The bytes are
 * checksummed once and written to the view and the journal as given. */
int store_commit_packed(store *s, const store_cell *cells, const unsigned char *const *packed,
                        size_t n, as_err *err);

/* 1 when this output's view stores compressed chunks. The view's own datasets decide
 * (an output resumed keeps the form it was created with, whatever STORE_COMPRESSED says);
 * a view created or rebuilt without an older one to follow takes STORE_COMPRESSED.
 * `attnsweep run` tells the workers to deflate their cells when it is 1. */
int store_compressed(const store *s);
/* The same for the results file at path, opened read-only without a lock: 1 its chunks
 * carry exactly shuffle + deflate 1, 0 not, -1 unreadable. */
int store_file_compressed(const char *path);

/* Checksums (docs/results.md "Checksums"): 1 when this output's cell chunks end with HDF5's
 * Fletcher32 checksum, which every HDF5 reader verifies. Every view created now has them;
 * an existing view keeps its own form (one created without them stays without). Every
 * open of an existing view checks each done cell's stored chunks (and, always, the
 * journal's CRC-32 of its values): a damaged cell is written again from the journal, or,
 * compacted, made pending and computed again (one line in store_journal_damage). */
int store_checksummed(const store *s);
/* The same for the results file at path, read-only: 1, 0, or -1 unreadable. */
int store_file_checksummed(const char *path);
/* Checks the stored chunks of every done cell of the output at path against its journal,
 * read-only, without the lock (the caller makes sure no writer runs): *checked done cells,
 * *damaged of them not intact. 0, or -1 with one line (no journal, unreadable file). */
int store_verify_file(const char *path, size_t *checked, size_t *damaged, as_err *err);

/* store_commit_packed for cells in the deflated form (cw_deflate_cell; NULL for a failed
 * cell). Into a compressed view the chunks go as they are (H5Dwrite_chunk) and the journal
 * record holds the same bytes (flag JF_DEFLATE, its CRC over them); into a plain view they
 * are inflated first and committed as packed cells. A payload that is not a deflated cell
 * of this layout is refused before anything is written. */
int store_commit_deflated(store *s, const store_cell *cells, const unsigned char *const *payload,
                          size_t n, as_err *err);

/* Rewrites OUT.h5.status (atomic rename). in_flight: cells now at workers;
 * state: "running", "finished", "interrupted", "failed". */
int store_write_status(store *s, size_t in_flight, const char *state, as_err *err);

/* The signal that stopped this segment (SIGUSR1, SIGINT, SIGTERM), for /provenance's
 * `ended` ("stopped by signal SIGINT"; SIGUSR1 in a SLURM job: "time limit"). Call before
 * store_close(s, "interrupted", ...). */
void store_set_stop_signal(store *s, int signo);

/* Ends the segment, writes attempts, flushes, writes the status file with the
 * given state, closes the files and removes the lock. Its end record and /provenance say how
 * it ended: "finished" completed, "interrupted" stopped (store_set_stop_signal), "failed" an
 * error. Always frees s. */
int store_close(store *s, const char *state, as_err *err);

/* Call once at the start of a command that writes results files, before MPI_Init: HDF5
 * then never runs its library termination, which crashes (SIGSEGV) on a file whose close
 * failed after a full disk (schema.c has the HDF5 1.10 details). */
void store_library_init(void);

/* Sidecar names: OUT.h5 + suffix (".journal", ".lock", ".status"). */
int store_sidecar(char *out, size_t size, const char *path, const char *suffix);

/* ---- reading an output without opening it as a writer (attnsweep merge) ---- */

/* The fingerprint of the axes that may not change between segments (N, T,
 * eps, normalizer, layer, head), as the journal header holds it. */
uint64_t store_axes_fingerprint(const store_axes *axes);

/* Packed bytes of one done cell for these axes (the journal payload size). */
size_t store_payload_bytes(const store_axes *axes);

/* An existing output's axes (its coordinate variables and window_start) and
 * root provenance attributes, read from its HDF5 view read-only, without the
 * lock and without changing any file. The segment fields of prov (hosts,
 * mpi_size, slurm_job_id) are empty. Everything is owned by the description. */
typedef struct {
    store_axes axes;
    store_provenance prov;
    void *owned; /* internal */
} store_description;

int store_describe(const char *path, store_description *d, as_err *err);
void store_description_free(store_description *d);

/* The packed values of a done cell whose commit record r was read from j, the journal
 * of the output at path with these axes: from the journal, or for a compacted record
 * (journal.h "Compaction") from the HDF5 file, checked against the record's checksum.
 * out holds store_payload_bytes(axes). 0, or -1 with one line. */
int store_read_cell(const char *path, const store_axes *axes, journal *j, const journal_record *r,
                    unsigned char *out, as_err *err);
/* store_read_cell in the form the journal holds the cell: deflated (JF_DEFLATE; up to
 * cw_deflate_bound() bytes) or packed, into out (cap bytes), its size in *len; a
 * compacted deflated cell is read as the file's raw chunks and checked. merge copies
 * compressed cells this way, never inflating them. */
int store_read_cell_stored(const char *path, const store_axes *axes, journal *j, const journal_record *r,
                           unsigned char *out, size_t cap, size_t *len, as_err *err);

/* ---- how far a sweep got (attnsweep status), also while a run writes it ---- */

typedef struct {
    int32_t L;
    size_t windows;      /* cells of this L in the sweep; 0 when unknown */
    size_t done, failed;
} store_progress_L;

/* One model's counts (the model axis). */
typedef struct {
    char name[256];      /* "" when unknown (a journal alone does not name models) */
    size_t total;        /* cells of this model; 0 when unknown */
    size_t done, failed;
} store_progress_model;

typedef enum {
    STORE_FROM_JOURNAL = 0, /* the journal (the truth); totals from the status file */
    STORE_FROM_VIEW = 1,    /* no journal: the HDF5 file's status variable, read-only */
} store_progress_source;

typedef struct {
    store_progress_source source;
    int journal_missing;  /* the output or its status file exists but the journal does not:
                           * the counts come from the HDF5 view and cannot be trusted, and
                           * store_open refuses the output until the journal is back */
    int have_status_file; /* the fields below marked (status) are set */
    size_t total;         /* cells in the sweep; 0 when unknown */
    size_t done, failed;
    size_t windows_done;  /* windows whose cells at every L of per_L are done */
    size_t in_flight;     /* (status) at the last update */
    store_progress_L *per_L;
    size_t n_L;
    store_progress_model *per_model; /* by model index; names and totals from the status file */
    size_t n_model;
    char state[32];       /* (status) running, finished, interrupted, failed */
    char updated[32];     /* (status) ISO 8601 UTC */
    double updated_unix;  /* (status) */
    double rate_cells_per_hour; /* (status) in the last segment */
    char host[256];       /* (status) the writer's host */
} store_progress;

/* Reads OUT.h5.status (strict JSON) and the journal (the truth about done and failed
 * cells: the last commit of each cell decides), never the HDF5 file a run may be
 * writing; without a journal, the HDF5 file's status and L variables. Changes no file
 * and takes no lock. Owned by p; free with store_progress_free. */
int store_read_progress(const char *path, store_progress *p, as_err *err);
void store_progress_free(store_progress *p);

#endif
