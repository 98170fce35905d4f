"""Epochs and fencing when the network fails, not the process
(replication.md §4-§6, doc/replication.md "A network partition").

Here, on 127.0.0.1 (a stopped process is a link that gives no answer):

- A server told to `follow` a primary whose handshake answer never comes
  (the new primary stopped, or cut off) does not know that primary's
  epoch; promoted then, it must not start the epoch that primary has (the
  old code did: epoch + 1, the very epoch of the replica promoted in its
  place, so two primaries shared an epoch and fencing could not tell them
  apart). It starts epoch + 2, also after a kill -9 and restart (the
  "not heard" state is journaled). Once an answer has been heard the
  usual + 1 holds.
- A stale primary that a replica of a higher epoch reaches answers
  FENCED, says so in last-error, and, promoted later, starts above that
  epoch.

In network namespaces the test makes (failover_netns.Lab, a bridge and a
veth per node): a primary with sync_replicas = 1 cut off from both
replicas, a replica promoted on the other side, the other replica
following it, writes there, the partition healed; an asymmetric cut (the
primary's packets reach the replica, nothing comes back); two replicas
both promoted in a partition, one then following the other.
"""

import os
import socket
import threading
import time

import harness
from harness import check, eq, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, assert_converged, assert_same, body, put_many, rint,
                       snapshot, wait_caught_up, wait_for)

SERVER = "none"


def _promote(node, epoch, what):
    eq(node.bs().cmd("promote", timeout=10), b"PROMOTED %d" % epoch, "%s: promote" % what)


def _follow(node, target, what):
    c = node.bs()
    eq(c.cmd("follow %s" % target.addr, timeout=10), b"FOLLOWING", "%s: follow" % what)
    # A round trip more: the follow's position record has been written.
    node.repl()
    c.close()


def _trio(cl):
    p = cl.node("p", "-f", "0")
    r1 = cl.node("r1", "-f", "0", replica_of=p)
    put_many(p.bs(), [body("base", i) for i in range(10)])
    wait_caught_up(p, r1)
    return p, r1


@no_server
@tubed_only(EXT)
def test_demoted_primary_unanswered_follow_then_promoted(binary):
    """p (epoch 1) is told to follow r1 (promoted: epoch 2) while r1 gives
    no answer; promoted again, p must not take epoch 2."""
    with Cluster(binary) as cl:
        p, r1 = _trio(cl)
        _promote(r1, 2, "r1")
        r1.sigstop()
        _follow(p, r1, "p, r1 stopped")
        d = p.repl()
        eq((unq(d["role"]), d["epoch"], d["connected"]), ("replica", "1", "false"),
           "p after a follow that got no answer")
        _promote(p, 3, "p, its follow unanswered (r1 has epoch 2)")
        r1.sigcont()
        eq(r1.repl()["epoch"], "2", "r1's epoch")
        # The two primaries are told apart: r1 refuses a replica of p's.
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        wait_caught_up(p, r2)
        c2 = r2.bs()
        eq(c2.cmd("follow %s" % r1.addr, timeout=10), b"FOLLOWING", "r2: follow r1")
        wait_for(lambda: "epoch" in unq(r2.repl()["last-error"]).lower(),
                 lambda: "r2 to refuse r1 (epoch 2 below its 3): %r" % r2.repl())
        eq((r2.repl()["connected"], r2.repl()["epoch"]), ("false", "3"),
           "r2 told to follow r1")


@no_server
@tubed_only(EXT)
def test_unanswered_follow_survives_a_restart(binary):
    """The same after kill -9: the restarted server, still without an
    answer, knows it never heard its new primary's epoch."""
    with Cluster(binary) as cl:
        p, r1 = _trio(cl)
        _promote(r1, 2, "r1")
        r1.sigstop()
        _follow(p, r1, "p, r1 stopped")
        p.kill9()
        p.restart(replica_of=r1)
        eq(p.repl()["epoch"], "1", "p's epoch after the restart")
        _promote(p, 3, "p restarted, its follow unanswered")
        p.kill9()
        p.restart(replica_of=None)
        eq(p.repl()["epoch"], "3", "p's epoch after a restart as a primary")


