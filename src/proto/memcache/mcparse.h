/*
 * mcparse.h — the kestrel (memcache text) request parser: bytes in, an McCmd
 * out. Pure: no I/O, no server state, no allocation. The contract it
 * implements is doc/kestrel.md and spec kestrel.md §3-§5.
 *
 * Contract:
 * - mc_find_line() frames: a line ends at LF, a CR right before the LF is
 *   not part of it, and a line longer than MC_MAX_LINE bytes (terminator
 *   included) is MC_LINE_TOO_LONG however much of it has arrived.
 * - mc_parse() parses one framed line (without its terminator; every other
 *   byte, CR and NUL included, is data) and always fills the whole McCmd.
 *   Tokens are separated by one or more spaces (leading and trailing ones
 *   are ignored); the command word is ASCII case-insensitive; keys, queue
 *   names, get options and "noreply" are case-sensitive.
 * - cmd->err is MC_OK or the error to answer instead of running the command;
 *   mc_error() gives its exact reply line and whether the connection then
 *   closes. Every error reply tubed's memcache side sends is in that one
 *   table, the ones only the server can detect included.
 * - cmd->has_body: a body of cmd->bytes bytes plus "\r\n" follows the line
 *   and must be read before anything is answered, error or not.
 * - cmd->noreply silences only a successful reply; an error is always
 *   answered (memcached's rule), so a malformed command is never silent.
 * - Arguments beyond those a command takes are ignored (kestrel's rule);
 *   an empty line is an unknown command.
 * - Every pointer in an McCmd points into the line given to mc_parse() and
 *   is valid as long as those bytes stay where they are. Parsing is cheap:
 *   a handler that moves its input buffer can simply parse the line again.
 *
 * A handler is then:
 *
 *     switch (mc_find_line(buf, n, &len, &used)) {
 *     case MC_LINE_INCOMPLETE: read more;
 *     case MC_LINE_TOO_LONG:   answer mc_error(MC_ERR_LINE_TOO_LONG), close;
 *     case MC_LINE_OK:         break;
 *     }
 *     mc_parse(buf, len, &cmd);
 *     if (cmd.has_body) wait for cmd.bytes + 2 more bytes;
 *     if (cmd.err) { e = mc_error(cmd.err); write e->line; close if e->close; }
 *     else switch (cmd.type) { case MC_CMD_SET: ... }
 */
#ifndef TUBED_MCPARSE_H
#define TUBED_MCPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

/* Longest request line, terminator included (spec kestrel.md §3). */
#define MC_MAX_LINE 2048

/* Largest <bytes> of a set, and largest t=<ms>: a signed 32-bit value. */
#define MC_MAX_BYTES 2147483647u

/* X(enum, command word). "gets" is parsed as MC_CMD_GET (same command). */
#define MC_COMMANDS(X)                            \
    X(SET, "set")                                 \
    X(GET, "get")                                 \
    X(DELETE, "delete")                           \
    X(FLUSH, "flush")                             \
    X(FLUSH_ALL, "flush_all")                     \
    X(FLUSH_EXPIRED, "flush_expired")             \
    X(FLUSH_ALL_EXPIRED, "flush_all_expired")     \
    X(VERSION, "version")                         \
    X(STATS, "stats")                             \
    X(DUMP_STATS, "dump_stats")                   \
    X(DUMP_CONFIG, "dump_config")                 \
    X(RELOAD, "reload")                           \
    X(SHUTDOWN, "shutdown")                       \
    X(STATUS, "status")                           \
    X(MONITOR, "monitor")                         \
    X(CONFIRM, "confirm")                         \
    X(QUIT, "quit")

typedef enum McCmdType {
    MC_CMD_UNKNOWN, /* not a command tubed runs; err is set */
#define X(e, w) MC_CMD_##e,
    MC_COMMANDS(X)
#undef X
    MC_CMD_COUNT
} McCmdType;

/* X(enum, reply line without "\r\n", 1 if the connection closes after it).
 * The first group is what mc_parse() reports; the second is detected by
 * the server, listed here so that every error reply lives in one place. */
