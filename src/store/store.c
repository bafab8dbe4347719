/* store.c -- the writer of a results store: open (lock, journal, view), dispatch, the
 * commit protocol, close. See store.h; the other parts are listed in store_int.h. */
#include "store_int.h"
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "journal.h"
#include "clock.h"
#include "lockfile.h"
#include "testhook.h"

/* ---------- small helpers and accessors ---------- */

double st_now(void) { return as_wall_s(); }

void st_iso_time(char *out, size_t size, double t) {
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int store_sidecar(char *out, size_t size, const char *path, const char *suffix) {
    int n = snprintf(out, size, "%s%s", path, suffix);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

char *st_dupstr(const char *s) {
    s = s ? s : "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int st_fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

size_t store_total(const store *s) { return s->ax.n_model * s->ax.n_window * s->ax.n_L; }
size_t store_block_doubles(const store *s) { return s->lay.total; }
int store_was_rebuilt(const store *s) { return s->rebuilt; }
int store_compressed(const store *s) { return s->compress; }
int store_checksummed(const store *s) { return s->fletcher; }
long long store_torn_bytes(const store *s) { return s->torn; }
const char *store_journal_damage(const store *s) { return s->damage_note ? s->damage_note : ""; }
int store_cell_status(const store *s, size_t m, size_t w, size_t l) { return s->status[st_cell_at(s, m, w, l)]; }
int store_cell_attempts(const store *s, size_t m, size_t w, size_t l) { return s->attempts[st_cell_at(s, m, w, l)]; }
size_t store_count_model(const store *s, size_t m, int status) {
    size_t n = 0, per = s->ax.n_window * s->ax.n_L;
    for (size_t i = m * per; i < (m + 1) * per; i++) n += s->status[i] == status;
    return n;
}
size_t store_count(const store *s, int status) {
    size_t n = 0;
    for (size_t i = 0; i < store_total(s); i++) n += s->status[i] == status;
    return n;
}

/* ---------- open / close ---------- */

/* Removes OUT.h5.tmp.*, OUT.h5.status.tmp.* and OUT.h5.journal.merge.* left by a
 * writer that died mid-rebuild or mid-status, or a merge killed before it renamed
 * its journal: we hold the lock (so does every merge while its temporary journal
 * exists), so none of them is live. A symbolic link under such a name is refused. */
static int remove_stale_temps(const store *s, as_err *err) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", s->path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : s->path;
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    char p1[4200], p2[4200], p3[4200], p4[4200];
    snprintf(p1, sizeof p1, "%s.tmp.", base);
    snprintf(p2, sizeof p2, "%s.status.tmp.", base);
    snprintf(p3, sizeof p3, "%s.journal.merge.", base);
    snprintf(p4, sizeof p4, "%s.journal.compact.", base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (strncmp(e->d_name, p1, strlen(p1)) && strncmp(e->d_name, p2, strlen(p2)) &&
            strncmp(e->d_name, p3, strlen(p3)) && strncmp(e->d_name, p4, strlen(p4)))
            continue;
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        /* a symbolic link under a temporary's name is refused, not removed (fileio.h) */
        if (fileio_refuse_link(full, err)) rc = -1;
        else unlink(full);
    }
    closedir(d);
    return rc;
}


static void store_free(store *s) {
    if (!s) return;
    st_close_handles(s);
    if (s->have_reserve) st_reserve_release(s);
    journal_close(s->jr);
    for (size_t m = 0; m < s->ax.n_model; m++) {
        if (s->model_name) free(s->model_name[m]);
        if (s->model_path) free(s->model_path[m]);
        if (s->model_sha) free(s->model_sha[m]);
        if (s->model_kind) free(s->model_kind[m]);
        if (s->model_cfg_sha) free(s->model_cfg_sha[m]);
        if (s->model_family) free(s->model_family[m]);
    }
    free(s->model_name), free(s->model_path), free(s->model_sha), free(s->model_kind);
    free(s->model_cfg_sha), free(s->model_family);
    free(s->model_n_layer), free(s->model_n_head), free(s->model_n_embd), free(s->training_step);
    free(s->head_valid);
    free(s->window_start);
    free(s->Lv), free(s->Nv), free(s->layerv), free(s->headv), free(s->Tv), free(s->epsv);
    if (s->normv)
        for (size_t i = 0; i < s->ax.n_norm; i++) free(s->normv[i]);
    free(s->normv);
    free(s->packed);
    free(s->status), free(s->attempts), free(s->rank), free(s->wall_time), free(s->in_flight);
    free(s->last_commit);
    free(s->values_crc), free(s->compacted), free(s->batch), free(s->batch_crc);
    free(s->deflated), free(s->dz_buf), free(s->dz_conv), free(s->dz_scratch);
    for (size_t i = 0; i < s->n_segs; i++)
        free(s->segs[i].hosts), free(s->segs[i].job), free(s->segs[i].note), free(s->segs[i].inputs);
    free(s->damage_note);
    free(s->segs);
    free(s->stored_config_text), free(s->stored_config_sha), free(s->stored_inputs);
    for (size_t i = 0; i < sizeof s->prov_strings / sizeof s->prov_strings[0]; i++)
        free(s->prov_strings[i]);
    free(s);
}

static void *dupmem(const void *p, size_t n) {
    void *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

/* The model axis (store.h): copied, or for n_model = 0 the one model the provenance
 * describes. Names must be unique (they are the `model` coordinate). */
static int copy_models(store *s, const store_axes *a, as_err *err) {
    size_t n = a->n_model ? a->n_model : 1;
    s->ax.n_model = n;
    s->model_name = calloc(n, sizeof *s->model_name);
    s->model_path = calloc(n, sizeof *s->model_path);
    s->model_sha = calloc(n, sizeof *s->model_sha);
    s->model_kind = calloc(n, sizeof *s->model_kind);
    s->model_cfg_sha = calloc(n, sizeof *s->model_cfg_sha);
    s->model_family = calloc(n, sizeof *s->model_family);
    s->model_n_layer = malloc(n * sizeof *s->model_n_layer);
    s->model_n_head = malloc(n * sizeof *s->model_n_head);
    s->model_n_embd = malloc(n * sizeof *s->model_n_embd);
    s->training_step = malloc(n * sizeof *s->training_step);
    size_t hv = n * a->n_layer * a->n_head;
    s->head_valid = malloc(hv ? hv : 1);
    if (!s->model_name || !s->model_path || !s->model_sha || !s->model_kind || !s->model_cfg_sha ||
        !s->model_family || !s->model_n_layer || !s->model_n_head ||
        !s->model_n_embd || !s->training_step || !s->head_valid)
        return as_fail(err, "%s: out of memory", s->path);
    for (size_t m = 0; m < n; m++) {
        const int given = a->n_model > 0;
        s->model_name[m] = st_dupstr(given && a->model_name ? a->model_name[m] : "model");
        s->model_path[m] = st_dupstr(given && a->model_path ? a->model_path[m] : s->prov.model_dir);
        s->model_sha[m] = st_dupstr(given && a->model_sha256 ? a->model_sha256[m] : s->prov.weights_sha256);
        const char *kind = given && a->model_kind ? a->model_kind[m] : s->prov.model_kind;
        s->model_kind[m] = st_dupstr(kind ? kind : "unknown");
        const char *csha = given && a->model_config_sha256 ? a->model_config_sha256[m]
                           : !given && s->prov.model_config_sha256 ? s->prov.model_config_sha256 : "";
        s->model_cfg_sha[m] = st_dupstr(csha);
        s->model_family[m] = st_dupstr(given && a->model_family ? a->model_family[m] : "");
        if (!s->model_name[m] || !s->model_path[m] || !s->model_sha[m] || !s->model_kind[m] ||
            !s->model_cfg_sha[m] || !s->model_family[m])
            return as_fail(err, "%s: out of memory", s->path);
        s->model_n_layer[m] = given && a->model_n_layer ? a->model_n_layer[m] : -1;
        s->model_n_head[m] = given && a->model_n_head ? a->model_n_head[m] : -1;
        s->model_n_embd[m] = given && a->model_n_embd ? a->model_n_embd[m] : -1;
        s->training_step[m] = given && a->training_step ? a->training_step[m] : -1;
        for (size_t k = 0; k < m; k++)
            if (!strcmp(s->model_name[k], s->model_name[m]))
                return as_fail(err, "%s: two models are named %s (%s and %s)", s->path, s->model_name[m],
                               s->model_path[k], s->model_path[m]);
    }
    if (a->head_valid) memcpy(s->head_valid, a->head_valid, hv);
    else memset(s->head_valid, 1, hv);
    if (n > JOURNAL_MAX_MODELS) return as_fail(err, "%s: %zu models; at most %d", s->path, n, JOURNAL_MAX_MODELS);
    s->ax.model_name = (const char *const *)s->model_name;
    s->ax.model_path = (const char *const *)s->model_path;
    s->ax.model_sha256 = (const char *const *)s->model_sha;
    s->ax.model_kind = (const char *const *)s->model_kind;
    s->ax.model_config_sha256 = (const char *const *)s->model_cfg_sha;
    s->ax.model_family = (const char *const *)s->model_family;
    s->ax.model_n_layer = s->model_n_layer, s->ax.model_n_head = s->model_n_head;
    s->ax.model_n_embd = s->model_n_embd, s->ax.training_step = s->training_step;
    s->ax.head_valid = s->head_valid;
    return 0;
}

static int copy_axes(store *s, const store_axes *a, as_err *err) {
    const char *what = NULL;
    if (!a->n_window) what = "window";
    else if (!a->n_L) what = "L";
    else if (!a->n_N) what = "N";
    else if (!a->n_T) what = "T";
    else if (!a->n_eps) what = "eps";
    else if (!a->n_norm) what = "normalizer";
    else if (!a->n_layer) what = "layer";
    else if (!a->n_head) what = "head";
    if (what) return as_fail(err, "%s: axis %s is empty", s->path, what);
    for (size_t i = 0; i < a->n_L; i++)
        for (size_t k = 0; k < i; k++)
            if (a->L[i] == a->L[k]) return as_fail(err, "%s: L value %d appears twice", s->path, a->L[i]);
    s->ax = *a;
    s->window_start = dupmem(a->window_start, a->n_window * sizeof *a->window_start);
    s->Lv = dupmem(a->L, a->n_L * sizeof *a->L);
    s->Nv = dupmem(a->N, a->n_N * sizeof *a->N);
    s->Tv = dupmem(a->T, a->n_T * sizeof *a->T);
    s->epsv = dupmem(a->eps, a->n_eps * sizeof *a->eps);
    s->layerv = dupmem(a->layer, a->n_layer * sizeof *a->layer);
    s->headv = dupmem(a->head, a->n_head * sizeof *a->head);
    s->normv = calloc(a->n_norm, sizeof *s->normv);
    int ok = s->window_start && s->Lv && s->Nv && s->Tv && s->epsv && s->layerv && s->headv && s->normv;
    for (size_t i = 0; ok && i < a->n_norm; i++) ok = (s->normv[i] = st_dupstr(a->normalizer[i])) != NULL;
    if (!ok) return as_fail(err, "%s: out of memory", s->path);
    s->ax.window_start = s->window_start, s->ax.L = s->Lv, s->ax.N = s->Nv, s->ax.T = s->Tv;
    s->ax.eps = s->epsv, s->ax.layer = s->layerv, s->ax.head = s->headv;
    s->ax.normalizer = (const char *const *)s->normv;
    if (copy_models(s, a, err)) return -1;
    cr_layout_init(&s->lay, a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head);
    cr_layout_sample(&s->lay, a->sampled);
    size_t at = 0;
    for (int v = 0; v < N_METRICS; v++) {
        s->var_offset[v] = at;
        at += s->lay.count[v] * cw_type_size(cw_var_type[v]);
    }
    s->payload_bytes = at;
    size_t n = store_total(s);
    s->packed = malloc(at);
    s->status = calloc(n, 1);
    s->attempts = calloc(n, sizeof *s->attempts);
    s->rank = malloc(n * sizeof *s->rank);
    s->wall_time = malloc(n * sizeof *s->wall_time);
    s->in_flight = calloc(n, 1);
    s->last_commit = calloc(n, sizeof *s->last_commit);
    s->values_crc = calloc(n, sizeof *s->values_crc);
    s->compacted = calloc(n, 1);
    s->deflated = calloc(n, 1);
    if (!s->packed || !s->status || !s->attempts || !s->rank || !s->wall_time || !s->in_flight ||
        !s->last_commit || !s->values_crc || !s->compacted || !s->deflated)
        return as_fail(err, "%s: out of memory for %zu cells", s->path, n);
    for (size_t i = 0; i < n; i++) s->rank[i] = -1, s->wall_time[i] = NAN;
    return 0;
}

static void copy_provenance(store *s, const store_provenance *p) {
    s->prov = *p;
    const char **fields[] = {&s->prov.config_text, &s->prov.config_sha256, &s->prov.model_dir,
                             &s->prov.weights_sha256, &s->prov.text_path, &s->prov.text_sha256,
                             &s->prov.tokenizer_files, &s->prov.mpi_library,
                             &s->prov.openblas_config, &s->prov.hosts, &s->prov.slurm_job_id,
                             &s->prov.vectors_name, &s->prov.rows_name, &s->prov.logits_name,
                             &s->prov.model_kind, &s->prov.distance_name,
                             &s->prov.model_config_sha256, &s->prov.inputs};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        s->prov_strings[i] = st_dupstr(*fields[i]);
        *fields[i] = s->prov_strings[i];
    }
}

/* The config record: "SHA\nTEXT", then "\0INPUTS" when the inputs' identity is given
 * (journal.h: readers that predate it stop at the NUL). */
static int append_config(store *s, as_err *err) {
    size_t a = strlen(s->prov.config_sha256), b = strlen(s->prov.config_text);
    size_t c = s->prov.inputs && s->prov.inputs[0] ? strlen(s->prov.inputs) + 1 : 0;
    char *payload = malloc(a + 1 + b + c);
    if (!payload) return as_fail(err, "%s: out of memory", s->journal_path);
    memcpy(payload, s->prov.config_sha256, a);
    payload[a] = '\n';
    memcpy(payload + a + 1, s->prov.config_text, b);
    if (c) payload[a + 1 + b] = 0, memcpy(payload + a + 2 + b, s->prov.inputs, c - 1);
    journal_record r = {.type = JR_CONFIG, .window = -1, .t_start = st_now(),
                        .payload_len = a + 1 + b + c};
    int rc = journal_append(s->jr, &r, payload, err);
    free(payload);
    return rc;
}

/* This run's segment, in memory (the view shows it from now on). */
static int add_segment(store *s, as_err *err) {
    segment *grown = realloc(s->segs, (s->n_segs + 1) * sizeof *grown);
    if (!grown) return as_fail(err, "%s: out of memory", s->journal_path);
    s->segs = grown;
    segment *sg = &s->segs[s->n_segs];
    sg->start = s->t_open, sg->end = NAN;
    sg->hosts = st_dupstr(s->prov.hosts), sg->job = st_dupstr(s->prov.slurm_job_id);
    sg->note = st_dupstr(s->damage_note);
    sg->inputs = st_dupstr(s->prov.inputs);
    sg->mpi_size = s->prov.mpi_size, sg->cells_done = 0;
    sg->n_model = (int32_t)s->ax.n_model, sg->n_window = (int32_t)s->ax.n_window, sg->n_L = (int32_t)s->ax.n_L;
    sg->ended = ST_END_UNKNOWN, sg->end_signo = 0;
    s->seg_index = s->n_segs++;
    return 0;
}

/* ... and in the journal. */
static int append_segment_begin(store *s, as_err *err) {
    /* "hosts\0job\0", plus "note\0" only when there is one or inputs follow, plus
     * "inputs\0" when given (journal.h); readers that predate a field stop before it. */
    const char *note = s->damage_note ? s->damage_note : "";
    const char *inputs = s->prov.inputs ? s->prov.inputs : "";
    size_t a = strlen(s->prov.hosts), b = strlen(s->prov.slurm_job_id), c = strlen(note);
    size_t d = strlen(inputs);
    size_t len = a + b + 2 + (c || d ? c + 1 : 0) + (d ? d + 1 : 0);
    char *payload = malloc(len);
    if (!payload) return as_fail(err, "%s: out of memory", s->journal_path);
    memcpy(payload, s->prov.hosts, a + 1);
    memcpy(payload + a + 1, s->prov.slurm_job_id, b + 1);
    if (c || d) memcpy(payload + a + b + 2, note, c + 1);
    if (d) memcpy(payload + a + b + c + 3, inputs, d + 1);
    const segment *sg = &s->segs[s->seg_index];
    journal_record r = {.type = JR_SEG_BEGIN, .window = (int32_t)s->seg_index,
                        .rank = s->prov.mpi_size, .t_start = s->t_open, .payload_len = len,
                        .status = (uint32_t)sg->n_model, .attempt = (uint32_t)sg->n_window, .L = sg->n_L};
    int rc = journal_append(s->jr, &r, payload, err);
    free(payload);
    return rc;
}

/* The note for stderr and /provenance when journal_open skipped damaged ranges:
 * how many records, where. "" when the journal is intact. */
static int describe_damage(store *s, as_err *err) {
    size_t n;
    const journal_damage *d = journal_damaged(s->jr, &n);
    unsigned records = 0;
    for (size_t i = 0; i < n; i++) records += d[i].records;
    char buf[600] = "";
    if (n) {
        int at = snprintf(buf, sizeof buf, "%s: %u damaged record%s skipped (bytes", s->journal_path,
                          records, records == 1 ? "" : "s");
        for (size_t i = 0; i < n && at > 0 && (size_t)at < sizeof buf - 80; i++)
            at += snprintf(buf + at, sizeof buf - (size_t)at, "%s %lld-%lld", i ? "," : "",
                           (long long)d[i].start, (long long)d[i].end);
        if (at > 0 && (size_t)at < sizeof buf - 80 && n > 0)
            snprintf(buf + at, sizeof buf - (size_t)at, "); the intact records around the damage "
                     "are kept and only the cells it held are computed again");
    }
    free(s->damage_note);
    s->damage_note = st_dupstr(buf);
    return s->damage_note ? 0 : as_fail(err, "%s: out of memory", s->journal_path);
}

/* Adds to the open's note (stderr and /provenance) the compacted cells a rebuild could
 * not take from the old view. */
static int note_lost(store *s, as_err *err) {
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s: %zu done cell%s compacted in the journal %s not in the "
             "old file intact (missing or damaged); computed again", s->damage_note ? s->damage_note : "",
             s->damage_note && s->damage_note[0] ? "; " : "", s->path, s->lost, s->lost == 1 ? "" : "s",
             s->lost == 1 ? "was" : "were");
    free(s->damage_note);
    s->damage_note = st_dupstr(buf);
    segment *sg = &s->segs[s->seg_index];
    free(sg->note);
    sg->note = st_dupstr(buf);
    if (!s->damage_note || !sg->note) return as_fail(err, "%s: out of memory", s->path);
    /* the rebuilt view's /provenance shows it too */
    int rc;
    H5E_BEGIN_TRY { rc = st_write_segments(s, s->file) || H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0; } H5E_END_TRY;
    return rc ? as_fail(err, "%s: cannot update provenance", s->path) : 0;
}

/* Appends text to the open's note (store_journal_damage: stderr, and this segment's row of
 * /provenance, written with the next st_write_segments). */
static int note_add(store *s, const char *text, as_err *err) {
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s", s->damage_note ? s->damage_note : "",
             s->damage_note && s->damage_note[0] ? "; " : "", text);
    free(s->damage_note);
    s->damage_note = st_dupstr(buf);
    segment *sg = &s->segs[s->seg_index];
    free(sg->note);
    sg->note = st_dupstr(buf);
    return s->damage_note && sg->note ? 0 : as_fail(err, "%s: out of memory", s->path);
}

