/* merge.c -- see merge.h. */
#include "merge.h"
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "lockfile.h"
#include "store.h"
#include "testhook.h"

int merge_parse_shard_name(const char *path, char *out, size_t size, int *index, int *count) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* the last ".shard-" of the file name */
    const char *at = NULL;
    for (const char *p = base; (p = strstr(p, ".shard-")); p++) at = p;
    if (!at) return -1;
    int i, k, used = 0;
    if (sscanf(at, ".shard-%d-of-%d%n", &i, &k, &used) != 2 || k < 1 || i < 0 || i >= k) return -1;
    const char *tail = at + used;
    if (*tail && strcmp(tail, ".h5") && strcmp(tail, ".nc")) return -1;
    /* the name must be exactly what run_shard_path writes (no "01", no "+1") */
    char canon[64];
    snprintf(canon, sizeof canon, ".shard-%d-of-%d", i, k);
    if ((size_t)used != strlen(canon) || strncmp(at, canon, (size_t)used)) return -1;
    int n = snprintf(out, size, "%.*s%s", (int)(at - path), path, tail);
    if (n < 0 || (size_t)n >= size) return -1;
    *index = i, *count = k;
    return 0;
}

typedef struct {
    const char *path;
    int index;
    char journal_path[4200];
    journal_header hdr;
    store_description desc;
    char *config_text, *config_sha;
    char *inputs;           /* the inputs' identity its journal records, or NULL (older) */
} shard;

typedef struct {
    size_t shard;           /* where it came from */
    double start, end;      /* end NaN: the segment never ended (killed) */
    int32_t mpi_size, cells_done;
    char *payload;          /* "hosts\0job" as journaled */
    size_t payload_len;
    uint32_t n_model, n_window; /* the begin record's axes and the end record's ending, */
    int32_t n_L, end_signo;     /* carried as they are (journal.h, JR_SEG_BEGIN / END) */
    uint32_t ended;
} merged_segment;

/* The merged state of one (model, window, L) cell. */
typedef struct {
    int32_t attempts;       /* summed over the shards */
    uint8_t status;         /* STORE_PENDING, _DONE, _FAILED */
    size_t source;          /* shard whose commit record is kept */
    journal_record rec;     /* that record (payload_offset into the source's journal) */
} merged_cell;

typedef struct {
    const merge_opts *opts;
    shard *shards;
    size_t n;
    size_t n_model, n_window, n_L;
    const store_axes *axes;
    size_t payload_bytes;
    unsigned char *buf_dz; /* one compressed cell as stored (append_cells_of) */
    size_t dz_cap;
    merged_cell *cells;
    merged_segment *segs;
    size_t n_segs;
    double created;         /* earliest config record */
    unsigned char *buf_a, *buf_b;
} merge_state;

static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) || stat(b, &sb)) return !strcmp(a, b);
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Which axis differs, or NULL. */
static const char *axes_differ(const store_axes *a, const store_axes *b) {
#define SAME(n, v) (a->n == b->n && !memcmp(a->v, b->v, a->n * sizeof *a->v))
    if (!SAME(n_window, window_start)) return "window / window_start";
    if (!SAME(n_L, L)) return "L";
    if (!SAME(n_N, N)) return "N";
    if (!SAME(n_T, T)) return "T";
    if (!SAME(n_eps, eps)) return "eps";
    if (!SAME(n_layer, layer)) return "layer";
    if (!SAME(n_head, head)) return "head";
#undef SAME
    if (a->n_norm != b->n_norm) return "normalizer";
    for (size_t i = 0; i < a->n_norm; i++)
        if (strcmp(a->normalizer[i], b->normalizer[i])) return "normalizer";
    if (a->n_model != b->n_model) return "model";
    for (size_t i = 0; i < a->n_model; i++)
        if (strcmp(a->model_name[i], b->model_name[i]) || strcmp(a->model_sha256[i], b->model_sha256[i]))
            return "model / model_sha256";
    return NULL;
}

static const char *file_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Names, K, duplicates, missing shards, the output path. Shards may sit in
 * different directories (copied back from several places); the default
 * output goes next to the first one. */
