#!/usr/bin/env bash
# tests/integration/scheduler_signal.sh -- a signal in the middle of a sweep stops every
# rank within 10 s with exit code 3, and only complete cells were committed.
# usage: scheduler_signal.sh MPIEXEC TEST_BINARY NRANKS SIGNAL TARGET [test args]
#   TARGET: mpirun (the launcher, as a user or SLURM's batch script would),
#   master (rank 0 alone) or worker (rank 1 alone).
# Open MPI's mpirun answers SIGTERM/SIGINT by killing the job (SIGTERM to the
# ranks, SIGKILL 1-2 s later) and exits 1 itself whatever the ranks returned;
# so there each rank must have returned SCHED_INTERRUPTED (after committing),
# and mpirun's 1 is accepted.
set -u
mpiexec=$1 bin=$2 np=$3 sig=$4 target=$5
shift 5
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,9p' "$0" | sed 's/^# //'; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

"$mpiexec" -np "$np" --oversubscribe "$bin" --signal "$@" >"$out" 2>"$err" &
launcher=$!
# Wait until some cells are committed (a progress line with a count above 0).
for _ in $(seq 100); do
  grep -qE '^sweep: [1-9][0-9]*/' "$err" && break
  kill -0 $launcher 2>/dev/null || fail "the run ended before the signal"
  sleep 0.1
done
grep -qE '^sweep: [1-9][0-9]*/' "$err" || fail "no progress within 10 s"
case $target in
  mpirun) pid=$launcher ;;
  master) pid=$(sed -n 's/^rank 0 pid \([0-9]*\)$/\1/p' "$out") ;;
  worker) pid=$(sed -n 's/^rank 1 pid \([0-9]*\)$/\1/p' "$out") ;;
  *) echo "unknown target $target"; exit 2 ;;
esac
[ -n "$pid" ] || fail "no pid for $target"
t0=$(date +%s.%N)
kill -s "$sig" "$pid"
# The run must end within 10 s of the signal.
for _ in $(seq 120); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
if kill -0 $launcher 2>/dev/null; then kill -KILL $launcher; fail "still running 12 s after SIG$sig"; fi
wait $launcher
rc=$?
secs=$(echo "$(date +%s.%N) - $t0" | bc)
echo "SIG$sig to $target with $np ranks: launcher exit $rc after ${secs} s"
grep -E '^(master|rank [0-9]+ (result|exit))' "$out"
echo "$secs < 10" | bc | grep -q 1 || fail "took ${secs} s"
killed_by_launcher=0
if [ "$target" = mpirun ] && { [ "$sig" = TERM ] || [ "$sig" = INT ]; }; then killed_by_launcher=1; fi
for r in $(seq 0 $((np - 1))); do
  grep -q "^rank $r result interrupted$" "$out" || fail "rank $r did not return SCHED_INTERRUPTED"
  # The "exit" line is printed just before MPI_Finalize. After SIGTERM/SIGINT
  # mpirun tears the job down and SIGKILLs ranks (they had committed and
  # returned), sometimes before that line.
  [ $killed_by_launcher = 1 ] || grep -q "^rank $r exit 3$" "$out" || fail "rank $r did not exit 3"
done
grep -q "bad blocks 0," "$out" || fail "committed blocks not verified"
grep -q "^sweep interrupted:" "$err" || fail "no final summary line"
if [ $killed_by_launcher = 1 ]; then
  [ $rc = 3 ] || [ $rc = 1 ] || fail "mpirun exit $rc (want 3, or Open MPI's 1 after SIG$sig)"
else
  [ $rc = 3 ] || fail "launcher exit $rc, want 3"
fi
echo PASS
