#!/usr/bin/python3
"""peer_metrics.py -- docs/metrics.md's per-head metrics as a researcher would write them in
vectorized PyTorch on the CPU (the paper's own code was PyTorch): the peer attnsweep's C kernel
is measured against. Every per-N metric (dist_true, dist_bound, dist_expect, sep_ratio,
sep_lower, sep_upper, sep_marginal, rows_used) and every per-T metric (entropy, entropy_norm,
grad_exact, grad_bound, grad_fd), softmax, rows = "visible", distance = "per_token", raw
logits; ks_* and crit_N are a test across heads (scipy's KS on the heads' means), not part of
one head's job, and are left out on both sides.

Batched: all rows of a head at once as [L, L] arrays (row t, key j; keys j > t masked), all T
of a chunk at once as a leading dimension ([nT, L, L]; the chunk is as many T as fit in
--mem-gb), one N at a time (each N is a few matrix products over the whole [nT, L, L] block);
d1 and m (section 4.2) grow with N by a running maximum over the selected keys' rows of the
pairwise distances. Shares no code with src/kernels; float64 throughout; squared distances by
the Gram expansion clamped at 0 (no cancellation fallback: heads without near-twin vectors).

Modes:
  peer_metrics.py check ATTNSWEEP MODEL SCRATCH
      the peer against tests/lib/bruteforce.py on a small random head (dist_true,
      dist_expect, dist_bound, sep_ratio, entropy, entropy_norm, grad_exact: 1e-9 relative;
      sep_ratio within the brute force's ambiguous share), then against `attnsweep run` on
      MODEL, the tiny synthetic model (every variable above, including those the brute force does
      not have: sep_lower, sep_upper, sep_marginal, grad_fd, grad_bound; 2e-5 relative, the
      file is float32; counts within sep_marginal). A ctest (peer_metrics_check).
  peer_metrics.py bench ATTNSWEEP MODEL SCRATCH [--L 256,1024] [--heads H] [--mem-gb G]
      the paper's grid (28 N, 22 T, 3 eps) on layer 0 of MODEL over the first L tokens of
      War and Peace (tests/bench/bench_peer.sh passes the trained test model): the C kernel's
      metrics CPU seconds per head (`attnsweep run`, ATTNSWEEP_TIMINGS, one thread) and the
      peer's (torch.set_num_threads(1), process CPU time), in the same run, and their ratio.
"""
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch

F64 = torch.float64

# ---------------------------------------------------------------- directions (section 7) --
# u of (seed, window, layer, head, t, eps index): a normalized vector of standard normals,
# Box-Muller pairs of splitmix64 hashes of their counters (numpy's log/sin/cos: within
# ~1e-15 of the kernel's series, docs/metrics.md section 7).

U64 = np.uint64


def mix64(x):
    with np.errstate(over="ignore"):
        x = x + U64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> U64(27))) * U64(0x94D049BB133111EB)
    return x ^ (x >> U64(31))


def direction_keys(seed, window, layer, head, ts, e):
    k = mix64(np.array([seed], dtype=U64) ^ U64(0x6174746E73776570))
    for v in (window, layer, head):
        k = mix64(k ^ U64(v))
    k = mix64(k ^ np.asarray(ts, dtype=U64))
    return mix64(k ^ U64(e))


