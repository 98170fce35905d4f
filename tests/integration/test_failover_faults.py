"""Faults beyond a clean kill, on a primary and two replicas with
sync_replicas = 1 and -f 0 (replication.md §6.2, §7; doc/failover.md).

Each round: producers and a worker run on the primary and write every
reply to the ledger (failover_ledger.py); at a random moment one fault:

- kill9      kill -9 of the primary;
- sigstop    SIGSTOP of the primary (a pause, not a death: it comes back
             later believing it is still the primary);
- cut        the links between the primary and both replicas go silent (a
             relay the test put between them stops forwarding, closes
             nothing), the primary keeps running with its clients;
- snapshot   a replica is restarted (kill -9) in the middle of its
             snapshot, twice, through a slowed link, and the primary is
             killed while the replica is still mid-snapshot.

Then, as a cluster manager would: the replica with the highest position
is promoted, the other follows it, and the old primary returns (restarted
as a primary from its own directory, or resumed, or still running cut
off), is probed with a put that it must not acknowledge, and is told to
follow.  The ledger check on the new primary: no acknowledged job lost, no
acknowledged delete back, no job no one sent, the cut-off primary
acknowledged nothing after the cut, exactly one node takes writes once
settled; and every node converges to the new primary.  Every round the
checker proves itself on planted faults (failover_ledger.plant_and_check).

The short form (one round of each fault) runs in CI;
TUBED_FAILOVER_ROUNDS=N runs N cycles of the four, TUBED_FAILOVER_SEED
fixes the random seed; figures go to $TUBED_REPL_REPORT.
"""

import os
import random
import re
import time

import harness
from harness import TestFailure, check, eq, fail, no_server, slow, tubed_only
import failover_ledger as fl
from repl_util import (Cluster, assert_converged, report, rint, snapshot,
                       wait_caught_up, wait_for)

SERVER = "none"
EXT = "failover is a tubed extension"
CYCLES = int(os.environ.get("TUBED_FAILOVER_ROUNDS", "1"))
FAULTS = ("kill9", "sigstop", "cut", "snapshot")
CONF = "sync_replicas = 1\n"


class Trio:
    def __init__(self, cl):
        self.cl = cl
        self.links = {}
        a = cl.node("a", "-f", "0", memcache=False, metrics=False)
        self.primary = a
        self.nodes = [a]
        for name in ("b", "c"):
            link = fl.Link(a.port)
            n = cl.node(name, "-f", "0", replica_of=link.addr, memcache=False,
                        metrics=False)
            self.links[name] = link
            self.nodes.append(n)
        wait_caught_up(a, *self.replicas())

    def replicas(self):
        return [n for n in self.nodes if n is not self.primary]

    def relink(self, n, primary, rate=None):
        """A fresh link from n to primary; returns its address."""
        old = self.links.pop(n.name, None)
        if old:
            old.close()
        link = fl.Link(primary.port, rate=rate)
        self.links[n.name] = link
        return link.addr

    def follow(self, n, primary):
        addr = self.relink(n, primary)
        eq(n.admin().cmd("follow %s" % addr, timeout=10), b"FOLLOWING",
           "follow on %s" % n.name)
        n.replica_of = addr      # a restart keeps following it

    def close(self):
        for link in self.links.values():
            link.close()


def _view(node):
    c = node.bs(timeout=30)
    try:
        return {j: job.body for j, job in snapshot(c).items()}
    finally:
        c.close()


def _probe_put(node):
    """A put on node; (client, body) to read the outcome later."""
    c = node.bs(timeout=10)
    body = b"<probe-%s-%d>" % (node.name.encode(), time.monotonic_ns())
    c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    return c, body


def _probe_outcome(c, ledger, node, body, wait):
    """What the probe got within `wait` seconds: 'INSERTED' (then written
    to the ledger as an ack by node), 'held', or the reply/close."""
    ledger.sent.add(body)
    try:
        if not c.has_data(wait):
            return "held"
        line = c.read_line()
    except (OSError, TestFailure) as e:
        return "closed (%s)" % str(e)[:60]
    m = re.fullmatch(rb"INSERTED (\d+)", line)
    if m:
        ledger.acked[int(m.group(1))] = (body, node.name, time.monotonic())
        return "INSERTED"
    return line.decode("latin-1")


