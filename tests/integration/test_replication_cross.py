"""Replication combined with the other extensions (replication.md §1-§2,
doc/replication.md "What a replica does"): tube policies, fanout,
journal = false tubes, read-behind, memcache, access listeners and the
job-changing commands, each on a primary P and compared job by job with
its replica R (repl_util.snapshot/diff: id, tube, pri, ttr, state with
reserved as ready, delay deadline, body), then after kill -9 of R, kill -9
of P and promotion of R, and the old P following.

- journal = false under sync_replicas = 1: a put (or memcache set) into
  such a tube answers at once though no replica is connected; its id
  mark (a delete record for an id not given out yet, once per 1024 ids)
  used to hold the reply until a replica confirmed it, for ever with the
  replicas down. A journaled put still waits.
- Policies: discards, expiry (deleted or moved), fanout copies replicate;
  the replica runs none of them itself (its own config may differ); after
  promotion its own config governs, from the replicated entry times.
- memcache: items, takes, flushes, deletes and expiry replicate; an item
  open on P goes back when P follows, its close/abort answer
  SERVER_ERROR replica there; every write on R answers SERVER_ERROR
  replica.
- read-behind on R only: R keeps no more bodies in memory than its
  budget while applying P's stream, resumes after kill -9, and a promoted
  R hands out every body byte for byte.
- Access listeners on R: a role's refusal (NOT_ALLOWED, memcache
  CLIENT_ERROR not allowed, counted in refused-commands) comes first, an
  allowed change answers DRAINING (SERVER_ERROR replica). memcache used to
  answer SERVER_ERROR replica first, uncounted.
- read-behind on both nodes, with moves, expiry moves, bury, kick and a
  flush of spilled jobs; a promoted R hands out every body.
- A replica whose config does not journal a tube the primary journals
  logs a warning once per tube (it was silent).
- bury, release with delay, touch, kick, move-job, flush-tube compare
  after each step and across a kill -9 of R; pause-tube is not journaled
  and not replicated (documented).
"""

import time

import harness
from harness import check, eq, no_server, tubed_only, unq, wait_for
from repl_util import (EXT, Cluster, diff, put_many, reserve_job, snapshot,
                       wait_caught_up)

SERVER = "none"


def _agree(p, r, what):
    """Wait until r has caught up with p, then compare job by job.  The
    tubes' max_age of 2 s may expire or move a job between the two
    snapshots (a loaded machine takes that long over them): a difference
    is looked at again once r has caught up; one that stays is reported."""
    for _ in range(5):
        wait_caught_up(p, r)
        a, b = snapshot(p.admin()), snapshot(r.admin())
        d = diff(a, b, "%s (P)" % p.name, "%s (R)" % r.name)
        if not d:
            return a
    check(not d, "%s: %d difference(s): %s" % (what, len(d), "; ".join(d[:8])))
    return a


def _tubes_of(snap):
    out = {}
    for j in snap.values():
        out.setdefault(j.tube, []).append(j.body)
    return {t: sorted(v) for t, v in out.items()}


def _has_tube(n, tube):
    return n.admin().cmd_body("stats-tube %s" % tube)[0] != b"NOT_FOUND"


def _promote(r):
    line = r.admin().cmd("promote")
    check(line.startswith(b"PROMOTED "), "promote: %r" % line)


# --------------------------------------------------------- journal = false

