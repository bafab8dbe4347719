#!/usr/bin/env bash
# tests/integration/test_newcomer.sh -- the first hour of a new user, end to end:
#   1. clone the repository (its committed HEAD) into a scratch folder, as a user would;
#   2. run the quick start there offline (jobs/quickstart.sh --offline: synthetic model, GPL-3
#      text), with ATTNSWEEP_TIMINGS=1 so the run reports its CPU time per window;
#   3. run every command the quick start printed (its "  $ " lines) as printed;
#   4. run every fenced code block of README.md and analysis/README.md as written, in order:
#      sh blocks line by line (backslash continuations joined) with bash, python blocks of one
#      file in one /usr/bin/python3 session; a block right after a line
#      "<!-- newcomer-test: skip (REASON) -->" is skipped and listed with its reason;
#   5. checks plan's time per window against the CPU time the quick start measured: within a
#      factor of 3 either way (CPU time: a loaded machine stretches wall time, not CPU time).
# Every command runs from the clone's top folder. Root: Open MPI's OMPI_ALLOW_RUN_AS_ROOT*.
# usage: test_newcomer.sh REPO [SCRATCH]
set -uo pipefail
REPO=${1:?usage: test_newcomer.sh REPO [SCRATCH]}
SCRATCH=${2:-$(mktemp -d /tmp/attnsweep-newcomer.XXXXXX)}
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MPLBACKEND=Agg
rm -rf "$SCRATCH/clone"; mkdir -p "$SCRATCH"
if git -C "$REPO" rev-parse --git-dir > /dev/null 2>&1; then
  git clone -q "$REPO" "$SCRATCH/clone" || fail "git clone $REPO"
  [ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] ||
    echo "newcomer: note: $REPO has uncommitted changes; the clone tests the last commit"
  cd "$SCRATCH/clone" || fail "cd"
  echo "newcomer: clone of $(git log -1 --format='%h %s')"
else   # a source tree without git (a tarball): copy it, without what a build or a run left
  mkdir -p "$SCRATCH/clone" &&
    tar -C "$REPO" --exclude=./build --exclude=./results --exclude=./models --exclude=./data -cf - . |
    tar -C "$SCRATCH/clone" -xf - || fail "copy $REPO"
  cd "$SCRATCH/clone" || fail "cd"
  echo "newcomer: copy of $REPO (not a git checkout)"
fi

# 2. the quick start
t0=$(date +%s)
ATTNSWEEP_TIMINGS=1 jobs/quickstart.sh --offline > qs.log 2>&1 || { tail -30 qs.log >&2; fail "jobs/quickstart.sh --offline exited $?"; }
echo "newcomer: quick start ran in $(( $(date +%s) - t0 )) s"
[ -f results/quickstart.cfg ] || fail "the quick start did not write results/quickstart.cfg"
grep -q '^model = "\.\./models/' results/quickstart.cfg || fail "results/quickstart.cfg does not name the model it ran"

run_line() {   # WHERE LINE
  echo "newcomer: [$1] $ $2"
  bash -c "$2" > cmd.out 2>&1 < /dev/null   # never the loop's input
  local rc=$?
  if [ "$rc" != 0 ]; then sed 's/^/    | /' cmd.out; fail "[$1] exited $rc: $2"; fi
  sed 's/^/    | /' cmd.out | tail -8
}

# 3. what the quick start printed
mapfile -t printed < <(sed -n 's/^  \$ //p' qs.log)
[ "${#printed[@]}" -ge 3 ] || fail "the quick start printed ${#printed[@]} next commands, want 3: $(tail -20 qs.log)"
for c in "${printed[@]}"; do run_line "quick start" "$c"; done

