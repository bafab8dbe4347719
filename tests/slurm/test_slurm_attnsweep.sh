#!/usr/bin/env bash
# tests/slurm/test_slurm_attnsweep.sh -- the REAL build/attnsweep on the tiny model under a real
# (private, local) SLURM, with the job script jobs/make-sbatch.sh generates:
#   requeue  one sweep of 120 cells (~25 s) as 2 MPI tasks (srun --mpi=pmix); the batch shell
#            is warned mid-run (scancel --signal=USR1 --batch), the sweep saves and exits 3, the
#            job requeues itself and the next segment finishes. The final file must equal an
#            uninterrupted run outside SLURM (values bit for bit), with 2+ /provenance segments
#            that carry the SLURM job id and split the cells between them (each cell once).
#   array    the same kind of sweep as 3 shards of a job array (--shards 3 --merge --submit),
#            then the merge job make-sbatch wrote (afterok of the array): equal to the
#            uninterrupted run, one segment per array task (with its job id) plus the merge's;
#            then the finished file itself sharded and merged again (README): no cell computed
#            again, no value changed.
#
#   tests/slurm/test_slurm_attnsweep.sh ATTNSWEEP MODEL_DIR requeue|array
# Needs root and the Debian packages slurm-wlm munge: without them the test FAILS, never skips.
. "$(dirname "$0")/lib.sh"
BIN=$1 MODEL=$2 CASE=$3
GEN="$REPO/jobs/make-sbatch.sh"
PY=/usr/bin/python3
[ -x "$BIN" ] || fail "$BIN: not an executable"
[ -f "$MODEL/model.safetensors" ] || fail "$MODEL: no tiny model (ctest fixture model_tiny)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
work="$SCRATCH/work"
mkdir -p "$work/ref" && cd "$work" || fail "cannot make $work"

