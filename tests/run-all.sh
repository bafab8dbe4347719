#!/usr/bin/env bash
# tests/run-all.sh [--no-asan] [ctest args] -- set up (packages, build) and run every test with ctest,
# then the sanitizer pass (tests/reliability/run-asan.sh: ASan+UBSan build in build-asan/, unit + MPI tests).
# Extra arguments go to the first ctest (e.g. -R tokenizer, -L slow, -j2, -LE fuzz); --no-asan skips the second pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,4p' "$0" | sed 's/^# //'; exit 0; fi
asan=1
if [ "${1:-}" = --no-asan ]; then asan=0; shift; fi
"$here/jobs/setup.sh" --tests
rc=0
(cd "$here/build" && ctest --output-on-failure --timeout 1500 "$@") || rc=1
if [ "$asan" = 1 ]; then
  echo "run-all: sanitizer pass (tests/reliability/run-asan.sh, build-asan/)"
  "$here/tests/reliability/run-asan.sh" || rc=1
fi
exit $rc
