/*
 * args.h — the command line of tubed-cli.
 *
 * Contract: args_parse() reads options anywhere before a "--" (so both
 * `tubed-cli --json tubes` and `tubed-cli tubes --json` work), fills cli
 * with them over the defaults (127.0.0.1, 11300, 10 s), and leaves the
 * command and its arguments in *pos / *npos (pointing into argv). It
 * returns ST_OK, ST_USAGE with the reason in e, or -1 when --help or
 * --version was answered on stdout and the run is over. Options that
 * belong to one command (--pri, --delay, --ttr for put; --raw for peek)
 * are refused with any other.
 */
#ifndef TUBED_CLI_ARGS_H
#define TUBED_CLI_ARGS_H

#include <stdio.h>

#include "cli.h"

int args_parse(Cli *cli, int argc, char **argv, char ***pos, int *npos, Err *e);
void args_usage(FILE *out);

#endif
