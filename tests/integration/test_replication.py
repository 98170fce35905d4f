"""Replication: a replica converges (replication.md §1, §6.1).

Each scenario runs a primary and two replicas: "live" follows from the
start and sees every record as it is written; "late" starts after the
workload, on an empty directory, and gets what it lacks as a snapshot.
Once both are caught up (lag-records 0, the primary's position), every job
is compared job by job with repl_util.snapshot()/diff(): id, tube,
priority, TTR, state (reserved as ready), delay deadline, body; and no
other job exists.  Scenarios: every job state; tube policies (max_items
with and without discard, dead letters by max_timeouts); expiry with
move_expired_to; fanout; move-job and flush-tube; pause-tube; memcache
sets, gets, /open, /close, /abort; read-behind budgets on both sides.
"""

import time

import harness
from harness import check, eq, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, Proxy, assert_converged, body, list_jobs,
                       put_many, reserve_job, snapshot,
                       wait_caught_up, wait_for)

SERVER = "none"


def _converge(binary, workload, conf="", args=("-f", "0"), replica_conf=None,
              after=None):
    """Primary + live replica, workload(p, cl) on the primary, then a late
    replica; both must converge.  after(p, live, late) checks more."""
    with Cluster(binary, conf) as cl:
        p = cl.node("p", *args)
        live = cl.node("live", *args, replica_of=p, conf=replica_conf)
        wait_caught_up(p, live)
        keep = workload(p, cl)
        late = cl.node("late", *args, replica_of=p, conf=replica_conf)
        wait_caught_up(p, live, late)
        snap = assert_converged(p, live, "live replica")
        assert_converged(p, late, "late replica (snapshot)")
        check(snap, "the workload left no job to compare")
        if after:
            after(p, live, late, snap)
        del keep   # connections holding reservations stay open until here


# ------------------------------------------------------------ job states

def _states(p, cl):
    c = p.bs()
    c.use("a")
    n = 120
    bodies = [body("st", i, 40 + (i * 37) % 3000) for i in range(n)]
    pris = [(i * 13) % 5000 for i in range(n)]
    delays = [3600 if i % 5 == 1 else 0 for i in range(n)]
    ids = put_many(c, bodies, pri=pris, delay=delays, ttr=120)
    c.use("b")
    ids_b = put_many(c, [body("b", i, 100) for i in range(30)], ttr=7)
    w = p.bs()
    w.watch("a")
    w.watch("b")
    ready = [j for i, j in enumerate(ids) if not delays[i]]
    for j in ready[:10]:                      # buried with a new priority
        reserve_job(w, j)
        w.expect("bury %d 7" % j, "BURIED")
    for j in ready[10:20]:                    # released with pri and delay
        reserve_job(w, j)
        w.expect("release %d 3 1800" % j, "RELEASED")
    for j in ready[20:30]:                    # deleted
        reserve_job(w, j)
        w.expect("delete %d" % j, "DELETED")
    for j in ready[30:35]:                    # released at once, new pri
        reserve_job(w, j)
        w.expect("release %d 42 0" % j, "RELEASED")
    w.expect("kick-job %d" % ready[0], "KICKED")
    delayed = [j for i, j in enumerate(ids) if delays[i]]
    w.expect("kick-job %d" % delayed[0], "KICKED")        # delayed to ready
    c.use("a")
    c.expect("kick 3", "KICKED 3")            # buried ones back to ready
    for j in ids_b[:5]:                       # deleted without a reserve
        c.expect("delete %d" % j, "DELETED")
    c.expect("delete %d" % ready[40], "DELETED")
    held = p.bs()                             # reserved, kept reserved
    held.watch("b")
    for j in ids_b[5:12]:
        reserve_job(held, j)
    held.expect("touch %d" % ids_b[5], "TOUCHED")
    c.put(b"", pri=0)                         # an empty body
    c.put(b"\r\n" * 100, pri=2 ** 32 - 1)     # CR LF only, largest pri
    return held


@no_server
@tubed_only(EXT)
def test_converges_every_state(binary):
    def after(p, live, late, snap):
        states = {j.state for j in snap.values()}
        eq(sorted(states), ["buried", "delayed", "ready", "reserved"],
           "states present on the primary")
        for r in (live, late):
            rs = snapshot(r.admin())
            for j in snap.values():
                if j.state == "reserved":
                    eq(rs[j.id].state, "ready", "on %s, job %d reserved on "
                       "the primary" % (r.name, j.id))
    _converge(binary, _states, after=after)


