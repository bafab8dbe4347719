#!/usr/bin/python3
"""No write through a planted link (docs/reliability.md): a symbolic link planted at any file
attnsweep creates or rewrites beside its output is refused, through the real `attnsweep_test`
(the program with the store's test hooks, src/store/testhook.h).

Every case plants a link in turn to a victim file (outside the output's folder) and a dangling
one, runs the command that would write that file, and checks
  * exit 1 and exactly one stderr line about it, naming the path, saying it is a symbolic link
    and how to remove it (rm 'PATH');
  * the victim keeps its bytes; nothing appears where the dangling link points;
  * the results already written are intact: every other file of the output's folder keeps its
    bytes, and once the link is removed the same command finishes with the values of an
    undisturbed run.

  lock, reserve, status, journal   OUT.h5.lock, .reserve, .status, .journal of a finished
                                   output, planted before `run` resumes it
  status_tmp      OUT.h5.status.tmp.PID, planted while a new output's run is held just after
                  start-up (hook `opened`): its next status write would go through it
  rebuild_tmp     OUT.h5.tmp.PID, planted while a new output's run is held after creating
                  its journal (hook `journal_created`), before it builds the view there
  compact_tmp     OUT.h5.journal.compact.PID, planted while a new output's closing compaction
                  is held
                  after syncing the view (hook `compact_synced`), before it writes there
  stale_tmp       each of those temporaries (and OUT.h5.journal.merge.PID), planted while the
                  run holds the fresh lock (hook `lock_won`), before it clears leftovers
  merge_lock, merge_tmp   the merged output's lock before `merge`, and its temporary journal
                  OUT.h5.journal.merge.PID while the merge holds its lock (hook `lock_won`)
The PID in a temporary's name is the held process's own, so those links are planted while it
waits at a hook, never by guessing a pid. Every wait is for a state, never a sleep.

usage: test_planted_links.py ATTNSWEEP_TEST MODEL_DIR SCRATCH [case ...]
"""
import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, same_values, summary, wait_for_phase

BIN, MODEL, SCRATCH = sys.argv[1:4]
BIN, MODEL, SCRATCH = os.path.abspath(BIN), os.path.abspath(MODEL), os.path.abspath(SCRATCH)
ONLY = set(sys.argv[4:])
VICTIM_BYTES = b"the victim's own bytes\n" * 100


