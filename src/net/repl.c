#include "repl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "blcodec.h"
#include "clock.h"
#include "engine.h"
#include "hostport.h"
#include "log.h"
#include "net.h"
#include "numparse.h"
#include "store.h"
#include "replid.h"

/* Snapshot records are made only while less than this waits for a
 * replica; live records may pile up to LIVE_MAX before it is dropped. */
#define SNAP_LOW (256 * 1024)
#define LIVE_MAX ((size_t)64 * 1024 * 1024)
/* Ids looked at per loop iteration and replica while making a snapshot. */
#define SCAN_MAX 65536
#define ACK_LINE_MAX 64
/* Ids a promotion skips (doc/replication.md). */
#define PROMOTE_ID_GAP ((uint64_t)1 << 20)

struct ReplLink {
    List node;             /* Repl.links */
    Repl *r;
    Conn *c;
    char addr[64];
    int snapshot;          /* 1 while the snapshot is being sent */
    int drop;              /* close at the next tick (why is logged) */
    int catchup;           /* a partial resync: sent from the backlog */
    uint64_t bk_off;       /* the backlog offset it is sent from next */
    uint64_t cursor;       /* the next id the snapshot looks at */
    uint64_t acked;        /* its acknowledged position */
    uint64_t sent;         /* the position of what it was sent (or had):
                            * it cannot acknowledge more */
    int64_t sent_at;       /* monotonic ns the last bytes were queued */
    char line[ACK_LINE_MAX];
    size_t line_len;
};

static Repl *R(const Server *s)
{
    return s->repl;
}

static uint64_t my_pos(const Server *s)
{
    uint64_t epoch, pos, start;

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    return pos;
}

/* ---- the lsn -> position map: which replies N replicas' acks release --- */

static int ring_push(ReplAck **v, size_t *head, size_t *len, size_t *cap, ReplAck a)
{
    if (*len == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        ReplAck *n = tb_malloc(ncap * sizeof *n);
        if (!n)
            return -1;
        for (size_t i = 0; i < *len; i++)
            n[i] = (*v)[(*head + i) % *cap];
        tb_free(*v);
        *v = n;
        *head = 0;
        *cap = ncap;
    }
    (*v)[(*head + *len) % *cap] = a;
    (*len)++;
    return 0;
}

static ReplAck *ring_front(ReplAck *v, size_t head, size_t len)
{
    return len ? &v[head] : NULL;
}

static void ring_pop(size_t *head, size_t *len, size_t cap)
{
    *head = (*head + 1) % cap;
    (*len)--;
}

/* The position N replicas (done with their snapshot) have acknowledged;
 * 0 with *ok unset when fewer than N are there. */
static uint64_t nth_acked(Repl *r, uint32_t n, int *ok)
{
    uint64_t best[256];
    size_t k = 0;

    *ok = 0;
    for (List *l = r->links.next; l != &r->links; l = l->next) {
        ReplLink *x = container_of(l, ReplLink, node);
        if (x->snapshot || x->drop || k == 256)
            continue;
        best[k++] = x->acked;
    }
    if (k < n)
        return 0;
    /* n is small: a partial selection sort, largest first */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < k; j++)
            if (best[j] > best[i]) {
                uint64_t t = best[i];
                best[i] = best[j];
                best[j] = t;
            }
    *ok = 1;
    return best[n - 1];
}

/* Pass the binlog's durable report on, as far as sync_replicas allows. */
static void release(Server *s)
{
    Repl *r = R(s);
    uint32_t n = s->cfg.sync_replicas;
    uint64_t upto = r->local_durable;

    if (n && r->role == ROLE_PRIMARY) {
        int ok;
        uint64_t pos = nth_acked(r, n, &ok);
        ReplAck *a;
        while (ok && (a = ring_front(r->map, r->map_head, r->map_len)) && a->pos <= pos) {
            r->repl_lsn = a->lsn;
            ring_pop(&r->map_head, &r->map_len, r->map_cap);
        }
        if (r->repl_lsn < upto)
            upto = r->repl_lsn;
    } else {
        /* Nothing waits for replicas: the map restarts from here. */
        r->map_len = 0;
        r->repl_lsn = engine_lsn(&s->eng);
    }
    /* A hold that replicas need not confirm (a journal = false put's)
     * goes as soon as it is durable here. */
    if (upto > r->released || r->local_durable > r->released_local) {
        if (upto > r->released)
            r->released = upto;
        r->released_local = r->local_durable;
        conn_durable_split(s, r->released, r->local_durable);
    }
}

