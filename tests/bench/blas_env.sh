# blas_env.sh -- sourced by the benches that time a C program or PyTorch: every program of
# the bench runs the OpenBLAS kernels attnsweep runs. Where OpenBLAS takes the CPU for an
# older one, attnsweep sets OPENBLAS_CORETYPE for itself (include/kernels/blas_core.h); the
# bench's C programs and PyTorch (which links the same OpenBLAS) get the same value here, so
# a ratio compares code, not kernels. A caller's own OPENBLAS_CORETYPE is kept.
# usage: . tests/bench/blas_env.sh; bench_blas_env BUILD/attnsweep
bench_blas_env() {
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
        echo "bench: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (the caller's) for every program"
        return 0
    fi
    bench_core=$("$1" --version 2>/dev/null |
        sed -n 's/^blas: \([^ ]*\) kernels (OPENBLAS_CORETYPE set by attnsweep: OpenBLAS took this CPU for \([^)]*\))$/\1 \2/p')
    [ -n "$bench_core" ] || return 0
    export OPENBLAS_CORETYPE="${bench_core%% *}"
    echo "bench: OpenBLAS takes this CPU for ${bench_core#* }; every program here runs its $OPENBLAS_CORETYPE kernels, as attnsweep does (OPENBLAS_CORETYPE)"
}
