/*
 * mcaccess.h — which roles may run each memcache command (spec access.md
 * §4), in one table keyed by the command word, as bsaccess.h does for the
 * beanstalk protocol.
 *
 * Contract: mc_access_roles(word) gives the ROLE_* bits (conflisten.h) of
 * the roles that may run word, 0 if the table has no row. "get/peek" is
 * its own row: a get whose only option is /peek reads, every other get
 * takes jobs (the front keeps the first in allow_peek). mc_access_init() fills allow[MC_CMD_COUNT] from the parser's
 * command table (mc_cmd_name); a command without a row gets admin only and
 * is counted in the return value, which tests hold at 0. Every row
 * includes admin.
 */
#ifndef TUBED_MCACCESS_H
#define TUBED_MCACCESS_H

#include <stddef.h>
#include <stdint.h>

#include "mcparse.h"

unsigned mc_access_roles(const char *word);
size_t mc_access_init(uint8_t allow[MC_CMD_COUNT]);
const char *mc_access_row(size_t i, unsigned *roles);

#endif
