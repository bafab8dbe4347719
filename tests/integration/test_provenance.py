#!/usr/bin/python3
"""/provenance's `ended` and `extended` columns (docs/results.md) through one output's life:

  segment 0  stopped by SIGUSR1 after its first window (graceful: exit 3)
  segment 1  the resume, which completes
  segment 2  an extension by one L value, which completes
  segment 3  an extension by two windows, killed with SIGKILL after its first new window
  segment 4  the resume, which completes

After each run the file's /provenance must tell exactly that: how each segment ended
(`stopped by signal SIGUSR1`, `completed`, `crashed (no end record)`), whether it extended the
sweep against the previous segment (`first segment`, `no`, `yes: L values 2 -> 3`, `yes:
windows 3 -> 5`), its end time (NaN only for the killed one) and cells done. The final file's
values equal an uninterrupted run's, and `attnsweep merge` of the output as a one-shard job
carries every row as it was (plus one for the merge). A shard killed in its last segment and
merged with --partial: the killed segment keeps its own cells_done, and the merge's segment
says completed.

Every stop is placed by an event, never by a duration: the store's test hook (attnsweep_test,
src/store/testhook.h) holds the writer at its first durable commit, and the signal or the kill
lands while it is held, however fast or loaded the machine is.

usage: test_provenance.py ATTNSWEEP_TEST MODEL_DIR SCRATCH
"""
import math
import os
import shutil
import signal
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, same_values, signal_delivered, summary, wait_for_phase

BIN, MODEL, SCRATCH = sys.argv[1:4]


