/* compact.c -- compaction of the journal (journal.h "Compaction", store.h): once the
 * HDF5 view is durable and holds a done cell's values (read back, checksum matched),
 * the journal keeps only that cell's identity, bookkeeping and checksum. The new
 * journal is written beside the old one and renamed over it, so a kill at any step
 * leaves either the old journal or the new one, both complete. See store_int.h. */
#include "store_int.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "merge.h"
#include "testhook.h"

/* The digest payload of a compacted commit (JOURNAL_COMPACT_BYTES, journal.h). */
static void digest_encode(unsigned char out[JOURNAL_COMPACT_BYTES], uint32_t crc, uint64_t len) {
    uint32_t zero = 0;
    memcpy(out, &crc, 4);
    memcpy(out + 4, &zero, 4);
    memcpy(out + 8, &len, 8);
}

/* Step 2: ok[c] = 1 for every done cell still whole in the journal whose values the view
 * gives back intact (mismatched cells simply stay whole). */
static void mark_intact(store *s, uint8_t *ok) {
    H5E_BEGIN_TRY {
        for (size_t c = 0; c < store_total(s); c++) {
            if (s->status[c] != STORE_DONE || s->compacted[c]) continue;
            size_t m, w, l;
            st_cell_of(s, c, &m, &w, &l);
            /* a deflated cell is compared as the chunks the view stores (H5Dread_chunk):
             * exactly the bytes a later rebuild would salvage, with no inflate */
            const unsigned char *vals;
            size_t len;
            if (st_cell_intact(s, s->file, m, w, l, s->deflated[c], s->values_crc[c], &vals, &len)) ok[c] = 1;
        }
    } H5E_END_TRY;
}

/* Step 3: every record of the journal into nj in the old order, the commits compacted
 * that ok[] marks or that a later commit superseded; next[] receives each cell's live
 * commit as nj holds it, *full the payload bytes still whole. */
static int copy_records(store *s, journal *nj, const uint8_t *ok, journal_record *next, uint64_t *full,
                        as_err *err) {
    unsigned char *buf = NULL;
    size_t cap = 0;
    int first = 1, got, rc = 0;
    journal_record r;
    journal_rewind(s->jr);
    while (!rc && (got = journal_next(s->jr, &r, err)) == 1) {
        journal_record w = r;
        const unsigned char *payload = NULL;
        uint32_t pcrc = r.payload_crc;
        int cell = -1;
        if (r.type == JR_COMMIT) {
            int li = st_find_L(s, r.L);
            if (li >= 0 && r.window >= 0 && (size_t)r.window < s->ax.n_window && r.model < s->ax.n_model)
                cell = (int)st_cell_at(s, r.model, (size_t)r.window, (size_t)li);
        }
        int live = cell >= 0 && s->last_commit[cell].payload_offset == r.payload_offset &&
                   s->last_commit[cell].type == JR_COMMIT;
        unsigned char digest[JOURNAL_COMPACT_BYTES];
        if (r.type == JR_COMMIT && r.status == STORE_DONE && !(r.flags & JF_COMPACT) &&
            (!live || ok[cell])) {
            /* compacted: the live commit of a cell read back from the view, or a
             * commit a later one superseded (its values are not the cell's any more) */
            digest_encode(digest, r.payload_crc, r.payload_len);
            w.flags |= JF_COMPACT;
            w.payload_len = JOURNAL_COMPACT_BYTES;
            payload = digest;
            pcrc = journal_crc32(0, digest, sizeof digest);
        } else if (r.payload_len) {
            if (r.payload_len > cap) {
                unsigned char *g = realloc(buf, (size_t)r.payload_len);
                if (!g) {
                    rc = as_fail(err, "%s: out of memory", s->journal_path);
                    break;
                }
                buf = g, cap = (size_t)r.payload_len;
            }
            if (journal_read_payload(s->jr, &r, buf, err)) {
                rc = -1;
                break;
            }
            payload = buf;
            if (r.type == JR_COMMIT && !(r.flags & JF_COMPACT)) *full += r.payload_len;
        }
        if (journal_append_crc(nj, &w, payload, pcrc, err)) {
            rc = -1;
            break;
        }
        if (live) {
            next[cell] = w;
            next[cell].payload_offset = journal_size(nj) - (off_t)w.payload_len;
            next[cell].payload_crc = pcrc;
        }
        if (first && (w.flags & JF_COMPACT)) {
            first = 0;
            st_test_phase("compact_writing");
        }
    }
    if (!rc && got < 0) rc = -1;
    free(buf);
    return rc;
}

