# tests/jobs/jobs.cmake -- tests of the job scripts (jobs/): downloads against a local HTTP server, the
# sbatch generator, and the requeue chain, job arrays and MPI launch against a real SLURM started
# privately on localhost (tests/slurm/start.sh; needs root and the Debian packages slurm-wlm
# munge -- without them the slurm_* tests FAIL, they never pass silently).
# Run: ctest -R 'jobs|slurm' --output-on-failure   (about 3 minutes on an idle 2-core machine)

# the smallest real MPI program, launched by the job script in test_slurm_mpi.sh
add_executable(slurm_hello_mpi ${CMAKE_SOURCE_DIR}/tests/slurm/hello_mpi.c)
target_link_libraries(slurm_hello_mpi PRIVATE MPI::MPI_C)

add_test(NAME jobs_fetch COMMAND bash ${CMAKE_SOURCE_DIR}/tests/jobs/test_fetch.sh)
add_test(NAME jobs_make_sbatch COMMAND bash ${CMAKE_SOURCE_DIR}/tests/jobs/test_slurm_generator.sh)
# fetch-model.sh: a Pythia checkpoint series (EleutherAI/pythia-tiny step0, step1000, step2000:
# gpt_neox models and Pythia's tokenizer files), shards, a PyTorch-only repository and a hostile
# pickle against the local imitation of the hub; the series is swept on text and drawn, the
# checkpoint figure's numbers checked against the file (synthetic models)
add_test(NAME jobs_fetch_model COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/jobs/test_fetch_model.py
                                       $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/scratch/fetch_model)
# run-all.sh's list of skipped tests and their reasons, on a scratch ctest project
add_test(NAME jobs_run_all_skips COMMAND bash ${CMAKE_SOURCE_DIR}/tests/jobs/test_run_all_skips.sh)
set_tests_properties(jobs_fetch jobs_make_sbatch jobs_fetch_model jobs_run_all_skips PROPERTIES TIMEOUT 300
                     LABELS "jobs")

add_test(NAME slurm_requeue COMMAND bash ${CMAKE_SOURCE_DIR}/tests/slurm/test_slurm_requeue.sh)
add_test(NAME slurm_array COMMAND bash ${CMAKE_SOURCE_DIR}/tests/slurm/test_slurm_array.sh)
add_test(NAME slurm_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/slurm/test_slurm_mpi.sh
                                $<TARGET_FILE:slurm_hello_mpi>)
# Each test starts its own cluster on free ports, so they may run in parallel; the timeouts are
# generous because the requeue test waits on slurmctld's 30 s time-limit check.
set_tests_properties(slurm_requeue slurm_array slurm_mpi PROPERTIES
  TIMEOUT 900 LABELS "jobs;slurm" ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