/* Checks the stored chunks of every done cell of the view just opened against the journal's
 * CRC-32 of its values, and the Fletcher32 checksums the chunks carry (chunks.c, without
 * inflating). A damaged cell whose values the journal still holds is written again from it;
 * a compacted one (only the view held it) is pending again -- journaled with status 0, its
 * values back to the fill -- and so computed again. The count goes into the open's note. */
static int verify_view(store *s, as_err *err) {
    size_t rewritten = 0;
    s->damaged = 0;
    int rc = 0;
    for (size_t c = 0; c < store_total(s) && !rc; c++) {
        if (s->status[c] != STORE_DONE) continue;
        size_t m, w, l;
        st_cell_of(s, c, &m, &w, &l);
        const unsigned char *vals;
        size_t len;
        if (st_cell_intact(s, s->file, m, w, l, s->deflated[c], s->values_crc[c], &vals, &len)) continue;
        if (!s->compacted[c]) {
            unsigned char *buf = s->packed;
            if (s->deflated[c] && st_dz_buffers(s)) return as_fail(err, "%s: out of memory", s->path);
            if (s->deflated[c]) buf = s->dz_buf;
            if (journal_read_payload(s->jr, &s->last_commit[c], buf, err)) return -1;
            H5E_BEGIN_TRY {
                rc = st_write_cell_any(s, m, w, l, buf, (size_t)s->last_commit[c].payload_len, s->deflated[c]);
            } H5E_END_TRY;
            if (rc) return as_fail(err, "%s: cannot write a damaged cell again from the journal", s->path);
            rewritten++;
            continue;
        }
        journal_record r = s->last_commit[c];
        r.status = STORE_PENDING, r.flags = 0, r.payload_len = 0;
        if (journal_append(s->jr, &r, NULL, err)) return -1;
        s->last_commit[c].type = 0;
        s->status[c] = STORE_PENDING;
        s->compacted[c] = 0;
        st_fill_packed(s, s->packed);
        H5E_BEGIN_TRY {
            rc = st_write_cell_values(s, m, w, l, s->packed) || st_write_bookkeeping_cell(s, m, w, l);
        } H5E_END_TRY;
        if (rc) return as_fail(err, "%s: cannot reset a damaged cell", s->path);
        s->damaged++;
    }
    char text[4608];
    if (s->damaged) {
        snprintf(text, sizeof text, "%s: %zu done cell%s failed %s checksum (a damaged chunk in the "
                 "file, whose only copy it was); computed again", s->path, s->damaged,
                 s->damaged == 1 ? "" : "s", s->damaged == 1 ? "its" : "their");
        if (note_add(s, text, err)) return -1;
    }
    if (rewritten) {
        snprintf(text, sizeof text, "%s: %zu done cell%s failed %s checksum in the file and %s "
                 "written again from the journal", s->path, rewritten, rewritten == 1 ? "" : "s",
                 rewritten == 1 ? "its" : "their", rewritten == 1 ? "was" : "were");
        if (note_add(s, text, err)) return -1;
    }
    return 0;
}