int st_compact(store *s, as_err *err) {
    if (!s->jr || s->file < 0) return 0;
    size_t total = store_total(s);
    /* 1. the view durable: flushed, then fsynced (H5Fflush alone leaves it in the
     * page cache, and the journal's copy is about to go) */
    int rc = 0;
    H5E_BEGIN_TRY { rc = H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0; } H5E_END_TRY;
    if (rc || st_fsync_path(s->path))
        return as_fail(err, "%s: cannot make the file durable before compacting the journal: %s",
                       s->path, rc ? "HDF5 flush failed" : strerror(errno));
    st_test_phase("compact_synced");
    /* 2. read back every done cell still whole in the journal */
    uint8_t *ok = calloc(total ? total : 1, 1);
    journal_record *next = malloc((total ? total : 1) * sizeof *next);
    if (!ok || !next) {
        free(ok), free(next);
        return as_fail(err, "%s: out of memory", s->journal_path);
    }
    for (size_t c = 0; c < total; c++) next[c] = s->last_commit[c];
    mark_intact(s, ok);
    st_test_phase("compact_verified");
    /* 3. the new journal, record by record in the old order */
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.compact.%ld", s->journal_path, (long)getpid());
    /* ours from an earlier failed attempt of this pid, if any; a link is refused */
    journal *nj = fileio_remove_temp(tmp, err) ? NULL : journal_create(tmp, &s->jhdr, err);
    if (!nj) {
        free(ok), free(next);
        return -1;
    }
    uint64_t full = 0;
    rc = copy_records(s, nj, ok, next, &full, err);
    if (!rc) rc = journal_sync(nj, err);
    if (!rc) st_test_phase("compact_written");
    /* 4. the switch: one rename; before it the old journal is the truth, after it
     * the new one (and a leftover OUT.h5.journal.compact.* is removed by the next open) */
    if (!rc) rc = journal_rename(nj, s->journal_path, err);
    if (rc) {
        journal_close(nj);
        unlink(tmp);
        free(ok), free(next);
        return as_wrap(err, "compacting the journal (it is unchanged)");
    }
    st_test_phase("compact_renamed");
    journal_close(s->jr);
    s->jr = nj;
    for (size_t c = 0; c < total; c++) {
        s->last_commit[c] = next[c];
        if (ok[c]) s->compacted[c] = 1;
    }
    s->full_bytes = full;
    free(ok), free(next);
    return 0;
}

/* A store that only knows the layout of axes, for st_read_cell_as (reading an output
 * without being its writer). */
void st_layout_store(store *s, const store_axes *axes) {
    memset(s, 0, sizeof *s);
    s->ax = *axes;
    cr_layout_init(&s->lay, axes->n_N, axes->n_T, axes->n_eps, axes->n_norm, axes->n_layer,
                   axes->n_head);
    cr_layout_sample(&s->lay, axes->sampled);
    size_t at = 0;
    for (int v = 0; v < N_METRICS; v++) {
        s->var_offset[v] = at;
        at += s->lay.count[v] * cw_type_size(cw_var_type[v]);
    }
    s->payload_bytes = at;
    s->file = -1;
}

/* The values of done cell r as its journal holds them (JF_DEFLATE: deflated) into *out
 * (s->packed for plain cells, s->dz_buf for deflated ones), *len their size: from the
 * journal, or for a compacted cell from the file at path, checked against the digest. */
