#!/usr/bin/env bash
# tests/jobs/test_fetch.sh -- jobs/fetch-gpt2.sh and jobs/fetch-text.sh against a local range-capable
# HTTP server on 127.0.0.1 (tests/jobs/range_server.py) serving synthetic files; no other host
# is contacted. Covers: resume of an interrupted download across runs and within a run, a
# corrupted transfer (checksum mismatch: error, nothing installed), a server without Range
# support, the built-in table disagreeing with the hub, 404, re-runs and --verify, the Gutenberg
# marker check, the command-line errors, no lock file or empty folder left by a failed download,
# and that what the fetchers write (data/, models/) is ignored by git. Expected checksums are computed here with
# sha256sum/sha1sum, independently of the scripts.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
FETCH_GPT2="$REPO/jobs/fetch-gpt2.sh"
FETCH_TEXT="$REPO/jobs/fetch-text.sh"
SCRATCH=$(mktemp -d /tmp/attnsweep-fetchtest.XXXXXX) || { echo "FAIL: mktemp" >&2; exit 1; }
server_pid=''
cleanup() {
  local rc=$?
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null
  if [ "$rc" != 0 ] && [ -f "$SCRATCH/server.log" ]; then
    echo "----- server requests -----" >&2; tail -n 40 "$SCRATCH/server.log" >&2
  fi
  [ "${ATTNSWEEP_KEEP_SCRATCH:-0}" = 1 ] && echo "kept $SCRATCH" >&2 || rm -rf "$SCRATCH"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "-- $*"; }
cd "$SCRATCH" || fail "cd $SCRATCH"

# never through a proxy: everything is on 127.0.0.1
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
export ATTNSWEEP_FETCH_RETRY_DELAY=0

# --- synthetic hub content: a few MB of random "weights", small JSON/text files ---
make_model() {   # NAME SAFETENSORS_BYTES
  local d="root/openai-community/$1"
  mkdir -p "$d"
  head -c "$2" /dev/urandom > "$d/model.safetensors"
  printf '{"model_type": "gpt2", "name": "%s"}\n' "$1" > "$d/config.json"
  printf '{"!": 0, "\\"": 1, "synthetic-%s": 2}\n' "$1" > "$d/vocab.json"
  printf '#version: 0.2\n\xc4\xa0 t\nh e\n' > "$d/merges.txt"
}
make_model gpt2-medium 3000000
make_model gpt2-large 1500000
make_model gpt2 1000000            # sizes differ from the real gpt2: the table must object
# a Gutenberg-shaped text with CRLF lines, and an HTML page where a text should be
mkdir -p root/gut/cache/epub/2600 root/bad/cache/epub/2600
{
  printf 'The Project Gutenberg eBook of War and Peace\r\n\r\n'
  printf '*** START OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\r\n'
  for i in $(seq 1 4000); do printf 'Chapter line %d: "Well, Prince, so Genoa and Lucca are now just family estates."\r\n' "$i"; done
  printf '*** END OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\r\n'
} > root/gut/cache/epub/2600/pg2600.txt
printf '<html><body>Too many requests</body></html>\n' > root/bad/cache/epub/2600/pg2600.txt

/usr/bin/python3 "$REPO/tests/jobs/range_server.py" root port server.log &
server_pid=$!
for _ in $(seq 1 100); do [ -s port ] && break; sleep 0.1; done
[ -s port ] || fail "range_server.py did not start within 10 s"
port=$(cat port)
BASE="http://127.0.0.1:$port"
export ATTNSWEEP_HF_BASE="$BASE"
ctl() { curl -sf --noproxy '*' "$BASE/_ctl?$1" >/dev/null || fail "server control '$1' failed"; }
requests_since() { tail -n +"$(( $1 + 1 ))" server.log; }
log_lines() { wc -l < server.log 2>/dev/null || echo 0; }
same() { cmp -s "$1" "$2" || fail "$1 differs from the served $2"; }
expect_fail() {   # WANT_RC PATTERN CMD... : CMD must exit WANT_RC with one stderr line matching PATTERN
  local want=$1 pat=$2; shift 2
  "$@" > out.txt 2> err.txt; local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want (stderr: $(cat err.txt))"
  grep -qE "$pat" err.txt || fail "'$*': stderr does not match /$pat/: $(cat err.txt)"
  grep -E "$pat" err.txt | head -n1 | grep -q . || true
}

