#!/bin/sh
# env_help.sh ATTNSWEEP SRC_DIR -- every environment variable the program reads (getenv in
# src/, the test-only hooks of src/store/testhook.c aside) is named in some command's --help,
# so no knob that changes what a run does is hidden from its user.
set -eu
bin=$1 src=$2
help=$(for c in run plan status dump merge synth tokenize; do "$bin" "$c" --help 2>&1 || true; done; "$bin" --help 2>&1 || true)
fail=0
for v in $(grep -rhoE 'getenv\("[A-Z0-9_]+"\)' "$src/src" --exclude=testhook.c | sed 's/getenv("\(.*\)")/\1/' | sort -u); do
  case "$v" in SLURM_*) continue ;; esac   # read for provenance only
  if printf '%s\n' "$help" | grep -q "$v"; then echo "ok: $v"; else echo "FAIL: $v is read (src/) but no --help names it"; fail=1; fi
done
exit $fail