@no_server
@tubed_only(EXT)
def test_replica_switching_to_an_unanswering_primary(binary):
    """A replica told to follow r1 (promoted) that never hears r1's answer,
    promoted, starts above r1's epoch too."""
    with Cluster(binary) as cl:
        p, r1 = _trio(cl)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        wait_caught_up(p, r2)
        _promote(r1, 2, "r1")
        r1.sigstop()
        _follow(r2, r1, "r2, r1 stopped")
        _promote(r2, 3, "r2, its follow unanswered")
        r1.sigcont()


@no_server
@tubed_only(EXT)
def test_answered_follow_then_promoted_is_plus_one(binary):
    """Once the new primary's answer came, a promotion is its epoch + 1:
    also for two replicas both promoted in a partition (equal epochs),
    when one then follows the other."""
    with Cluster(binary) as cl:
        p, r1 = _trio(cl)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        wait_caught_up(p, r1, r2)
        p.kill9()
        _promote(r1, 2, "r1")
        _promote(r2, 2, "r2 (both promoted)")
        c1 = r1.bs()
        c1.use("r1side")
        put_many(c1, [body("r1", i) for i in range(5)])
        c2 = r2.bs()
        c2.use("r2side")
        put_many(c2, [body("r2", i) for i in range(7)])
        _follow(r2, r1, "r2 follows r1 (same epoch)")
        wait_caught_up(r1, r2)
        assert_converged(r1, r2, "r2 after following r1")
        d = r2.repl()
        eq(d["epoch"], "2", "r2's epoch after following r1 (equal epochs)")
        check(rint(d, "discarded-records") >= 7,
              "r2's 7 puts of its own epoch discarded: %s" % d["discarded-records"])
        _promote(r2, 3, "r2 after following r1 (the answer heard)")


@no_server
@tubed_only(EXT)
def test_partial_resync_answer_counts_as_heard(binary):
    """A former primary without a tail goes on partially (CONTINUING):
    that answer names the new primary's epoch too; promoted later, + 1,
    also after a kill -9 and a restart during which r1 does not answer
    (what it heard is journaled)."""
    with Cluster(binary) as cl:
        p, r1 = _trio(cl)
        _promote(r1, 2, "r1")
        _follow(p, r1, "p, no tail")
        wait_caught_up(r1, p)
        eq(rint(p.repl(), "partial-resyncs"), 1, "p went on partially")
        r1.sigstop()
        p.kill9()
        p.restart(replica_of=r1)
        _promote(p, 3, "p, having heard r1's epoch 2")
        r1.sigcont()


@no_server
@tubed_only(EXT)
def test_stale_primary_learns_a_higher_epoch(binary):
    """A replica at epoch 3 reaching the old primary (epoch 1) is FENCED;
    the old primary shows it is stale, and its own promotion later starts
    above 3."""
    with Cluster(binary) as cl:
        p, r1 = _trio(cl)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        wait_caught_up(p, r1, r2)
        _promote(r1, 2, "r1")
        _follow(r2, r1, "r2")
        wait_caught_up(r1, r2)
        _promote(r2, 3, "r2 (following r1)")
        r3 = cl.node("r3", "-f", "0", replica_of=r2)
        wait_caught_up(r2, r3)
        _follow(r3, p, "r3 to the stale primary")
        wait_for(lambda: "stale" in unq(p.repl()["last-error"]),
                 lambda: "p's last-error to say it is stale: %r" % p.repl())
        check("3" in unq(p.repl()["last-error"]), "p's last-error names the epoch: %r"
              % p.repl()["last-error"])
        eq(r3.repl()["connected"], "false", "r3 never follows p")
        r2.sigstop()
        _follow(p, r2, "p to r2 (stopped)")
        _promote(p, 4, "p, which had heard of epoch 3")
        r2.sigcont()


