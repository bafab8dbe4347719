#!/usr/bin/env bash
# tests/slurm/test_slurm_requeue.sh -- jobs/attnsweep.sbatch against a real (private, local) SLURM,
# with tests/slurm/fake_sweep.sh standing in for build/attnsweep:
#   A  warning forced mid-run (scancel --signal=USR1 --batch): the sweep exits 3, the job
#      requeues itself and the next segment finishes the work;
#   B  the real time-limit warning (--time=2 --signal=B:USR1@115: slurmctld checks time limits
#      every 30 s, so it arrives 5 to 35 s in); B's first segment has 100 s of work, so the
#      warning comes before it ends even when a loaded slurmctld checks late (the 2-minute limit
#      is the bound), and after the requeue its units take 0.1 s;
#   C  a sweep that fails (exit 1) stops the chain: no requeue, the job fails with that code;
#   D  --max-segments 1: the requeued segment 2 refuses to run (guard against endless chains);
#   E  SIGTERM to the batch shell (cancel, preemption): the sweep is told to stop and saves
#      (exit 3), and the job is not requeued.
# A and B must end in the state of an uninterrupted run (every unit done exactly once, compared
# with fake_sweep.sh run straight through) after 2+ logged segments.
. "$(dirname "$0")/lib.sh"
SBATCH_SCRIPT="$REPO/jobs/attnsweep.sbatch"
FAKE="$SLURM_TESTS/fake_sweep.sh"
work="$SCRATCH/work"
mkdir -p "$work" && cd "$work" || fail "cannot make $work"
slurm_up

# reference: the same sweeps run straight through, no SLURM, no signals
units_of() { awk '{print $2}' "$1" | sort -n; }
reference() {   # NAME UNITS -> reference unit list in ref-NAME.txt
  mkdir -p ref && printf 'units=%s\nseconds=0\n' "$2" > "ref/$1.cfg"
  "$FAKE" run "ref/$1.cfg" || fail "reference run of $1 exited $?"
  units_of "ref/$1.cfg.d/done-0-of-1.txt" > "ref-$1.txt"
}
reference A 10
reference B 100
[ "$(wc -l < ref-A.txt)" = 10 ] || fail "reference run A did not do 10 units"

printf 'units=10\nseconds=1\n' > A.cfg
printf 'units=100\nseconds=1\nlater_seconds=0.1\n' > B.cfg
printf 'units=5\nseconds=0.2\nfail_at=2\n' > C.cfg
printf 'units=20\nseconds=1\n' > D.cfg
printf 'units=20\nseconds=1\n' > E.cfg
export ATTNSWEEP_BIN="$FAKE"
submit() { timeout 20 sbatch --parsable "$@" || fail "sbatch $* failed"; }
job_a=$(submit --time=10 --signal=B:USR1@10 --output=A-%j.out "$SBATCH_SCRIPT" --warn 10 A.cfg)
job_b=$(submit --time=2 --signal=B:USR1@115 --output=B-%j.out "$SBATCH_SCRIPT" B.cfg)
note "submitted A=$job_a B=$job_b"

done_count() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
at_least_3_done() { [ "$(done_count A.cfg.d/done-0-of-1.txt)" -ge 3 ]; }
wait_until 60 "3 units of sweep A" at_least_3_done
timeout 10 scancel --signal=USR1 --batch "$job_a" || fail "scancel --signal=USR1 --batch $job_a failed"
note "sent USR1 to the batch shell of A after $(done_count A.cfg.d/done-0-of-1.txt) units"

final_a=$(drive_job "$job_a" 90)
job_c=$(submit --time=10 --output=C-%j.out "$SBATCH_SCRIPT" C.cfg)   # on the CPU A freed
final_c=$(drive_job "$job_c" 60)
job_d=$(submit --time=10 --signal=B:USR1@10 --output=D-%j.out "$SBATCH_SCRIPT" --max-segments 1 D.cfg)
d_started() { [ -s D.cfg.d/done-0-of-1.txt ]; }
wait_until 60 "a unit of sweep D" d_started
timeout 10 scancel --signal=USR1 --batch "$job_d" || fail "scancel --signal=USR1 --batch $job_d failed"
final_d=$(drive_job "$job_d" 60)
job_e=$(submit --time=10 --signal=B:USR1@10 --output=E-%j.out "$SBATCH_SCRIPT" E.cfg)
e_started() { [ -s E.cfg.d/done-0-of-1.txt ]; }
wait_until 60 "a unit of sweep E" e_started
timeout 10 scancel --signal=TERM --batch "$job_e" || fail "scancel --signal=TERM --batch $job_e failed"
final_e=$(drive_job "$job_e" 60)
final_b=$(drive_job "$job_b" 120)
note "final: A: $final_a; B: $final_b; C: $final_c; D: $final_d; E: $final_e"

