# tests/integration/store.cmake -- the results store's extra tests (included by CMakeLists.txt).
# test_store*.c and test_journal.c are registered by the glob; here: the writer
# the Python/xarray test drives, and that test.
as_test_program(store_xarray_writer ${CMAKE_CURRENT_LIST_DIR}/store_xarray_writer.c attnsweep_store)
add_test(NAME test_store_xarray
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_store_xarray.py
                 $<TARGET_FILE:store_xarray_writer> ${CMAKE_BINARY_DIR}/store_xarray_tmp
                 $<TARGET_FILE:attnsweep>
         WORKING_DIRECTORY ${CMAKE_BINARY_DIR})

# The dump file in xarray (named dimensions, both engines) and dump --tokens from .npy / .bin.
add_test(NAME dump_xarray
         COMMAND ${AS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_dump_xarray.py $<TARGET_FILE:attnsweep>
                 ${CMAKE_BINARY_DIR}/models/tiny ${CMAKE_BINARY_DIR}/scratch/dump_xarray)
set_tests_properties(dump_xarray PROPERTIES FIXTURES_REQUIRED model_tiny
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
