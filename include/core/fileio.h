/* fileio.h -- the two file-system chores every writer of results needs.
 *
 * A new or renamed file survives a crash only once the folder holding its
 * name is synced too; and an output path like "results/paper.h5" should work
 * in a fresh tree. Knows POSIX files only. */
#ifndef ATTNSWEEP_FILEIO_H
#define ATTNSWEEP_FILEIO_H

#include "errors.h"

/* fsync the folder holding path ("." for a bare name); best effort. */
void fileio_sync_parent_dir(const char *path);

/* mkdir -p of path's parent folder, with the user's umask. Returns 0, or -1
 * with err naming path and the folder that could not be made. */
int fileio_make_parent_dirs(const char *path, as_err *err);

#endif
