#!/usr/bin/env bash
# tests/reliability/fuzz/build.sh [OUTDIR] -- build the libFuzzer harnesses with clang,
# ASan and UBSan into OUTDIR (default: <repo>/build-fuzz). Compiles only the
# src/*.c the harnesses need (no MPI, HDF5 or BLAS), so it is quick and
# independent of the CMake build. Needs clang + libclang-rt-14-dev (or newer).
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
out=${1:-$here/build-fuzz}
cc=${CC_FUZZ:-clang}
command -v "$cc" >/dev/null || { echo "fuzz/build.sh: $cc not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$out/obj"
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
flags=(-g -O1 -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
       -I"$here/include/core" -I"$here/include/model" -I"$here/include/text" -I"$here/include/config" -I"$here/include/sweep"
       -I"$here/include/kernels"
       -I"$here/tests/reliability/fuzz" -I"$here/src/model")
lib_sources=(core/errors core/fileio core/json model/safetensors core/sha256 model/model
             model/family_gpt2 model/family_neox model/family_llama model/shards
             config/config config/config_include config/config_axes config/config_text config/config_diff config/config_models
             text/tokenizer text/pretokenize text/install text/unicode_tables text/hf_load text/hf_encode text/nfc
             text/nfc_tables)
objs=()
for s in "${lib_sources[@]}"; do
  "$cc" "${flags[@]}" "${san[@]}" -fsanitize=fuzzer-no-link -c "$here/src/$s.c" -o "$out/obj/${s#*/}.o"
  objs+=("$out/obj/${s#*/}.o")
done
for h in safetensors model_config tokenizer hf_tokenizer config; do
  "$cc" "${flags[@]}" "${san[@]}" -fsanitize=fuzzer "$here/tests/reliability/fuzz/fuzz_$h.c" "${objs[@]}" \
    -lconfig -lm -o "$out/fuzz_$h"
done
echo "fuzz/build.sh: built $(ls "$out"/fuzz_* | tr '\n' ' ')"