static int read_stored(store *s, const char *path, journal *j, const journal_record *r,
                       const unsigned char **out, size_t *len, as_err *err) {
    int dz = (r->flags & JF_DEFLATE) != 0;
    if (dz && st_dz_buffers(s)) return as_fail(err, "%s: out of memory", path);
    if (!(r->flags & JF_COMPACT)) {
        *out = dz ? s->dz_buf : s->packed;
        *len = (size_t)r->payload_len;
        if (r->payload_len > (dz ? s->dz_cap : s->payload_bytes))
            return as_fail(err, "%s: cell (model %u, window %d, L %d) of %llu bytes, more than its "
                           "layout allows", journal_path(j), r->model, r->window, r->L,
                           (unsigned long long)r->payload_len);
        return journal_read_payload(j, r, (unsigned char *)*out, err);
    }
    unsigned char d[JOURNAL_COMPACT_BYTES];
    if (r->payload_len != JOURNAL_COMPACT_BYTES || journal_read_payload(j, r, d, err))
        return as_fail(err, "%s: bad compacted record of cell (model %u, window %d, L %d)",
                       journal_path(j), r->model, r->window, r->L);
    uint32_t crc;
    memcpy(&crc, d, 4);
    const store_axes *axes = &s->ax;
    int li = -1;
    for (size_t i = 0; i < axes->n_L && li < 0; i++)
        if (axes->L[i] == r->L) li = (int)i;
    size_t n_model = axes->n_model ? axes->n_model : 1;
    if (li < 0 || r->window < 0 || (size_t)r->window >= axes->n_window || r->model >= n_model)
        return as_fail(err, "%s: cell (model %u, window %d, L %d) is not on its axes", path, r->model,
                       r->window, r->L);
    hid_t fapl = st_file_access(), f;
    int rc = -1;
    H5E_BEGIN_TRY {
        f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        if (f >= 0) rc = !st_cell_intact(s, f, r->model, (size_t)r->window, (size_t)li, dz, crc, out, len);
        if (f >= 0) H5Fclose(f);
    } H5E_END_TRY;
    H5Pclose(fapl);
    if (rc) {
        /* the advice: the command that made the output, run again, resumes it -- and a
         * resume computes damaged cells again (store.c verify_view) */
        char base[4096], cmd[64] = "";
        int si, sk;
        if (merge_parse_shard_name(path, base, sizeof base, &si, &sk) == 0)
            snprintf(cmd, sizeof cmd, " --shard %d/%d", si, sk);
        return as_fail(err, "%s: cell (model %u, window %d, L %d) is compacted in its journal and "
                       "the file does not hold it intact (a damaged or missing chunk); run the "
                       "command that made it again, `attnsweep run CONFIG%s` with its CONFIG: the "
                       "resume computes such cells again", path, r->model, r->window, r->L, cmd);
    }
    return 0;
}

int store_read_cell(const char *path, const store_axes *axes, journal *j, const journal_record *r,
                    unsigned char *out, as_err *err) {
    store s;
    st_layout_store(&s, axes);
    s.packed = out;
    const unsigned char *vals;
    size_t len;
    int rc = read_stored(&s, path, j, r, &vals, &len, err);
    /* the caller wants the packed values: a deflated cell checked as stored, then inflated */
    if (!rc && (r->flags & JF_DEFLATE))
        rc = cw_inflate_cell(&s.lay, vals, len, out, s.dz_scratch, err)
                 ? as_wrap(err, "%s: cell (model %u, window %d, L %d)", path, r->model, r->window, r->L)
                 : 0;
    free(s.dz_buf), free(s.dz_conv), free(s.dz_scratch);
    return rc;
}

int store_read_cell_stored(const char *path, const store_axes *axes, journal *j, const journal_record *r,
                           unsigned char *out, size_t cap, size_t *len, as_err *err) {
    store s;
    st_layout_store(&s, axes);
    unsigned char *packed = malloc(s.payload_bytes ? s.payload_bytes : 1);
    if (!packed) return as_fail(err, "%s: out of memory", path);
    s.packed = packed;
    const unsigned char *vals;
    int rc = read_stored(&s, path, j, r, &vals, len, err);
    if (!rc && *len > cap) rc = as_fail(err, "%s: cell of %zu bytes, %zu of room", path, *len, cap);
    if (!rc) memcpy(out, vals, *len);
    free(packed), free(s.dz_buf), free(s.dz_conv), free(s.dz_scratch);
    return rc;
}
