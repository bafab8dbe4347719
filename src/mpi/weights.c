/* weights.c -- the weights of the model being computed, one copy per node (weights.h). */
#include "weights.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

static int all_ok(MPI_Comm comm, int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    return all;
}

void weights_init(node_weights *w) {
    memset(w, 0, sizeof *w);
    w->node = MPI_COMM_NULL;
    w->win = MPI_WIN_NULL;
    w->index = -1;
}

void weights_free(node_weights *w) {
    weights_unload(w);
    if (w->node != MPI_COMM_NULL) MPI_Comm_free(&w->node);
}

void weights_unload(node_weights *w) {
    if (w->ok) model_free(&w->model);
    w->ok = 0;
    if (w->win != MPI_WIN_NULL) MPI_Win_free(&w->win);
    w->win = MPI_WIN_NULL;
    w->index = -1;
}

int weights_load(node_weights *w, MPI_Comm comm, const char *dir, long index, as_err *err) {
    weights_unload(w);
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const char *priv = getenv("ATTNSWEEP_PRIVATE_WEIGHTS");
    if (priv && priv[0] == '1') {
        w->ok = model_load(&w->model, dir, err) == 0;
        if (all_ok(comm, w->ok)) {
            w->index = index;
            return 0;
        }
        if (rank == 0 && w->ok) as_fail(err, "the model failed to load on another rank");
        return -1;
    }
    if (w->node == MPI_COMM_NULL)
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &w->node);
    int node_rank = 0;
    MPI_Comm_rank(w->node, &node_rank);
    gpt2_config mc;
    int ok = model_config_read(&mc, dir, err) == 0;
    if (!all_ok(comm, ok)) return -1;
    /* Rank 0 of the node holds the whole segment; the MPI library may place
     * it at any address, so 64 bytes more leave room to align the arena. */
    enum { ALIGN = 64 };
    size_t bytes = model_arena_bytes(&mc) + ALIGN;
    void *base = NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    int rc = MPI_Win_allocate_shared(node_rank == 0 ? (MPI_Aint)bytes : 0, 1, info, w->node, &base,
                                     &w->win);
    MPI_Info_free(&info);
    ok = rc == MPI_SUCCESS;
    if (!all_ok(comm, ok)) {
        w->win = MPI_WIN_NULL;
        char size[32];
        fileio_format_size(size, sizeof size, (double)bytes); /* not MB: a small model is 0 MB */
        return as_fail(err, "%s: cannot share %s (%zu bytes) of weights between the ranks of a node",
                       dir, size, bytes);
    }
    if (node_rank != 0) {
        MPI_Aint size = 0;
        int disp = 0;
        MPI_Win_shared_query(w->win, 0, &size, &disp, &base);
    }
    /* Every process maps the segment page aligned, so one offset fits all. */
    int pad = (int)((ALIGN - (uintptr_t)base % ALIGN) % ALIGN);
    MPI_Bcast(&pad, 1, MPI_INT, 0, w->node);
    float *arena = (float *)(void *)((char *)base + pad);
    if (node_rank == 0) w->ok = model_load_into(&w->model, dir, arena, 1, err) == 0;
    /* The fence orders the filler's writes before the others' reads. */
    MPI_Win_fence(0, w->win);
    int filled = w->ok;
    MPI_Bcast(&filled, 1, MPI_INT, 0, w->node);
    if (node_rank != 0 && filled)
        w->ok = model_load_into(&w->model, dir, arena, 0, err) == 0;
    if (!all_ok(comm, w->ok)) {
        if (rank == 0 && w->ok) as_fail(err, "the model failed to load on another rank");
        return -1;
    }
    w->index = index;
    return 0;
}
