/* commands.c — the command table and the handlers' shared helpers; see
 * commands.h. */
#include "commands.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "jsonout.h"
#include "names.h"
#include "numparse.h"
#include "table.h"

const Command commands[] = {
    {"stats", 0, 0, cmd_stats, "", "the server's stats"},
    {"tubes", 0, 0, cmd_tubes, "", "a table of every tube"},
    {"top", 0, 0, cmd_top, "", "the tubes table, live, with rates (q quits)"},
    {"stats-tube", 1, 1, cmd_stats_tube, "TUBE", "one tube's stats"},
    {"peek", 1, 2, cmd_peek, "TUBE [ready|delayed|buried]",
     "the next job in that state (default ready)"},
    {"job", 1, 1, cmd_job, "ID", "a job by its id: its stats and body"},
    {"stats-job", 1, 1, cmd_stats_job, "ID", "a job's stats, without its body"},
    {"kick", 1, 2, cmd_kick, "TUBE [N|all]",
     "kick up to N buried, else delayed, jobs (default 1)"},
    {"kick-job", 1, INT_MAX, cmd_kick_job, "ID...",
     "kick these buried or delayed jobs"},
    {"delete", 1, INT_MAX, cmd_delete, "ID...", "delete these jobs"},
    {"pause", 2, 2, cmd_pause, "TUBE SECONDS",
     "hold the tube's jobs from workers (0 resumes)"},
    {"flush", 1, 1, cmd_flush, "TUBE",
     "delete the tube's ready, delayed and buried jobs"},
    {"list", 2, 2, cmd_list, "TUBE STATE",
     "job ids in STATE: ready, delayed, reserved, buried, all"},
    {"move", 2, INT_MAX, cmd_move, "ID... TUBE", "move jobs to another tube"},
    {"move", 3, 3, cmd_move, "FROM STATE TUBE",
     "move FROM's jobs in STATE: ready, delayed, buried, all"},
    {"put", 1, 2, cmd_put, "TUBE [FILE|-]",
     "put a job (body from FILE or stdin), print its id"},
    {"binlog", 0, 0, cmd_binlog, "", "the binlog's health"},
    {"replication", 0, 0, cmd_replication, "", "the replication status (role, lag, ...)"},
    {"promote", 0, 0, cmd_promote, "", "make a replica the primary (new epoch)"},
    {"follow", 1, 1, cmd_follow, "HOST:PORT",
     "follow that primary (a primary stops taking writes)"},
    {NULL, 0, 0, NULL, NULL, NULL},
};

const Command *command_find(const char *name)
{
    for (const Command *c = commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

Status check_tube_name(const char *name, Err *e)
{
    if (!tube_name_valid(name, strlen(name)))
        return err_set(e, ST_USAGE, "'%.*s' is not a legal tube name (1 to %d "
                       "of A-Z a-z 0-9 -+/;.$_() not starting with '-')",
                       MAX_TUBE_NAME + 10, name, MAX_TUBE_NAME);
    return ST_OK;
}

Status need_tube(Client *c, const char *tube, Err *e)
{
    Reply r;
    Status st = ST_OK;

    if (client_cmd(c, &r, e, "stats-tube %s", tube) != ST_OK)
        return e->code;
    if (reply_is(&r, "NOT_FOUND"))
        st = err_set(e, ST_NOT_FOUND, "no tube '%s'", tube);
    else if (!reply_is(&r, "OK"))
        st = reply_unexpected(&r, "stats-tube", e);
    reply_free(&r);
    return st;
}

Status use_tube(Client *c, const char *tube, Err *e)
{
    Reply r;
    Status st = ST_OK;

    if (client_cmd(c, &r, e, "use %s", tube) != ST_OK)
        return e->code;
    if (!reply_is(&r, "USING") || strcmp(r.line + 6, tube) != 0)
        st = reply_unexpected(&r, "use", e);
    reply_free(&r);
    return st;
}

Status no_ext(Err *e, const char *cmd, const char *ext)
{
    return err_set(e, ST_NO_EXT, "%s needs tubed (the server does not know %s)",
                   cmd, ext);
}

Status out_flush(Buf *b, Err *e)
{
    if (b->oom)
        return err_set(e, ST_LOCAL, "out of memory");
    if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len)
        return err_set(e, ST_LOCAL, "cannot write to standard output");
    b->len = 0;
    return ST_OK;
}

size_t dict_text(Buf *b, const Dict *d, int color, size_t w)
{
    for (size_t i = 0; i < d->n; i++)
        if (strlen(d->items[i].key) > w)
            w = strlen(d->items[i].key);
    for (size_t i = 0; i < d->n; i++) {
        const Pair *p = &d->items[i];
        if (color)
            buf_printf(b, "%s", style_sgr(STY_KEY));
        buf_append_safe(b, p->key);
        if (color)
            buf_printf(b, "\x1b[0m");
        /* No trailing blanks after a key whose value is empty. */
        buf_printf(b, "%*s", *p->value ? (int)(w + 2 - strlen(p->key)) : 0, "");
        buf_append_safe(b, p->value);
        buf_append(b, "\n", 1);
    }
    return w;
}

Status print_dict(const Cli *cli, const Dict *d, const char *const *string_keys,
                  Err *e)
{
    Buf b = {0};
    Status st;

    if (cli->json) {
        json_dict(&b, d, string_keys);
        buf_append(&b, "\n", 1);
    } else {
        dict_text(&b, d, cli->color, 0);
    }
    st = out_flush(&b, e);
    buf_free(&b);
    return st;
}

const char *plural(unsigned long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

int is_word(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0)
            return 1;
    return 0;
}

Status parse_id(const char *cmd, const char *s, uint64_t *id, Err *e)
{
    if (parse_u64_str(s, id) < 0)
        return err_set(e, ST_USAGE, "%s: '%.40s' is not a job id", cmd, s);
    return ST_OK;
}

Status idlist_push(IdList *l, uint64_t id, Err *e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint64_t *p = tb_realloc(l->ids, cap * sizeof *p);
        if (!p)
            return err_set(e, ST_LOCAL, "out of memory");
        l->ids = p;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return ST_OK;
}

void idlist_free(IdList *l)
{
    tb_free(l->ids);
    memset(l, 0, sizeof *l);
}

void json_ids(Buf *b, const IdList *l)
{
    buf_append(b, "[", 1);
    for (size_t i = 0; i < l->n; i++)
        buf_printf(b, "%s%llu", i ? "," : "", (unsigned long long)l->ids[i]);
    buf_append(b, "]", 1);
}
