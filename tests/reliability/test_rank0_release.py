#!/usr/bin/python3
"""An error on rank 0 at the end of a run releases every worker (they used to wait for ever in
the final broadcast while rank 0 left; under SLURM that burns the allocation and is never
requeued), through the real `attnsweep_test` under mpirun:

  close_fails_2   2 ranks; rank 0's close fails in the journal's compaction (the store's test
                  hook ATTNSWEEP_TEST_FAIL=close_compact, src/store/testhook.h: what a disk full
                  there does): the whole job exits 1 within the time limit, with one line naming
                  the journal; the journal is left whole, so the next run (no hook) exits 0 and
                  its file equals an undisturbed run bit for bit
  close_fails_3   the same with 3 ranks (2 workers)
  last_commit_fails  2 ranks, 2 models, every commit made to fail (ATTNSWEEP_TEST_FAIL=commit)
                  with commit_every above the cell count, so model 0's only commit is the final
                  one rank 0 makes after it told the workers the model was complete: the job
                  exits 1 (the workers used to go on to model 1's load alone and wait there);
                  the next run (no hook) finishes

A hang is caught by a hard limit (HANG_S) on the job, which is then killed as a whole (its
session): the limit only bounds a broken run, a passing one ends in a few seconds.

usage: test_rank0_release.py ATTNSWEEP_TEST MODEL_DIR SCRATCH [case ...]
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, same_values, summary

import numpy as np

BIN, MODEL, SCRATCH = (os.path.abspath(a) for a in sys.argv[1:4])
ONLY = set(sys.argv[4:])
HANG_S = 120  # far above a loaded machine's few seconds for this sweep


def setup(name, models=None, commit_every=2):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = np.random.default_rng(5)
    np.save(f"{d}/tokens.npy", rng.integers(0, 50257, size=400).astype("<u2"))
    model = "[" + ", ".join(f'"{m}"' for m in models) + "]" if models else f'"{MODEL}"'
    with open(f"{d}/a.cfg", "w") as f:
        f.write(f"""model = {model};
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 3; offset = 0; stride = 64; }};
grid = {{ L = [16, 32]; N = [1, 2]; T = [0.1, 8.0]; eps = [1e-3]; normalizer = ["softmax"]; }};
output = "out.h5";
runtime = {{ commit_every = {commit_every}; }};
""")
    return d


def mpirun(np_, d, env):
    """Runs the job in its own session; returns (exit code or None when it hung, stderr)."""
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", BIN, "run", "a.cfg"]
    p = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=HANG_S)
        return p.returncode, err
    except subprocess.TimeoutExpired:
        # the job is its session: mpirun and every rank (each rank has its own group)
        for pid in session_pids(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, err = p.communicate()
        return None, err


def session_pids(sid):
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                if os.getsid(int(e)) == sid:
                    out.append(int(e))
            except OSError:
                pass
    return out


_reference = {}


def reference():
    if not _reference:
        d = setup("reference")
        rc, err = mpirun(2, d, ENV)
        check(rc == 0, f"reference run: exit {rc}: {err[-300:]}")
        _reference["path"] = f"{d}/out.h5"
    return _reference["path"]


def close_fails(np_):
    d = setup(f"close_fails_{np_}")
    env = dict(ENV, ATTNSWEEP_TEST_FAIL="close_compact")
    t0 = time.time()
    rc, err = mpirun(np_, d, env)
    print(f"  {np_} ranks, close made to fail: exit {rc} after {time.time() - t0:.1f} s", flush=True)
    check(rc is not None, f"{np_} ranks: the job hung after rank 0's close failed (killed after {HANG_S} s)")
    check(rc == 1, f"{np_} ranks: exit {rc}, want 1 (stderr {err[-400:]!r})")
    lines = [l for l in err.splitlines() if l.startswith("attnsweep run:")]
    check(len(lines) == 1 and "out.h5.journal" in lines[0] and "compact" in lines[0],
          f"{np_} ranks: want one error line naming the journal, got {lines!r}")
    check(not os.path.exists(f"{d}/out.h5.lock"), f"{np_} ranks: lock left behind")
    # the journal was left whole: a run without the hook finishes the file
    rc2, err2 = mpirun(np_, d, ENV)
    check(rc2 == 0, f"{np_} ranks: the run after the failed close: exit {rc2}: {err2[-300:]}")
    same_values(f"{d}/out.h5", reference(), f"{np_} ranks: after a failed close and a resume")


def case_close_fails_2():
    close_fails(2)


def case_close_fails_3():
    close_fails(3)


def case_last_commit_fails():
    second = os.path.join(SCRATCH, "tiny2")
    if not os.path.exists(f"{second}/model.safetensors"):
        p = subprocess.run([BIN, "synth", "--preset", "tiny", "--seed", "2", "--vocab", "none",
                            "--force", "--out", second], env=ENV, capture_output=True, text=True)
        check(p.returncode == 0, f"synth: {p.stderr}")
    d = setup("last_commit_fails", models=[MODEL, second], commit_every=1000)
    t0 = time.time()
    rc, err = mpirun(2, d, dict(ENV, ATTNSWEEP_TEST_FAIL="commit"))
    print(f"  2 ranks, 2 models, the final commit made to fail: exit {rc} after {time.time() - t0:.1f} s",
          flush=True)
    check(rc is not None, f"the job hung after rank 0's last commit failed (killed after {HANG_S} s)")
    check(rc == 1, f"exit {rc}, want 1 (stderr {err[-400:]!r})")
    lines = [l for l in err.splitlines() if l.startswith("attnsweep run:") and "injected" in l]
    check(len(lines) == 1, f"want one error line naming the injected failure, got {err!r}")
    rc2, err2 = mpirun(2, d, ENV)
    check(rc2 == 0, f"the run after the failed commit: exit {rc2}: {err2[-300:]}")


if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    run_cases([case_close_fails_2, case_close_fails_3, case_last_commit_fails], ONLY)
    sys.exit(summary("rank0_release"))
