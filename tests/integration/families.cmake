# families.cmake -- a model axis mixing the families (gpt2, gpt_neox, llama; qwen2 appended)
# swept, killed and resumed, extended by a model, merged from shards and sampled
# (metrics.query_rows = "sample:K")
# (tests/integration/test_family_axis.py). Random-weight models written by
# tests/reference/families_io.py and `attnsweep synth`; no shared assets needed.
set(AS_FAMAXIS_SCRATCH ${CMAKE_BINARY_DIR}/scratch/family-axis)
foreach(case models axis resume extend merge sampled)
  add_test(NAME family_axis_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_family_axis.py
                   $<TARGET_FILE:attnsweep> $<TARGET_FILE:attnsweep_test>
                   ${CMAKE_SOURCE_DIR}/tests/reference/families_io.py ${AS_FAMAXIS_SCRATCH} ${case})
  set_tests_properties(family_axis_${case} PROPERTIES TIMEOUT 600
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endforeach()
set_tests_properties(family_axis_models PROPERTIES FIXTURES_SETUP family_axis_models)
set_tests_properties(family_axis_axis family_axis_resume family_axis_extend family_axis_merge
                     family_axis_sampled
                     PROPERTIES FIXTURES_REQUIRED family_axis_models)

# bad model directories of the rotary families, one line each (tests/integration/test_family_inputs.py)
add_test(NAME family_inputs
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_family_inputs.py
                 $<TARGET_FILE:attnsweep> ${CMAKE_SOURCE_DIR}/tests/reference/families_io.py
                 ${CMAKE_BINARY_DIR}/scratch/family-inputs)
set_tests_properties(family_inputs PROPERTIES TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
