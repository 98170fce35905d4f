/* cmd_jobs.c — commands about jobs: peek, list, put. */
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonout.h"
#include "numparse.h"
#include "table.h"

/* ---------------------------------------------------------------- peek */

/* The body for a person on a terminal: text as is, any other byte as
 * \xHH, so a job cannot drive the terminal with escape sequences. Well-
 * formed UTF-8 is text, but for U+0080-U+009F: the C1 controls, which
 * some terminals obey (U+009B is CSI), as text_safe() knows too. */
static void body_for_terminal(Buf *b, const char *s, size_t n, int color)
{
    for (size_t i = 0; i < n;) {
        unsigned char u = (unsigned char)s[i];
        size_t k = u < 0x80 ? 1 : utf8_seq(s + i, n - i);
        if (k > 1 && !utf8_c1(s + i, k)) {
            buf_append(b, s + i, k);
            i += k;
            continue;
        }
        if (k == 0)
            k = 1;
        for (size_t j = i; j < i + k; j++) {
            unsigned char v = (unsigned char)s[j];
            if ((v >= 0x20 && v < 0x7f) || v == '\n' || v == '\t')
                buf_append(b, s + j, 1);
            else
                buf_printf(b, "%s\\x%02x%s", color ? style_sgr(STY_DIM) : "", v,
                           color ? "\x1b[0m" : "");
        }
        i += k;
    }
}

static void peek_human(const Cli *cli, Buf *b, const Dict *stats,
                       const Reply *found)
{
    size_t w = dict_text(b, stats, cli->color, strlen("body"));

    buf_printf(b, "%s%-*s%s%zu %s\n", cli->color ? style_sgr(STY_KEY) : "",
               (int)w, "body", cli->color ? "\x1b[0m  " : "  ", found->body_len,
               plural(found->body_len, "byte", "bytes"));
    if (isatty(STDOUT_FILENO))
        body_for_terminal(b, found->body, found->body_len, cli->color);
    else
        buf_append(b, found->body, found->body_len);
    if (found->body_len && found->body[found->body_len - 1] != '\n')
        buf_append(b, "\n", 1);
}

static void peek_json(Buf *b, uint64_t id, const Dict *stats, const Reply *found)
{
    static const char *const strings[] = {"tube", "state", NULL};

    buf_printf(b, "{\"id\":%llu,", (unsigned long long)id);
    if (stats->n) {
        buf_append(b, "\"stats\":", 8);
        json_dict(b, stats, strings);
        buf_append(b, ",", 1);
    }
    json_bytes_member(b, "body", found->body, found->body_len);
    buf_append(b, "}\n", 2);
}

/* stats-job of the peeked job; empty if it went away in between. */
static Status job_stats(Client *c, uint64_t id, Dict *d, Err *e)
{
    Reply r;
    char why[160];
    Status st = ST_OK;

    if (client_cmd(c, &r, e, "stats-job %llu", (unsigned long long)id) != ST_OK)
        return e->code;
    if (reply_is(&r, "OK") && r.body &&
        yaml_dict(r.body, r.body_len, d, why, sizeof why) < 0)
        st = err_set(e, ST_SERVER, "stats-job: cannot read the reply: %s", why);
    else if (!reply_is(&r, "OK") && !reply_is(&r, "NOT_FOUND"))
        st = reply_unexpected(&r, "stats-job", e);
    reply_free(&r);
    return st;
}

static Status peek_found(const Cli *cli, Client *c, const Reply *found, Err *e)
{
    uint64_t id;
    const char *sp = strchr(found->line, ' ');
    Dict d = {0};
    Buf b = {0};
    Status st;

    if (parse_u64(sp + 1, (size_t)(strrchr(found->line, ' ') - sp - 1), &id) < 0)
        return err_set(e, ST_SERVER, "peek: bad reply '%s'", found->line);
    if (cli->raw) {
        buf_append(&b, found->body, found->body_len);
    } else {
        if ((st = job_stats(c, id, &d, e)) != ST_OK)
            return st;
        if (cli->json)
            peek_json(&b, id, &d, found);
        else
            peek_human(cli, &b, &d, found);
    }
    st = out_flush(&b, e);
    buf_free(&b);
    dict_free(&d);
    return st;
}

/* Send a peek request and show the job it finds; NOT_FOUND is `none`. */
static Status peek_show(const Cli *cli, Client *c, const char *req,
                        const char *none, Err *e)
{
    Reply r;
    Status st;

    if (client_cmd(c, &r, e, "%s", req) != ST_OK)
        return e->code;
    if (reply_is(&r, "NOT_FOUND"))
        st = err_set(e, ST_NOT_FOUND, "%s", none);
    else if (!reply_is(&r, "FOUND") || !r.body)
        st = reply_unexpected(&r, "peek", e);
    else
        st = peek_found(cli, c, &r, e);
    reply_free(&r);
    return st;
}

