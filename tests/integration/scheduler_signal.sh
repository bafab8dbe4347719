#!/usr/bin/env bash
# tests/integration/scheduler_signal.sh -- a signal in the middle of a sweep stops every
# rank with exit code 3, and only complete cells were committed.
# usage: scheduler_signal.sh MPIEXEC TEST_BINARY NRANKS SIGNAL TARGET [--hold-keep|--hold-abandon|--hold-again] [test args]
#   TARGET: mpirun (the launcher, as a user or SLURM's batch script would),
#   master (rank 0 alone), worker (rank 1 alone) or alone (the binary started without a
#   launcher, one rank: where a terminal's Ctrl-C reaches the sweep itself; NRANKS must be 1).
#   --hold-keep / --hold-abandon: every cell waits for a file this script creates (test_scheduler
#   --hold); the signal comes once every worker has started one. keep: 6 s later (the old fixed
#   grace was 5 s) the master still waits, and after the release every started cell is
#   committed. abandon: the master gives up after its grace while the cells are still held.
#   again: the signal twice (Ctrl-C, then Ctrl-C again) inside a long grace: the second one
#   abandons the held cells at once, the first having said "press Ctrl-C again".
# No verdict depends on the machine's speed: every wait is for an event, bounded only by a
# hang limit (300 s).
# Open MPI's mpirun answers SIGTERM/SIGINT by killing the job (SIGTERM to the
# ranks, SIGKILL 1-2 s later) and exits 1 itself whatever the ranks returned;
# so there each rank must have returned SCHED_INTERRUPTED (after committing),
# and mpirun's 1 is accepted.
set -u
mpiexec=$1 bin=$2 np=$3 sig=$4 target=$5
shift 5
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,15p' "$0" | sed 's/^# //'; exit 0; fi
hold_mode=''
case "${1:-}" in
  --hold-keep) hold_mode=keep; shift ;; --hold-abandon) hold_mode=abandon; shift ;;
  --hold-again) hold_mode=again; shift ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
HANG=300
out=$(mktemp) err=$(mktemp) hold=$(mktemp -u)
trap 'rm -f "$out" "$err" "$hold"' EXIT
fail() { touch "$hold"; echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }
# wait_for WHAT CMD...: until CMD succeeds; FAIL if the run ends first or after HANG s (a hang)
wait_for() {
  local what=$1; shift
  local end=$(( $(date +%s) + HANG ))
  until "$@"; do
    kill -0 $launcher 2>/dev/null || fail "the run ended before: $what"
    [ "$(date +%s)" -lt "$end" ] || fail "no $what within $HANG s"
    sleep 0.05
  done
}
workers=$((np > 1 ? np - 1 : 1))
started() { [ "$(grep -c '^rank [0-9]* started cell' "$out")" -ge "$workers" ]; }

extra=()
[ -z "$hold_mode" ] || extra=(--hold "$hold")
if [ "$target" = alone ]; then
  "$bin" --signal "${extra[@]}" "$@" >"$out" 2>"$err" &
else
  "$mpiexec" -np "$np" --oversubscribe "$bin" --signal "${extra[@]}" "$@" >"$out" 2>"$err" &
fi
launcher=$!
if [ -n "$hold_mode" ]; then
  wait_for "a held cell on every worker" started
else
  # some cells are committed (a progress line with a count above 0)
  wait_for "progress" grep -qE '^sweep: [1-9][0-9]*/' "$err"
fi
case $target in
  mpirun|alone) pid=$launcher ;;
  master) pid=$(sed -n 's/^rank 0 pid \([0-9]*\)$/\1/p' "$out") ;;
  worker) pid=$(sed -n 's/^rank 1 pid \([0-9]*\)$/\1/p' "$out") ;;
  *) echo "unknown target $target"; exit 2 ;;
esac
[ -n "$pid" ] || fail "no pid for $target"
t0=$(date +%s.%N)
kill -s "$sig" "$pid"
case $hold_mode in
  keep)
    wait_for "stop line" grep -q 'stopping: no new cells; waiting up to' "$err"
    sleep 6   # longer than the old fixed 5 s grace; a lower bound only
    kill -0 $launcher 2>/dev/null || fail "the run ended while its cells were still held"
    grep -q 'stop grace of .* over' "$err" && fail "the master gave up on cells inside its grace"
    grep -q "waiting up to [0-9.ms ]* (stop grace) for the $workers running cells" "$err" ||
      fail "the stop line does not say it waits for the $workers running cells"
    if [ "$sig" = INT ]; then
      grep -q 'press Ctrl-C again to abandon the running cells' "$err" ||
        fail "the stop after Ctrl-C does not say that a second one abandons"
    fi ;;
  again)
    wait_for "stop line" grep -q 'stopping: no new cells; waiting up to' "$err"
    grep -q 'press Ctrl-C again to abandon the running cells' "$err" ||
      fail "the stop after the first Ctrl-C does not say that a second one abandons"
    grep -q 'stop grace of .* over' "$err" && fail "the master gave up on cells after one signal"
    kill -s "$sig" "$pid"
    wait_for "master's return after the second signal" grep -q '^rank 0 result interrupted$' "$out"
    grep -q "stop signal again: abandoning the $workers running cells" "$err" ||
      fail "no line saying the second signal abandons the running cells" ;;
  abandon)
    # the master gives up after its grace although every cell is still held
    wait_for "master's return while its cells are held" grep -q '^rank 0 result interrupted$' "$out"
    grep -q "stop grace of .* over: abandoning $workers running cells" "$err" ||
      fail "no line saying the grace ran out and what it abandons" ;;
esac
[ -z "$hold_mode" ] || touch "$hold"
end=$(( $(date +%s) + HANG ))
while kill -0 $launcher 2>/dev/null; do
  [ "$(date +%s)" -lt "$end" ] || { kill -KILL $launcher; fail "still running $HANG s after SIG$sig"; }
  sleep 0.1
done
wait $launcher
rc=$?
secs=$(echo "$(date +%s.%N) - $t0" | bc)
echo "SIG$sig to $target with $np ranks: launcher exit $rc after ${secs} s"
grep -E '^(master|rank [0-9]+ (result|exit))' "$out"
case $hold_mode in
  keep) grep -q "^master: committed $workers cells ($workers done, 0 failed), abandoned 0," "$out" ||
          fail "not every started cell was kept" ;;
  abandon|again) grep -q "^master: committed 0 cells (0 done, 0 failed), abandoned $workers," "$out" ||
             fail "the held cells were not abandoned" ;;
esac
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
