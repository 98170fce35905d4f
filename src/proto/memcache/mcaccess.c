#include "mcaccess.h"

#include <string.h>

#include "conflisten.h"

#define R ROLE_READ
#define P ROLE_PRODUCER
#define W ROLE_WORKER
#define A ROLE_ADMIN
#define ANY (R | P | W | A)

static const RoleRow rows[] = {
    /* read */
    {"get/peek", ANY},
    {"stats", ANY},
    {"dump_stats", ANY},
    {"version", ANY},
    {"status", ANY},       /* the server's state, read only */
    {"quit", ANY},
    /* producer */
    {"set", P | A},
    /* worker: every other form of get (take, /open, /close, /abort) */
    {"get", W | A},
    /* admin */
    {"delete", A},
    {"flush", A},
    {"flush_all", A},
    {"flush_expired", A},
    {"flush_all_expired", A},
    {"dump_config", A},    /* the tube policies of every tube */
    {"reload", A},
    {"shutdown", A},
    {"monitor", A},
    {"confirm", A},
};

#define NROWS (sizeof rows / sizeof rows[0])

unsigned mc_access_roles(const char *word)
{
    return role_rows_find(rows, NROWS, word);
}

static const char *name_of(int t)
{
    return mc_cmd_name((McCmdType)t);
}

size_t mc_access_init(uint8_t allow[MC_CMD_COUNT])
{
    allow[MC_CMD_UNKNOWN] = ANY; /* answered with the parser's error */
    return role_rows_fill(rows, NROWS, allow, MC_CMD_UNKNOWN + 1, MC_CMD_COUNT, name_of);
}

const char *mc_access_row(size_t i, unsigned *roles)
{
    return role_rows_at(rows, NROWS, i, roles);
}
