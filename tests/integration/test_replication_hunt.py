"""Replication scenarios that the other replication tests did not cover,
each one a case where a replica (or a restart) could end up with other
jobs than its primary (replication.md §6.1-6.3).

- Ids of a `journal = false` tube are kept from reuse by a delete record
  of an id not given out yet (the "id mark"); the mark must never name a
  journaled job: written again when a file rolls over after ids ran past
  it, or written for a job moved into such a tube with an old id, it
  deleted that job at replay and, on a replica, at once.
"""

import time

import harness
from harness import check, eq, no_server, tubed_only, unq, wait_for
from repl_util import (EXT, Cluster, Proxy, assert_converged, assert_same, body, reserve_job, rint,
                       list_jobs, put_many, snapshot, wait_caught_up)

SERVER = "none"

MEM = "[tube mem]\njournal = false\n"


def _restart_keeps(p, want):
    """kill -9 of p and a restart: its binlog brings back exactly want."""
    p.kill9()
    p.restart()
    assert_same(want, snapshot(p.admin()), "the primary restarted from its binlog",
                "before", "after", replica_side=False)


@no_server
@tubed_only(EXT)
def test_id_mark_after_a_roll_over_deletes_no_job(binary):
    # One put into the unjournaled tube marks id 1 + 1024; then over a
    # thousand journaled puts through 64 KiB files: the files roll over
    # after job 1025 exists, and each new file starts with the mark again.
    with Cluster(binary, MEM) as cl:
        p = cl.node("p", "-f", "0", "-s", 65536)
        r = cl.node("r", "-f", "0", "-s", 65536, replica_of=p)
        c = p.bs()
        c.use("mem")
        eq(c.put(b"not journaled"), 1, "the first id")
        c.use("disk")
        ids = put_many(c, [body("disk", i, 300) for i in range(1300)])
        check(1025 in ids, "job 1025 is a journaled job: %r" % ids[1020:1030])
        wait_caught_up(p, r)
        want = {j: v for j, v in snapshot(p.admin()).items() if v.tube == "disk"}
        eq(sorted(want), ids, "the journaled jobs on the primary")
        assert_same(want, snapshot(r.admin()), "the replica after the roll-overs")
        _restart_keeps(p, want)
        eq(p.bs().put(b"next") > 1, True, "a new id after the restart")


@no_server
@tubed_only(EXT)
def test_move_of_an_old_job_into_an_unjournaled_tube(binary):
    # Job 1 moved into the unjournaled tube once ids ran past 1 + 1024:
    # its mark must not be a delete of job 1025.
    with Cluster(binary, MEM) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("disk")
        ids = put_many(c, [body("old", i, 40) for i in range(1100)])
        eq(ids[0], 1, "the first id")
        c.expect("move-job 1 mem", "MOVED")
        wait_caught_up(p, r)
        want = {j: v for j, v in snapshot(p.admin()).items() if v.tube == "disk"}
        eq(sorted(want), ids[1:], "the journaled jobs on the primary")
        assert_same(want, snapshot(r.admin()), "the replica after the move")
        _restart_keeps(p, want)


def _promote(c, epoch, what):
    eq(c.cmd("promote", timeout=10), b"PROMOTED %d" % epoch, "%s: promote" % what)


@no_server
@tubed_only(EXT)
def test_follow_itself(binary):
    """A primary told to follow its own address becomes a replica that
    refuses itself (a replica is not a primary): no deadlock, no job
    lost, and promote makes it a primary again with every job; a replica
    told the same keeps its jobs too."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        ids = put_many(c, [body("self", i) for i in range(50)],
                       delay=[0, 0, 0, 900, 0] * 10)
        c.expect("delete %d" % ids[1], "DELETED")
        wait_caught_up(p, r)
        want = snapshot(p.admin())
        eq(c.cmd("follow %s" % p.addr, timeout=10), b"FOLLOWING", "follow itself")
        wait_for(lambda: "not a primary" in unq(p.repl()["last-error"]),
                 "the server to refuse itself as its primary")
        eq(p.repl()["connected"], "false", "connected to itself")
        c.send(b"put 0 0 60 1\r\nx\r\n")
        eq(c.read_line(), b"DRAINING", "a put while following itself")
        assert_same(want, snapshot(p.admin()), "following itself", "before", "after")
        rc = r.bs()
        eq(rc.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "replica follows itself")
        wait_for(lambda: "not a primary" in unq(r.repl()["last-error"]),
                 "the replica to refuse itself")
        assert_same(want, snapshot(r.admin()), "the replica following itself")
        _promote(p.bs(), 2, "p")
        assert_same(want, snapshot(p.admin()), "promoted again", "before", "after",
                    replica_side=False)
        eq(rc.cmd("follow %s" % p.addr, timeout=10), b"FOLLOWING", "r follows p again")
        jid = p.bs().put(b"after")
        check(jid > ids[-1], "a new id above the old ones")
        wait_caught_up(p, r)
        assert_converged(p, r, "r back on p")


MIXED_CONF = """\
[tube fan]
fanout = true