@no_server
@tubed_only(EXT)
def test_unjournaled_put_waits_for_no_replica(binary):
    conf = "sync_replicas = 1\n[tube mem]\njournal = false\n"
    with Cluster(binary, conf=conf) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs()
        c.use("mem")
        # The first put of a journal = false tube writes an id mark: the
        # reply waits for this server's disk, never for a replica.
        c.send(b"put 0 0 60 3\r\nm-1\r\n")
        line = c.read_line()
        check(line.startswith(b"INSERTED "), "put into a journal = false tube "
              "with sync_replicas = 1 and no replica: expected INSERTED at "
              "once (no replica ever holds the job), got %r" % line)
        m = p.mc()
        m.send(b"set mem 0 0 3\r\nm-2\r\n")
        eq(m.read_line(), b"STORED", "memcache set into a journal = false queue")
        eq(unq(p.repl()["waiting-replies"]), "0", "waiting-replies")
        # Its flush writes a record the replicas need (documented): it waits.
        f = p.bs()
        f.send(b"flush-tube mem\r\n")
        wait_for(lambda: p.repl()["waiting-replies"] == "1",
                 "waiting-replies 1 for the flush of the journal = false tube")
        check(not f.has_data(0.3), "flush-tube of a journal = false tube "
              "answered with no replica")
        # A journaled put still waits for the replica.
        j = p.bs()
        j.use("dur")
        j.send(b"put 0 0 60 3\r\nd-1\r\n")
        wait_for(lambda: p.repl()["waiting-replies"] == "2",
                 "waiting-replies 2 with the journaled put")
        check(not j.has_data(0.3), "a journaled put answered with no replica")
        # The same connection: a memory put queued behind the held one
        # stays behind it (replies keep their order).
        j.send(b"use mem\r\nput 0 0 60 3\r\nm-3\r\n")
        r = cl.node("r", "-f", "0", replica_of=p)
        check(j.read_line().startswith(b"INSERTED "), "the journaled put after "
              "the replica came")
        eq(j.read_line(), b"USING mem", "use after it")
        check(j.read_line().startswith(b"INSERTED "), "the memory put after it")
        eq(f.read_line(), b"FLUSHED 2", "the flush once the replica has it")
        wait_caught_up(p, r)
        a, b = snapshot(p.admin()), snapshot(r.admin())
        eq(_tubes_of(b), {"dur": [b"d-1"]}, "the replica's jobs")
        eq(_tubes_of(a), {"dur": [b"d-1"], "mem": [b"m-3"]},
           "the primary's jobs")


@no_server
@tubed_only(EXT)
def test_moves_across_journal_false_tubes_replicate(binary):
    conf = ("[tube mem*]\njournal = false\n[tube exp]\njournal = false\n"
            "max_age = 1s\nmove_expired_to = keep\n[tube dur]\nmax_age = 1s\n"
            "move_expired_to = memx\n")
    with Cluster(binary, conf=conf) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("mem")
        mids = put_many(c, [b"m1", b"m2"])
        c.use("d")
        dids = put_many(c, [b"d1", b"d2"])
        c.use("exp")
        put_many(c, [b"e1"])
        c.use("dur")
        put_many(c, [b"u1"])
        c.expect("move-job %d d" % mids[0], "MOVED")    # into the binlog
        c.expect("move-job %d mem" % dids[0], "MOVED")  # out of it
        # Expiry moves e1 into a journaled tube, u1 out of one.
        wait_for(lambda: _has_tube(p, "keep")
                 and _has_tube(p, "memx"),
                 "the expiry moves on P")
        wait_caught_up(p, r)
        eq(_tubes_of(snapshot(r.admin())),
           {"d": [b"d2", b"m1"], "keep": [b"e1"]},
           "the replica: the journaled jobs, moved ones included")
        eq(_tubes_of(snapshot(p.admin())),
           {"d": [b"d2", b"m1"], "keep": [b"e1"], "mem": [b"d1", b"m2"],
            "memx": [b"u1"]}, "the primary")
        # After a promotion the new primary has what was journaled.
        p.kill9()
        _promote(r)
        eq(_tubes_of(snapshot(r.admin())),
           {"d": [b"d2", b"m1"], "keep": [b"e1"]}, "the promoted replica")


# ---------------------------------------------------------------- policies

POLICIES = """
[tube e]
max_age = 2s
[tube m]
max_age = 2s
move_expired_to = dead
[tube full]
max_items = 3
discard_old_when_full = true
[tube fan]
fanout = true
"""


