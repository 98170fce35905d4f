/* cmd_info.c — the read-only documents: stats, tubes, binlog. */
#include "commands.h"

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