void repl_durable(Server *s, uint64_t upto)
{
    Repl *r = R(s);

    if (!r) {
        conn_durable(s, upto);
        return;
    }
    if (upto > r->local_durable)
        r->local_durable = upto;
    release(s);
    if (r->role == ROLE_REPLICA)
        replica_durable(s); /* the primary waits for this, not the next tick */
}

void repl_reloaded(Server *s)
{
    if (R(s))
        release(s); /* a lower sync_replicas releases at once */
}

/* ---- the tap: every write of the binlog goes to every replica ---------- */

static void pos_record(Server *s, uint64_t pos, char out[BL_POS_SIZE])
{
    uint64_t epoch, p, start;
    BlRecord rec;

    engine_repl_state(&s->eng, &epoch, &p, &start);
    memset(&rec, 0, sizeof rec);
    rec.type = BL_POS;
    rec.id = epoch;
    rec.pos = pos;
    rec.epoch_start = start;
    bl_encode(&rec, out);
}

/* Records in a run of stream bytes (every one but P advances the
 * position); -1 when they are not whole records. */
static long count_records(const char *data, size_t len)
{
    long n = 0;
    size_t off = 0;

    while (off + BL_REC_HEAD < len) {
        const unsigned char *h = (const unsigned char *)data + off;
        uint64_t size = (uint64_t)h[0] | (uint64_t)h[1] << 8 | (uint64_t)h[2] << 16 |
                        (uint64_t)h[3] << 24;
        if (!size || size > len - off - BL_REC_HEAD)
            return -1;
        if (h[BL_REC_HEAD] != BL_POS)
            n++;
        off += BL_REC_HEAD + size;
    }
    return off == len ? n : -1;
}

/* A write of the binlog, as sent, into the backlog: the bytes, the P
 * record, and a mark at pos. Bytes that do not follow on from the last
 * mark (after a promotion, say) start it again. */
static void backlog_feed(Repl *r, const char *data, size_t len, uint64_t pos,
                         const char p[BL_POS_SIZE])
{
    long n = count_records(data, len);
    uint64_t first, last;

    if (!bk_on(&r->bk))
        return;
    if (n < 0 || (uint64_t)n > pos) {
        bk_reset(&r->bk, pos); /* cannot be: resume from here on only */
        return;
    }
    if (!bk_range(&r->bk, &first, &last) || last != pos - (uint64_t)n)
        bk_reset(&r->bk, pos - (uint64_t)n);
    bk_append(&r->bk, data, len);
    bk_append(&r->bk, p, BL_POS_SIZE);
    bk_mark(&r->bk, pos);
}

static void on_write(void *arg, const char *data, size_t len, uint64_t pos, uint64_t lsn)
{
    Server *s = arg;
    Repl *r = R(s);
    char p[BL_POS_SIZE];

    if (r->role != ROLE_PRIMARY)
        return;
    if (s->cfg.sync_replicas &&
        ring_push(&r->map, &r->map_head, &r->map_len, &r->map_cap,
                  (ReplAck){lsn, pos, s->eng.now}) < 0) {
        /* Without the entry these replies would wait for ever: take them
         * back instead (a client never holds an unconfirmed ack). */
        log_err("replication: out of memory tracking acknowledgements");
        conn_lost(s, r->released + 1);
    }
    if (!r->nlinks && !bk_on(&r->bk))
        return;
    pos_record(s, pos, p);
    backlog_feed(r, data, len, pos, p);
    for (List *l = r->links.next; l != &r->links; l = l->next) {
        ReplLink *x = container_of(l, ReplLink, node);
        if (x->drop || x->catchup)
            continue; /* (a catching-up link reads this from the backlog) */
        conn_reply(x->c, data, len);
        conn_reply(x->c, p, sizeof p);
        x->sent = pos;
        /* Sent before the replies this iteration releases: the clients'
         * next replies wait on this batch's round trip to the replica,
         * and writing fifty replies first delays it by their sends. */
        conn_mark_first(x->c);
        x->sent_at = s->eng.now;
        if (conn_out_pending(x->c) > LIVE_MAX) {
            log_warn("replication: replica %s is %zu bytes behind (not reading); "
                     "dropping it (it will reconnect and resync)", x->addr,
                     conn_out_pending(x->c));
            x->drop = 1;
        }
    }
}

