# sweep.cmake -- end-to-end tests of `attnsweep run` on the tiny model:
# 1/2/4 ranks give identical files, SIGTERM + resume equals an uninterrupted
# run (kill -9 + resume: hardening.cmake's torture test; inside a compressed commit:
# compress_kill), SIGUSR1 waits runtime.stop_grace for the
# running window, a changed config is refused, windows/L extend a file,
# and the file's metrics equal numpy's evaluation of docs/metrics.md on a dump.
foreach(case ranks changed_config extend dump_crosscheck sigterm compress compress_resume compress_kill
             stop_grace switches rows)
  # sigterm and stop_grace hold the writer through the store's test hook, which only
  # attnsweep_test has
  if(case STREQUAL "sigterm" OR case STREQUAL "stop_grace" OR case STREQUAL "compress_kill")
    set(bin $<TARGET_FILE:attnsweep_test>)
  else()
    set(bin $<TARGET_FILE:attnsweep>)
  endif()
  add_test(NAME sweep_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_sweep.py ${bin}
                   ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/sweep_${case} ${case})
  set_tests_properties(sweep_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()

# dist_random and metrics.ks_against in both readings (docs/metrics.md section 4.6)
add_test(NAME sweep_random
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_sweep_random.py
                 $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/tiny
                 ${CMAKE_BINARY_DIR}/scratch/sweep_random)
set_tests_properties(sweep_random PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
