"""Replication edge cases (replication.md §1, §3, §4, §6).

- sync_replicas = 1 with two replicas: one stopped holds nothing (the other
  has the records).
- A replica killed with kill -9 while its primary is down comes back with
  every job from its own binlog and can be promoted with them.
- A replica with small binlog files compacts while it follows; kill -9 and
  a restart after that keep every job.
- A tube with journal = false: its jobs are not journaled, so not
  replicated; every other job is.
- A replica's timers stay idle: its own config expires jobs sooner than
  the primary's, the primary is stopped (SIGSTOP) past that age, and the
  replica still has them; the primary's expiry then reaches it.
- A delayed job whose deadline has passed is ready on the primary and on
  the replica alike.
- The epoch of a promotion survives kill -9.
- Bodies of a MiB replicate byte for byte.
"""

import os
import re
import time

import harness
from harness import check, eq, fail, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, assert_converged, assert_same, body,
                       list_jobs, put_many, rint, snapshot, wait_caught_up, wait_for)

SERVER = "none"


@no_server
@tubed_only(EXT)
def test_sync_one_needs_only_one_of_two(binary):
    with Cluster(binary, "sync_replicas = 1\n") as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        wait_caught_up(p, r1, r2)
        r1.sigstop()
        c = p.bs()
        ids = put_many(c, [body("one", i) for i in range(100)])
        c.expect("delete %d" % ids[0], "DELETED")
        wait_caught_up(p, r2)
        assert_converged(p, r2, "the running replica")
        r1.sigcont()
        wait_caught_up(p, r1)
        assert_converged(p, r1, "the stopped replica after SIGCONT")


