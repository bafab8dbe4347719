#!/usr/bin/python3
"""The store never drops or mixes finished work, through the
real `attnsweep_test` (the program with the store's test hooks, src/store/testhook.h):

  journal_flip_middle   one flipped payload byte in the middle of the journal: every other
                        record is kept, only that cell is computed again, a warning names the
                        bytes on stderr and in /provenance, the journal is not truncated
  journal_cut_middle    100 bytes cut out of a record in the middle: the same
  journal_identity      a damaged header or config record (the journal's identity): refused
                        in one line, no file changed
  lock_race             two runs take over one stale lock at once, the race held open by the
                        lock_won hook: exactly one wins, the other is refused
  lock_overwritten      the lock file of a live run is rewritten to name a dead process: a
                        second run is still refused (the kernel lock decides, not the text)
  lock_pid_reused       a lock whose pid now belongs to another live process (other start
                        time, or other boot): taken over
  lock_other_host       a lock of another host: refused, the message says how to remove it
  merge_killed          a merge SIGKILLed after writing OUT.h5.journal.merge.PID: the next
                        merge, or the next run, removes it
  status_no_journal     `status` without the journal: counts and L lines agree, and it says
                        the journal is missing
  chunk_flip_compressed, chunk_flip_plain
                        a byte flipped in a stored chunk of a finished, compacted output:
                        h5py raises, status says damaged, the resume computes exactly that
                        cell again and the file equals an undisturbed run
  checksum_form_kept    an output from before checksums keeps its form when extended; its
                        damage is still found (the journal's CRC-32)
  merge_damaged_shard   merge refuses a shard with a damaged chunk, and the command its
                        message names repairs the shard so the merge then succeeds

Every wait is for a state (a hook's phase line, a process's exit), never a sleep.

usage: test_store_recovery.py ATTNSWEEP_TEST MODEL_DIR SCRATCH [case ...]
"""
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, same_values, summary, values, wait_for_phase

BIN, MODEL, SCRATCH = sys.argv[1:4]
BIN, MODEL, SCRATCH = os.path.abspath(BIN), os.path.abspath(MODEL), os.path.abspath(SCRATCH)
ONLY = set(sys.argv[4:])
HEADER, RECORD = 256, 80  # include/store/journal.h
JR_CONFIG, JR_COMMIT = 1, 3


