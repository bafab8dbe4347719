/* cmd_status.c -- attnsweep status OUT.h5: how far a sweep got.
 *
 * Reads the files the writer keeps next to the output (store.h): the status
 * file (totals, L values, last update, writer pid/host) and the journal (the
 * truth about done and failed cells), never the HDF5 file a run may be
 * writing. Without both it falls back to the HDF5 status variable, read-only. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "journal.h"
#include "lockfile.h"
#include "store.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: attnsweep status OUT.h5\n\n"
            "Tells how far the sweep writing OUT.h5 got, also while it runs: cells done of\n"
            "total, failed, in flight, progress per context length L, the last update and\n"
            "whether the writer looks alive. Reads OUT.h5.status and OUT.h5.journal (the\n"
            "journal is the truth); without them it reads the status variable of OUT.h5.\n\n"
            "exit status: 0 every cell done; 3 cells pending or failed (run again to resume);\n"
            "             1 error (nothing readable); 2 bad usage\n");
}

/* ---- the status file: a flat JSON object this program writes itself ---- */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *grown = realloc(buf, 2 * cap + 1);
        if (!grown) free(buf);
        buf = grown, cap *= 2;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static const char *json_at(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    return p;
}

static double json_num(const char *json, const char *key, double dflt) {
    const char *p = json_at(json, key);
    return p ? strtod(p, NULL) : dflt;
}

static void json_str(const char *json, const char *key, char *out, size_t size) {
    out[0] = 0;
    const char *p = json_at(json, key);
    if (!p || *p != '"') return;
    p++;
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < size) {
        if (*p == '\\' && p[1]) p++;
        out[n++] = *p++;
    }
    out[n] = 0;
}

/* Parses an integer array "[1, 2]" into a malloc'd array. */
static long *json_ints(const char *json, const char *key, size_t *n) {
    *n = 0;
    const char *p = json_at(json, key);
    if (!p || *p != '[') return NULL;
    long *out = NULL;
    p++;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\n') p++;
        if (*p == ']' || !*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        long *grown = realloc(out, (*n + 1) * sizeof *out);
        if (!grown) break;
        out = grown;
        out[(*n)++] = v;
        p = end;
    }
    return out;
}

/* ---- per-L tallies ---- */

typedef struct {
    long L;
    size_t done, failed, total;
} per_L;

typedef struct {
    per_L *rows;
    size_t n;
} tally;

static per_L *tally_row(tally *t, long L) {
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].L == L) return &t->rows[i];
    per_L *grown = realloc(t->rows, (t->n + 1) * sizeof *grown);
    if (!grown) return NULL;
    t->rows = grown;
    per_L *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    r->L = L;
    return r;
}

/* The last commit of each (window, L) cell decides its state. */
typedef struct {
    int32_t window, L;
    uint8_t status;
} cell_state;

static int read_journal(const char *jpath, tally *t, size_t *done, size_t *failed) {
    as_err err;
    journal *j = journal_open(jpath, JOURNAL_SKIP_PAYLOAD_CRC, NULL, NULL, &err);
    if (!j) {
        fprintf(stderr, "attnsweep status: %s\n", err.msg);
        return -1;
    }
    cell_state *cells = NULL;
    size_t n = 0, cap = 0;
    journal_record r;
    while (journal_next(j, &r, &err) == 1) {
        if (r.type != JR_COMMIT) continue;
        size_t i = 0;
        while (i < n && !(cells[i].window == r.window && cells[i].L == r.L)) i++;
        if (i == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                cell_state *grown = realloc(cells, cap * sizeof *grown);
                if (!grown) break;
                cells = grown;
            }
            cells[n++] = (cell_state){r.window, r.L, 0};
        }
        cells[i].status = (uint8_t)r.status;
    }
    journal_close(j);
    *done = *failed = 0;
    for (size_t i = 0; i < n; i++) {
        per_L *row = tally_row(t, cells[i].L);
        if (!row) break;
        if (cells[i].status == STORE_DONE) row->done++, (*done)++;
        else if (cells[i].status == STORE_FAILED) row->failed++, (*failed)++;
    }
    free(cells);
    return 0;
}

