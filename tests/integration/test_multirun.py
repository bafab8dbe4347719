#!/usr/bin/python3
"""analysis/multirun.py: one ordinary sweep per combination, an index, a stacked loader.

On the tiny model (2 windows, 3 L):
  - value parsing: top-level commas only, bare words become config strings, a bad -m is
    refused in one line (exit 2) before anything runs;
  - `-m metrics.distance=per_token,aggregate`: two folders, index.csv with a row per run
    (exit code 0, every cell done), each file's `distance` attribute its reading, each file
    equal to a direct `attnsweep run --set metrics.distance=...` of the same config (every
    variable but the bookkeeping);
  - the same command again computes nothing (each run resumes: "0 this run") and changes no
    value;
  - multirun.load(): a `run` dimension with `distance` as its coordinate; entropy equal in
    both readings, dist_true not;
  - a run that fails (a reading that does not exist) is an index row with its exit code,
    the other runs still run, and the multirun exits non-zero; load() takes the finished
    runs only and refuses runs of different grids in one line.

usage: test_multirun.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import csv
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sweeptest import ANALYSIS, ENV, check, same_values, summary, import_analysis  # noqa: E402

multirun, = import_analysis("multirun")

BIN, MODEL, SCRATCH = sys.argv[1:4]
TOOL = os.path.join(ANALYSIS, "multirun.py")


def write_config():
    rng = np.random.default_rng(7)
    np.save(os.path.join(SCRATCH, "tokens.npy"), rng.integers(0, 50257, size=300).astype("<u2"))
    path = os.path.join(SCRATCH, "sweep.cfg")
    with open(path, "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 2; offset = 0; stride = 64; }};
grid = {{ L = [16, 32, 64]; N = [1, 2, 4, 8]; T = [0.1, 1.0, 8.0]; eps = [0.1];
         normalizer = ["softmax", "sparsemax"]; }};
output = "direct.h5";
""")
    return path


def tool(*args):
    return subprocess.run([sys.executable, TOOL, *args, "--launcher", BIN], cwd=SCRATCH, env=ENV,
                          capture_output=True, text=True, timeout=600)


def index(root):
    with open(os.path.join(root, "index.csv"), newline="") as f:
        return list(csv.DictReader(f))


def check_parsing():
    check(multirun.split_values("[8.0],[1.0,8.0]") == ["[8.0]", "[1.0,8.0]"], "lists split at top level")
    check(multirun.split_values('"a,b",c') == ['"a,b"', "c"], "quoted commas do not split")
    check([multirun.literal(v) for v in ("per_token", "8.0", "true", '"x"', "[1,2]")] ==
          ['"per_token"', "8.0", "true", '"x"', "[1,2]"], "bare words become strings, literals pass")
    check(multirun.run_dir([("grid.T", "[1.0,8.0]"), ("metrics.distance", "aggregate")]) ==
          "grid.T=1.0+8.0,metrics.distance=aggregate", "folder names a shell takes unquoted")
    for bad in (["-m", "metrics.distance"], ["-m", "metrics.distance=a,a"], ["-m", "output=x.h5"], []):
        r = tool("sweep.cfg", *bad)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
              and not os.path.exists(os.path.join(SCRATCH, "results")),
              f"{bad}: exit {r.returncode}, stderr {r.stderr!r}")


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    write_config()
    check_parsing()
    root = os.path.join(SCRATCH, "tree")
    r = tool("sweep.cfg", "-m", "metrics.distance=per_token,aggregate", "--root", root)
    check(r.returncode == 0, f"multirun exited {r.returncode}: {r.stderr[-400:]}")
    rows = index(root)
    check([x["metrics.distance"] for x in rows] == ["per_token", "aggregate"], f"index rows {rows}")
    import h5py
    for x in rows:
        check(x["exit_code"] == "0" and x["cells_done"] == x["cells_total"] == "6",
              f"index row {x}")
        out = os.path.join(root, x["output"])
        with h5py.File(out, "r") as f:
            check(f.attrs.get("distance") == x["metrics.distance"], f"{out}: distance attribute")
        direct = os.path.join(SCRATCH, f"direct-{x['metrics.distance']}.h5")
        d = subprocess.run([BIN, "run", "sweep.cfg", "--set", f'metrics.distance="{x["metrics.distance"]}"',
                            "--set", f'output="{direct}"'], cwd=SCRATCH, env=ENV,
                           capture_output=True, text=True, timeout=300)
        check(d.returncode == 0, f"direct run exited {d.returncode}: {d.stderr}")
        same_values(out, direct, f"multirun {x['dir']} against a direct run")
    again = tool("sweep.cfg", "-m", "metrics.distance=per_token,aggregate", "--root", root)
    check(again.returncode == 0 and (again.stdout + again.stderr).count(" 0 this run") == 2,
          f"the second multirun computed something: {again.stderr[-400:]}")
    for x in index(root):
        same_values(os.path.join(root, x["output"]),
                    os.path.join(SCRATCH, f"direct-{x['metrics.distance']}.h5"), "after the resume")
    ds = multirun.load(root)
    check(list(ds["distance"].values) == ["per_token", "aggregate"] and ds.sizes["run"] == 2,
          "load: run dimension with the distance coordinate")
    ent = ds["entropy"].transpose("run", ...).values
    dist = ds["dist_true"].transpose("run", ...).values
    check(np.array_equal(ent[0], ent[1], equal_nan=True), "entropy equal in both readings")
    check(not np.array_equal(dist[0], dist[1], equal_nan=True), "dist_true differs between readings")
    # a failing run: recorded, the others still run, exit non-zero
    bad_root = os.path.join(SCRATCH, "bad")
    r = tool("sweep.cfg", "-m", "metrics.distance=nope,aggregate", "--root", bad_root)
    rows = index(bad_root)
    check(r.returncode != 0 and len(rows) == 2 and rows[0]["exit_code"] != "0"
          and rows[1]["exit_code"] == "0", f"a failing run: exit {r.returncode}, rows {rows}")
    check(multirun.load(bad_root).sizes["run"] == 1, "load takes the finished runs only")
    grid_root = os.path.join(SCRATCH, "grids")
    tool("sweep.cfg", "-m", "grid.eps=[0.1],[0.1,1.0]", "--root", grid_root)
    try:
        multirun.load(grid_root)
        check(False, "load stacked runs of different grids")
    except ValueError as exc:
        check("other axes" in str(exc), f"load's refusal: {exc}")
    return summary("test_multirun")


if __name__ == "__main__":
    sys.exit(main())
