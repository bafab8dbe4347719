#!/usr/bin/env bash
# tests/reliability/run-asan.sh [ctest args] -- build attnsweep with AddressSanitizer +
# UndefinedBehaviorSanitizer into build-asan/ (-DAS_SANITIZE=ON, RelWithDebInfo)
# and run, there, the C unit tests, the MPI tests and the CLI tests:
#   pass 1: ctest -R '^(test_|loader_cli$|config_plan_cli$|dump_cli_)'
#                 -E '^(test_store_xarray|test_tokenizer_oracle)$'
#   pass 2: ctest -R '^(scheduler_|sweep_)'
# i.e. every tests/test_*.c (test_scheduler included), the scheduler under
# mpirun (label mpi), the end-to-end sweeps under mpirun (sweep_*: the ranks
# are the sanitized attnsweep, python only drives and compares), and the
# shell-driven CLI checks. Left out: the slow GPT-2-size tests (synth_gpt2,
# loader_check_gpt2, forward_ref_gpt2_*), the python-heavy ones
# (test_store_xarray, analysis_*, ks_ref_scipy except as a fixture), the npm
# oracle (test_tokenizer_oracle: covered by fuzz_tokenizer under ASan), SLURM
# (jobs_*, slurm_*) and the fuzzers (they are built with their own sanitizers).
# Any sanitizer report fails the test (halt_on_error). Leaks are checked in
# every test not started by mpirun, with only Open MPI's and
# libconfig's own suppressed (tests/reliability/lsan.supp); under mpirun detect_leaks=0.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
build=$here/build-asan
log=$build/build.log
mkdir -p "$build"
cmake -S "$here" -B "$build" -DAS_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$log" 2>&1 ||
  { cat "$log" >&2; echo "run-asan: cmake configure failed" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" >> "$log" 2>&1 ||
  { tail -40 "$log" >&2; echo "run-asan: build failed (log: $log)" >&2; exit 1; }
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMPI_MCA_mca_base_component_disable_dlclose=1 OPENBLAS_NUM_THREADS=1
cd "$build"
rc=0
# Pass 1, full leak checks: unit tests (test_scheduler too: a singleton MPI
# rank) and CLI tests. The slow unwinder gives full stacks through Open MPI
# (no frame pointers), which the suppressions need. Two at a time: they are
# independent, and test_metrics alone takes half a minute under ASan.
ASAN_OPTIONS=halt_on_error=1:print_stacktrace=1:detect_leaks=1 \
LSAN_OPTIONS=suppressions=$here/tests/reliability/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0 \
ctest --output-on-failure --timeout 600 -j2 \
  -R '^(test_|loader_cli$|config_plan_cli$|dump_cli_)' \
  -E '^(test_store_xarray|test_tokenizer_oracle)$' "$@" || rc=1
# Pass 2, the same code under mpirun with 2-4 ranks: memory errors and UB, no
# leak check (Open MPI's exit-time leaks in every rank; and the leak scan and
# its symbolisation at exit take seconds, which breaks the signal tests' 10 s
# deadlines). Our leaks on these paths are caught by pass 1's singleton runs.
ASAN_OPTIONS=halt_on_error=1:print_stacktrace=1:detect_leaks=0 \
ctest --output-on-failure --timeout 600 -R '^(scheduler_|sweep_)' "$@" || rc=1
exit $rc
