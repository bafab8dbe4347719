#!/usr/bin/python3
"""End-to-end tests of `attnsweep run`: ranks, SIGTERM + resume,
refused and extended configs, and the metric values in the file
against an independent numpy evaluation of docs/metrics.md from a `dump`.

usage: test_sweep.py ATTNSWEEP MODEL_DIR SCRATCH [case ...]
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bruteforce
from bruteforce import sample_rows, sampled_mean_se
from sweeptest import ENV, check, run_cases, same_values, signal_delivered, summary, wait_for_phase

BIN, MODEL, SCRATCH = sys.argv[1:4]
ONLY = set(sys.argv[4:])


def write_config(path, output, L="[16, 32, 64]", windows=3, extra=""):
    with open(path, "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = {windows}; offset = 0; stride = 64; }};
grid = {{ L = {L}; N = [1, 2, 4, 8]; T = [0.01, 1.0, 8.0];
         eps = [1e-3, 0.1]; normalizer = ["softmax", "sparsemax"]; }};
output = "{output}";
runtime = {{ commit_every = 2; }};
{extra}
""")


def run(args, ranks=1, env=None, **kw):
    cmd = [BIN, "run"] + args
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    return subprocess.run(cmd, env=env or ENV, cwd=SCRATCH, capture_output=True, text=True, **kw)


def case_ranks():
    for n in (1, 2, 4):
        write_config(f"{SCRATCH}/r{n}.cfg", f"r{n}.h5")
        p = run([f"r{n}.cfg"], ranks=n, env=dict(ENV, ATTNSWEEP_TIMINGS="1"))
        check(p.returncode == 0, f"{n} ranks: exit {p.returncode}: {p.stderr[-500:]}")
        # the master's line says which commit path ran: with workers, the writer thread
        # (src/mpi/writer.c), in at least one batch; alone, the rank commits itself
        line = [l for l in p.stderr.splitlines() if l.startswith("timings: master:")]
        want = r"on the writer thread in [1-9]" if n > 1 else r"synchronous in [1-9]"
        check(len(line) == 1 and re.search(want, line[0]) is not None,
              f"{n} ranks: the master's timings line {line!r} should match {want!r}")
    for n in (2, 4):
        same_values(f"{SCRATCH}/r1.h5", f"{SCRATCH}/r{n}.h5", f"1 vs {n} ranks")
    with h5py.File(f"{SCRATCH}/r1.h5", "r") as f:
        check((f["status"][()] == 1).all(), "every cell done")
        check(f["dist_true"].dims[0][0].name.endswith("model") and
              f["dist_true"].dims[1][0].name.endswith("window"), "h5py sees dimension names")
        check((f["attempts"][()] == 1).all(), "one attempt per cell in a clean run")
        check(f.attrs.get("model_kind") == "synthetic-random",
              f"model_kind of attnsweep synth's model: {f.attrs.get('model_kind')!r}")
        check(f.attrs.get("logits") == "raw", f"logits attribute: {f.attrs.get('logits')!r}")


def journal_commits(path):
    """(header version, [(flags, payload_len)] of every JR_COMMIT) of a journal, read from
    its layout (include/store/journal.h): a 256-byte header, then records of 80 bytes of
    fields (type at 4, the flags word at 28, payload_len at 64) each followed by its payload."""
    with open(path, "rb") as f:
        data = f.read()
    version = int.from_bytes(data[8:12], "little")
    out, pos = [], 256
    while pos + 80 <= len(data):
        typ = int.from_bytes(data[pos + 4:pos + 8], "little")
        flags = int.from_bytes(data[pos + 28:pos + 32], "little") & 0xffff
        plen = int.from_bytes(data[pos + 64:pos + 72], "little")
        if typ == 3:
            out.append((flags, plen))
        pos += 80 + plen
    return version, out


JF_COMPACT, JF_DEFLATE = 1, 2


