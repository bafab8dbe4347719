#!/usr/bin/python3
"""One self-contained HTML page for a results file: the figures, the headline table, the
axes, the provenance, the run segments and the config, to mail or archive beside the file.

usage: report.py RESULTS.h5 [-o OUT.html] [--T T] [--N N] [--normalizer NAME]

Default OUT.html: RESULTS.html beside the file. The figures are analysis/figures.py's,
drawn into a temporary folder and embedded as base64 PNG, so the page needs no other file
and no network (no script, font or style sheet is fetched). Every section has an id
(summary, headline, figures, axes, provenance, segments, config, notes) so a test or a
reader can find it; tests/integration/test_report.py renders the page in headless Chromium.
"""
import argparse
import base64
import contextlib
import html
import io
import os
import sys
import tempfile

# restart under /usr/bin/python3 when this interpreter lacks the packages (debian_python.py)
if __name__ == "__main__":
    import debian_python
    debian_python.require("matplotlib", "xarray", "h5netcdf")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnsweep_results as ar  # noqa: E402
import figures  # noqa: E402

# the sections of the page, in order (id, heading)
SECTIONS = (("summary", "Summary"), ("headline", "Headline numbers"), ("figures", "Figures"),
            ("axes", "Axes"), ("provenance", "Provenance"), ("segments", "Run segments"),
            ("config", "Config"), ("notes", "Notes from the figures"))

STYLE = """body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:2px 6px;
text-align:left;font-size:90%;vertical-align:top}th{background:#eee}
pre{background:#f4f4f4;padding:.6em;overflow-x:auto;font-size:85%}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ddd}
.agrees{color:#060}.differs{color:#a00}nav a{margin-right:1em}"""


def esc(value):
    return html.escape(str(value), quote=True)


