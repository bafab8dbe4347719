# tests/unit/purity.cmake -- the layers link as the house says (CMakeLists.txt, "the layers"):
# no kernel, model, text or sweep object references MPI or HDF5, the store never calls MPI, and
# no layer calls into a layer above it. Reads the static libraries' symbol tables with nm.
add_test(NAME layer_purity COMMAND ${AS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/purity.py ${CMAKE_NM}
                                   ${CMAKE_BINARY_DIR})
# Every repository path a comment, doc or script names exists (a moved file leaves no pointer dangling).
add_test(NAME dangling_paths COMMAND ${AS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/paths.py ${CMAKE_SOURCE_DIR})
# One meaning per prefix: no two layers define symbols of one prefix, and no function is named
# with another layer's prefix (a private helper would read as a call into that layer).
add_test(NAME prefixes COMMAND ${AS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/prefixes.py ${CMAKE_NM}
                               ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
# Functions in src/ stay under 120 lines (docs/hacking.md, house rules): a brace counter over
# src/ and include/ names each one of 120 lines or more.
add_test(NAME function_length COMMAND ${AS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/funclen.py ${CMAKE_SOURCE_DIR})
