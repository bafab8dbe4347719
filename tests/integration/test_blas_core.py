#!/usr/bin/python3
"""OpenBLAS's kernels in the processes attnsweep starts (include/kernels/blas_core.h): a
release of OpenBLAS that does not know a CPU runs its oldest kernels on it (Debian 12's takes
an Emerald Rapids Xeon for Prescott, and its sgemm runs 5x slower); attnsweep then runs
itself again with OPENBLAS_CORETYPE set. Checked here, against the flags the Linux kernel lists
in /proc/cpuinfo:

  - `attnsweep --version` without OPENBLAS_CORETYPE runs kernels of the CPU's own level;
  - the same under mpirun, in every rank;
  - a sweep run by mpirun records those kernels in the results file (openblas_config);
  - a user's OPENBLAS_CORETYPE is kept as it is.

usage: test_blas_core.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, summary, write_tokens_config

BIN, MODEL, SCRATCH = sys.argv[1:4]

# OpenBLAS's x86-64 cores by the instruction set their kernels use (0 SSE .. 3 AVX-512)
LEVEL = {"prescott": 0, "core2": 0, "penryn": 0, "dunnington": 0, "nehalem": 0, "atom": 0,
         "opteron": 0, "opteron_sse3": 0, "barcelona": 0, "nano": 0, "katmai": 0,
         "coppermine": 0, "northwood": 0, "banias": 0, "athlon": 0,
         "sandybridge": 1, "bulldozer": 1, "piledriver": 1, "steamroller": 1,
         "haswell": 2, "zen": 2, "excavator": 2,
         "skylakex": 3, "cooperlake": 3, "sapphirerapids": 3}


def cpu_level():
    """The level /proc/cpuinfo's flags allow, or None off x86-64 Linux."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), None)
    except OSError:
        return None
    if flags is None or "sse2" not in flags:
        return None
    if all(x in flags for x in ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")):
        return 3
    if "avx2" in flags and "fma" in flags:
        return 2
    return 1 if "avx" in flags else 0


def no_coretype_env():
    env = dict(ENV)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("ATTNSWEEP_BLAS_DETECTED", None)
    return env


def cores_in(text):
    return re.findall(r"^blas: (\S+) kernels", text, re.M)


level = cpu_level()
if level is None:
    print("test_blas_core: not x86-64 Linux: nothing to check (skipped)")
    sys.exit(77)
print(f"test_blas_core: /proc/cpuinfo says this CPU runs level {level}")

out = subprocess.run([BIN, "--version"], env=no_coretype_env(), capture_output=True,
                     text=True, check=True).stdout
cores = cores_in(out)
check(len(cores) == 1, f"--version prints one blas line: {out!r}")
for core in cores:
    check(LEVEL.get(core.lower(), level) >= level,
          f"attnsweep runs OpenBLAS's {core} kernels on a CPU of level {level}: {out!r}")
print("test_blas_core: attnsweep --version:", out.strip().splitlines()[-1])

out = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", BIN, "--version"],
                     env=no_coretype_env(), capture_output=True, text=True, check=True).stdout
cores = cores_in(out)
check(len(cores) == 2, f"two ranks print their blas line: {out!r}")
for core in cores:
    check(LEVEL.get(core.lower(), level) >= level,
          f"a rank runs OpenBLAS's {core} kernels on a CPU of level {level}")

# a user's choice wins, even a slower one
env = no_coretype_env()
env["OPENBLAS_CORETYPE"] = "Prescott"
out = subprocess.run([BIN, "--version"], env=env, capture_output=True, text=True,
                     check=True).stdout
check(cores_in(out) == ["Prescott"] and "OPENBLAS_CORETYPE=Prescott" in out,
      f"OPENBLAS_CORETYPE=Prescott is kept: {out!r}")

# a sweep's results file names the kernels its ranks ran
shutil.rmtree(SCRATCH, ignore_errors=True)
os.makedirs(SCRATCH)
np.save(os.path.join(SCRATCH, "tokens.npy"),
        np.random.default_rng(3).integers(0, 256, size=64).astype(np.uint16))
cfg = os.path.join(SCRATCH, "sweep.cfg")
write_tokens_config(cfg, MODEL, "out.h5", 1, 1)
subprocess.run(["mpirun", "-np", "2", "--oversubscribe", BIN, "run", "sweep.cfg", "--new"],
               cwd=SCRATCH, env=no_coretype_env(), capture_output=True, check=True)
with h5py.File(os.path.join(SCRATCH, "out.h5"), "r") as f:
    config = f.attrs["openblas_config"]
    config = config.decode() if isinstance(config, bytes) else str(config)
known = [w for w in config.split() if w.lower() in LEVEL]
check(len(known) == 1 and LEVEL[known[0].lower()] >= level,
      f"the file's openblas_config names kernels of level {level} or more: {config!r}")
print("test_blas_core: the file's openblas_config:", config)
sys.exit(summary("test_blas_core"))