def same_chunks_as_hdf5(z_path, plain_path, what):
    """Every chunk the workers deflated (z_path) equals the chunk HDF5's own shuffle +
    deflate(1) + fletcher32 pipeline stores for the same values (written here through h5py
    into a new file), compared raw with read_direct_chunk: the worker-side Fletcher32
    checksum is HDF5's, byte for byte."""
    ref = f"{SCRATCH}/hdf5_ref.h5"
    with h5py.File(z_path, "r") as z, h5py.File(plain_path, "r") as p, h5py.File(ref, "w") as r:
        n = 0
        for v in ("dist_true", "rows_used", "grad_fd", "ks_pvalue", "crit_N"):
            d = r.create_dataset(v, data=p[v][()], chunks=z[v].chunks, shuffle=True, compression="gzip",
                                 compression_opts=1, fletcher32=True)
            st = p["status"][()]
            for idx in zip(*np.nonzero(st == 1)):
                off = tuple(int(i) for i in idx) + (0,) * (z[v].ndim - 3)
                fz, bz = z[v].id.read_direct_chunk(off)
                fr, br = d.id.read_direct_chunk(off)
                check(fz == 0 and fz == fr and bz == br,
                      f"{what}: {v} chunk {off}: {len(bz)} bytes as stored, HDF5's own {len(br)}")
                n += 1
    os.unlink(ref)
    print(f"{what}: {n} chunks equal to HDF5's own filter output", flush=True)


def filters(path, v="dist_true"):
    with h5py.File(path, "r") as f:
        return f[v].compression, f[v].shuffle


def case_compress():
    """Chunks are shuffle + deflate by default (the workers compress, the master stores the
    bytes) and plain with runtime.compress = false; the values are the same bit for bit,
    the chunks are HDF5's own filter output, the journal holds the deflated payloads."""
    write_config(f"{SCRATCH}/cz.cfg", "cz.h5")
    for name, extra, ranks in (("cp", ["--set", "runtime.compress=false"], 1), ("cz", [], 2),
                               ("cz1", [], 1)):
        p = run(["cz.cfg", "--set", f'output="{name}.h5"'] + extra, ranks=ranks,
                env=dict(ENV, ATTNSWEEP_TIMINGS="1"))
        check(p.returncode == 0, f"{name}: exit {p.returncode}: {p.stderr[-500:]}")
        line = [l for l in p.stderr.splitlines() if l.startswith("timings: deflate on the workers")]
        check(bool(line) == (name != "cp"), f"{name}: deflate timings line {line!r}")
        if line:
            print(f"{name}: {line[0]}", flush=True)
    same_values(f"{SCRATCH}/cz.h5", f"{SCRATCH}/cp.h5", "compressed (2 ranks) vs plain chunks")
    same_values(f"{SCRATCH}/cz1.h5", f"{SCRATCH}/cp.h5", "compressed (1 rank) vs plain chunks")
    with h5py.File(f"{SCRATCH}/cz.h5", "r") as z, h5py.File(f"{SCRATCH}/cp.h5", "r") as plain:
        for v in ("dist_true", "sep_ratio", "grad_fd", "ks_pvalue"):
            check(z[v].compression == "gzip" and z[v].compression_opts == 1 and z[v].shuffle and z[v].fletcher32,
                  f"{v}: default chunks not shuffle + deflate 1 + fletcher32")
            check(plain[v].compression is None and not plain[v].shuffle and plain[v].fletcher32,
                  f"{v}: compress = false chunks are compressed, or carry no checksum")
    same_chunks_as_hdf5(f"{SCRATCH}/cz.h5", f"{SCRATCH}/cp.h5", "worker-deflated chunks")
    size_z, size_p = os.path.getsize(f"{SCRATCH}/cz.h5"), os.path.getsize(f"{SCRATCH}/cp.h5")
    check(size_z < size_p, f"compressed file {size_z} B is not smaller than the plain {size_p} B")
    vz, cz = journal_commits(f"{SCRATCH}/cz.h5.journal")
    vp, cpl = journal_commits(f"{SCRATCH}/cp.h5.journal")
    check(vz == 4 and vp == 4, f"journal version {vz}, {vp}: want 4")
    check(cz and all(f & JF_DEFLATE for f, _ in cz), f"compressed run's commits all JF_DEFLATE: {cz[:4]}")
    check(cpl and not any(f & JF_DEFLATE for f, _ in cpl), "plain run's commits carry no JF_DEFLATE")


