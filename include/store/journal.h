/* journal.h -- the append-only journal next to a results file (OUT.h5.journal).
 *
 * The journal, not the HDF5 file, is the truth about which cells are done (so a
 * kill at any moment loses no finished cell; docs/reliability.md, "Finished work
 * survives any kill"):
 * the HDF5 view can be rebuilt from it. It knows bytes, not HDF5.
 *
 * File layout (little-endian, as written by x86-64 / aarch64 hosts):
 *   header, JOURNAL_HEADER_BYTES bytes: magic "ASJRNL\0\1", version, config
 *     sha256 (hex) of the run that created it, the six layout sizes of a
 *     cell's result block (n_N n_T n_eps n_norm n_layer n_head), the packed payload
 *     size of one done cell, a fingerprint of the axis values that may not
 *     change between segments, and a CRC32 of all of that.
 *   records, each JOURNAL_RECORD_BYTES of fixed fields (with their own CRC32)
 *     followed by payload_len payload bytes (with a CRC32 in the fields).
 *
 * Records are appended with one write() each and made durable with
 * journal_sync() (fsync). A record is bad when its fields or payload fail their
 * checksum or it runs past the end of the file. journal_open() reads every
 * record and tells two kinds of bad apart:
 *   - a torn tail: bad records with no intact record after them. A crash leaves
 *     one (an append cut short); a writable open truncates it away, a read-only
 *     one ignores it.
 *   - damage: bad bytes followed by an intact record (a flipped byte, a cut, a
 *     disk error in the middle). journal_open() resynchronises on the next intact
 *     record -- the next record magic whose fields, length and payload check out
 *     -- skips the damaged range and keeps every record after it; nothing is
 *     truncated and the damaged bytes stay in the file (so every later open finds
 *     and reports the same damage). journal_damaged() lists the ranges. The store
 *     treats cells whose records were lost as not done (they are recomputed).
 * The header is the journal's identity: a header that fails its checksum is
 * refused, and nothing is changed.
 *
 * Support window: this program reads and appends to journals of versions 1 to 4, with or
 * without the inputs in their config records (JR_CONFIG below); one without them is
 * accepted with the inputs unchecked once (a note on stderr), and the run records them.
 *
 * Versions. 4 (this program writes it) adds compressed payloads: a JR_COMMIT with flag
 * JF_DEFLATE holds the cell in the deflated form (store.h, cellwire_deflate.c: the chunks HDF5's
 * shuffle + deflate stores), its CRC over those bytes; compacted, it keeps JF_DEFLATE and
 * its digest is the CRC and length of the deflated form. Version 3 journals are read as
 * they are (no such flag) and appended to with plain payloads; a store that is to append
 * deflated ones rewrites the journal as version 4 first (a compaction, store.c). 3 added the model axis: a JR_DISPATCH or
 * JR_COMMIT names its cell as (model index, window index, L value), the model index in
 * the upper 16 bits of the 4-byte flags word (JF_* use the lower 16), so the record
 * keeps its 80 bytes. Version 1 and 2 journals (no model: those bits are always 0) are
 * read as a one-model sweep and appended to in their own form; a cell of a model > 0
 * cannot be written to them (journal_append refuses), so a store that opens one with
 * more than one model first rewrites it as version 3 (a compaction, store.c), as does
 * their first compaction anyway. 2 added the record field `flags` (4 bytes that
 * were always 0 in version 1) and compacted commits. Version 1 journals are read as
 * they are and appended to in version 1's form; their first compaction rewrites
 * them as version 2. A program that reads only version 1 refuses a version 2
 * journal in one line ("journal version 2, this program reads version 1").
 *
 * Compaction (the store's, src/store/compact.c; as SQLite checkpoints its WAL). A
 * JR_COMMIT first carries the cell's values in full. Once the HDF5 view is flushed and
 * fsynced and the cell has been read back from it with the CRC-32 of its packed values
 * equal to the journaled one, the journal is rewritten into OUT.h5.journal.compact.PID
 * -- every record in the same order, each verified (or superseded) done commit with
 * flags = JF_COMPACT and a JOURNAL_COMPACT_BYTES payload instead of the values:
 *   uint32 CRC-32 of the packed values, uint32 0, uint64 their length --
 * fsynced, renamed over OUT.h5.journal, and the directory fsynced. A kill at any step
 * leaves the old journal (whole) or the new one (compacted, and the view durable and
 * verified), never a mix; a leftover OUT.h5.journal.compact.* is removed by the next
 * open. Damaged ranges (above) are not copied: their note stays in /provenance.
 * Identity, dispatch, segments and per-cell bookkeeping are all kept.
 *
 * After compaction the journal and the HDF5 view together are the truth: the journal
 * says which cells are done and what their values' checksum is, the view holds the
 * values. A view that has to be rebuilt (missing, unreadable, other axes after an
 * extension, or behind the journal) takes each compacted cell from the old view read
 * read-only and checked against its checksum; a compacted cell it cannot get back
 * intact -- the view deleted, its chunk damaged -- is NOT trusted: it becomes pending
 * again (a JR_COMMIT with status 0 says so in the journal) and is computed again, and
 * the open's note (stderr, /provenance/note) counts such cells. Nothing wrong is ever
 * kept; at worst a lost view costs recomputation, as it would without any journal.
 * STORE_KEEP_JOURNAL (store.h) never compacts, for a journal that can rebuild a lost
 * view alone at 2x the disk.
 *
 * Record types (fields not listed are 0):
 *   JR_CONFIG     payload = the config's sha256 (hex), "\n", the config text, and then,
 *                 from the version of attnsweep that records the inputs' identity on,
 *                 "\0" and one line "KEY sha256=HEX\n" per input file the run read
 *                 (KEY: "model M model.safetensors", "model M config.json", "text",
 *                 "vocab.json", "merges.txt"; store.h, store_provenance inputs);
 *                 t_start = time written. A new record is appended whenever the config
 *                 or the inputs recorded change (a config change, models appended, a
 *                 journal that had none). Readers that predate the inputs stop at the
 *                 NUL and see the config alone, so the journal version did not change.
 *   JR_DISPATCH   a cell was handed to a worker: model, window, L (the L VALUE, not
 *                 its index, so axes may grow), window_start, attempt, rank,
 *                 t_start.
 *   JR_COMMIT     a cell finished: model, window, L, window_start, status (1 done,
 *                 2 failed), attempt, rank, t_start, t_end, wall_time;
 *                 payload = the packed results (empty for a failed cell), or with
 *                 flags JF_COMPACT the digest of the values (Compaction). Status 0
 *                 (version 2): a compacted cell whose values a rebuild could not
 *                 recover is pending again (empty payload).
 *   JR_SEG_BEGIN  a run segment began: window = segment number, rank = MPI
 *                 size, t_start; status, attempt, L = the sweep's number of models,
 *                 windows and L values in it (0 0 0 from writers before them: /provenance
 *                 tells a segment's extension by comparing with the previous one); payload = "hosts\0slurm_job_id", optionally
 *                 followed by "\0note" (what the segment's open found wrong, e.g.
 *                 journal damage; readers of version 1 that predate the note stop
 *                 at the second NUL and ignore it), and then by "\0inputs" (the
 *                 inputs' identity the segment ran with, as in JR_CONFIG; the note is
 *                 then present, maybe empty; readers that predate it ignore it).
 *   JR_SEG_END    that segment ended: window = segment number, t_end,
 *                 attempt = cells committed in the segment, status = how it ended (1
 *                 completed, 2 stopped by a signal, 3 an error; 0 from writers before it),
 *                 L = the signal's number (status 2). No JR_SEG_END: crashed or killed.
 *                 The counts and the ending sit in fields older writers left 0 and older
 *                 readers ignore, so the journal version did not change (as for the inputs
 *                 of JR_CONFIG).
 * Times are seconds since the Unix epoch. */
