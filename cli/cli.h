/*
 * cli.h — shared pieces of the eddy command: error reporting and the subcommands.
 *
 * The CLI uses only include/eddy.h; every subcommand returns the process exit
 * status (0 success, 1 error) and reports errors as one line "eddy: error: ...".
 */
#ifndef EDDY_CLI_H
#define EDDY_CLI_H

#include "eddy.h"

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int cli_error(const char *fmt, ...); /* prints "eddy: error: ..." and returns 1 */

/* Parses a non-negative integer argument; on failure prints an error naming flag. */
int cli_parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out);

/* Parses a number in [lo, hi]; on failure prints an error naming flag. */
int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);

int cmd_inspect(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_chat_format(int argc, char **argv);

#endif
