#!/usr/bin/python3
"""Crash torture test: SIGKILL a 2-rank `attnsweep run` (the
whole MPI job: mpirun and every rank, each in its own process group, so
the job is found by its session) at 24 chosen moments -- at start-up, right
after a dispatch record was appended, and inside each step of the store's
commit protocol -- and resume after each kill.

Every kill is placed by an event, never by a delay: the
store's test hook (src/store/testhook.h, compiled into attnsweep_test only) appends
"SEQ PHASE" to ATTNSWEEP_TEST_PHASE_FILE at each arrival at the phase named by
ATTNSWEEP_TEST_HOLD="PHASE K" and holds the writer at the K-th until killed (the
release file ATTNSWEEP_TEST_RELEASE names is never created). The harness
waits for that line, then kills: the kill lands between the steps it chose
(dispatch record appended / data flushed / status flushed / journal written but
not fsynced / fsynced) however loaded the machine is. A start-up kill holds the
writer at "opened" (store_open done) and kills either as soon as a rank process
exists (MPI start, model load, store repair) or once "opened" is reported.

Checks, each able to fail:
  * every run either was killed by us or exited 0 (never an error exit);
  * each kill landed in the phase planned for it (the hold makes this exact);
  * nothing of a killed job survives its process group;
  * the final file equals an uninterrupted run bit for bit in every variable
    but wall_time, rank and attempts (attempts legitimately counts re-runs);
  * no cell was computed more often than 1 + the kills that happened while it
    was in flight. In flight at a kill = its last journal record appended by
    the killed run is a DISPATCH (parsed here, independently of the C code,
    from the journal's documented record layout, journal.h). The file's
    attempts must respect that bound and must equal the DISPATCH records the
    journal holds for the cell.

usage: test_torture.py ATTNSWEEP MODEL_DIR SCRATCH [KILLS]
"""
import collections
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, summary, values, wait_for_phase, write_tokens_config

BIN, MODEL, SCRATCH = sys.argv[1:4]
BIN, MODEL = os.path.abspath(BIN), os.path.abspath(MODEL)
KILLS = int(sys.argv[4]) if len(sys.argv) > 4 else 24
WINDOWS = 32  # more than the plan's kills can finish (checked in main)
PHASES = ["dispatch_written", "data_flushed", "status_flushed", "journal_written", "journal_synced"]
HUNG_S = 600  # only a hung run waits this long for a phase; no verdict depends on speed


# --- the journal, read independently (layout in include/store/journal.h) ----------
HEADER = 256
RECORD = 80
JR_DISPATCH, JR_COMMIT = 2, 3


def crc32(b):
    import zlib
    return zlib.crc32(b) & 0xFFFFFFFF


def journal_records(path):
    """The valid records: (type, window, L, status, attempt). Stops at the
    first record whose fields or payload fail their CRC or run past EOF."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    at = HEADER
    while at + RECORD <= len(data):
        rb = data[at:at + RECORD]
        magic, typ, window, L, status, attempt, rank, _pad = struct.unpack_from("<IIiiIIiI", rb, 0)
        payload_len, payload_crc, crc = struct.unpack_from("<QII", rb, 64)
        if crc != crc32(rb[:76]) or not 1 <= typ <= 5:
            break
        end = at + RECORD + payload_len
        if end > len(data) or crc32(data[at + RECORD:end]) != payload_crc:
            break
        out.append((typ, window, L, status, attempt))
        at = end
    return out


def in_flight(records):
    """Cells (window, L) whose last record in `records` is a DISPATCH."""
    last = {}
    for typ, w, L, _st, _a in records:
        if typ in (JR_DISPATCH, JR_COMMIT):
            last[(w, L)] = typ
    return {c for c, t in last.items() if t == JR_DISPATCH}


def session_pids(sid, zombies=False):
    """Live processes of session sid. mpirun puts every rank in its own
    process group, so the job is its session (we start mpirun with setsid)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid and (zombies or fields[0] != "Z"):
                    pids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return pids


