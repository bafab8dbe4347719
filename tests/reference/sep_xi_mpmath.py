#!/usr/bin/python3
"""sep_xi_mpmath.py -- checks met_sep_xi (docs/metrics.md section 6.1) against its definition
in high-precision arithmetic (mpmath, 50 digits):

    xi_i = sqrt(max(0, B^2 - (delta^2 / 2) (B^2 - Q_i))),  B = sum_{j in I_N, j != i} a_j,
                                                          Q_i = sum_{j in I_N, j != i} a_j^2

usage: sep_xi_mpmath.py CASES  (written by `test_metrics_audit --dump-xi CASES`)

Each case: N, delta, the walk's A and Q (used only to show what B = A - a_i would give), the N
selected weights and the library's N values of xi, all as exact doubles. Every xi must be
within 1e-11 relative of the exclusive sums' value. The cases hold one weight 1 - w next to
tiny ones summing to w = 1e-12 .. 1e-7, where B = A - a_i of that key is off by ~1e-16 / w
relative (1e-4 at w = 1e-12): the script prints the worst error of that form beside the
library's, so the output shows that the tolerance separates the two.
"""
import sys

import mpmath as mp

mp.mp.dps = 50
RTOL = 1e-11


def xi_exact(sa, i, delta):
    B = mp.fsum(mp.mpf(v) for j, v in enumerate(sa) if j != i)
    Q = mp.fsum(mp.mpf(v) ** 2 for j, v in enumerate(sa) if j != i)
    d2h = mp.mpf(delta) ** 2 / 2
    x2 = B * B - d2h * (B * B - Q)
    return mp.sqrt(x2) if x2 > 0 else mp.mpf(0)


def xi_of_A(sa, i, delta, A, Q):
    """the old form, in double as the kernel evaluated it: B = A - a_i, Q_i = Q - a_i^2"""
    B, Qi, d2h = A - sa[i], Q - sa[i] * sa[i], 0.5 * delta * delta
    x2 = B * B - d2h * (B * B - Qi)
    return mp.sqrt(mp.mpf(x2)) if x2 > 0 else mp.mpf(0)


def rel(got, want):
    return abs(mp.mpf(got) - want) / want if want > 0 else abs(mp.mpf(got))


def main():
    lines = [ln for ln in open(sys.argv[1]).read().split("\n") if ln.strip()]
    cases = bad = 0
    worst_lib = worst_old = mp.mpf(0)
    for k in range(0, len(lines), 3):
        head = lines[k].split()
        if head[0] != "case":
            print(f"FAIL: line {k + 1} is not a case header: {lines[k]!r}")
            return 1
        N, delta, A, Q = int(head[1]), float(head[2]), float(head[3]), float(head[4])
        sa = [float(v) for v in lines[k + 1].split()]
        xi = [float(v) for v in lines[k + 2].split()]
        if len(sa) != N or len(xi) != N:
            print(f"FAIL: case {cases} has {len(sa)} weights and {len(xi)} xi for N = {N}")
            return 1
        for i in range(N):
            want = xi_exact(sa, i, delta)
            e = rel(xi[i], want)
            worst_lib = max(worst_lib, e)
            worst_old = max(worst_old, rel(xi_of_A(sa, i, delta, A, Q), want))
            if e > RTOL:
                bad += 1
                if bad <= 5:
                    print(f"FAIL case {cases} (N = {N}, delta = {delta}) key {i} (a = {sa[i]:.17g}): "
                          f"xi {xi[i]:.17g}, exclusive sums {mp.nstr(want, 17)}, {float(e):.3g} relative")
        cases += 1
    print(f"sep_xi_mpmath: {cases} cases; worst xi error {float(worst_lib):.3g} relative "
          f"(tolerance {RTOL:g}); B = A - a_i would give {float(worst_old):.3g}")
    if cases < 50:
        print("FAIL: too few cases")
        return 1
    if worst_old <= RTOL:
        print("FAIL: no case where A - a_i cancels beyond the tolerance (the test could not fail)")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
