/* replay.c -- the journal as the truth: replay it into memory, reconcile the HDF5
 * view with it, rebuild the view from it. See store.h, store_int.h. */
#include "store_int.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

/* ---------- journal replay ---------- */

/* A JR_CONFIG record: the config (sha256, text, inputs) the cells that follow were
 * computed with. */
static int replay_config(store *s, const journal_record *r, as_err *err) {
    char *text = malloc(r->payload_len + 1);
    if (!text) return as_fail(err, "%s: out of memory", s->journal_path);
    if (journal_read_payload(s->jr, r, text, err)) {
        free(text);
        return -1;
    }
    text[r->payload_len] = 0;
    /* The sha256 is the first line, the text follows, then (journal.h) maybe
     * "\0" and the inputs' identity. */
    char *nl = strchr(text, '\n');
    free(s->stored_config_text);
    free(s->stored_config_sha);
    free(s->stored_inputs);
    s->stored_config_sha = NULL;
    s->stored_config_text = NULL;
    s->stored_inputs = NULL;
    if (nl) {
        *nl = 0;
        s->stored_config_sha = st_dupstr(text);
        s->stored_config_text = st_dupstr(nl + 1);
        size_t tl = strlen(nl + 1);
        if ((size_t)(nl + 1 + tl - text) < r->payload_len) s->stored_inputs = st_dupstr(nl + 2 + tl);
    }
    free(text);
    if (!s->created[0]) st_iso_time(s->created, sizeof s->created, r->t_start);
    return 0;
}

/* A JR_SEG_BEGIN or JR_SEG_END record: one run's row of /provenance. */
static int replay_segment(store *s, const journal_record *r, size_t damaged, as_err *err) {
    size_t k = (size_t)r->window;
    /* Segments come in order, each begun before it ends -- unless journal
     * damage took some of their records: then the missing ones are
     * placeholders (hosts "?", times NaN), not an error. */
    if (r->window < 0 || (k > s->n_segs && !damaged) || k > s->n_segs + 1024)
        return as_fail(err, "%s: segment record %d out of order", s->journal_path, r->window);
    if (k == s->n_segs && r->type != JR_SEG_BEGIN && !damaged)
        return as_fail(err, "%s: segment %d ends before it begins", s->journal_path, r->window);
    while (s->n_segs <= k) {
        segment *grown = realloc(s->segs, (s->n_segs + 1) * sizeof *grown);
        if (!grown) return as_fail(err, "%s: out of memory", s->journal_path);
        s->segs = grown;
        segment *sg = &s->segs[s->n_segs++];
        memset(sg, 0, sizeof *sg);
        sg->start = sg->end = NAN;
        sg->hosts = st_dupstr("?");
        sg->job = st_dupstr("");
        sg->note = st_dupstr("");
        sg->inputs = st_dupstr("");
    }
    segment *sg = &s->segs[k];
    if (r->type == JR_SEG_BEGIN) {
        char *text = calloc(1, r->payload_len + 2);
        if (!text || journal_read_payload(s->jr, r, text, err)) {
            free(text);
            return as_fail(err, "%s: cannot read segment %d", s->journal_path, r->window);
        }
        /* "hosts\0job", "hosts\0job\0note" or "hosts\0job\0note\0inputs" (journal.h) */
        const char *end = text + r->payload_len, *job = text + strlen(text) + 1;
        const char *note = job <= end ? job + strlen(job) + 1 : end + 1;
        const char *inputs = note < end ? note + strlen(note) + 1 : end + 1;
        free(sg->hosts), free(sg->job), free(sg->note), free(sg->inputs);
        sg->hosts = st_dupstr(text);
        sg->job = st_dupstr(job <= end ? job : "");
        sg->note = st_dupstr(note <= end ? note : "");
        sg->inputs = st_dupstr(inputs < end ? inputs : "");
        free(text);
        sg->start = r->t_start;
        sg->mpi_size = r->rank;
        sg->n_model = (int32_t)r->status, sg->n_window = (int32_t)r->attempt, sg->n_L = r->L;
    } else {
        sg->end = r->t_end;
        sg->cells_done = (int32_t)r->attempt;
        sg->ended = r->status <= ST_END_ERROR ? (int32_t)r->status : ST_END_UNKNOWN;
        sg->end_signo = r->L;
    }
    return 0;
}

