# config.cmake -- CLI test of `attnsweep plan` (config, grid) on configs/example.cfg,
# with the tiny synthetic model of the loader's model_tiny fixture.
add_test(NAME config_plan_cli
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/config_cli.sh $<TARGET_FILE:attnsweep>
                 ${CMAKE_SOURCE_DIR}/configs/example.cfg ${CMAKE_BINARY_DIR}/models/tiny)
set_tests_properties(config_plan_cli PROPERTIES FIXTURES_REQUIRED model_tiny)