def case_compress_resume():
    """The dataset's own filters decide how a resumed output stores, never the config:
    an output made plain (as every output before compression was the default) resumed and
    extended with the default config stays plain, a compressed one resumed with
    compress = false stays compressed; both equal a fresh run's values."""
    for n in os.listdir(SCRATCH):
        if n.startswith(("old", "new", "fresh")):
            os.unlink(os.path.join(SCRATCH, n))
    write_config(f"{SCRATCH}/old.cfg", "old.h5", windows=2)
    check(run(["old.cfg", "--set", "runtime.compress=false"]).returncode == 0, "plain output")
    write_config(f"{SCRATCH}/new.cfg", "new.h5", windows=2)
    check(run(["new.cfg"]).returncode == 0, "compressed output")
    write_config(f"{SCRATCH}/old3.cfg", "old.h5", windows=3)
    r = run(["old3.cfg"], ranks=2)
    check(r.returncode == 0, f"plain output resumed with the default config: {r.stderr[-400:]}")
    check(filters(f"{SCRATCH}/old.h5") == (None, False), f"stays plain: {filters(f'{SCRATCH}/old.h5')}")
    write_config(f"{SCRATCH}/new3.cfg", "new.h5", windows=3)
    r = run(["new3.cfg", "--set", "runtime.compress=false"], ranks=2)
    check(r.returncode == 0, f"compressed output resumed with compress = false: {r.stderr[-400:]}")
    check(filters(f"{SCRATCH}/new.h5") == ("gzip", True), f"stays compressed: {filters(f'{SCRATCH}/new.h5')}")
    write_config(f"{SCRATCH}/fresh.cfg", "fresh.h5", windows=3)
    check(run(["fresh.cfg"]).returncode == 0, "fresh run")
    same_values(f"{SCRATCH}/old.h5", f"{SCRATCH}/fresh.h5", "plain output extended vs fresh")
    same_values(f"{SCRATCH}/new.h5", f"{SCRATCH}/fresh.h5", "compressed output extended vs fresh")
    _, commits = journal_commits(f"{SCRATCH}/old.h5.journal")
    check(not any(f & JF_DEFLATE for f, _ in commits), "the plain output's journal holds plain cells only")


def case_compress_kill():
    """kill -9 in the middle of a compressed commit -- the chunks written and flushed but
    not journaled, or journaled but not fsynced -- then a resume: the same values as a
    clean run (the torture test kills at random points, this one at the two inside)."""
    write_config(f"{SCRATCH}/kref.cfg", "kref.h5", windows=4)
    check(run(["kref.cfg"]).returncode == 0, "reference run")
    for point in ("data_flushed", "journal_written"):
        out = f"k_{point}"
        for n in os.listdir(SCRATCH):
            if n.startswith(out + "."):
                os.unlink(os.path.join(SCRATCH, n))
        write_config(f"{SCRATCH}/{out}.cfg", f"{out}.h5", windows=4)
        phase, release = f"{SCRATCH}/{out}.phase", f"{SCRATCH}/{out}.release"
        held = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase, ATTNSWEEP_TEST_HOLD=f"{point} 2",
                    ATTNSWEEP_TEST_RELEASE=release)
        p = subprocess.Popen([BIN, "run", f"{out}.cfg"], env=held, cwd=SCRATCH, stderr=subprocess.PIPE,
                             text=True)
        check(wait_for_phase(phase, point, 2, p), f"{point}: the run reached its second commit")
        p.kill()
        p.communicate(timeout=600)
        r = run([f"{out}.cfg"])
        check(r.returncode == 0, f"resume after kill -9 at {point}: {r.stderr[-400:]}")
        same_values(f"{SCRATCH}/kref.h5", f"{SCRATCH}/{out}.h5", f"kill -9 at {point} + resume")
        check(filters(f"{SCRATCH}/{out}.h5") == ("gzip", True), f"{point}: the resumed output is compressed")


