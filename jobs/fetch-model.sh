#!/usr/bin/env bash
# jobs/fetch-model.sh -- download a model repository from the Hugging Face hub, resumably and verified.
#
#   jobs/fetch-model.sh [OPTIONS] REPO [DIR]
#
# REPO is the hub's ORG/NAME (EleutherAI/pythia-70m, HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B,
# openai-community/gpt2, ...); DIR defaults to models/NAME. What is fetched, from the hub's file
# list of the revision (BASE/api/models/REPO/revision/REV):
#   config.json; the weights -- model.safetensors, or model.safetensors.index.json and the shards
#   it names, or, when the repository holds only PyTorch pickles, pytorch_model.bin (or its index
#   and shards), converted to safetensors by jobs/pt-to-safetensors.py (needs python3-torch;
#   loads with weights_only, refuses anything but tensors) and then removed; the tokenizer --
#   tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt,
#   whichever the repository has. Each file goes to DIR/FILE.part (resuming a .part left by an
#   interrupted run) and is renamed into place only after its size and checksum match: a HEAD
#   request on BASE/REPO/resolve/REV/FILE answers for LFS files with X-Linked-Size and
#   X-Linked-ETag = the file's sha256, for regular files with Content-Length and ETag = the git
#   blob id. Verified files are recorded in DIR/.fetch.sums (file, size, checksum, commit, date).
# Options:
#   --revision REV     a branch, tag or commit id (default main; ATTNSWEEP_HF_REVISION)
#   --revisions A,B,C  a checkpoint series (e.g. Pythia's step1000,step2000,...): each revision
#                      into DIR/REV/, so that a config's `model = ["DIR/A", "DIR/B", ...]` sweeps it
#   --files "F G ..."  exactly these files, without asking for the file list
#   --expect F:SIZE:SHA256  a size and sha256 known in advance ('-' for unknown); the hub must
#                      agree, else nothing is downloaded (may be repeated)
#   --force            download again even if DIR/FILE is already there
#   --verify           re-hash files already there against the checksums recorded when fetched
# Environment: ATTNSWEEP_HF_BASE (default https://huggingface.co), ATTNSWEEP_HF_TOKEN (sent as a
# bearer token, for gated repositories such as Llama's), ATTNSWEEP_FETCH_TRIES (5),
# ATTNSWEEP_FETCH_RETRY_DELAY (3 s), ATTNSWEEP_FETCH_ALLOW_UNVERIFIED=1 (accept a file with no
# checksum known anywhere, size checked only -- last resort), ATTNSWEEP_PYTHON (the python3 with
# PyTorch for the conversion; default /usr/bin/python3).
# Exit codes: 0 all files in place and verified, 1 error (one line on stderr), 2 bad usage.
set -uo pipefail
FL_PROG=${FL_PROG:-fetch-model.sh}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=jobs/fetch-lib.sh
. "$here/fetch-lib.sh"

usage_line="usage: fetch-model.sh [--revision REV | --revisions A,B,...] [--files LIST] [--expect F:SIZE:SHA256] [--force] [--verify] REPO [DIR]"
force=0 verify=0 repo='' dir='' rev=${ATTNSWEEP_HF_REVISION:-main} revisions='' files='' expects=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    --force) force=1; shift ;;
    --verify) verify=1; shift ;;
    --revision|--revisions|--files|--expect)
      [ $# -ge 2 ] && [ -n "$2" ] || fl_die "$1 needs a value; $usage_line" 2
      case "$1" in
        --revision) rev=$2 ;;
        --revisions) revisions=$2 ;;
        --files) files=$2 ;;
        --expect) [[ "$2" =~ ^[^:]+:([0-9]+|-):([0-9a-f]{64}|-)$ ]] ||
                    fl_die "--expect '$2': write FILE:SIZE:SHA256 (SIZE in bytes or '-', SHA256 as 64 hex digits or '-')" 2
                  expects+=("$2") ;;
      esac
      shift 2 ;;
    -*) fl_die "unknown option '$1' (try --help)" 2 ;;
    *) if [ -z "$repo" ]; then repo=$1
       elif [ -z "$dir" ]; then dir=$1
       else fl_die "too many arguments ('$1'); $usage_line" 2; fi
       shift ;;
  esac
