#!/usr/bin/env bash
# tests/jobs/test_run_all_skips.sh -- tests/run-all.sh's summary of skipped tests
# (tests/lib/skip_summary.py) on a real ctest run of a scratch project: one test skipped for a
# missing asset (SKIP_RETURN_CODE), one passing. ctest says "100% tests passed" there; the
# summary must name the skipped test and the reason it printed, and say so when none was.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
scratch=$(mktemp -d /tmp/attnsweep-skips.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || fail "cd $scratch"
cat > CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.13)
project(skips NONE)
enable_testing()
add_test(NAME needs_model COMMAND sh -c "echo 'setting up'; echo 'SKIPPED: no model at /nowhere/wp-gpt2 (a missing asset)'; exit 77")
set_tests_properties(needs_model PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME plain COMMAND true)
CM
cmake -S . -B b > /dev/null 2>&1 || fail "cmake configure of the scratch project"
(cd b && ctest > ../ctest.out 2>&1)
grep -q "100% tests passed" ctest.out || fail "the scratch ctest run is not the case this guards: $(cat ctest.out)"
out=$(/usr/bin/python3 "$here/tests/lib/skip_summary.py" ctest.out b/Testing/Temporary/LastTest.log) ||
  fail "skip_summary.py exited $?"
echo "$out"
grep -q "^run-all: 1 test SKIPPED" <<< "$out" || fail "the summary does not count the skipped test"
grep -qF "  needs_model: SKIPPED: no model at /nowhere/wp-gpt2 (a missing asset)" <<< "$out" ||
  fail "the summary does not give the skipped test's reason"
! grep -q "plain" <<< "$out" || fail "the summary lists a test that ran"
(cd b && ctest -R plain > ../ctest2.out 2>&1)
out=$(/usr/bin/python3 "$here/tests/lib/skip_summary.py" ctest2.out b/Testing/Temporary/LastTest.log)
[ "$out" = "run-all: no test was skipped" ] || fail "no skip: the summary says '$out'"
grep -q 'skip_summary.py' "$here/tests/run-all.sh" || fail "tests/run-all.sh does not print the summary"
echo "run_all_skips: ok"