# CONFIG WINDOWS -> a sweep of WINDOWS x 2 cells on the tiny model (about 0.2 s a cell)
write_config() {
  cat > "$1" <<EOF
model = "$MODEL";
text = { path = "tokens.npy"; format = "tokens"; };
windows = { count = $2; offset = 0; stride = 128; };
grid = { L = [64, 128]; N = [1, 2, 4, 8, 16, 32, 64]; T = [0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
         eps = [1e-3, 0.1]; normalizer = ["softmax", "sparsemax"]; };
output = "sweep.h5";
runtime = { commit_every = 2; };
EOF
}
$PY -c "import numpy as np; np.save('tokens.npy', np.random.default_rng(5).integers(0, 50257, size=9000).astype('<u2'))" ||
  fail "cannot write tokens.npy"
cp tokens.npy ref/

# The reference: the same sweep straight through, outside SLURM (in the background while the
# job runs; it is compared at the end).
start_reference() {   # WINDOWS
  write_config ref/sweep.cfg "$1"
  (cd ref && "$BIN" run sweep.cfg > ref.log 2>&1; echo $? > ref.rc) &
  ref_pid=$!
}
finish_reference() {
  wait "$ref_pid"
  [ "$(cat ref/ref.rc)" = 0 ] || fail "reference run exited $(cat ref/ref.rc): $(tail -n 3 ref/ref.log)"
}

# GOT REF EXPECT_SEGMENTS_MIN JOB_ID_PATTERN MERGED(0/1): values bitwise, status, provenance
check_results() {
  $PY - "$@" <<'EOF' || fail "results check failed (above)"
import re, sys
import h5py, numpy as np
got, ref, seg_min, job_re, merged = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
bad = []
with h5py.File(got, "r") as g, h5py.File(ref, "r") as r:
    names = {k for k, d in r.items() if isinstance(d, h5py.Dataset)} - {"wall_time", "rank", "attempts"}
    gn = {k for k, d in g.items() if isinstance(d, h5py.Dataset)} - {"wall_time", "rank", "attempts"}
    if names != gn:
        bad.append(f"variables differ: {sorted(names ^ gn)}")
    for k in sorted(names & gn):
        a, b = g[k][()], r[k][()]
        same = a.shape == b.shape and (a.tobytes() == b.tobytes() if a.dtype.kind == "f" else np.array_equal(a, b))
        if not same:
            bad.append(f"variable {k} differs from the uninterrupted run")
    total = g["status"].size
    if not np.all(g["status"][()] == 1):
        bad.append(f"status not all 1: {int((g['status'][()] == 1).sum())} of {total} done")
    p = g["provenance"]
    dec = lambda v: v.decode() if isinstance(v, bytes) else v
    jobs = [dec(j) for j in p["slurm_job_id"][()]]
    hosts = [dec(h) for h in p["hosts"][()]]
    cells = [int(c) for c in p["cells_done"][()]]
    segs = [s for s, h in zip(range(len(jobs)), hosts) if not h.startswith("merge:")]
    print(f"  {got}: {total} cells, segments (job, hosts, cells): "
          + ", ".join(f"({jobs[i]}, {hosts[i]}, {cells[i]})" for i in range(len(jobs))))
    if len(segs) < seg_min:
        bad.append(f"{len(segs)} computing segments, expected {seg_min}+")
    for i in segs:
        if not re.fullmatch(job_re, jobs[i]):
            bad.append(f"segment {i}: slurm_job_id '{jobs[i]}' does not match {job_re}")
        if cells[i] < 1:
            bad.append(f"segment {i} committed no cell")
    if sum(cells[i] for i in segs) != total:
        bad.append(f"segments committed {sum(cells[i] for i in segs)} cells for {total} (a cell twice or lost)")
    if merged and not (hosts[-1].startswith("merge:") and len(hosts) == len(segs) + 1):
        bad.append("no merge segment at the end")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
}

case "$CASE" in
requeue)
  slurm_up
  write_config sweep.cfg 60
  "$GEN" sweep.cfg --nodes 1 --ntasks-per-node 2 --time 10 --warn 60 --bin "$BIN" --logdir logs \
    -o sweep.sbatch 2> gen.err || fail "make-sbatch.sh failed: $(cat gen.err)"
  job=$(timeout 20 sbatch --parsable sweep.sbatch) || fail "sbatch sweep.sbatch failed"
  note "submitted job $job (120 cells, 2 MPI tasks)"
  start_reference 60
  # warn once a fifth of the cells are done (the status file is rewritten after every batch)
  done_cells() { $PY -c "import json; print(json.load(open('sweep.h5.status'))['done'])" 2>/dev/null || echo 0; }
  fifth_done() { [ "$(done_cells)" -ge 24 ]; }
  wait_until 90 "24 cells of the sweep" fifth_done
  timeout 10 scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job failed"
  note "sent USR1 to the batch shell after $(done_cells) cells"
  final=$(drive_job "$job" 150)
  note "final: $final"
  log=$(ls logs/*"$job"*.out 2>/dev/null | head -n 1)
  [ -n "$log" ] || fail "no job log for $job in logs/"
  [ "$final" = "$job COMPLETED 0:0" ] || fail "job ended '$final', expected COMPLETED 0:0"
  grep -q 'got SIGUSR1' "$log" || fail "the warning was not logged by the batch shell"
  grep -q 'end: exit 3 .*requeueing' "$log" || fail "the sweep did not exit 3 and requeue after the warning"
  [ "$(grep -c 'segment [0-9]*: start' "$log")" -ge 2 ] || fail "fewer than 2 segments in $log"
  tail -n 1 "$log" | grep -q 'sweep complete' || fail "the log does not end with 'sweep complete'"
  grep -q 'interrupted; run the same command again to resume' "$log" ||
    fail "attnsweep did not report an orderly interruption"
  finish_reference
  check_results sweep.h5 ref/sweep.h5 2 "$job" 0
  note "requeue: $(grep -c 'segment [0-9]*: start' "$log") segments, equal to the uninterrupted run"
  echo "PASS test_slurm_attnsweep requeue"
  ;;
array)
  slurm_up
  write_config sweep.cfg 30
  # --merge --submit: the array, then the merge job make-sbatch writes, submitted afterok of
  # the array; the merge is the job's, never done by hand here
  "$GEN" sweep.cfg --nodes 1 --ntasks-per-node 1 --time 10 --warn 60 --shards 3 --merge --submit \
    --bin "$BIN" --logdir logs -o sweep.sbatch > gen.out 2> gen.err || fail "make-sbatch.sh failed: $(cat gen.err)"
  grep -qx '#SBATCH --array=0-2' sweep.sbatch || fail "no '#SBATCH --array=0-2' in sweep.sbatch"
  [ -x sweep.merge.sbatch ] || fail "make-sbatch.sh --merge wrote no sweep.merge.sbatch"
  array=$(sed -n 1p gen.out) mjob=$(sed -n 2p gen.out)
  [ -n "$array" ] && [ -n "$mjob" ] || fail "make-sbatch.sh --submit printed no two job ids: $(cat gen.out)"
  note "submitted array $array (3 shards of 60 cells) and merge job $mjob (afterok)"
  start_reference 30
  final=$(drive_job "$array" 150)
  note "final: $(echo $final)"
  [ "$(echo "$final" | wc -l)" = 3 ] || fail "expected 3 array tasks, got: $final"
  echo "$final" | awk '$2 != "COMPLETED" || $3 != "0:0" { bad = 1 } END { exit bad }' ||
    fail "not every task COMPLETED 0:0: $final"
  for i in 0 1 2; do
    [ -f "sweep.shard-$i-of-3.h5" ] && [ -f "sweep.shard-$i-of-3.h5.journal" ] ||
      fail "shard $i wrote no sweep.shard-$i-of-3.h5 (+ journal)"
  done
  sha_before=$(sha256sum sweep.shard-*-of-3.h5*)
  mfinal=$(drive_job "$mjob" 120)
  mlog=$(ls logs/*merge-"$mjob".out 2>/dev/null | head -n 1)
  [ "$mfinal" = "$mjob COMPLETED 0:0" ] || fail "the merge job ended '$mfinal', expected COMPLETED 0:0: $(cat "$mlog" 2>/dev/null)"
  note "merge job: $(tail -n 1 "$mlog")"
  [ -f sweep.h5 ] || fail "the merge job wrote no sweep.h5"
  [ "$(sha256sum sweep.shard-*-of-3.h5*)" = "$sha_before" ] || fail "merge changed a shard file"
  finish_reference
  # every task's segment carries the id SLURM gave that task (one per array element)
  check_results sweep.h5 ref/sweep.h5 3 '[0-9]+' 1
  jobs_in_file=$($PY -c "
import h5py
f = h5py.File('sweep.h5', 'r')
print(' '.join(sorted({(j.decode() if isinstance(j, bytes) else j) for j in f['provenance/slurm_job_id'][()]} - {''})))")
  [ "$(echo "$jobs_in_file" | wc -w)" -ge 3 ] || fail "expected 3 distinct SLURM job ids in /provenance, got '$jobs_in_file'"
  note "array: 3 shards (job ids $jobs_in_file) merged, equal to the uninterrupted run"
  # The README's example: shard the finished results file itself (CONFIG = sweep.h5). Every
  # shard skips the cells the file holds, and the merge job joins them from it: no cell is
  # computed again and no value changes.
  rm -f sweep.shard-*-of-3.h5*
  values() { $PY -c "
import hashlib, h5py
f = h5py.File('sweep.h5', 'r')
print(hashlib.sha256(b''.join(f[k][()].tobytes() for k in sorted(f) if isinstance(f[k], h5py.Dataset)
                             and f[k].dtype.kind != 'O' and k not in ('wall_time', 'rank', 'attempts'))).hexdigest())"; }
  before=$(values)
  "$GEN" sweep.h5 --nodes 1 --ntasks-per-node 1 --time 10 --warn 60 --shards 3 --merge --submit \
    --bin "$BIN" --logdir logs2 -o again.sbatch > gen2.out 2> gen2.err || fail "make-sbatch.sh sweep.h5 failed: $(cat gen2.err)"
  array2=$(sed -n 1p gen2.out) mjob2=$(sed -n 2p gen2.out)
  final=$(drive_job "$array2" 150)
  echo "$final" | awk '$2 != "COMPLETED" || $3 != "0:0" { bad = 1 } END { exit bad }' ||
    fail "sharding the finished file: not every task COMPLETED 0:0: $final"
  for f in logs2/*_[0-2].out; do
    grep -q "cells of this shard are done in .*sweep.h5 already: skipped" "$f" && grep -q ", 0 this run, " "$f" ||
      fail "a shard of the finished file computed cells again: $(grep 'attnsweep run:' "$f" | tail -n 2)"
  done
  mfinal=$(drive_job "$mjob2" 120)
  [ "$mfinal" = "$mjob2 COMPLETED 0:0" ] ||
    fail "the merge job into the finished file ended '$mfinal': $(cat logs2/*merge-"$mjob2".out 2>/dev/null)"
  grep -q "joined with the cells the existing output held" logs2/*merge-"$mjob2".out ||
    fail "the merge job did not join the existing file: $(cat logs2/*merge-"$mjob2".out)"
  [ "$(values)" = "$before" ] || fail "sharding and merging the finished file changed its values"
  note "the finished file sharded again: 0 cells computed, merged into it unchanged"
  echo "PASS test_slurm_attnsweep array"
  ;;
*) fail "unknown case '$CASE' (requeue or array)" ;;
esac
