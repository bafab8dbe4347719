# multihost.cmake -- a real run across three hosts on this machine (network + UTS namespaces,
# veths on a private bridge, Open MPI launched through an rsh agent that enters them:
# tests/reliability/test_multihost.py and multihost/): one weights copy per host (PSS), results
# equal to a one-host run, the master's host and a worker's host killed mid-run and resumed,
# SIGUSR1 across hosts. Needs root and iproute2; without namespaces every case prints one
# SKIPPED line and exits 77 (skipped). A few seconds to ~20 s each.
foreach(case pss kill_master kill_worker usr1 usr1_remote)
  add_test(NAME multihost_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_multihost.py
                   $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/models/tiny
                   ${CMAKE_BINARY_DIR}/scratch/multihost_${case} ${case})
  set_tests_properties(multihost_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 600
                       SKIP_RETURN_CODE 77 LABELS multihost
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1")
endforeach()