@no_server
@tubed_only(EXT)
def test_converges_default_fsync(binary):
    """The same with the default -f (records count once written)."""
    _converge(binary, _states, args=())


# ------------------------------------------------------------ policies

POLICY_CONF = """\
[tube cap]
max_items = 10
discard_old_when_full = true

[tube full]
max_items = 5

[tube dl]
max_timeouts = 1
"""


def _policies(p, cl):
    c = p.bs()
    c.use("cap")
    put_many(c, [body("cap", i) for i in range(30)])      # 20 discarded
    c.use("full")
    put_many(c, [body("full", i) for i in range(5)])
    c.send(b"put 0 0 60 3\r\nxyz\r\n")
    eq(c.read_line(), b"OUT_OF_MEMORY", "put into a full tube")
    c.use("dl")
    jid = c.put(b"dead letter", ttr=1)
    w = p.bs()
    w.watch("dl")
    reserve_job(w, jid)
    # Its TTR runs out: buried (max_timeouts = 1), a journaled change.
    wait_for(lambda: unq(c.stats_job(jid)["state"]) == "buried",
             "job %d buried by max_timeouts" % jid)
    return w


@no_server
@tubed_only(EXT)
def test_converges_policies(binary):
    def after(p, live, late, snap):
        eq(sorted(j.body for j in snap.values() if j.tube == "cap"),
           sorted(body("cap", i) for i in range(20, 30)),
           "cap keeps the newest 10")
        eq(sum(1 for j in snap.values() if j.tube == "full"), 5, "jobs in full")
        eq([j.state for j in snap.values() if j.tube == "dl"], ["buried"],
           "dead letter")
    _converge(binary, _policies, conf=POLICY_CONF, after=after)


EXPIRY_CONF = """\
[tube exp]
max_age = 1s
move_expired_to = dead

[tube gone]
max_age = 1s
"""


def _expiry(p, cl):
    c = p.bs()
    c.use("exp")
    put_many(c, [body("exp", i) for i in range(20)], delay=[0, 3600] * 10)
    c.use("gone")
    put_many(c, [body("gone", i) for i in range(10)])
    c.use("default")

    def settled():
        tubes = c.list_tubes()
        dead = list_jobs(c, "dead") if "dead" in tubes else []
        left = sum(len(list_jobs(c, t)) for t in ("exp", "gone") if t in tubes)
        return len(dead) == 20 and left == 0
    wait_for(settled, "every job of exp to move to dead and gone to empty")


@no_server
@tubed_only(EXT)
def test_converges_expiry(binary):
    def after(p, live, late, snap):
        eq(sorted(j.body for j in snap.values()),
           sorted(body("exp", i) for i in range(20)),
           "jobs left: the moved ones")
        eq({j.tube for j in snap.values()}, {"dead"}, "their tube")
    _converge(binary, _expiry, conf=EXPIRY_CONF, after=after)


FANOUT_CONF = """\
[tube fan]
fanout = true
"""


def _fanout(p, cl):
    c = p.bs()
    for t in ("fan+a", "fan+b"):
        c.use(t)
    c.use("fan")
    put_many(c, [body("f1", i) for i in range(10)], pri=5, delay=[0, 600] * 5)
    c.use("fan+c")
    c.use("fan")
    put_many(c, [body("f2", i) for i in range(5)], ttr=33)
    m = p.mc()
    m.expect("delete fan+b", "DELETED")    # the child goes, with its jobs
    c.use("default")


@no_server
@tubed_only(EXT)
def test_converges_fanout(binary):
    def after(p, live, late, snap):
        per = {}
        for j in snap.values():
            per[j.tube] = per.get(j.tube, 0) + 1
        eq(per, {"fan": 15, "fan+a": 15, "fan+c": 5}, "jobs per tube")
    _converge(binary, _fanout, conf=FANOUT_CONF, after=after)


