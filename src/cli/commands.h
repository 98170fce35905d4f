/*
 * commands.h — the commands of tubed-cli: one table of name, arity,
 * handler and usage line, so the argument checks, the help text and the
 * dispatch cannot drift apart.
 *
 * A command with two forms (move) has a row for each, next to each other,
 * with the same handler: the arguments fit one of them, command_find()
 * gives the first, and the handler tells the forms apart.
 *
 * Contract: a handler runs on an open connection with its arguments
 * already counted against min_args..max_args, writes its result to stdout
 * (human text, or one JSON document with --json) and returns ST_OK, or
 * another Status with the message in e and nothing half-said on stdout
 * beyond what was already true (list prints each page as it comes).
 * Handlers never exit the process.
 */
#ifndef TUBED_CLI_COMMANDS_H
#define TUBED_CLI_COMMANDS_H

#include <stdint.h>

#include "buf.h"
#include "cli.h"
#include "client.h"
#include "yamlish.h"

/* Job ids, grown by idlist_push() (ST_LOCAL when memory runs out). */
typedef struct IdList {
    uint64_t *ids;
    size_t n, cap;
} IdList;

Status idlist_push(IdList *l, uint64_t id, Err *e);
void idlist_free(IdList *l);
/* The ids as a JSON array: [3,4,9]. */
void json_ids(Buf *b, const IdList *l);

typedef Status (*CmdFn)(const Cli *cli, Client *c, char **args, int nargs,
                        Err *e);

typedef struct Command {
    const char *name;
    int min_args, max_args;
    CmdFn fn;
    const char *args;   /* for the usage text */
    const char *help;
} Command;

extern const Command commands[];
const Command *command_find(const char *name);

/* The handlers. */
Status cmd_stats(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_tubes(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_binlog(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_peek(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_list(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_kick(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_flush(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_move(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_delete(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_kick_job(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_pause(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_job(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_stats_job(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_stats_tube(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_put(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_top(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_replication(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_promote(const Cli *cli, Client *c, char **args, int nargs, Err *e);
Status cmd_follow(const Cli *cli, Client *c, char **args, int nargs, Err *e);

/* Helpers the handlers share (commands.c). */

/* ST_USAGE unless name is a legal tube name. */
Status check_tube_name(const char *name, Err *e);
/* ST_NOT_FOUND "no tube NAME" unless the tube exists (checked with
 * stats-tube, which unlike `use` creates nothing). */
Status need_tube(Client *c, const char *tube, Err *e);
/* `use TUBE`, expecting "USING TUBE". */
Status use_tube(Client *c, const char *tube, Err *e);
/* "CMD needs tubed (the server does not know EXT)" as ST_NO_EXT. */
Status no_ext(Err *e, const char *cmd, const char *ext);
/* Write b to stdout and empty it; ST_LOCAL when it cannot be written. */
Status out_flush(Buf *b, Err *e);
/* Aligned "key  value" lines into b, keys padded to the longest (at least
 * w); returns the key width used, so more lines can line up with them. */
size_t dict_text(Buf *b, const Dict *d, int color, size_t w);
/* A document as aligned "key  value" lines, or as one JSON object. */
Status print_dict(const Cli *cli, const Dict *d, const char *const *string_keys,
                  Err *e);
/* 1 if s is one of the NULL-terminated words. */
int is_word(const char *s, const char *const *words);
/* ST_USAGE "CMD: 'S' is not a job id" unless s is one. */
Status parse_id(const char *cmd, const char *s, uint64_t *id, Err *e);
/* One list-jobs page of TUBE in STATE from id `from`, as ids in
 * ascending order (checked: a server that repeats itself would make us
 * page forever); `cmd` names tubed-cli's command in the messages. */
Status list_jobs_page(Client *c, const char *cmd, const char *tube,
                      const char *state, uint64_t from, IdList *ids, Err *e);
/* "1 job" / "3 jobs". */
const char *plural(unsigned long long n, const char *one, const char *many);

#endif
