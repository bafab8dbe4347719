/* lockfile.h -- one writer per results file (OUT.h5.lock).
 *
 * HDF5's own file locks fail on some cluster file systems (NFS, Lustre) and
 * are turned off, so the store keeps writers apart with a lock
 * file created with O_CREAT|O_EXCL holding "host=", "pid=", "slurm_job_id="
 * and "started=" lines. A lock left by a dead process on this host (same host,
 * pid not alive) is stale and is replaced; a live one, or one from another
 * host (whose pid cannot be checked from here), is refused with a message
 * naming who holds it. */
#ifndef ATTNSWEEP_LOCKFILE_H
#define ATTNSWEEP_LOCKFILE_H

#include <sys/types.h>

#include "errors.h"

typedef struct {
    char host[256];
    long pid;
    char slurm_job_id[64];
    char started[64]; /* ISO 8601 UTC */
} lock_info;

/* Reads a lock file. Returns 0, or -1 when absent or unreadable. */
int lock_read(const char *lock_path, lock_info *info, as_err *err);

/* 1 when the holder is on this host and its pid is alive, 0 when it is on this
 * host and dead, -1 when it is on another host (unknown). */
int lock_holder_alive(const lock_info *info);

/* Takes the lock (replacing a stale one). *replaced_stale (may be NULL) tells
 * whether a stale lock was taken over. */
int lock_acquire(const char *lock_path, int *replaced_stale, as_err *err);

/* Removes the lock if this process holds it. */
int lock_release(const char *lock_path, as_err *err);

/* This host's name (gethostname), for locks, status and provenance. */
const char *lock_hostname(void);

#endif
