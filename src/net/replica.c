/*
 * replica.c — a replica's link to its primary (repl.h; the wire protocol
 * is in doc/replication.md): connect, handshake, apply the stream through
 * the engine, acknowledge what this server's binlog holds, reconnect at
 * most once a second.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "ascii.h"
#include "blcodec.h"
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "net.h"
#include "numparse.h"
#include "repl.h"
#include "replid.h"

#define RETRY_NS NS_PER_SEC
/* How often a name lookup in progress is looked at. */
#define LOOKUP_POLL_NS (10 * NS_PER_MSEC)
#define READ_CHUNK (256 * 1024)
#define HANDSHAKE_MAX 128
#define ACK_OUT_MAX 4096
#define POLL_EVERY 32 /* records applied between looks at the sync */

static Repl *R(const Server *s)
{
    return s->repl;
}

static void on_event(EvSource *src, uint32_t events);
static void read_some(Server *s);

/* Give up the connection; try again in a second. why goes to last-error
 * and, when it is news, to the log. */
/* The link ended (why: for last-error, and for the log when logged, once
 * per distinct reason); the next try is a second away. */
static void end_link(Server *s, const char *why, int logged)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start;

    /* Records applied since the last P are in our state (and binlog):
     * our position must count them, or a promotion would start its own
     * records at positions these hold, and a replica going on from us
     * would miss them. */
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    if (r->rstate == RS_STREAM && !r->snapshot && !r->continuing && r->pending_pos != pos)
        engine_set_position(&s->eng, epoch, r->pending_pos, start, 1);
    if (r->ev.fd >= 0) {
        ev_del(&s->loop, &r->ev);
        close(r->ev.fd);
        r->ev.fd = -1;
    }
    r->in.len = 0;
    r->out.len = 0;
    r->rstate = RS_IDLE;
    r->acks_len = 0;
    r->acked = 0;
    r->next_try = s->eng.now + RETRY_NS;
    if (r->snapshot)
        engine_sweep_abort(&s->eng);
    r->snapshot = 0;
    snprintf(r->last_error, sizeof r->last_error, "%s", why);
    if (logged && strcmp(r->logged_error, why)) {
        log_warn("replication: primary %s: %s; retrying every second", r->primary, why);
        snprintf(r->logged_error, sizeof r->logged_error, "%s", why);
    }
}

static void fail(Server *s, const char *why)
{
    end_link(s, why, 1);
}

void replica_stop(Server *s)
{
    Repl *r = R(s);

    if (!r)
        return;
    net_lookup_end(r->lookup); /* (of the primary it followed) */
    r->lookup = NULL;
    if (r->ev.fd >= 0) {
        ev_del(&s->loop, &r->ev);
        close(r->ev.fd);
        r->ev.fd = -1;
    }
    if (r->snapshot)
        engine_sweep_abort(&s->eng);
    r->snapshot = 0;
    r->rstate = RS_IDLE;
    r->in.len = r->out.len = 0;
    r->acks_len = 0;
    r->acked = 0;
}

void replica_expect_answer(Server *s)
{
    R(s)->rstate = RS_HANDSHAKE;
}

void replica_begin(Server *s)
{
    Repl *r = R(s);

    net_lookup_end(r->lookup); /* (of the primary it followed) */
    r->lookup = NULL;

    r->rstate = RS_IDLE;
    r->next_try = s->eng.now; /* at once */
    r->logged_error[0] = '\0';
}

int replica_connected(const Server *s)
{
    const Repl *r = R(s);

    return r->rstate == RS_STREAM;
}

static void want(Server *s, uint32_t mask)
{
    Repl *r = R(s);

    if (ev_set(&s->loop, &r->ev, mask) < 0)
        log_warn("epoll_ctl: %s", strerror(errno));
}

/* Send what is queued as far as the socket takes it: 0 all sent, 1 the
 * socket is full (writability now watched), -1 an error. */
