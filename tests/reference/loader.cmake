# loader.cmake -- tests of json, safetensors, model loading, sha256 and synth
# beyond the C unit tests (test_json, test_safetensors, test_model, test_sha256).
#
# Fixtures other modules' tests use (FIXTURES_REQUIRED):
#   model_tiny -> ${CMAKE_BINARY_DIR}/models/tiny  (synth --preset tiny --seed 1)
#   model_gpt2 -> ${CMAKE_BINARY_DIR}/models/gpt2  (synth --preset gpt2 --seed 1, ~550 MB)
# Both directories hold config.json + model.safetensors only (no vocab files).

add_test(NAME synth_tiny
         COMMAND attnsweep synth --preset tiny --seed 1 --out ${CMAKE_BINARY_DIR}/models/tiny --force)
set_tests_properties(synth_tiny PROPERTIES FIXTURES_SETUP model_tiny)

add_test(NAME synth_gpt2
         COMMAND attnsweep synth --preset gpt2 --seed 1 --out ${CMAKE_BINARY_DIR}/models/gpt2 --force)
set_tests_properties(synth_gpt2 PROPERTIES FIXTURES_SETUP model_gpt2 TIMEOUT 600)

# attnsweep synth's command line (exit codes, one-line errors, --force)
add_test(NAME loader_cli
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/loader_cli.sh $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/loader_cli.scratch)

# sha256 of a generated file against coreutils
add_test(NAME loader_sha256_vs_coreutils
         COMMAND sh -c "test \"$(\"$0\" --file \"$1\")\" = \"$(sha256sum \"$1\" | cut -d' ' -f1)\""
                 $<TARGET_FILE:test_sha256> ${CMAKE_BINARY_DIR}/models/tiny/model.safetensors)
set_tests_properties(loader_sha256_vs_coreutils PROPERTIES FIXTURES_REQUIRED model_tiny)

# independent numpy reading of the synth files vs the C loader's arena
add_test(NAME loader_check_tiny
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/loader_check.py ${CMAKE_BINARY_DIR}/models/tiny
                 $<TARGET_FILE:test_model> ${CMAKE_BINARY_DIR}/loader_check_tiny.dump)
set_tests_properties(loader_check_tiny PROPERTIES FIXTURES_REQUIRED model_tiny)
add_test(NAME loader_check_gpt2
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/loader_check.py ${CMAKE_BINARY_DIR}/models/gpt2
                 $<TARGET_FILE:test_model> ${CMAKE_BINARY_DIR}/loader_check_gpt2.dump)
set_tests_properties(loader_check_gpt2 PROPERTIES FIXTURES_REQUIRED model_gpt2 TIMEOUT 900)
set_tests_properties(loader_check_gpt2 PROPERTIES LABELS slow)