/* A fresh output: the journal with its first segment and the config, then the view. Sets
 * *created once the journal file exists, so a failure removes it. */
static int create_output(store *s, const journal_header *want, int *created, as_err *err) {
    s->jr = journal_create(s->journal_path, want, err);
    if (!s->jr) return -1;
    *created = 1;
    st_test_phase("journal_created");
    st_iso_time(s->created, sizeof s->created, s->t_open);
    if (add_segment(s, err) || append_config(s, err) || append_segment_begin(s, err) ||
        journal_sync(s->jr, err))
        return -1;
    s->stored_config_sha = st_dupstr(s->prov.config_sha256);
    s->stored_config_text = st_dupstr(s->prov.config_text);
    s->stored_inputs = st_dupstr(s->prov.inputs ? s->prov.inputs : "");
    if (st_rebuild_view(s, err)) return -1;
    s->rebuilt = 0; /* a fresh file, not a rebuild */
    return 0;
}

/* The journal found on disk against the one this open would write: the same variables
 * per cell, the same axis sizes but windows and L, the same axis values. */
static int check_journal_header(const store *s, const journal_header *got, const journal_header *want,
                                as_err *err) {
    if (!memcmp(got->layout, want->layout, sizeof want->layout) && got->payload_bytes != want->payload_bytes)
        /* same axes, other variables: written by an attnsweep with another set of results */
        return as_fail(err, "%s: written by a version of attnsweep that stores other variables "
                       "(%llu bytes per cell, this one %llu); finish it with that version or use a new "
                       "output", s->journal_path, (unsigned long long)got->payload_bytes,
                       (unsigned long long)want->payload_bytes);
    if (memcmp(got->layout, want->layout, sizeof want->layout))
        return as_fail(err, "%s: written with N,T,eps,normalizer,layer,head sizes %llu,%llu,%llu,%llu,"
                       "%llu,%llu; the config now gives %llu,%llu,%llu,%llu,%llu,%llu (only windows and L "
                       "may grow); use a new output", s->journal_path,
                       (unsigned long long)got->layout[0], (unsigned long long)got->layout[1],
                       (unsigned long long)got->layout[2], (unsigned long long)got->layout[3],
                       (unsigned long long)got->layout[4], (unsigned long long)got->layout[5],
                       (unsigned long long)want->layout[0], (unsigned long long)want->layout[1],
                       (unsigned long long)want->layout[2], (unsigned long long)want->layout[3],
                       (unsigned long long)want->layout[4], (unsigned long long)want->layout[5]);
    if (got->axes_fingerprint != want->axes_fingerprint)
        return as_fail(err, "%s: the N, T, eps, normalizer, layer or head values differ from the ones "
                       "the journal was written with (only windows and L may grow); use a new output",
                       s->journal_path);
    return 0;
}

