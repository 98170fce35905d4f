"""Partial resync (doc/replication.md, "Partial resync"; issue 21).

A primary keeps the recent stream in a backlog (repl_backlog); a replica
that reconnects at a position still in it, on the same history, is
answered CONTINUING and sent only what follows, no snapshot. Proof comes
from the primary's own counters (stats-replication's partial-resyncs and
full-resyncs, past the spec's keys) and the replica's, and the jobs are
compared one by one (repl_util's comparer).

- a replica killed with kill -9 under load restarts and goes on from its
  position (its binlog says where it was);
- a link cut in the middle of a batch: the replica goes on from the
  record it reached;
- a primary restarted loses its backlog (it is in memory): the replica's
  resync is a full one, and it converges;
- a backlog too small for what the replica missed: a full resync;
- after a promotion, another replica of the old primary (position at or
  below the switch, also one lagging behind) goes on from the promoted
  one without a snapshot;
- the old primary with an unreplicated tail gets a snapshot and counts
  the tail in discarded-records; one without a tail goes on partially;
- handshakes with positions beyond the primary, huge ones, or a position
  on a history the asker does not hold: a snapshot, or CONTINUING that
  a replica with another history refuses; never a crash.
"""

import socket
import struct
import threading
import time

import harness
from harness import check, eq, no_server, tubed_only
from repl_util import (EXT, Cluster, Proxy, assert_converged, body, put_many,
                       rint, wait_caught_up, wait_for)

SERVER = "none"


def _resyncs(node):
    """(partial, full) resyncs: served as a primary plus had as a replica."""
    d = node.repl()
    return rint(d, "partial-resyncs"), rint(d, "full-resyncs")


def _since(node, before):
    now = _resyncs(node)
    return now[0] - before[0], now[1] - before[1]


class _Load:
    """Puts and deletes on a primary from a thread until stopped."""

    def __init__(self, node, tag):
        self.c = node.bs(timeout=30)
        self.tag = tag
        self.n = 0
        self.stop_ev = threading.Event()
        self.err = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            while not self.stop_ev.is_set():
                ids = put_many(self.c, [body(self.tag, self.n + i) for i in range(20)])
                self.n += 20
                for j in ids[::3]:
                    self.c.expect("delete %d" % j, "DELETED")
                time.sleep(0.005)
        except Exception as e:  # reported by stop()
            self.err = e

    def stop(self):
        self.stop_ev.set()
        self.t.join(30)
        check(self.err is None, "load on the primary failed: %r" % (self.err,))
        check(self.n > 0, "the load made no jobs")


