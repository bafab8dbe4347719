# docs.cmake -- docs/results.md against the files attnsweep writes: every
# coordinate, variable, root attribute and /provenance variable of a results file, and every
# dataset and attribute of a dump file, has a row in the doc with the file's type, dimensions,
# fill and units, and every row exists in the file. `selftest` shows the check can fail; `cf`
# checks that xarray plots label themselves and that `history` matches /provenance; `readings`
# that the aggregate distance and scaled logits have their own long_names and notes; `texts`
# the float32 floor, the scaled logits' gradients and two once-stale sentences.
foreach(case results dump)
  set(extra "")
  if(case STREQUAL "results")
    set(extra selftest cf readings texts)
  endif()
  add_test(NAME docs_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_docs_results.py
                   $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/tiny
                   ${CMAKE_BINARY_DIR}/scratch/docs_${case} ${CMAKE_SOURCE_DIR}/docs/results.md
                   ${case} ${extra})
  set_tests_properties(docs_${case} PROPERTIES ENVIRONMENT "MPLBACKEND=Agg")
  set_tests_properties(docs_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 120)
endforeach()
