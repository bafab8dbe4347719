#!/bin/sh
# tests/reliability/multihost/agent.sh -- Open MPI's rsh agent for the namespace hosts of
# net.sh (mpirun --mca plm_rsh_agent THIS): called as `agent.sh HOST CMD...` in place of
# `ssh HOST CMD...`, it runs CMD in HOST's network namespace (HOST is the namespace's name)
# with a UTS namespace of its own whose hostname is HOST. As with ssh, CMD is one shell
# command line (Open MPI quotes its arguments for a remote shell), so sh -c reads it.
host=$1
shift
# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