/* The view of a replayed journal: rebuilt when missing or not matching it (compacted
 * cells it did not give back intact are pending again, and the journal says so: a
 * JR_COMMIT of status 0 each), else verified and its provenance updated. */
static int reopen_view(store *s, int have_file, as_err *err) {
    if (!have_file || st_open_view(s) || st_reconcile_view(s, err)) {
        if (st_rebuild_view(s, err)) return -1;
        if (s->lost && note_lost(s, err)) return -1;
        for (size_t c = 0; c < store_total(s) && s->lost; c++) {
            if (s->status[c] != STORE_PENDING || s->last_commit[c].type != JR_COMMIT) continue;
            journal_record r = s->last_commit[c];
            r.status = STORE_PENDING, r.flags = 0, r.payload_len = 0;
            if (journal_append(s->jr, &r, NULL, err)) return -1;
            s->last_commit[c].type = 0;
        }
        return 0;
    }
    if (verify_view(s, err)) return -1;
    int rc;
    H5E_BEGIN_TRY {
        rc = st_write_root_attrs(s, s->file) || st_write_segments(s, s->file) ||
             H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0;
    } H5E_END_TRY;
    return rc ? as_fail(err, "%s: cannot update provenance", s->path) : 0;
}

/* A resumed output: the journal opened, checked and replayed, the config compared, a new
 * segment, the view reopened; then the journal's upgrades (below) and this segment. */
