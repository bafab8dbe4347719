# newcomer.cmake -- a new user's first hour: clone, quick start offline, every command
# it printed and every README code line, plan's estimate against the measured time. Builds the
# clone from scratch (setup.sh), so it takes a few minutes.
add_test(NAME newcomer
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/test_newcomer.sh ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/scratch/newcomer)
set_tests_properties(newcomer PROPERTIES TIMEOUT 900 LABELS "slow"
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1")
