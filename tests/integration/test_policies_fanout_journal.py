"""Fanout children journaled in the binlog (doc/binlog.md, record C).

A registered child (spec/extensions.md §1, "Fanout") is a BL_CHILD record
in the binlog, like every other durable change, never a side file:

- children come back after kill -9 and no DIR/fanout file is ever made;
- they survive the deletion of the file that registered them: with small
  binlog files and churn in another tube, compaction writes their records
  again in newer files, the old ones go, and a restart still has them;
- a DIR/fanout file of an older version is read once at start: its
  children are journaled and the file removed, and they stay after later
  restarts (next to a version-1 binlog file, which still replays);
- a replica hears of a child registered with no job in it, through the
  live stream or in its snapshot (also of a primary that never gave out a
  job id), and once promoted fans out to it; a former primary that
  follows lets go the children the new primary does not have.
"""

import os
import struct
import time

import binlog_util as bu
from harness import check, eq, no_server, tubed_only
from policy_util import Policy, present, put_id, tube_stats, wait_for
from repl_util import EXT, Cluster, wait_caught_up

SERVER = "none"
CONF = "[tube P]\nfanout = true\n"


def _child_records(bdir):
    """{file number: [(flag, name)]} of the C records in DIR's files."""
    out = {}
    for n, p in bu.parse_dir(bdir):
        for r in p.records:
            pl = r.payload
            if pl[:1] == b"C" and len(pl) >= 11:
                out.setdefault(n, []).append((pl[9], pl[11:11 + pl[10]].decode()))
    return out


def _registered(bdir):
    """The children the C records leave registered, replayed in order."""
    reg = set()
    recs = _child_records(bdir)
    for n in sorted(recs):
        for flag, name in recs[n]:
            if flag:
                reg.add(name)
            else:
                reg.discard(name)
    return reg


def _ready_in(c, tube):
    """current-jobs-ready of tube (0 when it does not exist)."""
    st = tube_stats(c, tube)
    return int(st["current-jobs-ready"]) if st else 0


def _check_fanout(c, children):
    c.use("P")
    before = {t: _ready_in(c, t) for t in children}
    put_id(c, b"fan")
    for t in children:
        eq(_ready_in(c, t), before[t] + 1, "copies in %s after a put into P" % t)
    c.use("default")


def _no_fanout_file(bdir, what):
    check(not os.path.exists(os.path.join(bdir, "fanout")),
          "%s: a DIR/fanout file exists: %r" % (what, sorted(os.listdir(bdir))))


@no_server
def test_children_journaled_no_side_file(binary):
    """Children registered by use and watch are C records; after kill -9
    they are back and fan out, and no DIR/fanout file was made."""
    with Policy(binary, CONF, bdir=True) as p:
        c = p.srv.client()
        c.use("P+a")
        c.watch("P+b")
        c.ignore("P+b")
        c.use("default")
        wait_for(lambda: _registered(p.bdir) == {"P+a", "P+b"}, "two C records")
        _no_fanout_file(p.bdir, "after registering")
        p.kill9()
        p.restart()
        c = p.srv.client()
        tubes = c.list_tubes()
        for t in ("P+a", "P+b"):
            check(t in tubes, "child %s after kill -9: list-tubes %r" % (t, tubes))
        _check_fanout(c, ("P+a", "P+b"))
        _no_fanout_file(p.bdir, "after the restart")


@no_server
def test_children_survive_binlog_rotation_and_compaction(binary):
    """Small files (-s 8192) and put/delete churn in another tube: the file
    that registered the children is deleted, their records live on in
    newer files, and a restart still has them."""
    with Policy(binary, CONF, "-z", "1024", "-s", "8192", bdir=True) as p:
        c = p.srv.client()
        c.use("P+a")
        c.use("P+b")
        c.use("default")
        wait_for(lambda: _registered(p.bdir) == {"P+a", "P+b"}, "two C records")
        first = max(_child_records(p.bdir))
        c.use("churn")
        body = b"x" * 600

        def churn_until_gone():
            for _ in range(40):
                j = put_id(c, body)
                c.expect("delete %d" % j, "DELETED")
            files = [n for n, _ in bu.binlog_files(p.bdir)]
            return files and min(files) > first

        wait_for(churn_until_gone, "binlog.%d (the children's first records) to be "
                 "deleted" % first, interval=0.01)
        recs = _child_records(p.bdir)
        check(recs and min(recs) > first, "the C records moved on: %r" % recs)
        eq(_registered(p.bdir), {"P+a", "P+b"}, "children the files still register")
        p.kill9()
        p.restart()
        c = p.srv.client()
        tubes = c.list_tubes()
        for t in ("P+a", "P+b"):
            check(t in tubes, "child %s after rotation and kill -9: %r" % (t, tubes))
        _check_fanout(c, ("P+a", "P+b"))
        _no_fanout_file(p.bdir, "after rotation")
        p.stop()
        bu.check_dir_clean(p.bdir, "after rotation: ")


@no_server
def test_children_let_go_stay_gone(binary):
    """A child let go (fanout off at reload) is a C record with the flag
    off: after a restart it is not registered (an empty tube, gone)."""
    with Policy(binary, CONF + "[tube Q]\nfanout = true\n", bdir=True) as p:
        c = p.srv.client()
        c.use("P+a")
        c.use("Q+b")
        c.use("default")
        wait_for(lambda: _registered(p.bdir) == {"P+a", "Q+b"}, "two C records")
        p.rewrite(CONF)
        p.reload()
        wait_for(lambda: _registered(p.bdir) == {"P+a"}, "Q+b let go in the binlog")
        p.kill9()
        p.restart()
        c = p.srv.client()
        tubes = c.list_tubes()
        check("P+a" in tubes, "P+a after the restart: %r" % tubes)
        check("Q+b" not in tubes, "Q+b came back after it was let go: %r" % tubes)