def _moves(p, cl):
    c = p.bs()
    c.use("t1")
    ids = put_many(c, [body("mv", i) for i in range(40)], delay=[0, 0, 900] * 13 + [0])
    w = p.bs()
    w.watch("t1")
    for j in ids[:4]:
        reserve_job(w, j)
        w.expect("bury %d 9" % j, "BURIED")
    for j in ids[:12]:                   # buried, ready, delayed ones
        c.expect("move-job %d t2" % j, "MOVED")
    c.expect("move-job %d t1" % ids[20], "MOVED")   # its own tube
    c.use("t3")
    put_many(c, [body("fl", i) for i in range(25)], delay=[0, 60] * 12 + [0])
    h = p.bs()
    h.watch("t3")
    h.ignore("default")
    kept, _ = h.reserve(5)
    c.use("default")
    eq(c.cmd("flush-tube t3"), b"FLUSHED 24", "flush-tube t3")
    c.use("t3")
    c.put(b"after the flush")
    c.use("default")
    return h, kept


@no_server
@tubed_only(EXT)
def test_converges_moves_and_flush(binary):
    def after(p, live, late, snap):
        t3 = sorted(j.body for j in snap.values() if j.tube == "t3")
        eq(len(t3), 2, "jobs of t3 after the flush: the reserved one and "
           "the one put after")
        eq(sum(1 for j in snap.values() if j.tube == "t2"), 12, "jobs moved to t2")
    _converge(binary, _moves, after=after)


def _paused(p, cl):
    c = p.bs()
    c.use("pz")
    put_many(c, [body("pz", i) for i in range(10)])
    c.expect("pause-tube pz 3600", "PAUSED")
    put_many(c, [body("pz2", i) for i in range(5)])


@no_server
@tubed_only(EXT)
def test_converges_paused_tube(binary):
    _converge(binary, _paused)


def _memcache(p, cl):
    m = p.mc()
    for i in range(30):
        m.store("q", body("mc", i, 50 + i))
    for i in range(5):
        eq(m.get("q"), body("mc", i, 50 + i), "get q #%d" % i)
    opener = p.mc()
    eq(opener.get("q/open"), body("mc", 5, 55), "get q/open")
    m2 = p.mc()
    eq(m2.get("q/open"), body("mc", 6, 56), "get q/open (second client)")
    eq(m2.get("q/close"), None, "get q/close")              # deleted
    eq(m2.get("q/open"), body("mc", 7, 57), "get q/open (third)")
    eq(m2.get("q/abort"), None, "get q/abort")              # back to ready
    eq(m2.get("q/peek"), body("mc", 7, 57), "get q/peek")
    m.store("r", b"other queue")
    for i in range(4):
        m.store("q2", b"flushed %d" % i)
    m.expect("flush q2", "END")                           # all of q2 gone
    m.store("q3", b"expires in a second", exptime=1)
    m.store("q3", b"stays")
    b = p.bs()
    wait_for(lambda: b.stats_tube("q3")["current-jobs-ready"] == "1",
             "the memcache item with exptime 1 to expire on the primary")
    return opener


@no_server
@tubed_only(EXT)
def test_converges_memcache(binary):
    def after(p, live, late, snap):
        qs = sorted(j.body for j in snap.values() if j.tube == "q")
        eq(qs, sorted([body("mc", i, 50 + i) for i in range(5, 30) if i != 6]),
           "items of q on the primary")
        eq(sorted(j.body for j in snap.values() if j.tube in ("q2", "q3")),
           [b"stays"], "items of q2 (flushed) and q3 (one expired)")
        for r in (live, late):
            eq(r.mc().get("q/peek"), body("mc", 5, 55),
               "get q/peek on %s: the job open on the primary is ready "
               "here" % r.name)
    _converge(binary, _memcache, after=after)


# ------------------------------------------------------------ read-behind

def _spilled(c):
    line, data = c.cmd_body("stats-binlog")
    d = harness.parse_yaml_dict(data)
    return int(d["spilled-jobs"]), int(d["spilled-bytes"])


def _readbehind(p, cl):
    c = p.bs()
    c.use("rb")
    n = 300
    bodies = [body("rb", i, 1024) for i in range(n)]
    ids = put_many(c, bodies, pri=[i % 7 for i in range(n)],
                   delay=[1200 if i % 11 == 3 else 0 for i in range(n)])
    w = p.bs()
    w.watch("rb")
    for j in ids[200:210]:
        reserve_job(w, j)
        w.expect("bury %d 1" % j, "BURIED")
    for j in ids[250:260]:
        c.expect("move-job %d other" % j, "MOVED")
    check(_spilled(c)[0] > 0, "the primary spilled nothing (%r)" % (_spilled(c),))