/* peek's argument is always a tube (a tube may be named 123): when no
 * tube has that number for a name, say how to peek the job. */
static Status peek_hint(const char *tube, Status st, Err *e)
{
    uint64_t id;
    size_t n = strlen(e->msg);

    if (st == ST_NOT_FOUND && parse_u64_str(tube, &id) == 0)
        snprintf(e->msg + n, sizeof e->msg - n, " (job %llu: tubed-cli job %llu)",
                 (unsigned long long)id, (unsigned long long)id);
    return st;
}

Status cmd_peek(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const states[] = {"ready", "delayed", "buried", NULL};
    const char *state = nargs > 1 ? args[1] : "ready";
    char req[32], none[300];
    Status st;

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    if (!is_word(state, states))
        return err_set(e, ST_USAGE, "peek: state must be ready, delayed or "
                       "buried, not '%s'", state);
    if ((st = need_tube(c, args[0], e)) != ST_OK ||
        (st = use_tube(c, args[0], e)) != ST_OK)
        return peek_hint(args[0], st, e);
    snprintf(req, sizeof req, "peek-%s", state);
    snprintf(none, sizeof none, "no %s job in tube '%s'", state, args[0]);
    return peek_show(cli, c, req, none, e);
}

/* A job by its id (the protocol's peek ID): as peek shows it. */
Status cmd_job(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    char req[64], none[64];
    uint64_t id;

    if (parse_id("job", args[0], &id, e) != ST_OK)
        return ST_USAGE;
    snprintf(req, sizeof req, "peek %llu", (unsigned long long)id);
    snprintf(none, sizeof none, "no job %llu", (unsigned long long)id);
    return peek_show(cli, c, req, none, e);
}

/* ---------------------------------------------------------------- list */

/* The most ids list-jobs gives in one page. */
#define PAGE 1000

/* A page's ids as numbers, each above the one before and not below
 * `from`: a server that repeats itself would otherwise make us page
 * forever. */
static Status page_ids(const StrList *words, uint64_t from, IdList *ids, Err *e)
{
    uint64_t id;

    for (size_t i = 0; i < words->n; i++) {
        if (parse_u64_str(words->items[i], &id) < 0 || id < from ||
            (ids->n && id <= ids->ids[ids->n - 1]))
            return err_set(e, ST_SERVER, "list-jobs: bad or unordered job id "
                           "'%.40s' in the reply", words->items[i]);
        if (idlist_push(ids, id, e) != ST_OK)
            return ST_LOCAL;
    }
    return ST_OK;
}

Status list_jobs_page(Client *c, const char *cmd, const char *tube,
                      const char *state, uint64_t from, IdList *ids, Err *e)
{
    Reply r;
    StrList words = {0};
    char why[160];
    Status st = ST_OK;

    ids->n = 0;
    if (client_cmd(c, &r, e, "list-jobs %s %s %llu %d", tube, state,
                   (unsigned long long)from, PAGE) != ST_OK)
        return e->code;
    if (reply_is(&r, "UNKNOWN_COMMAND"))
        st = no_ext(e, cmd, "list-jobs");
    else if (reply_is(&r, "NOT_FOUND"))
        st = err_set(e, ST_NOT_FOUND, "no tube '%s'", tube);
    else if (!reply_is(&r, "OK") || !r.body)
        st = reply_unexpected(&r, "list-jobs", e);
    else if (yaml_list(r.body, r.body_len, &words, why, sizeof why) < 0)
        st = err_set(e, ST_SERVER, "list-jobs: cannot read the reply: %s", why);
    else
        st = page_ids(&words, from, ids, e);
    strlist_free(&words);
    reply_free(&r);
    return st;
}

/* Print one page's ids. */
static Status list_page(const Cli *cli, const IdList *ids, int first, Err *e)
{
    Buf b = {0};
    Status st;

    for (size_t i = 0; i < ids->n; i++) {
        unsigned long long id = (unsigned long long)ids->ids[i];
        if (cli->json)
            buf_printf(&b, "%s%llu", first && i == 0 ? "" : ",", id);
        else
            buf_printf(&b, "%llu\n", id);
    }
    st = out_flush(&b, e);
    buf_free(&b);
    return st;
}

