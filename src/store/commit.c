/* commit.c -- the commit protocol of the results store (store.h "Commit protocol"): a
 * batch of finished cells into the HDF5 view (flushed), their status (flushed), then the
 * journal (fsynced). Cells come as blocks of doubles, packed, or deflated by the workers
 * (cellwire_deflate.c): a deflated cell goes into a compressed view and the journal as it came.
 * See store_int.h. */
#include "store_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "journal.h"
#include "testhook.h"

/* An HDF5 write of a commit failed (in practice: the disk is full). The view
 * is then inconsistent and, worse, HDF5 1.10 crashes at exit on a file whose
 * close fails (see st_discard_view). The journal holds every finished cell and
 * the provenance, so the view is given up (truncated: the next run rebuilds
 * it from the journal) and the writer stops with one line. */
static int commit_view_failed(store *s, const char *what, as_err *err) {
    int saved = errno;
    st_discard_view_keep_name(s);
    return as_fail(err, "%s: cannot write %s (HDF5 error%s); finished cells are safe in the journal "
                   "and the file is rebuilt from it by the next run", s->path, what,
                   saved == ENOSPC || saved == EDQUOT || saved == EFBIG ? ": disk full" : "");
}

/* Room for n packed cells in s->batch. */
static int batch_room(store *s, size_t n, as_err *err) {
    if (n <= s->batch_cap) return 0;
    unsigned char *b = realloc(s->batch, n * (s->payload_bytes ? s->payload_bytes : 1));
    if (!b) return as_fail(err, "%s: out of memory for a batch of %zu cells", s->path, n);
    s->batch = b;
    uint32_t *c = realloc(s->batch_crc, n * sizeof *c);
    if (!c) return as_fail(err, "%s: out of memory for a batch of %zu cells", s->path, n);
    s->batch_crc = c;
    s->batch_cap = n;
    return 0;
}

int store_commit_batch(store *s, const store_cell *cells, const double *const *blocks, size_t n,
                       as_err *err) {
    enum { CHUNK = 64 };
    store_cell sc[CHUNK];
    const unsigned char *pk[CHUNK];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        if (batch_room(s, k, err)) return -1;
        for (size_t i = 0; i < k; i++) {
            const double *b = blocks[at + i];
            sc[i] = cells[at + i];
            pk[i] = NULL;
            if (sc[i].status == STORE_DONE && !b)
                return as_fail(err, "%s: bad commit of cell (%zu, %zu, %zu): no block", s->path,
                               sc[i].model, sc[i].window, sc[i].l_index);
            /* The block's own bookkeeping wins; a failed cell's block may be all NaN. */
            double wt = b ? b[s->lay.offset[CR_WALL_TIME]] : NAN;
            double rk = b ? b[s->lay.offset[CR_RANK]] : NAN;
            if (!isnan(wt)) sc[i].wall_time = wt;
            if (!(isnan(rk) || rk < 0 || rk > 2147483647.0)) sc[i].rank = (int)rk;
            if (b && sc[i].status == STORE_DONE) {
                unsigned char *dst = s->batch + i * s->payload_bytes;
                st_pack_block(s, b, dst);
                pk[i] = dst;
            }
        }
        if (store_commit_packed(s, sc, pk, k, err)) return -1;
    }
    return 0;
}

/* The protocol for n cells whose values are data[i] (NULL for a failed cell): packed
 * (lens NULL: payload_bytes each) or deflated (lens[i] bytes, view compressed). */