#define MC_ERRORS(X)                                                        \
    X(LINE_TOO_LONG, "CLIENT_ERROR line too long", 1)                       \
    X(UNKNOWN_COMMAND, "CLIENT_ERROR unknown command", 1)                   \
    X(BAD_FORMAT, "CLIENT_ERROR bad command line format", 0)                \
    X(BAD_FORMAT_CLOSE, "CLIENT_ERROR bad command line format", 1)          \
    X(BAD_QUEUE_NAME, "CLIENT_ERROR bad queue name", 0)                     \
    X(BAD_TIMEOUT, "CLIENT_ERROR bad timeout", 0)                           \
    X(EMPTY_QUEUE_NAME, "CLIENT_ERROR empty queue name", 1)                 \
    X(CONFLICTING_OPTIONS, "CLIENT_ERROR conflicting options", 1)           \
    X(MISSING_ARGS, "CLIENT_ERROR missing arguments", 0)                    \
    X(STATUS_READ_ONLY, "CLIENT_ERROR status is changed by signal only", 1) \
    /* detected by the server */                                            \
    X(BAD_DATA_CHUNK, "CLIENT_ERROR bad data chunk", 1)                     \
    X(DRAINING, "SERVER_ERROR", 1)                                          \
    X(OPEN_HELD, "ERROR", 1)                                                \
    X(NOTHING_OPEN, "ERROR", 0)                                             \
    X(SHUTDOWN_DISABLED, "CLIENT_ERROR shutdown disabled", 0)               \
    X(NOT_ALLOWED, "CLIENT_ERROR not allowed", 0)                           \
    X(REPLICA, "SERVER_ERROR replica", 0)                                   \
    /* the budget of unread replies (conn.h): memcached's own words */      \
    X(BUSY_GET, "SERVER_ERROR out of memory writing get response", 0)       \
    X(BUSY_STATS, "SERVER_ERROR out of memory writing stats", 0)

typedef enum McErr {
    MC_OK,
#define X(e, line, close) MC_ERR_##e,
    MC_ERRORS(X)
#undef X
    MC_ERR_COUNT
} McErr;

typedef struct McErrorReply {
    const char *line; /* the whole reply, "\r\n" included */
    size_t len;
    int close; /* 1: close the connection once the line is written */
} McErrorReply;

/* The reply for err; for MC_OK or an out-of-range value, NULL. */
const McErrorReply *mc_error(McErr err);

/* Options of a get key (NAME/opt/opt...). */
enum {
    MC_OPT_OPEN = 1u << 0,
    MC_OPT_CLOSE = 1u << 1,
    MC_OPT_ABORT = 1u << 2,
    MC_OPT_PEEK = 1u << 3,
};

/* The dump_stats name list: a cursor over the rest of the line. */
typedef struct McNames {
    const char *p, *end;
} McNames;

/* The next name of the list: 1 with *name, *len set, or 0 at the end.
 * Names are not checked: a name that is no tube is simply not found. */
int mc_names_next(McNames *it, const char **name, size_t *len);

typedef struct McCmd {
    McCmdType type;
    McErr err;
    /* A body of `bytes` bytes and "\r\n" follows: read it before answering
     * (set, and add/replace/append/prepend/cas whose <bytes> parses). */
    int has_body;
    int noreply; /* set, delete, flush_all: last token is "noreply" */
    /* The key as sent (get: options included, for the VALUE reply), and
     * the queue name at its start (get: up to the first '/'). name_len is
     * 0 unless the name is a legal tube name. */
    const char *key;
    size_t key_len;
    const char *name;
    size_t name_len;
    unsigned opts;       /* get: MC_OPT_* */
    uint32_t timeout_ms; /* get: t=<ms>; 0 (also for t<=0): no wait */
    uint32_t flags;      /* set */
    int32_t exptime;     /* set: see mc_expiry() */
    uint32_t bytes;      /* with has_body: body size, <= MC_MAX_BYTES */
    uint32_t seconds;    /* monitor */
    uint32_t max;        /* monitor: most jobs; UINT32_MAX when not given */
    uint32_t count;      /* confirm */
    McNames names;       /* dump_stats: empty means every tube */
} McCmd;

typedef enum McLine {
    MC_LINE_INCOMPLETE, /* no LF yet, and the line may still fit */
    MC_LINE_OK,
    MC_LINE_TOO_LONG,
} McLine;

/* Frame the next line of buf[0, len). On MC_LINE_OK, *line_len is the
 * length of the line without its LF and without a CR right before it, and
 * *used the bytes up to and including the LF. Otherwise the outputs are
 * left untouched. */
McLine mc_find_line(const char *buf, size_t len, size_t *line_len, size_t *used);

/* Parse one line (no terminator) into *cmd; returns cmd->err. */
McErr mc_parse(const char *line, size_t len, McCmd *cmd);

/* The command word of type ("get" for MC_CMD_GET), or "unknown". */
const char *mc_cmd_name(McCmdType type);

/* kestrel's exptime rule: 0 never expires; below 1,000,000 it counts
 * seconds from now (negative: already expired); from 1,000,000 on it is an
 * absolute Unix time. Returns 0 when the item never expires, else 1 with
 * *at = the absolute expiry in Unix seconds (possibly <= now). */
int mc_expiry(int32_t exptime, int64_t now, int64_t *at);

#endif