@no_server
@tubed_only(EXT)
def test_replicas_down_within_sync_replicas(binary):
    """doc/replication.md: "With M replicas in all, M - N of them may be
    down without replies waiting" (doc/failover.md said replies wait
    with sync_replicas >= the replicas remaining: 1 of 2 down with
    sync_replicas 1 would wait; it does not). A stopped replica (it reads
    nothing, acknowledges nothing) stands for one cut off."""
    with Cluster(binary, "sync_replicas = 1\n") as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        wait_caught_up(p, r1, r2)
        r2.sigstop()
        c = p.bs()
        ids = put_many(c, [body("one-down", i) for i in range(20)])
        eq(len(ids), 20, "puts acknowledged with 1 of 2 replicas stopped, N = 1")
        r1.sigstop()
        c.send(b"put 0 0 60 4\r\nwait\r\n")
        wait_for(lambda: rint(p.repl(), "waiting-replies") == 1,
                 lambda: "the put to wait with both replicas stopped: %r" % p.repl())
        r1.sigcont()
        line = c.read_line(timeout=30)
        check(line.startswith(b"INSERTED "), "the held put once r1 is back: %r" % line)
        r2.sigcont()
        wait_caught_up(p, r1, r2)


# ------------------------------------------------- network namespaces

PORT = 11300


def _need_netns():
    import failover_netns
    why = failover_netns.skip_reason()
    if why:
        print("test_replication_fence: SKIP: %s" % why, flush=True)
        raise harness.Skip(why)
    return failover_netns


class Net:
    """One tubed per node of a failover_netns.Lab (-f 0, sync_replicas 1),
    listening on the node's address; clients from the hub (the network
    the partitions cut) or from inside a node (its loopback: where a
    cluster manager runs, so promote and follow are allowed)."""

    def __init__(self, binary, lab, tmp):
        self.binary = binary
        self.lab = lab
        self.tmp = tmp
        self.procs = {}

    def addr(self, i):
        return "%s:%d" % (self.lab.addr(i), PORT)

    def start(self, i, replica_of=None):
        d = os.path.join(self.tmp, "n%d" % i)
        os.makedirs(os.path.join(d, "b"), exist_ok=True)
        argv = [self.binary, "-l", "0.0.0.0", "-p", str(PORT), "-b",
                os.path.join(d, "b"), "-f", "0", "--sync-replicas", "1"]
        if replica_of is not None:
            argv += ["--replica-of", self.addr(replica_of)]
        p = self.procs[i] = self.lab.start(i, argv, "tubed")
        wait_for(lambda: self.repl(i) is not None or not p.alive(),
                 "tubed on node %d to answer" % i)
        check(p.alive(), "tubed on node %d exited: %s" % (i, p.output()[-800:]))

    def c(self, i, local=False):
        if local:
            return self.lab.connect("127.0.0.1", PORT, node=i)
        return self.lab.connect(self.lab.addr(i), PORT)

    def repl(self, i):
        """stats-replication of node i (asked on its loopback), or None."""
        try:
            c = self.c(i, local=True)
        except OSError:
            return None
        try:
            line, body = c.cmd_body("stats-replication")
            if not line.startswith(b"OK"):
                return None
            return {k: unq(v) for k, v in harness.parse_yaml_dict(body).items()}
        except (OSError, harness.TestFailure):
            return None
        finally:
            c.close()

    def admin(self, i, line):
        c = self.c(i, local=True)
        try:
            return c.cmd(line, timeout=10)
        finally:
            c.close()

    def caught_up(self, p, r, timeout=60):
        def pred():
            a, b = self.repl(p), self.repl(r)
            return (a and b and b["connected"] == "true" and b["lag-records"] == "0"
                    and b["position"] == a["position"] and b["role"] == "replica")
        wait_for(pred, lambda: "node %d to catch up with node %d: %r %r"
                 % (r, p, self.repl(p), self.repl(r)), timeout=timeout)

    def jobs(self, i):
        c = self.c(i, local=True)
        try:
            return snapshot(c)
        finally:
            c.close()


def _send_puts(c, bodies):
    c.send(b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (len(b), b) for b in bodies))


def _bodies(snap):
    return {j.body for j in snap.values()}


