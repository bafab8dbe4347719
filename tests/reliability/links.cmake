# links.cmake -- no write through a planted link (docs/reliability.md): a symbolic link, to a
# victim file or dangling, at each file a run or merge creates or rewrites beside its output
# (lock, reserve, status and its temporary, journal, the rebuild, compaction and merge
# temporaries) is refused in one line and nothing is written through it
# (tests/reliability/test_planted_links.py, on the tiny model; a few seconds each).
foreach(case lock reserve status journal status_tmp rebuild_tmp compact_tmp stale_tmp merge_lock
             merge_tmp)
  add_test(NAME planted_links_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_planted_links.py
                   $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/models/tiny
                   ${CMAKE_BINARY_DIR}/scratch/planted_links_${case} ${case})
  set_tests_properties(planted_links_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endforeach()
# cli_edges_*: a run started at the instant another creates the output is told "in use";
# status without the journal counts each model once; a stored config that @includes a FIFO
# is refused, not waited on; --set of a whole group is refused; plan warns when the master
# needs more than MemTotal; status CONFIG, and a killed writer's "running" marked stale
# (tests/reliability/test_cli_edges.py; a few seconds each).
foreach(case start_race status_dead_writer status_no_journal_models include_fifo set_group plan_memory)
  add_test(NAME cli_edges_${case}
           COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reliability/test_cli_edges.py
                   $<TARGET_FILE:attnsweep_test> ${CMAKE_BINARY_DIR}/models/tiny
                   ${CMAKE_BINARY_DIR}/scratch/cli_edges_${case} ${case})
  set_tests_properties(cli_edges_${case} PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endforeach()
