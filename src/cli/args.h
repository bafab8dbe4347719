/* args.h -- the one option parser of every command (in the manner of git's parse-options).
 *
 * A command describes its options in a table of arg_opt (type, long name, the value's
 * name for the usage line, where the value goes, one help text) and its positional
 * arguments by name and count; args_parse() walks argv once and:
 *   - accepts `--name VALUE` and `--name=VALUE` for every option with a value, `-h`/`--help`
 *     and `--` (the rest are positional);
 *   - checks the typed values (an integer in its range, a positive number, an unsigned
 *     64-bit integer), appends each `--set KEY=VALUE` of a list option, marks required
 *     options and positional counts;
 *   - on --help prints the usage line and the option list generated from the table,
 *     with the command's description and epilogue around them, to stdout;
 *   - on any mistake prints one line naming it ("attnsweep plan: unknown option '--x'
 *     (try --help)") to stderr.
 * A value-taking option takes the next argument whatever it looks like (a value may begin
 * with '-'). Options and positional arguments may come in any order, unless
 * stop_at_positional (the program's dispatch: the rest belongs to the command). A lone
 * "-" is a positional argument (stdin). */
#ifndef ATTNSWEEP_CLI_ARGS_H
#define ATTNSWEEP_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    ARG_END = 0,  /* ends the table */
    ARG_FLAG,     /* int *: set to 1 */
    ARG_INT,      /* long long *: an integer in [min, max] */
    ARG_U64,      /* uint64_t *: an unsigned 64-bit integer, digits only */
    ARG_DOUBLE,   /* double *: a finite number > min (min 0: a positive number) */
    ARG_STRING,   /* const char **: the argument itself (the last one given wins) */
    ARG_LIST,     /* arg_list *: every occurrence, in order (--set KEY=VALUE...) */
    ARG_CALLBACK, /* any: parse(opt, value) checks and stores it, 0 or -1 with why */
} arg_type;

typedef struct {
    const char **v; /* [n] the arguments (pointers into argv); args_free frees the array */
    size_t n;
} arg_list;

typedef struct arg_opt arg_opt;
struct arg_opt {
    arg_type type;
    const char *name;       /* the long name without "--" */
    const char *value_name; /* in the usage line and the list: "KEY=VALUE"; NULL for a flag */
    void *value;            /* where the value goes (the type above says what it points to) */
    const char *help;       /* the option list's text; '\n' starts an indented line */
    int required;           /* missing from argv: "--NAME is required (try --help)" */
    long long min, max;     /* ARG_INT: the range (min 1: "is not a positive integer");
                             * ARG_DOUBLE: min only, the value must exceed it */
    /* ARG_CALLBACK: stores the value, or returns -1 with why (a phrase following the
     * quoted value: "needs I/K with 0 <= I < K") */
    int (*parse)(const arg_opt *opt, const char *value, const char **why);
};

typedef struct {
    const char *prog;         /* "attnsweep plan": starts every message */
    const char *usage_prefix; /* the usage line's command, when not prog ("mpirun -np P ...") */
    const char *usage_extra;  /* more usage lines, verbatim (other forms of the command) */
    const char *positional;   /* the name in the usage line and messages: "CONFIG", "SHARD.h5" */
    size_t min_pos, max_pos;  /* counts accepted (max_pos 0: no positional; SIZE_MAX: any) */
    arg_list *pos;            /* the positional arguments (may be NULL when max_pos is 0) */
    const char *description;  /* the help text between the usage and the option list */
    const char *epilogue;     /* the help text after the option list */
    const arg_opt *opts;      /* the table, ended by {ARG_END} */
    int stop_at_positional;   /* stop at the first positional: what follows is not parsed */
} arg_spec;

/* The table's entries, as git's OPT_* macros (designated, so each names what it sets). */
#define OPT_FLAG(n, ptr, h) {.type = ARG_FLAG, .name = (n), .value = (ptr), .help = (h)}
#define OPT_STRING(n, v, ptr, h) {.type = ARG_STRING, .name = (n), .value_name = (v), .value = (ptr), .help = (h)}
#define OPT_STRING_REQUIRED(n, v, ptr, h) \
    {.type = ARG_STRING, .name = (n), .value_name = (v), .value = (ptr), .help = (h), .required = 1}
#define OPT_INT(n, v, ptr, lo, hi, h) \
    {.type = ARG_INT, .name = (n), .value_name = (v), .value = (ptr), .help = (h), .min = (lo), .max = (hi)}
#define OPT_INT_REQUIRED(n, v, ptr, lo, hi, h) \
    {.type = ARG_INT, .name = (n), .value_name = (v), .value = (ptr), .help = (h), .min = (lo), \
     .max = (hi), .required = 1}
#define OPT_U64(n, v, ptr, h) {.type = ARG_U64, .name = (n), .value_name = (v), .value = (ptr), .help = (h)}
#define OPT_POSITIVE(n, v, ptr, h) \
    {.type = ARG_DOUBLE, .name = (n), .value_name = (v), .value = (ptr), .help = (h), .min = 0}
#define OPT_LIST(n, v, ptr, h) {.type = ARG_LIST, .name = (n), .value_name = (v), .value = (ptr), .help = (h)}
#define OPT_CALLBACK(n, v, ptr, fn, h) \
    {.type = ARG_CALLBACK, .name = (n), .value_name = (v), .value = (ptr), .help = (h), .parse = (fn)}
#define OPT_END() {.type = ARG_END}

/* Parses argv[1..argc) by spec. Returns 0 when the command goes on, else 1 with
 * *exit_code: AS_EXIT_OK after --help, AS_EXIT_USAGE after a mistake (its line printed),
 * AS_EXIT_ERROR when out of memory. The lists of the spec are freed by args_free. */
int args_parse(const arg_spec *spec, int argc, char **argv, int *exit_code);
void args_free(const arg_spec *spec);

/* The help text (usage line, description, option list, epilogue) to out. */
void args_help(const arg_spec *spec, FILE *out);

#endif
