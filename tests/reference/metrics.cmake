# tests/reference/metrics.cmake -- metrics + KS tests beyond the plain C unit tests.
# ks_ref.py writes scipy's exact two-sample KS values; test_ks compares against them.
add_test(NAME ks_ref_scipy
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/ks_ref.py ${CMAKE_BINARY_DIR}/ks_ref_cases.txt)
set_tests_properties(ks_ref_scipy PROPERTIES FIXTURES_SETUP ks_ref_cases)
if(TEST test_ks)
  set_tests_properties(test_ks PROPERTIES FIXTURES_REQUIRED ks_ref_cases)
endif()