@no_server
@tubed_only(EXT)
def test_replica_kill9_while_primary_down(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("k")
        ids = put_many(c, [body("kd", i, 300) for i in range(500)],
                       delay=[0, 0, 0, 3600] * 125)
        for j in ids[:50]:
            c.expect("delete %d" % j, "DELETED")
        wait_caught_up(p, r)
        want = snapshot(p.admin())
        p.kill9()
        wait_for(lambda: r.repl()["connected"] == "false", "the replica to see "
                 "its primary gone")
        r.kill9()
        r.restart()
        got = snapshot(r.admin())
        assert_same(want, got, "the replica restarted while its primary is "
                    "down", "primary", "replica")
        eq(r.admin().cmd("promote", timeout=10), b"PROMOTED 2", "promote")
        assert_same(want, snapshot(r.admin()), "the promoted replica",
                    "primary", "promoted", replica_side=False)
        jid = r.bs().put(b"new")
        check(jid > ids[-1], "id %d after %d" % (jid, ids[-1]))


@no_server
@tubed_only(EXT)
def test_replica_compacts_small_files(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", "-s", 65536, replica_of=p)
        c = p.bs()
        keep = put_many(c, [body("keep", i, 500) for i in range(50)])
        for rnd in range(20):                 # churn: many files' worth
            ids = put_many(c, [body("churn%d" % rnd, i, 2000) for i in range(50)])
            for j in ids:
                c.expect("delete %d" % j, "DELETED")
        wait_caught_up(p, r)
        assert_converged(p, r, "after churn through 64 KiB files")
        line, data = r.admin().cmd_body("stats-binlog")
        st = harness.parse_yaml_dict(data)
        check(int(st["compactions"]) > 0 or int(st["files"]) < 20,
              "the replica's binlog did not compact: %r" % st)
        r.kill9()
        r.restart()
        wait_caught_up(p, r)
        assert_converged(p, r, "after kill -9 of the compacted replica")


@no_server
@tubed_only(EXT)
def test_journal_false_tube_is_not_replicated(binary):
    conf = "[tube mem]\njournal = false\n"
    with Cluster(binary, conf) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("mem")
        put_many(c, [body("mem", i) for i in range(10)])
        c.use("disk")
        disk = put_many(c, [body("disk", i) for i in range(10)])
        wait_caught_up(p, r)
        a = {j: v for j, v in snapshot(p.admin()).items() if v.tube != "mem"}
        b = snapshot(r.admin())
        assert_same(a, b, "the journaled jobs")
        eq(sorted(b), disk, "jobs on the replica")


@no_server
@tubed_only(EXT)
def test_replica_timers_stay_idle(binary):
    with Cluster(binary, "[tube age]\nmax_age = 4s\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p, conf="[tube age]\nmax_age = 1s\n")
        c = p.bs()
        c.use("age")
        ids = put_many(c, [body("age", i) for i in range(10)])
        wait_caught_up(p, r)
        p.sigstop()
        t0 = time.monotonic()
        try:
            time.sleep(2.0)                   # past the replica's 1 s
            rc = r.bs()
            rc.use("age")
            views = {
                "stats current-jobs-ready": int(rc.stats()["current-jobs-ready"]),
                "stats-tube age current-jobs-ready":
                    int(rc.stats_tube("age")["current-jobs-ready"]),
                "list-jobs age all": len(list_jobs(rc, "age")),
                "peek found": sum(1 for j in ids if rc.peek("peek %d" % j)),
                "peek-ready": rc.cmd_body("peek-ready")[0].decode(),
            }
            want = {"stats current-jobs-ready": 10,
                    "stats-tube age current-jobs-ready": 10,
                    "list-jobs age all": 10, "peek found": 10,
                    "peek-ready": "FOUND %d %d" % (ids[0], len(body("age", 0)))}
            eq(views, want, "the replica's views of 10 jobs past its own "
               "max_age of 1 s (its timers must stay idle; the primary's "
               "max_age is 4 s and it is stopped)")
        finally:
            p.sigcont()
        # The primary's expiry reaches the replica.
        wait_for(lambda: p.admin().stats()["current-jobs-ready"] == "0",
                 "the primary to expire them")
        wait_caught_up(p, r)
        eq(snapshot(r.admin()), {}, "jobs on the replica after the primary "
           "expired them")


@no_server
@tubed_only(EXT)
def test_delay_that_ran_out(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        ids = put_many(c, [body("dl", i) for i in range(5)], delay=1)
        time.sleep(2.0)
        wait_caught_up(p, r)
        a = snapshot(p.admin())
        eq({v.state for v in a.values()}, {"ready"}, "states on the primary")
        assert_converged(p, r, "delayed jobs whose delay ran out")
        rc = r.bs()
        eq(rc.peek("peek-ready"), (ids[0], body("dl", 0)), "peek-ready on the replica")


@no_server
@tubed_only(EXT)
def test_epoch_survives_kill9(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        p.bs().put(b"x")
        wait_caught_up(p, r)
        eq(r.admin().cmd("promote", timeout=10), b"PROMOTED 2", "promote")
        jid = r.bs().put(b"epoch 2")
        r.kill9()
        r.restart(replica_of=None)
        d = r.repl()
        eq((unq(d["role"]), d["epoch"]), ("primary", "2"), "after kill -9")
        eq(r.admin().cmd("promote", timeout=10), b"PROMOTED 2", "promote again")
        check(r.bs().put(b"after") > jid, "ids go on above %d" % jid)
        # The old primary (epoch 1) follows it; r fences nothing it should not.
        eq(p.admin().cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        wait_caught_up(r, p)
        assert_converged(r, p, "the old primary following the restarted one")
        eq(p.repl()["epoch"], "2", "the follower's epoch")


@no_server
@tubed_only(EXT)
def test_big_bodies(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "-z", 3 * 2 ** 20)
        r = cl.node("r", "-f", "0", "-z", 3 * 2 ** 20, replica_of=p)
        c = p.bs()
        bodies = [os.urandom(2 ** 20 + i * 4099) + b"\r\n" for i in range(6)]
        put_many(c, bodies, batch=2)
        late = cl.node("late", "-f", "0", "-z", 3 * 2 ** 20, replica_of=p)
        wait_caught_up(p, r, late)
        assert_converged(p, r, "1 MiB bodies, live")
        assert_converged(p, late, "1 MiB bodies, snapshot")