static int resume_output(store *s, const journal_header *want, int have_file, int flags, as_err *err) {
    journal_header got;
    off_t torn = 0;
    s->jr = journal_open(s->journal_path, JOURNAL_WRITABLE, &got, &torn, err);
    if (!s->jr) return -1;
    s->torn = (long long)torn;
    s->jhdr = got;
    if (describe_damage(s, err) || check_journal_header(s, &got, want, err) || st_replay_journal(s, err))
        return -1;
    int changed = !s->stored_config_sha || strcmp(s->stored_config_sha, s->prov.config_sha256);
    if (changed && !(flags & STORE_ALLOW_CONFIG_CHANGE))
        return as_fail(err, "%s: config changed since the last run (sha256 %.12s..., now %.12s...)",
                       s->path, s->stored_config_sha ? s->stored_config_sha : "none",
                       s->prov.config_sha256);
    if (!s->created[0]) st_iso_time(s->created, sizeof s->created, s->t_open);
    if (add_segment(s, err) || reopen_view(s, have_file, err)) return -1;
    /* A journal from before the model axis (version < 3: one model) that is to hold a
     * second model is rewritten in the current version first -- a compaction, which
     * copies every record (journal.h); the old journal stays until the rename. Likewise a
     * journal from before compressed payloads (version < 4) that is to hold deflated cells. */
    if ((journal_version(s->jr) < 3 && s->ax.n_model > 1) || (journal_version(s->jr) < 4 && s->compress))
        if (st_compact(s, err)) return -1;
    /* Journal this segment (and a changed config) only once the view is usable, so a
     * failed open leaves the journal as it was. Inputs recorded for the first time (a
     * journal from before they were kept) or grown (models appended) count as a change;
     * the caller refused any that changed. */
    if (s->prov.inputs && s->prov.inputs[0] && (!s->stored_inputs || strcmp(s->stored_inputs, s->prov.inputs)))
        changed = 1;
    if ((changed && append_config(s, err)) || append_segment_begin(s, err) || journal_sync(s->jr, err))
        return -1;
    return 0;
}

