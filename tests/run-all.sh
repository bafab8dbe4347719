#!/usr/bin/env bash
# tests/run-all.sh [--no-asan] [ctest args] -- set up (packages, build) and run every test with ctest,
# then the sanitizer pass (tests/reliability/run-asan.sh: ASan+UBSan build in build-asan/, unit + MPI tests).
# Extra arguments go to the first ctest (e.g. -R tokenizer, -L slow, -j2, -LE fuzz); --no-asan skips the second pass.
# After ctest it lists the tests skipped (a missing asset) with the reason each printed.
# Two tests run at a time (ATTNSWEEP_TEST_JOBS, default 2: the tests share no files and none
# depends on timing, so a busier machine only makes them slower).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,7p' "$0" | sed 's/^# //'; exit 0; fi
asan=1
if [ "${1:-}" = --no-asan ]; then asan=0; shift; fi
"$here/jobs/setup.sh" --tests
rc=0
out=$here/build/run-all.ctest.log
set +e
(cd "$here/build" && ctest --output-on-failure --timeout 1500 --parallel "${ATTNSWEEP_TEST_JOBS:-2}" "$@") 2>&1 | tee "$out"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
set -e
# ctest counts a skipped test (a missing model or data set) as passed: say which and why
/usr/bin/python3 "$here/tests/lib/skip_summary.py" "$out" "$here/build/Testing/Temporary/LastTest.log" || true
if [ "$asan" = 1 ]; then
  echo "run-all: sanitizer pass (tests/reliability/run-asan.sh, build-asan/)"
  "$here/tests/reliability/run-asan.sh" || rc=1
fi
exit $rc
