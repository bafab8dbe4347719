#!/bin/sh
# bench_long_context.sh -- the cost of one window at long contexts, with every query row and
# with metrics.query_rows = "sample:K" (docs/metrics.md section 9.1), against plan's estimate
# of its time and of a worker's memory: the table of docs/performance.md "Long contexts".
#
# usage: tests/bench/bench_long_context.sh [--bin BUILD/attnsweep] [--L "1024 2048 4096"]
#                                          [--rows "all sample:64 sample:256"]
#                                          [--layers '[0, 1]'] [--heads '[0, 1, 2, 3]']
#                                          [--work DIR]
# The model: GPT-2 small's shapes (synth --preset gpt2, 12 x 12 x 768, random weights) with
# its position table extended to 4096 rows (n_positions = 4096; the added rows random
# N(0, 0.02), the attn.bias buffers dropped: the loader skips them), made once in WORK.
# One window per run, one rank, one BLAS thread; the grid measures --layers x --heads
# (default 2 x 4 = 8 heads: the forward pass then runs 2 of the 12 blocks) over
# N = 1, 2, 4, ..., 128, T = 0.1, 1, 8, eps 1e-3, softmax. Per run: wall and CPU seconds
# of the forward pass and of the metrics (ATTNSWEEP_TIMINGS), the process's peak RSS
# (/usr/bin/time -f %M), and plan's forward, metrics and worker-memory estimates.
# The machine may be shared: the CPU columns are what to compare.
set -eu

here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$here/build/attnsweep
Ls="1024 2048 4096"
rowsets="all sample:64 sample:256"
layers='[0, 1]'
heads='[0, 1, 2, 3]'
work=/tmp/bench_long_context
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        --L) Ls=$2; shift 2 ;;
        --rows) rowsets=$2; shift 2 ;;
        --layers) layers=$2; shift 2 ;;
        --heads) heads=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        *) echo "bench_long_context: unknown argument $1" >&2; exit 2 ;;
    esac
done
PY=/usr/bin/python3
mkdir -p "$work"
model=$work/gpt2-4k
if [ ! -f "$model/model.safetensors" ]; then
    "$bin" synth --preset gpt2 --seed 1 --vocab none --out "$work/gpt2" --force >/dev/null
    # the same weights with a 4096-row position table (safetensors: u64 header length, JSON
    # header, then the tensors' bytes at the header's offsets)
    $PY - "$work/gpt2" "$model" <<'EOF'
import json, os, struct, sys
import numpy as np
src, dst = sys.argv[1:3]
raw = open(f"{src}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
base = 8 + n
tensors = {}
for name, t in head.items():
    if name == "__metadata__" or name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
        continue
    a, b = t["data_offsets"]
    tensors[name] = np.frombuffer(raw[base + a:base + b], dtype="<f4").reshape(t["shape"])
wpe = [k for k in tensors if k.endswith("wpe.weight")][0]
old = tensors[wpe]
extra = np.random.default_rng(7).normal(0, 0.02, size=(4096 - old.shape[0], old.shape[1])).astype("<f4")
tensors[wpe] = np.concatenate([old, extra])
hdr, at = {}, 0
for name, x in tensors.items():
    hdr[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [at, at + x.nbytes]}
    at += x.nbytes
hb = json.dumps(hdr).encode()
hb += b" " * (-len(hb) % 8)
os.makedirs(dst, exist_ok=True)
with open(f"{dst}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    for x in tensors.values():
        f.write(x.tobytes())
cfg = json.load(open(f"{src}/config.json"))
cfg["n_positions"] = cfg["n_ctx"] = 4096
cfg["training_note"] = "attnsweep synth --preset gpt2 --seed 1 with wpe extended to 4096 rows (tests/bench/bench_long_context.sh): random weights"
json.dump(cfg, open(f"{dst}/config.json", "w"), indent=1)
EOF
fi
[ -f "$work/tokens.npy" ] || $PY -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(3).integers(0, 50257, size=5000).astype('<u2'))" "$work/tokens.npy"

printf '%6s %-11s %9s %9s %9s %9s %9s %9s %8s %8s\n' L rows fwd_cpu met_cpu fwd_plan met_plan met/all plan/all rss_MB plan_MB
for L in $Ls; do
    met_all=""
    plan_all=""
    for rows in $rowsets; do
        tag=L$L-$(echo "$rows" | tr ':' '_')
        cfg=$work/$tag.cfg
        cat >"$cfg" <<EOF
model = "$model";
text = { path = "$work/tokens.npy"; format = "tokens"; };
windows = { count = 1; offset = 0; stride = $L; };
grid = { L = [$L]; N = [1, 2, 4, 8, 16, 32, 64, 128]; T = [0.1, 1.0, 8.0]; eps = [1e-3];
         normalizer = ["softmax"]; layers = $layers; heads = $heads; };
metrics = { query_rows = "$rows"; };
output = "$work/$tag.h5";
runtime = { blas_threads = 1; };
EOF
        rm -f "$work/$tag.h5" "$work/$tag.h5".*
        "$bin" plan "$cfg" --porcelain >"$work/$tag.plan"
        OPENBLAS_NUM_THREADS=1 ATTNSWEEP_TIMINGS=1 /usr/bin/time -f 'peak_rss_kb %M' \
            "$bin" run "$cfg" >"$work/$tag.log" 2>&1
        # "cpu 12.3 s [forward 2.1, metrics 10.0]" of rank 0's timings line
        line=$(grep '^timings: rank 0:' "$work/$tag.log")
        fwd=$(echo "$line" | sed -n 's/.*cpu [0-9.]* s \[forward \([0-9.]*\), metrics \([0-9.]*\)\].*/\1/p')
        met=$(echo "$line" | sed -n 's/.*cpu [0-9.]* s \[forward \([0-9.]*\), metrics \([0-9.]*\)\].*/\2/p')
        rss=$(sed -n 's/^peak_rss_kb //p' "$work/$tag.log")
        pf=$(sed -n 's/^model.0.forward_seconds=//p' "$work/$tag.plan")
        pm=$(sed -n 's/^model.0.metrics_seconds=//p' "$work/$tag.plan")
        pw=$(sed -n 's/^memory.worker=//p' "$work/$tag.plan")
        pwt=$(sed -n 's/^memory.weights=//p' "$work/$tag.plan")
        [ -n "$met_all" ] || met_all=$met plan_all=$pm
        $PY -c "
import sys
L, rows, fwd, met, pf, pm, ma, pa, rss, pw, pwt = sys.argv[1:]
print('%6s %-11s %9.2f %9.2f %9.2f %9.2f %9.3f %9.3f %8.0f %8.0f' % (L, rows, float(fwd), float(met),
      float(pf), float(pm), float(met) / float(ma), float(pm) / float(pa), int(rss) / 1024,
      (int(pw) + int(pwt)) / 2**20))" "$L" "$rows" "$fwd" "$met" "$pf" "$pm" "$met_all" "$plan_all" "$rss" "$pw" "$pwt"
    done
done
echo "bench_long_context: fwd/met_cpu = measured CPU seconds of the forward pass / the metrics of"
echo "  the window; *_plan = plan's estimates; met/all, plan/all = metrics time over the same L's"
echo "  first row set's (all rows); rss_MB = peak RSS of the run; plan_MB = plan's weights + worker"