static void on_reset(void *arg)
{
    Server *s = arg;
    Repl *r = R(s);

    /* The log was rewritten after a failed write: records the replicas
     * were never sent are lost to them; each starts over, and nothing
     * before the hole can be resumed from. */
    bk_reset(&r->bk, my_pos(s));
    for (List *l = r->links.next; l != &r->links; l = l->next) {
        ReplLink *x = container_of(l, ReplLink, node);
        if (!x->drop)
            log_warn("replication: binlog rewritten after a failure; replica %s resyncs",
                     x->addr);
        x->drop = 1;
    }
}

/* A primary's backlog exists from its first replica on. */
static void backlog_want(Server *s)
{
    Repl *r = R(s);

    if (bk_on(&r->bk) || !s->cfg.repl_backlog)
        return;
    if (bk_init(&r->bk, (size_t)s->cfg.repl_backlog) < 0)
        log_warn("replication: no memory for a %llu-byte backlog: every reconnection "
                 "will be a full resync", (unsigned long long)s->cfg.repl_backlog);
}

/* Can a replica at (epoch, pos) be sent only what follows? The history its
 * position must be on goes to *history, the backlog offset to *off. */
static int can_continue(Server *s, uint64_t epoch, uint64_t pos, uint64_t *history,
                        uint64_t *off)
{
    Repl *r = R(s);
    uint64_t my_epoch, p, start;

    engine_repl_state(&s->eng, &my_epoch, &p, &start);
    if (!pos || !bk_on(&r->bk))
        return 0; /* position 0: an empty replica, or one asking for a snapshot */
    if (epoch == my_epoch && r->sid)
        *history = r->sid;
    else if (r->prev_sid && epoch == r->prev_epoch && pos <= r->switch_pos)
        *history = r->prev_sid; /* a replica of the primary we followed */
    else
        return 0;
    return bk_find(&r->bk, pos, off) == 0;
}

/* ---- links ---------------------------------------------------------- */

/* A replica's name in logs and in the per-replica metric's label: its
 * address, and for a Unix socket (every peer is "unix") the connecting
 * process, so that two replicas on one socket are two series. */
static void link_name(int fd, char *out, size_t outlen)
{
    struct ucred uc;
    socklen_t len = sizeof uc;

    net_describe_peer(fd, out, outlen);
    if (!strcmp(out, "unix") && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0 &&
        len == sizeof uc)
        snprintf(out, outlen, "unix pid %ld", (long)uc.pid);
}

ReplLink *repl_attach(Server *s, Conn *c, uint64_t epoch, uint64_t pos)
{
    Repl *r = R(s);
    uint64_t my_epoch, p, start;
    ReplLink *l;
    char line[128];

    engine_repl_state(&s->eng, &my_epoch, &p, &start);
    if (!s->eng.binlog.enabled) {
        /* Nothing to stream: said as such, so the replica's last-error
         * does not call this server a replica. */
        conn_reply_lit(c, "NO_BINLOG\r\n");
        return NULL;
    }
    if (!r || r->role != ROLE_PRIMARY) {
        conn_reply_lit(c, "NOT_PRIMARY\r\n");
        return NULL;
    }
    if (epoch > my_epoch) {
        char who[64];
        net_describe_peer(c->ev.fd, who, sizeof who);
        log_err("replication: %s has epoch %llu, above ours (%llu): this primary is "
                "stale; refused", who, (unsigned long long)epoch,
                (unsigned long long)my_epoch);
        /* Stale, and shown as such: a cluster manager (or operator)
         * reading stats-replication sees it, and a promotion of this
         * server later starts above the epoch it now knows of. */
        snprintf(r->last_error, sizeof r->last_error, "stale: a replica at epoch %llu "
                 "(above ours, %llu) was refused", (unsigned long long)epoch,
                 (unsigned long long)my_epoch);
        if (epoch > r->epoch_seen)
            r->epoch_seen = epoch;
        snprintf(line, sizeof line, "FENCED %llu\r\n", (unsigned long long)my_epoch);
        conn_reply(c, line, strlen(line));
        return NULL;
    }
    if (!(l = tb_calloc(1, sizeof *l))) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return NULL;
    }
    /* From now on positions are journaled (a restart keeps counting), and
     * this server's id is on disk (should it ever follow, it is the
     * history it claims). */
    if (!s->eng.binlog.pos_persist)
        engine_set_position(&s->eng, my_epoch, p, start, 0);
    if (!r->sid_saved) {
        replid_save(s->cfg.binlog_dir, s->cfg.fsync_never, r->sid);
        r->sid_saved = 1;
    }
    backlog_want(s);
    l->r = r;
    l->c = c;
    conn_uncount(c); /* LIVE_MAX bounds its stream, not the clients' budget */
    l->sent_at = s->eng.now;
    link_name(c->ev.fd, l->addr, sizeof l->addr);
    list_insert_tail(&r->links, &l->node);
    r->nlinks++;
    {
        uint64_t history = 0, off = 0;
        char id[REPLID_RECORD_SIZE];
        int partial = can_continue(s, epoch, pos, &history, &off);
        snprintf(line, sizeof line, "%s %llu %llu %llu\r\n",
                 partial ? "CONTINUING" : "REPLICATING", (unsigned long long)my_epoch,
                 (unsigned long long)p, (unsigned long long)start);
        conn_reply(c, line, strlen(line));
        replid_record(partial ? history : 0, r->sid, id);
        conn_reply(c, id, sizeof id);
        if (partial) {
            l->catchup = 1;
            l->bk_off = off;
            l->acked = 0; /* its ACKs say what it has written */
            l->sent = pos;
            r->partial_resyncs++;
            log_info("replication: replica %s connected (epoch %llu, position %llu); "
                     "continuing from there (%llu records)", l->addr,
                     (unsigned long long)epoch, (unsigned long long)pos,
                     (unsigned long long)(p - pos));
        } else {
            l->snapshot = 1;
            l->cursor = 1;
            r->full_resyncs++;
            log_info("replication: replica %s connected (epoch %llu, position %llu); "
                     "sending a snapshot", l->addr, (unsigned long long)epoch,
                     (unsigned long long)pos);
        }
    }
    return l;
}

