# shellcheck shell=bash
# jobs/fetch-lib.sh -- resumable, verified downloads; sourced by jobs/fetch-gpt2.sh and
# jobs/fetch-text.sh (not a command). Needs curl, sha256sum, sha1sum, stat (coreutils).
#
# Callers set FL_PROG (their name, for messages) and then use:
#   fl_die MSG [CODE]            one line "PROG: MSG" on stderr, exit CODE (default 1)
#   fl_head_meta URL             HEAD request without following redirects, hop by hop (at most 5):
#                                sets FL_SIZE, FL_SHA256 (64 hex), FL_GITSHA1 (40 hex), FL_COMMIT
#                                from the Hugging Face headers X-Linked-Size / X-Linked-ETag
#                                (LFS files, on the redirect) or Content-Length / ETag (regular
#                                files, whose ETag is the git blob id); empty when absent
#   fl_download URL PART [SIZE]  download URL into PART, resuming what PART already holds
#                                (curl -C -), up to ATTNSWEEP_FETCH_TRIES attempts (default 5,
#                                ATTNSWEEP_FETCH_RETRY_DELAY s apart, default 3); with SIZE it stops
#                                when PART has exactly SIZE bytes and restarts a PART that is longer
#   fl_sha256 FILE, fl_gitsha1 FILE   checksums (git blob id = sha1 of "blob SIZE\0" + content)
#   fl_size FILE                 size in bytes (0 if missing)
# Nothing here ever writes a final file name: callers verify PART and then mv it into place.

fl_die() { echo "$FL_PROG: $1" >&2; exit "${2:-1}"; }

fl_require() {
  local t
  for t in curl sha256sum sha1sum stat; do
    command -v "$t" >/dev/null 2>&1 || fl_die "'$t' is needed but not installed"
  done
}

fl_size() { stat -c %s "$1" 2>/dev/null || echo 0; }
fl_sha256() { sha256sum "$1" | cut -d' ' -f1; }
fl_gitsha1() { { printf 'blob %s\0' "$(fl_size "$1")"; cat "$1"; } | sha1sum | cut -d' ' -f1; }

# parse a response's header text ($1) into FL_STATUS and FL_HDR[lower-case name] (bash only:
# this runs once per file and forks are slow on a busy login node)
declare -A FL_HDR
fl_parse_headers() {
  local line name value first=1
  FL_HDR=() FL_STATUS=''
  while IFS= read -r line; do
    line=${line%$'\r'}
    if [ "$first" = 1 ]; then first=0; read -r _ FL_STATUS _ <<< "$line"; continue; fi
    [[ "$line" == *:* ]] || continue
    name=${line%%:*} value=${line#*:}
    value="${value#"${value%%[![:space:]]*}"}"
    value="${value%"${value##*[![:space:]]}"}"
    FL_HDR[${name,,}]=$value
  done <<< "$1"
}

# strip W/ and quotes from an ETag
fl_etag() { local e=${1#W/}; e=${e//\"/}; echo "$e"; }

fl_curl_common=(--show-error --connect-timeout 30 --user-agent "attnsweep-fetch/1")

# shellcheck disable=SC2034  # FL_* are read by the callers
fl_head_meta() {
  local url=$1 headers status location etag size linked
  FL_SIZE='' FL_SHA256='' FL_GITSHA1='' FL_COMMIT=''
  for _ in 1 2 3 4 5; do
    headers=$(curl "${fl_curl_common[@]}" --silent --max-time 60 --head "$url" 2>&1) ||
      fl_die "cannot reach $url: $(printf '%s' "$headers" | tail -n1)"
    fl_parse_headers "$headers"
    status=$FL_STATUS
    [ -n "$FL_COMMIT" ] || FL_COMMIT=${FL_HDR[x-repo-commit]:-}
    linked=${FL_HDR[x-linked-size]:-}
    if [ -n "$linked" ]; then          # an LFS file: the hub names its sha256 on the redirect
      FL_SIZE=$linked
      etag=$(fl_etag "${FL_HDR[x-linked-etag]:-}")
      [[ "$etag" =~ ^[0-9a-f]{64}$ ]] && FL_SHA256=$etag
      return 0
    fi
    case "$status" in
      2??)
        FL_SIZE=${FL_HDR[content-length]:-}
        etag=$(fl_etag "${FL_HDR[etag]:-}")
        if [[ "$etag" =~ ^[0-9a-f]{64}$ ]]; then FL_SHA256=$etag
        elif [[ "$etag" =~ ^[0-9a-f]{40}$ ]]; then FL_GITSHA1=$etag
        fi
        return 0 ;;
      3??)
        location=${FL_HDR[location]:-}
        [ -n "$location" ] || fl_die "$url: redirect ($status) without a Location"
        case "$location" in
          http://*|https://*) url=$location ;;
          /*) [[ "$url" =~ ^(https?://[^/]+) ]] && url="${BASH_REMATCH[1]}$location" ;;
          *) url="${url%/*}/$location" ;;
        esac ;;
      404) fl_die "$url: not found (404)" ;;
      *) fl_die "$url: HTTP status '${status:-none}' to a HEAD request" ;;
    esac
  done
  fl_die "$url: more than 5 redirects"
}

fl_download() {
  local url=$1 part=$2 size=${3:-} tries=${ATTNSWEEP_FETCH_TRIES:-5}
  local delay=${ATTNSWEEP_FETCH_RETRY_DELAY:-3} attempt=0 have rc out
  local get=(curl "${fl_curl_common[@]}" --fail --location --continue-at - --speed-limit 1024
             --speed-time 60 --output "$part" "$url")
  while :; do
    have=$(fl_size "$part")
    if [ -n "$size" ]; then
      [ "$have" -lt "$size" ] || { [ "$have" -eq "$size" ] && return 0; }
      if [ "$have" -gt "$size" ]; then
        echo "$FL_PROG: $part holds $have bytes, more than the expected $size: starting over" >&2
        rm -f "$part"; have=0
      fi
    fi
    attempt=$((attempt + 1))
    [ "$have" = 0 ] || echo "$FL_PROG: resuming $(basename "$part" .part) at byte $have" >&2
    if [ -t 2 ]; then                  # a person is watching: show curl's progress bar
      "${get[@]}" --progress-bar; rc=$?; out="curl exit code $rc"
    else
      out=$("${get[@]}" --silent 2>&1); rc=$?
    fi
    if [ "$rc" = 0 ]; then
      [ -z "$size" ] && return 0
      [ "$(fl_size "$part")" -eq "$size" ] && return 0
      out="transfer ended at $(fl_size "$part") of $size bytes"
    elif [ "$rc" = 33 ]; then          # the server ignores Range: only a fresh start can work
      echo "$FL_PROG: $url does not support resuming; starting over" >&2
      rm -f "$part"
    elif [ "$rc" = 22 ]; then          # HTTP error status: retrying will not help
      fl_die "$url: ${out##*curl: }"
    fi
    if [ "$attempt" -ge "$tries" ]; then
      fl_die "$url: download incomplete after $attempt attempt(s) ($(fl_size "$part") bytes kept in $part; run again to resume): ${out##*curl: }"
    fi
    echo "$FL_PROG: attempt $attempt failed (${out##*curl: }); retrying in ${delay} s" >&2
    sleep "$delay"
  done
}
