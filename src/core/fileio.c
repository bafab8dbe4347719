/* fileio.c -- see fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

void fileio_format_size(char *buf, size_t size, double bytes) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%.0f bytes", bytes);
        return;
    }
    int u = -1;
    while (bytes >= 1024 && u < 5) bytes /= 1024, u++;
    if (bytes == (double)(long long)bytes) snprintf(buf, size, "%.0f %s", bytes, units[u]);
    else snprintf(buf, size, "%.1f %s", bytes, units[u]);
}

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

static int over_limit(const char *path, double got, size_t max_bytes, const char *what, int at_least,
                      as_err *err) {
    char a[32], b[32];
    fileio_format_size(b, sizeof b, (double)max_bytes);
    if (at_least)
        return as_fail(err, "%s: longer than the limit of %s for %s", path, b,
                       what && what[0] ? what : "this file");
    fileio_format_size(a, sizeof a, got);
    return as_fail(err, "%s: %s (%.0f bytes) is over the limit of %s for %s", path, a, got, b,
                   what && what[0] ? what : "this file");
}

int fileio_open_regular(const char *path, size_t max_bytes, uint64_t *size, as_err *err) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return as_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return as_fail(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return as_fail(err, "%s: not a regular file (%s); give a regular file or a symlink to one", path,
                       kind_of(st.st_mode));
    }
    if (max_bytes && (uint64_t)st.st_size > max_bytes) {
        close(fd);
        return over_limit(path, (double)st.st_size, max_bytes, NULL, 0, err);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (uint64_t)st.st_size;
    return fd;
}

/* Reads fd to its end into a buffer of at least `hint` + 1 bytes, at most max_bytes. */
static int read_fd(int fd, const char *name, size_t hint, size_t max_bytes, const char *what, char **data,
                   size_t *len, as_err *err) {
    size_t cap = hint + 1 > 4096 ? hint + 1 : 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return as_fail(err, "%s: out of memory for %zu bytes", name, cap);
    for (;;) {
        if (n + 1 == cap) {
            /* the file is longer than it said (or a stream): grow, within the limit */
            if (max_bytes && n >= max_bytes) {
                free(buf);
                return over_limit(name, (double)max_bytes, max_bytes, what, 1, err);
            }
            size_t grown_cap = cap * 2;
            if (max_bytes && grown_cap > max_bytes + 2) grown_cap = max_bytes + 2;
            char *grown = realloc(buf, grown_cap);
            if (!grown) {
                free(buf);
                return as_fail(err, "%s: out of memory for %zu bytes", name, grown_cap);
            }
            buf = grown, cap = grown_cap;
        }
        size_t want = cap - 1 - n;
        if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;
        ssize_t got = read(fd, buf + n, want);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return as_fail(err, "%s: read error: %s", name, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    if (max_bytes && n > max_bytes) {
        free(buf);
        return over_limit(name, (double)max_bytes, max_bytes, what, 1, err);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

int fileio_read_all(const char *path, size_t max_bytes, const char *what, char **data, size_t *len,
                    as_err *err) {
    *data = NULL;
    *len = 0;
    uint64_t size = 0;
    int fd = fileio_open_regular(path, 0, &size, err);
    if (fd < 0) return -1;
    if (max_bytes && size > max_bytes) {
        close(fd);
        return over_limit(path, (double)size, max_bytes, what, 0, err);
    }
    int rc = read_fd(fd, path, (size_t)size, max_bytes, what, data, len, err);
    close(fd);
    return rc;
}

int fileio_read_stream(FILE *f, const char *name, size_t max_bytes, const char *what, char **data,
                       size_t *len, as_err *err) {
    *data = NULL;
    *len = 0;
    return read_fd(fileno(f), name, 0, max_bytes, what, data, len, err);
}

double fileio_free_bytes(const char *path) {
    char dir[4352];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return -1;
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (slash == dir) dir[1] = 0;
        else if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
        struct statvfs vfs;
        if (statvfs(dir, &vfs) == 0) return (double)vfs.f_bavail * (double)vfs.f_frsize;
        if (errno != ENOENT || !strcmp(dir, "/") || !strcmp(dir, ".")) return -1;
    }
}

static int link_refused(const char *path, as_err *err) {
    char to[4096];
    ssize_t n = readlink(path, to, sizeof to - 1);
    to[n > 0 ? n : 0] = 0;
    int rc = as_fail(err, "%s: is a symbolic link (to %s); attnsweep writes nothing through a "
                     "link beside its output: remove the link (rm '%s') and run again", path,
                     n > 0 ? to : "?", path);
    errno = ELOOP;
    return rc;
}

static int is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

int fileio_open_beside(const char *path, int flags, unsigned mode, const char *what, as_err *err) {
    /* O_NOFOLLOW refuses a link at the last component atomically (ELOOP, even with
     * O_CREAT and a dangling link); O_EXCL refuses one too, as EEXIST. */
    int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    if (fd >= 0) return fd;
    int e = errno;
    if (e == ELOOP || (e == EEXIST && is_link(path))) return link_refused(path, err);
    as_fail(err, "%s: cannot %s: %s", path, what, strerror(e));
    errno = e;
    return -1;
}

int fileio_refuse_link(const char *path, as_err *err) {
    return is_link(path) ? link_refused(path, err) : 0;
}

int fileio_remove_temp(const char *path, as_err *err) {
    if (fileio_refuse_link(path, err)) return -1;
    if (unlink(path) && errno != ENOENT)
        return as_fail(err, "%s: cannot remove a leftover temporary file: %s", path, strerror(errno));
    return 0;
}

void fileio_sync_parent_dir(const char *path) {
    char dir[4352];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int fileio_make_parent_dirs(const char *path, as_err *err) {
    char dir[4352];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return as_fail(err, "%s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = 0;
    for (char *p = dir + 1;; p++) {
        int end = *p == 0;
        if (*p == '/' || end) {
            *p = 0;
            if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                return as_fail(err, "%s: cannot create folder %s: %s", path, dir, strerror(errno));
            if (end) break;
            *p = '/';
        }
    }
    return 0;
}

int fileio_exists(const char *path, int regular) {
    struct stat st;
    return stat(path, &st) == 0 && (!regular || S_ISREG(st.st_mode));
}
