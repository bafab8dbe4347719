#!/bin/sh
# bench_metrics_vs.sh -- the metrics kernel against a baseline commit, in one run: builds the
# baseline's bench_metrics in a temporary git worktree, then runs the baseline's and this
# tree's build/bench_metrics alternately (old new old new ...: pairing keeps the ratio
# meaningful when a shared machine's speed drifts) and prints, per timed figure, every run,
# the medians and the median of the pair-by-pair ratios new / old.
#
# usage: tests/bench/bench_metrics_vs.sh [--base COMMIT] [--runs R] [--build DIR] [-- BENCH ARGS]
#   --base COMMIT  the baseline (default: the last commit before the row blocks, 094b9b9,
#                  6e9a4cd when this was written, found by its subject "bench_metrics:
#                  --paper grid" so that a rebase does not lose it; its bench_metrics already
#                  has --paper and --minimal)
#   --runs R       pairs of runs (default 3)
#   --build DIR    this tree's build directory (default build); its bench_metrics is rebuilt
#   BENCH ARGS     passed to both (default: 1024 12 --no-direct --paper)
# Timed figures: met_head's CPU seconds for the grid, and the fixed cost per head (the grid
# N = [1], T = [8], eps = [0.1] on the same heads). Both benches are run with
# OPENBLAS_NUM_THREADS=1; times are CPU seconds of the process (the machine may be shared).
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
base=""
runs=3
build=$here/build
while [ $# -gt 0 ]; do
    case $1 in
        --base) base=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_metrics_vs.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || set -- 1024 12 --no-direct --paper
if [ -z "$base" ]; then
    base=$(git -C "$here" log --format=%H -1 --grep='^bench_metrics: --paper grid' HEAD)
    [ -n "$base" ] || { echo "bench_metrics_vs.sh: no default baseline in this history (give --base)" >&2; exit 2; }
fi
tmp=$(mktemp -d /tmp/bench_metrics_vs.XXXXXX)
cleanup() {
    git -C "$here" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
git -C "$here" worktree add --detach "$tmp/src" "$base" >/dev/null 2>&1 ||
    { echo "bench_metrics_vs.sh: cannot check out $base" >&2; exit 2; }
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 &&
    make -C "$tmp/build" -j2 bench_metrics >>"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; echo "bench_metrics_vs.sh: baseline build failed" >&2; exit 1; }
make -C "$build" -j2 bench_metrics >"$tmp/make.log" 2>&1 ||
    { cat "$tmp/make.log" >&2; echo "bench_metrics_vs.sh: build of this tree failed" >&2; exit 1; }
old=$tmp/build/bench_metrics
new=$build/bench_metrics
echo "bench_metrics_vs: baseline $(git -C "$here" rev-parse --short "$base"), new $(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet HEAD -- src include || echo '+uncommitted'); args: $*"
i=0
while [ $i -lt "$runs" ]; do
    for which in old new; do
        eval "bin=\$$which"
        OPENBLAS_NUM_THREADS=1 "$bin" "$@" >"$tmp/$which.$i.out"
        grid=$(awk '/^met_head:/ {print $5}' "$tmp/$which.$i.out")
        fixed=$(sed -n 's/^fixed cost.* CPU s, \([0-9.]*\) s\/head.*/\1/p' "$tmp/$which.$i.out")
        echo "$which $i $grid $fixed" >>"$tmp/times"
        echo "  run $i $which: grid $grid CPU s, fixed cost ${fixed:-?} s/head"
    done
    i=$((i + 1))
done
awk '
function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == "old" { og[$2] = $3; of[$2] = $4 }
$1 == "new" { ng[$2] = $3; nf[$2] = $4 }
END {
    n = 0
    for (k in og) {
        n++; a1[n] = og[k]; a2[n] = ng[k]; a3[n] = ng[k] / og[k]
        b1[n] = of[k]; b2[n] = nf[k]; b3[n] = (of[k] > 0 ? nf[k] / of[k] : 0)
    }
    mo = median(a1, n); mn = median(a2, n); r = median(a3, n)
    printf "bench_metrics_vs: grid: old %.3f CPU s, new %.3f (medians of %d); new/old %.3f pair by pair: %.2fx faster\n", mo, mn, n, r, 1 / r
    fo = median(b1, n); fn = median(b2, n); rf = median(b3, n)
    if (fo > 0) printf "bench_metrics_vs: fixed cost: old %.4f s/head, new %.4f; new/old %.3f: %.2fx faster\n", fo, fn, rf, 1 / rf
}' "$tmp/times"
echo "bench_metrics_vs: last new run's report:"
sed 's/^/  /' "$tmp/new.$((runs - 1)).out"
