#!/usr/bin/env bash
# jobs/fetch-text.sh -- download War and Peace (Project Gutenberg eBook #2600), resumably.
#
#   jobs/fetch-text.sh [--force] [--sha256 HEX] [DIR]
#
# Fetches BASE/cache/epub/2600/pg2600.txt into DIR/war-and-peace.txt.part (resuming one left by
# an interrupted run) and renames it to DIR/war-and-peace.txt (DIR defaults to data, the path
# configs use) only once it is complete and is a Project Gutenberg text: a "*** START OF THE
# PROJECT GUTENBERG EBOOK" line before a "*** END OF THE PROJECT GUTENBERG EBOOK" line.
# Gutenberg regenerates its files now and then, so no checksum is built in; --sha256 pins one.
#   --force    download again even if the file is already there
# Environment: ATTNSWEEP_GUTENBERG_BASE (default https://www.gutenberg.org),
# ATTNSWEEP_FETCH_TRIES (5), ATTNSWEEP_FETCH_RETRY_DELAY (3 s).
# Exit codes: 0 the text is in place, 1 error (one line on stderr), 2 bad usage.
set -uo pipefail
FL_PROG=fetch-text.sh
# shellcheck source=jobs/fetch-lib.sh
. "$(dirname "$0")/fetch-lib.sh"

force=0 pin='' dir=''
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    --force) force=1; shift ;;
    --sha256) [ $# -ge 2 ] || fl_die "--sha256 needs a value" 2
              [[ "$2" =~ ^[0-9a-fA-F]{64}$ ]] || fl_die "--sha256 '$2' is not 64 hex digits" 2
              pin=$(echo "$2" | tr 'A-F' 'a-f'); shift 2 ;;
    -*) fl_die "unknown option '$1' (try --help)" 2 ;;
    *) [ -z "$dir" ] || fl_die "too many arguments ('$1'); usage: fetch-text.sh [DIR]" 2
       dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || dir=data
fl_require
base=${ATTNSWEEP_GUTENBERG_BASE:-https://www.gutenberg.org}
url="${base%/}/cache/epub/2600/pg2600.txt"
final="$dir/war-and-peace.txt" part="$dir/war-and-peace.txt.part"

# "" if FILE is a Gutenberg text, else the reason it is not
not_gutenberg() {
  local start end
  start=$(grep -n -m1 -E '^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG EBOOK' "$1" | cut -d: -f1)
  end=$(grep -n -m1 -E '^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG EBOOK' "$1" | cut -d: -f1)
  if [ -z "$start" ]; then echo "no '*** START OF THE PROJECT GUTENBERG EBOOK' line"
  elif [ -z "$end" ]; then echo "no '*** END OF THE PROJECT GUTENBERG EBOOK' line (truncated?)"
  elif [ "$end" -le "$start" ]; then echo "the END marker comes before the START marker"
  fi
}

mkdir -p "$dir" || fl_die "$dir: cannot create the directory"
[ -w "$dir" ] || fl_die "$dir: not writable"
if [ -f "$final" ] && [ "$force" = 0 ]; then
  why=$(not_gutenberg "$final")
  [ -z "$why" ] || fl_die "$final: present but not a Project Gutenberg text ($why); use --force"
  if [ -n "$pin" ] && [ "$(fl_sha256 "$final")" != "$pin" ]; then
    fl_die "$final: present but its sha256 is not $pin; use --force"
  fi
  echo "$FL_PROG: $final present ($(fl_size "$final") bytes), skipped"
  exit 0
fi
if command -v flock >/dev/null 2>&1; then
  exec 9> "$dir/.fetch-text.lock" || fl_die "$dir/.fetch-text.lock: cannot create"
  flock -n 9 || fl_die "$dir: another fetch-text.sh is working here"
fi

fl_head_meta "$url"
size=''
[[ "${FL_SIZE:-}" =~ ^[0-9]+$ ]] && size=$FL_SIZE
echo "$FL_PROG: ${size:-unknown} bytes from $url"
fl_download "$url" "$part" "$size"
why=$(not_gutenberg "$part")
if [ -n "$why" ]; then
  rm -f "$part"
  fl_die "$url: not a Project Gutenberg text ($why); removed the download"
fi
grep -m1 -E '^\*\*\* ?START OF' "$part" | grep -qi 'war and peace' ||
  echo "$FL_PROG: warning: the START line does not name War and Peace: $(grep -m1 -E '^\*\*\* ?START OF' "$part" | tr -d '\r')" >&2
if [ -n "$pin" ]; then
  got=$(fl_sha256 "$part")
  if [ "$got" != "$pin" ]; then
    rm -f "$part"
    fl_die "$url: sha256 $got is not the pinned $pin; removed the download"
  fi
fi
mv -f "$part" "$final" || fl_die "$final: cannot move the download into place"
echo "$FL_PROG: installed $final ($(fl_size "$final") bytes, sha256 $(fl_sha256 "$final"))"