def setup(name):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(f"{d}/out")
    os.makedirs(f"{d}/elsewhere")
    rng = np.random.default_rng(3)
    np.save(f"{d}/tokens.npy", rng.integers(0, 50257, size=300).astype("<u2"))
    with open(f"{d}/a.cfg", "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 2; offset = 0; stride = 64; }};
grid = {{ L = [16, 32]; N = [1, 2]; T = [8.0]; eps = [1e-3]; normalizer = ["softmax"]; }};
output = "out/out.h5";
runtime = {{ commit_every = 1; }};
""")
    return d


def cli(args, d, env=None):
    return subprocess.run([BIN] + args, cwd=d, env=env or ENV, capture_output=True, text=True,
                          timeout=300)


def start(args, d, env):
    return subprocess.Popen([BIN] + args, cwd=d, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def hook_env(d, hold):
    return dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=f"{d}/phases", ATTNSWEEP_TEST_RELEASE=f"{d}/release",
                ATTNSWEEP_TEST_HOLD=hold)




def tree(d):
    """sha256 of every regular file under d (links are not followed)."""
    out = {}
    for root, _dirs, files in os.walk(d):
        for name in files:
            p = os.path.join(root, name)
            if os.path.isfile(p) and not os.path.islink(p):
                out[os.path.relpath(p, d)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


_reference = {}


def reference():
    """The values of an undisturbed run (made once)."""
    if not _reference:
        d = setup("reference")
        p = cli(["run", "a.cfg"], d)
        check(p.returncode == 0, f"reference run: exit {p.returncode}: {p.stderr[-300:]}")
        _reference["dir"] = d
    return _reference["dir"]


def finished(name):
    """A folder whose output is finished (its own run: the config records absolute paths),
    with a copy of that file at ref.h5."""
    d = setup(name)
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"{name}: first run: exit {p.returncode}: {p.stderr[-300:]}")
    shutil.copy(f"{d}/out/out.h5", f"{d}/ref.h5")
    return d


def plant(d, path, kind):
    """A link at path to a victim with known bytes (kind "victim") or to nothing ("dangling");
    returns its target."""
    target = f"{d}/elsewhere/{kind}-{os.path.basename(path)}"
    if kind == "victim":
        with open(target, "wb") as f:
            f.write(VICTIM_BYTES)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(target, path)
    return target


def refused(p, path, what):
    """Exit 1 and exactly one stderr line about the link, naming it and how to remove it."""
    lines = [l for l in p.stderr.splitlines() if "symbolic link" in l]
    ok = (p.returncode == 1 and len(lines) == 1 and "rm '" in lines[0] and f"{path}'" in lines[0])
    check(ok, f"{what}: refused in one line naming {path}: exit {p.returncode}: {p.stderr[-600:]!r}")


def untouched(target, kind, what):
    if kind == "victim":
        check(open(target, "rb").read() == VICTIM_BYTES, f"{what}: the victim {target} was written")
    else:
        check(not os.path.lexists(target), f"{what}: the dangling link created {target}")


def resumes(d, path, args, what, ref=None):
    """With the link removed, the same command finishes with the values of an undisturbed run
    (ref: a copy of the file before the link was planted; else a run of its own)."""
    if os.path.islink(path):
        os.unlink(path)
    p = cli(args, d)
    check(p.returncode == 0, f"{what}: after removing the link: exit {p.returncode}: {p.stderr[-300:]}")
    same_values(ref or f"{reference()}/out/out.h5", f"{d}/out/out.h5", f"{what}: values after the link went")


# ---- the sidecars of a finished output, planted before `run` resumes it ----

def sidecar(suffix):
    """One finished output; a victim link, then a dangling one, at OUT.h5SUFFIX; then resumed.
    A refused run changes nothing, so both kinds are planted on the same output."""
    d = finished(f"sidecar{suffix}")
    path = f"out/out.h5{suffix}"
    saved = f"{d}/saved{suffix}"
    if os.path.exists(f"{d}/{path}"):
        shutil.move(f"{d}/{path}", saved)
    for kind in ("victim", "dangling"):
        what = f"{suffix} ({kind})"
        if suffix == ".journal" and kind == "victim":
            # the journal's own bytes elsewhere: a run appending to it would write through
            target = f"{d}/elsewhere/victim-out.h5.journal"
            shutil.copy(saved, target)
            os.symlink(target, f"{d}/{path}")
            victim = open(target, "rb").read()
        else:
            target, victim = plant(d, f"{d}/{path}", kind), None
        before = tree(f"{d}/out")
        p = cli(["run", "a.cfg"], d)
        refused(p, path, what)
        if victim is not None:
            check(open(target, "rb").read() == victim, f"{what}: the journal behind the link was written")
        else:
            untouched(target, kind, what)
        check(tree(f"{d}/out") == before, f"{what}: files of the output changed")
        os.unlink(f"{d}/{path}")
    if os.path.exists(saved):
        shutil.move(saved, f"{d}/{path}")
    resumes(d, f"{d}/{path}", ["run", "a.cfg"], suffix, ref=f"{d}/ref.h5")


def case_lock():
    sidecar(".lock")


def case_reserve():
    sidecar(".reserve")


def case_status():
    sidecar(".status")


def case_journal():
    sidecar(".journal")


# ---- temporaries named by the writer's pid, planted while it is held at a hook ----

def held_run(d, name, kind, phase, name_of):
    """`run` in folder d, held at hook `phase` while a link is planted at out/NAME
    (name_of(the run's pid)); returns the link and the files of the output before the run."""
    what = f"{name} ({kind})"
    if os.path.exists(f"{d}/phases"):
        os.unlink(f"{d}/phases")
    if os.path.exists(f"{d}/release"):
        os.unlink(f"{d}/release")
    args = ["run", "a.cfg"]
    before = tree(f"{d}/out")
    a = start(args, d, hook_env(d, phase))
    held = wait_for_phase(f"{d}/phases", phase, 1, a)
    check(held, f"{what}: the run never stopped at the {phase} hook")
    path = f"out/{name_of(a.pid)}"
    target = plant(d, f"{d}/{path}", kind)
    open(f"{d}/release", "w").close()
    _out, err = a.communicate(timeout=300)
    p = subprocess.CompletedProcess(args, a.returncode, _out, err)
    refused(p, path, what)
    untouched(target, kind, what)
    return path, before


def fresh_held(name, phase, name_of):
    """A new output's run held at `phase`, a victim link planted; the same run again (it
    resumes what the refused one left, and reaches the same point), a dangling link; then
    resumed without links."""
    d = setup(name)
    for kind in ("victim", "dangling"):
        path, _ = held_run(d, name, kind, phase, name_of)
        if phase == "journal_created":
            check(not os.path.exists(f"{d}/out/out.h5"), f"{name} ({kind}): no view was made")
        os.unlink(f"{d}/{path}")
    resumes(d, f"{d}/{path}", ["run", "a.cfg"], name)


def case_status_tmp():
    fresh_held("status_tmp", "opened", lambda pid: f"out.h5.status.tmp.{pid}")


def case_rebuild_tmp():
    fresh_held("rebuild_tmp", "journal_created", lambda pid: f"out.h5.tmp.{pid}")


def case_compact_tmp():
    fresh_held("compact_tmp", "compact_synced", lambda pid: f"out.h5.journal.compact.{pid}")


def case_stale_tmp():
    """One finished output, each temporary's name in turn (a refused run changes nothing)."""
    d = finished("stale_tmp")
    names = [lambda pid: f"out.h5.tmp.{pid}", lambda pid: f"out.h5.status.tmp.{pid}",
             lambda pid: f"out.h5.journal.compact.{pid}", lambda pid: f"out.h5.journal.merge.{pid}"]
    for name_of in names:
        for kind in ("victim", "dangling"):
            path, before = held_run(d, "stale_tmp", kind, "lock_won", name_of)
            check(tree(f"{d}/out") == before, f"stale_tmp {path} ({kind}): files of the output changed")
            os.unlink(f"{d}/{path}")
    resumes(d, f"{d}/{path}", ["run", "a.cfg"], "stale_tmp", ref=f"{d}/ref.h5")


# ---- merge: the merged output's lock, and its temporary journal ----

def shards(name):
    d = setup(name)
    for i in range(2):
        p = cli(["run", "a.cfg", "--shard", f"{i}/2"], d)
        check(p.returncode == 0, f"shard {i}: exit {p.returncode}: {p.stderr[-300:]}")
    return d, ["merge", "out/out.shard-0-of-2.h5", "out/out.shard-1-of-2.h5"]


def case_merge_lock():
    d, args = shards("merge_lock")
    for kind in ("victim", "dangling"):
        path = "out/out.h5.lock"
        target = plant(d, f"{d}/{path}", kind)
        before = tree(f"{d}/out")
        p = cli(args, d)
        refused(p, path, f"merge lock ({kind})")
        untouched(target, kind, f"merge lock ({kind})")
        check(tree(f"{d}/out") == before, f"merge lock ({kind}): files changed")
        os.unlink(f"{d}/{path}")
    resumes(d, f"{d}/{path}", args, "merge lock")


def case_merge_tmp():
    d, args = shards("merge_tmp")
    for kind in ("victim", "dangling"):
        for f in ("phases", "release"):
            if os.path.exists(f"{d}/{f}"):
                os.unlink(f"{d}/{f}")
        before = tree(f"{d}/out")
        m = start(args, d, hook_env(d, "lock_won"))
        check(wait_for_phase(f"{d}/phases", "lock_won", 1, m), f"merge tmp ({kind}): merge never held its lock")
        path = f"out/out.h5.journal.merge.{m.pid}"
        target = plant(d, f"{d}/{path}", kind)
        open(f"{d}/release", "w").close()
        out, err = m.communicate(timeout=300)
        refused(subprocess.CompletedProcess(args, m.returncode, out, err), path, f"merge tmp ({kind})")
        untouched(target, kind, f"merge tmp ({kind})")
        check(tree(f"{d}/out") == before, f"merge tmp ({kind}): files changed")
        os.unlink(f"{d}/{path}")
    resumes(d, f"{d}/{path}", args, "merge tmp")


CASES = [case_lock, case_reserve, case_status, case_journal, case_status_tmp, case_rebuild_tmp,
         case_compact_tmp, case_stale_tmp, case_merge_lock, case_merge_tmp]

if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    run_cases(CASES, ONLY)
    sys.exit(summary("test_planted_links " + " ".join(sorted(ONLY))))