def case_sigterm():
    write_config(f"{SCRATCH}/t.cfg", "t.h5", windows=6)
    # The store's test hook (attnsweep_test) holds the writer once the first window (3 cells)
    # is durable, so the signal lands mid-run however fast or loaded the machine is; the hold
    # ends when the release file exists.
    phase, release = f"{SCRATCH}/t.phase", f"{SCRATCH}/t.release"
    held = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase, ATTNSWEEP_TEST_HOLD="journal_synced 1",
                ATTNSWEEP_TEST_RELEASE=release)
    p = subprocess.Popen([BIN, "run", "t.cfg"], env=held, cwd=SCRATCH, stderr=subprocess.PIPE,
                         text=True)
    check(wait_for_phase(phase, "journal_synced", 1, p), "the run reached its first commit")
    p.send_signal(signal.SIGTERM)
    signal_delivered(p.pid, signal.SIGTERM)
    open(release, "w").close()
    _, err = p.communicate(timeout=600)
    check(p.returncode == 3, f"SIGTERM gives the resumable exit code 3, got {p.returncode}: {err[-300:]}")
    with h5py.File(f"{SCRATCH}/t.h5", "r") as f:  # a clean stop leaves a file h5py opens
        st = f["status"][()]
    check(not os.path.exists(f"{SCRATCH}/t.h5.lock"), "lock removed")
    check(int((st == 1).sum()) == 3, f"the window committed before the signal is kept and no other "
          f"is started after it: {int((st == 1).sum())} of {st.size} cells done, want 3")
    print(f"sigterm: {int((st == 1).sum())} of {st.size} cells done at the stop", flush=True)
    fin = run(["t.cfg"])
    check(fin.returncode == 0, f"resume after SIGTERM: {fin.stderr[-300:]}")
    write_config(f"{SCRATCH}/tref.cfg", "tref.h5", windows=6)
    check(run(["tref.cfg"]).returncode == 0, "reference run")
    same_values(f"{SCRATCH}/tref.h5", f"{SCRATCH}/t.h5", "after SIGTERM and resume")


def stop_after(cfg, late_s, sets=()):
    """Runs `attnsweep run cfg` alone (rank 0 computes) with the writer held right after the
    first window's dispatch record, sends SIGUSR1 there, and lets the window start only
    late_s seconds after the signal was delivered: a window that ends more than late_s after
    the signal, whatever the machine's speed. Returns (exit code, stderr, cells done)."""
    out = cfg.replace(".cfg", ".h5")
    phase, release = f"{SCRATCH}/{cfg}.phase", f"{SCRATCH}/{cfg}.release"
    held = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=phase, ATTNSWEEP_TEST_HOLD="dispatch_written 1",
                ATTNSWEEP_TEST_RELEASE=release)
    args = [BIN, "run", cfg] + [a for kv in sets for a in ("--set", kv)]
    p = subprocess.Popen(args, env=held, cwd=SCRATCH, stderr=subprocess.PIPE, text=True)
    check(wait_for_phase(phase, "dispatch_written", 1, p), f"{cfg}: the first window was dispatched")
    p.send_signal(signal.SIGUSR1)
    check(signal_delivered(p.pid, signal.SIGUSR1), f"{cfg}: SIGUSR1 delivered")
    time.sleep(late_s)  # a lower bound only: a slower machine makes the window later still
    open(release, "w").close()
    _, err = p.communicate(timeout=600)
    with h5py.File(f"{SCRATCH}/{out}", "r") as f:
        done = int((f["status"][()] == 1).sum())
    return p.returncode, err, done