store *store_open(const char *path, const store_axes *axes, const store_provenance *prov,
                  store_mode mode, int flags, as_err *err) {
    store *s = calloc(1, sizeof *s);
    if (!s) {
        as_fail(err, "%s: out of memory", path);
        return NULL;
    }
    int created_journal = 0;
    s->file = s->status_ds = s->wall_ds = s->rank_ds = s->attempts_ds = s->lock_fd = -1;
    for (int v = 0; v < N_METRICS; v++) s->metric_ds[v] = -1;
    s->t_open = st_now();
    s->compress = (flags & STORE_COMPRESSED) != 0;
    /* a view created now checksums its chunks (the test build can make one as attnsweep did
     * before checksums, to test that such an output keeps its form) */
    s->fletcher = st_test_number("ATTNSWEEP_TEST_NO_CHECKSUMS") != 1;
    if (store_sidecar(s->path, sizeof s->path, path, "") ||
        store_sidecar(s->journal_path, sizeof s->journal_path, path, ".journal") ||
        store_sidecar(s->lock_path, sizeof s->lock_path, path, ".lock") ||
        store_sidecar(s->status_path, sizeof s->status_path, path, ".status") ||
        store_sidecar(s->reserve_path, sizeof s->reserve_path, path, ".reserve")) {
        as_fail(err, "%s: path too long", path);
        goto fail;
    }
    copy_provenance(s, prov);
    if (copy_axes(s, axes, err) || fileio_make_parent_dirs(s->path, err) ||
        lock_acquire(s->lock_path, &s->lock_fd, NULL, err))
        goto fail;
    s->locked = 1;
    /* links beside the output are refused before anything is written (fileio.h) */
    if (remove_stale_temps(s, err) || fileio_refuse_link(s->status_path, err) ||
        st_reserve_create(s, err))
        goto fail;
    int have_journal = fileio_exists(s->journal_path, 0), have_file = fileio_exists(s->path, 0);
    /* An existing view's own filters decide how cells are stored, not the flag: an
     * output created plain stays plain, a compressed one stays compressed, one without
     * chunk checksums stays without (and a rebuild follows the view it replaces). */
    if (have_file && have_journal) {
        int f = st_file_form(s->path);
        if (f >= 0) s->compress = (f & ST_FORM_DEFLATE) != 0, s->fletcher = (f & ST_FORM_FLETCHER) != 0;
    }
    journal_header want;
    memset(&want, 0, sizeof want);
    snprintf(want.config_sha256, sizeof want.config_sha256, "%s", s->prov.config_sha256);
    uint64_t sizes[6] = {axes->n_N, axes->n_T, axes->n_eps, axes->n_norm, axes->n_layer, axes->n_head};
    memcpy(want.layout, sizes, sizeof sizes);
    want.payload_bytes = s->payload_bytes;
    want.axes_fingerprint = store_axes_fingerprint(axes);

    if (mode == STORE_NEW && (have_journal || have_file)) {
        as_fail(err, "%s: output exists (new output requested); choose another name or resume",
                have_file ? s->path : s->journal_path);
        goto fail;
    }
    if (!have_journal && have_file) {
        as_fail(err, "%s: output exists but its journal %s is missing, so its state cannot be "
                "trusted; move the file away or restore the journal", s->path, s->journal_path);
        goto fail;
    }
    /* The journal's second copy of the values goes once this many bytes are whole
     * in it (and at every close): a bounded overhead beside the view. */
    long long hook = st_test_number("ATTNSWEEP_TEST_COMPACT_BYTES");
    s->compact_bytes = hook == 0 || (flags & STORE_KEEP_JOURNAL) ? UINT64_MAX
                       : hook > 0 ? (uint64_t)hook : STORE_COMPACT_BYTES;
    s->jhdr = want;
    if (have_journal ? resume_output(s, &want, have_file, flags, err)
                     : create_output(s, &want, &created_journal, err))
        goto fail;
    if (store_write_status(s, 0, "running", err)) goto fail;
    st_test_phase("opened");
    return s;

fail:
    st_close_handles(s);
    journal_close(s->jr);
    s->jr = NULL;
    /* A fresh output that failed to open (a full disk at its status file, say) goes whole:
     * a view left without its journal would be refused by every later run. The create
     * path runs only where neither existed, so both are this open's own. */
    if (created_journal) unlink(s->journal_path), unlink(s->path);
    if (s->locked) lock_release(s->lock_path, s->lock_fd, NULL);
    store_free(s);
    return NULL;
}