@no_server
@tubed_only(EXT)
def test_replica_kill9_under_load_resumes_partially(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        put_many(p.bs(), [body("pre", i) for i in range(500)])
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        eq(_resyncs(p), (0, 1), "primary (partial, full) after the first sync")
        load = _Load(p, "load")
        try:
            wait_for(lambda: load.n > 200, "the load to run")
            r.kill9()
            wait_for(lambda: load.n > 600, "the load to go on while the replica is down")
            r.restart()
            wait_for(lambda: r.repl()["connected"] == "true", "the replica to reconnect")
            time.sleep(0.2)
        finally:
            load.stop()
        wait_caught_up(p, r, timeout=60)
        eq(_resyncs(p), (1, 1), "primary (partial, full): the restart sent no snapshot")
        eq(_resyncs(r), (1, 0), "restarted replica (partial, full)")
        m = p.metrics()
        eq((int(m.value("tubed_replication_partial_resyncs_total")),
            int(m.value("tubed_replication_full_resyncs_total"))), (1, 1),
           "the primary's resync metrics")
        check("going on from position" in r.stderr(),
              "the replica's log says it went on: %s" % r.stderr()[-600:])
        assert_converged(p, r, "after kill -9 under load and a partial resync")
        # It goes on following.
        put_many(p.bs(), [body("post", i) for i in range(50)])
        wait_caught_up(p, r)
        assert_converged(p, r, "after more puts")


@no_server
@tubed_only(EXT)
def test_replica_killed_twice_keeps_resuming(binary):
    """Twice in a row, with nothing written between the second kill and
    restart: the position it claims is still its own."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        for k in range(2):
            put_many(c, [body("k%d" % k, i) for i in range(300)])
            wait_caught_up(p, r)
            r.kill9()
            if k == 0:
                put_many(c, [body("gap", i) for i in range(100)])
            r.restart()
            wait_caught_up(p, r)
        eq(_resyncs(p), (2, 1), "primary (partial, full) after two restarts")
        assert_converged(p, r, "after two partial resyncs")


@no_server
@tubed_only(EXT)
def test_reconnect_without_a_restart_resumes_partially(binary):
    """follow of the same primary drops the link and connects again: the
    position it claims is the one in memory (no restart)."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("a", i) for i in range(200)])
        wait_caught_up(p, r)
        for k in range(3):
            _follow(r, p)
            put_many(p.bs(), [body("b%d" % k, i) for i in range(30)])
            wait_caught_up(p, r)
        eq(_resyncs(p), (3, 1), "primary (partial, full) after three reconnections")
        assert_converged(p, r, "after reconnections")


@no_server
@tubed_only(EXT)
def test_link_cut_mid_batch_resumes_partially(binary):
    """The link drops 30,000 bytes into a write of 500 pipelined puts of
    1,000 bytes: the replica has applied part of a batch (no P record
    since). Its position counts those records and the primary's backlog
    walks to it from the last mark: a partial resync, and every job."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs(timeout=30)
        c.put(b"first")
        px = Proxy(p.port)
        try:
            r = cl.node("r", "-f", "0", replica_of=px.addr)
            wait_caught_up(p, r)
            before = _resyncs(p)
            px.cut(30000)
            put_many(c, [body("cut", i, 1000) for i in range(2000)], batch=500)
            wait_for(lambda: px.cuts == 1, "the proxy to cut the link")
            wait_caught_up(p, r)
            eq(_since(p, before), (1, 0), "primary (partial, full) resyncs "
               "after a link cut mid-batch")
            assert_converged(p, r, "after a link cut mid-batch")
        finally:
            px.close()


@no_server
@tubed_only(EXT)
def test_sync_replicas_replies_released_after_a_partial_resync(binary):
    """sync_replicas = 1: puts made while the only replica is down wait;
    it comes back and goes on from its position; its acknowledgements
    release them."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--sync-replicas", "1")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("a", i) for i in range(100)])
        wait_caught_up(p, r)
        r.kill9()
        w = p.bs(timeout=30)
        w.send(b"put 0 0 60 4\r\nheld\r\n")
        w.expect_silence(0.5)
        wait_for(lambda: rint(p.repl(), "waiting-replies") == 1, "the reply to wait")
        r.restart()
        line = w.read_line(timeout=30)
        check(line.startswith(b"INSERTED "), "the held put once the replica came back: %r"
              % line)
        jid = int(line.split()[1])
        wait_caught_up(p, r)
        eq(_resyncs(p), (1, 1), "primary (partial, full)")
        eq(r.bs().peek("peek %d" % jid), (jid, b"held"), "the held job on the replica")
        eq(rint(p.repl(), "waiting-replies"), 0, "nothing waits")


