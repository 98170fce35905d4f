/* cmd_ids.c — commands on jobs named by id: delete, kick-job, move (of
 * ids, or of every job of a tube in a state).
 *
 * The requests go out in batches of BATCH, pipelined, and every reply of
 * a batch is read before the next: each job's outcome is known (done, not
 * found, or the error that stops the run) and a stop leaves no request
 * whose answer went unread. A job that is not found does not stop the
 * run: the others are still done, and the exit status is 1. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "jsonout.h"

/* Requests in flight at once: large enough that a long list does not wait
 * a round trip per job, small enough that the replies fit the socket
 * buffers while we are still sending. */
#define BATCH 100

/* One per-job request. */
typedef struct IdOp {
    const char *cmd;    /* tubed-cli's command, for messages */
    const char *req;    /* the protocol's request: "delete" */
    const char *ok;     /* its one reply for success: "DELETED" */
    const char *did;    /* the word for the outcome: "deleted" */
    const char *why;    /* after "no job N" when NOT_FOUND */
    const char *tube;   /* move-job's target, else NULL */
    int per_job;        /* a line per job (not for a whole state) */
    size_t total;       /* jobs asked for (for the messages) */
} IdOp;

typedef struct IdRun {
    IdList done, missing;
    Err stop;           /* the first reply that stops the run */
    int listed;         /* move of a state: list-jobs found the tube */
} IdRun;

static void idrun_free(IdRun *run)
{
    idlist_free(&run->done);
    idlist_free(&run->missing);
}

static Status send_batch(Client *c, const IdOp *op, const uint64_t *ids,
                         size_t n, Err *e)
{
    Buf b = {0};
    Status st;

    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%s %llu%s%s\r\n", op->req, (unsigned long long)ids[i],
                   op->tube ? " " : "", op->tube ? op->tube : "");
    st = b.oom ? err_set(e, ST_LOCAL, "out of memory") :
                 client_send(c, b.data, b.len, e);
    buf_free(&b);
    return st;
}

/* A reply other than success or NOT_FOUND: why the run stops. */
static void stop_reason(const IdOp *op, const Reply *r, uint64_t id, Err *e)
{
    if (reply_is(r, "UNKNOWN_COMMAND"))
        no_ext(e, op->cmd, op->req);
    else if (op->tube && reply_is(r, "OUT_OF_MEMORY"))
        err_set(e, ST_SERVER, "cannot move job %llu: tube '%s' is full",
                (unsigned long long)id, op->tube);
    else
        reply_unexpected(r, op->req, e);
}

/* Not found, said on stderr at once when there are several jobs (one
 * job's is the run's own error message); stdout first, for the order. */
static Status say_missing(const IdOp *op, uint64_t id, Buf *out, Err *e)
{
    if (op->total < 2 || !op->per_job)
        return ST_OK;
    if (out_flush(out, e) != ST_OK)
        return ST_LOCAL;
    fflush(stdout);
    cli_warn("no job %llu %s", (unsigned long long)id, op->why);
    return ST_OK;
}

/* Read one job's reply and file it. */
static Status take_reply(const Cli *cli, Client *c, const IdOp *op, uint64_t id,
                         IdRun *run, Buf *out, Err *e)
{
    Reply r;
    Status st = ST_OK;

    if (client_read(c, &r, e) != ST_OK)
        return e->code;
    if (reply_is(&r, op->ok) && strcmp(r.line, op->ok) == 0) {
        st = idlist_push(&run->done, id, e);
        if (op->per_job && !cli->json) {
            buf_printf(out, "%s job %llu", op->did, (unsigned long long)id);
            if (op->tube)
                buf_printf(out, " to tube '%s'", op->tube);
            buf_append(out, "\n", 1);
        }
    } else if (reply_is(&r, "NOT_FOUND")) {
        if ((st = idlist_push(&run->missing, id, e)) == ST_OK)
            st = say_missing(op, id, out, e);
    } else if (run->stop.code == ST_OK) {
        stop_reason(op, &r, id, &run->stop);
    }
    reply_free(&r);
    return st;
}

