#include "parse.h"

#include <string.h>

#include "numparse.h"

enum ArgShape { ARG_NONE, ARG_ID, ARG_COUNT, ARG_BOUND, ARG_TIMEOUT, ARG_PUT, ARG_RELEASE,
                ARG_BURY, ARG_TUBE, ARG_PAUSE, ARG_LIST, ARG_MOVE, ARG_REPL, ARG_ADDR };

/* list-jobs' state words, with the JobState each names (-1: all). */
static const struct {
    const char *word;
    int state;
} list_states[] = {
    {"ready", 0}, {"reserved", 1}, {"delayed", 2}, {"buried", 3}, {"all", -1},
};

static int next_state(const char **p, const char *end, int *state)
{
    const char *q = *p;

    while (q < end && *q == ' ')
        q++;
    for (size_t i = 0; i < sizeof list_states / sizeof list_states[0]; i++) {
        size_t n = strlen(list_states[i].word);
        if ((size_t)(end - q) >= n && !memcmp(q, list_states[i].word, n) &&
            (q + n == end || q[n] == ' ')) {
            *state = list_states[i].state;
            *p = q + n;
            return 0;
        }
    }
    return -1;
}

static const struct {
    const char *word;
    unsigned char word_len;
    unsigned char shape;
} table[CMD_COUNT] = {
#define X(e, w, a) [CMD_##e] = {w, sizeof(w) - 1, a},
    TUBED_COMMANDS(X)
#undef X
};

static const char *const names[CMD_COUNT] = {
#define X(e, w, a) [CMD_##e] = w,
    TUBED_COMMANDS(X)
#undef X
};

const char *cmd_name(CmdType type)
{
    static char trimmed[CMD_COUNT][24];
    size_t n;

    if (type >= CMD_COUNT)
        return "unknown";
    if (!trimmed[type][0]) {
        n = strlen(names[type]);
        if (n && names[type][n - 1] == ' ')
            n--;
        memcpy(trimmed[type], names[type], n);
        trimmed[type][n] = '\0';
    }
    return trimmed[type];
}

/* A cursor over the argument part of a line. */
typedef struct {
    const char *p, *end;
} Args;

static void skip_spaces(Args *a)
{
    while (a->p < a->end && *a->p == ' ')
        a->p++;
}

static size_t digit_run(const Args *a)
{
    const char *q = a->p;

    while (q < a->end && *q >= '0' && *q <= '9')
        q++;
    return (size_t)(q - a->p);
}

static int next_u64(Args *a, uint64_t *out)
{
    size_t n;

    skip_spaces(a);
    n = digit_run(a);
    if (parse_u64(a->p, n, out) < 0)
        return -1;
    a->p += n;
    return 0;
}

static int next_u32(Args *a, uint32_t *out)
{
    size_t n;

    skip_spaces(a);
    n = digit_run(a);
    if (parse_u32(a->p, n, out) < 0)
        return -1;
    a->p += n;
    return 0;
}

/* The name ends at the first character that cannot be in a name; whether
 * it is a legal name is checked by the caller. */
static int next_name(Args *a, Cmd *cmd)
{
    const char *q;

    skip_spaces(a);
    for (q = a->p; q < a->end && tube_name_char((unsigned char)*q); q++)
        ;
    if (q == a->p)
        return -1;
    cmd->name = a->p;
    cmd->name_len = (size_t)(q - a->p);
    a->p = q;
    return 0;
}

