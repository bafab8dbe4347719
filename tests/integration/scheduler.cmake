# scheduler.cmake -- the master/worker scheduler under mpirun.
# test_scheduler (registered by the glob) runs as a singleton: one rank that
# computes and commits itself. Here: the same scenarios with 2 and 4 ranks,
# the signal tests (tests/integration/scheduler_signal.sh: event-driven, so their timeouts are
# hang limits only) and a short benchmark smoke run. Label "mpi"; each test takes a few seconds
# (the held-cell ones ~10 s).
set(AS_SCHED_MPIRUN ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG})
set(AS_SCHED_FLAGS --allow-run-as-root --oversubscribe)

foreach(np 2 4)
  add_test(NAME scheduler_np${np}
           COMMAND ${AS_SCHED_MPIRUN} ${np} ${AS_SCHED_FLAGS} $<TARGET_FILE:test_scheduler>)
  set_tests_properties(scheduler_np${np} PROPERTIES LABELS mpi TIMEOUT 60)
endforeach()
set_tests_properties(test_scheduler PROPERTIES LABELS mpi TIMEOUT 60)

# name  ranks  signal  sent to  [extra arguments of test_scheduler --signal]
set(AS_SCHED_SIGNAL_CASES
  "usr1_mpirun_np4 4 USR1 mpirun"
  "term_mpirun_np4 4 TERM mpirun"
  "int_mpirun_np3 3 INT mpirun"
  "term_worker_np3 3 TERM worker"
  "term_master_np3 3 TERM master"
  "usr1_mpirun_np1 1 USR1 mpirun"
  "usr1_grace_keeps_held_cells_np3 3 USR1 mpirun --hold-keep --grace 120"
  "usr1_abandon_held_cells_np4 4 USR1 mpirun --hold-abandon --grace 2"
  # Ctrl-C: the first SIGINT keeps the running cells (the long grace), a second abandons them.
  # Under mpirun a terminal's Ctrl-C is mpirun's (int_mpirun_np3): these send it to the sweep.
  "int_keeps_held_cells_alone 1 INT alone --hold-keep --grace 120"
  "int_twice_abandons_alone 1 INT alone --hold-again --grace 120"
  "int_twice_abandons_master_np3 3 INT master --hold-again --grace 120")
foreach(case ${AS_SCHED_SIGNAL_CASES})
  separate_arguments(args UNIX_COMMAND "${case}")
  list(POP_FRONT args name)
  add_test(NAME scheduler_signal_${name}
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/scheduler_signal.sh ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:test_scheduler> ${args})
  set_tests_properties(scheduler_signal_${name} PROPERTIES LABELS mpi TIMEOUT 700)
endforeach()

add_test(NAME scheduler_bench_smoke
         COMMAND ${AS_SCHED_MPIRUN} 4 ${AS_SCHED_FLAGS} $<TARGET_FILE:bench_scheduler> --cells 2000
                 --cost-model l2 --unit-ms 2)
set_tests_properties(scheduler_bench_smoke PROPERTIES LABELS mpi TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "cells/s.*makespan/bound")
