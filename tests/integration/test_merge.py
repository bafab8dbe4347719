#!/usr/bin/python3
"""Tests of `attnsweep merge`: K shards merged equal a single run bit
for bit; --partial + `attnsweep run` completes a merge with a missing shard;
every refusal leaves all files unchanged (checksums) and names the file.

The reference is an independent, unsharded `attnsweep run` of the same config.

usage: test_merge.py ATTNSWEEP MODEL_DIR SCRATCH [case ...]
"""
import glob
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, same_values, summary, write_tokens_config

BIN, MODEL, SCRATCH = sys.argv[1:4]
ONLY = set(sys.argv[4:])
K = 3


def write_config(path, output, extra=""):
    write_tokens_config(path, MODEL, output, 3, 2, extra)


def attnsweep(args, cwd=SCRATCH):
    return subprocess.run([BIN] + args, env=ENV, cwd=cwd, capture_output=True, text=True)


def segments(path):
    with h5py.File(path, "r") as f:
        g = f["provenance"]
        return [{"hosts": h.decode() if isinstance(h, bytes) else h, "mpi_size": int(m),
                 "job": j.decode() if isinstance(j, bytes) else j, "cells": int(c)}
                for h, m, j, c in zip(g["hosts"][()], g["mpi_size"][()], g["slurm_job_id"][()],
                                      g["cells_done"][()])]


def checksums(d):
    out = {}
    for p in sorted(glob.glob(os.path.join(d, "**"), recursive=True)):
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = hashlib.sha256(f.read()).hexdigest()
    return out


def shard_name(i, base="m"):
    return f"{base}.shard-{i}-of-{K}.h5"


# ---- shared fixtures: one reference run and K shards, made once ----------

def make_reference():
    write_config(f"{SCRATCH}/ref.cfg", "ref.h5")
    r = attnsweep(["run", "ref.cfg"])
    check(r.returncode == 0, f"reference run exit {r.returncode}: {r.stderr[-300:]}")


def make_shards(d, which=range(K)):
    os.makedirs(d, exist_ok=True)
    shutil.copy(f"{SCRATCH}/tokens.npy", d)
    write_config(f"{d}/m.cfg", "m.h5")
    for i in which:
        r = attnsweep(["run", "m.cfg", "--shard", f"{i}/{K}"], cwd=d)
        check(r.returncode == 0, f"shard {i} exit {r.returncode}: {r.stderr[-300:]}")


def fresh_copy(name):
    """A copy of the shared shards (the config inside names absolute paths, so
    `attnsweep run` in a copy would see another config: cases that run again
    make their own shards)."""
    d = f"{SCRATCH}/{name}"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(f"{SCRATCH}/shards", d)
    return d


def fresh_shards(name, which=range(K)):
    d = f"{SCRATCH}/{name}"
    shutil.rmtree(d, ignore_errors=True)
    make_shards(d, which)
    return d


def refused(args, d, needle, what):
    """Runs a merge that must be refused: exit 1, one line naming needle, no file changed."""
    before = checksums(d)
    r = attnsweep(["merge"] + args, cwd=d)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1, f"{what}: exit {r.returncode} (stderr {r.stderr.strip()!r})")
    check(len(lines) == 1 and needle in r.stderr, f"{what}: want one line naming {needle}, got {r.stderr!r}")
    check(checksums(d) == before, f"{what}: files changed")
    print(f"  refused ({what}): {r.stderr.strip()}", flush=True)


# ---- cases ----------------------------------------------------------------

