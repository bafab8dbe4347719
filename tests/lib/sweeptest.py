"""Helpers the Python end-to-end tests share (test_sweep, test_merge, test_torture,
test_multihost, test_analysis): the environment attnsweep runs in, a check counter that keeps
going after a failure, the small sweep over a token file, and the comparison of two results
files.

Each test script puts this folder (tests/lib) on sys.path before importing it.
Run as a program, `python3 tests/lib/sweeptest.py A.h5 B.h5` compares two results files;
`python3 tests/lib/sweeptest.py MULTI.h5 M SINGLE.h5` compares model M of a file with a model
axis (isel(model=M)) with a single-model file, over the single file's own layers and heads.
"""
import os
import time

import h5py
import numpy as np

# mpirun as root, one BLAS thread per rank; no SLURM job id leaks in from a developer's shell
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OPENBLAS_NUM_THREADS="1")
ENV.pop("SLURM_JOB_ID", None)

# analysis/, for the tests of its scripts (put on sys.path by import_analysis)
ANALYSIS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis")


def import_analysis(*names):
    """The named modules of analysis/ (figures, report, multirun, ...), imported."""
    import importlib
    import sys
    if ANALYSIS not in sys.path:
        sys.path.insert(0, ANALYSIS)
    return [importlib.import_module(n) for n in names]


# per-run bookkeeping: which rank, how long, how many tries -- never compared between runs
BOOKKEEPING = {"wall_time", "rank", "attempts"}

counts = {"passed": 0, "failed": 0}


def check(cond, what):
    """Counts a check; prints FAIL and goes on when it does not hold."""
    if cond:
        counts["passed"] += 1
    else:
        counts["failed"] += 1
        print("FAIL:", what, flush=True)


def summary(name):
    """Prints 'NAME: N passed, N failed' and returns the exit code (1 also when nothing ran)."""
    print(f"{name}: {counts['passed']} passed, {counts['failed']} failed", flush=True)
    return 1 if counts["failed"] or not counts["passed"] else 0


def write_tokens_config(path, model, output, windows, commit_every, extra=None):
    """The small sweep the merge, torture and multihost tests run over tokens.npy (beside the
    config): L 16, 32, 64; N 1, 2, 4, 8; T 0.01, 1, 8; eps 1e-3, 0.1; softmax and sparsemax;
    windows of 64 tokens side by side. extra, when given, is one more line at the end."""
    with open(path, "w") as f:
        f.write(f"""model = "{model}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = {windows}; offset = 0; stride = 64; }};
grid = {{ L = [16, 32, 64]; N = [1, 2, 4, 8]; T = [0.01, 1.0, 8.0];
         eps = [1e-3, 0.1]; normalizer = ["softmax", "sparsemax"]; }};
output = "{output}";
runtime = {{ commit_every = {commit_every}; }};
""" + ("" if extra is None else f"{extra}\n"))


def values(path):
    """Every dataset of a results file but the bookkeeping, as numpy arrays."""
    out = {}
    with h5py.File(path, "r") as f:
        for k, d in f.items():
            if isinstance(d, h5py.Dataset) and k not in BOOKKEEPING:
                out[k] = d[()]
    return out


def has_model_dim(d):
    """True when dataset d's first dimension is the model axis (docs/results.md)."""
    return d.ndim >= 1 and len(d.dims[0]) > 0 and d.dims[0][0].name.rsplit("/", 1)[-1] == "model"


def read(f, name, model=0):
    """A variable of an open results file with the model axis selected (isel(model=model))
    when it has one: what a test of a one-model file indexes as before the model axis."""
    d = f[name]
    return d[model] if has_model_dim(d) else d[()]


def model_values(path, model):
    """Like values(), with the model axis selected (isel(model=model)), and the layer and
    head coordinates as numpy arrays for subsetting."""
    out = {}
    with h5py.File(path, "r") as f:
        for k, d in f.items():
            if isinstance(d, h5py.Dataset) and k not in BOOKKEEPING and k != "model":
                dims = [d.dims[i][0].name.rsplit("/", 1)[-1] if len(d.dims[i]) else "" for i in range(d.ndim)]
                if has_model_dim(d):
                    out[k] = (d[model], dims[1:])
                else:
                    out[k] = (d[()], dims)
        out["model"] = (f["model"][model], [])
    return out


