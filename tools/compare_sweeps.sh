#!/bin/bash
# compare_sweeps.sh -- a fixed set of sweeps run with one build, compared value by value with
# the same set run with another (a refactoring must leave every result bit-identical).
#
#   tools/compare_sweeps.sh BUILD OUT [REF]
#
# BUILD is a build directory (its attnsweep runs the sweeps), OUT receives one results file
# per sweep; with REF (an OUT of an earlier call) each file is compared with REF's of the
# same name by tests/lib/sweeptest.py: every variable but the per-run bookkeeping (wall_time,
# rank, attempts) and the model's path, bit for bit; provenance (timestamps, paths, hosts) is not compared.
# The sweeps: the quick-start grid on a synthetic tiny model (1 rank, then 2 ranks into a
# compressed file, then shard 0 of 2, then two windows resumed with a third), the trained model wp-gpt2-4x3 (aggregate distance), a
# model axis of two of its checkpoints (per_token distance, 3 ranks). The trained sweeps need
# SHARED (default /work/shared) and are left out, with one line, when it lacks them.
# Exit: 0 all equal (or no REF), 1 a difference or a failed run.
set -u
BUILD=$(cd "$1" && pwd) OUT=$2 REF=${3:-}
SHARED=${ATTNSWEEP_SHARED:-/work/shared}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
unset SLURM_JOB_ID
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.h5 "$OUT"/*.journal "$OUT"/*.status "$OUT"/*.lock
status=0

run() { # NAME RANKS CONFIG [run args...]
    local name=$1 ranks=$2 cfg=$3; shift 3
    local cmd=("$BUILD/attnsweep" run "$cfg" --new "$@")
    [ "$ranks" -gt 1 ] && cmd=(mpirun -np "$ranks" --oversubscribe "${cmd[@]}")
    if ! (cd "$OUT" && "${cmd[@]}" >"$OUT/$name.log" 2>&1); then
        echo "compare_sweeps: $name: the run failed (see $OUT/$name.log)"; status=1
    fi
}

grid='L = [16, 32, 64]; N = [1, 2, 4, 5, 8, 16]; T = { min = 1e-3; max = 1e2; count = 5; spacing = "log"; include = [8.0]; }; eps = [1e-3, 1e-1, 10.0];'
"$BUILD/attnsweep" synth --preset tiny --out "$OUT/tiny" --vocab bytelevel --force >/dev/null || status=1
$PY -c "import numpy as np; np.save('$OUT/tokens.npy', (np.arange(2048) * 7919 % 50257).astype(np.int32))"
cat >"$OUT/quick.cfg" <<CFG
model = "tiny";
text = { path = "tokens.npy"; format = "tokens"; };
windows = { count = 3; offset = 0; stride = 64; };
grid = { $grid normalizer = ["softmax", "sparsemax"]; };
output = "quick.h5";
runtime = { commit_every = 4; compress = false; };
CFG
run quick 1 quick.cfg
run quick_2ranks_z 2 quick.cfg --set 'output="quick_2ranks_z.h5"' --set 'runtime.compress=true'
run quick_shard 1 quick.cfg --set 'output="quick_shard.h5"' --shard 0/2
# a resume that extends an output: two windows, then the third added (config_diff allows it)
run quick_ext_a 1 quick.cfg --set 'output="quick_ext.h5"' --set 'windows.count=2'
(cd "$OUT" && "$BUILD/attnsweep" run quick.cfg --set 'output="quick_ext.h5"' >"$OUT/quick_ext_b.log" 2>&1) ||
    { echo "compare_sweeps: quick_ext: the resume failed (see $OUT/quick_ext_b.log)"; status=1; }

if [ -f "$SHARED/models/wp-gpt2-4x3/model.safetensors" ] && [ -f "$SHARED/data/war-and-peace.txt" ]; then
    cat >"$OUT/trained.cfg" <<CFG
model = "$SHARED/models/wp-gpt2-4x3";
text = { path = "$SHARED/data/war-and-peace.txt"; };
windows = { count = 2; offset = 40000; stride = 64; };
grid = { $grid normalizer = ["softmax", "sparsemax"]; };
metrics = { distance = "aggregate"; };
output = "trained.h5";
CFG
    run trained 2 trained.cfg
    cat >"$OUT/models.cfg" <<CFG
model = ["$SHARED/models/wp-gpt2-4x3-step100", "$SHARED/models/wp-gpt2-4x3"];
text = { path = "$SHARED/data/war-and-peace.txt"; };
windows = { count = 2; offset = 40000; stride = 64; };
grid = { L = [16, 32]; N = [1, 2, 4]; T = [1.0, 8.0]; eps = [0.1]; normalizer = ["softmax"]; };
metrics = { distance = "per_token"; };
output = "models.h5";
CFG
    run models 3 models.cfg
else
    echo "compare_sweeps: $SHARED lacks the trained model or the text: trained and model-axis sweeps left out"
fi

if [ -n "$REF" ]; then
    for f in "$REF"/*.h5; do
        n=$(basename "$f")
        if [ ! -f "$OUT/$n" ]; then echo "compare_sweeps: $n: missing in $OUT"; status=1; continue; fi
        # model_path is where the model was (OUT differs between the two calls)
        if (cd "$HERE/tests/lib" && $PY -c 'import sys, sweeptest as t
t.BOOKKEEPING.add("model_path")
t.same_values(sys.argv[1], sys.argv[2], sys.argv[1] + " vs " + sys.argv[2])
sys.exit(t.summary("same_values"))' "$f" "$OUT/$n") >"$OUT/$n.cmp" 2>&1; then
            echo "compare_sweeps: $n: identical"
        else
            echo "compare_sweeps: $n: DIFFERS"; cat "$OUT/$n.cmp"; status=1
        fi
    done
fi
exit $status