@no_server
@tubed_only(EXT)
def test_policy_effects_replicate_and_run_after_promotion(binary):
    with Cluster(binary, conf=POLICIES) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("fan+a")                 # children registered on P reach R
        c.use("fan+b")
        c.use("fan")
        put_many(c, [b"f1", b"f2"])
        c.use("full")
        put_many(c, [b"x%d" % i for i in range(6)])    # 3 discarded
        c.use("e")
        put_many(c, [b"e1"])
        c.use("m")
        put_many(c, [b"m1"])
        c.use("default")               # (a tube in use is not dropped)
        a = _agree(p, r, "after the puts")
        eq(_tubes_of(a)["full"], [b"x3", b"x4", b"x5"], "the discards")
        eq(_tubes_of(a)["fan+b"], [b"f1", b"f2"], "the fanout copies")
        wait_for(lambda: not _has_tube(p, "e"),
                 "e1 to expire on P")
        wait_for(lambda: not _has_tube(p, "m"),
                 "m1 to move on P")
        a = _agree(p, r, "after the expiry on P")
        eq(_tubes_of(a)["dead"], [b"m1"], "the moved job")
        # Jobs due while R is a replica are expired by R once promoted.
        c.use("e")
        put_many(c, [b"e2"])
        c.use("m")
        put_many(c, [b"m2"])
        _agree(p, r, "before the crash")
        p.kill9()
        _promote(r)
        rc = r.bs()
        wait_for(lambda: _tubes_of(snapshot(r.admin())).get("dead") ==
                 [b"m1", b"m2"] and "e" not in _tubes_of(snapshot(r.admin())),
                 lambda: "the promoted R to expire e2 and move m2: %s"
                 % _tubes_of(snapshot(r.admin())))
        # Its fanout and limits run too.
        rc.use("fan")
        put_many(rc, [b"f3"])
        rc.use("full")
        put_many(rc, [b"x9"])
        t = _tubes_of(snapshot(r.admin()))
        eq(t["fan+a"], [b"f1", b"f2", b"f3"], "fanout on the promoted R")
        eq(t["full"], [b"x4", b"x5", b"x9"], "a discard on the promoted R")
        # The old primary follows and ends with the same jobs.
        p.start(replica_of=r)
        _agree(r, p, "the old primary following")


@no_server
@tubed_only(EXT)
def test_replica_config_differs(binary):
    """Config files are per node: R runs no policy of its own while a
    replica (not a smaller max_items, not a max_age P lacks); promoted,
    its own config governs (a max_age P lacked applies from the jobs'
    replicated entry times; one only P had no longer does; nor a fanout
    only P had)."""
    pc = ("[tube e]\nmax_age = 1h\n[tube full]\nmax_items = 10\n"
          "[tube fan]\nfanout = true\n")
    rc = ("[tube n]\nmax_age = 1s\n[tube full]\nmax_items = 2\n"
          "discard_old_when_full = true\n")
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", conf=pc)
        r = cl.node("r", "-f", "0", conf=rc, replica_of=p)
        c = p.bs()
        c.use("n")
        put_many(c, [b"n1"])
        c.use("full")
        put_many(c, [b"x%d" % i for i in range(6)])
        c.use("e")
        put_many(c, [b"e1"])
        c.use("fan+a")
        c.use("fan")
        put_many(c, [b"f1"])
        a = _agree(p, r, "after the puts")
        eq(_tubes_of(a)["fan+a"], [b"f1"], "P's fanout copy on R")
        # n1 is past R's max_age: R, a replica, keeps it.
        time.sleep(2.2)
        _agree(p, r, "past R's own max_age")
        p.kill9()
        _promote(r)
        wait_for(lambda: "n" not in _tubes_of(snapshot(r.admin())),
                 "the promoted R to expire n1 under its own max_age")
        t = _tubes_of(snapshot(r.admin()))
        eq(len(t["full"]), 6, "R's smaller max_items discards nothing by itself")
        eq(t["e"], [b"e1"], "e1 (max_age only in P's config)")
        w = r.bs()
        w.use("full")
        put_many(w, [b"y1"])
        eq(_tubes_of(snapshot(r.admin()))["full"], [b"x5", b"y1"],
           "a put on the promoted R applies its own max_items")
        w.use("fan")
        put_many(w, [b"f2"])
        t = _tubes_of(snapshot(r.admin()))
        eq((t["fan"], t["fan+a"]), ([b"f1", b"f2"], [b"f1"]),
           "no fanout on the promoted R, whose config has none")