def case_stop_grace():
    """runtime.stop_grace: after SIGUSR1 the running window may finish for
    that long; the default lets a window that ends 6 s after the signal (the old fixed grace
    was 5 s) be kept, a 2 s grace abandons it; the stop line says what it waits for."""
    write_config(f"{SCRATCH}/g.cfg", "g.h5", windows=3)
    rc, err, done = stop_after("g.cfg", 6.0)
    check(rc == 3, f"default grace: exit 3 after SIGUSR1, got {rc}: {err[-300:]}")
    check(done == 3, f"default grace: the window running at the signal (3 cells) is kept, "
          f"{done} cells done: {err[-400:]}")
    check("stopping: no new windows; waiting up to 4m00s (stop grace) for the 1 running windows" in err,
          f"the stop line says what it waits for and how long: {err[-400:]}")
    write_config(f"{SCRATCH}/a.cfg", "a.h5", windows=3)
    rc, err, done = stop_after("a.cfg", 6.0, sets=["runtime.stop_grace=2"])
    check(rc == 3, f"--set runtime.stop_grace=2: exit 3, got {rc}: {err[-300:]}")
    check(done == 0, f"a window still running after a 2 s grace is abandoned: {done} cells done")
    check("waiting up to 2 s (stop grace)" in err and "stop grace of 2 s over: abandoning 1 running" in err,
          f"the lines say the grace and that it ran out: {err[-400:]}")
    fin = run(["a.cfg"])
    check(fin.returncode == 0, f"the abandoned window is computed on resume: {fin.stderr[-300:]}")
    bad = run(["a.cfg", "--set", "runtime.stop_grace=0"])
    check(bad.returncode == 1 and "runtime.stop_grace" in bad.stderr,
          f"a grace of 0 is refused naming the key: {bad.stderr.strip()}")


def done_cells(status_path):
    """Cells done according to the status file the master replaces atomically."""
    import json
    try:
        return json.load(open(status_path)).get("done", 0)
    except (OSError, ValueError):
        return 0


def digest(path):
    import hashlib
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def case_changed_config():
    write_config(f"{SCRATCH}/c.cfg", "c.h5")
    check(run(["c.cfg"]).returncode == 0, "first run")
    before = {s: digest(f"{SCRATCH}/c.h5{s}") for s in ("", ".journal")}
    p = run(["c.cfg", "--set", "metrics.seed=2"])
    check(p.returncode == 1, f"a changed seed is refused (exit {p.returncode})")
    check("metrics.seed" in p.stderr, f"the message names the key: {p.stderr.strip()}")
    check(len(p.stderr.strip().splitlines()) == 1, f"one line: {p.stderr!r}")
    after = {s: digest(f"{SCRATCH}/c.h5{s}") for s in ("", ".journal")}
    check(before == after, "the refused run left the files unchanged")


def case_extend():
    write_config(f"{SCRATCH}/e.cfg", "e.h5", L="[16, 64]", windows=2)
    check(run(["e.cfg"]).returncode == 0, "first run")
    write_config(f"{SCRATCH}/e.cfg", "e.h5", L="[16, 32, 64]", windows=3)
    p = run(["e.cfg"])
    check(p.returncode == 0, f"extension with a new L and a new window: {p.stderr[-400:]}")
    check("4 before this run" in p.stderr, f"old cells kept: {p.stderr[-200:]}")
    write_config(f"{SCRATCH}/eref.cfg", "eref.h5", L="[16, 32, 64]", windows=3)
    check(run(["eref.cfg"]).returncode == 0, "reference run")
    same_values(f"{SCRATCH}/eref.h5", f"{SCRATCH}/e.h5", "extended vs direct")


