#!/bin/sh
# bench_peer.sh -- the metrics kernel against its PyTorch peer (tests/bench/peer_metrics.py) in
# one run: the paper's grid (28 N, 22 T, 3 eps, softmax) on layer 0 of the trained test model
# over the first L tokens of War and Peace, at L = 256 and 1024, one thread each; prints the
# C kernel's and the peer's CPU seconds per head and their ratio (docs/performance.md).
#
# usage: tests/bench/bench_peer.sh [--bin BUILD/attnsweep] [--model DIR] [--text FILE]
#                                  [--L 256,1024] [--heads H] [--mem-gb G] [--work DIR]
#   defaults: the test assets in ../shared (models/wp-gpt2-4x3, data/war-and-peace.txt)
#   relative to the repository; without them the bench says so and exits 0.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$here/build/attnsweep
model=$here/../shared/models/wp-gpt2-4x3
text=$here/../shared/data/war-and-peace.txt
Ls=256,1024
heads=3
mem=1.5
work=/tmp/bench_peer
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --text) text=$2; shift 2 ;;
        --L) Ls=$2; shift 2 ;;
        --heads) heads=$2; shift 2 ;;
        --mem-gb) mem=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_peer.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
if [ ! -f "$model/model.safetensors" ] || [ ! -f "$text" ]; then
    echo "bench_peer.sh: skipped: no model at $model or no text at $text (give --model, --text)"
    exit 0
fi
mkdir -p "$work"
. "$here/tests/bench/blas_env.sh"
bench_blas_env "$bin"
exec /usr/bin/python3 "$here/tests/bench/peer_metrics.py" bench "$bin" "$model" "$work" \
    --L "$Ls" --heads "$heads" --mem-gb "$mem" --text "$text"
