"""docs/metrics.md written again in float64 numpy, straight from the definitions, for the
end-to-end tests (test_sweep.py's dump cross-check, test_trained.py): one head of a
`dump` (raw scores q.k and the value vectors) in, per-row values and per-cut means out.

Shares no code with src/kernels/metrics.c. Every row of a window is evaluated at once
as [L, L] arrays (row t, key j; keys j > t masked), so an L = 1024 head costs a few
matrix products per (N, T, normalizer) instead of a Python loop over rows.

Distances are norms of differences. Where the squared norm is formed as the expansion
|u|^2 - 2 u.v + |v|^2 and that cancels (result below 1e-6 of the terms), the entry is
recomputed as the explicit difference -- so no entry carries the expansion's error.

sep_ratio decides D_i < r with the exact rewrite of the audit:
D_i^2 - |s|^2 = a_i^2 |y_i|^2 - 2 a_i (s . y_i), which adds no |s|^2 and so cancels
nothing for tiny a_i. `sep_ratio_naive` compares D_i and r themselves in float64 (what a
direct evaluation does), kept to show how far round-off moves the count.

Conventions (metrics.md): rows = "visible" (n = t + 1 keys), top-N ties to the lower
index, order by the raw logits (T-independent), rows with n <= N skipped,
N-independent quantities over rows with n >= 2.
"""
import numpy as np

CANCEL = 1e-6  # an expansion below this fraction of its terms is recomputed directly


def _mask(L):
    return np.tril(np.ones((L, L), dtype=bool))


def weights(l, T, norm, ssmax_scale=None):
    """a [L, L] for logits l [L, L] (row t: keys j <= t), 0 above the diagonal."""
    L = l.shape[0]
    vis = _mask(L)
    n = np.arange(1, L + 1, dtype=float)[:, None]
    f = 1.0 / T
    if norm == "ssmax":
        f = f * ssmax_scale * np.log(n)
    z = np.where(vis, l * f, -np.inf)
    z = z - z.max(axis=1, keepdims=True)           # shift: exact in double, then normalize
    if norm in ("softmax", "ssmax"):
        e = np.where(vis, np.exp(z), 0.0)
        return e / e.sum(axis=1, keepdims=True)
    if norm != "sparsemax":
        raise ValueError(norm)
    s = -np.sort(-z, axis=1)                       # descending, masked (-inf) last
    k = np.arange(1, L + 1, dtype=float)[None, :]
    with np.errstate(invalid="ignore"):
        css = np.cumsum(np.where(np.isfinite(s), s, 0.0), axis=1)
        ok = (k <= n) & (1 + k * np.where(np.isfinite(s), s, 0.0) > css)
    kz = L - np.argmax(ok[:, ::-1], axis=1)        # largest k that satisfies the condition
    tau = (css[np.arange(L), kz - 1] - 1) / kz
    return np.where(vis, np.maximum(z - tau[:, None], 0.0), 0.0)


