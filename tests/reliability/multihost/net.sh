#!/usr/bin/env bash
# tests/reliability/multihost/net.sh -- several "hosts" on one machine for the multi-host test
# (tests/reliability/test_multihost.py): each host is a network namespace with a veth link to
# a bridge in a switch namespace, and its own hostname (agent.sh gives every process it starts
# there a UTS namespace with that name). The subnet exists only inside these namespaces: the
# machine's own network never sees it, and every veth is created inside a namespace, so runs
# in parallel cannot collide (each run's names carry its id, and its own bridge).
#
# usage: net.sh up ID N DIR   make hosts IDh0 .. IDh(N-1) (addresses 10.77.0.1 ..) and the
#                             switch IDsw; write DIR/hostfile (one slot line per host, for
#                             mpirun --hostfile) and /etc/netns/IDhK/hosts (ip netns exec
#                             bind-mounts it over /etc/hosts inside that host: every host
#                             resolves every other's name to its veth address)
#        net.sh down ID       kill every process left in the run's namespaces, delete them
#                             (the veths go with them) and their /etc/netns folders
#        net.sh reap          `down` every run whose id names a process that no longer exists
#                             (a run killed before its own cleanup; ids are asmh<PID>[x<K>])
#        net.sh check         exit 0 when this machine lets us make namespaces, else print why
set -u
cmd=${1:-}
case $cmd in
up)
  id=$2 n=$3 dir=$4
  set -e
  ip netns add "${id}sw"
  ip -n "${id}sw" link add br0 type bridge
  ip -n "${id}sw" link set br0 up
  : >"$dir/hostfile"
  for i in $(seq 0 $((n - 1))); do
    ns=${id}h$i
    ip netns add "$ns"
    ip -n "${id}sw" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "${id}sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    { echo "127.0.0.1 localhost"
      for j in $(seq 0 $((n - 1))); do echo "10.77.0.$((j + 1)) ${id}h$j"; done; } >"/etc/netns/$ns/hosts"
    echo "$ns slots=8" >>"$dir/hostfile"
  done
  ;;
down)
  id=$2
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${id}(sw|h[0-9]+)$"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086 # one argument per pid
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null
  done
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${id}(sw|h[0-9]+)$"); do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  ;;
reap)
  for id in $(ip netns list | awk '{print $1}' | sed -n 's/^\(asmh[0-9][0-9a-z]*\)sw$/\1/p'); do
    pid=${id#asmh}
    pid=${pid%%[!0-9]*}
    kill -0 "$pid" 2>/dev/null || "$0" down "$id"
  done
  ;;
check)
  id=asmhcheck$$
  if ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    echo "the commands ip (iproute2) and unshare (util-linux) are needed"; exit 1
  fi
  if ! out=$(ip netns add "$id" 2>&1); then echo "ip netns add: $out"; exit 1; fi
  ok=1
  out=$(ip -n "$id" link add name mhca type veth peer name mhcb 2>&1) || { echo "veth: $out"; ok=0; }
  [ $ok = 0 ] || out=$(ip netns exec "$id" unshare --uts hostname "$id" 2>&1) || { echo "unshare --uts: $out"; ok=0; }
  ip netns del "$id"
  [ $ok = 1 ]
  ;;
*)
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