# 4. README code blocks
extract() {   # FILE -> records "LANG<TAB>LINE" (LANG sh|python|skip:REASON), one per logical line
  /usr/bin/python3 - "$1" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
skip, lang, buf, cont = None, None, [], ""
for ln in lines:
    m = re.match(r"<!-- newcomer-test: skip \((.*)\) -->", ln)
    if lang is None and m:
        skip = m.group(1); continue
    if lang is None:
        f = re.match(r"```(\w+)", ln)
        if f:
            lang = f.group(1)
        elif ln.strip():
            skip = None if not ln.startswith("<!--") else skip
        continue
    if ln.startswith("```"):
        lang, skip = None, None; continue
    tag = f"skip:{skip}" if skip else lang
    if lang == "sh":
        if ln.rstrip().endswith("\\"):
            cont += ln.rstrip()[:-1] + " "; continue
        ln, cont = cont + ln, ""
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
    print(f"{tag}\t{ln}")
PY
}
for doc in README.md analysis/README.md; do
  py=$SCRATCH/snippets-$(echo "$doc" | tr / -).py
  : > "$py"; echo 'import sys' >> "$py"
  n_py=0
  while IFS=$'\t' read -r tag line; do
    case "$tag" in
      sh) run_line "$doc" "$line" ;;
      python) printf '%s\n' "$line" >> "$py"; n_py=$((n_py + 1)) ;;
      skip:*) echo "newcomer: [$doc] skipped (${tag#skip:}): $line" ;;
      *) fail "$doc: a code block of language '$tag': the test runs sh and python only" ;;
    esac
  done < <(extract "$doc")
  if [ "$n_py" -gt 0 ]; then
    echo "newcomer: [$doc] $n_py python lines under /usr/bin/python3"
    /usr/bin/python3 "$py" > cmd.out 2>&1 || { cat cmd.out >&2; fail "$doc: the python snippets failed"; }
    tail -5 cmd.out | sed 's/^/    | /'
  fi
done

# what the README promises around the extension, and make-sbatch's refusals before the queue
expect_fail() {   # PATTERN CMD...: exit 1, one stderr line matching PATTERN
  local pat=$1; shift
  "$@" > cmd.out 2> cmd.err < /dev/null; local rc=$?
  [ "$rc" = 1 ] && grep -qF -- "$pat" cmd.err || fail "'$*' exited $rc, want 1 with '$pat': $(cat cmd.err)"
  echo "newcomer: refused as documented: $(grep -F -- "$pat" cmd.err | head -1 | cut -c1-160)"
}
expect_fail "windows.count (refused: stored 4, now 2)" mpirun -np 2 --oversubscribe build/attnsweep run results/quickstart.cfg
expect_fail "more than the sweep's 4 windows" jobs/make-sbatch.sh results/quickstart.h5 -N 1 -n 2 -t 10 --shards 5 --dry-run
expect_fail "the windows need" jobs/make-sbatch.sh results/quickstart.h5 -N 1 -n 2 -t 10 --dry-run -- --set windows.count=1000
# the quick start on a second text keeps the first one's config and results; a PDF is refused
cp results/quickstart.cfg qs.cfg.before
for i in $(seq 300); do echo "Another text, line $i, with words of its own."; done > other.txt
expect_fail "give this run its own name (--name NAME)" jobs/quickstart.sh --offline --text other.txt
cmp -s results/quickstart.cfg qs.cfg.before || fail "a quick start on another text rewrote results/quickstart.cfg"
printf '%%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n' > paper.pdf
expect_fail "pdftotext" jobs/quickstart.sh --offline --text paper.pdf --name paper
[ ! -e results/paper.cfg ] || fail "the quick start wrote results/paper.cfg for a PDF"
build/attnsweep help plan | grep -q -- "--check" || fail "attnsweep help plan does not document --check"
build/attnsweep --version | grep -q "^attnsweep " || fail "attnsweep --version"
for s in jobs/*.sh; do
  [ -x "$s" ] || continue
  "$s" --help > cmd.out 2>&1 || fail "$s --help exited $?"
  ! grep -qE '^(set |here=|prog=|\. )' cmd.out || fail "$s --help prints source lines: $(tail -3 cmd.out)"
done

# 5. plan's estimate beside the quick start's measured CPU time per window: printed, never a
# verdict -- CPU seconds grow with the machine's load, and a test must not fail by chance (the
# cost model's accuracy is measured by tests/bench/bench_plan_cost.c, on an idle machine)
est=$(build/attnsweep plan results/quickstart.cfg | sed -n 's/^time *\([0-9.]*\) \(s\|min\) per window.*/\1 \2/p')
meas=$(sed -n 's/.*per window.*cpu: forward \([0-9.]*\), metrics \([0-9.]*\).*/\1 \2/p' qs.log | head -1)
[ -n "$est" ] && [ -n "$meas" ] || fail "no plan estimate ('$est') or no measured timings ('$meas')"
/usr/bin/python3 - "$est" "$meas" <<'PY'
import sys
v, unit = sys.argv[1].split(); est = float(v) * (60 if unit == "min" else 1)
f, m = map(float, sys.argv[2].split()); cpu = f + m
print(f"newcomer: plan {est:.2f} s per window, measured {cpu:.2f} s CPU (forward {f:.2f} + metrics {m:.2f}): "
      f"ratio {est / cpu:.2f} (information only)")
PY
echo "PASS test_newcomer"
