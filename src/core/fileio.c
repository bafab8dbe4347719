/* fileio.c -- see fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
