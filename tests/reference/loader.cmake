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

# F16 and BF16 weights against torch (tests/reference/dtypes_check.py): all 65536
# patterns of each widened, float32 -> 16-bit rounding, synth --dtype files, and each
# 16-bit file against torch's F32 copy of it: identical arenas and identical dumps.
add_test(NAME dtypes_vs_torch
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/dtypes_check.py
                 $<TARGET_FILE:attnsweep> $<TARGET_FILE:test_model> $<TARGET_FILE:test_model_dtypes>
                 ${CMAKE_BINARY_DIR}/dtypes_check.scratch)

# 16-bit synthetic models for the forward tests (forward.cmake):
#   model_tiny-f16, model_tiny-bf16 -> models/tiny-f16, models/tiny-bf16 (seed 1)
#   model_gpt2-medium -> models/gpt2-medium (BF16, seed 1, 760 MB; CI runs it)
# gpt2-large and gpt2-xl (BF16: 1.6 and 3.2 GB files, 3.1 and 6.2 GB float32 arenas)
# only with -DAS_BIG_MODEL_TESTS=ON (label bigmodel), and their directories are deleted
# after their tests (FIXTURES_CLEANUP).
foreach(dt f16 bf16)
  add_test(NAME synth_tiny_${dt}
           COMMAND attnsweep synth --preset tiny --dtype ${dt} --seed 1 --vocab none --force
                   --out ${CMAKE_BINARY_DIR}/models/tiny-${dt})
  set_tests_properties(synth_tiny_${dt} PROPERTIES FIXTURES_SETUP model_tiny-${dt})
endforeach()
add_test(NAME synth_gpt2-medium
         COMMAND attnsweep synth --preset gpt2-medium --dtype bf16 --seed 1 --vocab none --force
                 --out ${CMAKE_BINARY_DIR}/models/gpt2-medium)
set_tests_properties(synth_gpt2-medium PROPERTIES FIXTURES_SETUP model_gpt2-medium TIMEOUT 600)
option(AS_BIG_MODEL_TESTS "register the gpt2-large and gpt2-xl tests (~7 GB of memory, 5 GB of disk)" OFF)
if(AS_BIG_MODEL_TESTS)
  foreach(p gpt2-large gpt2-xl)
    add_test(NAME synth_${p}
             COMMAND attnsweep synth --preset ${p} --dtype bf16 --seed 1 --vocab none --force
                     --out ${CMAKE_BINARY_DIR}/models/${p})
    add_test(NAME rm_${p} COMMAND ${CMAKE_COMMAND} -E rm -rf ${CMAKE_BINARY_DIR}/models/${p})
    set_tests_properties(synth_${p} PROPERTIES FIXTURES_SETUP model_${p} TIMEOUT 900
                         LABELS "bigmodel;slow")
    set_tests_properties(rm_${p} PROPERTIES FIXTURES_CLEANUP model_${p} LABELS "bigmodel;slow")
  endforeach()
  # one at a time: together they would hold 10 GB
  set_tests_properties(synth_gpt2-xl PROPERTIES DEPENDS rm_gpt2-large)
endif()