@no_server
@tubed_only(EXT)
def test_replica_killed_while_catching_up_from_the_backlog(binary):
    """The backlog sent slowly (a proxy); the replica is killed half-way
    through it and restarted: it goes on again from where it got to."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        proxy = Proxy(p.port)
        try:
            r = cl.node("r", "-f", "0", replica_of=proxy.addr)
            c = p.bs(timeout=30)
            put_many(c, [body("a", i) for i in range(100)])
            wait_caught_up(p, r)
            r.kill9()
            put_many(c, [body("gap", i, 200) for i in range(6000)], batch=500)
            proxy.rate = 200000                    # ~1.7 MB at 200 KB/s
            r.restart()
            wait_for(lambda: _resyncs(p)[0] == 1, "the partial resync to begin")
            target = rint(p.repl(), "position")
            wait_for(lambda: 100 < rint(r.repl(), "position") < target - 1000,
                     "the replica half-way through the backlog", interval=0.01)
            r.kill9()
            proxy.rate = None
            r.restart()
            wait_caught_up(p, r, timeout=60)
            eq(_resyncs(p), (2, 1), "primary (partial, full)")
            assert_converged(p, r, "after a kill -9 while catching up")
        finally:
            proxy.close()


@no_server
@tubed_only(EXT)
def test_primary_restart_is_a_full_resync(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("a", i) for i in range(300)])
        wait_caught_up(p, r)
        p.kill9()
        p.restart()
        wait_caught_up(p, r)
        # The backlog lives in memory: the restarted primary has none, and
        # a new id; the replica's resync is a snapshot.
        eq(_resyncs(p), (0, 1), "restarted primary (partial, full)")
        pr, fr = _resyncs(r)
        eq(pr, 0, "replica: partial resyncs")
        check(fr >= 2, "replica: full resyncs %d (the first and after the restart)" % fr)
        put_many(p.bs(), [body("b", i) for i in range(100)])
        wait_caught_up(p, r)
        assert_converged(p, r, "after the primary's restart")


@no_server
@tubed_only(EXT)
def test_backlog_too_small_is_a_full_resync(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--repl-backlog", "4096")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("a", i) for i in range(100)])
        wait_caught_up(p, r)
        # A short gap fits: partial.
        r.kill9()
        put_many(c, [body("small", i, 40) for i in range(3)])
        r.restart()
        wait_caught_up(p, r)
        eq(_resyncs(p), (1, 1), "primary (partial, full) after a gap that fits")
        # A gap of far more than 4 KiB of records does not.
        r.kill9()
        put_many(c, [body("big", i, 500) for i in range(200)])
        r.restart()
        wait_caught_up(p, r)
        eq(_resyncs(p), (1, 2), "primary (partial, full) after a gap beyond the backlog")
        assert_converged(p, r, "after a full resync for a gap beyond the backlog")


@no_server
@tubed_only(EXT)
def test_no_backlog_is_always_a_full_resync(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--repl-backlog", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("a", i) for i in range(50)])
        wait_caught_up(p, r)
        r.kill9()
        r.restart()
        wait_caught_up(p, r)
        eq(_resyncs(p), (0, 2), "primary (partial, full) with repl_backlog 0")
        assert_converged(p, r, "without a backlog")


def _promote(node, epoch):
    eq(node.bs().cmd("promote", timeout=10), b"PROMOTED %d" % epoch, "promote %s" % node.name)


def _follow(node, target):
    eq(node.bs().cmd("follow %s" % target.addr, timeout=10), b"FOLLOWING",
       "follow on %s" % node.name)


@no_server
@tubed_only(EXT)
def test_after_promote_another_replica_resumes_partially(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        a = cl.node("a", "-f", "0", replica_of=p)
        b = cl.node("b", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("one", i) for i in range(300)])
        wait_caught_up(p, a, b)
        # b falls behind: what it misses, a has (b's position < the switch).
        b_pos = rint(b.repl(), "position")
        b.kill9()
        put_many(c, [body("two", i) for i in range(120)])
        wait_caught_up(p, a)
        p.kill9()
        a_pos = rint(a.repl(), "position")
        check(b_pos < a_pos, "b (%d) behind a (%d) before the promotion" % (b_pos, a_pos))
        _promote(a, 2)
        base = _resyncs(a)
        b.restart(replica_of=a)
        wait_caught_up(a, b)
        eq(_since(a, base), (1, 0), "promoted a (partial, full): b got no snapshot")
        assert_converged(a, b, "b after going on from the promoted a")
        ids = put_many(a.bs(), [body("three", i) for i in range(50)])
        wait_caught_up(a, b)
        assert_converged(a, b, "after puts on the promoted a")
        eq(b.bs().peek("peek %d" % ids[-1])[1], body("three", 49), "the last put on b")


@no_server
@tubed_only(EXT)
def test_old_primary_with_a_tail_gets_a_snapshot(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        a = cl.node("a", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("base", i) for i in range(200)])
        wait_caught_up(p, a)
        # a stops hearing p; p takes 7 more changes (sync_replicas 0: acked).
        a.kill9()
        put_many(c, [body("tail", i) for i in range(7)])
        # a comes back pointed nowhere, and is promoted without the tail.
        # Nowhere is a port held (bound, never listening) until a stops
        # following it: no other test's server can answer there.
        with harness.PortReservation() as dead:
            a.restart(replica_of="127.0.0.1:%d" % dead.port)
            _promote(a, 2)
        base = _resyncs(a)
        before = rint(p.repl(), "discarded-records")
        _follow(p, a)
        wait_caught_up(a, p)
        eq(_since(a, base), (0, 1), "promoted a (partial, full): the old primary got a snapshot")
        # (the 7 records of its own history a lacks; the 7 jobs they made,
        # deleted at the snapshot's end, are the same changes: counted once)
        eq(rint(p.repl(), "discarded-records") - before, 7, "the tail, discarded")
        assert_converged(a, p, "the old primary after following")


@no_server
@tubed_only(EXT)
def test_old_primary_without_a_tail_resumes_partially(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--sync-replicas", "1")
        a = cl.node("a", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("base", i) for i in range(200)])
        wait_caught_up(p, a)
        _promote(a, 2)
        base = _resyncs(a)
        _follow(p, a)
        wait_caught_up(a, p)
        eq(_since(a, base), (1, 0), "promoted a (partial, full): the old primary went on")
        eq(rint(p.repl(), "discarded-records"), 0, "nothing discarded")
        put_many(a.bs(), [body("more", i) for i in range(30)])
        wait_caught_up(a, p)
        assert_converged(a, p, "the old primary following the promoted one")


# ------------------------------------------------------------ hostile

def _handshake(node, line):
    """Send line; return (answer line, the socket, what followed)."""
    s = socket.create_connection((harness.HOST, node.port), timeout=10)
    s.sendall(line)
    buf = b""
    while b"\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    ans, _, rest = buf.partition(b"\r\n")
    return ans, s, rest


def _first_record(s, rest):
    return _records(s, rest, 1)[0][0]


def _records(s, rest, k):
    """The next k records' payloads (and the bytes left over)."""
    out = []
    for _ in range(k):
        while len(rest) < 8:
            rest += s.recv(65536)
        n, _ = struct.unpack_from("<II", rest)
        while len(rest) < 8 + n:
            rest += s.recv(65536)
        out.append(rest[8:8 + n])
        rest = rest[8 + n:]
    return out, rest


