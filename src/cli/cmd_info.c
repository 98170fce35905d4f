/* cmd_info.c — the read-only documents: stats, tubes, binlog, replication,
 * stats-job, stats-tube. */
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

/* How show_doc() reads the replies other than OK. */
typedef struct DocReq {
    const char *req;                  /* the request line */
    const char *const *strings;       /* keys that stay strings (jsonout.h) */
    const char *missing;              /* NOT_FOUND means this, else NULL */
    const char *ext_of;               /* a tubed extension of this command:
                                         beanstalkd's BAD_FORMAT or
                                         UNKNOWN_COMMAND is "needs tubed" */
} DocReq;

/* One YAML dictionary, shown as aligned lines or one JSON object. */
static Status show_doc(const Cli *cli, Client *c, const DocReq *q, Err *e)
{
    Reply r;
    Dict d = {0};
    Status st;

    if (client_cmd(c, &r, e, "%s", q->req) != ST_OK)
        return e->code;
    if (q->missing && reply_is(&r, "NOT_FOUND"))
        st = err_set(e, ST_NOT_FOUND, "%s", q->missing);
    /* beanstalkd reads "stats-binlog" as stats with junk: BAD_FORMAT. */
    else if (q->ext_of && (reply_is(&r, "BAD_FORMAT") ||
                           reply_is(&r, "UNKNOWN_COMMAND")))
        st = no_ext(e, q->ext_of, q->req);
    else if ((st = parse_doc(c, q->req, &r, &d, e)) == ST_OK)
        st = print_dict(cli, &d, q->strings, e);
    dict_free(&d);
    reply_free(&r);
    return st;
}

Status cmd_stats(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    /* Strings even when beanstalkd 1.12 leaves them bare ("version: 1.12"). */
    static const char *const strings[] = {"version", "id", "hostname", "os",
                                          "platform", NULL};
    DocReq q = {"stats", strings, NULL, NULL};

    return show_doc(cli, c, &q, e);
}

Status cmd_binlog(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"last-error", "fsync-mode", NULL};
    DocReq q = {"stats-binlog", strings, NULL, "binlog"};

    return show_doc(cli, c, &q, e);
}

Status cmd_replication(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"role", "primary", "last-error", NULL};
    DocReq q = {"stats-replication", strings, NULL, "replication"};

    return show_doc(cli, c, &q, e);
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

Status cmd_stats_job(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"tube", "state", NULL};
    char req[64], missing[64];
    DocReq q = {req, strings, missing, NULL};
    uint64_t id;

    if (parse_id("stats-job", args[0], &id, e) != ST_OK)
        return ST_USAGE;
    snprintf(req, sizeof req, "stats-job %llu", (unsigned long long)id);
    snprintf(missing, sizeof missing, "no job %llu", (unsigned long long)id);
    return show_doc(cli, c, &q, e);
}

Status cmd_stats_tube(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const strings[] = {"name", NULL};
    char req[300], missing[300];
    DocReq q = {req, strings, missing, NULL};

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    snprintf(req, sizeof req, "stats-tube %s", args[0]);
    snprintf(missing, sizeof missing, "no tube '%s'", args[0]);
    return show_doc(cli, c, &q, e);
}
