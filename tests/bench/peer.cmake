# peer.cmake -- the PyTorch peer of the metrics kernel (tests/bench/peer_metrics.py) is right:
# against the brute force (tests/lib/bruteforce.py) on a small random head and against
# `attnsweep run` on the tiny model, every per-N and per-T variable. Not a timing test (the
# side-by-side timing is tests/bench/bench_peer.sh).
add_test(NAME peer_metrics_check
         COMMAND ${AS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/bench/peer_metrics.py check
                 $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/tiny
                 ${CMAKE_BINARY_DIR}/scratch/peer_metrics)
set_tests_properties(peer_metrics_check PROPERTIES FIXTURES_REQUIRED model_tiny TIMEOUT 300)