void repl_link_close(ReplLink *l)
{
    Repl *r = l->r;

    log_info("replication: replica %s disconnected", l->addr);
    list_remove(&l->node);
    r->nlinks--;
    tb_free(l);
    release(r->srv); /* fewer replicas: nothing to release, but keep state */
}

static void ack_line(ReplLink *l)
{
    uint64_t v;
    size_t n = l->line_len;

    if (n && l->line[n - 1] == '\r')
        n--;
    if (n < 5 || memcmp(l->line, "ACK ", 4) || parse_u64(l->line + 4, n - 4, &v) < 0) {
        log_warn("replication: replica %s sent garbage; dropping it", l->addr);
        l->drop = 1;
        return;
    }
    if (v > my_pos(l->r->srv)) {
        log_warn("replication: replica %s acknowledged position %llu, which we never "
                 "made; dropping it", l->addr, (unsigned long long)v);
        l->drop = 1;
        return;
    }
    if (l->snapshot)
        return; /* it cannot have everything before E */
    if (v > l->sent) {
        /* Its acknowledgement releases replies: one for records it has
         * not even been sent would let a client hold an acknowledged
         * change that no replica has. */
        log_warn("replication: replica %s acknowledged position %llu, beyond what it "
                 "was sent (%llu); dropping it", l->addr, (unsigned long long)v,
                 (unsigned long long)l->sent);
        l->drop = 1;
        return;
    }
    if (v > l->acked)
        l->acked = v;
}

size_t repl_link_consume(ReplLink *l, const char *p, size_t len)
{
    for (size_t i = 0; i < len && !l->drop; i++) {
        if (p[i] == '\n') {
            ack_line(l);
            l->line_len = 0;
            continue;
        }
        if (l->line_len == ACK_LINE_MAX) {
            log_warn("replication: replica %s sent an overlong line; dropping it", l->addr);
            l->drop = 1;
            break;
        }
        l->line[l->line_len++] = p[i];
    }
    release(l->r->srv);
    return len;
}