def case_equal():
    d = fresh_shards("equal")
    shard_sums = checksums(d)
    r = attnsweep(["merge"] + [shard_name(i) for i in range(K)], cwd=d)
    check(r.returncode == 0, f"merge exit {r.returncode}: {r.stderr}")
    after = checksums(d)
    check(all(after.get(k) == v for k, v in shard_sums.items()), "merge changed a shard file")
    out = f"{d}/m.h5"
    check(os.path.exists(out) and os.path.exists(out + ".journal") and os.path.exists(out + ".status"),
          "merged output lacks file, journal or status")
    check(not glob.glob(f"{d}/*.merge.*") and not glob.glob(f"{d}/m.h5.tmp.*") and
          not os.path.exists(out + ".lock"), "temporary files or lock left behind")
    same_values(out, f"{SCRATCH}/ref.h5", "merged vs single run")
    # compressed shards (the default) merge into a compressed output whose chunks are the
    # shards' own bytes: copied raw, never inflated and compressed again
    with h5py.File(out, "r") as f:
        check(f["dist_true"].compression == "gzip" and f["dist_true"].shuffle, "merged output not compressed")
        n = 0
        for i in range(K):
            with h5py.File(f"{d}/{shard_name(i)}", "r") as s:
                for idx in zip(*np.nonzero(s["status"][()] == 1)):
                    for v in ("dist_true", "crit_N", "ks_pvalue"):
                        off = tuple(int(x) for x in idx) + (0,) * (s[v].ndim - 3)
                        n += 1
                        check(f[v].id.read_direct_chunk(off) == s[v].id.read_direct_chunk(off),
                              f"{v} chunk {off}: merged bytes differ from shard {i}'s")
        check(n == 27, f"{n} chunks compared, want 27")
    with h5py.File(out, "r") as f:
        check(np.all(f["status"][()] == 1), "merged status not all 1")
        check(np.all(np.isfinite(f["wall_time"][()])) and np.all(f["rank"][()] >= 0) and
              np.all(f["attempts"][()] >= 1), "merged bookkeeping not sensible")
        # bookkeeping comes from the shard that computed the cell
        for i in range(K):
            with h5py.File(f"{d}/{shard_name(i)}", "r") as s:
                mine = s["status"][()] == 1
                check(np.array_equal(f["wall_time"][()][mine], s["wall_time"][()][mine]),
                      f"wall_time of shard {i}'s cells not carried over")
                check(np.array_equal(f["attempts"][()][mine], s["attempts"][()][mine]),
                      f"attempts of shard {i}'s cells not carried over")
    segs = segments(out)
    check(len(segs) == K + 1, f"provenance has {len(segs)} segments, want {K} + merge")
    check(segs[-1]["hosts"].startswith("merge:") and segs[-1]["mpi_size"] == 0,
          f"last segment is not the merge: {segs[-1]}")
    check(sum(s["cells"] for s in segs[:K]) == 9, f"shard segments count {segs}")
    # an ordinary store: run resumes it, computes nothing, values unchanged
    r = attnsweep(["run", "m.cfg"], cwd=d)
    check(r.returncode == 0 and "(cells 9/9, 9 before this run)" in r.stderr,
          f"run on the merged output: exit {r.returncode}: {r.stderr[-300:]}")
    same_values(out, f"{SCRATCH}/ref.h5", "merged + run vs single run")
    s = attnsweep(["status", "m.h5"], cwd=d)
    check(s.returncode == 0, f"status on merged output: {s.stderr}")
    import xarray as xr
    ds = xr.open_dataset(out, engine="h5netcdf")
    check(int((ds.status == 1).sum()) == 9, "xarray sees not 9 done cells")
    ds.close()
    # an existing output of the shards' config is joined (its cells equal the shards'): merged
    # again, the same values
    r = attnsweep(["merge"] + [shard_name(i) for i in range(K)], cwd=d)
    check(r.returncode == 0 and "joined with the cells the existing output held" in r.stderr,
          f"merge next to the merged output: exit {r.returncode}: {r.stderr}")
    same_values(out, f"{SCRATCH}/ref.h5", "merged again vs single run")
    # an existing output whose cell was damaged: refused naming the cell, then
    # --force replaces it; the old file's values must not survive a forced merge
    with h5py.File(out, "r+") as f:
        f["dist_true"][0, 0, 0] = 42.0
    refused([shard_name(i) for i in range(K)], d, "m.h5: cell (model 0, window 0, L 16)", "existing output")
    r = attnsweep(["merge", "--force"] + [shard_name(i) for i in range(K)], cwd=d)
    check(r.returncode == 0, f"--force merge exit {r.returncode}: {r.stderr}")
    same_values(out, f"{SCRATCH}/ref.h5", "forced merge vs single run")
    check(len(segments(out)) == K + 1, "forced merge kept old segments")