# --- docs/metrics.md, written again in numpy: tests/lib/bruteforce.py ----------------

def dump_window(start, L, name):
    """`attnsweep dump` of the L tokens from `start` of tokens.npy, opened (SCRATCH/name.h5)."""
    toks = np.load(f"{SCRATCH}/tokens.npy")[start:start + L]
    np.savetxt(f"{SCRATCH}/{name}.txt", toks[None, :], fmt="%d")
    d = subprocess.run([BIN, "dump", "--model", MODEL, "--tokens", f"{SCRATCH}/{name}.txt", "--length",
                        str(L), "--out", f"{SCRATCH}/{name}.h5"], env=ENV, capture_output=True, text=True)
    check(d.returncode == 0, f"dump: {d.stderr}")
    return h5py.File(f"{SCRATCH}/{name}.h5", "r")


def brute_rows(f, g):
    """The brute force's per-row values of heads 0 and 3 of layers 0 and 1 of dump g at every
    (T, normalizer) of results file f: yields (layer, head, iT, T, iz, norm, rows)."""
    Ns, Ts = list(f["N"][()]), list(f["T"][()])
    norms = [s.decode() if isinstance(s, bytes) else s for s in f["normalizer"][()]]
    for layer in (0, 1):
        sc, v = g[f"layer_{layer:02d}/scores"][()], g[f"layer_{layer:02d}/v"][()]
        for head in (0, 3):
            bf = bruteforce.Head(sc[head], v[head])
            for iT, T in enumerate(Ts):
                for iz, norm in enumerate(norms):
                    yield layer, head, iT, T, iz, norm, bf.rows(Ns, T, norm, bound=False, sep=False)


def case_dump_crosscheck():
    write_config(f"{SCRATCH}/m.cfg", "m.h5", L="[32]", windows=1)
    check(run(["m.cfg"]).returncode == 0, "run")
    g = dump_window(0, 32, "w0")
    f = h5py.File(f"{SCRATCH}/m.h5", "r")
    Ns = list(f["N"][()])
    worst = 0.0
    for layer, head, iT, T, iz, norm, rows in brute_rows(f, g):
        for iN, N in enumerate(Ns):
            for var in ("dist_true", "dist_expect"):
                want, cnt = bruteforce.cut_mean(rows[var][iN], 32)
                got = f[var][0, 0, 0, iN, iT, iz, layer, head]
                err = abs(got - want) / max(abs(want), 1e-6)
                worst = max(worst, err)
                check(err < 1e-4, f"L{layer} h{head} N={N} T={T} {norm} {var}: {got} vs {want}")
            got_rows = f["rows_used"][0, 0, 0, iN, iT, iz, layer, head]
            check(got_rows == cnt, f"rows_used {got_rows} vs {cnt}")
        ent, _ = bruteforce.cut_mean(rows["entropy"], 32)
        got = f["entropy"][0, 0, 0, iT, iz, layer, head]
        check(abs(got - ent) <= 1e-4 * max(1, abs(ent)), f"entropy {got} vs {ent}")
    print(f"dump_crosscheck: worst relative difference {worst:.2e}", flush=True)


PER_N = ("dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower", "sep_upper",
         "sep_marginal", "rows_used", "ks_stat", "ks_pvalue", "crit_N", "crit_N_censored")


def missing(x):
    """NaN for floats, the int fill (STORE_INT_FILL) for rows_used, crit_N, crit_N_censored."""
    return np.isnan(x) if x.dtype.kind == "f" else x == -2147483647


def same(x, y):
    """Bit for bit for floats (NaN payloads too), equal elsewhere (strings, ints)."""
    if x.dtype.kind == "f":
        return x.shape == y.shape and x.tobytes() == y.tobytes()
    return x.shape == y.shape and np.array_equal(x, y)