/* Make snapshot records while the replica's socket drains. */
static void snapshot_more(Server *s, ReplLink *l)
{
    Engine *e = &s->eng;
    uint64_t scanned = 0;

    while (conn_out_pending(l->c) < SNAP_LOW && scanned < SCAN_MAX) {
        int rc;
        /* (id 1 is always asked for: the fanout children come with it) */
        if (l->cursor >= e->next_id && l->cursor > 1) {
            BlRecord end;
            char buf[BL_SNAP_END_SIZE];
            if (e->binlog.wbuf.len)
                break; /* E's position must not count records still unsent */
            memset(&end, 0, sizeof end);
            end.type = BL_SNAP_END;
            end.id = e->next_id;
            end.pos = my_pos(s);
            bl_encode(&end, buf);
            conn_reply(l->c, buf, sizeof buf);
            l->snapshot = 0;
            l->sent = end.pos;
            l->sent_at = s->eng.now;
            log_info("replication: snapshot sent to %s (position %llu)", l->addr,
                     (unsigned long long)end.pos);
            break;
        }
        rc = engine_snapshot_job(e, l->cursor++, &l->c->out);
        scanned++;
        if (rc > 0)
            l->sent_at = s->eng.now;
        if (rc < 0) {
            log_warn("replication: out of memory sending a snapshot to %s; dropping it",
                     l->addr);
            l->drop = 1;
            return;
        }
    }
    conn_mark_pending(l->c);
}

/* A partial resync: the backlog from the link's offset, as its socket
 * drains; once it has all of it, live records go to it directly. */
static void catchup_more(Server *s, ReplLink *l)
{
    static char chunk[64 * 1024];
    Repl *r = R(s);

    while (conn_out_pending(l->c) < SNAP_LOW) {
        long n = bk_read(&r->bk, l->bk_off, chunk, sizeof chunk);
        if (n < 0) {
            log_warn("replication: replica %s fell out of the backlog while catching up; "
                     "dropping it (it will reconnect and resync)", l->addr);
            l->drop = 1;
            return;
        }
        if (n == 0) {
            l->catchup = 0; /* on_write sends to it from now on */
            log_info("replication: replica %s has the backlog; streaming", l->addr);
            break;
        }
        conn_reply(l->c, chunk, (size_t)n);
        l->bk_off += (uint64_t)n;
        bk_pos_at(&r->bk, l->bk_off, &l->sent); /* (just read: it is held) */
        l->sent_at = s->eng.now;
    }
    conn_mark_pending(l->c);
}

/* A heartbeat: a BL_POS record (the position, everything before it
 * sent) to every replica past its snapshot, once a second, so a replica
 * tells a quiet primary from a vanished one. */
static void heartbeat(Server *s)
{
    Repl *r = R(s);
    char p[BL_POS_SIZE];

    if (s->eng.now < r->beat_at)
        return;
    r->beat_at = s->eng.now + REPL_BEAT_NS;
    if (s->eng.binlog.wbuf.len)
        return; /* records wait for their write: the position would run ahead */
    pos_record(s, my_pos(s), p);
    for (List *l = r->links.next; l != &r->links; l = l->next) {
        ReplLink *x = container_of(l, ReplLink, node);
        /* (A snapshot link hears one only while the scan crosses a long
         * run of ids with no job: otherwise records flow.) */
        if (x->drop || x->catchup || s->eng.now - x->sent_at < REPL_BEAT_NS)
            continue; /* sent something within the second: no need (and a
                         catching-up link must not hear a later position) */
        conn_reply(x->c, p, sizeof p);
        x->sent = my_pos(s);
        x->sent_at = s->eng.now;
    }
}

static void primary_tick(Server *s)
{
    Repl *r = R(s);
    List *n = r->links.next;

    while (n != &r->links) {
        ReplLink *l = container_of(n, ReplLink, node);
        n = n->next;
        if (l->drop) {
            conn_close(l->c); /* frees l (repl_link_close) */
            continue;
        }
        if (l->snapshot && conn_out_pending(l->c) < SNAP_LOW)
            snapshot_more(s, l);
        else if (l->catchup && conn_out_pending(l->c) < SNAP_LOW)
            catchup_more(s, l);
    }
}

/* Acknowledgements that arrived while this iteration ran, read before its
 * flush: the replies they release go out now, not one epoll round and
 * one iteration later (one read per replica, only while replies wait). */
static void read_acks(Server *s)
{
    Repl *r = R(s);
    List *n = r->links.next;

    if (!s->cfg.sync_replicas || !r->map_len)
        return;
    while (n != &r->links) {
        ReplLink *l = container_of(n, ReplLink, node);
        n = n->next; /* (reading may close l, never another link) */
        if (!l->drop && !l->snapshot)
            conn_read_now(l->c);
    }
}

int repl_busy(const Server *s)
{
    const Repl *r = R(s);

    if (!r)
        return 0;
    for (const List *l = r->links.next; l != &r->links; l = l->next) {
        const ReplLink *x = container_of(l, ReplLink, node);
        if (x->drop || ((x->snapshot || x->catchup) && conn_out_pending(x->c) < SNAP_LOW))
            return 1;
    }
    return 0;
}

