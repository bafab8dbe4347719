# provenance.cmake -- /provenance's `ended` and `extended` columns through one output's life on
# the tiny model: stopped by SIGUSR1, resumed to completion, extended by an L value, extended by
# windows and killed with SIGKILL, resumed; each segment's row checked after each run, and
# carried through `attnsweep merge`. The stops are placed by the store's test hook, which only
# attnsweep_test has.
add_test(NAME provenance_segments
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_provenance.py
                 $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/models/tiny
                 ${CMAKE_BINARY_DIR}/scratch/provenance)
set_tests_properties(provenance_segments PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# OpenBLAS's kernels: attnsweep runs those of the CPU's own level where OpenBLAS took the CPU
# for an older one, in every rank, and the results file names them; a user's
# OPENBLAS_CORETYPE wins.
add_test(NAME blas_core_choice
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_blas_core.py
                 $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/tiny
                 ${CMAKE_BINARY_DIR}/scratch/blas_core)
set_tests_properties(blas_core_choice PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     SKIP_RETURN_CODE 77)
