/* test_args.c -- the option parser of every command (src/cli/args.c): typed values and
 * their one-line errors, --set lists, positional counts, required options, --help's
 * generated usage line, "--", values that begin with '-', and the dispatch's stop at the
 * command. Each parse's stderr (or stdout for --help) is captured and checked. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "check.h"
#include "errors.h"

static char captured[8192];

/* Parses the NULL-terminated arguments after "prog" with spec; captures fd (1 or 2). */
static int parse(const arg_spec *spec, int fd, int *ret, ...) {
    char *argv[32] = {"prog"};
    int argc = 1;
    va_list ap;
    va_start(ap, ret);
    for (char *a; (a = va_arg(ap, char *)) && argc < 31;) argv[argc++] = a;
    va_end(ap);
    FILE *tmp = tmpfile();
    fflush(fd == 1 ? stdout : stderr);
    int saved = dup(fd);
    dup2(fileno(tmp), fd);
    int code = -1;
    *ret = args_parse(spec, argc, argv, &code);
    fflush(fd == 1 ? stdout : stderr);
    dup2(saved, fd);
    close(saved);
    rewind(tmp);
    size_t n = fread(captured, 1, sizeof captured - 1, tmp);
    captured[n] = 0;
    fclose(tmp);
    return code;
}

static int shard_i, shard_k;
static int parse_ik(const arg_opt *o, const char *v, const char **why) {
    (void)o;
    char tail;
    if (sscanf(v, "%d/%d%c", &shard_i, &shard_k, &tail) != 2) {
        *why = "is not I/K";
        return -1;
    }
    return 0;
}