# ---------------------------------------------------------------- memcache

@no_server
@tubed_only(EXT)
def test_memcache_across_promotion_and_follow(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        m = p.mc()
        for i in range(5):
            m.store("q", b"item%d" % i)
        m.store("soon", b"s", exptime=2)
        m.store("fq", b"f")
        m.store("dq", b"d")
        eq(m.cmd("flush fq"), b"END", "flush fq")
        eq(m.cmd("delete dq"), b"DELETED", "delete dq")
        held = []
        for _ in range(3):
            h = p.mc()
            h.send(b"get q/open\r\n")
            check(h.read_value() is not None, "get q/open")
            held.append(h)
        held[2].send(b"get q/close\r\n")
        eq(held[2].read_value(), None, "get q/close (ends the open item)")
        _agree(p, r, "after the memcache writes")
        rm = r.mc()
        for cmd in ("set q 0 0 1\r\nx", "get q", "get q/open", "get q/close",
                    "get q/abort", "delete q", "flush q", "flush_all",
                    "flush_expired q"):
            rm.send(cmd.encode() + b"\r\n")
            eq(rm.read_line(), b"SERVER_ERROR replica", "%s on R" % cmd.split("\r")[0])
        rm.send(b"get q/peek\r\n")
        eq(rm.read_value(), b"item0", "get q/peek on R")
        # kestrel's READONLY: reads only, so a health check sends no sets
        rm.send(b"status\r\n")
        eq(rm.read_line(), b"READONLY", "status on R")
        m.send(b"status\r\n")
        eq(m.read_line(), b"UP", "status on P")
        _promote(r)
        rm.send(b"status\r\n")
        eq(rm.read_line(), b"UP", "status on R once promoted")
        eq(p.admin().cmd("follow %s" % r.addr), b"FOLLOWING", "follow on P")
        pm = p.mc()
        pm.send(b"status\r\n")
        eq(pm.read_line(), b"READONLY", "status on P once it follows")
        for h, cmd in ((held[0], "get q/close"), (held[1], "get q/abort")):
            h.send(cmd.encode() + b"\r\n")
            eq(h.read_line(), b"SERVER_ERROR replica", "%s on the old P" % cmd)
        a = _agree(r, p, "after the follow")
        eq(_tubes_of(a).get("q"), [b"item0", b"item1", b"item3", b"item4"],
           "the open items back, the closed one gone")
        nm = r.mc()
        wait_for(lambda: "soon" not in _tubes_of(snapshot(r.admin())),
                 "the set's expiry on the promoted R")
        nm.send(b"get soon\r\n")
        eq(nm.read_value(), None, "get soon after its expiry")
        nm.send(b"get q/open\r\n")
        eq(nm.read_value(), b"item0", "get q/open on the new primary")
        _agree(r, p, "an item open on the new primary")


# -------------------------------------------------------------- read-behind

@no_server
@tubed_only(EXT)
def test_readbehind_budget_on_replica_only(binary):
    from readbehind_util import make_bodies, mem_bytes, spilled
    rb = "[tube rb]\nmax_memory_size = 64K\n"
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs()
        c.use("rb")
        ids = put_many(c, make_bodies("rb", 400, 1024, 7))
        r = cl.node("r", "-f", "0", conf=rb, replica_of=p)   # a snapshot
        _agree(p, r, "after the snapshot")
        ids += put_many(c, make_bodies("rb2", 200, 1024, 8))  # live records
        _agree(p, r, "after the live records")
        eq(spilled(p.admin()), (0, 0), "P (no budget) spills nothing")
        check(mem_bytes(r, "rb") <= 64 * 1024, "R's bodies in memory: %d, "
              "over its 64K budget" % mem_bytes(r, "rb"))
        check(spilled(r.admin())[0] > 0, "R spilled nothing")
        w = p.bs()
        w.watch("rb")
        for j in ids[:50]:
            reserve_job(w, j)
            w.expect("delete %d" % j, "DELETED")
        r.kill9()
        ids += put_many(c, make_bodies("rb3", 50, 1024, 9))
        r.start()
        a = _agree(p, r, "R resumed after kill -9")
        check(mem_bytes(r, "rb") <= 64 * 1024, "R over budget after resume")
        p.kill9()
        _promote(r)
        rw = r.bs()
        rw.watch("rb")
        rw.ignore("default")
        _drain_all(rw, a)



def _drain_all(rw, a):
    """Reserve and delete everything rw watches: each body is a's, and as
    many jobs as a holds (a promoted R hands out every spilled body)."""
    n = 0
    while True:
        line, got = rw.cmd_body("reserve-with-timeout 0")
        if line == b"TIMED_OUT":
            break
        jid = int(line.split()[1])
        eq(got, a[jid].body, "body of job %d on the promoted R" % jid)
        rw.expect("delete %d" % jid, "DELETED")
        n += 1
    eq(n, len(a), "jobs handed out by the promoted R")

# ------------------------------------------------------------------ access

@no_server
@tubed_only(EXT)
def test_access_listeners_on_replica(binary):
    # The sections' ports: held until the cluster ends, and moved (the file
    # rewritten) by a first start that collides on one (Cluster.node ports=).
    res = [harness.PortReservation() for _ in range(5)]
    conf = ("[listen w]\naddress = 127.0.0.1:%d\nrole = worker\n"
            "[listen pr]\naddress = 127.0.0.1:%d\nrole = producer\n"
            "[listen rd]\naddress = 127.0.0.1:%d\nrole = read\n"
            "[listen mw]\naddress = 127.0.0.1:%d\nrole = worker\n"
            "protocol = memcache\n"
            "[listen mr]\naddress = 127.0.0.1:%d\nrole = read\n"
            "protocol = memcache\n")
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", conf=lambda: conf % tuple(x.port for x in res),
                    replica_of=p, ports=res)
        ports = [x.port for x in res]
        c = p.bs()
        jid = put_many(c, [b"x"])[0]
        p.mc().store("q", b"item")
        _agree(p, r, "after the put")
        w = harness.Client(harness.HOST, ports[0])
        for cmd in ("reserve-with-timeout 0", "reserve-job %d" % jid,
                    "delete %d" % jid, "release %d 0 0" % jid,
                    "bury %d 0" % jid, "touch %d" % jid):
            eq(w.cmd(cmd), b"DRAINING", "%s on R's worker listener" % cmd)
        for cmd in ("kick 1", "pause-tube default 1", "promote"):
            eq(w.cmd(cmd), b"NOT_ALLOWED", "%s on R's worker listener" % cmd)
        pr = harness.Client(harness.HOST, ports[1])
        pr.send(b"put 0 0 1 1\r\nx\r\n")
        eq(pr.read_line(), b"DRAINING", "put on R's producer listener")
        eq(pr.cmd("reserve-with-timeout 0"), b"NOT_ALLOWED", "reserve on "
           "R's producer listener")
        rd = harness.Client(harness.HOST, ports[2])
        rd.send(b"put 0 0 1 1\r\nx\r\n")
        eq(rd.read_line(), b"NOT_ALLOWED", "put on R's read listener")
        line, body = rd.cmd_body("peek %d" % jid)
        eq((line, body), (b"FOUND %d 1" % jid, b"x"), "peek on R's read listener")
        # memcache: the listener's refusal first too (it was SERVER_ERROR
        # replica for every change, whatever the role, and uncounted).
        from mcproto import Mc
        import socket
        mw = Mc(None, None, sock=socket.create_connection((harness.HOST, ports[3])))
        mr = Mc(None, None, sock=socket.create_connection((harness.HOST, ports[4])))
        for cmd in ("get q", "get q/open", "get q/close", "get q/abort"):
            eq(mw.cmd(cmd), b"SERVER_ERROR replica", "%s on R's memcache "
               "worker listener" % cmd)
        for cmd in ("delete q", "flush q", "flush_all"):
            eq(mw.cmd(cmd), b"CLIENT_ERROR not allowed", "%s on R's memcache "
               "worker listener" % cmd)
        mw.send(b"set q 0 0 1\r\nx\r\n")
        eq(mw.read_line(), b"CLIENT_ERROR not allowed", "set on R's memcache "
           "worker listener")
        eq(mr.cmd("get q"), b"CLIENT_ERROR not allowed", "get q on R's "
           "memcache read listener")
        mr.send(b"get q/peek\r\n")
        eq(mr.read_value(), b"item", "get q/peek on R's memcache read listener")
        from access_util import listeners
        lst = listeners(r.admin())
        names = ("w", "pr", "rd", "mw", "mr")
        check(all(n in lst for n in names), "R's listeners: %s" % sorted(lst))
        refused = {n: int(lst[n]["refused-commands"]) for n in names}
        eq(refused, {"w": 3, "pr": 1, "rd": 1, "mw": 4, "mr": 1},
           "refused-commands (DRAINING and SERVER_ERROR replica are no "
           "refusal)")
        _agree(p, r, "after the refused commands")