[tube cap]
max_items = 20
discard_old_when_full = true

[tube rb]
max_memory_size = 16K
"""


def _mixed(p, tag, old=()):
    """Every kind of journaled change on p, some of them to the jobs
    `old` (ids it already had): puts in every state, deletes, buries,
    kicks, releases, moves, a flush, fanout children, a discarding tube,
    spilled bodies, memcache sets and gets.  Returns the connection
    holding reservations (keep it open)."""
    c = p.bs()
    c.use("t-" + tag)
    ids = put_many(c, [body(tag, i, 50 + i * 7) for i in range(40)],
                   pri=[i % 9 for i in range(40)],
                   delay=[0, 0, 1800, 0, 0] * 8)
    w = p.bs()
    w.watch("t-" + tag)
    ready = [j for i, j in enumerate(ids) if i % 5 != 2]
    for j in ready[:4]:
        reserve_job(w, j)
        w.expect("bury %d 3" % j, "BURIED")
    for j in ready[4:7]:
        reserve_job(w, j)
        w.expect("release %d 2 900" % j, "RELEASED")
    for j in ready[7:10]:
        c.expect("delete %d" % j, "DELETED")
    c.expect("kick-job %d" % ready[0], "KICKED")
    for j in ready[10:14]:
        c.expect("move-job %d mv-%s" % (j, tag), "MOVED")
    for j in list(old)[:30]:
        # the older jobs: half deleted, half moved (either may be gone)
        line = c.cmd(("delete %d" if j % 2 else "move-job %d mv-" + tag) % j)
        check(line in (b"DELETED", b"MOVED", b"NOT_FOUND"), "%r" % line)
    c.use("fan+" + tag)
    c.use("fan")
    put_many(c, [body("fan" + tag, i) for i in range(5)])
    c.use("cap")
    put_many(c, [body("cap" + tag, i) for i in range(25)])
    c.use("rb")
    put_many(c, [body("rb" + tag, i, 2000) for i in range(30)])
    c.use("fl-" + tag)
    put_many(c, [body("fl" + tag, i) for i in range(10)])
    eq(c.cmd("flush-tube fl-%s" % tag), b"FLUSHED 10", "flush-tube")
    m = p.mc()
    for i in range(10):
        m.store("mq", body("mc" + tag, i))
    for i in range(3):
        check(m.get("mq") is not None, "get mq")
    held = p.bs()
    held.watch("t-" + tag)
    reserve_job(held, ready[15])
    return held, ids


def _all_ids(n):
    return sorted(snapshot(n.admin(), bodies=False))


@no_server
@tubed_only(EXT)
def test_former_primary_with_a_mixed_tail_follows(binary):
    """The old primary, still running after the promotion of its replica,
    makes a tail of every kind of change (deletes and moves of jobs both
    have, a flush, fanout children, memcache takes, spills); told to
    follow, it ends with exactly the new primary's jobs, the tail counted
    in discarded-records."""
    with Cluster(binary, MIXED_CONF) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        keep1, base = _mixed(p, "a")
        wait_caught_up(p, r)
        _promote(r.bs(), 2, "r")
        keep2, _ = _mixed(p, "tail", old=base)        # the unreplicated tail
        keep3, _ = _mixed(r, "new", old=base[10:])    # the new primary's own
        before = rint(p.repl(), "discarded-records")
        eq(p.bs().cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        wait_caught_up(r, p)
        assert_converged(r, p, "the former primary after follow")
        check(rint(p.repl(), "discarded-records") > before,
              "discarded-records did not count the tail")
        keep4, _ = _mixed(r, "after", old=base[20:])
        wait_caught_up(r, p)
        assert_converged(r, p, "the former primary, following")
        p.kill9()
        p.restart(replica_of=r)
        wait_caught_up(r, p)
        assert_converged(r, p, "the former primary after kill -9")
        del keep1, keep2, keep3, keep4


EXPIRY_CONF = MIXED_CONF + """
[tube exp]
max_age = 1s
move_expired_to = exp-dead

[tube gone]
max_age = 1s

