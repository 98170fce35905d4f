#include "tubesjson.h"

#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "repl.h"

/* One "key":value member of an object, after a comma unless first. */
typedef struct Json {
    Buf *b;
    int first;
} Json;

static void json_key(Json *j, const char *key)
{
    if (!j->first)
        buf_append(j->b, ",", 1);
    j->first = 0;
    json_string(j->b, key, strlen(key));
    buf_append(j->b, ":", 1);
}

static void json_member(void *arg, const char *key, StatVal v)
{
    Json *j = arg;

    json_key(j, key);
    switch (v.kind) {
    case SK_U64: buf_printf(j->b, "%llu", (unsigned long long)v.v.u); break;
    case SK_I64: buf_printf(j->b, "%lld", (long long)v.v.i); break;
    case SK_BOOL: buf_printf(j->b, "%s", v.v.u ? "true" : "false"); break;
    case SK_TEXT:
    case SK_WORD: json_string(j->b, v.v.s, strlen(v.v.s)); break;
    case SK_TIME:
        buf_printf(j->b, "%ld.%06ld", (long)v.v.tv.tv_sec, (long)v.v.tv.tv_usec);
        break;
    }
}

/* stats-replication's keys, in its order (the walk beanstalk's YAML uses). */
static void replication_members(Server *s, Json *j)
{
    stats_doc_replication(s, json_member, j);
}

static void tubes_members(Server *s, const Listener *l, Buf *b)
{
    size_t n;
    Tube **v = srvstats_tubes(s, l, &n);

    if (!v) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        TubeStats ts;
        Json j = {b, 1};

        engine_tube_stats(&s->eng, v[i], &ts);
        if (i)
            buf_append(b, ",", 1);
        json_string(b, ts.name, ts.name_len);
        buf_append(b, ":{", 2);
        stats_doc_tube(&ts, 1, json_member, &j);
        buf_append(b, "}", 1);
    }
    tb_free(v);
}

void tubes_json(Server *s, const StatsSource *src, const Listener *l, Buf *b)
{
    ServerStats ss;
    Json j = {b, 1};

    server_stats(s, src, &ss);
    buf_append(b, "{\"server\":{", 11);
    stats_doc_server(&ss, json_member, &j);
    buf_append(b, "},\"tubes\":{", 11);
    tubes_members(s, l, b);
    buf_append(b, "}", 1);
    /* The role and the lag, once replication is in use (repl.h). */
    if (ss.repl_shown) {
        j.first = 1;
        buf_append(b, ",\"replication\":{", 16);
        replication_members(s, &j);
        buf_append(b, "}", 1);
    }
    buf_append(b, "}\n", 2);
}
