#!/usr/bin/python3
"""ks_ref.py OUT -- write two-sample KS reference cases computed by scipy.

Each line: n1 n2 x_1..x_n1 y_1..y_n2 D p, where D and p come from
scipy.stats.ks_2samp(x, y, method="exact") (Debian's python3-scipy). The C test
tests/unit/kernels/test_ks.c reads the file and compares its own statistic and exact p-value.
Cases: random sizes 1..60, unequal sizes, ties within and across samples, shifted
samples (small p), and 144 vs 144 (GPT-2 small's head count).
"""
import sys
import warnings

import numpy as np
from scipy import stats


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print("usage: ks_ref.py OUT", file=sys.stderr)
        return 2
    rng = np.random.default_rng(20250817)
    cases = []
    for k in range(80):
        if k < 10:
            n1 = n2 = 144
        elif k < 20:
            n1, n2 = 144, int(rng.integers(100, 144))
        else:
            n1, n2 = (int(v) for v in rng.integers(1, 61, size=2))
        shift = float(rng.choice([0.0, 0.3, 1.0, 3.0]))
        x = rng.normal(size=n1)
        y = rng.normal(size=n2) + shift
        if k % 3 == 0:  # ties within and across samples
            x = np.round(x * 2) / 2
            y = np.round(y * 2) / 2
        cases.append((x, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to the asymptotic method must not pass silently
        with open(sys.argv[1], "w") as f:
            for x, y in cases:
                r = stats.ks_2samp(x, y, method="exact")
                vals = [len(x), len(y)] + [repr(float(v)) for v in x] + [repr(float(v)) for v in y]
                vals += [repr(float(r.statistic)), repr(float(r.pvalue))]
                f.write(" ".join(str(v) for v in vals) + "\n")
    print(f"ks_ref.py: wrote {len(cases)} cases to {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