[tube fanx]
fanout = true
max_age = 1s
"""


@no_server
@tubed_only(EXT)
def test_expiry_while_the_replica_is_down_then_partial_resync(binary):
    """Jobs of max_age tubes (moved, dropped, fanout copies) and memcache
    items with an exptime expire on the primary while its replica is
    down; the replica restarted goes on from its position (a partial
    resync) and ends with the primary's jobs."""
    with Cluster(binary, EXPIRY_CONF) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        keep, _ = _mixed(p, "a")
        for t in ("exp", "gone"):
            c.use(t)
            put_many(c, [body(t, i) for i in range(12)], delay=[0, 0, 3600] * 4)
        c.use("fanx+k")
        c.use("fanx")
        put_many(c, [body("fanx", i) for i in range(6)])
        m = p.mc()
        for i in range(8):
            m.store("mx", body("mx", i), exptime=1 if i % 2 else 0)
        wait_caught_up(p, r)
        r.kill9()
        m2 = p.mc()

        def expired():
            tubes = c.list_tubes()
            left = sum(len(list_jobs(c, t)) for t in ("exp", "gone", "fanx")
                       if t in tubes)
            return left == 0 and p.bs().stats_tube("mx")["current-jobs-ready"] == "4"
        wait_for(expired, "the jobs of exp, gone, fanx and the items to expire")
        eq(m2.get("mx"), body("mx", 0), "get mx")
        before = rint(p.repl(), "partial-resyncs")
        r.restart()
        wait_caught_up(p, r)
        assert_converged(p, r, "the replica after the expiries it missed")
        eq(rint(p.repl(), "partial-resyncs"), before + 1, "partial-resyncs on the primary")
        del keep


def _mid_snapshot(r, least):
    """Wait until r receives a snapshot (connected, position 0, lagging)
    and holds at least `least` ready jobs (a restarted one may hold them
    from its binlog already)."""
    def mid():
        d = r.repl()
        return (d["connected"] == "true" and rint(d, "position") == 0
                and rint(d, "lag-records") > 0
                and int(r.admin().stats()["current-jobs-ready"]) >= least)
    wait_for(mid, "%s to be in the middle of a snapshot" % r.name, interval=0.01)


