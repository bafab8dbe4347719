/* lockfile.c -- see lockfile.h. */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK (Linux 3.15+) */
#include "lockfile.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "testhook.h"

const char *lock_hostname(void) {
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown");
    return host;
}

/* This boot's id ("" when /proc does not say). */
static const char *boot_id(void) {
    static char id[64];
    static int read_once;
    if (!read_once) {
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f) {
            if (!fgets(id, sizeof id, f)) id[0] = 0;
            id[strcspn(id, "\n")] = 0;
            fclose(f);
        }
        read_once = 1;
    }
    return id;
}

/* Field 3 (state) and field 22 (start time, clock ticks after boot) of /proc/PID/stat.
 * Returns 0, or -1 when there is no such process. */
static int proc_stat(long pid, char *state, unsigned long long *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces or parens */
    if (!p || p[1] != ' ') return -1;
    *state = p[2];
    p += 2; /* at field 3 */
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    *start = p ? strtoull(p, NULL, 10) : 0;
    return 0;
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
        else if (!strncmp(line, "start_time=", 11)) info->start_time = strtoull(line + 11, NULL, 10);
        else if (!strncmp(line, "boot_id=", 8))
            snprintf(info->boot_id, sizeof info->boot_id, "%.63s", line + 8);
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

int lock_holder_alive(const lock_info *info) {
    if (strcmp(info->host, lock_hostname())) return -1;
    if (info->boot_id[0] && boot_id()[0] && strcmp(info->boot_id, boot_id())) return 0; /* rebooted */
    if (kill((pid_t)info->pid, 0) && errno != EPERM) return 0;
    char state;
    unsigned long long start;
    if (proc_stat(info->pid, &state, &start)) return 1; /* alive, /proc says no more */
    /* A zombie died (SIGKILL of an MPI job) and waits to be reaped: it writes nothing
     * more. Another start time: the pid was reused by an unrelated process. */
    if (state == 'Z') return 0;
    if (info->start_time && start != info->start_time) return 0;
    return 1;
}

/* The kernel lock on the whole file: 0 taken, 1 someone else holds it, -1 this file
 * system has no such locks (fall back), -2 another error (errno). */
static int kernel_lock(int fd) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return 0;
    if (errno == EAGAIN || errno == EACCES) return 1;
    if (errno == ENOLCK || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS) return -1;
    return -2;
}

/* Does any process hold the kernel lock? 1 yes, 0 no, -1 cannot tell. Takes nothing. */
static int kernel_lock_held(const char *lock_path) {
    int fd = open(lock_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    int rc = fcntl(fd, F_OFD_GETLK, &fl) ? -1 : fl.l_type != F_UNLCK;
    close(fd);
    return rc;
}

int lock_in_use(const char *lock_path, lock_info *info) {
    as_err ignored;
    int readable = lock_read(lock_path, info, &ignored) == 0;
    if (!readable) memset(info, 0, sizeof *info);
    int held = kernel_lock_held(lock_path);
    if (held == 1) return 1;
    if (!readable) return 0;
    int alive = lock_holder_alive(info);
    if (held == 0) return alive == 1 ? 1 : alive; /* a holder the kernel cannot see */
    return alive;
}

static int refuse_held(const char *lock_path, const lock_info *held, int kernel_says, as_err *err);

int lock_refuse_if_in_use(const char *lock_path, as_err *err) {
    lock_info info;
    if (lock_in_use(lock_path, &info) != 1) return 0;
    return refuse_held(lock_path, &info, kernel_lock_held(lock_path) == 1, err);
}

/* Writes this process's identity into the lock file (replacing what was there). */
static int write_identity(int fd, const char *lock_path, as_err *err) {
    char started[64];
    time_t now = (time_t)as_wall_s();
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char state;
    unsigned long long start = 0;
    if (proc_stat((long)getpid(), &state, &start)) start = 0;
    const char *job = getenv("SLURM_JOB_ID");
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "host=%s\npid=%ld\nstart_time=%llu\nboot_id=%s\nslurm_job_id=%s\nstarted=%s\n",
                     lock_hostname(), (long)getpid(), start, boot_id(), job ? job : "", started);
    if (ftruncate(fd, 0) || pwrite(fd, text, (size_t)n, 0) != n || fsync(fd))
        return as_fail(err, "%s: cannot write lock: %s", lock_path, strerror(errno));
    return 0;
}

static int refuse_held(const char *lock_path, const lock_info *held, int kernel_says, as_err *err) {
    if (!held->pid)
        return as_fail(err, "%s: output is in use by another process, which holds the lock (the "
                       "lock file does not name it yet: it is taking the lock over)", lock_path);
    const char *job = held->slurm_job_id[0] ? held->slurm_job_id : "none";
    const char *since = held->started[0] ? held->started : "?";
    /* A kernel lock dies with its process: removing the file could only let a second
     * writer in. Only a holder the kernel cannot vouch for may be really stale. */
    if (kernel_says)
        return as_fail(err, "%s: output is in use by pid %ld on %s (SLURM job %s, since %s), which "
                       "holds the lock", lock_path, held->pid, held->host, job, since);
    return as_fail(err, "%s: output is in use by pid %ld on %s (SLURM job %s, since %s) by its lock "
                   "file, which this file system cannot confirm; if no attnsweep runs on this "
                   "output, remove the lock: rm '%s'", lock_path, held->pid, held->host, job, since,
                   lock_path);
}