static int commit_cells(store *s, const store_cell *cells, const unsigned char *const *data,
                        const size_t *lens, size_t n, as_err *err) {
    const unsigned char *const *packed = data;
    int deflated = lens != NULL;
    for (size_t i = 0; i < n; i++)
        if (cells[i].model >= s->ax.n_model || cells[i].window >= s->ax.n_window ||
            cells[i].l_index >= s->ax.n_L ||
            (cells[i].status != STORE_DONE && cells[i].status != STORE_FAILED) ||
            (cells[i].status == STORE_DONE && !packed[i]))
            return as_fail(err, "%s: bad commit of cell (%zu, %zu, %zu) status %d", s->path,
                           cells[i].model, cells[i].window, cells[i].l_index, cells[i].status);
    if (st_test_fail("commit"))
        return as_fail(err, "%s: cannot commit %zu cells: failure injected by the test hook "
                       "(ATTNSWEEP_TEST_FAIL=commit)", s->path, n);
    if (batch_room(s, n, err)) return -1;
    int rc = 0;
    /* 1. data, flush; each cell's checksum once, for the journal and compaction */
    H5E_BEGIN_TRY {
        for (size_t i = 0; i < n && !rc; i++) {
            s->batch_crc[i] = 0;
            if (cells[i].status != STORE_DONE) continue;
            size_t len = deflated ? lens[i] : s->payload_bytes;
            s->batch_crc[i] = journal_crc32(0, packed[i], len);
            if (st_write_cell_any(s, cells[i].model, cells[i].window, cells[i].l_index, packed[i], len,
                                  deflated))
                rc = -1;
        }
        if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) rc = -1;
    } H5E_END_TRY;
    if (rc) return commit_view_failed(s, "cell results", err);
    st_test_phase("data_flushed");
    /* 2. status and bookkeeping, flush */
    for (size_t i = 0; i < n; i++) {
        size_t c = st_cell_at(s, cells[i].model, cells[i].window, cells[i].l_index);
        if (!s->in_flight[c]) s->attempts[c]++;
        s->in_flight[c] = 0;
        s->status[c] = (uint8_t)cells[i].status;
        s->wall_time[c] = cells[i].wall_time;
        s->rank[c] = cells[i].rank;
    }
    H5E_BEGIN_TRY {
        for (size_t i = 0; i < n && !rc; i++)
            rc = st_write_bookkeeping_cell(s, cells[i].model, cells[i].window, cells[i].l_index);
        if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) rc = -1;
    } H5E_END_TRY;
    if (rc) return commit_view_failed(s, "cell status", err);
    st_test_phase("status_flushed");
    /* 3. journal, fsync: from here the cells are done. */
    for (size_t i = 0; i < n; i++) {
        size_t m = cells[i].model, w = cells[i].window, l = cells[i].l_index, c = st_cell_at(s, m, w, l);
        int with_data = cells[i].status == STORE_DONE;
        journal_record r = {.type = JR_COMMIT, .model = (uint32_t)m, .window = (int32_t)w, .L = s->Lv[l],
                            .window_start = s->window_start[w], .status = (uint32_t)cells[i].status,
                            .attempt = (uint32_t)s->attempts[c], .rank = s->rank[c],
                            .t_start = cells[i].t_start, .t_end = cells[i].t_end,
                            .wall_time = s->wall_time[c],
                            .flags = with_data && deflated ? JF_DEFLATE : 0,
                            .payload_len = with_data ? (deflated ? lens[i] : s->payload_bytes) : 0};
        if (journal_append_crc(s->jr, &r, with_data ? packed[i] : NULL, s->batch_crc[i], err))
            return -1;
        r.payload_offset = journal_size(s->jr) - (off_t)r.payload_len;
        r.payload_crc = s->batch_crc[i];
        s->last_commit[c] = r;
        s->values_crc[c] = s->batch_crc[i];
        s->deflated[c] = (uint8_t)(with_data && deflated);
        s->compacted[c] = 0;
        s->full_bytes += r.payload_len;
        s->committed_this_segment++;
    }
    st_test_phase("journal_written");
    if (journal_sync(s->jr, err)) return -1;
    st_test_phase("journal_synced");
    /* The journal's second copy of the values is dropped once it has grown past
     * the limit (store.h, "Compaction"). */
    if (s->full_bytes >= s->compact_bytes && st_compact(s, err)) return -1;
    size_t in_flight = 0;
    for (size_t c = 0; c < store_total(s); c++) in_flight += s->in_flight[c];
    return store_write_status(s, in_flight, "running", err);
}

int store_commit_packed(store *s, const store_cell *cells, const unsigned char *const *packed,
                        size_t n, as_err *err) {
    return commit_cells(s, cells, packed, NULL, n, err);
}

int store_commit_deflated(store *s, const store_cell *cells, const unsigned char *const *payload,
                          size_t n, as_err *err) {
    enum { CHUNK = 64 };
    size_t lens[CHUNK];
    const unsigned char *pk[CHUNK];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        for (size_t i = 0; i < k; i++) {
            const unsigned char *p = payload[at + i];
            lens[i] = 0;
            if (cells[at + i].status == STORE_DONE && p &&
                !(lens[i] = cw_deflated_size(&s->lay, p, cw_deflate_bound(&s->lay))))
                return as_fail(err, "%s: cell (%zu, %zu, %zu) arrived as a damaged compressed "
                               "payload (its header does not describe this layout); nothing of the "
                               "batch was written", s->path, cells[at + i].model, cells[at + i].window,
                               cells[at + i].l_index);
        }
        int rc;
        if (s->compress) {
            rc = commit_cells(s, cells + at, payload + at, lens, k, err);
        } else {
            /* a plain view (an output created without compression and resumed): the
             * cells are stored as it stores them */
            if (batch_room(s, k, err)) return -1;
            if (!s->dz_scratch && !(s->dz_scratch = malloc(s->payload_bytes ? s->payload_bytes : 1)))
                return as_fail(err, "%s: out of memory", s->path);
            for (size_t i = 0; i < k; i++) {
                pk[i] = NULL;
                if (!payload[at + i] || cells[at + i].status != STORE_DONE) continue;
                unsigned char *dst = s->batch + i * s->payload_bytes;
                if (cw_inflate_cell(&s->lay, payload[at + i], lens[i], dst, s->dz_scratch, err))
                    return as_wrap(err, "%s: cell (%zu, %zu, %zu)", s->path, cells[at + i].model,
                                   cells[at + i].window, cells[at + i].l_index);
                pk[i] = dst;
            }
            rc = commit_cells(s, cells + at, pk, NULL, k, err);
        }
        if (rc) return -1;
    }
    return 0;
}