static int check_names(merge_state *m, merge_summary *sum, as_err *err) {
    const merge_opts *o = m->opts;
    char base0[4096] = {0};
    int k0 = 0;
    for (size_t s = 0; s < m->n; s++) {
        char base[4096];
        int i, k;
        if (merge_parse_shard_name(o->shards[s], base, sizeof base, &i, &k))
            return as_fail(err, "%s: not a shard file name (expected OUT.shard-I-of-K.h5, as "
                           "`attnsweep run CONFIG --shard I/K` writes)", o->shards[s]);
        if (s == 0) {
            snprintf(base0, sizeof base0, "%s", base);
            k0 = k;
        } else if (k != k0) {
            return as_fail(err, "%s: a shard of %d, but %s is a shard of %d", o->shards[s], k,
                           o->shards[0], k0);
        } else if (strcmp(file_name(base), file_name(base0))) {
            return as_fail(err, "%s: a shard of %s, but %s is a shard of %s", o->shards[s], base,
                           o->shards[0], base0);
        }
        for (size_t t = 0; t < s; t++)
            if (m->shards[t].index == i)
                return as_fail(err, "%s: shard %d given twice (also as %s)", o->shards[s], i,
                               m->shards[t].path);
        m->shards[s].path = o->shards[s];
        m->shards[s].index = i;
    }
    sum->shard_count = k0;
    sum->shards_given = m->n;
    sum->missing[0] = 0;
    size_t n_missing = 0;
    for (int i = 0; i < k0; i++) {
        int have = 0;
        for (size_t s = 0; s < m->n && !have; s++) have = m->shards[s].index == i;
        if (have) continue;
        size_t at = strlen(sum->missing);
        if (at + 16 < sizeof sum->missing)
            snprintf(sum->missing + at, sizeof sum->missing - at, "%s%d", n_missing ? ", " : "", i);
        else if (at + 4 < sizeof sum->missing && !strstr(sum->missing, "..."))
            strcat(sum->missing, " ...");
        n_missing++;
    }
    if (n_missing && !o->partial)
        return as_fail(err, "%s: shard%s %s of %d missing (give every shard, or --partial to "
                       "merge what there is and compute the rest with `attnsweep run`)",
                       base0, n_missing > 1 ? "s" : "", sum->missing, k0);
    int n = snprintf(sum->out, sizeof sum->out, "%s", o->out ? o->out : base0);
    if (n < 0 || (size_t)n >= sizeof sum->out) return as_fail(err, "%s: path too long", base0);
    for (size_t s = 0; s < m->n; s++)
        if (same_file(sum->out, m->shards[s].path))
            return as_fail(err, "%s: the output is one of the shards", sum->out);
    return 0;
}

/* An existing output of the shards' config is read as one more source, after the shards
 * (index -1): sum->joined_existing. Only an output with its journal is (a view alone is
 * refused by install, as before). */
static void add_existing_output(merge_state *m, merge_summary *sum) {
    char jpath[4200];
    if (m->opts->force || store_sidecar(jpath, sizeof jpath, sum->out, ".journal") || !fileio_exists(jpath, 0)) return;
    m->shards[m->n].path = sum->out;
    m->shards[m->n].index = -1;
    m->n++;
    sum->joined_existing = 1;
}

/* The file an inputs key (store_provenance inputs: "model M FILE", "text", "vocab.json",
 * "merges.txt") stands for in a shard's description. */
static void input_file(char *out, size_t size, const store_description *d, const char *key) {
    size_t mi;
    char file[32];
    if (sscanf(key, "model %zu %31s", &mi, file) == 2)
        snprintf(out, size, "%s/%s", d->axes.n_model > mi ? d->axes.model_path[mi] : d->prov.model_dir, file);
    else if (!strcmp(key, "text"))
        snprintf(out, size, "%s", d->prov.text_path);
    else
        snprintf(out, size, "%s/%s", d->prov.model_dir, key);
}

