#!/usr/bin/python3
"""Redraw the figures of "Limitations of Normalization in Attention Mechanism"
(arXiv 2508.17821) from an attnsweep results file, plus what the paper lacks
(spread across windows, entropy per head, normalizer comparison, the checkpoint
figure across models), and print the headline numbers next to the paper's.

usage: figures.py RESULTS.h5 --out DIR [--format png|pdf] [--T T] [--N N]
                  [--normalizer NAME] [--band std|quantile] [--model NAME]

A file with one model: its figures and summary.csv in DIR. With several models
(the model axis): each model's figures in DIR/MODEL/, the checkpoint figure
(checkpoints.py) and its numbers (checkpoints.csv) in DIR, and one summary.csv
with a model column; --model NAME draws that model alone, as a one-model file.

Every per-model figure function takes one model of the masked Dataset of
attnsweep_results.load() (attnsweep_results.select_model) and returns a dict of
the exact arrays it drew (None when the file lacks what the figure needs; a
note says why), so tests can compare them with the file. Means over heads skip
NaN heads; means over windows skip unfinished cells.
"""
import argparse
import csv
import os
import sys

# restart under /usr/bin/python3 when this interpreter lacks the packages (debian_python.py)
if __name__ == "__main__":
    import debian_python
    debian_python.require("matplotlib", "xarray", "h5netcdf")

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnsweep_results as ar  # noqa: E402
import checkpoints  # noqa: E402

PAPER_CRIT_N_PER_L = 0.06          # docs/metrics.md sections 5 and 12
PAPER_PLATEAU = (0.70, 0.85)       # docs/metrics.md sections 6 and 12, N >= 16
PAPER_PLATEAU_FROM_N = 16
PAPER_LOW_T = 0.1                  # docs/metrics.md sections 7 and 12: grad ~ 1/T below this T
PAPER_GRAD_SLOPE = -1.0
# the separability figure says so when sep_marginal (a head's window mean) exceeds this
SEP_MARGINAL_LARGE = 0.05
# What each figure redraws, named in its title (arXiv 2508.17821; the algorithms and sections
# of the paper that define the experiment behind the figure).
PAPER_FIGURE = {
    "distance_vs_L": "paper: distance vs L, Alg. 1, sec. 2.1",
    "distance_vs_N": "paper: distance vs N, Alg. 2, sec. 2.1",
    "critical_N": "paper: critical N vs L, Alg. 3",
    "separability": "paper: separability vs N, Alg. 4, sec. 2.2",
    "gradient_vs_T": "paper: gradient vs T, Alg. 5, sec. 2.3",
    "entropy_heatmap": "not in the paper: its entropy monitoring guideline",
    "normalizers": "not in the paper",
    "selectivity_vs_gradient": "the paper's guideline: decouple selectivity from gradient health",
}


def _title(ax, name, text, ds=None):
    """Figure title: what is drawn, then the paper figure it redraws (_save adds the model)."""
    ax.set_title(f"{text}\n({PAPER_FIGURE.get(name, '')})", fontsize=10)


def _band(ax, x, lo, hi, color):
    """Spread over windows: a shaded band plus error bars, so a thin band still shows."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    ax.fill_between(x, lo, hi, color=color, alpha=0.3, lw=0)
    mid = (lo + hi) / 2
    ax.errorbar(x, mid, yerr=[mid - lo, hi - mid], fmt="none", ecolor=color, elinewidth=1,
                capsize=3, alpha=0.9)


def note(msg):
    print(f"note: {msg}", flush=True)


class Options:
    """Slice choices shared by the figures. `who` names the model(s) in the titles
    (default: the model of a one-model Dataset, from its attributes)."""

    def __init__(self, ds, T=None, N=5, normalizer=None, band="std", who=None):
        self.T = ar.native_T(ds) if T is None else float(ar.nearest(ds, "T", T))
        self.N_requested = N
        self.N = int(ar.nearest(ds, "N", N))
        self.normalizer = normalizer or ar.default_normalizer(ds)
        self.band = band
        self.L_max = int(ds["L"].values.max())
        self.tag = reading_tag(ds, who)
        self.readings = readings_text(ds)


def per_n_T_values(ds):
    """The T at which the file holds the per-N family (metrics.per_N_T: the other T store it as
    missing, docs/results.md), judged from dist_true: a T with any finite value."""
    dt = ds["dist_true"]
    finite = np.isfinite(_values(dt.transpose("T", ...))).reshape(ds.sizes["T"], -1).any(1)
    return [float(t) for t, ok in zip(_values(ds["T"]), finite) if ok]


def per_n_missing(ds, opt, name):
    """True (and a note) when the per-N family was not computed at opt.T while the file has it
    at other T: the figure is not drawn (its curves would be missing values, not data)."""
    have = per_n_T_values(ds)
    if not have or any(abs(t - opt.T) <= 1e-9 * abs(opt.T) for t in have):
        return False
    note(f"{name} skipped: the per-N metrics were not computed at T = {opt.T:g} "
         f"(metrics.per_N_T); this file has them at T = {', '.join(f'{t:g}' for t in have)}")
    return True


def no_finished_cell(ds, name, L=None):
    """True (and a note) when no cell of this model is finished -- at L, when given: the
    figure would have nothing to draw (a sweep still at its start, or whose longest L is still
    pending), and a log axis over no value cannot even be drawn."""
    done = ds["status"] == ar.STATUS_DONE
    if L is not None:
        done = done.sel(L=L)
    if bool(done.any()):
        return False
    note(f"{name} skipped: no finished cell" + ("" if L is None else f" at the longest L = {L}"))
    return True


MODEL_KINDS = ar.MODEL_KINDS


def model_kind_text(ds):
    """Whose numbers these are, from the file's model_kind attribute."""
    kind = str(ds.attrs.get("model_kind", ""))
    return MODEL_KINDS.get(kind, "unknown model (the file has no model_kind attribute)")


