# merge.cmake -- `attnsweep merge` on the tiny model: K shards merged
# equal a single run bit for bit; --partial + `attnsweep run` completes a merge
# with a missing shard; each refusal leaves every file unchanged.
add_test(NAME merge_shards
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_merge.py $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/merge)
set_tests_properties(merge_shards PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# The real attnsweep under a real, private SLURM (tests/slurm/start.sh; needs root and the Debian
# packages slurm-wlm munge -- without them these FAIL, never skip): a sweep warned mid-run
# (USR1 -> save -> exit 3 -> requeue) ends equal to an uninterrupted run; a 3-shard job array +
# `attnsweep merge` equals it too. About 55 s and 45 s on an idle 2-core machine.
foreach(case requeue array)
  add_test(NAME slurm_real_${case}
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/slurm/test_slurm_attnsweep.sh $<TARGET_FILE:attnsweep>
                   ${CMAKE_BINARY_DIR}/models/tiny ${case})
  set_tests_properties(slurm_real_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 900
                       LABELS "jobs;slurm;slow" ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endforeach()