def _bulk(node, ledger, n, size, rnd):
    c = node.bs(timeout=30)
    c.use("F")
    for i in range(n):
        b = ledger.body(rnd) + b"x" * size
        ledger.sent.add(b)
        ledger.acked[c.put(b, pri=9)] = (b, node.name, time.monotonic())
    c.close()


def _mid_snapshot(n):
    """True while n receives a snapshot (its log says it began, not ended)."""
    text = n.stderr()
    began = text.rfind("receiving a snapshot")
    return began >= 0 and text.rfind("complete (position", began) < 0


def _fault(kind, trio, ledger, rnd, figures):
    """Run clients, inject the fault; returns (cutoffs, old primary's state)."""
    p = trio.primary
    if kind == "snapshot":
        # Enough bytes that the slowed snapshot takes seconds.
        _bulk(p, ledger, 120, 8000, rnd)
        victim = trio.replicas()[rnd.randrange(2)]
        for attempt in range(2):
            victim.kill9()
            # Without its replication id it cannot go on from its position
            # (a partial resync): it asks for a snapshot.
            try:
                os.unlink(os.path.join(victim.bdir, "replication-id"))
            except FileNotFoundError:
                pass
            addr = trio.relink(victim, p, rate=150000)
            victim.start(replica_of=addr)
            wait_for(lambda: _mid_snapshot(victim),
                     "%s to be receiving a snapshot" % victim.name, timeout=20)
            figures.append("%s restarted mid-snapshot (attempt %d), position %s"
                           % (victim.name, attempt + 1, victim.repl()["position"]))
    clients = fl.Clients(p, ledger, rnd)
    time.sleep(rnd.uniform(0.3, 1.5))
    cutoffs = []
    if kind in ("kill9", "snapshot"):
        p.kill9()
        state = "dead"
    elif kind == "sigstop":
        p.sigstop()
        cutoffs.append((p.name, time.monotonic()))
        state = "stopped"
    elif kind == "cut":
        for r in trio.replicas():
            trio.links[r.name].cut()
        cutoffs.append((p.name, time.monotonic()))
        time.sleep(rnd.uniform(0.5, 1.5))     # its clients keep trying
        state = "cut"
    else:
        fail("unknown fault %r" % kind)
    clients.stop()
    check(not clients.errors, "%s: unexpected replies: %s" % (kind, clients.errors[:5]))
    return cutoffs, state