/* A JR_DISPATCH or JR_COMMIT record: a cell's attempts and state. */
static int replay_cell(store *s, const journal_record *r, as_err *err) {
    /* the cell is named by model index, window index and L value */
    int li = st_find_L(s, r->L);
    if (r->window < 0 || (size_t)r->window >= s->ax.n_window || li < 0 || r->model >= s->ax.n_model)
        return as_fail(err, "%s: journal holds cell (model %u, window %d, L %d) outside this "
                       "sweep's axes; models, windows and L values may be added, not removed",
                       s->journal_path, r->model, r->window, r->L);
    if (s->window_start[r->window] != r->window_start)
        return as_fail(err, "%s: window %d started at token %lld in the journal, %lld now: "
                       "the text or the window plan changed; use a new output",
                       s->journal_path, r->window, (long long)r->window_start,
                       (long long)s->window_start[r->window]);
    size_t c = st_cell_at(s, r->model, (size_t)r->window, (size_t)li);
    if (r->type == JR_DISPATCH) {
        s->attempts[c]++;
        s->in_flight[c] = 1;
    } else if (r->status == STORE_PENDING) {
        /* a compacted cell whose values a rebuild could not recover: pending again */
        s->status[c] = STORE_PENDING;
        s->compacted[c] = 0;
        s->last_commit[c].type = 0;
    } else {
        if (!s->in_flight[c]) s->attempts[c]++; /* committed without a dispatch record */
        s->in_flight[c] = 0;
        if ((int32_t)r->attempt > s->attempts[c]) s->attempts[c] = (int32_t)r->attempt;
        int compact = (r->flags & JF_COMPACT) != 0, dz = (r->flags & JF_DEFLATE) != 0;
        /* a deflated cell's size varies: at most cw_deflate_bound() (cellwire_deflate.c) */
        size_t dz_max = cw_deflate_bound(&s->lay);
        if (r->status == STORE_DONE &&
            (compact ? r->payload_len != JOURNAL_COMPACT_BYTES
                     : dz ? r->payload_len < cw_deflated_header_bytes(cw_nvars(&s->lay)) || r->payload_len > dz_max
                          : r->payload_len != s->payload_bytes))
            return as_fail(err, "%s: cell (window %d, L %d) has %llu payload bytes, expected %s%zu",
                           s->journal_path, r->window, r->L, (unsigned long long)r->payload_len,
                           dz && !compact ? "at most " : "",
                           compact ? (size_t)JOURNAL_COMPACT_BYTES : dz ? dz_max : s->payload_bytes);
        s->compacted[c] = 0;
        s->deflated[c] = (uint8_t)(r->status == STORE_DONE && dz);
        if (r->status == STORE_DONE && compact) {
            unsigned char d[JOURNAL_COMPACT_BYTES];
            uint64_t len;
            if (journal_read_payload(s->jr, r, d, err)) return -1;
            memcpy(&s->values_crc[c], d, 4);
            memcpy(&len, d + 8, 8);
            if (dz ? len > dz_max : len != s->payload_bytes)
                return as_fail(err, "%s: compacted cell (window %d, L %d) had %llu bytes of "
                               "values, expected %s%zu", s->journal_path, r->window, r->L,
                               (unsigned long long)len, dz ? "at most " : "",
                               dz ? dz_max : s->payload_bytes);
            s->compacted[c] = 1;
        } else if (r->status == STORE_DONE) {
            s->values_crc[c] = r->payload_crc;
        }
        if (!compact) s->full_bytes += r->payload_len;
        s->status[c] = (uint8_t)(r->status == STORE_DONE ? STORE_DONE : STORE_FAILED);
        /* cells_done of a segment killed before its end record: its commits, counted
         * (an end record, when there is one, sets the same count itself) */
        if (r->status == STORE_DONE && s->n_segs && isnan(s->segs[s->n_segs - 1].end))
            s->segs[s->n_segs - 1].cells_done++;
        s->wall_time[c] = r->wall_time;
        s->rank[c] = r->rank;
        s->last_commit[c] = *r;
    }
    return 0;
}

