#!/usr/bin/env bash
# tests/integration/quickstart_trained.sh -- the README's quick start on the small model
# trained on War and Peace (learned attention), from the test assets that CI lays beside the
# clone as ../shared. Its headline table must say the model is not GPT-2. Without the assets
# it says that it skipped. Run from the repository root (.ci/run does).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=../shared/models/wp-gpt2-4x3 text=../shared/data/war-and-peace.txt
if [ ! -d "$model" ] || [ ! -f "$text" ]; then
  echo "quickstart_trained: SKIPPED: $model and $text are not beside this clone"
  exit 0
fi
bash jobs/quickstart.sh --offline --model "$model" --text "$text"
test -s results/quickstart-wp-gpt2-4x3-figures/summary.csv
grep -q "not GPT-2" results/quickstart-wp-gpt2-4x3-figures/summary.csv
echo "quickstart_trained: the quick start ran on the trained model and says it is not GPT-2"
