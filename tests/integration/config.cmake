# config.cmake -- CLI test of `attnsweep plan` (config, grid) on configs/example.cfg,
# with the tiny synthetic model of the loader's model_tiny fixture.
add_test(NAME config_plan_cli
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/config_cli.sh $<TARGET_FILE:attnsweep>
                 ${CMAKE_SOURCE_DIR}/configs/example.cfg ${CMAKE_BINARY_DIR}/models/tiny)
set_tests_properties(config_plan_cli PROPERTIES FIXTURES_REQUIRED model_tiny)

# plan against an existing output (what is left; an extension costs its new cells; a config
# run refuses claims no progress) and --porcelain, on a 4-window sweep of the tiny model.
add_test(NAME plan_progress_cli
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/plan_cli.sh $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/plan_cli)
set_tests_properties(plan_progress_cli PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 120)
# Every environment variable the program reads is named in some command's --help.
add_test(NAME env_knobs_in_help
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/env_help.sh $<TARGET_FILE:attnsweep> ${CMAKE_SOURCE_DIR})