/* ---- waiting replies -------------------------------------------------- */

static uint64_t waiting_replies(Server *s)
{
    Repl *r = R(s);
    uint64_t n = 0;

    /* Acknowledgements, not connections: a pipelining producer's
     * ten INSERTEDs are ten replies held. */
    for (List *l = s->held.next; l != &s->held; l = l->next)
        n += conn_held_replies(container_of(l, Conn, held_link), r->released,
                               r->local_durable);
    return n;
}

/* The oldest replica ticket of the replies waiting for replicas;
 * UINT64_MAX when none waits. */
static uint64_t oldest_waiting(Server *s)
{
    Repl *r = R(s);
    uint64_t first = UINT64_MAX;

    for (List *l = s->held.next; l != &s->held; l = l->next) {
        uint64_t t = conn_first_held(container_of(l, Conn, held_link), r->released,
                                     r->local_durable);
        if (t < first)
            first = t;
    }
    return first;
}

/* The mark of the write that holds ticket lsn: the first at or above it
 * (marks are in lsn order); NULL when it is not written yet. */
static const ReplAck *mark_of(const Repl *r, uint64_t lsn)
{
    size_t lo = 0, hi = r->map_len;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->map[(r->map_head + mid) % r->map_cap].lsn < lsn)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->map_len ? &r->map[(r->map_head + lo) % r->map_cap] : NULL;
}

/* A reply has waited for replicas over a second: timed from the write of
 * the oldest waiting reply's record, not from the oldest write the
 * replicas lack, which may hold no reply (an expiry's delete, say, while
 * no replica was connected) and would say so at once. */
static int waiting_long(Server *s)
{
    uint64_t lsn;
    const ReplAck *a;

    if (!s->cfg.sync_replicas || (lsn = oldest_waiting(s)) == UINT64_MAX)
        return 0;
    a = mark_of(R(s), lsn);
    return a && s->eng.now - a->at > NS_PER_SEC;
}

static void watch_waits(Server *s)
{
    Repl *r = R(s);
    int w = waiting_long(s);

    if (w && !r->wait_logged)
        log_warn("replication: replies have waited over a second for %u replica%s "
                 "(%zu connected)", s->cfg.sync_replicas,
                 s->cfg.sync_replicas == 1 ? "" : "s", r->nlinks);
    r->wait_logged = w;
}

void repl_tick(Server *s)
{
    Repl *r = R(s);

    if (!r)
        return;
    if (r->role == ROLE_PRIMARY) {
        primary_tick(s);
        read_acks(s);
        if (r->nlinks)
            heartbeat(s);
        release(s);
        watch_waits(s);
    } else {
        replica_tick(s);
    }
}

/* ---- life cycle ------------------------------------------------------- */

int repl_init(Server *s)
{
    Repl *r = tb_calloc(1, sizeof *r);

    if (!r)
        return -1;
    r->srv = s;
    list_init(&r->links);
    r->ev.fd = -1;
    s->repl = r;
    if (s->cfg.replica_of) {
        r->role = ROLE_REPLICA;
        snprintf(r->primary, sizeof r->primary, "%s", s->cfg.replica_of);
        engine_set_passive(&s->eng, 1);
    }
    return 0;
}

void repl_start(Server *s)
{
    Repl *r = R(s);

    if (!r || !s->eng.binlog.enabled)
        return;
    if (store_subscribe(&s->eng, &(StoreSub){on_write, on_reset, s}) < 0)
        log_err("replication: the binlog's record stream has no room for it");
    r->local_durable = r->released = r->released_local = engine_durable_lsn(&s->eng);
    r->repl_lsn = engine_lsn(&s->eng);
    if (r->role == ROLE_REPLICA) {
        r->sid = replid_load(s->cfg.binlog_dir); /* the history its position is on */
        if (r->sid && !s->cfg.fsync_never && s->cfg.fsync_ms == 0 &&
            replid_sync_binlogs(s->cfg.binlog_dir) < 0)
            r->sid = 0;
        replica_begin(s);
        return;
    }
    /* A primary's history is its own from here: a new id, on disk before
     * any record of it is made if an older id is there (this server may
     * once have been a replica) or replication is in use. */
    r->sid = replid_new();
    if (replid_load(s->cfg.binlog_dir) || s->eng.binlog.pos_persist) {
        replid_save(s->cfg.binlog_dir, s->cfg.fsync_never, r->sid);
        r->sid_saved = 1;
    }
}

