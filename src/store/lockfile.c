/* lockfile.c -- see lockfile.h. */
#include "lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *lock_hostname(void) {
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown");
    return host;
}

int lock_read(const char *lock_path, lock_info *info, as_err *err) {
    memset(info, 0, sizeof *info);
    FILE *f = fopen(lock_path, "r");
    if (!f) return as_fail(err, "%s: cannot read lock: %s", lock_path, strerror(errno));
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "host=", 5)) snprintf(info->host, sizeof info->host, "%.255s", line + 5);
        else if (!strncmp(line, "pid=", 4)) info->pid = strtol(line + 4, NULL, 10);
        else if (!strncmp(line, "slurm_job_id=", 13))
            snprintf(info->slurm_job_id, sizeof info->slurm_job_id, "%.63s", line + 13);
        else if (!strncmp(line, "started=", 8))
            snprintf(info->started, sizeof info->started, "%.63s", line + 8);
    }
    fclose(f);
    if (!info->host[0] || info->pid <= 0)
        return as_fail(err, "%s: lock file has no host= or pid= line", lock_path);
    return 0;
}

/* 1 when /proc says pid is a zombie: it died (SIGKILL of an MPI job) and its
 * parent has not reaped it yet; it can write nothing any more. */
static int is_zombie(long pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the command name may hold spaces or parens */
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

int lock_holder_alive(const lock_info *info) {
    if (strcmp(info->host, lock_hostname())) return -1;
    if ((kill((pid_t)info->pid, 0) == 0 || errno == EPERM) && !is_zombie(info->pid)) return 1;
    return 0;
}

static int lock_create(const char *lock_path, as_err *err) {
    int fd = open(lock_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return errno == EEXIST ? 1 : as_fail(err, "%s: cannot create lock: %s",
                                                       lock_path, strerror(errno));
    char started[64];
    time_t now = time(NULL);
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char *job = getenv("SLURM_JOB_ID");
    char text[1024];
    int n = snprintf(text, sizeof text, "host=%s\npid=%ld\nslurm_job_id=%s\nstarted=%s\n",
                     lock_hostname(), (long)getpid(), job ? job : "", started);
    if (write(fd, text, (size_t)n) != n || fsync(fd)) {
        int e = errno;
        close(fd);
        unlink(lock_path);
        return as_fail(err, "%s: cannot write lock: %s", lock_path, strerror(e));
    }
    close(fd);
    return 0;
}

int lock_acquire(const char *lock_path, int *replaced_stale, as_err *err) {
    if (replaced_stale) *replaced_stale = 0;
    for (int tries = 0; tries < 2; tries++) {
        int rc = lock_create(lock_path, err);
        if (rc <= 0) return rc;
        lock_info held;
        if (lock_read(lock_path, &held, err)) {
            /* A lock file we cannot parse may be half-written by a live writer;
             * only a human can tell. */
            return as_wrap(err, "%s is locked by an unreadable lock file (remove it if no "
                           "sweep writes this output)", lock_path);
        }
        int alive = lock_holder_alive(&held);
        if (alive == 1 || held.pid == (long)getpid())
            return as_fail(err, "%s: output is in use by pid %ld on %s (SLURM job %s, since %s)",
                           lock_path, held.pid, held.host,
                           held.slurm_job_id[0] ? held.slurm_job_id : "none", held.started);
        if (alive == -1)
            return as_fail(err, "%s: output is locked by pid %ld on host %s (SLURM job %s, "
                           "since %s); if that run is dead, remove the lock file",
                           lock_path, held.pid, held.host,
                           held.slurm_job_id[0] ? held.slurm_job_id : "none", held.started);
        if (unlink(lock_path) && errno != ENOENT)
            return as_fail(err, "%s: cannot remove stale lock: %s", lock_path, strerror(errno));
        if (replaced_stale) *replaced_stale = 1;
    }
    return as_fail(err, "%s: another process took the lock while a stale one was replaced",
                   lock_path);
}

int lock_release(const char *lock_path, as_err *err) {
    lock_info held;
    as_err ignored;
    if (lock_read(lock_path, &held, &ignored)) return 0;
    if (held.pid != (long)getpid() || strcmp(held.host, lock_hostname())) return 0;
    if (unlink(lock_path)) return as_fail(err, "%s: cannot remove lock: %s", lock_path, strerror(errno));
    return 0;
}
