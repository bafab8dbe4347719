"""The checkpoint figure: attention entropy and separability per model, against the training
step or the model size -- the paper's monitoring guideline (arXiv 2508.17821; docs/metrics.md
sections 8 and 6: watch the attention entropy and the separable fraction N_s / N while a
model trains).

Drawn by figures.py when the file's model axis has more than one entry. One point per model
and L: the median and the quartiles of the pooled values of every (window, layer, head) the
model has (head_valid == 1; load() already made the others NaN) in the finished cells, at

- T: the grid value closest to 8 (GPT-2's own attention, softmax(q.k / sqrt(64)) = T 8 on
  raw logits), or --T; the normalizer of the other figures (softmax);
- entropy_norm (docs/metrics.md section 8): no N;
- the resolvable separability max(sep_ratio - sep_marginal, 0) per (window, layer, head),
  as the separability figure draws it (docs/metrics.md section 6.2; sep_ratio itself on an
  older file without sep_marginal), at a middle N of the grid: the middle entry of the Ns
  below the largest L (every L has rows there, docs/metrics.md section 6);
- one line (the median) per L; the largest L bold with its quartiles as a band (the setting
  of the other figures; the other Ls' quartiles are in the CSV).

x: the training step when every model has a distinct one (training_step >= 0), else the
model size when the file stores n_layer and n_embd and they tell the models apart
(non-embedding parameters of a GPT-2 block stack, 12 n_layer n_embd^2 + 13 n_layer n_embd:
attention 4d^2 + 4d, MLP 8d^2 + 5d, two layer norms 4d; n_head does not change it), else
the model names in file order.

checkpoints.csv beside the figure holds every plotted number (and the count of pooled values).
"""
import csv
import os

import matplotlib.pyplot as plt
import numpy as np

import attnsweep_results as ar

QUARTILES = (25, 50, 75)
CSV_HEADER = ("model", "training_step", "x", "quantity", "L", "N", "T", "normalizer", "count",
              "q25", "median", "q75")


def gpt2_block_params(n_layer, n_embd):
    """Non-embedding parameters of n_layer GPT-2 blocks of width n_embd (see the header)."""
    n_layer, d = np.asarray(n_layer, dtype="int64"), np.asarray(n_embd, dtype="int64")
    return n_layer * (12 * d * d + 13 * d)


def x_axis(ds):
    """(x values per model, x label, kind 'step' | 'size' | 'name', why) for the file's models."""
    steps = ar.training_steps(ds)
    if np.all(steps >= 0) and len(set(steps.tolist())) == len(steps):
        return steps.astype(float), "training step", "step", "every model has a training_step"
    why = ("not every model has a training_step" if not np.all(steps >= 0)
           else "two models share a training_step")
    if "model_n_layer" in ds.variables and "model_n_embd" in ds.variables:
        params = gpt2_block_params(ds["model_n_layer"].values, ds["model_n_embd"].values)
        if np.all(params > 0) and len(set(params.tolist())) == len(params):
            return (params.astype(float),
                    "non-embedding parameters (12 n_layer n_embd² + 13 n_layer n_embd)", "size",
                    why)
        why += "; the models have one size"
    else:
        why += "; the file stores no model_n_layer / model_n_embd"
    return np.arange(ds.sizes["model"], dtype=float), "model", "name", why