def table(header, rows, verdict_col=None):
    """An HTML table; the verdict column (agrees / differs) gets a class for its colour."""
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = f' class="{esc(v)}"' if i == verdict_col and v in ("agrees", "differs") else ""
            cells.append(f"<td{cls}>{esc(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out + ["</table>"])


def axis_rows(ds):
    """(dimension, size, values) per axis of the file; long axes shortened in the middle."""
    rows = []
    for dim in ("model", "window", "L", "N", "T", "eps", "normalizer", "layer", "head"):
        if dim not in ds.coords:
            continue
        vals = ds[dim].values
        shown = [f"{v:g}" if vals.dtype.kind == "f" else str(v) for v in vals]
        if len(shown) > 24:
            shown = shown[:10] + ["..."] + shown[-10:]
        rows.append((dim, len(vals), ", ".join(shown)))
    return rows


def embedded_figures(fig_dir):
    """(caption, data URI) of every PNG figures.py wrote: per model folder, in figures.py's
    order (FIGURES), then any other figure (the checkpoint figure) by name."""
    order = {name: i for i, (name, _) in enumerate(figures.FIGURES)}
    found = []
    for d, _, files in os.walk(fig_dir):
        for name in (f for f in files if f.endswith(".png")):
            rel = os.path.relpath(os.path.join(d, name), fig_dir)[:-4]
            folder, stem = os.path.split(rel)
            found.append(((folder, order.get(stem, len(order)), stem), rel))
    out = []
    for _, rel in sorted(found):
        with open(os.path.join(fig_dir, rel + ".png"), "rb") as f:
            out.append((rel, "data:image/png;base64," + base64.b64encode(f.read()).decode("ascii")))
    return out


def draw(ds, fig_dir, T, N, normalizer):
    """figures.draw_all into fig_dir, its printed lines captured: (drawn, note lines)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        drawn = figures.draw_all(ds, fig_dir, "png", T=T, N=N, normalizer=normalizer)
    notes = [ln[len("note: "):] for ln in buf.getvalue().splitlines() if ln.startswith("note: ")]
    return drawn, notes


def section(sid, heading, body):
    return f'<section id="{sid}"><h2>{esc(heading)}</h2>\n{body}\n</section>'


def page(path, ds, drawn, notes, figs, segments):
    """The whole HTML text."""
    done, failed, total = ar.cells_done(ds)
    attrs = {k: v for k, v in ds.attrs.items() if k != "config_text"}
    body = {
        "summary": f"<p>{esc(os.path.basename(path))}: {done} of {total} cells done "
                   f"({failed} failed, {total - done - failed} pending); models: "
                   f"{esc(', '.join(ar.model_names(ds)))} ({esc(', '.join(ar.model_kinds(ds)))}); "
                   f"{esc(figures.readings_text(ds) or 'readings not recorded')}.</p>",
        "headline": table(figures.HEADER, drawn["summary"], verdict_col=len(figures.HEADER) - 1)
                    + "<p>The verdicts compare with the paper's GPT-2 small numbers "
                      "(analysis/figures.py, VERDICT_RULES).</p>",
        "figures": "\n".join(f'<figure><img alt="{esc(c)}" src="{uri}">'
                             f"<figcaption>{esc(c)}</figcaption></figure>" for c, uri in figs)
                   or "<p>No figure could be drawn (see the notes).</p>",
        "axes": table(("dimension", "size", "values"), axis_rows(ds)),
        "provenance": table(("attribute", "value"), sorted(attrs.items())),
        "segments": (segments.to_html(index=False, border=0) if segments is not None
                     and len(segments) else "<p>No /provenance group in the file.</p>"),
        "config": f"<pre>{esc(ds.attrs.get('config_text', '(no config_text attribute)'))}</pre>",
        "notes": "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>" if notes
                 else "<p>None.</p>",
    }
    nav = "<nav>" + "".join(f'<a href="#{s}">{esc(h)}</a>' for s, h in SECTIONS) + "</nav>"
    return "\n".join(
        ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         f"<title>attnsweep report: {esc(os.path.basename(path))}</title>",
         f"<style>{STYLE}</style></head><body>",
         f"<h1>attnsweep report: {esc(os.path.basename(path))}</h1>", nav]
        + [section(s, h, body[s]) for s, h in SECTIONS] + ["</body></html>", ""])


def write_report(path, out, T=None, N=5, normalizer=None):
    """Write the page for results file `path` to `out`; returns the number of figures."""
    ds = ar.load(path)
    have = [str(v) for v in ds["normalizer"].values]
    if normalizer is not None and normalizer not in have:
        raise ValueError(f"--normalizer '{normalizer}' is not in the file's normalizer axis {have}")
    if T is not None and not T > 0:
        raise ValueError(f"--T {T:g} is not a positive temperature")
    with tempfile.TemporaryDirectory(prefix="attnsweep-report-") as fig_dir:
        drawn, notes = draw(ds, fig_dir, T, N, normalizer)
        figs = embedded_figures(fig_dir)
    text = page(path, ds, drawn, notes, figs, ar.provenance_segments(path))
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out)   # a reader never sees half a page
    return len(figs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="results file written by `attnsweep run`")
    parser.add_argument("-o", "--out", default=None, help="the HTML page (default: RESULTS.html)")
    parser.add_argument("--T", type=float, default=None, help="as figures.py (default ~8)")
    parser.add_argument("--N", type=int, default=5, help="as figures.py (default 5)")
    parser.add_argument("--normalizer", default=None, help="as figures.py (default softmax)")
    args = parser.parse_args(argv)
    out = args.out or os.path.splitext(args.results)[0] + ".html"
    if os.path.abspath(out) == os.path.abspath(args.results):
        print(f"report: -o {out} is the results file itself", file=sys.stderr)
        return 2
    try:
        n = write_report(args.results, out, T=args.T, N=args.N, normalizer=args.normalizer)
    except (OSError, ValueError, KeyError) as exc:
        print(f"report: {args.results}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    print(f"report: wrote {out} ({n} figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