def order_and_rank(l):
    """order[t] = visible keys by descending logit, ties to the lower index; rank[t, j] =
    position of key j in row t's order (>= t + 1 for masked keys)."""
    L = l.shape[0]
    key = np.where(_mask(L), -l, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    rank = np.empty_like(order)
    rank[np.arange(L)[:, None], order] = np.arange(L)[None, :]
    return order, rank


def _norms_of_diff(p, X, S, sqx, q=None, G=None):
    """|| p[t, i] X[i] - q[t] S[t] || for every (t, i) as [L, L] (q = 1 when None): the
    expansion, with the cancelling entries recomputed as explicit differences.
    G: S @ X.T when the caller has it."""
    qq = np.ones((S.shape[0], 1)) if q is None else q
    if G is None:
        G = S @ X.T                                  # [t, i] = S_t . x_i
    u2 = p * p
    u2 *= sqx[None, :]                               # |p x_i|^2
    v2 = qq * qq * (S * S).sum(1)[:, None]           # |q S_t|^2, [L, 1]
    sq = p * G
    sq *= -2 * qq
    sq += u2
    sq += v2
    u2 += v2
    u2 *= CANCEL
    for t, i in np.argwhere(sq < u2):
        sq[t, i] = float(np.sum((p[t, i] * X[i] - qq[t, 0] * S[t]) ** 2))
    np.maximum(sq, 0.0, out=sq)
    return np.sqrt(sq, out=sq)


class Head:
    """One head: raw scores [L, L] (NaN or anything above the diagonal), vectors [L, d]."""

    def __init__(self, scores, vectors):
        L = scores.shape[0]
        self.L = L
        self.vis = _mask(L)
        self.l = np.where(self.vis, np.asarray(scores, float)[:L, :L], 0.0)
        self.X = np.asarray(vectors, float)[:L]
        self.sqx = (self.X * self.X).sum(1)
        nx = np.sqrt(self.sqx)
        self.Y = self.X / np.where(nx > 0, nx, 1.0)[:, None]
        self.sqy = (self.Y * self.Y).sum(1)
        self.n = np.arange(1, L + 1)
        self.order, self.rank = order_and_rank(self.l)
        self._d1 = {}

    def _pairwise(self):
        if not hasattr(self, "_D"):
            X = self.X
            sq = self.sqx[:, None] + self.sqx[None, :] - 2 * X @ X.T
            for i, j in np.argwhere(sq < CANCEL * (self.sqx[:, None] + self.sqx[None, :])):
                sq[i, j] = float(np.sum((X[i] - X[j]) ** 2))
            self._D = np.sqrt(np.maximum(sq, 0.0))
        return self._D

    def d1_m(self, N):
        """d1 = max_{i unselected, j selected} ||x_i - x_j||, m = max_{j selected} ||x_j||
        per row [L] (NaN where n <= N). T-independent: the order is by raw logits."""
        if N not in self._d1:
            D = self._pairwise()
            d1 = np.full(self.L, np.nan)
            m = np.full(self.L, np.nan)
            nx = np.sqrt(self.sqx)
            for t in range(N, self.L):
                o = self.order[t, :t + 1]
                sel, uns = o[:N], o[N:]
                d1[t] = D[np.ix_(uns, sel)].max()
                m[t] = nx[sel].max()
            self._d1[N] = d1, m
        return self._d1[N]

    def rows(self, Ns, T, norm, ssmax_scale=None, bound=True, sep=True):
        """Per-row values: {name: [len(Ns), L]} for the per-N quantities (NaN where n <= N)
        and {name: [L]} for entropy, entropy_norm (NaN for n < 2)."""
        L, X, vis = self.L, self.X, self.vis
        a = weights(self.l, T, norm, ssmax_scale)
        out = {k: np.full((len(Ns), L), np.nan) for k in
               ("dist_true", "dist_expect", "dist_bound", "sep_ratio", "sep_ratio_naive", "sep_ambiguous")}
        n = self.n.astype(float)
        tot = a @ X
        Gtot = tot @ X.T                                         # N-independent
        for k, N in enumerate(Ns):
            used = self.n > N
            if not used.any():
                continue
            sel = vis & (self.rank < N)
            uns = vis & ~sel
            aS = np.where(sel, a, 0.0)
            S = aS @ X                                           # s per row
            dist = _norms_of_diff(a, X, S, self.sqx)
            out["dist_true"][k] = np.where(used, np.where(uns, dist, 0.0).sum(1), np.nan)
            # dist_expect: ((n-N)/n) sum_i || a_i x_i - c (tot - a_i x_i) ||, c = N/(n-1)
            with np.errstate(divide="ignore", invalid="ignore"):
                c = np.where(n > 1, N / (n - 1), 0.0)[:, None]
            de = _norms_of_diff((1 + c) * a, X, tot, self.sqx, q=c, G=Gtot)
            val = (n - N) / n * np.where(vis, de, 0.0).sum(1)
            out["dist_expect"][k] = np.where(used, val, np.nan)
            if bound:
                A = aS.sum(1)
                d1, m = self.d1_m(N)
                out["dist_bound"][k] = np.where(used, (1 - A) * d1 + ((n - N) * A - (1 - A)) * m,
                                                np.nan)
            if sep:
                Sy = aS @ self.Y
                e = a * a * self.sqy[None, :] - 2 * a * (Sy @ self.Y.T)   # D_i^2 - |s|^2
                r = np.where(uns, e, np.inf).min(1)
                Ns_ = (sel & (e < r[:, None])).sum(1)
                out["sep_ratio"][k] = np.where(used, Ns_ / N, np.nan)
                # decisions within 1e-9 (relative) of the radius: another summation order of
                # the same exact rule may decide them the other way
                with np.errstate(invalid="ignore"):
                    near = sel & (np.abs(e - r[:, None]) <= 1e-9 * np.maximum(np.abs(e), np.abs(r[:, None])))
                out["sep_ambiguous"][k] = np.where(used, near.sum(1) / N, np.nan)
                # plain float64: D_i = sqrt(|s|^2 + (D_i^2 - |s|^2)), rounded as a direct
                # evaluation rounds it (D_i and r both round to |s| for tiny weights)
                Dn = np.sqrt(np.maximum(e + (Sy * Sy).sum(1)[:, None], 0.0))
                rn = np.where(uns, Dn, np.inf).min(1)
                out["sep_ratio_naive"][k] = np.where(used, (sel & (Dn < rn[:, None])).sum(1) / N,
                                                     np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0).sum(1)
            out["entropy"] = np.where(self.n >= 2, ent, np.nan)
            out["entropy_norm"] = np.where(self.n >= 2, ent / np.log(n), np.nan)
        out["a"] = a
        return out

    def grad_exact(self, T, Lc, norm="softmax"):
        """Spectral norm of (1/T)(diag(a) - a a^T) per row t < Lc (NaN for n < 2)."""
        a = weights(self.l[:Lc, :Lc], T, norm)
        g = np.full(Lc, np.nan)
        for t in range(1, Lc):
            v = a[t, :t + 1]
            g[t] = np.linalg.eigvalsh(np.diag(v) - np.outer(v, v))[-1] / T
        return g


def cut_mean(rows, Lc):
    """Mean over the used rows t < Lc (NaN rows skipped) and how many rows that is."""
    r = np.asarray(rows)[..., :Lc]
    used = np.isfinite(r)
    cnt = used.sum(-1)
    with np.errstate(invalid="ignore"):
        return np.where(cnt > 0, np.where(used, r, 0.0).sum(-1) / np.maximum(cnt, 1), np.nan), cnt


# ---- metrics.query_rows = "sample:K" (docs/metrics.md section 9.1), from the doc's rule ----

_M64 = (1 << 64) - 1


def _mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def sample_rows(K, first, L, seed, window):
    """The query rows of a cell (window index, context length L): [first, L) in K equal
    strata, one row per stratum at floor(h * width / 2^32), h the top 32 bits of the hash."""
    m = L - first
    if K >= m:
        return np.arange(first, L)
    key = _mix64(_mix64(_mix64(seed ^ 0x726F7773616D706C) ^ (window & _M64)) ^ L)
    rows = []
    for i in range(K):
        lo, hi = first + i * m // K, first + (i + 1) * m // K
        h = _mix64(key ^ _mix64(i)) >> 32
        rows.append(lo + ((h * (hi - lo)) >> 32))
    return np.array(rows)


def sampled_mean_se(values, rows, pop):
    """Mean of values[rows] (NaN rows skipped) and its standard error s / sqrt(k) *
    sqrt(1 - k / pop) (two-pass variance), and k."""
    x = np.asarray(values)[rows]
    x = x[np.isfinite(x)]
    k = len(x)
    if k == 0:
        return np.nan, np.nan, 0
    if k >= pop:
        return x.mean(), 0.0, k
    if k < 2:
        return x.mean(), np.nan, k
    return x.mean(), np.sqrt(x.var(ddof=1) / k * (1 - k / pop)), k
