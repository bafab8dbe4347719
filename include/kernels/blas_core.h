/* blas_core.h -- which OpenBLAS kernels this process runs, and a better choice when
 * OpenBLAS's CPU detection falls short (docs/performance.md, "OpenBLAS's CPU detection").
 *
 * OpenBLAS (built with DYNAMIC_ARCH, as Debian's is) picks its kernels ("core") from the
 * CPU's model number when the library loads. A release that does not know a newer CPU
 * falls back to a core of the oldest instruction set: Debian 12's OpenBLAS 0.3.21 takes an
 * Emerald Rapids Xeon (family 6, model 207) for "Prescott" and runs SSE3 sgemm, 5x slower
 * than the AVX-512 kernels the CPU can run. The environment variable OPENBLAS_CORETYPE,
 * read at that same load, overrides the choice; attnsweep's main sets it and re-executes
 * itself before anything else runs (src/cli/main.c). */
#ifndef ATTNSWEEP_BLAS_CORE_H
#define ATTNSWEEP_BLAS_CORE_H

/* Instruction-set level, from oldest to newest; OpenBLAS's x86-64 cores map onto them. */
typedef enum {
    BLAS_ISA_UNKNOWN = -1, /* a core name this table does not know: never second-guessed */
    BLAS_ISA_SSE = 0,      /* Prescott, Core2, Nehalem, Opteron, Barcelona, Atom, ... */
    BLAS_ISA_AVX = 1,      /* Sandybridge, Bulldozer, Piledriver, Steamroller */
    BLAS_ISA_AVX2 = 2,     /* Haswell, Zen, Excavator */
    BLAS_ISA_AVX512 = 3    /* SkylakeX, Cooperlake, SapphireRapids */
} blas_isa;

/* The level an OpenBLAS core name's kernels use (case-insensitive), or BLAS_ISA_UNKNOWN. */
blas_isa blas_core_isa(const char *core);

/* The highest level this CPU and its operating system run (cpuid and xgetbv, through the
 * compiler's __builtin_cpu_supports); BLAS_ISA_SSE on a non-x86 machine's terms. */
blas_isa blas_cpu_isa(void);

/* The core OpenBLAS runs in this process (openblas_get_corename()). */
const char *blas_core_running(void);

/* The OPENBLAS_CORETYPE value for a CPU of level cpu when OpenBLAS chose `core`: a core of
 * level cpu when core is known and of a lower level, otherwise NULL (keep OpenBLAS's). */
const char *blas_core_better(const char *core, blas_isa cpu);

#endif
