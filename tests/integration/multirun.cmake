# multirun.cmake -- docs/multirun.md's decision, tested: the logit convention is a relabelling
# of T and eps bit for bit (so it needs no axis), and analysis/multirun.py runs one ordinary
# sweep per value into a tree with an index, resumes, and stacks the runs for xarray.
add_test(NAME logits_relabel
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_logits_relabel.py
                 $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/logits_relabel)
add_test(NAME multirun
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_multirun.py
                 $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/multirun)
set_tests_properties(logits_relabel multirun PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1")
