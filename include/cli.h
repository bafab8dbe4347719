/* cli.h -- the subcommands of build/attnsweep. Each lives in src/cmd_NAME.c,
 * parses its own arguments (every one answers --help), and returns the
 * process exit code: 0 success, 1 error (one line on stderr), 2 bad usage,
 * 3 interrupted but resumable (see README). */
#ifndef ATTNSWEEP_CLI_H
#define ATTNSWEEP_CLI_H

enum {
    AS_EXIT_OK = 0,
    AS_EXIT_ERROR = 1,
    AS_EXIT_USAGE = 2,
    AS_EXIT_RESUMABLE = 3,
};

int cmd_synth(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_merge(int argc, char **argv);

#endif
