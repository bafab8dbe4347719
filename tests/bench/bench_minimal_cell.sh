#!/bin/sh
# bench_minimal_cell.sh -- the minimal cell end to end against PyTorch, in one run: one
# L = 1024 window of the grid N = [1], T = [8], eps = [0.1] on all 144 heads of the synthetic
# GPT-2 small, 2 threads: `attnsweep run` (one rank: model load, forward, metrics, the HDF5
# file; the whole process's wall time) against PyTorch's load of the same model (every tensor
# read and converted to float32) plus one forward pass (tests/reference/ref_gpt2.py, 2
# threads, no warm-up: what a cold script pays), alternated pair by pair. Prints each side,
# attnsweep's phases (ATTNSWEEP_TIMINGS) and the ratio PyTorch / attnsweep per pair and as
# the median, for the grid as it is and with the metrics switches that a minimal grid does
# not need (metrics.grad_exact = false, metrics.dist_expect = false).
#
# usage: tests/bench/bench_minimal_cell.sh [--bin BUILD/attnsweep] [--pairs K] [--work DIR]
#   --pairs K   pairs per variant (default 3)
#   --work DIR  model (548 MB, made once with `attnsweep synth --preset gpt2`), tokens,
#               configs and outputs (default /tmp/bench_minimal_cell)
# The machine may be shared: the CPU seconds of attnsweep's phases are printed too.
set -eu

here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$here/build/attnsweep
pairs=3
work=/tmp/bench_minimal_cell
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_minimal_cell.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "bench_minimal_cell.sh: $bin is not an executable (give --bin)" >&2; exit 2; }
py=/usr/bin/python3
. "$here/tests/bench/blas_env.sh"
bench_blas_env "$bin"
mkdir -p "$work"
model=$work/gpt2-f32
[ -f "$model/model.safetensors" ] || "$bin" synth --preset gpt2 --dtype f32 --seed 1 --out "$model" >/dev/null
[ -f "$work/tokens-1024.npy" ] || "$py" -c "import numpy as np, sys
np.save(sys.argv[1], np.random.default_rng(1).integers(0, 50257, size=1024).astype(np.uint16))" "$work/tokens-1024.npy"

for v in plain switched; do
    extra=""
    [ $v = switched ] && extra="metrics = { grad_exact = false; dist_expect = false; };"
    cat >"$work/$v.cfg" <<EOF
model = "$model";
text = { path = "$work/tokens-1024.npy"; format = "tokens"; };
windows = { count = 1; offset = 0; stride = 1024; };
grid = { L = [1024]; N = [1]; T = [8.0]; eps = [0.1]; normalizer = ["softmax"]; };
runtime = { blas_threads = 2; };
output = "$work/$v.h5";
$extra
EOF
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=2
# PyTorch: load every tensor as float32, then one forward pass at L = 1024
torch_cell() {
    "$py" - "$here/tests/reference" "$model" "$work/tokens-1024.npy" <<'EOF'
import sys, time
t_start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import ref_gpt2
ref_gpt2.torch = torch
torch.set_num_threads(2)
with torch.no_grad():
    c0 = time.process_time()
    t0 = time.perf_counter()
    ref = ref_gpt2.Reference(sys.argv[2])
    ref.w = {name: ref.w[name] for name in ref.w.info}   # the load: every tensor in memory
    t1 = time.perf_counter()
    ref.forward(np.load(sys.argv[3]).astype(np.int64))
    t2 = time.perf_counter()
    c2 = time.process_time()
print(f"torch {t2 - t0:.3f} load {t1 - t0:.3f} forward {t2 - t1:.3f} (import {t0 - t_start:.3f} not counted) cpu {c2 - c0:.3f}")
EOF
}
as_cell() { # $1 = variant; prints "attnsweep WALL" and the timings line
    rm -f "$work/$1.h5" "$work/$1.h5".*
    s=$(date +%s.%N)
    ATTNSWEEP_TIMINGS=1 "$bin" run "$work/$1.cfg" --new >"$work/$1.log" 2>&1 ||
        { echo "bench_minimal_cell.sh: attnsweep run failed, see $work/$1.log" >&2; exit 1; }
    e=$(date +%s.%N)
    awk -v s="$s" -v e="$e" 'BEGIN {printf "attnsweep %.3f\n", e - s}'
    grep -E '^timings: rank 0:' "$work/$1.log" | sed 's/^timings: rank 0: /  phases: /'
}

for v in plain switched; do
    : >"$work/$v.ratios"
    i=1
    while [ $i -le "$pairs" ]; do
        a=$(as_cell $v)
        t=$(torch_cell)
        echo "bench_minimal_cell: $v pair $i: $(echo "$a" | head -1) s; $t"
        echo "$a" | sed -n 2p
        aw=$(echo "$a" | head -1 | awk '{print $2}')
        tw=$(echo "$t" | awk '{print $2}')
        # CPU: attnsweep's process (rank 0 alone), PyTorch's from the load on
        ac=$(echo "$a" | sed -n 2p | sed 's/.*; cpu \([0-9.]*\) s.*/\1/')
        tc=$(echo "$t" | awk '{print $NF}')
        awk -v a="$aw" -v t="$tw" -v ac="$ac" -v tc="$tc" 'BEGIN {printf "%.4f %.4f\n", t / a, tc / ac}' >>"$work/$v.ratios"
        i=$((i + 1))
    done
    for col in 1 2; do
        cut -d' ' -f$col "$work/$v.ratios" | sort -n | awk -v v=$v -v col=$col '{r[NR] = $1} END {
            m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
            printf "bench_minimal_cell: %s: PyTorch load + forward / attnsweep run = %.2fx in %s (median of %d pairs; min %.2f, max %.2f; goal 2x)\n", \
                   v == "plain" ? "minimal grid" : "minimal grid, grad_exact and dist_expect off", m,
                   col == 1 ? "wall time" : "CPU time", NR, r[1], r[NR]}'
    done
done
