# hardening.cmake -- hardening, on the tiny model of the model_tiny fixture:
#   torture_sigkill: SIGKILL a 2-rank run 24 times, each placed by waiting for a phase (start-up, after a dispatch
#     record, inside each commit step via the store's ATTNSWEEP_TEST_* hook, which only
#     attnsweep_test has: src/store/testhook.h) and
#     resume; the file equals an uninterrupted run and no cell ran more often
#     than 1 + the kills it was in flight for (~2-3 min).
#   bad_inputs: the catalogue of bad inputs through the real CLI; each exits
#     non-zero with one line on stderr naming the key or file, and leaves the
#     files on disk unchanged.
add_test(NAME torture_sigkill
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_torture.py $<TARGET_FILE:attnsweep_test>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/torture)
set_tests_properties(torture_sigkill PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 1200 LABELS slow
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# (attnsweep_test: its two-runs case slows the first run's commits through the test hook)
add_test(NAME bad_inputs
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_bad_inputs.py $<TARGET_FILE:attnsweep_test>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/bad_inputs)
set_tests_properties(bad_inputs PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# test_hooks_only_in_test_build: build/attnsweep holds no ATTNSWEEP_TEST_ string (it cannot read
# those variables), build/attnsweep_test does.
add_test(NAME test_hooks_only_in_test_build
         COMMAND ${AS_PYTHON} -c "import sys; p, t = (open(f, 'rb').read() for f in sys.argv[1:3]); sys.exit(0 if b'ATTNSWEEP_TEST_' not in p and b'ATTNSWEEP_TEST_' in t else 1)"
                 $<TARGET_FILE:attnsweep> $<TARGET_FILE:attnsweep_test>)
# store_recovery_*: journal damage in the middle, the stale-lock race (held open by a hook),
# pid reuse, another host's lock, a killed merge, status without its journal, a kill at every
# step of the journal's compaction (compact_killed), a flipped byte in a stored chunk
# (chunk_flip_*, checksum_form_kept)
# (tests/reliability/test_store_recovery.py; a few seconds each).
foreach(case journal_flip_middle journal_cut_middle journal_identity lock_race lock_overwritten
             lock_pid_reused lock_other_host merge_killed status_no_journal compact_killed
             disk_full_compacted chunk_flip_compressed chunk_flip_plain checksum_form_kept
             merge_damaged_shard)
  add_test(NAME store_recovery_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_store_recovery.py
                   $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/models/tiny
                   ${CMAKE_BINARY_DIR}/scratch/store_recovery_${case} ${case})
  set_tests_properties(store_recovery_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endforeach()
# rank0_release_*: an error of rank 0 at the end of the run (its close failing in the journal's
# compaction, injected by the store's test hook) ends the whole MPI job with exit 1 instead of
# leaving the workers in a broadcast for ever; 2 and 3 ranks (tests/reliability/test_rank0_release.py,
# a hang is killed after 120 s; ~10 s each when it passes); last_commit_fails: the same for rank 0's
# last commit of model 0 of 2 failing after the workers were told the model was complete.
foreach(case close_fails_2 close_fails_3 last_commit_fails)
  add_test(NAME rank0_release_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_rank0_release.py
                   $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/models/tiny
                   ${CMAKE_BINARY_DIR}/scratch/rank0_release_${case} ${case})
  set_tests_properties(rank0_release_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 400
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1")
endforeach()
# inputs_identity_*: every input file (each model's model.safetensors and config.json, the text,
# vocab.json, merges.txt) hashed, recorded in the view and the journal's config record, and
# checked on resume, extension, a rebuild from the journal and merge
# (tests/reliability/test_inputs_identity.py, on a synthetic model of its own; a few s each).
foreach(case recorded config_extend journal_rebuild merge_config merge_vocab old_journal)
  add_test(NAME inputs_identity_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_inputs_identity.py
                   $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/scratch/inputs_identity_${case} ${case})
  set_tests_properties(inputs_identity_${case} PROPERTIES TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endforeach()
