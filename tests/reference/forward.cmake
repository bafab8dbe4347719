# forward.cmake -- the GPT-2 forward pass against the independent PyTorch
# reference (tests/reference/ref_gpt2.py), through `attnsweep dump`, plus the dump
# command's argument checks. The C unit tests test_gpt2_kernels and
# test_gpt2_forward are registered by the CMakeLists glob.
#
# Tolerances (checked by ref_gpt2.py compare): pattern 1e-5 absolute; q, k, v
# and scores (visible part) 1e-4 * max|ref| of each layer's tensor;
# logits_last 1e-3 absolute. The gpt2-preset case at L = 1024 is labelled
# `slow` (30 s on a quiet machine, 2 min under load; `ctest -LE slow` skips
# it) and captures layers 0, 6, 11
# only -- the logits still check every layer.

set(AS_FWD_DIR ${CMAKE_BINARY_DIR}/forward-tests)
set(AS_FWD_REF ${CMAKE_SOURCE_DIR}/tests/reference/ref_gpt2.py)
set(AS_FWD_TOKENS ${AS_FWD_DIR}/tokens.txt)

add_test(NAME forward_tokens
         COMMAND ${AS_PYTHON} ${AS_FWD_REF} make-tokens --model ${CMAKE_BINARY_DIR}/models/tiny
                 --count 1100 --seed 7 --out ${AS_FWD_TOKENS})
add_test(NAME forward_tokens_bin
         COMMAND ${AS_PYTHON} ${AS_FWD_REF} make-tokens --model ${CMAKE_BINARY_DIR}/models/tiny
                 --count 200 --seed 8 --out ${AS_FWD_DIR}/tokens.bin)
set_tests_properties(forward_tokens forward_tokens_bin PROPERTIES FIXTURES_SETUP forward_tokens
                     FIXTURES_REQUIRED model_tiny)

# as_forward_ref_test(NAME PRESET L START LAYERS TOKENS): dump window
# [START, START+L) of TOKENS with model PRESET, recompute it in PyTorch, compare.
function(as_forward_ref_test name preset L start layers tokens)
  set(out ${AS_FWD_DIR}/${name}.h5)
  add_test(NAME ${name}
           COMMAND /bin/sh -c "\"$1\" dump --model \"$2\" --tokens \"$3\" --length $4 --window-start $5 --layers $6 --out \"$7\" && \"$8\" \"$9\" compare --model \"$2\" --dump \"$7\" --tokens \"$3\" --window-start $5 && rm -f \"$7\""
                   sh $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/${preset} ${tokens}
                   ${L} ${start} ${layers} ${out} ${AS_PYTHON} ${AS_FWD_REF})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "model_${preset};forward_tokens"
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endfunction()

as_forward_ref_test(forward_ref_tiny_L1 tiny 1 0 all ${AS_FWD_TOKENS})
as_forward_ref_test(forward_ref_tiny_L7 tiny 7 13 all ${AS_FWD_TOKENS})
as_forward_ref_test(forward_ref_tiny_L128 tiny 128 40 all ${AS_FWD_TOKENS})
# raw little-endian uint16 token file, one layer
as_forward_ref_test(forward_ref_tiny_L7_bin tiny 7 100 1 ${AS_FWD_DIR}/tokens.bin)
as_forward_ref_test(forward_ref_gpt2_L1024 gpt2 1024 50 0,6,11 ${AS_FWD_TOKENS})
set_tests_properties(forward_ref_gpt2_L1024 PROPERTIES LABELS slow TIMEOUT 900)
# 16-bit weights (loader.cmake's synth_tiny_f16/bf16, synth_gpt2-medium: BF16), widened
# to float32 by both sides; the reference widens with numpy (F16) and torch (BF16).
as_forward_ref_test(forward_ref_tiny-f16_L128 tiny-f16 128 40 all ${AS_FWD_TOKENS})
as_forward_ref_test(forward_ref_tiny-bf16_L128 tiny-bf16 128 40 all ${AS_FWD_TOKENS})
as_forward_ref_test(forward_ref_gpt2-medium_L128 gpt2-medium 128 50 0,11,23 ${AS_FWD_TOKENS})
set_tests_properties(forward_ref_gpt2-medium_L128 PROPERTIES TIMEOUT 600)
if(AS_BIG_MODEL_TESTS)
  as_forward_ref_test(forward_ref_gpt2-large_L64 gpt2-large 64 50 0,17,35 ${AS_FWD_TOKENS})
  as_forward_ref_test(forward_ref_gpt2-xl_L32 gpt2-xl 32 50 0,24,47 ${AS_FWD_TOKENS})
  set_tests_properties(forward_ref_gpt2-large_L64 forward_ref_gpt2-xl_L32 PROPERTIES
                       LABELS "bigmodel;slow" TIMEOUT 900 RUN_SERIAL ON)
