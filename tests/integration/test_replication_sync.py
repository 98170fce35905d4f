"""sync_replicas holds replies; restarts on either side (replication.md
§1, §3).

- With sync_replicas = 1 and the replica stopped (SIGSTOP), an INSERTED
  (DELETED, memcache STORED) is not sent, while the loop keeps answering
  reads on other connections; stats-replication counts waiting-replies and
  /healthz turns 503 "waiting for replicas"; SIGCONT releases them.
- The same hold is released by a reload that lowers sync_replicas to 0, and
  by a second replica that connects and catches up.
- With no replica at all, replies wait; the first replica releases them.
  /healthz says so then too (a new primary, a promoted replica).
- A replica killed with kill -9 restarts and resumes; a primary restarted
  (SIGTERM, kill -9) is found again by its replica, which converges.
"""

import os
import re
import time

from harness import check, eq, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, assert_converged, body, put_many, rint,
                       wait_caught_up, wait_for)

SERVER = "none"

SYNC1 = "sync_replicas = 1\n"


def _put_async(c, data, pri=0):
    c.send(b"put %d 0 60 %d\r\n%s\r\n" % (pri, len(data), data))


def _reads_answer(p, what):
    """Reads on a fresh connection are answered at once (the loop serves)."""
    c = p.bs()
    c.timeout = 5.0
    s = c.stats()
    check("current-jobs-ready" in s, "%s: stats on another connection" % what)
    line, _ = c.cmd_body("peek-ready")
    check(line.startswith(b"FOUND") or line == b"NOT_FOUND",
          "%s: peek-ready on another connection: %r" % (what, line))
    c.close()


def _held(p, r, what):
    """Stop r, send a put and a delete on p: both replies are held.
    Returns (client, id being deleted)."""
    c = p.bs()
    jid = c.put(b"before the stop")
    wait_caught_up(p, r)
    r.sigstop()
    _put_async(c, b"held put")
    c.send(b"delete %d\r\n" % jid)
    c.expect_silence(1.5)
    _reads_answer(p, what)
    wait_for(lambda: rint(p.repl(), "waiting-replies") >= 1,
             "%s: waiting-replies >= 1 on the primary" % what)
    wait_for(lambda: p.get("/healthz").status == 503,
             "%s: /healthz 503 once a reply waited over a second" % what)
    h = p.get("/healthz")
    check(b"waiting for replicas" in h.body, "%s: /healthz body %r"
          % (what, h.body))
    # The log says so once: another held reply adds no line.
    said = lambda: [l for l in p.stderr().splitlines()
                    if "wait" in l and "replica" in l]
    wait_for(said, "%s: the primary to log that replies wait" % what)
    n = len(said())
    other = p.bs()
    _put_async(other, b"held too")
    other.expect_silence(1.5)
    eq(len(said()), n, "%s: log lines about waiting replies after one more "
       "held reply (%s)" % (what, said()))
    # The change itself is applied at once on the primary.
    other = p.bs()
    eq(other.peek("peek %d" % jid), None, "%s: the held delete is applied "
       "on the primary" % what)
    return c, jid


def _released(c, what):
    line = c.read_line(timeout=20)
    check(re.fullmatch(rb"INSERTED \d+", line) is not None,
          "%s: expected the held INSERTED, got %r" % (what, line))
    eq(c.read_line(timeout=20), b"DELETED", "%s: the held DELETED" % what)


@no_server
@tubed_only(EXT)
def test_sigstop_holds_sigcont_releases(binary):
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c, jid = _held(p, r, "replica stopped")
        m = p.mc()
        m.send(b"set q 0 0 4\r\nheld\r\n")
        m.expect_silence(1.0)
        r.sigcont()
        _released(c, "after SIGCONT")
        eq(m.read_line(timeout=20), b"STORED", "memcache set after SIGCONT")
        wait_for(lambda: rint(p.repl(), "waiting-replies") == 0,
                 "waiting-replies back to 0")
        wait_for(lambda: p.get("/healthz").status == 200, "/healthz back to 200")
        wait_caught_up(p, r)
        assert_converged(p, r, "after SIGCONT")


@no_server
@tubed_only(EXT)
def test_reload_lowering_sync_replicas_releases(binary):
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c, jid = _held(p, r, "replica stopped")
        p.reload("sync_replicas = 0\n")
        _released(c, "after the reload to sync_replicas = 0")
        eq(p.repl()["sync-replicas"], "0", "sync-replicas after the reload")
        c.put(b"not held")                    # answered with r still stopped
        r.sigcont()
        wait_caught_up(p, r)
        assert_converged(p, r, "after SIGCONT")


@no_server
@tubed_only(EXT)
def test_new_replica_releases(binary):
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        wait_caught_up(p, r1)
        c, jid = _held(p, r1, "replica r1 stopped")
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        _released(c, "after a second replica caught up")
        wait_caught_up(p, r2)
        assert_converged(p, r2, "the new replica")
        r1.sigcont()
        wait_caught_up(p, r1)
        assert_converged(p, r1, "the stopped replica after SIGCONT")