# --- command line ---
"$FETCH_GPT2" --help | grep -q 'X-Linked-ETag' || fail "fetch-gpt2.sh --help does not explain the checksums"
"$FETCH_TEXT" --help | grep -q 'START OF THE' || fail "fetch-text.sh --help does not explain the check"
expect_fail 2 "unknown model 'gpt3'" "$FETCH_GPT2" gpt3 m
expect_fail 2 "unknown option '--bogus'" "$FETCH_GPT2" --bogus
expect_fail 2 "too many arguments" "$FETCH_GPT2" gpt2 a b
expect_fail 2 "not 64 hex digits" "$FETCH_TEXT" --sha256 abc
[ "$(wc -l < err.txt)" = 1 ] || fail "usage error is not one line: $(cat err.txt)"
note "command-line errors: exit 2, one line"

# --- gpt2-medium: interrupted download, resumed by a second run ---
src=root/openai-community/gpt2-medium
ctl "op=drop&path=gpt2-medium/model.safetensors&after=1234567"
expect_fail 1 "download incomplete .*run again to resume" env ATTNSWEEP_FETCH_TRIES=1 "$FETCH_GPT2" gpt2-medium m1
[ ! -e m1/model.safetensors ] || fail "a half download was installed under the final name"
[ "$(stat -c %s m1/model.safetensors.part)" = 1234567 ] || fail "the .part does not hold the 1234567 bytes received"
for f in config.json vocab.json merges.txt; do same "m1/$f" "$src/$f"; done
mark=$(log_lines)
"$FETCH_GPT2" gpt2-medium m1 > out.txt 2> err.txt || fail "second run did not finish: $(cat err.txt)"
requests_since "$mark" | grep -q 'GET /cdn/openai-community/gpt2-medium/model.safetensors bytes=1234567- 206' ||
  fail "second run did not resume from byte 1234567: $(requests_since "$mark")"
requests_since "$mark" | grep -q 'GET .*config.json' && fail "second run downloaded config.json again"
same m1/model.safetensors "$src/model.safetensors"
[ ! -e m1/model.safetensors.part ] || fail "a .part was left behind"
grep -q "^model.safetensors 3000000 sha256:$(sha256sum "$src/model.safetensors" | cut -d' ' -f1) " m1/.fetch.sums ||
  fail "the recorded sha256 is not the file's"
note "interrupted at 1234567 bytes, resumed by the next run with Range: bytes=1234567-, verified"

# --- interrupted twice within one run: retried and resumed without giving up ---
ctl "op=drop&path=gpt2-medium/model.safetensors&after=500000&times=2"
mark=$(log_lines)
ATTNSWEEP_FETCH_TRIES=3 "$FETCH_GPT2" gpt2-medium m2 > out.txt 2> err.txt || fail "run with retries failed: $(cat err.txt)"
same m2/model.safetensors "$src/model.safetensors"
[ "$(requests_since "$mark" | grep -c 'GET /cdn/.*gpt2-medium/model.safetensors')" = 3 ] ||
  fail "expected 3 GETs of the model (2 dropped): $(requests_since "$mark")"
requests_since "$mark" | grep -q 'bytes=1000000- 206' || fail "the third attempt did not resume at 1000000"
note "two drops in one run: 3 attempts, resumed each time"

# --- corrupted transfers: checksum mismatch, nothing installed, next run is clean ---
src=root/openai-community/gpt2-large
ctl "op=corrupt&path=gpt2-large/model.safetensors"
expect_fail 1 "model.safetensors: sha256 [0-9a-f]{64} does not match" "$FETCH_GPT2" gpt2-large m3
[ ! -e m3/model.safetensors ] && [ ! -e m3/model.safetensors.part ] || fail "a corrupted model was kept"
ctl "op=corrupt&path=gpt2-large/resolve/main/config.json"
expect_fail 1 "config.json: git blob id [0-9a-f]{40} does not match" "$FETCH_GPT2" gpt2-large m4
[ ! -e m4/config.json ] && [ ! -e m4/config.json.part ] || fail "a corrupted config.json was kept"
"$FETCH_GPT2" gpt2-large m3 > out.txt 2> err.txt || fail "clean rerun after corruption failed: $(cat err.txt)"
for f in config.json vocab.json merges.txt model.safetensors; do same "m3/$f" "$src/$f"; done
note "corrupted model and config rejected (sha256, git blob id); clean rerun installs"

# --- a server that ignores Range while a .part exists: starts over, still correct ---
mkdir -p m5 && head -c 400000 "$src/model.safetensors" > m5/model.safetensors.part
ctl "op=norange&path=gpt2-large/model.safetensors"
"$FETCH_GPT2" gpt2-large m5 > out.txt 2> err.txt || fail "no-Range server: $(cat err.txt)"
same m5/model.safetensors "$src/model.safetensors"
note "server without Range support: restarted from scratch, verified"