def readings_text(ds):
    """The readings recorded in the file (metrics.logits; metrics.distance when present)."""
    return ", ".join(f"{key}: {ds.attrs[key]}" for key in ("logits", "distance") if key in ds.attrs)


def reading_tag(ds, who=None):
    """The conventions a figure depends on, for its title: the model (name and kind, or
    `who`) and the readings recorded in the file."""
    if who is None:
        name = ds.attrs.get("model_name")
        who = f"model: {name + ' ' if name else ''}({ds.attrs.get('model_kind', 'unknown')})"
    return ", ".join(p for p in (who, readings_text(ds)) if p)


def _values(da):
    return np.asarray(da.values, dtype=float)


# What each saved figure's panels show, for the readability checks of the tests: {name: [{
# "title", "xscale", "legend" (its labels), "legend_inside" (legend box within the axes),
# "lines" ((label, zorder) of each line; unlabelled ones start with "_", e.g. a box plot's),
# "T_labels" (the points' "T=..." annotations)}]}
LAYOUT = {}


def _save(fig, opt, out_dir, name, fmt):
    for ax in fig.axes:              # every titled panel names the model and the readings
        title = ax.get_title()
        if title:
            # on the paper line, not a line of its own: at most what, (paper; model, readings)
            lines = title.split("\n")
            lines[-1] = (lines[-1][:-1] + "; " + opt.tag + ")") if lines[-1].endswith(")") else \
                lines[-1] + "\n" + opt.tag
            ax.set_title("\n".join(lines), fontsize=ax.title.get_fontsize())
    path = os.path.join(out_dir, f"{name}.{fmt}")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    panels = []
    for ax in fig.axes:
        leg = ax.get_legend()
        inside = None
        if leg is not None:
            box, frame = leg.get_window_extent(), ax.get_window_extent()
            inside = bool(box.x0 < frame.x1 and box.x1 > frame.x0 and box.y0 < frame.y1 and box.y1 > frame.y0)
        panels.append({"title": ax.get_title(), "xscale": ax.get_xscale(), "legend_inside": inside,
                       "legend": [t.get_text() for t in leg.get_texts()] if leg is not None else [],
                       "lines": [(line.get_label(), line.get_zorder()) for line in ax.lines],
                       "T_labels": [t.get_text() for t in ax.texts if t.get_text().startswith("T=")]})
    LAYOUT[name] = panels
    plt.close(fig)
    return path


def _per_window_head_mean(da):
    """Head mean per window (dims: window, ...)."""
    return ar.head_mean(da)


# -- figure 1: distance vs L at N = 5 ------------------------------------------------------

