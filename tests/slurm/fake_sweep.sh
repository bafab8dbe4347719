#!/usr/bin/env bash
# tests/slurm/fake_sweep.sh -- a stand-in for `build/attnsweep run` with the same outside
# contract, for testing the job scripts without the real sweep.
#
#   fake_sweep.sh run CONFIG [--shard I/K] [--set KEY=VALUE]...
#
# CONFIG is a text file of key=value lines:
#   units=N       units of work in the whole sweep (default 10)
#   seconds=S     time per unit (default 1; may be fractional)
#   later_seconds=S  time per unit after a requeue (SLURM_RESTART_COUNT > 0; default: seconds)
#   fail_at=U     exit 1 ("error") when about to start unit U (default: never)
# A unit u belongs to shard I of K when u % K == I (no --shard: all units).
# Progress lives next to CONFIG: CONFIG.d/done-I-of-K.txt gets one line per finished unit
# ("unit U shard I/K job J restart R"), written only once the unit is complete, so a unit is
# never recorded twice or half; CONFIG.d/events.log records starts, signals and exits.
# Resumes by default: units already in the done file are skipped. --set is accepted as attnsweep
# takes it; the start event names the runtime.stop_grace the job script passed.
# Exit codes (as attnsweep, include/core/errors.h): 0 all units of the shard done, 1 error, 2 bad usage,
# 3 stopped by SIGUSR1/SIGTERM/SIGINT and resumable (the unit in flight is abandoned, not saved).
# Under srun with several tasks only SLURM_PROCID 0 works; the others exit 0 at once.
set -uo pipefail
prog=fake_sweep.sh
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
[ "${1:-}" = -h ] || [ "${1:-}" = --help ] && { usage; exit 0; }
[ "${1:-}" = run ] || { echo "$prog: expected subcommand 'run' (try --help)" >&2; exit 2; }
shift
config='' shard_i=0 shard_k=1 stop_grace=default
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --shard) [ $# -ge 2 ] || { echo "$prog: --shard needs I/K" >&2; exit 2; }
             [[ "$2" =~ ^([0-9]+)/([0-9]+)$ ]] || { echo "$prog: --shard '$2' is not I/K" >&2; exit 2; }
             shard_i=${BASH_REMATCH[1]} shard_k=${BASH_REMATCH[2]}
             [ "$shard_k" -ge 1 ] && [ "$shard_i" -lt "$shard_k" ] ||
               { echo "$prog: --shard $2: need 0 <= I < K" >&2; exit 2; }
             shift 2 ;;
    --set) [ $# -ge 2 ] || { echo "$prog: --set needs KEY=VALUE" >&2; exit 2; }
           case "$2" in runtime.stop_grace=*) stop_grace=${2#*=} ;; esac
           shift 2 ;;
    -*) echo "$prog: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$config" ] || { echo "$prog: one CONFIG only" >&2; exit 2; }
       config=$1; shift ;;
  esac
done
[ -n "$config" ] || { echo "$prog: missing CONFIG" >&2; exit 2; }
[ -r "$config" ] || { echo "$prog: $config: cannot read config" >&2; exit 1; }
[ "${SLURM_PROCID:-0}" = 0 ] || exit 0

get() { local v; v=$(sed -n "s/^$1=//p" "$config" | tail -n1); echo "${v:-$2}"; }
units=$(get units 10) seconds=$(get seconds 1) fail_at=$(get fail_at -1)
[ "${SLURM_RESTART_COUNT:-0}" = 0 ] || seconds=$(get later_seconds "$seconds")
state="$config.d"
mkdir -p "$state" || { echo "$prog: $state: cannot create" >&2; exit 1; }
done_file="$state/done-$shard_i-of-$shard_k.txt"
touch "$done_file"
tag="job ${SLURM_JOB_ID:-none} restart ${SLURM_RESTART_COUNT:-0}"
event() { echo "$(date -u +%T) shard $shard_i/$shard_k $tag: $*" >> "$state/events.log"; }

stop_signal=''
on_signal() { stop_signal=$1; }
trap 'on_signal USR1' USR1
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

already=$(wc -l < "$done_file")
event "start ($already units of this shard already done; stop grace $stop_grace)"
for ((u = shard_i; u < units; u += shard_k)); do
  grep -qx "unit $u .*" "$done_file" && continue
  if [ "$u" = "$fail_at" ]; then event "failing at unit $u"; echo "$prog: unit $u: injected failure" >&2; exit 1; fi
  [ -z "$stop_signal" ] || break
  sleep "$seconds" & sleeper=$!
  wait "$sleeper"
  [ -z "$stop_signal" ] || { kill "$sleeper" 2>/dev/null; break; }
  echo "unit $u shard $shard_i/$shard_k $tag" >> "$done_file"
done
if [ -n "$stop_signal" ]; then
  event "got SIG$stop_signal: saved, exiting 3"
  exit 3
fi
event "complete, exiting 0"
exit 0
