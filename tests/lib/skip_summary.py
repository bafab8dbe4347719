#!/usr/bin/python3
"""The skipped tests of a ctest run, each with the reason it printed.

ctest counts a skipped test (SKIP_RETURN_CODE, e.g. a missing model) among the ones that
"passed", so "100% tests passed" can hide a dozen tests that never ran. tests/run-all.sh
prints this summary after its ctest line.

usage: skip_summary.py CTEST_OUTPUT LAST_TEST_LOG
  CTEST_OUTPUT   what ctest printed (its "did not run" list names the skipped tests)
  LAST_TEST_LOG  build/Testing/Temporary/LastTest.log (each test's own output)
Prints one line per skipped test, "  NAME: REASON" (the first line of its output that says
SKIP, else the last line it printed), after a heading that counts them; exit 0.
"""
import re
import sys


def skipped_names(ctest_output):
    """Names ctest lists as "(Skipped)" under "The following tests did not run"."""
    return [m.group(1) for m in re.finditer(r"^\s*\d+ - (\S+) \(Skipped\)\s*$", ctest_output, re.M)]


def outputs(last_test_log):
    """{test name: [its output lines]} from LastTest.log."""
    out, name, inside = {}, None, False
    for line in last_test_log.splitlines():
        m = re.match(r"^\d+/\d+ Testing: (\S+)\s*$", line)
        if m:
            name, inside = m.group(1), False
            out[name] = []
        elif name and line.startswith("Output:"):
            inside = True
        elif name and inside and line.startswith("<end of output>"):
            inside = False
        elif name and inside and not set(line) <= {"-"}:
            out[name].append(line)
    return out


def reason(lines):
    for line in lines:
        if re.search(r"\bskip", line, re.I):
            return line.strip()
    return lines[-1].strip() if lines else "(it printed nothing)"


def summary(ctest_output, last_test_log):
    names = skipped_names(ctest_output)
    if not names:
        return ["run-all: no test was skipped"]
    out = outputs(last_test_log)
    lines = [f"run-all: {len(names)} test{'s' if len(names) != 1 else ''} SKIPPED, counted by ctest "
             f"among the 'tests passed' above but never run:"]
    lines += [f"  {n}: {reason(out.get(n, []))}" for n in names]
    return lines


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[4], file=sys.stderr)
        return 2
    texts = []
    for path in argv[1:]:
        try:
            with open(path, errors="replace") as f:
                texts.append(f.read())
        except OSError as e:
            texts.append("")
            print(f"run-all: cannot read {path} ({e.strerror}): skip reasons unknown", file=sys.stderr)
    print("\n".join(summary(*texts)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
