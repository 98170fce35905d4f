"""replication.md claims a black-box audit found without a test of their
own (each passed as written).

- §3: "every reply that tubed holds until its binlog record is durable
  under -f 0 (INSERTED, DELETED, RELEASED, BURIED, KICKED, FLUSHED, MOVED,
  memcache STORED, ...) is also held until N replicas have written that
  record": the suite held INSERTED, DELETED and STORED only. Here every
  other named reply (and memcache's taking get, flush and flush_all: a
  take, a flush are journaled) is silent while the only replica is
  stopped, reads on other connections are answered meanwhile, and each
  arrives, in order, once the replica goes on.
- §3: "A reload that lowers sync_replicas releases the replies that the
  new value no longer holds, at once": the suite lowered 1 to 0. Here 2
  to 1 with one caught-up replica releases at once, while 2 to 1 with
  that replica stopped still holds (the new value still holds it), until
  the replica goes on.
- §5: "stats-binlog is unchanged": its keys, in extensions.md's order, on
  a primary, on its replica, on a promoted replica and on a primary told
  to follow.
- §5: `primary` shows a host name as given (from --replica-of and from
  follow), and the replica follows it.
"""

import re

from harness import check, eq, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, assert_converged, rint, wait_caught_up,
                       wait_for)

SERVER = "none"

SYNC1 = "sync_replicas = 1\n"

BINLOG_KEYS = ["enabled", "healthy", "last-error", "files", "bytes-on-disk",
               "live-bytes", "oldest-file", "oldest-file-pinned-by",
               "records-written", "records-migrated", "compactions",
               "fsync-mode", "last-fsync-ms-ago", "spilled-jobs",
               "spilled-bytes"]


def _reads_answer(p, what):
    c = p.bs()
    c.timeout = 5.0
    check("current-jobs-ready" in c.stats(), "%s: stats on another connection" % what)
    c.expect("list-tube-used", "USING default")
    c.close()


def _buried(c, tube, data):
    """A job put into `tube` and buried by c (watching only that tube)."""
    c.use(tube)
    c.watch(tube)
    c.ignore("default")
    jid = c.put(data)
    eq(c.reserve(timeout=0)[0], jid, "reserve of the job to bury in %s" % tube)
    c.expect("bury %d 0" % jid, "BURIED")
    return jid


@no_server
@tubed_only(EXT)
def test_every_durable_reply_waits_for_the_replica(binary):
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        setup = p.bs()
        # Jobs the held commands act on, each in a tube of its own so that
        # no command changes what another one finds.
        rel = p.bs()
        rel.use("rel")
        rel.watch("rel")
        rel.ignore("default")
        rel_id = rel.put(b"to release")
        eq(rel.reserve()[0], rel_id, "reserve the job to release")
        bur = p.bs()
        bur.use("bur")
        bur.watch("bur")
        bur.ignore("default")
        bur_id = bur.put(b"to bury")
        eq(bur.reserve()[0], bur_id, "reserve the job to bury")
        _buried(p.bs(), "kick", b"to kick")
        kj_id = _buried(p.bs(), "kickjob", b"to kick-job")
        setup.use("flush")
        setup.put(b"flushed 1")
        setup.put(b"flushed 2")
        setup.use("move")
        mv_id = setup.put(b"to move")
        m = p.mc()
        m.store("take", b"taken")
        m.store("mflush", b"flushed by memcache")
        wait_caught_up(p, r)

        r.sigstop()
        held = []

        def send(c, data, expected, what):
            c.send(data)
            held.append((c, expected, what))

        send(rel, b"release %d 0 0\r\n" % rel_id, [b"RELEASED"], "release")
        send(bur, b"bury %d 0\r\n" % bur_id, [b"BURIED"], "bury")
        k = p.bs()
        k.use("kick")
        send(k, b"kick 1\r\n", [b"KICKED 1"], "kick")
        send(p.bs(), b"kick-job %d\r\n" % kj_id, [b"KICKED"], "kick-job")
        send(p.bs(), b"flush-tube flush\r\n", [b"FLUSHED 2"], "flush-tube")
        send(p.bs(), b"move-job %d moved\r\n" % mv_id, [b"MOVED"], "move-job")
        send(p.mc(), b"set mset 0 0 4\r\nheld\r\n", [b"STORED"], "memcache set")
        send(p.mc(), b"get take\r\n", [b"VALUE take 0 5", b"taken", b"END"],
             "memcache get (a take)")
        send(p.mc(), b"flush mflush\r\n", [b"END"], "memcache flush")
        for c, _, what in held:
            c.expect_silence(1.2 if what == "release" else 0.05)
        wait_for(lambda: rint(p.repl(), "waiting-replies") == len(held),
                 "waiting-replies = %d (one per held reply)" % len(held))
        _reads_answer(p, "with the replica stopped")
        # The changes are applied on the primary at once.
        c = p.bs()
        eq(c.stats_job(rel_id)["state"], "ready", "the released job on the primary")
        eq(c.stats_job(bur_id)["state"], "buried", "the buried job on the primary")
        eq(c.stats_job(kj_id)["state"], "ready", "the kick-job'd job on the primary")
        eq(unq(c.stats_job(mv_id)["tube"]), "moved", "the moved job's tube on the primary")

        r.sigcont()
        for c, expected, what in held:
            got = [c.read_line(timeout=20) for _ in expected]
            eq(got, expected, "%s once the replica went on" % what)
        wait_caught_up(p, r)
        assert_converged(p, r, "after the held replies")
        eq(rint(p.repl(), "waiting-replies"), 0, "waiting-replies at the end")


