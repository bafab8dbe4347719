/* blas_core.c -- OpenBLAS's kernel choice against what the CPU can run (blas_core.h). */
#include "blas_core.h"

#include <cblas.h>
#include <stddef.h>
#include <strings.h>

typedef struct {
    const char *core; /* as openblas_get_corename() spells it */
    blas_isa isa;
} core_level;

/* OpenBLAS's x86-64 DYNAMIC_ARCH cores (driver/others/dynamic.c of releases 0.3.x). */
static const core_level levels[] = {
    {"Katmai", BLAS_ISA_SSE},          {"Coppermine", BLAS_ISA_SSE},
    {"Northwood", BLAS_ISA_SSE},       {"Prescott", BLAS_ISA_SSE},
    {"Banias", BLAS_ISA_SSE},          {"Atom", BLAS_ISA_SSE},
    {"Core2", BLAS_ISA_SSE},           {"Penryn", BLAS_ISA_SSE},
    {"Dunnington", BLAS_ISA_SSE},      {"Nehalem", BLAS_ISA_SSE},
    {"Athlon", BLAS_ISA_SSE},          {"Opteron", BLAS_ISA_SSE},
    {"Opteron_SSE3", BLAS_ISA_SSE},    {"Barcelona", BLAS_ISA_SSE},
    {"Nano", BLAS_ISA_SSE},            {"Sandybridge", BLAS_ISA_AVX},
    {"Bulldozer", BLAS_ISA_AVX},       {"Piledriver", BLAS_ISA_AVX},
    {"Steamroller", BLAS_ISA_AVX},    {"Excavator", BLAS_ISA_AVX2},
    {"Haswell", BLAS_ISA_AVX2},        {"Zen", BLAS_ISA_AVX2},
    {"SkylakeX", BLAS_ISA_AVX512},     {"Cooperlake", BLAS_ISA_AVX512},
    {"SapphireRapids", BLAS_ISA_AVX512},
};

/* The core each level asks for: the oldest core of that level, which every CPU of the level
 * runs (Cooperlake's extra kernels need AVX512-BF16, SapphireRapids' need AMX). */
static const char *const core_of_level[] = {"Prescott", "Sandybridge", "Haswell", "SkylakeX"};

blas_isa blas_core_isa(const char *core) {
    if (!core) return BLAS_ISA_UNKNOWN;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (!strcasecmp(core, levels[i].core)) return levels[i].isa;
    return BLAS_ISA_UNKNOWN;
}

blas_isa blas_cpu_isa(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* SkylakeX's kernels use the F, CD, BW, DQ and VL subsets */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return BLAS_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return BLAS_ISA_AVX2;
    if (__builtin_cpu_supports("avx")) return BLAS_ISA_AVX;
#endif
    return BLAS_ISA_SSE;
}

const char *blas_core_running(void) { return openblas_get_corename(); }

const char *blas_core_better(const char *core, blas_isa cpu) {
    blas_isa have = blas_core_isa(core);
    if (have == BLAS_ISA_UNKNOWN || cpu <= have || cpu > BLAS_ISA_AVX512) return NULL;
    return core_of_level[cpu];
}