static int parse_args(int shape, Args *a, Cmd *cmd)
{
    switch (shape) {
    case ARG_NONE:
        return 0;
    case ARG_ID:
        return next_u64(a, &cmd->id);
    case ARG_COUNT:
        return next_u32(a, &cmd->count);
    case ARG_BOUND: {
        /* kick's bound: beanstalkd reads any 64-bit number and keeps its
         * low 32 bits (kick 4294967296 is KICKED 0 there), so tubed does. */
        uint64_t v;
        if (next_u64(a, &v) < 0)
            return -1;
        cmd->count = (uint32_t)v;
        return 0;
    }
    case ARG_TIMEOUT:
        /* reserve-with-timeout's seconds may have a fraction: JavaScript
         * clients and Ruby's beaneater send the number as the language
         * prints it (2.5), and beanstalkd 1.12 waits its whole seconds.
         * Only digits '.' digits; other junk stays malformed
         * (doc/protocol.md). */
        if (next_u32(a, &cmd->count) < 0)
            return -1;
        if (a->p < a->end && *a->p == '.') {
            a->p++;
            size_t n = digit_run(a);
            if (n == 0)
                return -1;
            a->p += n;
        }
        return 0;
    case ARG_PUT:
        if (next_u32(a, &cmd->pri) < 0 || next_u32(a, &cmd->delay) < 0 ||
            next_u32(a, &cmd->ttr) < 0)
            return -1;
        return next_u32(a, &cmd->bytes);
    case ARG_RELEASE:
        if (next_u64(a, &cmd->id) < 0 || next_u32(a, &cmd->pri) < 0)
            return -1;
        return next_u32(a, &cmd->delay);
    case ARG_BURY:
        if (next_u64(a, &cmd->id) < 0)
            return -1;
        return next_u32(a, &cmd->pri);
    case ARG_TUBE:
        /* The whole rest of the line is the name: "use  x" and "use x "
         * are malformed, as in beanstalkd. */
        if (!tube_name_valid(a->p, (size_t)(a->end - a->p)))
            return -1;
        cmd->name = a->p;
        cmd->name_len = (size_t)(a->end - a->p);
        a->p = a->end;
        return 0;
    case ARG_LIST:
        /* list-jobs <tube> <state> <from-id> <count>, count 1..1000 */
        if (next_name(a, cmd) < 0 || !tube_name_valid(cmd->name, cmd->name_len) ||
            a->p == a->end || *a->p != ' ' || next_state(&a->p, a->end, &cmd->state) < 0 ||
            next_u64(a, &cmd->id) < 0 || next_u32(a, &cmd->count) < 0)
            return -1;
        return cmd->count >= 1 && cmd->count <= 1000 ? 0 : -1;
    case ARG_MOVE:
        /* move-job <id> <tube>: the rest of the line is the name */
        if (next_u64(a, &cmd->id) < 0 || a->p == a->end || *a->p != ' ')
            return -1;
        a->p++;
        if (!tube_name_valid(a->p, (size_t)(a->end - a->p)))
            return -1;
        cmd->name = a->p;
        cmd->name_len = (size_t)(a->end - a->p);
        a->p = a->end;
        return 0;
    case ARG_REPL:
        /* replicate <epoch> <position> (doc/replication.md) */
        if (next_u64(a, &cmd->id) < 0)
            return -1;
        return next_u64(a, &cmd->id2);
    case ARG_ADDR:
        /* follow <address>: the rest of the line, printable, no spaces */
        if (a->p == a->end || a->end - a->p > 200)
            return -1;
        for (const char *q = a->p; q < a->end; q++)
            if (*q <= ' ' || *q > '~')
                return -1;
        cmd->name = a->p;
        cmd->name_len = (size_t)(a->end - a->p);
        a->p = a->end;
        return 0;
    case ARG_PAUSE:
        if (next_name(a, cmd) < 0 || next_u32(a, &cmd->delay) < 0 ||
            a->p != a->end)
            return -1;
        if (!tube_name_valid(cmd->name, cmd->name_len)) {
            cmd->counted = 1;
            return -1;
        }
        return 0;
    }
    return -1;
}

ParseResult parse_command(const char *line, size_t len, Cmd *cmd)
{
    Args a;
    int t;

    memset(cmd, 0, sizeof *cmd);
    for (t = 0; t < CMD_COUNT; t++)
        if (len >= table[t].word_len &&
            memcmp(line, table[t].word, table[t].word_len) == 0)
            break;
    if (t == CMD_COUNT)
        return memchr(line, '\0', len) ? PARSE_BAD_FORMAT : PARSE_UNKNOWN;
    cmd->type = (CmdType)t;
    if (memchr(line, '\0', len))
        return PARSE_BAD_FORMAT;
    a.p = line + table[t].word_len;
    a.end = line + len;
    if (parse_args(table[t].shape, &a, cmd) < 0)
        return PARSE_BAD_FORMAT;
    if (a.p != a.end) {
        cmd->counted = cmd->type == CMD_PUT;
        return PARSE_BAD_FORMAT;
    }
    return PARSE_OK;
}