@no_server
@tubed_only(EXT)
def test_partition_primary_cut_off_from_both_replicas(binary):
    """P (sync_replicas 1) cut off from R1 and R2; R1 promoted, R2 follows
    it, writes go on there; healed. P acknowledged nothing while cut off,
    learns it is stale from a replica of epoch 2 that reaches it, follows
    R1, discards its tail (counted) and every acknowledged job is on R1."""
    nsmod = _need_netns()
    import tempfile
    import shutil
    tmp = tempfile.mkdtemp(prefix="tubed-fence-")
    try:
        with nsmod.Lab(tmp, 3) as lab:
            net = Net(binary, lab, tmp)
            net.start(0)
            net.start(1, replica_of=0)
            net.start(2, replica_of=0)
            c0 = net.c(0)
            acked = put_many(c0, [body("base", i) for i in range(20)])
            net.caught_up(0, 1)
            net.caught_up(0, 2)
            lab.isolate(0)
            # A producer on P's own host: P takes its puts and holds every reply.
            producer = net.c(0, local=True)
            tail = [body("tail", i) for i in range(10)]
            _send_puts(producer, tail)
            wait_for(lambda: (net.repl(0) or {}).get("waiting-replies") == "10",
                     lambda: "P to hold the 10 replies: %r" % net.repl(0))
            eq(net.admin(1, "promote"), b"PROMOTED 2", "promote R1")
            eq(net.admin(2, "follow %s" % net.addr(1)), b"FOLLOWING", "R2 follows R1")
            c1 = net.c(1)
            new = put_many(c1, [body("new", i) for i in range(15)])
            net.caught_up(1, 2)
            lab.rejoin(0)
            # Healed, P is still a primary of epoch 1 that nobody follows.
            d0 = net.repl(0)
            eq((d0["role"], d0["epoch"], d0["waiting-replies"]), ("primary", "1", "10"),
               "P after the heal")
            # A replica of epoch 2 that reaches P (a floating address still
            # pointing at it, say) refuses it, and P learns it is stale.
            eq(net.admin(2, "follow %s" % net.addr(0)), b"FOLLOWING", "R2 to P")
            wait_for(lambda: "stale" in (net.repl(0) or {}).get("last-error", ""),
                     lambda: "P's last-error to say it is stale: %r" % net.repl(0))
            wait_for(lambda: "epoch" in (net.repl(2) or {}).get("last-error", ""),
                     lambda: "R2's last-error to name the epoch: %r" % net.repl(2))
            d2 = net.repl(2)
            eq((d2["connected"], d2["epoch"]), ("false", "2"), "R2 told to follow P")
            eq(net.repl(0)["waiting-replies"], "10", "P's held replies (nothing acked)")
            eq(net.admin(2, "follow %s" % net.addr(1)), b"FOLLOWING", "R2 back to R1")
            # P follows R1: its held replies are withdrawn, never sent.
            eq(net.admin(0, "follow %s" % net.addr(1)), b"FOLLOWING", "P follows R1")
            producer.expect_closed()
            net.caught_up(1, 0)
            net.caught_up(1, 2)
            a = net.jobs(1)
            assert_same(a, net.jobs(0), "P after following R1", "R1", "P")
            assert_same(a, net.jobs(2), "R2", "R1", "R2")
            missing = [j for j in acked + new if j not in a]
            eq(missing, [], "acknowledged jobs missing on R1")
            eq(_bodies(a) & set(tail), set(), "P's unacknowledged tail on R1")
            d0 = net.repl(0)
            eq((d0["role"], d0["epoch"], d0["discarded-records"]), ("replica", "2", "10"),
               "P: role, epoch, discarded-records (its 10 puts)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _asymmetric(binary, lab, tmp):
    """P and R1 (sync_replicas 1) with 10 acknowledged jobs, then R1 can
    no longer send to P (a blackhole route on R1's side): P's records
    reach R1, R1's acknowledgements never reach P. 5 puts to P: P holds
    every reply, R1 has the records. Returns (net, producer, acked, held
    bodies)."""
    net = Net(binary, lab, tmp)
    net.start(0)
    net.start(1, replica_of=0)
    acked = put_many(net.c(0), [body("base", i) for i in range(10)])
    net.caught_up(0, 1)
    lab.run(1, "ip", "route", "add", "blackhole", lab.addr(0) + "/32")
    producer = net.c(0)
    held = [body("held", i) for i in range(5)]
    _send_puts(producer, held)
    wait_for(lambda: (net.repl(0) or {}).get("waiting-replies") == "5",
             lambda: "P to hold the 5 replies: %r" % net.repl(0))
    # R1 has them (it received and wrote them; its ACK cannot reach P).
    wait_for(lambda: (net.repl(1) or {}).get("position") == net.repl(0)["position"],
             lambda: "R1 to receive P's records: %r %r" % (net.repl(0), net.repl(1)))
    eq(net.repl(0)["waiting-replies"], "5", "P's held replies: R1's acks never arrive")
    return net, producer, acked, held


def _lab(binary, nodes, body_fn):
    nsmod = _need_netns()
    import tempfile
    import shutil
    tmp = tempfile.mkdtemp(prefix="tubed-fence-")
    try:
        with nsmod.Lab(tmp, nodes) as lab:
            body_fn(Net(binary, lab, tmp), lab, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_asymmetric_cut_acknowledges_nothing_then_heals(binary):
    """P can send, cannot receive: it acknowledges nothing; healed, R1's
    acknowledgements arrive and the held replies go."""
    def run(_net, lab, tmp):
        net, producer, acked, held = _asymmetric(binary, lab, tmp)
        lab.run(1, "ip", "route", "del", "blackhole", lab.addr(0) + "/32")
        for i in range(5):
            line = producer.read_line(timeout=60)
            check(line.startswith(b"INSERTED "), "held put %d after the heal: %r" % (i, line))
        net.caught_up(0, 1)
        assert_same(net.jobs(0), net.jobs(1), "after the heal", "P", "R1")
    _lab(binary, 2, run)


@no_server
@tubed_only(EXT)
def test_asymmetric_cut_promote_then_follow_without_answer(binary):
    """The cut as above; R1 promoted (epoch 2); P told to follow R1, whose
    answers cannot reach it (the known gap, over a network): P stays at
    epoch 1 and unconnected; its held replies are withdrawn unsent.
    Promoted again before any answer, P starts epoch 3, not R1's 2; healed,
    R1 (now the stale one) refuses nothing it should: told to follow P it
    converges."""
    def run(_net, lab, tmp):
        net, producer, acked, held = _asymmetric(binary, lab, tmp)
        eq(net.admin(1, "promote"), b"PROMOTED 2", "promote R1")
        eq(net.admin(0, "follow %s" % net.addr(1)), b"FOLLOWING", "P follows R1")
        producer.expect_closed()
        d0 = net.repl(0)
        eq((d0["role"], d0["epoch"], d0["connected"]), ("replica", "1", "false"),
           "P after a follow whose answer cannot come")
        eq(net.admin(0, "promote"), b"PROMOTED 3", "P promoted before hearing R1")
        c0 = net.c(0)
        c0.use("p3")
        # sync_replicas 1 and no replica: P's own puts wait; one is sent.
        _send_puts(c0, [b"p3-put"])
        lab.run(1, "ip", "route", "del", "blackhole", lab.addr(0) + "/32")
        eq(net.admin(1, "follow %s" % net.addr(0)), b"FOLLOWING", "R1 follows P")
        line = c0.read_line(timeout=60)
        check(line.startswith(b"INSERTED "), "P's put once R1 follows: %r" % line)
        net.caught_up(0, 1)
        a = net.jobs(0)
        assert_same(a, net.jobs(1), "R1 after following P", "P", "R1")
        missing = [j for j in acked if j not in a]
        eq(missing, [], "acknowledged jobs missing")
        d1 = net.repl(1)
        eq((d1["role"], d1["epoch"]), ("replica", "3"), "R1: role, epoch")
    _lab(binary, 2, run)