int st_replay_journal(store *s, as_err *err) {
    journal_record r;
    int got;
    size_t damaged;
    journal_damaged(s->jr, &damaged);
    journal_rewind(s->jr);
    while ((got = journal_next(s->jr, &r, err)) == 1) {
        int rc = r.type == JR_CONFIG                              ? replay_config(s, &r, err)
                 : r.type == JR_SEG_BEGIN || r.type == JR_SEG_END ? replay_segment(s, &r, damaged, err)
                                                                  : replay_cell(s, &r, err);
        if (rc) return -1;
    }
    /* Cells in flight at a crash stay pending; their dispatch already counted
     * as an attempt. */
    memset(s->in_flight, 0, store_total(s));
    return got < 0 ? -1 : 0;
}

/* ---------- rebuild ---------- */

/* The view being replaced, open read-only for the compacted cells it holds. */
typedef struct {
    hid_t file;
    size_t n_window, n_L, n_model;
    int64_t *window_start;
    int32_t *L;
    char **model;      /* [n_model] names; NULL for a file from before the model axis (one model) */
} old_view;

static void close_old_view(old_view *ov) {
    if (ov->file >= 0) H5E_BEGIN_TRY { H5Fclose(ov->file); } H5E_END_TRY;
    for (size_t m = 0; ov->model && m < ov->n_model; m++)
        if (ov->model[m]) H5free_memory(ov->model[m]);
    free(ov->window_start), free(ov->L), free(ov->model);
    ov->file = -1, ov->window_start = NULL, ov->L = NULL, ov->model = NULL;
}

static void open_old_view(store *s, old_view *ov) {
    memset(ov, 0, sizeof *ov);
    ov->file = -1;
    int any = 0;
    for (size_t c = 0; c < store_total(s) && !any; c++) any = s->status[c] == STORE_DONE && s->compacted[c];
    if (!any || access(s->path, F_OK)) return;
    hid_t fapl = st_file_access();
    H5E_BEGIN_TRY {
        ov->file = H5Fopen(s->path, H5F_ACC_RDONLY, fapl);
        if (ov->file >= 0) {
            ov->window_start = st_read_1d(ov->file, "window_start", H5T_NATIVE_INT64, 8, &ov->n_window);
            ov->L = st_read_1d(ov->file, "L", H5T_NATIVE_INT32, 4, &ov->n_L);
            hid_t str = st_utf8_vlen();
            ov->n_model = 1;
            if (H5Lexists(ov->file, "model", H5P_DEFAULT) > 0)
                ov->model = st_read_1d(ov->file, "model", str, sizeof(char *), &ov->n_model);
            H5Tclose(str);
        }
    } H5E_END_TRY;
    H5Pclose(fapl);
    if (!ov->window_start || !ov->L) close_old_view(ov);
}

/* A compacted cell's values from the old view, checked against the journal, in the form
 * they were journaled (*out, *len: s->packed or s->dz_buf): 0, or -1 when the old view is
 * gone, does not hold the cell, or holds other bytes. A deflated cell is compared as the
 * chunks the old view stores (H5Dread_chunk), so nothing is inflated to check it. */
static int salvage(store *s, const old_view *ov, size_t m, size_t w, size_t l,
                   const unsigned char **out, size_t *len) {
    if (ov->file < 0 || w >= ov->n_window || ov->window_start[w] != s->window_start[w]) return -1;
    /* the old view's model of the same name (a file from before the model axis: model 0) */
    if (m >= ov->n_model || (ov->model && (!ov->model[m] || strcmp(ov->model[m], s->model_name[m]))))
        return -1;
    size_t lo = 0;
    while (lo < ov->n_L && ov->L[lo] != s->Lv[l]) lo++;
    if (lo == ov->n_L) return -1;
    size_t c = st_cell_at(s, m, w, l);
    return st_cell_intact(s, ov->file, m, w, lo, s->deflated[c], s->values_crc[c], out, len) ? 0 : -1;
}

/* Writes a complete view from the in-memory state (journal replay) into
 * OUT.h5.tmp.PID and renames it over OUT.h5; leaves the view open. */