endif()

# dump's argument checks: exit code 2 (usage) or 1 (error) and a one-line
# message naming the problem. Each case: expected code, regex, arguments.
function(as_dump_cli_test name code regex)
  add_test(NAME dump_cli_${name}
           COMMAND /bin/sh -c "\"$0\" dump \"$@\" 2>&1; rc=$?; test $rc -eq ${code} || { echo \"exit $rc, want ${code}\"; exit 1; }"
                   $<TARGET_FILE:attnsweep> ${ARGN})
  set_tests_properties(dump_cli_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}"
                       FAIL_REGULAR_EXPRESSION "exit [0-9]+, want"
                       FIXTURES_REQUIRED "model_tiny;forward_tokens")
endfunction()

set(M --model ${CMAKE_BINARY_DIR}/models/tiny)
set(O --out ${AS_FWD_DIR}/cli.h5)
as_dump_cli_test(help 0 "usage: attnsweep dump" --help)
as_dump_cli_test(unknown_option 2 "unknown option '--bogus'" --bogus 1)
as_dump_cli_test(no_length 2 "--length is required" ${M} --tokens ${AS_FWD_TOKENS} ${O})
file(WRITE ${AS_FWD_DIR}/empty.txt "")
as_dump_cli_test(text_too_short 2 "needs 4 tokens but .*empty.txt has 0" ${M} --text ${AS_FWD_DIR}/empty.txt --length 4 ${O})
# a device or FIFO is refused at once (a FIFO would block open() forever)
as_dump_cli_test(text_not_regular 1 "/dev/null: not a regular file" ${M} --text /dev/null --length 4 ${O})
as_dump_cli_test(length_zero 2 "--length '0' is not a positive integer"
                 ${M} --tokens ${AS_FWD_TOKENS} --length 0 ${O})
as_dump_cli_test(length_too_long 2 "exceeds the model's n_positions 128"
                 ${M} --tokens ${AS_FWD_TOKENS} --length 129 ${O})
as_dump_cli_test(window_past_end 2 "window \\[1090, 1101\\) needs 1101 tokens but .* has 1100"
                 ${M} --tokens ${AS_FWD_TOKENS} --length 11 --window-start 1090 ${O})
as_dump_cli_test(bad_layers 2 "--layers '0,5': layer range 5-5 outside 0..1"
                 ${M} --tokens ${AS_FWD_TOKENS} --length 4 --layers 0,5 ${O})
as_dump_cli_test(missing_model 1 "/nonexistent"
                 --model /nonexistent --tokens ${AS_FWD_TOKENS} --length 4 ${O})
file(WRITE ${CMAKE_BINARY_DIR}/forward-tests-bad-ids.txt "1 2 50257 3\n")
as_dump_cli_test(id_outside_vocab 1 "token 2 is id 50257, outside the vocabulary of 50257"
                 ${M} --tokens ${CMAKE_BINARY_DIR}/forward-tests-bad-ids.txt --length 4 ${O})
file(WRITE ${CMAKE_BINARY_DIR}/forward-tests-not-ids.txt "1 2 x3 3\n")
as_dump_cli_test(not_an_id 1 "token 2 \\('x3'\\) is not a non-negative integer"
                 ${M} --tokens ${CMAKE_BINARY_DIR}/forward-tests-not-ids.txt --length 4 ${O})

# The forward pass on a synthetic model against values computed in the test itself.
as_test_program(test_gpt2_forward ${CMAKE_CURRENT_LIST_DIR}/test_gpt2_forward.c attnsweep_kernels)
add_test(NAME test_gpt2_forward COMMAND test_gpt2_forward WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(test_gpt2_forward PROPERTIES LABELS reference)