def kill_job(p):
    """SIGKILL mpirun and every rank at once, then until none is left."""
    for _ in range(50):
        pids = session_pids(p.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    p.wait()
    deadline = time.time() + HUNG_S
    while time.time() < deadline:  # ranks reparented to init: wait until they are reaped too
        if not session_pids(p.pid, zombies=True):
            return True
        time.sleep(0.01)
    return False


def rank_started(sid):
    """A state reached at start-up: mpirun has started a rank of BIN."""
    for pid in session_pids(sid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == os.path.basename(BIN)[:15]:  # comm is cut at 15
                    return True
        except OSError:
            pass
    return False


def windows_kept_at_most(target, k):
    """Windows a run killed at the k-th `target` can have made durable (a commit is one window
    here): at most k - 1 before the k-th dispatch or inside the k-th commit, k after its fsync."""
    return 0 if target == "startup" else k if target == "journal_synced" else k - 1


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(11)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=64 * WINDOWS + 64).astype("<u2"))
    write_tokens_config(f"{SCRATCH}/ref.cfg", MODEL, "ref.h5", WINDOWS, 2)
    write_tokens_config(f"{SCRATCH}/t.cfg", MODEL, "t.h5", WINDOWS, 2)
    t0 = time.time()
    mpirun = ["mpirun", "-np", "2", "--oversubscribe", BIN, "run"]
    ref = subprocess.run(mpirun + ["ref.cfg"], env=ENV, cwd=SCRATCH, capture_output=True, text=True)
    check(ref.returncode == 0, f"reference run: exit {ref.returncode}: {ref.stderr[-400:]}")

    phase_file = f"{SCRATCH}/phase.log"
    journal = f"{SCRATCH}/t.h5.journal"
    r = random.Random(2026)
    # the plan: every phase at least 4 times, start-up 4 times, shuffled; each kill at the
    # k-th arrival at its phase (k small so every run makes little progress)
    targets = ["startup"] * 4 + PHASES * 4
    while len(targets) < KILLS:
        targets.append(r.choice(["startup"] + PHASES))
    r.shuffle(targets)
    plan = [(t, r.randint(1, 3 if t == "dispatch_written" else 2), r.random() < 0.5) for t in targets]
    bound = sum(windows_kept_at_most(t, k) for t, k, _ in plan)
    check(bound < WINDOWS, f"the plan cannot finish the sweep before its last kill ({bound} < {WINDOWS} windows)")
    landed = collections.Counter()
    kills_in_flight = collections.Counter()  # cell -> kills while it was in flight
    seen_records = 0
    finished = False
    for target, want, early in plan:
        if os.path.exists(phase_file):
            os.unlink(phase_file)
        hold = "opened 1" if target == "startup" else f"{target} {want}"
        env = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase_file, ATTNSWEEP_TEST_HOLD=hold,
                   ATTNSWEEP_TEST_RELEASE=f"{SCRATCH}/never-released")
        p = subprocess.Popen(mpirun + ["t.cfg"], env=env, cwd=SCRATCH, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + HUNG_S
        if target == "startup" and early:
            while p.poll() is None and not rank_started(p.pid) and time.time() < deadline:
                time.sleep(0.002)
        else:
            phase = "opened" if target == "startup" else target
            wait_for_phase(phase_file, phase, 1 if target == "startup" else want, p, HUNG_S)
        if p.poll() is not None:
            err = p.stderr.read().decode(errors="replace")
            p.wait()
            mine = [l for l in err.splitlines() if l.startswith(("attnsweep", "sweep"))]
            check(p.returncode == 0, f"run before kill '{target}' exited {p.returncode}: {mine or err[-400:]}")
            finished = p.returncode == 0
            break
        check(kill_job(p), "every process of the job died")
        p.stderr.close()
        try:
            with open(phase_file) as f:
                lines = f.read().split()
            at = lines[-1] if lines else "startup"
        except FileNotFoundError:
            at = "startup"
        at = "startup" if at == "opened" else at
        check(at == target, f"kill planned at {target} landed at {at}")
        landed[at] += 1
        if os.path.exists(journal):
            recs = journal_records(journal)
            for cell in in_flight(recs[seen_records:]):
                kills_in_flight[cell] += 1
            seen_records = len(recs)
    kills = sum(landed.values())

    fin = subprocess.run(mpirun + ["t.cfg"], env=ENV, cwd=SCRATCH, capture_output=True, text=True)
    mine = [l for l in fin.stderr.splitlines() if l.startswith(("attnsweep", "sweep"))]
    check(fin.returncode == 0, f"final resume: exit {fin.returncode}: {mine or fin.stderr[-400:]}")
    check(kills == len(plan), f"all {len(plan)} planned kills landed ({kills}; finished early: {finished})")
    for ph in ["startup"] + PHASES:
        check(landed[ph] >= 4, f"at least 4 kills landed in phase {ph} ({landed[ph]})")

    va, vb = values(f"{SCRATCH}/ref.h5"), values(f"{SCRATCH}/t.h5")
    check(va.keys() == vb.keys(), f"variables differ: {sorted(va.keys() ^ vb.keys())}")
    for k in sorted(va.keys() & vb.keys()):
        x, y = va[k], vb[k]
        if x.dtype.kind == "O":  # variable-length strings: compare the values
            same = x.shape == y.shape and list(x.ravel()) == list(y.ravel())
        else:
            same = x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        check(same, f"variable {k} differs from the uninterrupted run")

    with h5py.File(f"{SCRATCH}/t.h5", "r") as f:
        status, attempts = f["status"][0], f["attempts"][0]  # one model
        win_start = f["window"][()]
        Ls = f["L"][()]
    check((status == 1).all(), "every cell done")
    dispatches = collections.Counter()
    for typ, w, L, _s, _a in journal_records(journal):
        if typ == JR_DISPATCH:
            dispatches[(w, L)] += 1
    recomputed = over = mismatch = 0
    for wi in range(len(win_start)):
        for li, L in enumerate(Ls):
            a = int(attempts[wi, li])
            bound = 1 + kills_in_flight[(wi, int(L))]
            recomputed += a - 1
            if a > bound or a < 1:
                over += 1
                print(f"  cell (window {wi}, L {L}): attempts {a} > bound {bound}", flush=True)
            if a != dispatches[(wi, int(L))]:
                mismatch += 1
    check(over == 0, f"{over} cells computed more often than 1 + kills while in flight")
    check(mismatch == 0, f"{mismatch} cells whose attempts differ from their journal DISPATCH records")
    print(f"torture: {kills} kills landed ({', '.join(f'{k} {v}' for k, v in sorted(landed.items()))}); "
          f"{status.size} cells; attempts total {int(attempts.sum())}, max {int(attempts.max())}; "
          f"recomputations {recomputed}; cells in flight at a kill {sum(kills_in_flight.values())}; "
          f"{time.time() - t0:.0f} s", flush=True)
    return summary("torture")


if __name__ == "__main__":
    sys.exit(main())