/* Every id, batch by batch, until the end or a reply that stops it. */
static Status run_ids(const Cli *cli, Client *c, const IdOp *op,
                      const uint64_t *ids, size_t n, IdRun *run, Err *e)
{
    Status st = ST_OK;

    for (size_t i = 0; i < n && st == ST_OK; i += BATCH) {
        size_t k = n - i < BATCH ? n - i : BATCH;
        Buf out = {0};
        st = send_batch(c, op, ids + i, k, e);
        for (size_t j = 0; j < k && st == ST_OK; j++)
            st = take_reply(cli, c, op, ids[i + j], run, &out, e);
        /* What was done is true even when a later reply failed. */
        if (out_flush(&out, st == ST_OK ? e : &(Err){0}) != ST_OK)
            st = ST_LOCAL;
        buf_free(&out);
        if (st == ST_OK && run->stop.code != ST_OK) {
            *e = run->stop;
            st = e->code;
        }
    }
    return st;
}

/* A stopped run: say how far it got, if anywhere. */
static Status stopped(const IdOp *op, const IdRun *run, Status st, Err *e)
{
    size_t n = strlen(e->msg);

    if (run->done.n)
        snprintf(e->msg + n, sizeof e->msg - n, " (stopped after %zu %s %s)",
                 run->done.n, plural(run->done.n, "job", "jobs"), op->did);
    return st;
}

/* The end of delete, kick-job, move of ids: the JSON document, and exit
 * status 1 if a job was not found. */
static Status finish(const Cli *cli, const IdOp *op, const IdRun *run, Err *e)
{
    Buf b = {0};
    Status st = ST_OK;

    if (cli->json) {
        buf_append(&b, "{", 1);
        if (op->tube) {
            buf_append(&b, "\"tube\":", 7);
            json_cstr(&b, op->tube);
            buf_append(&b, ",", 1);
        }
        buf_printf(&b, "\"%s\":", op->did);
        json_ids(&b, &run->done);
        buf_append(&b, ",\"not_found\":", 13);
        json_ids(&b, &run->missing);
        buf_append(&b, "}\n", 2);
        st = out_flush(&b, e);
        buf_free(&b);
    }
    if (st != ST_OK || !run->missing.n)
        return st;
    if (op->total == 1)
        return err_set(e, ST_NOT_FOUND, "no job %llu %s",
                       (unsigned long long)run->missing.ids[0], op->why);
    return err_set(e, ST_NOT_FOUND, "%zu of %zu jobs not found",
                   run->missing.n, op->total);
}

/* The ids of args[0..n), all checked before anything is sent. */
static Status parse_ids(const char *cmd, char **args, int n, IdList *ids, Err *e)
{
    uint64_t id;

    for (int i = 0; i < n; i++) {
        if (parse_id(cmd, args[i], &id, e) != ST_OK)
            return ST_USAGE;
        if (idlist_push(ids, id, e) != ST_OK)
            return ST_LOCAL;
    }
    return ST_OK;
}

static Status by_ids(const Cli *cli, Client *c, IdOp *op, char **args, int n,
                     Err *e)
{
    IdList ids = {0};
    IdRun run = {0};
    Status st = parse_ids(op->cmd, args, n, &ids, e);

    op->total = (size_t)n;
    op->per_job = 1;
    if (st == ST_OK)
        st = run_ids(cli, c, op, ids.ids, ids.n, &run, e);
    if (st == ST_OK)
        st = finish(cli, op, &run, e);
    else if (st != ST_USAGE)
        st = stopped(op, &run, st, e);
    idlist_free(&ids);
    idrun_free(&run);
    return st;
}

Status cmd_delete(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    IdOp op = {"delete", "delete", "DELETED", "deleted",
               "(it does not exist, or another client has it reserved)",
               NULL, 0, 0};

    return by_ids(cli, c, &op, args, nargs, e);
}

Status cmd_kick_job(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    IdOp op = {"kick-job", "kick-job", "KICKED", "kicked",
               "that can be kicked (it does not exist, or is neither buried "
               "nor delayed)", NULL, 0, 0};

    return by_ids(cli, c, &op, args, nargs, e);
}

/* ---------------------------------------------------------------- move */

static const char *const move_why =
    "that can move (it does not exist, or a worker has it reserved)";