int main(void) {
    int flag, ret, code;
    long long count, length;
    uint64_t seed;
    double rate;
    const char *name;
    arg_list sets, pos;
    const arg_opt opts[] = {
        OPT_FLAG("flag", &flag, "a flag"),
        OPT_INT("count", "N", &count, 0, 10, "a count\nof two lines"),
        OPT_INT_REQUIRED("length", "L", &length, 1, LLONG_MAX, "a length"),
        OPT_U64("seed", "S", &seed, "a seed"),
        OPT_POSITIVE("rate", "X", &rate, "a rate"),
        OPT_STRING("name", "NAME", &name, "a name"),
        OPT_LIST("set", "KEY=VALUE", &sets, "a setting"),
        OPT_CALLBACK("shard", "I/K", NULL, parse_ik, "a shard"),
        OPT_END()};
    arg_spec spec = {.prog = "attnsweep t", .positional = "CONFIG", .min_pos = 1, .max_pos = 2,
                     .pos = &pos, .description = "Does t.\n", .epilogue = "Exit: 0.\n", .opts = opts};
#define RESET() (flag = 0, count = -1, length = -1, seed = 0, rate = 0, name = NULL, shard_i = shard_k = -1)

    RESET();
    code = parse(&spec, 2, &ret, "a.cfg", "--flag", "--count", "3", "--length=7", "--seed",
                 "18446744073709551615", "--rate", "0.5", "--name", "-dash", "--set", "x=1",
                 "--set=y=[1,2]", "--shard", "2/5", "b.cfg", NULL);
    CHECK(ret == 0 && captured[0] == 0, "a good line parses (ret %d, stderr '%s')", ret, captured);
    CHECK(flag == 1 && count == 3 && length == 7 && seed == UINT64_MAX && rate == 0.5, "typed values");
    CHECK(name && !strcmp(name, "-dash"), "a value may begin with '-': %s", name ? name : "(null)");
    CHECK(sets.n == 2 && !strcmp(sets.v[0], "x=1") && !strcmp(sets.v[1], "y=[1,2]"), "--set list in order");
    CHECK(pos.n == 2 && !strcmp(pos.v[0], "a.cfg") && !strcmp(pos.v[1], "b.cfg"), "positionals");
    CHECK(shard_i == 2 && shard_k == 5, "callback got 2/5");
    args_free(&spec);
    CHECK(sets.v == NULL && pos.v == NULL, "args_free frees the lists");

    struct { const char *args[6]; const char *want; } bad[] = {
        {{"a", "--length", "1", "--bogus"}, "attnsweep t: unknown option '--bogus' (try --help)\n"},
        {{"a", "--length", "1", "-x"}, "attnsweep t: unknown option '-x' (try --help)\n"},
        {{"a", "--length"}, "attnsweep t: --length needs a value (try --help)\n"},
        {{"a", "--length", "0"}, "attnsweep t: --length '0' is not a positive integer\n"},
        {{"a", "--length", "1", "--count", "11"}, "attnsweep t: --count '11' is not an integer in 0..10\n"},
        {{"a", "--length", "1", "--count", "2x"}, "attnsweep t: --count '2x' is not an integer in 0..10\n"},
        {{"a", "--length", "1", "--seed", "-1"}, "attnsweep t: --seed '-1' is not an unsigned 64-bit integer\n"},
        {{"a", "--length", "1", "--seed", "18446744073709551616"},
         "attnsweep t: --seed '18446744073709551616' is not an unsigned 64-bit integer\n"},
        {{"a", "--length", "1", "--rate", "0"}, "attnsweep t: --rate '0' is not a positive number\n"},
        {{"a", "--length", "1", "--rate", "inf"}, "attnsweep t: --rate 'inf' is not a positive number\n"},
        {{"a", "--length", "1", "--flag=1"}, "attnsweep t: --flag takes no value (got '--flag=1')\n"},
        {{"a", "--length", "1", "--shard", "2"}, "attnsweep t: --shard '2' is not I/K\n"},
        {{"a"}, "attnsweep t: --length is required (try --help)\n"},
        {{"--length", "1"}, "attnsweep t: missing CONFIG (try --help)\n"},
        {{"a", "b", "c", "--length", "1"}, "attnsweep t: at most 2 CONFIG arguments (got 'c' too)\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RESET();
        const char **a = bad[i].args;
        code = parse(&spec, 2, &ret, a[0], a[1], a[2], a[3], a[4], a[5], NULL);
        CHECK(ret == 1 && code == AS_EXIT_USAGE, "case %zu: exit 2 (ret %d code %d)", i, ret, code);
        CHECK(!strcmp(captured, bad[i].want), "case %zu: stderr '%s', want '%s'", i, captured, bad[i].want);
    }

    /* --help: the generated usage line and option list, on stdout, exit 0 */
    RESET();
    code = parse(&spec, 2, &ret, "--bogus", "--help", NULL);
    CHECK(ret == 1 && code == AS_EXIT_USAGE, "an unknown option before --help is the error");
    CHECK(strstr(captured, "--bogus") != NULL, "it names the option");
    code = parse(&spec, 1, &ret, "--help", "--bogus", NULL);
    CHECK(ret == 1 && code == AS_EXIT_OK, "--help exits 0 (ret %d code %d)", ret, code);
    CHECK(!strncmp(captured, "usage: attnsweep t CONFIG... [--flag] [--count N] --length L [--seed S]", 71),
          "usage line from the table: '%.100s'", captured);
    CHECK(strstr(captured, "[--set KEY=VALUE]...") != NULL, "a list is repeatable in the usage line");
    CHECK(strstr(captured, "\nDoes t.\n") && strstr(captured, "\nExit: 0.\n"), "description and epilogue");
    CHECK(strstr(captured, "  --count N        a count\n                   of two lines\n") != NULL,
          "a help text of two lines is indented: '%s'", captured);
    CHECK(strstr(captured, "  -h, --help       this text\n") != NULL, "-h, --help listed");
    code = parse(&spec, 1, &ret, "-h", NULL);
    CHECK(ret == 1 && code == AS_EXIT_OK && !strncmp(captured, "usage: ", 7), "-h is --help");

    /* "--" ends the options; a lone "-" is a positional (stdin) */
    RESET();
    code = parse(&spec, 2, &ret, "--length", "2", "--", "--flag", "-", NULL);
    CHECK(ret == 0 && flag == 0 && pos.n == 2 && !strcmp(pos.v[0], "--flag") && !strcmp(pos.v[1], "-"),
          "after --: positionals (ret %d, n %zu)", ret, pos.n);
    args_free(&spec);

    /* the dispatch: options up to the command, the rest not parsed */
    int version = 0;
    arg_list cmd;
    const arg_opt top[] = {OPT_FLAG("version", &version, "v"), OPT_END()};
    arg_spec disp = {.prog = "attnsweep", .positional = "COMMAND", .max_pos = 1, .pos = &cmd, .opts = top,
                     .stop_at_positional = 1};
    code = parse(&disp, 2, &ret, "--version", "plan", "--bogus", "x", NULL);
    CHECK(ret == 0 && version == 1 && cmd.n == 1 && !strcmp(cmd.v[0], "plan"),
          "stop at the command (ret %d, stderr '%s')", ret, captured);
    args_free(&disp);
    return check_summary("test_args");
}
