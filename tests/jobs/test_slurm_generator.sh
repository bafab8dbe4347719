#!/usr/bin/env bash
# tests/jobs/test_slurm_generator.sh -- jobs/make-sbatch.sh and jobs/attnsweep.sbatch without a
# cluster: argument checks, time formats, the MaxArraySize limit at its boundary, what the
# generated script contains (SBATCH lines, fixed arguments, the template body unchanged), and
# that the batch script refuses to run outside SLURM.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
GEN="$REPO/jobs/make-sbatch.sh"
TEMPLATE="$REPO/jobs/attnsweep.sbatch"
SCRATCH=$(mktemp -d /tmp/attnsweep-gentest.XXXXXX) || { echo "FAIL: mktemp" >&2; exit 1; }
trap 'rc=$?; rm -rf "$SCRATCH"; exit $rc' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$SCRATCH" || fail "cd"
for v in $(compgen -e | grep '^SLURM_' || true); do unset "$v"; done
echo 'model = "models/gpt2";' > sweep.cfg
# sweep.cfg is not a runnable config: --no-check skips `attnsweep plan --check` (the newcomer
# test checks that part on the quick start's real config)
base=(sweep.cfg --no-check --nodes 2 --ntasks-per-node 4 --time 01:00:00 --max-array-size 1001)

expect() {   # RC PATTERN CMD...
  local want=$1 pat=$2; shift 2
  "$@" > out.txt 2> err.txt; local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(cat err.txt)"
  [ -z "$pat" ] || grep -qE -- "$pat" err.txt || fail "'$*': stderr lacks /$pat/: $(cat err.txt)"
}
expect 0 "" "$GEN" --help
grep -q 'MaxArraySize' out.txt || fail "--help does not mention MaxArraySize"
expect 2 "missing CONFIG" "$GEN"
expect 2 "missing --nodes" "$GEN" sweep.cfg --no-check --ntasks-per-node 1 --time 10
expect 2 "--nodes 'x' is not a positive integer" "$GEN" sweep.cfg --no-check --nodes x --ntasks-per-node 1 --time 10
expect 1 "plan --check sweep.cfg failed" "$GEN" sweep.cfg --nodes 1 --ntasks-per-node 1 --time 10 --dry-run
# sbatch's own spellings
expect 0 "" "$GEN" sweep.cfg --no-check --nodes=2 --ntasks-per-node=4 -t 01:00:00 -p short -A proj --dry-run
for line in '--nodes=2' '--ntasks-per-node=4' '--time=01:00:00' '--partition=short' '--account=proj'; do
  grep -qxF -- "#SBATCH $line" out.txt || fail "sbatch spellings: no '#SBATCH $line'"
done
expect 0 "" "$GEN" sweep.cfg --no-check -N 2 -n 9 --time=30 --dry-run
grep -qxF -- "#SBATCH --ntasks=9" out.txt && grep -qxF -- "#SBATCH --nodes=2" out.txt || fail "-N 2 -n 9"
expect 2 "not both" "$GEN" sweep.cfg --no-check -n 9 --ntasks-per-node 3 -t 30
# --setup lines come before the sweep; --merge writes an afterok merge job
expect 0 "" "$GEN" "${base[@]}" --setup 'module load openmpi' --shards 2 --merge --dry-run
grep -q "^module load openmpi || " out.txt || fail "no --setup line: $(cat out.txt)"
grep -q "attnsweep.* merge " out.txt && grep -q -- "--ntasks=1" out.txt || fail "no merge job in the dry run"
# the merge job reads the output from plan --porcelain; with no --set options it passes no
# empty argument (plan CONFIG '' is a second CONFIG: exit 2)
grep -q "plan .*sweep.cfg --porcelain | sed -n 's/^output=//p')" out.txt || fail "the merge job does not read plan --porcelain"
grep "plan .*--porcelain" out.txt | grep -q "''" && fail "the merge job passes an empty argument to plan: $(grep 'plan ' out.txt)"
expect 0 "" "$GEN" "${base[@]}" --shards 2 --merge --dry-run -- --set 'windows.count=3'
grep -q "plan .*sweep.cfg --porcelain --set windows.count=3 |" out.txt || fail "the merge job drops the run's --set: $(grep 'plan ' out.txt)"
expect 2 "--merge needs --shards" "$GEN" "${base[@]}" --merge
expect 2 "--time '1h' is not a SLURM time" "$GEN" "${base[@]}" --time 1h
expect 2 "--warn 600 s is not shorter than the time limit 10:00 \(600 s\)" "$GEN" "${base[@]}" --time 10:00 --warn 600
expect 2 "--parallel needs --shards" "$GEN" "${base[@]}" --parallel 2
expect 2 "--parallel 5 is more than --shards 4" "$GEN" "${base[@]}" --shards 4 --parallel 5
expect 2 "unknown option '--bogus'" "$GEN" "${base[@]}" --bogus
expect 2 "--warn 70000: SLURM allows at most 65535 s" "$GEN" "${base[@]}" --time 2-00:00:00 --warn 70000
expect 1 "nope.cfg: no such config file" "$GEN" nope.cfg --nodes 1 --ntasks-per-node 1 --time 10
[ "$(wc -l < err.txt)" = 1 ] || fail "error is not one line: $(cat err.txt)"
# every SLURM time form, converted independently here: D-HH:MM:SS etc. against --warn limits
for t in "0-10:00:00 36000" "0-02 7200" "0-01:03 3780" "03:00:00 10800" "07:30 450" "45 2700"; do
  set -- $t
  expect 0 "" "$GEN" "${base[@]}" --time "$1" --warn $(( $2 - 1 )) --dry-run
  expect 2 "not shorter" "$GEN" "${base[@]}" --time "$1" --warn "$2" --dry-run