/* The fallback where the file system has no locks: O_EXCL create, stale by the text. */
static int acquire_by_file(const char *lock_path, int *replaced_stale, as_err *err) {
    for (int tries = 0; tries < 2; tries++) {
        int fd = fileio_open_beside(lock_path, O_WRONLY | O_CREAT | O_EXCL, 0666, "create lock", err);
        if (fd >= 0) {
            int rc = write_identity(fd, lock_path, err);
            close(fd);
            if (rc) unlink(lock_path);
            return rc;
        }
        if (errno != EEXIST) return -1; /* err says why (a symbolic link: refused) */
        lock_info held;
        if (lock_read(lock_path, &held, err))
            return as_wrap(err, "%s is locked by an unreadable lock file (remove it if no sweep "
                           "writes this output)", lock_path);
        int alive = lock_holder_alive(&held);
        if (alive != 0 || held.pid == (long)getpid()) return refuse_held(lock_path, &held, 0, err);
        if (unlink(lock_path) && errno != ENOENT)
            return as_fail(err, "%s: cannot remove stale lock: %s", lock_path, strerror(errno));
        if (replaced_stale) *replaced_stale = 1;
    }
    return as_fail(err, "%s: another process took the lock while a stale one was replaced",
                   lock_path);
}

int lock_acquire(const char *lock_path, int *fd_out, int *replaced_stale, as_err *err) {
    *fd_out = -1;
    if (replaced_stale) *replaced_stale = 0;
    for (int tries = 0; tries < 8; tries++) {
        /* never through a symbolic link planted at lock_path (fileio.h) */
        int fd = fileio_open_beside(lock_path, O_RDWR | O_CREAT, 0666, "create lock", err);
        if (fd < 0) return -1;
        int k = kernel_lock(fd);
        if (k == -1) {
            /* No kernel locks here. The file we may just have created is empty; the
             * fallback creates its own. */
            struct stat st;
            if (!fstat(fd, &st) && st.st_size == 0) unlink(lock_path);
            close(fd);
            return acquire_by_file(lock_path, replaced_stale, err);
        }
        if (k == -2) {
            int e = errno;
            close(fd);
            return as_fail(err, "%s: cannot lock: %s", lock_path, strerror(e));
        }
        lock_info held;
        as_err ignored;
        int readable = lock_read(lock_path, &held, &ignored) == 0;
        if (!readable) memset(&held, 0, sizeof held);
        if (k == 1) {
            close(fd);
            /* The winner of a takeover may not have replaced the stale text yet. */
            if (readable && lock_holder_alive(&held) == 0) memset(&held, 0, sizeof held);
            return refuse_held(lock_path, &held, 1, err);
        }
        /* The kernel lock is ours. A holder releasing the lock unlinks the file while
         * holding it: if our descriptor no longer names lock_path, start over. */
        struct stat mine, now;
        if (fstat(fd, &mine) || stat(lock_path, &now) || mine.st_ino != now.st_ino ||
            mine.st_dev != now.st_dev) {
            close(fd);
            continue;
        }
        /* Text left in the file is stale (its writer holds no lock) unless it names
         * a holder the kernel cannot see (lockfile.h). */
        if (readable) {
            int alive = lock_holder_alive(&held);
            if (alive != 0 && held.pid != (long)getpid()) {
                close(fd);
                if (alive == -1)
                    return as_fail(err, "%s: output is locked by pid %ld on host %s (SLURM job %s, "
                                   "since %s); if that run is dead, remove the lock: rm '%s'",
                                   lock_path, held.pid, held.host,
                                   held.slurm_job_id[0] ? held.slurm_job_id : "none",
                                   held.started[0] ? held.started : "?", lock_path);
                return refuse_held(lock_path, &held, 0, err);
            }
        }
        if (replaced_stale) *replaced_stale = mine.st_size > 0;
        st_test_phase("lock_won");
        if (write_identity(fd, lock_path, err)) {
            unlink(lock_path);
            close(fd);
            return -1;
        }
        *fd_out = fd;
        return 0;
    }
    return as_fail(err, "%s: the lock file kept being replaced while it was taken; try again",
                   lock_path);
}

int lock_release(const char *lock_path, int fd, as_err *err) {
    if (fd >= 0) {
        /* Unlink while the kernel lock is still ours, then drop it (close). */
        int rc = unlink(lock_path) && errno != ENOENT ? -1 : 0;
        int e = errno;
        close(fd);
        return rc ? as_fail(err, "%s: cannot remove lock: %s", lock_path, strerror(e)) : 0;
    }
    lock_info held;
    as_err ignored;
    if (lock_read(lock_path, &held, &ignored)) return 0;
    if (held.pid != (long)getpid() || strcmp(held.host, lock_hostname())) return 0;
    if (unlink(lock_path)) return as_fail(err, "%s: cannot remove lock: %s", lock_path, strerror(errno));
    return 0;
}
