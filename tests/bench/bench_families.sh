#!/bin/sh
# bench_families.sh -- every model family's forward GFLOP/s in one run: attnsweep's forward
# pass (build/bench_families: the whole model, every layer captured, the last position's
# logits), OpenBLAS sgemm at that family's projection shapes measured in the same process
# right after each forward (the roofline), and the independent PyTorch reference forward of
# the same weights (tests/bench/bench_families.py: float32, no grad), all at one L and one
# thread count. Prints the machine, then one Markdown table: family, shape,
# GFLOP/s, % of the sgemm roofline, PyTorch GFLOP/s, attnsweep / PyTorch (medians of R),
# and each side's CPU share: CPU seconds / (threads x wall seconds), 1.00 when the run had
# its cores to itself (the way to tell the most idle of several runs).
#
# usage: tests/bench/bench_families.sh [--build DIR] [--work DIR] [--length L] [--threads T]
#                                      [--repeat R] [--tiny]
#   --build DIR   the build holding attnsweep and bench_families (default build)
#   --work DIR    the model directories, made once (default /tmp/bench_families; the four
#                 synthetic models take 3.8 GB)
#   --length L    tokens per forward (default 1024)
#   --threads T   OpenBLAS and torch threads, the same for every side (default 1, the
#                 sweep's runtime.blas_threads)
#   --repeat R    timed forwards per side after a warm-up (default 5); medians are shown
#   --tiny        the tests' tiny shapes (presets tiny, pythia-tiny, llama-tiny and a
#                 2-layer qwen2 from tests/reference/families_io.py) instead of the realistic
#                 ones (gpt2, pythia-160m, smollm-135m, qwen2-0.5b): a smoke run
# The FLOP count (docs/performance.md, "Forward pass per family") is computed twice, by the
# C side (fwd_flops) and from the weight shapes in Python; the run stops if they differ.
# The machine may be shared: the load average is printed before and after each model.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$here/build
work=/tmp/bench_families
length=1024
threads=1
repeat=5
tiny=0
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --length) length=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --tiny) tiny=1; shift ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_families.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
py=/usr/bin/python3
. "$here/tests/bench/blas_env.sh"
bench_blas_env "$build/attnsweep"
for b in attnsweep bench_families; do
    [ -x "$build/$b" ] || { echo "bench_families.sh: $build/$b is missing: build first (give --build DIR)" >&2; exit 2; }
done
if [ $tiny = 1 ]; then presets="tiny pythia-tiny llama-tiny qwen2-tiny"; else
    presets="gpt2 pythia-160m smollm-135m qwen2-0.5b"; fi
mkdir -p "$work"

# The models: attnsweep synth's presets; the tiny qwen2 (synth has none) from the
# references' own writer.
for p in $presets; do
    dir=$work/$p
    [ -f "$dir/config.json" ] && continue
    echo "writing $dir" >&2
    if [ $p = qwen2-tiny ]; then
        "$py" "$here/tests/reference/families_io.py" make-model --family qwen2 --out "$dir" \
            --layers 2 --heads 4 --kv-heads 2 --hidden 64 --inner 96 --tokens 8 >/dev/null
    else
        "$build/attnsweep" synth --preset "$p" --seed 1 --vocab none --out "$dir" --force >/dev/null
    fi
done

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(uname -n), $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)," \
     "$(free -g | awk '/^Mem:/ {print $2}') GiB; $(date -u '+%Y-%m-%d %H:%M UTC'); commit" \
     "$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "OpenBLAS $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?')," \
     "torch $("$py" -c 'import torch; print(torch.__version__)')," \
     "L = $length, $threads thread(s), median of $repeat after a warm-up"
rows=$work/rows.$$
: >"$rows"
trap 'rm -f "$rows"' EXIT
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
for p in $presets; do
    before=$(load)
    c_line=$("$build/bench_families" --model "$work/$p" --length "$length" --threads "$threads" --repeat "$repeat")
    t_line=$("$py" "$here/tests/bench/bench_families.py" time --model "$work/$p" --length "$length" \
             --threads "$threads" --repeat "$repeat")
    echo "raw $p: $c_line $t_line load $before -> $(load)"
    echo "preset $p $c_line $t_line" >>"$rows"
done

# One row per model: the fields by key. The FLOPs of both sides must agree.
awk '
function f(k,   i) { for (i = 1; i < NF; i++) if ($i == k) return $(i + 1); return "" }
BEGIN { bad = 0
        print "| family | preset | shape (layers, heads/kv x D, C, I, V) | attnsweep s | attnsweep GFLOP/s | sgemm roofline GFLOP/s | % of roofline | PyTorch s | PyTorch GFLOP/s | attnsweep / PyTorch | CPU share |"
        print "|---|---|---|---|---|---|---|---|---|---|---|" }
{
    n = 0; for (i = 1; i < NF; i++) if ($i == "flops") c[++n] = $(i + 1)
    n_fam = 0; for (i = 1; i < NF; i++) if ($i == "family") fam[++n_fam] = $(i + 1)
    if (n_fam != 2 || fam[1] != fam[2]) {
        printf "bench_families.sh: %s: the sides read different families: %s, %s\n", f("preset"), fam[1], fam[2] > "/dev/stderr"
        bad = 1; next
    }
    if (n != 2 || c[1] <= 0 || (c[1] - c[2]) / c[1] > 1e-6 || (c[2] - c[1]) / c[1] > 1e-6) {
        printf "bench_families.sh: %s: FLOP counts differ: C %s, Python %s\n", f("preset"), c[1], c[2] > "/dev/stderr"
        bad = 1; next
    }
    flops = c[1]; s = f("fwd_med"); ts = f("torch_med"); roof = f("roof_gflops")
    g = flops / s / 1e9; tg = flops / ts / 1e9; T = f("threads")
    printf "| %s | %s | %s, %s/%s x %s, %s, %s, %s | %.4g | %.1f | %.1f | %.0f %% | %.4g | %.1f | %.2fx | %.2f / %.2f |\n",
           f("family"), f("preset"), f("layers"), f("H"), f("KV"), f("D"), f("C"), f("I"), f("V"),
           s, g, roof, 100 * g / roof, ts, tg, ts / s, f("fwd_cpu_med") / (T * s), f("torch_cpu_med") / (T * ts)
}
END { exit bad }' "$rows"