@no_server
@tubed_only(EXT)
def test_no_replica_yet_then_first_releases(binary):
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs()
        _put_async(c, b"first")
        c.expect_silence(1.5)
        _reads_answer(p, "no replica")
        eq(rint(p.repl(), "waiting-replies"), 1, "waiting-replies")
        r = cl.node("r", "-f", "0", replica_of=p)
        line = c.read_line(timeout=20)
        check(re.fullmatch(rb"INSERTED \d+", line) is not None,
              "the held INSERTED once a replica came: %r" % line)
        wait_caught_up(p, r)
        assert_converged(p, r, "the first replica")


def _healthz_says_waiting(n, what):
    """A put on n waits; /healthz turns 503 'waiting for replicas' and the
    log says so once."""
    c = n.bs()
    _put_async(c, b"held")
    c.expect_silence(1.2)
    wait_for(lambda: n.get("/healthz").status == 503,
             "%s: /healthz 503 once a reply waited over a second" % what)
    eq(n.get("/healthz").body, b"waiting for replicas\n", "%s: /healthz body" % what)
    said = lambda: [l for l in n.stderr().splitlines() if "waited over a second" in l]
    wait_for(said, "%s: the log to say that replies wait" % what)
    c.expect_silence(1.0)
    eq(len(said()), 1, "%s: log lines saying replies wait (%s)" % (what, said()))
    return c


@no_server
@tubed_only(EXT)
def test_healthz_while_no_replica_is_connected(binary):
    """§3: "Fewer than N replicas connected": with none at all (a primary
    no replica ever reached, a replica promoted after its primary died)
    /healthz turned 503 only once an acknowledgement had popped the first
    write of the binlog (its file's P record, which holds no reply): it
    answered 200 "ok" for ever, and the log said nothing."""
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        _healthz_says_waiting(p, "a primary without replicas")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        eq(p.get("/healthz").status, 200, "/healthz once the replica has it")
        p.kill9()
        wait_for(lambda: r.repl()["connected"] == "false",
                 "the replica to see its primary gone")
        eq(r.admin().cmd("promote"), b"PROMOTED 2", "promote")
        _healthz_says_waiting(r, "a promoted replica without replicas")


@no_server
@tubed_only(EXT)
def test_healthz_times_the_waiting_reply(binary):
    """§3: 503 "once a reply has waited over a second", timed from that
    reply: an expiry's delete written while the replica was away holds no
    reply, yet a put made two seconds after it turned /healthz 503 at
    once (it was timed from the oldest write the replicas lacked)."""
    with Cluster(binary, SYNC1 + "[tube exp]\nmax_age = 1s\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("exp")
        c.put(b"short-lived")
        wait_caught_up(p, r)
        r.kill9()
        wait_for(lambda: p.bs().stats_tube("exp")["current-jobs-ready"] == "0",
                 "the job to expire on the primary")
        time.sleep(2)
        t = time.monotonic()
        _put_async(p.bs(), b"held")
        wait_for(lambda: rint(p.repl(), "waiting-replies") == 1, "the put to wait")
        h = p.get("/healthz")
        if time.monotonic() - t < 0.8:      # (a slow machine may take longer)
            eq((h.status, h.body), (200, b"ok\n"), "/healthz right after the put")
        wait_for(lambda: p.get("/healthz").status == 503,
                 "/healthz 503 once the put waited over a second")


@no_server
@tubed_only(EXT)
def test_sync_replicas_two_needs_two(binary):
    with Cluster(binary, "sync_replicas = 2\n") as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        c = p.bs()
        _put_async(c, b"needs two")
        c.expect_silence(1.5)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        line = c.read_line(timeout=20)
        check(re.fullmatch(rb"INSERTED \d+", line) is not None,
              "the held INSERTED once two replicas came: %r" % line)
        wait_caught_up(p, r1, r2)


@no_server
@tubed_only(EXT)
def test_pipelined_puts_under_sync(binary):
    """Group commit: 2000 pipelined puts with sync_replicas = 1 all come
    back, in order, and both sides agree."""
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c = p.bs()
        c.timeout = 30
        ids = put_many(c, [body("gc", i, 200) for i in range(2000)], batch=200)
        eq(ids, sorted(ids), "ids in order")
        wait_caught_up(p, r)
        assert_converged(p, r, "after 2000 pipelined puts")


# ------------------------------------------------------------ restarts

@no_server
@tubed_only(EXT)
def test_replica_kill9_resumes(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("k1", i) for i in range(300)])
        wait_caught_up(p, r)
        pos = rint(r.repl(), "position")
        r.kill9()
        put_many(c, [body("k2", i) for i in range(200)])  # while it is down
        r.restart()
        # Its own state is there at once, from its binlog.
        rc = r.bs()
        check(int(rc.stats()["current-jobs-ready"]) >= 300,
              "the replica after kill -9: %s jobs ready before it caught up"
              % rc.stats()["current-jobs-ready"])
        wait_caught_up(p, r)
        check(rint(r.repl(), "position") > pos, "position moved on")
        assert_converged(p, r, "after the replica's kill -9 and restart")
        for i in range(3):                    # and again, while writes go on
            put_many(c, [body("k3-%d" % i, j) for j in range(100)])
            r.kill9()
            if i == 0:
                c.expect("delete 1", "DELETED")
            r.restart()
        wait_caught_up(p, r)
        assert_converged(p, r, "after three more kill -9")


