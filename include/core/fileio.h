/* fileio.h -- the file-system chores every reader and writer shares.
 *
 * Reading: every input attnsweep reads whole (a config and its @include
 * files, config.json, vocab.json, merges.txt, a text or token file, a status
 * file) goes through fileio_read_all(), which refuses anything that is not a
 * regular file (or a symlink to one) -- a FIFO would block open() forever and
 * /dev/zero never ends -- and refuses a file larger than the caller's limit,
 * naming the file and the limit, before it allocates anything.
 *
 * Writing: a new or renamed file survives a crash only once the folder
 * holding its name is synced too; and an output path like "results/paper.h5"
 * should work in a fresh tree. Knows POSIX files only. */
#ifndef ATTNSWEEP_FILEIO_H
#define ATTNSWEEP_FILEIO_H

#include <stdint.h>
#include <stdio.h>

#include "errors.h"

/* Size limits of the whole-file readers (bytes). */
#define FILEIO_MiB ((size_t)1 << 20)
#define FILEIO_GiB ((size_t)1 << 30)

/* Opens path read-only without blocking on a FIFO or device, and returns the
 * descriptor when it is a regular file (or a symlink to one) no larger than
 * max_bytes (0: no limit); *size gets its size. Otherwise -1 with err naming
 * path: "not a regular file (a FIFO)", "N bytes, over the limit of M". */
int fileio_open_regular(const char *path, size_t max_bytes, uint64_t *size, as_err *err);

/* The whole of path in a malloc'd buffer (*data, with a NUL after the last
 * byte, so text can be used as a C string) of *len bytes; the file must pass
 * fileio_open_regular(path, max_bytes). what names the kind of file in the
 * limit message ("config file", "text file", ...; may be NULL). Returns 0, or
 * -1 with err naming path. */
int fileio_read_all(const char *path, size_t max_bytes, const char *what, char **data, size_t *len,
                    as_err *err);

/* The same for an already open stream (stdin: a pipe is fine there), named
 * name in errors; reads at most max_bytes. */
int fileio_read_stream(FILE *f, const char *name, size_t max_bytes, const char *what, char **data,
                       size_t *len, as_err *err);

/* 1 when something (a file, folder, or the target of a symlink) exists at path;
 * with regular = 1, only a regular file (or a symlink to one) counts. */
int fileio_exists(const char *path, int regular);

/* "512 MiB", "16 GiB", "1000 bytes": a size for messages. */
void fileio_format_size(char *buf, size_t size, double bytes);

/* Free bytes for an unprivileged user on the file system that holds path (or
 * would hold it: the nearest existing parent folder is asked). -1 when it
 * cannot be found. */
double fileio_free_bytes(const char *path);

/* The files attnsweep creates or rewrites beside its output (OUT.h5.lock,
 * .reserve, .status and its temporary, the journal and its temporaries, the
 * rebuild and merge temporaries) are never written through a symbolic link:
 * one planted there (dangling or not) is refused in one line naming path and
 * saying to remove the link, and its target is neither written nor created.
 * See docs/reliability.md. */

/* open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode). Returns the descriptor, or
 * -1 with err: the link message for a symbolic link at path (errno ELOOP, also
 * when O_EXCL met a link), else "PATH: cannot WHAT: strerror" (errno kept, so
 * a caller can tell EEXIST). */
int fileio_open_beside(const char *path, int flags, unsigned mode, const char *what, as_err *err);

/* 0 when path is no symbolic link (or does not exist), else -1 with the link
 * message: for a name that HDF5 creates or that a rename replaces. */
int fileio_refuse_link(const char *path, as_err *err);

/* Removes a leftover temporary at path (absent: fine), refusing a symbolic
 * link there rather than removing it. 0, or -1 with err. */
int fileio_remove_temp(const char *path, as_err *err);

/* fsync the folder holding path ("." for a bare name); best effort. */
void fileio_sync_parent_dir(const char *path);

/* mkdir -p of path's parent folder, with the user's umask. Returns 0, or -1
 * with err naming path and the folder that could not be made. */
int fileio_make_parent_dirs(const char *path, as_err *err);

#endif
