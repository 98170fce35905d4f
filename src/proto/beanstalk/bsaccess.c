#include "bsaccess.h"

#include <string.h>

#include "conflisten.h"

#define R ROLE_READ
#define P ROLE_PRODUCER
#define W ROLE_WORKER
#define A ROLE_ADMIN
#define ANY (R | P | W | A) /* every role includes read */

/* One row per command word. read's commands belong to every role (each
 * role is "read, and ..."); admin may run everything. */
static const RoleRow rows[] = {
    /* read */
    {"stats", ANY},
    {"stats-tube", ANY},
    {"stats-tubes", ANY},
    {"stats-job", ANY},
    {"stats-binlog", ANY},
    {"stats-replication", ANY},
    {"peek", ANY},
    {"peek-ready", ANY},
    {"peek-delayed", ANY},
    {"peek-buried", ANY},
    {"list-tubes", ANY},
    {"list-tube-used", ANY},
    {"list-tubes-watched", ANY},
    {"list-jobs", ANY},
    {"use", ANY},
    {"watch", ANY},
    {"ignore", ANY},
    {"quit", ANY},
    /* producer */
    {"put", P | A},
    /* worker */
    {"reserve", W | A},
    {"reserve-with-timeout", W | A},
    {"reserve-job", W | A},
    {"delete", W | A},
    {"release", W | A},
    {"bury", W | A},
    {"touch", W | A},
    /* admin */
    {"kick", A},
    {"kick-job", A},
    {"pause-tube", A},
    {"flush-tube", A},
    {"move-job", A},
    {"stats-listeners", A},
    {"promote", A},
    {"follow", A},
    {"replicate", A},
};

#define NROWS (sizeof rows / sizeof rows[0])

unsigned bs_access_roles(const char *word)
{
    return role_rows_find(rows, NROWS, word);
}

static const char *name_of(int t)
{
    return cmd_name((CmdType)t);
}

size_t bs_access_init(uint8_t allow[CMD_COUNT])
{
    return role_rows_fill(rows, NROWS, allow, 0, CMD_COUNT, name_of);
}

const char *bs_access_row(size_t i, unsigned *roles)
{
    return role_rows_at(rows, NROWS, i, roles);
}