int store_mark_dispatched(store *s, size_t m, size_t w, size_t l, int rank, double t_start,
                          as_err *err) {
    if (m >= s->ax.n_model || w >= s->ax.n_window || l >= s->ax.n_L)
        return as_fail(err, "%s: cell (%zu, %zu, %zu) outside the axes", s->path, m, w, l);
    size_t c = st_cell_at(s, m, w, l);
    journal_record r = {.type = JR_DISPATCH, .model = (uint32_t)m, .window = (int32_t)w, .L = s->Lv[l],
                        .window_start = s->window_start[w], .attempt = (uint32_t)s->attempts[c] + 1,
                        .rank = rank, .t_start = t_start};
    if (journal_append(s->jr, &r, NULL, err)) return -1;
    s->attempts[c]++;
    s->in_flight[c] = 1;
    st_test_phase("dispatch_written");
    return 0;
}

void store_set_stop_signal(store *s, int signo) {
    if (s) s->stop_signo = signo;
}

int store_close(store *s, const char *state, as_err *err) {
    if (!s) return 0;
    int rc = 0;
    segment *sg = &s->segs[s->seg_index];
    sg->end = st_now();
    sg->cells_done = s->committed_this_segment;
    const char *how = state ? state : "finished";
    sg->ended = !strcmp(how, "finished") ? ST_END_COMPLETED : !strcmp(how, "interrupted") ? ST_END_STOPPED
                : ST_END_ERROR;
    sg->end_signo = sg->ended == ST_END_STOPPED ? s->stop_signo : 0;
    journal_record r = {.type = JR_SEG_END, .window = (int32_t)s->seg_index, .t_end = sg->end,
                        .attempt = (uint32_t)s->committed_this_segment, .status = (uint32_t)sg->ended,
                        .L = sg->end_signo};
    if (journal_append(s->jr, &r, NULL, err) || journal_sync(s->jr, err)) rc = -1;
    int h5rc = -1;
    if (s->file >= 0) {
        H5E_BEGIN_TRY {
            h5rc = st_write_segments(s, s->file) || st_write_bookkeeping_all(s) ||
                   H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0;
        } H5E_END_TRY;
    }
    if (h5rc && !rc) rc = as_fail(err, "%s: cannot write provenance at close", s->path);
    /* The segment ends with the journal compacted: the values are then stored once,
     * in the view (a failed close leaves the journal whole). */
    if (!rc && s->full_bytes && s->compact_bytes != UINT64_MAX) {
        if (st_test_fail("close_compact"))
            rc = as_fail(err, "%s: cannot compact the journal at close: failure injected by the "
                         "test hook (ATTNSWEEP_TEST_FAIL=close_compact)", s->journal_path);
        else if (st_compact(s, err))
            rc = -1;
    }
    st_close_handles(s);
    st_reserve_release(s);
    if (store_write_status(s, 0, state ? state : "finished", rc ? NULL : err)) rc = -1;
    if (lock_release(s->lock_path, s->lock_fd, rc ? NULL : err)) rc = -1;
    store_free(s);
    return rc;
}

