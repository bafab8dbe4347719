#!/usr/bin/python3
"""sep_mpmath.py -- confirms the separability brute force of tests/unit/kernels/metrics_ref.h
(D_i < r decided by the exact rewrite D_i^2 - |s|^2 = a_i^2 |y_i|^2 - 2 a_i (s . y_i)) on a
few sink rows in high-precision arithmetic (mpmath).

usage: sep_mpmath.py ROWS  (written by `test_metrics_regimes --dump-rows ROWS`)

Each row: the float32 logits and vectors exactly, T, N, and the float64 brute force's N_s,
its marginal count (|D_i^2 - r^2| <= 1e-12 |s|^2) and the plain float64 count of D_i < r.
Here the weights, y = x / |x|, s, every D_i and r are recomputed as explicit differences
with enough digits to resolve the smallest weight (60 + 2 |log10 a_min|, up to ~700). Checks: the
brute force's N_s lies between the decisions that are clear at 2e-12 |s|^2 (those must
agree) and those plus the marginal ones; its marginal count is within the same band. Prints
how often the plain float64 comparison disagrees with the exact count (the audit's finding).
"""
import sys

import mpmath as mp

mp.mp.dps = 80


def check_row(n, d, N, T, logits, vec):
    # enough digits that the explicit D_i^2 = |a_i y_i - s|^2 resolves the smallest weight's
    # term against |s|^2 ~ 1 (the margin of a weight w is ~w, its square ~w^2)
    mp.mp.dps = 80
    l = [mp.mpf(v) for v in logits]
    lmax = max(l)
    wmin = min((v - lmax) / mp.mpf(T) for v in l)  # ln of the smallest weight, about
    mp.mp.dps = 60 + int(2 * float(-wmin) / 2.302585)
    l = [mp.mpf(v) for v in logits]
    e = [mp.e ** ((v - lmax) / mp.mpf(T)) for v in l]
    Z = mp.fsum(e)
    a = [v / Z for v in e]
    order = sorted(range(n), key=lambda j: (-logits[j], j))  # ties to the lower index
    sel = set(order[:N])
    Y = []
    for j in range(n):
        x = [mp.mpf(v) for v in vec[j * d:(j + 1) * d]]
        nn = mp.sqrt(mp.fsum(v * v for v in x))
        Y.append([v / nn if nn > 0 else mp.mpf(0) for v in x])
    s = [mp.fsum(a[j] * Y[j][k] for j in sel) for k in range(d)]
    s2 = mp.fsum(v * v for v in s)
    D2 = [mp.fsum((a[i] * Y[i][k] - s[k]) ** 2 for k in range(d)) for i in range(n)]
    r2 = min(D2[i] for i in range(n) if i not in sel)
    margins = [D2[i] - r2 for i in sel]
    exact = sum(1 for m in margins if m < 0)
    clear = sum(1 for m in margins if m < -2e-12 * s2)
    possible = sum(1 for m in margins if m < 2e-12 * s2)
    marg_lo = sum(1 for m in margins if abs(m) <= 0.5e-12 * s2)
    marg_hi = sum(1 for m in margins if abs(m) <= 2e-12 * s2)
    return exact, clear, possible, marg_lo, marg_hi


def main():
    lines = open(sys.argv[1]).read().split("\n")
    rows = bad = plain_off = ref_exact = plain_exact = 0
    i = 0
    while i + 2 < len(lines) + 1 and i < len(lines) and lines[i].startswith("row"):
        h = lines[i].split()
        regime, n, d, N, T, ns_ref, nm_ref, ns_plain = (h[1], int(h[2]), int(h[3]), int(h[4]),
                                                       float(h[5]), int(h[6]), int(h[7]),
                                                       int(h[8]))
        logits = [float(v) for v in lines[i + 1].split()]
        vec = [float(v) for v in lines[i + 2].split()]
        exact, clear, possible, mlo, mhi = check_row(n, d, N, T, logits, vec)
        ok = clear <= ns_ref <= possible and mlo <= nm_ref <= mhi
        if not ok:
            bad += 1
            print(f"FAIL {regime} n={n} N={N} T={T}: brute force N_s={ns_ref} marginal={nm_ref}; "
                  f"mpmath: exact {exact}, clear {clear}, possible {possible}, marginal "
                  f"{mlo}..{mhi}")
        ref_exact += ns_ref == exact
        plain_off += not (clear <= ns_plain <= possible)
        plain_exact += ns_plain == exact
        rows += 1
        i += 3
    print(f"sep_mpmath: {rows} rows; brute force (rewrite) within the high-precision band in "
          f"{rows - bad}, equal to the exact count in {ref_exact}; the plain float64 D_i < r "
          f"equals the exact count in {plain_exact} and falls outside the band in {plain_off}")
    if rows < 20:
        print("FAIL: too few rows")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