def case_duplicate():
    """Cells done in two shards with equal values merge (attempts summed); a
    differing value is refused."""
    d = fresh_copy("dup")
    # shard 0's cells, copied as if shard 0 had also been run elsewhere
    os.makedirs(f"{d}/again")
    for suffix in ("", ".journal"):
        shutil.copy(f"{d}/{shard_name(0)}{suffix}", f"{d}/again/{shard_name(0)}{suffix}")
    refused([shard_name(0), f"again/{shard_name(0)}", shard_name(1), shard_name(2)], d,
            "given twice", "shard index twice")
    # shard 1 replaced by a copy of shard 0: shard 0's cells are done twice with
    # equal values, shard 1's stay pending
    for suffix in ("", ".journal"):
        shutil.copy(f"{d}/{shard_name(0)}{suffix}", f"{d}/{shard_name(1)}{suffix}")
    shutil.rmtree(f"{d}/again")
    for p in glob.glob(f"{d}/m.shard-1-of-3.h5.status"):
        os.remove(p)
    r = attnsweep(["merge", "--out", "dup.h5", shard_name(0), shard_name(1), shard_name(2)], cwd=d)
    check(r.returncode == 0, f"merge of equal duplicates exit {r.returncode}: {r.stderr}")
    with h5py.File(f"{d}/dup.h5", "r") as f, h5py.File(f"{d}/{shard_name(0)}", "r") as s:
        mine = s["status"][()] == 1
        check(np.array_equal(f["attempts"][()][mine], 2 * s["attempts"][()][mine]),
              "attempts of a cell in two shards not summed")
    # now make one value of the copy differ: flip a bit of the first payload
    jpath = f"{d}/{shard_name(1)}.journal"
    data = bytearray(open(jpath, "rb").read())
    at = 256
    while at < len(data):
        rtype = struct.unpack_from("<I", data, at + 4)[0]
        plen = struct.unpack_from("<Q", data, at + 64)[0]
        if rtype == 3 and plen > 0:
            p0 = at + 80
            data[p0] ^= 0x01
            struct.pack_into("<I", data, at + 72, zlib.crc32(bytes(data[p0:p0 + plen])))
            struct.pack_into("<I", data, at + 76, zlib.crc32(bytes(data[at:at + 76])))
            break
        at += 80 + plen
    open(jpath, "wb").write(bytes(data))
    refused(["--out", "dup2.h5", shard_name(0), shard_name(1), shard_name(2)], d, shard_name(1),
            "different values for the same cell")


def cut_after_first_commit(jpath):
    """Truncates a journal after its first committed cell, as if its run had
    been killed there (kill -9: the view may hold more, the journal is the truth).
    Returns the (window, L) of that cell."""
    data = open(jpath, "rb").read()
    at = 256
    while at < len(data):
        rtype = struct.unpack_from("<I", data, at + 4)[0]
        plen = struct.unpack_from("<Q", data, at + 64)[0]
        at += 80 + plen
        if rtype == 3 and plen > 0:
            with open(jpath, "r+b") as f:
                f.truncate(at)
            return struct.unpack_from("<ii", data, at - 80 - plen + 8)
    raise AssertionError(f"{jpath}: no committed cell")