def setup(name, shards=False):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = np.random.default_rng(3)
    np.save(f"{d}/tokens.npy", rng.integers(0, 50257, size=400).astype("<u2"))
    with open(f"{d}/a.cfg", "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 3; offset = 0; stride = 64; }};
grid = {{ L = [16, 32, 64]; N = [1, 2, 4]; T = [0.1, 8.0]; eps = [1e-3];
         normalizer = ["softmax"]; }};
output = "out.h5";
runtime = {{ commit_every = 2; }};
""")
    return d


def cli(args, d, env=None, **kw):
    return subprocess.run([BIN] + args, cwd=d, env=env or ENV, capture_output=True, text=True,
                          timeout=300, **kw)


def start(args, d, env):
    return subprocess.Popen([BIN] + args, cwd=d, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def hook_env(d, hold=None, delay_ms=0):
    env = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=f"{d}/phases", ATTNSWEEP_TEST_RELEASE=f"{d}/release")
    if hold:
        env["ATTNSWEEP_TEST_HOLD"] = hold
    if delay_ms:
        env["ATTNSWEEP_TEST_COMMIT_DELAY_MS"] = str(delay_ms)
    return env


def wait_phase(d, phase, proc):
    """Waits until the hook logged `phase`, or the process exited (then False)."""
    while True:
        try:
            with open(f"{d}/phases") as f:
                if any(line.split()[1:] == [phase] for line in f):
                    return True
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            return False
        time.sleep(0.02)


def release(d):
    open(f"{d}/release", "w").close()


_reference = {}


def reference():
    """Values of an undisturbed run of the config (made once)."""
    if not _reference:
        d = setup("reference")
        p = cli(["run", "a.cfg"], d)
        check(p.returncode == 0, f"reference run: exit {p.returncode}: {p.stderr[-300:]}")
        _reference["path"] = f"{d}/out.h5"
    return _reference["path"]


def one_line(p):
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    return lines[0] if len(lines) == 1 else f"<{len(lines)} lines: {p.stderr!r}>"


def records(path):
    """(offset, type, window, L, status, payload_len) of each record, parsed here from
    journal.h's layout, not through attnsweep's code."""
    data = open(path, "rb").read()
    out, at = [], HEADER
    while at + RECORD <= len(data):
        _magic, typ, window, L, status = struct.unpack_from("<IIiiI", data, at)
        (plen,) = struct.unpack_from("<Q", data, at + 64)
        out.append((at, typ, window, L, status, plen))
        at += RECORD + plen
    return out


def attempts_by_cell(path):
    with h5py.File(path, "r") as f:
        att, Ls = f["attempts"][0], list(f["L"][()])  # one model
    return {(w, int(Ls[l])): int(att[w, l]) for w in range(att.shape[0]) for l in range(att.shape[1])}


def tree(d):
    out = {}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            out[name] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


# ---- item 3: damage in the middle of the journal ----

# The damage cases test the resync of a journal that still holds every value, so their
# runs keep it whole (no compaction); the last run compacts, which drops the damaged
# bytes for good (the note stays in /provenance).
WHOLE = dict(ENV, ATTNSWEEP_TEST_COMPACT_BYTES="0")


def damaged_resume(name, damage):
    d = setup(name)
    p = cli(["run", "a.cfg"], d, WHOLE)
    check(p.returncode == 0, f"{name}: first run exit {p.returncode}: {p.stderr[-300:]}")
    jpath = f"{d}/out.h5.journal"
    commits = [r for r in records(jpath) if r[1] == JR_COMMIT and r[4] == 1]
    check(len(commits) == 9, f"{name}: 9 commit records, got {len(commits)}")
    victim = commits[len(commits) // 2]
    data = bytearray(open(jpath, "rb").read())
    data = damage(data, victim)
    open(jpath, "wb").write(data)
    p = cli(["run", "a.cfg"], d, WHOLE)
    check(p.returncode == 0, f"{name}: resume exit {p.returncode}: {p.stderr[-300:]}")
    check("damaged record" in p.stderr and str(victim[0]) in p.stderr and "out.h5.journal" in p.stderr,
          f"{name}: stderr names the damage and where (byte {victim[0]}): {p.stderr!r}")
    after = open(jpath, "rb").read()
    check(after[:len(data)] == bytes(data), f"{name}: the journal was cut or rewritten (kept "
          f"{len(after)} bytes of {len(data)} + appended)")
    same_values(reference(), f"{d}/out.h5", f"{name}: resumed file vs undisturbed run")
    att = attempts_by_cell(f"{d}/out.h5")
    again = [c for c, n in att.items() if n != 1]
    check(again == [(victim[2], victim[3])], f"{name}: only cell {victim[2:4]} may be computed "
          f"again, these were: {again}")
    with h5py.File(f"{d}/out.h5", "r") as f:
        notes = [n.decode() if isinstance(n, bytes) else n for n in f["provenance/note"][()]] \
            if "note" in f["provenance"] else []
    check(notes and "damaged record" in notes[-1] and str(victim[0]) in notes[-1],
          f"{name}: /provenance/note of the resuming segment names the damage: {notes}")
    # the damage stays in the file and is found again, but nothing is recomputed
    p = cli(["run", "a.cfg"], d, WHOLE)
    check(p.returncode == 0 and "damaged record" in p.stderr and "9 before this run)" in p.stderr,
          f"{name}: third run: exit {p.returncode}: {p.stderr[-400:]!r}")
    # compaction (the default) rewrites the journal without the damaged bytes
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0 and "9 before this run)" in p.stderr, f"{name}: compacting run: "
          f"exit {p.returncode}: {p.stderr[-400:]!r}")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0 and "damaged record" not in p.stderr and "9 before this run)" in p.stderr,
          f"{name}: after compaction the damage is gone: {p.stderr[-400:]!r}")
    check(all(r[5] == 16 for r in records(jpath) if r[1] == JR_COMMIT),
          f"{name}: every commit compacted (16-byte digests)")
    same_values(reference(), f"{d}/out.h5", f"{name}: compacted file vs undisturbed run")


def case_journal_flip_middle():
    def flip(data, victim):
        at = victim[0] + RECORD + 10
        data[at] ^= 0xFF
        return data
    damaged_resume("journal_flip_middle", flip)


def case_journal_cut_middle():
    def cut(data, victim):
        at = victim[0] + RECORD + victim[5] // 2
        return data[:at] + data[at + 100:]
    damaged_resume("journal_cut_middle", cut)


def case_journal_identity():
    for what in ("header", "config record"):
        d = setup("journal_identity")
        p = cli(["run", "a.cfg"], d)
        check(p.returncode == 0, f"identity: first run exit {p.returncode}")
        jpath = f"{d}/out.h5.journal"
        data = bytearray(open(jpath, "rb").read())
        config = [r for r in records(jpath) if r[1] == JR_CONFIG][0]
        data[100 if what == "header" else config[0] + 20] ^= 0x55
        open(jpath, "wb").write(data)
        before = tree(d)
        p = cli(["run", "a.cfg"], d)
        check(p.returncode == 1 and "out.h5.journal" in one_line(p),
              f"damaged {what}: refused in one line naming the journal: exit {p.returncode}, "
              f"{one_line(p)!r}")
        check(tree(d) == before, f"damaged {what}: files changed")


# ---- item 4: atomic stale-lock takeover; item 9: pid reuse ----

def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def write_lock(path, text):
    # in place (same inode), as a racing process or a human editor would
    with open(path, "a+") as f:
        f.seek(0)
        f.truncate()
        f.write(text)


def case_lock_race():
    d = setup("lock_race")
    host = socket.gethostname()
    write_lock(f"{d}/out.h5.lock", f"host={host}\npid={dead_pid()}\nslurm_job_id=\nstarted=x\n")
    a = start(["run", "a.cfg"], d, hook_env(d, hold="lock_won", delay_ms=20))
    held = wait_phase(d, "lock_won", a)
    check(held, "run A never stopped at the lock_won hook (it has taken the stale lock and not "
          "yet written its name)")
    b = cli(["run", "a.cfg"], d)
    check(b.returncode == 1 and "in use" in one_line(b) and "out.h5.lock" in one_line(b),
          f"run B, racing A for the stale lock, is refused: exit {b.returncode}: {one_line(b)!r}")
    release(d)
    out, err = a.communicate(timeout=300)
    check(a.returncode == 0, f"run A finishes: exit {a.returncode}: {err[-300:]}")
    same_values(reference(), f"{d}/out.h5", "lock race: the winner's file vs undisturbed run")
    check(not os.path.exists(f"{d}/out.h5.lock"), "lock released at the end")


def case_lock_overwritten():
    d = setup("lock_overwritten")
    a = start(["run", "a.cfg"], d, hook_env(d, hold="data_flushed", delay_ms=50))
    check(wait_phase(d, "data_flushed", a), "run A never reached its first commit")
    write_lock(f"{d}/out.h5.lock", f"host={socket.gethostname()}\npid={dead_pid()}\n")
    b = cli(["run", "a.cfg"], d)
    check(b.returncode == 1 and "in use" in one_line(b),
          f"second run refused although the lock text names a dead pid: exit {b.returncode}: "
          f"{one_line(b)!r}")
    release(d)
    out, err = a.communicate(timeout=300)
    check(a.returncode == 0, f"run A finishes: exit {a.returncode}: {err[-300:]}")
    same_values(reference(), f"{d}/out.h5", "lock overwritten: file vs undisturbed run")


def proc_start(pid):
    s = open(f"/proc/{pid}/stat").read()
    return int(s[s.rindex(")") + 2:].split()[19])


def case_lock_pid_reused():
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    host = socket.gethostname()
    for what, text in (
            ("other start time", f"host={host}\npid=1\nstart_time={proc_start(1) + 12345}\nboot_id={boot}\n"),
            ("other boot", f"host={host}\npid=1\nstart_time={proc_start(1)}\nboot_id=00000000-dead\n")):
        d = setup("lock_pid_reused")
        write_lock(f"{d}/out.h5.lock", text)
        p = cli(["run", "a.cfg"], d)
        check(p.returncode == 0, f"lock of pid 1 with {what} is stale and taken over: exit "
              f"{p.returncode}: {p.stderr[-300:]!r}")


def case_lock_other_host():
    d = setup("lock_other_host")
    write_lock(f"{d}/out.h5.lock", "host=elsewhere.example\npid=4242\nstarted=2026-01-01T00:00:00Z\n")
    before = tree(d)
    p = cli(["run", "a.cfg"], d)
    msg = one_line(p)
    check(p.returncode == 1 and "elsewhere.example" in msg and "rm '" in msg and "out.h5.lock" in msg,
          f"another host's lock refused, saying how to remove it: exit {p.returncode}: {msg!r}")
    check(tree(d) == before, "another host's lock: files changed")


# ---- item 8: a killed merge's temporary journal ----

def case_merge_killed():
    for then in ("merge", "run"):
        d = setup("merge_killed")
        for i in range(2):
            p = cli(["run", "a.cfg", "--shard", f"{i}/2"], d)
            check(p.returncode == 0, f"shard {i}: exit {p.returncode}: {p.stderr[-300:]}")
        shards = ["out.shard-0-of-2.h5", "out.shard-1-of-2.h5"]
        m = start(["merge"] + shards, d, hook_env(d, hold="merge_journal_written"))
        check(wait_phase(d, "merge_journal_written", m), "merge never stopped after writing its journal")
        leaked = [f for f in os.listdir(d) if ".journal.merge." in f]
        check(len(leaked) == 1, f"the paused merge has its temporary journal: {leaked}")
        m.kill()
        m.communicate()
        if then == "merge":
            p = cli(["merge"] + shards, d)
        else:
            p = cli(["run", "a.cfg"], d)
        check(p.returncode == 0, f"{then} after a killed merge: exit {p.returncode}: {p.stderr[-300:]}")
        left = [f for f in os.listdir(d) if ".journal.merge." in f]
        check(not left, f"{then} after a killed merge removes its temporary journal: {left}")
        same_values(reference(), f"{d}/out.h5", f"{then} after a killed merge vs undisturbed run")


# ---- item 11: status without the journal ----

def case_status_no_journal():
    d = setup("status_no_journal")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"run: exit {p.returncode}")
    os.unlink(f"{d}/out.h5.journal")
    s = cli(["status", "out.h5"], d)
    lines = s.stdout.splitlines()
    per_L = [l for l in lines if l.strip().startswith("L=")]
    check(lines and "3/3 windows done" in lines[0] and "cells (window x L) 9/9 done" in lines[0],
          f"status total: {s.stdout!r}")
    check(len(per_L) == 3 and all("3/3 windows done" in l for l in per_L),
          f"status L lines agree with the total: {per_L}")
    check("journal" in s.stdout and "missing" in s.stdout, f"status says the journal is missing: {s.stdout!r}")


# ---- a kill at every step of the journal's compaction ----

COMPACT_PHASES = ["compact_synced", "compact_verified", "compact_writing", "compact_written",
                  "compact_renamed"]


def case_compact_killed():
    """SIGKILL the writer held at each step of a compaction -- the one at the close of a
    finished run, and one in the middle of a run (ATTNSWEEP_TEST_COMPACT_BYTES=1: after
    every batch) -- then resume: no committed cell is lost or computed again (attempts
    stay 1), the file equals an undisturbed run, the temporary journal is gone, and the
    journal ends compacted."""
    for when in ["close", "mid_run"]:
        for phase in COMPACT_PHASES:
            name = f"compact_killed_{when}_{phase}"
            d = setup(name)
            env = hook_env(d, hold=phase)
            if when == "mid_run":
                env["ATTNSWEEP_TEST_COMPACT_BYTES"] = "1"  # else the first compaction is the close's
            p = start(["run", "a.cfg"], d, env)
            held = wait_phase(d, phase, p)
            check(held, f"{name}: the writer reached {phase}: {p.communicate()[1][-300:] if not held else ''}")
            if not held:
                continue
            p.kill()
            p.communicate()
            jpath = f"{d}/out.h5.journal"
            leftovers = [f for f in os.listdir(d) if ".journal.compact." in f]
            if phase in ("compact_writing", "compact_written"):
                check(len(leftovers) == 1, f"{name}: the new journal is beside the old: {leftovers}")
            whole = [r for r in records(jpath) if r[1] == JR_COMMIT and r[4] == 1 and r[5] != 16]
            if phase == "compact_renamed":
                check(not whole, f"{name}: renamed: the journal is the compacted one")
            else:
                check(whole, f"{name}: before the rename the old journal (whole) is in place")
            p = cli(["run", "a.cfg"], d)
            check(p.returncode == 0, f"{name}: resume exit {p.returncode}: {p.stderr[-300:]}")
            if when == "close":
                check("9 before this run)" in p.stderr, f"{name}: all 9 cells kept: {p.stderr[-300:]!r}")
            att = attempts_by_cell(f"{d}/out.h5")
            check(all(n == 1 for n in att.values()), f"{name}: no cell computed twice: {att}")
            same_values(reference(), f"{d}/out.h5", f"{name}: resumed file vs undisturbed run")
            check(not [f for f in os.listdir(d) if ".journal.compact." in f],
                  f"{name}: the temporary journal is removed")
            check(all(r[5] == 16 for r in records(jpath) if r[1] == JR_COMMIT and r[4] == 1),
                  f"{name}: the journal ends compacted")


def case_disk_full_compacted():
    """A disk that fills up after the journal was compacted: the failed commit gives up the
    8 MiB OUT.h5.reserve instead of truncating the view, so the compacted cells (whose values
    only the view holds) survive: after space is freed the resume computes again only the
    batch whose commit failed, and the file equals an undisturbed run."""
    name = "disk_full_compacted"
    d = setup(name)
    disk = f"{d}/disk"
    os.makedirs(disk)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", disk],
                      capture_output=True).returncode != 0:
        print(f"SKIPPED {name}: cannot mount a tmpfs (not root?)", flush=True)
        return
    try:
        # cells of ~0.3 MB, so that a commit needs new file space (tiny ones fit in blocks
        # HDF5 allocated before)
        grid = ["--set", "grid.N=1:48", "--set", 'grid.T={min=0.01; max=100.0; count=24; spacing="log";}']
        ref = cli(["run", "a.cfg", "--set", 'output="ref.h5"'] + grid, d)
        check(ref.returncode == 0, f"{name}: reference run exit {ref.returncode}: {ref.stderr[-300:]}")
        sets = ["--set", 'output="disk/out.h5"'] + grid
        # One rank computes and commits (commit_every = 2): batch 1 is committed, compacted
        # (after every batch here) and its status written before cell 4 is dispatched; the
        # next write is batch 2's HDF5 data.
        env = hook_env(d, hold="dispatch_written 4")
        env["ATTNSWEEP_TEST_COMPACT_BYTES"] = "1"
        p = start(["run", "a.cfg"] + sets, d, env)
        held = wait_for_phase(f"{d}/phases", "dispatch_written", 4, p)
        check(held, f"{name}: the writer reached the dispatch of batch 2's second cell")
        done_before, compacted = set(), 0
        if held:
            check(os.path.exists(f"{disk}/out.h5.reserve"), f"{name}: a running writer keeps a reserve")
            for r in records(f"{disk}/out.h5.journal"):
                if r[1] == JR_COMMIT and r[4] == 1:
                    done_before.add((r[2], r[3]))
                    compacted += r[5] == 16
            check(compacted > 0, f"{name}: cells done before the disk filled are compacted ({compacted})")
            # the disk fills up under the writer, to the last byte
            fd = os.open(f"{disk}/filler", os.O_WRONLY | os.O_CREAT, 0o644)
            for size in (1 << 20, 1 << 12, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
            os.close(fd)
            release(d)
            _, err = p.communicate(timeout=300)
            check(p.returncode != 0 and "disk full" in err,
                  f"{name}: the full disk is an error that says so: exit {p.returncode}: {err[-300:]!r}")
        os.remove(f"{disk}/filler")
        p = cli(["run", "a.cfg"] + sets, d)
        check(p.returncode == 0, f"{name}: resume exit {p.returncode}: {p.stderr[-300:]}")
        att = attempts_by_cell(f"{disk}/out.h5")
        check(done_before and all(att[c] == 1 for c in done_before),
              f"{name}: the compacted cells done before the disk filled are not computed again: "
              f"{ {c: att[c] for c in done_before} }")
        check(not os.path.exists(f"{disk}/out.h5.reserve"), f"{name}: the reserve is removed at close")
        same_values(f"{d}/ref.h5", f"{disk}/out.h5", f"{name}: resumed file vs undisturbed run")
    finally:
        subprocess.run(["umount", "-l", disk], capture_output=True)


# ---- stored chunks carry checksums (docs/reliability.md "Stored chunks are checked") ----

def flip_chunk_byte(path, var, w, l):
    """Flips one byte in the middle of the stored chunk of cell (model 0, w, l) of var, in
    the file itself (the chunk's address from h5py's chunk index), and returns its offset."""
    with h5py.File(path, "r") as f:
        ds = f[var]
        info = ds.id.get_chunk_info_by_coord((0, w, l) + (0,) * (ds.ndim - 3))
        at = info.byte_offset + info.size // 2
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x01]))
    return at


def chunk_flip(name, sets):
    """A finished, compacted output (the close compacts: the view holds the only copy of the
    values) with one byte flipped inside one cell's chunk: h5py refuses to read it, `status`
    says damaged, the resume computes exactly that cell again, and the file ends with the
    values of an undisturbed run."""
    d = setup(name)
    p = cli(["run", "a.cfg"] + sets, d)
    check(p.returncode == 0, f"{name}: first run exit {p.returncode}: {p.stderr[-300:]}")
    check(all(r[5] == 16 for r in records(f"{d}/out.h5.journal") if r[1] == JR_COMMIT and r[4] == 1),
          f"{name}: the finished output is compacted")
    with h5py.File(f"{d}/out.h5", "r") as f:
        check(f["dist_true"].fletcher32 and f["ks_pvalue"].fletcher32,
              f"{name}: the cell datasets carry the Fletcher32 filter")
        Ls = list(f["L"][()])
    w, l = 1, 1
    flip_chunk_byte(f"{d}/out.h5", "dist_true", w, l)
    with h5py.File(f"{d}/out.h5", "r") as f:
        try:
            f["dist_true"][0, w, l]
            raised = ""
        except OSError as e:
            raised = str(e)
        check("checksum" in raised.lower() or "filter" in raised.lower(),
              f"{name}: h5py reading the damaged cell raises (not other numbers): {raised!r}")
        f["dist_true"][0, 0, 0]  # the other cells read
    s = cli(["status", "out.h5"], d)
    check(s.returncode == 3 and "DAMAGED: 1 of 9 done cells" in s.stdout,
          f"{name}: status says one cell is damaged: exit {s.returncode}: {s.stdout[-500:]!r}")
    p = cli(["run", "a.cfg"] + sets, d)
    notes = [x for x in p.stderr.splitlines() if "its checksum" in x or "their checksum" in x]
    check(p.returncode == 0 and len(notes) == 1 and "1 done cell failed its checksum" in notes[0],
          f"{name}: the resume says in one line that 1 cell is computed again: exit "
          f"{p.returncode}: {p.stderr[-500:]!r}")
    att = attempts_by_cell(f"{d}/out.h5")
    again = [c for c, n in att.items() if n != 1]
    check(again == [(w, int(Ls[l]))], f"{name}: exactly the damaged cell is computed again: {again}")
    same_values(reference(), f"{d}/out.h5", f"{name}: repaired file vs undisturbed run")
    s = cli(["status", "out.h5"], d)
    check(s.returncode == 0 and "9 done cells' stored chunks are intact" in s.stdout,
          f"{name}: status after the repair: exit {s.returncode}: {s.stdout[-300:]!r}")


def case_chunk_flip_compressed():
    chunk_flip("chunk_flip_compressed", [])


def case_chunk_flip_plain():
    chunk_flip("chunk_flip_plain", ["--set", "runtime.compress=false"])


def case_checksum_form_kept():
    """An output made before checksums (the test build's ATTNSWEEP_TEST_NO_CHECKSUMS=1) keeps
    its form when resumed and extended (the rebuild follows the old view; the workers then
    send chunks without checksums), and its values equal an undisturbed run's. A flipped byte
    in it is still found on resume, by the journal's CRC-32 of the cell."""
    name = "checksum_form_kept"
    d = setup(name)
    old = dict(ENV, ATTNSWEEP_TEST_NO_CHECKSUMS="1")
    p = cli(["run", "a.cfg", "--set", "windows.count=2"], d, old)
    check(p.returncode == 0, f"{name}: first run exit {p.returncode}: {p.stderr[-300:]}")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"{name}: extension exit {p.returncode}: {p.stderr[-300:]}")
    with h5py.File(f"{d}/out.h5", "r") as f:
        check(not f["dist_true"].fletcher32 and f["dist_true"].compression == "gzip",
              f"{name}: the extended output keeps its form (compressed, no checksum): "
              f"{f['dist_true'].compression} fletcher32={f['dist_true'].fletcher32}")
    same_values(reference(), f"{d}/out.h5", f"{name}: extended file vs undisturbed run")
    flip_chunk_byte(f"{d}/out.h5", "dist_true", 2, 0)
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0 and "1 done cell failed its checksum" in p.stderr,
          f"{name}: the damage is found without a Fletcher32 too: {p.stderr[-400:]!r}")
    same_values(reference(), f"{d}/out.h5", f"{name}: repaired file vs undisturbed run")