done
[ -n "$repo" ] || fl_die "no repository given; $usage_line" 2
[[ "$repo" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$ ]] ||
  fl_die "'$repo' is not a hub repository name: write ORG/NAME, e.g. EleutherAI/pythia-70m" 2
[ -n "$dir" ] || dir="models/${repo#*/}"
fl_require
base=${ATTNSWEEP_HF_BASE:-https://huggingface.co}
base=${base%/}

expect_get() {  # FILE COLUMN(2=size, 3=sha256) -> value or empty
  local e
  for e in "${expects[@]+"${expects[@]}"}"; do
    IFS=: read -r f s h <<< "$e"
    [ "$f" = "$1" ] || continue
    if [ "$2" = 2 ]; then [ "$s" = - ] || echo "$s"; else [ "$h" = - ] || echo "$h"; fi
    return 0
  done
}

# The hub's file list of one revision (JSON: {"sha": ..., "siblings": [{"rfilename": ...}]}),
# one name per line. python3 reads the JSON: every Debian machine that runs attnsweep has it.
hub_files() {   # REV
  local url="$base/api/models/$repo/revision/$1" body
  body=$(curl "${fl_curl_common[@]}" --silent --fail --max-time 60 "$url" 2>&1) ||
    fl_die "cannot list the files of $repo at revision $1 ($url): ${body##*curl: } (a private or gated repository needs ATTNSWEEP_HF_TOKEN; a wrong revision name gives 404)"
  printf '%s' "$body" | python3 -c '
import json, sys
try:
    doc = json.load(sys.stdin)
    names = [s["rfilename"] for s in doc["siblings"]]
except (ValueError, KeyError, TypeError) as e:
    sys.exit("the file list is not the JSON the hub sends (%s)" % e)
print("\n".join(names))' || fl_die "$url: the file list could not be read"
}

shards_of() {   # INDEX_JSON -> the shard names its weight_map points to, once each, sorted
  python3 -c '
import json, sys
try:
    wm = json.load(open(sys.argv[1]))["weight_map"]
    names = sorted(set(wm.values()))
except (ValueError, KeyError, TypeError, OSError) as e:
    sys.exit("%s: not a weights index (%s)" % (sys.argv[1], e))
for n in names:
    if "/" in n or n.startswith("."):
        sys.exit("%s: shard name %r is not a plain file name" % (sys.argv[1], n))
    print(n)' "$1" || fl_die "$1: cannot read the shard list"
}

# check_part FILE PART GOT WANT_TEXT WANT: PART's checksum GOT ("KIND HEX") must be WANT, else
# the download is removed and the fetch stops naming both
check_part() {
  [ "$3" = "$5" ] && return 0
  rm -f "$2"
  fl_die "$1: $3 does not match $4; removed the download (run again to retry)"
}

# fetch_one DIR REV FILE: install DIR/FILE verified (or skip/verify what is there).
fetch_one() {
  local d=$1 r=$2 f=$3 final="$1/$3" part="$1/$3.part" sums="$1/.fetch.sums"
  local rec want_size kind want got url size sha256 record got_size
  if [ -f "$final" ] && [ "$force" = 0 ]; then
    rec=$(recorded "$d" "$f")
    want_size=$(expect_get "$f" 2)
    [ -n "$want_size" ] || want_size=${rec%% *}
    if [ -n "$want_size" ] && [ "$(fl_size "$final")" != "$want_size" ]; then
      fl_die "$final: $(fl_size "$final") bytes, expected $want_size: remove it or use --force"
    fi
    if [ "$verify" = 1 ]; then
      [ -n "$rec" ] || fl_die "$final: no recorded checksum in $sums to verify against (use --force)"
      kind=${rec#* }; kind=${kind%%:*}; want=${rec#*:}
      [ "$kind" != unverified ] || fl_die "$final: was installed without a checksum; nothing to verify (use --force)"
      if [ "$kind" = sha256 ]; then got=$(fl_sha256 "$final"); else got=$(fl_gitsha1 "$final"); fi
      [ "$got" = "$want" ] || fl_die "$final: $kind $got does not match the recorded $want (corrupted? use --force)"
      echo "$FL_PROG: $f: present, $kind verified"
    else
      echo "$FL_PROG: $f: present ($(fl_size "$final") bytes), skipped"
    fi
    return 0
  fi
  url="$base/$repo/resolve/$r/$f"
  fl_head_meta "$url"
  size=$(expect_get "$f" 2) sha256=$(expect_get "$f" 3)
  if [ -n "$size" ] && [ -n "$FL_SIZE" ] && [ "$size" != "$FL_SIZE" ]; then
    fl_die "$f: the hub reports $FL_SIZE bytes, the expected size is $size (changed upstream? check, then fix the expected value)"
  fi
  if [ -n "$sha256" ] && [ -n "$FL_SHA256" ] && [ "$sha256" != "$FL_SHA256" ]; then
    fl_die "$f: the hub reports sha256 $FL_SHA256, the expected one is $sha256 (changed upstream? check, then fix the expected value)"
  fi
  [ -n "$size" ] || size=$FL_SIZE
  [ -n "$sha256" ] || sha256=$FL_SHA256
  [[ "$size" =~ ^[0-9]+$ ]] || fl_die "$f: no size known (expected: none, hub: '${FL_SIZE}')"
  if [ -z "$sha256" ] && [ -z "$FL_GITSHA1" ] && [ "${ATTNSWEEP_FETCH_ALLOW_UNVERIFIED:-0}" != 1 ]; then
    fl_die "$f: no checksum known (none expected; the hub sent no usable ETag); pass --expect $f:SIZE:SHA256 or set ATTNSWEEP_FETCH_ALLOW_UNVERIFIED=1"
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
    check_part "$f" "$part" "sha256 $(fl_sha256 "$part")" "the expected $sha256" "sha256 $sha256"
    record="sha256:$sha256"
  fi
  if [ -n "$FL_GITSHA1" ]; then
    check_part "$f" "$part" "git blob id $(fl_gitsha1 "$part")" "the hub's $FL_GITSHA1" "git blob id $FL_GITSHA1"
    [ -n "$sha256" ] || record="gitsha1:$FL_GITSHA1"
  fi
  mv -f "$part" "$final" || fl_die "$final: cannot move the verified download into place"
  printf '%s %s %s %s %s\n' "$f" "$size" "$record" "${FL_COMMIT:--}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$sums"
  echo "$FL_PROG: $f: verified (${record%%:*}), installed as $final"
}

# recorded DIR FILE -> "size checksum" recorded at install, or empty (.fetch-gpt2.sums: the
# record of directories fetched before fetch-gpt2.sh became a wrapper of this script)
recorded() {
  local s
  for s in "$1/.fetch.sums" "$1/.fetch-gpt2.sums"; do
    [ -f "$s" ] || continue
    awk -v f="$2" '$1 == f { line = $2 " " $3 } END { if (line) print line }' "$s" | grep . && return 0
  done
  return 0
}

# pick WEIGHTS|TOKENIZER from the hub's list (stdin) -> the files to fetch, in order
pick_files() {
  local list names=() n
  list=$(cat)
  has() { grep -qxF "$1" <<< "$list"; }
  has config.json || fl_die "$repo at $1: no config.json in the repository (is it a model repository?)"
  names+=(config.json)
  if has model.safetensors; then names+=(model.safetensors)
  elif has model.safetensors.index.json; then names+=(model.safetensors.index.json)
  elif has pytorch_model.bin; then names+=(pytorch_model.bin)
  elif has pytorch_model.bin.index.json; then names+=(pytorch_model.bin.index.json)
  else fl_die "$repo at $1: no model.safetensors, safetensors index or pytorch_model.bin in the repository"
  fi
  for n in tokenizer.json tokenizer_config.json special_tokens_map.json vocab.json merges.txt; do
    has "$n" && names+=("$n")
  done
  printf '%s\n' "${names[@]}"
}

# fetch_revision DIR REV: one revision's files into DIR, shards and conversion included.
fetch_revision() {
  local d=$1 r=$2 list raw f idx
  [ -d "$d" ] || made_dir=$d
  mkdir -p "$d" || fl_die "$d: cannot create the directory"
  [ -w "$d" ] || fl_die "$d: not writable"
  if command -v flock >/dev/null 2>&1; then
    exec 9> "$d/.fetch.lock" || fl_die "$d/.fetch.lock: cannot create"
    flock -n 9 || fl_die "$d: another fetch is working here"
    lock_file="$d/.fetch.lock"
  fi
  if [ -n "$files" ]; then list=$(printf '%s\n' $files)
  elif [ -f "$d/config.json" ] && [ "$force" = 0 ] && { [ -f "$d/model.safetensors" ] || [ -f "$d/model.safetensors.index.json" ]; }; then
    list=$(cd "$d" && ls config.json model.safetensors model.safetensors.index.json tokenizer.json \
             tokenizer_config.json special_tokens_map.json vocab.json merges.txt 2>/dev/null)
  else
    raw=$(hub_files "$r") || exit 1
    list=$(pick_files "$r" <<< "$raw") || exit 1
  fi
  for f in $list; do
    case "$f" in
      *.index.json)
        fetch_one "$d" "$r" "$f"
        idx=$(shards_of "$d/$f") || exit 1
        for s in $idx; do
          if [ "$f" = pytorch_model.bin.index.json ] && [ -f "$d/${s%.bin}.safetensors" ] && [ "$force" = 0 ]; then
            echo "$FL_PROG: $s: converted before, skipped"; continue
          fi
          fetch_one "$d" "$r" "$s"
        done ;;
      pytorch_model.bin)
        if [ -f "$d/model.safetensors" ] && [ "$force" = 0 ]; then
          echo "$FL_PROG: $f: converted before (model.safetensors), skipped"; continue
        fi
        fetch_one "$d" "$r" "$f" ;;
      *) fetch_one "$d" "$r" "$f" ;;
    esac
  done
  if ls "$d"/pytorch_model*.bin >/dev/null 2>&1; then
    echo "$FL_PROG: converting the PyTorch weights to safetensors (jobs/pt-to-safetensors.py)"
    before=$(cd "$d" && ls ./*.safetensors 2>/dev/null)
    "$torch_py" "$here/pt-to-safetensors.py" --remove "$d" || exit 1   # its one line says why
    for f in $(cd "$d" && ls ./*.safetensors ./*.safetensors.index.json 2>/dev/null); do
      f=${f#./}
      grep -qxF "./$f" <<< "$before" && continue
      printf '%s %s sha256:%s converted-from-pytorch %s\n' "$f" "$(fl_size "$d/$f")" "$(fl_sha256 "$d/$f")" \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$d/.fetch.sums"
    done
  fi
  if [ -n "${lock_file:-}" ]; then rm -f "$lock_file"; exec 9>&-; lock_file=''; fi
  made_dir=
  echo "$FL_PROG: $repo@$r ready in $d"
}

# the converter needs PyTorch: Debian's python3-torch lives in /usr/bin/python3
torch_py=${ATTNSWEEP_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
fl_auth=()
[ -z "${ATTNSWEEP_HF_TOKEN:-}" ] || fl_auth=(--header "Authorization: Bearer $ATTNSWEEP_HF_TOKEN")
fl_curl_common+=("${fl_auth[@]+"${fl_auth[@]}"}")
lock_file='' made_dir=''
# a failed or interrupted fetch leaves no lock file behind, nor a folder it created and left
# empty (the .part files stay, to resume)
trap '[ -z "$lock_file" ] || rm -f "$lock_file"; [ -z "$made_dir" ] || rmdir "$made_dir" 2>/dev/null' EXIT
if [ -n "$revisions" ]; then
  IFS=, read -r -a revs <<< "$revisions"
  for r in "${revs[@]}"; do
    [[ "$r" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fl_die "--revisions: '$r' is not a revision name (letters, digits, . _ -)" 2
  done
  for r in "${revs[@]}"; do fetch_revision "$dir/$r" "$r"; done
  echo "$FL_PROG: ${#revs[@]} revisions of $repo in $dir/{$(IFS=,; echo "${revs[*]}")}"
else
  fetch_revision "$dir" "$rev"
fi
