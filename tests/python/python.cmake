# python.cmake -- the notebook package (python/): attnsweep.metrics through
# libattnsweep_kernels.so equals the sweep bit for bit on the same dump (every variable, two
# windows, default and changed options; bit_identity_trained: the same on the trained model
# and the book of the shared/ assets, skipped without them), pip installs it offline into a
# fresh venv, a missing library is one line, and the PyTorch hooks example
# (python/examples/torch_hooks.py) runs on the tiny synthetic model; the library exports its
# C ABI only and needs nothing of MPI, HDF5 or libconfig.
if(NOT DEFINED AS_SHARED)
  set(AS_SHARED ${CMAKE_SOURCE_DIR}/../shared)
endif()
foreach(case bit_identity bit_identity_trained install missing_library example library_symbols)
  add_test(NAME python_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_python.py $<TARGET_FILE:attnsweep>
                   ${CMAKE_BINARY_DIR}/models/tiny $<TARGET_FILE:attnsweep_kernels_shared>
                   ${CMAKE_BINARY_DIR}/scratch/python_${case} ${case})
  set_tests_properties(python_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                       SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;AS_TEST_SHARED=${AS_SHARED}")
endforeach()
