/* test_fileio.c -- the one whole-file reader: contents and the
 * trailing NUL, an empty file, a symlink to a file; refusals in one line that
 * name the file: a FIFO (at once, never waiting for a writer), a folder,
 * /dev/zero, a missing file, a file over the limit (named with the limit);
 * and the free-space probe on a path whose folder does not exist yet. Opening beside an
 * output: a link (to a victim, or dangling) refused in one line naming it, with or without
 * O_EXCL, the victim unchanged and nothing created; a leftover temporary removed, a link
 * under its name refused and kept. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fileio.h"

static char dir[] = "/tmp/test_fileio_XXXXXX";

static void path_of(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", dir, name); }

static void expect_refused(const char *path, size_t limit, const char *want) {
    char *data = (char *)1;
    size_t len = 7;
    as_err err = {{0}};
    int rc = fileio_read_all(path, limit, "a test file", &data, &len, &err);
    CHECK(rc == -1 && data == NULL && len == 0, "%s: accepted", path);
    CHECK(strstr(err.msg, path) && strstr(err.msg, want) && !strchr(err.msg, '\n'),
          "%s: message '%s' lacks the file or '%s'", path, err.msg, want);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char p[512], q[512];
    as_err err = {{0}};
    char *data = NULL;
    size_t len = 0;

    path_of(p, sizeof p, "a.txt");
    FILE *f = fopen(p, "wb");
    fwrite("hello\0world", 1, 11, f);
    fclose(f);
    CHECK(fileio_read_all(p, 11, "a test file", &data, &len, &err) == 0 && len == 11 &&
              !memcmp(data, "hello\0world", 11) && data[11] == 0,
          "read: %s", err.msg);
    free(data);
    expect_refused(p, 10, "over the limit of 10 bytes for a test file");
    path_of(q, sizeof q, "link.txt");
    CHECK(symlink(p, q) == 0, "symlink");
    CHECK(fileio_read_all(q, 0, NULL, &data, &len, &err) == 0 && len == 11, "symlink to a file: %s", err.msg);
    free(data);

    path_of(p, sizeof p, "empty");
    fclose(fopen(p, "wb"));
    CHECK(fileio_read_all(p, 100, NULL, &data, &len, &err) == 0 && len == 0 && data && data[0] == 0,
          "empty file: %s", err.msg);
    free(data);

    /* a sparse 3 GiB file is refused by its size, before anything is allocated */
    path_of(p, sizeof p, "sparse");
    f = fopen(p, "wb");
    CHECK(f && ftruncate(fileno(f), (off_t)3 << 30) == 0, "sparse file");
    fclose(f);
    expect_refused(p, FILEIO_GiB, "over the limit of 1 GiB");

    path_of(p, sizeof p, "fifo");
    CHECK(mkfifo(p, 0666) == 0, "mkfifo");
    expect_refused(p, 0, "not a regular file (a FIFO)"); /* blocked forever in open() before */
    uint64_t size;
    CHECK(fileio_open_regular(p, 0, &size, &err) == -1 && strstr(err.msg, "FIFO"), "open_regular FIFO: %s", err.msg);
    expect_refused(dir, 0, "not a regular file (a folder)");
    expect_refused("/dev/zero", 0, "not a regular file (a character device)");
    path_of(p, sizeof p, "nothere");
    expect_refused(p, 0, "cannot open");

    /* a stream (stdin is one) within and over its limit */
    path_of(p, sizeof p, "a.txt");
    f = fopen(p, "rb");
    CHECK(fileio_read_stream(f, "stdin", 100, NULL, &data, &len, &err) == 0 && len == 11, "stream: %s", err.msg);
    free(data);
    rewind(f);
    CHECK(fileio_read_stream(f, "stdin", 4, "a text", &data, &len, &err) == -1 &&
              strstr(err.msg, "stdin: longer than the limit of 4 bytes for a text"),
          "stream over the limit: %s", err.msg);
    fclose(f);

    path_of(p, sizeof p, "not/yet/made/out.h5");
    CHECK(fileio_free_bytes(p) > 0, "free space of a folder still to be made");
    char buf[32];
    fileio_format_size(buf, sizeof buf, 16.0 * 1024 * 1024);
    CHECK(!strcmp(buf, "16 MiB"), "format_size: %s", buf);
    fileio_format_size(buf, sizeof buf, 1536.0);
    CHECK(!strcmp(buf, "1.5 KiB"), "format_size: %s", buf);

    /* beside an output: never through a symbolic link */
    char victim[512], link[512], dang[512], plain[512];
    path_of(victim, sizeof victim, "victim");
    path_of(link, sizeof link, "out.h5.lock");
    path_of(dang, sizeof dang, "nowhere");
    path_of(plain, sizeof plain, "out.h5.reserve");
    f = fopen(victim, "wb");
    fputs("victim", f);
    fclose(f);
    CHECK(symlink(victim, link) == 0, "symlink");
    int flags[2] = {O_RDWR | O_CREAT, O_RDWR | O_CREAT | O_EXCL};
    for (int k = 0; k < 2; k++) {
        int fd = fileio_open_beside(link, flags[k], 0666, "create lock", &err);
        CHECK(fd == -1 && errno == ELOOP && strstr(err.msg, link) && strstr(err.msg, "symbolic link") &&
                  strstr(err.msg, "rm '") && !strchr(err.msg, '\n'),
              "link to a file, flags %d: fd %d, '%s'", k, fd, err.msg);
        CHECK(fileio_read_all(victim, 0, NULL, &data, &len, &err) == 0 && len == 6, "victim kept");
        free(data);
    }
    unlink(link);
    CHECK(symlink(dang, link) == 0, "dangling symlink");
    CHECK(fileio_open_beside(link, O_WRONLY | O_CREAT | O_TRUNC, 0666, "x", &err) == -1 &&
              strstr(err.msg, "symbolic link"), "dangling link: '%s'", err.msg);
    CHECK(access(dang, F_OK) != 0, "the dangling link created its target");
    CHECK(fileio_refuse_link(link, &err) == -1 && fileio_remove_temp(link, &err) == -1, "link check");
    struct stat lst;
    CHECK(lstat(link, &lst) == 0 && S_ISLNK(lst.st_mode), "a refused link is kept, not removed");
    int fd = fileio_open_beside(plain, O_WRONLY | O_CREAT | O_EXCL, 0644, "create", &err);
    CHECK(fd >= 0, "a plain new file: %s", err.msg);
    if (fd >= 0) close(fd);
    fd = fileio_open_beside(plain, O_WRONLY | O_CREAT | O_EXCL, 0644, "create the reserve", &err);
    CHECK(fd == -1 && errno == EEXIST && strstr(err.msg, "cannot create the reserve"),
          "O_EXCL on a plain file keeps EEXIST: '%s'", err.msg);
    CHECK(fileio_refuse_link(plain, &err) == 0 && fileio_remove_temp(plain, &err) == 0 &&
              access(plain, F_OK) != 0 && fileio_remove_temp(plain, &err) == 0,
          "a leftover temporary removed (and an absent one is fine)");
    unlink(link);
    unlink(victim);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_fileio");
}