def case_partial():
    """Shard 1 missing (--partial) and shard 2 killed after its first cell: the
    merge keeps what the journals hold, `attnsweep run` computes the rest."""
    d = fresh_shards("partial", [0, 2])
    present = [shard_name(0), shard_name(2)]
    refused(present, d, "shard 1 of 3 missing", "missing shard")
    kept_w, kept_L = cut_after_first_commit(f"{d}/{shard_name(2)}.journal")
    r = attnsweep(["merge", "--partial"] + present, cwd=d)
    check(r.returncode == 0, f"--partial merge exit {r.returncode}: {r.stderr}")
    with h5py.File(f"{d}/m.h5", "r") as f, h5py.File(f"{d}/{shard_name(0)}", "r") as s0:
        st = f["status"][0]  # one model
        want = (s0["status"][0] == 1).astype(np.uint8)
        want[kept_w, list(f["L"][()]).index(kept_L)] = 1
        check(np.array_equal(st, want), f"partial merge status {st.tolist()}, want {want.tolist()}")
        check(np.all(np.isnan(f["dist_true"][0][st == 0])), "pending cells not NaN")
    r = attnsweep(["run", "m.cfg"], cwd=d)
    check(r.returncode == 0, f"run after --partial merge exit {r.returncode}: {r.stderr[-300:]}")
    n_before = int(want.sum())
    check(f"(cells 9/9, {n_before} before this run)" in r.stderr,
          f"run did not compute exactly the {9 - n_before} pending cells: {r.stderr[-200:]}")
    same_values(f"{d}/m.h5", f"{SCRATCH}/ref.h5", "partial merge + run vs single run")
    segs = segments(f"{d}/m.h5")
    check(len(segs) == 2 + 1 + 1, f"segments after partial merge + run: {segs}")


def case_existing():
    """Shards started next to an existing output skip the cells it holds, and the merge
    joins them from it: a half-done output (shard 0's cells) and a finished one."""
    d = fresh_shards("existing", [0])
    r = attnsweep(["merge", "--partial", shard_name(0)], cwd=d)
    check(r.returncode == 0, f"--partial merge of shard 0: {r.stderr}")
    with h5py.File(f"{d}/m.h5", "r") as f:
        held = int((f["status"][()] == 1).sum())
    check(0 < held < 9, f"the half-done output holds {held} cells")
    for suffix in ("", ".journal", ".status"):
        os.remove(f"{d}/{shard_name(0)}{suffix}")
    this_run = 0
    for i in range(K):
        r = attnsweep(["run", "m.cfg", "--shard", f"{i}/{K}"], cwd=d)
        check(r.returncode == 0, f"shard {i} next to the output: exit {r.returncode}: {r.stderr[-300:]}")
        got = [int(a) - int(b) for a, b in re.findall(r"\(cells (\d+)/\d+, (\d+) before this run\)", r.stderr)]
        this_run += got[0] if got else -100
        if i == 0:
            check(got == [0] and "done in " in r.stderr and "skipped" in r.stderr,
                  f"shard 0 recomputed the output's cells: {r.stderr[-300:]}")
    check(this_run == 9 - held, f"the shards computed {this_run} cells, want the {9 - held} the output lacks")
    segs_before = segments(f"{d}/m.h5")
    r = attnsweep(["merge"] + [shard_name(i) for i in range(K)], cwd=d)
    check(r.returncode == 0 and "joined with the cells the existing output held" in r.stderr,
          f"merge into the half-done output: exit {r.returncode}: {r.stderr}")
    same_values(f"{d}/m.h5", f"{SCRATCH}/ref.h5", "half-done output + shards vs single run")
    segs = segments(f"{d}/m.h5")
    check(segs[:len(segs_before) - 1] == segs_before[:-1] and segs[-1]["hosts"].startswith("merge:"),
          f"the output's own segments come first: {segs}")
    # a finished output: every shard computes nothing, the merge changes no value
    for i in range(K):
        for suffix in ("", ".journal", ".status"):
            os.remove(f"{d}/{shard_name(i)}{suffix}")
        r = attnsweep(["run", "m.cfg", "--shard", f"{i}/{K}"], cwd=d)
        check(r.returncode == 0 and ", 0 this run, " in r.stderr,
              f"shard {i} next to the finished output computed cells: {r.stderr[-300:]}")
    r = attnsweep(["merge"] + [shard_name(i) for i in range(K)], cwd=d)
    check(r.returncode == 0, f"merge into the finished output: {r.stderr}")
    same_values(f"{d}/m.h5", f"{SCRATCH}/ref.h5", "finished output + shards vs single run")
    # an existing output of another config is refused (--force would replace it)
    os.makedirs(f"{d}/other")
    shutil.copy(f"{SCRATCH}/tokens.npy", f"{d}/other")
    write_config(f"{d}/other/m.cfg", "m.h5", extra="metrics = { seed = 7; };")
    r = attnsweep(["run", "m.cfg", "--set", "windows.count=1"], cwd=f"{d}/other")
    check(r.returncode == 0, f"other-config output: {r.stderr[-300:]}")
    for i in range(K):
        for suffix in ("", ".journal"):
            shutil.copy(f"{d}/{shard_name(i)}{suffix}", f"{d}/other/{shard_name(i)}{suffix}")
    refused([shard_name(i) for i in range(K)], f"{d}/other", "existing output was made with another config",
            "existing output of another config")


