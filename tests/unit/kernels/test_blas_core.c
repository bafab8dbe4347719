/* test_blas_core.c -- OpenBLAS's kernel choice against what the CPU runs (blas_core.h):
 * (1) the level of each core name and the better core for each (core, CPU) pair, written
 *     here from the instruction sets of the CPUs each core is named for;
 * (2) the CPU's level (__builtin_cpu_supports) against the flags the Linux kernel lists in
 *     /proc/cpuinfo, an independent reading of the same cpuid and xgetbv bits (skipped where
 *     there is no /proc/cpuinfo or no x86-64). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_core.h"
#include "check.h"

static const char *name_of(const char *s) { return s ? s : "(keep OpenBLAS's)"; }

static void check_better(const char *core, blas_isa cpu, const char *want) {
    const char *got = blas_core_better(core, cpu);
    CHECK((got == NULL && want == NULL) || (got && want && !strcmp(got, want)),
          "core %s on a level-%d CPU: got %s, want %s", core ? core : "NULL", (int)cpu,
          name_of(got), name_of(want));
}

/* 1 if the space-separated flags line holds flag as a whole word */
static int has_flag(const char *flags, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)); p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') &&
            (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

static void check_cpu_against_proc(void) {
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        printf("test_blas_core: no /proc/cpuinfo: the CPU level's cross-check skipped\n");
        return;
    }
    static char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = !strncmp(line, "flags", 5);
    fclose(f);
    if (!found) {
        printf("test_blas_core: /proc/cpuinfo has no flags line: cross-check skipped\n");
        return;
    }
    blas_isa want = BLAS_ISA_SSE;
    if (has_flag(line, "avx")) want = BLAS_ISA_AVX;
    if (has_flag(line, "avx2") && has_flag(line, "fma")) want = BLAS_ISA_AVX2;
    if (has_flag(line, "avx512f") && has_flag(line, "avx512cd") && has_flag(line, "avx512bw") &&
        has_flag(line, "avx512dq") && has_flag(line, "avx512vl"))
        want = BLAS_ISA_AVX512;
    CHECK(blas_cpu_isa() == want, "blas_cpu_isa() = %d, /proc/cpuinfo's flags say %d",
          (int)blas_cpu_isa(), (int)want);
    printf("test_blas_core: this CPU runs level %d; OpenBLAS runs %s here\n", (int)want,
           blas_core_running());
#else
    printf("test_blas_core: not x86-64: the CPU level's cross-check skipped\n");
#endif
}

int main(void) {
    /* (1) levels: SSE cores, AVX, AVX2, AVX-512, spelling, unknown names */
    CHECK(blas_core_isa("Prescott") == BLAS_ISA_SSE, "Prescott");
    CHECK(blas_core_isa("Nehalem") == BLAS_ISA_SSE, "Nehalem");
    CHECK(blas_core_isa("Sandybridge") == BLAS_ISA_AVX, "Sandybridge");
    CHECK(blas_core_isa("Steamroller") == BLAS_ISA_AVX, "Steamroller (AVX and FMA, no AVX2)");
    CHECK(blas_core_isa("Haswell") == BLAS_ISA_AVX2, "Haswell");
    CHECK(blas_core_isa("Zen") == BLAS_ISA_AVX2, "Zen");
    CHECK(blas_core_isa("SkylakeX") == BLAS_ISA_AVX512, "SkylakeX");
    CHECK(blas_core_isa("COOPERLAKE") == BLAS_ISA_AVX512, "case-insensitive");
    CHECK(blas_core_isa("NEOVERSEN1") == BLAS_ISA_UNKNOWN, "an ARM core is not second-guessed");
    CHECK(blas_core_isa("") == BLAS_ISA_UNKNOWN, "empty");
    CHECK(blas_core_isa(NULL) == BLAS_ISA_UNKNOWN, "NULL");

    /* the case that made this: Debian 12's OpenBLAS on an Emerald Rapids Xeon */
    check_better("Prescott", BLAS_ISA_AVX512, "SkylakeX");
    check_better("Prescott", BLAS_ISA_AVX2, "Haswell");
    check_better("Prescott", BLAS_ISA_AVX, "Sandybridge");
    check_better("Prescott", BLAS_ISA_SSE, NULL);
    check_better("Sandybridge", BLAS_ISA_AVX2, "Haswell");
    check_better("Haswell", BLAS_ISA_AVX512, "SkylakeX"); /* a Zen 4 seen as Zen, say */
    check_better("Haswell", BLAS_ISA_AVX2, NULL);
    check_better("SkylakeX", BLAS_ISA_AVX512, NULL);
    check_better("Cooperlake", BLAS_ISA_AVX512, NULL); /* never a step down */
    check_better("SkylakeX", BLAS_ISA_AVX2, NULL);     /* nor to a lower level */
    check_better("NEOVERSEN1", BLAS_ISA_AVX512, NULL);
    check_better(NULL, BLAS_ISA_AVX512, NULL);
    check_better("Prescott", BLAS_ISA_UNKNOWN, NULL);

    /* (2) the CPU */
    check_cpu_against_proc();
    return check_summary("test_blas_core");
}