def case_switches():
    """metrics.per_N_T = [8.0] and metrics.grad_exact / dist_expect = false: what is switched
    off is stored as missing (NaN / int fill) along the one T axis, and every other value
    equals the all-on run bit for bit (dist_true without dist_expect: the same float32)."""
    write_config(f"{SCRATCH}/all.cfg", "all.h5")
    write_config(f"{SCRATCH}/pn.cfg", "pn.h5",
                 extra="metrics = { per_N_T = [8.0]; grad_exact = false; };")
    write_config(f"{SCRATCH}/de.cfg", "de.h5", extra="metrics = { dist_expect = false; };")
    for c in ("all", "pn", "de"):
        p = run([f"{c}.cfg"])
        check(p.returncode == 0, f"{c}: exit {p.returncode}: {p.stderr[-400:]}")
    with h5py.File(f"{SCRATCH}/all.h5", "r") as fa, h5py.File(f"{SCRATCH}/pn.h5", "r") as fp, \
            h5py.File(f"{SCRATCH}/de.h5", "r") as fd:
        Ts = list(fa["T"][()])
        i8 = Ts.index(8.0)
        for k, d in fa.items():
            if not isinstance(d, h5py.Dataset) or k in ("wall_time", "rank", "attempts"):
                continue
            a, pn, de = d[()], fp[k][()], fd[k][()]
            dims = [d.dims[i][0].name.rsplit("/", 1)[-1] if len(d.dims[i]) else "" for i in range(d.ndim)]
            if k in PER_N:
                t = dims.index("T")
                keep = np.take(pn, [i8], axis=t)
                check(same(np.take(a, [i8], axis=t), keep),
                      f"per_N_T: {k} at T = 8 equals the all-on run")
                other = np.delete(pn, i8, axis=t)
                check(missing(other).all(), f"per_N_T: {k} is missing at the other T")
            elif k == "grad_exact":
                check(np.isnan(pn).all(), "grad_exact = false: grad_exact is NaN")
            else:
                check(same(a, pn), f"per_N_T: {k} unchanged")
            if k in ("dist_expect", "ks_stat", "ks_pvalue", "crit_N", "crit_N_censored"):
                check(missing(de).all(), f"dist_expect = false: {k} is missing")
            else:
                check(same(a, de), f"dist_expect = false: {k} unchanged")
    p = subprocess.run([BIN, "plan", "pn.cfg"], env=ENV, cwd=SCRATCH, capture_output=True, text=True)
    check(p.returncode == 0, f"plan of a switched config: {p.stderr[-300:]}")


