/* status.c -- the status file OUT.h5.status (store.h): written atomically by the
 * writer after every batch, read by `attnsweep status`. See store_int.h. */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "json.h"
#include "lockfile.h"

static void put_json_string(FILE *f, const char *v) {
    fputc('"', f);
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f), fputc(*p, f);
        else if ((unsigned char)*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

int store_write_status(store *s, size_t in_flight, const char *state, as_err *err) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", s->status_path, (long)getpid());
    /* A fresh temporary (O_EXCL) and never a symbolic link in the place of the file
     * or its temporary (fileio.h): the rename would replace a link, not write through
     * it, but a link there is refused all the same, in one line. */
    if (fileio_refuse_link(s->status_path, err)) return -1;
    int fd = fileio_open_beside(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666, "write status", err);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return as_fail(err, "%s: cannot write status: %s", tmp, strerror(e));
    }
    double now = st_now();
    size_t done = store_count(s, STORE_DONE), failed = store_count(s, STORE_FAILED);
    char started[64], updated[64];
    st_iso_time(started, sizeof started, s->t_open);
    st_iso_time(updated, sizeof updated, now);
    double hours = (now - s->t_open) / 3600.0;
    fprintf(f, "{\n  \"format\": \"attnsweep-status-1\",\n  \"output\": ");
    put_json_string(f, s->path);
    fprintf(f, ",\n  \"state\": ");
    put_json_string(f, state);
    fprintf(f, ",\n  \"total\": %zu,\n  \"done\": %zu,\n  \"failed\": %zu,\n  \"in_flight\": %zu,\n"
               "  \"pending\": %zu,\n  \"windows\": %zu,\n",
            store_total(s), done, failed, in_flight, store_total(s) - done - failed - in_flight,
            s->ax.n_window);
    fprintf(f, "  \"L\": [");
    for (size_t l = 0; l < s->ax.n_L; l++) fprintf(f, "%s%d", l ? ", " : "", s->Lv[l]);
    fprintf(f, "],\n  \"done_per_L\": [");
    for (size_t l = 0; l < s->ax.n_L; l++) {
        size_t d = 0;
        for (size_t m = 0; m < s->ax.n_model; m++)
            for (size_t w = 0; w < s->ax.n_window; w++) d += s->status[st_cell_at(s, m, w, l)] == STORE_DONE;
        fprintf(f, "%s%zu", l ? ", " : "", d);
    }
    /* the model axis: one row per model, in index order (cells = windows x L each) */
    fprintf(f, "],\n  \"models\": [");
    for (size_t m = 0; m < s->ax.n_model; m++) {
        fprintf(f, "%s\n    {\"name\": ", m ? "," : "");
        put_json_string(f, s->model_name[m]);
        fprintf(f, ", \"total\": %zu, \"done\": %zu, \"failed\": %zu}", s->ax.n_window * s->ax.n_L,
                store_count_model(s, m, STORE_DONE), store_count_model(s, m, STORE_FAILED));
    }
    fprintf(f, "\n  ],\n  \"cells_this_segment\": %d,\n  \"rate_cells_per_hour\": %.3f,\n",
            s->committed_this_segment, hours > 0 ? s->committed_this_segment / hours : 0.0);
    fprintf(f, "  \"segment_started\": \"%s\",\n  \"updated\": \"%s\",\n  \"updated_unix\": %.3f,\n",
            started, updated, now);
    fprintf(f, "  \"pid\": %ld,\n  \"host\": ", (long)getpid());
    put_json_string(f, lock_hostname());
    fprintf(f, ",\n  \"slurm_job_id\": ");
    put_json_string(f, s->prov.slurm_job_id);
    fprintf(f, "\n}\n");
    int bad = ferror(f);
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, s->status_path)) {
        int saved = errno;
        unlink(tmp);
        return as_fail(err, "%s: cannot write status file: %s", s->status_path, strerror(saved));
    }
    return 0;
}


/* ---------- reading it back (attnsweep status, through store_read_progress) ---------- */

static int status_count(const json_value *root, const char *key, size_t *out, const char *path,
                        as_err *err) {
    const json_value *v = json_get(root, key);
    if (!v || json_get_size(v, out))
        return as_fail(err, "%s: '%s' is missing or not a count", path, key);
    return 0;
}

