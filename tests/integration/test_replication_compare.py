"""The replication tests' own instruments prove themselves (no replication
needed: these pass on any tubed with list-jobs).

- The job-by-job comparer (repl_util.snapshot/diff) finds two servers that
  hold the same jobs equal: a running server, and a second one started on
  a copy of its binlog directory (its reserved jobs come back ready, which
  the comparer must accept, as it must for a replica).
- Then it must report every planted difference: a job missing, a job too
  many, another state, another priority, another tube, another body,
  another delay deadline, a job reserved on the replica side.
"""

import os
import shutil

from harness import check, eq, no_server, tubed_only
from repl_util import (EXT, Cluster, body, diff, put_many, reserve_job,
                       snapshot)

SERVER = "none"


def _copy_binlog(src, dst):
    for name in os.listdir(src):
        if name.startswith("binlog."):
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))


@no_server
@tubed_only(EXT)
def test_comparer_agrees_and_catches_planted_differences(binary):
    with Cluster(binary) as cl:
        a = cl.node("a", "-f", "0")
        c = a.bs()
        c.use("x")
        ids = put_many(c, [body("cmp", i, 30 + i * 11) for i in range(40)],
                       pri=[i * 3 for i in range(40)],
                       delay=[0, 0, 0, 1800] * 10)
        c.use("y")
        ids += put_many(c, [body("cmpy", i) for i in range(10)])
        w = a.bs()
        w.watch("x")
        reserve_job(w, ids[0])
        w.expect("bury %d 5" % ids[0], "BURIED")
        reserve_job(w, ids[1])               # stays reserved on a
        # A second server on a copy of a's binlog (-f 0: all is on disk).
        b = cl.node("b", "-f", "0", start=False)
        _copy_binlog(a.bdir, b.bdir)
        b.start()
        sa, sb = snapshot(a.admin()), snapshot(b.admin())
        eq(len(sa), 50, "jobs on a")
        eq(sa[ids[1]].state, "reserved", "job %d on a" % ids[1])
        eq(sb[ids[1]].state, "ready", "job %d on b (restarted)" % ids[1])
        d = diff(sa, sb, "a", "b")
        check(not d, "the comparer finds differences between a server and "
              "its restarted copy: %s" % d[:5])

        # Planted on the real server b: each must be reported.
        bc = b.bs()
        bc.expect("delete %d" % ids[2], "DELETED")           # missing
        bc.use("x")
        extra = bc.put(b"extra job")                          # one too many
        bw = b.bs()
        bw.watch("x")
        reserve_job(bw, ids[4])
        bw.expect("bury %d 777" % ids[4], "BURIED")            # state and pri
        bc.expect("move-job %d z" % ids[5], "MOVED")           # tube
        reserve_job(bw, ids[6])                                # reserved on b
        sb = snapshot(b.admin())
        d = diff(sa, sb, "a", "b")
        text = "\n".join(d)
        for what, needle in (
                ("missing job", "job %d (x, ready) is on a, not on b" % ids[2]),
                ("extra job", "job %d (x, ready) is on b, not on a" % extra),
                ("state", "job %d: state ready on a, buried on b" % ids[4]),
                ("priority", "job %d: pri 12 on a, 777 on b" % ids[4]),
                ("tube", "job %d: tube 'x' on a, 'z' on b" % ids[5]),
                ("reserved on the replica", "job %d is reserved on b" % ids[6])):
            check(needle in text, "the comparer missed a planted %s (%r); it "
                  "reported: %s" % (what, needle, d))

        # Planted in the snapshot: another body, another deadline.
        sb2 = dict(sa)
        j = ids[7]
        sb2[j] = sa[j]._replace(body=sa[j].body[:-1] + b"?")
        k = ids[3]
        eq(sa[k].state, "delayed", "job %d" % k)
        sb2[k] = sa[k]._replace(time_left=sa[k].time_left - 60,
                                deadline=sa[k].deadline - 60)
        d = diff(sa, sb2, "a", "b", replica_side=False)
        eq(len(d), 2, "differences found for a changed body and a changed "
           "deadline (%s)" % d)
        check("job %d: body differs" % j in d[0] + d[1],
              "the comparer missed a changed body: %s" % d)
        check("job %d: delayed, time-left" % k in d[0] + d[1],
              "the comparer missed a changed delay deadline: %s" % d)