@no_server
@tubed_only(EXT)
def test_spilled_snapshot_cut_by_kill9_then_follow_mid_snapshot(binary):
    """A replica with a read-behind budget receives a snapshot of spilled
    bodies through a slowed link, with changes on the primary meanwhile
    (deletes, moves and a flush of jobs sent and not yet sent); it is
    killed with kill -9 mid-snapshot, restarted, and mid-way through the
    second snapshot told to `follow` the primary directly: it ends with
    exactly the primary's jobs, bodies byte for byte."""
    n = 3000
    conf = "[tube rb]\nmax_memory_size = 32K\n"
    with Cluster(binary, conf) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs(timeout=30)
        c.use("rb")
        ids = put_many(c, [body("sp", i, 1500) for i in range(n)], batch=500,
                       delay=([0] * 9 + [3600]) * (n // 10))
        proxy = Proxy(p.port, rate=1 * 10 ** 6)
        try:
            r = cl.node("r", "-f", "0", replica_of=proxy.addr)
            _mid_snapshot(r, 200)
            for j in ids[:50] + ids[-50:]:
                c.expect("delete %d" % j, "DELETED")
            for j in ids[100:110] + ids[-100:-90]:
                c.expect("move-job %d other" % j, "MOVED")
            r.kill9()
            r.restart()
            _mid_snapshot(r, 300)
            c.use("fl")
            put_many(c, [body("fl", i, 800) for i in range(20)])
            eq(c.cmd("flush-tube fl"), b"FLUSHED 20", "flush-tube")
            c.use("rb")
            late = put_many(c, [body("late", i, 3000) for i in range(30)])
            eq(r.bs().cmd("follow %s" % p.addr, timeout=10), b"FOLLOWING",
               "follow mid-snapshot")
            wait_caught_up(p, r, timeout=120)
            assert_converged(p, r, "after the cut snapshots")
            check(late[-1] in snapshot(r.admin(), ids=[late[-1]]), "a late job")
            r.kill9()
            r.restart()
            wait_caught_up(p, r, timeout=120)
            assert_converged(p, r, "after a kill -9 of the caught-up replica")
        finally:
            proxy.close()


@no_server
@tubed_only(EXT)
def test_replica_restarted_as_a_primary_counts_its_records(binary):
    """A replica restarted without --replica-of is a primary: its own
    records advance its position (its binlog's last position record was
    written as a follower's), so a new replica of it streams without
    resyncing again and again, and with sync_replicas = 1 its puts are
    acknowledged."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("a", i) for i in range(20)])
        wait_caught_up(p, r)
        r.sigterm()
        p.sigterm()
        r.write_conf("sync_replicas = 1\n")
        r.restart(replica_of=None)
        eq(unq(r.repl()["role"]), "primary", "role of the replica started alone")
        pos = rint(r.repl(), "position")
        r2 = cl.node("r2", "-f", "0", replica_of=r)
        c = r.bs()
        ids = put_many(c, [body("b", i) for i in range(20)])
        c.expect("delete %d" % ids[0], "DELETED", timeout=10)
        eq(rint(r.repl(), "position"), pos + 21, "position after 20 puts and a delete")
        wait_caught_up(r, r2)
        assert_converged(r, r2, "a replica of the restarted one")
        eq(rint(r2.repl(), "full-resyncs"), 1, "full resyncs of the new replica")
        eq(rint(r2.repl(), "discarded-records"), 0, "discarded-records")


@no_server
@tubed_only(EXT)
def test_promoted_id_jump_survives_a_restart(binary):
    """A promoted server's ids jump 2^20 above every id it has seen
    (doc/replication.md): the jump is journaled, so a kill -9 before its
    first put does not give out ids its former primary may have given out
    in an unreplicated tail; its own replica learns the jump too."""
    gap = 1 << 20
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        ids = put_many(p.bs(), [body("a", i) for i in range(20)])
        wait_caught_up(p, r)
        _promote(r.bs(), 2, "r")
        r.kill9()
        r.restart(replica_of=None)
        jid = r.bs().put(b"first after the restart")
        check(jid > ids[-1] + gap, "id %d after a promotion and a restart: not above "
              "%d + 2^20" % (jid, ids[-1]))
        p.kill9()
        p.restart(replica_of=r)
        wait_caught_up(r, p)
        assert_converged(r, p, "the former primary")
        _promote(p.bs(), 3, "p")
        jid2 = p.bs().put(b"first on p")
        check(jid2 > jid + gap, "id %d after the second promotion, %d before" % (jid2, jid))


@no_server
@tubed_only(EXT)
def test_full_resync_with_changes_ahead_of_the_snapshot(binary):
    """A replica that already holds the jobs gets a snapshot again (its
    primary restarted: a new history), slowed down; meanwhile jobs ahead
    of the snapshot's cursor are moved and released (live records naming
    them first). Every job the snapshot then sends again must stay: the
    sweep at its end deletes only what the primary does not have."""
    # 32 MB: the primary's snapshot cursor lags well behind, whatever the
    # socket buffers between it and the slowed replica hold.
    n = 8000
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs(timeout=30)
        ids = put_many(c, [body("rs", i, 4000) for i in range(n)], batch=500)
        proxy = Proxy(p.port)
        try:
            r = cl.node("r", "-f", "0", replica_of=proxy.addr)
            wait_caught_up(p, r)
            p.sigterm()
            proxy.rate = 300 * 1000
            p.restart()
            c = p.bs(timeout=30)
            wait_for(lambda: r.repl()["connected"] == "true" and
                     rint(r.repl(), "position") == 0, "the replica's second snapshot",
                     interval=0.01)
            # The middle of the replica's sorted ids, then more above it.
            for j in [ids[n // 2], ids[3 * n // 4], ids[n // 4 + n // 2], ids[-1]]:
                c.expect("move-job %d elsewhere" % j, "MOVED")
            c.use("new")
            put_many(c, [body("new", i) for i in range(20)])
            proxy.rate = None
            wait_caught_up(p, r, timeout=120)
            assert_converged(p, r, "after the second snapshot")
            eq(rint(r.repl(), "discarded-records"), 0, "discarded-records")
        finally:
            proxy.close()


@no_server
@tubed_only(EXT)
def test_former_primary_expires_nothing_on_its_own(binary):
    """A primary told to follow stops expiring jobs itself: the age ring of
    its max_age tube (the jobs it took as a primary) waits, and the new
    primary's records say what expires. Here the new primary holds the
    jobs reserved past their max_age (a reserved job does not expire), so
    they stay in their tube there, and must stay on the former primary."""
    conf = "[tube exp]\nmax_age = 3s\nmove_expired_to = exp-dead\n"
    with Cluster(binary, conf) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("exp")
        ids = put_many(c, [body("ex", i) for i in range(10)])
        wait_caught_up(p, r)
        _promote(r.bs(), 2, "r")
        w = r.bs()
        for j in ids[:6]:
            reserve_job(w, j)
        eq(c.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        # Past max_age: the other four expire on r, moved to exp-dead.
        wait_for(lambda: r.bs().stats_tube("exp")["current-jobs-ready"] == "0",
                 "the unreserved jobs to expire on the new primary", timeout=60)
        time.sleep(1)       # (and a second more for the former primary's ring)
        wait_caught_up(r, p)
        got = assert_converged(r, p, "the former primary past max_age")
        eq(sorted(j.id for j in got.values() if j.tube == "exp"), ids[:6],
           "jobs left in exp (reserved on the new primary)")
        # Promoted again, its ring runs: the six expire there at once.
        _promote(p.bs(), 3, "p")
        wait_for(lambda: p.bs().stats_tube("exp")["current-jobs-ready"] == "0" and
                 p.bs().stats_tube("exp-dead")["current-jobs-ready"] == "10",
                 "the six to expire on p promoted again")
        del w


@no_server
@tubed_only(EXT)
def test_former_primary_drops_its_unjournaled_jobs(binary):
    """A journal = false tube's jobs are never replicated: a primary that
    follows a promoted replica with no tail (a partial resync, no
    snapshot to sweep them) must still end with exactly the new primary's
    jobs, so it drops them, counted in discarded-records."""
    with Cluster(binary, MEM) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("mem")
        put_many(c, [body("mem", i) for i in range(7)])
        c.use("disk")
        put_many(c, [body("disk", i) for i in range(5)])
        wait_caught_up(p, r)
        _promote(r.bs(), 2, "r")
        eq(c.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        wait_caught_up(r, p)
        assert_converged(r, p, "the former primary")
        d = p.repl()
        eq(rint(d, "partial-resyncs"), 1, "a partial resync (no tail)")
        eq(rint(d, "discarded-records"), 7, "discarded-records: the unjournaled jobs")


@no_server
@tubed_only(EXT)
def test_replica_restarted_in_other_fsync_modes(binary):
    """A replica killed with kill -9 under load and restarted in another
    -f mode each time (-f 0, -F, the default, -f 0), with sync_replicas
    = 1 on the primary and a second replica: it goes on from its position
    and converges every time; no reply is lost meanwhile."""
    with Cluster(binary, "sync_replicas = 1\n") as cl:
        p = cl.node("p", "-f", "0")
        keep = cl.node("k", "-f", "0", replica_of=p)
        r = cl.node("r", replica_of=p, start=False)
        r.start(extra=["-f", "0"])
        c = p.bs()
        for n, mode in enumerate((["-F"], [], ["-f", "0"])):
            ids = put_many(c, [body("m%d" % n, i, 200) for i in range(300)])
            for j in ids[::3]:
                c.expect("delete %d" % j, "DELETED")
            r.kill9()
            put_many(c, [body("gap%d" % n, i) for i in range(50)])
            r.start(extra=mode)
            put_many(c, [body("after%d" % n, i) for i in range(50)])
            wait_caught_up(p, r, keep)
            assert_converged(p, r, "replica restarted with %r" % (mode,))
        check(rint(r.repl(), "partial-resyncs") >= 1, "no partial resync: %r" % r.repl())


@no_server
@tubed_only(EXT)
def test_promote_a_compacting_replica_then_kill9(binary):
    """A replica with 64 KiB binlog files compacts while it follows a
    churning primary; it is promoted right after the churn (its
    compaction still has files to move), takes writes, is killed with
    kill -9 and restarted: it has every job; the old primary follows it
    and ends with exactly its jobs."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "-s", 65536)
        r = cl.node("r", "-f", "0", "-s", 65536, replica_of=p)
        c = p.bs()
        keep = put_many(c, [body("keep", i, 700) for i in range(60)],
                        delay=[0, 0, 3600] * 20)
        for rnd in range(15):
            ids = put_many(c, [body("churn%d" % rnd, i, 1500) for i in range(40)])
            for j in ids[::2]:
                c.expect("delete %d" % j, "DELETED")
        for j in keep[:10]:
            c.expect("move-job %d moved" % j, "MOVED")
        wait_caught_up(p, r)
        _promote(r.bs(), 2, "r")
        rc = r.bs()
        rc.use("after")
        put_many(rc, [body("after", i, 900) for i in range(30)])
        want = snapshot(r.admin())
        r.kill9()
        r.restart(replica_of=None)
        assert_same(want, snapshot(r.admin()), "the promoted replica after kill -9",
                    "before", "after", replica_side=False)
        eq(p.bs().cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        wait_caught_up(r, p)
        assert_converged(r, p, "the old primary")
