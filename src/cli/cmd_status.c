/* cmd_status.c -- attnsweep status OUT.h5 | CONFIG: how far a sweep got.
 *
 * The store reads it (store_read_progress, store.h): the status file (totals, L
 * values, last update, writer host) and the journal (the truth about done and
 * failed cells), never the HDF5 file a run may be writing; without a journal the
 * HDF5 status variable, read-only, and then it says the journal is missing.
 * The lock file tells whether a writer is alive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "clock.h"
#include "config.h"
#include "lockfile.h"
#include "store.h"

static const char status_about[] =
    "Tells how far the sweep writing OUT.h5 got, also while it runs: windows done of\n"
    "total (a window is done when every L of it is; the cells, one window at one L,\n"
    "follow), failed, in flight, progress per model and per context length L, the\n"
    "last update and\n"
    "whether the writer is alive or dead (a killed run: run it again to resume).\n"
    "Reads OUT.h5.status and OUT.h5.journal (the journal is the truth); without\n"
    "them it reads the status variable of OUT.h5. When no writer runs, it also checks\n"
    "the stored chunks of every done cell against their checksums (reading OUT.h5)\n"
    "and reports damaged cells, which the next `attnsweep run` computes again.\n"
    "Given a CONFIG (any path not ending in .h5 or .nc, as for plan) instead, it reports on\n"
    "the config's output.\n";
static const char status_exit[] =
    "exit status: 0 every cell done; 3 cells pending, failed or damaged (run again to resume);\n"
    "             1 error (nothing readable); 2 bad usage\n";

/* The results file an argument names: itself when it ends in .h5 or .nc (as plan decides),
 * else the output of the config it is. 0, or -1 after the one-line error. */
static int output_of(const char *arg, char *out, size_t size) {
    size_t n = strlen(arg);
    if (n > 3 && (!strcmp(arg + n - 3, ".h5") || !strcmp(arg + n - 3, ".nc"))) {
        snprintf(out, size, "%s", arg);
        return 0;
    }
    as_config cfg;
    as_err err;
    if (config_load(&cfg, arg, NULL, 0, &err)) {
        fprintf(stderr, "attnsweep status: %s (give OUT.h5, or the config of the sweep)\n", err.msg);
        return -1;
    }
    snprintf(out, size, "%s", cfg.output);
    config_free(&cfg);
    return 0;
}

/* The counts: windows and cells, then a line per model and per L. */
static void print_counts(const char *path, const store_progress *p) {
    size_t n_windows = p->n_L ? p->per_L[0].windows : 0;
    /* With several models a window counts once per model (the unit of work is one window
     * of one model), and a line per model follows. */
    int models = p->n_model > 1;
    if (p->total && n_windows)
        printf("%s: %zu/%zu windows done (%.1f%%); cells (%swindow x L) %zu/%zu done, %zu failed,"
               " %zu in flight\n",
               path, p->windows_done, n_windows, 100.0 * (double)p->windows_done / (double)n_windows,
               models ? "model x " : "", p->done, p->total, p->failed, p->in_flight);
    else
        printf("%s: %zu windows done (%zu cells), %zu cells failed (totals unknown: no status file)\n",
               path, p->windows_done, p->done, p->failed);
    for (size_t m = 0; models && m < p->n_model; m++) {
        const store_progress_model *r = &p->per_model[m];
        if (r->total)
            printf("  model %zu %s: %zu/%zu cells done, %zu failed\n", m, r->name[0] ? r->name : "?",
                   r->done, r->total, r->failed);
        else
            printf("  model %zu %s: %zu cells done, %zu failed\n", m, r->name[0] ? r->name : "?",
                   r->done, r->failed);
    }
    for (size_t i = 0; i < p->n_L; i++) {
        const store_progress_L *r = &p->per_L[i];
        if (r->windows)
            printf("  L=%-6ld %zu/%zu windows done, %zu failed\n", (long)r->L, r->done, r->windows,
                   r->failed);
        else
            printf("  L=%-6ld %zu windows done, %zu failed\n", (long)r->L, r->done, r->failed);
    }
}