#ifndef ATTNSWEEP_JOURNAL_H
#define ATTNSWEEP_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "errors.h"

#define JOURNAL_HEADER_BYTES 256
#define JOURNAL_RECORD_BYTES 80
#define JOURNAL_VERSION 4
/* The most models a journal can name (16 bits of the flags word, version 3). */
#define JOURNAL_MAX_MODELS 65535

enum { JR_CONFIG = 1, JR_DISPATCH = 2, JR_COMMIT = 3, JR_SEG_BEGIN = 4, JR_SEG_END = 5 };

/* Record flags. JF_COMPACT on a JR_COMMIT: the cell's values are no longer in the
 * journal but only in the HDF5 view; the payload is a JOURNAL_COMPACT_BYTES
 * digest (see "Compaction" above). JF_DEFLATE (version 4): the values (or the digest's
 * CRC and length) are of the cell's deflated form. */
enum { JF_COMPACT = 1, JF_DEFLATE = 2 };
#define JOURNAL_COMPACT_BYTES 16

typedef struct {
    char config_sha256[65];  /* hex, NUL-terminated */
    uint64_t layout[6];      /* n_N n_T n_eps n_norm n_layer n_head */
    uint64_t payload_bytes;  /* packed size of one done cell's results */
    uint64_t axes_fingerprint;
} journal_header;