def case_merge_damaged_shard():
    """merge refuses a shard with a damaged compacted cell, and its advice works: the command
    it names computes the cell again, and the merge then equals an undisturbed run."""
    name = "merge_damaged_shard"
    d = setup(name)
    for i in range(2):
        p = cli(["run", "a.cfg", "--shard", f"{i}/2"], d)
        check(p.returncode == 0, f"{name}: shard {i}: exit {p.returncode}: {p.stderr[-300:]}")
    shards = ["out.shard-0-of-2.h5", "out.shard-1-of-2.h5"]
    with h5py.File(f"{d}/{shards[1]}", "r") as f:
        st = f["status"][0]
        w, l = [(w, l) for w in range(st.shape[0]) for l in range(st.shape[1]) if st[w, l] == 1][0]
    flip_chunk_byte(f"{d}/{shards[1]}", "grad_fd", w, l)
    p = cli(["merge"] + shards, d)
    msg = one_line(p)
    check(p.returncode != 0 and shards[1] in msg and "attnsweep run" in msg,
          f"{name}: merge refuses the damaged shard and names what to run: exit {p.returncode}: {msg!r}")
    advice = msg.split("`")[1] if msg.count("`") >= 2 else ""
    check(advice == "attnsweep run CONFIG --shard 1/2", f"{name}: the advice is the shard's command: {advice!r}")
    if advice.startswith("attnsweep run "):
        p = cli(advice.replace("CONFIG", "a.cfg").split()[1:], d)
        check(p.returncode == 0 and "1 done cell failed its checksum" in p.stderr,
              f"{name}: the advised run computes the cell again: exit {p.returncode}: {p.stderr[-400:]!r}")
    p = cli(["merge"] + shards, d)
    check(p.returncode == 0, f"{name}: merge after the advised run: exit {p.returncode}: {p.stderr[-300:]}")
    same_values(reference(), f"{d}/out.h5", f"{name}: merged file vs undisturbed run")


CASES = [case_journal_flip_middle, case_journal_cut_middle, case_journal_identity, case_lock_race,
         case_lock_overwritten, case_lock_pid_reused, case_lock_other_host, case_merge_killed,
         case_status_no_journal, case_compact_killed, case_disk_full_compacted,
         case_chunk_flip_compressed, case_chunk_flip_plain, case_checksum_form_kept,
         case_merge_damaged_shard]

if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    run_cases(CASES, ONLY)
    sys.exit(summary("test_store_recovery " + " ".join(sorted(ONLY))))
