/* dump.h -- writer of the dump file (docs/results.md, "The dump file"): one
 * window's tokens, the captured layers' q, k, v, raw scores and attention
 * pattern, and the last position's logits.
 *
 * Layout (L = window length, H = n_head, D = d_head, V = vocab_size):
 *   tokens                [L] int32
 *   layer_{l:02d}/q, k, v [H, L, D] float32 (after the c_attn bias)
 *   layer_{l:02d}/scores  [H, L, L] float32, raw q.k, NaN above the diagonal
 *   layer_{l:02d}/pattern [H, L, L] float32, softmax(q.k/sqrt(D)), 0 above
 *   logits_last           [V] float32
 *   position, key_position [L], head [H], d_head [D], vocab [V]: int32 0..n-1,
 *     root-group dimension scales attached to every dataset above, so
 *     xr.open_dataset(path) and xr.open_dataset(path, group="layer_00") name
 *     their dimensions (the netCDF-4 data model, as the results file)
 *   root attributes: window_start, model_dir, weights_sha256, Conventions, title
 *
 * The file is written as PATH.tmp.<pid> and renamed to PATH by dump_close(),
 * so PATH is either absent or complete. Layers are streamed: the writer keeps
 * one [L, L] staging matrix (for the NaN mask), sized at dump_open().     */
#ifndef ATTNSWEEP_DUMP_H
#define ATTNSWEEP_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "forward.h"

typedef struct dump_writer dump_writer;

typedef struct {
    size_t window_start;
    const char *model_dir;
    const char *weights_sha256;
} dump_provenance;

/* Creates the temporary file and writes tokens [L] and the attributes. */
dump_writer *dump_open(const char *path, const int32_t *tokens, size_t L,
                       const dump_provenance *prov, as_err *err);

/* Writes group layer_{view->layer:02d} from one captured layer. */
int dump_write_layer(dump_writer *w, const fwd_layer_view *view, as_err *err);

/* Writes logits_last [V]. */
int dump_write_logits(dump_writer *w, const float *logits, size_t V, as_err *err);

/* Closes and renames the temporary file onto the path; frees w either way. */
int dump_close(dump_writer *w, as_err *err);

/* Closes and removes the temporary file (after an error); frees w. */
void dump_abort(dump_writer *w);

#endif
