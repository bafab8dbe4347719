#!/usr/bin/env bash
# tests/integration/tokenizer_cli.sh ATTNSWEEP GPT2_DIR -- `attnsweep tokenize` end to end (real GPT-2 files).
set -uo pipefail
bin=$1 dir=$2 pass=0 fail=0
ok() { if [ "$1" = "$2" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $3: got [$1] want [$2]" >&2; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok "$(printf 'Hello my name is' | "$bin" tokenize --model "$dir")" "15496 616 1438 318" "stream"
printf 'Hello my name is\n\nHello\n' > "$tmp/in.txt"
ok "$("$bin" tokenize --model "$dir" --lines "$tmp/in.txt" | tr '\n' '|')" "15496 616 1438 318||15496|" "lines"
ok "$(echo '15496 616 1438 318' | "$bin" tokenize --model "$dir" --decode)" "Hello my name is" "decode"
ok "$(printf '15496 616\n1438 318\n' | "$bin" tokenize --model "$dir" --decode --lines | tr '\n' '|')" "Hello my| name is|" "decode lines"
printf 'caf\xe9 \xff\x00 <|endoftext|> 日本 👍🏽\n' > "$tmp/raw.bin"
"$bin" tokenize --model "$dir" "$tmp/raw.bin" > "$tmp/ids.txt"
"$bin" tokenize --model "$dir" --decode "$tmp/ids.txt" > "$tmp/back.bin"
ok "$(cmp -s "$tmp/raw.bin" "$tmp/back.bin" && echo same)" "same" "round trip bytes"
ok "$(grep -c 50256 "$tmp/ids.txt")" "0" "endoftext is plain text"
: > "$tmp/empty"; ok "$("$bin" tokenize --model "$dir" "$tmp/empty")" "" "empty input"
"$bin" tokenize --help >/dev/null; ok "$?" "0" "--help"
err=$("$bin" tokenize --model "$dir" --bogus 2>&1); rc=$?; ok "$rc" "2" "bad option exit"; ok "$(echo "$err" | wc -l)" "1" "bad option one line"
err=$(echo '15496 99999' | "$bin" tokenize --model "$dir" --decode 2>&1); rc=$?; ok "$rc" "1" "bad id exit"
ok "$(echo "$err" | grep -c 'id 2: 99999 is not in the vocabulary')" "1" "bad id message: $err"
ok "$(echo '15496 99999' | "$bin" tokenize --model "$dir" --decode 2>/dev/null)" "" "bad id leaves no partial text"
err=$(echo 'x' | "$bin" tokenize --model "$tmp" 2>&1); ok "$?" "1" "no vocab exit"; ok "$(echo "$err" | wc -l)" "1" "no vocab one line"
err=$("$bin" tokenize --model "$dir" "$tmp/missing" 2>&1); ok "$?" "1" "missing file exit"
echo "tokenizer_cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