static int status_text(const json_value *root, const char *key, char *out, size_t size,
                       const char *path, as_err *err) {
    const json_value *v = json_get(root, key);
    if (!v || v->type != JSON_STRING) return as_fail(err, "%s: '%s' is missing or not a string", path, key);
    snprintf(out, size, "%s", v->u.string.ptr);
    return 0;
}

static int status_number(const json_value *root, const char *key, double *out, const char *path,
                         as_err *err) {
    const json_value *v = json_get(root, key);
    if (!v || v->type != JSON_NUMBER) return as_fail(err, "%s: '%s' is missing or not a number", path, key);
    *out = v->u.number;
    return 0;
}

int st_read_status_file(const char *status_path, store_progress *p, as_err *err) {
    json_doc *doc = json_parse_file(status_path, err);
    if (!doc) return -1;
    const json_value *root = json_root(doc), *fmt = json_get(root, "format");
    const json_value *Ls = json_get(root, "L");
    size_t windows = 0;
    int rc = 0;
    if (!fmt || fmt->type != JSON_STRING || strcmp(fmt->u.string.ptr, "attnsweep-status-1"))
        rc = as_fail(err, "%s: not an attnsweep status file (format is not attnsweep-status-1)",
                     status_path);
    if (!rc) rc = status_count(root, "total", &p->total, status_path, err);
    if (!rc) rc = status_count(root, "done", &p->done, status_path, err);
    if (!rc) rc = status_count(root, "failed", &p->failed, status_path, err);
    if (!rc) rc = status_count(root, "in_flight", &p->in_flight, status_path, err);
    if (!rc) rc = status_count(root, "windows", &windows, status_path, err);
    if (!rc) rc = status_text(root, "state", p->state, sizeof p->state, status_path, err);
    if (!rc) rc = status_text(root, "updated", p->updated, sizeof p->updated, status_path, err);
    if (!rc) rc = status_text(root, "host", p->host, sizeof p->host, status_path, err);
    if (!rc) rc = status_number(root, "updated_unix", &p->updated_unix, status_path, err);
    if (!rc) rc = status_number(root, "rate_cells_per_hour", &p->rate_cells_per_hour, status_path, err);
    if (!rc && (!Ls || Ls->type != JSON_ARRAY)) rc = as_fail(err, "%s: 'L' is missing or not an array", status_path);
    if (!rc) {
        p->per_L = calloc(Ls->u.array.count ? Ls->u.array.count : 1, sizeof *p->per_L);
        if (!p->per_L) rc = as_fail(err, "%s: out of memory", status_path);
    }
    for (size_t i = 0; !rc && i < Ls->u.array.count; i++) {
        int64_t L;
        if (json_get_int64(&Ls->u.array.items[i], &L) || L <= 0 || L > INT32_MAX)
            rc = as_fail(err, "%s: 'L' holds something that is not a context length", status_path);
        else p->per_L[p->n_L++] = (store_progress_L){.L = (int32_t)L, .windows = windows};
    }
    /* "models" (absent in status files from before the model axis: one model) */
    const json_value *ms = rc ? NULL : json_get(root, "models");
    if (ms && ms->type == JSON_ARRAY && ms->u.array.count) {
        p->per_model = calloc(ms->u.array.count, sizeof *p->per_model);
        if (!p->per_model) rc = as_fail(err, "%s: out of memory", status_path);
        for (size_t i = 0; !rc && i < ms->u.array.count; i++) {
            const json_value *e = &ms->u.array.items[i], *name = json_get(e, "name");
            store_progress_model *row = &p->per_model[p->n_model++];
            if (!name || name->type != JSON_STRING ||
                status_count(e, "total", &row->total, status_path, err))
                rc = as_fail(err, "%s: 'models' holds an entry without a name or total", status_path);
            else snprintf(row->name, sizeof row->name, "%s", name->u.string.ptr);
        }
        for (size_t l = 0; !rc && l < p->n_L; l++) p->per_L[l].windows = windows * p->n_model;
    }
    json_free(doc);
    if (!rc) p->have_status_file = 1;
    return rc;
}
