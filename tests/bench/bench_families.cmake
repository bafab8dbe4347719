# bench_families.cmake -- tests/bench/bench_families.sh runs end to end on the tiny shapes
# (--tiny: one model per family, L = 64, one timed forward per side) and prints its table:
# a header and one row per family whose last cell is a ratio. It judges no speed: the
# numbers only have to be there. The real run (L = 1024, realistic shapes) is by hand:
# docs/performance.md, "Forward pass per family".
add_test(NAME bench_families_smoke
         COMMAND /bin/sh -c "out=$(sh \"$1\" --tiny --length 64 --repeat 1 --build \"$2\" --work \"$3\") || exit 1; echo \"$out\"; echo \"$out\" | grep -q '^| family | preset |' || { echo 'no table header'; exit 1; }; for f in gpt2 gpt_neox llama qwen2; do echo \"$out\" | grep -Eq \"^[|] $f [|].*[|] [0-9.]+x [|] [0-9.]+ / [0-9.]+ [|]\\$\" || { echo \"no table row for $f\"; exit 1; }; done"
                 sh ${CMAKE_SOURCE_DIR}/tests/bench/bench_families.sh ${CMAKE_BINARY_DIR}
                 ${CMAKE_BINARY_DIR}/scratch/bench_families)
set_tests_properties(bench_families_smoke PROPERTIES TIMEOUT 300)