/* The HEX of "NAME sha256=HEX" in a tokenizer_files attribute, or NULL. */
static const char *recorded_sha(const char *files, const char *name, char hex[65]) {
    char key[64];
    snprintf(key, sizeof key, "%s sha256=", name);
    const char *p = files ? strstr(files, key) : NULL;
    if (!p || strspn(p + strlen(key), "0123456789abcdef") != 64) return NULL;
    memcpy(hex, p + strlen(key), 64);
    hex[64] = 0;
    return hex;
}

/* The inputs' identity of two shards must agree: each input both record (their journals'
 * config records; for shards from before those, the views' model_config_sha256 and
 * tokenizer_files) has one sha256. An input only one of them records is not compared
 * (docs/results.md, "Inputs' identity"). */
static int check_same_inputs(const shard *sh, const shard *first, as_err *err) {
    char a[65], b[65], key[64], file[4400];
    if (sh->inputs && first->inputs) {
        for (const char *p = first->inputs; *p;) {
            const char *eq = strstr(p, " sha256="), *eol = strchr(p, '\n');
            if (!eq || (eol && eq > eol)) break;
            snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            if (store_inputs_lookup(first->inputs, key, b) && store_inputs_lookup(sh->inputs, key, a) &&
                strcmp(a, b)) {
                input_file(file, sizeof file, &sh->desc, key);
                return as_fail(err, "%s: computed with another %s (sha256 %s) than %s (sha256 %s); "
                               "merge only shards made from the same inputs", sh->path, file, a,
                               first->path, b);
            }
            p = eol ? eol + 1 : p + strlen(p);
        }
        return 0;
    }
    const store_axes *x = &sh->desc.axes, *y = &first->desc.axes;
    for (size_t i = 0; i < x->n_model && i < y->n_model; i++) {
        const char *u = x->model_config_sha256 ? x->model_config_sha256[i] : "";
        const char *v = y->model_config_sha256 ? y->model_config_sha256[i] : "";
        if (u[0] && v[0] && strcmp(u, v))
            return as_fail(err, "%s: computed with another %s/config.json (sha256 %s) than %s (sha256 %s); "
                           "merge only shards made from the same inputs", sh->path, x->model_path[i], u,
                           first->path, v);
    }
    static const char *const names[] = {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"};
    for (int k = 0; k < 4; k++)
        if (recorded_sha(sh->desc.prov.tokenizer_files, names[k], a) &&
            recorded_sha(first->desc.prov.tokenizer_files, names[k], b) && strcmp(a, b))
            return as_fail(err, "%s: computed with another %s/%s (sha256 %s) than %s (sha256 %s); merge "
                           "only shards made from the same inputs", sh->path, sh->desc.prov.model_dir,
                           names[k], a, first->path, b);
    return 0;
}

/* Config, journal header, view axes and provenance of every shard. */
static int check_shards(merge_state *m, as_err *err) {
    for (size_t s = 0; s < m->n; s++) {
        shard *sh = &m->shards[s];
        if (sh->index < 0 && s > 0) { /* the existing output: the shards' config, or refused */
            int found = store_peek_config(sh->path, &sh->config_text, &sh->config_sha, err);
            if (found < 0) return -1;
            if (found && strcmp(sh->config_sha, m->shards[0].config_sha))
                return as_fail(err, "%s: the existing output was made with another config (sha256 "
                               "%.12s...) than the shards (%.12s...); --force replaces it", sh->path,
                               sh->config_sha, m->shards[0].config_sha);
            free(sh->config_text), free(sh->config_sha);
            sh->config_text = sh->config_sha = NULL;
        }
        if (store_sidecar(sh->journal_path, sizeof sh->journal_path, sh->path, ".journal"))
            return as_fail(err, "%s: path too long", sh->path);
        char lock_path[4200];
        lock_info li;
        if (!store_sidecar(lock_path, sizeof lock_path, sh->path, ".lock") &&
            lock_in_use(lock_path, &li) == 1)
            return as_fail(err, "%s: still being written by pid %ld on %s (lock %s); merge when "
                           "it has finished", sh->path, li.pid, li.host, lock_path);
        int found = store_peek_config(sh->path, &sh->config_text, &sh->config_sha, err);
        if (found < 0) return -1;
        if (found && store_peek_inputs(sh->path, &sh->inputs, err) < 0) return -1;
        if (!found) return as_fail(err, "%s: no journal %s: not a results store", sh->path, sh->journal_path);
        if (s > 0 && strcmp(sh->config_sha, m->shards[0].config_sha))
            return as_fail(err, "%s: made with another config (sha256 %.12s...) than %s (%.12s...)",
                           sh->path, sh->config_sha, m->shards[0].path, m->shards[0].config_sha);
        journal *j = journal_open(sh->journal_path, JOURNAL_SKIP_PAYLOAD_CRC, &sh->hdr, NULL, err);
        if (!j) return -1;
        journal_close(j);
        if (store_describe(sh->path, &sh->desc, err)) return -1;
        const store_axes *a = &sh->desc.axes;
        uint64_t sizes[6] = {a->n_N, a->n_T, a->n_eps, a->n_norm, a->n_layer, a->n_head};
        if (memcmp(sizes, sh->hdr.layout, sizeof sizes) ||
            sh->hdr.axes_fingerprint != store_axes_fingerprint(a) ||
            sh->hdr.payload_bytes != store_payload_bytes(a))
            return as_fail(err, "%s: its HDF5 view and its journal disagree on the axes; resume "
                           "the shard once (attnsweep run CONFIG --shard I/K) to rebuild it", sh->path);
        if (s == 0) continue;
        const shard *first = &m->shards[0];
        const char *axis = axes_differ(a, &first->desc.axes);
        if (axis)
            return as_fail(err, "%s: axis %s differs from %s's%s", sh->path, axis, first->path,
                           sh->index < 0 ? " (the existing output; --force replaces it)" : "");
        if (strcmp(sh->desc.prov.weights_sha256, first->desc.prov.weights_sha256))
            return as_fail(err, "%s: computed with other model weights (sha256 %.12s...) than %s "
                           "(%.12s...)", sh->path, sh->desc.prov.weights_sha256, first->path,
                           first->desc.prov.weights_sha256);
        if (strcmp(sh->desc.prov.text_sha256, first->desc.prov.text_sha256))
            return as_fail(err, "%s: computed on another text (sha256 %.12s...) than %s (%.12s...)",
                           sh->path, sh->desc.prov.text_sha256, first->path,
                           first->desc.prov.text_sha256);
        if (check_same_inputs(sh, first, err)) return -1;
    }
    return 0;
}

static int add_segment(merge_state *m, size_t s, const journal_record *r, journal *j, as_err *err) {
    merged_segment *grown = realloc(m->segs, (m->n_segs + 1) * sizeof *grown);
    if (!grown) return as_fail(err, "%s: out of memory", m->shards[s].journal_path);
    m->segs = grown;
    merged_segment *g = &m->segs[m->n_segs];
    memset(g, 0, sizeof *g);
    g->shard = s, g->start = r->t_start, g->end = NAN, g->mpi_size = r->rank;
    g->n_model = r->status, g->n_window = r->attempt, g->n_L = r->L;
    g->payload = malloc(r->payload_len + 1);
    if (!g->payload) return as_fail(err, "%s: out of memory", m->shards[s].journal_path);
    g->payload_len = (size_t)r->payload_len;
    if (journal_read_payload(j, r, g->payload, err)) {
        free(g->payload);
        return -1;
    }
    m->n_segs++;
    return 0;
}

/* The payloads of a cell done in two shards must be equal byte for byte. */
static int compare_done(merge_state *m, size_t c, size_t s, journal *j, const journal_record *r,
                        as_err *err) {
    merged_cell *mc = &m->cells[c];
    const shard *other = &m->shards[mc->source];
    if (store_read_cell(m->shards[s].path, m->axes, j, r, m->buf_a, err)) return -1;
    journal *oj = journal_open(other->journal_path, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, err);
    if (!oj) return -1;
    int rc = store_read_cell(other->path, m->axes, oj, &mc->rec, m->buf_b, err);
    journal_close(oj);
    if (rc) return -1;
    if (memcmp(m->buf_a, m->buf_b, m->payload_bytes))
        return as_fail(err, "%s: cell (model %u, window %d, L %d) holds other values than in %s",
                       m->shards[s].path, r->model, r->window, r->L, other->path);
    return 0;
}

/* Replays one shard's journal as store.c does (last commit per cell decides;
 * every dispatch, or a commit without one, is an attempt) and folds it in. */
static int read_shard(merge_state *m, size_t s, int32_t *attempts, uint8_t *in_flight,
                      journal_record *last, as_err *err) {
    shard *sh = &m->shards[s];
    size_t total = m->n_model * m->n_window * m->n_L;
    memset(attempts, 0, total * sizeof *attempts);
    memset(in_flight, 0, total);
    for (size_t c = 0; c < total; c++) last[c].type = 0;
    journal *j = journal_open(sh->journal_path, 0, NULL, NULL, err);
    if (!j) return -1;
    size_t seg0 = m->n_segs;
    int config_seen = 0, got, rc = 0;
    journal_record r;
    while (!rc && (got = journal_next(j, &r, err)) == 1) {
        if (r.type == JR_CONFIG) {
            if (!config_seen && (isnan(m->created) || r.t_start < m->created)) m->created = r.t_start;
            config_seen = 1;
        } else if (r.type == JR_SEG_BEGIN) {
            if (r.window != (int32_t)(m->n_segs - seg0))
                rc = as_fail(err, "%s: segment record %d out of order", sh->journal_path, r.window);
            else rc = add_segment(m, s, &r, j, err);
        } else if (r.type == JR_SEG_END) {
            size_t k = seg0 + (size_t)r.window;
            if (r.window < 0 || k >= m->n_segs)
                rc = as_fail(err, "%s: segment %d ends before it begins", sh->journal_path, r.window);
            else m->segs[k].end = r.t_end, m->segs[k].cells_done = (int32_t)r.attempt,
                 m->segs[k].ended = r.status, m->segs[k].end_signo = r.L;
        } else if (r.type == JR_DISPATCH || r.type == JR_COMMIT) {
            int li = -1;
            for (size_t l = 0; l < m->n_L && li < 0; l++)
                if (m->axes->L[l] == r.L) li = (int)l;
            if (r.window < 0 || (size_t)r.window >= m->n_window || li < 0 || r.model >= m->n_model ||
                m->axes->window_start[r.window] != r.window_start) {
                rc = as_fail(err, "%s: journal holds cell (model %u, window %d, L %d) that is not on "
                             "the axes of %s", sh->journal_path, r.model, r.window, r.L, sh->path);
                break;
            }
            size_t c = ((size_t)r.model * m->n_window + (size_t)r.window) * m->n_L + (size_t)li;
            if (r.type == JR_DISPATCH) {
                attempts[c]++, in_flight[c] = 1;
            } else {
                if (r.status == STORE_PENDING) { /* values lost to a rebuild: pending again */
                    last[c].type = 0;
                    continue;
                }
                if (!in_flight[c]) attempts[c]++;
                in_flight[c] = 0;
                if ((int32_t)r.attempt > attempts[c]) attempts[c] = (int32_t)r.attempt;
                /* a deflated payload (JF_DEFLATE) has its own size: store_read_cell checks it */
                if (r.status == STORE_DONE && !(r.flags & JF_DEFLATE && !(r.flags & JF_COMPACT)) &&
                    r.payload_len != ((r.flags & JF_COMPACT) ? JOURNAL_COMPACT_BYTES : m->payload_bytes))
                    rc = as_fail(err, "%s: cell (window %d, L %d) has %llu payload bytes, "
                                 "expected %zu", sh->journal_path, r.window, r.L,
                                 (unsigned long long)r.payload_len, m->payload_bytes);
                last[c] = r;
            }
        }
    }
    if (!rc && got < 0) rc = -1;
    for (size_t c = 0; c < total && !rc; c++) {
        merged_cell *mc = &m->cells[c];
        mc->attempts += attempts[c];
        if (!last[c].type) continue;
        int st = last[c].status == STORE_DONE ? STORE_DONE : STORE_FAILED;
        if (st == STORE_DONE && mc->status == STORE_DONE) {
            rc = compare_done(m, c, s, j, &last[c], err);
        } else if (st == STORE_DONE || mc->status == STORE_PENDING) {
            mc->status = (uint8_t)st, mc->source = s, mc->rec = last[c];
        }
    }
    journal_close(j);
    return rc;
}

static int append_cells_of(merge_state *m, journal *out, size_t s, as_err *err) {
    journal *j = NULL;
    size_t total = m->n_model * m->n_window * m->n_L;
    int rc = 0;
    for (size_t c = 0; c < total && !rc; c++) {
        merged_cell *mc = &m->cells[c];
        if (mc->status == STORE_PENDING || mc->source != s) continue;
        journal_record r = mc->rec;
        int with_data = r.status == STORE_DONE;
        if (with_data && !j) {
            j = journal_open(m->shards[s].journal_path, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, err);
            if (!j) return -1;
        }
        /* whole in the merged journal (read from the shard's file when compacted); the
         * merged output compacts it when it closes. A compressed cell is copied as stored
         * (its raw chunks), never inflated, and the merged view writes the chunks as they are. */
        int dz = with_data && (r.flags & JF_DEFLATE);
        size_t len = m->payload_bytes;
        if (dz) {
            if (!m->buf_dz) {
                store_axes a = *m->axes;
                cr_layout lay;
                cr_layout_init(&lay, a.n_N, a.n_T, a.n_eps, a.n_norm, a.n_layer, a.n_head);
                cr_layout_sample(&lay, a.sampled);
                m->dz_cap = cw_deflate_bound(&lay);
                if (!(m->buf_dz = malloc(m->dz_cap))) rc = as_fail(err, "%s: out of memory", m->shards[s].path);
            }
            if (!rc && store_read_cell_stored(m->shards[s].path, m->axes, j, &mc->rec, m->buf_dz, m->dz_cap,
                                              &len, err))
                rc = -1;
        } else if (with_data && store_read_cell(m->shards[s].path, m->axes, j, &mc->rec, m->buf_a, err)) {
            rc = -1;
        }
        r.attempt = (uint32_t)mc->attempts;
        r.flags = dz ? JF_DEFLATE : 0;
        r.payload_len = with_data ? len : 0;
        if (!rc) rc = journal_append(out, &r, with_data ? (dz ? m->buf_dz : m->buf_a) : NULL, err);
    }
    journal_close(j);
    return rc;
}

/* Writes the merged journal to tmp (created, fsynced). */
static int write_journal(merge_state *m, const char *tmp, as_err *err) {
    const shard *first = &m->shards[0];
    journal_header hdr = first->hdr;
    snprintf(hdr.config_sha256, sizeof hdr.config_sha256, "%s", first->config_sha);
    journal *out = journal_create(tmp, &hdr, err);
    if (!out) return -1;
    int rc = 0;
    /* the config record as store.c writes it: "SHA\nTEXT", then "\0INPUTS" when known */
    size_t a = strlen(first->config_sha), b = strlen(first->config_text);
    size_t c = first->inputs ? strlen(first->inputs) + 1 : 0;
    char *payload = malloc(a + 1 + b + c);
    if (!payload) rc = as_fail(err, "%s: out of memory", tmp);
    if (!rc) {
        memcpy(payload, first->config_sha, a);
        payload[a] = '\n';
        memcpy(payload + a + 1, first->config_text, b);
        if (c) payload[a + 1 + b] = 0, memcpy(payload + a + 2 + b, first->inputs, c - 1);
        journal_record r = {.type = JR_CONFIG, .window = -1, .t_start = m->created,
                            .payload_len = a + 1 + b + c};
        rc = journal_append(out, &r, payload, err);
    }
    free(payload);
    for (size_t k = 0; k < m->n_segs && !rc; k++) {
        const merged_segment *g = &m->segs[k];
        journal_record r = {.type = JR_SEG_BEGIN, .window = (int32_t)k, .rank = g->mpi_size,
                            .t_start = g->start, .payload_len = g->payload_len,
                            .status = g->n_model, .attempt = g->n_window, .L = g->n_L};
        rc = journal_append(out, &r, g->payload, err);
        if (!rc && !isnan(g->end)) {
            journal_record e = {.type = JR_SEG_END, .window = (int32_t)k, .t_end = g->end,
                                .attempt = (uint32_t)g->cells_done, .status = g->ended, .L = g->end_signo};
            rc = journal_append(out, &e, NULL, err);
        }
    }
    /* Cells that were dispatched but never committed keep their attempts. */
    size_t total = m->n_model * m->n_window * m->n_L;
    for (size_t c = 0; c < total && !rc; c++) {
        const merged_cell *mc = &m->cells[c];
        if (mc->status != STORE_PENDING) continue;
        size_t l = c % m->n_L, w = c / m->n_L % m->n_window, mi = c / m->n_L / m->n_window;
        for (int32_t t = 1; t <= mc->attempts && !rc; t++) {
            journal_record r = {.type = JR_DISPATCH, .model = (uint32_t)mi, .window = (int32_t)w,
                                .L = m->axes->L[l],
                                .window_start = m->axes->window_start[w], .attempt = (uint32_t)t,
                                .rank = -1};
            rc = journal_append(out, &r, NULL, err);
        }
    }
    for (size_t s = 0; s < m->n && !rc; s++) rc = append_cells_of(m, out, s, err);
    if (!rc) rc = journal_sync(out, err);
    journal_close(out);
    if (rc) unlink(tmp);
    return rc;
}

/* Removes OUT.journal.merge.* left by a merge that was killed (the caller holds the
 * output's lock, which every merge holds while its temporary journal exists). */
static int remove_merge_leftovers(const char *jpath, as_err *err) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", jpath);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? jpath + (slash - dir) + 1 : jpath;
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s.merge.", base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        /* a symbolic link under the temporary's name is refused, not removed (fileio.h) */
        if (fileio_refuse_link(full, err)) rc = -1;
        else unlink(full);
    }
    closedir(d);
    return rc;
}

