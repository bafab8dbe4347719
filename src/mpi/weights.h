/* weights.h -- the weights of the model being computed, one copy per node (private to
 * src/mpi).
 *
 * The ranks of a node share one read-only copy: an MPI-3 shared-memory window that the
 * node's first rank allocates and fills while the others map it (and check the file
 * against config.json), so an extra rank costs its activations alone.
 * ATTNSWEEP_PRIVATE_WEIGHTS=1 gives every rank its own copy (for comparison).
 *
 * The model axis (docs/usage.md, "Several models in one sweep"): one model is resident at a
 * time. weights_load is collective over comm and first frees the resident model (its
 * window: MPI_Win_free is collective over the node's ranks), then maps the next one, so
 * two models never share the memory -- no transient at a switch. */
#ifndef ATTNSWEEP_WEIGHTS_H
#define ATTNSWEEP_WEIGHTS_H

#include <mpi.h>

#include "errors.h"
#include "model.h"

typedef struct {
    MPI_Comm node;     /* the ranks of this node (made at the first load) */
    MPI_Win win;       /* the shared window holding the weights, or MPI_WIN_NULL */
    gpt2_model model;  /* the resident model (valid when ok) */
    int ok;
    long index;        /* its index in the config's model axis; -1: none */
} node_weights;

void weights_init(node_weights *w);
/* Collective over the node when a window exists. */
void weights_unload(node_weights *w);
void weights_free(node_weights *w);

/* Loads DIR (model `index`) in place of the resident model; collective over comm. What
 * the weights must hash to is the run's to check (run_model_loaded, run.h). */
int weights_load(node_weights *w, MPI_Comm comm, const char *dir, long index, as_err *err);

#endif