def write_config(path, output, L, windows):
    """A small grid (L and window count as given): each segment's run takes a second or so."""
    with open(path, "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = {windows}; offset = 0; stride = 64; }};
grid = {{ L = {L}; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [1e-3]; normalizer = ["softmax"]; }};
output = "{output}";
runtime = {{ commit_every = 2; }};
""")


def run(cfg):
    return subprocess.run([BIN, "run", cfg], env=ENV, cwd=SCRATCH, capture_output=True, text=True,
                          timeout=600)


def held_run(cfg, tag):
    """`attnsweep run cfg` held once its first window is durable (journal_synced, first
    arrival): returns the process and the release file that lets it go on."""
    phase, release = f"{SCRATCH}/{tag}.phase", f"{SCRATCH}/{tag}.release"
    env = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase, ATTNSWEEP_TEST_HOLD="journal_synced 1",
               ATTNSWEEP_TEST_RELEASE=release)
    p = subprocess.Popen([BIN, "run", cfg], env=env, cwd=SCRATCH, stderr=subprocess.PIPE, text=True)
    check(wait_for_phase(phase, "journal_synced", 1, p), f"{tag}: the run reached its first commit")
    return p, release


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def provenance(path):
    """/provenance as one dict per segment (h5py: the file's own bytes, no decoding library)."""
    with h5py.File(path, "r") as f:
        g = f["provenance"]
        n = g["segment"].shape[0]
        return [{"segment": int(g["segment"][i]), "end": float(g["end"][i]),
                 "start": float(g["start"][i]), "cells_done": int(g["cells_done"][i]),
                 "ended": text(g["ended"][i]), "extended": text(g["extended"][i])}
                for i in range(n)]


def expect(path, want, when):
    """want: one (ended, extended, cells_done, end recorded) per segment, in order."""
    rows = provenance(path)
    check(len(rows) == len(want), f"{when}: {len(rows)} segments in /provenance, want {len(want)}: {rows}")
    for k, (row, (ended, extended, cells, has_end)) in enumerate(zip(rows, want)):
        check(row["segment"] == k, f"{when}: segment {k} numbered {row['segment']}")
        check(row["ended"] == ended, f"{when}: segment {k} ended {row['ended']!r}, want {ended!r}")
        check(row["extended"] == extended,
              f"{when}: segment {k} extended {row['extended']!r}, want {extended!r}")
        check(row["cells_done"] == cells, f"{when}: segment {k} cells_done {row['cells_done']}, want {cells}")
        check(math.isfinite(row["end"]) == has_end,
              f"{when}: segment {k} end {row['end']} (recorded: want {has_end})")
        check(not has_end or row["end"] >= row["start"], f"{when}: segment {k} ends before it starts")
    return rows


def main():
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(5)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=600).astype("<u2"))
    out = f"{SCRATCH}/p.h5"
    STOPPED, DONE = "stopped by signal SIGUSR1", "completed"
    rows = []   # the expected rows so far: (ended, extended, cells_done, end recorded)

    # segment 0: SIGUSR1 while the first window's commit is held; the stop keeps that window
    write_config(f"{SCRATCH}/a.cfg", "p.h5", "[16, 32]", 3)
    p, release = held_run("a.cfg", "usr1")
    p.send_signal(signal.SIGUSR1)
    check(signal_delivered(p.pid, signal.SIGUSR1), "SIGUSR1 delivered")
    open(release, "w").close()
    _, err = p.communicate(timeout=600)
    check(p.returncode == 3, f"SIGUSR1: the resumable exit 3, got {p.returncode}: {err[-300:]}")
    rows.append((STOPPED, "first segment", 2, True))
    expect(out, rows, "after SIGUSR1")

    # segment 1: the resume completes the sweep
    r = run("a.cfg")
    check(r.returncode == 0, f"resume: exit {r.returncode}: {r.stderr[-300:]}")
    rows.append((DONE, "no", 4, True))
    expect(out, rows, "after the resume")

    # segment 2: one more L value
    write_config(f"{SCRATCH}/b.cfg", "p.h5", "[16, 32, 64]", 3)
    r = run("b.cfg")
    check(r.returncode == 0, f"extension by an L value: exit {r.returncode}: {r.stderr[-300:]}")
    rows.append((DONE, "yes: L values 2 -> 3", 3, True))
    expect(out, rows, "after the L extension")

    # segment 3: two more windows; SIGKILL once the first new window is durable
    write_config(f"{SCRATCH}/c.cfg", "p.h5", "[16, 32, 64]", 5)
    p, _ = held_run("c.cfg", "kill")
    p.kill()
    p.communicate(timeout=600)
    check(p.returncode == -signal.SIGKILL, f"the held run died of SIGKILL: {p.returncode}")

    # segment 4: the resume; only now is segment 3 known to have crashed (a later one exists)
    r = run("c.cfg")
    check(r.returncode == 0, f"resume after SIGKILL: exit {r.returncode}: {r.stderr[-300:]}")
    rows.append(("crashed (no end record)", "yes: windows 3 -> 5", 3, False))
    rows.append((DONE, "no", 3, True))
    final = expect(out, rows, "after the kill and the resume")
    check(sum(x["cells_done"] for x in final) == 15, "the segments' cells_done add up to the 15 cells")

    write_config(f"{SCRATCH}/ref.cfg", "ref.h5", "[16, 32, 64]", 5)
    r = run("ref.cfg")
    check(r.returncode == 0, f"reference run: exit {r.returncode}: {r.stderr[-300:]}")
    same_values(f"{SCRATCH}/ref.h5", out, "the five segments' file vs an uninterrupted run")

    # merge carries the rows: the output as the one shard of a one-shard job
    for suffix in ("", ".journal"):
        shutil.copy(out + suffix, f"{SCRATCH}/m.shard-0-of-1.h5{suffix}")
    merged = merge_rows("m.h5", "m.shard-0-of-1.h5")
    check(merged[:5] == [row_words(x) for x in final], f"merge: the five segments' rows as they were: {merged}")
    check(merged[5:] == [(DONE, "no", 0)], f"merge: one segment more, the merge's: {merged[5:]}")

    # a shard whose last segment was killed, merged with its cells pending (--partial): the
    # killed segment keeps its own count (not every commit of the merged journal), and the
    # merge's segment completed (it was not stopped by a signal)
    write_config(f"{SCRATCH}/k.cfg", "k.shard-0-of-1.h5", "[16, 32]", 3)
    r = run("k.cfg")
    check(r.returncode == 0, f"shard: exit {r.returncode}: {r.stderr[-300:]}")
    write_config(f"{SCRATCH}/k.cfg", "k.shard-0-of-1.h5", "[16, 32]", 5)
    p, _ = held_run("k.cfg", "kill-shard")
    p.kill()
    p.communicate(timeout=600)
    with h5py.File(f"{SCRATCH}/k.shard-0-of-1.h5", "r") as f:
        killed_cells = int((f["status"][()] == 1).sum()) - 6
    check(killed_cells > 0, f"the killed segment committed {killed_cells} cells before the kill")
    merged = merge_rows("k.h5", "k.shard-0-of-1.h5", "--partial")
    want = [(DONE, "first segment", 6), ("crashed (no end record)", "yes: windows 3 -> 5", killed_cells),
            (DONE, "no", 0)]
    check(merged == want, f"partial merge of a killed shard: {merged}, want {want}")
    return summary("test_provenance")


def row_words(row):
    return row["ended"], row["extended"], row["cells_done"]


def merge_rows(out, *args):
    """`attnsweep merge --out OUT ARGS...`; the merged file's rows as (ended, extended,
    cells_done)."""
    r = subprocess.run([BIN, "merge", "--out", out] + list(args), env=ENV, cwd=SCRATCH,
                       capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"merge {out}: exit {r.returncode}: {r.stderr[-300:]}")
    return [row_words(x) for x in provenance(f"{SCRATCH}/{out}")] if r.returncode == 0 else []


if __name__ == "__main__":
    sys.exit(main())