int cmd_status(int argc, char **argv) {
    arg_list pos = {0};
    static const arg_opt opts[] = {OPT_END()};
    arg_spec spec = {.prog = "attnsweep status", .positional = "OUT.h5|CONFIG", .min_pos = 1, .max_pos = 1,
                     .pos = &pos, .description = status_about, .epilogue = status_exit, .opts = opts};
    int code;
    if (args_parse(&spec, argc, argv, &code)) return code;
    char out[4200];
    if (output_of(pos.v[0], out, sizeof out)) {
        args_free(&spec);
        return AS_EXIT_ERROR;
    }
    const char *path = out;
    args_free(&spec);
    char jpath[4200], spath[4200], lpath[4200];
    if (store_sidecar(jpath, sizeof jpath, path, ".journal") ||
        store_sidecar(spath, sizeof spath, path, ".status") ||
        store_sidecar(lpath, sizeof lpath, path, ".lock")) {
        fprintf(stderr, "attnsweep status: %s: path too long\n", path);
        return AS_EXIT_USAGE;
    }
    store_progress p;
    as_err err;
    if (store_read_progress(path, &p, &err)) {
        fprintf(stderr, "attnsweep status: %s\n", err.msg);
        return AS_EXIT_ERROR;
    }
    size_t total = p.total, done = p.done, n_L = p.n_L;
    print_counts(path, &p);
    /* the stored chunks, checked against the journal (store_verify_file), unless a writer
     * may be changing the file under the reader */
    lock_info held;
    size_t checked = 0, damaged = 0;
    if (!p.journal_missing && done) {
        if (lock_in_use(lpath, &held) != 0) {
            printf("checksums: not checked while a writer may hold the output (lock %s)\n", lpath);
        } else if (store_verify_file(path, &checked, &damaged, &err)) {
            printf("checksums: cannot check: %s\n", err.msg);
        } else if (damaged) {
            printf("checksums: DAMAGED: %zu of %zu done cells do not match their checksums in %s; "
                   "`attnsweep run %s` computes them again\n", damaged, checked, path, path);
        } else {
            printf("checksums: the %zu done cells' stored chunks are intact\n", checked);
        }
    }
    if (p.journal_missing)
        printf("journal %s is missing: the counts above are the HDF5 file's own, which only the "
               "journal can confirm; `attnsweep run` refuses this output until the journal is "
               "restored\n", jpath);
    lock_info li;
    int running = p.have_status_file && !strcmp(p.state, "running");
    int alive = lock_in_use(lpath, &li);
    /* alive: 1 yes, 0 a stale lock, < 0 another host's (unknown); no lock file at all is dead
     * too when the state says running */
    int writer_alive = li.pid ? alive != 0 : 0;
    if (p.have_status_file) {
        double ago = as_wall_s() - p.updated_unix;
        char when[96];
        if (ago > -2 && ago < 0) ago = 0; /* rounding, not clock skew */
        if (ago < 0)  /* the writer's clock runs ahead of this one (another node) */
            snprintf(when, sizeof when, "just now; the writer's clock is %.0f s ahead of this host's", -ago);
        else if (ago < 120)
            snprintf(when, sizeof when, "%.0f s ago", ago);
        else if (ago < 7200)
            snprintf(when, sizeof when, "%.0f min ago", ago / 60);
        else
            snprintf(when, sizeof when, "%.1f h ago", ago / 3600);
        /* "running" is what the writer last wrote; a dead writer never wrote that it stopped */
        printf("last update %s (%s), state %s%s, %.3g windows/hour in the last segment\n", p.updated,
               when, p.state, running && !writer_alive ? " (stale: the writer is dead)" : "",
               n_L ? p.rate_cells_per_hour / (double)n_L : p.rate_cells_per_hour);
    } else {
        printf("no status file (%s)\n", spath);
    }
    if (li.pid) {
        printf("writer: %s pid %ld on %s%s%s, since %s\n",
               alive == 1 ? "alive," : alive == 0 ? "DEAD (stale lock)," : "lock held by",
               li.pid, li.host, li.slurm_job_id[0] ? ", SLURM job " : "", li.slurm_job_id,
               li.started);
        if (alive == 0 && (running || !p.have_status_file))
            printf("writer is dead: the run was killed; run it again to resume (the next run takes "
                   "over the lock)\n");
        else if (alive < 0)
            printf("writer: on another host, cannot tell from here whether it is alive (compare the "
                   "last update)\n");
    } else if (running) {
        printf("writer: none (no lock file) although the state says running: the writer is dead; "
               "run it again to resume\n");
    } else {
        printf("writer: none (no lock file)\n");
    }
    store_progress_free(&p);
    int complete = total > 0 && done == total && !damaged;
    return complete ? AS_EXIT_OK : AS_EXIT_RESUMABLE;
}