static int send_some(Server *s)
{
    Repl *r = R(s);

    while (r->out.len) {
        ssize_t n = send(r->ev.fd, r->out.data, r->out.len, MSG_NOSIGNAL);
        if (n > 0) {
            buf_consume(&r->out, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want(s, EPOLLIN | EPOLLOUT);
            return 1;
        }
        return -1;
    }
    return 0;
}

/* Write what is queued (handshake, acks); -1 after fail(). */
static int flush_out(Server *s)
{
    int rc = send_some(s);

    if (rc < 0) {
        fail(s, "connection lost");
        return -1;
    }
    if (rc > 0 && R(s)->out.len > ACK_OUT_MAX) {
        fail(s, "the primary does not read our acknowledgements");
        return -1;
    }
    if (!rc)
        want(s, EPOLLIN);
    return 0;
}

/* A connect failed: the next try takes the primary's next address, at
 * once while this round has addresses left, a second later when all of
 * them failed. Only a round's last failure is logged: addresses failing
 * each their own way would otherwise alternate in the log every second. */
static void connect_failed(Server *s, const char *why)
{
    Repl *r = R(s);
    int more = (r->addr_nth + 1) % r->addr_count != 0;

    end_link(s, why, !more);
    if (more) {
        r->addr_nth++;
        r->next_try = s->eng.now;
    } else {
        r->addr_nth = 0;
    }
}

/* A name is looked up off the loop (net.h): the attempt starts the lookup
 * and the next iterations poll it; literals and Unix paths connect at
 * once. */
static void try_connect(Server *s)
{
    Repl *r = R(s);
    char err[256];
    int fd;

    if (!r->lookup && net_needs_lookup(r->primary) &&
        !(r->lookup = net_lookup_start(r->primary, err, sizeof err))) {
        connect_failed(s, err);
        return;
    }
    if (r->lookup) {
        fd = net_lookup_connect(r->lookup, r->addr_nth, &r->addr_count, err, sizeof err);
        if (fd == -2)
            return; /* still looking it up */
        net_lookup_end(r->lookup);
        r->lookup = NULL;
    } else {
        fd = net_connect(r->primary, r->addr_nth, &r->addr_count, err, sizeof err);
    }
    if (fd < 0) {
        connect_failed(s, err);
        return;
    }
    r->ev.handler = on_event;
    if (ev_add(&s->loop, &r->ev, fd, EPOLLOUT | EPOLLIN) < 0) {
        close(fd);
        fail(s, "epoll_ctl failed");
        return;
    }
    r->rstate = RS_CONNECTING;
    r->heard = s->eng.now;
}

static void send_handshake(Server *s)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start;
    char line[96];
    int n;

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    /* Position 0 asks for a snapshot: when the history our position is on
     * is unknown (no id), or the last attempt to go on from it failed. */
    if (r->force_full || !r->sid)
        pos = 0;
    r->claimed = pos;
    n = snprintf(line, sizeof line, "replicate %llu %llu\r\n", (unsigned long long)epoch,
                 (unsigned long long)pos);
    if (buf_append(&r->out, line, (size_t)n) < 0) {
        fail(s, "out of memory");
        return;
    }
    r->rstate = RS_HANDSHAKE;
    flush_out(s);
}

/* The changes this server has that the new primary lacks: the records of
 * its own history past where the primary's epoch began (or past the
 * primary's position, in the same epoch). */
static uint64_t discarded_by(uint64_t epoch, uint64_t pos, uint64_t p_epoch, uint64_t p_pos,
                             uint64_t p_start)
{
    if (p_epoch > epoch)
        return pos > p_start ? pos - p_start : 0;
    return pos > p_pos ? pos - p_pos : 0;
}

/* The snapshot's end deleted `swept` jobs the primary did not send. The
 * records of our tail, counted at the answer, made most of them: a job
 * put in the tail is one change, not two. The sweep adds only what the
 * count of records could not see (jobs of another history at a position
 * the primary has passed). */
static void discard_swept(Server *s, uint64_t swept)
{
    Repl *r = R(s);

    if (swept > r->tail_counted)
        r->discarded += swept - r->tail_counted;
    r->tail_counted = 0;
}

/* "WORD e p s" (WORD and its space are k bytes): 0, or -1. */
static int three_numbers(const char *line, size_t len, size_t k, uint64_t *pe, uint64_t *pp,
                         uint64_t *ps)
{
    const char *sp1, *sp2;

    return len > k && (sp1 = memchr(line + k, ' ', len - k)) &&
                   (sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - line))) &&
                   parse_u64(line + k, (size_t)(sp1 - line - (ptrdiff_t)k), pe) == 0 &&
                   parse_u64(sp1 + 1, (size_t)(sp2 - sp1 - 1), pp) == 0 &&
                   parse_u64(sp2 + 1, len - (size_t)(sp2 + 1 - line), ps) == 0
               ? 0
               : -1;
}