/* move ID TUBE, as it always was: {"moved": ID} with --json. */
static Status move_one(const Cli *cli, Client *c, IdOp *op, char **args, Err *e)
{
    IdRun run = {0};
    uint64_t id;
    Buf b = {0};
    Status st;

    if (parse_id("move", args[0], &id, e) != ST_OK)
        return ST_USAGE;
    op->total = 1;
    op->per_job = !cli->json;
    st = run_ids(cli, c, op, &id, 1, &run, e);
    if (st == ST_OK && run.missing.n)
        st = err_set(e, ST_NOT_FOUND, "no job %llu %s", (unsigned long long)id,
                     move_why);
    if (st == ST_OK && cli->json) {
        buf_printf(&b, "{\"moved\":%llu}\n", (unsigned long long)id);
        st = out_flush(&b, e);
        buf_free(&b);
    }
    idrun_free(&run);
    return st;
}

/* Every job of `from` in `state`, page by page of list-jobs. Jobs that
 * a worker reserves or someone deletes meanwhile answer NOT_FOUND: they
 * are counted, not an error. */
static Status move_state_pages(const Cli *cli, Client *c, const IdOp *op,
                               const char *from, const char *state,
                               IdRun *run, Err *e)
{
    IdList page = {0};
    uint64_t start = 0;
    Status st;

    for (;;) {
        st = list_jobs_page(c, "move", from, state, start, &page, e);
        run->listed |= st == ST_OK;
        /* The tube went away once the last job left it: done. */
        if (st == ST_NOT_FOUND && run->listed)
            st = ST_OK;
        if (st != ST_OK || page.n == 0)
            break;
        if ((st = run_ids(cli, c, op, page.ids, page.n, run, e)) != ST_OK)
            break;
        if (page.ids[page.n - 1] == UINT64_MAX)
            break;
        start = page.ids[page.n - 1] + 1;
    }
    idlist_free(&page);
    return st;
}

static Status move_state(const Cli *cli, Client *c, IdOp *op, char **args, Err *e)
{
    static const char *const each[] = {"ready", "delayed", "buried", NULL};
    const char *one[] = {args[1], NULL};
    int all = strcmp(args[1], "all") == 0;
    const char *const *states = all ? each : one;
    IdRun run = {0};
    Buf b = {0};
    Status st = ST_OK;

    if (check_tube_name(args[0], e) != ST_OK)
        return ST_USAGE;
    if (strcmp(args[1], "reserved") == 0)
        return err_set(e, ST_USAGE, "move: reserved jobs cannot move: only their "
                       "worker can let go of them");
    if (strcmp(args[0], args[2]) == 0)
        return err_set(e, ST_USAGE, "move: the jobs are in tube '%s' already", args[0]);
    /* "all" is every job that can move: reserved ones are not listed. */
    for (; *states && st == ST_OK; states++)
        st = move_state_pages(cli, c, op, args[0], *states, &run, e);
    if (st != ST_OK) {
        st = stopped(op, &run, st, e);
    } else if (cli->json) {
        buf_append(&b, "{\"from\":", 8);
        json_cstr(&b, args[0]);
        buf_printf(&b, ",\"state\":\"%s\",\"tube\":", args[1]);
        json_cstr(&b, op->tube);
        buf_printf(&b, ",\"moved\":%zu,\"skipped\":%zu}\n", run.done.n,
                   run.missing.n);
    } else {
        buf_printf(&b, "moved %zu%s%s %s from tube '%s' to tube '%s'", run.done.n,
                   all ? "" : " ", all ? "" : args[1],
                   plural(run.done.n, "job", "jobs"), args[0], op->tube);
        if (run.missing.n)
            buf_printf(&b, "; %zu taken by workers or deleted meanwhile stayed",
                       run.missing.n);
        buf_append(&b, "\n", 1);
    }
    if (st == ST_OK)
        st = out_flush(&b, e);
    buf_free(&b);
    idrun_free(&run);
    return st;
}

/* move ID... TUBE, or move FROM STATE TUBE: three arguments whose second
 * is a state word are the second form (no job id is a word). */
Status cmd_move(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    static const char *const states[] = {"ready", "delayed", "buried", "all",
                                         "reserved", NULL};
    const char *tube = args[nargs - 1];
    IdOp op = {"move", "move-job", "MOVED", "moved", move_why, tube, 0, 0};

    if (check_tube_name(tube, e) != ST_OK)
        return ST_USAGE;
    if (nargs == 3 && is_word(args[1], states))
        return move_state(cli, c, &op, args, e);
    if (nargs == 2)
        return move_one(cli, c, &op, args, e);
    return by_ids(cli, c, &op, args, nargs - 1, e);
}