def case_refusals():
    d = fresh_copy("refuse")
    all_shards = [shard_name(i) for i in range(K)]
    refused(["m.h5"], d, "m.h5", "not a shard name")
    refused([shard_name(0), "m.shard-1-of-4.h5"], d, "m.shard-1-of-4.h5", "other K")
    refused(all_shards + ["--out", shard_name(0)], d, shard_name(0), "output is a shard")
    # a shard of another config (commit_every changes the config text, not the axes)
    os.makedirs(f"{d}/other")
    shutil.copy(f"{SCRATCH}/tokens.npy", f"{d}/other")
    write_config(f"{d}/other/m.cfg", "m.h5", extra="metrics = { seed = 7; };")
    r = attnsweep(["run", "m.cfg", "--shard", f"1/{K}"], cwd=f"{d}/other")
    check(r.returncode == 0, f"other-config shard exit {r.returncode}: {r.stderr[-300:]}")
    refused([shard_name(0), f"other/{shard_name(1)}", shard_name(2)], d, f"other/{shard_name(1)}",
            "another config")
    # same config, other axes: a copy of shard 1 whose window_start was edited
    os.makedirs(f"{d}/axes")
    for suffix in ("", ".journal"):
        shutil.copy(f"{d}/{shard_name(1)}{suffix}", f"{d}/axes/{shard_name(1)}{suffix}")
    with h5py.File(f"{d}/axes/{shard_name(1)}", "r+") as f:
        f["window_start"][1] = 7
    refused([shard_name(0), f"axes/{shard_name(1)}", shard_name(2)], d, f"axes/{shard_name(1)}",
            "other axes")
    # a view whose N axis disagrees with its own journal
    with h5py.File(f"{d}/axes/{shard_name(1)}", "r+") as f:
        f["window_start"][1] = 64
        f["N"][0] = 3
    refused([shard_name(0), f"axes/{shard_name(1)}", shard_name(2)], d, f"axes/{shard_name(1)}",
            "view and journal disagree")
    # no journal
    os.makedirs(f"{d}/nojournal")
    shutil.copy(f"{d}/{shard_name(2)}", f"{d}/nojournal/{shard_name(2)}")
    refused([shard_name(0), shard_name(1), f"nojournal/{shard_name(2)}"], d,
            f"nojournal/{shard_name(2)}", "no journal")
    # usage
    r = attnsweep(["merge", "--help"], cwd=d)
    check(r.returncode == 0 and "usage: attnsweep merge" in r.stdout, "merge --help")
    r = attnsweep(["merge", "--bogus"] + all_shards, cwd=d)
    check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, f"bad option: {r.stderr!r}")
    r = attnsweep(["merge"], cwd=d)
    check(r.returncode == 2, "no shards: exit 2")


def main():
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(3)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=1000).astype("<u2"))
    t0 = time.time()
    make_reference()
    make_shards(f"{SCRATCH}/shards")
    print(f"fixtures: reference + {K} shards in {time.time() - t0:.1f} s", flush=True)
    run_cases([case_equal, case_duplicate, case_partial, case_existing, case_refusals], ONLY)
    sys.exit(summary("test_merge"))


if __name__ == "__main__":
    main()
