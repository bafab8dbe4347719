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
A document named without its folder ("metrics.md section 1") must be one: the top-level
one, one of docs/, or one beside the file that names it.

A pointer into a document must land on a section it has: `README, "Quick start"`,
`(README, Commands and exit codes)`, `docs/usage.md, "Stopping a run"` name a heading of that file
(or a paragraph's bold lead, `**Sliding windows.**`), the start of it is enough
("The dump file" for "The dump file (`attnsweep dump`)"); `docs/metrics.md section 6.2`
names a numbered heading. A section that moved to another file leaves such a pointer
dangling as surely as a moved file. "README" alone is the top-level README.md; a quoted
section may run on to the next line of a comment; an upper-case name (README, "NAME") is a
placeholder.
"""
import os
import re
import sys

ROOTS = ("src", "include", "tests", "docs", "jobs", "configs", "analysis", "tools", "python")
WORD = re.compile(r"(?<![A-Za-z0-9_./$}-])((?:%s)/[A-Za-z0-9_./*{}-]*[A-Za-z0-9_/*-])" % "|".join(ROOTS))
SKIP_DIRS = {".git", "build", "build-asan", "results", "models", "data", "node_modules", "__pycache__"}
TEXT_EXT = {".c", ".h", ".in", ".md", ".py", ".sh", ".cmake", ".cfg", ".txt", ".js", ".sbatch", ".toml", ".json",
            ".dict"}
STEM_EXT = (".c", ".sh", ".py")
DOC = r"(README(?:\.md)?|(?:docs|analysis|python|tools)/[A-Za-z0-9_-]+\.md)"
# DOC, "Section" (the quote may close on the next line)
QUOTED = re.compile(r"(?<![A-Za-z0-9_/.-])%s,?\s+\"([^\"]*)(\"?)" % DOC)
# README NAME / (README, NAME): a capitalised name up to ) , ; : or the line's end
BARE = re.compile(r"(?<![A-Za-z0-9_/.-])(README(?:\.md)?),?\s+([A-Z][A-Za-z0-9'-]*(?: [A-Za-z0-9'-]+)*)\s*(?=[),;:]|$)")
# DOC section 5 / sections 4, 6 and 10.1
NUMBERED = re.compile(r"(?<![A-Za-z0-9_/.-])%s,?\s+sections?\s+(\d+(?:\.\d+)*(?:(?:,\s*|\s+and\s+)\d+(?:\.\d+)*)*)" % DOC)
BARE_DOC = re.compile(r"(?<![A-Za-z0-9_/.$-])([A-Za-z0-9_-]+\.md)\b")
LEADER = re.compile(r"^\s*(?:\*|#|//|-)?\s*")


def placeholder(word):
    return ("*" in word or "{" in word or word.endswith(("_", "-"))
            or any(re.search(r"[A-Z]{2,}", seg) for seg in word.split("/")))


def names_something(root, word):
    path = os.path.join(root, word.rstrip("/"))
    return os.path.exists(path) or any(os.path.exists(path + e) for e in STEM_EXT)


def doc_exists(root, here, name):
    return any(os.path.exists(os.path.join(d, name)) for d in (root, os.path.join(root, "docs"), here))


def normal(title):
    title = re.sub(r"[`*_]", "", title).strip().rstrip(".:").lower()
    return re.sub(r"\s+", " ", title)


def sections(root, doc, cache):
    """(names, numbers) of doc's headings and bold paragraph leads; None: no such file"""
    if doc not in cache:
        path = os.path.join(root, "README.md" if doc.startswith("README") else doc)
        try:
            text = open(path, encoding="utf-8").read()
        except OSError:
            cache[doc] = None
            return None
        names, numbers = [], set()
        for m in re.finditer(r"^#+\s+(.*)$|^\*\*(.+?)\*\*", text, re.M):
            title = normal(m.group(1) or m.group(2))
            num = re.match(r"(\d+(?:\.\d+)*)\.?\s+(.*)", title)
            if num:
                numbers.add(num.group(1))
                names.append(num.group(2))
            names.append(title)
        cache[doc] = (names, numbers)
    return cache[doc]


def has_section(names, name):
    if not name.strip() or re.fullmatch(r"[A-Z0-9 _-]+", name.strip()):
        return True  # nothing named (a string cut in two), or a placeholder
    name = normal(name)
    return any(t == name or (t.startswith(name) and not t[len(name)].isalnum()) for t in names)


def section_pointers(lines, no):
    """(doc, what, missing) for each section pointer on line no (1-based): what is the
    name or number; missing(names, numbers) is true when the doc lacks it"""
    line = lines[no - 1]
    for m in QUOTED.finditer(line):
        name = m.group(2)
        if not m.group(3) and no < len(lines):  # the quote runs on to the next line
            rest = LEADER.sub("", lines[no])
            if '"' not in rest:
                continue
            name += " " + rest.split('"', 1)[0]
        yield m.group(1), '"%s"' % name.strip(), lambda n, _, x=name: not has_section(n, x)
    for m in BARE.finditer(line):
        yield m.group(1), m.group(2), lambda n, _, x=m.group(2): not has_section(n, x)
    for m in NUMBERED.finditer(line):
        for num in re.split(r",\s*|\s+and\s+", m.group(2)):
            yield m.group(1), "section " + num, lambda _, nums, x=num: x not in nums


def text_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        for f in files:
            if os.path.splitext(f)[1] in TEXT_EXT or f in ("CMakeLists.txt", "run"):
                yield os.path.join(d, f)


def main():
    root = os.path.abspath(sys.argv[1])
    bad = 0
    docs = {}
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
            for m in BARE_DOC.finditer(line):
                if not placeholder(m.group(1)) and not doc_exists(root, os.path.dirname(path), m.group(1)):
                    print("%s:%d: names %s, which is no document here, at the top or in docs/" % (rel, no, m.group(1)))
                    bad += 1
            for doc, what, missing in section_pointers(lines, no):
                found = sections(root, doc, docs)
                if found is not None and missing(*found):
                    print("%s:%d: points to %s %s, a section it does not have" % (rel, no, doc, what))
                    bad += 1
    if bad:
        print("paths: %d dangling repository paths or sections (fix the pointer: the path or the section moved)" % bad)
        return 1
    print("paths: every repository path and document section named in the tree exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