def directions(seed, window, layer, head, L, e):
    """[L, L]: row t holds u over its t + 1 visible keys, 0 beyond."""
    keys = direction_keys(seed, window, layer, head, np.arange(L), e)[:, None]
    p = np.arange((L + 1) // 2, dtype=U64)
    h1, h2 = mix64(U64(2) * p)[None, :], mix64(U64(2) * p + U64(1))[None, :]
    r1, r2 = mix64(keys ^ h1), mix64(keys ^ h2)
    u1 = ((r1 >> U64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    u2 = (r2 >> U64(11)).astype(np.float64) * 2.0 ** -53
    rad = np.sqrt(-2.0 * np.log(u1))
    z = np.empty((L, 2 * len(p)))
    z[:, 0::2], z[:, 1::2] = rad * np.cos(2 * np.pi * u2), rad * np.sin(2 * np.pi * u2)
    z = np.tril(z[:, :L])
    return torch.from_numpy(z / np.sqrt((z * z).sum(1, keepdims=True)))


# ------------------------------------------------------------------------- the head job --

PER_N = ("dist_true", "dist_bound", "dist_expect", "sep_ratio", "sep_lower", "sep_upper",
         "sep_marginal", "rows_used")
PER_T = ("entropy", "entropy_norm", "grad_exact", "grad_bound")


def head_rows(scores, V, Ns, Ts, eps, seed=1, window=0, layer=0, head=0, mem_gb=1.5):
    """Per-row values of one head: {var: [len(Ns), len(Ts), L]} per-N (NaN where n <= N),
    {var: [len(Ts), L]} per-T (NaN for n < 2), grad_fd [len(Ts), len(eps), L]."""
    V = torch.as_tensor(np.asarray(V, np.float64))
    L, d = V.shape
    vis = torch.ones(L, L, dtype=torch.bool).tril()
    l = torch.as_tensor(np.asarray(scores, np.float64)[:L, :L]).masked_fill(~vis, 0.0)
    X = V
    sqx = (X * X).sum(1)
    nx = sqx.sqrt()
    Y = X / torch.where(nx > 0, nx, torch.ones_like(nx))[:, None]
    sqy = (Y * Y).sum(1)
    n = torch.arange(1, L + 1, dtype=F64)
    # section 3: descending raw logit, ties to the lower index (stable sort), masked last
    order = torch.sort(torch.where(vis, -l, torch.full_like(l, math.inf)), dim=1, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(L).expand(L, L).contiguous())
    # pairwise |x_i - x_j| (d1) and |y_i - y_j| (delta)
    D = (sqx[:, None] + sqx[None, :] - 2 * X @ X.T).clamp_min(0).sqrt()
    Dy = (sqy[:, None] + sqy[None, :] - 2 * Y @ Y.T).clamp_min(0).sqrt()
    strict = torch.ones(L, L, dtype=torch.bool).tril(-1)
    delta = torch.cummin(Dy.masked_fill(~strict, math.inf).min(1).values, 0).values  # [L]
    # section 4.2: d1 = max_{i unselected, j selected} |x_i - x_j|, m = max_{j selected} |x_j|
    Kmax = max(Ns)
    d1, m = {}, {}
    maxsel = torch.zeros(L, L, dtype=F64)
    mrun = torch.zeros(L, dtype=F64)
    for k in range(min(Kmax, L)):
        p = order[:, k]
        ok = n > k
        maxsel = torch.where(ok[:, None], torch.maximum(maxsel, D[p]), maxsel)
        mrun = torch.where(ok, torch.maximum(mrun, nx[p]), mrun)
        if k + 1 in Ns:
            uns = vis & (rank >= k + 1)
            d1[k + 1] = torch.where(uns, maxsel, torch.zeros_like(maxsel)).max(1).values
            m[k + 1] = mrun.clone()
    U_dirs = [directions(seed, window, layer, head, L, e) for e in range(len(eps))]
    p0 = order[:, 0]

    nan = float("nan")
    out = {v: torch.full((len(Ns), len(Ts), L), nan, dtype=F64) for v in PER_N}
    out.update({v: torch.full((len(Ts), L), nan, dtype=F64) for v in PER_T})
    out["grad_fd"] = torch.full((len(Ts), len(eps), L), nan, dtype=F64)
    row2 = n >= 2
    # T per chunk: ~20 [nT, L, L] float64 temporaries alive at once
    chunk = max(1, int(mem_gb * 2 ** 30 / (20 * 8 * L * L)))
    for c0 in range(0, len(Ts), chunk):
        Tc = torch.tensor(Ts[c0:c0 + chunk], dtype=F64)
        nt = len(Tc)
        iT = slice(c0, c0 + nt)
        T3 = Tc[:, None, None]
        zl = torch.where(vis, l[None] / T3, torch.full((1, L, L), -math.inf, dtype=F64))
        logA = torch.log_softmax(zl, dim=-1)
        a = logA.exp()
        # section 8
        H = -torch.where(a > 0, a * logA, torch.zeros_like(a)).sum(-1)
        out["entropy"][iT] = torch.where(row2, H, nan)
        out["entropy_norm"][iT] = torch.where(row2, H / n.log(), nan)
        # section 7: the largest eigenvalue of diag(a) - a a^T solves sum_j a_j / (a_j - lam) = 0
        # in (a_(2), a_(1)], where that sum increases with lam: bisection, all rows and T at once
        top2 = torch.topk(a, 2, dim=-1).values if L > 1 else torch.cat([a, a], -1)
        lo, hi = top2[..., 1].clone(), top2[..., 0].clone()
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            h = (a / (a - mid[..., None])).sum(-1)
            pos = h > 0
            hi = torch.where(pos, mid, hi)
            lo = torch.where(pos, lo, mid)
        lam = torch.where(lo == hi, hi, 0.5 * (lo + hi))
        out["grad_exact"][iT] = torch.where(row2, lam / Tc[:, None], nan)
        gb = torch.clamp(1.0 / (4.0 * Tc), max=math.sqrt(2.0))
        out["grad_bound"][iT] = torch.where(row2, gb[:, None].expand(nt, L), nan)
        # section 7: grad_fd = |F((l + eps u)/T) - F(l/T)| / eps; the change without the
        # difference of two nearly equal softmaxes where every |d_j| <= 1/2
        for ie, e in enumerate(eps):
            u = U_dirs[ie]
            up = u.gather(1, p0[:, None])
            dd = torch.where(vis, (e / T3) * (u - up)[None], torch.zeros(1, L, L, dtype=F64))
            em = torch.expm1(dd)
            mu = (a * em).sum(-1, keepdim=True)
            ch_small = a * (em - mu) / (1 + mu)
            a2 = torch.softmax(torch.where(vis, (l + e * u)[None] / T3, zl), dim=-1)
            ch = (a2 - a).masked_fill(~vis, 0.0)
            dom = torch.zeros_like(ch, dtype=torch.bool).scatter_(2, p0[None, :, None].expand(nt, L, 1), True)
            rest = ch.masked_fill(dom, 0.0).sum(-1, keepdim=True)
            ch = torch.where(dom, -rest, ch)
            small = dd.abs().amax(-1, keepdim=True) <= 0.5
            ch = torch.where(small, ch_small, ch)
            out["grad_fd"][iT, ie] = torch.where(row2, ch.norm(dim=-1) / e, nan)
        # sections 4 and 6 per N
        S = a @ X                                      # [nt, L, d] sum_j a_j x_j
        Sx = S @ X.T                                   # [nt, L, L] S_t . x_j
        S2 = (S * S).sum(-1, keepdim=True)
        a2x = a * a * sqx
        for k, N in enumerate(Ns):
            used = n > N
            if not used.any():
                continue
            sel = vis & (rank < N)
            uns = vis & ~sel
            aS = a * sel
            s = aS @ X
            s2 = (s * s).sum(-1, keepdim=True)
            dt = (a2x - 2 * a * (s @ X.T) + s2).clamp_min(0).sqrt()
            dist_true = torch.where(uns, dt, 0.0).sum(-1)
            cN = (N / (n - 1).clamp_min(1))[:, None]
            ex = ((1 + cN) ** 2 * a2x - 2 * (1 + cN) * cN * a * Sx + cN ** 2 * S2).clamp_min(0).sqrt()
            dist_expect = (n - N) / n * torch.where(vis, ex, 0.0).sum(-1)
            A = aS.sum(-1)
            U = torch.where(uns, a, 0.0).sum(-1)
            dist_bound = U * d1[N] + ((n - N) * A - U) * m[N]
            # section 6: g = D^2 - |s^y|^2 = a^2 |y|^2 - 2 a (s^y . y), decided exactly
            sy = aS @ Y
            sy2 = (sy * sy).sum(-1)
            g = a * a * sqy - 2 * a * (sy @ Y.T)
            gmin = torch.where(uns, g, math.inf).amin(-1)
            inside = (sel & (g < gmin[..., None])).sum(-1)
            marg = (sel & ((g - gmin[..., None]).abs() <= 1e-12 * sy2[..., None])).sum(-1)
            r = (gmin + sy2).clamp_min(0).sqrt()
            Q = (aS * aS).sum(-1, keepdim=True)
            B = A[..., None] - a
            xi = (B * B - 0.5 * delta[:, None] ** 2 * (B * B - (Q - a * a))).clamp_min(0).sqrt()
            xi_sum = torch.where(sel, xi, 0.0).sum(-1)
            lower = torch.where(r > 0, (1 - xi_sum / (N * r)).clamp_min(0), 0.0)
            upper = torch.where(sel, torch.exp(-0.5 * (xi - r[..., None]).clamp_min(0) ** 2), 0.0).sum(-1) / N
            vals = {"dist_true": dist_true, "dist_bound": dist_bound, "dist_expect": dist_expect,
                    "sep_ratio": inside.to(F64) / N, "sep_lower": lower, "sep_upper": upper,
                    "sep_marginal": marg.to(F64) / N, "rows_used": torch.ones_like(A)}
            for v in PER_N:
                out[v][k, iT] = torch.where(used, vals[v], nan)
    return out


def cut_means(rows, Lc):
    """Means over the rows t < Lc that have the value (section 9); rows_used the count."""
    out = {}
    for v, x in rows.items():
        x = x[..., :Lc]
        ok = ~torch.isnan(x)
        cnt = ok.sum(-1)
        mean = torch.where(ok, x, 0.0).sum(-1) / cnt.clamp_min(1)
        out[v] = torch.where(cnt > 0, mean, float("nan")).numpy()
        if v == "rows_used":
            out[v] = cnt.numpy().astype(np.float64)
    return out


# ------------------------------------------------------------------------------ modes --

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OPENBLAS_NUM_THREADS="1")
counts = {"passed": 0, "failed": 0}


def check(cond, what):
    counts["passed" if cond else "failed"] += 1
    if not cond:
        print(f"FAIL: {what}", flush=True)


def close(got, want, rel, abs_=1e-12):
    got, want = np.asarray(got, float), np.asarray(want, float)
    both = np.isnan(got) & np.isnan(want)
    err = np.abs(got - want)
    ok = both | (err <= abs_ + rel * np.abs(want))
    big = ~np.isnan(want) & (np.abs(want) > 1e-6)  # the worst relative difference reported
    worst = float(np.nanmax(err[big] / np.abs(want[big]))) if big.any() else 0.0
    return bool(ok.all()), worst


def mode_check(binary, model, scratch):
    binary, model = os.path.abspath(binary), os.path.abspath(model)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import bruteforce
    import h5py
    torch.set_num_threads(1)
    # 1. against the brute force, a small random head
    rng = np.random.default_rng(5)
    L, d = 40, 8
    sc = np.tril(rng.normal(0, 3, (L, L)))
    V = rng.normal(0, 1, (L, d))
    Ns, Ts, eps = [1, 2, 5, 12], [0.05, 1.0, 8.0], [1e-3, 0.1]
    rows = head_rows(sc, V, Ns, Ts, eps)
    bf = bruteforce.Head(sc, V)
    worst = 0.0
    for iT, T in enumerate(Ts):
        want = bf.rows(Ns, T, "softmax")
        for v in ("dist_true", "dist_expect", "dist_bound"):
            ok, w = close(rows[v][:, iT].numpy(), want[v], 1e-9)
            worst = max(worst, w)
            check(ok, f"brute force: {v} at T = {T} (worst {w:.2e})")
        diff = np.abs(np.nan_to_num(rows["sep_ratio"][:, iT].numpy()) - np.nan_to_num(want["sep_ratio"]))
        check((diff <= np.nan_to_num(want["sep_ambiguous"]) + 1e-12).all(), f"brute force: sep_ratio at T = {T}")
        for v in ("entropy", "entropy_norm"):
            ok, w = close(rows[v][iT].numpy(), want[v], 1e-9, 1e-12)
            worst = max(worst, w)
            check(ok, f"brute force: {v} at T = {T} (worst {w:.2e})")
        # eigvalsh's absolute accuracy (~1e-16 of |diag(a) - a a^T| <= 1, over T) bounds the
        # brute force's own error on near-one-hot rows, where grad_exact is tiny
        ok, w = close(rows["grad_exact"][iT].numpy(), bf.grad_exact(T, L), 1e-9, 1e-14 / T)
        worst = max(worst, w)
        check(ok, f"brute force: grad_exact at T = {T} (worst {w:.2e})")
    print(f"peer vs brute force: worst relative difference {worst:.1e}", flush=True)
    # 2. against the C kernel's file: every variable of one head's job
    os.makedirs(scratch, exist_ok=True)
    np.save(f"{scratch}/tokens.npy", rng.integers(0, 50257, size=64).astype("<u2"))
    Lr = 32
    cfg = f"""model = "{model}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 1; offset = 0; stride = {Lr}; }};
grid = {{ L = [16, {Lr}]; N = [1, 2, 4, 8]; T = [0.05, 1.0, 8.0]; eps = [1e-3, 0.1, 10.0];
         normalizer = ["softmax"]; layers = [0]; }};
metrics = {{ seed = 3; }};
output = "peer.h5";
"""
    open(f"{scratch}/peer.cfg", "w").write(cfg)
    for f in ("peer.h5", "peer.h5.journal"):
        if os.path.exists(f"{scratch}/{f}"):
            os.remove(f"{scratch}/{f}")
    p = subprocess.run([binary, "run", "peer.cfg"], cwd=scratch, env=ENV, capture_output=True, text=True)
    check(p.returncode == 0, f"attnsweep run: {p.stderr[-300:]}")
    toks = np.load(f"{scratch}/tokens.npy")[:Lr]
    np.savetxt(f"{scratch}/w0.txt", toks[None, :], fmt="%d")
    p = subprocess.run([binary, "dump", "--model", model, "--tokens", "w0.txt", "--length", str(Lr),
                        "--layers", "0", "--out", "w0.h5"], cwd=scratch, env=ENV, capture_output=True, text=True)
    check(p.returncode == 0, f"attnsweep dump: {p.stderr[-300:]}")
    if counts["failed"]:
        return
    f, g = h5py.File(f"{scratch}/peer.h5", "r"), h5py.File(f"{scratch}/w0.h5", "r")
    Ns, Ts, eps = [int(x) for x in f["N"][()]], [float(x) for x in f["T"][()]], [float(x) for x in f["eps"][()]]
    Ls = [int(x) for x in f["L"][()]]
    sc, v = g["layer_00/scores"][()], g["layer_00/v"][()]
    worst = 0.0
    for h in range(sc.shape[0]):
        rows = head_rows(sc[h].astype(np.float64), v[h].astype(np.float64), Ns, Ts, eps, seed=3,
                         window=0, layer=0, head=h)
        for iL, Lc in enumerate(Ls):
            means = cut_means(rows, Lc)
            sel = (0, 0, iL) if f["dist_true"].ndim == 8 else (0, iL)
            for var in PER_N + PER_T + ("grad_fd",):
                got = means[var]
                want = f[var][sel][..., 0, 0, h] if var in PER_N or var == "grad_fd" else f[var][sel][..., 0, 0, h]
                want = np.asarray(want, float)
                if var in ("sep_ratio", "sep_marginal"):
                    band = np.asarray(f["sep_marginal"][sel][..., 0, 0, h], float) + 1e-6
                    ok = bool((np.abs(got - want) <= band).all())
                    check(ok, f"C kernel: head {h} L {Lc} {var}")
                    continue
                ok, w = close(got, want, 2e-5, 1e-7)
                worst = max(worst, w if var != "rows_used" else 0.0)
                check(ok, f"C kernel: head {h} L {Lc} {var} (worst {w:.2e})")
    print(f"peer vs attnsweep (float32 file): worst relative difference {worst:.1e}", flush=True)


def c_metrics_cpu(binary, model, text, L, heads, scratch):
    """attnsweep run of the paper grid at one L on layer 0: metrics CPU seconds (one thread)."""
    cfg = f"""model = "{model}";
text = {{ path = "{text}"; format = "text"; strip_gutenberg = true; }};
windows = {{ count = 1; offset = 0; stride = {L}; }};
grid = {{
  L = [{L}];
  N = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
       20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128];
  T = {{ min = 1e-3; max = 1e2; count = 21; spacing = "log"; include = [8.0]; }};
  eps = [1e-3, 1e-1, 10.0];
  normalizer = ["softmax"];
  layers = [0];
  heads = [{", ".join(str(h) for h in range(heads))}];
}};
runtime = {{ blas_threads = 1; }};
output = "c{L}.h5";
"""
    open(f"{scratch}/c{L}.cfg", "w").write(cfg)
    p = subprocess.run([binary, "run", f"c{L}.cfg", "--new"], cwd=scratch, capture_output=True, text=True,
                       env=dict(ENV, ATTNSWEEP_TIMINGS="1"))
    if p.returncode != 0:
        raise SystemExit(f"peer_metrics: attnsweep run failed: {p.stderr[-400:]}")
    line = [x for x in p.stderr.splitlines() if x.startswith("timings: per window")][0]
    return float(line.rsplit("metrics", 1)[1].strip().split()[0].rstrip(","))


def mode_bench(binary, model, scratch, Ls=(256, 1024), heads=3, mem_gb=1.5, text=None):
    binary, model, text = os.path.abspath(binary), os.path.abspath(model), os.path.abspath(text)
    import h5py
    torch.set_num_threads(1)
    os.makedirs(scratch, exist_ok=True)
    Ns = list(range(1, 17)) + [20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128]
    Ts = sorted([10 ** (-3 + 5 * i / 20) for i in range(21) if abs(10 ** (-3 + 5 * i / 20) - 8) > 1e-9 * 8] + [8.0])
    eps = [1e-3, 1e-1, 10.0]
    for L in Ls:
        c_cpu = c_metrics_cpu(binary, model, text, L, heads, scratch) / heads
        p = subprocess.run([binary, "dump", "--model", model, "--text", text, "--strip-gutenberg", "--length",
                            str(L), "--layers", "0", "--out", f"d{L}.h5"], cwd=scratch, env=ENV,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"peer_metrics: attnsweep dump failed: {p.stderr[-400:]}")
        with h5py.File(f"{scratch}/d{L}.h5", "r") as g:
            sc, v = g["layer_00/scores"][()], g["layer_00/v"][()]
        ph = 1 if L > 512 else heads  # the peer's time per head is steady: one head at large L
        t0 = time.process_time()
        for h in range(ph):
            rows = head_rows(sc[h].astype(np.float64), v[h].astype(np.float64), Ns, Ts, eps, window=0,
                             layer=0, head=h, mem_gb=mem_gb)
            cut_means(rows, L)
        peer_cpu = (time.process_time() - t0) / ph
        chunk = max(1, int(mem_gb * 2 ** 30 / (20 * 8 * L * L)))
        print(f"peer_metrics: L = {L}, paper grid (28 N, 22 T, 3 eps), one thread each: C kernel "
              f"{c_cpu:.3f} CPU s per head ({heads} heads), PyTorch peer {peer_cpu:.2f} CPU s per head "
              f"({ph} head{'s' if ph > 1 else ''}, {min(chunk, len(Ts))} T per batch): ratio {peer_cpu / c_cpu:.0f}x",
              flush=True)


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "check":
        mode_check(a[1], a[2], a[3])
        print(f"peer_metrics: {counts['passed']} passed, {counts['failed']} failed", flush=True)
        sys.exit(1 if counts["failed"] or not counts["passed"] else 0)
    if len(a) >= 4 and a[0] == "bench":
        Ls, heads, mem, text = (256, 1024), 3, 1.5, None
        rest = a[4:]
        while rest:
            k, v = rest[0], rest[1]
            rest = rest[2:]
            if k == "--L":
                Ls = tuple(int(x) for x in v.split(","))
            elif k == "--heads":
                heads = int(v)
            elif k == "--mem-gb":
                mem = float(v)
            elif k == "--text":
                text = v
        if text is None:
            raise SystemExit("peer_metrics: bench needs --text FILE (War and Peace)")
        mode_bench(a[1], a[2], a[3], Ls, heads, mem, text)
        return
    print(__doc__)
    sys.exit(2)


main()
