/* main.c -- build/attnsweep: dispatch to a subcommand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "blas_core.h"
#include "cli.h"
#include "version.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "run (or resume) a sweep: mpirun -np P attnsweep run CONFIG"},
    {"plan", cmd_plan, "print a sweep's grid, cell count, time, memory and output size"},
    {"status", cmd_status, "tell how far a sweep's results file got"},
    {"merge", cmd_merge, "join the shard files of a job array into one results file"},
    {"synth", cmd_synth, "write a synthetic GPT-2 model directory (Hugging Face layout)"},
    {"dump", cmd_dump, "write one window's q, k, v, scores, pattern and logits to HDF5"},
    {"tokenize", cmd_tokenize, "GPT-2 byte-level BPE: text to token ids and back"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name)) return &commands[i];
    return NULL;
}

static void list_commands(FILE *out) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nattnsweep %s -- limits of softmax attention in GPT-2 (arXiv 2508.17821)\n",
            AS_VERSION);
}

/* OpenBLAS chose its kernels as it loaded, before main. When it took this CPU for an older
 * one (blas_core.h), the process runs itself again with OPENBLAS_CORETYPE naming the kernels
 * the CPU runs; ATTNSWEEP_BLAS_DETECTED keeps OpenBLAS's own choice for --version. Every MPI
 * rank does this on its own before MPI_Init (exec keeps the process id and, from the
 * program's own path, its name). A user's OPENBLAS_CORETYPE is left alone. */
static void rerun_on_better_blas(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;
    const char *detected = blas_core_running();
    const char *better = blas_core_better(detected, blas_cpu_isa());
    if (!better || setenv("OPENBLAS_CORETYPE", better, 1) ||
        setenv("ATTNSWEEP_BLAS_DETECTED", detected, 1))
        return;
    /* the program's own path, not /proc/self/exe: the process keeps its name (ps, pkill) */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        execv(self, argv);
    }
    int why = errno; /* no /proc: go on with OpenBLAS's choice, and say so */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("ATTNSWEEP_BLAS_DETECTED");
    fprintf(stderr, "attnsweep: OpenBLAS runs its %s kernels on a CPU that runs %s's; could not "
            "run again with OPENBLAS_CORETYPE=%s (%s): set it yourself for a faster forward\n",
            detected, better, better, strerror(why));
}

static void print_version(void) {
    printf("attnsweep %s (%s)\n", AS_VERSION, AS_GIT_COMMIT);
    const char *detected = getenv("ATTNSWEEP_BLAS_DETECTED");
    printf("blas: %s kernels", blas_core_running());
    if (detected)
        printf(" (OPENBLAS_CORETYPE set by attnsweep: OpenBLAS took this CPU for %s)", detected);
    else if (getenv("OPENBLAS_CORETYPE"))
        printf(" (OPENBLAS_CORETYPE=%s)", getenv("OPENBLAS_CORETYPE"));
    printf("\n");
}

int main(int argc, char **argv) {
    rerun_on_better_blas(argv);
    int version = 0, code;
    arg_list pos = {0};
    const arg_opt opts[] = {OPT_FLAG("version", &version, "the version and git commit"), OPT_END()};
    /* options before the command are the program's; the command and the rest are its own */
    arg_spec spec = {.prog = "attnsweep", .usage_extra = "       attnsweep help COMMAND   (= attnsweep COMMAND --help)\n",
                     .positional = "COMMAND [options]", .min_pos = 0, .max_pos = 1, .pos = &pos,
                     .opts = opts, .stop_at_positional = 1};
    if (argc < 2) {
        args_help(&spec, stderr);
        list_commands(stderr);
        return AS_EXIT_USAGE;
    }
    if (args_parse(&spec, argc, argv, &code)) {
        if (code == AS_EXIT_OK) list_commands(stdout);
        return code;
    }
    const char *name = pos.n ? pos.v[0] : NULL;
    args_free(&spec);
    if (version) {
        print_version();
        return AS_EXIT_OK;
    }
    if (!name) {
        args_help(&spec, stderr);
        list_commands(stderr);
        return AS_EXIT_USAGE;
    }
    /* position of the command in argv: the options before it are the program's */
    int at = 1;
    while (at < argc && strcmp(argv[at], name)) at++;
    if (!strcmp(name, "help")) {
        if (at + 1 >= argc) {
            args_help(&spec, stdout);
            list_commands(stdout);
            return AS_EXIT_OK;
        }
        /* attnsweep help CMD = attnsweep CMD --help */
        const command *c = find_command(argv[at + 1]);
        if (c) {
            char *args[] = {argv[at + 1], "--help", NULL};
            return c->fn(2, args);
        }
        fprintf(stderr, "attnsweep help: unknown command '%s' (try attnsweep --help)\n", argv[at + 1]);
        return AS_EXIT_USAGE;
    }
    const command *c = find_command(name);
    if (c) return c->fn(argc - at, argv + at);
    fprintf(stderr, "attnsweep: unknown command '%s' (try attnsweep --help)\n", name);
    return AS_EXIT_USAGE;
}
