# analysis.cmake -- tests of analysis/: attnsweep_results.load() masks
# unfinished cells, and analysis/figures.py draws exactly the file's values
# (recomputed independently from h5py) into non-blank PNG/PDF files. The test
# makes its own results file with `attnsweep run` on the tiny model; for the
# checkpoint figure two more runs (seeds 2, 3 of the tiny model)
# stacked with h5py into one three-model file of the model-axis layout.
add_test(NAME analysis_figures
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_analysis.py $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/analysis)
set_tests_properties(analysis_figures PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;MPLBACKEND=Agg")
# analysis/report.py: the HTML page of a results file (figures embedded, headline table, axes,
# provenance, config) rendered in headless Chromium (a screenshot that is not blank, a DOM
# with every section and every image decoded). Skips (77) without chromium.
add_test(NAME analysis_report
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_report.py $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/report)
set_tests_properties(analysis_report PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;MPLBACKEND=Agg")
# The figure scripts (figures.py, report.py, the checkpoint figure) under
# python3 -W error::RuntimeWarning on files with a slice of no value: crit_N censored in every
# window at an L, a model axis with head_valid masking whose second model's longest L is
# pending or which has not started. Each exits 0 without a RuntimeWarning; empty figures are
# skipped with a note.
add_test(NAME analysis_empty_slices
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_figures_empty.py $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/figures_empty)
set_tests_properties(analysis_empty_slices PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;MPLBACKEND=Agg")