/* "CONTINUING e p s": only what follows our position comes, after an I
 * record that must name the history our position is on. */
static void continuing(Server *s, uint64_t pe, uint64_t pp, uint64_t ps)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start;

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    if (pe < epoch || !r->claimed || r->claimed != pos || pp < pos) {
        char why[200];
        snprintf(why, sizeof why, "the primary offered to go on (epoch %llu, position %llu) "
                 "from a position we did not ask for (%llu; ours: epoch %llu, position %llu)",
                 (unsigned long long)pe, (unsigned long long)pp,
                 (unsigned long long)r->claimed, (unsigned long long)epoch,
                 (unsigned long long)pos);
        r->force_full = 1;
        fail(s, why);
        return;
    }
    r->ans_epoch = pe;
    r->ans_start = ps;
    r->known_pos = pp;
    r->pending_pos = pos;
    r->snapshot = 0;
    r->continuing = 1;
    r->rstate = RS_STREAM;
    r->last_error[0] = '\0';
    r->logged_error[0] = '\0';
}

/* An answer that does not lead on to following (a primary behind our
 * epoch, FENCED, NOT_PRIMARY, not tubed): the server told to follow is
 * no primary of an epoch above ours, so a promotion needs no epoch
 * skipped for it (next_epoch() in repl.c). */
static void heard_no_higher(Server *s)
{
    uint64_t epoch, pos, start;

    if (!engine_epoch_unheard(&s->eng))
        return;
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    engine_set_position_unheard(&s->eng, epoch, pos, start, 1, 0); /* (no room: kept) */
}

/* "REPLICATING e p s": follow, or refuse a primary behind our epoch. */
static void handshake_answer(Server *s, const char *line, size_t len)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start, pe, pp, ps, d;
    char why[200];
    /* What the peer said, cut to 63 bytes of printable ASCII (ascii.h): it
     * goes into the log and into last-error, where a raw escape sequence
     * would reach an operator's terminal and a stray byte would make
     * stats-replication YAML that strict readers refuse. */
    char said[64];

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    if (len > 11 && !memcmp(line, "CONTINUING ", 11) &&
        three_numbers(line, len, 11, &pe, &pp, &ps) == 0) {
        if (pe >= epoch) {
            continuing(s, pe, pp, ps);
            return;
        }
    }
    if (len > 12 && !memcmp(line, "REPLICATING ", 12) &&
        three_numbers(line, len, 12, &pe, &pp, &ps) == 0) {
        if (pe < epoch) {
            snprintf(why, sizeof why, "the primary's epoch %llu is lower than ours (%llu): "
                     "not following a stale primary", (unsigned long long)pe,
                     (unsigned long long)epoch);
            heard_no_higher(s);
            fail(s, why);
            return;
        }
        /* Position 0 until the snapshot is complete: a partial state must
         * never look like the most advanced replica. */
        if (engine_sweep_begin(&s->eng) < 0 ||
            engine_set_position_unheard(&s->eng, pe, 0, ps, 1, 0) < 0) {
            fail(s, "out of memory or disk room to start following");
            return;
        }
        d = discarded_by(epoch, pos, pe, pp, ps);
        r->tail_counted += d; /* (a snapshot cut off left its count here) */
        r->discarded += d;
        r->known_pos = pp;
        r->pending_pos = 0;
        r->snapshot = 1;
        r->continuing = 0;
        r->new_sid = 0;
        r->force_full = 0;
        r->resumed_at = 0;
        r->full_resyncs++;
        r->rstate = RS_STREAM;
        r->last_error[0] = '\0';
        r->logged_error[0] = '\0';
        log_info("replication: following %s (epoch %llu, position %llu): receiving a "
                 "snapshot", r->primary, (unsigned long long)pe, (unsigned long long)pp);
        return;
    }
    if (len > 7 && !memcmp(line, "FENCED ", 7))
        snprintf(why, sizeof why, "the primary's epoch (%s) is lower than ours: "
                 "not following a stale primary",
                 ascii_text(said, sizeof said, line + 7, len - 7));
    else if (len == 11 && !memcmp(line, "NOT_PRIMARY", 11))
        snprintf(why, sizeof why, "it is not a primary (a replica itself)");
    else if (len == 9 && !memcmp(line, "NO_BINLOG", 9))
        snprintf(why, sizeof why, "it keeps no binlog (started without -b): it has "
                 "nothing to stream");
    else
        snprintf(why, sizeof why, "it does not replicate: answered '%s'",
                 ascii_text(said, sizeof said, line, len));
    heard_no_higher(s);
    fail(s, why);
}