@no_server
@tubed_only(EXT)
def test_converges_readbehind_both_sides(binary):
    """Budgets on both sides, smaller on the replicas: their memory stays
    within their own budget while they catch up and after."""
    budget = 32 * 1024

    def after(p, live, late, snap):
        for r in (live, late):
            c = r.admin()
            sj, sb = _spilled(c)
            check(sj > 0, "%s spilled nothing (its budget is %d bytes)"
                  % (r.name, budget))
            mem = int(r.metrics().value("tubed_tube_memory_bytes", tube="rb"))
            check(mem <= budget, "%s keeps %d body bytes of rb in memory, "
                  "over its budget %d" % (r.name, mem, budget))
    _converge(binary, _readbehind, conf="[tube rb]\nmax_memory_size = 64K\n",
              replica_conf="[tube rb]\nmax_memory_size = 32K\n", after=after)


@no_server
@tubed_only(EXT)
def test_converges_readbehind_unbudgeted_replica(binary):
    """A primary with a budget, replicas without: every body arrives."""
    _converge(binary, _readbehind, conf="[tube rb]\nmax_memory_size = 16K\n",
              replica_conf="")


# ------------------------------------------------------------ live changes

@no_server
@tubed_only(EXT)
def test_live_replica_follows_each_change(binary):
    """A change on the primary is on the live replica after it, step by
    step (a reply on the primary, then lag 0 and the same job)."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c = p.bs()
        jid = c.put(b"step", pri=5, ttr=9)
        wait_caught_up(p, r)
        rc = r.bs()
        eq(rc.peek("peek %d" % jid), (jid, b"step"), "peek on the replica")
        st = rc.stats_job(jid)
        eq((unq(st["tube"]), st["pri"], st["ttr"], unq(st["state"])),
           ("default", "5", "9", "ready"), "stats-job on the replica")
        c.expect("delete %d" % jid, "DELETED")
        wait_caught_up(p, r)
        eq(rc.peek("peek %d" % jid), None, "peek on the replica after delete")


def _blink(p, c, n):
    """n put/delete pairs in tube blink (c uses it); returns the last id."""
    c.use("blink")
    for i in range(n):
        jid = c.put(b"blink %d" % i)
        c.expect("delete %d" % jid, "DELETED")
    return c.put(b"stays")


@no_server
@tubed_only(EXT)
def test_tube_that_comes_and_goes_on_the_replica(binary):
    """A tube the primary keeps (its client uses it) while its only job
    comes and goes: on the replica no one uses it, so it goes each time its
    job does, and comes back with the next put; live, and while a snapshot
    is being sent (slowed by a proxy).  The catch-up test found a
    heap-use-after-free of a destroyed tube in the replica's apply."""
    with Cluster(binary, "[tube bulk]\nmax_memory_size = 1M\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c = p.bs()
        last = _blink(p, c, 200)
        wait_caught_up(p, r)
        assert_converged(p, r, "after 200 put/delete in a tube, live")
        eq(r.admin().peek("peek %d" % last), (last, b"stays"), "the last job")
        c.use("bulk")
        put_many(c, [body("bulk", i, 1000) for i in range(5000)], batch=500)
        proxy = Proxy(p.port, rate=2 * 10 ** 6)
        try:
            late = cl.node("late", "-f", "0", replica_of=proxy.addr)
            wait_for(lambda: int(late.admin().stats()["current-jobs-ready"]) > 0,
                     "the snapshot to begin", interval=0.01)
            last = _blink(p, c, 200)
            proxy.rate = None
            wait_caught_up(p, late, timeout=60)
            assert_converged(p, late, "after 200 put/delete in a tube during "
                             "a snapshot")
        finally:
            proxy.close()


@no_server
@tubed_only(EXT)
def test_changes_during_a_snapshot(binary):
    """A snapshot slowed by a proxy while the primary deletes, moves,
    buries, releases, kicks, flushes and puts jobs both already sent and
    not yet sent (doc/replication.md: a change to a job already sent
    follows its record; one not yet sent goes in its newest state); then
    the replica is killed mid-snapshot twice and restarted: it converges."""
    with Cluster(binary) as cl:
        # No backlog: every reconnection is a snapshot (a caught-up replica
        # killed and restarted would otherwise resume without one).
        p = cl.node("p", "-f", "0", "--repl-backlog", "0")
        c = p.bs(timeout=30)
        c.use("bulk")
        n = 4000
        ids = put_many(c, [body("sn", i, 1000) for i in range(n)],
                       pri=[i % 97 for i in range(n)], batch=500)
        c.use("other")
        oids = put_many(c, [body("ot", i, 500) for i in range(300)])
        proxy = Proxy(p.port, rate=10 ** 6)
        try:
            r = cl.node("r", "-f", "0", replica_of=proxy.addr)
            wait_for(lambda: int(r.admin().stats()["current-jobs-ready"]) > 100,
                     "the snapshot to begin", interval=0.01)
            w = p.bs()
            w.watch("bulk")
            w.watch("other")
            for j in (ids[10], ids[n - 10]):
                c.expect("delete %d" % j, "DELETED")
            for j in (ids[20], ids[n - 20]):
                c.expect("move-job %d t2" % j, "MOVED")
            for j in (ids[30], ids[n - 30]):
                reserve_job(w, j)
                w.expect("bury %d 3" % j, "BURIED")
            for j in (ids[40], ids[n - 40]):
                reserve_job(w, j)
                w.expect("release %d 7 600" % j, "RELEASED")
            c.expect("kick-job %d" % ids[30], "KICKED")
            reserve_job(w, oids[5])                  # kept by the flush
            eq(c.cmd("flush-tube other"), b"FLUSHED 299", "flush-tube other")
            c.use("bulk")
            put_many(c, [body("new", i, 800) for i in range(50)])
            proxy.rate = None
            wait_caught_up(p, r, timeout=60)
            assert_converged(p, r, "changes during a snapshot")
            # Killed mid-snapshot twice, then left to finish.
            for k in range(2):
                r.kill9()
                proxy.rate = 10 ** 6
                r.restart()
                # During a snapshot a replica's position is 0
                # (doc/replication.md).
                wait_for(lambda: (lambda d: d["connected"] == "true" and
                                  d["position"] == "0")(r.repl()),
                         "the resync to begin (%d)" % k, interval=0.01)
                c.put(b"during resync %d" % k)
            proxy.rate = None
            wait_caught_up(p, r, timeout=60)
            assert_converged(p, r, "after two kill -9 mid-snapshot")
        finally:
            proxy.close()


def _flush_all(p, cl):
    m = p.mc()
    for q in ("fa", "fb", "fc"):
        for i in range(5):
            m.store(q, b"%s %d" % (q.encode(), i))
    c = p.bs()
    c.use("fb")
    jid = c.put(b"reserved through flush_all", pri=0)
    w = p.bs()
    w.watch("fb")
    eq(w.reserve(5)[0], jid, "reserve")
    m.expect("flush_all", "Flushed all queues.")
    m.store("fa", b"after flush_all")
    return w


@no_server
@tubed_only(EXT)
def test_converges_memcache_flush_all(binary):
    def after(p, live, late, snap):
        eq(sorted(j.body for j in snap.values()),
           [b"after flush_all", b"reserved through flush_all"],
           "jobs left on the primary after flush_all")
    _converge(binary, _flush_all, after=after)


@no_server
@tubed_only(EXT)
def test_reload_on_the_primary_expires_and_replica_follows(binary):
    """A reload that lowers max_age on the primary expires its old jobs at
    once (extensions.md §1); the replica, whose own file says nothing of
    max_age, follows the primary's records."""
    with Cluster(binary, "[tube rl]\nmax_age = 1h\nmove_expired_to = rl-dead\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p, conf="")
        c = p.bs()
        c.use("rl")
        put_many(c, [body("rl", i) for i in range(10)])
        time.sleep(1.2)
        p.reload("[tube rl]\nmax_age = 1s\nmove_expired_to = rl-dead\n")
        c.use("default")
        wait_for(lambda: len(list_jobs(c, "rl-dead")) == 10,
                 "the reload to move the 10 jobs to rl-dead")
        wait_caught_up(p, r)
        snap = assert_converged(p, r, "after the reload on the primary")
        eq({j.tube for j in snap.values()}, {"rl-dead"}, "tubes of the jobs")
