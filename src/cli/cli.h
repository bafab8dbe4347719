/* cli.h -- the subcommands of build/attnsweep. Each lives in src/cli/cmd_NAME.c,
 * parses its own arguments (every one answers --help), and returns the
 * process exit code (AS_EXIT_* in errors.h). */
#ifndef ATTNSWEEP_CLI_H
#define ATTNSWEEP_CLI_H

#include "errors.h"

int cmd_synth(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_merge(int argc, char **argv);

/* --mem SIZE of plan and run: plan_parse_bytes (plan.h) into the double the option points at
 * (an OPT_CALLBACK of args.h). */
struct arg_opt;
int cli_parse_mem(const struct arg_opt *o, const char *v, const char **why);

#endif