/* Our backlog holds the stream from position pos on. keep: what it holds
 * is the same history (a partial resync) and is kept if it ends there; a
 * snapshot starts another history, and the backlog with it. */
static void backlog_from(Server *s, uint64_t pos, int keep)
{
    Repl *r = R(s);
    uint64_t first, last;

    if (!bk_on(&r->bk) && s->cfg.repl_backlog &&
        bk_init(&r->bk, (size_t)s->cfg.repl_backlog) < 0)
        log_warn("replication: no memory for a %llu-byte backlog",
                 (unsigned long long)s->cfg.repl_backlog);
    if (!keep || !bk_range(&r->bk, &first, &last) || last != pos)
        bk_reset(&r->bk, pos);
}

/* An ACK of pos once this server's records so far are durable. */
static int ack_later(Server *s, uint64_t pos)
{
    Repl *r = R(s);
    ReplAck a = {engine_lsn(&s->eng), pos, s->eng.now};

    if (r->acks_len == r->acks_cap) {
        size_t cap = r->acks_cap ? r->acks_cap * 2 : 16;
        ReplAck *v = tb_malloc(cap * sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < r->acks_len; i++)
            v[i] = r->acks[(r->acks_head + i) % r->acks_cap];
        tb_free(r->acks);
        r->acks = v;
        r->acks_head = 0;
        r->acks_cap = cap;
    }
    r->acks[(r->acks_head + r->acks_len) % r->acks_cap] = a;
    r->acks_len++;
    return 0;
}

/* The I record: in a partial resync the history it names must be ours;
 * in a snapshot its stream id is kept for E. -1 after fail(). */
static int take_id(Server *s, uint64_t history, uint64_t stream)
{
    Repl *r = R(s);
    char why[160];

    if (!r->continuing) {
        if (!r->snapshot) {
            fail(s, "an identity record in the middle of the stream");
            return -1;
        }
        r->new_sid = stream;
        return 0;
    }
    if (!history || history != r->sid) {
        r->force_full = 1;
        snprintf(why, sizeof why, "our position is on another history than the primary's "
                 "(%016llx, not %016llx): asking for a snapshot",
                 (unsigned long long)r->sid, (unsigned long long)history);
        fail(s, why);
        return -1;
    }
    if (stream != r->sid) {
        r->sid = stream; /* on disk before any record of that stream */
        replid_save(s->cfg.binlog_dir, s->cfg.fsync_never, stream);
    }
    if (engine_set_position_unheard(&s->eng, r->ans_epoch, r->claimed, r->ans_start, 1, 0) < 0 ||
        ack_later(s, r->claimed) < 0) {
        fail(s, "out of memory or disk room to go on following");
        return -1;
    }
    backlog_from(s, r->claimed, 1);
    r->resumed_at = r->claimed;
    r->continuing = 0;
    r->partial_resyncs++;
    log_info("replication: following %s (epoch %llu, position %llu): going on from "
             "position %llu", r->primary, (unsigned long long)r->ans_epoch,
             (unsigned long long)r->known_pos, (unsigned long long)r->claimed);
    return 0;
}

/* One record of the stream. -1 after fail(). */
static int take_record(Server *s, const BlRecord *rec)
{
    Repl *r = R(s);

    switch (rec->type) {
    case BL_POS:
        if (rec->pos > r->known_pos)
            r->known_pos = rec->pos;
        if (!r->snapshot && rec->pos != r->pending_pos) {
            /* Our count of its records and its own disagree: going on
             * from our position could skip or repeat records. */
            r->force_full = 1;
            fail(s, "the stream's position is not ours (records missing or repeated)");
            return -1;
        }
        return 0;
    case BL_SNAP_END:
        if (!r->snapshot) {
            fail(s, "the primary sent a second end of snapshot");
            return -1;
        }
        engine_apply(&s->eng, rec);
        discard_swept(s, engine_sweep_end(&s->eng));
        r->snapshot = 0;
        r->pending_pos = rec->pos;
        if (rec->pos > r->known_pos)
            r->known_pos = rec->pos;
        /* From here our position is on the primary's history: its id goes
         * to disk before that position does (note_position, next). */
        r->sid = r->new_sid;
        replid_save(s->cfg.binlog_dir, s->cfg.fsync_never, r->sid);
        backlog_from(s, rec->pos, 0);
        log_info("replication: snapshot from %s complete (position %llu)", r->primary,
                 (unsigned long long)rec->pos);
        return 0;
    default:
        if (engine_apply(&s->eng, rec) < 0) {
            fail(s, "cannot apply a record (out of memory or disk room)");
            return -1;
        }
        if (!r->snapshot)
            r->pending_pos++; /* one more of the primary's records */
        return 0;
    }
}