check_chain() {   # NAME JOBID FINAL
  local name=$1 job=$2 final=$3 log="$1-$2.out" done="$1.cfg.d/done-0-of-1.txt"
  [ "$final" = "$job COMPLETED 0:0" ] || fail "$name: job ended '$final', expected COMPLETED 0:0"
  [ -f "$log" ] || fail "$name: no job log $log"
  local starts ends3 ends0 restarts
  starts=$(grep -c 'segment [0-9]*: start' "$log")
  ends3=$(grep -c 'end: exit 3 .*requeueing' "$log")
  ends0=$(grep -c 'end: exit 0 .*sweep complete' "$log")
  restarts=$(job_field "$job" Restarts)
  [ "$starts" -ge 2 ] || fail "$name: $starts segment(s) logged, expected 2 or more"
  [ "$ends3" = $((starts - 1)) ] || fail "$name: $starts segments but $ends3 requeues logged"
  [ "$ends0" = 1 ] || fail "$name: 'sweep complete' logged $ends0 times"
  tail -n 1 "$log" | grep -q 'sweep complete' || fail "$name: the log does not end with 'sweep complete'"
  [ "$restarts" = $((starts - 1)) ] || fail "$name: SLURM counts $restarts restarts, the log $starts segments"
  grep -q "segment 2: start .*restarts 1" "$log" || fail "$name: segment 2 did not see SLURM_RESTART_COUNT=1"
  units_of "$done" > "got-$name.txt"
  if ! diff -u "ref-$name.txt" "got-$name.txt" >&2; then
    fail "$name: units done differ from the uninterrupted run (diff above: missing or repeated units)"
  fi
  # work really was split: units were finished in the first and in a later segment, and the
  # second segment resumed rather than restarted
  grep -q ' restart 0$' "$done" || fail "$name: no unit done in segment 1"
  grep -q ' restart [1-9][0-9]*$' "$done" || fail "$name: no unit done after a requeue"
  grep -q 'restart 1: start ([1-9][0-9]* units of this shard already done' "$1.cfg.d/events.log" ||
    fail "$name: segment 2 did not resume from the saved progress"
  note "$name: $starts segments, $(wc -l < "$done") units exactly once, SLURM restarts $restarts"
}
check_chain A "$job_a" "$final_a"
grep -q 'stop grace 5)' A.cfg.d/events.log || fail "A: the sweep was not given --warn 10 minus the margin as its stop grace"
grep -q 'got SIGUSR1' "A-$job_a.out" || fail "A: the forced warning was not logged"
check_chain B "$job_b" "$final_b"
grep -q 'segment 1: got SIGUSR1 (time limit near)' "B-$job_b.out" ||
  fail "B: the time-limit warning (--signal=B:USR1@115) never reached the batch shell"

# C: exit 1 stops the chain at once
[ "$final_c" = "$job_c FAILED 1:0" ] || fail "C: job ended '$final_c', expected FAILED 1:0"
grep -q 'end: exit 1 .*chain stopped' "C-$job_c.out" || fail "C: failure not reported in the log"
[ "$(grep -c 'segment [0-9]*: start' "C-$job_c.out")" = 1 ] || fail "C: a failed sweep was requeued"
[ "$(job_field "$job_c" Restarts)" = 0 ] || fail "C: SLURM restarted a failed sweep"
[ "$(units_of C.cfg.d/done-0-of-1.txt | tr '\n' ' ')" = "0 1 " ] || fail "C: units before the failure not kept"
note "C: failure stopped the chain after one segment"

# D: the segment limit ends the chain with an error that says what to do
[ "$final_d" = "$job_d FAILED 1:0" ] || fail "D: job ended '$final_d', expected FAILED 1:0"
grep -q 'segment 2: error: segment limit reached (1 segments)' "D-$job_d.out" ||
  fail "D: segment 2 did not stop at the limit"
grep -q 'restart 1: start' D.cfg.d/events.log && fail "D: the sweep ran beyond the segment limit"
note "D: --max-segments 1 stopped the chain at segment 2"

# E: SIGTERM stops the chain, but only after the sweep saved (exit 3, not a kill)
[ "$final_e" = "$job_e FAILED 3:0" ] || fail "E: job ended '$final_e', expected FAILED 3:0"
grep -q 'end: exit 3 .*stopped by SIGTERM, not requeued' "E-$job_e.out" || fail "E: SIGTERM stop not logged"
grep -q 'got SIGUSR1: saved, exiting 3' E.cfg.d/events.log || fail "E: the sweep was not asked to save"
[ "$(job_field "$job_e" Restarts)" = 0 ] || fail "E: requeued after SIGTERM"
note "E: SIGTERM: sweep saved and exited 3, chain stopped without requeue"
echo "PASS test_slurm_requeue"