/* Fallback: the HDF5 status variable and L coordinate, read-only. */
static int read_hdf5(const char *path, tally *t, size_t *done, size_t *failed, size_t *total) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 0, 1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        fprintf(stderr, "attnsweep status: %s: no status file, no journal, and not a readable "
                        "HDF5 results file\n", path);
        return -1;
    }
    int rc = -1;
    hid_t st = H5Dopen2(f, "status", H5P_DEFAULT), Ld = H5Dopen2(f, "L", H5P_DEFAULT);
    if (st >= 0 && Ld >= 0) {
        hsize_t dims[2] = {0, 0};
        hid_t sp = H5Dget_space(st);
        if (H5Sget_simple_extent_ndims(sp) == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
        H5Sclose(sp);
        size_t n = (size_t)(dims[0] * dims[1]);
        uint8_t *s = malloc(n ? n : 1);
        int32_t *L = malloc((dims[1] ? dims[1] : 1) * sizeof *L);
        if (n && s && L && H5Dread(st, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) >= 0 &&
            H5Dread(Ld, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, L) >= 0) {
            *done = *failed = 0;
            *total = n;
            for (size_t l = 0; l < dims[1]; l++) {
                per_L *row = tally_row(t, L[l]);
                if (!row) break;
                row->total = dims[0];
                for (size_t w = 0; w < dims[0]; w++) {
                    uint8_t v = s[w * dims[1] + l];
                    if (v == STORE_DONE) row->done++, (*done)++;
                    else if (v == STORE_FAILED) row->failed++, (*failed)++;
                }
            }
            rc = 0;
        }
        free(s);
        free(L);
    }
    if (st >= 0) H5Dclose(st);
    if (Ld >= 0) H5Dclose(Ld);
    H5Fclose(f);
    if (rc) fprintf(stderr, "attnsweep status: %s: no readable status or L variable\n", path);
    return rc;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

int cmd_status(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return AS_EXIT_OK;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "attnsweep status: unknown option '%s' (try --help)\n", argv[i]);
            return AS_EXIT_USAGE;
        }
        if (path) {
            fprintf(stderr, "attnsweep status: one output file expected, got '%s' and '%s'\n",
                    path, argv[i]);
            return AS_EXIT_USAGE;
        }
        path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "attnsweep status: missing OUT.h5 (try --help)\n");
        return AS_EXIT_USAGE;
    }
    char jpath[4200], spath[4200], lpath[4200];
    if (store_sidecar(jpath, sizeof jpath, path, ".journal") ||
        store_sidecar(spath, sizeof spath, path, ".status") ||
        store_sidecar(lpath, sizeof lpath, path, ".lock")) {
        fprintf(stderr, "attnsweep status: %s: path too long\n", path);
        return AS_EXIT_USAGE;
    }
    tally t = {0};
    size_t done = 0, failed = 0, total = 0, in_flight = 0;
    char *json = slurp(spath);
    int have_journal = exists(jpath);
    if (json) {
        total = (size_t)json_num(json, "total", 0);
        in_flight = (size_t)json_num(json, "in_flight", 0);
        size_t nL;
        long *Ls = json_ints(json, "L", &nL);
        size_t windows = (size_t)json_num(json, "windows", 0);
        for (size_t i = 0; i < nL; i++) {
            per_L *row = tally_row(&t, Ls[i]);
            if (row) row->total = windows;
        }
        free(Ls);
        done = (size_t)json_num(json, "done", 0);
        failed = (size_t)json_num(json, "failed", 0);
    }
    if (have_journal) {
        for (size_t i = 0; i < t.n; i++) t.rows[i].done = t.rows[i].failed = 0;
        if (read_journal(jpath, &t, &done, &failed)) {
            free(json);
            free(t.rows);
            return AS_EXIT_ERROR;
        }
    } else if (!json) {
        if (read_hdf5(path, &t, &done, &failed, &total)) {
            free(t.rows);
            return AS_EXIT_ERROR;
        }
    }

    if (total)
        printf("%s: %zu/%zu cells done (%.1f%%), %zu failed, %zu in flight, %zu pending\n", path,
               done, total, 100.0 * (double)done / (double)total, failed, in_flight,
               total >= done + failed + in_flight ? total - done - failed - in_flight : 0);
    else
        printf("%s: %zu cells done, %zu failed (total unknown: no status file)\n", path, done, failed);
    for (size_t i = 0; i < t.n; i++) {
        if (t.rows[i].total)
            printf("  L=%-6ld %zu/%zu done, %zu failed\n", t.rows[i].L, t.rows[i].done,
                   t.rows[i].total, t.rows[i].failed);
        else
            printf("  L=%-6ld %zu done, %zu failed\n", t.rows[i].L, t.rows[i].done, t.rows[i].failed);
    }
    if (json) {
        char state[64], updated[64], host[256];
        json_str(json, "state", state, sizeof state);
        json_str(json, "updated", updated, sizeof updated);
        json_str(json, "host", host, sizeof host);
        double ago = (double)time(NULL) - json_num(json, "updated_unix", 0);
        printf("last update %s (%.0f s ago), state %s, %.1f cells/hour in the last segment\n",
               updated, ago, state, json_num(json, "rate_cells_per_hour", 0));
    } else {
        printf("no status file (%s)\n", spath);
    }
    lock_info li;
    as_err err;
    if (exists(lpath) && lock_read(lpath, &li, &err) == 0) {
        int alive = lock_holder_alive(&li);
        printf("writer: %s pid %ld on %s%s%s, since %s\n",
               alive == 1 ? "alive," : alive == 0 ? "DEAD (stale lock)," : "lock held by",
               li.pid, li.host, li.slurm_job_id[0] ? ", SLURM job " : "", li.slurm_job_id,
               li.started);
    } else {
        printf("writer: none (no lock file)\n");
    }
    free(json);
    free(t.rows);
    int complete = total > 0 && done == total;
    return complete ? AS_EXIT_OK : AS_EXIT_RESUMABLE;
}