static int take_stream(Server *s);
static void note_position(Server *s);

/* The bytes read so far: the handshake's answer, then records. 0, or -1
 * after fail(). */
static int take_input(Server *s)
{
    Repl *r = R(s);

    if (r->rstate == RS_HANDSHAKE) {
        char *eol = memchr(r->in.data, '\n', r->in.len < HANDSHAKE_MAX ? r->in.len
                                                                       : HANDSHAKE_MAX);
        size_t len;
        if (!eol) {
            if (r->in.len >= HANDSHAKE_MAX) {
                fail(s, "it answered the handshake with an overlong line");
                return -1;
            }
            return 0;
        }
        len = (size_t)(eol - r->in.data);
        if (len && r->in.data[len - 1] == '\r')
            len--;
        handshake_answer(s, r->in.data, len);
        if (r->rstate != RS_STREAM)
            return -1;
        buf_consume(&r->in, (size_t)(eol - r->in.data) + 1);
    }
    if (take_stream(s) < 0)
        return -1;
    note_position(s);
    return r->rstate == RS_STREAM ? 0 : -1;
}

/* Decode and apply every whole record in the input. -1 after fail().
 * A read holds hundreds of records (some 0.2 ms of applying): every
 * POLL_EVERY the sync of the previous batch is looked at, so its
 * acknowledgement leaves as soon as it ended, not after this apply. */
static int take_stream(Server *s)
{
    Repl *r = R(s);
    size_t off = 0;
    unsigned taken = 0;

    while (off < r->in.len) {
        BlRecord rec;
        long n;
        int live;
        uint64_t history, stream;
        int id = replid_decode(r->in.data + off, r->in.len - off, &history, &stream);
        if (r->in.len - off < BL_REC_HEAD)
            break; /* (a short length field may look like an end: wait) */
        if (id < 0)
            break; /* an I record, not all here yet */
        if (id) {
            if (take_id(s, history, stream) < 0)
                return -1;
            off += REPLID_RECORD_SIZE;
            continue;
        }
        if (r->continuing) {
            r->force_full = 1;
            fail(s, "the primary went on without saying which history it is on");
            return -1;
        }
        n = bl_decode(r->in.data + off, r->in.len - off, &rec);
        if (n == BL_TORN)
            break;
        if (n <= 0) {
            fail(s, "a damaged record from the primary (checksum or structure)");
            return -1;
        }
        live = !r->snapshot;
        if (take_record(s, &rec) < 0)
            return -1;
        if (live) {
            /* The stream as received, for our own replicas after a
             * promotion (E is never part of it). */
            bk_append(&r->bk, r->in.data + off, (size_t)n);
            if (rec.type == BL_POS)
                bk_mark(&r->bk, rec.pos);
        }
        off += (size_t)n;
        if (++taken % POLL_EVERY == 0)
            engine_poll_durable(&s->eng); /* may ACK: never fails the link */
    }
    buf_consume(&r->in, off);
    return 0;
}

/* The batch applied: journal the position it reached, and remember which
 * of this server's records must be durable before it is acknowledged. */
static void note_position(Server *s)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start;

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    if (r->snapshot || r->pending_pos == pos)
        return;
    if (engine_set_position(&s->eng, epoch, r->pending_pos, start, 1) < 0) {
        fail(s, "no disk room to journal the position");
        return;
    }
    if (ack_later(s, r->pending_pos) < 0)
        fail(s, "out of memory");
}

int replica_feed(Server *s, const char *p, size_t len)
{
    Repl *r = R(s);

    if (r->rstate != RS_HANDSHAKE && r->rstate != RS_STREAM)
        return -1;
    if (buf_append(&r->in, p, len) < 0) {
        fail(s, "out of memory");
        return -1;
    }
    return take_input(s);
}