@no_server
@tubed_only(EXT)
def test_continuing_sends_exactly_the_records_after_the_position(binary):
    """A fake replica asks from positions inside a write's batch (the
    backlog is marked only at batch ends): what follows the I record is
    exactly the records after its position, as the next P record counts."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)    # p keeps a backlog
        wait_caught_up(p, r)
        ids = put_many(p.bs(), [body("a", i) for i in range(40)], batch=40)
        wait_caught_up(p, r)
        pos = rint(p.repl(), "position")
        for back in (0, 1, 7, 39):
            ans, s, rest = _handshake(p, b"replicate 1 %d\r\n" % (pos - back))
            check(ans.startswith(b"CONTINUING 1 %d " % pos), "back %d: %r" % (back, ans))
            (rec,), rest = _records(s, rest, 1)
            eq(rec[:1], b"I", "back %d: I first" % back)
            # Every P record states the count so far; read up to p's position.
            counted, last = pos - back, None
            while back and counted < pos:
                (rec,), rest = _records(s, rest, 1)
                if rec[:1] == b"P":
                    eq(struct.unpack_from("<Q", rec, 9)[0], counted,
                       "back %d: a P record's position" % back)
                else:
                    counted += 1
                    last = rec
            if back:
                (rec,), rest = _records(s, rest, 1)
                eq((rec[:1], struct.unpack_from("<Q", rec, 9)[0]), (b"P", pos),
                   "back %d: the P record after the last put" % back)
                eq(struct.unpack_from("<Q", last, 1)[0], ids[-1],
                   "back %d: the last record's job id" % back)
            s.close()


@no_server
@tubed_only(EXT)
def test_odd_positions_in_the_handshake(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("a", i) for i in range(100)])
        wait_caught_up(p, r)
        pos = rint(p.repl(), "position")
        for line in (b"replicate 1 %d\r\n" % (pos + 1000),
                     b"replicate 1 18446744073709551615\r\n",
                     b"replicate 0 %d\r\n" % pos,
                     b"replicate 1 0\r\n"):
            ans, s, rest = _handshake(p, line)
            check(ans.startswith(b"REPLICATING 1 "), "%r: %r" % (line, ans))
            rec = _first_record(s, rest)
            eq((rec[:1], len(rec)), (b"I", 17), "%r: the stream opens with I" % line)
            eq(struct.unpack_from("<Q", rec, 1)[0], 0, "%r: no history to check" % line)
            s.close()
        ans, s, rest = _handshake(p, b"replicate 2 %d\r\n" % pos)
        eq(ans, b"FENCED 1", "a higher epoch")
        s.close()
        # A position in the backlog: CONTINUING, then the history a real
        # replica would have to hold (the fake one just hangs up).
        ans, s, rest = _handshake(p, b"replicate 1 %d\r\n" % (pos - 5))
        check(ans.startswith(b"CONTINUING 1 %d " % pos), "in the backlog: %r" % ans)
        rec = _first_record(s, rest)
        eq(rec[:1], b"I", "I after CONTINUING")
        check(struct.unpack_from("<Q", rec, 1)[0] != 0, "CONTINUING names a history")
        s.close()
        # The server is fine, and the real replica too.
        put_many(p.bs(), [body("b", i) for i in range(20)])
        wait_caught_up(p, r)
        assert_converged(p, r, "after the odd handshakes")


@no_server
@tubed_only(EXT)
def test_replica_of_another_history_gets_a_snapshot(binary):
    """Two unrelated primaries, both at epoch 1: a replica of one told to
    follow the other must not go on from its position (the ids differ)."""
    with Cluster(binary) as cl:
        p1 = cl.node("p1", "-f", "0")
        p2 = cl.node("p2", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p1)
        other = cl.node("other", "-f", "0", replica_of=p2)   # p2 gets a backlog
        put_many(p1.bs(), [body("one", i) for i in range(50)])
        put_many(p2.bs(), [body("two", i) for i in range(400)])
        wait_caught_up(p1, r)
        wait_caught_up(p2, other)
        check(rint(r.repl(), "position") < rint(p2.repl(), "position"),
              "r's position is within p2's")
        _follow(r, p2)
        wait_caught_up(p2, r)
        # (p2 may have offered to go on: r refused it, and says so)
        eq(_resyncs(r)[0], 0, "r's partial resyncs")
        check("another history" in r.stderr(), "r's log: %s" % r.stderr()[-600:])
        assert_converged(p2, r, "a replica switched to an unrelated primary")