def _v1_header():
    h = b"TUBEDLOG" + struct.pack("<I", 1)
    return h + struct.pack("<I", bu.crc32c(h))


def _v1_job(jid, tube, body, created):
    payload = (b"J" + struct.pack("<QIIIBqq", jid, 0, 0, 60, 0, 0, created)
               + struct.pack("<5I", 0, 0, 0, 0, 0)
               + bytes([len(tube)]) + tube + struct.pack("<I", len(body)) + body)
    return struct.pack("<II", len(payload), bu.crc32c(payload)) + payload


@no_server
def test_old_fanout_file_migrated(binary):
    """An older version's DIR/fanout (next to its version-1 binlog file):
    read once at start, its children journaled, the file removed; a line
    that is no child's name is dropped. A later restart keeps them."""
    p = Policy(binary, CONF, bdir=True)
    with open(os.path.join(p.bdir, "fanout"), "w") as f:
        f.write("P+old\nP+two\nno plus here\n")
    # The temporary an interrupted rewrite of the old version left: removed.
    with open(os.path.join(p.bdir, "fanout.tmp"), "w") as f:
        f.write("P+half\n")
    with open(os.path.join(p.bdir, "binlog.1"), "wb") as f:
        f.write(_v1_header() + _v1_job(1, b"P", b"kept", time.time_ns()) + b"\0" * 64)
    with p:
        c = p.srv.client()
        # The listener is open before the binlog's replay (and this
        # migration) ends: the first reply comes after both.
        tubes = c.list_tubes()
        _no_fanout_file(p.bdir, "after the start")
        eq(_registered(p.bdir), {"P+old", "P+two"}, "children journaled from DIR/fanout")
        check(not os.path.exists(os.path.join(p.bdir, "fanout.tmp")),
              "the old version's fanout.tmp is still there")
        for t in ("P+old", "P+two"):
            check(t in tubes, "migrated child %s: list-tubes %r" % (t, tubes))
        check("no plus here" not in tubes, "a bad line became a tube: %r" % tubes)
        eq(present(c, 1), True, "the version-1 file's job")
        p.kill9()
        p.restart()
        c = p.srv.client()
        tubes = c.list_tubes()
        for t in ("P+old", "P+two"):
            check(t in tubes, "migrated child %s after a restart: %r" % (t, tubes))
        _check_fanout(c, ("P+old", "P+two"))
        _no_fanout_file(p.bdir, "after the restart")


@no_server
@tubed_only(EXT)
def test_replica_promoted_fans_out_to_child_without_jobs(binary):
    """A child registered on the primary, with no job in it ever, reaches
    the replica (P+live through the stream, P+early in the snapshot of a
    replica that connects later); promoted, the replica fans out to both."""
    with Cluster(binary, conf=CONF) as cl:
        p = cl.node("p")
        c = p.bs()
        c.put(b"so the snapshot has an id to scan")
        c.use("P+early")
        c.use("default")
        r = cl.node("r", replica_of=p)
        wait_caught_up(p, r)
        c.use("P+live")
        c.use("default")
        wait_caught_up(p, r)
        rc = r.bs()
        tubes = rc.list_tubes()
        for t in ("P+early", "P+live"):
            check(t in tubes, "child %s on the replica: list-tubes %r" % (t, tubes))
        eq(rc.cmd("promote", timeout=10)[:8], b"PROMOTED", "promote")
        _check_fanout(rc, ("P+early", "P+live"))
        # A restart of the promoted server keeps them (its own binlog).
        r.kill9()
        r.start(replica_of=None)
        rc = r.bs()
        _check_fanout(rc, ("P+early", "P+live"))


@no_server
@tubed_only(EXT)
def test_replica_snapshot_children_of_a_primary_without_jobs(binary):
    """A primary that never gave out a job id, with a child registered: a
    replica connecting then still gets the child in its snapshot."""
    with Cluster(binary, conf=CONF) as cl:
        p = cl.node("p")
        c = p.bs()
        c.use("P+only")
        c.use("default")
        r = cl.node("r", replica_of=p)
        wait_caught_up(p, r)
        tubes = r.bs().list_tubes()
        check("P+only" in tubes, "child on the replica: list-tubes %r" % tubes)


@no_server
@tubed_only(EXT)
def test_follow_lets_go_children_the_new_primary_lacks(binary):
    """A former primary registers P+tail after its replica was promoted;
    when it follows the new primary, the snapshot has no P+tail: it is let
    go at the end of the snapshot (and stays gone after a restart), while
    P+both, which both have, stays."""
    with Cluster(binary, conf=CONF) as cl:
        p = cl.node("p")
        r = cl.node("r", replica_of=p)
        c = p.bs()
        c.put(b"an id to scan")
        c.use("P+both")
        c.use("default")
        wait_caught_up(p, r)
        rc = r.bs()
        eq(rc.cmd("promote", timeout=10), b"PROMOTED 2", "promote")
        c.use("P+tail")
        c.use("default")
        check("P+tail" in c.list_tubes(), "P+tail on the former primary")
        eq(c.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        wait_caught_up(r, p)
        tubes = p.bs().list_tubes()
        check("P+both" in tubes, "P+both after the follow: %r" % tubes)
        check("P+tail" not in tubes, "P+tail (not on the new primary) after the "
              "follow: %r" % tubes)
        p.kill9()
        p.start(replica_of=r)
        wait_caught_up(r, p)
        tubes = p.bs().list_tubes()
        check("P+both" in tubes and "P+tail" not in tubes,
              "after a restart of the follower: %r" % tubes)
