#!/usr/bin/python3
"""analysis/report.py writes one self-contained HTML page that a real browser renders.

A real `attnsweep run` on the tiny model (2 windows, 3 L) makes the results file; the
report is written by the command line as a user runs it. Then:
  - the page: every section of report.SECTIONS, in order; every <img> a base64 PNG that
    decodes (PNG signature) and names a figure of figures.FIGURES; nothing fetched from
    outside the page (every src and href a data: URI or a #fragment); the axes table's sizes
    equal the file's dimension scales (h5py); the config section holds config_text
    byte for byte; one headline row "critical N / L" per L;
  - headless Chromium (`--screenshot`): the screenshot is not blank (more than 5 % of its
    pixels not white, some saturated colour: a figure's curves), and the DOM it built
    (`--dump-dom` of a copy carrying a load-time probe) has every section and has decoded
    every image (naturalWidth > 0).
Exits 77 (SKIPPED) after the page checks when no chromium is installed
(jobs/setup.sh --tests installs Debian's).

usage: test_report.py ATTNSWEEP MODEL_DIR SCRATCH
"""
import base64
import html.parser
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sweeptest import ANALYSIS, ENV, check, summary, import_analysis  # noqa: E402

figures, report = import_analysis("figures", "report")

BIN, MODEL, SCRATCH = sys.argv[1:4]
L_GRID = (16, 32, 64)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# a probe the test adds to a copy of the page (the page itself has no script): after the
# load event, the count of images the browser decoded
PROBE = ('<script>window.addEventListener("load",function(){var n=0;'
         'for(var i of document.images){if(i.complete&&i.naturalWidth>0)n++;}'
         'document.body.setAttribute("data-images-decoded",n);});</script></body>')


def make_results():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(5)
    np.save(os.path.join(SCRATCH, "tokens.npy"), rng.integers(0, 50257, size=300).astype("<u2"))
    with open(os.path.join(SCRATCH, "sweep.cfg"), "w") as f:
        f.write(f"""model = "{MODEL}";
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 2; offset = 0; stride = 64; }};
grid = {{ L = [{", ".join(map(str, L_GRID))}]; N = [1, 2, 4, 8]; T = [0.01, 0.1, 1.0, 8.0];
         eps = [0.1]; normalizer = ["softmax", "sparsemax"]; }};
output = "results.h5";
""")
    run = subprocess.run([BIN, "run", "sweep.cfg"], cwd=SCRATCH, env=ENV, capture_output=True,
                         text=True, timeout=240)
    if run.returncode != 0:
        sys.exit(f"attnsweep run failed with exit {run.returncode}: {run.stderr}")
    return os.path.join(SCRATCH, "results.h5")


class Page(html.parser.HTMLParser):
    """Section ids in order, images, every src and href, each section's text and table rows."""

    def __init__(self):
        super().__init__()
        self.sections, self.imgs, self.links, self.rows = [], [], [], {}
        self.text, self.cur, self.row, self.body_attrs = {}, None, None, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.cur = a.get("id")
            self.sections.append(self.cur)
            self.text[self.cur], self.rows[self.cur] = "", []
        if tag == "body":
            self.body_attrs = a
        if tag == "img":
            self.imgs.append(a)
        for key in ("src", "href"):
            if key in a:
                self.links.append(a[key])
        if tag == "tr" and self.cur:
            self.row = []
            self.rows[self.cur].append(self.row)
        if tag in ("td", "th") and self.row is not None:
            self.row.append("")

    def handle_data(self, data):
        if self.cur:
            self.text[self.cur] += data
        if self.row:
            self.row[-1] += data

    def handle_endtag(self, tag):
        if tag == "section":
            self.cur = None
        if tag == "tr":
            self.row = None


def parse(text):
    p = Page()
    p.feed(text)
    return p


