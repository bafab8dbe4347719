/* lockfile.h -- one writer per results file (OUT.h5.lock).
 *
 * HDF5's own file locks fail on some cluster file systems (NFS, Lustre) and are
 * turned off, so the store keeps writers apart itself.
 *
 * The lock is a kernel lock: the writer opens OUT.h5.lock (creating it if need be)
 * and takes an exclusive open-file-description lock on it (fcntl F_OFD_SETLK),
 * which it holds for the run's lifetime and which the kernel drops when the
 * process dies, however it dies. Whoever gets the kernel lock owns the output;
 * everyone else is refused. Taking over a stale lock is therefore atomic: of two
 * runs that find the same stale file, exactly one gets the kernel lock, and the
 * loser is refused even if it reads the stale text before the winner rewrites it.
 * Release unlinks the file while still holding the lock; a waiter that opened the
 * old file notices (its descriptor no longer names the path) and starts over.
 *
 * The file's text says who holds it, for messages and `attnsweep status`:
 *   host=, pid=, start_time= (field 22 of /proc/PID/stat: clock ticks after boot),
 *   boot_id= (/proc/sys/kernel/random/boot_id), slurm_job_id=, started= (ISO 8601).
 * pid + start time + boot id identify a process even after its pid was reused.
 *
 * Refused even when the kernel lock is free (the kernel cannot see these holders):
 *   - a lock file naming another host: on a file system whose locks are only local
 *     (NFS with local_lock, some parallel file systems), a live writer elsewhere
 *     would be invisible; the message says to remove the file if that run is dead;
 *   - a lock file naming a live process of this host and boot (same pid, same start
 *     time) that holds no kernel lock (a writer on a file system without locks).
 * Where the file system has no locks at all (fcntl fails with ENOLCK, EINVAL,
 * EOPNOTSUPP), the lock falls back to the file alone: created with O_EXCL, stale when
 * its process is gone (pid dead, or alive with another start time or boot id). That
 * fallback cannot make a takeover atomic; such file systems get the old guarantee. */
#ifndef ATTNSWEEP_LOCKFILE_H
#define ATTNSWEEP_LOCKFILE_H

#include <sys/types.h>

#include "errors.h"

typedef struct {
    char host[256];
    long pid;
    unsigned long long start_time; /* 0: not recorded (a lock file of an older attnsweep) */
    char boot_id[64];              /* "": not recorded */
    char slurm_job_id[64];
    char started[64]; /* ISO 8601 UTC */
} lock_info;

/* Reads a lock file. Returns 0, or -1 when absent or unreadable. */
int lock_read(const char *lock_path, lock_info *info, as_err *err);

/* By the text alone: 1 when the holder is on this host and boot and its pid is alive
 * with the recorded start time, 0 when it is on this host and that process is gone,
 * -1 when it is on another host (unknown). */
int lock_holder_alive(const lock_info *info);

/* Is the output in use? 1 when a process holds the kernel lock on lock_path (or, by
 * the text, a live holder the kernel cannot see: see above), 0 when the lock is
 * absent or stale, -1 when it names another host and the kernel lock is free
 * (unknown). Fills info when the file is readable (else zeroes it). Takes no lock. */
int lock_in_use(const char *lock_path, lock_info *info);

/* -1 with the "in use" message of lock_acquire when lock_in_use(lock_path) is 1, else 0.
 * Takes no lock. */
int lock_refuse_if_in_use(const char *lock_path, as_err *err);

/* Takes the lock (replacing a stale one) and keeps it until lock_release. *fd gets
 * the descriptor that holds it (-1 in the fallback without kernel locks).
 * *replaced_stale (may be NULL) tells whether a stale lock was taken over. */
int lock_acquire(const char *lock_path, int *fd, int *replaced_stale, as_err *err);

/* Removes the lock if this process holds it and closes fd (which may be -1). */
int lock_release(const char *lock_path, int fd, as_err *err);

/* This host's name (gethostname), for locks, status and provenance. */
const char *lock_hostname(void);

#endif
