#!/usr/bin/env bash
# tests/integration/quickstart_trained.sh -- the README's quick start on the small model
# trained on War and Peace (learned attention), from the test assets that CI lays beside the
# clone as ../shared: its three checkpoints (training steps 100, 400 and the final 700) as one
# quick start with a model axis, so the figures include the checkpoint figure. Its headline
# table must say the models are not GPT-2. Without the assets it says that it skipped. Run from the repository root (.ci/run does).
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=../shared
models=("$shared/models/wp-gpt2-4x3-step100" "$shared/models/wp-gpt2-4x3-step400" "$shared/models/wp-gpt2-4x3")
text=$shared/data/war-and-peace.txt
for m in "${models[@]}" "$text"; do
  if [ ! -e "$m" ]; then
    echo "quickstart_trained: SKIPPED: $m is not beside this clone"
    exit 0
  fi
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
args=()
for m in "${models[@]}"; do args+=(--model "$m"); done
set +e
bash jobs/quickstart.sh --offline "${args[@]}" --text "$text" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || { echo "quickstart_trained: FAIL: the quick start exited $rc" >&2; exit 1; }
figs=results/quickstart-wp-gpt2-4x3-step100+wp-gpt2-4x3-step400+wp-gpt2-4x3-figures
fail() { echo "quickstart_trained: FAIL: $*" >&2; exit 1; }
test -s "$figs/summary.csv" || fail "no $figs/summary.csv"
grep -q "not GPT-2" "$figs/summary.csv" || fail "summary.csv does not say the models are not GPT-2"
for m in "${models[@]}"; do
  name=$(basename "$m")
  grep -q "^$name,model," "$figs/summary.csv" || fail "summary.csv has no model row for $name"
  test -s "$figs/$name/separability.png" || fail "no figures of $name in $figs/$name/"
done
test -s "$figs/checkpoints.png" && test -s "$figs/checkpoints.csv" || fail "no checkpoint figure in $figs"
# x = the training steps of the three config.json files (100, 400, 700)
steps=$(awk -F, 'NR > 1 { print $2 }' "$figs/checkpoints.csv" | sort -un | paste -sd' ')
[ "$steps" = "100 400 700" ] || fail "checkpoints.csv training steps '$steps', want '100 400 700'"
tail -4 "$log" | grep -q "checkpoint figure: .*checkpoints.png" ||
  fail "the quick start's last lines do not say where the checkpoint figure is"
echo "quickstart_trained: the quick start ran the three checkpoints as a model axis, drew the checkpoint figure and says the models are not GPT-2"