/* The journal's last config record: its sha256, text and inputs (NULL when the record
 * predates them); 0 without a journal, 1 found, -1 on error. */
static int peek_config_record(const char *path, char **text, char **sha256, char **inputs, as_err *err) {
    *text = *sha256 = *inputs = NULL;
    char jpath[4200];
    if (store_sidecar(jpath, sizeof jpath, path, ".journal")) return as_fail(err, "%s: path too long", path);
    if (!fileio_exists(jpath, 0)) return 0;
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, err);
    if (!j) return -1;
    journal_record r, last = {0};
    int got, found = 0;
    while ((got = journal_next(j, &r, err)) == 1)
        if (r.type == JR_CONFIG) last = r, found = 1;
    int rc = got < 0 ? -1 : 0;
    if (!rc && found) {
        char *buf = malloc(last.payload_len + 1);
        if (!buf || journal_read_payload(j, &last, buf, err)) {
            free(buf);
            rc = -1;
        } else {
            buf[last.payload_len] = 0;
            char *nl = strchr(buf, '\n');
            if (nl) {
                *nl = 0;
                *sha256 = st_dupstr(buf);
                *text = st_dupstr(nl + 1);
                size_t tl = strlen(nl + 1);
                /* "\0INPUTS" after the text (journal.h, JR_CONFIG) */
                if ((size_t)(nl + 1 + tl - buf) < last.payload_len) *inputs = st_dupstr(nl + 2 + tl);
            }
            free(buf);
        }
    }
    journal_close(j);
    if (rc) return -1;
    return found && *text ? 1 : as_fail(err, "%s: journal holds no config record", jpath);
}

int store_peek_config_to_write(const char *path, char **text, char **sha256, as_err *err) {
    *text = *sha256 = NULL;
    char lpath[4200], jpath[4200];
    if (store_sidecar(lpath, sizeof lpath, path, ".lock") ||
        store_sidecar(jpath, sizeof jpath, path, ".journal"))
        return as_fail(err, "%s: path too long", path);
    if (lock_refuse_if_in_use(lpath, err) || fileio_refuse_link(jpath, err)) return -1;
    int found = store_peek_config(path, text, sha256, err);
    /* A run that took the lock after the look above may be writing its journal's first
     * records: then that is the news, not the journal's state. */
    if (found < 0 && lock_refuse_if_in_use(lpath, err)) return -1;
    return found;
}
int store_peek_config(const char *path, char **text, char **sha256, as_err *err) {
    char *inputs = NULL;
    int rc = peek_config_record(path, text, sha256, &inputs, err);
    free(inputs);
    return rc;
}

int store_peek_inputs(const char *path, char **inputs, as_err *err) {
    char *text = NULL, *sha = NULL;
    int rc = peek_config_record(path, &text, &sha, inputs, err);
    free(text), free(sha);
    if (rc < 0) return -1;
    if (*inputs && !(*inputs)[0]) free(*inputs), *inputs = NULL;
    return *inputs ? 1 : 0;
}

const char *store_inputs_lookup(const char *inputs, const char *key, char hex[65]) {
    size_t k = strlen(key);
    for (const char *p = inputs; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (n == k + 8 + 64 && !strncmp(p, key, k) && !strncmp(p + k, " sha256=", 8)) {
            memcpy(hex, p + k + 8, 64);
            hex[64] = 0;
            return hex;
        }
        p = eol ? eol + 1 : p + n;
    }
    return NULL;
}

