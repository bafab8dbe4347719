#!/usr/bin/env bash
# tests/slurm/stop.sh -- stop a private cluster started by tests/slurm/start.sh and remove DIR.
#
#   tests/slurm/stop.sh [--keep] DIR
#
# Cancels the cluster's jobs (waits up to 15 s for them to end), then stops slurmd, slurmctld
# and munged by their pid files -- only processes whose command line names DIR, never by name --
# with SIGTERM, then SIGKILL after 10 s. --keep leaves DIR (logs, state) in place.
# Safe to call twice, or on a half-started cluster.
set -uo pipefail
prog=stop.sh
keep=0
dir=''
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --keep) keep=1; shift ;;
    -*) echo "$prog: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { echo "$prog: missing DIR (try --help)" >&2; exit 2; }
[ -d "$dir" ] || exit 0
dir=$(cd "$dir" && pwd)
export PATH="$PATH:/usr/sbin"

# pid from FILE if that process is alive and its command line mentions DIR (no recycled pids)
our_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 1
  pid=$(tr -cd '0-9' < "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$dir" || return 1
  echo "$pid"
}
# alive and not a zombie (an unreaped daemon counts as stopped)
alive() { [ -r "/proc/$1/stat" ] && ! awk '{exit !($3 == "Z")}' "/proc/$1/stat" 2>/dev/null; }
stop_pidfile() {
  local f=$1 pid
  pid=$(our_pid "$f") || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 100); do alive "$pid" || return 0; sleep 0.1; done
  echo "$prog: pid $pid ($f) ignored SIGTERM for 10 s, sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null
}

if [ -f "$dir/slurm.conf" ] && our_pid "$dir/run/slurmctld.pid" >/dev/null; then
  for v in $(compgen -e | grep '^SLURM_' || true); do unset "$v"; done
  export SLURM_CONF="$dir/slurm.conf"
  if [ -n "$(timeout 10 squeue -h -o %i 2>/dev/null)" ]; then
    timeout 10 scancel --full --quiet --user=root 2>/dev/null
    for _ in $(seq 1 75); do
      [ -z "$(timeout 5 squeue -h -t PD,R,CG,S,RQ,RS,SO,CF -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
fi
stop_pidfile "$dir/run/slurmd.pid"
stop_pidfile "$dir/run/slurmctld.pid"
stop_pidfile "$dir/munge/run/munged.pid"
if [ "$keep" = 0 ]; then
  rm -rf "$dir"
fi
exit 0