/* Places the journal, then lets the store build the view and status. */
static int install(merge_state *m, merge_summary *sum, as_err *err) {
    const char *out = sum->out;
    char jpath[4200], lpath[4200], tmp[4300];
    if (store_sidecar(jpath, sizeof jpath, out, ".journal") ||
        store_sidecar(lpath, sizeof lpath, out, ".lock"))
        return as_fail(err, "%s: path too long", out);
    /* The output's lock is held while the merged journal is written and renamed into
     * place, so no run starts on it meanwhile, and an OUT.journal.merge.PID found then
     * belongs to a merge that was killed: removed. The lock is given back before
     * store_open takes it again to build the view. */
    int lock_fd;
    if (lock_acquire(lpath, &lock_fd, NULL, err))
        return as_wrap(err, "merge into %s", out);
    /* the journal's name is replaced by a rename, never written through: a link is refused */
    int rc = remove_merge_leftovers(jpath, err) || fileio_refuse_link(jpath, err) ? -1 : 0;
    /* an existing output is replaced when forced, or when its cells were read in */
    int replace = m->opts->force || sum->joined_existing;
    if (!rc && !replace && (fileio_exists(out, 0) || fileio_exists(jpath, 0)))
        rc = as_fail(err, "%s: output exists (--force replaces it)", fileio_exists(out, 0) ? out : jpath);
    snprintf(tmp, sizeof tmp, "%s.merge.%ld", jpath, (long)getpid());
    if (!rc) rc = write_journal(m, tmp, err);
    if (!rc) st_test_phase("merge_journal_written");
    /* A replaced view goes first: a stale view next to the new journal could
     * pass the store's reconcile check with old values. */
    if (!rc && replace && fileio_exists(out, 0) && unlink(out)) {
        unlink(tmp);
        rc = as_fail(err, "%s: cannot remove the old output: %s", out, strerror(errno));
    }
    if (!rc && rename(tmp, jpath)) {
        unlink(tmp);
        rc = as_fail(err, "%s: cannot rename to %s: %s", tmp, jpath, strerror(errno));
    }
    if (!rc) fileio_sync_parent_dir(jpath);
    lock_release(lpath, lock_fd, NULL);
    if (rc) return -1;
    const shard *first = &m->shards[0];
    char hosts[300];
    snprintf(hosts, sizeof hosts, "merge:%s", lock_hostname());
    store_provenance prov = first->desc.prov;
    prov.config_text = first->config_text;
    prov.config_sha256 = first->config_sha;
    prov.inputs = first->inputs;
    prov.hosts = hosts;
    prov.mpi_size = 0;
    prov.slurm_job_id = getenv("SLURM_JOB_ID");
    /* the merged view stores cells as the first shard's does (its datasets' filters) */
    int flags = store_file_compressed(first->path) == 1 ? STORE_COMPRESSED : 0;
    store *s = store_open(out, m->axes, &prov, STORE_RESUME, flags, err);
    if (!s) {
        unlink(jpath);
        return -1;
    }
    sum->total = store_total(s);
    sum->done = store_count(s, STORE_DONE);
    sum->failed = store_count(s, STORE_FAILED);
    const char *state = sum->done == sum->total ? "finished" : "interrupted";
    return store_close(s, state, err);
}