def fig_distance_vs_L(ds, opt, out_dir, fmt):
    if ds.sizes["L"] < 2:
        note("distance_vs_L skipped: the L axis has one value")
        return None
    if per_n_missing(ds, opt, "distance_vs_L") or no_finished_cell(ds, "distance_vs_L"):
        return None
    cell = ds.sel(N=opt.N, T=opt.T, normalizer=opt.normalizer)
    L = _values(ds["L"])
    result = {"L": L, "N": opt.N, "T": opt.T}
    fig, ax = plt.subplots(figsize=(6, 4.2))
    styles = {"dist_true": ("true", "C0", "-o"), "dist_expect": ("expectation (random I_N)", "C1", "-s"),
              "dist_bound": ("bound (Theorem 1, reconstructed)", "C3", "--^")}
    windows = int((ds["status"] == ar.STATUS_DONE).any("L").sum())
    all_done = bool((ds["status"] == ar.STATUS_DONE).all())
    for var, (label, color, style) in styles.items():
        mean, lo, hi = ar.window_spread(_per_window_head_mean(cell[var]), opt.band)
        key = var.replace("dist_", "")
        result[key] = _values(mean)
        ax.plot(L, result[key], style, color=color, label=label)
        if windows > 1:
            result[key + "_lo"], result[key + "_hi"] = _values(lo), _values(hi)
            _band(ax, L, result[key + "_lo"], result[key + "_hi"], color)
    band = "mean ± std" if opt.band == "std" else "10-90%"
    title = f"Distance vs context length (N = {opt.N}"
    if opt.N != opt.N_requested:
        title += f", closest to {opt.N_requested}"
    title += f", T = {opt.T:g}, {opt.normalizer})"
    _title(ax, "distance_vs_L", title, ds)
    ax.set_xlabel("context length L")
    ax.set_ylabel("distance (mean over rows and heads)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(L, [str(int(v)) for v in L])
    ax.set_yscale("log")
    ax.legend(fontsize=8, title=(f"bands: {band} over {'' if all_done else 'finished cells of '}"
                              f"{windows} windows") if windows > 1 else None,
              title_fontsize=8)
    ax.grid(alpha=0.3, which="both")
    result["path"] = _save(fig, opt, out_dir, "distance_vs_L", fmt)
    return result


# -- figure 2: distance vs N at the longest L ---------------------------------------------

def fig_distance_vs_N(ds, opt, out_dir, fmt):
    if ds.sizes["N"] < 2:
        note("distance_vs_N skipped: the N axis has one value")
        return None
    if per_n_missing(ds, opt, "distance_vs_N") or no_finished_cell(ds, "distance_vs_N", opt.L_max):
        return None
    cell = ds.sel(L=opt.L_max, T=opt.T, normalizer=opt.normalizer)
    N = _values(ds["N"])
    result = {"N": N, "L": opt.L_max, "T": opt.T}
    fig, ax = plt.subplots(figsize=(6, 4.2))
    windows = int((ds["status"].sel(L=opt.L_max) == ar.STATUS_DONE).sum())
    for i, (var, label, style) in enumerate((("dist_true", "true", "-o"),
                                             ("dist_expect", "expectation (random I_N)", "-s"),
                                             ("dist_bound", "bound (reconstructed)", "--^"))):
        key = var.replace("dist_", "")
        per_window = _per_window_head_mean(cell[var])
        result[key] = _values(per_window.mean("window", skipna=True))
        ax.plot(N, result[key], style, label=label, ms=4, color=f"C{i}")
        if windows > 1:
            _, lo, hi = ar.window_spread(per_window, opt.band)
            result[key + "_lo"], result[key + "_hi"] = _values(lo), _values(hi)
            _band(ax, N, result[key + "_lo"], result[key + "_hi"], f"C{i}")
    _title(ax, "distance_vs_N", f"Distance vs top-N (L = {opt.L_max}, T = {opt.T:g}, {opt.normalizer})"
           + (f"; bands over {windows} windows" if windows > 1 else ""), ds)
    ax.set_xlabel("top-N")
    ax.set_ylabel("distance (mean over rows, heads, windows)")
    ax.set_yscale("log")
    # N spans orders of magnitude (1 .. 128 by default): on a linear axis the small N crowd
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    result["path"] = _save(fig, opt, out_dir, "distance_vs_N", fmt)
    return result


# -- figure 3: critical N vs L ------------------------------------------------------------

def fig_critical_N(ds, opt, out_dir, fmt):
    if ds.sizes["L"] < 2 or ds.sizes["N"] < 2:
        note("critical_N skipped: needs more than one L and more than one N")
        return None
    if per_n_missing(ds, opt, "critical_N") or no_finished_cell(ds, "critical_N"):
        return None
    sel = dict(T=opt.T, normalizer=opt.normalizer)
    found = _values(ds["crit_N"].sel(**sel).transpose("window", "L"))   # NaN where censored
    censored = _values(ds["crit_N_censored"].sel(**sel).transpose("window", "L")) == 1
    bound = _values(ar.crit_N_lower_bound(ds).sel(**sel).transpose("window", "L"))
    L = _values(ds["L"])
    # the mean of the windows that found one: a censored window is never a number in it (an
    # L where every window is censored or unfinished has no mean: NaN)
    with ar.empty_slices_stay_nan():
        mean = np.nanmean(found, axis=0)
    none_found = np.sum(censored, axis=0)
    result = {"L": L, "crit_N": found, "crit_N_found": found, "crit_N_censored": censored,
              "lower_bound": np.where(censored, bound, np.nan), "mean": mean,
              "none_found": none_found, "reference": PAPER_CRIT_N_PER_L * L}
    fig, ax = plt.subplots(figsize=(6, 4.2))
    jitter = np.linspace(-0.04, 0.04, found.shape[0]) if found.shape[0] > 1 else np.zeros(1)
    for w in range(found.shape[0]):
        ax.plot(L * 2 ** jitter[w], found[w], "o", color="C0", alpha=0.35, ms=4,
                label="per window" if w == 0 else None)
        # censored: drawn at the largest N tested, pointing up (the critical N is at least that)
        ax.plot(L * 2 ** jitter[w], result["lower_bound"][w], "^", color="C3", alpha=0.6, ms=6,
                label=">= N_max: no N of the grid passed" if w == 0 and censored.any() else None)
    ax.plot(L, mean, "-D", color="C0", zorder=5, label="mean over windows that found one")
    dense_L = np.geomspace(L.min(), L.max(), 50)
    ax.plot(dense_L, PAPER_CRIT_N_PER_L * dense_L, "k--", label="paper: 0.06 L")
    # log-log: the reference 0.06 L is a straight line (slope 1) on these axes
    ax.set_yscale("log", base=2)
    top = np.nanmax(np.concatenate([PAPER_CRIT_N_PER_L * L, found.ravel(), bound.ravel(), [1.0]]))
    ax.set_ylim(0.5, 2 * top)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    for x, k in zip(L, none_found):
        if k:
            ax.annotate(f"{k} w: >= N_max", (x, 0), textcoords="offset points", xytext=(0, 4),
                        ha="center", fontsize=7, color="C3", xycoords=("data", "axes fraction"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(L, [str(int(v)) for v in L])
    ax.set_xlabel("context length L")
    ax.set_ylabel(f"critical N (KS p > {ds.attrs.get('ks_alpha', '?')})")
    _title(ax, "critical_N", f"Critical top-N vs L (T = {opt.T:g}, {opt.normalizer}; "
           f"grid N <= {int(ds['N'].max())})", ds)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    if not np.isfinite(found).any():
        note("critical_N: no window reached p > ks_alpha at any L (crit_N censored everywhere: "
             "drawn as >= N_max)")
    result["path"] = _save(fig, opt, out_dir, "critical_N", fmt)
    return result


# -- where the distances can cross: dist_true / dist_expect against N / L ------------------

def fig_distance_ratio(ds, opt, out_dir, fmt):
    """Per L, the ratio dist_true / dist_expect of every (window, layer, head) at each N:
    median and quartiles over them, against N / L. KS can only pass (critical N) where the
    two per-head samples overlap, i.e. near ratio 1 (docs/critical-n.md). Where the file has
    dist_random (metrics.dist_random), the median of dist_true / dist_random too, dashed
    (median_random): the ratio to the expected distance, not the paper's expectation term."""
    if per_n_missing(ds, opt, "distance_ratio") or no_finished_cell(ds, "distance_ratio"):
        return None
    if ds.sizes["N"] < 2:
        note("distance_ratio skipped: the N axis has one value")
        return None
    cell = ds.sel(T=opt.T, normalizer=opt.normalizer)
    ratio = (cell["dist_true"] / cell["dist_expect"]).transpose("L", "N", "window", "layer", "head")
    r = _values(ratio).reshape(ds.sizes["L"], ds.sizes["N"], -1)
    L, N = _values(ds["L"]), _values(ds["N"])
    with ar.empty_slices_stay_nan():   # all-NaN (N >= L, unfinished cells): stays NaN
        q25, median, q75 = (np.nanpercentile(r, q, axis=2) for q in (25, 50, 75))
    x = N[None, :] / L[:, None]
    result = {"L": L, "N": N, "x": x, "median": median, "q25": q25, "q75": q75, "T": opt.T,
              "median_random": None}
    if "dist_random" in ds.data_vars and np.isfinite(_values(cell["dist_random"])).any():
        rr = (cell["dist_true"] / cell["dist_random"]).transpose("L", "N", "window", "layer", "head")
        with ar.empty_slices_stay_nan():
            result["median_random"] = np.nanpercentile(
                _values(rr).reshape(ds.sizes["L"], ds.sizes["N"], -1), 50, axis=2)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, Lv in enumerate(L):
        ok = np.isfinite(median[i])
        if not ok.any():
            continue
        ax.plot(x[i, ok], median[i, ok], "-o", ms=3, color=f"C{i % 10}", label=f"L = {int(Lv)}")
        ax.fill_between(x[i, ok], q25[i, ok], q75[i, ok], color=f"C{i % 10}", alpha=0.15, lw=0)
        mr = result["median_random"]
        if mr is not None and np.isfinite(mr[i]).any():
            okr = np.isfinite(mr[i])
            ax.plot(x[i, okr], mr[i, okr], "--", lw=1.0, color=f"C{i % 10}",
                    label="dist_true / dist_random (E||Z||)" if i == 0 else None)
    ax.axhline(1.0, color="k", lw=0.9, ls="--", label="dist_true = dist_expect")
    ax.axvline(PAPER_CRIT_N_PER_L, color="0.5", lw=0.9, ls=":", label="paper: N = 0.06 L")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("N / L")
    ax.set_ylabel("dist_true / dist_expect (median, quartiles over heads)")
    ax.set_title(f"Where true and expected distance cross (T = {opt.T:g}, {opt.normalizer})",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    result["path"] = _save(fig, opt, out_dir, "distance_ratio", fmt)
    return result


# -- figure 4: separability box plots vs N -------------------------------------------------

def fig_separability(ds, opt, out_dir, fmt):
    if ds.sizes["N"] < 2:
        note("separability skipped: the N axis has one value")
        return None
    if per_n_missing(ds, opt, "separability") or no_finished_cell(ds, "separability", opt.L_max):
        return None
    cell = ds.sel(L=opt.L_max, T=opt.T, normalizer=opt.normalizer)
    N = _values(ds["N"])
    # one value per head: the head's separability averaged over windows (the paper's boxes
    # are distributions over heads)
    per_head = cell["sep_ratio"].mean("window", skipna=True).stack(h=("layer", "head"))
    per_head = _values(per_head.transpose("N", "h"))
    boxes = [row[np.isfinite(row)] for row in per_head]
    lower = _values(cell["sep_lower"].mean(("window", "layer", "head"), skipna=True))
    upper = _values(cell["sep_upper"].mean(("window", "layer", "head"), skipna=True))
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(N)), 4.2))
    positions = np.arange(1, len(N) + 1)
    ax.boxplot(boxes, positions=positions, widths=0.6, showfliers=True,
               flierprops={"ms": 3})
    # the lines over the boxes (zorder), so a mean inside a box stays visible
    ax.plot(positions, lower, "v--", color="C2", zorder=4, label="lower bound (mean, reconstructed)")
    ax.plot(positions, upper, "^--", color="C3", zorder=4, label="upper bound (mean, reconstructed)")
    ax.axhspan(*PAPER_PLATEAU, color="0.85", alpha=0.5, label="paper plateau 0.70-0.85")
    result = {"N": N, "boxes": boxes, "sep_lower": lower, "sep_upper": upper, "L": opt.L_max,
              "T": opt.T}
    title = (f"Geometric separability over heads (L = {opt.L_max}, T = {opt.T:g}, "
             f"{opt.normalizer})")
    # the part of sep_ratio a direct float evaluation would also resolve,
    # max(sep_ratio - sep_marginal, 0) per (window, layer, head), aggregated like sep_ratio:
    # per head the window mean, then the mean over heads (the line beside the boxes)
    if "sep_marginal" in cell:
        mean_dims = ("window", "layer", "head")
        resolvable = (cell["sep_ratio"] - cell["sep_marginal"]).clip(min=0)
        resolvable = resolvable.where(cell["sep_ratio"].notnull() & cell["sep_marginal"].notnull())
        result["sep_ratio_mean"] = _values(cell["sep_ratio"].mean(mean_dims, skipna=True))
        result["resolvable"] = _values(resolvable.mean(mean_dims, skipna=True))
        marginal_head = _values(cell["sep_marginal"].mean("window", skipna=True)
                                .stack(h=("layer", "head")).transpose("N", "h"))
        result["sep_marginal_max"] = float(np.nanmax(marginal_head)) \
            if np.isfinite(marginal_head).any() else float("nan")
        ax.plot(positions, result["sep_ratio_mean"], "o-", color="C0", ms=3, lw=1.2, zorder=5,
                label="sep_ratio (mean over heads)")
        ax.plot(positions, result["resolvable"], "s--", color="C4", ms=3, lw=1.4, zorder=5,
                label="resolvable (sep_ratio - sep_marginal)")
        if result["sep_marginal_max"] > SEP_MARGINAL_LARGE:
            # under the axes, not in the title (which keeps to what, paper and model)
            ax.text(0, -0.16, f"sep_marginal up to {result['sep_marginal_max']:.2f} (> "
                    f"{SEP_MARGINAL_LARGE:g}): part of sep_ratio rests on round-off-level margins",
                    transform=ax.transAxes, fontsize=7, va="top")
            note(f"separability: sep_marginal up to {result['sep_marginal_max']:.3f} in a head")
    else:
        note("separability: no sep_marginal in the file (older file): resolvable curve skipped")
    ax.set_xticks(positions, [str(int(n)) for n in N], fontsize=8)
    ax.set_xlabel("top-N")
    ax.set_ylabel("separability ratio N_s / N")
    ax.set_ylim(-0.03, 1.05)
    _title(ax, "separability", title, ds)
    # beside the axes: inside, the legend covered the boxes of the large N
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    ax.grid(alpha=0.3, axis="y")
    result["path"] = _save(fig, opt, out_dir, "separability", fmt)
    return result


# -- figure 5: gradient sensitivity vs T ---------------------------------------------------

def fig_gradient(ds, opt, out_dir, fmt):
    if ds.sizes["T"] < 2:
        note("gradient skipped: the T axis has one value")
        return None
    if no_finished_cell(ds, "gradient_vs_T", opt.L_max):
        return None
    cell = ds.sel(L=opt.L_max, normalizer=opt.normalizer)
    T = _values(ds["T"])
    all_dims = ("window", "layer", "head")
    result = {"T": T, "L": opt.L_max, "eps": _values(ds["eps"]), "grad_fd": {}}
    fig, ax = plt.subplots(figsize=(6, 4.2))
    result["grad_fd_max"] = {}
    for i, eps in enumerate(ds["eps"].values):
        fd = cell["grad_fd"].sel(eps=eps)
        y = _values(fd.mean(all_dims, skipna=True))
        # the paper's statistic: per head the mean over tokens (rows, in the file), then the
        # maximum over heads; averaged over windows
        y_max = _values(fd.max(("layer", "head"), skipna=True).mean("window", skipna=True))
        result["grad_fd"][float(eps)] = y
        result["grad_fd_max"][float(eps)] = y_max
        ax.plot(T, y_max, "-o", ms=4, color=f"C{i}", label=f"max over heads, eps = {eps:g} (paper)")
        ax.plot(T, y, ":", lw=1.2, color=f"C{i}", label=f"mean over heads, eps = {eps:g}")
    result["grad_exact"] = _values(cell["grad_exact"].mean(all_dims, skipna=True))
    if np.isfinite(result["grad_exact"]).any():
        ax.plot(T, result["grad_exact"], "-", color="k", lw=1.5, label="exact Jacobian norm")
    result["grad_bound"] = _values(cell["grad_bound"].mean(all_dims, skipna=True))
    ax.plot(T, result["grad_bound"], "--", color="C3", label="bound min(1/(4T), sqrt 2)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"temperature T (on {ds.attrs.get('logits', 'raw')} logits)")
    ax.set_ylabel("gradient norm (token mean; max or mean over heads)")
    ax.axvline(opt.T, color="0.6", lw=0.8, ls=":", label=f"T = {opt.T:g}: the other figures' T")
    _title(ax, "gradient_vs_T", f"Gradient sensitivity vs temperature (L = {opt.L_max}, {opt.normalizer})",
           ds)
    ax.legend(fontsize=7, ncol=1)
    ax.grid(alpha=0.3, which="both")
    result["path"] = _save(fig, opt, out_dir, "gradient_vs_T", fmt)
    return result


# -- beyond the paper: entropy heatmap, normalizer comparison ------------------------------

def fig_entropy_heatmap(ds, opt, out_dir, fmt):
    cell = ds["entropy_norm"].sel(L=opt.L_max, T=opt.T, normalizer=opt.normalizer)
    grid = _values(cell.mean("window", skipna=True).transpose("layer", "head"))
    if not np.isfinite(grid).any():
        note("entropy_heatmap skipped: no finished cell at the longest L")
        return None
    n_layer, n_head = grid.shape
    # ~0.55 inch per cell while numbers are written in the cells (up to 16 x 16), else ~0.3
    # inch, capped so 48 layers x 25 heads still fit a page; labels thin out to every k-th
    numbers = n_layer <= 16 and n_head <= 16
    cell_in = 0.55 if numbers else 0.3
    fig, ax = plt.subplots(figsize=(min(16, max(5, cell_in * n_head + 2.5)),
                                    min(16, max(3.5, cell_in * n_layer + 1.5))))
    image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1, origin="upper")
    fig.colorbar(image, ax=ax, label="normalized entropy H / ln n")
    if numbers:
        for (row, col), value in np.ndenumerate(grid):
            if np.isfinite(value):
                ax.text(col, row, f"{value:.2f}", ha="center", va="center",
                        color="k" if value > 0.6 else "w", fontsize=7)
    step_x = max(1, int(np.ceil(n_head / 26)))
    step_y = max(1, int(np.ceil(n_layer / 26)))
    heads, layers = ds["head"].values, ds["layer"].values
    ax.set_xticks(range(0, n_head, step_x), [str(int(h)) for h in heads[::step_x]], fontsize=8)
    ax.set_yticks(range(0, n_layer, step_y), [str(int(l)) for l in layers[::step_y]], fontsize=8)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    _title(ax, "entropy_heatmap", f"Attention entropy per head (L = {opt.L_max}, T = {opt.T:g}, {opt.normalizer})",
           ds)
    return {"entropy_norm": grid, "path": _save(fig, opt, out_dir, "entropy_heatmap", fmt)}


def fig_normalizers(ds, opt, out_dir, fmt):
    names = [str(v) for v in ds["normalizer"].values]
    if len(names) < 2:
        note("normalizers skipped: the normalizer axis has one value")
        return None
    if no_finished_cell(ds, "normalizers", opt.L_max):
        return None
    eps = float(ar.nearest(ds, "eps", 1e-3))
    cell = ds.sel(L=opt.L_max)
    all_dims = ("window", "layer", "head")
    result = {"N": _values(ds["N"]), "T": _values(ds["T"]), "eps": eps, "sep_ratio": {},
              "grad_fd": {}}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    if per_n_missing(ds, opt, "normalizers (separability panel)"):
        left.text(0.5, 0.5, f"sep_ratio not computed at T = {opt.T:g}\n(metrics.per_N_T)",
                  ha="center", va="center", transform=left.transAxes)
    for i, name in enumerate(names):
        sep = _values(cell["sep_ratio"].sel(T=opt.T, normalizer=name).mean(all_dims, skipna=True))
        grad = _values(cell["grad_fd"].sel(eps=eps, normalizer=name).mean(all_dims, skipna=True))
        result["sep_ratio"][name], result["grad_fd"][name] = sep, grad
        left.plot(result["N"], sep, "-o", ms=4, color=f"C{i}", label=name)
        right.plot(result["T"], grad, "-o", ms=4, color=f"C{i}", label=name)
    left.set_xlabel("top-N")
    left.set_ylabel("separability ratio (mean)")
    _title(left, "normalizers", f"Separability by normalizer (L = {opt.L_max}, T = {opt.T:g})", ds)
    left.set_ylim(-0.03, 1.05)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("temperature T")
    right.set_ylabel(f"grad_fd (eps = {eps:g}, mean)")
    _title(right, "normalizers", f"Gradient sensitivity by normalizer (L = {opt.L_max})")
    for ax in (left, right):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both")
    result["path"] = _save(fig, opt, out_dir, "normalizers", fmt)
    return result


SELECTIVITY_CSV_HEADER = ("normalizer", "L", "N", "eps", "T", "grad_fd", "sep_ratio", "sep_marginal",
                          "resolvable")


def _T_labels(n):
    """Which points of a curve along T carry their T: all up to 8, else about six spread
    evenly, the first and the last among them."""
    if n <= 8:
        return list(range(n))
    return sorted(set(int(round(i)) for i in np.linspace(0, n - 1, 6)))


def fig_selectivity_vs_gradient(ds, opt, out_dir, fmt):
    """The paper's guideline (normalizers that "decouple selectivity from gradient health"):
    per normalizer, one curve across T of the resolvable separability max(sep_ratio -
    sep_marginal, 0) at top-N = opt.N against the gradient sensitivity grad_fd (eps nearest
    1e-3, the one measure every normalizer has; docs/metrics.md sections 6.2, 7, 10.1), both
    means over windows, layers and heads at the longest L; points labelled with their T. Up
    and left is the guideline's corner: selective and gentle. selectivity_vs_gradient.csv
    beside the figure holds every plotted number (and the mean sep_ratio, sep_marginal)."""
    names = [str(v) for v in ds["normalizer"].values]
    if len(names) < 2:
        note("selectivity_vs_gradient skipped: the normalizer axis has one value")
        return None
    if no_finished_cell(ds, "selectivity_vs_gradient", opt.L_max):
        return None
    eps = float(ar.nearest(ds, "eps", 1e-3))
    cell = ds.sel(L=opt.L_max)
    all_dims = ("window", "layer", "head")
    res, _ = checkpoints.resolvable_sep(cell.sel(N=opt.N))
    T = _values(ds["T"])
    result = {"N": opt.N, "L": opt.L_max, "T": T, "eps": eps, "resolvable": {}, "grad_fd": {},
              "sep_ratio": {}, "sep_marginal": {}}
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for i, name in enumerate(names):
        color = f"C{i % 10}"
        sep = _values(res.sel(normalizer=name).mean(all_dims, skipna=True))
        grad = _values(cell["grad_fd"].sel(eps=eps, normalizer=name).mean(all_dims, skipna=True))
        one = cell.sel(N=opt.N, normalizer=name)
        result["resolvable"][name], result["grad_fd"][name] = sep, grad
        result["sep_ratio"][name] = _values(one["sep_ratio"].mean(all_dims, skipna=True))
        result["sep_marginal"][name] = (_values(one["sep_marginal"].mean(all_dims, skipna=True))
                                        if "sep_marginal" in one else np.full(T.shape, np.nan))
        ax.plot(grad, sep, "-o", ms=3, color=color, label=name)
        ok = np.isfinite(grad) & np.isfinite(sep)
        for j in _T_labels(len(T)):
            if ok[j]:
                ax.annotate(f"T={T[j]:g}", (grad[j], sep[j]), fontsize=6, color=color,
                            xytext=(3, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel(f"gradient sensitivity grad_fd (eps = {eps:g}, mean)")
    ax.set_ylabel(f"resolvable separability at N = {opt.N} (mean)")
    ax.set_ylim(-0.03, 1.05)
    _title(ax, "selectivity_vs_gradient",
           f"Selectivity vs gradient sensitivity across T (L = {opt.L_max}, N = {opt.N})", ds)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    result["path"] = _save(fig, opt, out_dir, "selectivity_vs_gradient", fmt)
    result["csv_path"] = write_selectivity_csv(result, os.path.join(out_dir, "selectivity_vs_gradient.csv"))
    return result


def write_selectivity_csv(result, path):
    """Every number of the selectivity_vs_gradient figure: one row per (normalizer, T), floats
    as Python's repr (NaN where the file has no value)."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SELECTIVITY_CSV_HEADER)
        for name in result["grad_fd"]:
            for j, Tv in enumerate(result["T"]):
                writer.writerow((name, int(result["L"]), int(result["N"]), repr(result["eps"]),
                                 repr(float(Tv)),
                                 *(repr(float(result[k][name][j]))
                                   for k in ("grad_fd", "sep_ratio", "sep_marginal", "resolvable"))))
    return path


FIGURES = (("distance_vs_L", fig_distance_vs_L), ("distance_vs_N", fig_distance_vs_N),
           ("critical_N", fig_critical_N), ("distance_ratio", fig_distance_ratio),
           ("separability", fig_separability),
           ("gradient_vs_T", fig_gradient), ("entropy_heatmap", fig_entropy_heatmap),
           ("normalizers", fig_normalizers), ("selectivity_vs_gradient", fig_selectivity_vs_gradient))


# -- headline numbers ----------------------------------------------------------------------

def loglog_slope(x, y):
    """Least-squares slope of log y against log x over the finite, positive points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(y) & (y > 0) & (x > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


# When a number "agrees" with the paper's (the verdict column of summary.csv):
VERDICT_RULES = {
    "critical N / L": (0.03, 0.12),        # the paper's ~0.06, within a factor of 2
    "separability plateau": PAPER_PLATEAU,  # inside the paper's 0.70-0.85
    "grad_fd log-log slope": (-1.3, -0.7),  # the paper's ~ -1, within 0.3
    "grad_fd fall over T>=1": (30.0, 300.0),  # the paper's ~100x, within a factor of ~3
}
# each rule's tolerance in words, printed in the table's paper column
VERDICT_TOLERANCE = {
    "critical N / L": "x2",
    "separability plateau": "the range",
    "grad_fd log-log slope": "+-0.3",
    "grad_fd fall over T>=1": "x3",
}


def verdict(quantity, value, gpt2=True):
    """'agrees' / 'differs' with the paper, or 'n.a.' (no number, the paper has none, or the
    model is not GPT-2: the paper's numbers are GPT-2's, so another model neither agrees nor
    differs with them)."""
    rule = VERDICT_RULES.get(quantity)
    if not gpt2 or rule is None or value is None or not np.isfinite(value):
        return "n.a."
    return "agrees" if rule[0] <= value <= rule[1] else "differs"


def paper_text(quantity, value):
    """The paper column: the paper's value and the tolerance the verdict allows."""
    rule = VERDICT_RULES.get(quantity)
    if rule is None:
        return value
    return f"{value} (agrees: {rule[0]:g} to {rule[1]:g}, {VERDICT_TOLERANCE[quantity]})"


def _crit_row(found, censored, bound, L):
    """(ours, verdict) of the critical N / L row at one L. found: crit_N per window (NaN where
    censored or not done); censored windows only bound the critical N from below (>= the
    largest N tested), so their mean is a lower bound: it can show that the paper's value is
    exceeded, never that it is met."""
    found = found[np.isfinite(found)]
    lows = bound[censored & np.isfinite(bound)]
    n = found.size + lows.size
    if n == 0:
        return "none done", "n.a."
    ours = (f"{np.mean(found) / L:.3f}" if found.size else "none") + f" ({found.size}/{n} windows found"
    if lows.size == 0:
        return ours + ")", verdict("critical N / L", float(np.mean(found) / L))
    at_least = float(np.mean(np.concatenate([found, lows]))) / L
    ours += f"; {lows.size} censored at >= N_max {int(lows.max())}: mean >= {at_least:.3f})"
    hi = VERDICT_RULES["critical N / L"][1]
    return ours, "differs" if at_least > hi else "n.a."


def headline(ds, opt):
    """Rows (quantity, where, ours, paper, verdict) of one model's summary table; the first
    row names the model (a verdict against the paper means little unless it is GPT-2)."""
    gpt2 = str(ds.attrs.get("model_kind", "")) == "gpt2"
    rows = [("model", str(ds.attrs.get("model_dir", "?")),
             model_kind_text(ds), "GPT-2 small" + ("" if gpt2 else ": every verdict below is n.a."),
             "agrees" if gpt2 else "differs")]
    sel = dict(T=opt.T, normalizer=opt.normalizer)
    crit, censored = ds["crit_N"].sel(**sel), ds["crit_N_censored"].sel(**sel)
    bound = ar.crit_N_lower_bound(ds).sel(**sel)
    missing = per_n_missing(ds, opt, "the per-N headline rows")
    for L in ([] if missing else ds["L"].values):
        ours, v = _crit_row(_values(crit.sel(L=L)), _values(censored.sel(L=L)) == 1,
                            _values(bound.sel(L=L)), float(L))
        rows.append(("critical N / L", f"L={int(L)}, T={opt.T:g}", ours,
                     paper_text("critical N / L", f"~{PAPER_CRIT_N_PER_L}"), v if gpt2 else "n.a."))
    N = ds["N"].values
    plateau_N = N[N >= PAPER_PLATEAU_FROM_N]
    where = f"N>={PAPER_PLATEAU_FROM_N}"
    if plateau_N.size == 0:
        plateau_N = N[len(N) // 2:]
        where = f"N>={int(plateau_N.min())} (upper half; grid max {int(N.max())})"
    sep = ds["sep_ratio"].sel(L=opt.L_max, T=opt.T, normalizer=opt.normalizer, N=plateau_N)
    plateau = float(sep.mean(skipna=True))
    if missing:
        rows.append(("critical N / L", f"T={opt.T:g}", "not computed at this T (metrics.per_N_T)",
                     paper_text("critical N / L", f"~{PAPER_CRIT_N_PER_L}"), "n.a."))
    rows.append(("separability plateau", f"{where}, L={opt.L_max}, T={opt.T:g}",
                 "not computed at this T (metrics.per_N_T)" if missing else f"{plateau:.3f}",
                 paper_text("separability plateau", f"{PAPER_PLATEAU[0]:.2f}-{PAPER_PLATEAU[1]:.2f}"),
                 "n.a." if missing else verdict("separability plateau", plateau, gpt2)))
    T = _values(ds["T"])
    low = T < PAPER_LOW_T
    grad = ds["grad_fd"].sel(L=opt.L_max, normalizer=opt.normalizer).mean(
        ("window", "layer", "head"), skipna=True)
    for eps in ds["eps"].values:
        y = _values(grad.sel(eps=eps))
        slope = loglog_slope(T[low], y[low]) if low.sum() >= 2 else float("nan")
        rows.append(("grad_fd log-log slope", f"T<{PAPER_LOW_T:g} ({int(low.sum())} T), eps={eps:g}",
                     f"{slope:.3f}", paper_text("grad_fd log-log slope", f"~{PAPER_GRAD_SLOPE:g}"),
                     verdict("grad_fd log-log slope", slope, gpt2)))
        high = T >= 1
        if high.sum() >= 2:
            # not a paper number: where our T convention puts the 1/T regime (a -> uniform)
            rows.append(("grad_fd log-log slope", f"T>=1 ({int(high.sum())} T), eps={eps:g}",
                         f"{loglog_slope(T[high], y[high]):.3f}", "(not reported)", "n.a."))
            first, last = y[high][0], y[high][-1]
            drop = first / last if last > 0 else float("nan")
            rows.append(("grad_fd fall over T>=1", f"T={T[high][0]:g} -> {T[high][-1]:g}, eps={eps:g}",
                         f"{drop:.3g}x", paper_text("grad_fd fall over T>=1", "~100x"),
                         verdict("grad_fd fall over T>=1", drop, gpt2)))
    return rows


def write_summary(rows, out_dir):
    path = os.path.join(out_dir, "summary.csv")
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(rows)
    return path


# summary.csv: one row per (model, quantity, where); the model column is the model's name
HEADER = ("model", "quantity", "where", "ours", "paper", "verdict")


def print_summary(rows):
    """The table per model (the CSV's model column as a heading)."""
    for name in dict.fromkeys(r[0] for r in rows):
        block = [r[1:] for r in rows if r[0] == name]
        kind = [r for r in block if r[0] == "model"]
        print(f"Headline numbers from {kind[0][2] if kind else '?'} ({name}):")
        widths = [max(len(str(r[i])) for r in block + [HEADER[1:]]) for i in range(len(HEADER) - 1)]
        for r in [HEADER[1:]] + block:
            print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))


def draw_model(one, opt, out_dir, fmt):
    """Every per-model figure of one model's Dataset (ar.select_model) into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    drawn = {}
    for name, func in FIGURES:
        drawn[name] = func(one, opt, out_dir, fmt)
        if drawn[name] is not None:
            print(f"wrote {drawn[name]['path']}")
            if "csv_path" in drawn[name]:
                print(f"wrote {drawn[name]['csv_path']}")
    return drawn


def draw_all(ds, out_dir, fmt="png", T=None, N=5, normalizer=None, band="std", model=None):
    """Every figure and the summary. One model on the file's model axis (or `model` given:
    that name alone): its figures in out_dir, and the returned dict has them at the top
    level. Several: each model's figures in out_dir/NAME/, the checkpoint figure in out_dir.
    Returns {'models': {name: {figure: dict or None}}, 'checkpoints': dict or None,
    'summary': rows (model first), 'summary_path', 'options', plus the figures of a
    one-model file by name}."""
    names = ar.model_names(ds)
    if model is not None:
        if model not in names:
            raise ValueError(f"--model '{model}' is not on the file's model axis {names}")
        ds = ds.isel(model=[names.index(model)])
        names = [model]
    os.makedirs(out_dir, exist_ok=True)
    several = len(names) > 1
    opt_file = Options(ds, T=T, N=N, normalizer=normalizer, band=band)
    if opt_file.N != N:
        note(f"N = {N} is not in the grid: the distance-vs-L figure uses N = {opt_file.N}")
    if T is not None and opt_file.T != T:
        note(f"T = {T:g} is not in the grid: using T = {opt_file.T:g}")
    drawn = {"models": {}, "options": opt_file}
    rows = []
    for m, name in enumerate(names):
        one = ar.select_model(ds, m)
        opt = Options(one, T=T, N=N, normalizer=normalizer, band=band)
        if several:
            print(f"model {name}:")
        drawn["models"][name] = draw_model(one, opt, os.path.join(out_dir, name) if several
                                           else out_dir, fmt)
        rows += [(name,) + tuple(r) for r in headline(one, opt)]
    if several:
        drawn["checkpoints"] = checkpoints.fig_checkpoints(ds, opt_file, out_dir, fmt, _save)
        if drawn["checkpoints"] is not None:
            print(f"wrote {drawn['checkpoints']['path']}")
            print(f"wrote {drawn['checkpoints']['csv_path']}")
    else:
        drawn["checkpoints"] = None
        note(f"checkpoints skipped: the file holds one model ({names[0]}); the checkpoint "
             "figure compares several (config: model = [\"DIR1\", \"DIR2\", ...])")
        drawn.update(drawn["models"][names[0]])
    print_summary(rows)
    drawn["summary"] = rows
    drawn["summary_path"] = write_summary(rows, out_dir)
    print(f"wrote {drawn['summary_path']}")
    return drawn


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="results file written by `attnsweep run`")
    parser.add_argument("--out", required=True, help="output directory (created)")
    parser.add_argument("--format", choices=("png", "pdf"), default="png")
    parser.add_argument("--T", type=float, default=None,
                        help="temperature of the fixed-T figures (default: closest to 8, native)")
    parser.add_argument("--N", type=int, default=5, help="top-N of distance vs L (default 5)")
    parser.add_argument("--normalizer", default=None, help="default: softmax (else the first)")
    parser.add_argument("--band", choices=("std", "quantile"), default="std",
                        help="window spread: mean -+ std or 10-90%% quantiles")
    parser.add_argument("--model", default=None,
                        help="draw this model of the model axis alone (default: every model, "
                             "and the checkpoint figure when there are several)")
    args = parser.parse_args(argv)
    try:
        ds = ar.load(args.results)
    except (OSError, ValueError) as exc:
        print(f"figures: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    if args.normalizer and args.normalizer not in [str(v) for v in ds["normalizer"].values]:
        print(f"figures: --normalizer '{args.normalizer}' is not in the file's normalizer axis "
              f"{[str(v) for v in ds['normalizer'].values]}", file=sys.stderr)
        return 2
    if args.T is not None and args.T <= 0:
        print(f"figures: --T {args.T:g} is not a positive temperature", file=sys.stderr)
        return 2
    if args.model is not None and args.model not in ar.model_names(ds):
        print(f"figures: --model '{args.model}' is not on the file's model axis "
              f"{ar.model_names(ds)}", file=sys.stderr)
        return 2
    print(ar.summary(ds))
    draw_all(ds, args.out, args.format, T=args.T, N=args.N, normalizer=args.normalizer,
             band=args.band, model=args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