@no_server
@tubed_only(EXT)
def test_memcache_flush_all_waits_for_the_replica(binary):
    with Cluster(binary, SYNC1) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        m = p.mc()
        m.store("a", b"one")
        p.bs().put(b"two")
        wait_caught_up(p, r)
        r.sigstop()
        m.send(b"flush_all\r\n")
        m.expect_silence(1.2)
        _reads_answer(p, "flush_all held")
        r.sigcont()
        eq(m.read_line(timeout=20), b"Flushed all queues.", "flush_all once the "
           "replica went on")
        wait_caught_up(p, r)
        assert_converged(p, r, "after flush_all")


@no_server
@tubed_only(EXT)
def test_reload_lowering_two_to_one(binary):
    with Cluster(binary, "sync_replicas = 2\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c = p.bs()
        c.send(b"put 0 0 60 4\r\nheld\r\n")
        c.expect_silence(1.0)
        eq(rint(p.repl(), "caught-up-replicas"), 1, "caught-up-replicas with the "
           "put held for a second replica")
        p.reload("sync_replicas = 1\n")
        line = c.read_line(timeout=2)
        check(re.fullmatch(rb"INSERTED \d+", line) is not None,
              "the held INSERTED at once after the reload 2 -> 1 (the one "
              "replica has it): %r" % line)
        eq(rint(p.repl(), "waiting-replies"), 0, "waiting-replies after it")

        # 2 -> 1 again, but the one replica is stopped: 1 still holds it.
        p.reload("sync_replicas = 2\n")
        r.sigstop()
        c.send(b"put 0 0 60 5\r\nheld2\r\n")
        c.expect_silence(1.0)
        p.reload("sync_replicas = 1\n")
        c.expect_silence(1.0)
        eq(rint(p.repl(), "waiting-replies"), 1, "waiting-replies after the reload "
           "to 1 with the replica stopped")
        r.sigcont()
        line = c.read_line(timeout=20)
        check(re.fullmatch(rb"INSERTED \d+", line) is not None,
              "the INSERTED once the replica went on: %r" % line)
        wait_caught_up(p, r)
        assert_converged(p, r, "after the reloads")


def _binlog_keys(n):
    line, data = n.bs().cmd_body("stats-binlog")
    check(line.startswith(b"OK ") and data, "stats-binlog on %s: %r" % (n.name, line))
    keys = [l.split(":", 1)[0] for l in data.decode().split("\n")[1:] if l]
    return keys


@no_server
@tubed_only(EXT)
def test_stats_binlog_is_unchanged(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        p.bs().put(b"x")
        wait_caught_up(p, r)
        eq(_binlog_keys(p), BINLOG_KEYS, "stats-binlog keys on a primary")
        eq(_binlog_keys(r), BINLOG_KEYS, "stats-binlog keys on a replica")
        eq(r.bs().cmd("promote"), b"PROMOTED 2", "promote")
        eq(p.bs().cmd("follow %s" % r.addr), b"FOLLOWING", "follow")
        wait_caught_up(r, p)
        eq(_binlog_keys(r), BINLOG_KEYS, "stats-binlog keys on a promoted replica")
        eq(_binlog_keys(p), BINLOG_KEYS, "stats-binlog keys on a former primary")


@no_server
@tubed_only(EXT)
def test_primary_named_by_a_host_name_is_shown_as_given(binary):
    """§5: `primary` is "a replica's primary as given": a host name stays
    the name (not the address it resolved to), from --replica-of and from
    follow alike, and the replica follows it."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        named = "localhost:%d" % p.port
        r = cl.node("r", "-f", "0", replica_of=named)
        jid = p.bs().put(b"by name")
        wait_caught_up(p, r)
        eq(unq(r.repl()["primary"]), named, "primary from --replica-of a name")
        eq(r.admin().peek("peek %d" % jid), (jid, b"by name"), "the job on the replica")
        s = cl.node("s", "-f", "0", replica_of=p)
        wait_caught_up(p, s)
        eq(s.bs().cmd("follow %s" % named, timeout=10), b"FOLLOWING", "follow a name")
        wait_for(lambda: unq(s.repl()["primary"]) == named, "primary after follow")
        jid = p.bs().put(b"after the follow")
        wait_caught_up(p, s)
        eq(s.admin().peek("peek %d" % jid), (jid, b"after the follow"),
           "a later job on the replica that followed a name")
        assert_converged(p, s, "a replica following a host name")
