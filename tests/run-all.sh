#!/usr/bin/env bash
# tests/run-all.sh -- set up (packages, build) and run every test with ctest.
# Extra arguments go to ctest (e.g. -R tokenizer, -L slow, -j2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,3p' "$0" | sed 's/^# //'; exit 0; fi
"$here/jobs/setup.sh" --tests
cd "$here/build"
exec ctest --output-on-failure --timeout 1500 "$@"
