#!/usr/bin/env python3
"""Every repository path named in the tree exists.

usage: paths.py REPO_ROOT

Comments, docs and scripts point readers at files ("see src/store/journal.c",
"tests/reliability/fuzz/build.sh OUTDIR"). A file that moves leaves such pointers
dangling, and a reader then follows them into nothing. This scans every text file of
the repository for words that start with a top-level folder (src/ include/ tests/
docs/ jobs/ configs/ analysis/ tools/ python/) and fails, naming file and line, for
each one that names nothing. Placeholders are not paths: a word with an upper-case
segment (src/LAYER/, cmd_NAME.c), a glob (*), or one ending in '_' or '-' (a prefix).
A program named by its source's stem (tests/bench/bench_metrics) counts as its source.
"""
import os
import re
import sys

ROOTS = ("src", "include", "tests", "docs", "jobs", "configs", "analysis", "tools", "python")
WORD = re.compile(r"(?<![A-Za-z0-9_./$}-])((?:%s)/[A-Za-z0-9_./*{}-]*[A-Za-z0-9_/*-])" % "|".join(ROOTS))
SKIP_DIRS = {".git", "build", "build-asan", "results", "models", "data", "node_modules", "__pycache__"}
TEXT_EXT = {".c", ".h", ".in", ".md", ".py", ".sh", ".cmake", ".cfg", ".txt", ".js", ".sbatch", ".toml", ".json"}
STEM_EXT = (".c", ".sh", ".py")


def placeholder(word):
    return ("*" in word or "{" in word or word.endswith(("_", "-"))
            or any(re.search(r"[A-Z]{2,}", seg) for seg in word.split("/")))


def names_something(root, word):
    path = os.path.join(root, word.rstrip("/"))
    return os.path.exists(path) or any(os.path.exists(path + e) for e in STEM_EXT)


def text_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        for f in files:
            if os.path.splitext(f)[1] in TEXT_EXT or f in ("CMakeLists.txt", "run"):
                yield os.path.join(d, f)


def main():
    root = os.path.abspath(sys.argv[1])
    bad = 0
    for path in sorted(text_files(root)):
        rel = os.path.relpath(path, root)
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        for no, line in enumerate(lines, 1):
            for m in WORD.finditer(line):
                word = m.group(1).rstrip(".")
                if placeholder(word) or names_something(root, word):
                    continue
                print("%s:%d: names %s, which does not exist" % (rel, no, word))
                bad += 1
    if bad:
        print("paths: %d dangling repository paths (fix the pointer, or the path moved)" % bad)
        return 1
    print("paths: every repository path named in the tree exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