def middle_N(ds, L_max):
    """The middle N of the grid among those below L_max (the largest such if one)."""
    N = np.asarray(ds["N"].values)
    below = N[N < L_max]
    return int((below if below.size else N)[len(below if below.size else N) // 2])


def pooled_quartiles(values):
    """values [model, L, pool] -> (q25, median, q75, count) [model, L]: numpy's percentiles
    over the finite entries of the pool (NaN where none)."""
    count = np.isfinite(values).sum(axis=-1)
    with ar.empty_slices_stay_nan():   # an all-NaN pool stays NaN
        q = [np.nanpercentile(values, p, axis=-1) for p in QUARTILES]
    return q[0], q[1], q[2], count


def _pool(da):
    """da over (model, window, L, layer, head) -> array [model, L, window * layer * head]."""
    a = np.asarray(da.transpose("model", "L", "window", "layer", "head").values, dtype=float)
    return a.reshape(a.shape[0], a.shape[1], -1)


def resolvable_sep(cell):
    """max(sep_ratio - sep_marginal, 0) per value, NaN where either is; sep_ratio
    when the file has no sep_marginal. Returns (DataArray, label)."""
    if "sep_marginal" not in cell:
        return cell["sep_ratio"], "sep_ratio (no sep_marginal in this older file)"
    res = (cell["sep_ratio"] - cell["sep_marginal"]).clip(min=0)
    return (res.where(cell["sep_ratio"].notnull() & cell["sep_marginal"].notnull()),
            "resolvable N_s / N = max(sep_ratio - sep_marginal, 0)")


def models_text(ds):
    """'models: a, b, c' and, per kind, 'model_kind other (a trained model, not GPT-2)'
    naming the models of each kind when there are several kinds: two lines."""
    kinds = ar.model_kinds(ds)
    names = ar.model_names(ds)
    groups = []
    for kind in dict.fromkeys(kinds):
        who = ", ".join(n for n, k in zip(names, kinds) if k == kind)
        groups.append(f"model_kind {kind} ({ar.MODEL_KINDS.get(kind, 'unknown model')})"
                      + (f": {who}" if len(set(kinds)) > 1 else ""))
    return f"models: {', '.join(names)}\n" + "; ".join(groups)


def note(msg):
    print(f"note: {msg}", flush=True)


def fig_checkpoints(ds, opt, out_dir, fmt, save):
    """The checkpoint figure of a multi-model Dataset (load()), written by save(fig, opt,
    out_dir, name, fmt) (figures._save: adds the readings to the title); None (and a note)
    when the file cannot support it. Returns the plotted arrays [model, L] and the paths."""
    if ds.sizes["model"] < 2:
        note("checkpoints skipped: the file holds one model")
        return None
    L = np.asarray(ds["L"].values, dtype=float)
    N = middle_N(ds, opt.L_max)
    x, xlabel, xkind, why = x_axis(ds)
    if xkind != "step":
        note(f"checkpoints: x = {'model size' if xkind == 'size' else 'model name'} ({why})")
    cell = ds.sel(T=opt.T, normalizer=opt.normalizer)
    sep, sep_label = resolvable_sep(cell.sel(N=N))
    result = {"x": x, "x_kind": xkind, "L": L, "N": N, "T": opt.T, "normalizer": opt.normalizer,
              "models": ar.model_names(ds), "training_step": ar.training_steps(ds)}
    for key, da in (("entropy_norm", cell["entropy_norm"]), ("sep", sep)):
        q25, med, q75, count = pooled_quartiles(_pool(da))
        result[key] = {"q25": q25, "median": med, "q75": q75, "count": count}
    if not np.isfinite(result["entropy_norm"]["median"]).any():
        note("checkpoints skipped: no finished cell of any model")
        return None
    order = np.argsort(x, kind="stable")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7.5), sharex=True)
    for ax, key, ylabel in ((top, "entropy_norm", "normalized entropy H / ln n"),
                            (bottom, "sep", sep_label)):
        q = result[key]
        for i, Lv in enumerate(L):
            ok = order[np.isfinite(q["median"][order, i])]
            if not ok.size:
                continue
            bold = int(Lv) == opt.L_max
            color = f"C{i % 10}"
            ax.plot(x[ok], q["median"][ok, i], "-o", color=color, lw=2.2 if bold else 1,
                    ms=5 if bold else 3, label=f"L = {int(Lv)}" + (" (largest)" if bold else ""))
            if bold:   # the other Ls' quartiles are in checkpoints.csv (bands would overlap)
                ax.fill_between(x[ok], q["q25"][ok, i], q["q75"][ok, i], color=color,
                                alpha=0.25, lw=0, label=f"quartiles, L = {int(Lv)}")
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    top.legend(fontsize=8, title="median over heads x windows", title_fontsize=7)
    if xkind == "size":
        bottom.set_xscale("log")
    if xkind == "name":
        bottom.set_xticks(x, result["models"], rotation=20, ha="right", fontsize=8)
    bottom.set_xlabel(xlabel)
    top.set_title(f"Attention entropy and separability across models\n(T = {opt.T:g}: the grid T "
                  f"closest to GPT-2's own 8; {opt.normalizer}; top: every L; bottom: N = {N}, "
                  f"the middle N of the grid)\n(not in the paper: its monitoring guideline)",
                  fontsize=10)
    # _save appends the tag of opt (the readings) to every titled panel; the models go there
    opt_models = _Tagged(opt, models_text(ds))
    result["title"] = "\n".join([top.get_title(), opt_models.tag])
    result["path"] = save(fig, opt_models, out_dir, "checkpoints", fmt)
    result["csv_path"] = write_csv(result, os.path.join(out_dir, "checkpoints.csv"))
    print_table(result, opt.L_max)
    return result


class _Tagged:
    """opt with another title tag (the model list instead of one model)."""

    def __init__(self, opt, who):
        self.tag = "; ".join(p for p in (who, opt.readings) if p)


def write_csv(result, path):
    """Every plotted number: one row per (model, quantity, L); floats as Python's repr."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_HEADER)
        for key, quantity, N in (("entropy_norm", "entropy_norm", ""),
                                 ("sep", "sep_resolvable", result["N"])):
            q = result[key]
            for m, name in enumerate(result["models"]):
                for i, Lv in enumerate(result["L"]):
                    writer.writerow((name, int(result["training_step"][m]), repr(float(result["x"][m])),
                                     quantity, int(Lv), N, repr(float(result["T"])),
                                     result["normalizer"], int(q["count"][m, i]),
                                     *(repr(float(q[k][m, i])) for k in ("q25", "median", "q75"))))
    return path


def print_table(result, L_max):
    """The largest L's medians per model, the lines a quick-start user reads."""
    i = int(np.flatnonzero(result["L"] == L_max)[0])
    print(f"checkpoints at L = {L_max}, T = {result['T']:g}: median [quartiles] over heads x windows")
    for m, name in enumerate(result["models"]):
        step = int(result["training_step"][m])
        e, s = result["entropy_norm"], result["sep"]
        print(f"  {name:<24} {'step ' + str(step) if step >= 0 else '':<11} "
              f"entropy_norm {e['median'][m, i]:.3f} [{e['q25'][m, i]:.3f}, {e['q75'][m, i]:.3f}]  "
              f"sep (N = {result['N']}) {s['median'][m, i]:.3f} "
              f"[{s['q25'][m, i]:.3f}, {s['q75'][m, i]:.3f}]")
