#!/bin/sh
# plan_cli.sh -- `attnsweep plan` against an existing output, and `plan --porcelain`.
# usage: plan_cli.sh ATTNSWEEP MODEL_DIR SCRATCH
# A 4-window sweep of the tiny model (~1 s) is run, then plan must say:
#   - what is left of it; for an extension (added L values), the cost of the new cells
#     only: exactly the plan of a sweep of the new L values alone;
#   - for a config `run` refuses (another grid.T), no "windows left" at all: a progress
#     line saying run refuses it, one warning line, and `--check` fails naming the key;
#   - with --porcelain, only key=value lines, the same numbers as the human output;
#   - a node that cannot fit its memory limit (--mem, SLURM_MEM_PER_NODE) is refused by
#     plan --check and by run, in one line, before run writes anything; by default the
#     limit is MemTotal;
#   - metrics.query_rows = "sample:K" costs less metrics time and more output.
set -u
BIN=$1 MODEL=$2 SCRATCH=$3
PY=/usr/bin/python3
fail=0
check() { if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH" && cd "$SCRATCH" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
$PY -c "import numpy as np; np.save('tokens.npy', np.random.default_rng(5).integers(0, 50257, size=3000).astype('<u2'))" || exit 1
cat > s.cfg <<EOF2
model = "$MODEL";
text = { path = "tokens.npy"; format = "tokens"; };
windows = { count = 4; offset = 0; stride = 128; };
grid = { L = [64, 128]; N = [1, 2, 4, 8]; T = [0.1, 1.0]; eps = [1e-3]; normalizer = ["softmax"]; };
output = "s.h5";
EOF2
key() { sed -n "s/^$1=//p" "$2"; }   # key KEY FILE

# porcelain before the run: key=value lines only, the human output's numbers
"$BIN" plan s.cfg --porcelain >p.out 2>p.err; check "--porcelain exits 0 ($(cat p.err))" $?
"$BIN" plan s.cfg >h.out 2>&1
test "$(grep -cv '^[A-Za-z_.0-9]*=' p.out)" -eq 0; check "--porcelain: nothing but key=value lines" $?
test "$(key windows p.out)" = 4 && test "$(key cells p.out)" = 8 && test "$(key progress p.out)" = new
check "--porcelain: windows=4 cells=8 progress=new" $?
test "$(key output p.out)" = "$(sed -n 's/^output    //p' h.out | head -1)"; check "--porcelain: output= is the human output line" $?

"$BIN" run s.cfg >run.log 2>&1; check "the sweep runs ($(tail -1 run.log))" $?
"$BIN" plan s.cfg >h.out 2>&1
grep -q "^progress  0 of 4 windows left (4 done in " h.out; check "done: 0 of 4 windows left" $?
"$BIN" plan s.cfg --porcelain --check >p.out 2>&1
test "$(key progress p.out)" = resumes && test "$(key windows_left p.out)" = 0 && test "$(tail -1 p.out)" = check=passed
check "--porcelain --check: progress=resumes windows_left=0, check=passed last" $?

# an extension by L = 32 costs its 4 new cells: the plan of a sweep of L = [32] alone
"$BIN" plan s.cfg --set 'grid.L=[32,64,128]' --porcelain >p.out 2>&1
"$BIN" plan s.cfg --set 'grid.L=[32]' --set 'output="alone.h5"' --porcelain >alone.out 2>&1
test "$(key cells_left p.out)" = 4; check "extension: 4 cells left" $?
$PY -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (abs(a - b) <= 1e-5 * b))" \
    "$(key rank_seconds_to_go p.out)" "$(key rank_seconds alone.out)"
check "extension: to go $(key rank_seconds_to_go p.out) s = the new cells alone $(key rank_seconds alone.out) s (not all $(key rank_seconds p.out) s)" $?
"$BIN" plan s.cfg --set 'grid.L=[32,64,128]' | grep -q "^progress  4 of 4 windows left .* (4 cells left)$"
check "extension: the human line says 4 cells left" $?