def _primary_restart(binary, how):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("pr", i) for i in range(200)], delay=[0, 900] * 100)
        wait_caught_up(p, r)
        logged = len(r.stderr())
        if how == "sigterm":
            p.sigterm()
        else:
            p.kill9()
        wait_for(lambda: r.repl()["connected"] == "false",
                 "the replica to see its primary gone")
        wait_for(lambda: p.addr in r.stderr()[logged:],
                 lambda: "the replica to log that %s is gone: %r"
                 % (p.addr, r.stderr()[logged:][-400:]))
        rc = r.bs()
        eq(int(rc.stats()["current-jobs-delayed"]), 100,
           "the replica serves reads while its primary is down")
        last = unq(r.repl()["last-error"])
        check(last, "last-error while the primary is down: %r" % last)
        time.sleep(1.5)                       # it keeps retrying meanwhile
        p.restart()
        c = p.bs()
        put_many(c, [body("pr2", i) for i in range(50)])
        c.expect("delete 2", "DELETED")
        wait_caught_up(p, r)
        assert_converged(p, r, "after the primary's %s and restart" % how)


@no_server
@tubed_only(EXT)
def test_primary_sigterm_restart_replica_reconnects(binary):
    _primary_restart(binary, "sigterm")


@no_server
@tubed_only(EXT)
def test_primary_kill9_restart_replica_reconnects(binary):
    _primary_restart(binary, "kill -9")


@no_server
@tubed_only(EXT)
def test_sync_replicas_flag_and_unix_socket_primary(binary):
    """--sync-replicas on the command line; a replica whose --replica-of
    is the primary's Unix socket (unix:/path)."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--sync-replicas", 1, unix=True)
        sock = p.unix_path
        eq(p.repl()["sync-replicas"], "1", "sync-replicas from the flag")
        c = p.bs()
        _put_async(c, b"held until a replica")
        c.expect_silence(1.0)
        r = cl.node("r", "-f", "0", replica_of="unix:" + sock)
        line = c.read_line(timeout=20)
        check(re.fullmatch(rb"INSERTED \d+", line) is not None,
              "the held INSERTED once a replica came over the Unix socket: "
              "%r" % line)
        wait_caught_up(p, r)
        eq(unq(r.repl()["primary"]), "unix:" + sock, "the replica's primary")
        assert_converged(p, r, "over a Unix socket")


def _gated_pair(cl, replica_args):
    from policy_util import build_gate, gate_env
    so, gdir = build_gate(cl.tmp)
    p = cl.node("p", "-f", "0")
    r = cl.node("r", *replica_args, replica_of=p, env=gate_env(so, gdir))
    wait_caught_up(p, r)
    p.bs().put(b"before the gate")
    return p, r, gdir


@no_server
@tubed_only(EXT)
def test_sync_waits_for_a_strict_replicas_fsync(binary):
    """A replica with -f 0 acknowledges a record once it is synced: with
    its fsync held (an LD_PRELOAD gate), the primary's reply waits."""
    with Cluster(binary, SYNC1) as cl:
        p, r, gdir = _gated_pair(cl, ("-f", "0"))
        closed = os.path.join(gdir, "closed")
        open(closed, "w").close()
        try:
            c = p.bs()
            _put_async(c, b"waits for the replica's fsync")
            c.expect_silence(1.5)
        finally:
            os.unlink(closed)
        line = c.read_line(timeout=20)
        check(re.fullmatch(rb"INSERTED \d+", line) is not None,
              "the INSERTED once the replica's fsync went through: %r" % line)
        check(os.path.exists(os.path.join(gdir, "waited")),
              "the replica's fsync never waited at the gate")


@no_server
@tubed_only(EXT)
def test_sync_does_not_wait_for_a_lazy_replicas_fsync(binary):
    """A replica with the default -f acknowledges once written: its held
    fsync holds no reply of the primary."""
    with Cluster(binary, SYNC1) as cl:
        p, r, gdir = _gated_pair(cl, ())
        closed = os.path.join(gdir, "closed")
        open(closed, "w").close()
        try:
            c = p.bs()
            ids = [c.put(b"lazy %d" % i) for i in range(5)]
            time.sleep(0.3)                   # a -f 50 sync is due meanwhile
            ids.append(c.put(b"lazy after a sync was due"))
        finally:
            os.unlink(closed)
        # The replica did try to sync while the gate was closed (so the
        # puts above were answered while its fsync was held).
        wait_for(lambda: os.path.exists(os.path.join(gdir, "waited")),
                 "the replica's fsync to have waited at the gate")
        wait_caught_up(p, r)
        assert_converged(p, r, "after the gate opened")