static void read_some(Server *s)
{
    Repl *r = R(s);
    ssize_t n;

    if (buf_reserve(&r->in, READ_CHUNK) < 0) {
        fail(s, "out of memory");
        return;
    }
    n = read(r->ev.fd, r->in.data + r->in.len, r->in.cap - r->in.len);
    if (n == 0) {
        fail(s, "the primary closed the connection");
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            fail(s, strerror(errno));
        return;
    }
    r->in.len += (size_t)n;
    r->heard = s->eng.now;
    take_input(s);
}

static void on_event(EvSource *src, uint32_t events)
{
    Repl *r = container_of(src, Repl, ev);
    Server *s = r->srv;

    if (r->rstate == RS_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(src->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            connect_failed(s, strerror(err));
            return;
        }
        if (!(events & (EPOLLOUT | EPOLLIN)))
            return;
        send_handshake(s);
        return;
    }
    if (events & EPOLLOUT && flush_out(s) < 0)
        return;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        read_some(s);
}

/* Acknowledge what is durable here: one line covers every batch since the
 * last. Called from the binlog's durable report, the moment a sync's end
 * is seen (possibly in the middle of take_stream(), when a long apply
 * polls for it): an acknowledgement must not wait behind the apply of the
 * next read. So it never fails the link (that would empty the input under
 * take_stream()): what cannot be queued now is acknowledged by a later
 * call, the acks it covers still being in the ring. */
void replica_durable(Server *s)
{
    Repl *r = R(s);
    uint64_t durable = engine_durable_lsn(&s->eng), upto = 0;
    size_t k = 0;
    char line[48];
    int n;

    if (r->rstate != RS_STREAM || r->ev.fd < 0)
        return;
    while (k < r->acks_len && r->acks[(r->acks_head + k) % r->acks_cap].lsn <= durable)
        upto = r->acks[(r->acks_head + k++) % r->acks_cap].pos;
    if (!k)
        return;
    if (upto > r->acked) {
        n = snprintf(line, sizeof line, "ACK %llu\r\n", (unsigned long long)upto);
        if (buf_append(&r->out, line, (size_t)n) < 0)
            return;
        r->acked = upto;
    }
    r->acks_head = (r->acks_head + k) % r->acks_cap;
    r->acks_len -= k;
    send_some(s); /* an error shows at the next read or flush_out() */
}

/* Once per loop iteration: reconnect when due; acknowledge what is
 * durable here; whatever could not be sent is tried again (and a link
 * whose acknowledgements back up fails here). */
void replica_tick(Server *s)
{
    Repl *r = R(s);

    if (r->rstate == RS_IDLE && r->primary[0] && (r->lookup || s->eng.now >= r->next_try)) {
        try_connect(s);
        return;
    }
    if (r->rstate != RS_IDLE && r->rstate != RS_CONNECTING && r->ev.fd >= 0 &&
        s->eng.now - r->heard > REPL_SILENCE_NS)
        read_some(s); /* (this process may have been stopped: look first) */
    if (r->rstate != RS_IDLE && r->ev.fd >= 0 && s->eng.now - r->heard > REPL_SILENCE_NS) {
        /* A primary that sends nothing (not even its heartbeat) is gone,
         * or was never one. */
        if (r->rstate == RS_CONNECTING)
            connect_failed(s, "connect: no answer for 10 s");
        else
            fail(s, r->rstate == RS_STREAM ? "no word from the primary for 10 s"
                                           : "no answer to the handshake for 10 s");
        return;
    }
    if (r->rstate != RS_STREAM)
        return;
    replica_durable(s);
    if (r->out.len)
        flush_out(s);
}

int64_t repl_next_due(const Server *s)
{
    const Repl *r = R(s);

    if (!r)
        return INT64_MAX;
    if (r->role == ROLE_PRIMARY)
        return r->nlinks ? r->beat_at : INT64_MAX;
    if (r->rstate != RS_IDLE)
        return r->ev.fd >= 0 ? r->heard + REPL_SILENCE_NS + 1 : INT64_MAX;
    if (r->lookup)
        return s->eng.now + LOOKUP_POLL_NS; /* (libc's thread tells nobody) */
    return r->primary[0] ? r->next_try : INT64_MAX;
}