int st_rebuild_view(store *s, as_err *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", s->path, (long)getpid());
    /* ours from an earlier failed attempt of this pid, if any; a link is refused */
    if (fileio_remove_temp(tmp, err)) return -1;
    st_close_handles(s);
    /* Compacted cells live only in the old view: it is read (read-only) for them,
     * each checked against its journaled checksum. */
    old_view ov;
    open_old_view(s, &ov);
    if (st_create_view(s, tmp, err)) {
        close_old_view(&ov);
        return -1;
    }
    int rc = 0;
    s->lost = 0;
    H5E_BEGIN_TRY {
        for (size_t c = 0; c < store_total(s) && !rc; c++) {
                size_t m, w, l;
                st_cell_of(s, c, &m, &w, &l);
                if (s->status[c] != STORE_DONE) continue;
                const unsigned char *vals = s->packed;
                size_t len = s->payload_bytes;
                if (s->compacted[c]) {
                    if (salvage(s, &ov, m, w, l, &vals, &len)) {
                        s->status[c] = STORE_PENDING; /* recomputed; store_open journals it */
                        s->compacted[c] = 0;
                        s->lost++;
                        continue;
                    }
                } else {
                    /* a deflated payload is read into s->dz_buf (its size varies) */
                    if (s->deflated[c]) {
                        if (st_dz_buffers(s)) {
                            rc = as_fail(err, "%s: out of memory", tmp);
                            break;
                        }
                        vals = s->dz_buf, len = (size_t)s->last_commit[c].payload_len;
                    }
                    if (journal_read_payload(s->jr, &s->last_commit[c], (unsigned char *)vals, err)) {
                        rc = -1;
                        break;
                    }
                }
                if (st_write_cell_any(s, m, w, l, vals, len, s->deflated[c]))
                    rc = as_fail(err, "%s: cannot write cell", tmp);
        }
        if (!rc && st_write_bookkeeping_all(s)) rc = as_fail(err, "%s: cannot write status", tmp);
        if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0)
            rc = as_fail(err, "%s: cannot write the rebuilt file (disk full?)", tmp);
    } H5E_END_TRY;
    if (rc) st_discard_view(s, tmp);
    st_close_handles(s);
    close_old_view(&ov);
    if (!rc && st_fsync_path(tmp)) rc = as_fail(err, "%s: fsync failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, s->path)) rc = as_fail(err, "%s: cannot rename to %s: %s", tmp, s->path, strerror(errno));
    if (rc) {
        unlink(tmp);
        return -1;
    }
    fileio_sync_parent_dir(s->path);
    s->rebuilt = 1;
    if (st_open_view(s)) return as_fail(err, "%s: rebuilt file does not reopen", s->path);
    return 0;
}

/* Compares the opened view with the journal: 1 = rebuild needed. Cells the
 * file marks done/failed that the journal does not are fixed in place. */
int st_reconcile_view(store *s, as_err *err) {
    size_t n = store_total(s);
    uint8_t *fst = malloc(n ? n : 1);
    if (!fst) return as_fail(err, "%s: out of memory", s->path);
    int rc = 0;
    H5E_BEGIN_TRY {
        if (H5Dread(s->status_ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, fst) < 0) rc = 1;
    } H5E_END_TRY;
    for (size_t c = 0; c < n && !rc; c++)
        if (s->status[c] == STORE_DONE && fst[c] != STORE_DONE) rc = 1;
    if (!rc) {
        /* Values the file holds for a cell the journal does not call done go
         * back to the fill, so the view shows exactly the journal. */
        int filled = 0;
        H5E_BEGIN_TRY {
            for (size_t c = 0; c < n && !rc; c++) {
                if (fst[c] != STORE_DONE || s->status[c] == STORE_DONE) continue;
                if (!filled) st_fill_packed(s, s->packed), filled = 1;
                size_t m, w, l;
                st_cell_of(s, c, &m, &w, &l);
                if (st_write_cell_values(s, m, w, l, s->packed)) rc = 1;
            }
            if (!rc && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) rc = 1;
            /* Also brings attempts up to date (dispatches since the last close). */
            if (!rc && (st_write_bookkeeping_all(s) || H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0)) rc = 1;
        } H5E_END_TRY;
    }
    free(fst);
    return rc;
}