# --------------------------------------------------------- commands on P

@no_server
@tubed_only(EXT)
def test_job_commands_compare_across_replica_kill(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("a")
        ids = put_many(c, [b"j%d" % i for i in range(12)], pri=list(range(12)))
        w = p.bs()
        w.watch("a")
        w.ignore("default")
        reserve_job(w, ids[0])
        w.expect("bury %d 7" % ids[0], "BURIED")
        _agree(p, r, "bury")
        reserve_job(w, ids[1])
        w.expect("bury %d 8" % ids[1], "BURIED")
        reserve_job(w, ids[2])
        w.expect("release %d 3 600" % ids[2], "RELEASED")
        _agree(p, r, "release with delay")
        reserve_job(w, ids[3])
        w.expect("touch %d" % ids[3], "TOUCHED")
        _agree(p, r, "touch (reserved counts as ready)")
        c.expect("kick 1", "KICKED 1")
        _agree(p, r, "kick")
        c.expect("move-job %d b" % ids[4], "MOVED")
        _agree(p, r, "move-job")
        c.use("f")
        put_many(c, [b"f1", b"f2"])
        c.expect("flush-tube f", "FLUSHED 2")
        _agree(p, r, "flush-tube")
        c.expect("pause-tube a 600", "PAUSED")
        wait_caught_up(p, r)
        st = r.admin().stats_tube("a")
        eq(st["pause"], "0", "R's pause of tube a (pause-tube is not "
           "journaled, so not replicated)")
        # kill -9 of R in the middle of changes; it resumes.
        r.kill9()
        reserve_job(w, ids[5])
        w.expect("release %d 2 300" % ids[5], "RELEASED")
        c.expect("move-job %d b" % ids[6], "MOVED")
        reserve_job(w, ids[7])
        w.expect("delete %d" % ids[7], "DELETED")
        r.start()
        a = _agree(p, r, "R resumed after kill -9")
        p.kill9()
        _promote(r)
        st = r.admin().stats_tube("a")
        eq(st["pause"], "0", "the promoted R's pause of tube a")
        ready = sorted(j.id for j in a.values() if j.tube == "a"
                       and j.state in ("ready", "reserved"))
        rw = r.bs()
        rw.watch("a")
        rw.ignore("default")
        got = []
        for _ in ready:
            line = rw.cmd("reserve-with-timeout 0")
            check(line.startswith(b"RESERVED "), "reserve on the promoted R: %r"
                  % line)
            got.append(int(line.split()[1]))
            rw.read_exact(len(a[got[-1]].body) + 2)
        eq(sorted(got), ready, "the ready jobs of a on the promoted R")
        p.start(replica_of=r)
        _agree(r, p, "the old primary following")


@no_server
@tubed_only(EXT)
def test_readbehind_on_both_with_moves_expiry_flush(binary):
    """Budgets on both nodes; P moves, expires (move_expired_to), buries,
    kicks and flushes spilled jobs; R agrees, resumes after kill -9, and
    promoted hands out every body byte for byte."""
    from readbehind_util import make_bodies, spilled
    conf = ("[tube rb*]\nmax_memory_size = 16K\n[tube rbx]\nmax_age = 1s\n"
            "move_expired_to = rbdead\n")
    with Cluster(binary, conf=conf) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("rb")
        ids = put_many(c, make_bodies("rb", 300, 1024, 7))
        c.use("rbx")
        put_many(c, make_bodies("rbx", 100, 1024, 8))
        c.use("default")
        for j in ids[:100]:
            c.expect("move-job %d rb2" % j, "MOVED")
        w = p.bs()
        w.watch("rb")
        for j in ids[150:170]:
            reserve_job(w, j)
            w.expect("bury %d 1" % j, "BURIED")
        c.use("rb")
        c.expect("kick 10", "KICKED 10")
        c.expect("flush-tube rb2", "FLUSHED 100")
        c.use("default")
        wait_for(lambda: not _has_tube(p, "rbx"), "rbx's jobs to move on P")
        a = _agree(p, r, "after the changes")
        check(spilled(r.admin())[0] > 0, "R spilled nothing")
        r.kill9()
        r.start()
        a = _agree(p, r, "R resumed after kill -9")
        p.kill9()
        _promote(r)
        rw = r.bs()
        for t in ("rb", "rbdead"):
            rw.watch(t)
        rw.ignore("default")
        rc = r.bs()
        for j in a.values():
            if j.state == "buried":
                rc.expect("kick-job %d" % j.id, "KICKED")
        _drain_all(rw, a)


@no_server
@tubed_only(EXT)
def test_replica_that_does_not_journal_a_tube_says_so(binary):
    """A replica whose own config has journal = false for a tube the
    primary journals keeps its jobs in memory only (doc/replication.md,
    "Limits"): it logs a warning once per tube, from the snapshot and the
    live stream alike (it was silent)."""
    warn = "tube %s has journal = false in this server's config"
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs()
        c.use("s")
        put_many(c, [b"s1", b"s2"])            # reaches R in the snapshot
        r = cl.node("r", "-f", "0", conf="[tube s]\njournal = false\n"
                    "[tube t]\njournal = false\n", replica_of=p)
        c.use("t")
        wait_caught_up(p, r)
        put_many(c, [b"t1", b"t2", b"t3"])     # live records
        _agree(p, r, "in memory on R")
        err = r.stderr()
        eq((err.count(warn % "s"), err.count(warn % "t")), (1, 1),
           "warnings on R, once per tube: %s" % err[-600:])
        eq(p.stderr().count("journal = false"), 0, "warnings on P")
        r.kill9()
        r.start()
        wait_caught_up(p, r)
        eq(snapshot(r.admin()), {}, "R after a restart (the documented limit)")