def _round(trio, ledger, rnd, kind, n, caught, figures):
    before = len(ledger.acked), len(ledger.deleted)
    old = trio.primary
    cutoffs, state = _fault(kind, trio, ledger, rnd, figures)
    acks = len(ledger.acked) - before[0], len(ledger.deleted) - before[1]
    check(acks[0] > 0, "round %d (%s): no put acknowledged" % (n, kind))
    # The cluster manager's choice: the replica with the highest position.
    reps = trio.replicas()
    pos = {r.name: rint(r.repl(), "position") for r in reps}
    best = max(pos.values())
    new = rnd.choice([r for r in reps if pos[r.name] == best])
    if kind == "snapshot":
        check(all(pos[r.name] > 0 for r in reps if r is new),
              "round %d: promoted %s at position 0" % (n, new.name))
    epoch = rint(new.repl(), "epoch")
    t0 = time.monotonic()
    eq(new.admin().cmd("promote", timeout=10), b"PROMOTED %d" % (epoch + 1),
       "round %d: promote %s" % (n, new.name))
    trio.primary = new
    others = [r for r in reps if r is not new]
    for r in others:
        trio.follow(r, new)
    c = new.bs(timeout=30)
    body = ledger.body(rnd)
    ledger.sent.add(body)
    ledger.acked[c.put(body)] = (body, new.name, time.monotonic())
    figures.append("round %d (%s): promote to first acknowledged put %.0f ms"
                   % (n, kind, (time.monotonic() - t0) * 1000))
    c.close()
    # The old primary returns, believing it is the primary.
    if state == "dead":
        old.start(replica_of=None)
        cutoffs.append((old.name, time.monotonic()))
    elif state == "stopped":
        old.sigcont()
    eq(old.repl()["role"].strip('"'), "primary", "round %d: %s back" % (n, old.name))
    probe, pbody = _probe_put(old)
    outcome = _probe_outcome(probe, ledger, old, pbody, 1.5)
    check(outcome == "held", "round %d: the returning old primary %s answered "
          "a put: %s" % (n, old.name, outcome))
    trio.follow(old, new)
    # The held probe must never be acknowledged now (its job is discarded).
    outcome = _probe_outcome(probe, ledger, old, pbody, 1.0)
    probe.close()
    check(outcome != "INSERTED", "round %d: %s acknowledged the held put after "
          "it followed %s" % (n, old.name, new.name))
    for f in others + [old]:
        trio.links[f.name].open.set()
    wait_caught_up(new, *(others + [old]))
    # Settled: who takes writes?
    takers = set()
    for node in trio.nodes:
        pc, pb = _probe_put(node)
        if _probe_outcome(pc, ledger, node, pb, 3.0) == "INSERTED":
            takers.add(node.name)
        pc.close()
    wait_caught_up(new, *(others + [old]))
    view = _view(new)
    problems = fl.check(view, ledger, cutoffs, takers)
    check(not problems, "round %d (%s): positions %s, promoted %s, %d problem(s): %s"
          % (n, kind, pos, new.name, len(problems), "; ".join(problems[:8])))
    fl.plant_and_check(view, ledger, cutoffs, takers, rnd, caught)
    for f in others + [old]:
        assert_converged(new, f, "round %d: %s following %s" % (n, f.name, new.name))
    figures.append("round %d (%s): %d puts, %d deletes acknowledged; positions %s; "
                   "promoted %s; %d jobs" % (n, kind, acks[0], acks[1], pos,
                                             new.name, len(view)))


@slow
@no_server
@tubed_only(EXT)
def test_failover_faults(binary):
    seed = int(os.environ.get("TUBED_FAILOVER_SEED", str(random.randrange(10 ** 6))))
    rnd = random.Random(seed)
    ledger = fl.Ledger()
    caught, figures = {}, []
    t0 = time.monotonic()
    with Cluster(binary, CONF) as cl:
        trio = Trio(cl)
        try:
            n = 0
            for _ in range(CYCLES):
                for kind in FAULTS:
                    n += 1
                    try:
                        _round(trio, ledger, rnd, kind, n, caught, figures)
                    except TestFailure as e:
                        raise TestFailure("seed %d: %s" % (seed, e)) from e
                    if CYCLES > 1:              # progress of a long run
                        report("failover progress: round %d done at %.0f s"
                               % (n, time.monotonic() - t0))
        finally:
            trio.close()
    report("failover faults: %d rounds (%d cycles, seed %d) in %.1f s, %d puts and "
           "%d deletes acknowledged; planted faults caught: %s"
           % (n, CYCLES, seed, time.monotonic() - t0, len(ledger.acked),
              len(ledger.deleted), caught))
    for f in figures:
        report("failover " + f)


@no_server
@tubed_only(EXT)
def test_failover_checker_sees_unsafe_promotion(binary):
    """The checker against a real loss: the cut round, but the replica
    promoted is one that was cut off from the start (it lacks every
    acknowledged job of the round).  The checker must report them lost."""
    rnd = random.Random(5)
    ledger = fl.Ledger()
    with Cluster(binary, CONF) as cl:
        trio = Trio(cl)
        try:
            p = trio.primary
            behind, ahead = trio.replicas()
            trio.links[behind.name].cut()
            clients = fl.Clients(p, ledger, rnd)
            wait_for(lambda: len(ledger.acked) >= 20, "20 acknowledged puts")
            p.kill9()
            clients.stop()
            eq(behind.admin().cmd("promote", timeout=10)[:9], b"PROMOTED ",
               "promote of the replica that was cut off")
            problems = fl.check(_view(behind), ledger)
            lost = [x for x in problems if x.endswith("is lost")]
            check(lost, "the checker saw no loss: %s" % problems[:5])
            report("failover checker: the unsafe promotion lost %d acknowledged "
                   "jobs, all reported" % len(lost))
        finally:
            trio.close()