int merge_shards(const merge_opts *opts, merge_summary *sum, as_err *err) {
    memset(sum, 0, sizeof *sum);
    if (!opts->n_shards) return as_fail(err, "merge: no shard files given");
    merge_state m = {.opts = opts, .n = opts->n_shards, .created = NAN};
    m.shards = calloc(m.n + 1, sizeof *m.shards); /* + the existing output */
    if (!m.shards) return as_fail(err, "merge: out of memory");
    int32_t *attempts = NULL;
    uint8_t *in_flight = NULL;
    journal_record *last = NULL;
    int rc = check_names(&m, sum, err);
    if (!rc) add_existing_output(&m, sum);
    if (!rc) rc = check_shards(&m, err);
    if (!rc) {
        m.axes = &m.shards[0].desc.axes;
        m.n_window = m.axes->n_window, m.n_L = m.axes->n_L;
        m.n_model = m.axes->n_model ? m.axes->n_model : 1;
        m.payload_bytes = (size_t)m.shards[0].hdr.payload_bytes;
        size_t total = m.n_model * m.n_window * m.n_L;
        m.cells = calloc(total, sizeof *m.cells);
        attempts = calloc(total, sizeof *attempts);
        in_flight = calloc(total, 1);
        last = calloc(total, sizeof *last);
        m.buf_a = malloc(m.payload_bytes ? m.payload_bytes : 1);
        m.buf_b = malloc(m.payload_bytes ? m.payload_bytes : 1);
        if (!m.cells || !attempts || !in_flight || !last || !m.buf_a || !m.buf_b)
            rc = as_fail(err, "%s: out of memory for %zu cells", sum->out, total);
    }
    /* the existing output first: its segments are the oldest */
    size_t n_shards = m.n - (size_t)sum->joined_existing;
    if (!rc && sum->joined_existing) rc = read_shard(&m, n_shards, attempts, in_flight, last, err);
    for (size_t s = 0; s < n_shards && !rc; s++) rc = read_shard(&m, s, attempts, in_flight, last, err);
    if (!rc) {
        sum->segments = m.n_segs;
        rc = install(&m, sum, err);
    }
    free(attempts), free(in_flight), free(last), free(m.cells), free(m.buf_a), free(m.buf_b), free(m.buf_dz);
    for (size_t k = 0; k < m.n_segs; k++) free(m.segs[k].payload);
    free(m.segs);
    for (size_t s = 0; s < m.n; s++) {
        store_description_free(&m.shards[s].desc);
        free(m.shards[s].config_text), free(m.shards[s].config_sha), free(m.shards[s].inputs);
    }
    free(m.shards);
    return rc ? -1 : 0;
}
