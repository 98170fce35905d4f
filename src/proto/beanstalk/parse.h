/*
 * parse.h — the command-line parser: bytes in, a Cmd out. Pure: no I/O, no
 * server state, no allocation, so it can be unit-tested and fuzzed alone.
 *
 * Contract: parse_command() takes one request line without its "\r\n" and
 * fills *cmd. It returns PARSE_OK, PARSE_BAD_FORMAT or PARSE_UNKNOWN.
 * Command words are matched the way beanstalkd matches them (see the table
 * in parse.c), arguments strictly: numbers are decimal digits with no sign
 * and no overflow, separated by one or more spaces, with nothing after the
 * last one (one exception: reserve-with-timeout's seconds may end in a
 * fraction, ".5", dropped as beanstalkd 1.12 drops it); tube names are
 * 1..200 bytes of the protocol's name characters, not starting with '-'. A NUL byte anywhere is PARSE_BAD_FORMAT.
 * cmd->name points into the line; it is valid as long as the line is.
 */
#ifndef TUBED_PARSE_H
#define TUBED_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

/* Longest request line including "\r\n" (beanstalkd's LINE_BUF_SIZE). */
#define MAX_LINE 224

/* X(enum, word, argument shape). The order is the matching order: a longer
 * word that starts with a shorter one comes first. A word without a trailing
 * space is matched as a prefix, as beanstalkd does, so "statsx" is a
 * malformed stats (BAD_FORMAT), not an unknown command; "pause-tube" has no
 * space for the same reason (beanstalkd reads "pause-tubex 5" as tube x).
 * The last rows and stats-tubes / stats-binlog / stats-listeners /
 * stats-replication are
 * tubed's extensions
 * (doc/protocol.md); they come before "stats", which would match them as
 * a prefix. */
#define TUBED_COMMANDS(X)                                   \
    X(PUT, "put ", ARG_PUT)                                 \
    X(PEEK, "peek ", ARG_ID)                                \
    X(PEEK_READY, "peek-ready", ARG_NONE)                   \
    X(PEEK_DELAYED, "peek-delayed", ARG_NONE)               \
    X(PEEK_BURIED, "peek-buried", ARG_NONE)                 \
    X(RESERVE_TIMEOUT, "reserve-with-timeout ", ARG_TIMEOUT) \
    X(RESERVE_JOB, "reserve-job ", ARG_ID)                  \
    X(RESERVE, "reserve", ARG_NONE)                         \
    X(DELETE, "delete ", ARG_ID)                            \
    X(RELEASE, "release ", ARG_RELEASE)                     \
    X(BURY, "bury ", ARG_BURY)                              \
    X(KICK, "kick ", ARG_BOUND)                             \
    X(KICK_JOB, "kick-job ", ARG_ID)                        \
    X(TOUCH, "touch ", ARG_ID)                              \
    X(STATS_JOB, "stats-job ", ARG_ID)                      \
    X(STATS_TUBE, "stats-tube ", ARG_TUBE)                  \
    X(STATS_TUBES, "stats-tubes", ARG_NONE)                 \
    X(STATS_BINLOG, "stats-binlog", ARG_NONE)               \
    X(STATS_LISTENERS, "stats-listeners", ARG_NONE)         \
    X(STATS_REPLICATION, "stats-replication", ARG_NONE)     \
    X(STATS, "stats", ARG_NONE)                             \
    X(USE, "use ", ARG_TUBE)                                \
    X(WATCH, "watch ", ARG_TUBE)                            \
    X(IGNORE, "ignore ", ARG_TUBE)                          \
    X(LIST_TUBES_WATCHED, "list-tubes-watched", ARG_NONE)   \
    X(LIST_TUBE_USED, "list-tube-used", ARG_NONE)           \
    X(LIST_TUBES, "list-tubes", ARG_NONE)                   \
    X(QUIT, "quit", ARG_NONE)                               \
    X(PAUSE_TUBE, "pause-tube", ARG_PAUSE)                  \
    X(FLUSH_TUBE, "flush-tube ", ARG_TUBE)                  \
    X(LIST_JOBS, "list-jobs ", ARG_LIST)                    \
    X(MOVE_JOB, "move-job ", ARG_MOVE)                      \
    X(REPLICATE, "replicate ", ARG_REPL)                    \
    X(PROMOTE, "promote", ARG_NONE)                         \
    X(FOLLOW, "follow ", ARG_ADDR)

typedef enum CmdType {
#define X(e, w, a) CMD_##e,
    TUBED_COMMANDS(X)
#undef X
    CMD_COUNT
} CmdType;

typedef enum ParseResult {
    PARSE_OK,
    PARSE_BAD_FORMAT,
    PARSE_UNKNOWN,
} ParseResult;

typedef struct Cmd {
    CmdType type;
    uint64_t id;
    uint64_t id2;     /* replicate: the position (id: the epoch) */
    uint32_t pri;
    uint32_t delay;   /* seconds: put, release, pause-tube */
    uint32_t ttr;     /* seconds */
    uint32_t bytes;   /* put body size */
    uint32_t count;   /* kick bound, reserve-with-timeout seconds, list-jobs count */
    int state;        /* list-jobs: a JobState, or -1 for "all" */
    const char *name; /* tube name (follow: the address), not NUL-terminated */
    /* id: also list-jobs' from-id and move-job's job */
    size_t name_len;
    /* Set with PARSE_BAD_FORMAT when beanstalkd still counts the command
     * in its stats: a put whose four numbers parsed but junk followed
     * (its size is checked before the junk, so an oversized body is still
     * read and answered JOB_TOO_BIG), and a pause-tube whose name has
     * only name characters but is not a legal name ("-x"). */
    int counted;
} Cmd;

ParseResult parse_command(const char *line, size_t len, Cmd *cmd);

/* The command word as clients send it, without a trailing space. */
const char *cmd_name(CmdType type);

#endif
