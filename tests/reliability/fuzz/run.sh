#!/usr/bin/env bash
# tests/reliability/fuzz/run.sh NAME SECONDS [BUILD_DIR] -- run fuzz_NAME (safetensors,
# model_config, tokenizer, config) for SECONDS under ASan+UBSan, starting from
# a scratch copy of tests/reliability/fuzz/corpus/NAME (the committed seeds are never
# modified). Exits non-zero on any crash, sanitizer report, leak, failed
# property or input slower than 10 s; the crashing input is kept in
# BUILD_DIR/fuzz-NAME/ (printed). BUILD_DIR defaults to <repo>/build-fuzz
# (tests/reliability/fuzz/build.sh builds it).
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ] || [ $# -lt 2 ]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; [ $# -ge 2 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; exit $?
fi
name=$1 seconds=$2 out=${3:-$here/build-fuzz}
bin=$out/fuzz_$name
[ -x "$bin" ] || { echo "fuzz/run.sh: $bin missing (run tests/reliability/fuzz/build.sh $out)" >&2; exit 1; }
work=$out/fuzz-$name
rm -rf "$work"
mkdir -p "$work/corpus" "$work/tmp"
cp "$here/tests/reliability/fuzz/corpus/$name"/* "$work/corpus/"
dict=()
[ -f "$here/tests/reliability/fuzz/$name.dict" ] && dict=(-dict="$here/tests/reliability/fuzz/$name.dict")
export TMPDIR=$work/tmp
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/tests/reliability/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
set +e
nice "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "${dict[@]+"${dict[@]}"}" "$work/corpus" 2>&1 | tee "$work/log" |
  grep -v '^#[0-9].*\(NEW\|REDUCE\|pulse\)'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  echo "fuzz/run.sh: fuzz_$name FAILED (exit $rc); log $work/log, input(s):" $(ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | sed "s|^|$work/|") >&2
  exit 1
fi
rm -rf "$work/tmp"
echo "fuzz/run.sh: fuzz_$name ran $seconds s clean; corpus $(ls "$work/corpus" | wc -l) inputs"
