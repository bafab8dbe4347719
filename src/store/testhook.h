/* testhook.h -- the store's test-only hooks, compiled into the test build alone.
 *
 * Crash and race tests must stop the writer at a chosen point -- between two steps
 * of the commit protocol, while it holds a freshly won lock, while a merge has
 * written its temporary journal -- and kill it there or let a second process in.
 * st_test_phase(PHASE) marks such a point.
 *
 * The production program (build/attnsweep, libattnsweep_store) is compiled without
 * AS_TEST_HOOKS: st_test_phase is then an empty inline function and no
 * ATTNSWEEP_TEST_* variable is read anywhere. CMakeLists.txt also builds
 * build/attnsweep_test, the same program from the same sources with
 * AS_TEST_HOOKS=1 (testhook.c); the tests that need the hooks drive that binary.
 *
 * In the test build, at each phase:
 *   ATTNSWEEP_TEST_PHASE_FILE=F       append "SEQ PHASE\n" to F (F is opened per line,
 *                                     O_APPEND, so the test can watch it)
 *   ATTNSWEEP_TEST_COMMIT_DELAY_MS=ms then sleep ms (every phase, not only commits;
 *                                     the name is the first use's)
 *   ATTNSWEEP_TEST_HOLD=PHASE         at that phase, wait until the file named by
 *   ATTNSWEEP_TEST_RELEASE=R          R exists (the test creates it, or kills us);
 *   ATTNSWEEP_TEST_HOLD="PHASE K"     the same at the K-th arrival at PHASE only (each
 *                                     arrival is reported, so the test can count them)
 * With none of them set nothing happens. st_test_number(NAME) is the integer value of
 * the environment variable NAME, -1 when unset (production: always -1); the store reads
 *   ATTNSWEEP_TEST_COMPACT_BYTES=n    compact the journal once n payload bytes are
 *                                     uncompacted (0: never, not even at close)
 *   ATTNSWEEP_TEST_NO_CHECKSUMS=1     a view created now has no Fletcher32 filter, as
 *                                     views were before checksums (store.c)
 * st_test_fail(POINT) is 1 when ATTNSWEEP_TEST_FAIL=POINT (production: always 0): the
 * store then fails at that point as a full disk or an I/O error would, through the same
 * error path. Points:
 *   close_compact      store_close's compaction of the journal (store.c): the close fails,
 *                      the journal stays whole (what a disk full during it leaves)
 *   commit             every commit of cells (commit.c), before anything is written
 * Phases:
 *   dispatch_written   a dispatch record appended, not synced     (store.c)
 *   data_flushed, status_flushed, journal_written (before the fsync),
 *   journal_synced     the steps of store_commit_batch            (store.c)
 *   compact_synced     compaction: the view is flushed and fsynced   (compact.c)
 *   compact_verified   ... every cell to compact was read back and matched its checksum
 *   compact_writing    ... the new journal OUT.h5.journal.compact.PID holds its first
 *                      compacted record (not complete, not synced)
 *   compact_written    ... the new journal is complete and fsynced, not renamed yet
 *   compact_renamed    ... renamed over OUT.h5.journal (the old one is gone)
 *   journal_created    a new output's journal holds its header only (no config record
 *                      yet), the lock is ours                      (store.c)
 *   lock_won           the kernel lock on OUT.h5.lock is ours, our identity is not
 *                      written into the file yet                   (lockfile.c)
 *   merge_journal_written  merge wrote OUT.h5.journal.merge.PID, not renamed yet
 *                                                                  (merge.c)
 *   opened             store_open is done (repair, lock, status): the end of start-up
 *                                                                  (store.c) */
#ifndef ATTNSWEEP_STORE_TESTHOOK_H
#define ATTNSWEEP_STORE_TESTHOOK_H

#ifdef AS_TEST_HOOKS
void st_test_phase(const char *phase);
long long st_test_number(const char *name);
int st_test_fail(const char *point);
#else
static inline void st_test_phase(const char *phase) { (void)phase; }
static inline long long st_test_number(const char *name) { (void)name; return -1; }
static inline int st_test_fail(const char *point) { (void)point; return 0; }
#endif

#endif
