#!/usr/bin/env bash
# tests/slurm/test_slurm_mpi.sh HELLO_MPI -- jobs/attnsweep.sbatch launches a real 2-rank MPI program
# inside a (private, local) SLURM allocation, with `srun --mpi=pmix` (the default) and with
# `--launcher mpirun`; and the warning signal reaches a program started by mpirun (Open MPI
# forwards SIGUSR1), so the requeue chain works with that launcher too.
# HELLO_MPI is tests/slurm/hello_mpi.c built (target slurm_hello_mpi).
. "$(dirname "$0")/lib.sh"
hello=${1:-}
[ -n "$hello" ] && [ -x "$hello" ] || fail "usage: $0 HELLO_MPI (the built tests/slurm/hello_mpi.c; got '${hello}')"
SBATCH_SCRIPT="$REPO/jobs/attnsweep.sbatch"
FAKE="$SLURM_TESTS/fake_sweep.sh"
work="$SCRATCH/work"
mkdir -p "$work" && cd "$work" || fail "cannot make $work"
slurm_up
echo 'units=1' > dummy.cfg
# Open MPI refuses root unless told; the cluster runs jobs as the submitting user (root here).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

check_hello() {   # LAUNCHER JOB FINAL
  local log="hello-$1-$2.out"
  [ "$3" = "$2 COMPLETED 0:0" ] || fail "$1: hello job ended '$3', expected COMPLETED 0:0"
  grep -q "start .*: $1 " "$log" || fail "$1: the log does not show the $1 command line"
  grep -qx 'hello rank 0 of 2 on .*' "$log" || fail "$1: rank 0 of 2 missing"
  grep -qx 'hello rank 1 of 2 on .*' "$log" || fail "$1: rank 1 of 2 missing"
  grep -qx 'allreduce ok 2' "$log" || fail "$1: the 2-rank allreduce did not succeed"
  note "$1: 2 ranks wired up, allreduce ok"
}
job=$(timeout 20 sbatch --parsable --ntasks=2 --time=5 --signal=B:USR1@10 --output=hello-srun-%j.out \
      "$SBATCH_SCRIPT" --bin "$hello" dummy.cfg) || fail "sbatch (srun) failed"
check_hello srun "$job" "$(drive_job "$job" 60)"
grep -q 'srun --mpi=pmix' "hello-srun-$job.out" || fail "srun: not launched with --mpi=pmix"

job=$(timeout 20 sbatch --parsable --ntasks=2 --time=5 --signal=B:USR1@10 --output=hello-mpirun-%j.out \
      "$SBATCH_SCRIPT" --launcher mpirun --bin "$hello" dummy.cfg) || fail "sbatch (mpirun) failed"
check_hello mpirun "$job" "$(drive_job "$job" 60)"

# the warning through mpirun: forced mid-run, then requeue and resume to completion
printf 'units=6\nseconds=1\n' > M.cfg
job=$(timeout 20 sbatch --parsable --ntasks=1 --time=5 --signal=B:USR1@10 --output=M-%j.out \
      "$SBATCH_SCRIPT" --launcher mpirun --bin "$FAKE" M.cfg) || fail "sbatch (mpirun fake) failed"
two_done() { [ -f M.cfg.d/done-0-of-1.txt ] && [ "$(wc -l < M.cfg.d/done-0-of-1.txt)" -ge 2 ]; }
wait_until 60 "2 units under mpirun" two_done
timeout 10 scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job failed"
final=$(drive_job "$job" 60)
[ "$final" = "$job COMPLETED 0:0" ] || fail "mpirun fake: job ended '$final'"
grep -q 'end: exit 3 .*requeueing' "M-$job.out" || fail "mpirun fake: SIGUSR1 did not reach the program through mpirun"
[ "$(awk '{print $2}' M.cfg.d/done-0-of-1.txt | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 " ] ||
  fail "mpirun fake: units not done exactly once: $(awk '{print $2}' M.cfg.d/done-0-of-1.txt | tr '\n' ' ')"
note "mpirun: warning forwarded, requeued, resumed, 6 units exactly once"
echo "PASS test_slurm_mpi"
