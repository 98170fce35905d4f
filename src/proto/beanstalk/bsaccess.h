/*
 * bsaccess.h — which roles may run each beanstalk command (spec access.md
 * §2), decided in one table keyed by the command word.
 *
 * Contract: bs_access_roles(word) gives the ROLE_* bits (conflisten.h) of
 * the roles that may run the command clients send as word ("put",
 * "stats-tube", ...; no trailing space), or 0 if the table has no row for
 * it. bs_access_init() fills allow[CMD_COUNT] from the parser's command
 * table (cmd_name), so the check per command is one array load and one
 * AND; a command of the parser that has no row gets admin only (closed by
 * default) and is counted in the return value, which the unit test and
 * the startup log hold at 0. Rows for commands this parser does not know
 * yet (replication: promote, follow, replicate, stats-replication) wait
 * there for the parser that does. Every row includes admin.
 */
#ifndef TUBED_BSACCESS_H
#define TUBED_BSACCESS_H

#include <stddef.h>
#include <stdint.h>

#include "parse.h"

unsigned bs_access_roles(const char *word);
/* Fill allow[]; returns how many parser commands had no row. */
size_t bs_access_init(uint8_t allow[CMD_COUNT]);
/* The table's rows, for tests and docs: word of row i, or NULL past the end. */
const char *bs_access_row(size_t i, unsigned *roles);

#endif