def case_rows():
    """metrics.query_rows = "sample:K" (docs/metrics.md 9.1). K >= the rows of every L: each
    variable of the all-rows run bit for bit, SE 0. K < the rows: the sampled means and their
    SE against numpy on a dump (the rule reimplemented from the doc, bruteforce.py), rows_used
    and rows_sampled the sampled counts, the means within a few SE of the full ones, and the
    same file from 1 and 2 ranks (the rows depend on the cell, not on who computes it)."""
    write_config(f"{SCRATCH}/all.cfg", "all.h5", L="[16, 64]")
    write_config(f"{SCRATCH}/k64.cfg", "k64.h5", L="[16, 64]", extra='metrics = { query_rows = "sample:64"; };')
    write_config(f"{SCRATCH}/k8.cfg", "k8.h5", L="[16, 64]", extra='metrics = { query_rows = "sample:8"; };')
    write_config(f"{SCRATCH}/k8r2.cfg", "k8r2.h5", L="[16, 64]", extra='metrics = { query_rows = "sample:8"; };')
    for c, ranks in (("all", 1), ("k64", 1), ("k8", 1), ("k8r2", 2)):
        p = run([f"{c}.cfg"], ranks=ranks)
        check(p.returncode == 0, f"{c}: exit {p.returncode}: {p.stderr[-400:]}")
    same_values(f"{SCRATCH}/k8.h5", f"{SCRATCH}/k8r2.h5", "sample:8, 1 vs 2 ranks")
    with h5py.File(f"{SCRATCH}/all.h5", "r") as fa, h5py.File(f"{SCRATCH}/k64.h5", "r") as fk:
        check(fa.attrs["query_rows"] == "all" and fk.attrs["query_rows"] == "sample:64", "root attribute")
        check("dist_true_se" not in fa and "rows_sampled" not in fa, "all rows: no SE variables")
        for k, d in fa.items():
            if isinstance(d, h5py.Dataset) and k not in ("wall_time", "rank", "attempts"):
                check(same(d[()], fk[k][()]), f"sample:64 = all rows: {k} bit for bit")
        se = fk["dist_true_se"][()]
        check(np.all((se == 0) | np.isnan(fk["dist_true"][()])), "sample:64: SE 0 where a mean is")
    # the sampled cell (window 1, L = 64) against numpy on its dump
    g = dump_window(64, 64, "w1")
    f, fa = h5py.File(f"{SCRATCH}/k8.h5", "r"), h5py.File(f"{SCRATCH}/all.h5", "r")
    Ns, L = list(f["N"][()]), 64
    rows = sample_rows(8, 1, L, int(f.attrs["seed"]), 1)
    check(int(f["rows_sampled"][0, 1, 1]) == len(rows) == 8, f"rows_sampled {f['rows_sampled'][0, 1, 1]}")
    worst, z = 0.0, []
    for layer, head, iT, T, iz, norm, r in brute_rows(f, g):
        for iN, N in enumerate(Ns):
            for var in ("dist_true", "dist_expect"):
                m, s_e, k = sampled_mean_se(r[var][iN], rows, L - N)
                at = (0, 1, 1, iN, iT, iz, layer, head)
                got, got_se = f[var][at], f[var + "_se"][at]
                err = max(abs(got - m) / max(abs(m), 1e-6), abs(got_se - s_e) / max(abs(s_e), 1e-6))
                worst = max(worst, err)
                check(err < 1e-4, f"L{layer} h{head} N={N} T={T} {norm} {var}: {got} +- {got_se} vs {m} +- {s_e}")
                check(f["rows_used"][at] == k, f"rows_used {f['rows_used'][at]} vs {k}")
                if got_se > 0:
                    z.append(abs(got - fa[var][at]) / got_se)
        m, s_e, k = sampled_mean_se(r["entropy"], rows, L - 1)
        at = (0, 1, 1, iT, iz, layer, head)
        check(abs(f["entropy"][at] - m) <= 1e-4 * max(1, abs(m)) and
              abs(f["entropy_se"][at] - s_e) <= 1e-4 * max(1e-3, abs(s_e)),
              f"entropy {f['entropy'][at]} +- {f['entropy_se'][at]} vs {m} +- {s_e}")
    # the full means within a few SE (the SRS formula overstates a stratified sample's SE)
    z = np.array(z)
    check(len(z) > 50 and np.mean(z < 2) >= 0.9 and z.max() < 5,
          f"|sampled - full| / SE: {len(z)} cells, {np.mean(z < 2):.2f} below 2, max {z.max():.2f}")
    print(f"rows: worst relative difference {worst:.2e}; |sampled - full| / SE median "
          f"{np.median(z):.2f}, max {z.max():.2f}", flush=True)


def main():
    if os.path.exists(SCRATCH):
        shutil.rmtree(SCRATCH)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(3)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=1000).astype("<u2"))
    # kill -9 of the whole job at random moments and in every commit phase,
    # then resume: tests/reliability/test_torture.py.
    cases = [case_ranks, case_changed_config, case_extend, case_dump_crosscheck, case_sigterm,
             case_compress, case_compress_resume, case_compress_kill, case_stop_grace,
             case_switches, case_rows]
    run_cases(cases, ONLY, label="case ")
    sys.exit(summary("test_sweep"))


main()