void repl_free(Server *s)
{
    Repl *r = R(s);

    if (!r)
        return;
    /* The binlog outlives this (engine_free() comes after, and its close
     * writes what is still pending): it must not call on_write() with
     * the Repl gone. */
    store_unsubscribe(&s->eng, &(StoreSub){on_write, on_reset, s});
    replica_stop(s);
    net_lookup_drain(); /* (what replica_stop() could not cancel) */
    buf_free(&r->in);
    buf_free(&r->out);
    tb_free(r->map);
    tb_free(r->acks);
    bk_free(&r->bk);
    /* links are freed with their connections (server_free closes them) */
    s->repl = NULL;
    tb_free(r);
}

/* ---- roles ------------------------------------------------------------ */

/* The epoch a promotion starts: the previous one + 1. A server told to
 * follow a primary whose answer never came does not know that primary's
 * epoch; when that primary was promoted in its place (why one is told to
 * follow it) it started epoch + 1, so this one starts epoch + 2: two
 * primaries sharing an epoch could not be told apart by fencing. Above
 * any epoch a fenced replica named, too. */
static uint64_t next_epoch(Server *s, uint64_t epoch)
{
    uint64_t next = epoch + (engine_epoch_unheard(&s->eng) ? 2 : 1);

    return R(s)->epoch_seen >= next ? R(s)->epoch_seen + 1 : next;
}

uint64_t repl_promote(Server *s, char *err, size_t errlen)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start, next;

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    if (!r || r->role == ROLE_PRIMARY)
        return epoch;
    next = next_epoch(s, epoch);
    if (engine_set_position_unheard(&s->eng, next, pos, pos, 0, 0) < 0) {
        snprintf(err, errlen, "cannot journal the new epoch (binlog unhealthy or full)");
        return 0;
    }
    replica_stop(s);
    engine_sweep_abort(&s->eng);
    /* Ids jump ahead: a former primary may have given out ids past what
     * reached us (its unreplicated tail); a client holding one of those
     * must never find it naming another job here. Journaled: a restart
     * before the next put would otherwise take ids from where they were. */
    if (engine_skip_ids(&s->eng, PROMOTE_ID_GAP) < 0)
        log_warn("replication: promoted, but the skipped ids could not be journaled "
                 "(binlog unhealthy or full): a restart may give them out");
    r->role = ROLE_PRIMARY;
    r->primary[0] = '\0';
    r->last_error[0] = '\0';
    r->map_len = 0;
    /* Replicas of the primary we followed, up to where we switched, can
     * go on from our backlog (it holds that stream up to here). */
    r->prev_sid = r->sid;
    r->prev_epoch = epoch;
    r->switch_pos = pos;
    r->sid = replid_new();
    replid_save(s->cfg.binlog_dir, s->cfg.fsync_never, r->sid);
    r->sid_saved = 1;
    if (bk_on(&r->bk)) {
        uint64_t first, last;
        if (!bk_range(&r->bk, &first, &last) || last > pos || bk_mark(&r->bk, pos) < 0)
            bk_reset(&r->bk, pos);
    }
    r->repl_lsn = engine_lsn(&s->eng);
    engine_set_passive(&s->eng, 0);
    log_info("replication: promoted: epoch %llu, position %llu; serving as the primary",
             (unsigned long long)next, (unsigned long long)pos);
    return next;
}

/* Told to follow addr: a replica (its own records no longer count) whose
 * new primary's epoch is unknown until its answer names it, so that a
 * promotion meanwhile does not start the epoch that primary may have
 * (next_epoch()). Journaled: a restart knows no more. */
static void unheard(Server *s, const char *addr)
{
    uint64_t epoch, pos, start;

    engine_repl_state(&s->eng, &epoch, &pos, &start);
    if (engine_set_position_unheard(&s->eng, epoch, pos, start, 1, 1) < 0)
        log_warn("replication: cannot journal the switch to %s (binlog unhealthy or "
                 "full)", addr);
}

