# shellcheck shell=bash
# tests/slurm/lib.sh -- sourced by tests/test_slurm_*.sh: a private SLURM for one test, with
# timeouts on every wait and a teardown that always runs.
#
#   . tests/slurm/lib.sh        (sets REPO, SLURM_TESTS, SCRATCH; traps EXIT)
#   slurm_up [start.sh options] start the cluster or FAIL (never skip: a test that could not
#                               run must not look like a pass)
#   wait_until SECS WHAT CMD... poll CMD every 0.2 s; FAIL after SECS naming WHAT
#   drive_job JOBID SECS        wait for a job (or every task of an array) to finish; a task
#                               requeued by the job script waits for its BeginTime (~120 s),
#                               so set StartTime=now each time one is seen held that way.
#                               Prints the final states "ID STATE EXIT" one per line.
#   fail MSG                    print "FAIL: MSG" and exit 1 (logs are printed on the way out)
# Set ATTNSWEEP_KEEP_SCRATCH=1 to keep the scratch directory (cluster logs, job outputs).
# Every SECS is a hang limit, never a verdict on speed: it is multiplied by
# ATTNSWEEP_TEST_PATIENCE (default 3) so that a loaded machine only makes the test slower.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SLURM_TESTS="$REPO/tests/slurm"
SCRATCH=$(mktemp -d /tmp/attnsweep-slurmtest.XXXXXX) || { echo "FAIL: mktemp" >&2; exit 1; }
chmod 755 "$SCRATCH"
CLUSTER="$SCRATCH/cluster"
T_START=$(date +%s)
for v in $(compgen -e | grep '^SLURM_' || true); do unset "$v"; done

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "[$(( $(date +%s) - T_START )) s] $*"; }

_slurm_teardown() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$rc" != 0 ]; then
    echo "===== test failed (exit $rc); logs from $SCRATCH =====" >&2
    local f
    for f in "$CLUSTER"/log/slurmctld.log "$CLUSTER"/log/slurmd.log "$CLUSTER"/munge/log/munged.log; do
      [ -f "$f" ] && { echo "----- $f (last 60 lines) -----" >&2; tail -n 60 "$f" >&2; }
    done
    if [ -f "$CLUSTER/slurm.conf" ]; then
      echo "----- scontrol show job -----" >&2
      SLURM_CONF="$CLUSTER/slurm.conf" timeout 10 scontrol show job >&2 2>&1 || true
    fi
    while IFS= read -r f; do
      echo "----- $f -----" >&2; tail -n 60 "$f" >&2
    done < <(find "$SCRATCH" -path "$CLUSTER" -prune -o -type f \( -name '*.out' -o -name 'events.log' \) -print 2>/dev/null)
  fi
  "$SLURM_TESTS/stop.sh" --keep "$CLUSTER" >/dev/null 2>&1
  if [ "${ATTNSWEEP_KEEP_SCRATCH:-0}" = 1 ]; then
    echo "kept $SCRATCH" >&2
  else
    rm -rf "$SCRATCH"
  fi
  note "done (exit $rc)"
  exit "$rc"
}
trap _slurm_teardown EXIT
trap 'echo "FAIL: interrupted" >&2; exit 130' INT TERM

slurm_up() {
  if ! timeout 60 "$SLURM_TESTS/start.sh" "$@" "$CLUSTER" > "$SCRATCH/start.log" 2>&1; then
    cat "$SCRATCH/start.log" >&2
    fail "SLURM could not start (needs root and the Debian packages slurm-wlm munge); see above"
  fi
  # shellcheck disable=SC1091
  . "$CLUSTER/env.sh"
  note "$(tail -n 1 "$SCRATCH/start.log")"
}

PATIENCE=${ATTNSWEEP_TEST_PATIENCE:-3}
wait_until() {
  local secs=$(( $1 * PATIENCE )) what=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out after $secs s waiting for: $what"
    sleep 0.2
  done
}

# "JOBID STATE REASON EXITCODE" per job record (array tasks: one each; not yet split: one record)
job_records() {
  timeout 10 scontrol show job -o "$1" 2>/dev/null | awk '{
    id = st = rs = ex = "";
    for (i = 1; i <= NF; i++) {
      split($i, kv, "=");
      if (kv[1] == "JobId") id = kv[2]; else if (kv[1] == "JobState") st = kv[2];
      else if (kv[1] == "Reason") rs = kv[2]; else if (kv[1] == "ExitCode") ex = kv[2];
    }
    print id, st, rs, ex }'
}

drive_job() {
  local job=$1 secs=$(( $2 * PATIENCE ))
  local end=$(( $(date +%s) + secs )) recs busy id st rs
  while :; do
    recs=$(job_records "$job")
    [ -n "$recs" ] || fail "job $job unknown to scontrol"
    busy=0
    while read -r id st rs _; do
      case "$st" in
        COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL|BOOT_FAIL|DEADLINE|PREEMPTED) ;;
        PENDING)
          busy=1
          # slurmd refuses to launch a requeued job in the same second its previous
          # batch step was killed (its revoked credential has a 1 s resolution: "Job N
          # already killed, do not launch batch job"), so wait for that step to be gone
          # and 2 s more. A real requeue waits ~120 s anyway.
          if [ "$rs" = BeginTime ] && ! pgrep -f "slurmstepd: \[$id\." >/dev/null; then
            sleep 2
            timeout 10 scontrol update jobid="$id" StartTime=now >/dev/null 2>&1 &&
              note "job $id requeued and held until its BeginTime: set StartTime=now" >&2
          fi ;;
        *) busy=1 ;;
      esac
    done <<< "$recs"
    [ "$busy" = 0 ] && break
    [ "$(date +%s)" -lt "$end" ] || fail "job $job not finished after $secs s: $(echo $recs)"
    sleep 0.3
  done
  job_records "$job" | awk '{ print $1, $2, $4 }'
}

# value of FIELD in `scontrol show job -o JOBID` (first record)
job_field() {
  timeout 10 scontrol show job -o "$1" 2>/dev/null | head -n1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}
