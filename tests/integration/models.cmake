# models.cmake -- the model axis: several models in one sweep, each
# model's cells equal to a single-model run bit for bit (tests/integration/test_models.py).
# ckpt/resume/extend/merge/mixed use the trained test model and its checkpoints from the
# shared/ folder beside the clone (trained.cmake's AS_SHARED) and skip (exit 77) without
# it; sizes uses the synthetic gpt2 and gpt2-medium of the loader fixtures.
set(AS_MODELS_SCRATCH ${CMAKE_BINARY_DIR}/scratch/models)
if(NOT DEFINED AS_SHARED)
  set(AS_SHARED ${CMAKE_SOURCE_DIR}/../shared CACHE PATH "the shared/ test assets beside the clone")
endif()
foreach(case ckpt resume extend merge mixed sizes oldfile)
  add_test(NAME models_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_models.py
                   $<TARGET_FILE:attnsweep> $<TARGET_FILE:attnsweep_test> ${AS_SHARED}
                   ${CMAKE_BINARY_DIR}/models ${AS_MODELS_SCRATCH} ${case})
  set_tests_properties(models_${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endforeach()
# the checkpoint cases share the three-model file and the single runs (made once, by
# whichever case runs first); run them one after the other
set_tests_properties(models_ckpt models_resume models_extend models_merge PROPERTIES
                     RESOURCE_LOCK models_ckpt_files)
set_tests_properties(models_sizes PROPERTIES FIXTURES_REQUIRED "model_gpt2;model_gpt2-medium")
set_tests_properties(models_oldfile PROPERTIES FIXTURES_REQUIRED model_tiny)
