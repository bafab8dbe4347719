#!/usr/bin/env python3
"""Every function in src/ is shorter than 120 lines (the house rule, docs/hacking.md).

usage: funclen.py SOURCE_DIR [LIMIT]

A long function is split into named steps; this keeps it so. Counts each function
definition of src/*/*.[ch] and include/*/*.h from the first line of its signature to its
closing brace, both included, with a brace counter that skips comments, string and
character literals and preprocessor lines. A definition is a top-level `{` that follows
`)`: initialisers (`= {`), structs and enums are not functions. Fails, naming file, line
and length, for each one of LIMIT (120) lines or more; prints the longest either way.
"""
import glob
import os
import re
import sys

NAME = re.compile(r"(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*$")


def blank_out(text):
    """text with comments, literals and preprocessor lines replaced by spaces (newlines kept)"""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    lines, cont = "".join(out).split("\n"), False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            lines[k] = ""
    return lines


def functions(path):
    """(first line, last line, name) of each function defined in path (1-based lines)"""
    with open(path, encoding="utf-8") as f:
        lines = blank_out(f.read())
    depth, start = 0, None
    for no, line in enumerate(lines):
        for col, ch in enumerate(line):
            if ch == "{":
                if depth == 0:
                    before = " ".join(lines[max(0, no - 8):no] + [line[:col]]).rstrip()
                    m = NAME.search(before)
                    start = None
                    if m:
                        first = no  # back to the line after a blank one or a ';' / '}'
                        while first > 0 and lines[first - 1].strip() and not lines[first - 1].rstrip().endswith((";", "}")):
                            first -= 1
                        start = (first, m.group(1))
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start:
                    yield start[0] + 1, no + 1, start[1]
                    start = None


def main():
    root = os.path.abspath(sys.argv[1])
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    paths = sorted(glob.glob(os.path.join(root, "src", "*", "*.[ch]")) +
                   glob.glob(os.path.join(root, "include", "*", "*.h")))
    found, bad = [], 0
    for path in paths:
        rel = os.path.relpath(path, root)
        for first, last, name in functions(path):
            found.append((last - first + 1, rel, first, name))
            if last - first + 1 >= limit:
                print("%s:%d: %s() is %d lines, %d or more: split it into named steps" %
                      (rel, first, name, last - first + 1, limit))
                bad += 1
    if not found:
        print("funclen: no function definitions found under %s" % root)
        return 1
    n, rel, first, name = max(found)
    print("funclen: %d functions, the longest %s() at %s:%d, %d lines; %d of %d lines or more" %
          (len(found), name, rel, first, n, bad, limit))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