def same_model_values(multi, m, single, what):
    """Checks that model m of a multi-model file equals a single-model file bit for bit in
    every non-bookkeeping variable, over the single file's layers and heads (the multi
    file's layer/head axes are the union over its models)."""
    vm, vs = model_values(multi, m), model_values(single, 0)
    check(vm.keys() == vs.keys(), f"{what}: variables differ {sorted(vm.keys() ^ vs.keys())}")
    layers_m, heads_m = vm["layer"][0], vm["head"][0]
    lsel = [int(np.where(layers_m == x)[0][0]) for x in vs["layer"][0] if x in layers_m]
    hsel = [int(np.where(heads_m == x)[0][0]) for x in vs["head"][0] if x in heads_m]
    check(len(lsel) == len(vs["layer"][0]) and len(hsel) == len(vs["head"][0]),
          f"{what}: the single file's layers/heads are not in the multi file's")
    for k in vm.keys() & vs.keys():
        (x, dims), (y, _) = vm[k], vs[k]
        if k in ("layer", "head"):
            x = x[lsel] if k == "layer" else x[hsel]
        else:
            for axis, name in enumerate(dims):
                if name == "layer":
                    x = np.take(x, lsel, axis=axis)
                elif name == "head":
                    x = np.take(x, hsel, axis=axis)
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype.kind == "f":
            eq = x.shape == y.shape and x.tobytes() == y.tobytes()
        else:
            eq = x.shape == y.shape and np.array_equal(x, y)
        check(eq, f"{what}: variable {k} differs")


def same_values(a, b, what):
    """Checks that two results files hold the same values, bit for bit (NaN payloads too)."""
    va, vb = values(a), values(b)
    check(va.keys() == vb.keys(), f"{what}: variables differ {sorted(va.keys() ^ vb.keys())}")
    for k in va.keys() & vb.keys():
        x, y = va[k], vb[k]
        if x.dtype.kind == "f":
            eq = x.shape == y.shape and x.tobytes() == y.tobytes()
        else:
            eq = x.shape == y.shape and np.array_equal(x, y)
        check(eq, f"{what}: variable {k} differs")


def phase_hits(phase_file, phase):
    """How often the store's test hook has reported `phase` in phase_file (src/store/testhook.h
    st_test_phase: one "SEQ PHASE" line at each arrival at the held phase)."""
    try:
        with open(phase_file) as f:
            return sum(1 for line in f if line.split()[-1:] == [phase])
    except FileNotFoundError:
        return 0


def wait_for_phase(phase_file, phase, count, proc, timeout=600):
    """Waits until the writer has reached `phase` `count` times, an event, not a duration:
    with ATTNSWEEP_TEST_HOLD="PHASE COUNT" it then holds there until the file
    ATTNSWEEP_TEST_RELEASE names exists (src/store/testhook.h). True when reached; False when proc ended first (or after `timeout` s, a bound
    for a hung run only, far above any loaded machine's start-up)."""
    deadline = time.time() + timeout
    while phase_hits(phase_file, phase) < count:
        if proc.poll() is not None or time.time() > deadline:
            return False
        time.sleep(0.005)
    return True


def signal_delivered(pid, signo, timeout=600):
    """Waits until a process-directed signal sent to pid is no longer pending (its handler
    ran), from /proc/PID/status ShdPnd. True when delivered or the process is gone."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                pending = [l for l in f if l.startswith(("ShdPnd:", "SigPnd:"))]
        except OSError:
            return True
        if not any(int(l.split()[1], 16) >> (signo - 1) & 1 for l in pending):
            return True
        time.sleep(0.005)
    return False


def run_cases(cases, only, label=""):
    """Runs each case function (named case_X) unless `only` names other cases, and prints
    how long each took."""
    for c in cases:
        name = c.__name__[5:]
        if only and name not in only:
            continue
        t0 = time.time()
        c()
        print(f"{label}{name}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 4:
        same_model_values(sys.argv[1], int(sys.argv[2]), sys.argv[3],
                          "%s model %s vs %s" % (sys.argv[1], sys.argv[2], sys.argv[3]))
        sys.exit(summary("same_model_values"))
    if len(sys.argv) != 3:
        sys.exit("usage: sweeptest.py A.h5 B.h5 -- are two results files' values equal bit for bit?\n"
                 "       sweeptest.py MULTI.h5 M SINGLE.h5 -- is model M of MULTI the SINGLE file?")
    same_values(sys.argv[1], sys.argv[2], "%s vs %s" % (sys.argv[1], sys.argv[2]))
    sys.exit(summary("same_values"))