int repl_follow(Server *s, const char *addr, size_t len, Conn *except, char *err,
                size_t errlen)
{
    Repl *r = R(s);
    char a[256], host[256];
    int port;

    if (!r || !s->eng.binlog.enabled) {
        snprintf(err, errlen, "replication needs a binlog (-b)");
        return -2;
    }
    if (len >= sizeof a) {
        snprintf(err, errlen, "address too long");
        return -1;
    }
    memcpy(a, addr, len);
    a[len] = '\0';
    if (hostport_split(a, host, sizeof host, &port) < 0) {
        snprintf(err, errlen, "bad address '%s'", a);
        return -1;
    }
    if (r->role == ROLE_PRIMARY) {
        /* From this reply on a replica: replies still waiting for the
         * replicas were never acknowledged; they are taken back. Without
         * sync_replicas none waits for them: a reply waiting only for
         * this binlog goes out once it is durable here, as the replies of
         * the writes before the follow do (release(), as a replica). */
        if (s->cfg.sync_replicas && r->released < engine_lsn(&s->eng))
            conn_lost(s, r->released + 1);
        for (List *l = r->links.next; l != &r->links; l = l->next)
            container_of(l, ReplLink, node)->drop = 1;
        primary_tick(s);
        for (List *l = s->conns.next; l != &s->conns; l = l->next) {
            Conn *c = container_of(l, Conn, link);
            if (c != except && c->proto->demote)
                c->proto->demote(c);
        }
        if (except && except->proto->demote)
            except->proto->demote(except);
        unheard(s, a);
        engine_set_passive(&s->eng, 1);
        /* Its unjournaled jobs were never replicated: gone, as a tail is
         * (a partial resync has no snapshot to sweep them). */
        r->discarded += engine_drop_unjournaled(&s->eng);
        r->role = ROLE_REPLICA;
        r->map_len = 0;
        r->prev_sid = 0; /* (its own id stays: the history it claims) */
        log_info("replication: no longer a primary: following %s", a);
    } else {
        replica_stop(s);
        unheard(s, a);
        log_info("replication: following %s (was %s)", a, r->primary);
    }
    snprintf(r->primary, sizeof r->primary, "%s", a);
    r->last_error[0] = '\0';
    replica_begin(s);
    return 0;
}

/* ---- what it looks like ------------------------------------------------ */

void repl_each_replica(Server *s, void (*fn)(void *arg, const char *addr, uint64_t lag),
                       void *arg)
{
    Repl *r = R(s);
    uint64_t pos = my_pos(s);

    if (!r || r->role != ROLE_PRIMARY)
        return;
    for (List *l = r->links.next; l != &r->links; l = l->next) {
        ReplLink *x = container_of(l, ReplLink, node);
        fn(arg, x->addr, x->snapshot ? pos : x->acked >= pos ? 0 : pos - x->acked);
    }
}

void repl_info(Server *s, ReplInfo *o)
{
    Repl *r = R(s);
    uint64_t epoch, pos, start;

    memset(o, 0, sizeof *o);
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    o->epoch = epoch;
    o->position = pos;
    o->sync_replicas = s->cfg.sync_replicas;
    o->primary = "";
    o->last_error = r ? r->last_error : "";
    o->partial_resyncs = r ? r->partial_resyncs : 0;
    o->full_resyncs = r ? r->full_resyncs : 0;
    if (!r || r->role == ROLE_PRIMARY) {
        o->role = ROLE_PRIMARY;
        o->connected = 1;
        o->caught_up = 1;
        if (r) {
            for (List *l = r->links.next; l != &r->links; l = l->next) {
                ReplLink *x = container_of(l, ReplLink, node);
                if (x->drop)
                    continue;
                o->connected_replicas++;
                if (!x->snapshot && x->acked == pos)
                    o->caught_up_replicas++;
            }
            o->waiting_replies = waiting_replies(s);
            o->waiting_long = waiting_long(s);
            o->discarded = r->discarded;
        }
        return;
    }
    o->role = ROLE_REPLICA;
    o->primary = r->primary;
    o->connected = replica_connected(s);
    /* Streaming, the position shown is the one acknowledged (written and,
     * under -f 0, synced, and said so to the primary): what this replica
     * is sure to have, and what its primary counts. */
    if (o->connected && !r->snapshot) {
        /* (after a partial resync, until its first ACK: where it went on
         * from, which it had written before, not 0) */
        uint64_t shown = r->acked > r->resumed_at ? r->acked : r->resumed_at;
        if (shown < pos)
            o->position = pos = shown;
    }
    o->lag = r->known_pos > pos ? r->known_pos - pos : 0;
    if (r->snapshot && o->lag == 0)
        o->lag = 1; /* not all there yet, whatever the numbers say */
    o->caught_up = o->connected && !r->snapshot && o->lag == 0;
    o->discarded = r->discarded;
}

