/* cmd_change.c — commands that change a tube or the server: kick, flush,
 * pause, promote, follow. (delete, kick-job and move, by job: cmd_ids.c) */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "jsonout.h"
#include "numparse.h"
#include "table.h"

/* Print "{"<key>":n}" or the sentence. */
static Status report(const Cli *cli, const char *key, unsigned long long n,
                     const char *sentence, Err *e)
{
    Buf b = {0};
    Status st;

    if (cli->json)
        buf_printf(&b, "{\"%s\":%llu}\n", key, n);
    else
        buf_printf(&b, "%s\n", sentence);
    st = out_flush(&b, e);
    buf_free(&b);
    return st;
}

/* kick's bound: a count, or "all" (the protocol's largest bound). */
static Status kick_bound(int nargs, char **args, uint32_t *n, Err *e)
{
    *n = 1;
    if (nargs < 2)
        return ST_OK;
    if (strcmp(args[1], "all") == 0) {
        *n = UINT32_MAX;
        return ST_OK;
    }
    if (parse_u32(args[1], strlen(args[1]), n) < 0)
        return err_set(e, ST_USAGE, "kick: N must be a number below 2^32 or "
                       "'all', not '%s'", args[1]);
    return ST_OK;
}

Status cmd_kick(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    char line[300];
    uint32_t bound;
    uint64_t n;
    Reply r;
    Status st;

    if (check_tube_name(args[0], e) != ST_OK || kick_bound(nargs, args, &bound, e))
        return ST_USAGE;
    if ((st = need_tube(c, args[0], e)) != ST_OK ||
        (st = use_tube(c, args[0], e)) != ST_OK)
        return st;
    if (client_cmd(c, &r, e, "kick %lu", (unsigned long)bound) != ST_OK)
        return e->code;
    if (reply_num(&r, "KICKED", &n) == 0) {
        snprintf(line, sizeof line, "kicked %llu %s in tube '%s'",
                 (unsigned long long)n, plural(n, "job", "jobs"), args[0]);
        st = report(cli, "kicked", n, line, e);
    } else {
        st = reply_unexpected(&r, "kick", e);
    }
    reply_free(&r);
    return st;
}

Status cmd_flush(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    char line[300];
    uint64_t n;
    Reply r;
    Status st;

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    if (client_cmd(c, &r, e, "flush-tube %s", args[0]) != ST_OK)
        return e->code;
    if (reply_num(&r, "FLUSHED", &n) == 0) {
        snprintf(line, sizeof line, "flushed %llu %s from tube '%s'",
                 (unsigned long long)n, plural(n, "job", "jobs"), args[0]);
        st = report(cli, "flushed", n, line, e);
    } else if (reply_is(&r, "UNKNOWN_COMMAND")) {
        st = no_ext(e, "flush", "flush-tube");
    } else if (reply_is(&r, "NOT_FOUND")) {
        st = err_set(e, ST_NOT_FOUND, "no tube '%s'", args[0]);
    } else {
        st = reply_unexpected(&r, "flush-tube", e);
    }
    reply_free(&r);
    return st;
}

Status cmd_pause(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    Buf b = {0};
    uint32_t secs;
    Reply r;
    Status st;

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    if (parse_u32(args[1], strlen(args[1]), &secs) < 0)
        return err_set(e, ST_USAGE, "pause: SECONDS must be a number below 2^32 "
                       "(0 resumes), not '%.40s'", args[1]);
    if (client_cmd(c, &r, e, "pause-tube %s %lu", args[0], (unsigned long)secs) != ST_OK)
        return e->code;
    if (reply_is(&r, "PAUSED") && strcmp(r.line, "PAUSED") == 0) {
        if (cli->json) {
            buf_printf(&b, "{\"tube\":");
            json_cstr(&b, args[0]);
            buf_printf(&b, ",\"paused\":%lu}\n", (unsigned long)secs);
        } else if (secs) {
            buf_printf(&b, "paused tube '%s' for %lu %s\n", args[0],
                       (unsigned long)secs, plural(secs, "second", "seconds"));
        } else {
            buf_printf(&b, "resumed tube '%s'\n", args[0]);
        }
        st = out_flush(&b, e);
        buf_free(&b);
    } else if (reply_is(&r, "NOT_FOUND")) {
        st = err_set(e, ST_NOT_FOUND, "no tube '%s'", args[0]);
    } else {
        st = reply_unexpected(&r, "pause-tube", e);
    }
    reply_free(&r);
    return st;
}

/* promote and follow: the server's one-line answer, or why not. */
static Status admin_reply(const Cli *cli, Client *c, Reply *r, const char *cmd, Err *e)
{
    if (reply_is(r, "UNKNOWN_COMMAND"))
        return no_ext(e, cmd, cmd);
    if (reply_is(r, "NOT_ALLOWED"))
        return err_set(e, ST_SERVER, "%s: %s: refused (NOT_ALLOWED): taken only from "
                       "the server's host (unless allow_remote_admin = true), on a "
                       "listener whose role is admin", c->where, cmd);
    return reply_unexpected(r, cmd, e);
}

Status cmd_promote(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    char line[64];
    uint64_t epoch;
    Reply r;
    Status st;

    if (client_cmd(c, &r, e, "promote") != ST_OK)
        return e->code;
    if (reply_num(&r, "PROMOTED", &epoch) == 0) {
        snprintf(line, sizeof line, "primary, epoch %llu", (unsigned long long)epoch);
        st = report(cli, "epoch", epoch, line, e);
    } else {
        st = admin_reply(cli, c, &r, "promote", e);
    }
    reply_free(&r);
    return st;
}

Status cmd_follow(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    Buf b = {0};
    Reply r;
    Status st;

    if (strlen(args[0]) > 200 || strpbrk(args[0], " \t\r\n"))
        return err_set(e, ST_USAGE, "follow: '%.200s' is not an address "
                       "(HOST:PORT, [V6]:PORT or unix:/PATH)", args[0]);
    if (client_cmd(c, &r, e, "follow %s", args[0]) != ST_OK)
        return e->code;
    if (reply_is(&r, "FOLLOWING")) {
        if (cli->json) {
            /* The address is the operator's: a unix: path may hold '"'. */
            buf_append(&b, "{\"following\":", 13);
            json_cstr(&b, args[0]);
            buf_append(&b, "}\n", 2);
        } else {
            buf_append(&b, "following ", 10);
            buf_append_safe(&b, args[0]);
            buf_append(&b, "\n", 1);
        }
        st = out_flush(&b, e);
        buf_free(&b);
    } else if (reply_is(&r, "BAD_FORMAT")) {
        st = err_set(e, ST_USAGE, "follow: the server refused the address '%s'", args[0]);
    } else if (reply_is(&r, "NO_BINLOG")) {
        st = err_set(e, ST_SERVER, "%s: follow: refused (NO_BINLOG): a replica keeps "
                     "what it receives in its binlog, and this server runs without "
                     "one (-b)", c->where);
    } else {
        st = admin_reply(cli, c, &r, "follow", e);
    }
    reply_free(&r);
    return st;
}
