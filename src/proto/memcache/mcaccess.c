#include "mcaccess.h"

#include <string.h>

#include "conflisten.h"

#define R ROLE_READ
#define P ROLE_PRODUCER
#define W ROLE_WORKER
#define A ROLE_ADMIN
#define ANY (R | P | W | A)

static const struct {
    const char *word;
    uint8_t roles;
} rows[] = {
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
    for (size_t i = 0; i < NROWS; i++)
        if (!strcmp(rows[i].word, word))
            return rows[i].roles;
    return 0;
}

size_t mc_access_init(uint8_t allow[MC_CMD_COUNT])
{
    size_t missing = 0;

    allow[MC_CMD_UNKNOWN] = ANY; /* answered with the parser's error */
    for (int t = MC_CMD_UNKNOWN + 1; t < MC_CMD_COUNT; t++) {
        unsigned r = mc_access_roles(mc_cmd_name((McCmdType)t));
        if (!r) {
            missing++;
            r = A;
        }
        allow[t] = (uint8_t)r;
    }
    return missing;
}

const char *mc_access_row(size_t i, unsigned *roles)
{
    if (i >= NROWS)
        return NULL;
    *roles = rows[i].roles;
    return rows[i].word;
}
