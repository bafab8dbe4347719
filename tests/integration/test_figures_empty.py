#!/usr/bin/python3
"""The figure scripts on files with a slice that holds no value at all, run as a user runs
them but under `python3 -W error::RuntimeWarning`: numpy's "Mean of empty slice", "All-NaN
slice encountered" or "Degrees of freedom <= 0" would then end the script with a traceback.
Each must exit 0 and print no RuntimeWarning; a figure with nothing to draw is skipped with a
note instead of crashing on a log axis over no value.

The files come from real `attnsweep run`s on a model axis of two synthetic models of different
shapes (the tiny model, 4 heads, and the same weights read as 2 heads: the file masks that
model's heads 2 and 3 with head_valid = 0), then copied with one slice emptied by h5py:

  censored.h5  crit_N found in every window at the shortest L and censored in every window at
               the other L (the mean over windows at those L has no value)
  pending.h5   the second model's cells at the longest L pending (a sweep in progress):
               its figures at the longest L have nothing to draw
  unstarted.h5 the second model's cells all pending (an extension by a model not yet run)

usage: test_figures_empty.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sweeptest import ANALYSIS, ENV, check, summary  # noqa: E402

BIN, MODEL, SCRATCH = sys.argv[1:4]
INT_FILL = -2147483647          # the int metrics' fill (docs/results.md)
STRICT = [sys.executable, "-W", "error::RuntimeWarning"]


def make_results():
    """results.h5: the tiny model and its 2-head reading as one model axis."""
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    two = os.path.join(SCRATCH, "tiny-2heads")
    shutil.copytree(MODEL, two)
    with open(os.path.join(two, "config.json")) as f:
        cfg = json.load(f)
    cfg["n_head"] = 2              # the same 64-wide weights split into two heads of 32
    with open(os.path.join(two, "config.json"), "w") as f:
        json.dump(cfg, f)
    np.save(os.path.join(SCRATCH, "tokens.npy"),
            np.random.default_rng(9).integers(0, 50257, size=300).astype("<u2"))
    with open(os.path.join(SCRATCH, "sweep.cfg"), "w") as f:
        f.write(f"""model = ["{MODEL}", "{two}"];
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 3; offset = 0; stride = 64; }};
grid = {{ L = [16, 32, 64]; N = [1, 2, 4, 8]; T = [0.01, 1.0, 8.0];
         eps = [1e-3, 0.1]; normalizer = ["softmax", "sparsemax"]; }};
output = "results.h5";
""")
    r = subprocess.run([BIN, "run", "sweep.cfg"], cwd=SCRATCH, env=ENV, capture_output=True,
                       text=True, timeout=240)
    if r.returncode != 0:
        sys.exit(f"attnsweep run failed with exit {r.returncode}: {r.stderr[-500:]}")
    path = os.path.join(SCRATCH, "results.h5")
    with h5py.File(path, "r") as f:
        hv = f["head_valid"][()]
    check(hv[0].all() and hv[1][:, :2].all() and not hv[1][:, 2:].any(),
          f"the 2-head model's heads 2 and 3 are masked: head_valid {hv.tolist()}")
    return path


def emptied(src, name, edit):
    """A copy of src with edit(h5py file) applied."""
    dst = os.path.join(SCRATCH, name)
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        edit(f)
    return dst


def censor_all_but_shortest_L(f):
    crit, cens = f["crit_N"][()], f["crit_N_censored"][()]   # (model, window, L, T, normalizer)
    crit[:, :, 0], cens[:, :, 0] = 2, 0
    crit[:, :, 1:], cens[:, :, 1:] = INT_FILL, 1
    f["crit_N"][...], f["crit_N_censored"][...] = crit, cens


def pending(where):
    def edit(f):
        st = f["status"][()]
        st[where] = 0
        f["status"][...] = st
    return edit


def strict_run(what, args):
    """Runs an analysis script under -W error::RuntimeWarning; returns its stdout."""
    r = subprocess.run(STRICT + args, capture_output=True, text=True, timeout=600,
                       env=dict(ENV, MPLBACKEND="Agg"))
    check(r.returncode == 0 and "RuntimeWarning" not in r.stderr,
          f"{what}: exit {r.returncode}, stderr: {r.stderr[-800:]}")
    return r.stdout


def main():
    full = make_results()
    fig_py, report_py = os.path.join(ANALYSIS, "figures.py"), os.path.join(ANALYSIS, "report.py")
    models = ("tiny", "tiny-2heads")

    censored = emptied(full, "censored.h5", censor_all_but_shortest_L)
    out = strict_run("figures.py, crit_N censored in every window at two L",
                     [fig_py, censored, "--out", os.path.join(SCRATCH, "figs-censored")])
    for m in models:
        check(os.path.exists(os.path.join(SCRATCH, "figs-censored", m, "critical_N.png")),
              f"censored: {m}'s critical_N drawn")

    L_max = 64
    part = emptied(full, "pending.h5", pending((1, slice(None), 2)))
    out = strict_run("figures.py --band quantile, the second model's longest L pending",
                     [fig_py, part, "--out", os.path.join(SCRATCH, "figs-pending"), "--band", "quantile"])
    check(f"distance_vs_N skipped: no finished cell at the longest L = {L_max}" in out,
          f"pending: the empty figure is skipped with a note: {out[-1500:]}")
    for name in ("distance_vs_L", "critical_N"):     # drawn from the L that are finished
        check(os.path.exists(os.path.join(SCRATCH, "figs-pending", models[1], f"{name}.png")),
              f"pending: {models[1]}'s {name} drawn from its finished L")
    check(os.path.exists(os.path.join(SCRATCH, "figs-pending", "checkpoints.png")),
          "pending: the checkpoint figure drawn")

    unstarted = emptied(full, "unstarted.h5", pending((1,)))
    strict_run("report.py, the second model not started",
               [report_py, unstarted, "-o", os.path.join(SCRATCH, "unstarted.html")])
    page = os.path.join(SCRATCH, "unstarted.html")
    check(os.path.exists(page) and os.path.getsize(page) > 10000, "unstarted: the report written")
    return summary("test_figures_empty")


if __name__ == "__main__":
    sys.exit(main())