# a config run refuses: no windows left claimed, a warning, --check fails naming the key
"$BIN" plan s.cfg --set 'grid.T=[0.2]' >h.out 2>h.err; rc=$?
test $rc -eq 0 && ! grep -q "windows left" h.out && grep -q "^progress  none: .*s.h5 holds another config's cells" h.out
check "refused config: no 'windows left', progress says run refuses it" $?
test "$(wc -l <h.err)" -eq 1 && grep -q "warning: .*s.h5 was made with another config (grid.T" h.err
check "refused config: one warning line naming grid.T ($(cat h.err))" $?
"$BIN" plan s.cfg --set 'grid.T=[0.2]' --porcelain >p.out 2>&1
test "$(key progress p.out)" = refused && ! grep -q '^windows_left=' p.out; check "refused config: progress=refused" $?
"$BIN" plan s.cfg --set 'grid.T=[0.2]' --check >h.out 2>h.err; rc=$?
test $rc -eq 1 && grep -q "grid.T" h.err; check "refused config: --check exits 1 naming grid.T" $?

# memory: the tiny model's node needs ~25 MiB at L = 128; a 20 MiB limit is refused
"$BIN" plan s.cfg --check --mem 20M >h.out 2>h.err; rc=$?
test $rc -eq 1 && test "$(wc -l <h.err)" -eq 1 && grep -q "1 rank on a node needs .* at L = 128 .* of --mem" h.err
check "memory: plan --check --mem 20M refuses in one line ($(cat h.err))" $?
SLURM_MEM_PER_NODE=20 "$BIN" plan s.cfg --check >h.out 2>h.err; rc=$?
test $rc -eq 1 && grep -q "of SLURM_MEM_PER_NODE" h.err; check "memory: SLURM_MEM_PER_NODE=20 (MB) is the limit" $?
"$BIN" plan s.cfg --check --mem 1G >h.out 2>h.err; rc=$?
test $rc -eq 0 && grep -q "^check     memory: 1 rank on a node fit the limit (--mem)" h.out
check "memory: --mem 1G passes --check" $?
"$BIN" plan s.cfg --porcelain --mem 20M >p.out 2>&1
test "$(key memory.limit p.out)" = 20971520 && test "$(key memory.activations p.out)" -gt 0
check "memory: --porcelain memory.limit=20971520, memory.activations" $?
"$BIN" run s.cfg --mem 20M --set 'output="mem.h5"' >run.log 2>&1; rc=$?
test $rc -eq 1 && ! ls mem.h5* >/dev/null 2>&1 && test "$(wc -l <run.log)" -eq 1 && grep -q "of --mem" run.log
check "memory: run --mem 20M refuses before writing anything ($(cat run.log))" $?
"$BIN" plan s.cfg --mem 20x >h.out 2>h.err; test $? -eq 2; check "memory: --mem 20x is bad usage" $?
# without --mem or SLURM the limit is the machine's MemTotal, not MemAvailable (it moves with
# the other processes: a loaded machine must not refuse a run that fits by chance)
env -u SLURM_MEM_PER_NODE "$BIN" plan s.cfg --check >h.out 2>h.err; rc=$?
test $rc -eq 0 && grep -q "^check     memory: 1 rank on a node fit the limit (MemTotal)" h.out
check "memory: the default limit is MemTotal ($(grep 'limit' h.out | head -1))" $?

# sampling: the metrics cost less (the per-row work of 8 of the L - 1 rows), the output more
"$BIN" plan s.cfg --set 'output="all.h5"' --porcelain >p.out 2>&1
"$BIN" plan s.cfg --set 'output="k8.h5"' --set 'metrics.query_rows="sample:8"' --porcelain >k.out 2>&1
$PY -c "import sys; a, b, oa, ob = map(float, sys.argv[1:]); sys.exit(not (b < 0.5 * a and ob > oa))" \
    "$(key model.0.metrics_seconds p.out)" "$(key model.0.metrics_seconds k.out)" \
    "$(key output_bytes p.out)" "$(key output_bytes k.out)"
check "sampling: metrics $(key model.0.metrics_seconds k.out) s < half of $(key model.0.metrics_seconds p.out) s; output $(key output_bytes k.out) > $(key output_bytes p.out)" $?
"$BIN" plan s.cfg --set 'metrics.query_rows="sample:0"' >h.out 2>h.err; rc=$?
test $rc -eq 1 && grep -q 'metrics.query_rows.*"sample:0"' h.err && test "$(wc -l <h.err)" -eq 1
check "sampling: sample:0 refused in one line ($(cat h.err))" $?
exit $fail
