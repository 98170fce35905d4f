"""Replication scenarios that the other replication tests did not cover,
each one a case where a replica (or a restart) could end up with other
jobs than its primary (replication.md §6.1-6.3).

- Ids of a `journal = false` tube are kept from reuse by a delete record
  of an id not given out yet (the "id mark"); the mark must never name a
  journaled job: written again when a file rolls over after ids ran past
  it, or written for a job moved into such a tube with an old id, it
  deleted that job at replay and, on a replica, at once.
"""

import harness
from harness import check, eq, no_server, tubed_only
from repl_util import (EXT, Cluster, assert_converged, assert_same, body,
                       put_many, snapshot, wait_caught_up)

SERVER = "none"

MEM = "[tube mem]\njournal = false\n"


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
        p.kill9()
        p.restart()
        got = snapshot(p.admin())
        assert_same(want, got, "the primary restarted from its binlog",
                    "before", "after", replica_side=False)
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
        p.kill9()
        p.restart()
        got = snapshot(p.admin())
        assert_same(want, got, "the primary restarted from its binlog",
                    "before", "after", replica_side=False)
