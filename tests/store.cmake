# tests/store.cmake -- the results store's extra tests (included by CMakeLists.txt).
# test_store*.c and test_journal.c are registered by the glob; here: the writer
# the Python/xarray test drives, and that test.
add_executable(store_xarray_writer ${CMAKE_SOURCE_DIR}/tests/store_xarray_writer.c)
target_include_directories(store_xarray_writer PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(store_xarray_writer PRIVATE attnsweep_core)
add_test(NAME test_store_xarray
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/test_store_xarray.py
                 $<TARGET_FILE:store_xarray_writer> ${CMAKE_BINARY_DIR}/store_xarray_tmp
                 $<TARGET_FILE:attnsweep>
         WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
