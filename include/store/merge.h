/* merge.h -- join the shard files of a sweep split over a job array.
 *
 * `attnsweep run CONFIG --shard I/K` writes OUT.shard-I-of-K.h5 (run.h,
 * run_shard_path): a complete store (journal + HDF5 view + status, store.h)
 * with the full axes but only shard I's cells done. merge_shards() joins
 * such files into one store OUT whose values equal a single run's bit for bit.
 *
 * How: the merged JOURNAL is written first, from the shards' journals (the
 * truth, journal.h): one config record, every shard's segments renumbered in
 * shard order, and per cell its commit record with the packed payload copied
 * byte for byte (wall_time and rank are the computing shard's; attempts are
 * summed over the shards). It is written to OUT.journal.merge.PID, fsynced
 * and renamed to OUT.journal, all under OUT's lock (lockfile.h), so a leftover
 * OUT.journal.merge.* is a killed merge's and the next merge or run removes it;
 * then store_open() on OUT finds a journal without
 * an HDF5 view and builds the view from it (temp file + rename), adding the
 * "merge" segment (hosts "merge:HOST", mpi_size 0, the SLURM job id if any),
 * and store_close() writes the status file. The result is an ordinary store:
 * `attnsweep run CONFIG` resumes it and computes the cells no shard finished.
 * A crash between the two renames leaves a journal without a view, which the
 * next store_open rebuilds.
 *
 * Refused, with one line naming the file, before anything is written:
 *   - a name that is not OUT.shard-I-of-K.h5 (or .nc / no extension), shards
 *     of different OUT or K, a shard given twice;
 *   - a shard missing from 0..K-1 (the message lists them) unless partial;
 *   - a shard without journal or readable view, or whose view and journal
 *     disagree on the axes; a shard another process on this host still writes;
 *   - shards with another config (sha256 of the canonical config text), other
 *     axes, other weights or text (their sha256);
 *   - a cell done in two shards with different values;
 *   - an existing OUT without its journal unless force (then it is replaced), an
 *     existing OUT of another config or axes than the shards (force replaces it),
 *     an output that is one of the shards, an output locked by a live writer.
 * An existing OUT (with its journal) of the shards' config is joined, not refused: its
 * cells are merged in as a shard's are (shards started next to it skip the cells it
 * holds, run.h), a cell it holds and a shard holds too must be equal, and its
 * provenance segments come first. force ignores it and replaces it.
 * Shard files are only read. */
#ifndef ATTNSWEEP_MERGE_H
#define ATTNSWEEP_MERGE_H

#include <stddef.h>

#include "errors.h"

typedef struct {
    const char *const *shards; /* shard file paths */
    size_t n_shards;
    const char *out;           /* NULL: the shard name without ".shard-I-of-K" */
    int partial;               /* allow shards missing from 0..K-1 */
    int force;                 /* replace an existing output */
} merge_opts;

typedef struct {
    char out[4096];
    int shard_count;           /* K */
    size_t shards_given;
    char missing[512];         /* "3, 5" when shards were missing (partial), else "" */
    size_t total, done, failed; /* cells of the merged output */
    size_t segments;           /* provenance segments carried over (the merge's not counted) */
    int joined_existing;       /* the existing output's cells were merged in */
} merge_summary;

/* Parses "DIR/NAME.shard-I-of-K.h5" into the output it is a shard of
 * ("DIR/NAME.h5"), I and K. Returns 0, or -1 when the name has no such part. */
int merge_parse_shard_name(const char *path, char *out, size_t size, int *index, int *count);

/* Returns 0 with sum filled, or -1 with err set (nothing written then). */
int merge_shards(const merge_opts *opts, merge_summary *sum, as_err *err);

#endif
