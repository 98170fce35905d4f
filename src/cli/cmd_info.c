/* cmd_info.c — the read-only documents: stats, tubes, binlog. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "jsonout.h"
#include "table.h"
#include "tubestats.h"

/* A "stats"-like reply: OK <n> with a YAML dictionary. */
static Status parse_doc(Client *c, const char *cmd, const Reply *r, Dict *d,
                        Err *e)
{
    char why[160];

    if (!reply_is(r, "OK") || !r->body)
        return reply_unexpected(r, cmd, e);
    if (yaml_dict(r->body, r->body_len, d, why, sizeof why) < 0)
        return err_set(e, ST_SERVER, "%s: %s: cannot read the reply: %s",
                       c->where, cmd, why);
    return ST_OK;
}

static Status fetch_doc(Client *c, const char *cmd, Reply *r, Dict *d, Err *e)
{
    if (client_cmd(c, r, e, "%s", cmd) != ST_OK)
        return e->code;
    return parse_doc(c, cmd, r, d, e);
}

Status cmd_stats(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    /* Strings even when beanstalkd 1.12 leaves them bare ("version: 1.12"). */
    static const char *const strings[] = {"version", "id", "hostname", "os",
                                          "platform", NULL};
    Reply r;
    Dict d = {0};
    Status st = fetch_doc(c, "stats", &r, &d, e);

    if (st == ST_OK)
        st = print_dict(cli, &d, strings, e);
    dict_free(&d);
    reply_free(&r);
    return st;
}

Status cmd_binlog(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"last-error", "fsync-mode", NULL};
    Reply r;
    Dict d = {0};
    Status st;

    if (client_cmd(c, &r, e, "stats-binlog") != ST_OK)
        return e->code;
    /* beanstalkd reads "stats-binlog" as stats with junk: BAD_FORMAT. */
    if (reply_is(&r, "BAD_FORMAT") || reply_is(&r, "UNKNOWN_COMMAND")) {
        reply_free(&r);
        return no_ext(e, "binlog", "stats-binlog");
    }
    st = parse_doc(c, "stats-binlog", &r, &d, e);
    if (st == ST_OK)
        st = print_dict(cli, &d, strings, e);
    dict_free(&d);
    reply_free(&r);
    return st;
}

Status cmd_replication(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"role", "primary", "last-error", NULL};
    Reply r;
    Dict d = {0};
    Status st;

    if (client_cmd(c, &r, e, "stats-replication") != ST_OK)
        return e->code;
    /* beanstalkd reads it as stats with junk: BAD_FORMAT. */
    if (reply_is(&r, "BAD_FORMAT") || reply_is(&r, "UNKNOWN_COMMAND")) {
        reply_free(&r);
        return no_ext(e, "replication", "stats-replication");
    }
    st = parse_doc(c, "stats-replication", &r, &d, e);
    if (st == ST_OK)
        st = print_dict(cli, &d, strings, e);
    dict_free(&d);
    reply_free(&r);
    return st;
}

Status cmd_tubes(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    TubeSource src = {0};
    TubeSet set;
    Table t;
    Buf b = {0};
    Status st = tubes_fetch(c, &src, &set, e);

    if (st != ST_OK)
        return st;
    if (cli->json) {
        tubes_json(&b, &set);
        buf_append(&b, "\n", 1);
    } else {
        TableView v = {cli->width, cli->color, 0, "\n", 0, set.tubes.n};
        tubes_table(&t, &set, NULL, 0);
        table_render(&t, &b, &v);
        if (t.oom)
            b.oom = 1;
        table_free(&t);
    }
    st = out_flush(&b, e);
    buf_free(&b);
    tubeset_free(&set);
    return st;
}

/* stats-job and stats-tube: one document, NOT_FOUND as `what`. */
static Status print_stats_of(const Cli *cli, Client *c, const char *req,
                             const char *what, const char *const *strings,
                             Err *e)
{
    Reply r;
    Dict d = {0};
    Status st;

    if (client_cmd(c, &r, e, "%s", req) != ST_OK)
        return e->code;
    if (reply_is(&r, "NOT_FOUND"))
        st = err_set(e, ST_NOT_FOUND, "%s", what);
    else
        st = parse_doc(c, req, &r, &d, e);
    if (st == ST_OK)
        st = print_dict(cli, &d, strings, e);
    dict_free(&d);
    reply_free(&r);
    return st;
}

Status cmd_stats_job(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"tube", "state", NULL};
    char req[64], what[64];
    uint64_t id;

    if (parse_id("stats-job", args[0], &id, e) != ST_OK)
        return ST_USAGE;
    snprintf(req, sizeof req, "stats-job %llu", (unsigned long long)id);
    snprintf(what, sizeof what, "no job %llu", (unsigned long long)id);
    return print_stats_of(cli, c, req, what, strings, e);
}

Status cmd_stats_tube(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"name", NULL};
    char req[300], what[300];

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    snprintf(req, sizeof req, "stats-tube %s", args[0]);
    snprintf(what, sizeof what, "no tube '%s'", args[0]);
    return print_stats_of(cli, c, req, what, strings, e);
}