typedef struct {
    uint32_t type;
    int32_t window, L;
    uint32_t status, attempt;
    int32_t rank;
    uint32_t flags;          /* JF_* (version 2; always 0 in version 1); < 2^16 */
    uint32_t model;          /* model index (version 3; 0 in older journals); < 2^16 */
    int64_t window_start;
    double t_start, t_end, wall_time;
    uint64_t payload_len;
    off_t payload_offset;    /* filled by journal_next(): where the payload starts */
    uint32_t payload_crc;    /* filled by journal_next() */
} journal_record;

typedef struct journal journal;

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32) continued from crc (start with 0). */
uint32_t journal_crc32(uint32_t crc, const void *data, size_t n);

/* Creates a new journal (fails if path exists), writes and fsyncs the header. */
journal *journal_create(const char *path, const journal_header *hdr, as_err *err);

enum { JOURNAL_WRITABLE = 1, JOURNAL_SKIP_PAYLOAD_CRC = 2 };

/* Opens an existing journal, checks the header, and validates every record
 * (payload checksums too, unless JOURNAL_SKIP_PAYLOAD_CRC: a quick look, as
 * `attnsweep status` takes while a run writes). *torn_bytes (may be NULL) gets
 * the size of a torn tail; JOURNAL_WRITABLE opens truncate it (and fsync). */
journal *journal_open(const char *path, int flags, journal_header *hdr, off_t *torn_bytes,
                      as_err *err);

/* A damaged range found by journal_open: bytes [start, end) are skipped; records
 * is how many records it held, as far as their surviving magics tell (>= 1). */
typedef struct {
    off_t start, end;
    unsigned records;
} journal_damage;

/* The damaged ranges (ascending; *n = 0 when the journal is intact). Owned by j. */
const journal_damage *journal_damaged(const journal *j, size_t *n);

/* Iterates over the valid records from the start, skipping damaged ranges:
 * journal_rewind() then journal_next() until it returns 0 (end) or -1 (I/O error). */
void journal_rewind(journal *j);
int journal_next(journal *j, journal_record *rec, as_err *err);

/* Reads len payload bytes of a record found by journal_next (checks its CRC). */
int journal_read_payload(journal *j, const journal_record *rec, void *buf, as_err *err);

/* Appends one record (one write()); durable only after journal_sync(). The _crc
 * form takes the payload's CRC-32 already computed by the caller (a cell's payload
 * is megabytes: the store computes it once per commit). */
int journal_append(journal *j, const journal_record *rec, const void *payload, as_err *err);
int journal_append_crc(journal *j, const journal_record *rec, const void *payload,
                       uint32_t payload_crc, as_err *err);
int journal_sync(journal *j, as_err *err);

/* Bytes of valid journal (header included). */
off_t journal_size(const journal *j);
/* The header's format version (1 to 3; journal_create writes JOURNAL_VERSION). */
unsigned journal_version(const journal *j);
/* Renames the journal's file to `to` (atomic rename, then the directory is fsynced);
 * the handle keeps working under the new name. */
int journal_rename(journal *j, const char *to, as_err *err);
const char *journal_path(const journal *j);
void journal_close(journal *j);

#endif