def check_page(path, text):
    p = parse(text)
    want = [s for s, _ in report.SECTIONS]
    check(p.sections == want, f"sections {p.sections}, want {want}")
    names = {n for n, _ in figures.FIGURES}
    check(len(p.imgs) >= 5, f"{len(p.imgs)} figures embedded, want at least 5")
    for img in p.imgs:
        src = img.get("src", "")
        ok = src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1]) if ok else b""
        check(ok and data.startswith(PNG_MAGIC), f"figure {img.get('alt')}: not a base64 PNG")
        check(img.get("alt") in names, f"figure {img.get('alt')} is not one of figures.FIGURES")
    outside = [u for u in p.links if not (u.startswith("data:") or u.startswith("#"))]
    check(not outside, f"the page fetches from outside itself: {outside[:3]}")
    with h5py.File(path, "r") as f:
        sizes = {row[0]: int(row[1]) for row in p.rows["axes"][1:]}
        for dim in ("window", "L", "N", "T", "eps", "normalizer", "layer", "head"):
            check(sizes.get(dim) == f[dim].shape[0],
                  f"axes table: {dim} has {sizes.get(dim)}, the file {f[dim].shape[0]}")
        cfg = f.attrs["config_text"]
        cfg = cfg.decode() if isinstance(cfg, bytes) else str(cfg)
    shown = p.text["config"].strip().split("\n", 1)   # the heading, then the <pre>
    check(len(shown) == 2 and shown[1].strip() == cfg.strip(), "config section differs from config_text")
    crit = [r for r in p.rows["headline"] if len(r) > 1 and r[1] == "critical N / L"]
    check(len(crit) == len(L_GRID), f"{len(crit)} critical N / L rows, want {len(L_GRID)}")
    return len(p.imgs)


def chromium():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def browser(exe, *args):
    # --no-sandbox: the tests run as root in CI; no GPU in a container
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--user-data-dir=" + os.path.join(SCRATCH, "chromium-profile"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def check_browser(exe, page_path, n_imgs):
    import matplotlib.image
    shot = os.path.join(SCRATCH, "screenshot.png")
    r = browser(exe, "--window-size=1200,1600", f"--screenshot={shot}", "file://" + page_path)
    check(r.returncode == 0 and os.path.exists(shot), f"chromium --screenshot failed: {r.stderr[-300:]}")
    if os.path.exists(shot):
        px = matplotlib.image.imread(shot)[..., :3]
        inked = float((px.min(axis=2) < 0.95).mean())
        colour = int(((px.max(axis=2) - px.min(axis=2)) > 0.3).sum())
        print(f"screenshot: {px.shape[1]}x{px.shape[0]}, {inked:.1%} not white, "
              f"{colour} saturated pixels")
        check(inked > 0.05, f"the screenshot is blank ({inked:.1%} not white)")
        check(colour > 500, f"the screenshot shows no figure ({colour} saturated pixels)")
    probe = os.path.join(SCRATCH, "probe.html")
    with open(page_path, encoding="utf-8") as f:
        text = f.read()
    with open(probe, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", PROBE, 1))
    r = browser(exe, "--dump-dom", "file://" + probe)
    check(r.returncode == 0, f"chromium --dump-dom failed: {r.stderr[-300:]}")
    dom = parse(r.stdout)
    check(dom.sections == [s for s, _ in report.SECTIONS], f"DOM sections {dom.sections}")
    decoded = dom.body_attrs.get("data-images-decoded")
    print(f"dom: {len(dom.sections)} sections, {decoded} of {n_imgs} images decoded")
    check(decoded == str(n_imgs), f"the browser decoded {decoded} of {n_imgs} images")


def main():
    path = make_results()
    page_path = os.path.join(SCRATCH, "report.html")
    r = subprocess.run([sys.executable, os.path.join(ANALYSIS, "report.py"), path, "-o", page_path],
                       env=dict(ENV, MPLBACKEND="Agg"), capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"report.py exited {r.returncode}: {r.stderr[-500:]}")
    if r.returncode != 0:
        return summary("test_report")
    print(r.stdout.strip())
    with open(page_path, encoding="utf-8") as f:
        n_imgs = check_page(path, f.read())
    bad = subprocess.run([sys.executable, os.path.join(ANALYSIS, "report.py"), path,
                          "--normalizer", "nope", "-o", os.path.join(SCRATCH, "bad.html")],
                         env=ENV, capture_output=True, text=True, timeout=300)
    check(bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
          and "normalizer" in bad.stderr and not os.path.exists(os.path.join(SCRATCH, "bad.html")),
          f"a bad --normalizer: exit {bad.returncode}, stderr {bad.stderr!r}")
    exe = chromium()
    if exe is None:
        rc = summary("test_report")
        if rc:
            return rc
        print("SKIPPED: no chromium on PATH (jobs/setup.sh --tests installs Debian's chromium); "
              "the page checks above passed, the browser checks did not run")
        return 77
    check_browser(exe, page_path, n_imgs)
    return summary("test_report")


if __name__ == "__main__":
    sys.exit(main())
