#!/usr/bin/env bash
# tests/slurm/start.sh -- bring up a private one-node SLURM (munged + slurmctld + slurmd) on
# localhost, for integration tests of the job scripts. Needs root and the Debian packages
# slurm-wlm and munge.
#
#   tests/slurm/start.sh [--max-array-size N] [--cpus N] DIR
#
# DIR must not exist yet (or be empty); everything (key, socket, slurm.conf, state, spool, logs,
# pid files) lives under it, on free TCP ports, so several clusters can run side by side and
# nothing under /etc or /run is touched. On success it prints the line to source,
#   . DIR/env.sh        (exports SLURM_CONF and unsets any inherited SLURM_* job variables)
# and exits 0 once the node is idle. On failure it prints the daemon logs, stops what it started
# and exits 1. Stop with tests/slurm/stop.sh DIR.
set -euo pipefail
prog=start.sh
max_array_size=1001
cpus=$(nproc)
dir=''
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --max-array-size) [ $# -ge 2 ] || { echo "$prog: --max-array-size needs a value" >&2; exit 2; }
                      max_array_size=$2; shift 2 ;;
    --cpus) [ $# -ge 2 ] || { echo "$prog: --cpus needs a value" >&2; exit 2; }
            cpus=$2; shift 2 ;;
    -*) echo "$prog: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "$prog: one DIR only, got '$dir' and '$1'" >&2; exit 2; }
       dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { echo "$prog: missing DIR (try --help)" >&2; exit 2; }
case "$max_array_size$cpus" in *[!0-9]*) echo "$prog: --max-array-size/--cpus need integers" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "$prog: needs root (slurmd and munged run as root/munge here)" >&2; exit 1; }
for b in munged slurmctld slurmd scontrol sinfo; do
  command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] ||
    { echo "$prog: '$b' not found: apt-get install slurm-wlm munge" >&2; exit 1; }
done
id munge >/dev/null 2>&1 || { echo "$prog: no 'munge' user: apt-get install munge" >&2; exit 1; }
export PATH="$PATH:/usr/sbin"

mkdir -p "$dir"
[ -z "$(ls -A "$dir")" ] || { echo "$prog: $dir is not empty" >&2; exit 1; }
dir=$(cd "$dir" && pwd)
chmod 755 "$dir"   # munged (user munge) must reach its socket below it

# Everything after this point is undone by stop.sh on failure.
fail() {
  echo "$prog: $*" >&2
  for f in "$dir"/log/*.log "$dir"/munge/log/munged.log; do
    [ -f "$f" ] && { echo "----- $f (last 40 lines) -----" >&2; tail -n 40 "$f" >&2; }
  done
  "$(dirname "$0")/stop.sh" --keep "$dir" >&2 || true
  exit 1
}

# Unset the variables of an enclosing job (CI inside SLURM) so clients talk to this cluster only.
for v in $(compgen -e | grep '^SLURM_' || true); do unset "$v"; done

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done

# --- munge: key dir 700, key 400, socket dir 755, all owned by munge ---
m="$dir/munge"
mkdir -p "$m/etc" "$m/run" "$m/log" "$m/lib"
dd if=/dev/urandom of="$m/etc/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$m"
chmod 700 "$m/etc" "$m/log" "$m/lib"
chmod 755 "$m" "$m/run"
chmod 400 "$m/etc/munge.key"
sock="$m/run/munge.socket"
runuser -u munge -- /usr/sbin/munged --socket="$sock" --key-file="$m/etc/munge.key" \
  --pid-file="$m/run/munged.pid" --log-file="$m/log/munged.log" --seed-file="$m/lib/munged.seed" \
  --num-threads=2 || fail "munged did not start"
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || fail "munged socket $sock did not appear within 5 s"

# --- slurm ---
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/tmp"
chmod 1777 "$dir/tmp"
cluster="as$(basename "$dir" | tr -cd 'a-z0-9' | tail -c 12)"
cat > "$dir/slurm.conf" <<EOF
# private test cluster written by tests/slurm/start.sh
ClusterName=$cluster
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
# PMIx keeps per-step directories named after the job id under TmpFS (/tmp by default): two
# private clusters both running job 1 would collide there
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
JobRequeue=1
MaxArraySize=$max_array_size
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmdTimeout=60
MessageTimeout=10
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat > "$dir/env.sh" <<EOF
# source me: use the private test cluster in $dir
for v in \$(compgen -e | grep '^SLURM_' || true); do unset "\$v"; done
export SLURM_CONF=$dir/slurm.conf
export PATH="\$PATH:/usr/sbin"
EOF
export SLURM_CONF="$dir/slurm.conf"

/usr/sbin/slurmctld -c -i -f "$SLURM_CONF" || fail "slurmctld did not start"
/usr/sbin/slurmd -N localhost -f "$SLURM_CONF" || fail "slurmd did not start"

# Ready when the controller answers and the node is idle (timeout 30 s).
state=''
for _ in $(seq 1 150); do
  if scontrol ping 2>/dev/null | grep -q 'is UP'; then
    state=$(sinfo -h -n localhost -o '%T' 2>/dev/null | head -n1)
    [ "$state" = idle ] && break
  fi
  sleep 0.2
done
[ "$state" = idle ] || fail "node not idle within 30 s (state '${state:-no answer}')"
echo "$prog: cluster '$cluster' up in $dir (slurmctld :$ctld_port, slurmd :$slurmd_port); . $dir/env.sh"