done

# MaxArraySize caps the index: 1001 allows shards 0..1000
expect 1 "does not fit: 1002 shards need array indices 0..1001 but MaxArraySize is 1001" \
  "$GEN" "${base[@]}" --shards 1002 --dry-run
expect 0 "" "$GEN" "${base[@]}" --shards 1001 --parallel 50 --dry-run
grep -qx '#SBATCH --array=0-1000%50' out.txt || fail "no --array=0-1000%50 line"

# the generated script: SBATCH lines, fixed arguments, unchanged template body, valid bash
expect 0 "" "$GEN" "${base[@]}" --warn 120 --partition short --sbatch '--exclusive' \
  --name paper -o job.sbatch --logdir joblogs -- --set 'grid.L=[64,128]'
[ -x job.sbatch ] || fail "job.sbatch not written or not executable"
[ -d joblogs ] || fail "log directory not created"
for line in '--job-name=paper' '--nodes=2' '--ntasks-per-node=4' '--time=01:00:00' '--requeue' \
            '--open-mode=append' '--signal=B:USR1@120' "--output=$SCRATCH/joblogs/paper-%j.out" \
            '--partition=short' '--exclusive'; do
  grep -qxF -- "#SBATCH $line" job.sbatch || fail "job.sbatch lacks '#SBATCH $line'"
done
grep -q '^#SBATCH --array' job.sbatch && fail "an unsharded job got an --array line"
bash -n job.sbatch || fail "job.sbatch has a syntax error"
diff <(sed -n '/^# ==== body/,$p' "$TEMPLATE" | tail -n +2) <(sed -n '/^set --/,$p' job.sbatch | tail -n +2) >&2 ||
  fail "the body of job.sbatch differs from jobs/attnsweep.sbatch"
eval "$(grep '^set --' job.sbatch)"
want=(--warn 120 --launcher srun --srun-mpi auto --bin "$REPO/build/attnsweep" "$SCRATCH/sweep.cfg" -- --set 'grid.L=[64,128]')
[ "$*" = "${want[*]}" ] || fail "fixed arguments are '$*', expected '${want[*]}'"
set --
# the dry run writes nothing
expect 0 "" "$GEN" "${base[@]}" -o dry.sbatch --logdir drylogs --dry-run
[ ! -e dry.sbatch ] && [ ! -e drylogs ] || fail "--dry-run wrote files"

# the batch script itself
bash "$TEMPLATE" --help > out.txt || fail "attnsweep.sbatch --help failed"
expect 2 "not inside a SLURM job" bash "$TEMPLATE" sweep.cfg
expect 2 "unknown option '--nope'" bash "$TEMPLATE" --nope sweep.cfg

# the stop grace the batch script passes: the warning time minus a margin
mkdir -p fakebin
# srun [--mpi=TYPE] CMD...; `srun --mpi=list` lists the plugins of $FAKE_MPI_LIST
cat > fakebin/srun <<'SH'
#!/bin/sh
case "$1" in
  --mpi=list) echo "MPI plugin types are..."; for t in ${FAKE_MPI_LIST-none pmi2 pmix}; do echo "	$t"; done; exit 0 ;;
  --mpi=*) shift ;;