# --- re-runs: nothing fetched; --verify re-hashes; a damaged file is caught offline ---
mark=$(log_lines)
"$FETCH_GPT2" gpt2-large m3 > out.txt 2>&1 || fail "rerun on a complete dir failed: $(cat out.txt)"
[ "$(log_lines)" = "$mark" ] || fail "rerun on a complete dir contacted the server"
"$FETCH_GPT2" --verify gpt2-large m3 > out.txt 2>&1 || fail "--verify failed on good files: $(cat out.txt)"
printf 'X' | dd of=m3/model.safetensors bs=1 seek=1000 conv=notrunc status=none
expect_fail 1 "model.safetensors: sha256 .* does not match the recorded" "$FETCH_GPT2" --verify gpt2-large m3
note "re-run is offline; --verify catches a damaged file"

# --- the table must agree with the hub (synthetic gpt2 files have the wrong sizes) ---
mark=$(log_lines)
expect_fail 1 "vocab.json: the hub reports [0-9]+ bytes, the expected size is 1042301" "$FETCH_GPT2" gpt2 m6
[ ! -e m6/vocab.json ] && [ ! -e m6/vocab.json.part ] || fail "vocab.json written despite the table mismatch"
requests_since "$mark" | grep -q 'GET .*vocab.json' && fail "vocab.json was downloaded despite the table mismatch"
note "table vs hub disagreement stops before downloading"

# --- what the fetchers (and runs) write is never offered to git ---
if git -C "$REPO" rev-parse --git-dir > /dev/null 2>&1; then
  for p in data/war-and-peace.txt models/gpt2/model.safetensors results/quickstart.h5 build/attnsweep; do
    git -C "$REPO" check-ignore -q "$p" || fail "$p is not ignored by git (.gitignore)"
  done
  note "data/, models/, results/, build/ are ignored by git"
fi

# --- a model the server does not have ---
expect_fail 1 "not found \(404\)" "$FETCH_GPT2" gpt2-xl m7
[ ! -e m7 ] || fail "a failed download left m7 behind: $(ls -A m7)"
[ ! -e m1/.fetch.lock ] || fail "an interrupted download left its .fetch.lock"
note "404: one-line error, no folder or lock file left"

# --- War and Peace ---
txt=root/gut/cache/epub/2600/pg2600.txt
size=$(stat -c %s "$txt")
ctl "op=drop&path=gut/cache/epub/2600/pg2600.txt&after=100000"
expect_fail 1 "download incomplete" env ATTNSWEEP_FETCH_TRIES=1 ATTNSWEEP_GUTENBERG_BASE="$BASE/gut" "$FETCH_TEXT" t1
[ ! -e t1/war-and-peace.txt ] || fail "a half text was installed"
[ "$(stat -c %s t1/war-and-peace.txt.part)" = 100000 ] || fail "text .part does not hold 100000 bytes"
mark=$(log_lines)
ATTNSWEEP_GUTENBERG_BASE="$BASE/gut" "$FETCH_TEXT" t1 > out.txt 2> err.txt || fail "text resume failed: $(cat err.txt)"
requests_since "$mark" | grep -q 'bytes=100000- 206' || fail "text download did not resume"
same t1/war-and-peace.txt "$txt"
[ ! -e t1/war-and-peace.txt.part ] || fail "text .part left behind"
ATTNSWEEP_GUTENBERG_BASE="$BASE/gut" "$FETCH_TEXT" t1 > out.txt 2>&1 && grep -q skipped out.txt ||
  fail "rerun did not skip the present text"
expect_fail 1 "not a Project Gutenberg text \(no '\*\*\* START" env ATTNSWEEP_GUTENBERG_BASE="$BASE/bad" "$FETCH_TEXT" t2
[ ! -e t2/war-and-peace.txt ] && [ ! -e t2/war-and-peace.txt.part ] || fail "a non-Gutenberg page was kept"
expect_fail 1 "sha256 [0-9a-f]{64} is not the pinned" env ATTNSWEEP_GUTENBERG_BASE="$BASE/gut" "$FETCH_TEXT" --sha256 "$(printf '0%.0s' $(seq 64))" t3
[ ! -e t3/war-and-peace.txt ] || fail "text installed despite a wrong pinned sha256"
ATTNSWEEP_GUTENBERG_BASE="$BASE/gut" "$FETCH_TEXT" --sha256 "$(sha256sum "$txt" | cut -d' ' -f1)" t3 > out.txt 2>&1 ||
  fail "text with the right pinned sha256 failed: $(cat out.txt)"
note "text: resumed at 100000 of $size bytes; HTML page and wrong sha256 rejected"

# nothing but 127.0.0.1 was asked: every request is in the server log
echo "PASS test_fetch ($(log_lines) requests, all to 127.0.0.1:$port)"