Status cmd_list(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const states[] = {"ready", "delayed", "reserved",
                                         "buried", "all", NULL};
    uint64_t from = 0, last;
    IdList ids = {0};
    Status st;
    int first = 1;

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    if (!is_word(args[1], states))
        return err_set(e, ST_USAGE, "list: state must be ready, delayed, "
                       "reserved, buried or all, not '%s'", args[1]);
    /* Page until an empty page: a short page does not promise the end. */
    for (;;) {
        if ((st = list_jobs_page(c, "list", args[0], args[1], from, &ids, e)) != ST_OK)
            goto out;
        if (cli->json && first)
            fputs("[", stdout); /* only once the server has said yes */
        if (ids.n == 0)
            break;
        if ((st = list_page(cli, &ids, first, e)) != ST_OK)
            goto out;
        first = 0;
        last = ids.ids[ids.n - 1];
        if (last == UINT64_MAX)
            break;
        from = last + 1;
    }
    if (cli->json)
        fputs("]\n", stdout);
out:
    idlist_free(&ids);
    return st;
}

/* ----------------------------------------------------------------- put */

/* No server takes a larger body (tubed's and beanstalkd's -z ceiling):
 * reading on would only fill memory, as `put t /dev/zero` would. */
#define MAX_PUT_BODY ((size_t)1 << 30)

static Status too_big(const char *path, Err *e)
{
    return err_set(e, ST_LOCAL, "%s: the body is larger than 1 GiB, more than "
                   "any server takes", path ? path : "stdin");
}

static Status read_body(const char *path, Buf *body, Err *e)
{
    FILE *f = stdin;
    char chunk[65536];
    struct stat sb;
    size_t n;
    Status st = ST_OK;

    if (path && strcmp(path, "-") == 0)
        path = NULL;
    if (path && !(f = fopen(path, "rb")))
        return err_set(e, ST_LOCAL, "cannot open %s: %s", path, strerror(errno));
    if (f == stdin && isatty(STDIN_FILENO))
        fprintf(stderr, "tubed-cli: reading the job body from the terminal; "
                "end it with Ctrl-D\n");
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
        (uintmax_t)sb.st_size > MAX_PUT_BODY)
        st = too_big(path, e);
    while (st == ST_OK && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (body->len + n > MAX_PUT_BODY)
            st = too_big(path, e);
        else
            buf_append(body, chunk, n);
    }
    if (st == ST_OK && (ferror(f) || body->oom))
        st = err_set(e, ST_LOCAL, "cannot read %s: %s", path ? path : "stdin",
                     body->oom ? "out of memory" : strerror(errno));
    if (f != stdin)
        fclose(f);
    return st;
}

static Status put_reply(const Cli *cli, const Reply *r, const char *tube, Err *e)
{
    uint64_t id;
    Buf b = {0};
    Status st;

    if (reply_num(r, "BURIED", &id) == 0)
        return err_set(e, ST_SERVER, "job %llu was put but buried: the server "
                       "is out of memory", (unsigned long long)id);
    if (reply_num(r, "INSERTED", &id) < 0)
        return reply_unexpected(r, "put", e);
    if (cli->json) {
        buf_printf(&b, "{\"id\":%llu,\"tube\":", (unsigned long long)id);
        json_cstr(&b, tube);
        buf_append(&b, "}\n", 2);
    } else {
        buf_printf(&b, "%llu\n", (unsigned long long)id);
    }
    st = out_flush(&b, e);
    buf_free(&b);
    return st;
}

Status cmd_put(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    Buf req = {0};
    Reply r;
    Status st;
    size_t head;

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    if ((st = read_body(nargs > 1 ? args[1] : NULL, &req, e)) != ST_OK)
        goto out;
    if ((st = use_tube(c, args[0], e)) != ST_OK)
        goto out;
    head = req.len;
    buf_printf(&req, "put %lu %lu %lu %zu\r\n", cli->pri, cli->delay, cli->ttr,
               head);
    buf_append(&req, "\r\n", 2);
    if (req.oom) {
        st = err_set(e, ST_LOCAL, "out of memory");
        goto out;
    }
    /* The command line goes first: send it, then the body and its CRLF. */
    if ((st = client_send(c, req.data + head, req.len - head - 2, e)) != ST_OK ||
        (st = client_send(c, req.data, head, e)) != ST_OK ||
        (st = client_send(c, "\r\n", 2, e)) != ST_OK ||
        (st = client_read(c, &r, e)) != ST_OK)
        goto out;
    st = put_reply(cli, &r, args[0], e);
    reply_free(&r);
out:
    buf_free(&req);
    return st;
}