esac
exec "$@"
SH
printf '#!/bin/sh\necho "sweep args: $*"\n' > fakebin/sweep
chmod +x fakebin/srun fakebin/sweep
grace_of() {   # ARGS OF THE BATCH SCRIPT -> the runtime.stop_grace it passes
  SLURM_JOB_ID=1 SLURM_SUBMIT_DIR=$SCRATCH PATH="$SCRATCH/fakebin:$PATH" \
    bash "$TEMPLATE" --bin fakebin/sweep "$@" > out.txt 2> err.txt || fail "batch script $*: $(cat err.txt out.txt)"
  sed -n 's/^sweep args: .*--set runtime\.stop_grace=\([0-9]*\).*/\1/p' out.txt
}
for case in "240 sweep.cfg" "90 --warn 120 sweep.cfg" "30 --warn 60 sweep.cfg" "5 --warn 10 sweep.cfg" \
            "480 --warn 600 sweep.cfg" "3480 --warn 3600 sweep.cfg" "17 --stop-grace 17 --warn 600 sweep.cfg"; do
  set -- $case
  want=$1; shift
  got=$(grace_of "$@")
  [ "$got" = "$want" ] || fail "batch script $*: stop grace '$got', expected $want: $(cat out.txt)"
done
grep -q 'warning 600 s, stop grace 17 s' out.txt || fail "the start line does not say the warning and the grace"
ATTNSWEEP_WARN=300 grace_of sweep.cfg -- --set runtime.stop_grace=7 > /dev/null
grep -q -- '--set runtime.stop_grace=240 --set runtime.stop_grace=7$' out.txt ||
  fail "a --set runtime.stop_grace of the user does not come last (it must win): $(cat out.txt)"
expect 2 "--warn 'x' is not a positive number" env SLURM_JOB_ID=1 bash "$TEMPLATE" --warn x sweep.cfg

# srun's --mpi: detected from `srun --mpi=list` (pmix first, then pmi2, else none), or as given
launched() {   # ENV... -- ARGS OF THE BATCH SCRIPT -> its start line's command
  env SLURM_JOB_ID=1 SLURM_SUBMIT_DIR="$SCRATCH" PATH="$SCRATCH/fakebin:$PATH" "$@" > out.txt 2> err.txt ||
    fail "batch script $*: $(cat err.txt out.txt)"
  grep -m1 ': start' out.txt
}
launched bash "$TEMPLATE" --bin fakebin/sweep sweep.cfg | grep -q 'srun --mpi=pmix fakebin/sweep' ||
  fail "auto with pmix offered: not --mpi=pmix: $(cat out.txt)"
launched FAKE_MPI_LIST="none pmi2" bash "$TEMPLATE" --bin fakebin/sweep sweep.cfg | grep -q 'srun --mpi=pmi2 fakebin/sweep' ||
  fail "auto with pmi2 only: not --mpi=pmi2: $(cat out.txt)"
launched FAKE_MPI_LIST="none" bash "$TEMPLATE" --bin fakebin/sweep sweep.cfg | grep -q 'srun fakebin/sweep' ||
  fail "auto with no PMI plugin: srun should get no --mpi: $(cat out.txt)"
launched bash "$TEMPLATE" --srun-mpi pmix_v4 --bin fakebin/sweep sweep.cfg | grep -q 'srun --mpi=pmix_v4 fakebin/sweep' ||
  fail "--srun-mpi pmix_v4 not passed to srun: $(cat out.txt)"
launched ATTNSWEEP_SRUN_MPI=none bash "$TEMPLATE" --bin fakebin/sweep sweep.cfg | grep -q 'srun fakebin/sweep' ||
  fail "ATTNSWEEP_SRUN_MPI=none still gave srun an --mpi: $(cat out.txt)"
"$GEN" "${base[@]}" --srun-mpi pmi2 --dry-run > gen.txt 2> /dev/null || fail "make-sbatch --srun-mpi pmi2"
grep -q -- '--srun-mpi pmi2' gen.txt || fail "make-sbatch does not pass --srun-mpi to the script"
expect 2 "--srun-mpi 'a b'" "$GEN" "${base[@]}" --srun-mpi 'a b' --dry-run
set --
echo "PASS test_slurm_generator"
