# cli.cmake -- unit tests of src/cli, which is no library: each test links the cli files it
# tests with the layers they use (the automatic tests/unit/LAYER/test_*.c cover the libraries).
add_executable(test_args ${CMAKE_SOURCE_DIR}/tests/unit/cli/test_args.c ${CMAKE_SOURCE_DIR}/src/cli/args.c)
target_include_directories(test_args PRIVATE ${AS_TEST_LIB} ${CMAKE_SOURCE_DIR}/src/cli)
target_link_libraries(test_args PRIVATE attnsweep_core)
add_test(NAME test_args COMMAND test_args WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(test_args PROPERTIES LABELS "unit;cli")
