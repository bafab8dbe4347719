# tests/reference/metrics.cmake -- metrics + KS tests beyond the plain C unit tests.
# ks_ref.py writes scipy's exact two-sample KS values; test_ks compares against them.
add_test(NAME ks_ref_scipy
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/ks_ref.py ${CMAKE_BINARY_DIR}/ks_ref_cases.txt)
set_tests_properties(ks_ref_scipy PROPERTIES FIXTURES_SETUP ks_ref_cases)
if(TEST test_ks)
  set_tests_properties(test_ks PROPERTIES FIXTURES_REQUIRED ks_ref_cases)
endif()


# A C test writes cases into build/CASES.txt (ctest WRITE_TEST, `WRITER FLAG CASES.txt`) and
# tests/reference/SCRIPT.py checks them in high precision (ctest CHECK_TEST).
function(as_mpmath_referee WRITE_TEST WRITER FLAG CASES CHECK_TEST SCRIPT)
  add_test(NAME ${WRITE_TEST} COMMAND ${WRITER} ${FLAG} ${CMAKE_BINARY_DIR}/${CASES}.txt)
  set_tests_properties(${WRITE_TEST} PROPERTIES FIXTURES_SETUP ${CASES})
  add_test(NAME ${CHECK_TEST}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/${SCRIPT}.py
                   ${CMAKE_BINARY_DIR}/${CASES}.txt)
  set_tests_properties(${CHECK_TEST} PROPERTIES FIXTURES_REQUIRED ${CASES})
endfunction()

# sep_mpmath.py: a few sink rows of test_metrics_regimes, their separability decisions
# recomputed at 80 digits (python3-mpmath), confirm the brute force's exact rewrite.
as_mpmath_referee(metrics_sep_rows test_metrics_regimes --dump-rows metrics_sep_rows
                  metrics_sep_mpmath sep_mpmath)

# The FMA and no-FMA builds of metrics.c agree: test_metrics_regimes_nofma
# (metrics.c compiled with -mno-fma -mno-avx512f: no FMA instruction, so the file's
# fp-contract pragma fuses nothing) saves
# every output of the regimes; the default build compares: 1e-9 relative, counts within
# sep_marginal.
file(GLOB AS_METRICS_SOURCES ${CMAKE_SOURCE_DIR}/src/kernels/metrics*.c)
add_executable(test_metrics_regimes_nofma ${CMAKE_SOURCE_DIR}/tests/unit/kernels/test_metrics_regimes.c
               ${AS_METRICS_SOURCES})
target_compile_options(test_metrics_regimes_nofma PRIVATE -mno-fma -mno-avx512f)
target_include_directories(test_metrics_regimes_nofma PRIVATE ${AS_TEST_LIB}
                           ${CMAKE_SOURCE_DIR}/include/kernels)
target_link_libraries(test_metrics_regimes_nofma PRIVATE attnsweep_core PkgConfig::OPENBLAS m)
if(AS_QUADMATH)
  target_compile_definitions(test_metrics_regimes_nofma PRIVATE AS_HAVE_QUADMATH)
  target_link_libraries(test_metrics_regimes_nofma PRIVATE ${AS_QUADMATH})
endif()
add_test(NAME metrics_nofma_save
         COMMAND test_metrics_regimes_nofma --save ${CMAKE_BINARY_DIR}/metrics_nofma.bin)
set_tests_properties(metrics_nofma_save PROPERTIES FIXTURES_SETUP metrics_nofma)
add_test(NAME metrics_fma_agree
         COMMAND test_metrics_regimes --compare ${CMAKE_BINARY_DIR}/metrics_nofma.bin)
set_tests_properties(metrics_fma_agree PROPERTIES FIXTURES_REQUIRED metrics_nofma)

# The five normalizers of docs/metrics.md section 10.1 in the same regimes, against the brute
# force of their own definitions in metrics_ref.h (sort-based entmax, quad weights, Jacobi on
# the explicit Jacobians, sa_softmax's order by weight).
add_test(NAME metrics_normalizers_new COMMAND test_metrics_regimes --normalizers new)
# the same with entmax_alpha = 1.25 (reference: extended-precision bisection) and
# sigmoid_bias = 1.5
add_test(NAME metrics_normalizers_params COMMAND test_metrics_regimes --normalizers params)

# sep_xi_mpmath.py: section 6.1's xi of the dominant selected key (B = A - a_i cancels there)
# from the exclusive sums at 50 digits, against met_sep_xi on cases test_metrics_audit writes.
as_mpmath_referee(metrics_sep_xi_cases test_metrics_audit --dump-xi metrics_sep_xi
                  metrics_sep_xi_mpmath sep_xi_mpmath)
